//! From a UOp graph to the linear UOp list a renderer walks (tinygrad 0.9.1 `UOpGraph`).
//!
//! Owns: [`linearize_for`] ([`linearize`] plus, for a renderer with vector ALUs, the vector ALU
//! fold of `uopgraph/vectorize.rs` and the lane-group fold of `uopgraph/lanes.rs`, beyond 0.9.1),
//! [`linearize`] (wrap the roots in a SINK, rewrite with the constant folder and any extra
//! rules, keep what the SINK reaches, order it with tinygrad's heap toposort, hoist accumulators,
//! insert ENDRANGE/ENDIF when a scope empties, drop the SINK), [`type_verify`], [`flops_mem`], and
//! [`uop_cmp`] (tinygrad's `cmp_tuple` order, the toposort tie-break).
//!
//! The order is tinygrad's exactly: the heap is a copy of Python's `heapq` algorithm with the same
//! push order, so ties resolve the same way. Priority is minus the sum of `depth*1000 + index` over
//! the RANGE scopes holding a node (loop bodies are placed as soon as they can be); ties go by op
//! enum order, then arg (ignored for ALU, as in 0.9.1), dtype, and sources. A RANGE scope holds the
//! transitive children of the RANGE up to and including PHIs; an IF scope up to and including
//! STOREs.
//!
//! Not guaranteed: the output of a graph with a cycle-free but malformed structure (for example a
//! DEFINE_ACC whose loop sources are not RANGEs) is only rejected by [`type_verify`] where it checks.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::HashMap;

use crate::codegen::constant_folder::constant_folder;
use crate::codegen::pattern::{graph_rewrite, graph_rewrite_keep, PatternMatcher};
use crate::codegen::uops::{UArg, UOp, UOpHasher, UOps};
use crate::dtype::ConstValue;
use crate::ops::{BinaryOps, Op, TernaryOps};
use crate::{bail, ensure, Result};

mod lanes;
pub mod linear;
mod stage;
mod vectorize;
mod verify;
pub use stage::{stage_strips, STAGE_MAX_BYTES};
use vectorize::vectorize_alus_in;
pub use vectorize::{allows as vector_alu_allows, vectorize_alus};
pub use verify::type_verify;

/// A linear UOp list with its roots (tinygrad's `UOpGraph`).
#[derive(Clone, Debug)]
pub struct UOpGraph {
    pub sinks: Vec<UOp>,
    uops: Option<Vec<UOp>>,
}

impl UOpGraph {
    pub fn new(sinks: Vec<UOp>) -> UOpGraph {
        UOpGraph { sinks, uops: None }
    }

    /// Linearize (constant folder plus `extra_pm` rules), optionally verifying the result.
    pub fn linearize(
        &mut self,
        extra_pm: Option<&PatternMatcher>,
        type_verify: bool,
    ) -> Result<&[UOp]> {
        let uops = linearize(&self.sinks, extra_pm, type_verify)?;
        Ok(self.uops.insert(uops))
    }

    /// The linear list (linearized and verified on first use).
    pub fn uops(&mut self) -> Result<&[UOp]> {
        if self.uops.is_none() {
            self.uops = Some(linearize(&self.sinks, None, true)?);
        }
        match &self.uops {
            Some(u) => Ok(u),
            None => bail!(Internal, "UOpGraph: linearize left no list"),
        }
    }
}

/// The integer variables of a kernel as (name, min, max), sorted by name (the parameter order).
pub fn vars(uops: &[UOp]) -> Vec<(String, i64, i64)> {
    let mut out: Vec<(String, i64, i64)> = uops
        .iter()
        .filter_map(|u| match u.arg() {
            UArg::Var { name, min, max } if u.op() == UOps::DEFINE_VAR => {
                Some((name.clone(), *min, *max))
            }
            _ => None,
        })
        .collect();
    out.sort();
    out
}

/// The buffers of a kernel as (index, is an output), in list order.
pub fn globals(uops: &[UOp]) -> Vec<(usize, bool)> {
    uops.iter()
        .filter_map(|u| match u.arg() {
            UArg::Global { idx, is_output } => Some((*idx, *is_output)),
            _ => None,
        })
        .collect()
}

