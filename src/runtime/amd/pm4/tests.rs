//! PM4 builder tests: golden decoded streams (tests/golden/amd/pm4_*.txt), decode(build(x))
//! round trips, raw-dword facts pinned independently of the decoder, and refusals.

use super::*;
use crate::hw::amd::decode::{
    check_golden, decode_pm4, decode_pm4_listing, decode_pm4_packet, Pm4Packet,
};
use crate::hw::amd::decode::{AcquireCntl, ReleaseCache};
use crate::hw::amd::targets::{GFX1030, GFX1100, GFX1201, GFX90A, GFX942, TARGETS};

const CODE: u64 = 0x7F12_3456_7800;
const KERNARGS: u64 = 0x7F00_0010_0040;
const SCRATCH: u64 = 0x7E00_0000_0000;
const SIGNAL: u64 = 0x7F00_2000_0010;
const MAILBOX: u64 = 0x7F00_3000_0018;

fn program(props: u16, rsrc2: u32) -> ExecProgram {
    ExecProgram {
        code_addr: CODE,
        rsrc1: 0x600C_0041,
        rsrc2,
        rsrc3: 0x5,
        kernel_code_properties: props,
        kernarg_preload: 0,
        group_segment_size: 1024,
        private_segment_size: 0,
    }
}

fn args() -> ExecArgs {
    ExecArgs {
        kernargs: KERNARGS,
        global: [4, 2, 1],
        local: [32, 1, 1],
        scratch: Some(ScratchSetup {
            va: SCRATCH,
            tmpring_size: 0x0020_0200,
        }),
        dispatch_ptr: None,
    }
}

#[test]
fn exec_gfx1100_golden_and_patch_points() {
    let mut b = Pm4Buf::new(&GFX1100);
    // LLVM 15+ gfx1100 kernel: kernarg ptr + wave32 (0x408), RSRC2.USER_SGPR 15 (observed).
    let p = b.exec(&program(0x408, 15 << 1 | 1 << 7), &args()).unwrap();
    assert_eq!(
        b.len(),
        69,
        "67 dwords of tinygrad 0.9.2 + RSRC3 (3) - one RESTART register"
    );
    let d = b.dwords();
    assert_eq!(d[0], 0xC006_5800, "ACQUIRE_MEM header, count 6");
    assert_eq!(
        d[p.dims.global.pos() - 1],
        0xC003_1500,
        "DISPATCH_DIRECT header, count 3"
    );
    assert_eq!(
        d[p.dims.global.pos()..p.dims.global.pos() + 4],
        [4, 2, 1, 1 | 1 << 2 | 1 << 15]
    );
    assert_eq!(d[p.dims.local.pos()..p.dims.local.pos() + 3], [32, 1, 1]);
    let k = p.kernarg.unwrap();
    assert_eq!(
        d[k.pos()..k.pos() + 2],
        [KERNARGS as u32, (KERNARGS >> 32) as u32]
    );
    assert_eq!(d[k.pos() - 1], 0x240, "kernarg in COMPUTE_USER_DATA_0/1");
    assert!(p.dispatch_ptr.is_none());
    assert_eq!(
        d[d.len() - 2..],
        [0xC000_4600, 7 | 4 << 8],
        "EVENT_WRITE CS_PARTIAL_FLUSH"
    );
    check_golden(
        "pm4_exec_gfx1100.txt",
        &decode_pm4_listing(&GFX1100, d).unwrap(),
    );

    // Patching launch dims and kernargs rewrites exactly those dwords.
    let before = b.dwords().to_vec();
    b.patch(&p.dims.global, [7, 8, 9]).unwrap();
    b.patch(&p.dims.local, [16, 2, 1]).unwrap();
    b.patch(&k, 0x7E00_0020_0000).unwrap();
    let changed: Vec<usize> = (0..b.len())
        .filter(|&i| before[i] != b.dwords()[i])
        .collect();
    let gp = p.dims.global.pos();
    let lp = p.dims.local.pos();
    assert_eq!(
        changed,
        vec![k.pos(), k.pos() + 1, lp, lp + 1, gp, gp + 1, gp + 2]
    );
    let decoded = decode_pm4(&GFX1100, b.dwords()).unwrap();
    assert!(decoded.iter().any(|(_, p)| matches!(
        p,
        Pm4Packet::DispatchDirect {
            groups: [7, 8, 9],
            ..
        }
    )));
}

