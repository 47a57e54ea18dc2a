//! The CUDA-C dialect of the C-style renderer (tinygrad 0.9.1 `CUDARenderer`, and `NVRenderer`,
//! the same language for the NV device), compiled by NVRTC without any include path.
//!
//! The kernel is `extern "C" __global__ void __launch_bounds__(L) NAME(...)` with `L` the product
//! of the local (`lidx`) launch sizes (1 without locals). Parameters, in this order, are what the
//! NV launcher writes at constant buffer 0's parameter base and what the CUDA fallback packs:
//! every buffer as a 64-bit pointer (DEFINE_GLOBAL index order, `const` when not an output), then
//! every DEFINE_VAR as `const int` (name order). SPECIAL is `blockIdx` (`gidx`), `threadIdx`
//! (`lidx`) or `blockIdx*blockDim+threadIdx` (`idx`); DEFINE_LOCAL is `__shared__` (16-byte
//! aligned, so vector accesses to it are legal); BARRIER is `__syncthreads();`.
//!
//! Self-contained source (NVRTC has no default include path, and `cuda_fp16.h` is not built in):
//! - `half` is rawgrad's own 2-byte struct: conversions through PTX `cvt` (round to nearest
//!   even), arithmetic computed in float and rounded once per operation (exact for `+ - * /` and
//!   `sqrt`, as float carries more than twice half's precision), the cuda_fp16 helper names
//!   `hexp2 hlog2 hsin hsqrt hrcp __hmax`; conversions out of `half` are explicit only, so no
//!   expression mixes it with the built-in operators ambiguously.
//! - bfloat16 values are held as `float` in registers and stored as `unsigned short` through the
//!   same round-to-nearest-even helpers as the CLANG dialect (tinygrad uses `nv_bfloat16`).
//! - vectors are CUDA's built-in `float4`-style types where one exists (2-4 lanes of 8/16/32-bit
//!   scalars, 2 lanes of 64-bit ones); other widths get a generated `__align__`ed struct with the
//!   lanes `x y z w a b c d ...` and a `make_T` constructor (tinygrad's `_make_cuda_dtype`).
//! - `INFINITY`/`NAN` are defined through `__int_as_float` (as tinygrad does).
//!
//! Where rawgrad differs from 0.9.1 (so results match the UOp interpreter): float MAX propagates
//! NaN (`rg_fmax`); bool ADD/MUL are `||`/`&&`; float MOD goes through `long long`; RECIP is
//! parenthesized.
//!
//! Tensor cores (sm_80+): each WMMA UOp calls a generated `__WMMA_8_16_16_<in>_float` helper that
//! runs one `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` through inline PTX; bfloat16
//! operand vectors are float vectors in registers, packed to 16 bits in the helper.
//!
//! Not guaranteed: vector ALU ops and bool vectors are refused;
//! integer division by zero gives whatever the GPU gives (no trap, as in tinygrad).

use std::borrow::Cow;

use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{ConstValue, DType, Scalar};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::renderer::cstyle::{
    base_code_for_op, base_params, base_render_const, render_cstyle, render_load_bf16_emulated,
    render_store_bf16_emulated, CStyle, CStyleLanguage, Needs, Param,
};
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, Result};

/// Lane names of vector structs (tinygrad's `_nms`).
const LANES: &[u8; 16] = b"xyzwabcdefghijkl";

/// The CUDA-C renderer for one SM version.
#[derive(Clone, Debug)]
pub struct CUDARenderer {
    opts: RendererOpts,
    lang: CStyleLanguage,
    sm: u32,
}

impl CUDARenderer {
    /// The `CUDA` device's renderer for `sm_XX` (`sm` = 90 for sm_90).
    pub fn new(sm: u32) -> CUDARenderer {
        CUDARenderer::for_device("CUDA", sm)
    }

    /// The `NV` device's renderer (tinygrad's `NVRenderer`: the same language).
    pub fn nv(sm: u32) -> CUDARenderer {
        CUDARenderer::for_device("NV", sm)
    }

