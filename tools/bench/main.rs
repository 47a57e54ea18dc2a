//! rawgrad's benchmarks (`cargo run --release --bin bench -- <subcommand> [options]`):
//! - `dispatch`: per-kernel host overhead, launch latency, back-to-back throughput and copy
//!   bandwidth on every device that opens (see `dispatch.rs`);
//! - `workloads`: issue 10's W1..W12 on the CPU devices, one thread and all threads, against the
//!   machine's FMA and copy ceilings measured in the same run (see `workloads.rs`, `ceilings.rs`);
//! - `beam`: BEAM search time and picks on a matmul and a reduction (see `beam.rs`);
//! - `jit`: eager vs TinyJit replay of a kernel chain, with and without graphs (see `jit.rs`);
//! - `codegen`: get_kernel, linearizer and renderer time per kernel of the workloads, and their
//!   rendered sources for a byte-for-byte comparison of two builds (see `codegen.rs`);
//! - `llvmc`: the LLVM device's compile time per kernel source, split into its stages (see
//!   `llvmc.rs`).

mod beam;
mod ceilings;
mod codegen;
mod dispatch;
mod jit;
mod llvmc;
mod streams;
mod workloads;

use std::fmt::Display;
use std::process::ExitCode;

const USAGE: &str = "usage: bench dispatch [--devices CLANG,NV,CUDA] [--n 1000] [--repeats 21] \
[--sizes-mib 1,64 | --sizes-bytes 4096] [--baseline DEVICE]
       bench workloads [--workloads W1,W3] [--devices CLANG,LLVM] [--threads 1,all] \
[--repeats 11] [--budget-s 10] [--copy-mib 256] [--cold-runs 3] [--warm-s 0.3] [--flush-mib 0]
       bench beam [--device CLANG] [--amt 2] [--repeats 3] [--n 256] [--rows 1024] [--cols 1024]
       bench jit [--devices CLANG,LLVM] [--kernels 64] [--n 1024] [--repeats 21] [--graph-only 1]
       bench codegen [--workloads W3,W7] [--devices CLANG,LLVM] [--repeats 5] [--dump DIR] \
[--unfilled] [--kernels 15,32]
       bench llvmc --dir DIR [--repeats 5] [--warm-up 1] [--asm OUT]";

/// Print a subcommand's table, or its error under its name.
fn report<T: Display>(name: &str, result: rawgrad::Result<T>) -> ExitCode {
    match result {
        Ok(table) => {
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    match args.first().map(String::as_str) {
        Some("dispatch") => report(
            "dispatch",
            dispatch::Config::parse(rest).and_then(|c| dispatch::run(&c)),
        ),
        Some("workloads") => report(
            "workloads",
            workloads::Config::parse(rest).and_then(|c| workloads::run(&c)),
        ),
        Some("beam") => report(
            "beam",
            beam::Config::parse(rest).and_then(|c| beam::run(&c)),
        ),
        Some("jit") => report("jit", jit::Config::parse(rest).and_then(|c| jit::run(&c))),
        Some("codegen") => report(
            "codegen",
            codegen::Config::parse(rest).and_then(|c| codegen::run(&c)),
        ),
        Some("llvmc") => report(
            "llvmc",
            llvmc::Config::parse(rest).and_then(|c| llvmc::run(&c)),
        ),
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::dispatch::*;

    #[test]
    fn stats_are_order_statistics() {
        let s = Stats::of(&[5.0, 1.0, 3.0, 2.0, 4.0, f64::NAN]);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.p10, 1.0);
        assert_eq!(s.p90, 5.0);
    }

    #[test]
    fn options_parse_and_refuse_unknown_ones() {
        let args: Vec<String> = ["--devices", "clang,cuda", "--n", "5", "--sizes-mib", "1,64"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = Config::parse(&args).unwrap();
        assert_eq!(c.devices, vec!["CLANG", "CUDA"]);
        assert_eq!(c.n, 5);
        assert_eq!(c.copy_sizes, vec![1 << 20, 64 << 20]);
        assert!(Config::parse(&["--bogus".to_string()]).is_err());
        assert!(Config::parse(&["--n".to_string()]).is_err());
    }

    /// A tiny run on the CPU devices (CUDA too: it is skipped with its reason where absent)
    /// prints a well-formed table.
    #[test]
    fn dispatch_runs_and_prints_a_table() {
        let cfg = Config {
            devices: vec!["CLANG".into(), "INTERP".into(), "CUDA".into()],
            n: 3,
            repeats: 3,
            copy_sizes: vec![4096],
            baseline: None,
        };
        let out = run(&cfg).unwrap();
        println!("{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("dispatch: 3 repeats"), "{out}");
        let rows: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("| "))
            .collect();
        // header + 5 metrics for each measured device
        let measured = ["CLANG", "INTERP", "CUDA"]
            .iter()
            .filter(|d| rows.iter().any(|r| r.contains(&format!("| {:<8} |", d))))
            .count();
        assert!(measured >= 2, "{out}");
        assert_eq!(rows.len(), 1 + 5 * measured, "{out}");
        for r in &rows {
            assert_eq!(r.matches('|').count(), 7, "{r}");
        }
        assert!(
            out.contains("| enqueue empty kernel       | CLANG    |"),
            "{out}"
        );
        assert!(out.contains("copy host->device 4 KiB"), "{out}");
        assert!(out.contains("1.00x"), "{out}");
        if !rows.iter().any(|r| r.contains("| CUDA     |")) {
            assert!(out.contains("skipped CUDA: "), "{out}");
        }
    }
}
