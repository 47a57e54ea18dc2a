//! Interpreter semantics: ALU results for every dtype against `exec_alu`, loops, accumulators,
//! gates, IF masks, locals, WMMA lane layouts, bounds errors, and folded-vs-unfolded equivalence.

use super::*;
use crate::codegen::pattern::PatternMatcher;
use crate::codegen::uop_serial::serialize;
use crate::codegen::uopgraph::{linearize, linearize_with};
use crate::codegen::uops::{UOp, WmmaArg};
use crate::dtype::{dtypes, DType};
use crate::ops::{const_from_bits, const_to_bits, exec_alu, BinaryOps, Op, TernaryOps, UnaryOps};

fn bytes_of(vals: &[ConstValue], s: Scalar) -> Vec<u8> {
    let mut out = vec![];
    for v in vals {
        out.extend_from_slice(
            &const_to_bits(v.truncate(DType::new(s)), s).to_le_bytes()[..s.itemsize()],
        );
    }
    out
}

fn values_of(bytes: &[u8], s: Scalar) -> Vec<u64> {
    bytes
        .chunks(s.itemsize())
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(raw)
        })
        .collect()
}

fn run(uops: &[UOp], mem: &mut Vec<Vec<u8>>, vals: &[i64], global: [usize; 3], local: [usize; 3]) {
    let p = InterpProgram::new("test", uops).unwrap();
    p.run(mem, vals, global, local).unwrap();
}

fn test_values(s: Scalar) -> Vec<ConstValue> {
    use ConstValue::*;
    if s.is_float() {
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.5,
            -7.25,
            3.0,
            1e-3,
            0.1,
            65504.0,
            70000.0,
            1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]
        .into_iter()
        .map(Float)
        .collect()
    } else if s == Scalar::Bool {
        vec![Bool(false), Bool(true)]
    } else {
        let bits = 8 * s.itemsize() as u32;
        let (min, max) = if s.is_unsigned() {
            (0i128, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        };
        [
            0,
            1,
            -1,
            2,
            -2,
            3,
            -7,
            7,
            100,
            -100,
            127,
            -128,
            255,
            min,
            max,
            max - 1,
            min + 1,
        ]
        .into_iter()
        .map(|v| Int(v).truncate(DType::new(s)))
        .collect()
    }
}

/// data0[i] = op(data1[i], data2[i], data3[i]) over a loop; compare every lane with exec_alu.
fn check_op(op: Op, ins: &[Scalar], out: Scalar, columns: &[Vec<ConstValue>]) {
    let n = columns[0].len();
    let d0 = UOp::define_global(DType::new(out), 0, true);
    let r = UOp::range_const(0, n as i64, 1, 0, false);
    let srcs: Vec<UOp> = ins
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            UOp::load(
                &UOp::define_global(DType::new(s), i + 1, false),
                &r,
                DType::new(s),
            )
        })
        .collect();
    let alu = UOp::alu(op, DType::new(out), srcs);
    let uops = linearize(&[UOp::store(&d0, &r, &alu)], None, true).unwrap();
    let mut mem = vec![vec![0u8; n * out.itemsize()]];
    for (col, &s) in columns.iter().zip(ins) {
        mem.push(bytes_of(col, s));
    }
    run(&uops, &mut mem, &[], [1, 1, 1], [1, 1, 1]);
    let got = values_of(&mem[0], out);
    for i in 0..n {
        let args: Vec<ConstValue> = columns
            .iter()
            .zip(ins)
            .map(|(c, &s)| const_from_bits(const_to_bits(c[i].truncate(DType::new(s)), s), s))
            .collect();
        let want = exec_alu(op, DType::new(out), &args).unwrap();
        let want = const_to_bits(want, out) & mask(out);
        assert_eq!(got[i], want, "{} {:?} on {args:?}", op.name(), out);
    }
}

fn mask(s: Scalar) -> u64 {
    if s.itemsize() == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * s.itemsize())) - 1
    }
}

/// All pairs of the test values.
fn pairs(s: Scalar) -> (Vec<ConstValue>, Vec<ConstValue>) {
    let v = test_values(s);
    let a = v
        .iter()
        .flat_map(|x| std::iter::repeat(*x).take(v.len()))
        .collect();
    let b = (0..v.len()).flat_map(|_| v.iter().copied()).collect();
    (a, b)
}

