//! Opening an AMD device (tinygrad `AMDDevice.__init__`): the node from the topology (`AMD:n` =
//! n-th visible GPU node), its target-table entry, the render node and ACQUIRE_VM, the process's
//! shared signal and event pages mapped into its VM, the PM4 compute ring and the SDMA ring
//! (buffers sized by `driver::kfd::topology::queue_buffer_sizes`), the doorbell page, and the
//! MEMORY and HW_EXCEPTION events fault reports read. [`AmdBackend`] is the [`HcqBackend`] over all
//! that; [`open_amd_device`] wraps it in an [`HcqDevice`].
//!
//! Fault reports: [`HcqBackend::poll_fault`] checks the HW_EXCEPTION event (a reset of this GPU:
//! type, cause, whether memory was lost), the MEMORY event (a GPU page fault on this GPU, with its
//! address) and the driver's queue report ([`crate::driver::Driver::queue_report`]: the emulator's
//! software GPU states a fault reason; the kernel reports nothing); [`HcqBackend::status_report`]
//! adds both rings' pointers and the driver's view.
//!
//! Not guaranteed: scratch grows on demand and is never shrunk; gfx targets whose HDP flush
//! registers are unknown (see `hw::amd::targets`) cannot run the memory barrier of a kernel launch.

use std::sync::{Arc, Mutex};

use super::copy::AmdCopyQueue;
use super::memory::{alloc_memory, AmdBuffer, MemKind};
use super::process::{lock, AmdProcess, EventPage, KfdCore};
use super::program::AmdProgram;
use super::queue::{AmdComputeQueue, HwRing, RingKind};
use super::signal::{AmdSignal, SignalPool, TIMESTAMP_HZ};
use crate::device::BufferOptions;
use crate::driver::kfd::ops::{self, memory_exception};
use crate::driver::kfd::topology::{queue_buffer_sizes, KfdNode};
use crate::driver::kfd::KFD_DOORBELL_PROCESS_SLICE;
use crate::driver::{MapFlags, Mapping, Prot};
use crate::hcq::{HcqBackend, HcqBuffer, HcqDevice};
use crate::hw::amd::targets::{self, GfxTarget};
use crate::runtime::amd::pm4::{Pm4Buf, ScratchSetup};
use crate::runtime::amd::sdma::SdmaBuf;
use crate::sys::kfd::*;
use crate::{bail, Error, Result};

/// Ring bytes of each hardware queue (tinygrad 0.9.x: 1 MiB).
pub const RING_SIZE: usize = 1 << 20;

/// A device's scratch area.
struct Scratch {
    lane_bytes: u32,
    setup: ScratchSetup,
    buf: Arc<AmdBuffer>,
}

/// The MEMORY / HW_EXCEPTION events of a device.
struct FaultEvents {
    core: Arc<KfdCore>,
    memory: u32,
    hw: u32,
}

impl Drop for FaultEvents {
    fn drop(&mut self) {
        for id in [self.memory, self.hw] {
            let _ = ops::destroy_event(self.core.drv.as_ref(), self.core.kfd, id);
        }
    }
}

/// One opened AMD GPU (the vendor half of an [`HcqDevice`]).
pub struct AmdBackend {
    name: String,
    // Rings first: they are destroyed before the doorbell page goes away.
    compute: Mutex<HwRing>,
    sdma: Mutex<HwRing>,
    _doorbells: Mapping,
    proc: Arc<AmdProcess>,
    core: Arc<KfdCore>,
    node: KfdNode,
    target: &'static GfxTarget,
    signals: Arc<SignalPool>,
    events: Arc<EventPage>,
    faults: FaultEvents,
    seen_fault: Mutex<Option<String>>,
    scratch: Mutex<Option<Scratch>>,
}

/// Open `AMD:index` of `proc` as an HCQ device named `name`.
pub fn open_amd_device(
    proc: &Arc<AmdProcess>,
    index: usize,
    name: &str,
) -> Result<Arc<HcqDevice<AmdBackend>>> {
    HcqDevice::new(AmdBackend::open(proc, index, name, RING_SIZE)?)
}

