//! The only place with syscalls and foreign calls: every open, ioctl, mmap, dlopen and doorbell write
//! goes through here.
//!
//! - [`hostmem`]: owned, aligned host allocations that CPU kernels address directly.
//! - [`dl`]: `dlopen`ed shared objects and the CPU kernel entry ABI.
//! - [`codemem`]: executable memory for code rawgrad links itself, and host symbol lookup.
//! - [`process`]: child processes (external compilers) and temporary paths.
//! - [`llvm`]: libLLVM loaded at run time and its C API (IR to object code).
//! - [`api`]: the [`Driver`] trait (open, close, ioctl, mmap, munmap, doorbell, sysfs reads), the
//!   `_IOC` encoding and [`ioctl_struct`]; [`open_driver`] picks the implementation.
//! - [`real`]: [`RealDriver`], the syscalls; [`emu`]: [`EmuDriver`], an emulated KFD with virtual
//!   sysfs and an emulated NVIDIA RM/UVM, each with a hook for software GPUs (`MOCKGPU=1`).
//! - [`kfd`]: the KFD ABI (ioctl table, mmap offsets, typed wrappers, topology, queue sizes).
//! - [`nv`]: the NVIDIA RM/UVM ABI (escape and UVM tables, driver families, typed wrappers for the
//!   control fd, GPU nodes and UVM).
//! - [`mapped`]: [`Mapping`], bounds-checked access to memory shared with a device.
//! - [`vma`]: address-range bookkeeping shared by both drivers.
//! - [`deadline`]: bounded polling (ioctl retries, vendor runtime waits).
//! - [`os`]: the OS services the emulator (`mockgpu`) needs behind safe functions: memfd-backed
//!   shared memory, user-memory copies that fail with EFAULT, anonymous maps and unmaps of ranges
//!   the caller's record covers, clocks.

pub mod api;
pub mod codemem;
pub mod cuda;
pub mod deadline;
pub mod dl;
pub mod filemap;
pub mod hostmem;
pub mod kfd;
pub mod llvm;
pub mod mapped;
#[cfg(target_os = "macos")]
pub mod metal;
pub mod nv;
pub mod nvjitlink;
pub mod nvlib;
pub mod nvrtc;
pub mod os;
pub mod process;
pub mod real;
pub mod vma;

#[cfg(test)]
mod hw_tests;

pub use api::{
    errno_error, errno_name, ioc, ioc_dir, ioc_nr, ioc_size, ioc_type, ioctl_request, ioctl_struct,
    Driver, Fd, Ioctl, IoctlArg, MapFlags, OpenFlags, Prot,
};
pub use mapped::Mapping;
pub use real::RealDriver;
