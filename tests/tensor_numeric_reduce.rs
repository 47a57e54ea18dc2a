//! Numeric tests on CLANG and INTERP of reductions, matmul, movement ops, indexing, creation
//! helpers and the NN ops, against a naive f64 reference; odd shapes (17x33 @ 33x5),
//! zero-size and one-element tensors.

mod tensor_common;

use rawgrad::dtype::dtypes;
use rawgrad::{ConvArgs, Index as I, PoolArgs, Tensor};
use tensor_common::reference::{assert_close, unravel, R};
use tensor_common::*;

fn arange_r(shape: &[usize]) -> R {
    let n = shape.iter().product::<usize>();
    R::new(shape, (0..n).map(|i| i as f64).collect())
}

#[test]
fn sums_maxes_means() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = R::rand32(&[3, 4, 5], 1, -2.0, 2.0);
        let t = t32(&x);
        for axes in [vec![0], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]] {
            let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            for keep in [false, true] {
                let what = format!("{dev} axes {axes:?} keepdim {keep}");
                check_close(
                    &t.sum_axis(ax.clone(), keep).unwrap(),
                    &x.sum_axis(&axes, keep),
                    1e-5,
                    1e-5,
                    &what,
                );
                check_close(
                    &t.max_axis(ax.clone(), keep).unwrap(),
                    &x.max_axis(&axes, keep),
                    0.0,
                    0.0,
                    &what,
                );
                let mn = x.map(|v| -v).max_axis(&axes, keep).map(|v| -v);
                check_close(&t.min_axis(ax.clone(), keep).unwrap(), &mn, 0.0, 0.0, &what);
                let n: usize = axes.iter().map(|&a| x.shape[a]).product();
                let mean = x.sum_axis(&axes, keep).map(|v| v / n as f64);
                check_close(
                    &t.mean_axis(ax.clone(), keep).unwrap(),
                    &mean,
                    1e-5,
                    1e-5,
                    &what,
                );
            }
        }
        check_close(
            &t.sum_axis(-1, false).unwrap(),
            &x.sum_axis(&[2], false),
            1e-5,
            1e-5,
            "negative axis",
        );
        check_close(
            &t.sum().unwrap(),
            &x.sum_axis(&[0, 1, 2], false),
            1e-4,
            1e-5,
            "all",
        );
        let i = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
        assert_eq!(
            i.sum_axis(0, false).unwrap().to_vec::<i32>().unwrap(),
            [4, 6]
        );
        assert_eq!(i.mean().unwrap().item::<f32>().unwrap(), 2.5);
        let u = Tensor::from_slice(&[200u8, 100, 50], &[3]).unwrap();
        assert_eq!(
            u.sum_axis(0, false).unwrap().item::<u32>().unwrap(),
            350,
            "uint8 sums in uint32"
        );
        let h = t.half().unwrap().sum_axis(1, false).unwrap();
        assert_eq!(h.dtype(), dtypes::float16);
        let hv: Vec<f64> = h
            .to_vec::<half::f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect();
        assert_close(&hv, &x.sum_axis(&[1], false).data, 1e-2, 1e-2, "half sum");
    }
}

#[test]
fn var_std_softmax() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = R::rand(&[4, 6], 2, -3.0, 3.0);
        let t = t32(&x);
        let mean = x.sum_axis(&[1], true).map(|v| v / 6.0);
        let sq = x.zip(&mean, |a, m| (a - m) * (a - m)).sum_axis(&[1], false);
        check_close(
            &t.var_axis(1, false, 1).unwrap(),
            &sq.map(|v| v / 5.0),
            1e-5,
            1e-5,
            "var",
        );
        check_close(
            &t.var_axis(1, false, 0).unwrap(),
            &sq.map(|v| v / 6.0),
            1e-5,
            1e-5,
            "var0",
        );
        check_close(
            &t.std_axis(1, false, 1).unwrap(),
            &sq.map(|v| (v / 5.0).sqrt()),
            1e-5,
            1e-5,
            "std",
        );
        let m = x.max_axis(&[1], true);
        let e = x.zip(&m, |a, b| (a - b).exp());
        let s = e.sum_axis(&[1], true);
        let sm = e.zip(&s, |a, b| a / b);
        check_close(
            &t.softmax(-1).unwrap(),
            &sm,
            1e-6,
            1e-5,
            &format!("{dev} softmax"),
        );
        check_close(
            &t.log_softmax(-1).unwrap(),
            &sm.map(f64::ln),
            1e-5,
            1e-5,
            "log_softmax",
        );
        let lse = s.zip(&m, |a, b| a.ln() + b);
        let lse_flat = R::new(&[4], lse.data.clone());
        check_close(
            &t.logsumexp_axis(1, false).unwrap(),
            &lse_flat,
            1e-5,
            1e-5,
            "logsumexp",
        );
        check_close(
            &t.logsumexp_axis(1, true).unwrap(),
            &lse,
            1e-5,
            1e-5,
            "logsumexp keepdim",
        );
        let sm0 = {
            let m0 = x.max_axis(&[0], true);
            let e0 = x.zip(&m0, |a, b| (a - b).exp());
            let s0 = e0.sum_axis(&[0], true);
            e0.zip(&s0, |a, b| a / b)
        };
        check_close(&t.softmax(0).unwrap(), &sm0, 1e-6, 1e-5, "softmax axis 0");
    }
}

