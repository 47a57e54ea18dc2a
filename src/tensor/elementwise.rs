//! Elementwise ops (tinygrad 0.9.1): broadcasting with dtype promotion (`_broadcasted`), the
//! binary ops and comparisons, `where`, `pow` with its constant-exponent identities,
//! `maximum`/`minimum`, and the unary math functions.
//!
//! Scalars are typed as tinygrad types Python numbers: a float operand of a float tensor takes
//! the tensor's dtype, an integer operand of an integer tensor too, anything else its own
//! default dtype (`dtypes.from_py`); then both sides are promoted with `least_upper_dtype`.
//!
//! Not guaranteed: integer division is C-style truncation (0.9.1's IDIV), available through
//! [`Tensor::idiv`]; `/` always divides in floating point. Bitwise and/or exist only for bools
//! (0.9.1 has no AND/OR ops; integer tensors get an error).

use std::f64::consts::{LN_2, PI};

use super::movement::broadcast_shape;
use super::{function as F, Tensor};
use crate::dtype::{dtypes, least_upper_dtype, least_upper_float, ConstValue};
use crate::{ensure, Result};

/// The right-hand side of a binary op: a tensor or a Python-like number.
#[derive(Clone, Debug)]
pub enum Operand<'a> {
    Ref(&'a Tensor),
    Owned(Tensor),
    Const(ConstValue),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Ref(t)
    }
}
impl From<Tensor> for Operand<'_> {
    fn from(t: Tensor) -> Self {
        Operand::Owned(t)
    }
}
impl From<ConstValue> for Operand<'_> {
    fn from(c: ConstValue) -> Self {
        Operand::Const(c)
    }
}
macro_rules! operand_from {
    ($($t:ty => $conv:expr),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self {
                Operand::Const($conv(v))
            }
        }
    )*};
}
operand_from!(
    f64 => ConstValue::Float,
    f32 => |v: f32| ConstValue::Float(v as f64),
    i64 => |v: i64| ConstValue::Int(v as i128),
    i32 => |v: i32| ConstValue::Int(v as i128),
    u32 => |v: u32| ConstValue::Int(v as i128),
    u64 => |v: u64| ConstValue::Int(v as i128),
    usize => |v: usize| ConstValue::Int(v as i128),
    bool => ConstValue::Bool
);

impl Operand<'_> {
    fn tensor(&self) -> Option<&Tensor> {
        match self {
            Operand::Ref(t) => Some(t),
            Operand::Owned(t) => Some(t),
            Operand::Const(_) => None,
        }
    }
}

/// Python's unary minus on a number (`-True == -1`).
fn neg_const(c: ConstValue) -> ConstValue {
    match c {
        ConstValue::Bool(b) => ConstValue::Int(-(b as i128)),
        ConstValue::Int(i) => ConstValue::Int(-i),
        ConstValue::Float(f) => ConstValue::Float(-f),
    }
}

impl Tensor {
    /// An operand as a tensor next to `self` (tinygrad's scalar typing in `_broadcasted`).
    fn operand_tensor(&self, y: Operand<'_>) -> Result<Tensor> {
        Ok(match y {
            Operand::Ref(t) => t.clone(),
            Operand::Owned(t) => t,
            Operand::Const(c) => {
                let xd = self.dtype();
                let int_like = matches!(c, ConstValue::Int(_) | ConstValue::Bool(_));
                let y_dtype = if xd.is_float() || (xd.is_int() && int_like) {
                    xd
                } else {
                    c.default_dtype()
                };
                let t = Tensor::scalar_on(c.as_const(y_dtype), y_dtype, &self.device())?;
                t.set_requires_grad(Some(false));
                t
            }
        })
    }

