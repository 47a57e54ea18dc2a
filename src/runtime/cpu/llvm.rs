//! The `LLVM` CPU device: the CPU flavour of the LLVM IR renderer, compiled in process by libLLVM
//! to a relocatable object for the host triple, CPU and features, then loaded by rawgrad's own ELF
//! loader ([`objload`](super::objload)) into executable memory and called. No linker, no
//! subprocess, no `dlopen`: the device works with no C compiler on the machine. The object is what
//! the on-disk compile cache keeps. Kernels have the CLANG device's fixed entry `NAME_rg` and run
//! through the same CPU program ([`ClangProgram`]: outer loop split across the worker pool).
//!
//! - [`LLVMCompiler`]: IR text -> object bytes. The pipeline is [`LlvmOpt`] (`LLVMOPT=0..3`:
//!   none, light, `default<O2>`, `default<O3>`), with the measuring overrides of
//!   [`Pipeline::from_env`] (`LLVM_PASSES`, `LLVM_CODEGEN`, `LLVM_ISEL`). The default, light IR
//!   passes then codegen level 2, was chosen by measuring compile and steady-state CPU time of
//!   bench workloads W1-W3, W6-W8, W10-W12 against lighter choices (README, `LLVMOPT`): codegen
//!   level 0 halves the compile but runs tiled kernels 4-6x slower, level 1 saves nothing
//!   measurable, dropping the SLP vectorizer runs them 10x slower; FastISel saves 0-20% of the
//!   compile at equal speed but is a process-wide LLVM option (shared with the AMD compiler when
//!   both load one libLLVM), so it is not the default. With the vector ALU fold
//!   (`codegen/uopgraph/vectorize.rs`: the tile's multiply-adds reach LLVM as vector IR),
//!   dropping `slp-vectorizer` from the light passes was measured again (`bench workloads
//!   --devices LLVM --threads 1 --repeats 3`, steady CPU ms with / without SLP): W3 14.3 / 14.4
//!   and W12 28.4 / 21.9 hold, but W1 2.0 / 3.2, W2 4.0 / 4.9, W6 15.9 / 26.8, W7 2.0 / 2.7, W8
//!   10.9 / 11.8, W10 5.8 / 7.9 and W11 3.9 / 7.5 lose (their float4 and row-reduce kernels
//!   still rely on SLP), for compile ms/kernel 9.3-23 instead of 14-34; so SLP stays.
//! - Where one compile's time goes (issue 10; `bench llvmc --dir D`, D from `bench codegen
//!   --devices LLVM --dump D` of W1, W2, W3, W10, W11, W12, 43 kernels; libLLVM 15, loaded 2-core
//!   VM, CPU ms of the thread, median of 4 compiles): the mean is context 0.1, IR parse 0.6, link,
//!   verify and target machine lookup 0.1, IR passes 4.0 (28%), codegen 9.8 (67%), our ELF load
//!   0.013 ms; W1 (46 IR lines) 4.2 = passes 0.4 + codegen 3.6, W2 (160) 12.5 = 3.1 + 8.6, W3
//!   (192) 12.2 = 2.9 + 8.7, W12's largest (1485 lines) 67-79 = 27-34 + 39-43. The fixed part per
//!   compile is small: an empty function compiles in 1.0 ms (0.85 codegen: the legacy codegen
//!   pass manager is built and run per call, which the C API cannot reuse); LLVM's `-time-passes`
//!   spreads codegen over ~150 machine passes at 0.02-0.5 ms each, none dominant (instruction
//!   selection and DAG combining ~15%). The target machine is already kept per thread; what stays
//!   fixed is a thread's first compile (subtarget, lowering tables, pass registrations: 3-4 ms
//!   more than later ones), which [`open_llvm`] pays with [`LLVMCompiler::warm_up`]: that moves the
//!   cost to the device's opening, it does not remove it (bench workloads' kernels had paid it
//!   already through their inputs' kernels, so their compile ms/kernel is unchanged). Measured (on
//!   the scalar-tile IR of a build without the vector ALU fold) and not taken: `always-inline` before the light passes (one function to codegen instead of the
//!   kernel plus its `_rg` entry) saves 0.3-0.8 ms on W1-sized kernels but costs W3 +20% and
//!   W12's large kernels +30-40% (the inlined `noalias` arguments become scoped alias metadata
//!   that SLP and the scheduler query slowly), and after the passes it still costs W12's large
//!   kernels +20% in codegen; dropping `loop-mssa(licm)` saves ~15% of the compile but W2 and W7
//!   ran slower.
//! - W6 (softmax over the last axis of 4096x1024: max, exp-sum, divide), issue 10: LLVM ran it in
//!   15.6-22 ms of one thread's CPU against CLANG's 10.4-12. The loser was the exp-sum kernel
//!   (`r_512_256_8_4`: one lane of each of 8 row accumulators per step, 32 scalar EXP2s), 7.2 ms
//!   against gcc's 3.8 (`opt-14`/`llc-14` with the light passes, a C harness calling the `_rg`
//!   entry, best of 15): with the 27-instruction EXP2 expansion inline per lane, SLP's tree from
//!   the accumulator phis ran past its depth limit and it rebuilt 16- and 32-lane vectors from
//!   other seeds (shuffles, spills), where gcc bundles the 8 rows' lane into one 8-wide double
//!   computation. EXP2 is now a call of a module helper whose call site names its vector forms
//!   (`renderer/llvmir/exp2.rs`), SLP bundles the 8 calls into one `<8 x float>` call (2.8 ms in
//!   the harness), and the light pipeline inlines the helpers after SLP. Measured (`bench
//!   workloads --workloads W1,W2,W3,W6,W7,W8,W10,W11,W12 --devices LLVM,CLANG --threads 1
//!   --repeats 3 --no-ceilings`, fresh `CACHEDIR`, before/after binaries alternated 3 times on the
//!   loaded 2-core VM, steady CPU ms): W6 LLVM 17.7 / 22.3 / 22.6 before, 10.7 / 9.3 / 11.0 after,
//!   CLANG in the same runs 10.2-12.4 (3 more alternations of W6 alone: 16.3 / 22.1 / 18.8
//!   before, 9.0 / 10.5 / 10.6 after, CLANG 10.9-12.2); the other workloads unchanged within the noise (W11 LLVM
//!   3.5-3.9 / 3.3-3.8, W10 5.6-7.5 / 5.7-8.3, W12 19.9-22.7 / 17.9-19.1). W6's compile (`bench
//!   llvmc`, CPU ms, 3 alternations): the exp-sum kernel 1050 -> 412 IR instructions, 31-36 ->
//!   14-19 ms; the mean of W6's three 18.5-20.8 -> 12.1-14.9. Tried and not taken: a MAX helper
//!   the same way (W6's max kernel ran 2.5x slower in the harness; not analysed further),
//!   and index GEPs with constant offsets from a base (`gep (gep p, x), c` for `x + c`): the
//!   passes of W12's largest kernel 37 -> 6 ms, codegen 47 -> 25, but SLP then built vectors of
//!   pointers (W8's largest kernel 0.09 -> 0.13-0.17 ms, W12's 1.9-2.2 -> 2.4).
//! - Index arithmetic in 64 bits (issue 10, `renderer/llvmir/index.rs`): a `perf record
//!   --call-graph dwarf` of `bench llvmc` put 13% (W3) to 20% (W12's largest kernel) of a compile
//!   in the SLP vectorizer's GEP-index seeds and 9-15% in loop strength reduction's IV users, both
//!   scalar evolution proving that `sext(i32 a + c)` does not wrap, once per constant offset of an
//!   unrolled tile. The CPU renderer now computes index-only int32 arithmetic in `i64` and indexes
//!   with it. `bench llvmc` on the 75 kernels that `bench codegen --dump` writes for W1, W2, W3,
//!   W6, W7, W8, W10, W11, W12 (CPU ms of the thread, 3 alternations of the before/after
//!   binaries, loaded 2-core VM): mean per kernel 13.1 / 13.3 / 15.6 -> 9.8 / 10.3 / 12.3 (IR
//!   passes 3.4-4.2 -> 2.1-2.7, codegen 9.0-10.7 -> 7.2-9.0); W1 4.3-5.5 -> 3.9-5.3, W3 11.1-14.9
//!   -> 8.2-9.0, W12's largest 73-87 -> 43-54 (passes 30-41 -> 12-16). `bench workloads
//!   --devices LLVM --threads 1 --no-ceilings`, fresh `CACHEDIR`, compile CPU ms/kernel median of
//!   3 alternations before -> after: W1 5.5 -> 5.4, W2 9.7 -> 10.4, W3 10.5 -> 9.1, W6 13.5 ->
//!   11.7, W7 17.3 -> 10.6, W8 9.9 -> 8.1, W10 11.8 -> 10.4, W11 11.6 -> 10.6, W12 10.6 -> 10.4
//!   (W3 and W12 again, `--repeats 11`, 4 alternations: 11.6 -> 8.2 and 10.2 -> 7.8); steady CPU
//!   ms equal within the noise (W3 13.6 -> 13.2, W12 17.2 -> 17.3 at `--repeats 11`; the others
//!   at `--repeats 3`: W1 2.5 -> 1.9, W2 3.9 -> 4.1, W6 9.3 -> 9.7, W7 2.6 -> 2.5, W8 12.2 ->
//!   11.1, W10 7.6 -> 7.6, W11 3.5 -> 3.4). Measured and not taken: on top of it, the base +
//!   constant-offset GEP (`gep (gep p, x), c` for an index `x + c`): compile W3 10.4 -> 7.6, W12
//!   8.9 -> 8.2 ms/kernel, but W12's steady 18.4 -> 19.9 ms (3 alternations, `--repeats 11`);
//!   `-disable-lsr` (codegen -15% on the dumped kernels, but a process-wide LLVM option, shared
//!   with the AMD and NV compilers); CPU `znver3` with the host's features and `+prefer-256-bit`
//!   (no change in compile beyond the noise); the two-index GEP `[0 x T], p, 0, i` (hides the
//!   access from SLP's GEP seeds: IR passes -30%, but W12's largest kernel's codegen +30%).
//!   What is left of codegen is spread: SelectionDAG combining (known bits of long add chains)
//!   is the largest part, about a sixth of W12's largest kernel.
//! - Out-of-line epilogue EXP2 (issue 10, `renderer/llvmir/exp2.rs`): W12's sigmoid epilogue
//!   kernels (`r_32_64_256_16_2_8`, 400 IR lines) had 16 vector-fold `<16 x float>` EXP2s after
//!   their reduce loop, each inlined: codegen 23-35 of their 28-42 ms. Two or more epilogue
//!   vector EXP2s of one type now call one `noinline` copy of the helper. `bench llvmc` on the
//!   two (CPU ms of the thread, 3 alternations of the before/after binaries): 27-36 -> 13-15 ms
//!   each (codegen 23-29 -> 9-10.5); no other dumped kernel of W1-W12 changes. `bench workloads
//!   --devices LLVM --threads 1 --repeats 3 --no-ceilings`, fresh `CACHEDIR`, 5 alternations,
//!   W12 steady CPU ms median 20.7 [17.9-25.2] before, 19.1 [17.4-22.8] after.
//! - Vector-only kernels skip SLP (issue 10): with the vector ALU fold, 27 of the 75 kernels
//!   dumped for W1-W12 have no scalar ALU but index arithmetic, no scalar cast and no scalar
//!   store; the renderer marks them ([`VECTOR_ONLY_MARK`], `renderer/llvmir.rs`) and the light
//!   level compiles them with [`LIGHT_PASSES_VECTOR_ONLY`] ([`LLVMCompiler::options_for`]; a
//!   batch source only when all its modules are marked). On 25 of the 27 the IR after the passes
//!   is the same with or without SLP (libLLVM 15, checked by diffing the printed modules), so
//!   their machine code is too; on W12's two largest (`r_4_8_32_32_4_4_32`, 1493 IR lines) SLP
//!   only turned the strided lanes of 32 `float4` build vectors into masked gathers (host CPU
//!   `generic` with AVX-512 features) for 9-13 ms of pass time. `bench llvmc` on the 75 kernels,
//!   3 alternations of the before (main) / after binaries, CPU ms of the thread: mean per kernel
//!   12.3 / 12.3 / 10.3 -> 11.0 / 10.7 / 8.5 (IR passes 2.2-2.7 -> 1.5-1.9, codegen 7.4-8.9 ->
//!   6.4-8.3, with the out-of-line EXP2 below); W12's two largest 44-61 -> 33-55 (passes 12-17 ->
//!   3.2-5.4). `bench workloads --workloads W1,W2,W3,W6,W7,W8,W10,W11,W12 --devices LLVM
//!   --threads 1 --repeats 3 --no-ceilings`, fresh `CACHEDIR`, 6 alternations, median [min-max]
//!   before -> after: compile CPU ms/kernel (the median kernel) W1 5.6 -> 5.4, W2 8.6 -> 9.2, W3
//!   9.5 -> 8.6, W6 11.5 -> 12.0, W7 11.2 -> 10.4, W8 7.1 -> 6.5, W10 8.2 -> 7.4, W11 9.6 -> 8.7,
//!   W12 8.8 -> 9.0; steady CPU ms W1 2.0 [1.7-2.5] -> 2.3 [2.0-2.6] (same machine code), W2
//!   3.8 -> 3.7, W3 15.0 -> 14.0, W6 10.0 -> 9.8, W7 2.0 -> 2.0, W8 10.9 -> 9.7, W10 5.6 -> 5.5,
//!   W11 3.2 -> 3.1, W12 17.9 [17.2-22.4] -> 16.4 [15.0-20.9] (W3 and W12 again at `--repeats
//!   11`, 4 alternations: W3 13.4 -> 13.7, same machine code; W12 16.5 [16.4-17.7] -> 16.2
//!   [15.4-17.4]). Measured and not taken: the renderer loading those strided lanes as rows and
//!   transposing them (approximated by one vector load pair and one shuffle per build vector, 128
//!   scalar loads and 96 inserts fewer): W12's largest compiled in 41-49 ms as it is, 37-42 so (3
//!   alternations, within the noise): its codegen is the 256 vector multiply-adds and 128
//!   broadcasts of the fully unrolled 4x4x32 tile (a flat profile: known bits 2.5%, register
//!   allocation, DAG combining, none dominant); FastISel (`LLVM_ISEL=fast`) on the same kernel: no
//!   change beyond the noise (vector code falls back to SelectionDAG); codegen level 1
//!   (`LLVM_CODEGEN=1`) on all 75, 3 alternations: mean 9.2 / 9.7 / 10.1 -> 7.9 / 9.3 / 9.7 ms,
//!   within the noise of the machine, so level 2 stays.
//! - Split constant-offset addresses in vector-only kernels (issue 10, `renderer/llvmir/memory.rs`):
//!   W12's largest kernels load each of their 256 scalar lanes at `base + (x + c)`; instruction
//!   selection recomputed the known bits of every `x + c` chain (DAG combining a third of the
//!   compile, `computeKnownBits` a fifth). A vector-only kernel (no SLP, so no vectors of pointers
//!   to fear) now addresses `(base + x) + c`. Callgrind of `bench llvmc --repeats 2` (libLLVM 15,
//!   instructions, deterministic) on the 39 kernels `bench codegen --devices LLVM --dump` writes
//!   for W1, W2, W11, W12 (16 of them change): 5564M -> 4903M (-11.9%; codegen 4368M -> 3803M,
//!   IR passes 802M -> 690M, parse 298M -> 311M); on the 33 of W3, W6, W7, W8 (10 change): 3138M
//!   -> 3096M. CPU ms of the thread, 3 alternations of the before/after binaries, loaded 2-core
//!   VM: mean per kernel 8.1 / 8.8 / 9.2 -> 7.7 / 9.3 / 8.0, W12's two largest 29-46 -> 19-31
//!   (median 32 -> 21). `bench workloads --workloads W1,W3,W6,W7,W8,W12 --devices LLVM --threads 1
//!   --repeats 5 --budget-s 2 --no-ceilings`, fresh `CACHEDIR`, 4 alternations, steady CPU ms
//!   before -> after: W12 14.9-20.1 -> 14.9-15.2, W6 8.8-9.7 -> 8.8-10.1, W7 1.9-2.5 -> 1.9-2.2;
//!   W3 and W8 again at `--repeats 11`, 3 alternations: W3 13.2-13.7 -> 13.1-13.9, W8 9.0-9.5 ->
//!   8.9-9.3; compile CPU ms/kernel W12 9.1-12.6 -> 7.8-9.3, W3 7.7-9.0 -> 7.2-7.5. Measured on
//!   the same 39 kernels and not taken (process-wide LLVM options, `LLVMParseCommandLineOptions`,
//!   which would change the AMD and NV compiles sharing the library; callgrind instructions of
//!   the whole run): `-fast-isel` -4.0%, `-disable-lsr` -1.8%, `-disable-machine-licm` -1.4%,
//!   `-disable-machine-cse` -1.4%, `-enable-misched=false` -0.8%, `-disable-block-placement`
//!   -0.4%, `-disable-machine-sink` -0.3%, `-disable-early-taildup -disable-tail-duplicate` -0.2%:
//!   no single one, nor their sum, comes near the 5 ms goal.
//! - Unoptimized entries (issue 10): callgrind of `bench llvmc --repeats 2` on the 76 kernels that
//!   `bench codegen --devices LLVM --dump` writes for W1-W3, W5-W8, W10-W12 (libLLVM 15,
//!   instructions, deterministic): 8.69G, of which codegen 79%: instruction selection 34% (DAG
//!   combining 22%, `SimplifyDemandedVectorElts` 9% of it on the transposes SLP builds for the
//!   row-reduce kernels, 46% of W10's first kernel's codegen), greedy register allocation 8%,
//!   loop strength reduction with its IV users 7.8%, machine scheduling 4.7%, building the legacy
//!   codegen pass manager (`addPassesToEmitFile`, per emit) 3.8%; IR passes 13% (SLP 5.5%,
//!   instcombine 4.6%), parsing 6%. Codegen ran on two functions per kernel, the kernel and its
//!   `NAME_rg` entry; without the entry (a measuring edit) the total is 8.23G (-5.3%). The entry
//!   (and the batch graph's, `runtime/cpu/graph.rs`) is now `optnone`
//!   (`renderer::llvmir::ENTRY_ATTRIBUTES`): 8.46G (-2.6%, codegen 6.94G -> 6.75G), the kernel's
//!   machine code unchanged (test). CPU ms of the thread, 5 alternations of the before/after
//!   binaries, loaded 2-core VM: mean per kernel 5.98-6.97 (median 6.24) -> 5.67-6.94 (6.04).
//!   `bench workloads --workloads W1,W3,W6,W7,W8,W12 --devices LLVM --threads 1 --repeats 5
//!   --budget-s 2 --no-ceilings`, fresh `CACHEDIR`, 4 alternations, median compile CPU ms/kernel
//!   W1 5.8 -> 5.1, W3 7.8 -> 7.7, W6 10.8 -> 10.7, W7 9.7 -> 8.6, W8 9.3 -> 6.3, W12 11.0 ->
//!   8.3 (every after run of W7, W8, W12 below every before run); steady CPU ms equal within the
//!   noise (W3 13.9-16.9 -> 13.3-17.3, W8 8.9-12.5 -> 9.3-11.1, W12 15.1-19.8 -> 14.7-20.6).
//!   Measured and not taken: compiling many kernels as one module (the 26 of W8 linked into two
//!   sources, vector-only and not, against one by one: 2.30G -> 2.25G instructions, CPU ms equal
//!   within the noise over 3 alternations: the fixed part per emit is small next to the
//!   per-function machine passes), so no batching of schedules was built; per-function
//!   attributes on the kernel: `"prefer-vector-width"="256"` +0.1%, `"frame-pointer"="none"`
//!   0.0% (already so), `optsize` -4.1% but it changes the kernels' loops (no rotated latch: one
//!   more jump per iteration, no loop alignment); a `freeze` on each loop counter's increment (to
//!   hide the induction variables from loop strength reduction) +0.7%; codegen level 1
//!   (`LLVM_CODEGEN=1`, a per-machine setting) -4.0%, but its assembly differs from level 2's in
//!   73 of the 76 kernels (e.g. the 64-bit division of the core split loses its 32-bit fast
//!   path; W8's largest kernel 199 changed lines of 386), and the steady times measured for it
//!   above were no better.
//!   The objects carry no unwind tables already (`nounwind`).
//! - The core split's divisions in the entry (issue 10, `renderer/llvmir/share.rs`): each split
//!   kernel divided `n*core/ncores` and `n*(core+1)/ncores` in 64 bits, which x86 codegen turns
//!   into a branch around a 32-bit fast path per division (four more blocks before the loop).
//!   With constant bounds (73 of the 76 dumped kernels) the `optnone` entry now divides and passes
//!   the share. Callgrind of `bench llvmc --repeats 2` on the 76 kernels of `bench codegen --dump`
//!   for W1-W3, W5-W8, W10-W12 (libLLVM 15): 8517M -> 8030M instructions (-5.7%; codegen 6786M
//!   -> 6346M). CPU ms of the thread, `bench llvmc --repeats 5`, 3 alternations, loaded 2-core
//!   VM: mean per kernel 7.85 / 8.23 / 7.79 -> 7.16 / 7.45 / 7.12 (codegen 5.9-6.2 -> 5.3-5.6),
//!   median kernel 6.8-7.3 -> 6.0-6.5, W1's 3.0-3.7 -> 2.5-2.6. Machine code (`bench llvmc
//!   --asm`): every kernel function's vector instructions the same; it only loses the division
//!   code (and in 11 kernels a callee-saved register's push/pop).
//! - [`LLVMRuntime`]: object bytes -> program; external calls (libm, half conversions) resolve
//!   through [`libcalls`]. Its graph is the CPU batch graph (`runtime/cpu/graph.rs`): the kernels'
//!   modules and the batch entry's, joined by [`MODULE_SEPARATOR`], which [`LLVMCompiler`] parses
//!   one by one and links into one module before it optimizes and emits it.
//! - [`open_llvm`]: the device record for the registry.
//!
//! Floats: the renderer's CPU flavour puts no fast-math flags on instructions and no pipeline
//! here may reassociate or contract, so a kernel computes what the interpreter computes, and
//! equal expressions give equal bits in every kernel.
//!
//! Not guaranteed: the kernel's indexing is trusted, as on CLANG.

