//! The realize engine (tinygrad 0.9.1 `engine/realize.py`): schedule items lowered to
//! [`ExecItem`]s (a [`Runner`] and its buffers) and run, with `GlobalCounters` and the `DEBUG`
//! output.
//!
//! - [`Runner`]: what an item runs ([`CompiledRunner`], [`BufferCopy`], [`ViewOp`], [`EmptyOp`],
//!   [`CustomOp`] in `realize/runners.rs`), with its display name, device and cost estimates.
//! - [`get_runner`] / [`get_kernel`] (`realize/method_cache.rs`): kernel AST -> Kernel ->
//!   ProgramSpec -> compiled, loaded program, cached per (device, AST, BEAM) and per device family.
//! - [`lower_schedule_item`], [`lower_schedule`], [`run_schedule`]: the lowering rules and the
//!   main loop (beyond 0.9.1: the kernels it will need that the method cache lacks are built in
//!   parallel by a scoped pool while it runs the items in order, `realize/prebuild.rs`);
//!   [`ExecItem::run`] allocates the buffers, runs the runner, updates
//!   `GlobalCounters` (kernel count, ops, memory, time) and prints the `DEBUG>=2` line
//!   (`realize/debug.rs`; `DEBUG>=2` also makes every runner wait and report its time).
//! - The capture seam for the JIT: while a [`CaptureGuard`] lives on a thread (and `CAPTURING` is
//!   not 0), every item `run_schedule` executes on that thread is handed to its callback first.
//!
//! `DEBUG` levels: 2 one line per item; 3 the kernel ASTs and applied opts; 4 the rendered
//! source; 5 the UOps.
//!
//! Not guaranteed: items run in order on the calling thread (only their builds may be made on
//! other threads) and a run returns before the device
//! finished unless the runner was asked to wait (reads through `Buffer::copyout` synchronize).

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::device::registry::device_family;
use crate::device::BufferRef;
use crate::engine::schedule::ScheduleItem;
use crate::helpers::{debug, getenv, GlobalCounters};
use crate::ops::{BufferOps, LazyOp, LazyOpArg, LoadOps, Op};
use crate::runtime::builtin::register_builtin_families;
use crate::shape::{sym_infer, Sint, VarVals};
use crate::{bail, ensure, Error, Result};

pub mod debug;
mod method_cache;
mod prebuild;
mod runners;
#[cfg(test)]
mod tests;

pub use debug::{capture_debug_output, debug_print};
pub use method_cache::{
    clear_method_cache, compiles_on_this_thread, get_kernel, get_runner,
    programs_built_on_this_thread, OPT_KNOBS,
};
pub use runners::{BufferCopy, CompiledRunner, CustomOp, EmptyOp, ViewOp};

/// What every runner has (tinygrad's `Runner.__init__` fields).
#[derive(Debug)]
pub struct RunnerBase {
    /// What DEBUG lines show (may hold ANSI colors).
    pub display_name: String,
    /// The device the runner runs on (tinygrad's `dname`).
    pub device: String,
    pub op_estimate: Sint,
    pub mem_estimate: Sint,
    first_run: AtomicBool,
}

impl RunnerBase {
    pub fn new(
        display_name: String,
        device: String,
        op_estimate: Sint,
        mem_estimate: Sint,
    ) -> Self {
        RunnerBase {
            display_name,
            device,
            op_estimate,
            mem_estimate,
            first_run: AtomicBool::new(true),
        }
    }

    /// A runner with zero estimates.
    pub fn zero(display_name: String, device: &str) -> Self {
        RunnerBase::new(display_name, device.to_string(), Sint::Num(0), Sint::Num(0))
    }
}

/// Something an [`ExecItem`] runs.
pub trait Runner: Send + Sync {
    /// The shared fields.
    fn base(&self) -> &RunnerBase;
    /// Run over `bufs` (allocated) with the variable values; with `wait`, block until the work
    /// finished and return the elapsed seconds (runners that are never timed return `None`).
    fn exec(&self, bufs: &[BufferRef], var_vals: &VarVals, wait: bool) -> Result<Option<f64>>;
    /// For downcasting (the JIT looks for [`CompiledRunner`]s).
    fn as_any(&self) -> &dyn Any;

    fn display_name(&self) -> &str {
        &self.base().display_name
    }
    fn device(&self) -> &str {
        &self.base().device
    }
    fn op_estimate(&self) -> &Sint {
        &self.base().op_estimate
    }
    fn mem_estimate(&self) -> &Sint {
        &self.base().mem_estimate
    }
    /// Whether the runner has not completed a run yet.
    fn first_run(&self) -> bool {
        self.base().first_run.load(Ordering::Relaxed)
    }
}

/// How [`ExecItem::run_with`] runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Wait for the device and time the item (always on at `DEBUG>=2`).
    pub wait: bool,
    /// JIT replay: the buffers are already allocated; the DEBUG header is magenta.
    pub jit: bool,
    /// Skip `GlobalCounters` and the DEBUG line.
    pub no_stats: bool,
}

