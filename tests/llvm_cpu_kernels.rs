//! The `LLVM` CPU device runs the kernels of the C renderer tests (tests/uop_kernels.rs) and must
//! match the UOp interpreter bit for bit, floats included (the CPU flavour has no fast-math
//! flags). Every kernel runs on 1 and on 3 "cores" (the outer loop split), with every installed
//! libLLVM (LLVM 14 renders typed pointers, 15+ opaque ones), loaded by rawgrad's own loader.

mod common;

use std::sync::Arc;

use common::*;
use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::device::{BufferOptions, Compiler, Runtime};
use rawgrad::dtype::{dtypes, ConstValue, DType, Scalar};
use rawgrad::ffi::llvm::{find_libraries, Llvm, MIN_LLVM_MAJOR};
use rawgrad::interp::InterpProgram;
use rawgrad::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use rawgrad::renderer::Renderer;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;

/// Equal within `rtol`; with `rtol == 0`, the same bits (so -0.0 differs from 0.0) or both NaN.
fn close(a: ConstValue, b: ConstValue, rtol: f64) -> bool {
    let (x, y) = (a.as_f64(), b.as_f64());
    if rtol == 0.0 {
        return (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
    }
    (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= rtol * x.abs().max(y.abs())
}

type Buffers = Vec<Vec<u8>>;

/// One compiler per installed libLLVM major version (empty without libLLVM or a linker).
fn compilers() -> Vec<LLVMCompiler> {
    let mut out: Vec<LLVMCompiler> = vec![];
    for l in find_libraries() {
        if l.major < MIN_LLVM_MAJOR || out.iter().any(|c| c.llvm().version().major == l.major) {
            continue;
        }
        let c = Llvm::open(&l.path).and_then(LLVMCompiler::with_llvm);
        match c {
            Ok(c) => out.push(c),
            Err(e) => println!("skipped {}: {e}", l.path.display()),
        }
    }
    if out.is_empty() {
        println!("skipped: no libLLVM (or no linker) found");
    }
    out
}

/// Run the compiled kernel on host buffers with `ncores` shares.
fn run_llvm(
    c: &LLVMCompiler,
    name: &str,
    lib: &[u8],
    bufs: &[Vec<u8>],
    vals: &[i64],
    ncores: i64,
) -> Buffers {
    let prg = c.runtime().load(name, lib).unwrap();
    common::run_on_host(&*prg, bufs, vals, ncores)
}

/// The interpreter's outputs and, per installed LLVM, the LLVM device's (1 and 3 cores agree).
fn both(
    name: &str,
    sinks: &[UOp],
    bufs: &[Vec<u8>],
    vals: &[i64],
) -> (Buffers, Vec<(String, Buffers)>) {
    let uops = linearize(sinks, None, true).unwrap();
    let mut interp = bufs.to_vec();
    InterpProgram::new(name, &uops)
        .unwrap()
        .run(&mut interp, vals, [1, 1, 1], [1, 1, 1])
        .unwrap();
    let mut outs = vec![];
    for c in compilers() {
        let src = c.renderer().render(name, &uops).unwrap();
        let lib = c
            .compile(&src)
            .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{src}", c.llvm().version()));
        let one = run_llvm(&c, name, &lib, bufs, vals, 1);
        let three = run_llvm(&c, name, &lib, bufs, vals, 3);
        assert_eq!(one, three, "{name}: 3 cores differ from 1\n{src}");
        outs.push((c.llvm().version().to_string(), one));
    }
    (interp, outs)
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
        (dtypes::bfloat16, 0.0),
        (dtypes::uint8, 0.0),
    ] {
        let s = dt.scalar;
        let bufs = vec![
            vec![0u8; 37 * s.itemsize()],
            bytes_of(&a, s),
            bytes_of(&b, s),
        ];
        let (i, outs) = both("E_37", &elementwise_add(37, dt), &bufs, &[]);
        for (v, c) in outs {
            let (iv, cv) = (values(&i[0], s), values(&c[0], s));
            for k in 0..37 {
                assert!(
                    close(iv[k], cv[k], rtol),
                    "LLVM {v} {dt} [{k}] interp {:?} llvm {:?}",
                    iv[k],
                    cv[k]
                );
            }
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
        let (i, outs) = both("r_6_19", &reduce_sum(6, 19, dt, acc), &bufs, &[]);
        for (v, c) in outs {
            assert_eq!(i[0], c[0], "LLVM {v} {dt} -> {acc}");
        }
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
    let (i, outs) = both("E_16_gated", &gated(16, 9), &bufs, &[]);
    for (v, c) in &outs {
        assert_eq!(&i, c, "LLVM {v}");
    }
    let out: Vec<i128> = values(&i[0], Scalar::Int32)
        .iter()
        .map(|v| v.as_i128())
        .collect();
    let want: Vec<i128> = (0..16)
        .map(|r| if r > 0 && r < 9 { 100 + r - 1 } else { -1 })
        .collect();
    assert_eq!(out, want);
}

#[test]
fn symbolic_loop_bound_agrees() {
    let src: Vec<f64> = (0..64).map(|i| i as f64 - 5.0).collect();
    let bufs = vec![vec![0u8; 256], bytes_of(&src, Scalar::Float32)];
    // variables in name order: m = 20, n = 7; then an empty loop (n = 0) must write nothing
    for (m, n) in [(20, 7), (3, 0), (1, 64)] {
        let (i, outs) = both("E_n", &symbolic(dtypes::float32), &bufs, &[m, n]);
        for (v, c) in &outs {
            assert_eq!(&i, c, "LLVM {v} m={m} n={n}");
        }
        let out = values(&i[0], Scalar::Float32);
        if n > 6 {
            assert_eq!(out[6].as_f64(), m as f64);
        }
        if n == 0 {
            assert!(i[0].iter().all(|&b| b == 0));
        }
    }
}

/// Store `op` over its input buffers into its output buffer, for every element of a loop.
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
            f64::NAN,
        ]
    } else if s == Scalar::Bool {
        vec![0.0, 1.0]
    } else if s.is_unsigned() {
        vec![0.0, 1.0, 2.0, 3.0, 7.0, 100.0, 127.0, 255.0]
    } else {
        vec![
            0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -7.0, 7.0, 100.0, -100.0, -128.0,
        ]
    }
}