#[test]
fn argmax_argmin_cumsum() {
    for dev in DEVICES {
        let _d = on(dev);
        let i = |t: Tensor| t.to_vec::<i32>().unwrap();
        let a = Tensor::from_slice(&[1.0f32, 3.0, 3.0, 0.0], &[4]).unwrap();
        assert_eq!(
            a.argmax().unwrap().item::<i32>().unwrap(),
            1,
            "{dev} first max"
        );
        assert_eq!(a.argmin().unwrap().item::<i32>().unwrap(), 3);
        let b = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 5.0, 9.0, 1.0], &[2, 3]).unwrap();
        assert_eq!(i(b.argmax_axis(1, false).unwrap()), [0, 1]);
        assert_eq!(i(b.argmin_axis(1, false).unwrap()), [1, 2]);
        assert_eq!(i(b.argmax_axis(0, true).unwrap()), [1, 1, 1]);
        assert_eq!(i(b.argmin_axis(0, false).unwrap()), [0, 0, 0]);
        assert_eq!(b.argmax_axis(0, true).unwrap().shape(), vec![1, 3]);
        assert_eq!(b.argmax().unwrap().item::<i32>().unwrap(), 4);
        let c = Tensor::arange((1, 11, 1))
            .unwrap()
            .cast(dtypes::float32)
            .unwrap();
        let want: Vec<f64> = (1..=10)
            .scan(0.0, |s, v| {
                *s += v as f64;
                Some(*s)
            })
            .collect();
        assert_close(&get(&c.cumsum(0).unwrap()), &want, 0.0, 0.0, "cumsum");
        let big = Tensor::ones(&[600]).unwrap().cumsum(0).unwrap();
        let want: Vec<f64> = (1..=600).map(|v| v as f64).collect();
        assert_close(
            &get(&big),
            &want,
            0.0,
            0.0,
            &format!("{dev} two-stage cumsum"),
        );
        let m = t32(&arange_r(&[2, 3])).cumsum(1).unwrap();
        assert_eq!(get(&m), [0.0, 1.0, 3.0, 3.0, 7.0, 12.0]);
    }
}

/// Batched matmul reference with numpy broadcasting of the batch dims.
fn matmul_ref(a: &R, b: &R) -> R {
    let (m, k) = (a.shape[a.shape.len() - 2], a.shape[a.shape.len() - 1]);
    let n = b.shape[b.shape.len() - 1];
    let (ab, bb) = (&a.shape[..a.shape.len() - 2], &b.shape[..b.shape.len() - 2]);
    let nb = ab.len().max(bb.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; nb - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(ab), pad(bb));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let nbatch: usize = batch.iter().product();
    let mut out = Vec::new();
    for bi in 0..nbatch {
        let idx = unravel(bi, &batch);
        let off = |p: &[usize]| -> usize {
            let st = tensor_common::reference::strides(p);
            idx.iter()
                .zip(p)
                .zip(&st)
                .map(|((&i, &d), &s)| if d == 1 { 0 } else { i * s })
                .sum()
        };
        let (oa, ob) = (off(&pa) * m * k, off(&pb) * k * n);
        for i in 0..m {
            for j in 0..n {
                out.push(
                    (0..k)
                        .map(|l| a.data[oa + i * k + l] * b.data[ob + l * n + j])
                        .sum(),
                );
            }
        }
    }
    let mut shape = batch;
    shape.extend([m, n]);
    R::new(&shape, out)
}

