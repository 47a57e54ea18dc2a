//! Libraries loaded at run time with `dlopen`, and their C APIs: libLLVM ([`llvm`]: IR to object
//! code), NVIDIA's user-space libraries ([`cuda`]: the CUDA driver API, [`nvrtc`], [`nvjitlink`],
//! sharing the library finder [`nvlib`]) and, on macOS, Metal ([`metal`]).
//!
//! What it owns: every `unsafe` foreign call into these libraries (each block with its SAFETY
//! argument) and the typed, `Result`-returning wrappers the backends and compilers use. The kernel
//! ABI and the syscall seam (ioctls, mmap, the CPU kernel entry) are [`crate::driver`]'s; waits on
//! a vendor runtime are bounded by [`crate::driver::deadline`].
//!
//! Not guaranteed: a library is trusted to follow its documented C API; a missing or too old
//! library is an error when it is first used, never at start-up.

pub mod cuda;
pub mod llvm;
#[cfg(target_os = "macos")]
pub mod metal;
pub mod nvjitlink;
pub mod nvlib;
pub mod nvrtc;
