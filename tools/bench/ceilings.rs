//! The machine's ceilings, measured in the same run as the workloads they judge:
//!
//! - FMA: a register-resident loop of independent vector fused multiply-adds (12 accumulators of
//!   the widest vector the host's LLVM features allow: 16 floats with AVX-512, 8 with AVX, else
//!   4), written as LLVM IR and built by rawgrad's own LLVM device (compiled in process, loaded by
//!   its ELF loader), run on 1 thread and on all of them (each thread runs the whole loop).
//!   GFLOP/s counts 2 flops per lane per FMA.
//! - Mul+add: the same loop with each FMA written as an `fmul` then an `fadd` (no fast-math
//!   flags, so nothing fuses them): the rate of a kernel that keeps INTERP's unfused rounding, as
//!   rawgrad's CPU kernels do (a multiply-add is two instructions, so on a machine with as many
//!   FMA as ADD pipes this is half the FMA ceiling). GFLOP/s counts 2 flops per lane per pair.
//! - Copy: `copy_from_slice` of a buffer (256 MiB by default) into another, split in contiguous
//!   chunks across 1 or all threads (`std::thread::scope`). GB/s counts bytes read plus bytes
//!   written, as the workloads' memory estimates do.
//! - Read and triad (`streams.rs`): loops of vector loads (a row sum's ceiling) and of
//!   `o = a * b + c` (W1's), over the same bytes as the copy, after warm passes.
//!
//! Each is repeated and reported as median and p10-p90 ([`Stats`]).

use std::time::Instant;

use rawgrad::device::{Allocator, BufferOptions, Compiler, HostAllocator, Runtime};
use rawgrad::helpers::Context;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;
use rawgrad::Result;

use crate::dispatch::Stats;
use crate::streams::{self, Stream};

/// Accumulators in the FMA loop (enough independent chains to cover FMA latency x pipes).
const ACCS: usize = 12;

/// Accumulators of the loop: [`ACCS`] for the FMA loop; for the mul+add loop, with 32 vector
/// registers (AVX-512), twice as many (on this 2-core AVX-512 VM that loop ran 94 GFLOP/s with 12
/// and 114 with 24; a C loop of either, `-ffp-contract=off`, 113-116).
fn loop_accs(w: usize, fused: bool) -> usize {
    if !fused && w >= 16 {
        2 * ACCS
    } else {
        ACCS
    }
}

/// Measured ceilings for one thread count.
#[derive(Clone, Copy, Debug)]
pub struct Ceilings {
    pub threads: usize,
    /// GFLOP/s of the FMA loop on all `threads` together (`None` without libLLVM).
    pub fma: Option<Stats>,
    /// GFLOP/s of the unfused multiply-then-add loop (`None` without libLLVM).
    pub muladd: Option<Stats>,
    /// GB/s (read + written) of the copy (`None` when not measured).
    pub copy: Option<Stats>,
    /// GB/s read by the read loop (`None` when not measured or without libLLVM).
    pub read: Option<Stats>,
    /// GB/s read and written by the triad (`None` when not measured or without libLLVM).
    pub triad: Option<Stats>,
}

/// The vector width the host's features allow.
pub fn lanes(features: &str) -> usize {
    if features.contains("+avx512f") {
        16
    } else if features.contains("+avx") {
        8
    } else {
        4
    }
}

/// The FMA loop: `acc_j = fma(acc_j, m, c)` (with `fused` false, `acc_j * m` then `+ c`) for
/// `vals[0]` iterations, then the lanes' sum of all accumulators stored at `out[core]` (so nothing
/// is dead).
fn fma_ir(w: usize, opaque: bool, fused: bool) -> String {
    let accs = loop_accs(w, fused);
    let v = format!("<{w} x float>");
    let splat = |x: &str| format!("<{}>", vec![format!("float {x}"); w].join(", "));
    let (pp, p32) = if opaque {
        ("ptr", "ptr")
    } else {
        ("i8**", "i32*")
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
    for j in 0..accs {
        let init = splat(&format!("{:.1}", 1.0 + j as f64));
        l.push(format!(
            "  %a{j} = phi {v} [{init}, %entry], [%b{j}, %loop]"
        ));
    }
    for j in 0..accs {
        let (m, c) = (splat("0.5"), splat("1.0"));
        if fused {
            l.push(format!(
                "  %b{j} = call {v} @llvm.fma.v{w}f32({v} %a{j}, {v} {m}, {v} {c})"
            ));
        } else {
            l.push(format!("  %m{j} = fmul {v} %a{j}, {m}"));
            l.push(format!("  %b{j} = fadd {v} %m{j}, {c}"));
        }
    }
    l.push("  %i.next = add i32 %i, 1".into());
    l.push("  %more = icmp slt i32 %i.next, %n".into());
    l.push("  br i1 %more, label %loop, label %exit".into());
    l.push("exit:".into());
    let mut acc = "%b0".to_string();
    for j in 1..accs {
        l.push(format!("  %s{j} = fadd {v} {acc}, %b{j}"));
        acc = format!("%s{j}");
    }
    l.push(format!("  %r = extractelement {v} {acc}, i32 0"));
    l.extend(store_per_core("float", opaque));
    l.push("  ret void".into());
    l.push("}".into());
    l.join("\n") + "\n"
}

/// The lines that store `%r` (of scalar type `t`) at `((t*) bufs[0])[core]`.
pub fn store_per_core(t: &str, opaque: bool) -> Vec<String> {
    if opaque {
        vec![
            "  %o8 = load ptr, ptr %bufs".into(),
            format!("  %o = getelementptr {t}, ptr %o8, i32 %core"),
            format!("  store {t} %r, ptr %o"),
        ]
    } else {
        vec![
            "  %o8 = load i8*, i8** %bufs".into(),
            format!("  %of = bitcast i8* %o8 to {t}*"),
            format!("  %o = getelementptr {t}, {t}* %of, i32 %core"),
            format!("  store {t} %r, {t}* %o"),
        ]
    }
}

/// GFLOP/s of the FMA loop (`fused` false: the mul+add loop) on `threads` threads, `repeats`
/// times (`None` without libLLVM).
pub fn fma(threads: usize, repeats: usize, fused: bool) -> Result<Option<Stats>> {
    let compiler = match LLVMCompiler::new() {
        Ok(c) => c,
        Err(e) => {
            println!("FMA ceiling not measured: {e}");
            return Ok(None);
        }
    };
    let w = lanes(&compiler.llvm().host_features());
    let obj = compiler.compile(&fma_ir(w, compiler.llvm().opaque_pointers(), fused))?;
    let prg = compiler.runtime().load("fma_ceiling", &obj)?;
    let h = HostAllocator;
    let out = h.alloc(4 * threads.max(1), &BufferOptions::default())?;
    let _g = Context::new(&[("CLANG_THREADS", threads as i64)]);
    let iters: i64 = 2_000_000;
    let accs = loop_accs(w, fused);
    let flops = (threads * accs * w * 2) as f64 * iters as f64;
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
                fma: fma(threads, repeats, true)?,
                muladd: fma(threads, repeats, false)?,
                copy: Some(copy(threads, copy_bytes, repeats)),
                read: streams::measure(Stream::Read, threads, copy_bytes, repeats)?,
                triad: streams::measure(Stream::Triad, threads, copy_bytes, repeats)?,
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
            muladd: None,
            copy: None,
            read: None,
            triad: None,
        })
        .collect()
}
