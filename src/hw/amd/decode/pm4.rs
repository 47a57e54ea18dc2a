//! PM4 decoding: header -> packet length, packet dwords -> [`Pm4Packet`] (validated against the
//! target table), and the one-line text form of each packet.

use crate::hw::amd::pm4::{
    flag_names, CompareFunction, CpCoherCntl, DataSel, DispatchInitiator, DstSel, EopActions,
    EventIndex, EventType, GcrCntl, IntSel, MemSpace, Pm4Opcode, ReleaseGcr, ShReg, WaitOperation,
    WaitRegMem, WaitTarget, INDIRECT_BUFFER_SIZE_MASK, INDIRECT_BUFFER_VALID,
    SET_SH_REG_END_OFFSET,
};
use crate::hw::amd::targets::{AcquireMemLayout, GfxTarget, ReleaseMemCache};
use crate::{bail, ensure, Result};
use std::fmt;

/// Cache actions of an ACQUIRE_MEM, in the target's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireCntl {
    Gcr(GcrCntl),
    CoherCntl(CpCoherCntl),
}

/// Cache actions of a RELEASE_MEM, in the target's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseCache {
    Gcr(ReleaseGcr),
    Eop(EopActions),
}

/// A decoded RELEASE_MEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseMemPacket {
    pub event: EventType,
    pub event_index: EventIndex,
    pub cache: ReleaseCache,
    pub dst_sel: DstSel,
    pub int_sel: IntSel,
    pub data_sel: DataSel,
    pub addr: u64,
    pub data: u64,
    pub int_ctxid: u32,
}

/// One decoded PM4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pm4Packet {
    Nop {
        body_dwords: usize,
    },
    SetShReg {
        offset: u32,
        regs: Vec<(ShReg, u32)>,
    },
    DispatchDirect {
        groups: [u32; 3],
        initiator: DispatchInitiator,
    },
    AcquireMem {
        cntl: AcquireCntl,
        size: u64,
        base: u64,
        poll_interval: u32,
    },
    ReleaseMem(ReleaseMemPacket),
    WaitRegMem(WaitRegMem),
    EventWrite {
        event: EventType,
        index: EventIndex,
    },
    IndirectBuffer {
        addr: u64,
        size_dwords: u32,
        chain: bool,
    },
}

impl Pm4Packet {
    /// The PACKET3 mnemonic.
    pub fn name(&self) -> &'static str {
        match self {
            Pm4Packet::Nop { .. } => "NOP",
            Pm4Packet::SetShReg { .. } => "SET_SH_REG",
            Pm4Packet::DispatchDirect { .. } => "DISPATCH_DIRECT",
            Pm4Packet::AcquireMem { .. } => "ACQUIRE_MEM",
            Pm4Packet::ReleaseMem(_) => "RELEASE_MEM",
            Pm4Packet::WaitRegMem(_) => "WAIT_REG_MEM",
            Pm4Packet::EventWrite { .. } => "EVENT_WRITE",
            Pm4Packet::IndirectBuffer { .. } => "INDIRECT_BUFFER",
        }
    }
}

/// Total dwords (header included) of the packet starting with `header`, after checking the
/// header: type 3, no predicate, known opcode.
pub fn pm4_packet_len(header: u32) -> Result<usize> {
    pm4_header(header).map(|(_, len)| len)
}

fn pm4_header(header: u32) -> Result<(Pm4Opcode, usize)> {
    ensure!(
        header >> 30 == 3,
        Fault,
        "PM4 header {header:#010x}: type {} is not 3",
        header >> 30
    );
    ensure!(
        header & 0xFD == 0,
        Fault,
        "PM4 header {header:#010x}: predicate or reserved bits 7:2 set"
    );
    let count = (header >> 16) & 0x3FFF;
    ensure!(
        count != 0x3FFF,
        Fault,
        "PM4 header {header:#010x}: header-only NOP (count 0x3FFF) is not supported"
    );
    let op = (header >> 8) & 0xFF;
    let Some(op) = Pm4Opcode::from_u32(op) else {
        bail!(Fault, "PM4 header {header:#010x}: unknown opcode {op:#04x}")
    };
    Ok((op, count as usize + 2))
}

