//! Symbolic shapes (tinygrad 0.9.1's test/test_symbolic_shapetracker.py) and composition and
//! inversion (test/unit/test_shapetracker_math.py). Tensor-level cases are written as the
//! ShapeTracker ops those Tensor calls perform.

use super::checker::{eval_pair, unravel};
use super::*;
use crate::shape::symbolic::{sints, Node};

fn var(name: &str, lo: i64, hi: i64) -> Node {
    Node::var(name, lo, hi).unwrap()
}
fn st_of(shape: &[i64]) -> ShapeTracker {
    ShapeTracker::from_shape(&sints(shape)).unwrap()
}
fn p(b: impl Into<Node>, e: impl Into<Node>) -> (Sint, Sint) {
    (b.into(), e.into())
}
fn vv(pairs: &[(&Node, i64)]) -> VarVals {
    pairs.iter().map(|(k, v)| ((*k).clone(), *v)).collect()
}
fn opt(xs: Vec<Option<Sint>>) -> Vec<Sint> {
    xs.into_iter().map(|x| x.expect("stride")).collect()
}

#[test]
fn test_symbolic_st() {
    let x = var("x", 1, 100);
    let st = ShapeTracker::from_shape(&[x.clone(), Node::Num(3)]).unwrap();
    assert_eq!(st.shape(), &[x, Node::Num(3)]);
    assert_eq!(opt(st.real_strides(false).unwrap()), sints(&[3, 1]));
}

#[test]
fn test_expr_idxs() {
    let x = var("x", 1, 100);
    let st = ShapeTracker::from_shape(&[x, Node::Num(3)]).unwrap();
    let idxs = [var("x", 0, 100), var("y", 0, 100)];
    let (e1, e2) = st.expr_idxs(Some(&idxs)).unwrap();
    assert_eq!(
        (e1.render().as_str(), e2.render().as_str()),
        ("((x*3)+y)", "1")
    );
    let (e1, e2) = st.permute(&[1, 0]).unwrap().expr_idxs(Some(&idxs)).unwrap();
    assert_eq!(
        (e1.render().as_str(), e2.render().as_str()),
        ("((y*3)+x)", "1")
    );
}

#[test]
fn test_cat_strides() {
    // Tensor.cat pads each symbolic piece, then adds: the result is a fresh contiguous tracker
    let i = var("i", 1, 5).bind(3).unwrap();
    let j = var("j", 1, 5).bind(3).unwrap();
    let k = var("k", 1, 5).bind(3).unwrap();
    let piece = st_of(&[3, 4]).reshape(&[i.clone(), Node::Num(4)]).unwrap();
    let padded = piece.pad(&[p(0, &j + &k), p(0, 0)]).unwrap();
    assert_eq!(padded.shape(), &[&i + &j + &k, Node::Num(4)]);
    let st = ShapeTracker::from_shape(padded.shape()).unwrap();
    assert_eq!(opt(st.real_strides(false).unwrap()), sints(&[4, 1]));
    let st = ShapeTracker::from_shape(&[Node::Num(3), &i + &j + &k]).unwrap();
    assert_eq!(
        opt(st.real_strides(false).unwrap()),
        vec![&i + &j + &k, Node::Num(1)]
    );
    let st = ShapeTracker::from_shape(&[2 * &i + 3, Node::Num(3)]).unwrap();
    assert_eq!(st.shape()[0].render(), "((i*2)+3)");
    assert_eq!(opt(st.real_strides(false).unwrap()), sints(&[3, 1]));
}

