//! The per-gfx table: every fact about an AMD GPU generation that changes how rawgrad builds
//! packets, sizes queue buffers or picks a compiler lives here, as one `static` [`GfxTarget`] per
//! chip (in the style of Asahi's `hw/t8103.rs`). Code elsewhere reads fields of the table; it
//! never branches on a gfx number.
//!
//! Sources: tinygrad's `ops_amd.py` (0.9.x and later), Linux `amdkfd/kfd_queue.c`, `amdgpu/nvd.h`,
//! `sdma_v6_0_0_pkt_open.h`, the amdgpu register headers and LLVM's `AMDGPUUsage.rst`. Facts marked
//! NOT CONFIRMED were not checked against a source for that chip (usually: carried over from a
//! neighbouring generation) and must be re-verified on hardware.
//!
//! Not guaranteed: chips outside the table (lookup fails with the list of known targets); facts
//! still marked NOT CONFIRMED below (NBIO segment bases, SDMA revisions, ELF machine numbers,
//! the private segment descriptor's word 3, TMPRING units before gfx11).

use crate::{bail, ensure, Result};

/// ACQUIRE_MEM layout of a generation (`nvd.h` PACKET3_ACQUIRE_MEM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireMemLayout {
    /// gfx9: 7 dwords, cache actions in CP_COHER_CNTL (DW1), poll interval 0x0A.
    Gfx9CoherCntl,
    /// gfx10+: 8 dwords, cache actions in GCR_CNTL (DW7).
    Gfx10GcrCntl,
}

/// How RELEASE_MEM encodes its cache actions in DW1 (`nvd.h` PACKET3_RELEASE_MEM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseMemCache {
    /// gfx9: EOP_TC_*_ACTION_EN bits (Linux amdgpu soc15d.h, PACKET3_RELEASE_MEM).
    Gfx9EopActions,
    /// gfx10+: GCR bits 12-22 (GLM_WB .. SEQ; Linux amdgpu nvd.h PACKET3_RELEASE_MEM_GCR_*).
    Gfx10Gcr,
}

/// How a kernel finds its scratch (private segment) memory (tinygrad 0.10.3). Which chip has which
/// is the "Absolute flat scratch" / "Architected flat scratch" column of LLVM's AMDGPUUsage.rst
/// processor table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScratchModel {
    /// Absolute flat scratch (gfx90a, gfx10.3): the kernel reads a 4-dword buffer resource
    /// descriptor from user SGPRs s0-s3 when its descriptor enables
    /// ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER.
    PrivateSegmentDescriptor,
    /// Architected flat scratch (gfx940-942, gfx11, gfx12): the CP programs flat scratch from
    /// COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI; AMDGPUUsage.rst (kernel descriptor table): the
    /// private segment buffer and flat scratch init SGPRs are "not supported and must be 0".
    ArchitectedFlatScratch,
}

/// SET_SH_REG offsets (relative to 0x2C00) that differ between generations, and which optional
/// registers rawgrad programs; the common ones are in `pm4::ShReg`.
///
/// Offsets from the Linux amdgpu register headers `gc_9_4_3_offset.h`, `gc_10_3_0_offset.h`,
/// `gc_11_0_0_offset.h`, `gc_12_0_0_offset.h`: there COMPUTE_DISPATCH_INITIATOR is 0x0e00 (9.4.3)
/// or 0x1ba0 (GC segment 0), which is SET_SH_REG offset 0x200 (dword 0x2E00), and every compute
/// register sits at the same distance from it on all four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShRegLayout {
    /// COMPUTE_PGM_RSRC3: 0x228 on gfx10+ (regCOMPUTE_PGM_RSRC3 0x1bc8), 0x22D on gfx9.4
    /// (0x0e2d; 0x22C is COMPUTE_SHADER_CHKSUM there).
    pub compute_pgm_rsrc3: u32,
    /// COMPUTE_STATIC_THREAD_MGMT_SE4..SE7 at 0x22B..0x22E exist (gfx11 and gfx12 only).
    pub static_thread_mgmt_se4_7: bool,
    /// COMPUTE_DISPATCH_PKT_ADDR_LO/HI at 0x20E/0x20F are programmed (they exist on gfx9.4,
    /// gfx10.3, gfx11 and gfx12; on gfx9.0 these offsets are TBA_LO/HI).
    pub dispatch_pkt_addr: bool,
    /// COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI at 0x210/0x211 (scratch VA >> 8) are programmed: on
    /// the chips with architected flat scratch, where the CP reads them. gc_10_3_0_offset.h has
    /// them too, but gfx10.3 kernels use the private segment descriptor instead, so rawgrad
    /// leaves them alone there (as tinygrad does) and the decoder refuses a write to them.
    pub dispatch_scratch_base: bool,
}

