//! Golden renders: the CLANG source of a small elementwise, a small reduce and a symbolic bfloat16
//! kernel, checked into tests/golden/. A change in rendering shows up here as a diff to review;
//! `UPDATE_GOLDEN=1 cargo test --test clang_golden` rewrites the files after a deliberate change.

mod common;

use common::*;
use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::dtype::dtypes;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;

fn check(name: &str, sinks: &[UOp], file: &str) {
    let uops = linearize(sinks, None, true).unwrap();
    let src = ClangRenderer::new().render(name, &uops).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &src).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(src, want, "rendered {name} differs from {}", path.display());
}

#[test]
fn elementwise_golden() {
    check(
        "E_16",
        &elementwise_add(16, dtypes::float32),
        "clang_E_16.c",
    );
}

#[test]
fn reduce_golden() {
    check(
        "r_4_8",
        &reduce_sum(4, 8, dtypes::float16, dtypes::float32),
        "clang_r_4_8.c",
    );
}

#[test]
fn symbolic_bfloat16_golden() {
    check("E_n", &symbolic(dtypes::bfloat16), "clang_E_n_bf16.c");
}
