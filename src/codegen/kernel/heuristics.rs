//! tinygrad 0.9.1's `hand_coded_optimizations`: the opts the engine applies to every kernel unless
//! `NOOPT=1` (and tensor cores did not apply), in 0.9.1's order and with its size thresholds:
//!
//! 1. `required_optimizations` (nothing without image dtypes);
//! 2. matvec (locals + shared memory, `MV=1`): GROUP(0, `MV_THREADS_PER_ROW`=8), LOCAL(g,
//!    `MV_BLOCKSIZE`=4), UPCAST(g, `MV_ROWS_PER_THREAD`=4) for the first global axis that divides,
//!    when the reduce is a SUM of a MUL of two loads, the first with unit stride on the reduce;
//! 3. GROUPTOP(0, 256 or 16) for small outputs (at most 2048 elements) on GPUs; nothing more when
//!    that grouped;
//! 4. masked axes of at most 7 fully upcast while the upcast product stays at most 49;
//! 5. UPCAST by 3 or 4 of axes some buffer broadcasts, while the output has at least 1024 elements;
//! 6. UNROLL of the last reduce dim (whole when at most 32, else by 4), a second one when both are
//!    at most 3;
//! 7. UPCAST by 4 of the last dim when nothing is upcast;
//! 8. LOCAL sizes (GPUs): broadcast axes first, 32 for axis 0 or 16/8/4/3/2, product at most 128,
//!    at most three axes (`NOLOCALS=1`: the NOLOCALS opt instead).
//!
//! Not guaranteed: image-only steps (UPCASTMID, image float4 upcasts) never fire, as rawgrad has
//! no image dtypes. Symbolic strides count as positive and enter the sort key with their maximum.

use super::opts::{Opt, OptOps};
use super::Kernel;
use crate::helpers::getenv;
use crate::ops::{BinaryOps, BufferOps, Op, ReduceOps};
use crate::shape::symbolic::{py_ge, py_gt, py_le};
use crate::shape::{sint_prod, Node, Sint};
use crate::{Error, Result};

/// A stride of the last view as an ordering key: ints as they are, symbolic ones by their max.
fn stride_key(s: &Sint) -> i64 {
    s.as_int().or_else(|| s.max().as_int()).unwrap_or(i64::MAX)
}

/// `x % d == 0` with Python's meaning for sints (a symbolic value never equals 0).
fn divides(x: &Sint, d: i64) -> bool {
    x.as_int().is_some_and(|v| v % d == 0)
}

impl Kernel {
    /// The upcast dims of buffer `i` (offsets from the first upcast dim) with unit stride and a
    /// size divisible by 4 (tinygrad's `float4_axis`).
    pub fn float4_axis(&self, i: usize) -> Result<Vec<usize>> {
        let st = self.st(i)?;
        let start = self.shape_len().saturating_sub(self.upcasted);
        Ok(self
            .unit_stride_axes(i)?
            .into_iter()
            .filter(|&x| x >= start && st.shape().get(x).is_some_and(|s| divides(s, 4)))
            .map(|x| x - start)
            .collect())
    }

    /// How many upcast combinations buffer `i` has (`len(shape_offsets(i))`).
    fn shape_offsets_count(&self, i: usize) -> Result<i64> {
        let st = self.st(i)?;
        let start = self.shape_len().saturating_sub(self.upcasted);
        let up = &st.shape()[start.min(st.shape().len())..];
        Ok(sint_prod(up)?.as_int().unwrap_or(i64::MAX))
    }

