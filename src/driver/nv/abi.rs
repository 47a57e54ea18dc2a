//! The NVIDIA RM/UVM ABI on top of the generated structs in [`crate::sys::nv`]:
//!
//! - [`IoctlArg`] for every generated struct (all padding-free: the generator names padding
//!   bytes), so each can be passed as bytes and described in error messages;
//! - the escape table ([`esc`]): one typed [`Ioctl`] per escape with a fixed struct,
//!   `_IOWR('F', nr, sizeof)`, pinned to literal request numbers by tests; [`card_info_request`]
//!   for the variable-size CARD_INFO; [`nv_request_name`] names any escape or UVM request;
//! - the UVM table ([`uvm_req`]): typed [`UvmIoctl`]s (plain request numbers, no size encoded)
//!   and the [`UvmParams`] trait that reads each struct's trailing `rmStatus`;
//! - names of classes ([`nv_class_name`]) and controls ([`nv_control_name`]) for messages.
//!
//! Not guaranteed: the family-dependent structs (NVOS46, UVM_FREE and friends) are described here
//! for every family, but which one a driver takes is [`super::DriverFamily`]'s business.

use std::marker::PhantomData;

use crate::driver::api::{ioc, Ioctl, IoctlArg, IOC_READ, IOC_WRITE};
use crate::sys::nv::common::*;
use crate::sys::nv::{v570, v580, v590};

/// `_IOWR('F', nr, size)`: every NVIDIA escape is read-write.
pub const fn escape_request(nr: u32, size: usize) -> u64 {
    ioc(IOC_READ | IOC_WRITE, NV_IOCTL_MAGIC as u8, nr as u8, size)
}

/// A typed escape `_IOWR('F', nr, sizeof(T))` named `name`.
const fn escape<T>(name: &'static str, nr: u32) -> Ioctl<T> {
    Ioctl::new(name, IOC_READ | IOC_WRITE, NV_IOCTL_MAGIC as u8, nr as u8)
}

/// The escapes whose argument struct is the same in every supported family.
pub mod esc {
    use super::*;

    pub const RM_ALLOC_MEMORY: Ioctl<nv_ioctl_nvos02_parameters_with_fd> =
        escape("NV_ESC_RM_ALLOC_MEMORY", NV_ESC_RM_ALLOC_MEMORY);
    pub const RM_FREE: Ioctl<NVOS00_PARAMETERS> = escape("NV_ESC_RM_FREE", NV_ESC_RM_FREE);
    pub const RM_CONTROL: Ioctl<NVOS54_PARAMETERS> = escape("NV_ESC_RM_CONTROL", NV_ESC_RM_CONTROL);
    pub const RM_ALLOC: Ioctl<NVOS21_PARAMETERS> = escape("NV_ESC_RM_ALLOC", NV_ESC_RM_ALLOC);
    pub const RM_MAP_MEMORY: Ioctl<nv_ioctl_nvos33_parameters_with_fd> =
        escape("NV_ESC_RM_MAP_MEMORY", NV_ESC_RM_MAP_MEMORY);
    pub const RM_UNMAP_MEMORY: Ioctl<NVOS34_PARAMETERS> =
        escape("NV_ESC_RM_UNMAP_MEMORY", NV_ESC_RM_UNMAP_MEMORY);
    pub const RM_MAP_MEMORY_DMA_V570: Ioctl<v570::NVOS46_PARAMETERS> =
        escape("NV_ESC_RM_MAP_MEMORY_DMA", NV_ESC_RM_MAP_MEMORY_DMA);
    pub const RM_MAP_MEMORY_DMA_V580: Ioctl<v580::NVOS46_PARAMETERS> =
        escape("NV_ESC_RM_MAP_MEMORY_DMA", NV_ESC_RM_MAP_MEMORY_DMA);
    pub const REGISTER_FD: Ioctl<nv_ioctl_register_fd_t> =
        escape("NV_ESC_REGISTER_FD", NV_ESC_REGISTER_FD);
    pub const ALLOC_OS_EVENT: Ioctl<nv_ioctl_alloc_os_event_t> =
        escape("NV_ESC_ALLOC_OS_EVENT", NV_ESC_ALLOC_OS_EVENT);
    pub const FREE_OS_EVENT: Ioctl<nv_ioctl_free_os_event_t> =
        escape("NV_ESC_FREE_OS_EVENT", NV_ESC_FREE_OS_EVENT);
    pub const CHECK_VERSION_STR: Ioctl<nv_ioctl_rm_api_version_t> =
        escape("NV_ESC_CHECK_VERSION_STR", NV_ESC_CHECK_VERSION_STR);
    pub const IOCTL_XFER_CMD: Ioctl<nv_ioctl_xfer_t> =
        escape("NV_ESC_IOCTL_XFER_CMD", NV_ESC_IOCTL_XFER_CMD);
    pub const WAIT_OPEN_COMPLETE: Ioctl<nv_ioctl_wait_open_complete_t> =
        escape("NV_ESC_WAIT_OPEN_COMPLETE", NV_ESC_WAIT_OPEN_COMPLETE);
}