#[test]
fn alu_matches_exec_alu_for_every_dtype() {
    use BinaryOps::*;
    for s in Scalar::ALL {
        let (a, b) = pairs(s);
        let mut bin = vec![ADD, MUL, MAX, CMPLT, CMPNE];
        if s.is_int() {
            bin.extend([IDIV, MOD, XOR]);
        }
        if s == Scalar::Bool {
            bin.push(XOR);
        }
        for op in bin {
            let out = if matches!(op, CMPLT | CMPNE) {
                Scalar::Bool
            } else {
                s
            };
            check_op(op.into(), &[s, s], out, &[a.clone(), b.clone()]);
        }
        let mut un = vec![UnaryOps::NEG];
        if s.is_float() {
            un.extend([
                UnaryOps::EXP2,
                UnaryOps::LOG2,
                UnaryOps::SIN,
                UnaryOps::SQRT,
                UnaryOps::RECIP,
            ]);
        }
        for op in un {
            check_op(op.into(), &[s], s, &[test_values(s)]);
        }
        // WHERE with a bool selector, MULACC
        let sel: Vec<ConstValue> = (0..a.len()).map(|i| ConstValue::Bool(i % 3 == 0)).collect();
        check_op(
            TernaryOps::WHERE.into(),
            &[Scalar::Bool, s, s],
            s,
            &[sel, a.clone(), b.clone()],
        );
        if s != Scalar::Bool {
            check_op(
                TernaryOps::MULACC.into(),
                &[s, s, s],
                s,
                &[a.clone(), b.clone(), a.clone()],
            );
        }
        if s.is_int() {
            // shifts by in-range amounts
            let bits = 8 * s.itemsize() as i128;
            let sh: Vec<ConstValue> = b
                .iter()
                .map(|v| ConstValue::Int(v.as_i128().rem_euclid(bits)))
                .collect();
            for op in [SHL, SHR] {
                check_op(op.into(), &[s, s], s, &[a.clone(), sh.clone()]);
            }
        }
    }
}

#[test]
fn integer_division_truncates_like_c() {
    let a: Vec<ConstValue> = [-7, 7, -7, 7, -1, 0]
        .into_iter()
        .map(ConstValue::Int)
        .collect();
    let b: Vec<ConstValue> = [2, -2, -2, 2, 3, 5]
        .into_iter()
        .map(ConstValue::Int)
        .collect();
    check_op(
        BinaryOps::IDIV.into(),
        &[Scalar::Int32; 2],
        Scalar::Int32,
        &[a.clone(), b.clone()],
    );
    check_op(
        BinaryOps::MOD.into(),
        &[Scalar::Int32; 2],
        Scalar::Int32,
        &[a.clone(), b.clone()],
    );
    // and the values are C's
    let d0 = UOp::define_global(dtypes::int32, 0, true);
    let r = UOp::range_const(0, 6, 1, 0, false);
    let l = |i| {
        UOp::load(
            &UOp::define_global(dtypes::int32, i, false),
            &r,
            dtypes::int32,
        )
    };
    let uops = linearize(&[UOp::store(&d0, &r, &l(1).idiv(l(2)))], None, true).unwrap();
    let mut mem = vec![
        vec![0; 24],
        bytes_of(&a, Scalar::Int32),
        bytes_of(&b, Scalar::Int32),
    ];
    run(&uops, &mut mem, &[], [1, 1, 1], [1, 1, 1]);
    let got: Vec<i32> = values_of(&mem[0], Scalar::Int32)
        .iter()
        .map(|&v| v as u32 as i32)
        .collect();
    assert_eq!(got, vec![-3, -3, 3, 3, 0, 0]);
}

#[test]
fn casts_and_bitcasts() {
    // float -> half overflows to inf, int -> uint8 wraps, float -> int truncates
    let d0 = UOp::define_global(dtypes::float16, 0, true);
    let d1 = UOp::define_global(dtypes::uint8, 1, true);
    let d2 = UOp::define_global(dtypes::int32, 2, true);
    let d3 = UOp::define_global(dtypes::uint32, 3, true);
    let c0 = UOp::cnst(dtypes::int32, 0);
    let big = UOp::define_var("v", 0, 100000);
    let f = big.cast(dtypes::float32).mul(1.5);
    let sts = vec![
        UOp::store(&d0, &c0, &f.cast(dtypes::float16)),
        UOp::store(&d1, &c0, &big.cast(dtypes::uint8)),
        UOp::store(&d2, &c0, &f.neg().cast(dtypes::int32)),
        UOp::store(&d3, &c0, &f.bitcast(dtypes::uint32)),
    ];
    let uops = linearize(&sts, None, true).unwrap();
    let mut mem = vec![vec![0; 2], vec![0; 1], vec![0; 4], vec![0; 4]];
    run(&uops, &mut mem, &[70001], [1, 1, 1], [1, 1, 1]);
    assert_eq!(
        u16::from_le_bytes([mem[0][0], mem[0][1]]),
        half::f16::INFINITY.to_bits()
    );
    assert_eq!(mem[1][0], (70001u32 & 0xff) as u8);
    assert_eq!(i32::from_le_bytes(mem[2][..4].try_into().unwrap()), -105001);
    assert_eq!(
        u32::from_le_bytes(mem[3][..4].try_into().unwrap()),
        105001.5f32.to_bits()
    );
}

