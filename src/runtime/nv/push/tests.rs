//! Pushbuffer builder tests: header encoding, the exact dwords of the builders (pinned by golden
//! decoded streams in `tests/golden/nv/`), field checks, patch points and the decoder's errors.

use super::*;
use crate::hw::nv::arch::{
    NvClasses, ADA_COMPUTE_A, AMPERE_COMPUTE_A, AMPERE_COMPUTE_B, HOPPER_COMPUTE_A,
    HOPPER_DMA_COPY_A,
};
use crate::hw::nv::decode::{check_golden, decode_push_listing, decode_qmd, PushDecoder};
use crate::runtime::nv::qmd::{program_qmd, ConstantBuffer, Qmd, QmdProgram};

fn hopper() -> PushBuf {
    PushBuf::new(NvClasses::preferred(&HOPPER_COMPUTE_A))
}

fn ada() -> PushBuf {
    PushBuf::new(NvClasses::preferred(&ADA_COMPUTE_A))
}

#[test]
fn method_header_encoding() {
    // tinygrad's SEM group header: INC, 5 dwords, subchannel 0, SEM_ADDR_LO.
    assert_eq!(
        method_header(SecOp::IncMethod, 0, 0x5C, 5).unwrap(),
        0x2005_0017
    );
    assert_eq!(
        method_header(SecOp::NonIncMethod, 1, 0x1B4, 3).unwrap(),
        0x6003_206D
    );
    let h = method_header(SecOp::ImmdDataMethod, 4, 0x300, 0x182).unwrap();
    let p = MethodHeader::parse(h).unwrap();
    assert_eq!(
        (p.op, p.subc, p.method, p.count, p.immd),
        (SecOp::ImmdDataMethod, 4, 0x300, 0, 0x182)
    );
    let p = MethodHeader::parse(method_header(SecOp::OneInc, 2, 0x400, 3).unwrap()).unwrap();
    assert_eq!(
        [p.method_of(0), p.method_of(1), p.method_of(2)],
        [0x400, 0x404, 0x404]
    );
    let p =
        MethodHeader::parse(method_header(SecOp::IncMethod, 7, 0x3FFC, 0x1FFF).unwrap()).unwrap();
    assert_eq!(
        (p.subc, p.method, p.count, p.method_of(1)),
        (7, 0x3FFC, 0x1FFF, 0x4000)
    );
    assert_eq!(
        MethodHeader::parse(0).unwrap().count,
        0,
        "a zero dword is a NOP"
    );
    assert!(method_header(SecOp::IncMethod, 8, 0, 1).is_err());
    assert!(method_header(SecOp::IncMethod, 0, 0x4000, 1).is_err());
    assert!(method_header(SecOp::IncMethod, 0, 0x5E, 1).is_err());
    assert!(method_header(SecOp::IncMethod, 0, 0x5C, 0x2000).is_err());
    for sec in [0u32, 2, 6] {
        assert!(
            MethodHeader::parse(sec << 29 | 1 << 16 | 0x17).is_err(),
            "SEC_OP {sec}"
        );
    }
}

#[test]
fn semaphore_values_match_tinygrad() {
    let mut b = hopper();
    let s = b.signal(0x10_0000_0000, 7).unwrap();
    assert_eq!(b.dwords()[..6], [0x2005_0017, 0, 0x10, 7, 0, 0x0310_0001]);
    assert_eq!(b.dwords()[6..], [0x2001_0008, 0]); // NON_STALL_INTERRUPT
    assert!(s.value.is_64bit());
    let mut b = hopper();
    b.wait(0x1000, 3, false).unwrap();
    assert_eq!(b.dwords()[5], 0x0100_0003);
    b.wait(0x1000, 3, true).unwrap();
    assert_eq!(b.dwords()[11], 0x0100_1003);
    b.sem_write(0x1004, 9, false).unwrap();
    assert_eq!(b.dwords()[17], 0x0010_0001);
}

