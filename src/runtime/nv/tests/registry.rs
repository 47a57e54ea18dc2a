//! The `NV` family through the device registry (`MOCKGPU=1`): allocator, renderer, compiler,
//! runtime and program of `NV:1` working together; the real device's compiler slot says why no
//! NVIDIA compiler is available.

use super::*;
use crate::dtype::dtypes;
use crate::helpers::Context;
use crate::mockgpu::nvgpu::cubin::MockCode;
use crate::runtime::builtin::open_device;
use crate::runtime::nv::compiler::UnavailableNvCompiler;
use crate::Error;

#[test]
fn registry_opens_nv_under_mockgpu_and_runs_a_kernel() {
    let _g = Context::new(&[("MOCKGPU", 1), ("MOCKGPU_NV_COUNT", 2)]);
    let dev = open_device("nv:1").unwrap();
    assert_eq!(dev.name, "NV:1");
    assert_eq!(dev.renderer.opts().local_max, Some([1024, 1024, 64]));
    assert_eq!(dev.renderer.opts().shared_max, 48 * 1024);
    let uops = add_uops(2, 8, dtypes::float32);
    let src = dev.renderer.render("E_reg", &uops).unwrap();
    match crate::mockgpu::nvgpu::compiler::mock_code().unwrap() {
        MockCode::Uops => assert!(src.starts_with("//! rawgrad-nv-mock E_reg\n"), "{src}"),
        MockCode::Ptx => assert!(src.contains("define ptx_kernel void @E_reg("), "{src}"),
    }
    let lib = dev.compiler.compile(&src).unwrap();
    assert_eq!(&lib[..4], b"\x7fELF");
    let prg = dev.runtime.load("E_reg", &lib).unwrap();
    let a = &dev.allocator;
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(64, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[0.25; 16])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[0.5; 16])).unwrap();
    prg.call(&bufs, &[], Some([2, 1, 1]), Some([8, 1, 1]), false)
        .unwrap();
    let mut out = vec![0u8; 64];
    a.copyout(&mut out, &bufs[0]).unwrap();
    assert_eq!(f32s(&out), vec![0.75f32; 16]);
    dev.synchronize().unwrap();
}

#[test]
fn unavailable_compiler_slot_reports_why() {
    let e = UnavailableNvCompiler::new(90, "no ptxas found".into())
        .compile("x")
        .unwrap_err();
    assert!(
        matches!(&e, Error::Compile(m) if m.contains("no ptxas found") && m.contains("sm_90")),
        "{e}"
    );
}
