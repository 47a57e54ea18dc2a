//! The differential test of the optimizer: optimized kernels equal unoptimized ones (the
//! reference AST evaluator) on the same inputs.
//!
//! - every single opt of tinygrad 0.9.1's BEAM action space (`kernel::opts::actions`) that is
//!   legal on a kernel, on every kernel of the linearizer catalogue: on the INTERP-like renderer
//!   (locals, shared memory, float4), on CLANG (every legal variant of one kernel compiled as one
//!   C file) and on LLVM (each kernel under the hand-coded heuristics, and a sample of single
//!   opts, with every installed libLLVM);
//! - `hand_coded_optimizations` on the INTERP-like, a GPU-like (CUDA's limits) and the CLANG
//!   renderer;
//! - tensor cores: half (and bfloat16) matmuls under every TC action and the default TC choice,
//!   with the WMMA UOps executed by the interpreter in AMD's (gfx11 wmma) and NVIDIA's
//!   (mma.sync m16n8k16) lane layouts;
//! - under `AMD=1 MOCKGPU=1` / `NV=1 MOCKGPU=1`: local, group and tensor-core opts (and the
//!   heuristics) on the emulated GPU, compiled by its compiler and run by its runtime; under
//!   `NV=1` (or `AMD=1`) alone on a machine with the driver, the same on the real GPU.

mod linearizer_support;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::opts::actions;
use rawgrad::codegen::kernel::{Kernel, Opt, OptOps};
use rawgrad::codegen::program::ProgramSpec;
use rawgrad::device::registry::Compiled;
use rawgrad::device::{Compiler, Runtime};
use rawgrad::dtype::dtypes;
use rawgrad::helpers::getenv;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::{tensor_cores, Renderer, RendererOpts};
use rawgrad::runtime::cpu::clang::{ClangCompiler, ClangRuntime};

use OptOps::*;

fn heuristic(case: &Case, o: &RendererOpts) -> Kernel {
    let mut k = Kernel::new(&case.ast, o).unwrap();
    k.hand_coded_optimizations()
        .unwrap_or_else(|e| panic!("{}: hand_coded_optimizations: {e}", case.name));
    k
}

fn render(case: &Case, k: &mut Kernel, r: &dyn Renderer) -> ProgramSpec {
    k.to_program(r)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts))
}

fn check_interp(case: &Case, r: &dyn Renderer, k: &mut Kernel, want: &Buffers) {
    let p = render(case, k, r);
    let got = run_interp(case, &p)
        .unwrap_or_else(|e| panic!("{} {:?}: run: {e}", case.name, k.applied_opts));
    let what = format!("{} {:?}", r.opts().device, k.applied_opts);
    assert_outputs(case, want, &got, rtol_for(case).max(1e-5), &what);
}

/// The actions other than TC and NOLOCALS (those have their own tests).
fn plain_actions() -> Vec<Opt> {
    actions()
        .into_iter()
        .filter(|o| !matches!(o.op, TC | NOLOCALS))
        .collect()
}

#[test]
fn action_space_is_tinygrads() {
    let a = actions();
    assert_eq!(a.len(), 36 + 15 + 35 + 24 + 12 + 7 + 3 + 9);
    assert_eq!(a[0], Opt::new(UPCAST, 0, 0));
    assert_eq!(a[36], Opt::new(UNROLL, 0, 0));
    assert_eq!(a[a.len() - 10], Opt::new(TC, 0, 0));
    assert_eq!(a[a.len() - 1], Opt::new(TC, 8, 2));
}

#[test]
fn every_single_opt_on_interp() {
    let ir = InterpRenderer::new();
    let mut legal = 0;
    for case in catalogue::all() {
        let want = case.reference();
        for opt in plain_actions() {
            if let Some(mut k) = optimized(&case, ir.opts(), &[opt]) {
                check_interp(&case, &ir, &mut k, &want);
                legal += 1;
            }
        }
    }
    assert!(legal >= 200, "only {legal} legal single opts");
}

