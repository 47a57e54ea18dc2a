//! The AMD compiler without comgr (as tinygrad's later `AMDLLVMCompiler`): LLVM IR from the AMDGPU
//! flavour of the LLVM IR renderer -> libLLVM in process (parse, verify, `default<O3>`, codegen for
//! `amdgcn-amd-amdhsa` and the target's processor) -> the relocatable (ET_REL) code object.
//!
//! The IR optimizer is not optional: it runs the AMDGPU attributor, without which newer LLVMs
//! enable dispatch pointers and hidden kernel arguments (observed, LLVM 19). No linker runs: the
//! loader applies the one `R_AMDGPU_REL64` relocation of the kernel descriptor's code offset.
//!
//! Features: `+cumode,+wavefrontsize32` on gfx10+ (tinygrad compiles with `-mcumode`, and its
//! launcher requires wave32 there); gfx9 keeps its only wave size, 64.
//!
//! Which libLLVM ([`AMDCompiler::new`], [`pick_llvm`]): the one `LLVM_LIB` names; else the
//! newest found that knows the processor (major >= the target table's `min_llvm`): the default
//! one (the newest, which the CPU LLVM device loads too) when it does, else one of the usual
//! places or of [`ci_llvm_dir`], where `.ci/run` unpacks Debian's libllvm15 without root (CI's
//! default LLVM 14 has no gfx11). Both libraries then live in one process (see `ffi::llvm`).
//!
//! Not guaranteed: a processor the loaded libLLVM does not know is refused before compiling when
//! the target table says so (`min_llvm`), and after compiling when the object's `EF_AMDGPU_MACH`
//! is not the table's (LLVM silently compiles for no processor otherwise).

use std::path::PathBuf;
use std::sync::Arc;

use crate::device::Compiler;
use crate::ffi::llvm::{
    elf_e_flags, find_libraries_also_in, llvm_lib_forced, search_dirs, CompileOptions, Emit, Llvm,
    LlvmLibrary, AMDGPU_TRIPLE,
};
use crate::hw::amd::targets::GfxTarget;
use crate::renderer::llvmir::LLVMRenderer;
use crate::{bail, Result};

/// LLVM IR to an AMD GPU code object, for one target.
#[derive(Debug, Clone)]
pub struct AMDCompiler {
    pub target: &'static GfxTarget,
    llvm: Arc<Llvm>,
    features: String,
}

/// The target features rawgrad compiles `target` with.
pub fn target_features(target: &GfxTarget) -> String {
    if target.generation >= 10 {
        "+cumode,+wavefrontsize32".into()
    } else {
        String::new()
    }
}

impl AMDCompiler {
    /// The compiler for `target` with the libLLVM [`pick_llvm`] chooses of those on this machine
    /// (the usual places and [`ci_llvm_dir`], or `LLVM_LIB`).
    pub fn new(target: &'static GfxTarget) -> Result<AMDCompiler> {
        let forced = llvm_lib_forced();
        let libs = find_libraries_also_in(&[ci_llvm_dir()]);
        let lib = pick_llvm(target, &libs, forced.as_deref())?;
        let llvm = Llvm::open(&lib.path)
            .map_err(|e| crate::Error::Compile(format!("AMD {}: {}", target.name, e.message())))?;
        AMDCompiler::with_llvm(target, llvm)
    }

    /// The compiler for `target` with a given libLLVM (refused when it is older than the
    /// target table's `min_llvm` for this processor).
    pub fn with_llvm(target: &'static GfxTarget, llvm: Arc<Llvm>) -> Result<AMDCompiler> {
        let v = llvm.version();
        if v.major != 0 && v.major < target.min_llvm {
            bail!(
                Compile,
                "AMD {}: libLLVM {} ({}) is too old, its AMDGPU backend knows {} from LLVM {} on; \
                 install llvm-{} (or llvm-19) and point LLVM_LIB at it if it is not found",
                target.name,
                v,
                llvm.path().display(),
                target.name,
                target.min_llvm,
                target.min_llvm.max(15)
            );
        }
        Ok(AMDCompiler {
            target,
            llvm,
            features: target_features(target),
        })
    }

    /// The libLLVM in use.
    pub fn llvm(&self) -> &Arc<Llvm> {
        &self.llvm
    }

