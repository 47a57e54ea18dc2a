//! The AMD renderer and compilers as the registry uses them until the LLVM amdgcn path lands.
//!
//! - [`MockAmdRenderer`]: renders a kernel as a first line `//! rawgrad-amd-mock <name>` (the
//!   compiler only sees the source, and the code object must carry the name) followed by
//!   `uop_serial::serialize(uops)`; GPU-like options (locals, shared memory, local_max 1024^3,
//!   shared_max 65536, global_max (2^31-1, 65535, 65535), no float4 for now).
//! - [`MockAmdCompiler`]: that source to a mock code object for one gfx target (`object.rs`).
//! - [`UnavailableAmdCompiler`]: what a real device uses when its libLLVM compiler cannot be set up
//!   wired in: every compile fails with `Error::Compile` saying so.
//!
//! Not guaranteed: the mock compiler checks that the UOps deserialize, not that they verify.

use super::object::mock_code_object;
use crate::codegen::uop_serial::serialize;
use crate::codegen::uops::UOp;
use crate::device::Compiler;
use crate::helpers::getenv_str;
use crate::hw::amd::targets::GfxTarget;
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, Result};

/// First-line prefix of a mock kernel's source.
pub const MOCK_SOURCE_PREFIX: &str = "//! rawgrad-amd-mock ";

/// UOps to the mock source.
pub struct MockAmdRenderer {
    opts: RendererOpts,
}

impl Default for MockAmdRenderer {
    fn default() -> Self {
        MockAmdRenderer::new()
    }
}

impl MockAmdRenderer {
    pub fn new() -> MockAmdRenderer {
        MockAmdRenderer {
            opts: RendererOpts {
                device: "AMD".into(),
                suffix: "AMD".into(),
                supports_float4: false,
                has_local: true,
                has_shared: true,
                global_max: Some([(1 << 31) - 1, 65535, 65535]),
                local_max: Some([1024, 1024, 1024]),
                shared_max: 65536,
                tensor_cores: vec![],
            },
        }
    }

    /// The renderer of an emulated `target`: as [`MockAmdRenderer::new`] plus what the target's
    /// real (LLVM amdgcn) renderer offers to the optimizer: float4 grouping and the target's
    /// tensor cores (WMMA on gfx11), so the emulator runs the kernels the real device would get.
    pub fn for_target(target: &GfxTarget) -> MockAmdRenderer {
        let mut r = MockAmdRenderer::new();
        r.opts.supports_float4 = true;
        r.opts.tensor_cores = crate::renderer::tensor_cores::amd(target.name);
        r
    }
}

impl Renderer for MockAmdRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }
    fn render(&self, name: &str, uops: &[UOp]) -> Result<String> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            bail!(
                Codegen,
                "AMD mock renderer: kernel name {name:?} is not a symbol"
            );
        }
        Ok(format!("{MOCK_SOURCE_PREFIX}{name}\n{}", serialize(uops)?))
    }
}

/// Split a mock source into (kernel name, serialized UOps).
pub fn split_mock_source(src: &str) -> Result<(&str, &str)> {
    let Some((first, rest)) = src.split_once('\n') else {
        bail!(Compile, "AMD mock compiler: source has no kernel-name line");
    };
    match first.strip_prefix(MOCK_SOURCE_PREFIX) {
        Some(name) if !name.is_empty() => Ok((name, rest)),
        _ => bail!(
            Compile,
            "AMD mock compiler: the first line must be `{MOCK_SOURCE_PREFIX}<name>`, got {first:?}"
        ),
    }
}

/// Mock source to a mock code object for one target.
pub struct MockAmdCompiler {
    target: &'static GfxTarget,
}

impl MockAmdCompiler {
    pub fn new(target: &'static GfxTarget) -> MockAmdCompiler {
        MockAmdCompiler { target }
    }
}

impl Compiler for MockAmdCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(format!("compile_amd_mock_{}", self.target.name))
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let (name, uops) = split_mock_source(src)?;
        mock_code_object(self.target, name, uops, None)
            .map_err(|e| crate::Error::Compile(format!("AMD mock compiler: {}", e.message())))
    }
}

/// The compiler slot of a real device whose amdgcn compiler could not be set up (no libLLVM, or
/// one too old for the target): every compile reports why.
pub struct UnavailableAmdCompiler {
    target: &'static GfxTarget,
    reason: String,
}

impl UnavailableAmdCompiler {
    pub fn new(target: &'static GfxTarget, reason: String) -> UnavailableAmdCompiler {
        UnavailableAmdCompiler { target, reason }
    }
}

impl Compiler for UnavailableAmdCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, _src: &str) -> Result<Vec<u8>> {
        bail!(
            Compile,
            "AMD compiler for {} is unavailable: {} (set MOCKGPU=1 to run kernels on the emulator)",
            self.target.name,
            self.reason
        )
    }
}

/// The code the emulated AMD device's compiler produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmdMockCode {
    /// Serialized UOps in a mock code object (the UOp interpreter runs them).
    Uops,
    /// The hardware path's gfx code object from libLLVM (the RDNA3 interpreter runs it).
    Isa,
}

/// `MOCKGPU_CODE` as the emulated AMD device reads it: `isa` or `real` for the real machine code,
/// `uops` (the default: CI's libLLVM 14 has no gfx11 target) for the mock code object; `ptx`
/// names the NV interpreter and leaves AMD on its default.
pub fn amd_mock_code() -> Result<AmdMockCode> {
    match getenv_str("MOCKGPU_CODE").unwrap_or_default().trim() {
        "" | "uops" | "ptx" => Ok(AmdMockCode::Uops),
        "isa" | "real" => Ok(AmdMockCode::Isa),
        v => bail!(
            InvalidArgument,
            "MOCKGPU_CODE={v:?}: the emulated AMD GPU runs `uops` or `isa` (`real`)"
        ),
    }
}
