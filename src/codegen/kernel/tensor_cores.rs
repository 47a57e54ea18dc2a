//! Tensor-core matching and the TC opt (tinygrad 0.9.1 `Kernel._create_tc_opts`,
//! `_apply_tc_opt`, `apply_tensor_cores`).
//!
//! A reduce matches a renderer's [`TensorCore`] when it is a SUM of (a CAST to the output dtype
//! of, when the dtypes differ) a MUL of two LOADs of the input dtype (or, at `tc_opt >= 1`, CASTs
//! of loads to it); N candidates are global axes where the first buffer has stride 0, M
//! candidates where the second has, K candidates are reduce axes (exactly one reduce axis at
//! `tc_opt` 0); `axis` picks a combination counted from the end; dims the tensor core does not
//! divide need padding, allowed at `tc_opt` 2 only. Applying: PADTO as needed, UNROLL K by the
//! tensor core's K, UPCAST N and M by what its warp threads do not cover, one LOCAL per warp
//! thread entry, then (unless explicit extra opts are given) UPCAST M then N by the largest of
//! 5/4/3/2 that divides and LOCAL N by 4 or 2.
//!
//! Where rawgrad differs: an attempt that fails leaves the kernel exactly as it was (0.9.1 may
//! leave PADTOs applied), and reduces that match differently give a KernelOptError instead of an
//! assertion failure.

use super::opts::{Opt, OptOps};
use super::{Kernel, KernelBuf};
use crate::codegen::renderer::TensorCore;
use crate::helpers::getenv;
use crate::ops::{BinaryOps, BufferOps, LazyOp, Op, ReduceOps, UnaryOps};
use crate::{Error, Result};

/// Where the tensor core's N, M and K axes are (tinygrad's `TensorCoreOptions`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorCoreOptions {
    /// The N, M, K axes in the current shape.
    pub axes: [usize; 3],
    /// Whether the original N and M axes are still in the shape.
    pub axes_exist: [bool; 2],
    /// (axis, tensor-core dim) for each axis that needs padding.
    pub axis_pads: Vec<(usize, usize)>,
}

impl TensorCoreOptions {
    /// Adjust N and M after `removed_axis` vanished from the shape.
    pub fn fix_axes(&mut self, removed_axis: usize) {
        for d in 0..2 {
            if !self.axes_exist[d] {
                continue;
            }
            if removed_axis < self.axes[d] {
                self.axes[d] -= 1;
            } else if removed_axis == self.axes[d] {
                self.axes_exist[d] = false;
            }
        }
    }
}

fn divides(x: &crate::shape::Sint, d: usize) -> bool {
    x.as_int().is_some_and(|v| v % d as i64 == 0)
}

impl Kernel {
    /// The buffer index a tensor-core input reads (a LOAD of `dtype_in`, or at `opt_level >= 1`
    /// a CAST of a load to it).
    fn tc_buf_index(&self, src: &LazyOp, tc: &TensorCore, opt_level: usize) -> Option<usize> {
        let pos = |x: &LazyOp| {
            let b = KernelBuf::of(x)?;
            self.bufs.iter().position(|y| *y == b)
        };
        if src.op() == Op::Buffer(BufferOps::LOAD) && src.membuffer()?.dtype == tc.dtype_in {
            return pos(src);
        }
        if opt_level >= 1
            && src.op() == Op::Unary(UnaryOps::CAST)
            && src.dtype().ok() == Some(tc.dtype_in)
        {
            let inner = src.src().first()?;
            if inner.op() == Op::Buffer(BufferOps::LOAD) {
                return pos(inner);
            }
        }
        None
    }

