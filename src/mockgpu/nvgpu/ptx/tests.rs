//! Hand-written PTX snippets with hand-derived expectations: the parser, each instruction family's
//! semantics (integer and float edge cases), barriers, vector memory, faults and refusals.

use super::alu;
use super::isa::{decode, Bin, Cmp, FMods, Half, Kind, Op, Rnd, Space, Ty, Un, OPCODES};
use super::{parse_kernel, run, Launch};
use crate::mockgpu::gpu_memory::{GpuMemory, SparseMemory};

pub(super) const BUF: u64 = 0x10_0000;
pub(super) const OUT: u64 = 0x20_0000;

fn ty(s: &str) -> Ty {
    Ty::parse(s).unwrap()
}

fn f32b(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// Runs `src` with `params` over `grid` x `block`; global memory at BUF and OUT (4 KiB each).
pub(super) fn launch(
    src: &str,
    params: &[u64],
    grid: [u32; 3],
    block: [u32; 3],
    mem: &SparseMemory,
) -> crate::Result<()> {
    let k = parse_kernel(src, None)?;
    let mut p = vec![0u8; k.param_bytes as usize];
    for (v, q) in params.iter().zip(&k.params) {
        let o = q.offset as usize;
        p[o..o + q.size as usize].copy_from_slice(&v.to_le_bytes()[..q.size as usize]);
    }
    run(
        &k,
        &Launch {
            mem,
            params: &p,
            grid,
            block,
            shared_bytes: k.shared_bytes + 1024,
            shared_window: 0x7F00_0000_0000,
            local_window: 0x7E00_0000_0000,
        },
    )
}

pub(super) fn memory() -> SparseMemory {
    let m = SparseMemory::new();
    m.map(BUF, 0x1000).unwrap();
    m.map(OUT, 0x1000).unwrap();
    m
}

pub(super) fn words(m: &SparseMemory, at: u64, n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| m.read_u32(at + 4 * i as u64).unwrap())
        .collect()
}

pub(super) const ADD_N: &str = include_str!("../../../../tests/fixtures/cubin/add_n.ptx");

#[test]
fn parses_directives_params_registers_and_labels() {
    let src = ".version 7.1\n.target sm_86\n.address_size 64\n\
        .shared .align 16 .b8 sm[40];\n\
        .visible .entry k(\n .param .u64 k_param_0,\n .param .u32 k_param_1,\n .param .u64 k_param_2\n)\n.maxntid 64, 1, 1\n{\n\
        .reg .pred %p<2>;\n .reg .b32 %r<4>;\n .reg .b64 %rd<3>;\n .shared .align 4 .b8 s2[12];\n\
        $L__BB0_1: // loop\n add.s32 %r1, %r1, 1; /* c */\n setp.lt.u32 %p1, %r1, 3;\n @%p1 bra $L__BB0_1;\n @!%p1 ret;\n}\n";
    let k = parse_kernel(src, None).unwrap();
    assert_eq!(k.name, "k");
    let offs: Vec<(u32, u32)> = k.params.iter().map(|p| (p.offset, p.size)).collect();
    assert_eq!(offs, [(0, 8), (8, 4), (16, 8)]);
    assert_eq!(k.param_bytes, 24);
    assert_eq!(k.shared_bytes, 40 + 12, "sm at 0, s2 at 40");
    assert_eq!(k.nregs, 2 + 4 + 3);
    assert_eq!(k.insts.len(), 4);
    assert_eq!(k.insts[2].args[0], super::parse::Opnd::Label(0));
    assert_eq!(k.insts[3].guard, Some((1, true)));
}

