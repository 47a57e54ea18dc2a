//! Kernels: mock cubins of hand-built UOp kernels, run by the software NV GPU on the UOp
//! interpreter through the emulated RM/UVM (QMD V04 on Hopper, V03 on Ada), results checked on the
//! host; variables, many queued launches, the timeline wrap.

use super::*;
use crate::dtype::dtypes;
use crate::runtime::amd::tests::graph::{
    axpb_chain, axpb_chain_want, chain_buffers, check_many_replays, check_replay_patches, i32s_of,
};

#[test]
fn add_kernel_runs_on_hopper_with_qmd_v04() {
    let (dev, _emu) = one_gpu();
    run_add(&dev, 4, 32);
    run_add(&dev, 3, 7);
}

#[test]
fn add_kernel_runs_on_ada_with_qmd_v03() {
    let (p, _emu) = mock_nv(1, "ada", "");
    let dev = open(&p, 0);
    run_add(&dev, 2, 64);
}

#[test]
fn kernel_with_variables_and_many_launches() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let (a, bufs, x) = axpb_buffers(&dev);
    for k in 0..20 {
        prg.call(&bufs, &[-k, k], Some([2, 1, 1]), Some([16, 1, 1]), false)
            .unwrap();
    }
    let want: Vec<i32> = x.iter().map(|v| v * 19 - 19).collect();
    assert_eq!(
        i32s_of(&a, &bufs[0]),
        want,
        "the last of 20 queued launches wins"
    );
    let e = prg
        .call(&bufs, &[1], Some([2, 1, 1]), Some([16, 1, 1]), false)
        .unwrap_err();
    assert!(e.message().contains("param size mismatch"), "{e}");
}

#[test]
fn timeline_wraps_through_the_shadow_signal() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_add", &add_uops(1, 8, dtypes::float32));
    let (a, _) = alloc(&dev, 32);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 8])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.5; 8])).unwrap();
    dev.force_timeline_value((1 << 31) - 2).unwrap();
    let epoch = dev.timeline_epoch();
    for _ in 0..4 {
        prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), false)
            .unwrap();
    }
    dev.synchronize().unwrap();
    assert!(
        dev.timeline_epoch() > epoch,
        "the timeline swapped past 2^31"
    );
    assert!(dev.timeline_value() < 1 << 31);
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), true)
        .unwrap();
    let mut o = vec![0u8; 32];
    a.copyout(&mut o, &bufs[0]).unwrap();
    assert_eq!(f32s(&o), vec![3.5f32; 8]);
}

#[test]
fn blocks_beyond_the_register_budget_are_refused() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_big", &add_uops(1, 2048, dtypes::float32));
    let (a, _) = alloc(&dev, 4);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(4 * 2048, &BufferOptions::default()).unwrap())
        .collect();
    let e = prg
        .call(&bufs, &[], Some([1, 1, 1]), Some([2048, 1, 1]), false)
        .unwrap_err();
    assert!(e.message().contains("2048 threads"), "{e}");
}

#[test]
fn pcas_action_knob_changes_the_launch_and_refuses_non_scheduling_actions() {
    use crate::helpers::Context;
    let (dev, _emu) = one_gpu();
    {
        // NVK's INVALIDATE_COPY_SCHEDULE: the grid still runs.
        let _k = Context::new(&[("NV_PCAS_ACTION", 3)]);
        run_add(&dev, 2, 16);
    }
    let _k = Context::new(&[("NV_PCAS_ACTION", 8)]);
    let prg = load(&dev, "E_add", &add_uops(1, 8, dtypes::float32));
    let (a, _) = alloc(&dev, 32);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    let e = prg
        .call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), false)
        .unwrap_err();
    assert!(e.message().contains("NV_PCAS_ACTION=8"), "{e}");
}

#[test]
fn hcq_graph_runs_are_one_submission_with_patched_kernargs_and_dims() {
    let (dev, emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let doorbells = || emu.nv_doorbell_writes(0).len();
    crate::runtime::amd::tests::graph::check_graph(&dev, &prg, &doorbells);
}

/// A graph run submits the graph's own bound pushbuffer (tinygrad 0.9.1 `bind`): one GP entry
/// on the compute channel per run whatever the kernel count, nothing copied into the command
/// rings. Back-to-back runs alternate between the two bound copies, each carrying the run's new
/// signal values (a stale timeline value would leave `synchronize` waiting), and a run with new
/// variables patches both.
#[test]
fn hcq_graph_runs_point_one_gp_entry_at_the_bound_pushbuffer() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let (b, a) = (dev.backend(), HcqAllocator::new(dev.clone()));
    let x: Vec<i32> = (0..32).map(|i| i - 10).collect();
    for k in [3usize, 7] {
        let bufs = chain_buffers(&dev, &a, &x, k);
        let calls = |m: i64, n: i64| axpb_chain(&bufs, m, n);
        let prgs = vec![prg.clone(); k];
        let g = crate::hcq::graph::build::<super::super::NvBackend>(&prgs, &calls(1, 2))
            .unwrap()
            .expect("an HCQ graph");
        for (m, n) in [(1, 2), (3, -1)] {
            let (put, cmd) = (b.gp_puts().unwrap().0, b.cmd_positions().unwrap());
            for _ in 0..5 {
                g.run(&calls(m, n), false).unwrap();
            }
            assert_eq!(
                b.gp_puts().unwrap().0 - put,
                5,
                "{k} kernels: one GP entry a run"
            );
            assert_eq!(
                b.cmd_positions().unwrap(),
                cmd,
                "{k} kernels: a command ring moved"
            );
            dev.synchronize().unwrap();
            let want = axpb_chain_want(&x, k, m, n);
            assert_eq!(i32s_of(&a, &bufs[k]), want, "{k} kernels, m={m} n={n}");
        }
    }
}

