//! Cases from tinygrad 0.9.1's test/unit/test_shapetracker.py, checked element by element
//! against a brute-force index array, with the view counts the tests pin.

use super::checker::{assert_st_matches, Checking};
use super::*;
use crate::shape::symbolic::{sints, Node};

fn ck(shape: &[usize]) -> Checking {
    Checking::new(shape)
}
fn st_of(shape: &[i64]) -> ShapeTracker {
    ShapeTracker::from_shape(&sints(shape)).unwrap()
}
fn view(shape: &[i64], strides: &[i64], offset: i64, mask: Option<&[(i64, i64)]>) -> View {
    let mask: Option<Vec<(Sint, Sint)>> = mask.map(|m| {
        m.iter()
            .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
            .collect()
    });
    View::create(
        &sints(shape),
        Some(&sints(strides)),
        Node::Num(offset),
        mask.as_deref(),
    )
    .unwrap()
}
fn raw_view(
    shape: &[i64],
    strides: &[i64],
    offset: i64,
    mask: Option<&[(i64, i64)]>,
    contiguous: bool,
) -> View {
    let mask = mask.map(|m| {
        m.iter()
            .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
            .collect()
    });
    View {
        shape: sints(shape),
        strides: sints(strides),
        offset: Node::Num(offset),
        mask,
        contiguous,
    }
}
fn opt_ints(xs: &[Option<Sint>]) -> Vec<Option<i64>> {
    xs.iter()
        .map(|x| x.as_ref().map(|s| s.as_int().unwrap()))
        .collect()
}

// TestRealDoesntSimplify / TestRealStrides / TestRealSimplifies

#[test]
fn test_real_doesnt_simplify_1() {
    let st = ShapeTracker::new(vec![
        view(&[8, 3, 1, 2, 11, 1], &[33, 11, 0, 0, 1, 0], 0, None),
        view(&[8, 6, 11], &[66, 11, 1], 0, None),
    ])
    .unwrap();
    assert_eq!(
        opt_ints(&st.real_strides(false).unwrap()),
        vec![Some(33), None, Some(1)]
    );
    assert_ne!(st.simplify().unwrap().views.len(), 1);
}

#[test]
fn test_real_doesnt_simplify_2() {
    let st = ShapeTracker::new(vec![
        view(&[2, 2, 4, 3, 3], &[72, 9, 18, -3, -1], 8, None),
        view(&[4, 4, 3, 3], &[36, 9, 3, 1], 0, None),
    ])
    .unwrap();
    assert_eq!(
        opt_ints(&st.real_strides(false).unwrap()),
        vec![None, Some(18), Some(-3), Some(-1)]
    );
    assert_ne!(st.simplify().unwrap().views.len(), 1);
}

#[test]
fn test_real_strides_1() {
    let st = ShapeTracker::new(vec![
        view(&[2048], &[1], 0, Some(&[(0, 512)])),
        view(&[16, 32, 4], &[128, 4, 1], 0, None),
    ])
    .unwrap();
    assert_eq!(
        opt_ints(&st.real_strides(false).unwrap()),
        vec![None, Some(4), Some(1)]
    );
    assert_eq!(
        opt_ints(&st.real_strides(true).unwrap()),
        vec![Some(128), Some(4), Some(1)]
    );
    assert!(st.axis_is_masked(0).unwrap());
    assert!(!st.axis_is_masked(1).unwrap() && !st.axis_is_masked(2).unwrap());
    assert_eq!(st.unit_stride_axes(false).unwrap(), vec![2]);
}

fn real_simplifies(st: ShapeTracker) {
    let rs = st.real_strides(false).unwrap();
    let s = st.simplify().unwrap();
    assert_eq!(s.views.len(), 1);
    let strides: Vec<Option<Sint>> = s.views[0].strides.iter().cloned().map(Some).collect();
    assert_eq!(strides, rs);
}

#[test]
fn test_real_simplifies_1() {
    real_simplifies(
        ShapeTracker::new(vec![
            view(&[1, 3, 2, 11, 4, 28], &[0, 308, 0, 28, 0, 1], 0, None),
            view(
                &[1, 3, 2, 11, 26, 1, 1, 3],
                &[0, 2464, 0, 112, 1, 0, 0, 29],
                0,
                None,
            ),
        ])
        .unwrap(),
    );
}

