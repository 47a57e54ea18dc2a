use super::{entries, pooled, POOL_CAP};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::dtypes;
use crate::ops::BinaryOps;

fn chain(n: i64) -> UOp {
    let v = UOp::define_var("n", 0, 9);
    let g = UOp::define_global(dtypes::float32, 0, false);
    let x = UOp::load(&g, &v.mul(4).add(n), dtypes::float32);
    x.mul(x.add(1.5)).max(0.0)
}

#[test]
fn equal_uops_built_separately_are_one_node() {
    let (a, b) = (chain(3), chain(3));
    assert!(a.ptr_eq(&b));
    assert!(a.src()[0].ptr_eq(&b.src()[0]));
    let c1 = UOp::cnst(dtypes::int32, 7);
    assert!(c1.ptr_eq(&UOp::cnst(dtypes::int32, 7)));
    // a different constant below the top is a different graph
    assert!(!a.ptr_eq(&chain(4)));
    assert_ne!(a, chain(4));
}

#[test]
fn different_dtypes_and_args_never_merge() {
    let pairs = [
        (UOp::cnst(dtypes::int32, 1), UOp::cnst(dtypes::int64, 1)),
        (
            UOp::cnst(dtypes::float32, 0.0),
            UOp::cnst(dtypes::float32, -0.0),
        ),
        (UOp::cnst(dtypes::float32, 1), UOp::cnst(dtypes::float64, 1)),
        (UOp::cnst(dtypes::bool, true), UOp::cnst(dtypes::int32, 1)),
        (
            UOp::define_global(dtypes::float32, 0, false),
            UOp::define_global(dtypes::float32, 0, true),
        ),
        (
            UOp::range_const(0, 4, 0, 0, false),
            UOp::range_const(0, 4, 0, 0, true),
        ),
        (UOp::special(0, "gidx0", 4), UOp::special(1, "gidx0", 4)),
    ];
    for (a, b) in &pairs {
        assert!(!a.ptr_eq(b), "{a:?} merged with {b:?}");
        assert_ne!(a, b);
    }
    let x = UOp::define_var("x", 0, 9);
    let (add, mul) = (x.add(&x), x.mul(&x));
    assert!(!add.ptr_eq(&mul));
    assert_eq!(add.alu_op(), Some(BinaryOps::ADD.into()));
    assert_eq!(mul.alu_op(), Some(BinaryOps::MUL.into()));
    // NaN constants of one bit pattern are one node (constants compare by bits)
    let (n1, n2) = (
        UOp::cnst(dtypes::float32, f64::NAN),
        UOp::cnst(dtypes::float32, f64::NAN),
    );
    assert!(n1.ptr_eq(&n2));
}

#[test]
fn dropping_a_graph_frees_its_interned_nodes() {
    let base = entries();
    let g = chain(11);
    let grown = entries();
    assert!(grown > base, "{base} -> {grown}");
    drop(g);
    assert_eq!(entries(), base);
    // many kernels' worth of graphs leave the table where it was
    for i in 0..2000 {
        let a = chain(i);
        let s = UOp::sink(vec![UOp::store(
            &UOp::define_global(dtypes::float32, 1, true),
            &UOp::cnst(dtypes::int32, i),
            &a,
        )]);
        assert_eq!(s.src()[0].src()[2], a);
    }
    assert_eq!(entries(), base);
}

#[test]
fn a_node_outlives_its_equal_twin_and_stays_shared() {
    let a = chain(5);
    let b = chain(5);
    drop(a);
    // the node is alive through `b`: a third build finds it
    assert!(chain(5).ptr_eq(&b));
    let n = UOp::new(UOps::NOOP, None, vec![b.clone()], UArg::None);
    drop(b);
    assert_eq!(n.src()[0], chain(5));
}

#[test]
fn nodes_built_on_another_thread_are_equal_but_not_shared() {
    let here = chain(8);
    let there = std::thread::spawn(|| chain(8)).join().unwrap();
    assert!(!here.ptr_eq(&there));
    assert_eq!(here, there);
    assert_eq!(here.structural_hash(), there.structural_hash());
    // dropping the other thread's node here leaves this thread's entries alone
    let base = entries();
    drop(there);
    assert_eq!(entries(), base);
    assert!(chain(8).ptr_eq(&here));
}

/// A graph taken apart leaves its nodes' allocations in the pool (never more than the cap), and
/// the nodes built from them afterwards are whole and interned: equal to, and shared with, a
/// second build, with no stale source or argument of the node the shell held before.
#[test]
fn dropped_nodes_are_reused_whole() {
    let g = chain(21);
    let before = pooled();
    drop(g);
    let after = pooled();
    assert!(after > before, "{before} -> {after}");
    let base = entries();
    let v = UOp::define_var("m", 0, 5);
    let c = UOp::cnst(dtypes::int32, 3);
    let a = v.add(&c).mul(&v);
    assert!(pooled() < after, "the new nodes took no shells");
    assert_eq!(a.alu_op(), Some(BinaryOps::MUL.into()));
    assert_eq!(a.src()[0].src(), &[v.clone(), c.clone()][..]);
    assert!(matches!(a.src()[0].src()[0].arg(), UArg::Var { name, .. } if name == "m"));
    assert!(a.ptr_eq(&UOp::define_var("m", 0, 5).add(3).mul(&v)));
    assert!(entries() > base);
    drop((a, v, c));
    assert_eq!(entries(), base);
    // a long chain dropped at once fills the pool up to its cap only
    let mut x = UOp::cnst(dtypes::int32, -1);
    for i in 0..(2 * POOL_CAP as i64) {
        x = x.add(UOp::cnst(dtypes::int32, i));
    }
    drop(x);
    assert!(pooled() <= POOL_CAP);
    assert_eq!(chain(21), chain(21));
}

/// A node found already built returns the new shell to the pool, and the shell's old sources
/// keep their other holders.
#[test]
fn an_interning_hit_recycles_the_new_shell() {
    let a = chain(31);
    let before = pooled();
    let b = chain(31);
    assert!(a.ptr_eq(&b));
    assert_eq!(
        pooled(),
        before.max(1),
        "every hit's shell back in the pool"
    );
    drop(a);
    assert_eq!(
        b.src()[0].src()[0].src()[1].src()[1],
        UOp::cnst(dtypes::int32, 31)
    );
}
