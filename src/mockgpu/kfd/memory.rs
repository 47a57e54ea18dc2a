//! Emulated memory: the process's mmaps through the driver, buffer objects (ALLOC/FREE), GPU page
//! tables (MAP/UNMAP) and the software GPU's address translation.
//!
//! GPU VA == CPU VA as on hardware: a VRAM/GTT buffer is created at `va_addr`, which must lie in an
//! address-space reservation the process made with an anonymous mmap through this driver; the
//! process then maps the render node at the buffer's `mmap_offset` over that reservation
//! (MAP_FIXED) and gets real memory there. USERPTR buffers wrap memory the process mapped with an
//! anonymous shared mmap through this driver. Each device has its own page table, filled by
//! MAP_MEMORY_TO_GPU.
//!
//! Not guaranteed: page tables are per buffer, so a GPU access spanning two buffers must be split.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::{lock, EmuFd, EmuKfd, KErr, KResult, KfdState};
use crate::driver::api::{errno_error, Fd, MapFlags, Prot};
use crate::driver::kfd::*;
use crate::driver::mapped::Mapping;
use crate::driver::os::{self, FixedTarget};
use crate::driver::real::page_size;
use crate::mockgpu::backing::Backing;
use crate::sys::kfd::*;
use crate::{Error, Result};

/// Render-node mmap offsets start where DRM puts them (`DRM_FILE_PAGE_OFFSET_START` pages).
pub(crate) const DRM_MMAP_OFFSET_BASE: u64 = 1 << 32;
/// The top of the user address space (`TASK_SIZE` on x86-64 with 4-level paging).
pub(crate) const TASK_SIZE: u64 = 0x7FFF_FFFF_F000;
/// The fake bus address DOORBELL allocations report as `mmap_offset`.
pub(crate) const DOORBELL_BUS_BASE: u64 = 0xF000_0000_0000;

pub(crate) const MEM_TYPES: u32 = KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    | KFD_IOC_ALLOC_MEM_FLAGS_GTT
    | KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
    | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL
    | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
pub(crate) const MEM_ATTRS: u32 = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
    | KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM
    | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT
    | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;

/// One buffer object.
pub(crate) struct Alloc {
    pub(crate) handle: u64,
    pub(crate) va: u64,
    /// Bytes, page-rounded.
    pub(crate) size: u64,
    pub(crate) flags: u32,
    pub(crate) mmap_offset: u64,
    pub(crate) backing: Arc<Backing>,
    pub(crate) backing_off: u64,
    /// Devices whose page tables map it.
    pub(crate) mapped: BTreeSet<usize>,
    /// Live queues using it as a queue buffer, per device (Linux >= 6.12 `queue_refcount`).
    pub(crate) queue_refs: HashMap<usize, u32>,
}

/// What a CPU range the process mapped through the driver is.
#[derive(Clone, Debug)]
pub(crate) enum CpuVmaKind {
    /// Anonymous private memory (an address-space reservation when PROT_NONE).
    Anon,
    /// Anonymous shared memory (usable as USERPTR); the backing offset at the mapping's base.
    Shared(Arc<Backing>, u64),
    /// A render-node mapping of a buffer.
    Render,
    /// A device's doorbell page.
    Doorbell(usize),
    /// The signal-event page.
    Events,
    /// A device's MMIO remap page.
    Mmio,
    /// A mapping of an emulated NVIDIA memory object or usermode page (`mockgpu::rm`).
    NvDevice,
}

/// A GPU page-table entry: one buffer mapped on one device.
#[derive(Clone, Debug)]
pub(crate) struct GpuMap {
    pub(crate) handle: u64,
    pub(crate) backing: Arc<Backing>,
    /// Backing offset at the mapping's base (the buffer's VA).
    pub(crate) off: u64,
    pub(crate) writable: bool,
}

pub(crate) fn page_up(v: u64) -> Option<u64> {
    v.checked_add(page_size() - 1)
        .map(|x| x / page_size() * page_size())
}

pub(crate) fn prot_of(flags: u32) -> Prot {
    if flags & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE != 0 {
        Prot::RW
    } else {
        Prot::READ
    }
}

