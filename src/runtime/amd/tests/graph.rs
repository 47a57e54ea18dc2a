//! `HcqGraph` on the emulated GPU: a run of a three-kernel graph is one submission (one doorbell
//! write), and runs with new variable values, a new input address and new launch dims give the
//! eager answers; a bound compute queue ([`crate::runtime::amd::bound`]) puts one
//! INDIRECT_BUFFER on the ring a run and rewrites only the dwords that changed in the image it
//! takes; replays naming the updatable items patch only those that changed. [`check_graph`],
//! [`check_many_replays`], [`check_replay_patches`] and the chain helpers are shared with the NV
//! tests.

use std::sync::Arc;

use super::*;
use crate::device::{DeviceGraph, GraphCall, Launch, RawBuf};
use crate::hcq::{HcqBackend, HcqDevice, HwQueue};
use crate::runtime::amd::process::lock;
use crate::runtime::amd::queue::AmdComputeQueue;

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
    prg: &Arc<dyn Program>,
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
    let prgs = vec![prg.clone(); 3];
    let first: Vec<GraphCall> = (0..3).map(|k| launch(k, &bufs[0], 1, 2, 2)).collect();
    let g = crate::hcq::graph::build::<B>(&prgs, &first)
        .unwrap()
        .expect("an HCQ graph");
    for (m, n, input, groups) in [(1, 2, 0, 2), (3, -1, 0, 2), (0, 5, 4, 2), (2, 3, 4, 1)] {
        let launches: Vec<GraphCall> = (0..3)
            .map(|k| launch(k, &bufs[input], m, n, groups))
            .collect();
        let before = doorbells();
        g.run(&launches, false).unwrap();
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
    check_graph(&dev, &prg, &|| emu.doorbell_writes(gpu).unwrap().len());
}

