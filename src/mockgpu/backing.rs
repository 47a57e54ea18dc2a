//! The emulator's memory primitives, which live in `driver::os` (they need `unsafe`):
//!
//! - [`Backing`]: one emulated buffer object: a memfd (shared memory file) plus the emulator's
//!   own host mapping of it (the "GPU view"). CPU mappings the process makes (`mmap` of a render
//!   node offset, of `/dev/kfd`, or anonymous shared memory) are further mappings of the same
//!   memfd, so the CPU and the software GPU see the same bytes at different host addresses, and a
//!   CPU `munmap` never pulls memory from under the GPU. The GPU view lives until the last `Arc`
//!   (an allocation, a GPU mapping, or a `Mapping` handed to the software GPU) is dropped.
//! - [`copy_from_user`] / [`copy_to_user`]: how the emulated kernel reads and writes memory a
//!   pointer inside an ioctl struct names, failing with EFAULT (never crashing) on a bad address,
//!   like the kernel's own helpers.
//!
//! Not guaranteed: memfds are sparse; sizes are only limited by the emulated VRAM budget.

pub(crate) use crate::driver::os::SharedMemory as Backing;
pub(crate) use crate::driver::os::{copy_from_user, copy_to_user};
