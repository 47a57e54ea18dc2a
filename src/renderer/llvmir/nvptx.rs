//! LLVM's NVPTX target as the NV compile paths use it: the triple, the processor and PTX ISA
//! feature to ask for an SM ([`nvptx_target`], probed against the loaded libLLVM), and NVPTX IR
//! to PTX text ([`ir_to_ptx`]). Shared by the NV backend's PTX paths (before ptxas / nvJitLink)
//! and the emulator's PTX compiler (`MOCKGPU_CODE=ptx`).
//!
//! Sources: the SM / PTX ISA pairs follow LLVM's `llvm/lib/Target/NVPTX/NVPTX.td` (each `sm_NN`
//! processor with the lowest `ptxNN` feature that has it); whether a given libLLVM writes an SM
//! is probed, not assumed.
//!
//! Not guaranteed: an LLVM newer than the table writes PTX for newer SMs only as the table's
//! newest entry not above the device's SM.

use crate::ffi::llvm::{CompileOptions, Emit, Llvm};
use crate::{bail, Result};

/// The triple of LLVM's 64-bit NVPTX target.
pub const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";

/// What LLVM's NVPTX target writes PTX for: its processor (`sm_86`) and PTX ISA feature
/// (`+ptx71`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvptxTarget {
    pub cpu: String,
    pub features: String,
}

/// (SM, first LLVM major whose NVPTX target knows it, lowest PTX ISA version that has it).
const NVPTX_SMS: [(u32, u32, u32); 8] = [
    (120, 20, 87),
    (100, 20, 86),
    (90, 16, 78),
    (89, 16, 78),
    (87, 16, 74),
    (86, 13, 71),
    (80, 13, 70),
    (75, 13, 63),
];

const NVPTX_PROBE: &str = "define ptx_kernel void @rawgrad_probe() {\n  ret void\n}\n";

/// The NVPTX target to write PTX for `sm` with `llvm`: the newest SM in the table that is not
/// newer than `sm` and that this LLVM writes (`.target sm_NN` in a probe's PTX).
pub fn nvptx_target(llvm: &Llvm, sm: u32) -> Result<NvptxTarget> {
    let major = llvm.version().major;
    let mut tried = vec![];
    for &(cand, min_llvm, ptx) in NVPTX_SMS.iter() {
        if cand > sm || (major != 0 && major < min_llvm) {
            continue;
        }
        let t = NvptxTarget {
            cpu: format!("sm_{cand}"),
            features: format!("+ptx{ptx}"),
        };
        let opts = CompileOptions::new(NVPTX_TRIPLE, &t.cpu, &t.features, false);
        let ptx = llvm.compile(NVPTX_PROBE, &opts, Emit::Assembly)?;
        let text = String::from_utf8_lossy(&ptx);
        if text
            .lines()
            .any(|l| l.trim() == format!(".target {}", t.cpu))
        {
            return Ok(t);
        }
        tried.push(t.cpu);
    }
    bail!(
        Compile,
        "LLVM {} ({}) writes PTX for none of the SMs up to sm_{sm} (tried {tried:?}); install a \
         newer libLLVM (LLVM_LIB) or use NV_COMPILER=nvrtc",
        llvm.version(),
        llvm.path().display()
    )
}

/// The PTX LLVM writes for `target` from NVPTX LLVM IR (PTX text passes through).
pub fn ir_to_ptx(llvm: &Llvm, target: &NvptxTarget, src: &str) -> Result<String> {
    if is_ptx(src) {
        return Ok(src.to_string());
    }
    let opts = CompileOptions::new(NVPTX_TRIPLE, &target.cpu, &target.features, true);
    let ptx = llvm.compile(src, &opts, Emit::Assembly)?;
    String::from_utf8(ptx).map_err(|_| crate::Error::Compile("PTX text is not UTF-8".into()))
}

/// Whether `src` is PTX text (has a `.version` directive) rather than LLVM IR or CUDA C.
pub fn is_ptx(src: &str) -> bool {
    src.lines().any(|l| l.trim_start().starts_with(".version "))
}
