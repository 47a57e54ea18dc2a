//! Kernel counts of tinygrad 0.9.1's test/test_schedule.py, part 2: the multireduce specs,
//! chasing, pads and base changes, softmax/layernorm/attention and half buffers (see
//! tensor_schedule.rs for the conventions).

mod tensor_common;

use rawgrad::dtype::dtypes;
use rawgrad::ops::{BinaryOps, Op, ReduceOps};
use rawgrad::{Axis, Index as I, Tensor};
use tensor_common::*;

fn first_src_op(sched: &[rawgrad::engine::schedule::ScheduleItem]) -> Op {
    sched[0].ast[0].src()[0].op()
}

#[test]
fn multireduce_specs() {
    let _d = clang();
    let (a, b, c) = (realized(&[32, 32]), realized(&[32, 32]), realized(&[16]));
    let ao = a
        .sum_axis(1, false)
        .unwrap()
        .getitem(&[I::range(0, 16)])
        .unwrap();
    let bo = b
        .sum_axis(1, false)
        .unwrap()
        .getitem(&[I::range(0, 16)])
        .unwrap();
    let out = ao.add(&bo).unwrap().add(&c).unwrap();
    assert_eq!(kernels(&[&out]), 3, "multireduce shrink");
    let a = realized(&[4, 4]);
    let s = || a.sum().unwrap();
    let (o0, o1) = (s().add(2i64).unwrap(), s().add(4i64).unwrap());
    let o2 = o0.mul(&o1).unwrap();
    assert_eq!(kernels(&[&o0, &o1, &o2]), 1, "reduce same size");
    let a = realized(&[4, 4]);
    let s = || a.sum().unwrap();
    let o0 = s().exp2().unwrap();
    let o1 = s().add(&o0).unwrap();
    assert_eq!(kernels(&[&o0, &o1]), 1, "reduce multiple paths");
    let a = realized(&[4, 4]);
    let s = || a.sum().unwrap();
    let o0 = s().exp2().unwrap();
    let o1 = s().add(&o0).unwrap();
    let b = a.add(&o0).unwrap().add(&o1).unwrap();
    let o2 = b.sum().unwrap().exp2().unwrap();
    let o3 = b.sum().unwrap().add(&o2).unwrap();
    assert_eq!(
        kernels(&[&o0, &o1, &o2, &o3]),
        2,
        "multireduce multiple paths"
    );
    let (a, b) = (realized(&[4, 4]), realized(&[4, 4]));
    let sab = || (a.sum().unwrap()).add(b.sum().unwrap()).unwrap();
    let (o0, o1) = (sab().add(2i64).unwrap(), sab().add(4i64).unwrap());
    assert_eq!(kernels(&[&o0, &o1]), 4, "reduce ext reduce child");
}

#[test]
fn multireduce_midpaths() {
    let _d = clang();
    let a = realized(&[4, 4]);
    let r = a.sum().unwrap();
    let o0 = r.exp2().unwrap();
    let o1 = a.sub(&o0).unwrap().max().unwrap();
    let o2 = r.add(&o1).unwrap();
    assert_eq!(kernels(&[&r, &o0, &o1, &o2]), 4, "midreduce");
    let (a, b) = (realized(&[4, 4]), realized(&[4, 4]));
    let o0 = a.sum().unwrap().add(4i64).unwrap();
    let o1 = (b.max().unwrap()).add(o0.mul(2i64).unwrap()).unwrap();
    let o2 = a.sum().unwrap().add(&o1).unwrap();
    assert_eq!(kernels(&[&o0, &o1, &o2]), 4, "midreduce fused");
    let (a, b) = (realized(&[4, 4]), realized(&[4, 4, 4]));
    let r = a.sum().unwrap();
    let o0 = r.exp2().unwrap();
    let e = b.add(&o0).unwrap();
    let e000 = e
        .getitem(&[I::Int(0)])
        .unwrap()
        .getitem(&[I::Int(0)])
        .unwrap();
    let o1 = r.add(e000.getitem(&[I::Int(0)]).unwrap()).unwrap();
    assert_eq!(kernels(&[&r, &o0, &o1, &e]), 4, "midexpand");
    let (a, b) = (realized(&[32, 32, 32]), realized(&[1, 16]));
    let o0 = a.sum().unwrap().add(2i64).unwrap();
    let o1 = a.sum().unwrap().add(&b).unwrap();
    assert_eq!(kernels(&[&o0, &o1]), 4, "reduce expand child");
    let (a, b) = (empty(&[100, 100]), empty(&[10]));
    let c = (a.sum().unwrap())
        .add(b.getitem(&[I::Int(0)]).unwrap())
        .unwrap();
    let d = a.sum().unwrap().add(2i64).unwrap();
    assert_eq!(kernels(&[&c, &d]), 1, "reduce shrink child");
    let a = empty(&[4, 4]);
    let r = a.sum_axis(1, false).unwrap();
    let o0 = r.exp2().unwrap();
    let o1 = o0.getitem(&[I::Int(0)]).unwrap().add(&o0).unwrap();
    assert_eq!(kernels(&[&r, &o0, &o1]), 3, "midshrink");
    let r = a.sum_axis(Axis::All, true).unwrap();
    let o0 = r.exp2().unwrap();
    let o1 = o0.getitem(&[I::Int(0)]).unwrap().add(empty(&[1])).unwrap();
    assert_eq!(kernels(&[&r, &o0, &o1]), 3, "reduce shrink output");
}

