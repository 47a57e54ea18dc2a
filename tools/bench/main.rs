//! rawgrad's benchmarks. `cargo run --release --bin bench -- dispatch [options]`: per-kernel host
//! overhead, launch latency, back-to-back throughput and copy bandwidth on every device that
//! opens (see `dispatch.rs`). `bench jit [options]`: eager vs TinyJit replay of a kernel chain
//! (see `jit.rs`).

mod dispatch;
mod jit;

use std::process::ExitCode;

const USAGE: &str = "usage: bench dispatch [--devices CLANG,NV,CUDA] [--n 1000] [--repeats 21] \
[--sizes-mib 1,64 | --sizes-bytes 4096] [--baseline DEVICE]\n       bench jit [--devices CLANG,LLVM] \
[--kernels 64] [--n 1024] [--repeats 21]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("dispatch") => {
            let result = dispatch::Config::parse(&args[1..]).and_then(|c| dispatch::run(&c));
            match result {
                Ok(table) => {
                    print!("{table}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("bench dispatch: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("jit") => match jit::Config::parse(&args[1..]).and_then(|c| jit::run(&c)) {
            Ok(table) => {
                print!("{table}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench jit: {e}");
                ExitCode::FAILURE
            }
        },
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
