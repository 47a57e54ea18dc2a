//! Real-hardware tests: the emulator's bring-up sequence (steps 1-19; the order of tinygrad's
//! `NVDevice.__init__`, through the same `driver::nv` wrappers) run against the kernel's
//! `/dev/nvidiactl`. They run only where the NVIDIA driver's nodes exist and otherwise skip,
//! printing why (CI and most dev boxes).
//!
//! What they do on a GPU: allocate a client, device, usermode page, vaspace, TSG with two channels
//! and their engine objects, register everything with UVM, schedule the TSG, read GR info, map
//! small buffers on CPU and GPU, and ring each channel's doorbell without new GP entries (GPPut
//! unchanged, so the GPU has nothing to run). No pushbuffer is executed.

use std::sync::Arc;

use super::tests::{open_nv, GR_INDICES};
use crate::driver::api::Driver;
use crate::driver::real::RealDriver;
use crate::sys::nv::common::*;

fn real_nv() -> Option<Arc<dyn Driver>> {
    for node in ["/dev/nvidiactl", "/dev/nvidia-uvm"] {
        if !std::path::Path::new(node).exists() {
            eprintln!("skipped: {node} does not exist (no NVIDIA GPU with the kernel driver and nvidia-uvm here)");
            return None;
        }
    }
    Some(Arc::new(RealDriver::new()))
}

#[test]
fn real_nv_version_and_cards() {
    let Some(drv) = real_nv() else { return };
    let ctl = super::NvCtl::open(drv).unwrap();
    eprintln!("NVIDIA driver {} (family {})", ctl.version(), ctl.family());
    let cards = ctl.card_info(64).unwrap();
    assert!(
        !cards.is_empty(),
        "/dev/nvidiactl exists but CARD_INFO lists no GPU"
    );
    for c in &cards {
        eprintln!(
            "GPU gpu_id={:#x} device_id={:#x} minor={}",
            c.gpu_id, c.pci_info.device_id, c.minor_number
        );
    }
}

#[test]
fn real_nv_bringup_sequence() {
    let Some(drv) = real_nv() else { return };
    let nv = open_nv(&drv).unwrap();
    eprintln!("classes: {:x?}", nv.classes);
    let q = nv.queues().unwrap();
    for (i, v) in GR_INDICES.iter().zip(&q.gr) {
        eprintln!("GR info {i:#x} = {v:#x}");
    }
    assert!(q.gr[0] >= 0x800, "SM version {:#x}", q.gr[0]);
    assert_ne!(q.compute.token, q.dma.token);
    let bell = nv.doorbell.addr() + u64::from(NVC361_NOTIFY_CHANNEL_PENDING);
    for ch in [&q.compute, &q.dma] {
        // GPPut stays 0: the doorbell only tells the GPU to look, and it finds nothing.
        drv.write_doorbell(bell, u64::from(ch.token)).unwrap();
        let n = ch.notifier.cpu.as_ref().unwrap();
        assert_eq!(
            n.read_u32(12).unwrap() >> 16,
            0,
            "channel error notifier status"
        );
    }
    let k = q.kernargs.cpu.as_ref().unwrap();
    k.write_u32(0, 0x1234_5678).unwrap();
    assert_eq!(k.read_u32(0).unwrap(), 0x1234_5678);
}
