//! The RDNA3 interpreter on hand-assembled words: decoding, refusals of unknown opcodes and
//! encodings, the endless-loop guard, WMMA's fragment layout. Real gfx1100 code objects from the
//! hardware compiler run in `runtime/amd/tests/isa.rs`.

use super::decode::{decode, Enc};
use super::*;
use crate::mockgpu::amdgpu::QueueId;
use crate::mockgpu::gpu_memory::SparseMemory;

const S_ENDPGM: u32 = 0xbfb0_0000;
const S_NOP: u32 = 0xbf80_0000;

#[test]
fn decode_classifies_encodings_lengths_and_literals() {
    // s_waitcnt vmcnt(0) (SOPP 9), s_endpgm (SOPP 48).
    let i = decode(&[0xbf89_03f7], 0).unwrap();
    assert_eq!((i.enc, i.op, i.len), (Enc::Sopp, 9, 1));
    assert_eq!(decode(&[S_ENDPGM], 0).unwrap().op, 48);
    // s_mov_b32 s0, literal (SOP1 0, ssrc0 = 255): two dwords.
    let i = decode(&[0xbe80_00ff, 0x1234_5678], 0).unwrap();
    assert_eq!((i.enc, i.op, i.len, i.lit), (Enc::Sop1, 0, 2, 0x1234_5678));
    // s_load_b64 s[2:3], s[0:1], 0x10 (SMEM 1): two dwords.
    let i = decode(&[0xf404_0080, 0xf800_0010], 0).unwrap();
    assert_eq!((i.enc, i.op, i.len), (Enc::Smem, 1, 2));
    // v_add_f32_e32 v1, v3, v2 (VOP2 3), v_mov_b32_e32 (VOP1 1), v_cmp_lt_f32 (VOPC 17).
    assert_eq!(
        decode(&[3 << 25 | 1 << 17 | 2 << 9 | 0x103], 0).unwrap().op,
        3
    );
    let i = decode(&[0x7e02_0301], 0).unwrap();
    assert_eq!((i.enc, i.op), (Enc::Vop1, 1));
    let i = decode(&[0x7c22_0501], 0).unwrap();
    assert_eq!((i.enc, i.op), (Enc::Vopc, 17));
    // v_fmaak_f32 always carries a literal.
    let i = decode(&[45 << 25, 0x3f80_0000], 0).unwrap();
    assert_eq!((i.len, i.lit), (2, 0x3f80_0000));
    // VOP3 v_fma_f32 (531), global_load_b32 (FLAT 20), ds_load_b32 (DS 54).
    let i = decode(&[0xd613_0001, 0x040e_0501], 0).unwrap();
    assert_eq!((i.enc, i.op, i.len), (Enc::Vop3, 531, 2));
    let i = decode(&[0xdc50_0000, 0x057c_0201], 0).unwrap();
    assert_eq!((i.enc, i.op), (Enc::Flat, 20));
    let i = decode(&[0xd8d8_0000, 0x0100_0001], 0).unwrap();
    assert_eq!((i.enc, i.op), (Enc::Ds, 54));
    // Refusals name the word.
    let e = decode(&[0xfc00_0000], 0).unwrap_err();
    assert!(
        e.message().contains("0xfc000000 is no known encoding"),
        "{e}"
    );
    let e = decode(&[0xf404_0080], 0).unwrap_err();
    assert!(e.message().contains("cut off"), "{e}");
}

const CODE: u64 = 0x10_0000;

fn state(wg: [u32; 3], grid: [u32; 3]) -> DispatchState {
    DispatchState {
        queue: QueueId(0),
        pgm_addr: CODE,
        rsrc1: 1,
        rsrc2: 2 << 1 | 1 << 7,
        rsrc3: 0,
        user_sgprs: [0; 16],
        user_sgpr_count: 2,
        workgroup_size: wg,
        grid,
        start: [0; 3],
        wave32: true,
        lds_bytes: 0,
        scratch_base: 0,
        tmpring_size: 0,
    }
}

fn run_words(words: &[u32]) -> Result<()> {
    let m = SparseMemory::new();
    m.map(CODE, 0x1000).unwrap();
    m.write_dwords(CODE, words).unwrap();
    Rdna3Executor::new().dispatch(&m, &state([32, 1, 1], [1, 1, 1]))
}

