//! Queue faults: each is reported with its ring position and reason, stops the queue (later
//! packets do not run), and never hangs a waiter.

use super::*;
use crate::hw::amd::pm4::ShReg;

/// A compute queue whose first packet is a NOP(1) (2 dwords), so faults happen at position 2,
/// followed by `bad` and then a signal that must never run.
fn compute_fault(bad: &[u32]) -> (Harness, QueueFault) {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.nop(1).unwrap();
    let mut d = b.dwords().to_vec();
    d.extend_from_slice(bad);
    let mut tail = h.pm4();
    tail.signal(SIGNALS + 16, 1, None).unwrap();
    d.extend_from_slice(tail.dwords());
    h.submit_raw(q, &d).unwrap();
    let f = h.fault(q);
    assert_eq!(
        h.mem.read_u32(SIGNALS + 16).unwrap(),
        0,
        "packets after a fault must not run"
    );
    assert_eq!(f.queue, q);
    (h, f)
}

#[test]
fn unknown_opcode() {
    let (h, f) = compute_fault(&[3 << 30 | 0x99 << 8, 0]);
    assert_eq!(f.pos, 2);
    assert!(f.reason.contains("unknown opcode 0x99"), "{f}");
    assert!(f.to_string().contains("faulted at ring dword 2"), "{f}");
    // The fault is sticky: a later doorbell does not restart the queue.
    let st = h.gpu.queue_state(f.queue).unwrap();
    assert_eq!(st.rptr, 2);
}

#[test]
fn unknown_sh_register() {
    let (_h, f) = compute_fault(&[0xC001_7600, 0x21E, 0]); // COMPUTE_THREAD_TRACE_ENABLE
    assert_eq!(f.pos, 2);
    assert!(
        f.reason.contains("unknown SH register at offset 0x21e"),
        "{f}"
    );
}

#[test]
fn malformed_header_and_count() {
    let (_h, f) = compute_fault(&[0x8000_0000]);
    assert!(f.reason.contains("type 2 is not 3"), "{f}");
    let (_h, f) = compute_fault(&[0xC000_1500, 1]); // DISPATCH_DIRECT with count 0
    assert!(
        f.reason
            .contains("DISPATCH_DIRECT: 1 body dwords, expected 4"),
        "{f}"
    );
}

#[test]
fn unmapped_address() {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.signal(SIGNALS, 1, None).unwrap();
    b.signal(0x7777_0000, 2, None).unwrap();
    b.signal(SIGNALS + 16, 3, None).unwrap();
    h.submit_pm4(q, &b);
    let f = h.fault(q);
    assert_eq!(f.pos, 8);
    assert!(
        f.reason.contains("0x77770000") && f.reason.contains("outside the GPU-mapped ranges"),
        "{f}"
    );
    assert_eq!(
        (
            h.mem.read_u32(SIGNALS).unwrap(),
            h.mem.read_u32(SIGNALS + 16).unwrap()
        ),
        (1, 0)
    );
}

#[test]
fn straddling_sdma_packet() {
    let h = Harness::new();
    let q = h.queue(QueueKind::Sdma, 256);
    let mut b = h.sdma_buf();
    b.nop(55).unwrap(); // 224 bytes
    b.fence(SIGNALS, 1).unwrap(); // 16 bytes: the ring is now at byte 240 of 256
    h.submit_sdma(q, &b);
    h.idle(q);
    // A 28-byte COPY_LINEAR written at byte 240 without the padding rule crosses the ring end.
    let mut c = h.sdma_buf();
    c.copy_linear(DATA, DATA + 0x100, 4).unwrap();
    c.fence(SIGNALS + 32, 3).unwrap();
    h.submit_raw(q, c.dwords()).unwrap();
    let f = h.fault(q);
    assert_eq!(f.pos, 240);
    assert!(
        f.reason
            .contains("28 bytes at ring offset 0xf0 straddles the end of the 0x100-byte ring"),
        "{f}"
    );
    assert_eq!(h.mem.read_u32(SIGNALS + 32).unwrap(), 0);
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 1);
}

