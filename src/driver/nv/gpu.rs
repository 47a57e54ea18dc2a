//! [`NvGpuFd`]: a GPU node `/dev/nvidiaN` (N = `minor_number` from CARD_INFO, not the index).
//! Escapes accepted there: REGISTER_FD (link it to the control fd), RM_ALLOC_MEMORY (NVOS02: wrap
//! existing host pages as an OS-descriptor memory object); and mmap of the mapping context an
//! RM_MAP_MEMORY left on this fd (BAR mappings: VRAM, the usermode doorbell page).
//!
//! Not guaranteed: one mapping context per fd at a time (the kernel's rule), so a runtime opens a
//! fresh fd per CPU mapping (and may close it after the mmap; the mapping stays).

use std::sync::Arc;

use super::abi::{class_str, esc};
use super::ctl::{mmap_context, rm_escape};
use crate::driver::api::{ioctl_struct, Driver, Fd, OpenFlags, Prot};
use crate::sys::nv::common::*;
use crate::Result;

/// An open `/dev/nvidiaN`; closed on drop.
pub struct NvGpuFd {
    drv: Arc<dyn Driver>,
    fd: Fd,
    minor: u32,
}

impl std::fmt::Debug for NvGpuFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NvGpuFd(/dev/nvidia{}, fd={})", self.minor, self.fd.0)
    }
}

impl Drop for NvGpuFd {
    fn drop(&mut self) {
        let _ = self.drv.close(self.fd);
    }
}

impl NvGpuFd {
    /// Open `/dev/nvidia{minor}`.
    pub fn open(drv: Arc<dyn Driver>, minor: u32) -> Result<NvGpuFd> {
        let fd = drv.open(&format!("/dev/nvidia{minor}"), OpenFlags::RDWR)?;
        Ok(NvGpuFd { drv, fd, minor })
    }

    /// The descriptor (what RM_MAP_MEMORY's `fd` takes).
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// The minor number this node was opened with.
    pub fn minor(&self) -> u32 {
        self.minor
    }

    /// NV_ESC_REGISTER_FD: link this fd to the control fd `ctl`.
    pub fn register_fd(&self, ctl: Fd) -> Result<()> {
        let mut a = nv_ioctl_register_fd_t { ctl_fd: ctl.0 };
        ioctl_struct(self.drv.as_ref(), self.fd, &esc::REGISTER_FD, &mut a)
    }

    /// NV_ESC_RM_ALLOC_MEMORY (NVOS02) of `class` (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR) under device
    /// `h_parent` of client `h_root`, handle `h_new` (client-chosen), describing the host pages at
    /// `addr` (page aligned) up to `addr + limit`. Returns the handle.
    #[allow(clippy::too_many_arguments)]
    pub fn rm_alloc_memory(
        &self,
        h_root: u32,
        h_parent: u32,
        h_new: u32,
        class: u32,
        flags: u32,
        addr: u64,
        limit: u64,
    ) -> Result<u32> {
        let mut a = nv_ioctl_nvos02_parameters_with_fd {
            params: NVOS02_PARAMETERS {
                hRoot: h_root,
                hObjectParent: h_parent,
                hObjectNew: h_new,
                hClass: class,
                flags,
                pMemory: addr,
                limit,
                ..Default::default()
            },
            fd: -1,
            ..Default::default()
        };
        let what = || {
            format!(
                "NV_ESC_RM_ALLOC_MEMORY(hRoot={h_root:#x} hObjectParent={h_parent:#x} hObjectNew={h_new:#x} hClass={} flags={flags:#x} pMemory={addr:#x} limit={limit:#x})",
                class_str(class)
            )
        };
        rm_escape(
            self.drv.as_ref(),
            self.fd,
            &esc::RM_ALLOC_MEMORY,
            &mut a,
            what,
            |a| a.params.status,
        )?;
        Ok(a.params.hObjectNew)
    }

    /// mmap the mapping context RM_MAP_MEMORY left on this fd: `len` bytes at `addr` (MAP_FIXED)
    /// or anywhere.
    pub fn mmap(&self, addr: Option<u64>, len: usize, prot: Prot) -> Result<u64> {
        mmap_context(self.drv.as_ref(), self.fd, addr, len, prot)
    }
}
