//! `PROFILE=1`: kernels and copies get GPU timestamps, converted to host time; the trace is
//! written as Chrome trace JSON and parsed back.

use super::*;
use crate::hcq::json::{parse, Json};
use crate::hcq::trace::{profile_path, write_chrome_trace, write_collected, TraceEvent};
use crate::helpers::Context;

fn check_lane_order(events: &[TraceEvent]) {
    for lane in ["COMPUTE", "COPY"] {
        let evs: Vec<&TraceEvent> = events.iter().filter(|e| e.queue == lane).collect();
        for w in evs.windows(2) {
            assert!(
                w[0].ts_us + w[0].dur_us <= w[1].ts_us,
                "{lane}: {:?} overlaps or follows {:?}",
                w[0],
                w[1]
            );
        }
        for e in evs {
            assert!(e.dur_us > 0.0 && e.ts_us.is_finite(), "{e:?}");
        }
    }
}

/// Write `events` as a trace, parse it back, check it against `events`.
fn check_written_trace(path: &std::path::Path, events: &[TraceEvent]) {
    write_chrome_trace(path, events).unwrap();
    let v = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let list = v.get("traceEvents").and_then(Json::as_array).unwrap();
    let xs: Vec<&Json> = list
        .iter()
        .filter(|e| e.get("ph").and_then(Json::as_str) == Some("X"))
        .collect();
    assert_eq!(xs.len(), events.len());
    let mut last_ts = f64::MIN;
    for (x, e) in xs.iter().zip(events) {
        let ts = x.get("ts").and_then(Json::as_f64).unwrap();
        assert!((ts - e.ts_us).abs() < 0.01, "{ts} vs {}", e.ts_us);
        assert!(x.get("dur").and_then(Json::as_f64).unwrap() > 0.0);
        assert_eq!(x.get("name").and_then(Json::as_str), Some(e.name.as_str()));
        assert!(x.get("pid").and_then(Json::as_f64).is_some());
        if e.queue == "COMPUTE" {
            assert!(ts >= last_ts, "kernel events in submission order");
            last_ts = ts;
        }
    }
    let pids: std::collections::BTreeSet<u64> = xs
        .iter()
        .map(|x| x.get("pid").and_then(Json::as_f64).unwrap() as u64)
        .collect();
    assert_eq!(pids.len(), 1, "one process lane per device");
}

#[test]
fn profile_trace_of_kernels_and_copies() {
    let dir = std::env::temp_dir().join(format!("rawgrad_prof_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let collected = dir.join("collected.json");
    let _p = Context::new(&[("PROFILE", 1)]);
    let _q = Context::with_str(&[("PROFILE_PATH", collected.to_str().unwrap())]);
    let (dev, _emu) = one_gpu();
    assert!(dev.profiling());
    let prg = load(&dev, "E_prof", &add_uops(2, 16, dtypes::float32));
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(128, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 32])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 32])).unwrap();
    for _ in 0..3 {
        prg.call(&bufs, &[], Some([2, 1, 1]), Some([16, 1, 1]), false)
            .unwrap();
    }
    let mut out = vec![0u8; 128];
    a.copyout(&mut out, &bufs[0]).unwrap();
    assert_eq!(f32s(&out), vec![3.0f32; 32]);
    dev.synchronize().unwrap();
    let events = dev.profile_events();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "E_prof").count(),
        3,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "CPU -> AMD").count(),
        2,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "AMD -> CPU").count(),
        1,
        "{names:?}"
    );
    check_lane_order(&events);

    check_written_trace(&dir.join("trace.json"), &events);
    // The process-wide collection (what the exit writer writes) holds this device's events.
    assert_eq!(profile_path(), collected);
    let n = write_collected(&profile_path()).unwrap();
    assert!(n >= events.len());
    let all = parse(&std::fs::read_to_string(&collected).unwrap()).unwrap();
    assert!(all
        .get("traceEvents")
        .and_then(Json::as_array)
        .unwrap()
        .iter()
        .any(|e| e.get("name").and_then(Json::as_str) == Some("E_prof")));
    let _ = std::fs::remove_dir_all(&dir);
}
