//! The software-GPU hook and events: a test GPU attached to a device sees queue creation,
//! doorbells (and reads the ring through its own page table) and signals KFD events the way
//! RELEASE_MEM + interrupt does; WAIT_EVENTS wakes from other threads, reports faults, fails on
//! destroyed events.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::*;
use crate::driver::kfd::*;
use crate::mockgpu::{EmuDevice, EmuGpu, EmuQueue, QueueKind};

/// Records what KFD tells it; on a doorbell reads the ring's first dword through its page table
/// and, if armed, writes an event mailbox and raises the interrupt.
#[derive(Default)]
struct RecGpu {
    log: Mutex<Vec<String>>,
    /// (mailbox VA, event id) to signal on every doorbell.
    signal: Mutex<Option<(u64, u32)>>,
    refuse_sdma: bool,
}

impl EmuGpu for RecGpu {
    fn create_queue(&self, _dev: &EmuDevice, q: &Arc<EmuQueue>) -> Result<()> {
        if self.refuse_sdma && q.kind == QueueKind::Sdma {
            return Err(crate::driver::api::errno_error(
                libc::EINVAL,
                "test gpu runs no SDMA",
            ));
        }
        self.log
            .lock()
            .unwrap()
            .push(format!("create {} {:?}", q.queue_id, q.kind));
        Ok(())
    }
    fn on_doorbell(&self, dev: &EmuDevice, q: &Arc<EmuQueue>, value: u64) {
        let first = dev
            .translate(q.ring_va, 4, false)
            .and_then(|m| m.read_u32(0));
        let wptr = dev
            .translate(q.wptr_va, 8, false)
            .and_then(|m| m.load_u64(0, Ordering::Acquire));
        self.log.lock().unwrap().push(format!(
            "doorbell {} {value} {first:x?} {wptr:?}",
            q.queue_id
        ));
        if let Some((mailbox, id)) = *self.signal.lock().unwrap() {
            dev.translate(mailbox, 8, true)
                .unwrap()
                .store_u64(0, id as u64, Ordering::Release)
                .unwrap();
            dev.interrupt(id).unwrap();
        }
    }
    fn destroy_queue(&self, _dev: &EmuDevice, q: &Arc<EmuQueue>) {
        self.log
            .lock()
            .unwrap()
            .push(format!("destroy {}", q.queue_id));
    }
}

/// A device with an event page and one auto-reset signal event.
fn with_event() -> (
    Arc<dyn Driver>,
    crate::mockgpu::EmuDriver,
    Dev,
    Buf,
    kfd_ioctl_create_event_args,
) {
    let (drv, emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let page = dev
        .alloc(KFD_SIGNAL_EVENT_PAGE_SIZE as u64, GTT_UC, true)
        .unwrap();
    let ev = ops::create_event(
        drv.as_ref(),
        dev.kfd,
        KFD_IOC_EVENT_SIGNAL,
        true,
        page.alloc.handle,
    )
    .unwrap();
    (drv, emu, dev, page, ev)
}

#[test]
fn software_gpu_sees_queues_and_doorbells_and_signals_events() {
    let (drv, emu, dev, page, ev) = with_event();
    let gpu = Arc::new(RecGpu::default());
    emu.attach_gpu(dev.gpu_id, gpu.clone()).unwrap();
    let qb = dev.queue_buffers(0x1000, true).unwrap();
    let mut a = dev.queue_args(&qb);
    ops::create_queue(drv.as_ref(), dev.kfd, &mut a).unwrap();
    let q = &emu.queues()[0];
    assert_eq!(
        (q.kind, q.ring_size, q.rptr_va, q.gfx_target_version),
        (QueueKind::Compute, 0x1000, qb.rw.va + 8, 110000)
    );
    assert_eq!(q.ctx_save_restore_size, dev.sizes.cwsr_size);

    *gpu.signal.lock().unwrap() = Some((page.va + 8 * ev.event_slot_index as u64, ev.event_id));
    qb.ring
        .cpu
        .as_ref()
        .unwrap()
        .write_u32(0, 0xC000_1000)
        .unwrap();
    qb.rw
        .cpu
        .as_ref()
        .unwrap()
        .store_u64(0, 2, Ordering::Release)
        .unwrap();
    let base = a.doorbell_offset & !0x1FFF;
    let db = Mapping::map(
        &drv,
        None,
        0x2000,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        base,
    )
    .unwrap();
    drv.write_doorbell(db.addr() + (a.doorbell_offset & 0x1FFF), 2)
        .unwrap();
    assert_eq!(
        db.read_u64((a.doorbell_offset & 0x1FFF) as usize).unwrap(),
        2,
        "the doorbell page holds the value"
    );
    let mut data = [ops::event_data(ev.event_id)];
    assert_eq!(
        ops::wait_events(drv.as_ref(), dev.kfd, &mut data, false, 0).unwrap(),
        KFD_IOC_WAIT_RESULT_COMPLETE
    );
    let slot = page
        .cpu
        .as_ref()
        .unwrap()
        .read_u64(8 * ev.event_slot_index as usize)
        .unwrap();
    assert_eq!(slot, UNSIGNALED_EVENT_SLOT, "KFD acknowledges the mailbox");
    ops::destroy_queue(drv.as_ref(), dev.kfd, a.queue_id).unwrap();
    let log = gpu.log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![
            format!("create {} Compute", a.queue_id),
            format!("doorbell {} 2 Ok(c0001000) Ok(2)", a.queue_id),
            format!("destroy {}", a.queue_id)
        ]
    );
}

