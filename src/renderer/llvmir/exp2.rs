//! EXP2 of float32, bfloat16 (held as float) and half on the CPU flavour: the algorithm of
//! [`crate::renderer::exp2`] as IR on the value's own type, in module-internal helper functions
//! (`@rg_exp2_f32`, `@rg_exp2_f16` and their `_vN` vector forms for N = 2, 4, 8, 16, and for the
//! width of any vector EXP2 UOp). The double intermediate is `<N x double>` for `<N x float>`.
//! Half is widened to double and rounded back to half once (the interpreter's rounding of an f64
//! result). The Horner steps are `llvm.fma` (the C helper's `__builtin_fma`: one rounding, the
//! same bits on both devices).
//!
//! Why helpers and not the expansion inline at each use: a scalar EXP2 is a `call` of the scalar
//! helper whose call site names the vector forms (`vector-function-abi-variant`, LLVM's vector
//! function ABI), so the SLP vectorizer of the light pipeline sees one short call per lane and
//! bundles the lanes of an upcast row reduce (W6's exp-sum: one lane of each of 8 accumulators)
//! into one `call <8 x float> @rg_exp2_f32_v8`, as gcc does with the C helper. With the 27
//! instructions of the expansion inline per lane, SLP's tree from the accumulators ran past its
//! depth limit and rebuilt 16- and 32-lane vectors from other seeds, with shuffles and spills
//! (W6's exp-sum kernel 2x slower than gcc's). The light pipeline then inlines the helpers
//! (`always-inline`, as they are `alwaysinline`) and drops the unused ones (`globaldce`), so the
//! machine code has no calls; with no IR passes (`LLVMOPT=0`) they stay calls, and `default<O2>`
//! inlines them before its SLP runs (the old behaviour).
//!
//! Out of line (rawgrad, issue 10): a vector EXP2 UOp of the vector ALU fold that sits after an
//! inner loop of its loop nest (a reduce's epilogue, run once per inner loop) calls the `noinline`
//! copy `@rg_exp2_f32_vN_outlined` when the kernel has two or more such EXP2s of that type
//! ([`outlined`]): the machine code then has one expansion, not one per call (W12's sigmoid
//! epilogue: 16 `<16 x float>` expansions were most of its 30-35 ms codegen; measurements in
//! `runtime/cpu/llvm.rs`). EXP2s in a loop body stay inline (a call there costs steady time).
//! The body is the same, so are the bits.
//!
//! Not guaranteed: that SLP bundles the calls (its cost model decides; a scalar call that stays
//! scalar is inlined as scalar code, the same bits either way).

use std::cell::RefCell;
use std::rc::Rc;

use crate::codegen::uops::{UOp, UOpMap, UOps};
use crate::dtype::{ConstValue, DType, Scalar};
use crate::ops::{Op, UnaryOps};
use crate::renderer::exp2::{q, BIAS, HI, LO, ROUNDER};
use crate::Result;

use super::types::{literal, mangle, reg};
use super::walk::{emit, Walk};

/// The vector widths whose helpers a scalar EXP2's call site names for the SLP vectorizer.
pub const EXP2_LANES: [u16; 4] = [2, 4, 8, 16];

/// The attributes of the helper functions (attribute group `#1`): pure, inlined by the light
/// pipeline's `always-inline`.
const HELPER_ATTRIBUTES: &str = "attributes #1 = { alwaysinline nounwind readnone willreturn speculatable \"no-builtins\" \"no-trapping-math\"=\"true\" }";

/// How many epilogue vector EXP2s of one type a kernel needs before they call the out-of-line
/// helper ([`outlined`]).
pub const OUTLINE_MIN: usize = 2;

/// The attributes of the out-of-line helpers (attribute group `#4`): pure, never inlined.
const OUTLINED_ATTRIBUTES: &str = "attributes #4 = { noinline nounwind readnone willreturn \"no-builtins\" \"no-trapping-math\"=\"true\" }";

