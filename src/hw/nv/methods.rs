//! Method addresses and field values of the classes rawgrad drives, spelled as in NVIDIA's class
//! headers (open-gpu-doc `clc56f.h` host, `clc6c0.h`..`clcec0.h` compute, `clc6b5.h`..`clcab5.h`
//! copy), and the per-class-kind method tables the decoder and the software GPU use to name
//! methods and to refuse unknown ones.
//!
//! Only the methods rawgrad emits or that are harmless state are listed: a method outside these
//! tables is "unknown" to the decoder and faults the emulated channel, even if the real class has
//! it. The offsets are identical across the compute classes C6C0..CEC0, the copy classes
//! C6B5..CAB5 and the host classes C56F..CA6F for the methods listed.

use crate::hw::nv::arch::{copy_class, NV_ARCHS};

// ---- host (channel) class, any subchannel, methods below 0x100 ----
// open-gpu-kernel-modules `src/common/sdk/nvidia/inc/class/clc56f.h`: NVC56F_SET_OBJECT,
// NVC56F_NOP, NVC56F_NON_STALL_INTERRUPT, NVC56F_MEM_OP_A..D, NVC56F_SET_REFERENCE,
// NVC56F_SEM_ADDR_LO/HI, NVC56F_SEM_PAYLOAD_LO/HI, NVC56F_SEM_EXECUTE (fields OPERATION 2:0,
// ACQUIRE_SWITCH_TSG 12, RELEASE_WFI 20, PAYLOAD_SIZE 24, RELEASE_TIMESTAMP 25, REDUCTION 30:27,
// REDUCTION_FORMAT 31), NVC56F_WFI.
pub const SET_OBJECT: u32 = 0x000;
pub const NOP: u32 = 0x008;
pub const NON_STALL_INTERRUPT: u32 = 0x020;
pub const MEM_OP_A: u32 = 0x028;
pub const MEM_OP_B: u32 = 0x02C;
pub const MEM_OP_C: u32 = 0x030;
pub const MEM_OP_D: u32 = 0x034;
pub const SET_REFERENCE: u32 = 0x050;
pub const SEM_ADDR_LO: u32 = 0x05C;
pub const SEM_ADDR_HI: u32 = 0x060;
pub const SEM_PAYLOAD_LO: u32 = 0x064;
pub const SEM_PAYLOAD_HI: u32 = 0x068;
pub const SEM_EXECUTE: u32 = 0x06C;
pub const WFI: u32 = 0x078;

/// Methods below this address are host (PBDMA) methods on every subchannel.
pub const HOST_METHOD_LIMIT: u32 = 0x100;

/// SEM_EXECUTE OPERATION (bits 2:0).
pub const SEM_EXECUTE_OPERATION_MASK: u32 = 0x7;
pub const SEM_OP_ACQUIRE: u32 = 0;
pub const SEM_OP_RELEASE: u32 = 1;
pub const SEM_OP_ACQ_STRICT_GEQ: u32 = 2;
pub const SEM_OP_ACQ_CIRC_GEQ: u32 = 3;
pub const SEM_OP_ACQ_AND: u32 = 4;
pub const SEM_OP_ACQ_NOR: u32 = 5;
pub const SEM_OP_REDUCTION: u32 = 6;
pub const SEM_EXECUTE_ACQUIRE_SWITCH_TSG: u32 = 1 << 12;
pub const SEM_EXECUTE_RELEASE_WFI: u32 = 1 << 20;
pub const SEM_EXECUTE_PAYLOAD_SIZE_64BIT: u32 = 1 << 24;
pub const SEM_EXECUTE_RELEASE_TIMESTAMP: u32 = 1 << 25;
/// REDUCTION (30:27) and REDUCTION_FORMAT (31): not used by rawgrad.
pub const SEM_EXECUTE_REDUCTION_MASK: u32 = 0xF << 27 | 1 << 31;
/// Every SEM_EXECUTE bit rawgrad knows.
pub const SEM_EXECUTE_KNOWN: u32 = SEM_EXECUTE_OPERATION_MASK
    | SEM_EXECUTE_ACQUIRE_SWITCH_TSG
    | SEM_EXECUTE_RELEASE_WFI
    | SEM_EXECUTE_PAYLOAD_SIZE_64BIT
    | SEM_EXECUTE_RELEASE_TIMESTAMP
    | SEM_EXECUTE_REDUCTION_MASK;

