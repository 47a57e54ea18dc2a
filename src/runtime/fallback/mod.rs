//! Vendor-runtime fallbacks: devices driven through the vendor's own user-space runtime (the CUDA
//! driver API, Metal) instead of rawgrad's HCQ backends. They exist for machines where the raw
//! ioctl path cannot run and to measure the HCQ backends against (`bench dispatch`).
//!
//! [`VendorDevice`] is what such a runtime must provide: device memory (alloc/free, synchronous
//! and asynchronous copies, device-to-device), modules from a compiled binary, kernel lookup,
//! launch with a packed parameter buffer and grid/block dims, synchronization, and timing events.
//! On top of any `VendorDevice` this module builds the crate's device seams:
//! [`VendorAllocator`] (an [`Allocator`]), [`VendorRuntime`] (a [`Runtime`]) and its programs.
//!
//! Kernel parameters are buffer addresses then 32-bit ints, in the kernel's order; CUDA packs them
//! as the NV launcher writes constant buffer 0 (8 bytes per address, then 4 per int:
//! [`pack_params`]), Metal binds them as buffers and `setBytes` values.
//!
//! Implementations: [`cuda`] (the `CUDA` family, libcuda through dlopen) and, on macOS only,
//! `metal` (the Metal framework through the Objective-C runtime). [`graph`]: the JIT's graph
//! where the vendor has graphs (CUDA graphs: [`VendorDevice::has_graph`]).
//!
//! Not guaranteed: copies are ordered with launches only through the device's single stream or
//! queue; a buffer freed while a kernel still uses it is the caller's bug (tinygrad's too).

pub mod cuda;
pub mod graph;
#[cfg(target_os = "macos")]
pub mod metal;

use std::sync::Arc;

use crate::device::{
    Allocator, BufferOptions, DeviceGraph, GraphCall, LaunchDims, Program, RawBuf, Runtime,
};
pub use crate::ffi::cuda::KernelNode;
use crate::{bail, Error, Result};

/// A device address (CUDA `CUdeviceptr`, Metal buffer GPU address or handle).
pub type DevPtr = u64;

