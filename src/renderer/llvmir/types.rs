//! How dtypes, constants and conversions are spelled in LLVM IR.
//!
//! Registers: bool is `i1`, ints are `iN` (signedness lives in the instructions), half is `half`,
//! bfloat16 is held as `float` (like the CLANG renderer; converted at loads and stores), float and
//! double as themselves; vectors are `<N x T>`. Memory: bool is `i8`, bfloat16 is `i16`.
//!
//! Not guaranteed: image dtypes do not exist here; a dtype LLVM cannot hold is an error.

use std::borrow::Cow;

use crate::dtype::{ConstValue, DType, Scalar};
use crate::{bail, Result};

/// The register type of one scalar.
pub fn scalar_reg(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "i1",
        Scalar::Int8 | Scalar::Uint8 => "i8",
        Scalar::Int16 | Scalar::Uint16 => "i16",
        Scalar::Int32 | Scalar::Uint32 => "i32",
        Scalar::Int64 | Scalar::Uint64 => "i64",
        Scalar::Float16 => "half",
        Scalar::BFloat16 | Scalar::Float32 => "float",
        Scalar::Float64 => "double",
    }
}

/// The in-memory type of one scalar (bool is a byte, bfloat16 its 16 raw bits).
pub fn scalar_mem(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "i8",
        Scalar::BFloat16 => "i16",
        s => scalar_reg(s),
    }
}

fn vectorize(scalar: &'static str, count: u16) -> Cow<'static, str> {
    if count <= 1 {
        return Cow::Borrowed(scalar);
    }
    match common_vector(scalar, count) {
        Some(t) => Cow::Borrowed(t),
        None => Cow::Owned(format!("<{count} x {scalar}>")),
    }
}

/// `<count x scalar>` as static text for the vector types kernels use most (no allocation).
fn common_vector(scalar: &str, count: u16) -> Option<&'static str> {
    macro_rules! table {
        ($($s:literal),*) => {
            match (scalar, count) {
                $(
                    ($s, 2) => Some(concat!("<2 x ", $s, ">")),
                    ($s, 4) => Some(concat!("<4 x ", $s, ">")),
                    ($s, 8) => Some(concat!("<8 x ", $s, ">")),
                    ($s, 16) => Some(concat!("<16 x ", $s, ">")),
                )*
                _ => None,
            }
        };
    }
    table!("float", "half", "double", "i1", "i8", "i16", "i32", "i64")
}

/// The register type of a value of `d` (pointer forms use their element); a scalar's is static
/// text (no allocation).
pub fn reg(d: DType) -> Cow<'static, str> {
    vectorize(scalar_reg(d.scalar), d.count)
}

/// The in-memory type of `d`.
pub fn mem(d: DType) -> Cow<'static, str> {
    vectorize(scalar_mem(d.scalar), d.count)
}

/// A pointer type to `elem` in `addrspace`: opaque (`ptr`, `ptr addrspace(1)`) or typed
/// (`float*`, `float addrspace(1)*`).
pub fn ptr_type(opaque: bool, elem: &str, addrspace: u32) -> Cow<'static, str> {
    match (opaque, addrspace) {
        (true, 0) => Cow::Borrowed("ptr"),
        (true, 1) => Cow::Borrowed("ptr addrspace(1)"),
        (true, 3) => Cow::Borrowed("ptr addrspace(3)"),
        (true, a) => Cow::Owned(format!("ptr addrspace({a})")),
        (false, 0) => Cow::Owned(format!("{elem}*")),
        (false, a) => Cow::Owned(format!("{elem} addrspace({a})*")),
    }
}

/// The type suffix LLVM mangles intrinsic names with (`f32`, `v4f32`, `f16`).
pub fn mangle(d: DType) -> Result<String> {
    let s = match d.scalar {
        Scalar::Float16 => "f16",
        Scalar::BFloat16 | Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        s => bail!(Codegen, "LLVM IR: no float intrinsic for {}", s.long_name()),
    };
    Ok(if d.count > 1 {
        format!("v{}{s}", d.count)
    } else {
        s.to_string()
    })
}

/// A float literal LLVM parses exactly: decimal when finite (always with a `.`), else the 64-bit
/// hex form LLVM uses for every float type.
fn float_literal(v: f64, s: Scalar) -> String {
    let v = match s {
        Scalar::Float16 => half::f16::from_f64(v).to_f64(),
        Scalar::Float64 => v,
        // float and bfloat16 registers are float
        _ => v as f32 as f64,
    };
    if !v.is_finite() {
        return format!("0x{:016X}", v.to_bits());
    }
    let text = format!("{v:?}");
    match (text.contains('.'), text.find('e')) {
        (true, _) => text,
        (false, Some(e)) => format!("{}.0{}", &text[..e], &text[e..]),
        (false, None) => format!("{text}.0"),
    }
}