    /// The buffers of the two factors when `reduceop` is a SUM of (a CAST to the output dtype
    /// of) a MUL of two tensor-core inputs.
    fn tc_mul_bufs(
        &self,
        reduceop: &LazyOp,
        tc: &TensorCore,
        opt_level: usize,
    ) -> Option<(usize, usize)> {
        let src = reduceop.src().first()?;
        let mul = if tc.dtype_in != tc.dtype_out {
            if src.op() != Op::Unary(UnaryOps::CAST) || src.dtype().ok() != Some(tc.dtype_out) {
                return None;
            }
            src.src().first()?
        } else {
            src
        };
        if mul.op() != Op::Binary(BinaryOps::MUL) || mul.src().len() != 2 {
            return None;
        }
        Some((
            self.tc_buf_index(&mul.src()[0], tc, opt_level)?,
            self.tc_buf_index(&mul.src()[1], tc, opt_level)?,
        ))
    }

    /// 0.9.1's `_create_tc_opts`: the axes `tc` would use for `reduceop`, if it matches.
    fn create_tc_opts(
        &mut self,
        reduceop: &LazyOp,
        tc: &TensorCore,
        axis: usize,
        opt_level: usize,
    ) -> Result<Option<TensorCoreOptions>> {
        let Some((buf0, buf1)) = self.tc_mul_bufs(reduceop, tc, opt_level) else {
            return Ok(None);
        };
        let s0 = self.real_strides(buf0)?;
        let s1 = self.real_strides(buf1)?;
        let fr = self.first_reduce();
        let zero = |s: &Option<crate::shape::Sint>| *s == Some(crate::shape::Node::Num(0));
        let axis_buf0: Vec<usize> = (0..fr).filter(|&i| zero(&s0[i])).collect();
        let axis_buf1: Vec<usize> = (0..fr).filter(|&i| zero(&s1[i])).collect();
        if axis_buf0.is_empty()
            || axis_buf1.is_empty()
            || !(self.shape_len() - fr == 1 || opt_level >= 1)
        {
            return Ok(None);
        }
        let mut choices = vec![];
        for &a in &axis_buf0 {
            for &b in &axis_buf1 {
                for k in fr..self.shape_len() {
                    choices.push([a, b, k]);
                }
            }
        }
        if axis >= choices.len() {
            return Ok(None);
        }
        let axes = choices[choices.len() - 1 - axis];
        let full = self.full_shape();
        let axis_pads: Vec<(usize, usize)> = (0..3)
            .filter(|&i| !divides(&full[axes[i]], tc.dims[i]))
            .map(|i| (axes[i], tc.dims[i]))
            .collect();
        if !axis_pads.is_empty() && opt_level < 2 {
            return Ok(None);
        }
        self.bufs_for_tensor_core.retain(|(r, _)| r != reduceop);
        self.bufs_for_tensor_core
            .push((reduceop.clone(), (buf0, buf1)));
        Ok(Some(TensorCoreOptions {
            axes,
            axes_exist: [true, true],
            axis_pads,
        }))
    }

    /// The current TC axes (they move as dims vanish while opts apply).
    fn tc_axes(&self) -> Result<TensorCoreOptions> {
        self.tensor_core_opts
            .clone()
            .ok_or_else(|| Error::Internal("tensor core opts vanished".into()))
    }

