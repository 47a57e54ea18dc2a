//! A naive reference for the numeric tests: row-major arrays of f64 with broadcasting,
//! reductions, permutes and matmul, written directly from the definitions (no tensor code).

#![allow(dead_code)]

/// A row-major f64 array.
#[derive(Clone, Debug, PartialEq)]
pub struct R {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// The multi-index of flat position `i`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
    }
    idx
}

/// Deterministic pseudo-random values in `[lo, hi)` (an LCG; only for test inputs).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

impl R {
    pub fn new(shape: &[usize], data: Vec<f64>) -> R {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        R {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn rand(shape: &[usize], seed: u64, lo: f64, hi: f64) -> R {
        let n = shape.iter().product();
        R::new(shape, values(n, seed, lo, hi))
    }

    /// Like [`R::rand`], with every value exactly representable in float32.
    pub fn rand32(shape: &[usize], seed: u64, lo: f64, hi: f64) -> R {
        let r = R::rand(shape, seed, lo, hi);
        R::new(shape, r.data.iter().map(|&v| v as f32 as f64).collect())
    }

    /// Values rounded to float32 (what a float32 tensor holds).
    pub fn f32(&self) -> Vec<f32> {
        self.data.iter().map(|&x| x as f32).collect()
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> R {
        R::new(&self.shape, self.data.iter().map(|&x| f(x)).collect())
    }

    pub fn at(&self, idx: &[usize]) -> f64 {
        let st = strides(&self.shape);
        self.data[idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()]
    }

    /// Numpy broadcasting of two arrays through `f`.
    pub fn zip(&self, o: &R, f: impl Fn(f64, f64) -> f64) -> R {
        let n = self.shape.len().max(o.shape.len());
        let pad = |s: &[usize]| {
            let mut v = vec![1; n - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (a, b) = (pad(&self.shape), pad(&o.shape));
        let out: Vec<usize> = a.iter().zip(&b).map(|(&x, &y)| x.max(y)).collect();
        let total = out.iter().product();
        let pick = |idx: &[usize], s: &[usize]| -> Vec<usize> {
            idx.iter()
                .zip(s)
                .map(|(&i, &d)| if d == 1 { 0 } else { i })
                .collect()
        };
        let (ra, rb) = (R::new(&a, self.data.clone()), R::new(&b, o.data.clone()));
        let data = (0..total)
            .map(|i| {
                let idx = unravel(i, &out);
                f(ra.at(&pick(&idx, &a)), rb.at(&pick(&idx, &b)))
            })
            .collect();
        R::new(&out, data)
    }

    /// Reduce `axes` with `f` from `init`, keeping them as 1s when `keepdim`.
    pub fn reduce(
        &self,
        axes: &[usize],
        keepdim: bool,
        init: f64,
        f: impl Fn(f64, f64) -> f64,
    ) -> R {
        let kshape: Vec<usize> = (self.shape.iter().enumerate())
            .map(|(i, &s)| if axes.contains(&i) { 1 } else { s })
            .collect();
        let mut out = vec![init; kshape.iter().product()];
        let kst = strides(&kshape);
        for (i, &x) in self.data.iter().enumerate() {
            let idx = unravel(i, &self.shape);
            let o: usize = (idx.iter().enumerate())
                .map(|(d, &v)| if axes.contains(&d) { 0 } else { v * kst[d] })
                .sum();
            out[o] = f(out[o], x);
        }
        let shape: Vec<usize> = if keepdim {
            kshape
        } else {
            (self.shape.iter().enumerate())
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &s)| s)
                .collect()
        };
        R::new(&shape, out)
    }

    pub fn sum_axis(&self, axes: &[usize], keepdim: bool) -> R {
        self.reduce(axes, keepdim, 0.0, |a, b| a + b)
    }

    pub fn max_axis(&self, axes: &[usize], keepdim: bool) -> R {
        self.reduce(axes, keepdim, f64::NEG_INFINITY, f64::max)
    }

    pub fn permute(&self, order: &[usize]) -> R {
        let shape: Vec<usize> = order.iter().map(|&o| self.shape[o]).collect();
        let n = self.data.len();
        let data = (0..n)
            .map(|i| {
                let idx = unravel(i, &shape);
                let mut src = vec![0; order.len()];
                for (d, &o) in order.iter().enumerate() {
                    src[o] = idx[d];
                }
                self.at(&src)
            })
            .collect();
        R::new(&shape, data)
    }

    /// 2-D matrix product.
    pub fn matmul(&self, o: &R) -> R {
        let (m, k, n) = (self.shape[0], self.shape[1], o.shape[1]);
        assert_eq!(k, o.shape[0]);
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|l| self.data[i * k + l] * o.data[l * n + j])
                    .sum();
            }
        }
        R::new(&[m, n], out)
    }
}

/// Compare float results: equal nan-ness and infinities, else within `atol + rtol * |want|`.
pub fn assert_close(got: &[f64], want: &[f64], atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

pub fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}
