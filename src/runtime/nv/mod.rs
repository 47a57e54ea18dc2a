//! The NV backend: HCQ through RM/UVM ioctls, no libcuda.
//!
//! - Command builders over the hardware facts of [`crate::hw::nv`] (chip tables, methods, QMD
//!   fields, decoders): [`push`] (pushbuffer method builders), [`gpfifo`] (the GPFIFO ring
//!   writer), [`qmd`] (QMD templates and patch points), [`cubin`] (the cubin loader).
//! - The device: [`process`] (the RM client, UVM and VA window a process's devices share; memo
//!   1.10 steps 1-5), [`bringup`] (steps 6-19 per GPU), [`device`] ([`NvBackend`], the
//!   [`crate::hcq::HcqBackend`]), [`vaspace`] (the VA plan), [`memory`] (VRAM, RM sysmem, host
//!   OS-descriptor memory at GPU VA = CPU VA), [`channel`] (GPFIFO channels, command rings, error
//!   notifiers), [`queue`] (the compute queue), [`copy`] (the DMA copy queue), [`signal`]
//!   (16-byte signal slots), [`program`] (cubin upload, cbuf0 and QMD per launch), [`first_run`]
//!   (the first-run checklist of memo 9).
//! - The compiler: [`compiler`] (NVRTC, or PTX through ptxas / nvJitLink) with the finding of
//!   NVIDIA's tools ([`toolchain`]).
//! - [`mockgpu`]: under `MOCKGPU=1`, the emulated RM/UVM with a software NV GPU running mock cubins
//!   (serialized UOps) on the UOp interpreter.
//! - Registration: [`register`] makes `NV` a device family; [`open_nv`] opens `NV:n` as a
//!   [`Compiled`] (HCQ allocator behind the LRU cache, the cubin loader, and the mock
//!   renderer/compiler under `MOCKGPU`; on a real device the CUDA renderer and [`NVCompiler`], or
//!   a compiler slot that says why no NVIDIA compiler is available).
//!
//! Not guaranteed: one process-wide [`NvProcess`] serves the registry's devices (opened on first
//! use, never closed); tests open their own.

pub mod bringup;
pub mod channel;
pub mod compiler;
pub mod copy;
pub mod cubin;
pub mod device;
pub mod first_run;
pub mod gpfifo;
pub mod memory;
pub mod process;
pub mod program;
pub mod push;
pub mod qmd;
pub mod queue;
pub mod signal;
pub mod toolchain;
pub mod vaspace;

#[cfg(test)]
mod hw_tests;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};

pub use device::{open_nv_device, NvBackend};
pub use process::NvProcess;
pub use program::NvProgram;
pub use signal::NvSignal;

use crate::device::registry::{device_index, register_family, Compiled};
use crate::device::{Compiler, DeviceGraph, Launch, LruAllocator, Program, Runtime};
use crate::driver::{Driver, RealDriver};
use crate::hcq::{HcqAllocator, HcqDevice, HcqProgramHandle};
use crate::helpers::getenv;
use crate::mockgpu::nvgpu::compiler::{mock_code, MockNvCompiler, MockNvRenderer, MockPtxCompiler};
use crate::mockgpu::nvgpu::cubin::MockCode;
use crate::mockgpu::EmuConfig;
use crate::renderer::Renderer;
use crate::Result;
use compiler::{NVCompiler, UnavailableNvCompiler};

/// An opened NV device.
pub type NvDevice = HcqDevice<NvBackend>;

/// Loads cubins onto one device.
pub struct NvRuntime {
    dev: Arc<NvDevice>,
}

impl NvRuntime {
    pub fn new(dev: Arc<NvDevice>) -> NvRuntime {
        NvRuntime { dev }
    }
}

impl Runtime for NvRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        let prg = NvProgram::load(self.dev.backend(), name, lib)?;
        Ok(Box::new(HcqProgramHandle::new(
            self.dev.clone(),
            Arc::new(prg),
        )))
    }
    fn has_graph(&self) -> bool {
        true
    }
    fn graph(
        &self,
        prgs: &[&dyn Program],
        launches: &[Launch],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        crate::hcq::graph::build::<NvBackend>(prgs, launches)
    }
}

/// The driver for a new NV process: the emulator with software NV GPUs under `MOCKGPU=1`
/// (`MOCKGPU_NV_COUNT`, `MOCKGPU_NV_ARCH`, `MOCKGPU_NV_DRIVER`), else the kernel.
pub fn nv_driver() -> Result<Arc<dyn Driver>> {
    if getenv("MOCKGPU", 0) != 0 {
        Ok(Arc::new(crate::mockgpu::nvgpu::attach::mock_driver(
            EmuConfig::from_env(),
        )?))
    } else {
        Ok(Arc::new(RealDriver::new()))
    }
}

fn process() -> Result<Arc<NvProcess>> {
    static PROC: Mutex<Option<Arc<NvProcess>>> = Mutex::new(None);
    let mut p = PROC.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = p.as_ref() {
        return Ok(p.clone());
    }
    let proc = NvProcess::new(nv_driver()?)?;
    *p = Some(proc.clone());
    Ok(proc)
}

/// The parts of an opened device for the registry.
pub fn compiled(dev: Arc<NvDevice>, name: &str) -> Compiled {
    let b = dev.backend();
    let emulated = b.process().driver().name() == "emu";
    let (arch, sm) = (b.classes().arch, b.sm());
    let (compiler, renderer): (Arc<dyn Compiler>, Arc<dyn Renderer>) = if emulated {
        match mock_code().and_then(|c| match c {
            MockCode::Uops => Ok(None),
            MockCode::Ptx => MockPtxCompiler::new(arch, sm).map(Some),
        }) {
            Ok(None) => (
                Arc::new(MockNvCompiler::new(arch, sm)),
                Arc::new(MockNvRenderer::for_sm(sm)),
            ),
            Ok(Some(c)) => {
                let r = Arc::new(c.renderer());
                (Arc::new(c), r)
            }
            Err(e) => (
                Arc::new(UnavailableNvCompiler::new(sm, e.message().to_string())),
                Arc::new(MockNvRenderer::for_sm(sm)),
            ),
        }
    } else {
        match NVCompiler::new("NV", sm) {
            Ok(c) => {
                let r = c.renderer();
                (Arc::new(c), r)
            }
            Err(e) => (
                Arc::new(UnavailableNvCompiler::new(sm, e.message().to_string())),
                Arc::new(crate::renderer::cuda::CUDARenderer::nv(sm)),
            ),
        }
    };
    Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HcqAllocator::new(dev.clone()))),
        compiler,
        runtime: Arc::new(NvRuntime::new(dev)),
        renderer,
    }
}

/// Open `NV` / `NV:n` on the process-wide NV process.
pub fn open_nv(name: &str) -> Result<Compiled> {
    let dev = open_nv_device(&process()?, device_index(name)?, name)?;
    Ok(compiled(dev, name))
}

/// Make `NV` a device family of the registry.
pub fn register() {
    register_family("NV", open_nv);
}
