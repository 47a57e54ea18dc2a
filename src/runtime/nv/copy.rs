//! The NV copy queue (tinygrad's NVCopyQueue, memo 2.7): a [`PushBuf`] for the DMA channel, whose
//! copy class sits on subchannel 4. `copy` = OFFSET_IN/OUT + LINE_LENGTH_IN + LAUNCH_DMA
//! (split at 2^31 bytes), `signal` = the copy engine's four-word semaphore release (32-bit payload
//! at +0, timestamp at +8, FLUSH_ENABLE), `timestamp` = that release with payload 0, `wait` = a
//! host SEM acquire (the copy engine has no acquire).
//!
//! Not guaranteed: copy-queue signal values must fit 32 bits (the HCQ timeline swaps at 2^31).

use super::device::{NvBackend, NvEngine};
use super::queue::{patch_signal, patch_wait};
use super::signal::NvSignal;
use crate::hcq::{Cmd, HcqSignal, HwCopyQueue, HwQueue, KeepAlive};
use crate::hw::nv::arch::NvClasses;
use crate::runtime::nv::push::{CopyCmd, PushBuf, SignalCmd, WaitCmd};
use crate::Result;

/// Commands for the DMA channel.
pub struct NvCopyQueue {
    pub(crate) buf: PushBuf,
    keep: Vec<KeepAlive>,
}

impl NvCopyQueue {
    pub fn new(classes: NvClasses) -> NvCopyQueue {
        NvCopyQueue {
            buf: PushBuf::new(classes),
            keep: Vec::new(),
        }
    }
    /// The pushbuffer built so far.
    pub fn dwords(&self) -> &[u32] {
        self.buf.dwords()
    }
}

impl HwQueue<NvBackend> for NvCopyQueue {
    type WaitPatch = WaitCmd;
    type SignalPatch = SignalCmd;
    type TimestampPatch = SignalCmd;

    fn wait(&mut self, sig: &NvSignal, value: u64) -> Result<Cmd<'_, Self, WaitCmd>> {
        let p = self.buf.wait(sig.va(), value, false)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn signal(&mut self, sig: &NvSignal, value: u64) -> Result<Cmd<'_, Self, SignalCmd>> {
        let p = self.buf.copy_signal(sig.va(), value, false)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn timestamp(&mut self, sig: &NvSignal) -> Result<Cmd<'_, Self, SignalCmd>> {
        let p = self.buf.copy_signal(sig.va(), 0, false)?;
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
        dev.submit(NvEngine::Copy, self.buf.dwords())
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

impl HwCopyQueue<NvBackend> for NvCopyQueue {
    type CopyPatch = CopyCmd;

    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<Cmd<'_, Self, CopyCmd>> {
        let p = self.buf.copy(dst, src, size)?;
        Ok(Cmd::new(self, p))
    }

    fn update_copy(&mut self, p: &CopyCmd, dst: Option<u64>, src: Option<u64>) -> Result<()> {
        if let Some(d) = dst {
            self.buf.patch(&p.dst, d)?;
        }
        if let Some(s) = src {
            self.buf.patch(&p.src, s)?;
        }
        Ok(())
    }
}
