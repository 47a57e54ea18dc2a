//! The software NVIDIA GPU: one thread per emulated device that consumes GPFIFO channels the way
//! the host (PBDMA), the compute engine and the copy engine do. A doorbell ([`NvGpu::doorbell`]
//! with a channel's work submit token) makes the thread read GPPut from the channel's USERD, fetch
//! the GP entries between GPGet and GPPut, walk their pushbuffers' method groups, and execute the
//! methods of the class bound to each subchannel (SET_OBJECT): host semaphores (release with a
//! 64-bit payload and a nanosecond timestamp; acquires block the channel, polled with short sleeps
//! while other channels keep running, so cross-channel waits resolve), NON_STALL_INTERRUPT, the
//! copy engine (copies, four-word semaphore releases), compute launches (SEND_PCAS_A +
//! SEND_SIGNALING_PCAS2_B, or an inline QMD) decoded with the channel's compute class's QMD
//! version, QMD release semaphores and dependent-QMD chains. GPGet is published to USERD after
//! every completed entry. It stops cleanly when dropped.
//!
//! Strict: what real hardware or RM would reject, or would silently misread, faults the channel
//! instead ([`ChannelFault`]: GP entry, pushbuffer position, method and reason; later work is not
//! executed; [`NvGpu::channel_state`] reports it and the [`NvEventSink`] hears it): reserved header
//! encodings, methods unknown for the bound class, SET_OBJECT of a class the chip lacks or that
//! was not allocated on the channel, misaligned or too-wide semaphore addresses, QMDs of the wrong
//! version or beyond 2^40, memory outside the GPU-mapped ranges, copies of 0 bytes, launches
//! without constant buffer 0 or with impossible dims.
//!
//! [`rm`] attaches it to the emulated RM/UVM ([`crate::mockgpu::rm`]): [`nv_gpu_factory`]
//! for [`crate::mockgpu::EmuConfig::nv_gpu_factory`].
//!
//! Not guaranteed: timing (a grid runs to completion before the next method), caches (the
//! invalidate methods and QMD bits are accepted and ignored), preemption and TSG timeslicing.

pub mod attach;
mod channel;
pub mod compiler;
mod compute;
mod copy;
pub mod cubin;
pub mod executor;
pub mod hooks;
mod host;
pub mod ptx;
pub mod rm;

pub use hooks::{
    read_mock_kernel, NoNvEvents, NvDispatch, NvDispatchExecutor, NvEventSink, NvInterrupt,
    UserdAccess, UserdAt,
};
pub use rm::{nv_gpu_factory, RmNvGpu};

use crate::hw::nv::arch::{host_class, HostClass, NvArch};
use crate::hw::nv::methods::ClassKind;
use crate::mockgpu::engine_loop;
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{bail, ensure, Error, Result};
use crossbeam::channel::{unbounded, Sender};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A channel of one emulated GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub u32);

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ch{}", self.0)
    }
}

/// What a channel needs (what RM hands the hardware when it allocates the channel).
#[derive(Clone)]
pub struct ChannelDesc {
    /// The GP entry ring (8-byte entries).
    pub gpfifo_va: u64,
    pub entries: u32,
    /// Where GPPut / GPGet live.
    pub userd: Arc<dyn UserdAccess>,
    /// The work submit token the doorbell carries.
    pub token: u32,
    /// The channel (host) class: decides the semaphore address width.
    pub channel_class: u32,
}

/// Which engine a fault came from, with the RM robust-channel error it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Pushbuffer / method errors in the host (ROBUST_CHANNEL_PBDMA_ERROR, 32).
    Pbdma,
    /// An access outside the GPU-mapped ranges (ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT, 31).
    Mmu,
    /// A compute (GR) exception: bad QMD, failing kernel (ROBUST_CHANNEL_GR_EXCEPTION, 13).
    Graphics,
    /// A copy-engine error (reported as a GR exception, 13; UNCONFIRMED which CE error RM uses).
    CopyEngine,
    /// RM halted the channel for a critical error of this type (a GSP crash, a GPU lost:
    /// [`NvGpu::halt_channel`]); RM itself writes the notifiers.
    Halted(u32),
}

