//! The opts the engine applies by default (`get_kernel`: tensor cores, else
//! `hand_coded_optimizations`) match tinygrad 0.9.1's choices. Each expected list was printed by
//! tinygrad v0.9.1 itself (`Linearizer(*ast, opts=R)`, `required_optimizations()`, then
//! `apply_tensor_cores(1)` or `hand_coded_optimizations()`) for the same Tensor expression, with
//! `R` = `ClangRenderer()`, `CUDARenderer("sm_80")` and `AMDRenderer()`; the shapes are the full
//! shapes after the opts.

mod tensor_common;

use rawgrad::codegen::kernel::Kernel;
use rawgrad::dtype::dtypes;
use rawgrad::hw::amd::targets::GFX1100;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::cuda::CUDARenderer;
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::renderer::{Renderer, RendererOpts};
use rawgrad::{Axis, Tensor};
use tensor_common::*;

fn renderers() -> Vec<(&'static str, RendererOpts)> {
    vec![
        ("CLANG", ClangRenderer::new().opts().clone()),
        ("CUDA", CUDARenderer::new(80).opts().clone()),
        ("AMD", LLVMRenderer::amdgpu(&GFX1100, true).opts().clone()),
    ]
}

/// (full shape, applied opts) for the only kernel of `t` on each renderer.
fn chosen(t: &Tensor) -> Vec<(String, Vec<i64>, String)> {
    let sched = check(&[t], &[], true);
    assert_eq!(sched.len(), 1, "one kernel");
    let mut out = vec![];
    for (name, o) in renderers() {
        let mut k = Kernel::new(&sched[0].ast, &o).unwrap();
        k.required_optimizations().unwrap();
        k.apply_default_opts().unwrap();
        let shape = k.full_shape().iter().map(|s| s.as_int().unwrap()).collect();
        let opts: Vec<String> = k.applied_opts.iter().map(|x| x.to_string()).collect();
        out.push((name.to_string(), shape, format!("[{}]", opts.join(", "))));
    }
    out
}

fn u(axis: usize, amt: usize) -> String {
    format!("Opt(op=OptOps.UPCAST, axis={axis}, amt={amt})")
}
fn un(axis: usize, amt: usize) -> String {
    format!("Opt(op=OptOps.UNROLL, axis={axis}, amt={amt})")
}
fn l(axis: usize, amt: usize) -> String {
    format!("Opt(op=OptOps.LOCAL, axis={axis}, amt={amt})")
}
fn gt(amt: usize) -> String {
    format!("Opt(op=OptOps.GROUPTOP, axis=0, amt={amt})")
}
fn list(xs: &[String]) -> String {
    format!("[{}]", xs.join(", "))
}

/// Compare with 0.9.1: `want` is (renderer, shape, opts) for CLANG, CUDA, AMD.
fn expect(what: &str, t: &Tensor, want: &[(&str, &[i64], String)]) {
    let got = chosen(t);
    for ((gn, gs, go), (wn, ws, wo)) in got.iter().zip(want) {
        assert_eq!(gn, wn);
        assert_eq!((gs.as_slice(), go), (*ws, wo), "{what} on {gn}");
    }
}

fn mm(a: &[usize], b: &[usize]) -> Tensor {
    empty(a).matmul(&empty(b)).unwrap()
}

#[test]
fn matmuls() {
    let _d = clang();
    let gpu = list(&[u(1, 4), u(0, 4), un(0, 4), l(0, 8), l(1, 16)]);
    let cpu = list(&[u(1, 4), u(0, 4), un(0, 4)]);
    expect(
        "matmul 1024",
        &mm(&[1024, 1024], &[1024, 1024]),
        &[
            ("CLANG", &[256, 256, 256, 4, 4, 4], cpu.clone()),
            ("CUDA", &[32, 16, 8, 16, 256, 4, 4, 4], gpu.clone()),
            ("AMD", &[32, 16, 8, 16, 256, 4, 4, 4], gpu.clone()),
        ],
    );
    expect(
        "matmul 64",
        &mm(&[64, 64], &[64, 64]),
        &[
            ("CLANG", &[16, 16, 16, 4, 4, 4], cpu),
            ("CUDA", &[2, 8, 16, 16, 4, 4, 4], gpu.clone()),
            ("AMD", &[2, 8, 16, 16, 4, 4, 4], gpu),
        ],
    );
    expect(
        "matmul 16",
        &mm(&[16, 16], &[16, 16]),
        &[
            ("CLANG", &[16, 16, 16], list(&[un(0, 0)])),
            ("CUDA", &[16, 16, 16], list(&[gt(16)])),
            ("AMD", &[16, 16, 16], list(&[gt(16)])),
        ],
    );
}

