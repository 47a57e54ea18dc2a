//! `bench jit`: host time per kernel of a chain of small kernels (`x*1.0001+0.0001` over 1024
//! float32, each step realized: one kernel each), run eagerly, replayed by a TinyJit without
//! graphs (`JIT=2`) and with graphs (`JIT=1`), and the capture call's cost, on every device that
//! opens. On CLANG and LLVM the graph row is the batch compiled into one program, built on a
//! background thread after the capture returns (`graph ready`: from the capture call's start until
//! the build is done), the `call graph` row the host-call graph (`CPU_GRAPH=0`) and the `graph
//! sync` row the batch compiled inside the capture (`CPU_GRAPH_SYNC=1`). The batch compile is
//! served by the compile cache when it holds the batch (`CACHELEVEL=0` measures the cold
//! compile). Ratios are against eager on the same device in the same run (>1: faster than eager;
//! for the ms rows, how many eager steps the time is).
//!
//! A device entry `A+B` (default `AMD+AMD:1` and `NV+NV:1` next to the single GPUs) runs the
//! chain's first half on `A`, moves the tensor to `B` and runs the second half there: on the HCQ
//! devices the JIT graphs both halves and the transfer into one multi-device graph. Per-kernel
//! figures divide by the kernels (the transfer is not counted).
//!
//! Host time: the call returns when the work is submitted (GPU devices) or done (CPU devices,
//! whose kernels run synchronously); the device is synchronized after each timed call, outside
//! the timing. The `(cpu)` rows time the same calls by the calling thread's CPU time, against
//! eager's: on the emulated GPUs the software GPU's threads share the machine's cores with the
//! host, and wall time counts the moments they take the host's core. No thresholds: the numbers
//! are for people.
//!
//! `--graph-only 1` runs only the graph rows (no eager baseline, no ratio): a loop of replays
//! for a profiler (`perf record ... bench jit --devices NV --graph-only 1 --repeats 2000`).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rawgrad::device::GraphBuild;
use rawgrad::engine::jit::{JitArgs, TinyJit};
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::{Error, Result, Tensor};

use crate::dispatch::{fmt_num, Stats};

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub devices: Vec<String>,
    /// Kernels in the chain.
    pub kernels: usize,
    /// Elements per kernel.
    pub n: usize,
    pub repeats: usize,
    /// Only the graph rows (for profiling replays).
    pub graph_only: bool,
}

impl Default for Config {
    fn default() -> Config {
        let gpu = rawgrad::helpers::getenv("MOCKGPU", 0) != 0;
        let mut devices = vec!["CLANG", "LLVM", "INTERP"];
        if gpu || rawgrad::helpers::getenv("AMD", 0) != 0 {
            devices.extend(["AMD", "AMD+AMD:1"]);
        }
        if gpu || rawgrad::helpers::getenv("NV", 0) != 0 {
            devices.extend(["NV", "NV+NV:1"]);
        }
        Config {
            devices: devices.into_iter().map(String::from).collect(),
            kernels: 64,
            n: 1024,
            repeats: 21,
            graph_only: false,
        }
    }
}

impl Config {
    /// Parse `--devices A,B --kernels 64 --n 1024 --repeats 21`.
    pub fn parse(args: &[String]) -> Result<Config> {
        let mut c = Config::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| Error::InvalidArgument(format!("{a} needs a value")))?;
            let num = || {
                v.parse::<usize>()
                    .map(|x| x.max(1))
                    .map_err(|_| Error::InvalidArgument(format!("{a} {v}: not a count")))
            };
            match a.as_str() {
                "--devices" => c.devices = v.split(',').map(|s| s.trim().to_uppercase()).collect(),
                "--kernels" => c.kernels = num()?,
                "--n" => c.n = num()?,
                "--repeats" => c.repeats = num()?,
                "--graph-only" => c.graph_only = v != "0",
                _ => return Err(Error::InvalidArgument(format!("unknown option {a}"))),
            }
        }
        Ok(c)
    }
}

