//! The Tensor methods and defaults that came with nn: einsum against the numpy reference,
//! conv/pool windows larger than the input, one NaN and signed-zero semantics on every device,
//! setitem, in-place operators, multinomial, numpy(), `to`, and tinygrad's defaults.

use rawgrad::runtime::builtin::default_device;
use rawgrad::{dtypes, Axis, ConvArgs, Index as I, PoolArgs, Tensor, TensorData};

use super::values::*;
use super::{arr, check_case, err, f64s, on, DEVICES};

#[test]
fn einsum_matches_reference() {
    type Case<'a> = (&'a str, Vec<(Vec<usize>, usize)>, &'a [f64], Vec<&'a [f64]>);
    let cases: [Case; 4] = [
        (
            "ij,jk->ik",
            vec![(vec![3, 4], 38), (vec![4, 5], 39)],
            EINSUM_MM_OUT,
            vec![EINSUM_MM_G0, EINSUM_MM_G1],
        ),
        (
            "bij,bjk->bki",
            vec![(vec![2, 3, 4], 40), (vec![2, 4, 3], 41)],
            EINSUM_BMM_T_OUT,
            vec![EINSUM_BMM_T_G0, EINSUM_BMM_T_G1],
        ),
        (
            "i,i->",
            vec![(vec![5], 42), (vec![5], 43)],
            EINSUM_DOT_OUT,
            vec![EINSUM_DOT_G0, EINSUM_DOT_G1],
        ),
        (
            "ij,jk,k",
            vec![(vec![3, 2], 44), (vec![2, 4], 45), (vec![4], 46)],
            EINSUM_IMPLICIT_OUT,
            vec![EINSUM_IMPLICIT_G0, EINSUM_IMPLICIT_G1, EINSUM_IMPLICIT_G2],
        ),
    ];
    for (formula, inputs, out, grads) in cases {
        check_case(
            &format!("einsum {formula}"),
            &|| inputs.iter().map(|(s, seed)| arr(s, *seed)).collect(),
            &|x| Tensor::einsum(formula, &x.iter().collect::<Vec<_>>()),
            out,
            &grads,
        );
    }
    let _d = on("CLANG");
    let (a, b) = (arr(&[2, 3], 1), arr(&[4, 5], 2));
    assert!(err(Tensor::einsum("ij,jk->ik", &[&a, &b]))
        .contains("letter 'j' is 3 in one operand and 4"));
    assert!(err(Tensor::einsum("ij->ij", &[&a, &b])).contains("expected 1, got 2"));
    assert!(err(Tensor::einsum("ii->i", &[&arr(&[3, 3], 1)])).contains("repeats in operand"));
    assert!(err(Tensor::einsum("ij->iz", &[&a])).contains("output letter 'z'"));
    assert!(err(Tensor::einsum("ijk->i", &[&a])).contains("does not match shape (2, 3)"));
    let z = Tensor::einsum(
        "ij,jk->ik",
        &[&Tensor::zeros(&[0, 3]).unwrap(), &arr(&[3, 2], 1)],
    )
    .unwrap();
    assert_eq!(z.shape(), vec![0, 2], "zero-size operand");
    let i8s = Tensor::from_vec(vec![3i8, 4], &[2]).unwrap();
    let s = Tensor::einsum("i,i->", &[&i8s, &i8s]).unwrap();
    assert_eq!(
        (s.dtype(), s.to_f64_vec().unwrap()),
        (dtypes::int32, vec![25.0]),
        "sums in sum_acc_dtype"
    );
}

