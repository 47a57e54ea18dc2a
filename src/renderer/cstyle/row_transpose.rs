//! Transposed row accumulators (beyond tinygrad 0.9.1; `CStyleLanguage::transposed_rows`, the
//! CLANG dialect): the reduce loop of a row sum that `codegen/kernel/cpu_reduce.rs` gives 8 rows
//! at once, each row's own float accumulator fed the 4 lanes of one float4 per iteration (a load
//! of that row, or a vector ALU value computed in the loop such as a variance's squares:
//! `acc = v[3]+(v[2]+(v[1]+(v[0]+acc)))`), keeps the 8 accumulators in one `float8` across the
//! loop: each iteration takes the 8 rows' float4 vectors, transposes them with
//! `__builtin_shufflevector` (two rows per 8-lane vector, 4 unpacks, 4 two-source shuffles:
//! `vinsertf128`, `vunpck*ps`, `vshufps` on AVX) into 4 vectors whose lane `r` is row `r`'s
//! element `k`, and adds them to the accumulator in `k` order. Lane `r` then adds exactly the values
//! of row `r`'s chain, in the chain's order and with each ADD's operand order: the same bits as
//! the scalar chains (vector adds are lane-wise IEEE adds, `-ffp-contract=off`). The scalar
//! accumulators get the lanes back after the loop, where the stores read them.
//!
//! When the loop's loads (the group's own, or all the loads in the loop when the rows are computed
//! values) are all long contiguous streams (`renderer/llvmir/prefetch.rs`'s choice, shared with
//! LLVM), each is also followed by `__builtin_prefetch` of the address [`PREFETCH_BYTES`] ahead:
//! only a hint, the same bits.
//!
//! Why: gcc builds the 8 scalar chains' 8-wide adds from scalar loads with gathers (W2's sum,
//! 4096x4096, ran 2.53-2.59 ms in a C harness where the plain shuffles with the prefetch ran
//! 1.90; module doc of `cpu_reduce.rs`). Measured again here (harness, best of 40 alternated, a
//! loaded 2-core AVX-512 VM): scalar chains 4.46-4.67 ms, this form 2.78-3.14, with the prefetch
//! 2.45-2.74 (2 KiB ahead: no better). The variance's sum of squares in the same form (W10, 8192
//! rows of 1024): W10 steady ms 5.74-5.94 -> 4.82-4.93 on one thread, 2.88-2.94 -> 2.46-2.52 on
//! two, in `bench workloads`.
//!
//! Owns: the lines this form adds in C: the vector accumulator before the loop ([`open`]), the
//! prefetches ([`after_load`]), the transpose and adds in place of the 8 PHI assignments
//! ([`phi`]) and the lanes back after the loop ([`close`]). The choice of the loops (an
//! innermost reduce RANGE with exactly 8 such chains, ...) is `renderer/llvmir/rows.rs`', shared
//! with the LLVM renderer, which writes the same form; [`plan`] asks it for this dialect.
//!
//! Not guaranteed: other shapes (4 rows, unrolls other than 4, a MAX, a chain over scalars such
//! as softmax's exponentials, which C computes one lane at a time) keep their scalar chains; the
//! prefetch distance is LLVM's, measured on another machine.

use super::{name_of, CStyle, State};
use crate::codegen::uops::{UOp, UOpMap};
use crate::dtype::{DType, Scalar};
use crate::renderer::llvmir::prefetch::{streaming_loads, PREFETCH_BYTES};
use crate::renderer::llvmir::rows::{self, transpose_masks, Plan, ROWS};
use crate::renderer::text::cat;
use crate::Result;

/// The loops of `uops` that take this form (`llvmir/rows.rs`), for a dialect that asks for it.
pub(super) fn plan<L: CStyle + ?Sized>(l: &L, uops: &[UOp], children: &UOpMap<usize>) -> Plan {
    if !l.lang().transposed_rows {
        return Plan::default();
    }
    rows::plan(uops, children, &streaming_loads(uops))
}

