//! SDMA decoding: header -> packet length, packet dwords -> [`SdmaPacket`] (validated against the
//! target's SDMA facts), and the one-line text form of each packet.

use crate::hw::amd::pm4::CompareFunction;
use crate::hw::amd::sdma::{
    PollRegmem, SdmaOp, SDMA_FENCE_MTYPE_SHIFT, SDMA_NOP_COUNT_MASK, SDMA_NOP_COUNT_SHIFT,
    SDMA_POLL_FUNC_SHIFT, SDMA_POLL_HDP_FLUSH, SDMA_POLL_MEM_POLL, SDMA_SUBOP_COPY_LINEAR,
    SDMA_SUBOP_TIMESTAMP_GET_GLOBAL, SDMA_TRAP_CONTEXT_BITS,
};
use crate::hw::amd::targets::GfxTarget;
use crate::{bail, ensure, Result};
use std::fmt;

/// One decoded SDMA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdmaPacket {
    /// NOP (a zero dword is a NOP with count 0).
    Nop {
        count: u32,
    },
    CopyLinear {
        bytes: u64,
        src: u64,
        dst: u64,
    },
    Fence {
        mtype: u32,
        addr: u64,
        data: u32,
    },
    Trap {
        int_context: u32,
    },
    PollRegmem(PollRegmem),
    Timestamp {
        addr: u64,
    },
}

impl SdmaPacket {
    /// The packet mnemonic.
    pub fn name(&self) -> &'static str {
        match self {
            SdmaPacket::Nop { .. } => "NOP",
            SdmaPacket::CopyLinear { .. } => "COPY_LINEAR",
            SdmaPacket::Fence { .. } => "FENCE",
            SdmaPacket::Trap { .. } => "TRAP",
            SdmaPacket::PollRegmem(_) => "POLL_REGMEM",
            SdmaPacket::Timestamp { .. } => "TIMESTAMP",
        }
    }
}

/// Total dwords (header included) of the SDMA packet starting with `header`.
pub fn sdma_packet_len(header: u32) -> Result<usize> {
    sdma_header(header).map(|(_, len)| len)
}

fn sdma_header(header: u32) -> Result<(SdmaOp, usize)> {
    let (op, sub) = (header & 0xFF, header >> 8 & 0xFF);
    let Some(op) = SdmaOp::from_u32(op) else {
        bail!(Fault, "SDMA header {header:#010x}: unknown opcode {op}")
    };
    let len = match op {
        SdmaOp::NOP => 1 + (header >> SDMA_NOP_COUNT_SHIFT & SDMA_NOP_COUNT_MASK) as usize,
        SdmaOp::COPY if sub == SDMA_SUBOP_COPY_LINEAR => 7,
        SdmaOp::FENCE => 4,
        SdmaOp::TRAP => 2,
        SdmaOp::POLL_REGMEM => 6,
        SdmaOp::TIMESTAMP if sub == SDMA_SUBOP_TIMESTAMP_GET_GLOBAL => 3,
        SdmaOp::COPY | SdmaOp::TIMESTAMP => bail!(
            Fault,
            "SDMA header {header:#010x}: {} sub-op {sub} is not supported",
            op.name()
        ),
    };
    Ok((op, len))
}

fn addr64(what: &str, lo: u32, hi: u32, align: u64) -> Result<u64> {
    let a = u64::from(hi) << 32 | u64::from(lo);
    ensure!(
        a % align == 0,
        Fault,
        "SDMA {what}: address {a:#x} is not {align}-byte aligned"
    );
    ensure!(
        a < 1 << 48,
        Fault,
        "SDMA {what}: address {a:#x} exceeds the 48-bit GPU VA range"
    );
    Ok(a)
}

fn no_flags(what: &str, header: u32, allowed: u32) -> Result<()> {
    ensure!(
        header & !(0xFFFF | allowed) == 0,
        Fault,
        "SDMA {what}: unsupported header flags in {header:#010x}"
    );
    Ok(())
}

/// Decodes one packet (`dwords` starts at its header and holds at least the whole packet).
/// Returns the packet and its length in dwords.
pub fn decode_sdma_packet(target: &GfxTarget, dwords: &[u32]) -> Result<(SdmaPacket, usize)> {
    let Some(&h) = dwords.first() else {
        bail!(Fault, "SDMA: empty packet")
    };
    let (op, len) = sdma_header(h)?;
    ensure!(
        dwords.len() >= len,
        Fault,
        "SDMA {}: packet of {len} dwords truncated to {}",
        op.name(),
        dwords.len()
    );
    let d = &dwords[..len];
    let p = match op {
        SdmaOp::NOP => {
            no_flags("NOP", h & !(SDMA_NOP_COUNT_MASK << SDMA_NOP_COUNT_SHIFT), 0)?;
            ensure!(
                h >> 8 & 0xFF == 0,
                Fault,
                "SDMA NOP: sub-op set in {h:#010x}"
            );
            SdmaPacket::Nop {
                count: h >> SDMA_NOP_COUNT_SHIFT & SDMA_NOP_COUNT_MASK,
            }
        }
        SdmaOp::COPY => copy_linear(target, h, d)?,
        SdmaOp::FENCE => {
            // SDMA 4's FENCE header has no MTYPE (vega10_sdma_pkt_open.h); SDMA 5+ has 18:16.
            let mtype = target
                .sdma
                .fence_mtype
                .map_or(0, |_| 7 << SDMA_FENCE_MTYPE_SHIFT);
            no_flags("FENCE", h, mtype)?;
            SdmaPacket::Fence {
                mtype: h >> SDMA_FENCE_MTYPE_SHIFT & 7,
                addr: addr64("FENCE", d[1], d[2], 4)?,
                data: d[3],
            }
        }
        SdmaOp::TRAP => {
            no_flags("TRAP", h, 0)?;
            ensure!(
                d[1] >> SDMA_TRAP_CONTEXT_BITS == 0,
                Fault,
                "SDMA TRAP: context {:#x} exceeds 28 bits",
                d[1]
            );
            SdmaPacket::Trap { int_context: d[1] }
        }
        SdmaOp::POLL_REGMEM => poll_regmem(h, d)?,
        SdmaOp::TIMESTAMP => {
            no_flags("TIMESTAMP", h, 0)?;
            SdmaPacket::Timestamp {
                addr: addr64("TIMESTAMP", d[1], d[2], 8)?,
            }
        }
    };
    Ok((p, len))
}

