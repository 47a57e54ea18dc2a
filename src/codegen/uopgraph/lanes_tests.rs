use super::*;
use crate::codegen::uopgraph::{linearize_for, vectorize_alus};
use crate::dtype::dtypes;

const F: DType = dtypes::float32;

/// The reduce loop the accumulator sums over.
fn rng() -> UOp {
    UOp::range_const(0, 8, 0, 0, true)
}

/// An `n`-wide load from `buf` at `idx` plus the loop index times 64 (so the loop cannot fold).
fn load(buf: usize, idx: i64, n: u16) -> UOp {
    let g = UOp::define_global(F, buf, false);
    UOp::load(&g, &rng().mul(64).add(idx), F.vec(n))
}

/// `PHI(acc, t(3) + (t(2) + (t(1) + (t(0) + acc))))` of a scalar accumulator, stored: the adds
/// of the chain in lane order.
fn chain_store(t: impl Fn(usize) -> UOp) -> UOp {
    let acc = UOp::define_acc(F, 0.0, &[rng()], 0, 0);
    let sum = (0..4).fold(acc.clone(), |s, i| t(i).add(&s));
    let out = UOp::define_global(F, 0, true);
    UOp::store(&out, &UOp::cnst(dtypes::int32, 0), &UOp::phi(&acc, &sum))
}

/// The chain's values in lane order (the first sources of its adds, innermost first).
fn chain_terms(sink: &UOp) -> Vec<UOp> {
    let mut terms = vec![];
    let mut x = sink.src()[0].src()[2].src()[1].clone();
    while x.op() == UOps::ALU {
        terms.push(x.src()[0].clone());
        x = x.src()[1].clone();
    }
    terms.reverse();
    terms
}

/// `(v[i] - m)^2` per lane of one float4, summed into one scalar accumulator in lane order: the
/// sub and the square become one vector op each, the chain stays four scalar adds in order.
#[test]
fn a_variance_chain_folds_its_lanes_and_keeps_the_adds() {
    let v = load(1, 0, 4);
    let m = load(2, 0, 1);
    let neg = m.neg();
    let diff = |i: usize| UOp::gep(&v, i, F).add(&neg);
    let st = chain_store(|i| diff(i).mul(diff(i)));
    for mode in [VectorAlu::C, VectorAlu::Llvm] {
        let sink = fold_lane_groups(&UOp::sink(vec![st.clone()]), mode);
        let d = v.add(UOp::vectorize(vec![neg.clone(); 4], F.vec(4)));
        let sq = d.mul(&d);
        let want: Vec<UOp> = (0..4).map(|i| UOp::gep(&sq, i, F)).collect();
        assert_eq!(chain_terms(&sink), want);
        // the full fold leaves the chain scalar too, and the list orders and verifies
        let full = vectorize_alus(&UOp::sink(vec![st.clone()]), mode).unwrap();
        assert_eq!(chain_terms(&full), want);
        let uops = linearize_for(std::slice::from_ref(&st), mode, true).unwrap();
        let vector_alus = uops
            .iter()
            .filter(|u| u.op() == UOps::ALU && u.dtype() == Some(F.vec(4)))
            .count();
        assert_eq!(vector_alus, 2);
    }
    assert_eq!(
        fold_lane_groups(&UOp::sink(vec![st.clone()]), VectorAlu::None),
        UOp::sink(vec![st])
    );
}

/// The matmul case: each lane of one vector times a scalar of its own (strided loads) stays
/// scalar: folding it would build a vector out of the scalar loads.
#[test]
fn a_strided_load_chain_does_not_fold() {
    let b = load(1, 0, 4);
    let st = chain_store(|i| load(2, 16 * i as i64, 1).mul(UOp::gep(&b, i, F)));
    let sink = UOp::sink(vec![st]);
    assert_eq!(fold_lane_groups(&sink, VectorAlu::Llvm), sink);
    assert_eq!(vectorize_alus(&sink, VectorAlu::Llvm).unwrap(), sink);
}

