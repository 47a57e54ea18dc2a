//! AMD device memory through KFD (ALLOC_MEMORY_OF_GPU, tinygrad `_gpu_alloc`), GPU VA == CPU VA:
//!
//! - VRAM and GTT: reserve an address range with an anonymous PROT_NONE mmap, ALLOC_MEMORY_OF_GPU
//!   at that VA, and (for CPU access) map the render node's `mmap_offset` over the reservation
//!   with MAP_FIXED; then MAP_MEMORY_TO_GPU.
//! - USERPTR (host memory the GPU reaches: staging, `host` buffers): an anonymous shared mmap
//!   whose address is both the VA and the user pointer.
//! - Every allocation adds WRITABLE | EXECUTABLE | NO_SUBSTITUTE; uncached GTT adds COHERENT |
//!   UNCACHED; host-visible VRAM adds PUBLIC.
//!
//! [`AmdBuffer`] frees itself in `Drop` (UNMAP from every GPU it was mapped on, FREE, then munmap,
//! so the VA range is not handed out again while KFD still holds the BO there);
//! failures there are recorded on the [`KfdCore`] and reported at the next synchronize.
//!
//! Not guaranteed: host-visible VRAM needs a large BAR (ALLOC fails with EINVAL otherwise; callers
//! that can live with GTT fall back to it).

use std::sync::{Arc, Mutex};

use super::process::{lock, KfdCore};
use crate::driver::kfd::ops;
use crate::driver::{MapFlags, Mapping, Prot};
use crate::hcq::HcqBuffer;
use crate::sys::kfd::*;
use crate::{Error, Result};

/// Where an allocation lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// Device memory the CPU cannot map.
    Vram,
    /// Device memory in the CPU-visible BAR (large BAR).
    VramPublic,
    /// System memory through GART.
    Gtt,
    /// System memory through GART, uncached and coherent (rings, signals, events).
    GttUncached,
    /// Host memory wrapped for the GPU.
    Userptr,
}

const BASE_FLAGS: u32 = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;

impl MemKind {
    /// The ALLOC_MEMORY_OF_GPU flags.
    pub fn flags(self) -> u32 {
        BASE_FLAGS
            | match self {
                MemKind::Vram => KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
                MemKind::VramPublic => {
                    KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
                }
                MemKind::Gtt => KFD_IOC_ALLOC_MEM_FLAGS_GTT,
                MemKind::GttUncached => {
                    KFD_IOC_ALLOC_MEM_FLAGS_GTT
                        | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT
                        | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
                }
                MemKind::Userptr => {
                    KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
                }
            }
    }
}

/// One buffer object mapped into one or more GPUs.
pub struct AmdBuffer {
    core: Arc<KfdCore>,
    va: u64,
    size: usize,
    handle: u64,
    kind: MemKind,
    /// CPU view (render-node mapping, or the USERPTR host memory).
    cpu: Option<Mapping>,
    /// GPUs whose VM maps it.
    mapped: Mutex<Vec<u32>>,
    /// Never freed (the KFD signal-event page).
    pinned: bool,
}

impl std::fmt::Debug for AmdBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AmdBuffer({:?} {:#x}+{:#x}, handle {:#x})",
            self.kind, self.va, self.size, self.handle
        )
    }
}

fn page_up(size: usize) -> Result<usize> {
    size.max(1)
        .checked_next_multiple_of(4096)
        .ok_or_else(|| Error::InvalidArgument(format!("allocation of {size} bytes is too large")))
}

/// Allocate `size` bytes of `kind` on `gpu_id` and map them there; with `cpu`, also give the CPU
/// a view (always the case for USERPTR).
pub fn alloc_memory(
    core: &Arc<KfdCore>,
    gpu_id: u32,
    size: usize,
    kind: MemKind,
    cpu: bool,
) -> Result<AmdBuffer> {
    let size = page_up(size)?;
    let (va, handle, offset, view) = create_bo(core, gpu_id, size, kind)?;
    let mut buf = AmdBuffer {
        core: core.clone(),
        va,
        size,
        handle,
        kind,
        cpu: view,
        mapped: Mutex::new(Vec::new()),
        pinned: false,
    };
    if cpu && buf.cpu.is_none() {
        let render = core.render_fd(gpu_id)?;
        buf.cpu = Some(Mapping::map(
            &core.drv,
            Some(va),
            size,
            Prot::RW,
            MapFlags::SHARED | MapFlags::FIXED,
            Some(render),
            offset,
        )?);
    }
    buf.map_to(gpu_id)?;
    Ok(buf)
}