pub mod libcalls;

use std::sync::Arc;

use crate::codegen::program::ProgramSpec;
use crate::device::allocator::{HostAllocator, LruAllocator};
use crate::device::registry::Compiled;
use crate::device::{CallGraph, Compiler, DeviceGraph, GraphCall, Program, Runtime};
use crate::ffi::llvm::{CompileOptions, Emit, Isel, Llvm};
use crate::helpers::{getenv, getenv_str, to_function_name};
use crate::renderer::llvmir::{LLVMRenderer, VECTOR_ONLY_MARK};
use crate::runtime::cpu::clang::ClangProgram;
use crate::runtime::cpu::graph::{BatchCompiler, BatchLang, CpuGraph, BATCH_NAME};
use crate::runtime::cpu::objload;
use crate::{bail, Error, Result};

/// The function passes of [`LlvmOpt::Light`]: redundancy elimination, loop-invariant code motion,
/// peepholes, CFG cleanup and the SLP vectorizer (lane-wise operations of one vector, as the CPU
/// tile's 8- or 16-lane accumulators, become vector instructions; it regroups nothing, as the IR
/// has no fast-math flags; scalar EXP2 calls become calls of the helpers' vector forms); no loop
/// unrolling or loop vectorizing. Then `always-inline` puts the renderer's EXP2 helpers in place
/// (`renderer/llvmir/exp2.rs`) and `globaldce` drops the unused ones. Valid pipeline text for LLVM
/// 14 and later.
pub const LIGHT_PASSES: &str =
    "function(early-cse,loop-mssa(licm),instcombine,simplifycfg,slp-vectorizer),always-inline,globaldce";

