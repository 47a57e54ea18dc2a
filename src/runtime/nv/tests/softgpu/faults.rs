//! Channel faults: position and reason reported, later work not executed, the event sink told,
//! other channels unaffected; and a clean stop on drop.

use super::*;
use crate::hw::nv::header::{SUBC_COMPUTE, SUBC_COPY, SUBC_HOST};
use crate::hw::nv::methods::*;
use crate::hw::nv::qmd::{ConstantBuffer, Qmd, QmdV03, QmdV04};

/// Submits `b`, then a signal that must never run; returns the fault.
fn fault_of(h: &Harness, b: &PushBuf) -> ChannelFault {
    let mut ch = h.channel();
    h.submit(&mut ch, b);
    let mut after = h.push();
    after.sem_write(SIGNALS + 0x80, 1, false).unwrap();
    h.submit(&mut ch, &after);
    let f = h.fault(&ch);
    assert_eq!(
        h.mem.read_u32(SIGNALS + 0x80).unwrap(),
        0,
        "work after the fault ran"
    );
    assert_eq!(h.gpu.channel_state(ch.id).unwrap().gp_get, f.gp_get);
    assert!(h.events.faults.lock().unwrap().contains(&f));
    f
}

#[test]
fn unknown_method_reports_its_position() {
    let h = Harness::new();
    let mut b = h.push();
    b.set_object(SUBC_COMPUTE, h.classes.arch.compute_class)
        .unwrap();
    b.sem_write(SIGNALS, 1, false).unwrap();
    b.method(SUBC_COMPUTE, 0x2000, &[5]).unwrap();
    let f = fault_of(&h, &b);
    assert_eq!(f.kind, FaultKind::Pbdma);
    assert_eq!(f.kind.rc_error_type(), 32);
    assert_eq!((f.pb_dword, f.method), (8, Some((SUBC_COMPUTE, 0x2000))));
    assert_eq!(f.pb_va % 0x10000, 4 * 8);
    assert!(f.reason.contains("unknown method 0x2000"), "{f}");
    assert_eq!(
        h.mem.read_u32(SIGNALS).unwrap(),
        1,
        "work before the fault ran"
    );
    // A method on a subchannel nothing was bound to.
    let mut b = h.push();
    b.method(SUBC_COPY, OFFSET_IN_UPPER, &[0]).unwrap();
    assert!(fault_of(&h, &b).reason.contains("no object bound"));
    let mut b = h.push();
    b.method(SUBC_HOST, 0x84, &[0]).unwrap(); // CLEAR_FAULTED: a host method rawgrad does not know
    assert!(fault_of(&h, &b).reason.contains("0x84"));
}

#[test]
fn set_object_checks_chip_and_channel() {
    let h = Harness::new();
    let mut b = h.push();
    b.method(SUBC_COMPUTE, SET_OBJECT, &[0xC9C0]).unwrap(); // ADA_COMPUTE_A on a Hopper
    let f = fault_of(&h, &b);
    assert!(
        f.reason.contains("0xc9c0") && f.reason.contains("HOPPER_COMPUTE_A"),
        "{f}"
    );
    // A class the chip has, but not allocated on this channel.
    let id = h
        .gpu
        .add_channel(ChannelDesc {
            gpfifo_va: RINGS + 0xF000,
            entries: 8,
            userd: Arc::new(UserdAt {
                mem: h.mem.clone(),
                va: USERDS + 0xF000,
            }),
            token: 0xF00,
            channel_class: 0xC86F,
        })
        .unwrap();
    h.gpu.bind_engine(id, 0xCBC0).unwrap();
    let mut b = h.push();
    b.copy_setup().unwrap();
    h.mem.write_dwords(PBS + 0xF_0000, b.dwords()).unwrap();
    h.mem
        .write_u64(
            RINGS + 0xF000,
            crate::hw::nv::gpfifo::gp_entry(PBS + 0xF_0000, 2).unwrap(),
        )
        .unwrap();
    h.mem.write_u32(USERDS + 0xF000 + USERD_GP_PUT, 1).unwrap();
    h.gpu.doorbell(0xF00).unwrap();
    let e = h.gpu.wait_idle(id, TIMEOUT).unwrap_err().to_string();
    assert!(e.contains("not allocated on this channel"), "{e}");
    assert!(
        h.gpu.bind_engine(id, 0xC7B5).is_err(),
        "Ampere's copy class on a Hopper"
    );
    assert!(h.gpu.doorbell(0xBAD).is_err());
}