impl AmdBackend {
    /// The named steps of tinygrad's `AMDDevice.__init__` for GPU `index` of `proc`, with hardware
    /// rings of `ring_size` bytes (a power of two >= 1024; [`RING_SIZE`] normally).
    pub fn open(
        proc: &Arc<AmdProcess>,
        index: usize,
        name: &str,
        ring_size: usize,
    ) -> Result<AmdBackend> {
        let node = proc.node(index)?.clone();
        let target = targets::lookup(node.props.gfx_target_version()?)?;
        let core = proc.core().clone();
        core.acquire_vm(&node)?;
        let (signals, events) = proc.shared_for(node.gpu_id)?;
        let sizes = queue_buffer_sizes(&node.props)?;
        let mut compute = HwRing::create(&core, node.gpu_id, RingKind::Compute, ring_size, &sizes)?;
        let mut sdma = HwRing::create(&core, node.gpu_id, RingKind::Sdma, ring_size, &sizes)?;
        let doorbells = map_doorbells(&core, &[&compute, &sdma])?;
        compute.attach_doorbell(doorbells.addr());
        sdma.attach_doorbell(doorbells.addr());
        let faults = FaultEvents {
            memory: create_plain_event(&core, KFD_IOC_EVENT_MEMORY)?,
            hw: create_plain_event(&core, KFD_IOC_EVENT_HW_EXCEPTION)?,
            core: core.clone(),
        };
        Ok(AmdBackend {
            name: name.to_string(),
            compute: Mutex::new(compute),
            sdma: Mutex::new(sdma),
            _doorbells: doorbells,
            proc: proc.clone(),
            core,
            node,
            target,
            signals,
            events,
            faults,
            seen_fault: Mutex::new(None),
            scratch: Mutex::new(None),
        })
    }

    /// The topology node.
    pub fn node(&self) -> &KfdNode {
        &self.node
    }