fn want_body(op: Pm4Opcode, body: &[u32], n: usize) -> Result<()> {
    ensure!(
        body.len() == n,
        Fault,
        "{}: {} body dwords, expected {n}",
        op.name(),
        body.len()
    );
    Ok(())
}

fn field<T>(what: &str, v: Option<T>, raw: u32) -> Result<T> {
    match v {
        Some(x) => Ok(x),
        None => bail!(Fault, "{what} {raw:#x} is not supported"),
    }
}

fn addr64(what: &str, lo: u32, hi: u32, align: u64) -> Result<u64> {
    let a = u64::from(hi) << 32 | u64::from(lo);
    ensure!(
        a % align == 0,
        Fault,
        "{what}: address {a:#x} is not {align}-byte aligned"
    );
    ensure!(
        a < 1 << 48,
        Fault,
        "{what}: address {a:#x} exceeds the 48-bit GPU VA range"
    );
    Ok(a)
}

/// Decodes one packet (`dwords` starts at its header and holds at least the whole packet).
/// Returns the packet and its length in dwords.
pub fn decode_pm4_packet(target: &GfxTarget, dwords: &[u32]) -> Result<(Pm4Packet, usize)> {
    let Some(&header) = dwords.first() else {
        bail!(Fault, "PM4: empty packet")
    };
    let (op, len) = pm4_header(header)?;
    ensure!(
        dwords.len() >= len,
        Fault,
        "{}: packet of {len} dwords truncated to {}",
        op.name(),
        dwords.len()
    );
    let body = &dwords[1..len];
    let p = match op {
        Pm4Opcode::NOP => Pm4Packet::Nop {
            body_dwords: body.len(),
        },
        Pm4Opcode::SET_SH_REG => set_sh_reg(target, body)?,
        Pm4Opcode::DISPATCH_DIRECT => {
            want_body(op, body, 4)?;
            let init = DispatchInitiator::from_bits(body[3]);
            let initiator = field("DISPATCH_DIRECT initiator", init, body[3])?;
            Pm4Packet::DispatchDirect {
                groups: [body[0], body[1], body[2]],
                initiator,
            }
        }
        Pm4Opcode::ACQUIRE_MEM => acquire_mem(target, body)?,
        Pm4Opcode::RELEASE_MEM => Pm4Packet::ReleaseMem(release_mem(target, body)?),
        Pm4Opcode::WAIT_REG_MEM => Pm4Packet::WaitRegMem(wait_reg_mem(body)?),
        Pm4Opcode::EVENT_WRITE => {
            want_body(op, body, 1)?;
            ensure!(
                body[0] & !0xF3F == 0,
                Fault,
                "EVENT_WRITE: reserved bits set in {:#x}",
                body[0]
            );
            let event = field(
                "EVENT_WRITE event type",
                EventType::from_u32(body[0] & 0x3F),
                body[0] & 0x3F,
            )?;
            let index = field(
                "EVENT_WRITE event index",
                EventIndex::from_u32(body[0] >> 8 & 0xF),
                body[0] >> 8 & 0xF,
            )?;
            Pm4Packet::EventWrite { event, index }
        }
        Pm4Opcode::INDIRECT_BUFFER => indirect_buffer(body)?,
    };
    Ok((p, len))
}

