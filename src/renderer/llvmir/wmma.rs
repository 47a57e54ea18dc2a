//! WMMA (tensor-core) UOps in LLVM IR.
//!
//! - AMD (gfx11, wave32): `llvm.amdgcn.wmma.f32.16x16x16.f16(<16 x half> A, <16 x half> B,
//!   <8 x float> C)`; for half output `llvm.amdgcn.wmma.f16.16x16x16.f16(A, B, <16 x half> C,
//!   i1 false)`, whose C/D keep one value in the low half of each 32-bit register (`opsel`
//!   false), so C's 8 values go to the even lanes of a 16-lane vector and D is read back from
//!   them (the layout tinygrad's HIP helper uses).
//! - AMD (gfx12, wave32; beyond tinygrad 0.9.1): the same intrinsics overloaded on 8-wide
//!   operands, spelled with their mangled names as LLVM's `test/CodeGen/AMDGPU/wmma-gfx12-w32.ll`
//!   does: `llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16(<8 x half> A, <8 x half> B,
//!   <8 x float> C)`, `llvm.amdgcn.wmma.f16.16x16x16.f16.v8f16.v8f16(A, B, <8 x half> C,
//!   i1 false)` (C/D densely packed, no opsel), `llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16
//!   (<8 x i16> A, <8 x i16> B, <8 x float> C)` and `llvm.amdgcn.wmma.bf16.16x16x16.bf16.v8i16
//!   .v8i16(A, B, <8 x i16> C, i1 false)` (bfloat16 as its raw bits, rounded from the float
//!   registers and widened back). No half-wave duplication: each lane passes its own 8 values.
//! - NVPTX (sm_80+): `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` as inline PTX: A's
//!   8 halves as four and B's 4 halves as two 32-bit registers (lower half = lower lane), C and D
//!   as four floats; the call is `convergent` (the whole warp takes part).
//!
//! Not guaranteed: other shapes or dtypes are refused with an `Error::Codegen`.

use crate::codegen::uops::{UArg, UOp};
use crate::dtype::Scalar;
use crate::hw::amd::targets::Wmma;
use crate::{bail, Result};

use super::types::{bf16_to_float, float_to_bf16, reg};
use super::walk::{dtype_of, emit, Walk};
use super::Flavour;

