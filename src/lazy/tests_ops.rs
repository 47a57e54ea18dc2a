//! The graph operations: folding, checks, reductions, movement, contiguous, cast, copy, assign.

use super::tests::{empty, realized};
use super::*;
use crate::dtype::dtypes;
use crate::helpers::Context;
use crate::ops::{BinaryOps, ReduceOps, TernaryOps, UnaryOps};
use crate::shape::{sints, Node};

fn ones(shape: &[i64]) -> LazyBuffer {
    LazyBuffer::new_const(
        ConstArg::Value(ConstValue::Float(1.0)),
        dtypes::float32,
        "CLANG",
        &sints(shape),
    )
    .unwrap()
}

fn cval(x: &LazyBuffer) -> Option<ConstValue> {
    x.const_value()
}

#[test]
fn all_const_inputs_fold() {
    let o = ones(&[4]);
    let two = o.e(BinaryOps::ADD, &[&o]).unwrap();
    assert_eq!(cval(&two), Some(ConstValue::Float(2.0)));
    assert_eq!(two.shape(), sints(&[4]).as_slice());
    let e = o.e(UnaryOps::EXP2, &[]).unwrap();
    assert_eq!(cval(&e), Some(ConstValue::Float(2.0)));
    let lt = o.e(BinaryOps::CMPLT, &[&two]).unwrap();
    assert_eq!(lt.dtype(), dtypes::bool);
    assert_eq!(cval(&lt), Some(ConstValue::Bool(true)));
    let w = lt.e(TernaryOps::WHERE, &[&o, &two]).unwrap();
    assert_eq!(cval(&w), Some(ConstValue::Float(1.0)));
    // A padded (masked) const does not fold.
    let padded = ones(&[2]).pad(&[(Node::Num(1), Node::Num(1))]).unwrap();
    assert!(!padded.is_unrealized_unmasked_const());
    let s = padded.e(BinaryOps::ADD, &[&ones(&[4])]).unwrap();
    assert_eq!(s.op(), Op::Binary(BinaryOps::ADD));
}

#[test]
fn identity_folds() {
    let x = empty(&[4]);
    let zero = x.const_like(0.0).unwrap();
    let one = x.const_like(1.0).unwrap();
    let neg_one = x.const_like(-1.0).unwrap();
    assert_eq!(x.e(BinaryOps::ADD, &[&zero]).unwrap(), x);
    assert_eq!(zero.e(BinaryOps::ADD, &[&x]).unwrap(), x);
    assert_eq!(x.e(BinaryOps::MUL, &[&one]).unwrap(), x);
    assert_eq!(one.e(BinaryOps::MUL, &[&x]).unwrap(), x);
    let z = x.e(BinaryOps::MUL, &[&zero]).unwrap();
    assert_eq!(cval(&z), Some(ConstValue::Float(0.0)));
    let n = x.e(BinaryOps::MUL, &[&neg_one]).unwrap();
    assert_eq!(n.op(), Op::Unary(UnaryOps::NEG));
    assert_eq!(n.e(UnaryOps::NEG, &[]).unwrap(), x, "NEG of NEG");
    // A realized NEG does not fold.
    n.mark_realized();
    assert_eq!(
        n.e(UnaryOps::NEG, &[]).unwrap().op(),
        Op::Unary(UnaryOps::NEG)
    );
}

