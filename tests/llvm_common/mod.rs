//! Shared pieces of the LLVM tests: AMD test kernels (UOp sinks with launch indices, linearized
//! by the UOp graph) and a minimal reader for AMD code objects (`elf.rs`).

#![allow(dead_code)]

pub mod elf;

use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::dtype::dtypes;

/// A test kernel: name, linear UOps, buffers, variables, static LDS bytes.
pub struct Kernel {
    pub name: &'static str,
    pub uops: Vec<UOp>,
    pub nbufs: u32,
    pub nvars: u32,
    pub lds_bytes: u32,
}

fn kernel(name: &'static str, sinks: &[UOp], nbufs: u32, nvars: u32, lds_bytes: u32) -> Kernel {
    Kernel {
        name,
        uops: linearize(sinks, None, true).unwrap(),
        nbufs,
        nvars,
        lds_bytes,
    }
}

/// `gidx0*lsize + lidx0`.
fn global_index(groups: i64, lsize: i64) -> UOp {
    UOp::special(0, "gidx0", groups)
        .mul(lsize)
        .add(UOp::special(0, "lidx0", lsize))
}

/// data0[i] = data1[i] + data2[i] over 4 workgroups of 32 threads.
pub fn amd_add() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1, d2) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
        UOp::define_global(f, 2, false),
    );
    let gi = global_index(4, 32);
    let s = UOp::load(&d1, &gi, f).add(UOp::load(&d2, &gi, f));
    kernel("E_4_32", &[UOp::store(&d0, &gi, &s)], 3, 0, 0)
}

/// data0[i] = data2[i] + 1: the load of buffer 1 was folded away (issue 8's `a - a < s`), so the
/// kernel declares DEFINE_GLOBALs 0 and 2 and takes two buffers.
pub fn amd_folded() -> Kernel {
    let f = dtypes::float32;
    let (d0, d2) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 2, false),
    );
    let gi = global_index(4, 32);
    let v = UOp::load(&d2, &gi, f).add(UOp::cnst(f, 1.0));
    kernel("E_4_32_folded", &[UOp::store(&d0, &gi, &v)], 2, 0, 0)
}

/// data0[g] = sum over r < 16 of data1[g*16 + r], one thread per workgroup.
pub fn amd_reduce() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let g = UOp::special(0, "gidx0", 4);
    let r = UOp::range_const(0, 16, 2, 0, true);
    let acc = UOp::define_acc(f, 0.0, std::slice::from_ref(&r), 0, 0);
    let x = UOp::load(&d1, &g.mul(16).add(&r), f);
    let p = UOp::phi(&acc, &x.add(&acc));
    kernel("r_4_16", &[UOp::store(&d0, &g, &p)], 2, 0, 0)
}

/// data0[i] = data1[i] * m where i < n (two variables).
pub fn amd_vars() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let (n, m) = (UOp::define_var("n", 1, 128), UOp::define_var("m", 0, 100));
    let gi = global_index(4, 32);
    let y = UOp::load(&d1, &gi, f).mul(m.cast(f));
    kernel(
        "E_n",
        &[UOp::store_gated(&d0, &gi, &y, &gi.lt(&n))],
        2,
        2,
        0,
    )
}

/// data0[i] = 0 < i < 9 ? data1[i-1] : -1 (a gated load), ints.
pub fn amd_gated() -> Kernel {
    let i = dtypes::int32;
    let (d0, d1) = (
        UOp::define_global(i, 0, true),
        UOp::define_global(i, 1, false),
    );
    let gi = global_index(2, 8);
    let gate = gi.lt(9).mul(UOp::cnst(i, 0).lt(&gi));
    let ld = UOp::load_gated(&d1, &gi.sub(1), &gate, &UOp::cnst(i, -1), i);
    kernel("E_2_8_gated", &[UOp::store(&d0, &gi, &ld)], 2, 0, 0)
}

/// Each thread puts data1[i] into LDS, a barrier, then reads its neighbour's value:
/// data0[g*32 + l] = data1[g*32 + (l+1)%32].
pub fn amd_local() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let temp = UOp::define_local(f, "temp0", 32);
    let l = UOp::special(0, "lidx0", 32);
    let gi = UOp::special(0, "gidx0", 4).mul(32).add(&l);
    let st = UOp::store(&temp, &l, &UOp::load(&d1, &gi, f));
    let bar = UOp::barrier(vec![st]);
    let y = UOp::load_after(&temp, &l.add(1).modulo(32), None, &bar, f);
    kernel("E_4_32_local", &[UOp::store(&d0, &gi, &y)], 2, 0, 128)
}

/// A grouped reduce (tinygrad's GROUP): 16 threads each sum 4 elements into LDS, a barrier,
/// then thread 0 sums the 16 partial sums inside an IF: data0[g] = sum of data1[g*64 .. g*64+64].
pub fn amd_grouped() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let temp = UOp::define_local(f, "temp0", 16);
    let (g, l) = (UOp::special(0, "gidx0", 4), UOp::special(0, "lidx0", 16));
    let r = UOp::range_const(0, 4, 2, 0, true);
    let acc = UOp::define_acc(f, 0.0, std::slice::from_ref(&r), 0, 0);
    let x = UOp::load(&d1, &g.mul(16).add(&l).mul(4).add(&r), f);
    let st = UOp::store(&temp, &l, &UOp::phi(&acc, &x.add(&acc)));
    let bar = UOp::barrier(vec![st]);
    let cond = l.lt(1);
    let iff = UOp::if_(&cond, Some(&bar));
    let r2 = UOp::range_const(0, 16, 3, 1, true);
    let acc2 = UOp::define_acc(f, 0.0, std::slice::from_ref(&r2), 1, 0);
    let y = UOp::load_after(&temp, &r2, None, &iff, f);
    let p2 = UOp::phi(&acc2, &y.add(&acc2));
    let out = UOp::store_gated(&d0, &g, &p2, &cond);
    kernel("r_4_16_4_grouped", &[out], 2, 0, 64)
}

/// Every AMD test kernel.
pub fn amd_kernels() -> Vec<Kernel> {
    vec![
        amd_add(),
        amd_folded(),
        amd_reduce(),
        amd_vars(),
        amd_gated(),
        amd_local(),
        amd_grouped(),
    ]
}
