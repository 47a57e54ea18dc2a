//! `PROFILE=1`: GPU timestamps around every kernel and copy, converted to host time and written
//! as a Chrome trace ([`super::trace`]) at exit.
//!
//! Conversion: `host_us = ticks / hz * 1e6 + offset`, with one offset per queue kind, calibrated
//! when the device opens from [`CALIBRATION_SAMPLES`] pairs of (GPU timestamp, host time at the
//! midpoint of submitting a `timestamp . signal` queue and seeing the signal), median taken
//! (tinygrad 0.9.2 does the same per device and queue type).
//!
//! Records keep their two timestamp signals until the device synchronizes; then they are read,
//! converted, kept on the device ([`super::HcqDevice::profile_events`]) and added to the
//! process-wide trace collection.
//!
//! Not guaranteed: the offset absorbs the submit latency, so events are shifted by up to the
//! half round trip of a calibration sample; the GPU clock rate is the backend's claim.

use super::trace::{record, TraceEvent};
use super::HcqSignal;
use crate::Result;

/// Calibration samples per queue kind.
pub const CALIBRATION_SAMPLES: usize = 9;

/// Which hardware queue a profiled command ran on (the trace's thread lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfQueue {
    Compute,
    Copy,
}

impl ProfQueue {
    /// The lane name.
    pub fn name(self) -> &'static str {
        match self {
            ProfQueue::Compute => "COMPUTE",
            ProfQueue::Copy => "COPY",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

struct Record<S> {
    start: S,
    end: S,
    name: String,
    queue: ProfQueue,
}

/// One device's profiler.
pub(crate) struct Profiler<S: HcqSignal> {
    device: String,
    hz: f64,
    offset_us: [f64; 2],
    pending: Vec<Record<S>>,
    events: Vec<TraceEvent>,
}

/// The median of `v` (`0` when empty).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl<S: HcqSignal> Profiler<S> {
    pub(crate) fn new(device: &str, hz: f64, offset_us: [f64; 2]) -> Profiler<S> {
        super::trace::install_exit_writer();
        Profiler {
            device: device.to_string(),
            hz,
            offset_us,
            pending: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Host microseconds of a GPU timestamp taken on `queue`.
    pub(crate) fn host_us(&self, ticks: u64, queue: ProfQueue) -> f64 {
        ticks as f64 / self.hz * 1e6 + self.offset_us[queue.index()]
    }

    /// A command bracketed by timestamps into `start` and `end`.
    pub(crate) fn add(&mut self, start: S, end: S, name: String, queue: ProfQueue) {
        self.pending.push(Record {
            start,
            end,
            name,
            queue,
        });
    }

    /// Records waiting to be read.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Read every pending record (the device is idle), keep and publish the events.
    pub(crate) fn process(&mut self) -> Result<()> {
        let mut out = Vec::with_capacity(self.pending.len());
        for r in std::mem::take(&mut self.pending) {
            let (s, e) = (r.start.timestamp()?, r.end.timestamp()?);
            let ts = self.host_us(s, r.queue);
            let dur = e.saturating_sub(s) as f64 / self.hz * 1e6;
            out.push(TraceEvent {
                name: r.name,
                cat: match r.queue {
                    ProfQueue::Compute => "kernel".into(),
                    ProfQueue::Copy => "copy".into(),
                },
                device: self.device.clone(),
                queue: r.queue.name().into(),
                ts_us: ts,
                dur_us: dur,
            });
        }
        record(&out);
        self.events.extend(out);
        Ok(())
    }

    /// Drop pending records whose timestamps will never be written (queues were reset).
    pub(crate) fn discard_pending(&mut self) {
        self.pending.clear();
    }

    /// The processed events of this device.
    pub(crate) fn events(&self) -> &[TraceEvent] {
        &self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_samples() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![5.0]), 5.0);
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
    }
}
