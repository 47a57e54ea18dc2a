//! Reductions (tinygrad 0.9.1): `sum` (accumulating in `sum_acc_dtype`, cast back for
//! half/bfloat16), `max`, `min`, `mean`, `var`, `std`, `softmax`, `log_softmax`, `logsumexp`,
//! `argmax`, `argmin`, `cumsum`, `einsum`. Axes may be negative; several may be reduced at once.
//!
//! Each reduction comes twice: without arguments it has tinygrad's defaults (every axis, no
//! kept dims, `correction=1`: `x.sum()`, `x.std()`), and the `_axis` form takes one [`Axis`]
//! (an integer, a list of them, `Axis::All` or an `Option`) and `keepdim`. `argmax`/`argmin`
//! and `cumsum` take the same `Axis` and require it to name one dim.
//!
//! Not guaranteed: `logsumexp(axis, keepdim=true)` keeps the reduced dims (tinygrad 0.9.1
//! broadcasts them wrongly there).

use super::{function as F, prod, resolve_dim, to_sints, Tensor};
use crate::dtype::{dtypes, sum_acc_dtype, ConstValue, DType};
use crate::{bail, ensure, Result};

/// Which axes a reduction runs over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Every axis (tinygrad's `axis=None`).
    All,
    /// These axes (negative ones count from the end).
    Dims(Vec<isize>),
}

