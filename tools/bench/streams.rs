//! The memory-bound ceilings of `ceilings.rs` that a copy does not give: loops of vector loads
//! (and stores) over buffers, written as LLVM IR and built by rawgrad's own LLVM device, like the
//! FMA loop, each thread running over its contiguous chunk.
//!
//! - [`Stream::Read`]: [`READ_ACCS`] accumulators of integer adds of the loaded vectors (no
//!   arithmetic latency limits it); the per-thread sums are stored so nothing is dead. A row
//!   sum only reads: this is its ceiling. GB/s counts bytes read.
//! - [`Stream::Triad`]: `o = a * b + c` in float vectors (an `fmul` then an `fadd`, as W1's
//!   kernel computes it), plain stores. GB/s counts the three buffers read and the one written,
//!   as W1's memory estimate does, so with the same bytes (`--copy-mib 64`) it is W1's ceiling.
//!
//! Both run [`WARM_PASSES`] untimed passes first: steady state, as the workloads' warm-up gives
//! theirs (a last-level cache that admits a stream adaptively needs many passes to hold it; see
//! `workloads.rs`). Not guaranteed: the rate of any other access pattern.

use std::time::Instant;

use rawgrad::device::{
    Allocator, BufferOptions, Compiler, HostAllocator, Program, RawBuf, Runtime,
};
use rawgrad::helpers::Context;
use rawgrad::runtime::cpu::llvm::LLVMCompiler;
use rawgrad::{Error, Result};

use crate::dispatch::Stats;

/// Vectors the read loop loads per iteration (one accumulator each).
pub const READ_ACCS: usize = 4;

/// Untimed passes before the timed ones.
pub const WARM_PASSES: usize = 30;

/// Which loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Read,
    Triad,
}

impl Stream {
    /// The data buffers after `bufs[0]` (the per-thread sums): read: the source; triad: o, a, b, c.
    fn data_buffers(self) -> usize {
        match self {
            Stream::Read => 1,
            Stream::Triad => 4,
        }
    }

    /// Vectors of each data buffer one iteration touches.
    fn vectors_per_iteration(self) -> usize {
        match self {
            Stream::Read => READ_ACCS,
            Stream::Triad => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stream::Read => "read",
            Stream::Triad => "triad",
        }
    }
}

/// The pointer spellings `(i8**, i32*, i8*, <w x T>*)` (all `ptr` with opaque pointers).
fn ptrs(opaque: bool, v: &str) -> [String; 4] {
    if opaque {
        ["ptr", "ptr", "ptr", "ptr"].map(String::from)
    } else {
        ["i8**".into(), "i32*".into(), "i8*".into(), format!("{v}*")]
    }
}

/// The entry block: `%n` iterations per thread from `vals[0]`, this thread's `[%start, %end)`,
/// and data buffer `k` (1-based) as `%s{k}`, a pointer to vectors `v`.
fn entry(s: Stream, v: &str, opaque: bool) -> Vec<String> {
    let [pp, p32, p8, vp] = ptrs(opaque, v);
    let mut l = vec![
        "entry:".into(),
        format!("  %n32 = load i32, {p32} %vals"),
        "  %n = zext i32 %n32 to i64".into(),
        "  %c = zext i32 %core to i64".into(),
        "  %start = mul i64 %c, %n".into(),
        "  %end = add i64 %start, %n".into(),
    ];
    for k in 1..=s.data_buffers() {
        l.push(format!(
            "  %sp{k} = getelementptr {p8}, {pp} %bufs, i32 {k}"
        ));
        l.push(format!("  %s8_{k} = load {p8}, {pp} %sp{k}"));
        l.push(if opaque {
            format!("  %s{k} = getelementptr i8, ptr %s8_{k}, i64 0")
        } else {
            format!("  %s{k} = bitcast i8* %s8_{k} to {vp}")
        });
    }
    l.push("  br label %loop".into());
    l
}

/// The read loop's body and exit: the lanes' wrapping sum of its accumulators at `out[core]`.
fn read_body(w: usize, opaque: bool) -> Vec<String> {
    let v = format!("<{w} x i32>");
    let vp = &ptrs(opaque, &v)[3];
    let mut l = vec![];
    for j in 0..READ_ACCS {
        l.push(format!(
            "  %a{j} = phi {v} [zeroinitializer, %entry], [%b{j}, %loop]"
        ));
    }
    l.push(format!("  %i4 = mul i64 %i, {READ_ACCS}"));
    for j in 0..READ_ACCS {
        l.push(format!("  %k{j} = add i64 %i4, {j}"));
        l.push(format!("  %p{j} = getelementptr {v}, {vp} %s1, i64 %k{j}"));
        l.push(format!("  %v{j} = load {v}, {vp} %p{j}, align 64"));
        l.push(format!("  %b{j} = add {v} %a{j}, %v{j}"));
    }
    l.extend(latch());
    l.push(format!("  %s01 = add {v} %b0, %b1"));
    l.push(format!("  %s23 = add {v} %b2, %b3"));
    l.push(format!("  %sum = add {v} %s01, %s23"));
    l.push(format!(
        "  %r = call i32 @llvm.vector.reduce.add.v{w}i32({v} %sum)"
    ));
    l.extend(crate::ceilings::store_per_core("i32", opaque));
    l
}

