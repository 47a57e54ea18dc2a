//! NV memory (tinygrad `ops_nv.py` `_gpu_alloc`): three kinds, each mapped on the GPU through UVM
//! external ranges at GPU VA = CPU VA (GPU-only VRAM in the high region, everything CPU-mapped in
//! the low window):
//!
//! - [`MemKind::Vram`]: NV01_MEMORY_LOCAL_USER (huge 2 MiB pages from 8 MiB up, as tinygrad
//!   master), optionally CPU-mapped through BAR1 (RM_MAP_MEMORY on a fresh registered
//!   `/dev/nvidiaN` fd, then mmap MAP_FIXED into the window);
//! - [`MemKind::Sysmem`]: NV01_MEMORY_SYSTEM owned by RM (PCI, noncontiguous, GPU-uncached),
//!   CPU-mapped through a fresh `/dev/nvidiactl` per mapping (an fd takes one mapping context
//!   for its life, kernel-open/nvidia/nv-usermap.c): signals and error notifiers;
//! - [`MemKind::Host`]: anonymous host pages at a window address wrapped as an OS descriptor
//!   (NV01_MEMORY_SYSTEM_OS_DESCRIPTOR through NV_ESC_RM_ALLOC_MEMORY with a client-chosen
//!   handle): staging buffers.
//!
//! The origin ([`MemOrigin`]) decides the freeing: UVM_FREE of the range, RM_FREE of the handle,
//! then the CPU view goes back to a `PROT_NONE` reservation and the VA to its allocator. Errors in
//! `Drop` are deferred to the process ([`NvProcess::take_errors`]).
//!
//! Not guaranteed: peer mappings ([`NvBuffer::map_to`]) need both GPUs in the same process.

use std::sync::{Arc, Mutex};

use super::process::{lock, NvProcess};
use crate::driver::nv::{mapping_attributes, NvCtlMapFd, NvGpuFd};
use crate::driver::{MapFlags, Mapping, Prot};
use crate::hcq::HcqBuffer;
use crate::sys::nv::common::*;
use crate::{Error, Result};

/// VRAM allocations of this size and up use 2 MiB pages.
pub const HUGE_PAGE_MIN: u64 = 8 << 20;
const HUGE: u64 = 2 << 20;
const PAGE: u64 = 4096;

/// What memory backs a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    Vram,
    Sysmem,
    Host,
}

/// Who allocated the pages (decides how the buffer is freed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOrigin {
    /// RM_ALLOC of a memory class: RM owns the pages.
    Rm,
    /// Host pages the process mapped, described to RM as an OS descriptor.
    OsDescriptor,
}

/// The RM device a buffer is allocated under, and its GPU.
pub struct NvRmDevice {
    pub proc: Arc<NvProcess>,
    pub device: u32,
    pub subdevice: u32,
    pub gpu_fd: NvGpuFd,
    pub minor: u32,
    pub uuid: [u8; 16],
}

/// A buffer of NV memory.
pub struct NvBuffer {
    proc: Arc<NvProcess>,
    device: u32,
    va: u64,
    size: usize,
    kind: MemKind,
    origin: MemOrigin,
    handle: u32,
    cpu: Option<Mapping>,
    /// Host pages of an OS-descriptor buffer (the CPU view is `cpu`).
    low: bool,
    gpus: Mutex<Vec<[u8; 16]>>,
}

impl std::fmt::Debug for NvBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvBuffer({:?} {:#x}+{:#x}, handle {:#x})",
            self.kind, self.va, self.size, self.handle
        )
    }
}

/// NV_MEMORY_ALLOCATION_PARAMS as tinygrad's `_gpu_alloc` builds them.
fn mem_params(client: u32, size: u64, vram: bool, huge: bool) -> NV_MEMORY_ALLOCATION_PARAMS {
    let base = NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT
        | NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED
        | NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED;
    let (type_, flags, attr, attr2) = if vram {
        let mut attr = NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT;
        let mut attr2 = NVOS32_ATTR2_ZBC_PREFER_NO_ZBC
            | (NVOS32_ATTR2_GPU_CACHEABLE_YES << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT);
        if huge {
            attr |= NVOS32_ATTR_PAGE_SIZE_HUGE << NVOS32_ATTR_PAGE_SIZE_SHIFT;
            attr2 |= NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB << NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT;
        }
        let flags =
            base | NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM;
        (NVOS32_TYPE_IMAGE, flags, attr, attr2)
    } else {
        let attr = (NVOS32_ATTR_LOCATION_PCI << NVOS32_ATTR_LOCATION_SHIFT)
            | (NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT);
        let attr2 = NVOS32_ATTR2_GPU_CACHEABLE_NO << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT;
        (NVOS32_TYPE_NOTIFIER, base, attr, attr2)
    };
    NV_MEMORY_ALLOCATION_PARAMS {
        owner: client,
        type_,
        flags,
        attr,
        attr2,
        format: 6,
        size,
        alignment: if huge { HUGE } else { PAGE },
        limit: size - 1,
        ..Default::default()
    }
}