#[test]
fn windows_larger_than_the_input_give_zero_size_outputs() {
    let _d = on("CLANG");
    // tinygrad 0.9.1: Tensor.empty(2,16,2,2).conv2d(Tensor.empty(32,16,3,3)).shape == (2, 32, 0, 0)
    let x = Tensor::empty(&[2, 16, 2, 2]).unwrap();
    let c = x
        .conv2d(&Tensor::empty(&[32, 16, 3, 3]).unwrap(), None)
        .unwrap();
    assert_eq!(c.shape(), vec![2, 32, 0, 0]);
    assert_eq!(c.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    let w = Tensor::ones(&[4, 16, 3, 3]).unwrap().requires_grad_(true);
    let y = x.conv2d(&w, Some(&Tensor::ones(&[4]).unwrap())).unwrap();
    assert_eq!(y.shape(), vec![2, 4, 0, 0]);
    y.sum().unwrap().backward().unwrap();
    assert_eq!(
        f64s(&w.grad().unwrap()),
        vec![0.0; 4 * 16 * 9],
        "an empty output gives zero grads"
    );
    // 0.9.1's extent ceil((i - d*(k-1)) / s): stride 3 over 2 with a 3-window is 0 (fast path)
    let p = Tensor::empty(&[1, 1, 2, 2]).unwrap();
    assert_eq!(
        p.max_pool2d_with(&PoolArgs::default().kernel(3))
            .unwrap()
            .shape(),
        vec![1, 1, 0, 0]
    );
    assert_eq!(
        p.avg_pool2d_with(&PoolArgs::default().kernel(3).stride(1))
            .unwrap()
            .shape(),
        vec![1, 1, 0, 0]
    );
    assert_eq!(
        p.max_pool2d_with(&PoolArgs::default().kernel([1, 3]).stride(1))
            .unwrap()
            .shape(),
        vec![1, 1, 2, 0]
    );
    // a negative extent is an error (0.9.1 fails an assertion)
    let e = err(p.conv2d(&Tensor::empty(&[1, 1, 5, 5]).unwrap(), None));
    assert!(e.contains("_pool: window [5, 5] (stride [1, 1], dilation [1, 1]) of (1, 1, 2, 2) is larger than the input"), "{e}");
    let e = err(p.max_pool2d_with(&PoolArgs::default().kernel(2).dilation(3)));
    assert!(e.contains("is larger than the input"), "{e}");
    // zero-size inputs (beyond 0.9.1, which divides by zero)
    let z = Tensor::empty(&[1, 2, 0, 4]).unwrap();
    assert_eq!(
        z.conv2d(&Tensor::empty(&[3, 2, 1, 3]).unwrap(), None)
            .unwrap()
            .shape(),
        vec![1, 3, 0, 2]
    );
    assert!(
        err(p.max_pool2d_with(&PoolArgs::default().stride(0))).contains("stride must be positive")
    );
    let t = Tensor::empty(&[1, 2, 3, 3]).unwrap();
    let e = err(t.conv_transpose2d(&Tensor::empty(&[3, 2, 2, 2]).unwrap(), None));
    assert!(
        e.contains("conv_transpose2d: Input Tensor shape (1, 2, 3, 3) does not match"),
        "{e}"
    );
    assert_eq!(
        t.conv_transpose2d(&Tensor::empty(&[2, 5, 2, 2]).unwrap(), None)
            .unwrap()
            .shape(),
        vec![1, 5, 4, 4]
    );
    let g = t.conv_transpose2d_with(
        &Tensor::empty(&[2, 3, 3, 1]).unwrap(),
        None,
        &ConvArgs::default().groups(2).stride([2, 1]),
    );
    assert_eq!(g.unwrap().shape(), vec![1, 6, 7, 3]);
}

/// The devices this run can open: CLANG, INTERP, LLVM when libLLVM loads, and the default
/// device (the emulated GPU under `AMD=1 MOCKGPU=1` or `NV=1 MOCKGPU=1`).
fn every_device() -> Vec<String> {
    let mut devs: Vec<String> = DEVICES.iter().map(|d| d.to_string()).collect();
    if Tensor::from_slice_on(&[1f32], &[1], "LLVM")
        .and_then(|t| t.add(1.0)?.to_vec::<f32>())
        .is_ok()
    {
        devs.push("LLVM".into());
    } else {
        println!("LLVM skipped: the device does not open here");
    }
    if let Ok(d) = default_device() {
        if !devs.contains(&d) {
            devs.push(d);
        }
    }
    devs
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
        .collect()
}

#[test]
fn nan_and_signed_zero_are_the_same_on_every_device() {
    let xs = [f32::NAN, 1.0, -0.0, 0.0, -0.0, f32::NAN, 2.0, -1.0];
    let ys = [
        1.0,
        f32::NAN,
        0.0,
        -0.0,
        -0.0,
        f32::NAN,
        2.0,
        f32::NEG_INFINITY,
    ];
    // INTERP is the reference; these are its values, written out.
    let relu = [f32::NAN, 1.0, 0.0, 0.0, 0.0, f32::NAN, 2.0, 0.0];
    let maximum = [f32::NAN, 1.0, 0.0, 0.0, -0.0, f32::NAN, 2.0, -1.0];
    let row_max = [f32::NAN, 0.0, f32::NAN, 2.0];
    for dev in every_device() {
        let _d = on(&dev);
        let x = Tensor::from_slice(&xs, &[8]).unwrap();
        let y = Tensor::from_slice(&ys, &[8]).unwrap();
        assert_eq!(
            bits(&x.relu().unwrap().to_vec().unwrap()),
            bits(&relu),
            "relu on {dev}"
        );
        assert_eq!(
            bits(&x.maximum(&y).unwrap().to_vec().unwrap()),
            bits(&maximum),
            "maximum on {dev}"
        );
        let m = x.reshape(&[4, 2]).unwrap().max_axis(1, false).unwrap();
        assert_eq!(bits(&m.to_vec().unwrap()), bits(&row_max), "max on {dev}");
        let z = Tensor::from_slice(&[-0.0f32, 0.0, -0.0, -0.0], &[4]).unwrap();
        assert_eq!(
            bits(&[z.max().unwrap().item::<f32>().unwrap()]),
            bits(&[0.0]),
            "max of ±0 on {dev}"
        );
        let nz = Tensor::from_slice(&[-0.0f32, -0.0], &[2]).unwrap();
        assert_eq!(
            bits(&[nz.max().unwrap().item::<f32>().unwrap()]),
            bits(&[-0.0]),
            "max of -0 on {dev}"
        );
    }
}

#[test]
fn setitem_writes_slices_and_tensor_indices() {
    for dev in DEVICES {
        let _d = on(dev);
        let t = Tensor::arange(12)
            .unwrap()
            .reshape(&[3, 4])
            .unwrap()
            .contiguous()
            .unwrap()
            .realize()
            .unwrap();
        t.setitem(&[I::Int(1)], 0i64).unwrap();
        t.setitem(
            &[I::all(), I::Slice(Some(-1), None, None)],
            Tensor::from_vec(vec![7i32, 8, 9], &[3, 1]).unwrap(),
        )
        .unwrap();
        t.setitem(&[I::Int(0), I::Slice(None, None, Some(2))], 5.5)
            .unwrap();
        assert_eq!(
            t.to_vec::<i32>().unwrap(),
            [5, 1, 5, 7, 0, 0, 0, 8, 8, 9, 10, 9],
            "{dev}"
        );
        let idx = Tensor::from_vec(vec![2i32, 0, 2], &[3]).unwrap();
        let v = Tensor::from_vec(vec![-1i32, -2, -3], &[3]).unwrap();
        t.setitem(&[I::Tensor(idx.clone()), I::Int(1)], &v).unwrap();
        assert_eq!(
            t.to_vec::<i32>().unwrap(),
            [5, -2, 5, 7, 0, 0, 0, 8, 8, -3, 10, 9],
            "{dev}: the last write wins"
        );
        let f = Tensor::from_vec(vec![0f32; 6], &[2, 3]).unwrap();
        f.setitem(
            &[
                I::Ellipsis,
                I::Tensor(Tensor::from_vec(vec![-1i32], &[1]).unwrap()),
            ],
            1.0,
        )
        .unwrap();
        assert_eq!(
            f64s(&f),
            [0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
            "{dev}: negative tensor index"
        );
        let e = err(t.setitem(
            &[I::Tensor(Tensor::from_vec(vec![3i32], &[1]).unwrap())],
            0i64,
        ));
        assert!(
            e.contains("setitem: a tensor index is out of bounds for shape (3, 4)"),
            "{e}"
        );
        let e = err(t.setitem(&[I::Int(0)], Tensor::zeros(&[3]).unwrap()));
        assert!(
            e.contains("setitem: broadcast_to: cannot broadcast from shape=(3,) to shape=(4,)"),
            "{e}"
        );
        let g = Tensor::zeros(&[2]).unwrap().requires_grad_(true);
        assert!(err(g.setitem(&[I::Int(0)], 1.0))
            .contains("setitem with requires_grad is not supported"));
        let p = t.permute(&[1, 0]).unwrap();
        assert!(err(p.setitem(&[I::Int(0)], 1i64)).contains("target needs to be contiguous"));
        t.setitem(&[I::Slice(Some(3), None, None)], 1i64).unwrap();
        assert_eq!(t.numel(), 12, "an empty slice writes nothing");
    }
}

#[test]
fn in_place_operators_assign() {
    for dev in DEVICES {
        let _d = on(dev);
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])
            .unwrap()
            .realize()
            .unwrap();
        let same = t.clone();
        t.iadd(1i64)
            .unwrap()
            .imul(Tensor::from_vec(vec![2.0f32, 3.0, 4.0], &[3]).unwrap())
            .unwrap();
        t.isub(1.0)
            .unwrap()
            .itruediv(2.0)
            .unwrap()
            .ipow(2i64)
            .unwrap();
        assert_eq!(
            f64s(&same),
            [2.25, 16.0, 56.25],
            "{dev}: the same buffer is written"
        );
        let u = Tensor::from_vec(vec![1u32, 8], &[2])
            .unwrap()
            .realize()
            .unwrap();
        u.ilshift(2)
            .unwrap()
            .irshift(1)
            .unwrap()
            .ixor(3i64)
            .unwrap();
        assert_eq!(u.to_vec::<u32>().unwrap(), [1, 19]);
        // as in 0.9.1, `m @= x` reads m through a broadcast view, which an assign refuses
        let m = Tensor::eye(2)
            .unwrap()
            .contiguous()
            .unwrap()
            .realize()
            .unwrap();
        m.imatmul(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap())
            .unwrap();
        let e = err(m.realize());
        assert!(
            e.contains("self operand of augmented assign must be contiguous"),
            "{e}"
        );
        let i = Tensor::from_vec(vec![1i32, 2], &[2])
            .unwrap()
            .realize()
            .unwrap();
        assert!(
            err(i.itruediv(2i64).cloned()).contains("assign dtype mismatch"),
            "int /= gives float"
        );
    }
}

