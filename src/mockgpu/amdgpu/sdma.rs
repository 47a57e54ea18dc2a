//! The SDMA engine: execution of each decoded SDMA packet (the decoder has already refused
//! unknown opcodes, flags and misaligned addresses; the queue has checked the ring rules).

use super::hooks::InterruptSource;
use super::queue::Step;
use super::{QueueId, Shared};
use crate::hw::amd::decode::SdmaPacket;
use crate::Result;

pub(super) fn execute_sdma(sh: &Shared, queue: QueueId, pkt: &SdmaPacket) -> Result<Step> {
    match *pkt {
        SdmaPacket::Nop { .. } => {}
        SdmaPacket::CopyLinear { bytes, src, dst } => sh.mem.copy(dst, src, bytes)?,
        SdmaPacket::Fence { addr, data, .. } => sh.mem.write_u32(addr, data)?,
        SdmaPacket::Trap { int_context } => {
            sh.events
                .interrupt(queue, InterruptSource::SdmaTrap, int_context)
        }
        SdmaPacket::PollRegmem(p) => {
            let v = sh.mem.read_u32(p.addr)?;
            if !p.function.holds(v, p.mask, p.reference) {
                return Ok(Step::Blocked);
            }
        }
        SdmaPacket::Timestamp { addr } => sh.mem.write_u64(addr, sh.clock.now())?,
    }
    Ok(Step::Done)
}
