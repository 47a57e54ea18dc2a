//! The per-lane semantics of the VALU opcodes [`super::valu`] decodes (VOP3 opcode numbers), on
//! raw operand bits after input modifiers. Written from the RDNA3 reference's opcode
//! descriptions; comparisons follow its code order (F, LT, EQ, LE, GT, LG/NE, GE, O/T, U, NGE,
//! NLG, NGT, NLE, NEQ, NLT, T).
//!
//! Not guaranteed: the hardware's approximate transcendentals are computed exactly here.

use half::f16;

/// An operand or result type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    F16,
    F32,
    F64,
    B16,
    B32,
    B64,
    /// One bit per lane (VCC or an SGPR pair): a compare result or a carry/select input.
    Mask,
}

/// Err(None): the opcode has no semantics here (the caller names it).
type R<T> = std::result::Result<T, Option<crate::Error>>;

fn fcmp(code: u32, a: f64, b: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let o = a.partial_cmp(&b);
    let (lt, eq, gt) = (o == Some(Less), o == Some(Equal), o == Some(Greater));
    match code {
        0 => false,
        1 => lt,
        2 => eq,
        3 => lt || eq,
        4 => gt,
        5 => lt || gt,
        6 => gt || eq,
        7 => o.is_some(),
        8 => o.is_none(),
        9 => !(gt || eq),
        10 => !(lt || gt),
        11 => !gt,
        12 => !(lt || eq),
        13 => !eq,
        14 => !lt,
        _ => true,
    }
}

fn icmp<T: PartialOrd>(code: u32, a: T, b: T) -> bool {
    match code {
        0 => false,
        1 => a < b,
        2 => a == b,
        3 => a <= b,
        4 => a > b,
        5 => a != b,
        6 => a >= b,
        _ => true,
    }
}

/// `v_cmp_class`: bit k of the mask says whether the value is in class k (0 signalling NaN,
/// 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf).
pub fn cmp_class(v: f64, quiet_bit: bool, denorm: bool, mask: u32) -> bool {
    let class = if v.is_nan() {
        if quiet_bit {
            1
        } else {
            0
        }
    } else if v.is_infinite() {
        if v < 0.0 {
            2
        } else {
            9
        }
    } else if v == 0.0 {
        if v.is_sign_negative() {
            5
        } else {
            6
        }
    } else if denorm {
        if v < 0.0 {
            4
        } else {
            7
        }
    } else if v < 0.0 {
        3
    } else {
        8
    };
    mask >> class & 1 != 0
}

fn h(x: u64) -> f16 {
    f16::from_bits(x as u16)
}
fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
fn fb(v: f32) -> u64 {
    u64::from(v.to_bits())
}
fn hb(v: f32) -> u64 {
    u64::from(f16::from_f32(v).to_bits())
}

/// A VOPC compare (opcode & 127) on raw bits.
pub fn compare(cmp: u32, x: [u64; 3]) -> R<bool> {
    Ok(match cmp {
        0..=15 => fcmp(cmp, h(x[0]).to_f64(), h(x[1]).to_f64()),
        16..=31 => fcmp(cmp - 16, f64::from(f(x[0])), f64::from(f(x[1]))),
        32..=47 => fcmp(cmp - 32, d(x[0]), d(x[1])),
        48..=55 => icmp(cmp - 48, x[0] as u16 as i16, x[1] as u16 as i16),
        56..=63 => icmp(cmp - 56, x[0] as u16, x[1] as u16),
        64..=71 => icmp(cmp - 64, x[0] as u32 as i32, x[1] as u32 as i32),
        72..=79 => icmp(cmp - 72, x[0] as u32, x[1] as u32),
        80..=87 => icmp(cmp - 80, x[0] as i64, x[1] as i64),
        88..=95 => icmp(cmp - 88, x[0], x[1]),
        125 => cmp_class(
            h(x[0]).to_f64(),
            x[0] & 0x200 != 0,
            x[0] & 0x7c00 == 0 && x[0] & 0x3ff != 0,
            x[1] as u32,
        ),
        126 => cmp_class(
            f64::from(f(x[0])),
            x[0] & 0x40_0000 != 0,
            f(x[0]).is_subnormal(),
            x[1] as u32,
        ),
        127 => cmp_class(
            d(x[0]),
            x[0] & 0x8_0000_0000_0000 != 0,
            d(x[0]).is_subnormal(),
            x[1] as u32,
        ),
        _ => return Err(None),
    })
}

