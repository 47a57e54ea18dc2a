//! The interpreter catches wrong programs: each test runs a right kernel (the result checks) and a
//! wrong variant of it (a special register swapped, `mma` fragments in the wrong registers, an
//! instruction the interpreter does not know) and shows the check failing with a message that
//! names the first wrong element, or the interpreter refusing the program and naming the
//! instruction. Expectations are derived by hand from the PTX ISA, not from the interpreter.

use half::f16;

use super::tests::{launch, memory, words, ADD_N, BUF, OUT};
use super::{parse_kernel, run, Launch};
use crate::mockgpu::gpu_memory::{GpuMemory, SparseMemory};

/// `Err("<what>[i] = got, want w")` at the first difference.
fn compare<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
) -> Result<(), String> {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!(
            "{what}: {} elements, want {}",
            got.len(),
            want.len()
        )),
        Some(i) => Err(format!("{what}[{i}] = {:?}, want {:?}", got[i], want[i])),
    }
}

/// add_n (out[i] = a[i] + 7) over 2 CTAs of 32 threads, with `edit` applied to its PTX.
fn add_n_with(edit: &dyn Fn(&str) -> String) -> Result<(), String> {
    let m = memory();
    for i in 0..64u32 {
        m.write_u32(BUF + 4 * u64::from(i), 1000 + i).unwrap();
    }
    launch(&edit(ADD_N), &[OUT, BUF, 7], [2, 1, 1], [32, 1, 1], &m).map_err(|e| e.to_string())?;
    let want: Vec<u32> = (0..64).map(|i| 1007 + i).collect();
    compare("out", &words(&m, OUT, 64), &want)
}

#[test]
fn swapped_ctaid_and_tid_fail_the_compare() {
    add_n_with(&|s| s.to_string()).unwrap();
    let swap = |s: &str| {
        s.replace("%r2, %ctaid.x;", "%r2, %TMP;")
            .replace("%r4, %tid.x;", "%r4, %ctaid.x;")
            .replace("%r2, %TMP;", "%r2, %tid.x;")
    };
    assert!(swap(ADD_N)
        .contains("mov.u32 %r2, %tid.x;\n\tmov.u32 %r3, %ntid.x;\n\tmov.u32 %r4, %ctaid.x;"));
    // thread t of CTA c handles element 32 t + c: elements 0, 1, 32, 33, 64, ..., so out[2] is
    // never written
    let e = add_n_with(&swap).unwrap_err();
    assert_eq!(e, "out[2] = 0, want 1009");
    // %tid.y (always 0 in a 32x1x1 block) where %ctaid.x belongs: CTA 1 redoes CTA 0's elements
    let e = add_n_with(&|s| s.replace("%r2, %ctaid.x;", "%r2, %tid.y;")).unwrap_err();
    assert_eq!(e, "out[32] = 0, want 1039");
}

#[test]
fn an_unknown_instruction_is_an_error_naming_it() {
    let e = add_n_with(&|s| s.replace("\tret;", "\tnanosleep.u32 100;\n\tret;")).unwrap_err();
    assert!(
        e.contains("unknown instruction nanosleep.u32") && e.contains("line 32"),
        "{e}"
    );
    let e = add_n_with(&|s| s.replace("add.s32 %r7", "add.sat.wrap.s32 %r7")).unwrap_err();
    assert!(
        e.contains("unknown modifier .wrap in add.sat.wrap.s32"),
        "{e}"
    );
}

/// One warp's `mma.sync.m16n8k16` with its fragments loaded from memory laid out per lane (A:
/// 4 x b32 at 16 lane, B: 2 x b32 at 8 lane), C zero, D stored per lane (4 x f32 at 16 lane);
/// `a_regs` and `b_regs` are the operand vectors as the mma names them.
fn mma_kernel(a_regs: &str, b_regs: &str) -> String {
    format!(
        ".version 7.1\n.target sm_86\n.address_size 64\n\
        .visible .entry mma_k(.param .u64 pa, .param .u64 pb, .param .u64 pd)\n{{\n\
        .reg .b32 %r<8>;\n.reg .f32 %f<9>;\n.reg .b64 %rd<9>;\n\
        ld.param.u64 %rd1, [pa];\n ld.param.u64 %rd2, [pb];\n ld.param.u64 %rd3, [pd];\n\
        mov.u32 %r1, %laneid;\n mul.wide.u32 %rd4, %r1, 16;\n add.s64 %rd5, %rd1, %rd4;\n\
        ld.global.v4.b32 {{%r2, %r3, %r4, %r5}}, [%rd5];\n\
        mul.wide.u32 %rd6, %r1, 8;\n add.s64 %rd7, %rd2, %rd6;\n ld.global.v2.b32 {{%r6, %r7}}, [%rd7];\n\
        mov.f32 %f1, 0f00000000;\n mov.f32 %f2, %f1;\n mov.f32 %f3, %f1;\n mov.f32 %f4, %f1;\n\
        mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%f5, %f6, %f7, %f8}}, {a_regs}, {b_regs}, {{%f1, %f2, %f3, %f4}};\n\
        add.s64 %rd8, %rd3, %rd4;\n st.global.v4.f32 [%rd8], {{%f5, %f6, %f7, %f8}};\n ret;\n}}\n"
    )
}

