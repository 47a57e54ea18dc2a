//! NN-level ops (tinygrad 0.9.1): `dot`/`matmul` (reshape, transpose, broadcast multiply, sum
//! over the last axis, cast to the promoted input dtype), `linear`, the sliding-window `_pool`
//! and what uses it (`avg_pool2d`, `max_pool2d`, `conv2d`), `layernorm`, `batchnorm`,
//! `triu`/`tril`, `one_hot`, `dropout`, `scaled_dot_product_attention` and the losses.
//!
//! Not guaranteed: the Winograd conv (`WINO=1`) and image mode (`IMAGE=1`) are not implemented;
//! `conv2d` always takes the direct path.

use super::{fmt_shape, to_sints, Axis, Tensor};
use crate::dtype::{dtypes, least_upper_dtype, ConstValue, DType};
use crate::{bail, ensure, Result};

/// tinygrad's `make_pair`: one value repeated, or the values as given.
fn make_pair(v: &[usize], n: usize, what: &str) -> Result<Vec<usize>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => bail!(
            InvalidArgument,
            "{what}: {l} values for {n} pooled dims ({v:?})"
        ),
    }
}

/// conv2d's padding as a pad2d list: one value for every side, one per spatial dim (both
/// sides), or the pad2d list itself.
fn conv_padding(padding: &[isize], n: usize, xs: &[usize]) -> Result<Vec<isize>> {
    Ok(match padding.len() {
        1 => vec![padding[0]; 2 * n],
        l if l == 2 * n => padding.to_vec(),
        l if l == n => padding.iter().flat_map(|&p| [p, p]).rev().collect(),
        l => bail!(
            InvalidArgument,
            "conv2d: Expected padding of length {} or {n}, but got {l} for tensor of shape {}",
            2 * n,
            fmt_shape(xs)
        ),
    })
}

/// The geometry of a `_pool`: `nn` leading dims kept, then per pooled dim the kernel, stride,
/// dilation, input and output sizes.
#[derive(Clone, Copy)]
struct Window<'a> {
    nn: usize,
    k: &'a [usize],
    s: &'a [usize],
    d: &'a [usize],
    i: &'a [usize],
    o: &'a [usize],
}

