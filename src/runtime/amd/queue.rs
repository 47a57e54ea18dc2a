//! The PM4 compute queue: [`HwRing`] (one KFD hardware queue: ring, rptr/wptr page, EOP and CWSR
//! buffers sized exactly as Linux >= 6.12 demands, the doorbell) and [`AmdComputeQueue`] (the
//! HCQ compute command list: `hcq`'s shared verbs over the PM4 encoder, [`AmdComputeEncoder`]: a
//! [`Pm4Buf`] that a graph binds, [`super::bound`], so its submissions are one INDIRECT_BUFFER
//! on the ring). The
//! encoders of both AMD engines share [`AmdStream`] (signal, wait, timestamp and their patches;
//! `copy.rs` adds SDMA's).
//!
//! Submission: wait until the ring has room (`wptr + n - rptr <= ring`, polling the rptr the CP
//! publishes, bounded by the wait timeout), write the packets (compute rings wrap dword by dword;
//! SDMA rings pad to the end instead of splitting a packet, `copy.rs`), store the 64-bit wptr,
//! then [`crate::driver::Driver::write_doorbell`] (which fences first). Pointers and doorbell
//! values count dwords on compute queues and bytes on SDMA queues.
//!
//! Not guaranteed: a ring is used by one thread at a time (the backend keeps it under a lock).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::bound::BoundPm4;
use super::memory::{alloc_memory, AmdBuffer, MemKind};
use super::process::{lock, KfdCore};
use super::program::AmdProgram;
use super::signal::AmdSignal;
use super::AmdBackend;
use crate::driver::kfd::ops;
use crate::driver::kfd::topology::QueueBufferSizes;
use crate::driver::kfd::KFD_DOORBELL_PROCESS_SLICE;
use crate::hcq::device::device_wait_timeout;
use crate::hcq::{
    ComputeEncoder, HcqBuffer, HcqEncoder, HcqLaunch, HcqQueue, HcqSignal, KeepAlive,
};
use crate::hw::amd::targets::GfxTarget;
use crate::runtime::amd::pm4::patch::{check_global, check_local};
use crate::runtime::amd::pm4::{
    copy_dwords_to_ring, indirect_buffer_packet, ExecPatch, MailboxPatch, PatchPoint, Pm4Buf,
    SignalEvent, SignalPatch, TimestampAddrPatch, ValuePatch, WaitPatch,
};
use crate::runtime::amd::sdma::SdmaBuf;
use crate::sys::kfd::*;
use crate::{bail, ensure, Error, Result};

/// Which engine a ring feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingKind {
    /// PM4 compute (pointers in dwords).
    Compute,
    /// SDMA (pointers in bytes).
    Sdma,
}

impl RingKind {
    fn unit(self) -> u64 {
        match self {
            RingKind::Compute => 4,
            RingKind::Sdma => 1,
        }
    }
}

/// One KFD hardware queue and its buffers.
pub struct HwRing {
    core: Arc<KfdCore>,
    pub(crate) kind: RingKind,
    args: kfd_ioctl_create_queue_args,
    pub(crate) queue_id: u32,
    live: bool,
    /// CPU address of the doorbell page (0 until attached).
    doorbell_page: u64,
    doorbell_offset: u64,
    pub(crate) wptr: u64,
    ring: AmdBuffer,
    rw: AmdBuffer,
    _eop: Option<AmdBuffer>,
    _cwsr: Option<AmdBuffer>,
}

