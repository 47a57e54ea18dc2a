//! Hand-built UOp kernels run on the interpreter and, rendered by the CLANG renderer, compiled with
//! the system C compiler: results must agree (bit for bit for integers, closely for floats),
//! including when the outer loop is split across several "cores".

mod common;

use common::cc::{compile, compiler};
use common::*;
use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::dtype::{dtypes, ConstValue, DType, Scalar};
use rawgrad::interp::InterpProgram;
use rawgrad::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;

type Buffers = Vec<Vec<u8>>;
/// (op, input dtypes, output dtype, input columns)
type Case = (Op, Vec<DType>, DType, Vec<Vec<f64>>);

/// Run `sinks` on the interpreter and as compiled C (1 and 3 cores); return both output sets.
fn both(name: &str, sinks: &[UOp], bufs: &[Vec<u8>], vals: &[i64]) -> Option<(Buffers, Buffers)> {
    let uops = linearize(sinks, None, true).unwrap();
    let mut interp = bufs.to_vec();
    InterpProgram::new(name, &uops)
        .unwrap()
        .run(&mut interp, vals, [1, 1, 1], [1, 1, 1])
        .unwrap();
    let cc = compiler()?;
    let src = ClangRenderer::new().render(name, &uops).unwrap();
    let lib = compile(cc, &src);
    let ivals: Vec<i32> = vals.iter().map(|&v| v as i32).collect();
    let mut c1 = bufs.to_vec();
    lib.run(name, &mut c1, &ivals, 1);
    let mut c3 = bufs.to_vec();
    lib.run(name, &mut c3, &ivals, 3);
    assert_eq!(c1, c3, "{name}: 3 cores differ from 1\n{src}");
    Some((interp, c1))
}

fn close(a: ConstValue, b: ConstValue, rtol: f64) -> bool {
    let (x, y) = (a.as_f64(), b.as_f64());
    (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= rtol * x.abs().max(y.abs())
}

#[test]
fn elementwise_add_agrees() {
    let a: Vec<f64> = (0..37).map(|i| i as f64 * 0.25 - 3.0).collect();
    let b: Vec<f64> = (0..37).map(|i| (i * i) as f64 * 0.5).collect();
    for (dt, rtol) in [
        (dtypes::float32, 0.0),
        (dtypes::int32, 0.0),
        (dtypes::float16, 0.0),
        (dtypes::float64, 0.0),
        (dtypes::bfloat16, 1e-2),
    ] {
        let s = dt.scalar;
        let bufs = vec![
            vec![0u8; 37 * s.itemsize()],
            bytes_of(&a, s),
            bytes_of(&b, s),
        ];
        let Some((i, c)) = both("E_37", &elementwise_add(37, dt), &bufs, &[]) else {
            return;
        };
        let (iv, cv) = (values(&i[0], s), values(&c[0], s));
        for k in 0..37 {
            assert!(
                close(iv[k], cv[k], rtol),
                "{dt} [{k}] interp {:?} C {:?}",
                iv[k],
                cv[k]
            );
        }
        // and the interpreter is right
        if matches!(s, Scalar::Float32 | Scalar::Float64) {
            let want = bytes_of(&a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<_>>(), s);
            assert_eq!(i[0], want, "{dt}");
        }
    }
}

#[test]
fn reduction_agrees() {
    let x: Vec<f64> = (0..6 * 19).map(|i| ((i * 7) % 23) as f64 - 11.0).collect();
    for (dt, acc) in [
        (dtypes::int8, dtypes::int32),
        (dtypes::float16, dtypes::float32),
        (dtypes::uint16, dtypes::uint32),
        (dtypes::float32, dtypes::float32),
    ] {
        let bufs = vec![vec![0u8; 6 * acc.itemsize()], bytes_of(&x, dt.scalar)];
        let Some((i, c)) = both("r_6_19", &reduce_sum(6, 19, dt, acc), &bufs, &[]) else {
            return;
        };
        assert_eq!(i[0], c[0], "{dt} -> {acc}");
    }
    // check one against the plain sum
    let bufs = vec![vec![0u8; 24], bytes_of(&x, Scalar::Int32)];
    let uops = linearize(&reduce_sum(6, 19, dtypes::int32, dtypes::int32), None, true).unwrap();
    let mut mem = bufs.clone();
    InterpProgram::new("r", &uops)
        .unwrap()
        .run(&mut mem, &[], [1, 1, 1], [1, 1, 1])
        .unwrap();
    let got = values(&mem[0], Scalar::Int32);
    for r in 0..6 {
        let want: f64 = (0..19).map(|k| x[r * 19 + k] * 2.0 + 1.0).sum();
        assert_eq!(got[r].as_f64(), want);
    }
}

#[test]
fn gated_loads_and_stores_agree() {
    let src: Vec<f64> = (0..16).map(|i| (100 + i) as f64).collect();
    let bufs = vec![
        vec![0u8; 64],
        bytes_of(&src, Scalar::Int32),
        vec![0xffu8; 64],
    ];
    let Some((i, c)) = both("E_16_gated", &gated(16, 9), &bufs, &[]) else {
        return;
    };
    assert_eq!(i, c);
    let out: Vec<i128> = values(&i[0], Scalar::Int32)
        .iter()
        .map(|v| v.as_i128())
        .collect();
    let want: Vec<i128> = (0..16)
        .map(|r| if r > 0 && r < 9 { 100 + r - 1 } else { -1 })
        .collect();
    assert_eq!(out, want);
    let side: Vec<i128> = values(&i[2], Scalar::Int32)
        .iter()
        .map(|v| v.as_i128())
        .collect();
    assert_eq!(side[1], 10);
    assert_eq!(side[2], -1);
}

#[test]
fn symbolic_loop_bound_agrees() {
    let src: Vec<f64> = (0..64).map(|i| i as f64 - 5.0).collect();
    let bufs = vec![vec![0u8; 256], bytes_of(&src, Scalar::Float32)];
    // variables in name order: m = 20, n = 7
    let Some((i, c)) = both("E_n", &symbolic(dtypes::float32), &bufs, &[20, 7]) else {
        return;
    };
    assert_eq!(i, c);
    let out = values(&i[0], Scalar::Float32);
    assert_eq!(out[6].as_f64(), 20.0);
    assert_eq!(out[7].as_f64(), 0.0);
}

/// Store `op` over its input buffers into its output buffer, for every element of a loop.
/// Buffer indices: `out` for the result, `ins` for the operands.
fn alu_store(op: Op, ins: &[(usize, DType)], out: (usize, DType), r: &UOp) -> UOp {
    let d0 = UOp::define_global(out.1, out.0, true);
    let srcs = ins
        .iter()
        .map(|&(i, d)| UOp::load(&UOp::define_global(d, i, false), r, d))
        .collect();
    UOp::store(&d0, r, &UOp::alu(op, out.1, srcs))
}

fn test_values(s: Scalar) -> Vec<f64> {
    if s.is_float() {
        vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.5,
            -7.25,
            3.0,
            0.1,
            100.0,
            65504.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]
    } else if s == Scalar::Bool {
        vec![0.0, 1.0]
    } else if s.is_unsigned() {
        vec![0.0, 1.0, 2.0, 3.0, 7.0, 100.0, 127.0, 255.0]
    } else {
        vec![0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -7.0, 7.0, 100.0, -100.0]
    }
}

