//! SDMA copy-queue packets (Linux `amdgpu/sdma_v6_0_0_pkt_open.h`): a `Vec<u32>`-backed command
//! buffer ([`SdmaBuf`]) with builders for NOP, COPY_LINEAR (split into the target's maximum piece
//! size), FENCE, TRAP, POLL_REGMEM and TIMESTAMP (GET_GLOBAL), the HCQ composites
//! `signal`/`wait`/`copy`, and the ring-placement rule the submitter must follow: a packet never
//! straddles the ring end; the tail is zero-filled (zero dwords are NOPs) and the packet starts
//! again at offset 0.
//!
//! Not guaranteed: GCR_REQ, INDIRECT and the tiled/broadcast copies are not built (tinygrad 0.9.2
//! does not use them); the software GPU and decoder reject them.

use crate::hw::amd::pm4::CompareFunction;
use crate::hw::amd::sdma::*;
use crate::hw::amd::targets::GfxTarget;
use crate::runtime::amd::pm4::patch::{addr_dwords, value_dword};
use crate::runtime::amd::pm4::{patch_dwords, patch_values, PatchPoint, ValuePatch};
use crate::runtime::amd::pm4::{
    CopyAddrPatch, CopyPatch, MailboxPatch, SignalAddrPatch, SignalEvent, SignalPatch,
    SignalValuePatch, TimestampAddrPatch, WaitAddrPatch, WaitPatch, WaitValuePatch,
};
use crate::{ensure, Result};

/// An SDMA command buffer for one target, remembering where each packet starts.
#[derive(Debug, Clone)]
pub struct SdmaBuf {
    target: &'static GfxTarget,
    dwords: Vec<u32>,
    starts: Vec<usize>,
}

impl SdmaBuf {
    /// An empty buffer building packets for `target`.
    pub fn new(target: &'static GfxTarget) -> SdmaBuf {
        SdmaBuf {
            target,
            dwords: Vec::new(),
            starts: Vec::new(),
        }
    }

