//! The op set of tinygrad 0.9.1 (`UnaryOps`, `BinaryOps`, `TernaryOps`, `ReduceOps`, `BufferOps`,
//! `LoadOps`), the ALU semantics every device must reproduce ([`exec_alu`], tinygrad's
//! `python_alu` followed by `truncate`), and the kernel AST ([`LazyOp`], in `ops/ast.rs`).
//!
//! Owns: op identity and constant-evaluation semantics. Does not own: how a backend emits an op
//! (renderers) or when ops fuse (the scheduler).
//!
//! Not guaranteed: integer division or modulo by zero, which C leaves undefined, evaluates to 0
//! here (tinygrad's Python evaluator raises).

#![forbid(unsafe_code)]

use crate::dtype::{ConstValue, DType, Scalar};
use crate::{bail, Result};

mod ast;
pub use ast::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnaryOps {
    EXP2,
    LOG2,
    CAST,
    BITCAST,
    SIN,
    SQRT,
    NEG,
    RECIP,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinaryOps {
    ADD,
    MUL,
    IDIV,
    MAX,
    MOD,
    CMPLT,
    CMPNE,
    XOR,
    SHR,
    SHL,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TernaryOps {
    WHERE,
    MULACC,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOps {
    SUM,
    MAX,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferOps {
    LOAD,
    CONST,
    STORE,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoadOps {
    EMPTY,
    CONST,
    COPY,
    CONTIGUOUS,
    CUSTOM,
    ASSIGN,
    VIEW,
}

/// Any op of the six families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Unary(UnaryOps),
    Binary(BinaryOps),
    Ternary(TernaryOps),
    Reduce(ReduceOps),
    Buffer(BufferOps),
    Load(LoadOps),
}

impl From<UnaryOps> for Op {
    fn from(o: UnaryOps) -> Op {
        Op::Unary(o)
    }
}
impl From<BinaryOps> for Op {
    fn from(o: BinaryOps) -> Op {
        Op::Binary(o)
    }
}
impl From<TernaryOps> for Op {
    fn from(o: TernaryOps) -> Op {
        Op::Ternary(o)
    }
}
impl From<ReduceOps> for Op {
    fn from(o: ReduceOps) -> Op {
        Op::Reduce(o)
    }
}
impl From<BufferOps> for Op {
    fn from(o: BufferOps) -> Op {
        Op::Buffer(o)
    }
}
impl From<LoadOps> for Op {
    fn from(o: LoadOps) -> Op {
        Op::Load(o)
    }
}

impl Op {
    /// An ALU op (unary, binary or ternary): what UOps::ALU carries.
    pub fn is_alu(self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Ternary(_))
    }
    /// Ops with f(0) != 0 or undefined at 0: a pad of their result cannot be fused
    /// (`UNSAFE_PAD_OPS` of 0.9.1).
    pub fn is_unsafe_pad(self) -> bool {
        UNSAFE_PAD_OPS.contains(&self)
    }
    /// Commutative binary ops (operand order does not matter).
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            Op::Binary(
                BinaryOps::ADD
                    | BinaryOps::MUL
                    | BinaryOps::MAX
                    | BinaryOps::CMPNE
                    | BinaryOps::XOR
            )
        )
    }
    /// tinygrad's printed name (`UnaryOps.EXP2`, `LoadOps.CONST`, ...).
    pub fn name(self) -> String {
        match self {
            Op::Unary(o) => format!("UnaryOps.{o:?}"),
            Op::Binary(o) => format!("BinaryOps.{o:?}"),
            Op::Ternary(o) => format!("TernaryOps.{o:?}"),
            Op::Reduce(o) => format!("ReduceOps.{o:?}"),
            Op::Buffer(o) => format!("BufferOps.{o:?}"),
            Op::Load(o) => format!("LoadOps.{o:?}"),
        }
    }
}

/// `UNSAFE_PAD_OPS` of 0.9.1: RECIP, LOG2, EXP2, IDIV.
pub const UNSAFE_PAD_OPS: [Op; 4] = [
    Op::Unary(UnaryOps::RECIP),
    Op::Unary(UnaryOps::LOG2),
    Op::Unary(UnaryOps::EXP2),
    Op::Binary(BinaryOps::IDIV),
];

/// Evaluate an ALU op on constants, with tinygrad's Python semantics, then truncate the result to
/// `dtype` (the op's output dtype; bool for comparisons). CAST/BITCAST are not ALU ops here: use
/// [`ConstValue::truncate`] / [`bitcast_const`].
pub fn exec_alu(op: Op, dtype: DType, src: &[ConstValue]) -> Result<ConstValue> {
    let want = match op {
        Op::Unary(UnaryOps::CAST | UnaryOps::BITCAST) => {
            bail!(Codegen, "exec_alu: {} is not an ALU op", op.name())
        }
        Op::Unary(_) => 1,
        Op::Binary(_) => 2,
        Op::Ternary(_) => 3,
        _ => bail!(Codegen, "exec_alu: {} is not an ALU op", op.name()),
    };
    if src.len() != want {
        bail!(
            Codegen,
            "exec_alu: {} takes {want} operands, got {}",
            op.name(),
            src.len()
        );
    }
    let v = python_alu(op, dtype, src);
    Ok(v.truncate(dtype))
}

fn python_alu(op: Op, dtype: DType, s: &[ConstValue]) -> ConstValue {
    use ConstValue::*;
    let float_op = dtype.is_float() || s.iter().any(|v| matches!(v, Float(_)));
    match op {
        Op::Unary(u) => unary(u, dtype, s[0]),
        Op::Binary(BinaryOps::CMPLT) => Bool(lt(s[0], s[1])),
        Op::Binary(BinaryOps::CMPNE) => Bool(ne(s[0], s[1])),
        Op::Binary(b) if float_op => float_binary(b, s[0].as_f64(), s[1].as_f64()),
        Op::Binary(b) if dtype.is_bool() => bool_binary(b, s[0].as_bool(), s[1].as_bool()),
        Op::Binary(b) => int_binary(b, s[0].as_i128(), s[1].as_i128()),
        Op::Ternary(TernaryOps::WHERE) => {
            if s[0].as_bool() {
                s[1]
            } else {
                s[2]
            }
        }
        Op::Ternary(TernaryOps::MULACC) => {
            if float_op {
                Float(s[0].as_f64() * s[1].as_f64() + s[2].as_f64())
            } else {
                Int(s[0]
                    .as_i128()
                    .wrapping_mul(s[1].as_i128())
                    .wrapping_add(s[2].as_i128()))
            }
        }
        _ => s[0],
    }
}

fn unary(u: UnaryOps, dtype: DType, x: ConstValue) -> ConstValue {
    use ConstValue::*;
    let f = x.as_f64();
    match u {
        UnaryOps::NEG => match x {
            Bool(b) => Bool(!b),
            Int(i) => Int(-i),
            Float(v) => Float(-v),
        },
        UnaryOps::LOG2 => Float(if f > 0.0 {
            f.log2()
        } else if f == 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::NAN
        }),
        UnaryOps::EXP2 => Float(f.exp2()),
        UnaryOps::SQRT => Float(if f >= 0.0 { f.sqrt() } else { f64::NAN }),
        UnaryOps::SIN => Float(if f.is_infinite() { f64::NAN } else { f.sin() }),
        UnaryOps::RECIP => Float(if f == 0.0 {
            f64::INFINITY.copysign(f)
        } else {
            1.0 / f
        }),
        UnaryOps::CAST | UnaryOps::BITCAST => x.as_const(dtype),
    }
}

