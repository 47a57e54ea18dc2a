#!/bin/sh
# Rewrites README.md's layout section (between the layout:begin/end markers) from the tree: each
# module folder of src/ with the first sentence of its module doc, then tests/, examples/ and
# tools/. The rendering lives in tests/layers_support/readme.rs (one implementation: the test
# `readme_layout_matches_the_tree` compares the README with it).
set -e
cd "$(dirname "$0")/.."
exec cargo test --test layers -- --ignored --exact regenerate_readme_layout --nocapture