impl HwRing {
    /// Allocate the buffers and CREATE_QUEUE. Compute rings need the node's `sizes`.
    pub fn create(
        core: &Arc<KfdCore>,
        gpu_id: u32,
        kind: RingKind,
        ring_size: usize,
        sizes: &QueueBufferSizes,
    ) -> Result<HwRing> {
        let ring = alloc_memory(core, gpu_id, ring_size, MemKind::GttUncached, true)?;
        let rw = alloc_memory(core, gpu_id, 4096, MemKind::GttUncached, true)?;
        let mut args = kfd_ioctl_create_queue_args {
            ring_base_address: ring.va(),
            write_pointer_address: rw.va(),
            read_pointer_address: rw.va() + 8,
            ring_size: ring.size() as u32,
            gpu_id,
            queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
            queue_percentage: KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: KFD_MAX_QUEUE_PRIORITY,
            ..Default::default()
        };
        let (mut eop, mut cwsr) = (None, None);
        if kind == RingKind::Compute {
            let e = alloc_memory(
                core,
                gpu_id,
                sizes.eop_buffer_size as usize,
                MemKind::Vram,
                false,
            )?;
            let c = alloc_memory(
                core,
                gpu_id,
                sizes.cwsr_total_size as usize,
                MemKind::Vram,
                false,
            )?;
            args.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
            args.eop_buffer_address = e.va();
            args.eop_buffer_size = sizes.eop_buffer_size;
            args.ctx_save_restore_address = c.va();
            args.ctx_save_restore_size = sizes.cwsr_size;
            args.ctl_stack_size = sizes.ctl_stack_size;
            (eop, cwsr) = (Some(e), Some(c));
        }
        let mut r = HwRing {
            core: core.clone(),
            kind,
            args,
            queue_id: 0,
            live: false,
            doorbell_page: 0,
            doorbell_offset: 0,
            wptr: 0,
            ring,
            rw,
            _eop: eop,
            _cwsr: cwsr,
        };
        r.create_queue()?;
        Ok(r)
    }

    fn create_queue(&mut self) -> Result<()> {
        let mut a = self.args;
        ops::create_queue(self.core.drv.as_ref(), self.core.kfd, &mut a)?;
        self.queue_id = a.queue_id;
        self.doorbell_offset = a.doorbell_offset;
        self.live = true;
        Ok(())
    }

    /// The `/dev/kfd` mmap offset of the doorbell page this queue's doorbell is on.
    pub fn doorbell_page_offset(&self) -> u64 {
        self.doorbell_offset & !(KFD_DOORBELL_PROCESS_SLICE as u64 - 1)
    }

    /// Use the doorbell page mapped at CPU address `page`.
    pub fn attach_doorbell(&mut self, page: u64) {
        self.doorbell_page = page;
    }

    fn doorbell(&self) -> u64 {
        self.doorbell_page + (self.doorbell_offset & (KFD_DOORBELL_PROCESS_SLICE as u64 - 1))
    }

    fn units(&self) -> u64 {
        self.ring.size() as u64 / self.kind.unit()
    }

    /// The read pointer the engine published.
    pub fn rptr(&self) -> Result<u64> {
        self.rw_view()?.load_u64(8, Ordering::Acquire)
    }

    fn rw_view(&self) -> Result<&crate::driver::Mapping> {
        self.rw
            .cpu()
            .ok_or_else(|| Error::Internal("queue rptr/wptr page is not CPU-mapped".into()))
    }

    fn ring_view(&self) -> Result<&crate::driver::Mapping> {
        self.ring
            .cpu()
            .ok_or_else(|| Error::Internal("queue ring is not CPU-mapped".into()))
    }

