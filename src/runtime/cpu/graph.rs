//! The CPU batch graph of CLANG and LLVM (tinygrad 0.9.1's `ClangGraph`, and the same for LLVM,
//! which 0.9.1 does not graph): the kernels of a JIT batch and one more function, the batch
//! entry, compiled together into one program, so that a replay is one call into compiled code.
//!
//! - CLANG: one C translation unit, every distinct kernel's source (the C renderer's sources join:
//!   its helpers sit under include guards) and the entry `rg_batch_rg`, which calls each kernel's
//!   `NAME_rg` in order with its slice of one address table and one value table.
//! - LLVM: every distinct kernel's module and a module holding the entry, parsed and linked into
//!   one module in process (`LLVMLinkModules2`), optimized and emitted as one object.
//!
//! The entry has the kernel ABI (`driver::dl`); `vals` holds every kernel's values, then the
//! range `[from, to)` of kernels to run. The LLVM entry is `optnone`, as each kernel's `NAME_rg`
//! is (`renderer/llvmir.rs`): a dispatcher compiled at LLVM's no-optimization level (a 34-kernel
//! entry's compile costs 58M callgrind instructions fewer: 112.6M -> 54.6M for the device's
//! warm-up and that one compile). Unlike tinygrad, addresses are not baked into the source:
//! the graph owns the address table, so the source depends only on the kernels and their order
//! and the compile cache serves a capture of the same batch again. The build resolves every
//! address once; a replay compares each call's addresses and values with the table and writes the
//! ones that changed (the JIT's input swaps, checked to be host memory), then calls the entry.
//!
//! Cores: the kernels the entry runs each run on one core, as [`Program::call`] would run a kernel
//! whose launch policy gives `[1, 1, 1]` (`runtime/cpu/launch.rs`: small kernels). A kernel that
//! would be split over cores (its policy gives more than one, or leaves it to `CLANG_THREADS`) is
//! called through its own program and the worker pool, between two ranges of the entry; for
//! kernels with variables the split is decided per replay from the values. So a batch of small
//! kernels replays as one call, and large kernels keep their split.
//!
//! Build (`graph/build.rs`): the capture plans the batch, renders its source and fills the
//! tables. When the compile cache holds the batch, the capture loads it (as fast as starting a
//! thread, measured by `bench jit`, and the first replay is already one call). Otherwise the
//! capture returns at once and a build thread compiles the source while replays call the kernels
//! one by one as the host-call [`CallGraph`] does. The first replay
//! after the build is done swaps the entry in, under the graph's lock (never inside a replay);
//! [`DeviceGraph::wait_built`] waits for it with a timeout. A build that fails keeps the host-call
//! path (reported at `DEBUG>=2`). `CPU_GRAPH_SYNC=1` compiles at capture instead, as tinygrad
//! does. Dropping the graph cancels a build that has not started compiling and waits for one that
//! has (the thread holds the source and the compiler, never a program of the batch).
//!
//! Not built (the device falls back to the host-call [`CallGraph`]): `CPU_GRAPH=0`; a program
//! loaded without its source (`Runtime::load` rather than `load_program`); two kernels of one
//! name with different sources; with `CPU_GRAPH_SYNC=1`, a batch that fails to compile (reported
//! at `DEBUG>=2`).
//!
//! Not guaranteed: when the entry is ready (a compiler run over every kernel's source, or an LLVM
//! link and codegen, unless the compile cache holds the batch); the replays before it cost what
//! the host-call graph costs. The entry trusts the kernels' indexing as the single-kernel programs
//! do.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::device::allocator::host_memory;
use crate::device::compiler::{cached_binary, compile_cached};
use crate::device::{CallGraph, Compiler, DeviceGraph, GraphBuild, GraphCall, Launch, Program};
use crate::helpers::{debug, getenv, to_function_name};
use crate::runtime::cpu::clang::ClangProgram;
use crate::runtime::cpu::launch::CpuLaunch;
use crate::{ensure, Error, Result};

