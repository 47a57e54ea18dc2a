//! Sliding windows (tinygrad 0.9.1): `_pool` (movement ops only) and what uses it: `avg_pool2d`,
//! `max_pool2d`, `conv2d` and `conv_transpose2d`, for any number of spatial dims. Defaults come
//! without spelling them (`x.max_pool2d()`, `x.conv2d(&w, None)`); the `_with` forms take a
//! [`PoolArgs`] or [`ConvArgs`] built from `Default` with builder methods
//! (`ConvArgs::default().stride(2).padding(1)`).
//!
//! A window larger than the input gives a zero-size result where 0.9.1's arithmetic does (its
//! output extent is `ceil((i - dilation*(k-1)) / stride)`: 0 gives an empty dim, as in
//! `Tensor.empty(2,16,2,2).conv2d(Tensor.empty(32,16,3,3))` of shape `(2, 32, 0, 0)`); a negative
//! extent, where 0.9.1 fails an assertion, is an error here. Beyond 0.9.1: a zero-size input dim
//! pools to a zero-size output (0.9.1 divides by zero).
//!
//! Not guaranteed: the Winograd conv (`WINO=1`) and image mode (`IMAGE=1`) are not implemented;
//! `conv2d` always takes the direct path.

use super::{add_size, fmt_shape, mul_size, to_sints, Axis, Tensor};
use crate::dtype::DType;
use crate::{bail, ensure, Result};

/// Integers for a per-dim argument: one value for every dim or one per dim (`2`, `[2, 1]`,
/// `vec![..]`, `&[..]`).
pub trait IntoInts {
    fn into_ints(self) -> Vec<isize>;
}

macro_rules! into_ints {
    ($($t:ty),*) => {$(
        impl IntoInts for $t {
            fn into_ints(self) -> Vec<isize> {
                vec![self as isize]
            }
        }
        impl<const N: usize> IntoInts for [$t; N] {
            fn into_ints(self) -> Vec<isize> {
                self.iter().map(|&v| v as isize).collect()
            }
        }
        impl IntoInts for &[$t] {
            fn into_ints(self) -> Vec<isize> {
                self.iter().map(|&v| v as isize).collect()
            }
        }
        impl IntoInts for Vec<$t> {
            fn into_ints(self) -> Vec<isize> {
                self.iter().map(|&v| v as isize).collect()
            }
        }
    )*};
}
into_ints!(i32, i64, isize, usize);

/// The arguments of `conv2d_with`/`conv_transpose2d_with` (tinygrad's keyword arguments), with
/// tinygrad's defaults: groups 1, stride 1, dilation 1, padding 0, output_padding 0.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvArgs {
    pub groups: usize,
    /// One value or one per spatial dim.
    pub stride: Vec<isize>,
    /// One value or one per spatial dim.
    pub dilation: Vec<isize>,
    /// One value, one per spatial dim (both sides), or the pad2d list (two per dim, last dim
    /// first; conv2d only).
    pub padding: Vec<isize>,
    /// conv_transpose2d only: extra size on the far side of each output dim.
    pub output_padding: Vec<isize>,
    /// The accumulation dtype of the sum (conv2d only).
    pub acc_dtype: Option<DType>,
}

impl Default for ConvArgs {
    fn default() -> Self {
        ConvArgs {
            groups: 1,
            stride: vec![1],
            dilation: vec![1],
            padding: vec![0],
            output_padding: vec![0],
            acc_dtype: None,
        }
    }
}

impl ConvArgs {
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    pub fn stride(mut self, s: impl IntoInts) -> Self {
        self.stride = s.into_ints();
        self
    }
    pub fn dilation(mut self, d: impl IntoInts) -> Self {
        self.dilation = d.into_ints();
        self
    }
    pub fn padding(mut self, p: impl IntoInts) -> Self {
        self.padding = p.into_ints();
        self
    }
    pub fn output_padding(mut self, p: impl IntoInts) -> Self {
        self.output_padding = p.into_ints();
        self
    }
    pub fn acc_dtype(mut self, dt: DType) -> Self {
        self.acc_dtype = Some(dt);
        self
    }
}

