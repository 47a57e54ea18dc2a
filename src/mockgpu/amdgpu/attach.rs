//! `MOCKGPU=1` for AMD: the pieces that let the AMD backend run end to end on the emulated KFD.
//!
//! - [`object`]: the mock code object (a real amdhsa ELF whose `.text` holds serialized UOps);
//! - [`super::executor`]: the software GPU's dispatch executor that runs such objects on the UOp
//!   interpreter; [`super::rdna3`]: the one that runs real gfx11 code objects (`MOCKGPU_CODE=isa`);
//! - [`compiler`]: the renderer (UOps -> serialized text) and the compilers (text -> mock code
//!   object; the real-hardware placeholder);
//! - here: [`MockGpu`], the [`EmuGpu`] that attaches a software GPU
//!   ([`crate::mockgpu::amdgpu::Gpu`]) to an emulated device (create_queue -> add_queue,
//!   doorbell -> notify, destroy_queue -> remove_queue), with its memory going through the
//!   device's GPU page tables ([`EmuDevice::translate`]; a miss also raises KFD's MEMORY event
//!   through [`EmuDevice::vm_fault`]) and its interrupts through [`EmuDevice::interrupt`];
//!   [`gpu_factory`] / [`mock_driver`] build emulated drivers with it.
//!
//! Not guaranteed: AQL queues are refused (ENOTSUPP), as the software GPU runs PM4 and SDMA only.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::driver::{errno_error, QueueReport};
use crate::hw::amd::targets;
use crate::mockgpu::amdgpu::{
    DispatchExecutor, DispatchState, EventSink, Gpu, InterruptSource, QueueDesc, QueueId,
    QueueKind as GpuQueueKind,
};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::mockgpu::GpuFactory;
use crate::mockgpu::{EmuConfig, EmuDevice, EmuDriver, EmuGpu, EmuQueue, QueueKind};
use crate::{Error, Result};

/// GPU memory as the device's page tables map it.
struct EmuMemory {
    dev: EmuDevice,
}

impl EmuMemory {
    fn view(&self, va: u64, len: usize, write: bool) -> Result<crate::driver::Mapping> {
        match self.dev.translate(va, len as u64, write) {
            Ok(m) => Ok(m),
            Err(e) => {
                // What the MMU does on a miss: KFD learns of the fault (MEMORY events).
                let _ = self.dev.vm_fault(va, write);
                Err(e)
            }
        }
    }
}

impl GpuMemory for EmuMemory {
    fn read(&self, va: u64, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.view(va, out.len(), false)?.read_bytes(0, out)
    }
    fn write(&self, va: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.view(va, data.len(), true)?.write_bytes(0, data)
    }
    fn read_u32(&self, va: u64) -> Result<u32> {
        self.view(va, 4, false)?.load_u32(0, Ordering::Acquire)
    }
    fn write_u32(&self, va: u64, v: u32) -> Result<()> {
        self.view(va, 4, true)?.store_u32(0, v, Ordering::Release)
    }
    fn read_u64(&self, va: u64) -> Result<u64> {
        self.view(va, 8, false)?.load_u64(0, Ordering::Acquire)
    }
    fn write_u64(&self, va: u64, v: u64) -> Result<()> {
        self.view(va, 8, true)?.store_u64(0, v, Ordering::Release)
    }
}

/// Interrupts to KFD's event machinery.
struct EmuEvents {
    dev: EmuDevice,
}

impl EventSink for EmuEvents {
    fn interrupt(&self, _queue: QueueId, _source: InterruptSource, context_id: u32) {
        let _ = self.dev.interrupt(context_id);
    }
}

/// The executor of the code at a dispatch's program address: a mock code object (its magic
/// first) runs on the UOp interpreter, anything else is gfx11 machine code for the RDNA3
/// interpreter (what `MOCKGPU_CODE` picked decides which of the two the compiler produced).
#[derive(Default)]
struct CodeExecutor {
    uops: super::executor::UopExecutor,
    isa: super::rdna3::Rdna3Executor,
}