#[test]
fn alu_ops_agree_for_every_dtype() {
    let Some(_) = compiler() else { return };
    use BinaryOps::*;
    for s in Scalar::ALL {
        let d = DType::new(s);
        let v = test_values(s);
        let a: Vec<f64> = v
            .iter()
            .flat_map(|x| std::iter::repeat(*x).take(v.len()))
            .collect();
        let b: Vec<f64> = (0..v.len()).flat_map(|_| v.iter().copied()).collect();
        let n = a.len();
        let mut cases: Vec<Case> = vec![];
        for op in [ADD, MUL, MAX, CMPLT, CMPNE] {
            let out = if matches!(op, CMPLT | CMPNE) {
                dtypes::bool
            } else {
                d
            };
            cases.push((op.into(), vec![d, d], out, vec![a.clone(), b.clone()]));
        }
        cases.push((UnaryOps::NEG.into(), vec![d], d, vec![a.clone()]));
        let sel: Vec<f64> = (0..n).map(|i| (i % 3 == 0) as u8 as f64).collect();
        cases.push((
            TernaryOps::WHERE.into(),
            vec![dtypes::bool, d, d],
            d,
            vec![sel, a.clone(), b.clone()],
        ));
        if s.is_int() {
            let nz: Vec<f64> = b.iter().map(|&x| if x == 0.0 { 3.0 } else { x }).collect();
            let sh: Vec<f64> = b.iter().map(|&x| (x.abs() as i64 % 7) as f64).collect();
            for op in [IDIV, MOD] {
                cases.push((op.into(), vec![d, d], d, vec![a.clone(), nz.clone()]));
            }
            for op in [XOR, SHL, SHR] {
                cases.push((op.into(), vec![d, d], d, vec![a.clone(), sh.clone()]));
            }
        }
        if s.is_float() {
            for op in [
                UnaryOps::EXP2,
                UnaryOps::LOG2,
                UnaryOps::SIN,
                UnaryOps::SQRT,
                UnaryOps::RECIP,
            ] {
                cases.push((op.into(), vec![d], d, vec![a.clone()]));
            }
        }
        // one kernel per dtype: case c writes buffer c, its inputs follow all outputs
        let r = UOp::range_const(0, n as i64, 1, 0, false);
        let mut bufs: Vec<Vec<u8>> = cases
            .iter()
            .map(|c| vec![0u8; n * c.2.itemsize()])
            .collect();
        let mut sinks = vec![];
        for (ci, (op, ins, out, cols)) in cases.iter().enumerate() {
            let mut operands = vec![];
            for (col, d) in cols.iter().zip(ins) {
                operands.push((bufs.len(), *d));
                bufs.push(bytes_of(col, d.scalar));
            }
            sinks.push(alu_store(*op, &operands, (ci, *out), &r));
        }
        let name = format!("alu_{}", s.long_name());
        let (i, c) = both(&name, &sinks, &bufs, &[]).unwrap();
        for (ci, (op, _, out, cols)) in cases.iter().enumerate() {
            let (iv, cv) = (values(&i[ci], out.scalar), values(&c[ci], out.scalar));
            let rtol = match out.scalar {
                Scalar::BFloat16 => 1e-2,
                Scalar::Float16 => 1e-3,
                Scalar::Float32 => 1e-6,
                Scalar::Float64 => 1e-14,
                _ => 0.0,
            };
            for k in 0..n {
                let args: Vec<f64> = cols.iter().map(|c| c[k]).collect();
                assert!(
                    close(iv[k], cv[k], rtol),
                    "{} {out}: {args:?}: interp {:?} C {:?}",
                    op.name(),
                    iv[k],
                    cv[k]
                );
            }
        }
    }
}