/// The arguments of `avg_pool2d_with`/`max_pool2d_with`, with tinygrad's defaults: kernel
/// `(2, 2)`, stride = the kernel, dilation 1.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolArgs {
    /// One value per pooled dim (a single value pools two dims, as tinygrad's `make_pair`).
    pub kernel: Vec<isize>,
    /// `None`: the kernel.
    pub stride: Option<Vec<isize>>,
    pub dilation: Vec<isize>,
}

impl Default for PoolArgs {
    fn default() -> Self {
        PoolArgs {
            kernel: vec![2, 2],
            stride: None,
            dilation: vec![1],
        }
    }
}

impl PoolArgs {
    pub fn kernel(mut self, k: impl IntoInts) -> Self {
        let k = k.into_ints();
        self.kernel = if k.len() == 1 { vec![k[0]; 2] } else { k };
        self
    }
    pub fn stride(mut self, s: impl IntoInts) -> Self {
        self.stride = Some(s.into_ints());
        self
    }
    pub fn dilation(mut self, d: impl IntoInts) -> Self {
        self.dilation = d.into_ints();
        self
    }
}

/// Non-negative (or, with `positive`, positive) integers as sizes.
fn sizes(v: &[isize], positive: bool, what: &str) -> Result<Vec<usize>> {
    v.iter()
        .map(|&x| {
            ensure!(
                x > 0 || (!positive && x == 0),
                InvalidArgument,
                "{what} must be {}, got {v:?}",
                if positive { "positive" } else { "non-negative" }
            );
            Ok(x as usize)
        })
        .collect()
}