#[test]
fn refuses_unknown_instructions_modifiers_and_registers() {
    let body = |i: &str| {
        format!(".version 7.1\n.target sm_86\n.address_size 64\n.visible .entry k()\n{{\n.reg .b32 %r<3>;\n{i}\n}}\n")
    };
    let e = parse_kernel(&body("shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;"), None).unwrap_err();
    assert!(
        e.message()
            .contains("unknown instruction shfl.sync.bfly.b32")
            && e.message().contains("line 7"),
        "{e}"
    );
    let e = parse_kernel(&body("add.foo.s32 %r1, %r2, 1;"), None).unwrap_err();
    assert!(
        e.message().contains("unknown modifier .foo in add.foo.s32"),
        "{e}"
    );
    let e = parse_kernel(&body("add.s32 %r9, %r2, 1;"), None).unwrap_err();
    assert!(e.message().contains("undeclared register %r9"), "{e}");
    let e = parse_kernel(&body("add.rz.f32 %r1, %r2, %r2;"), None).unwrap_err();
    assert!(e.message().contains("only round-to-nearest"), "{e}");
    assert_eq!(decode("trap").unwrap_err(), "unknown instruction trap");
    assert!(decode("mul.s32").unwrap_err().contains(".lo, .hi or .wide"));
    assert_eq!(
        decode("mad.rn.f32").unwrap(),
        Op::Fma(ty("f32"), FMods::default())
    );
    assert_eq!(decode("mul.lo.s32").unwrap(), Op::Mul(Half::Lo, ty("s32")));
    assert_eq!(
        decode("ld.global.nc.v4.f32").unwrap(),
        Op::Ld(Space::Global, 4, ty("f32"))
    );
    assert_eq!(
        decode("cvt.rzi.s32.f32").unwrap(),
        Op::Cvt {
            dst: ty("s32"),
            src: ty("f32"),
            rnd: Some(Rnd::Z),
            int: true,
            f: FMods::default()
        }
    );
}

#[test]
fn the_opcode_list_is_what_decode_knows() {
    for op in OPCODES {
        if let Err(e) = decode(&format!("{op}.b32")) {
            assert!(!e.starts_with("unknown instruction"), "{op}: {e}");
        }
    }
    for op in ["trap", "atom", "shfl", "vote", "call", "tex"] {
        assert!(!OPCODES.contains(&op));
        let e = decode(&format!("{op}.b32")).unwrap_err();
        assert_eq!(e, format!("unknown instruction {op}.b32"));
    }
}

#[test]
fn add_n_fixture_runs_with_special_registers_and_params() {
    let m = memory();
    for i in 0..64u32 {
        m.write_u32(BUF + 4 * u64::from(i), 1000 + i).unwrap();
    }
    // out, a, n ; 2 CTAs of 32 threads
    launch(ADD_N, &[OUT, BUF, 7], [2, 1, 1], [32, 1, 1], &m).unwrap();
    let want: Vec<u32> = (0..64).map(|i| 1007 + i).collect();
    assert_eq!(words(&m, OUT, 64), want);
}

#[test]
fn a_wrong_special_register_gives_a_wrong_result() {
    // %tid.y in place of %ctaid.x: CTA 1 writes CTA 0's elements, so 32..64 stay 0
    let bad = ADD_N.replace("mov.u32 %r2, %ctaid.x;", "mov.u32 %r2, %tid.y;");
    let m = memory();
    launch(&bad, &[OUT, BUF, 7], [2, 1, 1], [32, 1, 1], &m).unwrap();
    let got = words(&m, OUT, 64);
    assert_eq!(&got[..4], &[7, 7, 7, 7]);
    assert!(
        got[32..].iter().all(|&x| x == 0),
        "second CTA's outputs unwritten: {got:?}"
    );
}

fn reverse_kernel(barrier: bool) -> String {
    format!(
        ".version 7.1\n.target sm_86\n.address_size 64\n.shared .align 4 .b8 s[128];\n\
        .visible .entry rev(.param .u64 out)\n{{\n.reg .b32 %r<6>;\n.reg .b64 %rd<6>;\n\
        ld.param.u64 %rd1, [out];\n mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n\
        mov.u32 %r3, s;\n add.s32 %r4, %r3, %r2;\n st.shared.u32 [%r4], %r1;\n{}\n\
        sub.s32 %r5, 124, %r2;\n add.s32 %r5, %r3, %r5;\n ld.shared.u32 %r5, [%r5];\n\
        cvt.u64.u32 %rd2, %r2;\n add.s64 %rd3, %rd1, %rd2;\n st.global.u32 [%rd3], %r5;\n ret;\n}}\n",
        if barrier { "bar.sync 0;" } else { "" }
    )
}