/// COMPUTE_TMPRING_SIZE field units (tinygrad `AMDDevice.__init__` scratch). The fields are WAVES
/// 11:0 and WAVESIZE 24:12 (gc_9_4_3_sh_mask.h, Mesa gfx10.json); the units are tinygrad's, NOT
/// CONFIRMED against AMD documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmpringLayout {
    /// Unit of WAVESIZE (bits 24:12): 256 bytes on gfx11+, 1024 bytes before.
    pub wavesize_unit_bytes: u32,
    /// WAVES (bits 11:0) counts waves per shader engine (gfx11+) instead of per device.
    pub waves_per_se: bool,
}

/// The SDMA engine of a chip (`sdma_v6_0_0_pkt_open.h`, tinygrad 0.10.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdmaInfo {
    /// SDMA IP version (major, minor, revision).
    pub version: (u32, u32, u32),
    /// Width of COPY_LINEAR's COUNT field (bytes - 1): 22 bits on SDMA 4
    /// (vega10_sdma_pkt_open.h SDMA_PKT_COPY_LINEAR_COUNT_count_mask 0x003FFFFF), 30 bits on
    /// SDMA 6/7 (sdma_v6_0_0_pkt_open.h 0x3FFFFFFF) and on SDMA 5.2 (Mesa `ac_cmdbuf_sdma.c` copies
    /// up to SDMA_V5_2_COPY_MAX_BYTES there; Linux's navi10_sdma_pkt_open.h, written for 5.0,
    /// still shows 22 bits).
    pub copy_count_bits: u32,
    /// Bytes per COPY_LINEAR packet rawgrad emits: Mesa `src/amd/common/sid.h`
    /// SDMA_V2_0_COPY_MAX_BYTES 0x3fff00 before SDMA 5.2, SDMA_V5_2_COPY_MAX_BYTES 0x3fffff00
    /// from 5.2 on ("an undocumented HW limitation ... prevents the HW from copying the last 255
    /// bytes of (1 << 22) - 1"). The software GPU refuses larger copies.
    pub max_copy_bytes: u64,
    /// FENCE header MTYPE (bits 18:16) to emit: 3 (uncached) from SDMA 5 on (navi10 and
    /// sdma_v6_0_0 headers SDMA_PKT_FENCE_HEADER_mtype, amdgpu `sdma_v5_2_ring_emit_fence`);
    /// SDMA 4's FENCE header has no MTYPE field (vega10_sdma_pkt_open.h), so none there.
    pub fence_mtype: Option<u32>,
}

/// The wave32 WMMA (matrix multiply-accumulate) instructions a chip has and the operand
/// layout they use (the renderers' tensor cores and the emulator follow it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wmma {
    /// None that rawgrad uses: gfx10.3 has no WMMA; gfx9's CDNA MFMA has no renderer here.
    None,
    /// RDNA3 (gfx11), RDNA3 ISA section 7.9 "Wave Matrix Multiply Accumulate": A and B 16
    /// 16-bit values per lane (lanes 16-31 repeat lanes 0-15), C/D 8 per lane.
    Rdna3,
    /// RDNA4 (gfx12), RDNA4 ISA guide ("Wave Matrix Multiply Accumulate") and AMD GPUOpen
    /// "Using the Matrix Cores of AMD RDNA 4 architecture GPUs": A and B 8 16-bit values per
    /// lane with no repeated lanes, C/D 8 per lane; not backward compatible with RDNA3.
    Rdna4,
}

/// How the CWSR wave count is derived (kfd_queue.c `kfd_queue_ctx_save_restore_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwsrWaves {
    /// gfx < 10.1: min(cu_num * 40, engines * 512).
    Gfx9 { per_cu: u32, per_engine: u32 },
    /// gfx10.1+: cu_num * 32.
    PerCu(u32),
}

