//! Scalar ALU and program control: SOP2, SOPK, SOP1, SOPC, SOPP (RDNA3 reference, "Scalar ALU
//! Operations" and "Program Flow Control"). SCC follows each opcode's pseudocode: carry/borrow for
//! the unsigned add/sub, signed overflow for the signed ones, "result != 0" for logic, shifts,
//! bit-field extracts and counts, the comparison for SOPC/SOPK compares.
//!
//! Not guaranteed: opcodes outside the table (traps, messages other than the VGPR release,
//! register get/set, relative moves) are errors naming them.

use super::decode::{bits, Inst};
use super::wave::{Counter, Fk, Src, Wave, EXEC, NULL};
use crate::Result;

/// What the wave does after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Next,
    /// Jump to this dword index.
    Jump(usize),
    Barrier,
    End,
}

fn s32(w: &Wave, f: u32, lit: u32) -> Result<u32> {
    Ok(match w.src(f, lit, Fk::F32)? {
        Src::Const(c) => c,
        Src::Vgpr(r) => {
            return Err(crate::Error::Fault(format!(
                "RDNA3: scalar instruction at pc {:#x} names v{r}",
                4 * w.pc
            )))
        }
    })
}

fn s64(w: &Wave, f: u32, lit: u32) -> Result<u64> {
    match w.src64(f, lit, Fk::F32)? {
        super::wave::Src64::Const(c) => Ok(c),
        super::wave::Src64::Vgpr(r) => Err(crate::Error::Fault(format!(
            "RDNA3: scalar instruction at pc {:#x} names v{r}",
            4 * w.pc
        ))),
    }
}

/// SOP2: `sdst = op(ssrc0, ssrc1)`.
pub fn sop2(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (f0, f1, d) = (
        bits(i.w[0], 7, 0),
        bits(i.w[0], 15, 8),
        bits(i.w[0], 22, 16) as usize,
    );
    let is64 = matches!(
        i.op,
        9 | 11 | 13 | 23 | 25 | 27 | 29 | 31 | 33 | 35 | 37 | 40 | 41 | 43 | 49
    );
    if is64 {
        let a = s64(w, f0, i.lit)?;
        // Shift amounts and bit-field descriptors are 32-bit operands.
        let r = match i.op {
            9 => a << (s32(w, f1, i.lit)? & 63),
            11 => a >> (s32(w, f1, i.lit)? & 63),
            13 => ((a as i64) >> (s32(w, f1, i.lit)? & 63)) as u64,
            40 | 41 => {
                let b = s32(w, f1, i.lit)?;
                let (off, width) = (b & 63, (b >> 16) & 127);
                let m = if width >= 64 {
                    u64::MAX
                } else {
                    (1u64 << width) - 1
                };
                let x = (a >> off) & m;
                if i.op == 41 && width > 0 && width < 64 && x >> (width - 1) & 1 != 0 {
                    x | !m
                } else {
                    x
                }
            }
            43 => {
                let (a, b) = (s32(w, f0, i.lit)?, s32(w, f1, i.lit)?);
                ((1u64 << (a & 63)).wrapping_sub(1)) << (b & 63)
            }
            _ => {
                let b = s64(w, f1, i.lit)?;
                match i.op {
                    23 => a & b,
                    25 => a | b,
                    27 => a ^ b,
                    29 => !(a & b),
                    31 => !(a | b),
                    33 => !(a ^ b),
                    35 => a & !b,
                    37 => a | !b,
                    49 => {
                        if w.scc {
                            a
                        } else {
                            b
                        }
                    }
                    _ => return Err(i.unknown(pc)),
                }
            }
        };
        if !matches!(i.op, 43 | 49) {
            w.scc = r != 0;
        }
        return w.set_sreg64(d, r);
    }
    let a = s32(w, f0, i.lit)?;
    let b = s32(w, f1, i.lit)?;
    let (r, scc): (u32, Option<bool>) = match i.op {
        0 => {
            let (r, c) = a.overflowing_add(b);
            (r, Some(c))
        }
        1 => (a.wrapping_sub(b), Some(b > a)),
        2 => {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            (r as u32, Some(o))
        }
        3 => {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            (r as u32, Some(o))
        }
        4 => {
            let t = u64::from(a) + u64::from(b) + u64::from(w.scc);
            (t as u32, Some(t >> 32 != 0))
        }
        5 => {
            let t = u64::from(a)
                .wrapping_sub(u64::from(b))
                .wrapping_sub(u64::from(w.scc));
            (
                t as u32,
                Some(u64::from(b) + u64::from(w.scc) > u64::from(a)),
            )
        }
        6 => {
            let r = (a as i32).wrapping_sub(b as i32).unsigned_abs();
            (r, Some(r != 0))
        }
        8 => nz(a << (b & 31)),
        10 => nz(a >> (b & 31)),
        12 => nz(((a as i32) >> (b & 31)) as u32),
        14..=17 => {
            let t = (u64::from(a) << (i.op - 13)) + u64::from(b);
            (t as u32, Some(t >> 32 != 0))
        }
        18 => (
            (a as i32).min(b as i32) as u32,
            Some((a as i32) < (b as i32)),
        ),
        19 => (a.min(b), Some(a < b)),
        20 => (
            (a as i32).max(b as i32) as u32,
            Some((a as i32) > (b as i32)),
        ),
        21 => (a.max(b), Some(a > b)),
        22 => nz(a & b),
        24 => nz(a | b),
        26 => nz(a ^ b),
        28 => nz(!(a & b)),
        30 => nz(!(a | b)),
        32 => nz(!(a ^ b)),
        34 => nz(a & !b),
        36 => nz(a | !b),
        38 | 39 => {
            let (off, width) = (b & 31, (b >> 16) & 127);
            let m = if width >= 32 {
                u32::MAX
            } else {
                (1u32 << width) - 1
            };
            let x = (a >> off) & m;
            let r = if i.op == 39 && width > 0 && width < 32 && x >> (width - 1) & 1 != 0 {
                x | !m
            } else {
                x
            };
            nz(r)
        }
        42 => ((((1u64 << (a & 31)) - 1) as u32).wrapping_shl(b & 31), None),
        44 => (a.wrapping_mul(b), None),
        45 => (((u64::from(a) * u64::from(b)) >> 32) as u32, None),
        46 => (
            ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32,
            None,
        ),
        48 => (if w.scc { a } else { b }, None),
        50 => ((a & 0xffff) | b << 16, None),
        51 => ((a & 0xffff) | (b & 0xffff_0000), None),
        52 => (a >> 16 | (b & 0xffff_0000), None),
        53 => (a >> 16 | b << 16, None),
        _ => return Err(i.unknown(pc)),
    };
    if let Some(c) = scc {
        w.scc = c;
    }
    w.set_sreg(d, r)
}