/// MEM_OP_D OPERATION (bits 31:27) values accepted as no-ops.
pub const MEM_OP_D_OPERATION_MEMBAR: u32 = 5;
pub const MEM_OP_D_OPERATION_L2_PEERMEM_INVALIDATE: u32 = 0xD;
pub const MEM_OP_D_OPERATION_L2_SYSMEM_INVALIDATE: u32 = 0xE;
pub const MEM_OP_D_OPERATION_L2_FLUSH_DIRTY: u32 = 0x10;

// ---- compute class ----
// open-gpu-doc `classes/compute/clc6c0.h` (NVC6C0_*; the same offsets in clc7c0.h, clc9c0.h,
// clcbc0.h, clcdc0.h, clcec0.h): NVC6C0_SET_QMD_VERSION, NVC6C0_SEND_PCAS_A,
// NVC6C0_SEND_SIGNALING_PCAS2_B (PCAS_ACTION 3:0), NVC6C0_SET_SHADER_LOCAL_MEMORY_*,
// NVC6C0_SET_SHADER_SHARED_MEMORY_WINDOW_A/B, NVC6C0_INVALIDATE_SHADER_CACHES_NO_WFI
// (INSTRUCTION 0, GLOBAL_DATA 4, CONSTANT 12); the inline-QMD methods of `clcdc0.h`
// (NVCDC0_SET_INLINE_QMD_ADDRESS_A/B 0x318/0x31C, NVCDC0_LOAD_INLINE_QMD_DATA(i) 0x320 + 4i).
pub const NO_OPERATION: u32 = 0x100;
pub const WAIT_FOR_IDLE: u32 = 0x110;
pub const SET_QMD_VERSION: u32 = 0x288;
pub const SET_SHADER_SHARED_MEMORY_WINDOW_A: u32 = 0x2A0;
pub const SET_SHADER_SHARED_MEMORY_WINDOW_B: u32 = 0x2A4;
pub const SEND_PCAS_A: u32 = 0x2B4;
pub const SEND_SIGNALING_PCAS2_B: u32 = 0x2C0;
pub const SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A: u32 = 0x2E4;
pub const SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B: u32 = 0x2E8;
pub const SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C: u32 = 0x2EC;
pub const SET_INLINE_QMD_ADDRESS_A: u32 = 0x318;
pub const SET_INLINE_QMD_ADDRESS_B: u32 = 0x31C;
/// LOAD_INLINE_QMD_DATA(i) = 0x320 + 4i, i < 96 (384-byte QMDs).
pub const LOAD_INLINE_QMD_DATA: u32 = 0x320;
pub const LOAD_INLINE_QMD_DATA_COUNT: u32 = 96;
pub const SET_SHADER_LOCAL_MEMORY_A: u32 = 0x790;
pub const SET_SHADER_LOCAL_MEMORY_B: u32 = 0x794;
pub const SET_SHADER_LOCAL_MEMORY_WINDOW_A: u32 = 0x7B0;
pub const SET_SHADER_LOCAL_MEMORY_WINDOW_B: u32 = 0x7B4;
pub const INVALIDATE_SHADER_CACHES_NO_WFI: u32 = 0x1698;

/// SET_INLINE_QMD_ADDRESS_A INLINE_SIZE (30:30; `clcdc0.h` INLINE_SIZE_INLINE_384 = 1): a 384-byte
/// QMD.
pub const INLINE_QMD_SIZE_384: u32 = 1 << 30;
/// SEND_SIGNALING_PCAS2_B PCAS_ACTION (bits 3:0).
pub const PCAS_ACTION_MASK: u32 = 0xF;
/// SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C MAX_SM_COUNT (bits 8:0).
pub const NON_THROTTLED_MAX_SM_COUNT_MASK: u32 = 0x1FF;

