//! Real-hardware tests of the AMD backend: the same device code on the kernel's `/dev/kfd`.
//! They run only where `/dev/kfd` exists with a GPU of the target table, and otherwise skip,
//! printing why. Kernels are not run here: that needs the LLVM amdgcn compiler, which is not
//! wired into the device yet.

use std::sync::Arc;

use super::{open_amd_device, AmdDevice, AmdProcess};
use crate::device::{Allocator, BufferOptions};
use crate::driver::RealDriver;
use crate::hcq::{HcqAllocator, HcqBackend, HcqSignal, HwQueue};
use crate::hw::amd::targets;

fn real_gpus() -> Option<Arc<AmdProcess>> {
    if !std::path::Path::new("/dev/kfd").exists() {
        eprintln!("skipped: /dev/kfd does not exist (no AMD GPU with the amdgpu/KFD driver here)");
        return None;
    }
    let proc = AmdProcess::new(Arc::new(RealDriver::new())).expect("open /dev/kfd");
    let Some(n) = proc.nodes().first() else {
        eprintln!("skipped: /dev/kfd exists but the topology lists no GPU");
        return None;
    };
    let v = n.props.gfx_target_version().expect("gfx_target_version");
    if let Err(e) = targets::lookup(v) {
        eprintln!("skipped: {e}");
        return None;
    }
    Some(proc)
}

fn device(proc: &Arc<AmdProcess>, i: usize) -> Arc<AmdDevice> {
    open_amd_device(proc, i, &format!("AMD:{i}")).expect("open the AMD device")
}

#[test]
fn real_copies_through_staging() {
    let Some(proc) = real_gpus() else { return };
    let dev = device(&proc, 0);
    let a = HcqAllocator::new(dev.clone());
    let n = 9 << 20;
    let b = a.alloc(n, &BufferOptions::default()).unwrap();
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; n];
    a.copyout(&mut out, &b).unwrap();
    assert!(out == data, "round trip through VRAM differs");
    if proc.nodes().len() > 1 {
        let d1 = device(&proc, 1);
        let a1 = HcqAllocator::new(d1);
        let c = a1.alloc(n, &BufferOptions::default()).unwrap();
        a.transfer(&c, &b, n).unwrap();
        let mut out = vec![0u8; n];
        a1.copyout(&mut out, &c).unwrap();
        assert!(out == data, "peer transfer differs");
    }
}

#[test]
fn real_signals_from_both_queues() {
    let Some(proc) = real_gpus() else { return };
    let dev = device(&proc, 0);
    let s = dev.new_signal(0).unwrap();
    let mut q = dev.backend().compute_queue();
    q.signal(&s, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    dev.wait_signal(&s, 1, "compute signal").unwrap();
    let mut c = dev.backend().copy_queue();
    c.wait(&s, 1)
        .unwrap()
        .timestamp(&s)
        .unwrap()
        .signal(&s, 2)
        .unwrap();
    c.submit(dev.backend()).unwrap();
    dev.wait_signal(&s, 2, "SDMA signal").unwrap();
    assert!(s.timestamp().unwrap() > 0, "SDMA wrote a timestamp");
    dev.synchronize().unwrap();
}
