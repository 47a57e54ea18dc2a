//! Software prefetch of the streaming loads of a CPU reduce loop (rawgrad, beyond tinygrad
//! 0.9.1, whose renderers emit no prefetch).
//!
//! Owns: the choice of the loads that get a prefetch ([`streaming_loads`]) and their distance
//! ([`PREFETCH_BYTES`]); `memory.rs` emits `llvm.prefetch` (read, high locality, data) of the
//! loaded address plus that distance right after each chosen load.
//!
//! Chosen: in the CPU flavour, every load of an innermost reduce loop (a `RANGE` marked reduce
//! with no loop inside it) when every load in that loop is an ungated load from a global buffer
//! whose address advances by exactly its own width per iteration (the index's coefficient of the
//! loop counter times the element size equals the bytes loaded) over at least [`MIN_STREAM`]
//! bytes (a loop with constant bounds): a set of long contiguous streams, as in the row
//! reductions that `codegen/kernel/cpu_reduce.rs` gives 8 rows at once (8 streams 16 KiB apart
//! in W2, 4 KiB in W6, W10 and W11). A loop with any other load (a matmul's strided or broadcast
//! operand, a gather, an index that divides the counter) gets none, nor do elementwise loops, nor
//! short rows (W12's rows of 512 bytes and 1 KiB, the 2 KiB rows of W8's weight-gradient kernel:
//! data that the caches hold anyway).
//!
//! Why: the hardware prefetchers kept the 8 row streams of W2's sum (4096x4096) below the flat
//! read's bandwidth. A harness calling the LLVM device's own build of the kernel, best of 40
//! alternated runs on the loaded 2-core Zen 5 VM: 2.49-2.57 ms without, 1.71-1.96 ms with a
//! prefetch 1024 bytes ahead of every float4 load (512: 1.96, 2048: 2.00; one prefetch per cache
//! line instead of per load: 2.07), the flat read of the same 64 MiB 1.81-1.83 ms. The device's
//! objects of the kernels this chooses, before and after, in one harness (best of 40, two runs):
//! W2's sum 2.83-2.97 -> 2.16-2.26 ms, W10's mean 1.22-1.25 -> 1.08-1.21 and variance
//! 1.22-1.34 -> 1.09-1.23, the row max of W6 and W11 0.82-0.98 -> 0.80-0.92, W6's exp-sum
//! 2.28-2.36 -> 2.27-2.33 (bound by its EXP2s); `bench workloads --devices LLVM --threads 1`,
//! steady CPU ms, 3 alternations: W2 3.40 / 3.54 / 3.50 -> 3.11 / 2.88 / 2.28, W10 5.56 / 6.56 /
//! 6.35 -> 5.83 / 5.52 / 4.07 (CLANG's unchanged kernels moved by as much in the same runs). The
//! values, their order and the bits do not change: a prefetch is only a hint.
//!
//! Not guaranteed: the distance is measured on this machine, not searched; a prefetch past the end
//! of a buffer is harmless to the program (it never faults) but may fetch a line it will not use.

use crate::codegen::uopgraph::linear::{coef, trip_count};
use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};

/// How far ahead of a streaming load its prefetch reads, in bytes.
pub(crate) const PREFETCH_BYTES: i64 = 1024;
/// The shortest stream (bytes one load reads over the loop) that gets a prefetch: at least 3/4 of
/// its prefetches fall inside it.
const MIN_STREAM: i64 = 4 * PREFETCH_BYTES;

/// An innermost-loop candidate while the list is walked.
struct Open {
    range: UOp,
    is_reduce: bool,
    has_inner: bool,
    loads: Vec<UOp>,
}

/// The loads of `uops` (a linear list) that get a prefetch (module doc).
pub(crate) fn streaming_loads(uops: &[UOp]) -> UOpMap<()> {
    let mut out: UOpMap<()> = UOpMap::default();
    let mut stack: Vec<Open> = vec![];
    for u in uops {
        match u.op() {
            UOps::RANGE => {
                if let Some(outer) = stack.last_mut() {
                    outer.has_inner = true;
                }
                let is_reduce = matches!(
                    u.arg(),
                    UArg::Range {
                        is_reduce: true,
                        ..
                    }
                );
                stack.push(Open {
                    range: u.clone(),
                    is_reduce,
                    has_inner: false,
                    loads: vec![],
                });
            }
            UOps::ENDRANGE => {
                let Some(open) = stack.pop() else { continue };
                if open.all_stream() {
                    out.extend(open.loads.into_iter().map(|l| (l, ())));
                }
            }
            UOps::LOAD => {
                if let Some(open) = stack.last_mut() {
                    open.loads.push(u.clone());
                }
            }
            _ => {}
        }
    }
    out
}

impl Open {
    /// Whether this is an innermost reduce loop with constant bounds whose loads all stream.
    fn all_stream(&self) -> bool {
        let Some(trip) = trip_count(&self.range) else {
            return false;
        };
        let mut memo = UOpMap::default();
        self.is_reduce
            && !self.has_inner
            && !self.loads.is_empty()
            && self
                .loads
                .iter()
                .all(|l| streams(l, &self.range, &mut memo, trip))
    }
}

/// Whether `load` is an ungated load from a global buffer whose address advances by exactly the
/// bytes it loads per iteration of `range`, over at least [`MIN_STREAM`] bytes in `trip`
/// iterations.
fn streams(load: &UOp, range: &UOp, memo: &mut UOpMap<Option<i64>>, trip: i64) -> bool {
    let (Some(buf), Some(idx), Some(dt)) = (load.src().first(), load.src().get(1), load.dtype())
    else {
        return false;
    };
    // (buf, idx) or (buf, idx, BARRIER/IF): a gate is (buf, idx, gate, alt)
    let gated = load.src().len() >= 4;
    if gated || buf.op() != UOps::DEFINE_GLOBAL {
        return false;
    }
    let Some(elem) = buf.dtype().map(|d| d.base().scalar().itemsize() as i64) else {
        return false;
    };
    let width = elem * i64::from(dt.count);
    let long = width.checked_mul(trip).is_some_and(|n| n >= MIN_STREAM);
    long && coef(idx, range, memo)
        .and_then(|c| c.checked_mul(elem))
        .is_some_and(|step| step == width)
}
