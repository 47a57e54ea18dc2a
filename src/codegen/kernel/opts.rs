//! Optimization actions on a [`Kernel`] (tinygrad 0.9.1 `OptOps`, `Opt`, `Kernel.apply_opt`).
//!
//! Owns: the opt record, its axis meaning (`real_axis`), every legality rule of 0.9.1 with its
//! reason string (an illegal opt is an `Error::KernelOpt` whose message is tinygrad's reason), the
//! shift each legal opt performs, and `required_optimizations`. An opt that fails leaves the
//! kernel exactly as it was (tinygrad may leave it half edited; callers there copy first).
//!
//! Not guaranteed: `UPCASTMID` needs an image output (0.9.1 has it for images only), and rawgrad
//! has no image dtypes, so it always reports "invalid upcast mid reduce".

use std::fmt;

use super::Kernel;
use crate::helpers::{getenv, round_up};
use crate::ops::{Op, ReduceOps};
use crate::shape::symbolic::py_le;
use crate::shape::{sint_prod, Node, Sint};
use crate::{Error, Result};

/// tinygrad's `OptOps`, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OptOps {
    TC,
    UPCAST,
    UPCASTMID,
    UNROLL,
    LOCAL,
    GROUP,
    GROUPTOP,
    NOLOCALS,
    PADTO,
}

/// One optimization action: `Opt(op, axis, amt)`; `amt` 0 means the whole axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opt {
    pub op: OptOps,
    pub axis: Option<usize>,
    pub amt: Option<usize>,
}

impl Opt {
    pub fn new(op: OptOps, axis: usize, amt: usize) -> Opt {
        Opt {
            op,
            axis: Some(axis),
            amt: Some(amt),
        }
    }

    /// `Opt(NOLOCALS)`.
    pub fn nolocals() -> Opt {
        Opt {
            op: OptOps::NOLOCALS,
            axis: None,
            amt: None,
        }
    }

    /// The absolute axis: UNROLL counts from `first_reduce`, GROUP/GROUPTOP from the first
    /// ungrouped reduce dim, the others are absolute. `None` when the opt has no axis.
    pub fn real_axis(&self, k: &Kernel) -> Option<usize> {
        let a = self.axis?;
        Some(match self.op {
            OptOps::UNROLL => k.first_reduce() + a,
            OptOps::GROUP | OptOps::GROUPTOP => k.first_reduce() + k.group_for_reduces + a,
            _ => a,
        })
    }
}

/// tinygrad 0.9.1's BEAM action space (`engine/search.py` `actions`), in its order: UPCAST on
/// axes 0-5 by {0,2,3,4,5,7}, UNROLL on 0-4 by {0,4,7}, LOCAL on 0-4 by {2,3,4,8,13,16,29},
/// GROUPTOP on 0-2 by {13,16,28,29,32,49,64,256}, GROUP on 0-2 by {0,4,8,16}, PADTO on 0-6 by 32
/// (`BEAM_PADTO`, default 1), LOCAL(0,32), UPCASTMID(1,4), TC(0,0), TC on 0-8 by `TC_OPT`
/// (default 2), and NOLOCALS when `NOLOCALS` is set.
pub fn actions() -> Vec<Opt> {
    use OptOps::*;
    let mut out = vec![];
    let mut add = |op: OptOps, amts: &[usize], axes: usize| {
        for &amt in amts {
            for axis in 0..axes {
                out.push(Opt::new(op, axis, amt));
            }
        }
    };
    add(UPCAST, &[0, 2, 3, 4, 5, 7], 6);
    add(UNROLL, &[0, 4, 7], 5);
    add(LOCAL, &[2, 3, 4, 8, 13, 16, 29], 5);
    add(GROUPTOP, &[13, 16, 28, 29, 32, 49, 64, 256], 3);
    add(GROUP, &[0, 4, 8, 16], 3);
    if getenv("BEAM_PADTO", 1) != 0 {
        add(PADTO, &[32], 7);
    }
    out.extend([
        Opt::new(LOCAL, 0, 32),
        Opt::new(UPCASTMID, 1, 4),
        Opt::new(TC, 0, 0),
    ]);
    let tc_opt = getenv("TC_OPT", 2).max(0) as usize;
    out.extend((0..9).map(|axis| Opt::new(TC, axis, tc_opt)));
    if getenv("NOLOCALS", 0) != 0 {
        out.push(Opt::nolocals());
    }
    out
}

