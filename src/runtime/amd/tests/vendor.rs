//! Packet goldens written by hand from the vendors' field positions, not from rawgrad's output:
//! one per PM4 and SDMA packet kind rawgrad emits, and one per generation where the encoding
//! differs (gfx9.4 = gfx942, gfx10.3 = gfx1030, gfx11 = gfx1100, gfx12 = gfx1201). Each literal
//! names its header and field. Every golden is checked both ways: the encoder must emit exactly
//! these dwords, and the decoder the software GPU executes must read the fields back from the
//! literal, so a wrong bit position in the tables the two share cannot round-trip unnoticed.
//!
//! Headers: Linux `drivers/gpu/drm/amd/amdgpu/` nvd.h, soc15d.h, vega10_sdma_pkt_open.h (SDMA 4),
//! sdma_v6_0_0_pkt_open.h (SDMA 6, also used by sdma_v7_0.c), amdgpu/gfx_v*_0.c, and
//! `include/asic_reg/gc/gc_{9_4_3,10_3_0,11_0_0,12_0_0}_offset.h`, gc_9_4_3_sh_mask.h,
//! `include/navi10_enum.h` (read in the freebsd/drm-kmod mirror of May 2026); Mesa
//! `src/amd/registers/gfx10.json` and `pkt3.json`, `src/amd/common/sid.h`.
//!
//! PM4 type-3 header (nvd.h `PACKET3(op, n)`): 3 << 30 | (n & 0x3FFF) << 16 | (op & 0xFF) << 8,
//! n = body dwords - 1. Opcodes (nvd.h): DISPATCH_DIRECT 0x15, WAIT_REG_MEM 0x3C, EVENT_WRITE
//! 0x46, RELEASE_MEM 0x49, ACQUIRE_MEM 0x58, SET_SH_REG 0x76.

use crate::hw::amd::decode::{
    decode_pm4_packet, decode_sdma_packet, AcquireCntl, Pm4Packet, ReleaseCache, SdmaPacket,
};
use crate::hw::amd::pm4::{
    CompareFunction, CpCoherCntl, DataSel, DispatchInitiator, EopActions, GcrCntl, ReleaseGcr,
    ShReg, WaitTarget,
};
use crate::hw::amd::targets::{GfxTarget, ScratchModel, GFX1030, GFX1100, GFX1201, GFX942};
use crate::mockgpu::amdgpu::object::mock_descriptor;
use crate::runtime::amd::pm4::exec::{BARRIER_ACQUIRE, EXEC_ACQUIRE};
use crate::runtime::amd::pm4::{ExecArgs, Pm4Buf, ScratchSetup};
use crate::runtime::amd::program::AmdProgram;
use crate::runtime::amd::sdma::SdmaBuf;

/// A 48-bit, 8-byte aligned VA: lo 0x3456_7890, hi 0x7F12.
const ADDR: u64 = 0x7F12_3456_7890;
const ADDR_LO: u32 = 0x3456_7890;
const ADDR_HI: u32 = 0x7F12;

fn pm4(t: &'static GfxTarget, f: impl FnOnce(&mut Pm4Buf)) -> Vec<u32> {
    let mut b = Pm4Buf::new(t);
    f(&mut b);
    b.dwords().to_vec()
}

fn sdma(t: &'static GfxTarget, f: impl FnOnce(&mut SdmaBuf)) -> Vec<u32> {
    let mut b = SdmaBuf::new(t);
    f(&mut b);
    b.dwords().to_vec()
}

fn decode(t: &GfxTarget, dwords: &[u32]) -> Pm4Packet {
    let (p, len) = decode_pm4_packet(t, dwords).unwrap_or_else(|e| panic!("{}: {e}", t.name));
    assert_eq!(len, dwords.len(), "{}: packet length", t.name);
    p
}

