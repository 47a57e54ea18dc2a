//! Ring mechanics on a device with 4 KiB rings: both rings wrap many times (PM4 packets split
//! across the end, SDMA packets moved past it with NOP padding), and a full ring waits for room,
//! timing out with a clear error while the GPU is blocked.

use super::*;
use crate::hcq::{HcqBackend, HcqDevice, HcqSignal, HwQueue};
use crate::helpers::Context;
use crate::runtime::amd::signal::AmdSignal;
use crate::runtime::amd::AmdBackend;
use crate::Error;

fn small_rings() -> (Arc<AmdDevice>, EmuDriver) {
    let (p, e) = mock_process(1, "gfx1100");
    let dev = HcqDevice::new(AmdBackend::open(&p, 0, "AMD", 4096).unwrap()).unwrap();
    (dev, e)
}

/// Submits one signal of `done` after another (values 1, 2, ...) until a submission fails: the
/// signals that went in and the error.
fn fill_with_signals(dev: &Arc<AmdDevice>, done: &AmdSignal) -> (u64, Error) {
    let mut sent = 0;
    loop {
        let mut q = dev.backend().compute_queue();
        q.signal(done, sent + 1).unwrap();
        match q.submit(dev.backend()) {
            Ok(()) => sent += 1,
            Err(e) => return (sent, e),
        }
        assert!(sent < 1000, "a 4 KiB ring never filled");
    }
}

#[test]
fn both_rings_wrap_many_times() {
    let (dev, _emu) = small_rings();
    let prg = load(&dev, "E_axpb", &axpb_uops(1, 8));
    let a = HcqAllocator::new(dev.clone());
    let (out, inp) = (
        a.alloc(32, &BufferOptions::default()).unwrap(),
        a.alloc(32, &BufferOptions::default()).unwrap(),
    );
    let bufs = [out.clone(), inp.clone()];
    for k in 0..120i32 {
        let x: Vec<u8> = (0..8).flat_map(|i| (i * k).to_le_bytes()).collect();
        a.copyin(&inp, &x).unwrap();
        prg.call(
            &bufs,
            &[k as i64, 2],
            Some([1, 1, 1]),
            Some([8, 1, 1]),
            false,
        )
        .unwrap();
    }
    let mut o = vec![0u8; 32];
    a.copyout(&mut o, &out).unwrap();
    let got: Vec<i32> = o
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, (0..8).map(|i| i * 119 * 2 + 119).collect::<Vec<_>>());
    // The engines publish their read pointers after the signal writes: poll (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let [(cw, _), (sw, _)] = loop {
        let p = dev.backend().ring_pointers().unwrap();
        if p[0].0 == p[0].1 && p[1].0 == p[1].1 {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "rings never drained: {p:?}"
        );
        std::thread::yield_now();
    };
    assert!(
        cw > 4 * 1024,
        "compute ring wrapped several times ({cw} dwords)"
    );
    assert!(
        sw > 2 * 4096,
        "SDMA ring wrapped several times ({sw} bytes)"
    );
}

#[test]
fn a_full_ring_waits_for_room_and_times_out_when_blocked() {
    let (dev, _emu) = small_rings();
    let (gate, done) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    // Short timeout for the submission that must fail only.
    let short = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
    let (sent, err) = fill_with_signals(&dev, &done);
    assert!(
        matches!(&err, Error::Timeout(m) if m.contains("ring full")),
        "{err}"
    );
    drop(short);
    assert!(sent >= 100, "about 4 KiB of 32-byte signals fit ({sent})");
    gate.set_value(1).unwrap();
    dev.wait_signal(&done, sent, "drain").unwrap();
    let mut q = dev.backend().compute_queue();
    q.signal(&done, sent + 1).unwrap();
    q.submit(dev.backend()).unwrap();
    dev.wait_signal(&done, sent + 1, "after room").unwrap();
    assert_eq!(done.value().unwrap(), sent + 1);
}

#[test]
fn a_full_ring_on_a_stopped_queue_is_a_fault_naming_it_not_a_timeout() {
    let (dev, emu) = small_rings();
    let (gate, done) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    // The reset stops the queues where they are: the ring never drains again.
    emu.reset_gpu(dev.backend().gpu_id()).unwrap();
    let (_, err) = fill_with_signals(&dev, &done);
    let text = err.to_string();
    assert!(
        matches!(&err, Error::Fault(_)) && text.contains("ring full") && text.contains("GPU reset"),
        "{text}"
    );
}