    /// tinygrad's `_broadcasted`: both operands as tensors of one dtype (unless `match_dtype`
    /// is false) and one broadcast shape; `reverse` swaps them.
    pub(crate) fn broadcasted<'a>(
        &self,
        y: impl Into<Operand<'a>>,
        reverse: bool,
        match_dtype: bool,
    ) -> Result<(Tensor, Tensor)> {
        let mut x = self.clone();
        let mut y = self.operand_tensor(y.into())?;
        if match_dtype && x.dtype() != y.dtype() {
            let out = least_upper_dtype(&[x.dtype(), y.dtype()]);
            x = x.cast(out)?;
            y = y.cast(out)?;
        }
        if reverse {
            std::mem::swap(&mut x, &mut y);
        }
        let out_shape = broadcast_shape(&x.shape(), &y.shape());
        Ok((x.broadcast_to(&out_shape)?, y.broadcast_to(&out_shape)?))
    }

    // ---- binary ----------------------------------------------------------------------------

    /// `self + y`.
    pub fn add<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        F::add(&a, &b)
    }
    /// `y + self`.
    pub fn radd<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, true, true)?;
        F::add(&a, &b)
    }
    /// `self - y` (an add of the negation).
    pub fn sub<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        a.add(&b.neg()?)
    }
    /// `y - self`.
    pub fn rsub<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, true, true)?;
        a.add(&b.neg()?)
    }
    /// `self * y`.
    pub fn mul<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        F::mul(&a, &b)
    }
    /// `y * self`.
    pub fn rmul<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, true, true)?;
        F::mul(&a, &b)
    }
    fn div_impl(&self, y: Operand<'_>, reverse: bool, upcast: bool) -> Result<Tensor> {
        let (mut n, mut d) = self.broadcasted(y, reverse, true)?;
        if upcast {
            n = n.cast(least_upper_float(n.dtype()))?;
            d = d.cast(least_upper_float(d.dtype()))?;
        }
        F::div(&n, &d)
    }
    /// True division `self / y` (integers are divided as floats).
    pub fn div<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.div_impl(y.into(), false, true)
    }
    /// `y / self`.
    pub fn rdiv<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.div_impl(y.into(), true, true)
    }
    /// tinygrad's `div(y, upcast=False)`: integer tensors divide with C truncation (IDIV),
    /// floats as usual.
    pub fn idiv<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.div_impl(y.into(), false, false)
    }
    /// Bitwise xor of integer or bool tensors.
    pub fn xor<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        ensure!(
            !a.dtype().is_float(),
            InvalidArgument,
            "xor: not supported for {:?}",
            a.dtype()
        );
        F::xor(&a, &b)
    }
    /// Logical and of bool tensors (a bool MUL; 0.9.1 has no AND op for integers).
    pub fn bitwise_and<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        ensure!(
            a.dtype().is_bool(),
            InvalidArgument,
            "bitwise_and: only bool tensors are supported (0.9.1 has no AND op), got {:?}",
            a.dtype()
        );
        F::mul(&a, &b)
    }
    /// Logical or of bool tensors (a bool ADD; 0.9.1 has no OR op for integers).
    pub fn bitwise_or<'a>(&self, y: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(y, false, true)?;
        ensure!(
            a.dtype().is_bool(),
            InvalidArgument,
            "bitwise_or: only bool tensors are supported (0.9.1 has no OR op), got {:?}",
            a.dtype()
        );
        F::add(&a, &b)
    }
    /// `self << x` for unsigned tensors (a multiply by 2**x).
    pub fn lshift(&self, x: u32) -> Result<Tensor> {
        self.check_shift("lshift", x)?;
        self.mul(ConstValue::Int(1i128 << x))
    }
    /// `self >> x` for unsigned tensors (an integer divide by 2**x).
    pub fn rshift(&self, x: u32) -> Result<Tensor> {
        self.check_shift("rshift", x)?;
        self.idiv(ConstValue::Int(1i128 << x))
    }
    fn check_shift(&self, what: &str, x: u32) -> Result<()> {
        ensure!(
            self.dtype().is_unsigned() && x < 64,
            InvalidArgument,
            "{what}: not supported self.dtype={:?} x={x}",
            self.dtype()
        );
        Ok(())
    }

    /// tinygrad's `_to_const_val`: an unrealized unmasked constant operand that broadcasts to
    /// this shape (and needs no gradient) as its number.
    fn to_const_val<'a>(&self, x: Operand<'a>) -> Result<Operand<'a>> {
        let Some(t) = x.tensor() else { return Ok(x) };
        let lb = t.lazydata();
        if !lb.is_unrealized_unmasked_const() || t.requires_grad() == Some(true) {
            return Ok(x);
        }
        let Some(v) = lb.const_value() else {
            return Ok(x);
        };
        if broadcast_shape(&self.shape(), &t.shape()) != self.shape() {
            return Ok(x);
        }
        Ok(Operand::Const(v))
    }

    /// `self ** x`.
    pub fn pow<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.pow_impl(x.into(), false)
    }
    /// `x ** self`.
    pub fn rpow<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.pow_impl(x.into(), true)
    }

    fn pow_impl(&self, x: Operand<'_>, reverse: bool) -> Result<Tensor> {
        let x = self.to_const_val(x)?;
        if let Operand::Const(c) = x {
            let v = c.as_f64();
            ensure!(
                v.is_finite(),
                InvalidArgument,
                "pow: a constant exponent must be finite, got {c}"
            );
            if !reverse {
                if let Some(r) = self.pow_const(c)? {
                    return Ok(r);
                }
            } else if v > 0.0 {
                return self.mul(v.ln())?.exp();
            }
        }
        let (base, exponent) = self.broadcasted(x, reverse, true)?;
        let ret = base.abs()?.log()?.mul(&exponent)?.exp()?;
        let negative_base = base.lt(0i64)?.detach().where_(1i64, 0i64)?;
        let correct_sign = negative_base
            .mul(&exponent.mul(PI)?.cos()?.sub(1i64)?)?
            .radd(1i64)?;
        let not_int = exponent.ne(&exponent.trunc()?)?;
        let inject_nan = negative_base
            .mul(&not_int)?
            .detach()
            .where_(f64::NAN, 1i64)?;
        let zero_zero = base.eq(0i64)?.mul(&exponent.eq(0i64)?)?.detach();
        zero_zero.where_(1i64, &ret.mul(&correct_sign)?.mul(&inject_nan)?)
    }

    /// The constant-exponent identities of `pow` (`None`: use the general formula).
    fn pow_const(&self, c: ConstValue) -> Result<Option<Tensor>> {
        let v = c.as_f64();
        if v < 0.0 {
            return self.reciprocal()?.pow(neg_const(c)).map(Some);
        }
        if v == 0.0 {
            return self.mul(0i64)?.radd(1i64).map(Some);
        }
        // Above 2**52 every float is an integer (and `t + 0.5` would round back to `v`).
        let t = (v - 0.5).trunc();
        if v < 4503599627370496.0 && t + 0.5 == v {
            let p = self.pow(ConstValue::Int(t as i128))?;
            return p.mul(&self.sqrt()?).map(Some);
        }
        if v.trunc() != v {
            return Ok(None);
        }
        let half = match c {
            ConstValue::Int(i) => ConstValue::Int(i.div_euclid(2)),
            _ => ConstValue::Float((v / 2.0).floor()),
        };
        let sq = self.pow(half)?.square()?;
        if v % 2.0 == 0.0 {
            sq.mul(1i64).map(Some)
        } else {
            sq.mul(self).map(Some)
        }
    }

    /// Elementwise maximum (ties give the average, so gradients split evenly).
    pub fn maximum<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        let x = x.into();
        let avg = match &x {
            Operand::Const(c) => self.mul(0.5)?.add(ConstValue::Float(c.as_f64() * 0.5))?,
            other => {
                let t = self.operand_tensor(other.clone())?;
                self.mul(0.5)?.add(&t.mul(0.5)?)?
            }
        };
        let tie = self
            .eq(x.clone())?
            .detach()
            .where_(&avg.cast(self.dtype())?, self)?;
        self.lt(x.clone())?.detach().where_(x, &tie)
    }

    /// Elementwise minimum: `-max(-self, -x)`.
    pub fn minimum<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        let negx: Operand<'_> = match x.into() {
            Operand::Const(c) => Operand::Const(neg_const(c)),
            Operand::Ref(t) => Operand::Owned(t.neg()?),
            Operand::Owned(t) => Operand::Owned(t.neg()?),
        };
        self.neg()?.maximum(negx)?.neg()
    }

    /// Clamp into `[min, max]`.
    pub fn clip<'a, 'b>(
        &self,
        min: impl Into<Operand<'a>>,
        max: impl Into<Operand<'b>>,
    ) -> Result<Tensor> {
        self.maximum(min)?.minimum(max)
    }

    /// tinygrad's `where`: `x` where this (cast to bool) is true, else `y`.
    pub fn where_<'a, 'b>(
        &self,
        x: impl Into<Operand<'a>>,
        y: impl Into<Operand<'b>>,
    ) -> Result<Tensor> {
        let (mut x, mut y): (Operand<'_>, Operand<'_>) = (x.into(), y.into());
        if let Some(xt) = x.tensor() {
            let (a, b) = xt.broadcasted(y, false, true)?;
            (x, y) = (Operand::Owned(a), Operand::Owned(b));
        } else if let Some(yt) = y.tensor() {
            let (b, a) = yt.broadcasted(x, false, true)?;
            (x, y) = (Operand::Owned(a), Operand::Owned(b));
        }
        let (cond, xt) = self.broadcasted(x, false, false)?;
        let (cond, yt) = cond.broadcasted(y, false, false)?;
        let (xt, yt) = xt.broadcasted(&yt, false, true)?;
        F::where_(&cond.cast(dtypes::bool)?, &xt, &yt)
    }

    /// `mask.where(value, self)`.
    pub fn masked_fill<'a>(&self, mask: &Tensor, value: impl Into<Operand<'a>>) -> Result<Tensor> {
        mask.where_(value, self)
    }

    // ---- comparisons -----------------------------------------------------------------------

    /// `self < x` (bool).
    pub fn lt<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(x, false, true)?;
        F::less(&a, &b)
    }
    /// `self > x` (bool).
    pub fn gt<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(x, true, true)?;
        F::less(&a, &b)
    }
    /// `self >= x` (bool): not `self < x`.
    pub fn ge<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.lt(x)?.logical_not()
    }
    /// `self <= x` (bool): not `self > x`.
    pub fn le<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.gt(x)?.logical_not()
    }
    /// `self != x` (bool).
    pub fn ne<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.broadcasted(x, false, true)?;
        F::neq(&a, &b)
    }
    /// `self == x` (bool): not `self != x`.
    pub fn eq<'a>(&self, x: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.ne(x)?.logical_not()
    }
    /// Logical not (`!= True` after a cast to bool).
    pub fn logical_not(&self) -> Result<Tensor> {
        let (a, b) = self.cast(dtypes::bool)?.broadcasted(true, false, true)?;
        F::neq(&a, &b)
    }

    // ---- unary -----------------------------------------------------------------------------

    /// `-self` (logical not for bools).
    pub fn neg(&self) -> Result<Tensor> {
        if self.dtype().is_bool() {
            return self.logical_not();
        }
        F::neg(self)
    }
    fn float_in(&self) -> Result<Tensor> {
        self.cast(least_upper_float(self.dtype()))
    }
    /// Natural logarithm.
    pub fn log(&self) -> Result<Tensor> {
        F::log(&self.float_in()?)
    }
    /// Base-2 logarithm: `log(x) / ln 2`.
    pub fn log2(&self) -> Result<Tensor> {
        self.log()?.div(LN_2)
    }
    /// `e ** x`.
    pub fn exp(&self) -> Result<Tensor> {
        F::exp(&self.float_in()?)
    }
    /// `2 ** x`: `exp(x * ln 2)`.
    pub fn exp2(&self) -> Result<Tensor> {
        F::exp(&self.mul(LN_2)?)
    }
    /// `max(x, 0)`.
    pub fn relu(&self) -> Result<Tensor> {
        F::relu(self)
    }
    /// `1 / (1 + e ** -x)`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        F::sigmoid(&self.float_in()?)
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        F::sqrt(&self.float_in()?)
    }
    /// `1 / sqrt(x)` (reciprocal, then sqrt).
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.reciprocal()?.sqrt()
    }
    pub fn sin(&self) -> Result<Tensor> {
        F::sin(&self.float_in()?)
    }
    /// `sin(pi/2 - x)`.
    pub fn cos(&self) -> Result<Tensor> {
        self.rsub(PI / 2.0)?.sin()
    }
    /// `sin(x) / cos(x)`.
    pub fn tan(&self) -> Result<Tensor> {
        self.sin()?.div(&self.cos()?)
    }
    /// Round toward zero (through int32, as tinygrad).
    pub fn trunc(&self) -> Result<Tensor> {
        self.cast(dtypes::int32)?.cast(self.dtype())
    }
    /// Round toward +inf.
    pub fn ceil(&self) -> Result<Tensor> {
        let b = self.trunc()?;
        self.gt(&b)?.where_(&b.add(1i64)?, &b)
    }
    /// Round toward -inf.
    pub fn floor(&self) -> Result<Tensor> {
        let b = self.trunc()?;
        self.lt(&b)?.where_(&b.sub(1i64)?, &b)
    }
    /// Round half to even.
    pub fn round(&self) -> Result<Tensor> {
        let b = self.cast(dtypes::int32)?.div(2.0)?;
        let even = b.cast(dtypes::int32)?.eq(&b)?;
        let cond = self.gt(0i64)?.eq(&even)?;
        cond.where_(&self.sub(0.5)?.ceil()?, &self.add(0.5)?.floor()?)
    }
    /// `self + (end - self) * weight`.
    pub fn lerp<'a>(&self, end: &Tensor, weight: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.add(&end.sub(self)?.mul(weight)?)
    }
    /// `self * self`.
    pub fn square(&self) -> Result<Tensor> {
        self.mul(self)
    }
    /// -1, 0 or 1.
    pub fn sign(&self) -> Result<Tensor> {
        F::sign(self)
    }
    /// `self * sign(self)`.
    pub fn abs(&self) -> Result<Tensor> {
        self.mul(&self.sign()?)
    }
    /// `1 / x`.
    pub fn reciprocal(&self) -> Result<Tensor> {
        F::reciprocal(&self.float_in()?)
    }
}

