//! Unit tests of the Tensor API that need no data back: shapes, dtypes and promotion, error
//! messages, the LazyBuffer ops each Function emits, indexing, and autograd graph building.
//! Graphs are built on a host test device (nothing is compiled or run).

use super::*;
use crate::dtype::{dtypes, ConstValue};
use crate::helpers::Context;
use crate::lazy::{LazyBuffer, LbArg};
use crate::ops::{BinaryOps, LoadOps, Op, ReduceOps, TernaryOps, UnaryOps};
use crate::Error;

const DEV: &str = "RGTEST_TENSOR";

fn dev() -> Context {
    crate::device::testing::register_host_family(DEV);
    Context::with_str(&[("DEVICE", DEV)])
}

fn empty(shape: &[usize]) -> Tensor {
    Tensor::empty(shape).unwrap()
}

fn empty_dt(shape: &[usize], dt: crate::DType) -> Tensor {
    Tensor::empty_dtype(shape, dt).unwrap()
}

fn op(t: &Tensor) -> Op {
    t.lazydata().base().op()
}

fn srcs(lb: &LazyBuffer) -> Vec<LazyBuffer> {
    lb.base().srcs().map(|s| s.to_vec()).unwrap_or_default()
}

fn src_ops(t: &Tensor) -> Vec<Op> {
    srcs(&t.lazydata()).iter().map(|s| s.base().op()).collect()
}

fn err(r: Result<Tensor>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tensor_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tensor>();
}

#[test]
fn creation_shapes_and_dtypes() {
    let _d = dev();
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(
        (t.shape(), t.dtype(), t.ndim(), t.numel()),
        (vec![2, 3], dtypes::float32, 2, 6)
    );
    assert_eq!(t.device(), DEV);
    assert!(t.lazydata().is_realized());
    let b = Tensor::from_slice(&[true, false], &[2]).unwrap();
    assert_eq!(b.dtype(), dtypes::bool);
    let h = Tensor::from_slice(&[half::f16::from_f32(1.5)], &[1]).unwrap();
    assert_eq!(h.dtype(), dtypes::float16);
    let e = err(Tensor::from_vec(vec![1i32, 2, 3], &[2, 2]));
    assert!(
        e.contains("from_slice: 3 elements cannot have shape (2, 2)"),
        "{e}"
    );
    let z = Tensor::from_vec(Vec::<u8>::new(), &[0, 3]).unwrap();
    assert_eq!((z.shape(), z.dtype()), (vec![0, 3], dtypes::uint8));
    assert_eq!(Tensor::scalar(2.5).unwrap().dtype(), dtypes::float32);
    assert_eq!(Tensor::scalar(2i64).unwrap().dtype(), dtypes::int32);
    assert_eq!(Tensor::scalar(true).unwrap().dtype(), dtypes::bool);
    let f = Tensor::full(&[2, 3], 7i64).unwrap();
    assert_eq!((f.shape(), f.dtype()), (vec![2, 3], dtypes::int32));
    assert!(f.lazydata().is_unrealized_const());
    assert_eq!(Tensor::zeros(&[4]).unwrap().dtype(), dtypes::float32);
    assert_eq!(f.ones_like().unwrap().dtype(), dtypes::int32);
    let a = Tensor::arange((0, 10, 3)).unwrap();
    assert_eq!((a.shape(), a.dtype()), (vec![4], dtypes::int32));
    let a = Tensor::arange((0.0, 1.0, 0.25)).unwrap();
    assert_eq!((a.shape(), a.dtype()), (vec![4], dtypes::float32));
    assert_eq!(Tensor::arange((5, 0, -1)).unwrap().shape(), vec![5]);
    assert_eq!(Tensor::arange((0, 0, 1)).unwrap().shape(), vec![0]);
    assert!(err(Tensor::arange((0, 5, 0))).contains("arange: bad arguments"));
    assert_eq!(Tensor::eye(3).unwrap().shape(), vec![3, 3]);
    let e = empty_dt(&[3], dtypes::int8);
    assert_eq!(
        (e.dtype(), op(&e)),
        (dtypes::int8, Op::Load(LoadOps::EMPTY))
    );
}

