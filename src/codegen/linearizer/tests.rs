//! The linearizer's index helpers: `get_grouped_dims` (cases of tinygrad's test_grouped_dims)
//! and the upcast expansion (`expand_node`, `expand_idxs`, TestLinearizerHelper).

use super::index::*;
use crate::shape::{create_lt_node, sints, Node};

fn v(name: &str, lo: i64, hi: i64) -> Node {
    Node::var(name, lo, hi).unwrap()
}

fn grouped(dims: &[Node], max: &[i64], reverse: bool, want: &[Node]) {
    let g = get_grouped_dims("gidx", 0, dims, Some(max), reverse).unwrap();
    let sizes = g.sizes.unwrap();
    assert_eq!(sizes, want, "dims {dims:?} max {max:?} reverse {reverse}");
    assert_eq!(g.idxs.len(), dims.len());
    assert_eq!(g.loop_idxs.len(), sizes.len().min(dims.len()));
    for (i, d) in dims.iter().enumerate() {
        assert_eq!(
            &g.idxs[i].max().try_add(&Node::Num(1)).unwrap(),
            d,
            "idx {i}"
        );
    }
    for (i, l) in g.loop_idxs.iter().enumerate() {
        assert!(l.expr().unwrap().starts_with("gidx"));
        assert_eq!(l.max().try_add(&Node::Num(1)).unwrap(), sizes[i]);
    }
}

#[test]
fn grouped_dims_like_tinygrad() {
    let n = |x: &[i64]| sints(x);
    let m = [16, 16, 16];
    grouped(&n(&[2]), &m, false, &n(&[2, 1, 1]));
    grouped(&n(&[2, 3]), &m, false, &n(&[2, 3, 1]));
    grouped(&n(&[2, 3]), &m, true, &n(&[3, 2, 1]));
    grouped(&n(&[2, 3, 4]), &m, false, &n(&[2, 3, 4]));
    // splitting
    grouped(&n(&[64, 3, 4]), &m, false, &n(&[16, 12, 4]));
    grouped(&n(&[64, 3, 4]), &[16, 4, 16], false, &n(&[16, 4, 12]));
    grouped(&n(&[64, 3, 4]), &m, true, &n(&[12, 16, 4]));
    grouped(&n(&[128, 3, 4]), &[16, 4, 256], false, &n(&[16, 4, 24]));
    // collapsing onto the leftmost axis that fits
    grouped(&n(&[2, 3, 4, 5]), &m, false, &n(&[6, 4, 5]));
    grouped(&n(&[2, 3, 4, 5]), &[32, 16, 16], true, &n(&[20, 3, 2]));
    grouped(&n(&[2, 3, 4, 5]), &[4, 16, 16], false, &n(&[2, 12, 5]));
    grouped(&n(&[2, 3, 4, 5]), &m, true, &n(&[5, 12, 2]));
    let sp = v("start_pos", 1, 2);
    let dims = [sp.clone(), Node::Num(3), Node::Num(4), Node::Num(5)];
    grouped(
        &dims,
        &[32, 16, 16],
        true,
        &[Node::Num(20), Node::Num(3), sp.clone()],
    );
    // refused: a symbolic collapse, a dim too large and non-factorable, too many dims, a variable
    // too large
    assert!(get_grouped_dims("gidx", 0, &dims, Some(&m), false).is_err());
    assert!(get_grouped_dims("gidx", 0, &n(&[23]), Some(&m), false).is_err());
    assert!(get_grouped_dims("gidx", 0, &n(&[128, 3, 4]), Some(&[16, 4, 23]), false).is_err());
    assert!(get_grouped_dims("gidx", 0, &n(&[2, 3, 4, 5, 6]), Some(&m), false).is_err());
    let big = [v("start_pos", 0, 16), Node::Num(3), Node::Num(4)];
    assert!(get_grouped_dims("gidx", 0, &big, Some(&m), false).is_err());
    // no axes: nothing
    let none = get_grouped_dims("lidx", 2, &[], Some(&[]), false).unwrap();
    assert!(none.sizes.is_none() && none.idxs.is_empty());
}

