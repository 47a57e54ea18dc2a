//! The only place with syscalls and foreign calls: every open, ioctl, mmap, dlopen and doorbell write
//! goes through here.
//!
//! - [`hostmem`]: owned, aligned host allocations that CPU kernels address directly.
//! - [`dl`]: `dlopen`ed shared objects and the CPU kernel entry ABI.
//! - [`process`]: child processes (external compilers) and temporary paths.
//! - [`emu`]: the emulated kernel drivers and their software GPUs.

pub mod dl;
pub mod emu;
pub mod hostmem;
pub mod process;
