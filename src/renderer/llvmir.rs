//! The LLVM IR renderer (tinygrad 0.9.1 `LLVMRenderer`, plus the AMDGPU flavour tinygrad added
//! later as `AMDLLVMRenderer`): a linear UOp list to one LLVM IR module, from one code base.
//!
//! - [`Flavour::Cpu`] (the `LLVM` device): the kernel is an `internal` function with `noalias`
//!   pointer parameters (buffers in DEFINE_GLOBAL index order, then the int32 variables by name),
//!   plus the fixed-ABI entry `void NAME_rg(void **bufs, const int *vals, int core, int ncores)`
//!   of `driver::dl`. As in the CLANG renderer, the outermost non-reduce loop that holds every
//!   store runs only the share `[N*core/ncores, N*(core+1)/ncores)` of its `N` iterations; a kernel
//!   without such a loop runs on core 0 only; an invalid (core, ncores) pair runs nothing.
//! - [`Flavour::Amdgpu`] (the `AMD` device): an `amdgpu_kernel` whose explicit arguments are the
//!   buffers as `addrspace(1)` pointers (`noalias align 32`) in DEFINE_GLOBAL order, then each
//!   DEFINE_VAR as i32 (packed: `kernarg_size = 8*nbufs + 4*nvars`, no hidden arguments once the
//!   IR optimizer ran); SPECIAL is `llvm.amdgcn.workgroup.id.*` / `workitem.id.*` (an `idx`
//!   global index is the workgroup id: such kernels run one thread per workgroup); DEFINE_LOCAL is
//!   an `addrspace(3)` global; BARRIER is a workgroup release fence, `llvm.amdgcn.s.barrier` and
//!   an acquire fence; `"amdgpu-flat-work-group-size"="1,<local threads>"`. No ockl/ocml: only
//!   `llvm.*` intrinsics.
//!
//! - [`Flavour::Nvptx`] (the `NV` and `CUDA` devices, PTX through LLVM's NVPTX target): a
//!   `ptx_kernel` function (the calling convention marks it `.entry`; no `!nvvm.annotations`
//!   needed, on LLVM 13 to 20) whose parameters are the buffers as `addrspace(1)` pointers in
//!   DEFINE_GLOBAL order, then each DEFINE_VAR as i32: `8*nbufs + 4*nvars` bytes at constant buffer
//!   0's parameter base. SPECIAL is `llvm.nvvm.read.ptx.sreg.ctaid.*` (`gidx`), `tid.*` (`lidx`)
//!   or `ctaid*ntid+tid` (`idx`, as tinygrad's CUDA renderer); DEFINE_LOCAL is an `addrspace(3)`
//!   global (`.shared`); BARRIER is `llvm.nvvm.barrier0` (`bar.sync 0`); EXP2/LOG2/SIN/SQRT are PTX's
//!   f32 approximations.
//!
//! Pointers are typed (`float*`) for LLVM 14 and opaque (`ptr`) for LLVM >= 15
//! ([`LLVMRenderer::opaque_pointers`]); the compiler's libLLVM decides which.
//!
//! Where rawgrad differs from 0.9.1 (so results match the UOp interpreter): loops are
//! while-loops; bfloat16 is held as float in registers and rounded to nearest-even on stores;
//! integer division by a variable is guarded (no trap); float CMPLT is ordered and MAX propagates
//! NaN; no `"no-nans-fp-math"` attribute; no flavour carries fast-math flags (tinygrad's
//! `nsz arcp contract afn reassoc` let LLVM regroup equal expressions differently in two kernels
//! on the CPU, and `contract` fused a multiply-add into an fma on NVPTX), so every device gives
//! the interpreter's bits ([`LLVMRenderer::with_fast_math`] puts tinygrad's flags back).
//!
//! Beyond 0.9.1 on the CPU flavour, for the LLVM device's compile time: a module whose kernel is
//! vector-only ([`vector_only`]) starts with the comment [`VECTOR_ONLY_MARK`] (the device then
//! skips the SLP vectorizer) and addresses its global `x + c` indices as `(base + x) + c`
//! (`llvmir/memory.rs`), epilogue vector EXP2s may call an out-of-line helper
//! (`llvmir/exp2.rs`), and a split loop with constant bounds gets its share from the `optnone`
//! entry as two parameters instead of dividing in the kernel (`llvmir/share.rs`); none changes a
//! computed bit.
//!
//! Measured and not taken: CLANG's lane loads (`cstyle/lane_loads.rs`: a vector load used only
//! through GEPs rendered as one scalar load per lane, split addresses kept as `(base + x) + c+k`).
//! For every such load (17 of the 76 W1-W12 kernels change): callgrind of `bench llvmc --repeats
//! 2` 8516M -> 8444M instructions (-0.8%; codegen of the row sums and exp-sums 20-45% cheaper, of
//! the matmuls and elementwise kernels 5-25% dearer), but SLP then gathers the lanes with
//! `vinsertps` instead of transposing vectors: in a C harness (opt-14/llc-14, the light passes,
//! best of 15, 3 alternations) `r_64_64_8_4n2` 0.0098 -> 0.016 ms, `r_64_10_128_4_4` 0.157 ->
//! 0.205, `r_64_128_128_4_4_4` 3.6 -> 4.3, W2's `r_512_1024_8_4` 2.9-3.3 -> 3.2-3.9; W11's argmax
//! 0.30-0.91 -> 0.33-0.84 (noise). Limited to kernels with a scalar EXP2 (4 kernels change, W6's
//! and W12's exp-sums): 8516M -> 8436M (-0.9%), the harness no slower (W6's `r_512_256_8_4n1`
//! 2.45-2.57 -> 2.20-2.61), but `bench workloads --workloads W6 --devices LLVM --threads 1`
//! (libLLVM 15 in process), alternated 6 times: 7.8-10.0 -> 10.5-12.6 ms, while the unchanged W11
//! stayed within its noise.
//!
//! Tensor cores: WMMA UOps become `llvm.amdgcn.wmma.*` calls (gfx11, gfx12) or inline `mma.sync`
//! PTX (sm_80+), see `llvmir/wmma.rs`.
//!
//! Not guaranteed: image dtypes are refused; lists that did not pass
//! `type_verify` give an `Error::Codegen` or IR the LLVM verifier refuses.

