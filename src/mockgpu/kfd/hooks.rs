//! The seam between the emulated KFD and a software GPU.
//!
//! A software GPU implements [`EmuGpu`] and is attached to one emulated device
//! ([`crate::mockgpu::EmuDriver::attach_gpu`], or through [`crate::mockgpu::EmuConfig::gpu_factory`]). KFD calls it
//! when a queue is created or destroyed and when the process writes the queue's doorbell. The GPU
//! reaches back through the [`EmuDevice`] handle it is given: [`EmuDevice::translate`] looks a GPU
//! virtual address range up in that device's page tables (refusing unmapped or read-only ranges,
//! as the GPU's MMU would) and returns a [`Mapping`] of the backing memory;
//! [`EmuDevice::interrupt`] is the interrupt a RELEASE_MEM with INT_SEL / an SDMA TRAP raises
//! (context id = event id), which wakes WAIT_EVENTS; [`EmuDevice::vm_fault`] reports a page
//! fault as KFD does (MEMORY events).
//!
//! Rules for implementors: the callbacks run on the thread that made the ioctl or wrote the
//! doorbell, with no emulator lock held, so they may call back into the `EmuDevice`; a GPU that
//! blocks (a WAIT_REG_MEM on memory the CPU writes later) must do so on its own thread, not in
//! `on_doorbell`. Do not hold a `Mapping` across such waits if the memory could be freed
//! meanwhile: it stays valid (the emulator keeps it alive) but no longer belongs to the process.
//!
//! Not guaranteed: a GPU VA range that spans two buffer objects must be translated per object.

use std::sync::{Arc, Weak};

use super::EmuKfd;
use crate::driver::kfd::topology::{NodeProperties, QueueBufferSizes};
use crate::driver::mapped::Mapping;
use crate::driver::QueueReport;
use crate::{Error, Result};

/// The queue types of `KFD_IOC_QUEUE_TYPE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE`: a PM4 ring; wptr/doorbell in dwords.
    Compute,
    /// `KFD_IOC_QUEUE_TYPE_SDMA`: an SDMA ring; wptr/doorbell in bytes.
    Sdma,
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`: an AQL (HSA packet) ring.
    ComputeAql,
    /// `KFD_IOC_QUEUE_TYPE_SDMA_XGMI`: an SDMA ring on an XGMI engine.
    SdmaXgmi,
}

impl QueueKind {
    /// The kind of a `queue_type` value.
    pub fn from_kfd(t: u32) -> Option<QueueKind> {
        match t {
            0 => Some(QueueKind::Compute),
            1 => Some(QueueKind::Sdma),
            2 => Some(QueueKind::ComputeAql),
            3 => Some(QueueKind::SdmaXgmi),
            _ => None,
        }
    }
    /// Whether the queue runs on an SDMA engine.
    pub fn is_sdma(self) -> bool {
        matches!(self, QueueKind::Sdma | QueueKind::SdmaXgmi)
    }
}

/// A queue KFD accepted: everything a software GPU needs to run it. All addresses are GPU VAs
/// (translate them with [`EmuDevice::translate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuQueue {
    pub queue_id: u32,
    pub gpu_id: u32,
    pub kind: QueueKind,
    /// The device's `gfx_target_version` (110000 = gfx1100).
    pub gfx_target_version: u32,
    pub ring_va: u64,
    /// Ring bytes (a power of two).
    pub ring_size: u64,
    /// Where the GPU writes its read pointer (64-bit).
    pub rptr_va: u64,
    /// Where the process writes its write pointer (64-bit).
    pub wptr_va: u64,
    /// EOP buffer (compute queues; 0 if none).
    pub eop_va: u64,
    pub eop_size: u64,
    /// CWSR area (compute queues).
    pub ctx_save_restore_va: u64,
    pub ctx_save_restore_size: u32,
    pub ctl_stack_size: u32,
    pub priority: u32,
    /// `queue_percentage & 0xFF`.
    pub percentage: u32,
    /// `(queue_percentage >> 8) & 0xFF`: the XCC a PM4 queue targets (multi-XCC parts).
    pub target_xcc: u32,
    /// Index of the 64-bit doorbell in the process doorbell page.
    pub doorbell_slot: u32,
    /// What CREATE_QUEUE returned as `doorbell_offset`.
    pub doorbell_offset: u64,
    /// Handles of the buffers the queue pins (wptr, rptr, ring, EOP, CWSR).
    pub(crate) buffers: Vec<u64>,
}

