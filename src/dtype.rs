//! Data types of tinygrad 0.9.1: the thirteen scalar types, vector and pointer forms, the
//! promotion lattice (`least_upper_dtype`), the accumulator rule (`sum_acc_dtype`), and
//! [`ConstValue`], a constant coerced to a dtype the way tinygrad's `as_const` and `truncate` do.
//!
//! Owns: dtype records and their facts (priority, itemsize, names, limits) and constant coercion.
//! Does not own: how a backend spells a type (the renderers do that) or image dtypes (OpenCL
//! `IMAGE` mode is not part of rawgrad).
//!
//! Not guaranteed: bfloat16 constants are not rounded (tinygrad does not truncate them either).

#![forbid(unsafe_code)]

use std::fmt;
use std::hash::{Hash, Hasher};

/// The scalar kinds, in tinygrad's priority order (the declaration order is the priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    Bool,
    Int8,
    Uint8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    BFloat16,
    Float32,
    Float64,
}

impl Scalar {
    /// Every scalar kind, in priority order.
    pub const ALL: [Scalar; 13] = [
        Scalar::Bool,
        Scalar::Int8,
        Scalar::Uint8,
        Scalar::Int16,
        Scalar::Uint16,
        Scalar::Int32,
        Scalar::Uint32,
        Scalar::Int64,
        Scalar::Uint64,
        Scalar::Float16,
        Scalar::BFloat16,
        Scalar::Float32,
        Scalar::Float64,
    ];

    /// tinygrad's `priority` (0 for bool up to 12 for float64).
    pub fn priority(self) -> u8 {
        self as u8
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        match self {
            Scalar::Bool | Scalar::Int8 | Scalar::Uint8 => 1,
            Scalar::Int16 | Scalar::Uint16 | Scalar::Float16 | Scalar::BFloat16 => 2,
            Scalar::Int32 | Scalar::Uint32 | Scalar::Float32 => 4,
            Scalar::Int64 | Scalar::Uint64 | Scalar::Float64 => 8,
        }
    }

    /// tinygrad's canonical name (`dtypes.float32.name == "float"`).
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::Int8 => "char",
            Scalar::Uint8 => "uchar",
            Scalar::Int16 => "short",
            Scalar::Uint16 => "ushort",
            Scalar::Int32 => "int",
            Scalar::Uint32 => "uint",
            Scalar::Int64 => "long",
            Scalar::Uint64 => "ulong",
            Scalar::Float16 => "half",
            Scalar::BFloat16 => "__bf16",
            Scalar::Float32 => "float",
            Scalar::Float64 => "double",
        }
    }

    /// The `dtypes.<attr>` name a user types (`float32`, `int8`, ...).
    pub fn long_name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::Int8 => "int8",
            Scalar::Uint8 => "uint8",
            Scalar::Int16 => "int16",
            Scalar::Uint16 => "uint16",
            Scalar::Int32 => "int32",
            Scalar::Uint32 => "uint32",
            Scalar::Int64 => "int64",
            Scalar::Uint64 => "uint64",
            Scalar::Float16 => "float16",
            Scalar::BFloat16 => "bfloat16",
            Scalar::Float32 => "float32",
            Scalar::Float64 => "float64",
        }
    }

    /// Python struct format character (None for bfloat16, as in tinygrad).
    pub fn fmt(self) -> Option<char> {
        Some(match self {
            Scalar::Bool => '?',
            Scalar::Int8 => 'b',
            Scalar::Uint8 => 'B',
            Scalar::Int16 => 'h',
            Scalar::Uint16 => 'H',
            Scalar::Int32 => 'i',
            Scalar::Uint32 => 'I',
            Scalar::Int64 => 'l',
            Scalar::Uint64 => 'L',
            Scalar::Float16 => 'e',
            Scalar::BFloat16 => return None,
            Scalar::Float32 => 'f',
            Scalar::Float64 => 'd',
        })
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Scalar::Float16 | Scalar::BFloat16 | Scalar::Float32 | Scalar::Float64
        )
    }

    /// Signed or unsigned integer (not bool), as `dtypes.is_int`.
    pub fn is_int(self) -> bool {
        !self.is_float() && self != Scalar::Bool
    }

    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            Scalar::Uint8 | Scalar::Uint16 | Scalar::Uint32 | Scalar::Uint64
        )
    }

    /// Parse a tinygrad dtype name or alias (`float32`, `float`, `half`, `int`, `ulong`, ...).
    pub fn from_name(name: &str) -> Option<Scalar> {
        let s = match name {
            "bool" => Scalar::Bool,
            "int8" | "char" => Scalar::Int8,
            "uint8" | "uchar" => Scalar::Uint8,
            "int16" | "short" => Scalar::Int16,
            "uint16" | "ushort" => Scalar::Uint16,
            "int32" | "int" => Scalar::Int32,
            "uint32" | "uint" => Scalar::Uint32,
            "int64" | "long" => Scalar::Int64,
            "uint64" | "ulong" => Scalar::Uint64,
            "float16" | "half" => Scalar::Float16,
            "bfloat16" | "__bf16" => Scalar::BFloat16,
            "float32" | "float" => Scalar::Float32,
            "float64" | "double" => Scalar::Float64,
            _ => return None,
        };
        Some(s)
    }

    /// The promotion lattice's direct parents (`promo_lattice` of 0.9.1).
    fn parents(self) -> &'static [Scalar] {
        use Scalar::*;
        match self {
            Bool => &[Int8, Uint8],
            Int8 => &[Int16],
            Int16 => &[Int32],
            Int32 => &[Int64],
            Int64 => &[Float16, BFloat16],
            Uint8 => &[Int16, Uint16],
            Uint16 => &[Int32, Uint32],
            Uint32 => &[Int64, Uint64],
            Uint64 => &[Float16, BFloat16],
            Float16 => &[Float32],
            BFloat16 => &[Float32],
            Float32 => &[Float64],
            Float64 => &[],
        }
    }

    /// This type and every type it promotes to (tinygrad's `_get_recursive_parents`).
    fn recursive_parents(self) -> Vec<Scalar> {
        let mut out = vec![self];
        let mut i = 0;
        while i < out.len() {
            for &p in out[i].parents() {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            i += 1;
        }
        out
    }
}

