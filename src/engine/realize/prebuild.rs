//! Building a schedule's kernels in parallel before they run (beyond tinygrad 0.9.1, which lowers,
//! linearizes and compiles one item at a time, on the calling thread, as each item comes up).
//!
//! When a schedule holds two or more kernel items whose runners the method cache holds at neither
//! level (deduplicated as the cache would: the first item of each (device family, AST) is built,
//! a later one finds the first's entry), [`plan`] makes, on the calling thread and in schedule
//! order, each one's optimized Kernel (`get_kernel`: required opts, then the hand-coded ones) and
//! reserves its kernel name in the process-wide name counter, so names (and so sources and
//! binaries) are the ones the in-order build gives. [`with_builders`] then starts a scoped pool
//! of worker threads that linearize, render and compile those kernels (front of the schedule
//! first), while the calling thread lowers and runs the items in order exactly as before: an item
//! whose build a worker has not started is built on the calling thread, and while a worker is
//! building the one it needs, the calling thread builds later ones nobody took. Loading a
//! binary, the method-cache entries, the counters (`programs_built_on_this_thread`,
//! `compiles_on_this_thread`, counted when the item is lowered), `GlobalCounters`, the DEBUG lines
//! and the JIT's capture all stay on the calling thread, in schedule order.
//!
//! The pool has `PARALLEL` threads building at once, the calling thread included (default: the
//! CPU count, as BEAM's pool); `PARALLEL` 0 or 1, or `PARALLEL_BUILD=0`, turns this off. The
//! workers take the calling thread's `Context` overrides ([`Context::snapshot`]); the environment
//! is process-wide. Skipped (everything in order, as before) at `BEAM>=1` (BEAM has its own pool
//! and times candidates on the device), at `DEBUG>=3` (the build's own output belongs between the
//! items' lines), and for a schedule with fewer than two such kernels. Every device takes part:
//! the workers only linearize, render and call the device's compiler, which BEAM's pool already
//! calls from worker threads on every device (the compilers are `Send + Sync` and pure functions
//! of the source: LLVM in process, `cc`, the NV/AMD/CUDA compilers, the emulators' serializers);
//! nothing a worker does touches a GPU, a queue or a CUDA context.
//!
//! Errors: a build that fails gives its error at its item, after the items before it ran (the
//! same error an in-order build gives: the same code made it). A worker that panics is caught; its
//! item is then built again on the calling thread, where the panic shows as it does today. When
//! the loop ends (done, an error, or a panic), workers start no new build and the scope joins
//! them after their current one.
//!
//! Not guaranteed: after an item fails, builds of later items may have run and their names are
//! used up (they are neither cached nor counted); at `DEBUG` 1 and 2, the rare lines the optimizer
//! or the compile cache print directly (an unoptimized kernel, a cache entry not written) may come
//! before the lines of earlier items.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use crate::codegen::kernel::Kernel;
use crate::device::registry::{device_family, Compiled};
use crate::engine::schedule::ScheduleItem;
use crate::helpers::{debug, getenv, Context, FxHashSet};
use crate::ops::{BufferOps, LazyOp, Op};
use crate::runtime::builtin::open_device;
use crate::Result;

use super::method_cache::{
    build_planned, get_runner, get_runner_or, is_cached, plan_kernel, Built,
};
use super::runners::CompiledRunner;

/// The threads that may build at once, the calling thread included (0 or 1: no prebuild).
fn builders() -> usize {
    if getenv("PARALLEL_BUILD", 1) == 0 {
        return 0;
    }
    // asked once: the answer reads the cgroup's quota files
    static CPUS: OnceLock<usize> = OnceLock::new();
    let cpus = *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    usize::try_from(getenv("PARALLEL", cpus as i64)).unwrap_or(0)
}

/// One kernel to build: its device, the optimized Kernel and its reserved name.
struct Job {
    device: String,
    dev: Arc<Compiled>,
    kernel: Kernel,
    name: String,
}

impl Job {
    fn build(&self) -> Result<Built> {
        build_planned(&self.dev, &self.device, &self.kernel, &self.name)
    }
}

/// The kernels of a schedule to build ahead, and which item each belongs to.
pub(crate) struct Plan {
    jobs: Vec<Job>,
    /// Per schedule item, its job.
    of_item: Vec<Option<usize>>,
}

/// The device a kernel item lowers on, when `lower_schedule_item` would lower it as a kernel.
fn kernel_device(si: &ScheduleItem) -> Option<&str> {
    let first = si.ast.first()?;
    if first.op() != Op::Buffer(BufferOps::STORE) {
        return None;
    }
    let out = si.outputs().first()?.device();
    si.bufs.iter().all(|b| b.device() == out).then_some(out)
}

/// Whether the settings allow building ahead (see the module doc).
fn enabled() -> bool {
    builders() >= 2 && getenv("BEAM", 0) < 1 && debug() < 3
}

