//! SDMA builder tests: golden decoded streams (tests/golden/amd/sdma_*.txt), round trips, the
//! copy split, patches and the ring wrap rule.

use super::*;
use crate::hw::amd::decode::{check_golden, decode_sdma, decode_sdma_listing, SdmaPacket};
use crate::hw::amd::targets::{GFX1100, GFX90A};

const SIGNAL: u64 = 0x7F00_2000_0010;
const MAILBOX: u64 = 0x7F00_3000_0018;

#[test]
fn sdma_sync_and_copy_golden() {
    let mut b = SdmaBuf::new(&GFX1100);
    b.wait(SIGNAL, 41).unwrap();
    b.copy_linear(0x7F00_4000_0000, 0x7F00_5000_0100, 0x1000)
        .unwrap();
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
    let d = b.dwords();
    // Raw facts independent of the decoder (Linux `amdgpu/sdma_v6_0_0_pkt_open.h`).
    assert_eq!(d[0], 8 | 5 << 28 | 1 << 31, "POLL_REGMEM GEQ on memory");
    assert_eq!(d[5], 4 | 0xFFF << 16, "interval 4, retry 0xFFF");
    assert_eq!(
        d[6..9],
        [1, 0xFFF, 0],
        "COPY_LINEAR header, count = bytes - 1, parameters 0"
    );
    assert_eq!(
        d[13..16],
        [13 | 2 << 8, (SIGNAL + 8) as u32, (SIGNAL >> 32) as u32],
        "TIMESTAMP GET_GLOBAL"
    );
    assert_eq!(d[16], 5 | 3 << 16, "FENCE with MTYPE 3 on gfx11");
    assert_eq!(d[d.len() - 2..], [6, 9], "TRAP with the event id");
    check_golden(
        "sdma_gfx1100.txt",
        &decode_sdma_listing(&GFX1100, d).unwrap(),
    );
    let mut g9 = SdmaBuf::new(&GFX90A);
    g9.fence(SIGNAL, 1).unwrap();
    assert_eq!(g9.dwords()[0], 5, "no FENCE MTYPE on SDMA 4");
}

#[test]
fn copy_split_into_target_pieces() {
    // 10 MiB + 3 bytes on SDMA 4 (0x3fff00 bytes per packet, Mesa sid.h): 3 pieces.
    let size = (10 << 20) + 3;
    let mut b = SdmaBuf::new(&GFX90A);
    let p = b
        .copy_linear(0x7F00_0000_0000, 0x7E00_0000_0000, size)
        .unwrap();
    assert_eq!((p.src.pieces(), p.dst.pieces(), b.len()), (3, 3, 21));
    check_golden(
        "sdma_copy_split_gfx90a.txt",
        &decode_sdma_listing(&GFX90A, b.dwords()).unwrap(),
    );
    let total: u64 = decode_sdma(&GFX90A, b.dwords())
        .unwrap()
        .iter()
        .map(|(_, p)| match p {
            SdmaPacket::CopyLinear { bytes, .. } => *bytes,
            p => panic!("{p}"),
        })
        .sum();
    assert_eq!(total, size);
    // Patching the source base moves every piece by the same offsets.
    b.patch(&p.src, 0x7D00_0000_0000).unwrap();
    let srcs: Vec<u64> = decode_sdma(&GFX90A, b.dwords())
        .unwrap()
        .iter()
        .map(|(_, p)| match p {
            SdmaPacket::CopyLinear { src, .. } => *src,
            p => panic!("{p}"),
        })
        .collect();
    assert_eq!(
        srcs,
        vec![0x7D00_0000_0000, 0x7D00_003F_FF00, 0x7D00_007F_FE00]
    );
    // The same copy is one packet on SDMA 6.
    let mut b6 = SdmaBuf::new(&GFX1100);
    assert_eq!(
        b6.copy_linear(0x1000, 0x2000, size).unwrap().src.pieces(),
        1
    );
}

#[test]
fn builders_refuse_bad_values() {
    let mut b = SdmaBuf::new(&GFX1100);
    assert!(b.copy_linear(0x1000, 0x2000, 0).is_err());
    assert!(b.copy_linear((1 << 48) - 4, 0x2000, 8).is_err());
    assert!(b.fence(SIGNAL + 2, 1).is_err());
    assert!(b.fence(SIGNAL, 1 << 32).is_err());
    assert!(b.trap(1 << 28).is_err());
    assert!(b.timestamp(SIGNAL + 4).is_err());
    assert!(b.nop(0x4000).is_err());
    assert!(b
        .signal(
            SIGNAL,
            1,
            Some(SignalEvent {
                mailbox: MAILBOX,
                event_id: 1 << 28
            })
        )
        .is_err());
    assert!(b
        .poll_regmem(&PollRegmem {
            function: CompareFunction::EQ,
            addr: SIGNAL,
            reference: 0,
            mask: 0,
            interval: 0x10000,
            retry_count: 0
        })
        .is_err());
    assert!(b.is_empty(), "failed builders emit nothing");
}