/// Compile every kernel of `progs` (all of one case) as one C file, run each, compare.
fn check_clang_batch(cc: &ClangCompiler, case: &Case, progs: &[(Vec<Opt>, ProgramSpec)]) {
    if progs.is_empty() {
        return;
    }
    let src: Vec<&str> = progs.iter().map(|(_, p)| p.src.as_str()).collect();
    let lib = cc
        .compile(&src.join("\n"))
        .unwrap_or_else(|e| panic!("{}: compile: {e}", case.name));
    let want = case.reference();
    for (opts, p) in progs {
        let prg = ClangRuntime.load(&p.function_name, &lib).unwrap();
        let got = run_program(&*prg, case, p, &rawgrad::device::HostAllocator)
            .unwrap_or_else(|e| panic!("{} {opts:?}: {e}", case.name));
        assert_outputs(
            case,
            &want,
            &got,
            rtol_for(case).max(1e-5),
            &format!("CLANG {opts:?}"),
        );
    }
}

#[test]
fn every_single_opt_and_heuristics_on_clang() {
    let Some(cc) = clang() else { return };
    let cr = ClangRenderer::new();
    for case in catalogue::all() {
        let mut progs = vec![];
        for opt in plain_actions() {
            if let Some(mut k) = optimized(&case, cr.opts(), &[opt]) {
                progs.push((vec![opt], render(&case, &mut k, &cr)));
            }
        }
        let mut k = heuristic(&case, cr.opts());
        progs.push((k.applied_opts.clone(), render(&case, &mut k, &cr)));
        check_clang_batch(&cc, &case, &progs);
    }
}

/// The heuristics on the INTERP-like renderer and on a GPU-like one (CUDA's limits and shared
/// memory, run by the interpreter).
#[test]
fn heuristics_on_interp_and_gpu_like() {
    let ir = InterpRenderer::new();
    let mut gpu = InterpRenderer::new();
    gpu.0.local_max = Some([1024, 1024, 64]);
    gpu.0.global_max = Some([i32::MAX as i64, 65535, 65535]);
    gpu.0.shared_max = 49152;
    for case in catalogue::all() {
        let want = case.reference();
        for r in [&ir, &gpu] {
            let mut k = heuristic(&case, r.opts());
            check_interp(&case, r, &mut k, &want);
        }
    }
}

// ------------------------------------------------------------------------------------------
// LLVM

#[test]
fn heuristics_and_opts_on_llvm() {
    use rawgrad::ffi::llvm::{find_libraries, Llvm, MIN_LLVM_MAJOR};
    use rawgrad::runtime::cpu::llvm::LLVMCompiler;
    let mut seen = vec![];
    for l in find_libraries() {
        if l.major < MIN_LLVM_MAJOR || seen.contains(&l.major) {
            continue;
        }
        seen.push(l.major);
        let Ok(c) = Llvm::open(&l.path).and_then(LLVMCompiler::with_llvm) else {
            println!("skipped LLVM {}", l.major);
            continue;
        };
        let r = c.renderer();
        let samples = [
            vec![Opt::new(UPCAST, 0, 4)],
            vec![Opt::new(UNROLL, 0, 4)],
            vec![Opt::new(UPCAST, 1, 0)],
            vec![Opt::new(PADTO, 0, 32)],
        ];
        for case in catalogue::all() {
            let want = case.reference();
            let mut ks = vec![heuristic(&case, r.opts())];
            ks.extend(samples.iter().filter_map(|s| optimized(&case, r.opts(), s)));
            for mut k in ks {
                let p = render(&case, &mut k, &r);
                let lib = c
                    .compile(&p.src)
                    .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
                let prg = c.runtime().load(&p.function_name, &lib).unwrap();
                let got = run_program(&*prg, &case, &p, &rawgrad::device::HostAllocator)
                    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                let what = format!("LLVM {} {:?}", l.major, k.applied_opts);
                assert_outputs(&case, &want, &got, rtol_for(&case).max(1e-4), &what);
            }
        }
    }
    if seen.is_empty() {
        println!("skipped: no libLLVM");
    }
}

