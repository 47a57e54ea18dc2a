//! Hand-derived goldens, one per NV packet kind: the expected words are literals worked out by
//! hand from the vendor headers' field positions (each literal's header and field named beside
//! it), never from rawgrad's own output or tables. A mismatch is an encoder defect to fix, not a
//! golden to re-bless. Headers: NVIDIA/open-gpu-doc `classes/compute/clc7c0qmd.h` (QMD V03_00,
//! the Ampere-B/Ada layout; `clc6c0qmd.h` agrees on every field used here), `clcbc0qmd.h` (V04_00),
//! `clcbc0.h` (compute methods), `classes/host/clc56f.h` (method headers, host semaphores),
//! `classes/dma-copy/clc8b5.h` (copy engine); NVIDIA/open-gpu-kernel-modules 580.142
//! `src/common/sdk/nvidia/inc/class/clc86f.h` (Hopper host class, GP entries).
//!
//! Notation: `MW(hi:lo)` is a bit range of the QMD seen as one little-endian bit array; bit b lies
//! in dword b / 32 at bit b % 32. A method header (clc56f.h NVC56F_DMA_*) is SEC_OP 31:29 (1 =
//! INC_METHOD), METHOD_COUNT 28:16, METHOD_SUBCHANNEL 15:13 (0 host, 1 compute, 4 copy here),
//! METHOD_ADDRESS 11:0 = the method's byte offset >> 2.

use crate::hw::nv::arch::{NvArch, NvClasses, PcasAction, ADA_COMPUTE_A, HOPPER_COMPUTE_A};
use crate::runtime::nv::gpfifo::{decode_gp_entry, gp_entry};
use crate::runtime::nv::push::PushBuf;
use crate::runtime::nv::qmd::{program_qmd, ConstantBuffer, Qmd, QmdProgram};

/// `n` dwords, zero but at the given (index, value) pairs.
fn words(n: usize, set: &[(usize, u32)]) -> Vec<u32> {
    let mut w = vec![0u32; n];
    for &(i, v) in set {
        w[i] = v;
    }
    w
}

/// The program both QMD goldens encode: code at 0x7F_1234_5600 (0x1234 bytes), 32 registers,
/// 0x100 bytes of static shared memory, 0x260 bytes of SLM per thread, constant bank 3 (0x40
/// bytes at 0x7F_1234_9000); launched as grid [5, 3, 2], block [64, 2, 1], cbuf0 0x230 bytes at
/// 0x7F_2000_0100.
fn golden_qmd(arch: &NvArch, sm: u32) -> Vec<u32> {
    let prg = QmdProgram {
        program_addr: 0x7F_1234_5600,
        code_bytes: 0x1234,
        register_count: 32,
        shared: arch.shared_mem_config(0x100, 0).unwrap(),
        slm_bytes_per_thread: 0x260,
        sm,
        const_banks: vec![(
            3,
            ConstantBuffer {
                addr: 0x7F_1234_9000,
                size: 0x40,
                invalidate: true,
            },
        )],
    };
    let mut q = program_qmd(arch, &prg).unwrap();
    let cbuf0 = ConstantBuffer {
        addr: 0x7F_2000_0100,
        size: 0x230,
        invalidate: true,
    };
    q.set_launch([5, 3, 2], [64, 2, 1], cbuf0).unwrap();
    q.dwords().to_vec()
}

