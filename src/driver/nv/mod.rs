//! The NVIDIA kernel-driver ABI for the NV backend: RM escapes on `/dev/nvidiactl` and
//! `/dev/nvidiaN`, UVM calls on `/dev/nvidia-uvm` (no libcuda), on top of the generated
//! [`crate::sys::nv`] structs.
//!
//! - [`abi`]: `IoctlArg` for every struct, the escape table ([`esc`]), UVM requests ([`uvm_req`]),
//!   names of escapes, classes and controls;
//! - [`family`]: [`DriverFamily`] (570, 575, 580, 590, 595) detected at run time (or forced with
//!   `NV_DRIVER_FAMILY`), and family-neutral builders for the structs whose layout changed;
//! - [`status`]: `NV_STATUS` names and [`Error::NvStatus`](crate::Error::NvStatus) errors;
//! - [`ctl`]: [`NvCtl`], the control fd (RM_ALLOC/CONTROL/FREE/MAP/UNMAP/MAP_DMA, CARD_INFO,
//!   CHECK_VERSION_STR, OS events), and [`NvCtlMapFd`], a fresh control fd as the target of one
//!   system-memory mapping; [`controls`]: typed controls on it;
//! - [`gpu`]: [`NvGpuFd`], a `/dev/nvidiaN` (REGISTER_FD, RM_ALLOC_MEMORY, mmap of a mapping
//!   context);
//! - [`uvm`]: [`NvUvm`] (INITIALIZE, MM_INITIALIZE, REGISTER_GPU/GPU_VASPACE/CHANNEL, external
//!   ranges, MAP_EXTERNAL_ALLOCATION, FREE, UNREGISTER_CHANNEL, peer access).
//!
//! Everything goes through the [`Driver`](crate::driver::Driver) trait, so the same calls run on
//! the kernel and on the emulated RM/UVM (`mockgpu`, `MOCKGPU=1`).
//!
//! Not guaranteed: x86-64 Linux only; no object bookkeeping (the runtime owns handle lifetimes).

pub mod abi;
pub mod controls;
pub mod ctl;
pub mod family;
pub mod gpu;
pub mod status;
pub mod uvm;

#[cfg(test)]
mod hw_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use abi::{
    card_info_request, class_str, control_str, esc, escape_request, nv_class_name, nv_control_name,
    nv_escape_name, nv_request_name, uvm_req, UvmIoctl, UvmParams,
};
pub use ctl::{check_version_str, mmap_context, NvCtl, NvCtlMapFd, RM_ALLOC_PAD};
pub use family::{
    BuildVersion, ChannelParams, DriverFamily, FamilySizes, MapMemoryDmaParams, VaSpaceParams,
};
pub use gpu::NvGpuFd;
pub use status::{nv_status_error, nv_status_name, nv_status_str};
pub use uvm::{mapping_attributes, NvUvm};
