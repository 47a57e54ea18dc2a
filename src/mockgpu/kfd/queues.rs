//! Emulated CREATE_QUEUE / DESTROY_QUEUE and doorbell routing.
//!
//! CREATE_QUEUE runs KFD's checks in KFD's order: `set_queue_properties_from_user` (percentage,
//! priority, power-of-two ring, addresses in the user range, queue type -> ENOTSUPP), the device
//! (EINVAL) and its VM (ESRCH), then the Linux >= 6.12 `kfd_queue_acquire_buffers` checks against
//! the device's GPU page table: wptr and rptr each in the first page of a one-page buffer, the ring
//! exactly one buffer of `ring_size`, and for compute queues the EOP size and buffer, the exact
//! `ctl_stack_size` and `ctx_save_restore_size`, and a CWSR buffer of exactly
//! `align((cwsr + debug) * num_xcc, 4096)` bytes. Every failure is EINVAL, as in KFD.
//!
//! Doorbells: slot `s` of the 8 KiB process doorbell frame is at byte `8 * s`; compute queues get
//! slots from 0, SDMA queues from 0x200 (the emulator's choice; KFD's assignment differs).
//!
//! Not guaranteed: the MES wptr-in-GTT requirement and per-engine SDMA placement are not modelled.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::hooks::{DoorbellWrite, EmuGpu, EmuQueue, QueueKind};
use super::memory::{GpuMap, TASK_SIZE};
use super::{lock, EmuKfd, KErr, KResult, DOORBELL_LOG};
use crate::driver::api::errno_error;
use crate::driver::kfd::*;
use crate::driver::vma::VmaMap;
use crate::sys::kfd::*;
use crate::Result;

/// `KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`.
const MAX_QUEUES: u32 = 1024;
/// First doorbell slot of SDMA queues in the emulator's frame layout.
const SDMA_SLOT_BASE: u32 = 0x200;
/// The kernel-internal ENOTSUPP KFD returns for an unknown queue type.
const ENOTSUPP: i32 = 524;

fn access_ok(addr: u64, n: u64) -> bool {
    addr.checked_add(n).is_some_and(|e| e <= TASK_SIZE)
}

/// `kfd_queue_buffer_get`: `addr` must be in the first page of a buffer mapped on the device, and
/// that buffer must be exactly `expected` bytes (0: any size). Returns the buffer's handle.
fn buffer_get(vm: &VmaMap<GpuMap>, addr: u64, expected: u64, what: &str) -> KResult<u64> {
    let Some(p) = vm.get(addr) else {
        kbail!(
            EINVAL,
            "{what} {addr:#x} is not inside a buffer mapped on this GPU"
        );
    };
    if addr >> 12 != p.base >> 12 {
        kbail!(
            EINVAL,
            "{what} {addr:#x} must lie in the first page of its buffer (which starts at {:#x})",
            p.base
        );
    }
    let size = p.end - p.base;
    if expected != 0 && size != expected {
        kbail!(
            EINVAL,
            "{what} buffer {:#x} at {:#x} is {size:#x} bytes; KFD requires a buffer of exactly {expected:#x}",
            p.value.handle,
            p.base
        );
    }
    Ok(p.value.handle)
}

fn check_properties(a: &kfd_ioctl_create_queue_args) -> KResult<QueueKind> {
    if a.queue_percentage & 0xFF > KFD_MAX_QUEUE_PERCENTAGE {
        kbail!(
            EINVAL,
            "queue_percentage {} exceeds {KFD_MAX_QUEUE_PERCENTAGE}",
            a.queue_percentage & 0xFF
        );
    }
    if a.queue_priority > KFD_MAX_QUEUE_PRIORITY {
        kbail!(
            EINVAL,
            "queue_priority {} exceeds {KFD_MAX_QUEUE_PRIORITY}",
            a.queue_priority
        );
    }
    if a.ring_base_address != 0 && !access_ok(a.ring_base_address, 8) {
        kbail!(
            EFAULT,
            "ring_base_address {:#x} is not a user address",
            a.ring_base_address
        );
    }
    if a.ring_size != 0 && !a.ring_size.is_power_of_two() {
        kbail!(EINVAL, "ring_size {:#x} is not a power of two", a.ring_size);
    }
    for (addr, what) in [
        (a.read_pointer_address, "read_pointer_address"),
        (a.write_pointer_address, "write_pointer_address"),
    ] {
        if !access_ok(addr, 4) {
            kbail!(EFAULT, "{what} {addr:#x} is not a user address");
        }
    }
    for (addr, what) in [
        (a.eop_buffer_address, "eop_buffer_address"),
        (a.ctx_save_restore_address, "ctx_save_restore_address"),
    ] {
        if addr != 0 && !access_ok(addr, 4) {
            kbail!(EFAULT, "{what} {addr:#x} is not a user address");
        }
    }
    match QueueKind::from_kfd(a.queue_type) {
        Some(k) => Ok(k),
        None => Err(KErr(
            ENOTSUPP,
            format!("queue_type {} is not a KFD queue type", a.queue_type),
        )),
    }
}

