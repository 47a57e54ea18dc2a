//! The `LLVM` CPU device: the CPU flavour of the LLVM IR renderer, compiled in process by libLLVM
//! (`default<O3>`, codegen for the host triple, CPU and features, position-independent object),
//! then linked into a shared object by the system C compiler driver (`cc -shared`, which also
//! brings libm and the compiler runtime the object may call, such as half conversions). The
//! shared object has the CLANG device's fixed kernel entry `NAME_rg`, so it is loaded and run by
//! the CLANG runtime ([`ClangRuntime`]: `dlopen`, outer loop split across the worker pool).
//!
//! - [`LLVMCompiler`]: IR text -> `.so` bytes; `LLVM_LINKER=<program>` forces the linker driver
//!   (default: `cc`, else `clang`).
//! - [`open_llvm`]: the device record for the registry.
//!
//! Not guaranteed: the kernel's indexing is trusted, as on CLANG; float results follow LLVM's
//! fast-math flags (tinygrad's), so they may differ from the interpreter in the last bits.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::device::allocator::{HostAllocator, LruAllocator};
use crate::device::registry::Compiled;
use crate::device::Compiler;
use crate::driver::llvm::{CompileOptions, Emit, Llvm};
use crate::driver::process::{run_with_stdin, which, TempPath};
use crate::helpers::getenv_str;
use crate::renderer::llvmir::LLVMRenderer;
use crate::runtime::cpu::clang::ClangRuntime;
use crate::{bail, Error, Result};

/// LLVM IR to a host shared object.
#[derive(Debug, Clone)]
pub struct LLVMCompiler {
    llvm: Arc<Llvm>,
    opts: CompileOptions,
    linker: PathBuf,
}

fn find_linker() -> Result<PathBuf> {
    if let Some(forced) = getenv_str("LLVM_LINKER").filter(|s| !s.trim().is_empty()) {
        return which(forced.trim()).ok_or_else(|| {
            Error::Compile(format!(
                "LLVM device: linker LLVM_LINKER={} not found",
                forced.trim()
            ))
        });
    }
    which("cc").or_else(|| which("clang")).ok_or_else(|| {
        Error::Compile(
            "LLVM device: neither cc nor clang is on PATH to link the object into a shared \
             library (set LLVM_LINKER)"
                .into(),
        )
    })
}

impl LLVMCompiler {
    /// With the newest libLLVM, for this machine's CPU.
    pub fn new() -> Result<LLVMCompiler> {
        LLVMCompiler::with_llvm(Llvm::load()?)
    }

    /// With a given libLLVM, for this machine's CPU.
    pub fn with_llvm(llvm: Arc<Llvm>) -> Result<LLVMCompiler> {
        let opts = CompileOptions::new(
            &llvm.host_triple(),
            &llvm.host_cpu(),
            &llvm.host_features(),
            true,
        );
        Ok(LLVMCompiler {
            llvm,
            opts,
            linker: find_linker()?,
        })
    }

    pub fn llvm(&self) -> &Arc<Llvm> {
        &self.llvm
    }

    /// The renderer whose IR this compiler takes.
    pub fn renderer(&self) -> LLVMRenderer {
        LLVMRenderer::cpu_for(&self.llvm)
    }

    /// The host assembly of `src` (for DEBUG output and tests).
    pub fn assembly(&self, src: &str) -> Result<String> {
        let asm = self.llvm.compile(src, &self.opts, Emit::Assembly)?;
        Ok(String::from_utf8_lossy(&asm).into_owned())
    }

    /// Link object bytes into a shared object.
    fn link(&self, obj: &[u8]) -> Result<Vec<u8>> {
        let (o, so) = (TempPath::new("llvm", ".o"), TempPath::new("llvm", ".so"));
        std::fs::write(o.path(), obj)
            .map_err(|e| Error::Io(format!("writing the object {}: {e}", o.path().display())))?;
        let args: Vec<&OsStr> = vec![
            OsStr::new("-shared"),
            OsStr::new("-o"),
            so.path().as_os_str(),
            o.path().as_os_str(),
            OsStr::new("-lm"),
        ];
        let res = run_with_stdin(&self.linker, &args, b"")?;
        if !res.success {
            bail!(
                Compile,
                "LLVM device: linking with {} failed ({}):\n{}",
                self.linker.display(),
                res.status,
                String::from_utf8_lossy(&res.stderr).trim_end()
            );
        }
        std::fs::read(so.path()).map_err(|e| {
            Error::Compile(format!(
                "reading the shared object {} written by {}: {e}",
                so.path().display(),
                self.linker.display()
            ))
        })
    }
}