#[test]
fn matmuls() {
    for dev in DEVICES {
        let _d = on(dev);
        let (a, b) = (
            R::rand(&[17, 33], 3, -1.0, 1.0),
            R::rand(&[33, 5], 4, -1.0, 1.0),
        );
        let got = t32(&a).matmul(&t32(&b)).unwrap();
        check_close(
            &got,
            &a.matmul(&b),
            1e-5,
            1e-5,
            &format!("{dev} 17x33 @ 33x5"),
        );
        let (a, b) = (
            R::rand(&[2, 3, 4], 5, -1.0, 1.0),
            R::rand(&[4, 5], 6, -1.0, 1.0),
        );
        check_close(
            &t32(&a).matmul(&t32(&b)).unwrap(),
            &matmul_ref(&a, &b),
            1e-5,
            1e-5,
            "batched",
        );
        let (a, b) = (
            R::rand(&[4, 1, 2, 3], 7, -1.0, 1.0),
            R::rand(&[5, 3, 6], 8, -1.0, 1.0),
        );
        check_close(
            &t32(&a).matmul(&t32(&b)).unwrap(),
            &matmul_ref(&a, &b),
            1e-5,
            1e-5,
            "bcast",
        );
        let (v, w) = (
            R::rand(&[33], 9, -1.0, 1.0),
            R::rand(&[33, 5], 10, -1.0, 1.0),
        );
        let want = R::new(&[5], R::new(&[1, 33], v.data.clone()).matmul(&w).data);
        check_close(
            &t32(&v).dot(&t32(&w)).unwrap(),
            &want,
            1e-5,
            1e-5,
            "vector @ matrix",
        );
        let mv = R::new(
            &[5],
            w.permute(&[1, 0])
                .matmul(&R::new(&[33, 1], v.data.clone()))
                .data,
        );
        check_close(
            &t32(&w.permute(&[1, 0])).matmul(&t32(&v)).unwrap(),
            &mv,
            1e-5,
            1e-5,
            "mat @ vec",
        );
        let ia = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let ib = Tensor::from_slice(&[7i32, 8, 9, 10, 11, 12], &[3, 2]).unwrap();
        let p = ia.matmul(&ib).unwrap();
        assert_eq!(
            (p.dtype(), p.to_vec::<i32>().unwrap()),
            (dtypes::int32, vec![58, 64, 139, 154])
        );
        let one = Tensor::from_slice(&[3.0f32], &[1, 1]).unwrap();
        assert_eq!(get(&one.matmul(&one).unwrap()), [9.0]);
        let (x, w, bias) = (
            R::rand(&[2, 3], 11, -1.0, 1.0),
            R::rand(&[3, 4], 12, -1.0, 1.0),
            R::rand(&[4], 13, -1.0, 1.0),
        );
        let want = x.matmul(&w).zip(&bias, |a, b| a + b);
        check_close(
            &t32(&x).linear(&t32(&w), Some(&t32(&bias))).unwrap(),
            &want,
            1e-5,
            1e-5,
            "linear",
        );
    }
}

