//! QMD V05_00 (Blackwell BLACKWELL_COMPUTE_A/B; 384 bytes): bit positions from open-gpu-doc
//! `clcdc0qmd.h` (`clcec0qmd.h` is identical for V05_00). Mesa NVK and tinygrad master
//! build V05 QMDs too; these positions come from NVIDIA's header itself. Note that V05
//! moves QMD_MAJOR_VERSION to 471:468 (583:580 in V03/V04), shifts the
//! program address by 4, the shared memory size by 7 and the SLM sizes by 4. Whether rawgrad's
//! V05 QMDs launch is UNCONFIRMED (no Blackwell hardware run yet).
//!
//! Built "from zeros" as NVK does for V5: QMD_MAJOR_VERSION 5, QMD_TYPE = GRID_CTA (2),
//! API_VISIBLE_CALL_LIMIT = NO_CHECK, SAMPLER_INDEX = INDEPENDENTLY.

use super::field::*;
use super::Qmd;
use crate::hw::nv::arch::QmdVersion;

const fn cbuf(i: u16) -> CbufFields {
    let b = 1344 + 64 * i;
    CbufFields {
        valid: mw("CONSTANT_BUFFER_VALID", 1856 + 4 * i, 1856 + 4 * i),
        invalidate: mw("CONSTANT_BUFFER_INVALIDATE", 1859 + 4 * i, 1859 + 4 * i),
        addr: AddrField {
            lo: mw("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", b + 31, b),
            hi: Some(mw("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", b + 50, b + 32)),
            shift: 6,
        },
        size: mws("CONSTANT_BUFFER_SIZE_SHIFTED4", b + 63, b + 51, 4),
    }
}

/// RELEASE_ENABLE(i) etc. at 288 + 16i; RELEASE_SEMAPHOREi_* at `sem` (480, 768, 896).
const fn release(i: u16, sem: u16) -> ReleaseFields {
    let r = 288 + 16 * i;
    ReleaseFields {
        enable: mw("RELEASE_ENABLE", r, r),
        structure_size: mw("RELEASE_STRUCTURE_SIZE", r + 2, r + 1),
        payload64: mw("RELEASE_PAYLOAD64B", r + 12, r + 12),
        addr: AddrField {
            lo: mw("RELEASE_SEMAPHORE_ADDR_LOWER", sem + 31, sem),
            hi: Some(mw("RELEASE_SEMAPHORE_ADDR_UPPER", sem + 56, sem + 32)),
            shift: 0,
        },
        payload_lo: mw("RELEASE_SEMAPHORE_PAYLOAD_LOWER", sem + 95, sem + 64),
        payload_hi: mw("RELEASE_SEMAPHORE_PAYLOAD_UPPER", sem + 127, sem + 96),
    }
}

const fn dependent(i: u16) -> DependentFields {
    let d = 336 + 8 * i;
    DependentFields {
        enable: mw("DEPENDENT_QMD_ENABLE", d, d),
        action: mw("DEPENDENT_QMD_ACTION", d + 3, d + 1),
        prefetch: mw("DEPENDENT_QMD_PREFETCH", d + 4, d + 4),
        pointer: mws("DEPENDENT_QMD_POINTER", 415 + 32 * i, 384 + 32 * i, 8),
    }
}

static DEPENDENT: [DependentFields; 2] = [dependent(0), dependent(1)];

/// The V05_00 table.
pub static LAYOUT: QmdLayout = QmdLayout {
    version: QmdVersion::V05_00,
    minor_version: mw("QMD_MINOR_VERSION", 467, 464),
    major_version: mw("QMD_MAJOR_VERSION", 471, 468),
    qmd_type: Some(mw("QMD_TYPE", 153, 151)),
    qmd_group_id: mw("QMD_GROUP_ID", 149, 144),
    sm_global_caching_enable: None,
    api_visible_call_limit: mw("API_VISIBLE_CALL_LIMIT", 456, 456),
    sampler_index: mw("SAMPLER_INDEX", 457, 457),
    invalidate: [
        mw("INVALIDATE_TEXTURE_HEADER_CACHE", 472, 472),
        mw("INVALIDATE_TEXTURE_SAMPLER_CACHE", 473, 473),
        mw("INVALIDATE_TEXTURE_DATA_CACHE", 474, 474),
        mw("INVALIDATE_SHADER_DATA_CACHE", 475, 475),
        mw("INVALIDATE_INSTRUCTION_CACHE", 476, 476),
        mw("INVALIDATE_SHADER_CONSTANT_CACHE", 477, 477),
    ],
    cwd_membar_type: mw("CWD_MEMBAR_TYPE", 625, 624),
    grid: [
        mw("GRID_WIDTH", 1279, 1248),
        mw("GRID_HEIGHT", 1295, 1280),
        mw("GRID_DEPTH", 1327, 1312),
    ],
    block: [
        mw("CTA_THREAD_DIMENSION0", 1103, 1088),
        mw("CTA_THREAD_DIMENSION1", 1119, 1104),
        mw("CTA_THREAD_DIMENSION2", 1127, 1120),
    ],
    register_count: mw("REGISTER_COUNT", 1136, 1128),
    barrier_count: mw("BARRIER_COUNT", 1141, 1137),
    shared_memory_size: mws("SHARED_MEMORY_SIZE_SHIFTED7", 1162, 1152, 7),
    min_sm_config_shared_mem_size: mw("MIN_SM_CONFIG_SHARED_MEM_SIZE", 1168, 1163),
    max_sm_config_shared_mem_size: mw("MAX_SM_CONFIG_SHARED_MEM_SIZE", 1174, 1169),
    target_sm_config_shared_mem_size: mw("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 1180, 1175),
    shader_local_memory_low_size: mws("SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4", 1199, 1184, 4),
    shader_local_memory_high_size: mws("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 1215, 1200, 4),
    sass_version: mw("SASS_VERSION", 455, 448),
    program_address: AddrField {
        lo: mw("PROGRAM_ADDRESS_LOWER_SHIFTED4", 1055, 1024),
        hi: Some(mw("PROGRAM_ADDRESS_UPPER_SHIFTED4", 1076, 1056)),
        shift: 4,
    },
    program_prefetch_addr: AddrField {
        lo: mw("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1919, 1888),
        hi: Some(mw("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1936, 1920)),
        shift: 8,
    },
    program_prefetch_size: mw("PROGRAM_PREFETCH_SIZE", 1085, 1077),
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
    release: [release(0, 480), release(1, 768), release(2, 896)],
    dependent: &DEPENDENT,
};

/// A V05_00 QMD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdV05 {
    words: [u32; 96],
}

impl QmdV05 {
    /// A QMD with only the NVK "from zeros" fields above set.
    pub fn new() -> QmdV05 {
        let mut q = QmdV05 { words: [0; 96] };
        let w = &mut q.words;
        // The values fit their fields: these cannot fail.
        let _ = LAYOUT.major_version.set(w, 5);
        let _ = LAYOUT.qmd_type.map(|f| f.set(w, 2));
        let _ = LAYOUT.api_visible_call_limit.set(w, 1);
        q
    }

    /// A QMD from its 96 dwords (no checks beyond the length).
    pub fn from_dwords(words: &[u32]) -> crate::Result<QmdV05> {
        LAYOUT.check_len(words)?;
        let mut q = QmdV05 { words: [0; 96] };
        q.words.copy_from_slice(words);
        Ok(q)
    }
}

impl Default for QmdV05 {
    fn default() -> Self {
        QmdV05::new()
    }
}

impl Qmd for QmdV05 {
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
