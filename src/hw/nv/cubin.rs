//! Cubin format facts: the ELF64 identification of a CUDA binary, the `.nv.info` attribute
//! records (EIATTR_*, EIFMT_*), the relocation types applied at load time, and the decoded
//! EIATTR_KPARAM_INFO record; [`elf`] reads and writes the ELF container.
//!
//! Sources: EM_CUDA (190) is the ELF machine number registered for NVIDIA CUDA (the System V gABI
//! machine list, binutils `include/elf/common.h` EM_CUDA). NVIDIA publishes no header for the
//! `.nv.info` records or R_CUDA_* relocations: the values here are those `cuobjdump -elf` /
//! `nvdisasm` print by name (EIATTR_REGCOUNT, EIATTR_KPARAM_INFO, ...; R_CUDA_64,
//! R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32); the loader's tests read them from ptxas outputs in
//! `tests/fixtures/cubin/`.
//!
//! Not guaranteed: attributes not listed here are skipped by readers, not understood.

pub mod elf;

/// e_machine of cubins.
pub const EM_CUDA: u16 = 190;
/// EI_OSABI of cubins (CUDA 12+; 0x33 in older toolchains, UNCONFIRMED).
pub const ELFOSABI_CUDA: u8 = 0x41;
/// EI_OSABI of cubins from older toolchains (UNCONFIRMED).
pub const ELFOSABI_CUDA_OLD: u8 = 0x33;

/// `.nv.info` attributes (EIATTR_*) the loader reads.
pub const EIATTR_PARAM_CBANK: u8 = 0x0A;
pub const EIATTR_FRAME_SIZE: u8 = 0x11;
pub const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
pub const EIATTR_KPARAM_INFO: u8 = 0x17;
pub const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
pub const EIATTR_MAXREG_COUNT: u8 = 0x1B;
pub const EIATTR_EXIT_INSTR_OFFSETS: u8 = 0x1C;
pub const EIATTR_REGCOUNT: u8 = 0x2F;
pub const EIATTR_CUDA_API_VERSION: u8 = 0x37;
/// `.nv.info` record formats.
pub const EIFMT_NVAL: u8 = 1;
pub const EIFMT_BVAL: u8 = 2;
pub const EIFMT_HVAL: u8 = 3;
pub const EIFMT_SVAL: u8 = 4;

/// Relocation types applied against the image's load address.
pub const R_CUDA_64: u32 = 2;
pub const R_CUDA_ABS32_LO_32: u32 = 0x38;
pub const R_CUDA_ABS32_HI_32: u32 = 0x39;

/// One kernel parameter (EIATTR_KPARAM_INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KParam {
    pub ordinal: u32,
    /// Offset from the parameter base.
    pub offset: u32,
    /// Bytes (flags bits 31:18).
    pub size: u32,
}
