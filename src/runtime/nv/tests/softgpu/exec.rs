//! The software NV GPU executing the runtime's streams: semaphores, waits across the CPU and
//! channels, copies, launches on every QMD version, dependent chains, QMD releases, inline
//! QMDs, mock cubins.

use super::*;
use crate::hw::nv::arch::{ADA_COMPUTE_A, BLACKWELL_COMPUTE_B};
use crate::hw::nv::qmd::{
    AnyQmd, ConstantBuffer, DependentAction, DependentQmd, Qmd, QmdRelease, ReleaseStructure,
};
use crate::mockgpu::nvgpu::cubin::mock_cubin_for_uops;
use crate::runtime::nv::cubin::Cubin;
use crate::runtime::nv::push::LocalMemorySetup;
use crate::runtime::nv::qmd::{program_qmd, QmdProgram};

fn setup(h: &Harness) -> PushBuf {
    let mut b = h.push();
    let local = LocalMemorySetup {
        addr: DATA,
        bytes_per_tpc: 0x8000,
        max_sm_count: 0xFF,
    };
    b.compute_setup(&local).unwrap();
    b
}

/// A QMD running PRG_ADD over `n` u32s: out = DATA + 0x1000 * slot, in = DATA, add `add`.
fn add_qmd(h: &Harness, slot: u64, n: u32, add: u32) -> AnyQmd {
    let arch = h.classes.arch;
    let sm = arch.sm_versions[0];
    let prg = QmdProgram {
        program_addr: CODE,
        code_bytes: 0x100,
        register_count: 16,
        shared: arch.shared_mem_config(0, 0).unwrap(),
        slm_bytes_per_thread: 0x240,
        sm,
        const_banks: vec![],
    };
    let mut q = program_qmd(arch, &prg).unwrap();
    let kernargs = KERNARGS + 0x1000 * slot;
    let base = u64::from(arch.cbuf0.param_base);
    h.mem
        .write_u64(kernargs + base, DATA + 0x1000 * (slot + 1))
        .unwrap();
    h.mem.write_u64(kernargs + base + 8, DATA).unwrap();
    h.mem.write_u32(kernargs + base + 16, add).unwrap();
    let cb = ConstantBuffer {
        addr: kernargs,
        size: (base as u32 + 20).div_ceil(16) * 16,
        invalidate: true,
    };
    q.set_launch([n / 32, 1, 1], [32, 1, 1], cb).unwrap();
    q
}

fn put_qmd(h: &Harness, slot: u64, q: &AnyQmd) -> u64 {
    let addr = QMDS + 0x400 * slot;
    h.mem.write_dwords(addr, q.dwords()).unwrap();
    addr
}

fn fill_input(h: &Harness, n: u32) {
    for i in 0..u64::from(n) {
        h.mem.write_u32(DATA + 4 * i, i as u32 * 3).unwrap();
    }
}

fn check_output(h: &Harness, slot: u64, n: u32, add: u32) {
    for i in 0..u64::from(n) {
        let got = h.mem.read_u32(DATA + 0x1000 * (slot + 1) + 4 * i).unwrap();
        assert_eq!(got, i as u32 * 3 + add, "slot {slot} element {i}");
    }
}

#[test]
fn signal_is_seen_by_the_cpu() {
    let h = Harness::new();
    let mut ch = h.channel();
    let before = h.gpu.timer();
    let mut b = h.push();
    b.signal(SIGNALS, 0x1_0000_0005).unwrap();
    h.submit(&mut ch, &b);
    let s = h.idle(&ch);
    assert_eq!(s.gp_get, 1);
    assert_eq!(h.mem.read_u64(SIGNALS).unwrap(), 0x1_0000_0005);
    let stamp = h.mem.read_u64(SIGNALS + 8).unwrap();
    assert!(
        stamp > before && stamp < h.gpu.timer(),
        "timestamp {stamp} between {before} and now"
    );
    assert_eq!(h.mem.read_u32(ch.userd_va() + USERD_GP_GET).unwrap(), 1);
    assert_eq!(
        *h.events.interrupts.lock().unwrap(),
        [(ch.id, NvInterrupt::NonStall)]
    );
    // A plain 32-bit write.
    let mut b = h.push();
    b.sem_write(SIGNALS + 0x20, 9, false).unwrap();
    h.submit(&mut ch, &b);
    h.idle(&ch);
    assert_eq!(h.mem.read_u64(SIGNALS + 0x20).unwrap(), 9);
}

