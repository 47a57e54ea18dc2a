//! The AMD backend: HCQ through KFD, no ROCm.
//!
//! - Packets: [`pm4`] / [`sdma`] (typed builders with patch points). The chip facts they read
//!   (the per-gfx table, opcodes, field layouts, the decoders golden tests pin) are
//!   [`crate::hw::amd`].
//! - The device: [`process`] (the KFD process: `/dev/kfd`, render nodes, shared signal and event
//!   pages), [`device`] ([`AmdBackend`], the [`crate::hcq::HcqBackend`]), [`memory`] (VRAM, GTT,
//!   USERPTR at GPU VA == CPU VA), [`queue`] (hardware rings and the PM4 compute queue),
//!   [`bound`] (a graph's compute queue bound: replayed through an INDIRECT_BUFFER),
//!   [`copy`] (the SDMA copy queue), [`signal`] (16-byte signal slots, KFD events),
//!   [`program`] (code-object loader over [`crate::hw::amd::elf`]).
//! - Opening: [`open_amd`] opens `AMD:n` as a [`Compiled`] (HCQ allocator behind the LRU cache,
//!   the program loader) with the driver and the [`Toolchain`] it is handed: `runtime/builtin.rs`
//!   registers the `AMD` family and picks both (the emulated KFD and the mock compiler under
//!   `MOCKGPU=1`; on a real device the libLLVM amdgcn compiler of [`compiler`]). This backend
//!   never names the emulator.
//!
//! Not guaranteed: one process-wide KFD process serves the registry's devices (opened on first
//! use, with the first caller's driver, never closed); tests open their own through
//! [`AmdProcess::new`].

pub mod bound;
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

use crate::device::registry::{device_index, Compiled};
use crate::device::Toolchain;
use crate::device::{DeviceGraph, GraphCall, LruAllocator, Program, Runtime};
use crate::driver::Driver;
use crate::hcq::{HcqAllocator, HcqDevice, HcqProgramHandle};
use crate::helpers::process_wide;
use crate::Result;

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
    fn multi_graph(&self) -> bool {
        true
    }
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        crate::hcq::graph::build::<AmdBackend>(prgs, calls)
    }
}

/// The process-wide KFD process, opened on first use on the driver `driver` makes.
fn process(driver: fn() -> Result<Arc<dyn Driver>>) -> Result<Arc<AmdProcess>> {
    static PROC: Mutex<Option<Arc<AmdProcess>>> = Mutex::new(None);
    process_wide(&PROC, || AmdProcess::new(driver()?))
}

/// The parts of an opened device for the registry, with `toolchain` compiling its kernels.
pub fn compiled(dev: Arc<AmdDevice>, name: &str, toolchain: Toolchain) -> Compiled {
    Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HcqAllocator::new(dev.clone()))),
        compiler: toolchain.compiler,
        runtime: Arc::new(AmdRuntime::new(dev)),
        renderer: toolchain.renderer,
    }
}

/// Open `AMD` / `AMD:n` on the process-wide KFD process (opened on first use on the driver
/// `driver` makes), with the compiler and renderer `toolchain` picks for the device.
pub fn open_amd(
    name: &str,
    driver: fn() -> Result<Arc<dyn Driver>>,
    toolchain: fn(&AmdDevice) -> Toolchain,
) -> Result<Compiled> {
    let dev = open_amd_device(&process(driver)?, device_index(name)?, name)?;
    let tc = toolchain(&dev);
    Ok(compiled(dev, name, tc))
}
