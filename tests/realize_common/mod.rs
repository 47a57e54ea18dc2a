//! Helpers of the realize-engine integration tests: inputs on any device, the realize path of a
//! Tensor (schedule, memory planner, run), reading results back, and host references.

#![allow(dead_code)]

#[path = "../schedule_common/mod.rs"]
pub mod sc;

use std::collections::HashSet;

use rawgrad::device::{Buffer, BufferOptions, BufferRef};
use rawgrad::dtype::dtypes;
use rawgrad::engine::memory::memory_planner;
use rawgrad::engine::realize::run_schedule;
use rawgrad::engine::schedule::{create_schedule_with_vars, ScheduleItem};
use rawgrad::lazy::LazyBuffer;
use rawgrad::ops::BinaryOps;
use rawgrad::shape::{Node, VarVals};

pub use sc::T;

/// The two CPU devices every engine test runs on.
pub const DEVICES: [&str; 2] = ["CLANG", "INTERP"];

/// The CPU devices, plus `DEFAULT` when it is another one (`AMD=1 MOCKGPU=1` runs the engine
/// tests on the emulated GPU too).
pub fn devices() -> Vec<String> {
    let mut out: Vec<String> = DEVICES.iter().map(|d| d.to_string()).collect();
    let d = rawgrad::runtime::builtin::default_device().unwrap();
    if !out.contains(&d) {
        out.push(d);
    }
    out
}

/// A realized float32 input of `shape` on `device` holding `data`.
pub fn input(device: &str, shape: &[i64], data: &[f32]) -> T {
    let n = shape.iter().product::<i64>() as usize;
    assert_eq!(n, data.len(), "input data for shape {shape:?}");
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
    // a bare buffer allocates through the registry's table: the built-ins first
    rawgrad::runtime::builtin::register_builtin_families();
    let buf =
        Buffer::with_initial(device, n, dtypes::float32, BufferOptions::default(), &bytes).unwrap();
    let shape: Vec<Node> = shape.iter().map(|&s| Node::Num(s)).collect();
    T(LazyBuffer::from_buffer(buf, &shape).unwrap())
}

/// Deterministic values in [-1, 1) (a 32-bit LCG), exactly representable in float32.
pub fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            ((s >> 8) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `x + c` with a constant on x's own device.
pub fn add_c(x: &T, c: f64) -> T {
    T(x.0
        .e(BinaryOps::ADD, &[&x.0.const_like(c).unwrap()])
        .unwrap())
}

/// `x * c` with a constant on x's own device.
pub fn mul_c(x: &T, c: f64) -> T {
    T(x.0
        .e(BinaryOps::MUL, &[&x.0.const_like(c).unwrap()])
        .unwrap())
}

/// The schedule (after the memory planner) that realizes `outs`, and its variable values.
pub fn schedule(outs: &[&T]) -> (Vec<ScheduleItem>, VarVals) {
    let lbs: Vec<LazyBuffer> = outs.iter().map(|t| t.0.clone()).collect();
    let (sched, vv) = create_schedule_with_vars(&lbs, &mut HashSet::new()).unwrap();
    (memory_planner(sched).unwrap(), vv)
}

/// Realize `outs` as `Tensor.realize` does: schedule, plan memory, lower and run.
pub fn realize(outs: &[&T]) {
    let (sched, vv) = schedule(outs);
    run_schedule(sched, &vv).unwrap();
}

/// The realized buffer of `t` (which must be realized and contiguous).
pub fn buffer(t: &T) -> BufferRef {
    assert!(t.0.st().contiguous(), "{:?} is not contiguous", t.0);
    t.0.base().realized().expect("realized")
}

/// The float32 values of a realized, contiguous `t`.
pub fn read(t: &T) -> Vec<f32> {
    let b = buffer(t);
    let bytes = b.as_bytes().unwrap();
    let n = t.shape().iter().product::<i64>() as usize;
    bytes
        .chunks_exact(4)
        .take(n)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Row-major `a (m x k) @ b (k x n)` in f64.
pub fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|x| a[i * k + x] as f64 * b[x * n + j] as f64)
                .sum();
        }
    }
    out
}

/// Softmax of each row of a `rows x cols` matrix in f64.
pub fn softmax_ref(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for r in x.chunks_exact(cols).take(rows) {
        let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = r.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

/// Assert `got` equals `want` within `tol` (absolute plus relative).
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = *g as f64;
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}