#[test]
fn bar_sync_orders_shared_memory_and_its_absence_shows() {
    let m = memory();
    launch(&reverse_kernel(true), &[OUT], [1, 1, 1], [32, 1, 1], &m).unwrap();
    assert_eq!(words(&m, OUT, 32), (0..32).rev().collect::<Vec<u32>>());
    let m = memory();
    launch(&reverse_kernel(false), &[OUT], [1, 1, 1], [32, 1, 1], &m).unwrap();
    let got = words(&m, OUT, 32);
    assert_ne!(
        got,
        (0..32).rev().collect::<Vec<u32>>(),
        "without bar.sync thread 0 reads before thread 31 writes"
    );
    assert_eq!(got[0], 0, "thread 0 read an unwritten slot");
}

#[test]
fn loops_vectors_generic_addresses_and_packing() {
    // sum 1..=n with a predicated back branch, then v4 store of (sum, n, packed, unpacked hi)
    let src = ".version 7.1\n.target sm_86\n.address_size 64\n.visible .entry k(.param .u64 out, .param .u32 n)\n{\n\
        .reg .pred %p<2>;\n.reg .b16 %rs<3>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n\
        ld.param.u64 %rd1, [out];\n cvta.to.global.u64 %rd1, %rd1;\n ld.param.u32 %r1, [n];\n mov.u32 %r2, 0;\n mov.u32 %r3, 1;\n\
        $L__loop:\n add.s32 %r2, %r2, %r3;\n add.s32 %r3, %r3, 1;\n setp.le.s32 %p1, %r3, %r1;\n @%p1 bra.uni $L__loop;\n\
        mov.u16 %rs1, 0x1234;\n mov.u16 %rs2, 0xABCD;\n mov.b32 %r4, {%rs1, %rs2};\n mov.b32 {%rs1, %rs2}, %r4;\n cvt.u32.u16 %r5, %rs2;\n\
        st.v4.u32 [%rd1+16], {%r2, %r1, %r4, %r5};\n ld.global.v2.u32 {%r6, %r7}, [%rd1+24];\n st.global.v2.u32 [%rd1], {%r7, %r6};\n ret;\n}\n";
    let m = memory();
    launch(src, &[OUT, 10], [1, 1, 1], [1, 1, 1], &m).unwrap();
    assert_eq!(
        words(&m, OUT, 8),
        [0xABCD, 0xABCD_1234, 0, 0, 55, 10, 0xABCD_1234, 0xABCD]
    );
}

#[test]
fn faults_name_the_address_and_refuse_misalignment() {
    let m = memory();
    let e = launch(ADD_N, &[OUT, 0x5000_0000, 7], [1, 1, 1], [1, 1, 1], &m).unwrap_err();
    assert!(
        e.message().contains("0x50000000") && e.message().contains("ld.global.u32"),
        "{e}"
    );
    let e = launch(ADD_N, &[OUT + 2, BUF, 7], [1, 1, 1], [1, 1, 1], &m).unwrap_err();
    assert!(
        e.message().contains("misaligned") && e.message().contains("0x200002"),
        "{e}"
    );
    let oob = reverse_kernel(true).replace("sub.s32 %r5, 124, %r2;", "add.s32 %r5, 4096, %r2;");
    let e = launch(&oob, &[OUT], [1, 1, 1], [2, 1, 1], &m).unwrap_err();
    assert!(
        e.message().contains("Shared read of 4 bytes at 0x")
            && e.message().contains("out of bounds"),
        "{e}"
    );
}