#[test]
fn elementwise_checks_are_errors() {
    let a = empty(&[4]);
    let b = empty(&[5]);
    let e = a.e(BinaryOps::ADD, &[&b]).unwrap_err();
    assert!(
        e.to_string()
            .contains("all shapes must be the same [(4,), (5,)]"),
        "{e}"
    );
    let i = realized(&[4], dtypes::int32);
    let e = a.e(BinaryOps::ADD, &[&i]).unwrap_err();
    assert!(e.to_string().contains("all dtypes must match"), "{e}");
    let e = a.e(TernaryOps::WHERE, &[&a, &a]).unwrap_err();
    assert!(e.to_string().contains("first arg be bool"), "{e}");
    let bl = a.e(BinaryOps::CMPLT, &[&a]).unwrap();
    assert!(bl.e(TernaryOps::WHERE, &[&a, &a]).is_ok());
    let e = bl.e(UnaryOps::NEG, &[]).unwrap_err();
    assert!(
        e.to_string().contains("NEG does not accept dtype bool"),
        "{e}"
    );
    assert!(a.e(BinaryOps::ADD, &[]).is_err());
    assert!(a.e(UnaryOps::CAST, &[]).is_err());
    assert!(a.e(ReduceOps::SUM, &[]).is_err());
}

#[test]
fn reductions() {
    let x = empty(&[4, 1, 6]);
    let r = x.r(ReduceOps::SUM, &[1, 0]).unwrap();
    assert_eq!(r.shape(), sints(&[1, 1, 6]).as_slice());
    assert_eq!(r.arg(), &LbArg::Axis(vec![0]), "size-1 axes dropped");
    assert_eq!(x.r(ReduceOps::MAX, &[1]).unwrap(), x, "nothing to reduce");
    assert!(x.r(ReduceOps::SUM, &[3]).is_err());
    // Constant folding: sum multiplies by the reduced count, max keeps the value.
    let s = ones(&[4, 5, 6]).r(ReduceOps::SUM, &[0, 2]).unwrap();
    assert_eq!(cval(&s), Some(ConstValue::Float(24.0)));
    assert_eq!(s.shape(), sints(&[1, 5, 1]).as_slice());
    let m = ones(&[4, 5]).r(ReduceOps::MAX, &[0, 1]).unwrap();
    assert_eq!(cval(&m), Some(ConstValue::Float(1.0)));
    // Empty input.
    let z = LazyBuffer::loadop(
        LoadOps::EMPTY,
        &sints(&[0, 3]),
        dtypes::float32,
        "CLANG",
        LbArg::None,
        &[],
        false,
    )
    .unwrap();
    let zs = z.r(ReduceOps::SUM, &[0]).unwrap();
    assert_eq!(zs.shape(), sints(&[1, 3]).as_slice());
    assert_eq!(cval(&zs), Some(ConstValue::Float(0.0)));
    let zm = z.r(ReduceOps::MAX, &[0]).unwrap();
    assert_eq!(cval(&zm), Some(ConstValue::Float(f64::NEG_INFINITY)));
}

fn reduce_chain(x: &LazyBuffer) -> Vec<(Vec<usize>, Vec<i64>)> {
    let mut out = Vec::new();
    let mut cur = x.base().clone();
    while let Op::Reduce(_) = cur.op() {
        let LbArg::Axis(ax) = cur.arg().clone() else {
            break;
        };
        let shape = cur.shape().iter().filter_map(Node::as_int).collect();
        out.push((ax, shape));
        cur = cur.srcs().unwrap()[0].base().clone();
    }
    out
}

#[test]
fn split_reduce() {
    // (256, 255).sum(): dim 0 splits by 256.
    let a = realized(&[256, 255], dtypes::float32);
    let s = a.r(ReduceOps::SUM, &[0, 1]).unwrap();
    assert_eq!(s.shape(), sints(&[1, 1]).as_slice());
    assert_eq!(
        reduce_chain(&s),
        vec![(vec![2], vec![1, 1, 1]), (vec![1], vec![1, 1, 256])]
    );
    // (255, 256).sum(): 255 divides dim 0.
    let b = realized(&[255, 256], dtypes::float32);
    let s = b.r(ReduceOps::SUM, &[0, 1]).unwrap();
    assert_eq!(
        reduce_chain(&s),
        vec![(vec![2], vec![1, 1, 1]), (vec![1], vec![1, 1, 255])]
    );
    // Below the threshold, or with the knob off: one reduce.
    let c = realized(&[4, 4], dtypes::float32);
    assert_eq!(
        reduce_chain(&c.r(ReduceOps::SUM, &[0, 1]).unwrap()).len(),
        1
    );
    let _g = Context::new(&[("SPLIT_REDUCEOP", 0)]);
    assert_eq!(
        reduce_chain(&a.r(ReduceOps::SUM, &[0, 1]).unwrap()).len(),
        1
    );
}

