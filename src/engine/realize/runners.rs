//! The runners (tinygrad 0.9.1 `engine/realize.py`): [`CompiledRunner`] (a compiled kernel),
//! [`BufferCopy`] (a copy between devices, or a same-family device-to-device transfer),
//! [`ViewOp`], [`EmptyOp`] and [`CustomOp`].
//!
//! A `CompiledRunner` is given one buffer per DEFINE_GLOBAL, in the kernel's order (tinygrad's
//! `[si.bufs[i] for i, _ in p.globals]`), and passes them on in that order, except to a device
//! without launch dims: those (CLANG, LLVM) load kernels through the fixed `NAME_rg` entry, which
//! indexes its buffer array by DEFINE_GLOBAL index, so a load folded away (a gap in the indices)
//! must leave a gap in the array too. Such a device gets no launch dims from the engine: how a
//! kernel is split over cores is the CPU runtime's policy (`runtime/cpu/launch.rs`), read from the
//! program when it is loaded ([`crate::device::Runtime::load_program`]) and applied per call from
//! the variable values the engine passes.
//!
//! Not guaranteed: `BufferCopy` goes through host memory (a `copyout` then a `copyin`); the
//! time a runner reports with `wait` is host wall time around the call.

use std::any::Any;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::codegen::program::ProgramSpec;
use crate::device::registry::{device_family, Compiled};
use crate::device::{compile_cached, Buffer, BufferRef, Launch, LaunchDims, Program, RawBuf};
use crate::helpers::colored;
use crate::ops::CustomOp as CustomFnOp;
use crate::runtime::builtin::open_device;
use crate::shape::{all_int, Node, VarVals};
use crate::{ensure, Error, Result};

use super::debug::debug_print;
use super::method_cache::note_compile;
use super::{Runner, RunnerBase};

/// A compiled kernel (tinygrad's `CompiledRunner`).
pub struct CompiledRunner {
    base: RunnerBase,
    /// The program this runner was compiled from (its `device` is the runner's device).
    pub p: ProgramSpec,
    /// The device binary.
    pub lib: Arc<[u8]>,
    /// Shared with the device graphs built over it.
    prg: Arc<dyn Program>,
    /// For a device that takes buffers by DEFINE_GLOBAL index, when the indices are not `0..n` in
    /// order: the position in the buffer list of the buffer for each index (`None` for an index
    /// the kernel does not use).
    slots: Option<Vec<Option<usize>>>,
    /// (global, local) chosen by `optimize_local_size` for a program with a global size and no
    /// local size (tinygrad rewrites its Program the same way on the first run).
    tuned: OnceLock<(LaunchDims, LaunchDims)>,
}

impl CompiledRunner {
    /// Compile `p` for its device (through the disk cache) unless `precompiled` is given, and
    /// load it. `display_name` is what DEBUG lines show (the colored kernel name).
    pub fn new(
        p: ProgramSpec,
        display_name: String,
        precompiled: Option<Arc<[u8]>>,
    ) -> Result<Self> {
        if crate::helpers::debug() >= 4 {
            debug_print(p.src.clone());
        }
        let dev = open_device(&p.device)?;
        let lib: Arc<[u8]> = match precompiled {
            Some(lib) => lib,
            None => {
                note_compile();
                compile_program(&dev, &p)?
            }
        };
        let prg = dev
            .runtime
            .load_program(&p, &lib)
            .map_err(|e| with_kernel(e, &p.name, "loading"))?;
        let globals: Vec<usize> = p.globals().into_iter().map(|g| g.0).collect();
        let by_index = !dev.renderer.opts().has_local;
        let in_order = globals.iter().enumerate().all(|(i, &g)| i == g);
        let slots = (by_index && !in_order).then(|| {
            let n = globals.iter().max().map_or(0, |m| m + 1);
            let mut slots = vec![None; n];
            for (pos, &g) in globals.iter().enumerate() {
                slots[g] = Some(pos);
            }
            slots
        });
        let base = RunnerBase::new(
            display_name,
            p.device.clone(),
            p.op_estimate.clone(),
            p.mem_estimate.clone(),
        );
        Ok(CompiledRunner {
            base,
            p,
            lib,
            prg: Arc::from(prg),
            slots,
            tuned: OnceLock::new(),
        })
    }

