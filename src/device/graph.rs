//! Device graphs, the seam under the JIT's graph runners (tinygrad's `Compiled.graph`): a batch of
//! kernel launches (and, on devices whose graph spans several devices, transfers) built once
//! ([`crate::device::Runtime::graph`]) and run many times with new buffer addresses, variable
//! values and launch dims ([`DeviceGraph::run`]).
//!
//! [`CallGraph`] is the host-call graph of devices whose launches are synchronous host calls: it
//! calls the programs back to back and takes kernels only. CLANG and LLVM build
//! `runtime::cpu::graph::CpuGraph` (the batch compiled into one program, on a build thread while
//! it replays through host calls: [`DeviceGraph::wait_built`]) and fall back to it;
//! the HCQ devices build `hcq::graph::HcqGraph`, which also takes transfers between devices of
//! its family.
//!
//! A graph's owner that knows which calls can change between runs (the JIT's graph runner: the
//! kernels reading an input, whose addresses tinygrad 0.9.1's `input_replace` swaps, and those
//! with variables) says so with [`DeviceGraph::run_updating`], so a graph that compares the
//! calls with the last run's (HCQ) compares only those.
//!
//! A graph keeps the programs it was built from (shared with their runners), so a run takes the
//! calls alone: a replay collects nothing, whatever the batch's size.
//!
//! Not guaranteed: a graph checks the number and kinds of the calls it is run with, not, under
//! [`DeviceGraph::run_updating`], that the calls not named are those of the last run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{LaunchDims, Program, RawBuf};
use crate::{ensure, Error, Result};

/// One kernel launch with every argument resolved.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The buffers as the program takes them.
    pub raws: Vec<RawBuf>,
    /// The integer variable values, in the program's order.
    pub vals: Vec<i64>,
    pub global: Option<LaunchDims>,
    pub local: Option<LaunchDims>,
}

/// A copy of `size` bytes from `src` into `dst` between devices of one family (tinygrad's
/// `BufferXfer`).
#[derive(Clone, Debug)]
pub struct Xfer {
    pub dst: RawBuf,
    pub src: RawBuf,
    pub size: usize,
}

/// One item of a device graph, resolved.
#[derive(Clone, Debug)]
pub enum GraphCall {
    /// A kernel launch; `writes` are the positions in `launch.raws` the kernel writes (the rest
    /// it reads), which a multi-device graph orders its queues by.
    Kernel { launch: Launch, writes: Vec<usize> },
    /// A transfer.
    Xfer(Xfer),
}

impl GraphCall {
    /// The launch of a kernel call.
    pub fn launch(&self) -> Option<&Launch> {
        match self {
            GraphCall::Kernel { launch, .. } => Some(launch),
            GraphCall::Xfer(_) => None,
        }
    }
}

/// A batch of calls built once and run many times.
pub trait DeviceGraph: Send + Sync {
    /// Run the calls in order (the count and kinds of the build, each kernel call for the program
    /// the graph was built with at its place; addresses, values and dims may differ). With
    /// `wait`, block until done and return the elapsed seconds.
    fn run(&self, calls: &[GraphCall], wait: bool) -> Result<Option<f64>>;

    /// [`DeviceGraph::run`] where only the calls at the indices `updatable` may differ from the
    /// last run's (before the first run: from the calls the graph was built from); the caller
    /// vouches for the others. The default runs [`DeviceGraph::run`].
    fn run_updating(
        &self,
        calls: &[GraphCall],
        updatable: &[usize],
        wait: bool,
    ) -> Result<Option<f64>> {
        let _ = updatable;
        self.run(calls, wait)
    }

    /// How many calls into compiled code the runs made so far, for a graph that compiles its
    /// batch into one program (`None`: the graph does not count them).
    fn entry_calls(&self) -> Option<u64> {
        None
    }

    /// Wait up to `timeout` for the program of a graph that builds it in the background (the
    /// CPU batch graph); where the build stands then. A graph built at once is [`GraphBuild::Ready`].
    fn wait_built(&self, timeout: Duration) -> GraphBuild {
        let _ = timeout;
        GraphBuild::Ready
    }
}

/// Where the background build of a graph's program stands ([`DeviceGraph::wait_built`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphBuild {
    /// Built: replays use it (from the next replay on).
    Ready,
    /// Still building: replays use the graph's fallback.
    Building,
    /// Failed or cancelled: replays keep the fallback.
    Failed,
}

/// The host-call graph: every launch is one synchronous call of its program.
pub struct CallGraph {
    prgs: Vec<Arc<dyn Program>>,
}

impl CallGraph {
    /// The graph of `calls` with the program of each, in order; `None` when one of the calls is
    /// not a kernel or the counts differ.
    pub fn build(prgs: &[Arc<dyn Program>], calls: &[GraphCall]) -> Option<CallGraph> {
        (prgs.len() == calls.len() && calls.iter().all(|c| c.launch().is_some())).then(|| {
            CallGraph {
                prgs: prgs.to_vec(),
            }
        })
    }

    /// Launch `l` through the program of call `k`.
    pub fn call(&self, k: usize, l: &Launch) -> Result<()> {
        let p = self.prgs.get(k).ok_or_else(|| {
            Error::Runtime(format!(
                "host-call graph of {} launches asked for launch {k}",
                self.prgs.len()
            ))
        })?;
        p.call(&l.raws, &l.vals, l.global, l.local, false)?;
        Ok(())
    }
}

impl DeviceGraph for CallGraph {
    fn run(&self, calls: &[GraphCall], wait: bool) -> Result<Option<f64>> {
        ensure!(
            calls.len() == self.prgs.len(),
            Runtime,
            "graph of {} launches run with {} calls",
            self.prgs.len(),
            calls.len()
        );
        let start = Instant::now();
        for (k, c) in calls.iter().enumerate() {
            let l = c
                .launch()
                .ok_or_else(|| Error::Runtime("a host-call graph run with a transfer".into()))?;
            self.call(k, l)?;
        }
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }
}
