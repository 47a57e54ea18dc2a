//! Phase C of the scheduler: one group of outputs becomes one kernel AST (`_schedule_group`,
//! `_recursive_lazyop`).
//!
//! The AST is built by an explicit-stack post-order walk (same visit order as tinygrad's
//! recursion, so input numbering matches), memoized per (lazy buffer, ShapeTracker).

use super::merge_var_vals;
use crate::device::registry::device_family;
use crate::dtype::dtypes;
use crate::helpers::{getenv, FxHashMap, FxIndexMap, FxIndexSet};
use crate::lazy::{LazyBuffer, LbArg};
use crate::ops::{ConstArg, LazyOp, LoadOps, Op};
use crate::shape::{Node, ShapeTracker, VarVals};
use crate::{bail, Error, Result};

/// A kernel (or LoadOps item) before ordering: the LazyBuffers it writes and reads.
pub(super) struct LbScheduleItem {
    pub ast: Vec<LazyOp>,
    pub outputs: Vec<LazyBuffer>,
    pub inputs: Vec<LazyBuffer>,
    pub var_vals: VarVals,
}

/// What the AST walk needs to know about the group.
struct Ctx<'a> {
    outputs: &'a [LazyBuffer],
    realizes: &'a FxIndexSet<LazyBuffer>,
    /// target base -> its ASSIGN, for the assigns of this group.
    assign_targets: &'a FxIndexMap<LazyBuffer, LazyBuffer>,
    inputs: Vec<LazyBuffer>,
    var_vals: VarVals,
}

/// tinygrad's `_schedule_group`: the AST of a group of outputs (a single LoadOps op for COPY,
/// CUSTOM, EMPTY and VIEW).
pub(super) fn schedule_group(
    outs: &[LazyBuffer],
    realizes: &FxIndexSet<LazyBuffer>,
    reduce_for_op: &FxHashMap<LazyBuffer, LazyBuffer>,
) -> Result<LbScheduleItem> {
    let mut var_vals = VarVals::new();
    for out in outs {
        merge_var_vals(&mut var_vals, &out.st().var_vals()?)?;
    }
    let Some(out0) = outs.first() else {
        bail!(Internal, "schedule_group: empty group");
    };
    if let Op::Load(op @ (LoadOps::CUSTOM | LoadOps::COPY | LoadOps::EMPTY | LoadOps::VIEW)) =
        out0.op()
    {
        return loadop_item(outs, op, var_vals);
    }
    let mut assign_targets = FxIndexMap::default();
    for x in outs.iter().filter(|x| x.op() == Op::Load(LoadOps::ASSIGN)) {
        if let Some(target) = x.srcs().and_then(|s| s.get(1).cloned()) {
            assign_targets.insert(target, x.clone());
        }
    }
    let mut ctx = Ctx {
        outputs: outs,
        realizes,
        assign_targets: &assign_targets,
        inputs: Vec::new(),
        var_vals,
    };
    let mut ast = Vec::with_capacity(outs.len());
    for (i, out) in outs.iter().enumerate() {
        let shape = reduce_for_op.get(out).unwrap_or(out).shape().to_vec();
        let output_st = ShapeTracker::from_shape(&shape)?;
        let output_view = match out.arg() {
            LbArg::AssignView(st) if out.op() == Op::Load(LoadOps::ASSIGN) => st.clone(),
            _ => output_st.clone(),
        };
        let lop = ctx.recursive_lazyop(out, output_st)?;
        let (output_view, vv) = output_view.simplify()?.unbind()?;
        ctx.var_vals.extend(vv);
        ast.push(LazyOp::store(lop, i, out.dtype(), output_view));
    }
    Ok(LbScheduleItem {
        ast,
        outputs: outs.to_vec(),
        inputs: ctx.inputs,
        var_vals: ctx.var_vals,
    })
}

/// A COPY / CUSTOM / EMPTY / VIEW item: the op alone, reading its sources' bases.
fn loadop_item(outs: &[LazyBuffer], op: LoadOps, var_vals: VarVals) -> Result<LbScheduleItem> {
    let [out] = outs else {
        bail!(
            Schedule,
            "can't schedule a group of LoadOps.{op:?} ({} outputs)",
            outs.len()
        );
    };
    let srcs = out.srcs().unwrap_or_default();
    let inputs: Vec<LazyBuffer> = srcs.iter().map(|x| x.base().clone()).collect();
    let ast = vec![loadop_ast(out, op, &inputs)?];
    Ok(LbScheduleItem {
        ast,
        outputs: outs.to_vec(),
        inputs,
        var_vals,
    })
}