/// QMD V03_00 (clc7c0qmd.h NVC7C0_QMDV03_00_*), 64 dwords, on ADA_COMPUTE_A (sm_89).
#[rustfmt::skip]
fn qmd_v03_expected() -> Vec<u32> {
    words(64, &[
        // QMD_GROUP_ID MW(133:128) = 0x3F -> dw4 5:0; SM_GLOBAL_CACHING_ENABLE MW(134:134) -> dw4 b6.
        (4, 0x0000_007F),
        // INVALIDATE_TEXTURE_HEADER/_SAMPLER/_DATA/SHADER_DATA_CACHE MW(186..189) -> dw5 b26..29.
        (5, 0x3C00_0000),
        // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED MW(287:256) = 0x7F_1234_5600 >> 8.
        (8, 0x7F12_3456),
        // CWD_MEMBAR_TYPE MW(369:368) = L1_SYSMEMBAR 1 -> dw11 b16; API_VISIBLE_CALL_LIMIT
        // MW(378:378) = NO_CHECK -> b26; SAMPLER_INDEX MW(382:382) = VIA_HEADER_INDEX -> b30.
        (11, 0x4401_0000),
        // CTA_RASTER_WIDTH MW(415:384), HEIGHT MW(431:416), DEPTH MW(463:448).
        (12, 5),
        (13, 3),
        (14, 2),
        // SHARED_MEMORY_SIZE MW(561:544) = 0x400 reserved + 0x100 = 0x500 -> dw17 17:0;
        // MIN_SM_CONFIG_SHARED_MEM_SIZE MW(567:562) = 32 KiB/4+1 = 9 -> 9 << 18;
        // MAX_SM_CONFIG_SHARED_MEM_SIZE MW(574:569) = 100 KiB/4+1 = 0x1A -> 0x1A << 25.
        (17, 0x3424_0500),
        // QMD_MAJOR_VERSION MW(583:580) = 3 -> dw18 b7:4; CTA_THREAD_DIMENSION0 MW(607:592) = 64.
        (18, 0x0040_0030),
        // CTA_THREAD_DIMENSION1 MW(623:608) = 2, CTA_THREAD_DIMENSION2 MW(639:624) = 1.
        (19, 0x0001_0002),
        // CONSTANT_BUFFER_VALID(i) MW(640+i) for i = 0, 3 -> dw20 b0, b3; REGISTER_COUNT_V
        // MW(656:648) = 32 -> 0x20 << 8; TARGET_SM_CONFIG_SHARED_MEM_SIZE MW(662:657) = 9 << 17.
        (20, 0x0012_2009),
        // BARRIER_COUNT MW(767:763) = 1 -> dw23 b27 (SHADER_LOCAL_MEMORY_LOW_SIZE MW(759:736) = 0).
        (23, 0x0800_0000),
        // CONSTANT_BUFFER_ADDR_LOWER(0) MW(1055:1024).
        (32, 0x2000_0100),
        // CONSTANT_BUFFER_ADDR_UPPER(0) MW(1072:1056) = 0x7F; _INVALIDATE(0) MW(1074) -> b18;
        // _SIZE_SHIFTED4(0) MW(1087:1075) = 0x230 >> 4 = 0x23 -> 0x23 << 19.
        (33, 0x011C_007F),
        // Constant buffer 3 at 1024 + 3 * 64 = bit 1216 = dw38: ADDR_LOWER, then UPPER 0x7F,
        // INVALIDATE b18, SIZE_SHIFTED4 0x40 >> 4 = 4 -> 4 << 19.
        (38, 0x1234_9000),
        (39, 0x0024_007F),
        // PROGRAM_ADDRESS_LOWER MW(1567:1536), PROGRAM_ADDRESS_UPPER MW(1584:1568) = 0x7F.
        (48, 0x1234_5600),
        (49, 0x0000_007F),
        // SHADER_LOCAL_MEMORY_HIGH_SIZE MW(1623:1600) = 0x260.
        (50, 0x0000_0260),
        // PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED MW(1640:1632) = 0; PROGRAM_PREFETCH_SIZE
        // MW(1649:1641) = 0x1234 >> 8 = 0x12 -> 0x12 << 9; SASS_VERSION MW(1663:1656) = 0x89.
        (51, 0x8900_2400),
    ])
}

