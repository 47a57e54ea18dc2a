//! The ALU table of the LLVM IR renderer: one instruction sequence per op and dtype family, with
//! the semantics of `exec_alu` (the interpreter's) where C and LLVM leave them open.
//!
//! - Integer IDIV/MOD truncate (`sdiv`/`srem`, `udiv`/`urem`); a divisor that is not a constant is
//!   guarded so that `x/0 = x%0 = 0`, `x/-1 = -x` and `x%-1 = 0` (no trap, no poison).
//! - Float MAX is `ops::float_max` (NaN propagates, +0 above -0; `fcmp` + `select`, not `maxnum`); CMPLT is ordered (`olt`, false
//!   on NaN), CMPNE unordered (`une`, true on NaN), as in C.
//! - EXP2/LOG2/SIN/SQRT are `llvm.*` intrinsics, except float EXP2 on the CPU: inline IR
//!   ([`super::exp2`], vectorizable; the intrinsic is a libm call per lane there); RECIP is
//!   `fdiv 1.0, x`; float MOD goes through 64-bit integers like the C renderer; bool ADD/MUL/MAX
//!   are or/and/or.
//! - Every op also works lane-wise on vectors (the CPU flavour's vector ALU fold,
//!   `codegen/uopgraph/vectorize.rs`): constants splat, comparisons give `<N x i1>`, and the
//!   guards and selects above apply per lane, so each lane has the scalar op's bits.
//! - Float instructions carry the renderer's fast-math flags (none by default on every flavour;
//!   tinygrad's `nsz arcp contract afn reassoc` only through `with_fast_math`).
//!
//! - On NVPTX, EXP2/LOG2/SIN/SQRT are PTX's f32 approximations (`ex2.approx`, `lg2.approx`,
//!   `sin.approx`, `sqrt.approx`, what tinygrad's PTX renderer emits); half goes through f32.
//!
//! Not guaranteed: on AMD GPUs and NVPTX, double EXP2/LOG2/SIN have no intrinsic lowering and are
//! refused.

use std::rc::Rc;

use crate::codegen::uops::UOp;
use crate::dtype::{dtypes, ConstValue, DType, Scalar};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::renderer::text::cat;
use crate::{bail, ensure, Result};

use super::types::{literal, mangle, reg};
use super::walk::{dtype_of, emit, Walk};
use super::Flavour;

fn splat(v: i128, d: DType) -> String {
    literal(ConstValue::Int(v), d)
}

fn fsplat(v: f64, d: DType) -> String {
    literal(ConstValue::Float(v), d)
}

