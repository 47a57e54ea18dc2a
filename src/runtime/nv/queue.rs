//! The NV compute queue (tinygrad's NVComputeQueue): a [`PushBuf`] for the compute
//! channel. Verbs: `wait` = host SEM acquire (ACQ_CIRC_GEQ, 64-bit), `signal` = host SEM release
//! with RELEASE_WFI and a nanosecond timestamp, `timestamp` = the same release with payload 0
//! (the timestamp lands at +8 of the signal), `memory_barrier` = INVALIDATE_SHADER_CACHES_NO_WFI
//! (instruction, global data, constant), `exec` = SEND_PCAS_A with the launch's QMD (written by
//! [`super::program::NvProgram`] into the kernargs block) + SEND_SIGNALING_PCAS2_B. The verbs are
//! `hcq`'s [`HcqQueue`] over [`NvComputeEncoder`]; both channels' encoders share [`NvStream`].
//!
//! Patch points: waits and signals rewrite the SEM group in place (every patch goes through
//! [`patch_stream`]: once bound, the changed dwords are logged for the bound copies,
//! [`BoundPush::patch`]); `update_exec` points
//! SEND_PCAS_A at the new launch's QMD and writes the launch's dims where the block keeps them
//! (the QMD's grid and block fields, cbuf0's %ntid/%nctaid: [`NvProgram::write_dims`]).
//!
//! The PCAS action: the device's ([`NvBackend::pcas_action`], the arch's default until the first
//! run or a caller picks a fallback), given to the queue when it is made; `NV_PCAS_ACTION=<n>`
//! replaces it per launch (Hopper's is unconfirmed, `clcbc0.h` PCAS_ACTION: NVK 3, tinygrad 9, a
//! libcuda trace 0xA); it must name an action that schedules the grid.
//!
//! Not guaranteed: `update_exec` writes the kernargs block at once (the dims live in memory, not
//! in the pushbuffer): the GPU must be done with an earlier submission of the launch.

use std::sync::{Arc, Mutex};

use super::bound::BoundPush;
use super::device::{NvBackend, NvEngine};
use super::process::lock;
use super::program::NvProgram;
use super::signal::NvSignal;
use crate::hcq::{ComputeEncoder, HcqEncoder, HcqLaunch, HcqQueue, KeepAlive};
use crate::helpers::getenv;
use crate::hw::nv::arch::{NvClasses, PcasAction};
use crate::runtime::nv::push::{PatchPoint, PushBuf, QmdAddrPatch, SignalCmd, ValuePatch, WaitCmd};
use crate::{bail, ensure, Result};

/// The `NV_PCAS_ACTION` override, checked.
fn pcas_override() -> Result<Option<PcasAction>> {
    let v = getenv("NV_PCAS_ACTION", -1);
    if v < 0 {
        return Ok(None);
    }
    match u32::try_from(v).ok().and_then(PcasAction::from_bits) {
        Some(a) if a.schedules() => Ok(Some(a)),
        _ => bail!(
            InvalidArgument,
            "NV_PCAS_ACTION={v}: not a PCAS action that schedules the grid (2, 3, 9, 10, 11)"
        ),
    }
}

/// A launch's patch points: the SEND_PCAS_A address in the pushbuffer, and the program, which
/// knows where the kernarg block keeps the dims (the QMD's grid and block fields, cbuf0's
/// %ntid/%nctaid).
#[derive(Clone, Debug)]
pub struct ExecPatch {
    pub qmd: QmdAddrPatch,
    pub prg: Arc<NvProgram>,
}

/// The compute channel's encoder: a [`PushBuf`] and the PCAS action of its launches.
pub struct NvComputeEncoder {
    buf: PushBuf,
    /// SEND_SIGNALING_PCAS2_B action of its launches.
    action: PcasAction,
    /// The pushbuffer's own GPU copies, once bound.
    bound: Option<Mutex<BoundPush>>,
}

/// Commands for the compute channel: the shared queue verbs over [`NvComputeEncoder`].
pub type NvComputeQueue = HcqQueue<NvBackend, NvComputeEncoder>;