#[test]
fn test_real_simplifies_2() {
    real_simplifies(
        ShapeTracker::new(vec![
            view(&[8, 3, 3, 11, 2, 28], &[924, 308, 0, 28, 0, 1], 0, None),
            view(
                &[8, 1, 6, 10, 28, 3, 2, 1],
                &[5544, 0, 0, 56, 1, 1848, 672, 0],
                0,
                None,
            ),
        ])
        .unwrap(),
    );
}

#[test]
fn test_view_minifies() {
    let v = View::from_shape(&sints(&[10, 10])).unwrap();
    assert_eq!(v.minify().unwrap().shape.len(), 1);
    assert_eq!(v.permute(&[1, 0]).unwrap().minify().unwrap().shape.len(), 2);
    let v = View::from_shape(&sints(&[10, 10, 10, 10])).unwrap();
    assert_eq!(
        v.permute(&[1, 0, 2, 3])
            .unwrap()
            .minify()
            .unwrap()
            .shape
            .len(),
        3
    );
}

// TestIndexExpressions2d: the index expression equals the hand-built one for every base shape,
// offset and index-variable range.

/// The hand-built index expression: (idxs, base shape, offset) -> index.
type IdxFn = dyn Fn(&[Node], [i64; 2], i64) -> Node;

fn index_expr_sts() -> Vec<(ShapeTracker, i64, [i64; 2])> {
    let mut out = Vec::new();
    for base in [[30, 5], [15, 10], [15, 1], [5, 10], [5, 1]] {
        for offset in [0, 1, 15, 28, 10000] {
            let n = base[0] * base[1];
            let st = st_of(&[n + offset])
                .shrink(&[(Node::Num(offset), Node::Num(offset + n))])
                .unwrap();
            out.push((st.reshape(&sints(&base)).unwrap(), offset, base));
        }
    }
    out
}

fn check_index_exprs(sts: Vec<(ShapeTracker, i64, [i64; 2])>, f: &IdxFn) {
    for (st, offset, base) in sts {
        let numel = base[0] * base[1];
        let shape = st.shape().to_vec();
        let dflt: Vec<Node> = shape
            .iter()
            .enumerate()
            .map(|(i, d)| Node::var(&format!("idx{i}"), 0, d - 1).unwrap())
            .collect();
        let want = f(&dflt, base, offset);
        assert_eq!(want, st.expr_idxs(None).unwrap().0, "{st:?}");
        assert!(
            want.min().as_int().unwrap() >= offset && want.max().as_int().unwrap() < offset + numel
        );
        let ranges = |s: i64| {
            vec![
                (0, 0),
                (0, 1.min(s - 1)),
                (0, s - 1),
                (3.min(s - 1), 6.min(s - 1)),
                (s - 1, s - 1),
            ]
        };
        let rs: Vec<Vec<(i64, i64)>> = shape.iter().map(|d| ranges(d.as_int().unwrap())).collect();
        let mut combos: Vec<Vec<(i64, i64)>> = vec![vec![]];
        for r in &rs {
            combos = combos
                .into_iter()
                .flat_map(|c| r.iter().map(move |x| [c.clone(), vec![*x]].concat()))
                .collect();
        }
        for c in combos {
            let idxs: Vec<Node> = c
                .iter()
                .enumerate()
                .map(|(i, (lo, hi))| Node::var(&format!("idx{i}"), *lo, *hi).unwrap())
                .collect();
            let want = f(&idxs, base, offset);
            assert_eq!(
                want,
                st.expr_idxs(Some(&idxs)).unwrap().0,
                "{st:?} at {c:?}"
            );
            assert!(
                want.min().as_int().unwrap() >= offset
                    && want.max().as_int().unwrap() < offset + numel
            );
        }
    }
}

#[test]
fn test_index_expressions_noop() {
    check_index_exprs(index_expr_sts(), &|i, b, o| &i[0] * b[1] + &i[1] + o);
}

#[test]
fn test_index_expressions_permute() {
    let sts = index_expr_sts()
        .into_iter()
        .map(|(st, o, b)| (st.permute(&[1, 0]).unwrap(), o, b))
        .collect();
    check_index_exprs(sts, &|i, b, o| &i[0] + &i[1] * b[1] + o);
}

#[test]
fn test_index_expressions_reshape() {
    let sts = index_expr_sts()
        .into_iter()
        .map(|(st, o, b)| (st.reshape(&sints(&[b[0], 1, b[1]])).unwrap(), o, b))
        .collect();
    check_index_exprs(sts, &|i, b, o| &i[0] * b[1] + &i[2] + o);
}

