//! rawgrad's main job on the CPU: a 2-layer MLP forward pass with a softmax on a seeded random
//! batch, and a 17x33 @ 33x5 matmul, computed on the default device (CLANG on a machine without a
//! GPU) with one DEBUG line per kernel, then checked against a float64 reference on the host.
//!
//! Run: `cargo run --release --example quickstart` (pick a device with `CLANG=1`, `LLVM=1`,
//! `INTERP=1`, `AMD=1 MOCKGPU=1` or `DEVICE=...`).

use std::collections::HashSet;
use std::f64::consts::LN_2;

use rawgrad::device::registry::default_device;
use rawgrad::device::{Buffer, BufferOptions};
use rawgrad::dtype::dtypes;
use rawgrad::engine::memory::memory_planner;
use rawgrad::engine::realize::run_schedule;
use rawgrad::engine::schedule::create_schedule_with_vars;
use rawgrad::helpers::{Context, GlobalCounters};
use rawgrad::lazy::LazyBuffer;
use rawgrad::ops::{BinaryOps, ReduceOps, UnaryOps};
use rawgrad::shape::Node;
use rawgrad::{Error, Result};

/// A float32 matrix on the device: its lazy buffer and its shape.
#[derive(Clone)]
struct M {
    lb: LazyBuffer,
    shape: Vec<usize>,
}

fn nodes(shape: &[usize]) -> Vec<Node> {
    shape.iter().map(|&s| Node::Num(s as i64)).collect()
}

impl M {
    /// Host data copied to `device`.
    fn from_host(device: &str, shape: &[usize], data: &[f32]) -> Result<M> {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let opts = BufferOptions::default();
        let buf = Buffer::with_initial(device, data.len(), dtypes::float32, opts, &bytes)?;
        let lb = LazyBuffer::from_buffer(buf, &nodes(shape))?;
        Ok(M {
            lb,
            shape: shape.to_vec(),
        })
    }

    fn with(&self, lb: LazyBuffer, shape: &[usize]) -> M {
        M {
            lb,
            shape: shape.to_vec(),
        }
    }

    fn reshape(&self, shape: &[usize]) -> Result<M> {
        Ok(self.with(self.lb.reshape(&nodes(shape))?, shape))
    }

    fn expand(&self, shape: &[usize]) -> Result<M> {
        Ok(self.with(self.lb.expand(&nodes(shape))?, shape))
    }

    fn binary(&self, op: BinaryOps, other: &M) -> Result<M> {
        Ok(self.with(self.lb.e(op, &[&other.lb])?, &self.shape))
    }

    fn unary(&self, op: UnaryOps) -> Result<M> {
        Ok(self.with(self.lb.e(op, &[])?, &self.shape))
    }

    fn scalar(&self, op: BinaryOps, v: f64) -> Result<M> {
        let c = self.lb.const_like(v)?;
        Ok(self.with(self.lb.e(op, &[&c])?, &self.shape))
    }

    /// Reduce the last axis, keeping it as 1, then broadcast back to this shape.
    fn reduce_last_bcast(&self, op: ReduceOps) -> Result<M> {
        let last = self.shape.len() - 1;
        let mut kept = self.shape.clone();
        kept[last] = 1;
        let r = self.with(self.lb.r(op, &[last])?, &kept);
        r.expand(&self.shape)
    }

    /// `self (m x k) @ w (k x n)`: broadcast multiply over (m, n, k), sum over k.
    fn matmul(&self, w: &M) -> Result<M> {
        let (m, k, n) = (self.shape[0], self.shape[1], w.shape[1]);
        let x = self.reshape(&[m, 1, k])?.expand(&[m, n, k])?;
        let wt = w.with(w.lb.permute(&[1, 0])?, &[n, k]);
        let wt = wt.reshape(&[1, n, k])?.expand(&[m, n, k])?;
        let prod = x.binary(BinaryOps::MUL, &wt)?;
        let summed = prod.with(prod.lb.r(ReduceOps::SUM, &[2])?, &[m, n, 1]);
        summed.reshape(&[m, n])
    }

    /// `self + b` with `b` a row vector broadcast over the rows.
    fn add_row(&self, b: &M) -> Result<M> {
        let row = b.reshape(&[1, b.shape[0]])?.expand(&self.shape)?;
        self.binary(BinaryOps::ADD, &row)
    }

    fn relu(&self) -> Result<M> {
        self.scalar(BinaryOps::MAX, 0.0)
    }

    /// Softmax over the last axis: exp(x - max) / sum(exp(x - max)), with exp as EXP2 of
    /// x / ln 2 and the division as a multiply by the reciprocal (as tinygrad builds them).
    fn softmax(&self) -> Result<M> {
        let mx = self.reduce_last_bcast(ReduceOps::MAX)?;
        let shifted = self.binary(BinaryOps::ADD, &mx.unary(UnaryOps::NEG)?)?;
        let e = shifted
            .scalar(BinaryOps::MUL, 1.0 / LN_2)?
            .unary(UnaryOps::EXP2)?;
        let s = e.reduce_last_bcast(ReduceOps::SUM)?;
        e.binary(BinaryOps::MUL, &s.unary(UnaryOps::RECIP)?)
    }