#[test]
fn vectors_load_store_gep() {
    // data0[4i..4i+4] = reversed lanes of float4 loads of data1, times 2
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let r = UOp::range_const(0, 2, 1, 0, false);
    let idx = r.mul(4);
    let v = UOp::load(&d1, &idx, dtypes::float32.vec(4));
    let lanes: Vec<UOp> = (0..4)
        .rev()
        .map(|i| UOp::gep(&v, i, dtypes::float32).mul(2.0))
        .collect();
    let st = UOp::store(&d0, &idx, &UOp::vectorize(lanes, dtypes::float32.vec(4)));
    let uops = linearize(&[st], None, true).unwrap();
    let src: Vec<ConstValue> = (0..8).map(|i| ConstValue::Float(i as f64)).collect();
    let mut mem = vec![vec![0; 32], bytes_of(&src, Scalar::Float32)];
    run(&uops, &mut mem, &[], [1, 1, 1], [1, 1, 1]);
    let got: Vec<f32> = values_of(&mem[0], Scalar::Float32)
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect();
    assert_eq!(got, vec![6.0, 4.0, 2.0, 0.0, 14.0, 12.0, 10.0, 8.0]);
}

#[test]
fn out_of_bounds_is_an_error_naming_the_access() {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let r = UOp::range_const(0, 4, 1, 0, false);
    let st = UOp::store(&d0, &r, &UOp::load(&d1, &r.add(1), dtypes::float32));
    let uops = linearize(&[st], None, true).unwrap();
    let p = InterpProgram::new("oob", &uops).unwrap();
    let mut mem = vec![vec![0u8; 16], vec![0u8; 16]];
    let err = p.run(&mut mem, &[], [1, 1, 1], [1, 1, 1]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("data1[4]") && msg.contains("holds 4 elements"),
        "{msg}"
    );
    // negative indices too, and stores
    let st = UOp::store(&d0, &r.sub(1), &UOp::cnst(dtypes::float32, 1.0));
    let uops = linearize(&[st], None, true).unwrap();
    let err = InterpProgram::new("oob", &uops)
        .unwrap()
        .run(&mut mem, &[], [1, 1, 1], [1, 1, 1])
        .unwrap_err();
    assert!(
        err.to_string().contains("store out of bounds: data0[-1]"),
        "{err}"
    );
    // wrong variable count and missing buffers are errors, not panics
    assert!(p.run(&mut mem, &[3], [1, 1, 1], [1, 1, 1]).is_err());
    assert!(p
        .run(&mut vec![vec![0u8; 16]], &[], [1, 1, 1], [1, 1, 1])
        .is_err());
}

fn int_kernel_output(uops: &[UOp], n: usize, vals: &[i64]) -> Vec<i32> {
    let mut mem = vec![vec![0u8; 4 * n]];
    run(uops, &mut mem, vals, [1, 1, 1], [1, 1, 1]);
    values_of(&mem[0], Scalar::Int32)
        .iter()
        .map(|&v| v as u32 as i32)
        .collect()
}

/// out[g] = sum over r in [0, n) of (g + mval*r < compval ? mult : 0)
fn arange_sum(n: i64, mval: i64, compval: i64, mult: i64) -> Vec<UOp> {
    let g = UOp::range_const(0, 12, 1, 0, false);
    let rng = UOp::range_const(0, n, 2, 0, true);
    let cond = g.add(rng.mul(mval)).lt(compval);
    let val = UOp::where_(
        &cond,
        UOp::cnst(dtypes::int32, mult),
        UOp::cnst(dtypes::int32, 0),
    );
    let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rng), 0, 0);
    let phi = UOp::phi(&acc, &val.add(&acc));
    vec![UOp::store(
        &UOp::define_global(dtypes::int32, 0, true),
        &g,
        &phi,
    )]
}

