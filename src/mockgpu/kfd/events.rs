//! Emulated KFD events (`kfd_events.c` semantics): signal events own a 64-bit mailbox slot in
//! the signal-event page (a user GTT buffer registered by the first CREATE_EVENT, or a page KFD
//! allocates, mmappable from `/dev/kfd`); other events (MEMORY, HW_EXCEPTION, ...) get ids from
//! 0x40000000 up. An interrupt whose context id names an event with a written mailbox (or, failing
//! that, a scan of all written mailboxes) acknowledges the slot and sets the event; WAIT_EVENTS
//! sleeps until any/all of its events are set, the timeout passes, or an event is destroyed.
//!
//! Auto-reset follows KFD: a set event stays signaled only if it is manual-reset or nobody waits;
//! a waiter consumes an auto-reset event's signaled state when it starts waiting.
//!
//! Not guaranteed: no `last_event_age` (KFD >= 1.14 field, absent from the 1.11 layout), no signals
//! sent to the process on faults.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::memory::to_kerr;
use super::KResult;
use crate::driver::api::Prot;
use crate::driver::kfd::*;
use crate::driver::mapped::Mapping;
use crate::mockgpu::backing::{copy_from_user, copy_to_user, Backing};
use crate::sys::kfd::*;

/// `KFD_FIRST_NONSIGNAL_EVENT_ID`: ids of non-signal events start here.
pub(crate) const FIRST_NONSIGNAL_EVENT_ID: u32 = 0x4000_0000;
/// Slots of a page KFD allocates itself (`signal_mapped_size = 256 * 8`).
const KERNEL_PAGE_SLOTS: u64 = 256;
/// Most events one WAIT_EVENTS copies (KFD's kcalloc would fail far later).
const MAX_WAIT_EVENTS: u32 = 1 << 16;

struct EventPage {
    backing: Arc<Backing>,
    off: u64,
    slots: u64,
    user_handle: Option<u64>,
    view: Mapping,
}

struct Ev {
    ty: u32,
    auto_reset: bool,
    signaled: bool,
    /// (waiter id, index in that waiter's list).
    waiters: Vec<(u64, usize)>,
    /// What a MEMORY event carries (`kfd_hsa_memory_exception_data`, 32 bytes) or a
    /// HW_EXCEPTION event carries (`kfd_hsa_hw_exception_data`, the first 16 bytes).
    mem: [u8; 32],
}

struct Waiter {
    activated: Vec<bool>,
    failed: bool,
}

#[derive(Default)]
struct EvState {
    page: Option<EventPage>,
    events: BTreeMap<u32, Ev>,
    /// Signal events + 1 (id 0 is reserved), as KFD counts.
    signal_count: u64,
    waiters: HashMap<u64, Waiter>,
    next_waiter: u64,
}

/// The process's events.
pub(crate) struct Events {
    st: Mutex<EvState>,
    cv: Condvar,
}

fn is_signal(ty: u32) -> bool {
    ty == KFD_IOC_EVENT_SIGNAL || ty == KFD_IOC_EVENT_DEBUG_EVENT
}

impl EvState {
    fn set_event(&mut self, id: u32) {
        let Some(ev) = self.events.get_mut(&id) else {
            return;
        };
        ev.signaled = !ev.auto_reset || ev.waiters.is_empty();
        for &(w, k) in &ev.waiters {
            if let Some(slot) = self
                .waiters
                .get_mut(&w)
                .and_then(|w| w.activated.get_mut(k))
            {
                *slot = true;
            }
        }
    }

    fn slot_written(&self, id: u32) -> bool {
        let Some(p) = &self.page else { return false };
        (id as u64) < p.slots
            && p.view.load_u64(id as usize * 8, Ordering::Acquire).ok()
                != Some(UNSIGNALED_EVENT_SLOT)
    }

    fn ack_and_set(&mut self, id: u32) {
        if let Some(p) = &self.page {
            let _ = p
                .view
                .store_u64(id as usize * 8, UNSIGNALED_EVENT_SLOT, Ordering::Release);
        }
        self.set_event(id);
    }
}

