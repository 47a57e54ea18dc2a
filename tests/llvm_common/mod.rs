//! Shared pieces of the LLVM tests: hand-linearized UOp kernels (the order the linearizer
//! produces) and a minimal reader for AMD code objects (ELF sections, symbols, relocations and the
//! 64-byte kernel descriptor; the loader proper is the AMD runtime's).

#![allow(dead_code)]

pub mod elf;

use rawgrad::codegen::uops::{UArg, UOp, UOps};
use rawgrad::dtype::{dtypes, ConstValue, DType};
use rawgrad::ops::{BinaryOps, Op};

pub fn ci(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}
pub fn cf(d: DType, v: f64) -> UOp {
    UOp::cnst(d, ConstValue::Float(v))
}
pub fn global(d: DType, idx: usize, is_output: bool) -> UOp {
    UOp::new(
        UOps::DEFINE_GLOBAL,
        Some(d.ptr()),
        vec![],
        UArg::Global { idx, is_output },
    )
}
pub fn var(name: &str, min: i64, max: i64) -> UOp {
    let arg = UArg::Var {
        name: name.into(),
        min,
        max,
    };
    UOp::new(UOps::DEFINE_VAR, Some(dtypes::int32), vec![], arg)
}
pub fn special(axis: usize, name: &str, size: i64) -> UOp {
    let arg = UArg::Special {
        axis,
        name: name.into(),
        size,
    };
    UOp::new(UOps::SPECIAL, Some(dtypes::int32), vec![], arg)
}
pub fn local(d: DType, name: &str, size: usize) -> UOp {
    let arg = UArg::Local {
        name: name.into(),
        size,
    };
    UOp::new(UOps::DEFINE_LOCAL, Some(d.ptr()), vec![], arg)
}
pub fn range(start: &UOp, end: &UOp, depth: usize, idx: usize, is_reduce: bool) -> UOp {
    let arg = UArg::Range {
        depth,
        idx,
        is_reduce,
    };
    UOp::new(
        UOps::RANGE,
        Some(dtypes::int32),
        vec![start.clone(), end.clone()],
        arg,
    )
}
pub fn endrange(r: &UOp) -> UOp {
    UOp::new(UOps::ENDRANGE, None, vec![r.clone()], UArg::None)
}
pub fn acc(d: DType, init: f64, loops: &[&UOp]) -> UOp {
    let mut src = vec![if d.is_float() {
        cf(d, init)
    } else {
        UOp::cnst(d, init as i64)
    }];
    src.extend(loops.iter().map(|u| (*u).clone()));
    UOp::new(UOps::DEFINE_ACC, Some(d), src, UArg::Acc { buf: 0, idx: 0 })
}
pub fn phi(acc: &UOp, v: &UOp) -> UOp {
    UOp::new(
        UOps::PHI,
        acc.dtype(),
        vec![acc.clone(), v.clone()],
        UArg::None,
    )
}
pub fn alu(op: impl Into<Op>, d: DType, src: &[&UOp]) -> UOp {
    UOp::alu(op, d, src.iter().map(|u| (*u).clone()).collect())
}
pub fn add(a: &UOp, b: &UOp) -> UOp {
    alu(BinaryOps::ADD, a.dtype().unwrap(), &[a, b])
}
pub fn mul(a: &UOp, b: &UOp) -> UOp {
    alu(BinaryOps::MUL, a.dtype().unwrap(), &[a, b])
}
pub fn lt(a: &UOp, b: &UOp) -> UOp {
    alu(BinaryOps::CMPLT, dtypes::bool, &[a, b])
}
pub fn cast(x: &UOp, d: DType) -> UOp {
    UOp::new(UOps::CAST, Some(d), vec![x.clone()], UArg::None)
}
pub fn load(buf: &UOp, idx: &UOp, d: DType) -> UOp {
    UOp::new(
        UOps::LOAD,
        Some(d),
        vec![buf.clone(), idx.clone()],
        UArg::None,
    )
}
pub fn load_gated(buf: &UOp, idx: &UOp, gate: &UOp, alt: &UOp, d: DType) -> UOp {
    let src = vec![buf.clone(), idx.clone(), gate.clone(), alt.clone()];
    UOp::new(UOps::LOAD, Some(d), src, UArg::None)
}
pub fn load_after(buf: &UOp, idx: &UOp, barrier: &UOp, d: DType) -> UOp {
    let src = vec![buf.clone(), idx.clone(), barrier.clone()];
    UOp::new(UOps::LOAD, Some(d), src, UArg::None)
}
pub fn store(buf: &UOp, idx: &UOp, v: &UOp) -> UOp {
    UOp::new(
        UOps::STORE,
        None,
        vec![buf.clone(), idx.clone(), v.clone()],
        UArg::None,
    )
}
pub fn store_gated(buf: &UOp, idx: &UOp, v: &UOp, gate: &UOp) -> UOp {
    let src = vec![buf.clone(), idx.clone(), v.clone(), gate.clone()];
    UOp::new(UOps::STORE, None, src, UArg::None)
}
pub fn barrier(src: &[&UOp]) -> UOp {
    UOp::new(
        UOps::BARRIER,
        None,
        src.iter().map(|u| (*u).clone()).collect(),
        UArg::None,
    )
}

