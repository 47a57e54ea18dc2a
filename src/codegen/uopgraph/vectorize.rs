//! The vector ALU fold (beyond tinygrad 0.9.1): a vector built from lanes (a CAST with one source
//! per lane, tinygrad's vectorize) becomes vector operations where the renderer can emit them
//! (`RendererOpts::vector_alu`: the CPU renderers), so that a 16-lane lane-wise multiply-add is one
//! UOp and one rendered instruction instead of 16 scalar ones put back together lane by lane.
//!
//! Owns: [`vectorize_alus`], run on the rewritten graph before it is ordered. From every CAST of
//! `n` scalar lanes (bottom up), the lanes fold as follows (memoized on the lane tuple, so shared
//! lanes fold once):
//! - `GEP(v, 0..n)` of one `n`-lane vector, in order: `v`;
//! - the same node in every lane: a vector CONST for a constant, else a broadcast (a CAST with
//!   the node in every lane, rendered as a splat);
//! - constants: a CAST of them (a constant vector);
//! - the same ALU op (same dtype, an op the renderer allows on vectors): that op on the folded
//!   operand lanes (each a vector of its own), unless no operand folds into more than a gather
//!   of its lanes (then the lanes stay scalar);
//! - `PHI(GEP(acc, i), x_i)` of every lane of one accumulator, in order: `PHI(acc, fold(x))`;
//!   every other use of a lane's PHI then reads `GEP` of the vector PHI (one update per
//!   accumulator);
//! - anything else: the CAST of the lanes as they are.
//!
//! Then the lane-group fold of `uopgraph/lanes.rs` folds the lanes no CAST gathers (the per-lane
//! work feeding a scalar accumulator chain, lane-wise updates of a vector accumulator).
//!
//! Each lane computes the same op on the same values as before, so the results are the scalar
//! kernel's bits, as long as the renderer's vector op is lane-wise the scalar one (the renderers
//! say which ops that holds for: [`allows`]). Scalar uses of a lane elsewhere keep their GEPs.
//!
//! Not guaranteed: lanes that mix ops, dtypes or vectors, and operand chains deeper than
//! [`MAX_DEPTH`], stay scalar; conversions (one-source CAST, BITCAST), loads and WMMA are not
//! folded.

use std::collections::HashMap;

use crate::codegen::pattern::PostOrder;
use crate::codegen::renderer::VectorAlu;
use crate::codegen::uops::{Srcs, UArg, UOp, UOpMap, UOps};
use crate::dtype::{DType, Scalar};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::Result;

/// The deepest operand chain the fold follows (deeper lanes stay a gather of scalars).
pub const MAX_DEPTH: usize = 256;

/// Whether `mode` renders `op` with operands of `d` (a scalar dtype) lane-wise on vectors, with
/// each lane's bits those of the scalar op.
pub fn allows(mode: VectorAlu, op: Op, d: DType) -> bool {
    match mode {
        VectorAlu::None => false,
        // GNU C vector extensions: arithmetic only (no ?:, comparisons give int vectors, MAX is
        // a helper call); float and double only (signed int overflow is undefined in C, and
        // half/bool vectors are not rendered)
        VectorAlu::C => {
            matches!(d.scalar, Scalar::Float32 | Scalar::Float64)
                && matches!(
                    op,
                    Op::Binary(BinaryOps::ADD | BinaryOps::MUL) | Op::Unary(UnaryOps::NEG)
                )
        }
        // LLVM's instructions are lane-wise on vectors; LOG2/SIN stay scalar (libm calls per
        // lane either way); bfloat16 is held as float and rounded at memory only, kept scalar
        VectorAlu::Llvm => {
            d.scalar != Scalar::BFloat16
                && match op {
                    Op::Unary(u) => !matches!(
                        u,
                        UnaryOps::LOG2 | UnaryOps::SIN | UnaryOps::CAST | UnaryOps::BITCAST
                    ),
                    Op::Binary(_) => true,
                    Op::Ternary(TernaryOps::WHERE | TernaryOps::MULACC) => true,
                    _ => false,
                }
        }
    }
}

/// A folded lane tuple: a real vector value, or the gather (CAST) of the scalar lanes.
#[derive(Clone)]
enum Folded {
    Vector(UOp),
    Gather(UOp),
}

impl Folded {
    fn uop(&self) -> &UOp {
        match self {
            Folded::Vector(u) | Folded::Gather(u) => u,
        }
    }
}

struct Fold {
    mode: VectorAlu,
    memo: HashMap<Vec<UOp>, Folded, crate::helpers::FxBuild>,
    /// Each lane PHI of a folded accumulator, and the GEP of the vector PHI that replaces it.
    phi_subst: UOpMap<UOp>,
    /// The vector PHI of each folded accumulator.
    acc_phi: UOpMap<UOp>,
}

