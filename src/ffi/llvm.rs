//! libLLVM in process, loaded at run time: no link-time dependency on LLVM.
//!
//! [`Llvm::load`] finds the newest `libLLVM-N.so` / `libLLVM-N.so.1` / `libLLVM.so.N` in the usual
//! Debian/Ubuntu places (`/usr/lib/llvm-N/lib`, `/usr/lib/<multiarch>`, `/usr/lib64`, `/usr/lib`,
//! `/usr/local/lib`) or the file (or folder) named by `LLVM_LIB`, `dlopen`s it and resolves the C
//! API by name ([`api`]), and registers the X86, AMDGPU, NVPTX and AArch64 targets it has.
//! [`Llvm::compile`] runs IR text through parse -> verify -> the new pass manager (the pipeline
//! text the caller gives, e.g. `default<O3>`, LLVM >= 13; none at all when it gives none) ->
//! object (or assembly) emission for a triple, CPU and feature string, each compile in its own
//! LLVM context (compiles may run on several threads at once), with a target machine each thread
//! keeps per option set ([`Llvm::compile_linked_timed`] also reports the CPU time of each stage,
//! [`StageTimes`], for `bench llvmc`). Diagnostics go to a handler that collects them (LLVM's default handler exits the process on an error). Errors name
//! what was missing (no library, a C function, a target) or what LLVM reported (parse errors,
//! verifier reports, codegen diagnostics).
//!
//! What it owns: the loaded libraries (kept for the life of the process: libLLVM is never
//! unloaded, because its static destructors are not safe to run while other code may still hold
//! pointers into it) and every foreign call into them.
//!
//! Not guaranteed: LLVM prints "'gfxNNNN' is not a recognized processor for this target" to
//! stderr itself when asked for a processor it lacks; [`Llvm::amdgpu_mach`] detects that case from
//! the object it produced, not from the message. Two different libLLVM versions can be loaded in
//! one process: each is opened `RTLD_LOCAL` (its symbols never bind another library's, and
//! Debian's are versioned, `LLVM_14`, `LLVM_15`) and keeps its own global state (option and
//! target registries), which is how the tests compare them and how the AMD compiler runs a newer
//! one than the CPU LLVM device (`runtime::amd::compiler`).

mod api;

use std::collections::HashSet;
use std::ffi::c_int;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use libloading::os::unix::{Library as RawLibrary, RTLD_LOCAL, RTLD_NOW};

use crate::helpers::{debug, getenv_str};
use crate::{bail, Error, Result};

use api::{Api, Context, InitFn, Module, TargetMachine, FILE_ASSEMBLY, FILE_OBJECT};

/// The oldest LLVM with the new pass manager C API (`LLVMRunPasses`).
pub const MIN_LLVM_MAJOR: u32 = 13;

/// The triple of AMD GPU code objects.
pub const AMDGPU_TRIPLE: &str = "amdgcn-amd-amdhsa";

/// A libLLVM file found on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlvmLibrary {
    pub path: PathBuf,
    /// The major version its name carries.
    pub major: u32,
}

/// The major version in a libLLVM file name: `libLLVM-14.so`, `libLLVM-14.so.1`,
/// `libLLVM-14.0.6.so.1`, `libLLVM.so.18.1`, `libLLVM.so.19`.
pub fn parse_library_name(name: &str) -> Option<u32> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    if let Some(rest) = name.strip_prefix("libLLVM-") {
        let major = digits(rest)?;
        return rest.contains(".so").then_some(major);
    }
    name.strip_prefix("libLLVM.so.").and_then(digits)
}

/// The directories searched for libLLVM, in order.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        let mut versioned: Vec<(u32, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let v = name.strip_prefix("llvm-")?.parse::<u32>().ok()?;
                Some((v, e.path().join("lib")))
            })
            .collect();
        versioned.sort_by_key(|v| std::cmp::Reverse(v.0));
        dirs.extend(versioned.into_iter().map(|(_, p)| p));
    }
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    for d in [&multiarch, "/usr/lib64", "/usr/lib", "/usr/local/lib"] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

fn libraries_in(dir: &Path, out: &mut Vec<LlvmLibrary>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(major) = parse_library_name(&name) {
            out.push(LlvmLibrary {
                path: e.path(),
                major,
            });
        }
    }
}

/// `LLVM_LIB` when set (not empty): the libLLVM file or folder every user in the process loads.
pub fn llvm_lib_forced() -> Option<String> {
    getenv_str("LLVM_LIB").filter(|s| !s.trim().is_empty())
}

