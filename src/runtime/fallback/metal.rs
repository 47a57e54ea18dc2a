//! Metal (macOS only) as a [`VendorDevice`]: [`crate::ffi::metal::MetalContext`] behind the
//! fallback trait. Modules are `.metallib` images or Metal source; a "function" is its compute
//! pipeline. Buffers bind at indices 0.. and each int at the following indices.
//!
//! Not registered as a device family: rawgrad has no Metal renderer yet, so nothing would
//! compile for it; [`MetalDevice::open`] is the entry point for code that brings its own kernels.
//!
//! Not guaranteed: compiled for `aarch64-apple-darwin` only by `cargo check`; never run by
//! rawgrad's CI.

use std::sync::Arc;

use super::{DevPtr, VendorDevice};
use crate::ffi::metal::MetalContext;
use crate::Result;

/// The system's default Metal device.
#[derive(Debug)]
pub struct MetalDevice {
    ctx: Arc<MetalContext>,
}

impl MetalDevice {
    pub fn open() -> Result<MetalDevice> {
        Ok(MetalDevice {
            ctx: MetalContext::open()?,
        })
    }
}

impl VendorDevice for MetalDevice {
    fn family(&self) -> &str {
        "METAL"
    }
    fn name(&self) -> &str {
        self.ctx.name()
    }
    fn arch(&self) -> String {
        "metal".into()
    }
    fn alloc(&self, size: usize) -> Result<DevPtr> {
        self.ctx.alloc(size)
    }
    fn free(&self, ptr: DevPtr) -> Result<()> {
        self.ctx.free(ptr)
    }
    fn copy_in(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        self.ctx.copy_in(dst, src)
    }
    fn copy_in_async(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        // unified memory: the copy is a memcpy once the GPU is done with the buffer
        self.ctx.copy_in(dst, src)
    }
    fn copy_out(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        self.ctx.copy_out(dst, src)
    }
    fn copy_device(&self, dst: DevPtr, src: DevPtr, size: usize) -> Result<()> {
        self.ctx.copy_device(dst, src, size)
    }
    fn load_module(&self, binary: &[u8]) -> Result<u64> {
        self.ctx.load_library(binary)
    }
    fn unload_module(&self, module: u64) -> Result<()> {
        self.ctx.release(module);
        Ok(())
    }
    fn function(&self, module: u64, name: &str) -> Result<u64> {
        self.ctx.pipeline(module, name)
    }
    fn launch(
        &self,
        function: u64,
        bufs: &[DevPtr],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()> {
        self.ctx.launch(function, bufs, vals, grid, block)
    }
    fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize()
    }
    fn event_record(&self) -> Result<u64> {
        self.ctx.event_record()
    }
    fn event_synchronize(&self, event: u64) -> Result<()> {
        self.ctx.event_synchronize(event)
    }
    fn event_elapsed(&self, start: u64, end: u64) -> Result<f64> {
        self.ctx.event_elapsed(start, end)
    }
    fn event_destroy(&self, event: u64) -> Result<()> {
        self.ctx.event_destroy(event)
    }
}
