//! Random op graphs (issue 13 item 5): a seeded generator builds chains of elementwise, reduce,
//! movement and cast ops over small random inputs (with NaN, infinities, signed zeros and huge
//! and tiny values mixed in), realizes each on every device under test and on INTERP, and
//! asserts that no call panics and that every device gives INTERP's answer: the same shape, and
//! the same bits for every element (any NaN matches any NaN). Two kinds of graph compare within
//! 1e-5 relative (4e-5 absolute) instead: those that sum (the summation order differs per device:
//! each renderer's opts split the reduce differently) and those with a transcendental op (`exp2`,
//! `log2`, `sin`, `sigmoid`): INTERP computes them in f64 and rounds, as tinygrad's `python_alu`
//! does, while CLANG calls libm's `sinf`/`log2f`, as tinygrad's CLANG does through `tgmath.h`,
//! and those are not correctly rounded (1 ulp apart at times); float `exp2` on CLANG and LLVM is
//! rawgrad's inline one (`renderer::exp2`, also at most 1 ulp away).
//!
//! Devices: CLANG and LLVM, plus the default device when it is another one (`AMD=1 MOCKGPU=1`,
//! `NV=1 MOCKGPU=1`). `GRAPH_FUZZ_CASES=n` runs `n` graphs (default 40), `GRAPH_FUZZ_SEED=s`
//! picks the seed; a failure names the case's seed and prints the ops it applied.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rawgrad::dtype::dtypes;
use rawgrad::{Result, Tensor};

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

impl Rng {
    /// A value: mostly in [-3, 3), sometimes one an op treats specially.
    fn value(&mut self) -> f32 {
        const SPECIAL: [f32; 10] = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e30,
            -1e-30,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
        ];
        if self.chance(12) {
            SPECIAL[self.below(SPECIAL.len())]
        } else {
            (self.below(1 << 20) as f32 / (1 << 20) as f32) * 6.0 - 3.0
        }
    }
}

/// One random graph, built on `device` from the case's seed (the same seed builds the same
/// graph on every device): the result and the ops applied, in order.
struct Built {
    out: Tensor,
    ops: Vec<String>,
    /// The graph sums or has a transcendental op: compared within a tolerance.
    sums: bool,
}

fn input(rng: &mut Rng, shape: &[usize], device: &str) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.value()).collect();
    Tensor::from_slice_on(&data, shape, device)
}

/// The shape of a second operand: `shape` with some dims broadcast (1), or a scalar.
fn operand_shape(rng: &mut Rng, shape: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .map(|&d| if rng.chance(25) { 1 } else { d })
        .collect()
}

fn unary(rng: &mut Rng, x: &Tensor, ops: &mut Vec<String>, approx: &mut bool) -> Result<Tensor> {
    const NAMES: [&str; 9] = [
        "neg",
        "exp2",
        "log2",
        "sqrt",
        "reciprocal",
        "relu",
        "sigmoid",
        "abs",
        "sin",
    ];
    let i = rng.below(NAMES.len());
    ops.push(NAMES[i].into());
    *approx |= matches!(NAMES[i], "exp2" | "log2" | "sigmoid" | "sin");
    match i {
        0 => x.neg(),
        1 => x.exp2(),
        2 => x.log2(),
        3 => x.sqrt(),
        4 => x.reciprocal(),
        5 => x.relu(),
        6 => x.sigmoid(),
        7 => x.abs(),
        _ => x.sin(),
    }
}

fn binary(rng: &mut Rng, x: &Tensor, device: &str, ops: &mut Vec<String>) -> Result<Tensor> {
    const NAMES: [&str; 7] = ["add", "sub", "mul", "div", "maximum", "minimum", "where_lt"];
    let i = rng.below(NAMES.len());
    let shape = operand_shape(rng, &x.shape());
    let y = if rng.chance(20) {
        let v = rng.value();
        ops.push(format!("{} scalar {v:?}", NAMES[i]));
        Tensor::full_on(&shape, v, dtypes::float32, device)?
    } else {
        ops.push(format!("{} {shape:?}", NAMES[i]));
        input(rng, &shape, device)?
    };
    match i {
        0 => x.add(&y),
        1 => x.sub(&y),
        2 => x.mul(&y),
        3 => x.div(&y),
        4 => x.maximum(&y),
        5 => x.minimum(&y),
        _ => x.lt(&y)?.where_(x, &y),
    }
}

fn reduce(rng: &mut Rng, x: &Tensor, ops: &mut Vec<String>, sums: &mut bool) -> Result<Tensor> {
    let rank = x.shape().len();
    if rank == 0 {
        return Ok(x.clone());
    }
    let axis = rng.below(rank) as isize;
    let keepdim = rng.chance(50);
    if rng.chance(50) {
        *sums = true;
        ops.push(format!("sum axis {axis} keepdim {keepdim}"));
        x.sum_axis(axis, keepdim)
    } else {
        ops.push(format!("max axis {axis} keepdim {keepdim}"));
        x.max_axis(axis, keepdim)
    }
}