/// Every libLLVM shared library found (newest major first, one path per distinct file). With
/// `LLVM_LIB` set, only what it names: a file, or a folder to search.
pub fn find_libraries() -> Vec<LlvmLibrary> {
    find_libraries_also_in(&[])
}

/// As [`find_libraries`], also searching the folders `extra` after the usual places (not when
/// `LLVM_LIB` is set); of the same major, a library of the usual places comes first.
pub fn find_libraries_also_in(extra: &[PathBuf]) -> Vec<LlvmLibrary> {
    let mut found = vec![];
    match llvm_lib_forced() {
        Some(forced) => {
            let p = PathBuf::from(forced.trim());
            if p.is_dir() {
                libraries_in(&p, &mut found);
            } else {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let major = name.as_deref().and_then(parse_library_name).unwrap_or(0);
                found.push(LlvmLibrary { path: p, major });
            }
        }
        None => {
            for d in search_dirs().iter().chain(extra) {
                libraries_in(d, &mut found);
            }
        }
    }
    let mut seen = HashSet::new();
    found.retain(|l| seen.insert(std::fs::canonicalize(&l.path).unwrap_or(l.path.clone())));
    found.sort_by_key(|l| std::cmp::Reverse(l.major));
    found
}

/// An LLVM version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LlvmVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for LlvmVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// `major.minor.patch` from a name such as `libLLVM-14.0.6.so.1`.
fn full_version(name: &str, major: u32) -> Option<LlvmVersion> {
    let v = name.strip_prefix("libLLVM-")?.split(".so").next()?;
    let parts: Vec<u32> = v
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [m, minor, patch] if *m == major => Some(LlvmVersion {
            major,
            minor: *minor,
            patch: *patch,
        }),
        _ => None,
    }
}

/// The full version of the library at `path`: from its own (resolved) name, else from a sibling
/// `libLLVM-M.m.p.so*` name that resolves to the same file (Debian installs those as links),
/// else `major.0.0`.
fn version_from_name(path: &Path, major: u32) -> LlvmVersion {
    let real = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    for p in [path, real.as_path()] {
        if let Some(v) = full_version(&name_of(p), major) {
            return v;
        }
    }
    let dirs = [path.parent(), real.parent()];
    for dir in dirs.into_iter().flatten() {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let v = full_version(&e.file_name().to_string_lossy(), major);
            if let Some(v) =
                v.filter(|_| std::fs::canonicalize(e.path()).ok().as_ref() == Some(&real))
            {
                return v;
            }
        }
    }
    LlvmVersion {
        major,
        minor: 0,
        patch: 0,
    }
}

/// What to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// An object file (ELF).
    Object,
    /// Target assembly text.
    Assembly,
    /// The module's IR after the passes (text).
    Ir,
}

/// `LLVMRelocMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelocMode {
    Default = 0,
    Static = 1,
    Pic = 2,
}

/// What to compile for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    pub triple: String,
    /// `-mcpu` (`gfx1100`, `znver3`, empty for the generic CPU).
    pub cpu: String,
    /// `-mattr` (`+cumode,+wavefrontsize32`).
    pub features: String,
    /// The new-pass-manager pipeline to run before codegen (`default<O3>`), or none.
    pub passes: Option<String>,
    /// Codegen optimization level 0-3.
    pub codegen_level: u8,
    pub reloc: RelocMode,
}

impl CompileOptions {
    /// `triple`/`cpu`/`features` with `default<O3>` when `opt`, codegen level 3, and position
    /// independent code for CPU triples (objects are linked into shared objects or JITed).
    pub fn new(triple: &str, cpu: &str, features: &str, opt: bool) -> CompileOptions {
        let gpu = triple.starts_with("amdgcn") || triple.starts_with("nvptx");
        CompileOptions {
            triple: triple.into(),
            cpu: cpu.into(),
            features: features.into(),
            passes: opt.then(|| "default<O3>".to_string()),
            codegen_level: 3,
            reloc: if gpu {
                RelocMode::Default
            } else {
                RelocMode::Pic
            },
        }
    }
}

