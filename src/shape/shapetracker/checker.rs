//! Test harness: a brute-force index array (each element holds its buffer index, or `None` when
//! it is padding) moved in lockstep with a ShapeTracker, like tinygrad's `CheckingShapeTracker`.

use crate::shape::symbolic::{sints, Node, Sint};
use crate::shape::ShapeTracker;

/// A dense n-d array of buffer indices.
#[derive(Clone, Debug)]
pub(super) struct Arr {
    pub shape: Vec<usize>,
    pub data: Vec<Option<i64>>,
}

fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// The multi-index of flat element `i`.
pub(super) fn unravel(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
    out
}

impl Arr {
    pub fn arange(shape: &[usize]) -> Arr {
        let n: usize = shape.iter().product();
        Arr {
            shape: shape.to_vec(),
            data: (0..n as i64).map(Some).collect(),
        }
    }
    fn get(&self, idx: &[usize]) -> Option<i64> {
        let st = row_major(&self.shape);
        self.data[idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()]
    }
    /// A new array where element `j` is `f(j)` read from this one (`None` = padding).
    fn map(&self, shape: Vec<usize>, f: impl Fn(&[usize]) -> Option<Vec<usize>>) -> Arr {
        let n: usize = shape.iter().product();
        let data = (0..n)
            .map(|i| f(&unravel(&shape, i)).and_then(|old| self.get(&old)))
            .collect();
        Arr { shape, data }
    }
    pub fn reshape(&self, shape: &[usize]) -> Arr {
        assert_eq!(shape.iter().product::<usize>(), self.data.len());
        Arr {
            shape: shape.to_vec(),
            data: self.data.clone(),
        }
    }
    pub fn permute(&self, axis: &[usize]) -> Arr {
        let shape = axis.iter().map(|&a| self.shape[a]).collect();
        self.map(shape, |j| {
            let mut old = vec![0; j.len()];
            for (k, &a) in axis.iter().enumerate() {
                old[a] = j[k];
            }
            Some(old)
        })
    }
    pub fn expand(&self, shape: &[usize]) -> Arr {
        let old_shape = self.shape.clone();
        self.map(shape.to_vec(), |j| {
            Some(
                j.iter()
                    .zip(&old_shape)
                    .map(|(&x, &s)| if s == 1 { 0 } else { x })
                    .collect(),
            )
        })
    }
    pub fn shrink(&self, arg: &[(usize, usize)]) -> Arr {
        let shape = arg.iter().map(|(b, e)| e - b).collect();
        self.map(shape, |j| {
            Some(j.iter().zip(arg).map(|(x, (b, _))| x + b).collect())
        })
    }
    pub fn pad(&self, arg: &[(usize, usize)]) -> Arr {
        let old_shape = self.shape.clone();
        let shape = self
            .shape
            .iter()
            .zip(arg)
            .map(|(s, (b, e))| s + b + e)
            .collect();
        self.map(shape, |j| {
            let mut old = Vec::with_capacity(j.len());
            for ((&x, &(b, _)), &s) in j.iter().zip(arg).zip(&old_shape) {
                if x < b || x >= b + s {
                    return None;
                }
                old.push(x - b);
            }
            Some(old)
        })
    }
    /// numpy's `t[::m]` per dim.
    pub fn stride(&self, mul: &[i64]) -> Arr {
        let old_shape = self.shape.clone();
        let shape = self
            .shape
            .iter()
            .zip(mul)
            .map(|(&s, &m)| s.div_ceil(m.unsigned_abs() as usize))
            .collect();
        self.map(shape, |j| {
            Some(
                j.iter()
                    .zip(mul)
                    .zip(&old_shape)
                    .map(|((&x, &m), &s)| {
                        let am = m.unsigned_abs() as usize;
                        if m > 0 {
                            x * am
                        } else {
                            s - 1 - x * am
                        }
                    })
                    .collect(),
            )
        })
    }
}

fn to_sints(xs: &[usize]) -> Vec<Sint> {
    sints(&xs.iter().map(|&x| x as i64).collect::<Vec<_>>())
}
fn to_pairs(xs: &[(usize, usize)]) -> Vec<(Sint, Sint)> {
    xs.iter()
        .map(|&(b, e)| (Node::Num(b as i64), Node::Num(e as i64)))
        .collect()
}

/// Evaluate `(idx, valid)` with Variables named `idx{i}` set to `vals[i]`.
pub(super) fn eval_pair(idx: &Node, valid: &Node, vals: &[usize]) -> (i64, i64) {
    let look = |name: &str| {
        name.strip_prefix("idx")
            .and_then(|d| d.parse::<usize>().ok())
            .and_then(|d| vals.get(d))
            .map(|&v| v as i64)
    };
    let v = valid
        .evaluate(&look)
        .unwrap_or_else(|e| panic!("valid {valid:?}: {e}"));
    let i = idx
        .evaluate(&look)
        .unwrap_or_else(|e| panic!("idx {idx:?}: {e}"));
    (i, v)
}

/// A ShapeTracker and its brute-force twin.
#[derive(Clone, Debug)]
pub(super) struct Checking {
    pub st: ShapeTracker,
    pub t: Arr,
}

