//! The generic layer over a host-memory [`VendorDevice`] double: parameter packing, copies,
//! views, launches and timing go through the trait in the order the real runtimes need.

use super::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// A vendor device whose "device memory" is host vectors and whose one kernel, `add1`, adds the
/// 4-byte int parameter to every byte of the first buffer; it logs every call. Its graphs (as
/// CUDA's: kernel nodes in order, node parameters replaced in the executable graph, one launch
/// running every node) run each node as `launch` runs a kernel.
#[derive(Default)]
struct HostDevice {
    mem: Mutex<HashMap<u64, Vec<u8>>>,
    log: Mutex<Vec<String>>,
    next: Mutex<u64>,
    graphs: Mutex<HashMap<u64, Vec<KernelNode>>>,
}

impl HostDevice {
    fn note(&self, s: String) {
        self.log.lock().unwrap().push(s);
    }
    /// The allocation holding `ptr` and the offset into it.
    fn find(&self, ptr: u64) -> Result<(u64, usize)> {
        let mem = self.mem.lock().unwrap();
        for (base, v) in mem.iter() {
            if ptr >= *base && ptr < base + v.len() as u64 {
                return Ok((*base, (ptr - base) as usize));
            }
        }
        Err(Error::Device(format!("no allocation at {ptr:#x}")))
    }
}

impl HostDevice {
    /// Run `add1` with its packed parameters (an 8-byte address, a 4-byte int).
    fn add1(&self, function: u64, params: &[u8]) -> Result<()> {
        if function != 7 || params.len() != 12 {
            return Err(Error::Device(format!(
                "no kernel {function} of {} param bytes",
                params.len()
            )));
        }
        let ptr = u64::from_le_bytes(params[0..8].try_into().unwrap());
        let add = i32::from_le_bytes(params[8..12].try_into().unwrap());
        let (base, off) = self.find(ptr)?;
        for b in &mut self.mem.lock().unwrap().get_mut(&base).unwrap()[off..] {
            *b = b.wrapping_add(add as u8);
        }
        Ok(())
    }
}

