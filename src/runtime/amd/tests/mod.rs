//! AMD backend tests through the emulated KFD with software GPUs (`mockgpu`): copies, kernels,
//! waits, the timeline wrap, faults, golden packet streams and profiling. Every test opens its
//! own emulated driver, so they run in parallel threads; waits that are meant to fail use a short
//! `HCQDEV_WAIT_TIMEOUT_MS` (a hang guard, not a timing threshold).

mod copies;
mod faults;
mod golden;
pub(crate) mod graph;
pub(crate) mod injected;
mod isa;
mod kernels;
pub(crate) mod launch;
pub(crate) mod multigraph;
mod profile;
mod registry;
mod rings;
mod swgpu;
mod vendor;
mod waits;

use std::sync::Arc;

use super::{open_amd_device, AmdDevice, AmdProcess, AmdRuntime};
use crate::codegen::uopgraph::linearize;
use crate::codegen::uops::UOp;
use crate::device::{Allocator, BufferOptions, Compiler, Program, RawBuf, Runtime};
use crate::dtype::dtypes;
use crate::hcq::HcqAllocator;
use crate::mockgpu::amdgpu::attach::mock_driver;
use crate::mockgpu::amdgpu::compiler::{MockAmdCompiler, MockAmdRenderer};
use crate::mockgpu::{EmuConfig, EmuDriver};
use crate::renderer::Renderer;

/// An emulated KFD process with `count` GPUs of `arch`.
pub(crate) fn mock_process(count: usize, arch: &str) -> (Arc<AmdProcess>, EmuDriver) {
    let emu = mock_driver(EmuConfig {
        count,
        arch: arch.into(),
        ..Default::default()
    })
    .unwrap();
    let proc = AmdProcess::new(Arc::new(emu.clone())).unwrap();
    (proc, emu)
}

/// `AMD:i` of `proc`.
pub(crate) fn open(proc: &Arc<AmdProcess>, i: usize) -> Arc<AmdDevice> {
    let name = if i == 0 {
        "AMD".to_string()
    } else {
        format!("AMD:{i}")
    };
    open_amd_device(proc, i, &name).unwrap()
}

/// One gfx1100 device on a fresh emulated process.
pub(crate) fn one_gpu() -> (Arc<AmdDevice>, EmuDriver) {
    let (p, e) = mock_process(1, "gfx1100");
    (open(&p, 0), e)
}

pub(crate) fn alloc(
    dev: &Arc<AmdDevice>,
    size: usize,
) -> (HcqAllocator<super::AmdBackend>, RawBuf) {
    let a = HcqAllocator::new(dev.clone());
    let b = a.alloc(size, &BufferOptions::default()).unwrap();
    (a, b)
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub(crate) use crate::mockgpu::exec::tests::{add_uops, axpb_uops};

/// Render, compile and load `uops` as kernel `name` the way the registry's AMD device does.
pub(crate) fn load(dev: &Arc<AmdDevice>, name: &str, uops: &[UOp]) -> Arc<dyn Program> {
    let src = MockAmdRenderer::new().render(name, uops).unwrap();
    let lib = MockAmdCompiler::new(dev.backend().target())
        .compile(&src)
        .unwrap();
    AmdRuntime::new(dev.clone())
        .load(name, &lib)
        .unwrap()
        .into()
}