#[test]
fn multireduce_fusions() {
    let _d = clang();
    let xy = || (realized(&[4, 32]), realized(&[4, 32]));
    let (x, y) = xy();
    let out = (y.add(x.sum_axis(-1, true).unwrap()).unwrap())
        .sum_axis(-1, false)
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "simple sequential");
    let (x, y) = xy();
    let out = (y.sum_axis(-1, false).unwrap())
        .add(x.sum_axis(-1, false).unwrap())
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "simple parallel");
    let (x, _) = xy();
    assert_eq!(
        kernels(&[&x.std_axis(-1, false, 1).unwrap()]),
        2,
        "sequential (std)"
    );
    let (x, y) = xy();
    let out = (x.std_axis(-1, false, 1).unwrap())
        .add(y.std_axis(-1, false, 1).unwrap())
        .unwrap();
    assert_eq!(kernels(&[&out]), 4, "parallel");
    let (x, _) = xy();
    let out = (x.sub(x.max_axis(-1, true).unwrap()).unwrap())
        .sum_axis(-1, false)
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "diffops sequential");
    let (x, y) = xy();
    let out = (x.sum_axis(-1, false).unwrap())
        .add(y.max_axis(-1, false).unwrap())
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "diffops parallel");
    let (x, y) = xy();
    let centered = |t: &Tensor| {
        (t.sub(t.max_axis(-1, true).unwrap()).unwrap())
            .mean_axis(-1, true)
            .unwrap()
    };
    let mu = centered(&x).add(centered(&y)).unwrap();
    let f = |t: &Tensor| {
        (t.sub(&mu).unwrap().square().unwrap())
            .sum_axis(-1, false)
            .unwrap()
            .div(32i64)
            .unwrap()
            .sqrt()
            .unwrap()
    };
    let (o0, o1) = (f(&x), f(&y));
    assert_eq!(kernels(&[&o0, &o1]), 6, "sequential and parallel");
    let (a, b) = (realized(&[4, 64]), realized(&[64, 8]));
    let (c, d) = (realized(&[4, 64]), realized(&[64, 8]));
    let out = a.matmul(&b).unwrap().add(c.matmul(&d).unwrap()).unwrap();
    assert_eq!(kernels(&[&out]), 2, "multimatmul");
}

#[test]
fn softmax_layernorm_attention() {
    let _d = clang();
    let x = realized(&[4, 12, 64, 64]);
    assert_eq!(kernels(&[&x.softmax(-1).unwrap()]), 3, "softmax");
    let (w, b) = (realized(&[10, 10]), realized(&[10, 10]));
    let x = realized(&[20, 5, 10, 10]);
    let out = (x.layernorm([-1, -2], 1e-5).unwrap())
        .mul(&w)
        .unwrap()
        .add(&b)
        .unwrap();
    assert_eq!(kernels(&[&out]), 3, "layernorm onelayer");
    let e = || empty(&[32, 8, 16, 16]);
    let (q, k, v, m) = (e(), e(), e(), e());
    let out = q
        .scaled_dot_product_attention(&k, &v, Some(&m), 0.0, false)
        .unwrap();
    assert_eq!(kernels(&[&out]), 5, "attention");
    let out = q
        .scaled_dot_product_attention(&k, &v, Some(&m), 0.0, true)
        .unwrap();
    assert_eq!(kernels(&[&out]), 6, "causal attention");
}

