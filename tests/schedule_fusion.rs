//! Kernel counts of tinygrad 0.9.1's test/test_schedule.py (elementwise, reshape/permute, reduce
//! fusion, caching, pads, chasing), built with the LazyBuffer op sequences the Tensor methods
//! emit (see `schedule_common`). Every expected number is the one 0.9.1 pins; where 0.9.1 pins
//! "not N" (`assertRaises(KernelCountException)`) the test asserts the same.

mod schedule_common;

use rawgrad::dtype::dtypes;
use schedule_common::{check_schedule, kernels, Idx, T};

fn count(outs: &[&T], pre: &[&T]) -> usize {
    check_schedule(outs, pre, true).len()
}
fn count_all(outs: &[&T]) -> usize {
    check_schedule(outs, &[], false).len()
}

#[test]
fn basic_binop_fusion() {
    let (a, b, c) = (T::empty(&[10]), T::empty(&[10]), T::empty(&[10]));
    assert_eq!(kernels(&[&a.add(&b).add(&c)]), 1);
    let d = T::empty(&[10]);
    assert_eq!(kernels(&[&a.add(&b).add(&c).add(&d)]), 1, "deep");
}

#[test]
fn mulacc_fusion() {
    let (a, b) = (T::empty(&[10]), T::empty(&[10]));
    assert_eq!(kernels(&[&a.mul(&b).sum(None, false)]), 1);
    assert_eq!(
        kernels(&[&a.mul(&b).sum(None, false).relu()]),
        1,
        "mulacc_relu"
    );
}

#[test]
fn binop_reshape_and_permute_fusion() {
    let (a, b, c) = (T::empty(&[10]), T::empty(&[10]), T::empty(&[5, 2]));
    assert_eq!(kernels(&[&a.add(&b).reshape(&[5, 2]).add(&c)]), 1);
    let (a, b, c) = (T::empty(&[2, 5]), T::empty(&[2, 5]), T::empty(&[5, 2]));
    assert_eq!(kernels(&[&a.add(&b).permute(&[1, 0]).add(&c)]), 1);
}

#[test]
fn constants_are_embedded() {
    let a = T::empty(&[3, 3]).mul(2.0);
    assert_eq!(count_all(&[&a]), 2, "the EMPTY and one kernel");
}

#[test]
fn binop_elu_fusion() {
    assert_eq!(kernels(&[&T::empty(&[10]).elu()]), 1);
}

#[test]
fn reduce_fusions() {
    let (a, b) = (T::empty(&[100]), T::empty(&[100]));
    let c = a.add(&b).reshape(&[10, 10]).sum(Some(&[0]), true);
    assert_eq!(kernels(&[&c]), 1, "binop_reshape_reduce");
    let (a, b) = (T::empty(&[10, 10]), T::empty(&[10]));
    assert_eq!(
        kernels(&[&a.sum(Some(&[0]), false).add(&b)]),
        1,
        "reduce_reshape_binop"
    );
    let (a, b, c) = (T::empty(&[100]), T::empty(&[100]), T::empty(&[10, 10]));
    let d = a.add(&b).reshape(&[10, 10]).add(&c).sum(Some(&[0]), false);
    assert_eq!(kernels(&[&d]), 1, "binop_early_reshape_reduce");
}

#[test]
fn reduce_permute_is_not_pushed() {
    // test_reduce_permute_binop_fusion pins "not 1".
    let (a, b) = (T::empty(&[10, 10, 10]), T::empty(&[10, 10, 1]));
    let c = a.sum(Some(&[0]), true).permute(&[2, 1, 0]).add(&b);
    assert_ne!(kernels(&[&c]), 1);
    // test_reduce_permute_nofuse
    let (x, y) = (T::empty(&[32, 32, 32]), T::empty(&[32, 32]));
    assert_eq!(kernels(&[&x.sum(Some(&[2]), false).T().add(&y)]), 2);
}

