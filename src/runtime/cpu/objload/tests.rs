use super::*;
use crate::ffi::llvm::{find_libraries, CompileOptions, Emit, Llvm};
use crate::runtime::cpu::llvm::libcalls;

/// Every installed libLLVM, one per major version.
fn llvms() -> Vec<Arc<Llvm>> {
    let mut out: Vec<Arc<Llvm>> = vec![];
    for l in find_libraries() {
        if out.iter().all(|x| x.version().major != l.major) {
            if let Ok(x) = Llvm::open(&l.path) {
                out.push(x);
            }
        }
    }
    if out.is_empty() {
        println!("skipped: no libLLVM");
    }
    out
}

/// Calls libm (stub), reads float constants (constant pool) and stores the address of an
/// external function (GOT slot under PIC): `out[0] = exp2f(in[0]) * 3.25 + 0.125`,
/// `out[1] = (address of exp2f != 0)`.
fn kernel_ir(opaque: bool) -> String {
    let (pp, pf, p) = if opaque {
        ("ptr", "ptr", "ptr")
    } else {
        ("i8**", "float*", "i8*")
    };
    let cast = |v: &str, from: &str, to: &str| {
        if opaque {
            String::new()
        } else {
            format!("  {v} = bitcast {from} {v}.r to {to}\n")
        }
    };
    let name = |v: &str| {
        if opaque {
            v.to_string()
        } else {
            format!("{v}.r")
        }
    };
    format!(
        r#"
declare float @exp2f(float)
define void @k_rg({pp} %bufs, i32* %vals, i32 %core, i32 %ncores) {{
entry:
  {o} = load {p}, {pp} %bufs
  %q = getelementptr {p}, {pp} %bufs, i64 1
  {i} = load {p}, {pp} %q
{co}{ci}  %x = load float, {pf} %i
  %e = call float @exp2f(float %x)
  %m = fmul float %e, 3.25
  %s = fadd float %m, 0.125
  store float %s, {pf} %o
  %a = ptrtoint float (float)* @exp2f to i64
  %nz = icmp ne i64 %a, 0
  %f = uitofp i1 %nz to float
  %o1 = getelementptr float, {pf} %o, i64 1
  store float %f, {pf} %o1
  ret void
}}
"#,
        o = name("%o"),
        i = name("%i"),
        co = cast("%o", p, pf),
        ci = cast("%i", p, pf),
    )
    .replace(
        "float (float)* @exp2f",
        if opaque {
            "ptr @exp2f"
        } else {
            "float (float)* @exp2f"
        },
    )
    .replace(
        "i32* %vals",
        if opaque { "ptr %vals" } else { "i32* %vals" },
    )
}

fn object(llvm: &Llvm, triple: &str, cpu: &str) -> Vec<u8> {
    let mut opts = CompileOptions::new(triple, cpu, "", false);
    opts.codegen_level = 2;
    let ir = kernel_ir(llvm.opaque_pointers());
    llvm.compile(&ir, &opts, Emit::Object)
        .unwrap_or_else(|e| panic!("{e}\n{ir}"))
}

#[test]
fn x86_object_with_stub_constants_and_got_runs() {
    if Arch::host() != Some(Arch::X86_64) {
        return println!("skipped: not an x86-64 host");
    }
    for llvm in llvms() {
        let obj = object(&llvm, "x86_64-unknown-linux-gnu", "x86-64");
        let plan = Plan::new(&obj).unwrap();
        assert_eq!(plan.externals(), vec!["exp2f"]);
        assert_eq!(plan.stubs.len(), 1, "the call to exp2f goes through a stub");
        assert_eq!(plan.got.len(), 1, "&exp2f is read from a GOT slot (PIC)");
        assert!(plan.exec_end > 0 && plan.ro_end > plan.exec_end);
        let major = llvm.version().major;
        let k = load(&obj, "k_rg", &|s| libcalls::resolve(major, s)).unwrap();
        let x: f32 = 1.5;
        let mut out = [0f32; 2];
        let hm_in = crate::driver::hostmem::HostMemory::new(4).unwrap();
        let hm_out = crate::driver::hostmem::HostMemory::new(8).unwrap();
        hm_in.write(0, &x.to_le_bytes()).unwrap();
        k.call(&[hm_out.addr(), hm_in.addr()], &[], 0, 1).unwrap();
        let mut b = [0u8; 8];
        hm_out.read(0, &mut b).unwrap();
        out[0] = f32::from_le_bytes(b[..4].try_into().unwrap());
        out[1] = f32::from_le_bytes(b[4..].try_into().unwrap());
        assert_eq!(
            out,
            [x.exp2() * 3.25 + 0.125, 1.0],
            "LLVM {}",
            llvm.version()
        );
    }
}

fn decode_adrp(insn: u32, p: u64) -> u64 {
    assert_eq!(insn & 0x9f00_0000, 0x9000_0000, "adrp {insn:#010x}");
    let imm = (((insn >> 5) & 0x7ffff) << 2 | ((insn >> 29) & 3)) as i64;
    let imm = (imm << 43) >> 43; // sign-extend 21 bits
    ((p & !0xfff) as i64 + (imm << 12)) as u64
}

