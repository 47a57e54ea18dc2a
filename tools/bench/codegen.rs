//! `bench codegen`: the time of the codegen steps per kernel on the workloads of issue 10
//! (`workloads/defs.rs`), split into `get_kernel` (the Kernel and its opts), the linearizer
//! (`Kernel::linearize`) and the renderer, in CPU time of the thread (the machine may be shared),
//! as the median over `repeats` runs of each kernel, and the wall time of the three; with
//! `--dump DIR`, the rendered source of every kernel (first run) is written to
//! `DIR/{workload}_{device}_{n}.src`, so two builds can be compared byte for byte (`diff -r`).
//!
//! Kernel names carry a process-wide dedup counter, so a dump is comparable only with a dump of
//! the same command line. No thresholds: the numbers are for people.
//!
//! `--kernels 15,32` times only those kernel numbers of each workload (the `#` column; the others
//! are still scheduled, so the numbers and names are those of the full run).
//!
//! `--unfilled` builds the workloads over empty input buffers (`defs::build_unfilled`): no kernel
//! runs, so the command runs under valgrind (`valgrind --tool=callgrind
//! --toggle-collect='*time_kernel*' bench codegen --unfilled ...` counts the instructions of the
//! timed steps alone).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use rawgrad::codegen::renderer::Renderer;
use rawgrad::engine::realize::get_kernel;
use rawgrad::helpers::to_function_name;
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::{Error, Result};

use crate::dispatch::Stats;
use crate::workloads::defs::{self, Workload, ALL};

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub workloads: Vec<&'static Workload>,
    pub devices: Vec<String>,
    pub repeats: usize,
    pub dump: Option<PathBuf>,
    /// Empty input buffers instead of realized random ones.
    pub unfilled: bool,
    /// Only these kernel numbers (`--kernels 15,32`) of each workload; empty: all.
    pub kernels: Vec<usize>,
}

impl Config {
    pub fn parse(args: &[String]) -> Result<Config> {
        let mut cfg = Config {
            workloads: ALL.iter().filter(|w| !w.steady_only).collect(),
            devices: vec!["CLANG".into(), "LLVM".into()],
            repeats: 5,
            dump: None,
            unfilled: false,
            kernels: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || {
                it.next().ok_or_else(|| {
                    Error::InvalidArgument(format!("bench codegen: {a} needs a value"))
                })
            };
            match a.as_str() {
                "--workloads" => cfg.workloads = crate::workloads::pick_workloads(val()?)?,
                "--devices" => {
                    cfg.devices = val()?.split(',').map(|d| d.trim().to_uppercase()).collect()
                }
                "--repeats" => {
                    cfg.repeats = val()?.parse().map_err(|e| {
                        Error::InvalidArgument(format!("bench codegen: --repeats: {e}"))
                    })?
                }
                "--dump" => cfg.dump = Some(PathBuf::from(val()?)),
                "--unfilled" => cfg.unfilled = true,
                "--kernels" => cfg.kernels = parse_kernels(val()?)?,
                other => rawgrad::bail!(InvalidArgument, "bench codegen: unknown option {other}"),
            }
        }
        rawgrad::ensure!(
            cfg.repeats >= 1,
            InvalidArgument,
            "bench codegen: --repeats must be at least 1"
        );
        Ok(cfg)
    }
}

/// The kernel numbers of `--kernels` (comma separated).
fn parse_kernels(list: &str) -> Result<Vec<usize>> {
    list.split(',')
        .map(|n| {
            n.trim().parse().map_err(|e| {
                Error::InvalidArgument(format!("bench codegen: --kernels: {n:?}: {e}"))
            })
        })
        .collect()
}

/// Seconds this thread has run on a CPU (`CLOCK_THREAD_CPUTIME_ID`: on a loaded machine the wall
/// time mostly measures waiting for a core), or the wall time where that clock fails.
fn cpu_s(start: Instant) -> f64 {
    rawgrad::driver::os::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
        .map_or(start.elapsed().as_secs_f64(), |ns| ns as f64 * 1e-9)
}

/// CPU seconds per step of one kernel (get_kernel, linearize, render) and the wall seconds of
/// all three. Never inlined: valgrind's `--toggle-collect` names it.
#[inline(never)]
fn time_kernel(
    renderer: &dyn Renderer,
    ast: &[rawgrad::ops::LazyOp],
) -> Result<([f64; 4], String)> {
    let wall = Instant::now();
    let t0 = cpu_s(wall);
    let mut k = get_kernel(renderer, ast)?;
    let t1 = cpu_s(wall);
    let lin = k.linearize()?.clone();
    let t2 = cpu_s(wall);
    let src = renderer.render(&to_function_name(&lin.name), &lin.uops)?;
    let t3 = cpu_s(wall);
    let w = wall.elapsed().as_secs_f64();
    Ok(([t1 - t0, t2 - t1, t3 - t2, w], src))
}

fn rows_for(cfg: &Config, w: &Workload, device: &str, out: &mut String) -> Result<()> {
    let _d = Context::with_str(&[("DEVICE", device)]);
    let outs = if cfg.unfilled {
        defs::build_unfilled(w.id)?
    } else {
        defs::build(w.id)?
    };
    let rest: Vec<&rawgrad::Tensor> = outs[1..].iter().collect();
    let (sched, _) = outs[0].schedule_with_vars(&rest)?;
    let dev = open_device(device)?;
    for (n, si) in sched.iter().filter(|si| si.is_kernel()).enumerate() {
        if !cfg.kernels.is_empty() && !cfg.kernels.contains(&n) {
            continue;
        }
        let mut steps: [Vec<f64>; 4] = Default::default();
        let mut first = None;
        for _ in 0..cfg.repeats {
            let (t, src) = time_kernel(&*dev.renderer, &si.ast)?;
            for (s, v) in steps.iter_mut().zip(t) {
                s.push(v);
            }
            first.get_or_insert(src);
        }
        let src = first.unwrap_or_default();
        if let Some(dir) = &cfg.dump {
            let path = dir.join(format!("{}_{device}_{n}.src", w.id));
            std::fs::write(&path, &src).map_err(|e| {
                Error::Io(format!("bench codegen: writing {}: {e}", path.display()))
            })?;
        }
        let [kt, lt, rt, wt] = steps.map(|s| Stats::of(&s).median * 1e6);
        let name = src.lines().find(|l| l.contains('(')).unwrap_or("").trim();
        let name: String = name.chars().take(40).collect();
        let _ = writeln!(
            out,
            "| {:<3} | {:<6} | {:>3} | {:>10.1} | {:>10.1} | {:>10.1} | {:>10.1} | {:>10.1} | {:<40} |",
            w.id, device, n, kt, lt, rt, kt + lt + rt, wt, name
        );
    }
    Ok(())
}

/// Measure everything `cfg` asks for and return the table; a device that does not open is
/// skipped with its reason.
pub fn run(cfg: &Config) -> Result<String> {
    if let Some(dir) = &cfg.dump {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Io(format!("bench codegen: creating {}: {e}", dir.display())))?;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "codegen: median of {} runs per kernel, CPU us of this thread per step, and wall us\n| W   | device | #   | get_kernel | linearize  | render     | total cpu  | total wall | function                                 |",
        cfg.repeats
    );
    for device in &cfg.devices {
        if let Err(e) = open_device(device) {
            let _ = writeln!(out, "skipped {device}: {e}");
            continue;
        }
        for w in &cfg.workloads {
            rows_for(cfg, w, device, &mut out)?;
        }
    }
    Ok(out)
}