/// A software GPU attached to one emulated device.
pub trait EmuGpu: Send + Sync {
    /// A queue passed KFD's checks. Returning an error fails CREATE_QUEUE with it (use
    /// `Error::Errno`, e.g. ENOTSUPP/EINVAL for a queue kind the GPU cannot run).
    fn create_queue(&self, dev: &EmuDevice, queue: &Arc<EmuQueue>) -> Result<()>;
    /// The process wrote `value` to the queue's doorbell (the new write pointer: dwords for PM4
    /// and AQL queues, bytes for SDMA). The ring contents and the wptr in memory are visible.
    fn on_doorbell(&self, dev: &EmuDevice, queue: &Arc<EmuQueue>, value: u64);
    /// The queue is being destroyed (DESTROY_QUEUE); stop reading its ring.
    fn destroy_queue(&self, dev: &EmuDevice, queue: &Arc<EmuQueue>);
    /// The GPU hung and is being reset (fault injection, [`crate::mockgpu::EmuDriver::reset_gpu`]): stop
    /// the queue where it is, faulted with `reason`, until it is destroyed. A GPU that cannot
    /// stop a queue ignores this.
    fn halt_queue(&self, queue: &EmuQueue, reason: &str) {
        let _ = (queue, reason);
    }
    /// What the GPU knows about a queue (position, fault), for the runtime's error reports.
    fn queue_status(&self, queue: &EmuQueue) -> Option<QueueReport> {
        let _ = queue;
        None
    }
}

/// One doorbell write as the emulator observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellWrite {
    /// The queue owning the doorbell slot (`None`: no queue there; hardware ignores such writes).
    pub queue_id: Option<u32>,
    pub slot: u32,
    pub value: u64,
}

/// A software GPU's handle on its emulated device.
#[derive(Clone)]
pub struct EmuDevice {
    pub(super) kfd: Weak<EmuKfd>,
    pub(super) index: usize,
    pub(super) gpu_id: u32,
}

impl std::fmt::Debug for EmuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmuDevice(gpu_id={:#x})", self.gpu_id)
    }
}

impl EmuDevice {
    pub(super) fn kfd(&self) -> Result<Arc<EmuKfd>> {
        self.kfd.upgrade().ok_or_else(|| {
            Error::Device(format!(
                "emu gpu {:#x}: the emulated driver is gone",
                self.gpu_id
            ))
        })
    }

    /// This device's `gpu_id`.
    pub fn gpu_id(&self) -> u32 {
        self.gpu_id
    }

    /// The device's topology `properties`.
    pub fn props(&self) -> Result<NodeProperties> {
        Ok(self.kfd()?.descs[self.index].props.clone())
    }

    /// The queue-buffer sizes KFD enforces on this device.
    pub fn queue_buffer_sizes(&self) -> Result<QueueBufferSizes> {
        Ok(self.kfd()?.descs[self.index].sizes)
    }

    /// The GPU's view of `[va, va + len)`: a [`Mapping`] of the backing memory if the whole
    /// range lies in one buffer mapped on this device (and is writable when `write`), else
    /// `Error::Fault` naming the address. The mapping stays valid even if the buffer is freed.
    pub fn translate(&self, va: u64, len: u64, write: bool) -> Result<Mapping> {
        self.kfd()?.gpu_translate(self.index, va, len, write)
    }

    /// Whether `[va, va + len)` lies in one buffer mapped on this device.
    pub fn is_mapped(&self, va: u64, len: u64) -> bool {
        self.translate(va, len, false).is_ok()
    }

    /// An interrupt with context id `ctxid` (RELEASE_MEM INT_SEL with INT_CTXID, SDMA TRAP with
    /// INT_CONTEXT): KFD signals the event whose mailbox slot is written, scanning all slots if
    /// `ctxid` names none, and wakes WAIT_EVENTS.
    pub fn interrupt(&self, ctxid: u32) -> Result<()> {
        self.kfd()?.events.interrupt(ctxid);
        Ok(())
    }

    /// A GPU page fault at `va` (write or read): KFD signals every MEMORY event with the fault.
    pub fn vm_fault(&self, va: u64, write: bool) -> Result<()> {
        self.kfd()?.events.vm_fault(self.gpu_id, va, write);
        Ok(())
    }

    /// The queues alive on this device.
    pub fn queues(&self) -> Result<Vec<Arc<EmuQueue>>> {
        Ok(self.kfd()?.queues_of(self.index))
    }
}
