//! Toposort order, scope ends, accumulator hoisting, type_verify, flops_mem and the text forms.

use super::*;
use crate::codegen::uop_serial::{deserialize, print_uops, serialize};
use crate::codegen::uops::WmmaArg;
use crate::dtype::dtypes;

fn cint(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

fn ops(uops: &[UOp]) -> Vec<UOps> {
    uops.iter().map(|u| u.op()).collect()
}

/// data0[r0] = data1[r0] + data2[r0] for r0 in 0..16.
pub(crate) fn elementwise_add() -> Vec<UOp> {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let d2 = UOp::define_global(dtypes::float32, 2, false);
    let r0 = UOp::range_const(0, 16, 1, 0, false);
    let a = UOp::load(&d1, &r0, dtypes::float32);
    let b = UOp::load(&d2, &r0, dtypes::float32);
    vec![UOp::store(&d0, &r0, &a.add(&b))]
}

/// data0[r0] = sum over r1 of data1[r0*8 + r1], r0 in 0..4, r1 in 0..8.
pub(crate) fn reduce_sum() -> Vec<UOp> {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let r0 = UOp::range_const(0, 4, 1, 0, false);
    let r1 = UOp::range_const(0, 8, 2, 0, true);
    let acc = UOp::define_acc(dtypes::float32, 0.0, std::slice::from_ref(&r1), 0, 0);
    let x = UOp::load(&d1, &r0.mul(8).add(&r1), dtypes::float32);
    let phi = UOp::phi(&acc, &x.add(&acc));
    vec![UOp::store(&d0, &r0, &phi)]
}

#[test]
fn elementwise_order() {
    let uops = linearize(&elementwise_add(), None, true).unwrap();
    use UOps::*;
    assert_eq!(
        ops(&uops),
        vec![
            DEFINE_GLOBAL,
            DEFINE_GLOBAL,
            DEFINE_GLOBAL,
            CONST,
            CONST,
            RANGE,
            LOAD,
            LOAD,
            ALU,
            STORE,
            ENDRANGE
        ]
    );
    assert_eq!(globals(&uops), vec![(0, true), (1, false), (2, false)]);
    assert_eq!(uops[3], cint(0));
    assert_eq!(uops[6].src()[0], uops[1]);
    assert!(uops[10].src()[0].ptr_eq(&uops[5]));
}

#[test]
fn reduce_order_hoists_the_accumulator() {
    let uops = linearize(&reduce_sum(), None, true).unwrap();
    use UOps::*;
    assert_eq!(
        ops(&uops),
        vec![
            DEFINE_GLOBAL,
            DEFINE_GLOBAL,
            CONST,
            CONST,
            CONST,
            CONST,
            RANGE,
            ALU,
            DEFINE_ACC,
            RANGE,
            ALU,
            LOAD,
            ALU,
            PHI,
            ENDRANGE,
            STORE,
            ENDRANGE
        ]
    );
    // the inner ENDRANGE closes the reduce loop, the outer one the global loop
    assert_eq!(uops[14].src()[0], uops[9]);
    assert_eq!(uops[16].src()[0], uops[6]);
    assert_eq!(uops[2], cint(0));
    assert_eq!(uops[3], UOp::cnst(dtypes::float32, 0.0));
}

/// Three accumulators: two of the outer reduce loop (numbered 1 and 0) and one of the inner one,
/// each summing a load; the stores write their totals.
fn three_accumulators() -> Vec<UOp> {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let outer = UOp::range_const(0, 4, 1, 0, true);
    let inner = UOp::range_const(0, 8, 2, 1, true);
    let acc = |loops: &[UOp], idx: usize| UOp::define_acc(dtypes::float32, 0.0, loops, 0, idx);
    let (a1, a0) = (
        acc(std::slice::from_ref(&outer), 1),
        acc(std::slice::from_ref(&outer), 0),
    );
    let a2 = acc(&[outer.clone(), inner.clone()], 2);
    let x = UOp::load(&d1, &outer.mul(8).add(&inner), dtypes::float32);
    let y = UOp::load(&d1, &outer, dtypes::float32);
    let p2 = UOp::phi(&a2, &x.add(&a2));
    let p1 = UOp::phi(&a1, &y.add(&a1));
    let p0 = UOp::phi(&a0, &p2.add(&a0));
    vec![
        UOp::store(&d0, &cint(0), &p0),
        UOp::store(&d0, &cint(1), &p1),
    ]
}

#[test]
fn accumulators_go_before_their_first_placed_loop_in_placement_order() {
    let uops = linearize(&three_accumulators(), None, false).unwrap();
    let pos = |u: &UOp| uops.iter().position(|x| x.ptr_eq(u)).unwrap();
    let accs: Vec<usize> = (0..uops.len())
        .filter(|&i| uops[i].op() == UOps::DEFINE_ACC)
        .collect();
    assert_eq!(accs.len(), 3);
    let ranges: Vec<usize> = (0..uops.len())
        .filter(|&i| uops[i].op() == UOps::RANGE)
        .collect();
    assert_eq!(ranges.len(), 2);
    for &a in &accs {
        // right before a RANGE it reads, with only accumulators between
        let next = (a..uops.len())
            .find(|&i| uops[i].op() != UOps::DEFINE_ACC)
            .unwrap();
        assert_eq!(uops[next].op(), UOps::RANGE, "{:?}", ops(&uops));
        assert!(uops[a].src().iter().any(|s| pos(s) == next));
        // and that is the first placed one among its loops
        let first = uops[a].src()[1..].iter().map(pos).min().unwrap();
        assert_eq!(first, next);
    }
    // all three hoist before the outer loop (the first placed of each), in the order they were
    // placed (the toposort's tie-break: accumulator number)
    let idx: Vec<usize> = accs
        .iter()
        .map(|&a| match uops[a].arg() {
            UArg::Acc { idx, .. } => *idx,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(idx, vec![0, 1, 2]);
    assert_eq!(accs, vec![ranges[0] - 3, ranges[0] - 2, ranges[0] - 1]);
}

#[test]
fn if_scope_ends_after_its_store() {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let tmp = UOp::define_local(dtypes::float32, "temp", 4);
    let lidx = UOp::special(0, "lidx0", 4);
    let st = UOp::store(&tmp, &lidx, &UOp::cnst(dtypes::float32, 1.0));
    let bar = UOp::barrier(vec![st]);
    let cond = lidx.lt(1);
    let iff = UOp::if_(&cond, Some(&bar));
    let v = UOp::load_after(&tmp, &cint(2), None, &iff, dtypes::float32);
    let out = UOp::store_gated(&d0, &cint(0), &v, &cond);
    let uops = linearize(&[out], None, true).unwrap();
    let pos = |op: UOps| uops.iter().position(|u| u.op() == op).unwrap();
    assert!(pos(UOps::BARRIER) < pos(UOps::IF));
    assert_eq!(pos(UOps::ENDIF), uops.len() - 1);
    assert_eq!(uops[uops.len() - 2].op(), UOps::STORE);
}

#[test]
fn uop_order_follows_tinygrad() {
    use std::cmp::Ordering::*;
    assert_eq!(uop_cmp(&cint(1), &cint(2)), Less);
    assert_eq!(uop_cmp(&cint(1), &UOp::cnst(dtypes::float32, 1.0)), Less);
    assert_eq!(uop_cmp(&UOp::cnst(dtypes::float32, 0.5), &cint(1)), Less);
    assert_eq!(
        uop_cmp(&UOp::define_var("b", 0, 1), &UOp::define_var("a", 0, 9)),
        Greater
    );
    // ALU args are not compared (0.9.1): sources decide
    let (a, b) = (cint(1), cint(2));
    assert_eq!(uop_cmp(&a.mul(&b), &a.add(&b)), Equal);
    assert_eq!(uop_cmp(&a.add(&a), &a.mul(&b)), Less);
    assert_eq!(
        uop_cmp(&UOp::define_global(dtypes::float32, 0, true), &cint(0)),
        Less
    );
}

#[test]
fn variables_are_sorted_by_name() {
    let d0 = UOp::define_global(dtypes::int32, 0, true);
    let (b, a) = (UOp::define_var("b", 1, 9), UOp::define_var("a", 1, 9));
    let uops = linearize(&[UOp::store(&d0, &cint(0), &b.add(&a))], None, true).unwrap();
    assert_eq!(vars(&uops), vec![("a".into(), 1, 9), ("b".into(), 1, 9)]);
    let names: Vec<&UArg> = uops
        .iter()
        .filter(|u| u.op() == UOps::DEFINE_VAR)
        .map(|u| u.arg())
        .collect();
    assert!(matches!(names[0], UArg::Var { name, .. } if name == "a"));
}

#[test]
fn type_verify_rejects_bad_dtypes() {
    let f = |v: f64| UOp::cnst(dtypes::float32, v);
    let bad_const = UOp::new(
        UOps::CONST,
        Some(dtypes::float32),
        vec![],
        UArg::Const(ConstValue::Int(1)),
    );
    assert!(type_verify(&[bad_const]).is_err());
    let mixed = UOp::alu(BinaryOps::ADD, dtypes::float32, vec![f(1.0), cint(1)]);
    let err = type_verify(&[f(1.0), cint(1), mixed]).unwrap_err();
    assert!(err.message().contains("uop 2"), "{err}");
    let cmp = UOp::alu(BinaryOps::CMPLT, dtypes::float32, vec![f(1.0), f(2.0)]);
    assert!(type_verify(&[cmp]).is_err());
    let idiv = UOp::alu(BinaryOps::IDIV, dtypes::float32, vec![f(1.0), f(2.0)]);
    assert!(type_verify(&[idiv]).is_err());
    let wh = UOp::alu(
        TernaryOps::WHERE,
        dtypes::float32,
        vec![cint(1), f(1.0), f(2.0)],
    );
    assert!(type_verify(&[wh]).is_err());
    let neg = UOp::alu(crate::ops::UnaryOps::NEG, dtypes::int32, vec![f(1.0)]);
    assert!(type_verify(&[neg]).is_err());
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let st = UOp::store_gated(&d0, &cint(0), &f(1.0), &cint(1));
    assert!(type_verify(&[st]).is_err());
    let cast = UOp::new(UOps::CAST, Some(dtypes::int32), vec![f(1.0)], UArg::Gep(0));
    assert!(type_verify(&[cast]).is_err());
    let acc = UOp::new(
        UOps::DEFINE_ACC,
        Some(dtypes::float32),
        vec![cint(0)],
        UArg::Acc { buf: 0, idx: 0 },
    );
    assert!(type_verify(&[acc]).is_err());
    // the good kernels pass
    assert!(linearize(&reduce_sum(), None, true).is_ok());
}

#[test]
fn flops_and_memory() {
    let none = HashMap::new();
    let uops = linearize(&elementwise_add(), None, true).unwrap();
    assert_eq!(flops_mem(&uops, false, &none).unwrap(), (16, 16 * 4 * 3));
    let uops = linearize(&reduce_sum(), None, true).unwrap();
    assert_eq!(
        flops_mem(&uops, false, &none).unwrap(),
        (4 + 32 + 32, 32 * 4 + 4 * 4)
    );
    assert_eq!(flops_mem(&uops, true, &none).unwrap().0, 32);
    // a symbolic loop bound counts the variable's value, else its maximum
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let n = UOp::define_var("n", 1, 100);
    let r = UOp::range(cint(0), n, 1, 0, false);
    let st = UOp::store(&d0, &r, &UOp::cnst(dtypes::float32, 1.0));
    let uops = linearize(&[st], None, true).unwrap();
    assert_eq!(flops_mem(&uops, false, &none).unwrap().1, 400);
    let vals = HashMap::from([("n".to_string(), 5)]);
    assert_eq!(flops_mem(&uops, false, &vals).unwrap().1, 20);
}

#[test]
fn serialize_round_trips() {
    let mut uops = linearize(&reduce_sum(), None, true).unwrap();
    uops.push(UOp::cnst(dtypes::float32, f64::NAN));
    uops.push(UOp::cnst(dtypes::float64, -0.0));
    uops.push(UOp::cnst(dtypes::uint64, ConstValue::Int(u64::MAX as i128)));
    uops.push(UOp::cnst(dtypes::bool, true));
    uops.push(UOp::define_var("odd \"name\"\\x", -3, 7));
    uops.push(UOp::define_local(dtypes::float16.vec(2), "temp 1", 16));
    uops.push(UOp::special(2, "lidx2", 32));
    let a = uops[uops.len() - 5].clone();
    let w = WmmaArg {
        name: "WMMA_8_16_16_half_float".into(),
        dims: [8, 16, 16],
        dtype_in: dtypes::float16,
        dtype_out: dtypes::float32,
        upcast_sizes: vec![8, 4, 4],
        device: "CUDA".into(),
    };
    uops.push(UOp::wmma(&a, &a, &a, w, dtypes::float32.vec(4)));
    uops.push(UOp::gep(&uops[uops.len() - 1].clone(), 3, dtypes::float32));
    let text = serialize(&uops).unwrap();
    let back = deserialize(&text).unwrap();
    assert_eq!(back.len(), uops.len());
    for (x, y) in back.iter().zip(&uops) {
        assert_eq!(x, y);
        if let (Some(ConstValue::Float(p)), Some(ConstValue::Float(q))) =
            (x.const_value(), y.const_value())
        {
            assert_eq!(p.to_bits(), q.to_bits());
        }
    }
    assert_eq!(serialize(&back).unwrap(), text);
}

#[test]
fn deserialize_rejects_garbage() {
    assert!(deserialize("not uops").is_err());
    let good = serialize(&linearize(&elementwise_add(), None, true).unwrap()).unwrap();
    assert!(deserialize(&good.replace("[0,", "[99,")).is_err());
    assert!(deserialize(&good.replace("ALU", "FOO")).is_err());
    assert!(deserialize(&good.replace("float32", "float33")).is_err());
    assert!(deserialize(&good.replace("G 0 1", "G 0 7")).is_err());
    let err = deserialize(&format!("{good}11 CONST int32 [] C i\n")).unwrap_err();
    assert!(err.message().contains("line 13"), "{err}");
}

#[test]
fn print_uops_shows_indices() {
    let uops = linearize(&elementwise_add(), None, true).unwrap();
    let text = print_uops(&uops);
    assert_eq!(text.lines().count(), uops.len());
    assert!(text.lines().nth(8).unwrap().contains("[6, 7]"), "{text}");
    assert!(
        text.lines().nth(8).unwrap().contains("BinaryOps.ADD"),
        "{text}"
    );
    assert!(text.lines().next().unwrap().contains("(0, True)"), "{text}");
}

/// `has_parent` finds a RANGE through the loop summary on every path that depends on it, tells
/// apart two loops, and still walks everything for a target that is not a RANGE.
#[test]
fn has_parent_ranges() {
    let r0 = UOp::range_const(0, 4, 0, 0, false);
    let r1 = UOp::range_const(0, 8, 1, 1, true);
    let r0_again = UOp::range_const(0, 4, 0, 0, false);
    let c = UOp::cnst(dtypes::int32, 3);
    let x = r0.mul(4).add(&c);
    let y = x.add(&r1).max(&c);
    assert!(x.has_parent(&r0));
    assert!(x.has_parent(&r0_again));
    assert!(!x.has_parent(&r1));
    assert!(y.has_parent(&r0) && y.has_parent(&r1));
    assert!(y.has_parent(&c) && y.has_parent(&x));
    assert!(!c.has_parent(&r0) && !r0.has_parent(&r0));
    let g = UOp::define_global(dtypes::float32, 0, false);
    let ld = UOp::load(&g, &c, dtypes::float32);
    assert!(ld.has_parent(&g) && !ld.has_parent(&r0));
}

/// `has_parent` on walks past the keys it keeps in place: a chain of diamonds (2^60 paths, so
/// the walk only ends if every node is visited once), a target at the bottom, and one that is
/// not there.
#[test]
fn has_parent_deep_diamonds() {
    let bottom = UOp::define_var("n", 0, 9);
    let mut x = bottom.clone();
    for i in 0..60 {
        let (l, r) = (x.add(i), x.mul(i + 2));
        x = l.add(&r);
    }
    assert!(x.has_parent(&bottom));
    assert!(!x.has_parent(&UOp::define_var("m", 0, 9)));
    let r = UOp::range_const(0, 4, 0, 0, false);
    assert!(!x.has_parent(&r));
    assert!(x.add(&r).has_parent(&r));
}
