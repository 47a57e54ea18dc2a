//! From a kernel AST to a [`CompiledRunner`] (tinygrad 0.9.1 `get_linearizer` and `get_runner`),
//! through the process-wide method cache.
//!
//! The cache is keyed by (device, AST, the optimizer's knobs) and, a second time, by (device
//! family, AST, knobs), bucketed by a hash of the roots' structural hashes (computed once per
//! node as the AST was built) and compared structurally within a bucket; a hit allocates nothing.
//! The family level lets a kernel compiled for `AMD:0` load on `AMD:1` from the same binary
//! without building or compiling it again. The knobs ([`OPT_KNOBS`]) are every setting that
//! changes which opts a kernel gets. (tinygrad 0.9.1 keys by BEAM only; the others are added so
//! a scoped override, `Context(TC=0)` say, never receives a kernel built under other settings.)
//!
//! The optimizer step of `get_kernel` (0.9.1's `get_linearizer`): the renderer's required opts,
//! then, unless `NOOPT=1`, tensor cores where one matches or else the hand-coded heuristics
//! (`Kernel::apply_default_opts`); then at `BEAM>=1` BEAM search (`engine/search.rs`
//! `beam_kernel`: the search from the required opts, compared with the heuristic kernel).
//!
//! Counters for tests: [`compiles_on_this_thread`] (binaries built, i.e. `compile_cached` calls)
//! and [`programs_built_on_this_thread`] (kernels linearized and rendered).
//!
//! Not guaranteed: two threads missing the cache for one AST at once both build it (the later
//! insert wins; both runners work); the cache is never pruned.

use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use crate::codegen::kernel::{dedup_kernel_name, Kernel};
use crate::codegen::program::ProgramSpec;
use crate::device::registry::{device_family, Compiled};
use crate::helpers::{ansistrip, debug, getenv, FxHashMap, FxHasher, Knob};
use crate::ops::LazyOp;
use crate::renderer::Renderer;
use crate::runtime::builtin::open_device;
use crate::Result;

use super::debug::{colored_kernel_name, debug_print};
use super::runners::{compile_program, CompiledRunner};
use super::Runner;

/// The knobs that change which opts `get_kernel` applies (or how a kernel lowers and renders:
/// `CPU_REDUCE_LANES`, `CPU_STAGE`, which gates the CPU tile's staged strip, `CPU_STREAM`, which
/// gates the streaming stores, `CPU_WIDE`, which gates CLANG's wide-vector pragma, `CPU_ROWS`,
/// which gates the transposed row accumulators, and `VECALU`, which gates the vector ALU fold and
/// the lane accumulators), so each is part of the cache key.
pub const OPT_KNOBS: [&str; 18] = [
    "BEAM",
    "NOOPT",
    "TC",
    "TC_OPT",
    "MV",
    "MV_BLOCKSIZE",
    "MV_THREADS_PER_ROW",
    "MV_ROWS_PER_THREAD",
    "NOLOCALS",
    "CPU_TILE",
    "CPU_CONV",
    "CPU_REDUCE",
    "CPU_REDUCE_LANES",
    "CPU_STAGE",
    "CPU_STREAM",
    "CPU_WIDE",
    "CPU_ROWS",
    "VECALU",
];

/// The values of [`OPT_KNOBS`] now (an unset knob reads as `i64::MIN`).
fn opt_knobs() -> [i64; OPT_KNOBS.len()] {
    const fn k(i: usize) -> Knob {
        Knob::new(OPT_KNOBS[i], i64::MIN)
    }
    static KNOBS: [Knob; OPT_KNOBS.len()] = [
        k(0),
        k(1),
        k(2),
        k(3),
        k(4),
        k(5),
        k(6),
        k(7),
        k(8),
        k(9),
        k(10),
        k(11),
        k(12),
        k(13),
        k(14),
        k(15),
        k(16),
        k(17),
    ];
    std::array::from_fn(|i| KNOBS[i].get())
}

/// One cache entry's key: (device or family, AST, the optimizer's knobs).
struct CacheKey {
    device: String,
    ast: Vec<LazyOp>,
    knobs: [i64; OPT_KNOBS.len()],
    by_family: bool,
}

/// A key as a lookup sees it: borrowed, so a hit allocates nothing.
#[derive(Clone, Copy)]
struct KeyRef<'a> {
    device: &'a str,
    ast: &'a [LazyOp],
    knobs: [i64; OPT_KNOBS.len()],
    by_family: bool,
}

