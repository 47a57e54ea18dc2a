//! One GPFIFO channel as the process drives it (`clc56f.h`, tinygrad `_new_gpu_fifo`,
//! `nvgputypes.h`): its GP entry ring and USERD in the device's GPFIFO area, its work submit token,
//! its error notifier, and a command ring in CPU-mapped VRAM the pushbuffers are copied into before
//! a GP entry points at them.
//!
//! Submission: copy the dwords into the command ring, write the GP entry, publish GPPut, fence,
//! write the token to the usermode page (through [`crate::driver::Driver::write_doorbell`]). A
//! region of the command ring is written again only once the GPU is done reading it: USERD
//! GPGet only says the GP entry was fetched (`clc56f.h` NVC56F_GP_GET), the pushbuffer it points
//! at is read later, so a region copied by a device submission ([`CmdFence`]: the timeline point
//! it signals last, [`crate::hcq::HcqBackend::fence_submissions`]) is freed once the timeline
//! passed that point ([`Regions`]). Not guaranteed: a raw submission outside the device's
//! timeline (`HwQueue::submit` alone) carries no fence, and its region is freed once GPGet
//! passed its entry (all such a region can go by).
//! A bound queue's pushbuffer already lives in GPU memory of its own ([`NvChannel::submit_at`]):
//! its GP entry points there and nothing is copied.
//!
//! Death: [`NvChannel::rc_error`] reads notifier 0 (NvNotification: info32 = the RC error type,
//! status bit 15 = in progress) and names the error (ROBUST_CHANNEL_*).
//!
//! Not guaranteed: the ring and command ring are not shared between threads (the backend holds
//! each channel under a mutex).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::memory::NvBuffer;
use super::signal::NvSignal;
use crate::driver::{Driver, Mapping};
use crate::hcq::{HcqBuffer, HcqSignal, TimelinePoint};
use crate::runtime::nv::gpfifo::{gp_entry, GpFifo, GpFifoIo, USERD_GP_GET, USERD_GP_PUT};
use crate::{bail, ensure, Error, Result};

/// GP entries per channel ring (tinygrad: 0x10000).
pub const GPFIFO_ENTRIES: u32 = 0x10000;
/// Bytes of each channel's command ring.
pub const CMD_RING_BYTES: usize = 2 << 20;
/// Bytes of the GPFIFO area each channel takes (ring + USERD, rounded).
pub const GPFIFO_SLOT: u64 = 1 << 20;

/// Byte offset of a channel's USERD in the GPFIFO area, for a ring at `ring_off`: right after
/// the ring's GPFIFO_ENTRIES 8-byte entries.
pub const fn userd_offset(ring_off: u64) -> u64 {
    ring_off + GPFIFO_ENTRIES as u64 * 8
}

/// The name of an RC error type (the info32 of an error notifier record; nverror.h).
pub fn rc_error_name(t: u32) -> String {
    let name = match t {
        8 => "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
        13 => "ROBUST_CHANNEL_GR_EXCEPTION",
        31 => "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (MMU fault)",
        32 => "ROBUST_CHANNEL_PBDMA_ERROR",
        43 => "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        45 => "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        48 => "ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        69 => "ROBUST_CHANNEL_GR_CLASS_ERROR",
        79 => "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        94 => "ROBUST_CHANNEL_CONTAINED_ERROR",
        95 => "ROBUST_CHANNEL_UNCONTAINED_ERROR",
        119 => "GSP_RPC_TIMEOUT",
        120 => "GSP_ERROR",
        _ => "ROBUST_CHANNEL error",
    };
    format!("{name} ({t})")
}

/// What frees a command-ring region: the timeline point its submission signals last.
#[derive(Clone)]
pub(crate) struct CmdFence {
    pub sig: NvSignal,
    pub point: TimelinePoint,
}

/// One region of the command ring the GPU may still read.
struct Region<F> {
    /// The GP entry number pointing at it.
    gp: u64,
    start: usize,
    end: usize,
    fence: Option<F>,
}

