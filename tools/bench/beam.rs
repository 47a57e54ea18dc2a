//! `bench beam`: how long BEAM search takes on a kernel, and what it finds. For each kernel (a
//! matmul and a reduction, built through the Tensor API and scheduled), BEAM=`amt` runs from the
//! kernel with its required opts, with the disk cache off (`CACHELEVEL=0`), `repeats` times; the
//! table shows each search's wall time, the candidates it timed, and the kernel times of the
//! picked opts and of the hand-coded heuristics (both timed whole, min of 3 runs).
//!
//! No thresholds: the numbers are for people. Search times vary with the machine's load.

use std::fmt::Write as _;
use std::time::Instant;

use rawgrad::codegen::kernel::Kernel;
use rawgrad::engine::search::{beam_search_stats, bufs_from_lin, time_linearizer};
use rawgrad::helpers::Context;
use rawgrad::ops::LazyOp;
use rawgrad::runtime::builtin::open_device;
use rawgrad::{Error, Result, Tensor};

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub device: String,
    pub amt: usize,
    pub repeats: usize,
    /// Matmul size (n x n by n x n).
    pub n: usize,
    /// The reduction: sum over the last axis of rows x cols.
    pub rows: usize,
    pub cols: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            device: "CLANG".into(),
            amt: 2,
            repeats: 3,
            n: 256,
            rows: 1024,
            cols: 1024,
        }
    }
}

impl Config {
    /// Parse `--device CLANG --amt 2 --repeats 3 --n 256 --rows 1024 --cols 1024`.
    pub fn parse(args: &[String]) -> Result<Config> {
        let mut c = Config::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| Error::InvalidArgument(format!("{a} needs a value")))?;
            let num = || {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| Error::InvalidArgument(format!("{a} {v}: not a positive count")))
            };
            match a.as_str() {
                "--device" => c.device = v.to_uppercase(),
                "--amt" => c.amt = num()?,
                "--repeats" => c.repeats = num()?,
                "--n" => c.n = num()?,
                "--rows" => c.rows = num()?,
                "--cols" => c.cols = num()?,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "bench beam: unknown option {a}"
                    )))
                }
            }
        }
        Ok(c)
    }
}

/// The AST of the last kernel `t` schedules.
fn last_ast(t: &Tensor) -> Result<Vec<LazyOp>> {
    let sched = t.schedule(&[])?;
    sched
        .last()
        .map(|si| si.ast.clone())
        .ok_or_else(|| Error::Internal("bench beam: nothing scheduled".into()))
}

fn kernels(c: &Config) -> Result<Vec<(String, Vec<LazyOp>)>> {
    let _d = Context::with_str(&[("DEFAULT", &c.device)]);
    let a = Tensor::rand(&[c.n, c.n])?.realize()?;
    let b = Tensor::rand(&[c.n, c.n])?.realize()?;
    let x = Tensor::rand(&[c.rows, c.cols])?.realize()?;
    Ok(vec![
        (
            format!("matmul {0}x{0}x{0}", c.n),
            last_ast(&a.matmul(&b)?)?,
        ),
        (
            format!("sum last axis {}x{}", c.rows, c.cols),
            last_ast(&x.sum_axis(-1, false)?)?,
        ),
    ])
}

/// Run the searches and return the table.
pub fn run(c: &Config) -> Result<String> {
    let dev = open_device(&c.device)?;
    let r = &*dev.renderer;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "beam: BEAM={} on {}, disk cache off, {} repeats",
        c.amt, c.device, c.repeats
    );
    let _ = writeln!(
        out,
        "| kernel                    | run | search s | rounds | timed | beam us | hc us | beam opts"
    );
    for (name, ast) in kernels(c)? {
        let _g = Context::new(&[("CACHELEVEL", 0)]);
        let mut kb = Kernel::new(&ast, r.opts())?;
        kb.required_optimizations()?;
        let bufs = bufs_from_lin(&kb, &c.device, true)?;
        let mut hc = Kernel::new(&ast, r.opts())?;
        hc.hand_coded_optimizations()?;
        let hc_us = time_linearizer(&hc, &bufs, false, 65536, 3, true, false)? * 1e6;
        for run in 0..c.repeats {
            let st = Instant::now();
            let (k, stats) = beam_search_stats(&kb, &bufs, c.amt, true)?;
            let secs = st.elapsed().as_secs_f64();
            let us = time_linearizer(&k, &bufs, false, 65536, 3, true, false)? * 1e6;
            let opts: Vec<String> = k.applied_opts.iter().map(|o| o.to_string()).collect();
            let _ = writeln!(
                out,
                "| {name:<25} | {run:>3} | {secs:>8.2} | {:>6} | {:>5} | {us:>7.1} | {hc_us:>5.1} | {}",
                stats.rounds,
                stats.timed,
                opts.join(" ")
            );
        }
    }
    Ok(out)
}
