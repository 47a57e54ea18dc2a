//! The realize engine end to end on the CPU devices: LazyBuffer graphs scheduled, planned,
//! lowered and run on CLANG and INTERP, results read back and compared with host references.

mod realize_common;

use std::sync::Arc;

use rawgrad::device::{Buffer, BufferOptions};
use rawgrad::dtype::{dtypes, ConstValue};
use rawgrad::engine::realize::{
    compiles_on_this_thread, lower_schedule_item, programs_built_on_this_thread, run_schedule,
    BufferCopy, CompiledRunner, ViewOp, OPT_KNOBS,
};
use rawgrad::engine::schedule::ScheduleItem;
use rawgrad::helpers::GlobalCounters;
use rawgrad::lazy::{LazyBuffer, LbArg};
use rawgrad::ops::{BinaryOps, ConstArg, CustomOp, LazyOp, LazyOpArg, LoadOps};
use rawgrad::runtime::builtin::{default_device, registered_families, DEVICE_ORDER};
use rawgrad::shape::{Node, ShapeTracker, VarVals};
use rawgrad::Tensor;
use realize_common::*;

#[test]
fn elementwise_on_both_cpu_devices() {
    for dev in devices() {
        let dev = dev.as_str();
        let a = input(dev, &[3, 4], &values(12, 1));
        let b = input(dev, &[3, 4], &values(12, 2));
        let out = add_c(&a.add(&b).mul(&a), -1.0);
        realize(&[&out]);
        let (av, bv) = (values(12, 1), values(12, 2));
        let want: Vec<f64> = (0..12)
            .map(|i| ((av[i] + bv[i]) * av[i] - 1.0) as f64)
            .collect();
        assert_close(&read(&out), &want, 0.0, dev);
    }
}

#[test]
fn matmul_reduce_and_softmax_match_the_host() {
    let (m, k, n) = (17, 33, 5);
    let (av, bv) = (values(m * k, 3), values(k * n, 4));
    let want = matmul_ref(&av, &bv, m, k, n);
    for dev in devices() {
        let dev = dev.as_str();
        let a = input(dev, &[m as i64, k as i64], &av);
        let b = input(dev, &[k as i64, n as i64], &bv);
        let c = a.matmul(&b, None);
        let s = c.softmax(-1);
        let mx = a.max(Some(&[1]), false);
        realize(&[&c, &s, &mx]);
        assert_close(&read(&c), &want, 1e-5, &format!("{dev} matmul"));
        assert_close(
            &read(&s),
            &softmax_ref(&want, m, n),
            1e-5,
            &format!("{dev} softmax"),
        );
        let want_max: Vec<f64> = av
            .chunks_exact(k)
            .map(|r| r.iter().cloned().fold(f32::MIN, f32::max) as f64)
            .collect();
        assert_close(&read(&mx), &want_max, 0.0, &format!("{dev} max"));
    }
}

#[test]
fn the_method_cache_compiles_an_ast_once() {
    let graph = |dev: &str| {
        let a = input(dev, &[8, 8], &values(64, 5));
        let b = input(dev, &[8, 8], &values(64, 6));
        // An AST no other test builds.
        let out = mul_c(&a.sub(&b), 0.375).sum(Some(&[0]), false);
        realize(&[&out]);
        read(&out)
    };
    let first = graph("CLANG");
    let (c0, p0) = (compiles_on_this_thread(), programs_built_on_this_thread());
    let second = graph("CLANG");
    assert_eq!(first, second);
    assert_eq!(compiles_on_this_thread(), c0, "the second run compiled");
    assert_eq!(
        programs_built_on_this_thread(),
        p0,
        "the second run built a program"
    );
    // Another device of the family reuses the binary: nothing is linearized or compiled.
    let third = graph("CLANG:1");
    assert_eq!(first, third);
    assert_eq!(compiles_on_this_thread(), c0);
    assert_eq!(programs_built_on_this_thread(), p0);
    // A different AST does compile.
    let a = input("CLANG", &[8, 8], &values(64, 7));
    let out = mul_c(&a, 0.625)
        .sum(Some(&[1]), false)
        .sum(Some(&[0]), false);
    realize(&[&out]);
    assert!(programs_built_on_this_thread() > p0);
    assert!(compiles_on_this_thread() > c0);
}

