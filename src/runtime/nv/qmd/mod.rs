//! The backend's QMD builders (open-gpu-doc `classes/compute/cl*qmd.h`): [`program_qmd`] builds a
//! program's template "from zeros" (as Mesa NVK, with tinygrad `NVProgram`'s fields),
//! [`Qmd::set_launch`] fills the per-launch fields, and [`patch`] has the patch points graphs use
//! (grid and block dims, cbuf0 address, release address/payload, dependent pointer). The field
//! tables, the `Qmd` trait and its readers are hardware facts in [`crate::hw::nv::qmd`]
//! (re-exported here).
//!
//! Not guaranteed: fields outside the tables are left as built (zero).

pub mod patch;
#[cfg(test)]
mod tests;

pub use crate::hw::nv::qmd::*;
pub use patch::*;

use crate::hw::nv::arch::{NvArch, SharedMemConfig};
use crate::{bail, ensure, Result};

/// What a program's QMD template needs (from the loaded cubin and the device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdProgram {
    /// Address of the kernel's first instruction.
    pub program_addr: u64,
    /// Bytes of the kernel's code (for PROGRAM_PREFETCH_SIZE = min(bytes >> 8, 0x1FF)).
    pub code_bytes: u64,
    /// EIATTR_REGCOUNT.
    pub register_count: u32,
    /// From [`NvArch::shared_mem_config`].
    pub shared: SharedMemConfig,
    /// SLM bytes per thread (SHADER_LOCAL_MEMORY_HIGH_SIZE).
    pub slm_bytes_per_thread: u32,
    /// The device's SM version (sm_90 -> 90).
    pub sm: u32,
    /// Constant banks other than 0 the program carries (bank index, binding).
    pub const_banks: Vec<(usize, ConstantBuffer)>,
}

/// A program's QMD template for `arch`: built from zeros, then tinygrad's per-program fields
/// (tinygrad `ops_nv.py` `NVProgram.__init__`): the texture and shader-data cache invalidates,
/// CWD_MEMBAR_TYPE = L1_SYSMEMBAR, BARRIER_COUNT 1, registers, shared memory, SLM, SASS version,
/// program address and prefetch, the extra constant banks. Copy it per launch and call
/// [`Qmd::set_launch`].
pub fn program_qmd(arch: &NvArch, prg: &QmdProgram) -> Result<AnyQmd> {
    if !arch.has_sm(prg.sm) {
        bail!(
            InvalidArgument,
            "program_qmd: sm_{} is not a {} SM version",
            prg.sm,
            arch.compute_class_name
        )
    }
    ensure!(
        prg.register_count > 0,
        InvalidArgument,
        "program_qmd: a register count of 0 (take it from EIATTR_REGCOUNT)"
    );
    let mut q = AnyQmd::new(arch.qmd_version);
    q.set_cache_invalidates(
        QmdInvalidates::TEXTURE_HEADER
            | QmdInvalidates::TEXTURE_SAMPLER
            | QmdInvalidates::TEXTURE_DATA
            | QmdInvalidates::SHADER_DATA,
    )?;
    q.set_cwd_membar(CwdMembar::L1Sysmembar)?;
    q.set_barrier_count(1)?;
    q.set_register_count(prg.register_count)?;
    q.set_shared_memory(prg.shared)?;
    q.set_shader_local_memory(0, prg.slm_bytes_per_thread)?;
    q.set_sass_version(NvArch::sass_version(prg.sm))?;
    q.set_program_address(prg.program_addr)?;
    let blocks = (prg.code_bytes >> 8).min(0x1FF) as u32;
    q.set_program_prefetch(prg.program_addr & !0xFF, blocks)?;
    for (bank, cb) in &prg.const_banks {
        ensure!(
            *bank != 0,
            InvalidArgument,
            "program_qmd: constant bank 0 is per launch (set_launch)"
        );
        q.set_constant_buffer(*bank, Some(*cb))?;
    }
    Ok(q)
}
