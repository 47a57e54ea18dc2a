//! Constant folding cases (the TestUOpGraph cases of tinygrad 0.9.1 test_uop_graph.py, plus one
//! test per rule family).

use crate::codegen::uopgraph::linearize;
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::ops::{BinaryOps, TernaryOps, UnaryOps};

fn lin(sinks: Vec<UOp>) -> Vec<UOp> {
    linearize(&sinks, None, false).unwrap()
}

/// Linearize `x` stored to data0[0] and return the stored value.
fn folded(x: &UOp) -> UOp {
    let d = x.dtype().unwrap();
    let buf = UOp::define_global(d, 0, true);
    let st = UOp::store(&buf, &UOp::cnst(dtypes::int32, 0), x);
    let uops = lin(vec![st]);
    let last = uops.last().unwrap();
    assert_eq!(last.op(), UOps::STORE);
    last.src()[2].clone()
}

fn ivar(name: &str) -> UOp {
    UOp::define_var(name, 0, 10)
}

fn cint(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

fn fvar() -> UOp {
    let b = UOp::define_global(dtypes::float32, 1, false);
    UOp::load(&b, &cint(0), dtypes::float32)
}

#[test]
fn add_constant_fold() {
    let out = UOp::alu(
        BinaryOps::ADD,
        dtypes::float32,
        vec![
            UOp::cnst(dtypes::float32, 1.0),
            UOp::cnst(dtypes::float32, 2.0),
        ],
    );
    let uops = lin(vec![out]);
    assert_eq!(uops.len(), 1);
    assert_eq!(uops[0].const_value(), Some(ConstValue::Float(3.0)));
}

#[test]
fn where_folds() {
    let v = ivar("tmp");
    let vc = v.ne(0);
    let c1 = UOp::cnst(dtypes::float32, 1.0);
    let uops = lin(vec![UOp::where_(&vc, &c1, &c1)]);
    assert_eq!(uops.len(), 1);
    assert_eq!(uops[0].const_value(), Some(ConstValue::Float(1.0)));
    let bf = UOp::cnst(dtypes::bool, false);
    let c2 = UOp::cnst(dtypes::float32, 2.0);
    let uops = lin(vec![UOp::where_(&bf, &c1, &c2)]);
    assert_eq!(uops.len(), 1);
    assert_eq!(uops[0].const_value(), Some(ConstValue::Float(2.0)));
}

#[test]
fn const_cast() {
    let uops = lin(vec![UOp::cnst(dtypes::bool, false).cast(dtypes::int32)]);
    assert_eq!(uops.len(), 1);
    assert_eq!(uops[0].dtype(), Some(dtypes::int32));
    assert_eq!(uops[0].const_value(), Some(ConstValue::Int(0)));
}

#[test]
fn cast_vectorized_fold() {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let idx = cint(0);
    let ld = UOp::load(&d0, &idx, dtypes::float32.vec(2));
    let cast = ld.cast(dtypes::float32.vec(2));
    let x = UOp::gep(&cast, 0, dtypes::float32);
    let alu = UOp::alu(UnaryOps::SQRT, dtypes::float32, vec![x]);
    let uops = lin(vec![UOp::store(&d0, &idx, &alu)]);
    assert!(uops.iter().all(|u| u.op() != UOps::CAST));
}

#[test]
fn depth_2_const_fold() {
    let v = ivar("tmp");
    let out = v.add(2).add(4);
    let uops = lin(vec![out]);
    assert_eq!(uops.len(), 3);
    let out = uops.last().unwrap();
    assert_eq!(out.alu_op(), Some(BinaryOps::ADD.into()));
    assert_eq!(out.src()[1].const_value(), Some(ConstValue::Int(6)));
}

#[test]
fn fold_gated_load() {
    let g0 = UOp::define_global(dtypes::int32, 0, true);
    let g1 = UOp::define_global(dtypes::int32, 1, false);
    let g2 = UOp::define_global(dtypes::int32, 2, false);
    let idx = cint(0);
    let (f, t) = (
        UOp::cnst(dtypes::bool, false),
        UOp::cnst(dtypes::bool, true),
    );
    let ld0 = UOp::load_gated(&g1, &idx, &f, &cint(2), dtypes::int32);
    let ld1 = UOp::load_gated(&g2, &idx, &t, &cint(3), dtypes::int32);
    let uops = lin(vec![UOp::store(&g0, &idx, &ld0.add(&ld1))]);
    let sum = &uops.last().unwrap().src()[2];
    assert_eq!(sum.src()[0], cint(2));
    assert_eq!(sum.src()[1], UOp::load(&g2, &idx, dtypes::int32));
}

#[test]
fn fold_gated_load_local() {
    let g0 = UOp::define_global(dtypes::int32, 0, true);
    let smem = UOp::define_local(dtypes::int32, "temp", 1);
    let lidx = UOp::special(0, "lidx1", 16);
    let st = UOp::store(&smem, &lidx, &UOp::load(&g0, &lidx, dtypes::int32));
    let barrier = UOp::barrier(vec![st]);
    let (f, t) = (
        UOp::cnst(dtypes::bool, false),
        UOp::cnst(dtypes::bool, true),
    );
    let (i1, i2) = (lidx.add(1), lidx.add(2));
    let ld0 = UOp::load_after(&smem, &i1, Some((&f, &cint(2))), &barrier, dtypes::int32);
    let ld1 = UOp::load_after(&smem, &i2, Some((&t, &cint(3))), &barrier, dtypes::int32);
    let uops = lin(vec![UOp::store(&g0, &lidx, &ld0.add(&ld1))]);
    let sum = &uops.last().unwrap().src()[2];
    assert_eq!(sum.src()[0], cint(2));
    assert_eq!(
        sum.src()[1],
        UOp::load_after(&smem, &i2, None, &barrier, dtypes::int32)
    );
}

#[test]
fn fold_gated_store() {
    let g = UOp::define_global(dtypes::int32, 0, true);
    let idx = cint(0);
    let val = cint(42);
    let (f, t) = (
        UOp::cnst(dtypes::bool, false),
        UOp::cnst(dtypes::bool, true),
    );
    let st0 = UOp::store_gated(&g, &idx, &val, &f);
    let st1 = UOp::store_gated(&g, &idx, &val, &t);
    let uops = lin(vec![st0, st1]);
    assert_eq!(uops.len(), 4);
    assert_eq!(uops[3], UOp::store(&g, &idx, &val));
}

#[test]
fn identities() {
    let x = fvar();
    let i = ivar("i");
    assert_eq!(folded(&x.mul(1.0)), x);
    assert_eq!(folded(&x.add(0.0)), x);
    assert_eq!(folded(&x.sub(0.0)), x);
    assert_eq!(folded(&x.neg().neg()), x);
    assert_eq!(folded(&x.mul(-1.0)), x.neg());
    assert_eq!(folded(&x.mul(0.0)), UOp::cnst(dtypes::float32, 0.0));
    assert_eq!(folded(&x.sub(&x)), UOp::cnst(dtypes::float32, 0.0));
    assert_eq!(folded(&x.div(&x)), UOp::cnst(dtypes::float32, 1.0));
    assert_eq!(folded(&i.idiv(1)), i);
    assert_eq!(folded(&i.idiv(-1)), i.neg());
    assert_eq!(folded(&i.idiv(&i)), cint(1));
    assert_eq!(folded(&i.modulo(1)), cint(0));
    let b = i.lt(3);
    assert_eq!(folded(&b.max(false)), b);
    assert_eq!(folded(&b.lt(false)), UOp::cnst(dtypes::bool, false));
    assert_eq!(
        folded(&UOp::cnst(dtypes::bool, true).lt(&b)),
        UOp::cnst(dtypes::bool, false)
    );
    assert_eq!(folded(&i.max(-2147483648i64)), i);
}

#[test]
fn zero_times_nan_is_nan() {
    let nan = UOp::cnst(dtypes::float32, f64::NAN);
    let out = folded(&nan.mul(0.0));
    assert!(matches!(out.const_value(), Some(ConstValue::Float(f)) if f.is_nan()));
    let inf = UOp::cnst(dtypes::float32, f64::INFINITY);
    let out = folded(&UOp::alu(
        BinaryOps::MUL,
        dtypes::float32,
        vec![inf, UOp::cnst(dtypes::float32, 0.0)],
    ));
    assert!(matches!(out.const_value(), Some(ConstValue::Float(f)) if f.is_nan()));
}

#[test]
fn full_constant_evaluation_uses_exec_alu() {
    let c = |v: i64| UOp::cnst(dtypes::int8, v);
    let out = folded(&UOp::alu(
        BinaryOps::ADD,
        dtypes::int8,
        vec![c(100), c(100)],
    ));
    assert_eq!(out.const_value(), Some(ConstValue::Int(-56)));
    let out = folded(&UOp::alu(
        BinaryOps::IDIV,
        dtypes::int32,
        vec![cint(-7), cint(2)],
    ));
    assert_eq!(out.const_value(), Some(ConstValue::Int(-3)));
    let h = UOp::cnst(dtypes::float16, 300.0);
    let out = folded(&UOp::alu(
        BinaryOps::MUL,
        dtypes::float16,
        vec![h.clone(), h],
    ));
    assert_eq!(out.const_value(), Some(ConstValue::Float(f64::INFINITY)));
    let l = UOp::cnst(dtypes::float32, 0.0);
    let out = folded(&UOp::alu(UnaryOps::LOG2, dtypes::float32, vec![l]));
    assert_eq!(
        out.const_value(),
        Some(ConstValue::Float(f64::NEG_INFINITY))
    );
}

#[test]
fn reassociation() {
    let i = ivar("i");
    assert_eq!(folded(&i.add(1).add(2)), i.add(3));
    assert_eq!(folded(&i.sub(1).add(5)), i.add(4));
    assert_eq!(folded(&i.mul(2).mul(3)), i.mul(6));
    assert_eq!(folded(&i.mul(2).add(i.mul(3))), i.mul(5));
    assert_eq!(folded(&i.mul(4).idiv(4)), i);
    assert_eq!(folded(&i.idiv(2).idiv(3)), i.idiv(6));
    assert_eq!(folded(&cint(1).add(&i).lt(5)), i.lt(4));
    assert_eq!(folded(&i.add(i.mul(3))), i.mul(4));
    assert_eq!(folded(&i.neg().lt(3)), cint(-3).lt(&i));
    let x = fvar();
    assert_eq!(folded(&x.div(2.0)), x.mul(0.5));
}

#[test]
fn store_folds() {
    let g = UOp::define_global(dtypes::float32, 0, true);
    let idx = ivar("i");
    // a store of the value just loaded from the same place is nothing
    let noop = UOp::store(&g, &idx, &UOp::load(&g, &idx, dtypes::float32));
    assert!(lin(vec![noop]).is_empty());
    // a store of where(gate, alt, same load) is a gated store of alt
    let gate = idx.lt(3);
    let alt = UOp::cnst(dtypes::float32, 5.0);
    let w = UOp::where_(&gate, &alt, UOp::load(&g, &idx, dtypes::float32));
    let uops = lin(vec![UOp::store(&g, &idx, &w)]);
    assert_eq!(
        *uops.last().unwrap(),
        UOp::store_gated(&g, &idx, &alt, &gate)
    );
    // a store of a vector rebuilt from its own lanes stores the vector
    let v = UOp::load(
        &UOp::define_global(dtypes::float32, 1, false),
        &idx,
        dtypes::float32.vec(4),
    );
    let lanes: Vec<UOp> = (0..4).map(|i| UOp::gep(&v, i, dtypes::float32)).collect();
    let st = UOp::store(&g, &idx, &UOp::vectorize(lanes, dtypes::float32.vec(4)));
    assert_eq!(*lin(vec![st]).last().unwrap(), UOp::store(&g, &idx, &v));
}

#[test]
fn max_of_special_below_constant() {
    let s = UOp::special(0, "gidx0", 4);
    assert_eq!(folded(&cint(3).max(&s)), cint(3));
    assert_eq!(folded(&cint(2).max(&s)), cint(2).max(&s));
}

/// A reduce `for r in 0..n: acc = val + acc` over a loop-invariant `val`.
fn reduce_of(val: &UOp, n: i64, acc_dt: DType) -> (UOp, UOp) {
    let rng = UOp::range_const(0, n, 1, 0, true);
    let acc = UOp::define_acc(acc_dt, 0, std::slice::from_ref(&rng), 0, 0);
    let phi = UOp::phi(&acc, &val.add(&acc));
    (rng, phi)
}

#[test]
fn sum_collapse_of_loop_invariant_value() {
    let x = fvar();
    let (_, phi) = reduce_of(&x, 10, dtypes::float32);
    let g = UOp::define_global(dtypes::float32, 0, true);
    let uops = lin(vec![UOp::store(&g, &cint(0), &phi)]);
    assert!(uops
        .iter()
        .all(|u| !matches!(u.op(), UOps::RANGE | UOps::DEFINE_ACC | UOps::PHI)));
    assert_eq!(uops.last().unwrap().src()[2], x.mul(10.0));
}

#[test]
fn loop_dependent_sum_is_kept() {
    let rng = UOp::range_const(0, 10, 1, 0, true);
    let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rng), 0, 0);
    let phi = UOp::phi(&acc, &rng.add(&acc));
    let g = UOp::define_global(dtypes::int32, 0, true);
    let uops = lin(vec![UOp::store(&g, &cint(0), &phi)]);
    assert!(uops.iter().any(|u| u.op() == UOps::PHI));
    assert!(uops.iter().any(|u| u.op() == UOps::ENDRANGE));
}