#[test]
fn test_var_vals() {
    assert!(st_of(&[3, 4, 5]).var_vals().unwrap().is_empty());
    let x = var("x", 1, 100).bind(3).unwrap();
    let ux = var("x", 1, 100);
    assert_eq!(
        ShapeTracker::from_shape(&[x.clone(), Node::Num(3)])
            .unwrap()
            .var_vals()
            .unwrap(),
        vv(&[(&ux, 3)])
    );
    let st = st_of(&[4, 3]).shrink(&[p(&x, &x + 1), p(0, 3)]).unwrap();
    assert_eq!(st.views[0].offset, &x * 3);
    assert_eq!(st.var_vals().unwrap(), vv(&[(&ux, 3)]));
    let view = View::create(
        &sints(&[3, 4]),
        Some(&sints(&[4, 1])),
        Node::Num(0),
        Some(&[p(0, &x), p(0, 4)]),
    )
    .unwrap();
    assert_eq!(
        ShapeTracker::new(vec![view]).unwrap().var_vals().unwrap(),
        vv(&[(&ux, 3)])
    );
}

#[test]
fn test_var_vals_complex() {
    let x = var("x", 1, 100).bind(3).unwrap();
    let y = var("y", 1, 100).bind(4).unwrap();
    let z = var("z", 1, 100).bind(5).unwrap();
    let st = ShapeTracker::from_shape(&[x.clone(), Node::Num(5), y.clone()]).unwrap();
    let st = st.shrink(&[p(0, &x), p(&z, &z + 1), p(0, 3)]).unwrap();
    assert_eq!(st.views[0].offset, &y * &z);
    let (ux, uy, uz) = (var("x", 1, 100), var("y", 1, 100), var("z", 1, 100));
    let got = st.var_vals().unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!((got[&ux], got[&uy], got[&uz]), (3, 4, 5));
}

#[test]
fn test_shrink_reshape() {
    let x = var("x", 1, 100).bind(3).unwrap();
    let st = st_of(&[10, 10, 10])
        .shrink(&[p(&x, &x + 3), p(3, 7), p(2, 5)])
        .unwrap();
    let st = st.reshape(&sints(&[3 * 4 * 3])).unwrap();
    assert_eq!(st.var_vals().unwrap(), vv(&[(&var("x", 1, 100), 3)]));
}

#[test]
fn test_unbind() {
    let v = var("v", 1, 100);
    let bv = v.bind(3).unwrap();
    let (uv, vals) = View::from_shape(&[bv.clone(), Node::Num(4)])
        .unwrap()
        .unbind()
        .unwrap();
    assert_eq!(uv, View::from_shape(&[v.clone(), Node::Num(4)]).unwrap());
    assert_eq!(vals, vv(&[(&v, 3)]));
    // Tensor.rand(3, 4).reshape(bv, 4)
    let st = st_of(&[3, 4]).reshape(&[bv, Node::Num(4)]).unwrap();
    let (ust, vals) = st.unbind().unwrap();
    assert_eq!(
        ust,
        ShapeTracker::from_shape(&[v.clone(), Node::Num(4)]).unwrap()
    );
    assert_eq!(vals, vv(&[(&v, 3)]));
    // Tensor.rand(3, 4).shrink(((bv, bv+1), (0, 4)))
    let bv = v.bind(2).unwrap();
    let st = st_of(&[3, 4]).shrink(&[p(&bv, &bv + 1), p(0, 4)]).unwrap();
    let (ust, vals) = st.unbind().unwrap();
    let want = View::create(&sints(&[1, 4]), None, 4 * &v, None).unwrap();
    assert_eq!(ust, ShapeTracker::new(vec![want]).unwrap());
    assert_eq!(vals, vv(&[(&v, 2)]));
}

