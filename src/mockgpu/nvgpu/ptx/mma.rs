//! `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 {d0..d3}, {a0..a3},
//! {b0, b1}, {c0..c3}` across one warp, with the fragment layout of the PTX ISA ("Matrix
//! Fragments for mma.m16n8k16 with floating point type"): with `g = laneid >> 2` and
//! `c = laneid % 4`, A's eight halves (two per `.b32`, low half first) are rows `g` (a0, a1, a4,
//! a5) and `g + 8` (a2, a3, a6, a7), columns `2c + (i & 1)` plus 8 for a4..a7; B's four halves are
//! rows `2c + (i & 1)` plus 8 for b2, b3, column `g`; C and D are rows `g` (c0, c1) and `g + 8`
//! (c2, c3), columns `2c + (i & 1)`.
//!
//! Not guaranteed: hardware's accumulation order; each dot product is summed in f64 and rounded
//! to f32 once (what the UOp interpreter does).

use super::alu::{fput, fval};
use super::exec::Cta;
use super::isa::{Kind, Op, Ty};
use super::parse::{Inst, Opnd};

const F32: Ty = Ty {
    kind: Kind::F,
    bits: 32,
};

fn regs(i: &Inst, n: usize, want: usize) -> Result<&[Opnd], String> {
    match i.args.get(n) {
        Some(Opnd::Vec(v)) if v.len() == want => Ok(v),
        _ => Err(format!(
            "mma operand {} must be a vector of {want} registers",
            n + 1
        )),
    }
}

/// Runs the `mma` at `i` for the warp whose lane 0 is thread `base`.
pub(super) fn run(cta: &mut Cta, base: usize, i: &Inst) -> Result<(), String> {
    let Op::Mma(ab) = i.op else {
        return Err("not an mma".into());
    };
    let (d, a, b, c) = (
        regs(i, 0, 4)?,
        regs(i, 1, 4)?,
        regs(i, 2, 2)?,
        regs(i, 3, 4)?,
    );
    let mut ma = [[0f64; 16]; 16];
    let mut mb = [[0f64; 8]; 16];
    let mut mc = [[0f64; 8]; 16];
    let get = |t: usize, o: &Opnd| cta.get(t, o).map_err(|e| e.message().to_string());
    for lane in 0..32 {
        let t = base + lane;
        let (g, q) = (lane >> 2, lane % 4);
        for e in 0..8 {
            let w = get(t, &a[e / 2])?;
            let h = (w >> (16 * (e % 2))) & 0xffff;
            let row = g + if e % 4 >= 2 { 8 } else { 0 };
            let col = 2 * q + (e & 1) + if e >= 4 { 8 } else { 0 };
            ma[row][col] = fval(h, ab);
        }
        for e in 0..4 {
            let w = get(t, &b[e / 2])?;
            let h = (w >> (16 * (e % 2))) & 0xffff;
            let row = 2 * q + (e & 1) + if e >= 2 { 8 } else { 0 };
            mb[row][g] = fval(h, ab);
        }
        for (e, o) in c.iter().enumerate() {
            let row = g + if e >= 2 { 8 } else { 0 };
            mc[row][2 * q + (e & 1)] = fval(get(t, o)?, F32);
        }
    }
    for lane in 0..32 {
        let t = base + lane;
        let (g, q) = (lane >> 2, lane % 4);
        for (e, o) in d.iter().enumerate() {
            let (row, col) = (g + if e >= 2 { 8 } else { 0 }, 2 * q + (e & 1));
            let s: f64 = mc[row][col] + (0..16).map(|k| ma[row][k] * mb[k][col]).sum::<f64>();
            cta.set(t, o, fput(s, F32))
                .map_err(|e| e.message().to_string())?;
        }
    }
    Ok(())
}
