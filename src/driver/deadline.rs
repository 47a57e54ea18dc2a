//! Bounded polling for the waits the driver layer makes outside HCQ: a raw ioctl retried on
//! EINTR/EAGAIN, a vendor runtime's stream, event or command buffer polled until done.
//!
//! [`poll_bounded`] calls a probe until it reports done, spinning briefly, then sleeping with a
//! growing pause (at most 1 ms), and gives up with [`Error::Timeout`] after the HCQ wait timeout
//! (`HCQDEV_WAIT_TIMEOUT_MS`, [`wait_timeout`]) or a number of tries, whichever comes first. The
//! error names what was waited for, the tries, the time and the knob, as the HCQ's timeout does.
//!
//! Not guaranteed: a probe that itself blocks is not interrupted (the bound applies between
//! calls).

use std::time::{Duration, Instant};

use crate::helpers::getenv;
use crate::{Error, Result};

/// The CPU wait timeout of every device wait (HCQ signals, vendor runtimes, ioctl retries):
/// `HCQDEV_WAIT_TIMEOUT_MS` (default 10 000).
pub fn wait_timeout() -> Duration {
    Duration::from_millis(getenv("HCQDEV_WAIT_TIMEOUT_MS", 10_000).max(1) as u64)
}

/// Tries made without sleeping before the pauses start.
const SPIN_TRIES: u64 = 64;
/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(1);

/// Call `probe` until it returns `Some` (done) or an error, at most `max_tries` times and for at
/// most `timeout`; then an [`Error::Timeout`] naming `what`.
pub fn poll_bounded<T>(
    what: impl FnOnce() -> String,
    timeout: Duration,
    max_tries: u64,
    mut probe: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(1);
    let mut tries = 0u64;
    loop {
        tries += 1;
        if let Some(v) = probe()? {
            return Ok(v);
        }
        let waited = start.elapsed();
        if tries >= max_tries || waited >= timeout {
            return Err(Error::Timeout(format!(
                "{}: not done after {tries} tries in {} ms (limits: {max_tries} tries, \
                 {} ms = HCQDEV_WAIT_TIMEOUT_MS)",
                what(),
                waited.as_millis(),
                timeout.as_millis()
            )));
        }
        if tries < SPIN_TRIES {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(pause.min(timeout.saturating_sub(waited)));
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_after_some_tries() {
        let mut n = 0;
        let v = poll_bounded(
            || "x".into(),
            Duration::from_secs(5),
            1000,
            || {
                n += 1;
                Ok((n == 100).then_some(7))
            },
        );
        assert_eq!(v.unwrap(), 7);
        assert_eq!(n, 100);
    }

    #[test]
    fn tries_bound_is_a_timeout_naming_the_wait() {
        let mut n = 0u64;
        let e = poll_bounded(
            || "cuStreamQuery(stream 0x1)".into(),
            Duration::from_secs(60),
            200,
            || {
                n += 1;
                Ok(None::<()>)
            },
        )
        .unwrap_err();
        assert_eq!(n, 200);
        let Error::Timeout(m) = &e else {
            panic!("not a timeout: {e}")
        };
        assert!(
            m.contains("cuStreamQuery(stream 0x1): not done after 200 tries"),
            "{m}"
        );
    }

    #[test]
    fn deadline_bound_is_a_timeout() {
        let start = Instant::now();
        let e = poll_bounded(
            || "ioctl".into(),
            Duration::from_millis(30),
            u64::MAX,
            || Ok(None::<()>),
        )
        .unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(
            matches!(&e, Error::Timeout(m) if m.contains("30 ms")),
            "{e}"
        );
    }

    #[test]
    fn probe_errors_pass_through() {
        let e = poll_bounded(
            || "x".into(),
            Duration::from_secs(1),
            10,
            || Err::<Option<()>, _>(Error::Device("lost".into())),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Device(m) if m == "lost"));
    }
}