impl KeyRef<'_> {
    /// The bucket: a hash of the device, every root's structural hash (computed when the AST was
    /// built) and the knobs.
    fn bucket(&self) -> u64 {
        let mut h = FxHasher::default();
        (self.device, self.knobs, self.by_family).hash(&mut h);
        self.ast.hash(&mut h);
        h.finish()
    }

    fn matches(&self, k: &CacheKey) -> bool {
        k.by_family == self.by_family
            && k.knobs == self.knobs
            && k.device == self.device
            && k.ast.as_slice() == self.ast
    }

    fn owned(&self) -> CacheKey {
        CacheKey {
            device: self.device.to_string(),
            ast: self.ast.to_vec(),
            knobs: self.knobs,
            by_family: self.by_family,
        }
    }
}

type Buckets = FxHashMap<u64, Vec<(CacheKey, Arc<CompiledRunner>)>>;

fn method_cache() -> &'static Mutex<Buckets> {
    static CACHE: OnceLock<Mutex<Buckets>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(FxHashMap::default()))
}

fn cache_get(key: KeyRef<'_>) -> Option<Arc<CompiledRunner>> {
    let bucket = key.bucket();
    let cache = method_cache().lock().unwrap_or_else(|e| e.into_inner());
    let entries = cache.get(&bucket)?;
    entries
        .iter()
        .find(|(k, _)| key.matches(k))
        .map(|(_, r)| Arc::clone(r))
}

fn cache_put(key: KeyRef<'_>, runner: &Arc<CompiledRunner>) {
    let bucket = key.bucket();
    let mut cache = method_cache().lock().unwrap_or_else(|e| e.into_inner());
    let entries = cache.entry(bucket).or_default();
    match entries.iter_mut().find(|(k, _)| key.matches(k)) {
        Some(e) => e.1 = Arc::clone(runner),
        None => entries.push((key.owned(), Arc::clone(runner))),
    }
}

