//! The software GPU: one thread per emulated device that consumes PM4 compute rings and SDMA
//! rings the way the CP and the SDMA engine do. Woken by doorbells ([`Gpu::notify`] with the new
//! write pointer), it executes packets from rptr to wptr (compute pointers in dwords, SDMA in
//! bytes, rings of power-of-two size), publishes the rptr to memory, blocks on unsatisfied waits
//! by polling with short sleeps (other queues keep running, so cross-queue waits resolve), and
//! stops cleanly when dropped.
//!
//! Strict: anything real hardware or KFD would reject, or that would silently misbehave, faults
//! the queue instead: malformed headers, unknown opcodes or SH registers, misaligned or unmapped
//! addresses, dispatches without program/kernarg registers, SDMA packets straddling the ring end,
//! RELEASE_MEM without an EOP buffer, write pointers that go backwards or overrun the ring, GL2
//! metadata (GLM) cache actions on gfx12 (Mesa radeonsi never sends them there), an SDMA 4
//! FENCE with an MTYPE (its header has none), COPY_LINEAR packets larger than Mesa's
//! SDMA_V2_0/V5_2_COPY_MAX_BYTES (the hardware drops the tail of a longer one). The packet
//! decoders it shares with the encoders are pinned by goldens written by hand from the vendor
//! headers (`runtime/amd/tests/vendor.rs`); the software GPU's own tests drive it with the
//! backend's builders (`runtime/amd/tests/swgpu`). A faulted queue executes nothing more;
//! [`Gpu::queue_state`] reports the position and reason.
//!
//! Kernels run through a [`DispatchExecutor`]; interrupts go to an [`EventSink`]; memory goes
//! through [`GpuMemory`]. The emulated KFD owns a `Gpu` and implements those seams.
//!
//! Not guaranteed: timing (a dispatch runs to completion before the next packet), cache effects
//! (ACQUIRE_MEM and cache bits are validated, then ignored), and preemption.

pub mod attach;
pub mod compiler;
pub mod executor;
pub mod hooks;
pub mod object;
mod pm4;
mod queue;
pub mod rdna3;
mod sdma;

use crate::mockgpu::gpu_memory::GpuMemory;
pub use hooks::{DispatchExecutor, DispatchState, EventSink, InterruptSource, NoEvents};

use crate::hw::amd::targets::GfxTarget;
use crate::mockgpu::engine_loop;
use crate::{bail, ensure, Error, Result};
use crossbeam::channel::{unbounded, Sender};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A queue of one emulated device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "q{}", self.0)
    }
}

/// The engine a queue feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// PM4 compute queue (KFD_IOC_QUEUE_TYPE_COMPUTE); pointers in dwords.
    Compute,
    /// SDMA queue (KFD_IOC_QUEUE_TYPE_SDMA); pointers in bytes.
    Sdma,
}

impl QueueKind {
    /// Bytes per unit of rptr/wptr.
    pub fn unit_bytes(self) -> u64 {
        match self {
            QueueKind::Compute => 4,
            QueueKind::Sdma => 1,
        }
    }
}

/// The ring description the GPU needs (what CREATE_QUEUE hands the hardware).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDesc {
    pub kind: QueueKind,
    /// Ring base VA (256-byte aligned).
    pub ring_va: u64,
    /// Ring size in bytes (power of two, >= 256).
    pub ring_size: u64,
    /// Where the GPU publishes its 64-bit read pointer (8-byte aligned).
    pub rptr_va: u64,
    /// EOP buffer VA of a compute queue; RELEASE_MEM faults without one.
    pub eop_va: Option<u64>,
}

/// A dword inside an indirect buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbPos {
    pub va: u64,
    pub dword: u32,
}

/// The last packet a queue started executing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastPacket {
    /// Ring position (dwords or bytes, monotonic like the pointers).
    pub pos: u64,
    /// Set when the packet came from an indirect buffer.
    pub ib: Option<IbPos>,
    pub name: &'static str,
}

/// Why and where a queue stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFault {
    pub queue: QueueId,
    pub kind: QueueKind,
    /// Ring position of the faulting packet (dwords for compute, bytes for SDMA).
    pub pos: u64,
    /// Set when the faulting packet was inside an indirect buffer.
    pub ib: Option<IbPos>,
    pub reason: String,
}