#[test]
fn diamond_folded() {
    let (a, b, c, d) = (
        T::empty(&[10]),
        T::empty(&[10]),
        T::empty(&[10]),
        T::empty(&[10]),
    );
    let ab = a.add(&b);
    assert_eq!(kernels(&[&ab.add(&c).add(&ab.add(&d))]), 1);
}

#[test]
fn cache_binaryop() {
    let (a, b) = (T::empty(&[10]), T::empty(&[10]));
    let c = a.add(&b);
    let d = a.add(&b);
    assert_eq!(count(&[&d], &[&c]), 0);
    // reshaped: "failing in new lazy", pinned as not 0
    let (a, b) = (T::empty(&[10]), T::empty(&[10]));
    let c = a.add(&b);
    let d = a.reshape(&[10, 1]).add(&b.reshape(&[10, 1]));
    assert_ne!(count(&[&d], &[&c]), 0);
    // transposed, pinned as not 0
    let (a, b) = (T::empty(&[10, 10]), T::empty(&[10, 10]));
    let c = a.T().mul(&b.T()).T();
    let d = a.mul(&b);
    assert_ne!(count(&[&d], &[&c]), 0);
}

#[test]
fn no_binop_rerun() {
    let (a, b) = (T::empty(&[16]), T::empty(&[16]));
    let c = a.add(&b);
    let d = a.add(&b).reshape(&[16, 1]);
    assert_eq!(count(&[&d], &[&c]), 0);
}

fn reduceops(sched: &[rawgrad::engine::schedule::ScheduleItem]) -> usize {
    sched
        .iter()
        .flat_map(|si| si.ast.iter())
        .flat_map(|out| out.lazyops())
        .filter(|x| matches!(x.op(), rawgrad::ops::Op::Reduce(_)))
        .count()
}

#[test]
fn cache_reduceops() {
    let a = T::empty(&[10]);
    let bc = a.sum(None, false).add(&a.sum(None, false));
    assert_eq!(kernels(&[&bc]), 1, "cache_two_reduceops");
    let x = T::empty(&[32]);
    let r0 = x.mean(Some(&[0]), true);
    let r1 = x.sub(&r0).sum(Some(&[0]), false).div(2i64);
    let sched = check_schedule(&[&r0.add(&r1)], &[], true);
    assert_eq!(
        (sched.len(), reduceops(&sched)),
        (2, 2),
        "cache_reduce_parent"
    );
    let (x, y) = (T::empty(&[32]), T::empty(&[4, 4]));
    let r0 = x.mean(Some(&[0]), true);
    let r1 = x.sub(&r0).sum(Some(&[0]), false).div(2i64);
    let sched = check_schedule(&[&r0.add(&y), &r1.add(&y)], &[], true);
    assert_eq!(
        (sched.len(), reduceops(&sched)),
        (4, 2),
        "cache_reduce_multiple_children"
    );
}

#[test]
fn fold_double_unary_and_two_sum() {
    let y = T::empty(&[2]);
    assert_eq!(kernels(&[&y.sum(None, true).sqrt().neg()]), 1);
    let img = T::empty(&[64, 64]);
    let x = img.sum(Some(&[0]), false).add(&img.sum(Some(&[1]), false));
    let out = x.relu();
    drop(x);
    assert_eq!(kernels(&[&out]), 2);
}

#[test]
fn push_permute_through_reshape() {
    let (a, b) = (T::empty(&[16, 16]), T::empty(&[16, 16]));
    let c = a
        .add(&b)
        .reshape(&[4, 4, 4, 4])
        .permute(&[2, 3, 0, 1])
        .contiguous();
    assert_eq!(kernels(&[&c]), 1);
    let (a, b) = (T::empty(&[4, 4, 4, 4]), T::empty(&[4, 4, 4, 4]));
    let c = a.add(&b).reshape(&[16, 16]).permute(&[1, 0]).contiguous();
    assert_eq!(kernels(&[&c]), 1, "alt");
}