#[test]
fn test_reshape_into_symbols() {
    for i in 1..6 {
        let vi = var("i", 1, 5).bind(i).unwrap();
        let st = st_of(&[i, 4]).reshape(&[vi.clone(), Node::Num(4)]).unwrap();
        assert_eq!(st.shape(), &[vi.clone(), Node::Num(4)]);
        let st = st_of(&[i, 6])
            .reshape(&[vi.clone(), Node::Num(2), Node::Num(3)])
            .unwrap();
        assert_eq!(st.shape(), &[vi.clone(), Node::Num(2), Node::Num(3)]);
        let back = st_of(&[i, 4])
            .reshape(&[vi.clone(), Node::Num(4)])
            .unwrap()
            .reshape(&sints(&[i, 4]))
            .unwrap();
        assert_eq!(back.shape(), sints(&[i, 4]).as_slice());
        for j in 1..6 {
            let vj = var("j", 1, 5).bind(j).unwrap();
            let st = st_of(&[i, j]).reshape(&[vi.clone(), vj.clone()]).unwrap();
            assert_eq!(st.shape(), &[vi.clone(), vj.clone()]);
            let st = st.reshape(&[vj.clone(), vi.clone()]).unwrap();
            assert_eq!(st.shape(), &[vj.clone(), vi.clone()]);
        }
    }
    // reshape into a non-Variable node is refused
    let vi = var("i", 1, 10).bind(4).unwrap();
    assert!(st_of(&[3, 4]).reshape(&[Node::Num(3), &vi + 1]).is_err());
    // an unbound Variable has no size to check against
    assert!(st_of(&[3, 4])
        .reshape(&[Node::Num(3), var("i", 1, 10)])
        .is_err());
}

#[test]
fn test_symbolic_mask_reshape_is_none() {
    // from gpt2's kv cache: these views must not be reshaped in place
    let sp = var("start_pos", 1, 128).bind(2).unwrap();
    let one_sp = Node::Num(1) + &sp;
    let v = View {
        shape: vec![Node::Num(1), one_sp.clone(), Node::Num(16), Node::Num(64)],
        strides: sints(&[0, 0, 64, 1]),
        offset: Node::Num(1024),
        mask: Some(vec![p(0, 1), p(&sp, &one_sp), p(0, 16), p(0, 64)]),
        contiguous: false,
    };
    let new_shape = vec![
        Node::Num(1),
        Node::Num(1),
        one_sp.clone(),
        Node::Num(16),
        Node::Num(64),
    ];
    assert_eq!(v.reshape(&new_shape).unwrap(), None);
    let sp = var("start_pos", 1, 128);
    let one_sp = Node::Num(1) + &sp;
    let v = View {
        shape: vec![
            Node::Num(2),
            Node::Num(1),
            one_sp.clone(),
            Node::Num(16),
            Node::Num(64),
        ],
        strides: sints(&[0, 0, 1024, 64, 1]),
        offset: Node::Num(131072),
        mask: Some(vec![p(1, 2), p(0, 1), p(0, &one_sp), p(0, 16), p(0, 64)]),
        contiguous: false,
    };
    let new_shape = vec![Node::Num(2), one_sp, Node::Num(16), Node::Num(64)];
    assert_eq!(v.reshape(&new_shape).unwrap(), None);
}

/// `Tensor.ones(*shape)`: a 0-d const reshaped to 1s and expanded.
fn ones(shape: &[i64]) -> ShapeTracker {
    st_of(&[])
        .reshape(&sints(&vec![1; shape.len()]))
        .unwrap()
        .expand(&sints(shape))
        .unwrap()
}

#[test]
fn test_reshape_from_non_contiguous() {
    let vi = var("i", 1, 5).bind(4).unwrap();
    let st = ones(&[3, 4]).reshape(&[Node::Num(3), vi.clone()]).unwrap();
    assert_eq!(st.shape(), &[Node::Num(3), vi.clone()]);
    assert!(!st.contiguous());
    assert_eq!(st.views.len(), 1);
    // different number of dims, and matching size but mismatched dims, are refused
    assert!(ones(&[3, 4, 1])
        .reshape(&[Node::Num(3), vi.clone()])
        .is_err());
    assert!(ones(&[4, 3]).reshape(&[Node::Num(3), vi.clone()]).is_err());
}