#[test]
fn multinomial_draws_by_weight() {
    let _d = on("CLANG");
    Tensor::manual_seed(3).unwrap();
    let w = Tensor::from_vec(vec![0.0f32, 1.0, 0.0, 0.0], &[4]).unwrap();
    let s = w.multinomial(5, true).unwrap();
    assert_eq!((s.shape(), s.dtype()), (vec![5], dtypes::int32));
    assert_eq!(s.to_vec::<i32>().unwrap(), [1; 5]);
    let w2 = Tensor::from_vec(vec![1.0f32, 3.0, 0.0, 0.0, 0.0, 1.0], &[2, 3]).unwrap();
    let s2 = w2.multinomial(4000, true).unwrap().to_vec::<i32>().unwrap();
    let row0 = &s2[..4000];
    let ones = row0.iter().filter(|&&i| i == 1).count() as f64 / 4000.0;
    assert!((ones - 0.75).abs() < 0.04, "P(1) = {ones}");
    assert!(row0.iter().all(|&i| i < 2) && s2[4000..].iter().all(|&i| i == 2));
    assert!(err(w.multinomial(2, false)).contains("no replacement only supports num_samples = 1"));
    assert!(
        err(Tensor::zeros(&[1, 1, 2]).unwrap().multinomial(1, true)).contains("must be 1 or 2 dim")
    );
}

