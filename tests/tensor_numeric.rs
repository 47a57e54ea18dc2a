//! Numeric tests of the elementwise Tensor ops on CLANG and INTERP against a naive f64
//! reference: unary math and activations, broadcasting binary ops, comparisons, `where`, `pow`,
//! integer ops (truncating division, wrap-around, shifts, xor), nan/inf, every dtype's casts and
//! bitcasts, and host data round trips.

mod tensor_common;

use half::{bf16, f16};
use rawgrad::dtype::{dtypes, DType, Scalar};
use rawgrad::tensor::Element;
use rawgrad::{Result, Tensor};
use tensor_common::reference::{assert_close, to_f64, R};
use tensor_common::*;

type Unary = (
    &'static str,
    fn(&Tensor) -> Result<Tensor>,
    fn(f64) -> f64,
    (f64, f64),
);

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

fn unary_cases() -> Vec<Unary> {
    vec![
        ("exp", Tensor::exp, f64::exp, (-5.0, 5.0)),
        ("exp2", Tensor::exp2, f64::exp2, (-5.0, 5.0)),
        ("log", Tensor::log, f64::ln, (0.01, 10.0)),
        ("log2", Tensor::log2, f64::log2, (0.01, 10.0)),
        ("sqrt", Tensor::sqrt, f64::sqrt, (0.0, 10.0)),
        ("rsqrt", Tensor::rsqrt, |x| 1.0 / x.sqrt(), (0.1, 10.0)),
        ("sin", Tensor::sin, f64::sin, (-10.0, 10.0)),
        ("cos", Tensor::cos, f64::cos, (-10.0, 10.0)),
        ("tan", Tensor::tan, f64::tan, (-1.2, 1.2)),
        ("relu", Tensor::relu, |x| x.max(0.0), (-3.0, 3.0)),
        ("sigmoid", Tensor::sigmoid, sigmoid, (-6.0, 6.0)),
        ("tanh", Tensor::tanh, f64::tanh, (-4.0, 4.0)),
        ("abs", Tensor::abs, f64::abs, (-3.0, 3.0)),
        (
            "sign",
            Tensor::sign,
            |x| if x == 0.0 { 0.0 } else { x.signum() },
            (-3.0, 3.0),
        ),
        ("reciprocal", Tensor::reciprocal, |x| 1.0 / x, (0.1, 5.0)),
        ("neg", Tensor::neg, |x| -x, (-3.0, 3.0)),
        ("square", Tensor::square, |x| x * x, (-3.0, 3.0)),
        ("trunc", Tensor::trunc, f64::trunc, (-5.0, 5.0)),
        ("floor", Tensor::floor, f64::floor, (-5.0, 5.0)),
        ("ceil", Tensor::ceil, f64::ceil, (-5.0, 5.0)),
        ("round", Tensor::round, round_half_even, (-5.0, 5.0)),
        ("sinh", Tensor::sinh, f64::sinh, (-3.0, 3.0)),
        ("cosh", Tensor::cosh, f64::cosh, (-3.0, 3.0)),
        ("atanh", Tensor::atanh, f64::atanh, (-0.9, 0.9)),
        ("asinh", Tensor::asinh, f64::asinh, (-3.0, 3.0)),
        ("acosh", Tensor::acosh, f64::acosh, (1.1, 5.0)),
        ("relu6", Tensor::relu6, |x| x.clamp(0.0, 6.0), (-3.0, 9.0)),
        (
            "hardswish",
            Tensor::hardswish,
            |x| x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            (-5.0, 5.0),
        ),
        ("swish", Tensor::swish, |x| x * sigmoid(x), (-5.0, 5.0)),
        (
            "softsign",
            Tensor::softsign,
            |x| x / (1.0 + x.abs()),
            (-5.0, 5.0),
        ),
        (
            "mish",
            Tensor::mish,
            |x| x * (1.0 + x.exp()).ln().tanh(),
            (-3.0, 3.0),
        ),
        (
            "quick_gelu",
            Tensor::quick_gelu,
            |x| x * sigmoid(1.702 * x),
            (-3.0, 3.0),
        ),
        (
            "gelu",
            Tensor::gelu,
            |x| {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(3))).tanh())
            },
            (-3.0, 3.0),
        ),
    ]
}

