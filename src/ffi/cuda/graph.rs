//! CUDA graphs through the driver API (`cuGraphCreate`, `cuGraphAddKernelNode`,
//! `cuGraphInstantiateWithFlags`, `cuGraphExecKernelNodeSetParams`, `cuGraphLaunch`), for the
//! vendor fallback's graph: a chain of kernel nodes, each depending on the one before (the order
//! of the stream), instantiated once, its nodes' parameters replaced in the executable graph on
//! a replay, launched on the context's stream.
//!
//! [`KernelNodeParams`] is `CUDA_KERNEL_NODE_PARAMS` (the first version of the struct, which the
//! unsuffixed entry points take): `CUfunction func; unsigned int gridDimX, gridDimY, gridDimZ,
//! blockDimX, blockDimY, blockDimZ, sharedMemBytes; void **kernelParams; void **extra;` (56 bytes
//! on 64-bit hosts, pinned by a test). Parameters go through `extra` as the packed buffer, as
//! [`CudaContext::launch`] passes them.
//!
//! Not guaranteed: the entry points are looked up when a graph is first built; a driver without
//! them (before CUDA 11.4) gives an error then, not at load time.

use std::ffi::{c_uint, c_void};
use std::sync::OnceLock;

use super::{CuResult, CudaContext, CudaLib, Ptr};
use super::{LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE, LAUNCH_PARAM_END};
use crate::{Error, Result};

/// `CUDA_KERNEL_NODE_PARAMS` (see the module doc).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelNodeParams {
    pub func: *mut c_void,
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub kernel_params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
}

/// The graph entry points (signatures of `cuda.h`, CUDA 11.4-13).
struct GraphApi {
    create: unsafe extern "C" fn(*mut Ptr, c_uint) -> CuResult,
    add_kernel_node:
        unsafe extern "C" fn(*mut Ptr, Ptr, *const Ptr, usize, *const KernelNodeParams) -> CuResult,
    instantiate: unsafe extern "C" fn(*mut Ptr, Ptr, u64) -> CuResult,
    exec_set_params: unsafe extern "C" fn(Ptr, Ptr, *const KernelNodeParams) -> CuResult,
    launch: unsafe extern "C" fn(Ptr, Ptr) -> CuResult,
    exec_destroy: unsafe extern "C" fn(Ptr) -> CuResult,
    destroy: unsafe extern "C" fn(Ptr) -> CuResult,
}

fn graph_api(lib: &CudaLib) -> Result<&'static GraphApi> {
    static API: OnceLock<std::result::Result<GraphApi, String>> = OnceLock::new();
    let api = API.get_or_init(|| {
        let d = |e: Error| format!("CUDA graphs: {}", e.message());
        // SAFETY: each type is the signature `cuda.h` declares for the named symbol; the
        // unsuffixed kernel-node functions take the first `CUDA_KERNEL_NODE_PARAMS` layout.
        unsafe {
            Ok(GraphApi {
                create: lib.lib.get(&["cuGraphCreate"]).map_err(d)?,
                add_kernel_node: lib.lib.get(&["cuGraphAddKernelNode"]).map_err(d)?,
                instantiate: lib.lib.get(&["cuGraphInstantiateWithFlags"]).map_err(d)?,
                exec_set_params: lib
                    .lib
                    .get(&["cuGraphExecKernelNodeSetParams"])
                    .map_err(d)?,
                launch: lib.lib.get(&["cuGraphLaunch"]).map_err(d)?,
                exec_destroy: lib.lib.get(&["cuGraphExecDestroy"]).map_err(d)?,
                destroy: lib.lib.get(&["cuGraphDestroy"]).map_err(d)?,
            })
        }
    });
    api.as_ref().map_err(|m| Error::Device(m.clone()))
}

/// One kernel node: function, packed parameters, grid and block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelNode {
    pub function: u64,
    pub params: Vec<u8>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

/// Call `f` with the node's `CUDA_KERNEL_NODE_PARAMS` (alive for the call only).
fn with_params<T>(n: &KernelNode, f: impl FnOnce(&KernelNodeParams) -> T) -> T {
    let mut size = n.params.len();
    let mut extra: [Ptr; 5] = [
        LAUNCH_PARAM_BUFFER_POINTER as Ptr,
        n.params.as_ptr() as Ptr,
        LAUNCH_PARAM_BUFFER_SIZE as Ptr,
        (&mut size as *mut usize).cast::<c_void>(),
        LAUNCH_PARAM_END as Ptr,
    ];
    let p = KernelNodeParams {
        func: n.function as Ptr,
        grid: n.grid,
        block: n.block,
        shared_mem_bytes: 0,
        kernel_params: std::ptr::null_mut(),
        extra: extra.as_mut_ptr(),
    };
    f(&p)
}

