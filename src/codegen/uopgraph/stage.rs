//! Staging of a CPU tile's right-hand-side strip (rawgrad, beyond tinygrad 0.9.1, whose CPU
//! kernels read every operand from the buffer it lives in).
//!
//! Owns: [`stage_strips`], a pass over a linear UOp list: when the innermost reduce loop reads
//! values whose addresses do not depend on the loop that encloses it (a matmul tile's column
//! strip of the right-hand side, the same for every row tile), a loop before that enclosing loop
//! copies them, for every reduce step, into a contiguous stack buffer (a `DEFINE_LOCAL` of the
//! CPU renderers: a C array, an LLVM `alloca`), and the reduce loop reads them from there.
//!
//! Why: in a 1024-wide float32 matmul the strip's rows are 4 KiB apart, so its lines fall in a
//! few cache sets (L1 holds 12 of its 2048 lines, a 2 MiB 16-way L2 half of them) and the
//! hardware prefetchers, which stop at 4 KiB pages, do not fetch it: every row tile streamed the
//! strip from L3 again. Packed, the 128 KiB strip stays in L2. `bench workloads --workloads
//! W3,W7,W8,W12 --devices CLANG,LLVM --threads 1 --repeats 5` on this 2-core AVX-512 VM, steady
//! ms with `CPU_STAGE=0` then 1, CLANG / LLVM: W3 (1024^3) 46.8 / 48.5 -> 22.2 / 22.2, W7 4.77 /
//! 4.65 -> 4.04 / 3.73, W8 16.6 / 15.5 -> 15.2 / 14.6, W12 37.9 / 29.6 -> 35.8 / 27.4. W3 then
//! runs at 96-97 GFLOP/s, 90% of the machine's multiply-then-add ceiling: the kernels keep
//! INTERP's unfused rounding, so each lane takes a MUL and an ADD where the FMA ceiling counts one
//! FMA (a C loop of 24 independent 16-lane `a = a*x + y` ran 214.5 GFLOP/s contracted, 107.3
//! with `-ffp-contract=off`; a C harness of the staged matmul built contracted ran 142-149).
//!
//! What it keeps: every value is loaded from the same address and enters the same operations in
//! the same order, so the results are the unstaged kernel's bits. Only ungated loads of read-only
//! global buffers are staged (a gated load may not touch memory it skips).
//!
//! The buffer takes up to [`STAGE_MAX_BYTES`] (512 KiB: a 4096-deep strip of 32 columns, W4's
//! 4096^3 matmul, 5.4 -> 1.7 s on CLANG with one thread on the loaded VM) of the stack of the
//! thread that runs the kernel: the CPU pool's workers get 4 MiB stacks for it, and a thread that
//! calls a CPU kernel itself needs that much room (Rust's threads have 2 MiB, a main thread 8).
//!
//! A load whose address moves less than a cache line per reduce step ([`MIN_ROW_STRIDE`]) reads a
//! strip that is compact already, and is left in place (the conv tile's weights).
//!
//! Not guaranteed: the buffer size limit is chosen for this machine's 2 MiB L2, not searched; a
//! kernel with more than one reduce loop, a symbolic bound or a strip over the limit is left as it
//! is. `CPU_STAGE=0` turns the pass off.

use super::linear::{coef, int_const, trip_count};
use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};
use crate::dtype::dtypes;
use crate::ops::BinaryOps;
use crate::Result;

/// The largest staging buffer, in bytes (on the stack of the thread running the kernel).
pub const STAGE_MAX_BYTES: usize = 512 * 1024;

/// The shortest step, in float32 elements (a 64-byte cache line), that a staged load's address
/// takes per reduce step: a strip whose rows lie closer is compact in memory already. W5's conv
/// tile on LLVM reads its weights 9 elements apart per input channel; staging them cost 3-4% of
/// steady time and 8 ms of compile (`bench workloads --workloads W5 --devices LLVM`, `CPU_STAGE=1`
/// then 0: 5.27-5.38 / 5.12-5.13 ms, compile 28.9 / 20.7 ms).
const MIN_ROW_STRIDE: i64 = 16;

/// The name of the staging buffer.
const STAGE_NAME: &str = "stage";

