//! The NV copy queue (tinygrad's NVCopyQueue, open-gpu-doc `clc6b5.h`..`clcab5.h`): `hcq`'s shared
//! queue verbs over [`NvCopyEncoder`], a [`PushBuf`] for the DMA channel, whose copy class sits on
//! subchannel 4. `copy` = OFFSET_IN/OUT + LINE_LENGTH_IN + LAUNCH_DMA (split at 2^31 bytes),
//! `signal` = the copy engine's four-word semaphore release (32-bit payload at +0, timestamp at +8,
//! FLUSH_ENABLE), `timestamp` = that release with payload 0, `wait` = a host SEM acquire (the copy
//! engine has no acquire; shared with the compute channel through [`NvStream`]).
//!
//! Not guaranteed: copy-queue signal values must fit 32 bits (the HCQ timeline swaps at 2^31).

use std::sync::Mutex;

use super::bound::BoundPush;
use super::device::{NvBackend, NvEngine};
use super::queue::{patch_stream, split_bound, NvStream};
use crate::hcq::{CopyEncoder, HcqQueue};
use crate::hw::nv::arch::NvClasses;
use crate::runtime::nv::push::{CopyCmd, PushBuf, SignalCmd};
use crate::Result;

/// The DMA channel's encoder.
pub struct NvCopyEncoder {
    buf: PushBuf,
    /// The pushbuffer's own GPU copies, once bound.
    bound: Option<Mutex<BoundPush>>,
}

/// Commands for the DMA channel: the shared queue verbs over [`NvCopyEncoder`].
pub type NvCopyQueue = HcqQueue<NvBackend, NvCopyEncoder>;

impl NvCopyQueue {
    pub fn new(classes: NvClasses) -> NvCopyQueue {
        HcqQueue::from_encoder(NvCopyEncoder {
            buf: PushBuf::new(classes),
            bound: None,
        })
    }
}

impl NvStream for NvCopyEncoder {
    const ENGINE: NvEngine = NvEngine::Copy;
    fn push_buf(&self) -> &PushBuf {
        &self.buf
    }
    fn push_buf_mut(&mut self) -> &mut PushBuf {
        &mut self.buf
    }
    fn release(&mut self, addr: u64, value: u64) -> Result<SignalCmd> {
        self.buf.copy_signal(addr, value, false)
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

impl CopyEncoder<NvBackend> for NvCopyEncoder {
    type CopyPatch = CopyCmd;

    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<CopyCmd> {
        self.buf.copy(dst, src, size)
    }

    fn update_copy(&mut self, p: &CopyCmd, dst: Option<u64>, src: Option<u64>) -> Result<()> {
        if let Some(d) = dst {
            patch_stream(self, &p.dst, d)?;
        }
        if let Some(s) = src {
            patch_stream(self, &p.src, s)?;
        }
        Ok(())
    }
}
