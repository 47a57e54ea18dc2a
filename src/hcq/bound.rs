//! Two GPU-visible images of a bound command stream (tinygrad 0.9.1 `HWQueue.bind`, what its
//! graphs replay), shared by every backend that binds: NV's pushbuffers
//! (`runtime::nv::bound`) and AMD's PM4 compute queues (`runtime::amd::bound`).
//! The backend allocates the two buffers (the memory kind its engine reads commands from) and
//! says how a submission points the engine at an image (a GP entry, an INDIRECT_BUFFER packet).
//!
//! [`BoundImages`] alternates between the two images, so a replay may be patched and submitted
//! while the GPU still runs the previous one (tinygrad 0.9.1 instead waits for the previous
//! replay and patches its single copy in place). Patches of a bound stream go through
//! [`BoundImages::log_patch`] (or [`BoundImages::log_patches`] for many at once: one call per
//! batch), which hands the backend's patch a [`DirtyLog`] to tell the position of every host
//! dword whose value changed: one dirty bit per dword, set in both images. Before a
//! submission the next image rewrites exactly its dirty dwords, each once however often it was
//! patched, as runs of contiguous dwords ([`crate::driver::Mapping::write_u32_runs`]: one bounds
//! check for the image, one copy per run), never comparing or reading the mapped memory back.
//! A replay's many new wait and signal values take the direct path, [`store_logged`] per dword
//! (NV's payload slots, AMD's value dwords: no call through a closure or trait object per dword).
//!
//! Not guaranteed: that the GPU is done with an image when it is rewritten: the caller makes
//! sure the submission two before finished ([`crate::hcq::HwQueue::bind`]). Dwords changed
//! other than through [`BoundImages::log_patch`] after the bind do not reach the images.

use std::ops::Range;
use std::sync::Arc;

use super::{HcqBuffer, KeepAlive};
use crate::{ensure, Error, Result};