#[test]
fn acquire_blocks_until_the_cpu_signals() {
    let h = Harness::new();
    let mut ch = h.channel();
    let mut b = h.push();
    b.wait(SIGNALS, 3, false).unwrap();
    b.signal(SIGNALS + 0x10, 1).unwrap();
    h.submit(&mut ch, &b);
    h.until(&ch, "blocked on the acquire", |s| s.waiting);
    h.mem.write_u64(SIGNALS, 2).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        h.mem.read_u64(SIGNALS + 0x10).unwrap(),
        0,
        "2 < 3: still blocked"
    );
    assert!(h.gpu.channel_state(ch.id).unwrap().waiting);
    h.mem.write_u64(SIGNALS, 3).unwrap();
    h.idle(&ch);
    assert_eq!(h.mem.read_u64(SIGNALS + 0x10).unwrap(), 1);
}

#[test]
fn acquire_satisfied_by_another_channel() {
    let h = Harness::new();
    let (mut compute, mut dma) = (h.channel(), h.channel());
    for i in 0..0x400u64 {
        h.mem.write_u32(DATA + 4 * i, 0xA000 + i as u32).unwrap();
    }
    // The compute channel waits for the copy channel's semaphore, then signals.
    let mut b = h.push();
    b.wait(SIGNALS, 1, true).unwrap();
    b.signal(SIGNALS + 0x10, 7).unwrap();
    h.submit(&mut compute, &b);
    h.until(&compute, "blocked", |s| s.waiting);
    let mut c = h.push();
    c.copy_setup().unwrap();
    c.copy(DATA + 0x8_0000, DATA, 0x1000).unwrap();
    c.copy_signal(SIGNALS, 1, false).unwrap();
    h.submit(&mut dma, &c);
    h.idle(&dma);
    h.idle(&compute);
    assert_eq!(h.mem.read_u64(SIGNALS + 0x10).unwrap(), 7);
    assert_eq!(h.mem.read_u32(DATA + 0x8_0000 + 4 * 0x3FF).unwrap(), 0xA3FF);
    assert_ne!(
        h.mem.read_u64(SIGNALS + 8).unwrap(),
        0,
        "four-word release timestamp"
    );
}

#[test]
fn copies_and_64bit_copy_semaphores() {
    let h = Harness::new();
    let mut ch = h.channel();
    for i in 0..64u64 {
        h.mem.write_u64(DATA + 8 * i, i * 0x0101_0101).unwrap();
    }
    let mut b = h.push();
    b.copy_setup().unwrap();
    b.copy(DATA + 0x4_0004, DATA + 4, 508).unwrap();
    b.copy_signal(SIGNALS + 0x40, 0x1_0000_0002, true).unwrap();
    h.submit(&mut ch, &b);
    h.idle(&ch);
    for i in 1..128u64 {
        assert_eq!(
            h.mem.read_u32(DATA + 0x4_0000 + 4 * i).unwrap(),
            h.mem.read_u32(DATA + 4 * i).unwrap()
        );
    }
    assert_eq!(
        h.mem.read_u32(DATA + 0x4_0000).unwrap(),
        0,
        "the first dword was not copied"
    );
    assert_eq!(h.mem.read_u64(SIGNALS + 0x40).unwrap(), 0x1_0000_0002);
}

/// Launch through SEND_PCAS on `arch`: setup, barrier, launch, signal; the executor sees the
/// QMD's fields and the output is right.
fn launch_on(arch: &'static NvArch) {
    let h = Harness::for_arch(arch);
    let mut ch = h.channel();
    fill_input(&h, 256);
    let q = add_qmd(&h, 0, 256, 5);
    let qmd_addr = put_qmd(&h, 0, &q);
    let mut b = setup(&h);
    b.memory_barrier().unwrap();
    b.send_pcas(qmd_addr).unwrap();
    b.signal(SIGNALS, 1).unwrap();
    h.submit(&mut ch, &b);
    let s = h.idle(&ch);
    assert_eq!(s.launches, 1);
    check_output(&h, 0, 256, 5);
    assert_eq!(h.mem.read_u64(SIGNALS).unwrap(), 1);
    let l = h.exec.launches.lock().unwrap();
    let d = &l[0];
    assert_eq!(
        (d.grid, d.block, d.qmd_addr, d.qmd_version),
        ([8, 1, 1], [32, 1, 1], qmd_addr, arch.qmd_version)
    );
    assert_eq!(
        (d.program_addr, d.register_count, d.param_base),
        (CODE, 16, arch.cbuf0.param_base)
    );
    assert_eq!(d.cbuf0().addr, KERNARGS);
    assert_eq!(
        (d.shared_window, d.local_window),
        (arch.shared_window, arch.local_window)
    );
    assert_eq!(d.compute_class, arch.compute_class);
}

#[test]
fn launch_hopper_ada_blackwell() {
    launch_on(&HOPPER_COMPUTE_A);
    launch_on(&ADA_COMPUTE_A);
    launch_on(&BLACKWELL_COMPUTE_B);
}

