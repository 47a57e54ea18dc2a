//! Emulated ACQUIRE_VM, ALLOC/FREE_MEMORY_OF_GPU, MAP/UNMAP_MEMORY_TO_GPU and AVAILABLE_MEMORY,
//! with KFD's errnos (from `kfd_chardev.c`): unknown gpu_id EINVAL, no ACQUIRE_VM yet ENODEV,
//! unknown handle EINVAL on FREE but ENOMEM on MAP/UNMAP, FREE of a still-mapped buffer EBUSY,
//! FREE of the signal-event page EPERM, a VA clash in a GPU page table EINVAL.
//!
//! Not guaranteed: KFD's exact order of checks beyond the ones listed; host-visible VRAM is
//! refused only when the emulator is configured without a large BAR.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::memory::{
    page_up, prot_of, to_kerr, Alloc, CpuVmaKind, GpuMap, DOORBELL_BUS_BASE, MEM_ATTRS, MEM_TYPES,
    TASK_SIZE,
};
use super::{lock, EmuFd, EmuKfd, KErr, KResult, KfdState};
use crate::driver::api::Prot;
use crate::driver::kfd::*;
use crate::driver::real::page_size;
use crate::mockgpu::backing::{copy_from_user, Backing};
use crate::sys::kfd::*;

impl EmuKfd {
    pub(crate) fn acquire_vm(&self, a: &mut kfd_ioctl_acquire_vm_args) -> KResult {
        let mut st = lock(&self.state);
        let fd = a.drm_fd as i32;
        let Some(kind) = st.fds.get(&fd).copied() else {
            kbail!(EINVAL, "drm_fd {fd} is not an open file");
        };
        let Some(i) = self.node_by_gpu_id(a.gpu_id) else {
            kbail!(EINVAL, "no device with gpu_id {:#x}", a.gpu_id);
        };
        if kind != EmuFd::Render(i) {
            kbail!(
                EINVAL,
                "drm_fd {fd} is not /dev/dri/renderD{} (the render node of gpu_id {:#x})",
                self.descs[i].render_minor,
                a.gpu_id
            );
        }
        match st.acquired[i] {
            Some(prev) if prev == fd => Ok(()),
            Some(prev) => kbail!(
                EBUSY,
                "gpu_id {:#x} already acquired its VM through drm_fd {prev}",
                a.gpu_id
            ),
            None => {
                st.acquired[i] = Some(fd);
                Ok(())
            }
        }
    }

    /// The device index of `gpu_id`, which must have acquired its VM.
    fn bound_node(&self, st: &KfdState, gpu_id: u32) -> KResult<usize> {
        let Some(i) = self.node_by_gpu_id(gpu_id) else {
            kbail!(EINVAL, "no device with gpu_id {gpu_id:#x}");
        };
        if st.acquired[i].is_none() {
            kbail!(
                ENODEV,
                "gpu_id {gpu_id:#x} has no VM yet: AMDKFD_IOC_ACQUIRE_VM must come first"
            );
        }
        Ok(i)
    }

    pub(crate) fn alloc_memory(&self, a: &mut kfd_ioctl_alloc_memory_of_gpu_args) -> KResult {
        if a.size == 0 {
            kbail!(EINVAL, "size is 0");
        }
        let mut st = lock(&self.state);
        let Some(i) = self.node_by_gpu_id(a.gpu_id) else {
            kbail!(EINVAL, "no device with gpu_id {:#x}", a.gpu_id);
        };
        let kind = check_flags(a.flags, self.large_bar)?;
        self.bound_node(&st, a.gpu_id)?;
        let size = check_va(&st, i, a, kind)?;
        let (backing, backing_off, mmap_offset) = self.alloc_backing(&mut st, i, kind, a, size)?;
        let handle = make_handle(a.gpu_id, st.next_idr[i]);
        st.next_idr[i] += 1;
        if kind == KFD_IOC_ALLOC_MEM_FLAGS_VRAM {
            st.vram_used[i] += size;
        }
        if kind == KFD_IOC_ALLOC_MEM_FLAGS_VRAM || kind == KFD_IOC_ALLOC_MEM_FLAGS_GTT {
            st.by_offset.insert((i, mmap_offset), handle);
        }
        st.va_ranges[i].insert(a.va_addr, a.va_addr + size, handle);
        let alloc = Alloc {
            handle,
            va: a.va_addr,
            size,
            flags: a.flags,
            mmap_offset,
            backing,
            backing_off,
            mapped: BTreeSet::new(),
            queue_refs: HashMap::new(),
        };
        st.allocs.insert(handle, alloc);
        a.handle = handle;
        a.mmap_offset = mmap_offset;
        Ok(())
    }