fn movement(rng: &mut Rng, x: &Tensor, ops: &mut Vec<String>) -> Result<Tensor> {
    let shape = x.shape();
    let rank = shape.len();
    match rng.below(6) {
        0 => {
            let mut order: Vec<isize> = (0..rank as isize).collect();
            for i in (1..rank).rev() {
                order.swap(i, rng.below(i + 1));
            }
            ops.push(format!("permute {order:?}"));
            x.permute(&order)
        }
        1 => {
            ops.push("flatten".into());
            x.reshape(&[-1])
        }
        2 => {
            let pads: Vec<Option<(usize, usize)>> = (0..rank)
                .map(|_| Some((rng.below(3), rng.below(3))))
                .collect();
            ops.push(format!("pad {pads:?}"));
            x.pad(&pads)
        }
        3 => {
            let arg: Vec<Option<(usize, usize)>> = shape
                .iter()
                .map(|&d| {
                    let s = rng.below(d);
                    Some((s, s + 1 + rng.below(d - s)))
                })
                .collect();
            ops.push(format!("shrink {arg:?}"));
            x.shrink(&arg)
        }
        4 if rank > 0 => {
            let axis = rng.below(rank) as isize;
            ops.push(format!("flip {axis}"));
            x.flip(&[axis])
        }
        _ => {
            let target: Vec<isize> = shape
                .iter()
                .map(|&d| if d == 1 { 3 } else { d as isize })
                .collect();
            ops.push(format!("expand {target:?}"));
            x.expand(&target)
        }
    }
}

fn build(seed: u64, device: &str) -> Result<Built> {
    let mut rng = Rng(seed);
    let rank = 1 + rng.below(3);
    let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(5)).collect();
    let mut ops = vec![format!("input {shape:?}")];
    let mut sums = false;
    let mut x = input(&mut rng, &shape, device)?;
    for _ in 0..1 + rng.below(7) {
        x = match rng.below(10) {
            0..=2 => unary(&mut rng, &x, &mut ops, &mut sums)?,
            3..=5 => binary(&mut rng, &x, device, &mut ops)?,
            6 => reduce(&mut rng, &x, &mut ops, &mut sums)?,
            7 | 8 => movement(&mut rng, &x, &mut ops)?,
            _ => {
                ops.push("cast half and back".into());
                x.cast(dtypes::float16)?.cast(dtypes::float32)?
            }
        };
    }
    Ok(Built { out: x, ops, sums })
}

/// A case's outcome on one device: its shape and values (or the error's text), the ops applied,
/// and whether the graph sums.
type Outcome = (
    std::result::Result<(Vec<usize>, Vec<f32>), String>,
    Vec<String>,
    bool,
);

/// The case's result on `device`: its shape and values, or the error's text.
fn run(seed: u64, device: &str) -> Outcome {
    let res = catch_unwind(AssertUnwindSafe(|| {
        let b = match build(seed, device) {
            Ok(b) => b,
            Err(e) => return (Err(format!("build: {e}")), vec![], false),
        };
        let got = b
            .out
            .realize()
            .and_then(|t| Ok((t.shape(), t.to_vec::<f32>()?)));
        (got.map_err(|e| e.to_string()), b.ops, b.sums)
    }));
    res.unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("case seed {seed} on {device} panicked: {msg}")
    })
}

fn same(a: f32, b: f32, tolerant: bool) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.to_bits() == b.to_bits() {
        return true;
    }
    tolerant
        && a.is_finite()
        && b.is_finite()
        && (a - b).abs() <= 4e-5 + 1e-5 * a.abs().max(b.abs())
}

fn devices() -> Vec<String> {
    let mut out = vec!["CLANG".to_string(), "LLVM".to_string()];
    let d = rawgrad::runtime::builtin::default_device().unwrap();
    if !out.contains(&d) && d != "INTERP" {
        out.push(d);
    }
    out
}

#[test]
fn random_op_graphs_give_interps_answer_on_every_device() {
    let cases = rawgrad::helpers::getenv("GRAPH_FUZZ_CASES", 40).max(1) as u64;
    let seed0 = rawgrad::helpers::getenv("GRAPH_FUZZ_SEED", 1) as u64;
    let devs = devices();
    let (mut compared, mut errors) = (0usize, 0usize);
    for case in 0..cases {
        let seed = seed0.wrapping_mul(1_000_003).wrapping_add(case);
        let (want, ops, sums) = run(seed, "INTERP");
        for dev in &devs {
            let (got, _, _) = run(seed, dev);
            let ctx = || format!("case seed {seed} on {dev} vs INTERP, ops {ops:?}");
            match (&want, &got) {
                (Ok((ws, wv)), Ok((gs, gv))) => {
                    assert_eq!(ws, gs, "shape: {}", ctx());
                    for (i, (w, g)) in wv.iter().zip(gv).enumerate() {
                        assert!(
                            same(*w, *g, sums),
                            "element {i}: INTERP {w:?}, {dev} {g:?}: {}",
                            ctx()
                        );
                    }
                    compared += 1;
                }
                (Err(_), Err(_)) => errors += 1,
                (Ok(_), Err(e)) => panic!("{dev} failed where INTERP did not: {e}: {}", ctx()),
                (Err(e), Ok(_)) => panic!("INTERP failed where {dev} did not: {e}: {}", ctx()),
            }
        }
    }
    println!("{cases} graphs on {devs:?}: {compared} compared, {errors} errors on both sides");
    assert!(compared > 0, "no graph was compared");
}
