//! The software GPU's seams to the rest of the emulator: who runs a dispatched kernel
//! ([`DispatchExecutor`], given a [`DispatchState`] snapshot of the compute registers) and who
//! hears interrupts ([`EventSink`]: RELEASE_MEM with INT_SEL, SDMA TRAP).
//!
//! Not guaranteed: the GPU does not know where a kernel keeps its kernarg pointer among the user
//! SGPRs (that depends on the kernel descriptor, which the GPU never sees); executors find it
//! from their own record of the program.

use super::QueueId;
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::Result;

/// Everything the CP would hand to the shader pipes for one DISPATCH_DIRECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchState {
    /// The dispatching queue.
    pub queue: QueueId,
    /// Byte address of the program (COMPUTE_PGM_LO/HI << 8).
    pub pgm_addr: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    /// COMPUTE_USER_DATA_0..15 as last written (0 where never written).
    pub user_sgprs: [u32; 16],
    /// RSRC2.USER_SGPR: how many user SGPRs the kernel declares.
    pub user_sgpr_count: u32,
    /// COMPUTE_NUM_THREAD_X/Y/Z: the workgroup size.
    pub workgroup_size: [u32; 3],
    /// DISPATCH_DIRECT's workgroup counts.
    pub grid: [u32; 3],
    /// COMPUTE_START_X/Y/Z.
    pub start: [u32; 3],
    /// DISPATCH_INITIATOR.CS_W32_EN.
    pub wave32: bool,
    /// RSRC2.LDS_SIZE in bytes.
    pub lds_bytes: u32,
    /// COMPUTE_DISPATCH_SCRATCH_BASE << 8 (0 where the target lacks it or it was not written).
    pub scratch_base: u64,
    /// COMPUTE_TMPRING_SIZE.
    pub tmpring_size: u32,
}

impl DispatchState {
    /// User SGPRs `i` and `i + 1` as a 64-bit pointer (low dword first).
    pub fn user_sgpr_pair(&self, i: usize) -> Option<u64> {
        let lo = *self.user_sgprs.get(i)?;
        let hi = *self.user_sgprs.get(i + 1)?;
        Some(u64::from(hi) << 32 | u64::from(lo))
    }

    /// Total threads of the dispatch.
    pub fn total_threads(&self) -> u64 {
        (0..3)
            .map(|i| u64::from(self.grid[i]) * u64::from(self.workgroup_size[i]))
            .product()
    }
}

/// Runs the kernel of a dispatch. Called on the GPU thread; the queue waits until it returns.
pub trait DispatchExecutor: Send + Sync {
    /// Execute the whole grid; an error faults the queue with its message.
    fn dispatch(&self, mem: &dyn GpuMemory, state: &DispatchState) -> Result<()>;
}

/// What raised an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptSource {
    /// A compute-queue RELEASE_MEM with INT_SEL 1 or 2 (after its write).
    ReleaseMem,
    /// An SDMA TRAP packet.
    SdmaTrap,
}

/// Receives the GPU's interrupts (the emulated KFD signals the event whose id is the context).
pub trait EventSink: Send + Sync {
    /// `context_id` is RELEASE_MEM's INT_CTXID or TRAP's INT_CONTEXT (the KFD event id).
    fn interrupt(&self, queue: QueueId, source: InterruptSource, context_id: u32);
}

/// An [`EventSink`] that drops every interrupt.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn interrupt(&self, _queue: QueueId, _source: InterruptSource, _context_id: u32) {}
}