/// A runner and its buffers (`None`: a slot the JIT fills in before a replay).
#[derive(Clone)]
pub struct ExecItem {
    pub runner: Arc<dyn Runner>,
    pub bufs: Vec<Option<BufferRef>>,
}

impl std::fmt::Debug for ExecItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ExecItem({:?} on {}, {:?})",
            crate::helpers::ansistrip(self.runner.display_name()),
            self.runner.device(),
            self.bufs
        )
    }
}

impl ExecItem {
    pub fn new(runner: Arc<dyn Runner>, bufs: Vec<BufferRef>) -> ExecItem {
        ExecItem {
            runner,
            bufs: bufs.into_iter().map(Some).collect(),
        }
    }

    /// Run once (allocating the buffers first), update `GlobalCounters` and print the DEBUG
    /// line; returns the elapsed seconds when the runner was timed.
    pub fn run(&self, var_vals: &VarVals, wait: bool) -> Result<Option<f64>> {
        self.run_with(
            var_vals,
            RunOptions {
                wait,
                ..RunOptions::default()
            },
        )
    }

    /// [`ExecItem::run`] with every option (tinygrad's `run(var_vals, wait, jit, do_update_stats)`).
    pub fn run_with(&self, var_vals: &VarVals, opts: RunOptions) -> Result<Option<f64>> {
        self.run_reusing(var_vals, opts, &mut Vec::with_capacity(self.bufs.len()))
    }

    /// [`ExecItem::run_with`] gathering the buffers into `bufs` (a list the caller keeps between
    /// runs, so a replay allocates none; emptied again before this returns).
    pub fn run_reusing(
        &self,
        var_vals: &VarVals,
        opts: RunOptions,
        bufs: &mut Vec<BufferRef>,
    ) -> Result<Option<f64>> {
        bufs.clear();
        let r = self.run_gathered(var_vals, opts, bufs);
        bufs.clear();
        r
    }

    fn run_gathered(
        &self,
        var_vals: &VarVals,
        opts: RunOptions,
        bufs: &mut Vec<BufferRef>,
    ) -> Result<Option<f64>> {
        // the buffers allocate through the registry's table: make sure it knows the built-ins
        register_builtin_families();
        for (i, b) in self.bufs.iter().enumerate() {
            let Some(b) = b else {
                bail!(
                    Runtime,
                    "{self:?}: buffer slot {i} is empty (a JIT input that was not filled in)"
                );
            };
            if !opts.jit {
                b.ensure_allocated()?;
            }
            bufs.push(b.clone());
        }
        let dbg = debug();
        let et = self.runner.exec(bufs, var_vals, opts.wait || dbg >= 2)?;
        if !opts.no_stats {
            self.update_stats(var_vals, et, opts.jit, dbg)?;
        }
        self.runner.base().first_run.store(false, Ordering::Relaxed);
        Ok(et)
    }

    fn update_stats(&self, var_vals: &VarVals, et: Option<f64>, jit: bool, dbg: i64) -> Result<()> {
        let op_estimate = sym_infer(self.runner.op_estimate(), var_vals)?;
        let mem_estimate = sym_infer(self.runner.mem_estimate(), var_vals)?;
        GlobalCounters::add(op_estimate, mem_estimate, et.unwrap_or(0.0), 1);
        if dbg >= 2 {
            let gc = GlobalCounters::get();
            debug_print(debug::exec_line(&debug::ExecStats {
                device: self.runner.device(),
                display_name: self.runner.display_name(),
                kernel_count: gc.kernel_count,
                nbufs: self.bufs.len(),
                mem_used: GlobalCounters::mem_used(),
                op_estimate,
                mem_estimate,
                et,
                time_sum_s: gc.time_sum_s,
                jit,
                first_run: self.runner.first_run(),
            }));
        }
        Ok(())
    }
}

/// tinygrad's `lower_schedule_item`: a kernel becomes a [`CompiledRunner`] from the method cache
/// (its buffers reordered to the kernel's DEFINE_GLOBALs); COPY a [`BufferCopy`] (a transfer
/// when both devices are of one family); CUSTOM, EMPTY and VIEW their runners.
pub fn lower_schedule_item(si: &ScheduleItem) -> Result<ExecItem> {
    lower_item_with(si, get_runner)
}

