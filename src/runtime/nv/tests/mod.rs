//! NV backend tests through the emulated RM/UVM with the software NV GPU (`mockgpu`): bring-up,
//! copies, kernels, waits, the timeline wrap, faults, golden pushbuffer streams, registration.
//! Every test opens its own emulated driver, so they run in parallel threads; waits meant to fail
//! use a short `HCQDEV_WAIT_TIMEOUT_MS` (a hang guard, not a timing threshold).

mod bound;
mod bringup;
mod copies;
mod driver_facts;
mod faults;
mod golden;
mod hand_goldens;
mod injected;
mod kernels;
mod multigraph;
mod profile;
mod registry;
mod softgpu;

use std::sync::Arc;

use super::{open_nv_device, NvDevice, NvProcess, NvRuntime};
use crate::codegen::uops::UOp;
use crate::device::{Allocator, BufferOptions, Compiler, Program, RawBuf, Runtime};
use crate::hcq::HcqAllocator;
use crate::mockgpu::nvgpu::attach::mock_driver;
use crate::mockgpu::nvgpu::compiler::{MockNvCompiler, MockNvRenderer};
use crate::mockgpu::{EmuConfig, EmuDriver};
use crate::renderer::Renderer;

pub(crate) use crate::runtime::amd::tests::{add_uops, axpb_uops, f32_bytes, f32s};

/// An emulated NV process with `count` GPUs of `arch` on driver `driver`.
pub(crate) fn mock_nv(count: usize, arch: &str, driver: &str) -> (Arc<NvProcess>, EmuDriver) {
    let mut cfg = EmuConfig {
        count: 1,
        nv_count: count,
        nv_arch: arch.into(),
        ..Default::default()
    };
    if !driver.is_empty() {
        cfg.nv_driver = driver.into();
    }
    let emu = mock_driver(cfg).unwrap();
    let proc = NvProcess::new(Arc::new(emu.clone())).unwrap();
    (proc, emu)
}

/// `NV:i` of `proc`.
pub(crate) fn open(proc: &Arc<NvProcess>, i: usize) -> Arc<NvDevice> {
    let name = if i == 0 {
        "NV".to_string()
    } else {
        format!("NV:{i}")
    };
    open_nv_device(proc, i, &name).unwrap()
}

/// One H200 on a fresh emulated process.
pub(crate) fn one_gpu() -> (Arc<NvDevice>, EmuDriver) {
    let (p, e) = mock_nv(1, "hopper", "");
    (open(&p, 0), e)
}

/// Render, compile and load `uops` as kernel `name` the way the registry's NV device does.
pub(crate) fn load(dev: &Arc<NvDevice>, name: &str, uops: &[UOp]) -> Arc<dyn Program> {
    let src = MockNvRenderer::new().render(name, uops).unwrap();
    let b = dev.backend();
    let lib = MockNvCompiler::new(b.classes().arch, b.sm())
        .compile(&src)
        .unwrap();
    NvRuntime::new(dev.clone()).load(name, &lib).unwrap().into()
}

pub(crate) fn alloc(dev: &Arc<NvDevice>, size: usize) -> (HcqAllocator<super::NvBackend>, RawBuf) {
    let a = HcqAllocator::new(dev.clone());
    let b = a.alloc(size, &BufferOptions::default()).unwrap();
    (a, b)
}

/// out = a + b on `groups` x `local` floats through `dev`: staging copies in, the kernel, a copy
/// out, checked on the host.
pub(crate) fn run_add(dev: &Arc<NvDevice>, groups: usize, local: usize) {
    let n = groups * local;
    let prg = load(
        dev,
        "E_add",
        &add_uops(groups as i64, local as i64, crate::dtype::dtypes::float32),
    );
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(4 * n, &BufferOptions::default()).unwrap())
        .collect();
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    a.copyin(&bufs[1], &f32_bytes(&x)).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&y)).unwrap();
    let t = prg
        .call(&bufs, &[], Some([groups, 1, 1]), Some([local, 1, 1]), true)
        .unwrap();
    assert!(t.is_some(), "wait=true returns the GPU time");
    let mut out = vec![0u8; 4 * n];
    a.copyout(&mut out, &bufs[0]).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(f32s(&out), want);
}
