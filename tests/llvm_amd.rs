//! AMD code objects from the LLVM IR renderer and `AMDCompiler`, for every gfx target in the
//! target table that an installed libLLVM knows, with every installed libLLVM (the newest and,
//! where present, LLVM 14 explicitly). Each test kernel's code object is checked: the ELF header
//! (EM_AMDGPU, ET_REL, HSA OS ABI, `EF_AMDGPU_MACH` = the table's), the kernel descriptor
//! (kernarg_size = 8*nbufs + 4*nvars, LDS size, no scratch, wave32 on gfx10+, user SGPRs limited
//! to what the launcher provides), the one `R_AMDGPU_REL64` relocation of the code offset, and no
//! undefined symbols; then the AMD runtime's loader lays it out (applying the relocation) and its
//! launch checks accept the descriptor. Targets a libLLVM does not know are reported as skipped,
//! by name.

mod llvm_common;

use std::sync::Arc;

use llvm_common::elf::*;
use llvm_common::{amd_kernels, Kernel};
use rawgrad::device::Compiler;
use rawgrad::ffi::llvm::{find_libraries, Llvm, MIN_LLVM_MAJOR};
use rawgrad::hw::amd::elf::load_code_object;
use rawgrad::hw::amd::kd::KernelCodeProperties as Kcp;
use rawgrad::hw::amd::kd::KernelDescriptor;
use rawgrad::hw::amd::targets::{GfxTarget, ScratchModel, TARGETS};
use rawgrad::renderer::Renderer;
use rawgrad::runtime::amd::compiler::AMDCompiler;
use rawgrad::runtime::amd::program::check_descriptor;

/// One libLLVM per installed major version, newest first.
fn llvms() -> Vec<Arc<Llvm>> {
    let mut out: Vec<Arc<Llvm>> = vec![];
    for l in find_libraries() {
        if l.major < MIN_LLVM_MAJOR || out.iter().any(|o| o.version().major == l.major) {
            continue;
        }
        match Llvm::open(&l.path) {
            Ok(llvm) => out.push(llvm),
            Err(e) => println!("skipped {}: {e}", l.path.display()),
        }
    }
    out
}

