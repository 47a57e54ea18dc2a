//! Independent accumulators for reduce kernels on CPU devices: beyond tinygrad 0.9.1, whose
//! heuristics give a reduction that no buffer broadcasts (a row sum, softmax's max and sum,
//! layernorm's mean and variance, argmax) one accumulator per output element and an `UNROLL` of
//! the reduce dim whose lanes add into that one accumulator in order: a single chain of dependent
//! adds (or maxes), bound by the float add's latency rather than by memory bandwidth.
//!
//! When it applies, `get_kernel` uses it instead of `hand_coded_optimizations` (`CPU_REDUCE=0`
//! keeps 0.9.1's choice; `Kernel::apply_default_opts` itself stays 0.9.1's). The opts are legal
//! 0.9.1 opts: `UPCAST(a, 8)` (or 4) of an output axis `a`, so that each of the 8 output elements
//! keeps its own accumulator (8 independent chains, no reassociation: every element still adds
//! its values in the unoptimized kernel's order, so the results are the same bits), then
//! `UNROLL(r, 4)` of the last reduce dim when it divides (0.9.1's unroll). Where the reduce op is
//! MAX (exactly associative) on LLVM, the linearizer also gives each of the 4 unrolled lanes
//! its own accumulator, so a row's lanes are one vector op per iteration instead of a chain of 4
//! (`linearizer/reduce_lanes.rs`; a float sum keeps its lanes in order). The output axis is one
//! with unit stride in a buffer the reduce reads (a column sum: the 8 lanes are one contiguous
//! load), else the innermost output axis that divides (a row sum: 8 rows at once).
//!
//! Applies only on a device without locals, with no tensor core and no opt applied yet, to a
//! kernel with a reduce and an output axis of a size divisible by 4, where 0.9.1's heuristics
//! would upcast no axis, or only one axis by less than the rows here that no buffer but a
//! constant broadcasts (0.9.1 counts a `CONST` with stride 0 as a broadcast buffer: a mean's
//! `1/n` or softmax's `log2(e)` got an UPCAST by 4 that reuses nothing); kernels where some
//! buffer broadcasts an output axis, a matmul or a conv, keep 0.9.1's opts or the CPU tile. Not guaranteed: the amounts are chosen for this
//! machine (two FP add ports with 4 cycles of latency: 8 chains), not searched.
//!
//! Where a row sum's time goes (issue 10, W2: 4096x4096, one thread; a C harness timing kernels
//! alternately, best / p25 of 30-40 runs, loaded 2-core Zen 5 VM at ~4.1 GHz, float add latency 2
//! cycles): the flat read of the 64 MiB is 1.8-2.0 ms, so the 8 in-order chains are bound by the
//! memory streams, not by the adds. gcc's kernel (SLP gathers of scalar loads into 8-wide adds)
//! ran 2.53-2.59 ms; the LLVM device's (SLP transposes the 8 rows' float4 loads with
//! `vpermt2ps`/blends into one `<8 x float>` accumulator) 2.49-2.65; the same transposed form
//! with the plain shuffles (`vinsertf128` loads, 4 unpacks, 4 `vshufps`) 2.17-2.34; 16 rows (one
//! `<16 x float>` accumulator, rows 16 KiB apart sharing an L1 set) 2.02-2.63; an 8x8 transpose
//! (UNROLL 8) 2.13-2.36: none near the flat read. A software prefetch 1 KiB ahead of every row
//! stream was the lever: 1.71-1.96 with the plain shuffles, 1.83-1.96 with LLVM's own (512 or
//! 2048 bytes ahead: no better); on gcc's scalar-gather kernel it gave nothing (2.48), with the
//! plain shuffles written with `__builtin_shufflevector` 1.90 (C written as one `float8`
//! accumulator over the 8 rows built lane by lane, `(float8){v0[0], .., v7[0]}`: 2.55 with the
//! prefetch, 2.90 without). The LLVM renderer now prefetches such streams
//! (`renderer/llvmir/prefetch.rs`); the opts here are unchanged. The C renderer writes the
//! transposed `float8` accumulator with those shuffles and the prefetch itself
//! (`renderer/cstyle/row_transpose.rs`). Left: LLVM would gain another 5-10% from emitting the
//! plain shuffles itself.
//!
//! W10 (layernorm, 8192x1024) by kernel, the LLVM device's objects in a harness, best of 30-40
//! (3 runs, with the prefetch): mean 1.08-1.21 ms, variance 1.09-1.33, the normalizing
//! elementwise kernel 1.67-1.70 (reads 32 MiB and writes 32 MiB: about 78% of a 32 MiB
//! `memcpy`'s 1.31 ms).

