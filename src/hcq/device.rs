//! [`HcqDevice`]: the device-generic half of an HCQ device (tinygrad's `HCQCompiled`), written
//! once over an [`HcqBackend`].
//!
//! It owns the timeline (every submission through it is `wait(timeline, v - 1) ...
//! signal(timeline, v)`, under one lock so the value order is the submission order), the
//! in-flight keep-alive table, the kernarg ring, the staging buffers (used by
//! [`super::allocator`]) and the profiler. [`HcqDevice::synchronize`] waits for the last value,
//! retires everything, processes profile records and swaps the timeline with its shadow once
//! the value passed 2^31.
//!
//! Failures: a wait that times out or sees a device fault becomes `Error::Timeout` /
//! `Error::Fault` whose message names what was waited for, the timeline's value, the pending
//! submissions and the backend's queue report (read/write pointers; under the emulator the
//! software GPU's position and fault reason). Then the device recovers: the backend destroys and
//! recreates its hardware queues, the pending work is dropped (its memory freed), and the
//! timeline is advanced past it, so the next operation starts clean.
//!
//! Not guaranteed: work dropped by a recovery is lost (its results are undefined); raw queue
//! submissions (`HwQueue::submit`) bypass the timeline and its keep-alive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::inflight::{InFlight, Keep, What};
use super::kernargs::KernargRing;
use super::profile::{median, ProfQueue, Profiler, CALIBRATION_SAMPLES};
use super::signal::{wait_timeout, wait_value, WaitFailure};
use super::timeline::{Timeline, TimelinePoint, FORCE_WRAP_AT, WRAP_AT};
use super::trace::{now_us, TraceEvent};
use super::{HcqBackend, HcqBuffer, HcqLaunch, HcqSignal, HwComputeQueue, HwCopyQueue, HwQueue};
use crate::device::BufferOptions;
use crate::helpers::getenv;
use crate::{Error, Result};

/// Kernarg ring bytes per device.
const KERNARG_RING: usize = 4 << 20;
/// Profile records kept before the device synchronizes on its own to read them.
const MAX_PENDING_PROFILE: usize = 1024;

/// Mutable device state, under the device lock.
pub(crate) struct DevState<B: HcqBackend> {
    pub(crate) tl: Timeline<B::Signal>,
    pub(crate) inflight: InFlight,
    pub(crate) kernargs: KernargRing,
}

/// Staging buffers for host copies: each with the timeline point of its last use.
pub(crate) struct Staging<B: HcqBackend> {
    pub(crate) bufs: Vec<(Arc<B::Buffer>, TimelinePoint)>,
}

