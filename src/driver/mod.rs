//! The kernel ABI and the syscall seam: every open, ioctl, mmap and doorbell write goes through
//! here, and so does the CPU kernel entry ABI (libraries loaded with `dlopen` for their C APIs,
//! libLLVM and NVIDIA's and Apple's runtimes, are [`crate::ffi`]'s).
//!
//! - [`hostmem`]: owned, aligned host allocations that CPU kernels address directly.
//! - [`dl`]: `dlopen`ed kernel objects and the CPU kernel entry ABI.
//! - [`codemem`]: executable memory for code rawgrad links itself, and host symbol lookup.
//! - [`process`]: child processes (external compilers) and temporary paths.
//! - [`api`]: the [`Driver`] trait (open, close, ioctl, mmap, munmap, doorbell, sysfs reads), the
//!   `_IOC` encoding and [`ioctl_struct`].
//! - [`real`]: [`RealDriver`], the syscalls (the emulated drivers of `MOCKGPU=1` implement the
//!   same trait in `mockgpu/`).
//! - [`kfd`]: the KFD ABI (ioctl table, mmap offsets, typed wrappers, topology, queue sizes).
//! - [`nv`]: the NVIDIA RM/UVM ABI (escape and UVM tables, driver families, typed wrappers for the
//!   control fd, GPU nodes and UVM).
//! - [`mapped`]: [`Mapping`], bounds-checked access to memory shared with a device.
//! - [`filemap`]: read-only file mappings.
//! - [`vma`]: address-range bookkeeping shared by both drivers.
//! - [`deadline`]: bounded polling (ioctl retries, vendor runtime waits) and the wait timeout
//!   every device wait uses.
//! - [`os`]: the OS services the emulator (`mockgpu`) needs behind safe functions: memfd-backed
//!   shared memory, user-memory copies that fail with EFAULT, anonymous maps and unmaps of ranges
//!   the caller's record covers, clocks.

pub mod api;
pub mod codemem;
pub mod deadline;
pub mod dl;
pub mod filemap;
pub mod hostmem;
pub mod kfd;
pub mod mapped;
pub mod nv;
pub mod os;
pub mod process;
pub mod real;
pub mod vma;

#[cfg(test)]
mod hw_tests;

pub use api::{
    errno_error, errno_name, ioc, ioc_dir, ioc_nr, ioc_size, ioc_type, ioctl_request, ioctl_struct,
    Driver, Fd, Ioctl, IoctlArg, MapFlags, OpenFlags, Prot, QueueReport,
};
pub use mapped::Mapping;
pub use real::RealDriver;
