//! BEAM's picks compute what the unoptimized kernel computes (issue 10, "Show"): for kernels of
//! the linearizer catalogue, BEAM=2 searches on the device (timing candidates on scratch
//! buffers), and the kernel it returns, rendered, compiled and run on the catalogue's inputs,
//! equals the reference evaluator. On INTERP and CLANG always; on the emulated GPU under
//! `AMD=1 MOCKGPU=1` / `NV=1 MOCKGPU=1`, where LOCAL and GROUP opts are in the action space.
//! Through the engine: `BEAM=2` realizes give the same values as `BEAM=0` and leave the inputs
//! alone. The disk cache is off here (`CACHELEVEL=0`); its tests are in `engine/search/tests.rs`.

mod linearizer_support;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::{Kernel, OptOps};
use rawgrad::device::registry::Compiled;
use rawgrad::engine::search::{beam_search_stats, bufs_from_lin};
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::Tensor;

/// The kernels searched: a few of each kind that BEAM's actions change (small, so a search takes
/// well under a second on INTERP).
fn cases() -> Vec<Case> {
    vec![
        catalogue::elementwise_add(),
        catalogue::sum_inner(),
        catalogue::sum_outer(),
        catalogue::matmul(),
        catalogue::reduce_epilogue(),
        catalogue::padded_sum(),
        catalogue::symbolic_sum(),
    ]
}

/// Search `case` on `dev` with BEAM=2, then run the pick on the case's data and compare.
fn check_beam_pick(dev: &Compiled, case: &Case) -> Kernel {
    let _g = Context::new(&[("CACHELEVEL", 0)]);
    let r = &*dev.renderer;
    let mut kb = Kernel::new(&case.ast, r.opts()).unwrap();
    kb.required_optimizations().unwrap();
    let bufs = bufs_from_lin(&kb, &dev.name, false).unwrap();
    let (mut k, stats) = beam_search_stats(&kb, &bufs, 2, true)
        .unwrap_or_else(|e| panic!("{} on {}: {e}", case.name, dev.name));
    assert!(!stats.cached && stats.timed > 0, "{}: {stats:?}", case.name);
    let p = k
        .to_program(r)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
    let lib = dev.compiler.compile(&p.src).unwrap();
    let prg = dev.runtime.load(&p.function_name, &lib).unwrap();
    let got = run_program(&*prg, case, &p, &*dev.allocator)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", case.name, k.applied_opts));
    let what = format!("{} BEAM=2 {:?}", dev.name, k.applied_opts);
    assert_outputs(
        case,
        &case.reference(),
        &got,
        rtol_for(case).max(1e-5),
        &what,
    );
    k
}

#[test]
fn beam_picks_equal_the_reference_on_interp() {
    let dev = open_device("INTERP").unwrap();
    let picked = cases()
        .iter()
        .filter(|c| !check_beam_pick(&dev, c).applied_opts.is_empty())
        .count();
    // the search found something better than no opts for most kernels
    assert!(picked >= 3, "BEAM applied opts to only {picked} kernels");
}

#[test]
fn beam_picks_equal_the_reference_on_clang() {
    if clang().is_none() {
        return;
    }
    let dev = open_device("CLANG").unwrap();
    for case in [
        catalogue::sum_inner(),
        catalogue::matmul(),
        catalogue::reduce_epilogue(),
    ] {
        check_beam_pick(&dev, &case);
    }
}

#[test]
fn beam_picks_equal_the_reference_on_gpu() {
    let Some(dev) = gpu_under_test() else { return };
    let mut local = 0;
    for case in [
        catalogue::sum_inner(),
        catalogue::matmul(),
        catalogue::max_multi_axis(),
    ] {
        let k = check_beam_pick(&dev, &case);
        let locals = (k.applied_opts.iter())
            .any(|o| matches!(o.op, OptOps::LOCAL | OptOps::GROUP | OptOps::GROUPTOP));
        local += usize::from(locals);
    }
    println!("{local} of 3 picks use local or group opts");
}

/// `BEAM=2` through `get_kernel` (the search, then the BEAM_COMPARE timing against the
/// heuristics) gives the values `BEAM=0` gives, and the search's timing runs never touch the
/// tensors' buffers.
#[test]
fn beam_through_the_engine_never_changes_results() {
    let _d = Context::with_str(&[("DEFAULT", "CLANG")]);
    let _c = Context::new(&[("CACHELEVEL", 0)]);
    let a = Tensor::rand(&[32, 48]).unwrap().realize().unwrap();
    let b = Tensor::rand(&[48, 40]).unwrap().realize().unwrap();
    let (a0, b0) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    let run = |beam: i64| -> (Vec<f32>, Vec<f32>) {
        let _g = Context::new(&[("BEAM", beam)]);
        let mm = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        let s = (a.relu().unwrap().sum_axis(1, false).unwrap())
            .to_vec::<f32>()
            .unwrap();
        (mm, s)
    };
    let plain = run(0);
    let searched = run(2);
    assert_eq!(a.to_vec::<f32>().unwrap(), a0);
    assert_eq!(b.to_vec::<f32>().unwrap(), b0);
    for (x, y) in [(&plain.0, &searched.0), (&plain.1, &searched.1)] {
        assert_eq!(x.len(), y.len());
        for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
            assert!(
                (p - q).abs() <= 1e-4 * p.abs().max(1.0),
                "element {i}: {p} vs {q}"
            );
        }
    }
}
