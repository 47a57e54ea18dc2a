//! The NV backend: HCQ through RM/UVM ioctls, no libcuda.
//!
//! - Command builders over the hardware facts of [`crate::hw::nv`] (chip tables, methods, QMD
//!   fields, decoders): [`push`] (pushbuffer method builders), [`gpfifo`] (the GPFIFO ring
//!   writer), [`qmd`] (QMD templates and patch points), [`cubin`] (the cubin loader).
//! - The device: [`process`] (the RM client, UVM and VA window a process's devices share;
//!   bring-up steps 1-5), [`bringup`] (steps 6-19 per GPU), [`device`] ([`NvBackend`], the
//!   [`crate::hcq::HcqBackend`]), [`vaspace`] (the VA plan), [`memory`] (VRAM, RM sysmem, host
//!   OS-descriptor memory at GPU VA = CPU VA), [`channel`] (GPFIFO channels, command rings, error
//!   notifiers), [`queue`] (the compute queue), [`copy`] (the DMA copy queue), [`signal`]
//!   (16-byte signal slots), [`program`] (cubin upload, cbuf0 and QMD per launch), [`first_run`]
//!   (the first-run checklist).
//! - The compiler: [`compiler`] (NVRTC, or PTX through ptxas / nvJitLink) with the finding of
//!   NVIDIA's tools ([`toolchain`]).
//! - Opening: [`open_nv`] opens `NV:n` as a [`Compiled`] (HCQ allocator behind the LRU cache, the
//!   cubin loader) with the driver and the [`Toolchain`] it is handed: `runtime/builtin.rs`
//!   registers the `NV` family and picks both (the emulated RM/UVM and the mock or PTX compiler
//!   under `MOCKGPU=1`; on a real device the CUDA renderer and [`compiler::NVCompiler`]). This
//!   backend never names the emulator.
//!
//! Not guaranteed: one process-wide [`NvProcess`] serves the registry's devices (opened on first
//! use, with the first caller's driver, never closed); tests open their own.

pub mod bound;
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

use crate::device::registry::{device_index, Compiled};
use crate::device::Toolchain;
use crate::device::{DeviceGraph, GraphCall, LruAllocator, Program, Runtime};
use crate::driver::Driver;
use crate::hcq::{HcqAllocator, HcqDevice, HcqProgramHandle};
use crate::helpers::process_wide;
use crate::Result;

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
    fn multi_graph(&self) -> bool {
        true
    }
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        crate::hcq::graph::build::<NvBackend>(prgs, calls)
    }
}

/// The process-wide NV process, opened on first use on the driver `driver` makes.
fn process(driver: fn() -> Result<Arc<dyn Driver>>) -> Result<Arc<NvProcess>> {
    static PROC: Mutex<Option<Arc<NvProcess>>> = Mutex::new(None);
    process_wide(&PROC, || NvProcess::new(driver()?))
}

/// The parts of an opened device for the registry, with `toolchain` compiling its kernels.
pub fn compiled(dev: Arc<NvDevice>, name: &str, toolchain: Toolchain) -> Compiled {
    Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HcqAllocator::new(dev.clone()))),
        compiler: toolchain.compiler,
        runtime: Arc::new(NvRuntime::new(dev)),
        renderer: toolchain.renderer,
    }
}

/// Open `NV` / `NV:n` on the process-wide NV process (opened on first use on the driver `driver`
/// makes), with the compiler and renderer `toolchain` picks for the device.
pub fn open_nv(
    name: &str,
    driver: fn() -> Result<Arc<dyn Driver>>,
    toolchain: fn(&NvDevice) -> Toolchain,
) -> Result<Compiled> {
    let dev = open_nv_device(&process(driver)?, device_index(name)?, name)?;
    let tc = toolchain(&dev);
    Ok(compiled(dev, name, tc))
}
