//! Register values of the UOp interpreter and their exact per-dtype semantics.
//!
//! A register holds one scalar lane as 64 bits: bool as 0/1, signed integers sign-extended,
//! unsigned integers zero-extended, and every float kind as the `f64` bits of its value (already
//! rounded to the dtype, except bfloat16, which tinygrad's `exec_alu` does not round; it is rounded
//! when stored). ALU results are exactly [`crate::ops::exec_alu`]'s; common integer and float
//! operations take a direct path that computes the same values without building constants.
//! Memory bytes convert through [`crate::ops::const_to_bits`] / [`crate::ops::const_from_bits`].
//!
//! Not guaranteed: anything about speed; this is the reference, not a fast path.

use crate::dtype::{wrap_int, ConstValue, DType, Scalar};
use crate::ops::{const_from_bits, const_to_bits, exec_alu, BinaryOps, Op, UnaryOps};
use crate::Result;

/// The constant a register holds.
pub fn decode(bits: u64, s: Scalar) -> ConstValue {
    match s {
        Scalar::Bool => ConstValue::Bool(bits != 0),
        s if s.is_float() => ConstValue::Float(f64::from_bits(bits)),
        s if s.is_unsigned() => ConstValue::Int(bits as i128),
        _ => ConstValue::Int(bits as i64 as i128),
    }
}

/// The register form of integer `i` wrapped into the integer kind `s` (a C cast; what
/// [`wrap_int`] computes, without 128-bit division).
#[inline]
pub fn wrap(i: i128, s: Scalar) -> u64 {
    let bits = 8 * s.itemsize() as u32;
    let x = i as u64;
    if bits == 64 {
        return x;
    }
    if s.is_unsigned() {
        x & ((1u64 << bits) - 1)
    } else {
        (((x << (64 - bits)) as i64) >> (64 - bits)) as u64
    }
}

/// The register form of a constant, truncated to `s` the way tinygrad's `truncate` does.
pub fn encode(v: ConstValue, s: Scalar) -> u64 {
    match (v, s) {
        (ConstValue::Int(i), s) if s.is_int() => wrap(i, s),
        _ => match v.truncate(DType::new(s)) {
            ConstValue::Bool(b) => b as u64,
            ConstValue::Float(f) => f.to_bits(),
            ConstValue::Int(i) => wrap_int(i, s) as u64,
        },
    }
}

/// The register form of `itemsize` little-endian bytes of memory holding an `s`.
pub fn from_bytes(bytes: &[u8], s: Scalar) -> u64 {
    let mut raw = [0u8; 8];
    let n = bytes.len().min(8);
    raw[..n].copy_from_slice(&bytes[..n]);
    let bits = u64::from_le_bytes(raw);
    match s {
        Scalar::Bool => (bits & 0xff != 0) as u64,
        Scalar::Float32 => (f32::from_bits(bits as u32) as f64).to_bits(),
        Scalar::Float64 => bits,
        s if s.is_int() => wrap(bits as i128, s),
        _ => encode(const_from_bits(bits, s), s),
    }
}

/// The little-endian memory bytes of a register holding an `s` (writes `s.itemsize()` bytes).
pub fn to_bytes(bits: u64, s: Scalar, out: &mut [u8]) {
    let raw = const_to_bits(decode(bits, s), s).to_le_bytes();
    let n = s.itemsize().min(out.len());
    out[..n].copy_from_slice(&raw[..n]);
}

/// A value conversion (CAST) of one lane.
pub fn cast(bits: u64, from: Scalar, to: Scalar) -> u64 {
    if from == to {
        return bits;
    }
    encode(decode(bits, from), to)
}

fn round_float(x: f64, s: Scalar) -> u64 {
    match s {
        Scalar::Float32 => (x as f32 as f64).to_bits(),
        Scalar::Float16 => half::f16::from_f64(x).to_f64().to_bits(),
        _ => x.to_bits(),
    }
}