fn lt(a: ConstValue, b: ConstValue) -> bool {
    match (a, b) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => a.as_f64() < b.as_f64(),
        _ => a.as_i128() < b.as_i128(),
    }
}

fn ne(a: ConstValue, b: ConstValue) -> bool {
    match (a, b) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => a.as_f64() != b.as_f64(),
        _ => a.as_i128() != b.as_i128(),
    }
}

/// rawgrad's float MAX on every device (IEEE 754-2019 `maximum`): NaN when either operand is
/// NaN, and +0 above -0. Both rules make it commutative and associative, so a MAX reduction
/// gives one answer whatever order a device's kernel combines the elements in.
pub fn float_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == y {
        // equal values: only the zeros can differ, and then +0 wins
        if x.is_sign_negative() && y.is_sign_negative() {
            x
        } else if x == 0.0 {
            0.0
        } else {
            x
        }
    } else if x > y {
        x
    } else {
        y
    }
}

fn float_binary(b: BinaryOps, x: f64, y: f64) -> ConstValue {
    let v = match b {
        BinaryOps::ADD => x + y,
        BinaryOps::MUL => x * y,
        BinaryOps::MAX => float_max(x, y),
        BinaryOps::IDIV => {
            if y == 0.0 {
                x * f64::INFINITY
            } else {
                (x / y).trunc()
            }
        }
        BinaryOps::MOD => {
            let (xi, yi) = (x as i128, y as i128);
            if yi == 0 {
                0.0
            } else {
                (xi.abs() % yi.abs() * if x < 0.0 { -1 } else { 1 }) as f64
            }
        }
        // Bit ops on floats do not occur in valid kernels; follow the integer path.
        BinaryOps::XOR | BinaryOps::SHR | BinaryOps::SHL => {
            return int_binary(b, x as i128, y as i128)
        }
        BinaryOps::CMPLT => return ConstValue::Bool(x < y),
        BinaryOps::CMPNE => return ConstValue::Bool(x != y),
    };
    ConstValue::Float(v)
}

