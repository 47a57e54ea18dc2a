//! The JIT (tinygrad 0.9.1 `engine/jit.py`): [`TinyJit`] wraps a function over tensors and bound
//! variables. Call 1 runs it normally; call 2 runs it again while capturing every [`ExecItem`]
//! the realize engine executes, plans the captured intermediates' memory and batches the kernels
//! into device graphs (`jit/batch.rs`); calls 3+ replay the captured items with the new inputs
//! swapped in by position.
//!
//! Rules, as tinygrad's: inputs are the tensor arguments (positional in order, then keyword
//! arguments sorted by name), realized before the call; two inputs on one buffer are an error;
//! an input's signature is (unbound ShapeTracker, sorted variable names, dtype, device), and a
//! replay whose names or signatures differ from the capture is an error naming the input and both
//! values; bound variables (arguments or in input shapes) pass their values to every replay;
//! buffers the captured items read that are views of an input are rebuilt over the new input.
//! `JIT=0` never captures; `JIT=2` captures without graphs; `CAPTURING=0` hides work from the
//! capture; a TinyJit inside another one's first two calls is an error.
//!
//! Replays first compare the inputs cheaply (beyond 0.9.1, same outcomes): while the capture's
//! signatures have no variables and the inputs are positional, a realized input whose tracker,
//! dtype and device equal the capture's matches without unbinding or formatting anything; any
//! other call takes the full check above, with its errors.
//!
//! Not guaranteed: the value a replay returns is the one the capturing call returned (its tensors
//! live in the captured buffers, which every replay overwrites, as in tinygrad); non-tensor parts
//! of it are not recomputed. Buffers created by the function that the caller holds (weights it
//! closes over) are kept, not planned: they are never handed to another item.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::device::{Buffer, BufferRef, GraphBuild};
use crate::dtype::DType;
use crate::engine::memory::internal_memory_planner;
use crate::engine::realize::{CaptureGuard, ExecItem, RunOptions};
use crate::helpers::{debug, Knob};
use crate::shape::{Node, ShapeTracker, VarVals};
use crate::{bail, ensure, Error, Result, Tensor};

mod batch;

pub use batch::{apply_graph_to_jit, get_input_replace, graph_items, graph_runner, GraphRunner};

/// The name of an argument: its position, or its keyword.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgName {
    Pos(usize),
    Key(String),
}

impl fmt::Display for ArgName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgName::Pos(i) => write!(f, "{i}"),
            ArgName::Key(k) => write!(f, "{k:?}"),
        }
    }
}

/// One argument of a jitted function.
#[derive(Clone, Debug)]
pub enum JitArg {
    Tensor(Tensor),
    /// A bound variable (`Node::var(..).bind(v)`): its value passes through to every replay.
    Var(Node),
}

/// The arguments of one call: positional ones in order, keyword ones by name.
#[derive(Clone, Debug, Default)]
pub struct JitArgs {
    pos: Vec<JitArg>,
    kw: Vec<(String, JitArg)>,
}

impl JitArgs {
    pub fn new() -> JitArgs {
        JitArgs::default()
    }
    /// Add a positional tensor.
    pub fn tensor(mut self, t: &Tensor) -> JitArgs {
        self.pos.push(JitArg::Tensor(t.clone()));
        self
    }
    /// Add a positional bound variable.
    pub fn var(mut self, v: &Node) -> JitArgs {
        self.pos.push(JitArg::Var(v.clone()));
        self
    }
    /// Add (or replace) a keyword argument.
    pub fn kw(mut self, name: &str, arg: JitArg) -> JitArgs {
        self.kw.retain(|(k, _)| k != name);
        self.kw.push((name.to_string(), arg));
        self
    }
    /// The positional tensor at `i`.
    pub fn t(&self, i: usize) -> Result<&Tensor> {
        match self.pos.get(i) {
            Some(JitArg::Tensor(t)) => Ok(t),
            other => bail!(
                InvalidArgument,
                "jit argument {i}: not a tensor ({other:?})"
            ),
        }
    }
    /// The positional bound variable at `i`.
    pub fn v(&self, i: usize) -> Result<&Node> {
        match self.pos.get(i) {
            Some(JitArg::Var(v)) => Ok(v),
            other => bail!(
                InvalidArgument,
                "jit argument {i}: not a variable ({other:?})"
            ),
        }
    }
    /// The keyword tensor `name`.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        match self.kw.iter().find(|(k, _)| k == name) {
            Some((_, JitArg::Tensor(t))) => Ok(t),
            other => bail!(
                InvalidArgument,
                "jit argument {name:?}: not a tensor ({other:?})"
            ),
        }
    }
    /// Every argument with its name: positional in order, then keywords sorted by name.
    fn ordered(&self) -> Vec<(ArgName, &JitArg)> {
        let mut kw: Vec<&(String, JitArg)> = self.kw.iter().collect();
        kw.sort_by(|a, b| a.0.cmp(&b.0));
        let pos = self
            .pos
            .iter()
            .enumerate()
            .map(|(i, a)| (ArgName::Pos(i), a));
        pos.chain(kw.into_iter().map(|(k, a)| (ArgName::Key(k.clone()), a)))
            .collect()
    }
}