// ------------------------------------------------------------------------------------------
// Tensor cores

/// An INTERP-like renderer that reports `device` (the WMMA lane layout the interpreter uses)
/// and offers its tensor cores.
fn tc_renderer(device: &str) -> InterpRenderer {
    let mut r = InterpRenderer::new();
    r.0.device = device.into();
    r.0.tensor_cores = match device {
        "AMD" => tensor_cores::amd("gfx1100"),
        _ => tensor_cores::cuda(89),
    };
    r
}

fn tc_cases(device: &str) -> Vec<Case> {
    let mut out = vec![
        catalogue::matmul_of("tc_half_32", dtypes::float16, (32, 32, 32), false),
        catalogue::matmul_of("tc_half_pad", dtypes::float16, (20, 24, 24), false),
        catalogue::matmul_of("tc_half_64x16", dtypes::float16, (64, 16, 48), false),
    ];
    if device == "AMD" {
        out.push(catalogue::matmul_of(
            "tc_half_out",
            dtypes::float16,
            (32, 16, 32),
            true,
        ));
    } else {
        out.push(catalogue::matmul_of(
            "tc_bf16",
            dtypes::bfloat16,
            (32, 16, 32),
            false,
        ));
    }
    out
}

/// Every TC action, TC with extra opts, and the default choice (`apply_tensor_cores`).
fn tc_variants(case: &Case, o: &RendererOpts) -> Vec<Kernel> {
    let mut out = vec![];
    for opt in actions().into_iter().filter(|a| a.op == TC) {
        out.extend(optimized(case, o, &[opt]));
        out.extend(optimized(case, o, &[opt, Opt::new(UPCAST, 0, 2)]));
        out.extend(optimized(case, o, &[opt, Opt::new(LOCAL, 0, 2)]));
    }
    let mut k = Kernel::new(&case.ast, o).unwrap();
    if k.apply_tensor_cores(1, None, 0, None).unwrap() {
        out.push(k);
    }
    out
}

fn check_tc_on_interp(device: &str) {
    let r = tc_renderer(device);
    for case in tc_cases(device) {
        let want = case.reference();
        let ks = tc_variants(&case, r.opts());
        assert!(
            ks.iter().any(|k| k.tensor_core.is_some()),
            "{}: no tensor core applied on {device}",
            case.name
        );
        for mut k in ks {
            let p = render(&case, &mut k, &r);
            assert!(
                p.uops
                    .iter()
                    .any(|u| u.op() == rawgrad::codegen::uops::UOps::WMMA),
                "{} {:?}: no WMMA",
                case.name,
                k.applied_opts
            );
            check_interp(&case, &r, &mut k, &want);
        }
    }
}

#[test]
fn tensor_cores_amd_layout_on_interp() {
    check_tc_on_interp("AMD");
}

#[test]
fn tensor_cores_nv_layout_on_interp() {
    check_tc_on_interp("NV");
}

// ------------------------------------------------------------------------------------------
// Emulated GPUs

fn check_on_device(dev: &Compiled, case: &Case, k: &mut Kernel, want: &Buffers) {
    let r = &*dev.renderer;
    let p = render(case, k, r);
    let lib = dev
        .compiler
        .compile(&p.src)
        .unwrap_or_else(|e| panic!("{} {:?}: compile: {e}", case.name, k.applied_opts));
    if k.tensor_core.is_some() && p.src.contains("nvptx64") && getenv("MOCKGPU", 0) != 0 {
        // NV's emulated code: the PTX in the program object runs mma.sync on the PTX interpreter
        // (on a real GPU the object is a cubin, whose SASS is not searched here)
        let mma = b"mma.sync.aligned.m16n8k16.row.col.f32";
        assert!(
            lib.windows(mma.len()).any(|w| w == mma),
            "{} {:?}: a tensor-core kernel without mma.sync in its PTX",
            case.name,
            k.applied_opts
        );
    }
    let prg = dev.runtime.load(&p.function_name, &lib).unwrap();
    let got = run_program(&*prg, case, &p, &*dev.allocator)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
    let what = format!("{} {:?}", dev.name, k.applied_opts);
    assert_outputs(case, want, &got, rtol_for(case).max(1e-5), &what);
}

