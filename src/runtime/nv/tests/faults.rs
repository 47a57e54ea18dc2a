//! Faults through the emulator: a hung channel, a kernel writing to an unmapped address (RC error
//! read from the error notifier and named), a parameter-size mismatch caught by the GPU. Each must
//! end in an error naming the cause within the (short) timeout, leak nothing, and leave the device
//! usable (the TSG and channels are rebuilt).

use super::*;
use crate::codegen::uopgraph::linearize;
use crate::dtype::dtypes;
use crate::hcq::{HcqBackend, HwQueue};
use crate::helpers::Context;
use crate::runtime::nv::queue::NvComputeQueue;
use crate::runtime::nv::signal::NvSignal;
use crate::Error;

/// A device that already did one copy (its staging buffer exists), and its VA balance.
pub(super) fn warm() -> (Arc<NvDevice>, EmuDriver, (u64, u64)) {
    let (dev, emu) = one_gpu();
    let (a, b) = alloc(&dev, 64);
    a.copyin(&b, &[0u8; 64]).unwrap();
    drop(b);
    a.synchronize().unwrap();
    let va = dev.backend().process().va_free_bytes();
    (dev, emu, va)
}

/// After a failure: nothing pending, two channels again, no VA range (so no buffer) leaked once
/// the test's buffers are gone, and a copy and a kernel work.
pub(super) fn check_recovered(dev: &Arc<NvDevice>, emu: &EmuDriver, baseline: (u64, u64)) {
    assert_eq!(dev.pending_count(), 0, "pending work dropped");
    dev.synchronize().unwrap();
    assert_eq!(
        emu.nv_channels(0).len(),
        2,
        "the channels were rebuilt, not leaked"
    );
    assert_eq!(
        dev.backend().process().va_free_bytes(),
        baseline,
        "no leaked buffers (every VA range came back)"
    );
    let (a, b) = alloc(dev, 64);
    let data: Vec<u8> = (0..64).collect();
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; 64];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out, data, "copies work after the recovery");
    let prg = load(dev, "E_after", &add_uops(1, 8, dtypes::float32));
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 8])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 8])).unwrap();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), true)
        .unwrap();
    let mut o = vec![0u8; 32];
    a.copyout(&mut o, &bufs[0]).unwrap();
    assert_eq!(f32s(&o), vec![3.0f32; 8], "kernels work after the recovery");
    assert!(
        dev.backend().process().take_errors().is_empty(),
        "no deferred errors"
    );
}

/// A run in progress that cannot finish: the compute channel waits on a signal nobody raises,
/// kernel `name` (out = a + b, 8 floats) is queued behind it. Returns what must outlive the run.
pub(super) fn stuck_run(
    dev: &Arc<NvDevice>,
    name: &str,
) -> (NvSignal, NvComputeQueue, Arc<dyn Program>, Vec<RawBuf>) {
    let gate = dev.new_signal(0).unwrap();
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    let prg = load(dev, name, &add_uops(1, 8, dtypes::float32));
    let (a, _) = alloc(dev, 32);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), false)
        .unwrap();
    (gate, q, prg, bufs)
}

#[test]
fn hung_channel_times_out_with_a_report() {
    let (dev, emu, baseline) = warm();
    let (never, q, prg, bufs) = stuck_run(&dev, "E_stuck");
    let e = {
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
        dev.synchronize().unwrap_err()
    };
    let Error::Timeout(m) = &e else {
        panic!("expected a timeout, got {e}")
    };
    for needle in [
        "synchronize",
        "exec E_stuck",
        "compute channel",
        "GPPut",
        "queues were reset",
    ] {
        assert!(m.contains(needle), "report lacks {needle:?}: {m}");
    }
    drop((bufs, prg, q, never));
    check_recovered(&dev, &emu, baseline);
}

/// data0[i + 10^9] = i: a store about 4 GB past the buffer, into unmapped GPU VA.
fn oob_uops() -> Vec<UOp> {
    let dt = dtypes::int32;
    let d0 = UOp::define_global(dt, 0, true);
    let i = UOp::special(0, "lidx0", 4);
    let far = i.add(1_000_000_000i64);
    linearize(&[UOp::store(&d0, &far, &i)], None, true).unwrap()
}

#[test]
fn kernel_writing_to_an_unmapped_address_faults_with_the_rc_error() {
    let (dev, emu, baseline) = warm();
    let prg = load(&dev, "E_oob", &oob_uops());
    let (_a, b) = alloc(&dev, 16);
    let e = prg
        .call(
            std::slice::from_ref(&b),
            &[],
            Some([1, 1, 1]),
            Some([4, 1, 1]),
            true,
        )
        .unwrap_err();
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    assert!(m.contains("ROBUST_CHANNEL"), "RC error named: {m}");
    assert!(m.contains("error notifier"), "{m}");
    drop((prg, b));
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_param_size_mismatch_faults_the_channel() {
    use crate::mockgpu::nvgpu::cubin::{write_mock_cubin, MockCode, MockCubin};
    use crate::runtime::nv::cubin::KParam;
    let (dev, emu, baseline) = warm();
    // A blob whose declared parameter bytes (two buffers) do not match its UOps (three).
    let uops = add_uops(1, 8, dtypes::float32);
    let b = dev.backend();
    let m = MockCubin {
        name: "E_bad".into(),
        sm: b.sm(),
        params: (0..2)
            .map(|i| KParam {
                ordinal: i,
                offset: 8 * i,
                size: 8,
            })
            .collect(),
        regcount: 32,
        shared_size: 0,
        uops: crate::codegen::uop_serial::serialize(&uops).unwrap(),
        code: MockCode::Uops,
    };
    let lib = write_mock_cubin(&m, b.classes().arch).unwrap();
    let prg = NvRuntime::new(dev.clone()).load("E_bad", &lib).unwrap();
    let (a, _) = alloc(&dev, 32);
    let bufs: Vec<RawBuf> = (0..2)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    let e = prg
        .call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), true)
        .unwrap_err();
    assert!(matches!(e, Error::Fault(_)), "{e}");
    assert!(
        e.message().contains("ROBUST_CHANNEL_GR_EXCEPTION (13)"),
        "{e}"
    );
    drop((prg, bufs));
    check_recovered(&dev, &emu, baseline);
}
