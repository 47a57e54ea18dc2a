//! The linearizer: a [`Kernel`] (AST plus applied opts) lowered to a linear UOp list (tinygrad
//! 0.9.1 `codegen/linearizer.py`, `Linearizer.linearize`).
//!
//! Owns: the DEFINE_GLOBAL per buffer, the local `temp` buffers of a grouped reduce, the kernel
//! name (with the process-wide dedup suffix), the index variables (SPECIAL launch indices when
//! the renderer has locals, RANGE loops otherwise), the per-reduce loops and accumulators
//! (`lower_reduce.rs`; on LLVM, one accumulator per unrolled lane of a MAX reduce,
//! `reduce_lanes.rs`), loads and stores (`memory.rs`), the ALU lowering of every LazyOp
//! (`ast_parse`), and the final `UOpGraph` pass (constant folder, toposort, `type_verify`).
//! Index helpers live in `linearizer/index.rs`.
//!
//! Tensor-core reduces lower to WMMA UOps (`linearizer/tensor_core.rs`).
//!
//! Not guaranteed: image buffers are not lowered.

use std::collections::HashMap;

use crate::codegen::kernel::{dedup_kernel_name, Kernel, KernelBuf, Linearized, LocalBuffer};
use crate::codegen::uopgraph;
use crate::codegen::uops::{Srcs, UOp};
use crate::ops::{LazyOp, Op, ReduceOps, UnaryOps};
use crate::shape::{Node, ShapeTracker, Sint};
use crate::{bail, Error, Result};

pub mod index;
mod lower_reduce;
mod memory;
mod reduce_lanes;
mod tensor_core;

pub use index::{expand_idxs, expand_node, get_grouped_dims, iter_idxs, render_node, GroupedDims};

/// The per-buffer results of loads (and accumulators), keyed by index into `bufs` / `reduceops`.
pub(crate) type Values = HashMap<usize, Vec<UOp>>;

/// The working state of one `linearize` run, on a copy of the kernel (the grouped reduce
/// appends buffers and ShapeTrackers that must not outlive the run).
pub(crate) struct Lin {
    pub(crate) k: Kernel,
    pub(crate) buf_uops: Vec<Option<UOp>>,
    pub(crate) loop_uops: HashMap<String, UOp>,
    pub(crate) load_cache: HashMap<memory::LoadKey, UOp, crate::helpers::FxBuild>,
    /// Lowered index nodes (`render_idx`), cleared whenever `loop_uops` changes.
    pub(crate) render_memo: index::RenderMemo,
    pub(crate) global_idxs: Vec<Node>,
    pub(crate) local_idxs: Vec<Node>,
    pub(crate) upcast_idxs: Vec<Node>,
    pub(crate) full_upcast_idxs: Vec<Node>,
}

impl Kernel {
    /// Lower the kernel with its applied opts to UOps (kept until the opts change).
    pub fn linearize(&mut self) -> Result<&Linearized> {
        self.linearize_with_name(None)
    }

    /// [`Kernel::linearize`] under the name `name`, leaving the process-wide name counter alone
    /// (BEAM's candidates: rendered under names of their own, never run by the engine).
    pub fn linearize_as(&mut self, name: &str) -> Result<&Linearized> {
        self.linearize_with_name(Some(name))
    }

    fn linearize_with_name(&mut self, name: Option<&str>) -> Result<&Linearized> {
        let fresh = self.linearized.as_ref().is_some_and(|l| {
            l.applied_opts == self.applied_opts && name.map_or(true, |n| n == l.name)
        });
        if !fresh {
            let name = match name {
                Some(n) => n.to_string(),
                None => dedup_kernel_name(&self.base_name()),
            };
            let out = Lin::new(self.clone()).run(name)?;
            self.linearized = Some(out);
        }
        self.linearized
            .as_ref()
            .ok_or_else(|| Error::Internal("linearize left no result".into()))
    }
}

