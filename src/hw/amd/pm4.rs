//! PM4 vocabulary: the type-3 header, opcodes, the compute SH registers, and the typed bit fields
//! of the packets rawgrad emits (GCR_CNTL, CP_COHER_CNTL, RELEASE_MEM selectors, WAIT_REG_MEM
//! controls, the dispatch initiator). Names follow the PACKET3/register mnemonics of the Linux
//! amdgpu headers (`nvd.h` for gfx10+, `soc15d.h` for gfx9) so a reader can grep from a name to
//! its definition. The builders that emit these packets are `runtime::amd::pm4`; the decoder is
//! [`crate::hw::amd::decode::pm4`].
//!
//! Not guaranteed: only the values rawgrad uses are named; decoding anything else is an error.

use crate::hw::amd::targets::{GfxTarget, ShRegLayout};
use crate::{bail, ensure, Result};
use bitflags::bitflags;

/// Largest COUNT field of a type-3 header (14 bits; 0x3FFF is reserved for header-only NOPs).
pub const MAX_COUNT: usize = 0x3FFE;

/// The type-3 header (amdgpu `nvd.h`/`soc15d.h` `PACKET3(op, n)`): bits 31:30 = 3, 29:16 = body
/// dwords - 1, 15:8 = opcode.
pub fn pkt3_header(op: Pm4Opcode, body_dwords: usize) -> Result<u32> {
    ensure!(
        (1..=MAX_COUNT + 1).contains(&body_dwords),
        InvalidArgument,
        "PM4 {}: {} body dwords is outside 1..={}",
        op.name(),
        body_dwords,
        MAX_COUNT + 1
    );
    Ok(3 << 30 | ((body_dwords as u32 - 1) << 16) | op.bits() << 8)
}

/// INDIRECT_BUFFER DW3: the IB is valid (bit 23; amdgpu `nvd.h` INDIRECT_BUFFER_VALID).
pub const INDIRECT_BUFFER_VALID: u32 = 1 << 23;
/// INDIRECT_BUFFER DW3: IB_SIZE field mask (bits 19:0, dwords).
pub const INDIRECT_BUFFER_SIZE_MASK: u32 = 0xF_FFFF;

/// Where a WAIT_REG_MEM polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitTarget {
    /// MEM_SPACE 1: a dword of memory (4-byte aligned VA).
    Memory { addr: u64 },
    /// MEM_SPACE 0: with OPERATION WRITE_WAIT the CP writes `write` and polls `poll`
    /// (dword register addresses), e.g. the HDP flush request/done pair.
    Registers { write: u32, poll: u32 },
}

/// The fields of a WAIT_REG_MEM (amdgpu `nvd.h` PACKET3_WAIT_REG_MEM: DW1 function 2:0,
/// mem space 5:4, operation 7:6; DW2/3 address or registers; DW4 reference; DW5 mask; DW6 poll
/// interval 15:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitRegMem {
    pub function: CompareFunction,
    pub operation: WaitOperation,
    pub target: WaitTarget,
    pub reference: u32,
    pub mask: u32,
    /// Poll interval (16 bits).
    pub poll_interval: u32,
}

u32_enum! {
    /// PM4 type-3 opcodes rawgrad emits and the software GPU executes (amdgpu `nvd.h` and
    /// `soc15d.h` PACKET3_*: the same values on gfx9 through gfx12).
    pub enum Pm4Opcode {
        NOP = 0x10,
        DISPATCH_DIRECT = 0x15,
        WAIT_REG_MEM = 0x3C,
        INDIRECT_BUFFER = 0x3F,
        EVENT_WRITE = 0x46,
        RELEASE_MEM = 0x49,
        ACQUIRE_MEM = 0x58,
        SET_SH_REG = 0x76,
    }
}

u32_enum! {
    /// VGT_EVENT_TYPE values (navi10_enum.h).
    pub enum EventType {
        CS_PARTIAL_FLUSH = 0x07,
        CACHE_FLUSH_AND_INV_TS_EVENT = 0x14,
        BOTTOM_OF_PIPE_TS = 0x28,
    }
}