impl Walk<'_> {
    pub(super) fn alu(&mut self, u: &UOp) -> Result<()> {
        let Some(op) = u.alu_op() else {
            bail!(Codegen, "ALU without an op");
        };
        let out = dtype_of(u)?;
        let n = u.src().len();
        let want = match op {
            Op::Unary(_) => 1,
            Op::Binary(_) => 2,
            Op::Ternary(_) => 3,
            _ => bail!(Codegen, "{} is not an ALU op", op.name()),
        };
        ensure!(n == want, Codegen, "{} with {n} sources", op.name());
        // an index-only ALU computes in i64 (`index.rs`); WHERE's condition stays as it is
        let wide = self.wide.contains_key(u);
        let is_where = op == Op::Ternary(TernaryOps::WHERE);
        let srcs: Vec<Rc<str>> = (0..n)
            .map(|i| match wide && !(is_where && i == 0) {
                true => self.src_wide(u, i),
                false => self.src(u, i),
            })
            .collect::<Result<_>>()?;
        // operand dtype: the first source's, except WHERE (its value operands)
        let (out, d) = match op {
            _ if wide => (dtypes::int64, dtypes::int64),
            Op::Ternary(TernaryOps::WHERE) => (out, Self::src_dtype(u, 1)?),
            _ => (out, Self::src_dtype(u, 0)?),
        };
        let name = self.ssa("alu");
        // every op defines `name`
        match op {
            Op::Unary(UnaryOps::EXP2) if self.exp2_outlined.contains_key(u) => {
                self.call_exp2_outlined(d, &srcs[0], &name)?
            }
            Op::Unary(o) => self.unary(o, d, &srcs[0], &name)?,
            Op::Binary(o) => self.binary(o, d, u, &srcs, &name)?,
            Op::Ternary(TernaryOps::WHERE) => {
                let t = reg(out);
                let ct = reg(Self::src_dtype(u, 0)?);
                emit!(self; "  ", name, " = select ", ct, " ", srcs[0], ", ", t, " ", srcs[1], ", ", t, " ", srcs[2]);
            }
            Op::Ternary(TernaryOps::MULACC) => {
                let t = reg(d);
                let (mul, add) = if d.is_float() {
                    (cat!("fmul", self.fmf), cat!("fadd", self.fmf))
                } else {
                    ("mul".to_string(), "add".to_string())
                };
                emit!(self; "  ", name, ".m = ", mul, " ", t, " ", srcs[0], ", ", srcs[1]);
                emit!(self; "  ", name, " = ", add, " ", t, " ", name, ".m, ", srcs[2]);
            }
            _ => bail!(Codegen, "{} is not an ALU op", op.name()),
        }
        self.r.insert(u.clone(), name);
        Ok(())
    }

    fn intrinsic(&mut self, f: &str, d: DType, x: &str, name: &str) -> Result<()> {
        let (t, m) = (reg(d), mangle(d)?);
        self.decls
            .insert(cat!("declare ", t, " @llvm.", f, ".", m, "(", t, ")"));
        let fmf = self.fmf;
        emit!(self; "  ", name, " = call", fmf, " ", t, " @llvm.", f, ".", m, "(", t, " ", x, ")");
        Ok(())
    }

    fn unary(&mut self, o: UnaryOps, d: DType, x: &str, name: &str) -> Result<()> {
        let t = reg(d);
        if matches!(
            o,
            UnaryOps::EXP2 | UnaryOps::LOG2 | UnaryOps::SIN | UnaryOps::SQRT | UnaryOps::RECIP
        ) {
            ensure!(d.is_float(), Codegen, "{o:?} of {d}");
        }
        let amd_f64 = matches!(self.flavour, Flavour::Amdgpu { .. }) && d.scalar == Scalar::Float64;
        let math = matches!(
            o,
            UnaryOps::EXP2 | UnaryOps::LOG2 | UnaryOps::SIN | UnaryOps::SQRT
        );
        if math && matches!(self.flavour, Flavour::Nvptx { .. }) {
            return self.nvptx_math(o, d, x, name);
        }
        match o {
            UnaryOps::NEG if d.is_bool() => {
                emit!(self; "  ", name, " = xor ", t, " ", x, ", ", literal(ConstValue::Bool(true), d));
            }
            UnaryOps::NEG if d.is_float() => {
                let fmf = self.fmf;
                emit!(self; "  ", name, " = fneg", fmf, " ", t, " ", x);
            }
            UnaryOps::NEG => emit!(self; "  ", name, " = sub ", t, " ", splat(0, d), ", ", x),
            UnaryOps::EXP2 | UnaryOps::LOG2 | UnaryOps::SIN if amd_f64 => bail!(
                Codegen,
                "{o:?} of double: AMD GPUs have no such instruction (LLVM would call libm)"
            ),
            UnaryOps::EXP2
                if matches!(self.flavour, Flavour::Cpu) && d.scalar != Scalar::Float64 =>
            {
                return self.call_exp2(d, x, name);
            }
            UnaryOps::EXP2 => return self.intrinsic("exp2", d, x, name),
            UnaryOps::LOG2 => return self.intrinsic("log2", d, x, name),
            UnaryOps::SIN => return self.intrinsic("sin", d, x, name),
            UnaryOps::SQRT => return self.intrinsic("sqrt", d, x, name),
            UnaryOps::RECIP => {
                let fmf = self.fmf;
                emit!(self; "  ", name, " = fdiv", fmf, " ", t, " ", fsplat(1.0, d), ", ", x);
            }
            UnaryOps::CAST | UnaryOps::BITCAST => {
                bail!(Codegen, "{o:?} is a UOp (CAST/BITCAST), not an ALU op")
            }
        }
        Ok(())
    }

    /// EXP2/LOG2/SIN/SQRT as PTX's `ex2.approx`/`lg2.approx`/`sin.approx`/`sqrt.approx` (f32, as
    /// tinygrad's PTX renderer; `sqrt.rn` would call a slow-path subroutine that needs a
    /// relocation the cubin loader does not apply), double SQRT as `llvm.sqrt`; half computes in
    /// f32 and rounds once.
    fn nvptx_math(&mut self, o: UnaryOps, d: DType, x: &str, name: &str) -> Result<()> {
        ensure!(d.count == 1, Codegen, "{o:?} of the vector {d} on NVPTX");
        let f32 = DType::new(Scalar::Float32);
        match d.scalar {
            Scalar::Float16 => {
                emit!(self; "  ", name, ".x = fpext half ", x, " to float");
                let r = cat!(name, ".f");
                self.nvptx_math(o, f32, &cat!(name, ".x"), &r)?;
                emit!(self; "  ", name, " = fptrunc float ", r, " to half");
                Ok(())
            }
            Scalar::Float64 if o == UnaryOps::SQRT => self.intrinsic("sqrt", d, x, name),
            Scalar::Float32 | Scalar::BFloat16 => {
                let f = match o {
                    UnaryOps::EXP2 => "ex2",
                    UnaryOps::LOG2 => "lg2",
                    UnaryOps::SQRT => "sqrt",
                    _ => "sin",
                };
                self.decls
                    .insert(cat!("declare float @llvm.nvvm.", f, ".approx.f(float)"));
                emit!(self; "  ", name, " = call float @llvm.nvvm.", f, ".approx.f(float ", x, ")");
                Ok(())
            }
            _ => bail!(
                Codegen,
                "{o:?} of {d}: PTX has only f32 approximations (NV_COMPILER=nvrtc computes it in CUDA C)"
            ),
        }
    }

    fn binary(&mut self, o: BinaryOps, d: DType, u: &UOp, s: &[Rc<str>], name: &str) -> Result<()> {
        let t = reg(d);
        let (x, y) = (&s[0], &s[1]);
        let f = self.fmf;
        // (instruction, fast-math flags, predicate): `{i}{flags}{pred}`
        let (i, flags, pred) = match o {
            BinaryOps::ADD if d.is_bool() => ("or", "", ""),
            BinaryOps::ADD if d.is_float() => ("fadd", f, ""),
            BinaryOps::ADD => ("add", "", ""),
            BinaryOps::MUL if d.is_bool() => ("and", "", ""),
            BinaryOps::MUL if d.is_float() => ("fmul", f, ""),
            BinaryOps::MUL => ("mul", "", ""),
            BinaryOps::XOR => ("xor", "", ""),
            BinaryOps::SHL => ("shl", "", ""),
            BinaryOps::SHR if d.is_unsigned() || d.is_bool() => ("lshr", "", ""),
            BinaryOps::SHR => ("ashr", "", ""),
            BinaryOps::CMPLT if d.is_float() => ("fcmp", f, " olt"),
            BinaryOps::CMPLT if d.is_unsigned() || d.is_bool() => ("icmp ult", "", ""),
            BinaryOps::CMPLT => ("icmp slt", "", ""),
            BinaryOps::CMPNE if d.is_float() => ("fcmp", f, " une"),
            BinaryOps::CMPNE => ("icmp ne", "", ""),
            BinaryOps::MAX if d.is_bool() => ("or", "", ""),
            BinaryOps::MAX => return self.max(d, x, y, name),
            BinaryOps::IDIV | BinaryOps::MOD if d.is_float() => {
                return self.float_div(o, d, x, y, name)
            }
            BinaryOps::IDIV | BinaryOps::MOD => {
                let divisor = u.src().get(1).and_then(|s| s.const_value());
                return self.int_div(o, d, x, y, divisor, name);
            }
        };
        emit!(self; "  ", name, " = ", i, flags, pred, " ", t, " ", x, ", ", y);
        Ok(())
    }

    /// NaN-propagating float max; signed/unsigned int max.
    fn max(&mut self, d: DType, x: &str, y: &str, name: &str) -> Result<()> {
        let t = reg(d);
        let ct = reg(DType::new(Scalar::Bool).vec(d.count));
        if d.is_float() {
            // ops::float_max: NaN if either is NaN, +0 above -0. `x + y` (no fast-math flags, so
            // the sign of zero holds) is the answer for a NaN and for two equal zeros, else the
            // greater one (`x` when equal). Arranged so that a reduction's accumulator (either
            // operand) passes through one compare and two selects, or the add and one select:
            // `c` is "a NaN, or two zeros" (`x` zero: unordered-or-equal; else: unordered).
            emit!(self; "  ", name, ".s = fadd ", t, " ", x, ", ", y);
            emit!(self; "  ", name, ".gt = fcmp ogt ", t, " ", y, ", ", x);
            emit!(self; "  ", name, ".z = fcmp oeq ", t, " ", x, ", zeroinitializer");
            emit!(self; "  ", name, ".ueq = fcmp ueq ", t, " ", x, ", ", y);
            emit!(self; "  ", name, ".nan = fcmp uno ", t, " ", x, ", ", y);
            emit!(self; "  ", name, ".c = select ", ct, " ", name, ".z, ", ct, " ", name, ".ueq, ", ct, " ", name, ".nan");
            emit!(self; "  ", name, ".m = select ", ct, " ", name, ".gt, ", t, " ", y, ", ", t, " ", x);
            emit!(self; "  ", name, " = select ", ct, " ", name, ".c, ", t, " ", name, ".s, ", t, " ", name, ".m");
        } else {
            let cmp = if d.is_unsigned() { "ugt" } else { "sgt" };
            emit!(self; "  ", name, ".gt = icmp ", cmp, " ", t, " ", x, ", ", y);
            emit!(self; "  ", name, " = select ", ct, " ", name, ".gt, ", t, " ", x, ", ", t, " ", y);
        }
        Ok(())
    }

    /// Integer IDIV/MOD with `exec_alu`'s results for a zero (and, signed, a -1) divisor.
    fn int_div(
        &mut self,
        o: BinaryOps,
        d: DType,
        x: &str,
        y: &str,
        divisor: Option<ConstValue>,
        name: &str,
    ) -> Result<()> {
        let t = reg(d);
        let signed = !d.is_unsigned();
        let (div, rem) = if signed {
            ("sdiv", "srem")
        } else {
            ("udiv", "urem")
        };
        let i = if o == BinaryOps::IDIV { div } else { rem };
        let safe = divisor.is_some_and(|c| c.as_i128() != 0 && !(signed && c.as_i128() == -1));
        if safe {
            emit!(self; "  ", name, " = ", i, " ", t, " ", x, ", ", y);
            return Ok(());
        }
        let ct = reg(DType::new(Scalar::Bool).vec(d.count));
        emit!(self; "  ", name, ".z = icmp eq ", t, " ", y, ", ", splat(0, d));
        let bad = if signed {
            emit!(self; "  ", name, ".m1 = icmp eq ", t, " ", y, ", ", splat(-1, d));
            emit!(self; "  ", name, ".bad = or ", ct, " ", name, ".z, ", name, ".m1");
            cat!(name, ".bad")
        } else {
            cat!(name, ".z")
        };
        emit!(self; "  ", name, ".d = select ", ct, " ", bad, ", ", t, " ", splat(1, d), ", ", t, " ", y);
        emit!(self; "  ", name, ".q = ", i, " ", t, " ", x, ", ", name, ".d");
        let zero = splat(0, d);
        if signed && o == BinaryOps::IDIV {
            // x / -1 = -x (wrapping); x / 0 = 0
            emit!(self; "  ", name, ".neg = sub ", t, " ", zero, ", ", x);
            emit!(self; "  ", name, ".r = select ", ct, " ", name, ".m1, ", t, " ", name, ".neg, ", t, " ", name, ".q");
            emit!(self; "  ", name, " = select ", ct, " ", name, ".z, ", t, " ", zero, ", ", t, " ", name, ".r");
        } else {
            emit!(self; "  ", name, " = select ", ct, " ", bad, ", ", t, " ", zero, ", ", t, " ", name, ".q");
        }
        Ok(())
    }

    /// Float IDIV (`trunc(x/y)`) and MOD (through 64-bit integers, as the C renderer does).
    fn float_div(&mut self, o: BinaryOps, d: DType, x: &str, y: &str, name: &str) -> Result<()> {
        let t = reg(d);
        let f = self.fmf;
        if o == BinaryOps::IDIV {
            emit!(self; "  ", name, ".q = fdiv", f, " ", t, " ", x, ", ", y);
            return self.intrinsic("trunc", d, &cat!(name, ".q"), name);
        }
        let l = DType::new(Scalar::Int64).vec(d.count);
        let lt = reg(l);
        emit!(self; "  ", name, ".x = fptosi ", t, " ", x, " to ", lt);
        emit!(self; "  ", name, ".y = fptosi ", t, " ", y, " to ", lt);
        let r = cat!(name, ".i");
        self.int_div(
            BinaryOps::MOD,
            l,
            &cat!(name, ".x"),
            &cat!(name, ".y"),
            None,
            &r,
        )?;
        emit!(self; "  ", name, " = sitofp ", lt, " ", r, " to ", t);
        Ok(())
    }
}
