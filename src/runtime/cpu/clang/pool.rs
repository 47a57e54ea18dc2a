//! The process-wide worker pool that runs the shares of a split CLANG kernel.
//!
//! `available_parallelism - 1` workers are started on first use; the calling thread always runs
//! share 0 itself and then waits for the others, so a call costs one channel send per extra share
//! instead of a thread spawn. Shares of concurrent calls queue in one FIFO channel. Idle workers and
//! the waiting caller poll for 50 us before they sleep, so back-to-back small kernels do not pay a
//! futex wakeup each.
//!
//! Not guaranteed: a kernel that never returns blocks its worker (and every share queued behind
//! it) forever.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crossbeam::channel::{unbounded, Receiver, Sender, TryRecvError};

use crate::driver::dl::KernelFn;
use crate::{Error, Result};

/// How long a waiting thread polls before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// One split kernel call, shared by the threads that run its shares.
struct Job {
    kernel: Arc<KernelFn>,
    addrs: Vec<u64>,
    vals: Vec<i32>,
    ncores: i32,
    /// Shares handed to workers that have not finished.
    remaining: AtomicUsize,
    /// The first error a share reported.
    error: Mutex<Option<Error>>,
    /// Set (under its lock) when `remaining` reached 0, for a caller that stopped spinning.
    finished: Mutex<bool>,
    done: Condvar,
}

impl Job {
    fn run_share(&self, core: i32) {
        if let Err(e) = self.kernel.call(&self.addrs, &self.vals, core, self.ncores) {
            lock(&self.error).get_or_insert(e);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *lock(&self.finished) = true;
            self.done.notify_all();
        }
    }

    /// Wait until every share handed out finished: spin briefly (short kernels finish within
    /// microseconds, far below a futex wakeup), then sleep.
    fn wait(&self) {
        let start = Instant::now();
        while self.remaining.load(Ordering::Acquire) != 0 {
            if start.elapsed() > SPIN {
                let mut fin = lock(&self.finished);
                while !*fin {
                    fin = self.done.wait(fin).unwrap_or_else(|e| e.into_inner());
                }
                return;
            }
            std::hint::spin_loop();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Pool {
    tx: Sender<(Arc<Job>, i32)>,
    workers: usize,
}

fn worker(rx: Receiver<(Arc<Job>, i32)>) {
    loop {
        // Poll for a while after each share (kernels tend to come in bursts), then sleep.
        let start = Instant::now();
        let next = loop {
            match rx.try_recv() {
                Ok(task) => break Some(task),
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) if start.elapsed() > SPIN => break None,
                Err(TryRecvError::Empty) => std::hint::spin_loop(),
            }
        };
        let task = match next {
            Some(t) => t,
            None => match rx.recv() {
                Ok(t) => t,
                Err(_) => return,
            },
        };
        task.0.run_share(task.1);
    }
}

/// A worker's stack: room for a kernel's staging buffer (`codegen/uopgraph/stage.rs`, up to
/// `STAGE_MAX_BYTES`) and the kernel's own frame.
const WORKER_STACK: usize = 4 << 20;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (tx, rx) = unbounded();
        let mut workers = 0;
        for i in 1..cores {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("rawgrad-clang-{i}"))
                .stack_size(WORKER_STACK)
                .spawn(move || worker(rx));
            if spawned.is_ok() {
                workers += 1;
            }
        }
        Pool { tx, workers }
    })
}

/// The number of cores kernels run on by default: the pool's workers plus the calling thread.
pub(super) fn max_cores() -> usize {
    pool().workers + 1
}

/// Run shares `0..parts` of `kernel` split into `ncores` shares (all of them when `parts ==
/// ncores`) and wait for them.
pub(super) fn run_split(
    kernel: &Arc<KernelFn>,
    addrs: Vec<u64>,
    vals: Vec<i32>,
    parts: usize,
    ncores: usize,
) -> Result<()> {
    let n = i32::try_from(ncores)
        .map_err(|_| Error::InvalidArgument(format!("{ncores} kernel shares are too many")))?;
    if parts == 0 || parts > ncores {
        return Err(Error::InvalidArgument(format!(
            "run {parts} of {ncores} kernel shares"
        )));
    }
    let parts = parts as i32;
    let job = Arc::new(Job {
        kernel: Arc::clone(kernel),
        addrs,
        vals,
        ncores: n,
        remaining: AtomicUsize::new(parts as usize - 1),
        error: Mutex::new(None),
        finished: Mutex::new(false),
        done: Condvar::new(),
    });
    let pool = pool();
    for core in 1..parts {
        // Without workers (none could be started) the shares run here, in order.
        if pool.workers == 0 {
            job.run_share(core);
        } else if let Err(e) = pool.tx.send((Arc::clone(&job), core)) {
            e.into_inner().0.run_share(core);
        }
    }
    let first = job.kernel.call(&job.addrs, &job.vals, 0, n);
    job.wait();
    first?;
    let err = lock(&job.error).take();
    err.map_or(Ok(()), Err)
}