impl Events {
    pub(crate) fn new() -> Events {
        Events {
            st: Mutex::new(EvState {
                signal_count: 1,
                ..Default::default()
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, EvState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The event page's memory (for `/dev/kfd` EVENTS mmaps).
    pub(crate) fn page_backing(&self) -> Option<(Arc<Backing>, u64)> {
        self.lock()
            .page
            .as_ref()
            .map(|p| (p.backing.clone(), p.off))
    }

    /// Whether some WAIT_EVENTS is registered (tests synchronize on it).
    #[cfg(test)]
    pub(crate) fn has_waiters(&self) -> bool {
        !self.lock().waiters.is_empty()
    }

    /// The user buffer registered as the event page.
    pub(crate) fn page_handle(&self) -> Option<u64> {
        self.lock().page.as_ref().and_then(|p| p.user_handle)
    }

    /// Register a user buffer as the signal-event page (`kfd_kmap_event_page`).
    pub(crate) fn set_user_page(
        &self,
        handle: u64,
        backing: Arc<Backing>,
        off: u64,
        size: u64,
    ) -> KResult {
        let mut g = self.lock();
        if g.page.is_some() {
            kbail!(EINVAL, "the event page is already set (pass event_page_offset only on the first CREATE_EVENT)");
        }
        if size < KFD_SIGNAL_EVENT_PAGE_SIZE as u64 {
            kbail!(EINVAL, "event page buffer {handle:#x} has {size:#x} bytes, needs {KFD_SIGNAL_EVENT_PAGE_SIZE:#x}");
        }
        let view = backing.view(off, size, Prot::RW).map_err(to_kerr)?;
        view.fill(0, KFD_SIGNAL_EVENT_PAGE_SIZE, 0xFF)
            .map_err(to_kerr)?;
        g.page = Some(EventPage {
            backing,
            off,
            slots: (size / 8).min(KFD_SIGNAL_EVENT_LIMIT as u64),
            user_handle: Some(handle),
            view,
        });
        Ok(())
    }

    /// CREATE_EVENT (after the page was handled): fills id, trigger data, page offset, slot.
    pub(crate) fn create(&self, a: &mut kfd_ioctl_create_event_args) -> KResult {
        let mut g = self.lock();
        a.event_page_offset = 0;
        let id = if is_signal(a.event_type) {
            let id = Self::alloc_signal_slot(&mut g)?;
            a.event_page_offset = KFD_MMAP_TYPE_EVENTS;
            a.event_slot_index = id;
            id
        } else {
            let Some(id) =
                (FIRST_NONSIGNAL_EVENT_ID..=i32::MAX as u32).find(|i| !g.events.contains_key(i))
            else {
                kbail!(ENOSPC, "no free event id");
            };
            id
        };
        g.events.insert(
            id,
            Ev {
                ty: a.event_type,
                auto_reset: a.auto_reset != 0,
                signaled: false,
                waiters: Vec::new(),
                mem: [0; 32],
            },
        );
        a.event_id = id;
        a.event_trigger_data = id;
        Ok(())
    }

    /// A signal event's id = mailbox slot (allocating KFD's own page if none is set).
    fn alloc_signal_slot(g: &mut EvState) -> KResult<u32> {
        if g.page.is_none() {
            let b =
                Backing::new(KFD_SIGNAL_EVENT_PAGE_SIZE as u64, "signal page").map_err(to_kerr)?;
            let view = b
                .view(0, KFD_SIGNAL_EVENT_PAGE_SIZE as u64, Prot::RW)
                .map_err(to_kerr)?;
            view.fill(0, KFD_SIGNAL_EVENT_PAGE_SIZE, 0xFF)
                .map_err(to_kerr)?;
            g.page = Some(EventPage {
                backing: b,
                off: 0,
                slots: KERNEL_PAGE_SLOTS,
                user_handle: None,
                view,
            });
        }
        let slots = g.page.as_ref().map_or(0, |p| p.slots);
        if g.signal_count >= slots {
            kbail!(
                ENOSPC,
                "signal event limit reached ({slots} slots in the event page)"
            );
        }
        let Some(id) = (1..slots as u32).find(|i| !g.events.contains_key(i)) else {
            kbail!(ENOSPC, "no free signal event slot");
        };
        if let Some(p) = &g.page {
            p.view
                .store_u64(id as usize * 8, UNSIGNALED_EVENT_SLOT, Ordering::Release)
                .map_err(to_kerr)?;
        }
        g.signal_count += 1;
        Ok(id)
    }

    pub(crate) fn destroy(&self, id: u32) -> KResult {
        let mut g = self.lock();
        let Some(ev) = g.events.remove(&id) else {
            kbail!(EINVAL, "unknown event id {id:#x}")
        };
        for (w, _) in &ev.waiters {
            if let Some(w) = g.waiters.get_mut(w) {
                w.failed = true;
            }
        }
        if is_signal(ev.ty) {
            g.signal_count -= 1;
        }
        self.cv.notify_all();
        Ok(())
    }

    /// SET_EVENT (true) / RESET_EVENT (false): signal events only.
    pub(crate) fn cpu_set(&self, id: u32, set: bool) -> KResult {
        let mut g = self.lock();
        let Some(ev) = g.events.get_mut(&id) else {
            kbail!(EINVAL, "unknown event id {id:#x}")
        };
        if ev.ty != KFD_IOC_EVENT_SIGNAL {
            kbail!(
                EINVAL,
                "event {id:#x} has type {} and cannot be set or reset by the CPU",
                ev.ty
            );
        }
        if set {
            g.set_event(id);
            self.cv.notify_all();
        } else {
            ev.signaled = false;
        }
        Ok(())
    }

    /// An interrupt with context id `ctxid` (valid id bits >= 12, as on gfx9+).
    pub(crate) fn interrupt(&self, ctxid: u32) {
        let mut g = self.lock();
        if g.page.is_none() {
            return;
        }
        let exact = g.events.get(&ctxid).is_some_and(|e| is_signal(e.ty)) && g.slot_written(ctxid);
        if exact {
            g.ack_and_set(ctxid);
        } else {
            let ids: Vec<u32> = g
                .events
                .iter()
                .filter(|(_, e)| is_signal(e.ty))
                .map(|(i, _)| *i)
                .collect();
            for id in ids {
                if g.slot_written(id) {
                    g.ack_and_set(id);
                }
            }
        }
        self.cv.notify_all();
    }

    /// A GPU page fault: every MEMORY event is set with the fault's description.
    pub(crate) fn vm_fault(&self, gpu_id: u32, va: u64, write: bool) {
        let g = self.lock();
        let mut data = [0u8; 32];
        data[0..4].copy_from_slice(&1u32.to_le_bytes()); // NotPresent
        data[4..8].copy_from_slice(&(write as u32).to_le_bytes()); // ReadOnly
        data[16..24].copy_from_slice(&(va & !0xFFF).to_le_bytes());
        data[24..28].copy_from_slice(&gpu_id.to_le_bytes());
        self.set_all(g, KFD_IOC_EVENT_MEMORY, data);
    }

    /// A GPU reset of `gpu_id` (kfd_events.c `kfd_signal_reset_event`, called from
    /// `kgd2kfd_post_reset`): every HW_EXCEPTION event is set with `kfd_hsa_hw_exception_data`
    /// {reset_type WHOLE_GPU_RESET, reset_cause GPU_HANG, memory_lost 1, gpu_id}. MEMORY events
    /// are set only for an ECC-caused reset, which is not emulated.
    pub(crate) fn gpu_reset(&self, gpu_id: u32) {
        let g = self.lock();
        let mut data = [0u8; 32];
        data[0..4].copy_from_slice(&KFD_HW_EXCEPTION_WHOLE_GPU_RESET.to_le_bytes());
        data[4..8].copy_from_slice(&KFD_HW_EXCEPTION_GPU_HANG.to_le_bytes());
        data[8..12].copy_from_slice(&1u32.to_le_bytes()); // memory_lost
        data[12..16].copy_from_slice(&gpu_id.to_le_bytes());
        self.set_all(g, KFD_IOC_EVENT_HW_EXCEPTION, data);
    }

    /// Set every event of type `ty` with exception data `data`, and wake the waiters.
    fn set_all(&self, mut g: MutexGuard<'_, EvState>, ty: u32, data: [u8; 32]) {
        let ids: Vec<u32> = g
            .events
            .iter()
            .filter(|(_, e)| e.ty == ty)
            .map(|(i, _)| *i)
            .collect();
        for id in ids {
            if let Some(ev) = g.events.get_mut(&id) {
                ev.mem = data;
            }
            g.set_event(id);
        }
        drop(g);
        self.cv.notify_all();
    }

    /// WAIT_EVENTS: returns `wait_result` (COMPLETE / TIMEOUT); FAIL (an event destroyed while
    /// waiting) is an EIO error after `wait_result` is set.
    pub(crate) fn wait(&self, a: &mut kfd_ioctl_wait_events_args) -> KResult {
        a.wait_result = KFD_IOC_WAIT_RESULT_FAIL;
        if a.num_events > MAX_WAIT_EVENTS {
            kbail!(
                ENOMEM,
                "num_events {} is more than the emulator waits on ({MAX_WAIT_EVENTS})",
                a.num_events
            );
        }
        let n = a.num_events as usize;
        let size = std::mem::size_of::<kfd_event_data>();
        let bytes = copy_from_user(a.events_ptr, n * size, "events_ptr").map_err(to_kerr)?;
        let ids: Vec<u32> = bytes
            .chunks_exact(size)
            .map(|c| u32::from_le_bytes([c[40], c[41], c[42], c[43]]))
            .collect();
        let mut g = self.lock();
        let wid = Self::register(&mut g, &ids)?;
        let deadline = match a.timeout {
            KFD_EVENT_TIMEOUT_INFINITE => None,
            ms => Some(Instant::now() + Duration::from_millis(ms.min(0x7FFF_FFFF) as u64)),
        };
        let (mut g, result) = self.sleep(g, wid, a.wait_for_all != 0, deadline);
        let copies = Self::memory_payloads(&g, wid, &ids);
        Self::unregister(&mut g, wid, &ids);
        drop(g);
        a.wait_result = result;
        if result == KFD_IOC_WAIT_RESULT_FAIL {
            kbail!(EIO, "an event being waited on was destroyed");
        }
        for (k, data) in copies {
            copy_to_user(a.events_ptr + (k * size) as u64, &data, "events_ptr").map_err(to_kerr)?;
        }
        Ok(())
    }

    /// `init_event_waiter` for each id: take a signaled event (consuming it if auto-reset) or
    /// queue on it. Returns the waiter id.
    fn register(g: &mut EvState, ids: &[u32]) -> KResult<u64> {
        let wid = g.next_waiter;
        g.next_waiter += 1;
        g.waiters.insert(
            wid,
            Waiter {
                activated: vec![false; ids.len()],
                failed: false,
            },
        );
        for (k, id) in ids.iter().enumerate() {
            let Some(ev) = g.events.get_mut(id) else {
                Self::unregister(g, wid, ids);
                kbail!(EINVAL, "events[{k}] names unknown event id {id:#x}");
            };
            let was = ev.signaled;
            ev.signaled = was && !ev.auto_reset;
            if !was {
                ev.waiters.push((wid, k));
            }
            if let Some(w) = g.waiters.get_mut(&wid) {
                w.activated[k] = was;
            }
        }
        Ok(wid)
    }

    /// Sleep until the waiter's condition holds, it fails, or `deadline` passes.
    fn sleep<'a>(
        &'a self,
        mut g: MutexGuard<'a, EvState>,
        wid: u64,
        all: bool,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, EvState>, u32) {
        loop {
            let r = Self::test(&g, wid, all);
            if r != KFD_IOC_WAIT_RESULT_TIMEOUT {
                return (g, r);
            }
            match deadline {
                None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return (g, r);
                    }
                    g = self
                        .cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    fn test(g: &EvState, wid: u64, all: bool) -> u32 {
        let Some(w) = g.waiters.get(&wid) else {
            return KFD_IOC_WAIT_RESULT_FAIL;
        };
        if w.failed {
            return KFD_IOC_WAIT_RESULT_FAIL;
        }
        let done = if all {
            w.activated.iter().all(|&a| a)
        } else {
            w.activated.iter().any(|&a| a)
        };
        if done {
            KFD_IOC_WAIT_RESULT_COMPLETE
        } else {
            KFD_IOC_WAIT_RESULT_TIMEOUT
        }
    }

    /// The exception data of the activated MEMORY and HW_EXCEPTION events (kfd_events.c
    /// `copy_signaled_event_data`: `sizeof` the memory or the hardware exception struct).
    fn memory_payloads(g: &EvState, wid: u64, ids: &[u32]) -> Vec<(usize, Vec<u8>)> {
        let Some(w) = g.waiters.get(&wid) else {
            return Vec::new();
        };
        ids.iter()
            .enumerate()
            .filter(|(k, _)| w.activated.get(*k).copied().unwrap_or(false))
            .filter_map(|(k, id)| {
                g.events
                    .get(id)
                    .and_then(|e| match e.ty {
                        KFD_IOC_EVENT_MEMORY => Some(e.mem.to_vec()),
                        KFD_IOC_EVENT_HW_EXCEPTION => Some(e.mem[..16].to_vec()),
                        _ => None,
                    })
                    .map(|d| (k, d))
            })
            .collect()
    }

    fn unregister(g: &mut EvState, wid: u64, ids: &[u32]) {
        for id in ids {
            if let Some(ev) = g.events.get_mut(id) {
                ev.waiters.retain(|(w, _)| *w != wid);
            }
        }
        g.waiters.remove(&wid);
    }
}
