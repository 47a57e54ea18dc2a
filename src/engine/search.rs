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
//!   At `DEBUG>=2` it prints tinygrad's progress lines (elapsed, best time, candidates timed /
//!   tried, the shape), `BEAM_DEBUG` its extra lines.
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
//! (`search/timing.rs`); timing buffers are zero-filled; a stale cache entry whose opts no longer
//! apply is searched again instead of raising.
//!
//! Not guaranteed: times (and so picks) vary from run to run; a timed-out compile is abandoned,
//! not stopped.

mod candidates;
mod pool;
#[cfg(test)]
mod tests;
mod timing;

use std::sync::Arc;
use std::time::Instant;

use crate::codegen::kernel::opts::actions;
use crate::codegen::kernel::{Kernel, KernelBuf, Opt, OptOps};
use crate::device::diskcache::{diskcache_get, diskcache_put, key_of, VERSION};
use crate::device::registry::{open_device, Compiled};
use crate::device::{Buffer, BufferOptions, BufferRef, LaunchDims, Program, RawBuf};
use crate::engine::realize::debug_print;
use crate::helpers::{colored, debug, getenv, getenv_str};
use crate::ops::LazyOp;
use crate::renderer::Renderer;
use crate::shape::symbolic::py_gt;
use crate::shape::Node;
use crate::{Error, Result};

use candidates::{compile_candidates, Candidate, Seen};
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

/// The opts as stored in the disk cache (one `op,axis,amt` line each, `-` for none).
fn opts_text(opts: &[Opt]) -> String {
    let f = |x: Option<usize>| x.map_or("-".to_string(), |v| v.to_string());
    (opts.iter())
        .map(|o| format!("{:?},{},{}\n", o.op, f(o.axis), f(o.amt)))
        .collect()
}

fn parse_opts(text: &[u8]) -> Option<Vec<Opt>> {
    use OptOps::*;
    let text = std::str::from_utf8(text).ok()?;
    let num = |s: &str| -> Option<Option<usize>> {
        if s == "-" {
            Some(None)
        } else {
            s.parse().ok().map(Some)
        }
    };
    text.lines()
        .map(|l| {
            let mut f = l.split(',');
            let op = match f.next()? {
                "TC" => TC,
                "UPCAST" => UPCAST,
                "UPCASTMID" => UPCASTMID,
                "UNROLL" => UNROLL,
                "LOCAL" => LOCAL,
                "GROUP" => GROUP,
                "GROUPTOP" => GROUPTOP,
                "NOLOCALS" => NOLOCALS,
                "PADTO" => PADTO,
                _ => return None,
            };
            let (axis, amt) = (num(f.next()?)?, num(f.next()?)?);
            Some(Opt { op, axis, amt })
        })
        .collect()
}