#[test]
fn local_group_and_heuristic_opts_on_gpu() {
    let Some(dev) = gpu_under_test() else { return };
    let o = dev.renderer.opts().clone();
    let local: Vec<Opt> = plain_actions()
        .into_iter()
        .filter(|a| matches!(a.op, LOCAL | GROUP | GROUPTOP))
        .collect();
    let cases = [
        catalogue::elementwise_add(),
        catalogue::sum_inner(),
        catalogue::sum_outer(),
        catalogue::max_multi_axis(),
        catalogue::matmul(),
        catalogue::reduce_epilogue(),
        catalogue::multi_reduce(),
        catalogue::padded_sum(),
        catalogue::casts(),
    ];
    for case in cases {
        let want = case.reference();
        let mut ks: Vec<Kernel> = local
            .iter()
            .filter_map(|a| optimized(&case, &o, &[*a]))
            .collect();
        ks.push(heuristic(&case, &o));
        for mut k in ks {
            check_on_device(&dev, &case, &mut k, &want);
        }
    }
}

#[test]
fn tensor_cores_on_gpu() {
    let Some(dev) = gpu_under_test() else { return };
    let o = dev.renderer.opts().clone();
    assert!(
        !o.tensor_cores.is_empty(),
        "{} offers no tensor core",
        dev.name
    );
    for case in tc_cases(&o.device) {
        let want = case.reference();
        let ks = tc_variants(&case, &o);
        // the PTX renderer (MOCKGPU_CODE=ptx) offers half tensor cores only, as tinygrad's
        let offered = o
            .tensor_cores
            .iter()
            .any(|tc| case.name != "tc_bf16" || tc.dtype_in == dtypes::bfloat16);
        assert_eq!(
            ks.iter().any(|k| k.tensor_core.is_some()),
            offered,
            "{}",
            case.name
        );
        for mut k in ks {
            check_on_device(&dev, &case, &mut k, &want);
        }
    }
}

// ------------------------------------------------------------------------------------------
// The CPU tile (beyond 0.9.1: `codegen::kernel::cpu_tile`)

/// Values whose products and sums round (unlike `default_value`), so a regrouped sum would show.
fn rounding_value(b: usize, i: usize, _dt: rawgrad::dtype::DType) -> rawgrad::dtype::ConstValue {
    let x = (i.wrapping_mul(2_654_435_761) ^ (b * 40_503)) % 1_000_003;
    rawgrad::dtype::ConstValue::Float(x as f64 / 77_777.7 - 6.3)
}

/// `relu((m, k) @ (k, n) + bias)`: an epilogue after the reduce.
fn matmul_bias_relu(name: &'static str, m: i64, n: i64, k: i64) -> Case {
    use rawgrad::ops::{BinaryOps::*, ReduceOps::SUM};
    use rawgrad::shape::sints;
    let (va, vb) = catalogue::matmul_views(m, n, k);
    let mul = bin(MUL, ld(1, dtypes::float32, va), ld(2, dtypes::float32, vb));
    let bias_st = st(&[1, n, 1]).expand(&sints(&[m, n, 1])).unwrap();
    let biased = bin(ADD, red(SUM, mul, &[2]), ld(3, dtypes::float32, bias_st));
    let relu = bin(MAX, biased, cst(0.0, dtypes::float32, st(&[m, n, 1])));
    Case::new(name, vec![store(relu, 0, dtypes::float32, st(&[m, n, 1]))])
}