#[test]
fn set_sh_reg() {
    // Body: the register's dword offset from PACKET3_SET_SH_REG_START 0x2c00 (nvd.h), then the
    // values. In the gc offset headers COMPUTE_DISPATCH_INITIATOR (dword 0x2E00 = SH offset 0x200)
    // is regCOMPUTE_DISPATCH_INITIATOR 0x0e00 (gc_9_4_3) / 0x1ba0 (gc_10_3_0, gc_11_0_0,
    // gc_12_0_0), so COMPUTE_PGM_LO 0x0e0c / 0x1bac is offset 0x20C on all four, and
    // COMPUTE_PGM_RSRC3 is 0x0e2d -> 0x22D on gfx9.4 but 0x1bc8 -> 0x228 on gfx10.3, 11 and 12.
    let cases: [(&'static GfxTarget, u32); 4] = [
        (&GFX942, 0x22D),
        (&GFX1030, 0x228),
        (&GFX1100, 0x228),
        (&GFX1201, 0x228),
    ];
    for (t, rsrc3) in cases {
        let got = pm4(t, |b| {
            b.set_sh_reg(ShReg::COMPUTE_PGM_LO, &[0x0123_4567, 0x89])
                .unwrap();
            b.set_sh_reg(ShReg::COMPUTE_PGM_RSRC3, &[0x4]).unwrap();
        });
        let want = [
            0xC002_7600, // PACKET3(SET_SH_REG 0x76, 2): offset + two values
            0x20C,       // COMPUTE_PGM_LO
            0x0123_4567,
            0x89,
            0xC001_7600, // PACKET3(SET_SH_REG, 1)
            rsrc3,       // COMPUTE_PGM_RSRC3
            0x4,
        ];
        assert_eq!(got, want, "{}", t.name);
        let Pm4Packet::SetShReg { regs, .. } = decode(t, &want[4..]) else {
            panic!("{}: not SET_SH_REG", t.name)
        };
        assert_eq!(regs, vec![(ShReg::COMPUTE_PGM_RSRC3, 4)], "{}", t.name);
    }
    // 0x22D is COMPUTE_STATIC_THREAD_MGMT_SE6 on gfx11 (regCOMPUTE_STATIC_THREAD_MGMT_SE6 0x1bcd).
    let Pm4Packet::SetShReg { regs, .. } = decode(&GFX1100, &[0xC001_7600, 0x22D, 0xFF]) else {
        panic!()
    };
    assert_eq!(regs, vec![(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE6, 0xFF)]);
}

#[test]
fn dispatch_direct() {
    // Body: DIM_X, DIM_Y, DIM_Z (workgroups), COMPUTE_DISPATCH_INITIATOR (the layout amdgpu's
    // gfx_v9_0.c EDC workaround writes). Initiator bits: COMPUTE_SHADER_EN 0, FORCE_START_AT_000 2
    // (gc_9_4_3_sh_mask.h *__SHIFT 0x0 / 0x2, Mesa gfx10.json [0,0] / [2,2]); CS_W32_EN 15 exists
    // from gfx10 on (gfx10.json [15,15]; gc_9_4_3_sh_mask.h has no such field). The launch a
    // wave32 kernel gets on gfx10+ sets it; gfx9.4 runs wave64 only.
    let cases: [(&'static GfxTarget, u32); 4] = [
        (&GFX942, 0x0000_0005),
        (&GFX1030, 0x0000_8005),
        (&GFX1100, 0x0000_8005),
        (&GFX1201, 0x0000_8005),
    ];
    for (t, init) in cases {
        let prg = AmdProgram::encode_only("E", mock_descriptor(t, 8, 0), 0x7F00_0000_0100, None);
        // gfx10.3 kernels read a private segment descriptor, so their launch needs scratch.
        let scratch =
            (t.scratch == ScratchModel::PrivateSegmentDescriptor).then_some(ScratchSetup {
                va: 0x7F00_7000_0000,
                tmpring_size: 0,
            });
        let args = ExecArgs {
            kernargs: 0x7F00_0001_0000,
            global: [4, 2, 1],
            local: [32, 1, 1],
            scratch,
            dispatch_ptr: None,
        };
        let got = pm4(t, |b| {
            b.exec(prg.exec_program(), &args).unwrap();
        });
        // exec ends with DISPATCH_DIRECT then EVENT_WRITE(CS_PARTIAL_FLUSH).
        let n = got.len();
        let want = [
            0xC003_1500, // PACKET3(DISPATCH_DIRECT 0x15, 3)
            4,
            2,
            1,
            init,
            0xC000_4600, // PACKET3(EVENT_WRITE 0x46, 0)
            0x0000_0407, // EVENT_TYPE CS_PARTIAL_FLUSH 0x07 (navi10_enum.h) | EVENT_INDEX(4) << 8
        ];
        assert_eq!(&got[n - 7..], &want, "{}", t.name);
        let Pm4Packet::DispatchDirect { groups, initiator } = decode(t, &want[..5]) else {
            panic!("{}: not DISPATCH_DIRECT", t.name)
        };
        assert_eq!(groups, [4, 2, 1]);
        assert_eq!(
            initiator.contains(DispatchInitiator::CS_W32_EN),
            t.generation >= 10
        );
    }
}

#[test]
fn release_mem() {
    // The signal: RELEASE_MEM, body of 7 (PACKET3(0x49, 6)). DW1 = EVENT_TYPE
    // CACHE_FLUSH_AND_INV_TS_EVENT 0x14 (navi10_enum.h) | EVENT_INDEX(5) << 8 | cache actions:
    // - gfx9.4: soc15d.h EOP_TC_WB_ACTION_EN 1<<15 | EOP_TCL1_ACTION_EN 1<<16 |
    //   EOP_TC_ACTION_EN 1<<17 | EOP_TC_MD_ACTION_EN 1<<21 = 0x0023_8000 (the set amdgpu's
    //   gfx_v9_4_3_ring_emit_fence sends);
    // - gfx10.3/11: nvd.h PACKET3_RELEASE_MEM_GCR_GLM_WB 1<<12 | GLM_INV 1<<13 | GLV_INV 1<<14 |
    //   GL1_INV 1<<15 | GL2_INV 1<<20 | GL2_WB 1<<21 | SEQ 1<<22 = 0x0070_F000;
    // - gfx12: the same without GLM_WB/GLM_INV (gfx_v12_0_ring_emit_fence; Mesa radeonsi
    //   si_barrier.c, `gfx_level < GFX12`) = 0x0070_C000.
    // DW2 (nvd.h): DST_SEL(0) << 16 | INT_SEL(0) << 24 | DATA_SEL(1: 32-bit) << 29 = 0x2000_0000.
    // Then ADDRESS_LO, ADDRESS_HI, DATA_LO, DATA_HI, INT_CTXID.
    let cases: [(&'static GfxTarget, u32); 4] = [
        (&GFX942, 0x0023_8514),
        (&GFX1030, 0x0070_F514),
        (&GFX1100, 0x0070_F514),
        (&GFX1201, 0x0070_C514),
    ];
    for (t, dw1) in cases {
        let got = pm4(t, |b| {
            b.signal(ADDR, 0x2A, None).unwrap();
        });
        let want = [0xC006_4900, dw1, 0x2000_0000, ADDR_LO, ADDR_HI, 0x2A, 0, 0];
        assert_eq!(got, want, "{}", t.name);
        let Pm4Packet::ReleaseMem(r) = decode(t, &want) else {
            panic!("{}: not RELEASE_MEM", t.name)
        };
        assert_eq!(
            (r.addr, r.data, r.data_sel),
            (ADDR, 0x2A, DataSel::VALUE_32BIT)
        );
        let full = ReleaseGcr::GL2_WB | ReleaseGcr::GL2_INV | ReleaseGcr::GLV_INV;
        match r.cache {
            ReleaseCache::Eop(e) => assert_eq!(
                e,
                EopActions::EOP_TC_WB_ACTION_EN
                    | EopActions::EOP_TCL1_ACTION_EN
                    | EopActions::EOP_TC_ACTION_EN
                    | EopActions::EOP_TC_MD_ACTION_EN
            ),
            ReleaseCache::Gcr(g) => {
                assert!(
                    g.contains(full | ReleaseGcr::GL1_INV | ReleaseGcr::SEQ),
                    "{g:?}"
                );
                assert_eq!(g.contains(ReleaseGcr::GLM_WB), t.gcr_glm, "{}", t.name);
            }
        }
    }
    // gfx12 has no GLM actions: the software GPU refuses the gfx11 encoding there.
    let gfx11 = [
        0xC006_4900,
        0x0070_F514,
        0x2000_0000,
        ADDR_LO,
        ADDR_HI,
        0x2A,
        0,
        0,
    ];
    let e = decode_pm4_packet(&GFX1201, &gfx11).unwrap_err();
    assert!(e.message().contains("GLM"), "{e}");
}

#[test]
fn acquire_mem() {
    // gfx10+ (nvd.h): PACKET3(ACQUIRE_MEM 0x58, 6), COHER_CNTL 0, COHER_SIZE 0xFFFFFFFF,
    // COHER_SIZE_HI 0xFFFFFF, COHER_BASE_LO/HI 0, POLL_INTERVAL 0x0A, GCR_CNTL: GLI_INV(1) << 0 |
    // GLM_WB 1<<4 | GLM_INV 1<<5 | GLK_WB 1<<6 | GLK_INV 1<<7 | GLV_INV 1<<8 | GL1_INV 1<<9 |
    // GL2_INV 1<<14 | GL2_WB 1<<15 = 0xC3F1 for the full barrier (0xC3C1 without GLM on gfx12),
    // and the launch's (no GLI, no GL2) 0x3F0 (0x3C0). The layout is amdgpu's
    // gfx_v11_0_emit_mem_sync. gfx9.4 (soc15d.h): PACKET3(0x58, 5), CP_COHER_CNTL
    // SH_ICACHE_ACTION_ENA 1<<29 | SH_KCACHE_ACTION_ENA 1<<27 | TC_ACTION_ENA 1<<23 |
    // TCL1_ACTION_ENA 1<<22 | TC_WB_ACTION_ENA 1<<18 = 0x28C4_0000 (gfx_v9_4_3_emit_mem_sync),
    // the launch's KCACHE | TCL1 = 0x0840_0000, then size, size hi, base, base hi, poll interval.
    let gfx10 = |gcr: u32| vec![0xC006_5800, 0, !0, 0xFF_FFFF, 0, 0, 0x0A, gcr];
    let gfx9 = |cntl: u32| vec![0xC005_5800, cntl, !0, 0xFF_FFFF, 0, 0, 0x0A];
    let cases: [(&'static GfxTarget, Vec<u32>, Vec<u32>); 4] = [
        (&GFX942, gfx9(0x28C4_0000), gfx9(0x0840_0000)),
        (&GFX1030, gfx10(0xC3F1), gfx10(0x3F0)),
        (&GFX1100, gfx10(0xC3F1), gfx10(0x3F0)),
        (&GFX1201, gfx10(0xC3C1), gfx10(0x3C0)),
    ];
    for (t, barrier, launch) in cases {
        assert_eq!(
            pm4(t, |b| b.acquire_mem(BARRIER_ACQUIRE).unwrap()),
            barrier,
            "{}",
            t.name
        );
        assert_eq!(
            pm4(t, |b| b.acquire_mem(EXEC_ACQUIRE).unwrap()),
            launch,
            "{}",
            t.name
        );
        let Pm4Packet::AcquireMem {
            cntl,
            size,
            poll_interval,
            ..
        } = decode(t, &barrier)
        else {
            panic!("{}: not ACQUIRE_MEM", t.name)
        };
        assert_eq!((size, poll_interval), (0xFF_FFFF_FFFF_FFFF, 0x0A));
        match cntl {
            AcquireCntl::CoherCntl(c) => assert!(c.contains(
                CpCoherCntl::SH_ICACHE_ACTION_ENA
                    | CpCoherCntl::TC_ACTION_ENA
                    | CpCoherCntl::TC_WB_ACTION_ENA
            )),
            AcquireCntl::Gcr(g) => {
                assert!(g.contains(GcrCntl::GLI_INV | GcrCntl::GL2_INV | GcrCntl::GL2_WB));
                assert_eq!(g.contains(GcrCntl::GLM_INV), t.gcr_glm, "{}", t.name);
            }
        }
    }
    let e = decode_pm4_packet(&GFX1201, &gfx10(0xC3F1)).unwrap_err();
    assert!(e.message().contains("GLM"), "{e}");
}

#[test]
fn wait_reg_mem() {
    // nvd.h: PACKET3(WAIT_REG_MEM 0x3C, 5); DW1 WAIT_REG_MEM_FUNCTION(5: >=) << 0 |
    // MEM_SPACE(1: memory) << 4 | OPERATION(0) << 6 | ENGINE(0: ME) << 8 = 0x15; then POLL_ADDRESS
    // LO/HI, REFERENCE, MASK, POLL_INTERVAL. The same on every generation.
    let want = [0xC005_3C00, 0x15, ADDR_LO, ADDR_HI, 0x2A, !0, 4];
    for t in [&GFX942, &GFX1030, &GFX1100, &GFX1201] {
        assert_eq!(
            pm4(t, |b| {
                b.wait(ADDR, 0x2A).unwrap();
            }),
            want,
            "{}",
            t.name
        );
        let Pm4Packet::WaitRegMem(w) = decode(t, &want) else {
            panic!("{}: not WAIT_REG_MEM", t.name)
        };
        assert_eq!(w.function, CompareFunction::GEQ);
        assert_eq!(w.target, WaitTarget::Memory { addr: ADDR });
        assert_eq!((w.reference, w.mask, w.poll_interval), (0x2A, !0, 4));
    }
}

#[test]
fn sdma_copy_linear() {
    // COPY_LINEAR (7 dwords): header op SDMA_OP_COPY 1 (bits 7:0) | SDMA_SUBOP_COPY_LINEAR 0
    // (bits 15:8); COUNT = bytes - 1 (SDMA_PKT_COPY_LINEAR_COUNT_count_mask 0x003FFFFF in
    // vega10_sdma_pkt_open.h, 0x3FFFFFFF in sdma_v6_0_0_pkt_open.h); PARAMETER 0 (no swaps); then
    // SRC_ADDR_LO/HI and DST_ADDR_LO/HI. A packet copies at most Mesa sid.h's
    // SDMA_V2_0_COPY_MAX_BYTES 0x3fff00 (SDMA 4: gfx9.4) or SDMA_V5_2_COPY_MAX_BYTES 0x3fffff00
    // (SDMA 5.2+: gfx10.3, 11, 12), so 4 MiB on gfx9.4 and 1 GiB on the others take two.
    let (src, dst) = (0x7F00_1000_0000u64, 0x7F00_8000_0000u64);
    let sdma4 = vec![
        1,
        0x3F_FEFF,
        0,
        0x1000_0000,
        0x7F00,
        0x8000_0000,
        0x7F00, // 0x3fff00 bytes
        1,
        0xFF,
        0,
        0x103F_FF00,
        0x7F00,
        0x803F_FF00,
        0x7F00, // the last 0x100 bytes
    ];
    let sdma52 = vec![
        1,
        0x3FFF_FEFF,
        0,
        0x1000_0000,
        0x7F00,
        0x8000_0000,
        0x7F00, // 0x3fffff00 bytes
        1,
        0xFF,
        0,
        0x4FFF_FF00,
        0x7F00,
        0xBFFF_FF00,
        0x7F00, // the last 0x100 bytes
    ];
    let cases: [(&'static GfxTarget, (u64, Vec<u32>)); 4] = [
        (&GFX942, (0x40_0000, sdma4)),
        (&GFX1030, (0x4000_0000, sdma52.clone())),
        (&GFX1100, (0x4000_0000, sdma52.clone())),
        (&GFX1201, (0x4000_0000, sdma52)),
    ];
    let copy = |count: u32| [1, count, 0, 0x1000_0000, 0x7F00, 0x8000_0000, 0x7F00];
    for (t, (size, want)) in cases {
        let got = sdma(t, |b| {
            b.copy_linear(dst, src, size).unwrap();
        });
        assert_eq!(got, want, "{}", t.name);
        let (p, len) = decode_sdma_packet(t, &want).unwrap();
        assert_eq!(len, 7);
        assert_eq!(
            p,
            SdmaPacket::CopyLinear {
                bytes: u64::from(want[1]) + 1,
                src,
                dst
            }
        );
        // The software GPU refuses one packet beyond the reliable maximum (Mesa sid.h).
        let one = copy((size - 1) as u32);
        assert!(decode_sdma_packet(t, &one).is_err(), "{}", t.name);
    }
}

#[test]
fn sdma_fence() {
    // FENCE (4 dwords): header SDMA_OP_FENCE 5 | MTYPE << 16 (SDMA_PKT_FENCE_HEADER_mtype_shift
    // 16, 3 = uncached as amdgpu's sdma_v5_2/v6_0_ring_emit_fence send) on SDMA 5.2+; SDMA 4's
    // header has no MTYPE (vega10_sdma_pkt_open.h). Then ADDR_LO, ADDR_HI, DATA.
    let cases: [(&'static GfxTarget, u32); 4] = [
        (&GFX942, 0x0000_0005),
        (&GFX1030, 0x0003_0005),
        (&GFX1100, 0x0003_0005),
        (&GFX1201, 0x0003_0005),
    ];
    for (t, header) in cases {
        let want = [header, ADDR_LO, ADDR_HI, 0x2A];
        assert_eq!(
            sdma(t, |b| {
                b.fence(ADDR, 0x2A).unwrap();
            }),
            want,
            "{}",
            t.name
        );
        let (p, _) = decode_sdma_packet(t, &want).unwrap();
        assert_eq!(
            p,
            SdmaPacket::Fence {
                mtype: header >> 16,
                addr: ADDR,
                data: 0x2A
            }
        );
    }
    // An MTYPE on SDMA 4 lands in reserved bits: refused.
    assert!(decode_sdma_packet(&GFX942, &[0x0003_0005, ADDR_LO, ADDR_HI, 1]).is_err());
}

#[test]
fn sdma_poll_regmem() {
    // POLL_REGMEM (6 dwords, the same in all three SDMA headers): header SDMA_OP_POLL_REGMEM 8 |
    // HDP_FLUSH(0) << 26 | FUNC(5: >=) << 28 | MEM_POLL(1) << 31 = 0xD000_0008; ADDR_LO, ADDR_HI,
    // VALUE, MASK, DW5 = INTERVAL (15:0) 4 | RETRY_COUNT (27:16) 0xFFF = 0x0FFF_0004.
    let want = [0xD000_0008, ADDR_LO, ADDR_HI, 0x2A, !0, 0x0FFF_0004];
    for t in [&GFX942, &GFX1030, &GFX1100, &GFX1201] {
        assert_eq!(
            sdma(t, |b| {
                b.wait(ADDR, 0x2A).unwrap();
            }),
            want,
            "{}",
            t.name
        );
        let (SdmaPacket::PollRegmem(p), 6) = decode_sdma_packet(t, &want).unwrap() else {
            panic!("{}: not POLL_REGMEM", t.name)
        };
        assert_eq!(p.function, CompareFunction::GEQ);
        assert_eq!((p.addr, p.reference, p.mask), (ADDR, 0x2A, !0));
        assert_eq!((p.interval, p.retry_count), (4, 0xFFF));
    }
}
