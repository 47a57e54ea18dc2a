//! Test helpers for the scheduler tests: `T`, a minimal stand-in for tinygrad 0.9.1's `Tensor`
//! that emits the same LazyBuffer op sequences as the Tensor methods do (broadcasting, dtype
//! promotion, `sub` as ADD of NEG, float `div` as MUL by RECIP, `exp` as EXP2 of `x*(1/ln2)`,
//! `mean` as SUM times 1/n, `softmax`, `layernorm`, `matmul`, `pad` with a value, basic
//! indexing, `cat`...), and `check_schedule`, which counts the kernels of a schedule like
//! tinygrad's test helper (LoadOps items filtered out unless asked).

#![allow(dead_code)]

use std::collections::HashSet;
use std::f64::consts::LN_2;

use rawgrad::device::{Buffer, BufferOptions};
use rawgrad::dtype::{
    dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype, ConstValue, DType,
};
use rawgrad::engine::schedule::{create_schedule_with_vars, ScheduleItem};
use rawgrad::lazy::{LazyBuffer, LbArg};
use rawgrad::ops::{verify_lazyop, BinaryOps, ConstArg, LoadOps, ReduceOps, TernaryOps, UnaryOps};
use rawgrad::shape::{Node, Sint};

pub const DEV: &str = "CLANG";

/// A tensor: one lazy buffer.
#[derive(Clone, Debug)]
pub struct T(pub LazyBuffer);

/// The right operand of a binary op: a tensor or a Python scalar.
pub enum Operand<'a> {
    T(&'a T),
    C(ConstValue),
}
impl<'a> From<&'a T> for Operand<'a> {
    fn from(t: &'a T) -> Self {
        Operand::T(t)
    }
}
impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::C(ConstValue::Float(v))
    }
}
impl From<i64> for Operand<'_> {
    fn from(v: i64) -> Self {
        Operand::C(ConstValue::Int(v as i128))
    }
}
impl From<bool> for Operand<'_> {
    fn from(v: bool) -> Self {
        Operand::C(ConstValue::Bool(v))
    }
}

/// One index of `T::getitem`.
#[derive(Clone, Copy, Debug)]
pub enum Idx {
    /// `x[i]` (negative counts from the end).
    I(i64),
    /// `x[a:b]` (Python slice bounds, step 1).
    S(Option<i64>, Option<i64>),
    /// `x[:]`.
    All,
    /// `x[None]`.
    New,
}

fn ns(xs: &[i64]) -> Vec<Sint> {
    xs.iter().map(|&x| Node::Num(x)).collect()
}

