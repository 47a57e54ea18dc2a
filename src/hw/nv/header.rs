//! The pushbuffer method header (open-gpu-kernel-modules `src/common/sdk/nvidia/inc/class/
//! clc56f.h`, the NVC56F_DMA_* fields, the same for every host class C56F..CA6F): SEC_OP 31:29
//! (NVC56F_DMA_SEC_OP_INC_METHOD 1, NON_INC_METHOD 3, IMMD_DATA_METHOD 4, ONE_INC 5,
//! END_PB_SEGMENT 7; 0 GRP0_USE_TERT and 2 GRP2_USE_TERT are the legacy tertiary-op encodings,
//! 6 RESERVED6), METHOD_COUNT / IMMD_DATA 28:16, METHOD_SUBCHANNEL 15:13, METHOD_ADDRESS 11:0
//! (the method offset >> 2). Plus the subchannel convention rawgrad binds its classes to
//! (tinygrad `ops_nv.py`, libcuda and Mesa NVK use the same numbers; the hardware takes any of
//! the 8 subchannels).
//!
//! Not guaranteed: the tertiary-op encodings are refused, not decoded.

use crate::{bail, ensure, Result};

/// Subchannel of host methods (any subchannel works; tinygrad uses 0).
pub const SUBC_HOST: u32 = 0;
/// Subchannel the compute class is bound to.
pub const SUBC_COMPUTE: u32 = 1;
/// Subchannel the copy class is bound to.
pub const SUBC_COPY: u32 = 4;

/// Largest COUNT of a method header (13 bits).
pub const MAX_METHOD_COUNT: usize = 0x1FFF;

/// SEC_OP of a method header (bits 31:29).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecOp {
    /// COUNT data dwords to consecutive methods.
    IncMethod = 1,
    /// COUNT data dwords all to one method.
    NonIncMethod = 3,
    /// 13-bit data inside the header, one method.
    ImmdDataMethod = 4,
    /// First data dword to the method, the rest to method + 4.
    OneInc = 5,
    /// Ends the pushbuffer segment early.
    EndPbSegment = 7,
}

impl SecOp {
    /// The header spelling.
    pub fn name(self) -> &'static str {
        match self {
            SecOp::IncMethod => "INC",
            SecOp::NonIncMethod => "NON_INC",
            SecOp::ImmdDataMethod => "IMMD",
            SecOp::OneInc => "ONE_INC",
            SecOp::EndPbSegment => "END_PB_SEGMENT",
        }
    }
}

/// A method header dword: SEC_OP 31:29, COUNT (or immediate data) 28:16, SUBCHANNEL 15:13,
/// method address >> 2 in 11:0.
pub fn method_header(op: SecOp, subc: u32, method: u32, count_or_data: u32) -> Result<u32> {
    ensure!(
        subc < 8,
        InvalidArgument,
        "method header: subchannel {subc} is not in 0..8"
    );
    ensure!(
        method % 4 == 0 && method < 0x4000,
        InvalidArgument,
        "method header: method {method:#x} is not a dword offset below 0x4000"
    );
    ensure!(
        count_or_data <= MAX_METHOD_COUNT as u32,
        InvalidArgument,
        "method header {}: count/data {count_or_data:#x} does not fit 13 bits",
        op.name()
    );
    Ok((op as u32) << 29 | count_or_data << 16 | subc << 13 | method >> 2)
}

/// A parsed method header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodHeader {
    pub op: SecOp,
    pub subc: u32,
    pub method: u32,
    /// Data dwords that follow (0 for IMMD and END_PB_SEGMENT).
    pub count: u32,
    /// The immediate data of an IMMD header.
    pub immd: u32,
}

impl MethodHeader {
    /// Parses a header dword. A zero dword is accepted as a NOP (an INC group with no data);
    /// the legacy tertiary-op encodings and the reserved SEC_OP 6 are refused.
    pub fn parse(dw: u32) -> Result<MethodHeader> {
        let (sec, field) = (dw >> 29, dw >> 16 & 0x1FFF);
        let op = match sec {
            0 if dw == 0 => SecOp::IncMethod,
            1 => SecOp::IncMethod,
            3 => SecOp::NonIncMethod,
            4 => SecOp::ImmdDataMethod,
            5 => SecOp::OneInc,
            7 => SecOp::EndPbSegment,
            _ => bail!(
                Fault,
                "method header {dw:#010x}: SEC_OP {sec} (tertiary-op / reserved encodings) is not supported"
            ),
        };
        let immd = op == SecOp::ImmdDataMethod;
        let count = if immd || op == SecOp::EndPbSegment {
            0
        } else {
            field
        };
        Ok(MethodHeader {
            op,
            subc: dw >> 13 & 0x7,
            method: (dw & 0xFFF) << 2,
            count,
            immd: if immd { field } else { 0 },
        })
    }

    /// The method the `i`-th data dword of this group writes.
    pub fn method_of(&self, i: u32) -> u32 {
        match self.op {
            SecOp::IncMethod => self.method + 4 * i,
            SecOp::OneInc if i > 0 => self.method + 4,
            _ => self.method,
        }
    }
}