/// The LLVM target library that serves `triple` (the `X` in `LLVMInitializeXTarget`).
pub fn target_for_triple(triple: &str) -> Result<&'static str> {
    let arch = triple.split('-').next().unwrap_or("");
    Ok(match arch {
        "amdgcn" | "r600" => "AMDGPU",
        "x86_64" | "i386" | "i486" | "i586" | "i686" => "X86",
        "nvptx" | "nvptx64" => "NVPTX",
        "aarch64" | "arm64" => "AArch64",
        _ => bail!(
            Compile,
            "LLVM: no known LLVM target for the triple {triple:?} (arch {arch:?})"
        ),
    })
}

/// The LLVM target libraries rawgrad can compile for.
const TARGETS: [&str; 4] = ["X86", "AMDGPU", "NVPTX", "AArch64"];

/// Register every target of [`TARGETS`] the library has, once, while the library is loaded (under
/// the lock of the loaded libraries, before any other thread can compile with it: LLVM's target
/// registry is not safe to extend while another thread reads it).
fn register_targets(lib: &RawLibrary) -> Vec<(&'static str, Option<String>)> {
    TARGETS
        .iter()
        .map(|&target| {
            let mut fns = vec![];
            for part in ["TargetInfo", "Target", "TargetMC", "AsmPrinter"] {
                let name = format!("LLVMInitialize{target}{part}");
                match api::optional::<InitFn>(lib, &name) {
                    Some(f) => fns.push(f),
                    None => return (target, Some(name)),
                }
            }
            for f in fns {
                // SAFETY: target initializers take no arguments and register the target in the
                // library's registry; each runs once per library, before the library is shared.
                unsafe { f() };
            }
            (target, None)
        })
        .collect()
}

/// The registration state of the target serving `triple` among `targets` (each with its first
/// missing initializer; `None`: registered), for the library `shown`.
fn check_registered(
    targets: &[(&'static str, Option<String>)],
    triple: &str,
    shown: &str,
) -> Result<()> {
    let target = target_for_triple(triple)?;
    match targets.iter().find(|(t, _)| *t == target) {
        Some((_, None)) => Ok(()),
        Some((_, Some(missing))) => bail!(
            Compile,
            "{shown} lacks the {target} target ({missing} is missing), needed for {triple}"
        ),
        None => bail!(
            Compile,
            "LLVM: the {target} target is not one rawgrad registers"
        ),
    }
}

/// A target machine kept by one thread for later compiles with the same options: creating one
/// (and the subtarget its first use parses from the feature string) costs about a sixth of a small
/// kernel's compile. Machines are not shared between threads (LLVM does not make them safe to
/// use concurrently); each is disposed when its thread exits.
struct CachedMachine {
    llvm: Arc<Llvm>,
    key: (String, String, String, u8, RelocMode),
    raw: api::TargetMachineRef,
}

impl Drop for CachedMachine {
    fn drop(&mut self) {
        api::dispose_target_machine(&self.llvm.api, self.raw);
    }
}

thread_local! {
    static MACHINES: std::cell::RefCell<Vec<CachedMachine>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A loaded libLLVM.
pub struct Llvm {
    /// This value's own `Arc` (for the per-thread target machine cache).
    me: std::sync::Weak<Llvm>,
    /// Entry points into the library, whose handle is leaked (never unloaded).
    api: Api,
    path: PathBuf,
    version: LlvmVersion,
    /// The targets rawgrad registers, each with the first missing initializer (None: registered).
    targets: Vec<(&'static str, Option<String>)>,
    /// The instruction selector set by [`Llvm::set_isel`] (None: never set).
    isel: Mutex<Option<Isel>>,
}

/// The instruction selector of a library's code generators (`llc -fast-isel`).
/// LLVM 13-17's C API has no per-machine setting for it: it is a process-wide LLVM option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isel {
    /// LLVM's choice per codegen level: SelectionDAG at 1-3, FastISel (falling back to
    /// SelectionDAG per instruction) at 0.
    Default,
    /// `-fast-isel`: FastISel at every level. (GlobalISel is not offered: `-global-isel` crashed
    /// libLLVM 15's X86 code generator in process.)
    Fast,
}

impl Isel {
    /// The LLVM options that select it.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Isel::Default => &[],
            Isel::Fast => &["-fast-isel"],
        }
    }
}

impl fmt::Debug for Llvm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Llvm({} from {})", self.version, self.path.display())
    }
}

fn loaded() -> &'static Mutex<Vec<Arc<Llvm>>> {
    static LOADED: OnceLock<Mutex<Vec<Arc<Llvm>>>> = OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(vec![]))
}