/// Lanes from two vectors, out of order, or not every lane of the vector: no fold.
#[test]
fn mixed_missing_and_out_of_order_lanes_stay_scalar() {
    let v = load(1, 0, 4);
    let w = load(1, 4, 4);
    let mixed = chain_store(|i| {
        let src = if i == 2 { &w } else { &v };
        UOp::gep(src, i, F).mul(2.0)
    });
    let swapped = chain_store(|i| UOp::gep(&v, [1, 0, 2, 3][i], F).mul(2.0));
    let missing = chain_store(|i| UOp::gep(&v, i.min(2), F).mul(2.0));
    for st in [mixed, missing] {
        let sink = UOp::sink(vec![st]);
        assert_eq!(fold_lane_groups(&sink, VectorAlu::Llvm), sink);
    }
    // lanes read out of order are still every lane of one template (the chain's order is kept)
    let sink = fold_lane_groups(&UOp::sink(vec![swapped]), VectorAlu::Llvm);
    let twice = v.mul(UOp::cnst(F.vec(4), 2.0));
    let want: Vec<UOp> = [1, 0, 2, 3].map(|i| UOp::gep(&twice, i, F)).to_vec();
    assert_eq!(chain_terms(&sink), want);
}

/// Ops the renderer has no lane-wise vector form of stay scalar (C: no MAX).
#[test]
fn only_allowed_ops_fold() {
    let v = load(1, 0, 4);
    let st = chain_store(|i| UOp::gep(&v, i, F).max(UOp::cnst(F, 0.0)));
    let sink = UOp::sink(vec![st]);
    assert_eq!(fold_lane_groups(&sink, VectorAlu::C), sink);
    let got = fold_lane_groups(&sink, VectorAlu::Llvm);
    let relu = v.max(UOp::cnst(F.vec(4), 0.0));
    assert_eq!(chain_terms(&got)[3], UOp::gep(&relu, 3, F));
}

/// Lane `i` of `acc` updated to `s * b[i] + acc[i]`.
fn axpy_phi(acc: &UOp, s: &UOp, b: &UOp, i: usize) -> UOp {
    let lane = UOp::gep(acc, i, F);
    UOp::phi(&lane, &s.mul(UOp::gep(b, i, F)).add(&lane))
}

/// A vector accumulator updated lane by lane with a broadcast times the lanes of one vector,
/// read after the loop only by scalar ops C has no vector form of (no CAST of the lanes to fold
/// from): one vector multiply-add and one vector PHI; the scalar reads take lanes of the PHI.
#[test]
fn lane_phis_of_one_accumulator_fold_without_a_vector_root() {
    let b = load(1, 0, 4);
    let s = load(2, 0, 1);
    let acc = UOp::define_acc(F.vec(4), 0.0, &[rng()], 0, 0);
    let out = UOp::define_global(F, 0, true);
    let stores: Vec<UOp> = (0..4)
        .map(|i| {
            let phi = axpy_phi(&acc, &s, &b, i);
            UOp::store(&out, &UOp::cnst(dtypes::int32, i as i64), &phi.max(0.0))
        })
        .collect();
    let sink = vectorize_alus(&UOp::sink(stores), VectorAlu::C).unwrap();
    let splat = UOp::vectorize(vec![s.clone(); 4], F.vec(4));
    let vphi = UOp::phi(&acc, &splat.mul(&b).add(&acc));
    for (i, st) in sink.src().iter().enumerate() {
        assert_eq!(st.src()[2], UOp::gep(&vphi, i, F).max(0.0));
    }
    // a lane missing: the lanes stay as they are
    let three: Vec<UOp> = (0..3)
        .map(|i| {
            UOp::store(
                &out,
                &UOp::cnst(dtypes::int32, 0),
                &axpy_phi(&acc, &s, &b, i),
            )
        })
        .collect();
    let sink = UOp::sink(three);
    assert_eq!(vectorize_alus(&sink, VectorAlu::C).unwrap(), sink);
}

/// Lanes whose results feed a scalar op the fold does not take (here EXP2, which the compilers
/// widen over more lanes themselves) stay scalar, and so do the lanes feeding those.
#[test]
fn lanes_feeding_a_transcendental_stay_scalar() {
    let v = load(1, 0, 4);
    let m = load(2, 0, 1).neg();
    let st = chain_store(|i| {
        let x = UOp::gep(&v, i, F).add(&m).mul(1.5);
        UOp::alu_auto(UnaryOps::EXP2, vec![x])
    });
    let sink = UOp::sink(vec![st]);
    for mode in [VectorAlu::C, VectorAlu::Llvm] {
        assert_eq!(fold_lane_groups(&sink, mode), sink);
    }
}
