//! `bench workloads`: the workloads of issue 10 (W1..W12, `workloads/defs.rs`) on the CPU devices,
//! one thread and all threads, with the machine's ceilings measured in the same run
//! (`ceilings.rs`).
//!
//! Per workload and device: kernels in the schedule; schedule time per kernel (`schedule()`,
//! memory planner included); codegen time per kernel (`get_kernel` + `to_program`: the engine's
//! optimizer step, linearizer and renderer); compile time per unique kernel (the device compiler
//! called directly, no disk cache; wall time and the thread's CPU time); then per thread count
//! the cold time (below), and the steady-state time of running the lowered items (compiled,
//! buffers allocated), `repeats`
//! times (at most `budget_s` seconds of repeats after the warm-up), as median and p10-p90 (wall,
//! and the calling thread's CPU time), and the rate at the median (GFLOP/s or GB/s
//! from the kernels' own estimates) with its ratio to the ceiling for that many threads. W9 runs
//! 64 eager steps (build, schedule, look up, run one 1024-element kernel each); its time is per
//! kernel. No thresholds: the numbers are for people.
//!
//! Steady state means the caches as repeated runs leave them: before the timed runs the workload
//! runs for `warm_s` seconds (at least once). One warm-up run was not enough: a last-level cache
//! that admits a stream adaptively takes many passes to hold an input again once something else
//! streamed through it (the cold runs' fresh inputs, the other device's rows, the ceilings' copy,
//! other processes). On a 2-core KVM guest of a Xeon with a 480 MiB L3, W2's 64 MiB input needed
//! 15-30 passes after another 64 MiB stream (CLANG one thread: 4.6-5.1 ms, falling to 2.6-2.8),
//! so 7 repeats after one warm-up timed that descent: medians 3.0-4.7 ms in back-to-back runs of
//! the same binary, where a harness calling the same object on a hot input gives 2.4-2.5 ms.
//! `flush_mib` > 0 times the other regime: before each timed run (outside the timing) a scratch
//! buffer of that size is written, so the inputs come from memory, as the copy ceiling's do.
//!
//! Cold: wall time of the workload's first realize (`schedule_with_vars` + `run_schedule`, then a
//! device synchronize) with an empty method cache and no disk compile cache (`CACHELEVEL=0`):
//! schedule, codegen, compile, load and the first run of every kernel, as a user's first run of a
//! model feels it; `cold_runs` times (inputs built and realized before each, outside the timing),
//! median [p10-p90], and the calling thread's CPU time (median: the part of the work left on the
//! calling thread; on LLVM, which compiles in process, builds moved to the pool leave it; on CLANG
//! the compiler is a child process and never counts). The build pool follows `PARALLEL`
//! (`PARALLEL_BUILD=0`: in order), not the thread column, which sets the kernels' threads. None
//! for W4 (steady state only) and W9 (eager).

pub(crate) mod defs;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Instant;

use rawgrad::engine::realize::{
    clear_method_cache, get_kernel, lower_schedule_item, run_schedule, ExecItem, RunOptions,
};
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::shape::{sym_infer, VarVals};
use rawgrad::{Error, Result, Tensor};

use crate::ceilings::{self, Ceilings};
use crate::dispatch::Stats;
use defs::{Bound, Workload, ALL, CHAIN};

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub workloads: Vec<&'static Workload>,
    pub devices: Vec<String>,
    /// Thread counts (`CLANG_THREADS`); 0 means all cores.
    pub threads: Vec<usize>,
    pub repeats: usize,
    /// Seconds of repeats per (workload, device, threads) after the first run.
    pub budget_s: f64,
    /// Bytes the copy ceiling copies.
    pub copy_bytes: usize,
    /// Measure the ceilings (off: for profiling the workloads alone).
    pub ceilings: bool,
    /// Cold realizes per row (0: none).
    pub cold_runs: usize,
    /// Seconds the workload runs before its timed runs (at least once; not for W4).
    pub warm_s: f64,
    /// MiB written to a scratch buffer before each timed run (0: none; module doc).
    pub flush_mib: usize,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Default for Config {
    fn default() -> Config {
        Config {
            workloads: ALL.iter().collect(),
            devices: vec!["CLANG".into(), "LLVM".into()],
            threads: vec![1, 0],
            repeats: 11,
            budget_s: 10.0,
            copy_bytes: 256 << 20,
            ceilings: true,
            cold_runs: 3,
            warm_s: 0.3,
            flush_mib: 0,
        }
    }
}

