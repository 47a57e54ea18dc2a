//! rawgrad's main job on the CPU: train a 2-layer MLP classifier with SGD on a seeded synthetic
//! dataset (forward, loss, backward, update: every step is scheduled, fused, compiled and run by
//! rawgrad), print one DEBUG=2 line per kernel of the first step, then check the trained model's
//! forward pass and a 17x33 @ 33x5 matmul against a float64 reference computed on the host.
//!
//! Run: `cargo run --release --example quickstart` (pick a device with `CLANG=1`, `LLVM=1`,
//! `INTERP=1`, `AMD=1 MOCKGPU=1` or `DEVICE=...`; `STEPS=n` changes the number of SGD steps).

use rawgrad::helpers::{getenv, Context, GlobalCounters};
use rawgrad::{Error, Result, Tensor};

const BATCH: usize = 64;
const N_IN: usize = 16;
const HIDDEN: usize = 32;
const N_OUT: usize = 4;

/// The model's parameters.
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    fn new() -> Result<Mlp> {
        let param = |t: Tensor| -> Result<Tensor> { Ok(t.realize()?.requires_grad_(true)) };
        Ok(Mlp {
            w1: param(Tensor::kaiming_uniform(&[N_IN, HIDDEN], 5f64.sqrt())?)?,
            b1: param(Tensor::zeros(&[HIDDEN])?)?,
            w2: param(Tensor::kaiming_uniform(&[HIDDEN, N_OUT], 5f64.sqrt())?)?,
            b2: param(Tensor::zeros(&[N_OUT])?)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w1)?
            .add(&self.b1)?
            .relu()?
            .matmul(&self.w2)?
            .add(&self.b2)
    }

    fn params(&self) -> [&Tensor; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    /// One SGD step on (x, y); returns the loss before the update.
    fn step(&self, x: &Tensor, y: &Tensor, lr: f64) -> Result<f32> {
        let loss = self
            .forward(x)?
            .sparse_categorical_crossentropy(y, -1, 0.0)?;
        loss.backward()?;
        let mut updated = Vec::new();
        for p in self.params() {
            let g = p
                .grad()
                .ok_or_else(|| Error::Runtime("quickstart: a parameter got no gradient".into()))?;
            let new = p.detach().sub(g.mul(lr)?)?;
            p.assign(&new)?;
            p.set_grad(None);
            updated.push(p.clone());
        }
        let others: Vec<&Tensor> = updated.iter().collect();
        loss.realize_all(&others)?;
        loss.item::<f32>()
    }
}

/// The labels of the synthetic task: the class is the quadrant of (x0 + x1, x2 - x3).
fn labels(x: &[f32]) -> Vec<i32> {
    x.chunks_exact(N_IN)
        .map(|r| 2 * ((r[0] + r[1]) > 0.0) as i32 + ((r[2] - r[3]) > 0.0) as i32)
        .collect()
}

fn host_matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|x| a[i * k + x] * b[x * n + j]).sum();
        }
    }
    out
}

fn f64s(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_vec::<f32>()?.into_iter().map(f64::from).collect())
}

/// The forward pass in float64 on the host, from the device's parameters.
fn host_forward(m: &Mlp, x: &[f64]) -> Result<Vec<f64>> {
    let (w1, b1, w2, b2) = (f64s(&m.w1)?, f64s(&m.b1)?, f64s(&m.w2)?, f64s(&m.b2)?);
    let mut h = host_matmul(x, &w1, BATCH, N_IN, HIDDEN);
    for (i, v) in h.iter_mut().enumerate() {
        *v = (*v + b1[i % HIDDEN]).max(0.0);
    }
    let mut out = host_matmul(&h, &w2, BATCH, HIDDEN, N_OUT);
    for (i, v) in out.iter_mut().enumerate() {
        *v += b2[i % N_OUT];
    }
    Ok(out)
}

fn max_err(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max)
}

fn accuracy(logits: &Tensor, y: &[i32]) -> Result<f64> {
    let pred = logits.argmax_axis(-1, false)?.to_vec::<i32>()?;
    let hits = pred.iter().zip(y).filter(|(p, t)| p == t).count();
    Ok(hits as f64 / y.len() as f64)
}

fn main() -> Result<()> {
    let device = rawgrad::runtime::builtin::default_device()?;
    println!("rawgrad quickstart on {device}");
    Tensor::manual_seed(42)?;
    let x = Tensor::randn(&[BATCH, N_IN])?.realize()?;
    let xs = x.to_vec::<f32>()?;
    let ys = labels(&xs);
    let y = Tensor::from_slice(&ys, &[BATCH])?;
    let model = Mlp::new()?;

    let steps = getenv("STEPS", 30).max(1) as usize;
    GlobalCounters::reset();
    let first = {
        let _debug = Context::new(&[("DEBUG", 2)]);
        model.step(&x, &y, 0.5)?
    };
    let gc = GlobalCounters::get();
    println!(
        "step 1: {} kernels, {} flops, {} bytes moved, loss {first:.4}",
        gc.kernel_count, gc.global_ops, gc.global_mem
    );
    let mut last = first;
    for s in 2..=steps {
        last = model.step(&x, &y, 0.5)?;
        if s % 10 == 0 || s == steps {
            println!("step {s}: loss {last:.4}");
        }
    }

    let logits = {
        let _ng = Tensor::no_grad();
        model.forward(&x)?.realize()?
    };
    let acc = accuracy(&logits, &ys)?;
    println!("train accuracy after {steps} steps: {:.1}%", acc * 100.0);
    let xf: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
    let e_fwd = max_err(&f64s(&logits)?, &host_forward(&model, &xf)?);

    let a = Tensor::randn(&[17, 33])?;
    let b = Tensor::randn(&[33, 5])?;
    let c = a.matmul(&b)?;
    let want_c = host_matmul(&f64s(&a)?, &f64s(&b)?, 17, 33, 5);
    let got_c = f64s(&c)?;
    let row0: Vec<String> = got_c[..5].iter().map(|v| format!("{v:.4}")).collect();
    println!("matmul (17, 33) @ (33, 5): c[0] = [{}]", row0.join(", "));
    let e_mm = max_err(&got_c, &want_c);
    println!("max |error| vs float64 host reference: forward {e_fwd:.2e}, matmul {e_mm:.2e}");
    if e_fwd > 1e-4 || e_mm > 1e-4 || last >= first || !last.is_finite() {
        return Err(Error::Runtime(format!(
            "quickstart: wrong result (forward error {e_fwd:e}, matmul error {e_mm:e}, \
             loss {first} -> {last})"
        )));
    }
    println!("ok");
    Ok(())
}