bitflags::bitflags! {
    /// INVALIDATE_SHADER_CACHES_NO_WFI fields.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct InvalidateShaderCaches: u32 {
        const INSTRUCTION = 1 << 0;
        const GLOBAL_DATA = 1 << 4;
        const CONSTANT = 1 << 12;
    }
}

// ---- copy class ----
// open-gpu-doc `classes/dma-copy/clc6b5.h` (NVC6B5_*; the same offsets in clc7b5.h, clc8b5.h,
// clc9b5.h, clcab5.h): NVC6B5_SET_SEMAPHORE_A/B, NVC6B5_SET_SEMAPHORE_PAYLOAD(_UPPER),
// NVC6B5_LAUNCH_DMA, NVC6B5_OFFSET_IN/OUT_UPPER/LOWER, NVC6B5_PITCH_IN/OUT,
// NVC6B5_LINE_LENGTH_IN, NVC6B5_LINE_COUNT.
pub const COPY_NOP: u32 = 0x100;
pub const SET_SEMAPHORE_A: u32 = 0x240;
pub const SET_SEMAPHORE_B: u32 = 0x244;
pub const SET_SEMAPHORE_PAYLOAD: u32 = 0x248;
pub const SET_SEMAPHORE_PAYLOAD_UPPER: u32 = 0x24C;
pub const LAUNCH_DMA: u32 = 0x300;
pub const OFFSET_IN_UPPER: u32 = 0x400;
pub const OFFSET_IN_LOWER: u32 = 0x404;
pub const OFFSET_OUT_UPPER: u32 = 0x408;
pub const OFFSET_OUT_LOWER: u32 = 0x40C;
pub const PITCH_IN: u32 = 0x410;
pub const PITCH_OUT: u32 = 0x414;
pub const LINE_LENGTH_IN: u32 = 0x418;
pub const LINE_COUNT: u32 = 0x41C;