u32_enum! {
    /// EVENT_INDEX: 4 for partial flushes (EVENT_WRITE), 5 end of pipe, 6 end of shader.
    pub enum EventIndex {
        PARTIAL_FLUSH = 4,
        END_OF_PIPE = 5,
        END_OF_SHADER = 6,
    }
}

u32_enum! {
    /// RELEASE_MEM DST_SEL (DW2 bits 17:16). 2/3 (queue write pointer) are not supported.
    pub enum DstSel {
        MEMORY_CONTROLLER = 0,
        TC_L2 = 1,
    }
}

u32_enum! {
    /// RELEASE_MEM INT_SEL (DW2 bits 26:24). The ctxid variants 4-6 are not supported.
    pub enum IntSel {
        NONE = 0,
        SEND_INT = 1,
        SEND_INT_ON_CONFIRM = 2,
        SEND_DATA_ON_CONFIRM = 3,
    }
}

u32_enum! {
    /// RELEASE_MEM DATA_SEL (DW2 bits 31:29). 4 (perf counter) and 5 (GDS) are not supported.
    pub enum DataSel {
        NONE = 0,
        VALUE_32BIT = 1,
        VALUE_64BIT = 2,
        GPU_CLOCK_COUNTER = 3,
    }
}

u32_enum! {
    /// Compare function of WAIT_REG_MEM (DW1 bits 2:0) and SDMA POLL_REGMEM (header bits 30:28):
    /// `(value & mask) FUNC reference`.
    pub enum CompareFunction {
        ALWAYS = 0,
        LT = 1,
        LEQ = 2,
        EQ = 3,
        NEQ = 4,
        GEQ = 5,
        GT = 6,
    }
}

impl CompareFunction {
    /// Whether `(value & mask) FUNC reference` holds.
    pub fn holds(self, value: u32, mask: u32, reference: u32) -> bool {
        let v = value & mask;
        match self {
            CompareFunction::ALWAYS => true,
            CompareFunction::LT => v < reference,
            CompareFunction::LEQ => v <= reference,
            CompareFunction::EQ => v == reference,
            CompareFunction::NEQ => v != reference,
            CompareFunction::GEQ => v >= reference,
            CompareFunction::GT => v > reference,
        }
    }
}

u32_enum! {
    /// WAIT_REG_MEM MEM_SPACE (DW1 bits 5:4).
    pub enum MemSpace {
        REGISTER = 0,
        MEMORY = 1,
    }
}

u32_enum! {
    /// WAIT_REG_MEM OPERATION (DW1 bits 7:6).
    pub enum WaitOperation {
        WAIT = 0,
        WRITE_WAIT = 1,
    }
}

bitflags! {
    /// GCR_CNTL of the gfx10+ ACQUIRE_MEM (DW7): Linux amdgpu nvd.h
    /// PACKET3_ACQUIRE_MEM_GCR_CNTL_* (the same positions in Mesa's pkt3.json GCR_CNTL). GLI_INV is
    /// the 2-bit field 1:0 with 1 = ALL; the range and sequence fields (GL1_RANGE 3:2, GL2_RANGE
    /// 12:11, SEQ 17:16, RANGE_IS_PA 18) stay 0.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct GcrCntl: u32 {
        /// GLI_INV = 1: invalidate the whole instruction cache.
        const GLI_INV = 1 << 0;
        const GLM_WB = 1 << 4;
        const GLM_INV = 1 << 5;
        const GLK_WB = 1 << 6;
        const GLK_INV = 1 << 7;
        const GLV_INV = 1 << 8;
        const GL1_INV = 1 << 9;
        const GL2_US = 1 << 10;
        const GL2_DISCARD = 1 << 13;
        const GL2_INV = 1 << 14;
        const GL2_WB = 1 << 15;
    }
}