#[test]
fn unary_ops() {
    for dev in DEVICES {
        let _d = on(dev);
        for (i, (name, f, r, (lo, hi))) in unary_cases().into_iter().enumerate() {
            let mut x = R::rand(&[3, 7], i as u64, lo, hi);
            if name == "round" {
                x.data[..8].copy_from_slice(&[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6]);
            }
            let want = R::new(&x.shape, x.f32().iter().map(|&v| r(v as f64)).collect());
            let got = f(&t32(&x)).unwrap();
            check_close(&got, &want, 2e-5, 2e-5, &format!("{dev} {name}"));
        }
    }
}

type Activation = (&'static str, Tensor, fn(f64) -> f64);

#[test]
fn parameterised_activations() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = R::rand(&[10], 1, -4.0, 4.0);
        let t = t32(&x);
        let cases: Vec<Activation> = vec![
            ("elu", t.elu(1.5).unwrap(), |v| {
                if v > 0.0 {
                    v
                } else {
                    1.5 * (v.exp() - 1.0)
                }
            }),
            ("celu", t.celu(2.0).unwrap(), |v| {
                v.max(0.0) + (2.0 * ((v / 2.0).exp() - 1.0)).min(0.0)
            }),
            ("leakyrelu", t.leakyrelu(0.1).unwrap(), |v| {
                if v > 0.0 {
                    v
                } else {
                    0.1 * v
                }
            }),
            ("softplus", t.softplus(2.0).unwrap(), |v| {
                (1.0 + (2.0 * v).exp()).ln() / 2.0
            }),
            ("hardtanh", t.hardtanh(-1.0, 2.0).unwrap(), |v| {
                v.clamp(-1.0, 2.0)
            }),
            ("clip", t.clip(-0.5, 0.5).unwrap(), |v| v.clamp(-0.5, 0.5)),
        ];
        for (name, got, r) in cases {
            check_close(&got, &x.map(|v| r(v as f32 as f64)), 2e-5, 2e-5, name);
        }
    }
}

type Binary = (
    &'static str,
    fn(&Tensor, &Tensor) -> Result<Tensor>,
    fn(f64, f64) -> f64,
);

#[test]
fn binary_broadcasting() {
    let cases: Vec<Binary> = vec![
        ("add", |a, b| a.add(b), |a, b| a + b),
        ("sub", |a, b| a.sub(b), |a, b| a - b),
        ("mul", |a, b| a.mul(b), |a, b| a * b),
        ("div", |a, b| a.div(b), |a, b| a / b),
        ("maximum", |a, b| a.maximum(b), f64::max),
        ("minimum", |a, b| a.minimum(b), f64::min),
        ("pow", |a, b| a.abs()?.pow(b), |a, b| a.abs().powf(b)),
    ];
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[3, 1], &[1, 4]),
        (&[2, 3, 4], &[4]),
        (&[5], &[5]),
        (&[1], &[2, 2]),
    ];
    for dev in DEVICES {
        let _d = on(dev);
        for (name, f, r) in &cases {
            for (k, (sa, sb)) in shapes.iter().enumerate() {
                let a = R::rand(sa, 10 + k as u64, -3.0, 3.0);
                let b = R::rand(sb, 20 + k as u64, 0.5, 2.5);
                let (af, bf) = (R::new(sa, to_f64(&a.f32())), R::new(sb, to_f64(&b.f32())));
                let want = af.zip(&bf, r);
                let got = f(&t32(&a), &t32(&b)).unwrap();
                check_close(
                    &got,
                    &want,
                    1e-5,
                    2e-5,
                    &format!("{dev} {name} {sa:?} {sb:?}"),
                );
            }
        }
        // Scalars on either side.
        let a = R::new(&[3], vec![1.0, -2.0, 4.0]);
        check_close(
            &(2.0 - &t32(&a)).unwrap(),
            &a.map(|v| 2.0 - v),
            0.0,
            0.0,
            "rsub",
        );
        check_close(
            &(2.0 / &t32(&a)).unwrap(),
            &a.map(|v| 2.0 / v),
            1e-7,
            1e-7,
            "rdiv",
        );
        check_close(
            &t32(&a).rpow(2.0).unwrap(),
            &a.map(|v| 2f64.powf(v)),
            1e-6,
            1e-6,
            "rpow",
        );
        check_close(
            &t32(&a).pow(3i64).unwrap(),
            &a.map(|v| v.powi(3)),
            1e-6,
            1e-6,
            "pow 3",
        );
        check_close(
            &t32(&a).pow(-2i64).unwrap(),
            &a.map(|v| v.powi(-2)),
            1e-6,
            1e-6,
            "pow -2",
        );
    }
}

