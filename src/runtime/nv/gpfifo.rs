//! GPFIFO submission (open-gpu-doc `clc56f.h` GP entry, USERD): [`GpFifo`], a ring writer with flow
//! control against GPGet. The GP entry encoding, the USERD layout and the usermode doorbell offsets
//! are hardware facts in [`crate::hw::nv::gpfifo`] (re-exported here).
//!
//! How the runtime submits one pushbuffer (the order matters; tinygrad `_submit_to_gpfifo`):
//! 1. write the payload: kernargs/QMD copies and the pushbuffer dwords, into GPU-visible memory;
//! 2. write the GP entry ([`gp_entry`]) at ring slot `put % entries`;
//! 3. write GPPut = `(put + 1) % entries` into USERD at [`USERD_GP_PUT`];
//! 4. a store fence (`fence(SeqCst)` / sfence: the ring and USERD may be write-combined BAR1);
//! 5. write the channel's work submit token (NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN) as a
//!    u32 to the usermode page at [`USERMODE_NOTIFY_CHANNEL_PENDING`] (the doorbell).
//!
//! [`GpFifo::submit`] does 2-5 through a [`GpFifoIo`], after making sure the ring has room: the
//! GPU reports how far it got in USERD's GPGet ([`USERD_GP_GET`], a ring index); at most
//! `entries - 1` entries may be outstanding (put == get means empty). GPGet is read only when the
//! value read last shows a full ring (a read of USERD in VRAM crosses PCIe uncached).
//!
//! Not guaranteed: that the pushbuffers an entry points at stay untouched until the GPU passed
//! it; the caller tracks that (GPGet, or completed timeline values).

pub use crate::hw::nv::gpfifo::*;

use crate::{bail, ensure, Result};
use std::time::{Duration, Instant};

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
    /// The GPGet read last: the GPU only moves it forward, so the room it shows is there.
    /// USERD sits in VRAM behind BAR1, where a CPU read is an uncached PCIe round trip: it is
    /// read again only when this value shows a full ring.
    known_get: u32,
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
            known_get: 0,
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

    /// Record a GPGet read from USERD (checked to lie in the ring) for the next
    /// [`GpFifo::try_submit`].
    pub fn note_gp_get(&mut self, gp_get: u32) -> Result<()> {
        self.outstanding(gp_get)?;
        self.known_get = gp_get;
        Ok(())
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
        if self.outstanding(self.known_get)? >= self.entries - 1 {
            let gp_get = io.read_gp_get()?;
            self.note_gp_get(gp_get)?;
        }
        if self.outstanding(self.known_get)? >= self.entries - 1 {
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

    /// A ring in a Vec; GPGet is set by the test.
    struct FakeRing {
        slots: Vec<u64>,
        gp_get: u32,
        gp_put: u32,
        log: Vec<String>,
        get_reads: usize,
    }

    impl FakeRing {
        fn new(slots: usize) -> FakeRing {
            FakeRing {
                slots: vec![0; slots],
                gp_get: 0,
                gp_put: 0,
                log: vec![],
                get_reads: 0,
            }
        }
    }

    impl GpFifoIo for FakeRing {
        fn write_entry(&mut self, index: u32, entry: u64) -> Result<()> {
            self.slots[index as usize] = entry;
            self.log.push(format!("entry[{index}]"));
            Ok(())
        }
        fn read_gp_get(&mut self) -> Result<u32> {
            self.get_reads += 1;
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
        let mut ring = FakeRing::new(4);
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

    /// GPGet (an uncached read of USERD in VRAM on hardware) is read only when the value read
    /// last shows a full ring; a stale value never lets a submission overrun the GPU.
    #[test]
    fn gp_get_is_read_only_when_the_ring_looks_full() {
        let mut ring = FakeRing::new(8);
        let mut f = GpFifo::new(8, 1).unwrap();
        for i in 0..7 {
            assert!(f.try_submit(i, &mut ring).unwrap());
        }
        assert_eq!(
            ring.get_reads, 0,
            "7 entries fit an 8-slot ring without a read"
        );
        assert!(!f.try_submit(7, &mut ring).unwrap());
        assert_eq!(ring.get_reads, 1);
        ring.gp_get = 3;
        assert!(f.try_submit(7, &mut ring).unwrap());
        assert_eq!(ring.get_reads, 2);
        // The 3 freed slots are known now: two more go in without a read, the third reads.
        assert!(f.try_submit(8, &mut ring).unwrap());
        assert!(f.try_submit(9, &mut ring).unwrap());
        assert_eq!(ring.get_reads, 2);
        assert!(!f.try_submit(10, &mut ring).unwrap());
        assert_eq!((ring.get_reads, f.put()), (3, 10));
        assert_eq!(ring.slots[1], 9);
    }
}
