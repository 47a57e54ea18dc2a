//! The workloads W1..W12 of issue 10, as tensor graphs: each builder realizes its inputs (random,
//! seeded) and returns the lazy outputs to schedule and run. [`build_unfilled`] builds the same
//! graphs over empty (never written) input buffers: nothing runs, so the graphs can be scheduled
//! and compiled where no kernel can run (under valgrind, whose CPU lacks the host's AVX-512).

use std::cell::Cell;

use rawgrad::dtype::dtypes;
use rawgrad::{ConvArgs, Result, Tensor};

thread_local! {
    /// Inputs are empty buffers instead of realized random ones ([`build_unfilled`]).
    static UNFILLED: Cell<bool> = const { Cell::new(false) };
}

fn unfilled() -> bool {
    UNFILLED.with(Cell::get)
}

/// What a workload's rate is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// GFLOP/s against the FMA ceiling.
    Compute,
    /// GB/s against the copy ceiling.
    Memory,
}

/// One workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub id: &'static str,
    pub what: &'static str,
    pub bound: Bound,
    /// W9: a chain of eager steps instead of one graph.
    pub eager: bool,
    /// W4: steady state only (no warm-up run before the timed ones; it takes minutes unoptimized).
    pub steady_only: bool,
}

const fn w(id: &'static str, what: &'static str, bound: Bound) -> Workload {
    Workload {
        id,
        what,
        bound,
        eager: false,
        steady_only: false,
    }
}

/// W1..W12, as the issue lists them.
pub const ALL: [Workload; 12] = [
    w("W1", "a*b+c, 4194304 f32", Bound::Memory),
    w("W2", "sum last axis 4096x4096", Bound::Memory),
    w("W3", "matmul 1024^3", Bound::Compute),
    Workload {
        id: "W4",
        what: "matmul 4096^3 (steady state only)",
        bound: Bound::Compute,
        eager: false,
        steady_only: true,
    },
    w("W5", "conv2d 1x64x56x56, 64x64x3x3, pad 1", Bound::Compute),
    w("W6", "softmax last axis 4096x1024", Bound::Memory),
    w("W7", "MLP 784-512-512-10 fwd, b256", Bound::Compute),
    w("W8", "MLP one SGD step, b256", Bound::Compute),
    Workload {
        id: "W9",
        what: "64 chained 1024-elem kernels, eager",
        bound: Bound::Memory,
        eager: true,
        steady_only: false,
    },
    w("W10", "layernorm last axis 8192x1024", Bound::Memory),
    w("W11", "argmax last axis 4096x1024", Bound::Memory),
    w("W12", "2 pre-LN transformer blocks", Bound::Compute),
];

/// Kernels in W9's chain.
pub const CHAIN: usize = 64;

fn rand(shape: &[usize]) -> Result<Tensor> {
    if unfilled() {
        return Tensor::empty(shape);
    }
    Tensor::rand(shape)?.realize()
}

/// A weight of shape (fan_in, fan_out) (`linear` multiplies by it on the right) and a bias.
fn layer(fan_in: usize, fan_out: usize) -> Result<(Tensor, Tensor)> {
    let bias = || Tensor::zeros(&[fan_out])?.realize();
    if unfilled() {
        // a realized zeros stays a CONST (no kernel), as in the filled graph
        return Ok((Tensor::empty(&[fan_in, fan_out])?, bias()?));
    }
    let scale = 1.0 / (fan_in as f64).sqrt();
    let wgt = Tensor::rand(&[fan_in, fan_out])?
        .sub(0.5)?
        .mul(2.0 * scale)?;
    Ok((wgt.realize()?, bias()?))
}

fn mlp_params() -> Result<Vec<(Tensor, Tensor)>> {
    [(784, 512), (512, 512), (512, 10)]
        .iter()
        .map(|&(i, o)| layer(i, o))
        .collect()
}

fn mlp(x: &Tensor, params: &[(Tensor, Tensor)]) -> Result<Tensor> {
    let mut h = x.clone();
    for (i, (wgt, b)) in params.iter().enumerate() {
        h = h.linear(wgt, Some(b))?;
        if i + 1 < params.len() {
            h = h.relu()?;
        }
    }
    Ok(h)
}