/// The workloads named in a comma-separated list (`W1,w3`).
pub(crate) fn pick_workloads(list: &str) -> Result<Vec<&'static Workload>> {
    list.split(',')
        .map(|id| {
            let id = id.trim().to_uppercase();
            ALL.iter()
                .find(|w| w.id == id)
                .ok_or_else(|| Error::InvalidArgument(format!("no workload {id} (W1..W12)")))
        })
        .collect()
}

impl Config {
    /// Parse `--workloads W1,W3 --devices CLANG,LLVM --threads 1,all --repeats N --budget-s S
    /// --copy-mib M --cold-runs N --warm-s S --flush-mib M`.
    pub fn parse(args: &[String]) -> Result<Config> {
        let mut c = Config::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--no-ceilings" {
                c.ceilings = false;
                continue;
            }
            let v = it
                .next()
                .ok_or_else(|| Error::InvalidArgument(format!("{a} needs a value")))?;
            let num = |v: &str| {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| *x >= 0.0)
                    .ok_or_else(|| Error::InvalidArgument(format!("{a} {v}: not a number")))
            };
            match a.as_str() {
                "--workloads" => c.workloads = pick_workloads(v)?,
                "--devices" => c.devices = v.split(',').map(|s| s.trim().to_uppercase()).collect(),
                "--threads" => {
                    c.threads = v
                        .split(',')
                        .map(|t| match t.trim() {
                            "all" => Ok(0),
                            n => num(n).map(|x| x as usize),
                        })
                        .collect::<Result<_>>()?
                }
                "--repeats" => c.repeats = (num(v)? as usize).max(1),
                "--budget-s" => c.budget_s = num(v)?,
                "--copy-mib" => c.copy_bytes = ((num(v)? * 1048576.0) as usize).max(4096),
                "--cold-runs" => c.cold_runs = num(v)? as usize,
                "--warm-s" => c.warm_s = num(v)?,
                "--flush-mib" => {
                    let mib = num(v)?;
                    if !(0.0..=1048576.0).contains(&mib) {
                        return Err(Error::InvalidArgument(format!(
                            "workloads: --flush-mib {v}: expected 0 to 1048576 MiB"
                        )));
                    }
                    c.flush_mib = mib as usize;
                }
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "workloads: unknown option {other} (--workloads, --devices, --threads, \
                         --repeats, --budget-s, --copy-mib, --cold-runs, --warm-s, --flush-mib, \
                         --no-ceilings)"
                    )))
                }
            }
        }
        Ok(c)
    }

    fn thread_counts(&self) -> Vec<usize> {
        let mut t: Vec<usize> = self
            .threads
            .iter()
            .map(|&t| if t == 0 { cores() } else { t })
            .collect();
        t.dedup();
        t
    }
}

/// What one workload costs before it runs, on one device.
struct Prepared {
    kernels: usize,
    schedule_s: f64,
    codegen_s: f64,
    /// Seconds per unique kernel source: wall time, and the compiling thread's CPU time.
    compile_s: Vec<f64>,
    compile_cpu_s: Vec<f64>,
    items: Vec<ExecItem>,
    var_vals: VarVals,
    flops: f64,
    bytes: f64,
}