#[test]
fn promotion() {
    let _d = dev();
    let (i32t, f32t) = (empty_dt(&[2], dtypes::int32), empty(&[2]));
    let (u8t, i8t) = (empty_dt(&[2], dtypes::uint8), empty_dt(&[2], dtypes::int8));
    let (bt, ht) = (
        empty_dt(&[2], dtypes::bool),
        empty_dt(&[2], dtypes::float16),
    );
    let dt = |r: Result<Tensor>| r.unwrap().dtype();
    assert_eq!(dt(i32t.add(&f32t)), dtypes::float32);
    assert_eq!(dt(u8t.add(&i8t)), dtypes::int16);
    assert_eq!(dt(bt.add(&i32t)), dtypes::int32);
    assert_eq!(
        dt(i32t.mul(2.5)),
        dtypes::float32,
        "a float scalar on an int tensor"
    );
    assert_eq!(
        dt(u8t.add(300i64)),
        dtypes::uint8,
        "an int scalar keeps the int dtype"
    );
    assert_eq!(
        dt(ht.add(1.0)),
        dtypes::float16,
        "a float scalar keeps half"
    );
    assert_eq!(dt(bt.add(true)), dtypes::bool);
    assert_eq!(dt(bt.add(1i64)), dtypes::int32);
    assert_eq!(dt(i32t.div(&i32t)), dtypes::float32, "true division");
    assert_eq!(dt(i32t.idiv(&i32t)), dtypes::int32);
    assert_eq!(dt(ht.div(&i32t)), dtypes::float16);
    assert_eq!(dt(i32t.lt(&f32t)), dtypes::bool);
    assert_eq!(dt(i32t.eq(1i64)), dtypes::bool);
    assert_eq!(dt(i32t.sum()), dtypes::int32);
    assert_eq!(dt(u8t.sum()), dtypes::uint32);
    assert_eq!(dt(bt.sum()), dtypes::int32);
    assert_eq!(dt(ht.sum()), dtypes::float16);
    assert_eq!(
        dt(ht.sum_acc(Axis::All, false, Some(dtypes::float32))),
        dtypes::float32
    );
    assert_eq!(dt(i32t.mean()), dtypes::float32);
    assert_eq!(dt(ht.mean()), dtypes::float16);
    assert_eq!(dt(i32t.exp()), dtypes::float32);
    assert_eq!(dt(ht.sqrt()), dtypes::float16);
    assert_eq!(dt(i32t.relu()), dtypes::int32);
    let m = empty_dt(&[2, 3], dtypes::int8).matmul(&empty_dt(&[3, 4], dtypes::int8));
    assert_eq!(
        dt(m),
        dtypes::int8,
        "matmul casts back to the promoted input dtype"
    );
    assert_eq!(dt(f32t.argmax()), dtypes::int32);
    assert_eq!(dt(bt.neg()), dtypes::bool);
    assert_eq!(dt(f32t.bitcast(dtypes::uint32)), dtypes::uint32);
    assert!(err(f32t.bitcast(dtypes::uint8)).contains("different sizes"));
    assert!(err(f32t.lshift(2)).contains("lshift: not supported"));
    assert!(err(i32t.bitwise_and(&i32t)).contains("only bool"));
    assert_eq!(dt(bt.bitwise_or(&bt)), dtypes::bool);
}

