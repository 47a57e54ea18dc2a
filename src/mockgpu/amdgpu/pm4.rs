//! The compute engine: a per-queue SH register file and the execution of each decoded PM4
//! packet (the decoder has already refused unknown opcodes, registers and field values).

use super::hooks::{DispatchState, InterruptSource};
use super::queue::Step;
use super::{QueueId, Shared};
use crate::hw::amd::decode::{Pm4Packet, ReleaseMemPacket};
use crate::hw::amd::pm4::{
    DataSel, DispatchInitiator, EventIndex, EventType, IntSel, ShReg, WaitOperation, WaitRegMem,
    WaitTarget,
};
use crate::{bail, ensure, Result};
use std::panic::AssertUnwindSafe;

/// RSRC2.USER_SGPR (bits 5:1) and LDS_SIZE (bits 23:15).
fn rsrc2_user_sgprs(rsrc2: u32) -> u32 {
    (rsrc2 >> 1) & 0x1F
}
fn rsrc2_lds_granules(rsrc2: u32) -> u32 {
    (rsrc2 >> 15) & 0x1FF
}

/// The SH registers of one compute queue, and which were ever written.
pub(super) struct Pm4Engine {
    regs: Vec<u32>,
    written: Vec<bool>,
}

impl Pm4Engine {
    pub(super) fn new() -> Pm4Engine {
        Pm4Engine {
            regs: vec![0; ShReg::ALL.len()],
            written: vec![false; ShReg::ALL.len()],
        }
    }

    fn get(&self, r: ShReg) -> u32 {
        self.regs[r as usize]
    }

    fn require(&self, regs: &[ShReg]) -> Result<()> {
        for r in regs {
            ensure!(
                self.written[*r as usize],
                Fault,
                "DISPATCH_DIRECT: {} was never written",
                r.name()
            );
        }
        Ok(())
    }

    /// Executes one packet (INDIRECT_BUFFER is the queue's business, not the engine's).
    pub(super) fn execute(
        &mut self,
        sh: &Shared,
        queue: QueueId,
        has_eop: bool,
        pkt: &Pm4Packet,
    ) -> Result<Step> {
        match pkt {
            Pm4Packet::Nop { .. } | Pm4Packet::AcquireMem { .. } => Ok(Step::Done),
            Pm4Packet::SetShReg { regs, .. } => {
                for (r, v) in regs {
                    self.regs[*r as usize] = *v;
                    self.written[*r as usize] = true;
                }
                Ok(Step::Done)
            }
            Pm4Packet::DispatchDirect { groups, initiator } => {
                self.dispatch(sh, queue, *groups, *initiator)?;
                Ok(Step::Done)
            }
            Pm4Packet::ReleaseMem(r) => {
                release_mem(sh, queue, has_eop, r)?;
                Ok(Step::Done)
            }
            Pm4Packet::WaitRegMem(w) => wait_reg_mem(sh, w),
            Pm4Packet::EventWrite { event, index } => {
                ensure!(
                    *event == EventType::CS_PARTIAL_FLUSH && *index == EventIndex::PARTIAL_FLUSH,
                    Fault,
                    "EVENT_WRITE: {} with index {} is not a partial flush",
                    event.name(),
                    index.bits()
                );
                // Dispatches complete before the next packet, so the flush has nothing to wait for.
                Ok(Step::Done)
            }
            Pm4Packet::IndirectBuffer { .. } => {
                bail!(
                    Internal,
                    "software GPU: INDIRECT_BUFFER reached the compute engine"
                )
            }
        }
    }