/// One pre-LN transformer block: `x + attn(ln(x))`, then `x + mlp(ln(x))`.
fn block(x: &Tensor, heads: usize) -> Result<Tensor> {
    let s = x.shape();
    let (b, t, d) = (s[0], s[1], s[2]);
    let dh = (d / heads) as isize;
    let (bi, ti, hi) = (b as isize, t as isize, heads as isize);
    let split = |h: &Tensor| -> Result<Tensor> { h.reshape(&[bi, ti, hi, dh])?.transpose(1, 2) };
    let h = x.layernorm(-1, 1e-5)?;
    let (wq, bq) = layer(d, d)?;
    let (wk, bk) = layer(d, d)?;
    let (wv, bv) = layer(d, d)?;
    let (wo, bo) = layer(d, d)?;
    let q = split(&h.linear(&wq, Some(&bq))?)?;
    let k = split(&h.linear(&wk, Some(&bk))?)?;
    let v = split(&h.linear(&wv, Some(&bv))?)?;
    let a = q.scaled_dot_product_attention(&k, &v, None, 0.0, false)?;
    let a = a.transpose(1, 2)?.reshape(&[bi, ti, d as isize])?;
    let x = x.add(a.linear(&wo, Some(&bo))?)?;
    let (w1, b1) = layer(d, 4 * d)?;
    let (w2, b2) = layer(4 * d, d)?;
    let m = x.layernorm(-1, 1e-5)?.linear(&w1, Some(&b1))?.gelu()?;
    x.add(m.linear(&w2, Some(&b2))?)
}

/// [`build`] over empty input buffers (the same kernels; nothing runs before they are scheduled).
pub fn build_unfilled(id: &str) -> Result<Vec<Tensor>> {
    UNFILLED.with(|u| u.set(true));
    let out = build(id);
    UNFILLED.with(|u| u.set(false));
    out
}

/// The lazy outputs of workload `id` (inputs realized).
pub fn build(id: &str) -> Result<Vec<Tensor>> {
    Tensor::manual_seed(10)?;
    Ok(match id {
        "W1" => {
            let n = 4_194_304;
            let (a, b, c) = (rand(&[n])?, rand(&[n])?, rand(&[n])?);
            vec![a.mul(&b)?.add(&c)?]
        }
        "W2" => vec![rand(&[4096, 4096])?.sum_axis(-1, false)?],
        "W3" | "W4" => {
            let n = if id == "W3" { 1024 } else { 4096 };
            vec![rand(&[n, n])?.matmul(&rand(&[n, n])?)?]
        }
        "W5" => {
            let x = rand(&[1, 64, 56, 56])?;
            let wgt = rand(&[64, 64, 3, 3])?;
            vec![x.conv2d_with(
                &wgt,
                None,
                &ConvArgs {
                    padding: vec![1],
                    ..ConvArgs::default()
                },
            )?]
        }
        "W6" => vec![rand(&[4096, 1024])?.softmax(-1)?],
        "W7" => vec![mlp(&rand(&[256, 784])?, &mlp_params()?)?],
        "W8" => sgd_step()?,
        "W9" => vec![chain_step(&rand(&[1024])?)?],
        "W10" => vec![rand(&[8192, 1024])?.layernorm(-1, 1e-5)?],
        "W11" => vec![rand(&[4096, 1024])?.argmax_axis(-1, false)?],
        "W12" => {
            let mut x = rand(&[4, 128, 256])?;
            for _ in 0..2 {
                x = block(&x, 8)?;
            }
            vec![x]
        }
        other => rawgrad::bail!(InvalidArgument, "no workload {other} (W1..W12)"),
    })
}

/// One kernel of W9's chain.
pub fn chain_step(x: &Tensor) -> Result<Tensor> {
    x.mul(1.0001)?.add(0.5)
}

/// W8: the loss and the updated parameters of one SGD step (lr 0.01) of the MLP on a batch of
/// 256 random images with random labels.
fn sgd_step() -> Result<Vec<Tensor>> {
    let params: Vec<(Tensor, Tensor)> = mlp_params()?
        .into_iter()
        .map(|(w, b)| (w.requires_grad_(true), b.requires_grad_(true)))
        .collect();
    let x = rand(&[256, 784])?;
    let labels: Vec<i32> = (0..256).map(|i| i * 7 % 10).collect();
    let y = Tensor::from_vec(labels, &[256])?.cast(dtypes::int32)?;
    let loss = mlp(&x, &params)?.sparse_categorical_crossentropy(&y, -1, 0.0)?;
    loss.backward()?;
    let mut out = vec![loss];
    let _ng = Tensor::no_grad();
    for (w, b) in &params {
        for p in [w, b] {
            let g = p.grad().ok_or_else(|| {
                rawgrad::Error::Internal("W8: a parameter got no gradient".into())
            })?;
            let updated = p.detach().sub(g.mul(0.01)?)?;
            p.assign(&updated)?;
            out.push(p.clone());
        }
    }
    Ok(out)
}
