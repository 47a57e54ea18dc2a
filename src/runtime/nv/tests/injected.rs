//! Faults the emulator injects on purpose (issue 13) into the NVIDIA driver and GPU: an RM_ALLOC
//! that RM refuses in the middle of a buffer allocation or of a kernel load, a UVM mapping that
//! fails in the middle of a copy or on the second GPU of a cross-device transfer, VRAM exhaustion
//! under the LRU allocator, a GPU reset (RM halting every channel for a critical error) in the
//! middle of a run, also on the second GPU of a transfer, and a signal the GPU lowers while the
//! CPU waits on it. Each must produce an error naming the cause, leak no RM handle, virtual
//! address range or channel, and leave the devices working.
//!
//! On NV a submission itself issues no ioctl (GP entries, USERD GPPut and the doorbell are memory
//! writes); the ioctls in the middle of a run are those of a staging buffer made by a copy, of a
//! peer mapping made by a transfer, and of a program load.

use super::faults::{check_recovered, stuck_run, warm};
use super::*;
use crate::hcq::{HcqBackend, HcqSignal, HwQueue};
use crate::helpers::Context;
use crate::sys::nv::common::NV_ERR_NO_MEMORY;
use crate::Error;

/// nverror.h: RM's error type for a GSP crash (kernel_gsp_tu102.c hands it to
/// `krcRcAndNotifyAllChannels`).
const GSP_ERROR: u32 = 120;

/// (RM objects, free VA bytes) of the process: what a handle or VA leak shows in.
fn live(dev: &Arc<NvDevice>, emu: &EmuDriver) -> (usize, (u64, u64)) {
    (
        emu.nv_object_count(),
        dev.backend().process().va_free_bytes(),
    )
}