#[test]
fn a_gpu_can_refuse_a_queue() {
    let (drv, emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    emu.attach_gpu(
        dev.gpu_id,
        Arc::new(RecGpu {
            refuse_sdma: true,
            ..Default::default()
        }),
    )
    .unwrap();
    let qb = dev.queue_buffers(0x1000, false).unwrap();
    let r = ops::create_queue(drv.as_ref(), dev.kfd, &mut dev.queue_args(&qb));
    assert!(message(r).contains("test gpu runs no SDMA"));
    assert!(emu.queues().is_empty(), "rolled back");
    dev.free_queue_buffers(qb).unwrap();
}

#[test]
fn wait_wakes_from_another_thread_and_interrupt_scans_slots() {
    let (drv, emu, dev, page, ev) = with_event();
    let ev2 = ops::create_event(drv.as_ref(), dev.kfd, KFD_IOC_EVENT_SIGNAL, false, 0).unwrap();
    let gpu = emu.device(dev.gpu_id).unwrap();
    let (d2, kfd) = (drv.clone(), dev.kfd);
    let ids = [ev.event_id, ev2.event_id];
    let waiter = std::thread::spawn(move || {
        let mut data = ids.map(ops::event_data);
        ops::wait_events(
            d2.as_ref(),
            kfd,
            &mut data,
            true,
            KFD_EVENT_TIMEOUT_INFINITE,
        )
    });
    // Both mailboxes written, one interrupt with a context id naming neither: KFD scans the page.
    let cpu = page.cpu.as_ref().unwrap();
    cpu.store_u64(8 * ev.event_slot_index as usize, 1, Ordering::Release)
        .unwrap();
    cpu.store_u64(8 * ev2.event_slot_index as usize, 1, Ordering::Release)
        .unwrap();
    gpu.interrupt(0).unwrap();
    assert_eq!(
        waiter.join().unwrap().unwrap(),
        KFD_IOC_WAIT_RESULT_COMPLETE
    );
    // ev2 is manual-reset: still signaled; an interrupt with nothing written changes nothing.
    let mut one = [ops::event_data(ev2.event_id)];
    assert_eq!(
        ops::wait_events(drv.as_ref(), dev.kfd, &mut one, false, 0).unwrap(),
        KFD_IOC_WAIT_RESULT_COMPLETE
    );
    ops::reset_event(drv.as_ref(), dev.kfd, ev2.event_id).unwrap();
    gpu.interrupt(ev2.event_id).unwrap();
    assert_eq!(
        ops::wait_events(drv.as_ref(), dev.kfd, &mut one, false, 0).unwrap(),
        KFD_IOC_WAIT_RESULT_TIMEOUT
    );
}

#[test]
fn destroying_an_awaited_event_fails_the_wait() {
    let (drv, emu, dev, _page, ev) = with_event();
    let (d2, kfd) = (drv.clone(), dev.kfd);
    let waiter = std::thread::spawn(move || {
        let mut data = [ops::event_data(ev.event_id)];
        ops::wait_events(
            d2.as_ref(),
            kfd,
            &mut data,
            false,
            KFD_EVENT_TIMEOUT_INFINITE,
        )
    });
    while !emu.kfd.events.has_waiters() {
        std::thread::yield_now();
    }
    ops::destroy_event(drv.as_ref(), dev.kfd, ev.event_id).unwrap();
    assert_eq!(errno(waiter.join().unwrap()), libc::EIO);
}

#[test]
fn vm_fault_reaches_memory_events_with_its_address() {
    let (drv, emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let mem = ops::create_event(drv.as_ref(), dev.kfd, KFD_IOC_EVENT_MEMORY, false, 0).unwrap();
    emu.device(dev.gpu_id)
        .unwrap()
        .vm_fault(0x7000_1234, true)
        .unwrap();
    let mut data = [ops::event_data(mem.event_id)];
    assert_eq!(
        ops::wait_events(drv.as_ref(), dev.kfd, &mut data, false, 0).unwrap(),
        KFD_IOC_WAIT_RESULT_COMPLETE
    );
    let m = ops::memory_exception(&data[0]);
    assert_eq!(
        (m.va, m.gpu_id, m.failure.NotPresent, m.failure.ReadOnly),
        (0x7000_1000, dev.gpu_id, 1, 1)
    );
}

#[test]
fn kfd_allocated_event_page_is_mmappable() {
    let (drv, _emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let ev = ops::create_event(drv.as_ref(), dev.kfd, KFD_IOC_EVENT_SIGNAL, false, 0).unwrap();
    let m = Mapping::map(
        &drv,
        None,
        0x8000,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        ev.event_page_offset,
    )
    .unwrap();
    assert_eq!(
        m.read_u64(8 * ev.event_slot_index as usize).unwrap(),
        UNSIGNALED_EVENT_SLOT
    );
    let big = drv.mmap(
        None,
        0x10000,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        ev.event_page_offset,
    );
    assert_eq!(errno(big), libc::EINVAL);
    let wrong_size = drv.mmap(
        None,
        0x1000,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(dev.gpu_id),
    );
    assert_eq!(errno(wrong_size), libc::EINVAL);
    let no_dev = drv.mmap(
        None,
        0x2000,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(0xBAD),
    );
    assert_eq!(errno(no_dev), libc::ENODEV);
}

#[test]
fn a_gpu_reset_sets_hw_exception_events_with_memory_lost() {
    let (drv, emu) = emu(2);
    let dev = open_gpu(&drv, 0).unwrap();
    let hw = ops::create_event(drv.as_ref(), dev.kfd, KFD_IOC_EVENT_HW_EXCEPTION, true, 0).unwrap();
    let mem = ops::create_event(drv.as_ref(), dev.kfd, KFD_IOC_EVENT_MEMORY, true, 0).unwrap();
    let mut data = [ops::event_data(hw.event_id)];
    let wait = |data: &mut [kfd_event_data]| {
        ops::wait_events(drv.as_ref(), dev.kfd, data, false, 0).unwrap()
    };
    assert_eq!(wait(&mut data), KFD_IOC_WAIT_RESULT_TIMEOUT);
    let other = emu.gpu_ids()[1];
    emu.reset_gpu(other).unwrap();
    assert_eq!(wait(&mut data), KFD_IOC_WAIT_RESULT_COMPLETE);
    let h = ops::hw_exception(&data[0]);
    // kfd_signal_reset_event: whole-GPU reset after a hang, memory lost, the reset GPU's id.
    assert_eq!(
        (h.reset_type, h.reset_cause, h.memory_lost, h.gpu_id),
        (
            KFD_HW_EXCEPTION_WHOLE_GPU_RESET,
            KFD_HW_EXCEPTION_GPU_HANG,
            1,
            other
        )
    );
    // Auto-reset: consumed by the wait. A hang-caused reset leaves MEMORY events alone.
    assert_eq!(wait(&mut data), KFD_IOC_WAIT_RESULT_TIMEOUT);
    let mut m = [ops::event_data(mem.event_id)];
    assert_eq!(wait(&mut m), KFD_IOC_WAIT_RESULT_TIMEOUT);
    assert!(
        emu.reset_gpu(0xdead).is_err(),
        "an unknown gpu_id is refused"
    );
}
