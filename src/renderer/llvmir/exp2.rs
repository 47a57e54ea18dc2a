//! EXP2 of float32, bfloat16 (held as float) and half on the CPU flavour, inline: the algorithm of
//! [`crate::renderer::exp2`] as IR on the value's own type (scalar or vector), so that the SLP
//! vectorizer of the light pipeline (or LLVM's O2/O3) turns an upcast kernel's lanes into vector
//! instructions, where `llvm.exp2` would lower to one libm `exp2f` call per lane. The double
//! intermediate is `<N x double>` for `<N x float>`. Half is widened to double and rounded back to
//! half once (the interpreter's rounding of an f64 result). The Horner steps are `llvm.fma`
//! (the C helper's `__builtin_fma`: one rounding, the same bits on both devices).

use crate::dtype::{ConstValue, DType, Scalar};
use crate::renderer::exp2::{q, BIAS, HI, LO, ROUNDER};
use crate::Result;

use super::types::{literal, mangle, reg};
use super::walk::Walk;

impl Walk<'_> {
    /// `name = exp2(x)` for `x` of `d` (a float32, bfloat16 or half scalar or vector).
    pub(super) fn inline_exp2(&mut self, d: DType, x: &str, name: &str) -> Result<String> {
        let t = reg(d);
        let dd = DType::new(Scalar::Float64).vec(d.count);
        let di = DType::new(Scalar::Int64).vec(d.count);
        let b = DType::new(Scalar::Bool).vec(d.count);
        let (td, ti, tb) = (reg(dd), reg(di), reg(b));
        let f = |v: f64| literal(ConstValue::Float(v), dd);
        let i = |v: i64| literal(ConstValue::Int(v as i128), di);
        let mut lines = vec![
            format!("  {name}.d = fpext {t} {x} to {td}"),
            format!("  {name}.lo = fcmp olt {td} {name}.d, {}", f(LO)),
            format!(
                "  {name}.c0 = select {tb} {name}.lo, {td} {}, {td} {name}.d",
                f(LO)
            ),
            format!("  {name}.hi = fcmp ogt {td} {name}.c0, {}", f(HI)),
            format!(
                "  {name}.c = select {tb} {name}.hi, {td} {}, {td} {name}.c0",
                f(HI)
            ),
            format!("  {name}.t = fadd {td} {name}.c, {}", f(ROUNDER)),
            format!("  {name}.n = fsub {td} {name}.t, {}", f(ROUNDER)),
            format!("  {name}.r = fsub {td} {name}.c, {name}.n"),
            format!("  {name}.b = bitcast {td} {name}.t to {ti}"),
            format!("  {name}.e = add {ti} {name}.b, {}", i(BIAS)),
            format!("  {name}.sb = shl {ti} {name}.e, {}", i(52)),
            format!("  {name}.s = bitcast {ti} {name}.sb to {td}"),
        ];
        let fma = format!("@llvm.fma.{}", mangle(dd)?);
        self.decls
            .insert(format!("declare {td} {fma}({td}, {td}, {td})"));
        let coef = q();
        let mut q = f(coef[0]);
        for (k, c) in coef[1..].iter().enumerate() {
            lines.push(format!(
                "  {name}.q{k} = call {td} {fma}({td} {q}, {td} {name}.r, {td} {})",
                f(*c)
            ));
            q = format!("{name}.q{k}");
        }
        lines.extend([
            format!(
                "  {name}.p = call {td} {fma}({td} {name}.r, {td} {q}, {td} {})",
                f(1.0)
            ),
            format!("  {name}.v = fmul {td} {name}.p, {name}.s"),
            format!("  {name}.f = fptrunc {td} {name}.v to {t}"),
            format!("  {name}.nan = fcmp uno {t} {x}, {x}"),
            format!("  {name} = select {tb} {name}.nan, {t} {x}, {t} {name}.f"),
        ]);
        for l in lines {
            self.emit(l);
        }
        Ok(name.to_string())
    }
}
