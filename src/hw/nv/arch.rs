//! The per-architecture table: every fact about an NVIDIA GPU generation that changes how rawgrad
//! builds pushbuffers, QMDs or constant buffer 0, as one `static` [`NvArch`] per compute class
//! (in the style of Asahi's `hw/t8103.rs`), plus the small class tables of the host (channel),
//! copy and usermode classes a chip may offer. Code elsewhere reads fields of these tables; it
//! never branches on a class id.
//!
//! Sources: NVIDIA open-gpu-doc class headers (`clc6c0.h`..
//! `clcec0.h`, `clc6c0qmd.h`, `clcbc0qmd.h`, `clcdc0qmd.h`, `clc56f.h`, `clc6b5.h`..`clcab5.h`),
//! open-gpu-kernel-modules `g_gpu_class_list.c`, tinygrad's `ops_nv.py`, ptxas 13 SASS (cbuf0
//! slots, cubin attributes), Mesa NVK for the Hopper shared window. Facts marked UNCONFIRMED were
//! not verified on the hardware in question (usually carried over from a neighbouring generation or
//! taken from tinygrad master) and must be re-checked on a GPU.
//!
//! Not guaranteed: chips outside the table (lookups fail with the list of known classes); that a
//! chip offering a class behaves like the table says where marked UNCONFIRMED.

use crate::{bail, ensure, Result};

/// QMD (queue meta data) layout versions (open-gpu-doc `cl*qmd.h`, Mesa NVK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QmdVersion {
    /// Ampere/Ada: 256 bytes (`clc6c0qmd.h`).
    V03_00,
    /// Hopper: 384 bytes (`clcbc0qmd.h`).
    V04_00,
    /// Blackwell: 384 bytes (`clcdc0qmd.h`).
    V05_00,
}

impl QmdVersion {
    /// Bytes of one QMD of this version.
    pub const fn size(self) -> usize {
        match self {
            QmdVersion::V03_00 => 256,
            QmdVersion::V04_00 | QmdVersion::V05_00 => 384,
        }
    }

    /// The QMD_MAJOR_VERSION value this version carries.
    pub const fn major(self) -> u32 {
        match self {
            QmdVersion::V03_00 => 3,
            QmdVersion::V04_00 => 4,
            QmdVersion::V05_00 => 5,
        }
    }

    /// The header spelling, e.g. "V04_00".
    pub const fn name(self) -> &'static str {
        match self {
            QmdVersion::V03_00 => "V03_00",
            QmdVersion::V04_00 => "V04_00",
            QmdVersion::V05_00 => "V05_00",
        }
    }
}

/// Where the driver-reserved values sit in constant buffer 0 (checked by assembling PTX
/// with ptxas 13 and reading the SASS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cbuf0Layout {
    /// First kernel parameter byte (EIATTR_PARAM_CBANK offset): 0x160 / 0x210 / 0x380.
    pub param_base: u32,
    /// blockDim x/y/z (%ntid): three u32 starting here.
    pub ntid: u32,
    /// gridDim x/y/z (%nctaid): three u32 starting here.
    pub nctaid: u32,
    /// 64-bit shared window slot the driver fills (sm_80/sm_89 SASS reads it; sm_90+ SASS builds
    /// generic shared pointers from SR_SWINHI instead, so writing it is harmless there).
    pub shared_window: u32,
    /// 64-bit local window slot.
    pub local_window: u32,
    /// u32 initial stack pointer slot.
    pub stack_top: u32,
    /// 64-bit global memory descriptor slot (leave 0).
    pub global_mem_desc: u32,
}

/// SEND_SIGNALING_PCAS2_B PCAS_ACTION values (`clc6c0.h`, bits 3:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PcasAction {
    NOP = 0,
    INVALIDATE = 1,
    SCHEDULE = 2,
    /// NVK's choice.
    INVALIDATE_COPY_SCHEDULE = 3,
    INCREMENT_PUT = 6,
    DECREMENT_DEPENDENCE = 7,
    PREFETCH = 8,
    /// tinygrad's choice.
    PREFETCH_SCHEDULE = 9,
    /// What a libcuda trace on H100 showed (third-party write-up).
    INVALIDATE_PREFETCH_COPY_SCHEDULE = 0xA,
    INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING = 0xB,
}