impl Walk<'_> {
    pub(super) fn wmma(&mut self, u: &UOp) -> Result<()> {
        let UArg::Wmma(w) = u.arg() else {
            bail!(Codegen, "WMMA without its arg");
        };
        let (a, b, c) = (self.src(u, 0)?, self.src(u, 1)?, self.src(u, 2)?);
        let out = dtype_of(u)?;
        let name = self.ssa("wmma");
        let half_in = w.dtype_in.scalar == Scalar::Float16;
        match (self.flavour, w.dims, half_in) {
            (Flavour::Amdgpu { target }, [16, 16, 16], _) if target.wmma == Wmma::Rdna4 => {
                self.wmma_gfx12(&name, (&a, &b, &c), w.dtype_in.scalar, out.scalar)?
            }
            (Flavour::Amdgpu { .. }, [16, 16, 16], true) => {
                self.wmma_amd(&name, (&a, &b, &c), out.scalar)?
            }
            (Flavour::Nvptx { .. }, [8, 16, 16], true) if out.scalar == Scalar::Float32 => {
                self.wmma_nv(&name, (&a, &b, &c))
            }
            (f, d, _) => bail!(
                Codegen,
                "no tensor core {} (dims {d:?}) in the {f:?} LLVM renderer",
                w.name
            ),
        }
        self.r.insert(u.clone(), name);
        Ok(())
    }

    fn wmma_amd(&mut self, name: &str, (a, b, c): (&str, &str, &str), out: Scalar) -> Result<()> {
        match out {
            Scalar::Float32 => {
                let f = "llvm.amdgcn.wmma.f32.16x16x16.f16";
                self.decls.insert(format!(
                    "declare <8 x float> @{f}(<16 x half>, <16 x half>, <8 x float>)"
                ));
                emit!(self; "  ", name, " = call <8 x float> @", f, "(<16 x half> ", a, ", <16 x half> ", b, ", <8 x float> ", c, ")");
            }
            Scalar::Float16 => {
                let f = "llvm.amdgcn.wmma.f16.16x16x16.f16";
                self.decls.insert(format!(
                    "declare <16 x half> @{f}(<16 x half>, <16 x half>, <16 x half>, i1 immarg)"
                ));
                let spread: Vec<String> = (0..16)
                    .map(|i| format!("i32 {}", if i % 2 == 0 { i / 2 } else { 8 }))
                    .collect();
                let even: Vec<String> = (0..8).map(|i| format!("i32 {}", 2 * i)).collect();
                emit!(self; "  ", name, ".c = shufflevector <8 x half> ", c, ", <8 x half> zeroinitializer, <16 x i32> <", spread.join(", "), ">");
                emit!(self; "  ", name, ".d = call <16 x half> @", f, "(<16 x half> ", a, ", <16 x half> ", b, ", <16 x half> ", name, ".c, i1 false)");
                emit!(self; "  ", name, " = shufflevector <16 x half> ", name, ".d, <16 x half> poison, <8 x i32> <", even.join(", "), ">");
            }
            s => bail!(Codegen, "AMD WMMA to {}", s.long_name()),
        }
        Ok(())
    }

    /// gfx12's WMMA: 8 values of A, B and C per lane, each lane its own.
    fn wmma_gfx12(
        &mut self,
        name: &str,
        (a, b, c): (&str, &str, &str),
        din: Scalar,
        out: Scalar,
    ) -> Result<()> {
        let (f, ab, cd, opsel) = gfx12_intrinsic(din, out)?;
        let mut bits = |x: &str, tag: &str, is_bf16: bool| {
            if is_bf16 {
                float_to_bf16(x, &format!("{name}.{tag}"), 8, &mut self.body)
            } else {
                x.to_string()
            }
        };
        let bf16_in = din == Scalar::BFloat16;
        let bf16_out = out == Scalar::BFloat16;
        let (a, b, c) = (
            bits(a, "a", bf16_in),
            bits(b, "b", bf16_in),
            bits(c, "c", bf16_out),
        );
        let (decl_opsel, call_opsel) = if opsel {
            (", i1 immarg", ", i1 false")
        } else {
            ("", "")
        };
        self.decls
            .insert(format!("declare {cd} @{f}({ab}, {ab}, {cd}{decl_opsel})"));
        let d = if bf16_out {
            format!("{name}.d")
        } else {
            name.to_string()
        };
        emit!(self; "  ", d, " = call ", cd, " @", f, "(", ab, " ", a, ", ", ab, " ", b, ", ", cd, " ", c, call_opsel, ")");
        if bf16_out {
            bf16_to_float(&d, name, 8, &mut self.body);
        }
        Ok(())
    }

    fn wmma_nv(&mut self, name: &str, (a, b, c): (&str, &str, &str)) {
        let f4 = reg(crate::dtype::dtypes::float32.vec(4));
        emit!(self; "  ", name, ".a = bitcast <8 x half> ", a, " to <4 x i32>");
        emit!(self; "  ", name, ".b = bitcast <4 x half> ", b, " to <2 x i32>");
        let mut args = vec![];
        for i in 0..4 {
            emit!(self; "  ", name, ".a", i, " = extractelement <4 x i32> ", name, ".a, i32 ", i);
            args.push(format!("i32 {name}.a{i}"));
        }
        for i in 0..2 {
            emit!(self; "  ", name, ".b", i, " = extractelement <2 x i32> ", name, ".b, i32 ", i);
            args.push(format!("i32 {name}.b{i}"));
        }
        for i in 0..4 {
            emit!(self; "  ", name, ".c", i, " = extractelement ", f4, " ", c, ", i32 ", i);
            args.push(format!("float {name}.c{i}"));
        }
        let st = "{ float, float, float, float }";
        emit!(self; "  ", name, ".r = call ", st, " asm sideeffect \"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};\", \"=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f\"(", args.join(", "), ") convergent");
        let mut lanes = vec![];
        for i in 0..4 {
            emit!(self; "  ", name, ".r", i, " = extractvalue ", st, " ", name, ".r, ", i);
            lanes.push(format!("{name}.r{i}").into());
        }
        self.build_vector(name, crate::dtype::dtypes::float32.vec(4), &lanes);
    }
}

/// gfx12's WMMA intrinsic for (A/B, C/D) dtypes: (name, A/B type, C/D type, has the opsel
/// operand), as LLVM's `wmma-gfx12-w32.ll` calls them (bfloat16 as `i16` bits).
fn gfx12_intrinsic(
    din: Scalar,
    out: Scalar,
) -> Result<(&'static str, &'static str, &'static str, bool)> {
    let (h8, f8, i8x) = ("<8 x half>", "<8 x float>", "<8 x i16>");
    Ok(match (din, out) {
        (Scalar::Float16, Scalar::Float32) => (
            "llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16",
            h8,
            f8,
            false,
        ),
        (Scalar::Float16, Scalar::Float16) => (
            "llvm.amdgcn.wmma.f16.16x16x16.f16.v8f16.v8f16",
            h8,
            h8,
            true,
        ),
        (Scalar::BFloat16, Scalar::Float32) => (
            "llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16",
            i8x,
            f8,
            false,
        ),
        (Scalar::BFloat16, Scalar::BFloat16) => (
            "llvm.amdgcn.wmma.bf16.16x16x16.bf16.v8i16.v8i16",
            i8x,
            i8x,
            true,
        ),
        (i, o) => bail!(
            Codegen,
            "gfx12 WMMA from {} to {}",
            i.long_name(),
            o.long_name()
        ),
    })
}
