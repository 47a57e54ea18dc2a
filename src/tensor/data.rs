//! Getting data in and out, and realization: the [`Element`] trait (Rust types to dtypes),
//! `schedule`/`realize` (scheduler, memory planner, then the realize engine through one
//! function, [`run_schedule`]), and `to_bytes`/`to_vec`/`numpy`/`to_f64_vec`/`item`.
//!
//! Not guaranteed: reading data copies straight from the tensor's device (tinygrad goes
//! through CLANG); values read from a tensor of a dtype Rust has no type for (none: every
//! rawgrad dtype has one) are unavailable.

use std::collections::HashSet;

use super::{fmt_shape, Tensor};
use crate::dtype::{dtypes, DType};
use crate::engine::schedule::{create_schedule_with_vars, ScheduleItem};
use crate::lazy::LazyBuffer;
use crate::shape::VarVals;
use crate::{bail, ensure, Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is one of rawgrad's dtypes (bool, i8..u64, f16, bf16, f32, f64).
pub trait Element: Copy + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed {
    /// The dtype of this type.
    const DTYPE: DType;
    /// The Rust type's name, for error messages.
    const NAME: &'static str;
    /// Append the value's native-endian bytes.
    fn write_ne(&self, out: &mut Vec<u8>);
    /// The value from exactly `DTYPE.itemsize()` native-endian bytes.
    fn read_ne(b: &[u8]) -> Self;
}

macro_rules! element {
    ($($t:ty => $dt:expr, $n:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $dt;
            const NAME: &'static str = stringify!($t);
            fn write_ne(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_ne_bytes());
            }
            fn read_ne(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().unwrap_or([0; $n]))
            }
        }
    )*};
}

