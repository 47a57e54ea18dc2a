//! Lane loads (beyond tinygrad 0.9.1; `CStyleLanguage::scalar_lane_loads`, the CLANG dialect): a
//! vector load whose every use reads one lane (a GEP) is rendered as one scalar load per lane,
//! `float val1 = data1[alu0+1];`, and each GEP as its lane's name, instead of one vector load
//! `float4 val0 = *((float4*)(data1+alu0));` read back as `val0[1]`.
//!
//! Why: gcc's SLP vectorizer does not group lane extracts of a vector loaded through a cast
//! pointer with the work that uses them, while it does group scalar loads of neighbouring
//! elements. W11's argmax kernel (`r_1024_256_4_4`, float4 loads compared lane by lane against the
//! row maximum) ran its 16 compares per iteration as scalar `vucomiss`/`setnp`/`cmovne` and
//! `vpinsrd` (1.38-1.41 ms in a C harness calling the CLANG device's build of the dumped kernel,
//! best of 15) and 0.28 ms from scalar loads, where gcc vectorizes the compares. 0.9.1's CLANG has
//! no float4 grouping at all, so these are its loads.
//!
//! Owns: the rendering of every LOAD UOp of the C-like dialects ([`render_load_uop`]): the choice
//! of lane loads ([`wanted`]) and their rendering ([`render`]); the GEPs read the lane names from
//! `State::lanes`. Each lane reads the element the vector load's lane held (`buf[idx+k]`), so
//! the values are the same bits.
//!
//! Not guaranteed: gated loads, and loads of which any use takes the whole vector (a vector ALU
//! op, a store, a cast), keep the vector load.

use super::{name_of, src_dtype, src_name, strip_parens, CStyle, State};
use crate::codegen::uops::{UOp, UOps};
use crate::dtype::DType;
use crate::ops::{BinaryOps, Op, TernaryOps};
use crate::renderer::text::cat;
use crate::Result;

/// Whether the load `u` has a gate (a valid source and an alternative value; a BARRIER or IF
/// source only orders it).
fn gated(u: &UOp) -> bool {
    u.src().len() > 3 && !matches!(u.src()[2].op(), UOps::BARRIER | UOps::IF)
}

/// Whether the load `u` of `d` renders as lane loads: the dialect asks for them, `d` is a vector,
/// the load has no gate and every use of it is a GEP.
pub(super) fn wanted<L: CStyle + ?Sized>(l: &L, st: &State, u: &UOp, d: DType) -> bool {
    l.lang().scalar_lane_loads && d.count > 1 && !gated(u) && !st.whole_used.contains_key(u)
}

/// Render the vector load `u` of `d` as one scalar load per lane (see the module doc).
pub(super) fn render<L: CStyle + ?Sized>(l: &L, st: &mut State, u: &UOp, d: DType) -> Result<()> {
    let buf = src_name(&st.r, u, 0)?.to_string();
    let raw_idx = src_name(&st.r, u, 1)?;
    // an inlined ADD chain reads the same with `+k` appended; anything else keeps its parentheses
    let idx = if u.src()[1].alu_op() == Some(Op::Binary(BinaryOps::ADD)) {
        strip_parens(raw_idx).to_string()
    } else {
        raw_idx.to_string()
    };
    let local = u.src()[0].op() == UOps::DEFINE_LOCAL;
    let buf_dtype = src_dtype(u, 0)?;
    let lane = d.scalar();
    let t = l.render_dtype(lane, &mut st.needs)?;
    let mut names = Vec::with_capacity(d.count as usize);
    for k in 0..d.count {
        let at = if k == 0 {
            strip_parens(&idx).to_string()
        } else {
            cat!(idx, "+", k)
        };
        let val = l.render_load(lane, &buf, buf_dtype, &at, local, &mut st.needs)?;
        let name = st.ssa("val", None);
        kk!(st; t, " ", name, " = ", val, ";");
        names.push(name);
    }
    st.lanes.insert(u.clone(), names);
    Ok(())
}

/// A LOAD UOp: lane loads where [`wanted`], else one load (under its gate, if any).
pub(super) fn render_load_uop<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    d: DType,
) -> Result<()> {
    if wanted(l, st, u, d) {
        return render(l, st, u, d);
    }
    let (buf, idx) = (src_name(&st.r, u, 0)?, src_name(&st.r, u, 1)?);
    let local = u.src()[0].op() == UOps::DEFINE_LOCAL;
    let mut val = l.render_load(
        d,
        buf,
        src_dtype(u, 0)?,
        strip_parens(idx),
        local,
        &mut st.needs,
    )?;
    if gated(u) {
        let (g, alt) = (name_of(&st.r, &u.src()[2])?, name_of(&st.r, &u.src()[3])?);
        let ops = [g, val.as_str(), alt];
        val = l.code_for_op(TernaryOps::WHERE.into(), &ops, d, &mut st.needs)?;
    }
    let t = l.render_dtype(d, &mut st.needs)?;
    let name = st.ssa("val", Some(u));
    kk!(st; t, " ", name, " = ", val, ";");
    Ok(())
}
