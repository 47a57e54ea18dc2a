use super::*;

/// The newest libLLVM, or `None` (with a note) on a machine without one.
fn llvm() -> Option<Arc<Llvm>> {
    match Llvm::load() {
        Ok(l) => Some(l),
        Err(e) => {
            println!("skipped: {e}");
            None
        }
    }
}

const ADD_IR: &str = r#"
define i32 @add3(i32 %a, i32 %b) {
entry:
  %s = add i32 %a, %b
  %t = add i32 %s, 0
  %u = mul i32 %t, 1
  ret i32 %u
}
"#;

#[test]
fn library_names() {
    assert_eq!(parse_library_name("libLLVM-14.so"), Some(14));
    assert_eq!(parse_library_name("libLLVM-14.so.1"), Some(14));
    assert_eq!(parse_library_name("libLLVM-14.0.6.so.1"), Some(14));
    assert_eq!(parse_library_name("libLLVM.so.19.1"), Some(19));
    assert_eq!(parse_library_name("libLLVM.so.18"), Some(18));
    assert_eq!(parse_library_name("libLLVM.so"), None);
    assert_eq!(parse_library_name("libLLVMX86CodeGen.a"), None);
    assert_eq!(parse_library_name("libLLVM-14.a"), None);
    assert_eq!(parse_library_name("libLLVM-C.so"), None);
}

#[test]
fn triples_map_to_targets() {
    assert_eq!(target_for_triple("amdgcn-amd-amdhsa").unwrap(), "AMDGPU");
    assert_eq!(target_for_triple("x86_64-pc-linux-gnu").unwrap(), "X86");
    assert_eq!(target_for_triple("nvptx64-nvidia-cuda").unwrap(), "NVPTX");
    let e = target_for_triple("mips-unknown-linux").unwrap_err();
    assert!(e.message().contains("mips"), "{e}");
}

#[test]
fn a_library_lacking_a_target_is_refused_naming_the_missing_initializer() {
    let targets = vec![
        ("X86", Some("LLVMInitializeX86AsmPrinter".to_string())),
        ("AMDGPU", None),
    ];
    let e = check_registered(&targets, "x86_64-pc-linux-gnu", "libLLVM-x.so").unwrap_err();
    assert!(
        matches!(&e, Error::Compile(m) if m.contains("libLLVM-x.so lacks the X86 target")
            && m.contains("LLVMInitializeX86AsmPrinter is missing")),
        "{e}"
    );
    check_registered(&targets, "amdgcn-amd-amdhsa", "libLLVM-x.so").unwrap();
    let e = check_registered(&targets, "nvptx64-nvidia-cuda", "libLLVM-x.so").unwrap_err();
    assert!(e.message().contains("NVPTX"), "{e}");
}

#[test]
fn check_target_accepts_the_host_and_refuses_an_unknown_triple() {
    let Some(l) = llvm() else { return };
    let host = CompileOptions::new(&l.host_triple(), &l.host_cpu(), &l.host_features(), false);
    l.check_target(&host).unwrap();
    let mips = CompileOptions::new("mips-unknown-linux", "", "", false);
    let e = l.check_target(&mips).unwrap_err();
    assert!(e.message().contains("mips"), "{e}");
}

#[test]
fn compiles_host_object_assembly_and_optimized_ir() {
    let Some(llvm) = llvm() else { return };
    assert!(llvm.version().major >= MIN_LLVM_MAJOR, "{llvm:?}");
    let triple = llvm.host_triple();
    assert!(triple.contains("linux"), "{triple}");
    let obj = llvm.compile_ir(ADD_IR, &triple, "", "", true).unwrap();
    assert!(obj.starts_with(b"\x7fELF"));
    if triple.starts_with("x86_64") {
        assert_eq!(u16::from_le_bytes([obj[18], obj[19]]), 62, "EM_X86_64");
    }
    let opts = CompileOptions::new(&triple, &llvm.host_cpu(), &llvm.host_features(), true);
    let asm = String::from_utf8(llvm.compile(ADD_IR, &opts, Emit::Assembly).unwrap()).unwrap();
    assert!(asm.contains("add3:"), "{asm}");
    let ir = String::from_utf8(llvm.compile(ADD_IR, &opts, Emit::Ir).unwrap()).unwrap();
    // default<O3> folded the identities away: one add remains.
    assert_eq!(ir.matches(" add ").count(), 1, "{ir}");
    assert!(!ir.contains(" mul "), "{ir}");
    let raw = CompileOptions {
        passes: None,
        ..opts
    };
    let ir = String::from_utf8(llvm.compile(ADD_IR, &raw, Emit::Ir).unwrap()).unwrap();
    assert!(
        ir.contains(" mul "),
        "without passes the IR is unchanged:\n{ir}"
    );
}

