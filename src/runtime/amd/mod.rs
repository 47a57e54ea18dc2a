//! The AMD backend (HCQ through KFD, no ROCm): per-chip facts, PM4 and SDMA packet builders,
//! and their decoders. The device, memory, signal and program parts come later.

pub mod copy;
pub mod decode;
pub mod device;
pub mod elf;
pub mod memory;
pub mod pm4;
pub mod process;
pub mod program;
pub mod queue;
pub mod sdma;
pub mod signal;
pub mod targets;

pub use device::{open_amd_device, AmdBackend};
