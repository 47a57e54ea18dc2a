//! The Kernel: a kernel AST plus the shape state the optimizer edits (tinygrad 0.9.1
//! `codegen/kernel.py`).
//!
//! Owns: construction from the STORE roots (`verify_lazyop`, the reduce ops inner first, the
//! buffer list outputs-first, the early buffers, one ShapeTracker per buffer permuted so reduce
//! dims come last, then `simplify_ones` and `simplify_merge_adjacent`), the derived quantities
//! (`full_shape`, `first_reduce`, `global_dims`, ...), the axis colors, `shift_to`, and the opt
//! state (`applied_opts`, `upcasted`, `local_dims`, `group_for_reduces`, `dont_use_locals`).
//! The opt actions live in `kernel/opts.rs`; lowering to UOps in `linearizer.rs`.
//!
//! The hand-coded heuristics live in `kernel/heuristics.rs`, tensor-core matching in
//! `kernel/tensor_cores.rs`.
//!
//! Not guaranteed: image dtypes do not exist (so image-only opts never apply).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::codegen::renderer::{RendererOpts, TensorCore};
use crate::codegen::uops::UOp;
use crate::dtype::DType;
use crate::helpers::to_function_name;
use crate::ops::{verify_lazyop, BufferOps, ConstBuffer, LazyOp, MemBuffer, Op};
use crate::shape::symbolic::py_gt;
use crate::shape::{strides_for_shape, Node, ShapeTracker, Sint};
use crate::{bail, ensure, Error, Result};

pub mod cpu_conv;
pub mod cpu_reduce;
pub mod cpu_tile;
mod heuristics;
pub mod opts;
mod st_memo;
mod tensor_cores;
#[cfg(test)]
mod tests;

pub use opts::{Opt, OptOps};
pub use tensor_cores::TensorCoreOptions;

/// A workgroup-local buffer the linearizer adds (the `temp` of a grouped reduce).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocalBuffer {
    pub name: String,
    pub size: usize,
    pub dtype: DType,
}

/// One entry of the kernel's buffer list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KernelBuf {
    Mem(MemBuffer),
    Const(ConstBuffer),
    Local(LocalBuffer),
}

impl KernelBuf {
    pub fn dtype(&self) -> DType {
        match self {
            KernelBuf::Mem(m) => m.dtype,
            KernelBuf::Const(c) => c.dtype,
            KernelBuf::Local(l) => l.dtype,
        }
    }

    /// The buffer of a LOAD/CONST/STORE node.
    pub fn of(op: &LazyOp) -> Option<KernelBuf> {
        if let Some(m) = op.membuffer() {
            return Some(KernelBuf::Mem(m.clone()));
        }
        op.constbuffer().map(|c| KernelBuf::Const(c.clone()))
    }
}

/// A new shape computed from an old one (`reshape_and_permute`).
pub(crate) type ShapeFn = dyn Fn(&[Sint]) -> Result<Vec<Sint>>;

/// What `linearize` produced (kept until the applied opts change).
#[derive(Clone, Debug)]
pub struct Linearized {
    /// The kernel name (`r_16_16`, `E2_4`, `E_4n1`), uncolored.
    pub name: String,
    /// The linear, verified UOp list.
    pub uops: Vec<UOp>,
    /// Launch sizes (padded to the renderer's axes); `None` when the renderer has no locals
    /// (every dim is a loop).
    pub global_size: Option<Vec<Sint>>,
    pub local_size: Option<Vec<Sint>>,
    /// The opts this result was linearized with.
    pub applied_opts: Vec<Opt>,
}

