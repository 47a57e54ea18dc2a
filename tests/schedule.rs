//! Scheduler behaviour beyond kernel counts: schedule order and buffer numbering, multi-output
//! kernels, assigns (ordering, cycles, the contiguity rule), symbolic variables, LoadOps items,
//! `seen`, deep graphs, and the memory planner.

mod schedule_common;

use std::collections::HashSet;

use rawgrad::device::BufferRef;
use rawgrad::dtype::dtypes;
use rawgrad::engine::memory::{internal_memory_planner, memory_planner};
use rawgrad::engine::schedule::{create_schedule, create_schedule_with_vars, ScheduleItem};
use rawgrad::helpers::Context;
use rawgrad::lazy::LazyBuffer;
use rawgrad::ops::{BinaryOps, BufferOps, ConstArg, LazyOpArg, LoadOps, Op};
use rawgrad::shape::{Node, ShapeTracker};
use schedule_common::{check_schedule, kernels, Idx, T};

fn schedule(outs: &[&T]) -> rawgrad::Result<Vec<ScheduleItem>> {
    let lbs: Vec<LazyBuffer> = outs.iter().map(|t| t.0.clone()).collect();
    create_schedule(&lbs, &mut HashSet::new())
}

fn buf(t: &T) -> BufferRef {
    t.0.buffer().clone()
}

/// The MemBuffer indices of the LOADs of an AST, in pre-order.
fn load_idxs(si: &ScheduleItem) -> Vec<usize> {
    let mut out = Vec::new();
    for root in &si.ast {
        for op in root.lazyops() {
            if let (Op::Buffer(BufferOps::LOAD), Some(mb)) = (op.op(), op.membuffer()) {
                out.push(mb.idx);
            }
        }
    }
    out
}

#[test]
fn order_and_buffer_numbering() {
    let (a, b, c) = (T::empty(&[4]), T::empty(&[4]), T::empty(&[4]));
    let d = c.mul(&b).add(&a);
    let sched = schedule(&[&d]).unwrap();
    let kinds: Vec<Option<LoadOps>> = sched.iter().map(ScheduleItem::loadop).collect();
    let e = Some(LoadOps::EMPTY);
    assert_eq!(
        kinds,
        vec![e, e, e, None],
        "inputs are scheduled before their reader"
    );
    assert_eq!(sched[0].bufs, vec![buf(&c)], "first-use order: c, b, a");
    assert_eq!(sched[2].bufs, vec![buf(&a)]);
    let k = &sched[3];
    assert_eq!(
        k.bufs,
        vec![buf(&d), buf(&c), buf(&b), buf(&a)],
        "outputs first"
    );
    assert_eq!((k.outputs().len(), k.inputs().len()), (1, 3));
    assert_eq!(load_idxs(k), vec![1, 2, 3]);
    assert!(
        d.0.is_realized() && c.0.is_realized(),
        "scheduled buffers count as realized"
    );
    // Scheduling again costs nothing.
    assert!(schedule(&[&d]).unwrap().is_empty());
}

#[test]
fn multi_output_kernel() {
    let a = T::realized(&[4, 4]);
    let s = a.sum(Some(&[1]), false);
    let (x, y) = (s.add(1.0), s.mul(2.0));
    let sched = check_schedule(&[&y, &x], &[], true);
    assert_eq!(sched.len(), 1);
    let k = &sched[0];
    assert_eq!(k.ast.len(), 2);
    assert_eq!(
        k.bufs,
        vec![buf(&y), buf(&x), buf(&a)],
        "outputs in realize order"
    );
    for (i, root) in k.ast.iter().enumerate() {
        assert_eq!(root.op(), Op::Buffer(BufferOps::STORE));
        assert_eq!(root.membuffer().unwrap().idx, i);
    }
    let _g = Context::new(&[("MULTIOUTPUT", 0)]);
    let a = T::realized(&[4, 4]);
    let s = a.sum(Some(&[1]), false);
    // Each output recomputes the reduce in its own kernel.
    assert_eq!(kernels(&[&s.add(1.0), &s.mul(2.0)]), 2, "MULTIOUTPUT=0");
}