impl Checking {
    pub fn new(shape: &[usize]) -> Checking {
        Checking {
            st: ShapeTracker::from_shape(&to_sints(shape)).unwrap(),
            t: Arr::arange(shape),
        }
    }
    pub fn reshape(&mut self, s: &[usize]) -> &mut Self {
        self.st = self.st.reshape(&to_sints(s)).unwrap();
        self.t = self.t.reshape(s);
        self
    }
    pub fn permute(&mut self, a: &[usize]) -> &mut Self {
        self.st = self.st.permute(a).unwrap();
        self.t = self.t.permute(a);
        self
    }
    pub fn expand(&mut self, s: &[usize]) -> &mut Self {
        self.st = self.st.expand(&to_sints(s)).unwrap();
        self.t = self.t.expand(s);
        self
    }
    pub fn shrink(&mut self, a: &[(usize, usize)]) -> &mut Self {
        self.st = self.st.shrink(&to_pairs(a)).unwrap();
        self.t = self.t.shrink(a);
        self
    }
    pub fn pad(&mut self, a: &[(usize, usize)]) -> &mut Self {
        self.st = self.st.pad(&to_pairs(a)).unwrap();
        self.t = self.t.pad(a);
        self
    }
    pub fn stride(&mut self, m: &[i64]) -> &mut Self {
        self.st = self.st.stride(m).unwrap();
        self.t = self.t.stride(m);
        self
    }
    pub fn flip(&mut self, axes: &[usize]) -> &mut Self {
        let m: Vec<i64> = (0..self.t.shape.len())
            .map(|i| if axes.contains(&i) { -1 } else { 1 })
            .collect();
        self.stride(&m)
    }
    pub fn simplify(&mut self) -> &mut Self {
        self.st = self.st.simplify().unwrap();
        self
    }
    pub fn views(&self) -> usize {
        self.st.views.len()
    }
    pub fn contiguous(&self) -> bool {
        self.st.contiguous()
    }

    /// Every element's index and validity agree with the brute-force array, three ways: the
    /// flat 1-d expression tinygrad's test evaluates, the multi-dim symbolic expression, and the
    /// expression built from concrete integer indices.
    pub fn assert_same(&self) {
        assert_st_matches(&self.st, &self.t);
    }
}

/// The index a ShapeTracker reads for each element: buffer index or -1.
pub(super) fn assert_st_matches(st: &ShapeTracker, t: &Arr) {
    let shape: Vec<Sint> = to_sints(&t.shape);
    assert_eq!(st.shape(), shape.as_slice(), "shape of {st:?}");
    let want: Vec<i64> = t.data.iter().map(|x| x.unwrap_or(-1)).collect();
    let n = want.len();
    let flat = st.reshape(&[Node::Num(n as i64)]).unwrap();
    let (fidx, fvalid) = flat.expr_idxs(None).unwrap();
    let (midx, mvalid) = st.expr_idxs(None).unwrap();
    for (i, &w) in want.iter().enumerate() {
        let (x, v) = eval_pair(&fidx, &fvalid, &[i]);
        let got = if v != 0 { x } else { -1 };
        assert_eq!(
            got,
            w,
            "flat element {i}: idx={} valid={} st={st:?}",
            fidx.render(),
            fvalid.render()
        );
        let j = unravel(&t.shape, i);
        let (x, v) = eval_pair(&midx, &mvalid, &j);
        let got = if v != 0 { x } else { -1 };
        assert_eq!(
            got,
            w,
            "element {j:?}: idx={} valid={} st={st:?}",
            midx.render(),
            mvalid.render()
        );
        let concrete: Vec<Node> = j.iter().map(|&x| Node::Num(x as i64)).collect();
        let (ci, cv) = st.expr_idxs(Some(&concrete)).unwrap();
        let (Some(ci), Some(cv)) = (ci.as_int(), cv.as_int()) else {
            panic!("non-constant {ci:?} {cv:?} at {j:?}")
        };
        let got = if cv != 0 { ci } else { -1 };
        assert_eq!(got, w, "concrete element {j:?} st={st:?}");
    }
    check_real_strides(st, t);
}

/// Where `real_strides` claims a stride for a dim, stepping that dim moves the index by it.
fn check_real_strides(st: &ShapeTracker, t: &Arr) {
    let rs = st.real_strides(false).unwrap();
    let masked: Vec<bool> = (0..t.shape.len())
        .map(|a| st.axis_is_masked(a).unwrap())
        .collect();
    let st_rm = row_major(&t.shape);
    for (d, s) in rs.iter().enumerate() {
        let Some(s) = s else { continue };
        let s = s.as_int().expect("int stride");
        if st.views.len() > 1 || st.views[0].mask.is_some() {
            assert!(!masked[d], "dim {d} has a stride but is masked: {st:?}");
        }
        for i in 0..t.data.len() {
            let j = unravel(&t.shape, i);
            if j[d] + 1 >= t.shape[d] {
                continue;
            }
            if let (Some(a), Some(b)) = (t.data[i], t.data[i + st_rm[d]]) {
                assert_eq!(
                    b - a,
                    s,
                    "real stride of dim {d} at {j:?}: {rs:?} st={st:?}"
                );
            }
        }
    }
}