    fn for_device(device: &str, sm: u32) -> CUDARenderer {
        CUDARenderer {
            opts: RendererOpts {
                device: device.into(),
                suffix: "CUDA".into(),
                supports_float4: true,
                has_local: true,
                has_shared: true,
                global_max: Some([i32::MAX as i64, 65535, 65535]),
                local_max: Some([1024, 1024, 64]),
                shared_max: 49152,
                tensor_cores: crate::renderer::tensor_cores::cuda(sm),
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
            lang: CStyleLanguage {
                kernel_prefix: "extern \"C\" __global__ ".into(),
                smem_align: "__align__(16) ".into(),
                smem_prefix: "__shared__ ".into(),
                smem_prefix_for_cast: false,
                arg_int_prefix: "const int".into(),
                barrier: "__syncthreads();".into(),
                ..CStyleLanguage::default()
            },
            sm,
        }
    }

    /// The SM version this renderer targets.
    pub fn sm(&self) -> u32 {
        self.sm
    }
}

impl Renderer for CUDARenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }
    fn render(&self, name: &str, uops: &[UOp]) -> Result<String> {
        render_cstyle(self, name, uops)
    }
}

/// The CUDA spelling of a scalar in registers (bfloat16 is held as float).
fn scalar_cuda(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "bool",
        Scalar::Int8 => "signed char",
        Scalar::Uint8 => "unsigned char",
        Scalar::Int16 => "short",
        Scalar::Uint16 => "unsigned short",
        Scalar::Int32 => "int",
        Scalar::Uint32 => "unsigned int",
        Scalar::Int64 => "long long",
        Scalar::Uint64 => "unsigned long long",
        Scalar::Float16 => "half",
        Scalar::BFloat16 | Scalar::Float32 => "float",
        Scalar::Float64 => "double",
    }
}

/// CUDA's built-in vector type for `d`, if there is one that is not deprecated.
fn builtin_vector(d: DType) -> Option<String> {
    let base = match d.scalar {
        Scalar::Int8 => "char",
        Scalar::Uint8 => "uchar",
        Scalar::Int16 => "short",
        Scalar::Uint16 => "ushort",
        Scalar::Int32 => "int",
        Scalar::Uint32 => "uint",
        Scalar::Float32 => "float",
        Scalar::Int64 if d.count == 2 => "longlong",
        Scalar::Uint64 if d.count == 2 => "ulonglong",
        Scalar::Float64 if d.count == 2 => "double",
        _ => return None,
    };
    (2..=4)
        .contains(&d.count)
        .then(|| format!("{base}{}", d.count))
}

/// The name of a generated vector struct: tinygrad's (`half4`, `float8`), `rg_`-prefixed where
/// CUDA has a (deprecated) built-in of that name (`double4`, `longlong4`).
fn struct_vector_name(d: DType) -> String {
    let deprecated_builtin =
        matches!(d.scalar, Scalar::Int64 | Scalar::Uint64 | Scalar::Float64) && d.count <= 4;
    let base = match d.scalar {
        Scalar::Int64 => "longlong",
        Scalar::Uint64 => "ulonglong",
        s => s.name(),
    };
    if deprecated_builtin {
        format!("rg_{base}{}", d.count)
    } else {
        format!("{base}{}", d.count)
    }
}

fn vector_name(d: DType) -> String {
    builtin_vector(d).unwrap_or_else(|| struct_vector_name(d))
}

/// The struct and `make_` function of a generated vector type.
fn vector_struct(d: DType) -> String {
    let (name, s) = (struct_vector_name(d), scalar_cuda(d.scalar));
    let lanes: Vec<String> = LANES[..d.count as usize]
        .iter()
        .map(|c| (*c as char).to_string())
        .collect();
    let args: Vec<String> = lanes.iter().map(|l| format!("{s} {l}")).collect();
    format!(
        "struct __align__({align}) {name} {{ {s} {fields}; }};\n__device__ inline {name} make_{name}({args}) {{ {name} r = {{{init}}}; return r; }}",
        align = d.itemsize().next_power_of_two().min(16),
        fields = lanes.join(", "),
        args = args.join(", "),
        init = lanes.join(", ")
    )
}

const PRELUDE: &str = "#define INFINITY (__int_as_float(0x7f800000))
#define NAN (__int_as_float(0x7fffffff))";

