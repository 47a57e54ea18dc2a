//! The SDMA copy queue: [`AmdCopyQueue`], `hcq`'s shared queue verbs over the SDMA encoder
//! ([`SdmaBuf`]: COPY_LINEAR split into the engine's largest piece, FENCE (+ mailbox FENCE + TRAP
//! for signals with an event), POLL_REGMEM waits, GET_GLOBAL timestamps; the signal, wait and
//! timestamp verbs through [`AmdStream`], shared with the PM4 encoder). It runs on the device's
//! SDMA [`super::queue::HwRing`], whose submission pads the ring tail so no packet straddles it.
//!
//! Not guaranteed: no memory barrier verb (SDMA reads memory directly; tinygrad's copy queue has
//! none either).

use super::queue::AmdStream;
use super::AmdBackend;
use crate::hcq::{CopyEncoder, HcqQueue};
use crate::hw::amd::targets::GfxTarget;
use crate::runtime::amd::pm4::{
    CopyPatch, PatchPoint, SignalEvent, SignalPatch, TimestampAddrPatch, ValuePatch, WaitPatch,
};
use crate::runtime::amd::sdma::SdmaBuf;
use crate::Result;

/// The HCQ copy command list: the shared queue verbs over the SDMA encoder.
pub type AmdCopyQueue = HcqQueue<AmdBackend, SdmaBuf>;

impl AmdCopyQueue {
    /// An empty list for `target`.
    pub fn new(target: &'static GfxTarget) -> AmdCopyQueue {
        HcqQueue::from_encoder(SdmaBuf::new(target))
    }
}

impl AmdStream for SdmaBuf {
    fn wait_cmd(&mut self, addr: u64, value: u64) -> Result<WaitPatch> {
        self.wait(addr, value)
    }
    fn signal_cmd(&mut self, addr: u64, v: u64, ev: Option<SignalEvent>) -> Result<SignalPatch> {
        self.signal(addr, v, ev)
    }
    fn timestamp_cmd(&mut self, addr: u64) -> Result<TimestampAddrPatch> {
        SdmaBuf::timestamp(self, addr)
    }
    fn patch_at<P: PatchPoint>(&mut self, p: &P, v: P::Value) -> Result<()> {
        self.patch(p, v)
    }
    fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()> {
        SdmaBuf::patch_values(self, points)
    }
    fn stream(&self) -> &[u32] {
        SdmaBuf::dwords(self)
    }
    fn submit_to(&self, dev: &AmdBackend) -> Result<()> {
        dev.submit_copy(self)
    }
}

impl CopyEncoder<AmdBackend> for SdmaBuf {
    type CopyPatch = CopyPatch;

    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<CopyPatch> {
        self.copy_linear(dst, src, size)
    }

    fn update_copy(&mut self, p: &CopyPatch, dst: Option<u64>, src: Option<u64>) -> Result<()> {
        if let Some(d) = dst {
            self.patch(&p.dst, d)?;
        }
        if let Some(s) = src {
            self.patch(&p.src, s)?;
        }
        Ok(())
    }
}