#[test]
fn integer_alu_edges() {
    let (s32, u32_, s16, u16_, b32, s64) = (
        ty("s32"),
        ty("u32"),
        ty("s16"),
        ty("u16"),
        ty("b32"),
        ty("s64"),
    );
    let f = FMods::default();
    let m32 = |x: i64| (x as u64) & 0xFFFF_FFFF;
    let bin = |o, t, a: i64, b: i64| alu::binary(o, t, f, a as u64, b as u64).unwrap();
    assert_eq!(
        m32(bin(Bin::Add, s32, i32::MAX as i64, 1) as i64),
        m32(i32::MIN as i64)
    );
    assert_eq!(bin(Bin::Add, u16_, 0xFFFF, 1), 0);
    assert_eq!(
        bin(Bin::Div, s32, i32::MIN as i64, -1) as u32,
        i32::MIN as u32
    );
    assert_eq!(bin(Bin::Div, s32, -7, 2) as i64 as i32, -3);
    assert_eq!(bin(Bin::Rem, s32, -7, 3) as i64 as i32, -1);
    assert_eq!(bin(Bin::Div, u32_, 7, 0), 0xFFFF_FFFF);
    assert_eq!(bin(Bin::Shr, s32, -8, 1) as i64 as i32, -4);
    assert_eq!(bin(Bin::Shr, s32, -8, 40) as i64 as i32, -1);
    assert_eq!(bin(Bin::Shr, u32_, 0x8000_0000, 31), 1);
    assert_eq!(bin(Bin::Shl, b32, 1, 32), 0);
    assert_eq!(bin(Bin::Min, u32_, -1, 5), 5);
    assert_eq!(bin(Bin::Min, s32, -1, 5) as i64 as i32, -1);
    assert_eq!(bin(Bin::Max, s16, 0x8000, 1), 1);
    let mut sat = f;
    sat.sat = true;
    assert_eq!(
        alu::binary(Bin::Add, s32, sat, i32::MAX as u64, 5).unwrap() as i32,
        i32::MAX
    );
    assert_eq!(
        alu::mul_int(Half::Wide, s32, (-3i64) as u64, 5, None) as i64,
        -15
    );
    assert_eq!(
        alu::mul_int(Half::Wide, u32_, 0xFFFF_FFFF, 2, None),
        0x1_FFFF_FFFE
    );
    assert_eq!(
        alu::mul_int(Half::Hi, s32, (-2i64) as u64, 0x4000_0000, None) as i32,
        -1
    );
    assert_eq!(alu::mul_int(Half::Lo, s32, 3, 4, Some(5)), 17);
    assert_eq!(
        alu::mul_int(Half::Wide, s32, 0x7FFF_FFFF, 2, Some(1)),
        0xFFFF_FFFF
    );
    assert_eq!(
        alu::unary(Un::Neg, s32, f, i32::MIN as u64).unwrap() as i32,
        i32::MIN
    );
    assert_eq!(alu::unary(Un::Abs, s64, f, (-5i64) as u64).unwrap(), 5);
    assert_eq!(alu::unary(Un::Not, b32, f, 0).unwrap(), 0xFFFF_FFFF);
    assert_eq!(alu::unary(Un::Popc, b32, f, 0xF0F0).unwrap(), 8);
    assert_eq!(alu::unary(Un::Clz, b32, f, 1).unwrap(), 31);
    assert_eq!(alu::unary(Un::Brev, b32, f, 1).unwrap(), 0x8000_0000);
    assert_eq!(alu::unary(Un::Cnot, b32, f, 0).unwrap(), 1);
    // funnel shifts: rotate left by 8 is shf.l.wrap with both halves the word
    assert_eq!(
        alu::shf(true, true, 0x1234_5678, 0x1234_5678, 8),
        0x3456_7812
    );
    assert_eq!(
        alu::shf(false, true, 0x1234_5678, 0x1234_5678, 40),
        0x7812_3456
    );
    assert_eq!(alu::shf(true, false, 0xAAAA_AAAA, 0x1, 40), 0xAAAA_AAAA);
    assert_eq!(decode("shf.l.wrap.b32").unwrap(), Op::Shf(true, true));
    // setp signed vs unsigned
    assert!(alu::compare(Cmp::Lt, s32, f, 0xFFFF_FFFF, 0));
    assert!(!alu::compare(Cmp::Lo, u32_, f, 0xFFFF_FFFF, 0));
    assert!(alu::compare(Cmp::Hi, b32, f, 0xFFFF_FFFF, 0));
    assert!(
        alu::combine(true, Some(super::isa::BoolOp::And), true)
            && !alu::combine(true, Some(super::isa::BoolOp::Xor), true)
    );
    // cvt: sign extension, truncation, saturation
    let cvt = |d: &str, s: &str, sat: bool, a: u64| {
        alu::cvt(ty(d), ty(s), None, false, FMods { sat, ..f }, a).unwrap()
    };
    assert_eq!(cvt("s64", "s32", false, 0xFFFF_FFFE) as i64, -2);
    assert_eq!(cvt("u64", "u32", false, 0xFFFF_FFFE), 0xFFFF_FFFE);
    assert_eq!(cvt("u8", "u32", false, 0x1FF), 0xFF);
    assert_eq!(cvt("s8", "s32", true, 300), 127);
    assert_eq!(cvt("u8", "s32", true, (-5i64) as u64), 0);
}

