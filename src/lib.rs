//! rawgrad: tinygrad 0.9's engine rebuilt in Rust, under backends that drive GPUs through the
//! Linux kernel drivers alone (HCQ: hardware command queues).
//!
//! The pipeline, top to bottom (see `DESIGN.md` in the steering repository):
//! `tensor` -> `lazy` -> `engine::schedule` -> `codegen` (Kernel, linearizer, UOps) -> `renderer`
//! -> `device` (compiler, allocator, program) -> `runtime::*` -> `driver` -> `sys`.
//! Nothing below `device` knows about tensors; nothing outside `runtime/*` and `driver/` touches
//! an ioctl or a mapped pointer.
//!
//! Not guaranteed: the API is young; names follow tinygrad 0.9.1 so they can be looked up there.

pub mod codegen;
pub mod device;
pub mod driver;
pub mod dtype;
pub mod engine;
mod error;
pub mod ffi;
pub mod hcq;
pub mod helpers;
pub mod hw;
pub mod interp;
pub(crate) mod json;
pub mod lazy;
pub mod mockgpu;
pub mod ops;
pub mod renderer;
pub mod runtime;
pub mod shape;
pub mod sys;
pub mod tensor;

pub use dtype::{dtypes, ConstValue, DType};
pub use error::{Error, Result};
pub use tensor::{
    nn, ArangeArgs, Axis, ConvArgs, HostArray, Index, Operand, PoolArgs, Tensor, TensorData,
};

/// The README's code blocks, compiled and run as doctests so the front page cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
