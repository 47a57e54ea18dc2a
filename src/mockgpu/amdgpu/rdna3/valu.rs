//! Vector ALU: VOP1, VOP2, VOPC and VOP3 (RDNA3 reference, "Vector ALU Operations"). The 32-bit
//! encodings are mapped into the VOP3 opcode space (VOPC 0-255, VOP2 256 + op, VOP1 384 + op, as
//! the reference numbers their VOP3 forms) with their implicit operands made explicit (VCC for
//! `v_cndmask`/carries and compare results, the destination as `v_fmac`'s addend, the literal of
//! `v_fmamk`/`v_fmaak`), then one table executes both forms on the lanes of EXEC.
//!
//! Float semantics: IEEE single/double with round-to-nearest-even; input modifiers abs/neg and
//! the output modifiers clamp/omod; `v_min/max_f32` as IEEE mode (a quiet NaN input yields the
//! other input, a signalling NaN yields its quieted self, -0 < +0); the transcendental opcodes
//! (`v_exp_f32` = 2^x, `v_log_f32` = log2, `v_rcp`, `v_rsq`, `v_sqrt`, `v_sin`/`v_cos` of x
//! revolutions) are computed exactly where the hardware is within 1 ULP.
//!
//! Not guaranteed: denormal flushing (RSRC1's FLOAT_DENORM_MODE) is not applied (LLVM's kernels
//! for gfx11 keep denormals); DPP/SDWA forms and opcodes outside the table are errors naming
//! them.

use half::f16;

use super::decode::{bits, Enc, Inst, LITERAL};
use super::valu_ops::{f32_op, f64_op, int_op, Ty};
use super::wave::{Fk, Src, Src64, Wave, EXEC, LANES, VCC};
use crate::{bail, Result};

/// A VALU instruction with its implicit operands explicit.
#[derive(Clone, Copy, Debug)]
pub struct V {
    pub op: u32,
    pub dst: usize,
    pub sdst: usize,
    pub src: [u32; 3],
    pub abs: u32,
    pub neg: u32,
    pub opsel: u32,
    pub clamp: bool,
    pub omod: u32,
    pub lit: u32,
}

/// VOP3 opcodes whose bits 14:8 are a scalar destination (VOP3SD).
fn is_vop3sd(op: u32) -> bool {
    matches!(op, 288..=290 | 764..=770)
}

/// Normalize a VALU instruction.
pub fn normalize(i: &Inst) -> V {
    let w0 = i.w[0];
    let mut v = V {
        op: 0,
        dst: bits(w0, 24, 17) as usize,
        sdst: VCC,
        src: [bits(w0, 8, 0), 256 + bits(w0, 16, 9), 0],
        abs: 0,
        neg: 0,
        opsel: 0,
        clamp: false,
        omod: 0,
        lit: i.lit,
    };
    match i.enc {
        Enc::Vopc => {
            v.op = i.op;
            v.dst = VCC;
        }
        Enc::Vop1 => {
            v.op = 384 + i.op;
            v.src[1] = 0;
        }
        Enc::Vop2 => {
            v.op = 256 + i.op;
            match i.op {
                // v_cndmask_b32, v_add/sub/subrev_co_ci_u32: VCC is the third source.
                1 | 32..=34 => v.src[2] = VCC as u32,
                // v_fmac_f32/f16: the destination is the addend.
                43 | 54 => v.src[2] = 256 + v.dst as u32,
                // v_fmamk_f32: S0 * K + S1 -> fma(S0, K, S1).
                44 => {
                    v.op = 531;
                    v.src = [v.src[0], LITERAL, v.src[1]];
                }
                // v_fmaak_f32: S0 * S1 + K.
                45 => {
                    v.op = 531;
                    v.src[2] = LITERAL;
                }
                _ => {}
            }
        }
        _ => {
            let w1 = i.w[1];
            v.op = i.op;
            v.dst = bits(w0, 7, 0) as usize;
            v.src = [bits(w1, 8, 0), bits(w1, 17, 9), bits(w1, 26, 18)];
            v.neg = bits(w1, 31, 29);
            v.omod = bits(w1, 28, 27);
            v.clamp = bits(w0, 15, 15) != 0;
            if is_vop3sd(i.op) {
                v.sdst = bits(w0, 14, 8) as usize;
            } else {
                v.abs = bits(w0, 10, 8);
                v.opsel = bits(w0, 14, 11);
            }
            if v.op < 256 {
                // VOPC in VOP3: the destination field is the scalar mask destination.
                v.sdst = v.dst;
            }
            if v.op == 256 + 43 {
                v.src[2] = 256 + v.dst as u32;
            }
        }
    }
    v
}