#[test]
fn grouped_dims_names_and_indices() {
    // reversed globals: the last dim is axis 0 and named gidx{n-1}
    let g = get_grouped_dims("gidx", 0, &sints(&[2, 3]), Some(&[16, 16, 16]), true).unwrap();
    let names: Vec<&str> = g.loop_idxs.iter().map(|x| x.expr().unwrap()).collect();
    assert_eq!(names, vec!["gidx1", "gidx0"]);
    assert_eq!(g.idxs[0].render(), "gidx0");
    assert_eq!(g.idxs[1].render(), "gidx1");
    // a split dim is rebuilt from both axes
    let g = get_grouped_dims("gidx", 0, &sints(&[64]), Some(&[16, 16, 16]), false).unwrap();
    assert_eq!(g.idxs[0].render(), "((gidx1*16)+gidx0)");
    // merged dims are taken apart with // and %
    let g = get_grouped_dims("lidx", 1, &sints(&[2, 3, 4, 5]), Some(&[16, 16, 16]), false).unwrap();
    let r: Vec<String> = g.idxs.iter().map(|x| x.render()).collect();
    assert_eq!(r, vec!["(lidx1%2)", "(lidx1//2)", "lidx2", "lidx3"]);
}

#[test]
fn expand_node_like_tinygrad() {
    let a = Node::Num(42);
    assert_eq!(expand_node(&a, None).unwrap(), vec![a]);
    let a = v("a", 5, 7);
    assert_eq!(expand_node(&a, None).unwrap(), vec![a.clone()]);
    let u = v("_uidx0", 5, 7);
    assert_eq!(expand_node(&u, None).unwrap(), sints(&[5, 6, 7]));
    let m = u.try_mul(&Node::Num(3)).unwrap();
    assert_eq!(expand_node(&m, None).unwrap(), sints(&[15, 18, 21]));
    let b = v("b", 1, 3);
    let n = b.try_mul(&Node::Num(3)).unwrap();
    assert_eq!(expand_node(&n, None).unwrap(), vec![n.clone()]);
    let u1 = v("_uidx0", 1, 3);
    let b5 = v("b", 5, 7);
    let s1 = u1.try_add(&b5).unwrap();
    let want: Vec<Node> = (1..4)
        .map(|i| Node::sum(vec![Node::Num(i), b5.clone()]).unwrap())
        .collect();
    assert_eq!(expand_node(&s1, None).unwrap(), want);
    // the first variable varies fastest
    let (a, b) = (v("a", 1, 3), v("b", 14, 17));
    let s = a.try_add(&b).unwrap();
    let want: Vec<Node> = (14..18)
        .flat_map(|x| (1..4).map(move |y| Node::Num(x + y)))
        .collect();
    assert_eq!(expand_node(&s, Some(&[a.clone(), b])).unwrap(), want);
    let n = Node::Num(3).try_mul(&v("b", 1, 3)).unwrap();
    assert_eq!(
        expand_node(&n, Some(&[a])).unwrap(),
        vec![n.clone(), n.clone(), n]
    );
}

#[test]
fn expand_idxs_keeps_first_occurrence() {
    let u0 = v("_uidx0", 0, 6);
    let u1 = v("_uidx1", 0, 1);
    let idxs = [
        u0.floordiv(&Node::Num(5)).unwrap(),
        u0.try_mul(&Node::Num(5)).unwrap(),
        u1.clone(),
    ];
    assert_eq!(expand_idxs(&idxs), vec![u0, Node::Num(0), u1]);
    assert_eq!(
        iter_idxs(&[v("_uidx0", 0, 1), v("_uidx1", 0, 2)])
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        iter_idxs(&[v("_uidx0", 0, 1), v("_uidx1", 0, 1)]).unwrap()[1],
        vec![1, 0]
    );
}

