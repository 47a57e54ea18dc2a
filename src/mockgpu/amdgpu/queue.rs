//! One queue as the GPU thread runs it: fetching packets from the ring (with the compute ring's
//! dword wrap and the SDMA no-straddle rule), entering indirect buffers, dispatching each packet
//! to its engine, and publishing rptr, last packet and faults.
//!
//! An INDIRECT_BUFFER on the compute ring faults the queue, as the real CP refuses or faults on
//! it, when (decoder, [`crate::hw::amd::decode`], and [`Runner::step_pm4`]):
//! - its address is not 4-byte aligned (amdgpu `gfx_v11_0.c` `gfx_v11_0_ring_emit_ib_compute`:
//!   `BUG_ON(ib->gpu_addr & 0x3); /* Dword align */`) or not below 2^48;
//! - VALID (bit 23, amdgpu `nvd.h` INDIRECT_BUFFER_VALID) is clear, or IB_SIZE (bits 19:0 of
//!   the control dword, the PM4 packet's IB_SIZE field; amdgpu writes `length_dw` there) is 0;
//! - other control bits are set (VMID 27:24 and the preemption/cache-policy bits are the kernel
//!   driver's, never a user queue's); CHAIN (bit 20) is not modelled and refused;
//! - the IB's first or last dword is not mapped in the GPU VM (the CP's fetch would take a VM
//!   fault: amdgpu `amdgpu_vm.c` faults any unmapped GPU VA; checked on entering the IB, before
//!   any of its packets runs), or a packet crosses the IB's end;
//! - it sits inside another IB: rawgrad (as tinygrad 0.9.1) never nests IBs on the compute
//!   ring, and the emulator models one level only (stricter than a CP with IB2 support).
//!
//! The IB's dwords are read as each packet is reached (not at the INDIRECT_BUFFER), so a host
//! that rewrote an IB while a submission of it still ran would be caught by wrong results.

use super::pm4::Pm4Engine;
use super::sdma::execute_sdma;
use super::{lock, IbPos, LastPacket, QueueFault, QueueId, QueueKind, QueueSlot, Shared};
use crate::hw::amd::decode::{
    decode_pm4_packet, decode_sdma_packet, pm4_packet_len, sdma_packet_len, Pm4Packet,
};
use crate::mockgpu::engine_loop::{EngineRunner, RunResult};
use crate::{bail, ensure, Result};
use std::sync::Arc;

/// What executing one packet did.
pub(super) enum Step {
    /// Executed; move past it.
    Done,
    /// A wait is not satisfied yet; retry the same packet later.
    Blocked,
}

/// An indirect buffer being executed.
#[derive(Clone, Copy)]
struct Ib {
    va: u64,
    size: u32,
    pos: u32,
    /// Dwords of the INDIRECT_BUFFER packet in the ring (rptr moves past it when the IB ends).
    ring_len: u64,
}

pub(super) struct Runner {
    id: QueueId,
    slot: Arc<QueueSlot>,
    shared: Arc<Shared>,
    rptr: u64,
    ib: Option<Ib>,
    pm4: Pm4Engine,
    buf: Vec<u32>,
    last: Option<LastPacket>,
}

impl Runner {
    pub(super) fn new(id: QueueId, slot: Arc<QueueSlot>, shared: Arc<Shared>) -> Runner {
        Runner {
            id,
            slot,
            shared,
            rptr: 0,
            ib: None,
            pm4: Pm4Engine::new(),
            buf: Vec::new(),
            last: None,
        }
    }

    fn publish(&self, blocked: bool, error: Option<String>) -> RunResult {
        let Ok(mut s) = lock(&self.slot.state) else {
            return RunResult::Idle;
        };
        s.rptr = self.rptr;
        s.last_packet = self.last;
        s.waiting = blocked;
        if let Some(reason) = error {
            let ib = self.ib.map(|ib| IbPos {
                va: ib.va,
                dword: ib.pos,
            });
            let f = QueueFault {
                queue: self.id,
                kind: self.slot.desc.kind,
                pos: self.rptr,
                ib,
                reason,
            };
            self.shared.trace(|| format!("{} FAULT {f}", self.id));
            s.fault.get_or_insert(f);
            return RunResult::Progress;
        }
        if blocked {
            RunResult::Waiting
        } else {
            RunResult::Progress
        }
    }

    fn step(&mut self, wptr: u64) -> Result<Step> {
        match self.slot.desc.kind {
            QueueKind::Sdma => self.step_sdma(wptr),
            QueueKind::Compute => match self.ib {
                Some(ib) => self.step_ib(ib),
                None => self.step_pm4(wptr),
            },
        }
    }

    /// Reads `n` dwords of the compute ring starting at monotonic dword position `pos`.
    fn read_ring(&mut self, pos: u64, n: usize) -> Result<()> {
        let ring_dwords = self.slot.desc.ring_size / 4;
        let at = pos % ring_dwords;
        let first = ((ring_dwords - at) as usize).min(n);
        self.buf.resize(n, 0);
        let va = self.slot.desc.ring_va;
        self.shared
            .mem
            .read_dwords(va + 4 * at, &mut self.buf[..first])?;
        if first < n {
            self.shared.mem.read_dwords(va, &mut self.buf[first..])?;
        }
        Ok(())
    }