use super::opts::{Opt, OptOps};
use super::{Kernel, KernelBuf};
use crate::helpers::getenv;
use crate::shape::Node;
use crate::{Error, Result};

/// Output elements reduced at once (independent accumulator chains) by default; 4 where 8 does
/// not divide.
pub const REDUCE_ROWS: usize = 8;
/// Unroll of the last reduce dim (0.9.1's).
pub const REDUCE_UNROLL: usize = 4;

impl Kernel {
    /// Apply the CPU reduce opts (see the module doc) when they fit; true when they did.
    /// `CPU_REDUCE=0` turns them off; `CPU_REDUCE=n` (2..=8) reduces `n` outputs at once.
    pub fn apply_cpu_reduce(&mut self) -> Result<bool> {
        let rows = getenv("CPU_REDUCE", REDUCE_ROWS as i64);
        if !(2..=8).contains(&rows)
            || self.opts.has_local
            || !self.opts.tensor_cores.is_empty()
            || self.reduceops.is_empty()
            || !self.applied_opts.is_empty()
            || self.upcasted > 0
        {
            return Ok(false);
        }
        // 0.9.1's heuristics upcast an axis only where a buffer broadcasts it or it is masked:
        // then they already give several accumulators (or more reuse than this would), except
        // where only a constant "broadcasts" it (a mean's 1/n, softmax's log2(e)): that UPCAST
        // by 3 or 4 reuses nothing and gives fewer chains than this
        let mut hco = self.clone();
        if hco.apply_default_opts()? {
            return Ok(false);
        }
        let upcasts: Vec<&Opt> = hco
            .applied_opts
            .iter()
            .filter(|o| o.op == OptOps::UPCAST)
            .collect();
        let replaceable = match upcasts.as_slice() {
            [] => true,
            [one] => match (one.axis, one.amt) {
                (Some(a), Some(amt)) if amt < rows as usize => self.only_constants_broadcast(a)?,
                _ => false,
            },
            _ => false,
        };
        if !replaceable {
            return Ok(false);
        }
        let Some((axis, amt)) = self.cpu_reduce_axis(rows as usize)? else {
            return Ok(false);
        };
        let before = self.clone();
        let applied = self
            .apply_opt(Opt::new(OptOps::UPCAST, axis, amt))
            .and_then(|()| {
                let unup = self.full_unupcasted_shape().to_vec();
                let last = unup.len() - 1;
                let divides = unup[last]
                    .as_int()
                    .is_some_and(|s| s % REDUCE_UNROLL as i64 == 0);
                if divides && last >= self.first_reduce() {
                    let opt = Opt::new(OptOps::UNROLL, last - self.first_reduce(), REDUCE_UNROLL);
                    self.apply_opt(opt)
                } else {
                    Ok(())
                }
            });
        match applied {
            Ok(()) => Ok(true),
            Err(Error::KernelOpt(_)) => {
                *self = before;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Output axis `axis` has stride 0 in some buffer, and every such buffer is a constant.
    fn only_constants_broadcast(&self, axis: usize) -> Result<bool> {
        if axis >= self.first_reduce() {
            return Ok(false);
        }
        let mut any = false;
        for (i, b) in self.bufs.iter().enumerate() {
            let strides = self.real_strides(i)?;
            if strides.get(axis) == Some(&Some(Node::Num(0))) {
                if !matches!(b, KernelBuf::Const(_)) {
                    return Ok(false);
                }
                any = true;
            }
        }
        Ok(any)
    }

    /// The output axis to upcast and by how much: an axis with unit stride in a buffer the
    /// reduce reads first, else the innermost; by `rows`, or by 4 where `rows` does not divide.
    fn cpu_reduce_axis(&self, rows: usize) -> Result<Option<(usize, usize)>> {
        let fr = self.first_reduce();
        let mut unit = vec![false; fr];
        for (i, b) in self.bufs.iter().enumerate() {
            if !self.earlybufs.contains(b) {
                continue;
            }
            let strides = self.real_strides(i)?;
            for (a, s) in strides.iter().take(fr).enumerate() {
                unit[a] |= *s == Some(Node::Num(1));
            }
        }
        let amts = if rows > 4 { vec![rows, 4] } else { vec![rows] };
        for amt in amts {
            let fits: Vec<usize> = (0..fr)
                .filter(|&a| {
                    self.full_shape()[a]
                        .as_int()
                        .is_some_and(|s| s % amt as i64 == 0)
                })
                .collect();
            let pick = fits.iter().rev().find(|&&a| unit[a]).or(fits.last());
            if let Some(&a) = pick {
                return Ok(Some((a, amt)));
            }
        }
        Ok(None)
    }
}