/// Check one code object; returns the descriptor.
fn check_object(t: &GfxTarget, k: &Kernel, obj: &[u8]) -> KernelDescriptor {
    let elf = Elf::parse(obj);
    assert_eq!(elf.e_machine(), EM_AMDGPU);
    assert_eq!(elf.e_type(), ET_REL);
    assert_eq!(elf.osabi(), ELFOSABI_AMDGPU_HSA);
    assert_eq!(elf.e_flags() & 0xff, t.elf_mach, "{} mach", t.name);
    let text = elf
        .symbol(k.name)
        .unwrap_or_else(|| panic!("no symbol {}", k.name));
    assert_eq!(elf.sections[text.shndx as usize].name, ".text");
    let kd_name = format!("{}.kd", k.name);
    let kd_sym = elf.symbol(&kd_name).unwrap();
    assert_eq!(elf.sections[kd_sym.shndx as usize].name, ".rodata");
    let kd = KernelDescriptor::parse(elf.symbol_bytes(&kd_name)).unwrap();
    let what = format!("{} {}", t.name, k.name);
    assert_eq!(
        kd.kernarg_size,
        8 * k.nbufs + 4 * k.nvars,
        "{what}: kernarg_size"
    );
    assert_eq!(kd.group_segment_fixed_size, k.lds_bytes, "{what}: LDS");
    assert_eq!(kd.private_segment_fixed_size, 0, "{what}: scratch");
    let props = Kcp::from_bits(kd.kernel_code_properties).unwrap();
    assert_eq!(
        props.contains(Kcp::ENABLE_WAVEFRONT_SIZE32),
        t.generation >= 10,
        "{what}: wave32 {props:?}"
    );
    assert!(
        props.contains(Kcp::ENABLE_SGPR_KERNARG_SEGMENT_PTR),
        "{what}: {props:?}"
    );
    let never = Kcp::ENABLE_SGPR_QUEUE_PTR
        | Kcp::ENABLE_SGPR_DISPATCH_ID
        | Kcp::ENABLE_SGPR_FLAT_SCRATCH_INIT
        | Kcp::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE
        | Kcp::USES_DYNAMIC_STACK;
    assert!(!props.intersects(never), "{what}: {props:?}");
    if t.scratch == ScratchModel::ArchitectedFlatScratch {
        assert!(
            !props.contains(Kcp::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER),
            "{what}: {props:?}"
        );
    }
    // ET_REL: the code offset is the one relocation, to the kernel + 16 (LLVM `AMDGPUUsage.rst`)
    assert_eq!(kd.kernel_code_entry_byte_offset, 0);
    let relas = elf.relocations();
    assert_eq!(relas.len(), 1, "{what}: {relas:?}");
    let r = &relas[0];
    assert_eq!(
        (
            r.target.as_str(),
            r.kind,
            r.symbol.as_str(),
            r.offset,
            r.addend
        ),
        (".rodata", R_AMDGPU_REL64, k.name, kd_sym.value + 16, 16),
        "{what}"
    );
    let undefined: Vec<&str> = elf
        .symbols
        .iter()
        .filter(|s| s.shndx == 0 && !s.name.is_empty())
        .map(|s| s.name.as_str())
        .collect();
    assert!(
        undefined.is_empty(),
        "{what}: undefined symbols {undefined:?}"
    );
    // the AMD runtime's loader: image layout, relocation, the launcher's descriptor checks
    let img = load_code_object(obj, k.name).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(img.e_flags & 0xff, t.elf_mach);
    let lkd = KernelDescriptor::parse(&img.image[img.descriptor..]).unwrap();
    check_descriptor(k.name, &lkd, t, t.lds_max_bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    // the relocated code offset points at the kernel's first instruction, 256-byte aligned
    let code = usize::try_from(img.descriptor as i64 + lkd.kernel_code_entry_byte_offset)
        .unwrap_or_else(|_| panic!("{what}: code before the image"));
    assert_eq!(code % 256, 0, "{what}: code at {code:#x}");
    let text = elf.symbol_bytes(k.name);
    assert_eq!(&img.image[code..code + 8], &text[..8], "{what}");
    kd
}

fn compile_all(t: &'static GfxTarget, llvm: &Arc<Llvm>) {
    let c = AMDCompiler::with_llvm(t, Arc::clone(llvm)).unwrap();
    let r = c.renderer();
    for k in amd_kernels() {
        let ir = r.render(k.name, &k.uops).unwrap();
        let obj = c
            .compile(&ir)
            .unwrap_or_else(|e| panic!("{} {}: {e}\n{ir}", t.name, k.name));
        let kd = check_object(t, &k, &obj);
        let elf = Elf::parse(&obj);
        println!(
            "{} LLVM {} {:<12} kernarg {:>2} lds {:>3} props {:#06x} user_sgprs {:>2} rsrc1 {:#010x} rsrc2 {:#010x} rsrc3 {:#x} abiv {} inputs {:?}",
            t.name,
            llvm.version(),
            k.name,
            kd.kernarg_size,
            kd.group_segment_fixed_size,
            kd.kernel_code_properties,
            kd.user_sgpr_count(),
            kd.compute_pgm_rsrc1,
            kd.compute_pgm_rsrc2,
            kd.compute_pgm_rsrc3,
            elf.abi_version(),
            Kcp::from_bits_truncate(kd.kernel_code_properties)
        );
    }
}

#[test]
fn every_known_target_compiles_every_test_kernel() {
    let llvms = llvms();
    if llvms.is_empty() {
        println!("skipped: no libLLVM found");
        return;
    }
    for llvm in &llvms {
        let major = llvm.version().major;
        for &t in TARGETS.iter() {
            if major < t.min_llvm {
                // confirm the table: this LLVM indeed does not know the processor
                let mach = llvm.amdgpu_mach(t.name).unwrap();
                assert_eq!(
                    mach, 0,
                    "libLLVM-{major} knows {} (mach {mach:#x}) but the table says LLVM >= {}",
                    t.name, t.min_llvm
                );
                println!("skipped {}: libLLVM-{major} does not know it", t.name);
                continue;
            }
            compile_all(t, llvm);
        }
    }
}

/// A compiler on the newest installed LLVM for the newest target it knows.
fn newest_compiler() -> Option<AMDCompiler> {
    let llvm = llvms().into_iter().next()?;
    let t = TARGETS
        .iter()
        .copied()
        .rfind(|t| t.min_llvm <= llvm.version().major)
        .unwrap();
    Some(AMDCompiler::with_llvm(t, llvm).unwrap())
}

#[test]
fn the_optimizer_removes_hidden_arguments() {
    // Without `default<O3>` the kernel would keep implicit inputs on newer LLVMs; with it, the
    // launcher's layout holds. Checked on the newest LLVM for the newest target it knows.
    let Some(c) = newest_compiler() else {
        println!("skipped: no libLLVM found");
        return;
    };
    let k = llvm_common::amd_vars();
    let ir = c.renderer().render(k.name, &k.uops).unwrap();
    let asm = c.disassemble(&ir).unwrap();
    assert!(asm.contains(".amdhsa_kernarg_size 24"), "{asm}");
    assert!(!asm.contains("hidden_"), "{asm}");
}

/// Every ALU op of every dtype (the CPU kernels' cases, as loops) through the AMDGPU flavour and
/// codegen: nothing LLVM cannot select, no library calls left in the object.
#[test]
fn every_alu_op_and_dtype_compiles_for_amd() {
    use rawgrad::codegen::uopgraph::linearize;
    use rawgrad::codegen::uops::UOp;
    use rawgrad::dtype::{dtypes, DType, Scalar};
    use rawgrad::ops::{BinaryOps::*, Op, TernaryOps, UnaryOps};
    for llvm in llvms() {
        for &t in TARGETS
            .iter()
            .filter(|t| t.min_llvm <= llvm.version().major)
        {
            let c = AMDCompiler::with_llvm(t, Arc::clone(&llvm)).unwrap();
            for s in Scalar::ALL {
                let d = DType::new(s);
                let mut ops: Vec<(Op, usize, DType)> = vec![];
                for op in [ADD, MUL, MAX, CMPLT, CMPNE] {
                    let out = if matches!(op, CMPLT | CMPNE) {
                        dtypes::bool
                    } else {
                        d
                    };
                    ops.push((op.into(), 2, out));
                }
                ops.push((UnaryOps::NEG.into(), 1, d));
                if s.is_int() {
                    ops.extend([IDIV, MOD, XOR, SHL, SHR].map(|o| (Op::from(o), 2, d)));
                }
                if s.is_float() {
                    let mut un = vec![UnaryOps::SQRT, UnaryOps::RECIP];
                    if s != Scalar::Float64 {
                        un.extend([UnaryOps::EXP2, UnaryOps::LOG2, UnaryOps::SIN]);
                    }
                    ops.extend(un.into_iter().map(|o| (Op::from(o), 1, d)));
                    ops.push((MOD.into(), 2, d));
                }
                let r = UOp::range_const(0, 16, 1, 0, false);
                let x = UOp::load(&UOp::define_global(d, 100, false), &r, d);
                let y = UOp::load(&UOp::define_global(d, 101, false), &r, d);
                let g = UOp::load(
                    &UOp::define_global(dtypes::bool, 102, false),
                    &r,
                    dtypes::bool,
                );
                let mut sinks = vec![];
                for (i, (op, n, out)) in ops.iter().enumerate() {
                    let srcs = if *n == 1 {
                        vec![x.clone()]
                    } else {
                        vec![x.clone(), y.clone()]
                    };
                    let v = UOp::alu(*op, *out, srcs);
                    sinks.push(UOp::store(&UOp::define_global(*out, i, true), &r, &v));
                }
                let w = UOp::alu(TernaryOps::WHERE, d, vec![g, x.clone(), y]);
                sinks.push(UOp::store(&UOp::define_global(d, ops.len(), true), &r, &w));
                for to in Scalar::ALL {
                    let k = ops.len() + 1 + to as usize;
                    let dt = DType::new(to);
                    sinks.push(UOp::store(
                        &UOp::define_global(dt, k, true),
                        &r,
                        &x.cast(dt),
                    ));
                }
                let uops = linearize(&sinks, None, true).unwrap();
                let name = format!("alu_{}", s.long_name());
                let ir = c.renderer().render(&name, &uops).unwrap();
                let obj = c
                    .compile(&ir)
                    .unwrap_or_else(|e| panic!("{} {name}: {e}", t.name));
                let elf = Elf::parse(&obj);
                let undefined: Vec<&str> = elf
                    .symbols
                    .iter()
                    .filter(|s| s.shndx == 0 && !s.name.is_empty())
                    .map(|s| s.name.as_str())
                    .collect();
                assert!(
                    undefined.is_empty(),
                    "{} {name}: calls {undefined:?}",
                    t.name
                );
            }
        }
    }
}

#[test]
fn a_folded_away_buffer_takes_no_kernarg_slot() {
    // Issue 8: the engine passes a kernel one buffer per DEFINE_GLOBAL, in DEFINE_GLOBAL order
    // (buffer 1 folded away: [data0, data2]); a real launch must find them at kernarg offsets 0
    // and 8. The renderer makes exactly those parameters, in that order, and the compiled
    // descriptor asks for 16 bytes (the kernarg size is checked for every target above).
    let k = llvm_common::amd_folded();
    let order: Vec<usize> = rawgrad::codegen::uopgraph::globals(&k.uops)
        .iter()
        .map(|g| g.0)
        .collect();
    assert_eq!(order, vec![0, 2]);
    let Some(c) = newest_compiler() else {
        println!("skipped: no libLLVM found");
        return;
    };
    let ir = c.renderer().render(k.name, &k.uops).unwrap();
    let sig = ir
        .lines()
        .find(|l| l.starts_with("define amdgpu_kernel"))
        .unwrap_or_else(|| panic!("no kernel in\n{ir}"));
    let (d0, d2) = (sig.find("%data0"), sig.find("%data2"));
    assert!(
        d0.is_some()
            && d2 > d0
            && !sig.contains("%data1")
            && sig.matches("addrspace(1)").count() == 2,
        "{sig}"
    );
    let asm = c.disassemble(&ir).unwrap();
    assert!(asm.contains(".amdhsa_kernarg_size 16"), "{asm}");
}