pub fn broadcast_shape(a: &[i64], b: &[i64]) -> Vec<i64> {
    let n = a.len().max(b.len());
    let pad = |s: &[i64]| -> Vec<i64> {
        let mut v = vec![1; n - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| if x == 0 || y == 0 { 0 } else { x.max(y) })
        .collect()
}

// ---- creation -------------------------------------------------------------------------------

impl T {
    /// `Tensor.empty(shape)`.
    pub fn empty(shape: &[i64]) -> T {
        T::empty_dt(shape, dtypes::float32)
    }
    pub fn empty_dt(shape: &[i64], dt: DType) -> T {
        T(
            LazyBuffer::loadop(LoadOps::EMPTY, &ns(shape), dt, DEV, LbArg::None, &[], false)
                .unwrap(),
        )
    }
    /// `Tensor.randn(shape).realize()`: a realized buffer.
    pub fn realized(shape: &[i64]) -> T {
        T::realized_dt(shape, dtypes::float32)
    }
    pub fn realized_dt(shape: &[i64], dt: DType) -> T {
        let n = shape.iter().product::<i64>() as usize;
        let buf = Buffer::new(DEV, n, dt, BufferOptions::default());
        T(LazyBuffer::from_buffer(buf, &ns(shape)).unwrap())
    }
    /// `Tensor([...])`: host data (a realized NPY buffer) copied to the device.
    pub fn data(shape: &[i64], dt: DType) -> T {
        let n = shape.iter().product::<i64>() as usize;
        let buf = Buffer::new("NPY", n, dt, BufferOptions::default());
        let npy = LazyBuffer::from_buffer(buf, &ns(shape)).unwrap();
        T(npy.copy_to_device(DEV, false).unwrap())
    }
    /// `Tensor(v, dtype=dt)`: a shape-() CONST.
    pub fn scalar(v: impl Into<ConstValue>, dt: DType) -> T {
        let c = ConstArg::Value(v.into().as_const(dt));
        T(LazyBuffer::new_const(c, dt, DEV, &[]).unwrap())
    }
    /// `Tensor.full(shape, v)`.
    pub fn full(shape: &[i64], v: impl Into<ConstValue>, dt: DType) -> T {
        let ones = vec![1; shape.len()];
        T::scalar(v, dt).reshape(&ones).expand(shape)
    }
    pub fn ones(shape: &[i64]) -> T {
        T::full(shape, 1.0, dtypes::float32)
    }
    pub fn zeros(shape: &[i64]) -> T {
        T::full(shape, 0.0, dtypes::float32)
    }
    /// `Tensor.eye(dim)`.
    pub fn eye(dim: i64) -> T {
        T::ones(&[dim, 1])
            .pad(&[None, Some((0, dim))], 0.0)
            .flatten()
            .shrink(&[Some((0, dim * dim))])
            .reshape(&[dim, dim])
    }

    pub fn lb(&self) -> &LazyBuffer {
        &self.0
    }
    pub fn shape(&self) -> Vec<i64> {
        self.0.shape().iter().map(|s| s.as_int().unwrap()).collect()
    }
    pub fn ndim(&self) -> usize {
        self.0.shape().len()
    }
    pub fn dtype(&self) -> DType {
        self.0.dtype()
    }
    fn dim(&self, d: isize) -> usize {
        if d < 0 {
            (self.ndim() as isize + d) as usize
        } else {
            d as usize
        }
    }
}

// ---- elementwise ----------------------------------------------------------------------------

impl T {
    fn e(&self, op: impl Into<rawgrad::ops::Op>, srcs: &[&T]) -> T {
        let lbs: Vec<&LazyBuffer> = srcs.iter().map(|t| &t.0).collect();
        T(self.0.e(op, &lbs).unwrap())
    }
    /// `Tensor._broadcasted(y, reverse, match_dtype)`.
    pub fn broadcasted<'a>(
        &self,
        y: impl Into<Operand<'a>>,
        reverse: bool,
        match_dtype: bool,
    ) -> (T, T) {
        let mut x = self.clone();
        let mut y = match y.into() {
            Operand::T(t) => t.clone(),
            Operand::C(v) => {
                let xd = x.dtype();
                let ydt = if xd.is_float() || (xd.is_int() && matches!(v, ConstValue::Int(_))) {
                    xd
                } else {
                    v.default_dtype()
                };
                T::scalar(v, ydt)
            }
        };
        if match_dtype && x.dtype() != y.dtype() {
            let out = least_upper_dtype(&[x.dtype(), y.dtype()]);
            x = x.cast(out);
            y = y.cast(out);
        }
        if reverse {
            std::mem::swap(&mut x, &mut y);
        }
        let out = broadcast_shape(&x.shape(), &y.shape());
        (x.broadcast_to(&out), y.broadcast_to(&out))
    }
    pub fn broadcast_to(&self, shape: &[i64]) -> T {
        if self.shape() == shape {
            return self.clone();
        }
        let mut padded = vec![1; shape.len() - self.ndim()];
        padded.extend(self.shape());
        T(self.reshape(&padded).0.expand(&ns(shape)).unwrap())
    }
    pub fn add<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        a.e(BinaryOps::ADD, &[&b])
    }
    pub fn radd<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, true, true);
        a.e(BinaryOps::ADD, &[&b])
    }
    pub fn sub<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        a.add(&b.neg())
    }
    pub fn rsub<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, true, true);
        a.add(&b.neg())
    }
    pub fn mul<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        a.e(BinaryOps::MUL, &[&b])
    }
    pub fn rmul<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, true, true);
        a.e(BinaryOps::MUL, &[&b])
    }
    /// `Tensor.div` (upcast): floats multiply by RECIP.
    pub fn div<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        let (a, b) = (
            a.cast(least_upper_float(a.dtype())),
            b.cast(least_upper_float(b.dtype())),
        );
        a.e(BinaryOps::MUL, &[&b.e(UnaryOps::RECIP, &[])])
    }
    pub fn neg(&self) -> T {
        if self.dtype() == dtypes::bool {
            return self.logical_not();
        }
        self.e(UnaryOps::NEG, &[])
    }
    pub fn logical_not(&self) -> T {
        let (a, b) = self.cast(dtypes::bool).broadcasted(true, false, true);
        a.e(BinaryOps::CMPNE, &[&b])
    }
    pub fn cast(&self, dt: DType) -> T {
        T(self.0.cast(dt, false).unwrap())
    }
    pub fn half(&self) -> T {
        self.cast(dtypes::float16)
    }
    pub fn float(&self) -> T {
        self.cast(dtypes::float32)
    }
    pub fn contiguous(&self) -> T {
        T(self.0.contiguous().unwrap())
    }
    /// `F.Exp`: EXP2 of `x * (1/ln2)`.
    fn exp_fn(&self) -> T {
        let c = T(self.0.const_like(1.0 / LN_2).unwrap());
        self.e(BinaryOps::MUL, &[&c]).e(UnaryOps::EXP2, &[])
    }
    pub fn exp(&self) -> T {
        self.cast(least_upper_float(self.dtype())).exp_fn()
    }
    pub fn exp2(&self) -> T {
        self.mul(LN_2).exp_fn()
    }
    pub fn log(&self) -> T {
        let x = self.cast(least_upper_float(self.dtype()));
        let c = T(x.0.const_like(LN_2).unwrap());
        x.e(UnaryOps::LOG2, &[]).e(BinaryOps::MUL, &[&c])
    }
    pub fn log2(&self) -> T {
        self.log().div(LN_2)
    }
    pub fn sqrt(&self) -> T {
        self.cast(least_upper_float(self.dtype()))
            .e(UnaryOps::SQRT, &[])
    }
    pub fn reciprocal(&self) -> T {
        self.cast(least_upper_float(self.dtype()))
            .e(UnaryOps::RECIP, &[])
    }
    pub fn rsqrt(&self) -> T {
        self.reciprocal().sqrt()
    }
    pub fn relu(&self) -> T {
        let z = T(self.0.const_like(0i64).unwrap());
        self.e(BinaryOps::MAX, &[&z])
    }
    pub fn square(&self) -> T {
        self.mul(self)
    }
    /// `self.relu() - alpha*(1-self.exp()).relu()`.
    pub fn elu(&self) -> T {
        let inner = self.exp().rsub(1.0).relu().rmul(1.0);
        self.relu().sub(&inner)
    }
    /// `F.Sign`.
    pub fn sign(&self) -> T {
        let c = |v: f64| T(self.0.const_like(v).unwrap());
        let lt = self.e(BinaryOps::CMPLT, &[&c(0.0)]);
        let inner = lt.e(TernaryOps::WHERE, &[&c(-1.0), &c(1.0)]);
        self.e(BinaryOps::CMPNE, &[&c(0.0)])
            .e(TernaryOps::WHERE, &[&inner, &c(0.0)])
    }
    pub fn abs(&self) -> T {
        self.mul(&self.sign())
    }
    pub fn lt<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        a.e(BinaryOps::CMPLT, &[&b])
    }
    pub fn ne<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        let (a, b) = self.broadcasted(y, false, true);
        a.e(BinaryOps::CMPNE, &[&b])
    }
    pub fn eq<'a>(&self, y: impl Into<Operand<'a>>) -> T {
        self.ne(y).logical_not()
    }
    /// `cond.where(x, y)`.
    pub fn where_<'a, 'b>(&self, x: impl Into<Operand<'a>>, y: impl Into<Operand<'b>>) -> T {
        let (x, y) = (x.into(), y.into());
        let (x, y) = match (x, y) {
            (Operand::T(xt), y) => {
                let (a, b) = xt.broadcasted(y, false, true);
                (a, b)
            }
            (x, Operand::T(yt)) => {
                let (b, a) = yt.broadcasted(x, false, true);
                (a, b)
            }
            (Operand::C(xv), Operand::C(yv)) => {
                let (c, x) = self.broadcasted(Operand::C(xv), false, false);
                let (c, y) = c.broadcasted(Operand::C(yv), false, false);
                let (x, y) = x.broadcasted(&y, false, true);
                return c.cast(dtypes::bool).e(TernaryOps::WHERE, &[&x, &y]);
            }
        };
        let (c, x) = self.broadcasted(&x, false, false);
        let (c, y) = c.broadcasted(&y, false, false);
        let (x, y) = x.broadcasted(&y, false, true);
        c.cast(dtypes::bool).e(TernaryOps::WHERE, &[&x, &y])
    }
    /// `self ** x` for a constant `x` (the simple pow identities of 0.9.1).
    pub fn pow_c(&self, x: f64) -> T {
        if x < 0.0 {
            return self.reciprocal().pow_c(-x);
        }
        if x == 0.0 {
            return self.mul(0i64).radd(1i64);
        }
        if (x - 0.5).trunc() + 0.5 == x {
            return self.pow_c((x - 0.5).trunc()).mul(&self.sqrt());
        }
        if x.trunc() == x {
            let sq = self.pow_c((x / 2.0).floor()).square();
            return if x % 2.0 == 0.0 {
                sq.mul(1i64)
            } else {
                sq.mul(self)
            };
        }
        panic!("pow_c: non-integer exponent {x} is not needed by these tests")
    }
    /// `x ** self` for a positive constant `x`.
    pub fn rpow_c(&self, x: f64) -> T {
        self.mul(x.ln()).exp()
    }
}

