//! Opening an NV device (after tinygrad's `NVDevice.__init__`) and [`NvBackend`], the
//! [`HcqBackend`] over it.
//!
//! [`NvBackend::open`] runs the per-GPU steps of [`super::bringup`] on a shared
//! [`NvProcess`] (`NV:n` = the n-th valid CARD_INFO entry), then: the signal page (step 14), the
//! channels (15-17), GR info (19), local memory sized from it, the channel setup pushbuffers
//! (compute: SET_OBJECT on subchannel 1, shader local memory, the local and shared windows
//! (Hopper's 4 GiB-aligned one); DMA: SET_OBJECT on subchannel 4), and a first signal round trip
//! on each channel (step 20).
//!
//! Faults: [`HcqBackend::poll_fault`] reads both channels' error notifiers (RM writes the RC error
//! there when a channel dies), so a wait fails at once naming e.g. "ROBUST_CHANNEL_GR_EXCEPTION
//! (13)"; [`HcqBackend::reset_queues`] frees the TSG and builds new channels.
//!
//! Not guaranteed: local memory grows on demand and never shrinks; the device's RM objects are
//! freed with the process's client (when the last device and buffer of the process are gone).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bringup::{self, create_channels, Channels, GrInfo};
use super::copy::NvCopyQueue;
use super::memory::{alloc_memory, MemKind, NvBuffer, NvRmDevice};
use super::process::{lock, step, NvProcess};
use super::program::{NvProgram, SLM_EXTRA};
use super::queue::NvComputeQueue;
use super::signal::{NvSignal, SignalPool, SIGNAL_SIZE, SIGNAL_SLOTS, TIMESTAMP_HZ};
use crate::device::BufferOptions;
use crate::driver::Mapping;
use crate::hcq::{HcqBackend, HcqBuffer, HcqDevice, HcqSignal, TimelinePoint};
use crate::hw::nv::arch::{NvClasses, PcasAction};
use crate::runtime::nv::channel::{CmdFence, NvChannel, SubmitIo};
use crate::runtime::nv::gpfifo::USERMODE_NOTIFY_CHANNEL_PENDING;
use crate::runtime::nv::push::{LocalMemorySetup, PushBuf};
use crate::{bail, Error, Result};

/// SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C max SM count (tinygrad since PR #6890, NVK).
const MAX_SM_COUNT: u32 = 0xFF;

/// Which channel a submission goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvEngine {
    Compute,
    Copy,
}

/// The shader local memory (SLM) backing.
struct Local {
    per_thread: u32,
    buf: Arc<NvBuffer>,
    bytes_per_tpc: u64,
    /// Earlier backings (work queued before a growth may still use them).
    old: Vec<Arc<NvBuffer>>,
}

/// One opened NV GPU (the vendor half of an [`HcqDevice`]).
pub struct NvBackend {
    name: String,
    // Channels first: the TSG goes before the memory it uses.
    chans: Mutex<Option<Channels>>,
    local: Mutex<Local>,
    signals: Arc<SignalPool>,
    doorbell: Mapping,
    classes: NvClasses,
    gr: GrInfo,
    vaspace: u32,
    seen_fault: Mutex<Option<String>>,
    /// SEND_SIGNALING_PCAS2_B action of new compute queues (a [`PcasAction`] value).
    pcas_action: AtomicU32,
    /// Both channels' USERD (GPGet, GPPut) as read before the first submit.
    first_userd: [(u32, u32); 2],
    /// The device submission under way ([`HcqBackend::fence_submissions`]): what frees the
    /// command-ring regions it copies into.
    fence: Mutex<Option<CmdFence>>,
    /// The latest timeline epoch a fence named.
    epoch: AtomicU64,
    rm: NvRmDevice,
}

