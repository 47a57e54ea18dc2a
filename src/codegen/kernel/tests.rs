//! Kernel construction, names, colors, and the legality rules of `apply_opt` with tinygrad's
//! reason strings.

use super::*;
use crate::codegen::kernel::opts::{Opt, OptOps::*};
use crate::dtype::{dtypes, ConstValue};
use crate::ops::{BinaryOps, ConstArg, LazyOpArg, ReduceOps, UnaryOps};
use crate::renderer::cstyle::ClangRenderer;
use crate::renderer::Renderer;
use crate::shape::sints;

fn st(shape: &[i64]) -> ShapeTracker {
    ShapeTracker::from_shape(&sints(shape)).unwrap()
}
fn ld(idx: usize, st: ShapeTracker) -> LazyOp {
    LazyOp::load(idx, dtypes::float32, st)
}
fn add(a: LazyOp, b: LazyOp) -> LazyOp {
    LazyOp::new(BinaryOps::ADD, vec![a, b], LazyOpArg::None)
}
fn sum(x: LazyOp, axis: &[usize]) -> LazyOp {
    LazyOp::new(ReduceOps::SUM, vec![x], LazyOpArg::Axis(axis.to_vec()))
}
fn store(x: LazyOp, idx: usize, st: ShapeTracker) -> LazyOp {
    LazyOp::store(x, idx, dtypes::float32, st)
}

fn interp() -> RendererOpts {
    RendererOpts {
        device: "INTERP".into(),
        suffix: "INTERP".into(),
        supports_float4: true,
        has_local: true,
        has_shared: true,
        global_max: Some([0x8FFFFFFF; 3]),
        local_max: Some([0x8FFFFFFF; 3]),
        shared_max: 32768,
        tensor_cores: vec![],
        vector_alu: crate::codegen::renderer::VectorAlu::None,
    }
}

fn clang() -> RendererOpts {
    ClangRenderer::new().opts().clone()
}

/// a @ b for (n, n) matrices of `dt`: full shape (n, n, n), reduce over the last (through a CAST
/// to float32 when `dt` is not float32).
fn matmul_dt(n: i64, dt: DType) -> Vec<LazyOp> {
    let a = st(&[n, n]).reshape(&sints(&[n, 1, n])).unwrap();
    let a = a.expand(&sints(&[n, n, n])).unwrap();
    let b = st(&[n, n]).permute(&[1, 0]).unwrap();
    let b = b
        .reshape(&sints(&[1, n, n]))
        .unwrap()
        .expand(&sints(&[n, n, n]))
        .unwrap();
    let l = |i, s| LazyOp::load(i, dt, s);
    let mut m = LazyOp::new(BinaryOps::MUL, vec![l(1, a), l(2, b)], LazyOpArg::None);
    if dt != dtypes::float32 {
        m = LazyOp::new(UnaryOps::CAST, vec![m], LazyOpArg::DType(dtypes::float32));
    }
    vec![store(sum(m, &[2]), 0, st(&[n, n, 1]))]
}

/// a @ b for (n, n) float matrices.
fn matmul(n: i64) -> Vec<LazyOp> {
    matmul_dt(n, dtypes::float32)
}

/// A float32 (m, k) @ (k, n).
fn matmul_mnk(m: i64, n: i64, kk: i64) -> Vec<LazyOp> {
    matmul_a(st(&[m, kk]), m, n, kk)
}

/// A float32 (m, k) @ (k, n) whose left operand is read through `a` (an (m, k) view).
fn matmul_a(a: ShapeTracker, m: i64, n: i64, kk: i64) -> Vec<LazyOp> {
    let a = a.reshape(&sints(&[m, 1, kk])).unwrap();
    let a = a.expand(&sints(&[m, n, kk])).unwrap();
    let b = st(&[kk, n]).permute(&[1, 0]).unwrap();
    let b = b.reshape(&sints(&[1, n, kk])).unwrap();
    let b = b.expand(&sints(&[m, n, kk])).unwrap();
    let l = |i, s| LazyOp::load(i, dtypes::float32, s);
    let mul = LazyOp::new(BinaryOps::MUL, vec![l(1, a), l(2, b)], LazyOpArg::None);
    vec![store(sum(mul, &[2]), 0, st(&[m, n, 1]))]
}

