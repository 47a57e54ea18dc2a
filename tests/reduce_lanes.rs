//! Lane accumulators of CPU reduces (`codegen/linearizer/reduce_lanes.rs`, beyond tinygrad
//! 0.9.1): a row max, argmax, argmin, integer sum and integer max over rows holding NaN of either
//! sign, signed zeros, infinities, `i32::MIN`/`i32::MAX`, ties and wrapping sums give INTERP's
//! bits (a NaN: any NaN, its sign and payload being the hardware's) and a host reference on CLANG
//! and LLVM, for row counts and lengths that do and do not divide by 4 and 8 (some kernels get
//! lane accumulators, some 0.9.1's single one). The rendered LLVM kernel of a row max and an
//! argmax hold each row's unrolled lanes in one vector accumulator (a float or int row sum does
//! not), the CLANG ones read their float4 rows as scalar lane loads, and a GPU renderer's UOps do
//! not depend on `CPU_REDUCE_LANES`.

mod tensor_common;

use rawgrad::codegen::kernel::Kernel;
use rawgrad::codegen::uops::{UOp, UOps};
use rawgrad::dtype::dtypes;
use rawgrad::engine::realize::get_kernel;
use rawgrad::helpers::Context;
use rawgrad::ops::LazyOp;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::cuda::CUDARenderer;
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::Tensor;
use tensor_common::{check, cpu_devices, on};

/// (rows, row length): lane accumulators where the length divides by 4 with a loop left (64, 40,
/// 36, 1028, 8), 0.9.1's fully unrolled reduce where it is at most 32 and does not (17, 24 with
/// 3 rows); rows by 8, by 4 only, and by neither.
const SHAPES: [(usize, usize); 7] = [
    (16, 64),
    (12, 40),
    (7, 36),
    (9, 1028),
    (8, 8),
    (5, 17),
    (3, 24),
];

/// A deterministic value in [-100, 100), distinct enough to give few accidental ties.
fn plain(r: usize, i: usize) -> f32 {
    let h = (r * 7919 + i * 104_729) % 20_011;
    h as f32 / 100.0 - 100.0
}

/// Row `r` of length `c`: plain values with one case of edge values (by `r % 10`) placed in
/// several lanes, late ones included.
fn float_row(r: usize, c: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..c).map(|i| plain(r, i)).collect();
    let (p, q) = ((r * 5 + 3) % c, (r * 11 + c - 1) % c);
    match r % 10 {
        0 => {}
        1 => v[p] = f32::NAN,
        2 => v[q] = -f32::NAN,
        3 => v.iter_mut().for_each(|x| *x = -0.0),
        4 => {
            v.iter_mut().for_each(|x| *x = -0.0);
            v[q] = 0.0;
        }
        5 => {
            v.iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
            v[q] = -0.0;
        }
        6 => v.iter_mut().for_each(|x| *x = f32::NEG_INFINITY),
        7 => {
            v[p] = f32::INFINITY;
            v[q] = f32::INFINITY;
        }
        8 => {
            // a tie of the row's maximum in two lanes
            v[p] = 500.0;
            v[q] = 500.0;
        }
        _ => {
            v[p] = -1e-40;
            v[q] = f32::MIN;
        }
    }
    v
}

/// Row `r` of length `c` of int32 values with `i32::MIN`/`i32::MAX`, ties and sums that wrap.
fn int_row(r: usize, c: usize) -> Vec<i32> {
    let mut v: Vec<i32> = (0..c)
        .map(|i| ((r * 7919 + i * 104_729) % 2001) as i32 - 1000)
        .collect();
    let (p, q) = ((r * 5 + 3) % c, (r * 11 + c - 1) % c);
    match r % 6 {
        0 => {}
        1 => v.iter_mut().for_each(|x| *x = i32::MIN),
        2 => {
            v[p] = i32::MAX;
            v[q] = i32::MAX;
        }
        3 => v.iter_mut().for_each(|x| *x = i32::MAX),
        4 => {
            v[p] = i32::MIN;
            v[q] = 1;
        }
        _ => v
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = if i % 2 == 0 { i32::MAX } else { i32::MIN + 1 }),
    }
    v
}