impl PcasAction {
    /// The action with this field value.
    pub fn from_bits(v: u32) -> Option<PcasAction> {
        use PcasAction::*;
        Some(match v {
            0 => NOP,
            1 => INVALIDATE,
            2 => SCHEDULE,
            3 => INVALIDATE_COPY_SCHEDULE,
            6 => INCREMENT_PUT,
            7 => DECREMENT_DEPENDENCE,
            8 => PREFETCH,
            9 => PREFETCH_SCHEDULE,
            0xA => INVALIDATE_PREFETCH_COPY_SCHEDULE,
            0xB => INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING,
            _ => return None,
        })
    }

    /// Whether the action starts the grid (the others only prefetch, invalidate or count).
    pub fn schedules(self) -> bool {
        use PcasAction::*;
        matches!(
            self,
            SCHEDULE
                | INVALIDATE_COPY_SCHEDULE
                | PREFETCH_SCHEDULE
                | INVALIDATE_PREFETCH_COPY_SCHEDULE
                | INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING
        )
    }

    /// The header spelling.
    pub fn name(self) -> &'static str {
        use PcasAction::*;
        match self {
            NOP => "NOP",
            INVALIDATE => "INVALIDATE",
            SCHEDULE => "SCHEDULE",
            INVALIDATE_COPY_SCHEDULE => "INVALIDATE_COPY_SCHEDULE",
            INCREMENT_PUT => "INCREMENT_PUT",
            DECREMENT_DEPENDENCE => "DECREMENT_DEPENDENCE",
            PREFETCH => "PREFETCH",
            PREFETCH_SCHEDULE => "PREFETCH_SCHEDULE",
            INVALIDATE_PREFETCH_COPY_SCHEDULE => "INVALIDATE_PREFETCH_COPY_SCHEDULE",
            INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING => {
                "INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING"
            }
        }
    }
}

/// The compute-class methods that launch a QMD from memory (`clcbc0.h` SEND_PCAS_A,
/// SEND_SIGNALING_PCAS2_B; same offsets on C6C0..CEC0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendPcasMethods {
    /// SEND_PCAS_A: QMD address >> 8.
    pub send_pcas_a: u32,
    /// SEND_SIGNALING_PCAS2_B: PCAS_ACTION in bits 3:0.
    pub send_signaling_pcas2_b: u32,
}

const SEND_PCAS: SendPcasMethods = SendPcasMethods {
    send_pcas_a: 0x2B4,
    send_signaling_pcas2_b: 0x2C0,
};

/// A host (channel / GPFIFO) class.
#[derive(Debug, PartialEq, Eq)]
pub struct HostClass {
    pub class: u32,
    pub name: &'static str,
    /// Semaphore address width of SEM_ADDR_LO/HI: 40 (SEM_ADDR_HI 7:0) or 57 (24:0).
    pub sem_addr_bits: u32,
}

pub static AMPERE_CHANNEL_GPFIFO_A: HostClass = HostClass {
    class: 0xC56F,
    name: "AMPERE_CHANNEL_GPFIFO_A",
    sem_addr_bits: 40,
};
pub static HOPPER_CHANNEL_GPFIFO_A: HostClass = HostClass {
    class: 0xC86F,
    name: "HOPPER_CHANNEL_GPFIFO_A",
    sem_addr_bits: 57, // clc86f.h SEM_ADDR_HI 24:0 (open-gpu-kernel-modules 580)
};
pub static BLACKWELL_CHANNEL_GPFIFO_A: HostClass = HostClass {
    class: 0xC96F,
    name: "BLACKWELL_CHANNEL_GPFIFO_A",
    sem_addr_bits: 57, // UNCONFIRMED: assumed as Hopper's
};
pub static BLACKWELL_CHANNEL_GPFIFO_B: HostClass = HostClass {
    class: 0xCA6F,
    name: "BLACKWELL_CHANNEL_GPFIFO_B",
    sem_addr_bits: 57, // UNCONFIRMED: assumed as Hopper's
};

/// A copy engine class.
#[derive(Debug, PartialEq, Eq)]
pub struct CopyClass {
    pub class: u32,
    pub name: &'static str,
    /// Address width of OFFSET_IN/OUT and SET_SEMAPHORE_A/B: 49 (UPPER 16:0) or 57 (24:0).
    pub addr_bits: u32,
    /// SET_SEMAPHORE_PAYLOAD_UPPER (0x24C) and LAUNCH_DMA SEMAPHORE_PAYLOAD_SIZE (bit 27) exist.
    pub payload_upper: bool,
}