/// Matmuls the tile fits, with their output width `n`: plain, with a bias and ReLU after the
/// reduce, and batched (an outer output axis stays outside the swapped `n`, `m`); the `wide`
/// ones take 32 columns a row (AVX-512's first tile), the others 16 (its second).
fn tile_cases() -> Vec<(Case, usize)> {
    use rawgrad::ops::{BinaryOps::*, ReduceOps::SUM};
    use rawgrad::shape::sints;
    let plain = catalogue::matmul_of("matmul_tile", dtypes::float32, (24, 48, 36), true);
    let wide = catalogue::matmul_of("matmul_wide_tile", dtypes::float32, (24, 96, 36), true);
    let epilogue = matmul_bias_relu("matmul_bias_relu_tile", 16, 32, 20);
    let epilogue_wide = matmul_bias_relu("matmul_bias_relu_wide_tile", 16, 64, 20);
    // (3, 16, 20) @ (3, 20, 48)
    let full = sints(&[3, 16, 48, 20]);
    let va = st(&[3, 16, 20]).reshape(&sints(&[3, 16, 1, 20])).unwrap();
    let vb = st(&[3, 20, 48]).permute(&[0, 2, 1]).unwrap();
    let vb = vb.reshape(&sints(&[3, 1, 48, 20])).unwrap();
    let (va, vb) = (va.expand(&full).unwrap(), vb.expand(&full).unwrap());
    let mul = bin(MUL, ld(1, dtypes::float32, va), ld(2, dtypes::float32, vb));
    let batched = Case::new(
        "batched_matmul_tile",
        vec![store(
            red(SUM, mul, &[3]),
            0,
            dtypes::float32,
            st(&[3, 16, 48, 1]),
        )],
    );
    // a left-hand side behind two views (heads moved next to their width, as attention's output
    // before its projection): (4, 16, 5) -> (16, 4, 5) -> (16, 20), @ (20, 32)
    let va = st(&[4, 16, 5]).permute(&[1, 0, 2]).unwrap();
    let va = va.reshape(&sints(&[16, 1, 20])).unwrap();
    let va = va.expand(&sints(&[16, 32, 20])).unwrap();
    assert_eq!(va.views.len(), 2);
    let (_, vb) = catalogue::matmul_views(16, 32, 20);
    let mul = bin(MUL, ld(1, dtypes::float32, va), ld(2, dtypes::float32, vb));
    let two_view = Case::new(
        "two_view_lhs_matmul_tile",
        vec![store(
            red(SUM, mul, &[2]),
            0,
            dtypes::float32,
            st(&[16, 32, 1]),
        )],
    );
    vec![
        (plain.with_data(rounding_value), 48),
        (wide.with_data(rounding_value), 96),
        (epilogue.with_data(rounding_value), 32),
        (epilogue_wide.with_data(rounding_value), 64),
        (batched.with_data(rounding_value), 48),
        (two_view.with_data(rounding_value), 32),
    ]
}

/// This host's first tile that takes `n` output columns (more than one tile's worth).
fn tile_for(n: usize) -> rawgrad::codegen::kernel::cpu_tile::Tile {
    let tiles = rawgrad::codegen::kernel::cpu_tile::host_tiles();
    let fits = tiles.iter().find(|t| n % t.cols() == 0 && n > t.cols());
    *fits.unwrap_or_else(|| panic!("no tile of {tiles:?} takes {n} columns"))
}

/// The kernel under this host's tile for `n` columns (`cpu_tile_of_this_host_on_a_1024_matmul`
/// pins the opts).
fn tiled(case: &Case, n: usize, o: &RendererOpts) -> Kernel {
    let mut k = Kernel::new(&case.ast, o).unwrap();
    assert!(
        k.apply_cpu_tile().unwrap(),
        "{}: the CPU tile applies",
        case.name
    );
    assert!(k.wide_vectors);
    let want = tile_for(n).opts();
    let outer = usize::from(case.name.starts_with("batched"));
    let want: Vec<Opt> = (want.into_iter())
        .map(|o| match (o.op, o.axis, o.amt) {
            (UPCAST, Some(a), Some(amt)) => Opt::new(UPCAST, a + outer, amt),
            _ => o,
        })
        .collect();
    assert_eq!(k.applied_opts, want, "{}", case.name);
    k
}

/// A CPU device of these tests: name, renderer, compiler, runtime.
type CpuDevice = (
    String,
    Box<dyn Renderer>,
    Box<dyn Compiler>,
    Box<dyn Runtime>,
);