#[test]
fn prefer_half_buffer() {
    let _d = clang();
    let x = Tensor::ones(&[4]).unwrap().contiguous().unwrap();
    prerealize(&x);
    let z = Tensor::ones(&[4, 4]).unwrap().contiguous().unwrap();
    prerealize(&z);
    let hf = |t: &Tensor| t.half().unwrap().float().unwrap();
    // Each block drops its graph, as reassigning `dummy` does in Python (else the lazy cache
    // hands back the now-realized nodes).
    {
        let dummy = hf(&x.sum().unwrap());
        assert_eq!(kernels(&[&dummy]), 1);
    }
    {
        let dummy = (hf(&x.sum().unwrap()).contiguous().unwrap())
            .add(1i64)
            .unwrap();
        assert_eq!(kernels(&[&dummy]), 2);
    }
    {
        let shared = hf(&x.sum().unwrap());
        let (a, b) = (shared.mul(2i64).unwrap(), shared.mul(3i64).unwrap());
        assert_eq!(kernels(&[&a, &b]), 1);
    }
    let a = hf(&z.sum_axis(0, false).unwrap())
        .sum_axis(0, false)
        .unwrap();
    let s = check(&[&a], &[], true);
    assert_eq!(s.len(), 2);
    assert!(s[..1]
        .iter()
        .all(|si| si.outputs().iter().all(|o| o.dtype() == dtypes::float16)));
}

#[test]
fn chasing() {
    let _d = clang();
    let a = empty(&[4, 4, 4]);
    let r = a.sum_axis(0, false).unwrap().add(6i64).unwrap();
    let b = r.sum_axis(0, false).unwrap().mul(4i64).unwrap();
    let c = r.sum_axis(1, false).unwrap().mul(2i64).unwrap();
    let s = check(&[&b, &c], &[], true);
    assert_eq!(s.len(), 3, "reduce simple chase");
    assert_eq!(first_src_op(&s), Op::Binary(BinaryOps::ADD));
    let a = realized(&[4, 4, 4]);
    let r = (a
        .add(a.sum_axis(0, true).unwrap().add(6i64).unwrap())
        .unwrap())
    .sum_axis(0, false)
    .unwrap()
    .mul(2i64)
    .unwrap();
    let b = r.sum_axis(0, false).unwrap().add(8i64).unwrap();
    let c = r.sum_axis(1, false).unwrap().add(12i64).unwrap();
    assert_eq!(kernels(&[&b, &c]), 4, "multireduce simple chase");
    let (a, b) = (empty(&[4, 4, 4]), empty(&[4, 4]));
    let r = a.sum_axis(2, false).unwrap().add(&b).unwrap();
    let d = r.T().unwrap().mul(4i64).unwrap();
    let e = r.mul(&d).unwrap();
    let s = check(&[&d, &e], &[], true);
    assert_eq!(s.len(), 3, "push permute chase");
    assert_eq!(first_src_op(&s), Op::Binary(BinaryOps::ADD));
    let (a, b) = (realized(&[4, 4, 4]), realized(&[4, 4]));
    let r = a.sum_axis(2, false).unwrap().add(&b).unwrap();
    let d = r.T().unwrap().mul(4i64).unwrap();
    let e = r
        .mul(d.add(&a).unwrap().sum_axis(2, false).unwrap())
        .unwrap();
    let s = check(&[&d, &e], &[], true);
    assert_eq!(s.len(), 3, "multireduce push permute chase");
    assert_eq!(first_src_op(&s), Op::Binary(BinaryOps::ADD));
    let (a, b, c) = (empty(&[16, 16]), empty(&[4]), empty(&[16]));
    let r = a.sum_axis(1, false).unwrap().add(&c).unwrap();
    let d = r.getitem(&[I::range(0, 4)]).unwrap().mul(&b).unwrap();
    let s = check(&[&d], &[], true);
    assert_eq!(s.len(), 2, "push shrink chase");
    assert_eq!(first_src_op(&s), Op::Binary(BinaryOps::ADD));
    let (a, b, c, d) = (
        realized(&[16, 16]),
        realized(&[4]),
        realized(&[16]),
        realized(&[16, 16]),
    );
    let r = a.sum_axis(1, false).unwrap().add(&c).unwrap();
    let out = (r.getitem(&[I::range(0, 4)]).unwrap().mul(&b).unwrap())
        .add(
            d.sum_axis(1, false)
                .unwrap()
                .getitem(&[I::range(0, 4)])
                .unwrap(),
        )
        .unwrap();
    let s = check(&[&out], &[], true);
    assert_eq!(s.len(), 3, "multireduce push shrink chase");
    assert_eq!(first_src_op(&s), Op::Binary(BinaryOps::ADD));
}