fn nz(r: u32) -> (u32, Option<bool>) {
    (r, Some(r != 0))
}

/// SOPK: `sdst = op(sdst, simm16)`.
pub fn sopk(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let d = bits(i.w[0], 22, 16) as usize;
    let imm = bits(i.w[0], 15, 0);
    let simm = imm as u16 as i16 as i32;
    match i.op {
        0 => w.set_sreg(d, simm as u32),
        2 => {
            if w.scc {
                w.set_sreg(d, simm as u32)?;
            }
            Ok(())
        }
        3..=8 => {
            let a = w.sreg(d)? as i32;
            w.scc = cmp_i(i.op - 3, a, simm);
            Ok(())
        }
        9..=14 => {
            let a = w.sreg(d)?;
            w.scc = cmp_u(i.op - 9, a, imm);
            Ok(())
        }
        15 => {
            let (r, o) = (w.sreg(d)? as i32).overflowing_add(simm);
            w.scc = o;
            w.set_sreg(d, r as u32)
        }
        16 => {
            let r = (w.sreg(d)? as i32).wrapping_mul(simm);
            w.set_sreg(d, r as u32)
        }
        // s_waitcnt_vscnt/vmcnt/expcnt/lgkmcnt with an SGPR operand (null here): stores need
        // no wait in this model; the counted forms wait as s_waitcnt does.
        24 | 26 => Ok(()),
        25 | 27 => {
            let reg = if d == NULL { 0 } else { w.sreg(d)? };
            let n = (reg.wrapping_add(imm)) as usize;
            w.wait(
                if i.op == 25 {
                    Counter::Vm
                } else {
                    Counter::Lgkm
                },
                n,
            );
            Ok(())
        }
        _ => Err(i.unknown(pc)),
    }
}

/// Compare `a` and `b` signed: eq, lg, gt, ge, lt, le.
fn cmp_i(k: u32, a: i32, b: i32) -> bool {
    [a == b, a != b, a > b, a >= b, a < b, a <= b][k as usize]
}

fn cmp_u(k: u32, a: u32, b: u32) -> bool {
    [a == b, a != b, a > b, a >= b, a < b, a <= b][k as usize]
}

