//! A register tile for matmul-shaped kernels on CPU devices: beyond tinygrad 0.9.1, which gives a
//! CPU matmul the GPU-shaped `UPCAST 4, UPCAST 4, UNROLL 4` (a 4x4 output tile of 128-bit lanes;
//! on this machine about a tenth of the FMA ceiling: each reduce step reads 16 of the 64 bytes of
//! a cache line of the right-hand side, one 4 KiB row apart).
//!
//! When it applies, `get_kernel` uses it instead of `hand_coded_optimizations` (`CPU_TILE=0`
//! keeps 0.9.1's choice; `Kernel::apply_default_opts` itself stays 0.9.1's). A tile
//! ([`host_tiles`]: the first that fits applies) is `rows` rows of `vecs` vectors of `lanes`
//! lanes: with AVX-512 (32 vector registers) 8 rows of two 16-lane vectors (`UPCAST(n, 16)`,
//! `UPCAST(n, 2)`, `UPCAST(m, 8)`: 16 accumulators), or of one where `n` does not take 32
//! columns; else 4 rows of two 8-lane vectors unrolled by 4 (`UPCAST(n, 8)`, `UPCAST(n, 2)`,
//! `UPCAST(m, 4)`, `UNROLL(0, 4)`). The right-hand side's rows are 4 KiB apart in a 1024-wide
//! matmul, so its column strip maps to a few cache sets and comes from L3 on every pass: the
//! wider the strip (two 64-byte lines a row rather than one), the more multiply-adds each of
//! those fetches (and page walks) feeds; on an AVX-512 Zen 5 host a 1024^3 matmul measured
//! 32-39% of the FMA ceiling with one 16-lane vector a row and 55-69% with two (`bench
//! workloads --workloads W3` in a quiet moment: 65-69%; the kernels' thread CPU time on the
//! loaded machine: 55-66%), and with the right-hand side's rows padded to 1056 floats (no
//! aliasing) one vector a row reached 68-72%. `n` is an output
//! axis with unit stride in the output and in every buffer that does not broadcast it, `m`
//! another output axis some input broadcasts. Before the opts the output axes are permuted (the
//! others, then `n`, then `m`) so that the loop over `m` runs inside the loop over `n`: one column
//! strip of the right-hand side stays in the L2 cache while every row tile of the left-hand side
//! passes it (with `m` outside, each row tile streams the whole right-hand side from L3 again: a
//! 1024^3 matmul with the AVX-512 tile measured 15% of the FMA ceiling that way, 60-68% this way).
//! The upcast by 16 goes past 0.9.1's limit of 8. The kernel is marked [`Kernel::wide_vectors`],
//! so the linearizer groups the unit-stride lanes into one vector load, accumulator and store
//! (0.9.1 groups 2 or 4), and the vector ALU fold of the CPU renderers
//! (`codegen/uopgraph/vectorize.rs`) makes the lane-wise multiply-adds one vector MUL and ADD per
//! accumulator (with `VECALU=0`, or a renderer without vector ALUs, they stay lane by lane and the
//! C compiler or LLVM's SLP vectorizer finds the vectors). Each lane still adds its products in
//! the reduce order, so the results are the unoptimized kernel's bits.
//!
//! Applies only to a single-output SUM reduce of float32 buffers on a device without locals, with
//! sizes that divide (`n` by the tile's columns, `m` by its rows, both larger, the last reduce dim
//! by the unroll) and an output whose other strides and offset keep every vector store aligned.
//! Not guaranteed: the tile is chosen for this machine's cache line and register file, not
//! searched (BEAM may still replace it). Transposed right-hand sides (`A @ B.T`: no unit stride
//! on the output's axis) are not tiled: a vector along `n` would need a gather or an in-register
//! transpose, and a vector along the reduce axis would regroup the sum.

use super::opts::{Opt, OptOps};
use super::{Kernel, KernelBuf};
use crate::dtype::dtypes;
use crate::helpers::getenv;
use crate::ops::{Op, ReduceOps};
use crate::{Error, Result};

/// The register tile of this host: `rows` rows (an output axis some input broadcasts) of `vecs`
/// vectors of `lanes` unit-stride lanes, over `unroll` steps of the last reduce dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub lanes: usize,
    pub vecs: usize,
    pub rows: usize,
    pub unroll: usize,
}

