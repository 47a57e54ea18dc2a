//! Lane accumulators of a CPU reduce (beyond tinygrad 0.9.1, whose `render_reduceop` gives each
//! output upcast combination one accumulator that every unrolled reduce lane goes through in
//! order: `acc = max(max(max(max(v0, acc), v1), v2), v3)` per loop iteration, a chain of
//! dependent ops bound by their latency).
//!
//! Owns: the choice and the UOps of lane accumulators. On a renderer without locals whose vector
//! ALU fold takes the op on the dtype (LLVM; GPU kernels keep 0.9.1's UOps), for a reduce whose ALU op is exactly associative and
//! commutative (MAX of any dtype; not float ADD, nor integer ADD, see below) with a loop and 2
//! or 4 unrolled lanes per output, each output gets one vector DEFINE_ACC of that many lanes, every
//! lane accumulates its own values in its own lane (`GEP(acc, k)`), and after the loop the lanes
//! are combined in lane order (`((l0 op l1) op l2) op l3`) before the store or any later use. The
//! lanes' PHIs are read back through one CAST of them, so 0.9.1's float4 PHI fold (the constant
//! folder, 2 and 4 lanes) makes them one vector PHI, and the vector ALU fold
//! (`uopgraph/vectorize.rs`) one vector op per row and iteration. C has no vector MAX: CLANG
//! keeps 0.9.1's accumulator, because scalar lanes in a vector accumulator ran slower there than
//! the chain (W6's and W11's max kernels in a C harness calling the CLANG device's build, best of
//! 15, 3 alternations: 1.35-1.40 -> 1.59-1.63 ms and 1.14-1.25 -> 1.62-1.70 ms), as does
//! `VECALU=0`. A vector MAX for C written with GNU vector masks (the compare, a blend, and the
//! NaN and zero cases as a masked `a + b`) with float4 lane accumulators did not pay either: gcc
//! 12 makes it 9-13 instructions per vector, and W11's max kernel stayed at 1.03-1.16 ms against
//! 1.03-1.07 for the chain (same harness). `CPU_REDUCE_LANES=0` keeps 0.9.1's single accumulator.
//!
//! Why the bits do not change: every lane starts at the op's identity (0, or the dtype's minimum:
//! `-inf` for floats), and the result combines the same multiset of values with an op whose
//! result does not depend on grouping or order:
//! - integer MAX is a total order's maximum;
//! - float MAX as every renderer defines it (C `rg_fmax_float`, the LLVM renderer's selects,
//!   INTERP): for `a`, `b` ordered and not both zero, the greater; else `a + b`: a NaN if either
//!   is NaN, `+0` if either is `+0`, `-0` for two `-0`. So the max of a set is NaN if it holds a
//!   NaN, else its greatest value, where a zero greatest value is `+0` if the set holds a `+0`
//!   and `-0` otherwise; `-inf` is the identity. None of that depends on order. What can is which
//!   payload survives when a row holds NaNs of different payloads (`a + b` of two NaNs keeps one
//!   of them): that is the hardware's and the compiler's already (LLVM may commute `fadd`), as in
//!   every device test (a NaN matches any NaN).
//!
//! Integer sums keep 0.9.1's accumulator: exact, but lanes hide the windowed sum of `arange`
//! (a cumsum) from the constant folder's loop collapse (one 2^19-long arange took 38 s instead of
//! 1 ms with lanes).
//!
//! Not guaranteed: other lane counts (8 or more, or 3 from 0.9.1's whole unroll of a small reduce
//! dim), reduces without a loop, and bool, half and bfloat16 accumulators keep 0.9.1's single
//! accumulator.

use super::Lin;
use crate::codegen::uopgraph::vector_alu_allows;
use crate::codegen::uops::UOp;
use crate::dtype::{ConstValue, DType, Scalar};
use crate::helpers::getenv;
use crate::ops::{BinaryOps, LazyOp, Op, ReduceOps};
use crate::{bail, Result};

/// The lane accumulators of one reduce: one vector DEFINE_ACC per output accumulator.
pub(crate) struct ReduceLanes {
    op: BinaryOps,
    dtype: DType,
    /// Per output accumulator, the upcast combinations that accumulate into it, in lane order.
    groups: Vec<Vec<usize>>,
    /// Per upcast combination, its lane: a GEP of its output's vector DEFINE_ACC.
    pub(crate) lanes: Vec<UOp>,
}

