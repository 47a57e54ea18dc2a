//! A TinyJit replay with unchanged inputs allocates nothing graph-side: after warm-up, a run of
//! the captured batch's graph (`GraphRunner::exec`, what every graphed replay calls) makes no
//! heap allocation on the calling thread, on CLANG and LLVM (the batch compiled into one
//! program) and on the default device when it is a GPU (`AMD=1 MOCKGPU=1`, `NV=1 MOCKGPU=1`:
//! the `HcqGraph` over the emulated device). The whole replay call (`TinyJit::call_tensors`,
//! the input check and the item loop around the graph) allocates nothing either, nor does a
//! graph run whose kernels read a variable that kept its value (their values and dims are
//! recomputed in place), nor does a graph of 160 kernels (more than any fixed list would hold).
//!
//! How: this test binary's global allocator counts the allocations of threads that switched
//! counting on; only the replaying thread does, so the emulated GPU's own threads (which run the
//! submitted commands and allocate as they please) are left out. The emulated GPU's doorbell
//! handler runs on the replaying thread: its allocations (told apart by a backtrace of each
//! counted allocation naming `rawgrad::mockgpu`) are counted apart and not held against us.
//!
//! Not guaranteed: anything about allocations of a replay whose inputs or variables changed, of
//! the first replays (they make the graph's keep-alive list and grow scratch buffers), or of a
//! replay that has to wait for the GPU (an HCQ graph's run waits for the run two before it while
//! that one still runs, and a wait polls the driver for faults: the emulated driver's reports and
//! the ioctl's error text allocate).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rawgrad::device::GraphBuild;
use rawgrad::engine::jit::{graph_items, graph_runner, GraphRunner, JitArgs, TinyJit};
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::{default_device, open_device};
use rawgrad::shape::Node;
use rawgrad::shape::VarVals;
use rawgrad::Tensor;

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// This thread's counted allocations (alloc, alloc_zeroed and realloc calls) in our code.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// This thread's counted allocations made inside the emulated GPU (`rawgrad::mockgpu`: its
    /// doorbell handler runs on the ringing thread and queues a message on a list channel,
    /// which allocates a block now and then); real hardware takes a doorbell as a store.
    static EMULATOR: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the allocations of threads that asked for it.
struct Counting;

fn note_alloc() {
    // `try_with`: no panic in an allocation made while the thread's locals are torn down
    let _ = COUNTING.try_with(|on| {
        if !on.get() {
            return;
        }
        // what follows allocates: not counted
        on.set(false);
        let emulated = std::backtrace::Backtrace::force_capture()
            .to_string()
            .contains("rawgrad::mockgpu::");
        let counter = if emulated { &EMULATOR } else { &ALLOCS };
        let _ = counter.try_with(|n| n.set(n.get() + 1));
        on.set(true);
    });
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the counting touches const-initialised thread-locals without destructors, and switches itself
// off before the backtrace it takes allocates (those re-entrant calls only forward).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: the caller's layout obligations pass through to `System`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc();
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `f()` and the allocations this thread made in it.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    (out, ALLOCS.with(Cell::get) - before)
}

/// Held by each test: the tests share the process's devices, and another test's submissions
/// would fill the same in-flight tables and make this one's runs wait.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// CLANG and LLVM, and the default device when it is another one (an emulated GPU).
fn graph_devices() -> Vec<String> {
    let mut out = vec!["CLANG".to_string(), "LLVM".to_string()];
    let d = default_device().unwrap();
    if !out.contains(&d) && d != "INTERP" {
        out.push(d);
    }
    out
}

/// `steps` realized steps of `x * 1.5 + 0.25` (one kernel each).
fn chain_of(steps: usize) -> impl Fn(&JitArgs) -> rawgrad::Result<Tensor> {
    move |a: &JitArgs| {
        let mut x = a.t(0)?.clone();
        for _ in 0..steps {
            x = x.mul(1.5f32)?.add(0.25f32)?.realize()?;
        }
        Ok(x)
    }
}