/// The chain: `kernels` realized steps of `x*1.0001+0.0001`, split evenly over `devs` (the
/// tensor moved to the next device between the parts).
fn chain(x: &Tensor, kernels: usize, devs: &[String]) -> Result<Tensor> {
    let mut x = x.clone();
    let part = kernels.div_ceil(devs.len().max(1)).max(1);
    for i in 0..kernels {
        if i > 0 && i % part == 0 {
            if let Some(d) = devs.get(i / part) {
                x = x.to(d)?;
            }
        }
        x = x.mul(1.0001f32)?.add(0.0001f32)?.realize()?;
    }
    Ok(x)
}

/// Seconds of each of `repeats` timed calls of `f` (the devices synchronized after each): wall
/// time, and the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), which on the emulated
/// GPUs leaves out the time the software GPU's threads take the shared cores from the host.
fn samples(
    devs: &[String],
    repeats: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let ds = devs
        .iter()
        .map(|d| open_device(d))
        .collect::<Result<Vec<_>>>()?;
    let mut out = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let t = Instant::now();
        let c0 = thread_cpu_s();
        f()?;
        out.1
            .push(thread_cpu_s().zip(c0).map_or(f64::NAN, |(b, a)| b - a));
        out.0.push(t.elapsed().as_secs_f64());
        for d in &ds {
            d.synchronize()?;
        }
    }
    Ok(out)
}

/// Seconds this thread has run on a CPU, where the clock answers.
fn thread_cpu_s() -> Option<f64> {
    rawgrad::driver::os::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(|ns| ns as f64 * 1e-9)
}

/// The thread-CPU row of a timed metric.
fn cpu_row(metric: &str) -> &'static str {
    match metric {
        "eager" => "eager (thread cpu)",
        "jit, no graph" => "jit, no graph (cpu)",
        "jit, call graph" => "jit, call graph (cpu)",
        "jit, graph" => "jit, graph (cpu)",
        _ => "jit, graph sync (cpu)",
    }
}

