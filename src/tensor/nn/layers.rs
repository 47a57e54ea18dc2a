//! tinygrad 0.9.1's weight layers: `Linear`, `Conv2d` (and `Conv1d`), `ConvTranspose2d` (and
//! `ConvTranspose1d`), `Embedding`, with its parameter shapes and initialisation:
//! Kaiming-uniform weights with `a = sqrt(5)` and biases uniform in `±1/sqrt(fan_in)` (fan_in:
//! `in_features` for Linear, the product of the weight's non-leading dims for the convs),
//! Glorot-uniform embeddings. Random values come from rawgrad's threefry generator
//! (`Tensor::manual_seed`), so the numbers differ from tinygrad's numpy-seeded default.
//!
//! Not guaranteed: `Embedding` takes indices of any rank (0.9.1 assumes two dims).

use super::Forward;
use crate::tensor::{prod, ConvArgs, IntoInts, Tensor};
use crate::{ensure, Result};

/// tinygrad's `Linear(in_features, out_features, bias=True)`: `x @ weight.T + bias`.
#[derive(Clone, Debug)]
pub struct Linear {
    /// (out_features, in_features)
    pub weight: Tensor,
    /// (out_features,)
    pub bias: Option<Tensor>,
}

impl Linear {
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Result<Linear> {
        let weight = Tensor::kaiming_uniform(&[out_features, in_features], 5f64.sqrt())?;
        let bound = 1.0 / (in_features as f64).sqrt();
        let bias = bias
            .then(|| Tensor::uniform(&[out_features], -bound, bound))
            .transpose()?;
        Ok(Linear { weight, bias })
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight.transpose(0, 1)?, self.bias.as_ref())
    }
}

crate::module!(Linear { weight, bias });

/// The kernel size of a conv: one value for two dims (tinygrad's `(k, k)`) or the dims given.
fn kernel_dims(k: impl IntoInts, what: &str) -> Result<Vec<usize>> {
    let k = k.into_ints();
    let k = if k.len() == 1 { vec![k[0]; 2] } else { k };
    ensure!(
        !k.is_empty() && k.iter().all(|&v| v > 0),
        InvalidArgument,
        "{what}: kernel_size must be positive, got {k:?}"
    );
    Ok(k.into_iter().map(|v| v as usize).collect())
}

/// A conv weight (Kaiming uniform) and bias (uniform in `±1/sqrt(prod(weight.shape[1:]))`).
fn conv_params(wshape: &[usize], cout: usize, bias: bool) -> Result<(Tensor, Option<Tensor>)> {
    let weight = Tensor::kaiming_uniform(wshape, 5f64.sqrt())?;
    let bound = 1.0 / (prod(&wshape[1..]) as f64).sqrt();
    let bias = bias
        .then(|| Tensor::uniform(&[cout], -bound, bound))
        .transpose()?;
    Ok((weight, bias))
}

fn check_groups(cin: usize, cout: usize, groups: usize, what: &str) -> Result<()> {
    ensure!(
        groups > 0 && cin % groups == 0 && cout % groups == 0,
        InvalidArgument,
        "{what}: in_channels {cin} and out_channels {cout} must divide into {groups} groups"
    );
    Ok(())
}

/// tinygrad's `Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation,
/// groups, bias)`; a one-dim kernel is tinygrad's `Conv1d`.
#[derive(Clone, Debug)]
pub struct Conv2d {
    /// (out_channels, in_channels/groups, *kernel_size)
    pub weight: Tensor,
    /// (out_channels,)
    pub bias: Option<Tensor>,
    pub kernel_size: Vec<usize>,
    /// stride, padding, dilation, groups
    pub args: ConvArgs,
}

impl Conv2d {
    /// A conv with tinygrad's defaults (stride 1, no padding, a bias); `kernel_size` is one
    /// value for a square kernel or one per spatial dim.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl IntoInts,
    ) -> Result<Conv2d> {
        Conv2d::new_with(
            in_channels,
            out_channels,
            kernel_size,
            ConvArgs::default(),
            true,
        )
    }

    /// A conv with explicit stride, padding, dilation and groups, with or without a bias.
    pub fn new_with(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl IntoInts,
        args: ConvArgs,
        bias: bool,
    ) -> Result<Conv2d> {
        let k = kernel_dims(kernel_size, "Conv2d")?;
        Conv2d::build(in_channels, out_channels, k, args, bias)
    }

    /// tinygrad's `Conv1d`: a conv over one spatial dim.
    pub fn conv1d(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        args: ConvArgs,
        bias: bool,
    ) -> Result<Conv2d> {
        Conv2d::build(in_channels, out_channels, vec![kernel_size], args, bias)
    }

    fn build(
        in_channels: usize,
        out_channels: usize,
        kernel_size: Vec<usize>,
        args: ConvArgs,
        bias: bool,
    ) -> Result<Conv2d> {
        ensure!(
            kernel_size.iter().all(|&k| k > 0),
            InvalidArgument,
            "Conv2d: kernel_size must be positive, got {kernel_size:?}"
        );
        check_groups(in_channels, out_channels, args.groups, "Conv2d")?;
        let mut wshape = vec![out_channels, in_channels / args.groups];
        wshape.extend(&kernel_size);
        let (weight, bias) = conv_params(&wshape, out_channels, bias)?;
        Ok(Conv2d {
            weight,
            bias,
            kernel_size,
            args,
        })
    }
}