#[test]
fn test_index_expressions_reshape_expand() {
    let sts = index_expr_sts()
        .into_iter()
        .map(|(st, o, b)| {
            (
                st.reshape(&sints(&[b[0], 1, b[1]]))
                    .unwrap()
                    .expand(&sints(&[b[0], b[1], b[1]]))
                    .unwrap(),
                o,
                b,
            )
        })
        .collect();
    check_index_exprs(sts, &|i, b, o| &i[0] * b[1] + &i[2] + o);
}

fn permute_reshape_expr(i: &[Node], b: [i64; 2], o: i64, d: usize) -> Node {
    let t = &i[d] * (b[1] * 5) + &i[2];
    t.modulo(&Node::Num(b[0])).unwrap() * b[1] + t.floordiv(&Node::Num(b[0])).unwrap() + o
}

#[test]
fn test_index_expressions_permute_reshape_1() {
    let sts = index_expr_sts()
        .into_iter()
        .map(|(st, o, b)| {
            (
                st.permute(&[1, 0])
                    .unwrap()
                    .reshape(&sints(&[b[0] / 5, 1, b[1] * 5]))
                    .unwrap(),
                o,
                b,
            )
        })
        .collect();
    check_index_exprs(sts, &|i, b, o| permute_reshape_expr(i, b, o, 0));
}

#[test]
fn test_index_expressions_permute_reshape_2() {
    let sts = index_expr_sts()
        .into_iter()
        .map(|(st, o, b)| {
            (
                st.permute(&[1, 0])
                    .unwrap()
                    .reshape(&sints(&[1, b[0] / 5, b[1] * 5]))
                    .unwrap(),
                o,
                b,
            )
        })
        .collect();
    check_index_exprs(sts, &|i, b, o| permute_reshape_expr(i, b, o, 1));
}

// reshapes with masks that stay one view

#[test]
fn test_reshaping_splitting() {
    let mut s = ck(&[5, 10, 5, 10]);
    s.permute(&[1, 0, 3, 2])
        .pad(&[(0, 0), (0, 5), (0, 0), (0, 5)])
        .reshape(&[10, 2, 5, 10, 2, 5]);
    assert_eq!(s.views(), 1);
    s.assert_same();
}

#[test]
fn test_reshape_splitting_combining_cases() {
    type Case = (Vec<usize>, Vec<(usize, usize)>, Vec<usize>);
    let cases: Vec<Case> = vec![
        (
            vec![1, 10, 1],
            vec![(0, 4), (0, 0), (1, 0)],
            vec![5, 5, 2, 2],
        ),
        (vec![2, 1, 10], vec![(2, 6), (0, 0), (0, 0)], vec![100]),
        (vec![1, 1, 5], vec![(3, 6), (0, 0), (0, 5)], vec![100]),
        (vec![1, 1, 4], vec![(3, 6), (0, 0), (1, 5)], vec![100]),
        (
            vec![1, 1, 5, 5, 1, 1, 5],
            vec![(3, 6), (0, 0), (0, 5), (0, 0), (3, 6), (0, 0), (0, 5)],
            vec![100, 5, 100],
        ),
        (vec![1, 5, 5], vec![(0, 4), (0, 5), (0, 0)], vec![10, 25]),
        (vec![4], vec![(2, 2)], vec![4, 2]),
    ];
    for (shape, pad, new_shape) in cases {
        let mut s = ck(&shape);
        s.pad(&pad).reshape(&new_shape);
        assert_eq!(
            s.views(),
            1,
            "{shape:?} pad {pad:?} -> {new_shape:?}: {:?}",
            s.st
        );
        s.assert_same();
    }
}

#[test]
fn test_reshape_combining_3_mask() {
    let mut s = ck(&[1, 1, 4]);
    s.pad(&[(3, 6), (0, 0), (1, 5)]).reshape(&[100]);
    assert_eq!(
        s.st.views[0].mask.as_ref().unwrap()[0],
        (Node::Num(31), Node::Num(35))
    );
}

#[test]
fn test_reshape_only_1s() {
    let mut s = ck(&[1, 1, 1, 4, 1, 3, 5, 1]);
    s.pad(&[
        (0, 4),
        (0, 0),
        (0, 0),
        (1, 1),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
    ])
    .reshape(&[5, 6, 3, 5]);
    assert_eq!(s.views(), 1);
    s.assert_same();
    s.reshape(&[1, 1, 5, 6, 3, 5, 1, 1]);
    assert_eq!(s.views(), 1);
    s.assert_same();
    s.reshape(&[1, 5, 6, 1, 3, 1, 5, 1]);
    assert_eq!(s.views(), 1);
    s.assert_same();
}