#[test]
fn movement_values() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = arange_r(&[2, 3, 4]);
        let t = t32(&x);
        check_close(
            &t.permute(&[2, 0, 1]).unwrap(),
            &x.permute(&[2, 0, 1]),
            0.0,
            0.0,
            "permute",
        );
        check_close(
            &t.transpose(0, 2).unwrap().contiguous().unwrap(),
            &x.permute(&[2, 1, 0]),
            0.0,
            0.0,
            "transpose",
        );
        let r = t.reshape(&[4, -1]).unwrap();
        assert_eq!((r.shape(), get(&r)), (vec![4, 6], x.data.clone()));
        let f = t.flip(&[1, 2]).unwrap();
        let want: Vec<f64> = (0..24)
            .map(|i| {
                let v = unravel(i, &[2, 3, 4]);
                x.at(&[v[0], 2 - v[1], 3 - v[2]])
            })
            .collect();
        assert_eq!(get(&f), want, "{dev} flip");
        let s = t.shrink(&[None, Some((1, 3)), Some((2, 4))]).unwrap();
        assert_eq!(
            get(&s),
            [6.0, 7.0, 10.0, 11.0, 18.0, 19.0, 22.0, 23.0],
            "{dev} shrink"
        );
        let v = t32(&R::new(&[2], vec![1.0, 2.0]));
        assert_eq!(
            get(&v.pad(&[Some((1, 2))]).unwrap()),
            [0.0, 1.0, 2.0, 0.0, 0.0]
        );
        assert_eq!(
            get(&v.pad_with(&[Some((1, 2))], 9.0).unwrap()),
            [9.0, 1.0, 2.0, 9.0, 9.0]
        );
        assert_eq!(
            get(&v.pad2d(&[-1, 1], 0i64).unwrap()),
            [2.0, 0.0],
            "pad2d crops"
        );
        let e = t32(&R::new(&[2, 1], vec![1.0, 2.0]))
            .expand(&[2, 3])
            .unwrap();
        assert_eq!(get(&e), [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(
            get(&v.repeat(&[2, 2]).unwrap()),
            [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
        );
        let w = t32(&R::new(&[2], vec![3.0, 4.0]));
        assert_eq!(
            get(&v.cat(&[&w, &v], 0).unwrap()),
            [1.0, 2.0, 3.0, 4.0, 1.0, 2.0]
        );
        let st = v.stack(&[&w], 1).unwrap();
        assert_eq!(
            (st.shape(), get(&st)),
            (vec![2, 2], vec![1.0, 3.0, 2.0, 4.0])
        );
        let parts = t.split_sizes(&[1, 2], 1).unwrap();
        assert_eq!(
            get(&parts[1]),
            [
                4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0,
                23.0
            ]
        );
        let chunks = t.flatten(0, -1).unwrap().chunk(5, 0).unwrap();
        assert_eq!(get(&chunks[4]), [20.0, 21.0, 22.0, 23.0]);
        assert_eq!(
            t.squeeze(None).unwrap().unsqueeze(1).unwrap().shape(),
            vec![2, 1, 3, 4]
        );
    }
}

#[test]
fn getitem_values() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = t32(&arange_r(&[5, 6]));
        let g = |idx: &[I]| get(&x.getitem(idx).unwrap());
        assert_eq!(g(&[I::Int(-1)]), [24.0, 25.0, 26.0, 27.0, 28.0, 29.0]);
        assert_eq!(g(&[I::Int(1), I::Int(-2)]), [10.0]);
        assert_eq!(
            g(&[
                I::Slice(None, None, Some(2)),
                I::Slice(None, None, Some(-3))
            ]),
            [5.0, 2.0, 17.0, 14.0, 29.0, 26.0],
            "{dev} steps"
        );
        assert_eq!(
            g(&[I::Slice(Some(-2), None, Some(-2)), I::range(0, 2)]),
            [18.0, 19.0, 6.0, 7.0]
        );
        assert_eq!(g(&[I::Ellipsis, I::Int(0)]), [0.0, 6.0, 12.0, 18.0, 24.0]);
        assert_eq!(
            x.getitem(&[I::NewAxis, I::Int(0), I::NewAxis])
                .unwrap()
                .shape(),
            vec![1, 1, 6]
        );
        let idx = Tensor::from_slice(&[3i32, 0, -1, 7], &[4]).unwrap();
        let rows = get(&x.getitem(&[I::Tensor(idx.clone())]).unwrap());
        let mut want: Vec<f64> = (18..24)
            .chain(0..6)
            .chain(24..30)
            .map(|v| v as f64)
            .collect();
        want.extend([0.0; 6]);
        assert_eq!(rows, want, "{dev} advanced rows (out of range gives 0)");
        let cols = Tensor::from_slice(&[5i32, 1], &[2]).unwrap();
        let both = x
            .getitem(&[
                I::Tensor(Tensor::from_slice(&[0i32, 2], &[2]).unwrap()),
                I::Tensor(cols),
            ])
            .unwrap();
        assert_eq!(get(&both), [5.0, 13.0]);
        let m = t32(&R::new(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]));
        let gi = Tensor::from_slice(&[0i32, 0, 1, 0], &[2, 2]).unwrap();
        assert_eq!(
            get(&m.gather(1, &gi).unwrap()),
            [1.0, 1.0, 4.0, 3.0],
            "gather"
        );
        let oh = Tensor::from_slice(&[0i32, 2, 1], &[3])
            .unwrap()
            .one_hot(3)
            .unwrap();
        assert_eq!(oh.to_vec::<i32>().unwrap(), [1, 0, 0, 0, 0, 1, 0, 1, 0]);
    }
}

