//! The scheduler: tinygrad 0.9.1's `engine/schedule.py`. It turns the lazy graph behind a set of
//! output buffers into an ordered list of [`ScheduleItem`]s: kernel ASTs (STORE roots) and
//! LoadOps items (COPY, CUSTOM, EMPTY, VIEW), each with its buffers (outputs first, then inputs
//! in first-use order).
//!
//! The phases:
//! - A (`schedule/graph.rs`): decide which lazy buffers are realized (outputs, LoadOps,
//!   `forced_realize`, realize-before-expand, unsafe pads).
//! - B (`schedule/graph.rs`): pair each reduce with the elementwise consumers that share its
//!   kernel, or force it to realize (at most one reduce per kernel; multi-output kernels when
//!   several realized buffers hang off one reduce).
//! - C (`schedule/lazyop.rs`): build one AST per output group.
//! - D (here): order the items by their dependencies (producer before consumer; every read of an
//!   assign target before the assign), Kahn's algorithm with a FIFO queue in insertion order.
//!   Scheduled outputs are marked realized (their sources are dropped) and added to `seen`.
//!
//! `GRAPH=1` draws the lazy graph as it is scheduled (`engine/graph.rs`).
//!
//! Not guaranteed: image dtypes are not handled (there are none); `LOGOPS` and `SAVE_SCHEDULE`
//! are not implemented.

use std::collections::{HashSet, VecDeque};

use crate::device::BufferRef;
use crate::helpers::{debug, getenv, FxHashMap, FxIndexMap};
use crate::lazy::LazyBuffer;
use crate::ops::{LazyOp, LoadOps, Op};
use crate::shape::VarVals;
use crate::{bail, Error, Result};

mod graph;
mod lazyop;

use graph::Graph;
use lazyop::{schedule_group, LbScheduleItem};

/// One unit of work: a kernel (STORE roots, one per output) or a single LoadOps op, with its
/// buffers (outputs first, then inputs; size-0 buffers are left out) and the values of the
/// symbolic variables its ShapeTrackers were unbound from.
#[derive(Clone, Debug)]
pub struct ScheduleItem {
    pub ast: Vec<LazyOp>,
    pub bufs: Vec<BufferRef>,
    pub var_vals: VarVals,
}

impl ScheduleItem {
    /// The buffers written (tinygrad's `outputs`: the first `len(ast)` buffers).
    pub fn outputs(&self) -> &[BufferRef] {
        &self.bufs[..self.ast.len().min(self.bufs.len())]
    }
    /// The buffers only read.
    pub fn inputs(&self) -> &[BufferRef] {
        &self.bufs[self.ast.len().min(self.bufs.len())..]
    }
    /// The LoadOps of a COPY / CUSTOM / EMPTY / VIEW item; `None` for a kernel.
    pub fn loadop(&self) -> Option<LoadOps> {
        match self.ast.first().map(LazyOp::op) {
            Some(Op::Load(l)) => Some(l),
            _ => None,
        }
    }
    /// Whether this item is a kernel (its AST is not a LoadOps op).
    pub fn is_kernel(&self) -> bool {
        self.loadop().is_none()
    }
}

/// tinygrad's `merge_dicts` into `into`: a Variable bound to two different values is an error.
pub(crate) fn merge_var_vals(into: &mut VarVals, from: &VarVals) -> Result<()> {
    for (k, v) in from {
        if let Some(old) = into.get(k) {
            if old != v {
                bail!(
                    Schedule,
                    "cannot merge var_vals: {k:?} is bound to {old} and {v}"
                );
            }
        }
        into.insert(k.clone(), *v);
    }
    Ok(())
}

/// The prescheduled items, keyed by their first output, and the dependency edges between them.
struct Prescheduled {
    items: FxIndexMap<LazyBuffer, LbScheduleItem>,
    graph: FxHashMap<LazyBuffer, Vec<LazyBuffer>>,
    in_degree: FxIndexMap<LazyBuffer, usize>,
}

