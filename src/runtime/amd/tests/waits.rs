//! Queue waits on signals set later (by the CPU, by another queue, by another GPU) and the
//! timeline's shadow swap before the 32-bit wrap.

use std::time::{Duration, Instant};

use super::*;
use crate::driver::Driver;
use crate::hcq::{HcqBackend, HcqSignal, HwCopyQueue, HwQueue};

/// Poll (bounded) until the emulator reports the device's compute or SDMA queue blocked.
fn until_blocked(dev: &Arc<AmdDevice>, emu: &EmuDriver, sdma: bool) {
    let (c, s) = dev.backend().queue_ids();
    let q = if sdma { s } else { c };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = emu.queue_report(dev.backend().gpu_id(), q).unwrap();
        if st.waiting {
            return;
        }
        assert!(Instant::now() < deadline, "queue {q} never blocked: {st}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn compute_queue_waits_for_a_cpu_write() {
    let (dev, emu) = one_gpu();
    let (gate, done) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 5).unwrap().signal(&done, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    until_blocked(&dev, &emu, false);
    assert_eq!(done.value().unwrap(), 0, "nothing after the wait ran");
    gate.set_value(4).unwrap();
    until_blocked(&dev, &emu, false); // 4 < 5: still waiting
    gate.set_value(5).unwrap();
    dev.wait_signal(&done, 1, "after the gate").unwrap();
}

#[test]
fn compute_queue_waits_for_the_copy_queue() {
    let (dev, emu) = one_gpu();
    let (a, b) = alloc(&dev, 256);
    let (mid, done) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut cq = dev.backend().compute_queue();
    cq.wait(&mid, 1).unwrap().signal(&done, 7).unwrap();
    cq.submit(dev.backend()).unwrap();
    until_blocked(&dev, &emu, false);
    a.copyin(&b, &[1u8; 256]).unwrap();
    a.synchronize().unwrap();
    // The copy queue copies and then releases the compute queue.
    let (_, dst) = alloc(&dev, 256);
    let mut sq = dev.backend().copy_queue();
    sq.copy(dst.addr, b.addr, 256)
        .unwrap()
        .signal(&mid, 1)
        .unwrap();
    sq.submit(dev.backend()).unwrap();
    dev.wait_signal(&done, 7, "compute after copy").unwrap();
    let mut out = vec![0u8; 256];
    a.copyout(&mut out, &dst).unwrap();
    assert_eq!(out, vec![1u8; 256]);
}

#[test]
fn a_gpu_waits_for_another_gpus_signal() {
    let (proc, emu) = mock_process(2, "gfx1100");
    let (d0, d1) = (open(&proc, 0), open(&proc, 1));
    let (s, done) = (d0.new_signal(0).unwrap(), d1.new_signal(0).unwrap());
    let mut q1 = d1.backend().copy_queue();
    q1.wait(&s, 3).unwrap().signal(&done, 1).unwrap();
    q1.submit(d1.backend()).unwrap();
    until_blocked(&d1, &emu, true);
    let mut q0 = d0.backend().compute_queue();
    q0.signal(&s, 3).unwrap();
    q0.submit(d0.backend()).unwrap();
    d1.wait_signal(&done, 1, "cross-GPU wait").unwrap();
}

#[test]
fn timeline_wraps_with_the_shadow_signal() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_add", &add_uops(1, 16, dtypes::float32));
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(64, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 16])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 16])).unwrap();
    let near = (1u64 << 31) - 2;
    dev.force_timeline_value(near).unwrap();
    let before = dev.timeline_signal();
    assert_eq!(before.value().unwrap(), near - 1);
    for _ in 0..4 {
        prg.call(&bufs, &[], Some([1, 1, 1]), Some([16, 1, 1]), false)
            .unwrap();
    }
    assert_eq!(
        dev.timeline_value(),
        near + 4,
        "past 2^31 before the synchronize"
    );
    dev.synchronize().unwrap();
    let after = dev.timeline_signal();
    assert!(!after.same(&before), "the shadow became the timeline");
    assert_eq!((dev.timeline_value(), dev.timeline_epoch()), (1, 1));
    assert_eq!(after.value().unwrap(), 0, "the new timeline restarts at 0");
    assert_eq!(
        before.value().unwrap(),
        near + 3,
        "the old one keeps its value"
    );
    // Work after the swap completes (copies and kernels on the new timeline).
    a.copyin(&bufs[2], &f32_bytes(&[5.0; 16])).unwrap();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([16, 1, 1]), true)
        .unwrap();
    let mut out = vec![0u8; 64];
    a.copyout(&mut out, &bufs[0]).unwrap();
    assert_eq!(f32s(&out), vec![6.0f32; 16]);
    assert_eq!(after.value().unwrap(), dev.timeline_value() - 1);
    // A second wrap swaps back.
    dev.force_timeline_value(near + 5).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[0.0; 16])).unwrap();
    dev.synchronize().unwrap();
    assert!(dev.timeline_signal().same(&before));
    assert_eq!(dev.timeline_epoch(), 2);
}