    /// The buffers as the device takes them (see the module doc); an index the kernel does not
    /// use gets the first buffer, which the kernel never touches through that slot.
    fn raw_args(&self, bufs: &[BufferRef]) -> Result<Vec<RawBuf>> {
        let raws = bufs
            .iter()
            .map(|b| b.raw().cloned())
            .collect::<Result<Vec<RawBuf>>>()?;
        let Some(slots) = &self.slots else {
            return Ok(raws);
        };
        slots
            .iter()
            .map(|s| {
                raws.get(s.unwrap_or(0)).cloned().ok_or_else(|| {
                    Error::Internal(format!("kernel {}: lost a buffer slot", self.p.name))
                })
            })
            .collect()
    }

    /// The launch dims `optimize_local_size` picks for global size `g` (once per runner); an output
    /// that is also an input gets a scratch copy for the trials.
    fn tune_local_size(
        &self,
        g: LaunchDims,
        bufs: &[BufferRef],
        vals: &[i64],
    ) -> Result<(LaunchDims, LaunchDims)> {
        if let Some(t) = self.tuned.get() {
            return Ok(*t);
        }
        let mut trial: Vec<BufferRef> = bufs.to_vec();
        if let Some(first) = bufs.first() {
            if bufs[1..].contains(first) {
                let scratch = Buffer::new(
                    first.device(),
                    first.size(),
                    first.dtype(),
                    *first.options(),
                );
                scratch.ensure_allocated()?;
                trial[0] = scratch;
            }
        }
        let raws = self.raw_args(&trial)?;
        let l = crate::engine::search::optimize_local_size(&*self.prg, g, &raws, vals)
            .map_err(|e| with_kernel(e, &self.p.name, "choosing a local size for"))?;
        let t = ([g[0] / l[0], g[1] / l[1], g[2] / l[2]], l);
        Ok(*self.tuned.get_or_init(|| t))
    }

    /// Run once and time it; a device that can time part of a kernel (the CPU devices: part of
    /// the split outer loop, near `max_work` units of work) times that part and scales the time to
    /// the whole kernel ([`Program::time_part`]).
    pub fn time_test_size(
        &self,
        bufs: &[BufferRef],
        var_vals: &VarVals,
        max_work: i64,
    ) -> Result<f64> {
        let raws = self.raw_args(bufs)?;
        let vals = self.p.var_values(var_vals)?;
        let part = self
            .prg
            .time_part(&raws, &vals, max_work)
            .map_err(|e| with_kernel(e, &self.p.name, "running part of"))?;
        if let Some(t) = part {
            return Ok(t);
        }
        self.exec(bufs, var_vals, true)?.ok_or_else(|| {
            Error::Runtime(format!(
                "kernel {}: the device did not time it",
                self.p.name
            ))
        })
    }
}

/// The binary of `p` from `dev`'s compiler, through the disk cache (no counter is touched: the
/// caller notes the compile on the thread it is made for).
pub(crate) fn compile_program(dev: &Compiled, p: &ProgramSpec) -> Result<Arc<[u8]>> {
    Ok(compile_cached(&*dev.compiler, &p.src)
        .map_err(|e| with_kernel(e, &p.name, "compiling"))?
        .into())
}

fn with_kernel(e: Error, name: &str, what: &str) -> Error {
    let msg = format!("{what} kernel {name}: {}", e.message());
    match e {
        Error::Compile(_) => Error::Compile(msg),
        Error::Device(_) => Error::Device(msg),
        Error::Codegen(_) => Error::Codegen(msg),
        _ => Error::Runtime(msg),
    }
}

impl CompiledRunner {
    /// Resolve the buffers, variable values and launch dims of one launch.
    pub fn prepare(&self, bufs: &[BufferRef], var_vals: &VarVals) -> Result<Launch> {
        let want = self.p.globals().len();
        ensure!(
            bufs.len() == want,
            Runtime,
            "kernel {} takes {want} buffers, got {}",
            self.p.name,
            bufs.len()
        );
        let mut call = Launch {
            raws: self.raw_args(bufs)?,
            vals: Vec::new(),
            global: None,
            local: None,
        };
        self.update_launch(&mut call, var_vals)?;
        // a GPU program with a fixed global size and no local size: optimize_local_size picks
        // one on the first run (needs the buffers, so here and not in update_launch)
        let tunable = self.p.global_size.as_ref().is_some_and(|g| all_int(g));
        if let (Some(g), None, true) = (call.global, call.local, tunable) {
            let (g, l) = self.tune_local_size(g, bufs, &call.vals)?;
            (call.global, call.local) = (Some(g), Some(l));
        }
        Ok(call)
    }

