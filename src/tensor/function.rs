//! The 27 autograd Functions of tinygrad 0.9.1 (`function.py`): each forward emits exactly the
//! LazyBuffer ops tinygrad emits (so kernels fuse and count the same), each backward the ops of
//! its gradient. [`apply`] runs a forward and records the context that `backward` needs.
//!
//! Not guaranteed: `Xor` has no backward (as in tinygrad); asking for it is an error.

use std::f64::consts::{LN_2, PI};
use std::sync::Arc;

use super::Tensor;
use crate::dtype::{dtypes, sum_acc_dtype, DType};
use crate::lazy::LazyBuffer;
use crate::ops::{BinaryOps, ReduceOps, TernaryOps, UnaryOps};
use crate::shape::Sint;
use crate::{bail, Result};

/// The backward half of a Function: one gradient (or none) per input, given the output's.
pub(crate) trait Function: Send + Sync {
    /// The Function's name in tinygrad (`Add`, `Reshape`, ...).
    fn name(&self) -> &'static str;
    /// Gradients of the inputs; `needs[i]` says whether input `i` wants one.
    fn backward(&self, g: &LazyBuffer, needs: &[bool]) -> Result<Vec<Option<LazyBuffer>>>;
}

/// What a tensor produced by a Function remembers for the backward pass (tinygrad's `_ctx`).
pub(crate) struct Ctx {
    pub(crate) func: Box<dyn Function>,
    pub(crate) parents: Vec<Tensor>,
    pub(crate) needs_input_grad: Vec<Option<bool>>,
}

/// tinygrad's `Function.apply`: run `forward` on the inputs' LazyBuffers; the result requires
/// grad if any input does (unknown if any input is unknown); the context is kept only when
/// gradients are wanted and `no_grad` is off.
pub(crate) fn apply<F: Function + 'static>(
    inputs: &[&Tensor],
    forward: impl FnOnce(&[LazyBuffer]) -> Result<(F, LazyBuffer)>,
) -> Result<Tensor> {
    let needs = || inputs.iter().map(|t| t.requires_grad());
    let requires_grad = if needs().any(|n| n == Some(true)) {
        Some(true)
    } else if needs().any(|n| n.is_none()) {
        None
    } else {
        Some(false)
    };
    // the inputs' nodes without a Vec for the usual one to three inputs (every eager op)
    let (func, out) = match inputs {
        [a] => forward(&[a.lazydata()]),
        [a, b] => forward(&[a.lazydata(), b.lazydata()]),
        [a, b, c] => forward(&[a.lazydata(), b.lazydata(), c.lazydata()]),
        _ => forward(&inputs.iter().map(|t| t.lazydata()).collect::<Vec<_>>()),
    }?;
    let ret = Tensor::from_lazybuffer(out, requires_grad);
    if requires_grad == Some(true) && !Tensor::is_no_grad() {
        ret.set_ctx(Some(Arc::new(Ctx {
            func: Box::new(func),
            parents: inputs.iter().map(|t| (*t).clone()).collect(),
            needs_input_grad: needs().collect(),
        })));
    }
    Ok(ret)
}

fn one(g: LazyBuffer) -> Result<Vec<Option<LazyBuffer>>> {
    Ok(vec![Some(g)])
}

fn when(need: bool, f: impl FnOnce() -> Result<LazyBuffer>) -> Result<Option<LazyBuffer>> {
    if need {
        f().map(Some)
    } else {
        Ok(None)
    }
}

/// Declares a Function struct with its name.
macro_rules! function {
    ($name:ident { $($field:ident : $ty:ty),* }) => {
        pub(crate) struct $name { $($field: $ty),* }
    };
}

// ---------------------------------------------------------------------------------------------
// Contiguous, casts

function!(Contiguous {});
impl Function for Contiguous {
    fn name(&self) -> &'static str {
        "Contiguous"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.clone())
    }
}
pub(crate) fn contiguous(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| Ok((Contiguous {}, l[0].contiguous()?)))
}