impl EmuKfd {
    /// `kfd_queue_acquire_buffers` (Linux >= 6.12): the handles of the queue's buffers.
    fn acquire_buffers(
        &self,
        i: usize,
        kind: QueueKind,
        a: &kfd_ioctl_create_queue_args,
    ) -> KResult<Vec<u64>> {
        let vm = self.gpuvm[i].read().unwrap_or_else(|e| e.into_inner());
        let page = 4096;
        let mut bufs = vec![
            buffer_get(&vm, a.write_pointer_address, page, "write pointer")?,
            buffer_get(&vm, a.read_pointer_address, page, "read pointer")?,
            buffer_get(&vm, a.ring_base_address, a.ring_size as u64, "ring")?,
        ];
        if kind.is_sdma() {
            return Ok(bufs);
        }
        let sizes = self.descs[i].sizes;
        if a.eop_buffer_address != 0 {
            if a.eop_buffer_size != sizes.eop_buffer_size {
                kbail!(
                    EINVAL,
                    "eop_buffer_size {:#x} is not the device's EOP size {:#x}",
                    a.eop_buffer_size,
                    sizes.eop_buffer_size
                );
            }
            bufs.push(buffer_get(
                &vm,
                a.eop_buffer_address,
                a.eop_buffer_size,
                "EOP buffer",
            )?);
        }
        if a.ctl_stack_size != sizes.ctl_stack_size {
            kbail!(
                EINVAL,
                "ctl_stack_size {:#x} is not the device's control-stack size {:#x}",
                a.ctl_stack_size,
                sizes.ctl_stack_size
            );
        }
        if a.ctx_save_restore_size != sizes.cwsr_size {
            kbail!(
                EINVAL,
                "ctx_save_restore_size {:#x} is not the device's CWSR size {:#x}",
                a.ctx_save_restore_size,
                sizes.cwsr_size
            );
        }
        bufs.push(buffer_get(
            &vm,
            a.ctx_save_restore_address,
            sizes.cwsr_total_size,
            "CWSR area",
        )?);
        Ok(bufs)
    }

    fn check_capacity(
        &self,
        queues: &std::collections::BTreeMap<u32, Arc<EmuQueue>>,
        i: usize,
        kind: QueueKind,
    ) -> KResult {
        let spec = self.descs[i].spec;
        let gpu_id = self.descs[i].gpu_id;
        let engines = match kind {
            QueueKind::Sdma => spec.num_sdma_engines,
            QueueKind::SdmaXgmi => spec.num_sdma_xgmi_engines,
            _ => return Ok(()),
        };
        let cap = (engines * spec.num_sdma_queues_per_engine) as usize;
        let used = queues
            .values()
            .filter(|q| q.gpu_id == gpu_id && q.kind == kind)
            .count();
        if used >= cap {
            kbail!(
                ENOMEM,
                "no {kind:?} queue left on gpu {gpu_id:#x} ({engines} engines x {} queues)",
                spec.num_sdma_queues_per_engine
            );
        }
        Ok(())
    }

    pub(crate) fn create_queue(self: &Arc<Self>, a: &mut kfd_ioctl_create_queue_args) -> KResult {
        let kind = check_properties(a)?;
        let mut st = lock(&self.state);
        let Some(i) = self.node_by_gpu_id(a.gpu_id) else {
            kbail!(EINVAL, "no device with gpu_id {:#x}", a.gpu_id);
        };
        if st.acquired[i].is_none() {
            kbail!(
                ESRCH,
                "gpu_id {:#x} has no VM yet: AMDKFD_IOC_ACQUIRE_VM must come first",
                a.gpu_id
            );
        }
        if (a.ring_size as u64) < KFD_MIN_QUEUE_RING_SIZE as u64 {
            kbail!(
                EINVAL,
                "ring_size {:#x} is below KFD_MIN_QUEUE_RING_SIZE ({KFD_MIN_QUEUE_RING_SIZE:#x})",
                a.ring_size
            );
        }
        let buffers = self.acquire_buffers(i, kind, a)?;
        self.check_capacity(&st.queues, i, kind)?;
        let Some(queue_id) = (0..MAX_QUEUES).find(|q| !st.queues.contains_key(q)) else {
            kbail!(ENOMEM, "the process has {MAX_QUEUES} queues already");
        };
        let mut db = self.doorbells.write().unwrap_or_else(|e| e.into_inner());
        let slot = free_slot(&db, i, kind)?;
        let doorbell_offset =
            KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(a.gpu_id) | (slot as u64 * 8);
        let gfx = self.descs[i].spec.gfx_target_version;
        let q = Arc::new(new_queue(
            a,
            kind,
            gfx,
            queue_id,
            slot,
            doorbell_offset,
            buffers,
        ));
        db.slots.insert((i, slot), q.clone());
        drop(db);
        adjust_refs(&mut st.allocs, &q.buffers, i, true);
        st.queues.insert(queue_id, q.clone());
        drop(st);
        if let Some(gpu) = self.gpu_of(i) {
            if let Err(e) = gpu.create_queue(&self.device(i), &q) {
                self.forget_queue(queue_id);
                return Err(KErr(
                    e.errno().unwrap_or(libc::EINVAL),
                    format!("the software GPU refused the queue: {}", e.message()),
                ));
            }
        }
        a.queue_id = queue_id;
        a.doorbell_offset = q.doorbell_offset;
        Ok(())
    }