/// The argument position of each DEFINE_GLOBAL index: `slots[idx] == Some(position)`. A kernel
/// takes its buffers positionally, in DEFINE_GLOBAL order (tinygrad's `[si.bufs[i] for i, _ in
/// p.globals]`), and a buffer the folder removed leaves a gap (`None`) in the indices.
pub fn global_slots(uops: &[UOp]) -> Vec<Option<usize>> {
    let g = globals(uops);
    let mut slots = vec![None; g.iter().map(|(idx, _)| idx + 1).max().unwrap_or(0)];
    for (pos, (idx, _)) in g.into_iter().enumerate() {
        slots[idx] = Some(pos);
    }
    slots
}

/// Linearize `sinks` with the constant folder, followed by a second pass with the constant
/// folder plus `extra_pm` when given (as tinygrad does for renderer rules).
pub fn linearize(
    sinks: &[UOp],
    extra_pm: Option<&PatternMatcher>,
    verify: bool,
) -> Result<Vec<UOp>> {
    let cf = constant_folder()?;
    let mut sink = graph_rewrite(&UOp::sink(sinks.to_vec()), cf)?;
    if let Some(extra) = extra_pm {
        let both = cf.extend(extra.rules().to_vec())?;
        sink = graph_rewrite(&sink, &both)?;
    }
    order(&sink, verify)
}

/// [`linearize`] (no extra rules) for a renderer that emits the vector ALU ops `vector_alu`
/// allows: the lanes of every vector built from lanes fold into vector ops ([`vectorize_alus`],
/// beyond 0.9.1; `VECALU=0` turns it off) before the graph is ordered.
pub fn linearize_for(
    sinks: &[UOp],
    vector_alu: crate::codegen::renderer::VectorAlu,
    verify: bool,
) -> Result<Vec<UOp>> {
    let cf = constant_folder()?;
    let built = UOp::sink(sinks.to_vec());
    // an unchanged graph comes back with its post-order, which the vector fold walks again
    let (mut sink, walked) = graph_rewrite_keep(&built, cf)?;
    if crate::helpers::getenv("VECALU", 1) != 0 {
        sink = vectorize_alus_in(&sink, walked, vector_alu)?;
    } else {
        drop(walked);
    }
    order(&sink, verify)
}

/// Linearize with exactly the rules of `pm` (an empty matcher orders the graph as built).
pub fn linearize_with(sinks: &[UOp], pm: &PatternMatcher, verify: bool) -> Result<Vec<UOp>> {
    let sink = graph_rewrite(&UOp::sink(sinks.to_vec()), pm)?;
    order(&sink, verify)
}

fn order(sink: &UOp, verify: bool) -> Result<Vec<UOp>> {
    let g = Graph::build(sink);
    let uops = toposort(&g)?;
    if verify {
        type_verify(&uops)?;
    }
    Ok(uops)
}

thread_local! {
    /// The node count of the last graph [`Graph::build`] made on this thread.
    static GRAPH_SIZE: Cell<usize> = const { Cell::new(0) };
}

/// The largest size hint [`Graph::build`] takes (a larger graph grows as it is built).
const MAX_HINT: usize = 1 << 16;

/// A map keyed by borrowed UOps, hashed and compared by structure like [`crate::codegen::uops::UOpMap`].
type UOpRefMap<'a> = HashMap<&'a UOp, usize, std::hash::BuildHasherDefault<UOpHasher>>;

/// The reachable graph: nodes in DFS pre-order (tinygrad's `children` dict order), children
/// lists (in the order 0.9.1 appends them) and source lists by index, each stored flat (`*_off[i]
/// ..*_off[i + 1]` indexes `*_ids`), in-degrees, and the post-order (its `in_degree` dict order).
struct Graph<'a> {
    /// Borrowed from the graph under the SINK (which outlives the toposort).
    nodes: Vec<&'a UOp>,
    child_off: Vec<usize>,
    child_ids: Vec<usize>,
    src_off: Vec<usize>,
    src_ids: Vec<usize>,
    in_degree: Vec<usize>,
    post: Vec<usize>,
}

