//! A small, standalone Chrome / Perfetto trace writer, usable by any backend: complete events
//! (`"ph": "X"`) with microsecond `ts`/`dur`, one process per device and one thread per queue,
//! named through metadata events, written as `{"traceEvents": [...]}`.
//!
//! Events are timed on one host clock ([`now_us`]: microseconds since the first call in the
//! process), so traces from several devices line up. A process-wide collector ([`record`])
//! gathers the events of every device; [`write_collected`] writes them (to `PROFILE_PATH`,
//! default `/tmp/rawgrad_profile.json`), and [`install_exit_writer`] arranges for that to happen
//! at process exit, printing the path.
//!
//! Not guaranteed: events recorded after the exit writer ran are lost; the file is overwritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Instant;

use crate::helpers::getenv_str;
use crate::Result;

/// One complete event: something ran on `device`'s queue `queue` from `ts_us` for `dur_us`.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    pub name: String,
    /// Category (`kernel`, `copy`).
    pub cat: String,
    /// The process lane (a device name).
    pub device: String,
    /// The thread lane (a queue name).
    pub queue: String,
    pub ts_us: f64,
    pub dur_us: f64,
}

/// Microseconds since the first call in this process (the trace clock).
pub fn now_us() -> f64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e6
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "0".into()
    }
}

/// The trace as JSON text.
pub fn chrome_trace_json(events: &[TraceEvent]) -> String {
    let mut pids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tids: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for e in events {
        let n = pids.len();
        pids.entry(&e.device).or_insert(n);
        let n = tids.len();
        tids.entry((&e.device, &e.queue)).or_insert(n);
    }
    let mut items = Vec::with_capacity(events.len() + pids.len() + tids.len());
    for (dev, pid) in &pids {
        items.push(format!(
            r#"{{"name":"process_name","ph":"M","pid":{pid},"args":{{"name":{}}}}}"#,
            crate::json::quote(dev)
        ));
    }
    for ((dev, q), tid) in &tids {
        items.push(format!(
            r#"{{"name":"thread_name","ph":"M","pid":{},"tid":{tid},"args":{{"name":{}}}}}"#,
            pids[dev],
            crate::json::quote(q)
        ));
    }
    for e in events {
        items.push(format!(
            r#"{{"name":{},"cat":{},"ph":"X","pid":{},"tid":{},"ts":{},"dur":{}}}"#,
            crate::json::quote(&e.name),
            crate::json::quote(&e.cat),
            pids[e.device.as_str()],
            tids[&(e.device.as_str(), e.queue.as_str())],
            num(e.ts_us),
            num(e.dur_us.max(0.0))
        ));
    }
    format!(
        "{{\"traceEvents\":[\n{}\n],\"displayTimeUnit\":\"ns\"}}\n",
        items.join(",\n")
    )
}

/// Write `events` as a Chrome trace to `path`.
pub fn write_chrome_trace(path: &Path, events: &[TraceEvent]) -> Result<()> {
    std::fs::write(path, chrome_trace_json(events))
        .map_err(|e| crate::Error::Io(format!("writing the profile trace {}: {e}", path.display())))
}

fn collected() -> &'static Mutex<Vec<TraceEvent>> {
    static EVENTS: OnceLock<Mutex<Vec<TraceEvent>>> = OnceLock::new();
    EVENTS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Add events to the process-wide collection.
pub fn record(events: &[TraceEvent]) {
    collected()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend_from_slice(events);
}

/// Where the collected trace goes: `PROFILE_PATH`, default `/tmp/rawgrad_profile.json`.
pub fn profile_path() -> PathBuf {
    getenv_str("PROFILE_PATH")
        .filter(|p| !p.trim().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("rawgrad_profile.json"))
}

/// Write every collected event to `path`; returns how many were written.
pub fn write_collected(path: &Path) -> Result<usize> {
    let events = collected()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    write_chrome_trace(path, &events)?;
    Ok(events.len())
}

type ExitFlush = Box<dyn Fn() + Send + Sync>;

fn exit_flushes() -> &'static Mutex<Vec<ExitFlush>> {
    static FLUSHES: OnceLock<Mutex<Vec<ExitFlush>>> = OnceLock::new();
    FLUSHES.get_or_init(|| Mutex::new(Vec::new()))
}

/// Run `f` at exit before the trace is written (a profiling device synchronizes there, so the
/// timestamps of work nobody waited for are read and recorded).
pub(crate) fn flush_at_exit(f: ExitFlush) {
    exit_flushes()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(f);
}

extern "C" fn write_at_exit() {
    let flushes = std::mem::take(&mut *exit_flushes().lock().unwrap_or_else(|e| e.into_inner()));
    for f in flushes {
        f();
    }
    let path = profile_path();
    match write_collected(&path) {
        Ok(n) => println!("saved profile ({n} events) to {}", path.display()),
        Err(e) => eprintln!("profile: {e}"),
    }
}

/// Arrange (once per process) for the collected trace to be written at exit, when the process
/// was started with `PROFILE` set (profiling switched on from code, e.g. in tests, writes
/// nothing at exit: call [`write_collected`]).
pub fn install_exit_writer() {
    static ONCE: Once = Once::new();
    if std::env::var("PROFILE").map_or(true, |v| v.trim().is_empty() || v.trim() == "0") {
        return;
    }
    ONCE.call_once(|| {
        if let Err(e) = crate::driver::process::at_exit(write_at_exit) {
            eprintln!("profile: cannot register the exit writer: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcq::json::{parse, Json};

    #[test]
    fn trace_is_valid_json_with_lanes_and_escapes() {
        let ev = |name: &str, dev: &str, q: &str, ts: f64| TraceEvent {
            name: name.into(),
            cat: "kernel".into(),
            device: dev.into(),
            queue: q.into(),
            ts_us: ts,
            dur_us: 1.5,
        };
        let events = vec![
            ev("E_4 \"quoted\"\n", "AMD", "COMPUTE", 10.0),
            ev("copy", "AMD", "COPY", 12.0),
            ev("E_5", "AMD:1", "COMPUTE", 11.0),
        ];
        let text = chrome_trace_json(&events);
        let v = parse(&text).unwrap();
        let list = v.get("traceEvents").and_then(Json::as_array).unwrap();
        let x: Vec<&Json> = list
            .iter()
            .filter(|e| e.get("ph").and_then(Json::as_str) == Some("X"))
            .collect();
        assert_eq!(x.len(), 3);
        assert_eq!(
            x[0].get("name").and_then(Json::as_str),
            Some("E_4 \"quoted\"\n")
        );
        assert_eq!(x[0].get("dur").and_then(Json::as_f64), Some(1.5));
        let pid = |e: &Json| e.get("pid").and_then(Json::as_f64);
        let tid = |e: &Json| e.get("tid").and_then(Json::as_f64);
        assert_eq!(pid(x[0]), pid(x[1]));
        assert_ne!(pid(x[0]), pid(x[2]));
        assert_ne!(tid(x[0]), tid(x[1]));
        let meta = list
            .iter()
            .filter(|e| e.get("ph").and_then(Json::as_str) == Some("M"))
            .count();
        assert_eq!(meta, 2 + 3, "process and thread names");
        let path = std::env::temp_dir().join(format!("rawgrad_trace_{}.json", std::process::id()));
        write_chrome_trace(&path, &events).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let _ = std::fs::remove_file(&path);
    }
}