/// Page size and rounded size of an allocation.
fn layout(size: usize, kind: MemKind) -> Result<(u64, bool)> {
    let s = size.max(1) as u64;
    let huge = kind == MemKind::Vram && s >= HUGE_PAGE_MIN;
    let page = if huge { HUGE } else { PAGE };
    let rounded = s
        .checked_next_multiple_of(page)
        .filter(|&r| r < 1 << 46)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("NV allocation of {size} bytes is too large"))
        })?;
    Ok((rounded, huge))
}

/// Map RM memory `handle` at `va` on the GPU `uuid` through UVM (external range + map).
fn uvm_map(dev: &NvRmDevice, handle: u32, va: u64, size: u64, uuids: &[[u8; 16]]) -> Result<()> {
    let p = &dev.proc;
    let attrs: Vec<_> = uuids
        .iter()
        .map(|u| {
            mapping_attributes(
                *u,
                UvmGpuMappingTypeReadWriteAtomic,
                UvmGpuCachingTypeDefault,
            )
        })
        .collect();
    p.uvm
        .map_external_allocation(va, size, 0, &attrs, p.ctl.fd(), p.client, handle)
}

/// The fd one CPU mapping goes through (closed once mapped; the mapping stays).
enum MapTarget {
    Gpu(NvGpuFd),
    Ctl(NvCtlMapFd),
}

/// The CPU view of RM memory at `va`: VRAM through a fresh registered GPU node, system memory
/// through a fresh control fd. Never through the process's control fd: an fd takes one mapping
/// context for its whole life (nv-usermap.c `nv_add_mapping_context_to_file` refuses a second one
/// with NV_ERR_STATE_IN_USE; only closing the fd clears it, nv.c `nv_free_file_private`).
fn map_cpu(dev: &NvRmDevice, handle: u32, va: u64, size: u64, vram: bool) -> Result<Mapping> {
    let p = &dev.proc;
    let flags = MapFlags::SHARED | MapFlags::FIXED;
    let target = if vram {
        let fd = NvGpuFd::open(p.drv.clone(), dev.minor)?;
        fd.register_fd(p.ctl.fd())?;
        MapTarget::Gpu(fd)
    } else {
        MapTarget::Ctl(NvCtlMapFd::open(p.drv.clone())?)
    };
    let map_fd = match &target {
        MapTarget::Gpu(f) => f.fd(),
        MapTarget::Ctl(f) => f.fd(),
    };
    p.ctl
        .rm_map_memory(p.client, dev.device, handle, 0, size, 0, map_fd)?;
    Mapping::map(
        &p.drv,
        Some(va),
        size as usize,
        Prot::RW,
        flags,
        Some(map_fd),
        0,
    )
}

/// Allocate `size` bytes of `kind` on `dev`, CPU-mapped when `cpu` (always for sysmem and host).
pub fn alloc_memory(dev: &NvRmDevice, size: usize, kind: MemKind, cpu: bool) -> Result<NvBuffer> {
    let (bytes, huge) = layout(size, kind)?;
    let low = cpu || kind != MemKind::Vram;
    let p = &dev.proc;
    let va = p.alloc_va(bytes, if huge { HUGE } else { PAGE }, low)?;
    let mut b = NvBuffer {
        proc: p.clone(),
        device: dev.device,
        va,
        size: bytes as usize,
        kind,
        origin: MemOrigin::Rm,
        handle: 0,
        cpu: None,
        low,
        gpus: Mutex::new(Vec::new()),
    };
    // From here on, `b`'s Drop undoes whatever part succeeded.
    let what = || format!("NV alloc of {bytes:#x} bytes of {kind:?} at {va:#x}");
    b.fill(dev, bytes, huge)
        .map_err(|e| e.with_context(&what()))?;
    Ok(b)
}