#[test]
fn errors_name_the_stage() {
    let Some(llvm) = llvm() else { return };
    let triple = llvm.host_triple();
    let e = llvm
        .compile_ir("define i32 @f( {", &triple, "", "", true)
        .unwrap_err();
    assert!(e.message().contains("could not parse"), "{e}");
    // parses, but %y is used before it is defined: the verifier refuses it
    let bad =
        "define i32 @f(i32 %a) {\n  %x = add i32 %y, 1\n  %y = add i32 %a, 1\n  ret i32 %x\n}\n";
    let e = llvm.compile_ir(bad, &triple, "", "", true).unwrap_err();
    assert!(e.message().contains("verifier"), "{e}");
    let e = llvm
        .compile_ir(ADD_IR, "sparc-sun-solaris", "", "", true)
        .unwrap_err();
    assert!(e.message().contains("sparc"), "{e}");
    let e = llvm
        .compile_ir(ADD_IR, &triple, "", "", true)
        .and_then(|_| llvm.compile_ir("x\0y", &triple, "", "", true));
    assert!(e.is_err());
    let opts = CompileOptions {
        passes: Some("no-such-pass".into()),
        ..CompileOptions::new(&triple, "", "", true)
    };
    let e = llvm.compile(ADD_IR, &opts, Emit::Object).unwrap_err();
    assert!(e.message().contains("no-such-pass"), "{e}");
}

#[test]
fn codegen_errors_are_reported_not_fatal() {
    let Some(llvm) = llvm() else { return };
    // 128 KiB of LDS exceeds every AMD GPU's limit: LLVM reports a diagnostic error, which
    // without rawgrad's handler would exit the process.
    let ir = r#"
@lds = internal unnamed_addr addrspace(3) global [32768 x float] undef, align 16
define amdgpu_kernel void @big(float addrspace(1)* %out) {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %j = xor i32 %i, 1
  %p = getelementptr inbounds [32768 x float], [32768 x float] addrspace(3)* @lds, i32 0, i32 %i
  store float 1.0, float addrspace(3)* %p
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %q = getelementptr inbounds [32768 x float], [32768 x float] addrspace(3)* @lds, i32 0, i32 %j
  %v = load float, float addrspace(3)* %q
  store float %v, float addrspace(1)* %out
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
"#;
    let ir = if llvm.opaque_pointers() {
        ir.replace("float addrspace(1)*", "ptr addrspace(1)")
            .replace("[32768 x float] addrspace(3)*", "ptr addrspace(3)")
            .replace("float addrspace(3)*", "ptr addrspace(3)")
    } else {
        ir.to_string()
    };
    match llvm.compile_ir(&ir, AMDGPU_TRIPLE, "gfx1030", "", true) {
        Ok(obj) => panic!("128 KiB of LDS compiled ({} bytes)", obj.len()),
        Err(e) => assert!(e.message().contains("local memory"), "{e}"),
    }
}

#[test]
fn amdgpu_processors_are_probed() {
    let Some(llvm) = llvm() else { return };
    assert_eq!(llvm.amdgpu_mach("gfx1030").unwrap(), 0x36);
    assert_eq!(llvm.amdgpu_mach("gfx90a").unwrap(), 0x3F);
    assert_eq!(llvm.amdgpu_mach("gfx9999").unwrap(), 0);
    let known = llvm.targets_known(&["gfx1030", "gfx9999"]).unwrap();
    assert_eq!(known, vec!["gfx1030".to_string()]);
}

#[test]
fn every_installed_version_loads_side_by_side() {
    let libs = find_libraries();
    let mut majors = vec![];
    for l in &libs {
        if l.major < MIN_LLVM_MAJOR || majors.contains(&l.major) {
            continue;
        }
        let llvm = Llvm::open(&l.path).unwrap();
        assert_eq!(llvm.version().major, l.major, "{}", l.path.display());
        let triple = llvm.host_triple();
        let obj = llvm.compile_ir(ADD_IR, &triple, "", "", true).unwrap();
        assert!(obj.starts_with(b"\x7fELF"));
        // loading the same file again returns the same instance
        assert!(Arc::ptr_eq(&llvm, &Llvm::open(&l.path).unwrap()));
        majors.push(l.major);
        println!("libLLVM {} at {}", llvm.version(), l.path.display());
    }
    if majors.is_empty() {
        println!("skipped: no libLLVM found");
    }
}

#[test]
fn elf_flags_need_an_elf() {
    assert!(elf_e_flags(b"not an elf").is_err());
    let mut fake = vec![0u8; 64];
    fake[..6].copy_from_slice(b"\x7fELF\x02\x01");
    fake[48] = 0x41;
    assert_eq!(elf_e_flags(&fake).unwrap(), 0x41);
}

#[test]
fn compiles_from_many_threads_at_once() {
    let Some(llvm) = llvm() else { return };
    let triple = llvm.host_triple();
    let probe = "define amdgpu_kernel void @k() {\n  ret void\n}\n";
    std::thread::scope(|s| {
        for i in 0..4 {
            let (llvm, triple) = (&llvm, &triple);
            s.spawn(move || {
                for _ in 0..5 {
                    if i % 2 == 0 {
                        llvm.compile_ir(ADD_IR, triple, "", "", true).unwrap();
                    } else {
                        let obj = llvm.compile_ir(probe, AMDGPU_TRIPLE, "gfx1030", "", true);
                        assert_eq!(elf_e_flags(&obj.unwrap()).unwrap() & 0xff, 0x36);
                    }
                }
            });
        }
    });
}