/// A jit of an 8-step [`chain_of`] over `x`, captured into one graph, its background build
/// swapped in.
fn captured(dev: &str, x: &Tensor) -> TinyJit<Tensor> {
    captured_chain(dev, x, 8)
}

/// A jit of `steps` steps of [`chain_of`] over `x`, captured into one graph (the batch size
/// must allow it), its background build swapped in.
fn captured_chain(dev: &str, x: &Tensor, steps: usize) -> TinyJit<Tensor> {
    let mut f = TinyJit::new(chain_of(steps));
    for _ in 0..2 {
        f.call_tensors(std::slice::from_ref(x)).unwrap();
    }
    let built = f.wait_graphs(Duration::from_secs(600));
    assert_eq!(built, GraphBuild::Ready, "{dev}: the graph builds");
    f.call_tensors(std::slice::from_ref(x)).unwrap();
    assert_eq!(f.jit_cache().len(), 1, "{dev}: one graph");
    f
}

/// Three warm-up runs of the graph `runner` (captured over input `x` on `dev`), then `runs` runs
/// with the same input, none of which may allocate. Two runs in flight (a bound graph's images
/// alternate), never a third: the third would wait for the first, and a wait for the GPU polls
/// the driver for faults, which may allocate (not pinned).
fn runs_allocate_nothing(dev: &str, runner: &GraphRunner, x: &Tensor, runs: usize) {
    use rawgrad::engine::realize::Runner;
    let d = open_device(dev).unwrap();
    let bufs = [x.lazydata().buffer().clone()];
    let vv = VarVals::default();
    for _ in 0..3 {
        runner.exec(&bufs, &vv, false).unwrap();
        d.synchronize().unwrap();
    }
    for run in 0..runs {
        let (r, n) = allocations(|| runner.exec(&bufs, &vv, false));
        r.unwrap();
        assert_eq!(n, 0, "{dev}: graph run {run} allocated {n} times");
        if run % 2 == 1 {
            d.synchronize().unwrap();
        }
    }
    d.synchronize().unwrap();
}

fn want_after(v: f32, steps: usize) -> f32 {
    (0..steps).fold(v, |v, _| v * 1.5 + 0.25)
}

fn want(v: f32) -> f32 {
    want_after(v, 8)
}

#[test]
fn the_counter_counts_this_thread_only() {
    let (v, n) = allocations(|| vec![7u8; 16]);
    assert_eq!((v.len(), n), (16, 1));
    // another thread's 1000 allocations are not this thread's (spawning itself allocates a few)
    let other = || (0..1000).map(|i| vec![i; 4].len()).sum::<usize>();
    let (c, n) = allocations(|| std::thread::spawn(other).join().unwrap());
    assert_eq!(c, 4000);
    assert!((1..100).contains(&n), "{n} allocations counted");
    let (h, n0) = allocations(|| 0);
    assert_eq!((h, n0), (0, 0));
}

#[test]
fn a_graph_run_with_unchanged_inputs_allocates_nothing() {
    let _one = one_at_a_time();
    for dev in graph_devices() {
        let x = Tensor::from_slice_on(&[1.0f32, -2.0, 0.5, 3.0], &[4], &dev).unwrap();
        let f = captured(&dev, &x);
        let ei = &f.jit_cache()[0];
        let runner = graph_runner(&*ei.runner).expect("a graph runner");
        runs_allocate_nothing(&dev, runner, &x, 20);
    }
}

