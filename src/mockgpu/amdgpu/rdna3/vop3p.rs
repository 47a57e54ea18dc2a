//! VOP3P: packed 16-bit math and the gfx11 wave32 WMMA (RDNA3 reference, "Packed Math" and
//! "Wave Matrix Multiply Accumulate").
//!
//! Packed operands: the low result half reads each source's half picked by OP_SEL (bit k: the high
//! half of source k), the high result half by OP_SEL_HI; NEG negates the low halves, NEG_HI the
//! high ones (float opcodes).
//!
//! WMMA `v_wmma_f32_16x16x16_{f16,bf16}` and `v_wmma_f16_16x16x16_f16` D = A x B + C, 16x16x16, on all 32 lanes (EXEC is
//! ignored, as on the hardware). Fragment layout: A: lane l holds row m = l % 16, its 16 K values
//! two per VGPR (even k low half); B: lane l holds column n = l % 16 the same way; the upper 16
//! lanes must repeat the lower 16 (the reference requires the replication: a difference is an
//! error naming the lane, as a wrong fragment layout in the renderer would cause); C and D: VGPR
//! j of lane l holds element (2j + l / 16, l % 16) (f16 C/D: in the half OP_SEL[2] picks, the
//! other half kept). Products are exact in f32, summed in k order onto C, rounded once.
//!
//! Not guaranteed: the integer and bf16-output WMMA variants, `v_dot*` and
//! `v_fma_mix*` are refused by name.

use half::{bf16, f16};

use super::decode::{bits, Inst};
use super::wave::{Fk, Src, Wave, LANES};
use crate::{bail, Result};

/// Execute a VOP3P instruction.
pub fn exec(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    match i.op {
        64..=66 => wmma(w, i, pc),
        1..=18 => packed(w, i, pc),
        _ => Err(i.unknown(pc)),
    }
}

fn packed(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (w0, w1) = (i.w[0], i.w[1]);
    let dst = bits(w0, 7, 0) as usize;
    let f = [bits(w1, 8, 0), bits(w1, 17, 9), bits(w1, 26, 18)];
    let opsel = bits(w0, 13, 11);
    let opsel_hi = bits(w1, 28, 27) | bits(w0, 14, 14) << 2;
    let (neg, neg_hi) = (bits(w1, 31, 29), bits(w0, 10, 8));
    let float = (14..=18).contains(&i.op);
    let n = if i.op == 14 { 3 } else { 2 };
    let mut srcs = [Src::Const(0); 3];
    for k in 0..n {
        srcs[k] = w.src(f[k], i.lit, Fk::F16)?;
    }
    w.vdst(dst, 1)?;
    for lane in w.active().collect::<Vec<_>>() {
        let mut out = 0u32;
        for (half, sel, ng) in [(0, opsel, neg), (1, opsel_hi, neg_hi)] {
            let mut x = [0u16; 3];
            for k in 0..n {
                let v = w.get(srcs[k], lane);
                let mut h = if sel >> k & 1 != 0 {
                    (v >> 16) as u16
                } else {
                    v as u16
                };
                if float && ng >> k & 1 != 0 {
                    h ^= 0x8000;
                }
                x[k] = h;
            }
            let r = packed_op(i.op, x).ok_or_else(|| i.unknown(pc))?;
            out |= u32::from(r) << (16 * half);
        }
        w.v[dst][lane] = out;
    }
    Ok(())
}

