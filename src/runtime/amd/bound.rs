//! Bound PM4 compute queues (tinygrad 0.9.1 `HWPM4Queue.bind`, what its graphs replay): a
//! compute queue's dwords copied once into two images of GPU-visible memory of their own, so that
//! a submission puts one 4-dword INDIRECT_BUFFER on the compute ring instead of copying every
//! dword of the queue there. The two images, their alternation and the dirty-dword log are the
//! shared [`crate::hcq::bound::BoundImages`] (as NV's bound pushbuffers); patches go through
//! [`Pm4Buf::patch_logged`], a replay's new wait and signal values through
//! [`Pm4Buf::patch_values`] (straight into the dwords, one batch, a dword logged only when its
//! value changes).
//!
//! What this relies on, for real hardware:
//! - The INDIRECT_BUFFER (`nvd.h` PACKET3_INDIRECT_BUFFER, [`crate::runtime::amd::pm4::
//!   indirect_buffer_packet`]): address 4-byte aligned, IB_SIZE bits 19:0 (a queue of more than
//!   0xFFFFF dwords is refused at bind: the unbound path takes it), VALID bit 23, CHAIN and the
//!   cache-policy bits clear; the IB lies in memory mapped into the process's GPU VM (the images
//!   are KFD allocations of this device, mapped at allocation).
//! - The images are GTT, uncached and coherent (`KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
//!   UNCACHED`), the memory kind of the compute ring itself and what tinygrad 0.9.1 binds into:
//!   the CP reads what the CPU wrote without a cache between them, and the CPU's writes are
//!   ordered before the doorbell by the fence [`crate::driver::Driver::write_doorbell`] issues.
//! - Nothing else goes on the ring around the INDIRECT_BUFFER (as tinygrad 0.9.1 `_submit`
//!   writes only `indirect_cmd`): the queue's own packets inside the image already carry its
//!   waits (WAIT_REG_MEM), cache invalidation (ACQUIRE_MEM of the memory barrier) and signal
//!   releases (RELEASE_MEM with its end-of-pipe cache actions and interrupt), and the CP executes
//!   an IB's packets exactly as it would the ring's.
//! - An image is rewritten only after the submission that last used it signaled its final
//!   value (the caller's rule, [`crate::hcq::HwQueue::bind`]): the CP has fetched every dword
//!   of an IB before it executes the IB's last packet.
//!
//! Not guaranteed: SDMA copy queues are not bound (tinygrad 0.9.1 leaves them unbound too; its
//! SDMA INDIRECT needs an 8-dword aligned end and a VMID, and the emulator does not model it).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::device::AmdBackend;
use super::memory::AmdBuffer;
use super::pm4::{PatchPoint, Pm4Buf, ValuePatch};
use crate::hcq::bound::BoundImages;
use crate::hcq::KeepAlive;
use crate::hw::amd::pm4::INDIRECT_BUFFER_SIZE_MASK;
use crate::Result;

/// A PM4 compute queue bound to a device: two images in GTT (see the module doc).
pub struct BoundPm4 {
    images: BoundImages<AmdBuffer>,
}

impl BoundPm4 {
    /// Whether a queue of `dwords` dwords fits one INDIRECT_BUFFER (else it stays unbound).
    pub fn fits(dwords: usize) -> bool {
        (1..=INDIRECT_BUFFER_SIZE_MASK as usize).contains(&dwords)
    }

    /// Both images of `dwords` on `dev`, and the memory to keep alive while a submission runs.
    pub fn new(dev: &AmdBackend, dwords: &[u32]) -> Result<(BoundPm4, KeepAlive)> {
        let buf = || -> Result<Arc<AmdBuffer>> {
            Ok(Arc::new(dev.alloc_command_memory(dwords.len().max(1) * 4)?))
        };
        let (images, keep) = BoundImages::new([buf()?, buf()?], dwords)?;
        Ok((BoundPm4 { images }, keep))
    }

    /// Rewrite a patch point of `buf` (the bound queue's host dwords), logging the dwords it
    /// changed for both images.
    pub fn patch<P: PatchPoint>(&mut self, buf: &mut Pm4Buf, p: &P, v: P::Value) -> Result<()> {
        self.images.log_patch(|log| buf.patch_logged(p, v, log))
    }

    /// Value patch points of `buf` rewritten in turn as one batch, straight into the dwords
    /// ([`Pm4Buf::patch_values`]: no call per dword), logging the dwords they changed.
    pub fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        buf: &mut Pm4Buf,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()> {
        self.images
            .log_patch(|log| buf.patch_values(points, Some(log)))
    }
}

impl Deref for BoundPm4 {
    type Target = BoundImages<AmdBuffer>;
    fn deref(&self) -> &BoundImages<AmdBuffer> {
        &self.images
    }
}

impl DerefMut for BoundPm4 {
    fn deref_mut(&mut self) -> &mut BoundImages<AmdBuffer> {
        &mut self.images
    }
}