#[test]
fn functions_emit_tinygrad_ops() {
    let _d = dev();
    let (x, y) = (empty(&[4]), empty(&[4]));
    let bin = |o| Op::Binary(o);
    let un = |o| Op::Unary(o);
    assert_eq!(op(&x.add(&y).unwrap()), bin(BinaryOps::ADD));
    let s = x.sub(&y).unwrap();
    assert_eq!(
        (op(&s), src_ops(&s)[1]),
        (bin(BinaryOps::ADD), un(UnaryOps::NEG))
    );
    let d = x.div(&y).unwrap();
    assert_eq!(
        (op(&d), src_ops(&d)[1]),
        (bin(BinaryOps::MUL), un(UnaryOps::RECIP))
    );
    let i = empty_dt(&[4], dtypes::int32);
    assert_eq!(op(&i.idiv(&i).unwrap()), bin(BinaryOps::IDIV));
    let e = x.exp().unwrap();
    assert_eq!(
        (op(&e), src_ops(&e)),
        (un(UnaryOps::EXP2), vec![bin(BinaryOps::MUL)])
    );
    let l = x.log().unwrap();
    assert_eq!(op(&l), bin(BinaryOps::MUL));
    assert_eq!(src_ops(&l)[0], un(UnaryOps::LOG2));
    let sg = x.sigmoid().unwrap();
    assert_eq!(
        (op(&sg), src_ops(&sg)),
        (un(UnaryOps::RECIP), vec![bin(BinaryOps::ADD)])
    );
    assert_eq!(op(&x.relu().unwrap()), bin(BinaryOps::MAX));
    assert_eq!(op(&x.sqrt().unwrap()), un(UnaryOps::SQRT));
    assert_eq!(op(&x.sin().unwrap()), un(UnaryOps::SIN));
    assert_eq!(op(&x.cos().unwrap()), un(UnaryOps::SIN));
    assert_eq!(op(&x.sign().unwrap()), Op::Ternary(TernaryOps::WHERE));
    assert_eq!(op(&x.lt(&y).unwrap()), bin(BinaryOps::CMPLT));
    let eq = x.eq(&y).unwrap();
    assert_eq!(
        (op(&eq), src_ops(&eq)[0]),
        (bin(BinaryOps::CMPNE), bin(BinaryOps::CMPNE))
    );
    assert_eq!(op(&i.xor(&i).unwrap()), bin(BinaryOps::XOR));
    let u = empty_dt(&[4], dtypes::uint32);
    assert_eq!(op(&u.rshift(3).unwrap()), bin(BinaryOps::IDIV));
    assert_eq!(op(&u.lshift(3).unwrap()), bin(BinaryOps::MUL));
    assert_eq!(
        op(&x.contiguous().unwrap()),
        Op::Load(LoadOps::EMPTY),
        "already contiguous"
    );
    assert_eq!(op(&x.cast(dtypes::int32).unwrap()), un(UnaryOps::CAST));
    let m = empty(&[4, 4]).max_axis(1, false).unwrap();
    assert_eq!(op(&m), Op::Reduce(ReduceOps::MAX));
    assert_eq!(m.lazydata().base().arg(), &LbArg::Axis(vec![1]));
    let w = x.gt(0i64).unwrap().where_(&x, 0.0).unwrap();
    assert_eq!(op(&w), Op::Ternary(TernaryOps::WHERE));
}

#[test]
fn constant_folding_and_pow_identities() {
    let _d = dev();
    let x = empty(&[3]);
    let z = x.pow(0i64).unwrap();
    assert!(
        z.lazydata().is_unrealized_const(),
        "x ** 0 folds to a const"
    );
    assert_eq!(z.lazydata().const_value(), Some(ConstValue::Float(1.0)));
    assert_eq!(x.pow(1i64).unwrap().lazydata(), x.lazydata(), "x ** 1 is x");
    assert_eq!(op(&x.pow(2i64).unwrap()), Op::Binary(BinaryOps::MUL));
    assert_eq!(op(&x.pow(0.5).unwrap()), Op::Unary(UnaryOps::SQRT));
    assert_eq!(op(&x.pow(-1i64).unwrap()), Op::Unary(UnaryOps::RECIP));
    let general = x.pow(1.3).unwrap();
    assert_eq!(op(&general), Op::Ternary(TernaryOps::WHERE));
    let two = Tensor::scalar(2i64).unwrap();
    assert_eq!(
        op(&x.pow(&two).unwrap()),
        Op::Binary(BinaryOps::MUL),
        "const tensor exponent"
    );
    let c = Tensor::full(&[3], 2.0).unwrap().add(3.0).unwrap();
    assert_eq!(c.lazydata().const_value(), Some(ConstValue::Float(5.0)));
    assert!(err(x.pow(f64::INFINITY)).contains("pow: a constant exponent must be finite"));
}

