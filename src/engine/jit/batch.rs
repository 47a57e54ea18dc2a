//! Batching captured items into device graphs (tinygrad 0.9.1 `apply_graph_to_jit`,
//! `get_input_replace`, `GraphRunner`): a [`GraphRunner`] is the runner of one batch over the
//! device's [`DeviceGraph`] (`Runtime::graph`: the host-call graph on CLANG and LLVM, `HcqGraph`
//! on AMD and NV).
//!
//! Batching: skip EmptyOp and ViewOp items; consecutive kernels on one device that has a graph
//! form a batch of at most `JIT_BATCH_SIZE` (32) kernels, and the limit doubles after every batch
//! built, so later batches are bigger; a batch of one kernel stays a plain item.
//!
//! A [`GraphRunner`] resolves every launch of its batch once (buffer addresses, variable values,
//! launch dims) when it is built; a replay swaps in the input addresses and, for kernels with
//! variables, recomputes their values and dims, then hands all launches to the device graph:
//! no allocation, no counters and no DEBUG lines per kernel.
//!
//! Not guaranteed: the host-call graph still makes one call per kernel (tinygrad's ClangGraph
//! compiles one C function calling them all; this one costs nothing to build); devices without a
//! graph (INTERP, the vendor fallback) replay item by item.

use std::any::Any;
use std::sync::{Arc, Mutex};

use crate::device::{BufferRef, DeviceGraph, Launch};
use crate::engine::realize::{CompiledRunner, EmptyOp, ExecItem, Runner, RunnerBase, ViewOp};
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

/// The device an item would be graphed on, if its device has a graph.
fn graph_device(ji: &ExecItem) -> Result<Option<String>> {
    if ji
        .runner
        .as_any()
        .downcast_ref::<CompiledRunner>()
        .is_none()
    {
        return Ok(None);
    }
    let dev = open_device(ji.runner.device())?;
    Ok(dev.runtime.has_graph().then(|| dev.name.clone()))
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
    let mut current: Option<String> = None;
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
        let extend = dev.is_some() && batch.len() < max_batch && dev == current;
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

/// A batch of kernels replayed with prepared launches (see the module doc).
pub struct GraphRunner {
    base: RunnerBase,
    /// The batch (input slots emptied).
    pub jit_cache: Vec<ExecItem>,
    runners: Vec<Arc<dyn Runner>>,
    calls: Mutex<Vec<Launch>>,
    graph: Box<dyn DeviceGraph>,
    /// `(kernel, raw position, input index)`: where each input's address goes.
    swaps: Vec<(usize, usize, usize)>,
    /// The kernels whose values or dims depend on variables.
    with_vars: Vec<usize>,
}

fn compiled(r: &dyn Runner) -> Result<&CompiledRunner> {
    r.as_any()
        .downcast_ref::<CompiledRunner>()
        .ok_or_else(|| Error::Internal(format!("graph item {} is not a kernel", r.display_name())))
}

impl GraphRunner {
    /// Prepare every launch of `jit_cache` (whose buffers are all allocated) and build the
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
            let r = compiled(&*ji.runner)?;
            let bufs: Vec<BufferRef> = ji.bufs.iter().flatten().cloned().collect();
            calls.push(r.prepare(&bufs, var_vals)?);
            if r.has_vars() {
                with_vars.push(j);
            }
            ops.push(r.op_estimate().clone());
            mem.push(r.mem_estimate().clone());
        }
        let mut swaps = Vec::new();
        for &((j, i), k) in &input_replace {
            let r = compiled(&*jit_cache[j].runner)?;
            swaps.extend(r.raw_positions(i).into_iter().map(|p| (j, p, k)));
            jit_cache[j].bufs[i] = None;
        }
        let device = jit_cache
            .first()
            .map(|ji| ji.runner.device().to_string())
            .unwrap_or_default();
        let name = colored(&format!("<batched {}>", jit_cache.len()), Some("cyan"));
        let prgs = jit_cache
            .iter()
            .map(|ji| compiled(&*ji.runner).map(CompiledRunner::program))
            .collect::<Result<Vec<_>>>()?;
        let Some(graph) = open_device(&device)?.runtime.graph(&prgs, &calls)? else {
            return Ok(None);
        };
        drop(prgs);
        Ok(Some(GraphRunner {
            graph,
            base: RunnerBase::new(name, device, sint_sum(&ops)?, sint_sum(&mem)?),
            runners: jit_cache.iter().map(|ji| ji.runner.clone()).collect(),
            jit_cache,
            calls: Mutex::new(calls),
            swaps,
            with_vars,
        }))
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
            calls[j].raws[p] = raw.raw()?.clone();
        }
        for &j in &self.with_vars {
            compiled(&*self.runners[j])?.update_launch(&mut calls[j], var_vals)?;
        }
        let prgs = self
            .runners
            .iter()
            .map(|r| compiled(&**r).map(CompiledRunner::program))
            .collect::<Result<Vec<_>>>()?;
        self.graph.run(&prgs, &calls, wait)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
