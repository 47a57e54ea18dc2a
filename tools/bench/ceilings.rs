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
//! - Read: a loop of vector loads over a buffer of the same size (4 accumulators of integer
//!   adds, so no arithmetic latency limits it), written as LLVM IR like the FMA loop and split in
//!   contiguous chunks across the threads; GB/s counts bytes read. A reduction such as a row sum
//!   only reads, so this, not the copy, is its ceiling.
//!
//! Each is repeated and reported as median and p10-p90 ([`Stats`]).

use std::time::Instant;

use rawgrad::device::{
    Allocator, BufferOptions, Compiler, HostAllocator, Program, RawBuf, Runtime,
};
use rawgrad::helpers::Context;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;
use rawgrad::Result;

use crate::dispatch::Stats;

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

/// The FMA loop: `acc_j = fma(acc_j, m, c)` (with `fused` false, `acc_j * m` then `+ c`) for
/// `vals[0]` iterations, then the lanes' sum of all accumulators stored at `out[core]` (so nothing
/// is dead).
fn fma_ir(w: usize, opaque: bool, fused: bool) -> String {
    let accs = loop_accs(w, fused);
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

/// Vectors the read loop loads per iteration (one accumulator each).
const READ_ACCS: usize = 4;

/// Untimed passes of the read loop before the timed ones: steady state, as the workloads' warm-up
/// gives theirs (a last-level cache that admits a stream adaptively needs many passes to hold it;
/// see `workloads.rs`).
const READ_WARM_PASSES: usize = 30;

/// The read loop: core `core` adds the `vals[0] * READ_ACCS` vectors of `<w x i32>` of its chunk
/// of `bufs[1]` into [`READ_ACCS`] accumulators, then stores the lanes' sum at `out[core]`.
fn read_ir(w: usize, opaque: bool) -> String {
    let v = format!("<{w} x i32>");
    let (pp, p32, p8) = if opaque {
        ("ptr", "ptr", "ptr")
    } else {
        ("i8**", "i32*", "i8*")
    };
    let vp = if opaque {
        "ptr".into()
    } else {
        format!("{v}*")
    };
    let mut l = vec![
        format!("declare i32 @llvm.vector.reduce.add.v{w}i32({v})"),
        format!("define void @read_ceiling_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores) {{"),
        "entry:".into(),
        format!("  %n32 = load i32, {p32} %vals"),
        "  %n = zext i32 %n32 to i64".into(),
        "  %c = zext i32 %core to i64".into(),
        format!("  %sp = getelementptr {p8}, {pp} %bufs, i32 1"),
        format!("  %s8 = load {p8}, {pp} %sp"),
    ];
    l.push(if opaque {
        "  %s = getelementptr i8, ptr %s8, i64 0".into()
    } else {
        format!("  %s = bitcast i8* %s8 to {vp}")
    });
    l.push("  %start = mul i64 %c, %n".into());
    l.push("  %end = add i64 %start, %n".into());
    l.push("  br label %loop".into());
    l.push("loop:".into());
    l.push("  %i = phi i64 [%start, %entry], [%i.next, %loop]".into());
    for j in 0..READ_ACCS {
        l.push(format!(
            "  %a{j} = phi {v} [zeroinitializer, %entry], [%b{j}, %loop]"
        ));
    }
    l.push(format!("  %i4 = mul i64 %i, {READ_ACCS}"));
    for j in 0..READ_ACCS {
        l.push(format!("  %k{j} = add i64 %i4, {j}"));
        l.push(format!("  %p{j} = getelementptr {v}, {vp} %s, i64 %k{j}"));
        l.push(format!("  %v{j} = load {v}, {vp} %p{j}, align 64"));
        l.push(format!("  %b{j} = add {v} %a{j}, %v{j}"));
    }
    l.push("  %i.next = add i64 %i, 1".into());
    l.push("  %more = icmp ult i64 %i.next, %end".into());
    l.push("  br i1 %more, label %loop, label %exit".into());
    l.push("exit:".into());
    l.push(format!("  %s01 = add {v} %b0, %b1"));
    l.push(format!("  %s23 = add {v} %b2, %b3"));
    l.push(format!("  %sum = add {v} %s01, %s23"));
    l.push(format!(
        "  %r = call i32 @llvm.vector.reduce.add.v{w}i32({v} %sum)"
    ));
    l.push(format!("  %o8 = load {p8}, {pp} %bufs"));
    if opaque {
        l.push("  %o = getelementptr i32, ptr %o8, i32 %core".into());
    } else {
        l.push("  %of = bitcast i8* %o8 to i32*".into());
        l.push("  %o = getelementptr i32, i32* %of, i32 %core".into());
    }
    l.push(format!("  store i32 %r, {p32} %o"));
    l.push("  ret void".into());
    l.push("}".into());
    l.join("\n") + "\n"
}

/// The read loop, compiled and loaded, over a source buffer of `total` bytes.
struct ReadLoop {
    prg: Box<dyn Program>,
    /// `[out, src]`: one i32 sum per thread, then the bytes read.
    bufs: [RawBuf; 2],
    /// Iterations per thread.
    n: i64,
    threads: usize,
    total: usize,
}

impl ReadLoop {
    /// The loop over `bytes` (rounded down to whole iterations of every thread) on `threads`
    /// threads, its source filled by `fill` (`None` without libLLVM or under one iteration each).
    fn new(threads: usize, bytes: usize, fill: impl Fn(usize) -> u8) -> Result<Option<Self>> {
        let compiler = match LLVMCompiler::new() {
            Ok(c) => c,
            Err(e) => {
                println!("read ceiling not measured: {e}");
                return Ok(None);
            }
        };
        let w = lanes(&compiler.llvm().host_features());
        let threads = threads.max(1);
        let step = w * 4 * READ_ACCS;
        let per_core = bytes / step / threads;
        if per_core == 0 {
            return Ok(None);
        }
        let n = i32::try_from(per_core).map_err(|_| {
            rawgrad::Error::InvalidArgument(format!(
                "read ceiling: {bytes} bytes is {per_core} iterations per thread, over the loop's \
                 i32"
            ))
        })? as i64;
        let total = per_core * step * threads;
        let obj = compiler.compile(&read_ir(w, compiler.llvm().opaque_pointers()))?;
        let prg = compiler.runtime().load("read_ceiling", &obj)?;
        let h = HostAllocator;
        let out = h.alloc(4 * threads, &BufferOptions::default())?;
        let src = h.alloc(total, &BufferOptions::default())?;
        h.copyin(&src, &(0..total).map(fill).collect::<Vec<u8>>())?;
        let bufs = [out, src];
        Ok(Some(ReadLoop {
            prg,
            bufs,
            n,
            threads,
            total,
        }))
    }

    /// One pass of every thread over its chunk.
    fn pass(&self) -> Result<()> {
        let _g = Context::new(&[("CLANG_THREADS", self.threads as i64)]);
        let global = Some([self.threads, 1, 1]);
        self.prg.call(&self.bufs, &[self.n], global, None, true)?;
        Ok(())
    }
}

/// GB/s read by the read loop over `bytes` on `threads` threads, `repeats` times after
/// [`READ_WARM_PASSES`] untimed passes (`None` without libLLVM).
pub fn read(threads: usize, bytes: usize, repeats: usize) -> Result<Option<Stats>> {
    let Some(l) = ReadLoop::new(threads, bytes, |_| 1)? else {
        return Ok(None);
    };
    for _ in 0..READ_WARM_PASSES {
        l.pass()?;
    }
    let mut rates = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        l.pass()?;
        rates.push(l.total as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    Ok(Some(Stats::of(&rates)))
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
                read: read(threads, copy_bytes, repeats)?,
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
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each thread's sum is the wrapping sum of the i32 words of exactly its chunk: the source
    /// holds distinct words (byte `i` is `i * 7 % 251`), so a skipped, repeated or foreign
    /// vector changes a sum.
    #[test]
    fn the_read_loop_sums_every_word_of_each_threads_chunk() {
        let fill = |i: usize| (i * 7 % 251) as u8;
        let Some(l) = ReadLoop::new(2, 3 << 16, fill).unwrap() else {
            panic!("the bench needs libLLVM for its ceilings");
        };
        assert!(l.total > 0 && l.total <= 3 << 16 && l.total % 2 == 0);
        l.pass().unwrap();
        let mut out = vec![0u8; 8];
        HostAllocator.copyout(&mut out, &l.bufs[0]).unwrap();
        let chunk = l.total / 2;
        for core in 0..2 {
            let want = (core * chunk..(core + 1) * chunk)
                .step_by(4)
                .map(|i| u32::from_le_bytes([fill(i), fill(i + 1), fill(i + 2), fill(i + 3)]))
                .fold(0u32, u32::wrapping_add);
            let got = u32::from_le_bytes(out[4 * core..4 * core + 4].try_into().unwrap());
            assert_eq!(got, want, "thread {core}");
        }
    }
}