/// Fold the vectors of `sink`'s graph built from lanes into vector ops `mode` allows.
pub fn vectorize_alus(sink: &UOp, mode: VectorAlu) -> Result<UOp> {
    vectorize_alus_in(sink, None, mode)
}

/// [`vectorize_alus`] with the post-order of `sink`'s graph when the caller has it (`None`: it
/// is made here).
pub(crate) fn vectorize_alus_in(
    sink: &UOp,
    order: Option<PostOrder<'_>>,
    mode: VectorAlu,
) -> Result<UOp> {
    if mode == VectorAlu::None {
        return Ok(sink.clone());
    }
    let mut f = Fold {
        mode,
        memo: HashMap::default(),
        phi_subst: UOpMap::default(),
        acc_phi: UOpMap::default(),
    };
    let order = order.unwrap_or_else(|| PostOrder::of(sink));
    let mut out = rebuild_in(&order, &mut |_, n| f.root(n)).unwrap_or_else(|| sink.clone());
    if !f.phi_subst.is_empty() {
        let subst = std::mem::take(&mut f.phi_subst);
        out = rebuild(&out, &mut |n| subst.get(&n).cloned().unwrap_or(n));
    }
    // nothing folded: the lane-group fold walks the order already made (same root, same graph)
    if out.ptr_eq(sink) {
        return Ok(super::lanes::fold_lane_groups_in(&order, sink, mode));
    }
    drop(order);
    Ok(super::lanes::fold_lane_groups(&out, mode))
}

/// Rebuild the graph under `sink` bottom up (iteratively), passing every rebuilt node through
/// `f`. Each node is visited once by address (nodes are hash-consed, so equal structures built on
/// this thread are one node); two equal nodes at different addresses each go through `f`, which
/// gives them equal results (`f` is a function of the structure: the fold memoizes structurally).
pub(super) fn rebuild(sink: &UOp, f: &mut dyn FnMut(UOp) -> UOp) -> UOp {
    rebuild_in(&PostOrder::of(sink), &mut |_, n| f(n)).unwrap_or_else(|| sink.clone())
}

/// [`rebuild`] over an order already made: `f` also gets the node's position in `order` (a node
/// that comes to `f` as the very node at that position was kept: its sources came back
/// unchanged). The rebuilt root, or `None` for an empty order.
pub(super) fn rebuild_in(order: &PostOrder, f: &mut dyn FnMut(usize, UOp) -> UOp) -> Option<UOp> {
    let mut results: Vec<UOp> = Vec::with_capacity(order.nodes.len());
    for (i, &n) in order.nodes.iter().enumerate() {
        let srcs = order.srcs(i);
        // sources that came back as the very same nodes keep `n` (no new source list)
        let same = srcs.iter().zip(n.src()).all(|(&j, s)| results[j].ptr_eq(s));
        let built = if same {
            n.clone()
        } else {
            let src: Srcs = srcs.iter().map(|&j| results[j].clone()).collect();
            UOp::new(n.op(), n.dtype(), src, n.arg().clone())
        };
        results.push(f(i, built));
    }
    results.pop()
}

/// The scalar dtype every lane has, if they all have the same one.
fn lane_dtype(lanes: &[UOp]) -> Option<DType> {
    let d = lanes.first()?.dtype()?;
    (d.count == 1 && lanes.iter().all(|l| l.dtype() == Some(d))).then_some(d)
}

impl Fold {
    /// A rebuilt node: a CAST of scalar lanes folds, anything else stays.
    fn root(&mut self, n: UOp) -> UOp {
        let Some(d) = n.dtype() else { return n };
        let lanes = n.src();
        if n.op() != UOps::CAST || lanes.len() < 2 || lanes.len() != d.count as usize {
            return n;
        }
        if lane_dtype(lanes) != Some(d.scalar()) {
            return n;
        }
        match self.fold(lanes, d.scalar(), 0) {
            Folded::Vector(v) => v,
            Folded::Gather(_) => n,
        }
    }

    /// Fold `lanes`, each a scalar of dtype `d`.
    fn fold(&mut self, lanes: &[UOp], d: DType, depth: usize) -> Folded {
        if let Some(f) = self.memo.get(lanes) {
            return f.clone();
        }
        self.fold_owned(lanes.to_vec(), d, depth)
    }

    /// [`Fold::fold`] of lanes the caller built (the memo keeps them, no second copy).
    fn fold_owned(&mut self, lanes: Vec<UOp>, d: DType, depth: usize) -> Folded {
        if let Some(f) = self.memo.get(&lanes) {
            return f.clone();
        }
        let f = self.fold_new(&lanes, d, depth);
        self.memo.insert(lanes, f.clone());
        f
    }

    fn gather(lanes: &[UOp], d: DType) -> Folded {
        Folded::Gather(UOp::vectorize(lanes.to_vec(), d.vec(lanes.len() as u16)))
    }