/// Every escape nr with its name (those with a variable or family-dependent size included).
pub const NV_ESCAPES: &[(u32, &str)] = &[
    (NV_ESC_RM_ALLOC_MEMORY, "NV_ESC_RM_ALLOC_MEMORY"),
    (NV_ESC_RM_FREE, "NV_ESC_RM_FREE"),
    (NV_ESC_RM_CONTROL, "NV_ESC_RM_CONTROL"),
    (NV_ESC_RM_ALLOC, "NV_ESC_RM_ALLOC"),
    (NV_ESC_RM_MAP_MEMORY, "NV_ESC_RM_MAP_MEMORY"),
    (NV_ESC_RM_UNMAP_MEMORY, "NV_ESC_RM_UNMAP_MEMORY"),
    (NV_ESC_RM_MAP_MEMORY_DMA, "NV_ESC_RM_MAP_MEMORY_DMA"),
    (NV_ESC_CARD_INFO, "NV_ESC_CARD_INFO"),
    (NV_ESC_REGISTER_FD, "NV_ESC_REGISTER_FD"),
    (NV_ESC_ALLOC_OS_EVENT, "NV_ESC_ALLOC_OS_EVENT"),
    (NV_ESC_FREE_OS_EVENT, "NV_ESC_FREE_OS_EVENT"),
    (NV_ESC_STATUS_CODE, "NV_ESC_STATUS_CODE"),
    (NV_ESC_CHECK_VERSION_STR, "NV_ESC_CHECK_VERSION_STR"),
    (NV_ESC_IOCTL_XFER_CMD, "NV_ESC_IOCTL_XFER_CMD"),
    (NV_ESC_ATTACH_GPUS_TO_FD, "NV_ESC_ATTACH_GPUS_TO_FD"),
    (NV_ESC_EXPORT_TO_DMABUF_FD, "NV_ESC_EXPORT_TO_DMABUF_FD"),
    (NV_ESC_WAIT_OPEN_COMPLETE, "NV_ESC_WAIT_OPEN_COMPLETE"),
];

/// NV_ESC_CARD_INFO for `n` entries (the kernel fills up to `n` 72-byte records).
pub const fn card_info_request(n: usize) -> u64 {
    escape_request(
        NV_ESC_CARD_INFO,
        n * std::mem::size_of::<nv_ioctl_card_info_t>(),
    )
}

/// The name of an escape nr.
pub fn nv_escape_name(nr: u32) -> Option<&'static str> {
    NV_ESCAPES.iter().find(|(n, _)| *n == nr).map(|(_, s)| *s)
}

/// A UVM request: a plain number (only UVM_INITIALIZE looks like an `_IOC` value, and is not
/// one), tied to its parameter struct. The UVM driver copies `size_of::<T>()` bytes.
pub struct UvmIoctl<T> {
    /// The C macro's name, e.g. `UVM_REGISTER_GPU`.
    pub name: &'static str,
    /// The request number.
    pub request: u64,
    _arg: PhantomData<fn() -> T>,
}

impl<T> Clone for UvmIoctl<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for UvmIoctl<T> {}

impl<T> std::fmt::Debug for UvmIoctl<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:#x})", self.name, self.request)
    }
}

const fn uvm<T>(name: &'static str, request: u32) -> UvmIoctl<T> {
    UvmIoctl {
        name,
        request: request as u64,
        _arg: PhantomData,
    }
}

/// The UVM requests rawgrad issues.
pub mod uvm_req {
    use super::*;

