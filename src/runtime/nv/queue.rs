//! The NV compute queue (tinygrad's NVComputeQueue, memo 2.4-2.6): a [`PushBuf`] for the compute
//! channel. Verbs: `wait` = host SEM acquire (ACQ_CIRC_GEQ, 64-bit), `signal` = host SEM release
//! with RELEASE_WFI and a nanosecond timestamp, `timestamp` = the same release with payload 0
//! (the timestamp lands at +8 of the signal), `memory_barrier` = INVALIDATE_SHADER_CACHES_NO_WFI
//! (instruction, global data, constant), `exec` = SEND_PCAS_A with the launch's QMD (written by
//! [`super::program::NvProgram`] into the kernargs block) + SEND_SIGNALING_PCAS2_B.
//!
//! Patch points: waits and signals rewrite the SEM group in place; `update_exec` moves the launch
//! to another kernargs block (whose QMD the program's fill wrote), which carries its dims.
//!
//! The PCAS action: the device's ([`NvBackend::pcas_action`], the arch's default until the first
//! run or a caller picks a fallback), given to the queue when it is made; `NV_PCAS_ACTION=<n>`
//! replaces it per launch (Hopper's is unconfirmed, memo 2.6: NVK 3, tinygrad 9, a libcuda trace
//! 0xA); it must name an action that schedules the grid.
//!
//! Not guaranteed: `update_exec` with new dims alone is refused (the dims live in the QMD in the
//! kernargs block, which the queue does not own: refill the block and patch its address).

use std::sync::Arc;

use super::device::{NvBackend, NvEngine};
use super::program::NvProgram;
use super::signal::NvSignal;
use crate::hcq::{Cmd, HcqSignal, HwComputeQueue, HwQueue, KeepAlive};
use crate::helpers::getenv;
use crate::hw::nv::arch::{NvClasses, PcasAction};
use crate::runtime::nv::push::{PushBuf, QmdAddrPatch, SignalCmd, WaitCmd};
use crate::{bail, Result};

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

/// A launch's patch point: the SEND_PCAS_A address and the program's QMD placement.
#[derive(Clone, Copy, Debug)]
pub struct ExecPatch {
    pub qmd: QmdAddrPatch,
    /// Bytes of constant buffer 0 (the QMD follows at the next 256-byte boundary).
    pub cbuf0_size: u32,
}

/// Commands for the compute channel.
pub struct NvComputeQueue {
    pub(crate) buf: PushBuf,
    keep: Vec<KeepAlive>,
    /// SEND_SIGNALING_PCAS2_B action of its launches.
    action: PcasAction,
}

impl NvComputeQueue {
    /// A queue launching with the arch's default PCAS action.
    pub fn new(classes: NvClasses) -> NvComputeQueue {
        NvComputeQueue::with_action(classes, classes.arch.pcas_action)
    }

    /// A queue launching with PCAS action `action`.
    pub fn with_action(classes: NvClasses, action: PcasAction) -> NvComputeQueue {
        NvComputeQueue {
            buf: PushBuf::new(classes),
            keep: Vec::new(),
            action,
        }
    }
    /// The pushbuffer built so far.
    pub fn dwords(&self) -> &[u32] {
        self.buf.dwords()
    }
}

/// The shared wait/signal patching of both queues.
pub(crate) fn patch_wait(
    buf: &mut PushBuf,
    keep: &mut Vec<KeepAlive>,
    p: &WaitCmd,
    sig: Option<&NvSignal>,
    v: Option<u64>,
) -> Result<()> {
    if let Some(s) = sig {
        buf.patch(&p.addr, s.va())?;
        keep.push(s.keep());
    }
    if let Some(v) = v {
        buf.patch(&p.value, v)?;
    }
    Ok(())
}

pub(crate) fn patch_signal(
    buf: &mut PushBuf,
    keep: &mut Vec<KeepAlive>,
    p: &SignalCmd,
    sig: Option<&NvSignal>,
    v: Option<u64>,
) -> Result<()> {
    if let Some(s) = sig {
        buf.patch(&p.addr, s.va())?;
        keep.push(s.keep());
    }
    if let Some(v) = v {
        buf.patch(&p.value, v)?;
    }
    Ok(())
}

impl HwQueue<NvBackend> for NvComputeQueue {
    type WaitPatch = WaitCmd;
    type SignalPatch = SignalCmd;
    type TimestampPatch = SignalCmd;

    fn wait(&mut self, sig: &NvSignal, value: u64) -> Result<Cmd<'_, Self, WaitCmd>> {
        let p = self.buf.wait(sig.va(), value, false)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn signal(&mut self, sig: &NvSignal, value: u64) -> Result<Cmd<'_, Self, SignalCmd>> {
        let p = self.buf.signal(sig.va(), value)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn timestamp(&mut self, sig: &NvSignal) -> Result<Cmd<'_, Self, SignalCmd>> {
        let p = self.buf.signal(sig.va(), 0)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn update_wait(&mut self, p: &WaitCmd, sig: Option<&NvSignal>, v: Option<u64>) -> Result<()> {
        patch_wait(&mut self.buf, &mut self.keep, p, sig, v)
    }

    fn update_signal(
        &mut self,
        p: &SignalCmd,
        sig: Option<&NvSignal>,
        v: Option<u64>,
    ) -> Result<()> {
        patch_signal(&mut self.buf, &mut self.keep, p, sig, v)
    }

    fn submit(&self, dev: &NvBackend) -> Result<()> {
        dev.submit(NvEngine::Compute, self.buf.dwords())
    }

    fn keep_alive(&mut self, obj: KeepAlive) {
        self.keep.push(obj);
    }

    fn take_keep_alive(&mut self) -> Vec<KeepAlive> {
        std::mem::take(&mut self.keep)
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

impl HwComputeQueue<NvBackend> for NvComputeQueue {
    type ExecPatch = ExecPatch;

    fn memory_barrier(&mut self) -> Result<Cmd<'_, Self, ()>> {
        self.buf.memory_barrier()?;
        Ok(Cmd::new(self, ()))
    }

    fn exec(
        &mut self,
        prg: &Arc<NvProgram>,
        kernargs: u64,
        _global: [u32; 3],
        _local: [u32; 3],
    ) -> Result<Cmd<'_, Self, ExecPatch>> {
        let addr = prg.qmd_addr(kernargs);
        let action = pcas_override()?.unwrap_or(self.action);
        let qmd = self.buf.send_pcas_with(addr, action)?;
        self.keep.push(prg.clone());
        let p = ExecPatch {
            qmd,
            cbuf0_size: prg.cbuf0_size(),
        };
        Ok(Cmd::new(self, p))
    }

    fn dims_in_kernargs(&self) -> bool {
        true
    }

    fn update_exec(
        &mut self,
        p: &ExecPatch,
        kernargs: Option<u64>,
        global: Option<[u32; 3]>,
        local: Option<[u32; 3]>,
    ) -> Result<()> {
        if global.is_some() || local.is_some() {
            bail!(
                InvalidArgument,
                "NV update_exec: launch dims live in the QMD of the kernargs block; fill a new block and patch its address"
            );
        }
        if let Some(k) = kernargs {
            let qmd = (k + u64::from(p.cbuf0_size)).next_multiple_of(256);
            self.buf.patch(&p.qmd, qmd)?;
        }
        Ok(())
    }
}
