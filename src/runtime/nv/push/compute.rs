//! Compute-class method groups (subchannel [`SUBC_COMPUTE`]): channel setup (shader local memory
//! and the shared/local windows, `clc6c0.h`), the memory barrier (INVALIDATE_SHADER_CACHES_NO_WFI,
//! `clc6c0.h`) and the two launch paths of `clcbc0.h`: a QMD in memory started with SEND_PCAS_A +
//! SEND_SIGNALING_PCAS2_B, or the whole QMD inline (SET_INLINE_QMD_ADDRESS_A/B +
//! LOAD_INLINE_QMD_DATA).

use super::{check_addr, PushBuf, QmdAddrPatch, SUBC_COMPUTE};
use crate::hw::nv::arch::PcasAction;
use crate::hw::nv::methods::*;
use crate::{ensure, Result};

/// The shader local memory (SLM) backing of a channel (tinygrad `_ensure_has_local_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalMemorySetup {
    /// GPU address of the backing.
    pub addr: u64,
    /// Bytes per TPC (a multiple of 0x8000, below 2^40).
    pub bytes_per_tpc: u64,
    /// MAX_SM_COUNT (9 bits; 0xFF as NVK and tinygrad since PR #6890).
    pub max_sm_count: u32,
}

/// Where an inline QMD's dwords sit in the pushbuffer: QMD patch points
/// ([`crate::runtime::nv::qmd`]) apply there after [`crate::runtime::nv::qmd::QmdPatch::rebase`]
/// to `data_pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineQmd {
    /// Position of LOAD_INLINE_QMD_DATA(0)'s data dword.
    pub data_pos: usize,
}

fn split_window(what: &str, addr: u64) -> Result<[u32; 2]> {
    check_addr(what, addr, 1, 49)?;
    Ok([(addr >> 32) as u32, addr as u32])
}

impl PushBuf {
    /// SET_SHADER_LOCAL_MEMORY_A/B: the SLM backing address (A = upper bits, B = lower 32).
    pub fn set_shader_local_memory(&mut self, addr: u64) -> Result<()> {
        let bits = self.classes.arch.local_memory_addr_bits;
        check_addr("SET_SHADER_LOCAL_MEMORY", addr, 1, bits)?;
        self.method(
            SUBC_COMPUTE,
            SET_SHADER_LOCAL_MEMORY_A,
            &[(addr >> 32) as u32, addr as u32],
        )?;
        Ok(())
    }

    /// SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B/C: SLM bytes per TPC and the SM count.
    pub fn set_shader_local_memory_non_throttled(
        &mut self,
        bytes_per_tpc: u64,
        max_sm_count: u32,
    ) -> Result<()> {
        ensure!(
            bytes_per_tpc % 0x8000 == 0 && bytes_per_tpc < 1 << 40,
            InvalidArgument,
            "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED: {bytes_per_tpc:#x} bytes per TPC is not a multiple of 0x8000 below 2^40"
        );
        ensure!(
            max_sm_count <= NON_THROTTLED_MAX_SM_COUNT_MASK,
            InvalidArgument,
            "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C: max SM count {max_sm_count:#x} does not fit 9 bits"
        );
        let data = [
            (bytes_per_tpc >> 32) as u32,
            bytes_per_tpc as u32,
            max_sm_count,
        ];
        self.method(SUBC_COMPUTE, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, &data)?;
        Ok(())
    }

    /// SET_SHADER_LOCAL_MEMORY_WINDOW_A/B.
    pub fn set_shader_local_memory_window(&mut self, addr: u64) -> Result<()> {
        let d = split_window("SET_SHADER_LOCAL_MEMORY_WINDOW", addr)?;
        self.method(SUBC_COMPUTE, SET_SHADER_LOCAL_MEMORY_WINDOW_A, &d)?;
        Ok(())
    }

    /// SET_SHADER_SHARED_MEMORY_WINDOW_A/B; the address must have the arch's window alignment
    /// (4 GiB on Hopper+).
    pub fn set_shader_shared_memory_window(&mut self, addr: u64) -> Result<()> {
        let arch = self.classes.arch;
        ensure!(
            addr % arch.shared_window_align == 0,
            InvalidArgument,
            "SET_SHADER_SHARED_MEMORY_WINDOW: {addr:#x} is not {:#x}-aligned as {} needs",
            arch.shared_window_align,
            arch.compute_class_name
        );
        let d = split_window("SET_SHADER_SHARED_MEMORY_WINDOW", addr)?;
        self.method(SUBC_COMPUTE, SET_SHADER_SHARED_MEMORY_WINDOW_A, &d)?;
        Ok(())
    }