/// Group `edges` (key, value) by key into flat lists, keeping their order within a key.
fn group_edges(n: usize, edges: &[(usize, usize)], by_first: bool) -> (Vec<usize>, Vec<usize>) {
    let key = |e: &(usize, usize)| if by_first { e.0 } else { e.1 };
    let mut off = vec![0usize; n + 1];
    for e in edges {
        off[key(e) + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut ids = vec![0usize; edges.len()];
    for e in edges {
        let k = key(e);
        ids[fill[k]] = if by_first { e.1 } else { e.0 };
        fill[k] += 1;
    }
    (off, ids)
}

impl<'a> Graph<'a> {
    fn build(sink: &'a UOp) -> Graph<'a> {
        // sized like the last graph this thread ordered (kernels come in runs of similar size),
        // instead of growing node by node
        let hint = GRAPH_SIZE.try_with(Cell::get).unwrap_or(0).min(MAX_HINT);
        let mut nodes: Vec<&'a UOp> = Vec::with_capacity(hint);
        let mut post: Vec<usize> = Vec::with_capacity(hint);
        // (node, user): `user` is appended to the children of `node`
        let mut edges: Vec<(usize, usize)> = Vec::with_capacity(2 * hint);
        // structural keys borrowed from the graph (no reference counting)
        let mut index: UOpRefMap<'a> =
            UOpRefMap::with_capacity_and_hasher(hint, Default::default());
        let visit = |u: &'a UOp, nodes: &mut Vec<&'a UOp>, index: &mut UOpRefMap<'a>| -> usize {
            let id = nodes.len();
            index.insert(u, id);
            nodes.push(u);
            id
        };
        let root = visit(sink, &mut nodes, &mut index);
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (id, ref mut i)) = stack.last_mut() {
            let node: &'a UOp = nodes[id];
            if let Some(x) = node.src().get(*i) {
                if let Some(&xid) = index.get(x) {
                    edges.push((xid, id));
                    *i += 1;
                } else {
                    let xid = visit(x, &mut nodes, &mut index);
                    stack.push((xid, 0));
                }
                continue;
            }
            stack.pop();
            post.push(id);
            if let Some((pid, pi)) = stack.last_mut() {
                edges.push((id, *pid));
                *pi += 1;
            }
        }
        let n = nodes.len();
        let _ = GRAPH_SIZE.try_with(|h| h.set(n));
        let in_degree = nodes.iter().map(|u| u.src().len()).collect();
        let (child_off, child_ids) = group_edges(n, &edges, true);
        let (src_off, src_ids) = group_edges(n, &edges, false);
        Graph {
            nodes,
            child_off,
            child_ids,
            src_off,
            src_ids,
            in_degree,
            post,
        }
    }

    /// The users of node `i`, in 0.9.1's order (one entry per use).
    fn children(&self, i: usize) -> &[usize] {
        &self.child_ids[self.child_off[i]..self.child_off[i + 1]]
    }

    /// The sources of node `i` by index (one entry per use).
    fn parents(&self, i: usize) -> &[usize] {
        &self.src_ids[self.src_off[i]..self.src_off[i + 1]]
    }
}

/// A scope: its RANGE/IF node, membership (`member`: not yet placed; `holds`: at the start),
/// members left, and its toposort weight.
struct Scope {
    node: usize,
    member: Vec<bool>,
    holds: Vec<bool>,
    left: usize,
    weight: Option<i64>,
}

fn scopes(g: &Graph<'_>) -> Vec<Scope> {
    let n = g.nodes.len();
    let kind = |op: UOps| {
        g.post
            .iter()
            .copied()
            .filter(move |&i| g.nodes[i].op() == op)
    };
    let mut owners: Vec<usize> = kind(UOps::RANGE).chain(kind(UOps::IF)).collect();
    owners.reverse();
    owners
        .into_iter()
        .map(|p| {
            let u = &g.nodes[p];
            let end = if u.op() == UOps::RANGE {
                UOps::PHI
            } else {
                UOps::STORE
            };
            let mut member = vec![false; n];
            let mut left = 0;
            let mut stack: Vec<usize> = g.children(p).to_vec();
            while let Some(c) = stack.pop() {
                if member[c] || g.nodes[c].op() == UOps::SINK {
                    continue;
                }
                member[c] = true;
                left += 1;
                if g.nodes[c].op() != end {
                    stack.extend(g.children(c).iter().copied());
                }
            }
            let weight = u.range_arg().map(|(d, i, _)| (d * 1000 + i) as i64);
            Scope {
                node: p,
                holds: member.clone(),
                member,
                left,
                weight,
            }
        })
        .collect()
}

/// Python `heapq` over (priority, node) with tinygrad's UOp order as the tie-break.
struct PyHeap<'a> {
    items: Vec<(i64, usize)>,
    nodes: &'a [&'a UOp],
}

