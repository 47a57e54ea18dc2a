//! Node identity, the lazy cache, buffer reference counts, realization and drop.

use super::*;
use crate::dtype::dtypes;
use crate::helpers::Context;
use crate::ops::{BinaryOps, UnaryOps};
use crate::shape::sints;

pub(crate) fn empty(shape: &[i64]) -> LazyBuffer {
    LazyBuffer::loadop(
        LoadOps::EMPTY,
        &sints(shape),
        dtypes::float32,
        "CLANG",
        LbArg::None,
        &[],
        false,
    )
    .unwrap()
}

pub(crate) fn realized(shape: &[i64], dtype: DType) -> LazyBuffer {
    let n = shape.iter().product::<i64>() as usize;
    let buf = Buffer::new("CLANG", n, dtype, BufferOptions::default());
    LazyBuffer::from_buffer(buf, &sints(shape)).unwrap()
}

#[test]
fn identity_semantics() {
    let a = empty(&[4]);
    let b = empty(&[4]);
    assert_eq!(a, a.clone());
    assert_ne!(a, b);
    assert!(a.is_base());
    assert_eq!(a.base(), &a);
    assert_eq!(a.shape(), sints(&[4]).as_slice());
    assert_eq!(a.size(), 4);
    assert_eq!(a.device(), "CLANG");
    assert_eq!(a.op(), Op::Load(LoadOps::EMPTY));
    let dbg = format!("{a:?}");
    assert!(dbg.starts_with("<LB CLANG (4,) float"), "{dbg}");
}

#[test]
fn lazycache_shares_identical_nodes() {
    let (a, b) = (empty(&[4]), empty(&[4]));
    let c1 = a.e(BinaryOps::ADD, &[&b]).unwrap();
    let c2 = a.e(BinaryOps::ADD, &[&b]).unwrap();
    assert_eq!(c1, c2);
    let c3 = b.e(BinaryOps::ADD, &[&a]).unwrap();
    assert_ne!(c1, c3, "source order is part of the key");
    let v1 = c1.reshape(&sints(&[2, 2])).unwrap();
    let v2 = c1.reshape(&sints(&[2, 2])).unwrap();
    assert_eq!(v1, v2);
    assert!(!v1.is_base());
    assert_eq!(v1.base(), &c1);
    {
        let _g = Context::new(&[("LAZYCACHE", 0)]);
        let d1 = a.e(BinaryOps::ADD, &[&b]).unwrap();
        let d2 = a.e(BinaryOps::ADD, &[&b]).unwrap();
        assert_ne!(d1, d2);
    }
    // CONST is always cached, even with LAZYCACHE=0.
    let _g = Context::new(&[("LAZYCACHE", 0)]);
    let (c1, c2) = (a.const_like(3.0).unwrap(), a.const_like(3.0).unwrap());
    assert_eq!(c1.base(), c2.base());
    assert_ne!(c1, c2, "its views are not");
}

#[test]
fn cache_entries_die_with_their_node() {
    let (a, b) = (empty(&[5]), empty(&[5]));
    let c = a.e(BinaryOps::MUL, &[&b]).unwrap();
    let key = cache_key(
        c.device_arc(),
        c.st(),
        c.dtype(),
        &Spec::Base {
            op: Op::Binary(BinaryOps::MUL),
            arg: LbArg::None,
            srcs: vec![a.clone(), b.clone()],
        },
    );
    assert!(lazycache_contains(&key));
    drop(c);
    assert!(!lazycache_contains(&key));
}

#[test]
fn buffer_refcounts() {
    let a = empty(&[4]);
    assert_eq!(a.buffer().lb_refcount(), 1);
    let view = a.reshape(&sints(&[2, 2])).unwrap();
    assert_eq!(a.buffer().lb_refcount(), 1, "views do not count");
    assert_eq!(view.buffer(), a.buffer());
    let t = realized(&[4], dtypes::float32);
    let buf = t.buffer().clone();
    assert_eq!(buf.lb_refcount(), 1);
    let asg = t.assign(&a).unwrap();
    assert_eq!(asg.buffer(), &buf, "ASSIGN shares the target's buffer");
    assert_eq!(buf.lb_refcount(), 2);
    drop(asg);
    assert_eq!(buf.lb_refcount(), 1);
    drop(t);
    assert_eq!(buf.lb_refcount(), 0);
}

#[test]
fn realization() {
    let a = empty(&[4]);
    assert!(!a.is_realized());
    assert!(a.srcs().is_some());
    let v = a.reshape(&sints(&[2, 2])).unwrap();
    a.mark_realized();
    assert!(a.is_realized());
    assert!(a.srcs().is_none());
    assert_eq!(a.realized().as_ref(), Some(a.buffer()));
    assert!(v.realized().is_none(), "a view is never realized itself");
    assert!(v.is_realized());
    assert_eq!(v.realized_buffer().as_ref(), Some(a.buffer()));
}

#[test]
fn from_buffer_checks_the_size() {
    let t = realized(&[2, 3], dtypes::int32);
    assert!(t.is_realized());
    assert_eq!(t.dtype(), dtypes::int32);
    let buf = Buffer::new("CLANG", 5, dtypes::float32, BufferOptions::default());
    let e = LazyBuffer::from_buffer(buf, &sints(&[2, 3])).unwrap_err();
    assert!(e.to_string().contains("holds 6 elements"), "{e}");
}

#[test]
fn zero_size_is_const_zero() {
    let z = LazyBuffer::loadop(
        LoadOps::EMPTY,
        &sints(&[2, 3, 0]),
        dtypes::float32,
        "CLANG",
        LbArg::None,
        &[],
        false,
    )
    .unwrap();
    assert_eq!(z.op(), Op::Load(LoadOps::CONST));
    assert_eq!(
        z.const_arg(),
        Some(&ConstArg::Value(ConstValue::Float(0.0)))
    );
    assert_eq!(z.size(), 0);
}

#[test]
fn const_args_are_coerced() {
    let i = realized(&[1], dtypes::int32);
    let c = i.const_like(1.0).unwrap();
    assert_eq!(
        c.base().const_arg(),
        Some(&ConstArg::Value(ConstValue::Int(1)))
    );
    let f = realized(&[1], dtypes::float32);
    let c = f.const_like(1i64).unwrap();
    assert_eq!(
        c.base().const_arg(),
        Some(&ConstArg::Value(ConstValue::Float(1.0)))
    );
    assert!(c.is_unrealized_unmasked_const());
    assert!(c.base().shape().is_empty());
}

#[test]
fn deep_graphs_drop_without_recursion() {
    let a = empty(&[4]);
    let mut x = a.clone();
    for _ in 0..50_000 {
        x = x.e(UnaryOps::SQRT, &[]).unwrap();
    }
    assert_eq!(a.buffer().lb_refcount(), 1);
    drop(x);
    assert_eq!(a.buffer().lb_refcount(), 1);
}

#[test]
fn lazybuffers_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<LazyBuffer>();
}

#[test]
fn cache_keys_never_match_dead_sources() {
    // A realized node drops its sources; a new source may then be allocated where an old one
    // was. The new expression must not find the old (realized) node.
    let mut held = Vec::new();
    for _ in 0..16 {
        let x = empty(&[3]);
        let y = x.e(UnaryOps::SQRT, &[]).unwrap();
        y.mark_realized();
        drop(x);
        let x2 = empty(&[3]);
        let y2 = x2.e(UnaryOps::SQRT, &[]).unwrap();
        assert_ne!(y, y2);
        assert!(!y2.is_realized());
        held.push((y, y2, x2));
    }
}
