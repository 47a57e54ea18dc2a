//! Tensor-core (WMMA) lane layouts, as tinygrad's PYTHON device emulates them: which register
//! element of which warp lane holds A[i][k], B[k][j] and C[i][j].
//!
//! Supported: CUDA/NV `mma.sync m16n8k16` (A 8, B 4, C 4 elements per thread), AMD RDNA3
//! `wmma 16x16x16` (A 16, B 16, C 8 elements per thread; lanes 16..31 duplicate lanes 0..15 for A
//! and B), AMD RDNA4 (gfx12) `wmma 16x16x16` (A, B and C 8 elements per thread, no duplicated
//! lanes; beyond tinygrad 0.9.1), and Metal `simdgroup 8x8x8` (2 elements each). Warps are 32
//! threads; the workgroup's threads are taken 32 at a time.
//!
//! The gfx12 layout (RDNA4 ISA guide, "Wave Matrix Multiply Accumulate"; AMD GPUOpen, "Using the
//! Matrix Cores of AMD RDNA 4 architecture GPUs"): lane `l`, element `e` holds
//! A[l % 16][8 * (l / 16) + e], B[8 * (l / 16) + e][l % 16] and D[8 * (l / 16) + e][l % 16]. An
//! AMD WMMA arg names which one by its per-lane element counts (16/16/8 on gfx11, 8/8/8 on gfx12),
//! the operand widths of the two instruction sets.
//!
//! Not guaranteed: the accumulation order of real hardware; sums are formed in f64 and rounded to
//! the output dtype once.

use crate::{bail, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WmmaLayout {
    Cuda,
    Amd,
    AmdGfx12,
    Metal,
}

/// (warp threads, K, A elements, B elements, C elements) per thread.
pub struct Shape {
    pub warp: usize,
    pub k: usize,
    pub na: usize,
    pub nb: usize,
    pub nc: usize,
}

impl WmmaLayout {
    /// The layout for a WMMA arg's device name and per-thread element counts of A, B and C
    /// (AMD: gfx11's 16/16/8 or gfx12's 8/8/8).
    pub fn for_arg(device: &str, upcast_sizes: &[usize]) -> Result<WmmaLayout> {
        Ok(match (device, upcast_sizes) {
            ("CUDA" | "NV", _) => WmmaLayout::Cuda,
            ("AMD" | "HIP", [16, 16, 8]) => WmmaLayout::Amd,
            ("AMD" | "HIP", [8, 8, 8]) => WmmaLayout::AmdGfx12,
            ("AMD" | "HIP", s) => bail!(
                Codegen,
                "INTERP: no AMD WMMA takes {s:?} elements per lane for A/B/C (gfx11: [16, 16, 8], \
                 gfx12: [8, 8, 8])"
            ),
            ("METAL", _) => WmmaLayout::Metal,
            (d, _) => bail!(Codegen, "INTERP: no WMMA lane layout for device {d:?}"),
        })
    }

    pub fn shape(self) -> Shape {
        let (warp, k, na, nb, nc) = match self {
            WmmaLayout::Cuda => (32, 16, 8, 4, 4),
            WmmaLayout::Amd => (32, 16, 16, 16, 8),
            WmmaLayout::AmdGfx12 => (32, 16, 8, 8, 8),
            WmmaLayout::Metal => (32, 8, 2, 2, 2),
        };
        Shape {
            warp,
            k,
            na,
            nb,
            nc,
        }
    }

    /// (element, lane within the warp) holding A at (i, j) = (k index, output column).
    pub fn a_elem(self, i: usize, j: usize) -> (usize, usize) {
        match self {
            WmmaLayout::Cuda => (
                (i % 2) + (j / 8) * 2 + (i / 8) * 4,
                ((i / 2) % 4) + (j % 8) * 4,
            ),
            WmmaLayout::Amd => (i, j),
            WmmaLayout::AmdGfx12 => (i % 8, j + (i / 8) * 16),
            WmmaLayout::Metal => metal_elem(i, j),
        }
    }

    /// (element, lane within the warp) holding B at (i, j) = (output row, k index).
    pub fn b_elem(self, i: usize, j: usize) -> (usize, usize) {
        match self {
            WmmaLayout::Cuda => ((j % 2) + (j / 8) * 2, (j / 2) % 4 + i * 4),
            WmmaLayout::Amd => (j, i),
            WmmaLayout::AmdGfx12 => (j % 8, i + (j / 8) * 16),
            WmmaLayout::Metal => metal_elem(i, j),
        }
    }

    /// The output (row, column) that element `elem` of lane `lane` holds.
    pub fn c_map(self, lane: usize, elem: usize) -> (usize, usize) {
        match self {
            WmmaLayout::Cuda => ((elem % 2) + (lane % 4) * 2, (lane / 4) + (elem / 2) * 8),
            WmmaLayout::Amd => (lane % 16, lane / 16 + elem * 2),
            WmmaLayout::AmdGfx12 => (lane % 16, (lane / 16) * 8 + elem),
            WmmaLayout::Metal => (
                elem + (lane % 2) * 2 + ((lane / 8) % 2) * 4,
                ((lane / 2) % 4) + (lane / 16) * 4,
            ),
        }
    }

    /// AMD gfx11 feeds A and B through both half-warps: lane j and lane j+16 must agree (gfx12
    /// gives the two half-waves different K values instead).
    pub fn duplicated_half_warps(self) -> bool {
        self == WmmaLayout::Amd
    }
}

fn metal_elem(i: usize, j: usize) -> (usize, usize) {
    (
        i % 2,
        (i / 2) % 2 + (j % 4) * 2 + (i / 4) * 8 + (j / 4) * 16,
    )
}

/// Run one WMMA over a workgroup of `warp_size` threads. `a(elem, lane)`, `b(elem, lane)` and
/// `c(elem, lane)` read the inputs as f64; the result is written through `out(elem, lane, value)`.
pub fn run(
    layout: WmmaLayout,
    warp_size: usize,
    a: &dyn Fn(usize, usize) -> f64,
    b: &dyn Fn(usize, usize) -> f64,
    c: &dyn Fn(usize, usize) -> f64,
    out: &mut dyn FnMut(usize, usize, f64),
) -> Result<()> {
    let sh = layout.shape();
    if warp_size == 0 || warp_size % sh.warp != 0 {
        bail!(
            Runtime,
            "INTERP: WMMA ({layout:?}) needs a multiple of {} threads per workgroup, got {warp_size}",
            sh.warp
        );
    }
    for goff in (0..warp_size).step_by(sh.warp) {
        if layout.duplicated_half_warps() {
            for (n, f) in [(sh.na, a), (sh.nb, b)] {
                for e in 0..n {
                    for l in 0..16 {
                        if f(e, goff + l).to_bits() != f(e, goff + l + 16).to_bits() {
                            bail!(Runtime, "INTERP: AMD WMMA input element {e} differs between lanes {l} and {}", l + 16);
                        }
                    }
                }
            }
        }
        for lane in 0..sh.warp {
            for elem in 0..sh.nc {
                let (ci, cj) = layout.c_map(lane, elem);
                let mut sum = 0.0;
                for k in 0..sh.k {
                    let (ae, al) = layout.a_elem(k, cj);
                    let (be, bl) = layout.b_elem(ci, k);
                    sum += a(ae, goff + al) * b(be, goff + bl);
                }
                out(elem, goff + lane, c(elem, goff + lane) + sum);
            }
        }
    }
    Ok(())
}