bitflags! {
    /// CP_COHER_CNTL action bits of the gfx9 ACQUIRE_MEM (DW1): Linux amdgpu soc15d.h
    /// PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CpCoherCntl: u32 {
        const TC_WB_ACTION_ENA = 1 << 18;
        const TCL1_ACTION_ENA = 1 << 22;
        const TC_ACTION_ENA = 1 << 23;
        const SH_KCACHE_ACTION_ENA = 1 << 27;
        const SH_ICACHE_ACTION_ENA = 1 << 29;
    }
}

impl CpCoherCntl {
    /// The gfx9 equivalent of a gfx10+ GCR_CNTL (tinygrad 0.10's mapping: GLI -> ICACHE,
    /// GLK -> KCACHE, GLV/GL1 -> TCL1, GL2_INV -> TC, GL2_WB -> TC_WB; GLM has no gfx9 cache).
    /// For the full barrier this gives exactly amdgpu's `gfx_v9_4_3_emit_mem_sync`.
    pub fn from_gcr(gcr: GcrCntl) -> CpCoherCntl {
        let mut c = CpCoherCntl::empty();
        c.set(
            CpCoherCntl::SH_ICACHE_ACTION_ENA,
            gcr.contains(GcrCntl::GLI_INV),
        );
        c.set(
            CpCoherCntl::SH_KCACHE_ACTION_ENA,
            gcr.intersects(GcrCntl::GLK_WB | GcrCntl::GLK_INV),
        );
        c.set(
            CpCoherCntl::TCL1_ACTION_ENA,
            gcr.intersects(GcrCntl::GLV_INV | GcrCntl::GL1_INV),
        );
        c.set(CpCoherCntl::TC_ACTION_ENA, gcr.contains(GcrCntl::GL2_INV));
        c.set(CpCoherCntl::TC_WB_ACTION_ENA, gcr.contains(GcrCntl::GL2_WB));
        c
    }
}

bitflags! {
    /// The gfx10+ RELEASE_MEM cache actions (DW1 bits 12-22): Linux amdgpu nvd.h
    /// PACKET3_RELEASE_MEM_GCR_* (Mesa pkt3.json RELEASE_MEM_OP). SEQ is bit 22 of the 2-bit field
    /// 23:22, i.e. SEQ_FORWARD.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ReleaseGcr: u32 {
        const GLM_WB = 1 << 12;
        const GLM_INV = 1 << 13;
        const GLV_INV = 1 << 14;
        const GL1_INV = 1 << 15;
        const GL2_US = 1 << 16;
        const GL2_DISCARD = 1 << 19;
        const GL2_INV = 1 << 20;
        const GL2_WB = 1 << 21;
        const SEQ = 1 << 22;
    }
}

bitflags! {
    /// The gfx9 RELEASE_MEM cache actions: Linux amdgpu soc15d.h EOP_TC_WB_ACTION_EN (15),
    /// EOP_TCL1_ACTION_EN (16), EOP_TC_ACTION_EN (17), EOP_TC_NC_ACTION_EN (19),
    /// EOP_TC_MD_ACTION_EN (21).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct EopActions: u32 {
        const EOP_TC_WB_ACTION_EN = 1 << 15;
        const EOP_TCL1_ACTION_EN = 1 << 16;
        const EOP_TC_ACTION_EN = 1 << 17;
        const EOP_TC_NC_ACTION_EN = 1 << 19;
        const EOP_TC_MD_ACTION_EN = 1 << 21;
    }
}

