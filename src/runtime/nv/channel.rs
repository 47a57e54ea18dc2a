//! One GPFIFO channel as the process drives it (`clc56f.h`, tinygrad `_new_gpu_fifo`,
//! `nvgputypes.h`): its GP entry ring and USERD in the device's GPFIFO area, its work submit token,
//! its error notifier, and a command ring in CPU-mapped VRAM the pushbuffers are copied into before
//! a GP entry points at them.
//!
//! Submission: copy the dwords into the command ring (never over a region a GP entry the GPU has
//! not consumed yet points at: tracked against USERD GPGet), write the GP entry, publish GPPut,
//! fence, write the token to the usermode page (through [`crate::driver::Driver::write_doorbell`]).
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
use crate::driver::{Driver, Mapping};
use crate::hcq::HcqBuffer;
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

/// The command ring: a byte window with the GP entries that still reference it.
struct CmdRing {
    buf: NvBuffer,
    pos: usize,
    /// (GP entry number, start, end) of submissions the GPU may still read.
    pending: VecDeque<(u64, usize, usize)>,
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
                buf: cmd,
                pos: 0,
                pending: VecDeque::new(),
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

    /// GP entries the GPU consumed (from USERD GPGet).
    fn consumed(&self, gpfifo: &Mapping) -> Result<u64> {
        let gp_get =
            gpfifo.load_u32((self.userd_off + USERD_GP_GET) as usize, Ordering::Acquire)?;
        Ok(self.fifo.put() - u64::from(self.fifo.outstanding(gp_get)?))
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
        let start = if self.cmd.pos + bytes > size {
            0
        } else {
            self.cmd.pos
        };
        let end = start + bytes;
        let deadline = Instant::now() + crate::hcq::wait_timeout();
        loop {
            let done = self.consumed(io.gpfifo)?;
            while matches!(self.cmd.pending.front(), Some(&(n, _, _)) if n < done) {
                self.cmd.pending.pop_front();
            }
            let busy = self
                .cmd
                .pending
                .iter()
                .any(|&(_, s, e)| s < end && start < e);
            if !busy {
                return Ok(start);
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
                    "{} channel: command ring overrun: the GPU has not consumed {} earlier submissions (GPGet behind)",
                    self.name,
                    self.cmd.pending.len()
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
        self.cmd.pending.push_back((n, start, start + bytes));
        self.cmd.pos = start + bytes;
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
        self.cmd.pos
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
