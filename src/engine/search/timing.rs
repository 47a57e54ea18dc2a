//! Timing a candidate (tinygrad 0.9.1 `_time_program`, `_get_test_global_size`): the program is
//! loaded from its binary and run `cnt` times with `wait`, so the device's own timer answers (the
//! HCQ timestamps on AMD and NV, the host clock around the call on CPU devices).
//!
//! Test size: with launch dims, the global size is halved (last dims above 16 first) until its
//! product is at most `max_global_size`, and the time is scaled by the factor, as in tinygrad. A
//! CPU kernel (no launch dims) times about `1/f` of its split outer loop instead, with the work
//! of the timed part near [`CPU_TEST_WORK`] (beyond tinygrad, which times CPU kernels whole; see
//! `CompiledRunner::time_test_size`). `clear_l2` writes a 4 MiB buffer on the device before each
//! run (tinygrad's `Tensor.ones(1024,1024).contiguous().realize()`).
//!
//! Not guaranteed: test-size times are estimates (a part of the work, scaled).

use std::sync::Arc;

use super::candidates::Candidate;
use crate::codegen::program::ProgramSpec;
use crate::device::{Buffer, BufferOptions, BufferRef};
use crate::dtype::dtypes;
use crate::engine::realize::{get_runner, CompiledRunner, Runner};
use crate::helpers::{prod, Context};
use crate::ops::{ConstArg, LazyOp};
use crate::shape::{sym_infer, Node, ShapeTracker, Sint, VarVals};
use crate::Result;

/// The work (flops + bytes) a test-size run of a CPU kernel aims at.
pub const CPU_TEST_WORK: i64 = 1 << 24;

/// How to time a program.
#[derive(Clone, Copy, Debug)]
pub struct TimeOpts {
    /// Test size: tinygrad's `max_global_size` (`None`: run the whole kernel).
    pub max_global_size: Option<i64>,
    pub clear_l2: bool,
    pub cnt: usize,
    /// Stop after a run slower than this (seconds).
    pub early_stop: Option<f64>,
}

/// tinygrad's `_get_test_global_size`: halve the last dim above 16 until the product fits;
/// returns the sizes and the factor the time is to be multiplied by.
pub fn get_test_global_size(
    global_size: &[Sint],
    max_global_size: i64,
    var_vals: &VarVals,
) -> Result<(Vec<i64>, i64)> {
    let mut sizes: Vec<i64> = (global_size.iter())
        .map(|s| sym_infer(s, var_vals))
        .collect::<Result<_>>()?;
    let mut factor = 1i64;
    while prod(&sizes) > max_global_size {
        let Some(j) = (0..sizes.len()).rev().find(|&j| sizes[j] > 16) else {
            break;
        };
        sizes[j] /= 2;
        factor *= 2;
    }
    Ok((sizes, factor))
}

/// Each variable at the middle of its range (`(min+max)//2`), as BEAM times kernels.
pub fn midpoint_var_vals(vars: &[Node]) -> VarVals {
    vars.iter()
        .filter_map(|v| {
            let (lo, hi) = (v.min().as_int()?, v.max().as_int()?);
            Some((v.clone(), (lo + hi).div_euclid(2)))
        })
        .collect()
}

/// Write a 1024x1024 float buffer on `device` (evicts what earlier runs left in the caches).
fn clear_l2(device: &str, scratch: &BufferRef) -> Result<()> {
    let n = Node::Num(1024 * 1024);
    let st = ShapeTracker::from_shape(std::slice::from_ref(&n))?;
    let one = LazyOp::cnst(
        ConstArg::Value(crate::dtype::ConstValue::Float(1.0)),
        dtypes::float32,
        ShapeTracker::from_shape(&[Node::Num(1)])?.expand(&[n])?,
    );
    let ast = LazyOp::store(one, 0, dtypes::float32, st);
    let runner = {
        let _g = Context::new(&[("BEAM", 0), ("DEBUG", 0), ("NOOPT", 0)]);
        get_runner(device, &[ast])?
    };
    runner.exec(std::slice::from_ref(scratch), &VarVals::default(), true)?;
    Ok(())
}

/// A scratch buffer for `clear_l2` on `device`.
pub fn l2_scratch(device: &str) -> Result<BufferRef> {
    let b = Buffer::new(
        device,
        1024 * 1024,
        dtypes::float32,
        BufferOptions::default(),
    );
    b.ensure_allocated()?;
    Ok(b)
}

/// tinygrad's `_time_program`: the times of up to `cnt` runs (each scaled to the whole kernel);
/// a program that fails to load times as infinity.
pub fn time_program(
    c: &Candidate,
    var_vals: &VarVals,
    rawbufs: &[BufferRef],
    o: &TimeOpts,
) -> Result<Vec<f64>> {
    let mut p: ProgramSpec = c.p.clone();
    let mut factor = 1.0;
    if let (Some(gs), Some(max)) = (&p.global_size, o.max_global_size) {
        let (sizes, f) = get_test_global_size(gs, max, var_vals)?;
        p.global_size = Some(sizes.into_iter().map(Node::Num).collect());
        factor = f as f64;
    }
    let device = p.device.clone();
    let name = p.name.clone();
    let Ok(runner) = CompiledRunner::new(p, name, Some(Arc::clone(&c.lib))) else {
        return Ok(vec![f64::INFINITY; o.cnt]);
    };
    let bufs: Vec<BufferRef> = (runner.p.globals().iter())
        .map(|&(i, _)| {
            rawbufs.get(i).cloned().ok_or_else(|| {
                crate::Error::Internal(format!("time_program: no buffer {i} for {}", runner.p.name))
            })
        })
        .collect::<Result<_>>()?;
    let scratch = if o.clear_l2 {
        Some(l2_scratch(&device)?)
    } else {
        None
    };
    let mut tms = vec![];
    for _ in 0..o.cnt {
        if let Some(s) = &scratch {
            clear_l2(&device, s)?;
        }
        let t = match o.max_global_size {
            Some(_) if runner.p.global_size.is_none() => {
                runner.time_test_size(&bufs, var_vals, CPU_TEST_WORK)?
            }
            _ => runner.exec(&bufs, var_vals, true)?.ok_or_else(|| {
                crate::Error::Runtime(format!(
                    "{}: the device did not time the run",
                    runner.p.name
                ))
            })?,
        };
        tms.push(t * factor);
        if o.early_stop.is_some_and(|e| e < t * factor) {
            break;
        }
    }
    Ok(tms)
}