mod alu;
mod exp2;
mod index;
mod memory;
pub mod nvptx;
pub(crate) mod prefetch;
pub(crate) mod rows;
mod share;
pub(crate) mod stream_store;
mod types;
mod walk;
mod wmma;

use crate::codegen::uops::{UOp, UOpMap, UOps};
use crate::ffi::llvm::Llvm;
use crate::helpers::to_function_name;
use crate::hw::amd::targets::GfxTarget;
use crate::renderer::cstyle::split_range;
use crate::renderer::{Renderer, RendererOpts};
use crate::{Error, Result};

use share::EntryShare;
use walk::{Param, Walk};

/// tinygrad's `MFLAGS`: the fast-math flags on float instructions.
pub const TINYGRAD_FAST_MATH: &str = "nsz arcp contract afn reassoc";

/// Which kind of kernel the renderer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Host code for the `LLVM` device.
    Cpu,
    /// An AMD GPU kernel for the `AMD` device.
    Amdgpu { target: &'static GfxTarget },
    /// An NVIDIA GPU kernel (PTX through LLVM's NVPTX target) for the `NV`/`CUDA` devices;
    /// `sm` is the SM version (90 for sm_90).
    Nvptx { sm: u32 },
}

impl Flavour {
    fn global_addrspace(&self) -> u32 {
        match self {
            Flavour::Cpu => 0,
            Flavour::Amdgpu { .. } | Flavour::Nvptx { .. } => 1,
        }
    }
    fn local_addrspace(&self) -> u32 {
        match self {
            Flavour::Cpu => 0,
            Flavour::Amdgpu { .. } | Flavour::Nvptx { .. } => 3,
        }
    }
}

/// The LLVM IR renderer.
#[derive(Clone, Debug)]
pub struct LLVMRenderer {
    opts: RendererOpts,
    flavour: Flavour,
    opaque_pointers: bool,
    /// Fast-math flags with a leading space (empty for none).
    fmf: String,
}

impl LLVMRenderer {
    /// The CPU flavour (tinygrad's `LLVMRenderer`: no locals, loops for every dim; float4
    /// grouping on, unlike 0.9.1, so upcasts become vector loads and stores), with no fast-math
    /// flags (tinygrad puts [`TINYGRAD_FAST_MATH`] on; see the module doc).
    pub fn cpu(opaque_pointers: bool) -> LLVMRenderer {
        LLVMRenderer {
            opts: RendererOpts {
                device: "LLVM".into(),
                suffix: "LLVM".into(),
                supports_float4: true,
                has_local: false,
                has_shared: false,
                global_max: None,
                local_max: None,
                shared_max: 0,
                tensor_cores: vec![],
                vector_alu: crate::codegen::renderer::VectorAlu::Llvm,
            },
            flavour: Flavour::Cpu,
            opaque_pointers,
            // No fast-math flags on the CPU: with `reassoc`/`contract` LLVM regrouped one product
            // differently in two kernels (max-pool's backward then missed the forward's maximum)
            // and turned sinh/cosh gradients' NaN into inf; `nsz` loses -0.0, `afn`/`arcp` change
            // last bits. Without them every kernel computes what the interpreter computes.
            fmf: String::new(),
        }
    }

