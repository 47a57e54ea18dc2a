//! `HcqGraph` over two emulated GPUs: a kernel on GPU 0, a transfer to GPU 1 and a kernel there
//! replay with new values, inputs and dims as one submission per queue; a copy left without its
//! wait for the kernel writing its source copies stale data (so the wait is what orders them);
//! a fault on the second GPU mid-run is a named error and both GPUs work after it. The checks
//! are shared with the NV tests.

use std::sync::Arc;

use super::graph::{i32_bytes, i32s};
use super::*;
use crate::device::{DeviceGraph, GraphCall, Launch, Xfer};
use crate::hcq::allocator::hcq_mem;
use crate::hcq::graph::tests::{DROP_DEP, START_BASE};
use crate::hcq::{HcqBackend, HcqBuffer, HcqDevice, HcqSignal, HwQueue};
use crate::Error;

/// Two devices of one process, `prgs[i]` = `axpb_uops(2, 16)` loaded on `devs[i]` (32 int32:
/// out = in * n + m), `doorbells(i)` = doorbell writes on device `i` so far.
pub(crate) struct Two<'a, B: HcqBackend> {
    pub devs: [Arc<HcqDevice<B>>; 2],
    pub prgs: [Arc<dyn Program>; 2],
    pub doorbells: &'a dyn Fn(usize) -> usize,
}

const BYTES: usize = 128;

fn kernel(out: &RawBuf, input: &RawBuf, m: i64, n: i64, groups: usize) -> GraphCall {
    GraphCall::Kernel {
        launch: Launch {
            raws: vec![out.clone(), input.clone()],
            vals: vec![m, n],
            global: Some([groups, 1, 1]),
            local: Some([16, 1, 1]),
        },
        writes: vec![0],
    }
}

fn xfer(dst: &RawBuf, src: &RawBuf) -> GraphCall {
    GraphCall::Xfer(Xfer {
        dst: dst.clone(),
        src: src.clone(),
        size: BYTES,
    })
}

fn upload<B: HcqBackend>(a: &HcqAllocator<B>, v: &[i32]) -> RawBuf {
    let b = a.alloc(BYTES, &BufferOptions::default()).unwrap();
    a.copyin(&b, &i32_bytes(v)).unwrap();
    b
}

fn download<B: HcqBackend>(a: &HcqAllocator<B>, b: &RawBuf) -> Vec<i32> {
    let mut out = vec![0u8; BYTES];
    a.copyout(&mut out, b).unwrap();
    i32s(&out)
}

/// The chain `mid0 = f(in) on GPU 0; mid1 <- mid0; out = f(mid1) on GPU 1`.
struct Chain<B: HcqBackend> {
    a: [HcqAllocator<B>; 2],
    ins: [RawBuf; 2],
    mid0: RawBuf,
    mid1: RawBuf,
    out: RawBuf,
    xs: [Vec<i32>; 2],
}

impl<B: HcqBackend> Chain<B> {
    fn new(t: &Two<'_, B>) -> Self {
        let a = t.devs.clone().map(HcqAllocator::new);
        let xs: [Vec<i32>; 2] = [
            (0..32).map(|i| i - 10).collect(),
            (0..32).map(|i| 3 * i).collect(),
        ];
        let ins = [upload(&a[0], &xs[0]), upload(&a[0], &xs[1])];
        let (mid0, mid1, out) = (
            upload(&a[0], &[0; 32]),
            upload(&a[1], &[0; 32]),
            upload(&a[1], &[0; 32]),
        );
        for d in &t.devs {
            d.synchronize().unwrap();
        }
        Chain {
            a,
            ins,
            mid0,
            mid1,
            out,
            xs,
        }
    }

    fn calls(&self, input: usize, m: i64, n: i64, groups: usize) -> Vec<GraphCall> {
        vec![
            kernel(&self.mid0, &self.ins[input], m, n, groups),
            xfer(&self.mid1, &self.mid0),
            kernel(&self.out, &self.mid1, m, n, groups),
        ]
    }

    fn check(&self, input: usize, m: i64, n: i64, groups: usize) {
        let f = |v: i32| v * n as i32 + m as i32;
        let covered = groups * 16;
        let got = download(&self.a[1], &self.out);
        let want: Vec<i32> = self.xs[input][..covered].iter().map(|&v| f(f(v))).collect();
        assert_eq!(
            &got[..covered],
            &want[..],
            "input={input} m={m} n={n} groups={groups}"
        );
    }
}