    /// The chip's table entry.
    pub fn target(&self) -> &'static GfxTarget {
        self.target
    }

    /// The KFD `gpu_id`.
    pub fn gpu_id(&self) -> u32 {
        self.node.gpu_id
    }

    /// The process.
    pub fn process(&self) -> &Arc<AmdProcess> {
        &self.proc
    }

    /// The KFD queue ids of (compute, SDMA).
    pub fn queue_ids(&self) -> (u32, u32) {
        (lock(&self.compute).queue_id, lock(&self.sdma).queue_id)
    }

    /// `(wptr, rptr)` of the compute ring (dwords) and of the SDMA ring (bytes).
    pub fn ring_pointers(&self) -> Result<[(u64, u64); 2]> {
        let (c, s) = (lock(&self.compute), lock(&self.sdma));
        Ok([(c.wptr, c.rptr()?), (s.wptr, s.rptr()?)])
    }

    /// Write PM4 packets to the compute ring.
    pub fn submit_compute(&self, b: &Pm4Buf) -> Result<()> {
        lock(&self.compute).submit_pm4(b)
    }

    /// Put one INDIRECT_BUFFER to `dwords` dwords of PM4 at `va` (a bound queue's image) on the
    /// compute ring.
    pub fn submit_compute_ib(&self, va: u64, dwords: usize) -> Result<()> {
        lock(&self.compute).submit_ib(va, dwords)
    }

    /// Write SDMA packets to the SDMA ring.
    pub fn submit_copy(&self, b: &SdmaBuf) -> Result<()> {
        lock(&self.sdma).submit_sdma(b)
    }

    /// Memory the CP reads commands from, CPU-written: GTT, uncached and coherent, the kind of
    /// the compute ring itself (a bound queue's images, [`super::bound`]).
    pub fn alloc_command_memory(&self, size: usize) -> Result<AmdBuffer> {
        alloc_memory(&self.core, self.gpu_id(), size, MemKind::GttUncached, true)
    }

    /// Host-visible memory for code (falls back to GTT without a large BAR).
    pub fn alloc_code(&self, size: usize) -> Result<AmdBuffer> {
        self.alloc_cpu_visible(size)
    }

    fn alloc_cpu_visible(&self, size: usize) -> Result<AmdBuffer> {
        match alloc_memory(&self.core, self.gpu_id(), size, MemKind::VramPublic, true) {
            Err(e) if e.errno() == Some(libc::EINVAL) => {
                alloc_memory(&self.core, self.gpu_id(), size, MemKind::Gtt, true)
            }
            r => r,
        }
    }

    /// Scratch for kernels using `lane_bytes` of private memory per lane (tinygrad
    /// `AMDDevice.__init__` scratch), grown on demand; old areas stay alive while programs
    /// reference them.
    pub fn ensure_scratch(&self, lane_bytes: u32) -> Result<(ScratchSetup, Arc<AmdBuffer>)> {
        let mut s = lock(&self.scratch);
        if let Some(sc) = s.as_ref().filter(|sc| sc.lane_bytes >= lane_bytes) {
            return Ok((sc.setup, sc.buf.clone()));
        }
        let p = &self.node.props;
        let get = |k: &str, d: u64| p.get(k).filter(|&v| v > 0).unwrap_or(d);
        let cus = get("simd_count", 1) / get("simd_per_cu", 1).max(1);
        let waves_total = (cus * get("max_slots_scratch_cu", 32)).max(1);
        let ses = (get("array_count", 1) / get("simd_arrays_per_engine", 1)).max(1);
        let lane = u64::from(lane_bytes.max(16)).next_multiple_of(16);
        let unit = u64::from(self.target.tmpring.wavesize_unit_bytes);
        let wave_bytes = (lane * u64::from(self.target.wave_size)).next_multiple_of(unit);
        let per = if self.target.tmpring.waves_per_se {
            ses
        } else {
            1
        };
        let field = (waves_total / per).clamp(1, 4095);
        let size = field * per * wave_bytes;
        let tmpring = self.target.tmpring_size(field as u32, wave_bytes)?;
        let Ok(bytes) = usize::try_from(size) else {
            bail!(
                Device,
                "{}: scratch of {size} bytes is too large",
                self.name
            )
        };
        let buf = Arc::new(alloc_memory(
            &self.core,
            self.gpu_id(),
            bytes,
            MemKind::Vram,
            false,
        )?);
        let setup = ScratchSetup {
            va: buf.va(),
            tmpring_size: tmpring,
        };
        *s = Some(Scratch {
            lane_bytes: lane as u32,
            setup,
            buf: buf.clone(),
        });
        Ok((setup, buf))
    }

    /// The driver's view of one queue (the emulator's software GPU reports one; the kernel does
    /// not).
    fn driver_queue(&self, queue_id: u32) -> Option<String> {
        let st = self.core.drv.queue_report(self.gpu_id(), queue_id)?;
        Some(st.to_string())
    }

    /// A queue fault the driver reports.
    fn driver_fault(&self) -> Option<String> {
        let (c, s) = self.queue_ids();
        [c, s].into_iter().find_map(|q| {
            self.core
                .drv
                .queue_report(self.gpu_id(), q)
                .and_then(|st| st.fault.map(|f| format!("queue {q}: {f}")))
        })
    }

    /// A page fault on this GPU, from the MEMORY event (non-blocking).
    fn memory_fault(&self) -> Option<String> {
        let mut data = [ops::event_data(self.faults.memory)];
        let r = ops::wait_events(self.core.drv.as_ref(), self.core.kfd, &mut data, false, 0);
        if r.ok()? != KFD_IOC_WAIT_RESULT_COMPLETE {
            return None;
        }
        let m = memory_exception(&data[0]);
        (m.gpu_id == self.gpu_id() || m.gpu_id == 0).then(|| {
            format!(
                "GPU page fault at VA {:#x} (not present {}, read only {}, no execute {})",
                m.va, m.failure.NotPresent, m.failure.ReadOnly, m.failure.NoExecute
            )
        })
    }
}

impl AmdBackend {
    /// A reset of this GPU, from the HW_EXCEPTION event (non-blocking). KFD sets every
    /// HW_EXCEPTION event of the process on any GPU's reset; another GPU's is ignored here (that
    /// device reads it from its own event).
    fn reset_fault(&self) -> Option<String> {
        let mut data = [ops::event_data(self.faults.hw)];
        let r = ops::wait_events(self.core.drv.as_ref(), self.core.kfd, &mut data, false, 0);
        if r.ok()? != KFD_IOC_WAIT_RESULT_COMPLETE {
            return None;
        }
        let h = ops::hw_exception(&data[0]);
        let kind = match h.reset_type {
            KFD_HW_EXCEPTION_WHOLE_GPU_RESET => "whole GPU",
            KFD_HW_EXCEPTION_PER_ENGINE_RESET => "per engine",
            _ => "unknown type",
        };
        let cause = match h.reset_cause {
            KFD_HW_EXCEPTION_GPU_HANG => "GPU hang",
            KFD_HW_EXCEPTION_ECC => "ECC error",
            _ => "unknown cause",
        };
        (h.gpu_id == self.gpu_id() || h.gpu_id == 0).then(|| {
            format!(
                "GPU reset on gpu_id {:#x} (HW_EXCEPTION: {kind} reset after a {cause}, \
                 memory_lost {}{})",
                self.gpu_id(),
                h.memory_lost,
                if h.memory_lost != 0 {
                    ": buffer contents are undefined"
                } else {
                    ""
                }
            )
        })
    }
}