/// An HCQ device: a backend plus the generic timeline machinery.
pub struct HcqDevice<B: HcqBackend> {
    backend: B,
    serial: u64,
    st: Mutex<DevState<B>>,
    pub(crate) staging: Mutex<Staging<B>>,
    profiler: Option<Mutex<Profiler<B::Signal>>>,
    kernarg_mem: Arc<B::Buffer>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B: HcqBackend> HcqDevice<B> {
    /// Wrap an opened backend: timeline signals, kernarg ring, and (with `PROFILE=1`) the
    /// calibrated profiler.
    pub fn new(backend: B) -> Result<Arc<HcqDevice<B>>> {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let tl = Timeline::new(backend.new_signal(0, true)?, backend.new_signal(0, true)?)?;
        let kernarg_mem = Arc::new(backend.alloc_kernarg_memory(KERNARG_RING)?);
        if kernarg_mem.cpu().is_none() {
            return Err(Error::Internal(format!(
                "{}: kernarg memory is not CPU-mapped",
                backend.name()
            )));
        }
        let mut dev = HcqDevice {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            st: Mutex::new(DevState {
                tl,
                inflight: InFlight::default(),
                kernargs: KernargRing::new(kernarg_mem.size().min(KERNARG_RING)),
            }),
            staging: Mutex::new(Staging { bufs: Vec::new() }),
            profiler: None,
            kernarg_mem,
            backend,
        };
        if getenv("PROFILE", 0) != 0 {
            let offsets = [
                dev.calibrate(ProfQueue::Compute)?,
                dev.calibrate(ProfQueue::Copy)?,
            ];
            let hz = dev.backend.timestamp_hz();
            dev.profiler = Some(Mutex::new(Profiler::new(dev.name(), hz, offsets)));
        }
        let dev = Arc::new(dev);
        if dev.profiler.is_some() {
            let weak = Arc::downgrade(&dev);
            super::trace::flush_at_exit(Box::new(move || {
                if let Some(d) = weak.upgrade() {
                    // At exit there is no caller for an error; the trace keeps what was read.
                    let _ = d.synchronize();
                }
            }));
        }
        Ok(dev)
    }

    /// The vendor half.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The device name.
    pub fn name(&self) -> &str {
        self.backend.name()
    }

    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, DevState<B>> {
        lock(&self.st)
    }

    /// A new signal (no event) starting at `value`.
    pub fn new_signal(&self, value: u64) -> Result<B::Signal> {
        self.backend.new_signal(value, false)
    }

    /// The current timeline signal (it changes at a swap).
    pub fn timeline_signal(&self) -> B::Signal {
        self.lock().tl.signal.clone()
    }

    /// The next value the timeline will be signaled with.
    pub fn timeline_value(&self) -> u64 {
        self.lock().tl.value
    }

    /// How many times the timeline swapped with its shadow.
    pub fn timeline_epoch(&self) -> u64 {
        self.lock().tl.epoch
    }

    /// Submissions not yet seen complete.
    pub fn pending_count(&self) -> usize {
        self.lock().inflight.len()
    }

    /// Whether `PROFILE=1` was on when the device opened.
    pub fn profiling(&self) -> bool {
        self.profiler.is_some()
    }

    /// The processed profile events of this device (call [`HcqDevice::synchronize`] first).
    pub fn profile_events(&self) -> Vec<TraceEvent> {
        match &self.profiler {
            Some(p) => lock(p).events().to_vec(),
            None => Vec::new(),
        }
    }

    /// The kernarg memory (its CPU view is checked at creation).
    pub(crate) fn kernarg_mem(&self) -> &Arc<B::Buffer> {
        &self.kernarg_mem
    }

    /// The timeline value the next submission signals, forcing a swap first when the value
    /// nears 2^32 (waiting for the device, under the lock).
    pub(crate) fn begin(&self, st: &mut DevState<B>) -> Result<u64> {
        if st.tl.value >= FORCE_WRAP_AT {
            let p = st.tl.last_point();
            self.wait_locked(st, p, "forced timeline wrap")?;
            st.inflight.clear();
            st.kernargs.clear();
            st.tl.swap()?;
        }
        Ok(st.tl.value)
    }

    /// Submit `q` (built to signal the timeline with `st.tl.value`), take its keep-alive list
    /// plus `keep`, and advance the timeline. Returns the submission's point.
    pub(crate) fn commit<Q: HwQueue<B>>(
        &self,
        st: &mut DevState<B>,
        q: &mut Q,
        what: impl Into<What>,
        keep: impl Into<Keep>,
    ) -> Result<TimelinePoint> {
        self.commit_n(st, q, what.into(), keep.into(), 1)
    }

    /// [`HcqDevice::commit`] for a queue that signals the `n` timeline values from
    /// `st.tl.value` (a graph); returns the point of the last one.
    pub(crate) fn commit_n<Q: HwQueue<B>>(
        &self,
        st: &mut DevState<B>,
        q: &mut Q,
        what: What,
        keep: Keep,
        n: u64,
    ) -> Result<TimelinePoint> {
        let point = st.tl.point(st.tl.value + n - 1);
        self.backend.fence_submissions(Some((&st.tl.signal, point)));
        let sent = q.submit(&self.backend);
        self.backend.fence_submissions(None);
        sent?;
        st.tl.value += n;
        let keep = keep.with(q.take_keep_alive());
        st.inflight.push(point, what, keep);
        let tl = &st.tl;
        st.inflight.retire(|p| tl.passed(p))?;
        Ok(point)
    }

    /// A region of kernarg memory for the launch signaled at `point`: (offset, GPU address).
    pub(crate) fn alloc_kernargs(
        &self,
        st: &mut DevState<B>,
        size: usize,
        point: TimelinePoint,
    ) -> Result<(usize, u64)> {
        let (start, end, need) = {
            let DevState { tl, kernargs, .. } = &mut *st;
            kernargs.plan(size, &|p| tl.passed(p))?
        };
        if let Some(p) = need {
            self.wait_locked(st, p, "kernarg ring space")?;
        }
        st.kernargs.take(start, end, point);
        Ok((start, self.kernarg_mem.va() + start as u64))
    }

    fn fault_probe(&self) -> impl Fn() -> Option<String> + '_ {
        || self.backend.poll_fault()
    }

    /// Wait (without the lock) until the timeline passes `p`.
    pub fn wait_point(&self, p: TimelinePoint, what: &str) -> Result<()> {
        let sig = {
            let st = self.lock();
            if st.tl.passed(p)? {
                return Ok(());
            }
            st.tl.signal.clone()
        };
        self.wait_signal(&sig, p.value, what)
    }

