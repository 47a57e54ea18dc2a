//! `bench dispatch`: what users measure first on a GPU backend (perf-anchors section 0-2): host
//! time to enqueue one empty kernel, launch-to-completion as the host sees it, back-to-back
//! throughput of N empty kernels, and copy bandwidth both ways, for every device that opens.
//!
//! Each quantity is measured `repeats` times; the table shows the median and the p10-p90 spread,
//! and the median's ratio to the baseline device (the first that opened, or `--baseline`). No
//! thresholds: the numbers are for people.

use std::fmt::Write as _;
use std::time::Instant;

use rawgrad::codegen::uops::UOp;
use rawgrad::device::{BufferOptions, Compiled, Program, RawBuf};
use rawgrad::dtype::dtypes;
use rawgrad::runtime::builtin::open_device;
use rawgrad::{Error, Result};

/// The devices tried when none are named (AMD only when `MOCKGPU=1` or `AMD=1` asks for it).
pub const DEFAULT_DEVICES: [&str; 6] = ["CLANG", "LLVM", "INTERP", "AMD", "NV", "CUDA"];

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub devices: Vec<String>,
    /// Kernels per back-to-back batch.
    pub n: usize,
    pub repeats: usize,
    /// Copy sizes in bytes.
    pub copy_sizes: Vec<usize>,
    pub baseline: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        let amd =
            rawgrad::helpers::getenv("MOCKGPU", 0) != 0 || rawgrad::helpers::getenv("AMD", 0) != 0;
        Config {
            devices: DEFAULT_DEVICES
                .iter()
                .filter(|d| **d != "AMD" || amd)
                .map(|d| d.to_string())
                .collect(),
            n: 1000,
            repeats: 21,
            copy_sizes: vec![1 << 20, 64 << 20],
            baseline: None,
        }
    }
}

impl Config {
    /// Parse `--devices A,B --n N --repeats R --sizes-mib 1,64 --baseline DEV`.
    pub fn parse(args: &[String]) -> Result<Config> {
        let mut c = Config::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| Error::InvalidArgument(format!("{a} needs a value")))
            };
            let num = |v: String| {
                v.parse::<usize>()
                    .map_err(|_| Error::InvalidArgument(format!("{a} {v}: not a count")))
            };
            match a.as_str() {
                "--devices" => c.devices = val()?.split(',').map(|s| s.trim().to_uppercase()).collect(),
                "--n" => c.n = num(val()?)?.max(1),
                "--repeats" => c.repeats = num(val()?)?.max(1),
                "--sizes-mib" => {
                    c.copy_sizes = val()?
                        .split(',')
                        .map(|s| num(s.trim().to_string()).map(|m| m << 20))
                        .collect::<Result<_>>()?
                }
                "--sizes-bytes" => {
                    c.copy_sizes = val()?
                        .split(',')
                        .map(|s| num(s.trim().to_string()))
                        .collect::<Result<_>>()?
                }
                "--baseline" => c.baseline = Some(val()?.to_uppercase()),
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "dispatch: unknown option {other} (--devices, --n, --repeats, --sizes-mib, --sizes-bytes, --baseline)"
                    )))
                }
            }
        }
        Ok(c)
    }
}

