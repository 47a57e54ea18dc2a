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
//! Owns: the choice of the loops ([`plan`]: an innermost reduce RANGE whose PHIs include exactly
//! 8 float accumulators each updated only by such a 4-add chain over the 4 lanes of one ungated
//! float4 load of a global buffer or one float4 ALU value, each step's operand order the same in
//! all 8, no IF in the loop, the accumulators
//! read nowhere else in the loop) and the lines this form adds: the vector accumulator before the
//! loop ([`open`]), the prefetches ([`after_load`]), the transpose and adds in place of the 8
//! PHI assignments ([`phi`]) and the lanes back after the loop ([`close`]).
//!
//! Not guaranteed: other shapes (4 rows, unrolls other than 4, a MAX, a chain over scalars such
//! as softmax's exponentials, which C computes one lane at a time) keep their scalar chains; the
//! prefetch distance is LLVM's, measured on another machine.

use super::{name_of, CStyle, State};
use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};
use crate::dtype::{DType, Scalar};
use crate::ops::{BinaryOps, Op};
use crate::renderer::llvmir::prefetch::{streaming_loads, PREFETCH_BYTES};
use crate::renderer::text::cat;
use crate::Result;

/// Rows kept in one vector accumulator.
const ROWS: usize = 8;
/// Lanes of each row's load (the reduce unroll).
const LANES: usize = 4;

/// One loop in the transposed form.
#[derive(Clone, Debug)]
struct Group {
    /// The accumulators, in lane order.
    accs: Vec<UOp>,
    /// The float4 feeding each accumulator (a load, or a vector ALU value).
    vecs: Vec<UOp>,
    /// The PHI after which the transpose and adds are written (the group's last in the list).
    last_phi: UOp,
    /// Per lane step: the load's lane is the ADD's right operand (`acc+v`, else `v+acc`).
    acc_first: [bool; LANES],
    /// The vector accumulator's name, once [`open`] wrote it.
    vacc: String,
}

/// The loops of one kernel rendered in the transposed form, by RANGE.
#[derive(Debug, Default)]
pub(super) struct Plan {
    groups: Vec<Group>,
    by_range: UOpMap<usize>,
    by_phi: UOpMap<usize>,
    /// The loads followed by a prefetch.
    prefetch: UOpMap<()>,
}

impl Plan {
    /// The loads that must render as one vector load (not lane loads).
    pub(super) fn loads(&self) -> impl Iterator<Item = &UOp> {
        self.groups
            .iter()
            .flat_map(|g| g.vecs.iter())
            .filter(|u| u.op() == UOps::LOAD)
    }
    /// Whether `u` is one of the group PHIs (which write no assignment of their own).
    pub(super) fn is_phi(&self, u: &UOp) -> bool {
        self.by_phi.contains_key(u)
    }
}

/// The loops of `uops` that take this form (module doc), for a dialect that asks for it.
pub(super) fn plan<L: CStyle + ?Sized>(l: &L, uops: &[UOp], children: &UOpMap<usize>) -> Plan {
    let mut p = Plan::default();
    if !l.lang().transposed_rows {
        return p;
    }
    let streams = streaming_loads(uops);
    let mut open: Option<(usize, bool)> = None;
    for (i, u) in uops.iter().enumerate() {
        match u.op() {
            UOps::RANGE => open = Some((i, false)),
            UOps::IF => open = open.map(|(s, _)| (s, true)),
            UOps::ENDRANGE => {
                if let Some((s, false)) = open.take() {
                    let is_reduce = uops[s].range_arg().is_some_and(|(_, _, red)| red);
                    if is_reduce && u.src().first() == Some(&uops[s]) {
                        add_group(&mut p, uops, (s, i), children, &streams);
                    }
                }
            }
            _ => {}
        }
    }
    p
}