/// Facts for the compute-queue context save/restore area (Linux `amdkfd/kfd_queue.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CwsrInfo {
    /// Control-stack bytes per wave: 8 before gfx10.1, 12 after.
    pub ctl_stack_bytes_per_wave: u32,
    /// gfx10.x caps the control stack at 0x7000 (tinygrad#9363).
    pub ctl_stack_cap: Option<u32>,
    /// VGPR bytes saved per CU.
    pub vgpr_size_per_cu: u32,
    /// The wave-count formula.
    pub waves: CwsrWaves,
}

/// HDP flush registers (dword register addresses) for the PM4 WAIT_REG_MEM write-then-wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdpFlushRegs {
    /// BIF_BX_PF*_GPU_HDP_FLUSH_REQ (NBIO segment 2 base + 0x106).
    pub req: u32,
    /// BIF_BX_PF*_GPU_HDP_FLUSH_DONE (NBIO segment 2 base + 0x107).
    pub done: u32,
}

/// Everything rawgrad needs to know about one gfx target.
#[derive(Debug, PartialEq, Eq)]
pub struct GfxTarget {
    /// KFD topology `gfx_target_version` (major*10000 + minor*100 + stepping).
    pub gfx_target_version: u32,
    /// LLVM processor name (`-mcpu`), e.g. "gfx1100".
    pub name: &'static str,
    /// GFX generation: 9, 10, 11 or 12.
    pub generation: u32,
    /// ELF `e_flags` EF_AMDGPU_MACH value of code objects for this chip.
    pub elf_mach: u32,
    /// Default wave size of compiled kernels (64 on gfx9, 32 on gfx10+).
    pub wave_size: u32,
    /// The chip can run wave32 kernels (DISPATCH_INITIATOR.CS_W32_EN exists).
    pub wave32: bool,
    /// ACQUIRE_MEM layout.
    pub acquire_mem: AcquireMemLayout,
    /// RELEASE_MEM cache-bit encoding.
    pub release_mem_cache: ReleaseMemCache,
    /// The GL2 metadata cache actions (GCR GLM_WB/GLM_INV in ACQUIRE_MEM and RELEASE_MEM) are
    /// sent. gfx10.3 and gfx11 send them with every L2 writeback (amdgpu `gfx_v11_0_ring_emit_fence`:
    /// "GLM_INV must be set with GLM_WB"); gfx12 does not: Mesa radeonsi `si_barrier.c`
    /// (`gfx10_emit_barrier`) adds them only when `gfx_level < GFX12` and amdgpu
    /// `gfx_v12_0_ring_emit_fence` leaves them out of RELEASE_MEM. The encoders drop them where
    /// this is false and the decoder refuses them. On gfx9 (no GCR) they become RELEASE_MEM's
    /// EOP_TC_MD_ACTION_EN, as in amdgpu's `gfx_v9_4_3_ring_emit_fence`.
    pub gcr_glm: bool,
    /// SH register offsets that differ.
    pub sh: ShRegLayout,
    /// Scratch model.
    pub scratch: ScratchModel,
    /// Word 3 of the private-segment buffer descriptor passed in s0-s3
    /// (0x14 << 12 | 2 << 28 | 2 << 21 | 1 << 23, tinygrad 0.10+).
    pub private_segment_word3: u32,
    /// COMPUTE_TMPRING_SIZE units.
    pub tmpring: TmpringLayout,
    /// COMPUTE_PGM_RSRC2.LDS_SIZE granule in bytes: 128 dwords from GFX7 on (Mesa
    /// `ac_gpu_info.c` `lds_encode_granularity`).
    pub lds_granule_bytes: u32,
    /// Largest LDS allocation per workgroup in bytes.
    pub lds_max_bytes: u32,
    /// OR COMPUTE_PGM_RSRC1.PRIV (bit 20) into every launch (gfx11 CWSR workaround, tinygrad#6950).
    pub rsrc1_priv_cwsr_workaround: bool,
    /// SDMA engine facts.
    pub sdma: SdmaInfo,
    /// CWSR sizing facts.
    pub cwsr: CwsrInfo,
    /// EOP buffer size KFD requires for compute queues.
    pub eop_size: u32,
    /// HDP flush registers; `None` where the NBIO segment base is not known for the chip.
    pub hdp_flush: Option<HdpFlushRegs>,
    /// Oldest LLVM major version whose AMDGPU backend knows this processor.
    pub min_llvm: u32,
    /// The WMMA instructions and their register layout.
    pub wmma: Wmma,
}

/// HDP flush registers on NBIO segment 2 base 0xD20 (tinygrad's `nbioreg`, gfx11).
const HDP_SEG2_D20: HdpFlushRegs = HdpFlushRegs {
    req: 0xD20 + 0x106,
    done: 0xD20 + 0x107,
};

