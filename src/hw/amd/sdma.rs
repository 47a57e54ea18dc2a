//! SDMA vocabulary: packet opcodes and sub-ops, the header fields rawgrad sets, and the fields of
//! a memory POLL_REGMEM. Positions from Linux amdgpu `navi10_sdma_pkt_open.h` (SDMA 5) and
//! `vega10_sdma_pkt_open.h` (SDMA 4): header OP 7:0, SUB_OP 15:8, packet flags above. The
//! builders are `runtime::amd::sdma`; the decoder is [`crate::hw::amd::decode::sdma`].
//!
//! Not guaranteed: GCR_REQ, INDIRECT and the tiled/broadcast copies are not named.

use crate::hw::amd::pm4::CompareFunction;

u32_enum! {
    /// SDMA packet opcodes (header bits 7:0; amdgpu `navi10_sdma_pkt_open.h` SDMA_OP_*, the same
    /// values in `vega10_sdma_pkt_open.h`).
    pub enum SdmaOp {
        NOP = 0,
        COPY = 1,
        FENCE = 5,
        TRAP = 6,
        POLL_REGMEM = 8,
        TIMESTAMP = 13,
    }
}

/// COPY sub-op LINEAR (header bits 15:8; SDMA_SUBOP_COPY_LINEAR).
pub const SDMA_SUBOP_COPY_LINEAR: u32 = 0;
/// TIMESTAMP sub-op GET_GLOBAL_TIMESTAMP (SDMA_SUBOP_TIMESTAMP_GET_GLOBAL).
pub const SDMA_SUBOP_TIMESTAMP_GET_GLOBAL: u32 = 2;
/// FENCE header MTYPE shift (bits 18:16).
pub const SDMA_FENCE_MTYPE_SHIFT: u32 = 16;
/// POLL_REGMEM header: HDP_FLUSH bit 26, FUNC bits 30:28, MEM_POLL bit 31.
pub const SDMA_POLL_HDP_FLUSH: u32 = 1 << 26;
pub const SDMA_POLL_FUNC_SHIFT: u32 = 28;
pub const SDMA_POLL_MEM_POLL: u32 = 1 << 31;
/// NOP header COUNT (bits 29:16): dwords following the header.
pub const SDMA_NOP_COUNT_SHIFT: u32 = 16;
pub const SDMA_NOP_COUNT_MASK: u32 = 0x3FFF;
/// TRAP INT_CONTEXT width (bits 27:0).
pub const SDMA_TRAP_CONTEXT_BITS: u32 = 28;

/// The SDMA header dword.
pub fn sdma_header(op: SdmaOp, sub_op: u32) -> u32 {
    op.bits() | (sub_op & 0xFF) << 8
}

/// The fields of a memory POLL_REGMEM: wait until `(*addr & mask) FUNC reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRegmem {
    pub function: CompareFunction,
    pub addr: u64,
    pub reference: u32,
    pub mask: u32,
    /// Poll interval (16 bits).
    pub interval: u32,
    /// Retry count (12 bits; 0xFFF retries forever).
    pub retry_count: u32,
}