#[test]
fn semaphore_address_checks_follow_the_host_class() {
    let mut ampere = ada(); // AMPERE_CHANNEL_GPFIFO_A: SEM_ADDR_HI 7:0
    let e = ampere.signal(1 << 40, 1).unwrap_err().to_string();
    assert!(e.contains("40 bits"), "{e}");
    assert!(ampere.is_empty(), "a refused command leaves nothing behind");
    let mut h = hopper(); // 57-bit
    h.signal(1 << 50, 1).unwrap();
    assert!(h.signal(1 << 57, 1).is_err());
    assert!(h
        .signal(0x1008, 1)
        .unwrap_err()
        .to_string()
        .contains("16-byte"));
    assert!(h
        .wait(0x1004, 1, false)
        .unwrap_err()
        .to_string()
        .contains("8-byte"));
    assert!(h.sem_write(0x1002, 1, false).is_err());
    let e = h.sem_write(0x1004, 1 << 32, false).unwrap_err().to_string();
    assert!(e.contains("32-bit"), "{e}");
    // Hopper with AMPERE_CHANNEL_GPFIFO_A gets 40-bit semaphores.
    let mut classes = NvClasses::preferred(&HOPPER_COMPUTE_A);
    classes.channel = HOPPER_COMPUTE_A.channel_classes[1];
    assert!(PushBuf::new(classes).signal(1 << 41, 1).is_err());
}

#[test]
fn set_object_and_compute_setup_checks() {
    let mut b = hopper();
    b.set_object(SUBC_COMPUTE, 0xCBC0).unwrap();
    b.set_object(SUBC_COPY, 0xC8B5).unwrap();
    assert!(
        b.set_object(SUBC_COMPUTE, 0xC9C0).is_err(),
        "Ada's class on a Hopper channel"
    );
    let e = b
        .set_shader_shared_memory_window(0xFE00_0000)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("0x100000000") && e.contains("HOPPER_COMPUTE_A"),
        "{e}"
    );
    ada().set_shader_shared_memory_window(0xFE00_0000).unwrap();
    assert!(b
        .set_shader_local_memory_non_throttled(0x8001, 0xFF)
        .is_err());
    assert!(b
        .set_shader_local_memory_non_throttled(0x8000, 0x200)
        .is_err());
    assert!(
        ada().set_shader_local_memory(1 << 49).is_err(),
        "49-bit on C9C0"
    );
    hopper().set_shader_local_memory(1 << 49).unwrap();
    let n = b.len();
    let bad = LocalMemorySetup {
        addr: 0x1000,
        bytes_per_tpc: 3,
        max_sm_count: 0xFF,
    };
    assert!(b.compute_setup(&bad).is_err());
    assert_eq!(b.len(), n);
    let mut c = hopper();
    c.memory_barrier().unwrap();
    assert_eq!(c.dwords(), [0x2001_25A6, 0x1011]);
    assert!(c.send_pcas(0x1080).is_err());
    assert!(c.send_pcas(1 << 40).is_err());
}

#[test]
fn patch_points_rewrite_exactly_their_fields() {
    let mut b = hopper();
    let w = b.wait(0x2000, 1, false).unwrap();
    let s = b.signal(0x3000, 2).unwrap();
    let q = b.send_pcas(0x4000).unwrap();
    let before = b.dwords().to_vec();
    b.patch(&w.value, 0x1_0000_0005).unwrap();
    b.patch(&s.addr, 0x10_0000_0010).unwrap();
    b.patch(&q, 0x8000).unwrap();
    let d = b.dwords();
    assert_eq!((d[3], d[4]), (5, 1));
    assert_eq!((d[7], d[8]), (0x10, 0x10));
    assert_eq!(d[q.pos()], 0x80);
    let changed = d.iter().zip(&before).filter(|(a, b)| a != b).count();
    assert_eq!(changed, 5);
    assert!(b.patch(&s.addr, 0x3008).is_err(), "alignment");
    assert!(b.patch(&q, 0x4010).is_err());
    let mut short = vec![0u32; 3];
    assert!(
        s.value.apply(&mut short, 1).is_err(),
        "a buffer too short is an error"
    );
}