/// The renderers' float MAX: the greater of two ordered values that are not both zero, else
/// `a + b` (NaN with a NaN, `+0` with a `+0`).
fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() || (a == 0.0 && b == 0.0) {
        a + b
    } else if a > b {
        a
    } else {
        b
    }
}

/// tinygrad's argmax: the first index equal to the row's maximum, else the last index.
fn argmax_ref(row: &[f32]) -> i32 {
    let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| fmax(a, b));
    row.iter().position(|&x| x == m).unwrap_or(row.len() - 1) as i32
}

/// The results of one device: float max, argmax and argmin bits, int sum and int max.
#[derive(Debug, PartialEq)]
struct Results {
    max: Vec<u32>,
    argmax: Vec<i32>,
    argmin: Vec<i32>,
    isum: Vec<i32>,
    imax: Vec<i32>,
}

fn run(dev: &str, rows: usize, c: usize) -> Results {
    let _g = on(dev);
    let f: Vec<f32> = (0..rows).flat_map(|r| float_row(r, c)).collect();
    let i: Vec<i32> = (0..rows).flat_map(|r| int_row(r, c)).collect();
    let ft = Tensor::from_slice(&f, &[rows, c]).unwrap();
    let it = Tensor::from_slice(&i, &[rows, c]).unwrap();
    let ints = |t: Tensor| t.to_vec::<i32>().unwrap();
    Results {
        max: ft
            .max_axis(1, false)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect(),
        argmax: ints(ft.argmax_axis(1, false).unwrap()),
        argmin: ints(ft.argmin_axis(1, false).unwrap()),
        isum: ints(it.sum_axis(1, false).unwrap()),
        imax: ints(it.max_axis(1, false).unwrap()),
    }
}

/// The host reference of [`run`].
fn reference(rows: usize, c: usize) -> Results {
    let f: Vec<Vec<f32>> = (0..rows).map(|r| float_row(r, c)).collect();
    let i: Vec<Vec<i32>> = (0..rows).map(|r| int_row(r, c)).collect();
    let neg = |row: &Vec<f32>| -> Vec<f32> { row.iter().map(|x| -x).collect() };
    Results {
        max: f
            .iter()
            .map(|row| {
                row.iter()
                    .fold(f32::NEG_INFINITY, |a, &b| fmax(a, b))
                    .to_bits()
            })
            .collect(),
        argmax: f.iter().map(|row| argmax_ref(row)).collect(),
        argmin: f.iter().map(|row| argmax_ref(&neg(row))).collect(),
        isum: i
            .iter()
            .map(|row| row.iter().fold(0i32, |a, &b| a.wrapping_add(b)))
            .collect(),
        imax: i.iter().map(|row| *row.iter().max().unwrap()).collect(),
    }
}

/// Float bits compared as the same value, any NaN matching any NaN.
fn canon(bits: &[u32]) -> Vec<u32> {
    bits.iter()
        .map(|&b| {
            if f32::from_bits(b).is_nan() {
                0x7fc0_0000
            } else {
                b
            }
        })
        .collect()
}

fn assert_same(what: &str, got: &Results, want: &Results) {
    assert_eq!(canon(&got.max), canon(&want.max), "{what}: max");
    assert_eq!(got.argmax, want.argmax, "{what}: argmax");
    assert_eq!(got.argmin, want.argmin, "{what}: argmin");
    assert_eq!(got.isum, want.isum, "{what}: int sum");
    assert_eq!(got.imax, want.imax, "{what}: int max");
}

#[test]
fn reductions_over_edge_values_give_the_interpreters_bits_on_every_device() {
    let devs = cpu_devices();
    for (rows, c) in SHAPES {
        let want = reference(rows, c);
        let interp = run(devs[0], rows, c);
        assert_same(&format!("INTERP {rows}x{c} vs host"), &interp, &want);
        for d in &devs[1..] {
            let got = run(d, rows, c);
            assert_same(&format!("{d} {rows}x{c} vs host"), &got, &want);
            assert_same(&format!("{d} {rows}x{c} vs INTERP"), &got, &interp);
        }
    }
}

/// The ASTs of the kernels of `t`'s schedule (scheduling marks `t` as scheduled: once per tensor).
fn asts(t: &Tensor) -> Vec<Vec<LazyOp>> {
    check(&[t], &[], true)
        .into_iter()
        .map(|si| si.ast.clone())
        .collect()
}

