//! BEAM search over the optimizer's actions (tinygrad 0.9.1 `engine/search.py`).
//!
//! - [`get_kernel_actions`] (0.9.1's `get_linearizer_actions`): every action of
//!   [`actions`] applied to a copy of a kernel; skipped when its real axis is out of range or its
//!   amount is the whole axis and the whole-axis action (amount 0) exists; dropped when illegal
//!   (a KernelOpt error) or when the upcast product (magenta and yellow dims, over the tensor
//!   core's own upcast) exceeds `BEAM_UPCAST_MAX` (256) or the local product (cyan, green, white)
//!   exceeds `BEAM_LOCAL_MAX` (1024).
//! - [`beam_search`]: from `[(kernel, inf)]`, each round expands every beam entry, compiles the
//!   candidates on a worker pool (`search/candidates.rs`: parallel, batched for C, each compile
//!   with the `BEAM_TIMEOUT_SEC` deadline), skips programs equal to one timed before, times each
//!   (3 runs, min, stopping a candidate early after a run over 3x the best), sorts by time and keeps
//!   the `amt` best; it stops when nothing is left, the best is under `BEAM_MIN_PROGRESS` (0.01 us)
//!   or improved by less than that, keeping the better of the old and the new best. The result
//!   is cached on disk in table `beam_search_16` keyed as tinygrad keys it (the first AST's key,
//!   `amt`, `allow_test_size`, device, renderer suffix); `IGNORE_BEAM_CACHE=1` skips the lookup,
//!   `CACHELEVEL=0` the cache. `PARALLEL=n` sets the workers (default: the CPU count, on every
//!   device: compiling runs as other processes or threads; tinygrad defaults to 0 on CPU devices).
//!   Progress goes to stderr (`search/progress.rs`): at `DEBUG>=1` one line rewritten in place
//!   (round, candidates tried and timed, best time, elapsed), at `DEBUG>=2` tinygrad's lines,
//!   `BEAM_DEBUG` its extra lines; [`beam_search_stats`] returns the same counts.
//!   Memory stays bounded: a round is compiled `PARALLEL x 24` candidates at a time and each
//!   binary is dropped once timed; the programs seen are kept as 64-bit hashes.
//! - [`time_linearizer`]: a kernel compiled and timed (cache table `time_linearizer_16` at
//!   `CACHELEVEL>=2`); [`bufs_from_lin`]: scratch buffers for timing; [`optimize_local_size`]: the
//!   fastest local size for a program that has a global size but none (tried twice each, in
//!   random order).
//! - [`beam_kernel`]: what `get_kernel` does at `BEAM>=1`: BEAM from a fresh kernel with the
//!   required opts, then with `BEAM_COMPARE` (default 1) the BEAM result timed whole against the
//!   heuristic (or tensor-core) kernel, and the plain heuristics when tensor cores were used,
//!   clearing the caches between runs; the fastest wins (`DEBUG>=1` prints the comparison).
//!
//! Where rawgrad differs: candidates are deduplicated by their UOp programs before compiling
//! (tinygrad by binaries after); a CPU kernel's test size is a part of its split outer loop
//! (`search/timing.rs`; tinygrad times CPU kernels whole); timing buffers are zero-filled; a stale
//! cache entry whose opts no longer apply is searched again instead of raising; the disk cache is
//! files under `CACHEDIR` (`device/diskcache.rs`), not tinygrad's sqlite `CACHEDB`.
//!
//! Not guaranteed: times (and so picks) vary from run to run; a timed-out compile is abandoned,
//! not stopped.

mod cache;
mod candidates;
mod local_size;
mod pool;
mod progress;
#[cfg(test)]
mod tests;
mod timing;

use std::sync::Arc;
use std::time::Instant;

use crate::codegen::kernel::opts::actions;
use crate::codegen::kernel::{Kernel, KernelBuf, Opt, OptOps};
use crate::device::registry::Compiled;
use crate::device::{Buffer, BufferOptions, BufferRef};
use crate::engine::realize::debug_print;
use crate::helpers::{debug, getenv, getenv_str};
use crate::ops::LazyOp;
use crate::renderer::Renderer;
use crate::runtime::builtin::{open_device, register_builtin_families};
use crate::shape::symbolic::py_gt;
use crate::shape::{Node, VarVals};
use crate::{Error, Result};