fn py_opt(x: Option<usize>) -> String {
    x.map_or("None".into(), |v| v.to_string())
}

impl fmt::Display for Opt {
    /// `Opt(op=OptOps.UPCAST, axis=0, amt=4)`, as tinygrad prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Opt(op=OptOps.{:?}, axis={}, amt={})",
            self.op,
            py_opt(self.axis),
            py_opt(self.amt)
        )
    }
}

/// tinygrad's `check(cond, msg)`.
fn check(cond: bool, msg: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::KernelOpt(msg.to_string()))
    }
}

/// The opt state an illegal opt must not change.
struct Snapshot {
    sts: Vec<crate::shape::ShapeTracker>,
    applied: usize,
    group_for_reduces: usize,
    upcasted: usize,
    local_dims: usize,
    dont_use_locals: bool,
    tensor_core: Option<crate::codegen::renderer::TensorCore>,
    tensor_core_opts: Option<super::TensorCoreOptions>,
    bufs_for_tensor_core: Vec<(crate::ops::LazyOp, (usize, usize))>,
}

impl Kernel {
    /// Apply one optimization, recording it; an illegal opt is an `Error::KernelOpt` with
    /// tinygrad's reason and leaves the kernel unchanged.
    pub fn apply_opt(&mut self, opt: Opt) -> Result<()> {
        self.apply_opt_with(opt, true)
    }

    /// Apply opts in order, stopping at the first illegal one (the ones before it stay applied).
    /// The entry for BEAM and the hand-coded heuristics.
    pub fn apply_opts(&mut self, opts: &[Opt]) -> Result<()> {
        for o in opts {
            self.apply_opt(*o)?;
        }
        Ok(())
    }

    /// `apply_opt(opt, append_opt)`.
    pub fn apply_opt_with(&mut self, opt: Opt, append_opt: bool) -> Result<()> {
        let snap = Snapshot {
            sts: self.sts.clone(),
            applied: self.applied_opts.len(),
            group_for_reduces: self.group_for_reduces,
            upcasted: self.upcasted,
            local_dims: self.local_dims,
            dont_use_locals: self.dont_use_locals,
            tensor_core: self.tensor_core.clone(),
            tensor_core_opts: self.tensor_core_opts.clone(),
            bufs_for_tensor_core: self.bufs_for_tensor_core.clone(),
        };
        let r = self.apply_opt_inner(opt, append_opt);
        if r.is_err() {
            self.sts = snap.sts;
            self.applied_opts.truncate(snap.applied);
            self.group_for_reduces = snap.group_for_reduces;
            self.upcasted = snap.upcasted;
            self.local_dims = snap.local_dims;
            self.dont_use_locals = snap.dont_use_locals;
            self.tensor_core = snap.tensor_core;
            self.tensor_core_opts = snap.tensor_core_opts;
            self.bufs_for_tensor_core = snap.bufs_for_tensor_core;
        }
        r
    }

    fn apply_opt_inner(&mut self, opt: Opt, append_opt: bool) -> Result<()> {
        use OptOps::*;
        check(
            !self.dont_use_locals || !matches!(opt.op, LOCAL | GROUP | GROUPTOP | UPCASTMID),
            "not using locals",
        )?;
        if opt.op == TC {
            return self.apply_tc(&opt);
        }
        let axis = match opt.real_axis(self) {
            Some(a) => a,
            None if opt.op == NOLOCALS => 0,
            None => return Err(Error::KernelOpt("invalid axis".into())),
        };
        check(
            axis < self.full_shape().len() || opt.op == NOLOCALS,
            "invalid axis",
        )?;
        let amt = self.opt_amount(&opt, axis)?;
        self.check_shared_memory(&opt, amt)?;
        match opt.op {
            LOCAL => self.apply_local(axis, amt)?,
            GROUP | GROUPTOP => self.apply_group(axis, amt, opt.op == GROUPTOP)?,
            UNROLL => self.apply_unroll(axis, amt)?,
            UPCAST => self.apply_upcast(axis, amt)?,
            // UPCASTMID needs an image output; rawgrad has no image dtypes.
            UPCASTMID => check(false, "invalid upcast mid reduce")?,
            NOLOCALS => self.apply_nolocals()?,
            PADTO => self.apply_padto(axis, amt)?,
            TC => {}
        }
        if append_opt {
            self.applied_opts.push(opt);
        }
        if self.simplify_ones()? {
            if let Some(t) = self.tensor_core_opts.as_mut() {
                t.fix_axes(axis);
            }
        }
        Ok(())
    }