/// The command ring's bookkeeping: where the next pushbuffer goes and the regions the GPU may
/// still read (in submission order, and the GPU finishes them in that order).
pub(crate) struct Regions<F> {
    size: usize,
    pos: usize,
    pending: VecDeque<Region<F>>,
}

impl<F> Regions<F> {
    /// An empty ring of `size` bytes.
    pub(crate) fn new(size: usize) -> Regions<F> {
        Regions {
            size,
            pos: 0,
            pending: VecDeque::new(),
        }
    }

    /// Where `bytes` go next: after the last region, or at 0 when they do not fit before the end.
    pub(crate) fn slot(&self, bytes: usize) -> (usize, usize) {
        let start = if self.pos + bytes > self.size {
            0
        } else {
            self.pos
        };
        (start, start + bytes)
    }

    /// Drop the regions the GPU is done with (a fenced one once `passed(fence)`, an unfenced one
    /// once GPGet passed its entry: `consumed()` entries were fetched, asked at most once and
    /// only for an unfenced region), then whether `start..end` is free.
    pub(crate) fn free(
        &mut self,
        (start, end): (usize, usize),
        mut consumed: impl FnMut() -> Result<u64>,
        passed: impl Fn(&F) -> Result<bool>,
    ) -> Result<bool> {
        let mut fetched = None;
        while let Some(r) = self.pending.front() {
            let done = match &r.fence {
                Some(f) => passed(f)?,
                None => {
                    let n = match fetched {
                        Some(n) => n,
                        None => *fetched.insert(consumed()?),
                    };
                    r.gp < n
                }
            };
            if !done {
                break;
            }
            self.pending.pop_front();
        }
        Ok(!self.pending.iter().any(|r| r.start < end && start < r.end))
    }

    /// Record `start..end` as read by GP entry `gp`, ending at `fence`.
    pub(crate) fn record(&mut self, gp: u64, (start, end): (usize, usize), fence: Option<F>) {
        self.pending.push_back(Region {
            gp,
            start,
            end,
            fence,
        });
        self.pos = end;
    }

    /// Regions the GPU may still read.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// The command ring: a byte window with the regions submissions still read.
struct CmdRing {
    buf: NvBuffer,
    regions: Regions<CmdFence>,
}

/// One channel.
pub struct NvChannel {
    pub(crate) name: &'static str,
    pub(crate) handle: u32,
    pub(crate) token: u32,
    pub(crate) engine_class: u32,
    pub(crate) notifier: NvBuffer,
    fifo: GpFifo,
    ring_off: u64,
    userd_off: u64,
    cmd: CmdRing,
}

/// What a submission writes through.
pub(crate) struct SubmitIo<'a> {
    pub drv: &'a Arc<dyn Driver>,
    pub gpfifo: &'a Mapping,
    pub doorbell: u64,
    /// The fence of the device submission under way, if any.
    pub fence: Option<CmdFence>,
    /// The device timeline's epoch (a fence of an older epoch has passed: the timeline swaps
    /// only when the device is idle).
    pub epoch: u64,
}

struct Io<'a> {
    io: &'a SubmitIo<'a>,
    ring_off: u64,
    userd_off: u64,
}

impl GpFifoIo for Io<'_> {
    fn write_entry(&mut self, index: u32, entry: u64) -> Result<()> {
        let off = self.ring_off + 8 * u64::from(index);
        self.io
            .gpfifo
            .store_u64(off as usize, entry, Ordering::Release)
    }
    fn read_gp_get(&mut self) -> Result<u32> {
        let off = (self.userd_off + USERD_GP_GET) as usize;
        self.io.gpfifo.load_u32(off, Ordering::Acquire)
    }
    fn write_gp_put(&mut self, put: u32) -> Result<()> {
        let off = (self.userd_off + USERD_GP_PUT) as usize;
        self.io.gpfifo.store_u32(off, put, Ordering::Release)
    }
    fn ring_doorbell(&mut self, token: u32) -> Result<()> {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.io
            .drv
            .write_doorbell(self.io.doorbell, u64::from(token))
    }
}