impl VendorDevice for HostDevice {
    fn family(&self) -> &str {
        "HOSTTEST"
    }
    fn name(&self) -> &str {
        "host double"
    }
    fn arch(&self) -> String {
        "host".into()
    }
    fn alloc(&self, size: usize) -> Result<DevPtr> {
        let mut n = self.next.lock().unwrap();
        *n += 0x10000;
        self.mem.lock().unwrap().insert(*n, vec![0; size]);
        Ok(*n)
    }
    fn free(&self, ptr: DevPtr) -> Result<()> {
        self.note(format!("free {ptr:#x}"));
        self.mem
            .lock()
            .unwrap()
            .remove(&ptr)
            .map(|_| ())
            .ok_or_else(|| Error::Device("double free".into()))
    }
    fn copy_in(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        let (base, off) = self.find(dst)?;
        self.mem.lock().unwrap().get_mut(&base).unwrap()[off..off + src.len()].copy_from_slice(src);
        Ok(())
    }
    fn copy_in_async(&self, dst: DevPtr, src: &[u8]) -> Result<()> {
        self.note(format!("copy_in_async {}", src.len()));
        self.copy_in(dst, src)
    }
    fn copy_out(&self, dst: &mut [u8], src: DevPtr) -> Result<()> {
        let (base, off) = self.find(src)?;
        dst.copy_from_slice(&self.mem.lock().unwrap()[&base][off..off + dst.len()]);
        Ok(())
    }
    fn copy_device(&self, dst: DevPtr, src: DevPtr, size: usize) -> Result<()> {
        let mut tmp = vec![0; size];
        self.copy_out(&mut tmp, src)?;
        self.copy_in(dst, &tmp)
    }
    fn load_module(&self, binary: &[u8]) -> Result<u64> {
        if binary != b"module" {
            return Err(Error::Device("bad module".into()));
        }
        Ok(1)
    }
    fn unload_module(&self, module: u64) -> Result<()> {
        self.note(format!("unload {module}"));
        Ok(())
    }
    fn function(&self, module: u64, name: &str) -> Result<u64> {
        match (module, name) {
            (1, "add1") => Ok(7),
            _ => Err(Error::Device(format!("no kernel {name}"))),
        }
    }
    fn launch(
        &self,
        function: u64,
        bufs: &[DevPtr],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()> {
        let params = pack_params(bufs, vals);
        self.note(format!(
            "launch {function} {} {grid:?} {block:?}",
            params.len()
        ));
        self.add1(function, &params)
    }
    fn synchronize(&self) -> Result<()> {
        self.note("sync".into());
        Ok(())
    }
    fn event_record(&self) -> Result<u64> {
        let n = self.log.lock().unwrap().len() as u64;
        self.note("event".into());
        Ok(n)
    }
    fn event_synchronize(&self, _event: u64) -> Result<()> {
        Ok(())
    }
    fn event_elapsed(&self, start: u64, end: u64) -> Result<f64> {
        Ok((end - start) as f64 * 1e-6)
    }
    fn event_destroy(&self, _event: u64) -> Result<()> {
        Ok(())
    }
    fn has_graph(&self) -> bool {
        true
    }
    fn graph_build(&self, nodes: &[KernelNode]) -> Result<u64> {
        self.note("cuGraphCreate".into());
        for _ in nodes {
            self.note("cuGraphAddKernelNode".into());
        }
        self.note("cuGraphInstantiateWithFlags".into());
        let mut g = self.graphs.lock().unwrap();
        let h = 0x900 + g.len() as u64;
        g.insert(h, nodes.to_vec());
        Ok(h)
    }
    fn graph_set_node(&self, graph: u64, i: usize, node: &KernelNode) -> Result<()> {
        self.note(format!("cuGraphExecKernelNodeSetParams {i}"));
        let mut g = self.graphs.lock().unwrap();
        let nodes = g
            .get_mut(&graph)
            .ok_or_else(|| Error::Device("no graph".into()))?;
        *nodes
            .get_mut(i)
            .ok_or_else(|| Error::Device("no node".into()))? = node.clone();
        Ok(())
    }
    fn graph_launch(&self, graph: u64) -> Result<()> {
        self.note("cuGraphLaunch".into());
        let nodes = self.graphs.lock().unwrap().get(&graph).cloned();
        for n in nodes.ok_or_else(|| Error::Device("no graph".into()))? {
            self.add1(n.function, &n.params)?;
        }
        Ok(())
    }
    fn graph_destroy(&self, graph: u64) -> Result<()> {
        self.note("cuGraphDestroy".into());
        self.graphs
            .lock()
            .unwrap()
            .remove(&graph)
            .map(drop)
            .ok_or_else(|| Error::Device("no graph".into()))
    }
}

#[test]
fn params_are_pointers_then_ints() {
    let p = pack_params(&[0x1122, 0x3344], &[5, -1]);
    assert_eq!(p.len(), 8 * 2 + 4 * 2);
    assert_eq!(&p[0..8], &0x1122u64.to_le_bytes());
    assert_eq!(&p[8..16], &0x3344u64.to_le_bytes());
    assert_eq!(&p[16..20], &5i32.to_le_bytes());
    assert_eq!(&p[20..24], &(-1i32).to_le_bytes());
    assert_eq!(int_params(&[3, -4]).unwrap(), vec![3, -4]);
    let e = int_params(&[1, 1 << 40]).unwrap_err();
    assert!(
        e.message().contains("variable 1") && e.message().contains("32-bit"),
        "{e}"
    );
}

#[test]
fn dims_default_to_one_and_refuse_zero() {
    assert_eq!(launch_dims(None, "global").unwrap(), [1, 1, 1]);
    assert_eq!(launch_dims(Some([4, 2, 1]), "local").unwrap(), [4, 2, 1]);
    assert!(launch_dims(Some([0, 1, 1]), "local").is_err());
    assert!(launch_dims(Some([1 << 33, 1, 1]), "global").is_err());
}

#[test]
fn allocator_runtime_and_program_over_a_vendor_device() {
    let host = Arc::new(HostDevice::default());
    let dev: Arc<dyn VendorDevice> = host.clone();
    let alloc = VendorAllocator::new(Arc::clone(&dev));
    let opts = BufferOptions::default();
    let buf = alloc.alloc(8, &opts).unwrap();
    alloc.copyin(&buf, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert!(alloc.copyin(&buf, &[0; 9]).is_err());
    let view = alloc.offset(&buf, 4, 4).unwrap();
    assert!(alloc.offset(&buf, 8, 4).is_err());
    let rt = VendorRuntime::new(Arc::clone(&dev));
    assert!(rt.load("nope", b"module").is_err());
    let prg: Arc<dyn Program> = rt.load("add1", b"module").unwrap().into();
    assert!(prg
        .call(std::slice::from_ref(&view), &[10], None, None, false)
        .unwrap()
        .is_none());
    let t = prg
        .call(&[view], &[1], Some([2, 1, 1]), Some([32, 1, 1]), true)
        .unwrap();
    assert!(t.unwrap() > 0.0);
    let mut out = [0u8; 8];
    alloc.copyout(&mut out, &buf).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 16, 17, 18, 19]);
    let other = alloc.alloc(8, &opts).unwrap();
    alloc.transfer(&other, &buf, 8).unwrap();
    alloc.copyout(&mut out, &other).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 16, 17, 18, 19]);
    drop(prg);
    alloc.free(buf, 8, &opts);
    let log = host.log.lock().unwrap().clone();
    assert!(
        log.contains(&"launch 7 12 [1, 1, 1] [1, 1, 1]".to_string()),
        "{log:?}"
    );
    assert!(
        log.contains(&"launch 7 12 [2, 1, 1] [32, 1, 1]".to_string()),
        "{log:?}"
    );
    assert!(log.iter().any(|l| l.starts_with("unload")), "{log:?}");
    assert!(log.iter().any(|l| l.starts_with("free")), "{log:?}");
    let ev: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, l)| *l == "event")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ev.len(), 2, "{log:?}");
}