    fn alloc_backing(
        &self,
        st: &mut KfdState,
        i: usize,
        kind: u32,
        a: &kfd_ioctl_alloc_memory_of_gpu_args,
        size: u64,
    ) -> KResult<(Arc<Backing>, u64, u64)> {
        match kind {
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL => {
                if a.size != KFD_DOORBELL_PROCESS_SLICE as u64 {
                    kbail!(EINVAL, "DOORBELL allocation must be {KFD_DOORBELL_PROCESS_SLICE:#x} bytes, got {:#x}", a.size);
                }
                Ok((
                    self.nodes[i].doorbell_page.clone(),
                    0,
                    DOORBELL_BUS_BASE + 0x10_0000 * i as u64,
                ))
            }
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP => {
                if a.size != page_size() {
                    kbail!(
                        EINVAL,
                        "MMIO_REMAP allocation must be one page, got {:#x}",
                        a.size
                    );
                }
                Ok((
                    self.nodes[i].mmio_page.clone(),
                    0,
                    KFD_MMAP_TYPE_MMIO | kfd_mmap_gpu_id(a.gpu_id),
                ))
            }
            KFD_IOC_ALLOC_MEM_FLAGS_USERPTR => {
                let (b, off) = userptr_backing(st, a.mmap_offset, size)?;
                Ok((b, off, a.mmap_offset))
            }
            _ => {
                let budget = st.vram_budget[i];
                if kind == KFD_IOC_ALLOC_MEM_FLAGS_VRAM && st.vram_used[i] + size > budget {
                    kbail!(
                        ENOMEM,
                        "out of VRAM: {:#x} used + {size:#x} requested > {budget:#x}",
                        st.vram_used[i]
                    );
                }
                let b = Backing::new(size, "buffer object")
                    .map_err(|e| KErr(libc::ENOMEM, e.message().into()))?;
                let off = st.next_mmap_offset;
                st.next_mmap_offset += size;
                Ok((b, 0, off))
            }
        }
    }

    pub(crate) fn free_memory(&self, a: &mut kfd_ioctl_free_memory_of_gpu_args) -> KResult {
        let mut st = lock(&self.state);
        if self.events.page_handle() == Some(a.handle) {
            kbail!(
                EPERM,
                "handle {:#x} is the signal-event page, which cannot be freed",
                a.handle
            );
        }
        let Some(i) = self.node_by_gpu_id(handle_gpu_id(a.handle)) else {
            kbail!(EINVAL, "handle {:#x} names no device", a.handle);
        };
        let Some(m) = st.allocs.get(&a.handle) else {
            kbail!(
                EINVAL,
                "unknown handle {:#x} (never allocated, or already freed)",
                a.handle
            );
        };
        if !m.mapped.is_empty() {
            let ids: Vec<String> = m
                .mapped
                .iter()
                .map(|&n| format!("{:#x}", self.descs[n].gpu_id))
                .collect();
            kbail!(
                EBUSY,
                "buffer {:#x} is still mapped on gpu {}: unmap it first",
                a.handle,
                ids.join(", ")
            );
        }
        let (va, size, flags, off) = (m.va, m.size, m.flags, m.mmap_offset);
        st.allocs.remove(&a.handle);
        st.by_offset.remove(&(i, off));
        st.va_ranges[i].remove(va, va + size);
        if flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0 {
            st.vram_used[i] -= size;
        }
        Ok(())
    }

