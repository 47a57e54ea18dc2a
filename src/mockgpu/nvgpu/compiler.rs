//! The NV renderer and compilers under `MOCKGPU=1`.
//!
//! - [`MockNvRenderer`]: a first line `//! rawgrad-nv-mock <name>` then the serialized UOps, with
//!   CUDA-like options (locals, shared memory, local_max (1024, 1024, 64), global_max
//!   (2^31-1, 65535, 65535), 48 KiB shared);
//! - [`MockNvCompiler`]: that source to a mock cubin for the device's arch and SM
//!   ([`write_mock_cubin`]: parameters 8 bytes per buffer then 4 per variable, static shared
//!   memory from the DEFINE_LOCALs);
//! - [`MockPtxCompiler`] (`MOCKGPU_CODE=ptx`, the default): the hardware path's code: NVPTX LLVM IR from the
//!   [`LLVMRenderer`] through libLLVM's NVPTX target to PTX (as the NV backend's PTX paths do
//!   before ptxas), wrapped in a mock cubin whose blob is the PTX and whose parameters and
//!   static shared memory are read from the PTX's `.entry` (the software GPU interprets it:
//!   [`crate::mockgpu::nvgpu::ptx`]); with a [`PtxAssembler`] (ptxas, when the machine has it)
//!   the mock cubin also carries ptxas's real cubin of that PTX.
//!
//! Not guaranteed: the mock compiler checks that the UOps deserialize, not that they verify.

use std::sync::Arc;

use crate::codegen::uop_serial::{deserialize, serialize};
use crate::codegen::uopgraph::{globals, vars};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::device::Compiler;
use crate::ffi::llvm::Llvm;
use crate::helpers::getenv_str;
use crate::hw::nv::arch::NvArch;
use crate::hw::nv::cubin::KParam;
use crate::mockgpu::nvgpu::cubin::{write_mock_cubin, write_mock_cubin_with, MockCode, MockCubin};
use crate::mockgpu::nvgpu::ptx::parse_kernel;
use crate::renderer::llvmir::nvptx::{ir_to_ptx, nvptx_target, NvptxTarget};
use crate::renderer::llvmir::LLVMRenderer;
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, Result};

/// First-line prefix of a mock kernel's source.
pub const MOCK_SOURCE_PREFIX: &str = "//! rawgrad-nv-mock ";

/// UOps to the mock source.
pub struct MockNvRenderer {
    opts: RendererOpts,
}

impl Default for MockNvRenderer {
    fn default() -> Self {
        MockNvRenderer::new()
    }
}

impl MockNvRenderer {
    pub fn new() -> MockNvRenderer {
        MockNvRenderer {
            opts: RendererOpts {
                device: "NV".into(),
                suffix: "NV".into(),
                supports_float4: false,
                has_local: true,
                has_shared: true,
                global_max: Some([(1 << 31) - 1, 65535, 65535]),
                local_max: Some([1024, 1024, 64]),
                shared_max: 48 * 1024,
                tensor_cores: vec![],
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
        }
    }

    /// The renderer of an emulated GPU of `sm_XX`: as [`MockNvRenderer::new`] plus what the real
    /// CUDA-C renderer offers the optimizer: float4 grouping and the tensor cores of that SM
    /// (mma.sync m16n8k16 from sm_80 on), so the emulator runs the kernels the real device would
    /// get.
    pub fn for_sm(sm: u32) -> MockNvRenderer {
        let mut r = MockNvRenderer::new();
        r.opts.supports_float4 = true;
        r.opts.tensor_cores = crate::renderer::tensor_cores::cuda(sm);
        r
    }
}

impl Renderer for MockNvRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }
    fn render(&self, name: &str, uops: &[UOp]) -> Result<String> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            bail!(
                Codegen,
                "NV mock renderer: kernel name {name:?} is not a symbol"
            );
        }
        Ok(format!("{MOCK_SOURCE_PREFIX}{name}\n{}", serialize(uops)?))
    }
}

/// Split a mock source into (kernel name, serialized UOps).
pub fn split_mock_source(src: &str) -> Result<(&str, &str)> {
    let Some((first, rest)) = src.split_once('\n') else {
        bail!(Compile, "NV mock compiler: source has no kernel-name line");
    };
    match first.strip_prefix(MOCK_SOURCE_PREFIX) {
        Some(name) if !name.is_empty() => Ok((name, rest)),
        _ => bail!(
            Compile,
            "NV mock compiler: the first line must be `{MOCK_SOURCE_PREFIX}<name>`, got {first:?}"
        ),
    }
}