/// CREATE_EVENT of a non-signal event type (no mailbox).
fn create_plain_event(core: &Arc<KfdCore>, ty: u32) -> Result<u32> {
    Ok(ops::create_event(core.drv.as_ref(), core.kfd, ty, true, 0)?.event_id)
}

/// Map the doorbell page the rings' doorbells are on (one 8 KiB frame per process and GPU).
fn map_doorbells(core: &Arc<KfdCore>, rings: &[&HwRing]) -> Result<Mapping> {
    let base = rings[0].doorbell_page_offset();
    if rings.iter().any(|r| r.doorbell_page_offset() != base) {
        bail!(
            Device,
            "the queues' doorbells are on different doorbell pages"
        );
    }
    Mapping::map(
        &core.drv,
        None,
        KFD_DOORBELL_PROCESS_SLICE,
        Prot::RW,
        MapFlags::SHARED,
        Some(core.kfd),
        base,
    )
}

impl HcqBackend for AmdBackend {
    type Signal = AmdSignal;
    type ComputeQueue = AmdComputeQueue;
    type CopyQueue = AmdCopyQueue;
    type Program = AmdProgram;
    type Buffer = AmdBuffer;

    fn name(&self) -> &str {
        &self.name
    }

    fn new_signal(&self, value: u64, with_event: bool) -> Result<AmdSignal> {
        let ev = with_event.then_some((&self.core, &*self.events));
        AmdSignal::new(&self.signals, value, ev)
    }

    fn compute_queue(&self) -> AmdComputeQueue {
        AmdComputeQueue::new(self.target)
    }

    fn copy_queue(&self) -> AmdCopyQueue {
        AmdCopyQueue::new(self.target)
    }

    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<AmdBuffer> {
        let gpu = self.gpu_id();
        if opts.host {
            alloc_memory(&self.core, gpu, size, MemKind::Userptr, true)
        } else if opts.cpu_access && opts.uncached {
            alloc_memory(&self.core, gpu, size, MemKind::GttUncached, true)
        } else if opts.cpu_access {
            self.alloc_cpu_visible(size)
        } else {
            alloc_memory(&self.core, gpu, size, MemKind::Vram, false)
        }
    }

    fn alloc_kernarg_memory(&self, size: usize) -> Result<AmdBuffer> {
        self.alloc_cpu_visible(size)
    }

    fn map_peer(&self, buf: &AmdBuffer) -> Result<()> {
        if !Arc::ptr_eq(buf.core(), &self.core) {
            return Err(Error::Device(format!(
                "{}: {buf:?} belongs to another KFD process (another driver instance)",
                self.name
            )));
        }
        buf.map_to(self.gpu_id())
    }

    fn timestamp_hz(&self) -> f64 {
        TIMESTAMP_HZ
    }

    fn status_report(&self) -> String {
        let mut parts = Vec::new();
        for ring in [&self.compute, &self.sdma] {
            let r = lock(ring);
            let mut s = r.describe();
            if let Some(e) = self.driver_queue(r.queue_id) {
                s.push_str(&format!(" [software GPU: {e}]"));
            }
            parts.push(s);
        }
        if let Some(f) = lock(&self.seen_fault).as_ref() {
            parts.push(format!("fault: {f}"));
        }
        parts.join("; ")
    }

    fn poll_fault(&self) -> Option<String> {
        let mut seen = lock(&self.seen_fault);
        if seen.is_none() {
            // The driver's queue report first: a page fault reaches the MEMORY event before the
            // faulted queue records it, so a queue fault seen here has its event already set.
            let reported = self.driver_fault();
            let found: Vec<String> = [self.reset_fault(), self.memory_fault(), reported]
                .into_iter()
                .flatten()
                .collect();
            *seen = (!found.is_empty()).then(|| found.join("; "));
        }
        seen.clone()
    }

    fn reset_queues(&self) -> Result<()> {
        let c = lock(&self.compute).reset();
        let s = lock(&self.sdma).reset();
        *lock(&self.seen_fault) = None;
        c.and(s)
    }

    fn take_deferred_errors(&self) -> Vec<String> {
        self.core.take_errors()
    }
}