impl FaultKind {
    /// The RC error type RM writes into the error notifier (info32); the emulator's choice.
    pub fn rc_error_type(self) -> u32 {
        match self {
            FaultKind::Pbdma => 32,
            FaultKind::Mmu => 31,
            FaultKind::Graphics | FaultKind::CopyEngine => 13,
            FaultKind::Halted(t) => t,
        }
    }
}

/// Why and where a channel stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelFault {
    pub channel: ChannelId,
    pub kind: FaultKind,
    /// Ring index of the GP entry being executed.
    pub gp_get: u32,
    /// Address of the faulting method group's header (0 when the entry itself was bad).
    pub pb_va: u64,
    /// Dword index of that header inside the entry's pushbuffer segment.
    pub pb_dword: u32,
    /// (subchannel, method) being executed, when the fault came from a method.
    pub method: Option<(u32, u32)>,
    pub reason: String,
}

impl fmt::Display for ChannelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} faulted ({:?}) at GP entry {}, pushbuffer {:#x} dword {}",
            self.channel, self.kind, self.gp_get, self.pb_va, self.pb_dword
        )?;
        if let Some((subc, m)) = self.method {
            write!(f, ", subchannel {subc} method {m:#x}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl ChannelFault {
    /// The fault as an [`Error::Fault`].
    pub fn to_error(&self) -> Error {
        Error::Fault(self.to_string())
    }
}

/// A snapshot of a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelState {
    /// GPGet as published.
    pub gp_get: u32,
    /// A GP entry is being executed (GPGet not yet advanced past it).
    pub busy: bool,
    /// Blocked on an unsatisfied semaphore acquire.
    pub waiting: bool,
    /// Grids launched so far (dependent QMDs included).
    pub launches: u64,
    pub fault: Option<ChannelFault>,
}

/// The emulated GPU timer: nanoseconds, aligned with the wall clock at start (as RM aligns
/// Hopper's PTIMER), strictly increasing across reads.
struct GpuClock {
    base: Instant,
    epoch_ns: u64,
    last: AtomicU64,
}

impl GpuClock {
    fn new() -> GpuClock {
        let epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        GpuClock {
            base: Instant::now(),
            epoch_ns,
            last: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        let t = self.epoch_ns + self.base.elapsed().as_nanos() as u64;
        let prev = self.last.fetch_max(t, Ordering::SeqCst);
        if prev >= t {
            self.last.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            t
        }
    }
}

/// State the GPU thread and the host side share.
struct Shared {
    arch: &'static NvArch,
    mem: Arc<dyn GpuMemory>,
    executor: Arc<dyn NvDispatchExecutor>,
    events: Arc<dyn NvEventSink>,
    channels: Mutex<HashMap<ChannelId, Arc<ChannelSlot>>>,
    next_id: AtomicU32,
    clock: GpuClock,
    tracing: AtomicBool,
    trace: Mutex<Vec<String>>,
    /// Bit n: launches with PCAS action n fault (see [`NvGpu::refuse_pcas_actions`]).
    refused_pcas: AtomicU32,
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

/// A channel as both sides see it.
struct ChannelSlot {
    desc: ChannelDesc,
    host: &'static HostClass,
    /// Engine classes allocated on the channel (SET_OBJECT may only bind these).
    engines: Mutex<Vec<u32>>,
    /// Set by a doorbell, cleared by the GPU thread when it starts looking at GPPut.
    kicked: AtomicBool,
    state: Mutex<ChannelState>,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Internal("software NV GPU: lock poisoned".into()))
}

type Msg = engine_loop::Msg<channel::Runner>;

/// How long the GPU thread sleeps between polls while a channel waits on a semaphore.
const POLL: Duration = Duration::from_micros(100);
/// Methods one channel may execute before the next channel gets a turn.
const BUDGET: usize = 1024;

/// One emulated NVIDIA GPU.
pub struct NvGpu {
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl NvGpu {
    /// Starts the GPU thread of a chip whose compute class is `arch`.
    pub fn new(
        mem: Arc<dyn GpuMemory>,
        executor: Arc<dyn NvDispatchExecutor>,
        events: Arc<dyn NvEventSink>,
        arch: &'static NvArch,
    ) -> Result<NvGpu> {
        let shared = Arc::new(Shared {
            arch,
            mem,
            executor,
            events,
            channels: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(0),
            clock: GpuClock::new(),
            tracing: AtomicBool::new(false),
            trace: Mutex::new(Vec::new()),
            refused_pcas: AtomicU32::new(0),
        });
        let (tx, rx) = unbounded();
        let thread = std::thread::Builder::new()
            .name(format!("rawgrad-nvgpu-{}", arch.name))
            .spawn(move || engine_loop::run_engines(rx, BUDGET, POLL))
            .map_err(|e| Error::Device(format!("software NV GPU: cannot start its thread: {e}")))?;
        Ok(NvGpu {
            shared,
            tx,
            thread: Some(thread),
        })
    }

    /// The chip's table entry.
    pub fn arch(&self) -> &'static NvArch {
        self.shared.arch
    }