/// One copy of the stream in GPU memory, with what it lacks of the host dwords.
struct Image<M> {
    buf: Arc<M>,
    /// One bit per dword (bit `i % 64` of word `i / 64`): changed since this image was last
    /// brought up to date.
    dirty: Vec<u64>,
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
        let words = dwords.len().div_ceil(64);
        let images = bufs.map(|buf| Image {
            buf,
            dirty: vec![0; words],
        });
        let b = BoundImages {
            images,
            next: 0,
            len: dwords.len(),
            written: 0,
        };
        Ok((b, keep))
    }

    /// Run a patch of the host dwords, `patch(log)`, which tells `log` the position of every
    /// dword whose value it changed; those become dirty in both images (also the ones told
    /// before a patch failed: the host dwords did change). A position outside the bound stream
    /// is an error after the patch.
    pub fn log_patch<T>(
        &mut self,
        patch: impl FnOnce(&mut DirtyLog<'_>) -> Result<T>,
    ) -> Result<T> {
        let [a, b] = &mut self.images;
        let mut log = DirtyLog {
            bits: [&mut a.dirty, &mut b.dirty],
            len: self.len,
            outside: None,
        };
        let v = patch(&mut log)?;
        match log.outside {
            Some(pos) => Err(Error::InvalidArgument(format!(
                "a patch of dword {pos} of a bound command stream of {} dwords (a bound queue \
                 takes no more commands)",
                self.len
            ))),
            None => Ok(v),
        }
    }

    /// [`BoundImages::log_patch`] over many patches at once (a replay's new signal values):
    /// `patch(log, item)` for every item in turn, stopping at the first error.
    pub fn log_patches<I>(
        &mut self,
        items: impl IntoIterator<Item = I>,
        mut patch: impl FnMut(&mut DirtyLog<'_>, I) -> Result<()>,
    ) -> Result<()> {
        self.log_patch(|log| items.into_iter().try_for_each(|it| patch(log, it)))
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
        let runs = DirtyRuns {
            bits: &img.dirty,
            from: 0,
        };
        self.written = view(img.buf.as_ref())?.write_u32_runs(0, dwords, runs)?;
        img.dirty.fill(0);
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

/// What a patch of a bound stream tells of the dwords it changed ([`BoundImages::log_patch`]):
/// each becomes dirty in both images.
pub struct DirtyLog<'a> {
    bits: [&'a mut Vec<u64>; 2],
    len: usize,
    /// A position told that lies outside the stream.
    outside: Option<usize>,
}

impl DirtyLog<'_> {
    /// Host dword `pos` of the stream changed.
    pub fn changed(&mut self, pos: usize) {
        if pos >= self.len {
            self.outside.get_or_insert(pos);
            return;
        }
        let (w, bit) = (pos / 64, 1u64 << (pos % 64));
        for b in &mut self.bits {
            b[w] |= bit;
        }
    }
}

/// Store `d` at dword `pos` of a stream's host dwords when it differs, telling `log` (when the
/// stream is bound) that the dword changed: the direct path of a replay's many values on every
/// backend (NV's payload slots, AMD's value dwords), with no call per dword through a closure or
/// a trait object. A position outside `words` is an error naming `what`; nothing is stored then.
#[inline]
pub fn store_logged(
    what: &str,
    words: &mut [u32],
    pos: usize,
    d: u32,
    log: Option<&mut DirtyLog<'_>>,
) -> Result<()> {
    let len = words.len();
    let Some(w) = words.get_mut(pos) else {
        return Err(Error::InvalidArgument(format!(
            "{what}: patch position {pos} is outside the {len}-dword buffer"
        )));
    };
    if *w != d {
        *w = d;
        if let Some(l) = log {
            l.changed(pos);
        }
    }
    Ok(())
}

/// The runs of set bits of a dirty bitmap, in order: dword index ranges.
struct DirtyRuns<'a> {
    bits: &'a [u64],
    /// The first bit not yet looked at.
    from: usize,
}

impl DirtyRuns<'_> {
    /// The first bit at or after `from` that is set (`set`) or clear (`!set`).
    fn next_bit(&self, from: usize, set: bool) -> Option<usize> {
        let flip = if set { 0 } else { !0u64 };
        let mut wi = from / 64;
        let mut w = (self.bits.get(wi)? ^ flip) & (!0u64 << (from % 64));
        loop {
            if w != 0 {
                return Some(wi * 64 + w.trailing_zeros() as usize);
            }
            wi += 1;
            w = self.bits.get(wi)? ^ flip;
        }
    }
}

impl Iterator for DirtyRuns<'_> {
    type Item = Range<usize>;
    fn next(&mut self) -> Option<Range<usize>> {
        let start = self.next_bit(self.from, true)?;
        let end = self.next_bit(start, false).unwrap_or(self.bits.len() * 64);
        self.from = end;
        Some(start..end)
    }
}

/// The CPU view of an image.
fn view<M: HcqBuffer>(buf: &M) -> Result<&crate::driver::Mapping> {
    buf.cpu()
        .ok_or_else(|| Error::Internal("a bound command stream's image is not CPU-mapped".into()))
}

#[cfg(test)]
mod tests {
    use super::DirtyRuns;

    fn runs(bits: &[u64]) -> Vec<std::ops::Range<usize>> {
        DirtyRuns { bits, from: 0 }.collect()
    }

    #[test]
    fn dirty_runs_are_the_runs_of_set_bits_across_words() {
        assert!(runs(&[0, 0]).is_empty());
        assert_eq!(runs(&[0b1011]), vec![0..2, 3..4]);
        // a run across a word boundary is one run; a run to the last bit ends there
        assert_eq!(runs(&[1 << 63, 1, 0]), vec![63..65]);
        assert_eq!(runs(&[!0, !0]), vec![0..128]);
        assert_eq!(runs(&[0, 1 << 5 | 1 << 63]), vec![69..70, 127..128]);
    }
}