element!(
    i8 => dtypes::int8, 1;
    u8 => dtypes::uint8, 1;
    i16 => dtypes::int16, 2;
    u16 => dtypes::uint16, 2;
    i32 => dtypes::int32, 4;
    u32 => dtypes::uint32, 4;
    i64 => dtypes::int64, 8;
    u64 => dtypes::uint64, 8;
    f32 => dtypes::float32, 4;
    f64 => dtypes::float64, 8;
    half::f16 => dtypes::float16, 2;
    half::bf16 => dtypes::bfloat16, 2;
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = dtypes::bool;
    const NAME: &'static str = "bool";
    fn write_ne(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn read_ne(b: &[u8]) -> Self {
        b.first().is_some_and(|&v| v != 0)
    }
}

/// A tensor's elements on the host, typed by its dtype ([`Tensor::numpy`]).
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    Bool(Vec<bool>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F16(Vec<half::f16>),
    BF16(Vec<half::bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl TensorData {
    /// Every element as f64 (bools as 0/1).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            TensorData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
            TensorData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::F64(v) => v.clone(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::Bool(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I16(v) => v.len(),
            TensorData::U16(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::U32(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::U64(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::BF16(v) => v.len(),
            TensorData::F32(v) => v.len(),
            TensorData::F64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shape and typed elements of a tensor read back to the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    pub shape: Vec<usize>,
    pub data: TensorData,
}

/// Run a schedule: the one seam between the Tensor API and the realize engine.
pub(crate) fn run_schedule(schedule: Vec<ScheduleItem>, var_vals: &VarVals) -> Result<()> {
    crate::engine::realize::run_schedule(schedule, var_vals)
}

/// One schedule-and-run at a time in the process. Scheduling marks nodes realized before the
/// kernels that compute them run, so a graph shared between threads (a `Tensor` sent to another
/// thread) could otherwise be read by one thread's kernels before another thread's kernels wrote
/// it. Re-entrant on one thread (a realize reached from inside a realize takes no second lock).
struct RealizeGuard(Option<std::sync::MutexGuard<'static, ()>>);

thread_local! {
    static REALIZING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl RealizeGuard {
    fn take() -> RealizeGuard {
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        if REALIZING.with(|r| r.replace(true)) {
            return RealizeGuard(None);
        }
        RealizeGuard(Some(ONE.lock().unwrap_or_else(|e| e.into_inner())))
    }
}

impl Drop for RealizeGuard {
    fn drop(&mut self) {
        if self.0.is_some() {
            REALIZING.with(|r| r.set(false));
        }
    }
}

impl Tensor {
    /// The LazyBuffers of `self` and `others`, for the scheduler.
    fn lbs(&self, others: &[&Tensor]) -> Vec<LazyBuffer> {
        std::iter::once(self)
            .chain(others.iter().copied())
            .map(Tensor::lazydata)
            .collect()
    }

    /// tinygrad's `schedule_with_vars`: the schedule that realizes `self` and `others` (after
    /// the memory planner) and the values of its bound variables.
    pub fn schedule_with_vars(&self, others: &[&Tensor]) -> Result<(Vec<ScheduleItem>, VarVals)> {
        let _one = RealizeGuard::take();
        let mut seen = HashSet::new();
        let (sched, var_vals) = create_schedule_with_vars(&self.lbs(others), &mut seen)?;
        Ok((crate::engine::memory::memory_planner(sched)?, var_vals))
    }

    /// tinygrad's `schedule`: like [`Tensor::schedule_with_vars`] for graphs without bound
    /// variables.
    pub fn schedule(&self, others: &[&Tensor]) -> Result<Vec<ScheduleItem>> {
        let (sched, var_vals) = self.schedule_with_vars(others)?;
        ensure!(
            var_vals.is_empty(),
            Schedule,
            "schedule: the graph has bound variables; use schedule_with_vars"
        );
        Ok(sched)
    }

    /// Compute `self` (and `others`) now; later reads and schedules find them realized.
    pub fn realize_all(&self, others: &[&Tensor]) -> Result<Tensor> {
        let _one = RealizeGuard::take();
        let (sched, var_vals) = self.schedule_with_vars(others)?;
        run_schedule(sched, &var_vals)?;
        Ok(self.clone())
    }

    /// Compute this tensor now (tinygrad's `realize`); returns the same tensor.
    pub fn realize(&self) -> Result<Tensor> {
        self.realize_all(&[])
    }

    /// The elements' bytes in row-major order, native-endian (tinygrad's `data()`): the
    /// tensor is made contiguous and realized first.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let n = self.numel();
        if n == 0 {
            return Ok(Vec::new());
        }
        let t = self.contiguous()?.realize()?;
        let lb = t.lazydata();
        let Some(buf) = lb.realized_buffer() else {
            return Err(Error::Internal(format!(
                "to_bytes: {lb:?} is not realized after realize()"
            )));
        };
        let size = self.dtype().itemsize();
        let mut bytes = buf.as_bytes()?;
        let total = n.checked_mul(size).filter(|&t| bytes.len() >= t);
        let Some(total) = total.filter(|_| lb.st().contiguous()) else {
            return Err(Error::Internal(format!(
                "to_bytes: buffer {buf:?} cannot hold shape {}",
                fmt_shape(&self.shape())
            )));
        };
        bytes.truncate(total);
        Ok(bytes)
    }

    /// The elements in row-major order. `T` must be this tensor's dtype (`f32` for float32,
    /// `bool` for bool, `half::f16` for float16, ...); cast first to read another type, or use
    /// [`Tensor::numpy`] / [`Tensor::to_f64_vec`] for any dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let dt = self.dtype();
        ensure!(
            dt == T::DTYPE,
            InvalidArgument,
            "to_vec: the tensor has dtype {dt:?} but {} ({:?}) was requested",
            T::NAME,
            T::DTYPE
        );
        let bytes = self.to_bytes()?;
        Ok(bytes.chunks_exact(dt.itemsize()).map(T::read_ne).collect())
    }

    /// tinygrad's `numpy()`: the shape and the elements as a Rust vector of the tensor's own
    /// dtype.
    pub fn numpy(&self) -> Result<HostArray> {
        macro_rules! read {
            ($($v:ident: $t:ty),*) => {
                match self.dtype().scalar {
                    $(s if s == <$t as Element>::DTYPE.scalar => TensorData::$v(self.to_vec::<$t>()?),)*
                    _ => bail!(InvalidArgument, "numpy: no host type for {:?}", self.dtype()),
                }
            };
        }
        let data = read!(Bool: bool, I8: i8, U8: u8, I16: i16, U16: u16, I32: i32, U32: u32,
            I64: i64, U64: u64, F16: half::f16, BF16: half::bf16, F32: f32, F64: f64);
        Ok(HostArray {
            shape: self.shape(),
            data,
        })
    }

    /// The elements of any dtype converted to f64 (exact except for 64-bit integers beyond
    /// 2**53).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.numpy()?.data.to_f64())
    }

    /// The value of a one-element tensor.
    pub fn item<T: Element>(&self) -> Result<T> {
        ensure!(
            self.numel() == 1,
            InvalidArgument,
            "item: must have one element for item, shape is {}",
            fmt_shape(&self.shape())
        );
        self.to_vec::<T>()?
            .first()
            .copied()
            .ok_or_else(|| Error::Internal("item: no element read".into()))
    }
}
