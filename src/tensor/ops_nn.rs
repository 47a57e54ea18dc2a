//! NN-level ops (tinygrad 0.9.1): `dot`/`matmul` (reshape, transpose, broadcast multiply, sum
//! over the last axis, cast to the promoted input dtype), `linear`, `sequential`, `layernorm`,
//! `batchnorm`, `triu`/`tril`, `one_hot`. The sliding-window ops are in `conv.rs`, dropout in
//! `rand.rs`, attention and the losses in `activation.rs`.
//!
//! Not guaranteed: image mode (`IMAGE=1`) is not implemented.

use super::{fmt_shape, to_sints, Axis, Tensor};
use crate::dtype::{dtypes, least_upper_dtype, ConstValue, DType};
use crate::{ensure, Result};

impl Tensor {
    /// tinygrad's `dot`: matrix product over the last dim of `self` and the second-to-last of
    /// `w` (the last for a 1-D `w`), broadcasting batch dims.
    pub fn dot(&self, w: &Tensor) -> Result<Tensor> {
        self.dot_acc(w, None)
    }

    /// `dot` with an accumulation dtype (the result keeps it).
    pub fn dot_acc(&self, w: &Tensor, acc_dtype: Option<DType>) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), w.shape());
        let (n1, n2) = (xs.len(), ws.len());
        ensure!(
            n1 != 0 && n2 != 0,
            InvalidArgument,
            "matmul: both arguments to matmul need to be at least 1D, but they are {n1}D and {n2}D"
        );
        let k = n2.min(2);
        let (l, r) = (xs[n1 - 1], ws[n2 - k]);
        ensure!(
            l == r,
            InvalidArgument,
            "matmul: shapes {} and {} are not aligned ({l} != {r})",
            fmt_shape(&xs),
            fmt_shape(&ws)
        );
        let ones = (n1 - 1).min(n2 - 1).min(1);
        let mut xshape = xs[..n1 - 1].to_vec();
        xshape.extend(std::iter::repeat(1).take(ones));
        xshape.push(xs[n1 - 1]);
        let mut wshape = ws[..n2.saturating_sub(2)].to_vec();
        wshape.extend(std::iter::repeat(1).take(ones));
        wshape.extend_from_slice(&ws[n2 - k..]);
        let x = self.reshape_sints(&to_sints(&xshape)?)?;
        let wt = w
            .reshape_sints(&to_sints(&wshape)?)?
            .transpose(-1, -(k as isize))?;
        let out = acc_dtype.unwrap_or_else(|| least_upper_dtype(&[x.dtype(), wt.dtype()]));
        x.mul(&wt)?.sum_acc(-1isize, false, acc_dtype)?.cast(out)
    }

    /// `self @ x`.
    pub fn matmul(&self, x: &Tensor) -> Result<Tensor> {
        self.dot(x)
    }

    /// `x @ weight + bias` (a 1-D weight multiplies elementwise).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = if weight.ndim() == 1 {
            self.mul(weight)?
        } else {
            self.dot(weight)?
        };
        match bias {
            Some(b) => x.add(b),
            None => Ok(x),
        }
    }

    /// tinygrad's `sequential`: apply each function (a layer or a closure) in turn.
    pub fn sequential(&self, ll: &[&dyn super::nn::Forward]) -> Result<Tensor> {
        ll.iter().try_fold(self.clone(), |x, f| f.forward(&x))
    }

    /// `(x - mean) / sqrt(var + eps)` over `axis` (tinygrad's defaults: `layernorm(-1, 1e-5)`).
    pub fn layernorm(&self, axis: impl Into<Axis>, eps: f64) -> Result<Tensor> {
        let axis = axis.into();
        let y = self.sub(&self.mean_axis(axis.clone(), true)?)?;
        let inv = y.mul(&y)?.mean_axis(axis, true)?.add(eps)?.rsqrt()?;
        y.mul(&inv)
    }

    /// tinygrad's `batchnorm`: `(x - mean) * weight * invstd + bias`, the statistics laid along
    /// `axis` (tinygrad's default: 1).
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axis: impl Into<Axis>,
    ) -> Result<Tensor> {
        let axis = match axis.into() {
            Axis::All => (0..self.ndim()).collect::<Vec<_>>(),
            Axis::Dims(d) => (d.iter())
                .map(|&a| super::resolve_dim(self.ndim(), a, false))
                .collect::<Result<Vec<_>>>()?,
        };
        let shape: Vec<usize> = (self.shape().into_iter().enumerate())
            .map(|(i, s)| if axis.contains(&i) { s } else { 1 })
            .collect();
        let sh = to_sints(&shape)?;
        let mut x = self.sub(&mean.reshape_sints(&sh)?)?;
        if let Some(w) = weight {
            x = x.mul(&w.reshape_sints(&sh)?)?;
        }
        let inv = if invstd.ndim() == axis.len() {
            invstd.reshape_sints(&sh)?
        } else {
            invstd.clone()
        };
        let ret = x.mul(&inv)?;
        match bias {
            Some(b) => ret.add(&b.reshape_sints(&sh)?),
            None => Ok(ret),
        }
    }

    /// tinygrad's `_tri`: an (r, c) bool-able mask of the upper triangle from `diagonal`.
    fn tri(r: usize, c: usize, diagonal: isize, dtype: DType, device: &str) -> Result<Tensor> {
        if r == 0 || c == 0 || diagonal >= c as isize {
            return Tensor::full_on(&[r, c], 0i64, dtype, device);
        }
        if (r as isize).saturating_add(diagonal) <= 0 {
            return Tensor::full_on(&[r, c], 1i64, dtype, device);
        }
        // Here -r < diagonal < c, so the index arithmetic below cannot overflow; the sizes can.
        let what = || format!("_tri: a ({r}, {c}) mask");
        let s = r + c - 1;
        let len = super::mul_size(s, 2 * s - 1, what)?;
        let t = Tensor::full_on(&[s, s], 1i64, dtype, device)?
            .pad(&[None, Some((0, s))])?
            .flatten(0, -1)?
            .shrink(&[Some((0, len))])?
            .reshape(&[s as isize, -1])?
            .shrink(&[None, Some((0, s))])?;
        use super::Index as I;
        let (ri, ci) = (r as isize, c as isize);
        if diagonal <= 0 {
            t.getitem(&[I::range(0, ri), I::range(-diagonal, ci - diagonal)])
        } else {
            t.getitem(&[I::range(diagonal, ri + diagonal), I::range(0, ci)])
        }
    }

    /// The upper triangle (from `diagonal`) of the last two dims; the rest zero.
    pub fn triu(&self, diagonal: isize) -> Result<Tensor> {
        let s = self.shape();
        ensure!(
            s.len() >= 2,
            InvalidArgument,
            "triu: needs at least 2 dims, got shape {}",
            fmt_shape(&s)
        );
        let m = Tensor::tri(
            s[s.len() - 2],
            s[s.len() - 1],
            diagonal,
            dtypes::bool,
            &self.device(),
        )?;
        m.where_(self, 0i64)?.cast(self.dtype())
    }

    /// The lower triangle (to `diagonal`) of the last two dims; the rest zero.
    pub fn tril(&self, diagonal: isize) -> Result<Tensor> {
        let s = self.shape();
        ensure!(
            s.len() >= 2,
            InvalidArgument,
            "tril: needs at least 2 dims, got shape {}",
            fmt_shape(&s)
        );
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        let m = Tensor::tri(
            r,
            c,
            diagonal.saturating_add(1),
            dtypes::bool,
            &self.device(),
        )?;
        m.where_(0i64, self)?.cast(self.dtype())
    }

    /// One-hot encoding of integer labels (int32 0/1, a new last dim of `num_classes`).
    pub fn one_hot(&self, num_classes: usize) -> Result<Tensor> {
        use super::Index as I;
        let ar = Tensor::arange_on(
            ConstValue::Int(0),
            ConstValue::Int(num_classes as i128),
            ConstValue::Int(1),
            dtypes::default_int,
            &self.device(),
        )?
        .detach();
        self.getitem(&[I::Ellipsis, I::NewAxis])?
            .eq(&ar)?
            .where_(1i64, 0i64)
    }
}