impl From<&[Tensor]> for JitArgs {
    fn from(ts: &[Tensor]) -> JitArgs {
        ts.iter().fold(JitArgs::new(), |a, t| a.tensor(t))
    }
}

/// What a jitted function may return: the tensors in it are realized after each run.
pub trait JitReturn: Clone {
    fn tensors(&self) -> Vec<Tensor>;
}

impl JitReturn for Tensor {
    fn tensors(&self) -> Vec<Tensor> {
        vec![self.clone()]
    }
}
impl JitReturn for () {
    fn tensors(&self) -> Vec<Tensor> {
        vec![]
    }
}
impl<T: JitReturn> JitReturn for Vec<T> {
    fn tensors(&self) -> Vec<Tensor> {
        self.iter().flat_map(JitReturn::tensors).collect()
    }
}
impl<T: JitReturn> JitReturn for Option<T> {
    fn tensors(&self) -> Vec<Tensor> {
        self.iter().flat_map(JitReturn::tensors).collect()
    }
}
impl<A: JitReturn, B: JitReturn> JitReturn for (A, B) {
    fn tensors(&self) -> Vec<Tensor> {
        [self.0.tensors(), self.1.tensors()].concat()
    }
}
impl<A: JitReturn, B: JitReturn, C: JitReturn> JitReturn for (A, B, C) {
    fn tensors(&self) -> Vec<Tensor> {
        [self.0.tensors(), self.1.tensors(), self.2.tensors()].concat()
    }
}

/// What a replay must match of each input (tinygrad's `(st, vars, dtype, device)`).
#[derive(Clone, Debug, PartialEq)]
struct InputSig {
    st: ShapeTracker,
    vars: Vec<String>,
    dtype: DType,
    device: String,
}

impl fmt::Display for InputSig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape: Vec<String> = self.st.shape().iter().map(|s| format!("{s:?}")).collect();
        write!(
            f,
            "shape ({}) {:?} vars {:?} dtype {:?} device {}",
            shape.join(", "),
            self.st,
            self.vars,
            self.dtype,
            self.device
        )
    }
}

/// A buffer the captured items read that is a view of an input: (input index, byte offset into
/// it, size, dtype).
type ViewInput = (usize, usize, usize, DType);

thread_local! {
    static IN_JIT: Cell<bool> = const { Cell::new(false) };
}

/// Sets `IN_JIT` while it lives.
struct InJit(bool);
impl InJit {
    fn enter() -> Result<InJit> {
        ensure!(
            !IN_JIT.with(Cell::get),
            Runtime,
            "having TinyJit inside another TinyJit is not supported"
        );
        Ok(InJit(IN_JIT.with(|f| f.replace(true))))
    }
}
impl Drop for InJit {
    fn drop(&mut self) {
        IN_JIT.with(|f| f.set(self.0));
    }
}

/// The inputs of one call.
struct Inputs {
    names: Vec<ArgName>,
    sigs: Vec<InputSig>,
    buffers: Vec<BufferRef>,
    var_vals: VarVals,
}

/// The wrapped function.
type JitFn<R> = Box<dyn FnMut(&JitArgs) -> Result<R>>;

/// `JIT` (read on every call).
static JIT: Knob = Knob::new("JIT", 1);