mod build;

use build::Build;
pub use build::{hold_builds, HeldBuilds};

/// Loads a compiled batch (its binary) as the program of the entry.
pub type BatchLoad = Arc<dyn Fn(&[u8]) -> Result<ClangProgram> + Send + Sync>;

/// How a batch source becomes its loaded entry: the compiler (through the compile cache) and the
/// loader of the binary it makes.
#[derive(Clone)]
pub struct BatchCompiler {
    pub compiler: Arc<dyn Compiler>,
    pub load: BatchLoad,
}

/// The batch entry's name (its symbol is `rg_batch_rg`).
pub const BATCH_NAME: &str = "rg_batch";

/// The language the batch is compiled from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchLang {
    /// One C translation unit.
    C,
    /// LLVM IR modules to link; `opaque`: `ptr` pointers (LLVM >= 15), else typed ones.
    LlvmIr { opaque: bool },
}

/// How many cores a kernel of the batch runs on.
#[derive(Clone, Debug)]
enum Cores {
    /// One: the entry runs it.
    One,
    /// Split by its own program (the pool).
    Split,
    /// Decided per replay from its variable values.
    PerCall(CpuLaunch),
}

/// Where one kernel's arguments sit in the tables.
#[derive(Clone, Debug)]
struct Slot {
    bufs: usize,
    nbufs: usize,
    vals: usize,
    nvals: usize,
    cores: Cores,
}

/// The argument tables the entry reads (addresses, then values and the range).
struct Table {
    bufs: Vec<u64>,
    vals: Vec<i32>,
}

/// The batch's compiled entry.
enum Entry {
    /// On the build thread: replays call the kernels one by one.
    Building,
    Ready(ClangProgram),
    /// The build failed: replays call the kernels one by one.
    Failed,
}

/// What a replay holds the graph's lock over.
struct State {
    table: Table,
    entry: Entry,
}

/// The batch graph (see the module doc).
pub struct CpuGraph {
    slots: Vec<Slot>,
    state: Mutex<State>,
    /// The host-call path, while the entry builds or where it failed.
    host: CallGraph,
    /// The background build (`None`: built at capture).
    build: Option<Build>,
    entry_calls: AtomicU64,
    /// The batch source (for tests and DEBUG output).
    pub src: Arc<str>,
}

/// The function name and source of a program that can join a batch.
fn member(p: &dyn Program) -> Option<(&str, &str, &ClangProgram)> {
    let c = p.as_any()?.downcast_ref::<ClangProgram>()?;
    Some((c.name(), c.source()?, c))
}

fn cores_of(c: &ClangProgram, l: &Launch) -> Result<Cores> {
    let Some(policy) = c.launch() else {
        return Ok(Cores::Split);
    };
    if l.global.is_some() {
        return Ok(if one_core(l.global) {
            Cores::One
        } else {
            Cores::Split
        });
    }
    if !l.vals.is_empty() {
        return Ok(Cores::PerCall(policy.clone()));
    }
    Ok(if one_core(policy.dims(&[])?) {
        Cores::One
    } else {
        Cores::Split
    })
}

fn one_core(global: Option<crate::device::LaunchDims>) -> bool {
    global.is_some_and(|g| g[0] <= 1)
}

fn int_val(v: i64, k: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        Error::Runtime(format!(
            "batch kernel {k}: variable value {v} does not fit the kernel's int"
        ))
    })
}

/// The kernels' sources (each distinct one once) and per kernel its entry symbol and slot, or
/// `None` when the batch cannot be one program.
type Plan = (Vec<String>, Vec<String>, Vec<Slot>);

