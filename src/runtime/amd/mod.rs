//! The AMD backend (HCQ through KFD, no ROCm): per-chip facts, PM4 and SDMA packet builders,
//! and their decoders. The device, memory, signal and program parts come later.

pub mod compiler;
pub mod decode;
pub mod pm4;
pub mod sdma;
pub mod targets;