#[test]
fn every_optimizer_knob_is_part_of_the_method_cache_key() {
    // Beyond 0.9.1 (which keys by BEAM only): a scoped override of any knob that changes the
    // opts (TC, MV, NOLOCALS, ...) gets a kernel built under it, never one cached under others.
    let run = || {
        let a = input("CLANG", &[6, 8], &values(48, 11));
        // An AST no other test builds.
        let out = mul_c(&a, 0.8125).sum(Some(&[1]), false);
        realize(&[&out]);
        read(&out)
    };
    let first = run();
    let p0 = programs_built_on_this_thread();
    assert_eq!(run(), first);
    assert_eq!(
        programs_built_on_this_thread(),
        p0,
        "a hit under the same knobs"
    );
    let mut built = p0;
    for knob in OPT_KNOBS {
        if rawgrad::helpers::getenv(knob, i64::MIN) == 0 {
            continue; // set to 0 by the environment already: 0 is not another key
        }
        let _g = rawgrad::helpers::Context::new(&[(knob, 0)]);
        assert_eq!(run(), first, "{knob}=0");
        assert_eq!(
            programs_built_on_this_thread(),
            built + 1,
            "{knob}=0 is a new key"
        );
        built += 1;
        assert_eq!(run(), first);
        assert_eq!(
            programs_built_on_this_thread(),
            built,
            "{knob}=0 again: a hit"
        );
    }
}

#[test]
fn copies_between_clang_and_interp() {
    let av = values(16, 8);
    let a = input("CLANG", &[4, 4], &av);
    let on_interp = T(a.0.copy_to_device("INTERP", false).unwrap());
    let plus = add_c(&on_interp, 2.0);
    let back = T(plus.0.copy_to_device("CLANG", false).unwrap());
    let kinds = |sched: &[rawgrad::engine::schedule::ScheduleItem]| -> Vec<bool> {
        sched
            .iter()
            .filter(|si| si.loadop() == Some(LoadOps::COPY))
            .map(|si| {
                let ei = lower_schedule_item(si).unwrap();
                let bc = ei.runner.as_any().downcast_ref::<BufferCopy>().unwrap();
                bc.is_xfer()
            })
            .collect()
    };
    let (sched, vv) = schedule(&[&back]);
    assert_eq!(
        kinds(&sched),
        vec![false, false],
        "CLANG->INTERP, INTERP->CLANG"
    );
    run_schedule(sched, &vv).unwrap();
    let want: Vec<f64> = av.iter().map(|v| (v + 2.0) as f64).collect();
    assert_close(&read(&back), &want, 0.0, "copied there and back");
    // Within one family the copy is a transfer.
    let twice = T(back.0.copy_to_device("CLANG:1", false).unwrap());
    let (sched, vv) = schedule(&[&twice]);
    assert_eq!(kinds(&sched), vec![true], "CLANG->CLANG:1");
    run_schedule(sched, &vv).unwrap();
    assert_close(&read(&twice), &want, 0.0, "transferred");
    assert_eq!(buffer(&twice).device(), "CLANG:1");
}

#[test]
fn views_share_their_base() {
    let av = values(16, 9);
    let a = input("CLANG", &[16], &av);
    let mid = T(a.0.shrink(&[(Node::Num(4), Node::Num(12))]).unwrap()).contiguous();
    let (sched, vv) = schedule(&[&mid]);
    assert_eq!(sched.len(), 1);
    assert_eq!(sched[0].loadop(), Some(LoadOps::VIEW));
    let ei = lower_schedule_item(&sched[0]).unwrap();
    assert!(ei.runner.as_any().downcast_ref::<ViewOp>().is_some());
    run_schedule(sched, &vv).unwrap();
    let got = read(&mid);
    let want: Vec<f64> = av[4..12].iter().map(|&v| v as f64).collect();
    assert_close(&got, &want, 0.0, "view");
    let view = buffer(&mid);
    assert!(view.is_view());
    assert_eq!(view.offset(), 16);
    assert_eq!(
        view.base(),
        buffer(&a),
        "the view is over the input's memory"
    );
}