#[test]
fn movement_shapes_and_errors() {
    let _d = dev();
    let x = empty(&[2, 3, 4]);
    let sh = |r: Result<Tensor>| r.unwrap().shape();
    assert_eq!(sh(x.reshape(&[6, -1])), vec![6, 4]);
    assert_eq!(sh(x.reshape(&[-1])), vec![24]);
    assert_eq!(
        err(x.reshape(&[5, -1])),
        "invalid argument: reshape: cannot reshape (2, 3, 4) to (5, -1)"
    );
    assert!(err(x.reshape(&[-1, -1])).contains("only one dimension can be inferred"));
    assert_eq!(
        err(empty(&[2, 3]).reshape(&[4, 2])),
        "invalid argument: reshape: cannot reshape (2, 3) to (4, 2)"
    );
    assert_eq!(x.reshape(&[2, 3, 4]).unwrap().lazydata(), x.lazydata());
    assert_eq!(sh(x.permute(&[2, 0, 1])), vec![4, 2, 3]);
    assert!(err(x.permute(&[0, 0, 1])).contains("not a valid permutation"));
    assert!(err(x.permute(&[0, 1, 3])).contains("dim=3 out of range [-3, 2]"));
    assert_eq!(sh(empty(&[3, 1]).expand(&[2, -1, 5])), vec![2, 3, 5]);
    assert!(err(empty(&[3, 2]).expand(&[3, 4])).contains("cannot broadcast from shape=(3, 2)"));
    assert_eq!(sh(x.flip(&[0, -1])), vec![2, 3, 4]);
    assert!(err(x.flip(&[0, 0])).contains("at most once"));
    assert_eq!(
        sh(x.shrink(&[None, Some((1, 3)), Some((0, 0))])),
        vec![2, 2, 0]
    );
    assert!(err(x.shrink(&[None, Some((2, 4)), None])).contains("shrink: invalid shrink"));
    assert!(err(x.shrink(&[None])).contains("shrink: 1 args for shape (2, 3, 4)"));
    assert_eq!(
        sh(x.pad(&[Some((1, 1)), None, Some((0, 2))])),
        vec![4, 3, 6]
    );
    assert_eq!(
        sh(x.pad_with(&[Some((1, 1)), None, None], 5.0)),
        vec![4, 3, 4]
    );
    assert_eq!(sh(x.pad2d(&[1, 1, -1, 0], 0i64)), vec![2, 2, 6]);
    assert_eq!(sh(x.flatten(1, -1)), vec![2, 12]);
    assert_eq!(sh(x.flatten(0, -1)), vec![24]);
    assert_eq!(sh(x.unflatten(2, &[2, -1])), vec![2, 3, 2, 2]);
    assert_eq!(sh(empty(&[1, 3, 1]).squeeze(None)), vec![3]);
    assert_eq!(sh(empty(&[1, 3, 1]).squeeze(Some(-1))), vec![1, 3]);
    assert_eq!(sh(empty(&[1, 3, 1]).squeeze(Some(1))), vec![1, 3, 1]);
    assert_eq!(sh(x.unsqueeze(-1)), vec![2, 3, 4, 1]);
    assert_eq!(sh(x.unsqueeze(0)), vec![1, 2, 3, 4]);
    assert_eq!(sh(x.transpose(0, 2)), vec![4, 3, 2]);
    assert_eq!(sh(empty(&[2, 3]).T()), vec![3, 2]);
    assert_eq!(sh(empty(&[2, 3]).repeat(&[2, 1, 2])), vec![2, 2, 6]);
    let y = empty(&[2, 5, 4]);
    assert_eq!(sh(x.cat(&[&y], 1)), vec![2, 8, 4]);
    assert!(err(x.cat(&[&y], 0)).contains("cat: shapes (2, 3, 4) and (2, 5, 4) differ"));
    assert_eq!(sh(x.stack(&[&x, &x], 1)), vec![2, 3, 3, 4]);
    let parts = empty(&[7, 2]).split(3, 0).unwrap();
    let shapes: Vec<Vec<usize>> = parts.iter().map(Tensor::shape).collect();
    assert_eq!(shapes, vec![vec![3, 2], vec![3, 2], vec![1, 2]]);
    let parts = empty(&[7, 2]).split_sizes(&[1, 6], 0).unwrap();
    assert_eq!(parts[1].shape(), vec![6, 2]);
    assert!(empty(&[7, 2]).split_sizes(&[1, 5], 0).is_err());
    assert_eq!(empty(&[13]).chunk(6, 0).unwrap().len(), 5);
    assert_eq!(empty(&[12]).chunk(6, 0).unwrap().len(), 6);
    assert_eq!(x.len().unwrap(), 2);
    assert!(Tensor::scalar(1.0).unwrap().len().is_err());
}