impl PyHeap<'_> {
    fn lt(&self, a: (i64, usize), b: (i64, usize)) -> bool {
        if a.0 != b.0 {
            return a.0 < b.0;
        }
        a.1 != b.1 && uop_cmp(self.nodes[a.1], self.nodes[b.1]) == Ordering::Less
    }

    fn sift_down(&mut self, start: usize, mut pos: usize) {
        let item = self.items[pos];
        while pos > start {
            let parent = (pos - 1) >> 1;
            if self.lt(item, self.items[parent]) {
                self.items[pos] = self.items[parent];
                pos = parent;
                continue;
            }
            break;
        }
        self.items[pos] = item;
    }

    fn sift_up(&mut self, mut pos: usize) {
        let end = self.items.len();
        let start = pos;
        let item = self.items[pos];
        let mut child = 2 * pos + 1;
        while child < end {
            let right = child + 1;
            if right < end && !self.lt(self.items[child], self.items[right]) {
                child = right;
            }
            self.items[pos] = self.items[child];
            pos = child;
            child = 2 * pos + 1;
        }
        self.items[pos] = item;
        self.sift_down(start, pos);
    }

    fn push(&mut self, item: (i64, usize)) {
        self.items.push(item);
        let last = self.items.len() - 1;
        self.sift_down(0, last);
    }

    fn pop(&mut self) -> Option<(i64, usize)> {
        let last = self.items.pop()?;
        if self.items.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.items[0], last);
        self.sift_up(0);
        Some(top)
    }
}

enum Item {
    Node(usize),
    End(UOp),
}

/// The still-open RANGE scope holding a PHI that `x` reads, when `x` is not in that scope
/// itself: such a node reads the loop's final value and is placed after the ENDRANGE. (0.9.1's
/// priorities place it there when the loop's remaining members are ready first; a vector
/// accumulator updated lane by lane can leave a lane's PHI users ready inside the loop.)
fn open_phi_scope(g: &Graph<'_>, scopes: &[Scope], x: usize) -> Option<usize> {
    scopes.iter().position(|s| {
        s.left > 0
            && !s.holds[x]
            && g.nodes[s.node].op() == UOps::RANGE
            && g.parents(x)
                .iter()
                .any(|&p| g.nodes[p].op() == UOps::PHI && s.holds[p])
    })
}

/// The toposort's list so far. A DEFINE_ACC with loop sources goes right before the first placed
/// RANGE among them (after accumulators already put there); it is kept aside with that position
/// and merged in at the end instead of shifting the list at every accumulator.
struct Placed {
    out: Vec<Item>,
    /// (position in `out`, node) of every placed RANGE, in list order.
    ranges: Vec<(usize, usize)>,
    /// (position in `out` it goes before, DEFINE_ACC node), in placement order.
    hoisted: Vec<(usize, usize)>,
    /// Nodes placed (in `out` or `hoisted`).
    nodes: usize,
}

impl Placed {
    fn new(cap: usize) -> Placed {
        Placed {
            out: Vec::with_capacity(cap),
            ranges: vec![],
            hoisted: vec![],
            nodes: 0,
        }
    }

