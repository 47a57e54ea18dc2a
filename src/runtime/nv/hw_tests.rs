//! Real-hardware tests of the NV backend: they run only where `/dev/nvidiactl` and
//! `/dev/nvidia-uvm` exist and otherwise skip, saying why. On a GPU: the whole bring-up of
//! `NV:0`, a host semaphore round trip on the timeline, and a copy through the copy engine.

use std::sync::Arc;

use super::{open_nv_device, NvProcess};
use crate::device::{Allocator, BufferOptions};
use crate::driver::{Driver, RealDriver};
use crate::hcq::HcqAllocator;

fn real() -> Option<Arc<dyn Driver>> {
    for node in ["/dev/nvidiactl", "/dev/nvidia-uvm"] {
        if !std::path::Path::new(node).exists() {
            eprintln!("skipped: {node} does not exist (no NVIDIA GPU with the kernel driver and nvidia-uvm here)");
            return None;
        }
    }
    Some(Arc::new(RealDriver::new()))
}

#[test]
fn real_nv_brings_up_and_copies() {
    let Some(drv) = real() else { return };
    let p = NvProcess::new(drv).unwrap();
    let dev = open_nv_device(&p, 0, "NV").unwrap();
    dev.synchronize().unwrap();
    let a = HcqAllocator::new(dev.clone());
    let b = a.alloc(4096, &BufferOptions::default()).unwrap();
    let data: Vec<u8> = (0..4096).map(|i| (i * 7) as u8).collect();
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; 4096];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out, data);
}
