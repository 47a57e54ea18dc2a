//! The vendor fallback's graph where the vendor runtime has one (CUDA graphs): a batch of kernel
//! launches built once as a vendor graph of kernel nodes in order ([`VendorDevice::graph_build`]),
//! and replayed as one vendor graph launch. A replay packs each call's parameters and launch dims
//! again and replaces the parameters of only the nodes whose packing changed (the JIT's input
//! swaps, new variable values: `cuGraphExecKernelNodeSetParams`), then launches the graph once;
//! with `wait`, it synchronizes the device (the vendor's bounded wait) and returns the host time.
//!
//! Not built (the JIT then replays item by item): a vendor without graphs, a call that is not a
//! kernel, a program not loaded by [`VendorRuntime`].
//!
//! Not guaranteed: the time with `wait` is host time around the launch and the wait, not device
//! time between events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{int_params, launch_dims, pack_params, KernelNode, VendorDevice, VendorProgram};
use crate::device::{DeviceGraph, GraphCall, Program};
use crate::{ensure, Error, Result};

/// A batch of launches as one vendor graph (see the module doc).
pub struct VendorGraph {
    dev: Arc<dyn VendorDevice>,
    handle: u64,
    nodes: Mutex<Vec<KernelNode>>,
    launches: AtomicU64,
}

/// The node of one kernel call, `None` when the call or program cannot be a node.
fn node_of(p: &dyn Program, c: &GraphCall) -> Result<Option<KernelNode>> {
    match p.as_any().and_then(|a| a.downcast_ref::<VendorProgram>()) {
        Some(vp) => node_for(vp.function, c),
        None => Ok(None),
    }
}

/// The node of kernel call `c` of the loaded `function`, `None` when the call is not a kernel.
fn node_for(function: u64, c: &GraphCall) -> Result<Option<KernelNode>> {
    let Some(l) = c.launch() else {
        return Ok(None);
    };
    let addrs: Vec<u64> = l.raws.iter().map(|b| b.addr).collect();
    Ok(Some(KernelNode {
        function,
        params: pack_params(&addrs, &int_params(&l.vals)?),
        grid: launch_dims(l.global, "global")?,
        block: launch_dims(l.local, "local")?,
    }))
}

impl VendorGraph {
    /// The graph of `calls` on `dev`, `None` where it does not apply (see the module doc).
    pub fn build(
        dev: &Arc<dyn VendorDevice>,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<VendorGraph>> {
        if !dev.has_graph() || prgs.len() != calls.len() || calls.is_empty() {
            return Ok(None);
        }
        let mut nodes = Vec::with_capacity(calls.len());
        for (p, c) in prgs.iter().zip(calls) {
            match node_of(&**p, c)? {
                Some(n) => nodes.push(n),
                None => return Ok(None),
            }
        }
        let handle = dev.graph_build(&nodes)?;
        Ok(Some(VendorGraph {
            dev: Arc::clone(dev),
            handle,
            nodes: Mutex::new(nodes),
            launches: AtomicU64::new(0),
        }))
    }
}

impl DeviceGraph for VendorGraph {
    fn run(&self, calls: &[GraphCall], wait: bool) -> Result<Option<f64>> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        ensure!(
            calls.len() == nodes.len(),
            Runtime,
            "vendor graph of {} launches run with {} calls",
            nodes.len(),
            calls.len()
        );
        let start = Instant::now();
        for (i, c) in calls.iter().enumerate() {
            let n = node_for(nodes[i].function, c)?.ok_or_else(|| {
                Error::Runtime(format!(
                    "vendor graph: call {i} is not a kernel of this device"
                ))
            })?;
            if n != nodes[i] {
                self.dev.graph_set_node(self.handle, i, &n)?;
                nodes[i] = n;
            }
        }
        self.dev.graph_launch(self.handle)?;
        self.launches.fetch_add(1, Ordering::Relaxed);
        if !wait {
            return Ok(None);
        }
        self.dev.synchronize()?;
        Ok(Some(start.elapsed().as_secs_f64()))
    }

    fn entry_calls(&self) -> Option<u64> {
        Some(self.launches.load(Ordering::Relaxed))
    }
}

impl Drop for VendorGraph {
    fn drop(&mut self) {
        // `drop` cannot report; a failing destroy (a driver torn down) leaks, said under DEBUG.
        if let Err(e) = self.dev.graph_destroy(self.handle) {
            if crate::helpers::debug() >= 1 {
                eprintln!("{}: graph destroy: {e}", self.dev.family());
            }
        }
    }
}
