//! The CLANG dialect (tinygrad's `ClangRenderer`), for C compiled by gcc 12+ or clang 14+ on the
//! host: no launch dims (global dims are loops), no locals; pointers are ` restrict` and `const`
//! for inputs; integer MAX is a ternary, float MAX a helper with the interpreter's NaN and
//! signed-zero rules (`ops::float_max`); bool is `_Bool`.
//!
//! Where rawgrad differs from tinygrad (so the source builds warning-free under both gcc and clang
//! with `-O2 -Wall`, without `-include tgmath.h`):
//! - half is a `half` typedef of `_Float16` (`__fp16` for clang < 15, which lacks `_Float16` on
//!   x86); math on half goes through the float functions.
//! - bfloat16 values are held as `float` (tinygrad's constant folder does not round them either)
//!   and stored as `unsigned short` through round-to-nearest-even helpers.
//! - math calls are typed (`sqrtf`, `log2`, ...) and `<math.h>` is included when needed; float
//!   `exp2` is the inline helper `rg_exp2f` of [`crate::renderer::exp2`] (vectorizable; libm's
//!   `exp2f` is a call per element), double `exp2` stays libm's.
//! - integer types are spelled in C (`signed char`, `unsigned int`, ...); literals carry the
//!   suffixes that keep 64-bit and extreme values warning-free.
//! - bool ADD and MUL are `||` and `&&` (gcc warns about `*` on `_Bool`).
//! - float4 grouping is on (0.9.1's CLANG has it off): an upcast dim of 2 or 4 unit-stride float or
//!   half lanes is one vector load or store. Vector types are
//!   `__attribute__((vector_size(N), aligned(scalar)))` typedefs (so unaligned addresses are fine),
//!   emitted only when used; lanes are read with `[i]`. A vector load read only lane by lane is
//!   one scalar load per lane instead (`cstyle/lane_loads.rs`: gcc vectorizes those better).
//! - a row sum over 8 rows at once keeps its 8 accumulators in one `float8` fed by a shuffle
//!   transpose of the rows' float4 loads, with a prefetch of long row streams
//!   (`cstyle/row_transpose.rs`; the same bits).
//! - a large contiguous float4 output goes through `rg_stream_f4` (a non-temporal store where the
//!   address is 16-byte aligned) and the kernel ends with `rg_stream_fence()` (`sfence`), on
//!   x86-64 (`renderer/llvmir/stream_store.rs`; the same bits).
//! - multi-core: when the kernel's outermost loop is a non-reduce RANGE that holds every store, it
//!   runs only the slice `[N*core/ncores, N*(core+1)/ncores)` of its `N` iterations, with `core`
//!   and `ncores` as two extra trailing parameters. Every kernel also gets the fixed-ABI entry point
//!   `void NAME_rg(void **bufs, const int *vals, int core, int ncores)`: `bufs[i]` is buffer `i`
//!   (DEFINE_GLOBAL index), `vals[j]` the j-th variable in name order; a kernel without a split loop
//!   runs on core 0 only, and an invalid (core, ncores) pair runs nothing.
//!
//! - vector ALU (beyond 0.9.1, `RendererOpts::vector_alu` = `VectorAlu::C`): the vector ALU fold
//!   hands this renderer float and double vector `+`, `*` and unary `-` (GNU vector extensions,
//!   lane-wise and under the same `-ffp-contract=off` as scalar code) and broadcasts, rendered as a
//!   compound literal with the scalar in every lane.
//!
//! Not guaranteed: vector ALU beyond what the GNU vector extension offers in C (no vector MAX or
//! comparisons; WHERE only with a scalar condition), bool and bfloat16 vectors, WMMA and launch
//! indices are refused.

use std::borrow::Cow;

use crate::codegen::uops::UOp;
use crate::dtype::{ConstValue, DType, Scalar};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::renderer::text::cat;
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, Result};