#[test]
fn dispatch_program_address_checks() {
    // COMPUTE_PGM_HI beyond bits 7:0 (a byte address written unshifted) is refused.
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    double_launch(&mut b, CODE, 32);
    let mut d = b.dwords().to_vec();
    let pgm = d.iter().position(|&w| w == 0x20C).unwrap();
    d[pgm + 2] = 0x1234; // PGM_HI
    h.submit_raw(q, &d).unwrap();
    let f = h.fault(q);
    assert!(f.reason.contains("COMPUTE_PGM_HI 0x1234"), "{f}");
    assert_eq!(
        h.gpu.queue_state(q).unwrap().last_packet.unwrap().name,
        "DISPATCH_DIRECT"
    );
    // A program address with nothing mapped there.
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    double_launch(&mut b, 0x7000_0000_0000, 32);
    h.submit_pm4(q, &b);
    let f = h.fault(q);
    assert!(
        f.reason
            .contains("program at 0x700000000000 is not readable"),
        "{f}"
    );
    assert!(h.exec.dispatches.lock().unwrap().is_empty());
}

#[test]
fn dispatch_without_program_or_kernarg_registers() {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.set_sh_reg(ShReg::COMPUTE_PGM_RSRC1, &[0, 2 << 1])
        .unwrap();
    b.set_sh_reg(ShReg::COMPUTE_START_X, &[0, 0, 0, 32, 1, 1, 0, 0])
        .unwrap();
    b.dispatch_direct(
        [1, 1, 1],
        crate::hw::amd::pm4::DispatchInitiator::COMPUTE_SHADER_EN,
    )
    .unwrap();
    h.submit_pm4(q, &b);
    assert!(h
        .fault(q)
        .reason
        .contains("COMPUTE_PGM_LO was never written"));
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.set_sh_reg(ShReg::COMPUTE_PGM_LO, &[(CODE >> 8) as u32, 0])
        .unwrap();
    b.set_sh_reg(ShReg::COMPUTE_PGM_RSRC1, &[0, 2 << 1])
        .unwrap();
    b.set_sh_reg(ShReg::COMPUTE_START_X, &[0, 0, 0, 32, 1, 1, 0, 0])
        .unwrap();
    b.dispatch_direct(
        [1, 1, 1],
        crate::hw::amd::pm4::DispatchInitiator::COMPUTE_SHADER_EN,
    )
    .unwrap();
    h.submit_pm4(q, &b);
    assert!(h
        .fault(q)
        .reason
        .contains("COMPUTE_USER_DATA_0 was never written"));
}

#[test]
fn kernel_failure_faults_the_queue() {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    double_launch(&mut b, CODE + 0x100, 32);
    h.submit_pm4(q, &b);
    let f = h.fault(q);
    assert!(f.reason.contains("failed on purpose"), "{f}");
    // A panicking executor faults its queue; the GPU thread keeps serving the others.
    let q2 = h.compute();
    let mut b = h.pm4();
    double_launch(&mut b, CODE + 0x200, 32);
    h.submit_pm4(q2, &b);
    assert!(h.fault(q2).reason.contains("executor panicked"));
    let q3 = h.compute();
    let mut b = h.pm4();
    b.signal(SIGNALS, 5, None).unwrap();
    h.submit_pm4(q3, &b);
    h.idle(q3);
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 5);
}

#[test]
fn release_mem_needs_an_eop_buffer_and_aligned_timestamps() {
    let h = Harness::new();
    let desc = QueueDesc {
        kind: QueueKind::Compute,
        ring_va: RING,
        ring_size: 4096,
        rptr_va: RPTRS,
        eop_va: None,
    };
    h.mem.map(RING, 4096).unwrap();
    let q = h.gpu.add_queue(desc).unwrap();
    let mut b = h.pm4();
    b.signal(SIGNALS, 1, None).unwrap();
    h.mem.write_dwords(RING, b.dwords()).unwrap();
    h.gpu.notify(q, b.len() as u64).unwrap();
    assert!(h
        .gpu
        .wait_idle(q, TIMEOUT)
        .unwrap_err()
        .message()
        .contains("without an EOP buffer"));
    // A timestamp RELEASE_MEM (DATA_SEL 3) at a 4-byte aligned address.
    let mut t = h.pm4();
    t.timestamp(SIGNALS).unwrap();
    let mut d = t.dwords().to_vec();
    d[3] += 4;
    let (_h, f) = compute_fault(&d);
    assert!(f.reason.contains("not 8-byte aligned"), "{f}");
}