/// Add the group of the innermost loop `uops[s..=e]` when it has one.
fn add_group(
    p: &mut Plan,
    uops: &[UOp],
    (s, e): (usize, usize),
    children: &UOpMap<usize>,
    streams: &UOpMap<()>,
) {
    let mut found: Vec<(UOp, UOp, UOp, [bool; LANES])> = vec![];
    for u in &uops[s..e] {
        if u.op() != UOps::PHI {
            continue;
        }
        if let Some((acc, load, order)) = chain(u, children) {
            found.push((u.clone(), acc, load, order));
        }
    }
    if found.len() != ROWS || !found.iter().all(|f| f.3 == found[0].3) {
        return;
    }
    let pos: UOpMap<usize> = uops
        .iter()
        .enumerate()
        .map(|(i, u)| (u.clone(), i))
        .collect();
    let before = |u: &UOp| pos.get(u).is_some_and(|&i| i < s);
    // the PHIs are read only after the loop (where the lanes are back in the scalars)
    let read_after = |phi: &UOp| {
        uops[s..=e]
            .iter()
            .all(|u| !u.src().contains(phi) || u.op() == UOps::ENDRANGE)
    };
    if !found.iter().all(|f| before(&f.1) && read_after(&f.0)) {
        return;
    }
    let idx = p.groups.len();
    for f in &found {
        p.by_phi.insert(f.0.clone(), idx);
    }
    // the loads the rows read: the group's own, or those its computed values read in the loop
    let loads: Vec<&UOp> = if found.iter().all(|f| f.2.op() == UOps::LOAD) {
        found.iter().map(|f| &f.2).collect()
    } else {
        uops[s..e].iter().filter(|u| u.op() == UOps::LOAD).collect()
    };
    if loads.iter().all(|l| streams.contains_key(l)) {
        p.prefetch
            .extend(loads.into_iter().map(|l| (l.clone(), ())));
    }
    p.by_range.insert(uops[s].clone(), idx);
    p.groups.push(Group {
        acc_first: found[0].3,
        last_phi: found[ROWS - 1].0.clone(),
        accs: found.iter().map(|f| f.1.clone()).collect(),
        vecs: found.iter().map(|f| f.2.clone()).collect(),
        vacc: String::new(),
    });
}

fn is_f32(u: &UOp, count: u16) -> bool {
    u.dtype() == Some(DType::new(Scalar::Float32).vec(count))
}

/// `phi` as `PHI(acc, v3+(v2+(v1+(v0+acc))))` over the lanes of one ungated float4 load of a
/// global buffer or one float4 ALU value, each ADD and the accumulator read by nothing else:
/// (acc, that float4, per step whether `acc` is the left operand).
fn chain(phi: &UOp, children: &UOpMap<usize>) -> Option<(UOp, UOp, [bool; LANES])> {
    let [acc, top] = phi.src() else { return None };
    let used = |u: &UOp, n: usize| children.get(u) == Some(&n);
    if acc.op() != UOps::DEFINE_ACC || !is_f32(acc, 1) || !used(acc, 2) {
        return None;
    }
    let mut order = [false; LANES];
    let mut load: Option<UOp> = None;
    let mut x = top.clone();
    for k in (0..LANES).rev() {
        if x.alu_op() != Some(Op::Binary(BinaryOps::ADD)) || !is_f32(&x, 1) || !used(&x, 1) {
            return None;
        }
        let [a, b] = x.src() else { return None };
        let (gep, inner, acc_first) = if a.op() == UOps::GEP {
            (a, b, false)
        } else {
            (b, a, true)
        };
        let l = gep.src().first()?;
        let lane_ok = matches!(gep.arg(), UArg::Gep(i) if *i == k);
        if !lane_ok || gep.op() != UOps::GEP || load.as_ref().is_some_and(|p| p != l) {
            return None;
        }
        load = Some(l.clone());
        order[k] = acc_first;
        x = inner.clone();
    }
    let load = load?;
    let global = load.src().first().map(UOp::op) == Some(UOps::DEFINE_GLOBAL);
    let plain = load.op() == UOps::LOAD && load.src().len() <= 3 && global;
    let vector_alu = load.op() == UOps::ALU;
    let ok = is_f32(&load, LANES as u16) && (plain || vector_alu);
    (x == *acc && ok).then_some((acc.clone(), load, order))
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
    let shuffle = |st: &mut State, a: &str, b: &str, lanes: &str| {
        let name = st.ssa("alu", None);
        kk!(st; t, " ", name, " = __builtin_shufflevector(", a, ", ", b, ", ", lanes, ");");
        name
    };
    // rows r and r+4 side by side, then lanes interleaved by pairs of rows
    let w: Vec<String> = (0..4)
        .map(|r| shuffle(st, &v[r], &v[r + 4], "0,1,2,3,4,5,6,7"))
        .collect();
    let (lo, hi) = ("0,8,1,9,4,12,5,13", "2,10,3,11,6,14,7,15");
    let u0 = shuffle(st, &w[0], &w[1], lo);
    let u1 = shuffle(st, &w[0], &w[1], hi);
    let u2 = shuffle(st, &w[2], &w[3], lo);
    let u3 = shuffle(st, &w[2], &w[3], hi);
    let (even, odd) = ("0,1,8,9,4,5,12,13", "2,3,10,11,6,7,14,15");
    let steps = [(&u0, even), (&u0, odd), (&u1, even), (&u1, odd)];
    for (k, (src, lanes)) in steps.into_iter().enumerate() {
        let other = if k < 2 { &u2 } else { &u3 };
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
