//! The NVIDIA GPUs the emulated RM can present (`MOCKGPU_NV_ARCH`): PCI id, class list, GR info.
//!
//! - `hopper` (GH100, H200 SXM): device id 0x2335, sm_90, 66 TPCs x 2 SMs = 132 SMs, 64 warps per
//!   SM, litter 8 GPCs x 9 TPCs x 2 SMs; class list with HOPPER_COMPUTE_A/DMA_COPY_A/CHANNEL/
//!   USERMODE plus the Ampere/Turing/Volta channel and usermode classes (`g_gpu_class_list.c`).
//!
//! GR info: SHADER_PIPE_SUB_COUNT (0x09) answers the enabled TPC count, as NVIDIA's
//! src/nvidia/src/kernel/rmapi/nv_gpu_ops.c reads it (`tpcCount`), and SHADER_PIPE_COUNT (0x07)
//! the enabled GPC count: a real H200 (GSP firmware 580.159.04, 2026-12-04) answered 0x07 = 8,
//! 0x09 = 66, 0x0D = 64, 0x14 = 8, 0x17 = 9, 0x20 = 2. The SMs per TPC come only from
//! LITTER_NUM_SM_PER_TPC (0x20). The Ada and Ampere GPC counts are the boards' nominal ones.
//! - `ada` (AD102, RTX 4090): 0x2684, sm_89, 64 TPCs x 2 = 128 SMs, 48 warps, litter 12 x 6 x 2.
//! - `ampere` (GA102, RTX 3090): 0x2204, sm_86, 41 TPCs x 2 = 82 SMs, 48 warps, litter 7 x 6 x 2.
//!
//! Not guaranteed: the class lists hold the classes a compute runtime meets (no display, video or
//! security engines beyond what tinygrad's `ops_nv.py` allocates); VRAM sizes are the boards'
//! nominal ones.

use crate::sys::nv::common::*;
use crate::{bail, Result};

/// One emulatable NVIDIA chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvChipSpec {
    /// The `MOCKGPU_NV_ARCH` name: `hopper`, `ada`, `ampere`.
    pub arch: &'static str,
    /// The chip: `GH100`.
    pub chip: &'static str,
    /// The board: `NVIDIA H200`.
    pub name: &'static str,
    /// PCI device id (CARD_INFO `pci_info.device_id`).
    pub device_id: u16,
    /// GR info SM_VERSION (0x900 = sm_90).
    pub sm_version: u32,
    /// Enabled GPCs (GR info SHADER_PIPE_COUNT, see the module doc).
    pub gpc_count: u32,
    /// Enabled TPCs (GR info SHADER_PIPE_SUB_COUNT, see the module doc).
    pub tpc_count: u32,
    pub max_warps_per_sm: u32,
    pub litter_gpcs: u32,
    pub litter_tpc_per_gpc: u32,
    pub litter_sm_per_tpc: u32,
    /// VRAM bytes (also the emulated VRAM budget).
    pub vram_size: u64,
    /// What GET_CLASSLIST returns, and what RM_ALLOC accepts for chip-specific classes.
    pub classes: &'static [u32],
}

const GIB: u64 = 1 << 30;

const GH100_CLASSES: &[u32] = &[
    NV01_MEMORY_SYSTEM,
    NV01_MEMORY_LOCAL_USER,
    NV01_MEMORY_VIRTUAL,
    NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
    NV01_EVENT_OS_EVENT,
    NV01_DEVICE_0,
    NV20_SUBDEVICE_0,
    GT200_DEBUGGER,
    FERMI_CONTEXT_SHARE_A,
    FERMI_VASPACE_A,
    KEPLER_CHANNEL_GROUP_A,
    MAXWELL_PROFILER_DEVICE,
    VOLTA_USERMODE_A,
    TURING_USERMODE_A,
    AMPERE_USERMODE_A,
    HOPPER_USERMODE_A,
    VOLTA_CHANNEL_GPFIFO_A,
    TURING_CHANNEL_GPFIFO_A,
    AMPERE_CHANNEL_GPFIFO_A,
    HOPPER_CHANNEL_GPFIFO_A,
    HOPPER_COMPUTE_A,
    HOPPER_DMA_COPY_A,
    HOPPER_SEC2_WORK_LAUNCH_A,
];