const SDMA4: SdmaInfo = SdmaInfo {
    version: (4, 4, 0),
    copy_count_bits: 22,
    max_copy_bytes: 0x3F_FF00,
    fence_mtype: None,
};

const fn sdma5plus(version: (u32, u32, u32)) -> SdmaInfo {
    SdmaInfo {
        version,
        copy_count_bits: 30,
        max_copy_bytes: 0x3FFF_FF00,
        fence_mtype: Some(3),
    }
}

const GFX9_SH: ShRegLayout = ShRegLayout {
    compute_pgm_rsrc3: 0x22D,
    static_thread_mgmt_se4_7: false,
    dispatch_pkt_addr: false,
    dispatch_scratch_base: false,
};

const GFX11_SH: ShRegLayout = ShRegLayout {
    compute_pgm_rsrc3: 0x228,
    static_thread_mgmt_se4_7: true,
    dispatch_pkt_addr: true,
    dispatch_scratch_base: true,
};

const PRIVATE_SEGMENT_WORD3: u32 = 0x14 << 12 | 2 << 28 | 2 << 21 | 1 << 23;

/// MI200 (Aldebaran, CDNA2).
pub static GFX90A: GfxTarget = GfxTarget {
    gfx_target_version: 90010,
    name: "gfx90a",
    generation: 9,
    elf_mach: 0x3F, // LLVM ELF.h; NOT CONFIRMED on a produced object
    wave_size: 64,
    wave32: false,
    acquire_mem: AcquireMemLayout::Gfx9CoherCntl,
    release_mem_cache: ReleaseMemCache::Gfx9EopActions,
    gcr_glm: true,
    // gc_9_4_2_offset.h: regCOMPUTE_PGM_RSRC3 0x0e2d (SH offset 0x22D, as gfx9.4.3); the dispatch
    // packet/scratch base registers exist but absolute flat scratch does not read them.
    sh: GFX9_SH,
    scratch: ScratchModel::PrivateSegmentDescriptor,
    // tinygrad PR #13509 revisited this word for gfx9: NOT CONFIRMED.
    private_segment_word3: PRIVATE_SEGMENT_WORD3,
    tmpring: TmpringLayout {
        wavesize_unit_bytes: 1024,
        waves_per_se: false,
    },
    lds_granule_bytes: 512,
    lds_max_bytes: 64 * 1024,
    rsrc1_priv_cwsr_workaround: false,
    sdma: SDMA4,
    cwsr: CwsrInfo {
        ctl_stack_bytes_per_wave: 8,
        ctl_stack_cap: None,
        vgpr_size_per_cu: 0x80000,
        waves: CwsrWaves::Gfx9 {
            per_cu: 40,
            per_engine: 512,
        },
    },
    eop_size: 4096,
    // aldebaran_ip_offset.h: NBIO segment 2 at 0xD20; REQ/DONE at 0x106/0x107 inferred from the
    // other NBIO versions (NOT CONFIRMED for nbio 7.4).
    hdp_flush: Some(HDP_SEG2_D20),
    min_llvm: 14,
    wmma: Wmma::None,
};

/// MI300 (CDNA3).
pub static GFX942: GfxTarget = GfxTarget {
    gfx_target_version: 90402,
    name: "gfx942",
    generation: 9,
    elf_mach: 0x4C, // LLVM ELF.h; NOT CONFIRMED on a produced object
    wave_size: 64,
    wave32: false,
    acquire_mem: AcquireMemLayout::Gfx9CoherCntl,
    release_mem_cache: ReleaseMemCache::Gfx9EopActions,
    gcr_glm: true,
    // gfx9.4.3 register header: same SH offsets as gfx11 except RSRC3, no SE4..7, and it has the
    // dispatch packet/scratch base registers (`gc_9_4_3_offset.h`).
    sh: ShRegLayout {
        compute_pgm_rsrc3: 0x22D,
        static_thread_mgmt_se4_7: false,
        dispatch_pkt_addr: true,
        dispatch_scratch_base: true,
    },
    // AMDGPUUsage.rst processor table: gfx942 has "Architected flat scratch" (gfx90a has
    // "Absolute flat scratch"), so its kernels never read a private segment descriptor.
    scratch: ScratchModel::ArchitectedFlatScratch,
    private_segment_word3: PRIVATE_SEGMENT_WORD3, // unused: no private segment descriptor
    tmpring: TmpringLayout {
        wavesize_unit_bytes: 1024,
        waves_per_se: false,
    },
    lds_granule_bytes: 512,
    lds_max_bytes: 64 * 1024,
    rsrc1_priv_cwsr_workaround: false,
    sdma: SdmaInfo {
        version: (4, 4, 2),
        ..SDMA4
    },
    cwsr: CwsrInfo {
        ctl_stack_bytes_per_wave: 8,
        ctl_stack_cap: None,
        vgpr_size_per_cu: 0x80000,
        waves: CwsrWaves::Gfx9 {
            per_cu: 40,
            per_engine: 512,
        },
    },
    eop_size: 4096,
    // NBIO 7.9's segment base comes from ip_discovery; not in this table.
    hdp_flush: None,
    min_llvm: 17, // LLVM `GCNProcessors.td`: 17+ (NOT CONFIRMED), 19 observed
    wmma: Wmma::None,
};

