//! Host (PBDMA) methods below 0x100 (`clc56f.h`): the semaphore group SEM_ADDR_LO..SEM_EXECUTE
//! (release: 32/64-bit payload plus a nanosecond timestamp at +8; acquire ==, strict >=,
//! circular >=, AND, NOR, 32- or 64-bit, blocking the channel until satisfied),
//! NON_STALL_INTERRUPT, and the harmless NOP/WFI/SET_REFERENCE/MEM_OP membar and L2 ops.
//! SET_OBJECT is handled by the channel (it owns the subchannel bindings).

use super::channel::{mmu, pbdma, Step, StepResult};
use super::{ChannelId, NvInterrupt, Shared};
use crate::hw::nv::arch::HostClass;
use crate::hw::nv::methods::*;

/// The host's method state of one channel.
#[derive(Debug, Default)]
pub(super) struct HostEngine {
    sem_addr_lo: u32,
    sem_addr_hi: u32,
    payload_lo: u32,
    payload_hi: u32,
    reference: u32,
    mem_op: [u32; 3],
}

impl HostEngine {
    pub(super) fn write(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        host: &HostClass,
        method: u32,
        data: u32,
    ) -> StepResult<Step> {
        match method {
            SEM_ADDR_LO => {
                if data & 3 != 0 {
                    return Err(pbdma(format!(
                        "SEM_ADDR_LO {data:#x}: bits 1:0 must be 0 (semaphores are 4-byte aligned)"
                    )));
                }
                self.sem_addr_lo = data;
            }
            SEM_ADDR_HI => {
                let bits = host.sem_addr_bits - 32;
                if data >> bits != 0 {
                    return Err(pbdma(format!(
                        "SEM_ADDR_HI {data:#x} does not fit {bits} bits ({} semaphores are {}-bit)",
                        host.name, host.sem_addr_bits
                    )));
                }
                self.sem_addr_hi = data;
            }
            SEM_PAYLOAD_LO => self.payload_lo = data,
            SEM_PAYLOAD_HI => self.payload_hi = data,
            SEM_EXECUTE => return self.sem_execute(sh, data),
            NON_STALL_INTERRUPT => sh.events.interrupt(ch, NvInterrupt::NonStall),
            NOP | WFI => {}
            SET_REFERENCE => self.reference = data,
            MEM_OP_A | MEM_OP_B | MEM_OP_C => {
                self.mem_op[((method - MEM_OP_A) / 4) as usize] = data
            }
            MEM_OP_D => match data >> 27 {
                MEM_OP_D_OPERATION_MEMBAR
                | MEM_OP_D_OPERATION_L2_PEERMEM_INVALIDATE
                | MEM_OP_D_OPERATION_L2_SYSMEM_INVALIDATE
                | MEM_OP_D_OPERATION_L2_FLUSH_DIRTY => {}
                op => return Err(pbdma(format!("MEM_OP_D operation {op:#x} is not emulated"))),
            },
            _ => return Err(pbdma(format!("host method {method:#x} is not emulated"))),
        }
        Ok(Step::Done)
    }

    fn sem_execute(&mut self, sh: &Shared, exec: u32) -> StepResult<Step> {
        if exec & !SEM_EXECUTE_KNOWN != 0 || exec & SEM_EXECUTE_REDUCTION_MASK != 0 {
            return Err(pbdma(format!(
                "SEM_EXECUTE {exec:#x}: unknown or reduction bits are not emulated"
            )));
        }
        let addr = u64::from(self.sem_addr_hi) << 32 | u64::from(self.sem_addr_lo);
        let wide = exec & SEM_EXECUTE_PAYLOAD_SIZE_64BIT != 0;
        let op = exec & SEM_EXECUTE_OPERATION_MASK;
        let stamp = op == SEM_OP_RELEASE && exec & SEM_EXECUTE_RELEASE_TIMESTAMP != 0;
        let align = if stamp {
            16
        } else if wide {
            8
        } else {
            4
        };
        if addr % align != 0 {
            return Err(pbdma(format!(
                "SEM_EXECUTE: semaphore address {addr:#x} is not {align}-byte aligned"
            )));
        }
        let payload = u64::from(self.payload_hi) << 32 | u64::from(self.payload_lo);
        if op == SEM_OP_RELEASE {
            if wide {
                sh.mem.write_u64(addr, payload).map_err(mmu)?;
            } else {
                sh.mem.write_u32(addr, self.payload_lo).map_err(mmu)?;
            }
            if stamp {
                sh.mem.write_u64(addr + 8, sh.clock.now()).map_err(mmu)?;
            }
            return Ok(Step::Done);
        }
        let (v, p, mask) = if wide {
            (sh.mem.read_u64(addr).map_err(mmu)?, payload, u64::MAX)
        } else {
            let v = sh.mem.read_u32(addr).map_err(mmu)?;
            (
                u64::from(v),
                u64::from(self.payload_lo),
                u64::from(u32::MAX),
            )
        };
        let ok = match op {
            SEM_OP_ACQUIRE => v == p,
            SEM_OP_ACQ_STRICT_GEQ => v >= p,
            SEM_OP_ACQ_CIRC_GEQ => circ_geq(v, p, wide),
            SEM_OP_ACQ_AND => v & p != 0,
            SEM_OP_ACQ_NOR => !(v | p) & mask != 0,
            _ => return Err(pbdma(format!("SEM_EXECUTE operation {op} is not emulated"))),
        };
        Ok(if ok { Step::Done } else { Step::Blocked })
    }
}

/// Circular >=: the (wrapping) difference `v - p` is not negative in the payload's width.
fn circ_geq(v: u64, p: u64, wide: bool) -> bool {
    if wide {
        v.wrapping_sub(p) as i64 >= 0
    } else {
        (v as u32).wrapping_sub(p as u32) as i32 >= 0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn circular_compare() {
        use super::circ_geq;
        assert!(circ_geq(5, 5, true) && circ_geq(6, 5, true) && !circ_geq(4, 5, true));
        assert!(circ_geq(1, u64::MAX, true), "wrapped past the payload");
        assert!(circ_geq(2, 0xFFFF_FFF0, false) && !circ_geq(0xFFFF_FFF0, 2, false));
    }
}