#[test]
fn getitem_basic() {
    use Index as I;
    let _d = dev();
    let x = empty(&[5, 6, 7]);
    let sh = |idx: &[Index]| x.getitem(idx).unwrap().shape();
    assert_eq!(sh(&[I::Int(1)]), vec![6, 7]);
    assert_eq!(sh(&[I::Int(-1), I::Int(2)]), vec![7]);
    assert_eq!(sh(&[I::range(1, 3)]), vec![2, 6, 7]);
    assert_eq!(sh(&[I::Slice(None, None, Some(-1))]), vec![5, 6, 7]);
    assert_eq!(sh(&[I::Slice(None, None, Some(2))]), vec![3, 6, 7]);
    assert_eq!(sh(&[I::Slice(Some(-2), None, Some(-2))]), vec![2, 6, 7]);
    assert_eq!(sh(&[I::Slice(Some(10), Some(20), None)]), vec![0, 6, 7]);
    assert_eq!(sh(&[I::Slice(Some(3), Some(1), None)]), vec![0, 6, 7]);
    assert_eq!(sh(&[I::NewAxis, I::Int(0)]), vec![1, 6, 7]);
    assert_eq!(sh(&[I::Ellipsis, I::Int(0)]), vec![5, 6]);
    assert_eq!(sh(&[I::Int(0), I::Ellipsis, I::NewAxis]), vec![6, 7, 1]);
    assert_eq!(
        sh(&[I::all(), I::Slice(Some(1), None, Some(4)), I::Int(3)]),
        vec![5, 2]
    );
    let e = err(x.getitem(&[I::Int(5)]));
    assert!(
        e.contains("index=5 is out of bounds on dim=0 with size=5"),
        "{e}"
    );
    assert!(err(x.getitem(&[I::Slice(None, None, Some(0))])).contains("cannot have 0 as step"));
    assert!(err(x.getitem(&[I::Ellipsis, I::Ellipsis])).contains("single ellipsis"));
    assert!(err(x.getitem(&[I::Int(0), I::Int(0), I::Int(0), I::Int(0)])).contains("too many"));
    // Stride 2 is pad, reshape, shrink, reshape: a view, no kernel.
    let v = x.getitem(&[I::Slice(None, None, Some(2))]).unwrap();
    assert!(!v.lazydata().is_base() && v.lazydata().base() == &x.lazydata());
}