/// RDNA2 (Navi 21).
pub static GFX1030: GfxTarget = GfxTarget {
    gfx_target_version: 100300,
    name: "gfx1030",
    generation: 10,
    elf_mach: 0x36, // EF_AMDGPU_MACH, LLVM `ELF.h`
    wave_size: 32,
    wave32: true,
    acquire_mem: AcquireMemLayout::Gfx10GcrCntl,
    release_mem_cache: ReleaseMemCache::Gfx10Gcr,
    gcr_glm: true,
    // gc_10_3_0_offset.h: the gfx11 offsets for PGM_LO, RSRC3, USER_DATA; no SE4..7. The dispatch
    // packet/scratch base registers exist but are not programmed (see `ShRegLayout`).
    sh: ShRegLayout {
        compute_pgm_rsrc3: 0x228,
        static_thread_mgmt_se4_7: false,
        dispatch_pkt_addr: false,
        dispatch_scratch_base: false,
    },
    scratch: ScratchModel::PrivateSegmentDescriptor,
    private_segment_word3: PRIVATE_SEGMENT_WORD3,
    tmpring: TmpringLayout {
        wavesize_unit_bytes: 1024,
        waves_per_se: false,
    },
    lds_granule_bytes: 512,
    lds_max_bytes: 64 * 1024,
    rsrc1_priv_cwsr_workaround: false,
    sdma: sdma5plus((5, 2, 0)),
    cwsr: CwsrInfo {
        ctl_stack_bytes_per_wave: 12,
        ctl_stack_cap: Some(0x7000),
        vgpr_size_per_cu: 0x40000,
        waves: CwsrWaves::PerCu(32),
    },
    eop_size: 4096,
    // NBIO 2.3 (BIF_BX_PF_GPU_HDP_FLUSH_REQ/DONE, no PF digit) on segment 2 at 0xD20: NOT CONFIRMED.
    hdp_flush: Some(HDP_SEG2_D20),
    min_llvm: 14,
    wmma: Wmma::None,
};

const fn gfx11(
    version: u32,
    name: &'static str,
    elf_mach: u32,
    vgpr: u32,
    sdma_rev: u32,
) -> GfxTarget {
    GfxTarget {
        gfx_target_version: version,
        name,
        generation: 11,
        elf_mach,
        wave_size: 32,
        wave32: true,
        acquire_mem: AcquireMemLayout::Gfx10GcrCntl,
        release_mem_cache: ReleaseMemCache::Gfx10Gcr,
        gcr_glm: true,
        sh: GFX11_SH,
        scratch: ScratchModel::ArchitectedFlatScratch,
        private_segment_word3: PRIVATE_SEGMENT_WORD3,
        tmpring: TmpringLayout {
            wavesize_unit_bytes: 256,
            waves_per_se: true,
        },
        lds_granule_bytes: 512,
        lds_max_bytes: 64 * 1024,
        rsrc1_priv_cwsr_workaround: true,
        sdma: sdma5plus((6, 0, sdma_rev)),
        cwsr: CwsrInfo {
            ctl_stack_bytes_per_wave: 12,
            ctl_stack_cap: None,
            vgpr_size_per_cu: vgpr,
            waves: CwsrWaves::PerCu(32),
        },
        eop_size: 4096,
        // NBIO 4.3 BIF_BX_PF1_GPU_HDP_FLUSH_REQ/DONE = 0x106/0x107 + seg2 0xD20 (tinygrad).
        hdp_flush: Some(HDP_SEG2_D20),
        min_llvm: 15,
        wmma: Wmma::Rdna3,
    }
}