#[test]
fn multi_permute_should_collapse() {
    let (a, b) = (T::empty(&[4, 4, 4, 4]), T::empty(&[16]));
    let c = a
        .sum(Some(&[0, 1]), false)
        .cast(dtypes::float16)
        .permute(&[1, 0])
        .reshape(&[4, 4, 1])
        .permute(&[1, 0, 2])
        .reshape(&[16])
        .add(&b);
    assert_eq!(kernels(&[&c]), 1);
}

#[test]
fn fancy_reshape_fusion() {
    let (a, b) = (T::empty(&[10]), T::empty(&[10]));
    let c = a.add(&b);
    let d = a.reshape(&[10, 1]).add(&b.reshape(&[10, 1]));
    let out = c.sum(None, false).add(&d.sum(None, false));
    assert_ne!(kernels(&[&out]), 1);
}

#[test]
fn children_dont_push() {
    let (a, b) = (T::empty(&[10, 10, 1]), T::empty(&[10, 10, 1]));
    let d = a.add(&b).expand(&[10, 10, 10]);
    let e = a.add(&b).permute(&[2, 1, 0]);
    assert_eq!(kernels(&[&d.add(&e)]), 2);
}

#[test]
fn dont_fuse_binops_with_children() {
    let (a, b, c) = (T::empty(&[10]), T::empty(&[10]), T::empty(&[10]));
    let keep_me = a.add(&b);
    let _e = keep_me.sum(None, false);
    let d = keep_me.add(&c);
    assert_ne!(kernels(&[&d]), 2);
    assert_ne!(count(&[&keep_me], &[&d]), 0);
}

#[test]
fn permute_breaks_fusion() {
    let (a, b) = (T::empty(&[10, 10, 10]), T::empty(&[10, 10]));
    let c = a.sum(Some(&[2]), false).add(&b).permute(&[1, 0]);
    assert_eq!(kernels(&[&c.permute(&[1, 0])]), 1);
}

#[test]
fn some_permute_fusion() {
    let (a, b) = (T::empty(&[8192, 16]), T::empty(&[1, 16]));
    let d = a.T().add(&b.expand(&[8192, 16]).T());
    let c = a.add(&b.expand(&[8192, 16]));
    let e = d.T();
    assert_eq!(kernels(&[&c]), 1);
    assert_eq!(kernels(&[&e]), 1);
}

#[test]
fn shrink_fuse_and_expand_nofuse() {
    let (a, b) = (T::empty(&[8192, 16]), T::empty(&[8192, 16]));
    let c = a.mul(&b);
    let d = T::empty(&[1, 16]);
    assert_eq!(kernels(&[&c.getitem(&[Idx::I(0)]).mul(&d)]), 1);
    let (a, b) = (T::empty(&[1, 16]), T::empty(&[1, 16]));
    let c = a.mul(&b);
    let d = T::empty(&[8192, 16]);
    assert_eq!(kernels(&[&c.mul(&d)]), 2);
}

fn p(x: &T) -> T {
    x.permute(&[1, 0])
        .contiguous()
        .reshape(&[32, 16, 1])
        .expand(&[32, 16, 16])
        .sum(Some(&[2]), false)
        .permute(&[1, 0])
}

#[test]
fn image_conv_fusion_minimal() {
    let (b1, b2) = (T::empty(&[16]), T::empty(&[16]));
    let x = T::empty(&[16, 32]);
    let base = p(&x).add(&b1.reshape(&[16, 1]));
    let x = p(&base).add(&b2.reshape(&[16, 1])).add(&base);
    drop(base);
    assert_eq!(kernels(&[&p(&x)]), 4);
    let b1 = T::empty(&[16]);
    let x = T::empty(&[16, 32]);
    let base = p(&x).add(&b1.reshape(&[16, 1]));
    let x = p(&base);
    drop(base);
    assert_eq!(kernels(&[&x]), 3, "more_minimal");
}

