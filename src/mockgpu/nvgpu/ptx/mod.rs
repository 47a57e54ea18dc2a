//! The software NV GPU's PTX interpreter: runs the PTX that LLVM's NVPTX target writes for
//! rawgrad's kernels (the real code of the NV device, `MOCKGPU_CODE=ptx`, the default), so the emulator checks
//! what the renderer and compiler produce: special registers, address arithmetic, barriers,
//! `mma.sync` fragment layouts, parameter layout.
//!
//! - [`parse`]: PTX text to a [`Kernel`] (directives, registers, symbols, labels resolved);
//! - [`isa`]: opcodes and their modifiers decoded; anything unknown is an error naming it;
//! - [`alu`]: integer and float semantics (NaN, signed zero and integer edge cases as PTX
//!   defines them, rounded as the UOp interpreter rounds);
//! - [`exec`]: a grid run CTA by CTA with cooperative thread scheduling at `bar.sync`;
//! - [`mma`]: the warp-collective `mma.sync.m16n8k16`;
//! - [`coverage`]: the opt-in count of executed opcodes (`MOCKGPU_COVERAGE=<file>`).
//!
//! Not guaranteed: speed (one thread at a time), and the PTX that other compilers (NVRTC, hand
//! written) may use beyond the instruction list in [`isa`].

pub mod alu;
#[cfg(test)]
mod catches;
pub mod coverage;
pub mod exec;
pub mod isa;
mod mma;
pub mod parse;
#[cfg(test)]
mod tests;

pub use exec::{run, Launch};
pub use parse::{parse_kernel, Kernel, Param};