#[test]
fn value_patches_written_straight_give_the_patch_points_dwords_and_errors() {
    let mut a = hopper();
    let w = a.wait(0x2000, 1, false).unwrap();
    let s = a.signal(0x3000, 2).unwrap();
    let c = a.copy_signal(0x4000, 3, false).unwrap();
    let mut b = a.clone();
    for v in [7u64, 0x1_0000_0009, 0x1_0000_000A, u64::MAX] {
        a.patch(&w.value, v).unwrap();
        a.patch(&s.value, v.wrapping_add(1)).unwrap();
        b.patch_values([(&w.value, v)], None).unwrap();
        b.patch_values([(&s.value, v.wrapping_add(1))], None)
            .unwrap();
        assert_eq!(a.dwords(), b.dwords(), "value {v:#x}");
    }
    // a 32-bit payload refuses a wider value with the patch point's error, writing nothing
    let before = b.dwords().to_vec();
    let want = a.patch(&c.value, 1 << 32).unwrap_err().to_string();
    let got = b.patch_values([(&c.value, 1 << 32)], None).unwrap_err();
    assert_eq!(got.to_string(), want);
    assert!(want.contains("SignalValuePatch"), "{want}");
    assert_eq!(b.dwords(), before);
    b.patch_values([(&c.value, 0xFFFF_FFFF)], None).unwrap();
    a.patch(&c.value, 0xFFFF_FFFF).unwrap();
    assert_eq!(a.dwords(), b.dwords());
    // a point past the end of a shorter buffer: the same error as the patch point's
    let mut short = hopper();
    short.wait(0x2000, 1, false).unwrap();
    let want = s.value.apply(&mut short.dwords().to_vec(), 1).unwrap_err();
    let got = short.patch_values([(&s.value, 1)], None).unwrap_err();
    assert_eq!(got.to_string(), want.to_string());
    assert!(want.to_string().contains("outside the"), "{want}");
}

#[test]
fn copies_split_at_2g_and_patch_every_piece() {
    let mut b = hopper();
    let c = b
        .copy(0x1_0000_0000, 0x2_0000_0000, (5 << 30) + 12)
        .unwrap();
    assert_eq!(c.src.slots().pieces, 3);
    let lines = PushDecoder::new(b.classes()).decode(b.dwords()).unwrap();
    assert_eq!(lines.len(), 9);
    assert!(
        lines[1].1.contains("LINE_LENGTH_IN=0x80000000"),
        "{lines:?}"
    );
    assert!(
        lines[7].1.contains("LINE_LENGTH_IN=0x4000000c"),
        "{lines:?}"
    );
    assert!(
        lines[2]
            .1
            .contains("LAUNCH_DMA=NON_PIPELINED|SRC_PITCH|DST_PITCH"),
        "{lines:?}"
    );
    b.patch(&c.src, 0x7_0000_0000).unwrap();
    b.patch(&c.dst, 0x9_8000_0000).unwrap();
    let d = b.dwords();
    for i in 0..3 {
        let s = 0x7_0000_0000u64 + (i as u64) * (1 << 31);
        let t = 0x9_8000_0000u64 + (i as u64) * (1 << 31);
        assert_eq!(
            &d[1 + 10 * i..5 + 10 * i],
            [(s >> 32) as u32, s as u32, (t >> 32) as u32, t as u32]
        );
    }
    assert!(b.copy(0, 0, 0).is_err());
    assert!(
        ada().copy(1 << 49, 0, 4).is_err(),
        "49-bit copy addresses on C7B5"
    );
    assert!(
        ada().copy(0, (1 << 49) - 2, 4).is_err(),
        "the end of the range counts"
    );
    assert!(b.patch(&c.src, (1 << 57) - 4).is_err());
}