impl NvBuffer {
    fn fill(&mut self, dev: &NvRmDevice, bytes: u64, huge: bool) -> Result<()> {
        let p = &dev.proc;
        match self.kind {
            MemKind::Host => {
                let flags = MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED;
                let m = Mapping::map(
                    &p.drv,
                    Some(self.va),
                    bytes as usize,
                    Prot::RW,
                    flags,
                    None,
                    0,
                )?;
                self.cpu = Some(m);
                let os_flags = (NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS
                    << NVOS02_FLAGS_PHYSICALITY_SHIFT)
                    | (NVOS02_FLAGS_COHERENCY_CACHED << NVOS02_FLAGS_COHERENCY_SHIFT)
                    | (NVOS02_FLAGS_MAPPING_NO_MAP << NVOS02_FLAGS_MAPPING_SHIFT);
                self.handle = dev.gpu_fd.rm_alloc_memory(
                    p.client,
                    dev.device,
                    p.next_handle(),
                    NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
                    os_flags,
                    self.va,
                    bytes - 1,
                )?;
                self.origin = MemOrigin::OsDescriptor;
            }
            MemKind::Vram | MemKind::Sysmem => {
                let vram = self.kind == MemKind::Vram;
                let class = if vram {
                    NV01_MEMORY_LOCAL_USER
                } else {
                    NV01_MEMORY_SYSTEM
                };
                let mut params = mem_params(p.client, bytes, vram, huge);
                self.handle = p
                    .ctl
                    .rm_alloc_with(p.client, dev.device, 0, class, &mut params)?;
                if self.low {
                    self.cpu = Some(map_cpu(dev, self.handle, self.va, bytes, vram)?);
                }
            }
        }
        p.uvm.create_external_range(self.va, bytes)?;
        lock(&self.gpus).push(dev.uuid);
        uvm_map(dev, self.handle, self.va, bytes, &[dev.uuid])
    }

    /// The memory kind.
    pub fn kind(&self) -> MemKind {
        self.kind
    }

    /// Who allocated the pages.
    pub fn origin(&self) -> MemOrigin {
        self.origin
    }

    /// The RM memory handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The process the buffer belongs to.
    pub fn process(&self) -> &Arc<NvProcess> {
        &self.proc
    }

    /// Map the buffer on `dev`'s GPU too (same VA; peer access between two GPUs).
    pub fn map_to(&self, dev: &NvRmDevice) -> Result<()> {
        let mut gpus = lock(&self.gpus);
        if gpus.contains(&dev.uuid) {
            return Ok(());
        }
        let mut all = gpus.clone();
        all.push(dev.uuid);
        uvm_map(dev, self.handle, self.va, self.size as u64, &all)?;
        *gpus = all;
        Ok(())
    }
}

impl HcqBuffer for NvBuffer {
    fn va(&self) -> u64 {
        self.va
    }
    fn size(&self) -> usize {
        self.size
    }
    fn cpu(&self) -> Option<&Mapping> {
        self.cpu.as_ref()
    }
}

impl Drop for NvBuffer {
    fn drop(&mut self) {
        let p = self.proc.clone();
        let mut errs = Vec::new();
        if !lock(&self.gpus).is_empty() {
            if let Err(e) = p.uvm.free(self.va, self.size as u64) {
                errs.push(format!("UVM_FREE: {e}"));
            }
        }
        // RM memory: the CPU mapping goes before the object (as tinygrad unmaps before RM_FREE);
        // OS-descriptor memory: RM lets go of (unpins) the host pages before they are unmapped.
        let cpu_first = self.origin == MemOrigin::Rm;
        let mut release_cpu = |errs: &mut Vec<String>| {
            if let Some(m) = self.cpu.take() {
                if let Err(e) = m.into_reservation() {
                    errs.push(format!("re-reserving the CPU range: {e}"));
                }
            }
        };
        if cpu_first {
            release_cpu(&mut errs);
        }
        if self.handle != 0 {
            if let Err(e) = p.ctl.rm_free(p.client, self.device, self.handle) {
                errs.push(format!("RM_FREE {:#x}: {e}", self.handle));
            }
        }
        release_cpu(&mut errs);
        p.free_va(self.va, self.size as u64, self.low);
        if !errs.is_empty() {
            p.defer_error(format!("freeing {self:?}: {}", errs.join("; ")));
        }
    }
}
