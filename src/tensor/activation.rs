//! Activation functions and losses (tinygrad 0.9.1 composites of the elementwise ops, with the
//! same operand order, so they build the same graphs), and scaled dot-product attention.
//!
//! Not guaranteed: nothing beyond tinygrad's numerics (e.g. `tanh` is `2*sigmoid(2x)-1`, which
//! loses precision near 0 in float16).

use std::f64::consts::PI;

use super::Tensor;
use crate::dtype::{dtypes, least_upper_dtype, ConstValue};
use crate::{ensure, Result};

impl Tensor {
    /// `relu(x) - alpha * relu(1 - exp(x))`.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        let neg = self.exp()?.rsub(1i64)?.relu()?.rmul(alpha)?;
        self.relu()?.sub(&neg)
    }
    /// `max(x, 0) + min(alpha * (exp(x / alpha) - 1), 0)`.
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        let e = self
            .div(alpha)?
            .exp()?
            .sub(1i64)?
            .rmul(alpha)?
            .minimum(0i64)?;
        self.maximum(0i64)?.add(&e)
    }
    /// `x * sigmoid(x)`.
    pub fn swish(&self) -> Result<Tensor> {
        self.mul(&self.sigmoid()?)
    }
    /// SiLU is swish.
    pub fn silu(&self) -> Result<Tensor> {
        self.swish()
    }
    /// `relu(x) - relu(x - 6)`.
    pub fn relu6(&self) -> Result<Tensor> {
        self.relu()?.sub(&self.sub(6i64)?.relu()?)
    }
    /// `x * relu6(x + 3) / 6`.
    pub fn hardswish(&self) -> Result<Tensor> {
        self.mul(&self.add(3i64)?.relu6()?)?.mul(1.0 / 6.0)
    }
    /// `2 * sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Result<Tensor> {
        self.rmul(2.0)?.sigmoid()?.rmul(2.0)?.sub(1.0)
    }
    pub fn sinh(&self) -> Result<Tensor> {
        self.exp()?.sub(&self.neg()?.exp()?)?.div(2i64)
    }
    pub fn cosh(&self) -> Result<Tensor> {
        self.exp()?.add(&self.neg()?.exp()?)?.div(2i64)
    }
    pub fn atanh(&self) -> Result<Tensor> {
        self.radd(1i64)?.div(&self.rsub(1i64)?)?.log()?.div(2i64)
    }
    pub fn asinh(&self) -> Result<Tensor> {
        self.add(&self.square()?.add(1i64)?.sqrt()?)?.log()
    }
    pub fn acosh(&self) -> Result<Tensor> {
        self.add(&self.square()?.sub(1i64)?.sqrt()?)?.log()
    }
    /// `clip(x, min_val, max_val)`.
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        self.clip(min_val, max_val)
    }
    /// The tanh approximation of GELU.
    pub fn gelu(&self) -> Result<Tensor> {
        let inner = self
            .pow(3i64)?
            .rmul(0.044715)?
            .radd(self)?
            .rmul((2.0 / PI).sqrt())?
            .tanh()?
            .radd(1i64)?;
        self.rmul(0.5)?.mul(&inner)
    }
    /// `x * sigmoid(1.702 x)`.
    pub fn quick_gelu(&self) -> Result<Tensor> {
        self.mul(&self.mul(1.702)?.sigmoid()?)
    }
    /// `relu(x) - relu(-slope * x)`.
    pub fn leakyrelu(&self, neg_slope: f64) -> Result<Tensor> {
        self.relu()?.sub(&self.rmul(-neg_slope)?.relu()?)
    }
    /// `x * tanh(softplus(x))`.
    pub fn mish(&self) -> Result<Tensor> {
        self.mul(&self.softplus(1.0)?.tanh()?)
    }
    /// `log(1 + exp(beta x)) / beta`.
    pub fn softplus(&self, beta: f64) -> Result<Tensor> {
        self.mul(beta)?.exp()?.radd(1i64)?.log()?.rmul(1.0 / beta)
    }
    /// `x / (1 + |x|)`.
    pub fn softsign(&self) -> Result<Tensor> {
        self.div(&self.abs()?.radd(1i64)?)
    }

    // ---- losses ----------------------------------------------------------------------------

    /// Mean binary cross-entropy of probabilities `self` against targets `y`.
    pub fn binary_crossentropy(&self, y: &Tensor) -> Result<Tensor> {
        let a = y.neg()?.mul(&self.log()?)?;
        let b = y.rsub(1i64)?.mul(&self.rsub(1i64)?.log()?)?;
        a.sub(&b)?.mean()
    }

    /// Mean binary cross-entropy of logits `self` against targets `y`.
    pub fn binary_crossentropy_logits(&self, y: &Tensor) -> Result<Tensor> {
        let l = self.abs()?.neg()?.exp()?.radd(1i64)?.log()?;
        self.maximum(0i64)?.sub(&y.mul(self)?)?.add(&l)?.mean()
    }

    /// tinygrad's `sparse_categorical_crossentropy`: logits `self` (..., classes) against
    /// integer labels `y`, ignoring `ignore_index`, with label smoothing.
    pub fn sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
    ) -> Result<Tensor> {
        ensure!(
            (0.0..=1.0).contains(&label_smoothing),
            InvalidArgument,
            "sparse_categorical_crossentropy: label_smoothing must be in [0.0, 1.0], got {label_smoothing}"
        );
        let classes = *self.shape().last().unwrap_or(&0);
        let log_probs = self.log_softmax(-1isize)?;
        let loss_mask = y.ne(ignore_index)?;
        let counter = Tensor::arange_on(
            ConstValue::Int(0),
            ConstValue::Int(classes as i128),
            ConstValue::Int(1),
            dtypes::default_int,
            &self.device(),
        )?
        .detach()
        .unsqueeze(0)?
        .expand(&[y.numel() as isize, classes as isize])?;
        let mut yshape: Vec<isize> = y.shape().iter().map(|&s| s as isize).collect();
        yshape.push(classes as isize);
        let onehot = counter
            .eq(&y.flatten(0, -1)?.reshape(&[-1, 1])?)?
            .mul(&loss_mask.reshape(&[-1, 1])?)?
            .reshape(&yshape)?;
        let smoothing = log_probs
            .mean_axis(-1isize, false)?
            .mul(&loss_mask)?
            .sum()?
            .rmul(label_smoothing)?;
        log_probs
            .mul(&onehot)?
            .sum()?
            .rmul(1.0 - label_smoothing)?
            .add(&smoothing)?
            .neg()?
            .div(&loss_mask.sum()?)
    }

    /// tinygrad's `scaled_dot_product_attention`: `softmax(q k^T / sqrt(d) + mask) v`, with a
    /// causal mask when asked (bool masks become `-inf`/0), accumulating in at least float32.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        dropout_p: f64,
        is_causal: bool,
    ) -> Result<Tensor> {
        let qs = self.shape();
        ensure!(
            qs.len() >= 2 && key.ndim() >= 2,
            InvalidArgument,
            "scaled_dot_product_attention: query and key need at least 2 dims"
        );
        let mut mask = attn_mask.cloned();
        if is_causal {
            let ks = key.shape();
            let m = Tensor::full_on(
                &[qs[qs.len() - 2], ks[ks.len() - 2]],
                1i64,
                dtypes::default_float,
                &self.device(),
            )?
            .detach()
            .tril(0)?
            .cast(dtypes::bool)?;
            mask = Some(m);
        }
        if let Some(m) = &mask {
            if m.dtype() == dtypes::bool {
                mask = Some(m.eq(0i64)?.where_(f64::NEG_INFINITY, 0i64)?);
            }
        }
        let acc = least_upper_dtype(&[self.dtype(), key.dtype(), dtypes::float32]);
        let d = *qs.last().unwrap_or(&1) as f64;
        let qk = self
            .dot_acc(&key.transpose(-2, -1)?, Some(acc))?
            .div(d.sqrt())?;
        let qk = match &mask {
            Some(m) => qk.add(m)?,
            None => qk,
        };
        qk.softmax(-1isize)?
            .cast(self.dtype())?
            .dropout(dropout_p)?
            .matmul(value)
    }
}
