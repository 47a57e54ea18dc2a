//! Copies through the HCQ allocator: staging in and out (one and several 4 MiB chunks), views,
//! transfers on one device and between two emulated GPUs, deferred frees, parallel threads.

use super::*;
use crate::hcq::allocator::hcq_mem;
use crate::hcq::HcqBackend;
use crate::hcq::{HcqBuffer, HcqSignal, HwQueue};

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn copyin_copyout_roundtrip_small() {
    let (dev, _emu) = one_gpu();
    let (a, b) = alloc(&dev, 1000);
    let data = pattern(1000, 1);
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; 1000];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out, data);
    // A shorter copy out of the start.
    let mut head = vec![0u8; 10];
    a.copyout(&mut head, &b).unwrap();
    assert_eq!(head, data[..10]);
    assert!(
        a.copyin(&b, &[0u8; 1001]).is_err(),
        "larger than the buffer"
    );
}

#[test]
fn multi_chunk_copy_through_the_staging_ring() {
    let (dev, _emu) = one_gpu();
    let n = 9 << 20; // three 4 MiB staging chunks, the last partial
    let (a, b) = alloc(&dev, n);
    let data = pattern(n, 7);
    let v0 = dev.timeline_value();
    a.copyin(&b, &data).unwrap();
    assert_eq!(
        dev.timeline_value(),
        v0 + 3,
        "one timeline submission per chunk"
    );
    let mut out = vec![0u8; n];
    a.copyout(&mut out, &b).unwrap();
    assert!(out == data, "multi-chunk round trip differs");
    a.synchronize().unwrap();
    assert_eq!(
        dev.pending_count(),
        0,
        "everything retired after synchronize"
    );
}

#[test]
fn offset_views_read_and_write_inside_their_base() {
    let (dev, _emu) = one_gpu();
    let (a, b) = alloc(&dev, 4096);
    a.copyin(&b, &[0u8; 4096]).unwrap();
    let v = a.offset(&b, 100, 1000).unwrap();
    assert_eq!(v.addr, b.addr + 1000);
    a.copyin(&v, &[7u8; 100]).unwrap();
    let mut out = vec![0u8; 4096];
    a.copyout(&mut out, &b).unwrap();
    assert!(out[..1000].iter().all(|&x| x == 0));
    assert!(out[1000..1100].iter().all(|&x| x == 7));
    assert!(out[1100..].iter().all(|&x| x == 0));
    let vv = a.offset(&v, 10, 20).unwrap();
    let mut small = [0u8; 10];
    a.copyout(&mut small, &vv).unwrap();
    assert_eq!(small, [7u8; 10]);
    assert!(a.offset(&b, 100, 4000).is_err(), "view past the end");
}

#[test]
fn transfer_on_one_device_and_between_two_gpus() {
    let (proc, emu) = mock_process(2, "gfx1100");
    let (d0, d1) = (open(&proc, 0), open(&proc, 1));
    let (a0, b0) = alloc(&d0, 5000);
    let (a1, b1) = alloc(&d1, 5000);
    let data = pattern(5000, 3);
    a0.copyin(&b0, &data).unwrap();
    // Same device: into a second buffer.
    let c0 = a0.alloc(5000, &BufferOptions::default()).unwrap();
    a0.transfer(&c0, &b0, 5000).unwrap();
    // Across GPUs: the destination gets mapped into GPU 0.
    a0.transfer(&b1, &c0, 5000).unwrap();
    let m1 = hcq_mem::<super::super::AmdBackend>(&b1).unwrap();
    let ids = emu.gpu_ids();
    assert_eq!(m1.buffer().mapped_on(), vec![ids[1], ids[0]]);
    // GPU 1's timeline waits for the copy before later work: copy out through GPU 1 directly.
    let mut out = vec![0u8; 5000];
    a1.copyout(&mut out, &b1).unwrap();
    assert_eq!(out, data);
    // Back the other way.
    let (_, back) = alloc(&d0, 5000);
    a1.transfer(&back, &b1, 5000).unwrap();
    let mut out2 = vec![0u8; 5000];
    a0.copyout(&mut out2, &back).unwrap();
    assert_eq!(out2, data);
    assert!(
        a0.transfer(&b1, &c0, 6000).is_err(),
        "larger than the buffers"
    );
}

#[test]
fn free_defers_until_the_timeline_passes() {
    let (dev, emu) = one_gpu();
    let (a, b) = alloc(&dev, 1 << 20);
    let va = hcq_mem::<super::super::AmdBackend>(&b)
        .unwrap()
        .buffer()
        .va();
    // Hold the SDMA queue on a signal so the copy below stays pending.
    let gate = dev.new_signal(0).unwrap();
    let mut q = dev.backend().copy_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    a.copyin(&b, &pattern(1 << 20, 9)).unwrap();
    let count = emu.allocation_count();
    a.free(b, 1 << 20, &BufferOptions::default());
    let gpu = emu.device(emu.gpu_ids()[0]).unwrap();
    assert_eq!(
        emu.allocation_count(),
        count,
        "the pending copy still holds the buffer"
    );
    assert!(gpu.is_mapped(va, 4));
    gate.set_value(1).unwrap();
    a.synchronize().unwrap();
    assert_eq!(
        emu.allocation_count(),
        count - 1,
        "released once the copy retired"
    );
    assert!(!gpu.is_mapped(va, 4));
}

#[test]
fn parallel_threads_share_one_device() {
    let (dev, _emu) = one_gpu();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let dev = dev.clone();
            // Each thread says what failed (a join error alone hides it).
            std::thread::spawn(move || -> Result<(), String> {
                let a = HcqAllocator::new(dev.clone());
                let b = a
                    .alloc(3000, &BufferOptions::default())
                    .map_err(|e| format!("thread {t}: alloc: {e}"))?;
                for round in 0..5 {
                    let data = pattern(3000, t * 100 + round);
                    a.copyin(&b, &data)
                        .map_err(|e| format!("thread {t} round {round}: copyin: {e}"))?;
                    let mut out = vec![0u8; 3000];
                    a.copyout(&mut out, &b)
                        .map_err(|e| format!("thread {t} round {round}: copyout: {e}"))?;
                    if let Some(i) = out.iter().zip(&data).position(|(x, y)| x != y) {
                        return Err(format!("thread {t} round {round}: byte {i} differs"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        match t.join() {
            Ok(r) => r.unwrap(),
            Err(_) => panic!("a copy thread panicked (its message is above)"),
        }
    }
    dev.synchronize().unwrap();
}
