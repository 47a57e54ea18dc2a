//! Two GPU-visible images of a bound command stream (tinygrad 0.9.1 `HWQueue.bind`, what its
//! graphs replay), shared by every backend that binds: NV's pushbuffers
//! (`runtime::nv::bound`) and AMD's PM4 compute queues (`runtime::amd::bound`).
//! The backend allocates the two buffers (the memory kind its engine reads commands from) and
//! says how a submission points the engine at an image (a GP entry, an INDIRECT_BUFFER packet).
//!
//! [`BoundImages`] alternates between the two images, so a replay may be patched and submitted
//! while the GPU still runs the previous one (tinygrad 0.9.1 instead waits for the previous
//! replay and patches its single copy in place). Patches of a bound stream go through
//! [`BoundImages::log_patch`], which hands the backend's patch a log to append the position of
//! every host dword whose value changed; before a submission the next image rewrites exactly
//! the dwords logged since it was last taken, never comparing or reading the mapped memory
//! back. An image whose log grew longer than the stream (patched many times without a
//! submission) is rewritten whole instead.
//!
//! Not guaranteed: that the GPU is done with an image when it is rewritten: the caller makes
//! sure the submission two before finished ([`crate::hcq::HwQueue::bind`]). Dwords changed
//! other than through [`BoundImages::log_patch`] after the bind do not reach the images.

use std::sync::Arc;

use super::{HcqBuffer, KeepAlive};
use crate::{ensure, Error, Result};

/// One copy of the stream in GPU memory, with what it lacks of the host dwords.
struct Image<M> {
    buf: Arc<M>,
    /// Positions changed since this image was last brought up to date (may repeat).
    stale: Vec<u32>,
    /// Rewrite every dword (the log outgrew the stream).
    all: bool,
}

/// A command stream bound to two CPU-mapped, GPU-visible buffers (see the module doc).
pub struct BoundImages<M: HcqBuffer> {
    images: [Image<M>; 2],
    /// The image the next submission uses.
    next: usize,
    /// Dwords of the stream.
    len: usize,
    /// Dwords the last [`BoundImages::take_next`] wrote.
    written: usize,
}

impl<M: HcqBuffer> BoundImages<M> {
    /// Both images of `dwords`, written into `bufs` (CPU-mapped, at least `4 * dwords.len()`
    /// bytes each), and the memory to keep alive while a submission runs.
    pub fn new(bufs: [Arc<M>; 2], dwords: &[u32]) -> Result<(BoundImages<M>, KeepAlive)> {
        ensure!(
            !dwords.is_empty() && u32::try_from(dwords.len()).is_ok(),
            InvalidArgument,
            "binding a command stream of {} dwords",
            dwords.len()
        );
        for b in &bufs {
            ensure!(
                b.size() >= dwords.len() * 4,
                InvalidArgument,
                "binding {} dwords into a {}-byte buffer",
                dwords.len(),
                b.size()
            );
            view(b.as_ref())?.write_u32s(0, dwords)?;
        }
        let keep: KeepAlive = Arc::new(bufs.clone());
        let images = bufs.map(|buf| Image {
            buf,
            stale: Vec::new(),
            all: false,
        });
        let b = BoundImages {
            images,
            next: 0,
            len: dwords.len(),
            written: 0,
        };
        Ok((b, keep))
    }

    /// Run a patch of the host dwords, `patch(log)`, which appends to `log` the position of
    /// every dword whose value it changed; the positions are logged for both images.
    pub fn log_patch<T>(&mut self, patch: impl FnOnce(&mut Vec<u32>) -> Result<T>) -> Result<T> {
        let [a, b] = &mut self.images;
        let from = a.stale.len();
        let r = patch(&mut a.stale);
        b.stale.extend_from_slice(&a.stale[from..]);
        for img in &mut self.images {
            if img.stale.len() > self.len {
                img.stale.clear();
                img.all = true;
            }
        }
        r
    }

    /// Bring the next image up to `dwords` (the bound dwords, patched) and take it: its GPU
    /// address and length in dwords.
    pub fn take_next(&mut self, dwords: &[u32]) -> Result<(u64, usize)> {
        ensure!(
            dwords.len() == self.len,
            InvalidArgument,
            "a bound command stream of {} dwords now has {} (a bound queue takes no more commands)",
            self.len,
            dwords.len()
        );
        let img = &mut self.images[self.next];
        let v = view(img.buf.as_ref())?;
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

    /// The image (0 or 1) the next [`BoundImages::take_next`] takes.
    pub fn next_image(&self) -> usize {
        self.next
    }

    /// Dwords the last [`BoundImages::take_next`] wrote into its image.
    pub fn last_written(&self) -> usize {
        self.written
    }

    /// GPU address of image `i` (0 or 1).
    pub fn image_va(&self, i: usize) -> Result<u64> {
        Ok(self.image(i)?.buf.va())
    }

    /// The dwords image `i` (0 or 1) holds, read back (tests).
    pub fn image_dwords(&self, i: usize) -> Result<Vec<u32>> {
        let img = self.image(i)?;
        let mut out = vec![0; self.len];
        view(img.buf.as_ref())?.read_u32s(0, &mut out)?;
        Ok(out)
    }

    fn image(&self, i: usize) -> Result<&Image<M>> {
        self.images
            .get(i)
            .ok_or_else(|| Error::InvalidArgument(format!("bound command stream image {i}")))
    }
}

/// The CPU view of an image.
fn view<M: HcqBuffer>(buf: &M) -> Result<&crate::driver::Mapping> {
    buf.cpu()
        .ok_or_else(|| Error::Internal("a bound command stream's image is not CPU-mapped".into()))
}
