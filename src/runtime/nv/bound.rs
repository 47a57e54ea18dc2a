//! Bound pushbuffers (tinygrad 0.9.1 `HWQueue.bind`, what its graphs replay): a queue's dwords
//! copied once into CPU-mapped VRAM of their own, so that a submission is one GP entry pointing
//! there (`clc56f.h` GP entry: any 4-byte aligned address below 2^40, LENGTH up to 2^21 - 1
//! dwords; [`crate::hw::nv::gpfifo::gp_entry`]) instead of a copy of every dword into the
//! channel's command ring.
//!
//! [`BoundPush`] holds two copies (images) and alternates between them, so a replay may be
//! patched and submitted while the GPU still runs the previous one (tinygrad 0.9.1 instead waits
//! for the previous replay and patches its single copy in place). Patches of a bound queue go
//! through [`BoundPush::patch`], which logs the positions of the host dwords whose value changed
//! for each image; before a submission the image rewrites exactly those dwords (a replay's new
//! signal values: the low dword of each, the high dword only when it changes), never comparing
//! or reading the mapped VRAM back. An image whose log grew longer than the buffer (patched many
//! times without a submission) is rewritten whole instead.
//!
//! Not guaranteed: that the GPU is done with an image when it is rewritten: the caller makes
//! sure the submission two before finished ([`crate::hcq::HwQueue::bind`]). Dwords changed
//! other than through [`BoundPush::patch`] after the bind do not reach the images.

use std::sync::Arc;

use super::device::NvBackend;
use super::memory::{alloc_memory, MemKind, NvBuffer};
use super::push::{PatchPoint, PushBuf};
use crate::hcq::{HcqBuffer, KeepAlive};
use crate::{ensure, Error, Result};

/// One copy of the pushbuffer in GPU memory, with what it lacks of the host dwords.
struct Image {
    buf: Arc<NvBuffer>,
    /// Positions changed since this image was last brought up to date (may repeat).
    stale: Vec<u32>,
    /// Rewrite every dword (the log outgrew the buffer).
    all: bool,
}

/// A pushbuffer bound to a device: two images in CPU-mapped VRAM (see the module doc).
pub struct BoundPush {
    images: [Image; 2],
    /// The image the next submission uses.
    next: usize,
    /// Dwords of the pushbuffer.
    len: usize,
    /// Dwords the last [`BoundPush::take_next`] wrote.
    written: usize,
}

impl BoundPush {
    /// Both images of `dwords` on `dev`, and the memory to keep alive while a submission runs.
    pub fn new(dev: &NvBackend, dwords: &[u32]) -> Result<(BoundPush, KeepAlive)> {
        ensure!(
            !dwords.is_empty() && u32::try_from(dwords.len()).is_ok(),
            InvalidArgument,
            "binding a pushbuffer of {} dwords",
            dwords.len()
        );
        let image = || -> Result<Image> {
            let buf = Arc::new(alloc_memory(
                dev.rm(),
                dwords.len() * 4,
                MemKind::Vram,
                true,
            )?);
            view(&buf)?.write_u32s(0, dwords)?;
            Ok(Image {
                buf,
                stale: Vec::new(),
                all: false,
            })
        };
        let images = [image()?, image()?];
        let keep: KeepAlive = Arc::new([images[0].buf.clone(), images[1].buf.clone()]);
        let b = BoundPush {
            images,
            next: 0,
            len: dwords.len(),
            written: 0,
        };
        Ok((b, keep))
    }

    /// Rewrite a patch point of `buf` (the bound pushbuffer's host dwords), logging the dwords
    /// it changed for both images.
    pub fn patch<P: PatchPoint>(&mut self, buf: &mut PushBuf, p: &P, v: P::Value) -> Result<()> {
        let [a, b] = &mut self.images;
        let from = a.stale.len();
        buf.patch_logged(p, v, &mut a.stale)?;
        b.stale.extend_from_slice(&a.stale[from..]);
        for img in &mut self.images {
            if img.stale.len() > self.len {
                img.stale.clear();
                img.all = true;
            }
        }
        Ok(())
    }

    /// Bring the next image up to `dwords` (the bound dwords, patched) and take it: its GPU
    /// address and length in dwords.
    pub fn take_next(&mut self, dwords: &[u32]) -> Result<(u64, usize)> {
        ensure!(
            dwords.len() == self.len,
            InvalidArgument,
            "a bound pushbuffer of {} dwords now has {} (a bound queue takes no more commands)",
            self.len,
            dwords.len()
        );
        let img = &mut self.images[self.next];
        let v = view(&img.buf)?;
        if img.all {
            v.write_u32s(0, dwords)?;
            self.written = dwords.len();
        } else {
            for &pos in &img.stale {
                let pos = pos as usize;
                v.write_u32(pos * 4, dwords[pos])?;
            }
            self.written = img.stale.len();
        }
        img.stale.clear();
        img.all = false;
        self.next ^= 1;
        Ok((img.buf.va(), dwords.len()))
    }

    /// The image (0 or 1) the next [`BoundPush::take_next`] takes.
    pub fn next_image(&self) -> usize {
        self.next
    }

    /// Dwords the last [`BoundPush::take_next`] wrote into its image.
    pub fn last_written(&self) -> usize {
        self.written
    }

    /// The dwords image `i` (0 or 1) holds, read back (tests).
    pub fn image_dwords(&self, i: usize) -> Result<Vec<u32>> {
        let img = self
            .images
            .get(i)
            .ok_or_else(|| Error::InvalidArgument(format!("bound pushbuffer image {i}")))?;
        let mut out = vec![0; self.len];
        view(&img.buf)?.read_u32s(0, &mut out)?;
        Ok(out)
    }
}

/// The CPU view of an image.
fn view(buf: &NvBuffer) -> Result<&crate::driver::Mapping> {
    buf.cpu()
        .ok_or_else(|| Error::Internal("a bound pushbuffer lost its CPU view".into()))
}