#[test]
fn dependent_chain_and_qmd_releases() {
    let h = Harness::new();
    let mut ch = h.channel();
    fill_input(&h, 64);
    let mut first = add_qmd(&h, 0, 64, 1);
    let mut second = add_qmd(&h, 1, 64, 2);
    let third = add_qmd(&h, 2, 64, 3);
    let a3 = put_qmd(&h, 2, &third);
    let r = QmdRelease {
        addr: SIGNALS + 0x30,
        payload: 77,
        payload64: false,
        structure: ReleaseStructure::FourWords,
    };
    second.set_release(0, Some(r)).unwrap();
    let one = QmdRelease {
        addr: SIGNALS + 0x60,
        payload: 5,
        payload64: false,
        structure: ReleaseStructure::OneWord,
    };
    second.set_release(2, Some(one)).unwrap();
    second
        .set_dependent_qmd(
            0,
            Some(DependentQmd {
                addr: a3,
                action: DependentAction::Schedule,
                prefetch: true,
            }),
        )
        .unwrap();
    let a2 = put_qmd(&h, 1, &second);
    first
        .set_dependent_qmd(
            0,
            Some(DependentQmd {
                addr: a2,
                action: DependentAction::Schedule,
                prefetch: true,
            }),
        )
        .unwrap();
    let a1 = put_qmd(&h, 0, &first);
    let mut b = setup(&h);
    b.send_pcas(a1).unwrap();
    h.submit(&mut ch, &b);
    assert_eq!(h.idle(&ch).launches, 3);
    for (slot, add) in [(0, 1), (1, 2), (2, 3)] {
        check_output(&h, slot, 64, add);
    }
    let order: Vec<u64> = h
        .exec
        .launches
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.qmd_addr)
        .collect();
    assert_eq!(order, [a1, a2, a3]);
    assert_eq!(h.mem.read_u32(SIGNALS + 0x30).unwrap(), 77);
    assert_ne!(
        h.mem.read_u64(SIGNALS + 0x38).unwrap(),
        0,
        "four-word release timestamp"
    );
    assert_eq!(h.mem.read_u64(SIGNALS + 0x60).unwrap(), 5);
}

#[test]
fn inline_qmd_launch() {
    let h = Harness::new();
    let mut ch = h.channel();
    fill_input(&h, 32);
    let q = add_qmd(&h, 0, 32, 9);
    let mut b = setup(&h);
    b.launch_inline_qmd(QMDS + 0x2000, q.dwords()).unwrap();
    h.submit(&mut ch, &b);
    assert_eq!(h.idle(&ch).launches, 1);
    check_output(&h, 0, 32, 9);
    let mut stored = vec![0u32; 96];
    h.mem.read_dwords(QMDS + 0x2000, &mut stored).unwrap();
    assert_eq!(
        stored,
        q.dwords(),
        "the inline QMD was stored at its address"
    );
}

#[test]
fn mock_cubin_launch_reads_the_blob() {
    let h = Harness::new();
    let mut ch = h.channel();
    let uops = [crate::codegen::uops::UOp::define_global(
        crate::dtype::dtypes::float32,
        0,
        true,
    )];
    let bytes = mock_cubin_for_uops("E_mock", &uops, &[8], &HOPPER_COMPUTE_A, 90).unwrap();
    let c = Cubin::parse(&bytes, None, &HOPPER_COMPUTE_A, 90).unwrap();
    let load = CODE + 0x1000;
    h.mem.write(load, &c.image_at(load).unwrap()).unwrap();
    let mut q = add_qmd(&h, 0, 32, 0);
    q.set_program_address(load + c.entry_offset).unwrap();
    q.set_register_count(c.regcount).unwrap();
    let a = put_qmd(&h, 0, &q);
    let mut b = setup(&h);
    b.send_pcas(a).unwrap();
    h.submit(&mut ch, &b);
    h.idle(&ch);
    assert_eq!(*h.exec.mock_names.lock().unwrap(), ["E_mock"]);
}

#[test]
fn trace_and_many_submissions() {
    let h = Harness::new();
    let mut ch = h.channel();
    h.gpu.set_trace(true);
    // More submissions than ring entries: the ring writer waits for GPGet.
    for i in 0..(2 * RING_ENTRIES as u64 + 3) {
        let mut b = h.push();
        b.sem_write(SIGNALS, i, true).unwrap();
        h.submit(&mut ch, &b);
    }
    let s = h.idle(&ch);
    assert_eq!(s.gp_get, (2 * RING_ENTRIES + 3) % RING_ENTRIES);
    assert_eq!(
        h.mem.read_u64(SIGNALS).unwrap(),
        2 * RING_ENTRIES as u64 + 2
    );
    let t = h.gpu.take_trace();
    assert!(
        t.iter().any(|l| l.contains("SEM_EXECUTE=RELEASE|WFI|64B")),
        "{t:?}"
    );
    assert!(t.iter().any(|l| l.contains("GP[0]")), "{t:?}");
}