/// IEEE-mode minimum/maximum of the RDNA3 reference: a signalling NaN input gives its quieted
/// self, a quiet NaN gives the other input, and -0 orders below +0.
fn minmax32(a: f32, b: f32, max: bool) -> f32 {
    let snan = |v: f32| v.is_nan() && v.to_bits() & 0x40_0000 == 0;
    for v in [a, b] {
        if snan(v) {
            return f32::from_bits(v.to_bits() | 0x40_0000);
        }
    }
    // Exact both ways for every non-signalling value.
    minmax64(f64::from(a), f64::from(b), max) as f32
}

fn minmax64(a: f64, b: f64, max: bool) -> f64 {
    let snan = |v: f64| v.is_nan() && v.to_bits() & 0x8_0000_0000_0000 == 0;
    if snan(a) {
        return f64::from_bits(a.to_bits() | 0x8_0000_0000_0000);
    }
    if snan(b) {
        return f64::from_bits(b.to_bits() | 0x8_0000_0000_0000);
    }
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    let less = a < b || (a == b && a.is_sign_negative() && !b.is_sign_negative());
    if less != max {
        a
    } else {
        b
    }
}

fn med3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return minmax32(minmax32(a, b, false), c, false);
    }
    let mx = minmax32(minmax32(a, b, true), c, true);
    if mx == a {
        minmax32(b, c, true)
    } else if mx == b {
        minmax32(a, c, true)
    } else {
        minmax32(a, b, true)
    }
}

/// Round half to even.
fn rndne(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 {
        2.0 * (v / 2.0).round()
    } else {
        r
    }
}

/// frexp: (mantissa in [0.5, 1), exponent), the reference's results for 0, inf and NaN.
fn frexp(v: f64) -> (f64, i32) {
    if v == 0.0 || !v.is_finite() {
        return (v, 0);
    }
    let mut e = v.abs().log2().floor() as i32 + 1;
    let mut m = v / 2f64.powi(e);
    if m.abs() >= 1.0 {
        m /= 2.0;
        e += 1;
    } else if m.abs() < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    (m, e)
}

/// Saturating float to integer as the hardware converts (NaN -> 0).
fn to_i32(v: f64) -> u64 {
    u64::from(v as i32 as u32)
}
fn to_u32(v: f64) -> u64 {
    u64::from(v as u32)
}

/// f32 -> f16 rounding toward zero.
fn f16_rtz(v: f32) -> u16 {
    let r = f16::from_f32(v);
    if r.is_infinite() && v.is_finite() {
        return f16::MAX.to_bits() | (r.to_bits() & 0x8000);
    }
    if f64::from(r.to_f32()).abs() > f64::from(v).abs() {
        r.to_bits() - 1
    } else {
        r.to_bits()
    }
}