// ---- reductions -----------------------------------------------------------------------------

impl T {
    fn axes(&self, axis: Option<&[isize]>) -> Vec<usize> {
        match axis {
            None => (0..self.ndim()).collect(),
            Some(a) => a.iter().map(|&d| self.dim(d)).collect(),
        }
    }
    fn reduce(&self, op: ReduceOps, axis: Option<&[isize]>, keepdim: bool) -> T {
        let ax = self.axes(axis);
        let ret = T(self.0.r(op, &ax).unwrap());
        if keepdim {
            return ret;
        }
        let shape: Vec<i64> = self
            .shape()
            .iter()
            .enumerate()
            .filter(|(i, _)| !ax.contains(i))
            .map(|(_, &s)| s)
            .collect();
        ret.reshape(&shape)
    }
    /// `Tensor.sum(axis, keepdim, acc_dtype)`.
    pub fn sum_acc(&self, axis: Option<&[isize]>, keepdim: bool, acc: Option<DType>) -> T {
        let acc_dt = acc.unwrap_or_else(|| sum_acc_dtype(self.dtype()));
        let ret = self.cast(acc_dt).reduce(ReduceOps::SUM, axis, keepdim);
        let half = [dtypes::float16, dtypes::bfloat16].contains(&self.dtype());
        if acc.is_none() && half {
            ret.cast(self.dtype())
        } else {
            ret
        }
    }
    pub fn sum(&self, axis: Option<&[isize]>, keepdim: bool) -> T {
        self.sum_acc(axis, keepdim, None)
    }
    pub fn max(&self, axis: Option<&[isize]>, keepdim: bool) -> T {
        self.reduce(ReduceOps::MAX, axis, keepdim)
    }
    fn reduced_count(&self, axis: Option<&[isize]>) -> i64 {
        let ax = self.axes(axis);
        let shape = self.shape();
        let mut n = 1;
        for (i, &s) in shape.iter().enumerate() {
            if ax.contains(&i) && s != 1 {
                n *= s;
            }
        }
        n
    }
    /// `Tensor.mean`: the sum divided by the reduced count.
    pub fn mean(&self, axis: Option<&[isize]>, keepdim: bool) -> T {
        let out_dt = if self.dtype().is_float() {
            self.dtype()
        } else {
            dtypes::float32
        };
        let numerator = self.cast(sum_acc_dtype(self.dtype())).sum(axis, keepdim);
        numerator.div(self.reduced_count(axis)).cast(out_dt)
    }
    pub fn var(&self, axis: Option<&[isize]>, keepdim: bool) -> T {
        let squares = self.sub(&self.mean(axis, true)).square();
        let n = self.reduced_count(axis);
        squares.sum(axis, keepdim).div((n - 1).max(0))
    }
    pub fn std(&self, axis: Option<&[isize]>, keepdim: bool) -> T {
        self.var(axis, keepdim).sqrt()
    }
    pub fn softmax(&self, axis: isize) -> T {
        let m = self.sub(&self.max(Some(&[axis]), true));
        let e = m.exp();
        let ss = e.sum(Some(&[axis]), true);
        e.div(&ss)
    }
    pub fn layernorm(&self, axis: &[isize], eps: f64) -> T {
        let y = self.sub(&self.mean(Some(axis), true));
        y.mul(&y.mul(&y).mean(Some(axis), true).add(eps).rsqrt())
    }
    /// `Tensor.dot` / `matmul`.
    pub fn matmul(&self, w: &T, acc: Option<DType>) -> T {
        let (n1, n2) = (self.ndim(), w.ndim());
        let k = n1.min(n2).saturating_sub(1).min(1);
        let xs = self.shape();
        let mut xshape = xs[..n1 - 1].to_vec();
        xshape.extend(std::iter::repeat(1).take(k));
        xshape.push(xs[n1 - 1]);
        let x = self.reshape(&xshape);
        let ws = w.shape();
        let last = n2.min(2);
        let mut wshape = ws[..n2 - last].to_vec();
        wshape.extend(std::iter::repeat(1).take(k));
        wshape.extend_from_slice(&ws[n2 - last..]);
        let w = w.reshape(&wshape).transpose(-1, -(last as isize));
        let out_dt = acc.unwrap_or_else(|| least_upper_dtype(&[x.dtype(), w.dtype()]));
        x.mul(&w).sum_acc(Some(&[-1]), false, acc).cast(out_dt)
    }
    /// `Tensor.scaled_dot_product_attention` with a float mask (no dropout).
    pub fn sdpa(&self, key: &T, value: &T, mask: Option<&T>, is_causal: bool) -> T {
        let s = self.shape();
        let mut mask = mask.cloned();
        if is_causal {
            let (r, c) = (s[s.len() - 2], key.shape()[key.ndim() - 2]);
            mask = Some(T::ones(&[r, c]).tril(0).cast(dtypes::bool));
        }
        if let Some(m) = &mask {
            if m.dtype() == dtypes::bool {
                mask = Some(m.eq(false).where_(f64::NEG_INFINITY, 0.0));
            }
        }
        let acc = least_upper_dtype(&[self.dtype(), key.dtype(), dtypes::float32]);
        let qk = self
            .matmul(&key.transpose(-2, -1), Some(acc))
            .div((s[s.len() - 1] as f64).sqrt());
        let qk = match &mask {
            Some(m) => qk.add(m),
            None => qk,
        };
        qk.softmax(-1).cast(self.dtype()).matmul(value, None)
    }
    /// `Tensor._tri` (r, c, diagonal) with `Tensor.ones`.
    fn tri(r: i64, c: i64, diagonal: i64) -> T {
        let s = r + c - 1;
        let t = T::ones(&[s, s])
            .pad(&[None, Some((0, s))], 0.0)
            .flatten()
            .shrink(&[Some((0, s * (2 * s - 1)))])
            .reshape(&[s, 2 * s - 1])
            .shrink(&[None, Some((0, s))]);
        if diagonal <= 0 {
            t.getitem(&[
                Idx::S(None, Some(r)),
                Idx::S(Some(-diagonal), Some(c - diagonal)),
            ])
        } else {
            t.getitem(&[
                Idx::S(Some(diagonal), Some(r + diagonal)),
                Idx::S(None, Some(c)),
            ])
        }
    }
    pub fn tril(&self, diagonal: i64) -> T {
        let s = self.shape();
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        T::tri(r, c, diagonal + 1)
            .cast(dtypes::bool)
            .where_(0.0, self)
            .cast(self.dtype())
    }
}