#[test]
fn movement_ops() {
    let a = empty(&[10, 10]);
    // All masked out degrades to CONST 0; a partial mask does not.
    let b = a
        .pad(&[(Node::Num(0), Node::Num(10)), (Node::Num(0), Node::Num(0))])
        .unwrap()
        .shrink(&[
            (Node::Num(10), Node::Num(20)),
            (Node::Num(0), Node::Num(10)),
        ])
        .unwrap();
    assert_eq!(b.shape(), sints(&[10, 10]).as_slice());
    assert_eq!(b.base().op(), Op::Load(LoadOps::CONST));
    let c = a
        .pad(&[(Node::Num(0), Node::Num(5)), (Node::Num(0), Node::Num(0))])
        .unwrap()
        .shrink(&[(Node::Num(5), Node::Num(15)), (Node::Num(0), Node::Num(10))])
        .unwrap();
    assert_ne!(c.base().op(), Op::Load(LoadOps::CONST));
    // A contiguous view of the whole base is the base.
    let p = a.permute(&[1, 0]).unwrap();
    assert!(!p.is_base());
    assert_eq!(p.permute(&[1, 0]).unwrap(), a);
    assert_eq!(
        a.reshape(&sints(&[100]))
            .unwrap()
            .reshape(&sints(&[10, 10]))
            .unwrap(),
        a
    );
    let e = a.reshape(&sints(&[3, 3])).unwrap_err();
    assert!(
        e.to_string().contains("cannot reshape (10, 10) to (3, 3)"),
        "{e}"
    );
    assert!(a.permute(&[0, 0]).is_err());
    assert!(a.expand(&sints(&[10, 10, 10])).is_err());
    let f = a.stride(&[-1, 1]).unwrap();
    assert_eq!(f.st().views[0].offset, 90);
}

#[test]
fn contiguous_variants() {
    let a = empty(&[4, 4]);
    // Already contiguous: itself, with the base forced to realize.
    assert!(!a.forced_realize());
    assert_eq!(a.contiguous().unwrap(), a);
    assert!(a.forced_realize());
    // A permute needs a kernel.
    let p = a.permute(&[1, 0]).unwrap().contiguous().unwrap();
    assert_eq!(p.op(), Op::Load(LoadOps::CONTIGUOUS));
    let (child, sti) = a.contiguous_child().unwrap();
    assert_eq!(child, p);
    assert_eq!(sti.shape(), a.shape());
    // Reading `a` again reads the contiguous child through the inverse view.
    let s = a.e(UnaryOps::SQRT, &[]).unwrap();
    let src = s.srcs().unwrap()[0].clone();
    assert_eq!(src.base(), &p);
    // A consecutive shrink is a buffer view on CLANG, a CONTIGUOUS elsewhere or when disallowed.
    let b = empty(&[4, 4]);
    let row = b
        .shrink(&[(Node::Num(1), Node::Num(2)), (Node::Num(0), Node::Num(4))])
        .unwrap();
    let v = row.contiguous().unwrap();
    assert_eq!(v.op(), Op::Load(LoadOps::VIEW));
    assert_eq!(v.buffer().offset(), 16);
    assert!(v.buffer().is_view());
    assert_eq!(
        row.contiguous_with(false).unwrap().op(),
        Op::Load(LoadOps::CONTIGUOUS)
    );
    let on_interp = LazyBuffer::loadop(
        LoadOps::EMPTY,
        &sints(&[4, 4]),
        dtypes::float32,
        "INTERP",
        LbArg::None,
        &[],
        false,
    )
    .unwrap();
    let row = on_interp
        .shrink(&[(Node::Num(1), Node::Num(2)), (Node::Num(0), Node::Num(4))])
        .unwrap();
    assert_eq!(
        row.contiguous().unwrap().op(),
        Op::Load(LoadOps::CONTIGUOUS)
    );
    // An unrealized const always gets a kernel.
    let o = ones(&[4]).contiguous().unwrap();
    assert_eq!(o.op(), Op::Load(LoadOps::CONTIGUOUS));
}

