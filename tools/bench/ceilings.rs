//! The machine's ceilings, measured in the same run as the workloads they judge:
//!
//! - FMA: a register-resident loop of independent vector fused multiply-adds (12 accumulators of
//!   the widest vector the host's LLVM features allow: 16 floats with AVX-512, 8 with AVX, else
//!   4), written as LLVM IR and built by rawgrad's own LLVM device (compiled in process, loaded by
//!   its ELF loader), run on 1 thread and on all of them (each thread runs the whole loop).
//!   GFLOP/s counts 2 flops per lane per FMA.
//! - Copy: `copy_from_slice` of a buffer (256 MiB by default) into another, split in contiguous
//!   chunks across 1 or all threads (`std::thread::scope`). GB/s counts bytes read plus bytes
//!   written, as the workloads' memory estimates do.
//!
//! Each is repeated and reported as median and p10-p90 ([`Stats`]).

use std::time::Instant;

use rawgrad::device::{Allocator, BufferOptions, Compiler, HostAllocator, Runtime};
use rawgrad::helpers::Context;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;
use rawgrad::Result;

use crate::dispatch::Stats;

/// Accumulators in the FMA loop (enough independent chains to cover FMA latency x pipes).
const ACCS: usize = 12;

/// Measured ceilings for one thread count.
#[derive(Clone, Copy, Debug)]
pub struct Ceilings {
    pub threads: usize,
    /// GFLOP/s of the FMA loop on all `threads` together (`None` without libLLVM).
    pub fma: Option<Stats>,
    /// GB/s (read + written) of the copy (`None` when not measured).
    pub copy: Option<Stats>,
}

/// The vector width the host's features allow.
fn lanes(features: &str) -> usize {
    if features.contains("+avx512f") {
        16
    } else if features.contains("+avx") {
        8
    } else {
        4
    }
}

/// The FMA loop: `acc_j = fma(acc_j, m, c)` for `vals[0]` iterations, then the lanes' sum of all
/// accumulators stored at `out[core]` (so nothing is dead).
fn fma_ir(w: usize, opaque: bool) -> String {
    let v = format!("<{w} x float>");
    let splat = |x: &str| format!("<{}>", vec![format!("float {x}"); w].join(", "));
    let (pp, p32, pf, p8) = if opaque {
        ("ptr", "ptr", "ptr", "ptr")
    } else {
        ("i8**", "i32*", "float*", "i8*")
    };
    let mut l = vec![
        format!("declare {v} @llvm.fma.v{w}f32({v}, {v}, {v})"),
        format!("define void @fma_ceiling_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores) {{"),
        "entry:".into(),
        format!("  %n = load i32, {p32} %vals"),
        "  br label %loop".into(),
        "loop:".into(),
        "  %i = phi i32 [0, %entry], [%i.next, %loop]".into(),
    ];
    for j in 0..ACCS {
        let init = splat(&format!("{:.1}", 1.0 + j as f64));
        l.push(format!(
            "  %a{j} = phi {v} [{init}, %entry], [%b{j}, %loop]"
        ));
    }
    for j in 0..ACCS {
        l.push(format!(
            "  %b{j} = call {v} @llvm.fma.v{w}f32({v} %a{j}, {v} {}, {v} {})",
            splat("0.5"),
            splat("1.0")
        ));
    }
    l.push("  %i.next = add i32 %i, 1".into());
    l.push("  %more = icmp slt i32 %i.next, %n".into());
    l.push("  br i1 %more, label %loop, label %exit".into());
    l.push("exit:".into());
    let mut acc = "%b0".to_string();
    for j in 1..ACCS {
        l.push(format!("  %s{j} = fadd {v} {acc}, %b{j}"));
        acc = format!("%s{j}");
    }
    l.push(format!("  %r = extractelement {v} {acc}, i32 0"));
    l.push(format!("  %o8 = load {p8}, {pp} %bufs"));
    if opaque {
        l.push("  %o = getelementptr float, ptr %o8, i32 %core".into());
    } else {
        l.push("  %of = bitcast i8* %o8 to float*".into());
        l.push("  %o = getelementptr float, float* %of, i32 %core".into());
    }
    l.push(format!("  store float %r, {pf} %o"));
    l.push("  ret void".into());
    l.push("}".into());
    l.join("\n") + "\n"
}

/// GFLOP/s of the FMA loop on `threads` threads, `repeats` times (`None` without libLLVM).
pub fn fma(threads: usize, repeats: usize) -> Result<Option<Stats>> {
    let compiler = match LLVMCompiler::new() {
        Ok(c) => c,
        Err(e) => {
            println!("FMA ceiling not measured: {e}");
            return Ok(None);
        }
    };
    let w = lanes(&compiler.llvm().host_features());
    let obj = compiler.compile(&fma_ir(w, compiler.llvm().opaque_pointers()))?;
    let prg = compiler.runtime().load("fma_ceiling", &obj)?;
    let h = HostAllocator;
    let out = h.alloc(4 * threads.max(1), &BufferOptions::default())?;
    let _g = Context::new(&[("CLANG_THREADS", threads as i64)]);
    let iters: i64 = 2_000_000;
    let flops = (threads * ACCS * w * 2) as f64 * iters as f64;
    let global = Some([threads, 1, 1]);
    prg.call(
        std::slice::from_ref(&out),
        &[iters / 10],
        global,
        None,
        true,
    )?;
    let mut rates = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        prg.call(std::slice::from_ref(&out), &[iters], global, None, true)?;
        rates.push(flops / t.elapsed().as_secs_f64() / 1e9);
    }
    Ok(Some(Stats::of(&rates)))
}

/// GB/s (read + written) of copying `bytes` on `threads` threads, `repeats` times.
pub fn copy(threads: usize, bytes: usize, repeats: usize) -> Stats {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let chunk = bytes.div_ceil(threads.max(1)).max(1);
    let pass = |dst: &mut [u8]| {
        std::thread::scope(|s| {
            for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(c));
            }
        })
    };
    pass(&mut dst);
    let mut rates = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        pass(&mut dst);
        rates.push(2.0 * bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    std::hint::black_box(&dst);
    Stats::of(&rates)
}

/// Both ceilings for each thread count.
pub fn measure(
    thread_counts: &[usize],
    copy_bytes: usize,
    repeats: usize,
) -> Result<Vec<Ceilings>> {
    thread_counts
        .iter()
        .map(|&threads| {
            Ok(Ceilings {
                threads,
                fma: fma(threads, repeats)?,
                copy: Some(copy(threads, copy_bytes, repeats)),
            })
        })
        .collect()
}

/// Thread counts without measurements (`--no-ceilings`).
pub fn unmeasured(thread_counts: &[usize]) -> Vec<Ceilings> {
    thread_counts
        .iter()
        .map(|&threads| Ceilings {
            threads,
            fma: None,
            copy: None,
        })
        .collect()
}