/// `-2**(bits-1)` / 0 / -inf / False for MAX, 0 for SUM, as the reduce dtype's constant.
fn reduce_init(op: ReduceOps, dt: crate::dtype::DType) -> crate::dtype::ConstValue {
    use crate::dtype::ConstValue;
    match op {
        ReduceOps::SUM => {
            if dt.is_float() {
                ConstValue::Float(0.0)
            } else {
                ConstValue::Int(0)
            }
        }
        ReduceOps::MAX => dt.min(),
    }
}

impl Lin {
    fn new(k: Kernel) -> Lin {
        Lin {
            buf_uops: vec![None; k.bufs.len()],
            k,
            loop_uops: HashMap::new(),
            load_cache: HashMap::default(),
            render_memo: index::RenderMemo::default(),
            global_idxs: vec![],
            local_idxs: vec![],
            upcast_idxs: vec![],
            full_upcast_idxs: vec![],
        }
    }

    fn run(mut self, name: String) -> Result<Linearized> {
        self.define_buffers()?;
        let (global_size, local_size) = self.define_indexes()?;
        let aliases = self.index_local_aliases(&self.reduce_idxs()?)?;
        let mut loaded: Values = HashMap::new();
        let mut accs: Values = HashMap::new();
        for ri in 0..self.k.reduceops.len() {
            self.render_reduce_block(ri, &mut accs, &mut loaded, &aliases)?;
        }
        let stores = self.render_final_block(&accs, &mut loaded)?;
        let mut uops = uopgraph::linearize_for(&stores, self.k.opts.vector_alu, true)?;
        // beyond 0.9.1: a CPU tile's right-hand-side strip goes through a stack buffer
        let cpu = self.k.opts.vector_alu != crate::codegen::renderer::VectorAlu::None;
        if self.k.wide_vectors && cpu && !self.k.opts.has_local {
            uops = uopgraph::stage_strips(uops)?;
            uopgraph::type_verify(&uops)?;
        }
        if crate::helpers::debug() >= 5 {
            println!("{}", crate::codegen::uop_serial::print_uops(&uops));
        }
        if crate::helpers::getenv("GRAPHUOPS", 0) != 0 {
            crate::codegen::graph::graph_uops(&uops)?;
        }
        Ok(Linearized {
            name,
            uops,
            global_size,
            local_size,
            applied_opts: self.k.applied_opts.clone(),
        })
    }

    /// DEFINE_GLOBAL per memory buffer; with grouping, one local `temp` per reduce.
    fn define_buffers(&mut self) -> Result<()> {
        for (i, b) in self.k.bufs.iter().enumerate() {
            if let KernelBuf::Mem(m) = b {
                let is_output = self.k.outbufs.iter().any(|o| o.idx == m.idx);
                self.buf_uops[i] = Some(UOp::define_global(m.dtype, m.idx, is_output));
            }
        }
        if self.k.group_for_reduces == 0 {
            return Ok(());
        }
        let k = &self.k;
        let (gd, ld, gfr, fr) = (
            k.global_dims(),
            k.local_dims,
            k.group_for_reduces,
            k.first_reduce(),
        );
        let mut shape: Vec<Sint> = vec![Node::Num(1); gd];
        shape.extend_from_slice(&k.full_shape()[gd..gd + ld + gfr]);
        let ones = k.shape_len() - k.upcasted - gfr - fr;
        shape.extend(std::iter::repeat(Node::Num(1)).take(ones));
        shape.extend(k.upcasted_axis(0)?.iter().map(|x| Node::Num(x.0)));
        let n = k.reduceops.len();
        for i in 0..n {
            // tinygrad gives every temp the first reduce's dtype (wrong for mixed dtypes)
            let dtype = self.k.reduceops[i].dtype()?;
            let st = ShapeTracker::from_shape(&shape)?;
            let size = usize::try_from(st.size()?)
                .map_err(|_| Error::Codegen("linearize: negative temp size".into()))?;
            let name = if n > 1 {
                format!("temp{i}")
            } else {
                "temp".into()
            };
            self.buf_uops
                .push(Some(UOp::define_local(dtype, &name, size)));
            self.k.sts.push(st);
            self.k
                .bufs
                .push(KernelBuf::Local(LocalBuffer { name, size, dtype }));
        }
        Ok(())
    }