    pub(crate) fn map_memory(&self, a: &mut kfd_ioctl_map_memory_to_gpu_args) -> KResult {
        let ids = read_ids(a.n_devices, a.n_success, a.device_ids_array_ptr)?;
        let mut st = lock(&self.state);
        self.bound_node(&st, handle_gpu_id(a.handle))?;
        if !st.allocs.contains_key(&a.handle) {
            kbail!(ENOMEM, "unknown handle {:#x}", a.handle);
        }
        for (k, &id) in ids.iter().enumerate().skip(a.n_success as usize) {
            let peer = self.bound_node(&st, id)?;
            let Some(m) = st.allocs.get_mut(&a.handle) else {
                kbail!(ENOMEM, "unknown handle {:#x}", a.handle)
            };
            if !m.mapped.contains(&peer) {
                let mut vm = self.gpuvm[peer].write().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = vm.overlapping(m.va, m.va + m.size).first() {
                    kbail!(
                        EINVAL,
                        "va {:#x}+{:#x} conflicts with buffer {:#x} on gpu {:#x}",
                        m.va,
                        m.size,
                        c.value.handle,
                        id
                    );
                }
                let entry = GpuMap {
                    handle: m.handle,
                    backing: m.backing.clone(),
                    off: m.backing_off,
                    writable: prot_of(m.flags) == Prot::RW,
                };
                vm.insert(m.va, m.va + m.size, entry);
                m.mapped.insert(peer);
            }
            a.n_success = k as u32 + 1;
        }
        Ok(())
    }

    pub(crate) fn unmap_memory(&self, a: &mut kfd_ioctl_unmap_memory_from_gpu_args) -> KResult {
        let ids = read_ids(a.n_devices, a.n_success, a.device_ids_array_ptr)?;
        let mut st = lock(&self.state);
        if self.node_by_gpu_id(handle_gpu_id(a.handle)).is_none() {
            kbail!(EINVAL, "handle {:#x} names no device", a.handle);
        }
        let Some(m) = st.allocs.get(&a.handle) else {
            kbail!(ENOMEM, "unknown handle {:#x}", a.handle);
        };
        if m.mapped.is_empty() {
            kbail!(EINVAL, "buffer {:#x} is not mapped on any GPU", a.handle);
        }
        for (k, &id) in ids.iter().enumerate().skip(a.n_success as usize) {
            let Some(peer) = self.node_by_gpu_id(id) else {
                kbail!(EINVAL, "no device with gpu_id {id:#x}");
            };
            let Some(m) = st.allocs.get_mut(&a.handle) else {
                kbail!(ENOMEM, "unknown handle {:#x}", a.handle)
            };
            if let Some(q) = m.queue_refs.get(&peer).filter(|&&q| q > 0) {
                kbail!(EBUSY, "buffer {:#x} backs {q} live queue buffer(s) on gpu {:#x}: destroy the queue first", a.handle, id);
            }
            if m.mapped.remove(&peer) {
                let mut vm = self.gpuvm[peer].write().unwrap_or_else(|e| e.into_inner());
                vm.remove(m.va, m.va + m.size);
            }
            a.n_success = k as u32 + 1;
        }
        Ok(())
    }

    /// The memfd behind process memory `[user, user + size)` (see [`userptr_backing`]): what an
    /// NVIDIA OS-descriptor allocation pins.
    pub(crate) fn user_backing(&self, user: u64, size: u64) -> KResult<(Arc<Backing>, u64)> {
        let st = lock(&self.state);
        userptr_backing(&st, user, size)
    }

    pub(crate) fn available_memory(&self, a: &mut kfd_ioctl_get_available_memory_args) -> KResult {
        let st = lock(&self.state);
        let Some(i) = self.node_by_gpu_id(a.gpu_id) else {
            kbail!(EINVAL, "no device with gpu_id {:#x}", a.gpu_id);
        };
        a.available = st.vram_budget[i].saturating_sub(st.vram_used[i]);
        Ok(())
    }
}

/// ALLOC's flag checks; returns the memory-type bit.
fn check_flags(flags: u32, large_bar: bool) -> KResult<u32> {
    let kind = flags & MEM_TYPES;
    if kind.count_ones() != 1 {
        kbail!(
            EINVAL,
            "flags {flags:#x} must name exactly one of VRAM/GTT/USERPTR/DOORBELL/MMIO_REMAP"
        );
    }
    if flags & !(MEM_TYPES | MEM_ATTRS) != 0 {
        kbail!(
            EINVAL,
            "flags {flags:#x} has unknown bits {:#x}",
            flags & !(MEM_TYPES | MEM_ATTRS)
        );
    }
    if kind == KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        && flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC != 0
        && !large_bar
    {
        kbail!(
            EINVAL,
            "host-visible (PUBLIC) VRAM needs a large BAR, which this device lacks"
        );
    }
    Ok(kind)
}

