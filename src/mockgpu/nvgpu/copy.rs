//! The copy engine: OFFSET_IN/OUT, LINE_LENGTH_IN, LINE_COUNT, PITCH_IN/OUT and semaphore state,
//! and LAUNCH_DMA: a one-line pitch-to-pitch virtual copy (multi-line, remap, physical addressing
//! and semaphore reductions are refused), then the optional semaphore release (one word, or four
//! words with a timestamp at +8; 64-bit payloads with SEMAPHORE_PAYLOAD_SIZE on classes that have
//! SET_SEMAPHORE_PAYLOAD_UPPER) and interrupt.

use super::channel::{ce, mmu, StepResult};
use super::{ChannelId, NvInterrupt, Shared};
use crate::hw::nv::arch::copy_class;
use crate::hw::nv::methods::launch_dma::*;
use crate::hw::nv::methods::*;

/// The copy engine's method state of one channel.
#[derive(Debug, Default)]
pub(super) struct CopyEngine {
    sem: [u32; 2],
    payload: [u32; 2],
    offset_in: [u32; 2],
    offset_out: [u32; 2],
    pitch: [u32; 2],
    line_length: u32,
    line_count: u32,
}

fn join(v: [u32; 2]) -> u64 {
    u64::from(v[0]) << 32 | u64::from(v[1])
}

impl CopyEngine {
    pub(super) fn write(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        method: u32,
        data: u32,
    ) -> StepResult<()> {
        let Some(cc) = copy_class(class) else {
            return Err(ce(format!("class {class:#x} is not a copy class")));
        };
        let upper_bits = cc.addr_bits - 32;
        let upper = |what: &str, v: u32| {
            if v >> upper_bits != 0 {
                return Err(ce(format!(
                    "{what} {v:#x} does not fit {upper_bits} bits ({})",
                    cc.name
                )));
            }
            Ok(v)
        };
        match method {
            COPY_NOP => {}
            SET_SEMAPHORE_A => self.sem[0] = upper("SET_SEMAPHORE_A", data)?,
            SET_SEMAPHORE_B => self.sem[1] = data,
            SET_SEMAPHORE_PAYLOAD => self.payload[0] = data,
            SET_SEMAPHORE_PAYLOAD_UPPER if cc.payload_upper => self.payload[1] = data,
            OFFSET_IN_UPPER => self.offset_in[0] = upper("OFFSET_IN_UPPER", data)?,
            OFFSET_IN_LOWER => self.offset_in[1] = data,
            OFFSET_OUT_UPPER => self.offset_out[0] = upper("OFFSET_OUT_UPPER", data)?,
            OFFSET_OUT_LOWER => self.offset_out[1] = data,
            PITCH_IN => self.pitch[0] = data,
            PITCH_OUT => self.pitch[1] = data,
            LINE_LENGTH_IN => self.line_length = data,
            LINE_COUNT => self.line_count = data,
            LAUNCH_DMA => return self.launch(sh, ch, cc.payload_upper, data),
            _ => {
                return Err(ce(format!(
                    "{} method {method:#x} is not emulated",
                    cc.name
                )))
            }
        }
        Ok(())
    }

    fn launch(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        payload_upper: bool,
        v: u32,
    ) -> StepResult<()> {
        let refused = MULTI_LINE_ENABLE
            | REMAP_ENABLE
            | SRC_TYPE_PHYSICAL
            | DST_TYPE_PHYSICAL
            | SEMAPHORE_REDUCTION_ENABLE;
        if v & !KNOWN != 0 || v & refused != 0 {
            return Err(ce(format!("LAUNCH_DMA {v:#x}: multi-line, remap, physical, reduction or unknown bits are not emulated")));
        }
        if v & SEMAPHORE_PAYLOAD_SIZE_TWO_WORD != 0 && !payload_upper {
            return Err(ce(format!(
                "LAUNCH_DMA {v:#x}: SEMAPHORE_PAYLOAD_SIZE on a class without 64-bit payloads"
            )));
        }
        if v & DATA_TRANSFER_TYPE_MASK != 0 {
            self.copy(sh, v)?;
        }
        self.semaphore(sh, v)?;
        if v & INTERRUPT_TYPE_MASK != 0 {
            sh.events.interrupt(ch, NvInterrupt::CopyEngine);
        }
        Ok(())
    }

    fn copy(&mut self, sh: &Shared, v: u32) -> StepResult<()> {
        if v & DATA_TRANSFER_TYPE_MASK == 3 {
            return Err(ce("LAUNCH_DMA: DATA_TRANSFER_TYPE 3 is reserved"));
        }
        if v & (SRC_MEMORY_LAYOUT_PITCH | DST_MEMORY_LAYOUT_PITCH)
            != SRC_MEMORY_LAYOUT_PITCH | DST_MEMORY_LAYOUT_PITCH
        {
            return Err(ce(format!(
                "LAUNCH_DMA {v:#x}: block-linear layouts are not emulated"
            )));
        }
        let len = u64::from(self.line_length);
        if len == 0 {
            return Err(ce("LAUNCH_DMA: copy of 0 bytes (LINE_LENGTH_IN = 0)"));
        }
        let (src, dst) = (join(self.offset_in), join(self.offset_out));
        sh.mem.copy(dst, src, len).map_err(mmu)
    }

    fn semaphore(&mut self, sh: &Shared, v: u32) -> StepResult<()> {
        let kind = (v & SEMAPHORE_TYPE_MASK) >> SEMAPHORE_TYPE_SHIFT;
        let wide = v & SEMAPHORE_PAYLOAD_SIZE_TWO_WORD != 0;
        let addr = join(self.sem);
        let align = match kind {
            0 => return Ok(()),
            SEMAPHORE_TYPE_ONE_WORD if wide => 8,
            SEMAPHORE_TYPE_ONE_WORD => 4,
            SEMAPHORE_TYPE_FOUR_WORD => 16,
            _ => {
                return Err(ce(
                    "LAUNCH_DMA: conditional-interrupt semaphores are not emulated",
                ))
            }
        };
        if addr % align != 0 {
            return Err(ce(format!(
                "LAUNCH_DMA semaphore address {addr:#x} is not {align}-byte aligned"
            )));
        }
        let res = if wide {
            sh.mem
                .write_u64(addr, join([self.payload[1], self.payload[0]]))
        } else {
            sh.mem.write_u32(addr, self.payload[0])
        };
        res.map_err(mmu)?;
        if kind == SEMAPHORE_TYPE_FOUR_WORD {
            sh.mem.write_u64(addr + 8, sh.clock.now()).map_err(mmu)?;
        }
        Ok(())
    }
}
