//! The KFD (`/dev/kfd`) ABI on top of the generated structs in [`crate::sys::kfd`]:
//!
//! - the ioctl table: one typed [`Ioctl`] constant per `AMDKFD_IOC_*` request of the 1.11 header,
//!   computed as `_IOC(dir, 'K', nr, size_of::<struct>())` and pinned to literal values by tests;
//!   [`kfd_ioctl_name`] names any request number for error messages;
//! - `mmap` offset encoding and handle encoding from `kfd_priv.h` (not in the uapi header);
//! - [`ops`]: typed wrappers for the ioctls a runtime issues (they build in-struct pointers from
//!   slices, so callers never pass raw addresses);
//! - [`topology`]: sysfs topology parsing and the queue-buffer sizes KFD (Linux >= 6.12) demands.
//!
//! Not guaranteed: newer kernels extend some structs (KFD 1.19's 96-byte CREATE_QUEUE); these
//! constants are the 1.11 layouts, which newer kernels still accept (they zero-extend).

pub mod ops;
pub mod topology;

use super::api::{Ioctl, IoctlArg, IOC_READ, IOC_WRITE};
use crate::sys::kfd::*;

const R: u32 = IOC_READ;
const W: u32 = IOC_WRITE;
const RW: u32 = IOC_READ | IOC_WRITE;

macro_rules! kfd_ioctls {
    ($($name:ident = $dir:ident, $nr:literal, $ty:ty;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: nr ", stringify!($nr), ", argument `", stringify!($ty), "`.")]
            pub const $name: Ioctl<$ty> = Ioctl::new(stringify!($name), $dir, AMDKFD_IOCTL_BASE, $nr);
        )*
        /// Every request of the table: (nr, name, request number).
        pub const KFD_IOCTLS: &[(u8, &str, u64)] = &[$(($nr, stringify!($name), $name.request)),*];
    };
}

kfd_ioctls! {
    AMDKFD_IOC_GET_VERSION = R, 0x01, kfd_ioctl_get_version_args;
    AMDKFD_IOC_CREATE_QUEUE = RW, 0x02, kfd_ioctl_create_queue_args;
    AMDKFD_IOC_DESTROY_QUEUE = RW, 0x03, kfd_ioctl_destroy_queue_args;
    AMDKFD_IOC_SET_MEMORY_POLICY = W, 0x04, kfd_ioctl_set_memory_policy_args;
    AMDKFD_IOC_GET_CLOCK_COUNTERS = RW, 0x05, kfd_ioctl_get_clock_counters_args;
    AMDKFD_IOC_GET_PROCESS_APERTURES = R, 0x06, kfd_ioctl_get_process_apertures_args;
    AMDKFD_IOC_UPDATE_QUEUE = W, 0x07, kfd_ioctl_update_queue_args;
    AMDKFD_IOC_CREATE_EVENT = RW, 0x08, kfd_ioctl_create_event_args;
    AMDKFD_IOC_DESTROY_EVENT = W, 0x09, kfd_ioctl_destroy_event_args;
    AMDKFD_IOC_SET_EVENT = W, 0x0A, kfd_ioctl_set_event_args;
    AMDKFD_IOC_RESET_EVENT = W, 0x0B, kfd_ioctl_reset_event_args;
    AMDKFD_IOC_WAIT_EVENTS = RW, 0x0C, kfd_ioctl_wait_events_args;
    AMDKFD_IOC_DBG_REGISTER_DEPRECATED = W, 0x0D, kfd_ioctl_dbg_register_args;
    AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED = W, 0x0E, kfd_ioctl_dbg_unregister_args;
    AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED = W, 0x0F, kfd_ioctl_dbg_address_watch_args;
    AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED = W, 0x10, kfd_ioctl_dbg_wave_control_args;
    AMDKFD_IOC_SET_SCRATCH_BACKING_VA = RW, 0x11, kfd_ioctl_set_scratch_backing_va_args;
    AMDKFD_IOC_GET_TILE_CONFIG = RW, 0x12, kfd_ioctl_get_tile_config_args;
    AMDKFD_IOC_SET_TRAP_HANDLER = W, 0x13, kfd_ioctl_set_trap_handler_args;
    AMDKFD_IOC_GET_PROCESS_APERTURES_NEW = RW, 0x14, kfd_ioctl_get_process_apertures_new_args;
    AMDKFD_IOC_ACQUIRE_VM = W, 0x15, kfd_ioctl_acquire_vm_args;
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU = RW, 0x16, kfd_ioctl_alloc_memory_of_gpu_args;
    AMDKFD_IOC_FREE_MEMORY_OF_GPU = W, 0x17, kfd_ioctl_free_memory_of_gpu_args;
    AMDKFD_IOC_MAP_MEMORY_TO_GPU = RW, 0x18, kfd_ioctl_map_memory_to_gpu_args;
    AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU = RW, 0x19, kfd_ioctl_unmap_memory_from_gpu_args;
    AMDKFD_IOC_SET_CU_MASK = W, 0x1A, kfd_ioctl_set_cu_mask_args;
    AMDKFD_IOC_GET_QUEUE_WAVE_STATE = RW, 0x1B, kfd_ioctl_get_queue_wave_state_args;
    AMDKFD_IOC_GET_DMABUF_INFO = RW, 0x1C, kfd_ioctl_get_dmabuf_info_args;
    AMDKFD_IOC_IMPORT_DMABUF = RW, 0x1D, kfd_ioctl_import_dmabuf_args;
    AMDKFD_IOC_ALLOC_QUEUE_GWS = RW, 0x1E, kfd_ioctl_alloc_queue_gws_args;
    AMDKFD_IOC_SMI_EVENTS = RW, 0x1F, kfd_ioctl_smi_events_args;
    AMDKFD_IOC_SVM = RW, 0x20, kfd_ioctl_svm_args;
    AMDKFD_IOC_SET_XNACK_MODE = RW, 0x21, kfd_ioctl_set_xnack_mode_args;
    AMDKFD_IOC_CRIU_OP = RW, 0x22, kfd_ioctl_criu_args;
    AMDKFD_IOC_AVAILABLE_MEMORY = RW, 0x23, kfd_ioctl_get_available_memory_args;
}

