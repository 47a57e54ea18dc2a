//! `HcqGraph`: the JIT's device graph on every HCQ backend (tinygrad 0.9.1
//! `runtime/graph/hcq.py`, a `MultiGraphRunner`), written once over the queue traits.
//!
//! One graph spans every device of the batch (of one backend). Built once: per device a compute
//! queue, a copy queue when the batch copies out of that device, one graph-owned signal per queue
//! and a kickoff signal per device, and kernarg memory holding one block per kernel, filled with
//! the first calls' addresses and values. Each device's compute queue starts with
//! `wait(timeline, v-1) . memory_barrier . signal(kickoff)`; then every item goes on its queue
//! (a kernel on its device's compute queue, a transfer on its source device's copy queue, as
//! tinygrad's) as `waits . [memory_barrier . exec | copy] . signal(queue signal, item value)`,
//! the waits being the item's dependencies ([`sched`]: the last writers of what it reads and
//! writes, the readers of what it writes, the kernel before it, the kickoff of each device whose
//! memory its queue touches first); each compute queue ends waiting for the copy queues that read
//! or wrote its memory and signals its timeline.
//!
//! A run patches only what changed through the typed patch points: the kernargs of kernels whose
//! addresses, values or dims differ from the previous run (the program refills its block: a new
//! launch value), the dims of kernels whose dims differ (`update_exec`: the backend rewrites
//! them wherever it keeps them), the addresses of transfers whose buffers differ (`update_copy`,
//! the side that differs), every graph-internal wait and signal value (each run uses values
//! above the previous run's, so a run needs no CPU reset of the signals) and the timeline waits
//! and signals, each queue's values as one batch ([`HwQueue::update_values`]); then it submits
//! each queue once and advances each device's timeline by one. The graph side of a run whose
//! calls did not change allocates nothing (up to 8 devices): the in-flight entry shares the
//! graph's text and one keep-alive object. Whether anything changed is a
//! comparison of the calls' addresses, values and dims with the last run's (`calls.rs`): of
//! every call under [`DeviceGraph::run`], of the calls named updatable under
//! [`DeviceGraph::run_updating`] (the JIT's: the kernels reading an input and those with
//! variables, what tinygrad 0.9.1's HCQGraph updates: `input_replace`, `var_vals`).
//! [`HcqGraph::last_run`] says what the last run rewrote.
//!
//! The queues are bound once built ([`HwQueue::bind`], tinygrad 0.9.1 `bind`) where the backend
//! binds (NV's compute and copy pushbuffers, AMD's PM4 compute queue; AMD's SDMA copy queue stays
//! unbound as in 0.9.1): a submission then points the GPU at the queue's own copy instead of
//! copying the commands; the copies alternate, so a run first waits for the run two before it
//! (the previous run may still be going).
//!
//! Not guaranteed: a run that changes kernargs, dims or copy addresses first waits for the
//! previous run of the same graph on every device (tinygrad waits always); the graph-internal
//! signal values restart (after such a wait) before they pass 2^31.

mod calls;
mod sched;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use self::sched::{schedule, Access, Dep, Item, QueueId};
use super::allocator::hcq_mem;
use super::device::DevState;
use super::kernargs::KERNARG_ALIGN;
use super::program::dims;
use super::queue::{HwComputeQueue, HwCopyQueue, HwQueue};
use super::timeline::TimelinePoint;
use super::{
    HcqBackend, HcqBuffer, HcqDevice, HcqLaunch, HcqProgram, HcqProgramHandle, HcqSignal, KeepAlive,
};
use crate::device::{DeviceGraph, GraphCall, Launch, Program, RawBuf, Xfer};
use crate::{Error, Result};

/// The most items one graph takes.
const MAX_GRAPH_ITEMS: usize = 1 << 16;
/// Graph-internal signal values restart before they reach this (GPU compares are 32-bit).
const VALUE_LIMIT: u64 = 1 << 31;
/// The devices whose locks a run holds without allocating (more spill into a list).
const INLINE_LOCKS: usize = 8;

