//! Compute-queue execution: signals, kernel launches, cross-queue waits, timestamps, indirect
//! buffers and ring wrap-around.

use super::*;
use crate::runtime::amd::pm4::{patch_dwords, PatchPoint, SignalEvent};

#[test]
fn signal_writes_32_bits_then_mailbox_and_interrupt() {
    let h = Harness::new();
    let q = h.compute();
    h.mem.write_u64(SIGNALS, 0xAAAA_AAAA_0000_0000).unwrap();
    let mut b = h.pm4();
    b.signal(
        SIGNALS,
        42,
        Some(SignalEvent {
            mailbox: MAILBOX + 8,
            event_id: 9,
        }),
    )
    .unwrap();
    h.submit_pm4(q, &b);
    let st = h.idle(q);
    assert_eq!(
        h.mem.read_u64(SIGNALS).unwrap(),
        0xAAAA_AAAA_0000_002A,
        "DATA_SEL 1 writes only the low 32 bits"
    );
    assert_eq!(h.mem.read_u32(MAILBOX + 8).unwrap(), 9);
    assert_eq!(
        *h.irq.seen.lock().unwrap(),
        vec![(q, InterruptSource::ReleaseMem, 9)]
    );
    assert_eq!((st.rptr, st.wptr, h.rptr_in_memory(q)), (16, 16, 16));
    assert_eq!(
        st.last_packet.map(|l| (l.pos, l.name)),
        Some((8, "RELEASE_MEM"))
    );
}

#[test]
fn exec_runs_the_kernel_through_the_executor() {
    let h = Harness::new();
    let q = h.compute();
    let (inp, out) = (DATA, DATA + 0x8000);
    for i in 0..64u64 {
        h.mem.write_u32(inp + 4 * i, i as u32 + 1).unwrap();
    }
    h.mem.write_u64(KERNARGS, out).unwrap();
    h.mem.write_u64(KERNARGS + 8, inp).unwrap();
    let mut b = h.pm4();
    b.wait(SIGNALS, 0).unwrap();
    b.memory_barrier().unwrap();
    double_launch(&mut b, CODE, 64);
    b.signal(SIGNALS, 1, None).unwrap();
    h.submit_pm4(q, &b);
    h.idle(q);
    for i in 0..64u64 {
        assert_eq!(h.mem.read_u32(out + 4 * i).unwrap(), 2 * (i as u32 + 1));
    }
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 1);
    let d = h.exec.dispatches.lock().unwrap();
    assert_eq!(d.len(), 1);
    let s = &d[0];
    assert_eq!(
        (s.queue, s.pgm_addr, s.grid, s.workgroup_size),
        (q, CODE, [2, 1, 1], [32, 1, 1])
    );
    assert_eq!(
        (s.user_sgpr_pair(0), s.user_sgpr_count, s.wave32),
        (Some(KERNARGS), 2, true)
    );
    assert_eq!(
        s.rsrc1,
        1 << 20,
        "gfx11 PRIV workaround reached the register"
    );
}

#[test]
fn wait_is_satisfied_later_by_another_queue() {
    let h = Harness::new();
    let (q0, q1) = (h.compute(), h.compute());
    let mut b = h.pm4();
    b.wait(SIGNALS, 5).unwrap();
    b.signal(SIGNALS + 16, 1, None).unwrap();
    h.submit_pm4(q0, &b);
    h.until_waiting(q0);
    assert_eq!(
        h.mem.read_u32(SIGNALS + 16).unwrap(),
        0,
        "nothing after the wait ran"
    );
    assert_eq!(h.gpu.queue_state(q0).unwrap().rptr, 0);
    let mut b = h.pm4();
    b.signal(SIGNALS, 4, None).unwrap();
    h.submit_pm4(q1, &b);
    h.idle(q1);
    h.until_waiting(q0); // 4 < 5: still blocked
    let mut b = h.pm4();
    b.signal(SIGNALS, 5, None).unwrap();
    h.submit_pm4(q1, &b);
    h.idle(q0);
    assert_eq!(h.mem.read_u32(SIGNALS + 16).unwrap(), 1);
    assert!(!h.gpu.queue_state(q0).unwrap().waiting);
}

#[test]
fn wait_is_satisfied_by_a_host_write() {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.wait(SIGNALS, 3).unwrap();
    b.signal(SIGNALS + 16, 7, None).unwrap();
    h.submit_pm4(q, &b);
    h.until_waiting(q);
    h.mem.write_u32(SIGNALS, 3).unwrap();
    h.idle(q);
    assert_eq!(h.mem.read_u32(SIGNALS + 16).unwrap(), 7);
}