/// [`LIGHT_PASSES`] without the SLP vectorizer: the IR passes of a module whose kernel is
/// vector-only ([`VECTOR_ONLY_MARK`], the renderer's `vector_only`).
pub const LIGHT_PASSES_VECTOR_ONLY: &str =
    "function(early-cse,loop-mssa(licm),instcombine,simplifycfg),always-inline,globaldce";

/// The codegen level (instruction selection and machine passes) of [`LlvmOpt::None`] and
/// [`LlvmOpt::Light`].
pub const DEFAULT_CODEGEN: u8 = 2;

/// Between the modules of a source that holds several (an IR comment line): [`LLVMCompiler`]
/// links them into one.
pub const MODULE_SEPARATOR: &str = "\n; rawgrad: next module\n";

/// What [`LLVMCompiler::warm_up`] compiles: a loop of float vector adds, with no pointers (valid IR
/// for typed and opaque pointer LLVMs alike).
pub const WARM_UP_IR: &str =
    "define <4 x float> @rawgrad_warm_up(<4 x float> %a, <4 x float> %b, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi <4 x float> [ %a, %entry ], [ %acc.next, %loop ]
  %acc.next = fadd <4 x float> %acc, %b
  %i.next = add i32 %i, 1
  %c = icmp slt i32 %i.next, %n
  br i1 %c, label %loop, label %exit
