//! The `CLANG` device's compiler and runtime: C source to a shared object with `clang` (or `cc`
//! when clang is not on `PATH`), loaded with `dlopen` and run on all cores.
//!
//! - [`ClangCompiler`]: runs the C compiler with `-shared -fPIC -O2 -march=native
//!   -ffp-contract=off -Wall -x c -` (flags gcc and clang both accept; no `-Werror`, no
//!   `-ffast-math`, no `-include tgmath.h`; warnings are printed at `DEBUG>=3`), reading the source
//!   from stdin and the object back from a temporary file. `CLANG_CC=<program>` forces the compiler.
//! - [`ClangRuntime`] / [`ClangProgram`]: load the object and look up the kernel entry
//!   `NAME_rg` (the ABI in `driver::dl`). A call splits the kernel's outermost loop across
//!   `ncores` threads of a process-wide pool (the calling thread runs share 0):
//!   `ncores = min(CLANG_THREADS (default: available cores), global[0])`, where `global` carries
//!   the outer loop's extent (`Some([n, 1, 1])`; `n = 1` runs on the calling thread alone): as the
//!   caller passes it, else as the program's launch policy ([`CpuLaunch`], kept when the runtime
//!   loads a program through [`Runtime::load_program`]) picks it from the variable values. A call
//!   returns only after every share finished, with or without `wait`.
//! - [`open_clang`]: the device record for the registry, given the C renderer.
//!
//! Not guaranteed: the kernel's indexing is trusted (buffers are checked to be live host memory,
//! not to be large enough); a compiler that hangs blocks the caller.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::codegen::program::ProgramSpec;
use crate::device::allocator::{host_memory, HostAllocator, LruAllocator};
use crate::device::registry::Compiled;
use crate::device::{Compiler, DeviceGraph, GraphCall, LaunchDims, Program, RawBuf, Runtime};
use crate::driver::dl::{KernelFn, Library};
use crate::driver::process::{run_with_stdin, which, TempPath};
use crate::helpers::{debug, getenv, getenv_str, to_function_name};
use crate::renderer::Renderer;
use crate::runtime::cpu::graph::{BatchCompiler, BatchLang, CpuGraph, BATCH_NAME};
use crate::runtime::cpu::launch::CpuLaunch;
use crate::{bail, Error, Result};

mod pool;

/// Flags for both gcc and clang (tinygrad: `-include tgmath.h -shared -march=native -O2 -Wall
/// -Werror -x c -fPIC`; here without `-Werror`, plus `-ffp-contract=off` (and no `-ffast-math`) so
/// that results match the interpreter bit for bit, and without `-include tgmath.h`: the renderer
/// calls the typed math functions and includes `<math.h>` itself when a kernel needs it, and the
/// header cost every compile about 10-15% (measured in the README).
pub const CFLAGS: [&str; 6] = [
    "-shared",
    "-fPIC",
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-Wall",
];

/// C source to a shared object through an external C compiler.
#[derive(Debug, Clone)]
pub struct ClangCompiler {
    program: PathBuf,
    name: String,
}

impl ClangCompiler {
    /// The compiler named by `CLANG_CC`, else `clang` on `PATH`, else `cc`.
    pub fn new() -> Result<ClangCompiler> {
        if let Some(forced) = getenv_str("CLANG_CC").filter(|s| !s.trim().is_empty()) {
            return ClangCompiler::with_program(forced.trim());
        }
        match which("clang").or_else(|| which("cc")) {
            Some(p) => ClangCompiler::with_program(p),
            None => bail!(
                Compile,
                "CLANG device: neither clang nor cc is on PATH (set CLANG_CC to a C compiler)"
            ),
        }
    }

    /// Use `program` (a name on `PATH` or a path).
    pub fn with_program(program: impl AsRef<Path>) -> Result<ClangCompiler> {
        let shown = program.as_ref().display().to_string();
        let Some(path) = which(&shown) else {
            bail!(Compile, "C compiler {shown} not found (or not executable)");
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(shown);
        Ok(ClangCompiler {
            program: path,
            name,
        })
    }

    /// The compiler executable.
    pub fn program(&self) -> &Path {
        &self.program
    }
}

fn source_head(src: &str, lines: usize) -> String {
    let mut out = String::new();
    for (i, l) in src.lines().take(lines).enumerate() {
        out.push_str(&format!("{:4} | {l}\n", i + 1));
    }
    let total = src.lines().count();
    if total > lines {
        out.push_str(&format!("     ... ({} more lines)\n", total - lines));
    }
    out
}

impl Compiler for ClangCompiler {
    fn cache_key(&self) -> Option<String> {
        // The flags are part of the key, so changing them never serves a stale object.
        Some(format!("compile_clang_{} {}", self.name, CFLAGS.join(" ")))
    }

