//! The vector ALU fold (`codegen/uopgraph/vectorize.rs`, beyond tinygrad 0.9.1) on the CPU
//! renderers: lane-wise kernels over vector loads (GEP each lane, a scalar op, the lanes put back
//! into a vector and stored) run on the interpreter unfolded, and folded into vector ops on the
//! LLVM device (every installed libLLVM) and, for the ops C can do on vectors, as compiled C. The
//! bits must be the interpreter's: NaN, signed zeros, infinities, integer wrap, division by zero,
//! -1 and negatives, shifts.

mod common;

use common::bytes_of;
use common::cc::{compile, compiler};
use rawgrad::codegen::renderer::VectorAlu;
use rawgrad::codegen::uopgraph::{linearize, linearize_for};
use rawgrad::codegen::uops::{UOp, UOps};
use rawgrad::device::{Compiler, Runtime};
use rawgrad::dtype::{dtypes, DType, Scalar};
use rawgrad::ffi::llvm::{find_libraries, Llvm, MIN_LLVM_MAJOR};
use rawgrad::interp::InterpProgram;
use rawgrad::ops::{const_from_bits, BinaryOps, TernaryOps, UnaryOps};
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;

/// The same bits, or both NaN (the sign and payload of a NaN are the hardware's, as in every
/// device test against the interpreter); a differing element is reported.
fn same(a: &[u8], b: &[u8], s: Scalar) -> Result<(), String> {
    let w = s.itemsize();
    for (i, (x, y)) in a.chunks(w).zip(b.chunks(w)).enumerate() {
        let val = |c: &[u8]| {
            let mut raw = [0u8; 8];
            raw[..w].copy_from_slice(c);
            const_from_bits(u64::from_le_bytes(raw), s)
        };
        let (vx, vy) = (val(x), val(y));
        let nan = s.is_float() && vx.as_f64().is_nan() && vy.as_f64().is_nan();
        if x != y && !nan {
            return Err(format!("[{i}]: {vx:?} != {vy:?}"));
        }
    }
    Ok(())
}

/// The scalar expression of one lane from that lane's operands.
type LaneFn = fn(&[UOp]) -> UOp;

/// `out[r*n + j] = f(in_k[r*n + j]...)` for `rows` rows of `n` lanes: one vector load per input,
/// a GEP per lane, `f` per lane, the lanes stored as one vector.
fn lanewise(d: DType, ins: usize, n: usize, rows: usize, f: LaneFn) -> Vec<UOp> {
    let r = UOp::range_const(0, rows as i64, 1, 0, false);
    let idx = r.mul(n as i64);
    let loads: Vec<UOp> = (0..ins)
        .map(|k| UOp::load(&UOp::define_global(d, k + 1, false), &idx, d.vec(n as u16)))
        .collect();
    let lanes: Vec<UOp> = (0..n)
        .map(|j| {
            let ops: Vec<UOp> = loads.iter().map(|l| UOp::gep(l, j, d)).collect();
            f(&ops)
        })
        .collect();
    let out = UOp::define_global(d, 0, true);
    vec![UOp::store(
        &out,
        &idx,
        &UOp::vectorize(lanes, d.vec(n as u16)),
    )]
}

fn compilers() -> Vec<LLVMCompiler> {
    let mut out: Vec<LLVMCompiler> = vec![];
    for l in find_libraries() {
        if l.major < MIN_LLVM_MAJOR || out.iter().any(|c| c.llvm().version().major == l.major) {
            continue;
        }
        if let Ok(c) = Llvm::open(&l.path).and_then(LLVMCompiler::with_llvm) {
            out.push(c);
        }
    }
    out
}

fn run_llvm(c: &LLVMCompiler, name: &str, lib: &[u8], bufs: &[Vec<u8>]) -> Vec<u8> {
    let prg = c.runtime().load(name, lib).unwrap();
    common::run_on_host(&*prg, bufs, &[], 1).swap_remove(0)
}

fn vector_alus(uops: &[UOp]) -> usize {
    uops.iter()
        .filter(|u| u.op() == UOps::ALU && u.dtype().is_some_and(|d| d.count > 1))
        .count()
}

/// Run one lane-wise kernel unfolded on the interpreter and folded on LLVM (and on C when
/// `c_too`); every output must have the interpreter's bytes, and the fold must have happened.
fn check(name: &str, d: DType, n: usize, cols: &[Vec<f64>], f: LaneFn, c_too: bool) {
    let len = cols[0].len();
    assert_eq!(len % n, 0);
    let sinks = lanewise(d, cols.len(), n, len / n, f);
    let mut bufs = vec![vec![0u8; len * d.itemsize()]];
    bufs.extend(cols.iter().map(|c| bytes_of(c, d.scalar)));
    agree(name, d, &sinks, &bufs, c_too);
}