#[test]
fn timestamps_are_monotonic_across_queues() {
    let h = Harness::new();
    let (qc, qs) = (h.compute(), h.sdma());
    let mut stamps = Vec::new();
    for round in 0..3u64 {
        let base = SIGNALS + 0x100 + 0x40 * round;
        let mut b = h.pm4();
        b.timestamp(base).unwrap();
        b.timestamp(base + 8).unwrap();
        h.submit_pm4(qc, &b);
        h.idle(qc);
        let mut s = h.sdma_buf();
        s.timestamp(base + 16).unwrap();
        s.timestamp(base + 24).unwrap();
        h.submit_sdma(qs, &s);
        h.idle(qs);
        for i in 0..4 {
            stamps.push(h.mem.read_u64(base + 8 * i).unwrap());
        }
    }
    assert!(stamps[0] > 0);
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    assert!(h.gpu.clock() > stamps[stamps.len() - 1]);
}

#[test]
fn indirect_buffer_executes_and_replays_after_patching() {
    let h = Harness::new();
    let q = h.compute();
    let mut ib = h.pm4();
    let s = ib.signal(SIGNALS, 7, None).unwrap();
    ib.timestamp(SIGNALS + 8).unwrap();
    h.mem.write_dwords(IB, ib.dwords()).unwrap();
    h.gpu.set_trace(true);
    let mut ring = h.pm4();
    ring.indirect_buffer(IB, ib.len()).unwrap();
    ring.signal(SIGNALS + 16, 1, None).unwrap();
    h.submit_pm4(q, &ring);
    let st = h.idle(q);
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 7);
    assert_ne!(h.mem.read_u64(SIGNALS + 8).unwrap(), 0);
    assert_eq!(st.rptr, 12);
    // Patch the bound IB in GPU memory through the typed patch point and replay it.
    let mut writes = Vec::new();
    s.value
        .encode(8, &mut |pos, dw| writes.push((pos, dw)))
        .unwrap();
    for (pos, dw) in writes {
        h.mem.write_u32(IB + 4 * pos as u64, dw).unwrap();
    }
    let mut ring = h.pm4();
    ring.indirect_buffer(IB, ib.len()).unwrap();
    h.submit_pm4(q, &ring);
    h.idle(q);
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 8);
    let trace = h.gpu.take_trace();
    assert!(
        trace
            .iter()
            .any(|l| l.contains("@0 ib+0: RELEASE_MEM") && l.contains("data=0x7")),
        "{trace:#?}"
    );
    assert!(
        trace
            .iter()
            .any(|l| l.contains("@12 ib+8: RELEASE_MEM") && l.contains("data_sel=3")),
        "{trace:#?}"
    );
    // The same patch applied to a host copy gives the same dwords as GPU memory now holds.
    let mut host = ib.dwords().to_vec();
    patch_dwords(&mut host, &s.value, 8).unwrap();
    let mut gpu_copy = vec![0; host.len()];
    h.mem.read_dwords(IB, &mut gpu_copy).unwrap();
    assert_eq!(host, gpu_copy);
}

#[test]
fn compute_ring_wraps_packets_across_the_end() {
    let h = Harness::new();
    let q = h.queue(QueueKind::Compute, 256); // 64 dwords
                                              // 15 dwords per submission (WAIT 7 + RELEASE_MEM 8): packets straddle the ring end.
    for v in 1..=20u64 {
        let mut b = h.pm4();
        b.wait(SIGNALS, v - 1).unwrap();
        b.signal(SIGNALS, v, None).unwrap();
        h.submit_pm4(q, &b);
        h.idle(q);
    }
    let st = h.gpu.queue_state(q).unwrap();
    assert_eq!((st.rptr, st.wptr, h.rptr_in_memory(q)), (300, 300, 300));
    assert_eq!(h.mem.read_u32(SIGNALS).unwrap(), 20);
}

#[test]
fn removed_queue_stops_and_dropping_a_blocked_gpu_returns() {
    let h = Harness::new();
    let q = h.compute();
    let mut b = h.pm4();
    b.wait(SIGNALS, 1).unwrap();
    h.submit_pm4(q, &b);
    h.until_waiting(q);
    h.gpu.remove_queue(q).unwrap();
    assert!(h.gpu.notify(q, 7).is_err());
    assert!(h.gpu.queue_state(q).is_err());
    let q2 = h.compute();
    h.submit_pm4(q2, &b);
    h.until_waiting(q2);
    drop(h); // joins the GPU thread while q2 is blocked
}
