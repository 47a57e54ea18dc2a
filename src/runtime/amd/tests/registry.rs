//! The `AMD` family through the device registry (`MOCKGPU=1`): allocator, renderer, compiler,
//! runtime and program of `AMD:1` working together; the real-hardware compiler slot says it is
//! not wired in yet.

use super::*;
use crate::helpers::Context;
use crate::hw::amd::targets::GFX1100;
use crate::mockgpu::amdgpu::compiler::{amd_mock_code, AmdMockCode, UnavailableAmdCompiler};

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
    match amd_mock_code().unwrap() {
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