fn plan(prgs: &[Arc<dyn Program>], calls: &[GraphCall]) -> Result<Option<Plan>> {
    if prgs.len() != calls.len() || prgs.is_empty() {
        return Ok(None);
    }
    let (mut sources, mut names, mut slots) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen: HashMap<&str, &str> = HashMap::new();
    let (mut nb, mut nv) = (0usize, 0usize);
    for (p, c) in prgs.iter().zip(calls) {
        let (Some((name, src, prg)), Some(l)) = (member(&**p), c.launch()) else {
            return Ok(None);
        };
        match seen.get(name) {
            Some(s) if *s != src => return Ok(None),
            Some(_) => {}
            None => {
                seen.insert(name, src);
                sources.push(src.to_string());
            }
        }
        names.push(format!("{}_rg", to_function_name(name)));
        slots.push(Slot {
            bufs: nb,
            nbufs: l.raws.len(),
            vals: nv,
            nvals: l.vals.len(),
            cores: cores_of(prg, l)?,
        });
        nb += l.raws.len();
        nv += l.vals.len();
    }
    Ok(Some((sources, names, slots)))
}

/// The C entry: kernel `k` runs when `from <= k < to` (`vals[nvals]`, `vals[nvals + 1]`).
fn render_c(names: &[String], slots: &[Slot], nvals: usize) -> String {
    let mut l = vec![format!(
        "void {BATCH_NAME}_rg(void **bufs, const int *vals, int core, int ncores) {{"
    )];
    l.push("  if (core != 0 || ncores < 1) return;".into());
    l.push(format!(
        "  const int from = vals[{nvals}], to = vals[{}];",
        nvals + 1
    ));
    for (k, (n, s)) in names.iter().zip(slots).enumerate() {
        l.push(format!(
            "  if (from <= {k} && {k} < to) {n}(bufs + {}, vals + {}, 0, 1);",
            s.bufs, s.vals
        ));
    }
    l.push("}".into());
    l.join("\n")
}

/// The LLVM module of the entry (the kernels' entries declared; the link resolves them).
fn render_llvm(names: &[String], slots: &[Slot], nvals: usize, opaque: bool) -> String {
    use crate::renderer::llvmir::{ENTRY_ATTRIBUTES, ENTRY_ATTRIBUTE_GROUP};
    let (pp, p8, p32) = if opaque {
        ("ptr", "ptr", "ptr")
    } else {
        ("i8**", "i8*", "i32*")
    };
    // the entry has no work for the SLP vectorizer: marked as such, a batch of vector-only
    // kernels compiles without SLP as each kernel alone does (`runtime/cpu/llvm.rs`)
    let mut l = vec![crate::renderer::llvmir::VECTOR_ONLY_MARK.to_string()];
    let mut declared = std::collections::HashSet::new();
    for n in names {
        if declared.insert(n) {
            l.push(format!("declare void @{n}({pp}, {p32}, i32, i32)"));
        }
    }
    // a dispatcher run once per replay: `optnone`, as each kernel's own entry is (renderer)
    l.push(format!(
        "define void @{BATCH_NAME}_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores) #{ENTRY_ATTRIBUTE_GROUP} {{"
    ));
    l.push("entry:".into());
    for (v, i) in [("from", nvals), ("to", nvals + 1)] {
        l.push(format!(
            "  %{v}.p = getelementptr inbounds i32, {p32} %vals, i64 {i}"
        ));
        l.push(format!("  %{v} = load i32, {p32} %{v}.p, align 4"));
    }
    l.push("  br label %k0".into());
    for (k, (n, s)) in names.iter().zip(slots).enumerate() {
        l.extend([
            format!("k{k}:"),
            format!("  %a{k} = icmp sle i32 %from, {k}"),
            format!("  %b{k} = icmp sgt i32 %to, {k}"),
            format!("  %c{k} = and i1 %a{k}, %b{k}"),
            format!("  br i1 %c{k}, label %run{k}, label %k{}", k + 1),
            format!("run{k}:"),
            format!(
                "  %bp{k} = getelementptr inbounds {p8}, {pp} %bufs, i64 {}",
                s.bufs
            ),
            format!(
                "  %vp{k} = getelementptr inbounds i32, {p32} %vals, i64 {}",
                s.vals
            ),
            format!("  call void @{n}({pp} %bp{k}, {p32} %vp{k}, i32 0, i32 1)"),
            format!("  br label %k{}", k + 1),
        ]);
    }
    l.extend([
        format!("k{}:", names.len()),
        "  ret void".into(),
        "}".into(),
        format!("attributes #{ENTRY_ATTRIBUTE_GROUP} = {{ {ENTRY_ATTRIBUTES} }}"),
    ]);
    l.join("\n")
}