fn prepare(w: &Workload, device: &str) -> Result<Prepared> {
    let outs = defs::build(w.id)?;
    let rest: Vec<&Tensor> = outs[1..].iter().collect();
    let t = Instant::now();
    let (sched, var_vals) = outs[0].schedule_with_vars(&rest)?;
    let schedule_s = t.elapsed().as_secs_f64();
    let dev = open_device(device)?;
    let (mut kernels, mut codegen_s, mut sources) = (0, 0.0, BTreeSet::new());
    for si in sched.iter().filter(|si| si.is_kernel()) {
        let t = Instant::now();
        let mut k = get_kernel(&*dev.renderer, &si.ast)?;
        let p = k.to_program(&*dev.renderer)?;
        codegen_s += t.elapsed().as_secs_f64();
        kernels += 1;
        sources.insert(p.src);
    }
    let (mut compile_s, mut compile_cpu_s) = (vec![], vec![]);
    for src in &sources {
        let (t, c) = (Instant::now(), thread_cpu_s());
        dev.compiler.compile(src)?;
        compile_s.push(t.elapsed().as_secs_f64());
        compile_cpu_s.push(thread_cpu_s() - c);
    }
    let items: Vec<ExecItem> = sched
        .iter()
        .map(lower_schedule_item)
        .collect::<Result<_>>()?;
    let (mut flops, mut bytes) = (0.0, 0.0);
    for ei in &items {
        flops += sym_infer(ei.runner.op_estimate(), &var_vals)? as f64;
        bytes += sym_infer(ei.runner.mem_estimate(), &var_vals)? as f64;
    }
    Ok(Prepared {
        kernels,
        schedule_s,
        codegen_s,
        compile_s,
        compile_cpu_s,
        items,
        var_vals,
        flops,
        bytes,
    })
}

/// Seconds this thread has run on a CPU (`CLOCK_THREAD_CPUTIME_ID`; NaN where it fails).
pub(crate) fn thread_cpu_s() -> f64 {
    rawgrad::driver::os::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
        .map_or(f64::NAN, |ns| ns as f64 * 1e-9)
}

/// Wall and calling-thread CPU seconds of each timed run.
type Times = (Vec<f64>, Vec<f64>);

/// Run `f` for `warm_s` seconds, at least once (the warm-up, unless `steady_only`; module doc),
/// then up to `repeats` times within `budget_s`, each after writing `flush_mib` MiB of scratch
/// when asked; the times in seconds (wall, and the calling thread's CPU time: with one thread
/// the kernels run on the calling thread, so on a loaded machine it is the time the work itself
/// took).
fn repeat(cfg: &Config, warm: bool, mut f: impl FnMut() -> Result<()>) -> Result<Times> {
    if warm {
        let start = Instant::now();
        f()?;
        while start.elapsed().as_secs_f64() < cfg.warm_s {
            f()?;
        }
    }
    let mut scratch = vec![0u8; cfg.flush_mib << 20];
    let (start, mut times, mut cpu) = (Instant::now(), vec![], vec![]);
    while times.len() < cfg.repeats
        && (times.is_empty() || start.elapsed().as_secs_f64() < cfg.budget_s)
    {
        if !scratch.is_empty() {
            let b = scratch[0].wrapping_add(1);
            scratch.fill(b);
            std::hint::black_box(&scratch);
        }
        let (t, c) = (Instant::now(), thread_cpu_s());
        f()?;
        times.push(t.elapsed().as_secs_f64());
        cpu.push(thread_cpu_s() - c);
    }
    Ok((times, cpu))
}

fn run_items(p: &Prepared) -> Result<()> {
    let opts = RunOptions {
        wait: true,
        no_stats: true,
        ..RunOptions::default()
    };
    for ei in &p.items {
        ei.run_with(&p.var_vals, opts)?;
    }
    Ok(())
}

/// Seconds of each cold realize of `w` on `device` (see the module doc): wall, and the calling
/// thread's CPU time.
fn cold_realize(cfg: &Config, w: &Workload, device: &str) -> Result<Times> {
    let _c = Context::new(&[("CACHELEVEL", 0)]);
    let dev = open_device(device)?;
    let (mut wall, mut cpu) = (vec![], vec![]);
    for _ in 0..cfg.cold_runs {
        {
            let outs = defs::build(w.id)?;
            let rest: Vec<&Tensor> = outs[1..].iter().collect();
            dev.synchronize()?;
            clear_method_cache();
            let (t, c) = (Instant::now(), thread_cpu_s());
            let (sched, var_vals) = outs[0].schedule_with_vars(&rest)?;
            run_schedule(sched, &var_vals)?;
            dev.synchronize()?;
            wall.push(t.elapsed().as_secs_f64());
            cpu.push(thread_cpu_s() - c);
        }
    }
    Ok((wall, cpu))
}

