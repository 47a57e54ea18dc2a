//! The lane-group fold (beyond tinygrad 0.9.1): scalar ALU trees that compute the same ops on the
//! lanes of vectors, one tree per lane, become one vector ALU tree whose lanes the scalar uses read
//! (`GEP`), on renderers with vector ALU ops (`RendererOpts::vector_alu`: the CPU renderers).
//! This is the per-lane work that feeds a scalar accumulator chain, as in a variance:
//! `acc = (v[3]-m)^2 + ((v[2]-m)^2 + (... + acc))` keeps its adds scalar and in order, while the
//! four subtractions and the four squares become one vector sub and one vector mul of `v`.
//!
//! Owns: [`fold_lane_groups`], run by [`super::vectorize_alus`] after its fold of vectors built
//! from lanes (whose choices it keeps). A scalar node is lane `i` of an `n`-lane template vector
//! when it is
//! - `GEP(v, i)` of an `n`-lane vector `v` that is not itself built from lanes (template `v`), or
//! - an ALU op the fold takes (one [`super::allows`] on vectors, not EXP2/LOG2/SIN) whose sources
//!   are lanes `i` of `n`-lane templates or leaves (scalars that are no lane), at least one a
//!   lane: the template is the op on the sources' templates, a leaf standing for its broadcast
//!   (a vector constant for a constant).
//!
//! Templates are hash-consed UOps, so two nodes with the same template compute the same op tree
//! on the same leaves and on the same lane of the same vectors. When every lane `0..n` of a
//! template occurs in the graph and no lane feeds a scalar ALU op the fold does not take
//! (directly or through other lanes: the C compiler's and LLVM's own vectorizers widen such
//! transcendentals over more lanes than one vector has, see `blocked`), each of those lane nodes
//! becomes `GEP(template, i)`. Then the lane PHIs `PHI(GEP(acc, i), GEP(v, i))` of every lane of
//! one vector accumulator (one per lane) become one vector `PHI(acc, v)`. Each lane computes the
//! same op on the same values as before, so the results are the scalar kernel's bits wherever
//! [`super::allows`] holds.
//!
//! Not guaranteed: a leaf that differs between lanes (a strided scalar load, as in a matmul's
//! lanes) makes the lanes different templates, which stay scalar: this fold never builds a vector
//! out of scalar lanes (a gather). Lanes of only some of a vector's lanes, loads and conversions
//! are not folded; whether a fold pays is judged by the rule above only.

use std::collections::HashMap;

use super::vectorize::{allows, in_order_geps, rebuild, rebuild_in};
use crate::codegen::pattern::PostOrder;
use crate::codegen::renderer::VectorAlu;
use crate::codegen::uops::{Srcs, UArg, UOp, UOpMap, UOps};
use crate::dtype::DType;
use crate::ops::{Op, TernaryOps, UnaryOps};

/// The widest vector whose lanes the fold tracks (a bit per lane).
const MAX_LANES: usize = 64;

/// A scalar node's place in a template: lane `i` of the vector `v`.
#[derive(Clone)]
struct Lane {
    v: UOp,
    i: usize,
}

/// Fold the complete lane groups of `sink`'s graph into vector ops `mode` allows.
pub fn fold_lane_groups(sink: &UOp, mode: VectorAlu) -> UOp {
    if mode == VectorAlu::None {
        return sink.clone();
    }
    fold_lane_groups_in(&PostOrder::of(sink), sink, mode)
}

/// [`fold_lane_groups`] over `order`, the post-order of `sink`'s graph.
pub(super) fn fold_lane_groups_in(order: &PostOrder, sink: &UOp, mode: VectorAlu) -> UOp {
    let (complete, at) = complete_templates(order, mode);
    if complete.is_empty() {
        return sink.clone();
    }
    // the lane of each rebuilt ALU lane node, by position in `order`
    let mut lanes: Vec<Option<Lane>> = Vec::with_capacity(order.nodes.len());
    let out = rebuild_in(order, &mut |i, n| {
        // a kept ALU node (its sources came back as they were, so their lanes are the ones the
        // first pass found) has the lane the first pass found; any other is looked at again
        let lane = match (n.op(), at.get(i)) {
            (UOps::ALU, Some(l)) if n.ptr_eq(order.nodes[i]) => l.clone(),
            _ => {
                let srcs = order.srcs(i);
                lane_of(&n, mode, &|k| lanes.get(*srcs.get(k)?).cloned().flatten())
            }
        };
        let (r, l) = match (n.dtype(), lane) {
            (Some(d), Some(l)) if complete.contains_key(&l.v) => (UOp::gep(&l.v, l.i, d), None),
            (Some(_), Some(l)) if n.op() == UOps::ALU => (n, Some(l)),
            _ => (n, None),
        };
        lanes.push(l);
        r
    });
    fold_lane_phis(&out.unwrap_or_else(|| sink.clone()))
}