    /// Poll until `need` more units fit behind the engine's read pointer.
    fn wait_room(&self, need: u64) -> Result<()> {
        if need > self.units() {
            bail!(
                InvalidArgument,
                "{:?} queue {}: a submission of {need} units exceeds the {}-unit ring",
                self.kind,
                self.queue_id,
                self.units()
            );
        }
        let start = Instant::now();
        let mut tries = 0u32;
        loop {
            let rptr = self.rptr()?;
            if self.wptr + need - rptr.min(self.wptr) <= self.units() {
                return Ok(());
            }
            tries = tries.saturating_add(1);
            // A queue that faulted never frees room: say so at once, with the driver's report.
            let report = self.core.drv.queue_report(self.args.gpu_id, self.queue_id);
            if let Some(f) = report.as_ref().and_then(|r| r.fault.as_ref()) {
                bail!(
                    Fault,
                    "{:?} queue {}: ring full (wptr {} rptr {rptr}, {need} more units) and the queue faulted: {f}",
                    self.kind,
                    self.queue_id,
                    self.wptr
                );
            }
            if start.elapsed() > device_wait_timeout() {
                let seen = report.map_or_else(String::new, |r| format!(" [driver: {r}]"));
                bail!(
                    Timeout,
                    "{:?} queue {}: ring full: wptr {} rptr {rptr}, {need} more units do not fit the {}-unit ring{seen}",
                    self.kind,
                    self.queue_id,
                    self.wptr,
                    self.units()
                );
            }
            if tries < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Publish the new write pointer and ring the doorbell.
    fn kick(&mut self, wptr: u64) -> Result<()> {
        if self.doorbell_page == 0 {
            bail!(
                Internal,
                "queue {}: no doorbell page attached",
                self.queue_id
            );
        }
        self.rw_view()?.store_u64(0, wptr, Ordering::Release)?;
        self.wptr = wptr;
        self.core.drv.write_doorbell(self.doorbell(), wptr)
    }

    /// Write PM4 dwords and ring the doorbell.
    pub fn submit_pm4(&mut self, b: &Pm4Buf) -> Result<()> {
        self.submit_pm4_dwords(b.dwords())
    }

    /// Write one INDIRECT_BUFFER executing `dwords` dwords of PM4 at `va` (a bound queue's image,
    /// [`super::bound`]) and ring the doorbell.
    pub fn submit_ib(&mut self, va: u64, dwords: usize) -> Result<()> {
        self.submit_pm4_dwords(&indirect_buffer_packet(va, dwords)?)
    }

    fn submit_pm4_dwords(&mut self, d: &[u32]) -> Result<()> {
        if d.is_empty() {
            return Ok(());
        }
        self.wait_room(d.len() as u64)?;
        let view = self.ring_view()?;
        let w = copy_dwords_to_ring(d, self.units(), self.wptr, &mut |at, d| {
            view.write_u32s(at as usize * 4, d)
        })?;
        self.kick(w)
    }

    /// Write SDMA packets (with the no-straddle padding) and ring the doorbell.
    pub fn submit_sdma(&mut self, b: &SdmaBuf) -> Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        let ring = self.ring.size() as u64;
        self.wait_room(b.ring_bytes_needed(ring, self.wptr)?)?;
        let view = self.ring_view()?;
        let w = b.copy_to_ring(ring, self.wptr, &mut |at, d| {
            view.write_u32s(at as usize, d)
        })?;
        self.kick(w)
    }

    /// Throw the queue away and create it again on the same buffers (after a hang or fault).
    pub fn reset(&mut self) -> Result<()> {
        self.destroy()?;
        self.rw_view()?.fill(0, 16, 0)?;
        self.wptr = 0;
        let page = self.doorbell_page_offset();
        self.create_queue()?;
        if self.doorbell_page_offset() != page {
            bail!(
                Device,
                "queue {}: recreated on doorbell page {:#x}, not {page:#x}",
                self.queue_id,
                self.doorbell_page_offset()
            );
        }
        Ok(())
    }

    fn destroy(&mut self) -> Result<()> {
        if self.live {
            self.live = false;
            ops::destroy_queue(self.core.drv.as_ref(), self.core.kfd, self.queue_id)?;
        }
        Ok(())
    }

    /// `compute queue 3: wptr 120 rptr 100 (dwords)`.
    pub fn describe(&self) -> String {
        let rptr = self
            .rptr()
            .map_or_else(|e| format!("unreadable ({e})"), |r| r.to_string());
        let unit = if self.kind == RingKind::Compute {
            "dwords"
        } else {
            "bytes"
        };
        format!(
            "{} queue {}: wptr {} rptr {rptr} ({unit})",
            if self.kind == RingKind::Compute {
                "compute"
            } else {
                "SDMA"
            },
            self.queue_id,
            self.wptr
        )
    }
}

impl Drop for HwRing {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            self.core
                .defer_error(format!("destroying queue {}: {e}", self.queue_id));
        }
    }
}

/// The compute engine's encoder: a [`Pm4Buf`] and, once bound, its images in GPU memory.
pub struct AmdComputeEncoder {
    buf: Pm4Buf,
    bound: Option<Mutex<BoundPm4>>,
}

impl AmdComputeEncoder {
    /// The PM4 dwords built so far.
    pub fn pm4(&self) -> &Pm4Buf {
        &self.buf
    }

    /// The queue's images in GPU memory, once bound ([`HcqEncoder::bind`]).
    pub fn bound(&self) -> Option<&Mutex<BoundPm4>> {
        self.bound.as_ref()
    }

    /// Rewrite a patch point: in the host dwords, and logged for the images once bound (every
    /// patch of the compute queue goes through here).
    fn patch_pm4<P: PatchPoint>(&mut self, p: &P, v: P::Value) -> Result<()> {
        match &mut self.bound {
            Some(b) => b
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .patch(&mut self.buf, p, v),
            None => self.buf.patch(p, v),
        }
    }
}

/// The HCQ compute command list: the shared queue verbs over the PM4 encoder.
pub type AmdComputeQueue = HcqQueue<AmdBackend, AmdComputeEncoder>;

