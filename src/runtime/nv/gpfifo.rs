//! GPFIFO submission (memo 2.1, `clc56f.h`): the GP entry encoding, the USERD layout, the
//! usermode doorbell, and [`GpFifo`], a ring writer with flow control against GPGet.
//!
//! How the runtime submits one pushbuffer (the order matters; memo 2.9):
//! 1. write the payload: kernargs/QMD copies and the pushbuffer dwords, into GPU-visible memory;
//! 2. write the GP entry ([`gp_entry`]) at ring slot `put % entries`;
//! 3. write GPPut = `(put + 1) % entries` into USERD at [`USERD_GP_PUT`];
//! 4. a store fence (`fence(SeqCst)` / sfence: the ring and USERD may be write-combined BAR1);
//! 5. write the channel's work submit token (NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN) as a
//!    u32 to the usermode page at [`USERMODE_NOTIFY_CHANNEL_PENDING`] (the doorbell).
//!
//! [`GpFifo::submit`] does 2-5 through a [`GpFifoIo`], after making sure the ring has room: the
//! GPU reports how far it got in USERD's GPGet ([`USERD_GP_GET`], a ring index); at most
//! `entries - 1` entries may be outstanding (put == get means empty).
//!
//! Not guaranteed: that the pushbuffers an entry points at stay untouched until the GPU passed
//! it; the caller tracks that (GPGet, or completed timeline values).

use crate::{bail, ensure, Result};
use std::time::{Duration, Instant};

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

/// How [`GpFifo`] reaches the ring, USERD and the doorbell (a CPU mapping on hardware, the
/// emulator's memory in tests).
pub trait GpFifoIo {
    /// Stores a GP entry at ring slot `index`.
    fn write_entry(&mut self, index: u32, entry: u64) -> Result<()>;
    /// Reads USERD GPGet.
    fn read_gp_get(&mut self) -> Result<u32>;
    /// Stores USERD GPPut.
    fn write_gp_put(&mut self, put: u32) -> Result<()>;
    /// A store fence, then the work submit token to the doorbell.
    fn ring_doorbell(&mut self, token: u32) -> Result<()>;
}

/// How long [`GpFifo::submit`] sleeps between GPGet reads while the ring is full.
const FULL_POLL: Duration = Duration::from_micros(20);

/// The client side of one GPFIFO ring: the monotonic put counter and the submit protocol.
#[derive(Debug, Clone)]
pub struct GpFifo {
    entries: u32,
    /// Entries published so far (monotonic; the ring index is `put % entries`).
    put: u64,
    token: u32,
}

impl GpFifo {
    /// A ring of `entries` (>= 2) slots whose doorbell value is `token`.
    pub fn new(entries: u32, token: u32) -> Result<GpFifo> {
        ensure!(
            entries >= 2,
            InvalidArgument,
            "GPFIFO: a ring of {entries} entries (need at least 2)"
        );
        Ok(GpFifo {
            entries,
            put: 0,
            token,
        })
    }

    /// Ring slots.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Entries published so far.
    pub fn put(&self) -> u64 {
        self.put
    }

    /// The GPPut value after the last submit (`put % entries`).
    pub fn gp_put(&self) -> u32 {
        (self.put % u64::from(self.entries)) as u32
    }

    /// Entries the GPU has not fetched yet, given its GPGet.
    pub fn outstanding(&self, gp_get: u32) -> Result<u32> {
        ensure!(
            gp_get < self.entries,
            Fault,
            "GPFIFO: GPGet {gp_get} is outside the {}-entry ring",
            self.entries
        );
        Ok((self.gp_put() + self.entries - gp_get) % self.entries)
    }

    /// Publishes `entry` if the ring has room now; `Ok(false)` when it is full.
    pub fn try_submit(&mut self, entry: u64, io: &mut dyn GpFifoIo) -> Result<bool> {
        let gp_get = io.read_gp_get()?;
        if self.outstanding(gp_get)? >= self.entries - 1 {
            return Ok(false);
        }
        io.write_entry(self.gp_put(), entry)?;
        self.put += 1;
        io.write_gp_put(self.gp_put())?;
        io.ring_doorbell(self.token)?;
        Ok(true)
    }

    /// Publishes `entry`, waiting (polling GPGet with short sleeps) up to `timeout` for room.
    pub fn submit(&mut self, entry: u64, io: &mut dyn GpFifoIo, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.try_submit(entry, io)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let gp_get = io.read_gp_get()?;
                bail!(
                    Timeout,
                    "GPFIFO: ring of {} entries still full after {timeout:?} (GPPut {}, GPGet {gp_get})",
                    self.entries,
                    self.gp_put()
                )
            }
            std::thread::sleep(FULL_POLL);
        }
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

    /// A ring in a Vec; GPGet is set by the test.
    struct FakeRing {
        slots: Vec<u64>,
        gp_get: u32,
        gp_put: u32,
        log: Vec<String>,
    }

    impl GpFifoIo for FakeRing {
        fn write_entry(&mut self, index: u32, entry: u64) -> Result<()> {
            self.slots[index as usize] = entry;
            self.log.push(format!("entry[{index}]"));
            Ok(())
        }
        fn read_gp_get(&mut self) -> Result<u32> {
            Ok(self.gp_get)
        }
        fn write_gp_put(&mut self, put: u32) -> Result<()> {
            self.gp_put = put;
            self.log.push(format!("put={put}"));
            Ok(())
        }
        fn ring_doorbell(&mut self, token: u32) -> Result<()> {
            self.log.push(format!("doorbell {token:#x}"));
            Ok(())
        }
    }

    #[test]
    fn ring_order_wrap_and_flow_control() {
        let mut ring = FakeRing {
            slots: vec![0; 4],
            gp_get: 0,
            gp_put: 0,
            log: vec![],
        };
        let mut f = GpFifo::new(4, 0xAB).unwrap();
        for i in 0..3 {
            assert!(f.try_submit(0x100 + i, &mut ring).unwrap());
        }
        assert_eq!(ring.log[..3], ["entry[0]", "put=1", "doorbell 0xab"]);
        // 3 outstanding in a 4-slot ring: full.
        assert!(!f.try_submit(0x200, &mut ring).unwrap());
        let e = f.submit(0x200, &mut ring, Duration::ZERO).unwrap_err();
        assert!(matches!(e, crate::Error::Timeout(_)), "{e}");
        assert!(e.to_string().contains("GPGet 0"), "{e}");
        // The GPU consumed two: two more fit, wrapping to slot 0.
        ring.gp_get = 2;
        f.submit(0x200, &mut ring, Duration::ZERO).unwrap();
        f.submit(0x201, &mut ring, Duration::ZERO).unwrap();
        assert_eq!(
            (ring.slots[3], ring.slots[0], ring.gp_put),
            (0x200, 0x201, 1)
        );
        assert_eq!(f.put(), 5);
        assert_eq!(f.outstanding(2).unwrap(), 3);
        ring.gp_get = 9;
        assert!(f.try_submit(1, &mut ring).is_err());
        assert!(GpFifo::new(1, 0).is_err());
    }
}