/// The type of `u` when it is an EXP2 that the CPU flavour renders with a helper, of a vector
/// type.
fn vector_exp2(u: &UOp) -> Option<DType> {
    let exp2 = u.op() == UOps::ALU && u.alu_op() == Some(Op::Unary(UnaryOps::EXP2));
    u.dtype()
        .filter(|d| exp2 && d.count > 1 && d.scalar != Scalar::Float64)
}

/// The vector EXP2 UOps of `uops` (a linear list) that call the out-of-line helper: those placed
/// after the end of a loop opened inside their own innermost loop (or after a loop at the top
/// level), when at least [`OUTLINE_MIN`] of them have one type.
pub(super) fn outlined(uops: &[UOp]) -> UOpMap<()> {
    let mut after_inner = false;
    let mut groups: Vec<(DType, Vec<UOp>)> = vec![];
    for u in uops {
        match u.op() {
            UOps::RANGE => after_inner = false,
            UOps::ENDRANGE => after_inner = true,
            _ => {
                let Some(d) = vector_exp2(u).filter(|_| after_inner) else {
                    continue;
                };
                match groups.iter_mut().find(|(g, _)| *g == d) {
                    Some((_, list)) => list.push(u.clone()),
                    None => groups.push((d, vec![u.clone()])),
                }
            }
        }
    }
    let mut out = UOpMap::default();
    for (_, list) in groups.into_iter().filter(|(_, l)| l.len() >= OUTLINE_MIN) {
        for u in list {
            out.insert(u, ());
        }
    }
    out
}

/// The helper's name for `d`'s element type and width: `rg_exp2_f32`, `rg_exp2_f32_v8`, ...
pub fn exp2_helper_name(d: DType) -> Result<String> {
    let base = format!("rg_exp2_{}", mangle(DType::new(d.scalar))?);
    Ok(if d.count > 1 {
        format!("{base}_v{}", d.count)
    } else {
        base
    })
}

/// The body lines computing `name = exp2(x)` for `x` of `d`, and the `llvm.fma` declaration
/// they use.
fn exp2_lines(d: DType, x: &str, name: &str) -> Result<(Vec<String>, String)> {
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
    let decl = format!("declare {td} {fma}({td}, {td}, {td})");
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
    Ok((lines, decl))
}

/// The definition of the helper for `d` (internal, attribute group `#1`) and its `llvm.fma`
/// declaration.
pub fn exp2_helper(d: DType) -> Result<(String, String)> {
    helper_text(d, false)
}

/// The definition of the out-of-line copy of the helper for `d` (`..._outlined`, attribute group
/// `#4`).
fn exp2_outlined_helper(d: DType) -> Result<(String, String)> {
    helper_text(d, true)
}

/// The most helper texts [`HELPERS`] keeps (a few dtypes and widths occur; more are made again).
const MAX_KEPT_HELPERS: usize = 32;

/// A helper's dtype and whether it is the out-of-line copy, with its (definition, declaration).
type KeptHelper = ((DType, bool), (String, String));

thread_local! {
    /// The helper texts (definition, declaration) this thread made, by dtype and out of line or
    /// not: a text depends on nothing else, and making one is most of the rendering of a small
    /// kernel's EXP2 (about 100k instructions each).
    static HELPERS: RefCell<Vec<KeptHelper>> = const { RefCell::new(Vec::new()) };
}

/// [`exp2_helper`] (`outlined`: [`exp2_outlined_helper`]), made once per thread.
fn helper_text(d: DType, outlined: bool) -> Result<(String, String)> {
    let key = (d, outlined);
    let kept = HELPERS
        .try_with(|h| {
            let h = h.try_borrow().ok()?;
            h.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
        })
        .ok()
        .flatten();
    if let Some(v) = kept {
        return Ok(v);
    }
    let t = reg(d);
    let (body, decl) = exp2_lines(d, "%x", "%y")?;
    let (suffix, group) = if outlined { ("_outlined", 4) } else { ("", 1) };
    let def = format!(
        "define internal {t} @{}{suffix}({t} %x) #{group} {{\nentry:\n{}\n  ret {t} %y\n}}",
        exp2_helper_name(d)?,
        body.join("\n")
    );
    let v = (def, decl);
    let _ = HELPERS.try_with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            if h.len() < MAX_KEPT_HELPERS {
                h.push((key, v.clone()));
            }
        }
    });
    Ok(v)
}