#[test]
fn creation_values() {
    for dev in DEVICES {
        let _d = on(dev);
        let i = |t: Tensor| t.to_vec::<i32>().unwrap();
        assert_eq!(i(Tensor::arange((0, 10, 3)).unwrap()), [0, 3, 6, 9]);
        assert_eq!(i(Tensor::arange((5, 0, -1)).unwrap()), [5, 4, 3, 2, 1]);
        assert_eq!(i(Tensor::arange((-3, 3, 2)).unwrap()), [-3, -1, 1]);
        assert_eq!(
            get(&Tensor::arange((0.0, 1.0, 0.25)).unwrap()),
            [0.0, 0.25, 0.5, 0.75]
        );
        assert_eq!(
            get(&Tensor::eye(3).unwrap()),
            [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        );
        assert_eq!(get(&Tensor::full(&[2], 2.5).unwrap()), [2.5, 2.5]);
        assert_eq!(get(&Tensor::zeros(&[3]).unwrap()), [0.0; 3]);
        let o = Tensor::ones(&[2, 2]).unwrap();
        assert_eq!(get(&o.zeros_like().unwrap().add(&o).unwrap()), [1.0; 4]);
        let ones = Tensor::ones(&[3, 4]).unwrap();
        let tu = get(&ones.triu(1).unwrap());
        assert_eq!(
            tu,
            [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            "{dev} triu"
        );
        let tl = get(&ones.tril(-1).unwrap());
        assert_eq!(
            tl,
            [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
            "{dev} tril"
        );
    }
}

#[test]
fn zero_size_and_one_element() {
    for dev in DEVICES {
        let _d = on(dev);
        let z = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap();
        assert_eq!(
            z.add(1i64).unwrap().to_vec::<f32>().unwrap(),
            Vec::<f32>::new()
        );
        assert_eq!(
            get(&z.sum_axis(0, false).unwrap()),
            [0.0; 3],
            "{dev} sum over an empty axis"
        );
        assert_eq!(get(&z.max_axis(0, false).unwrap()), [f64::NEG_INFINITY; 3]);
        assert!(get(&z.mean_axis(0, false).unwrap())
            .iter()
            .all(|v| v.is_nan()));
        assert_eq!(z.sum_axis(1, false).unwrap().shape(), vec![0]);
        let e = Tensor::from_vec(Vec::<f32>::new(), &[0]).unwrap();
        assert_eq!(
            e.matmul(&Tensor::from_vec(Vec::<f32>::new(), &[0, 2]).unwrap())
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            [0.0, 0.0]
        );
        let s = Tensor::scalar(3.0).unwrap();
        assert_eq!(s.sum().unwrap().item::<f32>().unwrap(), 3.0);
        let e = s.mul(&s).unwrap().exp().unwrap().item::<f32>().unwrap() as f64;
        assert_close(&[e], &[9f64.exp()], 0.0, 1e-6, "exp of a 0-d tensor");
        let one = Tensor::from_slice(&[2.0f32], &[1]).unwrap();
        assert_eq!(one.softmax(-1).unwrap().item::<f32>().unwrap(), 1.0);
        assert_eq!(
            one.reshape(&[])
                .unwrap()
                .add(&s)
                .unwrap()
                .item::<f32>()
                .unwrap(),
            5.0
        );
    }
}

#[test]
fn nn_ops() {
    for dev in DEVICES {
        let _d = on(dev);
        let img = t32(&arange_r(&[1, 1, 4, 4]));
        assert_eq!(get(&img.avg_pool2d().unwrap()), [2.5, 4.5, 10.5, 12.5]);
        assert_eq!(get(&img.max_pool2d().unwrap()), [5.0, 7.0, 13.0, 15.0]);
        let p = img
            .max_pool2d_with(&PoolArgs::default().kernel(3).stride(1))
            .unwrap();
        assert_eq!(get(&p), [10.0, 11.0, 14.0, 15.0]);
        let d = img
            .pool(&[2, 2], &[1], &[2])
            .unwrap()
            .sum_axis([-1, -2], false)
            .unwrap();
        assert_eq!(get(&d), [20.0, 24.0, 36.0, 40.0], "{dev} dilated pool");
        // conv2d against a direct loop: x (1,2,5,5), w (3,2,3,3), stride 2, padding 1.
        let (x, w, b) = (
            R::rand(&[1, 2, 5, 5], 20, -1.0, 1.0),
            R::rand(&[3, 2, 3, 3], 21, -1.0, 1.0),
            R::rand(&[3], 22, -1.0, 1.0),
        );
        let mut want = vec![];
        for co in 0..3 {
            for oy in 0..3 {
                for ox in 0..3 {
                    let mut acc = b.data[co];
                    for ci in 0..2 {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) =
                                    ((oy * 2 + ky) as isize - 1, (ox * 2 + kx) as isize - 1);
                                if (0..5).contains(&iy) && (0..5).contains(&ix) {
                                    acc += x.at(&[0, ci, iy as usize, ix as usize])
                                        * w.at(&[co, ci, ky, kx]);
                                }
                            }
                        }
                    }
                    want.push(acc);
                }
            }
        }
        let got = t32(&x)
            .conv2d_with(
                &t32(&w),
                Some(&t32(&b)),
                &ConvArgs::default().stride(2).padding(1),
            )
            .unwrap();
        check_close(
            &got,
            &R::new(&[1, 3, 3, 3], want),
            1e-5,
            1e-5,
            &format!("{dev} conv2d"),
        );
        let y = R::rand(&[2, 5], 23, -2.0, 2.0);
        let mean = y.sum_axis(&[1], true).map(|v| v / 5.0);
        let c = y.zip(&mean, |a, m| a - m);
        let var = c.map(|v| v * v).sum_axis(&[1], true).map(|v| v / 5.0);
        let want = c.zip(&var, |a, v| a / (v + 1e-5).sqrt());
        check_close(
            &t32(&y).layernorm(-1, 1e-5).unwrap(),
            &want,
            1e-5,
            1e-4,
            "layernorm",
        );
        let logits = R::new(&[2, 3], vec![1.0, 2.0, 0.5, -1.0, 0.0, 3.0]);
        let labels = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
        let lsm = |r: usize, c: usize| {
            let row = &logits.data[r * 3..r * 3 + 3];
            row[c] - row.iter().map(|v| v.exp()).sum::<f64>().ln()
        };
        let want = -(lsm(0, 1) + lsm(1, 2)) / 2.0;
        let got = t32(&logits)
            .sparse_categorical_crossentropy(&labels, -1, 0.0)
            .unwrap();
        assert_close(
            &get(&got),
            &[want],
            1e-6,
            1e-5,
            "sparse_categorical_crossentropy",
        );
        let (pr, tg) = (
            R::new(&[3], vec![0.2, 0.9, 0.5]),
            R::new(&[3], vec![0.0, 1.0, 1.0]),
        );
        let want = -(0.8f64.ln() + 0.9f64.ln() + 0.5f64.ln()) / 3.0;
        assert_close(
            &get(&t32(&pr).binary_crossentropy(&t32(&tg)).unwrap()),
            &[want],
            1e-6,
            1e-5,
            "bce",
        );
        let (q, k, v) = (
            R::rand(&[1, 2, 3], 24, -1.0, 1.0),
            R::rand(&[1, 2, 3], 25, -1.0, 1.0),
            R::rand(&[1, 2, 3], 26, -1.0, 1.0),
        );
        let q2 = R::new(&[2, 3], q.data.clone());
        let kt = R::new(&[2, 3], k.data.clone()).permute(&[1, 0]);
        let s = q2.matmul(&kt).map(|a| a / 3f64.sqrt());
        let m = s.max_axis(&[1], true);
        let e = s.zip(&m, |a, b| (a - b).exp());
        let sm = e.zip(&e.sum_axis(&[1], true), |a, b| a / b);
        let want = R::new(&[1, 2, 3], sm.matmul(&R::new(&[2, 3], v.data.clone())).data);
        let got = t32(&q)
            .scaled_dot_product_attention(&t32(&k), &t32(&v), None, 0.0, false)
            .unwrap();
        check_close(&got, &want, 1e-5, 1e-5, &format!("{dev} attention"));
    }
}
