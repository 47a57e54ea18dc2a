//! A register tile for matmul-shaped kernels on CPU devices: beyond tinygrad 0.9.1, which gives a
//! CPU matmul the GPU-shaped `UPCAST 4, UPCAST 4, UNROLL 4` (a 4x4 output tile of 128-bit lanes;
//! on this machine about a tenth of the FMA ceiling: each reduce step reads 16 of the 64 bytes of
//! a cache line of the right-hand side, one 4 KiB row apart).
//!
//! When it applies, `get_kernel` uses it instead of `hand_coded_optimizations` (`CPU_TILE=0`
//! keeps 0.9.1's choice; `Kernel::apply_default_opts` itself stays 0.9.1's). The opts are legal
//! 0.9.1 opts (no upcast above 8): `UPCAST(n, 8)`, `UPCAST(n, 2)`, `UPCAST(m, MR)`,
//! `UNROLL(0, 4)`, where `n` is an output axis with unit stride in the output and in every buffer
//! that does not broadcast it, `m` another output axis some input broadcasts, and `MR` is 8 when
//! the host has AVX-512 (32 vector registers) and 4 otherwise. The tile is `MR` rows of two
//! 8-lane vectors: one 64-byte line of the right-hand side per row and reduce step. The kernel is
//! marked [`Kernel::wide_vectors`], so the linearizer groups the 8 unit-stride lanes into one
//! vector load, accumulator and store (0.9.1 groups 2 or 4), and the C compiler (or LLVM's SLP
//! vectorizer) turns the lane-wise multiply-adds into 256-bit vector instructions. Each lane
//! still adds its products in the reduce order, so the results are the unoptimized kernel's bits.
//!
//! Applies only to a single-output SUM reduce of float32 buffers on a device without locals, with
//! sizes that divide (`n` by 16, `m` by `MR`, both larger, the last reduce dim by 4) and an output
//! whose other strides and offset keep every 8-lane store aligned. Not guaranteed: the tile is chosen for
//! this machine's cache line and register file, not searched (BEAM may still replace it).

use super::opts::{Opt, OptOps};
use super::{Kernel, KernelBuf};
use crate::dtype::dtypes;
use crate::helpers::getenv;
use crate::ops::{Op, ReduceOps};
use crate::{Error, Result};

/// Lanes of one vector of the tile (256 bits of float32); a row of the tile is two of them.
pub const TILE_N: usize = 8;
/// Unroll of the last reduce dim.
pub const TILE_K: usize = 4;

/// Rows of the tile: 8 with AVX-512's 32 vector registers, else 4 (16 registers).
pub fn tile_m() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 8;
        }
    }
    4
}

impl Kernel {
    /// Apply the CPU tile (see the module doc) when it fits; true when it did. `CPU_TILE=0`
    /// turns it off.
    pub fn apply_cpu_tile(&mut self) -> Result<bool> {
        if getenv("CPU_TILE", 1) == 0 {
            return Ok(false);
        }
        let Some((n, m, r)) = self.cpu_tile_axes(tile_m())? else {
            return Ok(false);
        };
        let before = self.clone();
        let applied = self
            .apply_opt(Opt::new(OptOps::UPCAST, n, TILE_N))
            .and_then(|()| self.apply_opt(Opt::new(OptOps::UPCAST, n, 2)))
            .and_then(|()| self.apply_opt(Opt::new(OptOps::UPCAST, m, tile_m())))
            .and_then(|()| self.apply_opt(Opt::new(OptOps::UNROLL, r, TILE_K)));
        match applied {
            Ok(()) => {
                self.wide_vectors = true;
                Ok(true)
            }
            Err(Error::KernelOpt(_)) => {
                *self = before;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The (n, m, unroll) axes of the tile, or None when the kernel is not one it fits.
    fn cpu_tile_axes(&self, mr: usize) -> Result<Option<(usize, usize, usize)>> {
        let one_sum = self.reduceops.len() == 1
            && self.reduceops[0].op() == Op::Reduce(ReduceOps::SUM)
            && self.outbufs.len() == 1;
        let fr = self.first_reduce();
        if self.opts.has_local
            || !self.opts.supports_float4
            || !one_sum
            || !self.applied_opts.is_empty()
            || self.upcasted > 0
            || fr + 1 != self.shape_len()
        {
            return Ok(None);
        }
        let Some(full) = self
            .full_shape()
            .iter()
            .map(|s| s.as_int().and_then(|v| usize::try_from(v).ok()))
            .collect::<Option<Vec<usize>>>()
        else {
            return Ok(None);
        };
        let Some(strides) = self.int_strides()? else {
            return Ok(None);
        };
        if full[fr] % TILE_K != 0 || !self.output_aligned(&strides[0], fr)? {
            return Ok(None);
        }
        let bcast = |a: usize| strides[1..].iter().any(|s| s[a] == 0);
        let n = (0..fr).rev().find(|&a| {
            full[a] % (2 * TILE_N) == 0
                && full[a] > 2 * TILE_N
                && strides[0][a] == 1
                && strides.iter().all(|s| s[a] == 0 || s[a] == 1)
                && bcast(a)
        });
        let Some(n) = n else { return Ok(None) };
        let m = (0..fr)
            .rev()
            .find(|&a| a != n && full[a] % mr == 0 && full[a] > mr && bcast(a));
        Ok(m.map(|m| (n, m, 0)))
    }

    /// Every buffer's strides as integers (None: a float32 memory buffer is required everywhere,
    /// and no stride may be symbolic or hidden by a view).
    fn int_strides(&self) -> Result<Option<Vec<Vec<i64>>>> {
        let mut out = vec![];
        for (i, b) in self.bufs.iter().enumerate() {
            match b {
                KernelBuf::Mem(mb) if mb.dtype == dtypes::float32 => {}
                KernelBuf::Const(_) => {}
                _ => return Ok(None),
            }
            let st = self.st(i)?;
            let s: Option<Vec<i64>> = st
                .real_strides(false)?
                .into_iter()
                .map(|s| s.and_then(|s| s.as_int()))
                .collect();
            let Some(s) = s else { return Ok(None) };
            out.push(s);
        }
        Ok(Some(out))
    }

    /// The output's 8-lane groups start at multiples of 8: one unmasked view, an offset and
    /// every stride but the unit one divisible by 8 (reduce dims have stride 0).
    fn output_aligned(&self, strides: &[i64], fr: usize) -> Result<bool> {
        let st = self.st(0)?;
        let [v] = &st.views[..] else {
            return Ok(false);
        };
        let offset_ok = v.offset.as_int().is_some_and(|o| o % TILE_N as i64 == 0);
        let strides_ok = strides[..fr]
            .iter()
            .all(|&s| s == 1 || s % TILE_N as i64 == 0);
        Ok(v.mask.is_none() && offset_ok && strides_ok)
    }
}
