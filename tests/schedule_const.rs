//! Kernel counts of tinygrad 0.9.1's test/test_const_folding.py (constant folding at graph
//! construction costs no kernel) and test/test_lazybuffer.py's `TestReduceOp` (split reduces).
//! Host data (`Tensor([...])`) is a realized NPY buffer copied to the device: the COPY is a
//! LoadOps item, so only STORE kernels are counted, as `_check_ast_count` does.

mod schedule_common;

use rawgrad::dtype::dtypes;
use rawgrad::ops::{Op, ReduceOps};
use schedule_common::{check_schedule, kernels, T};

fn data4() -> T {
    T::data(&[4], dtypes::float32)
}

#[test]
fn unary_const_folding() {
    assert_eq!(kernels(&[&T::ones(&[4]).exp()]), 0);
    assert_eq!(kernels(&[&T::ones(&[4]).sqrt()]), 0);
    assert_eq!(kernels(&[&T::ones(&[4]).add(&T::ones(&[4]))]), 0);
    assert_eq!(kernels(&[&T::ones(&[4]).div(&T::ones(&[4]))]), 0);
    assert_eq!(kernels(&[&T::ones(&[4]).cast(dtypes::int16)]), 0, "cast");
    let m1 = T::full(&[4], -1i64, dtypes::int32);
    assert_eq!(kernels(&[&m1.cast(dtypes::uint16)]), 0, "cast");
}

#[test]
fn neg_folding() {
    let x = || T::data(&[3], dtypes::int32);
    assert_eq!(kernels(&[&x().mul(-1i64).neg()]), 0);
    assert_eq!(kernels(&[&x().neg().mul(-1i64)]), 0);
    assert_eq!(kernels(&[&x().neg().neg()]), 0);
    let r = T::realized(&[32, 32]);
    assert_eq!(kernels(&[&r.neg()]), 1, "neg_realized_no_fold");
}

#[test]
fn binary_const_folding_with_zero() {
    assert_eq!(kernels(&[&data4().add(0.0)]), 0, "add_literal_zero");
    assert_eq!(
        kernels(&[&data4().add(&T::zeros(&[4]))]),
        0,
        "add_tensor_zero"
    );
    assert_eq!(kernels(&[&data4().radd(0.0)]), 0, "literal_zero_add");
    assert_eq!(
        kernels(&[&T::zeros(&[4]).add(&data4())]),
        0,
        "tensor_zero_add"
    );
    assert_eq!(kernels(&[&data4().sub(0.0)]), 0, "sub_literal_zero");
    assert_eq!(
        kernels(&[&data4().sub(&T::zeros(&[4]))]),
        0,
        "sub_tensor_zero"
    );
    assert_eq!(kernels(&[&data4().mul(0.0)]), 0, "mul_literal_zero");
    assert_eq!(
        kernels(&[&data4().mul(&T::zeros(&[4]))]),
        0,
        "mul_tensor_zero"
    );
    assert_eq!(
        kernels(&[&data4().rmul(0.0).mul(0.0)]),
        0,
        "literal_zero_mul"
    );
    assert_eq!(
        kernels(&[&T::zeros(&[4]).mul(&data4())]),
        0,
        "tensor_zero_mul"
    );
}

#[test]
fn binary_const_folding_with_one() {
    assert_eq!(kernels(&[&data4().mul(1.0)]), 0, "mul_literal_one");
    assert_eq!(
        kernels(&[&data4().mul(&T::ones(&[4]))]),
        0,
        "mul_tensor_one"
    );
    assert_eq!(kernels(&[&data4().rmul(1.0)]), 0, "literal_one_mul");
    assert_eq!(
        kernels(&[&T::ones(&[4]).mul(&data4())]),
        0,
        "tensor_one_mul"
    );
    assert_eq!(kernels(&[&data4().div(1.0)]), 0, "div_literal_one");
    assert_eq!(
        kernels(&[&data4().div(&T::ones(&[4]))]),
        0,
        "div_tensor_one"
    );
    let b = || T::data(&[2], dtypes::bool);
    assert_eq!(kernels(&[&b().mul(true)]), 0, "bool_tensor_mul_bool");
    assert_eq!(kernels(&[&b().mul(false)]), 0, "bool_tensor_mul_bool");
    assert_eq!(kernels(&[&b().rmul(true)]), 0, "bool_mul_bool_tensor");
    assert_eq!(kernels(&[&b().rmul(false)]), 0, "bool_mul_bool_tensor");
}

