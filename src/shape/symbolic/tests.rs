//! Cases pinned by tinygrad 0.9.1's test/unit/test_symbolic.py (TestSymbolic), written from the
//! expected render strings and bounds.

use super::*;

pub(super) fn v(name: &str, lo: i64, hi: i64) -> Node {
    Node::var(name, lo, hi).unwrap()
}
pub(super) fn n(x: i64) -> Node {
    Node::Num(x)
}
#[track_caller]
pub(super) fn check(node: Result<Node>, lo: i64, hi: i64, s: &str) {
    let node = node.unwrap();
    assert_eq!(node.render(), s, "render of {node:?}");
    assert_eq!(node.min(), &n(lo), "min of {s}");
    assert_eq!(node.max(), &n(hi), "max of {s}");
}
fn lt(a: Node, b: i64) -> Result<Node> {
    create_lt_node(&a, &n(b))
}
fn ge(a: Node, b: i64) -> Result<Node> {
    create_ge_node(&a, &n(b))
}
fn sum(xs: Vec<Node>) -> Node {
    Node::sum(xs).unwrap()
}

#[test]
fn test_ge() {
    check(ge(v("a", 3, 8), 77), 0, 0, "0");
    check(ge(v("a", 3, 8), 9), 0, 0, "0");
    check(ge(v("a", 3, 8), 8), 0, 1, "((a*-1)<-7)");
    check(ge(v("a", 3, 8), 4), 0, 1, "((a*-1)<-3)");
    check(ge(v("a", 3, 8), 3), 1, 1, "1");
    check(ge(v("a", 3, 8), 2), 1, 1, "1");
}

#[test]
fn test_lt() {
    check(lt(v("a", 3, 8), 77), 1, 1, "1");
    check(lt(v("a", 3, 8), 9), 1, 1, "1");
    check(lt(v("a", 3, 8), 8), 0, 1, "(a<8)");
    check(lt(v("a", 3, 8), 4), 0, 1, "(a<4)");
    check(lt(v("a", 3, 8), 3), 0, 0, "0");
    check(lt(v("a", 3, 8), 2), 0, 0, "0");
}

#[test]
fn test_ge_divides() {
    let e = lt(v("idx", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 3), 512);
    check(e, 0, 1, "(idx<128)");
}

#[test]
fn test_ge_divides_and() {
    let a = lt(v("idx1", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 3), 512).unwrap();
    let b = lt(v("idx2", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 3), 512).unwrap();
    check(Node::ands(vec![a, b]), 0, 1, "((idx1<128) and (idx2<128))");
    let a = lt(v("idx1", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 3), 512).unwrap();
    let b = lt(v("idx2", 0, 511) * 4 + v("FLOAT8_INDEX", 0, 7), 512).unwrap();
    let e = Node::ands(vec![a, b]).unwrap();
    check(e.floordiv(&n(4)), 0, 0, "0");
}

#[test]
fn test_lt_factors() {
    let e = lt(v("idx1", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 256), 512);
    check(e, 0, 1, "(((idx1*4)+FLOAT4_INDEX)<512)");
}

#[test]
fn test_div_becomes_num() {
    assert!(v("a", 2, 3).floordiv(&n(2)).unwrap().is_int());
}

#[test]
fn test_var_becomes_num() {
    assert_eq!(Node::var("a", 2, 2).unwrap(), n(2));
    assert!(Node::var("a", 2, 2).unwrap().is_int());
}

#[test]
fn test_equality() {
    let idx1 = v("idx1", 0, 3);
    let idx2 = v("idx2", 0, 3);
    assert_eq!(idx1, idx1);
    assert_ne!(idx1, idx2);
    assert_eq!(&idx1 * 4, &idx1 * 4);
    assert_ne!(&idx1 * 4, &idx1 * 3);
    assert_ne!(&idx1 * 4, &idx1 + 4);
    assert_ne!(&idx1 * 4, &idx2 * 4);
    assert_eq!(&idx1 + &idx2, &idx1 + &idx2);
    assert_eq!(&idx1 + &idx2, &idx2 + &idx1);
    assert_ne!(&idx1 + &idx2, idx2);
    assert_eq!(&idx1 * &idx2, &idx2 * &idx1);
}