    fn place(&mut self, g: &Graph<'_>, x: usize) -> Result<()> {
        let u = g.nodes[x];
        self.nodes += 1;
        if u.op() == UOps::DEFINE_ACC && u.src().len() > 1 {
            let first = self
                .ranges
                .iter()
                .find(|&&(_, r)| u.src().iter().any(|s| s == g.nodes[r]));
            match first {
                Some(&(pos, _)) => self.hoisted.push((pos, x)),
                None => bail!(
                    Codegen,
                    "linearize: DEFINE_ACC {:?} has extra sources but none is a placed RANGE",
                    u.arg()
                ),
            }
        } else {
            if u.op() == UOps::RANGE {
                self.ranges.push((self.out.len(), x));
            }
            self.out.push(Item::Node(x));
        }
        Ok(())
    }

    /// The list with the accumulators merged in.
    fn finish(mut self, g: &Graph<'_>) -> Vec<UOp> {
        // stable: accumulators before the same RANGE keep their placement order
        self.hoisted.sort_by_key(|h| h.0);
        let mut hoisted = self.hoisted.into_iter().peekable();
        let mut uops = Vec::with_capacity(self.out.len() + self.nodes);
        for (pos, it) in self.out.into_iter().enumerate() {
            while let Some((_, x)) = hoisted.next_if(|h| h.0 == pos) {
                uops.push(g.nodes[x].clone());
            }
            uops.push(match it {
                Item::Node(i) => g.nodes[i].clone(),
                Item::End(u) => u,
            });
        }
        uops
    }
}

fn toposort(g: &Graph<'_>) -> Result<Vec<UOp>> {
    let mut scopes = scopes(g);
    let mut in_degree = g.in_degree.clone();
    let mut heap = PyHeap {
        items: vec![],
        nodes: &g.nodes,
    };
    // a node's priority only reads the scopes' membership of the node itself, which changes when
    // the node is placed (after its last push): fixed per node, computed once
    let prio: Vec<i64> = (0..g.nodes.len())
        .map(|u| {
            scopes
                .iter()
                .filter(|s| s.member[u])
                .filter_map(|s| s.weight)
                .map(|w| -w)
                .sum()
        })
        .collect();
    for (u, &d) in in_degree.iter().enumerate() {
        if d == 0 {
            heap.push((prio[u], u));
        }
    }
    let mut placed = Placed::new(g.nodes.len() + scopes.len());
    let mut deferred: Vec<(usize, usize)> = vec![];
    let mut forced = vec![false; g.nodes.len()];
    loop {
        let x = match heap.pop() {
            Some((_, x)) => x,
            // the loop's own members wait for a deferred node (a PHI's value fed back into the
            // loop): place the deferred nodes where 0.9.1's priorities put them
            None => match deferred.pop() {
                Some((_, x)) => {
                    forced[x] = true;
                    x
                }
                None => break,
            },
        };
        if !forced[x] {
            if let Some(s) = open_phi_scope(g, &scopes, x) {
                deferred.push((s, x));
                continue;
            }
        }
        placed.place(g, x)?;
        let mut released = vec![];
        for (si, s) in scopes.iter_mut().enumerate() {
            if s.member[x] {
                s.member[x] = false;
                s.left -= 1;
                if s.left == 0 {
                    // the users of this loop's PHIs that waited for it to end
                    released.extend(deferred.iter().filter(|(ds, _)| *ds == si).map(|d| d.1));
                    deferred.retain(|(ds, _)| *ds != si);
                    let owner = &g.nodes[s.node];
                    placed.out.push(Item::End(if owner.op() == UOps::RANGE {
                        UOp::endrange(owner)
                    } else {
                        UOp::endif(owner)
                    }));
                }
            }
        }
        for d in released {
            heap.push((prio[d], d));
        }
        for &c in g.children(x) {
            in_degree[c] -= 1;
            if in_degree[c] == 0 {
                heap.push((prio[c], c));
            }
        }
    }
    let count = placed.nodes;
    ensure!(
        count == g.nodes.len(),
        Internal,
        "linearize: the toposort placed {count} of {} nodes (a cycle?)",
        g.nodes.len()
    );
    let mut uops = placed.finish(g);
    match uops.pop() {
        Some(last) if last.op() == UOps::SINK => Ok(uops),
        other => bail!(
            Internal,
            "linearize: the list did not end with the SINK but with {other:?}"
        ),
    }
}

