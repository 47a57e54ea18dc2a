//! The `CUDA` device family: the CUDA driver API (libcuda through dlopen, [`crate::ffi::cuda`])
//! as a [`VendorDevice`], with the NV compiler ([`NVCompiler`]) for the device's `sm_XX` and its
//! renderer (CUDA C for NVRTC, NVPTX LLVM IR for the PTX paths). `CUDA=1` (or `DEVICE=CUDA:1`)
//! selects it.
//!
//! Opening `CUDA[:n]`: load libcuda (`cuInit`), retain device n's primary context, make a stream,
//! find a compiler. Each step's failure is the open's error, naming what is missing (no driver
//! library, no such device, no NVIDIA compiler), and the registry moves on to the next family
//! when probing.
//!
//! Not guaranteed: the LRU cache holds freed device memory for reuse like tinygrad's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{pack_params, DevPtr, KernelNode, VendorAllocator, VendorDevice, VendorRuntime};
use crate::device::{Compiled, LruAllocator};
use crate::ffi::cuda::{CudaContext, CudaGraph, CudaLib};
use crate::runtime::nv::compiler::NVCompiler;
use crate::{Error, Result};

/// A CUDA device through the driver API.
#[derive(Debug)]
pub struct CudaDevice {
    ctx: CudaContext,
    /// The built CUDA graphs by their executable graph's handle.
    graphs: Mutex<HashMap<u64, CudaGraph>>,
}

impl CudaDevice {
    /// Device `ordinal` (loads and initializes libcuda on first use).
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        let lib = CudaLib::load()?;
        Ok(CudaDevice {
            ctx: CudaContext::open(&lib, ordinal)?,
            graphs: Mutex::new(HashMap::new()),
        })
    }

    /// The SM version (90 for sm_90).
    pub fn sm(&self) -> u32 {
        self.ctx.sm()
    }
}

