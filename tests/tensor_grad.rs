//! Gradients of composite functions against central finite differences, on CLANG and INTERP,
//! in float64: every input's autograd gradient must match `(f(x+h) - f(x-h)) / 2h`.

mod tensor_common;

use rawgrad::{ConvArgs, Index as I, Tensor};
use tensor_common::reference::{assert_close, R};
use tensor_common::*;

type F = fn(&[Tensor]) -> Tensor;

fn scalar(f: F, inputs: &[R]) -> f64 {
    let ts: Vec<Tensor> = inputs.iter().map(t64).collect();
    f(&ts).item::<f64>().unwrap()
}

/// Compare autograd with central differences for every element of every input.
fn grad_check(name: &str, f: F, inputs: &[R]) {
    let ts: Vec<Tensor> = inputs.iter().map(|r| t64(r).requires_grad_(true)).collect();
    f(&ts).backward().unwrap();
    let h = 1e-6;
    for (i, (t, r)) in ts.iter().zip(inputs).enumerate() {
        let g = t
            .grad()
            .unwrap_or_else(|| panic!("{name}: input {i} got no gradient"));
        let got = g.to_vec::<f64>().unwrap();
        let mut want = Vec::with_capacity(r.data.len());
        for j in 0..r.data.len() {
            let mut plus = inputs.to_vec();
            plus[i].data[j] += h;
            let mut minus = inputs.to_vec();
            minus[i].data[j] -= h;
            want.push((scalar(f, &plus) - scalar(f, &minus)) / (2.0 * h));
        }
        assert_close(&got, &want, 1e-6, 1e-5, &format!("{name}: d/d input {i}"));
    }
}

fn f_matmul_sigmoid(x: &[Tensor]) -> Tensor {
    let s = x[0].sum_axis(1, true).unwrap();
    x[0].matmul(&x[1])
        .unwrap()
        .sigmoid()
        .unwrap()
        .mul(&s)
        .unwrap()
        .sum()
        .unwrap()
}

fn f_softmax_max(x: &[Tensor]) -> Tensor {
    let a = x[0].softmax(-1).unwrap().mul(&x[0]).unwrap().sum().unwrap();
    let b = x[0].max_axis(1, false).unwrap().sum().unwrap();
    let c = x[0].logsumexp_axis(1, false).unwrap().mean().unwrap();
    a.add(&b).unwrap().add(&c).unwrap()
}

fn f_unary_mix(x: &[Tensor]) -> Tensor {
    let x = &x[0];
    let terms = [
        x.pow(3i64).unwrap(),
        x.abs().unwrap().add(0.5).unwrap().sqrt().unwrap(),
        x.exp2().unwrap(),
        x.tanh().unwrap().neg().unwrap(),
        x.div(x.square().unwrap().add(1i64).unwrap()).unwrap(),
        x.sin().unwrap().cos().unwrap(),
        x.add(3i64).unwrap().log().unwrap(),
        x.add(4i64).unwrap().rsqrt().unwrap(),
    ];
    let mut acc = terms[0].clone();
    for t in &terms[1..] {
        acc = acc.add(t).unwrap();
    }
    acc.sum().unwrap()
}

fn f_conv_elu(x: &[Tensor]) -> Tensor {
    x[0].conv2d_with(&x[1], None, &ConvArgs::default().padding(1))
        .unwrap()
        .elu(1.0)
        .unwrap()
        .mean()
        .unwrap()
}

fn f_movement(x: &[Tensor]) -> Tensor {
    let x = &x[0];
    let a = x
        .pad(&[Some((1, 0)), Some((0, 2))])
        .unwrap()
        .getitem(&[I::range(1, 4), I::Slice(None, None, Some(2))])
        .unwrap()
        .layernorm(-1, 1e-5)
        .unwrap()
        .mul(
            Tensor::arange((1.0, 4.0, 1.0))
                .unwrap()
                .cast(x.dtype())
                .unwrap(),
        )
        .unwrap()
        .sum()
        .unwrap();
    let b = x.T().unwrap().matmul(x).unwrap().sum().unwrap();
    let c = x.cat(&[&x.flip(&[0]).unwrap()], 1).unwrap().std().unwrap();
    let d = x
        .permute(&[1, 0])
        .unwrap()
        .reshape(&[2, 6])
        .unwrap()
        .expand(&[3, 2, 6])
        .unwrap();
    let d = d.mul(&d).unwrap().mean().unwrap();
    a.add(&b).unwrap().add(&c).unwrap().add(&d).unwrap()
}

