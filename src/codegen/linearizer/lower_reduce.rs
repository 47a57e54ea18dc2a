//! One reduce op lowered to loops and accumulators (tinygrad 0.9.1 `render_reduceop`).
//!
//! A RANGE per reduce dim (depth `2i+2`), one DEFINE_ACC per output upcast combination (SUM
//! starts at 0, MAX at the dtype's minimum), the early buffers loaded with every index, the
//! reduce's source accumulated with ADD/MAX and the changed accumulators wrapped in PHIs. With
//! grouped reduce dims: the partial results go to the local `temp`, a BARRIER, an IF that keeps
//! one thread per group (`temp index < 1`), a late RANGE over the group dims (depth `2i+3`), a late
//! accumulator reading `temp` after the barrier, and, for a reduce that is not the last, one more
//! store/barrier/load that broadcasts the result to every thread.
//!
//! On LLVM (a renderer without locals whose vector fold takes MAX) a MAX reduce keeps one
//! accumulator per unrolled lane (`linearizer/reduce_lanes.rs`, beyond 0.9.1).
//!
//! A tensor-core reduce takes the WMMA path of `linearizer/tensor_core.rs` instead (it never
//! groups).
//!
//! Not guaranteed: upcast-mid-reduce axes (image outputs) are refused.

use std::collections::HashMap;

use super::index::expand_node;
use super::{reduce_step, Lin, Values};
use crate::codegen::uops::UOp;
use crate::ops::{Op, TernaryOps};
use crate::shape::{create_lt_node, Node};
use crate::{bail, Result};

impl Lin {
    /// Lower reduce `ri`; returns the local and upcast indices the later blocks must use.
    pub(crate) fn render_reduceop(
        &mut self,
        ri: usize,
        accs: &mut Values,
        loaded: &mut Values,
        reduce_idxs: &[Node],
        fake_reduce_idxs: &[Node],
        aliases: &super::tensor_core::TcAliases,
    ) -> Result<(Vec<Node>, Vec<Node>)> {
        let reduceop = self.k.reduceops[ri].clone();
        let loop_ctx = self.render_loop(reduce_idxs, ri * 2 + 2, true)?;
        let gfr = self.k.group_for_reduces;
        let out_buf = if gfr > 0 {
            self.k.bufs.len() - self.k.reduceops.len() + ri
        } else {
            0
        };
        let (gi, li, ui) = (
            self.global_idxs.clone(),
            self.local_idxs.clone(),
            self.upcast_idxs.clone(),
        );
        let acc_idxs = self.cat(&[&gi, &li, fake_reduce_idxs, &ui]);
        let mut acc = self.global_load(out_buf, &acc_idxs, Some(&reduceop), None, &loop_ctx)?;
        if self.k.tensor_core.is_some() {
            let acc = self.render_tc_reduce(ri, acc, aliases)?;
            self.load_cache.clear();
            accs.insert(ri, acc);
            return Ok((li, ui));
        }
        let fui = self.full_upcast_idxs.clone();
        let full_idxs = self.cat(&[&gi, &li, reduce_idxs, &fui]);
        for i in 0..self.k.bufs.len() {
            if self.k.earlybufs.contains(&self.k.bufs[i]) {
                let v = self.global_load(i, &full_idxs, None, None, &[])?;
                loaded.insert(i, v);
            }
        }
        let local_accs = self.gate_accs(accs, &full_idxs)?;
        let mut offs = self.k.acc_offsets(self.k.full_buf_index)?;
        let lanes = self.reduce_lanes(&reduceop, acc.len(), &offs, &loop_ctx, out_buf)?;
        if let Some(l) = &lanes {
            acc = l.lanes.clone();
            offs = l.offsets();
        }
        self.ast_parse(
            &reduceop,
            &local_accs,
            Some(&offs),
            loaded,
            Some(&mut acc),
            &mut HashMap::new(),
        )?;
        if let Some(l) = &lanes {
            acc = l.combine(&acc)?;
        }
        self.load_cache.clear();
        if gfr == 0 {
            accs.insert(ri, acc);
            return Ok((li.clone(), ui));
        }
        self.render_group_reduce(ri, out_buf, acc, accs, loaded, fake_reduce_idxs)
    }

    /// The accumulators of earlier reduces, each WHERE-gated to 0 where the full buffer's index
    /// is only partially valid.
    fn gate_accs(&mut self, accs: &Values, idxs: &[Node]) -> Result<Values> {
        let st = self.k.st(self.k.full_buf_index)?;
        let (_, valid) = st.expr_idxs(Some(idxs))?;
        let valids = expand_node(&valid, Some(&super::index::expand_idxs(idxs)))?;
        let mut out = HashMap::new();
        for (r, a) in accs {
            let dt = self.k.reduceops[*r].dtype()?;
            let mut gated = Vec::with_capacity(a.len());
            for (v, acc) in valids.iter().zip(a) {
                if *v.min() == 0 && *v.max() == 1 {
                    let gate = self.render_idx(v)?;
                    gated.push(UOp::alu_auto(
                        Op::Ternary(TernaryOps::WHERE),
                        vec![gate, acc.clone(), UOp::cnst(dt, 0)],
                    ));
                } else {
                    gated.push(acc.clone());
                }
            }
            out.insert(*r, gated);
        }
        Ok(out)
    }