/// `node` substituted once per combination of `iter_idxs` (the expansion without sharing).
fn expand_naive(node: &Node, idxs: &[Node]) -> Vec<Node> {
    iter_idxs(idxs)
        .unwrap()
        .into_iter()
        .map(|rep| {
            let map: std::collections::HashMap<Node, Node> = idxs
                .iter()
                .zip(rep)
                .filter(|(k, _)| k.is_var())
                .map(|(k, x)| (k.clone(), Node::Num(x)))
                .collect();
            if map.is_empty() {
                node.clone()
            } else {
                node.substitute(&map).unwrap()
            }
        })
        .collect()
}

#[test]
fn expand_node_shares_substitutions_without_changing_them() {
    // a CPU-tile-like upcast: two unit-stride dims, a row dim and an unroll dim, and a number
    let (n0, n1, m, k) = (
        v("_uidx0", 0, 7),
        v("_uidx1", 0, 1),
        v("_uidx2", 0, 3),
        v("_uidx3", 1, 3),
    );
    let idxs = [n0.clone(), n1.clone(), Node::Num(0), m.clone(), k.clone()];
    let g = v("gidx0", 0, 127);
    let rows = g.try_mul(&Node::Num(4096)).unwrap();
    let a_idx = rows
        .try_add(&m.try_mul(&Node::Num(1024)).unwrap())
        .unwrap()
        .try_add(&k)
        .unwrap();
    let b_idx = n0
        .try_add(&n1.try_mul(&Node::Num(8)).unwrap())
        .unwrap()
        .try_add(&k.try_mul(&Node::Num(1024)).unwrap())
        .unwrap();
    let valid = create_lt_node(&m.try_add(&k).unwrap(), &Node::Num(5)).unwrap();
    for node in [a_idx, b_idx, valid, g, Node::Num(7)] {
        let got = expand_node(&node, Some(&idxs)).unwrap();
        assert_eq!(got.len(), 8 * 2 * 4 * 3, "{node:?}");
        let want = expand_naive(&node, &idxs);
        let (gk, wk): (Vec<String>, Vec<String>) = (
            got.iter().map(|x| x.key().into_owned()).collect(),
            want.iter().map(|x| x.key().into_owned()).collect(),
        );
        assert_eq!(gk, wk, "{node:?}");
    }
}

#[test]
fn render_memo_shares_equal_index_nodes() {
    use crate::codegen::uops::UOp;
    use std::collections::HashMap;
    let r = v("ridx0", 0, 15);
    let ctx: HashMap<String, UOp> = [("ridx0".to_string(), UOp::range_const(0, 16, 1, 0, false))]
        .into_iter()
        .collect();
    let i1 = r
        .try_mul(&Node::Num(8))
        .unwrap()
        .try_add(&Node::Num(3))
        .unwrap();
    let i2 = r
        .try_mul(&Node::Num(8))
        .unwrap()
        .try_add(&Node::Num(5))
        .unwrap();
    let mut memo = RenderMemo::default();
    let (u1, u2) = (
        render_node_memo(&i1, &ctx, &mut memo).unwrap(),
        render_node_memo(&i2, &ctx, &mut memo).unwrap(),
    );
    // the same nodes as without the memo, with the common `ridx0*8` shared
    assert_eq!(u1, render_node(&i1, &ctx).unwrap());
    assert_eq!(u2, render_node(&i2, &ctx).unwrap());
    let mul = |u: &UOp| {
        let m = crate::ops::Op::Binary(crate::ops::BinaryOps::MUL);
        u.src()
            .iter()
            .find(|s| s.alu_op() == Some(m))
            .cloned()
            .unwrap()
    };
    assert!(mul(&u1).ptr_eq(&mul(&u2)), "{u1:?} {u2:?}");
    assert!(render_node_memo(&i1, &ctx, &mut memo).unwrap().ptr_eq(&u1));
}
