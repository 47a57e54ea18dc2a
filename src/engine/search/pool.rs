//! The worker pool of BEAM search: jobs run on worker threads, each with a deadline, so a
//! candidate whose linearizer or compiler hangs cannot hang the search.
//!
//! [`run_parallel`] hands the jobs to `workers` threads (which see the caller's [`Context`]
//! overrides) and collects one result per job, in job order. A job that runs past its `timeout`
//! gives [`Outcome::TimedOut`]: its thread is left behind (it cannot be stopped; when the job
//! returns, the thread's result is ignored and it exits) and a new worker takes its place. A job
//! that panics gives [`Outcome::Panicked`]; its worker goes on with the next job.
//!
//! Not guaranteed: a thread left behind holds its job's memory (and a child process it waits for)
//! until the job returns; with no thread at all (the OS refused to start one), the jobs run on the
//! calling thread without a deadline.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use crate::helpers::Context;

/// A unit of work.
pub(crate) type Job<T> = Box<dyn FnOnce() -> T + Send>;

/// What became of one job.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    Done(T),
    TimedOut,
    Panicked(String),
}

enum Event<T> {
    Started(usize, Instant),
    Finished(usize, Result<T, String>),
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

fn run_one<T>(job: Job<T>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(job)).map_err(|e| panic_text(&*e))
}

struct Workers<T> {
    jobs: Receiver<(usize, Job<T>)>,
    events: Sender<Event<T>>,
    snapshot: Arc<Vec<(String, String)>>,
}

impl<T: Send + 'static> Workers<T> {
    /// Start one worker; false when the OS refused a thread.
    fn spawn(&self) -> bool {
        let (jobs, events, snap) = (
            self.jobs.clone(),
            self.events.clone(),
            Arc::clone(&self.snapshot),
        );
        std::thread::Builder::new()
            .name("rawgrad-beam".into())
            .spawn(move || {
                let _ctx = Context::with_snapshot(&snap);
                while let Ok((i, job)) = jobs.recv() {
                    if events.send(Event::Started(i, Instant::now())).is_err() {
                        return;
                    }
                    if events.send(Event::Finished(i, run_one(job))).is_err() {
                        return;
                    }
                }
            })
            .is_ok()
    }
}

/// Run `jobs` on up to `workers` threads, each job with `timeout`; one outcome per job, in order.
pub(crate) fn run_parallel<T: Send + 'static>(
    jobs: Vec<Job<T>>,
    workers: usize,
    timeout: Duration,
) -> Vec<Outcome<T>> {
    let n = jobs.len();
    let (job_tx, job_rx) = unbounded();
    for (i, j) in jobs.into_iter().enumerate() {
        // the receiver lives in this scope: sending cannot fail
        let _ = job_tx.send((i, j));
    }
    drop(job_tx);
    let (ev_tx, ev_rx) = unbounded();
    let pool = Workers {
        jobs: job_rx,
        events: ev_tx,
        snapshot: Arc::new(Context::snapshot()),
    };
    let started = (0..workers.clamp(1, n.max(1)))
        .filter(|_| pool.spawn())
        .count();
    let mut out: Vec<Option<Outcome<T>>> = (0..n).map(|_| None).collect();
    if started == 0 {
        // no thread: run here, in order, without a deadline
        while let Ok((i, job)) = pool.jobs.try_recv() {
            out[i] = Some(match run_one(job) {
                Ok(v) => Outcome::Done(v),
                Err(e) => Outcome::Panicked(e),
            });
        }
    } else {
        collect(&pool, &ev_rx, &mut out, timeout);
    }
    out.into_iter()
        .map(|o| o.unwrap_or(Outcome::TimedOut))
        .collect()
}

/// Gather events until every job finished or timed out, replacing workers that time out.
fn collect<T: Send + 'static>(
    pool: &Workers<T>,
    events: &Receiver<Event<T>>,
    out: &mut [Option<Outcome<T>>],
    timeout: Duration,
) {
    let mut running: HashMap<usize, Instant> = HashMap::new();
    let mut left = out.len();
    while left > 0 {
        let next = running.values().min().map(|s| *s + timeout);
        let ev = match next {
            Some(deadline) => events.recv_deadline(deadline),
            None => events
                .recv_timeout(Duration::from_secs(3600 * 24))
                .map_err(|_| RecvTimeoutError::Disconnected),
        };
        match ev {
            Ok(Event::Started(i, t)) => {
                running.insert(i, t);
            }
            Ok(Event::Finished(i, r)) => {
                // a job that already timed out is not counted twice
                if running.remove(&i).is_some() {
                    out[i] = Some(match r {
                        Ok(v) => Outcome::Done(v),
                        Err(e) => Outcome::Panicked(e),
                    });
                    left -= 1;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let late: Vec<usize> = (running.iter())
                    .filter(|(_, s)| **s + timeout <= now)
                    .map(|(i, _)| *i)
                    .collect();
                for i in late {
                    running.remove(&i);
                    out[i] = Some(Outcome::TimedOut);
                    left -= 1;
                    pool.spawn();
                }
            }
            // every worker is gone (none could be replaced): the rest count as timed out
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::getenv;

    #[test]
    fn results_in_order_with_timeouts_and_panics() {
        let _g = Context::new(&[("RAWGRAD_POOL_TEST_KNOB", 5)]);
        // job 2 hangs until the test lets it go, long after its deadline
        let (release, hold) = crossbeam::channel::bounded::<()>(0);
        let mut jobs: Vec<Job<i64>> = vec![];
        for i in 0..6i64 {
            let hold = hold.clone();
            jobs.push(Box::new(move || match i {
                2 => {
                    let _ = hold.recv();
                    -1
                }
                // a panic without the panic hook (no backtrace printing to wait for)
                4 => std::panic::resume_unwind(Box::new(format!("boom {i}"))),
                _ => i * 10 + getenv("RAWGRAD_POOL_TEST_KNOB", 0),
            }));
        }
        let out = run_parallel(jobs, 2, Duration::from_secs(1));
        drop(release);
        let shown: Vec<String> = out
            .iter()
            .map(|o| match o {
                Outcome::Done(v) => v.to_string(),
                Outcome::TimedOut => "timeout".into(),
                Outcome::Panicked(m) => m.clone(),
            })
            .collect();
        assert_eq!(shown, ["5", "15", "timeout", "35", "boom 4", "55"]);
    }

    #[test]
    fn no_jobs() {
        let out = run_parallel::<()>(vec![], 4, Duration::from_secs(1));
        assert!(out.is_empty());
    }
}