impl AmdComputeQueue {
    /// An empty list for `target`.
    pub fn new(target: &'static GfxTarget) -> AmdComputeQueue {
        HcqQueue::from_encoder(AmdComputeEncoder {
            buf: Pm4Buf::new(target),
            bound: None,
        })
    }
}

/// What AMD's two command streams (PM4 on the compute ring, SDMA on the copy ring) encode alike:
/// the signal/wait/timestamp commands with the same patch-point types, and their submission.
pub trait AmdStream: Send + 'static {
    /// Wait until the dword at `addr` is `>= value`.
    fn wait_cmd(&mut self, addr: u64, value: u64) -> Result<WaitPatch>;
    /// Write `value` to `addr` (and raise `event`).
    fn signal_cmd(&mut self, addr: u64, value: u64, ev: Option<SignalEvent>)
        -> Result<SignalPatch>;
    /// Write the GPU clock to `addr`.
    fn timestamp_cmd(&mut self, addr: u64) -> Result<TimestampAddrPatch>;
    /// Rewrite a field.
    fn patch_at<P: PatchPoint>(&mut self, p: &P, v: P::Value) -> Result<()>;
    /// Rewrite many 32-bit values (a replay's waits and signals), in order, straight into the
    /// dwords (no call per dword; logged for the images once bound); stops at the first error.
    fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()>;
    /// The dwords so far.
    fn stream(&self) -> &[u32];
    /// Hand the dwords to `dev`'s ring of this engine.
    fn submit_to(&self, dev: &AmdBackend) -> Result<()>;
    /// Move the dwords into `dev`'s memory of their own ([`HcqEncoder::bind`]); `None` where
    /// this engine's queues stay unbound (the default).
    fn bind_to(&mut self, _dev: &AmdBackend) -> Result<Option<KeepAlive>> {
        Ok(None)
    }
    /// Dwords the last submission rewrote in its bound image (`None`: not bound, the default).
    fn bound_written(&self) -> Option<usize> {
        None
    }
}

impl AmdStream for AmdComputeEncoder {
    fn wait_cmd(&mut self, addr: u64, value: u64) -> Result<WaitPatch> {
        self.buf.wait(addr, value)
    }
    fn signal_cmd(&mut self, addr: u64, v: u64, ev: Option<SignalEvent>) -> Result<SignalPatch> {
        self.buf.signal(addr, v, ev)
    }
    fn timestamp_cmd(&mut self, addr: u64) -> Result<TimestampAddrPatch> {
        self.buf.timestamp(addr)
    }
    fn patch_at<P: PatchPoint>(&mut self, p: &P, v: P::Value) -> Result<()> {
        self.patch_pm4(p, v)
    }
    /// Once bound: one batch of logged direct writes ([`BoundPm4::patch_values`]).
    fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()> {
        match &mut self.bound {
            Some(b) => b
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .patch_values(&mut self.buf, points),
            None => self.buf.patch_values(points, None),
        }
    }
    fn stream(&self) -> &[u32] {
        self.buf.dwords()
    }
    fn submit_to(&self, dev: &AmdBackend) -> Result<()> {
        match &self.bound {
            Some(b) => {
                let (va, n) = lock(b).take_next(self.buf.dwords())?;
                dev.submit_compute_ib(va, n)
            }
            None => dev.submit_compute(&self.buf),
        }
    }
    fn bound_written(&self) -> Option<usize> {
        self.bound.as_ref().map(|b| lock(b).last_written())
    }
    /// Binds unless the queue is empty or longer than one INDIRECT_BUFFER takes (then it stays
    /// unbound and every submission copies it into the ring).
    fn bind_to(&mut self, dev: &AmdBackend) -> Result<Option<KeepAlive>> {
        ensure!(
            self.bound.is_none(),
            InvalidArgument,
            "PM4 compute queue: bound twice"
        );
        if !BoundPm4::fits(self.buf.len()) {
            return Ok(None);
        }
        let (b, keep) = BoundPm4::new(dev, self.buf.dwords())?;
        self.bound = Some(Mutex::new(b));
        Ok(Some(keep))
    }
}

impl<S: AmdStream> HcqEncoder<AmdBackend> for S {
    type WaitPatch = WaitPatch;
    type SignalPatch = SignalPatch;
    type TimestampPatch = TimestampAddrPatch;

    fn wait(&mut self, sig: &AmdSignal, value: u64) -> Result<WaitPatch> {
        self.wait_cmd(sig.va(), value)
    }