    fn dispatch(
        &self,
        sh: &Shared,
        queue: QueueId,
        grid: [u32; 3],
        init: DispatchInitiator,
    ) -> Result<()> {
        let checked = self.check_dispatch(sh, init)?;
        if grid.contains(&0) {
            return Ok(()); // an empty grid launches nothing
        }
        let state = self.state(sh, queue, grid, checked)?;
        let pgm = state.pgm_addr;
        // A panicking executor must fault the queue, not kill the GPU thread.
        let run =
            std::panic::catch_unwind(AssertUnwindSafe(|| sh.executor.dispatch(&*sh.mem, &state)));
        match run {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => bail!(
                Fault,
                "DISPATCH_DIRECT: kernel at {pgm:#x} failed: {}",
                e.message()
            ),
            Err(_) => bail!(
                Fault,
                "DISPATCH_DIRECT: the executor panicked running the kernel at {pgm:#x}"
            ),
        }
    }

    /// The checks the CP and SPI would trip over: missing registers, a program beyond 48 bits or
    /// unmapped, an impossible workgroup, too much LDS, wave32 where there is none.
    fn check_dispatch(&self, sh: &Shared, init: DispatchInitiator) -> Result<Checked> {
        use ShReg::*;
        let t = sh.target;
        self.require(&[
            COMPUTE_PGM_LO,
            COMPUTE_PGM_HI,
            COMPUTE_PGM_RSRC1,
            COMPUTE_PGM_RSRC2,
        ])?;
        self.require(&[
            COMPUTE_NUM_THREAD_X,
            COMPUTE_NUM_THREAD_Y,
            COMPUTE_NUM_THREAD_Z,
        ])?;
        let rsrc2 = self.get(COMPUTE_PGM_RSRC2);
        if rsrc2_user_sgprs(rsrc2) > 0 {
            // Every kernel rawgrad launches has at least the kernarg pointer in user SGPRs.
            self.require(&[COMPUTE_USER_DATA_0, COMPUTE_USER_DATA_1])?;
        }
        ensure!(
            init.contains(DispatchInitiator::COMPUTE_SHADER_EN),
            Fault,
            "DISPATCH_DIRECT: COMPUTE_SHADER_EN clear"
        );
        let wave32 = init.contains(DispatchInitiator::CS_W32_EN);
        ensure!(
            !wave32 || t.wave32,
            Fault,
            "DISPATCH_DIRECT: CS_W32_EN on {}, which has no wave32",
            t.name
        );
        let pgm_addr = self.program_address(sh)?;
        let local = [
            self.get(COMPUTE_NUM_THREAD_X),
            self.get(COMPUTE_NUM_THREAD_Y),
            self.get(COMPUTE_NUM_THREAD_Z),
        ];
        let threads: u64 = local.iter().map(|&l| u64::from(l)).product();
        let ok = local.iter().all(|&l| l > 0) && threads <= 1024;
        ensure!(
            ok,
            Fault,
            "DISPATCH_DIRECT: workgroup size {local:?} is invalid"
        );
        let lds_bytes = rsrc2_lds_granules(rsrc2) * t.lds_granule_bytes;
        ensure!(
            lds_bytes <= t.lds_max_bytes,
            Fault,
            "DISPATCH_DIRECT: {lds_bytes} bytes of LDS exceed {}",
            t.lds_max_bytes
        );
        Ok(Checked {
            pgm_addr,
            local,
            lds_bytes,
            wave32,
        })
    }

    /// COMPUTE_PGM_LO/HI as a byte address, which must be within 48 bits and readable.
    fn program_address(&self, sh: &Shared) -> Result<u64> {
        let pgm_hi = self.get(ShReg::COMPUTE_PGM_HI);
        ensure!(
            pgm_hi <= 0xFF,
            Fault,
            "DISPATCH_DIRECT: COMPUTE_PGM_HI {pgm_hi:#x} puts the program beyond 48 bits"
        );
        let pgm_addr = (u64::from(pgm_hi) << 32 | u64::from(self.get(ShReg::COMPUTE_PGM_LO))) << 8;
        if let Err(e) = sh.mem.read_u32(pgm_addr) {
            bail!(
                Fault,
                "DISPATCH_DIRECT: program at {pgm_addr:#x} is not readable: {}",
                e.message()
            );
        }
        Ok(pgm_addr)
    }