#[test]
fn contiguous_costs() {
    let x = T::empty(&[1, 64, 32, 32]);
    assert_eq!(
        count_all(&[&x.contiguous()]),
        1,
        "contiguous_while_contiguous: the EMPTY"
    );
    let x = T::empty(&[1, 64, 32, 32]);
    let out = x.permute(&[0, 2, 3, 1]).contiguous();
    assert_eq!(count_all(&[&out]), 2, "contiguous_while_not_contiguous");
    let (a, b) = (T::realized(&[16, 16, 16]), T::realized(&[16, 16]));
    let c = a.sum(Some(&[2]), false).contiguous().add(&b).contiguous();
    assert_eq!(kernels(&[&c]), 2, "fold_with_contiguous");
    let (x, y, z) = (T::empty(&[32]), T::empty(&[32]), T::empty(&[32]));
    assert_eq!(
        kernels(&[&x.add(&y).contiguous().add(&z)]),
        2,
        "contiguous_add"
    );
}

#[test]
fn zero_size_costs_nothing() {
    let out = T::empty(&[2, 3, 0]).add(1.0);
    assert_eq!(count_all(&[&out]), 0);
}

#[test]
fn elus_and_multistage_reduces() {
    let (x, y) = (T::empty(&[32, 32]), T::empty(&[32, 32]));
    let out = x
        .sum(Some(&[1]), false)
        .relu()
        .elu()
        .add(&y.sum(Some(&[1]), false).relu().elu());
    assert_eq!(kernels(&[&out]), 2, "two_elus_sum");
    let x = T::empty(&[32, 32, 32]);
    let out = x.sum(Some(&[2]), false).relu().sum(Some(&[1]), false);
    assert_eq!(kernels(&[&out]), 2, "multistage_reduce");
    let x = T::empty(&[32, 32, 32]).sum(Some(&[2]), false);
    let out2 = x.add(1.0);
    let out = x
        .relu()
        .sum(Some(&[1]), false)
        .add(&out2.getitem(&[Idx::I(0)]));
    assert_eq!(kernels(&[&out]), 2, "multistage_reduce_fork");
}

#[test]
fn reduce_then_shrink() {
    let x = T::empty(&[32, 32, 32]).sum(Some(&[2]), false);
    let out = x.add(&x.getitem(&[Idx::All, Idx::I(4)]));
    assert_eq!(kernels(&[&out]), 2, "double_sum_ref");
    let (x, y) = (T::empty(&[32, 32]), T::empty(&[16]));
    let x = x.sum(Some(&[1]), false).getitem(&[Idx::S(None, Some(16))]);
    assert_eq!(kernels(&[&x.add(&y)]), 2, "reduce_shrink");
    let (a, b, c) = (
        T::realized(&[32, 32]),
        T::realized(&[32, 32]),
        T::realized(&[16]),
    );
    let a_out = a.sum(Some(&[1]), false).getitem(&[Idx::S(None, Some(16))]);
    let b_out = b.sum(Some(&[1]), false).getitem(&[Idx::S(None, Some(16))]);
    assert_eq!(
        kernels(&[&a_out.add(&b_out).add(&c)]),
        3,
        "multireduce_shrink"
    );
}

#[test]
fn const_no_recompute() {
    let x = T::scalar(2i64, dtypes::int32).add(&T::scalar(2i64, dtypes::int32));
    let y = T::scalar(2i64, dtypes::int32).add(&T::scalar(2i64, dtypes::int32));
    let out = x.contiguous().add(&y.contiguous());
    assert_ne!(count_all(&[&out]), 2);
}

#[test]
fn softmax_fusion() {
    let x = T::realized(&[4, 12, 64, 64]);
    assert_eq!(kernels(&[&x.softmax(-1)]), 3);
}

#[test]
fn layernorm_onelayer_fusion() {
    let (weight, bias) = (T::realized(&[10, 10]), T::realized(&[10, 10]));
    let x = T::realized(&[20, 5, 10, 10]);
    let out = x.layernorm(&[-1, -2], 1e-5).mul(&weight).add(&bias);
    assert_eq!(kernels(&[&out]), 3);
}

#[test]
fn scaled_dot_product_attention_fusion() {
    let mk = || T::empty(&[32, 8, 16, 16]);
    let (x, y, z, m) = (mk(), mk(), mk(), mk());
    assert_eq!(kernels(&[&x.sdpa(&y, &z, Some(&m), false)]), 5);
    let (x, y, z, m) = (mk(), mk(), mk(), mk());
    assert_eq!(kernels(&[&x.sdpa(&y, &z, Some(&m), true)]), 6, "causal");
}