/// The literal of constant `v` as a scalar of `s` (ints wrapped to their width, two's complement).
pub fn scalar_literal(v: ConstValue, s: Scalar) -> String {
    match s {
        Scalar::Bool => if v.as_bool() { "true" } else { "false" }.to_string(),
        s if s.is_float() => float_literal(v.as_f64(), s),
        s => {
            let bits = 8 * s.itemsize() as u32;
            let wrapped = crate::dtype::wrap_int(v.as_i128(), s);
            // as a signed value of the width (LLVM reads `i32 -1` and `i32 4294967295` alike)
            let signed = if bits < 128 && wrapped >= 1i128 << (bits - 1) {
                wrapped - (1i128 << bits)
            } else {
                wrapped
            };
            signed.to_string()
        }
    }
}

/// The literal of `v` as a value of `d` (a splat for vectors).
pub fn literal(v: ConstValue, d: DType) -> String {
    let one = scalar_literal(v, d.scalar);
    if d.count <= 1 {
        return one;
    }
    let t = scalar_reg(d.scalar);
    // `<t one, t one, ...>`, written into one string of the final length
    let lane = t.len() + 1 + one.len();
    let mut out = String::with_capacity(2 + d.count as usize * (lane + 2));
    out.push('<');
    for i in 0..d.count {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(t);
        out.push(' ');
        out.push_str(&one);
    }
    out.push('>');
    out
}

/// The conversion instruction (without operands) from register `from` to `to`, or `None` when the
/// register value is already right (same LLVM type, or signed/unsigned of one width, or bfloat16
/// to and from float). Casts to bool are comparisons and are not handled here.
pub fn cast_op(from: Scalar, to: Scalar) -> Result<Option<&'static str>> {
    if scalar_reg(from) == scalar_reg(to) {
        return Ok(None);
    }
    let (fb, tb) = (reg_bits(from), reg_bits(to));
    Ok(Some(match (from.is_float(), to.is_float()) {
        (true, true) if tb > fb => "fpext",
        (true, true) => "fptrunc",
        (true, false) if to == Scalar::Bool => bail!(Internal, "cast to bool is a compare"),
        (true, false) if to.is_unsigned() => "fptoui",
        (true, false) => "fptosi",
        (false, true) if from.is_unsigned() || from == Scalar::Bool => "uitofp",
        (false, true) => "sitofp",
        (false, false) if tb < fb => "trunc",
        (false, false) if from.is_unsigned() || from == Scalar::Bool => "zext",
        (false, false) => "sext",
    }))
}

/// Bits of a scalar's register type.
pub fn reg_bits(s: Scalar) -> u32 {
    match s {
        Scalar::Bool => 1,
        Scalar::BFloat16 => 32,
        s => 8 * s.itemsize() as u32,
    }
}

/// Append `lines`, each ended by a newline, to the body `out`.
fn push_lines<const N: usize>(out: &mut String, lines: [String; N]) {
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
}

/// The register form of a bfloat16 load: 16 raw bits `x` (of type `<n x> i16`) widened to float by
/// a shift, defined as `name` by the lines appended to the body `lines`; returns `name`.
pub fn bf16_to_float(x: &str, name: &str, count: u16, lines: &mut String) -> String {
    let (i16t, i32t, f32t) = (
        vectorize("i16", count),
        vectorize("i32", count),
        vectorize("float", count),
    );
    let sixteen = literal(ConstValue::Int(16), DType::new(Scalar::Int32).vec(count));
    push_lines(
        lines,
        [
            format!("  {name}.w = zext {i16t} {x} to {i32t}"),
            format!("  {name}.s = shl {i32t} {name}.w, {sixteen}"),
            format!("  {name} = bitcast {i32t} {name}.s to {f32t}"),
        ],
    );
    name.to_string()
}