#[test]
fn fault_inside_an_indirect_buffer_names_the_ib_position() {
    let h = Harness::new();
    let q = h.compute();
    let mut ib = h.pm4();
    ib.nop(2).unwrap();
    let mut d = ib.dwords().to_vec();
    d.extend_from_slice(&[3 << 30 | 0x42 << 8, 0]);
    h.mem.write_dwords(IB, &d).unwrap();
    let mut b = h.pm4();
    b.nop(1).unwrap();
    b.indirect_buffer(IB, d.len()).unwrap();
    h.submit_pm4(q, &b);
    let f = h.fault(q);
    assert_eq!((f.pos, f.ib), (2, Some(IbPos { va: IB, dword: 3 })));
    assert!(
        f.to_string()
            .contains("(IB 0x50000000 dword 3): PM4 header"),
        "{f}"
    );
}

#[test]
fn bad_doorbells() {
    let h = Harness::new();
    let q = h.compute();
    let e = h.gpu.notify(q, 1025).unwrap_err(); // 4096-byte ring = 1024 dwords
    assert!(e.message().contains("more than a ring"), "{e}");
    assert!(h.gpu.queue_state(q).unwrap().fault.is_some());
    let h = Harness::new();
    let q = h.sdma();
    assert!(h
        .gpu
        .notify(q, 6)
        .unwrap_err()
        .message()
        .contains("not dword aligned"));
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.nop(1).unwrap();
    h.submit_pm4(q, &b);
    h.idle(q);
    assert!(h
        .gpu
        .notify(q, 1)
        .unwrap_err()
        .message()
        .contains("backwards"));
    assert!(h
        .gpu
        .add_queue(QueueDesc {
            ring_size: 3000,
            ..queue_desc()
        })
        .is_err());
    assert!(h
        .gpu
        .add_queue(QueueDesc {
            ring_va: RING + 4,
            ..queue_desc()
        })
        .is_err());
}

fn queue_desc() -> QueueDesc {
    QueueDesc {
        kind: QueueKind::Compute,
        ring_va: RING,
        ring_size: 4096,
        rptr_va: RPTRS,
        eop_va: Some(EOP),
    }
}

/// An INDIRECT_BUFFER the real CP refuses faults the queue, naming why, and nothing after it
/// runs: VALID clear, size 0, an unaligned address, control bits of the kernel driver's (VMID),
/// CHAIN, an IB starting or ending outside mapped memory, and an IB inside an IB.
#[test]
fn indirect_buffers_the_cp_refuses_fault_the_queue() {
    let hdr = 3 << 30 | 2 << 16 | 0x3F << 8; // PACKET3(INDIRECT_BUFFER, 2)
    let valid = 1 << 23;
    let cases: [([u32; 4], &str); 7] = [
        ([hdr, IB as u32, 0, 4], "VALID bit clear"),
        ([hdr, IB as u32, 0, valid], "zero size"),
        ([hdr, IB as u32 + 2, 0, valid | 4], "not 4-byte aligned"),
        (
            [hdr, IB as u32, 0, valid | 4 | 1 << 24],
            "unsupported control bits",
        ),
        ([hdr, IB as u32, 0, valid | 4 | 1 << 20], "CHAIN"),
        ([hdr, 0x7000_0000, 0, valid | 4], "not mapped"),
        ([hdr, IB as u32, 0, valid | 0x401], "not mapped"), // ends past the 0x1000-byte IB page
    ];
    for (pkt, why) in cases {
        let (_, f) = compute_fault(&pkt);
        assert_eq!(f.pos, 2, "{why}");
        assert!(f.to_string().contains(why), "{why}: {f}");
    }
    // an IB whose packet is itself an INDIRECT_BUFFER
    let h = Harness::new();
    let q = h.compute();
    let mut inner = h.pm4();
    inner.indirect_buffer(IB + 0x100, 2).unwrap();
    h.mem.write_dwords(IB, inner.dwords()).unwrap();
    let mut b = h.pm4();
    b.indirect_buffer(IB, inner.len()).unwrap();
    b.signal(SIGNALS + 16, 1, None).unwrap();
    h.submit_pm4(q, &b);
    let f = h.fault(q);
    assert_eq!(f.ib, Some(IbPos { va: IB, dword: 0 }));
    assert!(f.to_string().contains("inside an indirect buffer"), "{f}");
    assert_eq!(h.mem.read_u32(SIGNALS + 16).unwrap(), 0);
}