/// AArch64 objects are relocated (not run: no AArch64 machine here) and every patched field is
/// decoded back: ADRP pages, low-12 offsets, the BL to the stub and the stub's target.
#[test]
fn aarch64_relocations_decode_to_their_targets() {
    const BASE: u64 = 0x7f12_3456_0000;
    const EXP2F: u64 = 0x7fab_cdef_1230;
    for llvm in llvms() {
        let obj = object(&llvm, "aarch64-unknown-linux-gnu", "generic");
        let plan = Plan::new(&obj).unwrap();
        assert_eq!(plan.arch, Arch::AArch64);
        let mut image = vec![0u8; plan.len];
        link(&plan, &mut image, BASE, &|s| {
            (s == "exp2f").then_some(EXP2F)
        })
        .unwrap();
        let word = |at: usize| u32::from_le_bytes(image[at..at + 4].try_into().unwrap());
        let stub = *plan.stubs.values().next().expect("a stub for exp2f");
        assert_eq!(word(stub), 0x5800_0050);
        assert_eq!(word(stub + 4), 0xd61f_0200);
        assert_eq!(
            u64::from_le_bytes(image[stub + 8..stub + 16].try_into().unwrap()),
            EXP2F
        );
        let mut seen = std::collections::HashSet::new();
        for (target, rs) in &plan.relocs {
            let sec_at = plan.placed[*target].unwrap();
            for r in rs {
                let at = sec_at + r.offset as usize;
                let p = BASE + at as u64;
                let sym = plan.address(r.sym, BASE, &|_| Some(EXP2F)).unwrap();
                let want = (sym as i64 + r.addend) as u64;
                let insn = word(at);
                seen.insert(r.ty);
                match r.ty {
                    r::AARCH64_CALL26 => {
                        let imm = ((insn & 0x3ff_ffff) as i64) << 38 >> 36;
                        assert_eq!(
                            (p as i64 + imm) as u64,
                            BASE + stub as u64,
                            "bl to the stub"
                        );
                    }
                    r::AARCH64_ADR_PREL_PG_HI21 => assert_eq!(decode_adrp(insn, p), want & !0xfff),
                    r::AARCH64_ADR_GOT_PAGE => {
                        let slot = BASE + plan.got[&r.sym] as u64;
                        assert_eq!(decode_adrp(insn, p), slot & !0xfff);
                        let got = plan.got[&r.sym];
                        assert_eq!(
                            u64::from_le_bytes(image[got..got + 8].try_into().unwrap()),
                            EXP2F
                        );
                    }
                    r::AARCH64_LD64_GOT_LO12_NC => {
                        let slot = BASE + plan.got[&r.sym] as u64;
                        assert_eq!(u64::from((insn >> 10) & 0xfff) << 3, slot & 0xfff);
                    }
                    r::AARCH64_ADD_ABS_LO12_NC => {
                        assert_eq!(u64::from((insn >> 10) & 0xfff), want & 0xfff)
                    }
                    r::AARCH64_LDST32_ABS_LO12_NC => {
                        assert_eq!(u64::from((insn >> 10) & 0xfff) << 2, want & 0xfff)
                    }
                    r::AARCH64_LDST64_ABS_LO12_NC => {
                        assert_eq!(u64::from((insn >> 10) & 0xfff) << 3, want & 0xfff)
                    }
                    _ => {}
                }
            }
        }
        assert!(seen.contains(&r::AARCH64_CALL26), "{seen:?}");
        assert!(seen.contains(&r::AARCH64_ADR_GOT_PAGE), "{seen:?}");
    }
}

#[test]
fn refusals_name_what_is_wrong() {
    let Some(llvm) = llvms().into_iter().next() else {
        return;
    };
    let obj = object(&llvm, "x86_64-unknown-linux-gnu", "x86-64");
    // An external the resolver does not know.
    let plan = Plan::new(&obj).unwrap();
    let mut image = vec![0u8; plan.len];
    let e = link(&plan, &mut image, 0x1000_0000, &|_| None).unwrap_err();
    assert!(e.message().contains("exp2f"), "{e}");
    // An unsupported relocation type: rewrite every x86 PLT32 (4) to GOTOFF64 (25).
    let mut bad = obj.clone();
    let elf = Elf::parse(&obj).unwrap();
    for s in elf.sections.iter().filter(|s| s.sh_type == SHT_RELA) {
        for i in 0..(s.size / 24) as usize {
            let ty_at = s.offset as usize + 24 * i + 8;
            if bad[ty_at] == 4 {
                bad[ty_at] = 25;
            }
        }
    }
    let plan = Plan::new(&bad).unwrap();
    let mut image = vec![0u8; plan.len];
    let e = link(&plan, &mut image, 0x1000_0000, &|_| Some(0x1234)).unwrap_err();
    assert!(e.message().contains("relocation type 25"), "{e}");
    // Not a relocatable object, not an ELF, a missing entry.
    let mut exe = obj.clone();
    exe[16] = 2;
    assert!(Plan::new(&exe).unwrap_err().message().contains("ET_REL"));
    assert!(Plan::new(b"not an elf").is_err());
    let e = Plan::new(&obj).unwrap().function("nope_rg").unwrap_err();
    assert!(e.message().contains("nope_rg"), "{e}");
    // A PC32 value out of range: the image far from the constants it would need to reach.
    let e = fit(1 << 40, 32, true, &|| "test".into()).unwrap_err();
    assert!(e.message().contains("does not fit 32 bits"), "{e}");
}