/// The triad's body: `o[i] = a[i] * b[i] + c[i]` for vector `i` (buffers 1-4: o, a, b, c).
fn triad_body(w: usize, opaque: bool) -> Vec<String> {
    let v = format!("<{w} x float>");
    let vp = &ptrs(opaque, &v)[3];
    let mut l = vec![];
    for (k, x) in [(2, "a"), (3, "b"), (4, "c")] {
        l.push(format!("  %p{x} = getelementptr {v}, {vp} %s{k}, i64 %i"));
        l.push(format!("  %v{x} = load {v}, {vp} %p{x}, align 64"));
    }
    l.push(format!("  %m = fmul {v} %va, %vb"));
    l.push(format!("  %r = fadd {v} %m, %vc"));
    l.push(format!("  %po = getelementptr {v}, {vp} %s1, i64 %i"));
    l.push(format!("  store {v} %r, {vp} %po, align 64"));
    l.extend(latch());
    l
}

/// The loop's latch, then the exit label.
fn latch() -> Vec<String> {
    [
        "  %i.next = add i64 %i, 1",
        "  %more = icmp ult i64 %i.next, %end",
        "  br i1 %more, label %loop, label %exit",
        "exit:",
    ]
    .map(String::from)
    .to_vec()
}

/// The whole module of loop `s` over vectors of `w` lanes.
fn stream_ir(s: Stream, w: usize, opaque: bool) -> String {
    let [pp, p32, ..] = ptrs(opaque, "");
    let mut l = vec![];
    if s == Stream::Read {
        l.push(format!(
            "declare i32 @llvm.vector.reduce.add.v{w}i32(<{w} x i32>)"
        ));
    }
    l.push(format!(
        "define void @{}_ceiling_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores) {{",
        s.name()
    ));
    let lane = if s == Stream::Read { "i32" } else { "float" };
    l.extend(entry(s, &format!("<{w} x {lane}>"), opaque));
    l.push("loop:".into());
    l.push("  %i = phi i64 [%start, %entry], [%i.next, %loop]".into());
    l.extend(match s {
        Stream::Read => read_body(w, opaque),
        Stream::Triad => triad_body(w, opaque),
    });
    l.push("  ret void".into());
    l.push("}".into());
    l.join("\n") + "\n"
}

/// A loop, compiled and loaded, with its buffers.
pub struct StreamLoop {
    prg: Box<dyn Program>,
    /// The per-thread sums, then the data buffers.
    pub bufs: Vec<RawBuf>,
    /// Iterations per thread.
    n: i64,
    threads: usize,
    /// Bytes of each data buffer.
    pub each: usize,
    stream: Stream,
}

impl StreamLoop {
    /// Loop `s` moving about `bytes` per pass (rounded down to whole iterations of every thread)
    /// on `threads` threads, data buffer `k` (1-based) filled by `fill(k, byte index)`; `None`
    /// without libLLVM or under one iteration per thread.
    pub fn new(
        s: Stream,
        threads: usize,
        bytes: usize,
        fill: impl Fn(usize, usize) -> u8,
    ) -> Result<Option<Self>> {
        let compiler = match LLVMCompiler::new() {
            Ok(c) => c,
            Err(e) => {
                println!("{} ceiling not measured: {e}", s.name());
                return Ok(None);
            }
        };
        let features = compiler.llvm().host_features();
        let w = crate::ceilings::lanes(&features);
        let threads = threads.max(1);
        let step = w * 4 * s.vectors_per_iteration();
        let per_core = bytes / s.data_buffers() / step / threads;
        if per_core == 0 {
            return Ok(None);
        }
        let n = i32::try_from(per_core).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} ceiling: {bytes} bytes is {per_core} iterations per thread, over the loop's \
                 i32",
                s.name()
            ))
        })? as i64;
        let each = per_core * step * threads;
        let obj = compiler.compile(&stream_ir(s, w, compiler.llvm().opaque_pointers()))?;
        let prg = compiler
            .runtime()
            .load(&format!("{}_ceiling", s.name()), &obj)?;
        let h = HostAllocator;
        let mut bufs = vec![h.alloc(4 * threads, &BufferOptions::default())?];
        for k in 1..=s.data_buffers() {
            let b = h.alloc(each, &BufferOptions::default())?;
            h.copyin(&b, &(0..each).map(|i| fill(k, i)).collect::<Vec<u8>>())?;
            bufs.push(b);
        }
        Ok(Some(StreamLoop {
            prg,
            bufs,
            n,
            threads,
            each,
            stream: s,
        }))
    }

    /// Bytes one pass moves (read and written).
    pub fn moved(&self) -> usize {
        self.each * self.stream.data_buffers()
    }

    /// One pass of every thread over its chunk.
    pub fn pass(&self) -> Result<()> {
        let _g = Context::new(&[("CLANG_THREADS", self.threads as i64)]);
        let global = Some([self.threads, 1, 1]);
        self.prg.call(&self.bufs, &[self.n], global, None, true)?;
        Ok(())
    }
}

/// GB/s moved by loop `s` over about `bytes` on `threads` threads, `repeats` times after
/// [`WARM_PASSES`] untimed passes (`None` without libLLVM).
pub fn measure(s: Stream, threads: usize, bytes: usize, repeats: usize) -> Result<Option<Stats>> {
    let Some(l) = StreamLoop::new(s, threads, bytes, |_, _| 0x3c)? else {
        return Ok(None);
    };
    for _ in 0..WARM_PASSES {
        l.pass()?;
    }
    let mut rates = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        l.pass()?;
        rates.push(l.moved() as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    Ok(Some(Stats::of(&rates)))
}

#[cfg(test)]
mod tests;
