//! `HcqGraph` on the emulated GPU: a run of a three-kernel graph is one submission (one doorbell
//! write), and runs with new variable values, a new input address and new launch dims give the
//! eager answers. [`check_graph`] is shared with the NV tests.

use std::sync::Arc;

use super::*;
use crate::device::{GraphCall, Launch, RawBuf};
use crate::hcq::{HcqBackend, HcqDevice};

pub(super) fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `prg` is `axpb_uops(2, 16)` (32 int32: out = in * n + m, variables in name order (m, n));
/// `doorbells` counts the device's doorbell writes so far.
pub(crate) fn check_graph<B: HcqBackend>(
    dev: &Arc<HcqDevice<B>>,
    prg: &dyn Program,
    doorbells: &dyn Fn() -> usize,
) {
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..5)
        .map(|_| a.alloc(128, &BufferOptions::default()).unwrap())
        .collect();
    let (x, y): (Vec<i32>, Vec<i32>) = ((0..32).map(|i| i - 10).collect(), (0..32).collect());
    a.copyin(&bufs[0], &i32_bytes(&x)).unwrap();
    a.copyin(&bufs[4], &i32_bytes(&y)).unwrap();
    dev.synchronize().unwrap();
    // three chained kernels: bufs[1] = f(bufs[0]); bufs[2] = f(bufs[1]); bufs[3] = f(bufs[2])
    let launch = |k: usize, input: &RawBuf, m: i64, n: i64, groups: usize| GraphCall::Kernel {
        launch: Launch {
            raws: vec![
                bufs[k + 1].clone(),
                if k == 0 { input } else { &bufs[k] }.clone(),
            ],
            vals: vec![m, n],
            global: Some([groups, 1, 1]),
            local: Some([16, 1, 1]),
        },
        writes: vec![0],
    };
    let prgs = [prg, prg, prg];
    let first: Vec<GraphCall> = (0..3).map(|k| launch(k, &bufs[0], 1, 2, 2)).collect();
    let g = crate::hcq::graph::build::<B>(&prgs, &first)
        .unwrap()
        .expect("an HCQ graph");
    for (m, n, input, groups) in [(1, 2, 0, 2), (3, -1, 0, 2), (0, 5, 4, 2), (2, 3, 4, 1)] {
        let launches: Vec<GraphCall> = (0..3)
            .map(|k| launch(k, &bufs[input], m, n, groups))
            .collect();
        let before = doorbells();
        g.run(&prgs, &launches, false).unwrap();
        assert_eq!(doorbells() - before, 1, "one submission per run");
        dev.synchronize().unwrap();
        let mut out = vec![0u8; 128];
        a.copyout(&mut out, &bufs[3]).unwrap();
        let src = if input == 0 { &x } else { &y };
        let covered = groups * 16;
        let f = |v: i32| v * n as i32 + m as i32;
        let got = i32s(&out);
        let want: Vec<i32> = src[..covered].iter().map(|&v| f(f(f(v)))).collect();
        assert_eq!(
            &got[..covered],
            &want[..],
            "m={m} n={n} input={input} groups={groups}"
        );
    }
}

#[test]
fn hcq_graph_runs_are_one_submission_with_patched_kernargs_and_dims() {
    let (dev, emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let gpu = dev.backend().gpu_id();
    check_graph(&dev, &*prg, &|| emu.doorbell_writes(gpu).unwrap().len());
}
