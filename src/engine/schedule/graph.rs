//! Phases A and B of the scheduler: which lazy buffers get realized (`_recurse_lb`, the pad
//! safety check) and which elementwise consumers share a kernel with a reduce
//! (`_recursive_group`, the multi-output and assign checks, chasing a forced reduce down to a
//! contiguous child).
//!
//! Every walk is iterative, so deep graphs cannot overflow the stack. Walks that tinygrad does
//! without a visited set (and that can blow up exponentially on diamonds) remember where they
//! have been; that changes their cost, not their outcome.

use std::collections::HashSet;
use std::sync::Arc;

use crate::helpers::{FxHashMap, FxHashSet, FxIndexMap, FxIndexSet};

use crate::lazy::{LazyBuffer, LbArg};
use crate::ops::{LoadOps, Op, UnaryOps};
use crate::shape::symbolic::{py_ge, py_lt};
use crate::shape::{all_int, sint_prod, ShapeTracker, Sint};
use crate::{ensure, Error, Result};

fn is_reduce(lb: &LazyBuffer) -> bool {
    matches!(lb.op(), Op::Reduce(_))
}

fn srcs_of(lb: &LazyBuffer) -> Result<Arc<[LazyBuffer]>> {
    lb.srcs()
        .ok_or_else(|| Error::Internal(format!("schedule: {lb:?} has no sources (realized)")))
}

/// The distinct views of `tr` among `lb`'s sources, in order (tinygrad's `dedup`).
fn views_of(lb: &LazyBuffer, tr: &LazyBuffer) -> Result<Vec<LazyBuffer>> {
    let mut out: Vec<LazyBuffer> = Vec::new();
    for s in srcs_of(lb)?.iter() {
        if s.base() == tr && !out.contains(s) {
            out.push(s.clone());
        }
    }
    Ok(out)
}

/// The realize decisions and the graph facts the later phases need.
#[derive(Default)]
pub(super) struct Graph {
    /// Bases that get their own buffer written by a kernel (insertion ordered).
    pub realizes: FxIndexSet<LazyBuffer>,
    /// Every unrealized base reachable from the outputs, in DFS order.
    pub allbufs: FxIndexSet<LazyBuffer>,
    simple_pads: FxIndexSet<LazyBuffer>,
    /// base -> the bases reading it, in discovery order: built from `edges` when a reduce is to
    /// be grouped (nothing else reads it, so an elementwise-only graph never builds it).
    pub children: FxIndexMap<LazyBuffer, FxIndexSet<LazyBuffer>>,
    /// (source base, reader base) of every edge `_recurse_lb` crossed, in visit order.
    edges: Vec<(LazyBuffer, LazyBuffer)>,
    /// ASSIGN target base -> the ASSIGN writing it.
    pub assign_targets: FxIndexMap<LazyBuffer, LazyBuffer>,
    /// A buffer computed in the kernel of this reduce.
    pub reduce_for_op: FxHashMap<LazyBuffer, LazyBuffer>,
    /// `GRAPH=1`: log each visited buffer to the lazy-graph picture.
    graph: bool,
}

/// One frame of the `_recurse_lb` walk: a base and the next source to visit.
struct LbFrame {
    buf: LazyBuffer,
    srcs: Arc<[LazyBuffer]>,
    next: usize,
}

impl Graph {
    /// Phases A and B for `outs` (`seen`: buffers scheduled before, not rescheduled).
    pub fn build(outs: &[LazyBuffer], seen: &HashSet<LazyBuffer>) -> Result<Graph> {
        // sized for a small eager step's graph, so its inserts do not grow the tables
        let mut g = Graph {
            realizes: FxIndexSet::with_capacity_and_hasher(16, Default::default()),
            allbufs: FxIndexSet::with_capacity_and_hasher(16, Default::default()),
            edges: Vec::with_capacity(16),
            ..Graph::default()
        };
        for x in outs {
            if x.base().realized().is_none() {
                g.realizes.insert(x.base().clone());
            }
        }
        g.graph = crate::engine::graph::graph_enabled();
        for out in outs {
            g.recurse_lb(out.base())?;
        }
        for x in &g.realizes {
            if x.op() == Op::Load(LoadOps::ASSIGN) && !seen.contains(x) && x.realized().is_none() {
                let target = srcs_of(x)?.get(1).map(|t| t.base().clone());
                let target = target.ok_or_else(|| Error::Internal(format!("{x:?}: no target")))?;
                g.assign_targets.insert(target, x.clone());
            }
        }
        let pads: Vec<LazyBuffer> = g.simple_pads.iter().cloned().collect();
        for p in pads {
            if !g.is_padding_okay(&p)? {
                g.realizes.insert(p);
            }
        }
        g.group_reduces()?;
        Ok(g)
    }