#[test]
fn exec_gfx1030_private_segment_descriptor_golden() {
    let mut b = Pm4Buf::new(&GFX1030);
    // LLVM 14 gfx1030: private segment buffer + kernarg ptr + wave32 (0x409), USER_SGPR 6.
    let p = b.exec(&program(0x409, 6 << 1), &args()).unwrap();
    let d = b.dwords();
    let k = p.kernarg.unwrap();
    assert_eq!(
        d[k.pos() - 4..k.pos()],
        [
            SCRATCH as u32,
            (SCRATCH >> 32) as u32 | 1 << 31,
            0xFFFF_FFFF,
            0x20C1_4000
        ]
    );
    check_golden(
        "pm4_exec_gfx1030.txt",
        &decode_pm4_listing(&GFX1030, d).unwrap(),
    );
}

#[test]
fn exec_gfx942_wave64_golden() {
    let mut b = Pm4Buf::new(&GFX942);
    let mut a = args();
    a.dispatch_ptr = Some(KERNARGS + 0x40);
    let p = b.exec(&program(0x00A, 4 << 1), &a).unwrap(); // dispatch ptr + kernarg ptr, wave64
    let d = b.dwords();
    assert_eq!(d[0], 0xC005_5800, "gfx9 ACQUIRE_MEM has count 5");
    assert_eq!(
        d[p.dims.global.pos() + 3],
        1 | 1 << 2,
        "no CS_W32_EN on wave64"
    );
    assert_eq!(
        p.dispatch_ptr.unwrap().pos() + 2,
        p.kernarg.unwrap().pos(),
        "HSA order: dispatch ptr, kernarg ptr"
    );
    check_golden(
        "pm4_exec_gfx942.txt",
        &decode_pm4_listing(&GFX942, d).unwrap(),
    );
}

fn sync_stream(t: &'static crate::hw::amd::targets::GfxTarget) -> Pm4Buf {
    let mut b = Pm4Buf::new(t);
    b.wait(SIGNAL, 41).unwrap();
    b.memory_barrier().unwrap();
    b.timestamp(SIGNAL + 8).unwrap();
    b.signal(SIGNAL, 42, None).unwrap();
    b.signal(
        SIGNAL,
        43,
        Some(SignalEvent {
            mailbox: MAILBOX,
            event_id: 9,
        }),
    )
    .unwrap();
    b
}

#[test]
fn signal_wait_timestamp_barrier_golden() {
    for (t, name) in [
        (&GFX1100, "pm4_sync_gfx1100.txt"),
        (&GFX90A, "pm4_sync_gfx90a.txt"),
    ] {
        let b = sync_stream(t);
        check_golden(name, &decode_pm4_listing(t, b.dwords()).unwrap());
    }
    // Raw facts: the signal's value write is DATA_SEL 1 (32-bit), INT_SEL 0; the mailbox write
    // interrupts (INT_SEL 2) with ctxid = event id; the timestamp is DATA_SEL 3.
    let mut b = Pm4Buf::new(&GFX1100);
    let s = b
        .signal(
            SIGNAL,
            42,
            Some(SignalEvent {
                mailbox: MAILBOX,
                event_id: 9,
            }),
        )
        .unwrap();
    let d = b.dwords();
    assert_eq!(d[0], 0xC006_4900);
    assert_eq!(d[2], 1 << 29);
    assert_eq!(d[s.value.pos()], 42);
    assert_eq!(
        d[s.addr.pos()..s.addr.pos() + 2],
        [SIGNAL as u32, (SIGNAL >> 32) as u32]
    );
    assert_eq!(d[10], 1 << 29 | 2 << 24);
    assert_eq!(d[15], 9);
    let mut b = Pm4Buf::new(&GFX1100);
    let ts = b.timestamp(SIGNAL + 8).unwrap();
    assert_eq!((b.dwords()[2], ts.pos()), (3 << 29, 3));
}