/// Apply abs/neg of operand `k` to raw bits of type `ty`.
fn modify(v: &V, k: usize, x: u64, ty: Ty) -> u64 {
    let sign = match ty {
        Ty::F32 => 1u64 << 31,
        Ty::F64 => 1u64 << 63,
        Ty::F16 => 1u64 << 15,
        _ => return x,
    };
    let mut x = x;
    if v.abs >> k & 1 != 0 {
        x &= !sign;
    }
    if v.neg >> k & 1 != 0 {
        x ^= sign;
    }
    x
}

/// Output modifiers of a float result.
fn output(v: &V, r: u64, ty: Ty) -> u64 {
    if v.omod == 0 && !v.clamp {
        return r;
    }
    let scale = [1.0, 2.0, 4.0, 0.5][v.omod as usize];
    match ty {
        Ty::F32 => {
            let mut f = f32::from_bits(r as u32) * scale as f32;
            if v.clamp {
                f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
            }
            u64::from(f.to_bits())
        }
        Ty::F64 => {
            let mut f = f64::from_bits(r) * scale;
            if v.clamp {
                f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
            }
            f.to_bits()
        }
        Ty::F16 => {
            let mut f = f16::from_bits(r as u16).to_f32() * scale as f32;
            if v.clamp {
                f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
            }
            u64::from(f16::from_f32(f).to_bits())
        }
        _ => r,
    }
}

/// (result type, source types, sources count) of a VALU opcode, None when not implemented.
pub fn signature(op: u32) -> Option<(Ty, [Ty; 3], usize)> {
    use Ty::*;
    let t = |r: Ty, s: [Ty; 3], n: usize| Some((r, s, n));
    match op {
        // VOPC: the result is a lane mask.
        0..=15 | 128..=143 => t(Mask, [F16, F16, B32], 2),
        16..=31 | 144..=159 => t(Mask, [F32, F32, B32], 2),
        32..=47 | 160..=175 => t(Mask, [F64, F64, B32], 2),
        49..=54 | 57..=62 | 177..=182 | 185..=190 => t(Mask, [B16, B16, B32], 2),
        64..=79 | 192..=207 => t(Mask, [B32, B32, B32], 2),
        80..=95 | 208..=223 => t(Mask, [B64, B64, B32], 2),
        125 | 253 => t(Mask, [F16, B32, B32], 2),
        126 | 254 => t(Mask, [F32, B32, B32], 2),
        127 | 255 => t(Mask, [F64, B32, B32], 2),
        // VOP2 (256 + op).
        257 => t(B32, [F32, F32, Mask], 3),
        259..=261 | 264 | 271 | 272 => t(F32, [F32, F32, B32], 2),
        265..=268 | 273..=276 | 280..=286 | 293..=295 => t(B32, [B32, B32, B32], 2),
        288..=290 => t(B32, [B32, B32, Mask], 3),
        299 => t(F32, [F32, F32, F32], 3),
        303 => t(B32, [F32, F32, B32], 2),
        306..=309 | 313 | 314 => t(F16, [F16, F16, B32], 2),
        310 => t(F16, [F16, F16, F16], 3),
        // VOP1 (384 + op).
        385 => t(B32, [B32, B32, B32], 1),
        387 | 405 => t(B32, [F64, B32, B32], 1),
        388 | 406 => t(F64, [B32, B32, B32], 1),
        389 | 390 | 401..=404 => t(F32, [B32, B32, B32], 1),
        391 | 392 | 396 | 397 | 447 => t(B32, [F32, B32, B32], 1),
        394 => t(F16, [F32, B32, B32], 1),
        395 => t(F32, [F16, B32, B32], 1),
        399 => t(F32, [F64, B32, B32], 1),
        400 => t(F64, [F32, B32, B32], 1),
        407..=410 | 431 | 433 | 436 | 445 | 446 => t(F64, [F64, B32, B32], 1),
        416..=421 | 423 | 426 | 427 | 430 | 435 | 437 | 438 | 448 => t(F32, [F32, B32, B32], 1),
        439..=443 => t(B32, [B32, B32, B32], 1),
        444 => t(B32, [F64, B32, B32], 1),
        464 | 465 => t(F16, [B16, B32, B32], 1),
        466 | 467 => t(B16, [F16, B32, B32], 1),
        489 => t(B16, [B16, B32, B32], 1),
        490 | 491 => t(B32, [B16, B32, B32], 1),
        // VOP3.
        522 | 523 | 528..=530 | 534 | 535 | 538 | 539 | 541 | 542 | 544 | 545 => {
            t(B32, [B32, B32, B32], 3)
        }
        576 | 580..=583 | 597..=600 | 610..=613 => t(B32, [B32, B32, B32], 3),
        531 | 537 | 540 | 543 | 551 | 567 | 606 | 607 | 764 => t(F32, [F32, F32, F32], 3),
        532 | 552 | 568 | 765 => t(F64, [F64, F64, F64], 3),
        584 => t(F16, [F16, F16, F16], 3),
        601 | 602 => t(B32, [B16, B16, B32], 3),
        605 => t(B16, [B16, B16, Mask], 3),
        766 | 767 => t(B64, [B32, B32, B64], 3),
        768..=770 | 797..=800 | 805 | 806 | 812..=814 => t(B32, [B32, B32, B32], 2),
        771..=773 | 777..=782 | 824..=826 | 866..=868 => t(B16, [B16, B16, B32], 2),
        785 => t(B32, [F16, F16, B32], 2),
        796 => t(F32, [F32, B32, B32], 2),
        807..=810 => t(F64, [F64, F64, B32], 2),
        811 => t(F64, [F64, B32, B32], 2),
        828..=830 => t(B64, [B32, B64, B32], 2),
        _ => None,
    }
}

