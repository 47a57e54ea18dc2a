//! AMD backend tests through the emulated KFD with software GPUs (`mockgpu`): copies, kernels,
//! waits, the timeline wrap, faults, golden packet streams and profiling. Every test opens its
//! own emulated driver, so they run in parallel threads; waits that are meant to fail use a short
//! `HCQDEV_WAIT_TIMEOUT_MS` (a hang guard, not a timing threshold).

mod copies;
mod faults;
mod golden;
pub(crate) mod graph;
mod injected;
mod kernels;
pub(crate) mod launch;
mod profile;
mod registry;
mod rings;
mod vendor;
mod waits;

use std::sync::Arc;

use super::{open_amd_device, AmdDevice, AmdProcess, AmdRuntime};
use crate::codegen::uopgraph::linearize;
use crate::codegen::uops::UOp;
use crate::device::{Allocator, BufferOptions, Compiler, Program, RawBuf, Runtime};
use crate::dtype::{dtypes, DType};
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

/// data0[i] = data1[i] + data2[i] with i = gidx0 * local + lidx0, for a grid of `groups`
/// workgroups of `local` threads.
pub(crate) fn add_uops(groups: i64, local: i64, dt: DType) -> Vec<UOp> {
    let d0 = UOp::define_global(dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let d2 = UOp::define_global(dt, 2, false);
    let g = UOp::special(0, "gidx0", groups);
    let l = UOp::special(0, "lidx0", local);
    let i = g.mul(local).add(&l);
    let a = UOp::load(&d1, &i, dt);
    let b = UOp::load(&d2, &i, dt);
    linearize(&[UOp::store(&d0, &i, &a.add(&b))], None, true).unwrap()
}

/// data0[i] = data1[i] * n + m (int32; n, m variables), i = gidx0 * local + lidx0.
pub(crate) fn axpb_uops(groups: i64, local: i64) -> Vec<UOp> {
    let dt = dtypes::int32;
    let d0 = UOp::define_global(dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let n = UOp::define_var("n", -100, 100);
    let m = UOp::define_var("m", -100, 100);
    let i = UOp::special(0, "gidx0", groups)
        .mul(local)
        .add(UOp::special(0, "lidx0", local));
    let v = UOp::load(&d1, &i, dt).mul(&n).add(&m);
    linearize(&[UOp::store(&d0, &i, &v)], None, true).unwrap()
}

/// Render, compile and load `uops` as kernel `name` the way the registry's AMD device does.
pub(crate) fn load(dev: &Arc<AmdDevice>, name: &str, uops: &[UOp]) -> Box<dyn Program> {
    let src = MockAmdRenderer::new().render(name, uops).unwrap();
    let lib = MockAmdCompiler::new(dev.backend().target())
        .compile(&src)
        .unwrap();
    AmdRuntime::new(dev.clone()).load(name, &lib).unwrap()
}
