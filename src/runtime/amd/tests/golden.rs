//! Golden packet streams of the HCQ commands as the AMD queues emit them (decoded one line per
//! packet), built with the same encoders the device uses, on fixed addresses
//! (tests/golden/amd/hcq_*.txt; `RAWGRAD_BLESS=1` rewrites them).

use crate::hcq::device::{encode_copy, encode_program_call};
use crate::hcq::{HcqLaunch, HwComputeQueue, HwQueue};
use crate::hw::amd::decode::{check_golden, decode_pm4_text, decode_sdma_text};
use crate::hw::amd::targets::{GFX1030, GFX1100};
use crate::mockgpu::amdgpu::object::mock_descriptor;
use crate::runtime::amd::copy::AmdCopyQueue;
use crate::runtime::amd::pm4::{ScratchSetup, SignalEvent};
use crate::runtime::amd::program::AmdProgram;
use crate::runtime::amd::queue::AmdComputeQueue;
use crate::runtime::amd::signal::AmdSignal;
use crate::runtime::amd::AmdBackend;
use std::sync::Arc;

const TIMELINE: u64 = 0x7f00_2000_0010;
const MAILBOX: u64 = 0x7f00_3000_0018;
const KERNARGS: u64 = 0x7f00_4000_0040;
const CODE: u64 = 0x7f12_3456_7800;

fn timeline() -> AmdSignal {
    AmdSignal::encode_only(
        TIMELINE,
        Some(SignalEvent {
            mailbox: MAILBOX,
            event_id: 9,
        }),
    )
}

fn timing() -> (AmdSignal, AmdSignal) {
    (
        AmdSignal::encode_only(0x7f00_2000_0100, None),
        AmdSignal::encode_only(0x7f00_2000_0110, None),
    )
}

#[test]
fn program_call_stream() {
    // gfx1030 kernels read a private-segment descriptor (s0-s3), so they get scratch and their
    // kernarg pointer moves to s4-s5.
    let scratch = ScratchSetup {
        va: 0x7f00_7000_0000,
        tmpring_size: 0x0000_4A00,
    };
    for (t, name, sc) in [
        (&GFX1100, "gfx1100", None),
        (&GFX1030, "gfx1030", Some(scratch)),
    ] {
        let prg = Arc::new(AmdProgram::encode_only(
            "E_4",
            mock_descriptor(t, 24, 0),
            CODE,
            sc,
        ));
        let mut q = AmdComputeQueue::new(t);
        encode_program_call::<AmdBackend>(
            &mut q,
            &timeline(),
            42,
            &prg,
            &HcqLaunch::at_address(KERNARGS, [4, 2, 1], [32, 1, 1]),
            None,
        )
        .unwrap();
        check_golden(
            &format!("hcq_call_{name}.txt"),
            &decode_pm4_text(t, q.dwords()).unwrap(),
        );
    }
}

#[test]
fn timed_copy_stream() {
    let mut q = AmdCopyQueue::new(&GFX1100);
    let ts = timing();
    encode_copy::<AmdBackend>(
        &mut q,
        &timeline(),
        7,
        0x7f00_5000_0000,
        0x7f00_6000_0100,
        0x1000,
        Some(&ts),
    )
    .unwrap();
    check_golden(
        "hcq_copy_gfx1100.txt",
        &decode_sdma_text(&GFX1100, q.dwords()).unwrap(),
    );
}

#[test]
fn signal_wait_stream() {
    let gate = AmdSignal::encode_only(0x7f00_2000_0200, None);
    let done = AmdSignal::encode_only(0x7f00_2000_0210, None);
    let mut q = AmdComputeQueue::new(&GFX1100);
    q.wait(&gate, 41).unwrap().signal(&done, 1).unwrap();
    q.memory_barrier().unwrap();
    let mut s = AmdCopyQueue::new(&GFX1100);
    let p = s.wait(&gate, 41).unwrap().into_patch();
    s.signal(&timeline(), 3).unwrap();
    s.update_wait(&p, Some(&done), Some(5)).unwrap();
    let text = format!(
        "# compute\n{}# sdma (wait patched to the second signal, value 5)\n{}",
        decode_pm4_text(&GFX1100, q.dwords()).unwrap(),
        decode_sdma_text(&GFX1100, s.dwords()).unwrap()
    );
    check_golden("hcq_wait_gfx1100.txt", &text);
}
