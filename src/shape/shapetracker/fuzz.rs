//! Seeded random movement-op sequences checked against the brute-force index array: single
//! trackers, composition (`st1 + st2`, which exercises the view merge) and inversion.

use super::checker::{assert_st_matches, eval_pair, unravel, Arr, Checking};
use super::ShapeTracker;
use crate::shape::symbolic::{sints, Node};

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi_incl: usize) -> usize {
        lo + self.below(hi_incl - lo + 1)
    }
}

#[derive(Clone, Debug)]
enum MOp {
    Reshape(Vec<usize>),
    Permute(Vec<usize>),
    Expand(Vec<usize>),
    Shrink(Vec<(usize, usize)>),
    Pad(Vec<(usize, usize)>),
    Stride(Vec<i64>),
}

impl MOp {
    fn apply(&self, c: &mut Checking) {
        match self {
            MOp::Reshape(s) => c.reshape(s),
            MOp::Permute(a) => c.permute(a),
            MOp::Expand(s) => c.expand(s),
            MOp::Shrink(a) => c.shrink(a),
            MOp::Pad(a) => c.pad(a),
            MOp::Stride(m) => c.stride(m),
        };
    }
}

const MAX_ELEMS: usize = 360;

fn random_reshape(rng: &mut Rng, size: usize) -> Vec<usize> {
    let mut dims = Vec::new();
    let mut rem = size;
    while rem > 1 {
        let divs: Vec<usize> = (2..=rem).filter(|d| rem % d == 0).collect();
        let d = divs[rng.below(divs.len().min(3))];
        dims.push(d);
        rem /= d;
    }
    for _ in 0..rng.below(3) {
        let at = rng.below(dims.len() + 1);
        dims.insert(at, 1);
    }
    for i in (1..dims.len()).rev() {
        dims.swap(i, rng.below(i + 1));
    }
    dims
}

fn random_op(rng: &mut Rng, shape: &[usize], allowed: &[usize]) -> Option<MOp> {
    let size: usize = shape.iter().product();
    let n = shape.len();
    Some(match allowed[rng.below(allowed.len())] {
        0 => MOp::Reshape(random_reshape(rng, size)),
        1 => {
            let mut p: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                p.swap(i, rng.below(i + 1));
            }
            MOp::Permute(p)
        }
        2 => {
            let new: Vec<usize> = shape
                .iter()
                .map(|&s| if s == 1 { rng.range(1, 4) } else { s })
                .collect();
            if new.iter().product::<usize>() > MAX_ELEMS || new == shape {
                return None;
            }
            MOp::Expand(new)
        }
        3 => MOp::Shrink(
            shape
                .iter()
                .map(|&s| {
                    let b = rng.below(s);
                    (b, rng.range(b + 1, s))
                })
                .collect(),
        ),
        4 => {
            let arg: Vec<(usize, usize)> =
                shape.iter().map(|_| (rng.below(3), rng.below(3))).collect();
            let new: usize = shape
                .iter()
                .zip(&arg)
                .map(|(s, (b, e))| s + b + e)
                .product();
            if new > MAX_ELEMS {
                return None;
            }
            MOp::Pad(arg)
        }
        _ => MOp::Stride(
            shape
                .iter()
                .map(|_| [1, 1, 2, -1, -1, -2, 3][rng.below(7)])
                .collect(),
        ),
    })
}

fn random_shape(rng: &mut Rng) -> Vec<usize> {
    (0..rng.range(1, 4)).map(|_| rng.range(1, 5)).collect()
}

/// Apply `count` random ops (of the `allowed` kinds) to `c`, returning them.
fn random_ops(
    rng: &mut Rng,
    c: &mut Checking,
    count: usize,
    allowed: &[usize],
    check_each: bool,
) -> Vec<MOp> {
    let mut ops = Vec::new();
    while ops.len() < count {
        let Some(op) = random_op(rng, &c.t.shape, allowed) else {
            continue;
        };
        op.apply(c);
        if check_each {
            c.assert_same();
        }
        ops.push(op);
    }
    ops
}

const ALL: [usize; 7] = [0, 0, 1, 2, 3, 4, 5];

