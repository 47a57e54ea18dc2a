//! [`NvUvm`]: the unified-memory driver `/dev/nvidia-uvm`, which owns the GPU page tables of an
//! externally owned vaspace, registers channels and maps RM memory at a chosen GPU VA. One short
//! method per UVM call.
//!
//! UVM requests are plain numbers (no `_IOC` size), issued through [`Driver::ioctl_raw`] with the
//! exact struct; every struct ends with an `rmStatus` that is checked in addition to the ioctl's
//! return ([`Error::NvStatus`] naming the call and the status). The UVM structs are the same in
//! 570..595 except UVM_FREE and UVM_UNREGISTER_CHANNEL, which 590 shrank (their bytes come from
//! [`DriverFamily`]: UVM copies its own struct size, so a wrong layout would go unnoticed).
//!
//! Not guaranteed: UVM_INITIALIZE must come first on an fd; UVM_MM_INITIALIZE goes on a second
//! fd (see [`NvUvm::mm_initialize`]).

use std::sync::Arc;

use super::abi::{uvm_req, UvmIoctl, UvmParams};
use super::family::{DriverFamily, UvmBytes};
use super::status::nv_status_error;
use crate::driver::api::{arg_bytes_mut, Driver, Fd, OpenFlags};
use crate::sys::nv::common::*;
use crate::{bail, Error, Result};

/// One mapping attribute entry of UVM_MAP_EXTERNAL_ALLOCATION (for one GPU).
pub fn mapping_attributes(
    uuid: [u8; 16],
    mapping_type: u32,
    caching_type: u32,
) -> UvmGpuMappingAttributes {
    UvmGpuMappingAttributes {
        gpuUuid: NvProcessorUuid { uuid },
        gpuMappingType: mapping_type,
        gpuCachingType: caching_type,
        ..Default::default()
    }
}

/// An open `/dev/nvidia-uvm` and the driver family its layouts follow; closed on drop.
pub struct NvUvm {
    drv: Arc<dyn Driver>,
    fd: Fd,
    family: DriverFamily,
}

impl std::fmt::Debug for NvUvm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NvUvm(fd={})", self.fd.0)
    }
}

impl Drop for NvUvm {
    fn drop(&mut self) {
        let _ = self.drv.close(self.fd);
    }
}

/// Issue `req` with `arg` and check its `rmStatus`; `ok` lists the non-OK statuses accepted.
fn uvm_call<T: UvmParams>(
    drv: &dyn Driver,
    fd: Fd,
    req: &UvmIoctl<T>,
    arg: &mut T,
    ok: &[u32],
) -> Result<u32> {
    // the argument as passed in, described only on failure (as `ioctl_named` in driver/api.rs)
    let before = *arg;
    drv.ioctl_raw(fd, req.request, arg_bytes_mut(arg))
        .map_err(|e| match e {
            Error::Errno(n, m) => {
                let d = before.describe();
                Error::Errno(n, format!("{}({d}) failed: {m}", req.name))
            }
            other => other,
        })?;
    match arg.rm_status() {
        NV_OK => Ok(NV_OK),
        s if ok.contains(&s) => Ok(s),
        s => Err(nv_status_error(
            s,
            &format!("{}({})", req.name, before.describe()),
            drv.take_diagnostic(),
        )),
    }
}

impl NvUvm {
    /// Open `/dev/nvidia-uvm` (a new UVM VA space until UVM_INITIALIZE or UVM_MM_INITIALIZE)
    /// for a driver of `family`.
    pub fn open(drv: Arc<dyn Driver>, family: DriverFamily) -> Result<NvUvm> {
        let fd = drv.open("/dev/nvidia-uvm", OpenFlags::RDWR)?;
        Ok(NvUvm { drv, fd, family })
    }

    /// Issue `request` (`name`) with family-dependent bytes and check their `rmStatus`.
    fn call_bytes(&self, name: &str, request: u32, mut p: UvmBytes, what: String) -> Result<()> {
        self.drv
            .ioctl_raw(self.fd, u64::from(request), &mut p.bytes)
            .map_err(|e| match e {
                Error::Errno(n, m) => Error::Errno(n, format!("{name}({what}) failed: {m}")),
                other => other,
            })?;
        match p.rm_status() {
            NV_OK => Ok(()),
            s => Err(nv_status_error(
                s,
                &format!("{name}({what})"),
                self.drv.take_diagnostic(),
            )),
        }
    }