#[test]
fn arange_loop_folds_to_closed_form() {
    // sum over r in [0, 10) of (gidx - 2r < 1 ? 1 : 0), the shape of an arange/cumsum kernel
    let gidx = UOp::range_const(0, 10, 1, 0, false);
    let rng = UOp::range_const(0, 10, 2, 0, true);
    let cond = gidx.add(rng.mul(-2)).lt(1);
    let val = UOp::where_(&cond, cint(1), cint(0));
    let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rng), 0, 0);
    let phi = UOp::phi(&acc, &val.add(&acc));
    let g = UOp::define_global(dtypes::int32, 0, true);
    let uops = lin(vec![UOp::store(&g, &gidx, &phi)]);
    // the reduce loop is gone, the global loop stays
    let ranges: Vec<&UOp> = uops.iter().filter(|u| u.op() == UOps::RANGE).collect();
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges[0], &gidx);
    assert!(uops
        .iter()
        .all(|u| !matches!(u.op(), UOps::UNMUL | UOps::PHI | UOps::DEFINE_ACC)));
    // the NEG form folds too
    let cond = gidx.add(rng.neg()).lt(1);
    let val = UOp::where_(&cond, cint(1), cint(0));
    let phi = UOp::phi(&acc, &val.add(&acc));
    let uops = lin(vec![UOp::store(&g, &gidx, &phi)]);
    assert_eq!(uops.iter().filter(|u| u.op() == UOps::RANGE).count(), 1);
}