fn bool_binary(b: BinaryOps, x: bool, y: bool) -> ConstValue {
    ConstValue::Bool(match b {
        BinaryOps::ADD | BinaryOps::MAX => x || y,
        BinaryOps::MUL => x && y,
        BinaryOps::XOR | BinaryOps::CMPNE => x != y,
        BinaryOps::CMPLT => !x && y,
        _ => return int_binary(b, x as i128, y as i128),
    })
}

fn int_binary(b: BinaryOps, x: i128, y: i128) -> ConstValue {
    ConstValue::Int(match b {
        BinaryOps::ADD => x.wrapping_add(y),
        BinaryOps::MUL => x.wrapping_mul(y),
        BinaryOps::MAX => x.max(y),
        BinaryOps::XOR => x ^ y,
        BinaryOps::SHR => x >> y.clamp(0, 127),
        BinaryOps::SHL => x.wrapping_shl(y.clamp(0, 127) as u32),
        // C semantics: truncate toward zero, remainder takes the dividend's sign.
        BinaryOps::IDIV => x.checked_div(y).unwrap_or(0),
        BinaryOps::MOD => x.checked_rem(y).unwrap_or(0),
        BinaryOps::CMPLT => return ConstValue::Bool(x < y),
        BinaryOps::CMPNE => return ConstValue::Bool(x != y),
    })
}

/// Reinterpret the bits of `v` (held as `from`) as dtype `to` of the same size.
pub fn bitcast_const(v: ConstValue, from: DType, to: DType) -> Result<ConstValue> {
    if from.itemsize() != to.itemsize() {
        bail!(
            InvalidArgument,
            "bitcast: {from} and {to} have different sizes ({} and {} bytes)",
            from.itemsize(),
            to.itemsize()
        );
    }
    let bits = const_to_bits(v.truncate(from), from.scalar);
    Ok(const_from_bits(bits, to.scalar))
}

/// The little-endian storage bits of a constant held in scalar kind `s`.
pub fn const_to_bits(v: ConstValue, s: Scalar) -> u64 {
    match s {
        Scalar::Float16 => half::f16::from_f64(v.as_f64()).to_bits() as u64,
        Scalar::BFloat16 => half::bf16::from_f64(v.as_f64()).to_bits() as u64,
        Scalar::Float32 => (v.as_f64() as f32).to_bits() as u64,
        Scalar::Float64 => v.as_f64().to_bits(),
        Scalar::Bool => v.as_bool() as u64,
        _ => {
            let bits = 8 * s.itemsize() as u32;
            let m = v.as_i128() as u128;
            (if bits == 64 {
                m
            } else {
                m & ((1u128 << bits) - 1)
            }) as u64
        }
    }
}