exit:
  ret <4 x float> %acc.next
}
";

/// The optimisation pipeline of the LLVM device (`LLVMOPT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlvmOpt {
    /// `LLVMOPT=0`: no IR passes; instruction selection and machine passes at codegen level 2
    /// (tinygrad 0.9.1: an empty module pass manager and a target machine at opt=2).
    None,
    /// `LLVMOPT=1`: [`LIGHT_PASSES`], then codegen at level 2.
    Light,
    /// `LLVMOPT=2` / `3`: `default<O2>` / `default<O3>`, then codegen at level 2 / 3.
    Default(u8),
}

impl LlvmOpt {
    /// From `LLVMOPT` (0-3; default 1, [`LlvmOpt::Light`]: see the README for the measurements).
    pub fn from_env() -> Result<LlvmOpt> {
        match getenv("LLVMOPT", 1) {
            0 => Ok(LlvmOpt::None),
            1 => Ok(LlvmOpt::Light),
            n @ 2..=3 => Ok(LlvmOpt::Default(n as u8)),
            n => bail!(
                InvalidArgument,
                "LLVMOPT={n}: expected 0 (no IR passes), 1 (light), 2 or 3 (default<O2>/<O3>)"
            ),
        }
    }

    /// The IR pass pipeline and the codegen level.
    fn pipeline(self) -> (Option<String>, u8) {
        match self {
            LlvmOpt::None => (None, DEFAULT_CODEGEN),
            LlvmOpt::Light => (Some(LIGHT_PASSES.to_string()), DEFAULT_CODEGEN),
            LlvmOpt::Default(n) => (Some(format!("default<O{n}>")), n.max(2)),
        }
    }
}

