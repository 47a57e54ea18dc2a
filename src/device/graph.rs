//! Device graphs, the seam under the JIT's graph runners (tinygrad's `Compiled.graph`): a batch of
//! kernel launches built once ([`crate::device::Runtime::graph`]) and run many times with new
//! buffer addresses, variable values and launch dims ([`DeviceGraph::run`]).
//!
//! [`CallGraph`] is the graph of devices whose launches are synchronous host calls (CLANG, LLVM):
//! it calls the programs back to back. The HCQ devices build `hcq::graph::HcqGraph`.
//!
//! Not guaranteed: a graph checks the number of launches it is run with, not that the programs
//! are the ones it was built from (its owner keeps them together).

use std::time::Instant;

use super::{LaunchDims, Program, RawBuf};
use crate::{ensure, Result};

/// One kernel launch with every argument resolved.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The buffers as the program takes them.
    pub raws: Vec<RawBuf>,
    /// The integer variable values, in the program's order.
    pub vals: Vec<i64>,
    pub global: Option<LaunchDims>,
    pub local: Option<LaunchDims>,
}

/// A batch of launches built once and run many times.
pub trait DeviceGraph: Send + Sync {
    /// Run the launches in order (the programs and count of the build; addresses, values and
    /// dims may differ). With `wait`, block until done and return the elapsed seconds.
    fn run(&self, prgs: &[&dyn Program], launches: &[Launch], wait: bool) -> Result<Option<f64>>;
}

/// The host-call graph: every launch is one synchronous call of its program.
pub struct CallGraph {
    pub len: usize,
}

impl DeviceGraph for CallGraph {
    fn run(&self, prgs: &[&dyn Program], launches: &[Launch], wait: bool) -> Result<Option<f64>> {
        ensure!(
            prgs.len() == self.len && launches.len() == self.len,
            Runtime,
            "graph of {} launches run with {} programs and {} launches",
            self.len,
            prgs.len(),
            launches.len()
        );
        let start = Instant::now();
        for (p, l) in prgs.iter().zip(launches) {
            p.call(&l.raws, &l.vals, l.global, l.local, false)?;
        }
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }
}
