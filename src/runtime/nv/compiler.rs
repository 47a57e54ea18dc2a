//! The NV compiler (used by the `NV` device and the `CUDA` fallback): kernel source to a cubin
//! for one `sm_XX`, through whichever NVIDIA tool this machine has (tinygrad `compiler_cuda.py`).
//! No libcuda.
//!
//! Paths ([`NvCompilerKind`]):
//! - `nvrtc`: CUDA C from the [`CUDARenderer`] -> NVRTC (`--gpu-architecture=sm_XX`,
//!   `--fmad=false`, plus `--minimal` on NVRTC >= 12.4 as tinygrad does) -> cubin.
//! - `ptxas`: LLVM IR from the NVPTX flavour of the [`LLVMRenderer`] -> libLLVM's NVPTX target
//!   (PTX text) -> `ptxas -arch=sm_XX --fmad=false` (a child process) -> cubin.
//!
//! Beyond tinygrad (which lets NVRTC contract): no multiply-add contraction on NVRTC and ptxas,
//! so NV rounds as INTERP does. Not guaranteed on the nvJitLink path, nor for fused multiply-adds
//! LLVM's NVPTX back end writes into the PTX itself.
//! - `nvjitlink`: the same PTX -> libnvJitLink (`-arch=sm_XX`) -> cubin.
//!
//! The default is the first that is available in that order; `NV_COMPILER=nvrtc|ptxas|nvjitlink`
//! forces one and `PTX=1` (tinygrad's knob) forces a PTX path (ptxas, else nvJitLink). Every
//! tool is found at run time ([`super::toolchain`]); an unavailable path says what was missing and
//! how to get it. The PTX paths also take PTX text directly (a source with a `.version` line).
//!
//! LLVM's NVPTX target knows only the SMs of its release (LLVM 14/15: up to sm_86, PTX 7.5);
//! PTX is forward compatible, so the PTX is written for the newest SM the loaded LLVM knows that
//! is not newer than the device's ([`nvptx_target`]) and the assembler compiles it for the
//! device's own SM.
//!
//! The cache key names the path, the tool's version, the SM (and, for PTX, the LLVM version and
//! the PTX target), so a toolchain change recompiles.
//!
//! Not guaranteed: that NVRTC, ptxas or nvJitLink accept an SM newer than their release knows
//! (they say so, and the error carries their message).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::device::Compiler;
use crate::driver::process::{run_with_stdin, TempPath};
use crate::ffi::llvm::Llvm;
use crate::ffi::nvjitlink::NvJitLink;
use crate::ffi::nvrtc::{Nvrtc, NvrtcOutput};
use crate::helpers::{getenv, getenv_str};
use crate::renderer::cuda::CUDARenderer;
use crate::renderer::llvmir::nvptx::ir_to_ptx;
pub use crate::renderer::llvmir::nvptx::{is_ptx, nvptx_target, NvptxTarget, NVPTX_TRIPLE};
use crate::renderer::llvmir::LLVMRenderer;
use crate::renderer::Renderer;
use crate::{bail, Error, Result};

use super::toolchain::{find_tool, NvTool};

/// A compile path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvCompilerKind {
    Nvrtc,
    Ptxas,
    NvJitLink,
}

impl NvCompilerKind {
    /// The knob spelling (`nvrtc`, `ptxas`, `nvjitlink`).
    pub fn name(self) -> &'static str {
        match self {
            NvCompilerKind::Nvrtc => "nvrtc",
            NvCompilerKind::Ptxas => "ptxas",
            NvCompilerKind::NvJitLink => "nvjitlink",
        }
    }

    /// The path named `s` (any case).
    pub fn from_name(s: &str) -> Option<NvCompilerKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nvrtc" => Some(NvCompilerKind::Nvrtc),
            "ptxas" => Some(NvCompilerKind::Ptxas),
            "nvjitlink" => Some(NvCompilerKind::NvJitLink),
            _ => None,
        }
    }

    /// Whether the path takes LLVM IR (or PTX) rather than CUDA C.
    pub fn is_ptx(self) -> bool {
        self != NvCompilerKind::Nvrtc
    }

    /// The paths to try, in order, as the knobs say (`NV_COMPILER`, `PTX`).
    pub fn preferred() -> Result<Vec<NvCompilerKind>> {
        if let Some(k) = getenv_str("NV_COMPILER").filter(|s| !s.trim().is_empty()) {
            return match NvCompilerKind::from_name(&k) {
                Some(kind) => Ok(vec![kind]),
                None => bail!(
                    Compile,
                    "NV_COMPILER={k}: not a compile path (nvrtc, ptxas or nvjitlink)"
                ),
            };
        }
        if getenv("PTX", 0) != 0 {
            return Ok(vec![NvCompilerKind::Ptxas, NvCompilerKind::NvJitLink]);
        }
        Ok(vec![
            NvCompilerKind::Nvrtc,
            NvCompilerKind::Ptxas,
            NvCompilerKind::NvJitLink,
        ])
    }
}