/// What a replay compares cheaply when every captured input signature is free of variables and
/// every input is positional: the tensors' positions (the capture's names) and, per input, the
/// tracker, dtype and device the capture saw (the tracker as is: without variables it is its own
/// unbound form). A call that differs in any of them, or whose inputs are unrealized or share a
/// buffer, takes the full check (`collect_inputs`), which realizes them or names the mismatch.
struct FastSigs {
    positions: Vec<usize>,
    sigs: Vec<(ShapeTracker, DType, String)>,
}

impl FastSigs {
    /// The fast form of a capture's names and signatures, where one applies.
    fn new(names: &[ArgName], sigs: &[InputSig]) -> Option<FastSigs> {
        let positions = names
            .iter()
            .map(|n| match n {
                ArgName::Pos(i) => Some(*i),
                ArgName::Key(_) => None,
            })
            .collect::<Option<Vec<usize>>>()?;
        let sigs = sigs
            .iter()
            .map(|s| {
                s.vars
                    .is_empty()
                    .then(|| (s.st.clone(), s.dtype, s.device.clone()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(FastSigs { positions, sigs })
    }

    /// The buffers (into `out`, emptied first) and variables of a call whose positional
    /// arguments are `pos` (and no keywords) that matches the capture exactly, else `None` (see
    /// the type's doc).
    fn inputs<'a>(
        &self,
        pos: impl Iterator<Item = ArgRef<'a>>,
        out: &mut Vec<BufferRef>,
    ) -> Result<Option<VarVals>> {
        out.clear();
        let mut var_vals = VarVals::new();
        let mut k = 0;
        for (i, a) in pos.enumerate() {
            let t = match a {
                ArgRef::Tensor(t) => t,
                ArgRef::Var(v) => match v.unbind()? {
                    (var, Some(val)) => {
                        var_vals.insert(var, val);
                        continue;
                    }
                    (_, None) => return Ok(None),
                },
            };
            let (Some(&want), Some((st, dtype, device))) =
                (self.positions.get(k), self.sigs.get(k))
            else {
                return Ok(None);
            };
            let lb = t.lazydata();
            let same = want == i && lb.st() == st && lb.dtype() == *dtype && lb.device() == device;
            let Some(b) = same.then(|| lb.realized_buffer()).flatten() else {
                return Ok(None);
            };
            if out.contains(&b) {
                return Ok(None);
            }
            out.push(b);
            k += 1;
        }
        Ok((k == self.positions.len()).then_some(var_vals))
    }
}

/// A positional argument, borrowed (from [`JitArgs`] or a slice of tensors).
#[derive(Clone, Copy)]
enum ArgRef<'a> {
    Tensor(&'a Tensor),
    Var(&'a Node),
}

impl<'a> From<&'a JitArg> for ArgRef<'a> {
    fn from(a: &'a JitArg) -> ArgRef<'a> {
        match a {
            JitArg::Tensor(t) => ArgRef::Tensor(t),
            JitArg::Var(v) => ArgRef::Var(v),
        }
    }
}

/// tinygrad's `TinyJit`: capture on the second call, replay from the third.
pub struct TinyJit<R: JitReturn> {
    fxn: JitFn<R>,
    jit_cache: Vec<ExecItem>,
    input_replace: Vec<((usize, usize), usize)>,
    extra_view_inputs: Vec<ViewInput>,
    expected: Option<(Vec<ArgName>, Vec<InputSig>)>,
    /// The capture's signatures in the form a replay compares cheaply, where one applies.
    fast: Option<FastSigs>,
    /// The input buffers of a replay (kept between replays: emptied, not freed).
    scratch: Vec<BufferRef>,
    /// The buffers of one item as a replay runs it (kept between replays: emptied, not freed).
    item_bufs: Vec<BufferRef>,
    ret: Option<R>,
    cnt: usize,
}

impl<R: JitReturn> TinyJit<R> {
    pub fn new(fxn: impl FnMut(&JitArgs) -> Result<R> + 'static) -> TinyJit<R> {
        TinyJit {
            fxn: Box::new(fxn),
            jit_cache: Vec::new(),
            input_replace: Vec::new(),
            extra_view_inputs: Vec::new(),
            expected: None,
            fast: None,
            scratch: Vec::new(),
            item_bufs: Vec::new(),
            ret: None,
            cnt: 0,
        }
    }

    /// Forget the capture: the next call runs normally again.
    pub fn reset(&mut self) {
        self.jit_cache.clear();
        self.input_replace.clear();
        self.extra_view_inputs.clear();
        self.expected = None;
        self.fast = None;
        self.ret = None;
        self.cnt = 0;
    }

    /// The captured items (graph runners stand for their batches; see [`graph_items`]).
    pub fn jit_cache(&self) -> &[ExecItem] {
        &self.jit_cache
    }

    /// Wait up to `timeout` (in all) for the graphs of the capture whose programs build in the
    /// background (the CPU batch graph, `runtime/cpu/graph.rs`): [`GraphBuild::Building`] if one
    /// still builds, else [`GraphBuild::Failed`] if one failed, else [`GraphBuild::Ready`].
    pub fn wait_graphs(&self, timeout: Duration) -> GraphBuild {
        let deadline = Instant::now() + timeout;
        let mut out = GraphBuild::Ready;
        for ji in &self.jit_cache {
            let Some(g) = graph_runner(&*ji.runner) else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match g.device_graph().wait_built(left) {
                GraphBuild::Ready => {}
                GraphBuild::Failed => out = GraphBuild::Failed,
                GraphBuild::Building => return GraphBuild::Building,
            }
        }
        out
    }

    /// How many times the jit was called.
    pub fn cnt(&self) -> usize {
        self.cnt
    }

    /// Call with tensors only.
    pub fn call_tensors(&mut self, ts: &[Tensor]) -> Result<R> {
        if JIT.get() != 0 && self.cnt >= 2 {
            if let Some(out) = self.fast_replay(ts.iter().map(ArgRef::Tensor))? {
                self.cnt += 1;
                return Ok(out);
            }
        }
        self.call(&JitArgs::from(ts))
    }

    /// Run, capture or replay (see the module doc).
    pub fn call(&mut self, args: &JitArgs) -> Result<R> {
        let jit = JIT.get();
        if jit != 0 && self.cnt >= 2 && args.kw.is_empty() {
            if let Some(out) = self.fast_replay(args.pos.iter().map(ArgRef::from))? {
                self.cnt += 1;
                return Ok(out);
            }
        }
        let inputs = collect_inputs(args)?;
        let out = if jit == 0 || self.cnt == 0 {
            let _in = InJit::enter()?;
            let ret = (self.fxn)(args)?;
            realize_all(&ret.tensors())?;
            ret
        } else if self.cnt == 1 {
            self.capture(args, inputs, jit)?
        } else {
            self.replay(&inputs)?
        };
        self.cnt += 1;
        Ok(out)
    }

    fn capture(&mut self, args: &JitArgs, inputs: Inputs, jit: i64) -> Result<R> {
        let sink = Rc::new(RefCell::new(Capture::default()));
        let ret = {
            let _in = InJit::enter()?;
            let s = Rc::clone(&sink);
            let _guard = CaptureGuard::new(Box::new(move |ei: &ExecItem| s.borrow_mut().add(ei)));
            let ret = (self.fxn)(args)?;
            realize_all(&ret.tensors())?;
            ret
        };
        let cap = std::mem::take(&mut *sink.borrow_mut());
        if let Some(e) = cap.err {
            return Err(e);
        }
        ensure!(!cap.items.is_empty(), Runtime, "didn't JIT anything!");
        let mut input_buffers = inputs.buffers;
        if debug() >= 1 {
            println!(
                "JIT captured {} kernels with {} inputs",
                cap.items.len(),
                input_buffers.len()
            );
        }
        self.extra_view_inputs = track_view_inputs(&cap.items, &mut input_buffers);
        let mut cache = plan_memory(cap.items)?;
        if jit < 2 {
            cache = apply_graph_to_jit(cache, &input_buffers, &inputs.var_vals)?;
        }
        self.input_replace = get_input_replace(&cache, &input_buffers);
        self.jit_cache = cache;
        self.fast = FastSigs::new(&inputs.names, &inputs.sigs);
        self.expected = Some((inputs.names, inputs.sigs));
        self.clear_inputs();
        self.ret = Some(ret.clone());
        Ok(ret)
    }

    /// A replay whose inputs match the capture exactly by the cheap comparison ([`FastSigs`]);
    /// `None` when the call needs the full check.
    fn fast_replay<'a>(&mut self, pos: impl Iterator<Item = ArgRef<'a>>) -> Result<Option<R>> {
        let Some(fast) = &self.fast else {
            return Ok(None);
        };
        let mut bufs = std::mem::take(&mut self.scratch);
        let out = match fast.inputs(pos, &mut bufs) {
            Ok(Some(var_vals)) => self.run_replay(&mut bufs, &var_vals).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        bufs.clear();
        self.scratch = bufs;
        out
    }

    fn replay(&mut self, inputs: &Inputs) -> Result<R> {
        let Some((names, sigs)) = &self.expected else {
            bail!(Internal, "TinyJit replay without a capture");
        };
        ensure!(
            *names == inputs.names,
            InvalidArgument,
            "args mismatch in JIT: the capture had arguments {names:?}, this call {:?}",
            inputs.names
        );
        for ((name, want), got) in names.iter().zip(sigs).zip(&inputs.sigs) {
            ensure!(
                want == got,
                InvalidArgument,
                "args mismatch in JIT: input {name} was {want} at capture, is {got} now"
            );
        }
        let mut bufs = std::mem::take(&mut self.scratch);
        bufs.clear();
        bufs.extend(inputs.buffers.iter().cloned());
        let out = self.run_replay(&mut bufs, &inputs.var_vals);
        bufs.clear();
        self.scratch = bufs;
        out
    }

    /// Run the captured items over `input_buffers` (the views over them appended here).
    fn run_replay(&mut self, input_buffers: &mut Vec<BufferRef>, var_vals: &VarVals) -> Result<R> {
        let Some(ret) = &self.ret else {
            bail!(Internal, "TinyJit replay without a capture");
        };
        let ret = ret.clone();
        for &(idx, offset, size, dtype) in &self.extra_view_inputs {
            let base = input_buffers.get(idx).ok_or_else(|| {
                Error::Internal(format!("JIT view input over missing input {idx}"))
            })?;
            let view = base.view(size, dtype, offset)?;
            view.ensure_allocated()?;
            input_buffers.push(view);
        }
        for &((j, i), k) in &self.input_replace {
            self.jit_cache[j].bufs[i] = Some(input_buffers[k].clone());
        }
        if debug() >= 1 && self.jit_cache.len() >= 10 {
            println!("jit execs {} kernels", self.jit_cache.len());
        }
        let opts = RunOptions {
            jit: true,
            ..RunOptions::default()
        };
        let mut item_bufs = std::mem::take(&mut self.item_bufs);
        let run = self
            .jit_cache
            .iter()
            .try_for_each(|ei| ei.run_reusing(var_vals, opts, &mut item_bufs).map(drop));
        self.item_bufs = item_bufs;
        self.clear_inputs();
        run?;
        Ok(ret)
    }

    /// Empty the input slots, so the caller's input buffers can be freed.
    fn clear_inputs(&mut self) {
        for &((j, i), _) in &self.input_replace {
            self.jit_cache[j].bufs[i] = None;
        }
    }
}

/// Realize `ts` (tinygrad's `Tensor.realize(*ts)`). Tensors whose base is realized schedule
/// nothing (the scheduler realizes bases that are not), so when all are, the schedule is skipped:
/// a replay's inputs usually are.
fn realize_all(ts: &[Tensor]) -> Result<()> {
    if ts.iter().all(|t| t.lazydata().is_realized()) {
        return Ok(());
    }
    if let Some((first, rest)) = ts.split_first() {
        let rest: Vec<&Tensor> = rest.iter().collect();
        first.realize_all(&rest)?;
    }
    Ok(())
}

/// Realize the tensor arguments and record their names, signatures, buffers and variables.
fn collect_inputs(args: &JitArgs) -> Result<Inputs> {
    let ordered = args.ordered();
    let tensors: Vec<(ArgName, &Tensor)> = ordered
        .iter()
        .filter_map(|(n, a)| match a {
            JitArg::Tensor(t) => Some((n.clone(), t)),
            JitArg::Var(_) => None,
        })
        .collect();
    let ts: Vec<Tensor> = tensors.iter().map(|(_, t)| (*t).clone()).collect();
    realize_all(&ts)?;
    let mut inputs = Inputs {
        names: Vec::new(),
        sigs: Vec::new(),
        buffers: Vec::new(),
        var_vals: VarVals::new(),
    };
    for (name, t) in tensors {
        let lb = t.lazydata();
        let (st, vv) = lb.st().unbind()?;
        let mut vars: Vec<String> = vv
            .keys()
            .filter_map(|v| v.expr().map(String::from))
            .collect();
        vars.sort();
        inputs.var_vals.extend(vv);
        if let Some(b) = lb.base().realized_buffer() {
            ensure!(
                !inputs.buffers.contains(&b),
                InvalidArgument,
                "duplicate inputs to JIT: input {name} uses the buffer of an earlier input"
            );
            inputs.buffers.push(b);
        }
        inputs.names.push(name);
        inputs.sigs.push(InputSig {
            st,
            vars,
            dtype: lb.dtype(),
            device: lb.device().to_string(),
        });
    }
    for (name, a) in ordered {
        if let JitArg::Var(v) = a {
            let (var, val) = v.unbind()?;
            let Some(val) = val else {
                bail!(
                    InvalidArgument,
                    "jit argument {name}: variable {var:?} is not bound"
                );
            };
            inputs.var_vals.insert(var, val);
        }
    }
    Ok(inputs)
}

/// What the capture collects: the items with their unallocated intermediates replaced by fresh
/// placeholders (tinygrad's `add_buffer`).
#[derive(Default)]
struct Capture {
    items: Vec<ExecItem>,
    replace: HashMap<BufferRef, BufferRef>,
    err: Option<Error>,
}

impl Capture {
    fn add(&mut self, ei: &ExecItem) {
        let mut bufs = Vec::with_capacity(ei.bufs.len());
        for b in ei.bufs.iter().flatten() {
            match self.add_buffer(b) {
                Ok(b) => bufs.push(Some(b)),
                Err(e) => {
                    self.err.get_or_insert(e);
                    return;
                }
            }
        }
        self.items.push(ExecItem {
            runner: ei.runner.clone(),
            bufs,
        });
    }

    fn add_buffer(&mut self, b: &BufferRef) -> Result<BufferRef> {
        if let Some(found) = self.replace.get(b) {
            return Ok(found.clone());
        }
        if b.is_allocated() || b.lb_refcount() > 0 {
            return Ok(b.clone());
        }
        let ret = if b.is_view() {
            let base = b.base();
            let new_base = self.replace.get(&base).cloned().unwrap_or(base);
            new_base.view(b.size(), b.dtype(), b.offset())?
        } else {
            Buffer::new(b.device(), b.size(), b.dtype(), *b.options())
        };
        self.replace.insert(b.clone(), ret.clone());
        Ok(ret)
    }
}

/// Buffers of the items that are views of an input become inputs too (appended to
/// `input_buffers`); returns how to rebuild them over new inputs.
fn track_view_inputs(items: &[ExecItem], input_buffers: &mut Vec<BufferRef>) -> Vec<ViewInput> {
    let mut extra = Vec::new();
    for b in items.iter().flat_map(|ei| ei.bufs.iter().flatten()) {
        if !b.is_view() || input_buffers.contains(b) {
            continue;
        }
        let base = b.base();
        if let Some(idx) = input_buffers.iter().position(|i| *i == base) {
            input_buffers.push(b.clone());
            extra.push((idx, b.offset(), b.size(), b.dtype()));
        }
    }
    extra
}

/// The memory planner over the captured items; every buffer allocated.
fn plan_memory(items: Vec<ExecItem>) -> Result<Vec<ExecItem>> {
    let lists: Vec<Vec<BufferRef>> = items
        .iter()
        .map(|ei| ei.bufs.iter().flatten().cloned().collect())
        .collect();
    let slices: Vec<&[BufferRef]> = lists.iter().map(Vec::as_slice).collect();
    let assigned = internal_memory_planner(&slices, "JIT ")?;
    items
        .into_iter()
        .map(|ei| {
            let mut bufs = Vec::with_capacity(ei.bufs.len());
            for b in ei.bufs.iter().flatten() {
                let b = assigned.get(b).cloned().unwrap_or_else(|| b.clone());
                b.ensure_allocated()?;
                bufs.push(Some(b));
            }
            Ok(ExecItem {
                runner: ei.runner,
                bufs,
            })
        })
        .collect()
}
