use super::*;
use crate::ffi::llvm::find_libraries;
use crate::hw::amd::targets::{GFX1030, GFX1100, GFX90A};

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