/// Single-precision opcodes (and the f16 <-> f32 conversions).
pub fn f32_op(op: u32, x: [u64; 3]) -> R<u64> {
    let (a, b, c) = (f(x[0]), f(x[1]), f(x[2]));
    let a64 = f64::from(a);
    Ok(match op {
        259 => fb(a + b),
        260 => fb(a - b),
        261 => fb(b - a),
        264 => fb(a * b),
        271 => fb(minmax32(a, b, false)),
        272 => fb(minmax32(a, b, true)),
        299 | 531 => fb(a.mul_add(b, c)),
        303 => u64::from(f16_rtz(a)) | u64::from(f16_rtz(b)) << 16,
        389 => fb(x[0] as u32 as i32 as f32),
        390 => fb(x[0] as u32 as f32),
        391 => to_u32(a64),
        392 => to_i32(a64),
        394 => hb(a),
        395 => fb(h(x[0]).to_f32()),
        396 => to_i32((a64 + 0.5).floor()),
        397 => to_i32(a64.floor()),
        401..=404 => fb((x[0] >> (8 * (op - 401)) & 0xff) as f32),
        416 => {
            if a.is_infinite() {
                fb(f32::NAN)
            } else {
                fb((a - a.floor()).min(f32::from_bits(0x3f7f_ffff)))
            }
        }
        417 => fb(a.trunc()),
        418 => fb(a.ceil()),
        419 => fb(rndne(a64) as f32),
        420 => fb(a.floor()),
        421 => fb(a.exp2()),
        423 => fb(a.log2()),
        426 | 427 => fb(1.0 / a),
        430 => fb(1.0 / a.sqrt()),
        435 => fb(a.sqrt()),
        437 => fb((a64 * std::f64::consts::TAU).sin() as f32),
        438 => fb((a64 * std::f64::consts::TAU).cos() as f32),
        447 => u64::from(frexp(a64).1 as u32),
        448 => fb(frexp(a64).0 as f32),
        537 => fb(minmax32(minmax32(a, b, false), c, false)),
        540 => fb(minmax32(minmax32(a, b, true), c, true)),
        543 => fb(med3(a, b, c)),
        551 => fb(div_fixup32(a, b, c)),
        606 => fb(minmax32(minmax32(a, b, true), c, false)),
        607 => fb(minmax32(minmax32(a, b, false), c, true)),
        796 => fb((a64 * 2f64.powi((x[1] as u32 as i32).clamp(-400, 400))) as f32),
        _ => return Err(None),
    })
}

/// V_DIV_FIXUP_F32: special cases of quotient `q` = `n` / `den`.
fn div_fixup32(q: f32, den: f32, n: f32) -> f32 {
    let neg = den.is_sign_negative() != n.is_sign_negative();
    let sgn = |v: f32| if neg { -v } else { v };
    if n.is_nan() {
        return f32::from_bits(n.to_bits() | 0x40_0000);
    }
    if den.is_nan() {
        return f32::from_bits(den.to_bits() | 0x40_0000);
    }
    if (den == 0.0 && n == 0.0) || (den.is_infinite() && n.is_infinite()) {
        return f32::from_bits(0xffc0_0000);
    }
    if den == 0.0 || n.is_infinite() {
        return sgn(f32::INFINITY);
    }
    if den.is_infinite() || n == 0.0 {
        return sgn(0.0);
    }
    if q.is_nan() {
        return sgn(f32::INFINITY);
    }
    sgn(q.abs())
}

fn div_fixup64(q: f64, den: f64, n: f64) -> f64 {
    let neg = den.is_sign_negative() != n.is_sign_negative();
    let sgn = |v: f64| if neg { -v } else { v };
    if n.is_nan() {
        return f64::from_bits(n.to_bits() | 0x8_0000_0000_0000);
    }
    if den.is_nan() {
        return f64::from_bits(den.to_bits() | 0x8_0000_0000_0000);
    }
    if (den == 0.0 && n == 0.0) || (den.is_infinite() && n.is_infinite()) {
        return f64::from_bits(0xfff8_0000_0000_0000);
    }
    if den == 0.0 || n.is_infinite() {
        return sgn(f64::INFINITY);
    }
    if den.is_infinite() || n == 0.0 {
        return sgn(0.0);
    }
    if q.is_nan() {
        return sgn(f64::INFINITY);
    }
    sgn(q.abs())
}

/// The biased exponent field.
fn exp32(v: f32) -> i32 {
    (v.to_bits() >> 23 & 0xff) as i32
}
fn exp64(v: f64) -> i32 {
    (v.to_bits() >> 52 & 0x7ff) as i32
}