/// The rendered source and UOps of `ast` as `r` lowers it (opts from `get_kernel`).
fn rendered(r: &dyn Renderer, ast: &[LazyOp]) -> (String, Vec<UOp>) {
    let mut kernel: Kernel = get_kernel(r, ast).unwrap();
    let uops = kernel.linearize_as("k").unwrap().uops.clone();
    (r.render("k", &uops).unwrap(), uops)
}

/// The vector accumulators (DEFINE_ACC of more than one lane) of `uops`.
fn vector_accs(uops: &[UOp]) -> usize {
    uops.iter()
        .filter(|u| u.op() == UOps::DEFINE_ACC && u.dtype().is_some_and(|d| d.count > 1))
        .count()
}

#[test]
fn cpu_row_reductions_keep_their_lanes_in_vector_accumulators() {
    let _d = on("CLANG");
    let x = Tensor::empty(&[64, 256]).unwrap();
    let xi = Tensor::empty_dtype(&[64, 256], dtypes::int32).unwrap();
    let row_max = asts(&x.max_axis(1, false).unwrap()).remove(0);
    let row_sum = asts(&x.sum_axis(1, false).unwrap()).remove(0);
    let int_sum = asts(&xi.sum_axis(1, false).unwrap()).remove(0);
    // argmax's index max (its last kernel) is an int max
    let argmax = asts(&x.argmax_axis(1, false).unwrap()).pop().unwrap();
    let (c, l) = (ClangRenderer::new(), LLVMRenderer::cpu(false));
    // 8 rows of 4 lanes each: 8 float4 accumulators, one vector op per row and iteration on LLVM
    let (ir, uops) = rendered(&l, &row_max);
    assert_eq!(vector_accs(&uops), 8, "{ir}");
    assert!(ir.contains("phi <4 x float>"), "{ir}");
    assert!(ir.contains("fcmp ogt <4 x float>"), "{ir}");
    let (ir, _) = rendered(&l, &argmax);
    assert!(ir.contains("phi <4 x i32>"), "{ir}");
    // C has no vector MAX: CLANG keeps 0.9.1's one accumulator per row, and reads each row's
    // float4 lane by lane as four scalar loads (`cstyle/lane_loads.rs`), which the edge-value
    // test above then runs
    for max in [&row_max, &argmax] {
        let (src, uops) = rendered(&c, max);
        assert_eq!(vector_accs(&uops), 0, "{src}");
        let vec_loads = uops
            .iter()
            .filter(|u| u.op() == UOps::LOAD && u.dtype().is_some_and(|d| d.count == 4))
            .count();
        assert!(vec_loads > 0, "{src}");
        assert!(!src.contains("float4 val"), "{src}");
        assert!(src.contains("+3];"), "{src}");
    }
    // a float sum keeps one accumulator per row (reassociating float adds changes bits), and so
    // does an int sum (lanes would hide arange's windowed sum from the loop collapse)
    for sum in [&row_sum, &int_sum] {
        let (src, uops) = rendered(&l, sum);
        assert_eq!(vector_accs(&uops), 0, "{src}");
    }
    let _off = Context::new(&[("CPU_REDUCE_LANES", 0)]);
    let (ir, uops) = rendered(&l, &row_max);
    assert_eq!(vector_accs(&uops), 0, "{ir}");
    assert!(!ir.contains("phi <4 x float>"), "{ir}");
}

#[test]
fn gpu_uops_do_not_depend_on_cpu_reduce_lanes() {
    let _d = on("CLANG");
    let x = Tensor::empty(&[64, 256]).unwrap();
    let xi = Tensor::empty_dtype(&[64, 256], dtypes::int32).unwrap();
    let cuda = CUDARenderer::new(80);
    let mut kernels = asts(&x.argmax_axis(1, false).unwrap());
    kernels.extend(asts(&xi.sum_axis(1, false).unwrap()));
    for ast in &kernels {
        let (_, on_uops) = rendered(&cuda, ast);
        let _off = Context::new(&[("CPU_REDUCE_LANES", 0)]);
        let (_, off_uops) = rendered(&cuda, ast);
        assert_eq!(on_uops, off_uops);
    }
}
