//! The choice of transposed row accumulators (beyond tinygrad 0.9.1), shared by the CPU renderers:
//! CLANG writes the form with `__builtin_shufflevector` (`renderer/cstyle/row_transpose.rs`, whose
//! module doc gives the form and its measurements), LLVM with `shufflevector` (`walk.rs`).
//!
//! A group is the innermost reduce loop of a row reduction that `codegen/kernel/cpu_reduce.rs`
//! gives 8 rows at once: exactly 8 float accumulators, each updated only by a 4-add chain
//! `acc = v[3]+(v[2]+(v[1]+(v[0]+acc)))` over the lanes of one float4 (an ungated load of a global
//! buffer, or a vector ALU value such as a variance's squares), each step's operand order the
//! same in all 8, no IF in the loop, the accumulators defined before the loop and read nowhere
//! else in it. The renderer keeps the 8 accumulators in one 8-lane vector across the loop: each
//! iteration transposes the 8 float4 into 4 vectors whose lane `r` is row `r`'s element `k`
//! ([`transpose_masks`]) and adds them to the accumulator in `k` order, with the chain's operand
//! order. Lane `r` adds exactly row `r`'s chain's values in the chain's order: the same bits.
//!
//! Also chosen here: the group loops' loads to prefetch (CLANG; LLVM prefetches its streaming
//! loads anyway), and the chain's own ADD and GEP nodes, which a renderer that writes every node
//! (LLVM) skips. `CPU_ROWS=0` turns the form off on both renderers (part of the cache key).
//!
//! Not guaranteed: other shapes (4 rows, unrolls other than 4, a MAX, a chain over scalars such
//! as CLANG's one-lane-at-a-time exponentials) keep their scalar chains.

use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};
use crate::dtype::{DType, Scalar};
use crate::ops::{BinaryOps, Op};

/// Rows kept in one vector accumulator.
pub const ROWS: usize = 8;
/// Lanes of each row's float4 (the reduce unroll).
pub const LANES: usize = 4;

/// One loop in the transposed form.
#[derive(Clone, Debug)]
pub struct Group {
    /// The accumulators, in lane order.
    pub accs: Vec<UOp>,
    /// The float4 feeding each accumulator (a load, or a vector ALU value).
    pub vecs: Vec<UOp>,
    /// The PHI at which the transpose and adds are written (the group's last in the list).
    pub last_phi: UOp,
    /// Per lane step: the accumulator is the ADD's left operand (`acc+v`, else `v+acc`).
    pub acc_first: [bool; LANES],
    /// The vector accumulator's name, once the renderer opened the loop.
    pub vacc: String,
}

/// The loops of one kernel rendered in the transposed form.
#[derive(Debug, Default)]
pub struct Plan {
    pub groups: Vec<Group>,
    /// Group by RANGE.
    pub by_range: UOpMap<usize>,
    /// Group by PHI (the 8 PHIs of each group).
    pub by_phi: UOpMap<usize>,
    /// Loads followed by a prefetch (CLANG).
    pub prefetch: UOpMap<()>,
    /// The chains' ADDs, and their GEPs that nothing else reads.
    pub chain: UOpMap<()>,
}

impl Plan {
    /// The group loads that must render as one vector load (not lane loads).
    pub fn loads(&self) -> impl Iterator<Item = &UOp> {
        self.groups
            .iter()
            .flat_map(|g| g.vecs.iter())
            .filter(|u| u.op() == UOps::LOAD)
    }
    /// Whether `u` is one of the group PHIs (which write no assignment of their own).
    pub fn is_phi(&self, u: &UOp) -> bool {
        self.by_phi.contains_key(u)
    }
}

/// The shuffles of the transpose, as lane indices into the concatenation of two 8-lane vectors
/// (`a` lanes 0-7, `b` lanes 8-15): `pair` puts rows `r` and `r+4` side by side (two float4),
/// `lo`/`hi` interleave two such pairs, and step `k`'s vector is `steps[k]` of `(u0, u2)` for
/// `k < 2`, else of `(u1, u3)`.
pub struct TransposeMasks {
    pub pair: [u32; 8],
    pub lo: [u32; 8],
    pub hi: [u32; 8],
    pub steps: [[u32; 8]; LANES],
}