    pub const INITIALIZE: UvmIoctl<UVM_INITIALIZE_PARAMS> = uvm("UVM_INITIALIZE", UVM_INITIALIZE);
    pub const MM_INITIALIZE: UvmIoctl<UVM_MM_INITIALIZE_PARAMS> =
        uvm("UVM_MM_INITIALIZE", UVM_MM_INITIALIZE);
    pub const REGISTER_GPU: UvmIoctl<UVM_REGISTER_GPU_PARAMS> =
        uvm("UVM_REGISTER_GPU", UVM_REGISTER_GPU);
    pub const REGISTER_GPU_VASPACE: UvmIoctl<UVM_REGISTER_GPU_VASPACE_PARAMS> =
        uvm("UVM_REGISTER_GPU_VASPACE", UVM_REGISTER_GPU_VASPACE);
    pub const REGISTER_CHANNEL: UvmIoctl<UVM_REGISTER_CHANNEL_PARAMS> =
        uvm("UVM_REGISTER_CHANNEL", UVM_REGISTER_CHANNEL);
    pub const CREATE_EXTERNAL_RANGE: UvmIoctl<UVM_CREATE_EXTERNAL_RANGE_PARAMS> =
        uvm("UVM_CREATE_EXTERNAL_RANGE", UVM_CREATE_EXTERNAL_RANGE);
    pub const MAP_EXTERNAL_ALLOCATION: UvmIoctl<UVM_MAP_EXTERNAL_ALLOCATION_PARAMS> =
        uvm("UVM_MAP_EXTERNAL_ALLOCATION", UVM_MAP_EXTERNAL_ALLOCATION);
    pub const ENABLE_PEER_ACCESS: UvmIoctl<UVM_ENABLE_PEER_ACCESS_PARAMS> =
        uvm("UVM_ENABLE_PEER_ACCESS", UVM_ENABLE_PEER_ACCESS);
}

/// Every UVM request rawgrad issues, with its name (UVM_FREE's and UVM_UNREGISTER_CHANNEL's
/// parameters are per family: [`super::DriverFamily::uvm_free_params`]).
pub const UVM_REQUESTS: &[(u32, &str)] = &[
    (UVM_INITIALIZE, "UVM_INITIALIZE"),
    (UVM_MM_INITIALIZE, "UVM_MM_INITIALIZE"),
    (UVM_REGISTER_GPU, "UVM_REGISTER_GPU"),
    (UVM_REGISTER_GPU_VASPACE, "UVM_REGISTER_GPU_VASPACE"),
    (UVM_REGISTER_CHANNEL, "UVM_REGISTER_CHANNEL"),
    (UVM_UNREGISTER_CHANNEL, "UVM_UNREGISTER_CHANNEL"),
    (UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE"),
    (UVM_MAP_EXTERNAL_ALLOCATION, "UVM_MAP_EXTERNAL_ALLOCATION"),
    (UVM_FREE, "UVM_FREE"),
    (UVM_ENABLE_PEER_ACCESS, "UVM_ENABLE_PEER_ACCESS"),
];

/// The name of an NVIDIA request number: an escape (`_IOWR('F', ..)`, any size) or a UVM request.
pub fn nv_request_name(request: u64) -> Option<&'static str> {
    if let Some((_, n)) = UVM_REQUESTS.iter().find(|(r, _)| u64::from(*r) == request) {
        return Some(n);
    }
    let is_escape = crate::driver::api::ioc_type(request) == NV_IOCTL_MAGIC as u8
        && crate::driver::api::ioc_dir(request) == (IOC_READ | IOC_WRITE);
    if is_escape {
        return nv_escape_name(u32::from(crate::driver::api::ioc_nr(request)));
    }
    None
}

/// A UVM parameter struct: every one ends with the `rmStatus` the driver writes.
pub trait UvmParams: IoctlArg {
    /// The `rmStatus` field.
    fn rm_status(&self) -> u32;
    /// Set the `rmStatus` field (what the driver, or the emulator, does).
    fn set_rm_status(&mut self, status: u32);
}

macro_rules! uvm_params {
    ($($ty:ty),* $(,)?) => {
        $(impl UvmParams for $ty {
            fn rm_status(&self) -> u32 {
                self.rmStatus
            }
            fn set_rm_status(&mut self, status: u32) {
                self.rmStatus = status;
            }
        })*
    };
}