    /// The target the packets are laid out for.
    pub fn target(&self) -> &'static GfxTarget {
        self.target
    }

    /// The dwords built so far.
    pub fn dwords(&self) -> &[u32] {
        &self.dwords
    }

    /// Number of dwords built so far.
    pub fn len(&self) -> usize {
        self.dwords.len()
    }

    /// Whether nothing was built yet.
    pub fn is_empty(&self) -> bool {
        self.dwords.is_empty()
    }

    /// Removes every packet (keeps the allocations).
    pub fn clear(&mut self) {
        self.dwords.clear();
        self.starts.clear();
    }

    /// Rewrites a patch point of this buffer.
    pub fn patch<P: PatchPoint>(&mut self, patch: &P, value: P::Value) -> Result<()> {
        patch_dwords(&mut self.dwords, patch, value)
    }

    /// Rewrites value patch points in turn, straight into the dwords
    /// ([`crate::runtime::amd::pm4::patch_values`]: SDMA streams stay unbound, nothing to log).
    pub fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
    ) -> Result<()> {
        patch_values(&mut self.dwords, points, None)
    }

    /// Runs `f`; if it fails, drops whatever it appended.
    fn all_or_nothing<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let (len, packets) = (self.dwords.len(), self.starts.len());
        let r = f(self);
        if r.is_err() {
            self.dwords.truncate(len);
            self.starts.truncate(packets);
        }
        r
    }

    fn push_packet(&mut self, dwords: &[u32]) -> usize {
        let start = self.dwords.len();
        self.starts.push(start);
        self.dwords.extend_from_slice(dwords);
        start
    }

    /// NOP followed by `count` zero dwords.
    pub fn nop(&mut self, count: u32) -> Result<()> {
        ensure!(
            count <= SDMA_NOP_COUNT_MASK,
            InvalidArgument,
            "SDMA NOP: count {count} exceeds 14 bits"
        );
        let start =
            self.push_packet(&[sdma_header(SdmaOp::NOP, 0) | count << SDMA_NOP_COUNT_SHIFT]);
        self.dwords.resize(start + 1 + count as usize, 0);
        Ok(())
    }

    /// COPY_LINEAR of `size` bytes from `src` to `dst`, split into pieces of at most the target's
    /// `sdma.max_copy_bytes`.
    pub fn copy_linear(&mut self, dst: u64, src: u64, size: u64) -> Result<CopyPatch> {
        self.all_or_nothing(|b| b.copy_linear_packets(dst, src, size))
    }

    fn copy_linear_packets(&mut self, dst: u64, src: u64, size: u64) -> Result<CopyPatch> {
        ensure!(
            size > 0,
            InvalidArgument,
            "SDMA COPY_LINEAR: zero-byte copy {src:#x} -> {dst:#x}"
        );
        let end_ok = src.checked_add(size).is_some_and(|e| e <= 1 << 48)
            && dst.checked_add(size).is_some_and(|e| e <= 1 << 48);
        ensure!(
            end_ok,
            InvalidArgument,
            "SDMA COPY_LINEAR: {size} bytes {src:#x} -> {dst:#x} leave the 48-bit VA range"
        );
        let max = self
            .target
            .sdma
            .max_copy_bytes
            .min(1 << self.target.sdma.copy_count_bits);
        let mut patch = CopyPatch {
            src: CopyAddrPatch::new(),
            dst: CopyAddrPatch::new(),
        };
        let mut off = 0;
        while off < size {
            let n = (size - off).min(max);
            let [s_lo, s_hi] = addr_dwords("SDMA COPY_LINEAR src", src + off, 1)?;
            let [d_lo, d_hi] = addr_dwords("SDMA COPY_LINEAR dst", dst + off, 1)?;
            let hdr = sdma_header(SdmaOp::COPY, SDMA_SUBOP_COPY_LINEAR);
            let start = self.push_packet(&[hdr, (n - 1) as u32, 0, s_lo, s_hi, d_lo, d_hi]);
            patch.src.push(start + 3, off);
            patch.dst.push(start + 5, off);
            off += n;
        }
        Ok(patch)
    }

    /// FENCE: write the 32-bit `value` to `addr` (4-byte aligned).
    pub fn fence(&mut self, addr: u64, value: u64) -> Result<(SignalAddrPatch, SignalValuePatch)> {
        let [lo, hi] = addr_dwords("SDMA FENCE", addr, 4)?;
        let value = value_dword("SDMA FENCE", value)?;
        let mtype = self
            .target
            .sdma
            .fence_mtype
            .map_or(0, |m| m << SDMA_FENCE_MTYPE_SHIFT);
        let start = self.push_packet(&[sdma_header(SdmaOp::FENCE, 0) | mtype, lo, hi, value]);
        Ok((
            SignalAddrPatch::at(start + 1),
            SignalValuePatch::at(start + 3),
        ))
    }

    /// TRAP: raise an interrupt with `int_context` (28 bits; the KFD event id).
    pub fn trap(&mut self, int_context: u32) -> Result<()> {
        ensure!(
            int_context < 1 << SDMA_TRAP_CONTEXT_BITS,
            InvalidArgument,
            "SDMA TRAP: context {int_context:#x} exceeds 28 bits"
        );
        self.push_packet(&[sdma_header(SdmaOp::TRAP, 0), int_context]);
        Ok(())
    }

    /// POLL_REGMEM on memory.
    pub fn poll_regmem(&mut self, p: &PollRegmem) -> Result<()> {
        self.poll_regmem_at(p).map(|_| ())
    }

    fn poll_regmem_at(&mut self, p: &PollRegmem) -> Result<usize> {
        let [lo, hi] = addr_dwords("SDMA POLL_REGMEM", p.addr, 4)?;
        ensure!(
            p.interval <= 0xFFFF && p.retry_count <= 0xFFF,
            InvalidArgument,
            "SDMA POLL_REGMEM: interval {:#x} (16 bits) or retry count {:#x} (12 bits) out of range",
            p.interval,
            p.retry_count
        );
        let hdr = sdma_header(SdmaOp::POLL_REGMEM, 0)
            | p.function.bits() << SDMA_POLL_FUNC_SHIFT
            | SDMA_POLL_MEM_POLL;
        Ok(self.push_packet(&[
            hdr,
            lo,
            hi,
            p.reference,
            p.mask,
            p.interval | p.retry_count << 16,
        ]))
    }

    /// TIMESTAMP GET_GLOBAL: write the 64-bit GPU clock to `addr` (8-byte aligned).
    pub fn timestamp(&mut self, addr: u64) -> Result<TimestampAddrPatch> {
        let [lo, hi] = addr_dwords("SDMA TIMESTAMP", addr, 8)?;
        let start = self.push_packet(&[
            sdma_header(SdmaOp::TIMESTAMP, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL),
            lo,
            hi,
        ]);
        Ok(TimestampAddrPatch::at(start + 1))
    }

    /// Signal: FENCE `value` to `addr`; with an `event`, FENCE the event id into its mailbox and
    /// TRAP with it (tinygrad `ops_amd.py` `_signal`).
    pub fn signal(
        &mut self,
        addr: u64,
        value: u64,
        event: Option<SignalEvent>,
    ) -> Result<SignalPatch> {
        self.all_or_nothing(|b| b.signal_packets(addr, value, event))
    }

    fn signal_packets(
        &mut self,
        addr: u64,
        value: u64,
        event: Option<SignalEvent>,
    ) -> Result<SignalPatch> {
        let (addr, value) = self.fence(addr, value)?;
        let event = match event {
            None => None,
            Some(ev) => {
                addr_dwords("SDMA signal mailbox (8-byte event slot)", ev.mailbox, 8)?;
                let (mb_addr, mb_value) = self.fence(ev.mailbox, u64::from(ev.event_id))?;
                self.trap(ev.event_id)?;
                let trap_ctx = self.dwords.len() - 1;
                Some(MailboxPatch::at(
                    mb_addr.pos(),
                    [mb_value.pos(), trap_ctx],
                    SDMA_TRAP_CONTEXT_BITS,
                ))
            }
        };
        Ok(SignalPatch { addr, value, event })
    }

    /// Wait until the dword at `addr` is `>= value` (POLL_REGMEM GEQ, interval 4, retry 0xFFF).
    pub fn wait(&mut self, addr: u64, value: u64) -> Result<WaitPatch> {
        let reference = value_dword("SDMA wait", value)?;
        let pos = self.poll_regmem_at(&PollRegmem {
            function: CompareFunction::GEQ,
            addr,
            reference,
            mask: 0xFFFF_FFFF,
            interval: 4,
            retry_count: 0xFFF,
        })?;
        Ok(WaitPatch {
            addr: WaitAddrPatch::at(pos + 1),
            value: WaitValuePatch::at(pos + 3),
        })
    }

    /// The packets as (start, end) dword ranges.
    fn packets(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let ends = self
            .starts
            .iter()
            .skip(1)
            .copied()
            .chain(std::iter::once(self.dwords.len()));
        self.starts.iter().copied().zip(ends)
    }

    /// Bytes this buffer occupies in a ring of `ring_size` bytes when written at `wptr`,
    /// including the zero padding of the wrap rule. A submitter waits until
    /// `wptr + needed - rptr <= ring_size` before writing.
    pub fn ring_bytes_needed(&self, ring_size: u64, wptr: u64) -> Result<u64> {
        let mut end = wptr;
        for (s, e) in self.packets() {
            end = place_packet(ring_size, end, 4 * (e - s) as u64)?.1 + 4 * (e - s) as u64;
        }
        Ok(end - wptr)
    }

    /// Writes the buffer into an SDMA ring of `ring_size` bytes (a power of two) at write
    /// pointer `wptr` (bytes, monotonic), applying the wrap rule: `sink(ring_byte_offset, dwords)`
    /// receives the zero padding and the packets. Returns the new write pointer.
    pub fn copy_to_ring(
        &self,
        ring_size: u64,
        wptr: u64,
        sink: &mut dyn FnMut(u64, &[u32]) -> Result<()>,
    ) -> Result<u64> {
        static ZEROS: [u32; 64] = [0; 64];
        let mut w = wptr;
        for (s, e) in self.packets() {
            let bytes = 4 * (e - s) as u64;
            let (pad, start) = place_packet(ring_size, w, bytes)?;
            let mut pad_at = w % ring_size;
            let mut left = (pad / 4) as usize;
            while left > 0 {
                let n = left.min(ZEROS.len());
                sink(pad_at, &ZEROS[..n])?;
                pad_at += 4 * n as u64;
                left -= n;
            }
            sink(start % ring_size, &self.dwords[s..e])?;
            w = start + bytes;
        }
        Ok(w)
    }
}

/// Where a packet of `bytes` goes in an SDMA ring of `ring_size` bytes at write pointer `wptr`:
/// `(padding bytes, monotonic start)`. A packet that would cross the ring end starts at the next
/// ring start instead, after `padding` zero bytes.
pub fn place_packet(ring_size: u64, wptr: u64, bytes: u64) -> Result<(u64, u64)> {
    ensure!(
        ring_size.is_power_of_two() && ring_size >= 4,
        InvalidArgument,
        "SDMA ring: size {ring_size} is not a power of two"
    );
    ensure!(
        wptr % 4 == 0,
        InvalidArgument,
        "SDMA ring: write pointer {wptr:#x} is not dword aligned"
    );
    ensure!(
        bytes <= ring_size,
        InvalidArgument,
        "SDMA ring: a {bytes}-byte packet exceeds the {ring_size}-byte ring"
    );
    let at = wptr % ring_size;
    if at + bytes > ring_size {
        let pad = ring_size - at;
        Ok((pad, wptr + pad))
    } else {
        Ok((0, wptr))
    }
}

#[cfg(test)]
mod tests;