/// Phases A to C and the dependency graph (tinygrad's `_graph_schedule`).
fn graph_schedule(outs: &[LazyBuffer], seen: &HashSet<LazyBuffer>) -> Result<Prescheduled> {
    let g = Graph::build(outs, seen)?;
    let multioutput = getenv("MULTIOUTPUT", 1) != 0;
    let mut output_groups: FxIndexMap<LazyBuffer, Vec<LazyBuffer>> = FxIndexMap::default();
    for buf in &g.realizes {
        if buf.has_realized() || buf.op() == Op::Load(LoadOps::CONST) || seen.contains(buf) {
            continue;
        }
        let key = match g.reduce_for_op.get(buf) {
            Some(r) if multioutput => r.clone(),
            _ => buf.clone(),
        };
        output_groups.entry(key).or_default().push(buf.clone());
    }
    let mut items: FxIndexMap<LazyBuffer, LbScheduleItem> = FxIndexMap::default();
    for group in output_groups.values() {
        let lsi = schedule_group(group, &g.realizes, &g.reduce_for_op)?;
        items.insert(group[0].clone(), lsi);
    }
    let mut schedule_targets: FxHashMap<LazyBuffer, LazyBuffer> = FxHashMap::default();
    for (key, lsi) in &items {
        for out in &lsi.outputs {
            schedule_targets.insert(out.clone(), key.clone());
        }
    }
    let mut graph: FxHashMap<LazyBuffer, Vec<LazyBuffer>> = FxHashMap::default();
    let mut in_degree: FxIndexMap<LazyBuffer, usize> = FxIndexMap::default();
    for (key, lsi) in &items {
        in_degree.entry(key.clone()).or_insert(0);
        let mut parents: Vec<&LazyBuffer> = Vec::new();
        let mut assigns: Vec<&LazyBuffer> = Vec::new();
        for x in &lsi.inputs {
            if let Some(p) = schedule_targets.get(x) {
                if !parents.contains(&p) {
                    parents.push(p);
                }
            }
            if let Some(a) = g.assign_targets.get(x) {
                let a = schedule_targets
                    .get(a)
                    .ok_or_else(|| Error::Internal(format!("assign {a:?} is not scheduled")))?;
                if !assigns.contains(&a) {
                    assigns.push(a);
                }
            }
        }
        for p in parents {
            graph.entry(p.clone()).or_default().push(key.clone());
            *in_degree.entry(key.clone()).or_insert(0) += 1;
        }
        for a in assigns {
            graph.entry(key.clone()).or_default().push(a.clone());
            *in_degree.entry(a.clone()).or_insert(0) += 1;
        }
    }
    Ok(Prescheduled {
        items,
        graph,
        in_degree,
    })
}

/// tinygrad's `create_schedule_with_vars`: the ordered schedule that realizes `outs`, and the
/// merged values of every bound variable. Buffers in `seen` are treated as already scheduled;
/// every output scheduled here is added to it and marked realized.
pub fn create_schedule_with_vars(
    outs: &[LazyBuffer],
    seen: &mut HashSet<LazyBuffer>,
) -> Result<(Vec<ScheduleItem>, VarVals)> {
    let Prescheduled {
        mut items,
        graph,
        mut in_degree,
    } = graph_schedule(outs, seen)?;
    let total = items.len();
    let mut queue: VecDeque<LazyBuffer> = items
        .keys()
        .filter(|k| in_degree.get(*k).copied().unwrap_or(0) == 0)
        .cloned()
        .collect();
    let mut schedule: Vec<ScheduleItem> = Vec::with_capacity(total);
    let mut var_vals = VarVals::new();
    let draw = crate::engine::graph::graph_enabled();
    let mut kernel_number = crate::helpers::GlobalCounters::get().kernel_count;
    while let Some(key) = queue.pop_front() {
        let Some(ps) = items.shift_remove(&key) else {
            bail!(Internal, "schedule: {key:?} queued twice");
        };
        if draw {
            kernel_number += 1;
            for out in &ps.outputs {
                crate::engine::graph::realized_lazybuffer(out, kernel_number);
            }
        }
        merge_var_vals(&mut var_vals, &ps.var_vals)?;
        for out in &ps.outputs {
            seen.insert(out.clone());
            out.mark_realized();
        }
        let bufs = ps
            .outputs
            .iter()
            .chain(&ps.inputs)
            .filter(|x| x.size() != 0)
            .map(|x| x.buffer().clone())
            .collect();
        schedule.push(ScheduleItem {
            ast: ps.ast,
            bufs,
            var_vals: ps.var_vals,
        });
        for x in graph.get(&key).into_iter().flatten() {
            let d = in_degree
                .get_mut(x)
                .ok_or_else(|| Error::Internal(format!("schedule: {x:?} has no in-degree")))?;
            *d = d.saturating_sub(1);
            if *d == 0 {
                queue.push_back(x.clone());
            }
        }
    }
    if in_degree.values().any(|&d| d != 0) || schedule.len() != total {
        bail!(
            Schedule,
            "cycle detected in graph, prescheduled {total} but only scheduled {}",
            schedule.len()
        );
    }
    if debug() >= 1 && schedule.len() >= 10 {
        println!("scheduled {} kernels", schedule.len());
    }
    Ok((schedule, var_vals))
}

/// tinygrad's `create_schedule`: like [`create_schedule_with_vars`] for graphs without bound
/// variables (an error otherwise).
pub fn create_schedule(
    outs: &[LazyBuffer],
    seen: &mut HashSet<LazyBuffer>,
) -> Result<Vec<ScheduleItem>> {
    let (schedule, var_vals) = create_schedule_with_vars(outs, seen)?;
    if !var_vals.is_empty() {
        bail!(
            Schedule,
            "create_schedule: the graph has bound variables {:?}; use create_schedule_with_vars",
            var_vals.keys().collect::<Vec<_>>()
        );
    }
    Ok(schedule)
}
