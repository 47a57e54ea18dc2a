//! Devices as the core sees them: the seams every backend fills in.
//!
//! - [`Allocator`]: device memory (alloc / free / copyin / copyout, optional offset views and
//!   device-to-device transfer).
//! - [`Compiler`]: source text to a binary, with a cache key for the on-disk cache.
//! - [`Runtime`]: loads a binary as a [`Program`]; a `Program` launches with buffers, integer
//!   variable values and launch dims.
//!
//! A [`RawBuf`] is the handle an allocator hands out: the address kernels see (a host pointer for
//! CPU devices, a GPU virtual address for HCQ devices), its size, and an owner object that keeps the
//! memory alive and lets the allocator find its own bookkeeping again.
//!
//! Built on these: [`allocator`] (host memory, the LRU cache), [`buffer`] (tinygrad's `Buffer`),
//! [`registry`] (device names, the family table, `DEFAULT`'s rules, the [`Compiled`] record; the
//! built-in families are registered from `runtime/builtin.rs`), [`compiler`] (the on-disk compile
//! cache) and [`diskcache`] (tinygrad's `diskcache_get`/`diskcache_put`).
//!
//! Not guaranteed: a `RawBuf` does not free its memory when dropped; the owning `Buffer` returns it
//! to its allocator.

#![forbid(unsafe_code)]

pub mod allocator;
pub mod buffer;
pub mod compiler;
pub mod diskcache;
pub mod graph;
pub mod registry;
#[cfg(test)]
pub(crate) mod testing;

pub use allocator::{HostAllocator, LruAllocator};
pub use buffer::{Buffer, BufferRef};
pub use compiler::compile_cached;
pub use graph::{CallGraph, DeviceGraph, GraphBuild, GraphCall, Launch, Xfer};
pub use registry::{canonicalize, register_family, Compiled, DeviceOpener};

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::codegen::program::ProgramSpec;
use crate::codegen::renderer::Renderer;
use crate::Result;

/// The compiler and the renderer one device's kernels go through (what `runtime::builtin` hands a
/// GPU backend: the real ones, or the emulator's under `MOCKGPU=1`).
#[derive(Clone)]
pub struct Toolchain {
    pub compiler: Arc<dyn Compiler>,
    pub renderer: Arc<dyn Renderer>,
}

/// Allocation options (tinygrad's `BufferOptions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BufferOptions {
    /// Do not cache in the CPU (write-combined / uncached mapping).
    pub uncached: bool,
    /// The CPU must be able to read and write it directly.
    pub cpu_access: bool,
    /// Host memory visible to the device.
    pub host: bool,
    /// Bypass the LRU cache (free for real on release).
    pub nolru: bool,
}

/// A handle to device memory.
#[derive(Clone)]
pub struct RawBuf {
    /// The address a kernel sees: host pointer (CPU devices) or GPU virtual address (HCQ).
    pub addr: u64,
    /// Size in bytes.
    pub size: usize,
    /// Keeps the memory alive; allocators downcast it to their own type.
    pub owner: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for RawBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawBuf(addr={:#x}, size={})", self.addr, self.size)
    }
}

/// Device memory.
pub trait Allocator: Send + Sync {
    /// Allocate `size` bytes.
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf>;
    /// Release memory from [`Allocator::alloc`] (not views from [`Allocator::offset`]).
    fn free(&self, buf: RawBuf, size: usize, opts: &BufferOptions);
    /// Copy host bytes into the buffer (from its start).
    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()>;
    /// Copy the buffer's first `dst.len()` bytes to the host.
    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()>;
    /// A view of `size` bytes starting `offset` bytes into `buf`, sharing its memory.
    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        let _ = (buf, size, offset);
        Err(crate::Error::Device(
            "this allocator does not support buffer views (offset)".into(),
        ))
    }
    /// Copy `size` bytes from `src` to `dst`, both of this allocator's device family.
    fn transfer(&self, dst: &RawBuf, src: &RawBuf, size: usize) -> Result<()> {
        let _ = (dst, src, size);
        Err(crate::Error::Device(
            "this allocator does not support device-to-device transfer".into(),
        ))
    }
    /// Wait for every pending operation on the device to finish.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    /// Release memory held for reuse (the LRU cache); allocators without a cache do nothing.
    fn free_cache(&self) {}
}

/// Source to binary.
pub trait Compiler: Send + Sync {
    /// Identifies the compiler and its settings in the disk cache (for example `compile_clang`).
    /// `None` disables caching.
    fn cache_key(&self) -> Option<String>;
    /// Compile `src` to a binary.
    fn compile(&self, src: &str) -> Result<Vec<u8>>;
    /// Whether sources of distinct kernels joined by newlines compile to one binary that holds
    /// each of them (C does; LLVM IR modules do not). BEAM then compiles a batch of candidates in
    /// one compiler run.
    fn joins_sources(&self) -> bool {
        false
    }
}

/// Launch dims: (x, y, z).
pub type LaunchDims = [usize; 3];

/// A loaded kernel.
pub trait Program: Send + Sync {
    /// For graphs that need the backend program (HCQ); `None` where nobody downcasts.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// Run with buffers (outputs first, as the kernel's parameters), integer variable values (in
    /// the kernel's variable order), launch dims (ignored by devices without them). With `wait`,
    /// block until it finished and return the elapsed seconds.
    fn call(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: Option<LaunchDims>,
        local: Option<LaunchDims>,
        wait: bool,
    ) -> Result<Option<f64>>;

    /// A BEAM test-size run of about `max_work` units of work (flops + bytes): a device that
    /// can run part of a kernel (the CPU devices split the outer loop: `runtime/cpu/launch.rs`)
    /// runs that part, blocks until it finished, and returns the time scaled to the whole
    /// kernel. `None`: the device times kernels whole (the caller runs it whole).
    fn time_part(&self, bufs: &[RawBuf], vals: &[i64], max_work: i64) -> Result<Option<f64>> {
        let _ = (bufs, vals, max_work);
        Ok(None)
    }
}

/// Loads binaries of one device as programs (tinygrad's runtime class, `ClangProgram(name, lib)`).
pub trait Runtime: Send + Sync {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>>;
    /// Load the binary of program `p`, which the runtime may read its launch facts from (the CPU
    /// runtimes: how to split it over cores); by default [`Runtime::load`] by function name.
    fn load_program(&self, p: &ProgramSpec, lib: &[u8]) -> Result<Box<dyn Program>> {
        self.load(&p.function_name, lib)
    }
    /// Whether the JIT may batch this device's kernels into a graph (tinygrad's
    /// `Compiled.graph`), built by [`Runtime::graph`].
    fn has_graph(&self) -> bool {
        false
    }
    /// Whether its graph takes the kernels and transfers of several devices of this family in
    /// one batch (tinygrad's graph classes that are a `MultiGraphRunner`).
    fn multi_graph(&self) -> bool {
        false
    }
    /// Build the device graph of these calls; `prgs` holds the program of every kernel call, in
    /// order (`None`: the device has none, or refuses this batch; the JIT then runs the items one
    /// by one).
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        let _ = (prgs, calls);
        Ok(None)
    }
}
