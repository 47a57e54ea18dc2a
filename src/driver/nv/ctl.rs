//! [`NvCtl`]: the control device `/dev/nvidiactl`, where the RM client lives. One short method per
//! escape: RM_ALLOC, RM_CONTROL, RM_FREE, RM_MAP_MEMORY, RM_UNMAP_MEMORY, RM_MAP_MEMORY_DMA,
//! CARD_INFO, CHECK_VERSION_STR (QUERY), ALLOC_OS_EVENT / FREE_OS_EVENT; plus allocation helpers
//! for the classes whose parameters differ per driver family.
//!
//! Every call goes through [`Driver::ioctl`] with `_IOWR('F', nr, exact size)`. A failing ioctl is
//! an [`Error::Errno`](crate::Error::Errno) naming the escape and its key fields; an ioctl that
//! succeeds with a non-zero RM `status` is an [`Error::NvStatus`](crate::Error::NvStatus) naming
//! the escape, the class or control by name and the status by name (plus the emulator's
//! explanation when it gave one). RM_ALLOC parameters are passed zero-padded to [`RM_ALLOC_PAD`]
//! bytes, because RM reads as many bytes as *its* struct has (RM `rmapiParamsCopyInit`,
//! `param_copy.c`): a newer driver reading fields appended after ours then reads zeros, not heap
//! garbage.
//!
//! Not guaranteed: the handle returned by [`NvCtl::rm_alloc`] is RM's; the wrappers keep no
//! bookkeeping of which handles exist (the runtime does).

use std::sync::Arc;

use super::abi::{card_info_request, class_str, control_str, esc, escape_request};
use super::family::{c_str, ChannelParams, DriverFamily, MapMemoryDmaParams, VaSpaceParams};
use super::status::nv_status_error;
use crate::driver::api::{
    arg_bytes, arg_bytes_mut, arg_from_bytes, ioctl_struct, Driver, Fd, Ioctl, IoctlArg, MapFlags,
    OpenFlags, Prot,
};
use crate::sys::nv::common::*;
use crate::{bail, Result};

/// RM_ALLOC parameter buffers are zero-padded to at least this many bytes.
pub const RM_ALLOC_PAD: usize = 4096;

/// Issue escape `req` on `fd`, then check the RM status `status_of` reads from the result.
pub(crate) fn rm_escape<T: IoctlArg>(
    drv: &dyn Driver,
    fd: Fd,
    req: &Ioctl<T>,
    arg: &mut T,
    what: impl FnOnce() -> String,
    status_of: impl FnOnce(&T) -> u32,
) -> Result<()> {
    ioctl_struct(drv, fd, req, arg)?;
    match status_of(arg) {
        NV_OK => Ok(()),
        s => Err(nv_status_error(s, &what(), drv.take_diagnostic())),
    }
}

/// NV_ESC_CHECK_VERSION_STR in QUERY mode: the running driver's version string (`580.142`).
pub fn check_version_str(drv: &dyn Driver, ctl: Fd) -> Result<String> {
    let mut a = nv_ioctl_rm_api_version_t {
        cmd: NV_RM_API_VERSION_CMD_QUERY,
        ..Default::default()
    };
    ioctl_struct(drv, ctl, &esc::CHECK_VERSION_STR, &mut a)?;
    if a.reply != NV_RM_API_VERSION_REPLY_RECOGNIZED {
        bail!(
            Device,
            "NV_ESC_CHECK_VERSION_STR(QUERY): the driver did not recognize the command (reply {})",
            a.reply
        );
    }
    let bytes: Vec<u8> = a.versionString.iter().map(|&c| c as u8).collect();
    Ok(c_str(&bytes))
}

/// mmap the mapping context an RM_MAP_MEMORY left on `fd` (offset 0, `len` bytes, shared; at
/// `addr` with MAP_FIXED when given). The context stays on the fd until the fd closes, and an fd
/// takes one context in its whole life (kernel-open/nvidia/nv-usermap.c
/// `nv_add_mapping_context_to_file`: a second RM_MAP_MEMORY naming it fails with
/// NV_ERR_STATE_IN_USE), so each CPU mapping gets a fresh fd, closed after the mmap (the mapping
/// stays: the VMA holds the file).
pub fn mmap_context(
    drv: &dyn Driver,
    fd: Fd,
    addr: Option<u64>,
    len: usize,
    prot: Prot,
) -> Result<u64> {
    let mut flags = MapFlags::SHARED;
    if addr.is_some() {
        flags |= MapFlags::FIXED;
    }
    drv.mmap(addr, len, prot, flags, Some(fd), 0)
}

/// A fresh `/dev/nvidiactl` opened only as the target of one system-memory RM_MAP_MEMORY (RM
/// sends system-memory mapping contexts to a control-device fd: nvidia/.../osapi.c
/// `RmCreateMmapContextLocked`), then mmapped; closed on drop. It holds no RM client.
pub struct NvCtlMapFd {
    drv: Arc<dyn Driver>,
    fd: Fd,
}