#[test]
fn copy_engine_semaphores() {
    let mut b = hopper();
    let s = b.copy_signal(0x12_3456_7890, 5, false).unwrap();
    assert_eq!(
        b.dwords(),
        [0x2003_8090, 0x12, 0x3456_7890, 5, 0x2001_80C0, 0x14]
    );
    b.patch(&s.addr, 0x99_0000_0010).unwrap();
    assert_eq!(b.dwords()[1..3], [0x99, 0x10]);
    assert!(b.patch(&s.value, 1 << 32).is_err());
    let mut b = hopper();
    let s = b.copy_signal(0x1000, 1 << 33, true).unwrap();
    assert!(s.value.is_64bit());
    assert_eq!(b.dwords()[5], 0x2001_80C0);
    assert_eq!(b.dwords()[6], 0x14 | 1 << 27);
    let mut ga100 = PushBuf::new(NvClasses::preferred(&AMPERE_COMPUTE_A));
    ga100.copy_setup().unwrap();
    let mut classes = NvClasses::preferred(&AMPERE_COMPUTE_A);
    classes.copy = AMPERE_COMPUTE_A.copy_classes[1]; // AMPERE_DMA_COPY_A: no PAYLOAD_UPPER
    assert!(PushBuf::new(classes).copy_signal(0x1000, 1, true).is_err());
    assert!(hopper().copy_signal(0x1008, 1, false).is_err());
    assert_eq!(HOPPER_COMPUTE_A.copy_classes[0], &HOPPER_DMA_COPY_A);
}

#[test]
fn inline_qmd_launch() {
    let mut b = hopper();
    assert!(
        b.launch_inline_qmd(0x1000, &[0; 64]).is_err(),
        "Hopper QMDs are 384 bytes"
    );
    let q = b.launch_inline_qmd(0x12_3400_0100, &[7; 96]).unwrap();
    assert_eq!(q.data_pos, 4);
    // A = the bits of addr >> 8 above 32 (none below 2^40) | INLINE_SIZE_384, B = the low 32.
    assert_eq!(b.dwords()[1..3], [1 << 30, 0x1234_0001]);
    assert!(b.launch_inline_qmd(1 << 40, &[7; 96]).is_err());
    let mut a = PushBuf::new(NvClasses::preferred(&AMPERE_COMPUTE_B));
    a.launch_inline_qmd(0x1000, &[0; 64]).unwrap();
    assert_eq!(a.dwords()[1], 0, "no INLINE_SIZE bit before C8C0");
    let lines = PushDecoder::new(a.classes()).decode(a.dwords()).unwrap();
    assert!(
        lines[1]
            .1
            .contains("LOAD_INLINE_QMD_DATA(0..63)=<64 dwords>"),
        "{lines:?}"
    );
}

#[test]
fn decoder_refuses_what_it_does_not_know() {
    let classes = NvClasses::preferred(&HOPPER_COMPUTE_A);
    let mut b = PushBuf::new(classes);
    b.method(SUBC_COMPUTE, 0x2000, &[1]).unwrap();
    let e = PushDecoder::new(&classes)
        .decode(b.dwords())
        .unwrap_err()
        .to_string();
    assert!(e.contains("0x2000") && e.contains("Compute"), "{e}");
    let mut b = PushBuf::new(classes);
    b.method(2, 0x400, &[1]).unwrap();
    assert!(PushDecoder::new(&classes)
        .decode(b.dwords())
        .unwrap_err()
        .to_string()
        .contains("subchannel 2"));
    // SET_OBJECT rebinds: the copy class on subchannel 2 makes 0x400 known there.
    let mut b = PushBuf::new(classes);
    b.set_object(2, 0xC8B5).unwrap();
    b.method(2, 0x400, &[1]).unwrap();
    let lines = PushDecoder::new(&classes).decode(b.dwords()).unwrap();
    assert!(
        lines[0].1.contains("SET_OBJECT=HOPPER_DMA_COPY_A(0xc8b5)"),
        "{lines:?}"
    );
    assert!(lines[1].1.contains("OFFSET_IN_UPPER=0x1"), "{lines:?}");
    let e = PushDecoder::new(&classes)
        .decode(&[0x2005_0017, 1, 2])
        .unwrap_err()
        .to_string();
    assert!(e.contains("runs past"), "{e}");
}