const AD102_CLASSES: &[u32] = &[
    NV01_MEMORY_SYSTEM,
    NV01_MEMORY_LOCAL_USER,
    NV01_MEMORY_VIRTUAL,
    NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
    NV01_EVENT_OS_EVENT,
    NV01_DEVICE_0,
    NV20_SUBDEVICE_0,
    GT200_DEBUGGER,
    FERMI_CONTEXT_SHARE_A,
    FERMI_VASPACE_A,
    KEPLER_CHANNEL_GROUP_A,
    MAXWELL_PROFILER_DEVICE,
    VOLTA_USERMODE_A,
    TURING_USERMODE_A,
    AMPERE_USERMODE_A,
    VOLTA_CHANNEL_GPFIFO_A,
    TURING_CHANNEL_GPFIFO_A,
    AMPERE_CHANNEL_GPFIFO_A,
    ADA_A,
    ADA_COMPUTE_A,
    AMPERE_DMA_COPY_B,
];

const GA102_CLASSES: &[u32] = &[
    NV01_MEMORY_SYSTEM,
    NV01_MEMORY_LOCAL_USER,
    NV01_MEMORY_VIRTUAL,
    NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
    NV01_EVENT_OS_EVENT,
    NV01_DEVICE_0,
    NV20_SUBDEVICE_0,
    GT200_DEBUGGER,
    FERMI_CONTEXT_SHARE_A,
    FERMI_VASPACE_A,
    KEPLER_CHANNEL_GROUP_A,
    MAXWELL_PROFILER_DEVICE,
    VOLTA_USERMODE_A,
    TURING_USERMODE_A,
    AMPERE_USERMODE_A,
    VOLTA_CHANNEL_GPFIFO_A,
    TURING_CHANNEL_GPFIFO_A,
    AMPERE_CHANNEL_GPFIFO_A,
    AMPERE_B,
    AMPERE_COMPUTE_B,
    AMPERE_DMA_COPY_A,
    AMPERE_DMA_COPY_B,
];

/// The chips the emulator can present.
pub const NV_CHIPS: &[NvChipSpec] = &[
    NvChipSpec {
        arch: "hopper",
        chip: "GH100",
        name: "NVIDIA H200",
        device_id: 0x2335,
        sm_version: 0x900,
        gpc_count: 8,
        tpc_count: 66,
        max_warps_per_sm: 64,
        litter_gpcs: 8,
        litter_tpc_per_gpc: 9,
        litter_sm_per_tpc: 2,
        vram_size: 141 * GIB,
        classes: GH100_CLASSES,
    },
    NvChipSpec {
        arch: "ada",
        chip: "AD102",
        name: "NVIDIA GeForce RTX 4090",
        device_id: 0x2684,
        sm_version: 0x809,
        gpc_count: 11,
        tpc_count: 64,
        max_warps_per_sm: 48,
        litter_gpcs: 12,
        litter_tpc_per_gpc: 6,
        litter_sm_per_tpc: 2,
        vram_size: 24 * GIB,
        classes: AD102_CLASSES,
    },
    NvChipSpec {
        arch: "ampere",
        chip: "GA102",
        name: "NVIDIA GeForce RTX 3090",
        device_id: 0x2204,
        sm_version: 0x806,
        gpc_count: 7,
        tpc_count: 41,
        max_warps_per_sm: 48,
        litter_gpcs: 7,
        litter_tpc_per_gpc: 6,
        litter_sm_per_tpc: 2,
        vram_size: 24 * GIB,
        classes: GA102_CLASSES,
    },
];