use super::{
    base_code_for_op, base_params, base_render_const, render_cstyle, render_load_bf16_emulated,
    render_store_bf16_emulated, CStyle, CStyleLanguage, Needs, Param,
};

/// The CLANG renderer.
#[derive(Clone, Debug)]
pub struct ClangRenderer {
    opts: RendererOpts,
    lang: CStyleLanguage,
}

impl Default for ClangRenderer {
    fn default() -> Self {
        ClangRenderer::new()
    }
}

impl ClangRenderer {
    pub fn new() -> ClangRenderer {
        ClangRenderer {
            opts: RendererOpts {
                device: "CLANG".into(),
                suffix: "CLANG".into(),
                supports_float4: true,
                has_local: false,
                has_shared: false,
                global_max: None,
                local_max: None,
                shared_max: 0,
                tensor_cores: vec![],
                vector_alu: crate::codegen::renderer::VectorAlu::C,
            },
            lang: CStyleLanguage {
                buffer_suffix: " restrict".into(),
                arg_int_prefix: "const int".into(),
                smem_prefix_for_cast: true,
                // the staging buffer of `codegen/uopgraph/stage.rs`: a cache line per row start
                smem_align: "__attribute__((aligned(64))) ".into(),
                split_outer_loop: true,
                scalar_lane_loads: true,
                transposed_rows: true,
                stream_stores: true,
                ..CStyleLanguage::default()
            },
        }
    }
}

impl Renderer for ClangRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }
    fn render(&self, name: &str, uops: &[UOp]) -> Result<String> {
        render_cstyle(self, name, uops)
    }
}

fn scalar_c(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "_Bool",
        Scalar::Int8 => "signed char",
        Scalar::Uint8 => "unsigned char",
        Scalar::Int16 => "short",
        Scalar::Uint16 => "unsigned short",
        Scalar::Int32 => "int",
        Scalar::Uint32 => "unsigned int",
        Scalar::Int64 => "long",
        Scalar::Uint64 => "unsigned long",
        Scalar::Float16 => "half",
        // registers hold bfloat16 values as float
        Scalar::BFloat16 | Scalar::Float32 => "float",
        Scalar::Float64 => "double",
    }
}

/// The typedef name of a vector type (tinygrad's names: `float4`, `uchar4`, `half8`); the
/// common ones are static text.
fn vector_name(d: DType) -> Cow<'static, str> {
    macro_rules! table {
        ($($s:ident $n:literal),*) => {
            match (d.scalar, d.count) {
                $(
                    (Scalar::$s, 2) => Cow::Borrowed(concat!($n, "2")),
                    (Scalar::$s, 4) => Cow::Borrowed(concat!($n, "4")),
                    (Scalar::$s, 8) => Cow::Borrowed(concat!($n, "8")),
                )*
                _ => Cow::Owned(cat!(d.scalar.name(), d.count)),
            }
        };
    }
    table!(Float32 "float", Float16 "half", Float64 "double", Int32 "int")
}

const HALF_TYPEDEF: &str = "#if defined(__clang__) && __clang_major__ < 15
typedef __fp16 half;
#else
typedef _Float16 half;
#endif";

/// The streaming store of a float4 (`renderer/llvmir/stream_store.rs`): `movntps` when the
/// address is 16-byte aligned (gcc's and clang's builtins), else a plain 16-byte copy; and the
/// `sfence` that orders those stores before whatever the thread writes next (the CPU pool's
/// completion flag). Plain stores and no fence off x86-64.
const STREAM_HELPERS: &str = "#ifndef RG_STREAM
#define RG_STREAM
typedef float rg_v4sf __attribute__((vector_size(16)));
static inline void rg_stream_f4(float *p, rg_v4sf v) {
#if defined(__x86_64__)
  if (((unsigned long)p & 15ul) == 0) {
#if defined(__clang__)
    __builtin_nontemporal_store(v, (rg_v4sf *)p);
#else
    __builtin_ia32_movntps(p, v);
#endif
    return;
  }
#endif
  __builtin_memcpy(p, &v, 16);
}
static inline void rg_stream_fence(void) {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
}
#endif";