/// V_DIV_SCALE_F32/F64 (S0 value to scale, S1 denominator, S2 numerator) -> (D, VCC bit).
pub fn div_scale(is64: bool, x: [u64; 3]) -> (u64, bool) {
    if is64 {
        let (s0, s1, s2) = (d(x[0]), d(x[1]), d(x[2]));
        let sc = |v: f64, e: i32| (v * 2f64.powi(e)).to_bits();
        let mut r = s0.to_bits();
        let mut vcc = false;
        if s2 == 0.0 || s1 == 0.0 {
            r = f64::NAN.to_bits();
        } else if exp64(s2) - exp64(s1) >= 768 {
            vcc = true;
            if s0 == s1 {
                r = sc(s0, 128);
            }
        } else if s1.is_subnormal() {
            r = sc(s0, 128);
        } else if (1.0 / s1).is_subnormal() && (s2 / s1).is_subnormal() {
            vcc = true;
            if s0 == s1 {
                r = sc(s0, 128);
            }
        } else if (1.0 / s1).is_subnormal() {
            r = sc(s0, -128);
        } else if (s2 / s1).is_subnormal() {
            vcc = true;
            if s0 == s2 {
                r = sc(s0, 128);
            }
        } else if exp64(s2) <= 53 {
            r = sc(s0, 128);
        }
        return (r, vcc);
    }
    let (s0, s1, s2) = (f(x[0]), f(x[1]), f(x[2]));
    let sc = |v: f32, e: i32| fb((f64::from(v) * 2f64.powi(e)) as f32);
    let mut r = fb(s0);
    let mut vcc = false;
    if s2 == 0.0 || s1 == 0.0 {
        r = fb(f32::NAN);
    } else if exp32(s2) - exp32(s1) >= 96 {
        vcc = true;
        if s0 == s1 {
            r = sc(s0, 64);
        }
    } else if s1.is_subnormal() {
        r = sc(s0, 64);
    } else if (1.0 / f64::from(s1)) < f64::from(f32::MIN_POSITIVE) && ((s2 / s1).is_subnormal()) {
        vcc = true;
        if s0 == s1 {
            r = sc(s0, 64);
        }
    } else if (1.0 / f64::from(s1)).abs() < f64::from(f32::MIN_POSITIVE) {
        r = sc(s0, -64);
    } else if (s2 / s1).is_subnormal() {
        vcc = true;
        if s0 == s2 {
            r = sc(s0, 64);
        }
    } else if exp32(s2) <= 23 {
        r = sc(s0, 64);
    }
    (r, vcc)
}

/// V_DIV_FMAS_F32/F64: fma, post-scaled when VCC says the inputs were scaled (up by 2^64/2^128
/// when the numerator S2 is at least 2.0, else down).
pub fn div_fmas(is64: bool, x: [u64; 3], vcc: bool) -> u64 {
    if is64 {
        let r = d(x[0]).mul_add(d(x[1]), d(x[2]));
        if !vcc {
            return r.to_bits();
        }
        let e = if exp64(d(x[2])) >= 1024 { 128 } else { -128 };
        return (r * 2f64.powi(e)).to_bits();
    }
    let r = f(x[0]).mul_add(f(x[1]), f(x[2]));
    if !vcc {
        return fb(r);
    }
    let e = if exp32(f(x[2])) >= 128 { 64 } else { -64 };
    fb((f64::from(r) * 2f64.powi(e)) as f32)
}