#[test]
fn pow_negative_bases() {
    for dev in DEVICES {
        let _d = on(dev);
        let base = t32(&R::new(&[6], vec![-2.0, -1.5, 0.0, 2.0, -2.0, 0.0]));
        let exp = t32(&R::new(&[6], vec![3.0, 2.0, 0.0, 0.5, 0.5, 2.0]));
        let got = get(&base.pow(&exp).unwrap());
        let want = [-8.0, 2.25, 1.0, 2f64.sqrt(), f64::NAN, 0.0];
        assert_close(&got, &want, 1e-5, 1e-5, &format!("{dev} pow"));
    }
}

#[test]
fn comparisons_where_and_logic() {
    for dev in DEVICES {
        let _d = on(dev);
        let a = t32(&R::new(&[4], vec![1.0, 2.0, 3.0, f64::NAN]));
        let b = t32(&R::new(&[4], vec![2.0, 2.0, 1.0, 1.0]));
        let bools = |t: Result<Tensor>| t.unwrap().to_vec::<bool>().unwrap();
        assert_eq!(bools(a.lt(&b)), [true, false, false, false], "{dev} lt");
        assert_eq!(bools(a.gt(&b)), [false, false, true, false], "{dev} gt");
        assert_eq!(
            bools(a.le(&b)),
            [true, true, false, true],
            "{dev} le (not gt)"
        );
        assert_eq!(
            bools(a.ge(&b)),
            [false, true, true, true],
            "{dev} ge (not lt)"
        );
        assert_eq!(bools(a.eq(&b)), [false, true, false, false], "{dev} eq");
        assert_eq!(bools(a.ne(&b)), [true, false, true, true], "{dev} ne");
        let c = a.lt(&b).unwrap();
        assert_eq!(
            get(&c.where_(&a, &b).unwrap())[..3],
            [1.0, 2.0, 1.0],
            "{dev} where"
        );
        assert_eq!(
            get(&c.where_(10.0, -1i64).unwrap()),
            [10.0, -1.0, -1.0, -1.0]
        );
        let m = a.masked_fill(&c, 0.0).unwrap();
        assert_eq!(get(&m)[..3], [0.0, 2.0, 3.0]);
        assert_eq!(bools(c.logical_not()), [false, true, true, true]);
        let (p, q) = (
            Tensor::from_slice(&[true, true, false, false], &[4]).unwrap(),
            Tensor::from_slice(&[true, false, true, false], &[4]).unwrap(),
        );
        assert_eq!(bools(p.bitwise_and(&q)), [true, false, false, false]);
        assert_eq!(bools(p.bitwise_or(&q)), [true, true, true, false]);
        assert_eq!(bools(p.xor(&q)), [false, true, true, false]);
        assert_eq!(bools(p.neg()), [false, false, true, true]);
    }
}