pub static AMPERE_DMA_COPY_A: CopyClass = CopyClass {
    class: 0xC6B5,
    name: "AMPERE_DMA_COPY_A",
    addr_bits: 49,
    payload_upper: false,
};
pub static AMPERE_DMA_COPY_B: CopyClass = CopyClass {
    class: 0xC7B5,
    name: "AMPERE_DMA_COPY_B",
    addr_bits: 49,
    payload_upper: true,
};
pub static HOPPER_DMA_COPY_A: CopyClass = CopyClass {
    class: 0xC8B5,
    name: "HOPPER_DMA_COPY_A",
    addr_bits: 57,
    payload_upper: true,
};
pub static BLACKWELL_DMA_COPY_A: CopyClass = CopyClass {
    class: 0xC9B5,
    name: "BLACKWELL_DMA_COPY_A",
    addr_bits: 57,
    payload_upper: true,
};
pub static BLACKWELL_DMA_COPY_B: CopyClass = CopyClass {
    class: 0xCAB5,
    name: "BLACKWELL_DMA_COPY_B",
    addr_bits: 57,
    payload_upper: true,
};

/// Usermode (doorbell page) classes: (class, name). All put NOTIFY_CHANNEL_PENDING at 0x90.
pub const USERMODE_CLASSES: [(u32, &str); 5] = [
    (0xC361, "VOLTA_USERMODE_A"),
    (0xC461, "TURING_USERMODE_A"),
    (0xC561, "AMPERE_USERMODE_A"),
    (0xC661, "HOPPER_USERMODE_A"),
    (0xC761, "BLACKWELL_USERMODE_A"),
];

/// Everything rawgrad needs to know about one compute class (one GPU generation).
#[derive(Debug, PartialEq, Eq)]
pub struct NvArch {
    /// Short generation name ("ampere", "ada", "hopper", ...).
    pub name: &'static str,
    /// The compute class id (the table key).
    pub compute_class: u32,
    pub compute_class_name: &'static str,
    /// SM versions (major*10 + minor, as in `sm_90`) of chips exposing this class.
    pub sm_versions: &'static [u32],
    /// Copy classes, preferred first.
    pub copy_classes: &'static [&'static CopyClass],
    /// Channel (host) classes, preferred first.
    pub channel_classes: &'static [&'static HostClass],
    /// Usermode classes, preferred first.
    pub usermode_classes: &'static [u32],
    pub qmd_version: QmdVersion,
    /// Bytes of a QMD (equals `qmd_version.size()`).
    pub qmd_size: usize,
    pub cbuf0: Cbuf0Layout,
    /// SET_SHADER_SHARED_MEMORY_WINDOW address.
    pub shared_window: u64,
    /// Alignment the shared window must have (4 GiB on Hopper+: NVK `nvk_cmd_dispatch.c`).
    pub shared_window_align: u64,
    /// SET_SHADER_LOCAL_MEMORY_WINDOW address (a 16 MiB window).
    pub local_window: u64,
    /// Initial stack pointer written to `cbuf0.stack_top`: the 16 MiB local window minus 0x240.
    pub stack_top: u32,
    /// Address width of SET_SHADER_LOCAL_MEMORY_A/B: 49 (A 16:0) or 57 (A 24:0).
    pub local_memory_addr_bits: u32,
    /// SM shared-memory carveouts, KiB, ascending; the last is MAX_SM_CONFIG_SHARED_MEM_SIZE.
    pub shared_mem_configs_kib: &'static [u32],
    /// Shared memory the system reserves in front of the kernel's (tinygrad PR #7239: 1 KiB).
    pub shared_reserved: u32,
    /// PCAS action rawgrad sends with SEND_SIGNALING_PCAS2_B by default.
    pub pcas_action: PcasAction,
    /// Actions to try after `pcas_action` when a launch does not run (the first run tries them
    /// in order inside one process, with a queue reset between tries).
    pub pcas_fallbacks: &'static [PcasAction],
    pub pcas: SendPcasMethods,
    /// SET_INLINE_QMD_ADDRESS_A: width of QMD_ADDRESS_SHIFTED8_UPPER (32 on C6C0..C9C0, 9 after).
    pub inline_qmd_addr_upper_bits: u32,
    /// SET_INLINE_QMD_ADDRESS_A INLINE_SIZE bit (30) exists (selects 384-byte QMDs).
    pub inline_qmd_size_bit: bool,
}

