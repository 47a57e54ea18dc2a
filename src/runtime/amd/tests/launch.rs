//! The launch value on the emulated GPU: one recorded launch re-run with other dims through
//! `update_exec` alone computes exactly what the new dims cover ([`check_update_exec_dims`],
//! shared with the NV tests), and the PM4 fields `update_exec` patches equal the values written
//! by hand from the packet layouts: PACKET3 headers as in `vendor.rs` (Linux amdgpu nvd.h), SH
//! register offsets relative to PACKET3_SET_SH_REG_START 0x2c00 (mmCOMPUTE_START_X 0x2e04,
//! mmCOMPUTE_NUM_THREAD_X 0x2e07, mmCOMPUTE_USER_DATA_0 0x2e40: amdgpu's cik/gfx register
//! headers, the same offsets from gfx9 to gfx12).

use std::sync::Arc;

use super::graph::{i32_bytes, i32s};
use super::*;
use crate::hcq::{
    HcqBackend, HcqBuffer, HcqDevice, HcqLaunch, HcqProgram, HcqProgramHandle, HwComputeQueue,
    HwQueue,
};
use crate::hw::amd::targets::GFX1100;
use crate::mockgpu::amdgpu::object::mock_descriptor;
use crate::runtime::amd::program::AmdProgram;
use crate::runtime::amd::queue::AmdComputeQueue;

/// One run: global, local, and which of the 32 outputs it covers.
type Run = ([u32; 3], [u32; 3], fn(usize) -> bool);

/// The runs of [`check_update_exec_dims`] (the kernel indexes `gidx * 16 + lidx`).
const RUNS: [Run; 3] = [
    ([1, 1, 1], [16, 1, 1], |i| i < 16),
    ([2, 1, 1], [8, 1, 1], |i| i % 16 < 8),
    ([2, 1, 1], [16, 1, 1], |_| true),
];