/// The ALU op of reduce `r` over `dt` when it gets lane accumulators (see the module doc).
fn exact_op(r: ReduceOps, dt: DType) -> Option<BinaryOps> {
    if dt.count != 1 || matches!(dt.scalar, Scalar::Bool | Scalar::Float16 | Scalar::BFloat16) {
        return None;
    }
    match r {
        ReduceOps::MAX => Some(BinaryOps::MAX),
        // an integer sum is exact too, but its lanes would hide a windowed sum (`arange`'s
        // cumsum) from the constant folder's loop collapse, which turns its O(n^2) loop into a
        // closed form: it keeps 0.9.1's accumulator
        ReduceOps::SUM => None,
    }
}

impl Lin {
    /// Lane accumulators for reduce `reduceop`, whose upcast combinations accumulate into the
    /// `n_out` accumulators at `offs`, inside the loops `loop_ctx`; `None` where they do not
    /// apply (see the module doc). `buf` is the accumulators' buffer index.
    pub(crate) fn reduce_lanes(
        &self,
        reduceop: &LazyOp,
        n_out: usize,
        offs: &[usize],
        loop_ctx: &[UOp],
        buf: usize,
    ) -> Result<Option<ReduceLanes>> {
        let Op::Reduce(r) = reduceop.op() else {
            bail!(
                Internal,
                "reduce_lanes: {} is not a reduce",
                reduceop.op().name()
            );
        };
        let (dt, init) = super::acc_init(reduceop)?;
        let Some(op) = exact_op(r, dt) else {
            return Ok(None);
        };
        if self.k.opts.has_local
            || !vector_alu_allows(self.k.opts.vector_alu, Op::Binary(op), dt)
            || self.k.tensor_core.is_some()
            || self.k.group_for_reduces > 0
            || loop_ctx.is_empty()
            || getenv("CPU_REDUCE_LANES", 1) == 0
            || getenv("VECALU", 1) == 0
        {
            return Ok(None);
        }
        let Some(groups) = lane_groups(n_out, offs)? else {
            return Ok(None);
        };
        Ok(Some(ReduceLanes::new(op, dt, init, groups, loop_ctx, buf)))
    }
}

/// Per output accumulator, the upcast combinations at `offs` that go into it, when every output
/// has the same lane count of 2 or 4.
fn lane_groups(n_out: usize, offs: &[usize]) -> Result<Option<Vec<Vec<usize>>>> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n_out];
    for (p, &j) in offs.iter().enumerate() {
        let Some(g) = groups.get_mut(j) else {
            bail!(Internal, "reduce_lanes: accumulator {j} of {n_out}");
        };
        g.push(p);
    }
    let l = groups.first().map_or(0, Vec::len);
    let ok = matches!(l, 2 | 4) && groups.iter().all(|g| g.len() == l);
    Ok(ok.then_some(groups))
}

impl ReduceLanes {
    fn new(
        op: BinaryOps,
        dtype: DType,
        init: ConstValue,
        groups: Vec<Vec<usize>>,
        loop_ctx: &[UOp],
        buf: usize,
    ) -> ReduceLanes {
        let n: usize = groups.iter().map(Vec::len).sum();
        let mut lanes = vec![UOp::cnst(dtype, init); n];
        for (j, g) in groups.iter().enumerate() {
            let acc = UOp::define_acc(dtype.vec(g.len() as u16), init, loop_ctx, buf, j);
            for (k, &p) in g.iter().enumerate() {
                lanes[p] = UOp::gep(&acc, k, dtype);
            }
        }
        ReduceLanes {
            op,
            dtype,
            groups,
            lanes,
        }
    }

    /// The accumulator offsets of the upcast combinations: each its own lane.
    pub(crate) fn offsets(&self) -> Vec<usize> {
        (0..self.lanes.len()).collect()
    }

    /// The output accumulators after the loop: each output's lanes (`updated`, the lanes after
    /// the reduce step, their PHIs) read back through one CAST of them and combined in order.
    pub(crate) fn combine(&self, updated: &[UOp]) -> Result<Vec<UOp>> {
        let mut out = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            let phis = g
                .iter()
                .map(|&p| updated.get(p).cloned())
                .collect::<Option<Vec<UOp>>>();
            let Some(phis) = phis else {
                bail!(Internal, "reduce_lanes: {} lanes updated", updated.len());
            };
            let v = UOp::vectorize(phis, self.dtype.vec(g.len() as u16));
            let mut acc = UOp::gep(&v, 0, self.dtype);
            for k in 1..g.len() {
                acc = UOp::alu_auto(self.op, [acc, UOp::gep(&v, k, self.dtype)]);
            }
            out.push(acc);
        }
        Ok(out)
    }
}