/// What [`LLVMCompiler`] runs: the IR pass pipeline (None: no IR passes), the codegen level (0-3)
/// and the instruction selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipeline {
    pub passes: Option<String>,
    pub codegen: u8,
    pub isel: Isel,
}

impl Pipeline {
    /// The pipeline of a named level.
    pub fn of(opt: LlvmOpt) -> Pipeline {
        let (passes, codegen) = opt.pipeline();
        Pipeline {
            passes,
            codegen,
            isel: Isel::Default,
        }
    }

    /// [`LlvmOpt::from_env`]'s pipeline with the measuring overrides applied: `LLVM_PASSES`
    /// (new-pass-manager text, `none` for no IR passes), `LLVM_CODEGEN` (0-3) and `LLVM_ISEL`
    /// (`dag`, `fast`; a process-wide LLVM option, see [`Llvm::set_isel`]).
    pub fn from_env() -> Result<Pipeline> {
        let mut p = Pipeline::of(LlvmOpt::from_env()?);
        if let Some(text) = getenv_str("LLVM_PASSES") {
            let text = text.trim();
            p.passes = (!text.is_empty() && text != "none").then(|| text.to_string());
        }
        if getenv_str("LLVM_CODEGEN").is_some() {
            p.codegen = match getenv("LLVM_CODEGEN", 2) {
                n @ 0..=3 => n as u8,
                n => bail!(InvalidArgument, "LLVM_CODEGEN={n}: expected 0, 1, 2 or 3"),
            };
        }
        if let Some(isel) = getenv_str("LLVM_ISEL") {
            p.isel = match isel.trim() {
                "" | "dag" => Isel::Default,
                "fast" => Isel::Fast,
                other => bail!(InvalidArgument, "LLVM_ISEL={other}: expected dag or fast"),
            };
        }
        Ok(p)
    }