/// `k + 1` buffers of 32 int32 for an `E_axpb` chain, the first holding `x` (synchronized).
pub(crate) fn chain_buffers<B: HcqBackend>(
    dev: &HcqDevice<B>,
    a: &HcqAllocator<B>,
    x: &[i32],
    k: usize,
) -> Vec<RawBuf> {
    let bufs: Vec<RawBuf> = (0..=k)
        .map(|_| a.alloc(128, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[0], &i32_bytes(x)).unwrap();
    dev.synchronize().unwrap();
    bufs
}

/// The graph calls of a chain of `E_axpb` launches over `bufs` (`bufs[i + 1] = bufs[i] * n + m`).
pub(crate) fn axpb_chain(bufs: &[RawBuf], m: i64, n: i64) -> Vec<GraphCall> {
    bufs.windows(2)
        .map(|w| GraphCall::Kernel {
            launch: Launch {
                raws: vec![w[1].clone(), w[0].clone()],
                vals: vec![m, n],
                global: Some([2, 1, 1]),
                local: Some([16, 1, 1]),
            },
            writes: vec![0],
        })
        .collect()
}

/// What a chain of `k` `E_axpb` launches (`v * n + m`, wrapping as int32 does) leaves of `x`.
pub(crate) fn axpb_chain_want(x: &[i32], k: usize, m: i64, n: i64) -> Vec<i32> {
    let step = |v: i32| v.wrapping_mul(n as i32).wrapping_add(m as i32);
    x.iter().map(|&v| (0..k).fold(v, |v, _| step(v))).collect()
}

/// 32 int32 values of `b`.
pub(crate) fn i32s_of<B: HcqBackend>(a: &HcqAllocator<B>, b: &RawBuf) -> Vec<i32> {
    let mut o = vec![0u8; 128];
    a.copyout(&mut o, b).unwrap();
    i32s(&o)
}

/// Many replays of a bound graph of `prg` (`axpb_uops(2, 16)`), three at a time without a
/// synchronize between them (the images alternate while the GPU may still run the previous
/// one), the variables changing every three runs: every result is the host's.
pub(crate) fn check_many_replays<B: HcqBackend>(dev: &Arc<HcqDevice<B>>, prg: &Arc<dyn Program>) {
    let a = HcqAllocator::new(dev.clone());
    let k = 4;
    let x: Vec<i32> = (0..32).map(|i| 7 - i).collect();
    let bufs = chain_buffers(dev, &a, &x, k);
    let calls = |m: i64, n: i64| axpb_chain(&bufs, m, n);
    let prgs = vec![prg.clone(); k];
    let g = crate::hcq::graph::build::<B>(&prgs, &calls(1, 1))
        .unwrap()
        .expect("an HCQ graph");
    for step in 0..20i64 {
        let (m, n) = (step % 5 - 2, 1 + step % 3);
        for _ in 0..3 {
            g.run(&calls(m, n), false).unwrap();
        }
        dev.synchronize().unwrap();
        let want = axpb_chain_want(&x, k, m, n);
        assert_eq!(i32s_of(&a, &bufs[k]), want, "step {step}: m={m} n={n}");
    }
}

/// Replays of a graph of `prg` (`axpb_uops(2, 16)`) through `run_updating` naming item 0 (the
/// one reading the input, as the JIT does): with the same input and variables they rewrite no
/// kernargs or dims and the bound images take exactly the wait and signal values; an input
/// swapped between replays is patched (one item) and gives the host's results; a plain `run`
/// with new variables patches every kernel.
pub(crate) fn check_replay_patches<B: HcqBackend>(dev: &Arc<HcqDevice<B>>, prg: &Arc<dyn Program>) {
    let a = HcqAllocator::new(dev.clone());
    let k = 5;
    let x: Vec<i32> = (0..32).map(|i| 3 - i).collect();
    let y: Vec<i32> = (0..32).map(|i| i * 7 - 40).collect();
    let mut bufs = chain_buffers(dev, &a, &x, k);
    let (bx, by) = (
        bufs[0].clone(),
        a.alloc(128, &BufferOptions::default()).unwrap(),
    );
    a.copyin(&by, &i32_bytes(&y)).unwrap();
    dev.synchronize().unwrap();
    let prgs = vec![prg.clone(); k];
    let g = crate::hcq::graph::build_graph::<B>(&prgs, &axpb_chain(&bufs, 1, 2))
        .unwrap()
        .expect("an HCQ graph");
    for run in 0..6 {
        g.run_updating(&axpb_chain(&bufs, 1, 2), &[0], false)
            .unwrap();
        let p = g.last_run();
        assert_eq!(p.items, 0, "run {run}: nothing changed ({p:?})");
        assert!(p.values > k, "run {run}: {p:?}");
        // from the third run on each image lacks two runs' values, at the same dwords
        if run >= 2 {
            assert_eq!(p.image_dwords, p.values, "run {run}: only the values");
        }
    }
    dev.synchronize().unwrap();
    assert_eq!(i32s_of(&a, &bufs[k]), axpb_chain_want(&x, k, 1, 2));
    for (input, src) in [(&by, &y), (&bx, &x), (&by, &y)] {
        bufs[0] = input.clone();
        g.run_updating(&axpb_chain(&bufs, 1, 2), &[0], false)
            .unwrap();
        assert_eq!(g.last_run().items, 1, "the swapped input is patched");
        dev.synchronize().unwrap();
        assert_eq!(i32s_of(&a, &bufs[k]), axpb_chain_want(src, k, 1, 2));
    }
    g.run(&axpb_chain(&bufs, -3, 2), false).unwrap();
    assert_eq!(g.last_run().items, k, "new variables patch every kernel");
    dev.synchronize().unwrap();
    assert_eq!(i32s_of(&a, &bufs[k]), axpb_chain_want(&y, k, -3, 2));
    let e = g
        .run_updating(&axpb_chain(&bufs, -3, 2), &[k], false)
        .unwrap_err();
    assert!(e.message().contains("updatable item 5"), "{e}");
}

#[test]
fn hcq_graph_replays_patch_only_values_and_swapped_inputs() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    check_replay_patches(&dev, &prg);
}