#[test]
fn decoder_rejects_unknowns_with_positions() {
    let e = decode_sdma(&GFX1100, &[0, 0, 17]).unwrap_err();
    assert!(
        e.message().contains("dword 2") && e.message().contains("unknown opcode 17"),
        "{e}"
    );
    assert!(
        decode_sdma(&GFX1100, &[1 | 1 << 8, 0, 0, 0, 0, 0, 0]).is_err(),
        "tiled copy"
    );
    assert!(
        decode_sdma(&GFX1100, &[1 | 1 << 25, 0, 0, 0, 0, 0, 0]).is_err(),
        "backwards copy"
    );
    assert!(
        decode_sdma(&GFX90A, &[1, 1 << 22, 0, 0, 0, 0, 0]).is_err(),
        "count beyond 22 bits on SDMA 4"
    );
    assert!(decode_sdma(&GFX1100, &[1, 1 << 22, 0, 0, 0, 0, 0]).is_ok());
    assert!(
        decode_sdma(&GFX1100, &[8, 0, 0, 0, 0, 0]).is_err(),
        "register poll"
    );
    assert!(
        decode_sdma(&GFX1100, &[5, 0x1002, 0, 0]).is_err(),
        "misaligned fence"
    );
    assert!(decode_sdma(&GFX1100, &[5, 0x1000, 0])
        .unwrap_err()
        .message()
        .contains("truncated"));
}

#[test]
fn sdma_patches() {
    let mut b = SdmaBuf::new(&GFX1100);
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
    b.patch(&w.value, 10).unwrap();
    b.patch(&s.addr, SIGNAL + 0x100).unwrap();
    b.patch(&s.value, 11).unwrap();
    b.patch(
        &s.event.unwrap(),
        SignalEvent {
            mailbox: MAILBOX + 8,
            event_id: 4,
        },
    )
    .unwrap();
    let pk: Vec<SdmaPacket> = decode_sdma(&GFX1100, b.dwords())
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert!(matches!(pk[0], SdmaPacket::PollRegmem(p) if p.reference == 10 && p.addr == SIGNAL));
    assert_eq!(
        pk[1],
        SdmaPacket::Fence {
            mtype: 3,
            addr: SIGNAL + 0x100,
            data: 11
        }
    );
    assert_eq!(
        pk[2],
        SdmaPacket::Fence {
            mtype: 3,
            addr: MAILBOX + 8,
            data: 4
        }
    );
    assert_eq!(pk[3], SdmaPacket::Trap { int_context: 4 });
}

#[test]
fn ring_wrap_zero_fills_and_restarts() {
    let mut b = SdmaBuf::new(&GFX1100);
    b.fence(SIGNAL, 7).unwrap(); // 16 bytes
    b.copy_linear(0x1000, 0x2000, 64).unwrap(); // 28 bytes
    let ring_size = 64u64;
    // At byte 40 of the ring: the fence fits (40..56), the copy does not (56+28 > 64): 8 bytes of
    // zero padding, then the copy at offset 0.
    let wptr = 3 * ring_size + 40;
    assert_eq!(b.ring_bytes_needed(ring_size, wptr).unwrap(), 16 + 8 + 28);
    let mut ring = [0xAAAA_AAAAu32; 16];
    let mut calls = Vec::new();
    let w = b
        .copy_to_ring(ring_size, wptr, &mut |at, dws| {
            calls.push((at, dws.len()));
            let i = at as usize / 4;
            ring[i..i + dws.len()].copy_from_slice(dws);
            Ok(())
        })
        .unwrap();
    assert_eq!(w, wptr + 52);
    assert_eq!(calls, vec![(40, 4), (56, 2), (0, 7)]);
    assert_eq!(ring[14..16], [0, 0], "padding is zero dwords (SDMA NOPs)");
    assert_eq!(ring[0], 1, "COPY_LINEAR restarts at the ring start");
    assert_eq!(ring[10..14], b.dwords()[..4]);
    assert_eq!(place_packet(64, 60, 4).unwrap(), (0, 60));
    assert_eq!(place_packet(64, 60, 8).unwrap(), (4, 64));
    assert!(place_packet(64, 0, 68).is_err());
    assert!(place_packet(48, 0, 4).is_err());
    assert!(place_packet(64, 2, 4).is_err());
}