#[test]
fn test_numnode_eq_int() {
    assert_eq!(n(1), 1);
    assert_eq!(n(2), 2);
    assert_ne!(n(1), n(2));
    use std::hash::{BuildHasher, RandomState};
    let s = RandomState::new();
    assert_eq!(s.hash_one(n(1)), s.hash_one(1i64));
    assert_eq!(s.hash_one(n(2)), s.hash_one(2i64));
}

#[test]
fn test_factorize() {
    let a = v("a", 0, 8);
    check(Ok(&a * 2 + &a * 3), 0, 40, "(a*5)");
}

#[test]
fn test_factorize_no_mul() {
    let a = v("a", 0, 8);
    check(Ok(&a + &a * 3), 0, 32, "(a*4)");
}

#[test]
fn test_neg() {
    check(Ok(-v("a", 0, 8)), -8, 0, "(a*-1)");
}

#[test]
fn test_add_sub() {
    check(Ok(v("a", 0, 8) + 1), 1, 9, "(1+a)");
    check(Ok(v("a", 0, 8) + n(1)), 1, 9, "(1+a)");
    check(Ok(v("a", 0, 8) - 1), -1, 7, "(-1+a)");
    check(Ok(v("a", 0, 8) - n(1)), -1, 7, "(-1+a)");
}

#[test]
fn test_mul_0_1_2() {
    check(v("a", 0, 8).try_mul(&n(0)), 0, 0, "0");
    check(Ok(v("a", 0, 8) * 1), 0, 8, "a");
    check(Ok(v("a", 0, 8) * 2), 0, 16, "(a*2)");
}

#[test]
fn test_mul_neg_1() {
    check(
        (v("a", 0, 2) * -1).floordiv(&n(3)),
        -1,
        0,
        "((((a*-1)+3)//3)+-1)",
    );
}

#[test]
fn test_div_1_mod_1() {
    check(v("a", 0, 8).floordiv(&n(1)), 0, 8, "a");
    check(v("a", 0, 8).modulo(&n(1)), 0, 0, "0");
}

#[test]
fn test_add_min_max() {
    check(Ok(v("a", 0, 8) * 2 + 12), 12, 28, "((a*2)+12)");
}

#[test]
fn test_div_min_max() {
    check(v("a", 0, 7).floordiv(&n(2)), 0, 3, "(a//2)");
}

#[test]
fn test_div_neg_min_max() {
    check(v("a", 0, 7).floordiv(&n(-2)), -4, 0, "((((a*-1)+8)//2)+-4)");
    check(v("a", 0, 6).floordiv(&n(-2)), -3, 0, "((((a*-1)+6)//2)+-3)");
}

#[test]
fn test_sum_div_min_max() {
    check(
        sum(vec![v("a", 0, 7), v("b", 0, 3)]).floordiv(&n(2)),
        0,
        5,
        "((a+b)//2)",
    );
}

#[test]
fn test_sum_div_factor() {
    check(
        sum(vec![v("a", 0, 7) * 4, v("b", 0, 3) * 4]).floordiv(&n(2)),
        0,
        20,
        "((a*2)+(b*2))",
    );
}

#[test]
fn test_sum_div_some_factor() {
    check(
        sum(vec![v("a", 0, 7) * 5, v("b", 0, 3) * 4]).floordiv(&n(2)),
        0,
        23,
        "(((a*5)//2)+(b*2))",
    );
}

#[test]
fn test_sum_div_some_partial_factor() {
    check(
        sum(vec![v("a", 0, 7) * 6, v("b", 0, 7) * 6]).floordiv(&n(16)),
        0,
        5,
        "(((a*3)+(b*3))//8)",
    );
    check(
        sum(vec![n(16), v("a", 0, 7) * 6, v("b", 0, 7) * 6]).floordiv(&n(16)),
        1,
        6,
        "((((a*3)+(b*3))//8)+1)",
    );
}

#[test]
fn test_sum_div_no_factor() {
    check(
        sum(vec![v("a", 0, 7) * 5, v("b", 0, 3) * 5]).floordiv(&n(2)),
        0,
        25,
        "(((a*5)+(b*5))//2)",
    );
}

