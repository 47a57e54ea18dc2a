//! Golden pushbuffer streams as the NV queues emit them (decoded one line per method group with
//! the raw dwords under it), built through the same HCQ encoders the device uses on fixed
//! addresses: a program call (wait, barrier, SEND_PCAS, signal) on Hopper and Ada, a copy on the
//! DMA channel, and a cross-queue wait (tests/golden/nv/hcq_*.txt; `RAWGRAD_BLESS=1` rewrites).

use crate::hcq::device::{encode_copy, encode_program_call};
use crate::hcq::{HcqLaunch, HwCopyQueue, HwQueue};
use crate::hw::nv::arch::{NvClasses, ADA_COMPUTE_A, HOPPER_COMPUTE_A};
use crate::hw::nv::decode::{check_golden, decode_push_listing};
use crate::runtime::nv::copy::NvCopyQueue;
use crate::runtime::nv::program::NvProgram;
use crate::runtime::nv::queue::NvComputeQueue;
use crate::runtime::nv::signal::NvSignal;
use crate::runtime::nv::NvBackend;
use std::sync::Arc;

const TIMELINE: u64 = 0x10_2000_0010;
const KERNARGS: u64 = 0x10_4000_0040;

#[test]
fn program_call_stream() {
    for (arch, file) in [
        (&HOPPER_COMPUTE_A, "hcq_launch_hopper.txt"),
        (&ADA_COMPUTE_A, "hcq_launch_ada.txt"),
    ] {
        let classes = NvClasses::preferred(arch);
        let cbuf0 = arch.cbuf0.param_base + 24;
        let prg = Arc::new(NvProgram::encode_only("E_4", arch, cbuf0));
        let mut q = NvComputeQueue::new(classes);
        let tl = NvSignal::encode_only(TIMELINE);
        encode_program_call::<NvBackend>(
            &mut q,
            &tl,
            7,
            &prg,
            &HcqLaunch::at_address(KERNARGS, [4, 1, 1], [32, 1, 1]),
            None,
        )
        .unwrap();
        // The QMD sits at the first 256-byte boundary after cbuf0.
        assert_eq!(prg.qmd_addr(KERNARGS) % 256, 0);
        assert!(prg.qmd_addr(KERNARGS) >= KERNARGS + u64::from(cbuf0));
        check_golden(file, &decode_push_listing(&classes, q.dwords()).unwrap());
    }
}

#[test]
fn copy_stream() {
    let classes = NvClasses::preferred(&HOPPER_COMPUTE_A);
    let mut q = NvCopyQueue::new(classes);
    let tl = NvSignal::encode_only(TIMELINE);
    // 5 GiB: split into 2 GiB pieces.
    encode_copy::<NvBackend>(
        &mut q,
        &tl,
        3,
        0x200_0000_0000,
        0x10_8000_0000,
        5 << 30,
        None,
    )
    .unwrap();
    check_golden(
        "hcq_copy.txt",
        &decode_push_listing(&classes, q.dwords()).unwrap(),
    );
}

#[test]
fn wait_stream() {
    // A transfer's wait on another device's timeline, then a signal, on the compute channel.
    let classes = NvClasses::preferred(&HOPPER_COMPUTE_A);
    let mut q = NvComputeQueue::new(classes);
    let other = NvSignal::encode_only(0x10_2000_0100);
    let tl = NvSignal::encode_only(TIMELINE);
    q.wait(&other, 12)
        .unwrap()
        .wait(&tl, 4)
        .unwrap()
        .signal(&tl, 5)
        .unwrap();
    let mut c = NvCopyQueue::new(classes);
    c.wait(&other, 12).unwrap();
    HwCopyQueue::copy(&mut c, 0x10_5000_0000, 0x10_6000_0000, 4096).unwrap();
    c.signal(&tl, 6).unwrap();
    let mut s = decode_push_listing(&classes, q.dwords()).unwrap();
    s.push_str("-- copy queue --\n");
    s.push_str(&decode_push_listing(&classes, c.dwords()).unwrap());
    check_golden("hcq_wait.txt", &s);
}