#[test]
fn hcq_graph_many_replays_with_changing_variables_stay_exact() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    check_many_replays(&dev, &prg);
}

/// A graph run on AMD is one doorbell and one 4-dword INDIRECT_BUFFER on the compute ring,
/// whatever the kernel count, and the results stay exact.
#[test]
fn hcq_graph_runs_put_one_indirect_buffer_on_the_compute_ring() {
    let (dev, emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let (b, a) = (dev.backend(), HcqAllocator::new(dev.clone()));
    let gpu = b.gpu_id();
    let x: Vec<i32> = (0..32).map(|i| i - 10).collect();
    for k in [3usize, 7] {
        let bufs = chain_buffers(&dev, &a, &x, k);
        let prgs = vec![prg.clone(); k];
        let g =
            crate::hcq::graph::build::<super::super::AmdBackend>(&prgs, &axpb_chain(&bufs, 1, 2))
                .unwrap()
                .expect("an HCQ graph");
        for (m, n) in [(1, 2), (3, -1)] {
            let wptr = b.ring_pointers().unwrap()[0].0;
            let bells = emu.doorbell_writes(gpu).unwrap().len();
            for _ in 0..5 {
                g.run(&axpb_chain(&bufs, m, n), false).unwrap();
            }
            let ring = b.ring_pointers().unwrap()[0].0 - wptr;
            assert_eq!(ring, 5 * 4, "{k} kernels: one INDIRECT_BUFFER a run");
            assert_eq!(emu.doorbell_writes(gpu).unwrap().len() - bells, 5);
            dev.synchronize().unwrap();
            let want = axpb_chain_want(&x, k, m, n);
            assert_eq!(i32s_of(&a, &bufs[k]), want, "{k} kernels, m={m} n={n}");
        }
    }
}

/// Takes the next image of a bound queue: (dwords written, the image read back).
fn take(q: &AmdComputeQueue) -> (usize, Vec<u32>) {
    let mut bp = lock(q.encoder().bound().expect("bound"));
    let i = bp.next_image();
    bp.take_next(q.dwords()).unwrap();
    (bp.last_written(), bp.image_dwords(i).unwrap())
}

#[test]
fn a_bound_queue_rewrites_only_the_changed_dwords_of_each_image() {
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let (s1, s2) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut q = b.compute_queue();
    let w = q.wait(&s1, 5).unwrap().into_patch();
    let s = q.signal(&s2, 7).unwrap().into_patch();
    assert!(q.bind(b).unwrap(), "an AMD compute queue binds");
    // nothing patched: nothing to write
    assert_eq!(take(&q).0, 0);
    q.update_wait(&w, None, Some(6)).unwrap();
    // the next image takes the wait's value dword; the image after it catches up alike
    let (n, img) = take(&q);
    assert_eq!((n, img.as_slice()), (1, q.dwords()));
    let (n, img) = take(&q);
    assert_eq!((n, img.as_slice()), (1, q.dwords()));
    assert_eq!(take(&q).0, 0, "both images current");
    // the same value again changes nothing
    q.update_wait(&w, None, Some(6)).unwrap();
    assert_eq!(take(&q).0, 0);
    // pointing the signal at another signal rewrites its address (and event) dwords only
    q.update_signal(&s, Some(&s1), None).unwrap();
    let (n, img) = take(&q);
    assert_eq!(img.as_slice(), q.dwords());
    assert!((1..=5).contains(&n), "{n} dwords for a new signal address");
    // replays with a rising base: two values a run, each image two runs behind
    for base in 100u64..160 {
        q.update_wait(&w, None, Some(base)).unwrap();
        q.update_signal(&s, None, Some(base + 1)).unwrap();
        let (n, img) = take(&q);
        assert_eq!(img.as_slice(), q.dwords(), "run at base {base}");
        assert!(n <= 4, "run at base {base}: {n} dwords written");
    }
    // many patches without a submission: the one dword they changed is written once (the
    // first image also lacks the last run's wait value)
    for v in 0..2000u64 {
        q.update_signal(&s, None, Some(v)).unwrap();
    }
    let (n, img) = take(&q);
    assert_eq!((n, img.as_slice()), (2, q.dwords()));
    let (n, img) = take(&q);
    assert_eq!(
        (n, img.as_slice()),
        (1, q.dwords()),
        "the other image: the signal only"
    );
    // a bound queue takes no more commands: its submission says so
    q.wait(&s1, 1).unwrap();
    let e = q.submit(b).unwrap_err();
    assert!(e.message().contains("takes no more commands"), "{e}");
}

/// The direct path of a replay's values ([`HwQueue::update_values`]: straight into the dwords,
/// one batch) and the per-point path (`update_wait` / `update_signal` of each, through
/// [`crate::runtime::amd::pm4::PatchPoint::encode`]) give the same host dwords, the same dwords
/// written and the same images, replay after replay: a graph-shaped queue (a timeline wait, a
/// kickoff signal, then per item its dependency waits and its signal) whose values move with
/// each run's base as a graph's do (rising, repeated, restarted), its timeline re-pointed now
/// and then.
#[test]
fn direct_value_patches_give_the_images_of_per_point_patches() {
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let sigs: Vec<_> = (0..4).map(|_| dev.new_signal(0).unwrap()).collect();
    let build = || {
        let mut q = b.compute_queue();
        let tl = q.wait(&sigs[0], 0).unwrap().into_patch();
        let mut waits = vec![];
        let mut signals = vec![(q.signal(&sigs[1], 1).unwrap().into_patch(), 0u64)];
        for j in 0..12u64 {
            for dep in [j.saturating_sub(1), j / 3] {
                waits.push((q.wait(&sigs[2], 2 + dep).unwrap().into_patch(), 1 + dep));
            }
            signals.push((q.signal(&sigs[2], 2 + j).unwrap().into_patch(), 1 + j));
        }
        let tl_sig = q.signal(&sigs[0], 1).unwrap().into_patch();
        assert!(q.bind(b).unwrap(), "an AMD compute queue binds");
        (q, tl, tl_sig, waits, signals)
    };
    let (mut direct, tl, tl_sig, waits, signals) = build();
    let (mut per_point, ..) = build();
    let bases = (1u64..40)
        .map(|r| 1 + 14 * r)
        .chain([575, 575, 1, 15, 29, (1 << 31) - 20, 1]);
    for (run, base) in bases.enumerate() {
        let tl_to = (run % 7 == 3).then(|| &sigs[run % 2 * 3]);
        for q in [&mut direct, &mut per_point] {
            q.update_wait(&tl, tl_to, Some(run as u64)).unwrap();
            q.update_signal(&tl_sig, tl_to, Some(run as u64 + 1))
                .unwrap();
        }
        let w = waits.iter().map(|(p, v)| (p, base + v));
        let s = signals.iter().map(|(p, v)| (p, base + v));
        direct.update_values(w.clone(), s.clone()).unwrap();
        w.for_each(|(p, v)| per_point.update_wait(p, None, Some(v)).unwrap());
        s.for_each(|(p, v)| per_point.update_signal(p, None, Some(v)).unwrap());
        assert_eq!(
            direct.dwords(),
            per_point.dwords(),
            "run {run}: host dwords"
        );
        let (nd, img_d) = take(&direct);
        let (np, img_p) = take(&per_point);
        assert_eq!(nd, np, "run {run} (base {base}): dwords written");
        assert_eq!(img_d, img_p, "run {run} (base {base}): images");
        assert_eq!(
            img_d.as_slice(),
            direct.dwords(),
            "run {run}: image current"
        );
    }
    // a value too wide is refused alike, after the values before it were written
    let too_wide = [(&waits[0].0, 7u64), (&waits[1].0, 1 << 32)];
    let e = direct.update_values(too_wide, []).unwrap_err();
    assert!(e.message().contains("WaitValuePatch"), "{e}");
    assert_eq!(direct.dwords()[waits[0].0.value.pos()], 7);
}