    /// The descriptor.
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// UVM_INITIALIZE (`flags` 0 as tinygrad): must be the first call on this fd.
    pub fn initialize(&self, flags: u64) -> Result<()> {
        let mut a = UVM_INITIALIZE_PARAMS {
            flags,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::INITIALIZE,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_MM_INITIALIZE on this (second, fresh) fd for the initialized UVM fd `uvm`. Returns the
    /// status: NV_OK, or NV_WARN_NOTHING_TO_DO, which some platforms return and which counts as
    /// success.
    pub fn mm_initialize(&self, uvm: &NvUvm) -> Result<u32> {
        let mut a = UVM_MM_INITIALIZE_PARAMS {
            uvmFd: uvm.fd.0,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::MM_INITIALIZE,
            &mut a,
            &[NV_WARN_NOTHING_TO_DO],
        )
    }

    /// UVM_REGISTER_GPU of the GPU with `uuid` (`rm_ctrl_fd` -1 and handles 0 without an SMC
    /// partition, as tinygrad).
    pub fn register_gpu(
        &self,
        uuid: [u8; 16],
        rm_ctrl_fd: i32,
        h_client: u32,
        h_smc_part_ref: u32,
    ) -> Result<()> {
        let mut a = UVM_REGISTER_GPU_PARAMS {
            gpu_uuid: NvProcessorUuid { uuid },
            rmCtrlFd: rm_ctrl_fd,
            hClient: h_client,
            hSmcPartRef: h_smc_part_ref,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::REGISTER_GPU,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_REGISTER_GPU_VASPACE: let UVM own the page tables of vaspace `h_va_space` (allocated
    /// with IS_EXTERNALLY_OWNED) of client `h_client` on control fd `ctl`.
    pub fn register_gpu_vaspace(
        &self,
        uuid: [u8; 16],
        ctl: Fd,
        h_client: u32,
        h_va_space: u32,
    ) -> Result<()> {
        let mut a = UVM_REGISTER_GPU_VASPACE_PARAMS {
            gpuUuid: NvProcessorUuid { uuid },
            rmCtrlFd: ctl.0,
            hClient: h_client,
            hVaSpace: h_va_space,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::REGISTER_GPU_VASPACE,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_REGISTER_CHANNEL: channel `h_channel`'s context buffers go to `[base, base + length)`.
    #[allow(clippy::too_many_arguments)]
    pub fn register_channel(
        &self,
        uuid: [u8; 16],
        ctl: Fd,
        h_client: u32,
        h_channel: u32,
        base: u64,
        length: u64,
    ) -> Result<()> {
        let mut a = UVM_REGISTER_CHANNEL_PARAMS {
            gpuUuid: NvProcessorUuid { uuid },
            rmCtrlFd: ctl.0,
            hClient: h_client,
            hChannel: h_channel,
            base,
            length,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::REGISTER_CHANNEL,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_CREATE_EXTERNAL_RANGE `[base, base + length)` (4 KiB aligned, no overlap).
    pub fn create_external_range(&self, base: u64, length: u64) -> Result<()> {
        let mut a = UVM_CREATE_EXTERNAL_RANGE_PARAMS {
            base,
            length,
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::CREATE_EXTERNAL_RANGE,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_MAP_EXTERNAL_ALLOCATION: map `[offset, offset + length)` of RM memory `h_memory`
    /// (client `h_client` on control fd `ctl`) at GPU VA `base` inside an external range, on the
    /// GPUs `attrs` name (1 to UVM_MAX_GPUS entries).
    #[allow(clippy::too_many_arguments)]
    pub fn map_external_allocation(
        &self,
        base: u64,
        length: u64,
        offset: u64,
        attrs: &[UvmGpuMappingAttributes],
        ctl: Fd,
        h_client: u32,
        h_memory: u32,
    ) -> Result<()> {
        let mut a = Box::<UVM_MAP_EXTERNAL_ALLOCATION_PARAMS>::default();
        if attrs.len() > a.perGpuAttributes.len() {
            bail!(
                InvalidArgument,
                "UVM_MAP_EXTERNAL_ALLOCATION: {} GPU attribute entries, at most {}",
                attrs.len(),
                a.perGpuAttributes.len()
            );
        }
        a.base = base;
        a.length = length;
        a.offset = offset;
        a.perGpuAttributes[..attrs.len()].copy_from_slice(attrs);
        a.gpuAttributesCount = attrs.len() as u64;
        a.rmCtrlFd = ctl.0;
        a.hClient = h_client;
        a.hMemory = h_memory;
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::MAP_EXTERNAL_ALLOCATION,
            &mut a,
            &[],
        )
        .map(|_| ())
    }

    /// UVM_FREE of the range at `base` (`length` its whole size; 590+ drivers take the base
    /// alone): unmaps it on every GPU. Only external, semaphore-pool, P2P and SKED-reflected
    /// ranges can be freed so (uvm_va_range.c `uvm_free`); channel ranges go with
    /// [`NvUvm::unregister_channel`].
    pub fn free(&self, base: u64, length: u64) -> Result<()> {
        let p = self.family.uvm_free_params(base, length);
        let what = format!("base={base:#x} length={length:#x}");
        self.call_bytes("UVM_FREE", UVM_FREE, p, what)
    }

    /// UVM_UNREGISTER_CHANNEL of channel `h_channel` of `h_client` (registered on this fd with
    /// [`NvUvm::register_channel`]): UVM stops the channel and destroys the VA ranges it carved
    /// for it (uvm_user_channel.c `uvm_unregister_channel`). Goes before RM frees the channel.
    pub fn unregister_channel(&self, uuid: [u8; 16], h_client: u32, h_channel: u32) -> Result<()> {
        let p = self
            .family
            .uvm_unregister_channel_params(uuid, h_client, h_channel);
        let what = format!("hClient={h_client:#x} hChannel={h_channel:#x}");
        self.call_bytes("UVM_UNREGISTER_CHANNEL", UVM_UNREGISTER_CHANNEL, p, what)
    }

    /// UVM_ENABLE_PEER_ACCESS between two registered GPUs (PCIe P2P).
    pub fn enable_peer_access(&self, uuid_a: [u8; 16], uuid_b: [u8; 16]) -> Result<()> {
        let mut a = UVM_ENABLE_PEER_ACCESS_PARAMS {
            gpuUuidA: NvProcessorUuid { uuid: uuid_a },
            gpuUuidB: NvProcessorUuid { uuid: uuid_b },
            ..Default::default()
        };
        uvm_call(
            self.drv.as_ref(),
            self.fd,
            &uvm_req::ENABLE_PEER_ACCESS,
            &mut a,
            &[],
        )
        .map(|_| ())
    }
}