/// QMD V04_00 (clcbc0qmd.h NVCBC0_QMDV04_00_*), 96 dwords, on HOPPER_COMPUTE_A (sm_90).
#[rustfmt::skip]
fn qmd_v04_expected() -> Vec<u32> {
    words(96, &[
        // QMD_TYPE MW(25:23) = GRID_CTA 2 -> dw0 b24.
        (0, 0x0100_0000),
        // CONSTANT_BUFFER_VALID(i) MW(416+4i) and _INVALIDATE(i) MW(419+4i), i = 0 and 3:
        // dw13 b0, b3, b12, b15.
        (13, 0x0000_9009),
        // SHADER_LOCAL_MEMORY_LOW_SIZE MW(535:512) = 0; SASS_VERSION MW(543:536) = 0x90.
        (16, 0x9000_0000),
        // SHADER_LOCAL_MEMORY_HIGH_SIZE MW(567:544) = 0x260; API_VISIBLE_CALL_LIMIT MW(568:568)
        // = NO_CHECK -> dw17 b24 (SAMPLER_INDEX MW(569:569) = INDEPENDENTLY 0).
        (17, 0x0100_0260),
        // QMD_MAJOR_VERSION MW(583:580) = 4 -> dw18 b7:4; SHARED_MEMORY_SIZE MW(601:584) = 0x500
        // -> 0x500 << 8; INVALIDATE_TEXTURE_HEADER/_SAMPLER/_DATA/SHADER_DATA_CACHE
        // MW(602..605) -> b26..29.
        (18, 0x3C05_0040),
        // MIN_SM_CONFIG_SHARED_MEM_SIZE MW(613:608) = 9; MAX_SM_CONFIG_SHARED_MEM_SIZE
        // MW(619:614) = 0x1A (100 KiB) -> 0x1A << 6; TARGET_SM_CONFIG MW(625:620) = 9 << 12.
        (19, 0x0000_9689),
        // GRID_WIDTH MW(1055:1024), GRID_HEIGHT MW(1071:1056), GRID_DEPTH MW(1103:1088).
        (32, 5),
        (33, 3),
        (34, 2),
        // CWD_MEMBAR_TYPE MW(1137:1136) = L1_SYSMEMBAR 1 -> dw35 b16.
        (35, 0x0001_0000),
        // CTA_THREAD_DIMENSION0 MW(1167:1152) = 64, CTA_THREAD_DIMENSION1 MW(1183:1168) = 2.
        (36, 0x0002_0040),
        // CTA_THREAD_DIMENSION2 MW(1199:1184) = 1; REGISTER_COUNT MW(1208:1200) = 32 -> 0x20 << 16;
        // BARRIER_COUNT MW(1215:1211) = 1 -> b27.
        (37, 0x0820_0001),
        // PROGRAM_ADDRESS_LOWER MW(1247:1216), PROGRAM_ADDRESS_UPPER MW(1272:1248) = 0x7F.
        (38, 0x1234_5600),
        (39, 0x0000_007F),
        // PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED MW(1375:1344) = addr >> 8;
        // _UPPER_SHIFTED MW(1392:1376) = 0; PROGRAM_PREFETCH_SIZE MW(1401:1393) = 0x12 << 17.
        (42, 0x7F12_3456),
        (43, 0x0024_0000),
        // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0) MW(1567:1536) = (0x7F_2000_0100 >> 6) low =
        // 0x1_FC80_0004 low; _UPPER_SHIFTED6(0) MW(1586:1568) = 1; _SIZE_SHIFTED4(0)
        // MW(1599:1587) = 0x23 -> 0x23 << 19.
        (48, 0xFC80_0004),
        (49, 0x0118_0001),
        // Constant buffer 3 at 1536 + 3 * 64 = bit 1728 = dw54: 0x7F_1234_9000 >> 6 =
        // 0x1_FC48_D240; size 0x40 >> 4 = 4 -> 4 << 19.
        (54, 0xFC48_D240),
        (55, 0x0020_0001),
    ])
}

#[test]
fn qmd_v03_matches_clc7c0qmd_h() {
    assert_eq!(golden_qmd(&ADA_COMPUTE_A, 89), qmd_v03_expected());
}

#[test]
fn qmd_v04_matches_clcbc0qmd_h() {
    assert_eq!(golden_qmd(&HOPPER_COMPUTE_A, 90), qmd_v04_expected());
}

