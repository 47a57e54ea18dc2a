//! Random numbers: tinygrad 0.9.1's `THREEFRY=1` generator, in tensor ops over uint32 (so the
//! same values come out on every device and match JAX's threefry-2x32), and the distributions
//! built on it (`randn` by Box-Muller, `randint`, `uniform`, `normal`, the initialisers).
//!
//! State (tinygrad's `Tensor._seed` and `_rng_counter`) is process-wide: the seed and a
//! one-element uint32 counter tensor on the device, advanced by an `assign` each draw, so a
//! captured graph that replays a draw keeps producing fresh numbers.
//!
//! Not guaranteed: tinygrad's default (non-THREEFRY) generator, numpy's PCG64 filled on the
//! host, is not reproduced; rawgrad always uses threefry. Draws from several threads at once are
//! serialised.

use std::f64::consts::PI;
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::{prod, Tensor};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::runtime::builtin::default_device;
use crate::{ensure, Result};

struct RngState {
    seed: u32,
    counter: Option<Tensor>,
}

fn rng() -> MutexGuard<'static, RngState> {
    static RNG: OnceLock<Mutex<RngState>> = OnceLock::new();
    RNG.get_or_init(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Mutex::new(RngState {
            seed: secs as u32,
            counter: None,
        })
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

fn new_counter() -> Result<Tensor> {
    let t = Tensor::from_slice(&[0u32], &[1])?;
    t.set_requires_grad(Some(false));
    Ok(t)
}

/// The threefry rotations of even and odd rounds.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

impl Tensor {
    /// tinygrad's `manual_seed`: set the seed and restart the counter.
    pub fn manual_seed(seed: u32) -> Result<()> {
        let counter = new_counter()?;
        let mut st = rng();
        st.seed = seed;
        st.counter = Some(counter);
        Ok(())
    }

    /// Uniform float32 values in `[0, 1)`.
    pub fn rand(shape: &[usize]) -> Result<Tensor> {
        Tensor::rand_dtype(shape, dtypes::default_float)
    }

    /// Uniform values in `[0, 1)` as `dtype` (threefry-2x32, tinygrad's `THREEFRY=1`).
    pub fn rand_dtype(shape: &[usize], dtype: DType) -> Result<Tensor> {
        let device = default_device()?;
        Tensor::rand_on(shape, dtype, &device)
    }

    /// [`Tensor::rand_dtype`] on a named device.
    pub fn rand_on(shape: &[usize], dtype: DType, device: &str) -> Result<Tensor> {
        let num = prod(shape);
        if num == 0 {
            return Tensor::full_on(shape, 0i64, dtype, device);
        }
        ensure!(
            num < (1usize << 32),
            InvalidArgument,
            "rand: {num} values do not fit the uint32 counter"
        );
        let mut st = rng();
        if st.counter.is_none() {
            st.counter = Some(new_counter()?);
        }
        let Some(counter) = st.counter.clone() else {
            return Err(crate::Error::Internal("rand: no counter".into()));
        };
        let seed = st.seed;
        let half = num.div_ceil(2);
        let u32c = |v: usize| ConstValue::Int(v as i128);
        let counts1 = Tensor::arange_on(u32c(0), u32c(half), u32c(1), dtypes::uint32, device)?
            .detach()
            .add(&counter.to(device)?)?
            .realize()?;
        let counts2 = counts1.add(u32c(half))?;
        counter.assign(&counter.add(u32c(num))?)?;
        counter.realize()?;
        drop(st);
        let ks: [i128; 3] = [0, (seed ^ 0x1BD1_1BDA) as i128, seed as i128];
        let mut x = [
            counts1.add(ConstValue::Int(ks[2]))?,
            counts2.add(ConstValue::Int(ks[0]))?,
        ];
        for i in 0..5usize {
            for &r in &ROTATIONS[i % 2] {
                let x0 = x[0].add(&x[1])?;
                let rot = x[1].lshift(r)?.add(&x[1].rshift(32 - r)?)?;
                x = [x0.clone(), x0.xor(&rot)?];
            }
            x = [
                x[0].add(ConstValue::Int(ks[i % 3]))?,
                x[1].add(ConstValue::Int(ks[(i + 1) % 3]))?
                    .add(ConstValue::Int(i as i128))?
                    .add(1i64)?,
            ];
        }
        let out = x[0]
            .cat(&[&x[1]], 0)?
            .rshift(8)?
            .cast(dtypes::float32)?
            .div(ConstValue::Int(1 << 24))?
            .getitem(&[super::Index::Slice(None, Some(num as isize), None)])?;
        let shape_i: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
        let out = out.reshape(&shape_i)?.cast(dtype)?;
        out.set_requires_grad(None);
        out.contiguous()
    }

    /// Standard normal float32 values (Box-Muller on two uniform draws).
    pub fn randn(shape: &[usize]) -> Result<Tensor> {
        Tensor::randn_dtype(shape, dtypes::default_float)
    }

    /// Standard normal values as `dtype`.
    pub fn randn_dtype(shape: &[usize], dtype: DType) -> Result<Tensor> {
        let mut s2 = vec![2];
        s2.extend_from_slice(shape);
        let src = Tensor::rand_dtype(&s2, dtypes::float32)?;
        let a = src.getitem(&[super::Index::Int(0)])?;
        let b = src.getitem(&[super::Index::Int(1)])?;
        let r = b.rsub(1i64)?.log()?.mul(-2i64)?.sqrt()?;
        a.mul(2.0 * PI)?.cos()?.mul(&r)?.cast(dtype)
    }

    /// Uniform integers in `[low, high)` as int32.
    pub fn randint(shape: &[usize], low: i64, high: i64) -> Result<Tensor> {
        Tensor::uniform_dtype(
            shape,
            ConstValue::Int(low as i128),
            ConstValue::Int(high as i128),
            dtypes::int32,
        )
    }

    /// Uniform float32 values in `[low, high)`.
    pub fn uniform(shape: &[usize], low: f64, high: f64) -> Result<Tensor> {
        Tensor::uniform_dtype(shape, low.into(), high.into(), dtypes::default_float)
    }

    /// Uniform values in `[low, high)` as `dtype`: `((high - low) * rand).cast(dtype) + low`.
    pub fn uniform_dtype(
        shape: &[usize],
        low: ConstValue,
        high: ConstValue,
        dtype: DType,
    ) -> Result<Tensor> {
        let span = match (low, high) {
            (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => {
                ConstValue::Float(high.as_f64() - low.as_f64())
            }
            _ => ConstValue::Int(high.as_i128() - low.as_i128()),
        };
        Tensor::rand(shape)?.rmul(span)?.cast(dtype)?.add(low)
    }

    /// Normal values with `mean` and `std`: `std * randn + mean`.
    pub fn normal(shape: &[usize], mean: f64, std: f64) -> Result<Tensor> {
        Tensor::randn(shape)?.rmul(std)?.add(mean)
    }

    /// Uniform in `[-1, 1)` scaled by `prod(shape) ** -0.5`.
    pub fn scaled_uniform(shape: &[usize]) -> Result<Tensor> {
        Tensor::uniform(shape, -1.0, 1.0)?.mul((prod(shape) as f64).powf(-0.5))
    }

    /// Glorot (Xavier) uniform initialisation.
    pub fn glorot_uniform(shape: &[usize]) -> Result<Tensor> {
        let fan = shape.first().copied().unwrap_or(0) + prod(shape.get(1..).unwrap_or(&[]));
        Tensor::uniform(shape, -1.0, 1.0)?.mul((6.0 / fan as f64).powf(0.5))
    }

    /// Kaiming (He) uniform initialisation with leaky-relu slope `a`.
    pub fn kaiming_uniform(shape: &[usize], a: f64) -> Result<Tensor> {
        let fan_in = prod(shape.get(1..).unwrap_or(&[])) as f64;
        let bound = 3f64.sqrt() * (2.0 / (1.0 + a * a)).sqrt() / fan_in.sqrt();
        Tensor::uniform(shape, -bound, bound)
    }

    /// Kaiming (He) normal initialisation with leaky-relu slope `a`.
    pub fn kaiming_normal(shape: &[usize], a: f64) -> Result<Tensor> {
        let fan_in = prod(shape.get(1..).unwrap_or(&[])) as f64;
        let std = (2.0 / (1.0 + a * a)).sqrt() / fan_in.sqrt();
        Tensor::normal(shape, 0.0, std)
    }

    /// tinygrad's `multinomial`: `num_samples` category indices (int32) per row of the
    /// weights (1-D or 2-D), drawn by comparing uniform samples with the cumulative
    /// distribution. Without replacement only one sample is supported (as in tinygrad).
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Result<Tensor> {
        ensure!(
            (1..=2).contains(&self.ndim()) && num_samples > 0,
            InvalidArgument,
            "multinomial: self.ndim={} must be 1 or 2 dim, num_samples={num_samples} must be positive",
            self.ndim()
        );
        ensure!(
            replacement || num_samples == 1,
            InvalidArgument,
            "multinomial: no replacement only supports num_samples = 1"
        );
        let weight = if self.ndim() == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let cw = weight.cumsum(1)?.float()?;
        let last = cw.getitem(&[super::Index::all(), super::Index::Int(-1)])?;
        let cdf = cw.div(&last.unsqueeze(1)?)?;
        let (rows, cols) = (cdf.shape()[0], cdf.shape()[1]);
        let unif = Tensor::rand_on(
            &[num_samples, rows, 1],
            dtypes::default_float,
            &self.device(),
        )?;
        let indices = unif
            .expand(&[-1, -1, cols as isize])?
            .ge(&cdf)?
            .sum_axis(2, false)?
            .permute(&[1, 0])?;
        let indices = if self.ndim() == 1 {
            indices.squeeze(Some(0))?
        } else {
            indices
        };
        indices.cast(dtypes::int32)
    }

    /// tinygrad's `dropout`: in training mode zero each element with probability `p` and scale
    /// the rest by `1 / (1 - p)`; otherwise the identity.
    pub fn dropout(&self, p: f64) -> Result<Tensor> {
        if !Tensor::is_training() || p == 0.0 {
            return Ok(self.clone());
        }
        let keep = Tensor::rand_on(&self.shape(), dtypes::default_float, &self.device())?
            .detach()
            .ge(p)?;
        self.mul(&keep)?.mul(1.0 / (1.0 - p))
    }
}

/// Host reference of threefry-2x32 with tinygrad's key schedule (used by the tests to check the
/// tensor version): the pair of outputs for counter words `(c0, c1)` and `seed`.
#[cfg(test)]
pub(crate) fn threefry2x32(c0: u32, c1: u32, seed: u32) -> (u32, u32) {
    let ks = [0u32, seed ^ 0x1BD1_1BDA, seed];
    let mut x = [c0.wrapping_add(ks[2]), c1.wrapping_add(ks[0])];
    for i in 0..5usize {
        for &r in &ROTATIONS[i % 2] {
            let x0 = x[0].wrapping_add(x[1]);
            x = [x0, x0 ^ x[1].rotate_left(r)];
        }
        x = [
            x[0].wrapping_add(ks[i % 3]),
            x[1].wrapping_add(ks[(i + 1) % 3])
                .wrapping_add(i as u32 + 1),
        ];
    }
    (x[0], x[1])
}