fn num_cmp(a: ConstValue, b: ConstValue) -> Ordering {
    match (a, b) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => a
            .as_f64()
            .partial_cmp(&b.as_f64())
            .unwrap_or(Ordering::Equal),
        _ => a.as_i128().cmp(&b.as_i128()),
    }
}

fn arg_rank(a: &UArg) -> u8 {
    match a {
        UArg::None => 0,
        UArg::Const(_) => 1,
        UArg::Alu(_) => 2,
        UArg::Global { .. } => 3,
        UArg::Var { .. } => 4,
        UArg::Local { .. } => 5,
        UArg::Acc { .. } => 6,
        UArg::Special { .. } => 7,
        UArg::Range { .. } => 8,
        UArg::Gep(_) => 9,
        UArg::Wmma(_) => 10,
    }
}

/// Python comparison of two args of the same op (tuples lexicographically, numbers numerically,
/// variables by name).
fn arg_cmp(a: &UArg, b: &UArg) -> Ordering {
    use UArg::*;
    match (a, b) {
        (Const(x), Const(y)) => num_cmp(*x, *y),
        (Alu(x), Alu(y)) => x.cmp(y),
        (
            Global {
                idx: i,
                is_output: o,
            },
            Global {
                idx: j,
                is_output: p,
            },
        ) => (i, o).cmp(&(j, p)),
        (Var { name: x, .. }, Var { name: y, .. }) => x.cmp(y),
        (Local { name: x, size: s }, Local { name: y, size: t }) => (x, s).cmp(&(y, t)),
        (Acc { buf: x, idx: i }, Acc { buf: y, idx: j }) => (x, i).cmp(&(y, j)),
        (
            Special {
                axis: a1,
                name: n1,
                size: s1,
            },
            Special {
                axis: a2,
                name: n2,
                size: s2,
            },
        ) => (a1, n1, s1).cmp(&(a2, n2, s2)),
        (
            Range {
                depth: d1,
                idx: i1,
                is_reduce: r1,
            },
            Range {
                depth: d2,
                idx: i2,
                is_reduce: r2,
            },
        ) => (d1, i1, r1).cmp(&(d2, i2, r2)),
        (Gep(x), Gep(y)) => x.cmp(y),
        (Wmma(x), Wmma(y)) => x.cmp(y),
        _ => arg_rank(a).cmp(&arg_rank(b)),
    }
}

/// tinygrad's `UOp.__lt__` as an ordering: (op enum order, arg (not for ALU), dtype, sources).
pub fn uop_cmp(a: &UOp, b: &UOp) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        if a.ptr_eq(b) {
            return Ordering::Equal;
        }
        let o = a.op().cmp(&b.op());
        if o != Ordering::Equal {
            return o;
        }
        // the arg only breaks a tie of ops (and not for ALU)
        if a.op() != UOps::ALU {
            let o = arg_cmp(a.arg(), b.arg());
            if o != Ordering::Equal {
                return o;
            }
        }
        let o = a.dtype().cmp(&b.dtype());
        if o != Ordering::Equal {
            return o;
        }
        // the first pair of sources that differ (the same node is the common case: no
        // structural comparison for it; different hashes settle most other pairs inline)
        let differ = |(x, y): &(&UOp, &UOp)| {
            !x.ptr_eq(y) && (x.structural_hash() != y.structural_hash() || x != y)
        };
        let (sa, sb) = (a.src(), b.src());
        match sa.iter().zip(sb).find(differ) {
            Some((x, y)) => {
                a = x;
                b = y;
            }
            None => return sa.len().cmp(&sb.len()),
        }
    }
}