#[test]
fn test_reshape_from_padded() {
    let vi = var("i", 1, 5).bind(4).unwrap();
    // Tensor.ones(3, 4).contiguous().expand(2, 3, 4).pad(((1, 1), None, None)).shrink((None, None, (1, 3)))
    let st = st_of(&[3, 4])
        .reshape(&sints(&[1, 3, 4]))
        .unwrap()
        .expand(&sints(&[2, 3, 4]))
        .unwrap();
    let st = st
        .pad(&[p(1, 1), p(0, 0), p(0, 0)])
        .unwrap()
        .shrink(&[p(0, 4), p(0, 3), p(1, 3)])
        .unwrap();
    assert_eq!(st.views.len(), 1);
    let v = &st.views[0];
    assert_eq!(v.shape, sints(&[4, 3, 2]));
    let st2 = st
        .reshape(&[vi.clone(), Node::Num(3), Node::Num(2)])
        .unwrap();
    assert_eq!(st2.views.len(), 1);
    let v2 = &st2.views[0];
    assert_eq!(v2.shape, vec![vi, Node::Num(3), Node::Num(2)]);
    assert_eq!(
        (&v.strides, &v2.strides),
        (&sints(&[0, 4, 1]), &sints(&[0, 4, 1]))
    );
    assert_eq!((&v.offset, &v2.offset), (&Node::Num(1), &Node::Num(1)));
    let mask = vec![p(1, 3), p(0, 3), p(0, 2)];
    assert_eq!(
        (v.mask.as_ref(), v2.mask.as_ref()),
        (Some(&mask), Some(&mask))
    );
    assert!(!v.contiguous && !v2.contiguous);
}

#[test]
fn test_symbolic_expand_shrink() {
    let vi = var("i", 1, 5).bind(3).unwrap();
    let vj = var("j", 1, 5).bind(3).unwrap();
    // Tensor([[1], [2], [3]]).expand((3, vi)), then reshape(3, vi, 1).expand((3, vi, vj))
    let a = st_of(&[3, 1]).expand(&[Node::Num(3), vi.clone()]).unwrap();
    assert_eq!(a.shape(), &[Node::Num(3), vi.clone()]);
    let a = a
        .reshape(&[Node::Num(3), vi.clone(), Node::Num(1)])
        .unwrap()
        .expand(&[Node::Num(3), vi.clone(), vj.clone()])
        .unwrap();
    assert_eq!(a.shape(), &[Node::Num(3), vi.clone(), vj]);
    // Tensor.rand(3, 5).shrink(((0, 2), (vi, vi+1)))
    let ui = var("i", 1, 5);
    let t = st_of(&[3, 5]).shrink(&[p(0, 2), p(&ui, &ui + 1)]).unwrap();
    assert_eq!(t.shape(), sints(&[2, 1]).as_slice());
}

#[test]
fn test_symbolic_pad_expr_idxs_fails() {
    // Tensor.ones(5).reshape(v).pad(((4, 0),)).reshape(9): the index needs `idx % (v+4)`
    let v = var("v", 1, 100).bind(5).unwrap();
    let st = ones(&[5])
        .reshape(&[v])
        .unwrap()
        .pad(&[p(4, 0)])
        .unwrap()
        .reshape(&sints(&[9]))
        .unwrap();
    assert_eq!(st.shape(), sints(&[9]).as_slice());
    assert_eq!(st.views.len(), 2);
    let err = st.expr_idxs(None).unwrap_err();
    assert!(err.message().contains("not supported"), "{err}");
}

#[test]
fn test_symbolic_expr_idxs() {
    let i = var("i", 1, 120);
    let gidx0 = Node::var("gidx0", 0, &i).unwrap();
    let lidx1 = var("lidx1", 0, 7);
    let shape = [&i + 1, Node::Num(8), Node::Num(4)];
    let strides = [Node::Num(1), &i * 4 + 4, &i + 1];
    let st = ShapeTracker::new(vec![View::create(
        &shape,
        Some(&strides),
        Node::Num(0),
        None,
    )
    .unwrap()])
    .unwrap();
    let (idx, _) = st.expr_idxs(Some(&[gidx0, lidx1, Node::Num(1)])).unwrap();
    assert_eq!(idx.render(), "((lidx1*((i*4)+4))+1+gidx0+i)");
}