#[test]
fn unknown_opcodes_and_encodings_are_errors_naming_them() {
    // s_trap 0 (SOPP 16) is decoded but not executed.
    let e = run_words(&[0xbf90_0000, S_ENDPGM]).unwrap_err();
    assert!(
        e.message()
            .contains("Sopp opcode 16 (word 0xbf900000) at pc 0x0 is not implemented"),
        "{e}"
    );
    // An image instruction (MIMG) is refused by name.
    let e = run_words(&[S_NOP, 0xf000_0000, 0, S_ENDPGM]).unwrap_err();
    assert!(e.message().contains("Mimg opcode 0"), "{e}");
    assert!(e.message().contains("at pc 0x4"), "{e}");
    let e = run_words(&[0xfc00_0000]).unwrap_err();
    assert!(e.message().contains("no known encoding"), "{e}");
    // Running off the mapped code is a fault, not a hang.
    let e = run_words(&[S_NOP; 1024]).unwrap_err();
    assert!(e.message().contains("unmapped"), "{e}");
}

#[test]
fn endless_loops_are_stopped() {
    // s_branch -1: jumps to itself.
    let e = run_words(&[0xbfa0_ffff]).unwrap_err();
    assert!(e.message().contains("without ending"), "{e}");
}

/// A wave with WMMA operands A (v8-v15), B (v16-v23), C (v24-v31) in the wave32 fragment
/// layout, and the expected D = A x B + C.
fn wmma_wave() -> (Wave, [[f32; 16]; 16]) {
    let mut w = Wave::new(64);
    let a = |m: usize, k: usize| ((m * 3 + k) % 7) as f32 - 3.0;
    let b = |k: usize, n: usize| ((k * 5 + n * 2) % 9) as f32 * 0.5;
    let c = |m: usize, n: usize| (m * 16 + n) as f32;
    for lane in 0..32 {
        let r = lane % 16;
        for j in 0..8 {
            let pack = |lo: f32, hi: f32| {
                u32::from(half::f16::from_f32(lo).to_bits())
                    | u32::from(half::f16::from_f32(hi).to_bits()) << 16
            };
            w.v[8 + j][lane] = pack(a(r, 2 * j), a(r, 2 * j + 1));
            w.v[16 + j][lane] = pack(b(2 * j, r), b(2 * j + 1, r));
            w.v[24 + j][lane] = c(2 * j + lane / 16, r).to_bits();
        }
    }
    let mut want = [[0f32; 16]; 16];
    for (m, row) in want.iter_mut().enumerate() {
        for (n, v) in row.iter_mut().enumerate() {
            *v = c(m, n) + (0..16).map(|k| a(m, k) * b(k, n)).sum::<f32>();
        }
    }
    (w, want)
}

fn wmma_inst() -> Inst {
    // v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[24:31]
    decode(&[0xcc40_0000, 264 | 272 << 9 | 280 << 18 | 3 << 27], 0).unwrap()
}

#[test]
fn wmma_follows_the_wave32_fragment_layout_and_refuses_a_wrong_one() {
    let (mut w, want) = wmma_wave();
    super::vop3p::exec(&mut w, &wmma_inst(), 0).unwrap();
    for lane in 0..32 {
        for j in 0..8 {
            let (m, n) = (2 * j + lane / 16, lane % 16);
            assert_eq!(f32::from_bits(w.v[j][lane]), want[m][n], "D[{m}][{n}]");
        }
    }
    // A row fragment laid out for lanes 0-15 only (the upper half-wave not repeating it).
    let (mut w, _) = wmma_wave();
    w.v[9][20] ^= 0x3c00;
    let e = super::vop3p::exec(&mut w, &wmma_inst(), 0).unwrap_err();
    assert!(
        e.message().contains("operand A v9 lane 4")
            && e.message().contains("a wrong fragment layout"),
        "{e}"
    );
}

#[test]
fn vopd_halves_read_their_sources_before_either_writes() {
    // v_dual_mov_b32 v1, v0 :: v_dual_mov_b32 v0, v1 swaps v0 and v1.
    let i = decode(&[0xc800_0000 | 8 << 22 | 8 << 17 | 256, 1 << 24 | 257], 0).unwrap();
    assert_eq!(i.enc, Enc::Vopd);
    let mut w = Wave::new(8);
    w.s[wave::EXEC] = u32::MAX;
    for lane in 0..32 {
        (w.v[0][lane], w.v[1][lane]) = (lane as u32, 100 + lane as u32);
    }
    super::vopd::exec(&mut w, &i, 0).unwrap();
    for lane in 0..32 {
        assert_eq!(
            (w.v[0][lane], w.v[1][lane]),
            (100 + lane as u32, lane as u32)
        );
    }
}