type CompQ<B> = <B as HcqBackend>::ComputeQueue;
type CopyQ<B> = <B as HcqBackend>::CopyQueue;
type ExecP<B> = <CompQ<B> as HwComputeQueue<B>>::ExecPatch;
type CopyP<B> = <CopyQ<B> as HwCopyQueue<B>>::CopyPatch;

/// A graph-internal value, relative to a run's base: the kickoff, or the signal of item `j`.
#[derive(Clone, Copy, Debug)]
enum Val {
    Kickoff,
    Item(usize),
}

impl Val {
    fn at(self, base: u64) -> u64 {
        match self {
            Val::Kickoff => base,
            Val::Item(j) => base + 1 + j as u64,
        }
    }
}

/// A queue of the graph with the patch points of its graph-internal waits and signals.
struct GQueue<B: HcqBackend, Q: HwQueue<B>> {
    q: Q,
    waits: Vec<(Q::WaitPatch, Val)>,
    signals: Vec<(Q::SignalPatch, Val)>,
    sig: B::Signal,
}

impl<B: HcqBackend, Q: HwQueue<B>> GQueue<B, Q> {
    fn new(q: Q, sig: B::Signal) -> Self {
        GQueue {
            q,
            waits: Vec::new(),
            signals: Vec::new(),
            sig,
        }
    }
    fn wait(&mut self, sig: &B::Signal, v: Val) -> Result<()> {
        let p = self.q.wait(sig, v.at(1))?.into_patch();
        self.waits.push((p, v));
        Ok(())
    }
    fn signal(&mut self, sig: &B::Signal, v: Val) -> Result<()> {
        let p = self.q.signal(sig, v.at(1))?.into_patch();
        self.signals.push((p, v));
        Ok(())
    }
    /// Rewrite every graph-internal value for a run at `base` (one batch).
    fn patch(&mut self, base: u64) -> Result<()> {
        let waits = self.waits.iter().map(|(p, v)| (p, v.at(base)));
        let signals = self.signals.iter().map(|(p, v)| (p, v.at(base)));
        self.q.update_values(waits, signals)
    }
}

/// The queues and memory of one device of the graph.
struct DevPart<B: HcqBackend> {
    dev: Arc<HcqDevice<B>>,
    comp: GQueue<B, CompQ<B>>,
    tl_wait: <CompQ<B> as HwQueue<B>>::WaitPatch,
    tl_signal: Option<<CompQ<B> as HwQueue<B>>::SignalPatch>,
    /// The timeline epoch whose signal the timeline wait and signal point at (`None` before the
    /// first run): a run re-points them only after the timeline swapped signals.
    tl_epoch: Option<u64>,
    copy: GQueue<B, CopyQ<B>>,
    kick: B::Signal,
    /// What every run's submission keeps alive (programs, kernargs, signals).
    keep: Vec<KeepAlive>,
    /// `keep` and the buffers of this device's items as the graph holds them now, in one object
    /// (made at the first run after a change of the calls: a run then keeps one object alive).
    run_keep: Option<KeepAlive>,
    /// The in-flight table's name of a run (shared by every run).
    what: Arc<str>,
    /// The items on this device's queues (their buffers are kept by its submission).
    items: Vec<usize>,
    /// Whether a queue is bound ([`HwQueue::bind`]): then a run first waits for the run before
    /// the last one (`prev`), whose copy of the commands it rewrites.
    bound: bool,
    last: Option<TimelinePoint>,
    prev: Option<TimelinePoint>,
}

/// An item as built: where it runs and its patch point.
enum Node<B: HcqBackend> {
    Kernel {
        dev: usize,
        prg: Arc<B::Program>,
        kernargs: Arc<B::Buffer>,
        off: usize,
        exec: ExecP<B>,
    },
    Xfer {
        dev: usize,
        copy: CopyP<B>,
    },
}

/// The mutable part: queues, patch points and what they hold now.
struct GraphState<B: HcqBackend> {
    parts: Vec<DevPart<B>>,
    /// Each part's device (`parts[i].dev`), apart so a run can hold their locks while it
    /// changes the parts.
    devs: Vec<Arc<HcqDevice<B>>>,
    /// The parts in the order their devices are locked (by serial: the same order everywhere).
    lock_order: Vec<usize>,
    nodes: Vec<Node<B>>,
    written: Vec<GraphCall>,
    /// The base value of the next run.
    base: u64,
    /// What the last run rewrote.
    last_run: RunPatches,
}