#[test]
fn test_symbolic_real_size_and_default_idxs() {
    let x = var("x", 1, 10);
    let st = ShapeTracker::from_shape(&[x.clone(), Node::Num(4)]).unwrap();
    let (idx, valid) = st.expr_idxs(None).unwrap();
    assert_eq!(idx.render(), "((idx0*4)+idx1)");
    assert_eq!(idx.key(), "((idx0[0-<(-1+x[1-10])>]*4)+idx1[0-3])");
    assert_eq!(valid, 1);
    assert_eq!(st.real_size().unwrap(), 40);
    assert_eq!(st.size().unwrap(), 40);
}

// test_shapetracker_math.py

/// Every element reads the same buffer index (or both are padding).
fn st_equal(a: &ShapeTracker, b: &ShapeTracker) -> bool {
    if a.shape() != b.shape() {
        return false;
    }
    if a == b {
        return true;
    }
    let shape: Vec<usize> = a
        .shape()
        .iter()
        .map(|s| s.as_int().unwrap() as usize)
        .collect();
    let (ai, av) = a.expr_idxs(None).unwrap();
    let (bi, bv) = b.expr_idxs(None).unwrap();
    (0..shape.iter().product()).all(|i| {
        let j = unravel(&shape, i);
        let (x, xv) = eval_pair(&ai, &av, &j);
        let (y, yv) = eval_pair(&bi, &bv, &j);
        xv == yv && (xv == 0 || x == y)
    })
}

fn raw(shape: &[i64], strides: &[i64], offset: i64, contiguous: bool) -> View {
    View {
        shape: sints(shape),
        strides: sints(strides),
        offset: Node::Num(offset),
        mask: None,
        contiguous,
    }
}

#[test]
fn test_shapetracker_basics() {
    let a = st_of(&[10, 10])
        .pad(&[p(0, 2), p(0, 2)])
        .unwrap()
        .shrink(&[p(0, 10), p(0, 10)])
        .unwrap();
    assert!(a.views.len() == 1 && a.views[0].mask.is_none());
    let a = st_of(&[10, 10])
        .pad(&[p(0, 2), p(0, 2)])
        .unwrap()
        .shrink(&[p(0, 10), p(0, 11)])
        .unwrap();
    assert!(a.views.len() == 1 && a.views[0].mask.is_some());
    let x = st_of(&[2, 5])
        .pad(&[p(2, 0), p(0, 0)])
        .unwrap()
        .reshape(&sints(&[2, 2, 5]))
        .unwrap();
    let x1 = x
        .reshape(&sints(&[4, 5]))
        .unwrap()
        .reshape(&sints(&[2, 2, 5]))
        .unwrap();
    assert_eq!(x, x1.simplify().unwrap());
    let multiv = ShapeTracker::new(vec![
        raw(&[15, 3], &[9, 1], 6, false),
        raw(&[4, 3], &[12, 4], 0, false),
    ])
    .unwrap();
    assert!(st_equal(&multiv, &multiv.simplify().unwrap()));
}

#[test]
fn test_shapetracker_add() {
    let a = st_of(&[10, 10]).reshape(&sints(&[100])).unwrap();
    let b = st_of(&[100]);
    assert_eq!(a.compose(&b).unwrap(), b);
    let a = st_of(&[10, 10]).permute(&[1, 0]).unwrap();
    assert_eq!(a.compose(&a).unwrap(), st_of(&[10, 10]));
    // test_plus_real1
    let backup = st_of(&[15, 9]).shrink(&[p(0, 15), p(6, 9)]).unwrap();
    let ops = |st: ShapeTracker| {
        st.reshape(&sints(&[45]))
            .unwrap()
            .stride(&[4])
            .unwrap()
            .reshape(&sints(&[4, 3]))
            .unwrap()
    };
    let direct = ops(backup.clone());
    let second = ops(ShapeTracker::from_shape(backup.shape()).unwrap());
    assert!(st_equal(&backup.compose(&second).unwrap(), &direct));
    // test_off_by_one
    let st1 = ShapeTracker::new(vec![raw(&[5], &[1], 0, true), raw(&[5], &[1], 0, true)]).unwrap();
    let st2 = ShapeTracker::new(vec![raw(&[4], &[1], 0, true), raw(&[5], &[1], 0, true)]).unwrap();
    assert!(!st_equal(&st1, &st2));
}