uvm_params!(
    UVM_INITIALIZE_PARAMS,
    UVM_MM_INITIALIZE_PARAMS,
    UVM_REGISTER_GPU_PARAMS,
    UVM_REGISTER_GPU_VASPACE_PARAMS,
    UVM_REGISTER_CHANNEL_PARAMS,
    UVM_CREATE_EXTERNAL_RANGE_PARAMS,
    UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
    UVM_ENABLE_PEER_ACCESS_PARAMS,
    v570::UVM_FREE_PARAMS,
    v580::UVM_FREE_PARAMS,
    v590::UVM_FREE_PARAMS,
    v570::UVM_UNREGISTER_CHANNEL_PARAMS,
    v580::UVM_UNREGISTER_CHANNEL_PARAMS,
    v590::UVM_UNREGISTER_CHANNEL_PARAMS,
);

macro_rules! nv_args {
    ($($ty:ty => $($f:ident $(. $g:ident)*),*;)*) => {
        $(
            // SAFETY: a bindgen-generated repr(C) struct of integers and integer arrays whose
            // padding the generator turned into named byte-array fields (explicit_padding), so it
            // has no padding bytes and every bit pattern is valid; sizes are pinned by tests.
            unsafe impl IoctlArg for $ty {
                fn describe(&self) -> String {
                    let parts: Vec<String> = vec![$(format!(
                        concat!(stringify!($f $(. $g)*), "={:#x}"), self.$f $(. $g)*
                    )),*];
                    parts.join(" ")
                }
            }
        )*
    };
}

nv_args! {
    NVOS00_PARAMETERS => hRoot, hObjectParent, hObjectOld, status;
    NVOS02_PARAMETERS => hRoot, hObjectParent, hObjectNew, hClass, flags, pMemory, limit, status;
    nv_ioctl_nvos02_parameters_with_fd => params.hRoot, params.hObjectParent, params.hObjectNew,
        params.hClass, params.flags, params.pMemory, params.limit, fd;
    NVOS21_PARAMETERS => hRoot, hObjectParent, hObjectNew, hClass, paramsSize, status;
    NVOS64_PARAMETERS => hRoot, hObjectParent, hObjectNew, hClass, paramsSize, status;
    NVOS54_PARAMETERS => hClient, hObject, cmd, paramsSize, status;
    NVOS33_PARAMETERS => hClient, hDevice, hMemory, offset, length, flags, status;
    nv_ioctl_nvos33_parameters_with_fd => params.hClient, params.hDevice, params.hMemory,
        params.offset, params.length, params.flags, fd;
    NVOS34_PARAMETERS => hClient, hDevice, hMemory, pLinearAddress, flags, status;
    nv_ioctl_card_info_t => valid, gpu_id, minor_number;
    nv_ioctl_register_fd_t => ctl_fd;
    nv_ioctl_rm_api_version_t => cmd, reply;
    nv_ioctl_alloc_os_event_t => hClient, hDevice, fd, Status;
    nv_ioctl_free_os_event_t => hClient, hDevice, fd, Status;
    nv_ioctl_xfer_t => cmd, size, ptr;
    nv_ioctl_wait_open_complete_t => rc, adapterStatus;
    NV0080_ALLOC_PARAMETERS => deviceId, hClientShare, vaMode;
    NV2080_ALLOC_PARAMETERS => subDeviceId;
    NV_MEMORY_ALLOCATION_PARAMS => owner, type_, flags, attr, attr2, size, alignment, offset;
    NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS => offset, limit, hVASpace;
    NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS => hObjectError, hVASpace, engineType;
    NV_CTXSHARE_ALLOCATION_PARAMETERS => hVASpace, flags, subctxId;
    NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS => gpuId, deviceInstance;
    NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS => numClasses, classList;
    NV2080_CTRL_GPU_GET_GID_INFO_PARAMS => index, flags, length;
    NV2080_CTRL_GR_GET_INFO_PARAMS => grInfoListSize, grInfoList;
    NV2080_CTRL_GR_INFO => index, data;
    NV2080_CTRL_PERF_BOOST_PARAMS => flags, duration;
    NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS => workSubmitToken;
    NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS => addressArraySize, flags;
    AmpereAControlGPFifo => GPGet, GPPut;
    NvNotification => info32, info16, status;
    UVM_INITIALIZE_PARAMS => flags, rmStatus;
    UVM_MM_INITIALIZE_PARAMS => uvmFd, rmStatus;
    UVM_REGISTER_GPU_PARAMS => rmCtrlFd, hClient, hSmcPartRef, rmStatus;
    UVM_REGISTER_GPU_VASPACE_PARAMS => rmCtrlFd, hClient, hVaSpace, rmStatus;
    UVM_REGISTER_CHANNEL_PARAMS => rmCtrlFd, hClient, hChannel, base, length, rmStatus;
    UVM_CREATE_EXTERNAL_RANGE_PARAMS => base, length, rmStatus;
    UVM_MAP_EXTERNAL_ALLOCATION_PARAMS => base, length, offset, gpuAttributesCount, rmCtrlFd,
        hClient, hMemory, rmStatus;
    UVM_ENABLE_PEER_ACCESS_PARAMS => rmStatus;
    v570::UVM_FREE_PARAMS => base, length, rmStatus;
    v580::UVM_FREE_PARAMS => base, length, rmStatus;
    v590::UVM_FREE_PARAMS => base, rmStatus;
    v570::UVM_UNREGISTER_CHANNEL_PARAMS => hClient, hChannel, rmStatus;
    v580::UVM_UNREGISTER_CHANNEL_PARAMS => hClient, hChannel, rmStatus;
    v590::UVM_UNREGISTER_CHANNEL_PARAMS => hClient, hChannel, rmStatus;
    v570::NVOS46_PARAMETERS => hClient, hDevice, hDma, hMemory, offset, length, flags, dmaOffset,
        status;
    v580::NVOS46_PARAMETERS => hClient, hDevice, hDma, hMemory, offset, length, flags, dmaOffset,
        status;
    v570::NV_VASPACE_ALLOCATION_PARAMETERS => index, flags, vaSize, vaBase;
    v580::NV_VASPACE_ALLOCATION_PARAMETERS => index, flags, vaSize, vaBase, pasid;
    v570::NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS => bEnable, bSkipSubmit;
    v580::NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS => bEnable, bSkipSubmit, bSkipEnable;
    v570::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS => numClasses;
    v580::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS => numClasses;
    v570::NV_CHANNEL_ALLOC_PARAMS => hObjectError, hObjectBuffer, gpFifoOffset, gpFifoEntries,
        hContextShare, engineType;
    v580::NV_CHANNEL_ALLOC_PARAMS => hObjectError, hObjectBuffer, gpFifoOffset, gpFifoEntries,
        hContextShare, engineType;
    v570::NV0000_ALLOC_PARAMETERS => hClient, processID;
    v580::NV0000_ALLOC_PARAMETERS => hClient, processID;
    v570::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS => changelistNumber;
    v580::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS => changelistNumber;
}

