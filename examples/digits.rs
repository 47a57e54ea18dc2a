//! Train a small convolutional classifier on real data end to end: scikit-learn's 8x8
//! handwritten digits (1797 images), with rawgrad's nn layers (two Conv2d, max pooling, a
//! Linear), the Adam optimizer, a safetensors checkpoint saved and loaded back into a fresh
//! model, and the test accuracy of both printed.
//!
//! The data is not in the repository; export it once with the script `tools/digits/export.py`
//! (`pip install scikit-learn safetensors numpy`, then
//! `python3 tools/digits/export.py /tmp/rawgrad-digits.safetensors`), then run
//! `cargo run --release --example digits [path]` (`STEPS=n` changes the number of steps; pick a
//! device with `CLANG=1`, `LLVM=1`, ...).

use rawgrad::helpers::getenv;
use rawgrad::nn::optim::{adam, Optimizer};
use rawgrad::nn::{get_parameters, get_state_dict, load_state_dict, safe_load, safe_save};
use rawgrad::nn::{Conv2d, Forward, Linear};
use rawgrad::{ConvArgs, Error, Result, Tensor};

const TRAIN: usize = 1500;
const BATCH: usize = 64;

struct Net {
    c1: Conv2d,
    c2: Conv2d,
    l1: Linear,
}
rawgrad::module!(Net { c1, c2, l1 });

impl Net {
    fn new() -> Result<Net> {
        let same = ConvArgs::default().padding(1);
        Ok(Net {
            c1: Conv2d::new_with(1, 8, 3, same.clone(), true)?,
            c2: Conv2d::new_with(8, 16, 3, same, true)?,
            l1: Linear::new(16 * 2 * 2, 10, true)?,
        })
    }
}

impl Forward for Net {
    /// (N, 1, 8, 8) -> conv 8 -> relu -> pool 4x4 -> conv 16 -> relu -> pool 2x2 -> linear 10
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.c1.forward(x)?.relu()?.max_pool2d()?;
        let h = self.c2.forward(&h)?.relu()?.max_pool2d()?;
        self.l1.forward(&h.flatten(1, -1)?)
    }
}

/// Rows `idx` of `x` (host-side batching: the data is small).
fn rows<T: rawgrad::tensor::Element>(
    x: &[T],
    per: usize,
    idx: &[usize],
    shape: &[usize],
) -> Result<Tensor> {
    let v: Vec<T> = idx
        .iter()
        .flat_map(|&i| x[i * per..(i + 1) * per].iter().copied())
        .collect();
    Tensor::from_vec(v, shape)
}

fn accuracy(net: &Net, x: &Tensor, y: &[i32]) -> Result<f64> {
    let _ng = Tensor::no_grad();
    let pred = net.forward(x)?.argmax_axis(-1, false)?.to_vec::<i32>()?;
    Ok(pred.iter().zip(y).filter(|(p, t)| p == t).count() as f64 / y.len() as f64)
}

fn main() -> Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/rawgrad-digits.safetensors".into());
    let data = safe_load(&path).map_err(|e| {
        Error::Runtime(format!(
            "{e}\n(export the data first: python3 tools/digits/export.py {path})"
        ))
    })?;
    let (images, labels) = match (data.get("images"), data.get("labels")) {
        (Some(i), Some(l)) => (i.to_vec::<f32>()?, l.to_vec::<i32>()?),
        _ => return Err(Error::Runtime(format!("{path}: no images/labels tensors"))),
    };
    let n = labels.len();
    println!(
        "digits: {n} images of 8x8, {TRAIN} to train, {} to test",
        n - TRAIN
    );
    let test_idx: Vec<usize> = (TRAIN..n).collect();
    let x_test = rows(&images, 64, &test_idx, &[n - TRAIN, 1, 8, 8])?;
    let y_test = &labels[TRAIN..];

    Tensor::manual_seed(1337)?;
    let net = Net::new()?;
    let opt = adam(&get_parameters(&net), 0.01)?;
    let steps = getenv("STEPS", 300).max(1) as usize;
    let mut order: Vec<usize> = (0..TRAIN).collect();
    let mut seed = 42u64;
    let t0 = std::time::Instant::now();
    for step in 0..steps {
        if step % (TRAIN / BATCH) == 0 {
            for i in (1..order.len()).rev() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                order.swap(i, (seed >> 33) as usize % (i + 1));
            }
        }
        let start = (step % (TRAIN / BATCH)) * BATCH;
        let idx = &order[start..start + BATCH];
        let x = rows(&images, 64, idx, &[BATCH, 1, 8, 8])?;
        let y = rows(&labels, 1, idx, &[BATCH])?;
        let _train = Tensor::train(true);
        opt.zero_grad();
        let loss = net
            .forward(&x)?
            .sparse_categorical_crossentropy(&y, -1, 0.0)?;
        loss.backward()?;
        opt.step()?;
        if step % 25 == 0 || step + 1 == steps {
            println!(
                "step {:4}  loss {:.4}  ({:.1}s)",
                step,
                loss.item::<f32>()?,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    let acc = accuracy(&net, &x_test, y_test)?;
    println!(
        "test accuracy: {:.2}% ({} of {})",
        acc * 100.0,
        (acc * y_test.len() as f64).round(),
        y_test.len()
    );

    let ckpt = std::env::temp_dir().join("rawgrad-digits-model.safetensors");
    safe_save(&get_state_dict(&net), &ckpt, None)?;
    let restored = Net::new()?;
    load_state_dict(&restored, &safe_load(&ckpt)?, true)?;
    let acc2 = accuracy(&restored, &x_test, y_test)?;
    println!(
        "checkpoint {} reloaded into a fresh model: test accuracy {:.2}%",
        ckpt.display(),
        acc2 * 100.0
    );
    if acc2 != acc || acc < 0.8 {
        return Err(Error::Runtime(format!(
            "digits: accuracy {acc} (reloaded {acc2})"
        )));
    }
    println!("ok");
    Ok(())
}
