//! gfx12 (RDNA4) tensor cores on the emulated gfx1201 (`MOCKGPU_ARCH=gfx1201`; the emulated
//! gfx12 runs serialized UOps, so its WMMA UOps execute on the UOp interpreter's gfx12 lane
//! layout). Beyond tinygrad 0.9.1, which has no gfx12 tensor core.
//!
//! - every TC action (and TC with an extra upcast or local, and the default TC choice) on half
//!   and bfloat16 matmuls with pseudo-random inputs, against the same matmul without tensor
//!   cores (unoptimized, and the hand-coded heuristics under `TC=0`) and against the exact
//!   product within the error bound of summing in the accumulation dtype;
//! - the kernel the default opts (TC, then the heuristics) pick for a half matmul uses gfx12's
//!   8-wide WMMA.
//!
//! The knobs are this thread's (`Context`) and the device is opened once per process, so every
//! test of this file sees the same emulated gfx1201 whatever the environment says.

mod linearizer_support;

use std::sync::Arc;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::opts::actions;
use rawgrad::codegen::kernel::{Kernel, Opt, OptOps};
use rawgrad::codegen::program::ProgramSpec;
use rawgrad::codegen::uops::{UArg, UOp, UOps};
use rawgrad::device::registry::Compiled;
use rawgrad::dtype::{dtypes, ConstValue, DType, Scalar};
use rawgrad::helpers::Context;
use rawgrad::renderer::{tensor_cores, RendererOpts};
use rawgrad::runtime::builtin::open_device;

/// The emulated gfx1201 (the returned guard keeps this thread's knobs).
fn gfx1201() -> (Context, Arc<Compiled>) {
    let ctx = Context::with_str(&[
        ("MOCKGPU", "1"),
        ("MOCKGPU_ARCH", "gfx1201"),
        ("MOCKGPU_CODE", "uops"),
    ]);
    let dev = open_device("AMD").unwrap_or_else(|e| panic!("emulated gfx1201: {e}"));
    assert_eq!(
        dev.renderer.opts().tensor_cores,
        tensor_cores::amd("gfx1201"),
        "the emulated AMD device is not a gfx1201"
    );
    (ctx, dev)
}

/// A pseudo-random value in [-2, 2] for element `i` of buffer `b` (splitmix64 of both).
fn random_value(b: usize, i: usize, _dt: DType) -> ConstValue {
    let mut z = (b as u64) << 32 ^ i as u64 ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ConstValue::Float(((z % 2001) as f64 - 1000.0) / 500.0)
}

struct Mm {
    case: Case,
    mnk: (usize, usize, usize),
}

fn mm(name: &'static str, dt: DType, (m, n, k): (usize, usize, usize), same: bool) -> Mm {
    let dims = (m as i64, n as i64, k as i64);
    Mm {
        case: catalogue::matmul_of(name, dt, dims, same).with_data(random_value),
        mnk: (m, n, k),
    }
}

/// The unit roundoff of summing in `dt`.
fn roundoff(dt: DType) -> f64 {
    match dt.scalar {
        Scalar::Float16 => 2f64.powi(-11),
        Scalar::BFloat16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    }
}

/// Every output within the dot-product error bound (u_in + K u_out) sum_k |a_ik b_kj| of the
/// exact product of the inputs as stored (one rounding of each product in the input dtype, as
/// the kernels without tensor cores multiply, K roundings of the sum in the output dtype);
/// returns the bounds.
fn check_bound(mm: &Mm, got: &Buffers, what: &str) -> Vec<f64> {
    let (case, (m, n, k)) = (&mm.case, mm.mnk);
    let init = case.initial_buffers();
    let dt_in = case.buffers()[1].1;
    let a: Vec<f64> = decode(&init[1], dt_in).iter().map(|v| v.as_f64()).collect();
    let b: Vec<f64> = decode(&init[2], dt_in).iter().map(|v| v.as_f64()).collect();
    let out = case.out_dtype(0);
    let d: Vec<f64> = decode(&got[0], out).iter().map(|v| v.as_f64()).collect();
    let mut bounds = vec![];
    for i in 0..m {
        for j in 0..n {
            let terms = (0..k).map(|x| a[i * k + x] * b[x * n + j]);
            let exact: f64 = terms.clone().sum();
            let mag: f64 = terms.map(f64::abs).sum();
            let bound = 1.01 * (roundoff(dt_in) + k as f64 * roundoff(out)) * mag;
            let g = d[i * n + j];
            assert!(
                (g - exact).abs() <= bound,
                "{}: {what}: D[{i}][{j}] = {g}, exact {exact}, bound {bound}",
                case.name
            );
            bounds.push(bound);
        }
    }
    bounds
}