#[test]
fn fuzz_single_trackers() {
    let mut rng = Rng(0x5eed_0001);
    let mut multi_view = 0;
    for _ in 0..800 {
        let mut c = Checking::new(&random_shape(&mut rng));
        let count = rng.range(1, 6);
        random_ops(&mut rng, &mut c, count, &ALL, true);
        multi_view += (c.views() > 1) as usize;
        let simplified = c.st.simplify().unwrap();
        assert_st_matches(&simplified, &c.t);
    }
    eprintln!("multi_view={multi_view}");
    assert!(
        multi_view > 20,
        "the fuzz should reach multi-view trackers ({multi_view})"
    );
}

#[test]
fn fuzz_compose() {
    let mut rng = Rng(0x5eed_0002);
    let mut merged = 0;
    for _ in 0..500 {
        let mut c1 = Checking::new(&random_shape(&mut rng));
        let n1 = rng.range(0, 4);
        random_ops(&mut rng, &mut c1, n1, &ALL, false);
        let shape2: Vec<usize> = c1.t.shape.clone();
        let mut c2 = Checking::new(&shape2);
        let n2 = rng.range(1, 4);
        let ops2 = random_ops(&mut rng, &mut c2, n2, &ALL, false);
        let composed = c1.st.compose(&c2.st).unwrap();
        let mut expect = c1.clone();
        for op in &ops2 {
            op.apply(&mut expect);
        }
        assert_st_matches(&composed, &expect.t);
        merged += (composed.views.len() < c1.st.views.len() + c2.st.views.len()) as usize;
    }
    eprintln!("merged={merged}");
    assert!(
        merged > 100,
        "views should merge in most compositions ({merged})"
    );
}

/// `a` and `b` read the same buffer index (or both padding) for every element.
fn st_equal(a: &ShapeTracker, b: &ShapeTracker, shape: &[usize]) -> bool {
    let (ai, av) = a.expr_idxs(None).unwrap();
    let (bi, bv) = b.expr_idxs(None).unwrap();
    let n: usize = shape.iter().product();
    (0..n).all(|i| {
        let j = unravel(shape, i);
        let (x, xv) = eval_pair(&ai, &av, &j);
        let (y, yv) = eval_pair(&bi, &bv, &j);
        xv == yv && (xv == 0 || x == y)
    })
}

#[test]
fn fuzz_invert() {
    let mut rng = Rng(0x5eed_0003);
    let mut inverted = 0;
    for _ in 0..500 {
        let base = random_shape(&mut rng);
        let mut c = Checking::new(&base);
        let count = rng.range(1, 4);
        // reshape, permute, flip-only strides, pad
        let ops = random_ops(&mut rng, &mut c, count, &[0, 1, 1, 4, 5], false);
        let flips_only = ops
            .iter()
            .all(|o| !matches!(o, MOp::Stride(m) if m.iter().any(|x| x.abs() != 1)));
        let base_s = sints(&base.iter().map(|&x| x as i64).collect::<Vec<_>>());
        let Some(inv) = c.st.invert(&base_s).unwrap() else {
            assert!(
                !flips_only,
                "permute/flip/pad/reshape chains invert: {ops:?}"
            );
            continue;
        };
        inverted += 1;
        let back = c.st.compose(&inv).unwrap();
        let ident = ShapeTracker::from_shape(&base_s).unwrap();
        assert!(st_equal(&back, &ident, &base), "{ops:?}: {back:?}");
    }
    eprintln!("inverted={inverted}");
    assert!(
        inverted > 100,
        "most of these sequences are invertible ({inverted})"
    );
}

#[test]
fn fuzz_reshape_matches_numpy_semantics() {
    // chains of reshapes of padded/strided views: whatever view count results, indices agree
    let mut rng = Rng(0x5eed_0004);
    for _ in 0..200 {
        let mut c = Checking::new(&random_shape(&mut rng));
        random_ops(&mut rng, &mut c, 2, &[1, 3, 4, 5], false);
        for _ in 0..3 {
            let op = MOp::Reshape(random_reshape(&mut rng, c.t.data.len()));
            op.apply(&mut c);
            c.assert_same();
        }
        let flat = c.st.reshape(&[Node::Num(c.t.data.len() as i64)]).unwrap();
        assert_st_matches(&flat, &Arr::reshape(&c.t, &[c.t.data.len()]));
    }
}