/// (op, input dtypes, output dtype, input columns)
type Case = (Op, Vec<DType>, DType, Vec<Vec<f64>>);

fn alu_cases(s: Scalar) -> (Vec<Case>, usize) {
    use BinaryOps::*;
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
        // division by zero and by -1 included: exec_alu's results, no trap
        let sh: Vec<f64> = b.iter().map(|&x| (x.abs() as i64 % 7) as f64).collect();
        for op in [IDIV, MOD] {
            cases.push((op.into(), vec![d, d], d, vec![a.clone(), b.clone()]));
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
    (cases, n)
}

#[test]
fn alu_ops_agree_for_every_dtype() {
    for s in Scalar::ALL {
        let (cases, n) = alu_cases(s);
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
        let (i, outs) = both(&name, &sinks, &bufs, &[]);
        for (v, c) in outs {
            for (ci, (op, _, out, cols)) in cases.iter().enumerate() {
                let (iv, cv) = (values(&i[ci], out.scalar), values(&c[ci], out.scalar));
                // no fast-math flags: the interpreter's bits, -0.0 and NaN included
                let rtol = 0.0;
                for k in 0..n {
                    let args: Vec<f64> = cols.iter().map(|c| c[k]).collect();
                    assert!(
                        close(iv[k], cv[k], rtol),
                        "LLVM {v}: {} {out}: {args:?}: interp {:?} llvm {:?}",
                        op.name(),
                        iv[k],
                        cv[k]
                    );
                }
            }
        }
    }
}

#[test]
fn vectors_casts_and_bitcasts_agree() {
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
        UOp::store(&d(8, dtypes::bool), &r, &x.cast(dtypes::bool)),
        UOp::store(
            &d(9, dtypes::uint8),
            &r,
            &x.cast(dtypes::bool).cast(dtypes::uint8),
        ),
    ];
    let mut src: Vec<f64> = (0..32).map(|i| (i as f64 - 9.5) * 1.37).collect();
    src[2] = 0.0;
    let bufs = vec![
        vec![0u8; 128],
        bytes_of(&src, Scalar::Float32),
        vec![0u8; 32],
        vec![0u8; 16],
        vec![0u8; 16],
        vec![0u8; 16],
        vec![0u8; 32],
        vec![0u8; 32],
        vec![0u8; 8],
        vec![0u8; 8],
    ];
    let (i, outs) = both("E_vec", &sinks, &bufs, &[]);
    for (ver, c) in outs {
        for k in [0, 2, 3, 6, 7, 8, 9] {
            assert_eq!(i[k], c[k], "LLVM {ver}: buffer {k}");
        }
        let (ib, cb) = (
            values(&i[4], Scalar::BFloat16),
            values(&c[4], Scalar::BFloat16),
        );
        for k in 0..8 {
            assert!(
                close(ib[k], cb[k], 1e-2),
                "LLVM {ver}: bf16 [{k}] {:?} {:?}",
                ib[k],
                cb[k]
            );
        }
    }
}

