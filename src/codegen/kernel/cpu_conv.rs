//! A register tile for convolution-shaped kernels on CPU devices (rawgrad, beyond tinygrad 0.9.1,
//! which gives a CPU conv2d the GPU-shaped `UPCAST 4` of the output width and of the output
//! channels, with every kernel tap unrolled: four 4-lane accumulators, each taking 9 dependent
//! adds per input channel).
//!
//! When it applies, `get_kernel` uses it instead of `hand_coded_optimizations` (`CPU_CONV=0`
//! keeps 0.9.1's choice). The tile: 8 lanes of the output's unit-stride axis (`UPCAST(n, 8)`,
//! one 8-lane vector: the output width), with AVX-512 two rows of another output axis the
//! weights broadcast (`UPCAST(y, 2)`), 8 of an output axis the input broadcasts (`UPCAST(m, 8)`:
//! output channels), and the last reduce dim unrolled when it has at most [`MAX_TAPS`] steps (the
//! kernel's width; on LLVM the one before it too, the kernel's height). That is 8 (16 with
//! AVX-512) vector accumulators in place of 4 of 4 lanes. The kernel is marked
//! [`Kernel::wide_vectors`] so the 8 lanes make one vector.
//!
//! Measured on this 2-core AVX-512 VM (W5: conv2d 1x64x56x56 with 64x64x3x3, padding 1). `bench
//! workloads --workloads W5 --devices CLANG,LLVM --threads 1 --repeats 5`, steady ms with
//! `CPU_CONV=0` then 1: CLANG 11.4 -> 5.0, LLVM 10.0 -> 6.0 (LLVM's compile of the kernel 15 ->
//! 35 ms of CPU). The kernel alone on two threads (`time_linearizer`, best of 5): CLANG 0.9.1's
//! opts 5.5-6.4 ms, this tile 2.3-2.9, with the height unrolled too 2.5, without the two rows
//! 3.2, without `wide_vectors` 15.4 (the 8 lanes then go as two float4 halves); LLVM 0.9.1's
//! opts 5.1-5.3, the width unrolled only 4.3-4.6, the height too 2.9: LLVM spills 7 of the 16
//! accumulators to the stack each iteration (its asm, `bench codegen --dump` then `bench llvmc
//! --asm`), and with 9 taps an iteration instead of 3 that costs a third as much per product.
//! Each output's products are still added in the reduce order (the unroll keeps the taps'
//! order), so the results are the unoptimized kernel's bits.
//!
//! Applies only to a single-output SUM reduce of float32 buffers with at least two reduce dims
//! (one reduce dim is a matmul: `cpu_tile.rs`) on a device without locals, where such axes exist
//! with sizes that divide. Not guaranteed: chosen for this machine, not searched (BEAM may
//! still replace it).

use super::opts::{Opt, OptOps};
use super::Kernel;
use crate::codegen::renderer::VectorAlu;
use crate::helpers::getenv;
use crate::Result;

/// Lanes of the output's unit-stride axis.
pub const CONV_LANES: usize = 8;
/// Output channels (an axis the input broadcasts) a tile takes.
pub const CONV_CHANNELS: usize = 8;
/// The most steps of a reduce dim that gets unrolled (the kernel's width; on LLVM its height too).
pub const MAX_TAPS: usize = 4;

impl Kernel {
    /// Apply the conv tile (see the module doc) when it fits; true when it did. `CPU_CONV=0`
    /// turns it off.
    pub fn apply_cpu_conv(&mut self) -> Result<bool> {
        if getenv("CPU_CONV", 1) == 0 {
            return Ok(false);
        }
        let Some(opts) = self.cpu_conv_opts()? else {
            return Ok(false);
        };
        let before = self.clone();
        for o in opts {
            if let Err(e) = self.apply_opt(o) {
                *self = before;
                return match e {
                    crate::Error::KernelOpt(_) => Ok(false),
                    e => Err(e),
                };
            }
        }
        self.wide_vectors = true;
        Ok(true)
    }

    /// The tile's opts for this kernel, or None when it does not fit.
    fn cpu_conv_opts(&self) -> Result<Option<Vec<Opt>>> {
        let Some(s) = self.one_sum_shape()? else {
            return Ok(None);
        };
        if s.fr + 2 > self.shape_len() || !self.output_aligned(&s.out, s.fr, CONV_LANES)? {
            return Ok(None);
        }
        let Some((n, y, m)) = conv_axes(&s.full, &s.strides, s.fr) else {
            return Ok(None);
        };
        let mut opts = vec![Opt::new(OptOps::UPCAST, n, CONV_LANES)];
        if let Some(y) = y {
            opts.push(Opt::new(OptOps::UPCAST, y, 2));
        }
        opts.push(Opt::new(OptOps::UPCAST, m, CONV_CHANNELS));
        // the taps: along the width, and on LLVM along the height too (the unroll order keeps
        // the sum's order; the last dim first, so the earlier one's index stays put)
        let last = self.shape_len() - 1;
        let llvm = self.opts.vector_alu == VectorAlu::Llvm;
        let taps = if llvm { 2 } else { 1 };
        for d in (s.fr..=last).rev().take(taps) {
            if s.full[d] > MAX_TAPS {
                break;
            }
            opts.push(Opt::new(OptOps::UNROLL, d - s.fr, 0));
        }
        Ok(Some(opts))
    }

    /// The full shape as integers (None when a dim is symbolic).
    pub(super) fn int_shape(&self) -> Option<Vec<usize>> {
        (self.full_shape().iter())
            .map(|s| s.as_int().and_then(|v| usize::try_from(v).ok()))
            .collect()
    }
}

/// The tile's axes: `n` the output's last unit-stride axis, the image an input that does not
/// broadcast `n` and the weights one that does; `m` another output axis the image broadcasts
/// (output channels), and with AVX-512 `y`, an output axis the weights broadcast and the image
/// does not (rows); each of a size the tile divides (and larger).
fn conv_axes(
    full: &[usize],
    strides: &[Vec<Option<i64>>],
    fr: usize,
) -> Option<(usize, Option<usize>, usize)> {
    let splits = |a: usize, by: usize| full[a] % by == 0 && full[a] > by;
    let n = (0..fr)
        .rev()
        .find(|&a| strides[0][a] == Some(1) && splits(a, CONV_LANES))?;
    let bcast = |b: usize, a: usize| strides[b][a] == Some(0);
    let image = (1..strides.len()).find(|&b| !bcast(b, n))?;
    let weights = (1..strides.len()).find(|&b| bcast(b, n))?;
    let m = (0..fr)
        .rev()
        .find(|&a| a != n && bcast(image, a) && !bcast(weights, a) && splits(a, CONV_CHANNELS))?;
    let wide = super::cpu_tile::host_tile().lanes >= 16;
    let y = (0..fr).rev().find(|&a| {
        wide && a != n && a != m && splits(a, 2) && bcast(weights, a) && !bcast(image, a)
    });
    Some((n, y, m))
}