#[test]
fn test_zero_mask() {
    for (pad0, sh0) in [((0, 0), (0, 1)), ((0, 2), (2, 3))] {
        let mut s = ck(&[1, 3, 2]);
        s.pad(&[pad0, (0, 3), (0, 0)])
            .shrink(&[sh0, (3, 6), (0, 2)])
            .reshape(&[3, 2]);
        assert_eq!(s.views(), 1);
        s.assert_same();
        s.reshape(&[1, 3, 1, 2, 1]);
        assert_eq!(s.views(), 1);
        s.assert_same();
    }
}

#[test]
fn test_expanded_reshaped() {
    let mut s = ck(&[1, 3, 2, 1]);
    s.expand(&[5, 3, 2, 2])
        .pad(&[(0, 0), (0, 3), (0, 0), (0, 0)])
        .reshape(&[5, 2, 3, 2, 2]);
    assert_eq!(s.views(), 1);
    s.assert_same();
}

#[test]
fn test_splitting_big() {
    let mut s = ck(&[1, 5, 1, 15, 1]);
    s.pad(&[(0, 0), (0, 5), (0, 0), (0, 15), (0, 0)])
        .reshape(&[10, 1, 30])
        .permute(&[2, 1, 0])
        .reshape(&[2, 3, 5, 2, 5]);
    assert_eq!(s.views(), 1);
    let v = &s.st.views[0];
    assert_eq!(v.strides, sints(&[0, 5, 1, 0, 15]));
    let want: Vec<(Sint, Sint)> = [(0, 1), (0, 3), (0, 5), (0, 1), (0, 5)]
        .iter()
        .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
        .collect();
    assert_eq!(v.mask.as_ref().unwrap(), &want);
    s.assert_same();
}

#[test]
fn test_combining_big() {
    let mut s = ck(&[1, 3, 1, 5, 3, 1]);
    s.pad(&[(0, 0), (2, 2), (0, 0), (0, 0), (0, 0), (0, 0)])
        .reshape(&[1, 1, 1, 105, 1, 1]);
    assert_eq!(s.views(), 1);
    let v = &s.st.views[0];
    assert_eq!(v.strides, sints(&[0, 0, 0, 1, 0, 0]));
    let want: Vec<(Sint, Sint)> = [(0, 1), (0, 1), (0, 1), (30, 75), (0, 1), (0, 1)]
        .iter()
        .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
        .collect();
    assert_eq!(v.mask.as_ref().unwrap(), &want);
    assert_eq!(v.offset, -30);
    s.assert_same();
}

// TestSimplifyingShapeTracker

#[test]
fn test_expand_contract() {
    for (last, views_after) in [(vec![10, 10], 1), (vec![2, 5, 2, 5], 1), (vec![5, 20], 2)] {
        let mut s = ck(&[1, 10]);
        s.expand(&[10, 10]).reshape(&[100]);
        assert_eq!(s.views(), 2);
        s.reshape(&last).simplify();
        assert_eq!(s.views(), views_after, "{last:?}");
        s.assert_same();
    }
}

// TestComplexShapeTracker

#[test]
fn test_complex_contiguity() {
    let mut s = ck(&[4, 4]);
    s.permute(&[1, 0]).reshape(&[1, 4, 1, 4, 1]);
    assert!(!s.contiguous());
    s.permute(&[0, 3, 2, 1, 4]);
    assert!(s.contiguous());
    s.assert_same();

    let mut s = ck(&[1, 16, 9, 9]);
    s.permute(&[1, 0, 2, 3]);
    assert!(s.contiguous());
    let mut s = ck(&[2, 16, 9, 9]);
    s.permute(&[1, 0, 2, 3]);
    assert!(!s.contiguous());

    let mut s = ck(&[1, 16, 1, 1]);
    s.reshape(&[16]);
    assert!(s.contiguous());

    let mut s = ck(&[1, 4, 1, 4, 1]);
    s.permute(&[0, 3, 2, 1, 4]).reshape(&[4, 4]);
    assert!(!s.contiguous());
    s.permute(&[1, 0]);
    assert!(s.contiguous());
}