#[test]
fn assign_reads_run_before_the_write() {
    // test_assign_diamond_possible: the reader of the old value goes first.
    let a = T::realized(&[4]);
    let times_a = a.mul(3.0);
    let new_a = a.assign(&T::full(&[4], 2.0, dtypes::float32));
    let new = new_a.add(&times_a.sub(1.0).contiguous());
    let sched = schedule(&[&new]).unwrap();
    assert_eq!(sched.len(), 3);
    let reader = sched
        .iter()
        .position(|si| si.inputs().contains(&buf(&a)))
        .unwrap();
    let writer = sched
        .iter()
        .position(|si| si.outputs().contains(&buf(&a)))
        .unwrap();
    assert!(
        reader < writer,
        "read of a ({reader}) before the assign ({writer})"
    );
    assert_eq!(buf(&new_a), buf(&a), "the assign writes a's buffer");
}

#[test]
fn assign_cycles_are_errors() {
    // test_assign_diamond_cycle
    let a = T::realized(&[4]);
    let times_a = a.mul(3.0);
    let a2 = a.assign(&T::full(&[4], 2.0, dtypes::float32).contiguous());
    let new = a2.add(&times_a.sub(1.0));
    let e = schedule(&[&new]).unwrap_err();
    assert!(matches!(e, rawgrad::Error::Schedule(_)), "{e}");
    assert!(e.to_string().contains("cycle detected in graph"), "{e}");
    // test_crossunder_assign
    let (a, b) = (T::realized(&[4]), T::realized(&[4]));
    let c = a.add(9.0);
    let a2 = a.assign(&a.add(&b));
    let b2 = b.assign(&b.add(&c));
    assert!(schedule(&[&a2, &b2])
        .unwrap_err()
        .to_string()
        .contains("cycle"));
}

#[test]
fn crossover_and_multioutput_assigns() {
    // test_crossover_assign: a += b; b += a
    let (a, b) = (T::realized(&[4]), T::realized(&[4]));
    let a2 = a.assign(&a.add(&b));
    let b2 = b.assign(&b.add(&a2));
    let sched = schedule(&[&a2, &b2]).unwrap();
    assert_eq!(sched.len(), 2);
    assert_eq!(sched[0].outputs(), &[buf(&a)]);
    // test_simple_assignment_multioutput: three assigns off one reduce share one kernel.
    let a = T::realized(&[32, 32]);
    let (b, c, d) = (T::realized(&[32]), T::realized(&[32]), T::realized(&[32]));
    let r = a.sum(Some(&[1]), false);
    let (b2, c2, d2) = (
        b.assign(&r.add(&b)),
        c.assign(&r.add(&c)),
        d.assign(&r.add(&d)),
    );
    assert_eq!(kernels(&[&b2, &c2, &d2]), 1);
}

#[test]
fn assign_target_must_be_read_contiguously() {
    // test_post_permuted_assignment
    let (a, b) = (T::realized(&[4, 4]), T::realized(&[4, 4]));
    let a2 = a.assign(&a.permute(&[1, 0]).add(&b));
    let e = schedule(&[&a2]).unwrap_err();
    assert!(
        e.to_string()
            .contains("self operand of augmented assign must be contiguous"),
        "{e}"
    );
    // test_permuted_assignment_masked_view_possible
    let a = T::realized(&[4, 4]);
    let b = a
        .shrink(&[None, Some((0, 2))])
        .pad(&[None, Some((0, 2))], 2.0);
    let a2 = a.assign(&a.add(&b));
    assert_eq!(kernels(&[&a2]), 1);
    // test_permuted_assignment_masked_view_not_contiguous
    let a = T::realized(&[4, 4]);
    let b = a
        .shrink(&[None, Some((0, 2))])
        .pad(&[None, Some((0, 2))], 2.0)
        .permute(&[1, 0]);
    let a2 = a.assign(&a.add(&b));
    assert!(schedule(&[&a2])
        .unwrap_err()
        .to_string()
        .contains("contiguous"));
}