#[test]
fn unmapped_addresses_are_mmu_faults() {
    let h = Harness::new();
    let mut b = h.push();
    b.signal(0x7000_0000, 1).unwrap();
    let f = fault_of(&h, &b);
    assert_eq!((f.kind, f.kind.rc_error_type()), (FaultKind::Mmu, 31));
    assert!(f.reason.contains("0x70000000"), "{f}");
    let mut b = h.push();
    b.copy_setup().unwrap();
    b.copy(DATA, 0x7100_0000, 64).unwrap();
    assert_eq!(fault_of(&h, &b).kind, FaultKind::Mmu);
    // A GP entry pointing at unmapped pushbuffer memory.
    let ch = h.channel();
    let entry = crate::hw::nv::gpfifo::gp_entry(0x7200_0000, 4).unwrap();
    h.mem.write_u64(ch.ring_va(), entry).unwrap();
    h.mem.write_u32(ch.userd_va() + USERD_GP_PUT, 1).unwrap();
    h.gpu.doorbell(ch.token).unwrap();
    let f = h.fault(&ch);
    assert_eq!(
        (f.kind, f.pb_va, f.pb_dword),
        (FaultKind::Mmu, 0x7200_0000, 0)
    );
}

#[test]
fn misaligned_or_too_wide_semaphores() {
    let h = Harness::new();
    let mut b = h.push();
    b.method(SUBC_HOST, SEM_ADDR_LO, &[0x2000_0002]).unwrap();
    assert!(fault_of(&h, &b).reason.contains("bits 1:0"));
    let mut b = h.push();
    // 8-aligned, with a timestamp release (needs 16).
    b.method(
        SUBC_HOST,
        SEM_ADDR_LO,
        &[SIGNALS as u32 + 8, 0, 1, 0, 0x0310_0001],
    )
    .unwrap();
    assert!(fault_of(&h, &b).reason.contains("16-byte aligned"));
    let mut b = h.push();
    b.method(SUBC_HOST, SEM_ADDR_HI, &[1 << 25]).unwrap();
    assert!(fault_of(&h, &b).reason.contains("25 bits"));
    let mut b = h.push();
    b.method(
        SUBC_HOST,
        SEM_ADDR_LO,
        &[SIGNALS as u32, 0, 1, 0, 0x0800_0006],
    )
    .unwrap();
    assert!(fault_of(&h, &b).reason.contains("reduction"));
}

fn compute_prologue(h: &Harness) -> PushBuf {
    let mut b = h.push();
    b.set_object(SUBC_COMPUTE, h.classes.arch.compute_class)
        .unwrap();
    b
}

/// A valid V04 QMD running PRG_ADD (program at `prog`) over 32 threads.
fn good_qmd(h: &Harness, prog: u64) -> QmdV04 {
    let mut q = QmdV04::new();
    q.set_program_address(prog).unwrap();
    q.set_register_count(16).unwrap();
    q.set_sass_version(0x90).unwrap();
    q.set_shared_memory(h.classes.arch.shared_mem_config(0, 0).unwrap())
        .unwrap();
    let param_base = u64::from(h.classes.arch.cbuf0.param_base);
    h.mem
        .write_u64(KERNARGS + param_base, DATA + 0x1000)
        .unwrap();
    h.mem.write_u64(KERNARGS + param_base + 8, DATA).unwrap();
    let cb = ConstantBuffer {
        addr: KERNARGS,
        size: 0x230,
        invalidate: false,
    };
    q.set_launch([1, 1, 1], [32, 1, 1], cb).unwrap();
    q
}

fn launch_fault(h: &Harness, qmd: &[u32]) -> ChannelFault {
    h.mem.write_dwords(QMDS, qmd).unwrap();
    let mut b = compute_prologue(h);
    b.send_pcas(QMDS).unwrap();
    fault_of(h, &b)
}

#[test]
fn bad_qmds_fault_the_compute_engine() {
    let h = Harness::new();
    // A V03 QMD on Hopper (the header allows it, NVK and rawgrad use V04): refused.
    let mut v3 = QmdV03::new().dwords().to_vec();
    v3.resize(96, 0);
    let f = launch_fault(&h, &v3);
    assert_eq!(f.kind, FaultKind::Graphics);
    assert_eq!(f.kind.rc_error_type(), 13);
    assert!(f.reason.contains("QMD_MAJOR_VERSION 3"), "{f}");
    let mut q = good_qmd(&h, CODE);
    q.set_constant_buffer(0, None).unwrap();
    assert!(launch_fault(&h, q.dwords())
        .reason
        .contains("constant buffer 0"));
    let mut q = good_qmd(&h, CODE);
    q.set_block([1024, 2, 1]).unwrap();
    assert!(launch_fault(&h, q.dwords()).reason.contains("2048 threads"));
    let mut q = good_qmd(&h, CODE);
    q.set_sass_version(0x89).unwrap();
    assert!(launch_fault(&h, q.dwords())
        .reason
        .contains("SASS version 0x89"));
    let q = good_qmd(&h, 0x7300_0000);
    assert_eq!(
        launch_fault(&h, q.dwords()).kind,
        FaultKind::Mmu,
        "unmapped program"
    );
    let q = good_qmd(&h, CODE + 0x100);
    let f = launch_fault(&h, q.dwords());
    assert!(f.reason.contains("failed on purpose"), "{f}");
    let q = good_qmd(&h, CODE + 0x200);
    assert!(launch_fault(&h, q.dwords()).reason.contains("panicked"));
    // The GPU survived the panic: another channel still runs.
    let mut ch = h.channel();
    let mut b = h.push();
    b.sem_write(SIGNALS + 0x40, 3, false).unwrap();
    h.submit(&mut ch, &b);
    h.idle(&ch);
    assert_eq!(h.mem.read_u32(SIGNALS + 0x40).unwrap(), 3);
}