#[test]
fn matmuls() {
    // A plain matmul is one kernel (the multiply fuses into the reduce).
    let (a, b) = (T::empty(&[4, 8]), T::empty(&[8, 16]));
    assert_eq!(kernels(&[&a.matmul(&b, None)]), 1);
    let (a, b) = (T::realized(&[4, 64]), T::realized(&[64, 8]));
    let (c, d) = (T::realized(&[4, 64]), T::realized(&[64, 8]));
    let out = a.matmul(&b, None).add(&c.matmul(&d, None));
    assert_eq!(kernels(&[&out]), 2, "multimatmul_fusion");
}

#[test]
fn prefer_half_buffer() {
    let x = T::realized(&[4]);
    let z = T::realized(&[4, 4]);
    let dummy = x.sum(None, false).half().float();
    assert_eq!(kernels(&[&dummy]), 1);
    let dummy = x.sum(None, false).half().float().contiguous().add(1.0);
    assert_eq!(kernels(&[&dummy]), 2);
    let shared = x.sum(None, false).half().float();
    let (a, b) = (shared.mul(2.0), shared.mul(3.0));
    assert_eq!(kernels(&[&a, &b]), 1);
    let a = z
        .sum(Some(&[0]), false)
        .half()
        .float()
        .sum(Some(&[0]), false);
    let sched = check_schedule(&[&a], &[], true);
    assert_eq!(sched.len(), 2);
    assert!(
        sched[0]
            .ast
            .iter()
            .all(|o| o.dtype().unwrap() == dtypes::float16),
        "stores the half"
    );
}

#[test]
fn preserve_multistage_reduce() {
    let x = T::realized(&[32768]);
    let out = x.sub(&x.max(None, true)).max(None, false);
    assert_eq!(kernels(&[&out]), 4);
}

#[test]
fn expanded_reduce_realizes() {
    // The realize-before-expand rule: a reduce read through an expand is its own kernel.
    let x = T::empty(&[4, 4]);
    assert_eq!(kernels(&[&x.sum(Some(&[1]), true).mul(&x)]), 2);
}

#[test]
fn contiguous_of_realized_is_free() {
    let x = T::realized(&[4, 4]);
    assert_eq!(count_all(&[&x.contiguous()]), 0);
}

#[test]
fn unsafe_pad_ops_realize() {
    // Derived from UNSAFE_PAD_OPS (f(0) != 0 or undefined): RECIP, LOG2, EXP2, IDIV realize before
    // a pad; safe ops fuse through it.
    let pad = |t: &T| t.pad(&[Some((1, 1))], 0.0).add(1.0);
    let x = T::realized(&[4]);
    let i = T::realized_dt(&[4], dtypes::int32);
    let lb = |t: &T, op: rawgrad::ops::Op| T(t.0.e(op, &[]).unwrap());
    use rawgrad::ops::{BinaryOps, Op, UnaryOps};
    assert_eq!(kernels(&[&pad(&lb(&x, Op::Unary(UnaryOps::RECIP)))]), 2);
    assert_eq!(kernels(&[&pad(&lb(&x, Op::Unary(UnaryOps::LOG2)))]), 2);
    assert_eq!(kernels(&[&pad(&lb(&x, Op::Unary(UnaryOps::EXP2)))]), 2);
    let idiv = T(i.0.e(BinaryOps::IDIV, &[&i.0]).unwrap());
    assert_eq!(kernels(&[&idiv.pad(&[Some((1, 1))], 0.0).add(1i64)]), 2);
    assert_eq!(kernels(&[&pad(&lb(&x, Op::Unary(UnaryOps::SQRT)))]), 1);
    assert_eq!(kernels(&[&pad(&x.mul(&x).add(2.0))]), 1);
    assert_eq!(kernels(&[&pad(&x.neg())]), 1);
}