#[test]
#[rustfmt::skip]
fn host_semaphore_release_matches_clc86f_h() {
    // HOPPER_CHANNEL_GPFIFO_A: SEM_ADDR_HI OFFSET 24:0 (clc86f.h), so a 49-bit address fits.
    let mut b = PushBuf::new(NvClasses::preferred(&HOPPER_COMPUTE_A));
    b.signal(0x0001_0000_1234_5670, 0x1_0000_0002).unwrap();
    assert_eq!(b.dwords(), [
        // INC_METHOD (1 << 29), 5 methods (5 << 16), subchannel 0, SEM_ADDR_LO 0x5C >> 2 = 0x17.
        0x2005_0017,
        // SEM_ADDR_LO OFFSET 31:2 (the low word, 16-byte aligned), SEM_ADDR_HI OFFSET 24:0.
        0x1234_5670, 0x0001_0000,
        // SEM_PAYLOAD_LO, SEM_PAYLOAD_HI.
        0x0000_0002, 0x0000_0001,
        // SEM_EXECUTE: OPERATION 2:0 = RELEASE 1, RELEASE_WFI 20:20 = EN, PAYLOAD_SIZE 24:24 =
        // 64BIT, RELEASE_TIMESTAMP 25:25 = EN.
        0x0310_0001,
        // NON_STALL_INTERRUPT (clc56f.h 0x20 >> 2 = 8), one method, HANDLE 0.
        0x2001_0008, 0x0000_0000,
    ]);
}

#[test]
#[rustfmt::skip]
fn host_semaphore_acquire_matches_clc56f_h() {
    // AMPERE_CHANNEL_GPFIFO_A (Ada's channel class): SEM_ADDR_HI OFFSET 7:0 (40-bit addresses).
    let mut b = PushBuf::new(NvClasses::preferred(&ADA_COMPUTE_A));
    b.wait(0xAB_1234_5678, 0x8000_0000_0000_0001, false).unwrap();
    b.wait(0x10_0000_0008, 7, true).unwrap();
    assert_eq!(b.dwords(), [
        0x2005_0017,
        0x1234_5678, 0x0000_00AB,
        0x0000_0001, 0x8000_0000,
        // SEM_EXECUTE: OPERATION = ACQ_CIRC_GEQ 3, PAYLOAD_SIZE 24:24 = 64BIT.
        0x0100_0003,
        0x2005_0017,
        0x0000_0008, 0x0000_0010,
        0x0000_0007, 0x0000_0000,
        // ... and ACQUIRE_SWITCH_TSG 12:12 = EN.
        0x0100_1003,
    ]);
    // A 41-bit address does not fit SEM_ADDR_HI 7:0.
    assert!(b.wait(0x100_0000_0000, 1, false).is_err());
}

#[test]
#[rustfmt::skip]
fn copy_engine_copy_and_semaphore_match_clc8b5_h() {
    let mut b = PushBuf::new(NvClasses::preferred(&HOPPER_COMPUTE_A));
    b.copy(0x0002_0000_3000_0000, 0x0001_0000_1000_0000, 0x1234).unwrap();
    b.copy_signal(0x0001_0000_2000_0010, 0x2A, false).unwrap();
    b.copy_signal(0x0001_0000_2000_0020, 0x1_0000_0005, true).unwrap();
    assert_eq!(b.dwords(), [
        // INC_METHOD, 4 methods, subchannel 4 (4 << 13), OFFSET_IN_UPPER 0x400 >> 2 = 0x100:
        // OFFSET_IN_UPPER (UPPER 24:0), OFFSET_IN_LOWER, OFFSET_OUT_UPPER, OFFSET_OUT_LOWER.
        0x2004_8100,
        0x0001_0000, 0x1000_0000, 0x0002_0000, 0x3000_0000,
        // LINE_LENGTH_IN (0x418 >> 2 = 0x106) = 0x1234 bytes, LINE_COUNT = 1.
        0x2002_8106,
        0x0000_1234, 0x0000_0001,
        // LAUNCH_DMA (0x300 >> 2 = 0xC0): DATA_TRANSFER_TYPE 1:0 = NON_PIPELINED 2,
        // SRC_MEMORY_LAYOUT 7:7 = PITCH, DST_MEMORY_LAYOUT 8:8 = PITCH; virtual src/dst (0).
        0x2001_80C0,
        0x0000_0182,
        // SET_SEMAPHORE_A (0x240 >> 2 = 0x90, UPPER 24:0), SET_SEMAPHORE_B, SET_SEMAPHORE_PAYLOAD.
        0x2003_8090,
        0x0001_0000, 0x2000_0010, 0x0000_002A,
        // LAUNCH_DMA: FLUSH_ENABLE 2:2 = TRUE, SEMAPHORE_TYPE 4:3 = RELEASE_FOUR_WORD_SEMAPHORE 2.
        0x2001_80C0,
        0x0000_0014,
        // With SET_SEMAPHORE_PAYLOAD_UPPER (0x24C) and SEMAPHORE_PAYLOAD_SIZE 27:27 = TWO_WORD.
        0x2004_8090,
        0x0001_0000, 0x2000_0020, 0x0000_0005, 0x0000_0001,
        0x2001_80C0,
        0x0800_0014,
    ]);
}