#[test]
fn vectors_casts_and_bitcasts_agree() {
    // data0[4r..4r+4] = float4 lanes of data1 reversed and scaled; data2[r] = bits of data1[r];
    // data3[r] = (half)data1[r]; data4[r] = bf16 of data1[r], data5[r] = its bits; data6[r] = (int)
    let d = |i: usize, dt: DType| UOp::define_global(dt, i, i != 1);
    let r = UOp::range_const(0, 8, 1, 0, false);
    let x = UOp::load(&d(1, dtypes::float32), &r, dtypes::float32);
    let q = r.mul(4).modulo(32);
    let v = UOp::load(&d(1, dtypes::float32), &q, dtypes::float32.vec(4));
    let lanes: Vec<UOp> = (0..4)
        .rev()
        .map(|i| UOp::gep(&v, i, dtypes::float32).mul(2.0))
        .collect();
    let b = x.cast(dtypes::bfloat16);
    let sinks = vec![
        UOp::store(
            &d(0, dtypes::float32),
            &q,
            &UOp::vectorize(lanes, dtypes::float32.vec(4)),
        ),
        UOp::store(&d(2, dtypes::uint32), &r, &x.bitcast(dtypes::uint32)),
        UOp::store(&d(3, dtypes::float16), &r, &x.cast(dtypes::float16)),
        UOp::store(&d(4, dtypes::bfloat16), &r, &b),
        UOp::store(&d(5, dtypes::int16), &r, &b.bitcast(dtypes::int16)),
        UOp::store(&d(6, dtypes::int32), &r, &x.cast(dtypes::int32)),
        UOp::store(
            &d(7, dtypes::float32),
            &r,
            &x.bitcast(dtypes::int32).bitcast(dtypes::float32),
        ),
    ];
    let src: Vec<f64> = (0..32).map(|i| (i as f64 - 9.5) * 1.37).collect();
    let bufs = vec![
        vec![0u8; 128],
        bytes_of(&src, Scalar::Float32),
        vec![0u8; 32],
        vec![0u8; 16],
        vec![0u8; 16],
        vec![0u8; 16],
        vec![0u8; 32],
        vec![0u8; 32],
    ];
    let Some((i, c)) = both("E_vec", &sinks, &bufs, &[]) else {
        return;
    };
    for k in [0, 2, 3, 6, 7] {
        assert_eq!(i[k], c[k], "buffer {k}");
    }
    // bfloat16 rounding of a float32 value: C rounds from float, the interpreter from f64
    let (ib, cb) = (
        values(&i[4], Scalar::BFloat16),
        values(&c[4], Scalar::BFloat16),
    );
    for k in 0..8 {
        assert!(
            close(ib[k], cb[k], 1e-2),
            "bf16 [{k}] {:?} {:?}",
            ib[k],
            cb[k]
        );
    }
    let got = values(&i[0], Scalar::Float32);
    assert_eq!(got[0].as_f64(), (src[3] as f32 * 2.0) as f64);
}
