//! [`HcqAllocator`]: device memory for the engine (tinygrad's `HCQAllocator`), over any
//! [`HcqBackend`].
//!
//! - `alloc` hands out a [`RawBuf`] whose owner is an `Arc<HcqMem>` (the backend buffer plus its
//!   device); `offset` views share that owner; `free` drops the allocator's reference only, so
//!   memory a pending submission still holds (in-flight keep-alive) is released when the
//!   timeline passes that submission, never earlier.
//! - `copyin`: host bytes go through staging buffers in host memory (tinygrad `device.py`
//!   `HCQCompatAllocator`: chunks of the backend's staging size, default 4 MiB, up to 16 buffers,
//!   each with the timeline point of its last copy; an idle buffer is reused before another is
//!   made): wait until the buffer's last copy finished, memcpy the chunk in, then
//!   `wait(timeline, v - 1) . copy . signal(timeline, v)` on the copy queue. It returns without
//!   waiting for the GPU.
//! - `copyout`: per chunk, a copy into a staging buffer on the timeline, a CPU wait, a memcpy out;
//!   the next chunk's copy is submitted before this one is read (two buffers in turn).
//! - `transfer`: on one device, a copy on the timeline; across devices (same driver process),
//!   the destination is mapped into the source GPU, the source copy queue waits for both
//!   timelines, copies and signals the source timeline, and the destination's compute queue
//!   waits for that before signaling its own timeline (so later work on either side is ordered).
//!
//! Not guaranteed: concurrent `copyin`s on one device are serialized (one staging ring).

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::device::{encode_copy, Staging, STAGING_OPTS};
use super::profile::ProfQueue;
use super::timeline::TimelinePoint;
use super::{HcqBackend, HcqBuffer, HcqDevice, HwQueue, KeepAlive};
use crate::device::{Allocator, BufferOptions, RawBuf};
use crate::{ensure, Error, Result};

/// Staging buffers per device.
const STAGING_COUNT: usize = 16;

/// Copies out of the device of at least this many bytes read the staging buffers out with
/// streaming stores: the destination is then larger than a core's L2, so keeping it in the
/// cache buys the caller little, and skipping each line's read-for-ownership speeds the copy.
const STREAMING_MIN: usize = 1 << 20;

/// The owner of every `RawBuf` an [`HcqAllocator`] hands out.
pub struct HcqMem<B: HcqBackend> {
    buf: B::Buffer,
    dev: Weak<HcqDevice<B>>,
}

impl<B: HcqBackend> HcqMem<B> {
    /// The backend buffer.
    pub fn buffer(&self) -> &B::Buffer {
        &self.buf
    }
    /// The device it belongs to (if still open).
    pub fn device(&self) -> Result<Arc<HcqDevice<B>>> {
        self.dev
            .upgrade()
            .ok_or_else(|| Error::Device("the buffer's device was closed".into()))
    }
}

/// The `HcqMem` behind a `RawBuf`.
pub fn hcq_mem<B: HcqBackend>(raw: &RawBuf) -> Result<&HcqMem<B>> {
    let any: &(dyn Any + Send + Sync) = raw.owner.as_ref();
    any.downcast_ref::<HcqMem<B>>().ok_or_else(|| {
        Error::Device(format!(
            "{raw:?} was not allocated by an HCQ allocator of this device family"
        ))
    })
}

/// Device memory through an [`HcqDevice`].
pub struct HcqAllocator<B: HcqBackend> {
    dev: Arc<HcqDevice<B>>,
}

impl<B: HcqBackend> HcqAllocator<B> {
    pub fn new(dev: Arc<HcqDevice<B>>) -> Self {
        HcqAllocator { dev }
    }
    /// The device.
    pub fn device(&self) -> &Arc<HcqDevice<B>> {
        &self.dev
    }
}

fn check_in(raw: &RawBuf, off: usize, len: usize, what: &str) -> Result<()> {
    ensure!(
        off.checked_add(len).is_some_and(|e| e <= raw.size),
        InvalidArgument,
        "{what}: {len} bytes at offset {off} exceed {raw:?}"
    );
    Ok(())
}

impl<B: HcqBackend> Allocator for HcqAllocator<B> {
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf> {
        let buf = self.dev.backend().alloc(size, opts)?;
        let mem = Arc::new(HcqMem {
            dev: Arc::downgrade(&self.dev),
            buf,
        });
        Ok(RawBuf {
            addr: mem.buf.va(),
            size,
            owner: mem,
        })
    }

