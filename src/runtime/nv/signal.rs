//! NV signals (tinygrad `ops_nv.py` `NVSignal`): 16-byte slots (value u64 at +0, GPU timestamp u64
//! at +8, nanoseconds) in RM system memory that is GPU-uncached and mapped on the CPU and the GPU
//! at the same address. Writers: host semaphore releases (64-bit payload + timestamp), copy-engine
//! four-word releases (32-bit payload + timestamp). Readers: host SEM acquires and the CPU.
//!
//! The CPU wait is [`crate::hcq::signal::wait_value`]: a spin, then short sleeps; the device's
//! fault probe reads the channels' error notifiers between them, so a dead channel ends a wait
//! at once. There is no OS event to sleep on ([`HcqSignal::sleep`] sleeps briefly).
//!
//! Not guaranteed: slot reuse waits for nobody: the device keeps a signal alive while queued work
//! references it (keep-alive), not longer.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::memory::NvBuffer;
use super::process::lock;
use crate::hcq::{HcqBuffer, HcqSignal, KeepAlive};
use crate::{bail, Error, Result};

/// Signal slots per pool.
pub const SIGNAL_SLOTS: usize = 16384;
/// Bytes per slot.
pub const SIGNAL_SIZE: usize = 16;
/// NV timestamps are nanoseconds.
pub const TIMESTAMP_HZ: f64 = 1e9;

/// A page of signal slots.
pub struct SignalPool {
    pub(crate) buf: NvBuffer,
    free: Mutex<Vec<u32>>,
}

impl SignalPool {
    /// Slots over `buf` (CPU-mapped, at least `SIGNAL_SLOTS * SIGNAL_SIZE` bytes).
    pub fn new(buf: NvBuffer) -> Result<Arc<SignalPool>> {
        if buf.cpu().is_none() || buf.size() < SIGNAL_SLOTS * SIGNAL_SIZE {
            bail!(
                Internal,
                "signal memory {buf:?} is not a CPU-mapped page of slots"
            );
        }
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

struct Slot {
    pool: Option<Arc<SignalPool>>,
    index: u32,
    va: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(p) = &self.pool {
            lock(&p.free).push(self.index);
        }
    }
}

/// One signal.
#[derive(Clone)]
pub struct NvSignal(Arc<Slot>);

impl std::fmt::Debug for NvSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl NvSignal {
    /// A slot of `pool` starting at `value` (timestamp 0).
    pub fn new(pool: &Arc<SignalPool>, value: u64) -> Result<NvSignal> {
        let Some(index) = lock(&pool.free).pop() else {
            bail!(
                Device,
                "out of NV signals: all {SIGNAL_SLOTS} slots are in use"
            );
        };
        let s = NvSignal(Arc::new(Slot {
            pool: Some(pool.clone()),
            index,
            va: pool.buf.va() + u64::from(index) * SIGNAL_SIZE as u64,
        }));
        s.set_value(value)?;
        s.view()?.store_u64(s.off() + 8, 0, Ordering::Release)?;
        Ok(s)
    }

    /// A signal at a fixed address without memory (to encode commands in tests; reading it
    /// fails).
    pub fn encode_only(va: u64) -> NvSignal {
        NvSignal(Arc::new(Slot {
            pool: None,
            index: 0,
            va,
        }))
    }

    /// The GPU (= CPU) address of the slot.
    pub fn va(&self) -> u64 {
        self.0.va
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

impl HcqSignal for NvSignal {
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
        std::thread::sleep(max.min(Duration::from_micros(50)));
        Ok(())
    }

    fn describe(&self) -> String {
        format!("signal@{:#x}", self.0.va)
    }

    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn keep(&self) -> KeepAlive {
        self.0.clone()
    }
}