/// A dtype: a scalar kind, a vector width (`count`, 1 for scalars) and a pointer flag
/// (tinygrad's `PtrDType`, used by DEFINE_GLOBAL / DEFINE_LOCAL).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DType {
    pub scalar: Scalar,
    pub count: u16,
    pub ptr: bool,
}

impl DType {
    pub const fn new(scalar: Scalar) -> DType {
        DType {
            scalar,
            count: 1,
            ptr: false,
        }
    }

    /// Bytes of one element (of the whole vector for vector dtypes).
    pub fn itemsize(self) -> usize {
        self.scalar.itemsize() * self.count as usize
    }

    pub fn priority(self) -> u8 {
        self.scalar.priority()
    }

    /// tinygrad's name: `float`, `float4`, `half`, ...
    pub fn name(self) -> String {
        if self.count > 1 {
            format!("{}{}", self.scalar.name(), self.count)
        } else {
            self.scalar.name().to_string()
        }
    }

    /// The vector dtype with `n` lanes of this scalar.
    pub fn vec(self, n: u16) -> DType {
        DType {
            scalar: self.scalar,
            count: n,
            ptr: false,
        }
    }

    /// Strip vector and pointer forms.
    pub fn scalar(self) -> DType {
        DType::new(self.scalar)
    }

    /// The pointer form (`PtrDType`).
    pub fn ptr(self) -> DType {
        DType { ptr: true, ..self }
    }

    /// The pointee of a pointer dtype.
    pub fn base(self) -> DType {
        DType { ptr: false, ..self }
    }

    pub fn is_float(self) -> bool {
        self.scalar.is_float()
    }
    pub fn is_int(self) -> bool {
        self.scalar.is_int()
    }
    pub fn is_unsigned(self) -> bool {
        self.scalar.is_unsigned()
    }
    pub fn is_bool(self) -> bool {
        self.scalar == Scalar::Bool
    }

    /// The smallest representable value (`dtypes.min`): -inf for floats.
    pub fn min(self) -> ConstValue {
        match self.scalar {
            Scalar::Bool => ConstValue::Bool(false),
            s if s.is_float() => ConstValue::Float(f64::NEG_INFINITY),
            s if s.is_unsigned() => ConstValue::Int(0),
            s => ConstValue::Int(-(1i128 << (8 * s.itemsize() - 1))),
        }
    }