/// `prg` is `axpb_uops(2, 16)` (32 int32: out = in * n + m, variables (m, n)). Records one launch
/// (a compute queue of exec + signal) and submits it once per entry of [`RUNS`], the later runs
/// after `update_exec` with the same kernarg block and new dims only; the outputs outside each
/// run's dims stay zero. Returns the program and the launch value of the last run.
pub(crate) fn check_update_exec_dims<B: HcqBackend>(
    dev: &Arc<HcqDevice<B>>,
    prg: &dyn Program,
) -> (Arc<B::Program>, HcqLaunch) {
    let prg = prg
        .as_any()
        .and_then(|p| p.downcast_ref::<HcqProgramHandle<B>>())
        .expect("an HCQ program")
        .program()
        .clone();
    let a = HcqAllocator::new(dev.clone());
    let out = a.alloc(128, &BufferOptions::default()).unwrap();
    let inp = a.alloc(128, &BufferOptions::default()).unwrap();
    let x: Vec<i32> = (0..32).map(|i| 3 * i - 40).collect();
    a.copyin(&inp, &i32_bytes(&x)).unwrap();
    let size = prg.kernargs_alloc_size();
    let mem: Arc<dyn HcqBuffer> = Arc::new(dev.backend().alloc_kernarg_memory(size).unwrap());
    let (m, n) = (7, -3);
    let (g, l, _) = RUNS[0];
    let launch = prg
        .launch(mem, 0, &[out.addr, inp.addr], &[m, n], (g, l))
        .unwrap();
    let done = dev.new_signal(0).unwrap();
    let mut q = dev.backend().compute_queue();
    q.memory_barrier().unwrap();
    let ex = q.exec(&prg, &launch).unwrap().into_patch();
    let sp = q.signal(&done, 1).unwrap().into_patch();
    let mut last = launch.clone();
    for (run, (g, l, covered)) in RUNS.into_iter().enumerate() {
        a.copyin(&out, &[0u8; 128]).unwrap();
        a.synchronize().unwrap();
        if run > 0 {
            last = launch.with_dims(g, l);
            q.update_exec(&ex, &last).unwrap();
            q.update_signal(&sp, None, Some(run as u64 + 1)).unwrap();
        }
        q.submit(dev.backend()).unwrap();
        dev.wait_signal(&done, run as u64 + 1, "update_exec run")
            .unwrap();
        let mut o = vec![0u8; 128];
        a.copyout(&mut o, &out).unwrap();
        let want: Vec<i32> = (0..32)
            .map(|i| {
                if covered(i) {
                    x[i] * n as i32 + m as i32
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(i32s(&o), want, "run {run}: global {g:?} local {l:?}");
    }
    (prg, last)
}

#[test]
fn update_exec_runs_the_recorded_launch_with_new_dims() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    check_update_exec_dims(&dev, &*prg);
}

/// The index of the first place `pat` occurs in `d`.
fn find(d: &[u32], pat: &[u32]) -> usize {
    d.windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("{pat:x?} not in the stream"))
}

#[test]
fn update_exec_patches_the_pm4_dims_and_kernarg_pointer_where_the_layout_says() {
    let prg = Arc::new(AmdProgram::encode_only(
        "E",
        mock_descriptor(&GFX1100, 24, 0),
        0x7F00_0000_0100,
        None,
    ));
    let mut q = AmdComputeQueue::new(&GFX1100);
    let first = HcqLaunch::at_address(0x7F00_0001_0000, [4, 2, 1], [32, 1, 1]);
    let ex = q.exec(&prg, &first).unwrap().into_patch();
    let moved = HcqLaunch::at_address(0x7F00_0002_0040, [7, 5, 3], [8, 4, 2]);
    q.update_exec(&ex, &moved).unwrap();
    let d = q.dwords();
    // PACKET3(DISPATCH_DIRECT 0x15, 3): DIM_X, DIM_Y, DIM_Z, DISPATCH_INITIATOR.
    let at = find(d, &[0xC003_1500]);
    assert_eq!(d[at + 1..at + 4], [7, 5, 3]);
    // PACKET3(SET_SH_REG 0x76, 8) at COMPUTE_START_X (offset 0x204): START_X/Y/Z, then
    // COMPUTE_NUM_THREAD_X/Y/Z (0x207..0x209, NUM_THREAD_FULL in bits 15:0), then two zeros.
    let at = find(d, &[0xC008_7600, 0x204]);
    assert_eq!(d[at + 2..at + 10], [0, 0, 0, 8, 4, 2, 0, 0]);
    // PACKET3(SET_SH_REG, 2) at COMPUTE_USER_DATA_0 (offset 0x240): the kernarg pointer, lo/hi.
    let at = find(d, &[0xC002_7600, 0x240]);
    assert_eq!(d[at + 2..at + 4], [0x0002_0040, 0x7F00]);
    // Dims the hardware would misread are refused, and nothing is written.
    let before = d.to_vec();
    let zero = HcqLaunch::at_address(0x7F00_0002_0040, [7, 0, 3], [8, 4, 2]);
    assert!(q.update_exec(&ex, &zero).is_err());
    let big = HcqLaunch::at_address(0x7F00_0003_0000, [7, 5, 3], [64, 32, 1]);
    assert!(q.update_exec(&ex, &big).is_err());
    assert_eq!(q.dwords(), &before[..]);
}

/// A kernel that reads the dispatch packet keeps its dims in memory too: `update_exec` rewrites
/// the packet after the kernargs (hsa.h `hsa_kernel_dispatch_packet_t`: setup u16 at 2,
/// workgroup_size_x/y/z u16 at 4/6/8, grid_size_x/y/z u32 at 12/16/20 in work-items,
/// kernarg_address u64 at 40) and the dispatch pointer SGPRs, which come before the kernarg
/// pointer (AMDGPUUsage "SGPR Register Set Up Order").
#[test]
fn update_exec_rewrites_the_dispatch_packet_of_a_kernel_that_reads_it() {
    let (dev, _emu) = one_gpu();
    let mut kd = mock_descriptor(&GFX1100, 24, 0);
    kd.kernel_code_properties |= 0x2; // ENABLE_SGPR_DISPATCH_PTR
    kd.compute_pgm_rsrc2 = (kd.compute_pgm_rsrc2 & !(0x1F << 1)) | 4 << 1; // USER_SGPR 4
    let prg = Arc::new(AmdProgram::encode_only("E", kd, 0x7F00_0000_0100, None));
    assert_eq!(
        prg.kernargs_alloc_size(),
        128,
        "64-byte aligned kernargs, then the packet"
    );
    let mem: Arc<dyn HcqBuffer> = Arc::new(dev.backend().alloc_kernarg_memory(256).unwrap());
    let launch = prg
        .launch(
            mem.clone(),
            0,
            &[0x1000, 0x2000],
            &[5, 6],
            ([4, 2, 1], [32, 1, 1]),
        )
        .unwrap();
    let mut q = AmdComputeQueue::new(&GFX1100);
    let ex = q.exec(&prg, &launch).unwrap().into_patch();
    let (view, off) = launch.view().unwrap();
    let moved = HcqLaunch::in_memory(mem, off + 128, [7, 5, 3], [8, 4, 2]).unwrap();
    q.update_exec(&ex, &moved).unwrap();
    let pkt = |at: usize| {
        let mut b = [0u8; 64];
        view.read_bytes(at, &mut b).unwrap();
        b
    };
    let p = pkt(off + 128 + 64);
    let u16_at = |o: usize| u16::from_le_bytes([p[o], p[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
    assert_eq!(u16_at(2), 3, "setup: three dimensions");
    assert_eq!([u16_at(4), u16_at(6), u16_at(8)], [8, 4, 2]);
    assert_eq!([u32_at(12), u32_at(16), u32_at(20)], [56, 20, 6]);
    assert_eq!(
        u64::from_le_bytes(p[40..48].try_into().unwrap()),
        moved.kernargs()
    );
    let dp = moved.kernargs() + 64;
    let ka = moved.kernargs();
    let want = [0xC004_7600, 0x240, dp as u32, (dp >> 32) as u32];
    let at = find(q.dwords(), &want);
    assert_eq!(q.dwords()[at + 4..at + 6], [ka as u32, (ka >> 32) as u32]);
}
