//! View cases: tinygrad 0.9.1's test/unit/test_view.py, the canonical-form rules of
//! `View.create`, reshape corner cases (test_shapetracker.py's TestRealIssues views) and the
//! merge rules.

use super::*;
use crate::shape::symbolic::sints;

fn m(pairs: &[(i64, i64)]) -> Mask {
    pairs
        .iter()
        .map(|&(b, e)| (Node::Num(b), Node::Num(e)))
        .collect()
}
fn create(shape: &[i64], strides: &[i64], offset: i64, mask: Option<&[(i64, i64)]>) -> View {
    let mask = mask.map(m);
    View::create(
        &sints(shape),
        Some(&sints(strides)),
        Node::Num(offset),
        mask.as_deref(),
    )
    .unwrap()
}
fn raw(
    shape: &[i64],
    strides: &[i64],
    offset: i64,
    mask: Option<&[(i64, i64)]>,
    contiguous: bool,
) -> View {
    View {
        shape: sints(shape),
        strides: sints(strides),
        offset: Node::Num(offset),
        mask: mask.map(m),
        contiguous,
    }
}

#[test]
fn test_canonicalize_empty_mask() {
    assert!(
        create(&[2, 2, 2], &[4, 2, 1], 0, Some(&[(0, 2), (0, 2), (0, 2)]))
            .mask
            .is_none()
    );
    assert!(
        create(&[4, 3, 2], &[1, 4, 10], 0, Some(&[(0, 4), (0, 3), (0, 2)]))
            .mask
            .is_none()
    );
}

#[test]
fn test_minify_zero_strided_dims() {
    let target = create(&[2, 2], &[30, 2], 7, None);
    let cases: [(&[i64], &[i64]); 8] = [
        (&[2, 1, 2], &[30, 0, 2]),
        (&[1, 2, 2], &[0, 30, 2]),
        (&[2, 2, 1], &[30, 2, 0]),
        (&[2, 1, 1, 2], &[30, 0, 0, 2]),
        (&[1, 1, 2, 2], &[0, 0, 30, 2]),
        (&[2, 2, 1, 1], &[30, 2, 0, 0]),
        (&[1, 2, 2, 1], &[0, 30, 2, 0]),
        (&[1, 2, 1, 2], &[0, 30, 0, 2]),
    ];
    for (shape, strides) in cases {
        assert_eq!(
            create(shape, strides, 7, None).minify().unwrap(),
            target,
            "{shape:?}"
        );
    }
}

#[test]
fn test_empty_mask_contiguous() {
    let v1 = create(&[2, 2, 2], &[4, 2, 1], 0, None);
    let v2 = create(&[2, 2, 2], &[4, 2, 1], 0, Some(&[(0, 2), (0, 2), (0, 2)]));
    assert_eq!(v1.contiguous, v2.contiguous);
    let v1 = create(&[1, 1, 1, 4], &[0, 0, 0, 1], 0, None);
    let v2 = create(
        &[1, 1, 1, 4],
        &[0, 0, 0, 1],
        0,
        Some(&[(0, 1), (0, 1), (0, 1), (0, 4)]),
    );
    assert_eq!(v1.contiguous, v2.contiguous);
    let v = View::create(
        &sints(&[2, 3, 4]),
        None,
        Node::Num(0),
        Some(&m(&[(0, 2), (0, 3), (0, 4)])),
    )
    .unwrap();
    assert!(v.contiguous);
}

#[test]
fn test_create_rules() {
    // rule 1: size-1 dims get stride 0, default strides are row-major
    let v = View::from_shape(&sints(&[3, 1, 4])).unwrap();
    assert_eq!(v.strides, sints(&[4, 0, 1]));
    assert!(v.contiguous);
    assert_eq!(
        strides_for_shape(&sints(&[2, 3, 4])).unwrap(),
        sints(&[12, 4, 1])
    );
    assert_eq!(strides_for_shape(&[]).unwrap(), Vec::<Sint>::new());
    // rule 2: a zero in the shape
    let v = create(&[3, 0, 4], &[5, 6, 7], 9, Some(&[(1, 2), (0, 0), (0, 4)]));
    assert_eq!(v, raw(&[3, 0, 4], &[0, 0, 0], 0, None, true));
    // rule 4: a single valid index folds into the offset
    let v = create(&[4, 5], &[5, 1], 0, Some(&[(2, 3), (0, 5)]));
    assert_eq!(v, raw(&[4, 5], &[0, 1], 10, Some(&[(2, 3), (0, 5)]), false));
    // an empty mask dim masks everything out
    let v = create(&[4, 5], &[5, 1], 3, Some(&[(2, 2), (1, 3)]));
    assert_eq!(v, raw(&[4, 5], &[0, 0], 0, Some(&[(0, 0), (0, 0)]), false));
    // rule 5: contiguity needs offset 0
    assert!(!create(&[4], &[1], 1, None).contiguous);
}