// ---- movement -------------------------------------------------------------------------------

impl T {
    pub fn reshape(&self, shape: &[i64]) -> T {
        let total: i64 = self.shape().iter().product();
        let known: i64 = shape.iter().filter(|&&s| s != -1).product();
        let shape: Vec<i64> = shape
            .iter()
            .map(|&s| if s == -1 { total / known } else { s })
            .collect();
        if shape == self.shape() {
            return self.clone();
        }
        T(self.0.reshape(&ns(&shape)).unwrap())
    }
    pub fn expand(&self, shape: &[i64]) -> T {
        let cur = self.shape();
        let off = shape.len() - cur.len();
        let shape: Vec<i64> = shape
            .iter()
            .enumerate()
            .map(|(i, &s)| if s == -1 { cur[i - off] } else { s })
            .collect();
        self.broadcast_to(&shape)
    }
    pub fn permute(&self, order: &[isize]) -> T {
        let order: Vec<usize> = order.iter().map(|&d| self.dim(d)).collect();
        T(self.0.permute(&order).unwrap())
    }
    pub fn transpose(&self, d0: isize, d1: isize) -> T {
        let mut order: Vec<isize> = (0..self.ndim() as isize).collect();
        order.swap(self.dim(d0), self.dim(d1));
        self.permute(&order)
    }
    #[allow(non_snake_case)]
    pub fn T(&self) -> T {
        self.transpose(1, 0)
    }
    pub fn flatten(&self) -> T {
        self.reshape(&[self.shape().iter().product()])
    }
    pub fn unsqueeze(&self, dim: isize) -> T {
        let d = if dim < 0 {
            (self.ndim() as isize + 1 + dim) as usize
        } else {
            dim as usize
        };
        let mut shape = self.shape();
        shape.insert(d, 1);
        self.reshape(&shape)
    }
    pub fn shrink(&self, arg: &[Option<(i64, i64)>]) -> T {
        let shape = self.shape();
        let full: Vec<(i64, i64)> = arg
            .iter()
            .zip(&shape)
            .map(|(a, &s)| a.unwrap_or((0, s)))
            .collect();
        if full
            .iter()
            .zip(&shape)
            .all(|(&(b, e), &s)| b == 0 && e == s)
        {
            return self.clone();
        }
        let arg: Vec<(Sint, Sint)> = full
            .iter()
            .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
            .collect();
        T(self.0.shrink(&arg).unwrap())
    }
    /// `Tensor.pad(arg, value)`.
    pub fn pad(&self, arg: &[Option<(i64, i64)>], value: f64) -> T {
        if arg.iter().all(|a| a.map_or(true, |p| p == (0, 0))) {
            return self.clone();
        }
        let narg: Vec<(Sint, Sint)> = arg
            .iter()
            .map(|a| {
                let (b, e) = a.unwrap_or((0, 0));
                (Node::Num(b), Node::Num(e))
            })
            .collect();
        let ret = T(self.0.pad(&narg).unwrap());
        if value == 0.0 {
            return ret;
        }
        let ones = T::full(&self.shape(), 1i64, self.dtype());
        let padded_ones = T(ones.0.pad(&narg).unwrap());
        ret.add(&padded_ones.where_(0i64, value))
    }
    /// Basic indexing (ints, slices, `None`) as 0.9.1's `__getitem__` does it: shrink, then a
    /// reshape that drops int dims and inserts `None` dims.
    pub fn getitem(&self, idx: &[Idx]) -> T {
        let shape = self.shape();
        let nreal = idx.iter().filter(|i| !matches!(i, Idx::New)).count();
        let mut full: Vec<Idx> = idx.to_vec();
        full.extend(std::iter::repeat(Idx::All).take(shape.len() - nreal));
        let real = full.iter().filter(|i| !matches!(i, Idx::New));
        let mut slc = Vec::new();
        for (i, &s) in real.zip(&shape) {
            let norm = |v: i64| if v < 0 { (v + s).max(0) } else { v.min(s) };
            slc.push(Some(match *i {
                Idx::I(v) => (norm(v), norm(v) + 1),
                Idx::S(b, e) => {
                    let b = norm(b.unwrap_or(0));
                    (b, norm(e.unwrap_or(s)).max(b))
                }
                Idx::All | Idx::New => (0, s),
            }));
        }
        let ret = self.shrink(&slc);
        let mut dims = ret.shape().into_iter();
        let mut new_shape = Vec::new();
        for i in &full {
            match i {
                Idx::New => new_shape.push(1),
                Idx::I(_) => {
                    dims.next();
                }
                _ => new_shape.extend(dims.next()),
            }
        }
        ret.reshape(&new_shape)
    }
    pub fn cat(&self, others: &[&T], dim: isize) -> T {
        let dim = self.dim(dim);
        let all: Vec<&T> = std::iter::once(self)
            .chain(others.iter().copied())
            .collect();
        let sizes: Vec<i64> = all.iter().map(|t| t.shape()[dim]).collect();
        let total: i64 = sizes.iter().sum();
        let mut acc = 0;
        let mut parts = Vec::new();
        for (t, &d) in all.iter().zip(&sizes) {
            let mut arg = vec![None; self.ndim()];
            arg[dim] = Some((acc, total - acc - d));
            parts.push(t.pad(&arg, 0.0));
            acc += d;
        }
        let mut out = parts[0].clone();
        for p in &parts[1..] {
            out = out.add(p);
        }
        out
    }
    pub fn stack(&self, others: &[&T], dim: isize) -> T {
        let un: Vec<T> = others.iter().map(|t| t.unsqueeze(dim)).collect();
        let refs: Vec<&T> = un.iter().collect();
        self.unsqueeze(dim).cat(&refs, dim)
    }
    pub fn repeat(&self, repeats: &[i64]) -> T {
        let mut base = vec![1; repeats.len() - self.ndim()];
        base.extend(self.shape());
        let new_shape: Vec<i64> = base.iter().flat_map(|&b| [1, b]).collect();
        let expand: Vec<i64> = repeats
            .iter()
            .zip(&base)
            .flat_map(|(&r, &b)| [r, b])
            .collect();
        let fin: Vec<i64> = repeats.iter().zip(&base).map(|(&r, &b)| r * b).collect();
        self.reshape(&new_shape).expand(&expand).reshape(&fin)
    }
    /// `Tensor.assign(x)` on a realized tensor.
    pub fn assign(&self, x: &T) -> T {
        T(self.0.assign(&x.0).unwrap())
    }
}

