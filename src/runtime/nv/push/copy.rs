//! Copy-engine method groups (subchannel [`SUBC_COPY`], open-gpu-doc `clc6b5.h`..`clcab5.h`):
//! linear copies split into pieces of at most [`COPY_PIECE_BYTES`] (LINE_LENGTH_IN is 32 bits;
//! tinygrad#10117/#10118 broke on 4 GiB copies), and the copy-engine semaphore release
//! (SET_SEMAPHORE_A/B/PAYLOAD, then LAUNCH_DMA with FLUSH_ENABLE and a four-word release: payload
//! at +0, timestamp at +8).

use super::{
    check_addr, CopyAddrSlots, CopyCmd, CopyDstPatch, CopySrcPatch, PushBuf, SignalAddrPatch,
    SignalCmd, SignalValuePatch, SUBC_COPY,
};
use super::{AddrSlots, ValueSlots};
use crate::hw::nv::methods::*;
use crate::{ensure, Result};

/// Largest piece one LAUNCH_DMA copies (2^31 bytes, as tinygrad master).
pub const COPY_PIECE_BYTES: u64 = 1 << 31;

/// Dwords one copy piece takes: OFFSET group (1 + 4), LINE_LENGTH_IN + LINE_COUNT (1 + 2),
/// LAUNCH_DMA (1 + 1).
const PIECE_DWORDS: usize = 10;

impl PushBuf {
    /// Copies `len` bytes (> 0) from `src` to `dst` (GPU virtual addresses): per piece,
    /// OFFSET_IN_UPPER/LOWER + OFFSET_OUT_UPPER/LOWER, LINE_LENGTH_IN + LINE_COUNT = 1 (ignored
    /// without MULTI_LINE_ENABLE; NVK writes it too), LAUNCH_DMA = 0x182
    /// (non-pipelined, pitch to pitch, virtual, one line). Both ranges must fit the copy class's
    /// address width.
    pub fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<CopyCmd> {
        ensure!(
            len > 0,
            InvalidArgument,
            "copy {src:#x} -> {dst:#x}: length 0"
        );
        let bits = self.classes.copy.addr_bits;
        for (what, a) in [("copy source", src), ("copy destination", dst)] {
            let Some(end) = a.checked_add(len) else {
                crate::bail!(InvalidArgument, "{what}: {a:#x} + {len:#x} overflows")
            };
            check_addr(what, end - 1, 1, bits)?;
        }
        self.all_or_nothing(|b| {
            let first = b.len() + 1;
            let mut off = 0;
            while off < len {
                let n = (len - off).min(COPY_PIECE_BYTES);
                let (s, d) = (src + off, dst + off);
                let data = [(s >> 32) as u32, s as u32, (d >> 32) as u32, d as u32];
                b.method(SUBC_COPY, OFFSET_IN_UPPER, &data)?;
                b.method(SUBC_COPY, LINE_LENGTH_IN, &[n as u32, 1])?;
                b.method(SUBC_COPY, LAUNCH_DMA, &[launch_dma::COPY])?;
                off += n;
            }
            let slots = |first_upper| CopyAddrSlots {
                first_upper,
                stride: PIECE_DWORDS,
                pieces: len.div_ceil(COPY_PIECE_BYTES) as usize,
                piece_bytes: COPY_PIECE_BYTES,
                len,
                bits,
            };
            Ok(CopyCmd {
                src: CopySrcPatch(slots(first)),
                dst: CopyDstPatch(slots(first + 2)),
            })
        })
    }

    /// Copy-engine semaphore release at `addr` (16-byte aligned): SET_SEMAPHORE_A (upper), B
    /// (lower), PAYLOAD, then LAUNCH_DMA = FLUSH_ENABLE | four-word release (0x14): the payload at
    /// `addr`, a timestamp at `addr + 8`. With `payload64` (classes with
    /// SET_SEMAPHORE_PAYLOAD_UPPER only) the group also writes PAYLOAD_UPPER and LAUNCH_DMA sets
    /// SEMAPHORE_PAYLOAD_SIZE = two words (UNCONFIRMED on hardware; tinygrad uses 32-bit
    /// payloads). Without it the value must fit 32 bits.
    pub fn copy_signal(&mut self, addr: u64, value: u64, payload64: bool) -> Result<SignalCmd> {
        let class = self.classes.copy;
        ensure!(
            !payload64 || class.payload_upper,
            InvalidArgument,
            "copy_signal: {} has no SET_SEMAPHORE_PAYLOAD_UPPER (64-bit payloads)",
            class.name
        );
        check_addr("copy_signal", addr, 16, class.addr_bits)?;
        ensure!(
            payload64 || value <= u64::from(u32::MAX),
            InvalidArgument,
            "copy_signal: value {value:#x} does not fit the 32-bit payload"
        );
        self.all_or_nothing(|b| {
            let mut data = vec![(addr >> 32) as u32, addr as u32, value as u32];
            let mut launch = launch_dma::SEMAPHORE_RELEASE;
            if payload64 {
                data.push((value >> 32) as u32);
                launch |= launch_dma::SEMAPHORE_PAYLOAD_SIZE_TWO_WORD;
            }
            let pos = b.method(SUBC_COPY, SET_SEMAPHORE_A, &data)?;
            b.method(SUBC_COPY, LAUNCH_DMA, &[launch])?;
            Ok(SignalCmd {
                addr: SignalAddrPatch(AddrSlots {
                    lo: pos + 1,
                    hi: pos,
                    bits: class.addr_bits,
                    align: 16,
                }),
                value: SignalValuePatch(ValueSlots {
                    lo: pos + 2,
                    hi: payload64.then_some(pos + 3),
                }),
            })
        })
    }

    /// The copy channel's setup: SET_OBJECT(copy class) on [`SUBC_COPY`].
    pub fn copy_setup(&mut self) -> Result<()> {
        let class = self.classes.copy.class;
        self.set_object(SUBC_COPY, class)
    }
}