function!(ContiguousBackward {});
impl Function for ContiguousBackward {
    fn name(&self) -> &'static str {
        "ContiguousBackward"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.contiguous()?)
    }
}
pub(crate) fn contiguous_backward(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| Ok((ContiguousBackward {}, l[0].clone())))
}

function!(Cast {
    input_dtype: DType,
    bitcast: bool
});
impl Function for Cast {
    fn name(&self) -> &'static str {
        "Cast"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.cast(self.input_dtype, self.bitcast)?)
    }
}
pub(crate) fn cast(x: &Tensor, dtype: DType, bitcast: bool) -> Result<Tensor> {
    apply(&[x], |l| {
        let f = Cast {
            input_dtype: l[0].dtype(),
            bitcast,
        };
        Ok((f, l[0].cast(dtype, bitcast)?))
    })
}

// ---------------------------------------------------------------------------------------------
// Unary

function!(Neg {});
impl Function for Neg {
    fn name(&self) -> &'static str {
        "Neg"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.e(UnaryOps::NEG, &[])?)
    }
}
pub(crate) fn neg(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| Ok((Neg {}, l[0].e(UnaryOps::NEG, &[])?)))
}

function!(Reciprocal { ret: LazyBuffer });
impl Function for Reciprocal {
    fn name(&self) -> &'static str {
        "Reciprocal"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let r = &self.ret;
        one(g
            .e(UnaryOps::NEG, &[])?
            .e(BinaryOps::MUL, &[r])?
            .e(BinaryOps::MUL, &[r])?)
    }
}
pub(crate) fn reciprocal(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let ret = l[0].e(UnaryOps::RECIP, &[])?;
        Ok((Reciprocal { ret: ret.clone() }, ret))
    })
}

function!(Sin { x: LazyBuffer });
impl Function for Sin {
    fn name(&self) -> &'static str {
        "Sin"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let x = &self.x;
        let negx = x.e(UnaryOps::NEG, &[])?;
        one(x
            .const_like(PI / 2.0)?
            .e(BinaryOps::ADD, &[&negx])?
            .e(UnaryOps::SIN, &[])?
            .e(BinaryOps::MUL, &[g])?)
    }
}
pub(crate) fn sin(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let ret = l[0].e(UnaryOps::SIN, &[])?;
        Ok((Sin { x: l[0].clone() }, ret))
    })
}

function!(Relu { ret: LazyBuffer });
impl Function for Relu {
    fn name(&self) -> &'static str {
        "Relu"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let r = &self.ret;
        one(r
            .const_like(0i64)?
            .e(BinaryOps::CMPLT, &[r])?
            .cast(g.dtype(), false)?
            .e(BinaryOps::MUL, &[g])?)
    }
}
pub(crate) fn relu(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let zero = l[0].const_like(0i64)?;
        let ret = l[0].e(BinaryOps::MAX, &[&zero])?;
        Ok((Relu { ret: ret.clone() }, ret))
    })
}

function!(Log { x: LazyBuffer });
impl Function for Log {
    fn name(&self) -> &'static str {
        "Log"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let r = self.x.e(UnaryOps::RECIP, &[])?;
        one(g.e(BinaryOps::MUL, &[&r])?)
    }
}
pub(crate) fn log(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let ln2 = l[0].const_like(LN_2)?;
        let ret = l[0].e(UnaryOps::LOG2, &[])?.e(BinaryOps::MUL, &[&ln2])?;
        Ok((Log { x: l[0].clone() }, ret))
    })
}

function!(Exp { ret: LazyBuffer });
impl Function for Exp {
    fn name(&self) -> &'static str {
        "Exp"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(self.ret.e(BinaryOps::MUL, &[g])?)
    }
}
pub(crate) fn exp(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let c = l[0].const_like(1.0 / LN_2)?;
        let ret = l[0].e(BinaryOps::MUL, &[&c])?.e(UnaryOps::EXP2, &[])?;
        Ok((Exp { ret: ret.clone() }, ret))
    })
}