#[test]
fn test_mod_factor() {
    check(
        sum(vec![v("a", 0, 7) * 100, v("b", 0, 3) * 50]).modulo(&n(100)),
        0,
        99,
        "((b*50)%100)",
    );
}

#[test]
fn test_mod_to_sub() {
    let e = (1 + v("a", 1, 2)).modulo(&n(2)).unwrap();
    assert_eq!(e.render(), (v("a", 1, 2) - 1).render());
    assert_eq!((e.min(), e.max()), (&n(0), &n(1)));
}

#[test]
fn test_sum_div_const() {
    check(sum(vec![v("a", 0, 7) * 4, n(3)]).floordiv(&n(4)), 0, 7, "a");
}

#[test]
fn test_sum_div_const_big() {
    check(
        sum(vec![v("a", 0, 7) * 4, n(3)]).floordiv(&n(16)),
        0,
        1,
        "(a//4)",
    );
}

#[test]
fn test_sum_lt_fold() {
    check(
        lt(sum(vec![v("a", 0, 7) * 4, v("b", 0, 3)]), 16),
        0,
        1,
        "(a<4)",
    );
    check(
        lt(sum(vec![v("a", 0, 7) * 4, v("b", 0, 4)]), 16),
        0,
        1,
        "(((a*4)+b)<16)",
    );
    check(
        lt(sum(vec![v("uidx", 0, 3), v("a", 0, 1529) * 12]), 4 * 67),
        0,
        1,
        "(a<23)",
    );
}

#[test]
fn test_mod_mul() {
    check((v("a", 0, 5) * 10).modulo(&n(9)), 0, 5, "a");
}

#[test]
fn test_mod_mod() {
    check(
        v("a", 0, 31).modulo(&n(12)).unwrap().modulo(&n(4)),
        0,
        3,
        "(a%4)",
    );
    check(
        (4 * v("a", 0, 31)).modulo(&n(12)).unwrap().modulo(&n(4)),
        0,
        0,
        "0",
    );
    check(
        v("a", 0, 31).modulo(&n(4)).unwrap().modulo(&n(12)),
        0,
        3,
        "(a%4)",
    );
}

#[test]
fn test_mul_mul() {
    check(Ok(v("a", 0, 5) * 10 * 9), 0, 450, "(a*90)");
}

#[test]
fn test_mul_lt() {
    check(lt(v("a", 0, 5) * 4, 13), 0, 1, "(a<4)");
    check(lt(v("a", 0, 5) * 4, 16), 0, 1, "(a<4)");
    check(ge(v("a", 0, 5) * 4, 12), 0, 1, "((a*-1)<-2)");
    check(ge(v("a", 0, 5) * 4, 13), 0, 1, "((a*-1)<-3)");
}

#[test]
fn test_div_div() {
    check(
        v("a", 0, 1800).floordiv(&n(10)).unwrap().floordiv(&n(9)),
        0,
        20,
        "(a//90)",
    );
}

#[test]
fn test_distribute_mul() {
    check(
        Ok(sum(vec![v("a", 0, 3), v("b", 0, 5)]) * 3),
        0,
        24,
        "((a*3)+(b*3))",
    );
}

#[test]
fn test_mod_mul_sum() {
    check(
        sum(vec![v("b", 0, 2), v("a", 0, 5) * 10]).modulo(&n(9)),
        0,
        7,
        "(a+b)",
    );
}

#[test]
fn test_sum_0() {
    check(Node::sum(vec![v("a", 0, 7)]), 0, 7, "a");
}

#[test]
fn test_mod_remove() {
    check(v("a", 0, 6).modulo(&n(100)), 0, 6, "a");
}

#[test]
fn test_big_mod() {
    check(v("a", 0, 20).modulo(&n(10)), 0, 9, "(a%10)");
}

#[test]
fn test_ge_remove() {
    check(ge(v("a", 0, 6), 25), 0, 0, "0");
}

#[test]
fn test_lt_remove() {
    check(lt(v("a", 0, 6), -3), 0, 0, "0");
    check(lt(v("a", 0, 6), 3), 0, 1, "(a<3)");
    check(lt(v("a", 0, 6), 8), 1, 1, "1");
}

