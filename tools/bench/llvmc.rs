//! `bench llvmc`: where the LLVM CPU device's compile time goes. It compiles every kernel source of
//! a folder written by `bench codegen --devices LLVM --dump DIR` (`*.src`, LLVM IR) `repeats` times
//! with the device's own compiler options, in the order of the file names, and prints per source:
//! its IR instruction count, the first compile of the source (the very first of the process pays
//! libLLVM's one-time set-up as well), the median of the later ones, the median split into the
//! stages of `Llvm::compile_linked_timed` (context, parse, link+verify, target machine, IR passes,
//! codegen), and the time of rawgrad's ELF loader on the object, all in CPU time of the compiling
//! thread (the machine may be shared); compare two builds interleaved all the same. With `--asm
//! OUT` it also writes each source's host assembly to `OUT/NAME.s` (to check that a change leaves
//! the machine code as it was: diff two builds' folders).
//!
//! No thresholds: the numbers are for people.

use std::fmt::Write as _;
use std::path::PathBuf;

use rawgrad::device::Compiler;
use rawgrad::ffi::llvm::{Emit, StageTimes};
use rawgrad::runtime::cpu::llvm::{libcalls, LLVMCompiler, MODULE_SEPARATOR};
use rawgrad::runtime::cpu::objload;
use rawgrad::{Error, Result};

use crate::dispatch::Stats;

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub repeats: usize,
    /// Run `LLVMCompiler::warm_up` first, as the device does when it opens (`--warm-up 0`: not).
    pub warm_up: bool,
    /// Where to write each source's assembly (`--asm OUT`), if anywhere.
    pub asm: Option<PathBuf>,
}

impl Config {
    pub fn parse(args: &[String]) -> Result<Config> {
        let (mut dir, mut repeats, mut warm_up, mut asm) = (None, 5usize, true, None);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let val = it
                .next()
                .ok_or_else(|| Error::InvalidArgument(format!("bench llvmc: {a} needs a value")));
            match a.as_str() {
                "--dir" => dir = Some(PathBuf::from(val?)),
                "--warm-up" => warm_up = val? != "0",
                "--asm" => asm = Some(PathBuf::from(val?)),
                "--repeats" => {
                    repeats = val?.parse().map_err(|e| {
                        Error::InvalidArgument(format!("bench llvmc: --repeats: {e}"))
                    })?
                }
                other => rawgrad::bail!(InvalidArgument, "bench llvmc: unknown option {other}"),
            }
        }
        let Some(dir) = dir else {
            rawgrad::bail!(
                InvalidArgument,
                "bench llvmc: --dir DIR is needed (from bench codegen --dump)"
            );
        };
        rawgrad::ensure!(
            repeats >= 2,
            InvalidArgument,
            "bench llvmc: --repeats must be at least 2 (the first compile is shown apart)"
        );
        Ok(Config {
            dir,
            repeats,
            warm_up,
            asm,
        })
    }
}

/// The `*.src` files of `dir`, sorted by name.
fn sources(dir: &PathBuf) -> Result<Vec<(String, String)>> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::Io(format!("bench llvmc: reading {}: {e}", dir.display())))?;
    let mut out = vec![];
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".src") {
            let text = std::fs::read_to_string(e.path())
                .map_err(|err| Error::Io(format!("bench llvmc: reading {name}: {err}")))?;
            out.push((stem.to_string(), text));
        }
    }
    out.sort();
    Ok(out)
}

/// The kernel entry (`NAME_rg`) a source defines.
fn entry_of(src: &str) -> Option<String> {
    src.lines()
        .filter_map(|l| l.strip_prefix("define void @"))
        .find_map(|l| l.split('(').next().filter(|n| n.ends_with("_rg")))
        .map(str::to_string)
}

/// IR instructions: the body lines of the source that are not labels, braces or attributes.
fn instructions(src: &str) -> usize {
    src.lines()
        .filter(|l| l.starts_with("  ") && !l.trim().is_empty())
        .count()
}