// ---- scheduling -----------------------------------------------------------------------------

/// `Tensor.schedule()` of `t` with a fresh `seen`: marks everything it schedules realized.
pub fn prerealize(t: &T) -> Vec<ScheduleItem> {
    let mut seen = HashSet::new();
    create_schedule_with_vars(std::slice::from_ref(&t.0), &mut seen)
        .unwrap()
        .0
}

/// tinygrad's `check_schedule`: schedule `outs` (after prerealizing `pre`), check every kernel
/// AST, and return the kernels (all items with `filter_loadops = false`).
pub fn check_schedule(outs: &[&T], pre: &[&T], filter_loadops: bool) -> Vec<ScheduleItem> {
    for p in pre {
        prerealize(p);
    }
    let lbs: Vec<LazyBuffer> = outs.iter().map(|t| t.0.clone()).collect();
    let mut seen = HashSet::new();
    let (sched, _) = create_schedule_with_vars(&lbs, &mut seen).unwrap();
    for si in &sched {
        if si.is_kernel() {
            verify_lazyop(&si.ast).unwrap_or_else(|e| panic!("{e}\n{:?}", si.ast));
        }
    }
    sched
        .into_iter()
        .filter(|si| !filter_loadops || si.is_kernel())
        .collect()
}

/// The number of kernels (non-LoadOps items) scheduled for `outs`.
pub fn kernels(outs: &[&T]) -> usize {
    check_schedule(outs, &[], true).len()
}