/// CLANG (when a C compiler exists) and LLVM with every installed libLLVM.
fn cpu_devices() -> Vec<CpuDevice> {
    use rawgrad::ffi::llvm::{find_libraries, Llvm, MIN_LLVM_MAJOR};
    use rawgrad::runtime::cpu::llvm::LLVMCompiler;
    let mut devices: Vec<CpuDevice> = vec![];
    if let Some(cc) = clang() {
        let (r, rt) = (Box::new(ClangRenderer::new()), Box::new(ClangRuntime));
        devices.push(("CLANG".into(), r, Box::new(cc), rt));
    }
    for l in find_libraries()
        .into_iter()
        .filter(|l| l.major >= MIN_LLVM_MAJOR)
    {
        if let Ok(c) = Llvm::open(&l.path).and_then(LLVMCompiler::with_llvm) {
            let (r, rt) = (Box::new(c.renderer()), Box::new(c.runtime()));
            devices.push((format!("LLVM {}", l.major), r, Box::new(c), rt));
        }
    }
    devices
}

/// `k` compiled and run on `dev`: its outputs, checked against `want` within the tolerance.
fn run_cpu(dev: &CpuDevice, case: &Case, k: &mut Kernel, want: &Buffers) -> Buffers {
    let (name, r, c, rt) = dev;
    let p = render(case, k, &**r);
    let what = format!("{name} {:?}", k.applied_opts);
    let lib = c
        .compile(&p.src)
        .unwrap_or_else(|e| panic!("{} {what}: compile: {e}", case.name));
    let prg = rt.load(&p.function_name, &lib).unwrap();
    let got = run_program(&*prg, case, &p, &rawgrad::device::HostAllocator)
        .unwrap_or_else(|e| panic!("{} {what}: {e}", case.name));
    assert_outputs(case, want, &got, rtol_for(case).max(1e-5), &what);
    got
}

/// The tile's kernel gives the unoptimized kernel's bits on INTERP, on CLANG and on every
/// libLLVM, and the reference within the suite's tolerance; its C source uses the tile's vectors
/// and stages the right-hand side's strip (so the staged kernels give the same bits).
#[test]
fn cpu_tile_equals_unoptimized_on_interp_clang_and_llvm() {
    let cr = ClangRenderer::new();
    let ir = InterpRenderer::new();
    let ir_cpu = InterpRenderer(RendererOpts {
        has_local: false,
        has_shared: false,
        ..interp_opts()
    });
    let devices = cpu_devices();
    for (case, n) in tile_cases() {
        let want = case.reference();
        let mut k = tiled(&case, n, cr.opts());
        let lanes = tile_for(n).lanes;
        let src = render(&case, &mut k, &cr).src;
        assert!(src.contains(&format!("float{lanes} ")), "{}", case.name);
        // the right-hand side's strip goes through the stack buffer (`codegen/uopgraph/stage.rs`)
        assert!(src.contains(" stage["), "{}: {src}", case.name);
        // INTERP runs the tiled kernel's UOps (built for a CPU's capabilities: no locals)
        let mut interp_outs = vec![];
        for mut k in [
            tiled(&case, n, ir_cpu.opts()),
            Kernel::new(&case.ast, ir.opts()).unwrap(),
        ] {
            let ir: &dyn Renderer = if k.wide_vectors { &ir_cpu } else { &ir };
            let p = render(&case, &mut k, ir);
            let got = run_interp(&case, &p).unwrap();
            assert_outputs(&case, &want, &got, rtol_for(&case), "INTERP");
            interp_outs.push(got);
        }
        assert_eq!(interp_outs[0], interp_outs[1], "{} on INTERP", case.name);
        for dev in &devices {
            let o = dev.1.opts();
            let outs: Vec<Buffers> = [tiled(&case, n, o), Kernel::new(&case.ast, o).unwrap()]
                .into_iter()
                .map(|mut k| run_cpu(dev, &case, &mut k, &want))
                .collect();
            assert_eq!(
                outs[0], outs[1],
                "{} on {}: tile and unoptimized bits",
                case.name, dev.0
            );
            assert_eq!(
                outs[0], interp_outs[0],
                "{} on {}: INTERP's bits",
                case.name, dev.0
            );
        }
    }
}