    /// The AMD GPU flavour for `target` (tinygrad's AMD renderer limits; the target's WMMA).
    pub fn amdgpu(target: &'static GfxTarget, opaque_pointers: bool) -> LLVMRenderer {
        LLVMRenderer {
            opts: RendererOpts {
                device: "AMD".into(),
                suffix: "AMD".into(),
                supports_float4: true,
                has_local: true,
                has_shared: true,
                global_max: Some([i32::MAX as i64, 65535, 65535]),
                local_max: Some([1024, 1024, 1024]),
                shared_max: target.lds_max_bytes as usize,
                tensor_cores: crate::renderer::tensor_cores::amd_target(target),
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
            flavour: Flavour::Amdgpu { target },
            opaque_pointers,
            // no fast-math flags, as on the CPU (see there): `contract` fused `(a+b)*a-1` into
            // an fma one ulp away from the interpreter
            fmf: String::new(),
        }
    }

    /// The NVPTX flavour for `sm_XX` on the device family `device` (`NV` or `CUDA`): tinygrad's
    /// PTX renderer's capabilities (locals, shared memory, no float4 grouping, CUDA's launch
    /// limits, 48 KiB of shared memory, no tensor cores).
    pub fn nvptx(device: &str, sm: u32, opaque_pointers: bool) -> LLVMRenderer {
        LLVMRenderer {
            opts: RendererOpts {
                device: device.into(),
                suffix: "PTX".into(),
                supports_float4: false,
                has_local: true,
                has_shared: true,
                global_max: Some([i32::MAX as i64, 65535, 65535]),
                local_max: Some([1024, 1024, 64]),
                shared_max: 49152,
                tensor_cores: crate::renderer::tensor_cores::ptx(sm),
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
            flavour: Flavour::Nvptx { sm },
            opaque_pointers,
            // no fast-math flags, as on the CPU (see there): `contract` fused `(a+b)*a-1` into
            // an fma one ulp away from the interpreter
            fmf: String::new(),
        }
    }

    /// The CPU flavour with the pointer syntax of `llvm`.
    pub fn cpu_for(llvm: &Llvm) -> LLVMRenderer {
        LLVMRenderer::cpu(llvm.opaque_pointers())
    }

    /// The AMD flavour for `target` with the pointer syntax of `llvm`.
    pub fn amdgpu_for(llvm: &Llvm, target: &'static GfxTarget) -> LLVMRenderer {
        LLVMRenderer::amdgpu(target, llvm.opaque_pointers())
    }

    /// Use `flags` (space separated, e.g. `"nsz contract"`, or empty) as the fast-math flags.
    pub fn with_fast_math(mut self, flags: &str) -> LLVMRenderer {
        self.fmf = if flags.trim().is_empty() {
            String::new()
        } else {
            format!(" {}", flags.trim())
        };
        self
    }

    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    pub fn opaque_pointers(&self) -> bool {
        self.opaque_pointers
    }

    fn ptr(&self, elem: &str, addrspace: u32) -> String {
        types::ptr_type(self.opaque_pointers, elem, addrspace).into_owned()
    }

    /// The parameter list of the kernel function (a split kernel's share last: `core` and
    /// `ncores`, or the share's bounds when the entry computes it, `llvmir/share.rs`).
    fn params(&self, params: &[Param], split: bool, share: Option<&EntryShare>) -> Vec<String> {
        let mut out = vec![];
        for p in params {
            match p {
                Param::Buffer(_, d, name) => {
                    let pt = self.ptr(&types::mem(*d), self.flavour.global_addrspace());
                    let attrs = match self.flavour {
                        Flavour::Cpu => "noalias",
                        Flavour::Amdgpu { .. } => "noalias align 32",
                        Flavour::Nvptx { .. } => "noalias",
                    };
                    out.push(format!("{pt} {attrs} {name}"));
                }
                Param::Var(_, name) => out.push(format!("i32 {name}")),
            }
        }
        match share {
            Some(sh) => out.extend([
                format!("{} {}", sh.ty, share::SHARE_LO),
                format!("{} {}", sh.ty, share::SHARE_HI),
            ]),
            None if split => out.extend(["i32 %core".to_string(), "i32 %ncores".to_string()]),
            None => {}
        }
        out
    }

    /// `NAME_rg(void **bufs, const int *vals, int core, int ncores)` calling the kernel.
    fn cpu_entry(
        &self,
        fname: &str,
        params: &[Param],
        split: bool,
        share: Option<&EntryShare>,
    ) -> String {
        let (pp, p32) = (self.ptr("i8*", 0), self.ptr("i32", 0));
        let mut l = vec![
            format!(
                "define void @{fname}_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores) #{ENTRY_ATTRIBUTE_GROUP} {{"
            ),
            "entry:".into(),
            "  %ok.a = icmp sge i32 %ncores, 1".into(),
            "  %ok.b = icmp sge i32 %core, 0".into(),
            "  %ok.c = icmp slt i32 %core, %ncores".into(),
            "  %ok.ab = and i1 %ok.a, %ok.b".into(),
            "  %ok = and i1 %ok.ab, %ok.c".into(),
        ];
        if split {
            l.push("  br i1 %ok, label %run, label %done".into());
        } else {
            l.push("  %ok.z = icmp eq i32 %core, 0".into());
            l.push("  %go = and i1 %ok, %ok.z".into());
            l.push("  br i1 %go, label %run, label %done".into());
        }
        l.push("run:".into());
        let mut args = self.entry_args(params, &mut l);
        match share {
            Some(sh) => {
                let (lines, bounds) = share::entry_lines(sh);
                l.extend(lines);
                args.extend(bounds);
            }
            None if split => args.extend(["i32 %core".to_string(), "i32 %ncores".to_string()]),
            None => {}
        }
        l.push(format!("  call void @{fname}({})", args.join(", ")));
        l.extend([
            "  br label %done".into(),
            "done:".into(),
            "  ret void".into(),
            "}".into(),
        ]);
        l.join("\n")
    }

    /// Load the kernel's arguments from `bufs` (by buffer index) and `vals` (in order).
    fn entry_args(&self, params: &[Param], l: &mut Vec<String>) -> Vec<String> {
        let (pp, p8, p32) = (self.ptr("i8*", 0), self.ptr("i8", 0), self.ptr("i32", 0));
        let (mut args, mut nvar) = (vec![], 0);
        for p in params {
            match p {
                Param::Buffer(idx, d, _) => {
                    let b = format!("%b{idx}");
                    l.push(format!(
                        "  {b}.p = getelementptr inbounds {p8}, {pp} %bufs, i64 {idx}"
                    ));
                    l.push(format!("  {b}.r = load {p8}, {pp} {b}.p, align 8"));
                    let pt = self.ptr(&types::mem(*d), 0);
                    if pt == p8 {
                        args.push(format!("{pt} {b}.r"));
                    } else {
                        l.push(format!("  {b} = bitcast {p8} {b}.r to {pt}"));
                        args.push(format!("{pt} {b}"));
                    }
                }
                Param::Var(..) => {
                    let v = format!("%v{nvar}");
                    l.push(format!(
                        "  {v}.p = getelementptr inbounds i32, {p32} %vals, i64 {nvar}"
                    ));
                    l.push(format!("  {v} = load i32, {p32} {v}.p, align 4"));
                    args.push(format!("i32 {v}"));
                    nvar += 1;
                }
            }
        }
        args
    }

    fn attributes(&self, local_threads: i64) -> String {
        match self.flavour {
            Flavour::Cpu => format!(
                "attributes #0 = {{ nounwind \"no-builtins\" \"no-trapping-math\"=\"true\" }}\n\
                 attributes #{ENTRY_ATTRIBUTE_GROUP} = {{ {ENTRY_ATTRIBUTES} }}"
            ),
            Flavour::Amdgpu { .. } => format!(
                "attributes #0 = {{ nounwind \"amdgpu-flat-work-group-size\"=\"1,{}\" \"no-builtins\" \"no-trapping-math\"=\"true\" \"uniform-work-group-size\"=\"true\" }}",
                local_threads.max(1)
            ),
            Flavour::Nvptx { .. } => {
                "attributes #0 = { nounwind \"no-builtins\" \"no-trapping-math\"=\"true\" }".into()
            }
        }
    }
}

/// The attribute group of the CPU flavour's `NAME_rg` entry ([`ENTRY_ATTRIBUTES`]).
pub const ENTRY_ATTRIBUTE_GROUP: u32 = 5;

/// The attributes of the CPU flavour's `NAME_rg` entry (rawgrad beyond tinygrad 0.9.1, for the
/// LLVM device's compile time): `optnone` (with the `noinline` it needs), so LLVM selects and
/// allocates the entry's few instructions at its no-optimization level, while the kernel it calls
/// is optimized as before. The entry only checks `core`/`ncores`, loads the kernel's arguments
/// and calls it once per launch: no float arithmetic, nothing the kernel's speed depends on.
pub const ENTRY_ATTRIBUTES: &str =
    "noinline nounwind optnone \"no-builtins\" \"no-trapping-math\"=\"true\"";

/// The first line of a CPU module whose kernel has no scalar work for the SLP vectorizer
/// ([`vector_only`]): the LLVM device then compiles it without SLP (`runtime/cpu/llvm.rs`,
/// rawgrad beyond tinygrad 0.9.1; an IR comment, so any LLVM reads the module the same).
pub const VECTOR_ONLY_MARK: &str = "; rawgrad: vector-only";

/// Whether the kernel `uops` has no scalar work that the SLP vectorizer could bundle: no scalar
/// ALU other than the index-only ones of `wide` (`llvmir/index.rs`), no scalar CAST or BITCAST
/// and no store of a scalar. Its float and integer work is then all in the vector ALU fold's
/// vector instructions; what SLP would still find is scalar loads gathered into vectors (masked
/// gathers and vectors of pointers on AVX-512, costly to compile) and index arithmetic.
pub fn vector_only(uops: &[UOp], wide: &UOpMap<()>) -> bool {
    uops.iter().all(|u| {
        let scalar = u.dtype().is_some_and(|d| d.count == 1);
        match u.op() {
            UOps::ALU => !scalar || wide.contains_key(u),
            UOps::CAST | UOps::BITCAST => !scalar,
            UOps::STORE => u
                .src()
                .get(2)
                .and_then(|v| v.dtype())
                .is_some_and(|d| d.count > 1),
            _ => true,
        }
    })
}

impl Renderer for LLVMRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }

