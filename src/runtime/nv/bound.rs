//! Bound pushbuffers (tinygrad 0.9.1 `HWQueue.bind`, what its graphs replay): a queue's dwords
//! copied once into CPU-mapped VRAM of their own, so that a submission is one GP entry pointing
//! there (`clc56f.h` GP entry: any 4-byte aligned address below 2^40, LENGTH up to 2^21 - 1
//! dwords; [`crate::hw::nv::gpfifo::gp_entry`]) instead of a copy of every dword into the
//! channel's command ring.
//!
//! [`BoundPush`] is the shared two-image bookkeeping ([`crate::hcq::bound::BoundImages`]: the
//! images alternate, each rewrites only the dwords logged since it was last taken) over two
//! CPU-mapped VRAM buffers; its patches go through [`PushBuf::patch_logged`], a replay's new
//! signal values through [`PushBuf::patch_values`] (straight into the dwords, one batch; a
//! dword is logged only when its value changes: the high dword of a value rarely does).
//!
//! Not guaranteed: that the GPU is done with an image when it is rewritten: the caller makes
//! sure the submission two before finished ([`crate::hcq::HwQueue::bind`]). Dwords changed
//! other than through [`BoundPush::patch`] after the bind do not reach the images.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::device::NvBackend;
use super::memory::{alloc_memory, MemKind, NvBuffer};
use super::push::{PatchPoint, PushBuf, ValuePatch};
use crate::hcq::bound::BoundImages;
use crate::hcq::KeepAlive;
use crate::Result;

/// A pushbuffer bound to a device: two images in CPU-mapped VRAM (see the module doc).
pub struct BoundPush {
    images: BoundImages<NvBuffer>,
}

impl BoundPush {
    /// Both images of `dwords` on `dev`, and the memory to keep alive while a submission runs.
    pub fn new(dev: &NvBackend, dwords: &[u32]) -> Result<(BoundPush, KeepAlive)> {
        let buf = || -> Result<Arc<NvBuffer>> {
            let bytes = dwords.len().max(1) * 4;
            Ok(Arc::new(alloc_memory(
                dev.rm(),
                bytes,
                MemKind::Vram,
                true,
            )?))
        };
        let (images, keep) = BoundImages::new([buf()?, buf()?], dwords)?;
        Ok((BoundPush { images }, keep))
    }

    /// Rewrite a patch point of `buf` (the bound pushbuffer's host dwords), logging the dwords
    /// it changed for both images.
    pub fn patch<P: PatchPoint>(&mut self, buf: &mut PushBuf, p: &P, v: P::Value) -> Result<()> {
        self.images.log_patch(|log| buf.patch_logged(p, v, log))
    }

    /// Payload patch points of `buf` rewritten in turn as one batch, straight into the dwords
    /// ([`PushBuf::patch_values`]: no call per dword), logging the dwords they changed.
    pub fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        buf: &mut PushBuf,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()> {
        self.images
            .log_patch(|log| buf.patch_values(points, Some(log)))
    }
}

impl Deref for BoundPush {
    type Target = BoundImages<NvBuffer>;
    fn deref(&self) -> &BoundImages<NvBuffer> {
        &self.images
    }
}

impl DerefMut for BoundPush {
    fn deref_mut(&mut self) -> &mut BoundImages<NvBuffer> {
        &mut self.images
    }
}
