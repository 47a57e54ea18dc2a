//! tinygrad's `__setitem__`: `x[indices] = v` as [`Tensor::setitem`]. The value (a tensor or a
//! number) is cast to this tensor's dtype, broadcast to the indexed shape and written in place;
//! the write is realized at once, as in tinygrad.
//!
//! Basic indices (ints, slices with steps, new axes, an ellipsis) take 0.9.1's path: realize
//! the target, take the view, and ASSIGN into it (one kernel writing only the view). Tensor
//! (advanced) indices go beyond 0.9.1, which refuses them: the flat positions they select are
//! read to the host (checked against the shape: an out-of-range index is an error here, where
//! getitem reads 0), repeated positions keep the last value written (numpy's order), and the
//! whole tensor is rewritten as `where(selected, scattered value, old)` through one-hot masks.
//!
//! Not guaranteed: tensors that need gradients cannot be assigned into (as in tinygrad); the
//! target must be contiguous; the advanced path costs O(elements x selected) work.

use super::{fmt_shape, Index, Operand, Tensor};
use crate::dtype::{dtypes, ConstValue};
use crate::{ensure, Result};

impl Tensor {
    /// `self[indices] = v` (see the module doc).
    pub fn setitem<'a>(&self, indices: &[Index], v: impl Into<Operand<'a>>) -> Result<()> {
        let v = match v.into() {
            Operand::Ref(t) => t.clone(),
            Operand::Owned(t) => t,
            Operand::Const(c) => Tensor::scalar_on(c, self.dtype(), &self.device())?,
        };
        ensure!(
            self.requires_grad() != Some(true) && v.requires_grad() != Some(true),
            InvalidArgument,
            "setitem: setitem with requires_grad is not supported"
        );
        ensure!(
            self.lazydata().st().contiguous(),
            InvalidArgument,
            "setitem: setitem target needs to be contiguous"
        );
        let v = v.to(&self.device())?.cast(self.dtype())?;
        if !indices.iter().any(|i| matches!(i, Index::Tensor(_))) {
            let target = self.realize()?.getitem(indices)?;
            let value = v
                .broadcast_to(&target.shape())
                .map_err(|e| crate::Error::InvalidArgument(format!("setitem: {}", e.message())))?;
            target.assign(&value.contiguous()?)?;
            target.realize()?;
            return Ok(());
        }
        self.setitem_advanced(indices, &v)
    }

    /// The flat positions `indices` select, as (result shape, positions).
    fn selected_positions(&self, indices: &[Index]) -> Result<(Vec<usize>, Vec<i64>)> {
        let shape = self.shape();
        let n = self.numel();
        ensure!(
            i32::try_from(n).is_ok(),
            InvalidArgument,
            "setitem: {} elements are too many for tensor-index assignment",
            fmt_shape(&shape)
        );
        // positions from 1: getitem reads 0 where a tensor index is out of its dim
        let pos = Tensor::arange_on(
            ConstValue::Int(1),
            ConstValue::Int(n as i128 + 1),
            ConstValue::Int(1),
            dtypes::int32,
            &self.device(),
        )?
        .reshape_sints(&super::to_sints(&shape)?)?;
        let sel = pos.getitem(indices)?;
        let got: Vec<i64> = sel.to_vec::<i32>()?.into_iter().map(i64::from).collect();
        ensure!(
            !got.contains(&0),
            InvalidArgument,
            "setitem: a tensor index is out of bounds for shape {}",
            fmt_shape(&shape)
        );
        Ok((sel.shape(), got.into_iter().map(|p| p - 1).collect()))
    }

    fn setitem_advanced(&self, indices: &[Index], v: &Tensor) -> Result<()> {
        let (sel_shape, mut pos) = self.selected_positions(indices)?;
        let value = v
            .broadcast_to(&sel_shape)
            .map_err(|e| crate::Error::InvalidArgument(format!("setitem: {}", e.message())))?;
        // last write wins: an earlier duplicate of a position selects nothing
        let mut seen = std::collections::HashSet::new();
        for p in pos.iter_mut().rev() {
            if !seen.insert(*p) {
                *p = -1;
            }
        }
        let m = pos.len();
        let n = self.numel();
        if m == 0 || n == 0 {
            return Ok(());
        }
        let dev = self.device();
        let posv: Vec<i32> = pos.iter().map(|&p| p as i32).collect();
        let pos_t = Tensor::from_slice_on(&posv, &[1, m], &dev)?;
        let all = Tensor::arange_on(
            ConstValue::Int(0),
            ConstValue::Int(n as i128),
            ConstValue::Int(1),
            dtypes::int32,
            &dev,
        )?
        .reshape(&[n as isize, 1])?;
        let onehot = all.eq(&pos_t)?;
        let hit = onehot.cast(dtypes::int32)?.sum_axis(1, false)?.gt(0i64)?;
        let vals = value.reshape(&[1, m as isize])?;
        let zero = Tensor::full_on(&[1, 1], 0i64, self.dtype(), &dev)?;
        let scattered = onehot
            .where_(&vals, &zero)?
            .sum_acc(1, false, Some(self.dtype()))?;
        let flat = self.reshape(&[n as isize])?;
        let new = hit
            .where_(&scattered, &flat)?
            .reshape_sints(&super::to_sints(&self.shape())?)?;
        self.assign(&new.contiguous()?)?;
        self.realize()?;
        Ok(())
    }
}