    /// The largest representable value (`dtypes.max`): inf for floats.
    pub fn max(self) -> ConstValue {
        match self.scalar {
            Scalar::Bool => ConstValue::Bool(true),
            s if s.is_float() => ConstValue::Float(f64::INFINITY),
            s if s.is_unsigned() => ConstValue::Int((1i128 << (8 * s.itemsize())) - 1),
            s => ConstValue::Int((1i128 << (8 * s.itemsize() - 1)) - 1),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ptr {
            write!(f, "ptr.dtypes.{}", self.name())
        } else {
            write!(f, "dtypes.{}", self.name())
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `dtypes.*` constants, spelled as tinygrad spells them.
#[allow(non_upper_case_globals)]
pub mod dtypes {
    use super::{DType, Scalar};
    pub const bool: DType = DType::new(Scalar::Bool);
    pub const int8: DType = DType::new(Scalar::Int8);
    pub const uint8: DType = DType::new(Scalar::Uint8);
    pub const int16: DType = DType::new(Scalar::Int16);
    pub const uint16: DType = DType::new(Scalar::Uint16);
    pub const int32: DType = DType::new(Scalar::Int32);
    pub const uint32: DType = DType::new(Scalar::Uint32);
    pub const int64: DType = DType::new(Scalar::Int64);
    pub const uint64: DType = DType::new(Scalar::Uint64);
    pub const float16: DType = DType::new(Scalar::Float16);
    pub const bfloat16: DType = DType::new(Scalar::BFloat16);
    pub const float32: DType = DType::new(Scalar::Float32);
    pub const float64: DType = DType::new(Scalar::Float64);
    pub const half: DType = float16;
    pub const float: DType = float32;
    pub const double: DType = float64;
    pub const int: DType = int32;
    pub const long: DType = int64;
    /// tinygrad's `dtypes.default_float` (float32; `DEFAULT_FLOAT` is not read).
    pub const default_float: DType = float32;
    /// tinygrad's `dtypes.default_int`.
    pub const default_int: DType = int32;
}

/// `least_upper_dtype`: the lowest-priority type every input promotes to.
pub fn least_upper_dtype(ds: &[DType]) -> DType {
    let Some(first) = ds.first() else {
        return dtypes::default_float;
    };
    let mut common = first.scalar.recursive_parents();
    for d in &ds[1..] {
        let p = d.scalar.recursive_parents();
        common.retain(|s| p.contains(s));
    }
    // The lattice always has float64 in common, so `common` is never empty.
    let best = common.into_iter().min().unwrap_or(Scalar::Float64);
    DType::new(best)
}

/// `least_upper_float`: floats stay, everything else promotes together with float32.
pub fn least_upper_float(d: DType) -> DType {
    if d.is_float() {
        d.scalar()
    } else {
        least_upper_dtype(&[d, dtypes::float32])
    }
}

/// `sum_acc_dtype`: unsigned at least uint32, signed and bool at least int32, floats at least float32.
pub fn sum_acc_dtype(d: DType) -> DType {
    if d.is_unsigned() {
        least_upper_dtype(&[d, dtypes::uint32])
    } else if d.is_int() || d.is_bool() {
        least_upper_dtype(&[d, dtypes::int32])
    } else {
        least_upper_dtype(&[d, dtypes::float32])
    }
}

/// A constant: Python's bool / int / float, with integers wide enough for every 64-bit value.
#[derive(Clone, Copy, Debug)]
pub enum ConstValue {
    Bool(bool),
    Int(i128),
    Float(f64),
}

impl PartialEq for ConstValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ConstValue::Bool(a), ConstValue::Bool(b)) => a == b,
            (ConstValue::Int(a), ConstValue::Int(b)) => a == b,
            // Bitwise: NaN equals NaN, -0.0 differs from 0.0 (constants are deduplicated by this).
            (ConstValue::Float(a), ConstValue::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}
impl Eq for ConstValue {}

impl Hash for ConstValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            ConstValue::Bool(b) => (0u8, *b).hash(state),
            ConstValue::Int(i) => (1u8, *i).hash(state),
            ConstValue::Float(f) => (2u8, f.to_bits()).hash(state),
        }
    }
}

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstValue::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            ConstValue::Int(i) => write!(f, "{i}"),
            ConstValue::Float(x) => write!(f, "{}", crate::helpers::float_repr(*x)),
        }
    }
}

impl From<bool> for ConstValue {
    fn from(b: bool) -> Self {
        ConstValue::Bool(b)
    }
}
impl From<i64> for ConstValue {
    fn from(i: i64) -> Self {
        ConstValue::Int(i as i128)
    }
}
macro_rules! const_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for ConstValue {
            fn from(i: $t) -> Self {
                ConstValue::Int(i as i128)
            }
        }
    )*};
}
const_from_int!(i8, i16, i32, isize, u8, u16, u32, u64, usize);
impl From<f64> for ConstValue {
    fn from(x: f64) -> Self {
        ConstValue::Float(x)
    }
}
impl From<f32> for ConstValue {
    fn from(x: f32) -> Self {
        ConstValue::Float(x as f64)
    }
}

impl ConstValue {
    /// Python `float(v)`.
    pub fn as_f64(self) -> f64 {
        match self {
            ConstValue::Bool(b) => b as u8 as f64,
            ConstValue::Int(i) => i as f64,
            ConstValue::Float(f) => f,
        }
    }

