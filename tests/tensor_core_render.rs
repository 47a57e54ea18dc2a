//! Tensor-core kernels through the real renderers and, where the tools are installed, their
//! compilers: CUDA-C (the `mma.sync` helper; NVRTC when present), the LLVM NVPTX path (IR to
//! PTX with every installed libLLVM; ptxas when present) and the LLVM amdgcn path (gfx1100 with
//! every libLLVM that has gfx11's WMMA intrinsics; the assembly must hold `v_wmma`; gfx1201's
//! 8-wide WMMA calls against goldens written from LLVM's gfx12 intrinsic signatures, parsed and
//! verified by every installed libLLVM).
//! The numbers these kernels compute are checked by tests/kernel_opts_diff.rs (interpreter and
//! emulated GPUs, in each vendor's lane layout).

mod linearizer_support;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::Kernel;
use rawgrad::device::Compiler;
use rawgrad::dtype::{dtypes, DType};
use rawgrad::ffi::llvm::{find_libraries, CompileOptions, Emit, Llvm, MIN_LLVM_MAJOR};
use rawgrad::hw::amd::targets::{GFX1100, GFX1201};
use rawgrad::renderer::cuda::CUDARenderer;
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::runtime::amd::compiler::AMDCompiler;
use rawgrad::runtime::nv::compiler::{nvptx_target, NVCompiler, NvCompilerKind};

/// A 32x32x32 matmul of `dt` accumulated in float (or in `dt` when `same`).
fn matmul(dt: DType, same: bool) -> Case {
    catalogue::matmul_of("tc_matmul", dt, (32, 32, 32), same)
}

/// The kernel with the default tensor-core opts, rendered by `r`.
fn render_tc(case: &Case, r: &dyn Renderer) -> String {
    let mut k = Kernel::new(&case.ast, r.opts()).unwrap();
    assert!(
        k.apply_tensor_cores(1, None, 0, None).unwrap(),
        "TC applies"
    );
    assert!(k.tensor_core.is_some());
    k.to_program(r).unwrap().src
}

fn llvms() -> Vec<std::sync::Arc<Llvm>> {
    let mut out: Vec<std::sync::Arc<Llvm>> = vec![];
    for l in find_libraries() {
        if l.major < MIN_LLVM_MAJOR || out.iter().any(|o| o.version().major == l.major) {
            continue;
        }
        if let Ok(llvm) = Llvm::open(&l.path) {
            out.push(llvm);
        }
    }
    out
}