#[test]
fn test_complex_factorize() {
    let mut s = ck(&[4, 4]);
    s.permute(&[1, 0]).reshape(&[2, 2, 2, 2]);
    assert_eq!(s.views(), 1);
    s.assert_same();
    s.permute(&[2, 3, 0, 1]);
    assert!(s.contiguous());

    let mut s = ck(&[4, 4, 4]);
    s.permute(&[2, 0, 1]).reshape(&[4, 16]).permute(&[1, 0]);
    assert!(s.contiguous());

    let mut s = ck(&[4, 4, 4]);
    s.permute(&[2, 0, 1])
        .reshape(&[4, 16, 1, 1])
        .permute(&[1, 0, 2, 3]);
    assert!(s.contiguous());

    let mut s = ck(&[32, 3, 3, 1]);
    s.reshape(&[8, 4, 3, 3]);
    assert_eq!(s.views(), 1);
    s.assert_same();

    let mut s = ck(&[4, 4, 4]);
    s.permute(&[2, 0, 1]).reshape(&[16, 4]);
    assert_ne!(s.views(), 1);
    s.assert_same();
}

#[test]
fn test_complex_work() {
    let mut s = ck(&[64, 1024, 4]);
    s.reshape(&[1, 64, 128, 32])
        .permute(&[0, 3, 1, 2])
        .reshape(&[1, 32, 1, 64, 128])
        .permute(&[0, 3, 4, 1, 2]);
    assert!(s.contiguous());
    let mut s = ck(&[64, 1024, 4]);
    s.reshape(&[1, 64, 128, 32])
        .permute(&[0, 3, 1, 2])
        .reshape(&[1, 1, 32, 64, 128])
        .permute(&[0, 3, 4, 1, 2])
        .reshape(&[64, 1024, 4]);
    assert!(s.contiguous());
}

// TestShapeTrackerSize, TestIdxs, TestConsecutive (on the equivalent trackers)

#[test]
fn test_real_size() {
    assert_eq!(st_of(&[100, 100]).real_size().unwrap(), 10000);
    let e = st_of(&[100, 100])
        .reshape(&sints(&[100, 100, 1]))
        .unwrap()
        .expand(&sints(&[100, 100, 100]))
        .unwrap();
    assert_eq!(e.real_size().unwrap(), 10000);
    assert_eq!(
        e.reshape(&sints(&[1000000])).unwrap().real_size().unwrap(),
        10000
    );
    let s = |a: (i64, i64), b: (i64, i64)| {
        st_of(&[100, 100])
            .shrink(&[
                (Node::Num(a.0), Node::Num(a.1)),
                (Node::Num(b.0), Node::Num(b.1)),
            ])
            .unwrap()
            .real_size()
            .unwrap()
    };
    assert_eq!(s((0, 50), (0, 100)), 5000);
    assert_eq!(s((0, 100), (0, 50)), 9950);
    let a = Node::var("a", 0, 50).unwrap();
    let st = st_of(&[100, 100])
        .shrink(&[(Node::Num(0), a), (Node::Num(0), Node::Num(100))])
        .unwrap();
    assert_eq!(st.real_size().unwrap(), 5000);
    assert_eq!(st_of(&[0, 4]).real_size().unwrap(), 0);
    let dead = st_of(&[4])
        .pad(&[(Node::Num(2), Node::Num(0))])
        .unwrap()
        .shrink(&[(Node::Num(0), Node::Num(2))])
        .unwrap();
    assert_eq!(dead.real_size().unwrap(), 0);
}

#[test]
fn test_check_idx_range() {
    let st = ShapeTracker::new(vec![raw_view(
        &[4096, 1024, 599, 1],
        &[613376, 599, 1, 0],
        0,
        None,
        true,
    )])
    .unwrap();
    let err = st.expr_idxs(None).unwrap_err();
    assert!(err.message().contains("idx.max too big"), "{err}");
}