/// [`lower_schedule_item`] with `runner_of` giving a kernel's runner (device, AST).
fn lower_item_with(
    si: &ScheduleItem,
    runner_of: impl FnOnce(&str, &[LazyOp]) -> Result<Arc<CompiledRunner>>,
) -> Result<ExecItem> {
    let Some(first) = si.ast.first() else {
        bail!(
            InvalidArgument,
            "lower_schedule_item: an item without an AST"
        );
    };
    let Some(out) = si.outputs().first() else {
        bail!(
            InvalidArgument,
            "lower_schedule_item: an item without buffers ({:?})",
            first.op()
        );
    };
    let one_device = si.bufs.iter().all(|b| b.device() == out.device());
    ensure!(
        one_device || first.op() == Op::Load(LoadOps::COPY) || getenv("USE_COPY_KERNEL", 0) != 0,
        InvalidArgument,
        "lower_schedule_item: a {:?} item over several devices {:?}",
        first.op(),
        si.bufs.iter().map(|b| b.device()).collect::<Vec<_>>()
    );
    let runner: Arc<dyn Runner> = match (first.op(), first.arg()) {
        (Op::Buffer(BufferOps::STORE), _) => {
            let runner = runner_of(out.device(), &si.ast)?;
            let mut bufs = Vec::new();
            for (idx, _) in runner.p.globals() {
                let b = si.bufs.get(idx).ok_or_else(|| {
                    Error::Internal(format!(
                        "kernel {} uses buffer {idx} but the item has {}",
                        runner.p.name,
                        si.bufs.len()
                    ))
                })?;
                bufs.push(b.clone());
            }
            return Ok(ExecItem::new(runner, bufs));
        }
        (Op::Load(LoadOps::COPY), LazyOpArg::Nbytes(n)) => {
            let src = si.inputs().first().ok_or_else(|| {
                Error::InvalidArgument("lower_schedule_item: a COPY without a source".into())
            })?;
            let xfer = device_family(out.device()) == device_family(src.device());
            Arc::new(BufferCopy::new(*n, out.device(), src.device(), xfer))
        }
        (Op::Load(LoadOps::CUSTOM), LazyOpArg::Custom(c)) => Arc::new(CustomOp::new(c.clone())),
        (Op::Load(LoadOps::EMPTY), _) => Arc::new(EmptyOp::new(out)),
        (Op::Load(LoadOps::VIEW), _) => Arc::new(ViewOp::new(out)),
        (op, _) => bail!(
            InvalidArgument,
            "lower_schedule_item: don't know how to lower {}",
            op.name()
        ),
    };
    Ok(ExecItem::new(runner, si.bufs.clone()))
}

/// tinygrad's `lower_schedule`: lower the items one at a time, in order.
pub fn lower_schedule(schedule: Vec<ScheduleItem>) -> impl Iterator<Item = Result<ExecItem>> {
    schedule.into_iter().map(|si| lower_schedule_item(&si))
}

/// A JIT's capture callback (tinygrad's `capturing[0].add`).
pub type Capturer = Box<dyn FnMut(&ExecItem)>;

thread_local! {
    static CAPTURING: RefCell<Vec<Capturer>> = const { RefCell::new(Vec::new()) };
}

/// While it lives, [`run_schedule`] on this thread hands every item to the callback (the
/// innermost guard's) before running it. Nested guards stack.
#[must_use = "capture stops when the guard drops"]
pub struct CaptureGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl CaptureGuard {
    pub fn new(capturer: Capturer) -> CaptureGuard {
        CAPTURING.with(|c| c.borrow_mut().push(capturer));
        CaptureGuard {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURING.with(|c| {
            c.borrow_mut().pop();
        });
    }
}

/// Run `f`, collecting every item `run_schedule` executes on this thread meanwhile.
pub fn capture_exec_items<T>(f: impl FnOnce() -> T) -> (T, Vec<ExecItem>) {
    let items = std::rc::Rc::new(RefCell::new(Vec::new()));
    let sink = std::rc::Rc::clone(&items);
    let guard = CaptureGuard::new(Box::new(move |ei: &ExecItem| {
        sink.borrow_mut().push(ei.clone())
    }));
    let out = f();
    drop(guard);
    let items = std::mem::take(&mut *items.borrow_mut());
    (out, items)
}

/// Hand `ei` to the innermost capturer, if any and `CAPTURING` is on. The capturer is taken out
/// while it runs, so it may itself run schedules without re-entering itself.
fn capture(ei: &ExecItem) {
    if getenv("CAPTURING", 1) == 0 {
        return;
    }
    let Some(mut cap) = CAPTURING.with(|c| c.borrow_mut().pop()) else {
        return;
    };
    cap(ei);
    CAPTURING.with(|c| c.borrow_mut().push(cap));
}

/// tinygrad's `run_schedule`: lower each item, hand it to the active capturer, run it (the
/// kernels missing from the method cache built ahead in parallel: `realize/prebuild.rs`).
pub fn run_schedule(schedule: Vec<ScheduleItem>, var_vals: &VarVals) -> Result<()> {
    run_schedule_with(schedule, var_vals, true)
}

/// [`run_schedule`], optionally without `GlobalCounters` and DEBUG lines.
pub fn run_schedule_with(
    schedule: Vec<ScheduleItem>,
    var_vals: &VarVals,
    do_update_stats: bool,
) -> Result<()> {
    let opts = RunOptions {
        no_stats: !do_update_stats,
        ..RunOptions::default()
    };
    let plan = prebuild::plan(&schedule);
    prebuild::with_builders(plan, |builds| {
        for (i, si) in schedule.iter().enumerate() {
            let ei = lower_item_with(si, |device, ast| builds.runner(i, device, ast))?;
            capture(&ei);
            ei.run_with(var_vals, opts)?;
        }
        Ok(())
    })
}
