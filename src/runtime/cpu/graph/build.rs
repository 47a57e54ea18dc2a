//! The background build of a CPU batch graph: one thread per graph compiles the batch source into
//! its loaded entry while the graph replays through the host-call path, and hands the program
//! over when the graph's next replay asks for it (`super::CpuGraph` swaps it in under its lock).
//!
//! The thread owns what it uses (the source, the compile closure with its own handles to the
//! compiler, a snapshot of the capturing thread's [`Context`] overrides so `DEBUG`, `CACHELEVEL`
//! and the compiler knobs are the capture's) and never a kernel program of the batch. Dropping a
//! [`Build`] cancels a build that has not started compiling and joins the thread, so it waits for
//! a compile already running (at most one compile, what a synchronous capture would have cost).
//!
//! [`hold_builds`] is the test hook: builds started on the calling thread while its guard lives
//! wait before compiling until [`HeldBuilds::release`] (or the guard drops), so a test can observe
//! the graph before its entry exists without timing.
//!
//! Not guaranteed: a process that exits (`std::process::exit`, or `main` returning while a graph
//! is still owned by something never dropped) does not wait for a running build; the thread is
//! ended with the process, and a compiler child process it started may outlive it briefly.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::device::graph::GraphBuild;
use crate::helpers::{debug, Context};
use crate::runtime::cpu::clang::ClangProgram;
use crate::{Error, Result};

/// The compile of a batch source into its loaded entry, run on the build thread.
pub type Job = Box<dyn FnOnce() -> Result<ClangProgram> + Send>;

/// Where a build stands.
enum Outcome {
    Running,
    Done(Result<ClangProgram>),
    /// The program was handed to the graph (`true`) or the build failed or was cancelled.
    Taken(bool),
}

/// What the graph and its build thread share.
struct Shared {
    outcome: Mutex<Outcome>,
    done: Condvar,
    cancelled: AtomicBool,
    gate: Option<Arc<Gate>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A batch being compiled on its own thread (see the module doc).
pub struct Build {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Build {
    /// Start `job` (the compile of a batch) on a new thread.
    pub fn spawn(job: Job) -> Result<Build> {
        let shared = Arc::new(Shared {
            outcome: Mutex::new(Outcome::Running),
            done: Condvar::new(),
            cancelled: AtomicBool::new(false),
            gate: HOLD.with(|h| h.borrow().clone()),
        });
        let knobs = Context::snapshot();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rg-cpu-graph".into())
            .spawn(move || {
                let _knobs = Context::with_snapshot(&knobs);
                let go = theirs
                    .gate
                    .as_ref()
                    .map_or(true, |g| g.pass(&theirs.cancelled));
                let r = if go && !theirs.cancelled.load(Ordering::Relaxed) {
                    job()
                } else {
                    Err(Error::Runtime("the batch build was cancelled".into()))
                };
                if let Err(e) = &r {
                    if debug() >= 2 && !theirs.cancelled.load(Ordering::Relaxed) {
                        println!("\tCPU batch graph not built, calling kernels one by one: {e}");
                    }
                }
                *lock(&theirs.outcome) = Outcome::Done(r);
                theirs.done.notify_all();
            })
            .map_err(|e| Error::Runtime(format!("starting the CPU batch graph build: {e}")))?;
        Ok(Build {
            shared,
            thread: Some(thread),
        })
    }

    /// The build's result if it is done and was not taken yet (never blocks).
    pub fn take(&self) -> Option<Result<ClangProgram>> {
        let mut o = lock(&self.shared.outcome);
        if !matches!(*o, Outcome::Done(_)) {
            return None;
        }
        let Outcome::Done(r) = std::mem::replace(&mut *o, Outcome::Taken(false)) else {
            return None;
        };
        *o = Outcome::Taken(r.is_ok());
        Some(r)
    }

    /// Wait up to `timeout` for the build to end; where it stands then.
    pub fn wait(&self, timeout: Duration) -> GraphBuild {
        let deadline = Instant::now() + timeout;
        let mut o = lock(&self.shared.outcome);
        loop {
            match &*o {
                Outcome::Done(Ok(_)) | Outcome::Taken(true) => return GraphBuild::Ready,
                Outcome::Done(Err(_)) | Outcome::Taken(false) => return GraphBuild::Failed,
                Outcome::Running => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return GraphBuild::Building;
            }
            o = self
                .shared
                .done
                .wait_timeout(o, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Build {
    fn drop(&mut self) {
        match &self.shared.gate {
            // set under the gate's lock, so a thread about to wait there sees it
            Some(g) => {
                let _l = lock(&g.state);
                self.shared.cancelled.store(true, Ordering::Relaxed);
                g.cv.notify_all();
            }
            None => self.shared.cancelled.store(true, Ordering::Relaxed),
        }
        if let Some(t) = self.thread.take() {
            // the thread only compiles and stores its result; a panic there has nothing to undo
            let _ = t.join();
        }
    }
}

/// The counts of a [`Gate`].
#[derive(Default)]
struct GateState {
    open: bool,
    waiting: usize,
    passed: usize,
    cancelled: usize,
}

/// Holds the builds started under a [`HeldBuilds`] guard.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    /// Wait until the gate opens (`true`: compile) or the build is cancelled (`false`).
    fn pass(&self, cancelled: &AtomicBool) -> bool {
        let mut s = lock(&self.state);
        s.waiting += 1;
        while !s.open && !cancelled.load(Ordering::Relaxed) {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiting -= 1;
        let go = !cancelled.load(Ordering::Relaxed);
        if go {
            s.passed += 1;
        } else {
            s.cancelled += 1;
        }
        go
    }
}

thread_local! {
    static HOLD: RefCell<Option<Arc<Gate>>> = const { RefCell::new(None) };
}

/// The guard of [`hold_builds`].
#[must_use = "the builds are held only while the guard lives"]
pub struct HeldBuilds {
    gate: Arc<Gate>,
    outer: Option<Arc<Gate>>,
}

/// Hold the batch builds started on this thread until [`HeldBuilds::release`] or the guard drops
/// (a test hook: the graph replays through the host-call path meanwhile).
pub fn hold_builds() -> HeldBuilds {
    let gate = Arc::new(Gate::default());
    let outer = HOLD.with(|h| h.borrow_mut().replace(gate.clone()));
    HeldBuilds { gate, outer }
}

impl HeldBuilds {
    /// Let the held builds compile (and the ones started later pass at once).
    pub fn release(&self) {
        lock(&self.gate.state).open = true;
        self.gate.cv.notify_all();
    }

    /// How many builds wait at the gate now.
    pub fn waiting(&self) -> usize {
        lock(&self.gate.state).waiting
    }

    /// How many builds went on to compile.
    pub fn passed(&self) -> usize {
        lock(&self.gate.state).passed
    }

    /// How many builds were cancelled (their graph dropped) before compiling.
    pub fn cancelled(&self) -> usize {
        lock(&self.gate.state).cancelled
    }
}

impl Drop for HeldBuilds {
    fn drop(&mut self) {
        self.release();
        let outer = self.outer.take();
        HOLD.with(|h| *h.borrow_mut() = outer);
    }
}