    /// The stride of `axis` in the last view of ShapeTracker `i` (`st.views[-1].strides[axis]`).
    fn last_view_stride(&self, i: usize, axis: usize) -> Result<Sint> {
        let st = self.st(i)?;
        let v = st.views.last().ok_or_else(|| {
            Error::Internal("hand_coded_optimizations: a tracker without views".into())
        })?;
        v.strides
            .get(axis)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("hand_coded_optimizations: no stride {axis}")))
    }

    /// What the engine applies unless `NOOPT=1` (0.9.1's `get_linearizer`): tensor cores when
    /// `TC` (default 1) allows and one matches, else the hand-coded heuristics. Returns whether
    /// tensor cores were used. A heuristic that picks an illegal opt (a KernelOptError, which
    /// would stop tinygrad) leaves the kernel unoptimized instead, and says so at `DEBUG>=1`.
    pub fn apply_default_opts(&mut self) -> Result<bool> {
        let before = self.clone();
        if self.apply_tensor_cores(getenv("TC", 1), None, 0, None)? {
            return Ok(true);
        }
        match self.hand_coded_optimizations() {
            Ok(()) => Ok(false),
            Err(Error::KernelOpt(m)) => {
                if crate::helpers::debug() >= 1 {
                    println!(
                        "hand_coded_optimizations: {m}; kernel {} left unoptimized",
                        before.base_name()
                    );
                }
                *self = before;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// tinygrad 0.9.1's `hand_coded_optimizations` (see the module doc for the steps).
    pub fn hand_coded_optimizations(&mut self) -> Result<()> {
        self.required_optimizations()?;
        if self.hc_matvec()? {
            return Ok(());
        }
        self.hc_grouptop()?;
        if self.group_for_reduces > 0 {
            return Ok(());
        }
        self.hc_masked_upcasts()?;
        self.hc_broadcast_upcasts()?;
        self.hc_reduce_unroll()?;
        if self.upcasted == 0 {
            let unup = self.full_unupcasted_shape().to_vec();
            if let Some(last) = unup.last() {
                if divides(last, 4) {
                    self.apply_opt(Opt::new(OptOps::UPCAST, unup.len() - 1, 4))?;
                }
            }
        }
        self.hc_locals()
    }

    /// The matvec path; true when it applied (and nothing else should).
    fn hc_matvec(&mut self) -> Result<bool> {
        let (bs, tpr, rpt) = (
            getenv("MV_BLOCKSIZE", 4),
            getenv("MV_THREADS_PER_ROW", 8),
            getenv("MV_ROWS_PER_THREAD", 4),
        );
        if !(self.opts.has_local && self.opts.has_shared && getenv("MV", 1) != 0)
            || !(bs > 1 || tpr > 1 || rpt > 1)
            || self.full_shape().len() < 2
        {
            return Ok(false);
        }
        let Some(r) = self.reduceop() else {
            return Ok(false);
        };
        let Some(mul) = r.src().first() else {
            return Ok(false);
        };
        let is_load = |x: &crate::ops::LazyOp| x.op() == Op::Buffer(BufferOps::LOAD);
        if r.op() != Op::Reduce(ReduceOps::SUM)
            || mul.op() != Op::Binary(BinaryOps::MUL)
            || !mul.src().iter().all(is_load)
            || mul.src().len() != 2
        {
            return Ok(false);
        }
        let idx = |x: &crate::ops::LazyOp| -> Result<usize> {
            let b = super::KernelBuf::of(x);
            self.bufs
                .iter()
                .position(|y| Some(y) == b.as_ref())
                .ok_or_else(|| Error::Internal("matvec: a load is not a kernel buffer".into()))
        };
        let (i0, i1) = (idx(&mul.src()[0])?, idx(&mul.src()[1])?);
        let (st0, st1) = (self.st(i0)?.clone(), self.st(i1)?.clone());
        let (s0, s1) = (self.real_strides(i0)?, self.real_strides(i1)?);
        let expanded = |shape: &[Sint], strides: &[Option<Sint>]| {
            shape.iter().zip(strides).any(|(s, st)| {
                py_gt(s, &Node::Num(1)).unwrap_or(false) && *st == Some(Node::Num(0))
            })
        };
        let fr = self.first_reduce();
        if s0.get(fr).cloned().flatten() != Some(Node::Num(1))
            || (expanded(st0.shape(), &s0) && expanded(st1.shape(), &s1))
        {
            return Ok(false);
        }
        for g in 0..self.global_dims() {
            let full = self.full_shape();
            if divides(&full[fr], tpr) && divides(&full[g], bs * rpt) {
                if tpr > 1 {
                    self.apply_opt(Opt::new(OptOps::GROUP, 0, tpr as usize))?;
                }
                if bs > 1 {
                    self.apply_opt(Opt::new(OptOps::LOCAL, g, bs as usize))?;
                }
                if rpt > 1 {
                    self.apply_opt(Opt::new(OptOps::UPCAST, g, rpt as usize))?;
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// GROUPTOP for reductions into small outputs (GPUs only).
    fn hc_grouptop(&mut self) -> Result<()> {
        let fr = self.first_reduce();
        let out_prefix: Vec<Sint> = self.output_shape()[..fr].to_vec();
        if !(self.opts.has_local && self.opts.has_shared && out_prefix.iter().all(Node::is_int)) {
            return Ok(());
        }
        let n = sint_prod(&out_prefix)?.as_int().unwrap_or(i64::MAX);
        if !self.float4_axis(0)?.is_empty() || fr > 2 || fr + 1 > self.shape_len() || n > 2048 {
            return Ok(());
        }
        let sizes: &[i64] = if n <= 32 { &[256, 16] } else { &[16] };
        for &sz in sizes {
            let fits = self.sts.iter().all(|st| {
                let d = &st.shape()[fr];
                divides(d, sz) || *d == 1
            });
            if !fits {
                continue;
            }
            match self.apply_opt(Opt::new(OptOps::GROUPTOP, 0, sz as usize)) {
                Ok(()) => break,
                Err(Error::KernelOpt(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Small masked output axes (from pad/cat/stack) fully upcast.
    fn hc_masked_upcasts(&mut self) -> Result<()> {
        let full = self.full_shape().to_vec();
        let upcast_prod = sint_prod(&full[self.shape_len() - self.upcasted..])?;
        let mut to_upcast: Vec<usize> = vec![];
        for (axis, size) in full.iter().enumerate().take(self.first_reduce()) {
            let Some(s) = size.as_int() else { continue };
            if s > 7 {
                continue;
            }
            let mut masked = false;
            for i in 0..self.sts.len() {
                masked |= self.axis_is_masked(i, axis)?;
            }
            let chosen: Vec<Sint> = to_upcast.iter().map(|&j| full[j].clone()).collect();
            let total = upcast_prod.try_mul(&sint_prod(&chosen)?)?.try_mul(size)?;
            if masked && py_le(&total, &Node::Num(49))? {
                to_upcast.push(axis);
            }
        }
        for &axis in to_upcast.iter().rev() {
            self.apply_opt(Opt::new(OptOps::UPCAST, axis, 0))?;
        }
        Ok(())
    }

    /// UPCAST by 3 or 4 of broadcast output axes while the output is large.
    fn hc_broadcast_upcasts(&mut self) -> Result<()> {
        let mut upcasted_axis: Vec<usize> = vec![];
        loop {
            let fr = self.first_reduce();
            let out = sint_prod(&self.output_shape()[..fr])?;
            if !py_ge(&out, &Node::Num(1024))? {
                return Ok(());
            }
            let mut choices: Vec<(i64, i64, usize, usize)> = vec![];
            for axis in 0..fr {
                for amt in [3usize, 4] {
                    if upcasted_axis.contains(&axis)
                        || !divides(&self.full_shape()[axis], amt as i64)
                    {
                        continue;
                    }
                    if !self.broadcast_candidate(axis)? {
                        continue;
                    }
                    let (mut pos, mut sum) = (0i64, 0i64);
                    for i in 0..self.sts.len() {
                        let s = self.last_view_stride(i, axis)?;
                        pos += py_gt(&s, &Node::Num(0))? as i64;
                        sum = sum.saturating_add(stride_key(&s));
                    }
                    choices.push((pos, sum, axis, amt));
                }
            }
            let Some(&(_, _, axis, amt)) = choices.iter().min() else {
                return Ok(());
            };
            self.apply_opt(Opt::new(OptOps::UPCAST, axis, amt))?;
            upcasted_axis.push(axis);
        }
    }

    /// Some buffer has stride 0 on `axis` and no upcast dim with stride 0 yet.
    fn broadcast_candidate(&self, axis: usize) -> Result<bool> {
        for i in 0..self.sts.len() {
            if self.last_view_stride(i, axis)? != 0 {
                continue;
            }
            let up = self.upcasted_axis(i)?;
            if !up.iter().any(|x| x.1 == Some(Node::Num(0))) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Unroll the last reduce dim (loop unrolling).
    fn hc_reduce_unroll(&mut self) -> Result<()> {
        let fbi = self.full_buf_index;
        let reduce_upcast = self.upcasted_axis(fbi)?.iter().any(|x| x.2);
        let small_upcast = self.upcasted == 0 || {
            let n = self.shape_len();
            let up = sint_prod(&self.full_shape()[n - self.upcasted..])?;
            py_gt(&Node::Num(64), &up)?
        };
        if !(self.first_reduce() < self.shape_len() - self.upcasted
            && (self.shape_offsets_count(fbi)? <= 4 || !reduce_upcast)
            && small_upcast)
        {
            return Ok(());
        }
        let unup = self.full_unupcasted_shape().to_vec();
        let last = unup.len() - 1 - self.first_reduce();
        match unup.last().and_then(Node::as_int) {
            Some(s) if s <= 32 => {
                self.apply_opt(Opt::new(OptOps::UNROLL, last, 0))?;
                let unup = self.full_unupcasted_shape().to_vec();
                let s2 = unup.last().and_then(Node::as_int);
                if self.first_reduce() < self.shape_len() - self.upcasted
                    && s <= 3
                    && s2.is_some_and(|s2| s2 <= 3)
                {
                    let last = unup.len() - 1 - self.first_reduce();
                    self.apply_opt(Opt::new(OptOps::UNROLL, last, 0))?;
                }
            }
            _ => {
                if unup.last().is_some_and(|s| divides(s, 4)) {
                    self.apply_opt(Opt::new(OptOps::UNROLL, last, 4))?;
                }
            }
        }
        Ok(())
    }

    /// Local sizes for GPUs (or NOLOCALS with `NOLOCALS=1`).
    fn hc_locals(&mut self) -> Result<()> {
        if !self.opts.has_local {
            return Ok(());
        }
        if getenv("NOLOCALS", 0) != 0 && self.local_dims == 0 && self.group_for_reduces == 0 {
            return self.apply_opt(Opt::nolocals());
        }
        let mut ranking: Vec<(bool, usize)> = vec![];
        for axis in 0..self.first_reduce() {
            let mut bcast = false;
            for i in 0..self.sts.len() {
                bcast |= self.last_view_stride(i, axis)? == 0;
            }
            ranking.push((bcast, axis));
        }
        ranking.sort_by(|a, b| b.cmp(a));
        let mut to_local: Vec<(usize, usize)> = vec![];
        for &(_, axis) in &ranking {
            let local_size: usize = to_local.iter().map(|x| x.1).product();
            let first: &[usize] = if axis == 0 { &[32] } else { &[] };
            let full = &self.full_shape()[axis];
            let sz = first
                .iter()
                .chain(&[16, 8, 4, 3, 2])
                .copied()
                .find(|&x| divides(full, x as i64) && local_size * x <= 128);
            if let Some(sz) = sz {
                to_local.push((axis, sz));
            }
        }
        to_local.truncate(3);
        to_local.sort();
        let mut deleted = 0;
        for (axis, sz) in to_local {
            let axis = axis - deleted;
            let whole = self.full_shape()[axis] == sz as i64;
            self.apply_opt(Opt::new(OptOps::LOCAL, axis, sz))?;
            if whole {
                deleted += 1;
            }
        }
        Ok(())
    }
}