fn sum_rows(rows: i64, cols: i64) -> Vec<LazyOp> {
    vec![store(
        sum(ld(1, st(&[rows, cols])), &[1]),
        0,
        st(&[rows, 1]),
    )]
}

fn k(ast: &[LazyOp], o: &RendererOpts) -> Kernel {
    Kernel::new(ast, o).unwrap()
}

fn shape(k: &Kernel) -> Vec<i64> {
    k.full_shape().iter().map(|s| s.as_int().unwrap()).collect()
}

#[test]
fn construction_orders_buffers_and_reduce_dims() {
    // sum over axis 0 of (16, 8): the reduce dim moves last
    let ast = vec![store(sum(ld(1, st(&[16, 8])), &[0]), 0, st(&[1, 8]))];
    let kk = k(&ast, &clang());
    assert_eq!(shape(&kk), vec![8, 16]);
    assert_eq!(kk.first_reduce(), 1);
    assert_eq!(kk.full_buf_index, 1);
    assert_eq!(kk.bufs.len(), 2);
    assert_eq!(kk.earlybufs.len(), 1);
    // contiguous elementwise dims merge; a transposed operand keeps them apart
    let s = st(&[4, 4]);
    let e = vec![store(add(ld(1, s.clone()), ld(2, s.clone())), 0, s.clone())];
    assert_eq!(shape(&k(&e, &clang())), vec![16]);
    let t = st(&[4, 4]).permute(&[1, 0]).unwrap();
    let e = vec![store(add(ld(1, s.clone()), ld(2, t)), 0, s.clone())];
    let kk = k(&e, &clang());
    assert_eq!(shape(&kk), vec![4, 4]);
    assert_eq!(kk.base_name(), "E_4_4");
    // the same buffer loaded twice through the same view is one entry
    let e = vec![store(add(ld(1, s.clone()), ld(1, s.clone())), 0, s.clone())];
    assert_eq!(k(&e, &clang()).bufs.len(), 2);
    // ones are dropped
    let e = vec![store(ld(1, st(&[1, 5, 1])), 0, st(&[1, 5, 1]))];
    assert_eq!(shape(&k(&e, &clang())), vec![5]);
}

#[test]
fn names_and_colors() {
    let s = st(&[16]);
    let copy = vec![store(ld(1, s.clone()), 0, s.clone())];
    assert_eq!(k(&copy, &clang()).base_name(), "C_16");
    let e = vec![
        store(add(ld(2, s.clone()), ld(3, s.clone())), 0, s.clone()),
        store(ld(2, s.clone()), 1, s.clone()),
    ];
    assert_eq!(k(&e, &clang()).base_name(), "E2_16");
    let r = k(&sum_rows(16, 16), &clang());
    assert_eq!(r.base_name(), "r_16_16");
    assert_eq!(r.colors(), vec!["blue", "red"]);
    let mut m = k(&matmul(32), &interp());
    m.apply_opt(Opt::new(LOCAL, 0, 2)).unwrap();
    m.apply_opt(Opt::new(GROUP, 0, 2)).unwrap();
    m.apply_opt(Opt::new(UPCAST, 0, 4)).unwrap();
    m.apply_opt(Opt::new(UNROLL, 1, 2)).unwrap();
    assert_eq!(
        m.colors(),
        vec!["blue", "blue", "cyan", "green", "red", "yellow", "magenta"]
    );
    assert_eq!(m.base_name(), "r_4_32_2_2_8_4_2");
    let mut n = k(&matmul(32), &interp());
    n.apply_opt(Opt::nolocals()).unwrap();
    assert_eq!(n.colors(), vec!["BLUE", "BLUE", "red"]);
}

#[test]
fn dedup_suffix_counts_per_function_name() {
    // a shape no other test uses
    let s = st(&[1013]);
    let e = vec![store(add(ld(1, s.clone()), ld(2, s.clone())), 0, s)];
    let mut a = k(&e, &clang());
    let mut b = k(&e, &clang());
    assert_eq!(a.linearize().unwrap().name, "E_1013");
    assert_eq!(b.linearize().unwrap().name, "E_1013n1");
    // linearizing again with the same opts is cached (no new name)
    assert_eq!(a.linearize().unwrap().name, "E_1013");
}