const CBUF0_AMPERE: Cbuf0Layout = Cbuf0Layout {
    param_base: 0x160,
    ntid: 0x0,
    nctaid: 0xC,
    shared_window: 0x18,
    local_window: 0x20,
    stack_top: 0x28,
    global_mem_desc: 0x118,
};

const CBUF0_HOPPER: Cbuf0Layout = Cbuf0Layout {
    param_base: 0x210,
    ntid: 0x0,
    nctaid: 0xC,
    // sm_90 SASS does not read it (SR_SWINHI); tinygrad fills it anyway.
    shared_window: 0x18,
    local_window: 0x20,
    stack_top: 0x28,
    global_mem_desc: 0x208,
};

const CBUF0_BLACKWELL: Cbuf0Layout = Cbuf0Layout {
    param_base: 0x380,
    ntid: 0x360,
    nctaid: 0x370,
    // UNCONFIRMED: tinygrad master fills 0x2F0..0x2FF; sm_120 SASS reads SR_SWINHI instead.
    shared_window: 0x2F0,
    local_window: 0x2F8,
    stack_top: 0x37C,
    global_mem_desc: 0x358,
};

/// 16 MiB local window minus 0x240 (tinygrad's 0xFFFDC0).
const STACK_TOP: u32 = 0xFF_FDC0;
const AMPERE_SHARED_WINDOW: u64 = 0xFE00_0000;
const AMPERE_LOCAL_WINDOW: u64 = 0xFF00_0000;
/// tinygrad's carveouts for Ampere/Ada (32/64/100 KiB).
const CONFIGS_100K: &[u32] = &[32, 64, 100];
/// GA100 and Hopper carveouts beyond 100 KiB: UNCONFIRMED (same KiB/4+1 encoding assumed); a
/// launch uses them only under `NV_MAX_SHARED_KIB` (see [`NvArch::shared_mem_config`]).
const CONFIGS_164K: &[u32] = &[32, 64, 100, 132, 164];
const CONFIGS_228K: &[u32] = &[32, 64, 100, 132, 164, 196, 228];

const AMPERE_USERMODE: &[u32] = &[0xC561, 0xC461];
const HOPPER_USERMODE: &[u32] = &[0xC661, 0xC561, 0xC461];
/// tinygrad master uses HOPPER_USERMODE_A on Blackwell.
const BLACKWELL_USERMODE: &[u32] = &[0xC661, 0xC761];

/// GA100 (A100).
pub static AMPERE_COMPUTE_A: NvArch = NvArch {
    name: "ampere",
    compute_class: 0xC6C0,
    compute_class_name: "AMPERE_COMPUTE_A",
    sm_versions: &[80],
    copy_classes: &[&AMPERE_DMA_COPY_B, &AMPERE_DMA_COPY_A],
    channel_classes: &[&AMPERE_CHANNEL_GPFIFO_A],
    usermode_classes: AMPERE_USERMODE,
    qmd_version: QmdVersion::V03_00,
    qmd_size: 256,
    cbuf0: CBUF0_AMPERE,
    shared_window: AMPERE_SHARED_WINDOW,
    shared_window_align: 1 << 24,
    local_window: AMPERE_LOCAL_WINDOW,
    stack_top: STACK_TOP,
    local_memory_addr_bits: 49,
    shared_mem_configs_kib: CONFIGS_164K,
    shared_reserved: 0x400,
    pcas_action: PcasAction::PREFETCH_SCHEDULE,
    pcas_fallbacks: &[PcasAction::INVALIDATE_COPY_SCHEDULE],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 32,
    inline_qmd_size_bit: false,
};

/// GA10x (RTX 30xx, A10, A40; sm_86/87/88).
pub static AMPERE_COMPUTE_B: NvArch = NvArch {
    name: "ampere",
    compute_class: 0xC7C0,
    compute_class_name: "AMPERE_COMPUTE_B",
    sm_versions: &[86, 87, 88],
    copy_classes: &[&AMPERE_DMA_COPY_B],
    channel_classes: &[&AMPERE_CHANNEL_GPFIFO_A],
    usermode_classes: AMPERE_USERMODE,
    qmd_version: QmdVersion::V03_00,
    qmd_size: 256,
    cbuf0: CBUF0_AMPERE,
    shared_window: AMPERE_SHARED_WINDOW,
    shared_window_align: 1 << 24,
    local_window: AMPERE_LOCAL_WINDOW,
    stack_top: STACK_TOP,
    local_memory_addr_bits: 49,
    shared_mem_configs_kib: CONFIGS_100K,
    shared_reserved: 0x400,
    pcas_action: PcasAction::PREFETCH_SCHEDULE,
    pcas_fallbacks: &[PcasAction::INVALIDATE_COPY_SCHEDULE],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 32,
    inline_qmd_size_bit: false,
};