    /// Wait until `sig >= value` (timeout `HCQDEV_WAIT_TIMEOUT_MS`). On a timeout or fault the
    /// device reports its state and recovers (see the module doc).
    pub fn wait_signal(&self, sig: &B::Signal, value: u64, what: &str) -> Result<()> {
        match wait_value(sig, value, wait_timeout(), &self.fault_probe()) {
            Ok(()) => Ok(()),
            Err(f) => {
                let mut st = self.lock();
                Err(self.fail(&mut st, what, &f.describe(&sig.describe(), value), &f))
            }
        }
    }

    /// [`HcqDevice::wait_point`] with the lock already held.
    fn wait_locked(&self, st: &mut DevState<B>, p: TimelinePoint, what: &str) -> Result<()> {
        if st.tl.passed(p)? {
            return Ok(());
        }
        let sig = st.tl.signal.clone();
        match wait_value(&sig, p.value, wait_timeout(), &self.fault_probe()) {
            Ok(()) => Ok(()),
            Err(f) => Err(self.fail(st, what, &f.describe(&sig.describe(), p.value), &f)),
        }
    }

    /// Build the error for a failed wait and recover the device.
    fn fail(&self, st: &mut DevState<B>, what: &str, desc: &str, f: &WaitFailure) -> Error {
        let tl_value = match st.tl.signal.value() {
            Ok(v) => v.to_string(),
            Err(e) => format!("unreadable ({e})"),
        };
        let mut msg = format!(
            "{}: {what}: {desc}; timeline {} = {tl_value}, next value {} (epoch {}); pending work: {}; {}",
            self.name(),
            st.tl.signal.describe(),
            st.tl.value,
            st.tl.epoch,
            st.inflight.describe(8),
            self.backend.status_report()
        );
        if let Err(e) = self.recover(st) {
            msg.push_str(&format!("; recovery failed: {e}"));
        } else {
            msg.push_str("; the queues were reset and the pending work dropped");
        }
        match f {
            WaitFailure::Timeout { .. } => Error::Timeout(msg),
            WaitFailure::Fault(_) => Error::Fault(msg),
            WaitFailure::Error(e) => Error::Device(format!("{msg} (cause: {e})")),
        }
    }

    /// Reset the hardware queues, drop the pending work and mark the timeline complete.
    fn recover(&self, st: &mut DevState<B>) -> Result<()> {
        let reset = self.backend.reset_queues();
        st.inflight.clear();
        st.kernargs.clear();
        if let Some(p) = &self.profiler {
            lock(p).discard_pending();
        }
        st.tl.signal.set_value(st.tl.value - 1)?;
        reset
    }

    /// Wait for all work submitted through the device, release what it held, read profile
    /// records, swap the timeline when it passed 2^31, and report errors deferred from `Drop`s.
    pub fn synchronize(&self) -> Result<()> {
        let (sig, target) = {
            let st = self.lock();
            (st.tl.signal.clone(), st.tl.value - 1)
        };
        self.wait_signal(&sig, target, "synchronize")?;
        {
            let mut st = self.lock();
            let st = &mut *st;
            let tl = &st.tl;
            st.inflight.retire(|p| tl.passed(p))?;
            let idle = st.tl.signal.same(&sig) && st.tl.value - 1 == target;
            if idle {
                st.kernargs.clear();
                if st.tl.value > WRAP_AT {
                    st.tl.swap()?;
                }
            }
        }
        if let Some(p) = &self.profiler {
            lock(p).process()?;
        }
        let errors = self.backend.take_deferred_errors();
        if !errors.is_empty() {
            return Err(Error::Device(format!(
                "{}: errors while releasing device memory: {}",
                self.name(),
                errors.join("; ")
            )));
        }
        Ok(())
    }

    /// For tests of the wrap: once idle, jump the timeline so the next value is `value`.
    pub fn force_timeline_value(&self, value: u64) -> Result<()> {
        self.synchronize()?;
        let mut st = self.lock();
        crate::ensure!(
            (1..FORCE_WRAP_AT).contains(&value),
            InvalidArgument,
            "force_timeline_value({value}): outside 1..{FORCE_WRAP_AT}"
        );
        st.tl.signal.set_value(value - 1)?;
        st.inflight.clear();
        st.kernargs.clear();
        st.tl.value = value;
        Ok(())
    }