#[test]
fn getitem_advanced() {
    use Index as I;
    let _d = dev();
    let x = empty(&[5, 6, 7]);
    let idx = empty_dt(&[3], dtypes::int32);
    let idx2 = empty_dt(&[2, 3], dtypes::int32);
    let sh = |ix: &[Index]| x.getitem(ix).unwrap().shape();
    assert_eq!(sh(&[I::Tensor(idx.clone())]), vec![3, 6, 7]);
    assert_eq!(sh(&[I::all(), I::Tensor(idx2.clone())]), vec![5, 2, 3, 7]);
    assert_eq!(
        sh(&[I::Tensor(idx.clone()), I::all(), I::Tensor(idx.clone())]),
        vec![3, 6]
    );
    let f = empty(&[3]);
    assert!(err(x.getitem(&[I::Tensor(f)])).contains("only int tensor indexing"));
    let g = x.gather(1, &empty_dt(&[5, 2, 7], dtypes::int32)).unwrap();
    assert_eq!(g.shape(), vec![5, 2, 7]);
    assert_eq!(
        empty_dt(&[4], dtypes::int32).one_hot(3).unwrap().shape(),
        vec![4, 3]
    );
}

#[test]
fn reductions_and_nn_shapes() {
    let _d = dev();
    let x = empty(&[2, 3, 4]);
    let sh = |r: Result<Tensor>| r.unwrap().shape();
    assert_eq!(sh(x.sum()), Vec::<usize>::new());
    assert_eq!(sh(x.sum_axis([0, 2], false)), vec![3]);
    assert_eq!(sh(x.sum_axis(-1, true)), vec![2, 3, 1]);
    assert_eq!(sh(x.max_axis(1, false)), vec![2, 4]);
    assert_eq!(sh(x.min_axis(Axis::All, true)), vec![1, 1, 1]);
    assert_eq!(sh(x.mean_axis(1, false)), vec![2, 4]);
    assert_eq!(sh(x.std_axis(-1, false, 1)), vec![2, 3]);
    assert_eq!(sh(x.softmax(-1)), vec![2, 3, 4]);
    assert_eq!(sh(x.log_softmax(1)), vec![2, 3, 4]);
    assert_eq!(sh(x.logsumexp_axis(1, false)), vec![2, 4]);
    assert_eq!(sh(x.logsumexp_axis(1, true)), vec![2, 1, 4]);
    assert_eq!(sh(x.argmax_axis(1, false)), vec![2, 4]);
    assert_eq!(sh(x.argmax()), Vec::<usize>::new());
    assert_eq!(sh(x.argmin_axis(-1, true)), vec![2, 3, 1]);
    assert_eq!(sh(x.cumsum(2)), vec![2, 3, 4]);
    assert_eq!(sh(empty(&[600]).cumsum(0)), vec![600]);
    assert!(err(x.sum_axis(3, false)).contains("dim=3 out of range"));
    let s = Tensor::scalar(1.0).unwrap();
    assert_eq!(sh(s.sum_axis(0, false)), Vec::<usize>::new());
    assert!(err(s.sum_axis(1, false)).contains("out of range of [-1, 0]"));
    let (a, b) = (empty(&[17, 33]), empty(&[32, 5]));
    assert_eq!(
        err(a.matmul(&b)),
        "invalid argument: matmul: shapes (17, 33) and (32, 5) are not aligned (33 != 32)"
    );
    assert_eq!(sh(a.matmul(&empty(&[33, 5]))), vec![17, 5]);
    assert_eq!(sh(empty(&[33]).matmul(&empty(&[33, 5]))), vec![5]);
    assert_eq!(sh(empty(&[2, 17, 33]).matmul(&empty(&[33]))), vec![2, 17]);
    assert_eq!(
        sh(empty(&[4, 1, 2, 3]).matmul(&empty(&[5, 3, 6]))),
        vec![4, 5, 2, 6]
    );
    assert!(err(Tensor::scalar(1.0).unwrap().matmul(&a)).contains("at least 1D"));
    let w = empty(&[3, 4]);
    assert_eq!(
        sh(empty(&[2, 3]).linear(&w, Some(&empty(&[4])))),
        vec![2, 4]
    );
    let img = empty(&[1, 2, 9, 9]);
    assert_eq!(sh(img.pool(&[3, 3], &[1], &[1])), vec![1, 2, 7, 7, 3, 3]);
    assert_eq!(sh(img.pool(&[2, 2], &[2], &[1])), vec![1, 2, 4, 4, 2, 2]);
    assert_eq!(sh(img.pool(&[3, 3], &[2], &[2])), vec![1, 2, 3, 3, 3, 3]);
    // 0.9.1's extent ceil((9 - 9) / 1) = 0: an empty dim; a negative one is an error
    assert_eq!(sh(img.pool(&[10], &[1], &[1])), vec![1, 2, 9, 0, 10]);
    assert!(err(img.pool(&[11], &[1], &[1])).contains("is larger than the input"));
    assert_eq!(sh(img.max_pool2d()), vec![1, 2, 4, 4]);
    assert_eq!(
        sh(img.avg_pool2d_with(&PoolArgs::default().kernel(3).stride(1))),
        vec![1, 2, 7, 7]
    );
    let k = empty(&[4, 2, 3, 3]);
    let c = img.conv2d_with(
        &k,
        Some(&empty(&[4])),
        &ConvArgs::default().stride(2).padding(1),
    );
    assert_eq!(sh(c), vec![1, 4, 5, 5]);
    let g = img.conv2d_with(&empty(&[4, 1, 3, 3]), None, &ConvArgs::default().groups(2));
    assert_eq!(sh(g), vec![1, 4, 7, 7]);
    assert!(img.conv2d(&empty(&[4, 3, 3, 3]), None).is_err());
    assert_eq!(sh(empty(&[3, 4]).triu(1)), vec![3, 4]);
    assert_eq!(sh(empty(&[3, 4]).tril(-1)), vec![3, 4]);
    assert_eq!(sh(x.layernorm(-1, 1e-5)), vec![2, 3, 4]);
}