fn ast_key(k: &Kernel) -> Result<String> {
    (k.ast.first().map(LazyOp::key))
        .ok_or_else(|| Error::Internal("BEAM: kernel without outputs".into()))
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The kernel with the cached BEAM opts of `key` applied, when there is a usable entry.
fn beam_cache_hit(k: &Kernel, key: &str) -> Option<Kernel> {
    if getenv("IGNORE_BEAM_CACHE", 0) != 0 || getenv("CACHELEVEL", 2) < 1 {
        return None;
    }
    let opts = parse_opts(&diskcache_get(&format!("beam_search_{VERSION}"), key)?)?;
    let mut ret = fresh(k);
    let rest = opts.get(k.applied_opts.len()..)?;
    ret.apply_opts(rest).ok()?;
    Some(ret)
}

/// A copy without the linearized program (BEAM renders candidates under names of its own).
fn fresh(k: &Kernel) -> Kernel {
    let mut k = k.clone();
    k.linearized = None;
    k
}

/// The progress state of one search (tinygrad's `DEBUG>=2` lines).
struct Progress {
    st: Instant,
}

impl Progress {
    fn candidate(&self, tm: f64, timed: usize, tried: usize, k: &Kernel) {
        if debug() >= 2 && getenv("BEAM_DEBUG", 0) <= 1 {
            use std::io::Write;
            print!(
                "\r{:7.2}s: {:12.2} us       {timed:4}/{tried:4}         {}\x1b[K",
                self.st.elapsed().as_secs_f64(),
                tm * 1e6,
                k.colored_shape(None, false)
            );
            let _ = std::io::stdout().flush();
        }
    }

    fn round(&self, best: &(Kernel, f64), exiting: bool, tried: usize, timed: usize) {
        if debug() >= 2 {
            let tm = format!("{:12.2} us", best.1 * 1e6);
            debug_print(format!(
                "\r{:7.2}s: {} from {tried:3} -> {timed:3} actions\x1b[K {}",
                self.st.elapsed().as_secs_f64(),
                colored(&tm, exiting.then_some("green")),
                best.0.colored_shape(None, false)
            ));
        }
    }
}

/// tinygrad's `beam_search(lin, rawbufs, amt, allow_test_size)`: the fastest kernel found from
/// `k` (see the module doc).
pub fn beam_search(
    k: &Kernel,
    rawbufs: &[BufferRef],
    amt: usize,
    allow_test_size: bool,
) -> Result<Kernel> {
    let key = key_of(&[
        ("ast", &ast_key(k)?),
        ("amt", &amt.to_string()),
        ("allow_test_size", py_bool(allow_test_size)),
        ("device", &k.opts.device),
        ("suffix", &k.opts.suffix),
    ]);
    if let Some(hit) = beam_cache_hit(k, &key) {
        return Ok(hit);
    }
    let dev = open_device(&k.opts.device)?;
    let mut beam: Vec<(Kernel, f64)> = vec![(fresh(k), f64::INFINITY)];
    let mut seen = Seen::default();
    let min_progress = getenv_f64("BEAM_MIN_PROGRESS", 0.01) / 1e6;
    if getenv("BEAM_DEBUG", 0) != 0 {
        debug_print(format!("BEAM_SEARCH:\n{:?}", k.ast));
    }
    if debug() >= 2 {
        debug_print(format!(
            "   0.00s:                 from   1 ->   1 actions {}",
            k.colored_shape(None, false)
        ));
    }
    for b in rawbufs {
        ensure_zeroed(b)?;
    }
    let var_vals = midpoint_var_vals(&k.ast[0].vars());
    let progress = Progress { st: Instant::now() };
    loop {
        let mut acted: Vec<Kernel> = vec![];
        for (b, _) in &beam {
            acted.extend(get_kernel_actions(b, false)?.into_iter().map(|x| x.1));
        }
        let compiled = compile_candidates(&acted, &dev, &mut seen, workers())?;
        let mut timed: Vec<(Kernel, f64)> = vec![];
        for (i, c) in compiled.iter().enumerate() {
            let Some(c) = c else { continue };
            let o = TimeOpts {
                max_global_size: Some(65536),
                clear_l2: false,
                cnt: 3,
                early_stop: Some(beam[0].1 * 3.0),
            };
            let tms = match time_program(c, &var_vals, rawbufs, &o) {
                Ok(t) => t,
                Err(e) if getenv("BEAM_STRICT_MODE", 0) == 0 => {
                    if debug() >= 4 {
                        println!("BEAM: candidate {i} failed to run: {}", e.message());
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let tm = tms.iter().copied().fold(f64::INFINITY, f64::min);
            timed.push((fresh(&acted[i]), tm));
            beam_debug(&progress, i, c, tm, timed.len(), acted.len());
            progress.candidate(tm, timed.len(), acted.len(), &acted[i]);
        }
        timed.sort_by(|a, b| a.1.total_cmp(&b.1));
        let exiting =
            timed.is_empty() || timed[0].1 < min_progress || beam[0].1 - timed[0].1 < min_progress;
        if !exiting {
            timed.truncate(amt.max(1));
            beam = timed.clone();
        } else if timed.first().is_some_and(|t| t.1 < beam[0].1) {
            beam = vec![timed[0].clone()];
        }
        progress.round(&beam[0], exiting, acted.len(), timed.len());
        if exiting {
            break;
        }
    }
    let best = beam.swap_remove(0);
    if getenv("CACHELEVEL", 2) >= 1 {
        let table = format!("beam_search_{VERSION}");
        diskcache_put(&table, &key, opts_text(&best.0.applied_opts).as_bytes());
    }
    if getenv("BEAM_DEBUG", 0) != 0 {
        let opts: Vec<String> = best.0.applied_opts.iter().map(|o| o.to_string()).collect();
        debug_print(format!(
            "BEAM_SEARCH: final tm={:0.2} us, applied_opts=[{}]",
            best.1 * 1e6,
            opts.join(", ")
        ));
    }
    Ok(best.0)
}

/// `BEAM_DEBUG>1`: one line per timed candidate.
fn beam_debug(p: &Progress, i: usize, c: &Candidate, tm: f64, timed: usize, tried: usize) {
    if getenv("BEAM_DEBUG", 0) > 1 {
        debug_print(format!(
            "{:7.2}s: {i:5} {:5} uops {:12.2} us compile/{:12.2} us run       {timed:4}/{tried:4}",
            p.st.elapsed().as_secs_f64(),
            c.p.uops.len(),
            c.compile_s * 1e6,
            tm * 1e6
        ));
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
    let opts: Vec<String> = k.applied_opts.iter().map(|o| o.to_string()).collect();
    let key = key_of(&[
        ("ast", &ast_key(k)?),
        ("opts", &format!("[{}]", opts.join(", "))),
        ("allow_test_size", py_bool(allow_test_size)),
        ("max_global_size", &max_global_size.to_string()),
        ("clear_l2", py_bool(clear_l2)),
        ("device", &k.opts.device),
        ("suffix", &k.opts.suffix),
    ]);
    let table = format!("time_linearizer_{VERSION}");
    let cached = !disable_cache && getenv("CACHELEVEL", 2) >= 2;
    if cached {
        if let Some(v) = diskcache_get(&table, &key) {
            let tms: Vec<f64> = (v.chunks_exact(8))
                .filter_map(|c| c.try_into().ok().map(f64::from_le_bytes))
                .collect();
            if !tms.is_empty() {
                return Ok(tms.iter().copied().fold(f64::INFINITY, f64::min));
            }
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
    if cached {
        let bytes: Vec<u8> = tms.iter().flat_map(|t| t.to_le_bytes()).collect();
        diskcache_put(&table, &key, &bytes);
    }
    Ok(tms.iter().copied().fold(f64::INFINITY, f64::min))
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

/// tinygrad's `optimize_local_size`: for a program launched with `global` and no local size,
/// the local size (each dim a power of two up to 256, 1024, or the dim itself, dividing it, with
/// a product of at most 1024) of the fastest of two timed runs each, in random order. An output
/// that is also an input gets a scratch copy for the trials.
pub fn optimize_local_size(
    prg: &dyn Program,
    global: LaunchDims,
    rawbufs: &[RawBuf],
    vals: &[i64],
) -> Result<LaunchDims> {
    const MAX_WORKGROUP: usize = 1024;
    let choices: Vec<Vec<usize>> = (global.iter())
        .map(|&sz| {
            let mut c: Vec<usize> = [1, 2, 4, 8, 16, 32, 64, 128, 256, MAX_WORKGROUP, sz]
                .into_iter()
                .filter(|&x| x <= sz && x > 0)
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect();
    let mut sizes: Vec<LaunchDims> = vec![];
    for &a in &choices[0] {
        for &b in &choices[1] {
            for &c in &choices[2] {
                if a * b * c <= MAX_WORKGROUP {
                    sizes.push([a, b, c]);
                }
            }
        }
    }
    let mut trials: Vec<LaunchDims> = sizes.iter().chain(sizes.iter()).copied().collect();
    shuffle(&mut trials);
    let best = (trials.iter())
        .map(|l| (try_local_size(prg, global, *l, rawbufs, vals), *l))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|b| b.0.is_finite());
    best.map(|b| b.1).ok_or_else(|| {
        Error::Runtime(format!(
            "optimize_local_size: every local size failed for global {global:?}"
        ))
    })
}

/// One trial: the time with local size `l` (global divided by it), infinity when it fails or does
/// not divide (tinygrad passes a fractional global size there, which no launch accepts).
fn try_local_size(
    prg: &dyn Program,
    global: LaunchDims,
    l: LaunchDims,
    bufs: &[RawBuf],
    vals: &[i64],
) -> f64 {
    if global.iter().zip(&l).any(|(g, l)| g % l != 0) {
        return f64::INFINITY;
    }
    let g = [global[0] / l[0], global[1] / l[1], global[2] / l[2]];
    match prg.call(bufs, vals, Some(g), Some(l), true) {
        Ok(Some(t)) => t,
        _ => f64::INFINITY,
    }
}

/// Fisher-Yates with a clock-seeded xorshift (the trial order only needs to vary).
fn shuffle<T>(v: &mut [T]) {
    let mut x = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
        | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
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