fn run_on(dev: &Compiled, case: &Case, k: &mut Kernel) -> (ProgramSpec, Buffers) {
    let p = k
        .to_program(&*dev.renderer)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
    let lib = dev
        .compiler
        .compile(&p.src)
        .unwrap_or_else(|e| panic!("{} {:?}: compile: {e}", case.name, k.applied_opts));
    let prg = dev.runtime.load(&p.function_name, &lib).unwrap();
    let got = run_program(&*prg, case, &p, &*dev.allocator)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
    (p, got)
}

/// The WMMA UOps of a program; each must be gfx12's (8 values of A, B and C per lane).
fn gfx12_wmmas(p: &ProgramSpec, what: &str) -> usize {
    let w: Vec<&UOp> = p.uops.iter().filter(|u| u.op() == UOps::WMMA).collect();
    for u in &w {
        let UArg::Wmma(arg) = u.arg() else {
            panic!("{what}: WMMA without its arg")
        };
        assert_eq!(arg.upcast_sizes, vec![8, 8, 8], "{what}");
        assert_eq!(u.src()[0].dtype().map(|d| d.count), Some(8), "{what}: A");
        assert_eq!(u.src()[1].dtype().map(|d| d.count), Some(8), "{what}: B");
    }
    w.len()
}

/// Every TC action, TC with an extra upcast or local, and the default TC choice.
fn tc_variants(case: &Case, o: &RendererOpts) -> Vec<Kernel> {
    let mut out = vec![];
    for opt in actions().into_iter().filter(|a| a.op == OptOps::TC) {
        out.extend(optimized(case, o, &[opt]));
        out.extend(optimized(case, o, &[opt, Opt::new(OptOps::UPCAST, 0, 2)]));
        out.extend(optimized(case, o, &[opt, Opt::new(OptOps::LOCAL, 0, 2)]));
    }
    let mut k = Kernel::new(&case.ast, o).unwrap();
    if k.apply_tensor_cores(1, None, 0, None).unwrap() {
        out.push(k);
    }
    out
}

/// The same matmul without tensor cores: unoptimized and the engine's default opts under `TC=0`
/// (the hand-coded heuristics); their outputs and bounds.
fn without_tc(dev: &Compiled, mm: &Mm) -> Vec<(Buffers, Vec<f64>)> {
    let o = dev.renderer.opts();
    let plain = Kernel::new(&mm.case.ast, o).unwrap();
    let mut heur = Kernel::new(&mm.case.ast, o).unwrap();
    {
        let _tc = Context::new(&[("TC", 0)]);
        assert!(
            !heur.apply_default_opts().unwrap(),
            "TC=0 used tensor cores"
        );
    }
    let mut out = vec![];
    for (what, mut k) in [("unoptimized", plain), ("TC=0 heuristics", heur)] {
        assert!(k.tensor_core.is_none(), "{}: {what}", mm.case.name);
        let (p, got) = run_on(dev, &mm.case, &mut k);
        assert_eq!(gfx12_wmmas(&p, what), 0, "{}: {what}", mm.case.name);
        let bounds = check_bound(mm, &got, what);
        out.push((got, bounds));
    }
    out
}

