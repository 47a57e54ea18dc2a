//! Typed wrappers for the KFD ioctls a runtime issues. Each builds the argument struct, passes it
//! through [`Driver::ioctl`] and returns the outputs; pointers inside structs (device-id arrays,
//! event arrays) are built from slices here, so callers never hand the kernel a raw address.
//!
//! Errors come from [`ioctl_struct`]: `Error::Errno(errno, "AMDKFD_IOC_...(key fields) failed:
//! ENAME (n): detail")`.
//!
//! Not guaranteed: the wrappers add no policy (no retries, no flag defaults); what tinygrad adds
//! on top (WRITABLE | EXECUTABLE | NO_SUBSTITUTE, uncached = COHERENT | UNCACHED) is the runtime's.

use super::*;
use crate::driver::api::{ioctl_struct, Driver, Fd};
use crate::{bail, Result};

/// AMDKFD_IOC_GET_VERSION: (major, minor).
pub fn get_version(drv: &dyn Driver, kfd: Fd) -> Result<(u32, u32)> {
    let mut a = kfd_ioctl_get_version_args::default();
    ioctl_struct(drv, kfd, &AMDKFD_IOC_GET_VERSION, &mut a)?;
    Ok((a.major_version, a.minor_version))
}

/// AMDKFD_IOC_ACQUIRE_VM: bind the render node `drm_fd`'s GPU VM to this process for `gpu_id`.
pub fn acquire_vm(drv: &dyn Driver, kfd: Fd, drm_fd: Fd, gpu_id: u32) -> Result<()> {
    let mut a = kfd_ioctl_acquire_vm_args {
        drm_fd: drm_fd.0 as u32,
        gpu_id,
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_ACQUIRE_VM, &mut a)
}

/// What ALLOC_MEMORY_OF_GPU returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuAlloc {
    /// The buffer handle (`gpu_id << 32 | idr`).
    pub handle: u64,
    /// Offset to mmap on the render node (VRAM/GTT), or what KFD reports for other types.
    pub mmap_offset: u64,
}

/// AMDKFD_IOC_ALLOC_MEMORY_OF_GPU at GPU VA `va` (`user_addr` is the CPU address for USERPTR,
/// ignored otherwise).
pub fn alloc_memory_of_gpu(
    drv: &dyn Driver,
    kfd: Fd,
    gpu_id: u32,
    va: u64,
    size: u64,
    flags: u32,
    user_addr: u64,
) -> Result<GpuAlloc> {
    let mut a = kfd_ioctl_alloc_memory_of_gpu_args {
        va_addr: va,
        size,
        handle: 0,
        mmap_offset: user_addr,
        gpu_id,
        flags,
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a)?;
    Ok(GpuAlloc {
        handle: a.handle,
        mmap_offset: a.mmap_offset,
    })
}

/// AMDKFD_IOC_FREE_MEMORY_OF_GPU.
pub fn free_memory_of_gpu(drv: &dyn Driver, kfd: Fd, handle: u64) -> Result<()> {
    let mut a = kfd_ioctl_free_memory_of_gpu_args { handle };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut a)
}

/// AMDKFD_IOC_MAP_MEMORY_TO_GPU for every gpu in `gpu_ids` (KFD skips those already mapped).
/// Returns `n_success` (= `gpu_ids.len()` on success).
pub fn map_memory_to_gpu(drv: &dyn Driver, kfd: Fd, handle: u64, gpu_ids: &[u32]) -> Result<u32> {
    if gpu_ids.is_empty() {
        bail!(
            InvalidArgument,
            "map_memory_to_gpu(handle={handle:#x}): empty gpu id list"
        );
    }
    let mut a = kfd_ioctl_map_memory_to_gpu_args {
        handle,
        device_ids_array_ptr: gpu_ids.as_ptr() as u64,
        n_devices: gpu_ids.len() as u32,
        n_success: 0,
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut a)?;
    Ok(a.n_success)
}

/// AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU for every gpu in `gpu_ids`. Returns `n_success`.
pub fn unmap_memory_from_gpu(
    drv: &dyn Driver,
    kfd: Fd,
    handle: u64,
    gpu_ids: &[u32],
) -> Result<u32> {
    if gpu_ids.is_empty() {
        bail!(
            InvalidArgument,
            "unmap_memory_from_gpu(handle={handle:#x}): empty gpu id list"
        );
    }
    let mut a = kfd_ioctl_unmap_memory_from_gpu_args {
        handle,
        device_ids_array_ptr: gpu_ids.as_ptr() as u64,
        n_devices: gpu_ids.len() as u32,
        n_success: 0,
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &mut a)?;
    Ok(a.n_success)
}

