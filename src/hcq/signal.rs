//! Signals (tinygrad 0.10's `HCQSignal`) and the CPU side of waiting on them.
//!
//! A signal is a 64-bit value plus a 64-bit timestamp in memory both the CPU and the GPUs of the
//! process can reach. The GPU compares and writes the low 32 bits only, so values stay below 2^32
//! (the device timeline swaps before that). A signal may own a driver event: then the CPU can
//! sleep until a GPU write raises it ([`HcqSignal::sleep`]); otherwise it can only poll.
//!
//! [`wait_value`]: spin for a bounded time (`HCQDEV_SPIN_US`, default 200 µs), then alternate
//! short sleeps on the event with fault polls until the value is reached, a fault is reported, or
//! the timeout passes (`HCQDEV_WAIT_TIMEOUT_MS`, default 10 s). It never waits without a bound.
//!
//! A value that goes backwards between two reads of one wait (a GPU reset, a corrupted or reused
//! signal: the hardware only ever raises it) ends the wait as a fault naming both values, since
//! the value waited for may never come.
//!
//! Not guaranteed: a value reached and then lowered again between two polls is not seen.

use std::time::{Duration, Instant};

use super::KeepAlive;
pub use crate::driver::deadline::wait_timeout;
use crate::helpers::getenv;
use crate::{Error, Result};

/// A value+timestamp slot the GPU and the CPU share.
pub trait HcqSignal: Clone + Send + Sync + 'static {
    /// The current value.
    fn value(&self) -> Result<u64>;
    /// Set the value from the CPU.
    fn set_value(&self, value: u64) -> Result<()>;
    /// The last timestamp a queue wrote (raw GPU ticks).
    fn timestamp(&self) -> Result<u64>;
    /// Sleep until the signal's event fires or `max` passes (signals without an event sleep
    /// briefly). Spurious returns are fine: callers re-check the value.
    fn sleep(&self, max: Duration) -> Result<()>;
    /// `signal@0x7f..` for messages.
    fn describe(&self) -> String;
    /// Whether two handles name the same memory.
    fn same(&self, other: &Self) -> bool;
    /// Keeps the signal's memory alive (for queues referencing it).
    fn keep(&self) -> KeepAlive;
}

fn spin_time() -> Duration {
    Duration::from_micros(getenv("HCQDEV_SPIN_US", 200).max(0) as u64)
}

/// Longest single sleep between fault polls.
const SLEEP_SLICE: Duration = Duration::from_millis(20);

/// Why a wait ended without reaching its value.
#[derive(Debug)]
pub enum WaitFailure {
    /// The timeout passed; the value last seen.
    Timeout { last: u64, waited: Duration },
    /// The device reported a fault.
    Fault(String),
    /// Reading the signal or sleeping failed.
    Error(Error),
}

impl WaitFailure {
    /// A short description (the device adds its state).
    pub fn describe(&self, sig: &str, value: u64) -> String {
        match self {
            WaitFailure::Timeout { last, waited } => format!(
                "{sig} is {last}, waited {} ms for >= {value}",
                waited.as_millis()
            ),
            WaitFailure::Fault(f) => {
                format!("device fault while waiting for {sig} >= {value}: {f}")
            }
            WaitFailure::Error(e) => format!("waiting for {sig} >= {value}: {e}"),
        }
    }
}