/// AD10x (RTX 40xx, L4, L40; sm_89).
pub static ADA_COMPUTE_A: NvArch = NvArch {
    name: "ada",
    compute_class: 0xC9C0,
    compute_class_name: "ADA_COMPUTE_A",
    sm_versions: &[89],
    copy_classes: &[&AMPERE_DMA_COPY_B],
    channel_classes: &[&AMPERE_CHANNEL_GPFIFO_A],
    usermode_classes: AMPERE_USERMODE,
    qmd_version: QmdVersion::V03_00,
    qmd_size: 256,
    cbuf0: CBUF0_AMPERE,
    shared_window: AMPERE_SHARED_WINDOW,
    shared_window_align: 1 << 24,
    local_window: AMPERE_LOCAL_WINDOW,
    stack_top: STACK_TOP,
    local_memory_addr_bits: 49,
    shared_mem_configs_kib: CONFIGS_100K,
    shared_reserved: 0x400,
    pcas_action: PcasAction::PREFETCH_SCHEDULE,
    pcas_fallbacks: &[PcasAction::INVALIDATE_COPY_SCHEDULE],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 32,
    inline_qmd_size_bit: false,
};

/// GH100 (H100, H200; sm_90).
pub static HOPPER_COMPUTE_A: NvArch = NvArch {
    name: "hopper",
    compute_class: 0xCBC0,
    compute_class_name: "HOPPER_COMPUTE_A",
    sm_versions: &[90],
    copy_classes: &[&HOPPER_DMA_COPY_A],
    // GH100 also offers AMPERE_CHANNEL_GPFIFO_A (40-bit semaphores); whether both behave the
    // same here is UNCONFIRMED.
    channel_classes: &[&HOPPER_CHANNEL_GPFIFO_A, &AMPERE_CHANNEL_GPFIFO_A],
    usermode_classes: HOPPER_USERMODE,
    // The class header also documents V03_00; whether GH100 runs one is UNCONFIRMED.
    qmd_version: QmdVersion::V04_00,
    qmd_size: 384,
    cbuf0: CBUF0_HOPPER,
    // NVK: "shared memory window needs 4GB alignment on hopper+"; keep [4 GiB, 8 GiB) free.
    shared_window: 1 << 32,
    shared_window_align: 1 << 32,
    local_window: AMPERE_LOCAL_WINDOW,
    stack_top: STACK_TOP,
    local_memory_addr_bits: 57,
    shared_mem_configs_kib: CONFIGS_228K,
    shared_reserved: 0x400,
    // UNCONFIRMED on Hopper. Mesa NVK (src/nouveau/vulkan/nvk_cmd_dispatch.c) sends
    // PCAS_ACTION_INVALIDATE_COPY_SCHEDULE (3, open-gpu-doc clcbc0.h) on every class after
    // TURING_COMPUTE_A, and NVK is the one open driver that runs compute on GH100: 3 first.
    // Then tinygrad's 9 (PREFETCH_SCHEDULE; tinygrad never ran a Hopper compute class) and 0xA
    // (INVALIDATE_PREFETCH_COPY_SCHEDULE, seen in a libcuda trace on H100).
    pcas_action: PcasAction::INVALIDATE_COPY_SCHEDULE,
    pcas_fallbacks: &[
        PcasAction::PREFETCH_SCHEDULE,
        PcasAction::INVALIDATE_PREFETCH_COPY_SCHEDULE,
    ],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 9,
    inline_qmd_size_bit: true,
};

/// GB10x (B100/B200; sm_100). Blackwell facts come from tinygrad master and the class headers.
pub static BLACKWELL_COMPUTE_A: NvArch = NvArch {
    name: "blackwell",
    compute_class: 0xCDC0,
    compute_class_name: "BLACKWELL_COMPUTE_A",
    sm_versions: &[100, 101, 103], // UNCONFIRMED beyond sm_100
    copy_classes: &[&BLACKWELL_DMA_COPY_A],
    channel_classes: &[&BLACKWELL_CHANNEL_GPFIFO_A],
    usermode_classes: BLACKWELL_USERMODE,
    qmd_version: QmdVersion::V05_00,
    qmd_size: 384,
    cbuf0: CBUF0_BLACKWELL,
    shared_window: 0x7294_0000_0000,
    shared_window_align: 1 << 32,
    local_window: 0x7293_0000_0000,
    stack_top: STACK_TOP, // UNCONFIRMED for Blackwell
    local_memory_addr_bits: 57,
    shared_mem_configs_kib: CONFIGS_228K, // UNCONFIRMED
    shared_reserved: 0x400,               // UNCONFIRMED
    pcas_action: PcasAction::PREFETCH_SCHEDULE,
    pcas_fallbacks: &[PcasAction::INVALIDATE_COPY_SCHEDULE],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 9,
    inline_qmd_size_bit: true,
};

