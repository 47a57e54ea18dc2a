//! The code-object v3+ kernel descriptor: the 64 bytes at `<kernel>.kd` that tell the CP how to
//! launch a kernel. Layout from LLVM's AMDGPUUsage.rst "Kernel Descriptor" table:
//! GROUP_SEGMENT_FIXED_SIZE @0, PRIVATE_SEGMENT_FIXED_SIZE @4, KERNARG_SIZE @8,
//! KERNEL_CODE_ENTRY_BYTE_OFFSET @16 (i64), COMPUTE_PGM_RSRC3 @44, RSRC1 @48, RSRC2 @52, the
//! kernel_code_properties enable bits @56 (u16) and KERNARG_PRELOAD_SPEC @58 (u16).
//!
//! The launcher's checks against what rawgrad provides stay with the backend
//! (`runtime::amd::program::check_descriptor`).
//!
//! Not guaranteed: code objects v2 (`amd_kernel_code_t`) are not described.

use crate::{ensure, Result};
use bitflags::bitflags;

bitflags! {
    /// kernel_code_properties of the code-object v3+ kernel descriptor (offset 56; LLVM
    /// AMDGPUUsage.rst "Kernel Descriptor" table, bits 0-6 the user SGPR enables, 10 wavefront
    /// size 32, 11 uses dynamic stack).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct KernelCodeProperties: u16 {
        const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER = 1 << 0;
        const ENABLE_SGPR_DISPATCH_PTR = 1 << 1;
        const ENABLE_SGPR_QUEUE_PTR = 1 << 2;
        const ENABLE_SGPR_KERNARG_SEGMENT_PTR = 1 << 3;
        const ENABLE_SGPR_DISPATCH_ID = 1 << 4;
        const ENABLE_SGPR_FLAT_SCRATCH_INIT = 1 << 5;
        const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE = 1 << 6;
        const ENABLE_WAVEFRONT_SIZE32 = 1 << 10;
        const USES_DYNAMIC_STACK = 1 << 11;
    }
}

/// The code-object v3+ kernel descriptor (LLVM AMDGPUUsage.rst "Kernel Descriptor"; the byte
/// offsets are those of the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    pub kernel_code_entry_byte_offset: i64,
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
    pub kernarg_preload: u16,
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

impl KernelDescriptor {
    /// Parse the 64 bytes at the start of `b`.
    pub fn parse(b: &[u8]) -> Result<KernelDescriptor> {
        ensure!(
            b.len() >= 64,
            InvalidArgument,
            "kernel descriptor: {} bytes, need 64",
            b.len()
        );
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[16..24]);
        Ok(KernelDescriptor {
            group_segment_fixed_size: le32(b, 0),
            private_segment_fixed_size: le32(b, 4),
            kernarg_size: le32(b, 8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(off),
            compute_pgm_rsrc3: le32(b, 44),
            compute_pgm_rsrc1: le32(b, 48),
            compute_pgm_rsrc2: le32(b, 52),
            kernel_code_properties: u16::from_le_bytes([b[56], b[57]]),
            kernarg_preload: u16::from_le_bytes([b[58], b[59]]),
        })
    }

    /// The 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&self.group_segment_fixed_size.to_le_bytes());
        b[4..8].copy_from_slice(&self.private_segment_fixed_size.to_le_bytes());
        b[8..12].copy_from_slice(&self.kernarg_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.kernel_code_entry_byte_offset.to_le_bytes());
        b[44..48].copy_from_slice(&self.compute_pgm_rsrc3.to_le_bytes());
        b[48..52].copy_from_slice(&self.compute_pgm_rsrc1.to_le_bytes());
        b[52..56].copy_from_slice(&self.compute_pgm_rsrc2.to_le_bytes());
        b[56..58].copy_from_slice(&self.kernel_code_properties.to_le_bytes());
        b[58..60].copy_from_slice(&self.kernarg_preload.to_le_bytes());
        b
    }

    /// RSRC2.USER_SGPR.
    pub fn user_sgpr_count(&self) -> u32 {
        (self.compute_pgm_rsrc2 >> 1) & 0x1F
    }
}
