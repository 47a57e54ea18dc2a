//! Streaming (non-temporal) stores of large elementwise outputs on x86-64 CPUs (rawgrad, beyond
//! tinygrad 0.9.1, whose renderers emit plain stores only).
//!
//! Owns: the choice of the stores that stream ([`streaming_stores`]) and the output size from
//! which they do ([`MIN_STREAM_BYTES`]). The CLANG renderer (`cstyle/clang.rs`'s `rg_stream_f4`)
//! and the LLVM renderer (`memory.rs`) then write each chosen 16-byte store with `movntps` when
//! its address is 16-byte aligned (a check per store, the same every iteration for one buffer),
//! else as the plain store, and the kernel ends with an `sfence`, so the pool's completion signal
//! (a release store, which does not order non-temporal stores on x86) comes after the data. Off
//! x86-64 the stores stay plain.
//!
//! Chosen: an ungated store of a float32 `float4` to a global buffer whose address advances by
//! exactly its 16 bytes per iteration of the innermost loop around it (a contiguous stream, so the
//! write-combining buffers fill whole cache lines) and that writes at least [`MIN_STREAM_BYTES`]
//! over the kernel (the product of the trip counts of every loop around it, all constant): W10's
//! normalization (32 MiB). Matmul and conv tiles (several rows per iteration, not one stream),
//! reductions' small outputs and anything under the limit (W1's and W6's 16 MiB) keep plain stores.
//!
//! Why: a plain store first reads the line it writes (read for ownership), so `a*b+c` moves 5
//! lines per 4 it needs; a streaming store writes the line without reading it, but the line then
//! is in no cache. A C harness of `a*b+c` over float4 with this store (the alignment check
//! included), each form run 10 to 32 times in a row (a kernel repeated, as in steady state), best
//! run, two runs of the harness on this 2-core VM, plain / streaming ms by output size: 8 MiB
//! 1.14 / 1.15-1.16, 16 MiB 2.35-2.36 / 2.33, 32 MiB 6.13-7.74 / 5.07-5.23, 64 MiB 18.5-18.8 /
//! 14.6-15.3, 128 MiB 36.6-37.0 / 30.9-31.4; at 0.25 MiB streaming is 1.5x slower. Up to 16 MiB of
//! output (64 MiB of data in all) the caches keep the lines between runs and the read for
//! ownership costs nothing; from 32 MiB on they do not, and streaming saves 15-32%. The limit is
//! 32 MiB. `bench workloads --workloads W1,W6,W10 --devices CLANG,LLVM --threads 1 --repeats 5`,
//! steady ms, two alternations: W10 CLANG 6.70 / 6.13 -> 5.93 / 5.99, LLVM 6.12 / 5.84 -> 5.28 /
//! 5.45 (at a 4 MiB limit W1 moved 2.34-2.43 -> 2.29-2.33, noise, and W6 lost 0.3 ms).
//!
//! `CPU_STREAM=0` turns them off (the knob is part of the kernel cache key).
//!
//! What it keeps: the same values go to the same addresses, so results are bit for bit those of
//! plain stores. Not guaranteed: the limit is measured on this machine, not searched (a host with
//! a larger last-level cache would want a larger one); the next kernel reads a streamed output
//! from memory.

use crate::codegen::uopgraph::linear::{coef, trip_count};
use crate::codegen::uops::{UOp, UOpMap, UOps};
use crate::dtype::Scalar;

/// The fewest bytes one store writes over the kernel for it to stream.
pub(crate) const MIN_STREAM_BYTES: i64 = 32 << 20;

/// The stores of `uops` (a linear list) that stream (module doc).
pub(crate) fn streaming_stores(uops: &[UOp]) -> UOpMap<()> {
    let mut out: UOpMap<()> = UOpMap::default();
    // the CPU renderers compile for the host: `movntps` and `sfence` are x86 instructions
    if !cfg!(target_arch = "x86_64") || crate::helpers::getenv("CPU_STREAM", 1) == 0 {
        return out;
    }
    // the open loops, outermost first, each with its trip count when it is constant
    let mut open: Vec<(&UOp, Option<i64>)> = vec![];
    for u in uops {
        match u.op() {
            UOps::RANGE => open.push((u, trip_count(u))),
            UOps::ENDRANGE => {
                open.pop();
            }
            UOps::STORE if streams(u, &open) => {
                out.insert(u.clone(), ());
            }
            _ => {}
        }
    }
    out
}

/// Whether `store`, inside the loops `open`, is an ungated float4 store to a global buffer that
/// advances by its 16 bytes per iteration of the innermost loop and writes at least
/// [`MIN_STREAM_BYTES`].
fn streams(store: &UOp, open: &[(&UOp, Option<i64>)]) -> bool {
    let [buf, idx, value] = store.src() else {
        return false;
    };
    let Some((inner, _)) = open.last() else {
        return false;
    };
    let float4 = value
        .dtype()
        .is_some_and(|d| d.scalar == Scalar::Float32 && d.count == 4);
    let global_f32 = buf.op() == UOps::DEFINE_GLOBAL
        && buf
            .dtype()
            .is_some_and(|d| d.base().scalar().scalar == Scalar::Float32);
    if !float4 || !global_f32 {
        return false;
    }
    let bytes = open
        .iter()
        .try_fold(16i64, |acc, (_, trips)| acc.checked_mul((*trips)?));
    let mut memo = UOpMap::default();
    bytes.is_some_and(|b| b >= MIN_STREAM_BYTES) && coef(idx, inner, &mut memo) == Some(4)
}

#[cfg(test)]
#[path = "stream_store_tests.rs"]
mod tests;
