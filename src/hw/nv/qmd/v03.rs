//! QMD V03_00 (Ampere AMPERE_COMPUTE_A/B, Ada ADA_COMPUTE_A; 256 bytes): bit positions from
//! open-gpu-doc `clc6c0qmd.h` / `clc9c0qmd.h` (identical for the fields used).
//!
//! Built "from zeros" with tinygrad's per-program constants that were proven on Ampere/Ada:
//! QMD_GROUP_ID 0x3F, SM_GLOBAL_CACHING_ENABLE, API_VISIBLE_CALL_LIMIT = NO_CHECK,
//! SAMPLER_INDEX = VIA_HEADER_INDEX, QMD_MAJOR_VERSION 3.

use super::field::*;
use super::Qmd;
use crate::hw::nv::arch::QmdVersion;

const fn cbuf(i: u16) -> CbufFields {
    let b = 1024 + 64 * i;
    CbufFields {
        valid: mw("CONSTANT_BUFFER_VALID", 640 + i, 640 + i),
        invalidate: mw("CONSTANT_BUFFER_INVALIDATE", b + 50, b + 50),
        addr: AddrField {
            lo: mw("CONSTANT_BUFFER_ADDR_LOWER", b + 31, b),
            hi: Some(mw("CONSTANT_BUFFER_ADDR_UPPER", b + 48, b + 32)),
            shift: 0,
        },
        size: mws("CONSTANT_BUFFER_SIZE_SHIFTED4", b + 63, b + 51, 4),
    }
}

/// RELEASEi at `b`: ADDRESS_LOWER b+31:b, UPPER b+39:b+32 (40-bit addresses), ENABLE b+55,
/// PAYLOAD64B b+61, STRUCTURE_SIZE b+63:b+62, PAYLOAD_LOWER/UPPER b+64 / b+96.
const fn release(b: u16) -> ReleaseFields {
    ReleaseFields {
        enable: mw("RELEASE_ENABLE", b + 55, b + 55),
        structure_size: mw("RELEASE_STRUCTURE_SIZE", b + 63, b + 62),
        payload64: mw("RELEASE_PAYLOAD64B", b + 61, b + 61),
        addr: AddrField {
            lo: mw("RELEASE_ADDRESS_LOWER", b + 31, b),
            hi: Some(mw("RELEASE_ADDRESS_UPPER", b + 39, b + 32)),
            shift: 0,
        },
        payload_lo: mw("RELEASE_PAYLOAD_LOWER", b + 95, b + 64),
        payload_hi: mw("RELEASE_PAYLOAD_UPPER", b + 127, b + 96),
    }
}

/// V03 has one dependent-QMD pointer (DEPENDENT_QMD0_POINTER); QMD1 has no pointer.
static DEPENDENT: [DependentFields; 1] = [DependentFields {
    enable: mw("DEPENDENT_QMD_ENABLE", 512, 512),
    action: mw("DEPENDENT_QMD_ACTION", 515, 513),
    prefetch: mw("DEPENDENT_QMD_PREFETCH", 516, 516),
    pointer: mws("DEPENDENT_QMD_POINTER", 511, 480, 8),
}];