    // ---- phase A -------------------------------------------------------------------------

    /// tinygrad's `_recurse_lb` as an explicit-stack DFS (same visit order).
    fn recurse_lb(&mut self, root: &LazyBuffer) -> Result<()> {
        let mut stack: Vec<LbFrame> = Vec::new();
        self.enter_lb(root, &mut stack, true)?;
        while let Some(top) = stack.last_mut() {
            let Some(x) = top.srcs.get(top.next).cloned() else {
                stack.pop();
                continue;
            };
            top.next += 1;
            let buf = top.buf.clone();
            self.edges.push((x.base().clone(), buf));
            self.enter_lb(&x, &mut stack, false)?;
        }
        Ok(())
    }

    /// The work `_recurse_lb` does on arriving at `buf`; pushes a frame for an unvisited base.
    /// `scheduled`: `buf` is one of the outputs asked for (a box in the `GRAPH=1` picture).
    fn enter_lb(
        &mut self,
        buf: &LazyBuffer,
        stack: &mut Vec<LbFrame>,
        scheduled: bool,
    ) -> Result<()> {
        if self.allbufs.contains(buf) || buf.base().has_realized() {
            return Ok(());
        }
        if self.graph {
            crate::engine::graph::log_lazybuffer(buf, scheduled)?;
        }
        let base = buf.base();
        if !buf.is_base() {
            self.view_rules(buf)?;
            if self.allbufs.contains(base) {
                return Ok(());
            }
        }
        self.allbufs.insert(base.clone());
        if base.forced_realize() {
            self.realizes.insert(base.clone());
        }
        let srcs = srcs_of(base)?;
        if let Op::Load(op) = base.op() {
            self.realizes.insert(base.clone());
            if op == LoadOps::COPY || op == LoadOps::VIEW {
                let src = srcs.first().ok_or_else(|| {
                    Error::Internal(format!("{base:?}: LoadOps.{op:?} without a source"))
                })?;
                ensure!(
                    op != LoadOps::COPY
                        || (src.st().contiguous() && src.size() == src.base().size()),
                    Schedule,
                    "can only copy contig (COPY of {src:?})"
                );
                self.realizes.insert(src.base().clone());
            }
        }
        stack.push(LbFrame {
            buf: base.clone(),
            srcs,
            next: 0,
        });
        Ok(())
    }

    /// The view rules of `_recurse_lb`: simple pads to check, realize before expand, other
    /// masked views to check.
    fn view_rules(&mut self, buf: &LazyBuffer) -> Result<()> {
        let base = buf.base();
        let base_prod = sint_prod(base.st().shape())?;
        let views = &buf.st().views;
        if let (1, Some(mask)) = (views.len(), views.last().and_then(|v| v.mask.as_ref())) {
            if all_int(base.st().shape()) {
                let widths = mask
                    .iter()
                    .map(|(b, e)| e.try_sub(b))
                    .collect::<Result<Vec<Sint>>>()?;
                if py_ge(&base_prod, &sint_prod(&widths)?)? {
                    self.simple_pads.insert(base.clone());
                    return Ok(());
                }
            }
        }
        if py_lt(&base_prod, &sint_prod(buf.st().shape())?)? {
            self.realizes.insert(base.clone());
        } else if views.iter().any(|v| v.mask.is_some()) {
            self.simple_pads.insert(base.clone());
        }
        Ok(())
    }

