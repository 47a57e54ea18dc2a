//! Loads and stores for C dialects without a native bfloat16 type (CLANG, CUDA): bfloat16
//! buffers hold the 16 bits, converted through the `rg_bf16_to_float` / `rg_float_to_bf16`
//! helpers the renderer emits on demand. Does not handle vector bfloat16 accesses (an error).

use super::{CStyle, Needs};
use crate::dtype::{DType, Scalar};
use crate::renderer::text::cat;
use crate::{bail, Result};

/// A load for a dialect without a native bfloat16 type (CLANG, CUDA): bfloat16 buffers hold
/// `unsigned short` bits read through `rg_bf16_to_float`; vectors of other types are read
/// through a cast pointer; a value of another type than the buffer's is cast. `dialect` names
/// the renderer in errors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_load_bf16_emulated<L: CStyle + ?Sized>(
    l: &L,
    dialect: &str,
    out: DType,
    buf: &str,
    buf_dtype: DType,
    idx: &str,
    needs: &mut Needs,
) -> Result<String> {
    if buf_dtype.scalar == Scalar::BFloat16 {
        if out.count > 1 {
            bail!(Codegen, "{dialect}: vector loads of bfloat16");
        }
        needs.bf16 = true;
        let v = cat!("rg_bf16_to_float(", buf, "[", idx, "])");
        return if out.scalar == Scalar::BFloat16 {
            Ok(v)
        } else {
            l.render_cast(&[v.as_str()], out, needs)
        };
    }
    let val = if out.count > 1 {
        let t = l.render_dtype(buf_dtype.base().scalar().vec(out.count), needs)?;
        cat!("*((", t, "*)(", buf, "+", idx, "))")
    } else if l.lang().uses_ptr_arithmetic {
        cat!("*(", buf, "+", idx, ")")
    } else {
        cat!(buf, "[", idx, "]")
    };
    if out.scalar != buf_dtype.scalar {
        return l.render_cast(&[val.as_str()], out, needs);
    }
    Ok(val)
}

/// The store matching [`render_load_bf16_emulated`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_store_bf16_emulated<L: CStyle + ?Sized>(
    l: &L,
    dialect: &str,
    buf: &str,
    buf_dtype: DType,
    var: &str,
    var_dtype: DType,
    idx: &str,
    needs: &mut Needs,
) -> Result<String> {
    if buf_dtype.scalar == Scalar::BFloat16 {
        if var_dtype.count > 1 {
            bail!(Codegen, "{dialect}: vector stores of bfloat16");
        }
        needs.bf16 = true;
        return Ok(cat!(buf, "[", idx, "] = rg_float_to_bf16(", var, ");"));
    }
    if var_dtype.count > 1 {
        let t = l.render_dtype(buf_dtype.base().scalar().vec(var_dtype.count), needs)?;
        return Ok(cat!("*((", t, "*)(", buf, "+", idx, ")) = ", var, ";"));
    }
    Ok(cat!(buf, "[", idx, "] = ", var, ";"))
}