impl Window<'_> {
    /// Shrink/pad args: `None` for the kept dims, then `tail`.
    fn with(&self, tail: Vec<Option<(usize, usize)>>) -> Vec<Option<(usize, usize)>> {
        let mut v = vec![None; self.nn];
        v.extend(tail);
        v
    }
    /// A shape: the kept dims of `shape`, then `tail`.
    fn shp(&self, shape: &[usize], tail: impl Iterator<Item = usize>) -> Vec<crate::shape::Sint> {
        let mut v = shape[..self.nn].to_vec();
        v.extend(tail);
        to_sints(&v)
    }
    /// Kept dims, then the `first` of each (pair) of pooled dims, then the `second`.
    fn perm(&self, first: usize, second: usize) -> Vec<isize> {
        let (nn, nk) = (self.nn, self.k.len());
        (0..nn)
            .chain((0..nk).map(|j| nn + j * 2 + first))
            .chain((0..nk).map(|j| nn + j * 2 + second))
            .map(|x| x as isize)
            .collect()
    }
}

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
        let x = self.reshape_sints(&to_sints(&xshape))?;
        let wt = w
            .reshape_sints(&to_sints(&wshape))?
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

    /// tinygrad's `_pool`: sliding windows of size `k` over the last `k.len()` dims, with
    /// `stride` and `dilation` (one value or one per dim), moved to the end:
    /// `(..., o1, o2, ..., k1, k2, ...)`. Movement ops only.
    pub fn pool(&self, k: &[usize], stride: &[usize], dilation: &[usize]) -> Result<Tensor> {
        let shape = self.shape();
        let nk = k.len();
        ensure!(
            shape.len() >= nk,
            InvalidArgument,
            "_pool: can't pool {} with {k:?}",
            fmt_shape(&shape)
        );
        let (s, d) = (
            make_pair(stride, nk, "_pool")?,
            make_pair(dilation, nk, "_pool")?,
        );
        let nn = shape.len() - nk;
        let i = &shape[nn..];
        let mut o = Vec::with_capacity(nk);
        for j in 0..nk {
            let span = d[j] * (k[j].max(1) - 1);
            ensure!(
                s[j] > 0 && i[j] > span && k[j] > 0,
                InvalidArgument,
                "_pool: window {k:?} (stride {s:?}, dilation {d:?}) does not fit {}",
                fmt_shape(&shape)
            );
            o.push((i[j] - span).div_ceil(s[j]));
        }
        let w = Window {
            nn,
            k,
            s: &s,
            d: &d,
            i,
            o: &o,
        };
        if (0..nk).any(|j| k[j] > s[j] || d[j] != 1) {
            self.pool_repeat(&w)
        } else {
            self.pool_fast(&w)
        }
    }

    /// The general `_pool` path (windows overlap, or dilation): repeat so no padding is needed,
    /// then shrink and reshape for dilation and stride.
    fn pool_repeat(&self, w: &Window) -> Result<Tensor> {
        let Window { nn, k, s, d, i, o } = *w;
        let nk = k.len();
        let mut reps = vec![1; nn];
        reps.extend((0..nk).map(|j| (k[j] * (i[j] + d[j])).div_ceil(i[j])));
        let mut x = self.repeat(&reps)?;
        x = x.shrink(&w.with((0..nk).map(|j| Some((0, k[j] * (i[j] + d[j])))).collect()))?;
        x = x.reshape_sints(&w.shp(&self.shape(), (0..nk).flat_map(|j| [k[j], i[j] + d[j]])))?;
        let sh = (0..nk).flat_map(|j| [Some((0, k[j])), Some((0, o[j] * s[j]))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x = x.reshape_sints(&w.shp(&self.shape(), (0..nk).flat_map(|j| [k[j], o[j], s[j]])))?;
        let sh = (0..nk).flat_map(|j| [Some((0, k[j])), Some((0, o[j])), Some((0, 1))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x = x.reshape_sints(&w.shp(&self.shape(), (0..nk).flat_map(|j| [k[j], o[j]])))?;
        x.permute(&w.perm(1, 0))
    }

    /// The `_pool` fast path (kernel no larger than the stride, no dilation): pad, shrink,
    /// reshape into (o, s), shrink to (o, k).
    fn pool_fast(&self, w: &Window) -> Result<Tensor> {
        let Window { k, s, i, o, .. } = *w;
        let nk = k.len();
        let pad = (0..nk).map(|j| Some((0, (o[j] * s[j]).saturating_sub(i[j]))));
        let mut x = self.pad(&w.with(pad.collect()))?;
        x = x.shrink(&w.with((0..nk).map(|j| Some((0, o[j] * s[j]))).collect()))?;
        x = x.reshape_sints(&w.shp(&self.shape(), (0..nk).flat_map(|j| [o[j], s[j]])))?;
        let sh = (0..nk).flat_map(|j| [Some((0, o[j])), Some((0, k[j]))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x.permute(&w.perm(0, 1))
    }

    fn pool_axes(n: usize) -> Axis {
        Axis::Dims((1..=n as isize).map(|i| -i).rev().collect())
    }

    /// Average pooling over the last `kernel.len()` dims (stride defaults to the kernel).
    pub fn avg_pool2d(
        &self,
        kernel: &[usize],
        stride: Option<&[usize]>,
        dilation: &[usize],
    ) -> Result<Tensor> {
        self.pool(kernel, stride.unwrap_or(kernel), dilation)?
            .mean(Tensor::pool_axes(kernel.len()), false)
    }

    /// Max pooling over the last `kernel.len()` dims (stride defaults to the kernel).
    pub fn max_pool2d(
        &self,
        kernel: &[usize],
        stride: Option<&[usize]>,
        dilation: &[usize],
    ) -> Result<Tensor> {
        self.pool(kernel, stride.unwrap_or(kernel), dilation)?
            .max(Tensor::pool_axes(kernel.len()), false)
    }

    /// tinygrad's `conv2d` (any number of spatial dims): `self` is (bs, groups*cin, *spatial),
    /// `weight` (cout, cin, *kernel). `padding`: one value, one per spatial dim, or the pad2d
    /// list (two per dim, last dim first).
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: &[usize],
        dilation: &[usize],
        padding: &[isize],
        acc_dtype: Option<DType>,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        ensure!(
            xs.len() == ws.len() && xs.len() >= 3 && groups > 0 && groups * ws[1] == xs[1],
            InvalidArgument,
            "conv2d: Input Tensor shape {} does not match the shape of the weights {} (groups {groups})",
            fmt_shape(&xs),
            fmt_shape(&ws)
        );
        let (bs, cout, cin) = (xs[0], ws[0], ws[1]);
        let hw = &ws[2..];
        ensure!(
            cout % groups == 0,
            InvalidArgument,
            "conv2d: {cout} output channels do not split into {groups} groups"
        );
        let padding_ = conv_padding(padding, hw.len(), &xs)?;
        let x = self.pad2d(&padding_, 0i64)?.pool(hw, stride, dilation)?;
        let rcout = cout / groups;
        let xsh = x.shape();
        let oyx = xsh[2..xsh.len() - hw.len()].to_vec();
        let n = oyx.len();
        let mut s1 = vec![bs, groups, cin, 1];
        s1.extend(&oyx);
        s1.extend(hw);
        let mut s2 = vec![bs, groups, cin, rcout];
        s2.extend(&oyx);
        s2.extend(hw);
        let mut order: Vec<isize> = vec![0, 1, 3];
        order.extend((0..n).map(|i| 4 + i as isize));
        order.push(2);
        order.extend((0..hw.len()).map(|i| (4 + n + i) as isize));
        let x = x
            .reshape_sints(&to_sints(&s1))?
            .broadcast_to(&s2)?
            .permute(&order)?;
        let mut wsh = vec![1, groups, rcout];
        wsh.extend(std::iter::repeat(1).take(n));
        wsh.push(cin);
        wsh.extend(hw);
        let axes: Vec<isize> = (0..=n).map(|i| -1 - i as isize).collect();
        let mut out = vec![bs, cout];
        out.extend(&oyx);
        let ret = x
            .mul(&weight.reshape_sints(&to_sints(&wsh))?)?
            .sum_acc(axes, true, acc_dtype)?
            .reshape_sints(&to_sints(&out))?;
        match bias {
            None => Ok(ret),
            Some(b) => {
                let mut bsh: Vec<isize> = vec![1, -1];
                bsh.extend(std::iter::repeat(1).take(hw.len()));
                ret.add(&b.reshape(&bsh)?)
            }
        }
    }

    /// `(x - mean) / sqrt(var + eps)` over `axis`.
    pub fn layernorm(&self, axis: impl Into<Axis>, eps: f64) -> Result<Tensor> {
        let axis = axis.into();
        let y = self.sub(&self.mean(axis.clone(), true)?)?;
        let inv = y.mul(&y)?.mean(axis, true)?.add(eps)?.rsqrt()?;
        y.mul(&inv)
    }

    /// tinygrad's `batchnorm`: `(x - mean) * weight * invstd + bias`, the statistics laid along
    /// `axis`.
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axis: &[usize],
    ) -> Result<Tensor> {
        let shape: Vec<usize> = (self.shape().into_iter().enumerate())
            .map(|(i, s)| if axis.contains(&i) { s } else { 1 })
            .collect();
        let sh = to_sints(&shape);
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
        if r as isize + diagonal <= 0 {
            return Tensor::full_on(&[r, c], 1i64, dtype, device);
        }
        let s = r + c - 1;
        let t = Tensor::full_on(&[s, s], 1i64, dtype, device)?
            .pad(&[None, Some((0, s))])?
            .flatten(0, -1)?
            .shrink(&[Some((0, s * (2 * s - 1)))])?
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
        let m = Tensor::tri(r, c, diagonal + 1, dtypes::bool, &self.device())?;
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