    fn step_pm4(&mut self, wptr: u64) -> Result<Step> {
        self.read_ring(self.rptr, 1)?;
        let len = pm4_packet_len(self.buf[0])?;
        ensure!(
            self.rptr + len as u64 <= wptr,
            Fault,
            "PM4 packet of {len} dwords extends past wptr {wptr}"
        );
        self.read_ring(self.rptr, len)?;
        let (pkt, _) = decode_pm4_packet(self.shared.target, &self.buf)?;
        self.note(self.rptr, None, pkt.name(), &pkt);
        if let Pm4Packet::IndirectBuffer {
            addr,
            size_dwords,
            chain,
        } = pkt
        {
            ensure!(!chain, Fault, "INDIRECT_BUFFER: CHAIN is not supported");
            let last = addr + 4 * (u64::from(size_dwords) - 1);
            for va in [addr, last] {
                if let Err(e) = self.shared.mem.read_u32(va) {
                    bail!(
                        Fault,
                        "INDIRECT_BUFFER at {addr:#x} of {size_dwords} dwords: {va:#x} is not mapped in the GPU VM ({})",
                        e.message()
                    );
                }
            }
            self.ib = Some(Ib {
                va: addr,
                size: size_dwords,
                pos: 0,
                ring_len: len as u64,
            });
            return Ok(Step::Done);
        }
        let step =
            self.pm4
                .execute(&self.shared, self.id, self.slot.desc.eop_va.is_some(), &pkt)?;
        if let Step::Done = step {
            self.rptr += len as u64;
        }
        Ok(step)
    }

    fn step_ib(&mut self, mut ib: Ib) -> Result<Step> {
        let va = ib.va + 4 * u64::from(ib.pos);
        let header = self.shared.mem.read_u32(va)?;
        let len = pm4_packet_len(header)?;
        ensure!(
            u64::from(ib.pos) + len as u64 <= u64::from(ib.size),
            Fault,
            "PM4 packet of {len} dwords crosses the end of the {}-dword IB",
            ib.size
        );
        self.buf.resize(len, 0);
        self.shared.mem.read_dwords(va, &mut self.buf)?;
        let (pkt, _) = decode_pm4_packet(self.shared.target, &self.buf)?;
        self.note(
            self.rptr,
            Some(IbPos {
                va: ib.va,
                dword: ib.pos,
            }),
            pkt.name(),
            &pkt,
        );
        if let Pm4Packet::IndirectBuffer { .. } = pkt {
            bail!(
                Fault,
                "INDIRECT_BUFFER inside an indirect buffer is not supported"
            );
        }
        let step =
            self.pm4
                .execute(&self.shared, self.id, self.slot.desc.eop_va.is_some(), &pkt)?;
        if let Step::Done = step {
            ib.pos += len as u32;
            if ib.pos == ib.size {
                self.ib = None;
                self.rptr += ib.ring_len;
            } else {
                self.ib = Some(ib);
            }
        }
        Ok(step)
    }

    fn step_sdma(&mut self, wptr: u64) -> Result<Step> {
        let ring = self.slot.desc.ring_size;
        let at = self.rptr % ring;
        let header = self.shared.mem.read_u32(self.slot.desc.ring_va + at)?;
        let bytes = 4 * sdma_packet_len(header)? as u64;
        ensure!(
            at + bytes <= ring,
            Fault,
            "SDMA packet of {bytes} bytes at ring offset {at:#x} straddles the end of the {ring:#x}-byte ring"
        );
        ensure!(
            self.rptr + bytes <= wptr,
            Fault,
            "SDMA packet of {bytes} bytes extends past wptr {wptr}"
        );
        self.buf.resize((bytes / 4) as usize, 0);
        self.shared
            .mem
            .read_dwords(self.slot.desc.ring_va + at, &mut self.buf)?;
        let (pkt, _) = decode_sdma_packet(self.shared.target, &self.buf)?;
        self.note(self.rptr, None, pkt.name(), &pkt);
        let step = execute_sdma(&self.shared, self.id, &pkt)?;
        if let Step::Done = step {
            self.rptr += bytes;
        }
        Ok(step)
    }

    /// Records the packet as the last one started, and traces it.
    fn note(
        &mut self,
        pos: u64,
        ib: Option<IbPos>,
        name: &'static str,
        pkt: &dyn std::fmt::Display,
    ) {
        let fresh = !matches!(self.last, Some(l) if l.pos == pos && l.ib == ib);
        self.last = Some(LastPacket { pos, ib, name });
        if fresh {
            let id = self.id;
            self.shared.trace(|| match ib {
                Some(ib) => format!("{id} @{pos} ib+{}: {pkt}", ib.dword),
                None => format!("{id} @{pos}: {pkt}"),
            });
        }
    }
}

impl EngineRunner for Runner {
    type Id = QueueId;

    fn id(&self) -> QueueId {
        self.id
    }

    /// Executes up to `budget` packets between rptr and the doorbell's wptr.
    fn run(&mut self, budget: usize) -> RunResult {
        let (wptr, faulted) = match lock(&self.slot.state) {
            Ok(s) => (s.wptr, s.fault.is_some()),
            Err(_) => return RunResult::Idle,
        };
        if faulted || self.rptr == wptr {
            return RunResult::Idle;
        }
        let (mut progressed, mut blocked, mut error) = (false, false, None);
        for _ in 0..budget {
            if self.rptr == wptr {
                break;
            }
            match self.step(wptr) {
                Ok(Step::Done) => progressed = true,
                Ok(Step::Blocked) => {
                    blocked = true;
                    break;
                }
                Err(e) => {
                    error = Some(e.message().to_string());
                    break;
                }
            }
        }
        if progressed && error.is_none() {
            // The doorbell's ring-overrun check (`bad_wptr`) reads the slot's rptr: it moves
            // before the host can read the new rptr from memory, so a host that computed its room
            // from memory never fails that check against a stale slot rptr.
            if let Ok(mut s) = lock(&self.slot.state) {
                s.rptr = self.rptr;
            }
            if let Err(e) = self.shared.mem.write_u64(self.slot.desc.rptr_va, self.rptr) {
                error = Some(format!("publishing rptr: {}", e.message()));
            }
        }
        self.publish(blocked, error)
    }
}