    /// For the cache key: the pass text itself, so a changed pipeline never reuses an old object.
    fn tag(&self) -> String {
        let isel = match self.isel {
            Isel::Default => "",
            Isel::Fast => "_fastisel",
        };
        let passes = self.passes.as_deref().unwrap_or("none");
        format!("{passes}_cg{}{isel}", self.codegen)
    }
}

/// LLVM IR to a relocatable host object.
#[derive(Debug, Clone)]
pub struct LLVMCompiler {
    llvm: Arc<Llvm>,
    opts: CompileOptions,
    pipeline: Pipeline,
}

impl LLVMCompiler {
    /// With the newest libLLVM, for this machine's CPU, at the `LLVMOPT` pipeline.
    pub fn new() -> Result<LLVMCompiler> {
        LLVMCompiler::with_llvm(Llvm::load()?)
    }

    /// With a given libLLVM, for this machine's CPU, at the `LLVMOPT` pipeline (and overrides,
    /// [`Pipeline::from_env`]).
    pub fn with_llvm(llvm: Arc<Llvm>) -> Result<LLVMCompiler> {
        LLVMCompiler::with_pipeline(llvm, Pipeline::from_env()?)
    }

    /// With a given libLLVM and named level, for this machine's CPU.
    pub fn with_opt(llvm: Arc<Llvm>, opt: LlvmOpt) -> Result<LLVMCompiler> {
        LLVMCompiler::with_pipeline(llvm, Pipeline::of(opt))
    }

