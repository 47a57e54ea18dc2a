//! The NV backend (HCQ through RM/UVM ioctls, no libcuda): per-class facts ([`arch`]), the
//! pushbuffer method builders ([`push`]), GPFIFO submission ([`gpfifo`]), QMDs per version
//! ([`qmd`]), the cubin loader and the MOCKGPU mock cubin ([`cubin`]), the decoders for
//! golden tests and the emulator's trace ([`decode`]), and the compiler ([`compiler`]: NVRTC, or
//! PTX through ptxas / nvJitLink) with the finding of NVIDIA's tools ([`toolchain`]). The
//! device, memory, signal and program parts come later.

pub mod arch;
pub mod compiler;
pub mod cubin;
pub mod decode;
pub mod gpfifo;
pub mod push;
pub mod qmd;
pub mod toolchain;