#[test]
fn integer_ops() {
    for dev in DEVICES {
        let _d = on(dev);
        let a = Tensor::from_slice(&[-7i32, 7, -7, 7, 0, 9], &[6]).unwrap();
        let b = Tensor::from_slice(&[2i32, 2, -2, -2, 3, 3], &[6]).unwrap();
        let i = |t: Result<Tensor>| t.unwrap().to_vec::<i32>().unwrap();
        assert_eq!(
            i(a.idiv(&b)),
            [-3, 3, 3, -3, 0, 3],
            "{dev} C-truncating idiv"
        );
        assert_eq!(
            get(&a.div(&b).unwrap()),
            [-3.5, 3.5, 3.5, -3.5, 0.0, 3.0],
            "{dev} true div"
        );
        assert_eq!(i(a.xor(&b)), [-7 ^ 2, 7 ^ 2, -7 ^ -2, 7 ^ -2, 3, 9 ^ 3]);
        assert_eq!(i(a.mul(&b)), [-14, 14, 14, -14, 0, 27]);
        assert_eq!(i(a.maximum(&b)), [2, 7, -2, 7, 3, 9]);
        assert_eq!(i(a.neg()), [7, -7, 7, -7, 0, -9]);
        assert_eq!(i(a.abs()), [7, 7, 7, 7, 0, 9]);
        assert_eq!(i(a.sign()), [-1, 1, -1, 1, 0, 1]);
        let u = Tensor::from_slice(&[250u8, 5, 128], &[3]).unwrap();
        let w = u.add(10i64).unwrap();
        assert_eq!(w.dtype(), dtypes::uint8);
        assert_eq!(w.to_vec::<u8>().unwrap(), [4, 15, 138], "{dev} uint8 wraps");
        let x = Tensor::from_slice(&[0x8000_0001u32, 3, 0xFFFF_FFFF], &[3]).unwrap();
        let got = x.lshift(4).unwrap().to_vec::<u32>().unwrap();
        assert_eq!(got, [0x10, 0x30, 0xFFFF_FFF0], "{dev} lshift wraps");
        let got = x.rshift(4).unwrap().to_vec::<u32>().unwrap();
        assert_eq!(got, [0x0800_0000, 0, 0x0FFF_FFFF], "{dev} rshift");
        let s = Tensor::from_slice(&[1i64 << 40, -(1i64 << 40)], &[2]).unwrap();
        let got = s.add(1i64).unwrap().to_vec::<i64>().unwrap();
        assert_eq!(got, [(1i64 << 40) + 1, -(1i64 << 40) + 1], "{dev} int64");
        let mixed = a.add(Tensor::from_slice(&[1u8; 6], &[6]).unwrap()).unwrap();
        assert_eq!(mixed.dtype(), dtypes::int32);
        assert_eq!(i(Ok(mixed)), [-6, 8, -6, 8, 1, 10]);
    }
}

#[test]
fn nan_and_inf() {
    for dev in DEVICES {
        let _d = on(dev);
        let inf = f64::INFINITY;
        let x = t32(&R::new(&[3], vec![inf, -inf, f64::NAN]));
        assert_close(
            &get(&x.exp().unwrap()),
            &[inf, 0.0, f64::NAN],
            0.0,
            0.0,
            "exp",
        );
        assert_close(
            &get(&x.add(1i64).unwrap()),
            &[inf, -inf, f64::NAN],
            0.0,
            0.0,
            "add",
        );
        assert_close(
            &get(&x.sigmoid().unwrap()),
            &[1.0, 0.0, f64::NAN],
            0.0,
            0.0,
            "sigmoid",
        );
        let y = t32(&R::new(&[4], vec![0.0, -1.0, -0.0, 4.0]));
        assert_close(
            &get(&y.log().unwrap()),
            &[-inf, f64::NAN, -inf, 4f64.ln()],
            0.0,
            1e-6,
            "log",
        );
        assert_close(
            &get(&y.sqrt().unwrap()),
            &[0.0, f64::NAN, 0.0, 2.0],
            0.0,
            1e-7,
            "sqrt",
        );
        assert_close(
            &get(&y.reciprocal().unwrap()),
            &[inf, -1.0, -inf, 0.25],
            0.0,
            0.0,
            "recip",
        );
        assert_close(
            &get(&x.sin().unwrap()),
            &[f64::NAN, f64::NAN, f64::NAN],
            0.0,
            0.0,
            "sin",
        );
        let s = t32(&R::new(&[3], vec![1.0, inf, 2.0]))
            .sum_axis(0, false)
            .unwrap();
        assert_eq!(s.item::<f32>().unwrap(), f32::INFINITY);
    }
}

