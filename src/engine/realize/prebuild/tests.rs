use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use super::*;
use crate::device::registry::register_family;
use crate::device::{BufferRef, Compiler};
use crate::engine::realize::{
    capture_exec_items, compiles_on_this_thread, programs_built_on_this_thread, run_schedule,
    ExecItem,
};
use crate::helpers::{ansistrip, GlobalCounters};
use crate::ops::LazyOp;
use crate::shape::VarVals;
use crate::{Error, Tensor};

/// What a [`TestCompiler`] saw: per compile, the thread, the source and the value of the knob
/// `PREBUILD_TEST_KNOB` on that thread.
#[derive(Default)]
struct Seen {
    compiles: Vec<(ThreadId, String, i64)>,
}

/// CLANG's compiler, recording every compile; it fails on sources holding `fail`, panics on ones
/// holding `panic`, and a compile of a source holding `wait` waits (at most 10 s) until another
/// thread compiled or panicked.
struct TestCompiler {
    inner: Arc<dyn Compiler>,
    seen: Mutex<Seen>,
    changed: Condvar,
    fail: Option<String>,
    panic: Option<String>,
    wait: Option<String>,
}

impl TestCompiler {
    fn note(&self, src: &str) {
        let knob = getenv("PREBUILD_TEST_KNOB", -1);
        let me = std::thread::current().id();
        self.seen
            .lock()
            .unwrap()
            .compiles
            .push((me, src.to_string(), knob));
        self.changed.notify_all();
    }

    fn others_compiled(&self, seen: &Seen) -> bool {
        let me = std::thread::current().id();
        seen.compiles.iter().any(|(t, _, _)| *t != me)
    }
}

fn has(src: &str, marker: &Option<String>) -> bool {
    marker.as_deref().is_some_and(|m| src.contains(m))
}

impl Compiler for TestCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        self.note(src);
        if has(src, &self.wait) {
            let mut seen = self.seen.lock().unwrap();
            for _ in 0..100 {
                if self.others_compiled(&seen) {
                    break;
                }
                seen = self
                    .changed
                    .wait_timeout(seen, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
        }
        if has(src, &self.panic) {
            std::panic::resume_unwind(Box::new("test compiler panics"));
        }
        if has(src, &self.fail) {
            return Err(Error::Compile("test compiler refuses".into()));
        }
        self.inner.compile(src)
    }
}

/// A device family `name` made of CLANG's parts and a [`TestCompiler`] with the given markers.
fn family(name: &str, markers: [Option<&str>; 3]) -> Arc<TestCompiler> {
    let clang = open_device("CLANG").unwrap();
    let [fail, panic, wait] = markers.map(|m| m.map(str::to_string));
    let compiler = Arc::new(TestCompiler {
        inner: Arc::clone(&clang.compiler),
        seen: Mutex::default(),
        changed: Condvar::new(),
        fail,
        panic,
        wait,
    });
    let c2 = Arc::clone(&compiler);
    register_family(name, move |dev| {
        Ok(Compiled {
            name: dev.to_string(),
            allocator: Arc::clone(&clang.allocator),
            compiler: Arc::clone(&c2) as Arc<dyn Compiler>,
            runtime: Arc::clone(&clang.runtime),
            renderer: Arc::clone(&clang.renderer),
        })
    });
    compiler
}

/// Four kernels over a `rows x cols` input on `device` (shapes no other test uses): a sum and a
/// max of each row, an elementwise one, and a sum of each column; the scale constants mark them.
fn four_kernels(device: &str, rows: usize, cols: usize) -> Vec<Tensor> {
    let data: Vec<f32> = (0..rows * cols).map(|i| (i % 17) as f32 - 8.0).collect();
    let a = Tensor::from_slice_on(&data, &[rows, cols], device).unwrap();
    vec![
        a.mul(0.25).unwrap().sum_axis(1, false).unwrap(),
        a.mul(0.5).unwrap().max_axis(1, false).unwrap(),
        a.mul(1.75).unwrap().add(3.0).unwrap(),
        a.mul(-2.0).unwrap().sum_axis(0, false).unwrap(),
    ]
}

fn schedule_of(outs: &[Tensor]) -> (Vec<ScheduleItem>, VarVals) {
    let rest: Vec<&Tensor> = outs[1..].iter().collect();
    outs[0].schedule_with_vars(&rest).unwrap()
}

fn values(outs: &[Tensor]) -> Vec<Vec<f32>> {
    outs.iter().map(|t| t.to_vec::<f32>().unwrap()).collect()
}

/// A kernel name without its dedup suffix (`r_7_13n2` -> `r_7_13`).
fn base(name: &str) -> String {
    let name = ansistrip(name);
    match name.rfind('n') {
        Some(i) if i + 1 < name.len() && name[i + 1..].bytes().all(|b| b.is_ascii_digit()) => {
            name[..i].to_string()
        }
        _ => name,
    }
}

/// What [`realize`] saw.
struct Run {
    /// The items the capture saw.
    items: Vec<ExecItem>,
    /// The kernel items' (device, AST), in order.
    kernels: Vec<(String, Vec<LazyOp>)>,
    /// Growth of programs built, compiles, kernels run.
    grown: [i64; 3],
    values: Vec<Vec<f32>>,
}