#[test]
fn a_jit_replay_with_unchanged_inputs_allocates_nothing() {
    let _one = one_at_a_time();
    let host: Vec<f32> = [1.0f32, -2.0, 0.5, 3.0].map(want).to_vec();
    for dev in graph_devices() {
        let d = open_device(&dev).unwrap();
        let x = Tensor::from_slice_on(&[1.0f32, -2.0, 0.5, 3.0], &[4], &dev).unwrap();
        let mut f = captured(&dev, &x);
        for _ in 0..3 {
            f.call_tensors(std::slice::from_ref(&x)).unwrap();
            d.synchronize().unwrap();
        }
        for run in 0..10 {
            let (r, n) = allocations(|| f.call_tensors(std::slice::from_ref(&x)));
            let out = r.unwrap();
            assert_eq!(n, 0, "{dev}: replay {run} allocated {n} times");
            d.synchronize().unwrap();
            assert_eq!(out.to_vec::<f32>().unwrap(), host, "{dev} replay {run}");
        }
        // a replay over another input takes the new address (what it allocates is not pinned)
        let y = Tensor::from_slice_on(&[0.0f32, 1.0, -1.0, 2.0], &[4], &dev).unwrap();
        let out = f.call_tensors(std::slice::from_ref(&y)).unwrap();
        let want_y: Vec<f32> = [0.0f32, 1.0, -1.0, 2.0].map(want).to_vec();
        assert_eq!(out.to_vec::<f32>().unwrap(), want_y, "{dev}: new input");
        d.synchronize().unwrap();
    }
}

/// A step whose kernels read a variable (a shrink to `i` elements, summed) around a chain.
fn var_step(a: &JitArgs) -> rawgrad::Result<Tensor> {
    let x = a.t(0)?.mul(2.0f32)?.realize()?;
    let head = x.lazydata().shrink(&[(Node::Num(0), a.v(1)?.clone())])?;
    let s = Tensor::from_lazybuffer(head, None).sum()?.realize()?;
    x.add(s.reshape(&[1])?)?.realize()?.mul(0.5f32)?.realize()
}

#[test]
fn a_graph_run_with_unchanged_variables_allocates_nothing() {
    let _one = one_at_a_time();
    let i = Node::var("i", 1, 8).unwrap();
    for dev in graph_devices() {
        let d = open_device(&dev).unwrap();
        let x = Tensor::from_slice_on(&[1.0f32, -2.0, 0.5, 3.0, 4.0, 8.0, -1.0, 2.0], &[8], &dev)
            .unwrap();
        let mut f = TinyJit::new(var_step);
        let args = |n: i64| JitArgs::new().tensor(&x).var(&i.bind(n).unwrap());
        for n in [3, 5] {
            f.call(&args(n)).unwrap();
        }
        assert_eq!(f.wait_graphs(Duration::from_secs(600)), GraphBuild::Ready);
        f.call(&args(4)).unwrap();
        assert_eq!(f.jit_cache().len(), 1, "{dev}: one graph");
        let runner = graph_runner(&*f.jit_cache()[0].runner).expect("a graph runner");
        let bufs = [x.lazydata().buffer().clone()];
        let vv: VarVals = [(i.clone(), 6)].into_iter().collect();
        use rawgrad::engine::realize::Runner;
        runner.exec(&bufs, &vv, false).unwrap();
        d.synchronize().unwrap();
        for run in 0..6 {
            let (r, n) = allocations(|| runner.exec(&bufs, &vv, false));
            r.unwrap();
            assert_eq!(n, 0, "{dev}: graph run {run} with i=6 allocated {n} times");
            d.synchronize().unwrap();
        }
    }
}

/// A graph of more kernels than fit any fixed list (160, in one batch: `JIT_BATCH_SIZE=160`)
/// replays without allocating either: the graph keeps its programs, a replay collects none.
#[test]
fn a_graph_run_of_160_kernels_allocates_nothing() {
    let _one = one_at_a_time();
    let _batch = Context::new(&[("JIT_BATCH_SIZE", 160)]);
    let steps = 160;
    let input = [1.0f32, -2.0, 0.5, 3.0];
    let host: Vec<f32> = input.map(|v| want_after(v, steps)).to_vec();
    for dev in graph_devices() {
        let x = Tensor::from_slice_on(&input, &[4], &dev).unwrap();
        let mut f = captured_chain(&dev, &x, steps);
        let ei = &f.jit_cache()[0];
        let items = graph_items(&*ei.runner).expect("a graph runner").len();
        assert_eq!(items, steps, "{dev}: every kernel in the one graph");
        let runner = graph_runner(&*ei.runner).expect("a graph runner");
        runs_allocate_nothing(&dev, runner, &x, 6);
        let out = f.call_tensors(std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), host, "{dev}: {steps} steps");
    }
}
