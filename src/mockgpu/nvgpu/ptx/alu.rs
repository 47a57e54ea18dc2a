//! PTX ALU semantics on 64-bit register images: integer ops at every width (operands masked or
//! sign-extended by the instruction's type, results wrapped), float ops on `.f16`/`.bf16`/`.f32`/
//! `.f64` computed in f64 and rounded once to the type (exact for add/sub/mul/div/sqrt of f32 and
//! f16, which is what the UOp interpreter computes), `fma` fused, `.ftz` (f32 subnormals flushed
//! to sign-preserving zero), `.sat` (clamp to [0, 1], NaN to 0), `min/max` with PTX's NaN rule (a
//! NaN operand yields the other one; `.NaN` propagates it; -0 < +0), `setp` with the ordered and
//! unordered compares, and `cvt` with its rounding and saturation (float to integer saturates,
//! NaN to 0).
//!
//! The approximate instructions (`ex2/lg2/sin/cos/rcp/rsqrt/sqrt.approx`, `div.approx/full`)
//! return the exactly rounded value, as the UOp interpreter (the reference) does; real hardware
//! is within its documented ulp bounds of it.
//!
//! Not guaranteed: NaN payloads (hardware's canonical NaN is not reproduced bit for bit);
//! integer division by zero gives all ones (quotient) and the dividend (remainder), what PTX
//! leaves unspecified.

use super::isa::{Bin, BoolOp, Cmp, FMods, Half, Kind, Rnd, Ty, Un};

/// `v` masked to `bits`.
pub fn mask(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

/// `v`'s low `bits` sign-extended.
pub fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}

/// The integer value of a register image read as `t`.
fn ival(v: u64, t: Ty) -> i128 {
    if t.kind == Kind::S {
        i128::from(sext(v, t.bits))
    } else {
        i128::from(mask(v, t.bits))
    }
}

/// An integer result as the register image of `t`.
fn iput(x: i128, t: Ty) -> u64 {
    let v = x as u64;
    if t.kind == Kind::S {
        sext(v, t.bits) as u64
    } else {
        mask(v, t.bits)
    }
}

/// The float a register image holds as `t`.
pub fn fval(v: u64, t: Ty) -> f64 {
    match (t.kind, t.bits) {
        (Kind::Bf, _) => half::bf16::from_bits(v as u16).to_f64(),
        (_, 16) => half::f16::from_bits(v as u16).to_f64(),
        (_, 32) => f64::from(f32::from_bits(v as u32)),
        _ => f64::from_bits(v),
    }
}

/// `x` rounded to nearest-even into `t`'s register image.
pub fn fput(x: f64, t: Ty) -> u64 {
    match (t.kind, t.bits) {
        (Kind::Bf, _) => u64::from(half::bf16::from_f64(x).to_bits()),
        (_, 16) => u64::from(half::f16::from_f64(x).to_bits()),
        (_, 32) => u64::from((x as f32).to_bits()),
        _ => x.to_bits(),
    }
}

fn ftz(x: f64, t: Ty, f: FMods) -> f64 {
    if f.ftz
        && t.bits == 32
        && t.kind == Kind::F
        && x != 0.0
        && x.abs() < f64::from(f32::MIN_POSITIVE)
    {
        0.0f64.copysign(x)
    } else {
        x
    }
}

fn sat(x: f64, f: FMods) -> f64 {
    if !f.sat {
        x
    } else if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Rounds a float result into `t` applying `.ftz` and `.sat`.
fn fres(x: f64, t: Ty, f: FMods) -> u64 {
    let r = fval(fput(sat(x, f), t), t);
    fput(ftz(r, t, f), t)
}

/// PTX `min`/`max` (`max` when `is_max`).
fn fminmax(a: f64, b: f64, is_max: bool, f: FMods) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::NAN,
        (true, false) | (false, true) if f.nan => f64::NAN,
        (true, false) => b,
        (false, true) => a,
        _ if a == b => {
            // equal: only the zeros differ, -0 < +0
            if (a.is_sign_negative() == is_max) && a == 0.0 {
                b
            } else {
                a
            }
        }
        _ if (a > b) == is_max => a,
        _ => b,
    }
}

