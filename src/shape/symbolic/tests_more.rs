//! Symbolic-by-symbolic cases (TestSymbolicSymbolicOps, TestSymbolicRealWorld of 0.9.1's
//! test_symbolic.py), symbolic bounds, binding, rendering forms and overflow handling.

use super::tests::{check, n, v};
use super::*;

#[test]
fn test_node_divmod_node() {
    let i = v("i", 1, 10);
    let idx0 = Node::var("idx0", 0, &i * 3 - 1).unwrap();
    let i128_ = &i * 128;
    assert_eq!(n(0).floordiv(&i128_).unwrap(), 0);
    assert_eq!(n(0).modulo(&i128_).unwrap(), 0);
    assert_eq!(n(127).floordiv(&i128_).unwrap(), 0);
    assert_eq!(n(127).modulo(&i128_).unwrap(), 127);
    let i128p = &i * 128 + 128;
    assert_eq!(n(128).floordiv(&i128p).unwrap(), 0);
    assert_eq!(n(128).modulo(&i128p).unwrap(), 128);
    assert_eq!(idx0.floordiv(&(&i * 3)).unwrap(), 0);
    assert_eq!(idx0.modulo(&(&i * 3)).unwrap(), idx0);
    assert_eq!(i.floordiv(&i).unwrap(), 1);
    assert_eq!(i.modulo(&i).unwrap(), 0);
    assert_eq!(n(128).floordiv(&n(4)).unwrap(), 32);
    assert_eq!(n(128).modulo(&n(4)).unwrap(), 0);
}

#[test]
fn test_mulnode_divmod_node() {
    let i = v("i", 1, 10);
    let idx0 = v("idx0", 0, 31);
    assert_eq!((&idx0 * &i).modulo(&i).unwrap(), 0);
}

#[test]
fn test_sumnode_divmod_sumnode() {
    let i = v("i", 1, 10);
    assert_eq!((&i + 1).floordiv(&(&i * 128 + 128)).unwrap(), 0);
    assert_eq!((&i + 1).modulo(&(&i * 128 + 128)).unwrap(), &i + 1);
}

#[test]
fn test_sumnode_div_numnode_no_factoring() {
    let gid = v("gid", 0, 1023);
    let lid = v("lid", 0, 3);
    let e = n(-1019) - 4 * &lid - &gid;
    let unfactored = e.fdiv(&n(-16), false).unwrap();
    let factored = e.fdiv(&n(-16), true).unwrap();
    assert_eq!(unfactored.render(), "(((lid*4)+1019+gid)//16)");
    assert_eq!(factored.render(), "(((((3+gid)//4)+2+lid)//4)+63)");
}

#[test]
fn test_mod_node_max() {
    let i = v("i", 1, 128);
    let gidx0 = Node::var("gidx0", 0, &i).unwrap();
    for b in [8, 2] {
        let m = gidx0.modulo(&n(b)).unwrap();
        assert!(
            matches!(m.kind(), NodeKind::Mod(a, bb) if *a == gidx0 && bb == b),
            "{m:?}"
        );
        assert_eq!((m.min(), m.max()), (&n(0), &n(b - 1)));
    }
    let gidx0 = Node::var("gidx0", 0, &i * 8 + 7).unwrap();
    for b in [8, 2] {
        let m = gidx0.modulo(&n(b)).unwrap();
        assert!(
            matches!(m.kind(), NodeKind::Mod(a, bb) if *a == gidx0 && bb == b),
            "{m:?}"
        );
    }
}

#[test]
fn test_node_lt_node() {
    let (a, b, c, d) = (v("a", 1, 5), v("b", 6, 9), v("c", 1, 10), v("d", 5, 10));
    assert_eq!(create_lt_node(&a, &b).unwrap(), 1);
    assert_eq!(create_lt_node(&b, &a).unwrap(), 0);
    assert_eq!(create_lt_node(&d, &a).unwrap(), 0);
    assert_eq!(create_lt_node(&a, &a).unwrap(), 0);
    let a_lt_c = create_lt_node(&a, &c).unwrap();
    assert!(matches!(a_lt_c.kind(), NodeKind::Lt(..)));
    assert_eq!((a_lt_c.min(), a_lt_c.max()), (&n(0), &n(1)));
    assert!(a_lt_c.truthy());
    let a_lt_3 = create_lt_node(&a, &n(3)).unwrap();
    assert!(a_lt_3.truthy() && *a_lt_3.min() == 0 && *a_lt_3.max() == 1);
}