impl EopActions {
    /// The gfx9 equivalent of gfx10+ RELEASE_MEM cache actions (GL2_WB -> TC_WB, GL2_INV -> TC,
    /// GLV/GL1 -> TCL1, GLM -> TC_MD; SEQ and GL2_US have none). A full flush gives
    /// TCL1|TC|TC_WB|TC_MD, the set amdgpu's `gfx_v9_4_3_ring_emit_fence` sends.
    pub fn from_gcr(gcr: ReleaseGcr) -> EopActions {
        let mut e = EopActions::empty();
        e.set(
            EopActions::EOP_TC_WB_ACTION_EN,
            gcr.contains(ReleaseGcr::GL2_WB),
        );
        e.set(
            EopActions::EOP_TC_ACTION_EN,
            gcr.contains(ReleaseGcr::GL2_INV),
        );
        e.set(
            EopActions::EOP_TCL1_ACTION_EN,
            gcr.intersects(ReleaseGcr::GLV_INV | ReleaseGcr::GL1_INV),
        );
        e.set(
            EopActions::EOP_TC_MD_ACTION_EN,
            gcr.intersects(ReleaseGcr::GLM_WB | ReleaseGcr::GLM_INV),
        );
        e
    }
}

bitflags! {
    /// COMPUTE_DISPATCH_INITIATOR, the last dword of DISPATCH_DIRECT: gc_9_4_3_sh_mask.h
    /// COMPUTE_SHADER_EN 0, FORCE_START_AT_000 2; CS_W32_EN 15 from gfx10 on (Mesa gfx10.json).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DispatchInitiator: u32 {
        const COMPUTE_SHADER_EN = 1 << 0;
        const FORCE_START_AT_000 = 1 << 2;
        /// Wave32 dispatch (gfx10+ only).
        const CS_W32_EN = 1 << 15;
    }
}

/// `A|B|C` for a set of flags, `0` when empty (the decoder's spelling).
pub fn flag_names<I: Iterator<Item = (&'static str, T)>, T>(it: I) -> String {
    let names: Vec<&str> = it.map(|(n, _)| n).collect();
    if names.is_empty() {
        "0".to_string()
    } else {
        names.join("|")
    }
}

/// First register offset of the SH range (PACKET3_SET_SH_REG_START = 0x2C00).
pub const SET_SH_REG_START: u32 = 0x2C00;
/// One past the last SH offset (SH range 0x2C00-0x3000).
pub const SET_SH_REG_END_OFFSET: u32 = 0x3000 - SET_SH_REG_START;

/// Which targets have a register.
#[derive(Clone, Copy)]
enum Presence {
    All(u32),
    DispatchPktAddr(u32),
    DispatchScratchBase(u32),
    Se4To7(u32),
    Rsrc3,
}

macro_rules! sh_regs {
    ($($name:ident = $presence:expr),+ $(,)?) => {
        /// Compute SH registers rawgrad writes with SET_SH_REG (`nvd.h` SET_SH_REG_START,
        /// `gc_11_0_0_offset.h`). Offsets are relative to [`SET_SH_REG_START`]; those that differ
        /// per chip come from the target table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ShReg { $($name),+ }
        impl ShReg {
            /// Every register, in declaration order (`reg as usize` indexes this array).
            pub const ALL: &'static [ShReg] = &[$(ShReg::$name),+];
            /// The register's mnemonic.
            pub fn name(self) -> &'static str {
                match self { $(ShReg::$name => stringify!($name)),+ }
            }
            fn presence(self) -> Presence {
                use Presence::*;
                match self { $(ShReg::$name => $presence),+ }
            }
        }
    };
}

