//! The optimizers: state after three steps against the numpy reference (tinygrad's update rules
//! written out in tools/nn-reference/gen.py), the kernel count of one step against tinygrad
//! 0.9.1, groups, and errors.
//!
//! Kernel counts of one step on `Linear(768, 3072)` with `x = empty(4, 64, 768)` and
//! `layer(x).relu().sum().backward()` (test_schedule.py's `test_adam_step_fusion` setup), as
//! tinygrad 0.9.1's own scheduler counts them (`create_schedule` on `opt.schedule_step()`,
//! LoadOps filtered, run with tinygrad 0.9.1 from PyPI):
//! - parameters already realized (any step after the first): Adam 9, AdamW 9, SGD 5,
//!   SGD(momentum 0.9, nesterov, weight decay 0.1) 7, LAMB 17;
//! - fresh parameters (0.9.1's `uniform` = a CUSTOM load times a scale plus an offset): Adam 11
//!   (the number test_schedule.py states), SGD 7, SGD nesterov 9, AdamW 11, LAMB 19, LARS 15.
//!
//! rawgrad's `rand` is threefry in tensor ops, not a CUSTOM load, so the fresh case rebuilds
//! 0.9.1's graph with an EMPTY load (also a LoadOps) in place of CUSTOM.

use rawgrad::nn::optim::{
    adam, adamw, sgd, LambArgs, LarsArgs, Optimizer, OptimizerGroup, LAMB, LARS,
};
use rawgrad::nn::{get_parameters, Forward, Linear};
use rawgrad::Tensor;

use super::tensor_common::reference::assert_close;
use super::tensor_common::{check, prerealize};
use super::values::*;
use super::{arr, err, f64s, on, DEVICES};

/// A Linear(768, 3072) whose parameters are realized (`fresh`: 0.9.1's unrealized uniform).
fn big_linear(fresh: bool) -> Linear {
    let mut l = Linear::new(1, 1, true).unwrap();
    let param = |shape: &[usize], bound: f64| {
        let t = Tensor::empty(shape).unwrap();
        if fresh {
            prerealize(&t);
            t.rmul(2.0 * bound).unwrap().add(-bound).unwrap()
        } else {
            prerealize(&t);
            t
        }
    };
    l.weight = param(&[3072, 768], 1.0 / 768f64.sqrt());
    l.bias = Some(param(&[3072], 1.0 / 768f64.sqrt()));
    l
}

fn step_kernels(make: &dyn Fn(&[Tensor]) -> Box<dyn Optimizer>, fresh: bool) -> usize {
    let _d = on("CLANG");
    let _t = Tensor::train(true);
    let x = Tensor::empty(&[4, 64, 768]).unwrap();
    prerealize(&x);
    let layer = big_linear(fresh);
    let opt = make(&get_parameters(&layer));
    layer
        .forward(&x)
        .unwrap()
        .relu()
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let outs = opt.schedule_step().unwrap();
    let refs: Vec<&Tensor> = outs.iter().collect();
    check(&refs, &[], true).len()
}

#[test]
fn one_step_has_0_9_1s_kernel_count() {
    type Make = Box<dyn Fn(&[Tensor]) -> Box<dyn Optimizer>>;
    let cases: Vec<(&str, Make, usize, usize)> = vec![
        (
            "Adam",
            Box::new(|p| Box::new(adam(p, 1e-4).unwrap())),
            9,
            11,
        ),
        (
            "AdamW",
            Box::new(|p| Box::new(adamw(p, 1e-4).unwrap())),
            9,
            11,
        ),
        ("SGD", Box::new(|p| Box::new(sgd(p, 1e-3).unwrap())), 5, 7),
        (
            "SGD nesterov",
            Box::new(|p| {
                let a = LarsArgs::sgd(1e-3)
                    .momentum(0.9)
                    .nesterov(true)
                    .weight_decay(0.1);
                Box::new(LARS::new(p, a).unwrap())
            }),
            7,
            9,
        ),
        (
            "LAMB",
            Box::new(|p| Box::new(LAMB::new(p, LambArgs::default()).unwrap())),
            17,
            19,
        ),
    ];
    for (name, make, realized, fresh) in &cases {
        assert_eq!(
            step_kernels(make.as_ref(), false),
            *realized,
            "{name}, realized parameters"
        );
        assert_eq!(
            step_kernels(make.as_ref(), true),
            *fresh,
            "{name}, fresh parameters"
        );
    }
    let lars = |p: &[Tensor]| -> Box<dyn Optimizer> {
        Box::new(LARS::new(p, LarsArgs::default()).unwrap())
    };
    assert_eq!(step_kernels(&lars, true), 15, "LARS, fresh parameters");
}

