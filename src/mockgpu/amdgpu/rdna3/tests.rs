//! The RDNA3 interpreter on hand-assembled words (decoding, refusals) and on real gfx1100 code
//! objects from the hardware compiler (libLLVM 15 or newer; the tests that need it say so and
//! skip when it is missing): results, a missing `s_waitcnt`, an unknown opcode.

use super::decode::{decode, Enc};
use super::*;
use crate::codegen::uops::UOp;
use crate::device::{Compiler, Program, RawBuf, Runtime};
use crate::dtype::dtypes;
use crate::hcq::HcqAllocator;
use crate::hw::amd::elf::Elf;
use crate::hw::amd::targets::GFX1100;
use crate::mockgpu::amdgpu::QueueId;
use crate::mockgpu::gpu_memory::SparseMemory;
use crate::renderer::Renderer;
use crate::runtime::amd::compiler::AMDCompiler;
use crate::runtime::amd::tests::{add_uops, f32_bytes, f32s, one_gpu};
use crate::runtime::amd::{AmdDevice, AmdRuntime};
use std::sync::Arc;

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
    assert_eq!(decode(&[3 << 25 | 1 << 17 | 2 << 9 | 0x103], 0).unwrap().op, 3);
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
    assert!(e.message().contains("0xfc000000 is no known encoding"), "{e}");
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

/// The hardware compiler for gfx1100, or None (with the reason printed) without libLLVM 15+.
fn compiler() -> Option<AMDCompiler> {
    match AMDCompiler::new(&GFX1100) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("skipped: no libLLVM that knows gfx1100 ({e})");
            None
        }
    }
}

fn compile(c: &AMDCompiler, name: &str, uops: &[UOp]) -> Vec<u8> {
    let src = c.renderer().render(name, uops).unwrap();
    c.compile(&src).unwrap()
}

fn load(dev: &Arc<AmdDevice>, name: &str, lib: &[u8]) -> Box<dyn Program> {
    AmdRuntime::new(dev.clone()).load(name, lib).unwrap()
}

/// `out = a + b` for `groups` x `local` floats through the emulated device; the result or the
/// launch error.
fn run_add(dev: &Arc<AmdDevice>, prg: &dyn Program, groups: usize, local: usize) -> Result<()> {
    let n = groups * local;
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| {
            crate::device::Allocator::alloc(&a, 4 * n, &Default::default()).unwrap()
        })
        .collect();
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    crate::device::Allocator::copyin(&a, &bufs[1], &f32_bytes(&x)).unwrap();
    crate::device::Allocator::copyin(&a, &bufs[2], &f32_bytes(&y)).unwrap();
    prg.call(&bufs, &[], Some([groups, 1, 1]), Some([local, 1, 1]), true)?;
    let mut out = vec![0u8; 4 * n];
    crate::device::Allocator::copyout(&a, &mut out, &bufs[0]).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(f32s(&out), want);
    Ok(())
}

#[test]
fn llvm_add_kernel_runs_on_the_rdna3_interpreter() {
    let Some(c) = compiler() else { return };
    let (dev, _emu) = one_gpu();
    let lib = compile(&c, "E_add", &add_uops(4, 40, dtypes::float32));
    let prg = load(&dev, "E_add", &lib);
    run_add(&dev, prg.as_ref(), 4, 40).unwrap();
    let seen = coverage();
    assert!(seen.contains(&(Enc::Sopp, 48)), "s_endpgm ran: {seen:?}");
    assert!(seen.contains(&(Enc::Flat, 20)), "global_load_b32 ran: {seen:?}");
}

/// `lib` with every `s_waitcnt` in `.text` replaced by `s_nop 0`.
fn without_waitcnt(lib: &[u8]) -> Vec<u8> {
    let elf = Elf::parse(lib).unwrap();
    let (_, text) = elf.section(".text").unwrap();
    let (off, size) = (text.offset as usize, text.size as usize);
    let mut out = lib.to_vec();
    let mut patched = 0;
    let mut pc = 0;
    let words: Vec<u32> = lib[off..off + size]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    while pc < words.len() {
        let i = decode(&words, pc).unwrap();
        if i.enc == Enc::Sopp && i.op == 9 {
            out[off + 4 * pc..off + 4 * pc + 4].copy_from_slice(&S_NOP.to_le_bytes());
            patched += 1;
        }
        if i.enc == Enc::Sopp && i.op == 48 {
            break;
        }
        pc += i.len;
    }
    assert!(patched > 0, "the kernel waits for its loads somewhere");
    out
}

#[test]
fn a_missing_waitcnt_fails_with_a_clear_message() {
    let Some(c) = compiler() else { return };
    let (dev, _emu) = one_gpu();
    let lib = compile(&c, "E_add", &add_uops(2, 32, dtypes::float32));
    let prg = load(&dev, "E_add", &without_waitcnt(&lib));
    let e = run_add(&dev, prg.as_ref(), 2, 32).unwrap_err();
    assert!(
        e.message().contains("is still in flight (a missing s_waitcnt"),
        "{e}"
    );
    // The unpatched object on the same device still runs.
    let prg = load(&dev, "E_add", &lib);
    run_add(&dev, prg.as_ref(), 2, 32).unwrap();
}