    /// The values (this must be realized and contiguous).
    fn to_vec(&self) -> Result<Vec<f32>> {
        let buf = self
            .lb
            .base()
            .realized()
            .ok_or_else(|| Error::InvalidArgument("to_vec of an unrealized matrix".into()))?;
        Ok(buf
            .as_bytes()?
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// Schedule, plan memory, lower and run (what `Tensor.realize` does).
fn realize(outs: &[&M]) -> Result<()> {
    let lbs: Vec<LazyBuffer> = outs.iter().map(|m| m.lb.clone()).collect();
    let (sched, var_vals) = create_schedule_with_vars(&lbs, &mut HashSet::new())?;
    run_schedule(memory_planner(sched)?, &var_vals)
}

/// A seeded generator of normal-ish values (sum of uniforms), scaled.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn randn(&mut self, n: usize, scale: f64) -> Vec<f32> {
        (0..n)
            .map(|_| ((0..4).map(|_| self.uniform()).sum::<f64>() - 2.0) * scale)
            .map(|v| v as f32)
            .collect()
    }
}

fn host_matmul(a: &[f64], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|x| a[i * k + x] * b[x * n + j] as f64).sum();
        }
    }
    out
}

fn max_err(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).abs())
        .fold(0.0, f64::max)
}

fn main() -> Result<()> {
    let device = default_device()?;
    println!("rawgrad quickstart on {device}");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (batch, n_in, hidden, n_out) = (8, 64, 32, 10);
    let x = rng.randn(batch * n_in, 1.0);
    let w1 = rng.randn(n_in * hidden, 0.2);
    let b1 = rng.randn(hidden, 0.1);
    let w2 = rng.randn(hidden * n_out, 0.3);
    let b2 = rng.randn(n_out, 0.1);
    let a = rng.randn(17 * 33, 1.0);
    let b = rng.randn(33 * 5, 1.0);

    let tx = M::from_host(&device, &[batch, n_in], &x)?;
    let tw1 = M::from_host(&device, &[n_in, hidden], &w1)?;
    let tb1 = M::from_host(&device, &[hidden], &b1)?;
    let tw2 = M::from_host(&device, &[hidden, n_out], &w2)?;
    let tb2 = M::from_host(&device, &[n_out], &b2)?;
    let probs = tx
        .matmul(&tw1)?
        .add_row(&tb1)?
        .relu()?
        .matmul(&tw2)?
        .add_row(&tb2)?
        .softmax()?;
    let ta = M::from_host(&device, &[17, 33], &a)?;
    let tb = M::from_host(&device, &[33, 5], &b)?;
    let c = ta.matmul(&tb)?;

    GlobalCounters::reset();
    {
        let _debug = Context::new(&[("DEBUG", 2)]);
        realize(&[&probs, &c])?;
    }
    let gc = GlobalCounters::get();
    println!(
        "{} kernels, {} flops, {} bytes moved",
        gc.kernel_count, gc.global_ops, gc.global_mem
    );

    // The same computation on the host, in float64.
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut h = host_matmul(&xf, &w1, batch, n_in, hidden);
    for (i, v) in h.iter_mut().enumerate() {
        *v = (*v + b1[i % hidden] as f64).max(0.0);
    }
    let mut logits = host_matmul(&h, &w2, batch, hidden, n_out);
    for (i, v) in logits.iter_mut().enumerate() {
        *v += b2[i % n_out] as f64;
    }
    let mut want_probs = Vec::with_capacity(logits.len());
    for row in logits.chunks_exact(n_out) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        want_probs.extend(row.iter().map(|v| (v - m).exp() / s));
    }
    let af: Vec<f64> = a.iter().map(|&v| v as f64).collect();
    let want_c = host_matmul(&af, &b, 17, 33, 5);

    let got_probs = probs.to_vec()?;
    let got_c = c.to_vec()?;
    println!("mlp: x {:?} -> probs {:?}", tx.shape, probs.shape);
    let row0: Vec<String> = got_probs[..n_out]
        .iter()
        .map(|v| format!("{v:.4}"))
        .collect();
    println!("  probs[0] = [{}]", row0.join(", "));
    let classes: Vec<usize> = got_probs
        .chunks_exact(n_out)
        .map(|r| {
            (0..n_out)
                .max_by(|&i, &j| r[i].total_cmp(&r[j]))
                .unwrap_or(0)
        })
        .collect();
    println!("  argmax per row = {classes:?}");
    let row_sums: f64 = got_probs.iter().map(|&v| v as f64).sum();
    println!("  sum of all probabilities = {row_sums:.6} (rows: {batch})");
    println!("matmul: {:?} @ {:?} -> {:?}", ta.shape, tb.shape, c.shape);
    let c0: Vec<String> = got_c[..5].iter().map(|v| format!("{v:.4}")).collect();
    println!("  c[0] = [{}]", c0.join(", "));
    let checksum: f64 = got_c.iter().map(|&v| v as f64).sum::<f64>()
        + got_probs.iter().map(|&v| v as f64).sum::<f64>();
    println!("checksum = {checksum:.6}");
    let (ep, ec) = (max_err(&got_probs, &want_probs), max_err(&got_c, &want_c));
    println!("max |error| vs float64 host reference: probs {ep:.2e}, matmul {ec:.2e}");
    if ep > 1e-5 || ec > 1e-4 {
        return Err(Error::Runtime(format!(
            "the results differ from the host reference (probs {ep:e}, matmul {ec:e})"
        )));
    }
    println!("ok");
    Ok(())
}