/// ALLOC's GPU VA checks on device `i`; returns the page-rounded size.
fn check_va(
    st: &KfdState,
    i: usize,
    a: &kfd_ioctl_alloc_memory_of_gpu_args,
    kind: u32,
) -> KResult<u64> {
    let Some(size) = page_up(a.size) else {
        kbail!(EINVAL, "size {:#x} overflows", a.size)
    };
    let va = a.va_addr;
    if va % page_size() != 0 || !matches!(va.checked_add(size), Some(e) if e <= TASK_SIZE) {
        kbail!(
            EINVAL,
            "va_addr {va:#x}+{size:#x} is not a page-aligned user range"
        );
    }
    if let Some(o) = st.va_ranges[i].overlapping(va, va + size).first() {
        kbail!(
            EINVAL,
            "va range {va:#x}+{size:#x} overlaps buffer {:#x} at {:#x}..{:#x}",
            o.value,
            o.start,
            o.end
        );
    }
    if kind != KFD_IOC_ALLOC_MEM_FLAGS_USERPTR && !is_reserved(st, va, size) {
        kbail!(
            EINVAL,
            "va_addr {va:#x}+{size:#x} is not inside an address reservation (anonymous mmap) made through this driver"
        );
    }
    Ok(size)
}

/// Whether `[va, va + size)` lies in anonymous private mappings (reservations) of the process.
fn is_reserved(st: &KfdState, va: u64, size: u64) -> bool {
    st.cpu.covers(va, va + size)
        && st
            .cpu
            .overlapping(va, va + size)
            .iter()
            .all(|v| matches!(v.value, CpuVmaKind::Anon))
}

/// The memfd behind USERPTR memory `[user, user + size)`: it must be one anonymous shared
/// mapping made through this driver (the emulator can only share memory it created).
fn userptr_backing(st: &KfdState, user: u64, size: u64) -> KResult<(Arc<Backing>, u64)> {
    if user % page_size() != 0 || !matches!(user.checked_add(size), Some(e) if e <= TASK_SIZE) {
        kbail!(
            EINVAL,
            "USERPTR address {user:#x}+{size:#x} is not a page-aligned user range"
        );
    }
    let pieces = st.cpu.overlapping(user, user + size);
    let fault = || {
        KErr(
            libc::EFAULT,
            format!("USERPTR {user:#x}+{size:#x} is not inside one anonymous MAP_SHARED mapping made through this driver"),
        )
    };
    let first = pieces.first().ok_or_else(fault)?;
    let CpuVmaKind::Shared(b, off0) = &first.value else {
        return Err(fault());
    };
    let start_off = off0 + first.offset_of(user);
    let mut at = user;
    for p in &pieces {
        match &p.value {
            CpuVmaKind::Shared(pb, poff)
                if Arc::ptr_eq(pb, b)
                    && p.start <= at
                    && poff + p.offset_of(at) == start_off + (at - user) =>
            {
                at = p.end;
            }
            _ => return Err(fault()),
        }
    }
    if at < user + size {
        return Err(fault());
    }
    Ok((b.clone(), start_off))
}

/// Most device ids one MAP/UNMAP copies (KFD's kmalloc_array would fail far later).
const MAX_IDS: u32 = 4096;

/// The device-id array of MAP/UNMAP (copy_from_user), after KFD's count checks.
fn read_ids(n_devices: u32, n_success: u32, ptr: u64) -> KResult<Vec<u32>> {
    if n_devices == 0 {
        kbail!(EINVAL, "n_devices is 0 (device id array empty)");
    }
    if n_success > n_devices {
        kbail!(
            EINVAL,
            "n_success {n_success} exceeds n_devices {n_devices}"
        );
    }
    if n_devices > MAX_IDS {
        kbail!(
            ENOMEM,
            "n_devices {n_devices} is more than the emulator copies ({MAX_IDS})"
        );
    }
    let bytes =
        copy_from_user(ptr, n_devices as usize * 4, "device_ids_array_ptr").map_err(to_kerr)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