/// Where the tile does not fit it leaves the kernel alone: a GPU-like renderer, B transposed
/// (no unit stride on the output's last axis), an integer matmul, too small an output.
#[test]
fn cpu_tile_only_where_it_fits() {
    use rawgrad::ops::{BinaryOps::MUL, ReduceOps::SUM};
    use rawgrad::shape::sints;
    let cr = ClangRenderer::new();
    let ir = InterpRenderer::new();
    let mm = catalogue::matmul_of("mm", dtypes::float32, (24, 48, 36), true);
    let none = |case: &Case, o: &RendererOpts| {
        let mut k = Kernel::new(&case.ast, o).unwrap();
        assert!(!k.apply_cpu_tile().unwrap(), "{}", case.name);
        assert!(
            k.applied_opts.is_empty() && !k.wide_vectors,
            "{}",
            case.name
        );
    };
    none(&mm, ir.opts());
    let (va, _) = catalogue::matmul_views(24, 48, 36);
    let vb_t = st(&[48, 36]).reshape(&sints(&[1, 48, 36])).unwrap();
    let vb_t = vb_t.expand(&sints(&[24, 48, 36])).unwrap();
    let mul = bin(
        MUL,
        ld(1, dtypes::float32, va),
        ld(2, dtypes::float32, vb_t),
    );
    let r = red(SUM, mul, &[2]);
    none(
        &Case::new(
            "mm_bt",
            vec![store(r, 0, dtypes::float32, st(&[24, 48, 1]))],
        ),
        cr.opts(),
    );
    none(
        &catalogue::matmul_of("mm_int", dtypes::int32, (24, 48, 36), true),
        cr.opts(),
    );
    none(
        &catalogue::matmul_of("mm_small", dtypes::float32, (24, 16, 36), true),
        cr.opts(),
    );
}

// ------------------------------------------------------------------------------------------
// The CPU reduce opts (beyond 0.9.1: `codegen::kernel::cpu_reduce`)

/// Mostly `rounding_value`, with NaN, infinities and zeros of both signs mixed in (about one value
/// in twelve), and every fourth row of 20 made of zeros of alternating sign.
fn reduce_value(b: usize, i: usize, dt: rawgrad::dtype::DType) -> rawgrad::dtype::ConstValue {
    use rawgrad::dtype::ConstValue::Float;
    const V: [f64; 5] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0];
    let h = i.wrapping_mul(2_654_435_761) % 61;
    if (i / 20) % 4 == 3 {
        Float(if i % 2 == 0 { -0.0 } else { 0.0 })
    } else if h < V.len() {
        Float(V[h])
    } else {
        rounding_value(b, i, dt)
    }
}