#[test]
fn numpy_reads_every_dtype_and_to_moves() {
    for dev in DEVICES {
        let _d = on(dev);
        let t = Tensor::from_vec(vec![-3i8, 4], &[2]).unwrap();
        assert_eq!(t.numpy().unwrap().data, TensorData::I8(vec![-3, 4]));
        assert_eq!(t.to_f64_vec().unwrap(), [-3.0, 4.0]);
        let h = Tensor::from_vec(vec![half::f16::from_f32(0.5)], &[1, 1]).unwrap();
        let n = h.numpy().unwrap();
        assert_eq!((n.shape, n.data.to_f64()), (vec![1, 1], vec![0.5]));
        let b = Tensor::from_vec(vec![true, false], &[2])
            .unwrap()
            .numpy()
            .unwrap();
        assert_eq!(b.data, TensorData::Bool(vec![true, false]));
        let other = if dev == "CLANG" { "INTERP" } else { "CLANG" };
        let x = arr(&[2, 3], 5).requires_grad_(true);
        let y = x.to(other).unwrap();
        assert_eq!((y.device(), f64s(&y)), (other.to_string(), f64s(&x)));
        assert!(
            x.to(dev).unwrap().ptr_eq(&x),
            "to the same device is the same tensor"
        );
        y.mul(2.0).unwrap().sum().unwrap().backward().unwrap();
        // tinygrad's `to` is not a Function: the moved leaf gets the gradient, not the source
        assert_eq!(f64s(&y.grad().unwrap()), [2.0; 6]);
        assert!(x.grad().is_none());
    }
}