    /// tinygrad's `_is_padding_okay`: no op with f(0) != 0 between `buf` and the buffers that
    /// are realized anyway.
    fn is_padding_okay(&self, buf: &LazyBuffer) -> Result<bool> {
        let mut stack = vec![buf.clone()];
        let mut visited: FxHashSet<LazyBuffer> = FxHashSet::default();
        while let Some(b) = stack.pop() {
            if self.realizes.contains(&b) || b.has_realized() || !visited.insert(b.clone()) {
                continue;
            }
            if b.op().is_unsafe_pad() {
                return Ok(false);
            }
            for x in srcs_of(&b)?.iter().rev() {
                stack.push(x.base().clone());
            }
        }
        Ok(true)
    }

    // ---- phase B -------------------------------------------------------------------------

    /// Pair every reduce with the elementwise ops that can share its kernel, or force it (or a
    /// contiguous child it chases down to) to realize.
    fn group_reduces(&mut self) -> Result<()> {
        if !self.allbufs.iter().any(is_reduce) {
            return Ok(());
        }
        for (src, reader) in std::mem::take(&mut self.edges) {
            self.children.entry(src).or_default().insert(reader);
        }
        let allbufs: Vec<LazyBuffer> = self.allbufs.iter().cloned().collect();
        for r in &allbufs {
            if !is_reduce(r) || self.realizes.contains(r) {
                continue;
            }
            let mut group = self.recursive_group(r)?;
            let mut can_chase = group.iter().all(|tr| !self.reduce_for_op.contains_key(tr));
            let mut forced = group.contains(r);
            if !forced && group.len() > 1 {
                forced = self.multi_output_check(r, &mut group)?;
            }
            let has_assign = group.iter().any(|x| x.op() == Op::Load(LoadOps::ASSIGN));
            if !forced && has_assign && self.assign_conflict(r, &group)? {
                forced = true;
                can_chase = false;
            }
            if forced {
                let mut tr = r.clone();
                if can_chase {
                    tr = self.chase(r)?;
                    self.reduce_for_op.insert(tr.clone(), r.clone());
                }
                self.realizes.insert(tr);
            } else {
                for tr in group {
                    self.reduce_for_op.insert(tr, r.clone());
                }
            }
        }
        Ok(())
    }

    /// tinygrad's `_recursive_group(r, r.st, r, ...)` with an explicit stack: the realized
    /// consumers reachable from `r` through contiguous elementwise paths (plus `r` itself when
    /// one of them cannot fuse).
    fn recursive_group(&self, r: &LazyBuffer) -> Result<FxIndexSet<LazyBuffer>> {
        struct Frame {
            tr: LazyBuffer,
            st: ShapeTracker,
            kids: Vec<LazyBuffer>,
            next: usize,
        }
        let r_size = r.st().size()?;
        let mut group: FxIndexSet<LazyBuffer> = FxIndexSet::default();
        let mut visited: FxHashSet<(LazyBuffer, ShapeTracker)> = FxHashSet::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut pending = Some((r.clone(), r.st().clone()));
        loop {
            if let Some((tr, st)) = pending.take() {
                if self.realizes.contains(&tr) {
                    if !st.contiguous()
                        || st.size()? != r_size
                        || self.reduce_for_op.contains_key(&tr)
                    {
                        group.insert(r.clone());
                    }
                    group.insert(tr);
                } else {
                    let kids = self.children.get(&tr).map(|c| c.iter().cloned().collect());
                    let kids = kids.unwrap_or_default();
                    stack.push(Frame {
                        tr,
                        st,
                        kids,
                        next: 0,
                    });
                }
            }
            let Some(top) = stack.last_mut() else { break };
            let Some(tr_next) = top.kids.get(top.next).cloned() else {
                stack.pop();
                continue;
            };
            top.next += 1;
            if tr_next.has_realized() {
                continue;
            }
            let st_childs = views_of(&tr_next, &top.tr)?;
            if is_reduce(&tr_next) || st_childs.len() > 1 {
                group.insert(r.clone());
                stack.pop();
                continue;
            }
            let Some(child) = st_childs.first() else {
                continue;
            };
            let st = top.st.compose(child.st())?;
            if visited.insert((tr_next.clone(), st.clone())) {
                pending = Some((tr_next, st));
            }
        }
        Ok(group)
    }