/// W9: `CHAIN` eager steps; seconds per step.
fn eager_chain(cfg: &Config) -> Result<Times> {
    let x0 = Tensor::rand(&[1024])?.realize()?;
    let times = repeat(cfg, true, || {
        let mut x = x0.clone();
        for _ in 0..CHAIN {
            x = defs::chain_step(&x)?.realize()?;
        }
        Ok(())
    })?;
    let per = |v: Vec<f64>| v.iter().map(|t| t / CHAIN as f64).collect();
    Ok((per(times.0), per(times.1)))
}

/// One row of the table.
struct Row {
    w: &'static Workload,
    device: String,
    threads: usize,
    /// Kernels, schedule and codegen seconds per kernel, compile seconds per unique kernel (wall,
    /// CPU).
    cost: (usize, f64, f64, Stats, Stats),
    /// Cold realize seconds, wall and the calling thread's CPU (`None`: not measured).
    cold: Option<(Stats, Stats)>,
    time: Stats,
    /// The calling thread's CPU time of the same runs.
    time_cpu: Stats,
    rate: f64,
    ceiling: Option<f64>,
}

fn fmt_ms(s: f64) -> String {
    let ms = s * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.4}")
    }
}

fn rows_for(
    cfg: &Config,
    w: &'static Workload,
    device: &str,
    ceil: &[Ceilings],
) -> Result<Vec<Row>> {
    let _d = Context::with_str(&[("DEVICE", device)]);
    let p = prepare(w, device)?;
    let k = p.kernels.max(1) as f64;
    let compile = Stats::of(&p.compile_s);
    let compile_cpu = Stats::of(&p.compile_cpu_s);
    let cost = (
        p.kernels,
        p.schedule_s / k,
        p.codegen_s / k,
        compile,
        compile_cpu,
    );
    let mut rows = vec![];
    for c in ceil {
        let _t = Context::new(&[("CLANG_THREADS", c.threads as i64)]);
        let cold = (cfg.cold_runs > 0 && !w.eager && !w.steady_only)
            .then(|| cold_realize(cfg, w, device))
            .transpose()?
            .map(|(t, c)| (Stats::of(&t), Stats::of(&c)));
        let (times, cpu) = if w.eager {
            eager_chain(cfg)?
        } else {
            repeat(cfg, !w.steady_only, || run_items(&p))?
        };
        let (time, time_cpu) = (Stats::of(&times), Stats::of(&cpu));
        let (amount, ceiling) = match w.bound {
            Bound::Compute => (p.flops, c.fma.map(|f| f.median)),
            Bound::Memory => (p.bytes, c.copy.map(|x| x.median)),
        };
        rows.push(Row {
            w,
            device: device.to_string(),
            threads: c.threads,
            cost,
            cold,
            time,
            time_cpu,
            rate: amount / time.median / 1e9,
            ceiling,
        });
    }
    Ok(rows)
}

