//! The device families rawgrad ships, registered with the registry the first time it is used
//! (so users never call an init function).
//!
//! - `CLANG`: [`ClangRenderer`], the C compiler (`clang`, else `cc`), dlopen'd shared objects,
//!   LRU-cached host memory ([`open_clang`]).
//! - `INTERP`: the UOp interpreter ([`open_interp`]).
//! - `LLVM`: LLVM IR compiled in process by libLLVM, loaded by rawgrad's ELF loader ([`open_llvm`]).
//! - `CUDA`: the CUDA driver API fallback ([`crate::runtime::fallback::cuda::register`]); it
//!   loads libcuda only when a `CUDA` device is selected or probed.
//! - `AMD`: the KFD backend ([`crate::runtime::amd::register`]); it opens nothing until an `AMD`
//!   device is selected or probed, and under `MOCKGPU=1` it opens the emulated GPU.
//! - `NV`: the RM/UVM backend ([`crate::runtime::nv::register`]); likewise lazy, and under
//!   `MOCKGPU=1` it opens the emulated RM/UVM with the software NV GPU.
//!
//! Not guaranteed: registering a family does not prove it opens (the opener reports why it
//! cannot, for example a missing compiler or device node).

use std::sync::Arc;

use crate::device::registry::{device_index, register_family};
use crate::renderer::cstyle::ClangRenderer;
use crate::renderer::Renderer;
use crate::runtime::cpu::clang::open_clang;
use crate::runtime::cpu::interp_device::open_interp;
use crate::runtime::cpu::llvm::open_llvm;

/// Register every built-in family (called once, by the registry).
pub(crate) fn register_builtin_families() {
    let clang: Arc<dyn Renderer> = Arc::new(ClangRenderer::new());
    // The CPU families take any index (`CLANG:1` is a second CLANG device, as in tinygrad), but
    // one that is not a number is an error naming the device, never silently ignored.
    register_family("CLANG", move |name| {
        device_index(name)?;
        open_clang(name, Arc::clone(&clang))
    });
    register_family("INTERP", |name| {
        device_index(name)?;
        open_interp(name)
    });
    register_family("LLVM", |name| {
        device_index(name)?;
        open_llvm(name)
    });
    crate::runtime::amd::register();
    crate::runtime::nv::register();
    crate::runtime::fallback::cuda::register();
}
