//! The LLVM device computes what INTERP computes, bit for bit, on two graphs that once differed
//! (tinygrad's fast-math flags and `default<O3>` let LLVM regroup equal expressions differently
//! in two kernels): a conv/batchnorm-shaped product under max-pool, whose backward must find the
//! forward's maxima again, and sinh/cosh gradients where exp overflows (NaN on every device).
//! Also the float MAX of a max reduction over every pair of edge values (NaN, signed zeros,
//! infinities, denormals), whose select sequence the LLVM renderer arranges for a short
//! accumulator chain: the interpreter's bits on every device, the default one included (an
//! emulated GPU under `AMD=1 MOCKGPU=1` / `NV=1 MOCKGPU=1`).
//! The first also pins CLANG: the C renderer once dropped the parentheses of `a*(b*c)`, which C
//! then computed as `(a*b)*c`. Each case runs on INTERP, CLANG and LLVM (LLVM skipped, and said
//! so, without libLLVM).

mod tensor_common;

use rawgrad::Tensor;
use tensor_common::{cpu_devices, on};

/// (values, gradient) of one loss.
type Run = (Vec<f32>, Vec<f32>);

/// Deterministic values in (-1, 1) that are not simple fractions.
fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 + seed) * 0.7547).sin() * 0.9)
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `w.grad` of `(h.max_pool2d(2x2) * g).sum()` with
/// `h = x * w.reshape(1,-1,1,1) * (x*x).sum((0,2,3), keepdim=True)`.
fn maxpool_product_grad(dev: &str) -> Run {
    let _g = on(dev);
    let (n, c, hw) = (2usize, 4usize, 6usize);
    let x = Tensor::from_vec(values(n * c * hw * hw, 0.3), &[n, c, hw, hw]).unwrap();
    let w = Tensor::from_vec(values(c, 7.1), &[c])
        .unwrap()
        .requires_grad_(true);
    let g = Tensor::from_vec(values(n * c * 9, 2.9), &[n, c, 3, 3]).unwrap();
    let s = x
        .mul(&x)
        .unwrap()
        .sum_axis(vec![0isize, 2, 3], true)
        .unwrap();
    let h = x
        .mul(w.reshape(&[1, -1, 1, 1]).unwrap())
        .unwrap()
        .mul(&s)
        .unwrap();
    let loss = h.max_pool2d().unwrap().mul(&g).unwrap().sum().unwrap();
    loss.backward().unwrap();
    let grad = w.grad().expect("w has a gradient").to_vec::<f32>().unwrap();
    (loss.to_vec::<f32>().unwrap(), grad)
}

#[test]
fn max_pool_backward_finds_the_forward_maxima_on_every_device() {
    let runs: Vec<(&str, Run)> = cpu_devices()
        .into_iter()
        .map(|d| (d, maxpool_product_grad(d)))
        .collect();
    let (_, (loss0, grad0)) = &runs[0];
    assert!(
        grad0.iter().all(|v| v.is_finite() && *v != 0.0),
        "{grad0:?}"
    );
    for (d, (loss, grad)) in &runs[1..] {
        assert_eq!(
            bits(grad),
            bits(grad0),
            "{d} w.grad {grad:?} vs INTERP {grad0:?}"
        );
        assert_eq!(
            bits(loss),
            bits(loss0),
            "{d} loss {loss:?} vs INTERP {loss0:?}"
        );
    }
}

type F = fn(&Tensor) -> Tensor;

fn sum(t: Tensor) -> Tensor {
    t.sum().unwrap()
}

/// Losses over sinh and cosh whose gradients at +-300 meet `inf * 0` or `inf - inf` (exp(300)
/// overflows float32). With fast-math, LLVM folded some of those NaN into +-inf.
const LOSSES: [(&str, F); 5] = [
    ("sum(sinh(x)^2)", |x| {
        sum(x.sinh().unwrap().square().unwrap())
    }),
    ("sum(sinh(x)*cosh(x))", |x| {
        sum(x.sinh().unwrap().mul(x.cosh().unwrap()).unwrap())
    }),
    ("sum(sinh(x)+cosh(x))", |x| {
        sum(x.sinh().unwrap().add(x.cosh().unwrap()).unwrap())
    }),
    ("sum(cosh(x)-sinh(x))", |x| {
        sum(x.cosh().unwrap().sub(x.sinh().unwrap()).unwrap())
    }),
    ("sum(sinh(x))", |x| sum(x.sinh().unwrap())),
];