    /// Store the partial accumulators to `temp`, then a BARRIER, and (with locals) an IF that
    /// keeps the first thread of each group.
    fn group_barrier(
        &mut self,
        out_buf: usize,
        acc: &[UOp],
        fake_global: &[Node],
        fake_reduce_idxs: &[Node],
    ) -> Result<UOp> {
        let (gd, ld) = (self.k.global_dims(), self.k.local_dims);
        let (li, ui) = (self.local_idxs.clone(), self.upcast_idxs.clone());
        let idxs = self.cat(&[fake_global, &li, fake_reduce_idxs, &ui]);
        let stores = self.global_store(out_buf, &idxs, acc)?;
        let barrier = UOp::barrier(stores);
        if !self.k.opts.has_local {
            return Ok(barrier);
        }
        let temp_st = self.k.st(self.k.sts.len() - 1)?.clone();
        let mut fake_idxs = vec![Node::Num(0); temp_st.shape().len()];
        for (j, x) in li.iter().skip(ld).enumerate() {
            if let Some(slot) = fake_idxs.get_mut(gd + ld + j) {
                *slot = x.clone();
            }
        }
        let (tidx, _) = temp_st.expr_idxs(Some(&fake_idxs))?;
        let cond = create_lt_node(&tidx, &Node::Num(1))?;
        let cond = self.render_idx(&cond)?;
        Ok(UOp::if_(&cond, Some(&barrier)))
    }

    /// The late loop variables `tidx{i}`: over the group dims, 0 elsewhere.
    fn end_local_idxs(&self) -> Result<Vec<Node>> {
        let fr = self.k.first_reduce();
        let full = self.k.full_shape();
        let mut out = Vec::with_capacity(fr + self.k.group_for_reduces);
        for (i, d) in full.iter().enumerate().take(fr + self.k.group_for_reduces) {
            let max = if i >= fr {
                d.try_sub(&Node::Num(1))?
            } else {
                Node::Num(0)
            };
            out.push(Node::var(&format!("tidx{i}"), 0, max)?);
        }
        Ok(out)
    }

    /// The grouped part: partial results through local memory, reduced again by one thread.
    fn render_group_reduce(
        &mut self,
        ri: usize,
        out_buf: usize,
        acc: Vec<UOp>,
        accs: &mut Values,
        loaded: &mut Values,
        fake_reduce_idxs: &[Node],
    ) -> Result<(Vec<Node>, Vec<Node>)> {
        if !self.k.upcast_in_mid_reduce_axes().is_empty() {
            bail!(
                Codegen,
                "linearize: upcast mid reduce axes need image outputs"
            );
        }
        let reduceop = self.k.reduceops[ri].clone();
        let Op::Reduce(rop) = reduceop.op() else {
            bail!(Internal, "linearize: reduce {ri} is not a ReduceOps node");
        };
        let (gd, ld) = (self.k.global_dims(), self.k.local_dims);
        let fake_global: Vec<Node> = self.global_idxs.iter().map(|_| Node::Num(0)).collect();
        let ui = self.upcast_idxs.clone();
        let barrier = self.group_barrier(out_buf, &acc, &fake_global, fake_reduce_idxs)?;
        let end_local_idxs = self.end_local_idxs()?;
        let mut local_idxs = self.local_idxs[..ld].to_vec();
        local_idxs.extend(end_local_idxs.iter().skip(gd + ld).cloned());
        let loop_ctx = self.render_loop(&end_local_idxs, ri * 2 + 3, true)?;
        let late_idxs = self.cat(&[&fake_global, &local_idxs, fake_reduce_idxs, &ui]);
        let mut late_acc = self.global_load(0, &late_idxs, Some(&reduceop), None, &loop_ctx)?;
        let temp_vals = self.global_load(out_buf, &late_idxs, None, Some(&barrier), &[])?;
        loaded.insert(out_buf, temp_vals.clone());
        let offs = self.k.acc_offsets(self.k.sts.len() - 1)?;
        reduce_step(rop, &temp_vals, &offs, &mut late_acc)?;
        self.load_cache.clear();
        if ri + 1 != self.k.reduceops.len() {
            let mut fake_local = local_idxs[..ld].to_vec();
            fake_local.extend(local_idxs[ld..].iter().map(|_| Node::Num(0)));
            let idxs = self.cat(&[&fake_global, &fake_local, fake_reduce_idxs, &ui]);
            let stores = self.global_store(out_buf, &idxs, &late_acc)?;
            let barrier = UOp::barrier(stores);
            late_acc = self.global_load(out_buf, &idxs, None, Some(&barrier), &[])?;
        }
        accs.insert(ri, late_acc);
        let mut nlidx = local_idxs[..ld].to_vec();
        nlidx.extend((0..self.k.group_for_reduces).map(|_| Node::Num(0)));
        Ok((nlidx, ui))
    }
}
