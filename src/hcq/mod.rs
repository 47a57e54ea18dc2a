//! HCQ: hardware command queues, the device-generic core every raw-driver backend (AMD through
//! KFD, NV through RM/UVM) is written against. It is shaped after tinygrad 0.10's
//! `HWQueue`/`HCQSignal`/`HCQProgram`/`HCQCompiled` split, as traits with associated types:
//!
//! - [`HcqBackend`]: one opened GPU of some vendor: signals, queues, memory, programs, and the
//!   hooks the core needs (fault polling, queue reset, status reports).
//! - [`queue`]: [`HwQueue`] with the chainable verbs `wait`, `signal`, `timestamp`, `submit`,
//!   [`HwComputeQueue`] (`memory_barrier`, `exec`) and [`HwCopyQueue`] (`copy`). A verb returns a
//!   [`Cmd`] that derefs to the queue (so verbs chain) and carries the command's typed patch point
//!   (for graph replays), never a numeric offset. The verbs are written once ([`HcqQueue`]) over
//!   a backend's encoder ([`HcqEncoder`], [`ComputeEncoder`], [`CopyEncoder`]: the packet
//!   encodings and patch points of one engine).
//! - [`launch`]: [`HcqLaunch`], one launch (kernarg block and dims) as its program prepared it;
//!   `exec` consumes it, `update_exec` takes a new one.
//! - [`signal`]: [`HcqSignal`] (value, timestamp, sleep on the driver's event) and the CPU wait
//!   (bounded spin, then sleep, always with a timeout: `HCQDEV_WAIT_TIMEOUT_MS`, default 10 s).
//! - [`device`]: [`HcqDevice`], written once: the per-device timeline with its shadow swap before
//!   the 32-bit wrap, `synchronize`, the program call, in-flight keep-alive, kernarg ring, fault
//!   reports and recovery; [`graph`]: `HcqGraph`, the JIT's prebuilt queues per batch (over one or
//!   more devices, transfers included);
//!   [`bound`]: the two GPU-visible images of a bound queue (dirty-dword log, alternation);
//!   [`allocator`]: [`HcqAllocator`] (staging copies, transfer, views,
//!   deferred frees); [`profile`]: `PROFILE=1` GPU timestamps converted to host time;
//!   [`trace`]: the standalone Chrome/Perfetto trace writer.
//!
//! Contract for backends: GPU writes and compares of signal values are 32-bit (values stay below
//! 2^32: the timeline swaps at 2^31); a queue executes its commands in order; `submit` makes the
//! commands visible to the GPU (ring write, fence, doorbell) and never blocks on the GPU except to
//! wait for ring space.
//!
//! Not guaranteed: raw queue submissions ([`HwQueue::submit`]) carry no keep-alive (only what goes
//! through [`HcqDevice`] does); a backend's packets are only as right as its own tests show.

#![forbid(unsafe_code)]

pub mod allocator;
pub mod bound;
pub mod device;
pub mod graph;
mod inflight;
mod kernargs;
pub mod launch;
pub mod profile;
pub mod program;
pub mod queue;
pub mod signal;
pub mod timeline;
pub mod trace;

#[cfg(test)]
pub(crate) mod json;

use std::any::Any;
use std::sync::Arc;

pub use allocator::{HcqAllocator, HcqMem};
pub use device::HcqDevice;
pub use launch::HcqLaunch;
pub use program::HcqProgramHandle;
pub use queue::{
    Cmd, ComputeEncoder, CopyEncoder, HcqEncoder, HcqQueue, HwComputeQueue, HwCopyQueue, HwQueue,
};
pub use signal::{wait_timeout, HcqSignal};
pub use timeline::TimelinePoint;

use crate::device::BufferOptions;
use crate::Result;

/// Something a submission must keep alive until the GPU is done with it (a buffer, a program,
/// a signal's memory).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// Device memory as the core sees it.
pub trait HcqBuffer: Send + Sync + 'static {
    /// GPU virtual address of the first byte.
    fn va(&self) -> u64;
    /// Size in bytes (as allocated, possibly rounded up).
    fn size(&self) -> usize;
    /// The CPU view, when the buffer is CPU-mapped (host, staging, kernarg memory).
    fn cpu(&self) -> Option<&crate::driver::Mapping>;
}

