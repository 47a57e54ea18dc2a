//! Creating tensors (tinygrad 0.9.1's creation helpers): from host data, scalars, `empty`,
//! `full` and its variants, `arange`, `eye`, and moving between devices and dtypes.
//!
//! Every creation function puts the tensor on the default device ([`default_device`]: the
//! `DEVICE=`/`CLANG=1`-style knobs, overridable per thread with `helpers::Context`); `to` moves
//! it. Host data is copied into a device buffer at once (the device is opened then).
//!
//! Not guaranteed: `arange` of an empty range gives an empty tensor (tinygrad 0.9.1 fails an
//! assertion in `_cumsum`).

use super::{fmt_shape, function as F, prod, to_sints, Element, Tensor};
use crate::device::registry::canonicalize;
use crate::device::{Buffer, BufferOptions};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::lazy::{LazyBuffer, LbArg};
use crate::ops::{ConstArg, LoadOps};
use crate::runtime::builtin::{default_device, register_builtin_families};
use crate::{bail, ensure, Result};

/// The bounds of [`Tensor::arange`]: `start`, `stop` and `step` (tinygrad's
/// `arange(start, stop=None, step=1)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArangeArgs {
    pub start: ConstValue,
    pub stop: ConstValue,
    pub step: ConstValue,
}

macro_rules! arange_from {
    ($($t:ty),*) => {$(
        impl From<$t> for ArangeArgs {
            /// `arange(n)`: `0..n` in steps of 1.
            fn from(n: $t) -> ArangeArgs {
                let stop = ConstValue::from(n);
                let zero = |v: ConstValue| match v {
                    ConstValue::Float(_) => ConstValue::Float(0.0),
                    _ => ConstValue::Int(0),
                };
                let one = |v: ConstValue| match v {
                    ConstValue::Float(_) => ConstValue::Float(1.0),
                    _ => ConstValue::Int(1),
                };
                ArangeArgs { start: zero(stop), stop, step: one(stop) }
            }
        }
        impl From<std::ops::Range<$t>> for ArangeArgs {
            fn from(r: std::ops::Range<$t>) -> ArangeArgs {
                let mut a = ArangeArgs::from(r.end);
                a.start = ConstValue::from(r.start);
                a
            }
        }
    )*};
}
arange_from!(i32, i64, isize, usize, u32, u64, f32, f64);

impl<A: Into<ConstValue>, B: Into<ConstValue>> From<(A, B)> for ArangeArgs {
    fn from((start, stop): (A, B)) -> ArangeArgs {
        ArangeArgs {
            start: start.into(),
            stop: stop.into(),
            step: ConstValue::Int(1),
        }
    }
}

impl<A: Into<ConstValue>, B: Into<ConstValue>, C: Into<ConstValue>> From<(A, B, C)> for ArangeArgs {
    fn from((start, stop, step): (A, B, C)) -> ArangeArgs {
        ArangeArgs {
            start: start.into(),
            stop: stop.into(),
            step: step.into(),
        }
    }
}