/// A launch the way the runtime will build it: setup, wait for the timeline, barrier, launch,
/// signal; the QMD is a program template plus the launch fields.
fn launch_stream(b: &mut PushBuf, sm: u32, code_addr: u64, cbuf0_size: u32) -> String {
    let arch = b.classes().arch;
    let local = LocalMemorySetup {
        addr: 0x20_0000_0000,
        bytes_per_tpc: 0x12_8000,
        max_sm_count: 0xFF,
    };
    b.compute_setup(&local).unwrap();
    b.wait(0x10_0000_0000, 41, false).unwrap();
    b.memory_barrier().unwrap();
    let kernargs = 0x10_0100_0000u64;
    let qmd_addr = kernargs + u64::from(cbuf0_size).div_ceil(256) * 256;
    b.send_pcas(qmd_addr).unwrap();
    b.signal(0x10_0000_0000, 42).unwrap();
    let prg = QmdProgram {
        program_addr: code_addr,
        code_bytes: 0x180,
        register_count: 10,
        shared: arch.shared_mem_config(0x100, 0).unwrap(),
        slm_bytes_per_thread: 0x240,
        sm,
        const_banks: vec![(
            4,
            ConstantBuffer {
                addr: code_addr + 0x400,
                size: 0x10,
                invalidate: false,
            },
        )],
    };
    let mut q = program_qmd(arch, &prg).unwrap();
    let cbuf0 = ConstantBuffer {
        addr: kernargs,
        size: cbuf0_size.div_ceil(16) * 16,
        invalidate: true,
    };
    q.set_launch([4, 2, 1], [128, 1, 1], cbuf0).unwrap();
    let mut s = decode_push_listing(b.classes(), b.dwords()).unwrap();
    s.push('\n');
    s.push_str(&decode_qmd(arch.qmd_version, q.dwords()).unwrap());
    s
}

#[test]
fn golden_launch_hopper_qmd_v04() {
    let s = launch_stream(&mut hopper(), 90, 0x10_0200_0000, 0x224);
    check_golden("launch_hopper_v04.txt", &s);
}

#[test]
fn golden_launch_ada_qmd_v03() {
    let s = launch_stream(&mut ada(), 89, 0x10_0200_0000, 0x174);
    check_golden("launch_ada_v03.txt", &s);
}

#[test]
fn golden_copy() {
    let mut b = hopper();
    b.copy_setup().unwrap();
    b.wait(0x10_0000_0010, 7, false).unwrap();
    b.copy(0x20_0000_0000, 0x10_4000_0000, 0x1_0000_1000)
        .unwrap();
    b.copy_signal(0x10_0000_0010, 8, false).unwrap();
    check_golden(
        "copy.txt",
        &decode_push_listing(b.classes(), b.dwords()).unwrap(),
    );
}

#[test]
fn golden_signal() {
    let mut b = hopper();
    b.signal(0x10_0000_0020, 0x1_0000_0002).unwrap();
    b.sem_write(0x10_0000_0030, 5, false).unwrap();
    check_golden(
        "signal.txt",
        &decode_push_listing(b.classes(), b.dwords()).unwrap(),
    );
}

#[test]
fn golden_wait() {
    let mut b = ada();
    b.wait(0x10_0000_0020, 3, false).unwrap();
    b.wait(0x10_0000_0030, 0xFFFF_FFFF_0000_0001, true).unwrap();
    b.wfi().unwrap();
    check_golden(
        "wait.txt",
        &decode_push_listing(b.classes(), b.dwords()).unwrap(),
    );
}