#[test]
fn an_rm_alloc_failing_mid_alloc_is_named_and_leaks_no_handle_or_va() {
    let (dev, emu, baseline) = warm();
    let (a, b) = alloc(&dev, 64);
    drop(b);
    dev.synchronize().unwrap();
    let p = dev.backend().process().clone();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // A 1 MiB VRAM buffer: its VA is reserved, then RM_ALLOC of the memory object is refused.
    emu.fail_nv_ioctl("NV_ESC_RM_ALLOC", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let e = a.alloc(1 << 20, &BufferOptions::default()).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("NV_ESC_RM_ALLOC") && m.contains("NV_ERR_NO_MEMORY"),
        "{e}"
    );
    assert!(m.contains("injected failure"), "{e}");
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    // The fault was one-shot: the same allocation works now.
    let ok = a.alloc(1 << 20, &BufferOptions::default()).unwrap();
    drop(ok);
    drop(a);
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_failing_peer_mapping_fails_the_nv_transfer_and_both_gpus_work_after() {
    let (p, emu) = mock_nv(2, "hopper", "");
    let (d0, d1) = (open(&p, 0), open(&p, 1));
    let (a0, x) = alloc(&d0, 1 << 16);
    let (a1, y) = alloc(&d1, 1 << 16);
    let data: Vec<u8> = (0..1 << 16).map(|i| (i * 13 % 251) as u8).collect();
    a0.copyin(&x, &data).unwrap();
    a0.synchronize().unwrap();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // Across GPUs the source's device maps the destination (on GPU 1) through UVM: that fails.
    emu.fail_nv_ioctl("UVM_MAP_EXTERNAL_ALLOCATION", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let e = a1.transfer(&y, &x, 1 << 16).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("UVM_MAP_EXTERNAL_ALLOCATION") && m.contains("NV_ERR_NO_MEMORY"),
        "{e}"
    );
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    assert_eq!((d0.pending_count(), d1.pending_count()), (0, 0));
    // The same transfer works once the fault is gone, and GPU 1 holds the data.
    a1.transfer(&y, &x, 1 << 16).unwrap();
    let mut out = vec![0u8; 1 << 16];
    a1.copyout(&mut out, &y).unwrap();
    assert!(out == data, "NV -> NV:1 transfer after the fault differs");
    let mut back = vec![0u8; 1 << 16];
    a0.copyout(&mut back, &x).unwrap();
    assert!(back == data, "GPU 0 still works");
}

#[test]
fn an_rm_alloc_failing_mid_kernel_load_leaks_nothing() {
    let (dev, emu, baseline) = warm();
    let p = dev.backend().process().clone();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // Loading a program allocates its code (and constant) memory: RM refuses the first RM_ALLOC.
    emu.fail_nv_ioctl("NV_ESC_RM_ALLOC", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let b = dev.backend();
    let src = MockNvRenderer::new()
        .render("E_inj", &add_uops(1, 8, crate::dtype::dtypes::float32))
        .unwrap();
    let lib = MockNvCompiler::new(b.classes().arch, b.sm())
        .compile(&src)
        .unwrap();
    let e = NvRuntime::new(dev.clone())
        .load("E_inj", &lib)
        .err()
        .expect("the load must fail");
    assert!(
        e.message().contains("NV_ESC_RM_ALLOC") && e.message().contains("injected failure"),
        "{e}"
    );
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_uvm_mapping_failing_mid_copy_is_named_and_leaks_nothing() {
    let (dev, emu, _) = warm();
    let chunk = dev.backend().staging_chunk();
    let (a, b) = alloc(&dev, chunk + 64);
    let data: Vec<u8> = (0..chunk + 64).map(|i| (i % 253) as u8).collect();
    // The GPU held up (a kernel behind a gate), two chunks: the first reuses the warm device's
    // idle staging buffer and its copy is submitted; that buffer stays busy, so the second
    // needs a new one, whose UVM mapping fails with the first copy in flight.
    let (gate, _q, _prg, _bufs) = stuck_run(&dev, "E_gate");
    let (objects, (low, high)) = live(&dev, &emu);
    emu.fail_nv_ioctl("UVM_MAP_EXTERNAL_ALLOCATION", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let e = a.copyin(&b, &data).unwrap_err();
    gate.set_value(1).unwrap();
    let m = e.message();
    assert!(
        m.contains("UVM_MAP_EXTERNAL_ALLOCATION") && m.contains("NV_ERR_NO_MEMORY"),
        "{e}"
    );
    assert!(m.contains("of Host"), "names the staging allocation: {e}");
    // The first chunk's copy completes; the half-made second buffer is gone, handle and VA.
    dev.synchronize().unwrap();
    assert_eq!(
        live(&dev, &emu),
        (objects, (low, high)),
        "no RM handle and no VA range of the failed staging buffer left"
    );
    assert_eq!(dev.pending_count(), 0);
    let mut first = vec![0u8; chunk];
    let head = a.offset(&b, chunk, 0).unwrap();
    a.copyout(&mut first, &head).unwrap();
    assert!(
        first == data[..chunk],
        "the chunk submitted before the fault landed"
    );
    // The same copy works once the fault is gone.
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; chunk + 64];
    a.copyout(&mut out, &b).unwrap();
    assert!(out == data, "the copy after the fault differs");
    drop((head, b, a));
    dev.synchronize().unwrap();
    // The ring keeps the staging buffers it made: the VA balance from here on.
    let va = dev.backend().process().va_free_bytes();
    check_recovered(&dev, &emu, va);
}

#[test]
fn vram_exhaustion_flushes_the_lru_cache_then_names_size_and_free() {
    let (dev, emu, baseline) = warm();
    let used = emu.nv_vram_used(0).unwrap();
    emu.limit_nv_vram(0, used + (8 << 20)).unwrap();
    let objects = emu.nv_object_count();
    let m = crate::runtime::amd::tests::injected::lru_flush_then_shortage(&dev);
    assert!(
        m.contains("NV_ESC_RM_ALLOC") && m.contains("NV_ERR_NO_MEMORY"),
        "{m}"
    );
    // 6 of the 8 MiB are held when 4 MiB are asked for.
    assert!(
        m.contains("out of VRAM: 0x400000 bytes requested, 0x200000 free"),
        "{m}"
    );
    dev.synchronize().unwrap();
    assert_eq!(
        emu.nv_vram_used(0).unwrap(),
        used,
        "every VRAM byte came back"
    );
    assert_eq!(emu.nv_object_count(), objects, "no RM handle left");
    emu.limit_nv_vram(0, u64::MAX).unwrap();
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_gpu_reset_mid_run_is_a_named_fault_and_the_device_recovers() {
    let (dev, emu, baseline) = warm();
    let objects = emu.nv_object_count();
    // A run in progress: the compute channel waits on a gate, a kernel is queued behind it.
    let (gate, q, prg, bufs) = stuck_run(&dev, "E_reset");
    let old = emu.nv_channels(0);
    assert_eq!(
        emu.reset_nv_gpu(0, GSP_ERROR).unwrap(),
        2,
        "both channels halted"
    );
    // The gate opens after the halt: a halted channel runs nothing more, so the run never ends.
    gate.set_value(1).unwrap();
    let e = {
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
        dev.synchronize().unwrap_err()
    };
    let Error::Fault(m) = &e else {
        panic!("expected a fault (not a timeout), got {e}")
    };
    for needle in [
        "synchronize",
        "GSP_ERROR (120) in the error notifier",
        "exec E_reset",
        "compute channel",
        "DMA channel",
        "GPPut",
        "GPGet",
        "queues were reset",
    ] {
        assert!(m.contains(needle), "report lacks {needle:?}: {m}");
    }
    // New channels replaced the halted ones (RM frees the old TSG's channels).
    let new = emu.nv_channels(0);
    assert_eq!(new.len(), 2);
    assert!(
        new.iter().all(|c| old.iter().all(|o| o.handle != c.handle)),
        "the channels were rebuilt"
    );
    drop((bufs, prg, q, gate));
    dev.synchronize().unwrap();
    assert_eq!(
        emu.nv_object_count(),
        objects,
        "no RM handle leaked: the new TSG, channels and their memory replaced the old"
    );
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_signal_the_gpu_lowers_during_a_wait_is_a_fault_naming_both_values() {
    let (dev, emu, baseline) = warm();
    let m = crate::runtime::amd::tests::injected::lowered_signal_fault(&dev);
    assert!(m.contains("compute channel") && m.contains("GPGet"), "{m}");
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_reset_of_the_second_gpu_fails_its_side_of_a_transfer_and_both_recover() {
    let (p, emu) = mock_nv(2, "hopper", "");
    let (d0, d1) = (open(&p, 0), open(&p, 1));
    let (a0, x) = alloc(&d0, 1 << 16);
    let (a1, y) = alloc(&d1, 1 << 16);
    let data: Vec<u8> = (0..1 << 16).map(|i| (i * 11 % 251) as u8).collect();
    a0.copyin(&x, &data).unwrap();
    a1.copyin(&y, &[0u8; 1 << 16]).unwrap();
    d0.synchronize().unwrap();
    d1.synchronize().unwrap();
    // GPU 1's compute channel is held by a gate, so its wait for the transfer is still queued
    // when RM halts GPU 1's channels; GPU 0's copy does not depend on it.
    let gate = d1.new_signal(0).unwrap();
    let mut q = d1.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(d1.backend()).unwrap();
    a0.transfer(&y, &x, 1 << 16).unwrap();
    d0.synchronize().unwrap();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    assert_eq!(emu.reset_nv_gpu(1, GSP_ERROR).unwrap(), 2);
    assert!(emu.nv_channels(0).len() == 2, "GPU 0 untouched");
    let e = {
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
        d1.synchronize().unwrap_err()
    };
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    for needle in [
        "NV:1",
        "wait for the transfer from NV",
        "GSP_ERROR (120)",
        "compute channel",
        "GPPut",
    ] {
        assert!(m.contains(needle), "report lacks {needle:?}: {m}");
    }
    drop((q, gate));
    d1.synchronize().unwrap();
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle, channel or VA range leaked"
    );
    assert_eq!((d0.pending_count(), d1.pending_count()), (0, 0));
    // The copy GPU 0 made before the reset is in GPU 1's memory, and a new transfer works.
    let mut out = vec![0u8; 1 << 16];
    a1.copyout(&mut out, &y).unwrap();
    assert!(out == data, "the transfer's bytes landed before the reset");
    a1.copyin(&y, &[0u8; 1 << 16]).unwrap();
    a0.transfer(&y, &x, 1 << 16).unwrap();
    a1.copyout(&mut out, &y).unwrap();
    assert!(out == data, "a transfer after the reset differs");
    run_add(&d1, 2, 32);
    run_add(&d0, 2, 32);
}