fn set_sh_reg(target: &GfxTarget, body: &[u32]) -> Result<Pm4Packet> {
    ensure!(
        body.len() >= 2,
        Fault,
        "SET_SH_REG: {} body dwords, expected an offset and values",
        body.len()
    );
    let offset = body[0];
    ensure!(
        offset < SET_SH_REG_END_OFFSET,
        Fault,
        "SET_SH_REG: offset {offset:#x} is outside the SH range"
    );
    let mut regs = Vec::with_capacity(body.len() - 1);
    for (i, v) in body[1..].iter().enumerate() {
        let off = offset + i as u32;
        let Some(r) = ShReg::from_offset(target, off) else {
            bail!(
                Fault,
                "SET_SH_REG: unknown SH register at offset {off:#x} on {}",
                target.name
            )
        };
        regs.push((r, *v));
    }
    Ok(Pm4Packet::SetShReg { offset, regs })
}

/// GLM_WB/GLM_INV on a chip without GL2 metadata cache actions (gfx12; see `GfxTarget::gcr_glm`).
fn no_glm(target: &GfxTarget, what: &str, glm: bool) -> Result<()> {
    ensure!(
        target.gcr_glm || !glm,
        Fault,
        "{what}: GLM_WB/GLM_INV on {}, which has no GL2 metadata cache actions",
        target.name
    );
    Ok(())
}

fn acquire_mem(target: &GfxTarget, body: &[u32]) -> Result<Pm4Packet> {
    let (cntl, rest) = match target.acquire_mem {
        AcquireMemLayout::Gfx10GcrCntl => {
            want_body(Pm4Opcode::ACQUIRE_MEM, body, 7)?;
            ensure!(
                body[0] == 0,
                Fault,
                "ACQUIRE_MEM: CP_COHER_CNTL {:#x} must be 0 on {}",
                body[0],
                target.name
            );
            let gcr = field("ACQUIRE_MEM GCR_CNTL", GcrCntl::from_bits(body[6]), body[6])?;
            no_glm(
                target,
                "ACQUIRE_MEM GCR_CNTL",
                gcr.intersects(GcrCntl::GLM_WB | GcrCntl::GLM_INV),
            )?;
            (AcquireCntl::Gcr(gcr), &body[1..6])
        }
        AcquireMemLayout::Gfx9CoherCntl => {
            want_body(Pm4Opcode::ACQUIRE_MEM, body, 6)?;
            let c = field(
                "ACQUIRE_MEM CP_COHER_CNTL",
                CpCoherCntl::from_bits(body[0]),
                body[0],
            )?;
            (AcquireCntl::CoherCntl(c), &body[1..6])
        }
    };
    ensure!(
        rest[1] <= 0xFF_FFFF && rest[3] <= 0xFF_FFFF,
        Fault,
        "ACQUIRE_MEM: size/base high bits exceed 24 bits"
    );
    Ok(Pm4Packet::AcquireMem {
        cntl,
        size: u64::from(rest[1]) << 32 | u64::from(rest[0]),
        base: u64::from(rest[3]) << 32 | u64::from(rest[2]),
        poll_interval: rest[4],
    })
}