#[test]
fn arange_fold_keeps_the_values() {
    for (n, mval, compval, mult) in [
        (10, -1, 1, 1),
        (10, -2, 1, 3),
        (7, -3, 2, 2),
        (12, -1, -3, 5),
        (5, -4, 9, 1),
    ] {
        let sinks = arange_sum(n, mval, compval, mult);
        let folded = linearize(&sinks, None, true).unwrap();
        let raw = linearize_with(&sinks, &PatternMatcher::default(), true).unwrap();
        assert!(
            folded
                .iter()
                .filter(|u| u.op() == crate::codegen::uops::UOps::RANGE)
                .count()
                == 1
        );
        let want: Vec<i32> = (0..12)
            .map(|g| (0..n).filter(|r| g + mval * r < compval).count() as i32 * mult as i32)
            .collect();
        assert_eq!(
            int_kernel_output(&raw, 12, &[]),
            want,
            "unfolded {n} {mval} {compval}"
        );
        assert_eq!(
            int_kernel_output(&folded, 12, &[]),
            want,
            "folded {n} {mval} {compval}"
        );
    }
}

#[test]
fn sum_collapse_keeps_the_values_with_a_variable_bound() {
    // out[0] = sum over r in [0, n) of (v*3), n and v variables
    let n = UOp::define_var("n", 0, 100);
    let v = UOp::define_var("v", 0, 100);
    let rng = UOp::range(UOp::cnst(dtypes::int32, 0), n, 1, 0, true);
    let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rng), 0, 0);
    let phi = UOp::phi(&acc, &v.mul(3).add(&acc));
    let sinks = vec![UOp::store(
        &UOp::define_global(dtypes::int32, 0, true),
        &UOp::cnst(dtypes::int32, 0),
        &phi,
    )];
    let folded = linearize(&sinks, None, true).unwrap();
    assert!(folded
        .iter()
        .all(|u| u.op() != crate::codegen::uops::UOps::RANGE));
    let raw = linearize_with(&sinks, &PatternMatcher::default(), true).unwrap();
    for (nv, vv) in [(0, 5), (7, 4), (100, 100)] {
        let want = vec![(nv * vv * 3) as i32];
        assert_eq!(int_kernel_output(&folded, 1, &[nv, vv]), want);
        assert_eq!(int_kernel_output(&raw, 1, &[nv, vv]), want);
    }
}