function!(Sqrt { ret: LazyBuffer });
impl Function for Sqrt {
    fn name(&self) -> &'static str {
        "Sqrt"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let two = self.ret.const_like(2i64)?;
        let d = self
            .ret
            .e(BinaryOps::MUL, &[&two])?
            .e(UnaryOps::RECIP, &[])?;
        one(g.e(BinaryOps::MUL, &[&d])?)
    }
}
pub(crate) fn sqrt(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let ret = l[0].e(UnaryOps::SQRT, &[])?;
        Ok((Sqrt { ret: ret.clone() }, ret))
    })
}

function!(Sigmoid { ret: LazyBuffer });
impl Function for Sigmoid {
    fn name(&self) -> &'static str {
        "Sigmoid"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let r = &self.ret;
        let neg = r.e(UnaryOps::NEG, &[])?;
        let one_minus = r.const_like(1i64)?.e(BinaryOps::ADD, &[&neg])?;
        one(r
            .e(BinaryOps::MUL, &[&one_minus])?
            .e(BinaryOps::MUL, &[g])?)
    }
}
pub(crate) fn sigmoid(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let x = &l[0];
        let c = x.const_like(-1.0 / LN_2)?;
        let e = x.e(BinaryOps::MUL, &[&c])?.e(UnaryOps::EXP2, &[])?;
        let ret = x
            .const_like(1i64)?
            .e(BinaryOps::ADD, &[&e])?
            .e(UnaryOps::RECIP, &[])?;
        Ok((Sigmoid { ret: ret.clone() }, ret))
    })
}

function!(Sign {});
impl Function for Sign {
    fn name(&self) -> &'static str {
        "Sign"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.const_like(0i64)?)
    }
}
pub(crate) fn sign(x: &Tensor) -> Result<Tensor> {
    apply(&[x], |l| {
        let x = &l[0];
        let zero = x.const_like(0i64)?;
        let neg = x.e(BinaryOps::CMPLT, &[&zero])?.e(
            TernaryOps::WHERE,
            &[&x.const_like(-1i64)?, &x.const_like(1i64)?],
        )?;
        let ret = x
            .e(BinaryOps::CMPNE, &[&zero])?
            .e(TernaryOps::WHERE, &[&neg, &zero])?;
        Ok((Sign {}, ret))
    })
}

// ---------------------------------------------------------------------------------------------
// Binary

function!(Less {});
impl Function for Less {
    fn name(&self) -> &'static str {
        "Less"
    }
    fn backward(&self, _: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        Ok(vec![None, None])
    }
}
pub(crate) fn less(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| {
        Ok((Less {}, l[0].e(BinaryOps::CMPLT, &[&l[1]])?))
    })
}

function!(Neq {});
impl Function for Neq {
    fn name(&self) -> &'static str {
        "Neq"
    }
    fn backward(&self, _: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        Ok(vec![None, None])
    }
}
pub(crate) fn neq(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| {
        Ok((Neq {}, l[0].e(BinaryOps::CMPNE, &[&l[1]])?))
    })
}

function!(Xor {});
impl Function for Xor {
    fn name(&self) -> &'static str {
        "Xor"
    }
    fn backward(&self, _: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        bail!(
            InvalidArgument,
            "backward: backward not implemented for Xor"
        )
    }
}
pub(crate) fn xor(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| Ok((Xor {}, l[0].e(BinaryOps::XOR, &[&l[1]])?)))
}

function!(Add {});
impl Function for Add {
    fn name(&self) -> &'static str {
        "Add"
    }
    fn backward(&self, g: &LazyBuffer, needs: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        Ok(vec![
            needs[0].then(|| g.clone()),
            needs[1].then(|| g.clone()),
        ])
    }
}
pub(crate) fn add(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| Ok((Add {}, l[0].e(BinaryOps::ADD, &[&l[1]])?)))
}