/// Run `sinks` over `bufs` (the output first) unfolded on the interpreter and folded on LLVM
/// (and on C when `c_too`): the output must have the interpreter's bytes, and the fold must have
/// made vector ALUs.
fn agree(name: &str, d: DType, sinks: &[UOp], bufs: &[Vec<u8>], c_too: bool) {
    let scalar = linearize(sinks, None, true).unwrap();
    assert_eq!(vector_alus(&scalar), 0);
    let mut want = bufs.to_vec();
    InterpProgram::new(name, &scalar)
        .unwrap()
        .run(&mut want, &[], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let folded = linearize_for(sinks, VectorAlu::Llvm, true).unwrap();
    assert!(vector_alus(&folded) > 0, "{name}: nothing folded");
    for c in compilers() {
        let src = c.renderer().render(name, &folded).unwrap();
        let lib = c.compile(&src).unwrap();
        let got = run_llvm(&c, name, &lib, bufs);
        if let Err(e) = same(&want[0], &got, d.scalar) {
            panic!("{name} {d}: LLVM {}: {e}\n{src}", c.llvm().version());
        }
    }
    if !c_too {
        return;
    }
    let folded = linearize_for(sinks, VectorAlu::C, true).unwrap();
    assert!(vector_alus(&folded) > 0, "{name}: nothing folded for C");
    let Some(cc) = compiler() else { return };
    let src = ClangRenderer::new().render(name, &folded).unwrap();
    let mut got = bufs.to_vec();
    compile(cc, &src).run(name, &mut got, &[], 1);
    if let Err(e) = same(&want[0], &got[0], d.scalar) {
        panic!("{name} {d}: C: {e}\n{src}");
    }
}

/// Every pair of `vals` as two columns, padded with 1s to a multiple of `n`.
fn pairs(vals: &[f64], n: usize) -> Vec<Vec<f64>> {
    let mut a: Vec<f64> = vals.iter().flat_map(|x| vec![*x; vals.len()]).collect();
    let mut b: Vec<f64> = (0..vals.len()).flat_map(|_| vals.to_vec()).collect();
    while a.len() % n != 0 {
        a.push(1.0);
        b.push(1.0);
    }
    vec![a, b]
}

const FLOATS: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    -7.25,
    0.1,
    1e-40,
    3.0e38,
    -3.0e38,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    -f64::NAN,
];

fn bin(o: BinaryOps) -> impl Fn(&[UOp]) -> UOp {
    move |x| UOp::alu_auto(o, vec![x[0].clone(), x[1].clone()])
}

#[test]
fn float_vector_alus_keep_nan_and_signed_zero_bits() {
    let cases: [(&str, LaneFn, bool); 12] = [
        ("add", |x| x[0].add(&x[1]), true),
        ("mul", |x| x[0].mul(&x[1]), true),
        ("neg", |x| x[0].neg().add(&x[1]), true),
        ("max", |x| bin(BinaryOps::MAX)(x), false),
        ("max0", |x| x[0].max(0.0).mul(&x[1]), false),
        (
            "wherelt",
            |x| UOp::where_(&x[0].lt(&x[1]), &x[0], &x[1]),
            false,
        ),
        (
            "wherene",
            |x| UOp::where_(&x[0].ne(&x[1]), &x[1], &x[0]),
            false,
        ),
        (
            "mulacc",
            |x| {
                UOp::alu_auto(
                    TernaryOps::MULACC,
                    vec![x[0].clone(), x[1].clone(), x[0].clone()],
                )
            },
            false,
        ),
        ("recip", |x| x[0].recip().add(&x[1]), false),
        (
            "sqrt",
            |x| UOp::alu_auto(UnaryOps::SQRT, vec![x[0].clone()]),
            false,
        ),
        (
            "exp2",
            |x| UOp::alu_auto(UnaryOps::EXP2, vec![x[1].clone()]),
            false,
        ),
        ("axpy", |x| x[0].mul(2.0).add(&x[1]).mul(-0.5), true),
    ];
    for (d, n) in [
        (dtypes::float32, 16),
        (dtypes::float64, 4),
        (dtypes::float32, 4),
    ] {
        let cols = pairs(&FLOATS, n);
        for (name, f, c_too) in cases {
            check(&format!("E_{name}"), d, n, &cols, f, c_too);
        }
    }
}