/// One source's row and its median stage split.
fn row(c: &LLVMCompiler, name: &str, src: &str, repeats: usize) -> Result<(String, [f64; 8])> {
    let modules: Vec<&str> = src.split(MODULE_SEPARATOR).collect();
    let llvm = c.llvm();
    let (mut walls, mut splits, mut first) = (vec![], vec![], 0.0);
    let mut obj = vec![];
    for i in 0..repeats {
        let mut st = StageTimes::default();
        let t = crate::workloads::thread_cpu_s();
        obj =
            llvm.compile_linked_timed(&modules, &c.options_for(&modules), Emit::Object, &mut st)?;
        let w = crate::workloads::thread_cpu_s() - t;
        if i == 0 {
            first = w;
        } else {
            walls.push(w);
            splits.push(st);
        }
    }
    let entry = entry_of(src)
        .ok_or_else(|| Error::InvalidArgument(format!("bench llvmc: {name}: no _rg entry")))?;
    let major = llvm.version().major;
    let mut loads = vec![];
    for _ in 0..repeats {
        let t = crate::workloads::thread_cpu_s();
        let k = objload::load(&obj, &entry, &|s| libcalls::resolve(major, s))?;
        loads.push(crate::workloads::thread_cpu_s() - t);
        drop(k);
    }
    let med = |f: &dyn Fn(&StageTimes) -> f64| {
        Stats::of(&splits.iter().map(f).collect::<Vec<_>>()).median * 1e3
    };
    let v = [
        first * 1e3,
        Stats::of(&walls).median * 1e3,
        med(&|s| s.context),
        med(&|s| s.parse),
        med(&|s| s.link_verify + s.machine),
        med(&|s| s.passes),
        med(&|s| s.codegen),
        Stats::of(&loads).median * 1e3,
    ];
    let line = format!(
        "| {:<14} | {:>6} | {:>8.2} | {:>8.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.3} | {:>6} |",
        name,
        instructions(src),
        v[0],
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        v[6],
        v[7],
        obj.len()
    );
    Ok((line, v))
}

/// Write the host assembly of `src` (compiled as the device compiles it) to `dir/NAME.s`.
fn write_asm(c: &LLVMCompiler, dir: &PathBuf, name: &str, src: &str) -> Result<()> {
    let modules: Vec<&str> = src.split(MODULE_SEPARATOR).collect();
    let asm = c
        .llvm()
        .compile_linked(&modules, &c.options_for(&modules), Emit::Assembly)?;
    let path = dir.join(format!("{name}.s"));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, asm))
        .map_err(|e| Error::Io(format!("bench llvmc: writing {}: {e}", path.display())))
}

/// Compile every source of `cfg.dir` and return the table.
pub fn run(cfg: &Config) -> Result<String> {
    let c = LLVMCompiler::new()?;
    let srcs = sources(&cfg.dir)?;
    let t = crate::workloads::thread_cpu_s();
    if cfg.warm_up {
        c.warm_up()?;
    }
    let warm_ms = (crate::workloads::thread_cpu_s() - t) * 1e3;
    rawgrad::ensure!(
        !srcs.is_empty(),
        InvalidArgument,
        "bench llvmc: no *.src in {}",
        cfg.dir.display()
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "llvmc: {:?}, pipeline {:?}; warm-up {warm_ms:.2} ms; CPU ms of the thread, median of {} compiles after the first\n| source         | instrs | first ms | later ms | context |   parse | link+tm |  passes | codegen | load ms |  bytes |",
        c.llvm(),
        c.pipeline(),
        cfg.repeats - 1
    );
    let mut sum = [0.0; 8];
    for (name, src) in &srcs {
        if let Some(dir) = &cfg.asm {
            write_asm(&c, dir, name, src)?;
        }
        let (line, v) = row(&c, name, src, cfg.repeats)?;
        let _ = writeln!(out, "{line}");
        for (s, x) in sum.iter_mut().zip(v) {
            *s += x;
        }
    }
    let n = srcs.len() as f64;
    let _ = writeln!(
        out,
        "| mean of {:<6} |        | {:>8.2} | {:>8.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.2} | {:>7.3} |        |",
        srcs.len(),
        sum[0] / n,
        sum[1] / n,
        sum[2] / n,
        sum[3] / n,
        sum[4] / n,
        sum[5] / n,
        sum[6] / n,
        sum[7] / n
    );
    // the compiler of the device, as the engine calls it, for a cross-check of the split
    let t = crate::workloads::thread_cpu_s();
    c.compile(&srcs[0].1)?;
    let _ = writeln!(
        out,
        "Compiler::compile of {} once more: {:.2} ms",
        srcs[0].0,
        (crate::workloads::thread_cpu_s() - t) * 1e3
    );
    Ok(out)
}
