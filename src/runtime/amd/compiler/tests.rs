use super::*;
use crate::ffi::llvm::{find_libraries, LlvmLibrary};
use crate::hw::amd::targets::{GFX1030, GFX1100, GFX90A};
use std::path::PathBuf;

/// Every installed libLLVM (newest first).
fn all_llvms() -> Vec<Arc<Llvm>> {
    let mut out: Vec<Arc<Llvm>> = vec![];
    for l in find_libraries() {
        if let Ok(llvm) = Llvm::open(&l.path) {
            if !out
                .iter()
                .any(|o| o.version().major == llvm.version().major)
            {
                out.push(llvm);
            }
        }
    }
    out
}

const COPY_IR_OPAQUE: &str = r#"
define amdgpu_kernel void @copy(ptr addrspace(1) noalias align 32 %data0, ptr addrspace(1) noalias align 32 %data1) #0 {
entry:
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %p = getelementptr inbounds float, ptr addrspace(1) %data1, i32 %g
  %v = load float, ptr addrspace(1) %p, align 4
  %q = getelementptr inbounds float, ptr addrspace(1) %data0, i32 %g
  store float %v, ptr addrspace(1) %q, align 4
  ret void
}
declare i32 @llvm.amdgcn.workgroup.id.x()
attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1" }
"#;

fn copy_ir(llvm: &Llvm) -> String {
    if llvm.opaque_pointers() {
        COPY_IR_OPAQUE.to_string()
    } else {
        COPY_IR_OPAQUE.replace("ptr addrspace(1)", "float addrspace(1)*")
    }
}

#[test]
fn features_follow_the_generation() {
    assert_eq!(target_features(&GFX90A), "");
    assert_eq!(target_features(&GFX1030), "+cumode,+wavefrontsize32");
    assert_eq!(target_features(&GFX1100), "+cumode,+wavefrontsize32");
}

#[test]
fn compiles_and_checks_the_processor() {
    let llvms = all_llvms();
    if llvms.is_empty() {
        println!("skipped: no libLLVM found");
    }
    for llvm in llvms {
        let c = AMDCompiler::with_llvm(&GFX1030, Arc::clone(&llvm)).unwrap();
        let key = c.cache_key().unwrap();
        assert!(
            key.contains("gfx1030") && key.contains(&llvm.version().to_string()),
            "{key}"
        );
        let obj = c.compile(&copy_ir(&llvm)).unwrap();
        assert_eq!(u16::from_le_bytes([obj[18], obj[19]]), 224, "EM_AMDGPU");
        assert_eq!(u16::from_le_bytes([obj[16], obj[17]]), 1, "ET_REL");
        assert_eq!(elf_e_flags(&obj).unwrap() & 0xff, 0x36);
        let asm = c.disassemble(&copy_ir(&llvm)).unwrap();
        assert!(asm.contains("global_store_dword"), "{asm}");
        // the same object checked against another target's table entry is refused
        let e = check_mach(&obj, &GFX1100, &llvm).unwrap_err();
        assert!(e.message().contains("the target table says 0x41"), "{e}");
        let mut unknown = obj.clone();
        unknown[48] = 0;
        let e = check_mach(&unknown, &GFX1030, &llvm).unwrap_err();
        assert!(e.message().contains("does not know gfx1030"), "{e}");
    }
}

#[test]
fn too_old_llvm_is_refused_by_name() {
    for llvm in all_llvms() {
        let r = AMDCompiler::with_llvm(&GFX1100, Arc::clone(&llvm));
        if llvm.version().major >= GFX1100.min_llvm {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err();
            assert!(
                e.message().contains("too old") && e.message().contains("llvm-15"),
                "{e}"
            );
        }
    }
}

fn lib(major: u32, path: &str) -> LlvmLibrary {
    LlvmLibrary {
        path: PathBuf::from(path),
        major,
    }
}

/// The lookup on injected libraries (newest first, as `find_libraries_also_in` lists them): the
/// first that knows the processor, else an error naming what is needed, found and searched.
#[test]
fn pick_llvm_takes_the_newest_that_knows_the_target() {
    let v19 = lib(19, "/usr/lib/llvm-19/lib/libLLVM.so.19.1");
    let v15 = lib(
        15,
        "/tmp/rawgrad-llvm15/root/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
    );
    let v14 = lib(14, "/usr/lib/llvm-14/lib/libLLVM-14.so.1");
    let all = [v19.clone(), v15.clone(), v14.clone()];
    assert_eq!(pick_llvm(&GFX1100, &all, None).unwrap(), &v19);
    let ci = [v15.clone(), v14.clone()];
    assert_eq!(pick_llvm(&GFX1100, &ci, None).unwrap(), &v15);
    // gfx1030 is known from LLVM 14 on: the default library serves it
    assert_eq!(
        pick_llvm(&GFX1030, std::slice::from_ref(&v14), None).unwrap(),
        &v14
    );
    // a name without a version (only under LLVM_LIB) is tried, its loaded version checked later
    let unnamed = lib(0, "/opt/llvm/libLLVM.so");
    assert_eq!(
        pick_llvm(
            &GFX1100,
            std::slice::from_ref(&unnamed),
            Some("/opt/llvm/libLLVM.so")
        )
        .unwrap(),
        &unnamed
    );
    let e = pick_llvm(&GFX1100, std::slice::from_ref(&v14), None).unwrap_err();
    let m = e.message();
    for part in [
        "gfx1100",
        "no libLLVM 15 or newer",
        "libLLVM 14 (/usr/lib/llvm-14/lib/libLLVM-14.so.1)",
        "rawgrad-llvm15",
        "LLVM_LIB",
    ] {
        assert!(m.contains(part), "{part:?} missing: {m}");
    }
    let e = pick_llvm(&GFX1100, &[v14], Some("/usr/lib/llvm-14/lib")).unwrap_err();
    assert!(
        e.message()
            .contains("looked in LLVM_LIB=\"/usr/lib/llvm-14/lib\""),
        "{e}"
    );
    let e = pick_llvm(&GFX1100, &[], None).unwrap_err();
    assert!(e.message().contains("found: none"), "{e}");
}

#[test]
fn ci_llvm_dir_is_where_ci_unpacks_libllvm15() {
    let d = ci_llvm_dir();
    let arch = format!("{}-linux-gnu", std::env::consts::ARCH);
    assert!(d.starts_with(std::env::temp_dir()), "{}", d.display());
    assert!(
        d.ends_with(PathBuf::from("rawgrad-llvm15/root/usr/lib").join(arch)),
        "{}",
        d.display()
    );
}
