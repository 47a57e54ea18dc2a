//! Bound pushbuffers (tinygrad 0.9.1 `HWQueue.bind`, what its graphs replay): a queue's dwords
//! copied once into CPU-mapped VRAM of their own, so that a submission is one GP entry pointing
//! there (`clc56f.h` GP entry: any 4-byte aligned address below 2^40, LENGTH up to 2^21 - 1
//! dwords; [`crate::hw::nv::gpfifo::gp_entry`]) instead of a copy of every dword into the
//! channel's command ring.
//!
//! [`BoundPush`] holds two copies (images) and alternates between them, so a replay may be
//! patched and submitted while the GPU still runs the previous one (tinygrad 0.9.1 instead waits
//! for the previous replay and patches its single copy in place). Before a submission the image
//! is brought up to date with the queue's host dwords (where patches land): only the dwords that
//! differ from what that image holds are written (a replay's new signal values), found by
//! comparing with a host shadow of the image, never by reading the mapped VRAM back.
//!
//! Not guaranteed: that the GPU is done with an image when it is rewritten: the caller makes
//! sure the submission two before finished ([`crate::hcq::HwQueue::bind`]).

use std::sync::Arc;

use super::device::NvBackend;
use super::memory::{alloc_memory, MemKind, NvBuffer};
use crate::hcq::{HcqBuffer, KeepAlive};
use crate::{ensure, Error, Result};

/// Dwords compared at once before looking for the ones that differ.
const CHUNK: usize = 64;

/// One copy of the pushbuffer in GPU memory, with what it holds.
struct Image {
    buf: Arc<NvBuffer>,
    shadow: Vec<u32>,
}

/// A pushbuffer bound to a device: two images in CPU-mapped VRAM (see the module doc).
pub struct BoundPush {
    images: [Image; 2],
    /// The image the next submission uses.
    next: usize,
}

impl BoundPush {
    /// Both images of `dwords` on `dev`, and the memory to keep alive while a submission runs.
    pub fn new(dev: &NvBackend, dwords: &[u32]) -> Result<(BoundPush, KeepAlive)> {
        ensure!(
            !dwords.is_empty(),
            InvalidArgument,
            "binding an empty pushbuffer"
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
                shadow: dwords.to_vec(),
            })
        };
        let images = [image()?, image()?];
        let keep: KeepAlive = Arc::new([images[0].buf.clone(), images[1].buf.clone()]);
        Ok((BoundPush { images, next: 0 }, keep))
    }

    /// Bring the next image up to `dwords` (the bound dwords, patched) and take it: its GPU
    /// address and length in dwords.
    pub fn take_next(&mut self, dwords: &[u32]) -> Result<(u64, usize)> {
        let img = &mut self.images[self.next];
        ensure!(
            dwords.len() == img.shadow.len(),
            InvalidArgument,
            "a bound pushbuffer of {} dwords now has {} (a bound queue takes no more commands)",
            img.shadow.len(),
            dwords.len()
        );
        let v = view(&img.buf)?;
        let chunks = dwords.chunks(CHUNK).zip(img.shadow.chunks_mut(CHUNK));
        for (c, (new, old)) in chunks.enumerate() {
            if new == old {
                continue;
            }
            for (i, (n, o)) in new.iter().zip(old.iter_mut()).enumerate() {
                if n != o {
                    v.write_u32((c * CHUNK + i) * 4, *n)?;
                    *o = *n;
                }
            }
        }
        self.next ^= 1;
        Ok((img.buf.va(), dwords.len()))
    }
}

/// The CPU view of an image.
fn view(buf: &NvBuffer) -> Result<&crate::driver::Mapping> {
    buf.cpu()
        .ok_or_else(|| Error::Internal("a bound pushbuffer lost its CPU view".into()))
}