impl Forward for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d_with(&self.weight, self.bias.as_ref(), &self.args)
    }
}

crate::module!(Conv2d { weight, bias });

/// tinygrad's `ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
/// output_padding, dilation, groups, bias)`; a one-dim kernel is `ConvTranspose1d`.
#[derive(Clone, Debug)]
pub struct ConvTranspose2d {
    /// (in_channels, out_channels/groups, *kernel_size)
    pub weight: Tensor,
    /// (out_channels,)
    pub bias: Option<Tensor>,
    pub kernel_size: Vec<usize>,
    /// stride, padding, output_padding, dilation, groups
    pub args: ConvArgs,
}

impl ConvTranspose2d {
    /// A transposed conv with tinygrad's defaults.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl IntoInts,
    ) -> Result<ConvTranspose2d> {
        ConvTranspose2d::new_with(
            in_channels,
            out_channels,
            kernel_size,
            ConvArgs::default(),
            true,
        )
    }

    /// A transposed conv with explicit arguments.
    pub fn new_with(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl IntoInts,
        args: ConvArgs,
        bias: bool,
    ) -> Result<ConvTranspose2d> {
        let k = kernel_dims(kernel_size, "ConvTranspose2d")?;
        ConvTranspose2d::build(in_channels, out_channels, k, args, bias)
    }

    /// tinygrad's `ConvTranspose1d`.
    pub fn conv_transpose1d(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        args: ConvArgs,
        bias: bool,
    ) -> Result<ConvTranspose2d> {
        ConvTranspose2d::build(in_channels, out_channels, vec![kernel_size], args, bias)
    }

    fn build(
        in_channels: usize,
        out_channels: usize,
        kernel_size: Vec<usize>,
        args: ConvArgs,
        bias: bool,
    ) -> Result<ConvTranspose2d> {
        ensure!(
            kernel_size.iter().all(|&k| k > 0),
            InvalidArgument,
            "ConvTranspose2d: kernel_size must be positive, got {kernel_size:?}"
        );
        check_groups(in_channels, out_channels, args.groups, "ConvTranspose2d")?;
        let mut wshape = vec![in_channels, out_channels / args.groups];
        wshape.extend(&kernel_size);
        let (weight, bias) = conv_params(&wshape, out_channels, bias)?;
        Ok(ConvTranspose2d {
            weight,
            bias,
            kernel_size,
            args,
        })
    }
}

impl Forward for ConvTranspose2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose2d_with(&self.weight, self.bias.as_ref(), &self.args)
    }
}

crate::module!(ConvTranspose2d { weight, bias });

/// tinygrad's `Embedding(vocab_size, embed_size)`: rows of `weight` picked by integer indices
/// through the one-hot `arange == idx` trick (so the gradient reaches the weight).
#[derive(Clone, Debug)]
pub struct Embedding {
    pub vocab_sz: usize,
    pub embed_sz: usize,
    /// (vocab_size, embed_size)
    pub weight: Tensor,
}

impl Embedding {
    pub fn new(vocab_size: usize, embed_size: usize) -> Result<Embedding> {
        Ok(Embedding {
            vocab_sz: vocab_size,
            embed_sz: embed_size,
            weight: Tensor::glorot_uniform(&[vocab_size, embed_size])?,
        })
    }
}

impl Forward for Embedding {
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        let mut big = idx.shape();
        let nd = big.len();
        big.extend([self.vocab_sz, self.embed_sz]);
        if idx.numel() == 0 {
            let mut shape = idx.shape();
            shape.push(self.embed_sz);
            return Tensor::empty_on(&shape, self.weight.dtype(), &self.weight.device());
        }
        let ones = |tail: [usize; 2]| -> Vec<isize> {
            let mut v = vec![1isize; nd];
            v.extend(tail.iter().map(|&t| t as isize));
            v
        };
        let big_i: Vec<isize> = big.iter().map(|&b| b as isize).collect();
        let arange = Tensor::arange_on(
            0i64.into(),
            (self.vocab_sz as i64).into(),
            1i64.into(),
            crate::dtypes::default_int,
            &self.weight.device(),
        )?
        .detach()
        .reshape(&ones([self.vocab_sz, 1]))?
        .expand(&big_i)?;
        let mut ishape: Vec<isize> = idx.shape().iter().map(|&s| s as isize).collect();
        ishape.extend([1, 1]);
        let idx = idx.reshape(&ishape)?.expand(&big_i)?;
        let vals = self
            .weight
            .reshape(&ones([self.vocab_sz, self.embed_sz]))?
            .expand(&big_i)?;
        arange.eq(&idx)?.mul(&vals)?.sum_axis(nd as isize, false)
    }
}

crate::module!(Embedding { weight });