/// A test kernel: name, linear UOps, buffers, variables, static LDS bytes.
pub struct Kernel {
    pub name: &'static str,
    pub uops: Vec<UOp>,
    pub nbufs: u32,
    pub nvars: u32,
    pub lds_bytes: u32,
}

/// `gidx0*lsize + lidx0` over `groups` x `lsize`, and the uops it needs.
fn global_index(groups: i64, lsize: i64) -> (UOp, Vec<UOp>) {
    let c = ci(lsize);
    let g = special(0, "gidx0", groups);
    let l = special(0, "lidx0", lsize);
    let m = mul(&g, &c);
    let gi = add(&m, &l);
    (gi.clone(), vec![c, g, l, m, gi])
}

/// data0[i] = data1[i] + data2[i] over 4 workgroups of 32 threads.
pub fn amd_add() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1, d2) = (global(f, 0, true), global(f, 1, false), global(f, 2, false));
    let (gi, mut idx) = global_index(4, 32);
    let (a, b) = (load(&d1, &gi, f), load(&d2, &gi, f));
    let s = add(&a, &b);
    let st = store(&d0, &gi, &s);
    let mut uops = vec![d0, d1, d2];
    uops.append(&mut idx);
    uops.extend([a, b, s, st]);
    Kernel {
        name: "E_4_32",
        uops,
        nbufs: 3,
        nvars: 0,
        lds_bytes: 0,
    }
}

/// data0[g] = sum over r < 16 of data1[g*16 + r], one thread per workgroup.
pub fn amd_reduce() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (global(f, 0, true), global(f, 1, false));
    let (c0, c16) = (ci(0), ci(16));
    let g = special(0, "gidx0", 4);
    let base = mul(&g, &c16);
    let r = range(&c0, &c16, 2, 0, true);
    let a = acc(f, 0.0, &[&r]);
    let idx = add(&base, &r);
    let x = load(&d1, &idx, f);
    let s = add(&x, &a);
    let p = phi(&a, &s);
    let er = endrange(&r);
    let st = store(&d0, &g, &p);
    let uops = vec![d0, d1, c0, c16, g, base, a, r, idx, x, s, p, er, st];
    Kernel {
        name: "r_4_16",
        uops,
        nbufs: 2,
        nvars: 0,
        lds_bytes: 0,
    }
}

/// data0[i] = data1[i] * m where i < n (two variables).
pub fn amd_vars() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (global(f, 0, true), global(f, 1, false));
    let (n, m) = (var("n", 1, 128), var("m", 0, 100));
    let (gi, mut idx) = global_index(4, 32);
    let mf = cast(&m, f);
    let x = load(&d1, &gi, f);
    let y = mul(&x, &mf);
    let gate = lt(&gi, &n);
    let st = store_gated(&d0, &gi, &y, &gate);
    let mut uops = vec![d0, d1, n, m];
    uops.append(&mut idx);
    uops.extend([mf, x, y, gate, st]);
    Kernel {
        name: "E_n",
        uops,
        nbufs: 2,
        nvars: 2,
        lds_bytes: 0,
    }
}