/// LAUNCH_DMA fields (`clc8b5.h` NVC8B5_LAUNCH_DMA_*: DATA_TRANSFER_TYPE 1:0, FLUSH_ENABLE 2,
/// SEMAPHORE_TYPE 4:3, INTERRUPT_TYPE 6:5, SRC/DST_MEMORY_LAYOUT 7/8, MULTI_LINE_ENABLE 9,
/// REMAP_ENABLE 10, SRC/DST_TYPE 12/13, SEMAPHORE_REDUCTION 17:14, SIGN 18, ENABLE 19,
/// FLUSH_TYPE 25, SEMAPHORE_PAYLOAD_SIZE 27).
pub mod launch_dma {
    /// DATA_TRANSFER_TYPE (1:0): 0 none, 1 pipelined, 2 non-pipelined.
    pub const DATA_TRANSFER_TYPE_MASK: u32 = 0x3;
    pub const DATA_TRANSFER_TYPE_PIPELINED: u32 = 1;
    pub const DATA_TRANSFER_TYPE_NON_PIPELINED: u32 = 2;
    pub const FLUSH_ENABLE: u32 = 1 << 2;
    /// SEMAPHORE_TYPE (4:3): 0 none, 1 one-word release, 2 four-word release (timestamp).
    pub const SEMAPHORE_TYPE_SHIFT: u32 = 3;
    pub const SEMAPHORE_TYPE_MASK: u32 = 0x3 << 3;
    pub const SEMAPHORE_TYPE_ONE_WORD: u32 = 1;
    pub const SEMAPHORE_TYPE_FOUR_WORD: u32 = 2;
    /// INTERRUPT_TYPE (6:5).
    pub const INTERRUPT_TYPE_SHIFT: u32 = 5;
    pub const INTERRUPT_TYPE_MASK: u32 = 0x3 << 5;
    pub const SRC_MEMORY_LAYOUT_PITCH: u32 = 1 << 7;
    pub const DST_MEMORY_LAYOUT_PITCH: u32 = 1 << 8;
    pub const MULTI_LINE_ENABLE: u32 = 1 << 9;
    pub const REMAP_ENABLE: u32 = 1 << 10;
    pub const SRC_TYPE_PHYSICAL: u32 = 1 << 12;
    pub const DST_TYPE_PHYSICAL: u32 = 1 << 13;
    /// SEMAPHORE_REDUCTION (17:14), SIGN (18), ENABLE (19).
    pub const SEMAPHORE_REDUCTION_ENABLE: u32 = 1 << 19;
    /// FLUSH_TYPE (25): 0 SYS, 1 GL.
    pub const FLUSH_TYPE_GL: u32 = 1 << 25;
    /// SEMAPHORE_PAYLOAD_SIZE (27, C7B5+): 1 = two words (64-bit payload).
    pub const SEMAPHORE_PAYLOAD_SIZE_TWO_WORD: u32 = 1 << 27;
    /// Bits rawgrad's builders may set; the decoder refuses others.
    pub const KNOWN: u32 = DATA_TRANSFER_TYPE_MASK
        | FLUSH_ENABLE
        | SEMAPHORE_TYPE_MASK
        | INTERRUPT_TYPE_MASK
        | SRC_MEMORY_LAYOUT_PITCH
        | DST_MEMORY_LAYOUT_PITCH
        | MULTI_LINE_ENABLE
        | REMAP_ENABLE
        | SRC_TYPE_PHYSICAL
        | DST_TYPE_PHYSICAL
        | SEMAPHORE_REDUCTION_ENABLE
        | FLUSH_TYPE_GL
        | SEMAPHORE_PAYLOAD_SIZE_TWO_WORD;
    /// A copy: NON_PIPELINED | SRC pitch | DST pitch, virtual addresses, one line (0x182).
    pub const COPY: u32 =
        DATA_TRANSFER_TYPE_NON_PIPELINED | SRC_MEMORY_LAYOUT_PITCH | DST_MEMORY_LAYOUT_PITCH;
    /// A semaphore release: FLUSH_ENABLE | four-word release (0x14).
    pub const SEMAPHORE_RELEASE: u32 =
        FLUSH_ENABLE | SEMAPHORE_TYPE_FOUR_WORD << SEMAPHORE_TYPE_SHIFT;
}

/// What kind of class a subchannel is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassKind {
    /// Host methods (below 0x100) on any subchannel.
    Host,
    Compute,
    Copy,
}

impl ClassKind {
    /// The kind of a compute or copy class id (`None` for anything else).
    pub fn of_class(class: u32) -> Option<ClassKind> {
        if NV_ARCHS.iter().any(|a| a.compute_class == class) {
            Some(ClassKind::Compute)
        } else if copy_class(class).is_some() {
            Some(ClassKind::Copy)
        } else {
            None
        }
    }
}

const HOST_NAMES: &[(u32, &str)] = &[
    (SET_OBJECT, "SET_OBJECT"),
    (NOP, "NOP"),
    (NON_STALL_INTERRUPT, "NON_STALL_INTERRUPT"),
    (MEM_OP_A, "MEM_OP_A"),
    (MEM_OP_B, "MEM_OP_B"),
    (MEM_OP_C, "MEM_OP_C"),
    (MEM_OP_D, "MEM_OP_D"),
    (SET_REFERENCE, "SET_REFERENCE"),
    (SEM_ADDR_LO, "SEM_ADDR_LO"),
    (SEM_ADDR_HI, "SEM_ADDR_HI"),
    (SEM_PAYLOAD_LO, "SEM_PAYLOAD_LO"),
    (SEM_PAYLOAD_HI, "SEM_PAYLOAD_HI"),
    (SEM_EXECUTE, "SEM_EXECUTE"),
    (WFI, "WFI"),
];