fn f_where_maximum(x: &[Tensor]) -> Tensor {
    let (x, y) = (&x[0], &x[1]);
    // The condition is detached, as tinygrad's own uses of `where` do: a comparison that
    // requires grad gets none, and backward reports it.
    let a = x
        .gt(0i64)
        .unwrap()
        .detach()
        .where_(x.mul(2i64).unwrap(), x.neg().unwrap())
        .unwrap();
    let b = x.maximum(y).unwrap().add(x.minimum(0.3).unwrap()).unwrap();
    let c = x.relu().unwrap().mul(y).unwrap();
    a.add(&b).unwrap().add(&c).unwrap().sum().unwrap()
}

#[test]
fn gradients_match_finite_differences() {
    for dev in DEVICES {
        let _d = on(dev);
        let cases: Vec<(&str, F, Vec<R>)> = vec![
            (
                "matmul sigmoid",
                f_matmul_sigmoid,
                vec![
                    R::rand(&[3, 4], 1, -1.0, 1.0),
                    R::rand(&[4, 2], 2, -1.0, 1.0),
                ],
            ),
            (
                "softmax max logsumexp",
                f_softmax_max,
                vec![R::rand(&[2, 5], 3, -2.0, 2.0)],
            ),
            (
                "unary mix",
                f_unary_mix,
                vec![R::new(&[6], vec![-1.3, -0.7, -0.2, 0.4, 0.9, 1.6])],
            ),
            (
                "conv elu",
                f_conv_elu,
                vec![
                    R::rand(&[1, 1, 4, 4], 4, -1.0, 1.0),
                    R::rand(&[2, 1, 2, 2], 5, -1.0, 1.0),
                ],
            ),
            ("movement", f_movement, vec![R::rand(&[3, 4], 6, -1.0, 1.0)]),
            (
                "where maximum",
                f_where_maximum,
                vec![
                    R::new(&[5], vec![-1.5, -0.4, 0.2, 0.7, 1.9]),
                    R::new(&[5], vec![-1.0, 0.1, -0.3, 1.2, 1.0]),
                ],
            ),
        ];
        for (name, f, inputs) in cases {
            grad_check(&format!("{dev} {name}"), f, &inputs);
        }
    }
}

#[test]
fn gradient_accumulates_and_ties_split() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = Tensor::from_slice(&[1.0f32, 3.0, 3.0, 2.0], &[4])
            .unwrap()
            .requires_grad_(true);
        x.max().unwrap().backward().unwrap();
        assert_eq!(
            get(&x.grad().unwrap()),
            [0.0, 0.5, 0.5, 0.0],
            "{dev} max splits ties"
        );
        let y = Tensor::from_slice(&[2.0f32, 2.0], &[2])
            .unwrap()
            .requires_grad_(true);
        let z = Tensor::from_slice(&[2.0f32, 1.0], &[2]).unwrap();
        y.maximum(&z).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(
            get(&y.grad().unwrap()),
            [0.5, 1.0],
            "{dev} maximum averages ties"
        );
        let w = Tensor::from_slice(&[1.0f32, 2.0], &[2])
            .unwrap()
            .requires_grad_(true);
        let l = w.mul(&w).unwrap().add(&w).unwrap().sum().unwrap();
        l.backward().unwrap();
        assert_eq!(get(&w.grad().unwrap()), [3.0, 5.0], "{dev} 2w + 1");
        let l2 = w.mul(3i64).unwrap().sum().unwrap();
        l2.backward().unwrap();
        assert_eq!(
            get(&w.grad().unwrap()),
            [6.0, 8.0],
            "{dev} grads accumulate over backward calls"
        );
    }
}