/// Realize `outs` on this thread.
fn realize(outs: &[Tensor]) -> Run {
    let (sched, vv) = schedule_of(outs);
    let kernels = (sched.iter().filter(|si| si.is_kernel()))
        .map(|si| (si.outputs()[0].device().to_string(), si.ast.clone()))
        .collect();
    let (p0, c0) = (programs_built_on_this_thread(), compiles_on_this_thread());
    GlobalCounters::reset();
    let (r, items) = capture_exec_items(|| run_schedule(sched, &vv));
    r.unwrap();
    let grown = [
        (programs_built_on_this_thread() - p0) as i64,
        (compiles_on_this_thread() - c0) as i64,
        GlobalCounters::get().kernel_count,
    ];
    Run {
        items,
        kernels,
        grown,
        values: values(outs),
    }
}

fn compiled(ei: &ExecItem) -> &CompiledRunner {
    ei.runner.as_any().downcast_ref::<CompiledRunner>().unwrap()
}

/// The item whose source holds `marker`.
fn item_with<'a>(items: &'a [ExecItem], marker: &str) -> (usize, &'a CompiledRunner) {
    let i = items
        .iter()
        .position(|e| compiled(e).p.src.contains(marker))
        .unwrap();
    (i, compiled(&items[i]))
}

#[test]
fn workers_build_the_same_kernels_in_the_same_order() {
    let me = std::thread::current().id();
    let par = family("PBTEST_PAR", [None, None, Some("0.25f")]);
    let ser = family("PBTEST_SER", [None, None, None]);
    let p = {
        let _c = Context::new(&[("PARALLEL", 4), ("PARALLEL_BUILD", 1)]);
        realize(&four_kernels("PBTEST_PAR", 7, 13))
    };
    let s = {
        let _c = Context::new(&[("PARALLEL_BUILD", 0)]);
        realize(&four_kernels("PBTEST_SER", 7, 13))
    };
    assert_eq!(p.values, s.values);
    assert_eq!(p.grown, [4, 4, 4], "programs, compiles, kernels run");
    assert_eq!(p.grown, s.grown);
    let names = |items: &[ExecItem]| -> Vec<String> {
        items
            .iter()
            .map(|e| base(e.runner.display_name()))
            .collect()
    };
    assert_eq!(
        names(&p.items),
        names(&s.items),
        "the JIT sees the same items"
    );
    // the names were given in schedule order: the row sum comes first and gets the plain name,
    // the row max (the same kernel shape) the next one
    let (i_sum, sum) = item_with(&p.items, "0.25f");
    let (i_max, max) = item_with(&p.items, "0.5f");
    assert!(i_sum < i_max);
    assert_eq!(max.p.name, format!("{}n1", sum.p.name));
    // the method cache holds what the items run: a second run builds nothing
    assert_eq!(p.kernels.len(), p.items.len());
    for ((device, ast), ei) in p.kernels.iter().zip(&p.items) {
        let again = get_runner(device, ast).unwrap();
        assert_eq!(
            Arc::as_ptr(&again) as *const (),
            Arc::as_ptr(&ei.runner) as *const ()
        );
    }
    let seen = par.seen.lock().unwrap();
    assert_eq!(seen.compiles.len(), 4);
    assert!(
        seen.compiles.iter().any(|c| c.0 != me),
        "no worker compiled"
    );
    assert!(ser.seen.lock().unwrap().compiles.iter().all(|c| c.0 == me));
    // the same sources, names aside
    for (a, b) in p.items.iter().zip(&s.items) {
        let (a, b) = (compiled(a), compiled(b));
        assert!(seen.compiles.iter().any(|c| c.1 == a.p.src));
        assert_eq!(
            a.p.src.replace(&a.p.function_name, "K"),
            b.p.src.replace(&b.p.function_name, "K")
        );
    }
}

#[test]
fn workers_see_the_callers_context() {
    let me = std::thread::current().id();
    let c = family("PBTEST_CTX", [None, None, Some("0.25f")]);
    let _c = Context::new(&[("PARALLEL", 4), ("PARALLEL_BUILD", 1)]);
    let _k = Context::new(&[("PREBUILD_TEST_KNOB", 7)]);
    realize(&four_kernels("PBTEST_CTX", 5, 11));
    let seen = c.seen.lock().unwrap();
    assert_eq!(seen.compiles.len(), 4);
    assert!(
        seen.compiles.iter().any(|c| c.0 != me),
        "no worker compiled"
    );
    let knobs: Vec<i64> = seen.compiles.iter().map(|c| c.2).collect();
    assert_eq!(knobs, [7, 7, 7, 7]);
}

/// Each word of an error message with its kernel-name suffix dropped.
fn unsuffixed(msg: &str) -> String {
    let words: Vec<String> = msg
        .split(' ')
        .map(|w| match w.strip_suffix(':') {
            Some(w) => format!("{}:", base(w)),
            None => base(w),
        })
        .collect();
    words.join(" ")
}

