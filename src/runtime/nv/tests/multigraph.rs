//! `HcqGraph` over two emulated NV GPUs: the AMD tests' checks (one submission per queue per
//! run, the copy's wait for its source's writer, a fault on the second GPU) on NV's queues.

use std::sync::Arc;

use super::*;
use crate::runtime::amd::tests::multigraph::{
    check_copy_waits_for_its_source, check_fault_on_second_gpu, check_multi_graph, Two,
};

/// Runs `f` over two emulated H200s.
fn with_two(f: impl Fn(&Two<'_, super::super::NvBackend>)) {
    let (p, emu) = mock_nv(2, "hopper", "");
    let devs: [Arc<NvDevice>; 2] = [open(&p, 0), open(&p, 1)];
    let prgs: Vec<Box<dyn Program>> = devs
        .iter()
        .map(|d| load(d, "E_axpb", &axpb_uops(2, 16)))
        .collect();
    let doorbells = |i: usize| emu.nv_doorbell_writes(i).len();
    f(&Two {
        devs,
        prgs: [&*prgs[0], &*prgs[1]],
        doorbells: &doorbells,
    });
}

#[test]
fn a_graph_over_two_gpus_replays_as_one_submission_per_queue() {
    with_two(check_multi_graph);
}

#[test]
fn a_copy_waits_for_the_kernel_writing_its_source() {
    with_two(|t| check_copy_waits_for_its_source(t, false));
    with_two(|t| check_copy_waits_for_its_source(t, true));
}

#[test]
fn a_fault_on_the_second_gpu_is_named_and_both_recover() {
    with_two(check_fault_on_second_gpu);
}