#[test]
fn test_sumnode_mulnode_lt() {
    // tinygrad asserts "not supported" for a Mul with a symbolic coefficient inside the sum
    let (a, b, c) = (v("a", 1, 2), v("b", 1, 2), v("c", 1, 2));
    let x = Node::raw_sum(vec![Node::raw_mul(a, b).unwrap(), c]).unwrap();
    let err = create_lt_node(&x, &n(3)).unwrap_err();
    assert!(err.message().contains("not supported"), "{err}");
}

#[test]
fn test_nested_variable_mod() {
    // idx0 in [0, i]: the mod cannot be proven away, so it stays a Mod node
    let i = v("i", 1, 5);
    let idx0 = Node::var("idx0", 0, &i).unwrap();
    assert_ne!(idx0.modulo(&n(2)).unwrap(), idx0);
}

#[test]
fn test_num_node_mul_node() {
    let a = v("a", 1, 5);
    let b = n(2) * &a;
    assert_eq!(b, &a * 2);
    assert!(matches!(b.kind(), NodeKind::Mul(..)));
    let b = n(1) * &a;
    assert_eq!(b, a);
    assert!(b.is_var());
    let b = n(0) * &a;
    assert_eq!(b, 0);
    assert!(b.is_int());
}

#[test]
fn test_substitute() {
    let a = v("idx0", 1, 3);
    let b = &a + 1;
    let map: HashMap<Node, Node> = [(a.clone(), n(1))].into_iter().collect();
    assert_eq!(b.substitute(&map).unwrap(), n(2));
}

#[test]
fn test_resnet_half() {
    let gidx0 = v("gidx0", 0, 3);
    let gidx1 = v("gidx1", 0, 127);
    let gidx2 = v("gidx2", 0, 7);
    let lidx3 = v("lidx3", 0, 7);
    let lidx4 = v("lidx4", 0, 1);
    let lidx5 = v("lidx5", 0, 15);
    let t1 = (1 + &lidx5).modulo(&n(16)).unwrap() * 49;
    let t2 = (262145 + &lidx5).floordiv(&n(16)).unwrap() * 802816;
    let idx = t1
        + t2
        + &gidx0 * 3211264
        + &gidx1 * 784
        + &gidx2 * 8
        + &lidx4 * 100352
        + (-13151129600i64)
        + &lidx3;
    assert_eq!(
        idx.render(),
        "((((1+lidx5)%16)*49)+(((1+lidx5)//16)*802816)+(gidx0*3211264)+(gidx1*784)+(gidx2*8)+(lidx4*100352)+2207744+lidx3)"
    );
}

#[test]
fn test_symbolic_expr_idxs_render() {
    // from test_symbolic_shapetracker: a Variable whose max is another Variable
    let i = v("i", 1, 120);
    let gidx0 = Node::var("gidx0", 0, &i).unwrap();
    let lidx1 = v("lidx1", 0, 7);
    let idx = &gidx0 + &lidx1 * (&i * 4 + 4) + n(1) * (&i + 1);
    assert_eq!(idx.render(), "((lidx1*((i*4)+4))+1+gidx0+i)");
}

#[test]
fn test_debug_render_and_bind() {
    let a = v("a", 0, 8);
    assert_eq!(a.key(), "a[0-8]");
    let b = a.bind(3).unwrap();
    assert_eq!(b.key(), "a[0-8=3]");
    assert_eq!(b.render(), "a");
    assert_ne!(a, b);
    assert_eq!(b.val(), Some(3));
    let (u, val) = b.unbind().unwrap();
    assert_eq!((u.clone(), val), (a.clone(), Some(3)));
    assert!(a.bind(9).is_err());
    assert!(b.bind(4).is_err());
    assert_eq!(format!("{:?}", &b * 2 + 1), "<((a[0-8=3]*2)+1)>");
    let e = (&b * 2 + 1).unbind().unwrap().0;
    assert_eq!(e, &a * 2 + 1);
    let i = v("i", 1, 10);
    let idx = Node::var("idx0", 0, &i - 1).unwrap();
    assert_eq!(idx.key(), "idx0[0-<(-1+i[1-10])>]");
    assert_eq!(n(5).bind(5).unwrap(), 5);
    assert!(n(5).bind(4).is_err());
}