impl NvComputeQueue {
    /// A queue launching with the arch's default PCAS action.
    pub fn new(classes: NvClasses) -> NvComputeQueue {
        NvComputeQueue::with_action(classes, classes.arch.pcas_action)
    }

    /// A queue launching with PCAS action `action`.
    pub fn with_action(classes: NvClasses, action: PcasAction) -> NvComputeQueue {
        HcqQueue::from_encoder(NvComputeEncoder {
            buf: PushBuf::new(classes),
            action,
            bound: None,
        })
    }
}

/// What NV's two channels encode alike (both are pushbuffers): waits (host SEM acquire), the
/// patches of waits and signals, submission; each provides its engine and its release.
pub trait NvStream: Send + 'static {
    /// The channel the pushbuffer goes to.
    const ENGINE: NvEngine;
    /// The pushbuffer.
    fn push_buf(&self) -> &PushBuf;
    /// The pushbuffer, to append to.
    fn push_buf_mut(&mut self) -> &mut PushBuf;
    /// The engine's semaphore release of `value` (0 for a timestamp) at `addr`.
    fn release(&mut self, addr: u64, value: u64) -> Result<SignalCmd>;
    /// The pushbuffer's own GPU copies, once bound ([`HcqEncoder::bind`]).
    fn bound(&self) -> Option<&Mutex<BoundPush>>;
    /// Record the pushbuffer's own GPU copies.
    fn set_bound(&mut self, b: BoundPush);
    /// The pushbuffer and, once bound, its GPU copies (to patch both).
    fn parts_mut(&mut self) -> (&mut PushBuf, Option<&mut BoundPush>);
}

/// Rewrite a patch point of a stream: in the pushbuffer, and logged for its GPU copies once bound
/// (every patch of an NV queue goes through here).
pub(crate) fn patch_stream<S: NvStream, P: PatchPoint>(
    s: &mut S,
    p: &P,
    v: P::Value,
) -> Result<()> {
    match s.parts_mut() {
        (buf, Some(b)) => b.patch(buf, p, v),
        (buf, None) => buf.patch(p, v),
    }
}

/// Payload patch points rewritten in turn, straight into the dwords ([`PushBuf::patch_values`];
/// once bound: one batch, [`BoundPush::patch_values`]).
pub(crate) fn patch_values<'a, S: NvStream, P: ValuePatch + 'a>(
    s: &mut S,
    points: impl IntoIterator<Item = (&'a P, u64)>,
) -> Result<()> {
    match s.parts_mut() {
        (buf, Some(b)) => b.patch_values(buf, points),
        (buf, None) => buf.patch_values(points, None),
    }
}

/// The parts of an encoder holding a pushbuffer and its optional bound copies.
pub(crate) fn split_bound<'a>(
    buf: &'a mut PushBuf,
    bound: &'a mut Option<Mutex<BoundPush>>,
) -> (&'a mut PushBuf, Option<&'a mut BoundPush>) {
    let b = bound
        .as_mut()
        .map(|m| m.get_mut().unwrap_or_else(|e| e.into_inner()));
    (buf, b)
}

impl NvStream for NvComputeEncoder {
    const ENGINE: NvEngine = NvEngine::Compute;
    fn push_buf(&self) -> &PushBuf {
        &self.buf
    }
    fn push_buf_mut(&mut self) -> &mut PushBuf {
        &mut self.buf
    }
    fn release(&mut self, addr: u64, value: u64) -> Result<SignalCmd> {
        self.buf.signal(addr, value)
    }
    fn bound(&self) -> Option<&Mutex<BoundPush>> {
        self.bound.as_ref()
    }
    fn set_bound(&mut self, b: BoundPush) {
        self.bound = Some(Mutex::new(b));
    }
    fn parts_mut(&mut self) -> (&mut PushBuf, Option<&mut BoundPush>) {
        split_bound(&mut self.buf, &mut self.bound)
    }
}