#[test]
fn cuda_c_calls_mma_sync() {
    for (dt, ci, ta) in [
        (dtypes::float16, "f16", "half8"),
        (dtypes::bfloat16, "bf16", "float8"),
    ] {
        let src = render_tc(&matmul(dt, false), &CUDARenderer::nv(89));
        let op = format!("mma.sync.aligned.m16n8k16.row.col.f32.{ci}.{ci}.f32");
        assert!(src.contains(&op), "{src}");
        let helper = format!(
            "__device__ inline float4 __WMMA_8_16_16_{}_float({ta} a",
            dt.name()
        );
        assert!(src.contains(&helper), "{src}");
        assert!(src.contains(&format!("= __WMMA_8_16_16_{}_float(", dt.name())));
        match NVCompiler::with_kind("NV", 89, NvCompilerKind::Nvrtc) {
            Ok(c) => {
                c.compile(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
            }
            Err(e) => println!("skipped NVRTC: {}", e.message()),
        }
    }
    // below sm_80 there is no tensor core
    assert!(CUDARenderer::nv(75).opts().tensor_cores.is_empty());
}

#[test]
fn llvm_nvptx_writes_mma_sync() {
    let case = matmul(dtypes::float16, false);
    for llvm in llvms() {
        let r = LLVMRenderer::nvptx("NV", 86, llvm.opaque_pointers());
        let ir = render_tc(&case, &r);
        assert!(ir.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
        let Ok(t) = nvptx_target(&llvm, 86) else {
            println!("skipped LLVM {}: no NVPTX sm_86", llvm.version());
            continue;
        };
        let opts = rawgrad::ffi::llvm::CompileOptions::new(
            "nvptx64-nvidia-cuda",
            &t.cpu,
            &t.features,
            false,
        );
        let ptx = llvm
            .compile(&ir, &opts, Emit::Assembly)
            .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{ir}", llvm.version()));
        let ptx = String::from_utf8_lossy(&ptx).into_owned();
        assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
        match NVCompiler::with_kind("NV", 86, NvCompilerKind::Ptxas) {
            Ok(c) => {
                c.compile(&ptx)
                    .unwrap_or_else(|e| panic!("ptxas: {e}\n{ptx}"));
            }
            Err(e) => println!("skipped ptxas: {}", e.message()),
        }
    }
}

#[test]
fn llvm_amdgcn_calls_wmma() {
    for (same, f) in [
        (false, "llvm.amdgcn.wmma.f32.16x16x16.f16"),
        (true, "llvm.amdgcn.wmma.f16.16x16x16.f16"),
    ] {
        let case = matmul(dtypes::float16, same);
        let mut compiled = 0;
        for llvm in llvms() {
            let Ok(c) = AMDCompiler::with_llvm(&GFX1100, llvm.clone()) else {
                println!("skipped LLVM {}: no gfx1100", llvm.version());
                continue;
            };
            let ir = render_tc(&case, &c.renderer());
            assert!(ir.contains(f), "{ir}");
            match c.disassemble(&ir) {
                Ok(asm) => {
                    assert!(asm.contains("v_wmma_"), "LLVM {}: {asm}", llvm.version());
                    compiled += 1;
                }
                Err(e) if llvm.version().major < 16 => {
                    println!("skipped LLVM {} (no gfx11 WMMA): {e}", llvm.version())
                }
                Err(e) => panic!("LLVM {}: {e}\n{ir}", llvm.version()),
            }
        }
        println!("{f}: compiled with {compiled} libLLVM(s)");
    }
}

/// gfx12's WMMA: the 8-wide overloads of LLVM's `test/CodeGen/AMDGPU/wmma-gfx12-w32.ll`, no
/// 16-wide operand and no half-wave shuffle. A libLLVM that knows gfx1201 (18+) compiles the IR
/// and its assembly must hold `v_wmma_`; an older one (14, 15) knows `llvm.amdgcn.wmma.*` only
/// as gfx11's 16-wide signature (or not at all), so there the IR is verified (no codegen, generic
/// amdgcn target) with the WMMA declared as an ordinary function of the same type.
#[test]
fn llvm_amdgcn_gfx12_calls_8_wide_wmma() {
    let cases = [
        (
            dtypes::float16,
            false,
            "declare <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16(<8 x half>, <8 x half>, <8 x float>)",
            "call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v8f16(<8 x half> %",
        ),
        (
            dtypes::float16,
            true,
            "declare <8 x half> @llvm.amdgcn.wmma.f16.16x16x16.f16.v8f16.v8f16(<8 x half>, <8 x half>, <8 x half>, i1 immarg)",
            "call <8 x half> @llvm.amdgcn.wmma.f16.16x16x16.f16.v8f16.v8f16(<8 x half> %",
        ),
        (
            dtypes::bfloat16,
            false,
            "declare <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16(<8 x i16>, <8 x i16>, <8 x float>)",
            "call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.bf16.v8f32.v8i16(<8 x i16> %",
        ),
        (
            dtypes::bfloat16,
            true,
            "declare <8 x i16> @llvm.amdgcn.wmma.bf16.16x16x16.bf16.v8i16.v8i16(<8 x i16>, <8 x i16>, <8 x i16>, i1 immarg)",
            "call <8 x i16> @llvm.amdgcn.wmma.bf16.16x16x16.bf16.v8i16.v8i16(<8 x i16> %",
        ),
    ];
    let libs = llvms();
    for (dt, same, decl, call) in cases {
        for opaque in [true, false] {
            let ir = render_tc(&matmul(dt, same), &LLVMRenderer::amdgpu(&GFX1201, opaque));
            assert!(ir.contains(decl), "{decl}\n{ir}");
            assert!(ir.contains(call), "{call}\n{ir}");
            if same {
                assert!(ir.contains(", i1 false)"), "{ir}");
            }
            assert!(
                !ir.contains("16 x half") && !ir.contains("shufflevector"),
                "{ir}"
            );
            for llvm in libs.iter().filter(|l| l.opaque_pointers() == opaque) {
                verify_gfx12(llvm, &ir);
            }
        }
    }
    println!("gfx12 WMMA IR verified by {} libLLVM(s)", libs.len());
}

fn verify_gfx12(llvm: &std::sync::Arc<Llvm>, ir: &str) {
    if let Ok(c) = AMDCompiler::with_llvm(&GFX1201, llvm.clone()) {
        let asm = c
            .disassemble(ir)
            .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{ir}", llvm.version()));
        assert!(asm.contains("v_wmma_"), "LLVM {}: {asm}", llvm.version());
        return;
    }
    // `immarg` is for intrinsics only
    let plain = ir
        .replace("@llvm.amdgcn.wmma.", "@rawgrad.gfx12.wmma.")
        .replace(", i1 immarg)", ", i1)");
    let opts = CompileOptions::new("amdgcn-amd-amdhsa", "", "", false);
    llvm.compile(&plain, &opts, Emit::Ir)
        .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{plain}", llvm.version()));
}
