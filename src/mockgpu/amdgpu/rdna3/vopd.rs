//! VOPD: the gfx11 dual-issue encoding (RDNA3 reference, "VOPD"), two VOP2/VOP1-like operations
//! X and Y in one instruction. Fields: OPX [25:22], OPY [21:17], VSRCX1 [16:9], SRCX0 [8:0];
//! VDSTX [63:56], VDSTY [55:49] (the register is VDSTY << 1 | !VDSTX[0]: the two destinations
//! differ in parity), VSRCY1 [48:41], SRCY0 [40:32]; one shared literal.
//!
//! Both operations read their sources before either writes, as the hardware issues them
//! together; each runs as its VOP2 (VOP1 for `mov`) equivalent through [`super::valu`].
//!
//! Not guaranteed: `v_dual_dot2acc_*` and `v_dual_mul_dx9_zero_f32` are refused by name.

use super::decode::{bits, Enc, Inst};
use super::valu;
use super::wave::Wave;
use crate::Result;

/// The VOP2 opcode of a VOPD opcode (`mov` is VOP1's, marked by `None` here).
fn vop2_of(op: u32) -> Option<Option<u32>> {
    Some(match op {
        0 => Some(43),
        1 => Some(45),
        2 => Some(44),
        3 => Some(8),
        4 => Some(3),
        5 => Some(4),
        6 => Some(5),
        8 => None,
        9 => Some(1),
        10 => Some(16),
        11 => Some(15),
        16 => Some(37),
        17 => Some(24),
        18 => Some(27),
        _ => return None,
    })
}

/// The one-operation instruction of half (op, dst, src0, vsrc1) with the shared literal.
fn half(i: &Inst, pc: usize, op: u32, dst: u32, src0: u32, vsrc1: u32) -> Result<Inst> {
    let Some(v2) = vop2_of(op) else {
        return Err(crate::Error::Fault(format!(
            "RDNA3: VOPD operation {op} (word {:#010x} {:#010x}) at pc {:#x} is not implemented \
             by the software GPU",
            i.w[0],
            i.w[1],
            4 * pc
        )));
    };
    let (enc, op, w0) = match v2 {
        Some(o) => (Enc::Vop2, o, o << 25 | dst << 17 | vsrc1 << 9 | src0),
        None => (Enc::Vop1, 1, 0x7e00_0000 | dst << 17 | 1 << 9 | src0),
    };
    Ok(Inst {
        enc,
        op,
        w: [w0, 0],
        lit: i.lit,
        len: 1,
    })
}

/// Execute a VOPD instruction.
pub fn exec(w: &mut Wave, i: &Inst, pc: usize) -> Result<()> {
    let (w0, w1) = (i.w[0], i.w[1]);
    let dx = bits(w1, 31, 24);
    let dy = bits(w1, 23, 17) << 1 | ((dx & 1) ^ 1);
    let x = half(i, pc, bits(w0, 25, 22), dx, bits(w0, 8, 0), bits(w0, 16, 9))?;
    let y = half(i, pc, bits(w0, 21, 17), dy, bits(w1, 8, 0), bits(w1, 16, 9))?;
    let dx = dx as usize;
    w.vdst(dx, 1)?;
    let old = w.v[dx];
    valu::exec(w, &x, pc)?;
    let new = std::mem::replace(&mut w.v[dx], old);
    valu::exec(w, &y, pc)?;
    w.v[dx] = new;
    Ok(())
}
