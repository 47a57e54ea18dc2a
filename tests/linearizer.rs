//! The linearizer against the reference AST evaluator: every catalogue kernel, unoptimized, run
//! on the UOp interpreter (INTERP-like renderer: locals, shared memory, float4) and, rendered by
//! the CLANG renderer, compiled and run by the CLANG runtime. Plus kernel names, launch sizes,
//! estimates and golden C for two small kernels.

mod linearizer_support;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::Kernel;
use rawgrad::codegen::uops::UOps;
use rawgrad::dtype::dtypes;
use rawgrad::ops::{BinaryOps, ReduceOps};
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::shape::Node;

#[test]
fn catalogue_matches_reference_unoptimized() {
    let cc = clang();
    for case in catalogue::all() {
        check_case(&case, cc.as_ref());
    }
}

#[test]
fn reference_evaluator_is_right() {
    // a few values by hand, so the reference itself is checked
    let c = catalogue::sum_inner();
    let bufs = c.reference();
    let x = decode(&c.initial_buffers()[1], dtypes::float32);
    let got = decode(&bufs[0], dtypes::float32);
    for r in 0..8 {
        let want: f64 = (0..16).map(|k| x[r * 16 + k].as_f64()).sum();
        assert_eq!(got[r].as_f64(), want);
    }
    let c = catalogue::int_divmod();
    let b = c.initial_buffers();
    let (a, d) = (decode(&b[2], dtypes::int32), decode(&b[3], dtypes::int32));
    let out = c.reference();
    let (q, m) = (
        decode(&out[0], dtypes::int32),
        decode(&out[1], dtypes::int32),
    );
    for i in 0..29 {
        let (x, y) = (a[i].as_i128(), d[i].as_i128());
        assert_eq!(q[i].as_i128(), x / y, "{x} / {y}");
        assert_eq!(m[i].as_i128(), x % y, "{x} % {y}");
    }
    assert!(a.iter().any(|v| v.as_i128() < 0) && d.iter().any(|v| v.as_i128() < 0));
}

/// The name without its dedup suffix (`r_8_16n3` -> `r_8_16`): other tests in this binary may
/// linearize the same shape first.
fn undup(name: &str) -> &str {
    match name.rfind('n') {
        Some(p) if p + 1 < name.len() && name[p + 1..].bytes().all(|b| b.is_ascii_digit()) => {
            &name[..p]
        }
        _ => name,
    }
}

#[test]
fn kernel_names_and_launch_sizes() {
    let ir = InterpRenderer::new();
    let (_, p) = program(&catalogue::sum_inner(), &ir, &[]).unwrap();
    assert_eq!(undup(&p.name), "r_8_16");
    assert_eq!(
        p.global_size,
        Some(vec![Node::from(8i64), Node::from(1i64), Node::from(1i64)])
    );
    assert_eq!(p.local_size, Some(vec![Node::from(1i64); 3]));
    let r = ClangRenderer::new();
    let (_, p) = program(&catalogue::multi_output(), &r, &[]).unwrap();
    assert!(p.name.starts_with("E2_30"), "{}", p.name);
    assert_eq!(p.global_size, None);
    assert_eq!(p.outs, vec![0, 1]);
    // a symbolic kernel: the variable is a parameter and the launch size is symbolic
    let c = catalogue::symbolic_sum();
    let (_, p) = program(&c, &ir, &[]).unwrap();
    assert!(p.name.starts_with("r_4_<i[1-10]>"), "{}", p.name);
    assert!(
        p.function_name.starts_with("r_4_3Ci5B12D105D3E"),
        "{}",
        p.function_name
    );
    assert_eq!(p.vars.len(), 1);
    assert_eq!(p.vars[0].expr(), Some("i"));
    let (g, l) = p.launch_dims(&c.var_vals).unwrap();
    assert_eq!((g, l), (Some([4, 1, 1]), Some([1, 1, 1])));
    let c = catalogue::symbolic();
    let (_, p) = program(&c, &ir, &[]).unwrap();
    let (g, _) = p.launch_dims(&c.var_vals).unwrap();
    assert_eq!(g, Some([20, 1, 1]));
}

#[test]
fn estimates_follow_the_ast() {
    // a (8, 16) sum: 128 flops, 8*16*4 + 8*4 bytes
    let r = ClangRenderer::new();
    let (_, p) = program(&catalogue::sum_inner(), &r, &[]).unwrap();
    assert_eq!(p.op_estimate, Node::from(128i64));
    assert_eq!(p.mem_estimate, Node::from(8 * 16 * 4 + 8 * 4i64));
    // an elementwise add of 32 elements: 32 flops, 3 * 128 bytes
    let (_, p) = program(&catalogue::elementwise_add(), &r, &[]).unwrap();
    assert_eq!(p.op_estimate, Node::from(32i64));
    assert_eq!(p.mem_estimate, Node::from(3 * 128i64));
}

#[test]
fn clang_kernels_have_no_launch_dims_and_loop() {
    let r = ClangRenderer::new();
    let (_, p) = program(&catalogue::matmul(), &r, &[]).unwrap();
    assert!(p.uops.iter().all(|u| u.op() != UOps::SPECIAL));
    let ranges = p.uops.iter().filter(|u| u.op() == UOps::RANGE).count();
    assert_eq!(ranges, 3, "two global loops and the K loop");
    let ir = InterpRenderer::new();
    let (_, p) = program(&catalogue::matmul(), &ir, &[]).unwrap();
    let specials = p.uops.iter().filter(|u| u.op() == UOps::SPECIAL).count();
    assert_eq!(specials, 2);
}

fn golden(name: &str, src: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let src = format!("{src}\n");
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &src).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(src, want, "rendered kernel differs from {}", path.display());
}

/// The C of two small kernels (names fixed by rendering under a stable function name).
#[test]
fn golden_clang_kernels() {
    let r = ClangRenderer::new();
    let s = st(&[4, 4]);
    let add = store(
        bin(
            BinaryOps::ADD,
            ld(1, dtypes::float32, s.clone()),
            ld(2, dtypes::float32, s.clone()),
        ),
        0,
        dtypes::float32,
        s,
    );
    let mut k = Kernel::new(&[add], r.opts()).unwrap();
    let uops = k.linearize().unwrap().uops.clone();
    golden("linearizer_E_16.c", &r.render("E_16", &uops).unwrap());
    let a = ld(1, dtypes::float32, st(&[4, 8]));
    let sum = store(
        red(ReduceOps::SUM, a, &[1]),
        0,
        dtypes::float32,
        st(&[4, 1]),
    );
    let mut k = Kernel::new(&[sum], r.opts()).unwrap();
    let uops = k.linearize().unwrap().uops.clone();
    golden("linearizer_r_4_8.c", &r.render("r_4_8", &uops).unwrap());
}