macro_rules! axis_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Axis {
            fn from(a: $t) -> Axis {
                Axis::Dims(vec![a as isize])
            }
        }
        impl From<&[$t]> for Axis {
            fn from(a: &[$t]) -> Axis {
                Axis::Dims(a.iter().map(|&x| x as isize).collect())
            }
        }
        impl<const N: usize> From<&[$t; N]> for Axis {
            fn from(a: &[$t; N]) -> Axis {
                Axis::Dims(a.iter().map(|&x| x as isize).collect())
            }
        }
        impl<const N: usize> From<[$t; N]> for Axis {
            fn from(a: [$t; N]) -> Axis {
                Axis::Dims(a.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<Vec<$t>> for Axis {
            fn from(a: Vec<$t>) -> Axis {
                Axis::Dims(a.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<Option<$t>> for Axis {
            fn from(a: Option<$t>) -> Axis {
                match a {
                    None => Axis::All,
                    Some(x) => Axis::Dims(vec![x as isize]),
                }
            }
        }
    )*};
}
axis_from!(isize, i32, i64, usize);

impl Axis {
    /// The one dim this names for an op that takes a single axis (`None` for [`Axis::All`]).
    pub(crate) fn single(&self, ndim: usize, what: &str) -> Result<Option<usize>> {
        match self {
            Axis::All => Ok(None),
            Axis::Dims(d) if d.len() == 1 => resolve_dim(ndim, d[0], false).map(Some),
            Axis::Dims(d) => bail!(InvalidArgument, "{what}: takes one axis, got {d:?}"),
        }
    }
}

impl Tensor {
    /// The resolved axes of a reduction (tinygrad's `_reduce` prologue).
    fn reduce_axes(&self, axis: &Axis) -> Result<Vec<usize>> {
        let nd = self.ndim();
        if nd == 0 {
            if let Axis::Dims(d) = axis {
                if let Some(bad) = d.iter().find(|&&a| a != -1 && a != 0) {
                    bail!(
                        InvalidArgument,
                        "reduce: axis={bad} out of range of [-1, 0] for a 0-d tensor"
                    );
                }
            }
            return Ok(vec![]);
        }
        match axis {
            Axis::All => Ok((0..nd).collect()),
            Axis::Dims(d) => d.iter().map(|&a| resolve_dim(nd, a, false)).collect(),
        }
    }

    /// tinygrad's `_reduce`: apply a reduce Function, then drop the reduced dims unless
    /// `keepdim`.
    fn reduce_with(
        &self,
        f: fn(&Tensor, &[usize]) -> Result<Tensor>,
        axis: &Axis,
        keepdim: bool,
    ) -> Result<Tensor> {
        let ax = self.reduce_axes(axis)?;
        let ret = f(self, &ax)?;
        if keepdim {
            return Ok(ret);
        }
        let shape: Vec<usize> = (self.shape().into_iter().enumerate())
            .filter(|(i, _)| !ax.contains(i))
            .map(|(_, s)| s)
            .collect();
        ret.reshape_sints(&to_sints(&shape)?)
    }

    /// The number of elements each output of a reduction over `axis` combines.
    fn reduced_count(&self, axis: &Axis) -> Result<usize> {
        let ax = self.reduce_axes(axis)?;
        let shape = self.shape();
        let dims: Vec<usize> = (shape.iter().enumerate())
            .filter(|(i, &s)| ax.contains(i) && s != 1)
            .map(|(_, &s)| s)
            .collect();
        Ok(prod(&dims))
    }

    /// Sum of every element (tinygrad's `sum()`), accumulating in `sum_acc_dtype`.
    pub fn sum(&self) -> Result<Tensor> {
        self.sum_acc(Axis::All, false, None)
    }

    /// Sum over `axis`, accumulating in `sum_acc_dtype` (half/bfloat16 results are cast back).
    pub fn sum_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.sum_acc(axis, keepdim, None)
    }

    /// Sum with an explicit accumulation dtype (the result keeps it).
    pub fn sum_acc(
        &self,
        axis: impl Into<Axis>,
        keepdim: bool,
        acc_dtype: Option<DType>,
    ) -> Result<Tensor> {
        let dt = self.dtype();
        let acc = acc_dtype.unwrap_or_else(|| sum_acc_dtype(dt));
        let ret = self.cast(acc)?.reduce_with(F::sum, &axis.into(), keepdim)?;
        if acc_dtype.is_none() && (dt == dtypes::float16 || dt == dtypes::bfloat16) {
            return ret.cast(dt);
        }
        Ok(ret)
    }

    /// Maximum of every element (tinygrad's `max()`).
    pub fn max(&self) -> Result<Tensor> {
        self.max_axis(Axis::All, false)
    }

    /// Maximum over `axis` (the gradient splits evenly among tied maxima).
    pub fn max_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.reduce_with(F::max, &axis.into(), keepdim)
    }

    /// Minimum of every element (tinygrad's `min()`).
    pub fn min(&self) -> Result<Tensor> {
        self.min_axis(Axis::All, false)
    }

    /// Minimum over `axis`: `-max(-x)`.
    pub fn min_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.neg()?.max_axis(axis, keepdim)?.neg()
    }

    /// Mean of every element (tinygrad's `mean()`; integer inputs give float32).
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_axis(Axis::All, false)
    }

    /// Mean over `axis` (integer inputs give float32).
    pub fn mean_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        let axis = axis.into();
        let dt = self.dtype();
        let out = if dt.is_float() { dt } else { dtypes::float32 };
        let n = self.reduced_count(&axis)?;
        self.cast(sum_acc_dtype(dt))?
            .sum_axis(axis, keepdim)?
            .div(ConstValue::Int(n as i128))?
            .cast(out)
    }

    /// Sample variance of every element (tinygrad's `var()`: correction 1).
    pub fn var(&self) -> Result<Tensor> {
        self.var_axis(Axis::All, false, 1)
    }

    /// Variance over `axis` with Bessel's `correction` (divides by `max(0, n - correction)`).
    pub fn var_axis(
        &self,
        axis: impl Into<Axis>,
        keepdim: bool,
        correction: usize,
    ) -> Result<Tensor> {
        let axis = axis.into();
        let squares = self.sub(&self.mean_axis(axis.clone(), true)?)?.square()?;
        let n = self.reduced_count(&axis)?;
        squares
            .sum_axis(axis, keepdim)?
            .div(ConstValue::Int(n.saturating_sub(correction) as i128))
    }

    /// Sample standard deviation of every element (tinygrad's `std()`: correction 1).
    pub fn std(&self) -> Result<Tensor> {
        self.std_axis(Axis::All, false, 1)
    }

    /// Standard deviation over `axis`: `sqrt(var_axis)`.
    pub fn std_axis(
        &self,
        axis: impl Into<Axis>,
        keepdim: bool,
        correction: usize,
    ) -> Result<Tensor> {
        self.var_axis(axis, keepdim, correction)?.sqrt()
    }

    /// tinygrad's `_softmax`: (x - max, exp of that, sum of the exp).
    fn softmax_parts(&self, axis: &Axis) -> Result<(Tensor, Tensor, Tensor)> {
        let m = self.sub(&self.max_axis(axis.clone(), true)?)?;
        let e = m.exp()?;
        let ss = e.sum_axis(axis.clone(), true)?;
        Ok((m, e, ss))
    }

    /// `exp(x - max) / sum(exp(x - max))` along `axis` (usually -1).
    pub fn softmax(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let (_, e, ss) = self.softmax_parts(&axis.into())?;
        e.div(&ss)
    }

    /// `x - max - log(sum(exp(x - max)))` along `axis`.
    pub fn log_softmax(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let (m, _, ss) = self.softmax_parts(&axis.into())?;
        m.sub(&ss.log()?)
    }

    /// `log(sum(exp(x)))` of every element (tinygrad's `logsumexp()`).
    pub fn logsumexp(&self) -> Result<Tensor> {
        self.logsumexp_axis(Axis::All, false)
    }

    /// `log(sum(exp(x)))` over `axis`, computed stably around the max.
    pub fn logsumexp_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        let axis = axis.into();
        let m = self.max_axis(axis.clone(), true)?;
        let s = self
            .sub(&m)?
            .exp()?
            .sum_axis(axis.clone(), keepdim)?
            .log()?;
        if keepdim {
            return s.add(&m);
        }
        let squeezed = match &axis {
            Axis::All => m.squeeze(None)?,
            Axis::Dims(d) if d.len() == 1 => m.squeeze(Some(d[0]))?,
            Axis::Dims(_) => m.reshape_sints(&to_sints(&s.shape())?)?,
        };
        s.add(&squeezed)
    }

    /// Index of the (first) maximum of the flattened tensor as int32 (tinygrad's `argmax()`).
    pub fn argmax(&self) -> Result<Tensor> {
        self.argmax_axis(Axis::All, false)
    }

    /// Index of the (first) maximum along one axis as int32; [`Axis::All`] flattens first.
    pub fn argmax_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        let Some(a) = axis.into().single(self.ndim(), "argmax")? else {
            return self.flatten(0, -1)?.argmax_axis(0, false);
        };
        let shape = self.shape();
        let n = shape[a];
        let m = self.eq(&self.max_axis(a as isize, true)?)?;
        let mut rshape = vec![n];
        rshape.extend(std::iter::repeat(1).take(shape.len() - a - 1));
        let ni = n as i128;
        let rev = Tensor::arange_on(
            ConstValue::Int(ni - 1),
            ConstValue::Int(-1),
            ConstValue::Int(-1),
            dtypes::default_int,
            &self.device(),
        )?
        .detach()
        .reshape_sints(&to_sints(&rshape)?)?;
        let idx = m.mul(&rev)?;
        idx.max_axis(a as isize, keepdim)?
            .rsub(ConstValue::Int(ni))?
            .sub(1i64)?
            .cast(dtypes::int32)
    }

    /// Index of the (first) minimum of the flattened tensor (tinygrad's `argmin()`).
    pub fn argmin(&self) -> Result<Tensor> {
        self.argmin_axis(Axis::All, false)
    }

    /// Index of the (first) minimum along one axis: `argmax(-x)`.
    pub fn argmin_axis(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.neg()?.argmax_axis(axis, keepdim)
    }

    /// tinygrad's `_cumsum`: a windowed sum over a left-padded copy of the axis.
    pub(crate) fn _cumsum(&self, axis: isize, first_zero: bool) -> Result<Tensor> {
        let a = self.resolve_dim(axis, false)?;
        let n = self.shape()[a];
        ensure!(
            n != 0,
            InvalidArgument,
            "_cumsum: axis {a} of shape {:?} is empty",
            self.shape()
        );
        let pl = (n - usize::from(!first_zero)) as isize;
        self.transpose(a as isize, -1)?
            .pad2d(&[pl, -(first_zero as isize)], 0i64)?
            .pool(&[n], &[1], &[1])?
            .sum_axis(-1isize, false)?
            .transpose(a as isize, -1)
    }

    /// Cumulative sum along one axis (two stages of 256-blocks above 512 elements);
    /// [`Axis::All`] is tinygrad's default, axis 0.
    pub fn cumsum(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let axis = match axis.into() {
            Axis::All => Axis::Dims(vec![0]),
            d => d,
        };
        if self.ndim() == 0 {
            axis.single(1, "cumsum")?;
            return Ok(self.clone());
        }
        let Some(a) = axis.single(self.ndim(), "cumsum")? else {
            return Err(crate::Error::Internal("cumsum: no axis".into()));
        };
        let shape = self.shape();
        if shape.contains(&0) {
            return Ok(self.clone());
        }
        const SPLIT: usize = 256;
        let n = shape[a];
        if n <= SPLIT * 2 {
            return self._cumsum(a as isize, false);
        }
        let pad = (n.div_ceil(SPLIT) * SPLIT - n) as isize;
        let ret = self
            .transpose(a as isize, -1)?
            .pad2d(&[pad, 0], 0i64)?
            .unflatten(-1, &[-1, SPLIT as isize])?
            ._cumsum(-1, false)?;
        let last = ret.getitem(&[super::Index::Ellipsis, super::Index::Int(-1)])?;
        let base_add = last._cumsum(-1, true)?;
        let mut eshape: Vec<isize> = base_add.shape().iter().map(|&s| s as isize).collect();
        eshape.push(SPLIT as isize);
        let base_add = base_add.unsqueeze(-1)?.expand(&eshape)?;
        let fix = |x: &Tensor| -> Result<Tensor> {
            x.flatten(-2, -1)?
                .getitem(&[
                    super::Index::Ellipsis,
                    super::Index::Slice(Some(-(n as isize)), None, None),
                ])?
                .transpose(a as isize, -1)
        };
        fix(&ret)?.add(&fix(&base_add)?)
    }
}