#[test]
fn int_vector_alus_equal_the_interpreter() {
    let ints = [
        0.0,
        1.0,
        -1.0,
        2.0,
        -3.0,
        7.0,
        -7.0,
        65536.0,
        100000.0,
        2147483647.0,
        -2147483648.0,
        31.0,
    ];
    let cases: [(&str, LaneFn); 11] = [
        ("add", |x| x[0].add(&x[1])),
        ("mul", |x| x[0].mul(&x[1])),
        ("idiv", |x| x[0].idiv(&x[1])),
        ("mod", |x| x[0].modulo(&x[1])),
        ("idivc", |x| x[0].idiv(-3)),
        ("modc", |x| x[0].modulo(-3).add(&x[1])),
        ("xor", |x| x[0].xor(&x[1])),
        ("max", |x| x[0].max(&x[1])),
        ("neg", |x| x[0].neg().add(&x[1])),
        ("wherelt", |x| UOp::where_(&x[0].lt(&x[1]), &x[0], &x[1])),
        ("ne", |x| UOp::where_(&x[0].ne(&x[1]), &x[1], x[0].mul(3))),
    ];
    for d in [dtypes::int32, dtypes::uint32] {
        let cols = pairs(&ints, 8);
        for (name, f) in cases {
            check(&format!("E_i{name}"), d, 8, &cols, f, false);
        }
        // shifts by 0..6 (a shift past the width is poison in LLVM, scalar or vector)
        let sh: Vec<f64> = cols[1]
            .iter()
            .map(|b| (b.abs() as i64 % 7) as f64)
            .collect();
        let shifts = vec![cols[0].clone(), sh];
        let shl: LaneFn = |x| bin(BinaryOps::SHL)(x);
        let shr: LaneFn = |x| bin(BinaryOps::SHR)(x);
        check("E_ishl", d, 8, &shifts, shl, false);
        check("E_ishr", d, 8, &shifts, shr, false);
    }
}

/// A variance's reduce as the CPU kernels have it: per row `r`, one `n`-wide load of `x` per step
/// and every lane's `f(x_i, m[r])` added into one scalar accumulator in lane order (a chain of
/// scalar adds), then `post(acc)` stored. The lanes' `f` folds into vector ops (the chain stays
/// scalar and in order, so the sum is the interpreter's).
fn lane_chain(d: DType, n: usize, rows: usize, cols: usize, f: LaneFn, post: LaneFn) -> Vec<UOp> {
    let r = UOp::range_const(0, rows as i64, 1, 0, false);
    let k = UOp::range_const(0, (cols / n) as i64, 2, 1, true);
    let x = UOp::load(
        &UOp::define_global(d, 1, false),
        &r.mul(cols as i64).add(k.mul(n as i64)),
        d.vec(n as u16),
    );
    let m = UOp::load(&UOp::define_global(d, 2, false), &r, d);
    let acc = UOp::define_acc(d, 0.0, &[k], 0, 0);
    let sum = (0..n).fold(acc.clone(), |s, i| {
        f(&[UOp::gep(&x, i, d), m.clone()]).add(&s)
    });
    let out = UOp::define_global(d, 0, true);
    vec![UOp::store(&out, &r, &post(&[UOp::phi(&acc, &sum)]))]
}

/// Rows of `cols` for the variance chains, each with its "mean": every edge value of [`FLOATS`]
/// once among ordinary values and as a whole row, each also as the mean of an ordinary row, a row
/// of alternating signed zeros, one of denormals.
fn variance_rows(cols: usize) -> (Vec<f64>, Vec<f64>) {
    let ordinary = |r: usize| -> Vec<f64> {
        (0..cols)
            .map(|i| (((r * cols + i) as f64) * 0.7547).sin() * 3.0)
            .collect()
    };
    let (mut x, mut m) = (vec![], vec![]);
    for (k, e) in FLOATS.into_iter().enumerate() {
        let mut row = ordinary(k);
        row[5] = e;
        x.extend(row);
        x.extend(vec![e; cols]);
        x.extend(ordinary(k + 100));
        m.extend([0.25, e, e]);
    }
    x.extend((0..cols).map(|i| if i % 2 == 0 { 0.0 } else { -0.0 }));
    x.extend((0..cols).map(|i| 1e-40 * (i % 7) as f64 - 3e-40));
    m.extend([-0.0, 1e-40]);
    (x, m)
}

/// `(x - m)^2` as tinygrad writes it: `(x + -m) * (x + -m)`.
fn square_dev(x: &[UOp]) -> UOp {
    let d = x[0].add(x[1].neg());
    d.mul(&d)
}

#[test]
fn variance_chains_fold_their_lanes_and_keep_the_interpreters_sums() {
    let cases: [(&str, LaneFn, LaneFn, bool); 3] = [
        ("var", square_dev, |a| a[0].mul(1.0 / 255.0), true),
        (
            "std",
            square_dev,
            |a| UOp::alu_auto(UnaryOps::SQRT, vec![a[0].mul(0.5)]),
            true,
        ),
        (
            "absdev",
            |x| x[0].add(x[1].neg()).max(x[1].add(x[0].neg())),
            |a| a[0].clone(),
            false,
        ),
    ];
    let cols = 256;
    let (x, m) = variance_rows(cols);
    for (d, n) in [
        (dtypes::float32, 4),
        (dtypes::float32, 8),
        (dtypes::float64, 4),
    ] {
        let rows = m.len();
        let bufs = vec![
            vec![0u8; rows * d.itemsize()],
            bytes_of(&x, d.scalar),
            bytes_of(&m, d.scalar),
        ];
        for (name, f, post, c_too) in cases {
            let sinks = lane_chain(d, n, rows, cols, f, post);
            agree(&format!("r_{name}{n}"), d, &sinks, &bufs, c_too);
        }
    }
}