    /// Map global and local dims to launch indices (SPECIALs with locals, loops without) and
    /// build the upcast index variables. Returns the launch sizes.
    #[allow(clippy::type_complexity)]
    fn define_indexes(&mut self) -> Result<(Option<Vec<Sint>>, Option<Vec<Sint>>)> {
        let k = &self.k;
        let (gd, fr, gfr) = (k.global_dims(), k.first_reduce(), k.group_for_reduces);
        let gl_dims: Vec<Sint> = k.full_shape()[..fr + gfr].to_vec();
        let prefix = if k.dont_use_locals { "idx" } else { "gidx" };
        let gmax = k.opts.global_max.map(|m| m.to_vec());
        let g = get_grouped_dims(prefix, 0, &gl_dims[..gd], gmax.as_deref(), k.opts.has_local)?;
        let lmax: Option<Vec<i64>> = if k.opts.has_local {
            k.opts.local_max.map(|m| m.to_vec())
        } else {
            Some(vec![])
        };
        let l = get_grouped_dims("lidx", gd, &gl_dims[gd..], lmax.as_deref(), false)?;
        let start = k.shape_len() - k.upcasted;
        let upcast_vars = |shape: &[Sint]| -> Result<Vec<Node>> {
            shape[start..]
                .iter()
                .enumerate()
                .map(|(i, s)| Node::var(&format!("_uidx{i}"), 0, s.try_sub(&Node::Num(1))?))
                .collect()
        };
        self.upcast_idxs = upcast_vars(k.output_shape())?;
        self.full_upcast_idxs = upcast_vars(k.full_shape())?;
        self.global_idxs = g.idxs;
        self.local_idxs = l.idxs;
        if self.k.opts.has_local {
            self.add_specials(&g.loop_idxs)?;
            if !self.k.dont_use_locals {
                self.add_specials(&l.loop_idxs)?;
            }
            Ok((g.sizes, l.sizes))
        } else {
            let mut all = g.loop_idxs;
            all.extend(l.loop_idxs);
            self.render_loop(&all, 1, false)?;
            Ok((None, None))
        }
    }

    fn add_specials(&mut self, vars: &[Node]) -> Result<()> {
        for (i, x) in vars.iter().enumerate() {
            let Some(name) = x.expr() else { continue };
            let mut size = x.max().try_add(&Node::Num(1))?;
            if !size.is_int() {
                size = size.max().clone();
            }
            let Some(size) = size.as_int() else {
                bail!(
                    Codegen,
                    "linearize: launch index {x:?} has no integer bound"
                );
            };
            self.loop_uops
                .insert(name.to_string(), UOp::special(i, name, size));
            self.render_memo.clear();
        }
        Ok(())
    }

    /// A RANGE per variable (numbers skipped), at loop depth `depth`; returns the new loops.
    pub(crate) fn render_loop(
        &mut self,
        xx: &[Node],
        depth: usize,
        reduce: bool,
    ) -> Result<Vec<UOp>> {
        let mut out = Vec::with_capacity(xx.len());
        for (i, x) in xx.iter().enumerate() {
            let Some(name) = x.expr() else { continue };
            let start = render_node(x.min(), &self.loop_uops)?;
            let end = render_node(&x.max().try_add(&Node::Num(1))?, &self.loop_uops)?;
            let r = UOp::range(start, end, depth, i, reduce);
            self.loop_uops.insert(name.to_string(), r.clone());
            self.render_memo.clear();
            out.push(r);
        }
        Ok(out)
    }

    /// The ridx variables of the reduce loops (after the group dims).
    pub(crate) fn reduce_idxs(&self) -> Result<Vec<Node>> {
        let k = &self.k;
        let full = k.full_shape();
        (k.first_reduce() + k.group_for_reduces..k.shape_len() - k.upcasted)
            .map(|i| Node::var(&format!("ridx{i}"), 0, full[i].try_sub(&Node::Num(1))?))
            .collect()
    }