/// Arithmetic operators on tensors and numbers (references or owned; `f64` and `i64` scalars
/// on either side, so float and integer literals both work). They return `Result<Tensor>` (an op can fail on bad shapes or dtypes), so
/// write `(&a + &b)?`, `(&a * 2)?`, `(1.0 - &a)?`.
macro_rules! binop_trait {
    ($tr:ident, $m:ident, $call:ident, $rcall:ident) => {
        impl<'a, 'b> std::ops::$tr<&'b Tensor> for &'a Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &'b Tensor) -> Result<Tensor> {
                self.$call(rhs)
            }
        }
        impl std::ops::$tr<Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$call(&self, &rhs)
            }
        }
        impl std::ops::$tr<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$call(&self, rhs)
            }
        }
        impl std::ops::$tr<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                self.$call(&rhs)
            }
        }
        // One float and one integer type: a literal must pick its type from the impls
        // (`&t * 2.0`, `1 - &t`), which only works when one impl fits.
        binop_trait!(@rhs $tr, $m, $call; f64, i64);
        binop_trait!(@lhs $tr, $m, $rcall; f64, i64);
    };
    (@rhs $tr:ident, $m:ident, $call:ident; $($t:ty),*) => {$(
        impl std::ops::$tr<$t> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: $t) -> Result<Tensor> {
                self.$call(rhs)
            }
        }
        impl std::ops::$tr<$t> for Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: $t) -> Result<Tensor> {
                Tensor::$call(&self, rhs)
            }
        }
    )*};
    (@lhs $tr:ident, $m:ident, $rcall:ident; $($t:ty),*) => {$(
        impl std::ops::$tr<&Tensor> for $t {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                rhs.$rcall(self)
            }
        }
        impl std::ops::$tr<Tensor> for $t {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                rhs.$rcall(self)
            }
        }
    )*};
}
binop_trait!(Add, add, add, radd);
binop_trait!(Sub, sub, sub, rsub);
binop_trait!(Mul, mul, mul, rmul);
binop_trait!(Div, div, div, rdiv);

