#!/usr/bin/env bash
# Builds, here, everything the first NV run needs on a GPU host without a Rust toolchain, and
# copies it into .nvrun/ (ignored by git; the device call carries it):
#   .nvrun/nv_first_run   the step-by-step bring-up + first submissions (examples/nv_first_run.rs)
#   .nvrun/rawgrad-tests  the library test binary (run with the filter runtime::nv / driver::nv)
#   .nvrun/bench          tools/bench, when this checkout has it (the dispatch benchmark)
#   .nvrun/fixtures/      the sm_89/sm_90 cubins the kernels load (tests/fixtures/cubin)
#   .nvrun/extra/*.gz     the engine checks, stripped and gzipped: examples/quickstart and the
#                         integration tests jit, tensor_graph_fuzz, kernel_opts_diff, beam_search
#   .nvrun/run.sh         the script to run there
# Release mode by default; NVRUN_PROFILE=dev builds the debug profile (for the emulator check).
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=${NVRUN_PROFILE:-release}
OUT=.nvrun
rm -rf "$OUT"
mkdir -p "$OUT/fixtures"

cargo_flags=()
if [ "$PROFILE" = release ]; then cargo_flags+=(--release); fi

echo "[prepare] building nv_first_run ($PROFILE)"
cargo build "${cargo_flags[@]}" --example nv_first_run
dir=target/$([ "$PROFILE" = release ] && echo release || echo debug)
cp "$dir/examples/nv_first_run" "$OUT/"

echo "[prepare] building the library test binary ($PROFILE)"
lib_test=$(cargo test "${cargo_flags[@]}" --lib --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["executable"])' | tail -n 1)
if [ -z "$lib_test" ]; then echo "[prepare] could not find the lib test binary" >&2; exit 1; fi
cp "$lib_test" "$OUT/rawgrad-tests"

if grep -q '^name = "bench"' Cargo.toml 2>/dev/null || [ -f tools/bench/Cargo.toml ] || [ -f src/bin/bench.rs ]; then
  echo "[prepare] building bench"
  if cargo build "${cargo_flags[@]}" --bin bench 2>/dev/null; then cp "$dir/bench" "$OUT/"; fi
else
  echo "[prepare] no bench in this checkout (skipped)"
fi

echo "[prepare] building the engine checks (quickstart; jit, graph fuzz, opts diff, beam tests)"
cargo build "${cargo_flags[@]}" --example quickstart
mkdir -p "$OUT/extra"
strip --strip-all -o "$OUT/extra/quickstart" "$dir/examples/quickstart"
gzip -9 "$OUT/extra/quickstart"
cargo test "${cargo_flags[@]}" --test jit --test tensor_graph_fuzz --test kernel_opts_diff \
  --test beam_search --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])' \
  | while read -r name exe; do
      strip --strip-all -o "$OUT/extra/$name" "$exe" && gzip -9 "$OUT/extra/$name"
    done
# The gzipped extras are unpacked by run.sh; the carried tree must stay under 64 MiB.
cp tests/fixtures/cubin/fill_sm*.cubin tests/fixtures/cubin/add_n_sm*.cubin "$OUT/fixtures/"
cp tools/nv-first-run/run.sh "$OUT/run.sh"
chmod +x "$OUT"/run.sh "$OUT"/nv_first_run "$OUT"/rawgrad-tests
# The device call carries at most 64 MiB: drop the debug info.
for b in "$OUT"/nv_first_run "$OUT"/rawgrad-tests "$OUT"/bench; do
  if [ -f "$b" ] && command -v strip >/dev/null 2>&1; then strip --strip-debug "$b"; fi
done
du -sh "$OUT"
ls -l "$OUT" "$OUT/fixtures" "$OUT/extra"
echo "[prepare] glibc here: $(ldd --version 2>&1 | head -n 1)"
if command -v objdump >/dev/null 2>&1; then
  need=$(objdump -T "$OUT/nv_first_run" "$OUT/rawgrad-tests" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
  echo "[prepare] the binaries need ${need:-an unknown glibc} or newer on the GPU host"
fi