    /// The renderer whose IR this compiler takes (pointer syntax of its libLLVM).
    pub fn renderer(&self) -> LLVMRenderer {
        LLVMRenderer::amdgpu_for(&self.llvm, self.target)
    }

    /// The compile options (triple, processor, features, `default<O3>`).
    pub fn options(&self) -> CompileOptions {
        CompileOptions::new(AMDGPU_TRIPLE, self.target.name, &self.features, true)
    }

    /// The GCN assembly of `src` (for DEBUG output and tests).
    pub fn disassemble(&self, src: &str) -> Result<String> {
        let asm = self.llvm.compile(src, &self.options(), Emit::Assembly)?;
        Ok(String::from_utf8_lossy(&asm).into_owned())
    }
}

impl Compiler for AMDCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(format!(
            "compile_amd_llvm_{}_{}_{}_O3",
            self.llvm.version(),
            self.target.name,
            self.features
        ))
    }

    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let obj = self.llvm.compile(src, &self.options(), Emit::Object)?;
        check_mach(&obj, self.target, &self.llvm)?;
        Ok(obj)
    }
}

/// Where `.ci/run` unpacks Debian's libllvm15 without root (`apt-get download`, `dpkg-deb -x`):
/// `$TMPDIR/rawgrad-llvm15/root/usr/lib/<arch>-linux-gnu` (`/tmp` without `TMPDIR`).
pub fn ci_llvm_dir() -> PathBuf {
    let arch = format!("{}-linux-gnu", std::env::consts::ARCH);
    std::env::temp_dir()
        .join("rawgrad-llvm15/root/usr/lib")
        .join(arch)
}

/// The libLLVM for `target` of the libraries found (`libs`, newest first; with `LLVM_LIB` set,
/// `forced`, those it names): the first whose major version is at least the target's `min_llvm`
/// (a name without a version, only possible under `LLVM_LIB`, is tried and its loaded version
/// checked by [`AMDCompiler::with_llvm`]). None: an error naming the library needed, the ones
/// found and where it looked.
pub fn pick_llvm<'a>(
    target: &GfxTarget,
    libs: &'a [LlvmLibrary],
    forced: Option<&str>,
) -> Result<&'a LlvmLibrary> {
    if let Some(l) = libs
        .iter()
        .find(|l| l.major == 0 || l.major >= target.min_llvm)
    {
        return Ok(l);
    }
    let found = libs
        .iter()
        .map(|l| format!("libLLVM {} ({})", l.major, l.path.display()))
        .collect::<Vec<_>>();
    let found = if found.is_empty() {
        "none".to_string()
    } else {
        found.join(", ")
    };
    let min = target.min_llvm;
    let looked = match forced {
        Some(f) => format!("LLVM_LIB={f:?}"),
        None => search_dirs()
            .iter()
            .chain([&ci_llvm_dir()])
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    bail!(
        Compile,
        "AMD {}: no libLLVM {min} or newer (libLLVM-{min}.so.1; LLVM's AMDGPU backend knows {} \
         from LLVM {min} on); found: {found}; looked in {looked}; install libllvm{} (or newer) \
         or point LLVM_LIB at one",
        target.name,
        target.name,
        min.max(15)
    )
}

/// Refuse a code object whose `EF_AMDGPU_MACH` is not `target`'s (0: LLVM did not know the
/// processor and compiled for none).
pub fn check_mach(obj: &[u8], target: &GfxTarget, llvm: &Llvm) -> Result<()> {
    let mach = elf_e_flags(obj)? & 0xff;
    if mach == target.elf_mach {
        return Ok(());
    }
    let v = llvm.version();
    if mach == 0 {
        bail!(
            Compile,
            "AMD {}: libLLVM {} ({}) does not know {}; install llvm-{} or newer (llvm-19 knows \
             every target in the table) and point LLVM_LIB at it",
            target.name,
            v,
            llvm.path().display(),
            target.name,
            target.min_llvm.max(v.major + 1)
        );
    }
    bail!(
        Compile,
        "AMD {}: libLLVM {} wrote EF_AMDGPU_MACH {mach:#x}, the target table says {:#x}",
        target.name,
        v,
        target.elf_mach
    )
}

#[cfg(test)]
mod tests;