#[test]
fn gp_entries_match_clc86f_h() {
    // NVC86F_GP_ENTRY0: FETCH 0:0 = UNCONDITIONAL, GET 31:2 = address bits 31:2.
    // NVC86F_GP_ENTRY1: GET_HI 7:0 = address bits 39:32, LEVEL 9:9 = SUBROUTINE, LENGTH 30:10 =
    // dwords, SYNC 31:31 = PROCEED. Entry = ENTRY0 | ENTRY1 << 32 (little-endian in the ring).
    let e = gp_entry(0x12_3456_7890, 0x41).unwrap();
    let (entry0, entry1) = (e as u32, (e >> 32) as u32);
    assert_eq!(entry0, 0x3456_7890);
    // 0x12 | 1 << 9 | 0x41 << 10.
    assert_eq!(entry1, 0x0001_0612);
    // The largest LENGTH (21 bits: 0x1F_FFFF << 10 = 0x7FFF_FC00) and GET_HI 0xFF.
    let e = gp_entry(0xFF_FFFF_FFFC, 0x1F_FFFF).unwrap();
    assert_eq!(e, 0x7FFF_FEFF_FFFF_FFFC);
    // The decoder, fed a hand-built entry: SYNC = WAIT (b31 of ENTRY1), FETCH = CONDITIONAL.
    let d = decode_gp_entry(0x8000_FE34_0000_1001);
    assert_eq!(
        (d.addr, d.dwords, d.subroutine, d.sync, d.fetch_conditional),
        (0x34_0000_1000, 0x3F, true, true, true)
    );
}

#[test]
#[rustfmt::skip]
fn qmd_launches_match_clcbc0_h() {
    let classes = NvClasses::preferred(&HOPPER_COMPUTE_A);
    let qmd = qmd_v04_expected();
    let mut b = PushBuf::new(classes);
    b.launch_inline_qmd(0x12_3456_7800, &qmd).unwrap();
    b.send_pcas_with(0x12_3456_7900, PcasAction::INVALIDATE_COPY_SCHEDULE).unwrap();
    let mut want = vec![
        // INC_METHOD, 2 methods, subchannel 1 (1 << 13), SET_INLINE_QMD_ADDRESS_A 0x318 >> 2 =
        // 0xC6: A = QMD_ADDRESS_SHIFTED8_UPPER 8:0 (0x12_3456_7800 >> 8 >> 32 = 0) | INLINE_SIZE
        // 30:30 = INLINE_384 (1 << 30); B = (address >> 8) low 32 bits.
        0x2002_20C6,
        0x4000_0000, 0x1234_5678,
        // LOAD_INLINE_QMD_DATA(0) 0x320 >> 2 = 0xC8, 96 dwords (0x60 << 16).
        0x2060_20C8,
    ];
    want.extend_from_slice(&qmd);
    want.extend_from_slice(&[
        // SEND_PCAS_A 0x2B4 >> 2 = 0xAD: QMD_ADDRESS_SHIFTED8 = 0x12_3456_7900 >> 8.
        0x2001_20AD,
        0x1234_5679,
        // SEND_SIGNALING_PCAS2_B 0x2C0 >> 2 = 0xB0: PCAS_ACTION 3:0 = INVALIDATE_COPY_SCHEDULE 3.
        0x2001_20B0,
        0x0000_0003,
    ]);
    assert_eq!(b.dwords(), &want[..]);
    // Ada's class (C9C0, QMD V03): 256-byte inline QMDs, no INLINE_SIZE bit.
    let mut b = PushBuf::new(NvClasses::preferred(&ADA_COMPUTE_A));
    b.launch_inline_qmd(0x12_3456_7800, &qmd_v03_expected()).unwrap();
    assert_eq!(&b.dwords()[..4], [0x2002_20C6, 0, 0x1234_5678, 0x2040_20C8]);
}