/// Open `NV:index` of `proc` as an HCQ device named `name`.
pub fn open_nv_device(
    proc: &Arc<NvProcess>,
    index: usize,
    name: &str,
) -> Result<Arc<HcqDevice<NvBackend>>> {
    HcqDevice::new(NvBackend::open(proc, index, name)?)
}

/// Local memory bytes per TPC and in total for `per_thread` bytes of SLM (tinygrad
/// master's sizing): per TPC = round_up(round_up(per_thread x 32, 0x200) x MAX_WARPS_PER_SM x
/// LITTER_NUM_SM_PER_TPC, 0x8000); total = round_up(per TPC x the TPC slots, 0x20000). On an
/// H200 (64 warps, 2 SMs per TPC, 8 x 9 TPC slots) and the 0x240 bytes every thread needs, that
/// is 0x240000 per TPC and 162 MiB in all.
pub fn local_sizes(gr: &GrInfo, per_thread: u32) -> (u64, u64) {
    let per_warp = (u64::from(per_thread) * 32).next_multiple_of(0x200);
    let per_tpc = (per_warp * u64::from(gr.max_warps_per_sm) * u64::from(gr.sms_per_tpc()))
        .next_multiple_of(0x8000);
    (
        per_tpc,
        (per_tpc * u64::from(gr.tpc_slots())).next_multiple_of(0x20000),
    )
}

/// Step 14: the process's signal page (allocated by its first device, mapped on the others).
fn signal_pool(rm: &NvRmDevice) -> Result<Arc<SignalPool>> {
    let mut shared = lock(&rm.proc.signal_pool);
    if let Some(p) = shared.upgrade() {
        p.buf.map_to(rm)?;
        return Ok(p);
    }
    let p = SignalPool::new(alloc_memory(
        rm,
        SIGNAL_SLOTS * SIGNAL_SIZE,
        MemKind::Sysmem,
        true,
    )?)?;
    *shared = Arc::downgrade(&p);
    Ok(p)
}

impl NvBackend {
    /// The bring-up of `NV:index` on `proc` (steps 6-20; the order of tinygrad's
    /// `NVDevice.__init__`).
    pub fn open(proc: &Arc<NvProcess>, index: usize, name: &str) -> Result<NvBackend> {
        let mut rm = bringup::open_rm_device(proc, index)?;
        let classes = bringup::classes(&rm)?;
        let (_usermode, doorbell) = bringup::map_usermode(&rm, &classes)?;
        let vaspace = bringup::vaspace_and_uvm(&mut rm)?;
        let signals = step(
            "signal page",
            |p: &Arc<SignalPool>| format!("{:#x}", p.buf.va()),
            signal_pool(&rm),
        )?;
        let chans = create_channels(&rm, &classes, vaspace)?;
        let first_userd = step(
            "USERD before the first submit",
            |u: &[(u32, u32); 2]| {
                format!(
                    "compute GPGet {} GPPut {}, DMA GPGet {} GPPut {}",
                    u[0].0, u[0].1, u[1].0, u[1].1
                )
            },
            chans.userd_now(),
        )?;
        let gr = bringup::gr_info(&rm)?;
        if !classes.arch.has_sm(gr.sm()) {
            bail!(
                Device,
                "{name}: GR info reports sm_{} but the class list says {}",
                gr.sm(),
                classes.arch.compute_class_name
            );
        }
        let per_thread = SLM_EXTRA.next_multiple_of(32);
        let (bytes_per_tpc, total) = local_sizes(&gr, per_thread);
        let lbuf = Arc::new(alloc_memory(&rm, total as usize, MemKind::Vram, false)?);
        let dev = NvBackend {
            name: name.to_string(),
            chans: Mutex::new(Some(chans)),
            local: Mutex::new(Local {
                per_thread,
                buf: lbuf,
                bytes_per_tpc,
                old: Vec::new(),
            }),
            signals,
            doorbell,
            classes,
            gr,
            vaspace,
            seen_fault: Mutex::new(None),
            pcas_action: AtomicU32::new(classes.arch.pcas_action as u32),
            first_userd,
            fence: Mutex::new(None),
            epoch: AtomicU64::new(0),
            rm,
        };
        step(
            "channel setup + first signal",
            |_| String::new(),
            dev.setup_channels(),
        )?;
        Ok(dev)
    }