/// Three steps of `opt` on `w` with the loss `sum(a*w + c*w*w)`.
fn run_steps(w: &Tensor, opt: &dyn Optimizer) {
    let a = arr(&[2, 3], 48);
    let c = arr(&[2, 3], 49).mul(0.5).unwrap().add(0.75).unwrap();
    let _t = Tensor::train(true);
    for _ in 0..3 {
        opt.zero_grad();
        let loss = a
            .mul(w)
            .unwrap()
            .add(c.mul(w).unwrap().mul(w).unwrap())
            .unwrap()
            .sum()
            .unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
}

#[test]
fn lars_and_sgd_states_match_reference() {
    let cases: [(&str, LarsArgs, &[f64], &[f64]); 4] = [
        ("SGD", LarsArgs::sgd(0.1), OPT_SGD_W, OPT_SGD_B),
        (
            "SGD momentum wd",
            LarsArgs::sgd(0.1).momentum(0.9).weight_decay(0.1),
            OPT_SGD_MOMENTUM_WD_W,
            OPT_SGD_MOMENTUM_WD_B,
        ),
        (
            "SGD nesterov",
            LarsArgs::sgd(0.1)
                .momentum(0.9)
                .weight_decay(0.1)
                .nesterov(true),
            OPT_SGD_NESTEROV_W,
            OPT_SGD_NESTEROV_B,
        ),
        (
            "LARS",
            LarsArgs {
                lr: 0.1,
                ..LarsArgs::default()
            },
            OPT_LARS_W,
            OPT_LARS_B,
        ),
    ];
    for dev in DEVICES {
        let _d = on(dev);
        for (name, args, want_w, want_b) in &cases {
            let w = arr(&[2, 3], 47).realize().unwrap();
            let opt = LARS::new(std::slice::from_ref(&w), args.clone()).unwrap();
            run_steps(&w, &opt);
            assert_close(&f64s(&w), want_w, 1e-6, 1e-5, &format!("{name} w on {dev}"));
            if args.momentum != 0.0 {
                assert_close(
                    &f64s(&opt.b[0]),
                    want_b,
                    1e-6,
                    1e-5,
                    &format!("{name} b on {dev}"),
                );
            } else {
                assert!(opt.b.is_empty());
            }
        }
    }
}

#[test]
fn lamb_and_adam_states_match_reference() {
    let cases: [(&str, LambArgs, [&[f64]; 4]); 3] = [
        (
            "Adam",
            LambArgs::adam(0.01),
            [OPT_ADAM_W, OPT_ADAM_M, OPT_ADAM_V, OPT_ADAM_BT],
        ),
        (
            "AdamW",
            LambArgs::adamw(0.01, 0.01),
            [OPT_ADAMW_W, OPT_ADAMW_M, OPT_ADAMW_V, OPT_ADAMW_BT],
        ),
        (
            "LAMB",
            LambArgs {
                lr: 0.01,
                ..LambArgs::default()
            },
            [OPT_LAMB_W, OPT_LAMB_M, OPT_LAMB_V, OPT_LAMB_BT],
        ),
    ];
    for dev in DEVICES {
        let _d = on(dev);
        for (name, args, [ww, wm, wv, wbt]) in &cases {
            let w = arr(&[2, 3], 47).realize().unwrap();
            let opt = LAMB::new(std::slice::from_ref(&w), args.clone()).unwrap();
            run_steps(&w, &opt);
            assert_close(&f64s(&w), ww, 1e-6, 1e-5, &format!("{name} w on {dev}"));
            assert_close(
                &f64s(&opt.m[0]),
                wm,
                1e-6,
                1e-5,
                &format!("{name} m on {dev}"),
            );
            assert_close(
                &f64s(&opt.v[0]),
                wv,
                1e-7,
                1e-5,
                &format!("{name} v on {dev}"),
            );
            let bt = [f64s(&opt.b1_t)[0], f64s(&opt.b2_t)[0]];
            assert_close(&bt, wbt, 1e-7, 1e-6, &format!("{name} b1_t, b2_t on {dev}"));
        }
    }
}

#[test]
fn group_steps_every_optimizer_and_errors_are_named() {
    let _d = on("CLANG");
    let (w1, w2) = (
        arr(&[2, 3], 47).realize().unwrap(),
        arr(&[2, 3], 47).realize().unwrap(),
    );
    let group = OptimizerGroup::new(vec![
        Box::new(LARS::new(std::slice::from_ref(&w1), LarsArgs::sgd(0.1)).unwrap()),
        Box::new(LAMB::new(std::slice::from_ref(&w2), LambArgs::adam(0.01)).unwrap()),
    ]);
    assert_eq!(group.params().len(), 2);
    let a = arr(&[2, 3], 48);
    let c = arr(&[2, 3], 49).mul(0.5).unwrap().add(0.75).unwrap();
    {
        let _t = Tensor::train(true);
        for _ in 0..3 {
            group.zero_grad();
            let f = |w: &Tensor| {
                a.mul(w)
                    .unwrap()
                    .add(c.mul(w).unwrap().mul(w).unwrap())
                    .unwrap()
                    .sum()
                    .unwrap()
            };
            f(&w1).add(f(&w2)).unwrap().backward().unwrap();
            group.step().unwrap();
        }
    }
    assert_close(&f64s(&w1), OPT_SGD_W, 1e-6, 1e-5, "group: the SGD member");
    assert_close(&f64s(&w2), OPT_ADAM_W, 1e-6, 1e-5, "group: the Adam member");
    let e = err(sgd(&[], 0.1).map(|_| ()));
    assert!(e.contains("optimizer must have at least one param"), "{e}");
    let frozen = Tensor::zeros(&[2]).unwrap().requires_grad_(false);
    assert!(err(sgd(&[frozen], 0.1).map(|_| ())).contains("at least one param"));
    let w = arr(&[2], 1).realize().unwrap();
    let opt = sgd(std::slice::from_ref(&w), 0.1).unwrap();
    assert_eq!(
        w.requires_grad(),
        Some(true),
        "an optimizer turns unknown into true"
    );
    let e = err(opt.step());
    assert!(e.contains("Tensor.training must be enabled"), "{e}");
    let _t = Tensor::train(true);
    let e = err(opt.step());
    assert!(e.contains("has no gradient (call backward first)"), "{e}");
}