fn build<B: HcqBackend>(t: &Two<'_, B>, calls: &[GraphCall]) -> Box<dyn DeviceGraph> {
    crate::hcq::graph::build::<B>(&t.prgs, calls)
        .unwrap()
        .expect("an HCQ graph over two devices")
}

/// Replays with new values, input and dims give the eager answers, each run one submission per
/// queue: GPU 0's compute and copy queues, GPU 1's compute queue.
pub(crate) fn check_multi_graph<B: HcqBackend>(t: &Two<'_, B>) {
    let c = Chain::new(t);
    let g = build(t, &c.calls(0, 1, 2, 2));
    for (input, m, n, groups) in [(0, 1, 2, 2), (0, 3, -1, 2), (1, 0, 5, 2), (1, 2, 3, 1)] {
        let before = [(t.doorbells)(0), (t.doorbells)(1)];
        g.run(&c.calls(input, m, n, groups), false).unwrap();
        let after = [(t.doorbells)(0), (t.doorbells)(1)];
        assert_eq!(
            [after[0] - before[0], after[1] - before[1]],
            [2, 1],
            "one submission per queue per run"
        );
        c.check(input, m, n, groups);
    }
    let e = g.run(&c.calls(0, 1, 2, 2)[..2], false).unwrap_err();
    assert!(e.message().contains("run with 2 calls"), "{e}");
    // the graph's signal values restart below 2^31: the second run here restarts them
    START_BASE.with(|b| b.set(Some((1 << 31) - 5)));
    let g = build(t, &c.calls(0, 1, 2, 2));
    START_BASE.with(|b| b.set(None));
    for (input, m, n) in [(0, 1, 2), (1, 2, 1), (0, -3, 2)] {
        g.run(&c.calls(input, m, n, 2), false).unwrap();
        c.check(input, m, n, 2);
    }
}

/// Block `dev`'s timeline until `gate` reaches 1 (a submission through the device).
fn gate_timeline<B: HcqBackend>(dev: &HcqDevice<B>, gate: &B::Signal) {
    let mut st = dev.lock();
    let v = dev.begin(&mut st).unwrap();
    let tl = st.tl.signal.clone();
    let mut q = dev.backend().compute_queue();
    q.wait(&tl, v - 1)
        .unwrap()
        .wait(gate, 1)
        .unwrap()
        .signal(&tl, v)
        .unwrap();
    dev.commit(&mut st, &mut q, "test gate".to_string(), Vec::new())
        .unwrap();
}