/// The V03_00 table.
pub static LAYOUT: QmdLayout = QmdLayout {
    version: QmdVersion::V03_00,
    minor_version: mw("QMD_VERSION", 579, 576),
    major_version: mw("QMD_MAJOR_VERSION", 583, 580),
    qmd_type: None,
    qmd_group_id: mw("QMD_GROUP_ID", 133, 128),
    sm_global_caching_enable: Some(mw("SM_GLOBAL_CACHING_ENABLE", 134, 134)),
    api_visible_call_limit: mw("API_VISIBLE_CALL_LIMIT", 378, 378),
    sampler_index: mw("SAMPLER_INDEX", 382, 382),
    invalidate: [
        mw("INVALIDATE_TEXTURE_HEADER_CACHE", 186, 186),
        mw("INVALIDATE_TEXTURE_SAMPLER_CACHE", 187, 187),
        mw("INVALIDATE_TEXTURE_DATA_CACHE", 188, 188),
        mw("INVALIDATE_SHADER_DATA_CACHE", 189, 189),
        mw("INVALIDATE_INSTRUCTION_CACHE", 190, 190),
        mw("INVALIDATE_SHADER_CONSTANT_CACHE", 191, 191),
    ],
    cwd_membar_type: mw("CWD_MEMBAR_TYPE", 369, 368),
    grid: [
        mw("CTA_RASTER_WIDTH", 415, 384),
        mw("CTA_RASTER_HEIGHT", 431, 416),
        mw("CTA_RASTER_DEPTH", 463, 448),
    ],
    block: [
        mw("CTA_THREAD_DIMENSION0", 607, 592),
        mw("CTA_THREAD_DIMENSION1", 623, 608),
        mw("CTA_THREAD_DIMENSION2", 639, 624),
    ],
    register_count: mw("REGISTER_COUNT_V", 656, 648),
    barrier_count: mw("BARRIER_COUNT", 767, 763),
    shared_memory_size: mw("SHARED_MEMORY_SIZE", 561, 544),
    min_sm_config_shared_mem_size: mw("MIN_SM_CONFIG_SHARED_MEM_SIZE", 567, 562),
    max_sm_config_shared_mem_size: mw("MAX_SM_CONFIG_SHARED_MEM_SIZE", 574, 569),
    target_sm_config_shared_mem_size: mw("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 662, 657),
    shader_local_memory_low_size: mw("SHADER_LOCAL_MEMORY_LOW_SIZE", 759, 736),
    shader_local_memory_high_size: mw("SHADER_LOCAL_MEMORY_HIGH_SIZE", 1623, 1600),
    sass_version: mw("SASS_VERSION", 1663, 1656),
    program_address: AddrField {
        lo: mw("PROGRAM_ADDRESS_LOWER", 1567, 1536),
        hi: Some(mw("PROGRAM_ADDRESS_UPPER", 1584, 1568)),
        shift: 0,
    },
    program_prefetch_addr: AddrField {
        lo: mw("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 287, 256),
        hi: Some(mw("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1640, 1632)),
        shift: 8,
    },
    program_prefetch_size: mw("PROGRAM_PREFETCH_SIZE", 1649, 1641),
    cbuf: [
        cbuf(0),
        cbuf(1),
        cbuf(2),
        cbuf(3),
        cbuf(4),
        cbuf(5),
        cbuf(6),
        cbuf(7),
    ],
    release: [release(768), release(896), release(1664)],
    dependent: &DEPENDENT,
};

/// A V03_00 QMD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdV03 {
    words: [u32; 64],
}

impl QmdV03 {
    /// A QMD with only the version and the per-program constants above set.
    pub fn new() -> QmdV03 {
        let mut q = QmdV03 { words: [0; 64] };
        let w = &mut q.words;
        let l = &LAYOUT;
        // The values fit their fields: these cannot fail.
        let _ = l.major_version.set(w, 3);
        let _ = l.qmd_group_id.set(w, 0x3F);
        let _ = l.sm_global_caching_enable.map(|f| f.set(w, 1));
        let _ = l.api_visible_call_limit.set(w, 1);
        let _ = l.sampler_index.set(w, 1);
        q
    }

    /// A QMD from its 64 dwords (no checks beyond the length).
    pub fn from_dwords(words: &[u32]) -> crate::Result<QmdV03> {
        LAYOUT.check_len(words)?;
        let mut q = QmdV03 { words: [0; 64] };
        q.words.copy_from_slice(words);
        Ok(q)
    }
}

impl Default for QmdV03 {
    fn default() -> Self {
        QmdV03::new()
    }
}

impl Qmd for QmdV03 {
    fn layout(&self) -> &'static QmdLayout {
        &LAYOUT
    }
    fn dwords(&self) -> &[u32] {
        &self.words
    }
    fn dwords_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }
}