impl fmt::Display for QueueFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = if self.kind == QueueKind::Compute {
            "dword"
        } else {
            "byte"
        };
        write!(
            f,
            "{} ({:?}) faulted at ring {unit} {}",
            self.queue, self.kind, self.pos
        )?;
        if let Some(ib) = self.ib {
            write!(f, " (IB {:#x} dword {})", ib.va, ib.dword)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl QueueFault {
    /// The fault as an [`Error::Fault`].
    pub fn to_error(&self) -> Error {
        Error::Fault(self.to_string())
    }
}

/// A snapshot of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueState {
    pub kind: QueueKind,
    pub rptr: u64,
    pub wptr: u64,
    pub last_packet: Option<LastPacket>,
    pub fault: Option<QueueFault>,
    /// Blocked on an unsatisfied wait.
    pub waiting: bool,
}

/// The emulated GPU clock: 100 MHz (tinygrad divides timestamps by 100 for microseconds),
/// strictly increasing across reads.
struct GpuClock {
    base: Instant,
    last: AtomicU64,
}

impl GpuClock {
    fn now(&self) -> u64 {
        let t = (self.base.elapsed().as_nanos() / 10) as u64;
        let prev = self.last.fetch_max(t, Ordering::SeqCst);
        if prev >= t {
            // Another read got this tick: move past it.
            self.last.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            t
        }
    }
}

/// State the GPU thread and the host side share.
struct Shared {
    target: &'static GfxTarget,
    mem: Arc<dyn GpuMemory>,
    executor: Arc<dyn DispatchExecutor>,
    events: Arc<dyn EventSink>,
    queues: Mutex<HashMap<QueueId, Arc<QueueSlot>>>,
    next_id: AtomicU32,
    clock: GpuClock,
    tracing: AtomicBool,
    trace: Mutex<Vec<String>>,
}

/// A queue as both sides see it: its ring description and its published state.
struct QueueSlot {
    desc: QueueDesc,
    state: Mutex<QueueState>,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Internal("software GPU: lock poisoned".into()))
}

impl Shared {
    fn trace(&self, line: impl FnOnce() -> String) {
        if self.tracing.load(Ordering::Relaxed) {
            if let Ok(mut t) = self.trace.lock() {
                t.push(line());
            }
        }
    }
}

type Msg = engine_loop::Msg<queue::Runner>;

/// How long an idle GPU thread with a blocked wait sleeps between polls.
const POLL: Duration = Duration::from_micros(100);
/// Packets one queue may execute before the next queue gets a turn.
const BUDGET: usize = 256;

/// One emulated device's GPU.
pub struct Gpu {
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl Gpu {
    /// Starts the GPU thread for `target`.
    pub fn new(
        mem: Arc<dyn GpuMemory>,
        executor: Arc<dyn DispatchExecutor>,
        events: Arc<dyn EventSink>,
        target: &'static GfxTarget,
    ) -> Result<Gpu> {
        let shared = Arc::new(Shared {
            target,
            mem,
            executor,
            events,
            queues: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(0),
            clock: GpuClock {
                base: Instant::now(),
                last: AtomicU64::new(0),
            },
            tracing: AtomicBool::new(false),
            trace: Mutex::new(Vec::new()),
        });
        let (tx, rx) = unbounded();
        let thread = std::thread::Builder::new()
            .name(format!("rawgrad-gpu-{}", target.name))
            .spawn(move || engine_loop::run_engines(rx, BUDGET, POLL))
            .map_err(|e| Error::Device(format!("software GPU: cannot start its thread: {e}")))?;
        Ok(Gpu {
            shared,
            tx,
            thread: Some(thread),
        })
    }

    /// The target whose packet layouts the GPU accepts.
    pub fn target(&self) -> &'static GfxTarget {
        self.shared.target
    }

    /// Registers a ring; the queue starts with rptr = wptr = 0.
    pub fn add_queue(&self, desc: QueueDesc) -> Result<QueueId> {
        ensure!(
            desc.ring_size.is_power_of_two() && desc.ring_size >= 256,
            InvalidArgument,
            "software GPU add_queue: ring size {:#x} is not a power of two >= 256",
            desc.ring_size
        );
        ensure!(
            desc.ring_va % 256 == 0,
            InvalidArgument,
            "software GPU add_queue: ring VA {:#x} not 256-byte aligned",
            desc.ring_va
        );
        ensure!(
            desc.rptr_va % 8 == 0,
            InvalidArgument,
            "software GPU add_queue: rptr VA {:#x} not 8-byte aligned",
            desc.rptr_va
        );
        ensure!(
            desc.kind == QueueKind::Compute || desc.eop_va.is_none(),
            InvalidArgument,
            "software GPU add_queue: SDMA queues have no EOP buffer"
        );
        let id = QueueId(self.shared.next_id.fetch_add(1, Ordering::SeqCst));
        let state = QueueState {
            kind: desc.kind,
            rptr: 0,
            wptr: 0,
            last_packet: None,
            fault: None,
            waiting: false,
        };
        let slot = Arc::new(QueueSlot {
            desc,
            state: Mutex::new(state),
        });
        lock(&self.shared.queues)?.insert(id, slot.clone());
        let runner = queue::Runner::new(id, slot, self.shared.clone());
        self.send(Msg::Add(Box::new(runner)))?;
        Ok(id)
    }