/// Bytes of DEFINE_LOCAL memory of `uops`.
pub fn local_bytes(uops: &[UOp]) -> u32 {
    let n: usize = uops
        .iter()
        .filter(|u| u.op() == UOps::DEFINE_LOCAL)
        .map(|u| match (u.arg(), u.dtype()) {
            (UArg::Local { size, .. }, Some(d)) => size * d.scalar.itemsize(),
            _ => 0,
        })
        .sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The mock cubin of kernel `name` with `uops` (serialized) for `arch` / `sm`.
pub fn mock_cubin(name: &str, uops_text: &str, arch: &NvArch, sm: u32) -> Result<Vec<u8>> {
    let uops = deserialize(uops_text)?;
    let (nb, nv) = (globals(&uops).len() as u32, vars(&uops).len() as u32);
    let params = (0..nb)
        .map(|i| (8 * i, 8))
        .chain((0..nv).map(|i| (8 * nb + 4 * i, 4)))
        .enumerate()
        .map(|(i, (offset, size))| KParam {
            ordinal: i as u32,
            offset,
            size,
        })
        .collect();
    let m = MockCubin {
        name: name.to_string(),
        sm,
        params,
        regcount: 32,
        shared_size: local_bytes(&uops),
        uops: uops_text.to_string(),
        code: MockCode::Uops,
    };
    write_mock_cubin(&m, arch)
}

/// Mock source to a mock cubin for one arch and SM.
pub struct MockNvCompiler {
    arch: &'static NvArch,
    sm: u32,
}

impl MockNvCompiler {
    pub fn new(arch: &'static NvArch, sm: u32) -> MockNvCompiler {
        MockNvCompiler { arch, sm }
    }
}

impl Compiler for MockNvCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(format!("compile_nv_mock_sm_{}", self.sm))
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let (name, uops) = split_mock_source(src)?;
        mock_cubin(name, uops, self.arch, self.sm)
            .map_err(|e| crate::Error::Compile(format!("NV mock compiler: {}", e.message())))
    }
}

/// The code the emulated NV device's compiler produces: `MOCKGPU_CODE=ptx` or `real` (and the
/// default when the knob is unset or empty: LLVM's PTX for the PTX interpreter, the real code) or
/// `MOCKGPU_CODE=uops` (serialized UOps for the UOp interpreter, the fast explicit choice);
/// `isa` names the AMD emulator's real code and leaves NV on its default. Any other value is an
/// error naming it.
pub fn mock_code() -> crate::Result<MockCode> {
    match getenv_str("MOCKGPU_CODE").unwrap_or_default().trim() {
        "" | "ptx" | "real" | "isa" => Ok(MockCode::Ptx),
        "uops" => Ok(MockCode::Uops),
        v => bail!(
            InvalidArgument,
            "MOCKGPU_CODE={v:?}: the emulated NV GPU runs `uops` or `ptx` (`real`)"
        ),
    }
}

/// The mock cubin of PTX text: the blob holds the PTX, the parameters and static shared memory
/// are those of its `.entry` (the only one); `real` is ptxas's cubin of the same PTX, carried
/// beside it when given.
pub fn mock_ptx_cubin(ptx: &str, arch: &NvArch, sm: u32, real: Option<&[u8]>) -> Result<Vec<u8>> {
    let k = parse_kernel(ptx, None)?;
    let params = k
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| KParam {
            ordinal: i as u32,
            offset: p.offset,
            size: p.size,
        })
        .collect();
    let m = MockCubin {
        name: k.name.clone(),
        sm,
        params,
        // PTX registers are virtual; ptxas would allocate; the mock reports the UOp path's count
        regcount: 32,
        shared_size: k.shared_bytes,
        uops: ptx.to_string(),
        code: MockCode::Ptx,
    };
    write_mock_cubin_with(&m, arch, real)
}

/// PTX text to cubin bytes.
pub type AssembleFn = dyn Fn(&str) -> Result<Vec<u8>> + Send + Sync;

/// PTX text to a real cubin (ptxas for the device's SM): handed in by the one place that may name
/// the backend's tools (`runtime::builtin`), with the tool's cache-key part.
#[derive(Clone)]
pub struct PtxAssembler {
    pub key: String,
    pub assemble: Arc<AssembleFn>,
}

/// NVPTX LLVM IR (or PTX) to a mock cubin holding the PTX LLVM writes.
pub struct MockPtxCompiler {
    llvm: Arc<Llvm>,
    target: NvptxTarget,
    arch: &'static NvArch,
    sm: u32,
    asm: Option<PtxAssembler>,
}

impl MockPtxCompiler {
    /// Loads libLLVM and picks the NVPTX target for `sm` (as the hardware path does).
    pub fn new(arch: &'static NvArch, sm: u32) -> Result<MockPtxCompiler> {
        let llvm = Llvm::load()?;
        let target = nvptx_target(&llvm, sm)?;
        Ok(MockPtxCompiler {
            llvm,
            target,
            arch,
            sm,
            asm: None,
        })
    }

    /// Also assembles each kernel's PTX into a real cubin that the mock cubin carries beside the
    /// PTX (ptxas's refusal is the compile's error, as on hardware).
    pub fn with_assembler(mut self, asm: PtxAssembler) -> MockPtxCompiler {
        self.asm = Some(asm);
        self
    }

    /// The renderer whose output this compiler takes (the hardware PTX path's).
    pub fn renderer(&self) -> LLVMRenderer {
        LLVMRenderer::nvptx("NV", self.sm, self.llvm.opaque_pointers())
    }

    /// The PTX of NVPTX LLVM IR (PTX passes through).
    pub fn to_ptx(&self, src: &str) -> Result<String> {
        ir_to_ptx(&self.llvm, &self.target, src)
    }
}

impl Compiler for MockPtxCompiler {
    fn cache_key(&self) -> Option<String> {
        let asm = self.asm.as_ref().map(|a| format!("_{}", a.key));
        Some(format!(
            "compile_nv_mockptx_llvm{}_{}{}_sm_{}{}",
            self.llvm.version(),
            self.target.cpu,
            self.target.features,
            self.sm,
            asm.unwrap_or_default()
        ))
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let ptx = self.to_ptx(src)?;
        let real = match &self.asm {
            Some(a) => Some((a.assemble)(&ptx)?),
            None => None,
        };
        mock_ptx_cubin(&ptx, self.arch, self.sm, real.as_deref())
            .map_err(|e| crate::Error::Compile(format!("NV mock PTX compiler: {}", e.message())))
    }
}
