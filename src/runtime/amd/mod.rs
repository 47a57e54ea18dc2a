//! The AMD backend: HCQ through KFD, no ROCm.
//!
//! - Packets: [`pm4`] / [`sdma`] (typed builders with patch points). The chip facts they read
//!   (the per-gfx table, opcodes, field layouts, the decoders golden tests pin) are
//!   [`crate::hw::amd`].
//! - The device: [`process`] (the KFD process: `/dev/kfd`, render nodes, shared signal and event
//!   pages), [`device`] ([`AmdBackend`], the [`crate::hcq::HcqBackend`]), [`memory`] (VRAM, GTT,
//!   USERPTR at GPU VA == CPU VA), [`queue`] (hardware rings and the PM4 compute queue),
//!   [`copy`] (the SDMA copy queue), [`signal`] (16-byte signal slots, KFD events),
//!   [`program`] (code-object loader over [`crate::hw::amd::elf`]).
//! - [`mockgpu`]: under `MOCKGPU=1`, the emulated KFD with a software GPU that runs mock code
//!   objects (serialized UOps) on the UOp interpreter.
//! - Registration: [`register`] makes `AMD` a device family of the registry; [`open_amd`] opens
//!   `AMD:n` as a [`Compiled`] (HCQ allocator behind the LRU cache, the program loader, and the
//!   mock renderer/compiler under `MOCKGPU`; on a real device the LLVM IR renderer and the
//!   libLLVM amdgcn compiler of [`compiler`], or a compiler slot that reports why it is missing).
//!
//! Not guaranteed: one process-wide KFD process serves the registry's devices (opened on first
//! use, never closed); tests open their own through [`AmdProcess::new`].

pub mod compiler;
pub mod copy;
pub mod device;
pub mod memory;
pub mod pm4;
pub mod process;
pub mod program;
pub mod queue;
pub mod sdma;
pub mod signal;

#[cfg(test)]
mod hw_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::{Arc, Mutex};

pub use device::{open_amd_device, AmdBackend};
pub use process::AmdProcess;
pub use program::AmdProgram;
pub use signal::AmdSignal;

use crate::device::registry::{device_index, register_family, Compiled};
use crate::device::{Compiler, DeviceGraph, Launch, LruAllocator, Program, Runtime};
use crate::driver::{Driver, RealDriver};
use crate::hcq::{HcqAllocator, HcqDevice, HcqProgramHandle};
use crate::helpers::getenv;
use crate::mockgpu::amdgpu::compiler::{MockAmdCompiler, MockAmdRenderer, UnavailableAmdCompiler};
use crate::mockgpu::EmuConfig;
use crate::renderer::Renderer;
use crate::Result;
use compiler::AMDCompiler;

/// An opened AMD device.
pub type AmdDevice = HcqDevice<AmdBackend>;

/// Loads code objects onto one device.
pub struct AmdRuntime {
    dev: Arc<AmdDevice>,
}

impl AmdRuntime {
    pub fn new(dev: Arc<AmdDevice>) -> AmdRuntime {
        AmdRuntime { dev }
    }
}

impl Runtime for AmdRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        let prg = AmdProgram::load(self.dev.backend(), name, lib)?;
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
        crate::hcq::graph::build::<AmdBackend>(prgs, launches)
    }
}

/// The driver for a new KFD process: the emulator with software GPUs under `MOCKGPU=1`
/// (`MOCKGPU_COUNT`, `MOCKGPU_ARCH`), else the kernel.
pub fn amd_driver() -> Result<Arc<dyn Driver>> {
    if getenv("MOCKGPU", 0) != 0 {
        Ok(Arc::new(crate::mockgpu::amdgpu::attach::mock_driver(
            EmuConfig::from_env(),
        )?))
    } else {
        Ok(Arc::new(RealDriver::new()))
    }
}

fn process() -> Result<Arc<AmdProcess>> {
    static PROC: Mutex<Option<Arc<AmdProcess>>> = Mutex::new(None);
    let mut p = PROC.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = p.as_ref() {
        return Ok(p.clone());
    }
    let proc = AmdProcess::new(amd_driver()?)?;
    *p = Some(proc.clone());
    Ok(proc)
}

/// The parts of an opened device for the registry.
pub fn compiled(dev: Arc<AmdDevice>, name: &str) -> Compiled {
    let target = dev.backend().target();
    let emulated = dev.backend().process().core().drv.name() == "emu";
    let (compiler, renderer): (Arc<dyn Compiler>, Arc<dyn Renderer>) = if emulated {
        (
            Arc::new(MockAmdCompiler::new(target)),
            Arc::new(MockAmdRenderer::for_target(target)),
        )
    } else {
        match AMDCompiler::new(target) {
            Ok(c) => {
                let r = c.renderer();
                (Arc::new(c), Arc::new(r))
            }
            Err(e) => (
                Arc::new(UnavailableAmdCompiler::new(target, e.message().to_string())),
                Arc::new(MockAmdRenderer::new()),
            ),
        }
    };
    Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HcqAllocator::new(dev.clone()))),
        compiler,
        runtime: Arc::new(AmdRuntime::new(dev)),
        renderer,
    }
}

/// Open `AMD` / `AMD:n` on the process-wide KFD process.
pub fn open_amd(name: &str) -> Result<Compiled> {
    let dev = open_amd_device(&process()?, device_index(name)?, name)?;
    Ok(compiled(dev, name))
}

/// Make `AMD` a device family of the registry.
pub fn register() {
    register_family("AMD", open_amd);
}