/// The single-op AST of a LoadOps item (`USE_COPY_KERNEL=1` turns a COPY within one device
/// family into a byte load/store kernel).
fn loadop_ast(out: &LazyBuffer, op: LoadOps, inputs: &[LazyBuffer]) -> Result<LazyOp> {
    let same_family = inputs
        .first()
        .is_some_and(|s| device_family(s.device()) == device_family(out.device()));
    if op == LoadOps::COPY && getenv("USE_COPY_KERNEL", 0) != 0 && same_family {
        let LbArg::Nbytes(n) = out.arg() else {
            bail!(Internal, "COPY {out:?} without a byte count");
        };
        let st = ShapeTracker::from_shape(&[Node::Num(*n as i64)])?;
        let rd = LazyOp::load(1, dtypes::uint8, st.clone());
        return Ok(LazyOp::store(rd, 0, dtypes::uint8, st));
    }
    Ok(LazyOp::new(op, vec![], out.arg().to_lazyop_arg()))
}

/// One node of the AST walk: a base, the ShapeTracker its sources are read through, and the
/// results collected so far.
struct Frame {
    key: (LazyBuffer, ShapeTracker),
    buf: LazyBuffer,
    srcs: Vec<LazyBuffer>,
    src_st: ShapeTracker,
    results: Vec<LazyOp>,
}

/// What arriving at a (buffer, st) pair yields.
enum Visit {
    Done(LazyOp),
    Open(Frame),
}