const BF16_HELPERS: &str = "#ifndef RG_BF16_HELPERS
#define RG_BF16_HELPERS
static inline float rg_bf16_to_float(unsigned short x) { unsigned int u = ((unsigned int)x) << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned short rg_float_to_bf16(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }
#endif";

/// Float MAX as the UOp interpreter computes it (`ops::float_max`, IEEE 754-2019 `maximum`): a
/// NaN operand gives NaN (`a + b`), and +0 is above -0 (equal zeros: `a + b` is -0 only when both
/// are -0). One definition per C type `t`, under an include guard so that several kernels joined
/// into one C file (a batch compile, a CPU graph) define it once.
///
/// The common case (ordered and unequal, `islessgreater`: one compare and one well-predicted
/// branch) is `a > b ? a : b`, which gcc and clang compile to one `maxss`; equal or unordered
/// operands take the rare path. A reduce's chain of MAX is then about 3 instructions per element
/// (the nested-ternary form was about 12, with a branch per comparison: W11's max kernel on CLANG
/// went from 3.2 to 1.3 ms on a 4096x1024 input).
fn fmax_helper_src(t: &str) -> String {
    let guard = cat!("RG_FMAX_", t.to_ascii_uppercase());
    cat!(
        "#ifndef ",
        guard,
        "\n#define ",
        guard,
        "\nstatic inline ",
        t,
        " rg_fmax_",
        t,
        "(",
        t,
        " a, ",
        t,
        " b) \
         { return __builtin_islessgreater(a, b) ? (a > b ? a : b) \
         : ((a != a || b != b || a == 0) ? a + b : a); }\n#endif"
    )
}

/// The name of the float MAX helper for `d` (`rg_fmax_` and the C type).
fn fmax_helper(d: DType) -> &'static str {
    match d.scalar {
        Scalar::Float64 => "rg_fmax_double",
        Scalar::Float16 => "rg_fmax_half",
        _ => "rg_fmax_float",
    }
}

/// gcc's vector width for a kernel that calls `rg_exp2f`: 512 bits where the target has them. The
/// helper computes in double, so gcc's default preference on AVX-512 hosts (256 bits) leaves 4
/// lanes per vector, and W6's exp kernels vectorized with 2 of them. The pragma goes before the
/// helpers, so they inline as before; clang and other targets never see it.
pub const WIDE_VECTORS: &str = "#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC target(\"prefer-vector-width=512\")
#endif";

/// Whether the kernel's source gets [`WIDE_VECTORS`]: it calls `rg_exp2f` and `CPU_WIDE` is not 0.
fn wide_vectors(needs: &Needs) -> bool {
    needs.helpers.contains("rg_exp2f") && crate::helpers::getenv("CPU_WIDE", 1) != 0
}

fn preamble(needs: &Needs) -> Vec<String> {
    let mut out = vec![];
    if needs.math {
        out.push("#include <math.h>".to_string());
    }
    if needs.half {
        out.push(HALF_TYPEDEF.to_string());
    }
    if wide_vectors(needs) {
        out.push(WIDE_VECTORS.to_string());
    }
    for h in &needs.helpers {
        if let Some(t) = h.strip_prefix("rg_fmax_") {
            out.push(fmax_helper_src(t));
        } else if *h == "rg_exp2f" {
            out.push(crate::renderer::exp2::c_helper());
        } else if *h == "rg_stream" {
            out.push(STREAM_HELPERS.to_string());
        }
    }
    if needs.bf16 {
        out.push(BF16_HELPERS.to_string());
    }
    for v in &needs.vectors {
        out.push(cat!(
            "typedef ",
            scalar_c(v.scalar),
            " ",
            vector_name(*v),
            " __attribute__((vector_size(",
            v.itemsize(),
            "), aligned(",
            v.scalar.itemsize(),
            ")));"
        ));
    }
    out
}

