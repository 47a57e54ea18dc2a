//! The GPFIFO ring's formats (open-gpu-kernel-modules `src/common/sdk/nvidia/inc/class/
//! clc56f.h`, the same for the host classes C56F..CA6F): the GP entry (NVC56F_GP_ENTRY0_FETCH
//! 0:0, NVC56F_GP_ENTRY0_GET 31:2, NVC56F_GP_ENTRY1_GET_HI 7:0, NVC56F_GP_ENTRY1_LEVEL 9:9,
//! NVC56F_GP_ENTRY1_LENGTH 30:10, NVC56F_GP_ENTRY1_SYNC 31:31, NVC56F_GP_ENTRY1_OPCODE 7:0 of a
//! control entry), the USERD control block (`AmpereAControlGPFifo` in `clc56f.h`, the same
//! layout as Hopper's `clc86f.h`; `Put` at 0x40 .. `GPPut` at 0x8C) and the usermode page
//! (`clc361.h`: NVC361_NOTIFY_CHANNEL_PENDING 0x90, NVC361_TIME_0/1 0x80/0x84).
//!
//! Not guaranteed: the ring writer with flow control is the backend's (`runtime::nv::gpfifo`).

use crate::{ensure, Result};

/// Bytes of one GP entry.
pub const GP_ENTRY_BYTES: u64 = 8;
/// GP entry bit 41 (dword1 bit 9): LEVEL = subroutine (tinygrad sets it; same layout on Ampere
/// and Hopper).
pub const GP_ENTRY_LEVEL_SUBROUTINE: u64 = 1 << 41;
/// GP entry bit 63 (dword1 bit 31): SYNC = wait for the previous pushbuffer to be consumed.
pub const GP_ENTRY_SYNC_WAIT: u64 = 1 << 63;
/// GP entry bit 0: FETCH = conditional.
pub const GP_ENTRY_FETCH_CONDITIONAL: u64 = 1;
/// Shift of LENGTH (dwords, 21 bits: dword1 30:10).
pub const GP_ENTRY_LENGTH_SHIFT: u32 = 42;
/// Largest LENGTH of one entry, in dwords.
pub const GP_ENTRY_MAX_DWORDS: u32 = (1 << 21) - 1;

/// USERD (AmpereAControlGPFifo = HopperAControlGPFifo, 512 bytes) offsets.
pub const USERD_SIZE: u64 = 512;
pub const USERD_PUT: u64 = 0x40;
pub const USERD_GET: u64 = 0x44;
pub const USERD_REFERENCE: u64 = 0x48;
pub const USERD_PUT_HI: u64 = 0x4C;
pub const USERD_TOP_LEVEL_GET: u64 = 0x58;
pub const USERD_TOP_LEVEL_GET_HI: u64 = 0x5C;
pub const USERD_GET_HI: u64 = 0x60;
/// GPGet: the ring index of the next entry the GPU will fetch (written by the GPU).
pub const USERD_GP_GET: u64 = 0x88;
/// GPPut: one past the last ring index the client published.
pub const USERD_GP_PUT: u64 = 0x8C;

/// Usermode page (clc361.h): the doorbell.
pub const USERMODE_NOTIFY_CHANNEL_PENDING: u64 = 0x90;
/// Usermode page: GPU timer low / high words.
pub const USERMODE_TIME_0: u64 = 0x80;
pub const USERMODE_TIME_1: u64 = 0x84;
/// Bytes of the usermode mapping.
pub const USERMODE_SIZE: u64 = 0x10000;

/// A GP entry pointing at `dwords` (1..2^21) pushbuffer dwords at `addr` (4-byte aligned,
/// below 2^40), with LEVEL = subroutine.
pub fn gp_entry(addr: u64, dwords: u32) -> Result<u64> {
    ensure!(
        addr % 4 == 0 && addr < 1 << 40,
        InvalidArgument,
        "GP entry: pushbuffer address {addr:#x} is not 4-byte aligned below 2^40"
    );
    ensure!(
        (1..=GP_ENTRY_MAX_DWORDS).contains(&dwords),
        InvalidArgument,
        "GP entry: length {dwords} dwords is outside 1..={GP_ENTRY_MAX_DWORDS}"
    );
    Ok(addr | GP_ENTRY_LEVEL_SUBROUTINE | u64::from(dwords) << GP_ENTRY_LENGTH_SHIFT)
}

/// A decoded GP entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpEntry {
    /// Pushbuffer address (bits 39:2).
    pub addr: u64,
    /// LENGTH in dwords; 0 marks a control entry (opcode in dword1 7:0).
    pub dwords: u32,
    pub subroutine: bool,
    pub sync: bool,
    pub fetch_conditional: bool,
    /// Control entries only: GP_ENTRY1_OPCODE (0 NOP, 1 ILLEGAL, 2 GP_CRC, 3 PB_CRC).
    pub opcode: u32,
}

/// Decodes a GP entry.
pub fn decode_gp_entry(e: u64) -> GpEntry {
    let dwords = (e >> GP_ENTRY_LENGTH_SHIFT) as u32 & GP_ENTRY_MAX_DWORDS;
    GpEntry {
        addr: e & 0xFF_FFFF_FFFC,
        dwords,
        subroutine: e & GP_ENTRY_LEVEL_SUBROUTINE != 0,
        sync: e & GP_ENTRY_SYNC_WAIT != 0,
        fetch_conditional: e & GP_ENTRY_FETCH_CONDITIONAL != 0,
        opcode: if dwords == 0 {
            (e >> 32) as u32 & 0xFF
        } else {
            0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gp_entry_encoding() {
        let e = gp_entry(0x12_3456_7890, 0x41).unwrap();
        // dword0: address 31:2; dword1: address 39:32, LEVEL bit 9, LENGTH 30:10.
        assert_eq!(e as u32, 0x3456_7890);
        assert_eq!((e >> 32) as u32, 0x12 | 1 << 9 | 0x41 << 10);
        let d = decode_gp_entry(e);
        assert_eq!(
            (d.addr, d.dwords, d.subroutine, d.sync),
            (0x12_3456_7890, 0x41, true, false)
        );
        assert!(gp_entry(0x1002, 4).is_err());
        assert!(gp_entry(1 << 40, 4).is_err());
        assert!(gp_entry(0x1000, 0).is_err());
        assert!(gp_entry(0x1000, 1 << 21).is_err());
        assert_eq!(
            decode_gp_entry(gp_entry(0x1000, GP_ENTRY_MAX_DWORDS).unwrap()).dwords,
            GP_ENTRY_MAX_DWORDS
        );
        // A control entry: length 0, opcode in dword1 7:0.
        let c = decode_gp_entry(3u64 << 32);
        assert_eq!((c.dwords, c.opcode), (0, 3));
    }
}