#[test]
fn assign_into_a_view_stores_through_it() {
    let t = T::realized(&[4, 4]);
    let rows = t.shrink(&[Some((1, 3)), None]);
    let x = T::empty(&[2, 4]);
    let a = rows.assign(&x.add(1.0));
    let sched = check_schedule(&[&a], &[], true);
    assert_eq!(sched.len(), 1);
    let store = sched[0].ast[0].membuffer().unwrap();
    assert_eq!(store.st, rows.0.st().clone());
    assert_eq!(sched[0].outputs(), &[buf(&t)]);
}

#[test]
fn symbolic_shapes_give_var_vals() {
    let i = Node::var("i", 1, 10).unwrap();
    let bound = i.bind(3).unwrap();
    let a = T::realized(&[10, 4]);
    let plus = |t: &LazyBuffer, v: f64| t.e(BinaryOps::ADD, &[&t.const_like(v).unwrap()]).unwrap();
    let shrunk = |b: &Node| {
        let arg = [(Node::Num(0), b.clone()), (Node::Num(0), Node::Num(4))];
        a.0.shrink(&arg).unwrap()
    };
    let out = T(plus(&shrunk(&bound), 1.0));
    let mut seen = HashSet::new();
    let (sched, var_vals) =
        create_schedule_with_vars(std::slice::from_ref(&out.0), &mut seen).unwrap();
    assert_eq!(sched.len(), 1);
    assert_eq!(var_vals.get(&i), Some(&3));
    assert_eq!(sched[0].var_vals.get(&i), Some(&3));
    let vars = sched[0].ast[0].vars();
    assert!(
        vars.contains(&i) && !vars.contains(&bound),
        "the AST holds the unbound Variable"
    );
    // A Variable constant becomes a ConstBuffer of the unbound Variable.
    let v =
        LazyBuffer::new_const(ConstArg::Var(bound.clone()), dtypes::int32, "CLANG", &[]).unwrap();
    let y = T::realized_dt(&[4], dtypes::int32);
    let out = y.add(&T(v
        .reshape(&[Node::Num(1)])
        .unwrap()
        .expand(&[Node::Num(4)])
        .unwrap()));
    let (sched, var_vals) =
        create_schedule_with_vars(std::slice::from_ref(&out.0), &mut seen).unwrap();
    assert_eq!(var_vals.get(&i), Some(&3));
    let consts: Vec<_> = sched[0].ast[0]
        .lazyops()
        .into_iter()
        .filter_map(|o| o.constbuffer().cloned())
        .collect();
    assert_eq!(consts[0].val, ConstArg::Var(i.clone()));
    // create_schedule refuses graphs with variables; two values of one variable conflict.
    let s2 = T(plus(&shrunk(&bound), 2.0));
    assert!(schedule(&[&s2])
        .unwrap_err()
        .to_string()
        .contains("bound variables"));
    let other = i.bind(4).unwrap();
    let lbs = [plus(&shrunk(&other), 3.0), plus(&shrunk(&bound), 4.0)];
    let e = create_schedule_with_vars(&lbs, &mut HashSet::new()).unwrap_err();
    assert!(e.to_string().contains("cannot merge var_vals"), "{e}");
}

#[test]
fn copies_are_loadops_items() {
    let a = T::realized(&[4, 4]);
    let c = T(a.0.copy_to_device("CLANG:1", false).unwrap());
    let sched = schedule(&[&c]).unwrap();
    assert_eq!(sched.len(), 1);
    assert_eq!(sched[0].loadop(), Some(LoadOps::COPY));
    assert_eq!(sched[0].ast[0].arg(), &LazyOpArg::Nbytes(64));
    assert_eq!(sched[0].bufs, vec![buf(&c), buf(&a)]);
    let _g = Context::new(&[("USE_COPY_KERNEL", 1)]);
    let a = T::realized(&[4, 4]);
    let c = T(a.0.copy_to_device("CLANG:1", false).unwrap());
    let sched = schedule(&[&c]).unwrap();
    assert!(sched[0].is_kernel(), "USE_COPY_KERNEL: a byte copy kernel");
    rawgrad::ops::verify_lazyop(&sched[0].ast).unwrap();
    assert_eq!(sched[0].ast[0].membuffer().unwrap().dtype, dtypes::uint8);
}