/// data0[i] = 0 < i < 9 ? data1[i-1] : -1 (a gated load), ints.
pub fn amd_gated() -> Kernel {
    let i = dtypes::int32;
    let (d0, d1) = (global(i, 0, true), global(i, 1, false));
    let (c0, c9, cm1) = (ci(0), ci(9), ci(-1));
    let (gi, mut idx) = global_index(2, 8);
    let g1 = lt(&gi, &c9);
    let g2 = lt(&c0, &gi);
    let gate = alu(BinaryOps::MUL, dtypes::bool, &[&g1, &g2]);
    let im1 = add(&gi, &cm1);
    let ld = load_gated(&d1, &im1, &gate, &cm1, i);
    let st = store(&d0, &gi, &ld);
    let mut uops = vec![d0, d1, c0, c9, cm1];
    uops.append(&mut idx);
    uops.extend([g1, g2, gate, im1, ld, st]);
    Kernel {
        name: "E_2_8_gated",
        uops,
        nbufs: 2,
        nvars: 0,
        lds_bytes: 0,
    }
}

/// Each thread puts data1[i] into LDS, a barrier, then reads its neighbour's value:
/// data0[g*32 + l] = data1[g*32 + (l+1)%32].
pub fn amd_local() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (global(f, 0, true), global(f, 1, false));
    let temp = local(f, "temp0", 32);
    let (c1, c32) = (ci(1), ci(32));
    let g = special(0, "gidx0", 4);
    let l = special(0, "lidx0", 32);
    let m = mul(&g, &c32);
    let gi = add(&m, &l);
    let x = load(&d1, &gi, f);
    let st = store(&temp, &l, &x);
    let bar = barrier(&[&st]);
    let l1 = add(&l, &c1);
    let j = alu(BinaryOps::MOD, dtypes::int32, &[&l1, &c32]);
    let y = load_after(&temp, &j, &bar, f);
    let out = store(&d0, &gi, &y);
    let uops = vec![
        d0, d1, temp, c1, c32, g, l, m, gi, x, st, bar, l1, j, y, out,
    ];
    Kernel {
        name: "E_4_32_local",
        uops,
        nbufs: 2,
        nvars: 0,
        lds_bytes: 128,
    }
}

/// Every AMD test kernel.
pub fn amd_kernels() -> Vec<Kernel> {
    vec![
        amd_add(),
        amd_reduce(),
        amd_vars(),
        amd_gated(),
        amd_local(),
    ]
}

/// CPU: data0[r] = data1[r] + data2[r], r < n.
pub fn cpu_add(n: i64, d: DType) -> Vec<UOp> {
    let (d0, d1, d2) = (global(d, 0, true), global(d, 1, false), global(d, 2, false));
    let (c0, cn) = (ci(0), ci(n));
    let r = range(&c0, &cn, 1, 0, false);
    let (a, b) = (load(&d1, &r, d), load(&d2, &r, d));
    let s = add(&a, &b);
    let st = store(&d0, &r, &s);
    vec![d0, d1, d2, c0, cn, r.clone(), a, b, s, st, endrange(&r)]
}

/// CPU: data0[r0] = sum over r1 of (acc)data1[r0*k + r1] * 2 + 1.
pub fn cpu_reduce(m: i64, k: i64, d: DType, acc_d: DType) -> Vec<UOp> {
    let (d0, d1) = (global(acc_d, 0, true), global(d, 1, false));
    let (c0, cm, ck) = (ci(0), ci(m), ci(k));
    let (one, two) = (cf(acc_d, 1.0), cf(acc_d, 2.0));
    let r0 = range(&c0, &cm, 1, 0, false);
    let r1 = range(&c0, &ck, 2, 1, true);
    let a = acc(acc_d, 0.0, &[&r1]);
    let base = mul(&r0, &ck);
    let idx = add(&base, &r1);
    let x = cast(&load(&d1, &idx, d), acc_d);
    let ld = x.src()[0].clone();
    let v = add(&add(&mul(&x, &two), &one), &a);
    let (m2, p1) = (v.src()[0].src()[0].clone(), v.src()[0].clone());
    let p = phi(&a, &v);
    let st = store(&d0, &r0, &p);
    vec![
        d0,
        d1,
        c0,
        one,
        two,
        ck,
        cm,
        r0.clone(),
        base,
        a,
        r1.clone(),
        idx,
        ld,
        x,
        m2,
        p1,
        v,
        p,
        endrange(&r1),
        st,
        endrange(&r0),
    ]
}