#[test]
fn test_shapetracker_add_variable() {
    let j = var("j", 0, 20).bind(10).unwrap();
    let x = st_of(&[10, 10])
        .reshape(&[Node::Num(10), j.clone()])
        .unwrap();
    assert_eq!(x.compose(&x).unwrap(), x);
    let out = x
        .reshape(&[Node::Num(5), Node::Num(2), j])
        .unwrap()
        .compose(&x)
        .unwrap();
    assert_eq!(out, x);
    // test_merge_symbolic_views: both Variables are named i
    let vi = var("i", 1, 10);
    let vm1 = View {
        shape: vec![vi.clone(), vi.clone(), Node::Num(3)],
        strides: sints(&[3, 0, 1]),
        offset: Node::Num(0),
        mask: None,
        contiguous: false,
    };
    let vm2 = View {
        shape: vec![vi.clone(), vi.clone(), Node::Num(3)],
        strides: vec![&vi * 3, Node::Num(3), Node::Num(1)],
        offset: Node::Num(0),
        mask: None,
        contiguous: true,
    };
    let merged = ShapeTracker::new(vec![vm1.clone()])
        .unwrap()
        .compose(&ShapeTracker::new(vec![vm2]).unwrap())
        .unwrap();
    assert_eq!(&merged.views[..], &[vm1][..]);
}

#[test]
fn test_shapetracker_invert() {
    let a = st_of(&[10, 10]);
    let x = a.reshape(&sints(&[5, 20])).unwrap();
    let ap = ShapeTracker::from_shape(x.shape())
        .unwrap()
        .compose(&x.invert(a.shape()).unwrap().unwrap())
        .unwrap();
    assert_eq!(ap, a);
    for (shape, perm) in [(vec![5, 20], vec![1, 0]), (vec![8, 4, 5], vec![1, 2, 0])] {
        let a = st_of(&shape);
        let x = a.permute(&perm).unwrap();
        assert_eq!(
            x.compose(&x.invert(a.shape()).unwrap().unwrap()).unwrap(),
            a
        );
    }
    let a = st_of(&[3, 6, 10]);
    let x = a
        .reshape(&sints(&[3, 3, 2, 10]))
        .unwrap()
        .permute(&[2, 1, 3, 0])
        .unwrap();
    assert_eq!(
        x.compose(&x.invert(a.shape()).unwrap().unwrap()).unwrap(),
        a
    );
}

#[test]
fn test_shapetracker_cant_invert() {
    // expand, shrink and real strides cannot be inverted
    let a = st_of(&[10, 1]);
    assert!(a
        .expand(&sints(&[10, 10]))
        .unwrap()
        .invert(a.shape())
        .unwrap()
        .is_none());
    let a = st_of(&[10, 10]);
    assert!(a
        .shrink(&[p(0, 10), p(2, 8)])
        .unwrap()
        .invert(a.shape())
        .unwrap()
        .is_none());
    assert!(a
        .stride(&[2, 2])
        .unwrap()
        .invert(a.shape())
        .unwrap()
        .is_none());
}

#[test]
fn test_shapetracker_invert_flips() {
    let a = st_of(&[20, 10]);
    let x = a.stride(&[-1, 1]).unwrap();
    assert!(st_equal(
        &x.compose(&x.invert(a.shape()).unwrap().unwrap()).unwrap(),
        &a
    ));
    let x = a.permute(&[1, 0]).unwrap().stride(&[-1, 1]).unwrap();
    assert!(st_equal(
        &x.compose(&x.invert(a.shape()).unwrap().unwrap()).unwrap(),
        &a
    ));
    // test_invert_failure
    let a = st_of(&[2, 5]);
    let x = a
        .pad(&[p(2, 0), p(0, 0)])
        .unwrap()
        .reshape(&sints(&[2, 2, 5]))
        .unwrap()
        .reshape(&sints(&[4, 5]))
        .unwrap();
    assert!(st_equal(
        &x.compose(&x.invert(a.shape()).unwrap().unwrap()).unwrap(),
        &a
    ));
}