/// What [`plan`] found: the loops and the loads to stage.
struct Plan {
    /// Position of the enclosing loop's RANGE (the staging loop goes right before it).
    outer: usize,
    /// The innermost reduce loop and its trip count.
    reduce: UOp,
    trips: i64,
    /// The staged loads in order, each with its lane offset in a staged row.
    loads: Vec<(UOp, i64)>,
    /// Each staged load's lane offset (the same as `loads`, by node).
    offsets: UOpMap<i64>,
    /// Lanes in one staged row (one reduce step).
    width: i64,
    /// The nodes placed inside the enclosing loop (position `outer` on).
    inside: UOpMap<()>,
}

/// `uops` with the right-hand-side strip staged where [`plan`] finds one, else `uops` unchanged.
pub fn stage_strips(uops: Vec<UOp>) -> Result<Vec<UOp>> {
    if crate::helpers::getenv("CPU_STAGE", 1) == 0 {
        return Ok(uops);
    }
    match plan(&uops) {
        Some(p) => Ok(apply(&uops, &p)),
        None => Ok(uops),
    }
}

/// The constant trip count of a RANGE starting at 0.
fn trips(r: &UOp) -> Option<i64> {
    let starts_at_zero = int_const(r.src().first()?)? == 0;
    starts_at_zero.then_some(trip_count(r)?)
}

/// Position of the ENDRANGE of the RANGE at `start`.
fn range_end(uops: &[UOp], start: usize) -> Option<usize> {
    let r = &uops[start];
    (start + 1..uops.len())
        .find(|&i| uops[i].op() == UOps::ENDRANGE && uops[i].src().first() == Some(r))
}

/// The loops and loads to stage, when the list has one reduce loop, innermost, enclosed by a
/// loop of at least two trips with no IF inside it, with ungated float32 loads of read-only global buffers whose
/// index depends on the reduce loop and not on the enclosing one.
fn plan(uops: &[UOp]) -> Option<Plan> {
    let reduces: Vec<usize> = (0..uops.len())
        .filter(|&i| uops[i].range_arg().is_some_and(|(_, _, red)| red))
        .collect();
    let [r2] = reduces[..] else { return None };
    let e2 = range_end(uops, r2)?;
    if uops[r2 + 1..e2].iter().any(|u| u.op() == UOps::RANGE) {
        return None;
    }
    let reduce = uops[r2].clone();
    let k = trips(&reduce)?;
    let r1 = (0..r2)
        .rev()
        .find(|&i| uops[i].op() == UOps::RANGE && range_end(uops, i).is_some_and(|e| e > e2))?;
    let outer = uops[r1].clone();
    // the copy runs before the enclosing loop: no branch may stand between it and the reduce
    if trips(&outer)? < 2 || uops[r1..e2].iter().any(|u| u.op() == UOps::IF) {
        return None;
    }
    let mut loads: Vec<(UOp, i64)> = vec![];
    let mut offsets: UOpMap<i64> = UOpMap::default();
    let mut width = 0i64;
    for u in &uops[r2 + 1..e2] {
        if offsets.contains_key(u) || !stageable(u, &reduce, &outer) {
            continue;
        }
        offsets.insert(u.clone(), width);
        loads.push((u.clone(), width));
        width += i64::from(u.dtype()?.count);
    }
    let bytes = width.checked_mul(k)?.checked_mul(4)?;
    if loads.is_empty() || bytes > STAGE_MAX_BYTES as i64 {
        return None;
    }
    let inside: UOpMap<()> = uops[r1..].iter().map(|u| (u.clone(), ())).collect();
    if !rebuildable(&inside, &loads) {
        return None;
    }
    Some(Plan {
        outer: r1,
        reduce,
        trips: k,
        loads,
        offsets,
        width,
        inside,
    })
}

/// An ungated float32 load of a read-only global buffer whose index depends on `reduce` and not
/// on `outer`, and whose rows are not already compact: a reduce step moves its address by at
/// least [`MIN_ROW_STRIDE`] elements, or by an amount the index does not show linearly.
fn stageable(u: &UOp, reduce: &UOp, outer: &UOp) -> bool {
    let [buf, idx] = u.src() else { return false };
    let read_only = matches!(
        buf.arg(),
        UArg::Global {
            is_output: false,
            ..
        }
    );
    u.op() == UOps::LOAD
        && buf.op() == UOps::DEFINE_GLOBAL
        && read_only
        && u.dtype().is_some_and(|d| d.scalar() == dtypes::float32)
        && idx.has_parent(reduce)
        && !idx.has_parent(outer)
        && coef(idx, reduce, &mut UOpMap::default()).map_or(true, |c| c.abs() >= MIN_ROW_STRIDE)
}