    /// Recompute the variable values and launch dims of `call` for `var_vals`.
    pub fn update_launch(&self, call: &mut Launch, var_vals: &VarVals) -> Result<()> {
        // in place (a replay allocates nothing); the values of `ProgramSpec::var_values`
        call.vals.clear();
        for v in &self.p.vars {
            let x = var_vals.get(v).copied().ok_or_else(|| {
                Error::Runtime(format!(
                    "kernel {}: no value for variable {v:?}",
                    self.p.name
                ))
            })?;
            call.vals.push(x);
        }
        let dims = |e: Error| {
            Error::Runtime(format!(
                "kernel {}: launch dims: {}",
                self.p.name,
                e.message()
            ))
        };
        let (mut global, mut local) = self.p.launch_dims(var_vals).map_err(dims)?;
        if let (Some(_), None, Some(t)) = (global, local, self.tuned.get()) {
            (global, local) = (Some(t.0), Some(t.1));
        }
        (call.global, call.local) = (global, local);
        Ok(())
    }

    /// Whether the values or dims of a launch depend on variables (a graph updates those).
    pub fn has_vars(&self) -> bool {
        !self.p.vars.is_empty()
    }

    /// The positions in [`Launch::raws`] that hold the buffer given at position `pos`.
    pub fn raw_positions(&self, pos: usize) -> Vec<usize> {
        match &self.slots {
            None => vec![pos],
            Some(slots) => (0..slots.len())
                .filter(|&g| slots[g] == Some(pos) || (pos == 0 && slots[g].is_none()))
                .collect(),
        }
    }

    /// The positions in [`Launch::raws`] the kernel writes (its outputs).
    pub fn written_raws(&self) -> Vec<usize> {
        match &self.slots {
            None => (self.p.globals().into_iter().enumerate())
                .filter(|(_, g)| self.p.outs.contains(&g.0))
                .map(|(i, _)| i)
                .collect(),
            Some(slots) => (0..slots.len())
                .filter(|g| self.p.outs.contains(g))
                .collect(),
        }
    }

    /// The loaded program.
    pub fn program(&self) -> &dyn Program {
        &*self.prg
    }

    /// The loaded program, shared (a device graph keeps it).
    pub fn shared_program(&self) -> &Arc<dyn Program> {
        &self.prg
    }

    /// Launch a prepared call.
    pub fn launch(&self, call: &Launch, wait: bool) -> Result<Option<f64>> {
        self.prg
            .call(&call.raws, &call.vals, call.global, call.local, wait)
            .map_err(|e| with_kernel(e, &self.p.name, "running"))
    }
}