impl NvChannel {
    /// A channel whose ring sits at `ring_off` of the GPFIFO area (USERD right after it).
    pub(crate) fn new(
        name: &'static str,
        handle: u32,
        token: u32,
        engine_class: u32,
        notifier: NvBuffer,
        ring_off: u64,
        cmd: NvBuffer,
    ) -> Result<NvChannel> {
        ensure!(
            cmd.cpu().is_some(),
            Internal,
            "{name} channel: command ring is not CPU-mapped"
        );
        Ok(NvChannel {
            name,
            handle,
            token,
            engine_class,
            notifier,
            fifo: GpFifo::new(GPFIFO_ENTRIES, token)?,
            ring_off,
            userd_off: userd_offset(ring_off),
            cmd: CmdRing {
                regions: Regions::new(cmd.size()),
                buf: cmd,
            },
        })
    }

    /// Byte offset of USERD in the GPFIFO area.
    pub fn userd_off(&self) -> u64 {
        self.userd_off
    }

    /// Byte offset of the ring in the GPFIFO area.
    pub fn ring_off(&self) -> u64 {
        self.ring_off
    }

    /// GP entries published so far.
    pub fn put(&self) -> u64 {
        self.fifo.put()
    }

    /// GP entries the GPU consumed (from USERD GPGet, which the ring writer then keeps).
    fn consumed(fifo: &mut GpFifo, gpfifo: &Mapping, userd_off: u64) -> Result<u64> {
        let gp_get = gpfifo.load_u32((userd_off + USERD_GP_GET) as usize, Ordering::Acquire)?;
        fifo.note_gp_get(gp_get)?;
        Ok(fifo.put() - u64::from(fifo.outstanding(gp_get)?))
    }