impl ClangRenderer {
    fn math(&self, f: &str, x: &str, d: DType, needs: &mut Needs) -> Result<String> {
        needs.math = true;
        Ok(match d.scalar {
            Scalar::Float64 => cat!(f, "(", x, ")"),
            Scalar::Float32 | Scalar::BFloat16 => cat!(f, "f(", x, ")"),
            Scalar::Float16 => cat!("(half)(", f, "f((float)(", x, ")))"),
            s => bail!(Codegen, "CLANG: {f} of {}", s.long_name()),
        })
    }
}

impl CStyle for ClangRenderer {
    fn lang(&self) -> &CStyleLanguage {
        &self.lang
    }

    fn render_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        let d = d.base();
        if d.scalar == Scalar::Float16 {
            needs.half = true;
        }
        if d.count > 1 {
            if matches!(d.scalar, Scalar::Bool | Scalar::BFloat16) {
                bail!(Codegen, "CLANG: no vector type for {d}");
            }
            needs.vectors.insert(d);
            return Ok(vector_name(d));
        }
        Ok(Cow::Borrowed(scalar_c(d.scalar)))
    }

    fn render_buf_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        if d.scalar == Scalar::BFloat16 {
            needs.bf16 = true;
            return Ok("unsigned short".into());
        }
        self.render_dtype(d.base(), needs)
    }

    fn code_for_op(&self, op: Op, a: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
        let x = a.first().copied().unwrap_or("");
        // WHERE on vectors: only the gated vector load makes one, with a scalar gate (bool
        // vectors, the only other kind of condition, have no C type here)
        let vector_ok = matches!(
            op,
            Op::Unary(UnaryOps::NEG)
                | Op::Binary(BinaryOps::ADD | BinaryOps::MUL | BinaryOps::IDIV | BinaryOps::XOR)
                | Op::Ternary(TernaryOps::MULACC | TernaryOps::WHERE)
        );
        if d.count > 1 && !vector_ok {
            bail!(Codegen, "CLANG: no vector form of {} on {d}", op.name());
        }
        let y = a.get(1).copied().unwrap_or("");
        match op {
            // bool arithmetic as logic (`*` on _Bool trips -Wint-in-bool-context)
            Op::Binary(BinaryOps::MUL) if d.is_bool() => Ok(cat!("(", x, "&&", y, ")")),
            Op::Binary(BinaryOps::ADD) if d.is_bool() => Ok(cat!("(", x, "||", y, ")")),
            Op::Binary(BinaryOps::MAX) if d.is_float() => {
                let name = fmax_helper(d);
                needs.helpers.insert(name);
                Ok(cat!(name, "(", x, ",", y, ")"))
            }
            Op::Binary(BinaryOps::MAX) => Ok(cat!("((", x, ">", y, ")?", x, ":", y, ")")),
            Op::Binary(BinaryOps::MOD) if d.is_float() => {
                let t = self.render_dtype(d, needs)?;
                Ok(cat!("((", t, ")((long)(", x, ")%(long)(", y, ")))"))
            }
            Op::Unary(UnaryOps::SQRT) => self.math("sqrt", x, d, needs),
            // float exp2 inline (vectorizable; `renderer::exp2`), double through libm
            Op::Unary(UnaryOps::EXP2) if d.scalar == Scalar::Float64 => {
                self.math("exp2", x, d, needs)
            }
            Op::Unary(UnaryOps::EXP2) => {
                needs.helpers.insert("rg_exp2f");
                match d.scalar {
                    Scalar::Float32 | Scalar::BFloat16 => Ok(cat!("rg_exp2f(", x, ")")),
                    Scalar::Float16 => Ok(cat!("(half)(rg_exp2f((float)(", x, ")))")),
                    s => bail!(Codegen, "CLANG: exp2 of {}", s.long_name()),
                }
            }
            Op::Unary(UnaryOps::LOG2) => self.math("log2", x, d, needs),
            Op::Unary(UnaryOps::SIN) => self.math("sin", x, d, needs),
            _ => base_code_for_op(op, a, d, needs),
        }
    }

    fn render_const(&self, v: ConstValue, d: DType, needs: &mut Needs) -> Result<String> {
        if d.scalar == Scalar::BFloat16 {
            return base_render_const(
                self,
                v,
                DType {
                    scalar: Scalar::Float32,
                    ..d
                },
                needs,
            );
        }
        base_render_const(self, v, d, needs)
    }

    fn render_load(
        &self,
        out: DType,
        buf: &str,
        buf_dtype: DType,
        idx: &str,
        _local: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        render_load_bf16_emulated(self, "CLANG", out, buf, buf_dtype, idx, needs)
    }

    fn render_store(
        &self,
        buf: &str,
        buf_dtype: DType,
        var: &str,
        var_dtype: DType,
        idx: &str,
        _local: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        render_store_bf16_emulated(self, "CLANG", buf, buf_dtype, var, var_dtype, idx, needs)
    }

    fn render_bitcast(
        &self,
        x: &str,
        from: DType,
        to: DType,
        names: (&str, &str),
        lines: &mut Vec<String>,
        needs: &mut Needs,
    ) -> Result<String> {
        let (pre, out) = names;
        let storage = |d: DType, needs: &mut Needs| -> Result<Cow<'static, str>> {
            if d.scalar == Scalar::BFloat16 {
                needs.bf16 = true;
                return Ok("unsigned short".into());
            }
            self.render_dtype(d, needs)
        };
        let (ft, tt) = (storage(from, needs)?, storage(to, needs)?);
        let xv = if from.scalar == Scalar::BFloat16 {
            cat!("rg_float_to_bf16(", x, ")")
        } else {
            x.to_string()
        };
        super::push_memcpy_bitcast(lines, (&ft, &tt), (pre, out), &xv);
        Ok(if to.scalar == Scalar::BFloat16 {
            cat!("rg_bf16_to_float(", out, ")")
        } else {
            out.to_string()
        })
    }

    fn render_kernel(
        &self,
        name: &str,
        body: &str,
        params: &[Param],
        split: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        let mut args = base_params(self, params, needs)?;
        if split {
            args.push("int core".into());
            args.push("int ncores".into());
        }
        let mut call = vec![];
        let mut nvar = 0;
        for p in params {
            if p.is_buffer {
                let c = if p.mutable { "" } else { "const " };
                let t = self.render_buf_dtype(p.dtype, needs)?;
                let idx = p.name.trim_start_matches("data");
                call.push(cat!("(", c, t, "*)bufs[", idx, "]"));
            } else {
                call.push(cat!("vals[", nvar, "]"));
                nvar += 1;
            }
        }
        if split {
            call.push("core".into());
            call.push("ncores".into());
        }
        let mut src = preamble(needs);
        src.push(cat!(
            "void ",
            name,
            "(",
            args.join(", "),
            ") {\n",
            body,
            "\n}"
        ));
        let guard = if split {
            ""
        } else {
            "\n  if (core != 0) return;"
        };
        src.push(cat!("void ", name, "_rg(void **bufs, const int *vals, int core, int ncores) {\n  if (ncores < 1 || core < 0 || core >= ncores) return;", guard, "\n  ", name, "(", call.join(", "), ");\n}"));
        Ok(src.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_vector_names_are_tinygrads() {
        use Scalar::*;
        for s in [Float32, Float16, Float64, Int32, Uint8, Int64] {
            for n in [2u16, 3, 4, 8, 16] {
                let d = DType::new(s).vec(n);
                assert_eq!(vector_name(d), format!("{}{}", s.name(), n));
            }
        }
    }
}