#[test]
fn arange_fold_needs_a_reduce_loop() {
    let gidx = UOp::range_const(0, 10, 1, 0, false);
    let rng = UOp::range_const(0, 10, 1, 1, false);
    let cond = gidx.add(rng.mul(-1)).lt(1);
    let val = UOp::where_(&cond, cint(1), cint(0));
    let g = UOp::define_global(dtypes::int32, 0, true);
    let uops = lin(vec![UOp::store(&g, &gidx.mul(10).add(&rng), &val)]);
    assert_eq!(uops.iter().filter(|u| u.op() == UOps::RANGE).count(), 2);
    assert!(uops
        .iter()
        .any(|u| u.alu_op() == Some(TernaryOps::WHERE.into())));
}

#[test]
fn accumulator_without_loop_is_its_initial_value() {
    let acc = UOp::define_acc(dtypes::float32, 2.0, &[], 0, 0);
    assert_eq!(
        folded(&acc.add(fvar())),
        UOp::cnst(dtypes::float32, 2.0).add(fvar())
    );
    let gep = UOp::gep(&UOp::cnst(dtypes::float32.vec(4), 3.0), 1, dtypes::float32);
    assert_eq!(folded(&gep), UOp::cnst(dtypes::float32, 3.0));
    assert!(matches!(UOp::cnst(dtypes::int32, 1).arg(), UArg::Const(_)));
}
