//! The base language's pieces that [`CStyle`]'s default methods call and that dialects reuse
//! when they override one (tinygrad 0.9.1 `CStyleLanguage.render_kernel` parameters,
//! `code_for_op`, `render_const`), and C integer literals.
//!
//! Not guaranteed: the C they return is checked only by the compilers that read it.

use super::{CStyle, Needs, Param};
use crate::dtype::{ConstValue, DType, Scalar};
use crate::helpers::float_repr;
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::renderer::text::cat;
use crate::{bail, Result};

/// The parameter declarations of the base language (plus its extra args).
pub fn base_params<L: CStyle + ?Sized>(
    l: &L,
    params: &[Param],
    needs: &mut Needs,
) -> Result<Vec<String>> {
    let lang = l.lang();
    let mut out = vec![];
    for p in params {
        if p.is_buffer {
            let c = if p.mutable { "" } else { "const " };
            let t = l.render_buf_dtype(p.dtype, needs)?;
            out.push(cat!(
                c,
                lang.buffer_prefix,
                t,
                "*",
                lang.buffer_suffix,
                " ",
                p.name
            ));
        } else {
            out.push(cat!(lang.arg_int_prefix, " ", p.name));
        }
    }
    out.extend(lang.extra_args.iter().cloned());
    Ok(out)
}

/// The concatenation of `parts`, allocated once at its final size (the renderers build an
/// expression per ALU node: `format!` costs several times more per piece).
pub fn cat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.push_str(p);
    }
    out
}

/// tinygrad's base `code_for_op` table (plus shifts and MULACC).
pub fn base_code_for_op(op: Op, a: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
    let _ = needs;
    let arg = |i: usize| a.get(i).copied().unwrap_or("");
    let (x, y, z) = (arg(0), arg(1), arg(2));
    let bin = |sym: &str| cat(&["(", x, sym, y, ")"]);
    Ok(match op {
        Op::Unary(UnaryOps::NEG) if d.is_bool() => cat(&["(!", x, ")"]),
        Op::Unary(UnaryOps::NEG) => cat(&["(-", x, ")"]),
        Op::Unary(UnaryOps::SQRT) => cat(&["sqrt(", x, ")"]),
        Op::Unary(UnaryOps::RECIP) => cat(&["(1/", x, ")"]),
        Op::Unary(UnaryOps::EXP2) => cat(&["exp2(", x, ")"]),
        Op::Unary(UnaryOps::LOG2) => cat(&["log2(", x, ")"]),
        Op::Unary(UnaryOps::SIN) => cat(&["sin(", x, ")"]),
        Op::Binary(BinaryOps::ADD) => bin("+"),
        Op::Binary(BinaryOps::MAX) => cat(&["max(", x, ",", y, ")"]),
        Op::Binary(BinaryOps::IDIV) => bin("/"),
        Op::Binary(BinaryOps::MUL) => bin("*"),
        Op::Binary(BinaryOps::MOD) => bin("%"),
        Op::Binary(BinaryOps::CMPLT) => bin("<"),
        Op::Binary(BinaryOps::CMPNE) => bin("!="),
        Op::Binary(BinaryOps::XOR) => bin("^"),
        Op::Binary(BinaryOps::SHR) => bin(">>"),
        Op::Binary(BinaryOps::SHL) => bin("<<"),
        Op::Ternary(TernaryOps::WHERE) => cat(&["(", x, "?", y, ":", z, ")"]),
        Op::Ternary(TernaryOps::MULACC) => cat(&["((", x, "*", y, ")+", z, ")"]),
        other => bail!(Codegen, "no C code for {}", other.name()),
    })
}

/// tinygrad's base `render_const`: NAN/INFINITY, `1.0f` floats, 0/1 bools, plain ints; other dtypes
/// (and vectors) through a cast.
pub fn base_render_const<L: CStyle + ?Sized>(
    l: &L,
    v: ConstValue,
    d: DType,
    needs: &mut Needs,
) -> Result<String> {
    let s = d.scalar;
    let val = match v {
        ConstValue::Float(f) if f.is_nan() => {
            needs.math = true;
            "NAN".to_string()
        }
        ConstValue::Float(f) if f.is_infinite() => {
            needs.math = true;
            cat!(if f < 0.0 { "-" } else { "" }, "INFINITY")
        }
        _ if s == Scalar::Bool => (if v.as_bool() { "1" } else { "0" }).to_string(),
        ConstValue::Float(f) if s == Scalar::Float32 => cat!(float_repr(f), "f"),
        ConstValue::Float(f) => float_repr(f),
        _ if s.is_float() => float_repr(v.as_f64()),
        _ => int_literal(v.as_i128(), s),
    };
    let plain = [Scalar::Float32, Scalar::Int32, Scalar::Bool].contains(&s);
    if d.count > 1 || !plain {
        let lanes = vec![val.as_str(); d.count as usize];
        return l.render_cast(&lanes, d, needs);
    }
    Ok(val)
}

/// An integer literal that C reads as the intended value without warnings.
pub fn int_literal(i: i128, s: Scalar) -> String {
    match s {
        Scalar::Int32 if i == i32::MIN as i128 => "(-2147483647-1)".into(),
        Scalar::Int64 if i == i64::MIN as i128 => "(-9223372036854775807L-1)".into(),
        Scalar::Int64 => cat!(i, "L"),
        Scalar::Uint32 => cat!(i, "u"),
        Scalar::Uint64 => cat!(i, "ul"),
        _ => i.to_string(),
    }
}