/// The name of a KFD request number (matched on the whole number, so a wrong size or direction
/// is not given the name of the right request).
pub fn kfd_ioctl_name(request: u64) -> Option<&'static str> {
    KFD_IOCTLS
        .iter()
        .find(|(_, _, r)| *r == request)
        .map(|(_, n, _)| *n)
}

/// The name of the KFD ioctl with number `nr` (whatever size/direction the request encodes).
pub fn kfd_ioctl_name_by_nr(nr: u8) -> Option<&'static str> {
    KFD_IOCTLS
        .iter()
        .find(|(n, _, _)| *n == nr)
        .map(|(_, name, _)| *name)
}

macro_rules! ioctl_args {
    ($($ty:ty => $($field:ident),*;)*) => {
        $(
            // SAFETY: a bindgen-generated repr(C) struct of integer fields only, laid out without
            // padding (its size equals the sum of its fields; pinned by the size tests below).
            unsafe impl IoctlArg for $ty {
                fn describe(&self) -> String {
                    let parts: Vec<String> = vec![$(format!(concat!(stringify!($field), "={:#x}"), self.$field)),*];
                    parts.join(" ")
                }
            }
        )*
    };
}

ioctl_args! {
    kfd_ioctl_get_version_args => major_version, minor_version;
    kfd_ioctl_create_queue_args => gpu_id, queue_type, ring_base_address, ring_size,
        write_pointer_address, read_pointer_address, queue_percentage, queue_priority,
        eop_buffer_address, eop_buffer_size, ctx_save_restore_address, ctx_save_restore_size,
        ctl_stack_size;
    kfd_ioctl_destroy_queue_args => queue_id;
    kfd_ioctl_set_memory_policy_args => gpu_id, default_policy, alternate_policy;
    kfd_ioctl_get_clock_counters_args => gpu_id;
    kfd_ioctl_update_queue_args => queue_id, ring_base_address, ring_size, queue_percentage, queue_priority;
    kfd_ioctl_create_event_args => event_type, auto_reset, node_id, event_page_offset;
    kfd_ioctl_destroy_event_args => event_id;
    kfd_ioctl_set_event_args => event_id;
    kfd_ioctl_reset_event_args => event_id;
    kfd_ioctl_wait_events_args => events_ptr, num_events, wait_for_all, timeout;
    kfd_ioctl_dbg_register_args => gpu_id;
    kfd_ioctl_dbg_unregister_args => gpu_id;
    kfd_ioctl_dbg_address_watch_args => gpu_id, buf_size_in_bytes;
    kfd_ioctl_dbg_wave_control_args => gpu_id, buf_size_in_bytes;
    kfd_ioctl_set_scratch_backing_va_args => gpu_id, va_addr;
    kfd_ioctl_get_tile_config_args => gpu_id, num_tile_configs, num_macro_tile_configs;
    kfd_ioctl_set_trap_handler_args => gpu_id, tba_addr, tma_addr;
    kfd_ioctl_get_process_apertures_new_args => kfd_process_device_apertures_ptr, num_of_nodes;
    kfd_ioctl_acquire_vm_args => drm_fd, gpu_id;
    kfd_ioctl_alloc_memory_of_gpu_args => gpu_id, flags, va_addr, size, mmap_offset;
    kfd_ioctl_free_memory_of_gpu_args => handle;
    kfd_ioctl_map_memory_to_gpu_args => handle, device_ids_array_ptr, n_devices, n_success;
    kfd_ioctl_unmap_memory_from_gpu_args => handle, device_ids_array_ptr, n_devices, n_success;
    kfd_ioctl_set_cu_mask_args => queue_id, num_cu_mask;
    kfd_ioctl_get_queue_wave_state_args => queue_id, ctl_stack_address;
    kfd_ioctl_get_dmabuf_info_args => gpu_id, dmabuf_fd, size;
    kfd_ioctl_import_dmabuf_args => gpu_id, dmabuf_fd, va_addr;
    kfd_ioctl_alloc_queue_gws_args => queue_id, num_gws;
    kfd_ioctl_smi_events_args => gpuid;
    kfd_ioctl_set_xnack_mode_args => xnack_enabled;
    kfd_ioctl_get_available_memory_args => gpu_id;
}
// Not `IoctlArg`: kfd_ioctl_get_process_apertures_args and kfd_ioctl_criu_args (trailing padding:
// passing them as bytes would expose uninitialized padding) and kfd_ioctl_svm_args (a flexible
// array member; bindgen does not make it Copy).