/// Every node of the loads' indexes placed inside the enclosing loop (`inside`) is a pure int
/// computation (an ALU, a CONST, or the reduce RANGE itself), so it can be computed again in the
/// staging loop.
fn rebuildable(inside: &UOpMap<()>, loads: &[(UOp, i64)]) -> bool {
    let mut stack: Vec<&UOp> = loads.iter().map(|(l, _)| &l.src()[1]).collect();
    while let Some(u) = stack.pop() {
        if !inside.contains_key(u) {
            continue;
        }
        match u.op() {
            UOps::RANGE => {
                if !u.range_arg().is_some_and(|(_, _, red)| red) {
                    return false;
                }
            }
            UOps::ALU | UOps::CONST => stack.extend(u.src()),
            _ => return false,
        }
    }
    true
}

/// `r * width + off`: the position of a staged row's lanes.
fn row(r: &UOp, width: i64, off: i64) -> UOp {
    let int = |v: i64| UOp::cnst(dtypes::int32, v);
    let base = UOp::alu(BinaryOps::MUL, dtypes::int32, vec![r.clone(), int(width)]);
    match off {
        0 => base,
        o => UOp::alu(BinaryOps::ADD, dtypes::int32, vec![base, int(o)]),
    }
}

/// The list with the staging loop before the enclosing loop, the staged loads reading the
/// buffer, and the nodes nothing reads any more dropped.
fn apply(uops: &[UOp], p: &Plan) -> Vec<UOp> {
    let elem = dtypes::float32;
    let size = usize::try_from(p.width * p.trips).unwrap_or(0);
    let stage = UOp::define_local(elem, STAGE_NAME, size);
    let mut out = Emitter::new(uops.len() + 8 * p.loads.len() + 8);
    let defs = uops
        .iter()
        .take_while(|u| matches!(u.op(), UOps::DEFINE_GLOBAL | UOps::DEFINE_VAR))
        .count();
    let mut map: UOpMap<UOp> = UOpMap::default();
    for (i, u) in uops.iter().enumerate() {
        if i == defs {
            out.push(&stage);
        }
        if i == p.outer {
            emit_copy_loop(uops, p, &stage, &mut out);
        }
        if let Some(off) = p.offsets.get(u) {
            let at = row(&p.reduce, p.width, *off);
            let staged = UOp::load(&stage, &at, u.dtype().unwrap_or(elem));
            out.emit(&staged);
            map.insert(u.clone(), staged);
            continue;
        }
        let v = rebuilt(u, &map);
        if !v.ptr_eq(u) {
            map.insert(u.clone(), v.clone());
        }
        out.push(&v);
    }
    drop_unread(out.list)
}

/// The staging loop: a RANGE over the reduce loop's bounds (a new loop, not a reduce) whose body
/// loads each staged value at the reduce step it counts and stores it to its row of `stage`;
/// the index nodes that do not depend on the reduce loop go before it.
fn emit_copy_loop(uops: &[UOp], p: &Plan, stage: &UOp, out: &mut Emitter) {
    let next_idx = uops.iter().filter_map(|u| u.range_arg()).map(|a| a.1);
    let (depth, _, _) = uops[p.outer].range_arg().unwrap_or((0, 0, false));
    let copy_loop = UOp::range(
        p.reduce.src()[0].clone(),
        p.reduce.src()[1].clone(),
        depth,
        next_idx.max().unwrap_or(0) + 1,
        false,
    );
    let mut done = hoist_invariants(p, out);
    out.emit(&copy_loop);
    done.insert(p.reduce.clone(), copy_loop.clone());
    for (load, off) in &p.loads {
        let idx = substitute(&load.src()[1], &mut done, &p.inside, out);
        let value = UOp::new(
            UOps::LOAD,
            load.dtype(),
            [load.src()[0].clone(), idx],
            UArg::None,
        );
        out.emit(&value);
        out.emit(&UOp::store(stage, &row(&copy_loop, p.width, *off), &value));
    }
    out.emit(&UOp::endrange(&copy_loop));
}