/// Every class id rawgrad knows, with its name.
pub const NV_CLASSES: &[(u32, &str)] = &[
    (NV01_ROOT, "NV01_ROOT"),
    (NV01_ROOT_NON_PRIV, "NV01_ROOT_NON_PRIV"),
    (NV01_MEMORY_SYSTEM, "NV01_MEMORY_SYSTEM"),
    (NV01_MEMORY_LOCAL_USER, "NV01_MEMORY_LOCAL_USER"),
    (NV01_ROOT_CLIENT, "NV01_ROOT_CLIENT"),
    (NV01_MEMORY_VIRTUAL, "NV01_MEMORY_VIRTUAL"),
    (
        NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
        "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR",
    ),
    (NV01_EVENT_OS_EVENT, "NV01_EVENT_OS_EVENT"),
    (NV01_DEVICE_0, "NV01_DEVICE_0"),
    (NV20_SUBDEVICE_0, "NV20_SUBDEVICE_0"),
    (GT200_DEBUGGER, "GT200_DEBUGGER"),
    (FERMI_CONTEXT_SHARE_A, "FERMI_CONTEXT_SHARE_A"),
    (FERMI_VASPACE_A, "FERMI_VASPACE_A"),
    (KEPLER_CHANNEL_GROUP_A, "KEPLER_CHANNEL_GROUP_A"),
    (MAXWELL_PROFILER_DEVICE, "MAXWELL_PROFILER_DEVICE"),
    (VOLTA_USERMODE_A, "VOLTA_USERMODE_A"),
    (TURING_USERMODE_A, "TURING_USERMODE_A"),
    (AMPERE_USERMODE_A, "AMPERE_USERMODE_A"),
    (HOPPER_USERMODE_A, "HOPPER_USERMODE_A"),
    (BLACKWELL_USERMODE_A, "BLACKWELL_USERMODE_A"),
    (VOLTA_CHANNEL_GPFIFO_A, "VOLTA_CHANNEL_GPFIFO_A"),
    (TURING_CHANNEL_GPFIFO_A, "TURING_CHANNEL_GPFIFO_A"),
    (AMPERE_CHANNEL_GPFIFO_A, "AMPERE_CHANNEL_GPFIFO_A"),
    (HOPPER_CHANNEL_GPFIFO_A, "HOPPER_CHANNEL_GPFIFO_A"),
    (BLACKWELL_CHANNEL_GPFIFO_A, "BLACKWELL_CHANNEL_GPFIFO_A"),
    (BLACKWELL_CHANNEL_GPFIFO_B, "BLACKWELL_CHANNEL_GPFIFO_B"),
    (AMPERE_COMPUTE_A, "AMPERE_COMPUTE_A"),
    (AMPERE_COMPUTE_B, "AMPERE_COMPUTE_B"),
    (ADA_COMPUTE_A, "ADA_COMPUTE_A"),
    (HOPPER_COMPUTE_A, "HOPPER_COMPUTE_A"),
    (BLACKWELL_COMPUTE_A, "BLACKWELL_COMPUTE_A"),
    (BLACKWELL_COMPUTE_B, "BLACKWELL_COMPUTE_B"),
    (AMPERE_DMA_COPY_A, "AMPERE_DMA_COPY_A"),
    (AMPERE_DMA_COPY_B, "AMPERE_DMA_COPY_B"),
    (HOPPER_DMA_COPY_A, "HOPPER_DMA_COPY_A"),
    (BLACKWELL_DMA_COPY_A, "BLACKWELL_DMA_COPY_A"),
    (BLACKWELL_DMA_COPY_B, "BLACKWELL_DMA_COPY_B"),
    (AMPERE_A, "AMPERE_A"),
    (AMPERE_B, "AMPERE_B"),
    (ADA_A, "ADA_A"),
    (HOPPER_A, "HOPPER_A"),
    (HOPPER_SEC2_WORK_LAUNCH_A, "HOPPER_SEC2_WORK_LAUNCH_A"),
];