impl Runner for CompiledRunner {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, bufs: &[BufferRef], var_vals: &VarVals, wait: bool) -> Result<Option<f64>> {
        let call = self.prepare(bufs, var_vals)?;
        self.launch(&call, wait)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A copy of `nbytes` bytes into `bufs[0]` from `bufs[1]` (tinygrad's `BufferCopy`, and
/// `BufferXfer` when both devices are of one family and the allocator transfers directly).
pub struct BufferCopy {
    base: RunnerBase,
    xfer: bool,
}

impl BufferCopy {
    /// `xfer`: use the destination allocator's device-to-device `transfer`.
    pub fn new(total_sz: usize, dest_device: &str, src_device: &str, xfer: bool) -> BufferCopy {
        let kind = if xfer { "xfer" } else { "copy" };
        let (d, s) = (head(dest_device, 7), head(src_device, 7));
        let name = if total_sz as f64 >= 1e6 {
            format!("{kind} {:7.2}M, {d:>7} <- {s:<7}", total_sz as f64 / 1e6)
        } else {
            format!("{kind} {total_sz:8}, {d:>7} <- {s:<7}")
        };
        let base = RunnerBase::new(
            colored(&name, Some("yellow")),
            dest_device.to_string(),
            Node::Num(0),
            Node::Num(total_sz as i64),
        );
        BufferCopy { base, xfer }
    }

    /// Whether this copy is a same-family transfer.
    pub fn is_xfer(&self) -> bool {
        self.xfer
    }

    /// The runner for a copy from `src_device` to `dest_device`: a transfer within one family.
    pub fn between(total_sz: usize, dest_device: &str, src_device: &str) -> BufferCopy {
        let xfer = device_family(dest_device) == device_family(src_device);
        BufferCopy::new(total_sz, dest_device, src_device, xfer)
    }
}

fn head(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

impl Runner for BufferCopy {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, bufs: &[BufferRef], _var_vals: &VarVals, wait: bool) -> Result<Option<f64>> {
        let [dest, src, ..] = bufs else {
            return Err(Error::Runtime(format!(
                "buffer copy takes a destination and a source, got {} buffers",
                bufs.len()
            )));
        };
        ensure!(
            dest.size() == src.size() && dest.dtype() == src.dtype(),
            Runtime,
            "buffer copy mismatch, {} != {}, {:?} != {:?}",
            dest.size(),
            src.size(),
            dest.dtype(),
            src.dtype()
        );
        let start = Instant::now();
        if self.xfer {
            let alloc = dest
                .allocator()
                .ok_or_else(|| Error::Runtime(format!("xfer into unallocated {dest:?}")))?;
            alloc.transfer(dest.raw()?, src.raw()?, dest.nbytes())?;
        } else {
            dest.copyin(&src.as_bytes()?)?;
        }
        if !wait {
            return Ok(None);
        }
        open_device(dest.device())?.synchronize()?;
        Ok(Some(start.elapsed().as_secs_f64()))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `LoadOps.VIEW`: the view buffer already shares its base's memory; checks the relation.
pub struct ViewOp {
    base: RunnerBase,
}

impl ViewOp {
    pub fn new(buf: &BufferRef) -> ViewOp {
        let name = format!("view {:8} @ {:<10}", buf.nbytes(), buf.offset());
        ViewOp {
            base: RunnerBase::zero(colored(&name, Some("yellow")), buf.device()),
        }
    }
}

impl Runner for ViewOp {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, bufs: &[BufferRef], _var_vals: &VarVals, _wait: bool) -> Result<Option<f64>> {
        let ok = match bufs {
            [view, src, ..] => view.is_view() && view.base() == src.base(),
            _ => false,
        };
        ensure!(
            ok,
            Runtime,
            "view: must be a view of the base, got {bufs:?}"
        );
        Ok(None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `LoadOps.EMPTY`: nothing to do (the buffer is allocated by the item).
pub struct EmptyOp {
    base: RunnerBase,
}

impl EmptyOp {
    pub fn new(buf: &BufferRef) -> EmptyOp {
        let name = format!("empty {:10} {}", buf.size(), buf.dtype());
        EmptyOp {
            base: RunnerBase::zero(colored(&name, Some("yellow")), buf.device()),
        }
    }
}

impl Runner for EmptyOp {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, _bufs: &[BufferRef], _var_vals: &VarVals, _wait: bool) -> Result<Option<f64>> {
        Ok(None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `LoadOps.CUSTOM`: a host function from the input buffers' bytes to the output's (copies the
/// inputs out, runs, copies the output in). Its device is `CUSTOM` and it is never timed, as in
/// tinygrad.
pub struct CustomOp {
    base: RunnerBase,
    op: CustomFnOp,
}

impl CustomOp {
    pub fn new(op: CustomFnOp) -> CustomOp {
        CustomOp {
            base: RunnerBase::zero(op.name.clone(), "CUSTOM"),
            op,
        }
    }
}

impl Runner for CustomOp {
    fn base(&self) -> &RunnerBase {
        &self.base
    }

    fn exec(&self, bufs: &[BufferRef], _var_vals: &VarVals, _wait: bool) -> Result<Option<f64>> {
        let Some((out, ins)) = bufs.split_first() else {
            return Err(Error::Runtime(format!(
                "custom op {}: no output buffer",
                self.op.name
            )));
        };
        let inputs = ins
            .iter()
            .map(|b| b.as_bytes())
            .collect::<Result<Vec<Vec<u8>>>>()?;
        let views: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut bytes = vec![0u8; out.nbytes()];
        (self.op.f)(&mut bytes, &views)
            .map_err(|e| Error::Runtime(format!("custom op {}: {}", self.op.name, e.message())))?;
        out.copyin(&bytes)?;
        // Like tinygrad, a host function is not timed.
        Ok(None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