    fn signal(&mut self, sig: &AmdSignal, value: u64) -> Result<SignalPatch> {
        self.signal_cmd(sig.va(), value, sig.event())
    }

    fn timestamp(&mut self, sig: &AmdSignal) -> Result<TimestampAddrPatch> {
        self.timestamp_cmd(sig.va() + 8)
    }

    fn update_wait(
        &mut self,
        p: &WaitPatch,
        sig: Option<&AmdSignal>,
        v: Option<u64>,
    ) -> Result<()> {
        if let Some(s) = sig {
            self.patch_at(&p.addr, s.va())?;
        }
        if let Some(v) = v {
            self.patch_at(&p.value, v)?;
        }
        Ok(())
    }

    fn update_signal(
        &mut self,
        p: &SignalPatch,
        sig: Option<&AmdSignal>,
        v: Option<u64>,
    ) -> Result<()> {
        if let Some(s) = sig {
            if let Some((mp, ev)) = signal_event_update(p, s)? {
                self.patch_at(&mp, ev)?;
            }
            self.patch_at(&p.addr, s.va())?;
        }
        if let Some(v) = v {
            self.patch_at(&p.value, v)?;
        }
        Ok(())
    }

    fn update_values<'a>(
        &mut self,
        waits: impl IntoIterator<Item = (&'a WaitPatch, u64)>,
        signals: impl IntoIterator<Item = (&'a SignalPatch, u64)>,
    ) -> Result<()> {
        self.patch_values(waits.into_iter().map(|(p, v)| (&p.value, v)))?;
        self.patch_values(signals.into_iter().map(|(p, v)| (&p.value, v)))
    }

    fn submit(&self, dev: &AmdBackend) -> Result<()> {
        self.submit_to(dev)
    }

    fn bind(&mut self, dev: &AmdBackend) -> Result<Option<KeepAlive>> {
        self.bind_to(dev)
    }

    fn last_written(&self) -> Option<usize> {
        self.bound_written()
    }

    fn dwords(&self) -> &[u32] {
        self.stream()
    }
}

/// The event part of pointing a signal command at `s`: both must have an event or neither (the
/// packet count differs otherwise).
fn signal_event_update(
    p: &SignalPatch,
    s: &AmdSignal,
) -> Result<Option<(MailboxPatch, SignalEvent)>> {
    match (&p.event, s.event()) {
        (Some(mp), Some(ev)) => Ok(Some((*mp, ev))),
        (None, None) => Ok(None),
        _ => bail!(
            InvalidArgument,
            "update_signal: {} and the recorded signal differ in having an event",
            s.describe()
        ),
    }
}

/// A launch's patch points: the PM4 fields (kernarg and dispatch pointers in the user SGPRs,
/// DISPATCH_DIRECT's workgroup counts, COMPUTE_NUM_THREAD_X/Y/Z) and the program, which keeps
/// the dispatch packet (dims too) in the kernarg block when the kernel reads one.
#[derive(Clone, Debug)]
pub struct AmdExecPatch {
    pub pm4: ExecPatch,
    pub prg: Arc<AmdProgram>,
}

impl ComputeEncoder<AmdBackend> for AmdComputeEncoder {
    type ExecPatch = AmdExecPatch;

    fn memory_barrier(&mut self) -> Result<()> {
        self.buf.memory_barrier()
    }

    fn exec(&mut self, prg: &Arc<AmdProgram>, launch: &HcqLaunch) -> Result<AmdExecPatch> {
        let pm4 = self.buf.exec(prg.exec_program(), &prg.exec_args(launch))?;
        Ok(AmdExecPatch {
            pm4,
            prg: prg.clone(),
        })
    }

    fn update_exec(&mut self, p: &AmdExecPatch, launch: &HcqLaunch) -> Result<()> {
        check_global(launch.global)?;
        check_local(launch.local)?;
        let a = p.prg.exec_args(launch);
        if let Some(kp) = &p.pm4.kernarg {
            self.patch_pm4(kp, a.kernargs)?;
        }
        if let (Some(dp), Some(va)) = (&p.pm4.dispatch_ptr, a.dispatch_ptr) {
            p.prg.write_dispatch_packet(launch)?;
            self.patch_pm4(dp, va)?;
        }
        self.patch_pm4(&p.pm4.dims.global, launch.global)?;
        self.patch_pm4(&p.pm4.dims.local, launch.local)
    }
}
