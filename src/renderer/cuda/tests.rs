use super::*;
use crate::dtype::dtypes;

fn ci(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

fn alu(op: impl Into<Op>, d: DType, src: &[&UOp]) -> UOp {
    UOp::alu(op, d, src.iter().map(|u| (*u).clone()).collect())
}

/// temp[l] = data1[g*4+l] (as `d`); barrier; data0[g*4+l] = temp[l] + n.
fn local_kernel(d: DType) -> Vec<UOp> {
    let (d0, d1) = (
        UOp::define_global(d, 0, true),
        UOp::define_global(d, 1, false),
    );
    let n = UOp::define_var("n", 1, 9);
    let temp = UOp::define_local(d, "temp", 4);
    let (g, l) = (UOp::special(0, "gidx0", 3), UOp::special(1, "lidx1", 4));
    let c4 = ci(4);
    let gm = alu(BinaryOps::MUL, dtypes::int32, &[&g, &c4]);
    let idx = alu(BinaryOps::ADD, dtypes::int32, &[&gm, &l]);
    let x = UOp::load(&d1, &idx, d);
    let st = UOp::store(&temp, &l, &x);
    let bar = UOp::barrier(vec![st.clone()]);
    let y = UOp::load_after(&temp, &l, None, &bar, d);
    let nf = n.cast(d);
    let z = alu(BinaryOps::ADD, d, &[&y, &nf]);
    let out = UOp::store(&d0, &idx, &z);
    vec![
        d0, d1, n, temp, c4, g, l, gm, idx, x, st, bar, y, nf, z, out,
    ]
}

#[test]
fn kernel_signature_and_launch_indices() {
    let src = CUDARenderer::new(90)
        .render("r_3_4", &local_kernel(dtypes::float32))
        .unwrap();
    assert!(
        src.contains(
            "extern \"C\" __global__ void __launch_bounds__(4) r_3_4(float* data0, const float* data1, const int n)"
        ),
        "{src}"
    );
    assert!(src.contains("blockIdx.x"), "{src}");
    assert!(src.contains("threadIdx.y"), "{src}");
    assert!(
        src.contains("__align__(16) __shared__ float temp[4];"),
        "{src}"
    );
    assert!(src.contains("__syncthreads();"), "{src}");
    assert!(!src.contains("#include"), "{src}");
    assert!(!src.contains("struct __align__(2) half"), "{src}");
}

#[test]
fn half_brings_its_own_type() {
    let src = CUDARenderer::nv(80)
        .render("r_3_4h", &local_kernel(dtypes::float16))
        .unwrap();
    assert!(src.contains("struct __align__(2) half"), "{src}");
    assert!(src.contains("half* data0"), "{src}");
    assert_eq!(CUDARenderer::nv(80).opts().device, "NV");
    assert_eq!(CUDARenderer::new(80).opts().device, "CUDA");
}

#[test]
fn idx_is_the_global_thread_index() {
    let d = dtypes::float32;
    let d0 = UOp::define_global(d, 0, true);
    let i = UOp::special(0, "idx0", 64);
    let one = UOp::cnst(d, 1.0);
    let st = UOp::store(&d0, &i, &one);
    let src = CUDARenderer::new(86)
        .render("E_64", &[d0, i, one, st])
        .unwrap();
    assert!(src.contains("(blockIdx.x*blockDim.x+threadIdx.x)"), "{src}");
    assert!(src.contains("__launch_bounds__(1)"), "{src}");
}

#[test]
fn float_max_propagates_nan_and_wide_vectors_get_structs() {
    let mut needs = Needs::default();
    let r = CUDARenderer::new(90);
    let f = dtypes::float32;
    let m = r
        .code_for_op(Op::Binary(BinaryOps::MAX), &["a", "b"], f, &mut needs)
        .unwrap();
    assert_eq!(m, "rg_fmax(a,b)");
    assert!(needs.helpers.contains("rg_fmax"));
    assert_eq!(r.render_dtype(f.vec(4), &mut needs).unwrap(), "float4");
    assert_eq!(r.render_dtype(f.vec(8), &mut needs).unwrap(), "float8");
    let pre = preamble(&needs).join("\n");
    assert!(pre.contains("struct __align__(16) float8"), "{pre}");
    assert!(pre.contains("make_float8("), "{pre}");
    assert!(!pre.contains("struct __align__(16) float4"), "{pre}");
    assert!(r.render_dtype(dtypes::bool.vec(4), &mut needs).is_err());
}

#[test]
fn launch_limits_are_cudas() {
    let o = CUDARenderer::new(90);
    let o = o.opts();
    assert_eq!(o.global_max, Some([i32::MAX as i64, 65535, 65535]));
    assert_eq!(o.local_max, Some([1024, 1024, 64]));
    assert_eq!(o.shared_max, 49152);
    // 0.9.1: m16n8k16 half and bfloat16 -> float from sm_80 on
    let names: Vec<String> = o.tensor_cores.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        ["WMMA_8_16_16_half_float", "WMMA_8_16_16___bf16_float"]
    );
    assert!(CUDARenderer::new(75).opts().tensor_cores.is_empty());
}
