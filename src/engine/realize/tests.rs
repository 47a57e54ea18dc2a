use std::sync::Arc;

use super::*;
use crate::device::{Buffer, BufferOptions};
use crate::dtype::dtypes;
use crate::helpers::{ansistrip, Context};
use crate::ops::{BinaryOps, CustomOp as CustomFnOp, LazyOp};

fn item(ast: Vec<LazyOp>, bufs: Vec<BufferRef>) -> ScheduleItem {
    ScheduleItem {
        ast,
        bufs,
        var_vals: VarVals::new(),
    }
}

fn host(device: &str, vals: &[f32]) -> BufferRef {
    // a bare buffer allocates through the registry's table: the built-ins first
    crate::runtime::builtin::register_builtin_families();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    Buffer::with_initial(
        device,
        vals.len(),
        dtypes::float32,
        BufferOptions::default(),
        &bytes,
    )
    .unwrap()
}

fn floats(b: &BufferRef) -> Vec<f32> {
    b.as_bytes()
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn loadop(op: LoadOps, arg: LazyOpArg) -> LazyOp {
    LazyOp::new(op, vec![], arg)
}

#[test]
fn copy_names_like_tinygrad() {
    let c = BufferCopy::new(64, "CLANG", "INTERP", false);
    assert_eq!(
        ansistrip(c.display_name()),
        "copy       64,   CLANG <- INTERP "
    );
    assert_eq!(
        c.display_name(),
        "\x1b[33mcopy       64,   CLANG <- INTERP \x1b[0m"
    );
    assert_eq!(c.device(), "CLANG");
    assert_eq!(c.mem_estimate(), &Sint::Num(64));
    assert_eq!(c.op_estimate(), &Sint::Num(0));
    let x = BufferCopy::between(2_000_000, "CLANG", "CLANG:1");
    assert!(x.is_xfer());
    assert_eq!(
        ansistrip(x.display_name()),
        "xfer    2.00M,   CLANG <- CLANG:1"
    );
    assert!(!BufferCopy::between(4, "AMD:1", "CLANG").is_xfer());
    assert!(BufferCopy::between(4, "AMD:1", "amd").is_xfer());
}

#[test]
fn view_and_empty_names() {
    let base = Buffer::new("INTERP", 16, dtypes::float32, BufferOptions::default());
    let view = base.view(4, dtypes::float32, 8).unwrap();
    let v = ViewOp::new(&view);
    assert_eq!(ansistrip(v.display_name()), "view       16 @ 8         ");
    assert_eq!(v.device(), "INTERP");
    let e = EmptyOp::new(&base);
    assert_eq!(ansistrip(e.display_name()), "empty         16 dtypes.float");
}

#[test]
fn view_op_checks_the_relation() {
    let base = Buffer::new("INTERP", 16, dtypes::float32, BufferOptions::default());
    let other = Buffer::new("INTERP", 16, dtypes::float32, BufferOptions::default());
    let view = base.view(4, dtypes::float32, 8).unwrap();
    let v = ViewOp::new(&view);
    let vv = VarVals::new();
    v.exec(&[view.clone(), base.clone()], &vv, false).unwrap();
    let e = v.exec(&[view.clone(), other], &vv, false).unwrap_err();
    assert!(e.message().contains("must be a view of the base"), "{e}");
    assert!(v.exec(&[base.clone(), base], &vv, false).is_err());
}

#[test]
fn lowering_refuses_what_it_cannot_run() {
    let b = Buffer::new("INTERP", 4, dtypes::float32, BufferOptions::default());
    let e = lower_schedule_item(&item(vec![], vec![b.clone()])).unwrap_err();
    assert!(e.message().contains("without an AST"), "{e}");
    let e = lower_schedule_item(&item(vec![loadop(LoadOps::EMPTY, LazyOpArg::None)], vec![]))
        .unwrap_err();
    assert!(e.message().contains("without buffers"), "{e}");
    let add = LazyOp::new(BinaryOps::ADD, vec![], LazyOpArg::None);
    let e = lower_schedule_item(&item(vec![add], vec![b.clone()])).unwrap_err();
    assert!(
        e.message()
            .contains("don't know how to lower BinaryOps.ADD"),
        "{e}"
    );
    let c = Buffer::new("CLANG", 4, dtypes::float32, BufferOptions::default());
    let e = lower_schedule_item(&item(
        vec![loadop(LoadOps::EMPTY, LazyOpArg::None)],
        vec![b, c],
    ))
    .unwrap_err();
    assert!(e.message().contains("several devices"), "{e}");
}

#[test]
fn empty_slots_are_errors() {
    let b = Buffer::new("INTERP", 4, dtypes::float32, BufferOptions::default());
    let mut ei = ExecItem::new(Arc::new(EmptyOp::new(&b)), vec![b]);
    ei.bufs[0] = None;
    let e = ei.run(&VarVals::new(), false).unwrap_err();
    assert!(e.message().contains("buffer slot 0 is empty"), "{e}");
}

#[test]
fn empty_and_custom_items_run() {
    let out = Buffer::new("INTERP", 3, dtypes::float32, BufferOptions::default());
    let a = host("INTERP", &[1.0, 2.0, 3.0]);
    let ei = lower_schedule_item(&item(
        vec![loadop(LoadOps::EMPTY, LazyOpArg::None)],
        vec![out.clone()],
    ))
    .unwrap();
    assert!(!out.is_allocated());
    GlobalCounters::reset();
    assert_eq!(ei.run(&VarVals::new(), true).unwrap(), None);
    assert!(out.is_allocated(), "running an item allocates its buffers");
    assert_eq!(GlobalCounters::get().kernel_count, 1);
    let double = CustomFnOp {
        name: "double".into(),
        f: Arc::new(|out: &mut [u8], ins: &[&[u8]]| {
            for (o, i) in out.chunks_exact_mut(4).zip(ins[0].chunks_exact(4)) {
                let v = f32::from_ne_bytes([i[0], i[1], i[2], i[3]]) * 2.0;
                o.copy_from_slice(&v.to_ne_bytes());
            }
            Ok(())
        }),
    };
    let si = item(
        vec![loadop(LoadOps::CUSTOM, LazyOpArg::Custom(double))],
        vec![out.clone(), a],
    );
    let ei = lower_schedule_item(&si).unwrap();
    assert_eq!(ei.runner.device(), "CUSTOM");
    assert_eq!(ei.runner.display_name(), "double");
    ei.run(&VarVals::new(), false).unwrap();
    assert_eq!(floats(&out), vec![2.0, 4.0, 6.0]);
    // A failing host function is an error naming it.
    let bad = CustomFnOp {
        name: "bad".into(),
        f: Arc::new(|_: &mut [u8], _: &[&[u8]]| Err(Error::InvalidArgument("nope".into()))),
    };
    let si = item(
        vec![loadop(LoadOps::CUSTOM, LazyOpArg::Custom(bad))],
        vec![out.clone()],
    );
    let e = lower_schedule_item(&si)
        .unwrap()
        .run(&VarVals::new(), false)
        .unwrap_err();
    assert!(e.message().contains("custom op bad: nope"), "{e}");
}

#[test]
fn copies_between_families_and_within_one() {
    let src = host("INTERP", &[1.5, -2.0, 8.0, 0.25]);
    let dst = Buffer::new("CLANG", 4, dtypes::float32, BufferOptions::default());
    let copy = |dst: &BufferRef, src: &BufferRef| {
        item(
            vec![loadop(LoadOps::COPY, LazyOpArg::Nbytes(16))],
            vec![dst.clone(), src.clone()],
        )
    };
    let ei = lower_schedule_item(&copy(&dst, &src)).unwrap();
    let bc = ei.runner.as_any().downcast_ref::<BufferCopy>().unwrap();
    assert!(!bc.is_xfer());
    let t = ei.run(&VarVals::new(), true).unwrap();
    assert!(t.is_some(), "a waited copy is timed");
    assert_eq!(floats(&dst), vec![1.5, -2.0, 8.0, 0.25]);
    let dst2 = Buffer::new("CLANG:1", 4, dtypes::float32, BufferOptions::default());
    let ei = lower_schedule_item(&copy(&dst2, &dst)).unwrap();
    assert!(ei
        .runner
        .as_any()
        .downcast_ref::<BufferCopy>()
        .unwrap()
        .is_xfer());
    ei.run(&VarVals::new(), false).unwrap();
    assert_eq!(floats(&dst2), vec![1.5, -2.0, 8.0, 0.25]);
    // Sizes must match.
    let small = Buffer::new("CLANG", 2, dtypes::float32, BufferOptions::default());
    let e = lower_schedule_item(&copy(&small, &src))
        .unwrap()
        .run(&VarVals::new(), false)
        .unwrap_err();
    assert!(e.message().contains("buffer copy mismatch, 2 != 4"), "{e}");
}

#[test]
fn capture_sees_items_before_they_run() {
    let out = Buffer::new("INTERP", 2, dtypes::float32, BufferOptions::default());
    let sched = || {
        vec![item(
            vec![loadop(LoadOps::EMPTY, LazyOpArg::None)],
            vec![out.clone()],
        )]
    };
    let (res, items) = capture_exec_items(|| {
        let seen = std::rc::Rc::new(std::cell::Cell::new(0));
        let s2 = std::rc::Rc::clone(&seen);
        let inner = CaptureGuard::new(Box::new(move |ei: &ExecItem| {
            assert!(ei.bufs[0].as_ref().is_some_and(|b| !b.is_allocated()) || s2.get() > 0);
            s2.set(s2.get() + 1);
        }));
        run_schedule(sched(), &VarVals::new()).unwrap();
        drop(inner);
        run_schedule(sched(), &VarVals::new()).unwrap();
        {
            let _off = Context::new(&[("CAPTURING", 0)]);
            run_schedule(sched(), &VarVals::new()).unwrap();
        }
        seen.get()
    });
    assert_eq!(res, 1, "the innermost capturer got the first run");
    assert_eq!(
        items.len(),
        1,
        "the outer one only the second (CAPTURING=0 hid the third)"
    );
    assert_eq!(items[0].bufs, vec![Some(out)]);
}