#[test]
fn defaults_axes_and_scalar_operators() {
    for dev in DEVICES {
        let _d = on(dev);
        let x = Tensor::arange(6).unwrap().reshape(&[2, 3]).unwrap();
        assert_eq!(
            (x.dtype(), x.to_vec::<i32>().unwrap()),
            (dtypes::int32, vec![0, 1, 2, 3, 4, 5])
        );
        assert_eq!(
            Tensor::arange(2..5).unwrap().to_vec::<i32>().unwrap(),
            [2, 3, 4]
        );
        assert_eq!(f64s(&Tensor::arange(0.0..1.0).unwrap()), [0.0]);
        assert_eq!(x.sum().unwrap().item::<i32>().unwrap(), 15);
        assert_eq!(x.max().unwrap().item::<i32>().unwrap(), 5);
        assert_eq!(x.min().unwrap().item::<i32>().unwrap(), 0);
        let f = x.float().unwrap();
        assert_eq!(f.mean().unwrap().item::<f32>().unwrap(), 2.5);
        assert!(
            (f.var().unwrap().item::<f32>().unwrap() - 3.5).abs() < 1e-6,
            "correction 1"
        );
        assert!((f.std().unwrap().item::<f32>().unwrap() - 3.5f32.sqrt()).abs() < 1e-6);
        let s0 = f64s(&f.std_axis(-1, false, 0).unwrap());
        assert!(
            s0.iter().all(|v| (v - (2.0f64 / 3.0).sqrt()).abs() < 1e-6),
            "{s0:?}"
        );
        assert_eq!(x.argmax().unwrap().item::<i32>().unwrap(), 5);
        assert_eq!(
            x.argmax_axis(-2, false).unwrap().to_vec::<i32>().unwrap(),
            [1, 1, 1]
        );
        assert_eq!(
            x.argmin_axis(Axis::All, true).unwrap().shape(),
            Vec::<usize>::new()
        );
        assert_eq!(
            x.cumsum(-1).unwrap().to_vec::<i32>().unwrap(),
            [0, 1, 3, 3, 7, 12]
        );
        assert_eq!(
            x.cumsum(Axis::All).unwrap().to_vec::<i32>().unwrap(),
            [0, 1, 2, 3, 5, 7],
            "axis 0"
        );
        assert!(err(x.argmax_axis([0, 1], false)).contains("argmax: takes one axis, got [0, 1]"));
        assert!(err(x.cumsum(2)).contains("dim=2 out of range"));
        assert_eq!(x.logsumexp().unwrap().shape(), Vec::<usize>::new());
        assert_eq!(
            (&x + 1).unwrap().to_vec::<i32>().unwrap(),
            [1, 2, 3, 4, 5, 6],
            "int scalar keeps int32"
        );
        assert_eq!((2 * &x).unwrap().dtype(), dtypes::int32);
        assert_eq!(
            (10 - x.clone()).unwrap().to_vec::<i32>().unwrap(),
            [10, 9, 8, 7, 6, 5]
        );
        assert_eq!(
            f64s(&(&x / 2).unwrap()),
            [0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
            "true division"
        );
        assert_eq!(f64s(&(&f * 0.5).unwrap()), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
        let e = Tensor::zeros(&[0, 3]).unwrap();
        assert_eq!(
            e.sum().unwrap().item::<f32>().unwrap(),
            0.0,
            "zero-size sum"
        );
        assert_eq!(e.sum_axis(0, false).unwrap().shape(), vec![3]);
        assert_eq!(
            e.max_pool2d_with(&PoolArgs::default().kernel([1, 1]))
                .unwrap()
                .shape(),
            vec![0, 3]
        );
    }
}