#[test]
fn custom_and_empty_items() {
    let iota = CustomOp {
        name: "iota".into(),
        f: Arc::new(|out: &mut [u8], ins: &[&[u8]]| {
            assert!(ins.is_empty());
            for (i, o) in out.chunks_exact_mut(4).enumerate() {
                o.copy_from_slice(&(i as f32).to_ne_bytes());
            }
            Ok(())
        }),
    };
    for dev in devices() {
        let dev = dev.as_str();
        let shape = [Node::Num(6)];
        let c = LazyBuffer::loadop(
            LoadOps::CUSTOM,
            &shape,
            dtypes::float32,
            dev,
            LbArg::Custom(iota.clone()),
            &[],
            false,
        )
        .unwrap();
        let out = add_c(&T(c), 0.5);
        let e = T(LazyBuffer::loadop(
            LoadOps::EMPTY,
            &shape,
            dtypes::float32,
            dev,
            LbArg::None,
            &[],
            false,
        )
        .unwrap());
        let (sched, vv) = schedule(&[&out, &e]);
        let kinds: Vec<Option<LoadOps>> = sched.iter().map(|si| si.loadop()).collect();
        assert!(kinds.contains(&Some(LoadOps::CUSTOM)) && kinds.contains(&Some(LoadOps::EMPTY)));
        run_schedule(sched, &vv).unwrap();
        let want: Vec<f64> = (0..6).map(|i| i as f64 + 0.5).collect();
        assert_close(&read(&out), &want, 0.0, dev);
        assert!(buffer(&e).is_allocated(), "EMPTY allocates its buffer");
    }
}

#[test]
fn symbolic_shapes_run_with_their_var_vals() {
    let i = Node::var("i", 1, 10).unwrap();
    for dev in devices() {
        let dev = dev.as_str();
        let av = values(40, 10);
        let a = input(dev, &[10, 4], &av);
        let mut outs = vec![];
        for (val, expect_new_program) in [(3, true), (7, false)] {
            let bound = i.bind(val).unwrap();
            let arg = [(Node::Num(0), bound), (Node::Num(0), Node::Num(4))];
            let rows = T(a.0.shrink(&arg).unwrap());
            let out = add_c(&rows, 1.0);
            let (sched, vv) = schedule(&[&out]);
            assert_eq!(vv.get(&i), Some(&val));
            let p0 = programs_built_on_this_thread();
            run_schedule(sched, &vv).unwrap();
            if !expect_new_program {
                assert_eq!(
                    programs_built_on_this_thread(),
                    p0,
                    "{dev}: i={val} rebuilt"
                );
            }
            let got = read_prefix(&out, val as usize * 4);
            let want: Vec<f64> = av[..val as usize * 4]
                .iter()
                .map(|&v| v as f64 + 1.0)
                .collect();
            assert_close(&got, &want, 0.0, &format!("{dev} i={val}"));
            outs.push(out);
        }
        // Running the kernel without a value for i is an error naming the variable (as a
        // kernel parameter, or in a launch size).
        let bound = i.bind(2).unwrap();
        let rows = T(a
            .0
            .shrink(&[(Node::Num(0), bound), (Node::Num(0), Node::Num(4))])
            .unwrap());
        let out = add_c(&rows, 1.0);
        let (sched, _) = schedule(&[&out]);
        let e = run_schedule(sched, &VarVals::new()).unwrap_err();
        assert!(e.to_string().contains("i[1-10]"), "{e}");
    }
}