    fn render(&self, name: &str, uops: &[UOp]) -> Result<String> {
        let fname = to_function_name(name);
        let mut w = Walk::new(&self.flavour, self.opaque_pointers, &self.fmf, uops)?;
        if self.flavour == Flavour::Cpu {
            w.split = split_range(uops);
        }
        for (i, u) in uops.iter().enumerate() {
            w.uop(i, u).map_err(|e| {
                Error::Codegen(format!(
                    "LLVM IR render {name}: uop {i} ({:?}): {}",
                    u.op(),
                    e.message()
                ))
            })?;
        }
        w.finish()
            .map_err(|e| Error::Codegen(format!("LLVM IR render {name}: {}", e.message())))?;
        let mut params = std::mem::take(&mut w.params);
        params.sort_by(|a, b| match (a, b) {
            (Param::Buffer(i, ..), Param::Buffer(j, ..)) => i.cmp(j),
            (Param::Buffer(..), Param::Var(..)) => std::cmp::Ordering::Less,
            (Param::Var(..), Param::Buffer(..)) => std::cmp::Ordering::Greater,
            (Param::Var(x, _), Param::Var(y, _)) => x.cmp(y),
        });
        let split = w.split.is_some();
        let share = w.entry_share.as_ref();
        let sig = self.params(&params, split, share).join(", ");
        let def = match self.flavour {
            Flavour::Cpu => "define internal void",
            Flavour::Amdgpu { .. } => "define amdgpu_kernel void",
            Flavour::Nvptx { .. } => "define ptx_kernel void",
        };
        let entry = match self.flavour {
            Flavour::Cpu => Some(self.cpu_entry(&fname, &params, split, share)),
            _ => None,
        };
        let head = format!("{def} @{fname}({sig}) #0 {{");
        let attrs = self.attributes(w.local_threads);
        let mut out = String::with_capacity(w.body.len() + head.len() + 4096);
        let mut line = |l: &str| {
            out.push_str(l);
            out.push('\n');
        };
        if w.vector_only {
            line(VECTOR_ONLY_MARK);
        }
        w.globals.iter().for_each(|g| line(g));
        line(&head);
        line("entry:");
        out.push_str(&w.body);
        let mut line = |l: &str| {
            out.push_str(l);
            out.push('\n');
        };
        if !w.streams.is_empty() {
            // the streaming stores are visible before the kernel's completion is (`stream_store.rs`)
            line("  call void @llvm.x86.sse.sfence()");
        }
        line("  ret void");
        line("}");
        if let Some(e) = &entry {
            line(e);
        }
        w.decls.iter().for_each(|d| line(d));
        line(&attrs);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