/// The 16 raw bits of the float `x` rounded to bfloat16 (to nearest, ties to even; NaNs stay
/// quiet NaNs), as `<n x> i16` named `name`.
pub fn float_to_bf16(x: &str, name: &str, count: u16, lines: &mut String) -> String {
    let (i16t, i32t, f32t) = (
        vectorize("i16", count),
        vectorize("i32", count),
        vectorize("float", count),
    );
    let c = |v: i64| {
        literal(
            ConstValue::Int(v as i128),
            DType::new(Scalar::Int32).vec(count),
        )
    };
    push_lines(
        lines,
        [
            format!("  {name}.u = bitcast {f32t} {x} to {i32t}"),
            format!("  {name}.hi = lshr {i32t} {name}.u, {}", c(16)),
            format!("  {name}.odd = and {i32t} {name}.hi, {}", c(1)),
            format!("  {name}.bias = add {i32t} {name}.odd, {}", c(0x7fff)),
            format!("  {name}.r = add {i32t} {name}.u, {name}.bias"),
            format!("  {name}.rs = lshr {i32t} {name}.r, {}", c(16)),
            format!("  {name}.q = or {i32t} {name}.hi, {}", c(0x40)),
            format!("  {name}.nan = fcmp uno {f32t} {x}, {x}"),
            format!(
                "  {name}.sel = select {} {name}.nan, {i32t} {name}.q, {i32t} {name}.rs",
                vectorize("i1", count)
            ),
            format!("  {name} = trunc {i32t} {name}.sel to {i16t}"),
        ],
    );
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtypes;

    #[test]
    fn literals() {
        assert_eq!(
            scalar_literal(ConstValue::Float(1.0), Scalar::Float32),
            "1.0"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(-0.0), Scalar::Float32),
            "-0.0"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(0.1), Scalar::Float32),
            "0.10000000149011612"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(1e20), Scalar::Float64),
            "1.0e20"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(1e-7), Scalar::Float64),
            "1.0e-7"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(f64::INFINITY), Scalar::Float32),
            "0x7FF0000000000000"
        );
        assert_eq!(
            scalar_literal(ConstValue::Float(f64::NEG_INFINITY), Scalar::Float16),
            "0xFFF0000000000000"
        );
        assert!(scalar_literal(ConstValue::Float(f64::NAN), Scalar::Float64).starts_with("0x7FF8"));
        assert_eq!(
            scalar_literal(ConstValue::Float(0.1), Scalar::Float16),
            "0.0999755859375"
        );
        assert_eq!(scalar_literal(ConstValue::Int(-1), Scalar::Int32), "-1");
        assert_eq!(
            scalar_literal(ConstValue::Int(4294967295), Scalar::Uint32),
            "-1"
        );
        assert_eq!(scalar_literal(ConstValue::Int(200), Scalar::Uint8), "-56");
        assert_eq!(scalar_literal(ConstValue::Int(7), Scalar::Uint64), "7");
        assert_eq!(scalar_literal(ConstValue::Bool(true), Scalar::Bool), "true");
        assert_eq!(
            literal(ConstValue::Float(2.0), dtypes::float32.vec(2)),
            "<float 2.0, float 2.0>"
        );
    }

    #[test]
    fn types_and_casts() {
        assert_eq!(reg(dtypes::bool), "i1");
        assert_eq!(mem(dtypes::bool), "i8");
        assert_eq!(reg(dtypes::bfloat16), "float");
        assert_eq!(mem(dtypes::bfloat16.vec(4)), "<4 x i16>");
        assert_eq!(reg(dtypes::half.vec(4)), "<4 x half>");
        assert_eq!(reg(dtypes::float32.vec(3)), "<3 x float>");
        assert_eq!(mem(dtypes::bool.vec(16)), "<16 x i8>");
        assert_eq!(reg(dtypes::int64.vec(8)), "<8 x i64>");
        assert_eq!(ptr_type(true, "float", 3), "ptr addrspace(3)");
        assert_eq!(ptr_type(true, "float", 5), "ptr addrspace(5)");
        assert_eq!(ptr_type(false, "<4 x half>", 1), "<4 x half> addrspace(1)*");
        assert_eq!(mangle(dtypes::float32.vec(4)).unwrap(), "v4f32");
        assert!(mangle(dtypes::int32).is_err());
        use Scalar::*;
        assert_eq!(cast_op(Int32, Uint32).unwrap(), None);
        assert_eq!(cast_op(BFloat16, Float32).unwrap(), None);
        assert_eq!(cast_op(Int8, Int32).unwrap(), Some("sext"));
        assert_eq!(cast_op(Uint8, Int32).unwrap(), Some("zext"));
        assert_eq!(cast_op(Bool, Int32).unwrap(), Some("zext"));
        assert_eq!(cast_op(Int64, Int16).unwrap(), Some("trunc"));
        assert_eq!(cast_op(Float16, Float64).unwrap(), Some("fpext"));
        assert_eq!(cast_op(BFloat16, Float16).unwrap(), Some("fptrunc"));
        assert_eq!(cast_op(Float32, Uint8).unwrap(), Some("fptoui"));
        assert_eq!(cast_op(Float32, Int8).unwrap(), Some("fptosi"));
        assert_eq!(cast_op(Uint32, Float32).unwrap(), Some("uitofp"));
        assert_eq!(cast_op(Int32, BFloat16).unwrap(), Some("sitofp"));
        assert!(cast_op(Float32, Bool).is_err());
    }
}