    /// With a given libLLVM and pipeline, for this machine's CPU.
    pub fn with_pipeline(llvm: Arc<Llvm>, pipeline: Pipeline) -> Result<LLVMCompiler> {
        llvm.set_isel(pipeline.isel)?;
        let features = compile_features(llvm.version().major, &llvm.host_features());
        let mut opts = CompileOptions::new(&llvm.host_triple(), &llvm.host_cpu(), &features, false);
        opts.passes.clone_from(&pipeline.passes);
        opts.codegen_level = pipeline.codegen;
        Ok(LLVMCompiler {
            llvm,
            opts,
            pipeline,
        })
    }

    pub fn llvm(&self) -> &Arc<Llvm> {
        &self.llvm
    }

    /// The options (triple, CPU, features, passes, codegen level) it compiles with.
    pub fn options(&self) -> &CompileOptions {
        &self.opts
    }

    /// The options it compiles the modules `modules` of one source with: [`Self::options`], but
    /// at [`LLVMOPT=1`](LlvmOpt::Light) with [`LIGHT_PASSES_VECTOR_ONLY`] when every module is
    /// marked vector-only ([`VECTOR_ONLY_MARK`]; module doc).
    pub fn options_for(&self, modules: &[&str]) -> std::borrow::Cow<'_, CompileOptions> {
        let light = self.opts.passes.as_deref() == Some(LIGHT_PASSES);
        if light && modules.iter().all(|m| m.starts_with(VECTOR_ONLY_MARK)) {
            let mut o = self.opts.clone();
            o.passes = Some(LIGHT_PASSES_VECTOR_ONLY.to_string());
            return std::borrow::Cow::Owned(o);
        }
        std::borrow::Cow::Borrowed(&self.opts)
    }

    /// The pipeline it runs.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The renderer whose IR this compiler takes.
    pub fn renderer(&self) -> LLVMRenderer {
        LLVMRenderer::cpu_for(&self.llvm)
    }

    /// The runtime that loads this compiler's objects (and compiles its batch graphs with it).
    pub fn runtime(&self) -> LLVMRuntime {
        LLVMRuntime {
            major: self.llvm.version().major,
            compiler: Some(Arc::new(self.clone())),
        }
    }

    /// Compile [`WARM_UP_IR`] through the whole pipeline on this thread and drop the object: the
    /// one-time set-up of the first compile (the thread's target machine and its subtarget, the
    /// instruction lowering tables, the pass registrations) is paid here, and a pipeline this
    /// libLLVM cannot run (an `LLVM_PASSES` it does not know) fails here, naming the pipeline.
    pub fn warm_up(&self) -> Result<()> {
        self.llvm
            .compile(WARM_UP_IR, &self.opts, Emit::Object)
            .map(drop)
            .map_err(|e| {
                Error::Compile(format!(
                    "{:?} with pipeline {:?}: {}",
                    self.llvm,
                    self.pipeline,
                    e.message()
                ))
            })
    }

    /// The host assembly of `src` (for DEBUG output and tests).
    pub fn assembly(&self, src: &str) -> Result<String> {
        let asm = self.llvm.compile(src, &self.opts, Emit::Assembly)?;
        Ok(String::from_utf8_lossy(&asm).into_owned())
    }
}