impl CpuGraph {
    /// The batch graph of `calls` (see the module doc), or the host-call graph where it does not
    /// apply. `compile` turns the batch source (C, or LLVM modules joined by `join`) into the
    /// loaded entry: at once when the compile cache holds it or with `CPU_GRAPH_SYNC=1`, else on
    /// the build thread.
    pub fn build_or_call(
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
        lang: BatchLang,
        join: &str,
        compile: BatchCompiler,
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        if getenv("CPU_GRAPH", 1) != 0 {
            match CpuGraph::build(prgs, calls, lang, join, compile) {
                Ok(Some(g)) => return Ok(Some(Box::new(g))),
                Ok(None) => {}
                Err(e) if debug() >= 2 => {
                    println!("\tCPU batch graph not built, calling kernels one by one: {e}")
                }
                Err(_) => {}
            }
        }
        Ok(CallGraph::build(prgs, calls).map(|g| Box::new(g) as Box<dyn DeviceGraph>))
    }

    /// The batch graph of `calls`, `None` where it does not apply (see the module doc): its
    /// entry loaded now from the compile cache when it holds it, compiled now with
    /// `CPU_GRAPH_SYNC=1`, else compiled on a build thread.
    pub fn build(
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
        lang: BatchLang,
        join: &str,
        compile: BatchCompiler,
    ) -> Result<Option<CpuGraph>> {
        let Some((mut sources, names, slots)) = plan(prgs, calls)? else {
            return Ok(None);
        };
        let nvals = slots.last().map_or(0, |s| s.vals + s.nvals);
        let src = match lang {
            BatchLang::C => {
                sources.push(render_c(&names, &slots, nvals));
                sources.join("\n")
            }
            BatchLang::LlvmIr { opaque } => {
                sources.push(render_llvm(&names, &slots, nvals, opaque));
                sources.join(join)
            }
        };
        // every address is 0 until `refresh` writes (and checks) it
        let nbufs = slots.last().map_or(0, |s| s.bufs + s.nbufs);
        let mut table = Table {
            bufs: vec![0; nbufs],
            vals: vec![0; nvals + 2],
        };
        refresh(&slots, &mut table, calls)?;
        let src: Arc<str> = Arc::from(src);
        let (entry, build) = if let Some(lib) = cached_binary(&*compile.compiler, &src) {
            (Entry::Ready((compile.load)(&lib)?), None)
        } else if getenv("CPU_GRAPH_SYNC", 0) != 0 {
            let lib = compile_cached(&*compile.compiler, &src)?;
            (Entry::Ready((compile.load)(&lib)?), None)
        } else {
            let src = src.clone();
            let job = move || (compile.load)(&compile_cached(&*compile.compiler, &src)?);
            (Entry::Building, Some(Build::spawn(Box::new(job))?))
        };
        let Some(host) = CallGraph::build(prgs, calls) else {
            return Ok(None);
        };
        Ok(Some(CpuGraph {
            host,
            slots,
            state: Mutex::new(State { table, entry }),
            build,
            entry_calls: AtomicU64::new(0),
            src,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run kernels `[from, to)` through the entry.
    fn call_range(
        &self,
        entry: &ClangProgram,
        t: &mut Table,
        from: usize,
        to: usize,
    ) -> Result<()> {
        let n = t.vals.len();
        t.vals[n - 2] = int_val(from as i64, from)?;
        t.vals[n - 1] = int_val(to as i64, to)?;
        self.entry_calls.fetch_add(1, Ordering::Relaxed);
        entry.call_entry(&t.bufs, &t.vals)
    }

    fn runs_in_entry(s: &Slot, l: &Launch) -> Result<bool> {
        Ok(match &s.cores {
            Cores::One => true,
            Cores::Split => false,
            Cores::PerCall(policy) => one_core(
                l.global
                    .map_or_else(|| policy.dims(&l.vals), |g| Ok(Some(g)))?,
            ),
        })
    }

    /// A replay through the compiled entry: the ranges of kernels it runs, and between them the
    /// kernels split over cores, each through its own program.
    fn run_entry(&self, entry: &ClangProgram, t: &mut Table, calls: &[GraphCall]) -> Result<()> {
        refresh(&self.slots, t, calls)?;
        let mut from = 0;
        for (k, (s, c)) in self.slots.iter().zip(calls).enumerate() {
            let Some(l) = c.launch() else { continue };
            if CpuGraph::runs_in_entry(s, l)? {
                continue;
            }
            if from < k {
                self.call_range(entry, t, from, k)?;
            }
            self.host.call(k, l)?;
            from = k + 1;
        }
        if from < self.slots.len() {
            self.call_range(entry, t, from, self.slots.len())?;
        }
        Ok(())
    }
}

/// Write the addresses and values of `calls` that differ from the table's.
fn refresh(slots: &[Slot], t: &mut Table, calls: &[GraphCall]) -> Result<()> {
    for (k, (s, c)) in slots.iter().zip(calls).enumerate() {
        let l = c
            .launch()
            .ok_or_else(|| Error::Runtime("a CPU batch graph run with a transfer".into()))?;
        ensure!(
            l.raws.len() == s.nbufs && l.vals.len() == s.nvals,
            Runtime,
            "batch kernel {k}: built with {} buffers and {} values, run with {} and {}",
            s.nbufs,
            s.nvals,
            l.raws.len(),
            l.vals.len()
        );
        for (slot, r) in t.bufs[s.bufs..s.bufs + s.nbufs].iter_mut().zip(&l.raws) {
            if *slot != r.addr {
                host_memory(r)
                    .map_err(|e| Error::Runtime(format!("batch kernel {k}: {}", e.message())))?;
                *slot = r.addr;
            }
        }
        for (slot, &v) in t.vals[s.vals..s.vals + s.nvals].iter_mut().zip(&l.vals) {
            *slot = int_val(v, k)?;
        }
    }
    Ok(())
}

impl DeviceGraph for CpuGraph {
    fn run(&self, calls: &[GraphCall], wait: bool) -> Result<Option<f64>> {
        ensure!(
            calls.len() == self.slots.len(),
            Runtime,
            "batch graph of {} kernels run with {} calls",
            self.slots.len(),
            calls.len()
        );
        let start = Instant::now();
        let mut st = self.lock();
        if matches!(st.entry, Entry::Building) {
            // the swap: under the lock, between two replays
            match self.build.as_ref().and_then(Build::take) {
                Some(Ok(p)) => st.entry = Entry::Ready(p),
                Some(Err(_)) => st.entry = Entry::Failed,
                None => {}
            }
        }
        let State { table, entry } = &mut *st;
        match entry {
            Entry::Ready(p) => self.run_entry(p, table, calls)?,
            Entry::Building | Entry::Failed => {
                self.host.run(calls, false)?;
            }
        }
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }

    fn entry_calls(&self) -> Option<u64> {
        Some(self.entry_calls.load(Ordering::Relaxed))
    }

    fn wait_built(&self, timeout: Duration) -> GraphBuild {
        match &self.build {
            Some(b) => b.wait(timeout),
            None => GraphBuild::Ready,
        }
    }
}

#[cfg(test)]
mod tests;