impl std::fmt::Debug for NvCtlMapFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NvCtlMapFd(/dev/nvidiactl, fd={})", self.fd.0)
    }
}

impl Drop for NvCtlMapFd {
    fn drop(&mut self) {
        let _ = self.drv.close(self.fd);
    }
}

impl NvCtlMapFd {
    /// Open a fresh `/dev/nvidiactl`.
    pub fn open(drv: Arc<dyn Driver>) -> Result<NvCtlMapFd> {
        let fd = drv.open("/dev/nvidiactl", OpenFlags::RDWR)?;
        Ok(NvCtlMapFd { drv, fd })
    }

    /// The descriptor (what RM_MAP_MEMORY's `fd` takes).
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// mmap the mapping context RM_MAP_MEMORY left on this fd ([`mmap_context`]).
    pub fn mmap(&self, addr: Option<u64>, len: usize, prot: Prot) -> Result<u64> {
        mmap_context(self.drv.as_ref(), self.fd, addr, len, prot)
    }
}

/// The open control device and the driver family its layouts follow.
pub struct NvCtl {
    drv: Arc<dyn Driver>,
    fd: Fd,
    family: DriverFamily,
    version: String,
}

impl std::fmt::Debug for NvCtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvCtl(fd={}, driver {} = family {})",
            self.fd.0, self.version, self.family
        )
    }
}

impl Drop for NvCtl {
    fn drop(&mut self) {
        // Closing the control fd frees every RM client allocated through it (as the kernel does).
        let _ = self.drv.close(self.fd);
    }
}

impl NvCtl {
    /// Open `/dev/nvidiactl` and detect the driver family ([`DriverFamily::detect`]).
    pub fn open(drv: Arc<dyn Driver>) -> Result<NvCtl> {
        let fd = drv.open("/dev/nvidiactl", OpenFlags::RDWR)?;
        match DriverFamily::detect(drv.as_ref(), fd) {
            Ok((family, version)) => Ok(NvCtl {
                drv,
                fd,
                family,
                version,
            }),
            Err(e) => {
                let _ = drv.close(fd);
                Err(e)
            }
        }
    }