function!(Mul {
    x: LazyBuffer,
    y: LazyBuffer
});
impl Function for Mul {
    fn name(&self) -> &'static str {
        "Mul"
    }
    fn backward(&self, g: &LazyBuffer, needs: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        Ok(vec![
            when(needs[0], || self.y.e(BinaryOps::MUL, &[g]))?,
            when(needs[1], || self.x.e(BinaryOps::MUL, &[g]))?,
        ])
    }
}
pub(crate) fn mul(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| {
        let ret = l[0].e(BinaryOps::MUL, &[&l[1]])?;
        let f = Mul {
            x: l[0].clone(),
            y: l[1].clone(),
        };
        Ok((f, ret))
    })
}

function!(Div {
    x: LazyBuffer,
    y: LazyBuffer
});
impl Function for Div {
    fn name(&self) -> &'static str {
        "Div"
    }
    fn backward(&self, g: &LazyBuffer, needs: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let (x, y) = (&self.x, &self.y);
        Ok(vec![
            when(needs[0], || {
                g.e(BinaryOps::MUL, &[&y.e(UnaryOps::RECIP, &[])?])
            })?,
            when(needs[1], || {
                let yy = y.e(BinaryOps::MUL, &[y])?.e(UnaryOps::RECIP, &[])?;
                g.e(UnaryOps::NEG, &[])?
                    .e(BinaryOps::MUL, &[x])?
                    .e(BinaryOps::MUL, &[&yy])
            })?,
        ])
    }
}
pub(crate) fn div(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[x, y], |l| {
        let (a, b) = (&l[0], &l[1]);
        let ret = if a.dtype().is_int() {
            a.e(BinaryOps::IDIV, &[b])?
        } else {
            a.e(BinaryOps::MUL, &[&b.e(UnaryOps::RECIP, &[])?])?
        };
        let f = Div {
            x: a.clone(),
            y: b.clone(),
        };
        Ok((f, ret))
    })
}

// ---------------------------------------------------------------------------------------------
// Ternary

function!(Where { x: LazyBuffer });
impl Function for Where {
    fn name(&self) -> &'static str {
        "Where"
    }
    fn backward(&self, g: &LazyBuffer, needs: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let c = &self.x;
        Ok(vec![
            None,
            when(needs[1], || {
                c.e(TernaryOps::WHERE, &[g, &g.const_like(0i64)?])
            })?,
            when(needs[2], || {
                c.e(TernaryOps::WHERE, &[&g.const_like(0i64)?, g])
            })?,
        ])
    }
}
pub(crate) fn where_(c: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply(&[c, x, y], |l| {
        let ret = l[0].e(TernaryOps::WHERE, &[&l[1], &l[2]])?;
        Ok((Where { x: l[0].clone() }, ret))
    })
}

// ---------------------------------------------------------------------------------------------
// Reductions

function!(Sum { input_shape: Vec<Sint> });
impl Function for Sum {
    fn name(&self) -> &'static str {
        "Sum"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.expand(&self.input_shape)?)
    }
}
pub(crate) fn sum(x: &Tensor, axis: &[usize]) -> Result<Tensor> {
    apply(&[x], |l| {
        let f = Sum {
            input_shape: l[0].shape().to_vec(),
        };
        Ok((f, l[0].r(ReduceOps::SUM, axis)?))
    })
}

function!(Max { x: LazyBuffer, ret: LazyBuffer, axis: Vec<usize> });
impl Function for Max {
    fn name(&self) -> &'static str {
        "Max"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let (x, shape) = (&self.x, self.x.shape());
        let f32 = dtypes::float32;
        let not_max = x
            .e(BinaryOps::CMPNE, &[&self.ret.expand(shape)?])?
            .cast(f32, false)?
            .e(UnaryOps::NEG, &[])?;
        let max_is_1s = x
            .const_like(1.0)?
            .cast(f32, false)?
            .e(BinaryOps::ADD, &[&not_max])?;
        let div = max_is_1s.r(ReduceOps::SUM, &self.axis)?.expand(shape)?;
        one(max_is_1s
            .e(BinaryOps::MUL, &[&div.e(UnaryOps::RECIP, &[])?])?
            .cast(g.dtype(), false)?
            .e(BinaryOps::MUL, &[&g.expand(shape)?])?)
    }
}
pub(crate) fn max(x: &Tensor, axis: &[usize]) -> Result<Tensor> {
    apply(&[x], |l| {
        let ret = l[0].r(ReduceOps::MAX, axis)?;
        let f = Max {
            x: l[0].clone(),
            ret: ret.clone(),
            axis: axis.to_vec(),
        };
        Ok((f, ret))
    })
}