/// Before the RANGE `u`: the vector accumulator of its group, from the scalar ones.
pub(super) fn open<L: CStyle + ?Sized>(l: &L, st: &mut State, u: &UOp) -> Result<()> {
    let Some(&g) = st.rows.by_range.get(u) else {
        return Ok(());
    };
    let t = l.render_dtype(DType::new(Scalar::Float32).vec(ROWS as u16), &mut st.needs)?;
    let accs = st.rows.groups[g].accs.clone();
    let names = accs.iter().map(|a| st.get(a)).collect::<Result<Vec<_>>>()?;
    let vacc = st.ssa("acc", None);
    kk!(st; t, " ", vacc, " = {", names.join(","), "};");
    st.rows.groups[g].vacc = vacc;
    Ok(())
}

/// After the LOAD `u`: its prefetch, when chosen.
pub(super) fn after_load(st: &mut State, u: &UOp) -> Result<()> {
    if !st.rows.prefetch.contains_key(u) {
        return Ok(());
    }
    let (buf, idx) = (name_of(&st.r, &u.src()[0])?, name_of(&st.r, &u.src()[1])?);
    let ahead = PREFETCH_BYTES / 4;
    let line = cat!(
        "__builtin_prefetch(",
        buf,
        "+",
        super::strip_parens(idx),
        "+",
        ahead,
        ", 0, 3);"
    );
    st.kk(&line);
    Ok(())
}

/// At the group PHI `u`: its accumulator's name; at the group's last, the transpose and the adds.
pub(super) fn phi<L: CStyle + ?Sized>(l: &L, st: &mut State, u: &UOp) -> Result<()> {
    let Some(&g) = st.rows.by_phi.get(u) else {
        return Ok(());
    };
    let acc = st.src(u, 0)?;
    st.r.insert(u.clone(), &acc);
    if st.rows.groups[g].last_phi != *u {
        return Ok(());
    }
    let group = st.rows.groups[g].clone();
    let t = l.render_dtype(DType::new(Scalar::Float32).vec(ROWS as u16), &mut st.needs)?;
    let v = group
        .vecs
        .iter()
        .map(|x| st.get(x))
        .collect::<Result<Vec<_>>>()?;
    let shuffle = |st: &mut State, a: &str, b: &str, lanes: &[u32; 8]| {
        let name = st.ssa("alu", None);
        let lanes = lanes.map(|x| x.to_string()).join(",");
        kk!(st; t, " ", name, " = __builtin_shufflevector(", a, ", ", b, ", ", lanes, ");");
        name
    };
    let m = transpose_masks();
    // rows r and r+4 side by side, then lanes interleaved by pairs of rows
    let w: Vec<String> = (0..4)
        .map(|r| shuffle(st, &v[r], &v[r + 4], &m.pair))
        .collect();
    let u0 = shuffle(st, &w[0], &w[1], &m.lo);
    let u1 = shuffle(st, &w[0], &w[1], &m.hi);
    let u2 = shuffle(st, &w[2], &w[3], &m.lo);
    let u3 = shuffle(st, &w[2], &w[3], &m.hi);
    for (k, lanes) in m.steps.iter().enumerate() {
        let (src, other) = if k < 2 { (&u0, &u2) } else { (&u1, &u3) };
        let lanes = lanes.map(|x| x.to_string()).join(",");
        let tk = cat!(
            "__builtin_shufflevector(",
            src,
            ", ",
            other,
            ", ",
            lanes,
            ")"
        );
        let vacc = &group.vacc;
        if group.acc_first[k] {
            kk!(st; vacc, " = ", vacc, "+", tk, ";");
        } else {
            kk!(st; vacc, " = ", tk, "+", vacc, ";");
        }
    }
    Ok(())
}

/// After the ENDRANGE `u`: the lanes back in the scalar accumulators.
pub(super) fn close(st: &mut State, u: &UOp) -> Result<()> {
    let Some(&g) = u.src().first().and_then(|r| st.rows.by_range.get(r)) else {
        return Ok(());
    };
    let group = st.rows.groups[g].clone();
    for (k, a) in group.accs.iter().enumerate() {
        let name = st.get(a)?;
        kk!(st; name, " = ", group.vacc, "[", k, "];");
    }
    Ok(())
}