/// Beyond 0.9.1: a buffer view on a GPU family starts on a 16-byte boundary (an NV float4 load
/// 8 bytes into a buffer faulted on an H200); CLANG views any consecutive slice.
#[test]
fn gpu_views_keep_16_byte_alignment() {
    let slice = |device: &str, dtype, start: i64| {
        let b = LazyBuffer::loadop(
            LoadOps::EMPTY,
            &sints(&[64]),
            dtype,
            device,
            LbArg::None,
            &[],
            false,
        )
        .unwrap();
        let s = b
            .shrink(&[(Node::Num(start), Node::Num(start + 8))])
            .unwrap();
        s.contiguous().unwrap().op()
    };
    let (view, copy) = (Op::Load(LoadOps::VIEW), Op::Load(LoadOps::CONTIGUOUS));
    for dev in ["NV", "AMD", "CUDA"] {
        assert_eq!(slice(dev, dtypes::float32, 2), copy, "{dev}: 8 bytes in");
        assert_eq!(slice(dev, dtypes::float32, 4), view, "{dev}: 16 bytes in");
        assert_eq!(
            slice(dev, dtypes::float16, 8),
            view,
            "{dev}: 16 bytes of half"
        );
        assert_eq!(
            slice(dev, dtypes::int8, 15),
            copy,
            "{dev}: 15 bytes of int8"
        );
    }
    assert_eq!(slice("CLANG", dtypes::float32, 2), view);
}

#[test]
fn casts() {
    let a = empty(&[4, 4]);
    assert_eq!(a.cast(dtypes::float32, false).unwrap(), a);
    let c = a.cast(dtypes::float16, false).unwrap();
    assert_eq!(
        (c.op(), c.arg()),
        (Op::Unary(UnaryOps::CAST), &LbArg::DType(dtypes::float16))
    );
    // CAST_BEFORE_VIEW: a narrowing cast of a view casts the base and reapplies the view.
    let p = a.permute(&[1, 0]).unwrap();
    let pc = p.cast(dtypes::float16, false).unwrap();
    assert!(!pc.is_base());
    assert_eq!(pc.base(), &c);
    // A widening cast casts the view.
    let pw = p.cast(dtypes::float64, false).unwrap();
    assert!(pw.is_base());
    assert_eq!(pw.srcs().unwrap()[0], p);
    // Constants cast to constants (masked ones through CAST_BEFORE_VIEW).
    let o = ones(&[4]).cast(dtypes::int16, false).unwrap();
    assert_eq!(cval(&o), Some(ConstValue::Int(1)));
    let padded = ones(&[4]).pad(&[(Node::Num(1), Node::Num(1))]).unwrap();
    let pc = padded.cast(dtypes::int16, false).unwrap();
    assert_eq!(pc.base().op(), Op::Load(LoadOps::CONST));
    let pc = padded.cast(dtypes::int64, false).unwrap();
    assert_eq!(pc.op(), Op::Unary(UnaryOps::CAST));
    // Bitcasts: same size is a buffer view on CLANG; a size change needs DISK.
    let i = a.cast(dtypes::int32, true).unwrap();
    assert_eq!(i.op(), Op::Load(LoadOps::VIEW));
    let e = a.cast(dtypes::int16, true).unwrap_err();
    assert!(e.to_string().contains("only supported on DISK"), "{e}");
    let d = LazyBuffer::loadop(
        LoadOps::EMPTY,
        &sints(&[4, 4]),
        dtypes::float32,
        "DISK:/tmp/x",
        LbArg::None,
        &[],
        false,
    )
    .unwrap();
    let h = d.cast(dtypes::uint8, true).unwrap();
    assert_eq!(h.shape(), sints(&[4, 16]).as_slice());
    assert!(d.cast(dtypes::float16, false).is_err());
}