/// Double-precision opcodes (and the f64 <-> f32/i32/u32 conversions).
pub fn f64_op(op: u32, x: [u64; 3]) -> R<u64> {
    let (a, b, c) = (d(x[0]), d(x[1]), d(x[2]));
    let db = |v: f64| v.to_bits();
    Ok(match op {
        387 => to_i32(a),
        388 => db(f64::from(x[0] as u32 as i32)),
        399 => fb(a as f32),
        400 => db(f64::from(f(x[0]))),
        405 => to_u32(a),
        406 => db(f64::from(x[0] as u32)),
        407 => db(a.trunc()),
        408 => db(a.ceil()),
        409 => db(rndne(a)),
        410 => db(a.floor()),
        431 => db(1.0 / a),
        433 => db(1.0 / a.sqrt()),
        436 => db(a.sqrt()),
        444 => u64::from(frexp(a).1 as u32),
        445 => db(frexp(a).0),
        446 => {
            if a.is_infinite() {
                db(f64::NAN)
            } else {
                db((a - a.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff)))
            }
        }
        532 => db(a.mul_add(b, c)),
        552 => db(div_fixup64(a, b, c)),
        807 => db(a + b),
        808 => db(a * b),
        809 => db(minmax64(a, b, false)),
        810 => db(minmax64(a, b, true)),
        811 => {
            let e = (x[1] as u32 as i32).clamp(-2200, 2200);
            let half = e / 2;
            db(a * 2f64.powi(half) * 2f64.powi(e - half))
        }
        _ => return Err(None),
    })
}

/// Half-precision opcodes (computed in f32/f64, rounded once to f16).
pub fn f16_op(op: u32, x: [u64; 3]) -> R<u64> {
    let (a, b) = (h(x[0]).to_f32(), h(x[1]).to_f32());
    Ok(match op {
        306 => hb(a + b),
        307 => hb(a - b),
        308 => hb(b - a),
        309 => hb(a * b),
        313 => hb(minmax32(a, b, true)),
        314 => hb(minmax32(a, b, false)),
        310 | 584 => {
            u64::from(f16::from_f64(f64::from(a).mul_add(f64::from(b), h(x[2]).to_f64())).to_bits())
        }
        464 => hb(f32::from(x[0] as u16)),
        465 => hb(f32::from(x[0] as u16 as i16)),
        466 => u64::from(a as u16),
        467 => u64::from(a as i16 as u16),
        785 => (x[0] & 0xffff) | (x[1] & 0xffff) << 16,
        _ => return Err(None),
    })
}

fn bfe(a: u32, off: u32, width: u32, signed: bool) -> u32 {
    let (off, width) = (off & 31, width & 31);
    if width == 0 {
        return 0;
    }
    if signed {
        ((a << 32u32.saturating_sub(off + width)) as i32 >> (32 - width)) as u32
    } else {
        (a >> off) & ((1u64 << width) - 1) as u32
    }
}

fn perm(s0: u32, s1: u32, sel: u32) -> u32 {
    let bytes = (u64::from(s0) << 32 | u64::from(s1)).to_le_bytes();
    let mut r = 0u32;
    for k in 0..4 {
        let s = (sel >> (8 * k)) & 0xff;
        let byte = match s {
            0..=7 => u32::from(bytes[s as usize]),
            8 => 0xff * (u32::from(bytes[1]) >> 7),
            9 => 0xff * (u32::from(bytes[3]) >> 7),
            10 => 0xff * (u32::from(bytes[5]) >> 7),
            11 => 0xff * (u32::from(bytes[7]) >> 7),
            12 => 0,
            _ => 0xff,
        };
        r |= byte << (8 * k);
    }
    r
}