impl Tensor {
    /// A tensor holding `data` (row-major) with shape `shape`, on the default device.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_slice(&data, shape)
    }

    /// A tensor holding a copy of `data` (row-major) with shape `shape`, on the default device.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        let device = default_device()?;
        Tensor::from_slice_on(data, shape, &device)
    }

    /// [`Tensor::from_slice`] on a named device.
    pub fn from_slice_on<T: Element>(data: &[T], shape: &[usize], device: &str) -> Result<Tensor> {
        ensure!(
            data.len() == prod(shape),
            InvalidArgument,
            "from_slice: {} elements cannot have shape {}",
            data.len(),
            fmt_shape(shape)
        );
        let mut bytes = Vec::with_capacity(data.len() * T::DTYPE.itemsize());
        for v in data {
            v.write_ne(&mut bytes);
        }
        Tensor::from_bytes_on(&bytes, shape, T::DTYPE, device)
    }

    /// A tensor of `dtype` and `shape` holding `bytes` (the elements' native-endian bytes, row
    /// major) on `device` (tinygrad's `Tensor(bytes)` followed by a bitcast).
    pub fn from_bytes_on(
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
        device: &str,
    ) -> Result<Tensor> {
        let n = prod(shape);
        ensure!(
            Some(bytes.len()) == n.checked_mul(dtype.itemsize()),
            InvalidArgument,
            "from_bytes: {} bytes cannot hold {dtype:?} of shape {}",
            bytes.len(),
            fmt_shape(shape)
        );
        let device = canonicalize(device);
        let sh = to_sints(shape)?;
        if n == 0 {
            let lb =
                LazyBuffer::loadop(LoadOps::EMPTY, &sh, dtype, &device, LbArg::None, &[], false)?;
            return Ok(Tensor::from_lazybuffer(lb, None));
        }
        // the buffer allocates through the registry's table: make sure it knows the built-ins
        register_builtin_families();
        let buf = Buffer::new(&device, n, dtype, BufferOptions::default());
        buf.copyin(bytes)?;
        let lb = LazyBuffer::from_buffer(buf, &sh)?;
        Ok(Tensor::from_lazybuffer(lb, None))
    }

    /// A 0-d tensor of `v` (dtype from the Rust type: float32 for floats, int32 for integers,
    /// bool for bools; tinygrad's `dtypes.from_py`), on the default device.
    pub fn scalar(v: impl Into<ConstValue>) -> Result<Tensor> {
        let v = v.into();
        Tensor::scalar_on(v, v.default_dtype(), &default_device()?)
    }

    /// A 0-d CONST tensor of `v` as `dtype` on `device` (tinygrad's `Tensor(v, device, dtype)`).
    pub fn scalar_on(v: impl Into<ConstValue>, dtype: DType, device: &str) -> Result<Tensor> {
        let arg = LbArg::Const(ConstArg::Value(v.into().as_const(dtype)));
        let lb = LazyBuffer::loadop(LoadOps::CONST, &[], dtype, device, arg, &[], false)?;
        Ok(Tensor::from_lazybuffer(lb, None))
    }

    /// An uninitialised float32 tensor (tinygrad's `Tensor.empty`).
    pub fn empty(shape: &[usize]) -> Result<Tensor> {
        Tensor::empty_dtype(shape, dtypes::default_float)
    }

    /// An uninitialised tensor of `dtype`.
    pub fn empty_dtype(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::empty_on(shape, dtype, &default_device()?)
    }

    /// An uninitialised tensor of `dtype` on `device`.
    pub fn empty_on(shape: &[usize], dtype: DType, device: &str) -> Result<Tensor> {
        let lb = LazyBuffer::loadop(
            LoadOps::EMPTY,
            &to_sints(shape)?,
            dtype,
            device,
            LbArg::None,
            &[],
            false,
        )?;
        Ok(Tensor::from_lazybuffer(lb, None))
    }

    /// A tensor filled with `v` (dtype from the Rust type, see [`Tensor::scalar`]): a CONST
    /// reshaped to 1s and expanded.
    pub fn full(shape: &[usize], v: impl Into<ConstValue>) -> Result<Tensor> {
        let v = v.into();
        Tensor::full_dtype(shape, v, v.default_dtype())
    }

    /// A tensor of `dtype` filled with `v`.
    pub fn full_dtype(shape: &[usize], v: impl Into<ConstValue>, dtype: DType) -> Result<Tensor> {
        Tensor::full_on(shape, v, dtype, &default_device()?)
    }

    /// A tensor of `dtype` on `device` filled with `v`.
    pub fn full_on(
        shape: &[usize],
        v: impl Into<ConstValue>,
        dtype: DType,
        device: &str,
    ) -> Result<Tensor> {
        let c = Tensor::scalar_on(v, dtype, device)?;
        c.reshape_sints(&to_sints(&vec![1; shape.len()])?)?
            .broadcast_to(shape)
    }

    /// float32 zeros.
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 0.0)
    }
    /// float32 ones.
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 1.0)
    }
    /// A tensor like this one (shape, dtype, device) filled with `v`.
    pub fn full_like(&self, v: impl Into<ConstValue>) -> Result<Tensor> {
        Tensor::full_on(&self.shape(), v, self.dtype(), &self.device())
    }
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.full_like(0i64)
    }
    pub fn ones_like(&self) -> Result<Tensor> {
        self.full_like(1i64)
    }

    /// tinygrad's `arange`: `[start, stop)` in steps of `step`; int32 when every bound is an
    /// integer, else float32 (a `full` of `step`, cumulative sum, plus `start - step`). Takes
    /// `n` (`0..n`), `(start, stop)`, `(start, stop, step)` or a range: `Tensor::arange(5)`,
    /// `Tensor::arange((2, 8, 3))`, `Tensor::arange(0.0..1.0)`.
    pub fn arange(args: impl Into<ArangeArgs>) -> Result<Tensor> {
        let ArangeArgs { start, stop, step } = args.into();
        let float = [start, stop, step]
            .iter()
            .any(|v| matches!(v, ConstValue::Float(_)));
        let dtype = if float {
            dtypes::default_float
        } else {
            dtypes::default_int
        };
        Tensor::arange_on(start, stop, step, dtype, &default_device()?)
    }

    /// [`Tensor::arange`] with an explicit dtype and device.
    pub fn arange_on(
        start: ConstValue,
        stop: ConstValue,
        step: ConstValue,
        dtype: DType,
        device: &str,
    ) -> Result<Tensor> {
        let (a, b, s) = (start.as_f64(), stop.as_f64(), step.as_f64());
        ensure!(
            s != 0.0 && a.is_finite() && b.is_finite() && s.is_finite(),
            InvalidArgument,
            "arange: bad arguments start={start}, stop={stop}, step={step}"
        );
        let n = ((b - a) / s).ceil().max(0.0);
        if n >= 1e15 {
            bail!(
                InvalidArgument,
                "arange: {n} elements are too many (start={start}, stop={stop}, step={step})"
            );
        }
        let n = n as usize;
        if n == 0 {
            return Tensor::full_on(&[0], 0i64, dtype, device);
        }
        let offset = match (start, step) {
            (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => ConstValue::Float(a - s),
            _ => ConstValue::Int(start.as_i128() - step.as_i128()),
        };
        Tensor::full_on(&[n], step, dtype, device)?
            ._cumsum(0, false)?
            .add(offset)?
            .cast(dtype)
    }

    /// The `dim` x `dim` identity matrix (float32): ones padded, flattened and shrunk.
    pub fn eye(dim: usize) -> Result<Tensor> {
        Tensor::eye_on(dim, dtypes::default_float, &default_device()?)
    }

    /// [`Tensor::eye`] with an explicit dtype and device.
    pub fn eye_on(dim: usize, dtype: DType, device: &str) -> Result<Tensor> {
        Tensor::full_on(&[dim, 1], 1i64, dtype, device)?
            .pad(&[None, Some((0, dim))])?
            .flatten(0, -1)?
            .shrink(&[Some((
                0,
                super::mul_size(dim, dim, || format!("eye({dim})"))?,
            ))])?
            .reshape(&[dim as isize, dim as isize])
    }

    /// tinygrad's `to(device)`: the same data on another device (a lazy COPY; nothing if it is
    /// already there). The gradient moves along; the autograd context is shared.
    pub fn to(&self, device: &str) -> Result<Tensor> {
        let device = canonicalize(device);
        if device == self.device() {
            return Ok(self.clone());
        }
        let lb = self.lazydata().copy_to_device(&device, false)?;
        let ret = Tensor::from_lazybuffer(lb, self.requires_grad());
        if let Some(g) = self.grad() {
            ret.set_grad(Some(g.to(&device)?));
        }
        ret.set_ctx(self.ctx());
        Ok(ret)
    }

    /// Alias of [`Tensor::to`].
    pub fn with_device(&self, device: &str) -> Result<Tensor> {
        self.to(device)
    }

    /// Alias of [`Tensor::cast`].
    pub fn with_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.cast(dtype)
    }

    /// tinygrad's `cast`: the values converted to `dtype` (nothing when it already is).
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        F::cast(self, dtype, false)
    }

    /// tinygrad's `bitcast`: the bits reinterpreted as `dtype` of the same size (not through
    /// autograd).
    pub fn bitcast(&self, dtype: DType) -> Result<Tensor> {
        if self.requires_grad() == Some(true) {
            bail!(InvalidArgument, "bitcast: can't backprop through bitcast");
        }
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        ensure!(
            self.dtype().itemsize() == dtype.itemsize() || self.device().starts_with("DISK"),
            InvalidArgument,
            "bitcast: {:?} and {dtype:?} have different sizes ({} and {} bytes)",
            self.dtype(),
            self.dtype().itemsize(),
            dtype.itemsize()
        );
        F::cast(self, dtype, true)
    }

    /// `cast(float32)`.
    pub fn float(&self) -> Result<Tensor> {
        self.cast(dtypes::float32)
    }
    /// `cast(float16)`.
    pub fn half(&self) -> Result<Tensor> {
        self.cast(dtypes::float16)
    }

    /// tinygrad's `contiguous`: materialize this view in its own buffer (a no-op kernel-wise
    /// when it already is contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        F::contiguous(self)
    }
    /// tinygrad's `contiguous_backward`: make the gradient contiguous in the backward pass.
    pub fn contiguous_backward(&self) -> Result<Tensor> {
        F::contiguous_backward(self)
    }
}