/// What a vendor runtime provides for one opened device.
pub trait VendorDevice: Send + Sync {
    /// The device family (`CUDA`, `METAL`).
    fn family(&self) -> &str;
    /// The GPU's marketing name.
    fn name(&self) -> &str;
    /// The compile target (`sm_90`, `apple7`).
    fn arch(&self) -> String;
    /// Allocate `size` bytes of device memory.
    fn alloc(&self, size: usize) -> Result<DevPtr>;
    /// Free memory from [`VendorDevice::alloc`].
    fn free(&self, ptr: DevPtr) -> Result<()>;
    /// Copy host bytes to `dst`, returning when done.
    fn copy_in(&self, dst: DevPtr, src: &[u8]) -> Result<()>;
    /// Enqueue a host-to-device copy (staged, so `src` may be reused on return).
    fn copy_in_async(&self, dst: DevPtr, src: &[u8]) -> Result<()>;
    /// Copy device bytes to the host after all earlier work.
    fn copy_out(&self, dst: &mut [u8], src: DevPtr) -> Result<()>;
    /// Copy `size` bytes between two buffers of this device.
    fn copy_device(&self, dst: DevPtr, src: DevPtr, size: usize) -> Result<()>;
    /// Load a compiled binary (cubin, metallib) as a module.
    fn load_module(&self, binary: &[u8]) -> Result<u64>;
    /// Release a module.
    fn unload_module(&self, module: u64) -> Result<()>;
    /// A kernel of a module by name.
    fn function(&self, module: u64, name: &str) -> Result<u64>;
    /// Enqueue a launch of `function` on `grid` x `block` with buffer addresses `bufs` (as
    /// [`VendorDevice::alloc`] returned them, plus a view's offset) and int values `vals`, in the
    /// kernel's parameter order.
    fn launch(
        &self,
        function: u64,
        bufs: &[DevPtr],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()>;
    /// Wait for everything enqueued.
    fn synchronize(&self) -> Result<()>;
    /// Record a timing event now (in queue order).
    fn event_record(&self) -> Result<u64>;
    /// Wait for an event.
    fn event_synchronize(&self, event: u64) -> Result<()>;
    /// Seconds between two completed events.
    fn event_elapsed(&self, start: u64, end: u64) -> Result<f64>;
    /// Release an event.
    fn event_destroy(&self, event: u64) -> Result<()>;

    /// Whether the vendor has graphs of kernel launches (the graph methods below work).
    fn has_graph(&self) -> bool {
        false
    }
    /// Build a graph of `nodes`, each after the one before, ready to launch; its handle.
    fn graph_build(&self, nodes: &[KernelNode]) -> Result<u64> {
        let _ = nodes;
        Err(no_graphs(self.family()))
    }
    /// Replace the parameters and dims of node `i` of a built graph.
    fn graph_set_node(&self, graph: u64, i: usize, node: &KernelNode) -> Result<()> {
        let _ = (graph, i, node);
        Err(no_graphs(self.family()))
    }
    /// Enqueue one launch of a built graph.
    fn graph_launch(&self, graph: u64) -> Result<()> {
        let _ = graph;
        Err(no_graphs(self.family()))
    }
    /// Release a built graph.
    fn graph_destroy(&self, graph: u64) -> Result<()> {
        let _ = graph;
        Err(no_graphs(self.family()))
    }
}

/// The error of a graph method on a vendor runtime without graphs.
fn no_graphs(family: &str) -> Error {
    Error::Device(format!("{family}: the vendor runtime has no graphs"))
}

/// The kernel parameter buffer: each buffer address as 8 bytes, then each value as a 4-byte int.
pub fn pack_params(bufs: &[DevPtr], vals: &[i32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 * bufs.len() + 4 * vals.len());
    for b in bufs {
        out.extend_from_slice(&b.to_le_bytes());
    }
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Variable values as the kernels' 32-bit `int` parameters (an error names one that does not fit).
pub fn int_params(vals: &[i64]) -> Result<Vec<i32>> {
    vals.iter()
        .enumerate()
        .map(|(i, v)| {
            i32::try_from(*v).map_err(|_| {
                Error::InvalidArgument(format!(
                    "kernel variable {i} = {v} does not fit the kernel's 32-bit int parameter"
                ))
            })
        })
        .collect()
}

/// Launch dims as the vendor API takes them (missing dims are 1; each must fit in u32 and be >0).
pub fn launch_dims(dims: Option<LaunchDims>, what: &str) -> Result<[u32; 3]> {
    let d = dims.unwrap_or([1, 1, 1]);
    let mut out = [1u32; 3];
    for (o, v) in out.iter_mut().zip(d) {
        *o = match u32::try_from(v) {
            Ok(x) if x > 0 => x,
            _ => bail!(
                InvalidArgument,
                "{what} size {d:?}: each dim must be 1..2^32"
            ),
        };
    }
    Ok(out)
}

/// Keeps a vendor allocation's address for [`RawBuf::owner`].
#[derive(Debug)]
struct VendorMem {
    ptr: DevPtr,
}

/// Device memory through a [`VendorDevice`].
pub struct VendorAllocator {
    dev: Arc<dyn VendorDevice>,
}

impl VendorAllocator {
    pub fn new(dev: Arc<dyn VendorDevice>) -> VendorAllocator {
        VendorAllocator { dev }
    }
}

fn check_room(buf: &RawBuf, n: usize, what: &str) -> Result<()> {
    if n > buf.size {
        bail!(
            InvalidArgument,
            "{what} of {n} bytes into a {}-byte buffer",
            buf.size
        );
    }
    Ok(())
}

impl Allocator for VendorAllocator {
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf> {
        let _ = opts;
        let ptr = self.dev.alloc(size)?;
        Ok(RawBuf {
            addr: ptr,
            size,
            owner: Arc::new(VendorMem { ptr }),
        })
    }
    fn free(&self, buf: RawBuf, size: usize, opts: &BufferOptions) {
        let _ = (size, opts);
        let ptr = match buf.owner.downcast_ref::<VendorMem>() {
            Some(m) => m.ptr,
            None => buf.addr,
        };
        // `free` cannot report; a failing free (a driver already torn down) leaks, and says so
        // under DEBUG.
        if let Err(e) = self.dev.free(ptr) {
            if crate::helpers::debug() >= 1 {
                eprintln!("{}: free: {e}", self.dev.family());
            }
        }
    }
    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        check_room(dst, src.len(), "copyin")?;
        self.dev.copy_in_async(dst.addr, src)
    }
    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        check_room(src, dst.len(), "copyout")?;
        self.dev.copy_out(dst, src.addr)
    }
    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        match offset.checked_add(size) {
            Some(end) if end <= buf.size => Ok(RawBuf {
                addr: buf.addr + offset as u64,
                size,
                owner: Arc::clone(&buf.owner),
            }),
            _ => bail!(
                InvalidArgument,
                "view of {size} bytes at {offset} in a {}-byte buffer",
                buf.size
            ),
        }
    }
    fn transfer(&self, dst: &RawBuf, src: &RawBuf, size: usize) -> Result<()> {
        check_room(dst, size, "transfer")?;
        check_room(src, size, "transfer")?;
        self.dev.copy_device(dst.addr, src.addr, size)
    }
    fn synchronize(&self) -> Result<()> {
        self.dev.synchronize()
    }
}

