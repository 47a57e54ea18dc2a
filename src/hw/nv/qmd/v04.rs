//! QMD V04_00 (Hopper HOPPER_COMPUTE_A; 384 bytes): bit positions from open-gpu-doc
//! `clcbc0qmd.h`.
//!
//! Built "from zeros" (a third-party H100 report: a captured libcuda QMD made the scheduler read
//! VA 0 on H100): QMD_MAJOR_VERSION 4, QMD_MINOR_VERSION 0, API_VISIBLE_CALL_LIMIT = NO_CHECK,
//! SAMPLER_INDEX = INDEPENDENTLY, QMD_TYPE = GRID_CTA (2); everything else is set by the caller.
//! QMD_TYPE 0 is QUEUE in `clcbc0qmd.h`: on a real H200 (driver 580.159.04) such a QMD ran no
//! CTA and still released its semaphores, so every kernel was a silent no-op.

use super::field::*;
use super::Qmd;
use crate::hw::nv::arch::QmdVersion;

const fn cbuf(i: u16) -> CbufFields {
    let b = 1536 + 64 * i;
    CbufFields {
        valid: mw("CONSTANT_BUFFER_VALID", 416 + 4 * i, 416 + 4 * i),
        invalidate: mw("CONSTANT_BUFFER_INVALIDATE", 419 + 4 * i, 419 + 4 * i),
        addr: AddrField {
            lo: mw("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", b + 31, b),
            hi: Some(mw("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", b + 50, b + 32)),
            shift: 6,
        },
        size: mws("CONSTANT_BUFFER_SIZE_SHIFTED4", b + 63, b + 51, 4),
    }
}

/// RELEASE_ENABLE(i) etc. at 320 + 16i; RELEASE_SEMAPHOREi_* at `sem` (640, 768, 896): ADDR
/// 57-bit (UPPER 25 bits), PAYLOAD_LOWER/UPPER at sem+64 / sem+96.
const fn release(i: u16, sem: u16) -> ReleaseFields {
    let r = 320 + 16 * i;
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
    let d = 368 + 5 * i;
    DependentFields {
        enable: mw("DEPENDENT_QMD_ENABLE", d, d),
        action: mw("DEPENDENT_QMD_ACTION", d + 3, d + 1),
        prefetch: mw("DEPENDENT_QMD_PREFETCH", d + 4, d + 4),
        pointer: mws("DEPENDENT_QMD_POINTER", 479 + 32 * i, 448 + 32 * i, 8),
    }
}

static DEPENDENT: [DependentFields; 2] = [dependent(0), dependent(1)];

/// The V04_00 table.
pub static LAYOUT: QmdLayout = QmdLayout {
    version: QmdVersion::V04_00,
    minor_version: mw("QMD_MINOR_VERSION", 579, 576),
    major_version: mw("QMD_MAJOR_VERSION", 583, 580),
    qmd_type: Some(mw("QMD_TYPE", 25, 23)),
    qmd_group_id: mw("QMD_GROUP_ID", 21, 16),
    sm_global_caching_enable: None,
    api_visible_call_limit: mw("API_VISIBLE_CALL_LIMIT", 568, 568),
    sampler_index: mw("SAMPLER_INDEX", 569, 569),
    invalidate: [
        mw("INVALIDATE_TEXTURE_HEADER_CACHE", 602, 602),
        mw("INVALIDATE_TEXTURE_SAMPLER_CACHE", 603, 603),
        mw("INVALIDATE_TEXTURE_DATA_CACHE", 604, 604),
        mw("INVALIDATE_SHADER_DATA_CACHE", 605, 605),
        mw("INVALIDATE_INSTRUCTION_CACHE", 606, 606),
        mw("INVALIDATE_SHADER_CONSTANT_CACHE", 607, 607),
    ],
    cwd_membar_type: mw("CWD_MEMBAR_TYPE", 1137, 1136),
    grid: [
        mw("GRID_WIDTH", 1055, 1024),
        mw("GRID_HEIGHT", 1071, 1056),
        mw("GRID_DEPTH", 1103, 1088),
    ],
    block: [
        mw("CTA_THREAD_DIMENSION0", 1167, 1152),
        mw("CTA_THREAD_DIMENSION1", 1183, 1168),
        mw("CTA_THREAD_DIMENSION2", 1199, 1184),
    ],
    register_count: mw("REGISTER_COUNT", 1208, 1200),
    barrier_count: mw("BARRIER_COUNT", 1215, 1211),
    shared_memory_size: mw("SHARED_MEMORY_SIZE", 601, 584),
    min_sm_config_shared_mem_size: mw("MIN_SM_CONFIG_SHARED_MEM_SIZE", 613, 608),
    max_sm_config_shared_mem_size: mw("MAX_SM_CONFIG_SHARED_MEM_SIZE", 619, 614),
    target_sm_config_shared_mem_size: mw("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 625, 620),
    shader_local_memory_low_size: mw("SHADER_LOCAL_MEMORY_LOW_SIZE", 535, 512),
    shader_local_memory_high_size: mw("SHADER_LOCAL_MEMORY_HIGH_SIZE", 567, 544),
    sass_version: mw("SASS_VERSION", 543, 536),
    program_address: AddrField {
        lo: mw("PROGRAM_ADDRESS_LOWER", 1247, 1216),
        hi: Some(mw("PROGRAM_ADDRESS_UPPER", 1272, 1248)),
        shift: 0,
    },
    program_prefetch_addr: AddrField {
        lo: mw("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1375, 1344),
        hi: Some(mw("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1392, 1376)),
        shift: 8,
    },
    program_prefetch_size: mw("PROGRAM_PREFETCH_SIZE", 1401, 1393),
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
    release: [release(0, 640), release(1, 768), release(2, 896)],
    dependent: &DEPENDENT,
};

/// A V04_00 QMD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdV04 {
    words: [u32; 96],
}

impl QmdV04 {
    /// A QMD with only the "from zeros" fields above set.
    pub fn new() -> QmdV04 {
        let mut q = QmdV04 { words: [0; 96] };
        let w = &mut q.words;
        // The values fit their fields: these cannot fail.
        let _ = LAYOUT.major_version.set(w, 4);
        let _ = LAYOUT
            .qmd_type
            .map(|f| f.set(w, super::QMD_TYPE_GRID_CTA.into()));
        let _ = LAYOUT.api_visible_call_limit.set(w, 1);
        q
    }

    /// A QMD from its 96 dwords (no checks beyond the length).
    pub fn from_dwords(words: &[u32]) -> crate::Result<QmdV04> {
        LAYOUT.check_len(words)?;
        let mut q = QmdV04 { words: [0; 96] };
        q.words.copy_from_slice(words);
        Ok(q)
    }
}

impl Default for QmdV04 {
    fn default() -> Self {
        QmdV04::new()
    }
}

impl Qmd for QmdV04 {
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