/// `KFD_MMAP_TYPE_*` (kfd_priv.h): bits 63:62 of a `/dev/kfd` mmap offset.
pub const KFD_MMAP_TYPE_SHIFT: u32 = 62;
pub const KFD_MMAP_TYPE_MASK: u64 = 3 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_DOORBELL: u64 = 3 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_EVENTS: u64 = 2 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_RESERVED_MEM: u64 = 1 << KFD_MMAP_TYPE_SHIFT;
pub const KFD_MMAP_TYPE_MMIO: u64 = 0;
/// Bits 61:46 of a `/dev/kfd` mmap offset hold the gpu_id.
pub const KFD_MMAP_GPU_ID_SHIFT: u32 = 46;
pub const KFD_MMAP_GPU_ID_MASK: u64 = 0xFFFF << KFD_MMAP_GPU_ID_SHIFT;
/// Bits 45:0: the offset within the object.
pub const KFD_MMAP_OFFSET_MASK: u64 = (1 << KFD_MMAP_GPU_ID_SHIFT) - 1;

/// `KFD_MMAP_GPU_ID(gpu_id)`.
pub const fn kfd_mmap_gpu_id(gpu_id: u32) -> u64 {
    ((gpu_id as u64) << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK
}

/// `KFD_MMAP_GET_GPU_ID(offset)`.
pub const fn kfd_mmap_get_gpu_id(offset: u64) -> u32 {
    ((offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT) as u32
}

/// Bytes of a process's doorbell frame on gfx9+ (SOC15): 1024 64-bit doorbells, 2 pages.
/// CREATE_QUEUE's `doorbell_offset` is `frame mmap offset | byte offset of the queue's doorbell`.
pub const KFD_DOORBELL_PROCESS_SLICE: usize = 8192;

/// Bytes of the signal-event page: `KFD_SIGNAL_EVENT_LIMIT` 64-bit mailbox slots.
pub const KFD_SIGNAL_EVENT_PAGE_SIZE: usize = KFD_SIGNAL_EVENT_LIMIT as usize * 8;

/// The value of a mailbox slot whose event has not fired (KFD fills the page with 0xFF bytes).
pub const UNSIGNALED_EVENT_SLOT: u64 = u64::MAX;

/// `KFD_EVENT_TIMEOUT_IMMEDIATE` / `KFD_EVENT_TIMEOUT_INFINITE` for WAIT_EVENTS.
pub const KFD_EVENT_TIMEOUT_IMMEDIATE: u32 = 0;
pub const KFD_EVENT_TIMEOUT_INFINITE: u32 = 0xFFFF_FFFF;

/// `MAKE_HANDLE(gpu_id, idr_handle)`: how KFD encodes a buffer handle.
pub const fn make_handle(gpu_id: u32, idr: u32) -> u64 {
    ((gpu_id as u64) << 32) | idr as u64
}

/// `GET_GPU_ID(handle)`.
pub const fn handle_gpu_id(handle: u64) -> u32 {
    (handle >> 32) as u32
}

/// `GET_IDR_HANDLE(handle)`.
pub const fn handle_idr(handle: u64) -> u32 {
    (handle & 0xFFFF_FFFF) as u32
}

#[cfg(test)]
mod tests;