/// The launches of a batch as `GraphCall`s: `add1` on each (buffer, value).
fn add1_calls(bufs: &[RawBuf], batch: &[(usize, i64)]) -> Vec<crate::device::GraphCall> {
    batch
        .iter()
        .map(|&(b, v)| crate::device::GraphCall::Kernel {
            launch: crate::device::Launch {
                raws: vec![bufs[b].clone()],
                vals: vec![v],
                global: Some([1, 1, 1]),
                local: None,
            },
            writes: vec![0],
        })
        .collect()
}

/// The vendor graph (fallback/graph.rs) over the double's CUDA-like graphs: built once, each
/// replay is one graph launch (no kernel launch), only the nodes whose buffers or values changed
/// get new parameters, and the buffers hold what the same launches give run one by one.
#[test]
fn a_graph_replays_with_one_graph_launch_and_the_eager_results() {
    let host = Arc::new(HostDevice::default());
    let dev: Arc<dyn VendorDevice> = host.clone();
    let alloc = VendorAllocator::new(Arc::clone(&dev));
    let opts = BufferOptions::default();
    // buffers 0-2 for the graph, 3-5 for the eager launches
    let bufs: Vec<RawBuf> = (0..6).map(|_| alloc.alloc(4, &opts).unwrap()).collect();
    let rt = VendorRuntime::new(Arc::clone(&dev));
    assert!(rt.has_graph());
    let prg: Arc<dyn Program> = rt.load("add1", b"module").unwrap().into();
    let prgs = vec![prg.clone(); 3];
    let read = |b: &RawBuf| {
        let mut out = [0u8; 4];
        alloc.copyout(&mut out, b).unwrap();
        out
    };
    let first = [(0, 1), (1, 2), (0, 3)];
    let graph = rt
        .graph(&prgs, &add1_calls(&bufs, &first))
        .unwrap()
        .expect("a vendor with graphs builds one");
    let built = host.log.lock().unwrap().clone();
    assert_eq!(
        built,
        [
            "cuGraphCreate",
            "cuGraphAddKernelNode",
            "cuGraphAddKernelNode",
            "cuGraphAddKernelNode",
            "cuGraphInstantiateWithFlags"
        ]
    );
    // three replays, the last two with buffer 0 swapped for buffer 2 and a new value
    let batches = [first, [(2, 1), (1, 2), (2, 5)], [(2, 1), (1, 2), (2, 5)]];
    for (r, batch) in batches.iter().enumerate() {
        host.log.lock().unwrap().clear();
        let t = graph.run(&add1_calls(&bufs, batch), r == 0).unwrap();
        assert_eq!(t.is_some(), r == 0);
        let log = host.log.lock().unwrap().clone();
        assert_eq!(
            log.iter().filter(|l| *l == "cuGraphLaunch").count(),
            1,
            "{log:?}"
        );
        assert!(!log.iter().any(|l| l.starts_with("launch")), "{log:?}");
        let swaps: Vec<&String> = log.iter().filter(|l| l.contains("SetParams")).collect();
        let want: &[&str] = match r {
            1 => &[
                "cuGraphExecKernelNodeSetParams 0",
                "cuGraphExecKernelNodeSetParams 2",
            ],
            _ => &[],
        };
        assert_eq!(swaps, want, "replay {r}");
        assert_eq!(graph.entry_calls(), Some(r as u64 + 1));
        for &(b, v) in batch {
            let raw = std::slice::from_ref(&bufs[b + 3]);
            prg.call(raw, &[v], Some([1, 1, 1]), None, false).unwrap();
        }
        for (i, (g, e)) in bufs[..3].iter().zip(&bufs[3..]).enumerate() {
            assert_eq!(read(g), read(e), "replay {r} buffer {i}");
        }
    }
    assert_eq!(read(&bufs[0]), [4; 4]);
    drop(graph);
    assert!(host
        .log
        .lock()
        .unwrap()
        .contains(&"cuGraphDestroy".to_string()));
}
