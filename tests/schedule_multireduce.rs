//! Kernel counts of tinygrad 0.9.1's test/test_schedule.py for multi-output reduces, several
//! reduces ("multireduce spec": at most one reduce per kernel at 0.9.1), chasing a forced reduce
//! to its contiguous child, and pads of safe and unsafe ops.

mod schedule_common;

use rawgrad::dtype::dtypes;
use rawgrad::ops::{BinaryOps, Op, ReduceOps};
use schedule_common::{check_schedule, kernels, Idx, T};

type P = Option<(i64, i64)>;
const PAD3: [P; 3] = [Some((0, 1)), Some((0, 1)), Some((0, 1))];

fn first_op(outs: &[&T], expect: usize) -> Op {
    let sched = check_schedule(outs, &[], true);
    assert_eq!(sched.len(), expect);
    sched[0].ast[0].src()[0].op()
}

#[test]
fn multi_output_reduces() {
    let a = T::realized(&[4, 4]);
    let out0 = a.sum(None, false).add(2.0);
    let out1 = a.sum(None, false).add(4.0);
    let out2 = out0.mul(&out1);
    assert_eq!(kernels(&[&out0, &out1, &out2]), 1, "reduce_same_size");
    let a = T::realized(&[4, 4]);
    let out0 = a.sum(None, false).exp2();
    let out1 = a.sum(None, false).add(&out0);
    assert_eq!(kernels(&[&out0, &out1]), 1, "reduce_multiple_paths");
    let a = T::realized(&[4, 4]);
    let out0 = a.sum(None, false).exp2();
    let out1 = a.sum(None, false).add(&out0);
    let b = a.add(&out0).add(&out1);
    let out2 = b.sum(None, false).exp2();
    let out3 = b.sum(None, false).add(&out2);
    assert_eq!(
        kernels(&[&out0, &out1, &out2, &out3]),
        2,
        "multireduce_reduce_multiple_paths"
    );
}

#[test]
fn reduce_children_with_other_reduces() {
    let (a, b) = (T::realized(&[4, 4]), T::realized(&[4, 4]));
    let out0 = a.sum(None, false).add(&b.sum(None, false)).add(2.0);
    let out1 = a.sum(None, false).add(&b.sum(None, false)).add(4.0);
    assert_eq!(kernels(&[&out0, &out1]), 4, "reduce_ext_reduce_child");
    let a = T::realized(&[4, 4]);
    let r = a.sum(None, false);
    let out0 = r.exp2();
    let out1 = a.sub(&out0).max(None, false);
    let out2 = r.add(&out1);
    assert_eq!(kernels(&[&r, &out0, &out1, &out2]), 4, "midreduce");
    let (a, b) = (T::realized(&[4, 4]), T::realized(&[4, 4]));
    let out0 = a.sum(None, false).add(4.0);
    let out1 = b.max(None, false).add(&out0.mul(2.0));
    let out2 = a.sum(None, false).add(&out1);
    assert_eq!(kernels(&[&out0, &out1, &out2]), 4, "midreduce_fused");
}

