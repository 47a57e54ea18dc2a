//! SDMA-queue execution: copies (single and split), fences and traps, polls satisfied by a
//! compute queue, and the ring wrap rule with zero padding.

use super::*;
use crate::hw::amd::targets::GFX90A;
use crate::runtime::amd::pm4::SignalEvent;

fn fill(h: &Harness, va: u64, n: u64, seed: u32) {
    let words: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect();
    h.mem.write_dwords(va, &words).unwrap();
}

fn same(h: &Harness, a: u64, b: u64, bytes: u64) -> bool {
    let (mut x, mut y) = (vec![0u8; bytes as usize], vec![0u8; bytes as usize]);
    h.mem.read(a, &mut x).unwrap();
    h.mem.read(b, &mut y).unwrap();
    x == y
}

#[test]
fn copy_fence_and_trap() {
    let h = Harness::new();
    let q = h.sdma();
    fill(&h, DATA, 0x4000, 1);
    let mut b = h.sdma_buf();
    b.copy_linear(DATA + 0x10003, DATA + 1, 0xFFFD).unwrap(); // odd addresses and size
    b.signal(
        SIGNALS,
        5,
        Some(SignalEvent {
            mailbox: MAILBOX,
            event_id: 77,
        }),
    )
    .unwrap();
    h.submit_sdma(q, &b);
    let st = h.idle(q);
    assert!(same(&h, DATA + 1, DATA + 0x10003, 0xFFFD));
    assert_eq!(
        h.mem.read_u32(DATA + 0x10003 + 0xFFFD).unwrap(),
        0,
        "nothing past the end"
    );
    assert_eq!(
        (
            h.mem.read_u32(SIGNALS).unwrap(),
            h.mem.read_u32(MAILBOX).unwrap()
        ),
        (5, 77)
    );
    assert_eq!(
        *h.irq.seen.lock().unwrap(),
        vec![(q, InterruptSource::SdmaTrap, 77)]
    );
    assert_eq!(
        (st.rptr, h.rptr_in_memory(q)),
        (4 * b.len() as u64, 4 * b.len() as u64)
    );
}

#[test]
fn copy_split_into_pieces_moves_every_byte() {
    let h = Harness::for_target(&GFX90A); // 4 MiB per COPY_LINEAR
    let (src, dst, size) = (0x7000_0000u64, 0x7100_0000u64, (9u64 << 20) + 12);
    h.mem.map(src, size).unwrap();
    h.mem.map(dst, size).unwrap();
    fill(&h, src, size / 4, 3);
    let q = h.sdma();
    let mut b = h.sdma_buf();
    let p = b.copy_linear(dst, src, size).unwrap();
    assert_eq!(p.src.pieces(), 3);
    b.fence(SIGNALS, 1).unwrap();
    h.submit_sdma(q, &b);
    h.idle(q);
    assert!(same(&h, src, dst, size));
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 1);
}

#[test]
fn poll_waits_for_a_compute_signal() {
    let h = Harness::new();
    let (qs, qc) = (h.sdma(), h.compute());
    fill(&h, DATA, 16, 9);
    let mut s = h.sdma_buf();
    s.wait(SIGNALS, 2).unwrap();
    s.copy_linear(DATA + 0x100, DATA, 64).unwrap();
    s.signal(SIGNALS + 16, 1, None).unwrap();
    h.submit_sdma(qs, &s);
    h.until_waiting(qs);
    assert_eq!(h.mem.read_u32(DATA + 0x100).unwrap(), 0);
    let mut c = h.pm4();
    c.signal(SIGNALS, 2, None).unwrap();
    h.submit_pm4(qc, &c);
    h.idle(qs);
    assert!(same(&h, DATA, DATA + 0x100, 64));
    assert_eq!(h.mem.read_u32(SIGNALS + 16).unwrap(), 1);
}

#[test]
fn ring_wrap_zero_fills_and_restarts_at_zero() {
    let h = Harness::new();
    let q = h.queue(QueueKind::Sdma, 256);
    // Each submission: POLL_REGMEM (24 bytes) + FENCE (16 bytes) = 40 bytes; 256 is not a
    // multiple of 40, so packets regularly need the zero padding before the ring end.
    let mut expected_wptr = 0;
    let mut padded = 0;
    for v in 1..=30u64 {
        let mut b = h.sdma_buf();
        b.wait(SIGNALS, v - 1).unwrap();
        b.fence(SIGNALS, v).unwrap();
        let need = b.ring_bytes_needed(256, expected_wptr).unwrap();
        padded += need - 40;
        expected_wptr += need;
        h.submit_sdma(q, &b);
        let st = h.idle(q);
        assert_eq!(st.wptr, expected_wptr);
    }
    assert!(padded > 0, "the test must exercise the padding");
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 30);
    assert_eq!(h.rptr_in_memory(q), expected_wptr);
}