/// RDNA3 (Navi 31, 7900 XTX). `elf_mach` 0x41 observed.
pub static GFX1100: GfxTarget = gfx11(110000, "gfx1100", 0x41, 0x60000, 0);
/// RDNA3 (Navi 32). SDMA revision and `elf_mach` from LLVM ELF.h: NOT CONFIRMED.
pub static GFX1101: GfxTarget = gfx11(110001, "gfx1101", 0x46, 0x60000, 2);
/// RDNA3 (Navi 33). SDMA revision and `elf_mach` from LLVM ELF.h: NOT CONFIRMED.
pub static GFX1102: GfxTarget = gfx11(110002, "gfx1102", 0x47, 0x40000, 1);

/// RDNA4 (Navi 48). SH register offsets as gfx11 (gc_12_0_0_offset.h); no GLM cache actions.
pub static GFX1201: GfxTarget = GfxTarget {
    gfx_target_version: 120001,
    name: "gfx1201",
    generation: 12,
    gcr_glm: false,
    elf_mach: 0x4E, // LLVM ELF.h; NOT CONFIRMED on a produced object
    rsrc1_priv_cwsr_workaround: false,
    // SDMA 7.0: amdgpu's sdma_v7_0.c builds its packets from sdma_v6_0_0_pkt_open.h (30-bit
    // COPY_LINEAR count); Mesa's SDMA_V5_2_COPY_MAX_BYTES covers every SDMA from 5.2 on.
    sdma: sdma5plus((7, 0, 1)),
    // NBIF 6.3.1 BIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE = 0x106/0x107; segment base NOT CONFIRMED.
    hdp_flush: Some(HDP_SEG2_D20),
    min_llvm: 18, // LLVM `GCNProcessors.td`: 18 (NOT CONFIRMED), 19 observed
    wmma: Wmma::Rdna4,
    ..gfx11(120001, "gfx1201", 0x4E, 0x60000, 0)
};

/// Every target in the table.
pub static TARGETS: [&GfxTarget; 7] = [
    &GFX90A, &GFX942, &GFX1030, &GFX1100, &GFX1101, &GFX1102, &GFX1201,
];

/// The table entry of a KFD `gfx_target_version`.
pub fn lookup(gfx_target_version: u32) -> Result<&'static GfxTarget> {
    for t in TARGETS {
        if t.gfx_target_version == gfx_target_version {
            return Ok(t);
        }
    }
    let known: Vec<String> = TARGETS
        .iter()
        .map(|t| format!("{} ({})", t.name, t.gfx_target_version))
        .collect();
    bail!(
        Device,
        "AMD target lookup: gfx_target_version {} ({}) is not in the target table; known: {}",
        gfx_target_version,
        gfx_name(gfx_target_version),
        known.join(", ")
    )
}

/// The table entry of an LLVM processor name such as "gfx1100".
pub fn lookup_name(name: &str) -> Result<&'static GfxTarget> {
    match TARGETS.iter().find(|t| t.name == name) {
        Some(t) => Ok(t),
        None => {
            let known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
            bail!(
                Device,
                "AMD target lookup: {name:?} is not in the target table; known: {}",
                known.join(", ")
            )
        }
    }
}

/// The processor name of a `gfx_target_version` as KFD/LLVM spell it: `gfx` + major in decimal +
/// minor and stepping in hex (90010 -> gfx90a, 110000 -> gfx1100).
pub fn gfx_name(gfx_target_version: u32) -> String {
    let (major, minor, stepping) = (
        gfx_target_version / 10000,
        (gfx_target_version / 100) % 100,
        gfx_target_version % 100,
    );
    format!("gfx{major}{minor:x}{stepping:x}")
}

/// Topology counts the CWSR formula needs (KFD `properties` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CwsrTopology {
    pub simd_count: u32,
    pub simd_per_cu: u32,
    pub num_xcc: u32,
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
}

/// Queue-buffer sizes KFD >= 6.12 checks exactly (`kfd_queue.c` `kfd_queue_acquire_buffers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CwsrSizes {
    /// `ctl_stack_size` for CREATE_QUEUE.
    pub ctl_stack_size: u32,
    /// `ctx_save_restore_size` for CREATE_QUEUE (control stack + workgroup data).
    pub cwsr_size: u32,
    /// Debugger memory appended to each XCC's area.
    pub debug_memory_size: u32,
    /// Size of the CWSR buffer object: align((cwsr + debug) * num_xcc, 4096).
    pub cwsr_bo_size: u64,
}