impl VendorDevice for CudaDevice {
    fn family(&self) -> &str {
        "CUDA"
    }
    fn name(&self) -> &str {
        self.ctx.name()
    }
    fn arch(&self) -> String {
        format!("sm_{}", self.ctx.sm())
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
        self.ctx.copy_in_async(dst, src)
    }
    fn copy_out(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        self.ctx.copy_out_async(dst, src)
    }
    fn copy_device(&self, dst: DevPtr, src: DevPtr, size: usize) -> Result<()> {
        self.ctx.copy_device(dst, src, size)
    }
    fn load_module(&self, binary: &[u8]) -> Result<u64> {
        self.ctx.load_module(binary)
    }
    fn unload_module(&self, module: u64) -> Result<()> {
        self.ctx.unload_module(module)
    }
    fn function(&self, module: u64, name: &str) -> Result<u64> {
        self.ctx.function(module, name)
    }
    fn launch(
        &self,
        function: u64,
        bufs: &[DevPtr],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()> {
        self.ctx
            .launch(function, &pack_params(bufs, vals), grid, block, 0)
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
    fn has_graph(&self) -> bool {
        true
    }
    fn graph_build(&self, nodes: &[KernelNode]) -> Result<u64> {
        let g = self.ctx.graph_build(nodes)?;
        let h = g.exec;
        self.graphs_lock().insert(h, g);
        Ok(h)
    }
    fn graph_set_node(&self, graph: u64, i: usize, node: &KernelNode) -> Result<()> {
        let graphs = self.graphs_lock();
        self.ctx.graph_set_node(known(&graphs, graph)?, i, node)
    }
    fn graph_launch(&self, graph: u64) -> Result<()> {
        let graphs = self.graphs_lock();
        self.ctx.graph_launch(known(&graphs, graph)?)
    }
    fn graph_destroy(&self, graph: u64) -> Result<()> {
        let g = self.graphs_lock().remove(&graph);
        let g = g.ok_or_else(|| Error::Device(format!("CUDA: no graph {graph:#x}")))?;
        self.ctx.graph_destroy(&g)
    }
}

impl CudaDevice {
    fn graphs_lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, CudaGraph>> {
        self.graphs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn known(graphs: &HashMap<u64, CudaGraph>, h: u64) -> Result<&CudaGraph> {
    graphs
        .get(&h)
        .ok_or_else(|| Error::Device(format!("CUDA: no graph {h:#x}")))
}

/// The device ordinal of `CUDA[:n]`.
pub fn cuda_ordinal(name: &str) -> Result<usize> {
    crate::device::registry::device_index(name)
}

/// Open `CUDA[:n]` for the registry.
pub fn open_cuda(name: &str) -> Result<Compiled> {
    let unavailable = |e: Error| Error::Device(format!("{name} is unavailable: {}", e.message()));
    let dev = CudaDevice::open(cuda_ordinal(name)?).map_err(unavailable)?;
    let compiler = NVCompiler::new("CUDA", dev.sm()).map_err(unavailable)?;
    let renderer = compiler.renderer();
    let dev: Arc<dyn VendorDevice> = Arc::new(dev);
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(VendorAllocator::new(Arc::clone(&dev)))),
        compiler: Arc::new(compiler),
        runtime: Arc::new(VendorRuntime::new(dev)),
        renderer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::builtin::open_device;

    /// data0[gidx0] = data1[gidx0] + n on 4 blocks, read back.
    fn run_a_kernel(dev: &Compiled, src: &crate::device::RawBuf) {
        use crate::codegen::uops::UOp;
        use crate::dtype::dtypes;
        use crate::ops::BinaryOps;
        let i = dtypes::int32;
        let (d0, d1) = (
            UOp::define_global(i, 0, true),
            UOp::define_global(i, 1, false),
        );
        let n = UOp::define_var("n", 0, 100);
        let g = UOp::special(0, "gidx0", 4);
        let x = UOp::load(&d1, &g, i);
        let y = UOp::alu(BinaryOps::ADD, i, vec![x.clone(), n.clone()]);
        let st = UOp::store(&d0, &g, &y);
        let uops = [d0, d1, n, g, x, y, st];
        let code = dev.renderer.render("E_4", &uops).unwrap();
        let lib = dev.compiler.compile(&code).unwrap();
        let prg = dev.runtime.load("E_4", &lib).unwrap();
        let opts = crate::device::BufferOptions::default();
        let out = dev.allocator.alloc(16, &opts).unwrap();
        let t = prg
            .call(
                &[out.clone(), src.clone()],
                &[3],
                Some([4, 1, 1]),
                None,
                true,
            )
            .unwrap();
        assert!(t.unwrap() >= 0.0);
        let mut got = [0u8; 16];
        dev.allocator.copyout(&mut got, &out).unwrap();
        let want: Vec<u8> = (0..4)
            .flat_map(|_| (0x0707_0707i32 + 3).to_le_bytes())
            .collect();
        assert_eq!(got.to_vec(), want);
        dev.allocator.free(out, 16, &opts);
    }

    #[test]
    fn ordinals() {
        assert_eq!(cuda_ordinal("CUDA").unwrap(), 0);
        assert_eq!(cuda_ordinal("CUDA:2").unwrap(), 2);
        assert!(cuda_ordinal("CUDA:x").is_err());
    }

    /// Without libcuda (this machine) the family is registered and says why it cannot open; with
    /// it, a kernel compiled by the NV compiler runs and its result comes back.
    #[test]
    fn opens_or_says_why_not() {
        match open_device("CUDA") {
            Err(e) => {
                let m = e.message();
                assert!(m.contains("CUDA is unavailable"), "{m}");
                println!("skipped: {m}");
            }
            Ok(dev) => {
                let opts = crate::device::BufferOptions::default();
                let buf = dev.allocator.alloc(16, &opts).unwrap();
                dev.allocator.copyin(&buf, &[7u8; 16]).unwrap();
                let mut out = [0u8; 16];
                dev.allocator.copyout(&mut out, &buf).unwrap();
                assert_eq!(out, [7u8; 16]);
                run_a_kernel(&dev, &buf);
                dev.allocator.free(buf, 16, &opts);
            }
        }
    }
}