#[test]
fn matvecs() {
    let _d = clang();
    let mv = list(&[
        "Opt(op=OptOps.GROUP, axis=0, amt=8)".into(),
        l(0, 4),
        u(0, 4),
    ]);
    let cpu = list(&[u(0, 4), un(0, 4)]);
    for (what, t) in [
        ("vector @ matrix", mm(&[1, 1024], &[1024, 1024])),
        ("matrix @ vector", mm(&[1024, 1024], &[1024, 1])),
    ] {
        expect(
            what,
            &t,
            &[
                ("CLANG", &[256, 256, 4, 4], cpu.clone()),
                ("CUDA", &[64, 4, 8, 128, 4], mv.clone()),
                ("AMD", &[64, 4, 8, 128, 4], mv.clone()),
            ],
        );
    }
}

#[test]
fn reductions() {
    let _d = clang();
    let sum = |s: &[usize], ax: isize| empty(s).sum_axis(Axis::Dims(vec![ax]), false).unwrap();
    expect(
        "sum 4096",
        &empty(&[4096]).sum().unwrap(),
        &[
            ("CLANG", &[1024, 4], list(&[un(0, 4)])),
            ("CUDA", &[256, 16], list(&[gt(256)])),
            ("AMD", &[256, 16], list(&[gt(256)])),
        ],
    );
    expect(
        "row sum 4096x37",
        &sum(&[4096, 37], 1),
        &[
            ("CLANG", &[4096, 37], list(&[])),
            ("CUDA", &[128, 32, 37], list(&[l(0, 32)])),
            ("AMD", &[128, 32, 37], list(&[l(0, 32)])),
        ],
    );
    expect(
        "column sum 64x256",
        &sum(&[64, 256], 0),
        &[
            ("CLANG", &[256, 16, 4], list(&[un(0, 4)])),
            ("CUDA", &[256, 16, 4], list(&[gt(16)])),
            ("AMD", &[256, 16, 4], list(&[gt(16)])),
        ],
    );
    expect(
        "max 32x64",
        &empty(&[32, 64])
            .max_axis(Axis::Dims(vec![1]), false)
            .unwrap(),
        &[
            ("CLANG", &[32, 16, 4], list(&[un(0, 4)])),
            ("CUDA", &[32, 16, 4], list(&[gt(16)])),
            ("AMD", &[32, 16, 4], list(&[gt(16)])),
        ],
    );
}

#[test]
fn elementwise() {
    let _d = clang();
    let add = empty(&[256, 256]).add(empty(&[256, 256])).unwrap();
    let gpu = list(&[u(0, 4), l(0, 32)]);
    expect(
        "add 256x256",
        &add,
        &[
            ("CLANG", &[16384, 4], list(&[u(0, 4)])),
            ("CUDA", &[512, 32, 4], gpu.clone()),
            ("AMD", &[512, 32, 4], gpu),
        ],
    );
    let pad = empty(&[4, 5])
        .pad(&[Some((1, 1)), Some((1, 1))])
        .unwrap()
        .exp()
        .unwrap();
    let masked = list(&[u(1, 0), u(0, 0)]);
    expect(
        "padded exp",
        &pad,
        &[
            ("CLANG", &[7, 6], masked.clone()),
            ("CUDA", &[7, 6], masked.clone()),
            ("AMD", &[7, 6], masked),
        ],
    );
    let bcast = empty(&[64, 1]).add(empty(&[1, 128])).unwrap();
    let gpu = list(&[u(1, 4), u(0, 4), l(0, 8), l(1, 16)]);
    expect(
        "broadcast add",
        &bcast,
        &[
            ("CLANG", &[16, 32, 4, 4], list(&[u(1, 4), u(0, 4)])),
            ("CUDA", &[2, 2, 8, 16, 4, 4], gpu.clone()),
            ("AMD", &[2, 2, 8, 16, 4, 4], gpu),
        ],
    );
    let small = empty(&[7]).mul(2.0).unwrap();
    expect(
        "7 elements",
        &small,
        &[
            ("CLANG", &[7], list(&[])),
            ("CUDA", &[7], list(&[])),
            ("AMD", &[7], list(&[])),
        ],
    );
}

#[test]
fn conv2d() {
    let _d = clang();
    let x = empty(&[1, 4, 16, 16]);
    let w = empty(&[8, 4, 3, 3]);
    let c = x.conv2d(&w, None).unwrap();
    let cpu = list(&[u(0, 4), un(2, 0), un(1, 0)]);
    let gpu = list(&[u(0, 4), un(2, 0), un(1, 0), l(0, 2), l(0, 2), l(1, 2)]);
    expect(
        "conv2d",
        &c,
        &[
            ("CLANG", &[2, 14, 14, 4, 4, 3, 3], cpu),
            ("CUDA", &[7, 7, 2, 2, 2, 4, 4, 3, 3], gpu.clone()),
            ("AMD", &[7, 7, 2, 2, 2, 4, 4, 3, 3], gpu),
        ],
    );
}