fn packed_op(op: u32, x: [u16; 3]) -> Option<u16> {
    let (a, b) = (x[0], x[1]);
    let (fa, fb) = (f16::from_bits(a).to_f32(), f16::from_bits(b).to_f32());
    let hf = |v: f32| f16::from_f32(v).to_bits();
    Some(match op {
        1 => a.wrapping_mul(b),
        2 | 10 => a.wrapping_add(b),
        3 | 11 => a.wrapping_sub(b),
        4 => b << (a & 15),
        5 => b >> (a & 15),
        6 => ((b as i16) >> (a & 15)) as u16,
        7 => (a as i16).max(b as i16) as u16,
        8 => (a as i16).min(b as i16) as u16,
        12 => a.max(b),
        13 => a.min(b),
        14 => f16::from_f64(f64::from(fa).mul_add(f64::from(fb), f16::from_bits(x[2]).to_f64()))
            .to_bits(),
        15 => hf(fa + fb),
        16 => hf(fa * fb),
        17 | 18 => {
            let (lo, hi) = if fa < fb || (fa == fb && fa.is_sign_negative()) {
                (fa, fb)
            } else {
                (fb, fa)
            };
            let r = if fa.is_nan() {
                fb
            } else if fb.is_nan() {
                fa
            } else if op == 17 {
                lo
            } else {
                hi
            };
            hf(r)
        }
        _ => return None,
    })
}

/// The 16 16-bit K values of `row` (lanes `row` and `row + 16`) of a WMMA A/B operand.
fn fragment(w: &Wave, reg: usize, what: &str, pc: usize, bf: bool) -> Result<[[f32; 16]; 16]> {
    w.vdst(reg, 8)?;
    let mut out = [[0f32; 16]; 16];
    for (row, vals) in out.iter_mut().enumerate() {
        for j in 0..8 {
            let (lo, hi) = (w.v[reg + j][row], w.v[reg + j][row + 16]);
            if lo != hi {
                bail!(
                    Fault,
                    "RDNA3: v_wmma at pc {:#x}: operand {what} v{} lane {} ({lo:#010x}) differs \
                     from lane {} ({hi:#010x}); the wave32 fragment layout repeats rows 0-15 in \
                     lanes 16-31 (a wrong fragment layout)",
                    4 * pc,
                    reg + j,
                    row,
                    row + 16
                );
            }
            for (h, k) in [(lo as u16, 2 * j), ((lo >> 16) as u16, 2 * j + 1)] {
                vals[k] = if bf {
                    bf16::from_bits(h).to_f32()
                } else {
                    f16::from_bits(h).to_f32()
                };
            }
        }
    }
    Ok(out)
}

fn wmma(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (w0, w1) = (i.w[0], i.w[1]);
    let dst = bits(w0, 7, 0) as usize;
    let f = [bits(w1, 8, 0), bits(w1, 17, 9), bits(w1, 26, 18)];
    if f.iter().any(|&x| x < 256) || bits(w1, 31, 29) != 0 || bits(w0, 10, 8) != 0 {
        bail!(
            Fault,
            "RDNA3: v_wmma at pc {:#x} with scalar/constant operands or negation is not modelled",
            4 * pc
        );
    }
    let bf = i.op == 65;
    // v_wmma_f16_16x16x16_f16: C and D are f16, in the VGPR half OP_SEL[2] picks.
    let out16 = i.op == 66;
    let hi = bits(w0, 13, 13) != 0;
    let a = fragment(w, (f[0] - 256) as usize, "A", pc, bf)?;
    let b = fragment(w, (f[1] - 256) as usize, "B", pc, bf)?;
    let c = (f[2] - 256) as usize;
    w.vdst(c, 8)?;
    w.vdst(dst, 8)?;
    let mut d = [[0u32; LANES]; 8];
    for (j, row) in d.iter_mut().enumerate() {
        for (lane, out) in row.iter_mut().enumerate() {
            let (m, n) = (2 * j + lane / 16, lane % 16);
            let cv = w.v[c + j][lane];
            let mut acc = if out16 {
                f16::from_bits(if hi { (cv >> 16) as u16 } else { cv as u16 }).to_f32()
            } else {
                f32::from_bits(cv)
            };
            for k in 0..16 {
                acc += a[m][k] * b[n][k];
            }
            *out = if out16 {
                let h = u32::from(f16::from_f32(acc).to_bits());
                let old = w.v[dst + j][lane];
                if hi {
                    (old & 0xffff) | h << 16
                } else {
                    (old & 0xffff_0000) | h
                }
            } else {
                acc.to_bits()
            };
        }
    }
    for (j, row) in d.iter().enumerate() {
        w.v[dst + j] = *row;
    }
    Ok(())
}