#[test]
fn test_movement_ops_on_views() {
    let v = View::from_shape(&sints(&[4, 5])).unwrap();
    let p = v.pad(&m(&[(1, 0), (0, 2)])).unwrap();
    assert_eq!(p, raw(&[5, 7], &[5, 1], -5, Some(&[(1, 5), (0, 5)]), false));
    let s = p.shrink(&m(&[(1, 5), (0, 5)])).unwrap();
    assert_eq!(s, v);
    let e = View::from_shape(&sints(&[4, 1]))
        .unwrap()
        .expand(&sints(&[4, 3]))
        .unwrap();
    assert_eq!(e, raw(&[4, 3], &[1, 0], 0, None, false));
    let f = v.stride(&[-1, 2]).unwrap();
    assert_eq!(f, raw(&[4, 3], &[-5, 2], 15, None, false));
    let t = v.permute(&[1, 0]).unwrap();
    assert_eq!(t, raw(&[5, 4], &[1, 5], 0, None, false));
    // masks move with the ops
    let pm = p.permute(&[1, 0]).unwrap();
    assert_eq!(pm.mask, Some(m(&[(0, 5), (1, 5)])));
    let pf = p.stride(&[-1, 1]).unwrap();
    assert_eq!(pf.mask, Some(m(&[(0, 4), (0, 5)])));
    let pe = View::from_shape(&sints(&[1, 3]))
        .unwrap()
        .pad(&m(&[(0, 0), (1, 1)]))
        .unwrap()
        .expand(&sints(&[4, 5]))
        .unwrap();
    assert_eq!(pe.mask, Some(m(&[(0, 4), (1, 4)])));
}

#[test]
fn test_view_errors_name_the_op() {
    let v = View::from_shape(&sints(&[2, 3])).unwrap();
    let e = v.reshape(&sints(&[4, 2])).unwrap_err();
    assert_eq!(
        e.message(),
        "reshape: cannot reshape (2, 3) to (4, 2): element counts differ"
    );
    assert_eq!(
        v.permute(&[1]).unwrap_err().message(),
        "permute: invalid permutation [1] of shape (2, 3)"
    );
    assert_eq!(
        v.shrink(&m(&[(0, 3), (0, 3)])).unwrap_err().message(),
        "shrink: invalid shrink ((0, 3), (0, 3)) for shape (2, 3)"
    );
    assert!(v
        .pad(&m(&[(0, 1)]))
        .unwrap_err()
        .message()
        .starts_with("pad: invalid padding"));
    assert_eq!(
        v.expand(&sints(&[4, 3])).unwrap_err().message(),
        "expand: can't expand (2, 3) into (4, 3)"
    );
    assert!(v
        .stride(&[1, 0])
        .unwrap_err()
        .message()
        .starts_with("stride: invalid stride"));
    assert!(View::create(&sints(&[2]), Some(&sints(&[1, 1])), Node::Num(0), None).is_err());
    let zero = View::from_shape(&sints(&[0, 3])).unwrap();
    assert!(zero.reshape(&sints(&[3])).is_err());
    assert_eq!(
        zero.reshape(&sints(&[3, 0])).unwrap().unwrap().shape,
        sints(&[3, 0])
    );
}