impl Tile {
    /// Output columns per tile (`lanes * vecs`).
    pub fn cols(&self) -> usize {
        self.lanes * self.vecs
    }

    /// The opts the tile applies, for the permuted kernel (the `n` axis first, then `m`).
    pub fn opts(&self) -> Vec<Opt> {
        let mut v = vec![Opt::new(OptOps::UPCAST, 0, self.lanes)];
        if self.vecs > 1 {
            v.push(Opt::new(OptOps::UPCAST, 0, self.vecs));
        }
        v.push(Opt::new(OptOps::UPCAST, 1, self.rows));
        if self.unroll > 1 {
            v.push(Opt::new(OptOps::UNROLL, 0, self.unroll));
        }
        v
    }
}

/// The tiles of this host, the preferred first. With AVX-512 (32 vector registers): 8 rows of
/// two 16-lane vectors (16 accumulators; the compilers fold the left-hand side's broadcast into
/// the multiply; an unroll by 2 makes LLVM load those as pairs and shuffle them), then 8 rows of
/// one (where `n` does not take 32 columns). Otherwise (16 registers): 4 rows of two 8-lane
/// vectors, unrolled by 4.
pub fn host_tiles() -> Vec<Tile> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            let wide = Tile {
                lanes: 16,
                vecs: 2,
                rows: 8,
                unroll: 1,
            };
            return vec![wide, Tile { vecs: 1, ..wide }];
        }
    }
    vec![Tile {
        lanes: 8,
        vecs: 2,
        rows: 4,
        unroll: 4,
    }]
}

/// A kernel as the CPU tiles see it ([`Kernel::one_sum_shape`]): the first reduce dim, the full
/// shape, every buffer's strides (None where a view leaves one unknown), the output's strides.
pub(super) struct SumShape {
    pub fr: usize,
    pub full: Vec<usize>,
    pub strides: Vec<Vec<Option<i64>>>,
    pub out: Vec<i64>,
}

/// The preferred tile of this host (the first of [`host_tiles`]).
pub fn host_tile() -> Tile {
    host_tiles()[0]
}