impl Llvm {
    /// The newest libLLVM found (see [`find_libraries`]), loaded once per process.
    pub fn load() -> Result<Arc<Llvm>> {
        let libs = find_libraries();
        let Some(newest) = libs.first() else {
            bail!(
                Compile,
                "no libLLVM found (looked for libLLVM-N.so, libLLVM-N.so.1, libLLVM.so.N in {}); \
                 install libllvm15 (or newer), or set LLVM_LIB to the library",
                search_dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        Llvm::open(&newest.path)
    }

    /// The libLLVM of major version `major`.
    pub fn load_major(major: u32) -> Result<Arc<Llvm>> {
        let libs = find_libraries();
        match libs.iter().find(|l| l.major == major) {
            Some(l) => Llvm::open(&l.path),
            None => bail!(
                Compile,
                "libLLVM-{major} not found; found: [{}]",
                libs.iter()
                    .map(|l| format!("{} ({})", l.major, l.path.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The libLLVM at `path` (loaded once per process per file).
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<Llvm>> {
        let path = path.as_ref();
        let real = std::fs::canonicalize(path)
            .map_err(|e| Error::Compile(format!("libLLVM {}: {e}", path.display())))?;
        let mut cache = loaded().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cache.iter().find(|l| l.path == real) {
            return Ok(Arc::clone(l));
        }
        let parts = Llvm::dlopen(&real)?;
        let llvm = Arc::new_cyclic(|me| Llvm {
            me: me.clone(),
            ..parts
        });
        cache.push(Arc::clone(&llvm));
        Ok(llvm)
    }

    fn dlopen(path: &Path) -> Result<Llvm> {
        let shown = path.display().to_string();
        // The handle is leaked below: the library stays loaded for the life of the process, so no
        // static destructors run while rawgrad may hold LLVM pointers.
        // SAFETY: loading runs libLLVM's static initializers (option and target registries),
        // which only touch the library's own state.
        let lib = unsafe { RawLibrary::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::Compile(format!("dlopen {shown}: {e}")))?;
        let lib: &'static RawLibrary = Box::leak(Box::new(lib));
        let api = Api::resolve(lib, &shown)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let named = parse_library_name(&name).unwrap_or(0);
        let version = match api::optional::<api::GetVersionFn>(lib, "LLVMGetVersion") {
            Some(get) => {
                let (mut a, mut b, mut c) = (0, 0, 0);
                // SAFETY: LLVMGetVersion (LLVM >= 16) writes three unsigned ints to the pointers.
                unsafe { get(&mut a, &mut b, &mut c) };
                LlvmVersion {
                    major: a,
                    minor: b,
                    patch: c,
                }
            }
            None => version_from_name(path, named),
        };
        if version.major != 0 && version.major < MIN_LLVM_MAJOR {
            bail!(
                Compile,
                "{shown} is LLVM {version}; rawgrad needs LLVM >= {MIN_LLVM_MAJOR} (the new pass manager C API)"
            );
        }
        Ok(Llvm {
            me: std::sync::Weak::new(),
            api,
            path: path.to_path_buf(),
            version,
            targets: register_targets(lib),
            isel: Mutex::new(None),
        })
    }

    /// The library's version (major 0 when neither `LLVMGetVersion` nor the file name tell).
    pub fn version(&self) -> LlvmVersion {
        self.version
    }

    /// The file loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether IR for this LLVM spells pointers as `ptr` (LLVM >= 15, where opaque pointers are
    /// the default) rather than typed (`float*`).
    pub fn opaque_pointers(&self) -> bool {
        self.version.major >= 15
    }

    /// Make `isel` this library's instruction selector for every later compile, any target (an
    /// LLVM option of the whole library, parsed once: setting it again to the same is a no-op, to
    /// another is an error naming both).
    pub fn set_isel(&self, isel: Isel) -> Result<()> {
        let mut cur = self.isel.lock().unwrap_or_else(|e| e.into_inner());
        match *cur {
            Some(old) if old == isel => return Ok(()),
            Some(old) => bail!(
                InvalidArgument,
                "LLVM {}: the instruction selector is already {old:?} for this process, not {isel:?}",
                self.version
            ),
            None => {}
        }
        if isel != Isel::Default {
            api::parse_command_line(&self.api, isel.args())?;
        }
        *cur = Some(isel);
        Ok(())
    }

    /// Check that the target library serving `triple` was registered at load time.
    fn init_target(&self, triple: &str) -> Result<()> {
        let shown = format!("{} (LLVM {})", self.path.display(), self.version);
        check_registered(&self.targets, triple, &shown)
    }

    /// Whether this library can compile as `opts` say: the target serving the triple registered
    /// when the library loaded, and a target machine for the triple, CPU and features made (and
    /// kept for this thread's compiles). A device runs it when it opens, so a library without
    /// the device's target is rejected there, not at every compile.
    pub fn check_target(&self, opts: &CompileOptions) -> Result<()> {
        self.init_target(&opts.triple)?;
        self.machine(opts).map(drop)
    }

    /// The host's target triple.
    pub fn host_triple(&self) -> String {
        api::host_string(&self.api, self.api.LLVMGetDefaultTargetTriple)
    }

    /// The host CPU's name (`znver3`, `skylake-avx512`, ...).
    pub fn host_cpu(&self) -> String {
        api::host_string(&self.api, self.api.LLVMGetHostCPUName)
    }

    /// The host CPU's features (`+sse2,+avx,...`).
    pub fn host_features(&self) -> String {
        api::host_string(&self.api, self.api.LLVMGetHostCPUFeatures)
    }

    /// Compile LLVM IR text to an object file: the brief form of [`Llvm::compile`] (`opt` runs
    /// `default<O3>` first).
    pub fn compile_ir(
        &self,
        ir: &str,
        triple: &str,
        cpu: &str,
        features: &str,
        opt: bool,
    ) -> Result<Vec<u8>> {
        self.compile(
            ir,
            &CompileOptions::new(triple, cpu, features, opt),
            Emit::Object,
        )
    }

    /// Parse, verify, optimize and emit `ir` as `opts` say.
    pub fn compile(&self, ir: &str, opts: &CompileOptions, emit: Emit) -> Result<Vec<u8>> {
        self.compile_linked(&[ir], opts, emit)
    }

    /// [`Llvm::compile`] of several modules linked into the first (`LLVMLinkModules2`).
    pub fn compile_linked(
        &self,
        irs: &[&str],
        opts: &CompileOptions,
        emit: Emit,
    ) -> Result<Vec<u8>> {
        self.compile_linked_timed(irs, opts, emit, &mut StageTimes::default())
    }

    /// [`Llvm::compile_linked`], adding the seconds each stage took to `times` (for `bench llvmc`).
    pub fn compile_linked_timed(
        &self,
        irs: &[&str],
        opts: &CompileOptions,
        emit: Emit,
        times: &mut StageTimes,
    ) -> Result<Vec<u8>> {
        self.init_target(&opts.triple)?;
        let what = format!(
            "LLVM {} compiling for {} (cpu {:?}, features {:?})",
            self.version, opts.triple, opts.cpu, opts.features
        );
        let t = thread_cpu_s();
        let ctx = Context::new(&self.api)?;
        times.context += thread_cpu_s() - t;
        let out = self.compile_in(&ctx, irs, opts, emit, times);
        let t = thread_cpu_s();
        let (errors, warnings) = (ctx.diagnostics().0.to_vec(), ctx.diagnostics().1.to_vec());
        drop(ctx);
        times.context += thread_cpu_s() - t;
        if debug() >= 2 && !warnings.is_empty() {
            println!("{what}: warnings:\n  {}", warnings.join("\n  "));
        }
        if !errors.is_empty() {
            bail!(Compile, "{what}: {}", errors.join("\n"));
        }
        out.map_err(|e| Error::Compile(format!("{what}: {}", e.message())))
    }

    fn compile_in(
        &self,
        ctx: &Context<'_>,
        irs: &[&str],
        opts: &CompileOptions,
        emit: Emit,
        times: &mut StageTimes,
    ) -> Result<Vec<u8>> {
        let Some((first, rest)) = irs.split_first() else {
            bail!(Compile, "LLVM: no module to compile");
        };
        let mut t = thread_cpu_s();
        let mut lap = |slot: &mut f64| {
            let now = thread_cpu_s();
            *slot += now - t;
            t = now;
        };
        let module = Module::parse(&self.api, ctx, first)?;
        let mut linked = vec![];
        for ir in rest {
            linked.push(Module::parse(&self.api, ctx, ir)?);
        }
        lap(&mut times.parse);
        for m in linked {
            module.link(m)?;
        }
        module.verify()?;
        lap(&mut times.link_verify);
        let raw = self.machine(opts)?;
        let tm = TargetMachine::borrowed(&self.api, raw);
        tm.configure(&module, &opts.triple)?;
        lap(&mut times.machine);
        if let Some(passes) = &opts.passes {
            tm.run_passes(&module, passes)?;
        }
        lap(&mut times.passes);
        let out = match emit {
            Emit::Object => tm.emit(&module, FILE_OBJECT),
            Emit::Assembly => tm.emit(&module, FILE_ASSEMBLY),
            Emit::Ir => Ok(module.print().into_bytes()),
        };
        lap(&mut times.codegen);
        drop(module);
        lap(&mut times.context);
        out
    }

    /// This thread's target machine for `opts` (made on first use, kept until the thread exits).
    /// The raw handle stays valid while the thread lives; callers use it within one compile.
    fn machine(&self, opts: &CompileOptions) -> Result<api::TargetMachineRef> {
        let key = (
            opts.triple.clone(),
            opts.cpu.clone(),
            opts.features.clone(),
            opts.codegen_level.min(3),
            opts.reloc,
        );
        let me = self as *const Llvm;
        let hit = MACHINES.with(|m| {
            m.borrow()
                .iter()
                .find(|c| std::ptr::eq(Arc::as_ptr(&c.llvm), me) && c.key == key)
                .map(|c| c.raw)
        });
        if let Some(raw) = hit {
            return Ok(raw);
        }
        let tm = TargetMachine::new(
            &self.api,
            &opts.triple,
            &opts.cpu,
            &opts.features,
            c_int::from(key.3),
            opts.reloc as c_int,
        )?;
        // Every `Llvm` is made by `open`, inside an `Arc`.
        let Some(llvm) = self.me.upgrade() else {
            bail!(
                Compile,
                "LLVM: {} was not loaded through Llvm::open",
                self.path.display()
            );
        };
        let raw = tm.into_raw();
        MACHINES.with(|m| m.borrow_mut().push(CachedMachine { llvm, key, raw }));
        Ok(raw)
    }

    /// The ELF `EF_AMDGPU_MACH` this LLVM writes for processor `cpu` (0 when it does not know the
    /// processor: LLVM then prints a warning to stderr and compiles for no processor).
    pub fn amdgpu_mach(&self, cpu: &str) -> Result<u32> {
        const PROBE: &str = "define amdgpu_kernel void @rawgrad_probe() {\n  ret void\n}\n";
        let obj = self.compile_ir(PROBE, AMDGPU_TRIPLE, cpu, "", false)?;
        elf_e_flags(&obj).map(|f| f & 0xff)
    }

    /// Of the processor names `cpus`, those this LLVM's AMDGPU backend knows (probed by
    /// compiling a trivial kernel for each; see [`Llvm::amdgpu_mach`]).
    pub fn targets_known(&self, cpus: &[&str]) -> Result<Vec<String>> {
        let mut out = vec![];
        for &c in cpus {
            if self.amdgpu_mach(c)? != 0 {
                out.push(c.to_string());
            }
        }
        Ok(out)
    }
}

/// Seconds this thread has run on a CPU (0 where the clock fails: the stage times are for people).
fn thread_cpu_s() -> f64 {
    crate::driver::os::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).map_or(0.0, |ns| ns as f64 * 1e-9)
}

/// CPU seconds of the calling thread spent in each stage of [`Llvm::compile_linked_timed`]
/// (summed over calls).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Creating and disposing the context and module (with its diagnostics).
    pub context: f64,
    /// Parsing the IR text of every module.
    pub parse: f64,
    /// Linking the modules into the first and verifying the result.
    pub link_verify: f64,
    /// Looking up (or making) the thread's target machine, setting triple and data layout.
    pub machine: f64,
    /// The IR pass pipeline.
    pub passes: f64,
    /// Instruction selection, machine passes and object (or assembly) emission.
    pub codegen: f64,
}

/// `e_flags` of a 64-bit little-endian ELF file.
pub fn elf_e_flags(obj: &[u8]) -> Result<u32> {
    let ok = obj.len() >= 64 && obj.starts_with(b"\x7fELF") && obj[4] == 2 && obj[5] == 1;
    if !ok {
        bail!(
            Compile,
            "LLVM output is not a 64-bit little-endian ELF file ({} bytes)",
            obj.len()
        );
    }
    let mut b = [0u8; 4];
    b.copy_from_slice(&obj[48..52]);
    Ok(u32::from_le_bytes(b))
}

#[cfg(test)]
mod tests;
