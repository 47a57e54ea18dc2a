//! `MOCKGPU=1` for NV: the pieces that let the NV backend run end to end on the emulated RM/UVM.
//!
//! - [`executor`]: the software NV GPU's dispatch executor running mock cubins (serialized UOps)
//!   on the UOp interpreter;
//! - [`compiler`]: the mock renderer and compiler (and the real device's placeholder compiler);
//! - here: [`mock_driver`], an emulated driver whose NVIDIA devices carry the software GPU
//!   ([`crate::mockgpu::nvgpu::nv_gpu_factory`] with [`executor::NvUopExecutor`]).
//!
//! Not guaranteed: nothing but rawgrad's emulator executes a mock cubin.

use std::sync::Arc;

use crate::mockgpu::nvgpu::nv_gpu_factory;
use crate::mockgpu::{EmuConfig, EmuDriver};
use crate::Result;

/// An emulated driver as `cfg` says, with a software NV GPU running mock cubins on every NVIDIA
/// device (and the AMD software GPU on the KFD side, as `MOCKGPU=1` gives).
pub fn mock_driver(mut cfg: EmuConfig) -> Result<EmuDriver> {
    cfg.nv_gpu_factory = Some(nv_gpu_factory(Arc::new(
        super::executor::NvUopExecutor::new(),
    )));
    if cfg.gpu_factory.is_none() {
        cfg.gpu_factory = Some(crate::mockgpu::amdgpu::attach::gpu_factory());
    }
    EmuDriver::new(cfg)
}