/// Empty the method cache (both levels): the next [`get_runner`] of any AST builds it again. For
/// measuring the cold path (`bench workloads`); runners handed out before stay valid.
pub fn clear_method_cache() {
    method_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

thread_local! {
    static COMPILES: Cell<usize> = const { Cell::new(0) };
    static PROGRAMS: Cell<usize> = const { Cell::new(0) };
}

/// Count one compile on this thread.
pub(crate) fn note_compile() {
    COMPILES.with(|c| c.set(c.get() + 1));
}

/// Binaries this thread asked a device compiler for (through the disk cache) so far.
pub fn compiles_on_this_thread() -> usize {
    COMPILES.with(Cell::get)
}

/// Kernels this thread linearized and rendered (method-cache misses of both levels) so far.
pub fn programs_built_on_this_thread() -> usize {
    PROGRAMS.with(Cell::get)
}

/// tinygrad's `get_linearizer`: the Kernel for `ast` on `renderer`, with the opts the engine
/// applies (see the module doc; `NOOPT=1` leaves only the required ones).
pub fn get_kernel(renderer: &dyn Renderer, ast: &[LazyOp]) -> Result<Kernel> {
    if debug() >= 3 {
        for op in ast {
            debug_print(crate::codegen::graph::tree_text(op).trim_end());
        }
    }
    let mut k = Kernel::new(ast, renderer.opts())?;
    k.required_optimizations()?;
    if getenv("NOOPT", 0) == 0 {
        // beyond 0.9.1: a CPU matmul gets the CPU tile instead of the heuristics (`CPU_TILE=0`),
        // a CPU conv the conv tile (`CPU_CONV=0`), a CPU reduction several accumulators
        // (`CPU_REDUCE=0`)
        let used_tc = if k.apply_cpu_tile()? || k.apply_cpu_conv()? || k.apply_cpu_reduce()? {
            false
        } else {
            k.apply_default_opts()?
        };
        if getenv("BEAM", 0) >= 1 {
            k = crate::engine::search::beam_kernel(renderer, ast, k, used_tc)?;
        }
    }
    Ok(k)
}

/// The kernel's name as tinygrad shows it (colored by axis), when it matches the program's plain
/// name; the plain name otherwise.
fn display_name(k: &Kernel, name: &str) -> String {
    let base = k.base_name();
    let Some(suffix) = name.strip_prefix(&base) else {
        return name.to_string();
    };
    let prefix_len = base.find('_').map_or(base.len(), |i| i + 1);
    let prefix = &base[..prefix_len];
    let colored = colored_kernel_name(prefix, k.full_shape(), &k.colors(), suffix);
    if ansistrip(&colored) == name {
        colored
    } else {
        name.to_string()
    }
}

/// A kernel's program and display name, and its binary when it was compiled before the runner is
/// made (`None`: [`CompiledRunner::new`] compiles it; `Some(Err)`: that compile failed).
pub(crate) struct Built {
    pub p: ProgramSpec,
    pub name: String,
    pub lib: Option<Result<Arc<[u8]>>>,
}

/// `k` linearized (under the name it was given or reserves now) and rendered for `device`; the
/// program and its display name.
fn program_of(k: &mut Kernel, dev: &Compiled, device: &str) -> Result<(ProgramSpec, String)> {
    let mut p = k.to_program(&*dev.renderer)?;
    p.device = device.to_string();
    let name = display_name(k, &p.name);
    Ok((p, name))
}

/// The optimized Kernel of `ast` on `dev` (as [`get_kernel`] makes it) and the kernel name it
/// will have, reserved now in the process-wide name counter: the first half of building a runner
/// away from the calling thread (`prebuild.rs`), run on the calling thread in schedule order so
/// the names are the ones an in-order build gives.
pub(crate) fn plan_kernel(dev: &Compiled, ast: &[LazyOp]) -> Result<(Kernel, String)> {
    let k = get_kernel(&*dev.renderer, ast)?;
    let name = dedup_kernel_name(&k.base_name());
    Ok((k, name))
}

/// The second half (any thread): `k` linearized under `name`, rendered and compiled for `device`.
/// Touches no counter and no cache; [`get_runner_or`] installs the result.
pub(crate) fn build_planned(dev: &Compiled, device: &str, k: &Kernel, name: &str) -> Result<Built> {
    let mut k = k.clone();
    k.linearize_as(name)?;
    let (p, name) = program_of(&mut k, dev, device)?;
    let lib = Some(compile_program(dev, &p));
    Ok(Built { p, name, lib })
}

/// Whether the method cache holds `ast` for `device` at either level (as [`get_runner`] would
/// look it up now).
pub(crate) fn is_cached(device: &str, ast: &[LazyOp]) -> bool {
    let ckey = KeyRef {
        device,
        ast,
        knobs: opt_knobs(),
        by_family: false,
    };
    if cache_get(ckey).is_some() {
        return true;
    }
    let family = device_family(device);
    let bkey = KeyRef {
        device: &family,
        by_family: true,
        ..ckey
    };
    cache_get(bkey).is_some()
}

/// tinygrad's `get_runner`: the cached runner of `ast` on `device`, built (and compiled) on a
/// miss.
pub fn get_runner(device: &str, ast: &[LazyOp]) -> Result<Arc<CompiledRunner>> {
    get_runner_or(device, ast, |dev| {
        let mut k = get_kernel(&*dev.renderer, ast)?;
        let (p, name) = program_of(&mut k, dev, device)?;
        Ok(Built { p, name, lib: None })
    })
}

/// [`get_runner`] with `build` making the program on a miss of both cache levels (the runner is
/// made, counted and cached here, on the calling thread).
pub(crate) fn get_runner_or(
    device: &str,
    ast: &[LazyOp],
    build: impl FnOnce(&Compiled) -> Result<Built>,
) -> Result<Arc<CompiledRunner>> {
    let ckey = KeyRef {
        device,
        ast,
        knobs: opt_knobs(),
        by_family: false,
    };
    if let Some(r) = cache_get(ckey) {
        return Ok(r);
    }
    let family = device_family(device);
    let bkey = KeyRef {
        device: &family,
        by_family: true,
        ..ckey
    };
    if let Some(b) = cache_get(bkey) {
        let mut p = b.p.clone();
        p.device = device.to_string();
        let name = b.display_name().to_string();
        let r = Arc::new(CompiledRunner::new(p, name, Some(Arc::clone(&b.lib)))?);
        cache_put(ckey, &r);
        return Ok(r);
    }
    let dev = open_device(device)?;
    let Built { p, name, lib } = build(&dev)?;
    PROGRAMS.with(|c| c.set(c.get() + 1));
    if debug() >= 3 && !p.applied_opts.is_empty() {
        let opts: Vec<String> = p.applied_opts.iter().map(|o| o.to_string()).collect();
        debug_print(format!("[{}]", opts.join(", ")));
    }
    if debug() >= 5 {
        debug_print(crate::codegen::uop_serial::print_uops(&p.uops));
    }
    let lib = match lib {
        Some(lib) => {
            note_compile();
            Some(lib?)
        }
        None => None,
    };
    let r = Arc::new(CompiledRunner::new(p, name, lib)?);
    cache_put(ckey, &r);
    cache_put(bkey, &r);
    Ok(r)
}