sh_regs! {
    COMPUTE_START_X = All(0x204),
    COMPUTE_START_Y = All(0x205),
    COMPUTE_START_Z = All(0x206),
    COMPUTE_NUM_THREAD_X = All(0x207),
    COMPUTE_NUM_THREAD_Y = All(0x208),
    COMPUTE_NUM_THREAD_Z = All(0x209),
    COMPUTE_PIPELINESTAT_ENABLE = All(0x20A),
    COMPUTE_PERFCOUNT_ENABLE = All(0x20B),
    COMPUTE_PGM_LO = All(0x20C),
    COMPUTE_PGM_HI = All(0x20D),
    COMPUTE_DISPATCH_PKT_ADDR_LO = DispatchPktAddr(0x20E),
    COMPUTE_DISPATCH_PKT_ADDR_HI = DispatchPktAddr(0x20F),
    COMPUTE_DISPATCH_SCRATCH_BASE_LO = DispatchScratchBase(0x210),
    COMPUTE_DISPATCH_SCRATCH_BASE_HI = DispatchScratchBase(0x211),
    COMPUTE_PGM_RSRC1 = All(0x212),
    COMPUTE_PGM_RSRC2 = All(0x213),
    COMPUTE_RESOURCE_LIMITS = All(0x215),
    COMPUTE_STATIC_THREAD_MGMT_SE0 = All(0x216),
    COMPUTE_STATIC_THREAD_MGMT_SE1 = All(0x217),
    COMPUTE_TMPRING_SIZE = All(0x218),
    COMPUTE_STATIC_THREAD_MGMT_SE2 = All(0x219),
    COMPUTE_STATIC_THREAD_MGMT_SE3 = All(0x21A),
    COMPUTE_RESTART_X = All(0x21B),
    COMPUTE_RESTART_Y = All(0x21C),
    COMPUTE_RESTART_Z = All(0x21D),
    COMPUTE_PGM_RSRC3 = Rsrc3,
    COMPUTE_STATIC_THREAD_MGMT_SE4 = Se4To7(0x22B),
    COMPUTE_STATIC_THREAD_MGMT_SE5 = Se4To7(0x22C),
    COMPUTE_STATIC_THREAD_MGMT_SE6 = Se4To7(0x22D),
    COMPUTE_STATIC_THREAD_MGMT_SE7 = Se4To7(0x22E),
    COMPUTE_USER_DATA_0 = All(0x240),
    COMPUTE_USER_DATA_1 = All(0x241),
    COMPUTE_USER_DATA_2 = All(0x242),
    COMPUTE_USER_DATA_3 = All(0x243),
    COMPUTE_USER_DATA_4 = All(0x244),
    COMPUTE_USER_DATA_5 = All(0x245),
    COMPUTE_USER_DATA_6 = All(0x246),
    COMPUTE_USER_DATA_7 = All(0x247),
    COMPUTE_USER_DATA_8 = All(0x248),
    COMPUTE_USER_DATA_9 = All(0x249),
    COMPUTE_USER_DATA_10 = All(0x24A),
    COMPUTE_USER_DATA_11 = All(0x24B),
    COMPUTE_USER_DATA_12 = All(0x24C),
    COMPUTE_USER_DATA_13 = All(0x24D),
    COMPUTE_USER_DATA_14 = All(0x24E),
    COMPUTE_USER_DATA_15 = All(0x24F),
}

impl ShReg {
    fn placement(self, sh: &ShRegLayout) -> Option<u32> {
        match self.presence() {
            Presence::All(o) => Some(o),
            Presence::DispatchPktAddr(o) => sh.dispatch_pkt_addr.then_some(o),
            Presence::DispatchScratchBase(o) => sh.dispatch_scratch_base.then_some(o),
            Presence::Se4To7(o) => sh.static_thread_mgmt_se4_7.then_some(o),
            Presence::Rsrc3 => Some(sh.compute_pgm_rsrc3),
        }
    }

    /// The SET_SH_REG offset of this register on `target`, or an error if the chip lacks it.
    pub fn offset(self, target: &GfxTarget) -> Result<u32> {
        match self.placement(&target.sh) {
            Some(o) => Ok(o),
            None => bail!(
                InvalidArgument,
                "SET_SH_REG: register {} does not exist on {}",
                self.name(),
                target.name
            ),
        }
    }

    /// The register at SET_SH_REG offset `offset` on `target`, if rawgrad knows one there.
    pub fn from_offset(target: &GfxTarget, offset: u32) -> Option<ShReg> {
        ShReg::ALL
            .iter()
            .copied()
            .find(|r| r.placement(&target.sh) == Some(offset))
    }