/// (loss, d loss / dx) at x = [-300, 300, 0.5, -2] for each of [`LOSSES`].
fn sinh_cosh_grads(dev: &str) -> Vec<Run> {
    let _g = on(dev);
    let mut out = vec![];
    for (_, f) in LOSSES {
        let x = Tensor::from_vec(vec![-300.0f32, 300.0, 0.5, -2.0], &[4])
            .unwrap()
            .requires_grad_(true);
        let y = f(&x);
        y.backward().unwrap();
        let grad = x.grad().unwrap().to_vec::<f32>().unwrap();
        out.push((y.to_vec::<f32>().unwrap(), grad));
    }
    out
}

/// NaN payloads aside, the bits.
fn canon(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
        .collect()
}

#[test]
fn sinh_cosh_gradients_at_300_are_nan_as_on_interp() {
    let runs: Vec<(&str, Vec<Run>)> = cpu_devices()
        .into_iter()
        .map(|d| (d, sinh_cosh_grads(d)))
        .collect();
    for (d, cases) in &runs {
        // d/dx sinh(x)^2 = 2 sinh cosh and d/dx sinh*cosh = cosh^2 + sinh^2 meet inf*0 at +-300
        for (name, (_, grad)) in LOSSES.iter().map(|l| l.0).zip(cases).take(2) {
            assert!(
                grad[0].is_nan() && grad[1].is_nan(),
                "{d} d/dx {name} = {grad:?}"
            );
            assert!(
                grad[2].is_finite() && grad[3].is_finite(),
                "{d} d/dx {name} = {grad:?}"
            );
        }
    }
    let (_, reference) = &runs[0];
    for (d, cases) in &runs[1..] {
        for ((name, _), (c, r)) in LOSSES.iter().zip(cases.iter().zip(reference)) {
            assert_eq!(
                canon(&c.0),
                canon(&r.0),
                "{d} {name}: {:?} vs INTERP {:?}",
                c.0,
                r.0
            );
            assert_eq!(
                canon(&c.1),
                canon(&r.1),
                "{d} d/dx {name}: {:?} vs INTERP {:?}",
                c.1,
                r.1
            );
        }
    }
}