    /// Python `int(v)` (truncation toward zero; nan and inf give 0 and the saturated value as
    /// Rust's `as` does, where Python would raise).
    pub fn as_i128(self) -> i128 {
        match self {
            ConstValue::Bool(b) => b as i128,
            ConstValue::Int(i) => i,
            ConstValue::Float(f) => f as i128,
        }
    }

    /// Python `bool(v)`.
    pub fn as_bool(self) -> bool {
        match self {
            ConstValue::Bool(b) => b,
            ConstValue::Int(i) => i != 0,
            ConstValue::Float(f) => f != 0.0,
        }
    }

    /// `dtypes.from_py`: the dtype a bare Python value gets.
    pub fn default_dtype(self) -> DType {
        match self {
            ConstValue::Bool(_) => dtypes::bool,
            ConstValue::Int(_) => dtypes::default_int,
            ConstValue::Float(_) => dtypes::default_float,
        }
    }

    /// `dtypes.as_const`: coerce to the Python class of the dtype (bool, int or float) without
    /// range truncation.
    pub fn as_const(self, dt: DType) -> ConstValue {
        if dt.is_float() {
            ConstValue::Float(self.as_f64())
        } else if dt.is_bool() {
            ConstValue::Bool(self.as_bool())
        } else {
            ConstValue::Int(self.as_i128())
        }
    }

    /// `truncate[dtype]` of 0.9.1: wrap integers like a C cast, round floats through their
    /// storage type (float16 overflows to inf), leave bfloat16 as is.
    pub fn truncate(self, dt: DType) -> ConstValue {
        let v = self.as_const(dt);
        match (dt.scalar, v) {
            (Scalar::Bool, _) => v,
            (Scalar::Float16, ConstValue::Float(f)) => {
                ConstValue::Float(half::f16::from_f64(f).to_f64())
            }
            (Scalar::Float32, ConstValue::Float(f)) => ConstValue::Float(f as f32 as f64),
            (Scalar::Float64 | Scalar::BFloat16, _) => v,
            (s, ConstValue::Int(i)) => ConstValue::Int(wrap_int(i, s)),
            _ => v,
        }
    }

    /// Is this the number zero (of any class)?
    pub fn is_zero(self) -> bool {
        !self.as_bool()
    }
}

/// Wrap an integer into the range of scalar kind `s` the way a C cast does.
pub fn wrap_int(i: i128, s: Scalar) -> i128 {
    let bits = 8 * s.itemsize() as u32;
    let m = i.rem_euclid(1i128 << bits);
    if !s.is_unsigned() && m >= (1i128 << (bits - 1)) {
        m - (1i128 << bits)
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lattice_matches_tinygrad() {
        use dtypes::*;
        assert_eq!(least_upper_dtype(&[int64, uint64]), float16);
        assert_eq!(least_upper_dtype(&[bool, int8]), int8);
        assert_eq!(least_upper_dtype(&[uint8, int8]), int16);
        assert_eq!(least_upper_dtype(&[uint32, int32]), int64);
        assert_eq!(least_upper_dtype(&[float16, bfloat16]), float32);
        assert_eq!(least_upper_dtype(&[int32, float16]), float16);
        assert_eq!(least_upper_dtype(&[float32, float64]), float64);
        assert_eq!(least_upper_dtype(&[bool, bool]), bool);
        assert_eq!(least_upper_float(int32), float32);
        assert_eq!(least_upper_float(float16), float16);
        assert_eq!(sum_acc_dtype(uint8), uint32);
        assert_eq!(sum_acc_dtype(bool), int32);
        assert_eq!(sum_acc_dtype(int64), int64);
        assert_eq!(sum_acc_dtype(float16), float32);
        assert_eq!(sum_acc_dtype(uint64), uint64);
    }

    #[test]
    fn limits_and_truncation() {
        use dtypes::*;
        assert_eq!(int8.min(), ConstValue::Int(-128));
        assert_eq!(uint64.max(), ConstValue::Int(18446744073709551615));
        assert_eq!(ConstValue::Int(300).truncate(uint8), ConstValue::Int(44));
        assert_eq!(
            ConstValue::Int(-1).truncate(uint32),
            ConstValue::Int(4294967295)
        );
        assert_eq!(ConstValue::Int(128).truncate(int8), ConstValue::Int(-128));
        assert_eq!(
            ConstValue::Float(70000.0).truncate(float16),
            ConstValue::Float(f64::INFINITY)
        );
        assert_eq!(
            ConstValue::Float(0.1).truncate(float32),
            ConstValue::Float(0.1f32 as f64)
        );
        assert_eq!(float32.vec(4).name(), "float4");
        assert_eq!(float32.vec(4).itemsize(), 16);
    }
}