/// GB20x (RTX 50xx, RTX PRO 6000; sm_120/121).
pub static BLACKWELL_COMPUTE_B: NvArch = NvArch {
    name: "blackwell",
    compute_class: 0xCEC0,
    compute_class_name: "BLACKWELL_COMPUTE_B",
    sm_versions: &[120, 121],
    copy_classes: &[&BLACKWELL_DMA_COPY_B, &BLACKWELL_DMA_COPY_A],
    channel_classes: &[&BLACKWELL_CHANNEL_GPFIFO_B, &BLACKWELL_CHANNEL_GPFIFO_A],
    usermode_classes: BLACKWELL_USERMODE,
    qmd_version: QmdVersion::V05_00,
    qmd_size: 384,
    cbuf0: CBUF0_BLACKWELL,
    shared_window: 0x7294_0000_0000,
    shared_window_align: 1 << 32,
    local_window: 0x7293_0000_0000,
    stack_top: STACK_TOP, // UNCONFIRMED for Blackwell
    local_memory_addr_bits: 57,
    shared_mem_configs_kib: CONFIGS_100K, // UNCONFIRMED
    shared_reserved: 0x400,               // UNCONFIRMED
    pcas_action: PcasAction::PREFETCH_SCHEDULE,
    pcas_fallbacks: &[PcasAction::INVALIDATE_COPY_SCHEDULE],
    pcas: SEND_PCAS,
    inline_qmd_addr_upper_bits: 9,
    inline_qmd_size_bit: true,
};

/// Every known compute class, newest first (the selection order).
pub static NV_ARCHS: [&NvArch; 6] = [
    &BLACKWELL_COMPUTE_B,
    &BLACKWELL_COMPUTE_A,
    &HOPPER_COMPUTE_A,
    &ADA_COMPUTE_A,
    &AMPERE_COMPUTE_B,
    &AMPERE_COMPUTE_A,
];

static HOST_CLASSES: [&HostClass; 4] = [
    &AMPERE_CHANNEL_GPFIFO_A,
    &HOPPER_CHANNEL_GPFIFO_A,
    &BLACKWELL_CHANNEL_GPFIFO_A,
    &BLACKWELL_CHANNEL_GPFIFO_B,
];

static COPY_CLASSES: [&CopyClass; 5] = [
    &AMPERE_DMA_COPY_A,
    &AMPERE_DMA_COPY_B,
    &HOPPER_DMA_COPY_A,
    &BLACKWELL_DMA_COPY_A,
    &BLACKWELL_DMA_COPY_B,
];

fn known_compute() -> String {
    let v: Vec<String> = NV_ARCHS
        .iter()
        .map(|a| format!("{}={:#x}", a.compute_class_name, a.compute_class))
        .collect();
    v.join(", ")
}

/// The table entry of a compute class.
pub fn arch_for_compute_class(class: u32) -> Result<&'static NvArch> {
    match NV_ARCHS.iter().find(|a| a.compute_class == class) {
        Some(a) => Ok(a),
        None => bail!(
            Device,
            "NV arch: compute class {class:#x} is not known (known: {})",
            known_compute()
        ),
    }
}

/// The table entry for an SM version (`sm_90` -> 90), for the mock driver and compilers.
pub fn arch_for_sm(sm: u32) -> Result<&'static NvArch> {
    match NV_ARCHS.iter().find(|a| a.sm_versions.contains(&sm)) {
        Some(a) => Ok(a),
        None => bail!(Device, "NV arch: sm_{sm} is not known"),
    }
}

/// The host class with this id.
pub fn host_class(class: u32) -> Option<&'static HostClass> {
    HOST_CLASSES.iter().copied().find(|h| h.class == class)
}

/// The copy class with this id.
pub fn copy_class(class: u32) -> Option<&'static CopyClass> {
    COPY_CLASSES.iter().copied().find(|c| c.class == class)
}