/// Execute one VALU instruction.
pub fn exec(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let v = normalize(i);
    if matches!(i.enc, Enc::Vop1) && i.op == 2 || i.enc == Enc::Vop3 && i.op == 386 {
        return readfirstlane(w, &v);
    }
    if i.enc == Enc::Vop3 && (i.op == 864 || i.op == 865) {
        return lane_access(w, &v, i.op == 865);
    }
    let Some((rty, sty, n)) = signature(v.op) else {
        return Err(i.unknown(pc));
    };
    let mut srcs = [S::None, S::None, S::None];
    for k in 0..n {
        srcs[k] = match sty[k] {
            Ty::F64 => S::W(w.src64(v.src[k], v.lit, Fk::F64)?),
            Ty::B64 => S::W(w.src64(v.src[k], v.lit, Fk::F32)?),
            Ty::Mask => S::M(w.sreg(v.src[k] as usize)?),
            Ty::F16 | Ty::B16 => S::N(w.src(v.src[k], v.lit, Fk::F16)?),
            _ => S::N(w.src(v.src[k], v.lit, Fk::F32)?),
        };
    }
    let exec = w.exec();
    let writes_vgpr = rty != Ty::Mask;
    if writes_vgpr {
        let n = if matches!(rty, Ty::F64 | Ty::B64) {
            2
        } else {
            1
        };
        w.vdst(v.dst, n)?;
    }
    let mut mask = 0u32;
    let mut carry = 0u32;
    for lane in 0..LANES {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut x = [0u64; 3];
        for k in 0..n {
            let raw = match srcs[k] {
                S::N(s) => {
                    let r = w.get(s, lane);
                    // op_sel picks the high half of a 16-bit operand.
                    if matches!(sty[k], Ty::F16 | Ty::B16) && v.opsel >> k & 1 != 0 {
                        u64::from(r >> 16)
                    } else if matches!(sty[k], Ty::F16 | Ty::B16) {
                        u64::from(r & 0xffff)
                    } else {
                        u64::from(r)
                    }
                }
                S::W(s) => w.get64(s, lane),
                S::M(m) => u64::from(m >> lane & 1),
                S::None => 0,
            };
            x[k] = modify(&v, k, raw, sty[k]);
        }
        let (r, c) = lane_op(w, &v, x, lane).map_err(|e| e.unwrap_or_else(|| i.unknown(pc)))?;
        carry |= u32::from(c) << lane;
        if !writes_vgpr {
            mask |= (r as u32 & 1) << lane;
            continue;
        }
        let r = output(&v, r, rty);
        match rty {
            Ty::F64 | Ty::B64 => {
                w.v[v.dst][lane] = r as u32;
                w.v[v.dst + 1][lane] = (r >> 32) as u32;
            }
            Ty::F16 | Ty::B16 => {
                let old = w.v[v.dst][lane];
                // op_sel[3] writes the high half; VOP1/2 16-bit results keep the high half.
                w.v[v.dst][lane] = if v.opsel >> 3 & 1 != 0 {
                    (old & 0xffff) | (r as u32) << 16
                } else {
                    (old & 0xffff_0000) | (r as u32 & 0xffff)
                };
            }
            _ => w.v[v.dst][lane] = r as u32,
        }
    }
    finish_masks(w, &v, mask, carry, exec)
}