#[test]
fn half_matmul_uses_tensor_cores() {
    let _d = clang();
    let h = |s: &[usize]| empty_dt(s, dtypes::float16);
    let tc = "Opt(op=OptOps.TC, axis=0, amt=0)".to_string();
    let cpu = list(&[u(1, 4), u(0, 4), un(0, 4)]);
    for (what, t) in [
        ("half @ half", h(&[64, 64]).matmul(&h(&[64, 64])).unwrap()),
        (
            "(half @ half).float()",
            h(&[64, 64])
                .matmul(&h(&[64, 64]))
                .unwrap()
                .cast(dtypes::float32)
                .unwrap(),
        ),
    ] {
        expect(
            what,
            &t,
            &[
                ("CLANG", &[16, 16, 16, 4, 4, 4], cpu.clone()),
                (
                    "CUDA",
                    &[2, 2, 2, 2, 2, 2, 4, 16, 4, 4, 4],
                    list(&[tc.clone(), u(0, 4), u(0, 4), l(0, 2)]),
                ),
                (
                    "AMD",
                    &[8, 2, 2, 4, 16, 8, 4, 4],
                    list(&[tc.clone(), u(0, 4), u(0, 4)]),
                ),
            ],
        );
    }
}

#[test]
fn get_kernel_applies_them_unless_noopt() {
    use rawgrad::engine::realize::get_kernel;
    use rawgrad::helpers::Context;
    let _d = clang();
    let t = mm(&[64, 64], &[64, 64]);
    let sched = check(&[&t], &[], true);
    let r = ClangRenderer::new();
    // beyond 0.9.1: a float32 matmul on CLANG gets the CPU tile; CPU_TILE=0 gives 0.9.1's opts
    let k = get_kernel(&r, &sched[0].ast).unwrap();
    let tile = rawgrad::codegen::kernel::cpu_tile::host_tile().opts();
    assert_eq!(k.applied_opts, tile, "{:?}", k.applied_opts);
    assert!(k.wide_vectors);
    let off = Context::new(&[("CPU_TILE", 0)]);
    let k = get_kernel(&r, &sched[0].ast).unwrap();
    let want = list(&[u(1, 4), u(0, 4), un(0, 4)]);
    let got: Vec<String> = k.applied_opts.iter().map(|x| x.to_string()).collect();
    assert_eq!(format!("[{}]", got.join(", ")), want);
    assert!(!k.wide_vectors);
    drop(off);
    let _n = Context::new(&[("NOOPT", 1)]);
    let k = get_kernel(&r, &sched[0].ast).unwrap();
    assert!(k.applied_opts.is_empty(), "{:?}", k.applied_opts);
    // TC=0 turns the tensor cores off: a half matmul on CUDA gets the heuristics instead
    drop(_n);
    let h = |s: &[usize]| empty_dt(s, dtypes::float16);
    let t = h(&[64, 64]).matmul(&h(&[64, 64])).unwrap();
    let sched = check(&[&t], &[], true);
    let cuda = CUDARenderer::new(80);
    let k = get_kernel(&cuda, &sched[0].ast).unwrap();
    assert!(k.tensor_core.is_some());
    let _t = Context::new(&[("TC", 0)]);
    let k = get_kernel(&cuda, &sched[0].ast).unwrap();
    assert!(k.tensor_core.is_none());
    assert!(!k.applied_opts.is_empty());
}

/// Beyond 0.9.1: on CLANG and LLVM, W2's row sum (4096x4096 over the last axis) gets the CPU
/// reduce opts (8 rows at once, each its own accumulator, and 0.9.1's UNROLL of the reduce dim);
/// `CPU_REDUCE=0` gives 0.9.1's lone UNROLL; a GPU renderer gets 0.9.1's opts either way.
#[test]
fn get_kernel_gives_cpu_reductions_several_accumulators() {
    use rawgrad::engine::realize::get_kernel;
    use rawgrad::helpers::Context;
    let _d = clang();
    let t = empty(&[4096, 4096])
        .sum_axis(Axis::Dims(vec![-1]), false)
        .unwrap();
    let sched = check(&[&t], &[], true);
    let opts = |k: &Kernel| {
        let o: Vec<String> = k.applied_opts.iter().map(|x| x.to_string()).collect();
        format!("[{}]", o.join(", "))
    };
    let shape =
        |k: &Kernel| -> Vec<i64> { k.full_shape().iter().map(|s| s.as_int().unwrap()).collect() };
    let cpu: [&dyn Renderer; 2] = [&ClangRenderer::new(), &LLVMRenderer::cpu(false)];
    for r in cpu {
        let k = get_kernel(r, &sched[0].ast).unwrap();
        assert_eq!(opts(&k), list(&[u(0, 8), un(0, 4)]));
        assert_eq!(shape(&k), [512, 1024, 8, 4]);
        let _off = Context::new(&[("CPU_REDUCE", 0)]);
        let k = get_kernel(r, &sched[0].ast).unwrap();
        assert_eq!(opts(&k), list(&[un(0, 4)]));
        assert_eq!(shape(&k), [4096, 1024, 4]);
    }
    let cuda = CUDARenderer::new(80);
    let mut want = Kernel::new(&sched[0].ast, cuda.opts()).unwrap();
    want.required_optimizations().unwrap();
    want.apply_default_opts().unwrap();
    let k = get_kernel(&cuda, &sched[0].ast).unwrap();
    assert_eq!(opts(&k), opts(&want));
}
