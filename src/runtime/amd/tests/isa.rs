//! Real gfx1100 code objects from the hardware compiler (libLLVM 15 or newer: the tests say so
//! and skip where it is missing) on the emulated device's RDNA3 interpreter: results, coverage,
//! and a hand-patched object whose `s_waitcnt`s are gone failing with a clear message.

use super::*;
use crate::device::{Allocator, Compiler};
use crate::hw::amd::elf::Elf;
use crate::hw::amd::targets::GFX1100;
use crate::mockgpu::amdgpu::rdna3::coverage;
use crate::mockgpu::amdgpu::rdna3::decode::{decode, Enc};
use crate::runtime::amd::compiler::AMDCompiler;
use crate::Result;

const S_NOP: u32 = 0xbf80_0000;

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

fn load_lib(dev: &Arc<AmdDevice>, name: &str, lib: &[u8]) -> Box<dyn Program> {
    AmdRuntime::new(dev.clone()).load(name, lib).unwrap()
}

/// `out = a + b` for `groups` x `local` floats through the emulated device; the result or the
/// launch error.
fn run_add(dev: &Arc<AmdDevice>, prg: &dyn Program, groups: usize, local: usize) -> Result<()> {
    let n = groups * local;
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(4 * n, &BufferOptions::default()).unwrap())
        .collect();
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    a.copyin(&bufs[1], &f32_bytes(&x)).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&y)).unwrap();
    prg.call(&bufs, &[], Some([groups, 1, 1]), Some([local, 1, 1]), true)?;
    let mut out = vec![0u8; 4 * n];
    a.copyout(&mut out, &bufs[0]).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(f32s(&out), want);
    Ok(())
}

#[test]
fn llvm_add_kernel_runs_on_the_rdna3_interpreter() {
    let Some(c) = compiler() else { return };
    let (dev, _emu) = one_gpu();
    let lib = compile(&c, "E_add", &add_uops(4, 40, dtypes::float32));
    let prg = load_lib(&dev, "E_add", &lib);
    run_add(&dev, prg.as_ref(), 4, 40).unwrap();
    let seen = coverage();
    assert!(seen.contains(&(Enc::Sopp, 48)), "s_endpgm ran: {seen:?}");
    assert!(
        seen.contains(&(Enc::Flat, 20)),
        "global_load_b32 ran: {seen:?}"
    );
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
    let prg = load_lib(&dev, "E_add", &without_waitcnt(&lib));
    let e = run_add(&dev, prg.as_ref(), 2, 32).unwrap_err();
    assert!(
        e.message()
            .contains("is still in flight (a missing s_waitcnt"),
        "{e}"
    );
    // The unpatched object on the same device still runs.
    let prg = load_lib(&dev, "E_add", &lib);
    run_add(&dev, prg.as_ref(), 2, 32).unwrap();
}