#[test]
fn test_consecutive() {
    let t = st_of(&[2, 4]);
    assert!(t.consecutive());
    assert!(t.reshape(&sints(&[4, 2])).unwrap().consecutive());
    assert!(t.reshape(&sints(&[1, 8])).unwrap().consecutive());
    let sh = |st: &ShapeTracker, a: &[(i64, i64)]| {
        st.shrink(
            &a.iter()
                .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    // t[0], t[0, 1:2], t[1]
    assert!(sh(&t, &[(0, 1), (0, 4)])
        .reshape(&sints(&[4]))
        .unwrap()
        .consecutive());
    assert!(sh(&t, &[(0, 1), (1, 2)])
        .reshape(&sints(&[1]))
        .unwrap()
        .consecutive());
    assert!(sh(&t, &[(1, 2), (0, 4)])
        .reshape(&sints(&[4]))
        .unwrap()
        .consecutive());
    // t[:, 0], t[:, 1]
    assert!(!sh(&t, &[(0, 2), (0, 1)])
        .reshape(&sints(&[2]))
        .unwrap()
        .consecutive());
    assert!(!sh(&t, &[(0, 2), (1, 2)])
        .reshape(&sints(&[2]))
        .unwrap()
        .consecutive());
    let p = |a: &[(i64, i64)]| {
        t.pad(
            &a.iter()
                .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    assert!(!p(&[(1, 1), (0, 0)]).consecutive());
    assert!(!p(&[(0, 0), (1, 1)]).consecutive());
    // Tensor(2): a 0-d const; Tensor.ones(2, 4): a 0-d const reshaped and expanded
    let c = st_of(&[]);
    assert!(c.consecutive());
    let ones = c
        .reshape(&sints(&[1, 1]))
        .unwrap()
        .expand(&sints(&[2, 4]))
        .unwrap();
    assert!(!ones.consecutive());
    assert!(!sh(&ones, &[(0, 1), (0, 4)])
        .reshape(&sints(&[4]))
        .unwrap()
        .consecutive());
    assert!(sh(&ones, &[(0, 1), (0, 1)])
        .reshape(&sints(&[]))
        .unwrap()
        .consecutive());
}

#[test]
fn test_merge_view_env() {
    let _g = crate::helpers::Context::new(&[("MERGE_VIEW", 0)]);
    let st = st_of(&[4, 4]).reshape(&sints(&[16])).unwrap();
    assert_eq!(st.views.len(), 2);
    assert!(st_of(&[4, 4]).reshape(&sints(&[15])).is_err());
    drop(_g);
    assert_eq!(
        st_of(&[4, 4]).reshape(&sints(&[16])).unwrap().views.len(),
        1
    );
}

#[test]
fn test_movement_errors() {
    let st = st_of(&[2, 3]);
    let e = st.reshape(&sints(&[4, 2])).unwrap_err();
    assert_eq!(
        e.message(),
        "reshape: cannot reshape (2, 3) to (4, 2): element counts differ"
    );
    assert!(st
        .permute(&[0, 0])
        .unwrap_err()
        .message()
        .contains("permute"));
    assert!(st
        .expand(&sints(&[4, 3]))
        .unwrap_err()
        .message()
        .contains("expand"));
    assert!(st.expand(&sints(&[2])).is_err());
    assert!(st
        .shrink(&[(Node::Num(0), Node::Num(3)), (Node::Num(0), Node::Num(3))])
        .unwrap_err()
        .message()
        .contains("shrink"));
    assert!(st
        .pad(&[(Node::Num(-1), Node::Num(0)), (Node::Num(0), Node::Num(0))])
        .unwrap_err()
        .message()
        .contains("pad"));
    assert!(st.stride(&[0, 1]).unwrap_err().message().contains("stride"));
    assert!(st.stride(&[1]).is_err());
    assert!(st.reshape(&sints(&[-6])).is_err());
    assert!(st.expr_idxs(Some(&[Node::Num(0)])).is_err());
}

#[test]
fn test_brute_force_checker_sanity() {
    // the harness itself: a wrong tracker is caught
    let s = ck(&[3, 4]);
    let wrong =
        s.st.permute(&[1, 0])
            .unwrap()
            .reshape(&sints(&[3, 4]))
            .unwrap();
    let r = std::panic::catch_unwind(|| assert_st_matches(&wrong, &s.t));
    assert!(r.is_err());
}

#[test]
fn test_expr_node() {
    // a flat index through a permuted tracker: element (r, c) of the (3, 4) view of a (4, 3) buffer
    let st = st_of(&[4, 3]).permute(&[1, 0]).unwrap();
    let idx = Node::var("idx", 0, 11).unwrap();
    let (e, valid) = st.expr_node(&idx).unwrap();
    assert_eq!(e.render(), "(((idx%4)*3)+(idx//4))");
    assert_eq!(valid, 1);
    for i in 0..12 {
        let (c, _) = st.expr_node(&Node::Num(i)).unwrap();
        assert_eq!(c, (i % 4) * 3 + i / 4);
    }
}