/// `g <- in (GPU 1 to GPU 0); mid = f(g) on GPU 0; out <- mid (host memory)`, with GPU 1 held
/// back so the kernel cannot run yet: the last copy waits for the kernel; built without that
/// wait (`drop_wait`), it copies the stale `mid` while the kernel is still held.
pub(crate) fn check_copy_waits_for_its_source<B: HcqBackend>(t: &Two<'_, B>, drop_wait: bool) {
    let a = t.devs.clone().map(HcqAllocator::new);
    let x: Vec<i32> = (0..32).collect();
    let input = upload(&a[1], &x);
    let (g0, mid) = (upload(&a[0], &[0; 32]), upload(&a[0], &[7; 32]));
    let host = BufferOptions {
        host: true,
        cpu_access: true,
        ..Default::default()
    };
    let out = a[0].alloc(BYTES, &host).unwrap();
    a[0].copyin(&out, &[0; BYTES]).unwrap();
    for d in &t.devs {
        d.synchronize().unwrap();
    }
    let calls = [
        xfer(&g0, &input),
        kernel(&mid, &g0, 1, 2, 2),
        xfer(&out, &mid),
    ];
    DROP_DEP.with(|d| d.set(drop_wait.then_some((2, 1))));
    let g = crate::hcq::graph::build::<B>(&t.prgs[..1], &calls)
        .unwrap()
        .expect("a graph");
    DROP_DEP.with(|d| d.set(None));
    let gate = t.devs[1].new_signal(0).unwrap();
    gate_timeline(&t.devs[1], &gate);
    g.run(&calls, false).unwrap();
    let view = hcq_mem::<B>(&out)
        .unwrap()
        .buffer()
        .cpu()
        .expect("host memory");
    let read = || {
        let mut b = vec![0u8; BYTES];
        view.read_bytes(0, &mut b).unwrap();
        i32s(&b)
    };
    if drop_wait {
        // the copy runs at once: wait (bounded) until it has copied the stale data
        let deadline = std::time::Instant::now() + crate::hcq::wait_timeout();
        while read() != vec![7; 32] && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
    gate.set_value(1).unwrap();
    for d in &t.devs {
        d.synchronize().unwrap();
    }
    let fresh: Vec<i32> = x.iter().map(|v| 2 * v + 1).collect();
    let want = if drop_wait { vec![7; 32] } else { fresh };
    assert_eq!(read(), want, "drop_wait={drop_wait}");
}

/// A run whose GPU 1 kernel writes to an unmapped address: the wait fails with a fault naming
/// GPU 1; both GPUs then run the graph (and an eager kernel) again with the right answers.
pub(crate) fn check_fault_on_second_gpu<B: HcqBackend>(t: &Two<'_, B>) {
    let c = Chain::new(t);
    let g = build(t, &c.calls(0, 1, 2, 2));
    g.run(&c.calls(0, 1, 2, 2), true).unwrap();
    c.check(0, 1, 2, 2);
    let mut bad = c.calls(1, 1, 2, 2);
    if let GraphCall::Kernel { launch, .. } = &mut bad[2] {
        launch.raws[0].addr += 4_000_000_000;
    }
    let e = g.run(&bad, true).unwrap_err();
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    let name = t.devs[1].name();
    assert!(m.starts_with(&format!("{name}: ")), "names {name}: {m}");
    for d in &t.devs {
        d.synchronize().unwrap();
    }
    // GPU 0's part of the failed run finished: its kernel wrote mid0 from input 1
    let mid0 = download(&c.a[0], &c.mid0);
    let want: Vec<i32> = c.xs[1].iter().map(|v| 2 * v + 1).collect();
    assert_eq!(mid0, want, "GPU 0 unaffected");
    for (input, m, n) in [(1, 4, 1), (0, 1, 2)] {
        g.run(&c.calls(input, m, n, 2), true).unwrap();
        c.check(input, m, n, 2);
    }
    let extra = upload(&c.a[1], &[5; 32]);
    t.prgs[1]
        .call(
            &[extra.clone(), c.out.clone()],
            &[0, 1],
            Some([2, 1, 1]),
            Some([16, 1, 1]),
            true,
        )
        .unwrap();
    assert_eq!(
        download(&c.a[1], &extra),
        download(&c.a[1], &c.out),
        "eager after the fault"
    );
}

fn two_amd() -> (Vec<Arc<AmdDevice>>, EmuDriver) {
    let (p, e) = mock_process(2, "gfx1100");
    (vec![open(&p, 0), open(&p, 1)], e)
}

/// Runs `f` over two emulated AMD GPUs.
fn with_two(f: impl Fn(&Two<'_, super::super::AmdBackend>)) {
    let (devs, emu) = two_amd();
    let prgs: Vec<Arc<dyn Program>> = devs
        .iter()
        .map(|d| load(d, "E_axpb", &axpb_uops(2, 16)))
        .collect();
    let ids = emu.gpu_ids();
    let doorbells = |i: usize| emu.doorbell_writes(ids[i]).unwrap().len();
    f(&Two {
        devs: [devs[0].clone(), devs[1].clone()],
        prgs: [prgs[0].clone(), prgs[1].clone()],
        doorbells: &doorbells,
    });
}

/// The tests over `$with_two` (runs a check over two devices of one backend), for AMD and NV.
macro_rules! multigraph_tests {
    ($with_two:ident) => {
        use $crate::runtime::amd::tests::multigraph as mg;

        #[test]
        fn a_graph_over_two_gpus_replays_as_one_submission_per_queue() {
            $with_two(mg::check_multi_graph);
        }

        #[test]
        fn a_copy_waits_for_the_kernel_writing_its_source() {
            $with_two(|t| mg::check_copy_waits_for_its_source(t, false));
            $with_two(|t| mg::check_copy_waits_for_its_source(t, true));
        }

        #[test]
        fn a_fault_on_the_second_gpu_is_named_and_both_recover() {
            $with_two(mg::check_fault_on_second_gpu);
        }
    };
}
pub(crate) use multigraph_tests;

multigraph_tests!(with_two);
