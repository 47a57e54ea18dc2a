//! `PROFILE=1` on NV: kernels and copies get GPU timestamps (nanoseconds, from host semaphore and
//! copy-engine releases), converted to host time on the device's compute and copy lanes.

use super::*;
use crate::dtype::dtypes;
use crate::helpers::Context;

#[test]
fn profile_records_kernels_and_copies_in_order() {
    let _p = Context::new(&[("PROFILE", 1)]);
    let (dev, _emu) = one_gpu();
    assert!(dev.profiling());
    let prg = load(&dev, "E_prof", &add_uops(2, 8, dtypes::float32));
    let (a, _) = alloc(&dev, 64);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(64, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 16])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 16])).unwrap();
    for _ in 0..3 {
        prg.call(&bufs, &[], Some([2, 1, 1]), Some([8, 1, 1]), false)
            .unwrap();
    }
    dev.synchronize().unwrap();
    let ev = dev.profile_events();
    let kernels: Vec<_> = ev.iter().filter(|e| e.name == "E_prof").collect();
    assert_eq!(kernels.len(), 3, "{ev:?}");
    assert!(kernels.iter().all(|e| e.queue == "COMPUTE"));
    assert!(
        ev.iter().any(|e| e.queue == "COPY"),
        "copies are profiled: {ev:?}"
    );
    for e in &ev {
        assert!(e.ts_us.is_finite() && e.dur_us >= 0.0, "{e:?}");
    }
    for w in kernels.windows(2) {
        assert!(
            w[0].ts_us + w[0].dur_us <= w[1].ts_us,
            "{:?} then {:?}",
            w[0],
            w[1]
        );
    }
}
