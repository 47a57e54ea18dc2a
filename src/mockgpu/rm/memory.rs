//! Emulated RM memory: memory objects (VRAM, system memory, OS descriptors) backed by memfds,
//! RM_MAP_MEMORY mapping contexts and the mmaps of them, and the usermode doorbell page. The GPU
//! side (page tables, RM_MAP_MEMORY_DMA, translation) is `gpuvm.rs`.
//!
//! Rules (RM's status codes): RM_MAP_MEMORY needs `hMemory` to be a memory or usermode object of
//! `hDevice`'s GPU, a page-aligned range inside it, and a target fd that is a control fd (system
//! memory) or a REGISTER_FD'ed `/dev/nvidiaN` of the same GPU (anything, VRAM and the usermode
//! page included). An fd takes one mapping context for its whole life: the context stays valid
//! until the fd closes and a second RM_MAP_MEMORY naming the fd fails with NV_ERR_STATE_IN_USE
//! (kernel-open/nvidia/nv-usermap.c `nv_add_mapping_context_to_file` checks `valid` and sets it;
//! nothing but nv.c `nv_free_file_private` at close clears it, in every tag 570..595). The mmap
//! must be of offset 0, MAP_SHARED and the context's page-rounded length (EINVAL otherwise); it
//! only reads the context (nv-mmap.c `nvidia_mmap_helper`), so the fd can be mapped again.
//!
//! VRAM is zeroed at allocation, as kernel RM's scrub-on-free (default on GK110+,
//! gpu/mem_mgr/mem_mgr.c) leaves it; `EmuConfig::nv_scrub` off models the configurations that
//! turn scrubbing off (the RMDisableScrubOnFree registry key, vGPU hosts, legacy vGPU guests,
//! SLI: mem_mgr_ga100.c `memmgrScrubRegistryOverrides_GA100`), where fresh VRAM holds whatever
//! the previous owner left (a 0xA5 pattern here).
//! OS descriptors must name anonymous MAP_SHARED memory the process mapped through this driver
//! (the emulator can only share memory it created; NV_ERR_INVALID_ADDRESS otherwise).
//!
//! Not guaranteed: VRAM mapped through the control fd is refused (the real driver maps VRAM
//! through BAR1 on the GPU node); the usermode page's TIME_0/TIME_1 registers are not kept.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::escape::with_rm;
use super::objects::{read_params, write_params, Obj, ObjKind};
use super::{lock, rbail, EmuNv, NvDoorbellWrite, NvFd, NvState, RmErr, RmResult};
use crate::driver::api::{errno_error, Fd, MapFlags, Prot};
use crate::driver::nv::class_str;
use crate::mockgpu::backing::Backing;
use crate::mockgpu::kfd::memory::{mmap_checks, page_up, CpuVmaKind};
use crate::mockgpu::{KErr, KResult};
use crate::sys::nv::common::*;
use crate::Result;

const PAGE: u64 = 4096;
const HUGE_PAGE: u64 = 2 << 20;
/// What unscrubbed VRAM holds in the emulator.
pub(crate) const UNSCRUBBED_BYTE: u8 = 0xA5;

/// What kind of memory an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemKind {
    Vram,
    Sysmem,
    OsDescriptor,
}

/// A memory object's backing.
#[derive(Debug)]
pub(crate) struct MemObj {
    pub(crate) kind: MemKind,
    pub(crate) backing: Arc<Backing>,
    /// Offset of the object's first byte in `backing`.
    pub(crate) off: u64,
    pub(crate) size: u64,
}

impl MemObj {
    pub(crate) fn is_vram(&self) -> bool {
        self.kind == MemKind::Vram
    }
}

/// A mapping context RM_MAP_MEMORY left on an fd (valid until the fd closes).
#[derive(Clone)]
pub(crate) struct MapCtx {
    pub(crate) backing: Arc<Backing>,
    pub(crate) off: u64,
    pub(crate) len: u64,
    /// The device whose usermode page this is (doorbell routing).
    pub(crate) usermode: Option<usize>,
}