/// tinygrad's in-place operators (`x += y` is `x.assign(x + y)`): the result is written into
/// this tensor with [`Tensor::assign`] semantics (an ASSIGN into its buffer when it is realized,
/// else a replace). Rust's `AddAssign` cannot return an error, so these are methods.
impl Tensor {
    /// `self += x`.
    pub fn iadd<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.add(x)?)
    }
    /// `self -= x`.
    pub fn isub<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.sub(x)?)
    }
    /// `self *= x`.
    pub fn imul<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.mul(x)?)
    }
    /// `self /= x` (true division: the result must keep this tensor's dtype).
    pub fn itruediv<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.div(x)?)
    }
    /// `self **= x`.
    pub fn ipow<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.pow(x)?)
    }
    /// `self @= x`.
    pub fn imatmul(&self, x: &Tensor) -> Result<&Tensor> {
        self.assign(&self.matmul(x)?)
    }
    /// `self ^= x`.
    pub fn ixor<'a>(&self, x: impl Into<Operand<'a>>) -> Result<&Tensor> {
        self.assign(&self.xor(x)?)
    }
    /// `self <<= x`.
    pub fn ilshift(&self, x: u32) -> Result<&Tensor> {
        self.assign(&self.lshift(x)?)
    }
    /// `self >>= x`.
    pub fn irshift(&self, x: u32) -> Result<&Tensor> {
        self.assign(&self.rshift(x)?)
    }
}

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl std::ops::BitXor<&Tensor> for &Tensor {
    type Output = Result<Tensor>;
    fn bitxor(self, rhs: &Tensor) -> Result<Tensor> {
        self.xor(rhs)
    }
}
