//! RDNA3 (gfx11) instruction decoding: the encoding of a first dword (AMD's "RDNA3 Instruction
//! Set Architecture" reference, chapter "Microcode Formats"), the opcode field, the instruction's
//! length (one or two dwords, plus a 32-bit literal when a source field says 255 or the opcode
//! always carries one).
//!
//! Not guaranteed: the encodings LLVM does not emit for compute kernels (EXP, VINTERP, LDSDIR,
//! MIMG, MTBUF) decode to their name so the executor can refuse them; their fields are not read.

use crate::{bail, Result};

/// An instruction encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Enc {
    Sop2,
    Sopk,
    Sop1,
    Sopc,
    Sopp,
    Smem,
    Vop1,
    Vop2,
    Vopc,
    Vop3,
    Vop3p,
    Vopd,
    Ds,
    Flat,
    Mubuf,
    Mtbuf,
    Mimg,
    Exp,
    Vinterp,
    Ldsdir,
}

/// The literal-constant source field.
pub const LITERAL: u32 = 255;

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    pub enc: Enc,
    pub op: u32,
    /// The first two dwords (the second is 0 for one-dword encodings).
    pub w: [u32; 2],
    /// The literal constant (0 when there is none).
    pub lit: u32,
    /// Length in dwords, the literal included.
    pub len: usize,
}

/// Bits `hi..=lo` of `w`.
pub fn bits(w: u32, hi: u32, lo: u32) -> u32 {
    (w >> lo) & (((1u64 << (hi - lo + 1)) - 1) as u32)
}

/// The encoding and opcode of a first dword, and whether the format has a second dword.
fn classify(w0: u32) -> Result<(Enc, u32, bool)> {
    if w0 >> 31 == 0 {
        return Ok(match w0 >> 25 {
            0x3e => (Enc::Vopc, bits(w0, 24, 17), false),
            0x3f => (Enc::Vop1, bits(w0, 16, 9), false),
            _ => (Enc::Vop2, bits(w0, 30, 25), false),
        });
    }
    if w0 >> 30 == 0b10 {
        return Ok(match w0 >> 23 {
            0x17d => (Enc::Sop1, bits(w0, 15, 8), false),
            0x17e => (Enc::Sopc, bits(w0, 22, 16), false),
            0x17f => (Enc::Sopp, bits(w0, 22, 16), false),
            _ if w0 >> 28 == 0xb => (Enc::Sopk, bits(w0, 27, 23), false),
            _ => (Enc::Sop2, bits(w0, 29, 23), false),
        });
    }
    Ok(match w0 >> 26 {
        0b110101 => (Enc::Vop3, bits(w0, 25, 16), true),
        0b110011 => (Enc::Vop3p, bits(w0, 22, 16), true),
        0b110010 => (Enc::Vopd, bits(w0, 25, 22), true),
        0b110110 => (Enc::Ds, bits(w0, 25, 18), true),
        0b110111 => (Enc::Flat, bits(w0, 24, 18), true),
        0b111000 => (Enc::Mubuf, bits(w0, 25, 18), true),
        0b111010 => (Enc::Mtbuf, bits(w0, 18, 15), true),
        0b111100 => (Enc::Mimg, bits(w0, 25, 18), true),
        0b111101 => (Enc::Smem, bits(w0, 25, 18), true),
        0b111110 => (Enc::Exp, 0, true),
        0b110001 if bits(w0, 25, 24) == 0 => (Enc::Vinterp, bits(w0, 22, 16), true),
        0b110001 => (Enc::Ldsdir, bits(w0, 21, 20), false),
        _ => bail!(
            Fault,
            "RDNA3: word {w0:#010x} is no known encoding (bits 31:26 = {:#08b})",
            w0 >> 26
        ),
    })
}

/// Whether `inst` (without its literal yet) is followed by a literal dword.
fn has_literal(enc: Enc, op: u32, w: [u32; 2]) -> bool {
    let lit = |f: u32| f == LITERAL;
    match enc {
        Enc::Sop2 | Enc::Sopc => lit(bits(w[0], 7, 0)) || lit(bits(w[0], 15, 8)),
        Enc::Sop1 => lit(bits(w[0], 7, 0)),
        // s_setreg_imm32_b32
        Enc::Sopk => op == 19,
        Enc::Vop1 | Enc::Vopc => lit(bits(w[0], 8, 0)),
        // v_fmamk_f32, v_fmaak_f32, v_fmamk_f16, v_fmaak_f16 always carry one.
        Enc::Vop2 => lit(bits(w[0], 8, 0)) || matches!(op, 44 | 45 | 55 | 56),
        Enc::Vop3 | Enc::Vop3p => {
            lit(bits(w[1], 8, 0)) || lit(bits(w[1], 17, 9)) || lit(bits(w[1], 26, 18))
        }
        // OPX fmaak/fmamk (1, 2), OPY fmaak/fmamk (1, 2), or a literal srcX0/srcY0.
        Enc::Vopd => {
            matches!(bits(w[0], 25, 22), 1 | 2)
                || matches!(bits(w[0], 21, 17), 1 | 2)
                || lit(bits(w[0], 8, 0))
                || lit(bits(w[1], 8, 0))
        }
        _ => false,
    }
}

/// Decode the instruction at dword `pc` of `code`.
pub fn decode(code: &[u32], pc: usize) -> Result<Inst> {
    let Some(&w0) = code.get(pc) else {
        bail!(
            Fault,
            "RDNA3: pc {:#x} is past the end of the code ({} bytes)",
            4 * pc,
            4 * code.len()
        )
    };
    let (enc, op, two) = classify(w0)?;
    let mut len = 1;
    let mut w = [w0, 0];
    if two {
        let Some(&w1) = code.get(pc + 1) else {
            bail!(
                Fault,
                "RDNA3: {enc:?} word {w0:#010x} at pc {:#x} is cut off by the end of the code",
                4 * pc
            )
        };
        w[1] = w1;
        len = 2;
    }
    let mut lit = 0;
    if has_literal(enc, op, w) {
        let Some(&l) = code.get(pc + len) else {
            bail!(
                Fault,
                "RDNA3: the literal of {enc:?} word {w0:#010x} at pc {:#x} is past the code end",
                4 * pc
            )
        };
        lit = l;
        len += 1;
    }
    Ok(Inst {
        enc,
        op,
        w,
        lit,
        len,
    })
}

impl Inst {
    /// The error for an opcode this interpreter does not execute.
    pub fn unknown(&self, pc: usize) -> crate::Error {
        crate::Error::Fault(format!(
            "RDNA3: {:?} opcode {} (word {:#010x}{}) at pc {:#x} is not implemented by the \
             software GPU",
            self.enc,
            self.op,
            self.w[0],
            if self.len > 1 {
                format!(" {:#010x}", self.w[1])
            } else {
                String::new()
            },
            4 * pc
        ))
    }
}