/// The name of any class rawgrad knows (compute, copy, channel, usermode, RM object classes).
pub fn class_name(class: u32) -> Option<&'static str> {
    if let Some(a) = NV_ARCHS.iter().find(|a| a.compute_class == class) {
        return Some(a.compute_class_name);
    }
    if let Some(c) = copy_class(class) {
        return Some(c.name);
    }
    if let Some(h) = host_class(class) {
        return Some(h.name);
    }
    USERMODE_CLASSES
        .iter()
        .find(|(c, _)| *c == class)
        .map(|(_, n)| *n)
}

/// The classes one channel pair uses, as picked from a chip's class list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvClasses {
    pub arch: &'static NvArch,
    pub channel: &'static HostClass,
    pub copy: &'static CopyClass,
    pub usermode: u32,
}

impl NvClasses {
    /// The preferred classes of `arch` (no class list to pick from: tests, the emulator).
    pub fn preferred(arch: &'static NvArch) -> NvClasses {
        NvClasses {
            arch,
            channel: arch.channel_classes[0],
            copy: arch.copy_classes[0],
            usermode: arch.usermode_classes[0],
        }
    }
}

fn pick<T: Copy>(
    what: &str,
    arch: &NvArch,
    prefs: &[T],
    id: impl Fn(T) -> u32,
    offered: &[u32],
) -> Result<T> {
    match prefs.iter().copied().find(|p| offered.contains(&id(*p))) {
        Some(p) => Ok(p),
        None => {
            let want: Vec<String> = prefs.iter().map(|p| format!("{:#x}", id(*p))).collect();
            bail!(
                Device,
                "NV arch: {} offers none of the {what} classes rawgrad uses for it ({})",
                arch.compute_class_name,
                want.join(", ")
            )
        }
    }
}

/// Picks the newest known compute class in `class_list` (NV0080_CTRL_CMD_GPU_GET_CLASSLIST) and
/// the preferred channel, copy and usermode classes the list also offers.
pub fn select_classes(class_list: &[u32]) -> Result<NvClasses> {
    let Some(arch) = NV_ARCHS
        .iter()
        .copied()
        .find(|a| class_list.contains(&a.compute_class))
    else {
        bail!(
            Device,
            "NV arch: the GPU offers no known compute class ({} classes offered; known: {})",
            class_list.len(),
            known_compute()
        )
    };
    Ok(NvClasses {
        arch,
        channel: pick(
            "channel",
            arch,
            arch.channel_classes,
            |h| h.class,
            class_list,
        )?,
        copy: pick("copy", arch, arch.copy_classes, |c| c.class, class_list)?,
        usermode: pick("usermode", arch, arch.usermode_classes, |u| u, class_list)?,
    })
}

/// Shared-memory configuration of a launch: the QMD's SHARED_MEMORY_SIZE and the SM carveout
/// fields (values in the QMD's KiB/4 + 1 encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SharedMemConfig {
    /// SHARED_MEMORY_SIZE in bytes (reserved part included).
    pub size: u32,
    pub min_config: u32,
    pub max_config: u32,
    pub target_config: u32,
}

/// The largest carveout proven to launch (KiB): MAX_SM_CONFIG_SHARED_MEM_SIZE 0x1A. tinygrad
/// writes 0x1a on every arch it runs; NVK's `gv100_sm_config_smem_size` (Mesa nak qmd.rs) never
/// goes above 96 KiB; nothing public confirms 228 KiB (58) on GH100.
pub const PROVEN_MAX_SHARED_KIB: u32 = 100;

/// The carveout encoding: KiB / 4 + 1 (tinygrad: bytes / 4096 + 1).
pub const fn sm_config_value(kib: u32) -> u32 {
    kib / 4 + 1
}

impl NvArch {
    /// The launch actions to try, default first ([`NvArch::pcas_action`], then the fallbacks).
    pub fn launch_actions(&self) -> Vec<PcasAction> {
        std::iter::once(self.pcas_action)
            .chain(self.pcas_fallbacks.iter().copied())
            .collect()
    }

    /// The SASS version written into QMDs for `sm` (90 -> 0x90, 120 -> 0xC0, 89 -> 0x89).
    pub fn sass_version(sm: u32) -> u32 {
        (sm / 10) << 4 | (sm % 10)
    }

    /// Whether `sm` belongs to this class.
    pub fn has_sm(&self, sm: u32) -> bool {
        self.sm_versions.contains(&sm)
    }