/// A binary op of type `t` on register images `a`, `b`.
pub fn binary(op: Bin, t: Ty, f: FMods, a: u64, b: u64) -> Result<u64, String> {
    if t.kind == Kind::Pred {
        return Ok(match op {
            Bin::And => a & b & 1,
            Bin::Or => (a | b) & 1,
            Bin::Xor => (a ^ b) & 1,
            _ => return Err(format!("{op:?} on .pred")),
        });
    }
    if t.is_float() {
        let (x, y) = (ftz(fval(a, t), t, f), ftz(fval(b, t), t, f));
        let r = match op {
            Bin::Add => x + y,
            Bin::Sub => x - y,
            Bin::Mul => x * y,
            Bin::Div => x / y,
            Bin::Min => fminmax(x, y, false, f),
            Bin::Max => fminmax(x, y, true, f),
            Bin::Copysign => y.copysign(x),
            _ => return Err(format!("{op:?} on a float type")),
        };
        return Ok(fres(r, t, f));
    }
    let bits = t.bits;
    let (x, y) = (ival(a, t), ival(b, t));
    let r = match op {
        Bin::Add if f.sat => (x + y).clamp(i32::MIN.into(), i32::MAX.into()),
        Bin::Sub if f.sat => (x - y).clamp(i32::MIN.into(), i32::MAX.into()),
        Bin::Add => x + y,
        Bin::Sub => x - y,
        Bin::Mul => x.wrapping_mul(y),
        Bin::Div if y == 0 => -1,
        Bin::Div => x.wrapping_div(y),
        Bin::Rem if y == 0 => x,
        Bin::Rem => x.wrapping_rem(y),
        Bin::Min => x.min(y),
        Bin::Max => x.max(y),
        Bin::And => x & y,
        Bin::Or => x | y,
        Bin::Xor => x ^ y,
        // the shift amount is an unsigned 32-bit value, clamped to the width
        Bin::Shl => {
            let s = mask(b, 32);
            if s >= u64::from(bits) {
                0
            } else {
                x << s
            }
        }
        Bin::Shr => {
            let s = mask(b, 32).min(u64::from(bits));
            if t.kind == Kind::S {
                x >> s.min(127)
            } else if s >= u64::from(bits) {
                0
            } else {
                x >> s
            }
        }
        Bin::Copysign => return Err("copysign on an integer type".into()),
    };
    Ok(iput(r, t))
}

/// Integer `mul` / `mad` (`c` added for mad): `.lo` / `.hi` of the double-width product, or the
/// `.wide` product at twice the width.
pub fn mul_int(h: Half, t: Ty, a: u64, b: u64, c: Option<u64>) -> u64 {
    let p = ival(a, t).wrapping_mul(ival(b, t));
    let wide = Ty {
        kind: t.kind,
        bits: t.bits * 2,
    };
    let r = match h {
        Half::Lo => iput(p, t),
        Half::Hi => iput(p >> t.bits, t),
        Half::Wide => iput(p, wide),
    };
    match (c, h) {
        (None, _) => r,
        (Some(c), Half::Wide) => iput(ival(r, wide) + ival(c, wide), wide),
        (Some(c), _) => iput(ival(r, t) + ival(c, t), t),
    }
}

/// `fma.rn` (one rounding).
pub fn fma(t: Ty, f: FMods, a: u64, b: u64, c: u64) -> u64 {
    let (x, y, z) = (
        ftz(fval(a, t), t, f),
        ftz(fval(b, t), t, f),
        ftz(fval(c, t), t, f),
    );
    let r = match (t.kind, t.bits) {
        (Kind::F, 32) => f64::from((x as f32).mul_add(y as f32, z as f32)),
        _ => x.mul_add(y, z),
    };
    fres(r, t, f)
}

/// A unary op.
pub fn unary(op: Un, t: Ty, f: FMods, a: u64) -> Result<u64, String> {
    if t.kind == Kind::Pred {
        return match op {
            Un::Not => Ok((a ^ 1) & 1),
            _ => Err(format!("{op:?} on .pred")),
        };
    }
    if t.is_float() {
        let sign = 1u64 << (t.bits - 1);
        let x = ftz(fval(a, t), t, f);
        let r = match op {
            Un::Neg => return Ok(mask(fput(x, t) ^ sign, t.bits)),
            Un::Abs => return Ok(mask(fput(x, t) & !sign, t.bits)),
            Un::Rcp if x == 0.0 => f64::INFINITY.copysign(x),
            Un::Rcp => 1.0 / x,
            Un::Sqrt => x.sqrt(),
            Un::Rsqrt => 1.0 / x.sqrt(),
            Un::Ex2 => x.exp2(),
            Un::Lg2 if x == 0.0 => f64::NEG_INFINITY,
            Un::Lg2 => x.log2(),
            Un::Sin => x.sin(),
            Un::Cos => x.cos(),
            _ => return Err(format!("{op:?} on a float type")),
        };
        return Ok(fres(r, t, f));
    }
    let x = ival(a, t);
    let u = mask(a, t.bits);
    Ok(match op {
        Un::Neg => iput(x.wrapping_neg(), t),
        Un::Abs => iput(x.abs(), t),
        Un::Not => mask(!a, t.bits),
        Un::Cnot => u64::from(u == 0),
        Un::Popc => u64::from(u.count_ones()),
        Un::Clz => u64::from(u.leading_zeros() - (64 - t.bits)),
        Un::Brev => u.reverse_bits() >> (64 - t.bits),
        _ => return Err(format!("{op:?} on an integer type")),
    })
}

