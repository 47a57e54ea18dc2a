//! Golden renders of the LLVM IR renderer (CPU flavour, opaque pointers): the elementwise and the
//! reduce kernel of the CLANG goldens, checked into tests/golden/llvm/. A change in rendering shows up here as a
//! diff to review; `UPDATE_GOLDEN=1 cargo test --test llvm_golden` rewrites the files after a
//! deliberate change. Each golden is also compiled with every installed libLLVM >= 15.

mod common;

use common::{elementwise_add, reduce_sum};
use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::dtype::dtypes;
use rawgrad::ffi::llvm::{find_libraries, Llvm};
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::renderer::Renderer;

fn check(name: &str, sinks: &[UOp], file: &str) {
    let uops = linearize(sinks, None, true).unwrap();
    let src = LLVMRenderer::cpu(true).render(name, &uops).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/llvm")
        .join(file);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &src).unwrap();
    } else {
        let want =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(src, want, "rendered {name} differs from {}", path.display());
    }
    for lib in find_libraries().iter().filter(|l| l.major >= 15) {
        let llvm = Llvm::open(&lib.path).unwrap();
        llvm.compile_ir(&src, &llvm.host_triple(), "", "", true)
            .unwrap_or_else(|e| panic!("LLVM {}: {e}", llvm.version()));
    }
}

#[test]
fn elementwise_golden() {
    check("E_16", &elementwise_add(16, dtypes::float32), "E_16.ll");
}

#[test]
fn reduce_golden() {
    check(
        "r_4_8",
        &reduce_sum(4, 8, dtypes::float16, dtypes::float32),
        "r_4_8.ll",
    );
}