fn release_mem(target: &GfxTarget, body: &[u32]) -> Result<ReleaseMemPacket> {
    want_body(Pm4Opcode::RELEASE_MEM, body, 7)?;
    let (dw1, dw2) = (body[0], body[1]);
    let event = field(
        "RELEASE_MEM event type",
        EventType::from_u32(dw1 & 0x3F),
        dw1 & 0x3F,
    )?;
    let event_index = field(
        "RELEASE_MEM event index",
        EventIndex::from_u32(dw1 >> 8 & 0xF),
        dw1 >> 8 & 0xF,
    )?;
    let cache_bits = dw1 & !0xF3F;
    let cache = match target.release_mem_cache {
        ReleaseMemCache::Gfx10Gcr => {
            let gcr = field(
                "RELEASE_MEM GCR",
                ReleaseGcr::from_bits(cache_bits),
                cache_bits,
            )?;
            let glm = gcr.intersects(ReleaseGcr::GLM_WB | ReleaseGcr::GLM_INV);
            no_glm(target, "RELEASE_MEM GCR", glm)?;
            ReleaseCache::Gcr(gcr)
        }
        ReleaseMemCache::Gfx9EopActions => ReleaseCache::Eop(field(
            "RELEASE_MEM EOP actions",
            EopActions::from_bits(cache_bits),
            cache_bits,
        )?),
    };
    ensure!(
        dw2 & !(3 << 16 | 7 << 24 | 7 << 29) == 0,
        Fault,
        "RELEASE_MEM: reserved bits set in DW2 {dw2:#x}"
    );
    let dst_sel = field(
        "RELEASE_MEM DST_SEL",
        DstSel::from_u32(dw2 >> 16 & 3),
        dw2 >> 16 & 3,
    )?;
    let int_sel = field(
        "RELEASE_MEM INT_SEL",
        IntSel::from_u32(dw2 >> 24 & 7),
        dw2 >> 24 & 7,
    )?;
    let data_sel = field(
        "RELEASE_MEM DATA_SEL",
        DataSel::from_u32(dw2 >> 29),
        dw2 >> 29,
    )?;
    let align = match data_sel {
        DataSel::VALUE_64BIT | DataSel::GPU_CLOCK_COUNTER => 8,
        DataSel::NONE | DataSel::VALUE_32BIT => 4,
    };
    Ok(ReleaseMemPacket {
        event,
        event_index,
        cache,
        dst_sel,
        int_sel,
        data_sel,
        addr: addr64("RELEASE_MEM", body[2], body[3], align)?,
        data: u64::from(body[5]) << 32 | u64::from(body[4]),
        int_ctxid: body[6],
    })
}

fn wait_reg_mem(body: &[u32]) -> Result<WaitRegMem> {
    want_body(Pm4Opcode::WAIT_REG_MEM, body, 6)?;
    let dw1 = body[0];
    ensure!(
        dw1 & !0xF7 == 0,
        Fault,
        "WAIT_REG_MEM: reserved or ENGINE bits set in DW1 {dw1:#x}"
    );
    let function = field(
        "WAIT_REG_MEM FUNCTION",
        CompareFunction::from_u32(dw1 & 7),
        dw1 & 7,
    )?;
    let space = field(
        "WAIT_REG_MEM MEM_SPACE",
        MemSpace::from_u32(dw1 >> 4 & 3),
        dw1 >> 4 & 3,
    )?;
    let operation = field(
        "WAIT_REG_MEM OPERATION",
        WaitOperation::from_u32(dw1 >> 6 & 3),
        dw1 >> 6 & 3,
    )?;
    let target = match space {
        MemSpace::MEMORY => {
            ensure!(
                operation == WaitOperation::WAIT,
                Fault,
                "WAIT_REG_MEM: WRITE_WAIT on memory is not supported"
            );
            WaitTarget::Memory {
                addr: addr64("WAIT_REG_MEM", body[1], body[2], 4)?,
            }
        }
        MemSpace::REGISTER => WaitTarget::Registers {
            write: body[1],
            poll: body[2],
        },
    };
    ensure!(
        body[5] <= 0xFFFF,
        Fault,
        "WAIT_REG_MEM: poll interval {:#x} exceeds 16 bits",
        body[5]
    );
    Ok(WaitRegMem {
        function,
        operation,
        target,
        reference: body[3],
        mask: body[4],
        poll_interval: body[5],
    })
}

fn indirect_buffer(body: &[u32]) -> Result<Pm4Packet> {
    want_body(Pm4Opcode::INDIRECT_BUFFER, body, 3)?;
    let ctl = body[2];
    ensure!(
        ctl & !(INDIRECT_BUFFER_SIZE_MASK | 1 << 20 | INDIRECT_BUFFER_VALID) == 0,
        Fault,
        "INDIRECT_BUFFER: unsupported control bits in {ctl:#x}"
    );
    ensure!(
        ctl & INDIRECT_BUFFER_VALID != 0,
        Fault,
        "INDIRECT_BUFFER: VALID bit clear in {ctl:#x}"
    );
    let size_dwords = ctl & INDIRECT_BUFFER_SIZE_MASK;
    ensure!(size_dwords > 0, Fault, "INDIRECT_BUFFER: zero size");
    Ok(Pm4Packet::IndirectBuffer {
        addr: addr64("INDIRECT_BUFFER", body[0], body[1], 4)?,
        size_dwords,
        chain: ctl & 1 << 20 != 0,
    })
}