const COMPUTE_NAMES: &[(u32, &str)] = &[
    (NO_OPERATION, "NO_OPERATION"),
    (WAIT_FOR_IDLE, "WAIT_FOR_IDLE"),
    (SET_QMD_VERSION, "SET_QMD_VERSION"),
    (
        SET_SHADER_SHARED_MEMORY_WINDOW_A,
        "SET_SHADER_SHARED_MEMORY_WINDOW_A",
    ),
    (
        SET_SHADER_SHARED_MEMORY_WINDOW_B,
        "SET_SHADER_SHARED_MEMORY_WINDOW_B",
    ),
    (SEND_PCAS_A, "SEND_PCAS_A"),
    (SEND_SIGNALING_PCAS2_B, "SEND_SIGNALING_PCAS2_B"),
    (
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A,
        "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A",
    ),
    (
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
        "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B",
    ),
    (
        SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C,
        "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C",
    ),
    (SET_INLINE_QMD_ADDRESS_A, "SET_INLINE_QMD_ADDRESS_A"),
    (SET_INLINE_QMD_ADDRESS_B, "SET_INLINE_QMD_ADDRESS_B"),
    (SET_SHADER_LOCAL_MEMORY_A, "SET_SHADER_LOCAL_MEMORY_A"),
    (SET_SHADER_LOCAL_MEMORY_B, "SET_SHADER_LOCAL_MEMORY_B"),
    (
        SET_SHADER_LOCAL_MEMORY_WINDOW_A,
        "SET_SHADER_LOCAL_MEMORY_WINDOW_A",
    ),
    (
        SET_SHADER_LOCAL_MEMORY_WINDOW_B,
        "SET_SHADER_LOCAL_MEMORY_WINDOW_B",
    ),
    (
        INVALIDATE_SHADER_CACHES_NO_WFI,
        "INVALIDATE_SHADER_CACHES_NO_WFI",
    ),
];

const COPY_NAMES: &[(u32, &str)] = &[
    (COPY_NOP, "NOP"),
    (SET_SEMAPHORE_A, "SET_SEMAPHORE_A"),
    (SET_SEMAPHORE_B, "SET_SEMAPHORE_B"),
    (SET_SEMAPHORE_PAYLOAD, "SET_SEMAPHORE_PAYLOAD"),
    (SET_SEMAPHORE_PAYLOAD_UPPER, "SET_SEMAPHORE_PAYLOAD_UPPER"),
    (LAUNCH_DMA, "LAUNCH_DMA"),
    (OFFSET_IN_UPPER, "OFFSET_IN_UPPER"),
    (OFFSET_IN_LOWER, "OFFSET_IN_LOWER"),
    (OFFSET_OUT_UPPER, "OFFSET_OUT_UPPER"),
    (OFFSET_OUT_LOWER, "OFFSET_OUT_LOWER"),
    (PITCH_IN, "PITCH_IN"),
    (PITCH_OUT, "PITCH_OUT"),
    (LINE_LENGTH_IN, "LINE_LENGTH_IN"),
    (LINE_COUNT, "LINE_COUNT"),
];

/// Names for LOAD_INLINE_QMD_DATA(i), generated once.
static INLINE_QMD_NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// The name of `method` for a class of `kind` (`None`: not a method rawgrad knows there).
/// Host methods are looked up for every kind.
pub fn method_name(kind: ClassKind, method: u32) -> Option<&'static str> {
    if method < HOST_METHOD_LIMIT {
        return HOST_NAMES
            .iter()
            .find(|(m, _)| *m == method)
            .map(|(_, n)| *n);
    }
    let table = match kind {
        ClassKind::Host => return None,
        ClassKind::Compute => COMPUTE_NAMES,
        ClassKind::Copy => COPY_NAMES,
    };
    if let Some((_, n)) = table.iter().find(|(m, _)| *m == method) {
        return Some(n);
    }
    if kind == ClassKind::Compute {
        let i = method.checked_sub(LOAD_INLINE_QMD_DATA)?;
        if i % 4 == 0 && i / 4 < LOAD_INLINE_QMD_DATA_COUNT {
            let names = INLINE_QMD_NAMES.get_or_init(|| {
                (0..LOAD_INLINE_QMD_DATA_COUNT)
                    .map(|i| format!("LOAD_INLINE_QMD_DATA({i})"))
                    .collect()
            });
            return names.get((i / 4) as usize).map(|s| s.as_str());
        }
    }
    None
}