/// Direct integer path: both sources and the result are the integer kind `s` (or bool results for
/// comparisons). Mirrors `exec_alu`'s `int_binary` followed by `truncate`.
fn int_fast(op: BinaryOps, s: Scalar, a: u64, b: u64) -> Option<u64> {
    let (x, y) = if s.is_unsigned() {
        (a as i128, b as i128)
    } else {
        (a as i64 as i128, b as i64 as i128)
    };
    let r = match op {
        BinaryOps::ADD => x + y,
        BinaryOps::MUL => x.wrapping_mul(y),
        BinaryOps::MAX => x.max(y),
        BinaryOps::XOR => x ^ y,
        BinaryOps::IDIV => x.checked_div(y).unwrap_or(0),
        BinaryOps::MOD => x.checked_rem(y).unwrap_or(0),
        BinaryOps::CMPLT => return Some((x < y) as u64),
        BinaryOps::CMPNE => return Some((x != y) as u64),
        _ => return None,
    };
    Some(wrap(r, s))
}

/// Direct float path for float32/float64/float16 (not bfloat16): compute in f64, round to the
/// dtype. Mirrors `exec_alu`'s `float_binary`.
fn float_fast(op: BinaryOps, s: Scalar, a: u64, b: u64) -> Option<u64> {
    let (x, y) = (f64::from_bits(a), f64::from_bits(b));
    let r = match op {
        BinaryOps::ADD => x + y,
        BinaryOps::MUL => x * y,
        BinaryOps::MAX => crate::ops::float_max(x, y),
        BinaryOps::CMPLT => return Some((x < y) as u64),
        BinaryOps::CMPNE => return Some((x != y) as u64),
        _ => return None,
    };
    Some(round_float(r, s))
}

/// One ALU lane: `op` with result kind `out` over sources of kinds `ins` holding `v`.
pub fn alu(op: Op, out: Scalar, ins: &[Scalar], v: &[u64]) -> Result<u64> {
    if let (Op::Binary(b), [sa, sb], [a, bb]) = (op, ins, v) {
        let same = sa == sb && (*sa == out || out == Scalar::Bool);
        let cmp = matches!(b, BinaryOps::CMPLT | BinaryOps::CMPNE);
        if same && (cmp || *sa == out) {
            let fast = if sa.is_int() && (cmp || out.is_int()) {
                int_fast(b, *sa, *a, *bb)
            } else if matches!(sa, Scalar::Float32 | Scalar::Float64 | Scalar::Float16)
                && (cmp || out == *sa)
            {
                float_fast(b, *sa, *a, *bb)
            } else {
                None
            };
            if let Some(r) = fast {
                return Ok(r);
            }
        }
    }
    if let (Op::Unary(UnaryOps::NEG), [s], [a]) = (op, ins, v) {
        if *s == out && matches!(s, Scalar::Float32 | Scalar::Float64 | Scalar::Float16) {
            return Ok(round_float(-f64::from_bits(*a), out));
        }
    }
    let mut args = [ConstValue::Int(0); 3];
    for (i, (&bits, &s)) in v.iter().zip(ins).enumerate().take(3) {
        args[i] = decode(bits, s);
    }
    let n = v.len().min(3);
    Ok(encode(exec_alu(op, DType::new(out), &args[..n])?, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_memory_bytes() {
        let mut b = [0u8; 8];
        for s in Scalar::ALL {
            for v in [0.0, 1.0, -1.0, 2.5, 65504.0, 1e6, -128.0, 255.0] {
                let r = encode(ConstValue::Float(v), s);
                to_bytes(r, s, &mut b);
                let back = from_bytes(&b[..s.itemsize()], s);
                // bfloat16 registers are not rounded; memory is
                if s != Scalar::BFloat16 {
                    assert_eq!(back, r, "{s:?} {v}");
                }
            }
        }
        assert_eq!(
            decode(encode(ConstValue::Int(-1), Scalar::Uint64), Scalar::Uint64),
            ConstValue::Int(u64::MAX as i128)
        );
        assert_eq!(
            decode(encode(ConstValue::Int(200), Scalar::Int8), Scalar::Int8),
            ConstValue::Int(-56)
        );
        assert_eq!(
            decode(
                encode(ConstValue::Float(70000.0), Scalar::Float16),
                Scalar::Float16
            ),
            ConstValue::Float(f64::INFINITY)
        );
    }
}