/// Scalar results of a VALU instruction: compare masks, v_cmpx's EXEC, carry-outs.
fn finish_masks(w: &mut Wave, v: &V, mask: u32, carry: u32, exec: u32) -> Result<()> {
    if v.op < 256 {
        if is_cmpx(v.op) {
            w.s[EXEC] = mask;
            return Ok(());
        }
        return w.set_sreg(v.sdst, mask & exec);
    }
    if is_vop3sd(v.op) || matches!(v.op, 288..=290) {
        return w.set_sreg(v.sdst, carry & exec);
    }
    Ok(())
}

fn is_cmpx(op: u32) -> bool {
    (128..=255).contains(&op)
}

enum S {
    None,
    N(Src),
    W(Src64),
    M(u32),
}

/// One lane's result bits and carry-out; Err(None) for an opcode without semantics here.
fn lane_op(
    w: &Wave,
    v: &V,
    x: [u64; 3],
    lane: usize,
) -> std::result::Result<(u64, bool), Option<crate::Error>> {
    let op = v.op;
    if op < 256 {
        let cmp = op & 127;
        return Ok((u64::from(super::valu_ops::compare(cmp, x)?), false));
    }
    Ok(match op {
        257 => (if x[2] != 0 { x[1] } else { x[0] }, false),
        288 => {
            let t = x[0] + x[1] + x[2];
            (t & 0xffff_ffff, t >> 32 != 0)
        }
        289 => {
            let t = x[0].wrapping_sub(x[1]).wrapping_sub(x[2]);
            (t & 0xffff_ffff, x[1] + x[2] > x[0])
        }
        290 => {
            let t = x[1].wrapping_sub(x[0]).wrapping_sub(x[2]);
            (t & 0xffff_ffff, x[0] + x[2] > x[1])
        }
        768 => {
            let t = x[0] + x[1];
            (t & 0xffff_ffff, t >> 32 != 0)
        }
        769 => (x[0].wrapping_sub(x[1]) & 0xffff_ffff, x[1] > x[0]),
        770 => (x[1].wrapping_sub(x[0]) & 0xffff_ffff, x[0] > x[1]),
        766 => {
            let t = u128::from(x[0]) * u128::from(x[1]) + u128::from(x[2]);
            (t as u64, t >> 64 != 0)
        }
        767 => {
            let t = i128::from(x[0] as u32 as i32) * i128::from(x[1] as u32 as i32)
                + i128::from(x[2] as i64);
            (
                t as u64,
                t > i128::from(i64::MAX) || t < i128::from(i64::MIN),
            )
        }
        764 | 765 => {
            let (r, vcc) = super::valu_ops::div_scale(op == 765, x);
            (r, vcc)
        }
        567 | 568 => {
            let vcc = w.vcc() >> lane & 1 != 0;
            (super::valu_ops::div_fmas(op == 568, x, vcc), false)
        }
        _ => {
            let (rty, sty, _) = signature(op).ok_or(None)?;
            let r = match (rty, sty[0]) {
                (Ty::F64, _) | (_, Ty::F64) => f64_op(op, x)?,
                (Ty::F32, _) | (_, Ty::F32) => f32_op(op, x)?,
                (Ty::F16, _) | (_, Ty::F16) => super::valu_ops::f16_op(op, x)?,
                _ => int_op(op, x, lane)?,
            };
            (r, false)
        }
    })
}

fn readfirstlane(w: &mut Wave, v: &V) -> Result<()> {
    let s = w.src(v.src[0], v.lit, Fk::F32)?;
    let lane = (0..LANES).find(|l| w.exec() >> l & 1 != 0).unwrap_or(0);
    let val = w.get(s, lane);
    w.set_sreg(v.dst, val)
}

/// v_readlane_b32 (sdst = src0 of lane src1) and v_writelane_b32 (lane src1 of vdst = scalar
/// src0, whatever EXEC says).
fn lane_access(w: &mut Wave, v: &V, write: bool) -> Result<()> {
    let s = w.src(v.src[0], v.lit, Fk::F32)?;
    let l = match w.src(v.src[1], v.lit, Fk::F32)? {
        Src::Const(c) => c as usize % LANES,
        Src::Vgpr(_) => bail!(
            Fault,
            "RDNA3: v_readlane/v_writelane lane select must be scalar"
        ),
    };
    if write {
        let Src::Const(val) = s else {
            bail!(Fault, "RDNA3: v_writelane_b32 source must be scalar");
        };
        w.vdst(v.dst, 1)?;
        w.v[v.dst][l] = val;
        return Ok(());
    }
    let val = w.get(s, l);
    w.set_sreg(v.dst, val)
}
