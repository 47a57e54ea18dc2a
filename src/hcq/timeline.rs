//! The per-device timeline (tinygrad `HCQCompatCompiled`): one signal every submission waits on
//! (`>= v - 1`) and raises (`v`), so all work of a device is totally ordered, plus the shadow
//! signal it swaps with before GPU-side 32-bit compares would wrap.
//!
//! `value` is the *next* value to signal (it starts at 1). When a synchronize finds the device
//! idle with `value > 2^31`, the signals swap, the new timeline is reset to 0 and `value` to 1;
//! packets that still reference the old signal with large targets stay satisfiable because the
//! old signal keeps its value until the next swap. Every swap starts a new epoch, and a
//! [`TimelinePoint`] of an older epoch counts as passed (a swap happens only when all work
//! finished), which is what resets the allocator's staging marks.
//!
//! Not guaranteed: thread safety (the device keeps the timeline under its lock).

use super::HcqSignal;
use crate::Result;

/// Swap the timeline at a synchronize once the next value exceeds this (tinygrad
/// `_wrap_timeline_signal`).
pub const WRAP_AT: u64 = 1 << 31;
/// Force a swap before submitting when the next value reaches this, even without a
/// synchronize (stays clear of 2^32, where GPU compares would fail).
pub const FORCE_WRAP_AT: u64 = (1 << 32) - (1 << 20);

/// A moment on a device's timeline: work signaled with `value` in epoch `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelinePoint {
    pub epoch: u64,
    pub value: u64,
}

/// The timeline signal, its shadow, the next value and the epoch.
pub(crate) struct Timeline<S: HcqSignal> {
    pub(crate) signal: S,
    pub(crate) shadow: S,
    pub(crate) value: u64,
    pub(crate) epoch: u64,
}

impl<S: HcqSignal> Timeline<S> {
    /// A timeline over two fresh signals (both set to 0).
    pub(crate) fn new(signal: S, shadow: S) -> Result<Timeline<S>> {
        signal.set_value(0)?;
        shadow.set_value(0)?;
        Ok(Timeline {
            signal,
            shadow,
            value: 1,
            epoch: 0,
        })
    }

    /// The point of value `v` in the current epoch.
    pub(crate) fn point(&self, v: u64) -> TimelinePoint {
        TimelinePoint {
            epoch: self.epoch,
            value: v,
        }
    }

    /// The point the last submission signals.
    pub(crate) fn last_point(&self) -> TimelinePoint {
        self.point(self.value - 1)
    }

    /// Whether the GPU has passed `p`.
    pub(crate) fn passed(&self, p: TimelinePoint) -> Result<bool> {
        Ok(p.epoch < self.epoch || p.value == 0 || self.signal.value()? >= p.value)
    }

    /// Swap with the shadow and restart at 1 (the caller made sure the device is idle).
    pub(crate) fn swap(&mut self) -> Result<()> {
        std::mem::swap(&mut self.signal, &mut self.shadow);
        self.signal.set_value(0)?;
        self.value = 1;
        self.epoch += 1;
        Ok(())
    }
}