    /// Registers a channel (RM_ALLOC of the GPFIFO class). GPGet starts at 0.
    pub fn add_channel(&self, desc: ChannelDesc) -> Result<ChannelId> {
        let Some(host) = host_class(desc.channel_class) else {
            bail!(
                InvalidArgument,
                "software NV GPU: channel class {:#x} is not a known GPFIFO class",
                desc.channel_class
            )
        };
        ensure!(
            self.shared.arch.channel_classes.contains(&host),
            InvalidArgument,
            "software NV GPU: {} does not offer {}",
            self.shared.arch.compute_class_name,
            host.name
        );
        ensure!(
            desc.entries >= 2 && desc.gpfifo_va % 8 == 0,
            InvalidArgument,
            "software NV GPU: ring of {} entries at {:#x} (need >= 2 entries, 8-byte aligned)",
            desc.entries,
            desc.gpfifo_va
        );
        let mut chans = lock(&self.shared.channels)?;
        ensure!(
            chans.values().all(|c| c.desc.token != desc.token),
            InvalidArgument,
            "software NV GPU: work submit token {:#x} is already used",
            desc.token
        );
        let id = ChannelId(self.shared.next_id.fetch_add(1, Ordering::SeqCst));
        let slot = Arc::new(ChannelSlot {
            desc,
            host,
            engines: Mutex::new(Vec::new()),
            kicked: AtomicBool::new(false),
            state: Mutex::new(ChannelState {
                gp_get: 0,
                busy: false,
                waiting: false,
                launches: 0,
                fault: None,
            }),
        });
        // USERD is not written here: the host starts from GP_GET 0 in the channel's own state
        // and writes GPGet back to USERD only as it fetches entries (uvm_channel.c: "overwritten
        // by HW for GPGET location"), and RM does not clear a USERD in FB on a GSP client
        // (kernel_channel.c: kfifoSetupUserD for SYSMEM USERD only). The client zeroes it.
        chans.insert(id, slot.clone());
        drop(chans);
        let runner = channel::Runner::new(id, slot, self.shared.clone());
        self.send(Msg::Add(Box::new(runner)))?;
        Ok(id)
    }

    /// An engine object of `class` was allocated on the channel (what SET_OBJECT may bind).
    pub fn bind_engine(&self, channel: ChannelId, class: u32) -> Result<()> {
        let arch = self.shared.arch;
        let known = match ClassKind::of_class(class) {
            Some(ClassKind::Compute) => class == arch.compute_class,
            Some(ClassKind::Copy) => arch.copy_classes.iter().any(|c| c.class == class),
            _ => false,
        };
        ensure!(
            known,
            InvalidArgument,
            "software NV GPU: {} has no engine class {class:#x}",
            arch.compute_class_name
        );
        lock(&self.slot(channel)?.engines)?.push(class);
        Ok(())
    }

