//! The AMD renderer and compilers as the registry uses them until the LLVM amdgcn path lands.
//!
//! - [`MockAmdRenderer`]: renders a kernel as a first line `//! rawgrad-amd-mock <name>` (the
//!   compiler only sees the source, and the code object must carry the name) followed by
//!   `uop_serial::serialize(uops)`; GPU-like options (locals, shared memory, local_max 1024^3,
//!   shared_max 65536, global_max (2^31-1, 65535, 65535), no float4 for now).
//! - [`MockAmdCompiler`]: that source to a mock code object for one gfx target (`object.rs`).
//! - [`UnavailableAmdCompiler`]: what a device uses when its libLLVM compiler cannot be set up:
//!   every compile fails with `Error::Compile` saying so.
//! - [`amd_mock_code`]: which of the two an emulated device gets (`MOCKGPU_CODE`; the real code
//!   by default on gfx11, and an error, never the UOps, when no libLLVM can compile it).
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
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
        }
    }

    /// The renderer of an emulated `target`: as [`MockAmdRenderer::new`] plus what the target's
    /// real (LLVM amdgcn) renderer offers to the optimizer: float4 grouping and the target's
    /// tensor cores (WMMA on gfx11 and gfx12), so the emulator runs the kernels the real device
    /// would get.
    pub fn for_target(target: &GfxTarget) -> MockAmdRenderer {
        let mut r = MockAmdRenderer::new();
        r.opts.supports_float4 = true;
        r.opts.tensor_cores = crate::renderer::tensor_cores::amd_target(target);
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

/// The compiler slot of a device whose amdgcn compiler could not be set up (no libLLVM, or one
/// too old for the target; on the emulator also a bad `MOCKGPU_CODE`): every compile reports why.
pub struct UnavailableAmdCompiler {
    target: &'static GfxTarget,
    reason: String,
    /// The way out the message offers.
    hint: &'static str,
}

impl UnavailableAmdCompiler {
    /// The slot of a real device (the message points at the emulator).
    pub fn new(target: &'static GfxTarget, reason: String) -> UnavailableAmdCompiler {
        UnavailableAmdCompiler {
            target,
            reason,
            hint: " (set MOCKGPU=1 to run kernels on the emulator)",
        }
    }

    /// The slot of an emulated device; `reason` already says what to do.
    pub fn on_emulator(target: &'static GfxTarget, reason: String) -> UnavailableAmdCompiler {
        UnavailableAmdCompiler {
            target,
            reason,
            hint: "",
        }
    }
}

impl Compiler for UnavailableAmdCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, _src: &str) -> Result<Vec<u8>> {
        bail!(
            Compile,
            "AMD compiler for {} is unavailable: {}{}",
            self.target.name,
            self.reason,
            self.hint
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

/// `MOCKGPU_CODE` as the emulated AMD device of `target` reads it (see [`parse_amd_mock_code`]).
pub fn amd_mock_code(target: &GfxTarget) -> Result<AmdMockCode> {
    parse_amd_mock_code(getenv_str("MOCKGPU_CODE").as_deref(), target)
}

/// The code of an emulated `target` for a `MOCKGPU_CODE` value: unset, empty, `ptx` (which names
/// the NV interpreter) or `isa`/`real`: the real machine code when the RDNA3 interpreter runs
/// the target (gfx11: the default, whatever is installed; without a libLLVM that knows it the
/// compiler fails, see [`isa_unavailable`]); `uops`: the mock code object. Other targets
/// (gfx1030) run UOps only: `isa` names an error there, the default is `uops`.
pub fn parse_amd_mock_code(value: Option<&str>, target: &GfxTarget) -> Result<AmdMockCode> {
    let v = value.unwrap_or_default().trim();
    let isa = target.generation == 11;
    match v {
        "uops" => Ok(AmdMockCode::Uops),
        "" | "ptx" if !isa => Ok(AmdMockCode::Uops),
        "" | "ptx" | "isa" | "real" if isa => Ok(AmdMockCode::Isa),
        "isa" | "real" => bail!(
            InvalidArgument,
            "MOCKGPU_CODE={v:?}: the emulated {} runs UOps only (the RDNA3 interpreter runs gfx11); \
             use MOCKGPU_CODE=uops or MOCKGPU_ARCH=gfx1100",
            target.name
        ),
        _ => bail!(
            InvalidArgument,
            "MOCKGPU_CODE={v:?}: the emulated AMD GPU runs `uops` or `isa` (`real`)"
        ),
    }
}

/// Why the emulated `target`'s real code cannot be compiled (`why`: the compiler's error, such as
/// no libLLVM 15), with the two ways out. Under `AMD=1 MOCKGPU=1` this fails every compile: the
/// UOp path is never taken silently (the suite must test the same code on every machine).
pub fn isa_unavailable(target: &GfxTarget, why: &str) -> String {
    format!(
        "the emulated {t} runs the real {t} code by default (MOCKGPU_CODE=isa), which needs \
         libLLVM {m} or newer: {why}. Set LLVM_LIB to a libLLVM-{m}.so.1 (or newer; Debian's \
         libllvm{m}, which .ci/run unpacks without root), or set MOCKGPU_CODE=uops to run \
         serialized UOps on the UOp interpreter instead",
        t = target.name,
        m = target.min_llvm.max(15)
    )
}