/// Loads binaries as [`VendorProgram`]s.
pub struct VendorRuntime {
    dev: Arc<dyn VendorDevice>,
}

impl VendorRuntime {
    pub fn new(dev: Arc<dyn VendorDevice>) -> VendorRuntime {
        VendorRuntime { dev }
    }
}

impl Runtime for VendorRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        let module = self.dev.load_module(lib)?;
        let function = match self.dev.function(module, name) {
            Ok(f) => f,
            Err(e) => {
                let _ = self.dev.unload_module(module);
                return Err(e);
            }
        };
        Ok(Box::new(VendorProgram {
            dev: Arc::clone(&self.dev),
            name: name.to_string(),
            module,
            function,
        }))
    }
    fn has_graph(&self) -> bool {
        self.dev.has_graph()
    }
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        let g = graph::VendorGraph::build(&self.dev, prgs, calls)?;
        Ok(g.map(|g| Box::new(g) as Box<dyn DeviceGraph>))
    }
}

/// One loaded kernel.
pub struct VendorProgram {
    dev: Arc<dyn VendorDevice>,
    name: String,
    module: u64,
    function: u64,
}

impl Drop for VendorProgram {
    fn drop(&mut self) {
        let _ = self.dev.unload_module(self.module);
    }
}

impl VendorProgram {
    fn timed_launch(
        &self,
        bufs: &[DevPtr],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<f64> {
        let start = self.dev.event_record()?;
        let run = self
            .dev
            .launch(self.function, bufs, vals, grid, block)
            .and_then(|_| self.dev.event_record());
        let end = match run {
            Ok(e) => e,
            Err(e) => {
                let _ = self.dev.event_destroy(start);
                return Err(e);
            }
        };
        let t = self
            .dev
            .event_synchronize(end)
            .and_then(|_| self.dev.event_elapsed(start, end));
        let _ = self.dev.event_destroy(start);
        let _ = self.dev.event_destroy(end);
        t
    }
}

impl Program for VendorProgram {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn call(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: Option<LaunchDims>,
        local: Option<LaunchDims>,
        wait: bool,
    ) -> Result<Option<f64>> {
        let addrs: Vec<DevPtr> = bufs.iter().map(|b| b.addr).collect();
        let vals = int_params(vals)?;
        let grid = launch_dims(global, "global")?;
        let block = launch_dims(local, "local")?;
        let ctx = |e: Error| {
            Error::Device(format!(
                "{} {}: {}",
                self.dev.family(),
                self.name,
                e.message()
            ))
        };
        if wait {
            return self
                .timed_launch(&addrs, &vals, grid, block)
                .map(Some)
                .map_err(ctx);
        }
        self.dev
            .launch(self.function, &addrs, &vals, grid, block)
            .map_err(ctx)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests;