#[test]
fn signal_and_wait_patches() {
    let mut b = Pm4Buf::new(&GFX1100);
    let w = b.wait(SIGNAL, 1).unwrap();
    let s = b
        .signal(
            SIGNAL,
            2,
            Some(SignalEvent {
                mailbox: MAILBOX,
                event_id: 3,
            }),
        )
        .unwrap();
    b.patch(&w.value, 100).unwrap();
    b.patch(&w.addr, SIGNAL + 0x40).unwrap();
    b.patch(&s.value, 101).unwrap();
    b.patch(
        &s.event.unwrap(),
        SignalEvent {
            mailbox: MAILBOX + 8,
            event_id: 12,
        },
    )
    .unwrap();
    let pk = decode_pm4(&GFX1100, b.dwords()).unwrap();
    match &pk[0].1 {
        Pm4Packet::WaitRegMem(w) => {
            assert_eq!(
                (w.target, w.reference),
                (
                    WaitTarget::Memory {
                        addr: SIGNAL + 0x40
                    },
                    100
                )
            )
        }
        p => panic!("{p}"),
    }
    match (&pk[1].1, &pk[2].1) {
        (Pm4Packet::ReleaseMem(v), Pm4Packet::ReleaseMem(m)) => {
            assert_eq!(v.data, 101);
            assert_eq!((m.addr, m.data, m.int_ctxid), (MAILBOX + 8, 12, 12));
        }
        p => panic!("{p:?}"),
    }
    assert!(b.patch(&s.value, 1 << 32).is_err());
}

#[test]
fn release_mem_round_trip_on_every_target() {
    for t in TARGETS {
        let mut b = Pm4Buf::new(t);
        let rm = ReleaseMem {
            event: EventType::BOTTOM_OF_PIPE_TS,
            event_index: EventIndex::END_OF_SHADER,
            cache: ReleaseGcr::GL2_WB | ReleaseGcr::GLV_INV,
            dst_sel: DstSel::TC_L2,
            int_sel: IntSel::SEND_DATA_ON_CONFIRM,
            data_sel: DataSel::VALUE_64BIT,
            addr: 0x1234_5678_9AB8,
            data: 0xDEAD_BEEF_0123_4567,
            int_ctxid: 77,
        };
        b.release_mem(&rm).unwrap();
        let (p, len) = decode_pm4_packet(t, b.dwords()).unwrap();
        assert_eq!(len, 8);
        let Pm4Packet::ReleaseMem(r) = p else {
            panic!("{p}")
        };
        assert_eq!(
            (r.event, r.event_index, r.dst_sel, r.int_sel, r.data_sel),
            (
                rm.event,
                rm.event_index,
                rm.dst_sel,
                rm.int_sel,
                rm.data_sel
            )
        );
        assert_eq!(
            (r.addr, r.data, r.int_ctxid),
            (rm.addr, rm.data, rm.int_ctxid)
        );
        let want = match t.release_mem_cache {
            crate::hw::amd::targets::ReleaseMemCache::Gfx10Gcr => ReleaseCache::Gcr(rm.cache),
            crate::hw::amd::targets::ReleaseMemCache::Gfx9EopActions => {
                ReleaseCache::Eop(EopActions::from_gcr(rm.cache))
            }
        };
        assert_eq!(r.cache, want, "{}", t.name);
    }
}

