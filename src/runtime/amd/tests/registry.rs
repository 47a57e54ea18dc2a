//! The `AMD` family through the device registry (`MOCKGPU=1`): allocator, renderer, compiler,
//! runtime and program of `AMD:1` working together; which code the emulated device runs
//! (`MOCKGPU_CODE`) and the compiler slot that says why a compiler is missing.

use super::*;
use crate::helpers::Context;
use crate::hw::amd::targets::lookup_name;
use crate::hw::amd::targets::GFX1030;
use crate::hw::amd::targets::GFX1100;
use crate::mockgpu::amdgpu::compiler::{
    amd_mock_code, isa_unavailable, parse_amd_mock_code, AmdMockCode, UnavailableAmdCompiler,
};
use crate::runtime::builtin::amd_toolchain;

use crate::runtime::builtin::open_device;
use crate::Error;

#[test]
fn registry_opens_amd_under_mockgpu_and_runs_a_kernel() {
    let _g = Context::new(&[("MOCKGPU", 1), ("MOCKGPU_COUNT", 2)]);
    let dev = open_device("amd:1").unwrap();
    assert_eq!(dev.name, "AMD:1");
    assert_eq!(dev.renderer.opts().local_max, Some([1024, 1024, 1024]));
    assert_eq!(
        dev.renderer.opts().global_max,
        Some([(1 << 31) - 1, 65535, 65535])
    );
    let uops = add_uops(2, 8, dtypes::float32);
    let src = dev.renderer.render("E_reg", &uops).unwrap();
    // the emulated chip is MOCKGPU_ARCH's (gfx1100 unless set): gfx11 runs ISA, others UOps
    let target = lookup_name(&EmuConfig::from_env().arch).unwrap();
    match amd_mock_code(target).unwrap() {
        AmdMockCode::Uops => assert!(
            src.starts_with("//! rawgrad-amd-mock E_reg\nrawgrad-uops v1"),
            "{src}"
        ),
        AmdMockCode::Isa => assert!(src.contains("define amdgpu_kernel void @E_reg("), "{src}"),
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
    assert!(open_device("AMD:2").is_err(), "only two emulated GPUs");
}

#[test]
fn unavailable_compiler_slot_reports_why() {
    let e = UnavailableAmdCompiler::new(&GFX1100, "no libLLVM found".into())
        .compile("x")
        .unwrap_err();
    assert!(
        matches!(&e, Error::Compile(m) if m.contains("no libLLVM found") && m.contains("gfx1100")),
        "{e}"
    );
}

#[test]
fn visible_devices_selects_and_orders_gpus() {
    let emu = crate::mockgpu::amdgpu::attach::mock_driver(EmuConfig {
        count: 3,
        ..Default::default()
    })
    .unwrap();
    let ids = emu.gpu_ids();
    let drv: Arc<dyn crate::driver::Driver> = Arc::new(emu);
    let _g = Context::with_str(&[("VISIBLE_DEVICES", "2,0")]);
    let p = AmdProcess::new(drv.clone()).unwrap();
    let got: Vec<u32> = p.nodes().iter().map(|n| n.gpu_id).collect();
    assert_eq!(got, vec![ids[2], ids[0]], "AMD:0 is the third GPU");
    let dev = open(&p, 0);
    assert_eq!(dev.backend().gpu_id(), ids[2]);
    assert!(p.node(2).is_err());
    drop(_g);
    let _g = Context::with_str(&[("HIP_VISIBLE_DEVICES", "5")]);
    let e = AmdProcess::new(drv).err().unwrap();
    assert!(e.message().contains("VISIBLE_DEVICES names GPU 5"), "{e}");
}

#[test]
fn mockgpu_code_defaults_to_the_real_code_on_gfx11() {
    use AmdMockCode::{Isa, Uops};
    for (value, want) in [
        (None, Isa),
        (Some(""), Isa),
        (Some(" isa "), Isa),
        (Some("real"), Isa),
        (Some("ptx"), Isa),
        (Some("uops"), Uops),
    ] {
        assert_eq!(
            parse_amd_mock_code(value, &GFX1100).unwrap(),
            want,
            "{value:?}"
        );
    }
    // the RDNA3 interpreter runs gfx11 only: gfx1030 defaults to UOps and refuses `isa`
    assert_eq!(parse_amd_mock_code(None, &GFX1030).unwrap(), Uops);
    assert_eq!(parse_amd_mock_code(Some("uops"), &GFX1030).unwrap(), Uops);
    let e = parse_amd_mock_code(Some("isa"), &GFX1030).unwrap_err();
    assert!(
        e.message().contains("gfx1030 runs UOps only") && e.message().contains("MOCKGPU_CODE=uops"),
        "{e}"
    );
    let e = parse_amd_mock_code(Some("sass"), &GFX1100).unwrap_err();
    assert!(e.message().contains("MOCKGPU_CODE=\"sass\""), "{e}");
}

#[test]
fn missing_gfx11_libllvm_message_names_it_and_both_ways_out() {
    let why = "no libLLVM 15 or newer; found: libLLVM 14 (/usr/lib/llvm-14/lib/libLLVM-14.so.1)";
    let e = UnavailableAmdCompiler::on_emulator(&GFX1100, isa_unavailable(&GFX1100, why))
        .compile("x")
        .unwrap_err();
    let m = e.message();
    for part in [
        why,
        "libLLVM-15.so.1",
        "Set LLVM_LIB",
        "MOCKGPU_CODE=uops",
        "gfx1100",
    ] {
        assert!(m.contains(part), "{part:?} missing: {m}");
    }
    assert!(!m.contains("set MOCKGPU=1"), "{m}");
}

/// An emulated gfx1100 whose only libLLVM is too old (injected through `LLVM_LIB`, so the test
/// does not depend on what is installed): every compile fails naming the library and both ways
/// out, never falling back to UOps; `MOCKGPU_CODE=uops` is the explicit way to the UOps.
#[test]
fn emulated_gfx11_without_a_gfx11_libllvm_fails_every_compile() {
    let old = "/nonexistent/rawgrad-test/libLLVM-14.so.1";
    let _k = Context::with_str(&[("MOCKGPU_CODE", ""), ("LLVM_LIB", old)]);
    let (dev, _emu) = one_gpu();
    let tc = amd_toolchain(&dev);
    let uops = add_uops(2, 8, dtypes::float32);
    let src = tc.renderer.render("E_reg", &uops).unwrap();
    let e = tc.compiler.compile(&src).unwrap_err();
    let m = e.message();
    for part in [
        "no libLLVM 15 or newer",
        &format!("libLLVM 14 ({old})"),
        "Set LLVM_LIB",
        "MOCKGPU_CODE=uops",
    ] {
        assert!(m.contains(part), "{part:?} missing: {m}");
    }
    let _u = Context::with_str(&[("MOCKGPU_CODE", "uops")]);
    let tc = amd_toolchain(&dev);
    let src = tc.renderer.render("E_reg", &uops).unwrap();
    assert!(src.starts_with("//! rawgrad-amd-mock E_reg\n"), "{src}");
    assert_eq!(&tc.compiler.compile(&src).unwrap()[..4], b"\x7fELF");
}
