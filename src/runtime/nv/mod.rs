//! The NV backend: the compiler ([`compiler`]: NVRTC, or PTX through ptxas / nvJitLink) and the
//! finding of NVIDIA's tools ([`toolchain`]).

pub mod compiler;
pub mod toolchain;