    /// Where `bytes` fit in the command ring once the GPU consumed what is there.
    fn place(&mut self, bytes: usize, io: &SubmitIo) -> Result<usize> {
        let size = self.cmd.buf.size();
        ensure!(
            bytes <= size / 2,
            InvalidArgument,
            "{} channel: a pushbuffer of {bytes} bytes exceeds half the {size}-byte command ring",
            self.name
        );
        let slot = self.cmd.regions.slot(bytes);
        let passed = |f: &CmdFence| -> Result<bool> {
            Ok(f.point.epoch < io.epoch || f.sig.value()? >= f.point.value)
        };
        let deadline = Instant::now() + crate::hcq::wait_timeout();
        loop {
            let (fifo, userd_off) = (&mut self.fifo, self.userd_off);
            let consumed = || Self::consumed(fifo, io.gpfifo, userd_off);
            if self.cmd.regions.free(slot, consumed, passed)? {
                return Ok(slot.0);
            }
            if let Some(e) = self.rc_error() {
                bail!(
                    Fault,
                    "{} channel: command ring busy and the channel died: {e}",
                    self.name
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    Timeout,
                    "{} channel: command ring overrun: the GPU has not finished {} earlier submissions",
                    self.name,
                    self.cmd.regions.pending()
                );
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Copy `dwords` into the command ring and submit one GP entry for them.
    pub(crate) fn submit(&mut self, dwords: &[u32], io: &SubmitIo) -> Result<()> {
        if dwords.is_empty() {
            return Ok(());
        }
        let bytes = (dwords.len() * 4).next_multiple_of(256);
        let start = self.place(bytes, io)?;
        let Some(view) = self.cmd.buf.cpu() else {
            return Err(Error::Internal("command ring lost its CPU view".into()));
        };
        view.write_u32s(start, dwords)?;
        let n = self.fifo.put();
        self.submit_at(self.cmd.buf.va() + start as u64, dwords.len(), io)?;
        self.cmd
            .regions
            .record(n, (start, start + bytes), io.fence.clone());
        Ok(())
    }

    /// Submit one GP entry for `dwords` pushbuffer dwords already in GPU memory at `va` (a bound
    /// queue's own buffer: nothing is copied into the command ring). The caller keeps them
    /// unchanged until the GPU is done with them.
    pub(crate) fn submit_at(&mut self, va: u64, dwords: usize, io: &SubmitIo) -> Result<()> {
        let len = u32::try_from(dwords).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} channel: a pushbuffer of {dwords} dwords",
                self.name
            ))
        })?;
        let entry = gp_entry(va, len)?;
        let mut fio = Io {
            io,
            ring_off: self.ring_off,
            userd_off: self.userd_off,
        };
        // the ring has room almost always: the timeout is read only when it does not
        if self.fifo.try_submit(entry, &mut fio)? {
            return Ok(());
        }
        self.fifo
            .submit(entry, &mut fio, crate::hcq::wait_timeout())
    }

    /// Byte offset in the command ring where the next copied pushbuffer would start.
    pub fn cmd_pos(&self) -> usize {
        self.cmd.regions.pos
    }

    /// The RC error RM wrote into this channel's error notifier, named; `None` while alive.
    pub fn rc_error(&self) -> Option<String> {
        let n = self.notifier.cpu()?;
        let info32 = n.load_u32(8, Ordering::Acquire).ok()?;
        let status = n.load_u32(12, Ordering::Acquire).ok()? >> 16;
        (info32 != 0 || status & 0x7FFF != 0).then(|| {
            format!(
                "{} channel (handle {:#x}): {} in the error notifier (status {status:#x})",
                self.name,
                self.handle,
                rc_error_name(info32)
            )
        })
    }

    /// Ring state for messages.
    pub fn describe(&self, gpfifo: &Mapping) -> String {
        let get = gpfifo
            .load_u32((self.userd_off + USERD_GP_GET) as usize, Ordering::Acquire)
            .map_or_else(|e| format!("unreadable ({e})"), |g| g.to_string());
        format!(
            "{} channel {:#x} (class {:#x}): GPPut {} GPGet {get} (token {:#x})",
            self.name,
            self.handle,
            self.engine_class,
            self.fifo.gp_put(),
            self.token
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Regions;
    use crate::Result;
    use std::cell::Cell;

    /// A region whose GP entry the GPU fetched (GPGet past it) is still busy until the timeline
    /// passed its submission's point; an unfenced one (a raw submission) goes by GPGet.
    #[test]
    fn a_region_is_reused_only_once_the_timeline_passed_its_point() {
        let timeline = Cell::new(0u64);
        let passed = |f: &u64| -> Result<bool> { Ok(timeline.get() >= *f) };
        let mut r: Regions<u64> = Regions::new(1024);
        // two 512-byte submissions fill the ring; the third wraps onto the first
        let a = r.slot(512);
        assert_eq!(a, (0, 512));
        r.record(0, a, Some(5));
        let b = r.slot(512);
        assert_eq!(b, (512, 1024));
        r.record(1, b, Some(6));
        let c = r.slot(512);
        assert_eq!(c, (0, 512), "wraps to the start");
        // GPGet passed both entries (2 consumed) but the GPU still runs the first pushbuffer
        timeline.set(4);
        assert!(
            !r.free(c, || Ok(2), passed).unwrap(),
            "reused while the GPU reads it"
        );
        timeline.set(5);
        assert!(r.free(c, || Ok(2), passed).unwrap());
        assert_eq!(r.pending(), 1, "the second region stays until point 6");
        r.record(2, c, None);
        // the unfenced region goes once GPGet passes entry 2; the fenced one still waits
        let d = r.slot(512);
        assert_eq!(d, (512, 1024));
        timeline.set(6);
        assert!(r.free(d, || Ok(2), passed).unwrap());
        assert_eq!(r.pending(), 1);
        assert!(
            !r.free((0, 512), || Ok(2), passed).unwrap(),
            "GPGet has not passed entry 2"
        );
        assert!(r.free((0, 512), || Ok(3), passed).unwrap());
        assert_eq!(r.pending(), 0);
    }
}