pub fn transpose_masks() -> TransposeMasks {
    let (even, odd) = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]);
    TransposeMasks {
        pair: [0, 1, 2, 3, 4, 5, 6, 7],
        lo: [0, 8, 1, 9, 4, 12, 5, 13],
        hi: [2, 10, 3, 11, 6, 14, 7, 15],
        steps: [even, odd, even, odd],
    }
}

/// How many list nodes read each node.
pub fn child_counts(uops: &[UOp]) -> UOpMap<usize> {
    let mut out = UOpMap::default();
    for u in uops {
        for s in u.src() {
            *out.entry(s.clone()).or_insert(0) += 1;
        }
    }
    out
}

/// The loops of `uops` that take the form (module doc); empty when `CPU_ROWS=0`. `streams`:
/// the list's streaming loads (`prefetch::streaming_loads`).
pub fn plan(uops: &[UOp], children: &UOpMap<usize>, streams: &UOpMap<()>) -> Plan {
    let mut p = Plan::default();
    if crate::helpers::getenv("CPU_ROWS", 1) == 0 {
        return p;
    }
    let mut open: Option<(usize, bool)> = None;
    for (i, u) in uops.iter().enumerate() {
        match u.op() {
            UOps::RANGE => open = Some((i, false)),
            UOps::IF => open = open.map(|(s, _)| (s, true)),
            UOps::ENDRANGE => {
                if let Some((s, false)) = open.take() {
                    let is_reduce = uops[s].range_arg().is_some_and(|(_, _, red)| red);
                    if is_reduce && u.src().first() == Some(&uops[s]) {
                        add_group(&mut p, uops, (s, i), children, streams);
                    }
                }
            }
            _ => {}
        }
    }
    p
}

/// One PHI's chain: (phi, acc, float4, operand order, the chain's nodes).
type Found = (UOp, UOp, UOp, [bool; LANES], Vec<UOp>);

/// Add the group of the innermost loop `uops[s..=e]` when it has one.
fn add_group(
    p: &mut Plan,
    uops: &[UOp],
    (s, e): (usize, usize),
    children: &UOpMap<usize>,
    streams: &UOpMap<()>,
) {
    let found: Vec<Found> = uops[s..e]
        .iter()
        .filter(|u| u.op() == UOps::PHI)
        .filter_map(|u| chain(u, children).map(|(a, v, o, c)| (u.clone(), a, v, o, c)))
        .collect();
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
        p.chain.extend(f.4.iter().map(|c| (c.clone(), ())));
    }
    // the loads the rows read: the group's own, or all those of the loop for computed values
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

/// `phi` as `PHI(acc, v3+(v2+(v1+(v0+acc))))` over the lanes of one float4 (module doc), each ADD
/// and the accumulator read by nothing else: (acc, the float4, per step whether `acc` is the left
/// operand, the ADDs and the GEPs only they read).
fn chain(phi: &UOp, children: &UOpMap<usize>) -> Option<(UOp, UOp, [bool; LANES], Vec<UOp>)> {
    let [acc, top] = phi.src() else { return None };
    let used = |u: &UOp, n: usize| children.get(u) == Some(&n);
    if acc.op() != UOps::DEFINE_ACC || !is_f32(acc, 1) || !used(acc, 2) {
        return None;
    }
    let mut order = [false; LANES];
    let mut vec: Option<UOp> = None;
    let mut nodes = vec![];
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
        if !lane_ok || gep.op() != UOps::GEP || vec.as_ref().is_some_and(|p| p != l) {
            return None;
        }
        nodes.push(x.clone());
        if used(gep, 1) {
            nodes.push(gep.clone());
        }
        vec = Some(l.clone());
        order[k] = acc_first;
        x = inner.clone();
    }
    let vec = vec?;
    let global = vec.src().first().map(UOp::op) == Some(UOps::DEFINE_GLOBAL);
    let plain = vec.op() == UOps::LOAD && vec.src().len() <= 3 && global;
    let ok = is_f32(&vec, LANES as u16) && (plain || vec.op() == UOps::ALU);
    (x == *acc && ok).then_some((acc.clone(), vec, order, nodes))
}
