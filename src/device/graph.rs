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
//! Not guaranteed: a graph checks the number and kinds of the calls it is run with, not that the
//! programs are the ones it was built from (its owner keeps them together); nor, under
//! [`DeviceGraph::run_updating`], that the calls not named are those of the last run.

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
    /// Run the calls in order (the programs, count and kinds of the build; addresses, values and
    /// dims may differ). `prgs` holds the program of every kernel call, in order. With `wait`,
    /// block until done and return the elapsed seconds.
    fn run(&self, prgs: &[&dyn Program], calls: &[GraphCall], wait: bool) -> Result<Option<f64>>;

    /// [`DeviceGraph::run`] where only the calls at the indices `updatable` may differ from the
    /// last run's (before the first run: from the calls the graph was built from); the caller
    /// vouches for the others. The default runs [`DeviceGraph::run`].
    fn run_updating(
        &self,
        prgs: &[&dyn Program],
        calls: &[GraphCall],
        updatable: &[usize],
        wait: bool,
    ) -> Result<Option<f64>> {
        let _ = updatable;
        self.run(prgs, calls, wait)
    }

    /// Whether runs read their `prgs` argument. A graph that kept what it needs of the programs
    /// when it was built says no: its callers may then pass an empty list (and skip collecting
    /// the programs on every run). The default says yes.
    fn reads_programs(&self) -> bool {
        true
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
    pub len: usize,
}

impl CallGraph {
    /// The graph of `calls`, `None` when one of them is not a kernel.
    pub fn build(calls: &[GraphCall]) -> Option<CallGraph> {
        calls
            .iter()
            .all(|c| c.launch().is_some())
            .then_some(CallGraph { len: calls.len() })
    }
}

impl DeviceGraph for CallGraph {
    fn run(&self, prgs: &[&dyn Program], calls: &[GraphCall], wait: bool) -> Result<Option<f64>> {
        ensure!(
            prgs.len() == self.len && calls.len() == self.len,
            Runtime,
            "graph of {} launches run with {} programs and {} calls",
            self.len,
            prgs.len(),
            calls.len()
        );
        let start = Instant::now();
        for (p, c) in prgs.iter().zip(calls) {
            let l = c
                .launch()
                .ok_or_else(|| Error::Runtime("a host-call graph run with a transfer".into()))?;
            p.call(&l.raws, &l.vals, l.global, l.local, false)?;
        }
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }
}