/// tinygrad's `make_pair`: one value repeated, or the values as given.
fn make_pair<T: Copy + std::fmt::Debug>(v: &[T], n: usize, what: &str) -> Result<Vec<T>> {
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
    fn shp(
        &self,
        shape: &[usize],
        tail: impl Iterator<Item = usize>,
    ) -> Result<Vec<crate::shape::Sint>> {
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

/// 0.9.1's output extent `ceil((i - d*(k-1)) / s)`, an error where it is negative.
fn out_extent(i: usize, k: usize, s: usize, d: usize, what: impl Fn() -> String) -> Result<usize> {
    let span = d
        .checked_mul(k - 1)
        .ok_or_else(|| crate::Error::InvalidArgument(format!("_pool: window of {}", what())))?;
    ensure!(
        span <= i,
        InvalidArgument,
        "_pool: window {} is larger than the input",
        what()
    );
    Ok((i - span).div_ceil(s))
}

impl Tensor {
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
        let what = || {
            format!(
                "{k:?} (stride {s:?}, dilation {d:?}) of {}",
                fmt_shape(&shape)
            )
        };
        ensure!(
            (0..nk).all(|j| s[j] > 0 && d[j] > 0 && k[j] > 0),
            InvalidArgument,
            "_pool: kernel, stride and dilation must be positive: {}",
            what()
        );
        let o = (0..nk)
            .map(|j| out_extent(i[j], k[j], s[j], d[j], what))
            .collect::<Result<Vec<_>>>()?;
        if o.contains(&0) || i.contains(&0) {
            let mut out = shape[..nn].to_vec();
            out.extend(&o);
            out.extend(k);
            let none = self.shrink(
                &(0..shape.len())
                    .map(|j| (j >= nn).then_some((0, 0)))
                    .collect::<Vec<_>>(),
            )?;
            return none.reshape_sints(&to_sints(&out)?);
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
        let shape = self.shape();
        let what = || {
            format!(
                "_pool: windows {k:?} (dilation {d:?}) of {}",
                fmt_shape(&shape)
            )
        };
        // Per pooled dim: the repeated extent k * (i + d) (an error where it overflows).
        let span = (0..nk)
            .map(|j| mul_size(k[j], add_size(i[j], d[j], what)?, what))
            .collect::<Result<Vec<_>>>()?;
        let mut reps = vec![1; nn];
        reps.extend((0..nk).map(|j| span[j].div_ceil(i[j])));
        let mut x = self.repeat(&reps)?;
        x = x.shrink(&w.with((0..nk).map(|j| Some((0, span[j]))).collect()))?;
        x = x.reshape_sints(&w.shp(&shape, (0..nk).flat_map(|j| [k[j], i[j] + d[j]]))?)?;
        let sh = (0..nk).flat_map(|j| [Some((0, k[j])), Some((0, o[j] * s[j]))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x = x.reshape_sints(&w.shp(&shape, (0..nk).flat_map(|j| [k[j], o[j], s[j]]))?)?;
        let sh = (0..nk).flat_map(|j| [Some((0, k[j])), Some((0, o[j])), Some((0, 1))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x = x.reshape_sints(&w.shp(&shape, (0..nk).flat_map(|j| [k[j], o[j]]))?)?;
        x.permute(&w.perm(1, 0))
    }

    /// The `_pool` fast path (kernel no larger than the stride, no dilation): pad, shrink,
    /// reshape into (o, s), shrink to (o, k).
    fn pool_fast(&self, w: &Window) -> Result<Tensor> {
        let Window { k, s, i, o, .. } = *w;
        let nk = k.len();
        let shape = self.shape();
        let what = || format!("_pool: stride {s:?} of {}", fmt_shape(&shape));
        // o * s <= i + s - 1: an overflow only where the stride itself is near usize::MAX.
        let os = (0..nk)
            .map(|j| mul_size(o[j], s[j], what))
            .collect::<Result<Vec<_>>>()?;
        let pad = (0..nk).map(|j| Some((0, os[j].saturating_sub(i[j]))));
        let mut x = self.pad(&w.with(pad.collect()))?;
        x = x.shrink(&w.with((0..nk).map(|j| Some((0, os[j]))).collect()))?;
        x = x.reshape_sints(&w.shp(&shape, (0..nk).flat_map(|j| [o[j], s[j]]))?)?;
        let sh = (0..nk).flat_map(|j| [Some((0, o[j])), Some((0, k[j]))]);
        x = x.shrink(&w.with(sh.collect()))?;
        x.permute(&w.perm(0, 1))
    }

    /// The windows of a pooling op and the axes to reduce them over.
    fn pool_windows(&self, args: &PoolArgs, what: &str) -> Result<(Tensor, Axis)> {
        let k = sizes(&args.kernel, true, &format!("{what}: kernel_size"))?;
        let s = match &args.stride {
            Some(s) => sizes(s, true, &format!("{what}: stride"))?,
            None => k.clone(),
        };
        let d = sizes(&args.dilation, true, &format!("{what}: dilation"))?;
        let axes = Axis::Dims((1..=k.len() as isize).map(|i| -i).rev().collect());
        Ok((self.pool(&k, &s, &d)?, axes))
    }

    /// Average pooling with tinygrad's defaults (2x2 windows, stride 2) over the last two dims.
    pub fn avg_pool2d(&self) -> Result<Tensor> {
        self.avg_pool2d_with(&PoolArgs::default())
    }

    /// Average pooling over the last `kernel.len()` dims.
    pub fn avg_pool2d_with(&self, args: &PoolArgs) -> Result<Tensor> {
        let (x, axes) = self.pool_windows(args, "avg_pool2d")?;
        x.mean_axis(axes, false)
    }

    /// Max pooling with tinygrad's defaults (2x2 windows, stride 2) over the last two dims.
    pub fn max_pool2d(&self) -> Result<Tensor> {
        self.max_pool2d_with(&PoolArgs::default())
    }

    /// Max pooling over the last `kernel.len()` dims.
    pub fn max_pool2d_with(&self, args: &PoolArgs) -> Result<Tensor> {
        let (x, axes) = self.pool_windows(args, "max_pool2d")?;
        x.max_axis(axes, false)
    }

    /// tinygrad's `conv2d` with the default arguments (groups 1, stride 1, dilation 1, no
    /// padding).
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        self.conv2d_with(weight, bias, &ConvArgs::default())
    }

    /// tinygrad's `conv2d` (any number of spatial dims): `self` is (bs, groups*cin, *spatial),
    /// `weight` (cout, cin, *kernel).
    pub fn conv2d_with(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        args: &ConvArgs,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        let groups = args.groups;
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
        let stride = sizes(&args.stride, true, "conv2d: stride")?;
        let dilation = sizes(&args.dilation, true, "conv2d: dilation")?;
        let padding_ = conv_padding(&args.padding, hw.len(), &xs)?;
        let x = self.pad2d(&padding_, 0i64)?.pool(hw, &stride, &dilation)?;
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
            .reshape_sints(&to_sints(&s1)?)?
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
            .mul(&weight.reshape_sints(&to_sints(&wsh)?)?)?
            .sum_acc(axes, true, args.acc_dtype)?
            .reshape_sints(&to_sints(&out)?)?;
        match bias {
            None => Ok(ret),
            Some(b) => {
                let mut bsh: Vec<isize> = vec![1, -1];
                bsh.extend(std::iter::repeat(1).take(hw.len()));
                ret.add(&b.reshape(&bsh)?)
            }
        }
    }

    /// conv_transpose2d's strides: `s - 1` zeros after each spatial element, none after the
    /// last (reshape to (k, 1), pad to (k, s), reshape to k*s, shrink to k*s - (s-1)).
    fn spread(&self, stride: &[usize]) -> Result<Tensor> {
        if stride.iter().all(|&s| s <= 1) {
            return Ok(self.clone());
        }
        let xs = self.shape();
        let sp = &xs[2..];
        let mut s1: Vec<usize> = xs[..2].to_vec();
        s1.extend(sp.iter().flat_map(|&k| [k, 1]));
        let mut pad: Vec<Option<(usize, usize)>> = vec![None, None];
        pad.extend(stride.iter().flat_map(|&s| [None, Some((0, s - 1))]));
        let mut s2: Vec<usize> = xs[..2].to_vec();
        s2.extend(sp.iter().zip(stride).map(|(&k, &s)| k * s));
        let mut sh: Vec<Option<(usize, usize)>> = vec![None, None];
        sh.extend((s2[2..].iter().zip(stride)).map(|(&k, &s)| Some((0, k.saturating_sub(s - 1)))));
        self.reshape_sints(&to_sints(&s1)?)?
            .pad(&pad)?
            .reshape_sints(&to_sints(&s2)?)?
            .shrink(&sh)
    }

    /// tinygrad's `conv_transpose2d` with the default arguments.
    pub fn conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        self.conv_transpose2d_with(weight, bias, &ConvArgs::default())
    }

    /// tinygrad's `conv_transpose2d` (any number of spatial dims): `weight` is
    /// (cin, cout/groups, *kernel); the weight is regrouped, transposed and flipped, strides
    /// spread the input with zeros, and a conv2d with padding `(k-1)*d - p` (plus the output
    /// padding on the far side) finishes.
    pub fn conv_transpose2d_with(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        args: &ConvArgs,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        let groups = args.groups;
        ensure!(
            xs.len() == ws.len() && ws.len() >= 3 && groups > 0 && ws[0] == xs[1],
            InvalidArgument,
            "conv_transpose2d: Input Tensor shape {} does not match the shape of the weights {} \
             (weight is (cin, cout/groups, *kernel))",
            fmt_shape(&xs),
            fmt_shape(&ws)
        );
        ensure!(
            ws[0] % groups == 0,
            InvalidArgument,
            "conv_transpose2d: {} input channels do not split into {groups} groups",
            ws[0]
        );
        let hw = &ws[2..];
        let n = hw.len();
        let pair = |v: &[isize], what: &str, positive: bool| -> Result<Vec<usize>> {
            let what = format!("conv_transpose2d: {what}");
            make_pair(&sizes(v, positive, &what)?, n, &what)
        };
        let stride = pair(&args.stride, "stride", true)?;
        let dilation = pair(&args.dilation, "dilation", true)?;
        let padding = pair(&args.padding, "padding", false)?;
        let out_pad = pair(&args.output_padding, "output_padding", false)?;
        let flips: Vec<isize> = (3..=ws.len() as isize).collect();
        let w = weight
            .unflatten(0, &[groups as isize, -1])?
            .transpose(1, 2)?
            .flip(&flips)?
            .flatten(0, 1)?;
        let x = self.spread(&stride)?;
        let mut pads = Vec::with_capacity(2 * n);
        for j in (0..n).rev() {
            let base = ((hw[j] - 1) * dilation[j]) as isize - padding[j] as isize;
            pads.extend([base, base + out_pad[j] as isize]);
        }
        let conv = ConvArgs::default()
            .groups(groups)
            .dilation(dilation)
            .padding(pads);
        x.conv2d_with(&w, bias, &conv)
    }
}