/// tinygrad's test_color_shapes_with_local: (color, size) per axis after each opt list.
#[test]
fn color_shapes_with_local() {
    type Colored = Vec<(&'static str, i64)>;
    let cases: Vec<(Vec<Opt>, Colored)> = vec![
        (
            vec![Opt::new(LOCAL, 0, 2)],
            vec![("blue", 16), ("blue", 32), ("cyan", 2), ("red", 32)],
        ),
        (
            vec![Opt::new(LOCAL, 0, 2), Opt::new(GROUP, 0, 2)],
            vec![
                ("blue", 16),
                ("blue", 32),
                ("cyan", 2),
                ("green", 2),
                ("red", 16),
            ],
        ),
        (
            vec![Opt::new(LOCAL, 0, 2), Opt::new(UNROLL, 0, 0)],
            vec![("blue", 16), ("blue", 32), ("cyan", 2), ("magenta", 32)],
        ),
        (
            vec![Opt::new(UNROLL, 0, 0), Opt::new(LOCAL, 0, 2)],
            vec![("blue", 16), ("blue", 32), ("cyan", 2), ("magenta", 32)],
        ),
        (
            vec![
                Opt::new(LOCAL, 0, 2),
                Opt::new(GROUP, 0, 0),
                Opt::new(UNROLL, 0, 2),
            ],
            vec![
                ("blue", 16),
                ("blue", 32),
                ("cyan", 2),
                ("green", 16),
                ("magenta", 2),
            ],
        ),
        (
            vec![
                Opt::new(LOCAL, 0, 2),
                Opt::new(GROUP, 0, 0),
                Opt::new(UNROLL, 0, 0),
            ],
            vec![("blue", 16), ("blue", 32), ("cyan", 2), ("magenta", 32)],
        ),
        (
            vec![
                Opt::new(GROUP, 0, 0),
                Opt::new(LOCAL, 0, 2),
                Opt::new(UNROLL, 0, 0),
            ],
            vec![("blue", 16), ("blue", 32), ("cyan", 2), ("magenta", 32)],
        ),
        (
            vec![Opt::new(GROUP, 0, 2), Opt::new(UNROLL, 0, 0)],
            vec![("blue", 32), ("blue", 32), ("red", 16), ("magenta", 2)],
        ),
    ];
    for (opts, want) in cases {
        let mut kk = k(&matmul(32), &interp());
        kk.apply_opts(&opts).unwrap();
        let got: Vec<(&str, i64)> = kk.colors().into_iter().zip(shape(&kk)).collect();
        assert_eq!(got, want, "{opts:?}");
        assert_eq!(kk.applied_opts, opts);
    }
}

fn reason(kk: &mut Kernel, opt: Opt) -> String {
    let before = (
        kk.sts.clone(),
        kk.upcasted,
        kk.local_dims,
        kk.group_for_reduces,
        kk.applied_opts.len(),
    );
    match kk.apply_opt(opt) {
        Err(Error::KernelOpt(m)) => {
            let after = (
                kk.sts.clone(),
                kk.upcasted,
                kk.local_dims,
                kk.group_for_reduces,
                kk.applied_opts.len(),
            );
            assert_eq!(before, after, "{opt} failed but changed the kernel");
            m
        }
        other => panic!("{opt}: expected a KernelOpt error, got {other:?}"),
    }
}

#[test]
fn illegal_opts_give_tinygrads_reasons() {
    let mut c = k(&sum_rows(16, 64), &clang());
    assert_eq!(
        reason(&mut c, Opt::new(UPCAST, 1, 4)),
        "upcast is for non-reduce"
    );
    assert_eq!(
        reason(&mut c, Opt::new(UPCAST, 0, 1)),
        "shift/padto of amt 1 or Node is meaningless"
    );
    assert_eq!(reason(&mut c, Opt::new(UPCAST, 5, 2)), "invalid axis");
    assert_eq!(
        reason(&mut c, Opt::new(UPCAST, 0, 3)),
        "no longer valid shift"
    );
    assert_eq!(
        reason(&mut c, Opt::new(UPCAST, 0, 16)),
        "don't upcast more than 8"
    );
    assert_eq!(
        reason(&mut c, Opt::new(UNROLL, 0, 64)),
        "don't unroll more than 32"
    );
    assert_eq!(
        reason(&mut c, Opt::new(LOCAL, 0, 2)),
        "target does not support local"
    );
    // the shared-memory check comes first (CLANG's shared_max is 0)
    assert_eq!(
        reason(&mut c, Opt::new(GROUP, 0, 2)),
        "exceeds maximum shared memory size: needs 8, max 0"
    );
    let no_shared = RendererOpts {
        has_shared: false,
        ..interp()
    };
    let mut ns = k(&sum_rows(16, 64), &no_shared);
    assert_eq!(
        reason(&mut ns, Opt::new(GROUP, 0, 2)),
        "target does not support local or shared mem"
    );
    assert_eq!(
        reason(&mut c, Opt::nolocals()),
        "NOLOCALS is meaningless if target does not support local or already not using locals"
    );
    assert_eq!(
        reason(&mut c, Opt::new(TC, 0, 0)),
        "must have tensor cores or TC=2"
    );
    assert_eq!(
        reason(&mut c, Opt::new(UPCASTMID, 0, 4)),
        "invalid upcast mid reduce"
    );
    c.apply_opt(Opt::new(UNROLL, 0, 4)).unwrap();
    assert_eq!(
        reason(&mut c, Opt::new(UNROLL, 1, 2)),
        "can't upcasted already upcasted"
    );
    assert_eq!(reason(&mut c, Opt::new(PADTO, 2, 8)), "cannot pad upcasted");
    assert_eq!(
        reason(&mut c, Opt::new(TC, 0, 0)),
        "tensor core opts must be first"
    );

    let mut i = k(&sum_rows(16, 64), &interp());
    assert_eq!(
        reason(&mut i, Opt::new(LOCAL, 1, 2)),
        "local is for globals"
    );
    assert_eq!(reason(&mut i, Opt::new(GROUP, 1, 2)), "invalid axis");
    i.apply_opt(Opt::new(UNROLL, 0, 4)).unwrap();
    assert_eq!(
        reason(&mut i, Opt::new(GROUP, 1, 2)),
        "must be reduce axis to group"
    );
    i.apply_opt(Opt::new(LOCAL, 0, 4)).unwrap();
    assert_eq!(
        reason(&mut i, Opt::nolocals()),
        "can't have no locals with locals"
    );
    let mut n = k(&sum_rows(16, 64), &interp());
    n.apply_opt(Opt::nolocals()).unwrap();
    assert_eq!(reason(&mut n, Opt::new(LOCAL, 0, 2)), "not using locals");
    assert_eq!(reason(&mut n, Opt::new(GROUPTOP, 0, 2)), "not using locals");

    // 16 threads x 32 locals x 32 group x 4 bytes does not fit 32 KiB
    let mut m = k(&matmul(64), &interp());
    m.apply_opt(Opt::new(LOCAL, 0, 32)).unwrap();
    m.apply_opt(Opt::new(LOCAL, 1, 16)).unwrap();
    assert_eq!(
        reason(&mut m, Opt::new(GROUP, 0, 32)),
        "exceeds maximum shared memory size: needs 65536, max 32768"
    );
    m.apply_opt(Opt::new(GROUP, 0, 8)).unwrap();
}

#[test]
fn padto_rules() {
    let mut c = k(&sum_rows(17, 17), &clang());
    assert_eq!(
        reason(&mut c, Opt::new(PADTO, 0, 128)),
        "pad adds more than quadruple the work self.sts[i].shape[axis]=17 > amt//4=32"
    );
    c.apply_opt(Opt::new(PADTO, 0, 32)).unwrap();
    c.apply_opt(Opt::new(PADTO, 1, 32)).unwrap();
    assert_eq!(shape(&c), vec![32, 32]);
    assert_eq!(reason(&mut c, Opt::new(PADTO, 0, 32)), "nothing was padded");
    // MAX cannot pad its reduce dim; unsafe ops under a SUM neither
    let mx = vec![store(
        LazyOp::new(
            ReduceOps::MAX,
            vec![ld(1, st(&[17, 17]))],
            LazyOpArg::Axis(vec![1]),
        ),
        0,
        st(&[17, 1]),
    )];
    let mut m = k(&mx, &clang());
    assert_eq!(reason(&mut m, Opt::new(PADTO, 1, 32)), "cannot pad");
    m.apply_opt(Opt::new(PADTO, 0, 32)).unwrap();
    let ex = LazyOp::new(UnaryOps::EXP2, vec![ld(1, st(&[17, 17]))], LazyOpArg::None);
    let mut e = k(&[store(sum(ex, &[1]), 0, st(&[17, 1]))], &clang());
    assert_eq!(reason(&mut e, Opt::new(PADTO, 1, 32)), "cannot pad");
    // an unsafe op after the sum is fine
    let after = LazyOp::new(
        UnaryOps::EXP2,
        vec![sum(ld(1, st(&[17, 17])), &[1])],
        LazyOpArg::None,
    );
    let mut a = k(&[store(after, 0, st(&[17, 1]))], &clang());
    a.apply_opt(Opt::new(PADTO, 1, 32)).unwrap();
    // symbolic kernels do not pad
    let v = Node::var("i", 1, 10).unwrap();
    let sst = ShapeTracker::from_shape(&[v, Node::from(4i64)]).unwrap();
    let mut s = k(&[store(ld(1, sst.clone()), 0, sst)], &clang());
    assert_eq!(
        reason(&mut s, Opt::new(PADTO, 0, 8)),
        "does not work with symbolic shape"
    );
}

#[test]
fn unroll_bookkeeping_matches_tinygrad() {
    // a full UNROLL of the first reduce dim keeps local_dims; of a group dim drops the group
    let mut m = k(&matmul(32), &interp());
    m.apply_opts(&[
        Opt::new(LOCAL, 0, 2),
        Opt::new(GROUP, 0, 0),
        Opt::new(UNROLL, 0, 0),
    ])
    .unwrap();
    assert_eq!((m.local_dims, m.group_for_reduces, m.upcasted), (1, 0, 1));
    // shift_to by hand: split the 32 of axis 1 into (8, 4) and move the 4 to the end
    let mut s = k(&matmul(32), &interp());
    s.shift_to(1, 4, false, None).unwrap();
    assert_eq!(shape(&s), vec![32, 8, 32, 4]);
    s.shift_to(0, 4, true, Some(1)).unwrap();
    assert_eq!(shape(&s), vec![8, 4, 8, 32, 4]);
}

#[test]
fn constants_and_vars_are_buffers() {
    let v = Node::var("n", 1, 8).unwrap();
    let s = st(&[4]);
    let c1 = LazyOp::cnst(
        ConstArg::Value(ConstValue::Float(2.0)),
        dtypes::float32,
        s.clone(),
    );
    let c2 = LazyOp::cnst(ConstArg::Var(v.clone()), dtypes::float32, s.clone());
    let e = vec![store(add(add(ld(1, s.clone()), c1), c2), 0, s)];
    let kk = k(&e, &clang());
    assert_eq!(kk.bufs.len(), 4);
    assert!(matches!(kk.bufs[2], KernelBuf::Const(_)));
    assert_eq!(kk.vars, vec![v]);
}

/// A half matmul accumulated in float: SUM(CAST(MUL(a, b))).
fn half_matmul(n: i64) -> Vec<LazyOp> {
    matmul_dt(n, dtypes::float16)
}

#[test]
fn tensor_core_rules() {
    let cuda = crate::renderer::cuda::CUDARenderer::new(80).opts().clone();
    // TC must come first
    let mut kk = k(&half_matmul(32), &cuda);
    kk.apply_opt(Opt::new(UPCAST, 0, 2)).unwrap();
    let e = kk.apply_opt(Opt::new(TC, 0, 0)).unwrap_err();
    assert_eq!(e.message(), "tensor core opts must be first");
    // no tensor cores on CLANG; a float matmul matches none of CUDA's
    let e = k(&half_matmul(32), &clang())
        .apply_opt(Opt::new(TC, 0, 0))
        .unwrap_err();
    assert_eq!(e.message(), "must have tensor cores or TC=2");
    let e = k(&matmul(32), &cuda)
        .apply_opt(Opt::new(TC, 0, 0))
        .unwrap_err();
    assert_eq!(e.message(), "no tensor core available");
    // a size the tensor core does not divide needs tc_opt 2 (padding)
    let mut kk = k(&half_matmul(24), &cuda);
    assert!(kk.apply_opt(Opt::new(TC, 0, 0)).is_err());
    kk.apply_opt(Opt::new(TC, 0, 2)).unwrap();
    assert!(kk.tensor_core.is_some());
    // with the tensor core: its local dims can't be upcast, nothing groups
    let mut kk = k(&half_matmul(32), &cuda);
    kk.apply_opt(Opt::new(TC, 0, 0)).unwrap();
    let gd = kk.global_dims();
    let e = kk.apply_opt(Opt::new(UPCAST, gd, 2)).unwrap_err();
    assert_eq!(e.message(), "can't upcast TC locals");
    let e = kk.apply_opt(Opt::new(GROUP, 0, 2)).unwrap_err();
    assert_eq!(e.message(), "can't group with tensor cores");
    // as 0.9.1 shapes it: 5 warp-thread locals, K unrolled by 16, M upcast by 4 (16 / 2*2
    // threads); N, M, K were axes 1, 0, 2
    assert_eq!(kk.local_dims, 5);
    assert_eq!(shape(&kk), vec![2, 4, 2, 2, 2, 2, 2, 2, 16, 4]);
    assert_eq!(kk.tensor_core_opts.as_ref().unwrap().axes, [1, 0, 2]);
}

#[test]
fn tc_axes_follow_removed_dims() {
    let mut o = TensorCoreOptions {
        axes: [1, 3, 5],
        axes_exist: [true, true],
        axis_pads: vec![],
    };
    o.fix_axes(0);
    assert_eq!((o.axes, o.axes_exist), ([0, 2, 5], [true, true]));
    o.fix_axes(2);
    assert_eq!((o.axes, o.axes_exist), ([0, 2, 5], [true, false]));
    o.fix_axes(4);
    assert_eq!((o.axes, o.axes_exist), ([0, 2, 5], [true, false]));
}

/// The CPU tile (beyond 0.9.1, `cpu_tile.rs`) of this host, and what it makes of a 1024^3
/// matmul on CLANG: the output axes swapped (the unit-stride `n` outside, `m` inside), then the
/// tile's opts.
#[test]
fn cpu_tile_of_this_host_on_a_1024_matmul() {
    use super::cpu_tile::{host_tile, host_tiles, Tile};
    let avx512 = {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    };
    let (tile, opts, want_shape) = if avx512 {
        let t = Tile {
            lanes: 16,
            vecs: 2,
            rows: 8,
            unroll: 1,
        };
        let o = vec![
            Opt::new(UPCAST, 0, 16),
            Opt::new(UPCAST, 0, 2),
            Opt::new(UPCAST, 1, 8),
        ];
        (t, o, vec![32, 128, 1024, 16, 2, 8])
    } else {
        let t = Tile {
            lanes: 8,
            vecs: 2,
            rows: 4,
            unroll: 4,
        };
        let o = vec![
            Opt::new(UPCAST, 0, 8),
            Opt::new(UPCAST, 0, 2),
            Opt::new(UPCAST, 1, 4),
            Opt::new(UNROLL, 0, 4),
        ];
        (t, o, vec![64, 256, 256, 8, 2, 4, 4])
    };
    assert_eq!(host_tile(), tile);
    assert_eq!(tile.opts(), opts);
    let mut kk = k(&matmul(1024), &clang());
    assert!(kk.apply_cpu_tile().unwrap());
    assert!(kk.wide_vectors);
    assert_eq!(kk.applied_opts, opts);
    assert_eq!(shape(&kk), want_shape);
    // the unit-stride axis is the outer loop now: the output's strides follow the new order
    let out = kk.st(0).unwrap().real_strides(false).unwrap();
    let out: Vec<Option<i64>> = out
        .into_iter()
        .map(|s| s.and_then(|s| s.as_int()))
        .collect();
    assert_eq!(
        out[..2],
        [Some(tile.cols() as i64), Some(1024 * tile.rows as i64)]
    );
    assert_eq!(host_tiles()[0], tile);
}

/// With AVX-512 an output too narrow for two 16-lane vectors a row (48 columns) gets the next of
/// the host's tiles: one 16-lane vector a row.
#[test]
fn cpu_tile_falls_back_to_one_vector_a_row() {
    use super::cpu_tile::host_tiles;
    let tiles = host_tiles();
    let mut kk = k(&matmul_mnk(64, 48, 32), &clang());
    assert!(kk.apply_cpu_tile().unwrap());
    match tiles[..] {
        [wide, narrow] => {
            assert_eq!(
                (wide.lanes, wide.vecs, narrow.lanes, narrow.vecs),
                (16, 2, 16, 1)
            );
            assert_eq!(
                kk.applied_opts,
                vec![Opt::new(UPCAST, 0, 16), Opt::new(UPCAST, 1, 8)]
            );
            assert_eq!(shape(&kk), vec![3, 8, 32, 16, 8]);
        }
        _ => assert_eq!(kk.applied_opts, tiles[0].opts()),
    }
}

/// A weight gradient's shape (MLP backward: `g.T @ x`, g (256, 512), x (256, 784), out
/// (512, 784)): the unit-stride output axis (784) takes 16 columns but not 32, so with AVX-512
/// the second tile applies (one 16-lane vector a row, 8 rows).
#[test]
fn cpu_tile_on_a_weight_gradient_shape() {
    use super::cpu_tile::host_tiles;
    let (m, n, kk) = (512, 784, 256);
    let ast = matmul_a(st(&[kk, m]).permute(&[1, 0]).unwrap(), m, n, kk);
    let mut kk = k(&ast, &clang());
    assert!(kk.apply_cpu_tile().unwrap(), "{:?}", shape(&kk));
    let tiles = host_tiles();
    let want = tiles.iter().find(|t| 784 % t.cols() == 0).unwrap();
    assert_eq!(kk.applied_opts, want.opts());
}

/// The ALU UOps of the innermost reduce loop body of a linearized kernel, as (vector, scalar
/// float) counts.
fn reduce_body_alus(kk: &mut Kernel) -> (usize, usize) {
    use crate::codegen::uops::UOps;
    let uops = &kk.linearize().unwrap().uops;
    let start = uops
        .iter()
        .rposition(|u| u.op() == UOps::RANGE && u.range_arg().is_some_and(|r| r.2))
        .unwrap();
    let end = start
        + uops[start..]
            .iter()
            .position(|u| u.op() == UOps::ENDRANGE)
            .unwrap();
    let alus = uops[start..end].iter().filter(|u| u.op() == UOps::ALU);
    let dts: Vec<_> = alus.filter_map(|u| u.dtype()).collect();
    let vector = dts.iter().filter(|d| d.count > 1).count();
    let scalar_float = dts.iter().filter(|d| d.count == 1 && d.is_float()).count();
    (vector, scalar_float)
}

/// The vector ALU fold (`uopgraph/vectorize.rs`) on the CPU tile of a 1024^3 matmul: with the
/// CPU renderers every multiply-add of the reduce loop is a vector ALU (one MUL and one ADD per
/// accumulator and unrolled step), none scalar; without the fold (vector_alu None) they are
/// all scalar.
#[test]
fn cpu_tile_multiply_adds_fold_into_vector_alus() {
    use super::cpu_tile::host_tile;
    use crate::codegen::renderer::VectorAlu;
    let t = host_tile();
    let accs = t.vecs * t.rows;
    for opts in [
        clang(),
        crate::renderer::llvmir::LLVMRenderer::cpu(true)
            .opts()
            .clone(),
    ] {
        assert_ne!(opts.vector_alu, VectorAlu::None);
        let mut kk = k(&matmul(1024), &opts);
        assert!(kk.apply_cpu_tile().unwrap());
        assert_eq!(reduce_body_alus(&mut kk), (2 * accs * t.unroll, 0));
        let mut scalar = k(
            &matmul(1024),
            &RendererOpts {
                vector_alu: VectorAlu::None,
                ..opts
            },
        );
        assert!(scalar.apply_cpu_tile().unwrap());
        let lanes = accs * t.lanes * t.unroll;
        assert_eq!(reduce_body_alus(&mut scalar), (0, 2 * lanes));
    }
}

#[cfg(test)]
#[path = "stage_tests.rs"]
mod stage;