#[test]
fn qmd_addresses_beyond_40_bits_and_missing_pcas_a() {
    let h = Harness::new();
    let q = good_qmd(&h, CODE);
    // Inline QMD whose address (A holds bits above 32 of addr >> 8) is 2^40.
    let mut b = compute_prologue(&h);
    b.method(
        SUBC_COMPUTE,
        SET_INLINE_QMD_ADDRESS_A,
        &[1 | INLINE_QMD_SIZE_384, 0],
    )
    .unwrap();
    b.method(SUBC_COMPUTE, LOAD_INLINE_QMD_DATA, q.dwords())
        .unwrap();
    assert!(fault_of(&h, &b).reason.contains("not below 2^40"));
    // A 256-byte inline QMD on Hopper.
    let mut b = compute_prologue(&h);
    b.method(SUBC_COMPUTE, SET_INLINE_QMD_ADDRESS_A, &[0, 0x1000])
        .unwrap();
    assert!(fault_of(&h, &b).reason.contains("inline QMD of 256 bytes"));
    let mut b = compute_prologue(&h);
    b.method(SUBC_COMPUTE, SEND_SIGNALING_PCAS2_B, &[9])
        .unwrap();
    assert!(fault_of(&h, &b).reason.contains("no SEND_PCAS_A"));
    // Non-scheduling actions launch nothing.
    let mut ch = h.channel();
    let mut b = compute_prologue(&h);
    b.method(SUBC_COMPUTE, SEND_PCAS_A, &[(QMDS >> 8) as u32])
        .unwrap();
    b.method(SUBC_COMPUTE, SEND_SIGNALING_PCAS2_B, &[8])
        .unwrap();
    h.submit(&mut ch, &b);
    assert_eq!(h.idle(&ch).launches, 0);
}

#[test]
fn copy_engine_faults() {
    let h = Harness::new();
    let mut b = h.push();
    b.copy_setup().unwrap();
    b.method(
        SUBC_COPY,
        OFFSET_IN_UPPER,
        &[0, DATA as u32, 0, DATA as u32 + 0x100],
    )
    .unwrap();
    b.method(SUBC_COPY, LAUNCH_DMA, &[launch_dma::COPY])
        .unwrap(); // LINE_LENGTH_IN never set
    let f = fault_of(&h, &b);
    assert_eq!(f.kind, FaultKind::CopyEngine);
    assert!(f.reason.contains("0 bytes"), "{f}");
    let mut b = h.push();
    b.copy_setup().unwrap();
    b.method(SUBC_COPY, OFFSET_IN_UPPER, &[1 << 25]).unwrap();
    assert!(fault_of(&h, &b).reason.contains("25 bits"));
    let mut b = h.push();
    b.copy_setup().unwrap();
    b.method(
        SUBC_COPY,
        LAUNCH_DMA,
        &[launch_dma::COPY | launch_dma::MULTI_LINE_ENABLE],
    )
    .unwrap();
    assert!(fault_of(&h, &b).reason.contains("multi-line"));
}

#[test]
fn bad_gp_put_and_header() {
    let h = Harness::new();
    let ch = h.channel();
    h.mem
        .write_u32(ch.userd_va() + USERD_GP_PUT, RING_ENTRIES)
        .unwrap();
    h.gpu.doorbell(ch.token).unwrap();
    assert!(h.fault(&ch).reason.contains("outside the 64-entry ring"));
    let mut b = h.push();
    b.sem_write(SIGNALS, 1, false).unwrap();
    let mut d = b.dwords().to_vec();
    d.push(6 << 29 | 1 << 16); // reserved SEC_OP
    d.push(0);
    let mut ch = h.channel();
    h.submit_dwords(&mut ch, &d);
    let f = h.fault(&ch);
    assert_eq!(f.pb_dword, 6);
    assert!(f.reason.contains("SEC_OP 6"), "{f}");
    // A group that runs past its segment.
    let mut ch = h.channel();
    h.submit_dwords(&mut ch, &[0x2005_0017, 0, 0]);
    assert!(h.fault(&ch).reason.contains("runs past"));
}

#[test]
fn drop_stops_a_gpu_with_a_blocked_channel() {
    let h = Harness::new();
    let mut ch = h.channel();
    let mut b = h.push();
    b.wait(SIGNALS, 1, false).unwrap();
    h.submit(&mut ch, &b);
    h.until(&ch, "blocked", |s| s.waiting);
    h.gpu.remove_channel(ch.id).unwrap();
    assert!(h.gpu.channel_state(ch.id).is_err());
    drop(h); // joins the GPU thread; a hang here fails the test run
}