    fn state(
        &self,
        sh: &Shared,
        queue: QueueId,
        grid: [u32; 3],
        c: Checked,
    ) -> Result<DispatchState> {
        use ShReg::*;
        let mut user_sgprs = [0u32; 16];
        for (i, u) in user_sgprs.iter_mut().enumerate() {
            *u = self.get(ShReg::user_data(i)?);
        }
        let scratch_base = if sh.target.sh.dispatch_scratch_base {
            let hi = u64::from(self.get(COMPUTE_DISPATCH_SCRATCH_BASE_HI));
            (hi << 32 | u64::from(self.get(COMPUTE_DISPATCH_SCRATCH_BASE_LO))) << 8
        } else {
            0
        };
        let rsrc2 = self.get(COMPUTE_PGM_RSRC2);
        Ok(DispatchState {
            queue,
            pgm_addr: c.pgm_addr,
            rsrc1: self.get(COMPUTE_PGM_RSRC1),
            rsrc2,
            rsrc3: self.get(COMPUTE_PGM_RSRC3),
            user_sgprs,
            user_sgpr_count: rsrc2_user_sgprs(rsrc2),
            workgroup_size: c.local,
            grid,
            start: [
                self.get(COMPUTE_START_X),
                self.get(COMPUTE_START_Y),
                self.get(COMPUTE_START_Z),
            ],
            wave32: c.wave32,
            lds_bytes: c.lds_bytes,
            scratch_base,
            tmpring_size: self.get(COMPUTE_TMPRING_SIZE),
        })
    }
}

/// What [`Pm4Engine::check_dispatch`] established.
struct Checked {
    pgm_addr: u64,
    local: [u32; 3],
    lds_bytes: u32,
    wave32: bool,
}

fn release_mem(sh: &Shared, queue: QueueId, has_eop: bool, r: &ReleaseMemPacket) -> Result<()> {
    ensure!(
        has_eop,
        Fault,
        "RELEASE_MEM on a queue without an EOP buffer"
    );
    ensure!(
        matches!(
            r.event,
            EventType::CACHE_FLUSH_AND_INV_TS_EVENT | EventType::BOTTOM_OF_PIPE_TS
        ),
        Fault,
        "RELEASE_MEM: {} is not an end-of-pipe timestamp event",
        r.event.name()
    );
    ensure!(
        matches!(
            r.event_index,
            EventIndex::END_OF_PIPE | EventIndex::END_OF_SHADER
        ),
        Fault,
        "RELEASE_MEM: event index {} is not end of pipe/shader",
        r.event_index.bits()
    );
    match r.data_sel {
        DataSel::NONE => {}
        DataSel::VALUE_32BIT => sh.mem.write_u32(r.addr, r.data as u32)?,
        DataSel::VALUE_64BIT => sh.mem.write_u64(r.addr, r.data)?,
        DataSel::GPU_CLOCK_COUNTER => sh.mem.write_u64(r.addr, sh.clock.now())?,
    }
    if matches!(r.int_sel, IntSel::SEND_INT | IntSel::SEND_INT_ON_CONFIRM) {
        sh.events
            .interrupt(queue, InterruptSource::ReleaseMem, r.int_ctxid);
    }
    Ok(())
}

fn wait_reg_mem(sh: &Shared, w: &WaitRegMem) -> Result<Step> {
    match w.target {
        WaitTarget::Memory { addr } => {
            let v = sh.mem.read_u32(addr)?;
            Ok(if w.function.holds(v, w.mask, w.reference) {
                Step::Done
            } else {
                Step::Blocked
            })
        }
        WaitTarget::Registers { write, poll } => {
            let hdp = sh.target.hdp_flush.map(|h| (h.req, h.done));
            ensure!(
                w.operation == WaitOperation::WRITE_WAIT && hdp == Some((write, poll)),
                Fault,
                "WAIT_REG_MEM on registers {write:#x}/{poll:#x}: only the HDP flush write-then-wait is emulated"
            );
            // Emulated memory has no HDP write cache: the flush completes at once.
            Ok(Step::Done)
        }
    }
}
