//! Backends, one folder each, with the same file set, and [`builtin`]: the list of built-in device
//! families, the one place that picks the emulator under `MOCKGPU=1`, and the device entry points
//! the upper layers call ([`builtin::open_device`], [`builtin::default_device`]).
//!
//! The backends never name the emulator: a GPU backend is handed its driver and its
//! [`Toolchain`] by [`builtin`].

#![forbid(unsafe_code)]

pub mod amd;
pub mod builtin;
pub mod cpu;
pub mod fallback;
pub mod nv;

pub use crate::device::Toolchain;