    fn joins_sources(&self) -> bool {
        true
    }

    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let out = TempPath::new("clang", ".so");
        let mut args: Vec<&OsStr> = CFLAGS.iter().map(OsStr::new).collect();
        let out_arg = OsString::from(out.path());
        args.extend([OsStr::new("-x"), OsStr::new("c"), OsStr::new("-")]);
        args.extend([OsStr::new("-o"), out_arg.as_os_str(), OsStr::new("-lm")]);
        let res = run_with_stdin(&self.program, &args, src.as_bytes())?;
        let stderr = String::from_utf8_lossy(&res.stderr);
        if !res.success {
            bail!(
                Compile,
                "{} failed ({}):\n{}\nsource:\n{}",
                self.program.display(),
                res.status,
                stderr.trim_end(),
                source_head(src, 20)
            );
        }
        if debug() >= 3 && !stderr.trim().is_empty() {
            println!("{} warnings:\n{}", self.name, stderr.trim_end());
        }
        std::fs::read(out.path()).map_err(|e| {
            Error::Compile(format!(
                "reading the object {} written by {}: {e}",
                out.path().display(),
                self.program.display()
            ))
        })
    }
}

/// Loads shared objects as [`ClangProgram`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClangRuntime;

impl Runtime for ClangRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        Ok(Box::new(ClangProgram::new(name, lib)?))
    }
    fn load_program(&self, p: &ProgramSpec, lib: &[u8]) -> Result<Box<dyn Program>> {
        Ok(Box::new(
            ClangProgram::new(&p.function_name, lib)?.with_launch(p),
        ))
    }
    fn has_graph(&self) -> bool {
        true
    }
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        let compile = BatchCompiler {
            compiler: Arc::new(ClangCompiler::new()?),
            load: Arc::new(|lib: &[u8]| ClangProgram::new(BATCH_NAME, lib)),
        };
        CpuGraph::build_or_call(prgs, calls, BatchLang::C, "\n", compile)
    }
}

/// A loaded CPU kernel (CLANG's, or the LLVM device's: both have the `NAME_rg` entry).
#[derive(Debug)]
pub struct ClangProgram {
    name: String,
    kernel: Arc<KernelFn>,
    /// How to split a call that passes no launch dims over cores.
    launch: Option<CpuLaunch>,
    /// The kernel's source, for the batch graph (`runtime/cpu/graph.rs`).
    source: Option<Arc<str>>,
}

impl ClangProgram {
    /// Load `lib` (a shared object) and find the entry of kernel `name` (`<name>_rg`, with the
    /// name escaped as the renderer escapes it).
    pub fn new(name: &str, lib: &[u8]) -> Result<ClangProgram> {
        let file = TempPath::new("kernel", ".so");
        std::fs::write(file.path(), lib).map_err(|e| {
            Error::Io(format!(
                "writing kernel {name} to {}: {e}",
                file.path().display()
            ))
        })?;
        // The file may go as soon as it is mapped: `file` is removed when this returns.
        let library = Library::open(file.path())?;
        let kernel = library.kernel(&format!("{}_rg", to_function_name(name)))?;
        Ok(ClangProgram::from_kernel(name, kernel))
    }

    /// A program around a kernel entry loaded some other way (the LLVM device's own loader).
    pub fn from_kernel(name: &str, kernel: KernelFn) -> ClangProgram {
        ClangProgram {
            name: name.to_string(),
            kernel: Arc::new(kernel),
            launch: None,
            source: None,
        }
    }

    /// Keep the launch policy of `p` (a program without launch dims; one with them keeps none)
    /// and its source (which a batch graph compiles again with the other kernels of the batch).
    pub fn with_launch(mut self, p: &ProgramSpec) -> ClangProgram {
        self.launch = p.global_size.is_none().then(|| CpuLaunch::of(p));
        self.source = Some(Arc::from(p.src.as_str()));
        self
    }

    /// The kernel name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The launch policy, when the program was loaded with it.
    pub fn launch(&self) -> Option<&CpuLaunch> {
        self.launch.as_ref()
    }