/// A built and instantiated graph: (graph, executable graph, nodes in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaGraph {
    pub graph: u64,
    pub exec: u64,
    pub nodes: Vec<u64>,
}

impl CudaContext {
    /// A graph of `nodes`, each depending on the one before, instantiated.
    pub fn graph_build(&self, nodes: &[KernelNode]) -> Result<CudaGraph> {
        self.current()?;
        let api = graph_api(&self.lib)?;
        let mut graph: Ptr = std::ptr::null_mut();
        // SAFETY: writes one graph handle (flags must be 0).
        let rc = unsafe { (api.create)(&mut graph, 0) };
        self.lib.check(rc, "cuGraphCreate")?;
        let mut out = CudaGraph {
            graph: graph as u64,
            exec: 0,
            nodes: Vec::with_capacity(nodes.len()),
        };
        let built = self
            .graph_add(api, graph, nodes, &mut out.nodes)
            .and_then(|_| {
                let mut exec: Ptr = std::ptr::null_mut();
                // SAFETY: writes one executable graph handle; `graph` is live.
                let rc = unsafe { (api.instantiate)(&mut exec, graph, 0) };
                self.lib.check(rc, "cuGraphInstantiateWithFlags")?;
                out.exec = exec as u64;
                Ok(())
            });
        if let Err(e) = built {
            // SAFETY: the graph was created above and is destroyed once, here.
            unsafe { (api.destroy)(graph) };
            return Err(e);
        }
        Ok(out)
    }

    fn graph_add(
        &self,
        api: &GraphApi,
        graph: Ptr,
        nodes: &[KernelNode],
        out: &mut Vec<u64>,
    ) -> Result<()> {
        for (i, n) in nodes.iter().enumerate() {
            let dep: Ptr = out.last().map_or(std::ptr::null_mut(), |&d| d as Ptr);
            let ndeps = usize::from(!out.is_empty());
            let mut node: Ptr = std::ptr::null_mut();
            // SAFETY: `graph` is live; `dep` is the previous node (or none, with 0 deps); the
            // params and the buffers they point to live for the call, which copies them.
            let rc = with_params(n, |p| unsafe {
                (api.add_kernel_node)(&mut node, graph, &dep, ndeps, p)
            });
            self.lib
                .check(rc, &format!("cuGraphAddKernelNode(node {i})"))?;
            out.push(node as u64);
        }
        Ok(())
    }

    /// Replace a node's parameters in the executable graph.
    pub fn graph_set_node(&self, g: &CudaGraph, i: usize, n: &KernelNode) -> Result<()> {
        let node = *g.nodes.get(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "CUDA graph of {} nodes: no node {i}",
                g.nodes.len()
            ))
        })?;
        self.current()?;
        let api = graph_api(&self.lib)?;
        // SAFETY: both handles come from `graph_build`; the params live for the call.
        let rc = with_params(n, |p| unsafe {
            (api.exec_set_params)(g.exec as Ptr, node as Ptr, p)
        });
        self.lib
            .check(rc, &format!("cuGraphExecKernelNodeSetParams(node {i})"))
    }

    /// Launch the executable graph on the context's stream.
    pub fn graph_launch(&self, g: &CudaGraph) -> Result<()> {
        self.current()?;
        let api = graph_api(&self.lib)?;
        // SAFETY: the executable graph and the stream are live.
        let rc = unsafe { (api.launch)(g.exec as Ptr, self.stream()) };
        self.lib.check(rc, "cuGraphLaunch")
    }

    /// Destroy the executable graph and the graph.
    pub fn graph_destroy(&self, g: &CudaGraph) -> Result<()> {
        self.current()?;
        let api = graph_api(&self.lib)?;
        // SAFETY: both handles come from `graph_build` and are destroyed once, by the owner.
        let rc = unsafe { (api.exec_destroy)(g.exec as Ptr) };
        self.lib.check(rc, "cuGraphExecDestroy")?;
        // SAFETY: as above.
        let rc = unsafe { (api.destroy)(g.graph as Ptr) };
        self.lib.check(rc, "cuGraphDestroy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_node_params_have_the_cuda_h_layout() {
        assert_eq!(std::mem::size_of::<KernelNodeParams>(), 56);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, grid), 8);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, block), 20);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, shared_mem_bytes), 32);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, kernel_params), 40);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, extra), 48);
    }
}