/// A constant of scalar kind `s` from its little-endian storage bits.
pub fn const_from_bits(bits: u64, s: Scalar) -> ConstValue {
    match s {
        Scalar::Float16 => ConstValue::Float(half::f16::from_bits(bits as u16).to_f64()),
        Scalar::BFloat16 => ConstValue::Float(half::bf16::from_bits(bits as u16).to_f64()),
        Scalar::Float32 => ConstValue::Float(f32::from_bits(bits as u32) as f64),
        Scalar::Float64 => ConstValue::Float(f64::from_bits(bits)),
        Scalar::Bool => ConstValue::Bool(bits & 1 != 0),
        _ => ConstValue::Int(crate::dtype::wrap_int(bits as i128, s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;
    use ConstValue::*;

    fn alu(op: impl Into<Op>, dt: DType, s: &[ConstValue]) -> ConstValue {
        exec_alu(op.into(), dt, s).unwrap()
    }

    #[test]
    fn python_alu_semantics() {
        assert_eq!(
            alu(UnaryOps::LOG2, dtypes::float32, &[Float(0.0)]),
            Float(f64::NEG_INFINITY)
        );
        assert!(
            matches!(alu(UnaryOps::LOG2, dtypes::float32, &[Float(-1.0)]), Float(v) if v.is_nan())
        );
        assert!(
            matches!(alu(UnaryOps::SIN, dtypes::float32, &[Float(f64::INFINITY)]), Float(v) if v.is_nan())
        );
        assert_eq!(
            alu(UnaryOps::RECIP, dtypes::float32, &[Float(-0.0)]),
            Float(f64::NEG_INFINITY)
        );
        assert_eq!(
            alu(UnaryOps::EXP2, dtypes::float32, &[Float(200.0)]),
            Float(f64::INFINITY)
        );
        assert_eq!(
            alu(UnaryOps::EXP2, dtypes::float16, &[Float(20.0)]),
            Float(f64::INFINITY)
        );
        assert_eq!(alu(UnaryOps::NEG, dtypes::bool, &[Bool(true)]), Bool(false));
        // C-like integer division and modulo.
        assert_eq!(
            alu(BinaryOps::IDIV, dtypes::int32, &[Int(-7), Int(2)]),
            Int(-3)
        );
        assert_eq!(
            alu(BinaryOps::MOD, dtypes::int32, &[Int(-7), Int(2)]),
            Int(-1)
        );
        assert_eq!(
            alu(BinaryOps::MOD, dtypes::int32, &[Int(7), Int(-2)]),
            Int(1)
        );
        assert_eq!(
            alu(BinaryOps::ADD, dtypes::uint8, &[Int(250), Int(10)]),
            Int(4)
        );
        assert_eq!(
            alu(BinaryOps::CMPLT, dtypes::bool, &[Int(1), Int(2)]),
            Bool(true)
        );
        assert_eq!(
            alu(
                TernaryOps::WHERE,
                dtypes::int32,
                &[Bool(false), Int(1), Int(2)]
            ),
            Int(2)
        );
        assert!(exec_alu(Op::Unary(UnaryOps::CAST), dtypes::int32, &[Int(1)]).is_err());
        assert!(exec_alu(Op::Binary(BinaryOps::ADD), dtypes::int32, &[Int(1)]).is_err());
    }

    #[test]
    fn bitcasts() {
        assert_eq!(
            bitcast_const(Float(1.0), dtypes::float32, dtypes::int32).unwrap(),
            Int(0x3f800000)
        );
        assert_eq!(
            bitcast_const(Int(-1), dtypes::int16, dtypes::uint16).unwrap(),
            Int(65535)
        );
        assert!(bitcast_const(Int(1), dtypes::int16, dtypes::int32).is_err());
    }
}