#[test]
fn autograd_graph() {
    let _d = dev();
    let x = empty(&[3]).requires_grad_(true);
    let c = empty(&[3]);
    assert_eq!(c.requires_grad(), None);
    let y = x.mul(&c).unwrap();
    assert_eq!(y.requires_grad(), Some(true));
    assert!(y.ctx().is_some());
    let z = c.mul(&c).unwrap();
    assert_eq!((z.requires_grad(), z.ctx().is_none()), (None, true));
    let f = c.detach().mul(c.detach()).unwrap();
    assert_eq!(f.requires_grad(), Some(false));
    {
        let _g = Tensor::no_grad();
        let n = x.mul(2.0).unwrap();
        assert_eq!((n.requires_grad(), n.ctx().is_none()), (Some(true), true));
    }
    assert!(!Tensor::is_no_grad());
    let e = err(y.backward().cloned());
    assert!(
        e.contains("backward can only be called for scalar tensors"),
        "{e}"
    );
    // x used twice: gradients accumulate.
    let loss = x
        .mul(&c)
        .unwrap()
        .add(x.exp().unwrap())
        .unwrap()
        .sum()
        .unwrap();
    let order = loss.deepwalk();
    assert_eq!(order.last().map(Tensor::id), Some(loss.id()));
    loss.backward().unwrap();
    let g = x.grad().unwrap();
    assert_eq!(
        (g.shape(), g.dtype(), g.requires_grad()),
        (vec![3], dtypes::float32, Some(false))
    );
    assert_eq!(
        op(&g),
        Op::Binary(BinaryOps::ADD),
        "two contributions added"
    );
    assert!(c.grad().is_none());
    assert!(loss.ctx().is_none(), "contexts are consumed");
    let xi = empty_dt(&[3], dtypes::int32).requires_grad_(true);
    let xr = xi.xor(&xi).unwrap().sum().unwrap();
    assert!(err(xr.backward().cloned()).contains("not implemented for Xor"));
}