#[test]
fn small_packets_round_trip() {
    let mut b = Pm4Buf::new(&GFX1201);
    b.nop(3).unwrap();
    b.set_sh_reg(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE4, &[1, 2, 3, 4])
        .unwrap();
    b.acquire_mem(GcrCntl::GL2_WB | GcrCntl::GLI_INV).unwrap();
    b.event_write(EventType::CS_PARTIAL_FLUSH, EventIndex::PARTIAL_FLUSH)
        .unwrap();
    b.indirect_buffer(0x7000_0000_1004, 123).unwrap();
    let w = WaitRegMem {
        function: CompareFunction::NEQ,
        operation: WaitOperation::WRITE_WAIT,
        target: WaitTarget::Registers {
            write: 0x10,
            poll: 0x11,
        },
        reference: 5,
        mask: 0xF0,
        poll_interval: 9,
    };
    b.wait_reg_mem(&w).unwrap();
    let pk: Vec<Pm4Packet> = decode_pm4(&GFX1201, b.dwords())
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(pk[0], Pm4Packet::Nop { body_dwords: 3 });
    assert_eq!(
        pk[1],
        Pm4Packet::SetShReg {
            offset: 0x22B,
            regs: vec![
                (ShReg::COMPUTE_STATIC_THREAD_MGMT_SE4, 1),
                (ShReg::COMPUTE_STATIC_THREAD_MGMT_SE5, 2),
                (ShReg::COMPUTE_STATIC_THREAD_MGMT_SE6, 3),
                (ShReg::COMPUTE_STATIC_THREAD_MGMT_SE7, 4)
            ]
        }
    );
    assert!(
        matches!(pk[2], Pm4Packet::AcquireMem { cntl: AcquireCntl::Gcr(g), size: 0xFF_FFFF_FFFF_FFFF, base: 0, .. } if g == GcrCntl::GL2_WB | GcrCntl::GLI_INV)
    );
    assert_eq!(
        pk[3],
        Pm4Packet::EventWrite {
            event: EventType::CS_PARTIAL_FLUSH,
            index: EventIndex::PARTIAL_FLUSH
        }
    );
    assert_eq!(
        pk[4],
        Pm4Packet::IndirectBuffer {
            addr: 0x7000_0000_1004,
            size_dwords: 123,
            chain: false
        }
    );
    assert_eq!(pk[5], Pm4Packet::WaitRegMem(w));
    let mut g9 = Pm4Buf::new(&GFX90A);
    g9.acquire_mem(GcrCntl::GL2_INV | GcrCntl::GLK_INV).unwrap();
    let (p, _) = decode_pm4_packet(&GFX90A, g9.dwords()).unwrap();
    let want = CpCoherCntl::TC_ACTION_ENA | CpCoherCntl::SH_KCACHE_ACTION_ENA;
    assert!(
        matches!(p, Pm4Packet::AcquireMem { cntl: AcquireCntl::CoherCntl(c), poll_interval: 0xA, .. } if c == want)
    );
}

#[test]
fn exec_refuses_unsupported_kernels() {
    let p = |props| program(props, 15 << 1);
    let cases = [
        (
            "misaligned code",
            ExecProgram {
                code_addr: CODE + 0x40,
                ..p(0x408)
            },
            args(),
        ),
        ("queue ptr", p(0x40C), args()),
        ("dispatch id", p(0x418), args()),
        ("flat scratch init", p(0x428), args()),
        ("private segment size", p(0x448), args()),
        ("unknown property bit", p(0x1408), args()),
        ("USER_SGPR 1 < 2", program(0x408, 1 << 1), args()),
        ("dispatch ptr without a packet", p(0x40A), args()),
    ];
    let mut b = Pm4Buf::new(&GFX1100);
    for (what, prg, a) in cases {
        assert!(b.exec(&prg, &a).is_err(), "{what}");
    }
    assert!(
        Pm4Buf::new(&GFX942).exec(&p(0x408), &args()).is_err(),
        "wave32 on gfx9"
    );
    assert!(b.is_empty(), "failed builders emit nothing");
}

#[test]
fn exec_refuses_bad_arguments() {
    let p = |props| program(props, 15 << 1);
    let cases = [
        (
            "descriptor without scratch",
            p(0x409),
            ExecArgs {
                scratch: None,
                ..args()
            },
        ),
        (
            "scratch use without scratch",
            ExecProgram {
                private_segment_size: 16,
                ..p(0x408)
            },
            ExecArgs {
                scratch: None,
                ..args()
            },
        ),
        (
            "2048 threads",
            p(0x408),
            ExecArgs {
                local: [64, 32, 1],
                ..args()
            },
        ),
        (
            "empty grid",
            p(0x408),
            ExecArgs {
                global: [0, 1, 1],
                ..args()
            },
        ),
        (
            "kernargs not 16-byte aligned",
            p(0x408),
            ExecArgs {
                kernargs: KERNARGS + 8,
                ..args()
            },
        ),
        (
            "LDS over 64 KiB",
            ExecProgram {
                group_segment_size: 65537,
                ..p(0x408)
            },
            args(),
        ),
        (
            "kernarg preload",
            ExecProgram {
                kernarg_preload: 1,
                ..p(0x408)
            },
            args(),
        ),
    ];
    let mut b = Pm4Buf::new(&GFX1100);
    for (what, prg, a) in cases {
        assert!(b.exec(&prg, &a).is_err(), "{what}");
    }
    let e = b
        .exec(
            &ExecProgram {
                code_addr: CODE + 0x40,
                ..p(0x408)
            },
            &args(),
        )
        .unwrap_err();
    assert!(e.message().contains("256-byte aligned"), "{e}");
    assert!(b.is_empty(), "failed builders emit nothing");
}