/// `PHI(GEP(acc, i), GEP(v, i))` for every lane `i` of one vector accumulator `acc`, one PHI per
/// lane and no other PHI of `acc`: one vector `PHI(acc, v)`, each lane PHI its GEP.
fn fold_lane_phis(sink: &UOp) -> UOp {
    // per accumulator: its lane PHIs, or None once spoiled (a lane twice, a vector PHI)
    let mut groups: UOpMap<Option<Vec<Option<UOp>>>> = UOpMap::default();
    for &n in &PostOrder::of(sink).nodes {
        if n.op() != UOps::PHI {
            continue;
        }
        let dst = &n.src()[0];
        let (acc, i) = match (dst.op(), dst.arg()) {
            (UOps::GEP, UArg::Gep(i)) => (dst.src()[0].clone(), *i),
            _ => (dst.clone(), usize::MAX),
        };
        let count = lane_count(&acc);
        let g = groups.entry(acc).or_insert_with(|| Some(vec![None; count]));
        match g.as_mut().and_then(|g| g.get_mut(i)) {
            Some(slot @ None) => *slot = Some(n.clone()),
            _ => *g = None,
        }
    }
    let mut subst: UOpMap<UOp> = UOpMap::default();
    for (acc, phis) in groups {
        let Some(phis) = phis.and_then(|p| p.into_iter().collect::<Option<Vec<UOp>>>()) else {
            continue;
        };
        let vals: Vec<UOp> = phis.iter().map(|p| p.src()[1].clone()).collect();
        let in_order = acc.dtype().and_then(|vd| in_order_geps(&vals, vd));
        let Some(v) = in_order.filter(|_| acc.op() == UOps::DEFINE_ACC) else {
            continue;
        };
        let phi = UOp::phi(&acc, &v);
        for (i, p) in phis.into_iter().enumerate() {
            let gep = UOp::new(UOps::GEP, p.dtype(), [phi.clone()], UArg::Gep(i));
            subst.insert(p, gep);
        }
    }
    if subst.is_empty() {
        return sink.clone();
    }
    rebuild(sink, &mut |n| subst.get(&n).cloned().unwrap_or(n))
}

/// The templates of the graph in `order` with every lane present and none blocked ([`blocked`]),
/// and each node's lane when it is an ALU lane node (by position in `order`).
fn complete_templates(order: &PostOrder, mode: VectorAlu) -> (UOpMap<()>, Vec<Option<Lane>>) {
    let mut at: Vec<Option<Lane>> = Vec::with_capacity(order.nodes.len());
    let mut seen: HashMap<UOp, u64, crate::helpers::FxBuild> = HashMap::default();
    for (i, &n) in order.nodes.iter().enumerate() {
        let srcs = order.srcs(i);
        let known = |k: usize| at.get(*srcs.get(k)?).cloned().flatten();
        let l = match n.op() {
            UOps::ALU => lane_of(n, mode, &known),
            _ => None,
        };
        if let Some(l) = &l {
            *seen.entry(l.v.clone()).or_default() |= 1 << l.i;
        }
        at.push(l);
    }
    let blocked = blocked(order, &at, mode);
    let complete = seen
        .into_iter()
        .filter(|(v, mask)| *mask == full_mask(lane_count(v)) && !blocked.contains_key(v))
        .map(|(v, _)| (v, ()))
        .collect();
    (complete, at)
}

/// The templates whose lanes feed a scalar ALU op this fold never takes (a transcendental, or
/// an op the renderer has no vector form of), directly or through other blocked templates. A C
/// compiler's or LLVM's own vectorizer widens such scalar ops across all the lanes of a loop
/// body at once (eight of two float4s, where this fold would give four), and vectorizing only
/// their operands here would cost it that.
fn blocked(order: &PostOrder, at: &[Option<Lane>], mode: VectorAlu) -> UOpMap<()> {
    let mut blocked: UOpMap<()> = UOpMap::default();
    // consumers come after their sources in post order: walk backwards until nothing changes
    loop {
        let before = blocked.len();
        for (i, &n) in order.nodes.iter().enumerate().rev() {
            let blocks = match &at[i] {
                Some(l) => blocked.contains_key(&l.v),
                None => n.dtype().is_some_and(|d| d.count == 1) && !takes(n, mode),
            };
            if blocks {
                for &j in order.srcs(i) {
                    if let Some(l) = &at[j] {
                        blocked.insert(l.v.clone(), ());
                    }
                }
            }
        }
        if blocked.len() == before {
            return blocked;
        }
    }
}