impl EmuKfd {
    /// `Driver::mmap` of the emulated process.
    pub(crate) fn mmap(
        &self,
        addr: Option<u64>,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        fd: Option<Fd>,
        offset: u64,
    ) -> Result<u64> {
        let what =
            format!("emu: mmap(addr={addr:#x?}, len={len:#x}, fd={fd:?}, offset={offset:#x})");
        let mut st = lock(&self.state);
        let (span, target) = mmap_checks(&st, addr, len, flags, offset)
            .map_err(|e| errno_error(e.0, format!("{what}: {}", e.1)))?;
        let res = match fd {
            None => mmap_anon(target, addr, span, prot, flags),
            Some(f) => match st.fds.get(&f.0).copied() {
                None => Err(KErr(
                    libc::EBADF,
                    format!("fd {} is not an open emulated fd", f.0),
                )),
                Some(EmuFd::Kfd) => self.mmap_kfd(target, span, prot, offset),
                Some(EmuFd::Render(i)) => {
                    self.mmap_render(&st, i, f.0, target, span, prot, flags, offset)
                }
            },
        };
        let (at, kind) = res.map_err(|e| errno_error(e.0, format!("{what}: {}", e.1)))?;
        st.cpu.insert(at, at + span, kind.clone());
        let mut db = self.doorbells.write().unwrap_or_else(|e| e.into_inner());
        db.maps.remove(at, at + span);
        if let CpuVmaKind::Doorbell(i) = kind {
            db.maps.insert(at, at + span, i);
        }
        Ok(at)
    }