    /// COMPUTE_USER_DATA_`i` (user SGPR s`i`).
    pub fn user_data(i: usize) -> Result<ShReg> {
        match ShReg::ALL.get(ShReg::COMPUTE_USER_DATA_0 as usize + i) {
            Some(r) if i < 16 => Ok(*r),
            _ => bail!(
                InvalidArgument,
                "COMPUTE_USER_DATA_{i}: only 16 user data registers exist"
            ),
        }
    }

    /// Index of a COMPUTE_USER_DATA register (0..16), `None` for other registers.
    pub fn user_data_index(self) -> Option<usize> {
        let i = (self as usize).checked_sub(ShReg::COMPUTE_USER_DATA_0 as usize)?;
        (i < 16).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::amd::targets::{GFX1030, GFX1100, GFX942};

    #[test]
    fn register_offsets_per_target() {
        assert_eq!(ShReg::COMPUTE_PGM_LO.offset(&GFX1100).unwrap(), 0x20C);
        assert_eq!(ShReg::COMPUTE_PGM_RSRC3.offset(&GFX1100).unwrap(), 0x228);
        assert_eq!(ShReg::COMPUTE_PGM_RSRC3.offset(&GFX942).unwrap(), 0x22D);
        assert!(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE4
            .offset(&GFX942)
            .is_err());
        assert!(ShReg::COMPUTE_DISPATCH_SCRATCH_BASE_LO
            .offset(&GFX1030)
            .is_err());
        // 0x22D is SE6 on gfx11 and RSRC3 on gfx9.4.
        assert_eq!(
            ShReg::from_offset(&GFX1100, 0x22D),
            Some(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE6)
        );
        assert_eq!(
            ShReg::from_offset(&GFX942, 0x22D),
            Some(ShReg::COMPUTE_PGM_RSRC3)
        );
        assert_eq!(ShReg::from_offset(&GFX1100, 0x21E), None); // COMPUTE_THREAD_TRACE_ENABLE
        assert_eq!(ShReg::user_data(15).unwrap(), ShReg::COMPUTE_USER_DATA_15);
        assert!(ShReg::user_data(16).is_err());
        assert_eq!(ShReg::COMPUTE_USER_DATA_3.user_data_index(), Some(3));
        assert_eq!(ShReg::COMPUTE_PGM_LO.user_data_index(), None);
        for t in crate::hw::amd::targets::TARGETS {
            for r in ShReg::ALL {
                if let Ok(o) = r.offset(t) {
                    assert_eq!(
                        ShReg::from_offset(t, o),
                        Some(*r),
                        "{} on {}",
                        r.name(),
                        t.name
                    );
                    assert!(o < SET_SH_REG_END_OFFSET);
                }
            }
        }
    }

    #[test]
    fn compare_functions_and_cache_maps() {
        assert!(
            CompareFunction::GEQ.holds(5, u32::MAX, 5)
                && !CompareFunction::GEQ.holds(4, u32::MAX, 5)
        );
        assert!(CompareFunction::EQ.holds(0x1FF, 0xFF, 0xFF));
        let gcr = GcrCntl::GLI_INV
            | GcrCntl::GLK_INV
            | GcrCntl::GLV_INV
            | GcrCntl::GL2_INV
            | GcrCntl::GL2_WB;
        assert_eq!(
            CpCoherCntl::from_gcr(gcr).bits(),
            1 << 29 | 1 << 27 | 1 << 22 | 1 << 23 | 1 << 18
        );
        assert_eq!(EopActions::from_gcr(ReleaseGcr::GL2_WB).bits(), 1 << 15);
        assert_eq!(flag_names(GcrCntl::empty().iter_names()), "0");
        assert_eq!(
            flag_names((GcrCntl::GLM_WB | GcrCntl::GL2_WB).iter_names()),
            "GLM_WB|GL2_WB"
        );
        assert_eq!(Pm4Opcode::from_u32(0x49), Some(Pm4Opcode::RELEASE_MEM));
        assert_eq!(EventType::CS_PARTIAL_FLUSH.name(), "CS_PARTIAL_FLUSH");
    }
}
