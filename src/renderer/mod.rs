//! Renderers: a linear UOp list to source text for one device family. tinygrad 0.9.1
//! `renderer/__init__.py` and its subclasses: [`cstyle`] (C for CLANG, the shared C-style core),
//! [`cuda`] (CUDA C), [`exp2`] (the CPU renderers' inline float exp2), [`llvmir`] (LLVM IR for LLVM, AMD and NVPTX), [`tensor_cores`] (the
//! tensor cores each GPU renderer offers) and [`text`] (their text building without `core::fmt`).
//!
//! The [`Renderer`] trait and the capability record the optimizer reads ([`RendererOpts`],
//! [`TensorCore`]) are defined one layer down, in [`crate::codegen::renderer`] (the optimizer is
//! there), and re-exported here.
//!
//! Not guaranteed: a renderer accepts only UOp lists that passed `type_verify`; anything else is an
//! `Error::Codegen`, never undefined output.

#![forbid(unsafe_code)]

pub mod cstyle;
pub mod cuda;
pub mod exp2;
pub mod llvmir;
pub mod tensor_cores;
pub mod text;

pub use crate::codegen::renderer::{Renderer, RendererOpts, TensorCore};