#[test]
fn if_masks_threads_and_locals_are_shared() {
    // 2 workgroups of 4 threads: temp[lidx] = data1[gidx*4 + lidx]; barrier;
    // if (lidx < 1) data0[gidx] = temp[0]+temp[1]+temp[2]+temp[3]
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let temp = UOp::define_local(dtypes::float32, "temp", 4);
    let g = UOp::special(0, "gidx0", 2);
    let l = UOp::special(0, "lidx0", 4);
    let st = UOp::store(
        &temp,
        &l,
        &UOp::load(&d1, &g.mul(4).add(&l), dtypes::float32),
    );
    let bar = UOp::barrier(vec![st]);
    let cond = l.lt(1);
    let iff = UOp::if_(&cond, Some(&bar));
    let c = |i: i64| UOp::cnst(dtypes::int32, i);
    let t = |i| UOp::load_after(&temp, &c(i), None, &iff, dtypes::float32);
    let sum = t(0).add(t(1)).add(t(2)).add(t(3));
    let out = UOp::store_gated(&d0, &g, &sum, &cond);
    let uops = linearize(&[out], None, true).unwrap();
    let src: Vec<ConstValue> = (1..=8).map(|i| ConstValue::Float(i as f64)).collect();
    let mut mem = vec![vec![0u8; 8], bytes_of(&src, Scalar::Float32)];
    run(&uops, &mut mem, &[], [2, 1, 1], [4, 1, 1]);
    let got: Vec<f32> = values_of(&mem[0], Scalar::Float32)
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect();
    assert_eq!(got, vec![10.0, 26.0]);
    // the serialized form runs the same
    let p = InterpProgram::from_serialized("ser", &serialize(&uops).unwrap()).unwrap();
    let mut mem2 = vec![vec![0u8; 8], bytes_of(&src, Scalar::Float32)];
    p.run(&mut mem2, &[], [2, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(mem2, mem);
}

/// The vendor-documented register layouts: element `e` of lane `l` holds A[m][k], B[k][n], C[m][n].
type Layout = fn(usize, usize) -> (usize, usize);

fn ptx_a(e: usize, l: usize) -> (usize, usize) {
    let (gid, tig) = (l / 4, l % 4);
    (gid + 8 * ((e >> 1) & 1), tig * 2 + (e & 1) + 8 * (e >> 2))
}
fn ptx_b(e: usize, l: usize) -> (usize, usize) {
    (((l % 4) * 2) + (e & 1) + 8 * (e >> 1), l / 4)
}
fn ptx_c(e: usize, l: usize) -> (usize, usize) {
    (l / 4 + 8 * (e >> 1), (l % 4) * 2 + (e & 1))
}
fn rdna3_a(e: usize, l: usize) -> (usize, usize) {
    (l % 16, e)
}
fn rdna3_b(e: usize, l: usize) -> (usize, usize) {
    (e, l % 16)
}
fn rdna3_c(e: usize, l: usize) -> (usize, usize) {
    (2 * e + l / 16, l % 16)
}
// RDNA4 ISA guide, "Wave Matrix Multiply Accumulate" (16-bit A/B and 32-bit C/D tables), AMD
// GPUOpen "Using the Matrix Cores of AMD RDNA 4 architecture GPUs": lanes 0-15 hold K 0-7 of A
// (rows) and B (columns), lanes 16-31 K 8-15; D rows 0-7 in lanes 0-15, rows 8-15 in 16-31.
fn rdna4_a(e: usize, l: usize) -> (usize, usize) {
    (l % 16, 8 * (l / 16) + e)
}
fn rdna4_b(e: usize, l: usize) -> (usize, usize) {
    (8 * (l / 16) + e, l % 16)
}
fn rdna4_c(e: usize, l: usize) -> (usize, usize) {
    (8 * (l / 16) + e, l % 16)
}

fn wmma_case(
    device: &str,
    (m, n, k): (usize, usize, usize),
    na: usize,
    nb: usize,
    nc: usize,
    lay: [Layout; 3],
) {
    let tables: Vec<Vec<ConstValue>> = [(na, lay[0], k), (nb, lay[1], n), (nc, lay[2], n)]
        .iter()
        .map(|&(cnt, f, cols)| {
            (0..32 * cnt)
                .map(|i| {
                    let (r, c) = f(i % cnt, i / cnt);
                    ConstValue::Int((r * cols + c) as i128)
                })
                .collect()
        })
        .collect();
    let lidx = UOp::special(0, "lidx0", 32);
    let gather = |data: usize, table: usize, cnt: usize, dt: DType| {
        let buf = UOp::define_global(dt, data, data == 0);
        let tb = UOp::define_global(dtypes::int32, table, false);
        let idxs: Vec<UOp> = (0..cnt)
            .map(|e| UOp::load(&tb, &lidx.mul(cnt as i64).add(e as i64), dtypes::int32))
            .collect();
        (buf, idxs)
    };
    let vec_of = |(buf, idxs): (UOp, Vec<UOp>), dt: DType| {
        let vals: Vec<UOp> = idxs.iter().map(|i| UOp::load(&buf, i, dt)).collect();
        UOp::vectorize(vals, dt.vec(idxs.len() as u16))
    };
    let a = vec_of(gather(1, 4, na, dtypes::float16), dtypes::float16);
    let b = vec_of(gather(2, 5, nb, dtypes::float16), dtypes::float16);
    let c = vec_of(gather(3, 6, nc, dtypes::float32), dtypes::float32);
    let arg = WmmaArg {
        name: format!("WMMA_{n}_{m}_{k}_half_float"),
        dims: [n, m, k],
        dtype_in: dtypes::float16,
        dtype_out: dtypes::float32,
        upcast_sizes: vec![na, nb, nc],
        device: device.into(),
    };
    let w = UOp::wmma(&a, &b, &c, arg, dtypes::float32.vec(nc as u16));
    let (d, didx) = gather(0, 6, nc, dtypes::float32);
    let sts: Vec<UOp> = (0..nc)
        .map(|e| UOp::store(&d, &didx[e], &UOp::gep(&w, e, dtypes::float32)))
        .collect();
    let uops = linearize(&sts, None, true).unwrap();
    let av: Vec<f64> = (0..m * k).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
    let bv: Vec<f64> = (0..k * n).map(|i| ((i * 5) % 13) as f64 - 6.0).collect();
    let cv: Vec<f64> = (0..m * n).map(|i| (i % 9) as f64 * 0.5).collect();
    let f = |v: &[f64]| v.iter().map(|&x| ConstValue::Float(x)).collect::<Vec<_>>();
    let mut mem = vec![
        vec![0u8; 4 * m * n],
        bytes_of(&f(&av), Scalar::Float16),
        bytes_of(&f(&bv), Scalar::Float16),
        bytes_of(&f(&cv), Scalar::Float32),
        bytes_of(&tables[0], Scalar::Int32),
        bytes_of(&tables[1], Scalar::Int32),
        bytes_of(&tables[2], Scalar::Int32),
    ];
    run(&uops, &mut mem, &[], [1, 1, 1], [32, 1, 1]);
    let got: Vec<f32> = values_of(&mem[0], Scalar::Float32)
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect();
    for i in 0..m {
        for j in 0..n {
            let want: f64 =
                cv[i * n + j] + (0..k).map(|x| av[i * k + x] * bv[x * n + j]).sum::<f64>();
            assert_eq!(got[i * n + j] as f64, want, "{device} D[{i}][{j}]");
        }
    }
    // a workgroup that is not a whole warp is refused
    let p = InterpProgram::new("w", &uops).unwrap();
    assert!(p.run(&mut mem, &[], [1, 1, 1], [16, 1, 1]).is_err());
}

#[test]
fn wmma_cuda_m16n8k16_layout() {
    wmma_case("CUDA", (16, 8, 16), 8, 4, 4, [ptx_a, ptx_b, ptx_c]);
}

#[test]
fn wmma_amd_16x16x16_layout() {
    wmma_case("AMD", (16, 16, 16), 16, 16, 8, [rdna3_a, rdna3_b, rdna3_c]);
}

#[test]
fn wmma_amd_gfx12_16x16x16_layout() {
    wmma_case("AMD", (16, 16, 16), 8, 8, 8, [rdna4_a, rdna4_b, rdna4_c]);
}

/// gfx12's WMMA lane table at single points, worked out by hand from the RDNA4 ISA guide's
/// register tables (not from the interpreter): (lane, element) -> A[m][k], B[k][n], D[m][n].
#[test]
fn wmma_gfx12_lane_table_by_hand() {
    let l = super::WmmaLayout::for_arg("AMD", &[8, 8, 8]).unwrap();
    assert_eq!(l, super::WmmaLayout::AmdGfx12);
    // A[m][k] lives in (element, lane): A[5][2] in lane 5 element 2, A[5][10] in lane 21
    // element 2 (lanes 16-31 hold K 8-15), A[15][15] in lane 31 element 7
    for ((m, k), at) in [
        ((5, 2), (2, 5)),
        ((5, 10), (2, 21)),
        ((15, 15), (7, 31)),
        ((0, 8), (0, 16)),
    ] {
        assert_eq!(l.a_elem(k, m), at, "A[{m}][{k}]");
    }
    // B[k][n]: B[3][9] in lane 9 element 3, B[12][9] in lane 25 element 4
    for ((k, n), at) in [((3, 9), (3, 9)), ((12, 9), (4, 25)), ((7, 0), (7, 0))] {
        assert_eq!(l.b_elem(n, k), at, "B[{k}][{n}]");
    }
    // D (as (n, m)): lane 17 element 3 is D[11][1]; lane 4 element 6 is D[6][4]
    assert_eq!(l.c_map(17, 3), (1, 11));
    assert_eq!(l.c_map(4, 6), (4, 6));
    assert_eq!(l.c_map(31, 7), (15, 15));
    // A = identity, B[k][n] = 16k + n: D = B, so lane 17 element 3 ends with 16 * 11 + 1 = 177
    let a = |e: usize, ln: usize| f64::from(u8::from(8 * (ln / 16) + e == ln % 16));
    let b = |e: usize, ln: usize| (16 * (8 * (ln / 16) + e) + ln % 16) as f64;
    let mut d = [[0.0f64; 8]; 32];
    super::wmma::run(l, 32, &a, &b, &|_, _| 0.5, &mut |e, ln, v| d[ln][e] = v).unwrap();
    assert_eq!(d[17][3], 177.5);
    assert_eq!(d[4][6], 100.5);
    assert_eq!(d[0][0], 0.5);
    // gfx12 has no duplicated half-wave: lanes 0 and 16 differ in A and B and that is fine;
    // other per-lane counts name the two AMD layouts in the error
    let e = super::WmmaLayout::for_arg("AMD", &[8, 8, 4]).unwrap_err();
    assert!(
        e.message().contains("[16, 16, 8]") && e.message().contains("[8, 8, 8]"),
        "{e}"
    );
}
