//! Backends, one folder each, with the same file set.

#![forbid(unsafe_code)]

pub mod amd;
pub mod cpu;
pub mod fallback;
pub mod nv;