/// One device's rows: (metric, µs samples per kernel or ms per capture).
fn measure(dev: &str, cfg: &Config) -> Result<Vec<(&'static str, Vec<f64>)>> {
    let k = cfg.kernels;
    let devs: Vec<String> = dev.split('+').map(String::from).collect();
    let input = || Tensor::from_slice_on(&vec![1.0f32; cfg.n], &[cfg.n], &devs[0]);
    let x = input()?;
    chain(&x, k, &devs)?; // compile once
    let per_kernel = |v: Vec<f64>| v.into_iter().map(|s| s * 1e6 / k as f64).collect();
    let (mut rows, mut cpu_rows) = (Vec::new(), Vec::new());
    if !cfg.graph_only {
        let (eager, eager_cpu) = samples(&devs, cfg.repeats, || chain(&x, k, &devs).map(drop))?;
        rows.push(("eager", per_kernel(eager)));
        cpu_rows.push((cpu_row("eager"), per_kernel(eager_cpu)));
    }
    let cpu = matches!(devs[0].split(':').next(), Some("CLANG" | "LLVM"));
    let mut kinds = vec![
        ("jit, no graph", "capture, no graph (ms)", 2, 1, 0),
        ("jit, graph", "capture, graph (ms)", 1, 1, 0),
    ];
    if cpu {
        kinds.insert(1, ("jit, call graph", "capture, call graph (ms)", 1, 0, 0));
        kinds.push(("jit, graph sync", "capture, graph sync (ms)", 1, 1, 1));
    }
    if cfg.graph_only {
        kinds.retain(|kd| kd.0 == "jit, graph");
    }
    for (metric, capture, jit, cpu_graph, sync) in kinds {
        let _c = Context::new(&[
            ("JIT", jit),
            ("CPU_GRAPH", cpu_graph),
            ("CPU_GRAPH_SYNC", sync),
        ]);
        let x = input()?;
        let args = std::slice::from_ref(&x);
        let (mut captures, mut ready) = (Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..3 {
            let devs = devs.clone();
            let mut f = TinyJit::new(move |a: &JitArgs| chain(a.t(0)?, k, &devs));
            f.call_tensors(args)?;
            let t = Instant::now();
            f.call_tensors(args)?;
            captures.push(t.elapsed().as_secs_f64() * 1e3);
            let built = f.wait_graphs(Duration::from_secs(600));
            ready.push(t.elapsed().as_secs_f64() * 1e3);
            if built != GraphBuild::Ready {
                return Err(Error::Runtime(format!("{dev} {metric}: graph {built:?}")));
            }
            last = Some(f);
        }
        let mut f = last.ok_or_else(|| Error::Internal("no capture".into()))?;
        f.call_tensors(args)?; // the replay that swaps a background-built entry in
        let (replay, replay_cpu) = samples(&devs, cfg.repeats, || f.call_tensors(args).map(drop))?;
        let got = f.call_tensors(args)?.to_vec::<f32>()?;
        let host = (0..k).fold(1.0f32, |v, _| v * 1.0001 + 0.0001);
        if got.first().map_or(true, |g| (g - host).abs() > 1e-4) {
            return Err(Error::Runtime(format!(
                "{dev} {metric}: got {:?}, want {host}",
                got.first()
            )));
        }
        rows.push((metric, per_kernel(replay)));
        cpu_rows.push((cpu_row(metric), per_kernel(replay_cpu)));
        rows.push((capture, captures));
        if cpu && jit == 1 && cpu_graph == 1 && sync == 0 {
            rows.push(("graph ready (ms)", ready));
        }
    }
    rows.extend(cpu_rows);
    Ok(rows)
}

/// Run the benchmark on every device that opens and return the table.
pub fn run(cfg: &Config) -> Result<String> {
    let mut out = format!(
        "jit: chain of {} kernels over {} float32, {} repeats; per-kernel host µs (capture: ms \
         per call); ratio vs eager on the same device (capture: in eager steps)\n",
        cfg.kernels, cfg.n, cfg.repeats
    );
    let _ = writeln!(
        out,
        "| {:<9} | {:<24} | {:>10} | {:>21} | {:>10} |",
        "device", "metric", "median", "p10 - p90", "vs eager"
    );
    let _ = writeln!(
        out,
        "|{:-<11}|{:-<26}|{:-<12}|{:-<23}|{:-<12}|",
        "", "", "", "", ""
    );
    let mut notes = String::new();
    for dev in &cfg.devices {
        let rows = match measure(dev, cfg) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(notes, "skipped {dev}: {}", e.message());
                continue;
            }
        };
        let eager = rows
            .iter()
            .find(|r| r.0 == "eager")
            .map_or(f64::NAN, |r| Stats::of(&r.1).median);
        let eager_cpu = rows
            .iter()
            .find(|r| r.0 == cpu_row("eager"))
            .map_or(f64::NAN, |r| Stats::of(&r.1).median);
        for (metric, v) in rows {
            let s = Stats::of(&v);
            let ratio = if metric.ends_with("cpu)") {
                format!("{:.2}x", eager_cpu / s.median)
            } else if metric.ends_with("(ms)") {
                // one eager step (eager per-kernel µs * kernels) in ms
                let step_ms = eager * cfg.kernels as f64 / 1e3;
                format!("{:.1} steps", s.median / step_ms)
            } else {
                format!("{:.2}x", eager / s.median)
            };
            let spread = format!("{} - {}", fmt_num(s.p10), fmt_num(s.p90));
            let _ = writeln!(
                out,
                "| {:<9} | {:<24} | {:>10} | {:>21} | {:>10} |",
                dev,
                metric,
                fmt_num(s.median),
                spread,
                ratio
            );
        }
    }
    out.push_str(&notes);
    Ok(out)
}