#[test]
fn builders_refuse_bad_values() {
    let mut b = Pm4Buf::new(&GFX942);
    assert!(
        b.set_sh_reg(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE4, &[0])
            .is_err(),
        "no SE4 on gfx9"
    );
    assert!(
        b.set_sh_reg(ShReg::COMPUTE_RESTART_X, &[0, 0, 0, 0])
            .is_err(),
        "0x21E is not ours"
    );
    assert!(b.set_sh_reg(ShReg::COMPUTE_PGM_LO, &[]).is_err());
    let e = b.memory_barrier().unwrap_err();
    assert!(e.message().contains("gfx942"), "{e}");
    let mut b = Pm4Buf::new(&GFX1100);
    assert!(b.signal(SIGNAL, 1 << 32, None).is_err());
    assert!(b.signal(SIGNAL + 2, 1, None).is_err());
    assert!(b
        .signal(
            SIGNAL,
            1,
            Some(SignalEvent {
                mailbox: MAILBOX + 4,
                event_id: 1
            })
        )
        .is_err());
    assert!(b.wait(SIGNAL + 1, 1).is_err());
    assert!(b.timestamp(SIGNAL + 4).is_err());
    assert!(b.indirect_buffer(0x1000, 0).is_err());
    assert!(b.nop(0).is_err());
    assert!(b.is_empty(), "failed builders emit nothing");
}

#[test]
fn decoder_names_positions_and_rejects_unknowns() {
    let mut b = Pm4Buf::new(&GFX1100);
    b.nop(1).unwrap();
    let mut d = b.dwords().to_vec();
    d.push(3 << 30 | 0x99 << 8); // unknown opcode 0x99
    let e = decode_pm4(&GFX1100, &d).unwrap_err();
    assert!(
        e.message().contains("dword 2") && e.message().contains("unknown opcode 0x99"),
        "{e}"
    );
    let e = decode_pm4(&GFX1100, &[0xC001_7600, 0x21E, 0]).unwrap_err();
    assert!(
        e.message().contains("unknown SH register at offset 0x21e"),
        "{e}"
    );
    assert!(
        decode_pm4(&GFX1100, &[0x8000_0000]).is_err(),
        "type-2 filler"
    );
    assert!(decode_pm4(&GFX1100, &[0xC006_4900, 0, 0])
        .unwrap_err()
        .message()
        .contains("truncated"));
    assert!(
        decode_pm4(&GFX90A, &[0xC001_7600, 0x22B, 0]).is_err(),
        "SE4 unknown on gfx9"
    );
}

#[test]
fn ring_copy_wraps_dwords() {
    let mut b = Pm4Buf::new(&GFX1100);
    b.set_sh_reg(ShReg::COMPUTE_USER_DATA_0, &[1, 2, 3, 4])
        .unwrap();
    let mut ring = [0u32; 8];
    let w = b
        .copy_to_ring(8, 13, &mut |at, dws| {
            ring[at as usize..at as usize + dws.len()].copy_from_slice(dws);
            Ok(())
        })
        .unwrap();
    assert_eq!(w, 19);
    assert_eq!(ring[5..], [b.dwords()[0], 0x240, 1]);
    assert_eq!(ring[..3], [2, 3, 4]);
    assert!(
        b.copy_to_ring(4, 0, &mut |_, _| Ok(())).is_err(),
        "does not fit"
    );
    assert!(
        b.copy_to_ring(12, 0, &mut |_, _| Ok(())).is_err(),
        "not a power of two"
    );
}