/// `u` with its sources replaced through `map` (itself when none is).
fn rebuilt(u: &UOp, map: &UOpMap<UOp>) -> UOp {
    if !u.src().iter().any(|s| map.contains_key(s)) {
        return u.clone();
    }
    let src: Vec<UOp> = (u.src().iter())
        .map(|s| map.get(s).cloned().unwrap_or_else(|| s.clone()))
        .collect();
    UOp::new(u.op(), u.dtype(), src, u.arg().clone())
}

/// The nodes of the staged loads' indexes placed inside the enclosing loop (in `inside`),
/// sources first.
fn inside_post_order(inside: &UOpMap<()>, roots: &[&UOp]) -> Vec<UOp> {
    let mut seen: UOpMap<()> = UOpMap::default();
    let mut order = vec![];
    let mut stack: Vec<(UOp, bool)> = roots.iter().map(|u| ((*u).clone(), false)).collect();
    stack.reverse();
    while let Some((u, expanded)) = stack.pop() {
        if expanded {
            order.push(u);
            continue;
        }
        if !inside.contains_key(&u) || seen.insert(u.clone(), ()).is_some() {
            continue;
        }
        stack.push((u.clone(), true));
        stack.extend(u.src().iter().rev().map(|s| (s.clone(), false)));
    }
    order
}

/// Emit, before the staging loop, the index nodes inside the enclosing loop that do not depend
/// on the reduce loop (so a later use outside the staging loop still sees them); returns them
/// mapped to themselves.
fn hoist_invariants(p: &Plan, out: &mut Emitter) -> UOpMap<UOp> {
    let roots: Vec<&UOp> = p.loads.iter().map(|(l, _)| &l.src()[1]).collect();
    let mut done: UOpMap<UOp> = UOpMap::default();
    // sources come first, and only nodes inside the enclosing loop can read the reduce loop
    let mut varies: UOpMap<()> = UOpMap::default();
    for u in inside_post_order(&p.inside, &roots) {
        if u == p.reduce || u.src().iter().any(|s| varies.contains_key(s)) {
            varies.insert(u, ());
        } else {
            out.emit(&u);
            done.insert(u.clone(), u);
        }
    }
    done
}

/// `idx` for the staging loop: the nodes inside the enclosing loop that depend on the reduce
/// loop built again with it replaced through `done` (which maps it to the staging loop), emitted
/// sources first.
fn substitute(idx: &UOp, done: &mut UOpMap<UOp>, inside: &UOpMap<()>, out: &mut Emitter) -> UOp {
    for u in inside_post_order(inside, &[idx]) {
        if done.contains_key(&u) {
            continue;
        }
        let v = rebuilt(&u, done);
        out.emit(&v);
        done.insert(u, v);
    }
    done.get(idx).cloned().unwrap_or_else(|| idx.clone())
}

/// The new list, and the nodes already in it (each node goes in once; a new node's CONST and ALU
/// sources not yet in it go just before it).
struct Emitter {
    list: Vec<UOp>,
    seen: UOpMap<()>,
}

impl Emitter {
    fn new(cap: usize) -> Emitter {
        Emitter {
            list: Vec::with_capacity(cap),
            seen: UOpMap::default(),
        }
    }

    /// Append `u` (an original node, or one rebuilt in its place).
    fn push(&mut self, u: &UOp) {
        if self.seen.insert(u.clone(), ()).is_none() {
            self.list.push(u.clone());
        }
    }

    /// Append a new node after its CONST and ALU sources not yet in the list.
    fn emit(&mut self, u: &UOp) {
        for s in u.src() {
            if s.op() == UOps::CONST {
                self.push(s);
            } else if s.op() == UOps::ALU && !self.seen.contains_key(s) {
                self.emit(s);
            }
        }
        self.push(u);
    }
}

/// `list` without the value nodes no STORE, loop, branch or kept node reads.
fn drop_unread(list: Vec<UOp>) -> Vec<UOp> {
    let mut read: UOpMap<()> = UOpMap::default();
    let mut keep = vec![false; list.len()];
    for (i, u) in list.iter().enumerate().rev() {
        let root = !matches!(
            u.op(),
            UOps::ALU | UOps::CONST | UOps::LOAD | UOps::CAST | UOps::GEP
        );
        if root || read.contains_key(u) {
            keep[i] = true;
            for s in u.src() {
                read.insert(s.clone(), ());
            }
        }
    }
    list.into_iter()
        .zip(keep)
        .filter_map(|(u, k)| k.then_some(u))
        .collect()
}
