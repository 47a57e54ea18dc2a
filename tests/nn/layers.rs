//! The nn layers: forward values and gradients against the numpy reference, 0.9.1's parameter
//! shapes and initial values, state-dict names, training-mode statistics, and errors.

use rawgrad::nn::{
    get_parameters, get_state_dict, BatchNorm, BatchNorm1d, BatchNorm2d, Conv2d, ConvTranspose2d,
    Embedding, Forward, GroupNorm, InstanceNorm, LayerNorm, LayerNorm2d, Linear,
};
use rawgrad::{ConvArgs, Tensor};

use super::values::*;
use super::{arr, arr_plus, check_case, err, f64s, on};

#[test]
fn linear_matches_reference() {
    check_case(
        "Linear",
        &|| vec![arr(&[4, 3], 1), arr(&[2, 3], 2), arr(&[2], 3)],
        &|x| {
            let mut l = Linear::new(3, 2, true)?;
            (l.weight, l.bias) = (x[1].clone(), Some(x[2].clone()));
            l.forward(&x[0])
        },
        LINEAR_OUT,
        &[LINEAR_G0, LINEAR_G1, LINEAR_G2],
    );
}

#[test]
fn conv_layers_match_reference() {
    check_case(
        "Conv2d stride 2 padding 1",
        &|| vec![arr(&[2, 2, 5, 4], 4), arr(&[3, 2, 2, 3], 5), arr(&[3], 6)],
        &|x| {
            let args = ConvArgs::default().stride(2).padding(1);
            let mut c = Conv2d::new_with(2, 3, [2, 3], args, true)?;
            (c.weight, c.bias) = (x[1].clone(), Some(x[2].clone()));
            c.forward(&x[0])
        },
        CONV2D_OUT,
        &[CONV2D_G0, CONV2D_G1, CONV2D_G2],
    );
    check_case(
        "Conv2d groups 2 dilation 2",
        &|| vec![arr(&[1, 4, 7, 6], 7), arr(&[2, 2, 3, 3], 8)],
        &|x| {
            let args = ConvArgs::default().groups(2).dilation(2);
            let mut c = Conv2d::new_with(4, 2, 3, args, false)?;
            c.weight = x[1].clone();
            c.forward(&x[0])
        },
        CONV2D_GROUPS_OUT,
        &[CONV2D_GROUPS_G0, CONV2D_GROUPS_G1],
    );
    check_case(
        "Conv1d",
        &|| vec![arr(&[2, 3, 7], 9), arr(&[4, 3, 3], 10), arr(&[4], 11)],
        &|x| {
            let args = ConvArgs::default().stride(2).padding(1);
            let mut c = Conv2d::conv1d(3, 4, 3, args, true)?;
            (c.weight, c.bias) = (x[1].clone(), Some(x[2].clone()));
            c.forward(&x[0])
        },
        CONV1D_OUT,
        &[CONV1D_G0, CONV1D_G1, CONV1D_G2],
    );
    check_case(
        "ConvTranspose2d stride 2 padding 1 output_padding 1",
        &|| {
            vec![
                arr(&[1, 2, 3, 4], 12),
                arr(&[2, 3, 3, 3], 13),
                arr(&[3], 14),
            ]
        },
        &|x| {
            let args = ConvArgs::default().stride(2).padding(1).output_padding(1);
            let mut c = ConvTranspose2d::new_with(2, 3, 3, args, true)?;
            (c.weight, c.bias) = (x[1].clone(), Some(x[2].clone()));
            c.forward(&x[0])
        },
        CONVT2D_OUT,
        &[CONVT2D_G0, CONVT2D_G1, CONVT2D_G2],
    );
    check_case(
        "ConvTranspose1d groups 2 dilation 2",
        &|| vec![arr(&[2, 4, 3], 15), arr(&[4, 1, 2], 16)],
        &|x| {
            let args = ConvArgs::default().groups(2).dilation(2);
            let mut c = ConvTranspose2d::conv_transpose1d(4, 2, 2, args, false)?;
            c.weight = x[1].clone();
            c.forward(&x[0])
        },
        CONVT1D_GROUPS_OUT,
        &[CONVT1D_GROUPS_G0, CONVT1D_GROUPS_G1],
    );
}