/// How PTX becomes a cubin.
enum Assembler {
    Ptxas { path: PathBuf, version: String },
    NvJitLink(Arc<NvJitLink>),
}

enum Backend {
    Nvrtc {
        nvrtc: Arc<Nvrtc>,
        options: Vec<String>,
    },
    Ptx {
        llvm: Arc<Llvm>,
        target: NvptxTarget,
        asm: Assembler,
    },
}

/// The NV compiler for one SM and one compile path.
pub struct NVCompiler {
    device: String,
    sm: u32,
    kind: NvCompilerKind,
    backend: Backend,
    key: String,
}

impl std::fmt::Debug for NVCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NVCompiler({})", self.key)
    }
}

/// The version `ptxas --version` reports (`Cuda compilation tools, release 13.5, V13.5.37` ->
/// `V13.5.37`).
fn ptxas_version(path: &Path) -> Result<String> {
    let out = run_with_stdin(path, &[OsStr::new("--version")], b"")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.success {
        bail!(
            Compile,
            "{} --version failed ({}): {}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(parse_ptxas_version(&text))
}

/// The `Vx.y.z` of `ptxas --version`'s output (its release line), else its last line.
pub fn parse_ptxas_version(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains("release"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("");
    line.rsplit(", ")
        .next()
        .unwrap_or(line)
        .trim()
        .replace(' ', "_")
}

fn load_llvm(kind: NvCompilerKind) -> Result<Arc<Llvm>> {
    Llvm::load().map_err(|e| {
        Error::Compile(format!(
            "NV_COMPILER={}: PTX is written by libLLVM's NVPTX target: {} (install libllvm15 or newer)",
            kind.name(),
            e.message()
        ))
    })
}

impl NVCompiler {
    /// The compiler for `sm_XX` on device family `device` (`NV`, `CUDA`), on the first available
    /// path of [`NvCompilerKind::preferred`].
    pub fn new(device: &str, sm: u32) -> Result<NVCompiler> {
        let mut why = vec![];
        for kind in NvCompilerKind::preferred()? {
            match NVCompiler::with_kind(device, sm, kind) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(format!("{}: {}", kind.name(), e.message())),
            }
        }
        bail!(
            Compile,
            "{device} sm_{sm}: no NVIDIA compiler is available:\n  {}",
            why.join("\n  ")
        )
    }

    /// The compiler for `sm_XX` on path `kind` (an error says what is missing).
    pub fn with_kind(device: &str, sm: u32, kind: NvCompilerKind) -> Result<NVCompiler> {
        let (backend, tool) = match kind {
            NvCompilerKind::Nvrtc => {
                let nvrtc = Nvrtc::open(&find_tool(NvTool::Nvrtc)?)?;
                let mut options = vec![format!("--gpu-architecture=sm_{sm}"), FMAD_OFF.into()];
                if nvrtc.version() >= (12, 4) {
                    options.push("--minimal".into());
                }
                let (a, b) = nvrtc.version();
                (Backend::Nvrtc { nvrtc, options }, format!("{a}.{b}"))
            }
            NvCompilerKind::Ptxas | NvCompilerKind::NvJitLink => {
                let asm = if kind == NvCompilerKind::Ptxas {
                    let path = find_tool(NvTool::Ptxas)?;
                    let version = ptxas_version(&path)?;
                    Assembler::Ptxas { path, version }
                } else {
                    Assembler::NvJitLink(NvJitLink::open(&find_tool(NvTool::NvJitLink)?)?)
                };
                let llvm = load_llvm(kind)?;
                let target = nvptx_target(&llvm, sm)?;
                let tool = match &asm {
                    Assembler::Ptxas { version, .. } => version.clone(),
                    Assembler::NvJitLink(l) => format!("{}.{}", l.version().0, l.version().1),
                };
                let tool = format!(
                    "{tool}_llvm{}_{}{}",
                    llvm.version(),
                    target.cpu,
                    target.features
                );
                (Backend::Ptx { llvm, target, asm }, tool)
            }
        };
        Ok(NVCompiler {
            device: device.into(),
            sm,
            kind,
            backend,
            key: format!("compile_nv_{}_nofmad_{tool}_sm_{sm}", kind.name()),
        })
    }

    pub fn kind(&self) -> NvCompilerKind {
        self.kind
    }

    pub fn sm(&self) -> u32 {
        self.sm
    }

    /// `sm_XX`.
    pub fn arch(&self) -> String {
        format!("sm_{}", self.sm)
    }

    /// The renderer whose output this compiler takes: CUDA C for NVRTC, NVPTX LLVM IR (with the
    /// pointer syntax of the loaded libLLVM) for the PTX paths.
    pub fn renderer(&self) -> Arc<dyn Renderer> {
        match &self.backend {
            Backend::Nvrtc { .. } if self.device == "CUDA" => Arc::new(CUDARenderer::new(self.sm)),
            Backend::Nvrtc { .. } => Arc::new(CUDARenderer::nv(self.sm)),
            Backend::Ptx { llvm, .. } => Arc::new(LLVMRenderer::nvptx(
                &self.device,
                self.sm,
                llvm.opaque_pointers(),
            )),
        }
    }

    /// The PTX LLVM writes from `ir` (PTX paths), or NVRTC's PTX for CUDA C.
    pub fn to_ptx(&self, src: &str) -> Result<String> {
        let ptx = match &self.backend {
            Backend::Nvrtc { nvrtc, options } => {
                nvrtc.compile(src, "rawgrad.cu", options, NvrtcOutput::Ptx)?
            }
            Backend::Ptx { llvm, target, .. } => return ir_to_ptx(llvm, target, src),
        };
        String::from_utf8(ptx).map_err(|_| Error::Compile("PTX text is not UTF-8".into()))
    }

    /// Assemble PTX text into a cubin for this SM (PTX paths only).
    pub fn assemble(&self, ptx: &str) -> Result<Vec<u8>> {
        let arch = self.arch();
        match &self.backend {
            Backend::Nvrtc { .. } => bail!(
                Compile,
                "the nvrtc path compiles CUDA C, not PTX (use NV_COMPILER=ptxas or nvjitlink)"
            ),
            Backend::Ptx {
                asm: Assembler::NvJitLink(l),
                ..
            } => l.link_ptx(ptx.as_bytes(), &arch),
            Backend::Ptx {
                asm: Assembler::Ptxas { path, version },
                ..
            } => run_ptxas(path, version, ptx, &arch),
        }
    }
}

/// The option that keeps NVRTC and ptxas from contracting a multiply and an add into one fused
/// multiply-add (both default to contracting): a fused result rounds once where INTERP and the
/// CPU devices round twice, so `x*1.5+k` differed in the last bit on an H200 (2026-12-04).
const FMAD_OFF: &str = "--fmad=false";

/// `ptxas -arch=<arch> --fmad=false -o <tmp>.cubin <tmp>.ptx`.
fn run_ptxas(path: &Path, version: &str, ptx: &str, arch: &str) -> Result<Vec<u8>> {
    let input = TempPath::new("nv", ".ptx");
    let output = TempPath::new("nv", ".cubin");
    std::fs::write(input.path(), ptx)
        .map_err(|e| Error::Io(format!("writing {}: {e}", input.path().display())))?;
    let arch_flag = format!("-arch={arch}");
    let args = [
        OsStr::new(&arch_flag),
        OsStr::new(FMAD_OFF),
        OsStr::new("-o"),
        output.path().as_os_str(),
        input.path().as_os_str(),
    ];
    let out = run_with_stdin(path, &args, b"")?;
    if !out.success {
        let head: Vec<&str> = ptx.lines().take(12).collect();
        bail!(
            Compile,
            "ptxas {version} ({}) {arch_flag} failed ({}):\n{}\nPTX begins:\n{}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            head.join("\n")
        );
    }
    std::fs::read(output.path()).map_err(|e| {
        Error::Io(format!(
            "reading ptxas output {}: {e}",
            output.path().display()
        ))
    })
}

impl Compiler for NVCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(self.key.clone())
    }

    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        match &self.backend {
            Backend::Nvrtc { nvrtc, options } => {
                nvrtc.compile(src, "rawgrad.cu", options, NvrtcOutput::Cubin)
            }
            Backend::Ptx { .. } => {
                let ptx = self.to_ptx(src)?;
                self.assemble(&ptx)
            }
        }
    }
}

/// The compiler slot of a real NV device whose NVIDIA compiler could not be set up: every compile
/// reports why.
pub struct UnavailableNvCompiler {
    sm: u32,
    reason: String,
}

impl UnavailableNvCompiler {
    pub fn new(sm: u32, reason: String) -> UnavailableNvCompiler {
        UnavailableNvCompiler { sm, reason }
    }
}

impl Compiler for UnavailableNvCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, _src: &str) -> Result<Vec<u8>> {
        bail!(
            Compile,
            "NV compiler for sm_{} is unavailable: {} (set MOCKGPU=1 to run kernels on the emulator)",
            self.sm,
            self.reason
        )
    }
}

#[cfg(test)]
mod tests;
