//! Backends, one folder each, with the same file set, and [`builtin`]: the list of built-in device
//! families, the one place that picks the emulator under `MOCKGPU=1`, and the device entry points
//! the upper layers call ([`builtin::open_device`], [`builtin::default_device`]).
//!
//! The backends never name the emulator: a GPU backend is handed its driver and its
//! [`Toolchain`] by [`builtin`].

pub mod amd;
pub mod builtin;
pub mod cpu;
pub mod fallback;
pub mod nv;

use std::sync::{Arc, Mutex};

use crate::device::Compiler;
use crate::renderer::Renderer;
use crate::Result;

/// The compiler and the renderer one device's kernels go through.
#[derive(Clone)]
pub struct Toolchain {
    pub compiler: Arc<dyn Compiler>,
    pub renderer: Arc<dyn Renderer>,
}

/// The process-wide value held in `slot`, made by `make` on first use (a failure is not kept:
/// the next call tries again). The GPU backends keep their one driver process this way.
pub(crate) fn process_wide<T>(
    slot: &Mutex<Option<Arc<T>>>,
    make: impl FnOnce() -> Result<Arc<T>>,
) -> Result<Arc<T>> {
    let mut held = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = held.as_ref() {
        return Ok(Arc::clone(v));
    }
    let v = make()?;
    *held = Some(Arc::clone(&v));
    Ok(v)
}