/// SOP1: `sdst = op(ssrc0)`.
pub fn sop1(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (f0, d) = (bits(i.w[0], 7, 0), bits(i.w[0], 22, 16) as usize);
    match i.op {
        0 => {
            let a = s32(w, f0, i.lit)?;
            w.set_sreg(d, a)
        }
        1 => {
            let a = s64(w, f0, i.lit)?;
            w.set_sreg64(d, a)
        }
        2 => {
            let a = s32(w, f0, i.lit)?;
            if w.scc {
                w.set_sreg(d, a)?;
            }
            Ok(())
        }
        4 => {
            let a = s32(w, f0, i.lit)?;
            w.set_sreg(d, a.reverse_bits())
        }
        8 | 10 => {
            let a = s32(w, f0, i.lit)?;
            let n = if i.op == 8 {
                a.trailing_zeros()
            } else {
                a.leading_zeros()
            };
            w.set_sreg(d, if a == 0 { u32::MAX } else { n })
        }
        14 | 15 => {
            let a = s32(w, f0, i.lit)?;
            let r = if i.op == 14 {
                a as i8 as i32
            } else {
                a as i16 as i32
            };
            w.set_sreg(d, r as u32)
        }
        21 => {
            let a = s32(w, f0, i.lit)? as i32;
            let r = a.unsigned_abs();
            w.scc = r != 0;
            w.set_sreg(d, r)
        }
        24 => {
            let a = s32(w, f0, i.lit)?.count_ones();
            w.scc = a != 0;
            w.set_sreg(d, a)
        }
        30 => {
            let a = !s32(w, f0, i.lit)?;
            w.scc = a != 0;
            w.set_sreg(d, a)
        }
        // *_saveexec_b32: sdst = EXEC; EXEC = op(ssrc0, EXEC); SCC = EXEC != 0.
        32 | 34 | 36 | 48 | 50 => {
            let a = s32(w, f0, i.lit)?;
            let e = w.exec();
            let n = match i.op {
                32 => a & e,
                34 => a | e,
                36 => a ^ e,
                48 => a & !e,
                _ => a | !e,
            };
            w.set_sreg(d, e)?;
            w.s[EXEC] = n;
            w.scc = n != 0;
            Ok(())
        }
        // s_and_not1_wrexec_b32: EXEC = sdst = ssrc0 & ~EXEC.
        54 => {
            let n = s32(w, f0, i.lit)? & !w.exec();
            w.s[EXEC] = n;
            w.scc = n != 0;
            w.set_sreg(d, n)
        }
        _ => Err(i.unknown(pc)),
    }
}

/// SOPC: `SCC = cmp(ssrc0, ssrc1)`.
pub fn sopc(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (f0, f1) = (bits(i.w[0], 7, 0), bits(i.w[0], 15, 8));
    w.scc = match i.op {
        0..=5 => cmp_i(i.op, s32(w, f0, i.lit)? as i32, s32(w, f1, i.lit)? as i32),
        6..=11 => cmp_u(i.op - 6, s32(w, f0, i.lit)?, s32(w, f1, i.lit)?),
        12 | 13 => {
            let b = s32(w, f0, i.lit)? >> (s32(w, f1, i.lit)? & 31) & 1;
            (b == 1) == (i.op == 13)
        }
        16 => s64(w, f0, i.lit)? == s64(w, f1, i.lit)?,
        17 => s64(w, f0, i.lit)? != s64(w, f1, i.lit)?,
        _ => return Err(i.unknown(pc)),
    };
    Ok(())
}

/// SOPP: control flow, waits, barriers, hints.
pub fn sopp(w: &mut Wave, i: &Inst, pc: usize) -> Result<Flow> {
    let imm = bits(i.w[0], 15, 0);
    let target = || (pc as i64 + 1 + i64::from(imm as u16 as i16)) as usize;
    let taken = |c: bool| if c { Flow::Jump(target()) } else { Flow::Next };
    Ok(match i.op {
        // s_nop, s_clause, s_delay_alu, s_waitcnt_depctr, s_set_inst_prefetch_distance,
        // s_sleep: scheduling hints with no architectural effect.
        0 | 3 | 4 | 5 | 7 | 8 => Flow::Next,
        9 => {
            // gfx11 s_waitcnt: vmcnt [15:10], lgkmcnt [9:4], expcnt [2:0].
            w.wait(Counter::Vm, bits(imm, 15, 10) as usize);
            w.wait(Counter::Lgkm, bits(imm, 9, 4) as usize);
            Flow::Next
        }
        32 => Flow::Jump(target()),
        33 => taken(!w.scc),
        34 => taken(w.scc),
        35 => taken(w.vcc() == 0),
        36 => taken(w.vcc() != 0),
        37 => taken(w.exec() == 0),
        38 => taken(w.exec() != 0),
        48 => Flow::End,
        // s_sendmsg MSG_DEALLOC_VGPRS (id 3): LLVM releases VGPRs before s_endpgm.
        54 if imm & 0xff == 3 => Flow::Next,
        61 => Flow::Barrier,
        _ => return Err(i.unknown(pc)),
    })
}