#[test]
fn float_alu_edges() {
    let (f32t, f16t, f64t, s32, u8t) = (ty("f32"), ty("f16"), ty("f64"), ty("s32"), ty("u8"));
    let f = FMods::default();
    let nan = f32b(f32::NAN);
    let bin = |o, a: f32, b: f32| {
        f32::from_bits(alu::binary(o, f32t, f, f32b(a), f32b(b)).unwrap() as u32)
    };
    assert_eq!(bin(Bin::Min, f32::NAN, 1.0), 1.0, "min returns the non-NaN");
    assert_eq!(bin(Bin::Max, 2.0, f32::NAN), 2.0);
    assert!(bin(Bin::Max, f32::NAN, f32::NAN).is_nan());
    let nanmods = FMods { nan: true, ..f };
    assert!(
        f32::from_bits(alu::binary(Bin::Max, f32t, nanmods, nan, f32b(1.0)).unwrap() as u32)
            .is_nan()
    );
    assert_eq!(bin(Bin::Max, -0.0, 0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(bin(Bin::Min, 0.0, -0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(bin(Bin::Div, 1.0, 3.0), 1.0f32 / 3.0);
    assert_eq!(bin(Bin::Add, 3e38, 3e38), f32::INFINITY);
    assert_eq!(bin(Bin::Copysign, -1.0, 2.0), -2.0);
    // fma rounds once: (1+e)(1-e) - 1 = -e^2, which an unfused multiply rounds away
    let e = f32::EPSILON;
    let fm = alu::fma(f32t, f, f32b(1.0 + e), f32b(1.0 - e), f32b(-1.0));
    assert_eq!(f32::from_bits(fm as u32), -(e * e));
    // ftz flushes a subnormal input
    let ftz = FMods { ftz: true, ..f };
    let sub = f32::from_bits(1);
    assert_eq!(
        alu::binary(Bin::Add, f32t, ftz, f32b(sub), f32b(0.0)).unwrap(),
        0
    );
    assert_eq!(
        alu::binary(Bin::Add, f32t, f, f32b(sub), f32b(0.0)).unwrap(),
        1
    );
    // sat clamps, NaN to 0
    let sat = FMods { sat: true, ..f };
    assert_eq!(
        alu::binary(Bin::Add, f32t, sat, f32b(0.75), f32b(0.75)).unwrap(),
        f32b(1.0)
    );
    assert_eq!(
        alu::binary(Bin::Add, f32t, sat, nan, nan).unwrap(),
        f32b(0.0)
    );
    // unary
    let un = |o, a: f32| f32::from_bits(alu::unary(o, f32t, f, f32b(a)).unwrap() as u32);
    assert_eq!(un(Un::Neg, 0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(un(Un::Abs, -0.0).to_bits(), 0);
    assert_eq!(un(Un::Ex2, 3.0), 8.0);
    assert_eq!(un(Un::Lg2, 0.0), f32::NEG_INFINITY);
    assert!(un(Un::Lg2, -1.0).is_nan());
    assert_eq!(un(Un::Rcp, -0.0), f32::NEG_INFINITY);
    assert!(un(Un::Sqrt, -1.0).is_nan());
    assert_eq!(un(Un::Sqrt, 2.0), 2.0f32.sqrt());
    assert_eq!(un(Un::Rsqrt, 4.0), 0.5);
    assert_eq!(un(Un::Sin, 0.5), (0.5f64.sin()) as f32);
    // f16 arithmetic rounds to half: 2048 + 1 = 2048
    let h = |x: f32| u64::from(half::f16::from_f32(x).to_bits());
    assert_eq!(
        alu::binary(Bin::Add, f16t, f, h(2048.0), h(1.0)).unwrap(),
        h(2048.0)
    );
    // setp ordered and unordered
    let cmp = |c, a: f32, b: f32| alu::compare(c, f32t, f, f32b(a), f32b(b));
    assert!(!cmp(Cmp::Lt, f32::NAN, 1.0) && cmp(Cmp::Ltu, f32::NAN, 1.0));
    assert!(!cmp(Cmp::Ne, f32::NAN, 1.0) && cmp(Cmp::Neu, f32::NAN, 1.0));
    assert!(!cmp(Cmp::Eq, f32::NAN, f32::NAN) && cmp(Cmp::Equ, f32::NAN, f32::NAN));
    assert!(cmp(Cmp::Nan, 1.0, f32::NAN) && !cmp(Cmp::Num, 1.0, f32::NAN));
    assert!(cmp(Cmp::Eq, 0.0, -0.0) && cmp(Cmp::Geu, 1.0, 1.0));
    // cvt float -> int: rounding modes, saturation, NaN -> 0
    let toi = |r, x: f32| alu::cvt(s32, f32t, Some(r), true, f, f32b(x)).unwrap() as i64 as i32;
    assert_eq!(toi(Rnd::Z, -2.7), -2);
    assert_eq!(toi(Rnd::N, 2.5), 2);
    assert_eq!(toi(Rnd::N, 3.5), 4);
    assert_eq!(toi(Rnd::M, -2.5), -3);
    assert_eq!(toi(Rnd::P, 2.1), 3);
    assert_eq!(toi(Rnd::Z, 1e10), i32::MAX);
    assert_eq!(toi(Rnd::Z, f32::NAN), 0);
    assert_eq!(
        alu::cvt(u8t, f32t, Some(Rnd::Z), true, f, f32b(-3.0)).unwrap(),
        0
    );
    assert!(
        alu::cvt(s32, f32t, None, false, f, f32b(1.0)).is_err(),
        "float to int needs .rzi etc"
    );
    // int -> float rounds once; float -> float
    let i2f = alu::cvt(f32t, ty("s64"), Some(Rnd::N), false, f, (1u64 << 53) + 1).unwrap();
    assert_eq!(f32::from_bits(i2f as u32), 9007199254740992.0);
    assert_eq!(
        alu::cvt(f16t, f32t, Some(Rnd::N), false, f, f32b(65520.0)).unwrap(),
        h(f32::INFINITY)
    );
    assert_eq!(
        alu::cvt(f32t, f16t, None, false, f, h(-0.0)).unwrap(),
        f32b(-0.0)
    );
    assert_eq!(
        alu::cvt(f32t, f64t, Some(Rnd::N), false, f, 0.1f64.to_bits()).unwrap(),
        f32b(0.1)
    );
    let rni = alu::cvt(f32t, f32t, Some(Rnd::N), true, f, f32b(-2.5)).unwrap();
    assert_eq!(f32::from_bits(rni as u32), -2.0);
    let bf = alu::cvt(
        ty("bf16"),
        f32t,
        Some(Rnd::N),
        false,
        f,
        f32b(1.0 + 1.0 / 256.0 + 1.0 / 512.0),
    )
    .unwrap();
    assert_eq!(
        bf,
        u64::from(half::bf16::from_f32(1.0 + 1.0 / 128.0).to_bits()),
        "bf16 rounds to nearest even"
    );
    assert_eq!(Ty::parse("bf16").unwrap().kind, Kind::Bf);
}
