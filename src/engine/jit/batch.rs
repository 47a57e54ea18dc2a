//! Batching captured items into device graphs (tinygrad 0.9.1 `apply_graph_to_jit`,
//! `get_input_replace`, `GraphRunner`): a [`GraphRunner`] is the runner of one batch over the
//! device's [`DeviceGraph`] (`Runtime::graph`: the batch compiled into one program on CLANG and
//! LLVM, `runtime/cpu/graph.rs`; `HcqGraph` on AMD and NV).
//!
//! Batching: skip EmptyOp and ViewOp items; consecutive items that can be graphed form a batch of
//! at most `JIT_BATCH_SIZE` (32) items, and the limit doubles after every batch built, so later
//! batches are bigger; a batch of one item stays a plain item. A kernel can be graphed on a device
//! that has a graph; a transfer between devices of one family (tinygrad's `BufferXfer`) on its
//! destination device when that device's graph spans devices (`Runtime::multi_graph`: AMD, NV).
//! An item joins the batch when it is on the batch's device, or when both are of one family whose
//! graph spans devices (so the kernels and transfers of several GPUs share one graph).
//!
//! A [`GraphRunner`] resolves every call of its batch once (buffer addresses, variable values,
//! launch dims, transfer addresses) when it is built; a replay swaps in the input addresses and,
//! for kernels with variables, recomputes their values and dims, then hands all calls to the
//! device graph, naming those two kinds as the only ones that may have changed
//! ([`DeviceGraph::run_updating`]): no counters and no DEBUG lines per kernel, and no allocation
//! whatever the batch's size (the graph keeps the programs it was built from; `tests/jit_alloc.rs`
//! pins it).
//!
//! Not guaranteed: where the CPU batch graph does not apply the host-call graph makes one call per
//! kernel; devices without a graph (INTERP, the vendor fallback) replay item by item.

use std::any::Any;
use std::sync::{Arc, Mutex};

use crate::device::registry::device_family;
use crate::device::{BufferRef, DeviceGraph, GraphCall, Program, Xfer};
use crate::engine::realize::{
    BufferCopy, CompiledRunner, EmptyOp, ExecItem, Runner, RunnerBase, ViewOp,
};
use crate::helpers::{colored, debug, getenv};
use crate::runtime::builtin::open_device;
use crate::shape::{sint_sum, Sint, VarVals};
use crate::{Error, Result};

/// tinygrad's `get_input_replace`: `((item, buffer position), input index)` for every buffer of
/// the items that is one of the inputs.
pub fn get_input_replace(
    jit_cache: &[ExecItem],
    input_buffers: &[BufferRef],
) -> Vec<((usize, usize), usize)> {
    let mut out = Vec::new();
    for (j, ji) in jit_cache.iter().enumerate() {
        for (i, a) in ji.bufs.iter().enumerate() {
            let Some(a) = a else { continue };
            if let Some(k) = input_buffers.iter().position(|b| b == a) {
                out.push(((j, i), k));
            }
        }
    }
    out
}

/// The kernels a graph runner stands for (`None` for any other runner).
pub fn graph_items(runner: &dyn Runner) -> Option<&[ExecItem]> {
    runner
        .as_any()
        .downcast_ref::<GraphRunner>()
        .map(|g| g.jit_cache.as_slice())
}

/// The graph runner of `runner` (`None` for any other runner).
pub fn graph_runner(runner: &dyn Runner) -> Option<&GraphRunner> {
    runner.as_any().downcast_ref::<GraphRunner>()
}

/// Where an item would be graphed: its device, and whether that device's graph spans devices.
#[derive(Clone, Debug, PartialEq)]
struct GraphDev {
    name: String,
    multi: bool,
}

impl GraphDev {
    /// Whether an item graphed on `self` may join a batch on `current` (tinygrad's
    /// `can_share_graph`).
    fn shares(&self, current: &Option<GraphDev>) -> bool {
        let Some(c) = current else { return false };
        self.name == c.name || (self.multi && device_family(&self.name) == device_family(&c.name))
    }
}