impl Kernel {
    /// Apply the first of the host's CPU tiles (see the module doc) that fits; true when one
    /// did. `CPU_TILE=0` turns them off.
    pub fn apply_cpu_tile(&mut self) -> Result<bool> {
        if getenv("CPU_TILE", 1) == 0 {
            return Ok(false);
        }
        for tile in host_tiles() {
            let Some((n, m)) = self.cpu_tile_axes(&tile)? else {
                continue;
            };
            let before = self.clone();
            match self.apply_tile(&tile, n, m) {
                Ok(()) => {
                    self.wide_vectors = true;
                    return Ok(true);
                }
                Err(Error::KernelOpt(_)) => *self = before,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Loop order: the other output axes (in order), then `n`, then `m`, so one column strip of
    /// the right-hand side stays in cache while every row tile of the left-hand side passes it.
    /// Then the tile's opts; an upcast by 16 goes past `apply_opt`'s limit of 8 (beyond 0.9.1).
    fn apply_tile(&mut self, tile: &Tile, n: usize, m: usize) -> Result<()> {
        let fr = self.first_reduce();
        let mut perm: Vec<usize> = (0..fr).filter(|&a| a != n && a != m).collect();
        let outer = perm.len();
        perm.extend([n, m]);
        perm.extend(fr..self.shape_len());
        self.reshape_and_permute(None, Some(&perm))?;
        let shift = |o: Opt| Opt::new(o.op, o.axis.unwrap_or(0) + outer, o.amt.unwrap_or(0));
        for opt in tile.opts() {
            let opt = if opt.op == OptOps::UNROLL {
                opt
            } else {
                shift(opt)
            };
            if opt.op == OptOps::UPCAST && opt.amt.is_some_and(|a| a > 8) {
                self.upcast_wide(opt)?;
            } else {
                self.apply_opt(opt)?;
            }
        }
        Ok(())
    }

    /// UPCAST beyond 8 lanes (the tile's 16-lane vector): `apply_opt`'s upcast without its limit.
    fn upcast_wide(&mut self, opt: Opt) -> Result<()> {
        let (Some(axis), Some(amt)) = (opt.axis, opt.amt) else {
            return Err(Error::KernelOpt(format!("{opt}: needs an axis and amt")));
        };
        let amt = i64::try_from(amt).map_err(|_| Error::KernelOpt(format!("{opt}: amt")))?;
        let divides = (self.full_shape().get(axis))
            .and_then(|s| s.as_int())
            .is_some_and(|s| s % amt == 0);
        if axis >= self.first_reduce() || !divides {
            return Err(Error::KernelOpt(format!(
                "{opt}: not a dividing output axis"
            )));
        }
        self.shift_to(axis, amt, false, None)?;
        self.upcast()?;
        self.applied_opts.push(opt);
        self.simplify_ones()?;
        Ok(())
    }

    /// What the CPU tiles (this one and `cpu_conv.rs`) read of a kernel they may fit: None
    /// unless it is a single-output SUM reduce with no opts yet, on a device without locals that
    /// has vectors, with integer sizes, float32 buffers and an output whose strides are known.
    pub(super) fn one_sum_shape(&self) -> Result<Option<SumShape>> {
        let one_sum = self.reduceops.len() == 1
            && self.reduceops[0].op() == Op::Reduce(ReduceOps::SUM)
            && self.outbufs.len() == 1;
        if self.opts.has_local
            || !self.opts.supports_float4
            || !one_sum
            || !self.applied_opts.is_empty()
            || self.upcasted > 0
        {
            return Ok(None);
        }
        let (Some(full), Some(strides)) = (self.int_shape(), self.int_strides()?) else {
            return Ok(None);
        };
        let out: Option<Vec<i64>> = strides[0].iter().copied().collect();
        Ok(out.map(|out| SumShape {
            fr: self.first_reduce(),
            full,
            strides,
            out,
        }))
    }

    /// The (n, m) axes of the tile, or None when the kernel is not one it fits.
    fn cpu_tile_axes(&self, tile: &Tile) -> Result<Option<(usize, usize)>> {
        let Some(shape) = self.one_sum_shape()? else {
            return Ok(None);
        };
        let SumShape {
            fr,
            full,
            strides,
            out,
        } = shape;
        if fr + 1 != self.shape_len()
            || full[fr] % tile.unroll != 0
            || !self.output_aligned(&out, fr, tile.lanes)?
        {
            return Ok(None);
        }
        let bcast = |a: usize| strides[1..].iter().any(|s| s[a] == Some(0));
        let n = (0..fr).rev().find(|&a| {
            full[a] % tile.cols() == 0
                && full[a] > tile.cols()
                && out[a] == 1
                && strides.iter().all(|s| matches!(s[a], Some(0 | 1)))
                && bcast(a)
        });
        let Some(n) = n else { return Ok(None) };
        let m = (0..fr)
            .rev()
            .find(|&a| a != n && full[a] % tile.rows == 0 && full[a] > tile.rows && bcast(a));
        Ok(m.map(|m| (n, m)))
    }

    /// Every buffer's strides as integers where a single expression gives them (None: a float32
    /// memory buffer is required everywhere; an input behind several views may leave some
    /// unknown, which the tile then does not use).
    pub(super) fn int_strides(&self) -> Result<Option<Vec<Vec<Option<i64>>>>> {
        let mut out = vec![];
        for (i, b) in self.bufs.iter().enumerate() {
            match b {
                KernelBuf::Mem(mb) if mb.dtype == dtypes::float32 => {}
                KernelBuf::Const(_) => {}
                _ => return Ok(None),
            }
            let s = self.real_strides(i)?;
            out.push(s.into_iter().map(|s| s.and_then(|s| s.as_int())).collect());
        }
        Ok(Some(out))
    }

    /// The output's vectors start at multiples of `lanes`: one unmasked view, an offset and
    /// every stride but the unit one divisible by `lanes` (reduce dims have stride 0).
    pub(super) fn output_aligned(&self, strides: &[i64], fr: usize, lanes: usize) -> Result<bool> {
        let st = self.st(0)?;
        let [v] = &st.views[..] else {
            return Ok(false);
        };
        let offset_ok = v.offset.as_int().is_some_and(|o| o % lanes as i64 == 0);
        let strides_ok = strides[..fr]
            .iter()
            .all(|&s| s == 1 || s % lanes as i64 == 0);
        Ok(v.mask.is_none() && offset_ok && strides_ok)
    }
}