    /// One reduce op's block (`render_block((reduceop,))`).
    fn render_reduce_block(
        &mut self,
        ri: usize,
        accs: &mut Values,
        loaded: &mut Values,
        aliases: &tensor_core::TcAliases,
    ) -> Result<()> {
        let reduce_idxs = self.reduce_idxs()?;
        let fake: Vec<Node> = reduce_idxs.iter().map(|_| Node::Num(0)).collect();
        let (nlidx, nuidx) =
            self.render_reduceop(ri, accs, loaded, &reduce_idxs, &fake, aliases)?;
        if ri + 1 == self.k.reduceops.len() {
            self.local_idxs = nlidx;
            self.upcast_idxs = nuidx;
        }
        Ok(())
    }

    /// Late loads, the output expressions, and one store per output.
    fn render_final_block(&mut self, accs: &Values, loaded: &mut Values) -> Result<Vec<UOp>> {
        let fake: Vec<Node> = self.reduce_idxs()?.iter().map(|_| Node::Num(0)).collect();
        let idxs = self.cat(&[
            &self.global_idxs,
            &self.local_idxs,
            &fake,
            &self.upcast_idxs,
        ]);
        for i in 0..self.k.bufs.len() {
            let b = &self.k.bufs[i];
            if !self.k.earlybufs.contains(b) && !matches!(b, KernelBuf::Local(_)) {
                let v = self.global_load(i, &idxs, None, None, &[])?;
                loaded.insert(i, v);
            }
        }
        let mut stores = vec![];
        let ast = self.k.ast.clone();
        for root in &ast {
            let (Some(m), [src]) = (root.membuffer(), root.src()) else {
                bail!(Internal, "linearize: a root is not a STORE of one value");
            };
            let vals = self.ast_parse(src, accs, None, loaded, None, &mut HashMap::new())?;
            let Some(i) = self
                .k
                .bufs
                .iter()
                .position(|b| matches!(b, KernelBuf::Mem(x) if x.idx == m.idx))
            else {
                bail!(Internal, "linearize: output {} is not a buffer", m.idx);
            };
            stores.extend(self.global_store(i, &idxs, &vals)?);
        }
        Ok(stores)
    }

    /// `render_node` of `node` under the current loops, sharing the UOps of equal expressions.
    pub(crate) fn render_idx(&mut self, node: &Node) -> Result<UOp> {
        index::render_node_memo(node, &self.loop_uops, &mut self.render_memo)
    }

    pub(crate) fn cat(&self, parts: &[&[Node]]) -> Vec<Node> {
        parts.iter().flat_map(|p| p.iter().cloned()).collect()
    }

    fn buf_index(&self, op: &LazyOp) -> Result<usize> {
        let b = KernelBuf::of(op);
        self.k
            .bufs
            .iter()
            .position(|x| Some(x) == b.as_ref())
            .ok_or_else(|| Error::Internal(format!("linearize: {} has no buffer", op.op().name())))
    }

    fn reduce_index(&self, op: &LazyOp) -> Result<usize> {
        self.k
            .reduceops
            .iter()
            .position(|r| r == op)
            .ok_or_else(|| Error::Internal("linearize: unknown reduce op".into()))
    }

    /// Lower `x` to one UOp per upcast combination. Reduce nodes read their accumulators (at
    /// `offs` when given); with `reduce_acc`, `x` is the reduce being accumulated.
    pub(crate) fn ast_parse(
        &mut self,
        x: &LazyOp,
        accs: &Values,
        offs: Option<&[usize]>,
        loaded: &Values,
        reduce_acc: Option<&mut Vec<UOp>>,
        cache: &mut HashMap<LazyOp, Vec<UOp>>,
    ) -> Result<Vec<UOp>> {
        if let Some(c) = cache.get(x) {
            return Ok(c.clone());
        }
        if reduce_acc.is_none() {
            if let Some(v) = self.parse_leaf(x, accs, offs, loaded)? {
                return Ok(v);
            }
        }
        let mut values = Vec::with_capacity(x.src().len());
        for s in x.src() {
            values.push(self.ast_parse(s, accs, offs, loaded, None, cache)?);
        }
        let ret = match (x.op(), reduce_acc) {
            (Op::Reduce(r), Some(acc)) => {
                let [vals] = values.as_slice() else {
                    bail!(Codegen, "linearize: a reduce takes one source");
                };
                let Some(offs) = offs else {
                    bail!(Internal, "linearize: a reduce without accumulator offsets");
                };
                reduce_step(r, vals, offs, acc)?
            }
            (op, _) => {
                let n = values.first().map_or(0, Vec::len);
                if values.iter().any(|v| v.len() != n) {
                    bail!(
                        Internal,
                        "linearize: {} sources expand to different counts",
                        op.name()
                    );
                }
                (0..n)
                    .map(|j| {
                        UOp::alu_auto(op, values.iter().map(|v| v[j].clone()).collect::<Srcs>())
                    })
                    .collect()
            }
        };
        cache.insert(x.clone(), ret.clone());
        Ok(ret)
    }
}