const A_AT: u64 = BUF;
const B_AT: u64 = BUF + 0x800;

fn a_val(i: usize, k: usize) -> f32 {
    ((i * 3 + k) % 7) as f32 - 3.0
}

fn b_val(k: usize, j: usize) -> f32 {
    ((k * 3 + j * 2) % 5) as f32 - 2.0
}

/// The fragments per the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"),
/// `g = lane >> 2`, `q = lane % 4`: A's halves a0..a7 (two per register, low first) at row g
/// (a0, a1, a4, a5) or g + 8 (a2, a3, a6, a7), column 2q + (i & 1) (+ 8 for a4..a7); B's halves
/// b0..b3 at row 2q + (i & 1) (+ 8 for b2, b3), column g.
fn write_fragments(m: &SparseMemory) {
    let h = |x: f32| u32::from(f16::from_f32(x).to_bits());
    for lane in 0..32 {
        let (g, q) = (lane >> 2, lane % 4);
        for r in 0..4 {
            let half = |i: usize| {
                let row = g + if i % 4 >= 2 { 8 } else { 0 };
                let col = 2 * q + (i & 1) + if i >= 4 { 8 } else { 0 };
                h(a_val(row, col))
            };
            let w = half(2 * r) | half(2 * r + 1) << 16;
            m.write_u32(A_AT + (16 * lane + 4 * r) as u64, w).unwrap();
        }
        for r in 0..2 {
            let half = |i: usize| h(b_val(2 * q + (i & 1) + if i >= 2 { 8 } else { 0 }, g));
            let w = half(2 * r) | half(2 * r + 1) << 16;
            m.write_u32(B_AT + (8 * lane + 4 * r) as u64, w).unwrap();
        }
    }
}

/// Runs the mma kernel and returns D (16 x 8, row-major) from the lanes' c0..c3 (row g for c0,
/// c1, g + 8 for c2, c3; column 2q + (i & 1)).
fn run_mma(a_regs: &str, b_regs: &str) -> Vec<f32> {
    let m = memory();
    write_fragments(&m);
    let k = parse_kernel(&mma_kernel(a_regs, b_regs), None).unwrap();
    let mut p = vec![0u8; 24];
    for (i, v) in [A_AT, B_AT, OUT].iter().enumerate() {
        p[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    let l = Launch {
        mem: &m,
        params: &p,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_bytes: 0,
        shared_window: 0x7F00_0000_0000,
        local_window: 0x7E00_0000_0000,
    };
    run(&k, &l).unwrap();
    let per_lane = words(&m, OUT, 128);
    let mut d = vec![0f32; 128];
    for lane in 0..32 {
        let (g, q) = (lane >> 2, lane % 4);
        for i in 0..4 {
            let (row, col) = (g + if i >= 2 { 8 } else { 0 }, 2 * q + (i & 1));
            d[8 * row + col] = f32::from_bits(per_lane[4 * lane + i]);
        }
    }
    d
}

fn want_d() -> Vec<f32> {
    (0..16)
        .flat_map(|i| (0..8).map(move |j| (0..16).map(|k| a_val(i, k) * b_val(k, j)).sum()))
        .collect()
}

#[test]
fn mma_fragments_give_the_product_and_a_wrong_layout_fails_the_compare() {
    let right = run_mma("{%r2, %r3, %r4, %r5}", "{%r6, %r7}");
    compare("D", &right, &want_d()).unwrap();
    // a0a1 and a2a3 swapped: rows g and g + 8 of A's first 8 columns trade places
    let e = compare(
        "D",
        &run_mma("{%r3, %r2, %r4, %r5}", "{%r6, %r7}"),
        &want_d(),
    )
    .unwrap_err();
    assert!(e.starts_with("D[0] = "), "{e}");
    // b0b1 and b2b3 swapped: B's rows k and k + 8 trade places
    let e = compare(
        "D",
        &run_mma("{%r2, %r3, %r4, %r5}", "{%r7, %r6}"),
        &want_d(),
    )
    .unwrap_err();
    assert!(e.starts_with("D["), "{e}");
    // a fragment vector of the wrong length is refused, naming the operand
    let bad = mma_kernel("{%r2, %r3, %r4}", "{%r6, %r7}");
    let m = memory();
    let e = launch(&bad, &[A_AT, B_AT, OUT], [1, 1, 1], [32, 1, 1], &m).unwrap_err();
    assert!(
        e.message()
            .contains("mma operand 2 must be a vector of 4 registers"),
        "{e}"
    );
}