    /// The shared-memory fields for a kernel with `static_bytes` of `.nv.shared` memory (plus
    /// `dynamic_bytes`), with carveouts up to [`PROVEN_MAX_SHARED_KIB`]: see
    /// [`NvArch::shared_mem_config_up_to`].
    pub fn shared_mem_config(
        &self,
        static_bytes: u32,
        dynamic_bytes: u32,
    ) -> Result<SharedMemConfig> {
        self.shared_mem_config_up_to(static_bytes, dynamic_bytes, PROVEN_MAX_SHARED_KIB)
    }

    /// The shared-memory fields with the arch's carveouts up to `max_kib`: size =
    /// round_up(reserved + static + dynamic, 128); min = target = the smallest carveout holding
    /// it; max = the largest carveout up to `max_kib` (MAX_SM_CONFIG_SHARED_MEM_SIZE 0x1A = 100
    /// KiB by default, as tinygrad writes on every arch; Hopper's larger ones are unproven).
    pub fn shared_mem_config_up_to(
        &self,
        static_bytes: u32,
        dynamic_bytes: u32,
        max_kib: u32,
    ) -> Result<SharedMemConfig> {
        let need =
            u64::from(self.shared_reserved) + u64::from(static_bytes) + u64::from(dynamic_bytes);
        let size = need.div_ceil(128) * 128;
        let configs = || {
            self.shared_mem_configs_kib
                .iter()
                .copied()
                .filter(move |&k| k <= max_kib)
        };
        let Some(max) = configs().next_back() else {
            bail!(
                InvalidArgument,
                "NV arch {}: no shared memory carveout up to {max_kib} KiB (carveouts {:?})",
                self.name,
                self.shared_mem_configs_kib
            )
        };
        let Some(kib) = configs().find(|&k| u64::from(k) * 1024 >= size) else {
            let full = self.shared_mem_configs_kib.last().copied().unwrap_or(max);
            let more = if full > max {
                format!("; NV_MAX_SHARED_KIB={full} allows the unproven larger carveouts")
            } else {
                String::new()
            };
            bail!(
                InvalidArgument,
                "{}: {size} bytes of shared memory (static {static_bytes} + dynamic {dynamic_bytes} + reserved {}) exceed the {max} KiB carveout{more}",
                self.compute_class_name,
                self.shared_reserved
            )
        };
        Ok(SharedMemConfig {
            size: size as u32,
            min_config: sm_config_value(kib),
            max_config: sm_config_value(max),
            target_config: sm_config_value(kib),
        })
    }

    /// Fills the driver-reserved prefix of a launch's constant buffer 0 (slots read from ptxas 13
    /// SASS): blockDim (%ntid) and gridDim (%nctaid), the shared and local windows, the initial
    /// stack pointer. `cbuf0` must reach the parameter base; the parameters themselves are the
    /// caller's.
    pub fn fill_cbuf0(&self, cbuf0: &mut [u8], block: [u32; 3], grid: [u32; 3]) -> Result<()> {
        let l = &self.cbuf0;
        ensure!(
            cbuf0.len() >= l.param_base as usize,
            InvalidArgument,
            "fill_cbuf0: {} bytes do not reach the {} parameter base {:#x}",
            cbuf0.len(),
            self.compute_class_name,
            l.param_base
        );
        let mut put = |off: u32, bytes: &[u8]| -> Result<()> {
            let o = off as usize;
            match cbuf0.get_mut(o..o + bytes.len()) {
                Some(d) => {
                    d.copy_from_slice(bytes);
                    Ok(())
                }
                None => bail!(Internal, "fill_cbuf0: slot {off:#x} is outside cbuf0"),
            }
        };
        for i in 0..3u32 {
            put(l.ntid + 4 * i, &block[i as usize].to_le_bytes())?;
            put(l.nctaid + 4 * i, &grid[i as usize].to_le_bytes())?;
        }
        put(l.shared_window, &self.shared_window.to_le_bytes())?;
        put(l.local_window, &self.local_window.to_le_bytes())?;
        put(l.stack_top, &self.stack_top.to_le_bytes())
    }

    /// Largest threads per block a kernel with `regs` registers can run (the 64 Ki-register file
    /// allocated per warp in 256-register units; tinygrad `NVProgram.__init__`).
    pub fn max_block_threads(regs: u32) -> u32 {
        let per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
        ((65536 / per_warp / 4) * 4 * 32).min(1024)
    }
}

#[cfg(test)]
mod tests;