/// A loaded kernel as the core sees it.
pub trait HcqProgram: Send + Sync + 'static {
    /// The kernel's name.
    fn name(&self) -> &str;
    /// Bytes of kernarg space one launch needs (arguments and any backend extras).
    fn kernargs_alloc_size(&self) -> usize;
    /// Write `launch`'s kernarg block: the buffer addresses `bufs` and integer variables `vals`
    /// (in the kernel's order), and whatever the backend derives from the launch's dims there
    /// (NV: constant buffer 0's %ntid/%nctaid and the QMD; AMD: the dispatch packet). Checks
    /// that the arguments and dims match what the kernel declares.
    fn fill_kernargs(&self, launch: &HcqLaunch, bufs: &[u64], vals: &[i64]) -> Result<()>;
    /// Prepare one launch: its kernarg block at byte `off` of `mem`, filled, with its dims.
    fn launch(
        &self,
        mem: Arc<dyn HcqBuffer>,
        off: usize,
        bufs: &[u64],
        vals: &[i64],
        dims: ([u32; 3], [u32; 3]),
    ) -> Result<HcqLaunch> {
        let l = HcqLaunch::in_memory(mem, off, dims.0, dims.1)?;
        self.fill_kernargs(&l, bufs, vals)?;
        Ok(l)
    }
}

/// One opened GPU of a vendor: the parts the generic core drives.
pub trait HcqBackend: Send + Sync + Sized + 'static {
    type Signal: HcqSignal;
    type ComputeQueue: HwComputeQueue<Self>;
    type CopyQueue: HwCopyQueue<Self>;
    type Program: HcqProgram;
    type Buffer: HcqBuffer;

    /// Canonical device name (`AMD:1`).
    fn name(&self) -> &str;
    /// The submissions from now until the next call (with `None`) belong to the device's
    /// timeline submission that signals `point` on `timeline` last: a backend copying commands
    /// into a ring of its own reuses that space once the timeline passed the point (NV's command
    /// ring; a fence of an older epoch has passed). The default ignores it.
    fn fence_submissions(&self, _fence: Option<(&Self::Signal, TimelinePoint)>) {}
    /// A signal starting at `value`; `with_event` asks for one the CPU can sleep on (timelines).
    fn new_signal(&self, value: u64, with_event: bool) -> Result<Self::Signal>;
    /// An empty compute command list.
    fn compute_queue(&self) -> Self::ComputeQueue;
    /// An empty copy command list.
    fn copy_queue(&self) -> Self::CopyQueue;
    /// Device memory (`opts.host`: host memory the GPU can reach, CPU-mapped).
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<Self::Buffer>;
    /// CPU-writable memory the GPU reads kernargs from.
    fn alloc_kernarg_memory(&self, size: usize) -> Result<Self::Buffer>;
    /// Make `buf` (memory of another device of the same process) reachable by this device's
    /// queues (peer-to-peer mapping).
    fn map_peer(&self, buf: &Self::Buffer) -> Result<()>;
    /// GPU timestamp ticks per second.
    fn timestamp_hz(&self) -> f64;
    /// Bytes per staging copy chunk.
    fn staging_chunk(&self) -> usize {
        4 << 20
    }
    /// The queues' state for error messages: read/write pointers, and under an emulator the
    /// software GPU's view (position, fault reason).
    fn status_report(&self) -> String;
    /// A fault the device reported (page fault, faulted queue), if any, without blocking.
    fn poll_fault(&self) -> Option<String>;
    /// After a timeout or fault: throw away everything queued (destroy and recreate the hardware
    /// queues) so the device is usable again.
    fn reset_queues(&self) -> Result<()>;
    /// Errors met where they could not be returned (in `Drop`), reported at the next
    /// synchronize.
    fn take_deferred_errors(&self) -> Vec<String>;
}