/// What a run of a graph rewrote ([`HcqGraph::last_run`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunPatches {
    /// Items whose kernargs, dims or copy addresses were rewritten.
    pub items: usize,
    /// Wait and signal values patched (every run patches each graph-internal and timeline one).
    pub values: usize,
    /// Dwords the bound queues' images took (their dirty dwords, each once), over all queues.
    pub image_dwords: usize,
}

/// Prebuilt queues over the kernels and transfers of one or more devices (see the module doc).
pub struct HcqGraph<B: HcqBackend> {
    state: Mutex<GraphState<B>>,
}

/// The backend program of an engine program, if it is one of `B`'s.
fn handle<B: HcqBackend>(p: &dyn Program) -> Option<&HcqProgramHandle<B>> {
    p.as_any()?.downcast_ref::<HcqProgramHandle<B>>()
}

/// The identity of a buffer's allocation (views share it).
fn buf_key(r: &RawBuf) -> usize {
    Arc::as_ptr(&r.owner) as *const () as usize
}

/// `Runtime::graph` of an HCQ backend: the graph, or `None` when a program or buffer is not of a
/// `B` device.
pub fn build<B: HcqBackend>(
    prgs: &[Arc<dyn Program>],
    calls: &[GraphCall],
) -> Result<Option<Box<dyn DeviceGraph>>> {
    Ok(build_graph::<B>(prgs, calls)?.map(|g| Box::new(g) as Box<dyn DeviceGraph>))
}

/// [`build`], the graph as its own type.
pub fn build_graph<B: HcqBackend>(
    prgs: &[Arc<dyn Program>],
    calls: &[GraphCall],
) -> Result<Option<HcqGraph<B>>> {
    if calls.is_empty() || calls.len() > MAX_GRAPH_ITEMS {
        return Ok(None);
    }
    let Some(plan) = Plan::<B>::new(prgs, calls) else {
        return Ok(None);
    };
    Ok(Some(HcqGraph::new(plan, calls)?))
}

/// What a build resolved: the devices, each kernel's program, each item's schedule entry.
struct Plan<B: HcqBackend> {
    devs: Vec<Arc<HcqDevice<B>>>,
    prgs: Vec<Option<Arc<B::Program>>>,
    items: Vec<Item>,
}

impl<B: HcqBackend> Plan<B> {
    fn new(prgs: &[Arc<dyn Program>], calls: &[GraphCall]) -> Option<Plan<B>> {
        let mut plan = Plan {
            devs: Vec::new(),
            prgs: Vec::with_capacity(calls.len()),
            items: Vec::with_capacity(calls.len()),
        };
        let mut kernels = prgs.iter();
        for c in calls {
            let item = match c {
                GraphCall::Kernel { launch, writes } => {
                    let h = handle::<B>(&**kernels.next()?)?;
                    let dev = plan.dev_index(h.device());
                    plan.prgs.push(Some(h.program().clone()));
                    let mut item = Item {
                        queue: QueueId { dev, copy: false },
                        reads: Vec::new(),
                        writes: Vec::new(),
                        kernel: true,
                    };
                    for (i, r) in launch.raws.iter().enumerate() {
                        let a = plan.access(r)?;
                        let list = if writes.contains(&i) {
                            &mut item.writes
                        } else {
                            &mut item.reads
                        };
                        list.push(a);
                    }
                    item
                }
                GraphCall::Xfer(x) => {
                    plan.prgs.push(None);
                    let (src, dst) = (plan.access(&x.src)?, plan.access(&x.dst)?);
                    Item {
                        queue: QueueId {
                            dev: src.dev,
                            copy: true,
                        },
                        reads: vec![src],
                        writes: vec![dst],
                        kernel: false,
                    }
                }
            };
            plan.items.push(item);
        }
        kernels.next().is_none().then_some(plan)
    }