#[test]
fn reduce_children_through_expand_and_shrink() {
    let (a, b) = (T::realized(&[4, 4]), T::realized(&[4, 4, 4]));
    let r = a.sum(None, false);
    let out0 = r.exp2();
    let e = b.add(&out0);
    let out1 = r.add(
        &e.getitem(&[Idx::I(0)])
            .getitem(&[Idx::I(0)])
            .getitem(&[Idx::I(0)]),
    );
    assert_eq!(kernels(&[&r, &out0, &out1, &e]), 4, "midexpand");
    let (a, b) = (T::realized(&[32, 32, 32]), T::realized(&[1, 16]));
    let out0 = a.sum(None, false).add(2.0);
    let out1 = a.sum(None, false).add(&b);
    assert_eq!(kernels(&[&out0, &out1]), 4, "reduce_expand_child");
    let (a, b) = (T::empty(&[100, 100]), T::empty(&[10]));
    let c = a.sum(None, false).add(&b.getitem(&[Idx::I(0)]));
    let d = a.sum(None, false).add(2.0);
    assert_eq!(kernels(&[&c, &d]), 1, "reduce_shrink_child");
    let a = T::empty(&[4, 4]);
    let r = a.sum(Some(&[1]), false);
    let out0 = r.exp2();
    let out1 = out0.getitem(&[Idx::I(0)]).add(&out0);
    assert_eq!(kernels(&[&r, &out0, &out1]), 3, "midshrink");
    let a = T::empty(&[4, 4]);
    let r = a.sum(None, true);
    let out0 = r.exp2();
    let out1 = out0.getitem(&[Idx::I(0)]).add(&T::empty(&[1]));
    assert_eq!(kernels(&[&r, &out0, &out1]), 3, "reduce_shrink_output");
}

#[test]
fn multireduce_fusion() {
    let (x, y) = (T::realized(&[4, 32]), T::realized(&[4, 32]));
    let out = y.add(&x.sum(Some(&[-1]), true)).sum(Some(&[-1]), false);
    assert_eq!(kernels(&[&out]), 2, "simple_sequential");
    let out = y.sum(Some(&[-1]), false).add(&x.sum(Some(&[-1]), false));
    assert_eq!(kernels(&[&out]), 2, "simple_parallel");
    let x = T::realized(&[4, 32]);
    assert_eq!(
        kernels(&[&x.std(Some(&[-1]), false)]),
        2,
        "sequential (std)"
    );
    let (x, y) = (T::realized(&[4, 32]), T::realized(&[4, 32]));
    let out = x.std(Some(&[-1]), false).add(&y.std(Some(&[-1]), false));
    assert_eq!(kernels(&[&out]), 4, "parallel (std + std)");
    let x = T::realized(&[4, 32]);
    let out = x.sub(&x.max(Some(&[-1]), true)).sum(Some(&[-1]), false);
    assert_eq!(kernels(&[&out]), 2, "diffops_sequential");
    let (x, y) = (T::realized(&[4, 32]), T::realized(&[4, 32]));
    let out = x.sum(Some(&[-1]), false).add(&y.max(Some(&[-1]), false));
    assert_eq!(kernels(&[&out]), 2, "diffops_parallel");
}

#[test]
fn multireduce_fusion_sequential_and_parallel() {
    let (x, y) = (T::realized(&[4, 32]), T::realized(&[4, 32]));
    let cm = |t: &T| t.sub(&t.max(Some(&[-1]), true)).mean(Some(&[-1]), true);
    let mu = cm(&x).add(&cm(&y));
    let o = |t: &T| {
        t.sub(&mu)
            .square()
            .sum(Some(&[-1]), false)
            .div(32i64)
            .sqrt()
    };
    let (o0, o1) = (o(&x), o(&y));
    assert_eq!(kernels(&[&o0, &o1]), 6);
}

#[test]
fn chases() {
    let a = T::empty(&[4, 4, 4]);
    let r = a.sum(Some(&[0]), false).add(6.0);
    let b = r.sum(Some(&[0]), false).mul(4.0);
    let c = r.sum(Some(&[1]), false).mul(2.0);
    assert_eq!(
        first_op(&[&b, &c], 3),
        Op::Binary(BinaryOps::ADD),
        "reduce_simple_chase"
    );
    let a = T::realized(&[4, 4, 4]);
    let r = a
        .add(&a.sum(Some(&[0]), true).add(6.0))
        .sum(Some(&[0]), false)
        .mul(2.0);
    let b = r.sum(Some(&[0]), false).add(8.0);
    let c = r.sum(Some(&[1]), false).add(12.0);
    assert_eq!(kernels(&[&b, &c]), 4, "multireduce_simple_chase");
    let (a, b) = (T::empty(&[4, 4, 4]), T::empty(&[4, 4]));
    let r = a.sum(Some(&[2]), false).add(&b);
    let d = r.T().mul(4.0);
    let e = r.mul(&d);
    assert_eq!(
        first_op(&[&d, &e], 3),
        Op::Binary(BinaryOps::ADD),
        "push_permute_chase"
    );
    let (a, b) = (T::realized(&[4, 4, 4]), T::realized(&[4, 4]));
    let r = a.sum(Some(&[2]), false).add(&b);
    let d = r.T().mul(4.0);
    let e = r.mul(&d.add(&a).sum(Some(&[2]), false));
    assert_eq!(
        first_op(&[&d, &e], 3),
        Op::Binary(BinaryOps::ADD),
        "multireduce_push_permute"
    );
}