/// The value of a loop bound for [`flops_mem`] (tinygrad's `uop_alu_resolve`): constants,
/// variables (their value in `var_vals`, else their maximum), SPECIAL (size-1), and MUL/SHL/ADD.
pub fn uop_alu_resolve(u: &UOp, var_vals: &HashMap<String, i64>) -> Result<i64> {
    let rec = |i: usize| match u.src().get(i) {
        Some(s) => uop_alu_resolve(s, var_vals),
        None => bail!(
            Codegen,
            "uop_alu_resolve: {} lacks source {i}",
            u.op().name()
        ),
    };
    match (u.op(), u.arg()) {
        (UOps::CONST, UArg::Const(v)) => Ok(v.as_i128() as i64),
        (UOps::DEFINE_VAR, UArg::Var { name, max, .. }) => Ok(*var_vals.get(name).unwrap_or(max)),
        (UOps::SPECIAL, UArg::Special { size, .. }) => Ok(size - 1),
        (UOps::ALU, UArg::Alu(Op::Binary(BinaryOps::MUL))) => Ok(rec(0)?.wrapping_mul(rec(1)?)),
        (UOps::ALU, UArg::Alu(Op::Binary(BinaryOps::SHL))) => {
            Ok(rec(0)?.wrapping_mul(1i64.wrapping_shl(rec(1)?.clamp(0, 63) as u32)))
        }
        (UOps::ALU, UArg::Alu(Op::Binary(BinaryOps::ADD))) => Ok(rec(0)?.wrapping_add(rec(1)?)),
        _ => bail!(Codegen, "uop_alu_resolve: cannot resolve {:?}", u),
    }
}

/// (ALU ops, bytes loaded and stored), each weighted by the trip counts of the enclosing loops
/// (and a vector ALU by its lanes).
/// With `ignore_indexing`, ALU ops that only compute load/store addresses and gates are skipped.
pub fn flops_mem(
    uops: &[UOp],
    ignore_indexing: bool,
    var_vals: &HashMap<String, i64>,
) -> Result<(i64, i64)> {
    let mut dont_count = std::collections::HashSet::new();
    if ignore_indexing {
        for u in uops {
            let idx_srcs: &[usize] = match (u.op(), u.src().len()) {
                (UOps::LOAD, n) if n > 3 => &[1, 2],
                (UOps::STORE, n) if n > 3 => &[1, 3],
                (UOps::LOAD | UOps::STORE, _) => &[1],
                _ => &[],
            };
            for &i in idx_srcs {
                if let Some(s) = u.src().get(i) {
                    dont_count.extend(s.sparents());
                }
            }
        }
    }
    let (mut flops, mut mem, mut mults) = (0i64, 0i64, 1i64);
    let mut stack = vec![];
    for u in uops {
        match u.op() {
            UOps::RANGE => {
                stack.push(mults);
                let end = u
                    .src()
                    .get(1)
                    .map(|e| uop_alu_resolve(e, var_vals))
                    .transpose()?;
                mults = mults.wrapping_mul(end.unwrap_or(1));
            }
            UOps::ENDRANGE => mults = stack.pop().unwrap_or(1),
            UOps::LOAD => mem += u.dtype().map_or(0, |d| d.itemsize() as i64) * mults,
            UOps::STORE => {
                let d = u.src().get(2).and_then(|v| v.dtype());
                mem += d.map_or(0, |d| d.itemsize() as i64) * mults;
            }
            UOps::ALU if !dont_count.contains(u) => {
                let w = if u.alu_op() == Some(Op::Ternary(TernaryOps::MULACC)) {
                    2
                } else {
                    1
                };
                // a vector ALU (the CPU renderers' fold) does one op per lane
                let lanes = u.dtype().map_or(1, |d| i64::from(d.count.max(1)));
                flops += mults * w * lanes;
            }
            UOps::WMMA if !dont_count.contains(u) => {
                if let UArg::Wmma(w) = u.arg() {
                    let p: usize = w.dims.iter().product();
                    flops += 2 * (p as i64) / 32 * mults;
                }
            }
            _ => {}
        }
    }
    Ok((flops, mem))
}

#[cfg(test)]
#[path = "uopgraph_tests.rs"]
mod tests;
