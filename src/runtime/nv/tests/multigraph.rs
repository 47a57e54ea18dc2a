//! `HcqGraph` over two emulated NV GPUs: the AMD tests' checks (one submission per queue per
//! run, the copy's wait for its source's writer, a fault on the second GPU) on NV's queues.

use std::sync::Arc;

use super::*;
use crate::runtime::amd::tests::multigraph::Two;

/// Runs `f` over two emulated H200s.
fn with_two(f: impl Fn(&Two<'_, super::super::NvBackend>)) {
    let (p, emu) = mock_nv(2, "hopper", "");
    let devs: [Arc<NvDevice>; 2] = [open(&p, 0), open(&p, 1)];
    let prgs: Vec<Arc<dyn Program>> = devs
        .iter()
        .map(|d| load(d, "E_axpb", &axpb_uops(2, 16)))
        .collect();
    let doorbells = |i: usize| emu.nv_doorbell_writes(i).len();
    f(&Two {
        devs,
        prgs: [prgs[0].clone(), prgs[1].clone()],
        doorbells: &doorbells,
    });
}

crate::runtime::amd::tests::multigraph::multigraph_tests!(with_two);
