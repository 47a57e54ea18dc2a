//! rawgrad: tinygrad 0.9's engine rebuilt in Rust, under backends that drive GPUs through the
//! Linux kernel drivers alone (HCQ: hardware command queues).
//!
//! The data's way through (not the import order, which is the list below): `tensor` -> `lazy` ->
//! `engine::schedule` -> `codegen` (Kernel, linearizer, UOps) -> `renderer` -> `device`
//! (compiler, allocator, program) -> `runtime::*` -> `driver` -> `sys`.
//!
//! # Layers
//!
//! The dependency order, written once (the README and the design point here). Every module sits
//! in one layer; it may import (`crate::...`, `super::...`) only from its own layer or a lower
//! one, and no two folders import each other, directly or around a loop. `tests/layers.rs` parses
//! this list and checks every file under `src/` against it; the exceptions are named there (test
//! modules may also use the emulator and the list of built-in devices, their harness).
//!
//! 0. `error`, `helpers`, `dtype`, `json`: the base: errors, env knobs and counters, dtypes, JSON.
//! 1. `sys`, `ffi`, `driver`: generated kernel-interface bindings; libraries loaded at run time
//!    (libLLVM, CUDA, NVRTC, nvJitLink, Metal); the kernel ABI and the syscall seam (the `Driver`
//!    trait, `RealDriver`, ioctl wrappers, mapped memory, deadlines). The only layer where
//!    `unsafe` may appear.
//! 2. `hw`: hardware facts (chip tables, packet fields and opcodes, NV class methods, QMD tables,
//!    decoders); no I/O.
//! 3. `shape`, `ops`, `codegen`, `renderer`, `device`, `interp`: shapes, ops and the kernel AST,
//!    the linearizer and UOps (with the `Renderer` seam), the renderers, the device seams
//!    (Buffer, Allocator, Compiler, Program, the registry table; no backend names), the UOp
//!    interpreter.
//! 4. `hcq`: the hardware-command-queue core (signals, timelines, queue verbs, graphs).
//! 5. `mockgpu`: the emulator (emulated KFD and RM/UVM, the software GPUs); never `runtime`.
//! 6. `runtime::cpu`, `runtime::amd`, `runtime::nv`, `runtime::fallback`: the backends; none
//!    names `mockgpu`.
//! 7. `runtime`, `runtime::builtin`: the list of built-in device families, the one place that
//!    picks the emulator under `MOCKGPU=1`.
//! 8. `lazy`, `engine`, `tensor`: the lazy graph, the scheduler and realize engine, the Tensor API.
//! 9. `engine::jit`: `TinyJit`, which captures and replays functions over tensors.
//!
//! Nothing below `device` knows about tensors; nothing outside `driver`, `ffi` and `sys` has
//! `unsafe` (every other module carries `#![forbid(unsafe_code)]`).
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