#[test]
fn norms_match_reference() {
    let _t = Tensor::train(true);
    check_case(
        "BatchNorm2d (training)",
        &|| {
            vec![
                arr(&[3, 2, 2, 3], 17),
                arr_plus(&[2], 18, 1.5),
                arr(&[2], 19),
            ]
        },
        &|x| {
            let mut bn = BatchNorm2d::new(2)?;
            (bn.weight, bn.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            let y = bn.forward(&x[0])?;
            let rm = f64s(&bn.running_mean);
            super::tensor_common::reference::assert_close(
                &rm,
                BATCHNORM2D_RUNNING_MEAN,
                1e-6,
                1e-5,
                "running_mean",
            );
            let rv = f64s(&bn.running_var);
            super::tensor_common::reference::assert_close(
                &rv,
                BATCHNORM2D_RUNNING_VAR,
                1e-6,
                1e-5,
                "running_var",
            );
            assert_eq!(f64s(&bn.num_batches_tracked), [1.0]);
            Ok(y)
        },
        BATCHNORM2D_OUT,
        &[BATCHNORM2D_G0, BATCHNORM2D_G1, BATCHNORM2D_G2],
    );
    check_case(
        "BatchNorm1d (training)",
        &|| vec![arr(&[5, 3], 22), arr_plus(&[3], 23, 1.25), arr(&[3], 24)],
        &|x| {
            let mut bn = BatchNorm1d::new(3)?;
            (bn.weight, bn.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            bn.forward(&x[0])
        },
        BATCHNORM1D_OUT,
        &[BATCHNORM1D_G0, BATCHNORM1D_G1, BATCHNORM1D_G2],
    );
    check_case(
        "LayerNorm",
        &|| vec![arr(&[2, 2, 3], 25), arr_plus(&[3], 26, 1.5), arr(&[3], 27)],
        &|x| {
            let mut ln = LayerNorm::new(&[3])?;
            (ln.weight, ln.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            ln.forward(&x[0])
        },
        LAYERNORM_OUT,
        &[LAYERNORM_G0, LAYERNORM_G1, LAYERNORM_G2],
    );
    check_case(
        "LayerNorm2d",
        &|| {
            vec![
                arr(&[1, 3, 2, 2], 28),
                arr_plus(&[3], 29, 1.5),
                arr(&[3], 30),
            ]
        },
        &|x| {
            let mut ln = LayerNorm2d::new(3)?;
            (ln.0.weight, ln.0.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            ln.forward(&x[0])
        },
        LAYERNORM2D_OUT,
        &[LAYERNORM2D_G0, LAYERNORM2D_G1, LAYERNORM2D_G2],
    );
    check_case(
        "GroupNorm",
        &|| vec![arr(&[2, 4, 3], 31), arr_plus(&[4], 32, 1.5), arr(&[4], 33)],
        &|x| {
            let mut gn = GroupNorm::new(2, 4)?;
            (gn.weight, gn.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            gn.forward(&x[0])
        },
        GROUPNORM_OUT,
        &[GROUPNORM_G0, GROUPNORM_G1, GROUPNORM_G2],
    );
    check_case(
        "InstanceNorm",
        &|| vec![arr(&[2, 3, 4], 34), arr_plus(&[3], 35, 1.5), arr(&[3], 36)],
        &|x| {
            let mut n = InstanceNorm::new(3)?;
            (n.weight, n.bias) = (Some(x[1].clone()), Some(x[2].clone()));
            n.forward(&x[0])
        },
        INSTANCENORM_OUT,
        &[INSTANCENORM_G0, INSTANCENORM_G1, INSTANCENORM_G2],
    );
}

#[test]
fn batchnorm_eval_uses_running_stats() {
    for dev in super::DEVICES {
        let _d = on(dev);
        let mut bn = BatchNorm::new(2).unwrap();
        (bn.weight, bn.bias) = (Some(arr_plus(&[2], 18, 1.5)), Some(arr(&[2], 19)));
        bn.running_mean = arr(&[2], 20);
        bn.running_var = arr_plus(&[2], 21, 2.0);
        let y = bn.forward(&arr(&[3, 2, 2, 3], 17)).unwrap();
        super::tensor_common::reference::assert_close(
            &f64s(&y),
            BATCHNORM2D_EVAL,
            1e-5,
            1e-5,
            &format!("BatchNorm eval on {dev}"),
        );
    }
}

#[test]
fn embedding_matches_reference() {
    check_case(
        "Embedding",
        &|| vec![arr(&[5, 3], 37)],
        &|x| {
            let mut e = Embedding::new(5, 3)?;
            e.weight = x[0].clone();
            e.forward(&Tensor::from_vec(vec![1i32, 4, 0, 2, 2, 3], &[2, 3])?)
        },
        EMBEDDING_OUT,
        &[EMBEDDING_G0],
    );
    let _d = on("CLANG");
    let e = Embedding::new(5, 3).unwrap();
    let z = e.forward(&Tensor::from_vec(Vec::<i32>::new(), &[0, 2]).unwrap());
    assert_eq!(z.unwrap().shape(), vec![0, 2, 3], "zero-size indices");
    let one = e
        .forward(&Tensor::from_vec(vec![4i32], &[1]).unwrap())
        .unwrap();
    assert_eq!(one.shape(), vec![1, 3], "one-dim indices (beyond 0.9.1)");
    assert_eq!(f64s(&one), f64s(&e.weight)[12..15]);
}

/// Every value of `t` lies in `[-bound, bound]`, and they are not all equal.
fn within(t: &Tensor, bound: f64) {
    let v = f64s(t);
    assert!(v.iter().all(|x| x.abs() <= bound), "{v:?} beyond {bound}");
    assert!(v.iter().any(|&x| x != v[0]), "{v:?} constant");
}

#[test]
fn parameter_shapes_and_initialisation_follow_0_9_1() {
    let _d = on("CLANG");
    Tensor::manual_seed(7).unwrap();
    let l = Linear::new(6, 4, true).unwrap();
    assert_eq!(l.weight.shape(), vec![4, 6]);
    assert_eq!(l.bias.as_ref().unwrap().shape(), vec![4]);
    // kaiming_uniform(a=sqrt 5): bound sqrt(3) * sqrt(2 / 6) / sqrt(fan_in) = 1/sqrt(fan_in)
    within(&l.weight, 1.0 / 6f64.sqrt());
    within(l.bias.as_ref().unwrap(), 1.0 / 6f64.sqrt());
    let c = Conv2d::new_with(4, 6, [3, 2], ConvArgs::default().groups(2), true).unwrap();
    assert_eq!(c.weight.shape(), vec![6, 2, 3, 2]);
    within(&c.weight, 1.0 / 12f64.sqrt());
    within(c.bias.as_ref().unwrap(), 1.0 / 12f64.sqrt());
    let c1 = Conv2d::conv1d(3, 5, 4, ConvArgs::default(), false).unwrap();
    assert_eq!(
        (c1.weight.shape(), c1.bias.is_none()),
        (vec![5, 3, 4], true)
    );
    let t = ConvTranspose2d::new_with(4, 6, 3, ConvArgs::default().groups(2), true).unwrap();
    assert_eq!(t.weight.shape(), vec![4, 3, 3, 3]);
    within(t.bias.as_ref().unwrap(), 1.0 / 27f64.sqrt());
    let e = Embedding::new(10, 4).unwrap();
    assert_eq!(e.weight.shape(), vec![10, 4]);
    within(&e.weight, (6.0f64 / 14.0).sqrt());
    let bn = BatchNorm::new(3).unwrap();
    assert_eq!(f64s(bn.weight.as_ref().unwrap()), [1.0; 3]);
    assert_eq!(f64s(bn.bias.as_ref().unwrap()), [0.0; 3]);
    assert_eq!(f64s(&bn.running_var), [1.0; 3]);
    assert_eq!(f64s(&bn.num_batches_tracked), [0.0]);
    assert_eq!(bn.running_mean.requires_grad(), Some(false));
    let ln = LayerNorm::new(&[2, 3]).unwrap();
    assert_eq!(ln.weight.as_ref().unwrap().shape(), vec![2, 3]);
    assert!(GroupNorm::new_with(2, 4, 1e-5, false)
        .unwrap()
        .weight
        .is_none());
}

struct Net {
    l1: Linear,
    convs: Vec<Conv2d>,
    bn: BatchNorm,
    extra: Option<Tensor>,
}
rawgrad::module!(Net {
    l1,
    convs,
    bn,
    extra
});

#[test]
fn state_dict_names_are_tinygrads_keys() {
    let _d = on("CLANG");
    let net = Net {
        l1: Linear::new(2, 3, true).unwrap(),
        convs: vec![
            Conv2d::new(1, 2, 3).unwrap(),
            Conv2d::new_with(2, 2, 1, ConvArgs::default(), false).unwrap(),
        ],
        bn: BatchNorm::new(2).unwrap(),
        extra: None,
    };
    let keys: Vec<String> = get_state_dict(&net).into_keys().collect();
    let want = [
        "l1.weight",
        "l1.bias",
        "convs.0.weight",
        "convs.0.bias",
        "convs.1.weight",
        "bn.weight",
        "bn.bias",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ];
    assert_eq!(keys, want);
    assert_eq!(get_parameters(&net).len(), 10);
    let pair = (
        Linear::new(1, 1, false).unwrap(),
        vec![Tensor::zeros(&[1]).unwrap()],
    );
    let keys: Vec<String> = get_state_dict(&pair).into_keys().collect();
    assert_eq!(keys, ["0.weight", "1.0"]);
}

#[test]
fn layer_errors_name_the_problem() {
    let _d = on("CLANG");
    let e = err(Conv2d::new_with(
        3,
        4,
        3,
        ConvArgs::default().groups(2),
        true,
    ));
    assert!(
        e.contains("in_channels 3 and out_channels 4 must divide into 2 groups"),
        "{e}"
    );
    assert!(err(Conv2d::new(3, 4, 0)).contains("kernel_size must be positive"));
    let ln = LayerNorm::new(&[3]).unwrap();
    let e = err(ln.forward(&Tensor::zeros(&[2, 4]).unwrap()));
    assert!(
        e.contains("LayerNorm: last dimensions of (2, 4) must match (3,)"),
        "{e}"
    );
    assert!(err(GroupNorm::new(3, 4)).contains("4 channels do not split into 3 groups"));
    let _t = Tensor::train(true);
    let bn = BatchNorm::new(2).unwrap();
    let e = err(bn.forward(&Tensor::zeros(&[1, 2]).unwrap()));
    assert!(e.contains("more than one value per channel"), "{e}");
    let e = err(bn.forward(&Tensor::zeros(&[4]).unwrap()));
    assert!(e.contains("needs a batch and a channel dim"), "{e}");
    let l = Linear::new(3, 2, true).unwrap();
    let e = err(l.forward(&Tensor::zeros(&[2, 4]).unwrap()));
    assert!(e.contains("not aligned"), "{e}");
}

#[test]
fn sequential_chains_layers_and_closures() {
    for dev in super::DEVICES {
        let _d = on(dev);
        let mut l = Linear::new(3, 2, true).unwrap();
        (l.weight, l.bias) = (arr(&[2, 3], 2), Some(arr(&[2], 3)));
        let relu = |x: &Tensor| x.relu();
        let y = arr(&[4, 3], 1).sequential(&[&l, &relu]).unwrap();
        let want: Vec<f64> = LINEAR_OUT.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(f64s(&y), want, "{dev}");
    }
}