#[test]
fn copies() {
    let a = empty(&[4, 4]);
    assert_eq!(a.copy_to_device("clang", false).unwrap(), a);
    let c = a.copy_to_device("CLANG:1", false).unwrap();
    assert_eq!(c.device(), "CLANG:1");
    assert_eq!(
        (c.op(), c.arg()),
        (Op::Load(LoadOps::COPY), &LbArg::Nbytes(64))
    );
    // A copy of a copy copies the original.
    let back = c.copy_to_device("CLANG:2", false).unwrap();
    assert_eq!(back.srcs().unwrap()[0], a);
    let forced = c.copy_to_device("CLANG:2", true).unwrap();
    assert_eq!(forced.srcs().unwrap()[0], c);
    // Constants are recreated on the target.
    let o = ones(&[4]).copy_to_device("CLANG:1", false).unwrap();
    assert_eq!(o.device(), "CLANG:1");
    assert!(o.is_unrealized_unmasked_const());
    // A shrink is made contiguous first; a permute copies the base and reapplies the view.
    let row = a
        .shrink(&[(Node::Num(0), Node::Num(1)), (Node::Num(0), Node::Num(4))])
        .unwrap();
    let rc = row.copy_to_device("CLANG:1", false).unwrap();
    assert_eq!(rc.srcs().unwrap()[0].op(), Op::Load(LoadOps::VIEW));
    let p = a
        .permute(&[1, 0])
        .unwrap()
        .copy_to_device("CLANG:1", false)
        .unwrap();
    assert!(!p.is_base());
    assert_eq!(p.base().op(), Op::Load(LoadOps::COPY));
}

#[test]
fn assigns() {
    let t = realized(&[4, 4], dtypes::float32);
    let x = empty(&[4, 4]);
    let a = t.assign(&x).unwrap();
    assert_eq!((a.op(), a.arg()), (Op::Load(LoadOps::ASSIGN), &LbArg::None));
    assert_eq!(a.srcs().unwrap()[1], t);
    let tp = t.permute(&[1, 0]).unwrap();
    let ap = tp.assign(&x).unwrap();
    assert_eq!(ap.arg(), &LbArg::AssignView(tp.st().clone()));
    let e = t.assign(&empty(&[4])).unwrap_err();
    assert!(e.to_string().contains("same size 16 != 4"), "{e}");
    let e = x.assign(&t).unwrap_err();
    assert!(
        e.to_string().contains("assign target must be realized"),
        "{e}"
    );
}

#[test]
fn symbolic_shapes_flow_through() {
    let i = Node::var("i", 1, 10).unwrap().bind(3).unwrap();
    let a = empty(&[10, 4]);
    let s = a
        .shrink(&[(Node::Num(0), i.clone()), (Node::Num(0), Node::Num(4))])
        .unwrap();
    assert_eq!(s.shape()[0], i);
    let c = s.contiguous().unwrap();
    assert_eq!(c.size(), 40, "symbolic dims count at their max");
    let r = c
        .e(UnaryOps::SQRT, &[])
        .unwrap()
        .r(ReduceOps::SUM, &[0])
        .unwrap();
    assert_eq!(r.shape(), sints(&[1, 4]).as_slice());
    let v = LazyBuffer::new_const(ConstArg::Var(i.clone()), dtypes::int32, "CLANG", &[]).unwrap();
    assert!(!v.is_unrealized_const(), "a Variable const is not foldable");
}