    fn free(&self, buf: RawBuf, _size: usize, _opts: &BufferOptions) {
        // Pending submissions hold their own references; the memory goes when they retire.
        drop(buf);
    }

    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        hcq_mem::<B>(dst)?;
        check_in(dst, 0, src.len(), "copyin")?;
        self.dev.copyin(dst, src)
    }

    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        hcq_mem::<B>(src)?;
        check_in(src, 0, dst.len(), "copyout")?;
        self.dev.copyout(dst, src)
    }

    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        let mem = hcq_mem::<B>(buf)?;
        check_in(buf, offset, size, "offset view")?;
        let base = mem.buf.va();
        ensure!(
            buf.addr >= base && buf.addr + (offset + size) as u64 <= base + mem.buf.size() as u64,
            InvalidArgument,
            "offset view of {size} bytes at {offset} leaves the allocation {base:#x}+{:#x}",
            mem.buf.size()
        );
        Ok(RawBuf {
            addr: buf.addr + offset as u64,
            size,
            owner: Arc::clone(&buf.owner),
        })
    }

    fn transfer(&self, dst: &RawBuf, src: &RawBuf, size: usize) -> Result<()> {
        let (dmem, smem) = (hcq_mem::<B>(dst)?, hcq_mem::<B>(src)?);
        check_in(dst, 0, size, "transfer destination")?;
        check_in(src, 0, size, "transfer source")?;
        let (sdev, ddev) = (smem.device()?, dmem.device()?);
        HcqDevice::transfer(&sdev, &ddev, dst, src, size)
    }

    fn synchronize(&self) -> Result<()> {
        self.dev.synchronize()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B: HcqBackend> HcqDevice<B> {
    /// A staging buffer for the next chunk: the first one whose last copy has finished, so a
    /// run of copies keeps reusing the same one or two buffers, which stay in the CPU's cache;
    /// else a new buffer while the ring has fewer than [`STAGING_COUNT`]; else the one whose
    /// last copy is oldest, after waiting for it. Beyond tinygrad, whose ring hands out its 16
    /// buffers in turn: there each first use allocates (host pages, an RM OS descriptor and a
    /// UVM mapping, ~1.7 ms on an H200: the first 16 small copies of a process each paid for
    /// one), and a 64 MiB copy memcpys through 64 MiB of staging (on the H200 5.3 GB/s host to
    /// device against 8.3 with the reuse).
    ///
    /// `reserved` (the buffer a copyout is about to read) is never handed out: its copy may
    /// have finished, but the CPU has not read it yet.
    pub(crate) fn staging_slot(
        &self,
        stg: &mut Staging<B>,
        reserved: Option<usize>,
    ) -> Result<(usize, Arc<B::Buffer>)> {
        let idle = {
            let st = self.lock();
            let mut idle = None;
            for (i, (_, p)) in stg.bufs.iter().enumerate() {
                if Some(i) != reserved && st.tl.passed(*p)? {
                    idle = Some(i);
                    break;
                }
            }
            idle
        };
        let i = match idle {
            Some(i) => i,
            None if stg.bufs.len() < STAGING_COUNT => {
                // A failed allocation (VRAM exhaustion, an ioctl failing) leaves the ring as is.
                let b = self
                    .backend()
                    .alloc(self.backend().staging_chunk(), &STAGING_OPTS)?;
                ensure!(
                    b.cpu().is_some(),
                    Device,
                    "{}: staging memory is not CPU-mapped",
                    self.name()
                );
                stg.bufs.push((Arc::new(b), TimelinePoint::default()));
                stg.bufs.len() - 1
            }
            None => (0..stg.bufs.len())
                .filter(|&i| Some(i) != reserved)
                .min_by_key(|&i| (stg.bufs[i].1.epoch, stg.bufs[i].1.value))
                .ok_or_else(|| Error::Internal("an empty staging ring is full".into()))?,
        };
        let (buf, mark) = stg.bufs[i].clone();
        self.wait_point(mark, "staging buffer reuse")?;
        Ok((i, buf))
    }

    /// `wait(timeline, v - 1) . copy . signal(timeline, v)` on the copy queue.
    fn copy_on_timeline(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        keep: Vec<KeepAlive>,
        name: String,
    ) -> Result<TimelinePoint> {
        let timing = self.timing_pair(false)?;
        let point = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let v = self.begin(st)?;
            let mut q = self.backend().copy_queue();
            let tl = st.tl.signal.clone();
            encode_copy::<B>(&mut q, &tl, v, dst, src, size as u64, timing.as_ref())?;
            self.commit(st, &mut q, format!("copy {size} bytes ({name})"), keep)?
        };
        self.profile_add(timing.as_ref(), name, ProfQueue::Copy);
        Ok(point)
    }

    /// Host bytes into device memory through the staging ring.
    pub fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        let chunk = self.backend().staging_chunk();
        let mut stg = lock(&self.staging);
        for (i, piece) in src.chunks(chunk).enumerate() {
            let (slot, buf) = self.staging_slot(&mut stg, None)?;
            let Some(view) = buf.cpu() else {
                return Err(Error::Internal("staging buffer lost its CPU view".into()));
            };
            view.write_bytes(0, piece)?;
            let keep: Vec<KeepAlive> = vec![dst.owner.clone(), buf.clone()];
            let dst_va = dst.addr + (i * chunk) as u64;
            let name = format!("CPU -> {}", self.name());
            let p = self.copy_on_timeline(dst_va, buf.va(), piece.len(), keep, name)?;
            stg.bufs[slot].1 = p;
        }
        Ok(())
    }

    /// Device memory to host bytes through the staging ring, pipelined: chunk i+1's copy is
    /// submitted before chunk i is read out, so the copy engine fills one buffer while the CPU
    /// empties the other; copies of [`STREAMING_MIN`] bytes or more read out with streaming
    /// stores ([`crate::driver::Mapping::read_bytes_streaming`]). Measured on the H200 (4 MiB
    /// chunks: the copy engine takes ~80 us, the CPU's plain read-out ~440 us), device to
    /// host 64 MiB: sequential with plain reads 10.5 GB/s, pipelined 12.1, streaming 12.7,
    /// both 17.6 (libcuda 18.1 in the same run); splitting the read-out over 2-8 threads was
    /// slower (5.7-14.8).
    pub fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        let chunk = self.backend().staging_chunk();
        let streaming = dst.len() >= STREAMING_MIN;
        let mut stg = lock(&self.staging);
        let mut pieces = dst.chunks_mut(chunk).enumerate().peekable();
        let mut next = None;
        while let Some((i, piece)) = pieces.next() {
            let (slot, buf, p) = match next.take() {
                Some(ahead) => ahead,
                None => self.copyout_chunk(&mut stg, src, i * chunk, piece.len(), None)?,
            };
            if let Some((j, ahead)) = pieces.peek() {
                let len = ahead.len();
                next = Some(self.copyout_chunk(&mut stg, src, j * chunk, len, Some(slot))?);
            }
            self.wait_point(p, "copyout")?;
            let Some(view) = buf.cpu() else {
                return Err(Error::Internal("staging buffer lost its CPU view".into()));
            };
            if streaming {
                view.read_bytes_streaming(0, piece)?;
            } else {
                view.read_bytes(0, piece)?;
            }
        }
        Ok(())
    }

    /// Submit the copy of `len` bytes at `off` of `src` into a staging buffer other than
    /// `reserved`: the buffer's slot, the buffer and the copy's timeline point.
    fn copyout_chunk(
        &self,
        stg: &mut Staging<B>,
        src: &RawBuf,
        off: usize,
        len: usize,
        reserved: Option<usize>,
    ) -> Result<(usize, Arc<B::Buffer>, TimelinePoint)> {
        let (slot, buf) = self.staging_slot(stg, reserved)?;
        let keep: Vec<KeepAlive> = vec![src.owner.clone(), buf.clone()];
        let name = format!("{} -> CPU", self.name());
        let p = self.copy_on_timeline(buf.va(), src.addr + off as u64, len, keep, name)?;
        stg.bufs[slot].1 = p;
        Ok((slot, buf, p))
    }

    /// Copy `size` bytes from `src` (on `sdev`) to `dst` (on `ddev`).
    pub fn transfer(
        sdev: &Arc<HcqDevice<B>>,
        ddev: &Arc<HcqDevice<B>>,
        dst: &RawBuf,
        src: &RawBuf,
        size: usize,
    ) -> Result<()> {
        let keep: Vec<KeepAlive> = vec![dst.owner.clone(), src.owner.clone()];
        let name = format!("{} -> {}", sdev.name(), ddev.name());
        if sdev.serial() == ddev.serial() {
            return sdev
                .copy_on_timeline(dst.addr, src.addr, size, keep, name)
                .map(|_| ());
        }
        sdev.backend().map_peer(hcq_mem::<B>(dst)?.buffer())?;
        let timing = sdev.timing_pair(false)?;
        let (mut sg, mut dg) = if sdev.serial() < ddev.serial() {
            let s = sdev.lock();
            (s, ddev.lock())
        } else {
            let d = ddev.lock();
            (sdev.lock(), d)
        };
        let (sst, dst_st) = (&mut *sg, &mut *dg);
        let (sv, dv) = (sdev.begin(sst)?, ddev.begin(dst_st)?);
        let (stl, dtl) = (sst.tl.signal.clone(), dst_st.tl.signal.clone());
        let mut q = sdev.backend().copy_queue();
        q.wait(&stl, sv - 1)?.wait(&dtl, dv - 1)?;
        if let Some((s, _)) = &timing {
            q.timestamp(s)?;
        }
        super::HwCopyQueue::copy(&mut q, dst.addr, src.addr, size as u64)?;
        if let Some((_, e)) = &timing {
            q.timestamp(e)?;
        }
        q.signal(&stl, sv)?;
        let what = format!("copy {size} bytes ({name})");
        sdev.commit(sst, &mut q, what, keep)?;
        let mut q2 = ddev.backend().compute_queue();
        q2.wait(&stl, sv)?.wait(&dtl, dv - 1)?.signal(&dtl, dv)?;
        let what = format!("wait for the transfer from {}", sdev.name());
        ddev.commit(dst_st, &mut q2, what, vec![dst.owner.clone()])?;
        drop((sg, dg));
        sdev.profile_add(timing.as_ref(), name, ProfQueue::Copy);
        Ok(())
    }
}