impl DispatchExecutor for CodeExecutor {
    fn dispatch(&self, mem: &dyn GpuMemory, st: &DispatchState) -> Result<()> {
        let mut magic = [0u8; 12];
        mem.read(st.pgm_addr, &mut magic)?;
        if magic == *super::object::MOCK_MAGIC {
            self.uops.dispatch(mem, st)
        } else {
            self.isa.dispatch(mem, st)
        }
    }
}

/// A software GPU attached to one emulated device.
pub struct MockGpu {
    gpu: std::result::Result<Gpu, String>,
    queues: Mutex<HashMap<u32, QueueId>>,
}

impl MockGpu {
    /// A software GPU for `dev` running mock code objects (its target from the topology).
    pub fn new(dev: &EmuDevice) -> MockGpu {
        let gpu = (|| {
            let target = targets::lookup(dev.props()?.gfx_target_version()?)?;
            Gpu::new(
                Arc::new(EmuMemory { dev: dev.clone() }),
                Arc::new(CodeExecutor::default()),
                Arc::new(EmuEvents { dev: dev.clone() }),
                target,
            )
        })()
        .map_err(|e| e.to_string());
        MockGpu {
            gpu,
            queues: Mutex::new(HashMap::new()),
        }
    }

    fn gpu(&self) -> Result<&Gpu> {
        self.gpu
            .as_ref()
            .map_err(|e| Error::Device(format!("software GPU did not start: {e}")))
    }

    fn id(&self, queue_id: u32) -> Option<QueueId> {
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&queue_id)
            .copied()
    }
}

impl EmuGpu for MockGpu {
    fn create_queue(&self, _dev: &EmuDevice, q: &Arc<EmuQueue>) -> Result<()> {
        let kind = match q.kind {
            QueueKind::Compute => GpuQueueKind::Compute,
            QueueKind::Sdma | QueueKind::SdmaXgmi => GpuQueueKind::Sdma,
            QueueKind::ComputeAql => {
                return Err(errno_error(
                    524,
                    "software GPU: AQL queues are not emulated (PM4 and SDMA only)",
                ))
            }
        };
        let desc = QueueDesc {
            kind,
            ring_va: q.ring_va,
            ring_size: q.ring_size,
            rptr_va: q.rptr_va,
            eop_va: (kind == GpuQueueKind::Compute && q.eop_va != 0).then_some(q.eop_va),
        };
        let id = self.gpu()?.add_queue(desc)?;
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(q.queue_id, id);
        Ok(())
    }

    fn on_doorbell(&self, _dev: &EmuDevice, q: &Arc<EmuQueue>, value: u64) {
        if let (Some(id), Ok(gpu)) = (self.id(q.queue_id), self.gpu()) {
            // A refused write pointer faults the queue; the fault is reported by queue_status.
            let _ = gpu.notify(id, value);
        }
    }

    fn destroy_queue(&self, _dev: &EmuDevice, q: &Arc<EmuQueue>) {
        let id = self
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&q.queue_id);
        if let (Some(id), Ok(gpu)) = (id, self.gpu()) {
            let _ = gpu.remove_queue(id);
        }
    }

    fn halt_queue(&self, q: &EmuQueue, reason: &str) {
        if let (Some(id), Ok(gpu)) = (self.id(q.queue_id), self.gpu()) {
            let _ = gpu.halt(id, reason);
        }
    }

    fn queue_status(&self, q: &EmuQueue) -> Option<QueueReport> {
        let st = self.gpu().ok()?.queue_state(self.id(q.queue_id)?).ok()?;
        Some(QueueReport {
            rptr: st.rptr,
            wptr: st.wptr,
            waiting: st.waiting,
            last_packet: st.last_packet.map(|p| format!("{} at {}", p.name, p.pos)),
            fault: st.fault.map(|f| f.to_string()),
        })
    }
}

/// Builds a [`MockGpu`] for each emulated device.
pub fn gpu_factory() -> GpuFactory {
    Arc::new(|dev: &EmuDevice| Arc::new(MockGpu::new(dev)) as Arc<dyn EmuGpu>)
}

/// An emulated KFD as `cfg` says, with a software GPU on every device.
pub fn mock_driver(mut cfg: EmuConfig) -> Result<EmuDriver> {
    cfg.gpu_factory = Some(gpu_factory());
    EmuDriver::new(cfg)
}