use candidates::{compile_candidates, Candidate, Seen};
pub use local_size::optimize_local_size;
use progress::Progress;
pub use progress::{progress_line, BeamStats};
use timing::time_program;
pub use timing::{get_test_global_size, midpoint_var_vals, TimeOpts, CPU_TEST_WORK};

/// A float knob (`BEAM_MIN_PROGRESS`).
fn getenv_f64(key: &str, default: f64) -> f64 {
    getenv_str(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The worker count: `PARALLEL`, else the CPU count.
fn workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    getenv("PARALLEL", cpus as i64).max(1) as usize
}

/// tinygrad's `get_linearizer_actions`: (action index + 1, kernel) for every action that applies
/// within the limits (plus `(0, k)` first with `include_0`).
pub fn get_kernel_actions(k: &Kernel, include_0: bool) -> Result<Vec<(usize, Kernel)>> {
    let acts = actions();
    let (max_up, max_lcl) = (
        Node::Num(getenv("BEAM_UPCAST_MAX", 256)),
        Node::Num(getenv("BEAM_LOCAL_MAX", 1024)),
    );
    let mut out = if include_0 {
        vec![(0, k.clone())]
    } else {
        vec![]
    };
    for (i, a) in acts.iter().enumerate() {
        if let (Some(ax), true) = (a.real_axis(k), a.op != OptOps::TC) {
            let whole = (k.full_shape().get(ax)).is_some_and(|s| {
                s.as_int() == a.amt.map(|v| v as i64) && acts.contains(&Opt::new(a.op, ax, 0))
            });
            if ax >= k.shape_len() || whole {
                continue;
            }
        }
        let mut k2 = k.clone();
        match k2.apply_opt(*a) {
            Ok(()) => {}
            Err(Error::KernelOpt(_)) => continue,
            Err(e) => return Err(e),
        }
        let tc_up = match &k2.tensor_core {
            Some(tc) => {
                let threads: usize = tc.threads.iter().map(|t| t.1).product();
                (tc.dims.iter().product::<usize>() / threads.max(1)).max(1) as i64
            }
            None => 1,
        };
        let (mut up, mut lcl) = (Node::Num(1), Node::Num(1));
        for (s, c) in k2.full_shape().iter().zip(k2.colors()) {
            match c {
                "magenta" | "yellow" => up = up.try_mul(s)?,
                "cyan" | "green" | "white" => lcl = lcl.try_mul(s)?,
                _ => {}
            }
        }
        if py_gt(&up.floordiv(&Node::Num(tc_up))?, &max_up)? || py_gt(&lcl, &max_lcl)? {
            continue;
        }
        out.push((i + 1, k2));
    }
    Ok(out)
}

/// tinygrad's `bufs_from_lin`: one scratch buffer per memory buffer of the kernel, as large as the
/// largest view of it (at least one element), on `device`; allocated (and zero-filled) with
/// `allocate`.
pub fn bufs_from_lin(k: &Kernel, device: &str, allocate: bool) -> Result<Vec<BufferRef>> {
    let mut sizes: Vec<Option<(usize, crate::dtype::DType)>> = vec![];
    for b in &k.bufs {
        let KernelBuf::Mem(m) = b else { continue };
        let n = usize::try_from(m.st.real_size()?).unwrap_or(0);
        if sizes.len() <= m.idx {
            sizes.resize(m.idx + 1, None);
        }
        let cur = sizes[m.idx].map_or(0, |s| s.0);
        sizes[m.idx] = Some((cur.max(n), m.dtype));
    }
    // the buffers allocate through the registry's table: make sure it knows the built-ins
    register_builtin_families();
    let mut out = vec![];
    for (i, s) in sizes.into_iter().enumerate() {
        let Some((n, dt)) = s else {
            return Err(Error::Internal(format!(
                "bufs_from_lin: kernel {} has no buffer {i}",
                k.base_name()
            )));
        };
        let b = Buffer::new(device, n.max(1), dt, BufferOptions::default());
        if allocate {
            ensure_zeroed(&b)?;
        }
        out.push(b);
    }
    Ok(out)
}

/// Allocate `b` and fill it with zeros.
fn ensure_zeroed(b: &BufferRef) -> Result<()> {
    if !b.is_allocated() {
        b.ensure_allocated()?;
        b.copyin(&vec![0u8; b.nbytes()])?;
    }
    Ok(())
}

/// A copy without the linearized program (BEAM renders candidates under names of its own).
fn fresh(k: &Kernel) -> Kernel {
    let mut k = k.clone();
    k.linearized = None;
    k
}

thread_local! {
    static TIMED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many BEAM candidates this thread has timed (a counter for tests: a disk-cache hit times
/// none).
pub fn candidates_timed_on_this_thread() -> usize {
    TIMED.with(|t| t.get())
}

/// tinygrad's `beam_search(lin, rawbufs, amt, allow_test_size)`: the fastest kernel found from
/// `k` (see the module doc).
pub fn beam_search(
    k: &Kernel,
    rawbufs: &[BufferRef],
    amt: usize,
    allow_test_size: bool,
) -> Result<Kernel> {
    beam_search_stats(k, rawbufs, amt, allow_test_size).map(|r| r.0)
}

/// [`beam_search`] with the counts of the search.
pub fn beam_search_stats(
    k: &Kernel,
    rawbufs: &[BufferRef],
    amt: usize,
    allow_test_size: bool,
) -> Result<(Kernel, BeamStats)> {
    let key = cache::beam_key(k, amt, allow_test_size)?;
    if let Some(opts) = cache::beam_cache_get(&key) {
        let mut ret = fresh(k);
        // tinygrad replays the stored opts beyond those already applied
        let replayed =
            (opts.get(k.applied_opts.len()..)).is_some_and(|r| ret.apply_opts(r).is_ok());
        if replayed {
            let stats = BeamStats {
                cached: true,
                best_s: f64::NAN,
                ..BeamStats::default()
            };
            return Ok((ret, stats));
        }
    }
    let dev = open_device(&k.opts.device)?;
    for b in rawbufs {
        ensure_zeroed(b)?;
    }
    let var_vals = midpoint_var_vals(&k.ast[0].vars());
    let min_progress = getenv_f64("BEAM_MIN_PROGRESS", 0.01) / 1e6;
    let mut progress = Progress::start(k);
    let mut beam: Vec<(Kernel, f64)> = vec![(fresh(k), f64::INFINITY)];
    let mut seen = Seen::default();
    loop {
        let mut acted: Vec<Kernel> = vec![];
        for (b, _) in &beam {
            acted.extend(get_kernel_actions(b, false)?.into_iter().map(|x| x.1));
        }
        progress.round_start(acted.len());
        let round = Round {
            dev: &dev,
            rawbufs,
            var_vals: &var_vals,
            early_stop: beam[0].1 * 3.0,
            amt,
        };
        let mut timed = round.run(acted, &mut seen, &mut progress)?;
        timed.sort_by(|a, b| a.1.total_cmp(&b.1));
        let exiting =
            timed.is_empty() || timed[0].1 < min_progress || beam[0].1 - timed[0].1 < min_progress;
        if !exiting {
            timed.truncate(amt.max(1));
            beam = timed;
        } else if timed.first().is_some_and(|t| t.1 < beam[0].1) {
            timed.truncate(1);
            beam = timed;
        }
        progress.round_end((&beam[0].0, beam[0].1), exiting);
        if exiting {
            break;
        }
    }
    let (best, tm) = beam.swap_remove(0);
    cache::beam_cache_put(&key, &best.applied_opts);
    let stats = progress.finish((&best, tm), amt);
    Ok((best, stats))
}

/// One round of the search: its candidates compiled a slice at a time (so the binaries held at
/// once are bounded) and timed; each binary is dropped as soon as it was timed.
struct Round<'a> {
    dev: &'a Arc<Compiled>,
    rawbufs: &'a [BufferRef],
    var_vals: &'a VarVals,
    early_stop: f64,
    amt: usize,
}

impl Round<'_> {
    fn run(
        &self,
        acted: Vec<Kernel>,
        seen: &mut Seen,
        progress: &mut Progress,
    ) -> Result<Vec<(Kernel, f64)>> {
        let w = workers();
        let slice = w.saturating_mul(24).max(1);
        let mut timed = vec![];
        for (n, chunk) in acted.chunks(slice).enumerate() {
            let compiled = compile_candidates(chunk, self.dev, seen, w)?;
            for (j, c) in compiled.into_iter().enumerate() {
                let Some(c) = c else { continue };
                let i = n * slice + j;
                let Some(tm) = self.time(&c, i)? else {
                    continue;
                };
                progress.candidate(i, &c, tm, &chunk[j], self.amt);
                timed.push((fresh(&chunk[j]), tm));
            }
        }
        Ok(timed)
    }

    /// The best of up to 3 runs of candidate `i`; `None` when it failed to run (an error with
    /// `BEAM_STRICT_MODE`).
    fn time(&self, c: &Candidate, i: usize) -> Result<Option<f64>> {
        let o = TimeOpts {
            max_global_size: Some(65536),
            clear_l2: false,
            cnt: 3,
            early_stop: Some(self.early_stop),
        };
        TIMED.with(|t| t.set(t.get() + 1));
        match time_program(c, self.var_vals, self.rawbufs, &o) {
            Ok(tms) => Ok(Some(tms.iter().copied().fold(f64::INFINITY, f64::min))),
            Err(e) if getenv("BEAM_STRICT_MODE", 0) == 0 => {
                if debug() >= 4 {
                    eprintln!("BEAM: candidate {i} failed to run: {}", e.message());
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// tinygrad's `time_linearizer`: the kernel compiled and timed (min of `cnt` runs), cached in
/// `time_linearizer_16` at `CACHELEVEL>=2` unless `disable_cache`.
pub fn time_linearizer(
    k: &Kernel,
    rawbufs: &[BufferRef],
    allow_test_size: bool,
    max_global_size: i64,
    cnt: usize,
    disable_cache: bool,
    clear_l2: bool,
) -> Result<f64> {
    let key = cache::time_key(k, allow_test_size, max_global_size, clear_l2)?;
    let min = |tms: &[f64]| tms.iter().copied().fold(f64::INFINITY, f64::min);
    if !disable_cache {
        if let Some(tms) = cache::time_cache_get(&key) {
            return Ok(min(&tms));
        }
    }
    let dev = open_device(&k.opts.device)?;
    for b in rawbufs {
        ensure_zeroed(b)?;
    }
    let var_vals = midpoint_var_vals(&k.ast[0].vars());
    let c = compile_one(k, &dev)?;
    let o = TimeOpts {
        max_global_size: allow_test_size.then_some(max_global_size),
        clear_l2,
        cnt,
        early_stop: None,
    };
    let tms = time_program(&c, &var_vals, rawbufs, &o)?;
    if !disable_cache {
        cache::time_cache_put(&key, &tms);
    }
    Ok(min(&tms))
}

/// One kernel rendered (under a search name) and compiled on this thread.
fn compile_one(k: &Kernel, dev: &Arc<Compiled>) -> Result<Candidate> {
    let mut k = fresh(k);
    k.linearize_as(&format!("timed{}", std::process::id()))?;
    let p = k.to_program(&*dev.renderer)?;
    let st = Instant::now();
    let lib = dev.compiler.compile(&p.src)?;
    Ok(Candidate {
        p,
        lib: lib.into(),
        compile_s: st.elapsed().as_secs_f64(),
    })
}

/// What `get_kernel` does at `BEAM>=1` (see the module doc): `k_opt` is the kernel with the
/// heuristics (or tensor cores, `used_tc`) applied.
pub fn beam_kernel(
    renderer: &dyn Renderer,
    ast: &[LazyOp],
    k_opt: Kernel,
    used_tc: bool,
) -> Result<Kernel> {
    let amt = getenv("BEAM", 0).max(1) as usize;
    let mut kb = Kernel::new(ast, renderer.opts())?;
    kb.required_optimizations()?;
    let device = renderer.opts().device.clone();
    let rawbufs = bufs_from_lin(&kb, &device, false)?;
    let k = beam_search(&kb, &rawbufs, amt, getenv("BEAM_ESTIMATE", 1) != 0)?;
    if getenv("BEAM_COMPARE", 1) == 0 {
        return Ok(k);
    }
    let mut lins = vec![
        (format!("beam{amt}"), k),
        ((if used_tc { "tc" } else { "hc" }).to_string(), k_opt),
    ];
    if used_tc {
        let mut hc = Kernel::new(ast, renderer.opts())?;
        hc.hand_coded_optimizations()?;
        lins.push(("hc".into(), hc));
    }
    let mut timed = vec![];
    for (nm, lin) in lins {
        let tm = time_linearizer(&lin, &rawbufs, false, 65536, 3, false, true)?;
        timed.push((nm, lin, tm));
    }
    timed.sort_by(|a, b| a.2.total_cmp(&b.2));
    if debug() >= 1 {
        let parts: Vec<String> = (timed.iter())
            .map(|(nm, lin, tm)| {
                format!(
                    "{nm:6} : {} : {:8.2} us",
                    lin.colored_shape(Some(30), true),
                    tm * 1e6
                )
            })
            .collect();
        debug_print(parts.join("  <  "));
    }
    Ok(fresh(&timed.swap_remove(0).1))
}