#[test]
fn midreduce_nochase() {
    let _d = clang();
    let a = empty(&[16, 16]);
    let b = (a
        .sum_axis(0, false)
        .unwrap()
        .add(a.max_axis(1, false).unwrap())
        .unwrap())
    .add(2i64)
    .unwrap();
    let s = check(&[&b], &[], true);
    assert_eq!(s.len(), 2);
    assert_eq!(first_src_op(&s), Op::Reduce(ReduceOps::MAX));
    let a = realized(&[16, 16]);
    let b = (a.sum_axis(0, false).unwrap())
        .add(a.max_axis(0, false).unwrap())
        .unwrap()
        .add(a.max_axis(1, false).unwrap())
        .unwrap()
        .add(a.sum_axis(1, false).unwrap())
        .unwrap()
        .add(2i64)
        .unwrap();
    let s = check(&[&b], &[], true);
    assert_eq!(s.len(), 4);
    assert_eq!(first_src_op(&s), Op::Reduce(ReduceOps::MAX));
}

#[test]
fn partial_fuse() {
    let _d = clang();
    let (a, b) = (realized(&[16, 16]), realized(&[16, 16]));
    let sa = || a.sum().unwrap();
    let c = sa().add(2i64).unwrap();
    let d = (sa().sub(b.sum().unwrap()).unwrap()).mul(4i64).unwrap();
    assert_eq!(kernels(&[&c, &d]), 3, "partial fuse 1");
    let (a, b) = (realized(&[16, 16]), realized(&[16, 16]));
    let sa = || a.sum().unwrap();
    let c = sa().add(2i64).unwrap();
    let d = b.sum().unwrap().sub(&c).unwrap();
    assert_eq!(kernels(&[&c, &d]), 2, "partial fuse 2");
    let (a, b) = (realized(&[16, 16]), realized(&[16, 16]));
    let sa = || a.sum().unwrap();
    let c = sa().add(2i64).unwrap();
    let d = sa().mul(2i64).unwrap();
    let e = c.mul(&d).unwrap();
    let f = b.sum().unwrap().sub(&e).unwrap();
    assert_eq!(kernels(&[&c, &d, &e, &f]), 2, "partial fuse 3");
    let (a, b) = (realized(&[16, 16]), realized(&[16, 16]));
    let sa = || a.sum().unwrap();
    let c = sa().add(2i64).unwrap();
    let d = sa().mul(2i64).unwrap();
    let e = c.mul(&d).unwrap();
    let f = (b.sub(&d).unwrap().sum().unwrap()).sub(&e).unwrap();
    assert_eq!(kernels(&[&c, &d, &e, &f]), 3, "partial fuse 4");
}

fn pad1(t: &Tensor, v: f64) -> Tensor {
    t.pad_with(&[Some((0, 1)); 3], v).unwrap()
}