/// Integer and bit opcodes (`lane` for v_mbcnt).
pub fn int_op(op: u32, x: [u64; 3], lane: usize) -> R<u64> {
    let (a, b, c) = (x[0] as u32, x[1] as u32, x[2] as u32);
    let (ai, bi, ci) = (a as i32, b as i32, c as i32);
    let s24 = |v: u32| ((v << 8) as i32 >> 8) as i64;
    let (a16, b16) = (a as u16, b as u16);
    let r: u32 = match op {
        265 => (s24(a) * s24(b)) as u32,
        266 => ((s24(a) * s24(b)) >> 32) as u32,
        267 => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff),
        268 => ((u64::from(a & 0xff_ffff) * u64::from(b & 0xff_ffff)) >> 32) as u32,
        273 => ai.min(bi) as u32,
        274 => ai.max(bi) as u32,
        275 => a.min(b),
        276 => a.max(b),
        280 => b << (a & 31),
        281 => b >> (a & 31),
        282 => (bi >> (a & 31)) as u32,
        283 => a & b,
        284 => a | b,
        285 => a ^ b,
        286 => !(a ^ b),
        293 | 806 => a.wrapping_add(b),
        294 | 805 => a.wrapping_sub(b),
        295 => b.wrapping_sub(a),
        385 => a,
        439 => !a,
        440 => a.reverse_bits(),
        441 => {
            if a == 0 {
                u32::MAX
            } else {
                a.leading_zeros()
            }
        }
        442 => {
            if a == 0 {
                u32::MAX
            } else {
                a.trailing_zeros()
            }
        }
        443 => {
            if a == 0 || a == u32::MAX {
                u32::MAX
            } else {
                (if ai < 0 { !a } else { a }).leading_zeros() - 1
            }
        }
        489 => u32::from(!a16),
        490 => a16 as i16 as i32 as u32,
        491 => u32::from(a16),
        522 => (s24(a) * s24(b) + i64::from(ci)) as u32,
        523 => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c),
        528 => bfe(a, b, c, false),
        529 => bfe(a, b, c, true),
        530 => (a & b) | (!a & c),
        534 => ((u64::from(a) << 32 | u64::from(b)) >> (c & 31)) as u32,
        535 => ((u64::from(a) << 32 | u64::from(b)) >> (8 * (c & 3))) as u32,
        538 => ai.min(bi).min(ci) as u32,
        539 => a.min(b).min(c),
        541 => ai.max(bi).max(ci) as u32,
        542 => a.max(b).max(c),
        544 => ai.max(bi).min(ai.min(bi).max(ci)) as u32,
        545 => a.max(b).min(a.min(b).max(c)),
        576 => a ^ b ^ c,
        580 => perm(a, b, c),
        581 => (a ^ b).wrapping_add(c),
        582 => (a << (b & 31)).wrapping_add(c),
        583 => a.wrapping_add(b) << (c & 31),
        597 => a.wrapping_add(b).wrapping_add(c),
        598 => (a << (b & 31)) | c,
        599 => (a & b) | c,
        600 => a | b | c,
        601 => u32::from(a16) * u32::from(b16) + c,
        602 => (i32::from(a16 as i16) * i32::from(b16 as i16)).wrapping_add(ci) as u32,
        605 => u32::from(if c != 0 { b16 } else { a16 }),
        610 => a.max(b).min(c),
        611 => a.min(b).max(c),
        612 => ai.max(bi).min(ci) as u32,
        613 => ai.min(bi).max(ci) as u32,
        771 | 781 => u32::from(a16.wrapping_add(b16)),
        772 | 782 => u32::from(a16.wrapping_sub(b16)),
        773 => u32::from(a16.wrapping_mul(b16)),
        777 => u32::from(a16.max(b16)),
        778 => (a16 as i16).max(b16 as i16) as u16 as u32,
        779 => u32::from(a16.min(b16)),
        780 => (a16 as i16).min(b16 as i16) as u16 as u32,
        797 => (((1u64 << (a & 31)) - 1) as u32) << (b & 31),
        798 => a.count_ones().wrapping_add(b),
        799 => (a & ((1u64 << lane) - 1) as u32)
            .count_ones()
            .wrapping_add(b),
        // wave32: no lane is above 31, so the high half counts nothing.
        800 => b,
        812 => a.wrapping_mul(b),
        813 => ((u64::from(a) * u64::from(b)) >> 32) as u32,
        814 => ((i64::from(ai) * i64::from(bi)) >> 32) as u32,
        824 => u32::from(b16 << (a16 & 15)),
        825 => u32::from(b16 >> (a16 & 15)),
        826 => ((b16 as i16) >> (a16 & 15)) as u16 as u32,
        866 => u32::from(a16 & b16),
        867 => u32::from(a16 | b16),
        868 => u32::from(a16 ^ b16),
        828 => return Ok(x[1] << (a & 63)),
        829 => return Ok(x[1] >> (a & 63)),
        830 => return Ok(((x[1] as i64) >> (a & 63)) as u64),
        _ => return Err(None),
    };
    Ok(u64::from(r))
}