#[test]
fn gradient_ops() {
    let _d = dev();
    let x = empty(&[2, 3]).requires_grad_(true);
    x.relu().unwrap().sum().unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    // Relu backward: (0 < out).cast * g; g is Sum's backward, an expanded const 1, so the MUL
    // folds away and the CAST of the CMPLT remains.
    assert_eq!(op(&g), Op::Unary(UnaryOps::CAST));
    assert_eq!(src_ops(&g)[0], Op::Binary(BinaryOps::CMPLT));
    let w = empty(&[4, 3]).requires_grad_(true);
    let b = empty(&[3]).requires_grad_(true);
    let out = empty(&[2, 4]).linear(&w, Some(&b)).unwrap();
    out.mean().unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().shape(), vec![4, 3]);
    assert_eq!(b.grad().unwrap().shape(), vec![3]);
    let m = empty(&[3, 5]).requires_grad_(true);
    m.max_axis(1, false)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(m.grad().unwrap().shape(), vec![3, 5]);
    let p = empty(&[4, 4]).requires_grad_(true);
    let q = p
        .pad(&[Some((1, 0)), None])
        .unwrap()
        .getitem(&[Index::range(1, 3)])
        .unwrap();
    q.flip(&[0])
        .unwrap()
        .permute(&[1, 0])
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(p.grad().unwrap().shape(), vec![4, 4]);
}

#[test]
fn data_access_checks_dtype_first() {
    let _d = dev();
    let t = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let e = t.to_vec::<i32>().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)));
    assert!(
        e.to_string().contains(
            "to_vec: the tensor has dtype dtypes.float but i32 (dtypes.int) was requested"
        ),
        "{e}"
    );
    assert!(t
        .item::<f32>()
        .unwrap_err()
        .to_string()
        .contains("must have one element"));
    assert_eq!(
        Tensor::from_vec(Vec::<f32>::new(), &[0])
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![]
    );
}

#[test]
fn assign_and_replace() {
    let _d = dev();
    let a = empty(&[3]);
    let b = empty(&[3]);
    a.assign(&b).unwrap();
    assert_eq!(
        a.lazydata(),
        b.lazydata(),
        "an unrealized target is replaced"
    );
    let r = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let v = empty(&[3]);
    r.assign(&v).unwrap();
    assert_eq!(op(&r), Op::Load(LoadOps::ASSIGN));
    assert!(err(r.assign(&empty(&[4])).cloned()).contains("assign shape mismatch (3,) != (4,)"));
    assert!(err(r.assign(&empty_dt(&[3], dtypes::int32)).cloned()).contains("dtype mismatch"));
}

#[test]
fn threefry_reference_matches_tinygrad() {
    // tinygrad 0.9.1 test_randomness.py: manual_seed(1337); rand(20) with THREEFRY=1 (JAX's
    // threefry_2x32 of arange(20) >> 8 / 2**24).
    let jr = [
        0.30984968, 0.42723763, 0.92448753, 0.27268296, 0.48820806, 0.29587173, 0.3213513,
        0.05805135, 0.4954177, 0.23303074, 0.62478125, 0.51861334, 0.24712527, 0.12718695,
        0.5236074, 0.50704265, 0.9166272, 0.6918763, 0.6530086, 0.34640658,
    ];
    let mut out = [0f64; 20];
    for j in 0..10u32 {
        let (a, b) = rand::threefry2x32(j, j + 10, 1337);
        out[j as usize] = (a >> 8) as f64 / (1u32 << 24) as f64;
        out[j as usize + 10] = (b >> 8) as f64 / (1u32 << 24) as f64;
    }
    for (o, r) in out.iter().zip(jr) {
        assert!((o - r).abs() < 1e-6, "{out:?}");
    }
}

#[test]
fn operators() {
    let _d = dev();
    let (a, b) = (empty(&[2]), empty(&[2]));
    assert_eq!(op(&(&a + &b).unwrap()), Op::Binary(BinaryOps::ADD));
    assert_eq!(op(&(&a * 2.0).unwrap()), Op::Binary(BinaryOps::MUL));
    assert_eq!(op(&(1.0 - &a).unwrap()), Op::Binary(BinaryOps::ADD));
    assert_eq!(op(&(-&a).unwrap()), Op::Unary(UnaryOps::NEG));
    assert!((&a + &empty(&[3])).is_err());
}
