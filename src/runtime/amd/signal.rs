//! AMD signals (tinygrad 0.9.2 `AMDSignal`): 16-byte slots (value u64 at +0, timestamp u64
//! at +8) in one GTT uncached page per process, mapped into every GPU of the process. A signal
//! that must wake the CPU (the timelines) also owns a KFD signal event: its queues write the
//! event id into the event's mailbox slot and raise an interrupt (RELEASE_MEM INT_SEL / SDMA
//! TRAP), and [`HcqSignal::sleep`] waits in WAIT_EVENTS.
//!
//! GPU writes and compares are 32-bit; the CPU reads and writes the whole 64-bit value.
//!
//! Not guaranteed: the pool is fixed-size ([`SIGNAL_SLOTS`]); running out is an error, not a
//! wait.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::memory::{alloc_memory, AmdBuffer, MemKind};
use super::process::{lock, EventPage, KfdCore};
use crate::driver::kfd::ops;
use crate::hcq::{HcqBuffer, HcqSignal, KeepAlive};
use crate::runtime::amd::pm4::SignalEvent;
use crate::sys::kfd::*;
use crate::{bail, Error, Result};

/// Signal slots per process.
pub const SIGNAL_SLOTS: usize = 8192;
/// Bytes per slot.
pub const SIGNAL_SIZE: usize = 16;
/// The GPU clock the timestamps count (tinygrad assumes 100 MHz on every chip; NOT CONFIRMED per
/// chip). The emulated GPU counts at this rate.
pub const TIMESTAMP_HZ: f64 = 100e6;

/// The signal page and its free slots.
pub struct SignalPool {
    pub(crate) buf: AmdBuffer,
    free: Mutex<Vec<u32>>,
}

impl SignalPool {
    pub(crate) fn new(core: &Arc<KfdCore>, gpu_id: u32) -> Result<Arc<SignalPool>> {
        let buf = alloc_memory(
            core,
            gpu_id,
            SIGNAL_SLOTS * SIGNAL_SIZE,
            MemKind::GttUncached,
            true,
        )?;
        Ok(Arc::new(SignalPool {
            buf,
            free: Mutex::new((0..SIGNAL_SLOTS as u32).rev().collect()),
        }))
    }

    /// Slots in use.
    pub fn used(&self) -> usize {
        SIGNAL_SLOTS - lock(&self.free).len()
    }
}

/// A KFD signal event owned by a signal.
struct OwnedEvent {
    core: Arc<KfdCore>,
    ev: SignalEvent,
}

impl Drop for OwnedEvent {
    fn drop(&mut self) {
        if let Err(e) = ops::destroy_event(self.core.drv.as_ref(), self.core.kfd, self.ev.event_id)
        {
            self.core
                .defer_error(format!("destroying event {}: {e}", self.ev.event_id));
        }
    }
}

/// One slot (returned to the pool on drop).
pub struct SignalSlot {
    pool: Option<Arc<SignalPool>>,
    index: u32,
    va: u64,
    event: Option<OwnedEvent>,
    /// Event description for signals that only encode packets (golden tests).
    fixed_event: Option<SignalEvent>,
}

impl Drop for SignalSlot {
    fn drop(&mut self) {
        if let Some(p) = &self.pool {
            lock(&p.free).push(self.index);
        }
    }
}

/// A signal: a cheap handle on a slot.
#[derive(Clone)]
pub struct AmdSignal(Arc<SignalSlot>);

impl std::fmt::Debug for AmdSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

