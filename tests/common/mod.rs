//! Shared helpers of the integration tests.

#![allow(dead_code)]

pub mod cc;

use rawgrad::codegen::uops::UOp;
use rawgrad::dtype::{dtypes, ConstValue, DType, Scalar};
use rawgrad::ops::{const_from_bits, const_to_bits};

pub fn cint(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

/// data0[r] = data1[r] + data2[r], r in 0..n.
pub fn elementwise_add(n: i64, dt: DType) -> Vec<UOp> {
    let d0 = UOp::define_global(dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let d2 = UOp::define_global(dt, 2, false);
    let r = UOp::range_const(0, n, 1, 0, false);
    let a = UOp::load(&d1, &r, dt);
    let b = UOp::load(&d2, &r, dt);
    vec![UOp::store(&d0, &r, &a.add(&b))]
}

/// data0[r0] = sum over r1 of data1[r0*k + r1] * 2 + 1, r0 in 0..m, r1 in 0..k (accumulated in acc).
pub fn reduce_sum(m: i64, k: i64, dt: DType, acc_dt: DType) -> Vec<UOp> {
    let d0 = UOp::define_global(acc_dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let r0 = UOp::range_const(0, m, 1, 0, false);
    let r1 = UOp::range_const(0, k, 2, 0, true);
    let acc = UOp::define_acc(acc_dt, 0, std::slice::from_ref(&r1), 0, 0);
    let x = UOp::load(&d1, &r0.mul(k).add(&r1), dt).cast(acc_dt);
    let two = UOp::const_opt(Some(acc_dt), 2);
    let one = UOp::const_opt(Some(acc_dt), 1);
    let v = x.mul(two).add(one);
    let phi = UOp::phi(&acc, &v.add(&acc));
    vec![UOp::store(&d0, &r0, &phi)]
}

/// data0[r] = r < valid ? data1[r - 1] : -1 (gated load with an alternative), r in 0..n; plus a
/// gated store of r into data2[r] when r is odd.
pub fn gated(n: i64, valid: i64) -> Vec<UOp> {
    let d0 = UOp::define_global(dtypes::int32, 0, true);
    let d1 = UOp::define_global(dtypes::int32, 1, false);
    let d2 = UOp::define_global(dtypes::int32, 2, true);
    let r = UOp::range_const(0, n, 1, 0, false);
    let gate = r.lt(valid).mul(cint(0).lt(&r));
    let ld = UOp::load_gated(&d1, &r.sub(1), &gate, &cint(-1), dtypes::int32);
    let odd = r.modulo(2).ne(0);
    vec![
        UOp::store(&d0, &r, &ld),
        UOp::store_gated(&d2, &r, &r.mul(10), &odd),
    ]
}

/// data0[r] = data1[r] * m for r in 0..n with n and m variables.
pub fn symbolic(dt: DType) -> Vec<UOp> {
    let d0 = UOp::define_global(dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let n = UOp::define_var("n", 1, 64);
    let m = UOp::define_var("m", 0, 100);
    let r = UOp::range(cint(0), n, 1, 0, false);
    let v = UOp::load(&d1, &r, dt).mul(m.cast(dt));
    vec![UOp::store(&d0, &r, &v)]
}

/// The little-endian bytes of `vals` as scalars of `s` (truncated as a CONST of `s` is).
pub fn bytes_of(vals: &[f64], s: Scalar) -> Vec<u8> {
    let mut out = vec![];
    for &v in vals {
        let c = if s.is_float() {
            ConstValue::Float(v)
        } else {
            ConstValue::Int(v as i128)
        };
        out.extend_from_slice(
            &const_to_bits(c.truncate(DType::new(s)), s).to_le_bytes()[..s.itemsize()],
        );
    }
    out
}

/// The scalars of `s` in little-endian `bytes`.
pub fn values(bytes: &[u8], s: Scalar) -> Vec<ConstValue> {
    bytes
        .chunks(s.itemsize())
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..c.len()].copy_from_slice(c);
            const_from_bits(u64::from_le_bytes(raw), s)
        })
        .collect()
}

/// Run `prg` on host buffers holding `bufs` (with `vals`, on `threads` CPU threads) and return
/// every buffer's bytes afterwards.
pub fn run_on_host(
    prg: &dyn rawgrad::device::Program,
    bufs: &[Vec<u8>],
    vals: &[i64],
    threads: i64,
) -> Vec<Vec<u8>> {
    use rawgrad::device::{Allocator, BufferOptions, HostAllocator};
    let (h, o) = (HostAllocator, BufferOptions::default());
    let raw: Vec<_> = bufs
        .iter()
        .map(|b| {
            let r = h.alloc(b.len().max(1), &o).unwrap();
            h.copyin(&r, b).unwrap();
            r
        })
        .collect();
    let _g = rawgrad::helpers::Context::new(&[("CLANG_THREADS", threads)]);
    prg.call(&raw, vals, None, None, true).unwrap();
    raw.iter()
        .zip(bufs)
        .map(|(r, b)| {
            let mut out = vec![0u8; b.len()];
            h.copyout(&mut out, r).unwrap();
            out
        })
        .collect()
}