/// The name of a class id.
pub fn nv_class_name(class: u32) -> Option<&'static str> {
    NV_CLASSES
        .iter()
        .find(|(c, _)| *c == class)
        .map(|(_, n)| *n)
}

/// `HOPPER_COMPUTE_A (0xcbc0)`, or `class 0x1234` when unknown.
pub fn class_str(class: u32) -> String {
    match nv_class_name(class) {
        Some(n) => format!("{n} ({class:#x})"),
        None => format!("class {class:#x}"),
    }
}

/// Every control rawgrad issues, with its name.
pub const NV_CONTROLS: &[(u32, &str)] = &[
    (
        NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
        "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2",
    ),
    (
        NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
        "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2",
    ),
    (
        NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
        "NV0080_CTRL_CMD_GPU_GET_CLASSLIST",
    ),
    (
        NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2,
        "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2",
    ),
    (
        NV2080_CTRL_CMD_GPU_GET_GID_INFO,
        "NV2080_CTRL_CMD_GPU_GET_GID_INFO",
    ),
    (NV2080_CTRL_CMD_GR_GET_INFO, "NV2080_CTRL_CMD_GR_GET_INFO"),
    (
        NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE,
        "NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE",
    ),
    (NV2080_CTRL_CMD_PERF_BOOST, "NV2080_CTRL_CMD_PERF_BOOST"),
    (
        NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
        "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
    ),
    (
        NVA06F_CTRL_CMD_GPFIFO_SCHEDULE,
        "NVA06F_CTRL_CMD_GPFIFO_SCHEDULE",
    ),
    (
        NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
        "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
    ),
];

/// The name of a control command.
pub fn nv_control_name(cmd: u32) -> Option<&'static str> {
    NV_CONTROLS.iter().find(|(c, _)| *c == cmd).map(|(_, n)| *n)
}

/// `NV2080_CTRL_CMD_GR_GET_INFO (0x20801201)`, or `control 0x1234` when unknown.
pub fn control_str(cmd: u32) -> String {
    match nv_control_name(cmd) {
        Some(n) => format!("{n} ({cmd:#x})"),
        None => format!("control {cmd:#x}"),
    }
}