impl Lin {
    /// Buffer reads, casts, and reads of an earlier reduce's accumulators; `None` for ALU ops.
    fn parse_leaf(
        &mut self,
        x: &LazyOp,
        accs: &Values,
        offs: Option<&[usize]>,
        loaded: &Values,
    ) -> Result<Option<Vec<UOp>>> {
        Ok(Some(match x.op() {
            Op::Buffer(_) => {
                let i = self.buf_index(x)?;
                loaded
                    .get(&i)
                    .cloned()
                    .ok_or_else(|| Error::Internal(format!("linearize: buffer {i} not loaded")))?
            }
            Op::Unary(u @ (UnaryOps::CAST | UnaryOps::BITCAST)) => {
                let dt = x.dtype()?;
                let Some(src) = x.src().first() else {
                    bail!(Codegen, "linearize: {u:?} without a source");
                };
                let vals = self.ast_parse(src, accs, offs, loaded, None, &mut HashMap::new())?;
                let bitcast = u == UnaryOps::BITCAST;
                vals.iter()
                    .map(|v| if bitcast { v.bitcast(dt) } else { v.cast(dt) })
                    .collect()
            }
            Op::Reduce(_) => {
                let ri = self.reduce_index(x)?;
                let a = accs.get(&ri).ok_or_else(|| {
                    Error::Internal(format!("linearize: reduce {ri} has no accumulators"))
                })?;
                match offs {
                    Some(o) => o
                        .iter()
                        .map(|&i| {
                            a.get(i).cloned().ok_or_else(|| {
                                Error::Internal("linearize: accumulator offset out of range".into())
                            })
                        })
                        .collect::<Result<_>>()?,
                    None => a.clone(),
                }
            }
            _ => return Ok(None),
        }))
    }
}

/// Accumulate `vals` into `acc` at `offs` with the reduce's ALU op, then wrap every changed
/// accumulator in a PHI (the loop-carried update).
pub(crate) fn reduce_step(
    r: ReduceOps,
    vals: &[UOp],
    offs: &[usize],
    acc: &mut [UOp],
) -> Result<Vec<UOp>> {
    let op = match r {
        ReduceOps::SUM => crate::ops::BinaryOps::ADD,
        ReduceOps::MAX => crate::ops::BinaryOps::MAX,
    };
    let input: Vec<UOp> = acc.to_vec();
    let mut ret = Vec::with_capacity(vals.len());
    for (v, &off) in vals.iter().zip(offs) {
        let Some(a) = acc.get(off).cloned() else {
            bail!(Internal, "linearize: accumulator {off} of {}", acc.len());
        };
        let n = UOp::alu_auto(op, [v.clone(), a]);
        acc[off] = n.clone();
        ret.push(n);
    }
    for off in 0..acc.len() {
        if input[off] != acc[off] {
            acc[off] = UOp::phi(&input[off], &acc[off]);
        }
    }
    Ok(ret)
}

/// The dtype a reduce accumulates in and its initial value.
pub(crate) fn acc_init(reduce: &LazyOp) -> Result<(crate::dtype::DType, crate::dtype::ConstValue)> {
    let dt = reduce.dtype()?;
    match reduce.op() {
        Op::Reduce(r) => Ok((dt, reduce_init(r, dt))),
        o => bail!(Internal, "acc_init: {} is not a reduce", o.name()),
    }
}

#[cfg(test)]
mod tests;
