use super::*;
use crate::codegen::uopgraph::linearize_for;
use crate::dtype::dtypes;

const F: DType = dtypes::float32;

fn vec_load(n: u16, buf: usize) -> (UOp, UOp) {
    let g = UOp::define_global(F, buf, false);
    let idx = UOp::cnst(dtypes::int32, 0);
    (g.clone(), UOp::load(&g, &idx, F.vec(n)))
}

fn lanes(v: &UOp, n: usize) -> Vec<UOp> {
    (0..n).map(|i| UOp::gep(v, i, F)).collect()
}

fn store_of(val: UOp) -> UOp {
    let out = UOp::define_global(F, 0, true);
    UOp::store(&out, &UOp::cnst(dtypes::int32, 0), &val)
}

/// The value the (only) STORE of the folded graph writes.
fn stored(sink: &UOp) -> UOp {
    sink.src()[0].src()[2].clone()
}

fn fold(val: UOp, mode: VectorAlu) -> UOp {
    stored(&vectorize_alus(&UOp::sink(vec![store_of(val)]), mode).unwrap())
}

#[test]
fn in_order_geps_fold_to_the_vector_and_lane_wise_alus_to_one() {
    let (_, a) = vec_load(8, 1);
    let (_, b) = vec_load(8, 2);
    let (la, lb) = (lanes(&a, 8), lanes(&b, 8));
    let sum: Vec<UOp> = la.iter().zip(&lb).map(|(x, y)| x.mul(y).add(x)).collect();
    let got = fold(UOp::vectorize(sum, F.vec(8)), VectorAlu::Llvm);
    assert_eq!(got, a.mul(&b).add(&a).clone());
    assert_eq!(got.dtype(), Some(F.vec(8)));
    // out of order: the lanes stay a gather
    let mut swapped = la.clone();
    swapped.swap(0, 1);
    let v = UOp::vectorize(swapped.clone(), F.vec(8));
    assert_eq!(fold(v.clone(), VectorAlu::Llvm), v);
}

#[test]
fn broadcasts_and_constants() {
    let (_, a) = vec_load(4, 1);
    let s = UOp::load(
        &UOp::define_global(F, 2, false),
        &UOp::cnst(dtypes::int32, 3),
        F,
    );
    let la = lanes(&a, 4);
    let prod: Vec<UOp> = la.iter().map(|x| s.mul(x).add(2.5)).collect();
    let got = fold(UOp::vectorize(prod, F.vec(4)), VectorAlu::Llvm);
    let splat = UOp::vectorize(vec![s.clone(); 4], F.vec(4));
    assert_eq!(got, splat.mul(&a).add(UOp::cnst(F.vec(4), 2.5)));
    // distinct constants: a constant vector
    let mixed: Vec<UOp> = la
        .iter()
        .enumerate()
        .map(|(i, x)| x.add(i as f64))
        .collect();
    let consts: Vec<UOp> = (0..4).map(|i| UOp::cnst(F, i as f64)).collect();
    let got = fold(UOp::vectorize(mixed, F.vec(4)), VectorAlu::Llvm);
    assert_eq!(got, a.add(UOp::vectorize(consts, F.vec(4))));
}

#[test]
fn c_folds_arithmetic_only_and_none_folds_nothing() {
    let (_, a) = vec_load(4, 1);
    let (_, b) = vec_load(4, 2);
    let (la, lb) = (lanes(&a, 4), lanes(&b, 4));
    let maxes: Vec<UOp> = la.iter().zip(&lb).map(|(x, y)| x.max(y)).collect();
    let v = UOp::vectorize(maxes, F.vec(4));
    assert_eq!(fold(v.clone(), VectorAlu::Llvm), a.max(&b));
    assert_eq!(fold(v.clone(), VectorAlu::C), v);
    let sums: Vec<UOp> = la.iter().zip(&lb).map(|(x, y)| x.add(y).neg()).collect();
    let v = UOp::vectorize(sums, F.vec(4));
    assert_eq!(fold(v.clone(), VectorAlu::C), a.add(&b).neg());
    assert_eq!(fold(v.clone(), VectorAlu::None), v);
    // mixed ops stay scalar
    let mixed: Vec<UOp> = la
        .iter()
        .zip(&lb)
        .enumerate()
        .map(|(i, (x, y))| if i == 2 { x.mul(y) } else { x.add(y) })
        .collect();
    let v = UOp::vectorize(mixed, F.vec(4));
    assert_eq!(fold(v.clone(), VectorAlu::Llvm), v);
    assert!(!allows(
        VectorAlu::C,
        Op::Binary(BinaryOps::ADD),
        dtypes::int32
    ));
    assert!(allows(
        VectorAlu::Llvm,
        Op::Binary(BinaryOps::IDIV),
        dtypes::int32
    ));
    assert!(!allows(VectorAlu::Llvm, Op::Unary(UnaryOps::SIN), F));
}

/// A vector accumulator updated lane by lane folds into one vector PHI; a scalar use of a lane's
/// PHI elsewhere reads that lane of the vector PHI (so the accumulator is updated once).
#[test]
fn lane_phis_fold_into_one_vector_phi() {
    let (_, a) = vec_load(4, 1);
    let r = UOp::range_const(0, 8, 0, 0, true);
    let acc = UOp::define_acc(F.vec(4), 0.0, &[r], 0, 0);
    let phis: Vec<UOp> = (0..4)
        .map(|i| {
            let lane = UOp::gep(&acc, i, F);
            UOp::phi(&lane, &UOp::gep(&a, i, F).add(&lane))
        })
        .collect();
    let out = UOp::define_global(F, 0, true);
    let st_vec = UOp::store(
        &out,
        &UOp::cnst(dtypes::int32, 0),
        &UOp::vectorize(phis.clone(), F.vec(4)),
    );
    let st_one = UOp::store(&out, &UOp::cnst(dtypes::int32, 4), &phis[2].mul(2.0));
    let sink = vectorize_alus(&UOp::sink(vec![st_vec, st_one]), VectorAlu::Llvm).unwrap();
    let vphi = UOp::phi(&acc, &a.add(&acc));
    assert_eq!(sink.src()[0].src()[2], vphi);
    assert_eq!(sink.src()[1].src()[2], UOp::gep(&vphi, 2, F).mul(2.0));
    let n_phis = sink
        .sparents()
        .iter()
        .filter(|u| u.op() == UOps::PHI)
        .count();
    assert_eq!(n_phis, 1);
    // and the list orders and verifies
    let st = UOp::store(
        &out,
        &UOp::cnst(dtypes::int32, 0),
        &UOp::vectorize(phis, F.vec(4)),
    );
    let uops = linearize_for(&[st], VectorAlu::Llvm, true).unwrap();
    assert!(uops
        .iter()
        .any(|u| u.op() == UOps::PHI && u.dtype() == Some(F.vec(4))));
}

/// A deep lane-wise chain folds without recursion trouble, and shared lanes fold once.
#[test]
fn deep_chains_fold() {
    let (_, a) = vec_load(4, 1);
    let first = lanes(&a, 4);
    let mut la = first.clone();
    let mut want = a.clone();
    for _ in 0..200 {
        la = la.iter().zip(&first).map(|(x, y)| x.mul(y)).collect();
        want = want.mul(&a);
    }
    let got = fold(UOp::vectorize(la, F.vec(4)), VectorAlu::Llvm);
    assert_eq!(got, want);
}