/// Small non-negative integers survive a cast to every dtype and back.
#[test]
fn every_dtype_cast_round_trip() {
    for dev in DEVICES {
        let _d = on(dev);
        let src = Tensor::from_slice(&[0i32, 1, 2, 3, 100], &[5]).unwrap();
        for s in Scalar::ALL {
            let dt = DType::new(s);
            let back = src.cast(dt).unwrap().cast(dtypes::float32).unwrap();
            let want = if s == Scalar::Bool {
                vec![0.0, 1.0, 1.0, 1.0, 1.0]
            } else {
                vec![0.0, 1.0, 2.0, 3.0, 100.0]
            };
            assert_eq!(get(&back), want, "{dev} int32 -> {dt:?} -> float32");
        }
    }
}

#[test]
fn casts() {
    for dev in DEVICES {
        let _d = on(dev);
        let f = Tensor::from_slice(&[-2.7f32, -0.5, 0.0, 0.5, 2.7, 100.9], &[6]).unwrap();
        let to = |dt| f.cast(dt).unwrap();
        assert_eq!(
            to(dtypes::int32).to_vec::<i32>().unwrap(),
            [-2, 0, 0, 0, 2, 100]
        );
        assert_eq!(
            to(dtypes::int8).to_vec::<i8>().unwrap(),
            [-2, 0, 0, 0, 2, 100]
        );
        assert_eq!(
            to(dtypes::int64).to_vec::<i64>().unwrap(),
            [-2, 0, 0, 0, 2, 100]
        );
        assert_eq!(
            to(dtypes::bool).to_vec::<bool>().unwrap(),
            [true, true, false, true, true, true]
        );
        let hv: Vec<f16> = [-2.7f32, -0.5, 0.0, 0.5, 2.7, 100.9]
            .map(f16::from_f32)
            .to_vec();
        assert_eq!(
            to(dtypes::float16).to_vec::<f16>().unwrap(),
            hv,
            "{dev} f16 rounding"
        );
        let bv = to(dtypes::bfloat16).to_vec::<bf16>().unwrap();
        for (g, w) in bv.iter().zip([-2.7f32, -0.5, 0.0, 0.5, 2.7, 100.9]) {
            assert!(
                (g.to_f32() - w).abs() <= w.abs() / 128.0,
                "{dev} bf16 {g} vs {w}"
            );
        }
        let d = to(dtypes::float64).to_vec::<f64>().unwrap();
        assert_eq!(d[1], -0.5);
        let i = Tensor::from_slice(&[-3i32, 0, 5, 300], &[4]).unwrap();
        assert_eq!(
            i.cast(dtypes::uint8).unwrap().to_vec::<u8>().unwrap(),
            [253, 0, 5, 44]
        );
        assert_eq!(
            i.cast(dtypes::uint32).unwrap().to_vec::<u32>().unwrap(),
            [u32::MAX - 2, 0, 5, 300]
        );
        assert_eq!(
            i.cast(dtypes::float32).unwrap().to_vec::<f32>().unwrap(),
            [-3.0, 0.0, 5.0, 300.0]
        );
        let b = Tensor::from_slice(&[true, false], &[2]).unwrap();
        assert_eq!(
            b.cast(dtypes::int32).unwrap().to_vec::<i32>().unwrap(),
            [1, 0]
        );
        assert_eq!(
            b.cast(dtypes::float16).unwrap().to_vec::<f16>().unwrap(),
            [f16::ONE, f16::ZERO]
        );
        let big = Tensor::from_slice(&[4_000_000_000u32], &[1]).unwrap();
        assert_eq!(
            big.cast(dtypes::float64).unwrap().item::<f64>().unwrap(),
            4e9
        );
    }
}

