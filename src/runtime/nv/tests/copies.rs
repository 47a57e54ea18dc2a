//! Copies through the HCQ allocator on NV: staging through host OS-descriptor memory (one and
//! several chunks), copies on one device, transfers between two emulated GPUs.

use super::*;
use crate::hcq::signal::HcqSignal;
use crate::hcq::HcqBackend;
use crate::runtime::nv::memory::{MemKind, MemOrigin};

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
}

#[test]
fn multi_chunk_copy_through_the_staging_ring() {
    let (dev, _emu) = one_gpu();
    let n = 9 << 20;
    let (a, b) = alloc(&dev, n);
    let data = pattern(n, 7);
    let v0 = dev.timeline_value();
    a.copyin(&b, &data).unwrap();
    assert_eq!(
        dev.timeline_value(),
        v0 + 3,
        "one submission per 4 MiB chunk"
    );
    let mut out = vec![0u8; n];
    a.copyout(&mut out, &b).unwrap();
    assert!(out == data, "multi-chunk round trip differs");
    a.synchronize().unwrap();
    assert_eq!(dev.pending_count(), 0);
}

/// Copies that finish before the next one starts reuse one staging buffer; while the GPU is
/// held up (a kernel behind a gate on the timeline, so every copy waits), a copy of several
/// chunks takes one buffer per chunk, and once it is done copyout reuses them.
#[test]
fn idle_staging_buffers_are_reused_before_new_ones_are_made() {
    let (dev, _emu) = one_gpu();
    let (a, b) = alloc(&dev, 9 << 20);
    let small = pattern(4096, 3);
    let mut out = vec![0u8; 4096];
    let staged = || dev.staging.lock().unwrap().bufs.len();
    for _ in 0..20 {
        a.copyin(&b, &small).unwrap();
        a.synchronize().unwrap();
        a.copyout(&mut out, &b).unwrap();
        assert_eq!(out, small);
    }
    assert_eq!(staged(), 1);
    let (gate, _q, _prg, _bufs) = super::faults::stuck_run(&dev, "E_gate");
    let big = pattern(9 << 20, 5);
    a.copyin(&b, &big).unwrap();
    assert_eq!(staged(), 3, "one buffer per chunk of 4 MiB in flight");
    gate.set_value(1).unwrap();
    a.synchronize().unwrap();
    let mut back = vec![0u8; 9 << 20];
    a.copyout(&mut back, &b).unwrap();
    assert!(back == big, "multi-chunk round trip differs");
    assert_eq!(staged(), 3, "copyout reuses the idle buffers");
}

/// A copyout of several chunks submits the next chunk's copy before it reads the current one
/// out, so it needs a second staging buffer, never the one about to be read (even when that
/// one's copy has already finished); sequential copies would reuse one buffer. Every byte
/// comes back, at chunk edges and through the streaming read-out as well.
#[test]
fn copyout_reads_one_chunk_while_the_next_is_copied() {
    let (dev, _emu) = one_gpu();
    let chunk = dev.backend().staging_chunk();
    let n = 3 * chunk + 100;
    let (a, b) = alloc(&dev, n);
    let data = pattern(n, 11);
    // Filled one chunk at a time, each copy finished before the next: one staging buffer.
    for (i, piece) in data.chunks(chunk).enumerate() {
        let at = a.offset(&b, piece.len(), i * chunk).unwrap();
        a.copyin(&at, piece).unwrap();
        a.synchronize().unwrap();
    }
    let staged = || dev.staging.lock().unwrap().bufs.len();
    assert_eq!(staged(), 1);
    for len in [n, 2 * chunk, chunk + 1, chunk, 4096] {
        let mut out = vec![0u8; len];
        let view = a.offset(&b, len, 0).unwrap();
        a.copyout(&mut out, &view).unwrap();
        assert!(out == data[..len], "a copyout of {len} bytes differs");
    }
    assert_eq!(staged(), 2, "two buffers in turn, never more");
    // All idle now: the reserved buffer is still never handed out.
    a.synchronize().unwrap();
    let mut stg = dev.staging.lock().unwrap();
    for reserved in 0..2 {
        let (slot, _) = dev.staging_slot(&mut stg, Some(reserved)).unwrap();
        assert_ne!(slot, reserved, "the buffer about to be read was handed out");
    }
}

#[test]
fn staging_is_host_os_descriptor_memory() {
    let (dev, _emu) = one_gpu();
    let b = HcqBackend::alloc(dev.backend(), 4096, &crate::hcq::device::STAGING_OPTS).unwrap();
    assert_eq!(b.kind(), MemKind::Host);
    assert_eq!(b.origin(), MemOrigin::OsDescriptor);
    assert!(
        b.handle() >= 0x1000,
        "client-chosen handle {:#x}",
        b.handle()
    );
}

#[test]
fn copy_between_buffers_on_one_device() {
    let (dev, _emu) = one_gpu();
    let (a, x) = alloc(&dev, 8192);
    let y = a.alloc(8192, &BufferOptions::default()).unwrap();
    let data = pattern(8192, 3);
    a.copyin(&x, &data).unwrap();
    a.transfer(&y, &x, 8192).unwrap();
    let mut out = vec![0u8; 8192];
    a.copyout(&mut out, &y).unwrap();
    assert_eq!(out, data);
}

#[test]
fn transfer_between_two_emulated_gpus() {
    let (p, _emu) = mock_nv(2, "hopper", "");
    let (d0, d1) = (open(&p, 0), open(&p, 1));
    let (a0, x) = alloc(&d0, 1 << 16);
    let (a1, y) = alloc(&d1, 1 << 16);
    let data = pattern(1 << 16, 11);
    a0.copyin(&x, &data).unwrap();
    a1.transfer(&y, &x, 1 << 16).unwrap();
    let mut out = vec![0u8; 1 << 16];
    a1.copyout(&mut out, &y).unwrap();
    assert!(out == data, "NV -> NV:1 transfer differs");
}