#[test]
fn pads() {
    let _d = clang();
    let (a, b) = (realized(&[3, 4, 5]), realized(&[3, 4, 5]));
    let out = (pad1(&a.add(&b).unwrap(), 1.0).sum().unwrap())
        .contiguous()
        .unwrap();
    assert_eq!(kernels(&[&out]), 1, "pad reduce safe");
    let out = (pad1(&a, 1.0).sum_axis(Axis::All, true).unwrap())
        .add(pad1(&b, 1.0).sum().unwrap())
        .unwrap()
        .contiguous()
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "multireduce pad reduce safe");
    let out = (pad1(&a.log2().unwrap(), 1.0).sum().unwrap())
        .contiguous()
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "pad reduce unsafe");
    let inner = (pad1(&a.log2().unwrap(), 1.0).sum().unwrap())
        .add(&b)
        .unwrap()
        .abs()
        .unwrap()
        .log2()
        .unwrap();
    let out = pad1(&inner, 1.0).sum().unwrap().contiguous().unwrap();
    assert_eq!(kernels(&[&out]), 4, "multireduce pad reduce unsafe");
}

#[test]
fn shrink_pad_and_base_changes() {
    let _d = clang();
    let ones_r = |s: &[usize]| {
        let t = Tensor::ones(s).unwrap().contiguous().unwrap();
        prerealize(&t);
        t
    };
    let (a, b) = (ones_r(&[3]), ones_r(&[3]));
    let out = (a.add(&b).unwrap().shrink(&[Some((0, 1))]).unwrap())
        .pad(&[Some((0, 1))])
        .unwrap()
        .contiguous()
        .unwrap();
    assert_eq!(kernels(&[&out]), 1, "shrink pad safe");
    let out = (a.exp2().unwrap().shrink(&[Some((0, 1))]).unwrap())
        .pad(&[Some((0, 1))])
        .unwrap()
        .contiguous()
        .unwrap();
    assert_eq!(kernels(&[&out]), 2, "shrink pad unsafe");
    let a = ones_r(&[3, 3]);
    let b = a.exp2().unwrap();
    let c = b
        .getitem(&[
            I::Slice(None, Some(-1), None),
            I::Slice(None, Some(-1), None),
        ])
        .unwrap();
    let d = c
        .pad(&[Some((0, 1)), Some((0, 1))])
        .unwrap()
        .mul(2i64)
        .unwrap();
    assert_eq!(kernels(&[&d]), 2, "base change shrink pad");
    let b = ones_r(&[3, 3]).exp2().unwrap();
    let c = b.getitem(&[I::all(), I::NewAxis, I::all()]).unwrap();
    let d = (c.pad(&[None, Some((1, 1)), None]).unwrap())
        .mul(2i64)
        .unwrap();
    assert_eq!(kernels(&[&d]), 2, "base change expand pad");
    let a = ones_r(&[4, 4]);
    let b = a.cast(dtypes::float16).unwrap().expand(&[2, 4, 4]).unwrap();
    let c = b
        .cast(dtypes::int32)
        .unwrap()
        .expand(&[2, 2, 4, 4])
        .unwrap();
    assert_eq!(kernels(&[&c]), 2, "base change expand expand");
    let full_r = |v: f64| {
        let t = Tensor::full(&[4, 4], v).unwrap().contiguous().unwrap();
        prerealize(&t);
        t
    };
    let (a, b) = (full_r(1.0), full_r(2.0));
    let c = a
        .add(&b)
        .unwrap()
        .pad(&[Some((1, 1)), Some((1, 1))])
        .unwrap();
    let d = (c.cast(dtypes::int32).unwrap().expand(&[2, 6, 6]).unwrap())
        .mul(4i64)
        .unwrap();
    assert_eq!(kernels(&[&d]), 2, "base change pad expand");
}

#[test]
fn pad_reduce_unsafe_multiview_st() {
    let _d = clang();
    let big_p = Tensor::ones(&[3, 3]).unwrap().contiguous().unwrap();
    let sums = big_p.sum_axis(1, true).unwrap();
    big_p.assign(&big_p.div(&sums).unwrap()).unwrap();
    let p = big_p.getitem(&[I::Int(0)]).unwrap();
    let p = p.pad(&[Some((1, 0))]).unwrap().repeat(&[2]).unwrap();
    assert_eq!(p.shape(), vec![8]);
    assert_eq!(kernels(&[&p]), 3);
}