#[test]
fn bitcasts() {
    for dev in DEVICES {
        let _d = on(dev);
        let f = Tensor::from_slice(&[1.0f32, -0.0, 2.5], &[3]).unwrap();
        let u = f.bitcast(dtypes::uint32).unwrap().to_vec::<u32>().unwrap();
        assert_eq!(u, [0x3f80_0000, 0x8000_0000, 0x4020_0000], "{dev}");
        let back = Tensor::from_slice(&u, &[3])
            .unwrap()
            .bitcast(dtypes::float32)
            .unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), [1.0, -0.0, 2.5]);
        let h = Tensor::from_slice(&[f16::from_f32(1.0)], &[1]).unwrap();
        assert_eq!(
            h.bitcast(dtypes::int16).unwrap().item::<i16>().unwrap(),
            0x3c00
        );
        let i = Tensor::from_slice(&[-1i64], &[1]).unwrap();
        assert_eq!(
            i.bitcast(dtypes::uint64).unwrap().item::<u64>().unwrap(),
            u64::MAX
        );
    }
}

/// `v` survives host -> device -> host, directly and through a kernel (cat pads and adds, then
/// the first half is taken).
fn rt<T: Element + PartialEq>(dev: &str, v: &[T]) {
    let t = Tensor::from_slice(v, &[v.len()]).unwrap();
    assert_eq!(t.to_vec::<T>().unwrap(), v, "{dev} {:?}", t.dtype());
    let c = t.cat(&[&t], 0).unwrap();
    let n = v.len() as isize;
    let f = c
        .getitem(&[rawgrad::Index::range(0, n)])
        .unwrap()
        .contiguous()
        .unwrap();
    assert_eq!(f.to_vec::<T>().unwrap(), v, "{dev} {:?} via cat", t.dtype());
}

#[test]
fn host_round_trips() {
    for dev in DEVICES {
        let _d = on(dev);
        rt(dev, &[true, false, true]);
        rt(dev, &[-1i8, 2, 127]);
        rt(dev, &[255u8, 0, 7]);
        rt(dev, &[-300i16, 5, 32767]);
        rt(dev, &[65535u16, 1, 2]);
        rt(dev, &[i32::MIN, 0, i32::MAX]);
        rt(dev, &[u32::MAX, 0, 1]);
        rt(dev, &[i64::MIN, 0, i64::MAX]);
        rt(dev, &[u64::MAX, 0, 1]);
        rt(dev, &[f16::from_f32(0.5), f16::MAX, f16::MIN_POSITIVE]);
        rt(dev, &[bf16::from_f32(0.5), bf16::from_f32(-3.0), bf16::ONE]);
        rt(dev, &[0.1f32, -2.0, f32::MAX]);
        rt(dev, &[0.1f64, -2.0, f64::MAX]);
        let s = Tensor::scalar(2.5).unwrap();
        assert_eq!(s.item::<f32>().unwrap(), 2.5);
        let one = Tensor::from_slice(&[7i32], &[1, 1]).unwrap();
        assert_eq!(one.item::<i32>().unwrap(), 7);
        assert_eq!(
            Tensor::full(&[2, 2], 3i64)
                .unwrap()
                .to_vec::<i32>()
                .unwrap(),
            [3; 4]
        );
    }
}