#[test]
fn pow_const_folding() {
    assert_eq!(
        kernels(&[&data4().pow_c(0.0)]),
        0,
        "pow_literal_zero / pow_tensor_zero"
    );
    assert_eq!(
        kernels(&[&data4().pow_c(1.0)]),
        0,
        "pow_literal_one / pow_tensor_one"
    );
    assert_eq!(kernels(&[&data4().rpow_c(1.0)]), 0, "literal_one_pow");
    // test_schedule.py: x ** Tensor(2) is x*x, x ** Tensor(0) is a constant.
    let x = T::data(&[4], dtypes::int32);
    assert_eq!(kernels(&[&x.pow_c(2.0)]), 1, "pow_const_tensor_simplified");
    let x = T::data(&[4], dtypes::int32);
    assert_eq!(kernels(&[&x.pow_c(0.0)]), 0, "pow_const_tensor_to_zero");
}

#[test]
fn moved_const_folding() {
    let shrunk = |v: f64| T::full(&[6], v, dtypes::float32).shrink(&[Some((1, 5))]);
    let padded = |v: f64| T::full(&[2], v, dtypes::float32).pad(&[Some((1, 1))], 0.0);
    assert_eq!(kernels(&[&data4().add(&shrunk(0.0))]), 0, "add_shrunk_zero");
    assert_eq!(kernels(&[&data4().add(&padded(0.0))]), 1, "add_padded_zero");
    assert_eq!(kernels(&[&data4().mul(&shrunk(1.0))]), 0, "mul_shrunk_one");
    assert_eq!(kernels(&[&data4().mul(&padded(1.0))]), 1, "add_padded_one");
    let p1 = || T::ones(&[4]).pad(&[Some((1, 1))], 0.0);
    assert_eq!(
        kernels(&[&p1().cast(dtypes::int16)]),
        0,
        "cast_padded (CAST_BEFORE_VIEW)"
    );
    let pm1 = T::full(&[4], -1i64, dtypes::int32).pad(&[Some((1, 1))], 0.0);
    assert_eq!(kernels(&[&pm1.cast(dtypes::uint16)]), 0, "cast_padded");
    assert_eq!(
        kernels(&[&p1().cast(dtypes::int64)]),
        1,
        "cast_padded: widening not folded"
    );
}

#[test]
fn reduce_const_folding() {
    let o = || T::ones(&[4, 5, 6]);
    assert_eq!(kernels(&[&o().sum(None, false)]), 0, "const_sum");
    assert_eq!(
        kernels(&[&o().sum(Some(&[0]), false)]),
        0,
        "const_sum axis=0"
    );
    assert_eq!(
        kernels(&[&T::scalar(4i64, dtypes::int32).sum(None, false)]),
        0
    );
    assert_eq!(kernels(&[&o().max(None, false)]), 0, "const_max");
    assert_eq!(
        kernels(&[&T::scalar(4i64, dtypes::int32).max(None, false)]),
        0
    );
    let p = || T::ones(&[4]).pad(&[Some((1, 1))], 0.0);
    assert_eq!(kernels(&[&p().sum(None, false)]), 1, "padded_const_sum");
    assert_eq!(
        kernels(&[&p().exp().sum(None, false)]),
        1,
        "padded_const_sum exp"
    );
}

fn reduce_kernels(shape: &[i64]) -> Vec<Op> {
    let a = T::realized(shape);
    let s = a.sum(None, false);
    check_schedule(&[&s], &[], false)
        .iter()
        .map(|si| si.ast[0].src()[0].op())
        .collect()
}

#[test]
fn split_reduce_kernels() {
    let sum = Op::Reduce(ReduceOps::SUM);
    assert_eq!(reduce_kernels(&[4, 4]), vec![sum], "no_split_reduce_kernel");
    assert_eq!(reduce_kernels(&[256, 255]), vec![sum, sum], "split dim0");
    assert_eq!(reduce_kernels(&[255, 256]), vec![sum, sum], "split dim1");
}

#[test]
fn shuffle_pad_ops() {
    // Derived from the pad rules (test_lazybuffer.py checks these numerically): a cat pads both
    // parts; a pad of EXP2/LOG2/RECIP results realizes them first, a CMPNE does not.
    let one = || T::data(&[1], dtypes::float32);
    assert_eq!(kernels(&[&one().cat(&[&one().exp()], 0)]), 2);
    assert_eq!(kernels(&[&one().cat(&[&one().log()], 0)]), 2);
    assert_eq!(kernels(&[&one().cat(&[&one().div(&one())], 0)]), 2);
    assert_eq!(kernels(&[&one().cat(&[&one().eq(0.0).float()], 0)]), 1);
    let (a, b) = (T::empty(&[4, 4]), T::empty(&[2, 4]));
    assert_eq!(kernels(&[&a.cat(&[&b], 0)]), 1, "cat");
    let (a, b) = (T::empty(&[4]), T::empty(&[4]));
    assert_eq!(
        kernels(&[&a.stack(&[&b], 0).sum(Some(&[1]), false)]),
        1,
        "stack then reduce"
    );
}