    fn dev_index(&mut self, d: &Arc<HcqDevice<B>>) -> usize {
        if let Some(i) = self.devs.iter().position(|x| x.serial() == d.serial()) {
            return i;
        }
        self.devs.push(d.clone());
        self.devs.len() - 1
    }

    fn access(&mut self, r: &RawBuf) -> Option<Access> {
        let dev = hcq_mem::<B>(r).ok()?.device().ok()?;
        Some(Access {
            buf: buf_key(r),
            dev: self.dev_index(&dev),
        })
    }
}

fn addrs(l: &Launch) -> Vec<u64> {
    l.raws.iter().map(|r| r.addr).collect()
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

/// Per device: one kernarg buffer for its kernels, and each kernel's offset in it.
type Kernargs<B> = (Vec<Option<Arc<<B as HcqBackend>::Buffer>>>, Vec<usize>);

fn alloc_kernargs<B: HcqBackend>(plan: &Plan<B>) -> Result<Kernargs<B>> {
    let mut totals = vec![0usize; plan.devs.len()];
    let mut offs = Vec::with_capacity(plan.items.len());
    for (it, p) in plan.items.iter().zip(&plan.prgs) {
        let Some(p) = p else {
            offs.push(0);
            continue;
        };
        let t = &mut totals[it.queue.dev];
        offs.push(*t);
        let n = p.kernargs_alloc_size().max(1).div_ceil(KERNARG_ALIGN) * KERNARG_ALIGN;
        *t = t
            .checked_add(n)
            .ok_or_else(|| Error::InvalidArgument("HcqGraph: kernargs overflow".into()))?;
    }
    let bufs = plan
        .devs
        .iter()
        .zip(&totals)
        .map(|(d, &t)| {
            (t > 0)
                .then(|| d.backend().alloc_kernarg_memory(t).map(Arc::new))
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((bufs, offs))
}

impl<B: HcqBackend> HcqGraph<B> {
    fn new(plan: Plan<B>, calls: &[GraphCall]) -> Result<Self> {
        #[allow(unused_mut)]
        let mut sched = schedule(&plan.items, plan.devs.len());
        #[cfg(test)]
        if let Some((j, w)) = tests::DROP_DEP.with(std::cell::Cell::get) {
            sched.deps[j].retain(|d| *d != Dep::Item(w));
        }
        let (kbufs, offs) = alloc_kernargs(&plan)?;
        let mut parts = plan
            .devs
            .iter()
            .map(|d| new_part(d))
            .collect::<Result<Vec<_>>>()?;
        let mut nodes = Vec::with_capacity(calls.len());
        for (j, c) in calls.iter().enumerate() {
            let q = plan.items[j].queue;
            let waits: Vec<(B::Signal, Val)> = sched.deps[j]
                .iter()
                .map(|d| match *d {
                    Dep::Item(w) => (queue_signal(&parts, plan.items[w].queue), Val::Item(w)),
                    Dep::Kickoff(dev) => (parts[dev].kick.clone(), Val::Kickoff),
                })
                .collect();
            let part = &mut parts[q.dev];
            part.items.push(j);
            nodes.push(match (c, &plan.prgs[j]) {
                (GraphCall::Kernel { launch, .. }, Some(prg)) => {
                    let kernargs = kbufs[q.dev].clone().ok_or_else(|| {
                        Error::Internal("HcqGraph: a kernel without kernargs".into())
                    })?;
                    let hl = prepare(prg, &kernargs, offs[j], launch)?;
                    Node::Kernel {
                        dev: q.dev,
                        exec: part.encode_kernel(j, &waits, prg, &hl)?,
                        prg: prg.clone(),
                        kernargs,
                        off: offs[j],
                    }
                }
                (GraphCall::Xfer(x), None) => Node::Xfer {
                    dev: q.dev,
                    copy: part.encode_copy(j, &waits, x)?,
                },
                _ => {
                    return Err(Error::Internal(
                        "HcqGraph: calls and programs differ".into(),
                    ))
                }
            });
        }
        finish_parts(&mut parts, &sched.final_waits, &plan.items)?;
        for (part, kb) in parts.iter_mut().zip(&kbufs) {
            part.keep.extend(kb.iter().map(|b| b.clone() as KeepAlive));
        }
        let devs: Vec<Arc<HcqDevice<B>>> = parts.iter().map(|p| p.dev.clone()).collect();
        let mut lock_order: Vec<usize> = (0..devs.len()).collect();
        lock_order.sort_by_key(|&i| devs[i].serial());
        Ok(HcqGraph {
            state: Mutex::new(GraphState {
                parts,
                devs,
                lock_order,
                nodes,
                written: calls.to_vec(),
                base: start_base(),
                last_run: RunPatches::default(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GraphState<B>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the last run rewrote.
    pub fn last_run(&self) -> RunPatches {
        self.lock().last_run
    }

    /// A run (see the module doc) comparing the calls at `among` (all when `None`).
    fn run_among(
        &self,
        calls: &[GraphCall],
        among: Option<&[usize]>,
        wait: bool,
    ) -> Result<Option<f64>> {
        let start = Instant::now();
        let mut guard = self.lock();
        let st = &mut *guard;
        st.check(calls, among)?;
        let items = st.changed_items(calls, among)?;
        if !items.is_empty() {
            st.wait_last("the previous run of a graph")?;
            st.patch_calls(calls, &items)?;
            for p in &mut st.parts {
                p.run_keep = None;
            }
        }
        let base = st.next_base(calls.len())?;
        st.wait_prev()?;
        let mut values = 0;
        for p in &mut st.parts {
            p.comp.patch(base)?;
            p.copy.patch(base)?;
            values += p.comp.waits.len() + p.comp.signals.len();
            values += p.copy.waits.len() + p.copy.signals.len();
        }
        let image_dwords = st.submit(calls)?;
        st.last_run = RunPatches {
            items: items.len(),
            values: values
                + st.parts.len()
                + st.parts.iter().filter(|p| p.tl_signal.is_some()).count(),
            image_dwords,
        };
        if !wait {
            return Ok(None);
        }
        st.wait_last("graph")?;
        Ok(Some(start.elapsed().as_secs_f64()))
    }
}

impl<B: HcqBackend> DevPart<B> {
    /// Kernel `j` on the compute queue: `waits . memory_barrier . exec . signal`.
    fn encode_kernel(
        &mut self,
        j: usize,
        waits: &[(B::Signal, Val)],
        prg: &Arc<B::Program>,
        hl: &HcqLaunch,
    ) -> Result<ExecP<B>> {
        let g = &mut self.comp;
        for (s, v) in waits {
            g.wait(s, *v)?;
        }
        g.q.memory_barrier()?;
        let exec = g.q.exec(prg, hl)?.into_patch();
        let sig = g.sig.clone();
        g.signal(&sig, Val::Item(j))?;
        Ok(exec)
    }

    /// Transfer `j` on the copy queue (its destination mapped into this GPU):
    /// `waits . copy . signal`.
    fn encode_copy(&mut self, j: usize, waits: &[(B::Signal, Val)], x: &Xfer) -> Result<CopyP<B>> {
        map_peer(&self.dev, x)?;
        let g = &mut self.copy;
        for (s, v) in waits {
            g.wait(s, *v)?;
        }
        let copy =
            g.q.copy(x.dst.addr, x.src.addr, x.size as u64)?
                .into_patch();
        let sig = g.sig.clone();
        g.signal(&sig, Val::Item(j))?;
        Ok(copy)
    }
}

/// The first run's base value (1; tests may start higher).
fn start_base() -> u64 {
    #[cfg(test)]
    if let Some(b) = tests::START_BASE.with(std::cell::Cell::get) {
        return b;
    }
    1
}

/// The signal of queue `q`.
fn queue_signal<B: HcqBackend>(parts: &[DevPart<B>], q: QueueId) -> B::Signal {
    let p = &parts[q.dev];
    if q.copy {
        p.copy.sig.clone()
    } else {
        p.comp.sig.clone()
    }
}

/// A transfer's destination mapped into its source GPU.
fn map_peer<B: HcqBackend>(src_dev: &Arc<HcqDevice<B>>, x: &Xfer) -> Result<()> {
    let dmem = hcq_mem::<B>(&x.dst)?;
    if dmem.device()?.serial() != src_dev.serial() {
        src_dev.backend().map_peer(dmem.buffer())?;
    }
    Ok(())
}

/// A device's queues with the compute queue's head: `wait(timeline) . barrier . signal(kickoff)`.
fn new_part<B: HcqBackend>(dev: &Arc<HcqDevice<B>>) -> Result<DevPart<B>> {
    let b = dev.backend();
    let kick = dev.new_signal(0)?;
    let mut comp = GQueue::new(b.compute_queue(), dev.new_signal(0)?);
    let tl_wait = comp.q.wait(&dev.timeline_signal(), 0)?.into_patch();
    comp.q.memory_barrier()?;
    comp.signal(&kick, Val::Kickoff)?;
    Ok(DevPart {
        dev: dev.clone(),
        tl_wait,
        tl_signal: None,
        tl_epoch: None,
        comp,
        copy: GQueue::new(b.copy_queue(), dev.new_signal(0)?),
        kick,
        keep: Vec::new(),
        run_keep: None,
        what: Arc::from(""),
        items: Vec::new(),
        bound: false,
        last: None,
        prev: None,
    })
}

/// Every compute queue's tail: wait for the copy queues that touched the device's memory
/// (`final_waits[d]`: the last item of each), signal the timeline; then the queues are bound
/// (where the backend binds) and what every run keeps is collected.
fn finish_parts<B: HcqBackend>(
    parts: &mut [DevPart<B>],
    final_waits: &[Vec<usize>],
    items: &[Item],
) -> Result<()> {
    let copy_sigs: Vec<B::Signal> = parts.iter().map(|p| p.copy.sig.clone()).collect();
    for (part, fw) in parts.iter_mut().zip(final_waits) {
        for &w in fw {
            part.comp
                .wait(&copy_sigs[items[w].queue.dev], Val::Item(w))?;
        }
        let tl = part.dev.timeline_signal();
        part.tl_signal = Some(part.comp.q.signal(&tl, 0)?.into_patch());
        let b = part.dev.backend();
        let comp_bound = part.comp.q.bind(b)?;
        let copy_bound = part.copy.q.bind(b)?;
        part.bound = comp_bound || copy_bound;
        part.what = format!("graph of {} items", part.items.len()).into();
        let mut keep = part.comp.q.take_keep_alive();
        keep.extend(part.copy.q.take_keep_alive());
        for s in [&part.kick, &part.comp.sig, &part.copy.sig] {
            keep.push(s.keep());
        }
        part.keep = keep;
    }
    Ok(())
}

/// What a run's submission on one device keeps alive of a call: its buffers.
fn owners(c: &GraphCall) -> impl Iterator<Item = KeepAlive> + '_ {
    let raws: Vec<&RawBuf> = match c {
        GraphCall::Kernel { launch, .. } => launch.raws.iter().collect(),
        GraphCall::Xfer(x) => vec![&x.dst, &x.src],
    };
    raws.into_iter().map(|r| r.owner.clone())
}

impl<B: HcqBackend> GraphState<B> {
    /// Wait until the previous run finished on every device.
    fn wait_last(&self, what: &str) -> Result<()> {
        for p in &self.parts {
            if let Some(l) = p.last {
                p.dev.wait_point(l, what)?;
            }
        }
        Ok(())
    }

    /// Wait until the run before the last one finished on every device whose queues are bound
    /// (this run rewrites that run's copy of the commands).
    fn wait_prev(&self) -> Result<()> {
        for p in self.parts.iter().filter(|p| p.bound) {
            if let Some(l) = p.prev {
                p.dev
                    .wait_point(l, "the run before the last of a bound graph")?;
            }
        }
        Ok(())
    }

    /// The base value of this run (restarting the graph's signals before they near 2^31).
    fn next_base(&mut self, n: usize) -> Result<u64> {
        let step = n as u64 + 1;
        if self.base + step >= VALUE_LIMIT {
            self.wait_last("restarting a graph's signal values")?;
            for p in &self.parts {
                for s in [&p.kick, &p.comp.sig, &p.copy.sig] {
                    s.set_value(0)?;
                }
            }
            self.base = 1;
        }
        let b = self.base;
        self.base += step;
        Ok(b)
    }

    /// Under every device's lock (taken in serial order): patch the timeline waits and signals,
    /// submit each device's copy queue (if used) and compute queue, advance the timelines.
    /// Returns the dwords the bound queues' images took. Allocates nothing (up to
    /// [`INLINE_LOCKS`] devices).
    fn submit(&mut self, calls: &[GraphCall]) -> Result<usize> {
        let GraphState {
            parts,
            devs,
            lock_order,
            ..
        } = self;
        let n = devs.len();
        let mut inline: [Option<MutexGuard<'_, DevState<B>>>; INLINE_LOCKS] = Default::default();
        let mut spilled: Vec<Option<MutexGuard<'_, DevState<B>>>> = Vec::new();
        let guards = match inline.get_mut(..n) {
            Some(g) => g,
            None => {
                spilled.resize_with(n, || None);
                &mut spilled[..]
            }
        };
        for &i in lock_order.iter() {
            guards[i] = Some(devs[i].lock());
        }
        let mut image_dwords = 0;
        for (part, guard) in parts.iter_mut().zip(guards.iter_mut()) {
            let ds = guard
                .as_deref_mut()
                .ok_or_else(|| Error::Internal("HcqGraph: a device lock missing".into()))?;
            image_dwords += part.submit_locked(ds, calls)?;
        }
        Ok(image_dwords)
    }
}

impl<B: HcqBackend> DevPart<B> {
    /// [`GraphState::submit`] of this device, under its lock.
    fn submit_locked(&mut self, ds: &mut DevState<B>, calls: &[GraphCall]) -> Result<usize> {
        let mut image_dwords = 0;
        let v = self.dev.begin(ds)?;
        let swapped = self.tl_epoch != Some(ds.tl.epoch);
        let tl = swapped.then(|| ds.tl.signal.clone());
        self.comp
            .q
            .update_wait(&self.tl_wait, tl.as_ref(), Some(v - 1))?;
        if let Some(p) = &self.tl_signal {
            self.comp.q.update_signal(p, tl.as_ref(), Some(v))?;
        }
        self.tl_epoch = Some(ds.tl.epoch);
        if !self.copy.q.is_empty() {
            self.copy.q.submit(self.dev.backend())?;
            image_dwords += self.copy.q.last_written().unwrap_or(0);
        }
        let keep = self.run_keep.get_or_insert_with(|| {
            let mut keep = self.keep.clone();
            for &j in &self.items {
                keep.extend(owners(&calls[j]));
            }
            Arc::new(keep)
        });
        let keep: KeepAlive = keep.clone();
        let point = self.dev.commit(ds, &mut self.comp.q, &self.what, keep)?;
        image_dwords += self.comp.q.last_written().unwrap_or(0);
        self.prev = self.last.replace(point);
        Ok(image_dwords)
    }
}

impl<B: HcqBackend> DeviceGraph for HcqGraph<B> {
    fn run(&self, calls: &[GraphCall], wait: bool) -> Result<Option<f64>> {
        self.run_among(calls, None, wait)
    }

    fn run_updating(
        &self,
        calls: &[GraphCall],
        updatable: &[usize],
        wait: bool,
    ) -> Result<Option<f64>> {
        self.run_among(calls, Some(updatable), wait)
    }
}

impl<B: HcqBackend> Drop for HcqGraph<B> {
    fn drop(&mut self) {
        // the GPUs may still read the kernargs and signals: wait for the last run (errors are
        // reported by the devices at their next synchronize)
        let _ = self.lock().wait_last("dropping a graph");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    thread_local! {
        /// `(item, dependency)`: a graph built on this thread leaves out item's wait for that
        /// dependency (tests showing the wait is needed).
        pub(crate) static DROP_DEP: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
        /// The base value of a graph built on this thread's first run (tests of the restart).
        pub(crate) static START_BASE: Cell<Option<u64>> = const { Cell::new(None) };
    }
}