/// The first `n` floats of the (symbolic-size) buffer behind `t`.
fn read_prefix(t: &T, n: usize) -> Vec<f32> {
    let b = t.0.base().realized().expect("realized");
    let bytes = b.as_bytes().unwrap();
    bytes
        .chunks_exact(4)
        .take(n)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn global_counters_count_kernels_ops_and_memory() {
    for dev in devices() {
        let dev = dev.as_str();
        let a = input(dev, &[16], &values(16, 11));
        let b = input(dev, &[16], &values(16, 12));
        let out = a.add(&b);
        let (sched, vv) = schedule(&[&out]);
        GlobalCounters::reset();
        run_schedule(sched, &vv).unwrap();
        let gc = GlobalCounters::get();
        assert_eq!(gc.kernel_count, 1, "{dev}");
        assert_eq!(gc.global_ops, 16, "{dev}: one ADD per element");
        assert_eq!(
            gc.global_mem,
            3 * 16 * 4,
            "{dev}: two loads and a store of 16 floats"
        );
    }
}

#[test]
fn kernels_get_their_buffers_in_kernel_order() {
    let a = input("INTERP", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let b = input("INTERP", &[4], &[10.0, 20.0, 30.0, 40.0]);
    let out = b.sub(&a);
    let (sched, _) = schedule(&[&out]);
    let ei = lower_schedule_item(&sched[0]).unwrap();
    let cr = ei.runner.as_any().downcast_ref::<CompiledRunner>().unwrap();
    assert_eq!(ei.bufs.len(), cr.p.globals().len());
    assert_eq!(ei.bufs[0].as_ref(), Some(&sched[0].bufs[0]));
    run_schedule(sched, &VarVals::new()).unwrap();
    assert_eq!(read(&out), vec![9.0, 18.0, 27.0, 36.0]);
    // A load folded away leaves a hole in the DEFINE_GLOBAL indices (x*0 folds in the UOp
    // graph); the program still finds each buffer, on the default device too (a GPU takes them
    // positionally: under AMD=1 MOCKGPU=1 the software GPU once looked them up by index).
    for dev in devices() {
        let dev = dev.as_str();
        let a = input(dev, &[4], &[1.0, 2.0, 3.0, 4.0]);
        let b = input(dev, &[4], &[10.0, 20.0, 30.0, 40.0]);
        let out = Buffer::new(dev, 4, dtypes::float32, BufferOptions::default());
        let st = ShapeTracker::from_shape(&[Node::Num(4)]).unwrap();
        let ld = |i| LazyOp::load(i, dtypes::float32, st.clone());
        let zero = LazyOp::cnst(
            ConstArg::Value(ConstValue::Float(0.0)),
            dtypes::float32,
            st.clone(),
        );
        let prod = LazyOp::new(BinaryOps::MUL, vec![ld(1), zero], LazyOpArg::None);
        let sum = LazyOp::new(BinaryOps::ADD, vec![prod, ld(2)], LazyOpArg::None);
        let si = ScheduleItem {
            ast: vec![LazyOp::store(sum, 0, dtypes::float32, st.clone())],
            bufs: vec![out.clone(), buffer(&a), buffer(&b)],
            var_vals: VarVals::new(),
        };
        let ei = lower_schedule_item(&si).unwrap();
        let cr = ei.runner.as_any().downcast_ref::<CompiledRunner>().unwrap();
        let idxs: Vec<usize> = cr.p.globals().iter().map(|g| g.0).collect();
        assert_eq!(
            idxs,
            vec![0, 2],
            "{dev}: the load of buffer 1 is folded away"
        );
        assert_eq!(ei.bufs, vec![Some(out.clone()), Some(buffer(&b))]);
        ei.run(&VarVals::new(), false).unwrap();
        let got: Vec<f32> = out
            .as_bytes()
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, vec![10.0, 20.0, 30.0, 40.0], "{dev}");
    }
}

#[test]
fn a_buffer_folded_away_by_the_tensor_graph_runs_everywhere() {
    // Issue 8: `a - a` folds to 0, so the kernel for (a - a < s) declares buffers 0 and 2 only.
    let (av, sv) = ([1.5f32, -2.0, 3.0, 0.0], [0.5f32, -1.0, 0.0, 2.0]);
    for dev in devices() {
        let a = Tensor::from_slice_on(&av, &[4], &dev).unwrap();
        let s = Tensor::from_slice_on(&sv, &[4], &dev).unwrap();
        let got = a
            .sub(&a)
            .and_then(|z| z.lt(&s))
            .and_then(|m| m.cast(dtypes::float32))
            .and_then(|t| t.to_vec::<f32>())
            .unwrap_or_else(|e| panic!("{dev}: {e}"));
        assert_eq!(got, vec![1.0, 0.0, 0.0, 1.0], "{dev}");
    }
}

#[test]
fn builtin_families_are_registered_without_init() {
    let fams = registered_families();
    for f in ["CLANG", "INTERP", "AMD"] {
        assert!(fams.contains(&f.to_string()), "{f} not in {fams:?}");
    }
    let d = default_device().unwrap();
    let family = d.split(':').next().unwrap();
    assert!(
        DEVICE_ORDER.contains(&family) || fams.contains(&family.to_string()),
        "DEFAULT {d} is not a known family"
    );
}

#[test]
fn kernels_over_two_devices_are_refused() {
    let a = input("CLANG", &[4], &[1.0; 4]);
    let b = input("INTERP", &[4], &[1.0; 4]);
    let Ok(sum) = a.0.e(BinaryOps::ADD, &[&b.0]) else {
        return; // refused already when the graph was built
    };
    let (sched, vv) = schedule(&[&T(sum)]);
    let e = run_schedule(sched, &vv).unwrap_err();
    assert!(e.to_string().contains("several devices"), "{e}");
}