    /// The software GPU attached to device `i`.
    fn gpu_of(&self, i: usize) -> Option<Arc<dyn EmuGpu>> {
        self.nodes[i]
            .gpu
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Drop a queue from KFD's books; returns it.
    fn forget_queue(&self, queue_id: u32) -> Option<(usize, Arc<EmuQueue>)> {
        let mut st = lock(&self.state);
        let q = st.queues.remove(&queue_id)?;
        let i = self.node_by_gpu_id(q.gpu_id)?;
        self.doorbells
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .slots
            .remove(&(i, q.doorbell_slot));
        adjust_refs(&mut st.allocs, &q.buffers, i, false);
        Some((i, q))
    }

    pub(crate) fn destroy_queue(self: &Arc<Self>, a: &mut kfd_ioctl_destroy_queue_args) -> KResult {
        let Some((i, q)) = self.forget_queue(a.queue_id) else {
            kbail!(EINVAL, "queue id {} does not match any queue", a.queue_id);
        };
        if let Some(gpu) = self.gpu_of(i) {
            gpu.destroy_queue(&self.device(i), &q);
        }
        Ok(())
    }

    /// `Driver::write_doorbell`: store the value in the doorbell page and tell the device.
    pub(crate) fn ring_doorbell(self: &Arc<Self>, addr: u64, value: u64) -> Result<()> {
        let db = self.doorbells.read().unwrap_or_else(|e| e.into_inner());
        let hit = db
            .maps
            .get(addr)
            .filter(|p| addr % 8 == 0 && addr + 8 <= p.end)
            .map(|p| (p.value, p.offset_of(addr)));
        let Some((i, off)) = hit else {
            return Err(errno_error(
                libc::EFAULT,
                format!(
                    "emu: write_doorbell({addr:#x}): not an aligned slot of a mapped doorbell page"
                ),
            ));
        };
        let slot = (off / 8) as u32;
        let q = db.slots.get(&(i, slot)).cloned();
        drop(db);
        self.nodes[i]
            .doorbell_view
            .store_u64(off as usize, value, Ordering::Release)?;
        {
            let mut log = lock(&self.nodes[i].log);
            if log.len() == DOORBELL_LOG {
                log.pop_front();
            }
            log.push_back(DoorbellWrite {
                queue_id: q.as_ref().map(|q| q.queue_id),
                slot,
                value,
            });
        }
        if let (Some(q), Some(gpu)) = (q, self.gpu_of(i)) {
            gpu.on_doorbell(&self.device(i), &q, value);
        }
        Ok(())
    }
}

/// A free doorbell slot of device `i` for a queue of `kind`.
fn free_slot(db: &super::DoorbellTable, i: usize, kind: QueueKind) -> KResult<u32> {
    let range = if kind.is_sdma() {
        SDMA_SLOT_BASE..2 * SDMA_SLOT_BASE
    } else {
        0..SDMA_SLOT_BASE
    };
    match range.clone().find(|s| !db.slots.contains_key(&(i, *s))) {
        Some(s) => Ok(s),
        None => Err(KErr(
            libc::ENOMEM,
            format!("no free doorbell in slots {range:?}"),
        )),
    }
}

/// The queue KFD records for CREATE_QUEUE args `a`.
fn new_queue(
    a: &kfd_ioctl_create_queue_args,
    kind: QueueKind,
    gfx_target_version: u32,
    queue_id: u32,
    doorbell_slot: u32,
    doorbell_offset: u64,
    buffers: Vec<u64>,
) -> EmuQueue {
    EmuQueue {
        queue_id,
        gpu_id: a.gpu_id,
        kind,
        gfx_target_version,
        ring_va: a.ring_base_address,
        ring_size: a.ring_size as u64,
        rptr_va: a.read_pointer_address,
        wptr_va: a.write_pointer_address,
        eop_va: a.eop_buffer_address,
        eop_size: a.eop_buffer_size,
        ctx_save_restore_va: a.ctx_save_restore_address,
        ctx_save_restore_size: a.ctx_save_restore_size,
        ctl_stack_size: a.ctl_stack_size,
        priority: a.queue_priority,
        percentage: a.queue_percentage & 0xFF,
        target_xcc: (a.queue_percentage >> 8) & 0xFF,
        doorbell_slot,
        doorbell_offset,
        buffers,
    }
}

fn adjust_refs(
    allocs: &mut HashMap<u64, super::memory::Alloc>,
    handles: &[u64],
    node: usize,
    add: bool,
) {
    for h in handles {
        if let Some(m) = allocs.get_mut(h) {
            let r = m.queue_refs.entry(node).or_insert(0);
            *r = if add { *r + 1 } else { r.saturating_sub(1) };
        }
    }
}