impl Compiler for LLVMCompiler {
    fn cache_key(&self) -> Option<String> {
        Some(format!(
            "compile_llvm_obj_{}_{}_{}_{}_{}",
            self.llvm.version(),
            self.opts.triple,
            self.opts.cpu,
            self.opts.features,
            self.pipeline.tag()
        ))
    }

    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let modules: Vec<&str> = src.split(MODULE_SEPARATOR).collect();
        self.llvm
            .compile_linked(&modules, &self.options_for(&modules), Emit::Object)
    }
}

/// Loads the LLVM device's objects with rawgrad's ELF loader.
#[derive(Debug, Clone)]
pub struct LLVMRuntime {
    /// The major version of the LLVM that compiled the objects (it decides the helper ABI).
    pub major: u32,
    /// The compiler of the batch graphs (none: the host-call graph).
    pub compiler: Option<Arc<LLVMCompiler>>,
}

impl LLVMRuntime {
    fn load_kernel(&self, name: &str, lib: &[u8]) -> Result<ClangProgram> {
        let entry = format!("{}_rg", to_function_name(name));
        let major = self.major;
        let kernel = objload::load(lib, &entry, &|sym| libcalls::resolve(major, sym))?;
        Ok(ClangProgram::from_kernel(name, kernel))
    }
}

impl Runtime for LLVMRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        Ok(Box::new(self.load_kernel(name, lib)?))
    }
    fn load_program(&self, p: &ProgramSpec, lib: &[u8]) -> Result<Box<dyn Program>> {
        Ok(Box::new(
            self.load_kernel(&p.function_name, lib)?.with_launch(p),
        ))
    }
    fn has_graph(&self) -> bool {
        true
    }
    fn graph(
        &self,
        prgs: &[Arc<dyn Program>],
        calls: &[GraphCall],
    ) -> Result<Option<Box<dyn DeviceGraph>>> {
        let Some(c) = &self.compiler else {
            return Ok(CallGraph::build(prgs, calls).map(|g| Box::new(g) as Box<dyn DeviceGraph>));
        };
        let lang = BatchLang::LlvmIr {
            opaque: c.llvm.opaque_pointers(),
        };
        let rt = self.clone();
        let compile = BatchCompiler {
            compiler: c.clone(),
            load: Arc::new(move |lib: &[u8]| rt.load_kernel(BATCH_NAME, lib)),
        };
        CpuGraph::build_or_call(prgs, calls, lang, MODULE_SEPARATOR, compile)
    }
}

/// The `LLVM` device record: LRU-cached host memory, [`LLVMCompiler`], [`LLVMRuntime`] and the CPU
/// LLVM IR renderer. For the engine: `register_family("LLVM", open_llvm)`.
pub fn open_llvm(name: &str) -> Result<Compiled> {
    let compiler = LLVMCompiler::new()?;
    // a libLLVM without the host's target loads, but compiles nothing: refuse to open, so the
    // default device falls back to the next family (CLANG)
    compiler.llvm.check_target(&compiler.opts).map_err(|e| {
        Error::Device(format!(
            "{:?} cannot compile for this machine: {}",
            compiler.llvm,
            e.message()
        ))
    })?;
    // the first compile's one-time set-up is paid here, not by the first kernel (module doc)
    compiler.warm_up()?;
    let renderer = Arc::new(compiler.renderer());
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HostAllocator)),
        runtime: Arc::new(compiler.runtime()),
        compiler: Arc::new(compiler),
        renderer,
    })
}

/// The host's features (`+sse2,+avx,...`) as libLLVM `major` can compile for them. Under
/// `avx512fp16` (Sapphire Rapids and later) half is a legal x86 type, and LLVM 14's backend has
/// no lowering for its math: `llvm.log2.f16` aborted the whole process in instruction selection
/// ("Cannot select: f16 = flog2"). Before LLVM 15 the feature is turned off, so half computes
/// through float as on every other x86 CPU: the same bits (float's 24 bits make the double
/// rounding of an add, multiply, divide or square root exact, and math functions go through
/// float either way).
pub fn compile_features(major: u32, host: &str) -> String {
    if major >= 15 || !cfg!(target_arch = "x86_64") {
        return host.to_string();
    }
    host.split(',')
        .map(|f| if f == "+avx512fp16" { "-avx512fp16" } else { f })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