    fn mmap_kfd(
        &self,
        target: Option<FixedTarget>,
        span: u64,
        prot: Prot,
        offset: u64,
    ) -> KResult<(u64, CpuVmaKind)> {
        let node = self.node_by_gpu_id(kfd_mmap_get_gpu_id(offset));
        let map = |b: &Backing, off: u64| b.map_cpu(target, span, off, prot).map_err(to_kerr);
        match offset & KFD_MMAP_TYPE_MASK {
            KFD_MMAP_TYPE_DOORBELL => {
                let Some(i) = node else {
                    kbail!(ENODEV, "doorbell offset names no device")
                };
                if span != KFD_DOORBELL_PROCESS_SLICE as u64 {
                    kbail!(EINVAL, "doorbell mmap must be exactly {KFD_DOORBELL_PROCESS_SLICE:#x} bytes, got {span:#x}");
                }
                Ok((
                    map(&self.nodes[i].doorbell_page, 0)?,
                    CpuVmaKind::Doorbell(i),
                ))
            }
            KFD_MMAP_TYPE_EVENTS => {
                let Some((b, off)) = self.events.page_backing() else {
                    kbail!(
                        EINVAL,
                        "no signal-event page exists yet (create a signal event first)"
                    );
                };
                if span > KFD_SIGNAL_EVENT_PAGE_SIZE as u64 {
                    kbail!(EINVAL, "event page mmap of {span:#x} bytes exceeds {KFD_SIGNAL_EVENT_PAGE_SIZE:#x}");
                }
                Ok((map(&b, off)?, CpuVmaKind::Events))
            }
            KFD_MMAP_TYPE_MMIO => {
                let Some(i) = node else {
                    kbail!(ENODEV, "MMIO offset names no device")
                };
                if span != page_size() {
                    kbail!(EINVAL, "MMIO mmap must be one page, got {span:#x}");
                }
                Ok((map(&self.nodes[i].mmio_page, 0)?, CpuVmaKind::Mmio))
            }
            _ => kbail!(EINVAL, "reserved-memory mmaps (APU CWSR) are not emulated"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn mmap_render(
        &self,
        st: &KfdState,
        node: usize,
        fd: i32,
        target: Option<FixedTarget>,
        span: u64,
        prot: Prot,
        flags: MapFlags,
        offset: u64,
    ) -> KResult<(u64, CpuVmaKind)> {
        let Some(a) = st
            .by_offset
            .get(&(node, offset))
            .and_then(|h| st.allocs.get(h))
        else {
            kbail!(
                EINVAL,
                "no buffer object at render-node offset {offset:#x} of this device"
            );
        };
        if st.acquired[node] != Some(fd) {
            kbail!(
                EACCES,
                "buffer {:#x} belongs to the VM acquired through another render fd",
                a.handle
            );
        }
        if !flags.contains(MapFlags::SHARED) {
            kbail!(
                EINVAL,
                "render-node mappings must be MAP_SHARED (TTM refuses private copies)"
            );
        }
        if span > a.size {
            kbail!(
                EINVAL,
                "mapping {span:#x} bytes of a {:#x}-byte buffer",
                a.size
            );
        }
        let at = a
            .backing
            .map_cpu(target, span, a.backing_off, prot)
            .map_err(to_kerr)?;
        Ok((at, CpuVmaKind::Render))
    }

    /// `Driver::munmap` of the emulated process.
    pub(crate) fn munmap(&self, addr: u64, len: u64) -> Result<()> {
        let mut st = lock(&self.state);
        let end = page_up(len)
            .and_then(|s| addr.checked_add(s))
            .unwrap_or(u64::MAX);
        let target = FixedTarget::within(&st.cpu, addr, end.saturating_sub(addr));
        let Some(target) = target.filter(|_| len != 0) else {
            return Err(errno_error(
                libc::EINVAL,
                format!("emu: munmap({addr:#x}, {len:#x}): not memory mapped through this driver"),
            ));
        };
        os::unmap(target).map_err(|e| {
            let errno = e.errno().unwrap_or(libc::EIO);
            errno_error(errno, format!("emu: munmap({addr:#x}, {len:#x})"))
        })?;
        st.cpu.remove(addr, end);
        self.doorbells
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .maps
            .remove(addr, end);
        Ok(())
    }

    /// The software GPU's view of `[va, va + len)` on device `index`.
    pub(crate) fn gpu_translate(
        &self,
        index: usize,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Mapping> {
        let gpu_id = self.descs[index].gpu_id;
        let vm = self.gpuvm[index].read().unwrap_or_else(|e| e.into_inner());
        let Some(p) = vm.get(va) else {
            return Err(Error::Fault(format!(
                "emu gpu {gpu_id:#x}: {} of {len:#x} bytes at unmapped VA {va:#x}",
                if write { "write" } else { "read" }
            )));
        };
        if !matches!(va.checked_add(len), Some(e) if e <= p.end) {
            return Err(Error::Fault(format!(
                "emu gpu {gpu_id:#x}: access {va:#x}+{len:#x} runs past buffer {:#x} ({:#x}..{:#x})",
                p.value.handle, p.start, p.end
            )));
        }
        if write && !p.value.writable {
            return Err(Error::Fault(format!(
                "emu gpu {gpu_id:#x}: write to read-only buffer {:#x} at {va:#x}",
                p.value.handle
            )));
        }
        let prot = if p.value.writable {
            Prot::RW
        } else {
            Prot::READ
        };
        p.value
            .backing
            .view(p.value.off + p.offset_of(va), len, prot)
    }
}

/// The generic mmap checks; returns the page-rounded length and the MAP_FIXED target (which must
/// lie in memory the emulator mapped for the process).
pub(crate) fn mmap_checks(
    st: &KfdState,
    addr: Option<u64>,
    len: u64,
    flags: MapFlags,
    offset: u64,
) -> KResult<(u64, Option<FixedTarget>)> {
    let Some(span) = page_up(len).filter(|&s| s > 0) else {
        kbail!(EINVAL, "bad length");
    };
    if offset % page_size() != 0 {
        kbail!(EINVAL, "offset not page aligned");
    }
    if !flags.intersects(MapFlags::SHARED | MapFlags::PRIVATE) {
        kbail!(EINVAL, "needs MAP_SHARED or MAP_PRIVATE");
    }
    if !flags.contains(MapFlags::FIXED) {
        return Ok((span, None));
    }
    let Some(a) = addr.filter(|a| a % page_size() == 0) else {
        kbail!(EINVAL, "MAP_FIXED needs a page-aligned address");
    };
    let Some(target) = FixedTarget::within(&st.cpu, a, span) else {
        kbail!(
            EINVAL,
            "MAP_FIXED target is not inside memory mapped through this driver"
        );
    };
    Ok((span, Some(target)))
}

pub(crate) fn to_kerr(e: Error) -> KErr {
    KErr(e.errno().unwrap_or(libc::EIO), e.message().to_string())
}

fn mmap_anon(
    target: Option<FixedTarget>,
    hint: Option<u64>,
    span: u64,
    prot: Prot,
    flags: MapFlags,
) -> KResult<(u64, CpuVmaKind)> {
    if flags.contains(MapFlags::SHARED) {
        let b = Backing::new(span, "anonymous shared memory").map_err(to_kerr)?;
        let at = b.map_cpu(target, span, 0, prot).map_err(to_kerr)?;
        return Ok((at, CpuVmaKind::Shared(b, 0)));
    }
    // Without MAP_FIXED an address is a hint, as for the kernel (the NV runtime asks for a low
    // VA window this way).
    let hint = hint.filter(|h| h % page_size() == 0);
    let r = os::map_anonymous(
        target,
        hint,
        span,
        prot,
        flags.contains(MapFlags::NORESERVE),
    )
    .map_err(|e| {
        KErr(
            libc::ENOMEM,
            format!(
                "anonymous mmap of {span:#x} bytes failed (errno {})",
                e.errno().unwrap_or(0)
            ),
        )
    })?;
    Ok((r, CpuVmaKind::Anon))
}