/// (Not run through `verify_lazyop`, which recurses over the AST.)
#[test]
fn deep_elementwise_chains_fuse_without_recursion() {
    let a = T::empty(&[4]);
    let mut x = a.clone();
    for i in 0..3000 {
        x = if i % 2 == 0 { x.add(1.5) } else { x.mul(0.5) };
    }
    let sched = schedule(&[&x]).unwrap();
    assert_eq!(sched.iter().filter(|s| s.is_kernel()).count(), 1);
    assert_eq!(sched.len(), 2, "the EMPTY and one kernel");
}

/// Three forced intermediates in a row, then the output: i1 and i3 can share memory.
#[test]
fn memory_planner_reuses_dead_buffers() {
    let a = T::empty(&[16]);
    let i1 = a.add(1.0).contiguous();
    let i2 = i1.mul(2.0).contiguous();
    let i3 = i2.add(3.0).contiguous();
    let out = i3.mul(4.0);
    let (b1, b2, b3) = (buf(&i1), buf(&i2), buf(&i3));
    let sched = schedule(&[&out]).unwrap();
    assert_eq!(sched.len(), 5);
    drop((i1, i2, i3));
    assert_eq!((b1.lb_refcount(), buf(&out).lb_refcount()), (0, 1));
    let lists: Vec<&[BufferRef]> = sched.iter().map(|si| si.bufs.as_slice()).collect();
    let assigned = internal_memory_planner(&lists, "").unwrap();
    assert_eq!(
        assigned.len(),
        3,
        "a and out are referenced, the rest is planned"
    );
    assert_eq!(assigned[&b1], assigned[&b3], "i3 reuses i1's memory");
    assert_ne!(assigned[&b1], assigned[&b2]);
    let planned = memory_planner(sched.clone()).unwrap();
    let outs: Vec<&BufferRef> = planned.iter().map(|si| &si.bufs[0]).collect();
    assert_eq!(outs[1], outs[3], "i1 and i3 share memory after planning");
    assert_ne!(outs[1], outs[2]);
    assert!(![&b1, &b2, &b3].contains(&outs[2]));
    assert_eq!(planned[4].bufs[0], buf(&out));
    assert_eq!(
        &planned[4].bufs[1], outs[3],
        "the reader follows the replacement"
    );
    let _g = Context::new(&[("NO_MEMORY_PLANNER", 1)]);
    assert!(internal_memory_planner(&lists, "").unwrap().is_empty());
    let unplanned = memory_planner(sched.clone()).unwrap();
    assert_eq!(unplanned[2].bufs, sched[2].bufs);
}

#[test]
fn memory_planner_recreates_views_over_the_replacement() {
    let a = T::empty(&[16]);
    let i1 = a.add(1.0).contiguous();
    let v = i1.getitem(&[Idx::S(Some(4), Some(8))]).contiguous();
    assert_eq!(v.0.op(), Op::Load(LoadOps::VIEW));
    let out = v.mul(2.0);
    let (b1, bv) = (buf(&i1), buf(&v));
    let sched = schedule(&[&out]).unwrap();
    drop((i1, v));
    assert_eq!(bv.lb_refcount(), 0);
    let lists: Vec<&[BufferRef]> = sched.iter().map(|si| si.bufs.as_slice()).collect();
    let assigned = internal_memory_planner(&lists, "").unwrap();
    let (new_base, new_view) = (&assigned[&b1], &assigned[&bv]);
    assert_eq!(&new_view.base(), new_base);
    assert_eq!((new_view.offset(), new_view.size()), (16, 4));
    assert_ne!(new_base, &b1);
}

#[test]
fn kernels_keep_the_reduce_input_shape() {
    let a = T::realized(&[4, 4]);
    let s = a.sum(Some(&[1]), false).add(1.0);
    let sched = check_schedule(&[&s], &[], true);
    let store = sched[0].ast[0].membuffer().unwrap();
    assert_eq!(
        store.st,
        ShapeTracker::from_shape(&[Node::Num(4), Node::Num(1)]).unwrap()
    );
    let add = &sched[0].ast[0].src()[0];
    assert_eq!(add.op(), Op::Binary(BinaryOps::ADD));
}