#[test]
fn test_lt_sum_remove() {
    check(lt(v("a", 0, 6) + 2, 3), 0, 1, "(a<1)");
}

#[test]
fn test_and_fold_remove() {
    check(Node::ands(vec![n(0), v("a", 0, 1)]), 0, 0, "0");
    check(Node::ands(vec![n(1), v("a", 0, 1)]), 0, 1, "a");
}

#[test]
fn test_mod_factor_negative() {
    check(
        sum(vec![n(-29), v("a", 0, 10), v("b", 0, 10) * 28]).modulo(&n(28)),
        0,
        27,
        "((27+a)%28)",
    );
    check(
        sum(vec![n(-29), v("a", 0, 100), v("b", 0, 10) * 28]).modulo(&n(28)),
        0,
        27,
        "((27+a)%28)",
    );
}

#[test]
fn test_sum_combine_num() {
    check(
        Node::sum(vec![n(29), v("a", 0, 10), n(-23)]),
        6,
        16,
        "(6+a)",
    );
}

#[test]
fn test_sum_num_hoisted_and_factors_cancel_out() {
    check(
        Node::sum(vec![v("a", 0, 1) * -4 + 1, v("a", 0, 1) * 4]),
        1,
        1,
        "1",
    );
}

#[test]
fn test_div_factor() {
    check(
        sum(vec![n(-40), v("a", 0, 10) * 2, v("b", 0, 10) * 40]).floordiv(&n(40)),
        -1,
        9,
        "(-1+b)",
    );
}

#[test]
fn test_mul_div() {
    check((v("a", 0, 10) * 4).floordiv(&n(4)), 0, 10, "a");
    check((v("a", 0, 10) * 8).floordiv(&n(4)), 0, 20, "(a*2)");
    check((v("a", 0, 10) * 4).floordiv(&n(8)), 0, 5, "(a//2)");
}

#[test]
fn test_div_remove() {
    check(
        sum(vec![v("idx0", 0, 127) * 4, v("idx2", 0, 3)]).floordiv(&n(4)),
        0,
        127,
        "idx0",
    );
}

#[test]
fn test_div_numerator_negative() {
    check(
        (v("idx", 0, 9) * -10).floordiv(&n(11)),
        -9,
        0,
        "((((idx*-10)+99)//11)+-9)",
    );
}

#[test]
fn test_div_into_mod() {
    check(
        (v("idx", 0, 16) * 4).modulo(&n(8)).unwrap().floordiv(&n(4)),
        0,
        1,
        "(idx%2)",
    );
}

// TestSymbolicNumeric: for every constant and every Variable range in [0, 10), the folded value is
// exact and the bounds contain every value.
fn helper_test_numeric(f: &dyn Fn(&Node) -> Result<Node>, g: &dyn Fn(i64) -> i64) {
    for i in 0..10 {
        let r = f(&n(i)).unwrap();
        assert_eq!(r.min(), r.max());
        assert_eq!(r, g(i), "f({i})");
    }
    for kmin in 0..10 {
        for kmax in kmin..10 {
            let r = f(&v("tmp", kmin, kmax)).unwrap();
            let values: Vec<i64> = (kmin..=kmax).map(g).collect();
            let (lo, hi) = (r.min().as_int().unwrap(), r.max().as_int().unwrap());
            assert!(
                lo <= *values.iter().min().unwrap(),
                "min {lo} for [{kmin},{kmax}]"
            );
            assert!(
                hi >= *values.iter().max().unwrap(),
                "max {hi} for [{kmin},{kmax}]"
            );
            for (x, want) in (kmin..=kmax).zip(values) {
                assert_eq!(
                    r.evaluate(&|_| Some(x)).unwrap(),
                    want,
                    "{} at {x}",
                    r.render()
                );
            }
        }
    }
}
fn pf(a: i64, b: i64) -> i64 {
    py_floordiv(a, b).unwrap()
}
fn pm(a: i64, b: i64) -> i64 {
    py_mod(a, b).unwrap()
}