impl Ctx<'_> {
    /// tinygrad's `_recursive_lazyop` for one output, with a fresh memo.
    fn recursive_lazyop(&mut self, out: &LazyBuffer, st: ShapeTracker) -> Result<LazyOp> {
        let mut cache: FxHashMap<(LazyBuffer, ShapeTracker), LazyOp> = FxHashMap::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut done = match self.visit(out, st)? {
            Visit::Done(op) => return Ok(op),
            Visit::Open(f) => {
                stack.push(f);
                None
            }
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return done.ok_or_else(|| Error::Internal("lazyop walk produced nothing".into()));
            };
            if let Some(op) = done.take() {
                top.results.push(op);
            }
            let Some(src) = top.srcs.get(top.results.len()).cloned() else {
                let mut f = stack
                    .pop()
                    .ok_or_else(|| Error::Internal("lazyop stack".into()))?;
                let op = finish(&mut f)?;
                cache.insert(f.key, op.clone());
                done = Some(op);
                continue;
            };
            let key = (src, top.src_st.clone());
            if let Some(hit) = cache.get(&key) {
                done = Some(hit.clone());
                continue;
            }
            match self.visit(&key.0, key.1)? {
                Visit::Done(op) => done = Some(op),
                Visit::Open(f) => stack.push(f),
            }
        }
    }

    /// The leaf cases of `_recursive_lazyop` (CONST, LOAD), the transparent ones (CONTIGUOUS,
    /// ASSIGN), or a frame for an op to fuse.
    fn visit(&mut self, lb: &LazyBuffer, st: ShapeTracker) -> Result<Visit> {
        let key = (lb.clone(), st.clone());
        let (buf, st) = if lb.is_base() {
            (lb.clone(), st)
        } else {
            (lb.base().clone(), lb.st().compose(&st)?)
        };
        if buf.op() == Op::Load(LoadOps::CONST) {
            return self.const_op(&buf, &st).map(Visit::Done);
        }
        if buf.has_realized() || (self.realizes.contains(&buf) && !self.outputs.contains(&buf)) {
            return self.load_op(&buf, &st).map(Visit::Done);
        }
        let srcs = buf.srcs().unwrap_or_default().to_vec();
        let (srcs, src_st) = match buf.op() {
            Op::Load(op @ (LoadOps::CONTIGUOUS | LoadOps::ASSIGN)) => {
                self.check_transparent(&buf, op)?;
                (srcs.into_iter().take(1).collect(), st)
            }
            Op::Reduce(_) => {
                if !st.contiguous() {
                    bail!(
                        Schedule,
                        "ReduceOps late fusion must be contiguous ({buf:?} read through {st:?})"
                    );
                }
                let src_shape = srcs.first().map(|s| s.shape().to_vec()).unwrap_or_default();
                (srcs, ShapeTracker::from_shape(&src_shape)?)
            }
            Op::Load(op) => bail!(
                Schedule,
                "LoadOps.{op:?} {buf:?} cannot be fused into a kernel"
            ),
            _ => (srcs, st),
        };
        Ok(Visit::Open(Frame {
            key,
            buf,
            srcs,
            src_st,
            results: Vec::new(),
        }))
    }

    fn check_transparent(&self, buf: &LazyBuffer, op: LoadOps) -> Result<()> {
        if !self.outputs.contains(buf) {
            bail!(
                Internal,
                "LoadOps.{op:?} {buf:?} reached a kernel it is not an output of"
            );
        }
        if op == LoadOps::ASSIGN {
            let target = buf.srcs().and_then(|s| s.get(1).cloned());
            if !target.is_some_and(|t| t.is_base() && t.has_realized()) {
                bail!(
                    Schedule,
                    "assign must be to an already realized base ({buf:?})"
                );
            }
        }
        Ok(())
    }

    fn const_op(&mut self, buf: &LazyBuffer, st: &ShapeTracker) -> Result<LazyOp> {
        let (unbound_st, st_var_vals) = st.simplify()?.unbind()?;
        self.var_vals.extend(st_var_vals);
        let val = match buf.const_arg() {
            Some(ConstArg::Var(v)) => match v.unbind()? {
                (u, Some(x)) => {
                    self.var_vals.insert(u.clone(), x);
                    ConstArg::Var(u)
                }
                (u, None) => ConstArg::Var(u),
            },
            Some(c) => c.clone(),
            None => bail!(Internal, "CONST {buf:?} without a value"),
        };
        Ok(LazyOp::cnst(val, buf.dtype(), unbound_st))
    }

    fn load_op(&mut self, buf: &LazyBuffer, st: &ShapeTracker) -> Result<LazyOp> {
        let (unbound_st, st_var_vals) = st.simplify()?.unbind()?;
        self.var_vals.extend(st_var_vals);
        if let Some(assign) = self.assign_targets.get(buf) {
            check_assign_read(&unbound_st)?;
            let idx = self.outputs.iter().position(|o| o == assign);
            let idx = idx.ok_or_else(|| Error::Internal(format!("{assign:?} not an output")))?;
            return Ok(LazyOp::load(idx, buf.dtype(), unbound_st));
        }
        let pos = match self.inputs.iter().position(|x| x == buf) {
            Some(p) => p,
            None => {
                self.inputs.push(buf.clone());
                self.inputs.len() - 1
            }
        };
        Ok(LazyOp::load(
            self.outputs.len() + pos,
            buf.dtype(),
            unbound_st,
        ))
    }
}

/// The target of an assign may only be read where it is written: contiguously, or through a
/// single masked view that equals a shrunk contiguous one.
fn check_assign_read(st: &ShapeTracker) -> Result<()> {
    if st.contiguous() {
        return Ok(());
    }
    if let [view] = &st.views[..] {
        if let Some(mask) = &view.mask {
            let plain = ShapeTracker::from_shape(st.shape())?.shrink(mask)?;
            if plain == st.shrink(mask)? {
                return Ok(());
            }
        }
    }
    Err(Error::Schedule(
        "self operand of augmented assign must be contiguous.\nhelp: consider using .contiguous():\n   - a += a.T\n   + a += a.T.contiguous()".into(),
    ))
}

/// The node of a finished frame (its results are taken): CONTIGUOUS and ASSIGN pass their
/// source through.
fn finish(f: &mut Frame) -> Result<LazyOp> {
    match f.buf.op() {
        Op::Load(LoadOps::CONTIGUOUS | LoadOps::ASSIGN) => f
            .results
            .first()
            .cloned()
            .ok_or_else(|| Error::Internal(format!("{:?} without a source", f.buf))),
        op => Ok(LazyOp::new(
            op,
            std::mem::take(&mut f.results),
            f.buf.arg().to_lazyop_arg(),
        )),
    }
}