/// `setp` without its boolean combination.
pub fn compare(c: Cmp, t: Ty, f: FMods, a: u64, b: u64) -> bool {
    use Cmp::*;
    if t.is_float() {
        let (x, y) = (ftz(fval(a, t), t, f), ftz(fval(b, t), t, f));
        let un = x.is_nan() || y.is_nan();
        return match c {
            Eq => x == y,
            Ne => x != y && !un,
            Lt | Lo => x < y,
            Le | Ls => x <= y,
            Gt | Hi => x > y,
            Ge | Hs => x >= y,
            Equ => un || x == y,
            Neu => x != y,
            Ltu => un || x < y,
            Leu => un || x <= y,
            Gtu => un || x > y,
            Geu => un || x >= y,
            Num => !un,
            Nan => un,
        };
    }
    let (x, y) = (ival(a, t), ival(b, t));
    let (ux, uy) = (mask(a, t.bits), mask(b, t.bits));
    match c {
        Eq | Equ => x == y,
        Ne | Neu => x != y,
        Lt | Ltu => x < y,
        Le | Leu => x <= y,
        Gt | Gtu => x > y,
        Ge | Geu => x >= y,
        Lo => ux < uy,
        Ls => ux <= uy,
        Hi => ux > uy,
        Hs => ux >= uy,
        Num => true,
        Nan => false,
    }
}

/// Combines a comparison with `setp`'s predicate operand.
pub fn combine(r: bool, op: Option<BoolOp>, c: bool) -> bool {
    match op {
        None => r,
        Some(BoolOp::And) => r && c,
        Some(BoolOp::Or) => r || c,
        Some(BoolOp::Xor) => r ^ c,
    }
}

fn round_int(x: f64, r: Rnd) -> f64 {
    match r {
        Rnd::N => x.round_ties_even(),
        Rnd::Z => x.trunc(),
        Rnd::M => x.floor(),
        Rnd::P => x.ceil(),
    }
}

/// `cvt.<rnd>.<sat>.<dst>.<src>`.
pub fn cvt(dst: Ty, src: Ty, rnd: Option<Rnd>, int: bool, f: FMods, a: u64) -> Result<u64, String> {
    let name = || format!("cvt {src:?} -> {dst:?}");
    match (src.is_float(), dst.is_float()) {
        (true, true) => {
            let mut x = ftz(fval(a, src), src, f);
            if int {
                x = round_int(x, rnd.unwrap_or(Rnd::N));
            } else if !matches!(rnd, None | Some(Rnd::N)) {
                return Err(format!("{}: only .rn rounding is modelled", name()));
            }
            Ok(fres(x, dst, f))
        }
        (true, false) => {
            let x = ftz(fval(a, src), src, f);
            let Some(r) = rnd.filter(|_| int) else {
                return Err(format!(
                    "{}: float to integer needs .rni/.rzi/.rmi/.rpi",
                    name()
                ));
            };
            if x.is_nan() {
                return Ok(0);
            }
            let (lo, hi) = int_range(dst);
            Ok(iput(
                (round_int(x, r).clamp(lo as f64, hi as f64)) as i128,
                dst,
            ))
        }
        (false, true) => {
            if !matches!(rnd, None | Some(Rnd::N)) || int {
                return Err(format!("{}: only .rn rounding is modelled", name()));
            }
            let x = ival(a, src);
            // i64/u64 to f32 must round once: go through the integer's own conversion
            let r = match (dst.kind, dst.bits) {
                (Kind::F, 32) => f64::from(x as f32),
                _ => x as f64,
            };
            Ok(fres(r, dst, f))
        }
        (false, false) => {
            let x = ival(a, src);
            if f.sat {
                let (lo, hi) = int_range(dst);
                return Ok(iput(x.clamp(lo, hi), dst));
            }
            Ok(iput(x, dst))
        }
    }
}

fn int_range(t: Ty) -> (i128, i128) {
    if t.kind == Kind::S {
        (-(1i128 << (t.bits - 1)), (1i128 << (t.bits - 1)) - 1)
    } else {
        (0, (1i128 << t.bits) - 1)
    }
}

/// `shf.l` / `shf.r` (funnel shift of the 64-bit `b:a` by `c`, mod 32 with `.wrap`, at most 32
/// with `.clamp`): the high word after a left shift, the low word after a right shift.
pub fn shf(left: bool, wrap: bool, a: u64, b: u64, c: u64) -> u64 {
    let n = if wrap { c & 31 } else { mask(c, 32).min(32) };
    let x = mask(b, 32) << 32 | mask(a, 32);
    if left {
        mask((x << n) >> 32, 32)
    } else {
        mask(x >> n, 32)
    }
}