#[test]
fn test_invalid_variables() {
    assert!(Node::var("a", -1, 3).is_err());
    assert!(Node::var("a", 4, 3).is_err());
}

#[test]
fn test_symbolic_bounds() {
    // shrink((0, a)) in real_size: idx0 in [0, a-1]; (idx0*100 + idx1).max.max == 4999
    let a = v("a", 0, 50);
    let idx0 = Node::var("idx0", 0, &a - 1).unwrap();
    let idx1 = v("idx1", 0, 99);
    let e = &idx0 * 100 + &idx1;
    assert!(!e.max().is_int());
    assert_eq!(e.max().max(), &n(4999));
    assert_eq!(e.min(), &n(0));
}

#[test]
fn test_lt_ops_and_comparisons() {
    let a = v("a", 0, 8);
    assert_eq!(a.lt(&n(9)).unwrap(), 1);
    assert_eq!(a.lt(&n(4)).unwrap().render(), "(a<4)");
    assert_eq!(a.ge(&n(4)).unwrap().render(), "((a*-1)<-3)");
    assert_eq!(a.le(&n(4)).unwrap().render(), "(a<5)");
    assert_eq!(a.gt(&n(4)).unwrap().render(), "((a*-1)<-4)");
    assert_eq!(a.ge(&n(0)).unwrap(), 1);
    assert_eq!(a.gt(&n(8)).unwrap(), 0);
}

#[test]
fn test_and_render_and_substitute() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    let x = Node::ands(vec![b.lt(&n(3)).unwrap(), a.lt(&n(4)).unwrap()]).unwrap();
    assert_eq!(x.render(), "((a<4) and (b<3))");
    assert_eq!((x.min(), x.max()), (&n(0), &n(1)));
    let map: HashMap<Node, Node> = [(a.clone(), n(5))].into_iter().collect();
    assert_eq!(x.substitute(&map).unwrap(), 0);
    let map: HashMap<Node, Node> = [(a.clone(), n(1))].into_iter().collect();
    assert_eq!(x.substitute(&map).unwrap().render(), "(b<3)");
    assert_eq!(
        x.evaluate(&|s| Some(if s == "a" { 1 } else { 2 })).unwrap(),
        1
    );
    assert_eq!(
        x.evaluate(&|s| Some(if s == "a" { 1 } else { 3 })).unwrap(),
        0
    );
}

#[test]
fn test_mul_symbolic_render_order() {
    let (a, b) = (v("a", 1, 8), v("b", 1, 10));
    assert_eq!((&b * &a).render(), "(a*b)");
    assert_eq!((&a * &b).render(), "(a*b)");
    check(Ok(&a * &b), 1, 80, "(a*b)");
}

#[test]
fn test_overflow_is_error() {
    let a = v("a", 0, 8);
    assert!(a.try_mul(&n(i64::MAX)).is_err());
    assert!(n(i64::MAX).try_add(&n(1)).is_err());
    assert!(a.try_add(&n(i64::MAX)).is_err());
    assert!(n(i64::MIN).floordiv(&n(-1)).is_err());
    assert!(a.floordiv(&n(0)).is_err());
    assert!(a.modulo(&n(0)).is_err());
    assert!(a.modulo(&n(-3)).is_err());
}

#[test]
fn test_unsupported_node_division() {
    let (a, b) = (v("a", 0, 8), v("b", 1, 8));
    assert!(a.floordiv(&b).is_err());
    assert!(a.modulo(&b).is_err());
}

#[test]
fn test_kind_view() {
    let a = v("a", 0, 8);
    assert_eq!((&a * 4 + 3).floordiv(&n(2)).unwrap().render(), "((a*2)+1)");
    let e = (&a * 3 + 1).floordiv(&n(2)).unwrap();
    assert_eq!(e.render(), "(((a*3)+1)//2)");
    let NodeKind::Div(inner, 2) = e.kind() else {
        panic!("{e:?}")
    };
    let NodeKind::Sum(terms) = inner.kind() else {
        panic!("{inner:?}")
    };
    assert_eq!(terms.len(), 2);
    assert!(matches!(terms[0].kind(), NodeKind::Mul(x, c) if *x == a && *c == 3));
    assert!(matches!(terms[1].kind(), NodeKind::Num(1)));
    assert!(matches!(a.kind(), NodeKind::Var { name: "a", min: 0, max, val: None } if *max == 8));
}