    /// The amount of an opt: `amt` 0 means the whole axis; must be an int other than 1 and,
    /// except for PADTO, divide the axis. -1 for NOLOCALS (no amount).
    fn opt_amount(&self, opt: &Opt, axis: usize) -> Result<i64> {
        let Some(a) = opt.amt else {
            if opt.op == OptOps::NOLOCALS {
                return Ok(-1);
            }
            return Err(Error::KernelOpt(format!("{} needs an amt", opt)));
        };
        let Some(full) = self.full_shape().get(axis) else {
            return Err(Error::KernelOpt("invalid axis".into()));
        };
        let amt_s = if a != 0 { Node::from(a) } else { full.clone() };
        check(
            amt_s.is_int() && amt_s != 1,
            "shift/padto of amt 1 or Node is meaningless",
        )?;
        let amt = amt_s.as_int().unwrap_or(1);
        if opt.op != OptOps::PADTO {
            check(full.modulo(&amt_s)? == 0, "no longer valid shift")?;
        }
        Ok(amt)
    }

    /// When grouping (or adding a group), the local scratch must fit the shared memory.
    fn check_shared_memory(&self, opt: &Opt, amt: i64) -> Result<()> {
        use OptOps::*;
        let Some(r) = self.reduceop() else {
            return Ok(());
        };
        let grouping = matches!(opt.op, GROUP | GROUPTOP)
            || (self.group_for_reduces > 0 && !matches!(opt.op, NOLOCALS | PADTO));
        if !grouping {
            return Ok(());
        }
        let acc_sz = r.dtype()?.itemsize() as i64;
        let upcast_idx = self.shape_len() - self.upcasted;
        let (full, out) = (self.full_shape(), self.output_shape());
        let up: Vec<Sint> = full[upcast_idx..]
            .iter()
            .zip(&out[upcast_idx..])
            .filter(|(a, b)| a == b)
            .map(|(a, _)| a.clone())
            .collect();
        let fr = self.first_reduce();
        let local = &full[fr - self.local_dims..fr + self.group_for_reduces];
        let smem = Node::Num(amt)
            .try_mul(&Node::Num(acc_sz))?
            .try_mul(&sint_prod(&up)?)?
            .try_mul(&sint_prod(local)?)?;
        let max = Node::from(self.opts.shared_max);
        check(
            py_le(&smem, &max)?,
            &format!(
                "exceeds maximum shared memory size: needs {smem:?}, max {}",
                self.opts.shared_max
            ),
        )
    }

    /// TC: must come first; `amt` is the `tc_opt` level (see `kernel/tensor_cores.rs`).
    fn apply_tc(&mut self, opt: &Opt) -> Result<()> {
        check(
            self.applied_opts.is_empty(),
            "tensor core opts must be first",
        )?;
        let (Some(axis), Some(amt)) = (opt.axis, opt.amt) else {
            return Err(Error::KernelOpt(
                "tensor core opts must have an axis and amt".into(),
            ));
        };
        let use_tc = getenv("TC", 1);
        check(
            use_tc == 2 || !self.opts.tensor_cores.is_empty(),
            "must have tensor cores or TC=2",
        )?;
        check(
            self.apply_tc_opt(use_tc, axis, amt)?,
            "no tensor core available",
        )?;
        self.applied_opts.push(*opt);
        Ok(())
    }

    fn apply_local(&mut self, axis: usize, amt: i64) -> Result<()> {
        check(self.opts.has_local, "target does not support local")?;
        check(axis < self.global_dims(), "local is for globals")?;
        let fr = self.first_reduce();
        self.shift_to(axis, amt, false, Some(fr))?;
        self.local_dims += 1;
        Ok(())
    }

