//! Faults the emulator injects on purpose (issue 13): a KFD ioctl failing in the middle of a
//! copy's set-up, a kernel load, or the peer mapping of a transfer to a second GPU, VRAM
//! exhaustion under the LRU allocator, a GPU reset in the middle of a run, and a signal the GPU
//! lowers while the CPU waits on it. Each must produce an error naming the cause, leak no
//! buffer object or address range, and leave the devices working.

use super::faults::{check_recovered, stuck_run, warm};
use super::*;
use crate::device::allocator::LruAllocator;
use crate::driver::Driver;
use crate::hcq::{HcqBackend, HcqDevice, HcqSignal, HwQueue};
use crate::helpers::Context;
use crate::Error;

#[test]
fn an_ioctl_failing_mid_copy_is_an_error_and_leaks_nothing() {
    let (dev, emu) = one_gpu();
    let (a, b) = alloc(&dev, 64);
    let before = (emu.allocation_count(), emu.va_range_count());
    // The first copy makes the staging buffer: ALLOC succeeds, its MAP_MEMORY_TO_GPU fails.
    emu.fail_ioctl("AMDKFD_IOC_MAP_MEMORY_TO_GPU", 0, libc::ENOMEM)
        .unwrap();
    let e = a.copyin(&b, &[7u8; 64]).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("MAP_MEMORY_TO_GPU") && m.contains("injected") && m.contains("ENOMEM"),
        "{e}"
    );
    assert_eq!(
        (emu.allocation_count(), emu.va_range_count()),
        before,
        "the half-made staging buffer was freed and its VA released"
    );
    drop((a, b));
    check_recovered(&dev, &emu, before.0 - 1);
}

#[test]
fn an_ioctl_failing_mid_kernel_load_leaks_nothing() {
    let (dev, emu, baseline) = warm();
    let va = emu.va_range_count();
    // Loading a program allocates its code buffer: fail that ALLOC.
    emu.fail_ioctl("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", 0, libc::ENOMEM)
        .unwrap();
    let src = MockAmdRenderer::new()
        .render("E_inj", &add_uops(1, 8, dtypes::float32))
        .unwrap();
    let lib = MockAmdCompiler::new(dev.backend().target())
        .compile(&src)
        .unwrap();
    let e = AmdRuntime::new(dev.clone())
        .load("E_inj", &lib)
        .err()
        .expect("the load must fail");
    assert!(e.message().contains("ALLOC_MEMORY_OF_GPU"), "{e}");
    assert_eq!(emu.allocation_count(), baseline, "no buffer object left");
    assert_eq!(emu.va_range_count(), va, "the VA reservation was undone");
    check_recovered(&dev, &emu, baseline);
}

/// With 8 MiB of VRAM left on `dev` (on any HCQ device: the AMD and NV tests share it): two
/// 4 MiB buffers fill it and wait freed in the LRU cache, 6 MiB fits only once the cache is
/// flushed, 4 MiB more does not fit at all. Returns that error's message (everything freed).
pub(crate) fn lru_flush_then_shortage<B: HcqBackend>(dev: &Arc<HcqDevice<B>>) -> String {
    const MB: usize = 1 << 20;
    let lru = LruAllocator::new(HcqAllocator::new(dev.clone()));
    let opts = BufferOptions::default();
    let (x, y) = (
        lru.alloc(4 * MB, &opts).unwrap(),
        lru.alloc(4 * MB, &opts).unwrap(),
    );
    lru.free(x, 4 * MB, &opts);
    lru.free(y, 4 * MB, &opts);
    assert_eq!(lru.cached_count(), 2);
    let z = lru.alloc(6 * MB, &opts).unwrap();
    assert_eq!(lru.cached_count(), 0, "the cache was flushed to make room");
    let e = lru.alloc(4 * MB, &opts).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("allocation of 4194304 bytes failed after freeing the LRU cache"),
        "{m}"
    );
    lru.free(z, 6 * MB, &opts);
    m.to_string()
}