/// Whether `n` is no ALU node, or an ALU op this fold takes on vectors under `mode`: one the
/// renderer allows lane-wise, other than the transcendentals (which the compilers widen better).
fn takes(n: &UOp, mode: VectorAlu) -> bool {
    let Some(op) = n.alu_op() else { return true };
    // the operand dtype decides what the renderer can do (WHERE: its value operands)
    let operand = match op {
        Op::Ternary(TernaryOps::WHERE) => n.src().get(1).and_then(|s| s.dtype()),
        _ => n.src().first().and_then(|s| s.dtype()),
    };
    let transcendental = matches!(
        op,
        Op::Unary(UnaryOps::EXP2 | UnaryOps::LOG2 | UnaryOps::SIN)
    );
    !transcendental && operand.is_some_and(|d| allows(mode, op, d))
}

fn full_mask(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

fn lane_count(v: &UOp) -> usize {
    v.dtype().map_or(0, |d| d.count as usize)
}

/// `n`'s lane, if it is one: a GEP of a vector not built from lanes, or an ALU node over lanes
/// (`known(k)`: the lane of `n`'s source `k` when that source is an ALU lane node).
fn lane_of(n: &UOp, mode: VectorAlu, known: &dyn Fn(usize) -> Option<Lane>) -> Option<Lane> {
    let d = n.dtype().filter(|d| d.count == 1)?;
    match n.op() {
        UOps::GEP => gep_lane(n),
        UOps::ALU => alu_lane(n, d, mode, known),
        _ => None,
    }
}

/// The lane a scalar GEP is, when its vector is not built from lanes.
fn gep_lane(n: &UOp) -> Option<Lane> {
    n.dtype().filter(|d| d.count == 1)?;
    let v = n.src().first()?;
    let count = lane_count(v);
    let UArg::Gep(i) = *n.arg() else { return None };
    let ok = v.op() != UOps::CAST && (2..=MAX_LANES).contains(&count) && i < count;
    ok.then(|| Lane { v: v.clone(), i })
}

/// An ALU node's lane: every source a lane `i` of the same width or a leaf, at least one a lane.
fn alu_lane(
    n: &UOp,
    d: DType,
    mode: VectorAlu,
    known: &dyn Fn(usize) -> Option<Lane>,
) -> Option<Lane> {
    if !takes(n, mode) {
        return None;
    }
    let src_lane = |k: usize, s: &UOp| match s.op() {
        UOps::GEP => gep_lane(s),
        _ => known(k),
    };
    // an ALU node has at most three sources (a longer list is left scalar): their lanes are
    // kept in place, and the template's sources are collected inline
    let mut found: [Option<Lane>; 4] = Default::default();
    if n.src().len() > found.len() {
        return None;
    }
    for (k, (f, s)) in found.iter_mut().zip(n.src()).enumerate() {
        *f = src_lane(k, s);
    }
    let first = found.iter().flatten().next()?.clone();
    let count = lane_count(&first.v);
    let srcs: Srcs = n
        .src()
        .iter()
        .zip(found)
        .map(|(s, l)| match l {
            Some(l) if l.i == first.i && lane_count(&l.v) == count => Some(l.v),
            Some(_) => None,
            None => broadcast(s, count),
        })
        .collect::<Option<Srcs>>()?;
    let v = UOp::new(UOps::ALU, Some(d.vec(count as u16)), srcs, n.arg().clone());
    Some(Lane { v, i: first.i })
}

/// The scalar `s` in every one of `count` lanes: a vector constant for a constant.
fn broadcast(s: &UOp, count: usize) -> Option<UOp> {
    let d = s.dtype().filter(|d| d.count == 1)?;
    let vd = d.vec(count as u16);
    Some(match s.const_value() {
        Some(c) => UOp::cnst(vd, c),
        None => UOp::vectorize(vec![s.clone(); count], vd),
    })
}

#[cfg(test)]
#[path = "lanes_tests.rs"]
mod tests;
