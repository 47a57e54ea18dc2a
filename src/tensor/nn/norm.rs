//! tinygrad's normalisation layers: `BatchNorm` (0.9.1's `BatchNorm2d`, generalised to any rank
//! as in later tinygrad: statistics over every dim but the channel dim 1, so `BatchNorm1d` on
//! (N, C) or (N, C, L) and `BatchNorm2d` on (N, C, H, W) are the same type), `LayerNorm`,
//! `LayerNorm2d`, `GroupNorm`, `InstanceNorm`. Affine weights start at 1, biases at 0; batch
//! norm's running mean at 0, running variance at 1, `num_batches_tracked` a float32 `[0]`.
//!
//! In training mode (`Tensor::train(true)`) batch norm normalises with the batch statistics and
//! `assign`s the running statistics (momentum 0.1, the unbiased variance); otherwise it uses
//! the running statistics.

use super::{Forward, Module};
use crate::tensor::{fmt_shape, prod, Axis, Tensor};
use crate::{ensure, Result};

/// `[1, -1, 1, ...]` for a rank-`nd` input: a per-channel tensor laid along dim 1.
fn channel_shape(nd: usize) -> Vec<isize> {
    let mut v = vec![1, -1];
    v.extend(std::iter::repeat(1).take(nd.saturating_sub(2)));
    v
}

/// `x * weight + bias`, both laid along the channel dim (GroupNorm, InstanceNorm).
fn channel_affine(x: &Tensor, weight: &Option<Tensor>, bias: &Option<Tensor>) -> Result<Tensor> {
    let (Some(w), Some(b)) = (weight, bias) else {
        return Ok(x.clone());
    };
    let sh = channel_shape(x.ndim());
    x.mul(&w.reshape(&sh)?)?.add(&b.reshape(&sh)?)
}

/// tinygrad's `BatchNorm2d(sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1)`.
#[derive(Clone, Debug)]
pub struct BatchNorm {
    pub eps: f64,
    pub momentum: f64,
    pub track_running_stats: bool,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Tensor,
    pub running_var: Tensor,
    pub num_batches_tracked: Tensor,
}

/// The same layer as [`BatchNorm`] (tinygrad's name for 4-D inputs).
pub type BatchNorm2d = BatchNorm;
/// The same layer as [`BatchNorm`], for (N, C) or (N, C, L) inputs.
pub type BatchNorm1d = BatchNorm;

impl BatchNorm {
    /// tinygrad's defaults: eps 1e-5, affine, tracking running statistics, momentum 0.1.
    pub fn new(sz: usize) -> Result<BatchNorm> {
        BatchNorm::new_with(sz, 1e-5, true, true, 0.1)
    }

    pub fn new_with(
        sz: usize,
        eps: f64,
        affine: bool,
        track_running_stats: bool,
        momentum: f64,
    ) -> Result<BatchNorm> {
        let (weight, bias) = if affine {
            (Some(Tensor::ones(&[sz])?), Some(Tensor::zeros(&[sz])?))
        } else {
            (None, None)
        };
        let buffer = |t: Tensor| t.requires_grad_(false);
        Ok(BatchNorm {
            eps,
            momentum,
            track_running_stats,
            weight,
            bias,
            running_mean: buffer(Tensor::zeros(&[sz])?),
            running_var: buffer(Tensor::ones(&[sz])?),
            num_batches_tracked: buffer(Tensor::zeros(&[1])?),
        })
    }

    /// The batch statistics (mean, invstd) of training mode, updating the running ones.
    fn batch_stats(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let nd = x.ndim();
        let axes: Vec<isize> = (0..nd as isize).filter(|&a| a != 1).collect();
        let batch_mean = x.mean_axis(axes.clone(), false)?;
        let y = x.sub(&batch_mean.detach().reshape(&channel_shape(nd))?)?;
        let batch_var = y.mul(&y)?.mean_axis(axes, false)?;
        let batch_invstd = batch_var.add(self.eps)?.pow(-0.5)?;
        if self.track_running_stats {
            let (n, c) = (prod(&y.shape()), y.shape()[1]);
            ensure!(
                n > c,
                InvalidArgument,
                "BatchNorm: training needs more than one value per channel, got shape {}",
                fmt_shape(&y.shape())
            );
            let m = self.momentum;
            let mean = self
                .running_mean
                .rmul(1.0 - m)?
                .add(&batch_mean.detach().rmul(m)?)?;
            self.running_mean.assign(&mean)?;
            let unbias = m * n as f64 / (n - c) as f64;
            let var = self
                .running_var
                .rmul(1.0 - m)?
                .add(&batch_var.detach().rmul(unbias)?)?;
            self.running_var.assign(&var)?;
            self.num_batches_tracked.iadd(1i64)?;
        }
        Ok((batch_mean, batch_invstd))
    }
}

impl Forward for BatchNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        ensure!(
            x.ndim() >= 2,
            InvalidArgument,
            "BatchNorm: input needs a batch and a channel dim, got shape {}",
            fmt_shape(&x.shape())
        );
        let (mean, invstd) = if Tensor::is_training() {
            self.batch_stats(x)?
        } else {
            let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
            let invstd = self
                .running_var
                .reshape(&channel_shape(x.ndim()))?
                .expand(&shape)?
                .add(self.eps)?
                .rsqrt()?;
            (self.running_mean.clone(), invstd)
        };
        x.batchnorm(self.weight.as_ref(), self.bias.as_ref(), &mean, &invstd, 1)
    }
}