/// Reductions the CPU reduce opts fit: a row sum, a column sum, a row max over NaN, infinities
/// and signed zeros, a sum of products over two of three axes with an epilogue, an int max, a
/// row sum of a padded input, a matmul too small for 0.9.1's upcasts and a mean (a row sum times
/// a broadcast constant, which 0.9.1 upcasts by 4).
fn reduce_cases() -> Vec<Case> {
    use rawgrad::ops::{
        BinaryOps::{ADD, MUL},
        ReduceOps::{MAX, SUM},
        UnaryOps::SQRT,
    };
    use rawgrad::shape::Node;
    let f = dtypes::float32;
    let (a, b) = (ld(1, f, st(&[4, 16, 6])), ld(2, f, st(&[4, 16, 6])));
    let two_axes = red(SUM, bin(MUL, a, b), &[0, 2]);
    let epilogue = un(SQRT, bin(ADD, two_axes, ld(3, f, st(&[1, 16, 1]))));
    let z = |a: i64, b: i64| (Node::from(a), Node::from(b));
    let padded = st(&[12, 6]).pad(&[z(0, 0), z(2, 1)]).unwrap();
    let one = |name, x, dt, out: &[i64]| Case::new(name, vec![store(x, 0, dt, st(out))]);
    let int = dtypes::int32;
    let bcast = st(&[1, 1])
        .expand(&[Node::from(1024), Node::from(1)])
        .unwrap();
    let scale = cst(1.0 / 12.0, f, bcast);
    vec![
        one(
            "row_sum",
            red(SUM, ld(1, f, st(&[16, 36])), &[1]),
            f,
            &[16, 1],
        ),
        one(
            "col_sum",
            red(SUM, ld(1, f, st(&[36, 16])), &[0]),
            f,
            &[1, 16],
        ),
        one(
            "row_max",
            red(MAX, ld(1, f, st(&[24, 20])), &[1]),
            f,
            &[24, 1],
        ),
        one("sum_two_axes", epilogue, f, &[1, 16, 1]),
        one(
            "int_max",
            red(MAX, ld(1, int, st(&[8, 12])), &[1]),
            int,
            &[8, 1],
        ),
        one(
            "padded_row_sum",
            red(SUM, ld(1, f, padded), &[1]),
            f,
            &[12, 1],
        ),
        // a mean: 0.9.1 upcasts the rows by 4 only because the constant broadcasts them
        one(
            "scaled_row_sum",
            bin(MUL, red(SUM, ld(1, f, st(&[1024, 12])), &[1]), scale),
            f,
            &[1024, 1],
        ),
    ]
    .into_iter()
    .map(|c| {
        if c.name == "int_max" {
            c
        } else {
            c.with_data(reduce_value)
        }
    })
    .collect()
}

/// The CPU reduce opts (the heuristic's pick for CLANG's renderer) give the unoptimized kernel's
/// bits on INTERP, CLANG and every libLLVM, and the reference within the suite's tolerance; a
/// matmul with an output large enough for 0.9.1's upcasts of broadcast axes keeps those.
#[test]
fn cpu_reduce_equals_unoptimized_on_interp_clang_and_llvm() {
    let (cr, ir) = (ClangRenderer::new(), InterpRenderer::new());
    let devices = cpu_devices();
    for case in reduce_cases() {
        let want = case.reference();
        let mut k = Kernel::new(&case.ast, cr.opts()).unwrap();
        assert!(k.apply_cpu_reduce().unwrap(), "{}: applies", case.name);
        let opts = k.applied_opts.clone();
        assert!(
            opts.iter().any(|o| o.op == UPCAST && o.amt >= Some(4)),
            "{} {opts:?}",
            case.name
        );
        if case.name == "scaled_row_sum" {
            // 8 rows, not 0.9.1's 4 for the constant
            assert!(
                opts.iter().any(|o| o.op == UPCAST && o.amt == Some(8)),
                "{opts:?}"
            );
        }
        let mut runs: Vec<(String, Buffers)> = vec![];
        for o in [opts.as_slice(), &[]] {
            let mut k = optimized(&case, ir.opts(), o).unwrap();
            check_interp(&case, &ir, &mut k, &want);
            let p = render(&case, &mut k, &ir);
            runs.push(("INTERP".into(), run_interp(&case, &p).unwrap()));
        }
        for dev in &devices {
            for o in [opts.as_slice(), &[]] {
                let mut k = optimized(&case, dev.1.opts(), o).unwrap();
                runs.push((dev.0.clone(), run_cpu(dev, &case, &mut k, &want)));
            }
        }
        for pair in runs.chunks(2) {
            assert_eq!(
                pair[0].1, pair[1].1,
                "{} on {}: reduce opts and unoptimized bits",
                case.name, pair[0].0
            );
        }
    }
    let mm = catalogue::matmul_of("mm_32x48", dtypes::float32, (32, 48, 16), true);
    let mut k = Kernel::new(&mm.ast, cr.opts()).unwrap();
    assert!(!k.apply_cpu_reduce().unwrap() && k.applied_opts.is_empty());
}