/// The kernels of `schedule` to build ahead, `None` when nothing is (see the module doc). Makes
/// each Kernel and reserves its name, in schedule order.
pub(crate) fn plan(schedule: &[ScheduleItem]) -> Option<Plan> {
    if schedule.iter().filter(|si| si.is_kernel()).count() < 2 || !enabled() {
        return None;
    }
    let mut seen: FxHashSet<(String, &[LazyOp])> = FxHashSet::default();
    let mut missing: Vec<(usize, &str)> = vec![];
    for (i, si) in schedule.iter().enumerate() {
        let Some(device) = kernel_device(si) else {
            continue;
        };
        // the cache first: a schedule that is all hits (the steady state) allocates nothing here
        if !is_cached(device, &si.ast) && seen.insert((device_family(device), si.ast.as_slice())) {
            missing.push((i, device));
        }
    }
    if missing.len() < 2 {
        return None;
    }
    let mut plan = Plan {
        jobs: vec![],
        of_item: vec![None; schedule.len()],
    };
    for (i, device) in missing {
        // a device that does not open or a kernel the optimizer refuses: the in-order path
        // reports it at its item
        let Ok(dev) = open_device(device) else {
            continue;
        };
        let Ok((kernel, name)) = plan_kernel(&dev, &schedule[i].ast) else {
            continue;
        };
        plan.of_item[i] = Some(plan.jobs.len());
        plan.jobs.push(Job {
            device: device.to_string(),
            dev,
            kernel,
            name,
        });
    }
    Some(plan)
}

/// What became of a job a worker took.
enum Outcome {
    Built(Box<Result<Built>>),
    Panicked,
}

/// The pool's shared state.
struct Shared {
    /// Per job: taken by a worker or the calling thread.
    claimed: Vec<AtomicBool>,
    /// The next job a worker looks at.
    cursor: AtomicUsize,
    /// Set when the calling thread is done with the schedule: start nothing new.
    stop: AtomicBool,
    /// Per job: a worker's result, until the calling thread takes it.
    done: Mutex<Vec<Option<Outcome>>>,
    ready: Condvar,
}

impl Shared {
    fn claim(&self, j: usize) -> bool {
        self.claimed[j]
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn done(&self) -> MutexGuard<'_, Vec<Option<Outcome>>> {
        self.done.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Build the next job nobody took (on any thread; a panic is caught and kept as the job's
/// outcome); false when none is left or the loop stopped.
fn build_next(jobs: &[Job], st: &Shared) -> bool {
    while !st.stop.load(Ordering::Acquire) {
        let j = st.cursor.fetch_add(1, Ordering::AcqRel);
        let Some(job) = jobs.get(j) else {
            return false;
        };
        if !st.claim(j) {
            continue;
        }
        let out = match catch_unwind(AssertUnwindSafe(|| job.build())) {
            Ok(r) => Outcome::Built(Box::new(r)),
            Err(_) => Outcome::Panicked,
        };
        st.done()[j] = Some(out);
        st.ready.notify_all();
        return true;
    }
    false
}

/// A worker: build jobs until none is left or the loop stopped.
fn work(jobs: &[Job], st: &Shared, snapshot: &[(String, String)]) {
    let _ctx = Context::with_snapshot(snapshot);
    while build_next(jobs, st) {}
}

/// The calling thread's view of the pool: how a kernel item gets its runner.
pub(crate) struct Builds<'a> {
    pool: Option<(&'a Plan, &'a Shared)>,
}

impl Builds<'_> {
    /// The runner of schedule item `i` (`device`, `ast`): from the method cache, else its job's
    /// build (this thread's, or a worker's result), else built here as `get_runner` builds it.
    pub(crate) fn runner(
        &self,
        i: usize,
        device: &str,
        ast: &[LazyOp],
    ) -> Result<Arc<CompiledRunner>> {
        let Some((plan, st)) = self.pool else {
            return get_runner(device, ast);
        };
        let Some(j) = plan.of_item.get(i).copied().flatten() else {
            return get_runner(device, ast);
        };
        get_runner_or(device, ast, |_| take(&plan.jobs, j, st))
    }
}

/// Job `j`'s build: made here when no worker took it (or a worker panicked on it: a panic here
/// propagates, as an in-order build's would), else the worker's result once it is there; while
/// it is not, this thread builds later jobs nobody took instead of waiting idle.
fn take(jobs: &[Job], j: usize, st: &Shared) -> Result<Built> {
    if st.claim(j) {
        return jobs[j].build();
    }
    loop {
        let mut done = st.done();
        match done[j].take() {
            Some(Outcome::Built(r)) => return *r,
            Some(Outcome::Panicked) => {
                drop(done);
                return jobs[j].build();
            }
            None => {
                drop(done);
                if build_next(jobs, st) {
                    continue;
                }
                let mut done = st.done();
                while done[j].is_none() {
                    done = st.ready.wait(done).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
}

/// Sets `stop` when the calling thread leaves the loop (also by a panic).
struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Release);
    }
}

/// Run `f` (the in-order loop) with the plan's kernels being built by a scoped pool of workers
/// (see the module doc); without a plan, `f` builds everything itself. Returns once `f` did and
/// every worker ended.
pub(crate) fn with_builders<T>(plan: Option<Plan>, f: impl FnOnce(&Builds<'_>) -> T) -> T {
    let Some(plan) = plan else {
        return f(&Builds { pool: None });
    };
    let n = plan.jobs.len();
    let st = Shared {
        claimed: (0..n).map(|_| AtomicBool::new(false)).collect(),
        cursor: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        done: Mutex::new((0..n).map(|_| None).collect()),
        ready: Condvar::new(),
    };
    let workers = builders().min(n).saturating_sub(1);
    let snapshot = Context::snapshot();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&st);
        for _ in 0..workers {
            let (jobs, st, snapshot) = (&plan.jobs, &st, &snapshot);
            // a thread the OS refuses is no loss: the calling thread builds what nobody took
            let _ = std::thread::Builder::new()
                .name("rawgrad-build".into())
                .spawn_scoped(s, move || work(jobs, st, snapshot));
        }
        f(&Builds {
            pool: Some((&plan, &st)),
        })
    })
}

#[cfg(test)]
mod tests;