const HALF_TYPE: &str = "struct __align__(2) half {
  unsigned short bits;
  half() = default;
  __device__ half(float f) { asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(bits) : \"f\"(f)); }
  __device__ half(double d) { asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(bits) : \"d\"(d)); }
  template <typename T> __device__ half(T x) : half((float)x) {}
  __device__ float f() const { float r; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(bits)); return r; }
  __device__ explicit operator float() const { return f(); }
  __device__ explicit operator double() const { return (double)f(); }
  __device__ explicit operator bool() const { return f() != 0.0f; }
  __device__ explicit operator signed char() const { return (signed char)f(); }
  __device__ explicit operator unsigned char() const { return (unsigned char)f(); }
  __device__ explicit operator short() const { return (short)f(); }
  __device__ explicit operator unsigned short() const { return (unsigned short)f(); }
  __device__ explicit operator int() const { return (int)f(); }
  __device__ explicit operator unsigned int() const { return (unsigned int)f(); }
  __device__ explicit operator long long() const { return (long long)f(); }
  __device__ explicit operator unsigned long long() const { return (unsigned long long)f(); }
};
__device__ inline half operator+(half a, half b) { return half(a.f() + b.f()); }
__device__ inline half operator-(half a, half b) { return half(a.f() - b.f()); }
__device__ inline half operator*(half a, half b) { return half(a.f() * b.f()); }
__device__ inline half operator/(half a, half b) { return half(a.f() / b.f()); }
__device__ inline half operator-(half a) { half r; r.bits = a.bits ^ 0x8000u; return r; }
__device__ inline bool operator<(half a, half b) { return a.f() < b.f(); }
__device__ inline bool operator!=(half a, half b) { return a.f() != b.f(); }
__device__ inline half hexp2(half x) { return half(exp2f(x.f())); }
__device__ inline half hlog2(half x) { return half(log2f(x.f())); }
__device__ inline half hsin(half x) { return half(sinf(x.f())); }
__device__ inline half hsqrt(half x) { return half(sqrtf(x.f())); }
__device__ inline half hrcp(half x) { return half(1.0f / x.f()); }
__device__ inline half __hmax(half a, half b) { return half(rg_fmax(a.f(), b.f())); }";

/// `ops::float_max` (NaN propagates, +0 above -0), as the C renderer's helper.
const FMAX: &str = "__device__ inline float rg_fmax(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : (b > a ? b : (a == 0 ? a + b : a))); }
__device__ inline double rg_fmax(double a, double b) { return (a != a || b != b) ? a + b : (a > b ? a : (b > a ? b : (a == 0 ? a + b : a))); }";

const BF16_HELPERS: &str = "__device__ inline float rg_bf16_to_float(unsigned short x) { return __uint_as_float(((unsigned int)x) << 16); }
__device__ inline unsigned short rg_float_to_bf16(float f) { unsigned int u = __float_as_uint(f); if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }";

fn preamble(needs: &Needs) -> Vec<String> {
    let mut out = vec![PRELUDE.to_string()];
    // the half type's __hmax calls rg_fmax
    if needs.half || needs.helpers.contains("rg_fmax") {
        out.push(FMAX.to_string());
    }
    if needs.half {
        out.push(HALF_TYPE.to_string());
    }
    if needs.bf16 {
        out.push(BF16_HELPERS.to_string());
    }
    for v in &needs.vectors {
        if builtin_vector(*v).is_none() {
            out.push(vector_struct(*v));
        }
    }
    for w in &needs.wmma {
        out.push(wmma_helper(w));
    }
    out
}

/// The `__WMMA_8_16_16_<in>_float` helper: one `mma.sync.aligned.m16n8k16.row.col` with A as
/// four and B as two 32-bit registers of two 16-bit values each (lower half = lower lane, as
/// the PTX ISA's fragment layout for .f16x2/.bf16x2 puts it), C and D as four floats.
fn wmma_helper(w: &crate::codegen::uops::WmmaArg) -> String {
    let (ty, pack) = if w.dtype_in.scalar == Scalar::BFloat16 {
        // bfloat16 registers hold floats: pack them to their 16 bits here
        let pk = "  const float *af = (const float *)&a, *bf = (const float *)&b;
  unsigned int ap[4], bp[2];
  for (int i = 0; i < 4; i++) ap[i] = (unsigned int)rg_float_to_bf16(af[2*i]) | ((unsigned int)rg_float_to_bf16(af[2*i+1]) << 16);
  for (int i = 0; i < 2; i++) bp[i] = (unsigned int)rg_float_to_bf16(bf[2*i]) | ((unsigned int)rg_float_to_bf16(bf[2*i+1]) << 16);";
        (("float8", "float4", "bf16"), pk)
    } else {
        let pk =
            "  const unsigned int *ap = (const unsigned int *)&a, *bp = (const unsigned int *)&b;";
        (("half8", "half4", "f16"), pk)
    };
    let (ta, tb, ci) = ty;
    format!(
        "__device__ inline float4 __{name}({ta} a, {tb} b, float4 c) {{
{pack}
  asm(\"mma.sync.aligned.m16n8k16.row.col.f32.{ci}.{ci}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"
      : \"+f\"(c.x), \"+f\"(c.y), \"+f\"(c.z), \"+f\"(c.w)
      : \"r\"(ap[0]), \"r\"(ap[1]), \"r\"(ap[2]), \"r\"(ap[3]), \"r\"(bp[0]), \"r\"(bp[1]));
  return c;
}}",
        name = w.name
    )
}

