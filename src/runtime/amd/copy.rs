//! The SDMA copy queue: [`AmdCopyQueue`], the HCQ copy command list built with `sdma.rs`
//! (COPY_LINEAR split into the engine's largest piece, FENCE (+ mailbox FENCE + TRAP for
//! signals with an event), POLL_REGMEM waits, GET_GLOBAL timestamps). It runs on the device's
//! SDMA [`super::queue::HwRing`], whose submission pads the ring tail so no packet straddles it.
//!
//! Not guaranteed: no memory barrier verb (SDMA reads memory directly; tinygrad's copy queue has
//! none either).

use super::queue::signal_event_update;
use super::signal::AmdSignal;
use super::AmdBackend;
use crate::hcq::{Cmd, HcqSignal, HwCopyQueue, HwQueue, KeepAlive};
use crate::hw::amd::targets::GfxTarget;
use crate::runtime::amd::pm4::{CopyPatch, SignalPatch, TimestampAddrPatch, WaitPatch};
use crate::runtime::amd::sdma::SdmaBuf;
use crate::Result;

/// The HCQ copy command list (SDMA).
pub struct AmdCopyQueue {
    pub(crate) buf: SdmaBuf,
    keep: Vec<KeepAlive>,
}

impl AmdCopyQueue {
    /// An empty list for `target`.
    pub fn new(target: &'static GfxTarget) -> AmdCopyQueue {
        AmdCopyQueue {
            buf: SdmaBuf::new(target),
            keep: Vec::new(),
        }
    }
    /// The SDMA dwords built so far.
    pub fn dwords(&self) -> &[u32] {
        self.buf.dwords()
    }
}

impl HwQueue<AmdBackend> for AmdCopyQueue {
    type WaitPatch = WaitPatch;
    type SignalPatch = SignalPatch;
    type TimestampPatch = TimestampAddrPatch;

    fn wait(&mut self, sig: &AmdSignal, value: u64) -> Result<Cmd<'_, Self, WaitPatch>> {
        let p = self.buf.wait(sig.va(), value)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn signal(&mut self, sig: &AmdSignal, value: u64) -> Result<Cmd<'_, Self, SignalPatch>> {
        let p = self.buf.signal(sig.va(), value, sig.event())?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn timestamp(&mut self, sig: &AmdSignal) -> Result<Cmd<'_, Self, TimestampAddrPatch>> {
        let p = self.buf.timestamp(sig.va() + 8)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn update_wait(
        &mut self,
        p: &WaitPatch,
        sig: Option<&AmdSignal>,
        v: Option<u64>,
    ) -> Result<()> {
        if let Some(s) = sig {
            self.buf.patch(&p.addr, s.va())?;
            self.keep.push(s.keep());
        }
        if let Some(v) = v {
            self.buf.patch(&p.value, v)?;
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
                self.buf.patch(&mp, ev)?;
            }
            self.buf.patch(&p.addr, s.va())?;
            self.keep.push(s.keep());
        }
        if let Some(v) = v {
            self.buf.patch(&p.value, v)?;
        }
        Ok(())
    }

    fn submit(&self, dev: &AmdBackend) -> Result<()> {
        dev.submit_copy(&self.buf)
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

impl HwCopyQueue<AmdBackend> for AmdCopyQueue {
    type CopyPatch = CopyPatch;

    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<Cmd<'_, Self, CopyPatch>> {
        let p = self.buf.copy_linear(dst, src, size)?;
        Ok(Cmd::new(self, p))
    }

    fn update_copy(&mut self, p: &CopyPatch, dst: Option<u64>, src: Option<u64>) -> Result<()> {
        if let Some(d) = dst {
            self.buf.patch(&p.dst, d)?;
        }
        if let Some(s) = src {
            self.buf.patch(&p.src, s)?;
        }
        Ok(())
    }
}