fn copy_linear(target: &GfxTarget, h: u32, d: &[u32]) -> Result<SdmaPacket> {
    no_flags("COPY_LINEAR", h, 0)?;
    let bits = target.sdma.copy_count_bits;
    ensure!(
        d[1] >> bits == 0,
        Fault,
        "SDMA COPY_LINEAR: count {:#x} exceeds {bits} bits on {}",
        d[1],
        target.name
    );
    // Mesa sid.h: the hardware does not copy the last 255 bytes of a (1 << 22) - 1 count, so no
    // driver sends more than SDMA_V2_0_COPY_MAX_BYTES (SDMA_V5_2_COPY_MAX_BYTES from SDMA 5.2).
    let max = target.sdma.max_copy_bytes;
    ensure!(
        u64::from(d[1]) < max,
        Fault,
        "SDMA COPY_LINEAR: {} bytes exceed the {max:#x} one packet copies reliably on {}",
        u64::from(d[1]) + 1,
        target.name
    );
    ensure!(
        d[2] == 0,
        Fault,
        "SDMA COPY_LINEAR: unsupported parameters {:#x}",
        d[2]
    );
    Ok(SdmaPacket::CopyLinear {
        bytes: u64::from(d[1]) + 1,
        src: addr64("COPY_LINEAR src", d[3], d[4], 1)?,
        dst: addr64("COPY_LINEAR dst", d[5], d[6], 1)?,
    })
}

fn poll_regmem(h: u32, d: &[u32]) -> Result<SdmaPacket> {
    no_flags(
        "POLL_REGMEM",
        h,
        SDMA_POLL_HDP_FLUSH | 7 << SDMA_POLL_FUNC_SHIFT | SDMA_POLL_MEM_POLL,
    )?;
    ensure!(
        h & SDMA_POLL_MEM_POLL != 0 && h & SDMA_POLL_HDP_FLUSH == 0,
        Fault,
        "SDMA POLL_REGMEM: register polls and HDP flushes are not supported ({h:#010x})"
    );
    let f = h >> SDMA_POLL_FUNC_SHIFT & 7;
    let Some(function) = CompareFunction::from_u32(f) else {
        bail!(Fault, "SDMA POLL_REGMEM: function {f} is not supported")
    };
    ensure!(
        d[5] >> 28 == 0,
        Fault,
        "SDMA POLL_REGMEM: reserved bits set in {:#x}",
        d[5]
    );
    Ok(SdmaPacket::PollRegmem(PollRegmem {
        function,
        addr: addr64("POLL_REGMEM", d[1], d[2], 4)?,
        reference: d[3],
        mask: d[4],
        interval: d[5] & 0xFFFF,
        retry_count: d[5] >> 16 & 0xFFF,
    }))
}

/// Decodes a whole SDMA stream into `(dword position, packet)` pairs; errors name the position.
pub fn decode_sdma(target: &GfxTarget, dwords: &[u32]) -> Result<Vec<(usize, SdmaPacket)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < dwords.len() {
        let (p, len) = decode_sdma_packet(target, &dwords[pos..]).map_err(|e| {
            crate::Error::Fault(format!("decode SDMA at dword {pos}: {}", e.message()))
        })?;
        out.push((pos, p));
        pos += len;
    }
    Ok(out)
}

/// One line per packet, each prefixed with its dword position: `0007: FENCE ...`.
pub fn decode_sdma_text(target: &GfxTarget, dwords: &[u32]) -> Result<String> {
    let mut s = String::new();
    for (pos, p) in decode_sdma(target, dwords)? {
        s.push_str(&format!("{pos:04}: {p}\n"));
    }
    Ok(s)
}

impl fmt::Display for SdmaPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        match self {
            SdmaPacket::Nop { count } => write!(f, " count={count}"),
            SdmaPacket::CopyLinear { bytes, src, dst } => {
                write!(f, " bytes={bytes:#x} src={src:#x} dst={dst:#x}")
            }
            SdmaPacket::Fence { mtype, addr, data } => {
                write!(f, " mtype={mtype} addr={addr:#x} data={data:#x}")
            }
            SdmaPacket::Trap { int_context } => write!(f, " ctx={int_context:#x}"),
            SdmaPacket::PollRegmem(p) => write!(
                f,
                " func={} mem addr={:#x} ref={:#x} mask={:#x} interval={} retry={:#x}",
                p.function.name(),
                p.addr,
                p.reference,
                p.mask,
                p.interval,
                p.retry_count
            ),
            SdmaPacket::Timestamp { addr } => write!(f, " GET_GLOBAL addr={addr:#x}"),
        }
    }
}