impl EmuNv {
    /// An NV01_MEMORY_LOCAL_USER / NV01_MEMORY_SYSTEM object from NV_MEMORY_ALLOCATION_PARAMS.
    pub(crate) fn construct_memory(
        &self,
        st: &mut NvState,
        gpu: usize,
        a: &NVOS21_PARAMETERS,
    ) -> RmResult<Arc<MemObj>> {
        let mut p: NV_MEMORY_ALLOCATION_PARAMS =
            read_params(a.pAllocParms, 128, "NV_MEMORY_ALLOCATION_PARAMS")?;
        if p.size == 0 {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "NV_MEMORY_ALLOCATION_PARAMS.size is 0"
            );
        }
        let huge = (p.attr >> NVOS32_ATTR_PAGE_SIZE_SHIFT) & 3 == NVOS32_ATTR_PAGE_SIZE_HUGE
            || (p.attr2 >> NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT) & 3
                == NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB;
        let forced = p.flags & NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE != 0;
        if forced && p.alignment != 0 && !p.alignment.is_power_of_two() {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "alignment {:#x} is not a power of two",
                p.alignment
            );
        }
        let align = if huge { HUGE_PAGE } else { PAGE }.max(if forced { p.alignment } else { 0 });
        let Some(size) = p.size.checked_next_multiple_of(align) else {
            rbail!(NV_ERR_INVALID_ARGUMENT, "size {:#x} overflows", p.size);
        };
        let vram = a.hClass == NV01_MEMORY_LOCAL_USER;
        // The heap refuses what does not fit (gpu/mem_mgr/heap.c `heapAlloc`: NV_ERR_NO_MEMORY,
        // logging "failed to allocate block. Heap total=.. free=.."); the budget is the chip's
        // VRAM or a test's limit (`EmuDriver::limit_nv_vram`).
        let budget = st.vram_budget[gpu];
        if vram && st.vram_used[gpu].saturating_add(size) > budget {
            rbail!(
                NV_ERR_NO_MEMORY,
                "out of VRAM: {size:#x} bytes requested, {:#x} free ({:#x} used of {budget:#x})",
                budget.saturating_sub(st.vram_used[gpu]),
                st.vram_used[gpu]
            );
        }
        let backing = Backing::new(size, "NV memory object")
            .map_err(|e| RmErr(NV_ERR_NO_MEMORY, e.message().to_string()))?;
        if vram && !self.scrub {
            // Not scrubbed: the previous owner's bytes (see the module doc).
            backing
                .view(0, backing.len(), Prot::RW)
                .and_then(|v| v.fill(0, v.len(), UNSCRUBBED_BYTE))
                .map_err(|e| RmErr(NV_ERR_NO_MEMORY, e.message().to_string()))?;
        }
        if vram {
            st.vram_used[gpu] += size;
        }
        p.size = size;
        p.offset = if vram { st.vram_used[gpu] - size } else { 0 };
        p.limit = size - 1;
        write_params(a.pAllocParms, 128, &p, "NV_MEMORY_ALLOCATION_PARAMS")?;
        let kind = if vram { MemKind::Vram } else { MemKind::Sysmem };
        Ok(Arc::new(MemObj {
            kind,
            backing,
            off: 0,
            size,
        }))
    }

    /// NV_ESC_RM_ALLOC_MEMORY on `/dev/nvidia<gpu>`: an OS-descriptor memory object.
    pub(crate) fn rm_alloc_memory(&self, gpu: usize, arg: &mut [u8]) -> KResult {
        with_rm(
            arg,
            |a: &mut nv_ioctl_nvos02_parameters_with_fd| self.alloc_os_desc(gpu, &mut a.params),
            |a, s| a.params.status = s,
        )
    }

    fn alloc_os_desc(&self, fd_gpu: usize, p: &mut NVOS02_PARAMETERS) -> RmResult {
        // Resolve the pages before taking the RM lock (lock order: process state first).
        let (backing, off, size) = self.os_desc_pages(p)?;
        let mut st = lock(&self.state);
        let Some(client) = st.clients.get_mut(&p.hRoot) else {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hRoot {:#x} is not a client",
                p.hRoot
            );
        };
        let gpu = match client.objects.get(&p.hObjectParent) {
            Some(Obj {
                kind: ObjKind::Device,
                gpu,
                ..
            }) => *gpu,
            _ => rbail!(
                NV_ERR_INVALID_OBJECT_PARENT,
                "OS-descriptor memory must be allocated under an NV01_DEVICE_0, not {:#x}",
                p.hObjectParent
            ),
        };
        if gpu != fd_gpu {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "device {:#x} is GPU {gpu}, but the escape came on /dev/nvidia{fd_gpu}",
                p.hObjectParent
            );
        }
        let h = client.handle(p.hObjectNew, p.hRoot)?;
        let m = MemObj {
            kind: MemKind::OsDescriptor,
            backing,
            off,
            size,
        };
        client.insert(
            h,
            Obj {
                class: p.hClass,
                parent: p.hObjectParent,
                gpu,
                kind: ObjKind::Memory(Arc::new(m)),
            },
        );
        p.hObjectNew = h;
        Ok(())
    }

    /// The host pages an OS descriptor names: (backing, offset in it, page-rounded size).
    fn os_desc_pages(&self, p: &NVOS02_PARAMETERS) -> RmResult<(Arc<Backing>, u64, u64)> {
        if p.hClass != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR {
            rbail!(
                NV_ERR_INVALID_CLASS,
                "{} through RM_ALLOC_MEMORY (only OS descriptors are emulated)",
                class_str(p.hClass)
            );
        }
        if p.pMemory % PAGE != 0 {
            rbail!(
                NV_ERR_INVALID_ADDRESS,
                "pMemory {:#x} is not page aligned",
                p.pMemory
            );
        }
        let size = p
            .limit
            .checked_add(1)
            .and_then(|s| s.checked_next_multiple_of(PAGE));
        let Some(size) = size else {
            rbail!(NV_ERR_INVALID_LIMIT, "limit {:#x} overflows", p.limit);
        };
        let (backing, off) = self
            .kfd
            .user_backing(p.pMemory, size)
            .map_err(|e| RmErr(NV_ERR_INVALID_ADDRESS, e.1))?;
        Ok((backing, off, size))
    }

    /// NV_ESC_RM_MAP_MEMORY: leave a mapping context on the target fd.
    pub(crate) fn rm_map_memory(&self, a: &mut nv_ioctl_nvos33_parameters_with_fd) -> RmResult {
        let p = &mut a.params;
        let mut st = lock(&self.state);
        let (ctx, gpu, vram) = self.map_source(&st, p)?;
        let slot = match st.fds.get_mut(&a.fd) {
            Some(NvFd::Ctl { ctx }) if !vram => ctx,
            Some(NvFd::Ctl { .. }) => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "VRAM and usermode pages are mapped through a /dev/nvidiaN fd, not the control fd {}",
                a.fd
            ),
            Some(NvFd::Gpu { gpu: g, registered: Some(_), ctx }) if *g == gpu => ctx,
            Some(NvFd::Gpu { registered: None, .. }) => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "fd {} is not registered with a control fd (NV_ESC_REGISTER_FD first)",
                a.fd
            ),
            Some(NvFd::Gpu { gpu: g, .. }) => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "fd {} is /dev/nvidia{g}, the memory is on GPU {gpu}",
                a.fd
            ),
            _ => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "fd {} is not an open /dev/nvidiactl or /dev/nvidiaN",
                a.fd
            ),
        };
        if slot.is_some() {
            rbail!(
                NV_ERR_STATE_IN_USE,
                "fd {} already holds a mapping context (an fd takes one for its whole life: open a fresh fd per mapping)",
                a.fd
            );
        }
        *slot = Some(ctx);
        let cookie = st.next_cookie;
        st.next_cookie += page_up(p.length).unwrap_or(PAGE);
        st.cpu_maps.insert(cookie, (p.hClient, p.hMemory));
        p.pLinearAddress = cookie;
        Ok(())
    }

    /// What RM_MAP_MEMORY maps: the context, the device, and whether it is VRAM (or the usermode
    /// page), after the handle and range checks.
    fn map_source(&self, st: &NvState, p: &NVOS33_PARAMETERS) -> RmResult<(MapCtx, usize, bool)> {
        let Some(client) = st.clients.get(&p.hClient) else {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hClient {:#x} is not a client",
                p.hClient
            );
        };
        let dev_gpu = client.device_gpu(p.hDevice, "hDevice")?;
        let o = client.obj(p.hMemory, "hMemory")?;
        let usermode_size = u64::from(NV_USERMODE_MAP_SIZE);
        let (backing, off, size, vram, usermode) = match &o.kind {
            ObjKind::Memory(m) => (m.backing.clone(), m.off, m.size, m.is_vram(), None),
            ObjKind::Usermode => (
                self.devs[o.gpu].usermode.clone(),
                0,
                usermode_size,
                true,
                Some(o.gpu),
            ),
            _ => rbail!(
                NV_ERR_INVALID_OBJECT_HANDLE,
                "hMemory {:#x} is {}, which cannot be CPU-mapped",
                p.hMemory,
                class_str(o.class)
            ),
        };
        if o.gpu != dev_gpu {
            rbail!(
                NV_ERR_INVALID_OBJECT_PARENT,
                "hMemory {:#x} belongs to GPU {}, hDevice to GPU {}",
                p.hMemory,
                o.gpu,
                dev_gpu
            );
        }
        if p.offset % PAGE != 0 {
            rbail!(
                NV_ERR_INVALID_OFFSET,
                "offset {:#x} is not page aligned",
                p.offset
            );
        }
        if p.length == 0 || p.offset.checked_add(p.length).map_or(true, |e| e > size) {
            rbail!(
                NV_ERR_INVALID_LIMIT,
                "{:#x}+{:#x} is outside the object's {size:#x} bytes",
                p.offset,
                p.length
            );
        }
        let ctx = MapCtx {
            backing,
            off: off + p.offset,
            len: p.length,
            usermode,
        };
        Ok((ctx, o.gpu, vram))
    }

    /// NV_ESC_RM_UNMAP_MEMORY.
    pub(crate) fn rm_unmap_memory(&self, p: &mut NVOS34_PARAMETERS) -> RmResult {
        let mut st = lock(&self.state);
        if !st.clients.contains_key(&p.hClient) {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hClient {:#x} is not a client",
                p.hClient
            );
        }
        match st.cpu_maps.get(&p.pLinearAddress) {
            Some(&(c, m)) if c == p.hClient && m == p.hMemory => {
                st.cpu_maps.remove(&p.pLinearAddress);
                Ok(())
            }
            _ => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "no RM_MAP_MEMORY of memory {:#x} at {:#x}",
                p.hMemory,
                p.pLinearAddress
            ),
        }
    }

    /// mmap of an NV fd: map its mapping context (which stays on the fd).
    pub(crate) fn mmap(
        &self,
        addr: Option<u64>,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        fd: Fd,
        offset: u64,
    ) -> Result<u64> {
        let what = format!(
            "emu: mmap(addr={addr:#x?}, len={len:#x}, fd={}, offset={offset:#x})",
            fd.0
        );
        let fail = |e: KErr| errno_error(e.0, format!("{what}: {}", e.1));
        let mut kst = lock(&self.kfd.state);
        let (span, target) = mmap_checks(&kst, addr, len, flags, offset).map_err(fail)?;
        let ctx = self.ctx_of(fd, span, flags, offset).map_err(fail)?;
        let at = ctx.backing.map_cpu(target, span, ctx.off, prot)?;
        kst.cpu.insert(at, at + span, CpuVmaKind::NvDevice);
        self.kfd
            .doorbells
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .maps
            .remove(at, at + span);
        let mut um = self
            .usermode_maps
            .write()
            .unwrap_or_else(|e| e.into_inner());
        um.remove(at, at + span);
        if let Some(gpu) = ctx.usermode {
            um.insert(at, at + span, gpu);
        }
        Ok(at)
    }

    fn ctx_of(&self, fd: Fd, span: u64, flags: MapFlags, offset: u64) -> KResult<MapCtx> {
        let st = lock(&self.state);
        let slot = match st.fds.get(&fd.0) {
            Some(NvFd::Ctl { ctx } | NvFd::Gpu { ctx, .. }) => ctx,
            Some(NvFd::Uvm(_)) => kbail!(EINVAL, "mmap of /dev/nvidia-uvm is not emulated"),
            None => kbail!(EBADF, "fd {} is not an open emulated fd", fd.0),
        };
        let Some(ctx) = slot.as_ref() else {
            kbail!(
                EINVAL,
                "no mapping context on this fd (NV_ESC_RM_MAP_MEMORY with fd={} first)",
                fd.0
            );
        };
        if offset != 0 {
            kbail!(EINVAL, "mapping contexts are mmapped at offset 0");
        }
        if !flags.contains(MapFlags::SHARED) {
            kbail!(EINVAL, "RM mappings must be MAP_SHARED");
        }
        if page_up(ctx.len) != Some(span) {
            kbail!(
                EINVAL,
                "the context is {:#x} bytes, mmap asks {span:#x}",
                ctx.len
            );
        }
        Ok(ctx.clone())
    }

    /// Forget usermode-page mappings in `[addr, addr + len)` (after a munmap or another mmap).
    pub(crate) fn forget_cpu(&self, addr: u64, len: u64) {
        let end = addr.saturating_add(page_up(len).unwrap_or(len));
        self.usermode_maps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(addr, end);
    }

    /// A doorbell write to a usermode page (`None`: `addr` is not in one).
    pub(crate) fn ring_doorbell(self: &Arc<Self>, addr: u64, value: u64) -> Option<Result<()>> {
        let hit = self
            .usermode_maps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
            .map(|p| (p.value, p.offset_of(addr)));
        let (gpu, off) = hit?;
        let fault = |why: String| {
            Some(Err(errno_error(
                libc::EFAULT,
                format!("emu: write_doorbell({addr:#x}, {value:#x}): {why}"),
            )))
        };
        if off != u64::from(NVC361_NOTIFY_CHANNEL_PENDING) {
            return fault(format!(
                "offset {off:#x} of the usermode page is not NOTIFY_CHANNEL_PENDING (0x90)"
            ));
        }
        let Ok(token) = u32::try_from(value) else {
            return fault("NVIDIA doorbells take a 32-bit work submit token".into());
        };
        if let Err(e) =
            self.devs[gpu]
                .usermode_view
                .store_u32(off as usize, token, Ordering::Release)
        {
            return Some(Err(e));
        }
        let ch = self.channel_by_token(gpu, token).ok();
        let sw = self.gpu_of(gpu);
        let delivered = matches!((&ch, &sw), (Some(c), Some(_)) if c.scheduled);
        self.log_doorbell(
            gpu,
            NvDoorbellWrite {
                token,
                channel: ch.as_ref().map(|c| c.handle),
                delivered,
            },
        );
        if let (true, Some(c), Some(sw)) = (delivered, ch, sw) {
            sw.doorbell(&self.device(gpu), &c);
        }
        Some(Ok(()))
    }
}
