//! Shared helpers of the Tensor integration tests: a CLANG device for the test thread (graphs
//! are built on it; nothing is compiled unless a test realizes), "realized" inputs made by
//! scheduling an EMPTY (the scheduler marks it realized), and tinygrad's `check_schedule`.

#![allow(dead_code)]

pub mod reference;

use std::collections::HashSet;

use rawgrad::dtype::{dtypes, DType};
use rawgrad::engine::schedule::{create_schedule_with_vars, ScheduleItem};
use rawgrad::helpers::Context;
use rawgrad::lazy::LazyBuffer;
use rawgrad::ops::verify_lazyop;
use rawgrad::Tensor;

/// Make `CLANG` (a built-in family) the default device of this thread.
pub fn clang() -> Context {
    Context::with_str(&[("DEVICE", "CLANG")])
}

pub fn empty(shape: &[usize]) -> Tensor {
    Tensor::empty(shape).unwrap()
}

pub fn empty_dt(shape: &[usize], dt: DType) -> Tensor {
    Tensor::empty_dtype(shape, dt).unwrap()
}

/// Schedule `t` alone, so it counts as realized in later schedules (its kernels are returned).
pub fn prerealize(t: &Tensor) -> Vec<ScheduleItem> {
    let mut seen = HashSet::new();
    create_schedule_with_vars(&[t.lazydata()], &mut seen)
        .unwrap()
        .0
}

/// A float32 input that is already realized.
pub fn realized(shape: &[usize]) -> Tensor {
    let t = empty(shape);
    prerealize(&t);
    t
}

/// tinygrad's `check_schedule`: the schedule of `outs` after prerealizing `pre`, every kernel
/// AST verified, LoadOps items dropped when `filter_loadops`.
pub fn check(outs: &[&Tensor], pre: &[&Tensor], filter_loadops: bool) -> Vec<ScheduleItem> {
    for p in pre {
        prerealize(p);
    }
    let lbs: Vec<LazyBuffer> = outs.iter().map(|t| t.lazydata()).collect();
    let mut seen = HashSet::new();
    let (sched, _) = create_schedule_with_vars(&lbs, &mut seen).unwrap();
    for si in &sched {
        if si.is_kernel() {
            verify_lazyop(&si.ast).unwrap_or_else(|e| panic!("{e}\n{:?}", si.ast));
        }
    }
    sched
        .into_iter()
        .filter(|si| !filter_loadops || si.is_kernel())
        .collect()
}

/// Kernels (non-LoadOps items) of `outs` after prerealizing `pre`.
pub fn kernels_pre(outs: &[&Tensor], pre: &[&Tensor]) -> usize {
    check(outs, pre, true).len()
}

/// Kernels (non-LoadOps items) of `outs`.
pub fn kernels(outs: &[&Tensor]) -> usize {
    check(outs, &[], true).len()
}

/// All items (LoadOps included) of `outs`.
pub fn items(outs: &[&Tensor]) -> usize {
    check(outs, &[], false).len()
}

pub const F32: DType = dtypes::float32;

/// The devices the numeric tests run on.
pub const DEVICES: [&str; 2] = ["CLANG", "INTERP"];

/// Make `dev` the default device of this thread.
pub fn on(dev: &str) -> Context {
    if dev == "CLANG" {
        return clang();
    }
    Context::with_str(&[("DEVICE", dev)])
}

/// The CPU devices that open here, INTERP first (the reference of the bit-exact tests).
pub fn cpu_devices() -> Vec<&'static str> {
    let mut out = vec![];
    for d in ["INTERP", "CLANG", "LLVM"] {
        let _g = on(d);
        match rawgrad::runtime::builtin::open_device(d) {
            Ok(_) => out.push(d),
            Err(e) => println!("skipped {d}: {e}"),
        }
    }
    out
}

/// A float32 tensor of the reference array's values.
pub fn t32(r: &reference::R) -> Tensor {
    Tensor::from_vec(r.f32(), &r.shape).unwrap()
}

/// A float64 tensor of the reference array's values.
pub fn t64(r: &reference::R) -> Tensor {
    Tensor::from_vec(r.data.clone(), &r.shape).unwrap()
}

/// The values of a float32 tensor as f64.
pub fn get(t: &Tensor) -> Vec<f64> {
    reference::to_f64(&t.to_vec::<f32>().unwrap())
}

/// Check a float32 tensor against a reference array (shape and values).
pub fn check_close(t: &Tensor, want: &reference::R, atol: f64, rtol: f64, what: &str) {
    assert_eq!(t.shape(), want.shape, "{what}: shape");
    reference::assert_close(&get(t), &want.data, atol, rtol, what);
}

/// The ASTs of `t`'s schedule (load ops filtered out).
pub fn asts(t: &Tensor) -> Vec<Vec<rawgrad::ops::LazyOp>> {
    check(&[t], &[], true)
        .into_iter()
        .map(|si| si.ast.clone())
        .collect()
}

/// The source of each kernel of `asts` rendered by `r` (opts from `get_kernel`, named `k`).
pub fn rendered(
    r: &dyn rawgrad::renderer::Renderer,
    asts: &[Vec<rawgrad::ops::LazyOp>],
) -> Vec<String> {
    asts.iter()
        .map(|ast| {
            let mut k = rawgrad::engine::realize::get_kernel(r, ast).unwrap();
            let uops = k.linearize_as("k").unwrap().uops.clone();
            r.render("k", &uops).unwrap()
        })
        .collect()
}