    /// The multi-output check: another reduce among the group's unrealized ancestors forces `r`;
    /// otherwise realized descendants that fuse cleanly join the group. Returns "forced".
    fn multi_output_check(
        &self,
        r: &LazyBuffer,
        group: &mut FxIndexSet<LazyBuffer>,
    ) -> Result<bool> {
        let mut parents: Vec<LazyBuffer> = group.iter().cloned().collect();
        let mut seen_parents: FxHashSet<LazyBuffer> = FxHashSet::default();
        while let Some(p) = parents.pop() {
            if is_reduce(&p) {
                return Ok(true);
            }
            for x in srcs_of(&p)?.iter() {
                let xb = x.base();
                if xb.realized().is_none() && xb != r && seen_parents.insert(xb.clone()) {
                    parents.push(xb.clone());
                }
            }
        }
        let r_size = r.st().size()?;
        let mut kids: Vec<LazyBuffer> = group.iter().cloned().collect();
        let mut seen_kids: FxHashSet<LazyBuffer> = FxHashSet::default();
        let mut realized_descendants: FxIndexSet<LazyBuffer> = FxIndexSet::default();
        while let Some(c) = kids.pop() {
            if is_reduce(&c)
                || !c.st().contiguous()
                || c.st().size()? != r_size
                || self.reduce_for_op.contains_key(&c)
            {
                realized_descendants.clear();
                break;
            }
            if self.realizes.contains(&c) && !group.contains(&c) {
                realized_descendants.insert(c.clone());
            }
            for x in self.children.get(&c).into_iter().flatten() {
                if x.realized().is_none() && x.device() == r.device() && seen_kids.insert(x.clone())
                {
                    kids.push(x.clone());
                }
            }
        }
        group.extend(realized_descendants);
        Ok(false)
    }

    /// An assign in the group conflicts when `r` or the group reads another assign's target.
    fn assign_conflict(&self, r: &LazyBuffer, group: &FxIndexSet<LazyBuffer>) -> Result<bool> {
        let mut parents: Vec<LazyBuffer> = std::iter::once(r).chain(group).cloned().collect();
        let mut visited: FxHashSet<LazyBuffer> = FxHashSet::default();
        while let Some(p) = parents.pop() {
            let p = p.base().clone();
            if p.has_realized() || self.realizes.contains(&p) {
                if let Some(a) = self.assign_targets.get(&p) {
                    if !group.contains(a) {
                        return Ok(true);
                    }
                }
                continue;
            }
            if visited.insert(p.clone()) {
                parents.extend(srcs_of(&p)?.iter().cloned());
            }
        }
        Ok(false)
    }

    /// Follow the unique-child chain of a forced reduce while the composed view stays
    /// contiguous and same-sized; a final widening CAST steps back to its (narrow) source.
    fn chase(&self, r: &LazyBuffer) -> Result<LazyBuffer> {
        let mut tr = r.clone();
        let mut st = tr.st().clone();
        while let Some(kids) = self.children.get(&tr).filter(|k| k.len() == 1) {
            let Some(tr_next) = kids.first().cloned() else {
                break;
            };
            let st_childs = views_of(&tr_next, &tr)?;
            let [child] = st_childs.as_slice() else { break };
            if st.size()? != child.st().size()? {
                break;
            }
            st = st.compose(child.st())?;
            if !st.contiguous() || is_reduce(&tr_next) {
                break;
            }
            tr = tr_next;
        }
        if let (Op::Unary(UnaryOps::CAST), LbArg::DType(to)) = (tr.op(), tr.arg()) {
            let src = srcs_of(&tr)?.first().cloned();
            if let Some(src) = src.filter(|s| to.itemsize() > s.dtype().itemsize()) {
                tr = src.base().clone();
            }
        }
        Ok(tr)
    }
}