    /// Stops executing a queue and forgets it (DESTROY_QUEUE).
    pub fn remove_queue(&self, queue: QueueId) -> Result<()> {
        self.slot(queue)?;
        let (ack_tx, ack_rx) = unbounded();
        self.send(Msg::Remove(queue, ack_tx))?;
        ack_rx.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            Error::Timeout(format!(
                "software GPU remove_queue({queue}): the GPU thread did not answer"
            ))
        })?;
        lock(&self.shared.queues)?.remove(&queue);
        Ok(())
    }

    /// The doorbell: the host wrote packets up to `wptr` (dwords for compute, bytes for SDMA).
    /// A pointer that goes backwards, is not dword aligned (SDMA) or overruns the ring faults
    /// the queue and is returned as the error.
    pub fn notify(&self, queue: QueueId, wptr: u64) -> Result<()> {
        let slot = self.slot(queue)?;
        {
            let mut s = lock(&slot.state)?;
            let ring_units = slot.desc.ring_size / slot.desc.kind.unit_bytes();
            if let Some(reason) = bad_wptr(&s, wptr, ring_units) {
                let f = QueueFault {
                    queue,
                    kind: s.kind,
                    pos: s.rptr,
                    ib: None,
                    reason,
                };
                let e = f.to_error();
                s.fault.get_or_insert(f);
                return Err(e);
            }
            s.wptr = wptr;
        }
        self.send(Msg::Wake)
    }

    /// Stop a queue where it is, as a hang that ends in a GPU reset does: it is faulted with
    /// `reason` at its current read pointer (an earlier fault is kept) and executes nothing more.
    pub fn halt(&self, queue: QueueId, reason: &str) -> Result<()> {
        let slot = self.slot(queue)?;
        let mut s = lock(&slot.state)?;
        let f = QueueFault {
            queue,
            kind: s.kind,
            pos: s.rptr,
            ib: None,
            reason: reason.to_string(),
        };
        self.shared.trace(|| format!("{queue} HALT {f}"));
        s.fault.get_or_insert(f);
        Ok(())
    }

    /// A snapshot of a queue's pointers, last packet and fault.
    pub fn queue_state(&self, queue: QueueId) -> Result<QueueState> {
        Ok(lock(&self.slot(queue)?.state)?.clone())
    }

    /// Polls until the queue consumed everything up to its wptr. A fault is returned as
    /// [`Error::Fault`], passing `timeout` as [`Error::Timeout`] with the queue state.
    pub fn wait_idle(&self, queue: QueueId, timeout: Duration) -> Result<QueueState> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.queue_state(queue)?;
            if let Some(f) = &s.fault {
                return Err(f.to_error());
            }
            if s.rptr == s.wptr {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                bail!(
                    Timeout,
                    "software GPU: {queue} not idle after {timeout:?}: {s:?}"
                );
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// The GPU clock counter now (100 MHz ticks since the GPU started).
    pub fn clock(&self) -> u64 {
        self.shared.clock.now()
    }

    /// Starts or stops recording one decoded line per executed packet.
    pub fn set_trace(&self, on: bool) {
        self.shared.tracing.store(on, Ordering::SeqCst);
    }

    /// The trace lines recorded so far (and clears them).
    pub fn take_trace(&self) -> Vec<String> {
        self.shared
            .trace
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }

    fn slot(&self, queue: QueueId) -> Result<Arc<QueueSlot>> {
        match lock(&self.shared.queues)?.get(&queue) {
            Some(s) => Ok(s.clone()),
            None => bail!(InvalidArgument, "software GPU: no queue {queue}"),
        }
    }

    fn send(&self, m: Msg) -> Result<()> {
        self.tx
            .send(m)
            .map_err(|_| Error::Device("software GPU: its thread has stopped".into()))
    }
}

/// Why a new write pointer is refused, if it is.
fn bad_wptr(s: &QueueState, wptr: u64, ring_units: u64) -> Option<String> {
    if s.kind == QueueKind::Sdma && wptr % 4 != 0 {
        return Some(format!(
            "doorbell: SDMA wptr {wptr:#x} is not dword aligned"
        ));
    }
    if wptr < s.wptr {
        return Some(format!(
            "doorbell: wptr went backwards from {} to {wptr}",
            s.wptr
        ));
    }
    if wptr - s.rptr > ring_units {
        return Some(format!(
            "doorbell: wptr {wptr} is more than a ring ({ring_units}) ahead of rptr {}",
            s.rptr
        ));
    }
    None
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