const PAGE: u64 = 4096;

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl GfxTarget {
    /// The CWSR sizes of `kfd_queue_ctx_save_restore_size` for this chip and topology.
    pub fn cwsr_sizes(&self, topo: &CwsrTopology) -> Result<CwsrSizes> {
        ensure!(
            topo.simd_per_cu > 0 && topo.num_xcc > 0 && topo.simd_arrays_per_engine > 0,
            InvalidArgument,
            "cwsr_sizes({}): zero divisor in topology {:?}",
            self.name,
            topo
        );
        let cu_num = u64::from(topo.simd_count / topo.simd_per_cu / topo.num_xcc);
        let wave_num = match self.cwsr.waves {
            CwsrWaves::Gfx9 { per_cu, per_engine } => {
                let engines = u64::from(topo.array_count / topo.simd_arrays_per_engine);
                (cu_num * u64::from(per_cu)).min(engines * u64::from(per_engine))
            }
            CwsrWaves::PerCu(n) => cu_num * u64::from(n),
        };
        let per_cu = u64::from(self.cwsr.vgpr_size_per_cu) + 0x4000 + 0x10000 + 0x1000;
        let wg_data_size = align_up(cu_num * per_cu, PAGE);
        let mut ctl = align_up(
            40 + wave_num * u64::from(self.cwsr.ctl_stack_bytes_per_wave) + 8,
            PAGE,
        );
        if let Some(cap) = self.cwsr.ctl_stack_cap {
            ctl = ctl.min(u64::from(cap));
        }
        let cwsr = ctl + wg_data_size;
        let debug = align_up(wave_num * 32, 64);
        let bo = align_up((cwsr + debug) * u64::from(topo.num_xcc), PAGE);
        let to32 = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| {
                crate::Error::InvalidArgument(format!(
                    "cwsr_sizes({}): {what} {v:#x} exceeds 32 bits",
                    self.name
                ))
            })
        };
        Ok(CwsrSizes {
            ctl_stack_size: to32(ctl, "ctl_stack_size")?,
            cwsr_size: to32(cwsr, "cwsr_size")?,
            debug_memory_size: to32(debug, "debug_memory_size")?,
            cwsr_bo_size: bo,
        })
    }

    /// COMPUTE_TMPRING_SIZE for `waves` (per SE or per device, see [`TmpringLayout`]) of
    /// `wave_scratch_bytes` each: WAVES in bits 11:0, WAVESIZE in bits 24:12.
    pub fn tmpring_size(&self, waves: u32, wave_scratch_bytes: u64) -> Result<u32> {
        let unit = u64::from(self.tmpring.wavesize_unit_bytes);
        ensure!(
            wave_scratch_bytes % unit == 0,
            InvalidArgument,
            "tmpring_size({}): wave scratch {wave_scratch_bytes} bytes is not a multiple of {unit}",
            self.name
        );
        let size = wave_scratch_bytes / unit;
        ensure!(
            waves < (1 << 12) && size < (1 << 13),
            InvalidArgument,
            "tmpring_size({}): waves {waves} (12 bits) or wave size {size} units (13 bits) out of range",
            self.name
        );
        Ok(waves | (size as u32) << 12)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_version_and_name() {
        for t in TARGETS {
            assert_eq!(lookup(t.gfx_target_version).unwrap().name, t.name);
            assert_eq!(
                lookup_name(t.name).unwrap().gfx_target_version,
                t.gfx_target_version
            );
            assert_eq!(gfx_name(t.gfx_target_version), t.name);
            assert_eq!(t.generation, t.gfx_target_version / 10000);
        }
        assert!(
            std::ptr::eq(lookup(110000).unwrap(), &GFX1100),
            "one table entry per chip"
        );
        let e = lookup(90008).unwrap_err();
        assert!(
            e.message().contains("90008 (gfx908)") && e.message().contains("gfx1100 (110000)"),
            "{e}"
        );
        assert!(lookup_name("gfx1036").is_err());
    }

    #[test]
    fn per_generation_facts() {
        assert_eq!(GFX942.sh.compute_pgm_rsrc3, 0x22D);
        assert_eq!(GFX1100.sh.compute_pgm_rsrc3, 0x228);
        assert!(!GFX942.sh.static_thread_mgmt_se4_7 && GFX1100.sh.static_thread_mgmt_se4_7);
        assert_eq!(GFX90A.acquire_mem, AcquireMemLayout::Gfx9CoherCntl);
        assert_eq!(GFX1201.acquire_mem, AcquireMemLayout::Gfx10GcrCntl);
        assert_eq!(
            GFX1100.hdp_flush,
            Some(HdpFlushRegs {
                req: 0xE26,
                done: 0xE27
            })
        );
        // Mesa sid.h SDMA_V2_0_COPY_MAX_BYTES / SDMA_V5_2_COPY_MAX_BYTES.
        assert_eq!(GFX90A.sdma.max_copy_bytes, 0x3F_FF00);
        assert_eq!(GFX942.sdma.max_copy_bytes, 0x3F_FF00);
        assert_eq!(GFX1030.sdma.max_copy_bytes, 0x3FFF_FF00);
        assert_eq!(GFX1201.sdma.max_copy_bytes, 0x3FFF_FF00);
        // AMDGPUUsage.rst processor table: architected flat scratch on gfx942, gfx11, gfx12.
        assert_eq!(GFX942.scratch, ScratchModel::ArchitectedFlatScratch);
        assert_eq!(GFX90A.scratch, ScratchModel::PrivateSegmentDescriptor);
        assert_eq!(GFX1030.scratch, ScratchModel::PrivateSegmentDescriptor);
        assert_eq!(GFX1201.scratch, ScratchModel::ArchitectedFlatScratch);
        assert!(GFX1030.gcr_glm && GFX1100.gcr_glm && !GFX1201.gcr_glm);
        assert_eq!(PRIVATE_SEGMENT_WORD3, 0x20C1_4000);
        assert_eq!(GFX1201.generation, 12);
        assert!(!GFX1201.rsrc1_priv_cwsr_workaround && GFX1101.rsrc1_priv_cwsr_workaround);
    }

    #[test]
    fn cwsr_sizes_96cu_gfx1100_match_tinygrad() {
        // kfd_queue.c: ctl_stack = align(40 + 3072 * 12 + 8, 4096) = 0xA000 (with the 48 header
        // bytes; a count without them gets 0x9000); the BO size then equals the 0x2C02000 that
        // tinygrad 0.9.x hard-coded for this card.
        let topo = CwsrTopology {
            simd_count: 192,
            simd_per_cu: 2,
            num_xcc: 1,
            array_count: 12,
            simd_arrays_per_engine: 2,
        };
        let s = GFX1100.cwsr_sizes(&topo).unwrap();
        assert_eq!(
            s,
            CwsrSizes {
                ctl_stack_size: 0xA000,
                cwsr_size: 0x2BE_A000,
                debug_memory_size: 0x18000,
                cwsr_bo_size: 0x2C0_2000
            }
        );
        // gfx10 caps the control stack at 0x7000 (80 CUs -> 2560 waves -> 0x8000 uncapped).
        let topo10 = CwsrTopology {
            simd_count: 160,
            ..topo
        };
        assert_eq!(GFX1030.cwsr_sizes(&topo10).unwrap().ctl_stack_size, 0x7000);
        // gfx9: min(cu*40, engines*512) = min(104*40, 8*512) = 4096 waves, 8 bytes each.
        let topo9 = CwsrTopology {
            simd_count: 416,
            simd_per_cu: 4,
            num_xcc: 1,
            array_count: 8,
            simd_arrays_per_engine: 1,
        };
        assert_eq!(GFX90A.cwsr_sizes(&topo9).unwrap().ctl_stack_size, 0x9000);
        assert!(GFX1100
            .cwsr_sizes(&CwsrTopology {
                simd_per_cu: 0,
                ..topo
            })
            .is_err());
    }

    #[test]
    fn tmpring_encoding() {
        // tinygrad 0.9.0's 7900XTX 0x200200 = WAVESIZE 512 (128 KiB / 256) | WAVES 0x200.
        assert_eq!(
            GFX1100.tmpring_size(0x200, 128 * 1024).unwrap(),
            0x0020_0200
        );
        assert_eq!(GFX1030.tmpring_size(1, 4096).unwrap(), 4 << 12 | 1);
        assert!(GFX1030.tmpring_size(1, 256).is_err());
        assert!(GFX1100.tmpring_size(1 << 12, 256).is_err());
    }
}