/// (layernorm over the last axis of 8192x1024, a 784-512-10 MLP forward on a batch of 256): the
/// shapes of bench workloads W10 and W7, whose optimized kernels carry a vector accumulator
/// updated lane by lane (`PHI(GEP(acc, i), x)`), which the LLVM renderer once refused.
fn heuristic_shapes(dev: &str) -> (Vec<f32>, Vec<f32>) {
    let _g = on(dev);
    let x = Tensor::from_vec(values(8192 * 1024, 0.1), &[8192, 1024]).unwrap();
    let ln = x.layernorm(-1, 1e-5).unwrap().to_vec::<f32>().unwrap();
    let x = Tensor::from_vec(values(256 * 784, 1.3), &[256, 784]).unwrap();
    let w1 = Tensor::from_vec(values(784 * 512, 2.7), &[784, 512]).unwrap();
    let w2 = Tensor::from_vec(values(512 * 10, 4.1), &[512, 10]).unwrap();
    let h = x.linear(&w1, None).unwrap().relu().unwrap();
    let mut mlp = h.linear(&w2, None).unwrap().to_vec::<f32>().unwrap();
    // W12's projections and attention scores: a batched [4,128,256] @ [256,256] and a
    // [4,8,128,32] @ [4,8,32,128] whose upcast output lanes are gathered into a float4 store
    let x = Tensor::from_vec(values(4 * 128 * 256, 0.7), &[4, 128, 256]).unwrap();
    let w = Tensor::from_vec(values(256 * 256, 3.3), &[256, 256]).unwrap();
    mlp.extend(x.linear(&w, None).unwrap().to_vec::<f32>().unwrap());
    let q = Tensor::from_vec(values(4 * 8 * 128 * 32, 5.9), &[4, 8, 128, 32]).unwrap();
    let k = Tensor::from_vec(values(4 * 8 * 32 * 128, 6.1), &[4, 8, 32, 128]).unwrap();
    mlp.extend(q.matmul(&k).unwrap().to_vec::<f32>().unwrap());
    // the MLP's second projection with bias and residual, x + (h @ w2 + b2), h of 1024 features:
    // the lane PHIs' users were placed inside the reduce loop (LLVM: "does not dominate")
    let h = Tensor::from_vec(values(4 * 128 * 1024, 8.3), &[4, 128, 1024]).unwrap();
    let w2 = Tensor::from_vec(values(1024 * 256, 9.7), &[1024, 256]).unwrap();
    let b2 = Tensor::from_vec(values(256, 11.3), &[256]).unwrap();
    let res = x.add(h.linear(&w2, Some(&b2)).unwrap()).unwrap();
    mlp.extend(res.to_vec::<f32>().unwrap());
    let up = Tensor::from_vec(values(256 * 1024, 10.1), &[256, 1024]).unwrap();
    let g = x.linear(&up, None).unwrap().gelu().unwrap();
    mlp.extend(g.to_vec::<f32>().unwrap());
    (ln, mlp)
}

/// Within a few float32 ulps of the sums' magnitude: the devices may group a long reduction
/// differently (upcasts and vector lanes), so equal bits are not expected here.
fn assert_close(what: &str, got: &[f32], want: &[f32], scale: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * scale * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn vector_accumulator_kernels_render_and_agree_on_llvm() {
    let devs = cpu_devices();
    if !devs.contains(&"LLVM") {
        return;
    }
    let (ln0, mlp0) = heuristic_shapes("CLANG");
    let (ln, mlp) = heuristic_shapes("LLVM");
    assert_close("layernorm", &ln, &ln0, 10.0);
    assert_close("mlp", &mlp, &mlp0, 1000.0);
}

/// Edge values of a float max: NaN of either sign, signed zeros, infinities, a denormal, equals.
const MAX_EDGES: [f32; 12] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    1e-40,
    -1e-40,
    3.0e38,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    -f32::NAN,
];

/// Row maxima (rows `[a, b, b, a]` for every pair of [`MAX_EDGES`]) and column maxima (the same
/// values as 4 rows) on `dev`.
fn edge_maxima(dev: &str) -> Vec<f32> {
    let _g = on(dev);
    let n = MAX_EDGES.len();
    let mut v = Vec::with_capacity(n * n * 4);
    for a in MAX_EDGES {
        for b in MAX_EDGES {
            v.extend([a, b, b, a]);
        }
    }
    let rows = Tensor::from_slice(&v, &[n * n, 4]).unwrap();
    let mut out = rows.max_axis(1, false).unwrap().to_vec::<f32>().unwrap();
    let cols = rows.reshape(&[4, (n * n) as isize]).unwrap();
    out.extend(cols.max_axis(0, false).unwrap().to_vec::<f32>().unwrap());
    out
}

#[test]
fn max_reductions_over_edge_values_give_the_interpreters_bits_on_every_device() {
    let mut devs = cpu_devices();
    let default = rawgrad::runtime::builtin::default_device().unwrap();
    if !devs.contains(&default.as_str()) {
        devs.push(Box::leak(default.into_boxed_str()));
    }
    let want = edge_maxima(devs[0]);
    assert!(want.iter().any(|v| v.is_nan()) && want.iter().any(|v| v.to_bits() == 0));
    for d in &devs[1..] {
        let got = edge_maxima(d);
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // the sign and payload of a NaN are the hardware's, as in every device test
            let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
            assert!(
                same,
                "{d} max [{i}]: {g:?} ({:#x}) vs INTERP {w:?} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}