    /// The driver this fd belongs to.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.drv
    }

    /// The control fd (what `rmCtrlFd` fields and REGISTER_FD take).
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// The driver family the struct layouts follow.
    pub fn family(&self) -> DriverFamily {
        self.family
    }

    /// The driver version string detected at open.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// NV_ESC_CHECK_VERSION_STR (QUERY) again.
    pub fn check_version_str(&self) -> Result<String> {
        check_version_str(self.drv.as_ref(), self.fd)
    }

    /// NV_ESC_CARD_INFO with room for `max` GPUs: the valid entries, in the driver's order.
    pub fn card_info(&self, max: usize) -> Result<Vec<nv_ioctl_card_info_t>> {
        let each = std::mem::size_of::<nv_ioctl_card_info_t>();
        if max == 0 || max * each >= NV_ABSOLUTE_MAX_IOCTL_SIZE as usize {
            bail!(
                InvalidArgument,
                "NV_ESC_CARD_INFO: room for {max} GPUs ({} bytes) does not fit an escape",
                max * each
            );
        }
        let mut buf = vec![0u8; max * each];
        self.drv
            .ioctl(self.fd, card_info_request(max), &mut buf)
            .map_err(|e| match e {
                crate::Error::Errno(n, m) => {
                    crate::Error::Errno(n, format!("NV_ESC_CARD_INFO({max} entries) failed: {m}"))
                }
                other => other,
            })?;
        Ok(buf
            .chunks_exact(each)
            .filter_map(arg_from_bytes::<nv_ioctl_card_info_t>)
            .filter(|c| c.valid != 0)
            .collect())
    }

    /// NV_ESC_RM_ALLOC of `class` under `h_parent` (client `h_root`) with raw parameter bytes
    /// (`None`: no parameters). `h_new` 0 lets RM pick the handle. Returns the new handle; the
    /// parameters are copied back (RM writes outputs into some of them).
    pub fn rm_alloc(
        &self,
        h_root: u32,
        h_parent: u32,
        h_new: u32,
        class: u32,
        params: Option<&mut [u8]>,
    ) -> Result<u32> {
        let mut buf = params.as_ref().map(|p| {
            let mut b = vec![0u8; p.len().max(RM_ALLOC_PAD)];
            b[..p.len()].copy_from_slice(p);
            b
        });
        let mut a = NVOS21_PARAMETERS {
            hRoot: h_root,
            hObjectParent: h_parent,
            hObjectNew: h_new,
            hClass: class,
            pAllocParms: buf.as_mut().map_or(0, |b| b.as_mut_ptr() as u64),
            paramsSize: params.as_ref().map_or(0, |p| p.len() as u32),
            ..Default::default()
        };
        let size = a.paramsSize;
        let what = || {
            format!(
                "NV_ESC_RM_ALLOC(hRoot={h_root:#x} hObjectParent={h_parent:#x} hObjectNew={h_new:#x} hClass={} paramsSize={size})",
                class_str(class)
            )
        };
        let r = rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_ALLOC,
            &mut a,
            what,
            |a| a.status,
        );
        if let (Some(p), Some(b)) = (params, buf.as_ref()) {
            let n = p.len();
            p.copy_from_slice(&b[..n]);
        }
        r.map(|_| a.hObjectNew)
    }

    /// [`NvCtl::rm_alloc`] with a typed parameter struct (copied back after the call).
    pub fn rm_alloc_with<P: IoctlArg>(
        &self,
        h_root: u32,
        h_parent: u32,
        h_new: u32,
        class: u32,
        params: &mut P,
    ) -> Result<u32> {
        self.rm_alloc(h_root, h_parent, h_new, class, Some(arg_bytes_mut(params)))
    }

    /// NV_ESC_RM_CONTROL `cmd` on `h_object` with raw parameter bytes (`paramsSize` = their
    /// length, which RM requires to equal its struct exactly).
    pub fn rm_control_raw(
        &self,
        h_client: u32,
        h_object: u32,
        cmd: u32,
        params: &mut [u8],
    ) -> Result<()> {
        let mut a = NVOS54_PARAMETERS {
            hClient: h_client,
            hObject: h_object,
            cmd,
            params: if params.is_empty() {
                0
            } else {
                params.as_mut_ptr() as u64
            },
            paramsSize: params.len() as u32,
            ..Default::default()
        };
        let what = || {
            format!(
                "NV_ESC_RM_CONTROL(hClient={h_client:#x} hObject={h_object:#x} cmd={} paramsSize={})",
                control_str(cmd),
                params.len()
            )
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_CONTROL,
            &mut a,
            what,
            |a| a.status,
        )
    }

    /// [`NvCtl::rm_control_raw`] with a typed parameter struct.
    pub fn rm_control<P: IoctlArg>(
        &self,
        h_client: u32,
        h_object: u32,
        cmd: u32,
        params: &mut P,
    ) -> Result<()> {
        self.rm_control_raw(h_client, h_object, cmd, arg_bytes_mut(params))
    }

    /// NV_ESC_RM_FREE of `h_object` (and everything below it); `h_object == h_client` frees the
    /// client.
    pub fn rm_free(&self, h_client: u32, h_parent: u32, h_object: u32) -> Result<()> {
        let mut a = NVOS00_PARAMETERS {
            hRoot: h_client,
            hObjectParent: h_parent,
            hObjectOld: h_object,
            status: 0,
        };
        let what = || {
            format!("NV_ESC_RM_FREE(hRoot={h_client:#x} hObjectParent={h_parent:#x} hObjectOld={h_object:#x})")
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_FREE,
            &mut a,
            what,
            |a| a.status,
        )
    }

    /// NV_ESC_RM_MAP_MEMORY: leave a mapping context for `[offset, offset + length)` of memory
    /// (or usermode) object `h_memory` on `map_fd` (a fresh REGISTER_FD'ed `/dev/nvidiaN` fd for
    /// VRAM and usermode pages, a fresh [`NvCtlMapFd`] for system memory: one context per fd for
    /// its life); then mmap that fd ([`mmap_context`]). Returns RM's `pLinearAddress` cookie
    /// (for RM_UNMAP_MEMORY).
    #[allow(clippy::too_many_arguments)]
    pub fn rm_map_memory(
        &self,
        h_client: u32,
        h_device: u32,
        h_memory: u32,
        offset: u64,
        length: u64,
        flags: u32,
        map_fd: Fd,
    ) -> Result<u64> {
        let mut a = nv_ioctl_nvos33_parameters_with_fd {
            params: NVOS33_PARAMETERS {
                hClient: h_client,
                hDevice: h_device,
                hMemory: h_memory,
                offset,
                length,
                flags,
                ..Default::default()
            },
            fd: map_fd.0,
            ..Default::default()
        };
        let what = || {
            format!(
                "NV_ESC_RM_MAP_MEMORY(hClient={h_client:#x} hDevice={h_device:#x} hMemory={h_memory:#x} offset={offset:#x} length={length:#x} flags={flags:#x} fd={})",
                map_fd.0
            )
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_MAP_MEMORY,
            &mut a,
            what,
            |a| a.params.status,
        )?;
        Ok(a.params.pLinearAddress)
    }

    /// NV_ESC_RM_UNMAP_MEMORY of the mapping RM_MAP_MEMORY returned `linear` for.
    pub fn rm_unmap_memory(
        &self,
        h_client: u32,
        h_device: u32,
        h_memory: u32,
        linear: u64,
        flags: u32,
    ) -> Result<()> {
        let mut a = NVOS34_PARAMETERS {
            hClient: h_client,
            hDevice: h_device,
            hMemory: h_memory,
            pLinearAddress: linear,
            flags,
            ..Default::default()
        };
        let what = || {
            format!("NV_ESC_RM_UNMAP_MEMORY(hClient={h_client:#x} hDevice={h_device:#x} hMemory={h_memory:#x} pLinearAddress={linear:#x})")
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_UNMAP_MEMORY,
            &mut a,
            what,
            |a| a.status,
        )
    }

    /// NV_ESC_RM_MAP_MEMORY_DMA (NVOS46 in the family's layout): map memory into the GPU VA
    /// space through `h_dma` (the UVM-less path). Returns the GPU VA (`dmaOffset`).
    pub fn rm_map_memory_dma(&self, p: &MapMemoryDmaParams) -> Result<u64> {
        let mut bytes = self.family.nvos46(p)?;
        let what = format!(
            "NV_ESC_RM_MAP_MEMORY_DMA(hClient={:#x} hDevice={:#x} hDma={:#x} hMemory={:#x} offset={:#x} length={:#x} flags={:#x} dmaOffset={:#x})",
            p.h_client, p.h_device, p.h_dma, p.h_memory, p.offset, p.length, p.flags, p.dma_offset
        );
        let req = escape_request(NV_ESC_RM_MAP_MEMORY_DMA, bytes.len());
        self.drv
            .ioctl(self.fd, req, &mut bytes)
            .map_err(|e| match e {
                crate::Error::Errno(n, m) => crate::Error::Errno(n, format!("{what} failed: {m}")),
                other => other,
            })?;
        match self.family.nvos46_result(&bytes)? {
            (va, NV_OK) => Ok(va),
            (_, s) => Err(nv_status_error(s, &what, self.drv.take_diagnostic())),
        }
    }

    /// NV_ESC_ALLOC_OS_EVENT: deliver `h_device`'s events for `h_client` to `fd`.
    pub fn alloc_os_event(&self, h_client: u32, h_device: u32, fd: Fd) -> Result<()> {
        let mut a = nv_ioctl_alloc_os_event_t {
            hClient: h_client,
            hDevice: h_device,
            fd: fd.0 as u32,
            Status: 0,
        };
        let what = || {
            format!(
                "NV_ESC_ALLOC_OS_EVENT(hClient={h_client:#x} hDevice={h_device:#x} fd={})",
                fd.0
            )
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::ALLOC_OS_EVENT,
            &mut a,
            what,
            |a| a.Status,
        )
    }

    /// NV_ESC_FREE_OS_EVENT: undo [`NvCtl::alloc_os_event`].
    pub fn free_os_event(&self, h_client: u32, h_device: u32, fd: Fd) -> Result<()> {
        let mut a = nv_ioctl_free_os_event_t {
            hClient: h_client,
            hDevice: h_device,
            fd: fd.0 as u32,
            Status: 0,
        };
        let what = || {
            format!(
                "NV_ESC_FREE_OS_EVENT(hClient={h_client:#x} hDevice={h_device:#x} fd={})",
                fd.0
            )
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::FREE_OS_EVENT,
            &mut a,
            what,
            |a| a.Status,
        )
    }

    /// Allocate an NV01_ROOT_CLIENT (no parameters, RM picks the handle, as tinygrad does).
    pub fn alloc_root_client(&self) -> Result<u32> {
        self.rm_alloc(0, 0, 0, NV01_ROOT_CLIENT, None)
    }

    /// Allocate FERMI_VASPACE_A under `h_device` with this family's parameter layout.
    pub fn alloc_vaspace(&self, h_client: u32, h_device: u32, p: &VaSpaceParams) -> Result<u32> {
        let mut bytes = self.family.vaspace_params(p)?;
        self.rm_alloc(h_client, h_device, 0, FERMI_VASPACE_A, Some(&mut bytes))
    }

    /// Allocate a channel of `class` (a GPFIFO class) under TSG `h_tsg` with this family's
    /// parameter layout.
    pub fn alloc_channel(
        &self,
        h_client: u32,
        h_tsg: u32,
        class: u32,
        p: &ChannelParams,
    ) -> Result<u32> {
        let mut bytes = self.family.channel_params(p);
        self.rm_alloc(h_client, h_tsg, 0, class, Some(&mut bytes))
    }
}

/// The bytes of a generated struct (for parameters assembled by hand).
pub fn params_bytes<T: IoctlArg>(v: &T) -> Vec<u8> {
    arg_bytes(v).to_vec()
}