impl Compiler for LLVMCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(format!(
            "compile_llvm_{}_{}_{}_{}_O3",
            self.llvm.version(),
            self.opts.triple,
            self.opts.cpu,
            self.opts.features
        ))
    }

    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let obj = self.llvm.compile(src, &self.opts, Emit::Object)?;
        self.link(&obj)
    }
}

/// The `LLVM` device record: LRU-cached host memory, [`LLVMCompiler`], the CLANG runtime and the
/// CPU LLVM IR renderer. For the engine: `register_family("LLVM", open_llvm)`.
pub fn open_llvm(name: &str) -> Result<Compiled> {
    let compiler = LLVMCompiler::new()?;
    let renderer = Arc::new(compiler.renderer());
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HostAllocator)),
        compiler: Arc::new(compiler),
        runtime: Arc::new(ClangRuntime),
        renderer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Allocator, BufferOptions, Runtime};
    use crate::helpers::Context;

    /// `out[0] = in[0] + exp2(vals[0])` with the `_rg` entry ABI, opaque pointers (LLVM >= 15).
    const ADD_IR: &str = r#"
define void @add_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) {
entry:
  %p0 = load ptr, ptr %bufs
  %q = getelementptr ptr, ptr %bufs, i64 1
  %p1 = load ptr, ptr %q
  %n = load i32, ptr %vals
  %x = load float, ptr %p1
  %y = sitofp i32 %n to float
  %z = call float @llvm.exp2.f32(float %y)
  %s = fadd float %x, %z
  store float %s, ptr %p0
  ret void
}
declare float @llvm.exp2.f32(float)
"#;

    /// The same with typed pointers (LLVM 14).
    const ADD_IR_TYPED: &str = r#"
define void @add_rg(float** %bufs, i32* %vals, i32 %core, i32 %ncores) {
entry:
  %p0 = load float*, float** %bufs
  %q = getelementptr float*, float** %bufs, i64 1
  %p1 = load float*, float** %q
  %n = load i32, i32* %vals
  %x = load float, float* %p1
  %y = sitofp i32 %n to float
  %z = call float @llvm.exp2.f32(float %y)
  %s = fadd float %x, %z
  store float %s, float* %p0
  ret void
}
declare float @llvm.exp2.f32(float)
"#;

    #[test]
    fn compiles_links_and_runs_through_the_clang_runtime() {
        let c = match LLVMCompiler::new() {
            Ok(c) => c,
            Err(e) => return println!("skipped: {e}"),
        };
        let ir = if c.llvm().opaque_pointers() {
            ADD_IR
        } else {
            ADD_IR_TYPED
        };
        assert!(c.cache_key().unwrap().contains(&c.llvm().host_cpu()));
        let lib = c.compile(ir).unwrap_or_else(|e| panic!("{e}\n{ir}"));
        assert!(lib.starts_with(b"\x7fELF"));
        let prg = ClangRuntime.load("add", &lib).unwrap();
        let h = HostAllocator;
        let o = BufferOptions::default();
        let (out, inp) = (h.alloc(4, &o).unwrap(), h.alloc(4, &o).unwrap());
        h.copyin(&inp, &1.5f32.to_le_bytes()).unwrap();
        let _g = Context::new(&[("CLANG_THREADS", 1)]);
        prg.call(&[out.clone(), inp], &[3], None, None, false)
            .unwrap();
        let mut b = [0u8; 4];
        h.copyout(&mut b, &out).unwrap();
        assert_eq!(f32::from_le_bytes(b), 9.5, "exp2 from libm, linked by cc");
    }

    #[test]
    fn missing_linker_is_named() {
        let _g = Context::with_str(&[("LLVM_LINKER", "rawgrad-no-such-linker")]);
        let e = find_linker().unwrap_err();
        assert!(e.message().contains("rawgrad-no-such-linker"), "{e}");
    }
}