/// Wait until `sig >= value`: bounded spin, then sleep on the signal's event, polling `fault`
/// between sleeps; give up after `timeout`.
pub fn wait_value<S: HcqSignal>(
    sig: &S,
    value: u64,
    timeout: Duration,
    fault: &dyn Fn() -> Option<String>,
) -> std::result::Result<(), WaitFailure> {
    let start = Instant::now();
    let seen = std::cell::Cell::new(0u64);
    let read = || {
        let v = sig.value().map_err(WaitFailure::Error)?;
        if v < seen.get() {
            return Err(WaitFailure::Fault(format!(
                "signal {} went backwards from {} to {v} while waiting for {value} (a GPU reset \
                 or a corrupted signal)",
                sig.describe(),
                seen.get()
            )));
        }
        seen.set(v);
        Ok(v)
    };
    let spin = spin_time().min(timeout);
    loop {
        if read()? >= value {
            return Ok(());
        }
        if start.elapsed() >= spin {
            break;
        }
        std::hint::spin_loop();
    }
    loop {
        if let Some(f) = fault() {
            // The write may have landed just before the fault was raised elsewhere.
            if read()? >= value {
                return Ok(());
            }
            return Err(WaitFailure::Fault(f));
        }
        let waited = start.elapsed();
        if waited >= timeout {
            let last = read()?;
            if last >= value {
                return Ok(());
            }
            return Err(WaitFailure::Timeout { last, waited });
        }
        sig.sleep((timeout - waited).min(SLEEP_SLICE))
            .map_err(WaitFailure::Error)?;
        if read()? >= value {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// A host-only signal for testing the wait loop.
    #[derive(Clone, Default)]
    struct HostSignal(Arc<AtomicU64>);

    impl HcqSignal for HostSignal {
        fn value(&self) -> Result<u64> {
            Ok(self.0.load(Ordering::Acquire))
        }
        fn set_value(&self, v: u64) -> Result<()> {
            self.0.store(v, Ordering::Release);
            Ok(())
        }
        fn timestamp(&self) -> Result<u64> {
            Ok(0)
        }
        fn sleep(&self, max: Duration) -> Result<()> {
            std::thread::sleep(max.min(Duration::from_millis(1)));
            Ok(())
        }
        fn describe(&self) -> String {
            "host signal".into()
        }
        fn same(&self, o: &Self) -> bool {
            Arc::ptr_eq(&self.0, &o.0)
        }
        fn keep(&self) -> KeepAlive {
            self.0.clone()
        }
    }

    #[test]
    fn wait_reaches_times_out_and_reports_faults() {
        let s = HostSignal::default();
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            s2.set_value(3).unwrap();
        });
        wait_value(&s, 3, Duration::from_secs(10), &|| None).unwrap();
        t.join().unwrap();
        match wait_value(&s, 4, Duration::from_millis(30), &|| None) {
            Err(WaitFailure::Timeout { last: 3, .. }) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        match wait_value(&s, 4, Duration::from_secs(10), &|| Some("boom".into())) {
            Err(WaitFailure::Fault(f)) => assert_eq!(f, "boom"),
            other => panic!("expected a fault, got {other:?}"),
        }
        // A fault does not hide a value that is already there.
        wait_value(&s, 3, Duration::from_secs(10), &|| Some("late".into())).unwrap();
    }

    /// A signal that reads a scripted sequence of values (the last one repeats).
    #[derive(Clone)]
    struct Scripted(Arc<std::sync::Mutex<Vec<u64>>>);

    impl HcqSignal for Scripted {
        fn value(&self) -> Result<u64> {
            let mut v = self.0.lock().unwrap();
            Ok(if v.len() > 1 { v.remove(0) } else { v[0] })
        }
        fn set_value(&self, v: u64) -> Result<()> {
            *self.0.lock().unwrap() = vec![v];
            Ok(())
        }
        fn timestamp(&self) -> Result<u64> {
            Ok(0)
        }
        fn sleep(&self, _: Duration) -> Result<()> {
            Ok(())
        }
        fn describe(&self) -> String {
            "scripted signal".into()
        }
        fn same(&self, o: &Self) -> bool {
            Arc::ptr_eq(&self.0, &o.0)
        }
        fn keep(&self) -> KeepAlive {
            self.0.clone()
        }
    }

    #[test]
    fn a_signal_going_backwards_is_a_fault_not_a_hang() {
        let s = Scripted(Arc::new(std::sync::Mutex::new(vec![5, 6, 2])));
        match wait_value(&s, 10, Duration::from_secs(60), &|| None) {
            Err(WaitFailure::Fault(f)) => {
                assert!(
                    f.contains("scripted signal went backwards from 6 to 2"),
                    "{f}"
                );
                assert!(f.contains("waiting for 10"), "{f}");
            }
            other => panic!("expected a fault, got {other:?}"),
        }
        // Rising values and repeats are fine.
        let s = Scripted(Arc::new(std::sync::Mutex::new(vec![1, 1, 4, 9, 10])));
        wait_value(&s, 10, Duration::from_secs(60), &|| None).unwrap();
    }
}