    /// Two timestamp signals when this command should be timed (profiling or `wait`).
    pub(crate) fn timing_pair(&self, wanted: bool) -> Result<Option<(B::Signal, B::Signal)>> {
        if !(wanted || self.profiling()) {
            return Ok(None);
        }
        if let Some(p) = &self.profiler {
            if lock(p).pending() >= MAX_PENDING_PROFILE {
                self.synchronize()?;
            }
        }
        Ok(Some((
            self.backend.new_signal(0, false)?,
            self.backend.new_signal(0, false)?,
        )))
    }

    /// Keep a timed command for the profile (no-op without `PROFILE=1`).
    pub(crate) fn profile_add(
        &self,
        pair: Option<&(B::Signal, B::Signal)>,
        name: String,
        q: ProfQueue,
    ) {
        if let (Some(p), Some((s, e))) = (&self.profiler, pair) {
            lock(p).add(s.clone(), e.clone(), name, q);
        }
    }

    /// Seconds between two timestamps.
    pub(crate) fn elapsed_s(&self, pair: &(B::Signal, B::Signal)) -> Result<f64> {
        let (s, e) = (pair.0.timestamp()?, pair.1.timestamp()?);
        Ok(e.saturating_sub(s) as f64 / self.backend.timestamp_hz())
    }

    /// The host-time offset of one queue kind (see [`super::profile`]).
    fn calibrate(&self, kind: ProfQueue) -> Result<f64> {
        let hz = self.backend.timestamp_hz();
        let mut samples = Vec::with_capacity(CALIBRATION_SAMPLES);
        for _ in 0..CALIBRATION_SAMPLES {
            let sig = self.backend.new_signal(0, false)?;
            let t0 = now_us();
            match kind {
                ProfQueue::Compute => {
                    let mut q = self.backend.compute_queue();
                    q.timestamp(&sig)?.signal(&sig, 1)?;
                    q.submit(&self.backend)?;
                }
                ProfQueue::Copy => {
                    let mut q = self.backend.copy_queue();
                    q.timestamp(&sig)?.signal(&sig, 1)?;
                    q.submit(&self.backend)?;
                }
            }
            self.wait_signal(&sig, 1, "profile clock calibration")?;
            let t1 = now_us();
            samples.push((t0 + t1) / 2.0 - sig.timestamp()? as f64 / hz * 1e6);
        }
        Ok(median(samples))
    }
}

impl<B: HcqBackend> Drop for HcqDevice<B> {
    fn drop(&mut self) {
        // Let the GPU finish what uses memory about to be freed; a failure here has no caller to
        // go to (the recovery in `synchronize` already reset the queues).
        let _ = self.synchronize();
    }
}

/// The command sequence of one program call (tinygrad's `HCQProgram.__call__`):
/// `wait(timeline, v - 1) . memory_barrier . [timestamp] . exec . [timestamp] . signal(timeline, v)`.
pub fn encode_program_call<B: HcqBackend>(
    q: &mut B::ComputeQueue,
    timeline: &B::Signal,
    value: u64,
    prg: &Arc<B::Program>,
    launch: &HcqLaunch,
    timing: Option<&(B::Signal, B::Signal)>,
) -> Result<()> {
    q.wait(timeline, value - 1)?.memory_barrier()?;
    if let Some((s, _)) = timing {
        q.timestamp(s)?;
    }
    q.exec(prg, launch)?;
    if let Some((_, e)) = timing {
        q.timestamp(e)?;
    }
    q.signal(timeline, value)?;
    Ok(())
}

/// The command sequence of one copy on the timeline:
/// `wait(timeline, v - 1) . [timestamp] . copy . [timestamp] . signal(timeline, v)`.
pub fn encode_copy<B: HcqBackend>(
    q: &mut B::CopyQueue,
    timeline: &B::Signal,
    value: u64,
    dst: u64,
    src: u64,
    size: u64,
    timing: Option<&(B::Signal, B::Signal)>,
) -> Result<()> {
    q.wait(timeline, value - 1)?;
    if let Some((s, _)) = timing {
        q.timestamp(s)?;
    }
    q.copy(dst, src, size)?;
    if let Some((_, e)) = timing {
        q.timestamp(e)?;
    }
    q.signal(timeline, value)?;
    Ok(())
}

/// Allocation options for staging memory (host memory the GPU reaches, CPU-mapped).
pub(crate) const STAGING_OPTS: BufferOptions = BufferOptions {
    uncached: false,
    cpu_access: true,
    host: true,
    nolru: true,
};

/// How long a wait may take (re-exported for backends' ring-space waits).
pub fn device_wait_timeout() -> Duration {
    wait_timeout()
}