impl CUDARenderer {
    fn unary_math(&self, f: &str, h: &str, x: &str, d: DType) -> Result<String> {
        Ok(match d.scalar {
            Scalar::Float16 => format!("{h}({x})"),
            Scalar::Float32 | Scalar::BFloat16 | Scalar::Float64 => format!("{f}({x})"),
            s => bail!(Codegen, "CUDA: {f} of {}", s.long_name()),
        })
    }
}

impl CStyle for CUDARenderer {
    fn lang(&self) -> &CStyleLanguage {
        &self.lang
    }

    fn render_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        let d = d.base();
        if d.scalar == Scalar::Float16 {
            needs.half = true;
        }
        if d.count > 1 && d.scalar == Scalar::BFloat16 {
            // registers hold bfloat16 as float (tensor-core operands are the only such vectors)
            needs.bf16 = true;
            return self.render_dtype(DType::new(Scalar::Float32).vec(d.count), needs);
        }
        if d.count > 1 {
            if d.scalar == Scalar::Bool || d.count as usize > LANES.len() {
                bail!(Codegen, "CUDA: no vector type for {d}");
            }
            needs.vectors.insert(d);
            return Ok(Cow::Owned(vector_name(d)));
        }
        Ok(Cow::Borrowed(scalar_cuda(d.scalar)))
    }

    fn render_buf_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        if d.scalar == Scalar::BFloat16 {
            needs.bf16 = true;
            return Ok("unsigned short".into());
        }
        self.render_dtype(d.base(), needs)
    }

    fn code_for_op(&self, op: Op, a: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
        if d.count > 1 {
            bail!(Codegen, "CUDA: no vector form of {} on {d}", op.name());
        }
        let x = a.first().copied().unwrap_or("");
        let y = a.get(1).copied().unwrap_or("");
        let half = d.scalar == Scalar::Float16;
        match op {
            Op::Binary(BinaryOps::MUL) if d.is_bool() => Ok(format!("({x}&&{y})")),
            Op::Binary(BinaryOps::ADD) if d.is_bool() => Ok(format!("({x}||{y})")),
            Op::Binary(BinaryOps::MAX) if d.is_bool() => Ok(format!("({x}||{y})")),
            Op::Binary(BinaryOps::MAX) if half => Ok(format!("__hmax({x},{y})")),
            Op::Binary(BinaryOps::MAX) if d.is_float() => {
                needs.helpers.insert("rg_fmax");
                Ok(format!("rg_fmax({x},{y})"))
            }
            Op::Binary(BinaryOps::MAX) => Ok(format!("max({x},{y})")),
            Op::Binary(BinaryOps::MOD) if d.is_float() => {
                let t = self.render_dtype(d, needs)?;
                Ok(format!("(({t})((long long)({x})%(long long)({y})))"))
            }
            Op::Unary(UnaryOps::RECIP) if half => Ok(format!("hrcp({x})")),
            Op::Unary(UnaryOps::RECIP) => Ok(format!("(1/{x})")),
            Op::Unary(UnaryOps::SQRT) => self.unary_math("sqrt", "hsqrt", x, d),
            Op::Unary(UnaryOps::EXP2) => self.unary_math("exp2", "hexp2", x, d),
            Op::Unary(UnaryOps::LOG2) => self.unary_math("log2", "hlog2", x, d),
            Op::Unary(UnaryOps::SIN) => self.unary_math("sin", "hsin", x, d),
            Op::Ternary(TernaryOps::WHERE | TernaryOps::MULACC) | Op::Binary(_) | Op::Unary(_) => {
                base_code_for_op(op, a, d, needs)
            }
            other => bail!(Codegen, "CUDA: {} is not an ALU op", other.name()),
        }
    }

    fn code_for_workitem(&self, name: &str, axis: usize) -> Result<String> {
        let Some(&dim) = b"xyz".get(axis) else {
            bail!(Codegen, "CUDA: launch axis {axis} of {name} (only 0-2)");
        };
        let dim = dim as char;
        Ok(match name.as_bytes().first() {
            Some(b'g') => format!("blockIdx.{dim}"),
            Some(b'l') => format!("threadIdx.{dim}"),
            Some(b'i') => format!("(blockIdx.{dim}*blockDim.{dim}+threadIdx.{dim})"),
            _ => bail!(Codegen, "CUDA: launch index {name:?} is not gidx/lidx/idx"),
        })
    }

    fn render_cast(&self, x: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
        let t = self.render_dtype(d, needs)?;
        match x {
            [one] => Ok(format!("({t})({one})")),
            many => {
                crate::ensure!(
                    many.len() == d.count as usize,
                    Codegen,
                    "CUDA: cast to {d} from {} values",
                    many.len()
                );
                Ok(format!("make_{t}({})", many.join(",")))
            }
        }
    }

    fn render_vector_cast(
        &self,
        x: &str,
        from: DType,
        to: DType,
        needs: &mut Needs,
    ) -> Result<String> {
        crate::ensure!(
            from.count == to.count,
            Codegen,
            "CUDA: vector cast from {from} to {to} changes the lane count"
        );
        let s = self.render_dtype(to.scalar(), needs)?;
        let mut lanes = vec![];
        for i in 0..from.count as usize {
            let lane = self.render_gep(x, i, from)?;
            lanes.push(format!("({s})({lane})"));
        }
        let lanes: Vec<&str> = lanes.iter().map(String::as_str).collect();
        self.render_cast(&lanes, to, needs)
    }

    fn render_gep(&self, x: &str, lane: usize, from: DType) -> Result<String> {
        match LANES.get(lane) {
            Some(c) if lane < from.count as usize => Ok(format!("{x}.{}", *c as char)),
            _ => bail!(Codegen, "CUDA: lane {lane} of a {from}"),
        }
    }

    fn render_const(&self, v: ConstValue, d: DType, needs: &mut Needs) -> Result<String> {
        if d.scalar == Scalar::BFloat16 {
            let f = DType {
                scalar: Scalar::Float32,
                ..d
            };
            return base_render_const(self, v, f, needs);
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
        render_load_bf16_emulated(self, "CUDA", out, buf, buf_dtype, idx, needs)
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
        render_store_bf16_emulated(self, "CUDA", buf, buf_dtype, var, var_dtype, idx, needs)
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
        let mut storage = |d: DType| -> Result<Cow<'static, str>> {
            if d.scalar == Scalar::BFloat16 {
                needs.bf16 = true;
                return Ok("unsigned short".into());
            }
            self.render_dtype(d, needs)
        };
        let (ft, tt) = (storage(from)?, storage(to)?);
        let xv = if from.scalar == Scalar::BFloat16 {
            format!("rg_float_to_bf16({x})")
        } else {
            x.to_string()
        };
        lines.push(format!("{ft} {pre} = {xv};"));
        lines.push(format!("{tt} {out};"));
        lines.push(format!("memcpy(&{out}, &{pre}, sizeof({out}));"));
        Ok(if to.scalar == Scalar::BFloat16 {
            format!("rg_bf16_to_float({out})")
        } else {
            out.to_string()
        })
    }

    fn kernel_modifier(&self, uops: &[UOp]) -> String {
        let threads: i64 = uops
            .iter()
            .filter(|u| u.op() == UOps::SPECIAL)
            .filter_map(|u| match u.arg() {
                UArg::Special { name, size, .. } if name.starts_with('l') => Some((*size).max(1)),
                _ => None,
            })
            .product();
        format!("__launch_bounds__({}) ", threads.max(1))
    }

    fn render_kernel(
        &self,
        name: &str,
        body: &str,
        params: &[Param],
        split: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        let _ = split;
        let args = base_params(self, params, needs)?;
        let mut src = preamble(needs);
        src.push(format!(
            "{}void {}{name}({}) {{\n{}\n}}",
            self.lang.kernel_prefix,
            needs.kernel_modifier,
            args.join(", "),
            body
        ));
        Ok(src.join("\n"))
    }
}

#[cfg(test)]
#[path = "cuda/tests.rs"]
mod tests;