    /// The kernel's source, when the program was loaded with it.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// One call of the entry on the calling thread as share 0 of 1, with the addresses and
    /// values as they are (the batch graph checked them when it wrote them).
    pub(crate) fn call_entry(&self, addrs: &[u64], vals: &[i32]) -> Result<()> {
        self.kernel.call(addrs, vals, 0, 1)
    }
}

/// How many shares a call is split into.
fn clang_threads(global: Option<LaunchDims>) -> usize {
    // a single-share launch reads no knob (the env lookup dominates a tiny kernel's host time)
    if global.is_some_and(|g| g[0] <= 1) {
        return 1;
    }
    let cores = pool::max_cores() as i64;
    // More shares than cores is allowed (they queue); 1024 bounds a typo.
    let knob = getenv("CLANG_THREADS", cores).clamp(1, 1024) as usize;
    match global {
        Some(g) => knob.min(g[0].max(1)),
        None => knob,
    }
}

impl ClangProgram {
    fn addresses(&self, bufs: &[RawBuf]) -> Result<Vec<u64>> {
        bufs.iter()
            .enumerate()
            .map(|(i, b)| {
                host_memory(b).map(|_| b.addr).map_err(|e| {
                    Error::Runtime(format!("kernel {}: buffer {i}: {}", self.name, e.message()))
                })
            })
            .collect()
    }

    fn int_vals(&self, vals: &[i64]) -> Result<Vec<i32>> {
        vals.iter()
            .enumerate()
            .map(|(i, &v)| {
                i32::try_from(v).map_err(|_| {
                    Error::Runtime(format!(
                        "kernel {}: variable {i} = {v} does not fit the kernel's int",
                        self.name
                    ))
                })
            })
            .collect()
    }
}

impl Program for ClangProgram {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn call(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: Option<LaunchDims>,
        _local: Option<LaunchDims>,
        wait: bool,
    ) -> Result<Option<f64>> {
        // `bufs` (and so every block's owner) stays borrowed until all shares finished.
        let addrs = self.addresses(bufs)?;
        let ivals = self.int_vals(vals)?;
        let global = match (global, &self.launch) {
            (None, Some(launch)) => launch.dims(vals)?,
            (global, _) => global,
        };
        let ncores = clang_threads(global);
        let start = Instant::now();
        if ncores <= 1 {
            self.kernel.call(&addrs, &ivals, 0, 1)?;
        } else {
            pool::run_split(&self.kernel, addrs, ivals, ncores, ncores)?;
        }
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }

    fn time_part(&self, bufs: &[RawBuf], vals: &[i64], max_work: i64) -> Result<Option<f64>> {
        let Some(launch) = &self.launch else {
            return Ok(None);
        };
        let Some(part) = launch.test_part(vals, max_work)? else {
            return Ok(None);
        };
        let (t, ran, of) = self.call_part(bufs, vals, part.global, part.fraction)?;
        // shares 0..ran of `of` cover iterations [0, extent*ran/of) of the loop
        let iters = part.extent.saturating_mul(ran as i64) / (of as i64).max(1);
        if iters <= 0 {
            return Ok(None);
        }
        Ok(Some(t * part.extent as f64 / iters as f64))
    }
}

impl ClangProgram {
    /// The kernel's split outer loop cut into `fraction` times as many shares as [`Program::call`]
    /// with `global` would use, and only the first shares (one per thread `call` would use) run.
    /// Blocks until they finished; returns (seconds, shares run, shares in all).
    fn call_part(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: LaunchDims,
        fraction: usize,
    ) -> Result<(f64, usize, usize)> {
        let addrs = self.addresses(bufs)?;
        let ivals = self.int_vals(vals)?;
        let parts = clang_threads(Some(global));
        let of = parts.checked_mul(fraction.max(1)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "kernel {}: {fraction} is too many shares",
                self.name
            ))
        })?;
        let start = Instant::now();
        pool::run_split(&self.kernel, addrs, ivals, parts, of)?;
        Ok((start.elapsed().as_secs_f64(), parts, of))
    }
}

/// The `CLANG` device record: LRU-cached host memory, the C compiler, the dlopen runtime and the
/// given renderer. For the engine: `register_family("CLANG", move |n| open_clang(n, r.clone()))`.
pub fn open_clang(name: &str, renderer: Arc<dyn Renderer>) -> Result<Compiled> {
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HostAllocator)),
        compiler: Arc::new(ClangCompiler::new()?),
        runtime: Arc::new(ClangRuntime),
        renderer,
    })
}

#[cfg(test)]
mod tests;