#[test]
fn vram_exhaustion_flushes_the_lru_cache_then_names_the_shortage() {
    let (dev, emu, baseline) = warm();
    let gpu = dev.backend().gpu_id();
    let used = emu.vram_used(gpu).unwrap();
    emu.limit_vram(gpu, used + (8 << 20)).unwrap();
    let m = lru_flush_then_shortage(&dev);
    assert!(m.contains("out of VRAM") && m.contains("ENOMEM"), "{m}");
    assert_eq!(
        emu.vram_used(gpu).unwrap(),
        used,
        "every VRAM byte came back"
    );
    emu.limit_vram(gpu, u64::MAX).unwrap();
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_failing_peer_mapping_fails_the_transfer_and_both_gpus_work_after() {
    let (proc, emu) = mock_process(2, "gfx1100");
    let (d0, d1) = (open(&proc, 0), open(&proc, 1));
    let (a0, c0) = alloc(&d0, 5000);
    let (a1, b1) = alloc(&d1, 5000);
    let data: Vec<u8> = (0..5000).map(|i| (i * 7 % 251) as u8).collect();
    a0.copyin(&c0, &data).unwrap();
    a0.synchronize().unwrap();
    let before = (emu.allocation_count(), emu.va_range_count());
    // Across GPUs the destination (on GPU 1) is first mapped into GPU 0: that ioctl fails.
    emu.fail_ioctl("AMDKFD_IOC_MAP_MEMORY_TO_GPU", 0, libc::ENOMEM)
        .unwrap();
    let e = a0.transfer(&b1, &c0, 5000).unwrap_err();
    assert!(
        e.message().contains("MAP_MEMORY_TO_GPU") && e.message().contains("injected"),
        "{e}"
    );
    let ids = emu.gpu_ids();
    let m1 = crate::hcq::allocator::hcq_mem::<super::super::AmdBackend>(&b1).unwrap();
    assert_eq!(
        m1.buffer().mapped_on(),
        vec![ids[1]],
        "no half-made mapping"
    );
    assert_eq!((emu.allocation_count(), emu.va_range_count()), before);
    assert_eq!((d0.pending_count(), d1.pending_count()), (0, 0));
    // The same transfer works once the fault is gone, and GPU 1 sees the data.
    a0.transfer(&b1, &c0, 5000).unwrap();
    let mut out = vec![0u8; 5000];
    a1.copyout(&mut out, &b1).unwrap();
    assert_eq!(out, data);
}

#[test]
fn a_gpu_reset_mid_run_is_a_named_fault_and_the_device_recovers() {
    let (dev, emu, baseline) = warm();
    let va = emu.va_range_count();
    // A run in progress: the compute queue waits on a gate, a kernel is queued behind it.
    let (gate, q, prg, bufs) = stuck_run(&dev, "E_reset");
    let ids = dev.backend().queue_ids();
    emu.reset_gpu(dev.backend().gpu_id()).unwrap();
    let e = {
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
        dev.synchronize().unwrap_err()
    };
    let Error::Fault(m) = &e else {
        panic!("expected a fault (not a timeout), got {e}")
    };
    for needle in [
        format!("GPU reset on gpu_id {:#x}", dev.backend().gpu_id()),
        "whole GPU reset after a GPU hang".into(),
        "memory_lost 1: buffer contents are undefined".into(),
        "exec E_reset".into(),
        "compute queue".into(),
        "rptr".into(),
        "stopped for a GPU reset".into(),
        "queues were reset".into(),
    ] {
        assert!(m.contains(&needle), "report lacks {needle:?}: {m}");
    }
    // KFD reuses queue ids; the queues behind them are new, so not stopped.
    for q in [ids.0, ids.1] {
        let st = emu.queue_report(dev.backend().gpu_id(), q).unwrap();
        assert_eq!(st.fault, None, "queue {q} was recreated: {st}");
    }
    drop((bufs, prg, q, gate));
    assert_eq!(emu.va_range_count(), va, "no VA range leaked");
    check_recovered(&dev, &emu, baseline);
}

/// The GPU lowers a signal from 7 to 3 once a gate opens, while the CPU waits for it to reach
/// 10 (on any HCQ device: the AMD and NV tests share it). The wait must end as a fault naming
/// both values; returns the message once the queue and signals are gone.
pub(crate) fn lowered_signal_fault<B: HcqBackend>(dev: &Arc<HcqDevice<B>>) -> String {
    let gate = dev.new_signal(0).unwrap();
    let watched = dev.new_signal(7).unwrap();
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.signal(&watched, 3).unwrap();
    q.submit(dev.backend()).unwrap();
    let opener = {
        let g = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            g.set_value(1)
        })
    };
    let e = {
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 5000)]);
        dev.wait_signal(&watched, 10, "wait for the watched signal")
            .unwrap_err()
    };
    opener.join().unwrap().unwrap();
    let Error::Fault(m) = e else {
        panic!("expected a fault, got {e}")
    };
    assert!(
        m.contains("went backwards from 7 to 3 while waiting for 10"),
        "{m}"
    );
    assert_eq!(watched.value().unwrap(), 3, "the software GPU wrote it");
    m
}

#[test]
fn a_signal_the_gpu_lowers_during_a_wait_is_a_fault_naming_both_values() {
    let (dev, emu, baseline) = warm();
    let m = lowered_signal_fault(&dev);
    assert!(m.contains("compute queue") && m.contains("rptr"), "{m}");
    check_recovered(&dev, &emu, baseline);
}