#[test]
fn gfx12_tensor_cores_match_the_kernels_without_them() {
    let (_ctx, dev) = gfx1201();
    let o = dev.renderer.opts().clone();
    let cases = [
        mm("gfx12_half_32", dtypes::float16, (32, 32, 32), false),
        mm("gfx12_half_pad", dtypes::float16, (20, 24, 24), false),
        mm("gfx12_half_64x16", dtypes::float16, (64, 16, 48), false),
        mm("gfx12_half_out", dtypes::float16, (32, 16, 32), true),
        mm("gfx12_bf16", dtypes::bfloat16, (32, 16, 32), false),
        mm("gfx12_bf16_out", dtypes::bfloat16, (32, 16, 32), true),
    ];
    for mm in &cases {
        let base = without_tc(&dev, mm);
        let ks = tc_variants(&mm.case, &o);
        assert!(
            ks.iter().any(|k| k.tensor_core.is_some()),
            "{}: no tensor core applied on gfx1201",
            mm.case.name
        );
        for mut k in ks {
            let what = format!("gfx1201 {:?}", k.applied_opts);
            let (p, got) = run_on(&dev, &mm.case, &mut k);
            if k.tensor_core.is_some() {
                assert!(gfx12_wmmas(&p, &what) > 0, "{}: {what}", mm.case.name);
            }
            let bounds = check_bound(mm, &got, &what);
            // and the kernels without tensor cores, each within its own bound
            let out = mm.case.out_dtype(0);
            let d = decode(&got[0], out);
            for (want, wb) in &base {
                for (x, (g, w)) in d.iter().zip(decode(&want[0], out)).enumerate() {
                    let diff = (g.as_f64() - w.as_f64()).abs();
                    assert!(
                        diff <= bounds[x] + wb[x],
                        "{}: {what}: output {x}: {g:?} vs {w:?} without tensor cores",
                        mm.case.name
                    );
                }
            }
        }
    }
}

#[test]
fn gfx12_heuristics_pick_wmma_for_a_half_matmul() {
    let (_ctx, dev) = gfx1201();
    let mm = mm("gfx12_heuristic", dtypes::float16, (64, 64, 64), false);
    let mut k = Kernel::new(&mm.case.ast, dev.renderer.opts()).unwrap();
    // the engine's choice (0.9.1 `get_linearizer`): tensor cores first, else the heuristics
    assert!(k.apply_default_opts().unwrap(), "{:?}", k.applied_opts);
    assert!(k.tensor_core.is_some(), "{:?}", k.applied_opts);
    assert_eq!(k.applied_opts.first().map(|o| o.op), Some(OptOps::TC));
    let (p, got) = run_on(&dev, &mm.case, &mut k);
    let n = gfx12_wmmas(&p, "heuristics");
    assert!(n > 0, "the heuristic kernel has no WMMA UOp");
    check_bound(&mm, &got, "heuristics");
    println!("gfx1201 heuristics {:?}: {n} WMMA UOps", k.applied_opts);
}

#[test]
fn gfx12_offers_three_8_wide_wmma_and_the_other_targets_keep_theirs() {
    let names =
        |g: &str| -> Vec<String> { tensor_cores::amd(g).iter().map(|t| t.name()).collect() };
    assert_eq!(
        names("gfx1201"),
        [
            "WMMA_16_16_16_half_float",
            "WMMA_16_16_16_half_half",
            "WMMA_16_16_16___bf16_float",
            "WMMA_16_16_16___bf16___bf16"
        ]
    );
    for tc in tensor_cores::amd("gfx1201") {
        assert_eq!(tc.thread_local_sizes, vec![vec![8], vec![8], vec![8]]);
        assert_eq!(tc.threads.iter().map(|t| t.1).product::<usize>(), 32);
    }
    assert_eq!(
        names("gfx1100"),
        ["WMMA_16_16_16_half_float", "WMMA_16_16_16_half_half"]
    );
    assert!(names("gfx1030").is_empty() && names("gfx942").is_empty());
    assert!(names("gfx9999").is_empty());
}