/// The call-site attribute group (`#2` for float, `#3` for half) of a scalar EXP2 of `s`: pure,
/// and the vector forms [`EXP2_LANES`] for the SLP vectorizer.
fn call_site_group(s: DType) -> Result<(u8, String)> {
    let n = if s.scalar == Scalar::Float16 { 3 } else { 2 };
    let base = exp2_helper_name(s)?;
    let variants: Vec<String> = EXP2_LANES
        .iter()
        .map(|l| format!("_ZGV_LLVM_N{l}v_{base}({base}_v{l})"))
        .collect();
    Ok((
        n,
        format!(
            "attributes #{n} = {{ nounwind readnone willreturn \"vector-function-abi-variant\"=\"{}\" }}",
            variants.join(",")
        ),
    ))
}

impl Walk<'_> {
    /// Defines the helper for `d` in the module (once).
    fn want_exp2_helper(&mut self, d: DType) -> Result<()> {
        if !self.helpers.insert(exp2_helper_name(d)?) {
            return Ok(());
        }
        let (def, decl) = exp2_helper(d)?;
        self.decls.insert(def);
        self.decls.insert(decl);
        self.decls.insert(HELPER_ATTRIBUTES.to_string());
        Ok(())
    }

    /// `name = exp2(x)` for `x` of vector type `d`: a call of the out-of-line copy of its helper
    /// (for the UOps of [`outlined`]).
    pub(super) fn call_exp2_outlined(&mut self, d: DType, x: &str, name: &str) -> Result<()> {
        let t = reg(d);
        let helper = format!("{}_outlined", exp2_helper_name(d)?);
        if self.helpers.insert(helper.clone()) {
            let (def, decl) = exp2_outlined_helper(d)?;
            self.decls.insert(def);
            self.decls.insert(decl);
            self.decls.insert(OUTLINED_ATTRIBUTES.to_string());
        }
        emit!(self; "  ", name, " = call ", t, " @", helper, "(", t, " ", x, ")");
        Ok(())
    }

    /// `name = exp2(x)` for `x` of `d` (a float32, bfloat16 or half scalar or vector): a call of
    /// the helper of `d`; a scalar call names the vector helpers for SLP.
    pub(super) fn call_exp2(&mut self, d: DType, x: &str, name: &str) -> Result<()> {
        let t = reg(d);
        let known = self.exp2_callees.iter().position(|(k, ..)| *k == d);
        let k = match known {
            Some(k) => k,
            None => {
                let (helper, attrs) = self.exp2_callee(d)?;
                self.exp2_callees.push((d, helper, attrs));
                self.exp2_callees.len() - 1
            }
        };
        let (_, helper, attrs) = &self.exp2_callees[k];
        let (helper, attrs) = (helper.clone(), *attrs);
        emit!(self; "  ", name, " = call ", t, " @", helper, "(", t, " ", x, ")", attrs);
        Ok(())
    }

    /// The helper an EXP2 of `d` calls and the call's attribute text, once per dtype and
    /// rendering: defines the helper (and for a scalar its call-site group and vector helpers).
    fn exp2_callee(&mut self, d: DType) -> Result<(Rc<str>, &'static str)> {
        self.want_exp2_helper(d)?;
        let mut attrs = "";
        if d.count == 1 {
            let (n, group) = call_site_group(d)?;
            if self.decls.insert(group) {
                for l in EXP2_LANES {
                    self.want_exp2_helper(d.vec(l))?;
                }
            }
            attrs = if n == 3 { " #3" } else { " #2" };
        }
        Ok((exp2_helper_name(d)?.into(), attrs))
    }
}