// ---------------------------------------------------------------------------------------------
// Movement

function!(Expand { expanded_axis: Vec<usize> });
impl Function for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g
            .cast(sum_acc_dtype(g.dtype()), false)?
            .r(ReduceOps::SUM, &self.expanded_axis)?
            .cast(g.dtype(), false)?)
    }
}
pub(crate) fn expand(x: &Tensor, shape: &[Sint]) -> Result<Tensor> {
    apply(&[x], |l| {
        let expanded_axis = (l[0].shape().iter().zip(shape))
            .enumerate()
            .filter(|(_, (si, so))| si != so)
            .map(|(i, _)| i)
            .collect();
        Ok((Expand { expanded_axis }, l[0].expand(shape)?))
    })
}

function!(Reshape { input_shape: Vec<Sint> });
impl Function for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.reshape(&self.input_shape)?)
    }
}
pub(crate) fn reshape(x: &Tensor, shape: &[Sint]) -> Result<Tensor> {
    apply(&[x], |l| {
        let f = Reshape {
            input_shape: l[0].shape().to_vec(),
        };
        Ok((f, l[0].reshape(shape)?))
    })
}

function!(Permute { order: Vec<usize> });
impl Function for Permute {
    fn name(&self) -> &'static str {
        "Permute"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        let mut inv = vec![0; self.order.len()];
        for (i, &o) in self.order.iter().enumerate() {
            inv[o] = i;
        }
        one(g.permute(&inv)?)
    }
}
pub(crate) fn permute(x: &Tensor, order: &[usize]) -> Result<Tensor> {
    apply(&[x], |l| {
        let f = Permute {
            order: order.to_vec(),
        };
        Ok((f, l[0].permute(order)?))
    })
}

function!(Pad { narg: Vec<(Sint, Sint)> });
impl Function for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.shrink(&self.narg)?)
    }
}
pub(crate) fn pad(x: &Tensor, arg: &[(Sint, Sint)]) -> Result<Tensor> {
    apply(&[x], |l| {
        let narg = (l[0].shape().iter().zip(arg))
            .map(|(s, (b, _))| Ok((b.clone(), s.try_add(b)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok((Pad { narg }, l[0].pad(arg)?))
    })
}

function!(Shrink { narg: Vec<(Sint, Sint)> });
impl Function for Shrink {
    fn name(&self) -> &'static str {
        "Shrink"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.pad(&self.narg)?)
    }
}
pub(crate) fn shrink(x: &Tensor, arg: &[(Sint, Sint)]) -> Result<Tensor> {
    apply(&[x], |l| {
        let narg = (l[0].shape().iter().zip(arg))
            .map(|(s, (b, e))| Ok((b.clone(), s.try_sub(e)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok((Shrink { narg }, l[0].shrink(arg)?))
    })
}

function!(Flip { arg: Vec<i64> });
impl Function for Flip {
    fn name(&self) -> &'static str {
        "Flip"
    }
    fn backward(&self, g: &LazyBuffer, _: &[bool]) -> Result<Vec<Option<LazyBuffer>>> {
        one(g.stride(&self.arg)?)
    }
}
pub(crate) fn flip(x: &Tensor, axis: &[usize]) -> Result<Tensor> {
    apply(&[x], |l| {
        let arg: Vec<i64> = (0..l[0].shape().len())
            .map(|i| if axis.contains(&i) { -1 } else { 1 })
            .collect();
        let ret = l[0].stride(&arg)?;
        Ok((Flip { arg }, ret))
    })
}