#[test]
fn runs_through_the_device_record() {
    // the registry's record: allocator, compiler, runtime and renderer of one device
    let dev = match rawgrad::runtime::cpu::llvm::open_llvm("LLVM") {
        Ok(d) => Arc::new(d),
        Err(e) => return println!("skipped: {e}"),
    };
    assert_eq!(dev.renderer.opts().device, "LLVM");
    let uops = linearize(&elementwise_add(8, dtypes::int32), None, true).unwrap();
    let src = dev.renderer.render("E_8", &uops).unwrap();
    let lib = rawgrad::device::compile_cached(dev.compiler.as_ref(), &src).unwrap();
    let prg = dev.runtime.load("E_8", &lib).unwrap();
    let o = BufferOptions::default();
    let bufs: Vec<_> = (0..3)
        .map(|_| dev.allocator.alloc(32, &o).unwrap())
        .collect();
    let xs: Vec<u8> = (0..8i32).flat_map(|v| v.to_le_bytes()).collect();
    dev.allocator.copyin(&bufs[1], &xs).unwrap();
    dev.allocator.copyin(&bufs[2], &xs).unwrap();
    prg.call(&bufs, &[], Some([8, 1, 1]), None, true).unwrap();
    let mut out = vec![0u8; 32];
    dev.allocator.copyout(&mut out, &bufs[0]).unwrap();
    let got: Vec<i32> = out
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..8).map(|v| 2 * v).collect::<Vec<i32>>());
}

#[test]
fn a_loop_inside_an_if_agrees() {
    // data0[r0] = sum over r1 < 4 of data1[r0*4 + r1], only where r0 < 5 (an IF around a reduce)
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let r0 = UOp::range_const(0, 8, 1, 0, false);
    let cond = r0.lt(5);
    let iff = UOp::if_(&cond, None);
    let r1 = UOp::range_const(0, 4, 2, 1, true);
    let acc = UOp::define_acc(f, 0.0, std::slice::from_ref(&r1), 0, 0);
    let x = UOp::load_after(&d1, &r0.mul(4).add(&r1), None, &iff, f);
    let p = UOp::phi(&acc, &x.add(&acc));
    let sinks = [UOp::store_gated(&d0, &r0, &p, &cond)];
    let src: Vec<f64> = (0..32).map(|i| i as f64).collect();
    let bufs = vec![
        bytes_of(&[-1.0; 8], Scalar::Float32),
        bytes_of(&src, Scalar::Float32),
    ];
    let (i, outs) = both("r_8_4_if", &sinks, &bufs, &[]);
    for (v, c) in &outs {
        assert_eq!(&i, c, "LLVM {v}");
    }
    let got: Vec<f64> = values(&i[0], Scalar::Float32)
        .iter()
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(got, [6.0, 22.0, 38.0, 54.0, 70.0, -1.0, -1.0, -1.0]);
}

#[test]
fn split_constant_offset_addresses_agree() {
    // a vector-only kernel (float4 loads, ALUs and stores; the int arithmetic only indexes):
    // data0[4r+1..] = a*b + a, a = data1[4r+3..], b = data1[-4r+60..], r < 8. Its `x + c`
    // addresses render as `(base + x) + c`, `base + x` outside the buffer for the negative `x`.
    let (f, f4) = (dtypes::float32, dtypes::float32.vec(4));
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let r = UOp::range_const(0, 8, 1, 0, false);
    let a = UOp::load(&d1, &r.mul(4).add(3), f4);
    let b = UOp::load(&d1, &r.mul(-4).add(60), f4);
    let sinks = [UOp::store(&d0, &r.mul(4).add(1), &a.mul(&b).add(&a))];
    let uops = linearize(&sinks, None, true).unwrap();
    let ir = rawgrad::renderer::llvmir::LLVMRenderer::cpu(true)
        .render("E_8_4", &uops)
        .unwrap();
    for want in [
        "getelementptr float, ptr %data1, i64",
        "getelementptr float, ptr %data0, i64",
    ] {
        assert!(ir.contains(want), "{want} not in\n{ir}");
    }
    let src: Vec<f64> = (0..64).map(|i| (i as f64 - 20.5) * 0.37).collect();
    let bufs = vec![
        bytes_of(&[-1.0; 64], Scalar::Float32),
        bytes_of(&src, Scalar::Float32),
    ];
    let (i, outs) = both("E_8_4", &sinks, &bufs, &[]);
    assert!(values(&i[0], Scalar::Float32)[1].as_f64() != -1.0);
    for (v, c) in &outs {
        assert_eq!(&i, c, "LLVM {v}");
    }
}