#[test]
fn shrink_chases_and_midreduce() {
    let (a, b, c) = (T::empty(&[16, 16]), T::empty(&[4]), T::empty(&[16]));
    let r = a.sum(Some(&[1]), false).add(&c);
    let d = r.getitem(&[Idx::S(None, Some(4))]).mul(&b);
    assert_eq!(
        first_op(&[&d], 2),
        Op::Binary(BinaryOps::ADD),
        "push_shrink_chase"
    );
    let (a, b) = (T::realized(&[16, 16]), T::realized(&[4]));
    let (c, d) = (T::realized(&[16]), T::realized(&[16, 16]));
    let r = a.sum(Some(&[1]), false).add(&c);
    let out = r
        .getitem(&[Idx::S(None, Some(4))])
        .mul(&b)
        .add(&d.sum(Some(&[1]), false).getitem(&[Idx::S(None, Some(4))]));
    assert_eq!(
        first_op(&[&out], 3),
        Op::Binary(BinaryOps::ADD),
        "multireduce_push_shrink"
    );
    let a = T::empty(&[16, 16]);
    let b = a
        .sum(Some(&[0]), false)
        .add(&a.max(Some(&[1]), false))
        .add(2.0);
    assert_eq!(
        first_op(&[&b], 2),
        Op::Reduce(ReduceOps::MAX),
        "midreduce_nochase"
    );
    let a = T::realized(&[16, 16]);
    let b = a
        .sum(Some(&[0]), false)
        .add(&a.max(Some(&[0]), false))
        .add(&a.max(Some(&[1]), false))
        .add(&a.sum(Some(&[1]), false))
        .add(2.0);
    assert_eq!(
        first_op(&[&b], 4),
        Op::Reduce(ReduceOps::MAX),
        "multireduce_midreduce_nochase"
    );
}

#[test]
fn partial_fuses() {
    let (a, b) = (T::realized(&[16, 16]), T::realized(&[16, 16]));
    let s = |t: &T| t.sum(None, false);
    let c = s(&a).add(2.0);
    let d = s(&a).sub(&s(&b)).mul(4.0);
    assert_eq!(kernels(&[&c, &d]), 3, "partial_fuse1");
    let (a, b) = (T::realized(&[16, 16]), T::realized(&[16, 16]));
    let c = s(&a).add(2.0);
    let d = s(&b).sub(&c);
    assert_eq!(kernels(&[&c, &d]), 2, "partial_fuse2");
    let (a, b) = (T::realized(&[16, 16]), T::realized(&[16, 16]));
    let c = s(&a).add(2.0);
    let d = s(&a).mul(2.0);
    let e = c.mul(&d);
    let f = s(&b).sub(&e);
    assert_eq!(kernels(&[&c, &d, &e, &f]), 2, "partial_fuse3");
    let (a, b) = (T::realized(&[16, 16]), T::realized(&[16, 16]));
    let c = s(&a).add(2.0);
    let d = s(&a).mul(2.0);
    let e = c.mul(&d);
    let f = s(&b.sub(&d)).sub(&e);
    assert_eq!(kernels(&[&c, &d, &e, &f]), 3, "partial_fuse4");
}