/// `outs`' schedule, its variable values, each item's output and the index of the item that
/// writes `marked`.
type Marked = (Vec<ScheduleItem>, VarVals, Vec<BufferRef>, usize);

fn marked_schedule(outs: &[Tensor], marked: &Tensor) -> Marked {
    let (sched, vv) = schedule_of(outs);
    let target = marked.lazydata().base().buffer().clone();
    let at = sched
        .iter()
        .position(|si| si.outputs()[0] == target)
        .unwrap();
    let bufs: Vec<BufferRef> = sched.iter().map(|si| si.outputs()[0].clone()).collect();
    (sched, vv, bufs, at)
}

/// Run `outs`' schedule; the result and, per item, whether its output was allocated, and the
/// index of the item that writes `marked`.
fn run_marked(outs: &[Tensor], marked: &Tensor) -> (Result<()>, Vec<bool>, usize) {
    let (sched, vv, bufs, at) = marked_schedule(outs, marked);
    let r = run_schedule(sched, &vv);
    (r, bufs.iter().map(|b| b.is_allocated()).collect(), at)
}

#[test]
fn a_failed_build_is_reported_at_its_item() {
    family("PBTEST_FAIL", [Some("1.75f"), None, None]);
    family("PBTEST_FAILSER", [Some("1.75f"), None, None]);
    let par = four_kernels("PBTEST_FAIL", 3, 19);
    let ser = four_kernels("PBTEST_FAILSER", 3, 19);
    let (r, ran, at) = {
        let _c = Context::new(&[("PARALLEL", 4), ("PARALLEL_BUILD", 1)]);
        run_marked(&par, &par[2])
    };
    let (r_ser, ran_ser, at_ser) = {
        let _c = Context::new(&[("PARALLEL_BUILD", 0)]);
        run_marked(&ser, &ser[2])
    };
    let (e, e_ser) = (r.unwrap_err(), r_ser.unwrap_err());
    assert!(matches!(e, Error::Compile(_)), "{e:?}");
    assert!(e.message().contains("test compiler refuses"), "{e}");
    assert_eq!(unsuffixed(e.message()), unsuffixed(e_ser.message()));
    assert_eq!((&ran, at), (&ran_ser, at_ser));
    let want: Vec<bool> = (0..ran.len()).map(|i| i < at).collect();
    assert_eq!(ran, want, "the items before the failed one ran, none after");
}

#[test]
fn a_worker_panic_is_caught_and_shown_in_order() {
    let me = std::thread::current().id();
    // every compile waits until another thread compiled (at most 10 s), so a worker is building
    // while the calling thread is
    let c = family("PBTEST_PANIC", [None, Some("1.75f"), Some("(")]);
    let outs = four_kernels("PBTEST_PANIC", 9, 2);
    let (sched, vv, bufs, at) = marked_schedule(&outs, &outs[2]);
    let r = {
        let _c = Context::new(&[("PARALLEL", 4), ("PARALLEL_BUILD", 1)]);
        std::panic::catch_unwind(AssertUnwindSafe(|| run_schedule(sched, &vv)))
    };
    let ran: Vec<bool> = bufs.iter().map(|b| b.is_allocated()).collect();
    assert!(r.is_err(), "the panic shows on the calling thread");
    let want: Vec<bool> = (0..ran.len()).map(|i| i < at).collect();
    assert_eq!(ran, want, "the items before the panicking one ran");
    let seen = c.seen.lock().unwrap();
    let panics: Vec<ThreadId> = (seen.compiles.iter())
        .filter(|c| c.1.contains("1.75f"))
        .map(|c| c.0)
        .collect();
    // the first panic was caught (on a worker, or on the calling thread building ahead while it
    // waited), the build made again in order on the calling thread panicked as it does in order
    assert!(panics.len() >= 2, "{panics:?}");
    assert_eq!(panics.last(), Some(&me));
}

#[test]
fn skipped_where_it_cannot_help_or_is_turned_off() {
    family("PBTEST_SKIP", [None, None, None]);
    let outs = four_kernels("PBTEST_SKIP", 3, 23);
    let (sched, vv) = schedule_of(&outs);
    let _c = Context::new(&[("PARALLEL", 4), ("PARALLEL_BUILD", 1)]);
    for (k, v) in [("BEAM", 1), ("DEBUG", 3), ("PARALLEL", 1), ("PARALLEL", 0)] {
        let _g = Context::new(&[(k, v)]);
        assert!(plan(&sched).is_none(), "{k}={v}");
    }
    {
        let _g = Context::new(&[("PARALLEL_BUILD", 0)]);
        assert!(plan(&sched).is_none(), "PARALLEL_BUILD=0");
    }
    // one kernel alone is built in order
    assert!(plan(&sched[..1]).is_none());
    let p = plan(&sched).unwrap();
    assert_eq!(p.jobs.len(), 4);
    // a kernel twice (another device of the family too) is built once
    let twice: Vec<ScheduleItem> = vec![sched[0].clone(), sched[0].clone()];
    assert!(plan(&twice).is_none());
    drop(p);
    run_schedule(sched.clone(), &vv).unwrap();
    assert!(plan(&sched).is_none(), "everything is cached");
}