impl<S: NvStream> HcqEncoder<NvBackend> for S {
    type WaitPatch = WaitCmd;
    type SignalPatch = SignalCmd;
    type TimestampPatch = SignalCmd;

    fn wait(&mut self, sig: &NvSignal, value: u64) -> Result<WaitCmd> {
        self.push_buf_mut().wait(sig.va(), value, false)
    }

    fn signal(&mut self, sig: &NvSignal, value: u64) -> Result<SignalCmd> {
        self.release(sig.va(), value)
    }

    fn timestamp(&mut self, sig: &NvSignal) -> Result<SignalCmd> {
        self.release(sig.va(), 0)
    }

    fn update_wait(&mut self, p: &WaitCmd, sig: Option<&NvSignal>, v: Option<u64>) -> Result<()> {
        patch_sem(self, (&p.addr, &p.value), sig, v)
    }

    fn update_signal(
        &mut self,
        p: &SignalCmd,
        sig: Option<&NvSignal>,
        v: Option<u64>,
    ) -> Result<()> {
        patch_sem(self, (&p.addr, &p.value), sig, v)
    }

    fn update_values<'a>(
        &mut self,
        waits: impl IntoIterator<Item = (&'a WaitCmd, u64)>,
        signals: impl IntoIterator<Item = (&'a SignalCmd, u64)>,
    ) -> Result<()> {
        patch_values(self, waits.into_iter().map(|(p, v)| (&p.value, v)))?;
        patch_values(self, signals.into_iter().map(|(p, v)| (&p.value, v)))
    }

    fn submit(&self, dev: &NvBackend) -> Result<()> {
        let dwords = self.push_buf().dwords();
        match self.bound() {
            Some(b) => {
                let (va, n) = lock(b).take_next(dwords)?;
                dev.submit_at(S::ENGINE, va, n)
            }
            None => dev.submit(S::ENGINE, dwords),
        }
    }

    fn bind(&mut self, dev: &NvBackend) -> Result<Option<KeepAlive>> {
        ensure!(
            self.bound().is_none(),
            InvalidArgument,
            "{:?} pushbuffer: bound twice",
            S::ENGINE
        );
        if self.push_buf().is_empty() {
            return Ok(None);
        }
        let (b, keep) = BoundPush::new(dev, self.push_buf().dwords())?;
        self.set_bound(b);
        Ok(Some(keep))
    }

    fn last_written(&self) -> Option<usize> {
        self.bound().map(|b| lock(b).last_written())
    }

    fn dwords(&self) -> &[u32] {
        self.push_buf().dwords()
    }
}

/// Point a semaphore command (address and payload fields) at `sig` and/or payload `v`.
fn patch_sem<S, A, V>(
    stream: &mut S,
    (addr, value): (&A, &V),
    sig: Option<&NvSignal>,
    v: Option<u64>,
) -> Result<()>
where
    S: NvStream,
    A: PatchPoint<Value = u64>,
    V: PatchPoint<Value = u64>,
{
    if let Some(s) = sig {
        patch_stream(stream, addr, s.va())?;
    }
    if let Some(v) = v {
        patch_stream(stream, value, v)?;
    }
    Ok(())
}

impl ComputeEncoder<NvBackend> for NvComputeEncoder {
    type ExecPatch = ExecPatch;

    fn memory_barrier(&mut self) -> Result<()> {
        self.buf.memory_barrier()
    }

    fn exec(&mut self, prg: &Arc<NvProgram>, launch: &HcqLaunch) -> Result<ExecPatch> {
        let addr = prg.qmd_addr(launch.kernargs());
        let action = pcas_override()?.unwrap_or(self.action);
        let qmd = self.buf.send_pcas_with(addr, action)?;
        Ok(ExecPatch {
            qmd,
            prg: prg.clone(),
        })
    }

    fn update_exec(&mut self, p: &ExecPatch, launch: &HcqLaunch) -> Result<()> {
        p.prg.write_dims(launch)?;
        patch_stream(self, &p.qmd, p.prg.qmd_addr(launch.kernargs()))
    }
}