    fn fold_new(&mut self, lanes: &[UOp], d: DType, depth: usize) -> Folded {
        let n = lanes.len();
        let vd = d.vec(n as u16);
        let first = &lanes[0];
        if depth > MAX_DEPTH {
            return Self::gather(lanes, d);
        }
        if let Some(v) = in_order_geps(lanes, vd) {
            return Folded::Vector(v);
        }
        if lanes.iter().all(|l| l.ptr_eq(first) || l == first) {
            return Folded::Vector(match first.const_value() {
                Some(c) => UOp::cnst(vd, c),
                None => UOp::vectorize(lanes.to_vec(), vd),
            });
        }
        if lanes.iter().all(|l| l.op() == UOps::CONST) {
            return Folded::Vector(UOp::vectorize(lanes.to_vec(), vd));
        }
        match first.op() {
            UOps::ALU => self.fold_alu(lanes, d, depth),
            UOps::PHI => self.fold_phi(lanes, d, depth),
            _ => Self::gather(lanes, d),
        }
    }

    /// The same ALU op in every lane: the op on the folded operands.
    fn fold_alu(&mut self, lanes: &[UOp], d: DType, depth: usize) -> Folded {
        let first = &lanes[0];
        let Some(op) = first.alu_op() else {
            return Self::gather(lanes, d);
        };
        let same = lanes.iter().all(|l| {
            l.op() == UOps::ALU && l.arg() == first.arg() && l.src().len() == first.src().len()
        });
        // the operand dtype decides what the renderer can do (WHERE: its value operands)
        let operand = match op {
            Op::Ternary(TernaryOps::WHERE) => first.src().get(1).and_then(|s| s.dtype()),
            _ => first.src().first().and_then(|s| s.dtype()),
        };
        if !same || !operand.is_some_and(|o| allows(self.mode, op, o)) {
            return Self::gather(lanes, d);
        }
        let mut srcs = Vec::with_capacity(first.src().len());
        let mut any_vector = false;
        for j in 0..first.src().len() {
            let ops: Vec<UOp> = lanes.iter().map(|l| l.src()[j].clone()).collect();
            let Some(od) = lane_dtype(&ops) else {
                return Self::gather(lanes, d);
            };
            let f = self.fold_owned(ops, od, depth + 1);
            any_vector |= matches!(f, Folded::Vector(_));
            srcs.push(f.uop().clone());
        }
        if !any_vector {
            return Self::gather(lanes, d);
        }
        let vd = d.vec(lanes.len() as u16);
        Folded::Vector(UOp::new(UOps::ALU, Some(vd), srcs, first.arg().clone()))
    }

    /// `PHI(GEP(acc, i), x_i)` for every lane `i` of one accumulator: one vector PHI.
    fn fold_phi(&mut self, lanes: &[UOp], d: DType, depth: usize) -> Folded {
        let accs: Option<Vec<UOp>> = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let g = l.src().first().filter(|_| l.op() == UOps::PHI)?;
                (g.op() == UOps::GEP && *g.arg() == UArg::Gep(i))
                    .then(|| g.src().first().cloned())?
            })
            .collect();
        let vd = d.vec(lanes.len() as u16);
        let acc = match accs.as_deref() {
            Some([a, rest @ ..])
                if a.op() == UOps::DEFINE_ACC
                    && a.dtype() == Some(vd)
                    && rest.iter().all(|r| r == a)
                    && !self.acc_phi.contains_key(a) =>
            {
                a.clone()
            }
            _ => return Self::gather(lanes, d),
        };
        let vals: Vec<UOp> = lanes.iter().map(|l| l.src()[1].clone()).collect();
        if lane_dtype(&vals) != Some(d) {
            return Self::gather(lanes, d);
        }
        let v = self.fold_owned(vals, d, depth + 1);
        let phi = UOp::phi(&acc, v.uop());
        for (i, l) in lanes.iter().enumerate() {
            self.phi_subst.insert(l.clone(), UOp::gep(&phi, i, d));
        }
        self.acc_phi.insert(acc, phi.clone());
        Folded::Vector(phi)
    }
}

/// `v` when the lanes are `GEP(v, 0)`, ..., `GEP(v, n-1)` of one vector `v` of dtype `vd`.
pub(super) fn in_order_geps(lanes: &[UOp], vd: DType) -> Option<UOp> {
    let v = lanes.first()?.src().first()?;
    let ok = v.dtype() == Some(vd)
        && lanes.iter().enumerate().all(|(i, l)| {
            l.op() == UOps::GEP && *l.arg() == UArg::Gep(i) && l.src().first() == Some(v)
        });
    ok.then(|| v.clone())
}

#[cfg(test)]
#[path = "vectorize_tests.rs"]
mod tests;