    /// Stops executing a channel and forgets it (RM_FREE).
    pub fn remove_channel(&self, channel: ChannelId) -> Result<()> {
        self.slot(channel)?;
        let (ack_tx, ack_rx) = unbounded();
        self.send(Msg::Remove(channel, ack_tx))?;
        ack_rx.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            Error::Timeout(format!(
                "software NV GPU remove_channel({channel}): the GPU thread did not answer"
            ))
        })?;
        lock(&self.shared.channels)?.remove(&channel);
        Ok(())
    }

    /// The doorbell: the process wrote `token` to the usermode page (NOTIFY_CHANNEL_PENDING).
    /// Returns the channel it woke; an unknown token is an error (hardware ignores it).
    pub fn doorbell(&self, token: u32) -> Result<ChannelId> {
        let found = lock(&self.shared.channels)?
            .iter()
            .find(|(_, s)| s.desc.token == token)
            .map(|(id, s)| (*id, s.clone()));
        let Some((id, slot)) = found else {
            bail!(
                InvalidArgument,
                "software NV GPU: doorbell with unknown work submit token {token:#x}"
            )
        };
        slot.kicked.store(true, Ordering::SeqCst);
        self.send(Msg::Wake)?;
        Ok(id)
    }

    /// Stop a channel where it is, as RM's halt before a GPU reset does (kernel_rc.c
    /// `krcRcAndNotifyAllChannels`, `kfifoStartChannelHalt`): it is faulted with `reason` at its
    /// current GP entry (an earlier fault is kept) and executes nothing more. The event sink is
    /// not told: RM writes the error notifiers itself.
    pub fn halt_channel(&self, channel: ChannelId, except_type: u32, reason: &str) -> Result<()> {
        let slot = self.slot(channel)?;
        let mut s = lock(&slot.state)?;
        let f = ChannelFault {
            channel,
            kind: FaultKind::Halted(except_type),
            gp_get: s.gp_get,
            pb_va: 0,
            pb_dword: 0,
            method: None,
            reason: reason.to_string(),
        };
        self.shared.trace(|| format!("{channel} HALT {f}"));
        s.fault.get_or_insert(f);
        Ok(())
    }

    /// A snapshot of a channel.
    pub fn channel_state(&self, channel: ChannelId) -> Result<ChannelState> {
        Ok(lock(&self.slot(channel)?.state)?.clone())
    }

    /// Polls until the channel consumed every entry up to GPPut. A fault is returned as
    /// [`Error::Fault`], passing `timeout` as [`Error::Timeout`] with the channel state.
    pub fn wait_idle(&self, channel: ChannelId, timeout: Duration) -> Result<ChannelState> {
        let slot = self.slot(channel)?;
        let deadline = Instant::now() + timeout;
        loop {
            let s = lock(&slot.state)?.clone();
            if let Some(f) = &s.fault {
                return Err(f.to_error());
            }
            let put = slot.desc.userd.read_gp_put()?;
            if !s.busy && s.gp_get == put && !slot.kicked.load(Ordering::SeqCst) {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                bail!(
                    Timeout,
                    "software NV GPU: {channel} not idle after {timeout:?} (GPPut {put}): {s:?}"
                );
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Fault injection, for tests of a client's launch-action fallbacks: from now on a
    /// SEND_SIGNALING_PCAS2_B with one of `actions` (values 0..15) faults the channel with a GR
    /// exception instead of launching. (Whether a real GPU faults or hangs on an action it does
    /// not take is not documented; the client must survive either.)
    pub fn refuse_pcas_actions(&self, actions: &[u32]) {
        let mask = actions
            .iter()
            .filter(|&&a| a < 16)
            .fold(0u32, |m, &a| m | 1 << a);
        self.shared.refused_pcas.store(mask, Ordering::SeqCst);
    }

    /// The GPU timer now (nanoseconds).
    pub fn timer(&self) -> u64 {
        self.shared.clock.now()
    }

    /// Starts or stops recording one decoded line per executed method group and launch.
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

    fn slot(&self, channel: ChannelId) -> Result<Arc<ChannelSlot>> {
        match lock(&self.shared.channels)?.get(&channel) {
            Some(s) => Ok(s.clone()),
            None => bail!(InvalidArgument, "software NV GPU: no channel {channel}"),
        }
    }

    fn send(&self, m: Msg) -> Result<()> {
        self.tx
            .send(m)
            .map_err(|_| Error::Device("software NV GPU: its thread has stopped".into()))
    }
}

impl Drop for NvGpu {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