#[test]
fn test_reshape_corner_cases() {
    // TestRealIssues (skipped upstream for construction reasons; the reshapes themselves hold)
    let v = create(
        &[256, 256, 2, 2, 2, 2, 2, 256, 8, 2],
        &[0, 8, 0, 4, 0, 0, 2, 16384, 2048, 1],
        0,
        None,
    );
    assert!(v
        .reshape(&sints(&[128, 2, 256, 2, 2, 2, 2, 2, 256, 8, 2]))
        .unwrap()
        .is_some());
    let v = raw(
        &[2, 1920, 32, 32],
        &[1310720, 1024, 32, 1],
        0,
        Some(&[(0, 2), (0, 1280), (0, 32), (0, 32)]),
        false,
    );
    assert!(v.reshape(&sints(&[2, 32, 240, 256])).unwrap().is_none());
    let v = raw(
        &[1, 1, 5],
        &[0, 0, 1],
        -5,
        Some(&[(1, 1), (0, 1), (0, 5)]),
        false,
    );
    let r = v.reshape(&sints(&[5])).unwrap().unwrap();
    assert_eq!(r.mask, Some(m(&[(0, 0)])));
    // same shape is the same view; an empty mask cannot become 0-d
    assert_eq!(v.reshape(&sints(&[1, 1, 5])).unwrap().unwrap(), v);
    let masked_out = create(&[1], &[1], 0, Some(&[(0, 0)]));
    assert!(masked_out.reshape(&[]).unwrap().is_none());
    // splitting a stride-chained dim, and refusing to split across a mask
    let v = create(&[6, 4], &[4, 1], 0, None).permute(&[1, 0]).unwrap();
    assert_eq!(
        v.reshape(&sints(&[2, 2, 6])).unwrap().unwrap().strides,
        sints(&[2, 1, 4])
    );
    assert!(v.reshape(&sints(&[24])).unwrap().is_none());
    let pad = View::from_shape(&sints(&[3]))
        .unwrap()
        .pad(&m(&[(1, 0)]))
        .unwrap();
    assert!(pad.reshape(&sints(&[2, 2])).unwrap().is_none());
    let pad = View::from_shape(&sints(&[4]))
        .unwrap()
        .pad(&m(&[(2, 2)]))
        .unwrap();
    assert_eq!(
        pad.reshape(&sints(&[4, 2])).unwrap(),
        Some(raw(&[4, 2], &[2, 1], -2, Some(&[(1, 3), (0, 2)]), false))
    );
    let p2 = View::from_shape(&sints(&[2]))
        .unwrap()
        .pad(&m(&[(1, 1)]))
        .unwrap();
    assert!(p2.reshape(&sints(&[2, 2])).unwrap().is_none());
}

#[test]
fn test_merge_rules() {
    let c = View::from_shape(&sints(&[4, 3])).unwrap();
    let t = c.permute(&[1, 0]).unwrap();
    // 1: a contiguous vm2 gives vm1
    assert_eq!(c.merge(&t).unwrap(), Some(t.clone()));
    // 2: a contiguous vm1 of the same shape gives vm2
    let tc = View::from_shape(&t.shape).unwrap();
    assert_eq!(t.merge(&tc).unwrap(), Some(t.clone()));
    // 3: a contiguous vm1 of the same size reshapes vm2 (here that fails: a real second view)
    assert_eq!(
        t.merge(&View::from_shape(&sints(&[12])).unwrap()).unwrap(),
        None
    );
    // 4: an empty vm1 mask
    let dead = create(&[2, 2], &[2, 1], 0, Some(&[(0, 0), (0, 2)]));
    assert_eq!(
        t.merge(&dead).unwrap().unwrap().mask,
        Some(m(&[(0, 0), (0, 0)]))
    );
    // 5-8: projection: a flip of a permute is one view
    let f = View::from_shape(&t.shape)
        .unwrap()
        .stride(&[-1, 1])
        .unwrap();
    assert_eq!(
        t.merge(&f).unwrap(),
        Some(raw(&[3, 4], &[-1, 3], 2, None, false))
    );
}

#[test]
fn test_invert_and_minify() {
    let v = View::from_shape(&sints(&[4, 5]))
        .unwrap()
        .permute(&[1, 0])
        .unwrap();
    let inv = v.invert(&sints(&[4, 5])).unwrap().unwrap();
    assert_eq!(inv.shape, sints(&[4, 5]));
    assert_eq!(v.invert(&sints(&[3, 5])).unwrap(), None);
    let big = View::from_shape(&sints(&[2, 3, 4])).unwrap();
    assert_eq!(big.minify().unwrap().shape, sints(&[24]));
    let masked = create(&[2, 3, 4], &[12, 4, 1], 0, Some(&[(0, 2), (1, 3), (0, 4)]));
    assert_eq!(masked.minify().unwrap(), masked);
}

#[test]
fn test_size_and_vars() {
    let i = Node::var("i", 1, 10).unwrap();
    let v = View::from_shape(&[i.clone(), Node::Num(3)]).unwrap();
    assert_eq!(v.size().unwrap(), 30);
    assert_eq!(v.vars(), vec![i.clone()]);
    let bound = i.bind(4).unwrap();
    let v = View::from_shape(&[bound.clone(), Node::Num(3)]).unwrap();
    let (u, vals) = v.unbind().unwrap();
    assert_eq!(u.shape, vec![i.clone(), Node::Num(3)]);
    assert_eq!(vals.get(&i), Some(&4));
    let j = Node::var("j", 0, &i).unwrap();
    assert!(View::from_shape(&[j]).unwrap().size().is_err());
}
