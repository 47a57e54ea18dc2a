//! `HcqGraph`: the JIT's device graph on every HCQ backend (tinygrad 0.9.1
//! `runtime/graph/hcq.py`), written once over the queue traits.
//!
//! Built once per batch: one kernarg region per kernel in graph-owned kernarg memory, filled with
//! the first launches' addresses and values, and one compute queue holding, per kernel,
//! `wait(timeline, v+k-1) . memory_barrier . exec . signal(timeline, v+k)` (the order the eager
//! path gives each launch, so kernel k+1 starts after kernel k finished). A run patches only what
//! changed through the typed patch points: the kernargs of launches whose addresses, values or
//! dims differ from the previous run (the program refills its block: a new launch value), the
//! dims of launches whose dims differ (`update_exec` with that launch value: the backend rewrites
//! the dims wherever it keeps them, AMD's PM4 stream or NV's QMD), and every wait and signal
//! value (and the timeline signal, which may have been swapped); then the queue is submitted once
//! and the timeline advances by the number of kernels.
//!
//! Not guaranteed: a run waits for the previous run of the same graph before rewriting its
//! kernargs (tinygrad does too); one compute queue, no copy queue and no multi-device
//! dependencies (a batch holds kernels of one device only; transfers replay as plain items).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::kernargs::KERNARG_ALIGN;
use super::program::dims;
use super::queue::{HwComputeQueue, HwQueue};
use super::timeline::TimelinePoint;
use super::{HcqBackend, HcqBuffer, HcqDevice, HcqLaunch, HcqProgram, HcqProgramHandle, KeepAlive};
use crate::device::{DeviceGraph, Launch, Program};
use crate::{ensure, Error, Result};

/// The most kernels one graph takes (each uses a timeline value).
const MAX_GRAPH_KERNELS: usize = 1 << 16;

type WaitP<B> = <<B as HcqBackend>::ComputeQueue as HwQueue<B>>::WaitPatch;
type SignalP<B> = <<B as HcqBackend>::ComputeQueue as HwQueue<B>>::SignalPatch;
type ExecP<B> = <<B as HcqBackend>::ComputeQueue as HwComputeQueue<B>>::ExecPatch;

/// The mutable part: the queue, its patch points and what the kernargs hold now.
struct GraphState<B: HcqBackend> {
    q: B::ComputeQueue,
    waits: Vec<WaitP<B>>,
    signals: Vec<SignalP<B>>,
    execs: Vec<ExecP<B>>,
    /// What each kernel's block holds now: the engine's launch and the prepared launch value.
    written: Vec<(Launch, HcqLaunch)>,
    last: Option<TimelinePoint>,
}

/// A prebuilt compute queue over one device's kernels (see the module doc).
pub struct HcqGraph<B: HcqBackend> {
    dev: Arc<HcqDevice<B>>,
    prgs: Vec<Arc<B::Program>>,
    kernargs: Arc<B::Buffer>,
    offsets: Vec<usize>,
    state: Mutex<GraphState<B>>,
}

/// The backend program of an engine program, if it is one of `B`'s.
fn handle<B: HcqBackend>(p: &dyn Program) -> Option<&HcqProgramHandle<B>> {
    p.as_any()?.downcast_ref::<HcqProgramHandle<B>>()
}

/// `Runtime::graph` of an HCQ backend: the graph, or `None` when the programs are not all of one
/// `B` device.
pub fn build<B: HcqBackend>(
    prgs: &[&dyn Program],
    launches: &[Launch],
) -> Result<Option<Box<dyn DeviceGraph>>> {
    let handles: Option<Vec<&HcqProgramHandle<B>>> = prgs.iter().map(|p| handle::<B>(*p)).collect();
    let Some(handles) = handles else {
        return Ok(None);
    };
    let Some(first) = handles.first() else {
        return Ok(None);
    };
    let dev = first.device().clone();
    if handles.len() > MAX_GRAPH_KERNELS || handles.iter().any(|h| !Arc::ptr_eq(h.device(), &dev)) {
        return Ok(None);
    }
    let prgs = handles.iter().map(|h| h.program().clone()).collect();
    Ok(Some(Box::new(HcqGraph::new(dev, prgs, launches)?)))
}

fn addrs(l: &Launch) -> Vec<u64> {
    l.raws.iter().map(|r| r.addr).collect()
}