/// ALLOC_MEMORY_OF_GPU at a VA of our choosing: (VA, handle, render-node mmap offset, the host
/// memory of a USERPTR buffer). Undoes its mmap if ALLOC fails.
fn create_bo(
    core: &Arc<KfdCore>,
    gpu_id: u32,
    size: usize,
    kind: MemKind,
) -> Result<(u64, u64, u64, Option<Mapping>)> {
    let drv = core.drv.as_ref();
    let bytes = size as u64;
    if kind == MemKind::Userptr {
        let flags = MapFlags::SHARED | MapFlags::ANONYMOUS;
        let host = Mapping::map(&core.drv, None, size, Prot::RW, flags, None, 0)?;
        let (addr, f) = (host.addr(), kind.flags());
        let a = ops::alloc_memory_of_gpu(drv, core.kfd, gpu_id, addr, bytes, f, addr)?;
        return Ok((addr, a.handle, 0, Some(host)));
    }
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::NORESERVE;
    let va = drv.mmap(None, size, Prot::empty(), flags, None, 0)?;
    match ops::alloc_memory_of_gpu(drv, core.kfd, gpu_id, va, bytes, kind.flags(), 0) {
        Ok(a) => Ok((va, a.handle, a.mmap_offset, None)),
        Err(e) => {
            let _ = drv.munmap(va, size);
            Err(e)
        }
    }
}

impl AmdBuffer {
    /// The KFD handle.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Where it lives.
    pub fn kind(&self) -> MemKind {
        self.kind
    }

    /// The process it belongs to.
    pub fn core(&self) -> &Arc<KfdCore> {
        &self.core
    }

    /// Never free it (KFD owns it until the process ends).
    pub(crate) fn pin(&mut self) {
        self.pinned = true;
    }

    /// Map it into `gpu_id`'s VM too (MAP_MEMORY_TO_GPU with the whole list, as tinygrad does).
    pub fn map_to(&self, gpu_id: u32) -> Result<()> {
        let mut m = lock(&self.mapped);
        if m.contains(&gpu_id) {
            return Ok(());
        }
        let mut ids = m.clone();
        ids.push(gpu_id);
        let n = ops::map_memory_to_gpu(self.core.drv.as_ref(), self.core.kfd, self.handle, &ids)?;
        if n as usize != ids.len() {
            return Err(Error::Device(format!(
                "MAP_MEMORY_TO_GPU of {self:?} mapped {n} of {} GPUs",
                ids.len()
            )));
        }
        *m = ids;
        Ok(())
    }

    /// The GPUs whose VM maps it.
    pub fn mapped_on(&self) -> Vec<u32> {
        lock(&self.mapped).clone()
    }
}

impl HcqBuffer for AmdBuffer {
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

impl Drop for AmdBuffer {
    fn drop(&mut self) {
        if self.pinned {
            return;
        }
        let drv = self.core.drv.as_ref();
        let mut errs = Vec::new();
        let ids = lock(&self.mapped).clone();
        if !ids.is_empty() {
            if let Err(e) = ops::unmap_memory_from_gpu(drv, self.core.kfd, self.handle, &ids) {
                errs.push(e.to_string());
            }
        }
        // FREE before the address range goes back to the host: a range unmapped first could be
        // handed out by the next mmap (another thread's allocation) while KFD still holds the BO
        // at that VA, and ALLOC there would fail with an overlap (tinygrad's `_gpu_free` frees
        // first too). The CPU mapping of a VRAM/GTT BO keeps the BO alive until its munmap.
        if let Err(e) = ops::free_memory_of_gpu(drv, self.core.kfd, self.handle) {
            errs.push(e.to_string());
        }
        let unmapped = match self.cpu.take() {
            Some(m) => m.unmap(),
            None if self.kind == MemKind::Userptr => Ok(()),
            None => drv.munmap(self.va, self.size),
        };
        if let Err(e) = unmapped {
            errs.push(e.to_string());
        }
        if !errs.is_empty() {
            self.core
                .defer_error(format!("freeing {self:?}: {}", errs.join("; ")));
        }
    }
}