/// tinygrad's `Kernel` (with the `Linearizer` entry points added in `linearizer.rs`).
#[derive(Clone, Debug)]
pub struct Kernel {
    pub opts: RendererOpts,
    pub ast: Vec<LazyOp>,
    /// Every node of every root (pre-order, deduplicated per root).
    pub lazyops: Vec<LazyOp>,
    /// Distinct reduce nodes, inner first.
    pub reduceops: Vec<LazyOp>,
    pub outbufs: Vec<MemBuffer>,
    /// Symbolic variables of the AST.
    pub vars: Vec<Node>,
    /// Outputs first, then distinct LOAD/CONST args in traversal order (then locals).
    pub bufs: Vec<KernelBuf>,
    /// Buffers read under a reduce.
    pub earlybufs: Vec<KernelBuf>,
    /// Index of the first early buffer (its ST has the full shape), 0 without a reduce.
    pub full_buf_index: usize,
    /// One ShapeTracker per buffer, edited by the opts.
    pub sts: Vec<ShapeTracker>,
    pub applied_opts: Vec<Opt>,
    pub group_for_reduces: usize,
    pub upcasted: usize,
    pub local_dims: usize,
    pub dont_use_locals: bool,
    /// The tensor core the kernel uses (set by the TC opt unless `TC=2`).
    pub tensor_core: Option<TensorCore>,
    /// The N, M, K axes of the matched tensor core (kept up to date as dims vanish).
    pub tensor_core_opts: Option<TensorCoreOptions>,
    /// Per reduce op, the two buffers the tensor core multiplies.
    pub bufs_for_tensor_core: Vec<(LazyOp, (usize, usize))>,
    /// Group unit-stride upcast dims of 8 or 16 lanes into vectors too (set by the CPU tile,
    /// `cpu_tile.rs`; 0.9.1 groups only 2 or 4).
    pub wide_vectors: bool,
    pub(crate) linearized: Option<Linearized>,
    /// Real strides and masked axes per tracker (`kernel/st_memo.rs`), shared with clones.
    st_memo: st_memo::StMemo,
}

/// How many kernels of each function name were linearized (tinygrad's `Linearizer.kernel_cnt`).
fn kernel_cnt() -> &'static Mutex<HashMap<String, usize>> {
    static CNT: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    CNT.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Register one more kernel named `name` and return its unique form (`E_4_4`, then `E_4_4n1`...).
pub(crate) fn dedup_kernel_name(name: &str) -> String {
    let fname = to_function_name(name);
    let mut map = match kernel_cnt().lock() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    let c = map.entry(fname).or_insert(0);
    *c += 1;
    if *c > 1 {
        format!("{name}n{}", *c - 1)
    } else {
        name.to_string()
    }
}

/// Post-order, deduplicated by structure (children before parents). Each node is visited once
/// (by identity), so shared subgraphs cost linear time.
fn ordered_lazyops(op: &LazyOp, out: &mut Vec<LazyOp>) {
    fn walk(
        op: &LazyOp,
        seen: &mut HashSet<usize>,
        have: &mut HashSet<LazyOp>,
        out: &mut Vec<LazyOp>,
    ) {
        if !seen.insert(op.id()) {
            return;
        }
        for s in op.src() {
            walk(s, seen, have, out);
        }
        if have.insert(op.clone()) {
            out.push(op.clone());
        }
    }
    let mut have: HashSet<LazyOp> = out.iter().cloned().collect();
    walk(op, &mut HashSet::new(), &mut have, out);
}

/// The distinct reduce nodes of all roots, inner first.
fn collect_reduceops(ast: &[LazyOp]) -> Vec<LazyOp> {
    let mut reduceops: Vec<LazyOp> = Vec::new();
    for out in ast {
        let mut ordered = Vec::new();
        ordered_lazyops(out, &mut ordered);
        for x in ordered {
            if matches!(x.op(), Op::Reduce(_)) && !reduceops.contains(&x) {
                reduceops.push(x);
            }
        }
    }
    reduceops
}

/// The outputs, then the distinct LOAD/CONST args in traversal order.
fn collect_bufs(outbufs: &[MemBuffer], lazyops: &[LazyOp]) -> Vec<KernelBuf> {
    let mut bufs: Vec<KernelBuf> = outbufs.iter().cloned().map(KernelBuf::Mem).collect();
    for x in lazyops {
        if matches!(x.op(), Op::Buffer(BufferOps::LOAD | BufferOps::CONST)) {
            if let Some(b) = KernelBuf::of(x) {
                if !bufs[outbufs.len()..].contains(&b) {
                    bufs.push(b);
                }
            }
        }
    }
    bufs
}

fn is_buffer_op(op: &LazyOp) -> bool {
    matches!(op.op(), Op::Buffer(_))
}