impl<B: HcqBackend> HcqGraph<B> {
    fn new(
        dev: Arc<HcqDevice<B>>,
        prgs: Vec<Arc<B::Program>>,
        launches: &[Launch],
    ) -> Result<Self> {
        ensure!(
            prgs.len() == launches.len(),
            Internal,
            "HcqGraph: {} programs, {} launches",
            prgs.len(),
            launches.len()
        );
        let mut offsets = Vec::with_capacity(prgs.len());
        let mut total = 0usize;
        for p in &prgs {
            offsets.push(total);
            let n = p.kernargs_alloc_size().max(1).div_ceil(KERNARG_ALIGN) * KERNARG_ALIGN;
            total = total
                .checked_add(n)
                .ok_or_else(|| Error::InvalidArgument("HcqGraph: kernargs overflow".into()))?;
        }
        let kernargs = Arc::new(dev.backend().alloc_kernarg_memory(total)?);
        let mut written = Vec::with_capacity(prgs.len());
        for (k, (p, l)) in prgs.iter().zip(launches).enumerate() {
            written.push((l.clone(), prepare(p, &kernargs, offsets[k], l)?));
        }
        let tl = dev.timeline_signal();
        let mut q = dev.backend().compute_queue();
        let (mut waits, mut signals, mut execs) = (vec![], vec![], vec![]);
        for (p, (_, hl)) in prgs.iter().zip(&written) {
            waits.push(q.wait(&tl, 0)?.into_patch());
            q.memory_barrier()?;
            execs.push(q.exec(p, hl)?.into_patch());
            signals.push(q.signal(&tl, 0)?.into_patch());
        }
        Ok(HcqGraph {
            dev,
            prgs,
            kernargs,
            offsets,
            state: Mutex::new(GraphState {
                q,
                waits,
                signals,
                execs,
                written,
                last: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GraphState<B>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Patch what changed since the last run (kernargs, dims).
    fn patch_launches(&self, st: &mut GraphState<B>, launches: &[Launch]) -> Result<()> {
        for (k, l) in launches.iter().enumerate() {
            let old = &st.written[k].0;
            if !changed(old, l) {
                continue;
            }
            let dims_changed = old.global != l.global || old.local != l.local;
            let hl = prepare(&self.prgs[k], &self.kernargs, self.offsets[k], l)?;
            if dims_changed {
                let e = st.execs[k].clone();
                st.q.update_exec(&e, &hl)?;
            }
            st.written[k] = (l.clone(), hl);
        }
        Ok(())
    }
}

/// Whether `b` differs from `a` in what the kernarg block or the dims hold.
fn changed(a: &Launch, b: &Launch) -> bool {
    addrs(a) != addrs(b) || a.vals != b.vals || a.global != b.global || a.local != b.local
}

/// Fill kernel `prg`'s block at byte `off` of `mem` for `l`: its launch value.
fn prepare<P: HcqProgram, M: HcqBuffer>(
    prg: &Arc<P>,
    mem: &Arc<M>,
    off: usize,
    l: &Launch,
) -> Result<HcqLaunch> {
    let dims = (dims("global", l.global)?, dims("local", l.local)?);
    let mem: Arc<dyn HcqBuffer> = mem.clone();
    prg.launch(mem, off, &addrs(l), &l.vals, dims)
}

impl<B: HcqBackend> DeviceGraph for HcqGraph<B> {
    fn run(&self, _: &[&dyn Program], launches: &[Launch], wait: bool) -> Result<Option<f64>> {
        let n = self.prgs.len();
        ensure!(
            launches.len() == n,
            Runtime,
            "HcqGraph of {n} kernels run with {} launches",
            launches.len()
        );
        let start = Instant::now();
        let mut st = self.lock();
        let any_changed = st
            .written
            .iter()
            .zip(launches)
            .any(|(a, b)| changed(&a.0, b));
        if let (true, Some(p)) = (any_changed, st.last) {
            self.dev.wait_point(p, "the previous run of a graph")?;
        }
        self.patch_launches(&mut st, launches)?;
        let mut keep: Vec<KeepAlive> = self.prgs.iter().map(|p| p.clone() as KeepAlive).collect();
        keep.push(self.kernargs.clone());
        keep.extend(
            launches
                .iter()
                .flat_map(|l| l.raws.iter().map(|r| r.owner.clone())),
        );
        let point = {
            let mut dst = self.dev.lock();
            let v = self.dev.begin(&mut dst)?;
            let tl = dst.tl.signal.clone();
            let GraphState {
                q, waits, signals, ..
            } = &mut *st;
            for k in 0..n {
                q.update_wait(&waits[k], Some(&tl), Some(v + k as u64 - 1))?;
                q.update_signal(&signals[k], Some(&tl), Some(v + k as u64))?;
            }
            let what = format!("graph of {n} kernels");
            self.dev.commit_n(&mut dst, q, what, keep, n as u64)?
        };
        st.last = Some(point);
        drop(st);
        if !wait {
            return Ok(None);
        }
        self.dev.wait_point(point, "graph")?;
        Ok(Some(start.elapsed().as_secs_f64()))
    }
}

impl<B: HcqBackend> Drop for HcqGraph<B> {
    fn drop(&mut self) {
        // the GPU may still read the kernargs: wait for the last run (errors are reported by
        // the device at its next synchronize)
        if let Some(p) = self.lock().last {
            let _ = self.dev.wait_point(p, "dropping a graph");
        }
    }
}
