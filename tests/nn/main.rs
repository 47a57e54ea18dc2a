//! tinygrad's `nn` in rawgrad: layers (`layers.rs`), optimizers (`optim.rs`), state dicts and
//! safetensors files (`state.rs`), and the Tensor methods and defaults added with them
//! (`methods.rs`), checked on CLANG and INTERP against reference values computed in float64 by
//! `tools/nn-reference/gen.py` (`values.rs`): forward values, and the gradient of
//! `(out + 1).square().mean()` for every input.

#[path = "../tensor_common/mod.rs"]
mod tensor_common;

mod layers;
mod methods;
mod optim;
mod state;
#[rustfmt::skip]
mod values;

use rawgrad::{Result, Tensor};
use tensor_common::reference::assert_close;
pub use tensor_common::{on, DEVICES};

/// The reference inputs: multiples of 1/8 in [-1, 1] (tools/nn-reference/gen.py's `vals`).
pub fn vals(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 8.0 - 1.0)
        .collect()
}

/// A float32 tensor of `vals` with `shape`.
pub fn arr(shape: &[usize], seed: usize) -> Tensor {
    Tensor::from_vec(vals(shape.iter().product(), seed), shape).unwrap()
}

/// `arr + add`.
pub fn arr_plus(shape: &[usize], seed: usize, add: f32) -> Tensor {
    let v: Vec<f32> = vals(shape.iter().product(), seed)
        .into_iter()
        .map(|x| x + add)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// The values of any tensor as f64.
pub fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

/// Check `f(inputs)` against `out` and the gradients of `(out + 1).square().mean()` against
/// `grads`, on every test device. `inputs` builds the (float32) inputs on the current device.
pub fn check_case(
    name: &str,
    inputs: &dyn Fn() -> Vec<Tensor>,
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    out: &[f64],
    grads: &[&[f64]],
) {
    for dev in DEVICES {
        let _d = on(dev);
        let xs: Vec<Tensor> = inputs()
            .into_iter()
            .map(|t| t.requires_grad_(true))
            .collect();
        let y = f(&xs).unwrap();
        assert_close(
            &f64s(&y),
            out,
            1e-5,
            1e-5,
            &format!("{name} forward on {dev}"),
        );
        let loss = y.add(1.0).unwrap().square().unwrap().mean().unwrap();
        loss.backward().unwrap();
        for (i, (x, g)) in xs.iter().zip(grads).enumerate() {
            let got = f64s(
                &x.grad()
                    .unwrap_or_else(|| panic!("{name}: input {i} has no grad")),
            );
            assert_close(&got, g, 2e-5, 1e-4, &format!("{name} grad {i} on {dev}"));
        }
    }
}

/// The message of an error result.
pub fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}