/// Create a signal event, registering the process's event page with the first one.
fn create_event(core: &Arc<KfdCore>, page: &EventPage) -> Result<SignalEvent> {
    let mut registered = lock(&page.registered);
    let handle = if *registered { 0 } else { page.buf.handle() };
    let a = ops::create_event(
        core.drv.as_ref(),
        core.kfd,
        KFD_IOC_EVENT_SIGNAL,
        true,
        handle,
    )?;
    *registered = true;
    let slot = u64::from(a.event_slot_index);
    if (slot + 1) * 8 > page.buf.size() as u64 {
        let _ = ops::destroy_event(core.drv.as_ref(), core.kfd, a.event_id);
        bail!(
            Device,
            "KFD event {} got slot {slot}, outside the {}-byte event page",
            a.event_id,
            page.buf.size()
        );
    }
    Ok(SignalEvent {
        mailbox: page.buf.va() + 8 * slot,
        event_id: a.event_id,
    })
}

impl AmdSignal {
    /// A signal from `pool` starting at `value`, with a KFD event when `event` is given.
    pub(crate) fn new(
        pool: &Arc<SignalPool>,
        value: u64,
        event: Option<(&Arc<KfdCore>, &EventPage)>,
    ) -> Result<AmdSignal> {
        let Some(index) = lock(&pool.free).pop() else {
            bail!(
                Device,
                "out of signals: all {SIGNAL_SLOTS} slots are in use"
            );
        };
        let mut slot = SignalSlot {
            pool: Some(pool.clone()),
            index,
            va: pool.buf.va() + u64::from(index) * SIGNAL_SIZE as u64,
            event: None,
            fixed_event: None,
        };
        if let Some((core, page)) = event {
            let ev = create_event(core, page)?;
            slot.event = Some(OwnedEvent {
                core: core.clone(),
                ev,
            });
        }
        let s = AmdSignal(Arc::new(slot));
        s.set_value(value)?;
        s.view()?.store_u64(s.off() + 8, 0, Ordering::Release)?;
        Ok(s)
    }

    /// A signal that only has an address (and optionally an event): for encoding packets
    /// without a device (golden tests). Reading it fails.
    pub fn encode_only(va: u64, event: Option<SignalEvent>) -> AmdSignal {
        AmdSignal(Arc::new(SignalSlot {
            pool: None,
            index: 0,
            va,
            event: None,
            fixed_event: event,
        }))
    }

    /// GPU address of the value (the timestamp is at +8).
    pub fn va(&self) -> u64 {
        self.0.va
    }

    /// The event part a queue's signal command writes.
    pub fn event(&self) -> Option<SignalEvent> {
        self.0.event.as_ref().map(|e| e.ev).or(self.0.fixed_event)
    }

    fn off(&self) -> usize {
        self.0.index as usize * SIGNAL_SIZE
    }

    fn view(&self) -> Result<&crate::driver::Mapping> {
        self.0
            .pool
            .as_ref()
            .and_then(|p| p.buf.cpu())
            .ok_or_else(|| Error::InvalidArgument(format!("{} has no memory", self.describe())))
    }
}

impl HcqSignal for AmdSignal {
    fn value(&self) -> Result<u64> {
        self.view()?.load_u64(self.off(), Ordering::Acquire)
    }

    fn set_value(&self, value: u64) -> Result<()> {
        self.view()?.store_u64(self.off(), value, Ordering::Release)
    }

    fn timestamp(&self) -> Result<u64> {
        self.view()?.load_u64(self.off() + 8, Ordering::Acquire)
    }

    fn sleep(&self, max: Duration) -> Result<()> {
        let Some(ev) = &self.0.event else {
            std::thread::sleep(max.min(Duration::from_micros(50)));
            return Ok(());
        };
        let ms = max.as_millis().clamp(1, u128::from(u32::MAX - 1)) as u32;
        let mut data = [ops::event_data(ev.ev.event_id)];
        ops::wait_events(ev.core.drv.as_ref(), ev.core.kfd, &mut data, false, ms)?;
        Ok(())
    }

    fn describe(&self) -> String {
        match self.event() {
            Some(e) => format!("signal@{:#x} (event {})", self.0.va, e.event_id),
            None => format!("signal@{:#x}", self.0.va),
        }
    }

    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn keep(&self) -> KeepAlive {
        self.0.clone()
    }
}