#[test]
fn test_symbolic_numeric() {
    helper_test_numeric(&|x| x.modulo(&n(4)), &|x| pm(x, 4));
    helper_test_numeric(&|x| x.floordiv(&n(4)), &|x| pf(x, 4));
    helper_test_numeric(&|x| (x + 1).floordiv(&n(2)), &|x| pf(x + 1, 2));
    helper_test_numeric(&|x| (x + 1).modulo(&n(2)), &|x| pm(x + 1, 2));
    helper_test_numeric(&|x| Ok(x * 2), &|x| x * 2);
    helper_test_numeric(&|x| Ok(x * 2 + 3), &|x| x * 2 + 3);
    helper_test_numeric(&|x| (x * 2 + 3).modulo(&n(4)), &|x| pm(x * 2 + 3, 4));
    helper_test_numeric(&|x| (x * 2 + 3).floordiv(&n(4)), &|x| pf(x * 2 + 3, 4));
    helper_test_numeric(&|x| (x * 2 + 3).floordiv(&n(4))?.modulo(&n(4)), &|x| {
        pm(pf(x * 2 + 3, 4), 4)
    });
}

#[test]
fn test_vars_simple_compound_dedup() {
    let (a, b, c) = (v("a", 0, 10), v("b", 0, 10), v("c", 0, 10));
    assert!(n(0).vars().is_empty());
    assert_eq!(a.vars(), vec![a.clone()]);
    assert_eq!(
        Node::raw_mul(a.clone(), n(3)).unwrap().vars(),
        vec![a.clone()]
    );
    let s = Node::raw_sum(vec![a.clone(), b.clone(), c.clone()]).unwrap();
    assert_eq!(s.vars(), vec![a.clone(), b.clone(), c.clone()]);
    assert_eq!((&a + &b * &c).vars(), vec![a.clone(), b.clone(), c.clone()]);
    let e = a.modulo(&n(3)).unwrap() + b.floordiv(&n(5)).unwrap();
    let mut got = e.vars();
    got.sort_by_key(|x| x.render());
    assert_eq!(got, vec![a.clone(), b.clone()]);
    let mut got = (&a + &b + &c - &a).vars();
    got.sort_by_key(|x| x.render());
    assert_eq!(got, vec![b.clone(), c.clone()]);
    assert_eq!((&a * &a).vars(), vec![a.clone()]);
    assert_eq!(
        (a.floordiv(&n(4)).unwrap() + a.floordiv(&n(6)).unwrap()).vars(),
        vec![a.clone()]
    );
}

#[test]
fn test_min_max_known() {
    let a = v("a", 1, 8);
    assert_eq!(py_max2(&n(1), &a).unwrap(), a);
    assert_eq!(py_max2(&a, &n(1)).unwrap(), a);
    assert_eq!(py_min2(&n(1), &a).unwrap(), 1);
    assert_eq!(py_min2(&a, &n(1)).unwrap(), 1);
}

#[test]
fn test_sym_render() {
    let a = v("a", 1, 8);
    let b = v("b", 1, 10);
    assert_eq!(a.render(), "a");
    assert_eq!(n(1).render(), "1");
    assert_eq!((&a + 1).render(), "(1+a)");
    assert_eq!((&a * &b).render(), "(a*b)");
}

#[test]
fn test_sym_infer() {
    let (a, b, c) = (v("a", 0, 10), v("b", 0, 10), v("c", 0, 10));
    let vv: VarVals = [(a.clone(), 2), (b.clone(), 3), (c.clone(), 4)]
        .into_iter()
        .collect();
    assert_eq!(sym_infer(&n(5), &vv).unwrap(), 5);
    assert_eq!(sym_infer(&a, &vv).unwrap(), 2);
    assert_eq!(sym_infer(&b, &vv).unwrap(), 3);
    assert_eq!(sym_infer(&(&a + &b), &vv).unwrap(), 5);
    assert_eq!(sym_infer(&(&a - &b), &vv).unwrap(), -1);
    assert_eq!(sym_infer(&(&a + &b + &c), &vv).unwrap(), 9);
    assert_eq!(sym_infer(&(&a * &b), &vv).unwrap(), 6);
    assert_eq!(sym_infer(&(&a * &b + &c), &vv).unwrap(), 10);
}
