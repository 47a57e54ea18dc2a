//! The tensor cores each GPU renderer offers (tinygrad 0.9.1's `TensorCore` lists), as data the
//! optimizer matches against a kernel.
//!
//! - NVIDIA `mma.sync.aligned.m16n8k16.row.col` (sm_80 and newer: sm_80/86/89/90): dims
//!   (N, M, K) = (8, 16, 16), half -> float and bfloat16 -> float (CUDA-C), half -> float (the PTX
//!   path, as 0.9.1's `PTXRenderer`); a warp of 32 threads built from five 2-thread dims, A 8,
//!   B 4, C 4 elements per thread (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
//!   point type").
//! - AMD RDNA3 (gfx11) `v_wmma_f32_16x16x16_f16` / `v_wmma_f16_16x16x16_f16` in wave32: dims
//!   (16, 16, 16), half -> float and half -> half; 32 threads as (8, 2, 2), A and B 16 halves per
//!   lane (lanes 16-31 repeat lanes 0-15), C 8 values per lane (RDNA3 ISA, section 7.9 "Wave
//!   Matrix Multiply Accumulate").
//! - AMD RDNA4 (gfx12) `v_wmma_f32_16x16x16_{f16,bf16}`, `v_wmma_f16_16x16x16_f16` and
//!   `v_wmma_bf16_16x16x16_bf16` in wave32: dims (16, 16, 16), half -> float, half -> half,
//!   bfloat16 -> float and bfloat16 -> bfloat16 (beyond tinygrad 0.9.1, which has no gfx12
//!   tensor core); the same 32 threads, but A, B and C 8 values per
//!   lane and no repeated half-wave (RDNA4 ISA guide, "Wave Matrix Multiply Accumulate"; AMD
//!   GPUOpen, "Using the Matrix Cores of AMD RDNA 4 architecture GPUs"; LLVM
//!   `test/CodeGen/AMDGPU/wmma-gfx12-w32.ll`): for lane `l` and element `e`, A holds
//!   A[l % 16][8 * (l / 16) + e], B holds B[8 * (l / 16) + e][l % 16] and C/D hold
//!   D[8 * (l / 16) + e][l % 16].
//!
//! Which AMD chip has which is the target table's `wmma` column (`hw::amd::targets`).
//!
//! Not guaranteed: gfx12's integer and fp8 WMMA variants are not offered; bfloat16 -> bfloat16
//! rounds once per WMMA in the emulator (the hardware's internal rounding is not documented);
//! Metal's simdgroup tensor core has no renderer here.

use crate::dtype::{dtypes, DType};
use crate::hw::amd::targets::{lookup_name, GfxTarget, Wmma};
use crate::renderer::TensorCore;

fn nv_mma(dtype_in: DType) -> TensorCore {
    TensorCore {
        dims: [8, 16, 16],
        dtype_in,
        dtype_out: dtypes::float32,
        threads: vec![(0, 2), (0, 2), (1, 2), (1, 2), (0, 2)],
        thread_local_sizes: vec![vec![2, 2, 2], vec![2, 2], vec![2, 2]],
        thread_local_aliases: vec![
            vec![
                vec![0],
                vec![0],
                vec![5],
                vec![-2],
                vec![0],
                vec![-1, 1, 2, -3],
                vec![3, 4],
            ],
            vec![
                vec![3],
                vec![4],
                vec![0],
                vec![0],
                vec![5],
                vec![-1, 1, 2, -2],
                vec![0],
            ],
            vec![
                vec![-1],
                vec![1],
                vec![5],
                vec![-2],
                vec![2],
                vec![0],
                vec![3, 4],
            ],
        ],
    }
}

/// CUDA-C's tensor cores for `sm_XX`: m16n8k16 half/bfloat16 -> float from sm_80 on.
pub fn cuda(sm: u32) -> Vec<TensorCore> {
    if sm >= 80 {
        vec![nv_mma(dtypes::float16), nv_mma(dtypes::bfloat16)]
    } else {
        vec![]
    }
}

/// The PTX path's tensor cores for `sm_XX`: m16n8k16 half -> float from sm_80 on.
pub fn ptx(sm: u32) -> Vec<TensorCore> {
    if sm >= 80 {
        vec![nv_mma(dtypes::float16)]
    } else {
        vec![]
    }
}

fn rdna3(dtype_out: DType) -> TensorCore {
    TensorCore {
        dims: [16, 16, 16],
        dtype_in: dtypes::float16,
        dtype_out,
        threads: vec![(0, 8), (0, 2), (1, 2)],
        thread_local_sizes: vec![vec![16], vec![16], vec![4, 2]],
        thread_local_aliases: vec![
            vec![vec![0], vec![0], vec![2], vec![-1], vec![1]],
            vec![vec![1], vec![2], vec![0], vec![-1], vec![0]],
            vec![vec![1], vec![2], vec![-2], vec![0], vec![3, -1]],
        ],
    }
}

/// RDNA4's WMMA in rawgrad's TC form. Locals as RDNA3 (lane = N8 + 8 * N2 + 16 * M2, the
/// first local fastest), M upcast by 8. A: its M dims take the lane's low 16 (M2 <- N2 lane,
/// M8 <- N8 lane), K = element + 8 * (lane / 16). B: N from the lane's low 16, K the same.
/// C: N and M2 from the lanes unchanged, M8 = element (D[8 * (l / 16) + e][l % 16]).
fn rdna4(dtype_in: DType, dtype_out: DType) -> TensorCore {
    TensorCore {
        dims: [16, 16, 16],
        dtype_in,
        dtype_out,
        threads: vec![(0, 8), (0, 2), (1, 2)],
        thread_local_sizes: vec![vec![8], vec![8], vec![8]],
        thread_local_aliases: vec![
            vec![vec![0], vec![0], vec![2], vec![-1, 3], vec![1]],
            vec![vec![1], vec![2], vec![0], vec![-1, 3], vec![0]],
            vec![vec![1], vec![2], vec![3], vec![0], vec![-1]],
        ],
    }
}

/// The AMD tensor cores of a target: RDNA3's WMMA on gfx11, RDNA4's on gfx12, none otherwise.
pub fn amd_target(target: &GfxTarget) -> Vec<TensorCore> {
    match target.wmma {
        Wmma::Rdna3 => vec![rdna3(dtypes::float32), rdna3(dtypes::float16)],
        Wmma::Rdna4 => vec![
            rdna4(dtypes::float16, dtypes::float32),
            rdna4(dtypes::float16, dtypes::float16),
            rdna4(dtypes::bfloat16, dtypes::float32),
            rdna4(dtypes::bfloat16, dtypes::bfloat16),
        ],
        Wmma::None => vec![],
    }
}

/// The AMD tensor cores of a gfx target name (`gfx1100`...); none for a name outside the
/// target table.
pub fn amd(gfx: &str) -> Vec<TensorCore> {
    lookup_name(gfx).map(amd_target).unwrap_or_default()
}