    /// The compute channel's setup (tinygrad `_cmdq_setup_compute_gpfifo`): SET_OBJECT(compute
    /// class) on [`SUBC_COMPUTE`], the SLM backing, and the arch's local and shared windows.
    pub fn compute_setup(&mut self, local: &LocalMemorySetup) -> Result<()> {
        self.all_or_nothing(|b| {
            let arch = b.classes.arch;
            b.set_object(SUBC_COMPUTE, arch.compute_class)?;
            b.set_shader_local_memory(local.addr)?;
            b.set_shader_local_memory_non_throttled(local.bytes_per_tpc, local.max_sm_count)?;
            b.set_shader_local_memory_window(arch.local_window)?;
            b.set_shader_shared_memory_window(arch.shared_window)
        })
    }

    /// INVALIDATE_SHADER_CACHES_NO_WFI with the given caches.
    pub fn invalidate_shader_caches_no_wfi(
        &mut self,
        caches: InvalidateShaderCaches,
    ) -> Result<()> {
        self.method(
            SUBC_COMPUTE,
            INVALIDATE_SHADER_CACHES_NO_WFI,
            &[caches.bits()],
        )?;
        Ok(())
    }

    /// The memory barrier before a launch: INVALIDATE_SHADER_CACHES_NO_WFI with INSTRUCTION |
    /// GLOBAL_DATA | CONSTANT (0x1011).
    pub fn memory_barrier(&mut self) -> Result<()> {
        self.invalidate_shader_caches_no_wfi(InvalidateShaderCaches::all())
    }

    /// Launches the QMD at `qmd_addr` (256-byte aligned, below 2^40): SEND_PCAS_A = address >> 8,
    /// then SEND_SIGNALING_PCAS2_B = the arch's default PCAS action.
    pub fn send_pcas(&mut self, qmd_addr: u64) -> Result<QmdAddrPatch> {
        self.send_pcas_with(qmd_addr, self.classes.arch.pcas_action)
    }

    /// [`PushBuf::send_pcas`] with PCAS action `action` (one that schedules the grid).
    pub fn send_pcas_with(&mut self, qmd_addr: u64, action: PcasAction) -> Result<QmdAddrPatch> {
        check_addr("SEND_PCAS_A", qmd_addr, 256, 40)?;
        ensure!(
            action.schedules(),
            InvalidArgument,
            "SEND_SIGNALING_PCAS2_B: PCAS action {} ({}) does not schedule the grid",
            action as u32,
            action.name()
        );
        self.all_or_nothing(|b| {
            let pcas = b.classes.arch.pcas;
            let pos = b.method(SUBC_COMPUTE, pcas.send_pcas_a, &[(qmd_addr >> 8) as u32])?;
            b.method(SUBC_COMPUTE, pcas.send_signaling_pcas2_b, &[action as u32])?;
            Ok(QmdAddrPatch { pos })
        })
    }

    /// Launches a QMD carried inline: SET_INLINE_QMD_ADDRESS_A/B (where the GPU stores it,
    /// 256-byte aligned, below 2^40), then LOAD_INLINE_QMD_DATA(0..n) with all of `qmd` (exactly
    /// the arch's QMD size). On C8C0+ classes A carries INLINE_SIZE = 384 bytes.
    pub fn launch_inline_qmd(&mut self, qmd_addr: u64, qmd: &[u32]) -> Result<InlineQmd> {
        let arch = self.classes.arch;
        check_addr("SET_INLINE_QMD_ADDRESS", qmd_addr, 256, 40)?;
        ensure!(
            qmd.len() * 4 == arch.qmd_size,
            InvalidArgument,
            "LOAD_INLINE_QMD_DATA: {} bytes given, {} QMDs are {} bytes",
            qmd.len() * 4,
            arch.compute_class_name,
            arch.qmd_size
        );
        let shifted = qmd_addr >> 8;
        let mut a = (shifted >> 32) as u32;
        if arch.inline_qmd_size_bit && arch.qmd_size == 384 {
            a |= INLINE_QMD_SIZE_384;
        }
        self.all_or_nothing(|b| {
            b.method(SUBC_COMPUTE, SET_INLINE_QMD_ADDRESS_A, &[a, shifted as u32])?;
            let data_pos = b.method(SUBC_COMPUTE, LOAD_INLINE_QMD_DATA, qmd)?;
            Ok(InlineQmd { data_pos })
        })
    }
}
