//! The LLVM device needs no C compiler: with `PATH` empty and `CLANG_CC` naming a missing tool
//! (for the whole process: this binary holds one test), CLANG cannot open, and LLVM still
//! compiles (the disk cache bypassed), loads and runs kernels that call libm, giving INTERP's
//! bits. Skipped, and said so, without libLLVM.

use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::Tensor;

fn compute(dev: &str) -> Vec<u32> {
    let _g = Context::with_str(&[("DEVICE", dev)]);
    let x = Tensor::from_vec(
        (0..1000).map(|i| i as f32 * 0.01 - 4.0).collect(),
        &[10, 100],
    )
    .unwrap();
    let y = x
        .exp()
        .unwrap()
        .sin()
        .unwrap()
        .mul(&x)
        .unwrap()
        .sum_axis(1, false)
        .unwrap();
    let z = y.sqrt().unwrap().add(y.max().unwrap()).unwrap();
    z.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn llvm_runs_with_no_c_compiler_on_the_machine() {
    std::env::set_var("PATH", "");
    std::env::set_var("CLANG_CC", "/nonexistent/rawgrad-cc");
    std::env::set_var("DISABLE_COMPILER_CACHE", "1");
    let Err(e) = open_device("CLANG") else {
        panic!("CLANG opened with no C compiler on the machine");
    };
    println!("CLANG: {e}");
    if let Err(e) = open_device("LLVM") {
        return println!("skipped: {e}");
    }
    assert_eq!(compute("LLVM"), compute("INTERP"));
}