impl Kernel {
    /// Build a kernel from its STORE roots for a renderer with capabilities `opts`.
    pub fn new(ast: &[LazyOp], opts: &RendererOpts) -> Result<Kernel> {
        verify_lazyop(ast)?;
        let lazyops: Vec<LazyOp> = ast.iter().flat_map(|x| x.lazyops()).collect();
        let reduceops = collect_reduceops(ast);
        let outbufs = ast
            .iter()
            .map(|x| x.membuffer().cloned())
            .collect::<Option<Vec<MemBuffer>>>()
            .ok_or_else(|| Error::Codegen("Kernel: a root is not a STORE".into()))?;
        let mut vars: Vec<Node> = Vec::new();
        for v in ast.iter().flat_map(|x| x.vars()) {
            if !vars.contains(&v) {
                vars.push(v);
            }
        }
        let bufs = collect_bufs(&outbufs, &lazyops);
        let earlybufs: Vec<KernelBuf> = reduceops
            .iter()
            .flat_map(|r| r.lazyops())
            .filter(is_buffer_op)
            .filter_map(|x| KernelBuf::of(&x))
            .collect();
        let full_buf_index = match earlybufs.first() {
            Some(e) => bufs.iter().position(|b| b == e).ok_or_else(|| {
                Error::Internal("Kernel: an early buffer is not in the buffer list".into())
            })?,
            None => 0,
        };
        let sts = bufs
            .iter()
            .map(|b| match b {
                KernelBuf::Mem(m) => Ok(m.st.clone()),
                KernelBuf::Const(c) => Ok(c.st.clone()),
                KernelBuf::Local(_) => {
                    Err(Error::Internal("Kernel: a local buffer in the AST".into()))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let mut k = Kernel {
            opts: opts.clone(),
            ast: ast.to_vec(),
            lazyops,
            reduceops,
            outbufs,
            vars,
            bufs,
            earlybufs,
            full_buf_index,
            sts,
            applied_opts: vec![],
            group_for_reduces: 0,
            upcasted: 0,
            local_dims: 0,
            dont_use_locals: false,
            tensor_core: None,
            tensor_core_opts: None,
            bufs_for_tensor_core: vec![],
            wide_vectors: false,
            linearized: None,
            st_memo: st_memo::StMemo::default(),
        };
        k.permute_reduce_last()?;
        k.simplify_ones()?;
        k.simplify_merge_adjacent()?;
        Ok(k)
    }

    /// Move every dim where the output differs from the full shape (the reduced dims) to the end.
    fn permute_reduce_last(&mut self) -> Result<()> {
        let (full, out) = (self.full_shape().to_vec(), self.output_shape().to_vec());
        ensure!(
            full.len() == out.len(),
            Codegen,
            "Kernel: output shape {out:?} and full shape {full:?} have different lengths"
        );
        let same = (0..full.len()).filter(|&i| full[i] == out[i]);
        let diff = (0..full.len()).filter(|&i| full[i] != out[i]);
        let permute: Vec<usize> = same.chain(diff).collect();
        self.reshape_and_permute(None, Some(&permute))
    }

    // ******************** derived quantities ********************

    /// Shape of the output buffer's ShapeTracker.
    pub fn output_shape(&self) -> &[Sint] {
        self.sts.first().map(|s| s.shape()).unwrap_or(&[])
    }

    /// Shape of the first early buffer's ShapeTracker (the iteration space).
    pub fn full_shape(&self) -> &[Sint] {
        self.sts
            .get(self.full_buf_index)
            .map(|s| s.shape())
            .unwrap_or(&[])
    }

    pub fn shape_len(&self) -> usize {
        self.output_shape().len()
    }

    /// The full shape without the upcasted dims.
    pub fn full_unupcasted_shape(&self) -> &[Sint] {
        let full = self.full_shape();
        &full[..self
            .shape_len()
            .saturating_sub(self.upcasted)
            .min(full.len())]
    }

    /// The first reduce op (inner first), if any.
    pub fn reduceop(&self) -> Option<&LazyOp> {
        self.reduceops.first()
    }

    /// The first non-upcasted dim where the output and full shapes differ.
    pub fn first_reduce(&self) -> usize {
        let n = self.shape_len().saturating_sub(self.upcasted);
        let (out, full) = (self.output_shape(), self.full_shape());
        (0..n).find(|&i| out.get(i) != full.get(i)).unwrap_or(n)
    }

    pub fn global_dims(&self) -> usize {
        self.first_reduce().saturating_sub(self.local_dims)
    }

    /// Group dims that are not reduced (only UPCASTMID makes them).
    pub fn upcast_in_mid_reduce_axes(&self) -> Vec<usize> {
        let fr = self.first_reduce();
        let (full, out) = (self.full_shape(), self.output_shape());
        (fr..fr + self.group_for_reduces)
            .filter(|&j| full.get(j) == out.get(j))
            .collect()
    }

    /// The axis colors, left to right: global (blue, or BLUE without locals) | local (cyan) |
    /// grouped reduce (green, or white when upcast mid reduce) | reduce loops (red) | upcasted:
    /// reduce (magenta) or output (yellow).
    pub fn colors(&self) -> Vec<&'static str> {
        let fr = self.first_reduce();
        let global = if self.dont_use_locals { "BLUE" } else { "blue" };
        let mut c = vec![global; self.global_dims()];
        c.extend(std::iter::repeat("cyan").take(self.local_dims));
        let mid = self.upcast_in_mid_reduce_axes();
        for i in fr..fr + self.group_for_reduces {
            c.push(if mid.contains(&i) { "white" } else { "green" });
        }
        let unup = self.shape_len().saturating_sub(self.upcasted);
        c.extend(std::iter::repeat("red").take(unup.saturating_sub(fr + self.group_for_reduces)));
        let (full, out) = (self.full_shape(), self.output_shape());
        for i in unup..self.shape_len() {
            c.push(if full.get(i) != out.get(i) {
                "magenta"
            } else {
                "yellow"
            });
        }
        c
    }

    /// tinygrad's `colored_shape(pad, dense)`: each dim of `full_shape` in its axis color, joined
    /// by spaces (ints right-aligned to 4 characters unless `dense`), padded with spaces to `pad`
    /// visible characters.
    pub fn colored_shape(&self, pad: Option<usize>, dense: bool) -> String {
        let dims: Vec<String> = (self.full_shape().iter().zip(self.colors()))
            .map(|(s, c)| {
                let text = match s.as_int() {
                    Some(v) if !dense => format!("{v:4}"),
                    _ => format!("{s:?}"),
                };
                crate::helpers::colored(&text, Some(c))
            })
            .collect();
        let mut ret = dims.join(" ");
        if let Some(pad) = pad {
            let n = crate::helpers::ansilen(&ret);
            ret.push_str(&" ".repeat(pad.saturating_sub(n)));
        }
        ret
    }

    /// The name before deduplication: "r" (has a reduce), "C" (buffer ops only) or "E", the
    /// output count when more than one, then the full shape joined by "_".
    pub fn base_name(&self) -> String {
        let kind = if self.reduceop().is_some() {
            "r"
        } else if self.lazyops.iter().all(is_buffer_op) {
            "C"
        } else {
            "E"
        };
        let count = if self.outbufs.len() > 1 {
            format!("{}_", self.outbufs.len())
        } else {
            "_".to_string()
        };
        let dims: Vec<String> = self.full_shape().iter().map(|s| format!("{s:?}")).collect();
        format!("{kind}{count}{}", dims.join("_"))
    }

    /// The name and launch sizes of the last `linearize`, if it ran.
    pub fn linearized(&self) -> Option<&Linearized> {
        self.linearized.as_ref()
    }

    // ******************** upcast bookkeeping ********************

    /// Per upcasted dim of buffer `i`: (size, real stride, is a reduce dim).
    pub fn upcasted_axis(&self, i: usize) -> Result<Vec<(i64, Option<Sint>, bool)>> {
        let st = self.st(i)?;
        let start = self.shape_len().saturating_sub(self.upcasted);
        let strides = self.real_strides(i)?;
        let (out, full) = (self.output_shape(), self.full_shape());
        let mut ret = Vec::with_capacity(self.upcasted);
        for d in start..self.shape_len() {
            let Some(size) = st.shape().get(d).and_then(Node::as_int) else {
                bail!(
                    Codegen,
                    "cannot upcast a symbolic amount {:?}",
                    &st.shape()[start.min(st.shape().len())..]
                );
            };
            let stride = strides.get(d).cloned().flatten();
            ret.push((size, stride, out.get(d) != full.get(d)));
        }
        Ok(ret)
    }

    /// For every upcast combination of buffer `i` (first upcast dim fastest), the index of the
    /// accumulator it adds into (reduce dims share one).
    pub fn acc_offsets(&self, i: usize) -> Result<Vec<usize>> {
        if self.upcasted == 0 {
            return Ok(vec![0]);
        }
        let mut up = self.upcasted_axis(i)?;
        up.reverse();
        let shape: Vec<Sint> = up
            .iter()
            .map(|&(s, _, r)| Node::Num(if r { 1 } else { s }))
            .collect();
        let strides = strides_for_shape(&shape)?;
        let acc_strides: Vec<i64> = strides
            .iter()
            .zip(&up)
            .map(|(st, &(_, _, r))| if r { 0 } else { st.as_int().unwrap_or(0) })
            .collect();
        // itertools.product over the reversed dims: the last of them (the first upcast dim)
        // varies fastest.
        let mut out = vec![0i64];
        for (d, &(size, _, _)) in up.iter().enumerate() {
            let mut next = Vec::with_capacity(out.len() * size.max(1) as usize);
            for &base in &out {
                for y in 0..size {
                    next.push(base + y * acc_strides[d]);
                }
            }
            out = next;
        }
        out.into_iter()
            .map(|v| usize::try_from(v).map_err(|_| Error::Internal("negative acc offset".into())))
            .collect()
    }

    /// The upcasted dims of buffer `i` with unit stride, when the renderer groups float4 and the
    /// buffer is float or half.
    pub fn get_float4_upcast_dim(&self, i: usize) -> Result<Vec<usize>> {
        let dt = self.buf(i)?.dtype();
        let should = self.opts.supports_float4
            && (dt == crate::dtype::dtypes::float32 || dt == crate::dtype::dtypes::float16);
        if !should {
            return Ok(vec![]);
        }
        let st = self.st(i)?;
        let start = self.shape_len().saturating_sub(self.upcasted);
        let mut out = vec![];
        for x in self.unit_stride_axes(i)? {
            if x >= start
                && st
                    .shape()
                    .get(x)
                    .is_some_and(|s| py_gt(s, &Node::Num(1)).unwrap_or(false))
            {
                out.push(x);
            }
        }
        Ok(out)
    }

    /// `real_strides(false)` of buffer `i`'s tracker, memoized per tracker.
    pub fn real_strides(&self, i: usize) -> Result<Vec<Option<Sint>>> {
        self.st_memo.real_strides(self.st(i)?)
    }

    /// The dims of buffer `i`'s tracker with real stride 1 (`unit_stride_axes(false)`), memoized.
    pub fn unit_stride_axes(&self, i: usize) -> Result<Vec<usize>> {
        Ok(crate::shape::shapetracker::unit_stride_dims(
            &self.real_strides(i)?,
        ))
    }

    /// Whether `idx{axis}` appears in the validity of buffer `i`'s tracker, memoized.
    pub fn axis_is_masked(&self, i: usize, axis: usize) -> Result<bool> {
        self.st_memo.axis_is_masked(self.st(i)?, axis)
    }

    pub(crate) fn st(&self, i: usize) -> Result<&ShapeTracker> {
        self.sts.get(i).ok_or_else(|| {
            Error::Internal(format!("Kernel: no ShapeTracker {i} of {}", self.sts.len()))
        })
    }

    pub(crate) fn buf(&self, i: usize) -> Result<&KernelBuf> {
        self.bufs
            .get(i)
            .ok_or_else(|| Error::Internal(format!("Kernel: no buffer {i} of {}", self.bufs.len())))
    }

    // ******************** base simplifiers ********************

    /// Reshape (with `new_shape` of each ST's shape) and then permute every ShapeTracker.
    pub(crate) fn reshape_and_permute(
        &mut self,
        new_shape: Option<&ShapeFn>,
        axis: Option<&[usize]>,
    ) -> Result<()> {
        let mut new_sts = Vec::with_capacity(self.sts.len());
        for st in &self.sts {
            let mut st = st.clone();
            if let Some(f) = new_shape {
                st = st.reshape(&f(st.shape())?)?;
            }
            if let Some(a) = axis {
                st = st.permute(a)?;
            }
            new_sts.push(st);
        }
        self.sts = new_sts;
        Ok(())
    }

    /// Count the last dim as upcasted.
    pub(crate) fn upcast(&mut self) -> Result<()> {
        if self.full_shape().last() == Some(&Node::Num(1)) {
            return Err(Error::KernelOpt(
                "can't upcast a dimension with size 1".into(),
            ));
        }
        self.upcasted += 1;
        Ok(())
    }

    /// Split `axis` into (size/amount, amount) (or (amount, size/amount) with `top`) in every
    /// ShapeTracker and move the `amount` part to just before `insert_before` (default: the end).
    pub fn shift_to(
        &mut self,
        axis: usize,
        amount: i64,
        top: bool,
        insert_before: Option<usize>,
    ) -> Result<()> {
        let shape_len = self.shape_len();
        ensure!(
            axis < shape_len && amount > 0,
            Codegen,
            "shift_to: axis {axis} / amount {amount} invalid for {shape_len} dims"
        );
        let mut insert_before = insert_before.unwrap_or(shape_len);
        let move_axis = if top { axis } else { axis + 1 };
        if move_axis < insert_before {
            insert_before += 1;
        }
        let perm: Vec<usize> = (0..insert_before)
            .filter(|&i| i != move_axis)
            .chain([move_axis])
            .chain((insert_before..shape_len + 1).filter(|&i| i != move_axis))
            .collect();
        let amt = Node::Num(amount);
        let split = move |x: &[Sint]| -> Result<Vec<Sint>> {
            let mut new = x[..axis].to_vec();
            if py_gt(&x[axis], &Node::Num(1))? {
                let rest = x[axis].floordiv(&amt)?;
                if top {
                    new.extend([amt.clone(), rest]);
                } else {
                    new.extend([rest, amt.clone()]);
                }
            } else {
                new.extend([Node::Num(1), Node::Num(1)]);
            }
            new.extend_from_slice(&x[axis + 1..]);
            Ok(new)
        };
        self.reshape_and_permute(Some(&split), Some(&perm))
    }

    /// Drop dims that are 1 in the full shape (adjusting the local and upcast counts); returns
    /// whether any was dropped.
    pub fn simplify_ones(&mut self) -> Result<bool> {
        if self.shape_len() == 0 {
            return Ok(false);
        }
        let all_ones: Vec<bool> = self.full_shape().iter().map(|s| *s == 1).collect();
        let fr = self.first_reduce();
        let local_ones = all_ones[fr - self.local_dims.min(fr)..fr]
            .iter()
            .filter(|&&b| b)
            .count();
        let n = all_ones.len();
        let up_ones = all_ones[n - self.upcasted.min(n)..]
            .iter()
            .filter(|&&b| b)
            .count();
        self.local_dims = self.local_dims.checked_sub(local_ones).ok_or_else(|| {
            Error::Internal("simplify_ones: more local ones than local dims".into())
        })?;
        self.upcasted -= up_ones;
        let keep = move |shape: &[Sint]| -> Result<Vec<Sint>> {
            Ok(shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !all_ones.get(*i).copied().unwrap_or(false))
                .map(|(_, x)| x.clone())
                .collect())
        };
        let any = self.full_shape().iter().any(|s| *s == 1);
        self.reshape_and_permute(Some(&keep), None)?;
        Ok(any)
    }

    /// Merge dim i into dim i-1 where every ShapeTracker allows it (known real strides that
    /// chain, or both zero), never across `first_reduce`.
    pub fn simplify_merge_adjacent(&mut self) -> Result<()> {
        if self.shape_len() == 0 {
            return Ok(());
        }
        let shapes: Vec<Vec<Sint>> = self.sts.iter().map(|s| s.shape().to_vec()).collect();
        let strides: Vec<Vec<Option<Sint>>> = (0..self.sts.len())
            .map(|i| self.real_strides(i))
            .collect::<Result<_>>()?;
        let fr = self.first_reduce();
        let mut rets: Vec<Vec<(Sint, Option<Sint>)>> = shapes
            .iter()
            .zip(&strides)
            .map(|(s, st)| vec![(s[0].clone(), st[0].clone())])
            .collect();
        for i in 1..shapes[0].len() {
            let mut mergeable = i != fr;
            for ((s, st), ret) in shapes.iter().zip(&strides).zip(&rets) {
                let last_st = ret.last().and_then(|r| r.1.clone());
                let ok = match &st[i] {
                    None => false,
                    Some(sti) if *sti != 0 => last_st == Some(s[i].try_mul(sti)?),
                    Some(_) => last_st == Some(Node::Num(0)),
                };
                mergeable &= ok;
            }
            for (j, (s, st)) in shapes.iter().zip(&strides).enumerate() {
                let r = &mut rets[j];
                if mergeable {
                    if let Some(last) = r.last_mut() {
                        *last = (last.0.try_mul(&s[i])?, st[i].clone());
                    }
                } else {
                    r.push((s[i].clone(), st[i].clone()));
                }
            }
        }
        for (st, r) in self.sts.iter_mut().zip(&rets) {
            let shape: Vec<Sint> = r.iter().map(|x| x.0.clone()).collect();
            *st = st.reshape(&shape)?;
        }
        Ok(())
    }
}