fn table(cfg: &Config, ceil: &[Ceilings], rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workloads: up to {} repeats ({} s budget each) after {} s of warm-up runs{}, median \
         [p10-p90]; rate at the median; % of the ceiling with the same threads",
        cfg.repeats,
        cfg.budget_s,
        cfg.warm_s,
        if cfg.flush_mib > 0 {
            format!(", each after writing {} MiB of scratch", cfg.flush_mib)
        } else {
            String::new()
        }
    );
    for c in ceil {
        let gflops = |s: Option<Stats>| {
            s.map_or("not measured".to_string(), |f| {
                format!("{:.1} GFLOP/s [{:.1}-{:.1}]", f.median, f.p10, f.p90)
            })
        };
        let (fma, muladd) = (gflops(c.fma), gflops(c.muladd));
        let copy = c.copy.map_or("not measured".to_string(), |x| {
            format!(
                "{:.1} GB/s [{:.1}-{:.1}] (read+write, {} MiB)",
                x.median,
                x.p10,
                x.p90,
                cfg.copy_bytes >> 20
            )
        });
        let gbs = |s: Option<Stats>, what: &str| {
            s.map_or("not measured".to_string(), |x| {
                format!("{:.1} GB/s [{:.1}-{:.1}] ({what})", x.median, x.p10, x.p90)
            })
        };
        let read = gbs(c.read, "read only");
        let triad = gbs(c.triad, "a*b+c, 3 read + 1 written");
        let _ = writeln!(
            out,
            "ceilings, {} thread(s): FMA {fma}; mul+add {muladd} (unfused, the kernels' \
             rounding); copy {copy}; read {read}; triad {triad}",
            c.threads
        );
    }
    let _ = writeln!(
        out,
        "| W   | workload                             | device | thr | kernels | sched us/k | codegen us/k | compile ms/k [p10-p90] | compile cpu ms/k [p10-p90] | cold ms [p10-p90], cpu ms     | steady ms [p10-p90]        | steady cpu ms [p10-p90] | rate          | % ceil |"
    );
    let _ = writeln!(out, "|{}|", "-".repeat(258));
    for r in rows {
        let (kernels, sched, codegen, compile, compile_cpu) = r.cost;
        let unit = match r.w.bound {
            Bound::Compute => "GFLOP/s",
            Bound::Memory => "GB/s",
        };
        let pct = r
            .ceiling
            .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * r.rate / c));
        let cold = r.cold.map_or("-".to_string(), |(w, c)| {
            let (med, lo, hi) = (fmt_ms(w.median), fmt_ms(w.p10), fmt_ms(w.p90));
            format!("{med} [{lo}-{hi}] cpu {}", fmt_ms(c.median))
        });
        let _ = writeln!(
            out,
            "| {:<3} | {:<36} | {:<6} | {:>3} | {:>7} | {:>10.1} | {:>12.1} | {:>7} [{}-{}] | {:>7} [{}-{}] | {:>30} | {:>9} [{}-{}]{} | {:>7} [{}-{}] | {:>7.2} {:<5} | {:>6} |",
            r.w.id,
            r.w.what,
            r.device,
            r.threads,
            kernels,
            sched * 1e6,
            codegen * 1e6,
            fmt_ms(compile.median),
            fmt_ms(compile.p10),
            fmt_ms(compile.p90),
            fmt_ms(compile_cpu.median),
            fmt_ms(compile_cpu.p10),
            fmt_ms(compile_cpu.p90),
            cold,
            fmt_ms(r.time.median),
            fmt_ms(r.time.p10),
            fmt_ms(r.time.p90),
            if r.w.eager { " /kernel" } else { "" },
            fmt_ms(r.time_cpu.median),
            fmt_ms(r.time_cpu.p10),
            fmt_ms(r.time_cpu.p90),
            r.rate,
            unit,
            pct
        );
    }
    out
}

/// Measure everything `cfg` asks for and return the table; a device that does not open is
/// skipped with its reason.
pub fn run(cfg: &Config) -> Result<String> {
    let ceil = if cfg.ceilings {
        ceilings::measure(&cfg.thread_counts(), cfg.copy_bytes, cfg.repeats)?
    } else {
        ceilings::unmeasured(&cfg.thread_counts())
    };
    let mut rows = vec![];
    let mut skipped = String::new();
    for device in &cfg.devices {
        if let Err(e) = open_device(device) {
            let _ = writeln!(skipped, "skipped {device}: {e}");
            continue;
        }
        for w in &cfg.workloads {
            rows.extend(rows_for(cfg, w, device, &ceil)?);
        }
    }
    Ok(table(cfg, &ceil, &rows) + &skipped)
}