/// Decodes a whole PM4 stream into `(dword position, packet)` pairs; errors name the position.
pub fn decode_pm4(target: &GfxTarget, dwords: &[u32]) -> Result<Vec<(usize, Pm4Packet)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < dwords.len() {
        let (p, len) = decode_pm4_packet(target, &dwords[pos..]).map_err(|e| {
            crate::Error::Fault(format!("decode PM4 at dword {pos}: {}", e.message()))
        })?;
        out.push((pos, p));
        pos += len;
    }
    Ok(out)
}

/// One line per packet, each prefixed with its dword position: `0012: RELEASE_MEM ...`.
pub fn decode_pm4_text(target: &GfxTarget, dwords: &[u32]) -> Result<String> {
    let mut s = String::new();
    for (pos, p) in decode_pm4(target, dwords)? {
        s.push_str(&format!("{pos:04}: {p}\n"));
    }
    Ok(s)
}

impl fmt::Display for Pm4Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        match self {
            Pm4Packet::Nop { body_dwords } => write!(f, " body={body_dwords}"),
            Pm4Packet::SetShReg { regs, .. } => {
                for (r, v) in regs {
                    write!(f, " {}={v:#x}", r.name())?;
                }
                Ok(())
            }
            Pm4Packet::DispatchDirect {
                groups: [x, y, z],
                initiator,
            } => {
                write!(
                    f,
                    " x={x} y={y} z={z} initiator={}",
                    flag_names(initiator.iter_names())
                )
            }
            Pm4Packet::AcquireMem {
                cntl,
                size,
                base,
                poll_interval,
            } => {
                match cntl {
                    AcquireCntl::Gcr(g) => write!(f, " gcr={}", flag_names(g.iter_names()))?,
                    AcquireCntl::CoherCntl(c) => {
                        write!(f, " coher_cntl={}", flag_names(c.iter_names()))?
                    }
                }
                write!(f, " size={size:#x} base={base:#x} poll={poll_interval:#x}")
            }
            Pm4Packet::ReleaseMem(r) => write!(f, " {r}"),
            Pm4Packet::WaitRegMem(w) => {
                write!(f, " func={} op={}", w.function.name(), w.operation.name())?;
                match w.target {
                    WaitTarget::Memory { addr } => write!(f, " mem addr={addr:#x}")?,
                    WaitTarget::Registers { write, poll } => {
                        write!(f, " reg write={write:#x} poll={poll:#x}")?
                    }
                }
                write!(
                    f,
                    " ref={:#x} mask={:#x} interval={}",
                    w.reference, w.mask, w.poll_interval
                )
            }
            Pm4Packet::EventWrite { event, index } => {
                write!(f, " event={} idx={}", event.name(), index.bits())
            }
            Pm4Packet::IndirectBuffer {
                addr,
                size_dwords,
                chain,
            } => {
                write!(
                    f,
                    " addr={addr:#x} size={size_dwords} chain={}",
                    u8::from(*chain)
                )
            }
        }
    }
}

impl fmt::Display for ReleaseMemPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = match self.cache {
            ReleaseCache::Gcr(g) => flag_names(g.iter_names()),
            ReleaseCache::Eop(e) => flag_names(e.iter_names()),
        };
        write!(
            f,
            "event={} idx={} cache={cache} dst_sel={} int_sel={} data_sel={} addr={:#x} data={:#x} ctxid={:#x}",
            self.event.name(),
            self.event_index.bits(),
            self.dst_sel.bits(),
            self.int_sel.bits(),
            self.data_sel.bits(),
            self.addr,
            self.data,
            self.int_ctxid
        )
    }
}