#[test]
fn pads_of_reduces() {
    let (a, b) = (T::realized(&[3, 4, 5]), T::realized(&[3, 4, 5]));
    let out = a.add(&b).pad(&PAD3, 1.0).sum(None, false).contiguous();
    assert_eq!(kernels(&[&out]), 1, "pad_reduce_safe");
    let (a, b) = (T::realized(&[3, 4, 5]), T::realized(&[3, 4, 5]));
    let out = a
        .pad(&PAD3, 1.0)
        .sum(None, true)
        .add(&b.pad(&PAD3, 1.0).sum(None, false))
        .contiguous();
    assert_eq!(kernels(&[&out]), 2, "multireduce_pad_reduce_safe");
    let a = T::realized(&[3, 4, 5]);
    let out = a.log2().pad(&PAD3, 1.0).sum(None, false).contiguous();
    assert_eq!(kernels(&[&out]), 2, "pad_reduce_unsafe");
    let (a, b) = (T::realized(&[3, 4, 5]), T::realized(&[3, 4, 5]));
    let out = a
        .log2()
        .pad(&PAD3, 1.0)
        .sum(None, false)
        .add(&b)
        .abs()
        .log2()
        .pad(&PAD3, 1.0)
        .sum(None, false)
        .contiguous();
    assert_eq!(kernels(&[&out]), 4, "multireduce_pad_reduce_unsafe");
}

#[test]
fn shrink_then_pad() {
    let (a, b) = (T::realized(&[3]), T::realized(&[3]));
    let out = a
        .add(&b)
        .shrink(&[Some((0, 1))])
        .pad(&[Some((0, 1))], 0.0)
        .contiguous();
    assert_eq!(kernels(&[&out]), 1, "shrink_pad_safe");
    let a = T::realized(&[3]);
    let out = a
        .exp2()
        .shrink(&[Some((0, 1))])
        .pad(&[Some((0, 1))], 0.0)
        .contiguous();
    assert_eq!(kernels(&[&out]), 2, "shrink_pad_unsafe");
    let a = T::realized(&[3, 3]);
    let c = a
        .exp2()
        .getitem(&[Idx::S(None, Some(-1)), Idx::S(None, Some(-1))]);
    let d = c.pad(&[Some((0, 1)), Some((0, 1))], 0.0).mul(2.0);
    assert_eq!(kernels(&[&d]), 2, "base_change_shrink_pad");
    let a = T::realized(&[3, 3]);
    let c = a.exp2().getitem(&[Idx::All, Idx::New, Idx::All]);
    let d = c
        .pad(&[Some((0, 0)), Some((1, 1)), Some((0, 0))], 0.0)
        .mul(2.0);
    assert_eq!(kernels(&[&d]), 2, "base_change_expand_pad");
}

#[test]
fn base_changes_through_casts() {
    let a = T::realized(&[4, 4]);
    let b = a.cast(dtypes::float16).expand(&[2, 4, 4]);
    let c = b.cast(dtypes::int32).expand(&[2, 2, 4, 4]);
    assert_eq!(kernels(&[&c]), 2, "base_change_expand_expand");
    let (a, b) = (T::realized(&[4, 4]), T::realized(&[4, 4]));
    let c = a.add(&b).pad(&[Some((1, 1)), Some((1, 1))], 0.0);
    let d = c.cast(dtypes::int32).expand(&[2, 6, 6]).mul(4i64);
    assert_eq!(kernels(&[&d]), 2, "base_change_pad_expand");
}

#[test]
fn pad_reduce_unsafe_multiview_st() {
    let big_p = T::ones(&[3, 3]).contiguous();
    let sums = big_p.sum(Some(&[1]), true);
    let big_p = big_p.div(&sums);
    let p = big_p
        .getitem(&[Idx::I(0)])
        .pad(&[Some((1, 0))], 0.0)
        .repeat(&[2]);
    assert_eq!(kernels(&[&p]), 3);
}