crate::module!(BatchNorm {
    weight,
    bias,
    running_mean,
    running_var,
    num_batches_tracked
});

/// tinygrad's `LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)`: normalise over
/// the last `normalized_shape.len()` dims.
#[derive(Clone, Debug)]
pub struct LayerNorm {
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl LayerNorm {
    pub fn new(normalized_shape: &[usize]) -> Result<LayerNorm> {
        LayerNorm::new_with(normalized_shape, 1e-5, true)
    }

    pub fn new_with(
        normalized_shape: &[usize],
        eps: f64,
        elementwise_affine: bool,
    ) -> Result<LayerNorm> {
        let (weight, bias) = if elementwise_affine {
            (
                Some(Tensor::ones(normalized_shape)?),
                Some(Tensor::zeros(normalized_shape)?),
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight,
            bias,
        })
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (shape, n) = (x.shape(), self.normalized_shape.len());
        ensure!(
            shape.len() >= n && shape[shape.len() - n..] == self.normalized_shape[..],
            InvalidArgument,
            "LayerNorm: last dimensions of {} must match {}",
            fmt_shape(&shape),
            fmt_shape(&self.normalized_shape)
        );
        let axis = Axis::Dims((0..n as isize).map(|i| -1 - i).collect());
        let x = x.layernorm(axis, self.eps)?;
        match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => x.mul(w)?.add(b),
            _ => Ok(x),
        }
    }
}

crate::module!(LayerNorm { weight, bias });

/// tinygrad's `LayerNorm2d`: a [`LayerNorm`] over the channel dim of (N, C, H, W) input.
#[derive(Clone, Debug)]
pub struct LayerNorm2d(pub LayerNorm);

impl LayerNorm2d {
    pub fn new(channels: usize) -> Result<LayerNorm2d> {
        Ok(LayerNorm2d(LayerNorm::new(&[channels])?))
    }
}

impl Forward for LayerNorm2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.0
            .forward(&x.permute(&[0, 2, 3, 1])?)?
            .permute(&[0, 3, 1, 2])
    }
}

impl Module for LayerNorm2d {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.0.visit(prefix, f);
    }
}

/// tinygrad's `GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)`.
#[derive(Clone, Debug)]
pub struct GroupNorm {
    pub num_groups: usize,
    pub num_channels: usize,
    pub eps: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl GroupNorm {
    pub fn new(num_groups: usize, num_channels: usize) -> Result<GroupNorm> {
        GroupNorm::new_with(num_groups, num_channels, 1e-5, true)
    }

    pub fn new_with(
        num_groups: usize,
        num_channels: usize,
        eps: f64,
        affine: bool,
    ) -> Result<GroupNorm> {
        ensure!(
            num_groups > 0 && num_channels % num_groups == 0,
            InvalidArgument,
            "GroupNorm: {num_channels} channels do not split into {num_groups} groups"
        );
        Ok(GroupNorm {
            num_groups,
            num_channels,
            eps,
            weight: affine.then(|| Tensor::ones(&[num_channels])).transpose()?,
            bias: affine.then(|| Tensor::zeros(&[num_channels])).transpose()?,
        })
    }
}

/// Normalise `x` over each of `groups` groups of its non-batch elements.
fn group_layernorm(x: &Tensor, groups: usize, eps: f64, what: &str) -> Result<Tensor> {
    let shape = x.shape();
    ensure!(
        shape.len() >= 2,
        InvalidArgument,
        "{what}: input needs a batch and a channel dim, got shape {}",
        fmt_shape(&shape)
    );
    let ishape: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
    x.reshape(&[shape[0] as isize, groups as isize, -1])?
        .layernorm(-1, eps)?
        .reshape(&ishape)
}

impl Forward for GroupNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = group_layernorm(x, self.num_groups, self.eps, "GroupNorm")?;
        channel_affine(&y, &self.weight, &self.bias)
    }
}

crate::module!(GroupNorm { weight, bias });

/// tinygrad's `InstanceNorm(num_features, eps=1e-5, affine=True)`.
#[derive(Clone, Debug)]
pub struct InstanceNorm {
    pub num_features: usize,
    pub eps: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl InstanceNorm {
    pub fn new(num_features: usize) -> Result<InstanceNorm> {
        InstanceNorm::new_with(num_features, 1e-5, true)
    }

    pub fn new_with(num_features: usize, eps: f64, affine: bool) -> Result<InstanceNorm> {
        Ok(InstanceNorm {
            num_features,
            eps,
            weight: affine.then(|| Tensor::ones(&[num_features])).transpose()?,
            bias: affine.then(|| Tensor::zeros(&[num_features])).transpose()?,
        })
    }
}

impl Forward for InstanceNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = group_layernorm(x, self.num_features, self.eps, "InstanceNorm")?;
        channel_affine(&y, &self.weight, &self.bias)
    }
}

crate::module!(InstanceNorm { weight, bias });