/// Many replays of a bound graph, three at a time without a synchronize between them (the
/// shared AMD/NV check, [`check_many_replays`]).
/// Replays through `run_updating` patch only the values and a swapped input (the shared AMD/NV
/// check, [`check_replay_patches`]).
#[test]
fn hcq_graph_replays_patch_only_values_and_swapped_inputs() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    check_replay_patches(&dev, &prg);
}

#[test]
fn hcq_graph_many_replays_with_changing_variables_stay_exact() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    check_many_replays(&dev, &prg);
}

#[test]
fn ptx_kernel_runs_on_the_ptx_interpreter_with_variables() {
    use crate::mockgpu::nvgpu::compiler::MockPtxCompiler;
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let c = match MockPtxCompiler::new(b.classes().arch, b.sm()) {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no libLLVM with NVPTX: {e}");
            return;
        }
    };
    let src = c.renderer().render("E_axpb", &axpb_uops(2, 16)).unwrap();
    let ptx = c.to_ptx(&src).unwrap();
    assert!(
        ptx.contains(".entry E_axpb") && ptx.contains("%ctaid.x"),
        "{ptx}"
    );
    let lib = c.compile(&src).unwrap();
    run_axpb_program(&dev, &lib);
}

/// The emulated device's default toolchain is the real code: LLVM's PTX in the program object
/// (with ptxas's cubin of the same PTX beside it when this machine has ptxas: same kernel, same
/// parameter layout), run by the PTX interpreter; `MOCKGPU_CODE` other than `ptx`/`uops` is a
/// compile error naming the value.
#[test]
fn the_default_toolchain_carries_ptx_and_ptxas_cubin_and_refuses_an_unknown_code() {
    use crate::helpers::Context;
    use crate::mockgpu::nvgpu::cubin::real_cubin;
    use crate::runtime::builtin::nv_toolchain;
    use crate::runtime::nv::cubin::Cubin;
    use crate::runtime::nv::toolchain::{find_tool, NvTool};
    let (dev, _emu) = one_gpu();
    let tc = {
        let _k = Context::with_str(&[("MOCKGPU_CODE", "")]);
        nv_toolchain(&dev)
    };
    let src = tc.renderer.render("E_axpb", &axpb_uops(2, 16)).unwrap();
    let lib = match tc.compiler.compile(&src) {
        Ok(l) => l,
        Err(e) if e.message().contains("libLLVM") => {
            println!("skipped: no libLLVM with NVPTX: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let text = |needle: &[u8]| lib.windows(needle.len()).any(|w| w == needle);
    assert!(
        text(b".entry E_axpb") && text(b"%ctaid.x"),
        "PTX in the program"
    );
    let (b, real) = (dev.backend(), real_cubin(&lib).unwrap());
    match find_tool(NvTool::Ptxas) {
        Ok(_) => {
            let real = real.expect("ptxas is installed: the program carries its cubin");
            let (arch, sm) = (b.classes().arch, b.sm());
            let r = Cubin::parse(&real, Some("E_axpb"), arch, sm).unwrap();
            let m = Cubin::parse(&lib, Some("E_axpb"), arch, sm).unwrap();
            assert_eq!(
                (r.sm, &r.kparams, r.param_size),
                (sm, &m.kparams, m.param_size)
            );
            assert!(tc.compiler.cache_key().unwrap().contains("ptxas"));
        }
        Err(e) => {
            assert_eq!(real, None);
            println!("no ptxas, PTX only: {e}");
        }
    }
    run_axpb_program(&dev, &lib);
    let _k = Context::with_str(&[("MOCKGPU_CODE", "sass")]);
    let e = nv_toolchain(&dev).compiler.compile(&src).unwrap_err();
    assert!(e.message().contains("MOCKGPU_CODE=\"sass\""), "{e}");
}

/// Loads the axpb program `lib` and checks `out = 5 in - 3` over 2 x 16 threads.
fn run_axpb_program(dev: &Arc<NvDevice>, lib: &[u8]) {
    let prg = NvRuntime::new(dev.clone()).load("E_axpb", lib).unwrap();
    let (a, bufs, x) = axpb_buffers(dev);
    prg.call(&bufs, &[-3, 5], Some([2, 1, 1]), Some([16, 1, 1]), true)
        .unwrap();
    let want: Vec<i32> = x.iter().map(|v| v * 5 - 3).collect();
    assert_eq!(i32s_of(&a, &bufs[0]), want);
}

/// (allocator, [out, in], in's 32 int32 values) for the axpb kernel.
fn axpb_buffers(
    dev: &Arc<NvDevice>,
) -> (HcqAllocator<super::super::NvBackend>, [RawBuf; 2], Vec<i32>) {
    let a = HcqAllocator::new(dev.clone());
    let (out, inp) = (
        a.alloc(128, &BufferOptions::default()).unwrap(),
        a.alloc(128, &BufferOptions::default()).unwrap(),
    );
    let x: Vec<i32> = (0..32).map(|i| i - 10).collect();
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.copyin(&inp, &xb).unwrap();
    (a, [out, inp], x)
}

/// The launch value on NV: `update_exec` with new dims alone reruns a recorded launch over them
/// (the shared AMD/NV check), and writes them where the kernargs block keeps them, at the vendor
/// field positions written here by hand (`MW(hi:lo)` bit ranges of the QMD as one little-endian
/// bit array; open-gpu-doc clcbc0qmd.h and clc6c0qmd.h):
/// Hopper's QMD V04 GRID_WIDTH 1055:1024 (dword 32), GRID_HEIGHT 1071:1056 (dword 33, bits
/// 15:0), GRID_DEPTH 1103:1088 (dword 34, 15:0), CTA_THREAD_DIMENSION0..2 1167:1152, 1183:1168,
/// 1199:1184 (dword 36 bits 15:0 and 31:16, dword 37 bits 15:0); Ada's QMD V03
/// CTA_RASTER_WIDTH 415:384 (dword 12), HEIGHT 431:416 (dword 13, 15:0), DEPTH 463:448 (dword 14,
/// 15:0), CTA_THREAD_DIMENSION0..2 607:592, 623:608, 639:624 (dword 18 bits 31:16, dword 19 bits
/// 15:0 and 31:16); cbuf0's %ntid at byte 0 and %nctaid at byte 0xC (tinygrad 0.10 `NVComputeQueue
/// ._exec` binds `local_size + global_size` at the block's start).
#[test]
fn update_exec_with_new_dims_reruns_the_launch_and_rewrites_the_qmd_and_cbuf0() {
    use crate::hcq::{HcqBackend, HcqLaunch, HwComputeQueue};
    use crate::runtime::amd::tests::launch::check_update_exec_dims;
    // (arch, [(dword, shift)] of grid x/y/z, of block x/y/z)
    let cases = [
        (
            "hopper",
            [(32, 0), (33, 0), (34, 0)],
            [(36, 0), (36, 16), (37, 0)],
        ),
        (
            "ada",
            [(12, 0), (13, 0), (14, 0)],
            [(18, 16), (19, 0), (19, 16)],
        ),
    ];
    for (arch, grid, block) in cases {
        let (p, _emu) = mock_nv(1, arch, "");
        let dev = open(&p, 0);
        let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
        let (prg, last) = check_update_exec_dims(&dev, &*prg);
        let mut q = dev.backend().compute_queue();
        let ex = q.exec(&prg, &last).unwrap().into_patch();
        q.update_exec(&ex, &last.with_dims([7, 5, 3], [8, 4, 2]))
            .unwrap();
        let (view, off) = last.view().unwrap();
        let qoff = off + (prg.qmd_addr(last.kernargs()) - last.kernargs()) as usize;
        let mut w = [0u32; 64];
        view.read_u32s(qoff, &mut w).unwrap();
        let width = |(dw, shift): (usize, u32), mask: u32| (w[dw] >> shift) & mask;
        assert_eq!(width(grid[0], u32::MAX), 7, "{arch}: grid width");
        assert_eq!(width(grid[1], 0xFFFF), 5, "{arch}: grid height");
        assert_eq!(width(grid[2], 0xFFFF), 3, "{arch}: grid depth");
        let b: Vec<u32> = block.iter().map(|&f| width(f, 0xFFFF)).collect();
        assert_eq!(b, [8, 4, 2], "{arch}: block");
        let mut cb = [0u32; 6];
        view.read_u32s(off, &mut cb).unwrap();
        assert_eq!(cb, [8, 4, 2, 7, 5, 3], "{arch}: cbuf0 %ntid, %nctaid");
        let e = q
            .update_exec(&ex, &HcqLaunch::at_address(0x10_0000_0000, [1; 3], [1; 3]))
            .unwrap_err();
        assert!(e.message().contains("address only"), "{e}");
    }
}