/// The device an item would be graphed on, if any (see the module doc).
fn graph_device(ji: &ExecItem) -> Result<Option<GraphDev>> {
    let any = ji.runner.as_any();
    let name = if any.is::<CompiledRunner>() {
        ji.runner.device().to_string()
    } else if any
        .downcast_ref::<BufferCopy>()
        .is_some_and(BufferCopy::is_xfer)
    {
        match ji.bufs.first() {
            Some(Some(dest)) => dest.device().to_string(),
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let dev = open_device(&name)?;
    let multi = dev.runtime.multi_graph();
    let ok = dev.runtime.has_graph() && (multi || any.is::<CompiledRunner>());
    Ok(ok.then(|| GraphDev {
        name: dev.name.clone(),
        multi,
    }))
}

/// tinygrad's `apply_graph_to_jit` (see the module doc).
pub fn apply_graph_to_jit(
    jit_cache: Vec<ExecItem>,
    input_buffers: &[BufferRef],
    var_vals: &VarVals,
) -> Result<Vec<ExecItem>> {
    let mut max_batch = usize::try_from(getenv("JIT_BATCH_SIZE", 32))
        .unwrap_or(32)
        .max(1);
    let mut out: Vec<ExecItem> = Vec::new();
    let mut batch: Vec<ExecItem> = Vec::new();
    let mut current: Option<GraphDev> = None;
    let flush = |batch: &mut Vec<ExecItem>, out: &mut Vec<ExecItem>, max: &mut usize| {
        let items = std::mem::take(batch);
        if items.len() <= 1 {
            out.extend(items);
            return Ok::<(), Error>(());
        }
        let n = items.len();
        let Some(graph) = GraphRunner::new(items.clone(), input_buffers, var_vals)? else {
            if debug() >= 2 {
                println!("\tJIT GRAPHing failed batch with {n} kernels: the device refused it");
            }
            out.extend(items);
            return Ok(());
        };
        if debug() >= 2 {
            let dev = &graph.base.device;
            println!("\tJIT GRAPHing batch with {n} kernels on device {dev}");
        }
        out.push(ExecItem::new(Arc::new(graph), input_buffers.to_vec()));
        *max = max.saturating_mul(2);
        Ok(())
    };
    for ji in jit_cache {
        let any = ji.runner.as_any();
        if any.is::<EmptyOp>() || any.is::<ViewOp>() {
            continue;
        }
        let dev = graph_device(&ji)?;
        let extend = batch.len() < max_batch && dev.as_ref().is_some_and(|d| d.shares(&current));
        if !extend && !batch.is_empty() {
            flush(&mut batch, &mut out, &mut max_batch)?;
        }
        match dev {
            Some(_) => batch.push(ji),
            None => out.push(ji),
        }
        current = dev;
    }
    flush(&mut batch, &mut out, &mut max_batch)?;
    Ok(out)
}

/// A batch of kernels and transfers replayed with prepared calls (see the module doc).
pub struct GraphRunner {
    base: RunnerBase,
    /// The batch (input slots emptied).
    pub jit_cache: Vec<ExecItem>,
    runners: Vec<Arc<dyn Runner>>,
    calls: Mutex<Vec<GraphCall>>,
    graph: Box<dyn DeviceGraph>,
    /// `(item, raw position, input index)`: where each input's address goes (a transfer's
    /// positions: 0 the destination, 1 the source).
    swaps: Vec<(usize, usize, usize)>,
    /// The kernels whose values or dims depend on variables.
    with_vars: Vec<usize>,
    /// The items a replay may change (those of `swaps` and `with_vars`, sorted, once each).
    updatable: Vec<usize>,
}

fn compiled(r: &dyn Runner) -> Result<&CompiledRunner> {
    r.as_any()
        .downcast_ref::<CompiledRunner>()
        .ok_or_else(|| Error::Internal(format!("graph item {} is not a kernel", r.display_name())))
}

/// The resolved call of one item: a kernel's launch, or a transfer's addresses.
fn prepare_call(ji: &ExecItem, var_vals: &VarVals) -> Result<GraphCall> {
    let bufs: Vec<BufferRef> = ji.bufs.iter().flatten().cloned().collect();
    if let Ok(r) = compiled(&*ji.runner) {
        return Ok(GraphCall::Kernel {
            launch: r.prepare(&bufs, var_vals)?,
            writes: r.written_raws(),
        });
    }
    let [dst, src, ..] = &bufs[..] else {
        return Err(Error::Internal(format!(
            "graph transfer {} without its buffers",
            ji.runner.display_name()
        )));
    };
    Ok(GraphCall::Xfer(Xfer {
        dst: dst.raw()?.clone(),
        src: src.raw()?.clone(),
        size: dst.nbytes(),
    }))
}

/// The programs of the kernels among `runners`, in order.
fn programs(runners: &[Arc<dyn Runner>]) -> Vec<Arc<dyn Program>> {
    runners
        .iter()
        .filter_map(|r| r.as_any().downcast_ref::<CompiledRunner>())
        .map(|r| Arc::clone(r.shared_program()))
        .collect()
}

impl GraphRunner {
    /// Prepare every call of `jit_cache` (whose buffers are all allocated) and build the
    /// device graph (`None` when the device refuses the batch).
    pub fn new(
        mut jit_cache: Vec<ExecItem>,
        input_buffers: &[BufferRef],
        var_vals: &VarVals,
    ) -> Result<Option<GraphRunner>> {
        let input_replace = get_input_replace(&jit_cache, input_buffers);
        let mut calls = Vec::with_capacity(jit_cache.len());
        let mut with_vars = Vec::new();
        let (mut ops, mut mem): (Vec<Sint>, Vec<Sint>) = (Vec::new(), Vec::new());
        for (j, ji) in jit_cache.iter().enumerate() {
            calls.push(prepare_call(ji, var_vals)?);
            if compiled(&*ji.runner).is_ok_and(CompiledRunner::has_vars) {
                with_vars.push(j);
            }
            ops.push(ji.runner.op_estimate().clone());
            mem.push(ji.runner.mem_estimate().clone());
        }
        let mut swaps = Vec::new();
        for &((j, i), k) in &input_replace {
            match compiled(&*jit_cache[j].runner) {
                Ok(r) => swaps.extend(r.raw_positions(i).into_iter().map(|p| (j, p, k))),
                Err(_) => swaps.push((j, i, k)),
            }
            jit_cache[j].bufs[i] = None;
        }
        let device = jit_cache
            .first()
            .map(|ji| ji.runner.device().to_string())
            .unwrap_or_default();
        let name = colored(&format!("<batched {}>", jit_cache.len()), Some("cyan"));
        let runners: Vec<Arc<dyn Runner>> = jit_cache.iter().map(|ji| ji.runner.clone()).collect();
        let graph = open_device(&device)?
            .runtime
            .graph(&programs(&runners), &calls)?;
        let Some(graph) = graph else {
            return Ok(None);
        };
        let mut updatable: Vec<usize> =
            swaps.iter().map(|s| s.0).chain(with_vars.clone()).collect();
        updatable.sort_unstable();
        updatable.dedup();
        Ok(Some(GraphRunner {
            updatable,
            graph,
            base: RunnerBase::new(name, device, sint_sum(&ops)?, sint_sum(&mem)?),
            runners,
            jit_cache,
            calls: Mutex::new(calls),
            swaps,
            with_vars,
        }))
    }
}

impl GraphRunner {
    /// The device graph the batch replays through.
    pub fn device_graph(&self) -> &dyn DeviceGraph {
        &*self.graph
    }
}

impl Runner for GraphRunner {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, bufs: &[BufferRef], var_vals: &VarVals, wait: bool) -> Result<Option<f64>> {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        for &(j, p, k) in &self.swaps {
            let raw = bufs.get(k).ok_or_else(|| {
                Error::Runtime(format!("graph input {k} missing ({} given)", bufs.len()))
            })?;
            let raw = raw.raw()?.clone();
            match &mut calls[j] {
                GraphCall::Kernel { launch, .. } => launch.raws[p] = raw,
                GraphCall::Xfer(x) if p == 0 => x.dst = raw,
                GraphCall::Xfer(x) => x.src = raw,
            }
        }
        for &j in &self.with_vars {
            if let GraphCall::Kernel { launch, .. } = &mut calls[j] {
                compiled(&*self.runners[j])?.update_launch(launch, var_vals)?;
            }
        }
        self.graph.run_updating(&calls, &self.updatable, wait)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