/// Median, p10 and p90 of some samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Stats {
    pub fn of(samples: &[f64]) -> Stats {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| -> f64 {
            if v.is_empty() {
                return f64::NAN;
            }
            let i = ((v.len() - 1) as f64 * q).round() as usize;
            v[i.min(v.len() - 1)]
        };
        Stats {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

/// One row: a device's measurement of one quantity.
#[derive(Clone, Debug)]
pub struct Row {
    pub device: String,
    pub metric: String,
    pub unit: &'static str,
    pub stats: Stats,
    /// Whether a larger value is better (throughput, bandwidth).
    pub higher_is_better: bool,
}

/// The empty kernel of a device: one output buffer, no body.
fn empty_kernel(dev: &Compiled) -> Result<Box<dyn Program>> {
    let uops = [UOp::define_global(dtypes::float32, 0, true)];
    let src = dev.renderer.render("E_empty", &uops)?;
    let lib = dev.compiler.compile(&src)?;
    dev.runtime.load("E_empty", &lib)
}

fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Measure one device.
pub fn measure(dev: &Compiled, cfg: &Config) -> Result<Vec<Row>> {
    let prg = empty_kernel(dev)?;
    let opts = BufferOptions::default();
    let buf = dev.allocator.alloc(64, &opts)?;
    let bufs = std::slice::from_ref(&buf);
    let dims = Some([1, 1, 1]);
    let call = |wait| prg.call(bufs, &[], dims, dims, wait);
    // warm up (first-launch costs are not what this measures)
    for _ in 0..3 {
        call(true)?;
    }
    let (mut enqueue, mut complete, mut batch) = (vec![], vec![], vec![]);
    for _ in 0..cfg.repeats {
        enqueue.push(time(|| call(false))? * 1e6);
        dev.synchronize()?;
        complete.push(time(|| call(true))? * 1e6);
        let t = time(|| {
            for _ in 0..cfg.n {
                call(false)?;
            }
            dev.synchronize()
        })?;
        batch.push(cfg.n as f64 / t);
    }
    let row = |metric: &str, unit, samples: &[f64], higher| Row {
        device: dev.name.clone(),
        metric: metric.to_string(),
        unit,
        stats: Stats::of(samples),
        higher_is_better: higher,
    };
    let mut rows = vec![
        row("enqueue empty kernel", "us", &enqueue, false),
        row("launch to completion", "us", &complete, false),
        row(&format!("back-to-back x{}", cfg.n), "kern/s", &batch, true),
    ];
    dev.allocator.free(buf, 64, &opts);
    for &size in &cfg.copy_sizes {
        rows.extend(measure_copies(dev, cfg, size, &row)?);
    }
    Ok(rows)
}

type RowFn<'a> = dyn Fn(&str, &'static str, &[f64], bool) -> Row + 'a;

fn measure_copies(dev: &Compiled, cfg: &Config, size: usize, row: &RowFn) -> Result<Vec<Row>> {
    let opts = BufferOptions::default();
    let buf: RawBuf = dev.allocator.alloc(size, &opts)?;
    let host: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut back = vec![0u8; size];
    let gbs = |t: f64| size as f64 / t / 1e9;
    let (mut h2d, mut d2h) = (vec![], vec![]);
    dev.allocator.copyin(&buf, &host)?;
    dev.synchronize()?;
    for _ in 0..cfg.repeats {
        h2d.push(gbs(time(|| {
            dev.allocator.copyin(&buf, &host)?;
            dev.synchronize()
        })?));
        d2h.push(gbs(time(|| dev.allocator.copyout(&mut back, &buf))?));
    }
    dev.allocator.free(buf, size, &opts);
    if back != host {
        return Err(Error::Device(format!(
            "{}: {size}-byte copy came back different",
            dev.name
        )));
    }
    let label = size_label(size);
    Ok(vec![
        row(&format!("copy host->device {label}"), "GB/s", &h2d, true),
        row(&format!("copy device->host {label}"), "GB/s", &d2h, true),
    ])
}

fn size_label(size: usize) -> String {
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        format!("{} MiB", size >> 20)
    } else if size >= 1 << 10 && size % (1 << 10) == 0 {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 1e5 {
        format!("{x:.3e}")
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// The table: one line per (metric, device), the devices of a metric together; `ratio` is how
/// many times better than the baseline (>1 is better, whatever the unit).
pub fn table(rows: &[Row], baseline: Option<&str>) -> String {
    let base = baseline
        .map(str::to_string)
        .or_else(|| rows.first().map(|r| r.device.clone()));
    let mut metrics: Vec<&str> = vec![];
    for r in rows {
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {:<26} | {:<8} | {:>10} | {:>23} | {:<6} | {:>9} |",
        "metric", "device", "median", "p10 - p90", "unit", "vs base"
    );
    let _ = writeln!(
        out,
        "|{:-<28}|{:-<10}|{:-<12}|{:-<25}|{:-<8}|{:-<11}|",
        "", "", "", "", "", ""
    );
    for m in metrics {
        let of_m: Vec<&Row> = rows.iter().filter(|r| r.metric == m).collect();
        let b = of_m
            .iter()
            .find(|r| Some(&r.device) == base.as_ref())
            .map(|r| r.stats.median);
        for r in of_m {
            let ratio = match b {
                Some(b) if b > 0.0 && r.stats.median > 0.0 => {
                    let x = if r.higher_is_better {
                        r.stats.median / b
                    } else {
                        b / r.stats.median
                    };
                    format!("{x:.2}x")
                }
                _ => "-".into(),
            };
            let spread = format!("{} - {}", fmt_num(r.stats.p10), fmt_num(r.stats.p90));
            let _ = writeln!(
                out,
                "| {:<26} | {:<8} | {:>10} | {:>23} | {:<6} | {:>9} |",
                r.metric,
                r.device,
                fmt_num(r.stats.median),
                spread,
                r.unit,
                ratio
            );
        }
    }
    out
}

/// Run the benchmark: measure every device that opens (saying why others are skipped) and
/// return the table.
pub fn run(cfg: &Config) -> Result<String> {
    let mut rows = vec![];
    let mut notes = String::new();
    for d in &cfg.devices {
        let dev = match open_device(d) {
            Ok(dev) => dev,
            Err(e) => {
                let _ = writeln!(notes, "skipped {d}: {}", e.message());
                continue;
            }
        };
        match measure(&dev, cfg) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                let _ = writeln!(notes, "failed {d}: {}", e.message());
            }
        }
    }
    if rows.is_empty() {
        return Err(Error::Device(format!(
            "dispatch: no device could be measured\n{notes}"
        )));
    }
    let base = cfg.baseline.as_deref().or_else(|| {
        // CUDA is the natural baseline of NV when both are here
        let has = |n: &str| rows.iter().any(|r| r.device == n);
        (has("NV") && has("CUDA")).then_some("CUDA")
    });
    let mut out = format!(
        "dispatch: {} repeats, back-to-back batches of {}, baseline {}\n",
        cfg.repeats,
        cfg.n,
        base.unwrap_or(rows[0].device.as_str())
    );
    out.push_str(&table(&rows, base));
    out.push_str(&notes);
    Ok(out)
}