    /// Step 20: the setup pushbuffers of both channels, then a signal round trip on each.
    fn setup_channels(&self) -> Result<()> {
        let mut c = PushBuf::new(self.classes);
        {
            let l = lock(&self.local);
            c.compute_setup(&LocalMemorySetup {
                addr: l.buf.va(),
                bytes_per_tpc: l.bytes_per_tpc,
                max_sm_count: MAX_SM_COUNT,
            })?;
        }
        let sig = NvSignal::new(&self.signals, 0)?;
        c.signal(sig.va(), 1)?;
        self.submit(NvEngine::Compute, c.dwords())?;
        let mut d = PushBuf::new(self.classes);
        d.copy_setup()?;
        // The DMA channel waits for the compute channel's release, then releases 2.
        d.wait(sig.va(), 1, false)?;
        d.copy_signal(sig.va(), 2, false)?;
        self.submit(NvEngine::Copy, d.dwords())?;
        self.spin_for(&sig, 2, "first signal round trip")
    }

    /// Wait for `sig >= value` outside the HCQ timeline (bring-up), failing fast on a dead
    /// channel.
    pub fn spin_for(&self, sig: &NvSignal, value: u64, what: &str) -> Result<()> {
        let deadline = Instant::now() + crate::hcq::wait_timeout();
        loop {
            if sig.value()? >= value {
                return Ok(());
            }
            if let Some(f) = self.poll_fault() {
                bail!(Fault, "{}: {what}: {f}", self.name);
            }
            if Instant::now() >= deadline {
                bail!(
                    Timeout,
                    "{}: {what}: {} is {}, waited for >= {value}; {}",
                    self.name,
                    sig.describe(),
                    sig.value()?,
                    self.status_report()
                );
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// The classes in use.
    pub fn classes(&self) -> NvClasses {
        self.classes
    }

    /// The PCAS action new compute queues launch with.
    pub fn pcas_action(&self) -> PcasAction {
        let v = self.pcas_action.load(Ordering::Relaxed);
        PcasAction::from_bits(v).unwrap_or(self.classes.arch.pcas_action)
    }

    /// Launch with `action` from now on (queues made before keep theirs); it must schedule.
    pub fn set_pcas_action(&self, action: PcasAction) -> Result<()> {
        if !action.schedules() {
            bail!(
                InvalidArgument,
                "{}: PCAS action {} ({}) does not schedule the grid",
                self.name,
                action as u32,
                action.name()
            );
        }
        self.pcas_action.store(action as u32, Ordering::Relaxed);
        Ok(())
    }

    /// Both channels' (GPGet, GPPut) in USERD as read before the first submit (compute, DMA).
    pub fn first_userd(&self) -> [(u32, u32); 2] {
        self.first_userd
    }

    /// The device's SM version (90 on Hopper).
    pub fn sm(&self) -> u32 {
        self.gr.sm()
    }

    /// GR info.
    pub fn gr(&self) -> GrInfo {
        self.gr
    }

    /// The device name.
    pub fn name_str(&self) -> &str {
        &self.name
    }

    /// The RM device (process, handles, UUID).
    pub fn rm(&self) -> &NvRmDevice {
        &self.rm
    }

    /// The vaspace handle.
    pub fn vaspace(&self) -> u32 {
        self.vaspace
    }

    /// The process.
    pub fn process(&self) -> &Arc<NvProcess> {
        &self.rm.proc
    }

    /// `f` of both channels (compute, DMA), for the accessors below.
    fn both<T>(&self, f: impl Fn(&NvChannel) -> T) -> Result<(T, T)> {
        let g = lock(&self.chans);
        let c = g
            .as_ref()
            .ok_or_else(|| Error::Device("no channels".into()))?;
        Ok((f(&c.compute), f(&c.dma)))
    }

    /// (compute, DMA) work submit tokens.
    pub fn tokens(&self) -> Result<(u32, u32)> {
        self.both(|c| c.token)
    }

    /// (compute, DMA) GP entries submitted so far.
    pub fn gp_puts(&self) -> Result<(u64, u64)> {
        self.both(|c| c.put())
    }

    /// CPU-mapped VRAM for code.
    pub fn alloc_code(&self, size: usize) -> Result<NvBuffer> {
        alloc_memory(&self.rm, size, MemKind::Vram, true)
    }

    /// (SLM bytes per thread, bytes per TPC, bytes of the backing) of the local memory now.
    pub fn local_memory(&self) -> (u32, u64, usize) {
        let l = lock(&self.local);
        (l.per_thread, l.bytes_per_tpc, l.buf.size())
    }

    /// Signal slots in use.
    pub fn signals_used(&self) -> usize {
        self.signals.used()
    }

    /// Local memory for `per_thread` bytes of SLM per thread, grown (and the compute channel
    /// told) when needed.
    pub fn ensure_local_memory(&self, per_thread: u32) -> Result<Arc<NvBuffer>> {
        let mut l = lock(&self.local);
        if l.per_thread >= per_thread {
            return Ok(l.buf.clone());
        }
        let (bytes_per_tpc, total) = local_sizes(&self.gr, per_thread);
        let buf = Arc::new(alloc_memory(
            &self.rm,
            total as usize,
            MemKind::Vram,
            false,
        )?);
        let mut b = PushBuf::new(self.classes);
        b.set_shader_local_memory(buf.va())?;
        b.set_shader_local_memory_non_throttled(bytes_per_tpc, MAX_SM_COUNT)?;
        self.submit(NvEngine::Compute, b.dwords())?;
        let old = std::mem::replace(&mut l.buf, buf.clone());
        l.old.push(old);
        (l.per_thread, l.bytes_per_tpc) = (per_thread, bytes_per_tpc);
        Ok(buf)
    }

    /// Copy `dwords` into `engine`'s channel and ring its doorbell.
    pub fn submit(&self, engine: NvEngine, dwords: &[u32]) -> Result<()> {
        self.with_channel(engine, |ch, io| ch.submit(dwords, io))
    }

    /// Point one GP entry of `engine`'s channel at `dwords` pushbuffer dwords at `va` (a bound
    /// queue's own GPU buffer) and ring its doorbell; nothing is copied.
    pub fn submit_at(&self, engine: NvEngine, va: u64, dwords: usize) -> Result<()> {
        self.with_channel(engine, |ch, io| ch.submit_at(va, dwords, io))
    }

    /// (compute, DMA) byte offsets in the command rings where the next copied pushbuffer goes.
    pub fn cmd_positions(&self) -> Result<(usize, usize)> {
        self.both(|c| c.cmd_pos())
    }

    /// Runs `f` on `engine`'s channel with what a submission writes through.
    fn with_channel(
        &self,
        engine: NvEngine,
        f: impl FnOnce(&mut NvChannel, &SubmitIo) -> Result<()>,
    ) -> Result<()> {
        let mut g = lock(&self.chans);
        let Some(c) = g.as_mut() else {
            bail!(
                Device,
                "{}: the channels are gone (a reset failed)",
                self.name
            );
        };
        let Some(gpfifo) = c.gpfifo.cpu() else {
            bail!(Internal, "{}: GPFIFO area is not CPU-mapped", self.name);
        };
        let io = SubmitIo {
            drv: &self.rm.proc.drv,
            gpfifo,
            doorbell: self.doorbell.addr() + USERMODE_NOTIFY_CHANNEL_PENDING,
            fence: lock(&self.fence).clone(),
            epoch: self.epoch.load(Ordering::Acquire),
        };
        let ch = match engine {
            NvEngine::Compute => &mut c.compute,
            NvEngine::Copy => &mut c.dma,
        };
        f(ch, &io)
    }

    /// The RC errors in the channels' error notifiers.
    fn rc_errors(&self) -> Option<String> {
        let g = lock(&self.chans);
        let c = g.as_ref()?;
        let errs: Vec<String> = [&c.compute, &c.dma]
            .iter()
            .filter_map(|ch| ch.rc_error())
            .collect();
        (!errs.is_empty()).then(|| errs.join("; "))
    }
}

impl HcqBackend for NvBackend {
    type Signal = NvSignal;
    type ComputeQueue = NvComputeQueue;
    type CopyQueue = NvCopyQueue;
    type Program = NvProgram;
    type Buffer = NvBuffer;

    fn name(&self) -> &str {
        &self.name
    }

    fn fence_submissions(&self, fence: Option<(&NvSignal, TimelinePoint)>) {
        if let Some((_, p)) = fence {
            self.epoch.fetch_max(p.epoch, Ordering::AcqRel);
        }
        *lock(&self.fence) = fence.map(|(sig, point)| CmdFence {
            sig: sig.clone(),
            point,
        });
    }

    fn new_signal(&self, value: u64, _with_event: bool) -> Result<NvSignal> {
        NvSignal::new(&self.signals, value)
    }

    fn compute_queue(&self) -> NvComputeQueue {
        NvComputeQueue::with_action(self.classes, self.pcas_action())
    }

    fn copy_queue(&self) -> NvCopyQueue {
        NvCopyQueue::new(self.classes)
    }

    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<NvBuffer> {
        let (kind, cpu) = if opts.host {
            (MemKind::Host, true)
        } else if opts.cpu_access && opts.uncached {
            (MemKind::Sysmem, true)
        } else {
            (MemKind::Vram, opts.cpu_access)
        };
        alloc_memory(&self.rm, size, kind, cpu)
    }

    fn alloc_kernarg_memory(&self, size: usize) -> Result<NvBuffer> {
        alloc_memory(&self.rm, size, MemKind::Vram, true)
    }

    fn map_peer(&self, buf: &NvBuffer) -> Result<()> {
        if !Arc::ptr_eq(buf.process(), &self.rm.proc) {
            bail!(
                Device,
                "{}: {buf:?} belongs to another NV process (another driver instance)",
                self.name
            );
        }
        buf.map_to(&self.rm)
    }

    fn timestamp_hz(&self) -> f64 {
        TIMESTAMP_HZ
    }

    fn status_report(&self) -> String {
        let g = lock(&self.chans);
        let Some(c) = g.as_ref() else {
            return "no channels".into();
        };
        let Some(gpfifo) = c.gpfifo.cpu() else {
            return "GPFIFO area not CPU-mapped".into();
        };
        let mut parts = vec![c.compute.describe(gpfifo), c.dma.describe(gpfifo)];
        parts.extend([&c.compute, &c.dma].iter().filter_map(|ch| ch.rc_error()));
        parts.join("; ")
    }

    fn poll_fault(&self) -> Option<String> {
        let mut seen = lock(&self.seen_fault);
        if seen.is_none() {
            *seen = self.rc_errors();
        }
        seen.clone()
    }

    fn reset_queues(&self) -> Result<()> {
        {
            let mut g = lock(&self.chans);
            // The old TSG goes first (the software GPU or hardware stops its channels).
            *g = None;
            *g = Some(create_channels(&self.rm, &self.classes, self.vaspace)?);
        }
        *lock(&self.seen_fault) = None;
        self.setup_channels()
    }

    fn take_deferred_errors(&self) -> Vec<String> {
        self.rm.proc.take_errors()
    }
}