/// The chip named `arch` (the arch name or the chip name, any case).
pub fn nv_chip(arch: &str) -> Result<&'static NvChipSpec> {
    let a = arch.trim().to_ascii_lowercase();
    match NV_CHIPS
        .iter()
        .find(|c| c.arch == a || c.chip.to_ascii_lowercase() == a)
    {
        Some(c) => Ok(c),
        None => {
            let names: Vec<String> = NV_CHIPS
                .iter()
                .map(|c| format!("{} ({})", c.arch, c.chip))
                .collect();
            bail!(
                InvalidArgument,
                "MOCKGPU_NV_ARCH={arch:?}: the emulated NVIDIA chips are {}",
                names.join(", ")
            )
        }
    }
}

/// What a class is, for the RM's parent rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassKind {
    Client,
    Device,
    Subdevice,
    Usermode,
    VaSpace,
    /// NV01_MEMORY_LOCAL_USER / NV01_MEMORY_SYSTEM.
    Memory,
    OsDescriptor,
    Virtual,
    Tsg,
    CtxShare,
    Channel,
    Compute,
    Copy,
    /// Offered but not emulated (events, debugger, profiler, 3D, SEC2).
    Other,
}

/// The kind of a class id (`None`: the RM knows no such class).
pub fn class_kind(class: u32) -> Option<ClassKind> {
    use ClassKind::*;
    Some(match class {
        NV01_ROOT | NV01_ROOT_NON_PRIV | NV01_ROOT_CLIENT => Client,
        NV01_DEVICE_0 => Device,
        NV20_SUBDEVICE_0 => Subdevice,
        VOLTA_USERMODE_A | TURING_USERMODE_A | AMPERE_USERMODE_A | HOPPER_USERMODE_A
        | BLACKWELL_USERMODE_A => Usermode,
        FERMI_VASPACE_A => VaSpace,
        NV01_MEMORY_LOCAL_USER | NV01_MEMORY_SYSTEM => Memory,
        NV01_MEMORY_SYSTEM_OS_DESCRIPTOR => OsDescriptor,
        NV01_MEMORY_VIRTUAL => Virtual,
        KEPLER_CHANNEL_GROUP_A => Tsg,
        FERMI_CONTEXT_SHARE_A => CtxShare,
        VOLTA_CHANNEL_GPFIFO_A
        | TURING_CHANNEL_GPFIFO_A
        | AMPERE_CHANNEL_GPFIFO_A
        | HOPPER_CHANNEL_GPFIFO_A
        | BLACKWELL_CHANNEL_GPFIFO_A
        | BLACKWELL_CHANNEL_GPFIFO_B => Channel,
        AMPERE_COMPUTE_A | AMPERE_COMPUTE_B | ADA_COMPUTE_A | HOPPER_COMPUTE_A
        | BLACKWELL_COMPUTE_A | BLACKWELL_COMPUTE_B => Compute,
        AMPERE_DMA_COPY_A | AMPERE_DMA_COPY_B | HOPPER_DMA_COPY_A | BLACKWELL_DMA_COPY_A
        | BLACKWELL_DMA_COPY_B => Copy,
        NV01_EVENT_OS_EVENT
        | GT200_DEBUGGER
        | MAXWELL_PROFILER_DEVICE
        | AMPERE_A
        | AMPERE_B
        | ADA_A
        | HOPPER_A
        | HOPPER_SEC2_WORK_LAUNCH_A => Other,
        _ => return None,
    })
}

impl NvChipSpec {
    /// Whether the chip's class list holds `class`.
    pub fn offers(&self, class: u32) -> bool {
        self.classes.contains(&class)
    }

    /// The chip's SM count (enabled TPCs x SMs per TPC).
    pub fn sm_count(&self) -> u32 {
        self.tpc_count * self.litter_sm_per_tpc
    }

    /// The value of GR info `index` (`None`: not emulated).
    pub fn gr_info(&self, index: u32) -> Option<u32> {
        Some(match index {
            NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT => self.gpc_count,
            NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT => self.tpc_count,
            NV2080_CTRL_GR_INFO_INDEX_SM_VERSION => self.sm_version,
            NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM => self.max_warps_per_sm,
            NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP => 32,
            NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS => self.litter_gpcs,
            NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC => self.litter_tpc_per_gpc,
            NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC => self.litter_sm_per_tpc,
            _ => return None,
        })
    }
}