    /// 0.9.1's `_apply_tc_opt`: shape the kernel for the first tensor core that matches.
    pub(crate) fn apply_tc_opt(
        &mut self,
        use_tc: i64,
        axis: usize,
        opt_level: usize,
    ) -> Result<bool> {
        let is_sum = self
            .reduceop()
            .is_some_and(|r| r.op() == Op::Reduce(ReduceOps::SUM));
        if use_tc == 0 || !self.opts.has_local || !is_sum {
            return Ok(false);
        }
        for tc in self.opts.tensor_cores.clone() {
            let mut found = vec![];
            for r in self.reduceops.clone() {
                found.push(self.create_tc_opts(&r, &tc, axis, opt_level)?);
            }
            if found.windows(2).any(|w| w[0] != w[1]) {
                return Err(Error::KernelOpt(
                    "reduces of this kernel match the tensor core differently".into(),
                ));
            }
            let Some(Some(tc_opts)) = found.into_iter().next() else {
                continue;
            };
            self.tensor_core_opts = Some(tc_opts.clone());
            let mut padded = true;
            for &(ax, dim) in &tc_opts.axis_pads {
                if self
                    .apply_opt_with(Opt::new(OptOps::PADTO, ax, dim), false)
                    .is_err()
                {
                    padded = false;
                    break;
                }
            }
            if !padded {
                continue;
            }
            self.shape_for_tc(&tc)?;
            if use_tc == 1 {
                self.tensor_core = Some(tc);
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// UNROLL K by the tensor core's K, UPCAST N and M by what its threads do not cover, then
    /// one LOCAL per warp-thread entry (none recorded as applied opts).
    fn shape_for_tc(&mut self, tc: &TensorCore) -> Result<()> {
        let k_axis = self.tc_axes()?.axes[2] - self.first_reduce();
        self.apply_opt_with(Opt::new(OptOps::UNROLL, k_axis, tc.dims[2]), false)?;
        for d in 0..2 {
            let covered: usize = tc
                .threads
                .iter()
                .filter(|t| t.0 == d)
                .map(|t| t.1)
                .product();
            if tc.dims[d] > covered {
                let ax = self.tc_axes()?.axes[d];
                self.apply_opt_with(Opt::new(OptOps::UPCAST, ax, tc.dims[d] / covered), false)?;
            }
        }
        for &(d, amt) in &tc.threads {
            let ax = self.tc_axes()?.axes[d];
            self.apply_opt_with(Opt::new(OptOps::LOCAL, ax, amt), false)?;
        }
        Ok(())
    }

    /// 0.9.1's `apply_tensor_cores`: the TC opt (`use_tc` 0 disables it, 2 shapes the kernel
    /// without WMMA) and, unless `extra_opts` replace them, the hand-coded upcasts and local that
    /// follow it. `tc_opt` defaults to `TC_OPT` (0). Returns whether it applied; when it did not,
    /// the kernel is unchanged.
    pub fn apply_tensor_cores(
        &mut self,
        use_tc: i64,
        extra_opts: Option<&[Opt]>,
        axis: usize,
        tc_opt: Option<usize>,
    ) -> Result<bool> {
        let tc_opt = tc_opt.unwrap_or_else(|| getenv("TC_OPT", 0).max(0) as usize);
        if self.opts.tensor_cores.is_empty() && use_tc != 2 {
            return Ok(false);
        }
        let before = self.clone();
        match self.apply_tensor_cores_inner(extra_opts, axis, tc_opt) {
            Ok(()) => Ok(true),
            Err(Error::KernelOpt(_)) => {
                *self = before;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn apply_tensor_cores_inner(
        &mut self,
        extra_opts: Option<&[Opt]>,
        axis: usize,
        tc_opt: usize,
    ) -> Result<()> {
        self.apply_opt(Opt::new(OptOps::TC, axis, tc_opt))?;
        if self.tensor_core_opts.is_none() {
            return Ok(());
        }
        if let Some(extra) = extra_opts {
            return self.apply_opts(extra);
        }
        for d in [1, 0] {
            let o = self.tc_axes()?;
            if !o.axes_exist[d] {
                continue;
            }
            let size = &self.full_shape()[o.axes[d]];
            if let Some(upc) = [5usize, 4, 3, 2].into_iter().find(|&u| divides(size, u)) {
                self.apply_opt(Opt::new(OptOps::UPCAST, o.axes[d], upc))?;
            }
        }
        let o = self.tc_axes()?;
        if self.tensor_core.is_some() && o.axes_exist[0] {
            let size = &self.full_shape()[o.axes[0]];
            if let Some(upc) = [4usize, 2].into_iter().find(|&u| divides(size, u)) {
                self.apply_opt(Opt::new(OptOps::LOCAL, o.axes[0], upc))?;
            }
        }
        Ok(())
    }
}