    fn apply_upcast(&mut self, axis: usize, amt: i64) -> Result<()> {
        check(axis < self.first_reduce(), "upcast is for non-reduce")?;
        let gd = self.global_dims();
        let tc_locals = self
            .tensor_core
            .as_ref()
            .is_some_and(|tc| gd <= axis && axis < gd + tc.threads.len());
        check(!tc_locals, "can't upcast TC locals")?;
        check(amt <= 8, "don't upcast more than 8")?;
        self.shift_to(axis, amt, false, None)?;
        self.upcast()
    }

    fn apply_nolocals(&mut self) -> Result<()> {
        check(
            self.opts.has_local && !self.dont_use_locals,
            "NOLOCALS is meaningless if target does not support local or already not using locals",
        )?;
        check(
            self.local_dims == 0 && self.group_for_reduces == 0,
            "can't have no locals with locals",
        )?;
        self.dont_use_locals = true;
        Ok(())
    }

    fn apply_group(&mut self, axis: usize, amt: i64, top: bool) -> Result<()> {
        check(
            self.opts.has_local && self.opts.has_shared,
            "target does not support local or shared mem",
        )?;
        let fr = self.first_reduce();
        check(
            axis >= fr + self.group_for_reduces && axis < self.shape_len() - self.upcasted,
            "must be reduce axis to group",
        )?;
        check(self.tensor_core.is_none(), "can't group with tensor cores")?;
        self.shift_to(axis, amt, top, Some(fr + self.group_for_reduces))?;
        self.group_for_reduces += 1;
        Ok(())
    }

    fn apply_unroll(&mut self, axis: usize, amt: i64) -> Result<()> {
        check(
            axis < self.shape_len() - self.upcasted,
            "can't upcasted already upcasted",
        )?;
        check(amt <= 32, "don't unroll more than 32")?;
        let fr = self.first_reduce();
        let whole = self.full_shape()[axis] == amt;
        // first_reduce moves on, so simplify_ones would count the leftover 1 as a local dim
        if whole && axis == fr {
            self.local_dims += 1;
        }
        // fully unrolling a group dim
        if whole && axis < fr + self.group_for_reduces {
            self.group_for_reduces -= 1;
        }
        self.shift_to(axis, amt, false, None)?;
        self.upcast()
    }

    fn apply_padto(&mut self, axis: usize, amt: i64) -> Result<()> {
        check(self.vars.is_empty(), "does not work with symbolic shape")?;
        check(
            axis < self.shape_len() - self.upcasted,
            "cannot pad upcasted",
        )?;
        // padding a reduce dim is fine for SUM when every op under it has f(0) = 0
        if self.first_reduce() <= axis {
            let ok = match self.reduceop() {
                Some(r) => {
                    r.op() == Op::Reduce(ReduceOps::SUM)
                        && r.src()
                            .iter()
                            .flat_map(|s| s.lazyops())
                            .all(|x| !x.op().is_unsafe_pad())
                }
                None => false,
            };
            check(ok, "cannot pad")?;
        }
        let mut padded = false;
        for i in 0..self.sts.len() {
            let Some(s) = self.sts[i].shape()[axis].as_int() else {
                return Err(Error::KernelOpt("does not work with symbolic shape".into()));
            };
            if s == 1 {
                continue;
            }
            check(
                s > amt / 4,
                &format!(
                    "pad adds more than quadruple the work self.sts[i].shape[axis]={s} > amt//4={}",
                    amt / 4
                ),
            )?;
            let ru = round_up(s as usize, amt as usize) as i64 - s;
            if ru != 0 {
                let n = self.sts[i].shape().len();
                let mut arg = vec![(Node::Num(0), Node::Num(0)); n];
                arg[axis] = (Node::Num(0), Node::Num(ru));
                self.sts[i] = self.sts[i].pad(&arg)?;
                padded = true;
            }
        }
        check(padded, "nothing was padded")
    }

    /// Opts a renderer needs regardless of speed. In 0.9.1 only image outputs need one (an
    /// UPCAST of a unit-stride axis by 4); rawgrad has no image dtypes, so there is none.
    pub fn required_optimizations(&mut self) -> Result<()> {
        Ok(())
    }
}