/// AMDKFD_IOC_CREATE_QUEUE: `args` in, `queue_id` and `doorbell_offset` out (in `args`).
pub fn create_queue(
    drv: &dyn Driver,
    kfd: Fd,
    args: &mut kfd_ioctl_create_queue_args,
) -> Result<()> {
    ioctl_struct(drv, kfd, &AMDKFD_IOC_CREATE_QUEUE, args)
}

/// AMDKFD_IOC_DESTROY_QUEUE.
pub fn destroy_queue(drv: &dyn Driver, kfd: Fd, queue_id: u32) -> Result<()> {
    let mut a = kfd_ioctl_destroy_queue_args { queue_id, pad: 0 };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_DESTROY_QUEUE, &mut a)
}

/// AMDKFD_IOC_CREATE_EVENT. `event_page_handle` is the handle of a GTT buffer to use as the
/// signal-event page (first signal event of the process only), else 0.
pub fn create_event(
    drv: &dyn Driver,
    kfd: Fd,
    event_type: u32,
    auto_reset: bool,
    event_page_handle: u64,
) -> Result<kfd_ioctl_create_event_args> {
    let mut a = kfd_ioctl_create_event_args {
        event_page_offset: event_page_handle,
        event_type,
        auto_reset: auto_reset as u32,
        ..Default::default()
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_CREATE_EVENT, &mut a)?;
    Ok(a)
}

/// AMDKFD_IOC_DESTROY_EVENT.
pub fn destroy_event(drv: &dyn Driver, kfd: Fd, event_id: u32) -> Result<()> {
    let mut a = kfd_ioctl_destroy_event_args { event_id, pad: 0 };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_DESTROY_EVENT, &mut a)
}

/// AMDKFD_IOC_SET_EVENT (signal events only).
pub fn set_event(drv: &dyn Driver, kfd: Fd, event_id: u32) -> Result<()> {
    let mut a = kfd_ioctl_set_event_args { event_id, pad: 0 };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_SET_EVENT, &mut a)
}

/// AMDKFD_IOC_RESET_EVENT (signal events only).
pub fn reset_event(drv: &dyn Driver, kfd: Fd, event_id: u32) -> Result<()> {
    let mut a = kfd_ioctl_reset_event_args { event_id, pad: 0 };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_RESET_EVENT, &mut a)
}

/// A `kfd_event_data` entry waiting on `event_id` (payload zeroed).
pub fn event_data(event_id: u32) -> kfd_event_data {
    kfd_event_data {
        event_id,
        ..Default::default()
    }
}

/// AMDKFD_IOC_WAIT_EVENTS on `events` (KFD writes memory-exception payloads back into them).
/// Returns `wait_result`: `KFD_IOC_WAIT_RESULT_COMPLETE` or `KFD_IOC_WAIT_RESULT_TIMEOUT`.
pub fn wait_events(
    drv: &dyn Driver,
    kfd: Fd,
    events: &mut [kfd_event_data],
    wait_for_all: bool,
    timeout_ms: u32,
) -> Result<u32> {
    let mut a = kfd_ioctl_wait_events_args {
        events_ptr: events.as_mut_ptr() as u64,
        num_events: events.len() as u32,
        wait_for_all: wait_for_all as u32,
        timeout: timeout_ms,
        wait_result: 0,
    };
    ioctl_struct(drv, kfd, &AMDKFD_IOC_WAIT_EVENTS, &mut a)?;
    Ok(a.wait_result)
}

/// The memory-exception payload WAIT_EVENTS wrote into `ev` for a MEMORY event (GPU page fault:
/// address, gpu_id, failure bits).
pub fn memory_exception(ev: &kfd_event_data) -> kfd_hsa_memory_exception_data {
    // SAFETY: both members of the union are repr(C) structs of plain integers for which every bit
    // pattern is valid, and the union is always fully initialised (zeroed, then written by KFD),
    // so reading the memory-exception view is defined.
    unsafe { ev.__bindgen_anon_1.memory_exception_data }
}

/// The hardware-exception payload WAIT_EVENTS wrote into `ev` for a HW_EXCEPTION event (a GPU
/// reset: reset type and cause, whether VRAM contents were lost, gpu_id).
pub fn hw_exception(ev: &kfd_event_data) -> kfd_hsa_hw_exception_data {
    // SAFETY: both members of the union are repr(C) structs of plain integers for which every bit
    // pattern is valid, and the union is always fully initialised (zeroed, then written by KFD),
    // so reading the hardware-exception view (its first 16 bytes) is defined.
    unsafe { ev.__bindgen_anon_1.hw_exception_data }
}
