//! Index machinery of the linearizer (tinygrad 0.9.1 `linearizer.py` helpers): mapping global
//! and local dims onto launch axes (`get_grouped_dims`), expanding upcast variables (`_uidx*`)
//! into one index per combination (`expand_idxs`, `iter_idxs`, `expand_node`), and lowering a
//! symbolic index [`Node`] to int32 UOps (`render_ops`).
//!
//! Not guaranteed: a node holding two different `_uidx` variables expands along the first one
//! found only (tinygrad picks one from a set; the linearizer never builds such a node).

use std::collections::HashMap;

use crate::codegen::uops::UOp;
use crate::dtype::dtypes;
use crate::shape::symbolic::{py_le, py_mod, SubstMemo};
use crate::shape::{sint_prod, Node, NodeKind, Sint};
use crate::{bail, Error, Result};

/// The result of [`get_grouped_dims`].
#[derive(Clone, Debug)]
pub struct GroupedDims {
    /// One index expression per input dim, in terms of the launch variables.
    pub idxs: Vec<Node>,
    /// The launch variables (size-1 axes dropped).
    pub loop_idxs: Vec<Node>,
    /// The launch size per axis, padded with 1s to the number of axes; `None` when there are
    /// no axes at all (`max_sizes` empty).
    pub sizes: Option<Vec<Sint>>,
}

type SizeDim = (usize, Sint, Sint);

/// Map `dims` onto launch axes limited by `max_sizes` (x, y, z order; `None` = one unlimited
/// axis per dim): with `reverse_dims` the last dim goes to axis 0; a dim larger than its axis is
/// split by a factor across two axes; extra dims are merged into the leftmost axis that still
/// fits; sizes are padded with 1s. Variables are named `{prefix}{n}` from `off`.
pub fn get_grouped_dims(
    prefix: &str,
    off: usize,
    dims: &[Sint],
    max_sizes: Option<&[i64]>,
    reverse_dims: bool,
) -> Result<GroupedDims> {
    let unlimited: Vec<i64>;
    let max_sizes = match max_sizes {
        Some(m) => m,
        None => {
            unlimited = vec![i64::MAX; dims.len()];
            &unlimited
        }
    };
    if max_sizes.is_empty() {
        if !dims.is_empty() {
            bail!(
                Codegen,
                "get_grouped_dims: {prefix} dims should be empty because no size axes available"
            );
        }
        return Ok(GroupedDims {
            idxs: vec![],
            loop_idxs: vec![],
            sizes: None,
        });
    }
    let mut size_dims: Vec<Vec<SizeDim>> = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        let dmax = if d.is_int() {
            d.clone()
        } else {
            d.max().try_add(&Node::Num(1))?
        };
        size_dims.push(vec![(i, d.clone(), dmax)]);
    }
    if reverse_dims {
        size_dims.reverse();
    }
    split_large_dims(&mut size_dims, max_sizes, dims)?;
    merge_extra_dims(&mut size_dims, max_sizes, dims)?;
    let mut sizes: Vec<Sint> = Vec::with_capacity(max_sizes.len());
    for sd in &size_dims {
        let parts: Vec<Sint> = sd.iter().map(|x| x.1.clone()).collect();
        sizes.push(sint_prod(&parts)?);
    }
    let n = sizes.len();
    let mut idxs = vec![Node::Num(0); dims.len()];
    let mut size_vars = Vec::with_capacity(n);
    for (i, s) in sizes.iter().enumerate() {
        let num = if reverse_dims {
            n - 1 - (i + off)
        } else {
            i + off
        };
        size_vars.push(Node::var(
            &format!("{prefix}{num}"),
            0,
            s.try_sub(&Node::Num(1))?,
        )?);
    }
    for (size_idx, size_var) in size_vars.iter().enumerate() {
        let mut v = size_var.clone();
        for (dim_idx, dim, _) in &size_dims[size_idx] {
            let scale = idxs[*dim_idx].max().try_add(&Node::Num(1))?;
            let term = v.modulo(dim)?.try_mul(&scale)?;
            idxs[*dim_idx] = idxs[*dim_idx].try_add(&term)?;
            v = v.floordiv(dim)?;
        }
    }
    let loop_idxs: Vec<Node> = size_vars.into_iter().filter(|x| !x.is_int()).collect();
    sizes.resize(sizes.len().max(max_sizes.len()), Node::Num(1));
    Ok(GroupedDims {
        idxs,
        loop_idxs,
        sizes: Some(sizes),
    })
}

/// A dim too large for its axis is split into two axes by the smallest factor that fits.
fn split_large_dims(size_dims: &mut Vec<Vec<SizeDim>>, max: &[i64], dims: &[Sint]) -> Result<()> {
    for size_idx in 0..max.len().min(size_dims.len()) {
        let (dim_idx, dim, dim_max) = size_dims[size_idx][0].clone();
        let max_sz = Node::Num(max[size_idx]);
        if py_le(&dim_max, &max_sz)? {
            continue;
        }
        let Some(d) = dim.as_int() else {
            bail!(
                Codegen,
                "get_grouped_dims: variable shape {dim:?} too large for size {}",
                max[size_idx]
            );
        };
        let mut factor = 2i64;
        while factor * factor <= d {
            if py_mod(d, factor)? == 0 && d / factor <= max[size_idx] {
                let (a, b) = (Node::Num(d / factor), Node::Num(factor));
                size_dims[size_idx] = vec![(dim_idx, a.clone(), a)];
                size_dims.insert(size_idx + 1, vec![(dim_idx, b.clone(), b)]);
                break;
            }
            factor += 1;
        }
        if !py_le(&size_dims[size_idx][0].2, &max_sz)? {
            bail!(
                Codegen,
                "get_grouped_dims: dim at {size_idx} too large and non-factorable: {d} > {} (dims {dims:?}, max {max:?})",
                max[size_idx]
            );
        }
    }
    Ok(())
}

/// While there are more dims than axes, merge the next one into the leftmost axis it fits.
fn merge_extra_dims(size_dims: &mut Vec<Vec<SizeDim>>, max: &[i64], dims: &[Sint]) -> Result<()> {
    let mut cur = 0usize;
    while size_dims.len() > max.len() {
        let here: Vec<Sint> = size_dims[cur].iter().map(|x| x.2.clone()).collect();
        let merged = sint_prod(&here)?.try_mul(&size_dims[cur + 1][0].2)?;
        if py_le(&merged, &Node::Num(max[cur]))? {
            let next = size_dims.remove(cur + 1);
            size_dims[cur].extend(next);
        } else if cur + 1 < max.len() {
            cur += 1;
        } else {
            bail!(
                Codegen,
                "get_grouped_dims: cannot fit dims {dims:?} in sizes {max:?}"
            );
        }
    }
    Ok(())
}

/// The first `_uidx` variable of `node`, or 0.
pub fn expand_idx(node: &Node) -> Node {
    node.vars()
        .into_iter()
        .find(|v| v.expr().is_some_and(|e| e.starts_with("_uidx")))
        .unwrap_or(Node::Num(0))
}

/// The expand variable of each index, keeping only its first occurrence (later ones become 0).
pub fn expand_idxs(nodes: &[Node]) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let v = expand_idx(n);
        out.push(if out.contains(&v) { Node::Num(0) } else { v });
    }
    out
}

/// Every combination of values of `idxs` (each from its min to its max), the first varying
/// fastest.
pub fn iter_idxs(idxs: &[Node]) -> Result<Vec<Vec<i64>>> {
    let mut ranges = Vec::with_capacity(idxs.len());
    for v in idxs {
        match (v.min().as_int(), v.max().as_int()) {
            (Some(lo), Some(hi)) => ranges.push((lo, hi)),
            _ => bail!(Codegen, "iter_idxs: {v:?} has symbolic bounds"),
        }
    }
    // each new variable varies slower than the ones before it
    let mut out: Vec<Vec<i64>> = vec![vec![]];
    for &(lo, hi) in &ranges {
        let mut next = Vec::with_capacity(out.len() * (hi - lo + 1).max(0) as usize);
        for v in lo..=hi {
            for prefix in &out {
                let mut p = prefix.clone();
                p.push(v);
                next.push(p);
            }
        }
        out = next;
    }
    Ok(out)
}

/// The combinations of [`iter_idxs`] (not materialized: combination `j` gives variable `d` the
/// value `lo[d] + (j / stride[d]) % size[d]`) grouped by the values they give the variables of
/// `idxs` that occur in any of `nodes` (the others cannot change a substitution's result): each
/// combination's group in `group`, and the first combination of each group in `firsts`, in order
/// of first occurrence.
pub(crate) struct Expansion {
    /// (lo, size, stride) per variable.
    dims: Vec<(i64, i64, i64)>,
    pub(crate) group: Vec<usize>,
    pub(crate) firsts: Vec<usize>,
}

impl Expansion {
    pub(crate) fn new(nodes: &[&Node], idxs: &[Node]) -> Result<Expansion> {
        let mut dims = Vec::with_capacity(idxs.len());
        let mut count = 1i64;
        for v in idxs {
            let (Some(lo), Some(hi)) = (v.min().as_int(), v.max().as_int()) else {
                bail!(Codegen, "iter_idxs: {v:?} has symbolic bounds");
            };
            let size = (hi - lo + 1).max(0);
            dims.push((lo, size, count));
            count = count
                .checked_mul(size)
                .ok_or_else(|| Error::Codegen("iter_idxs: too many combinations".into()))?;
        }
        let mut seen = crate::helpers::FxHashSet::<Node>::default();
        let mut vars = Vec::new();
        for n in nodes {
            n.collect_vars(&mut vars, &mut seen);
        }
        // the variables that matter, as (position, size, stride): a combination's group key is
        // its mixed-radix number over them alone
        let present: Vec<(i64, i64)> = idxs
            .iter()
            .zip(&dims)
            .filter(|(k, _)| k.is_var() && seen.contains(k))
            .map(|(_, &(_, size, stride))| (size, stride))
            .collect();
        let count = usize::try_from(count).unwrap_or(0);
        // the keys are dense in 0..(product of the present sizes), which divides `count`: the
        // group of a key is a slot of a table that size (`usize::MAX`: not seen yet)
        let keys = present
            .iter()
            .try_fold(1i64, |a, &(size, _)| a.checked_mul(size))
            .unwrap_or(i64::MAX);
        let mut ids = vec![usize::MAX; usize::try_from(keys).unwrap_or(0).min(count)];
        let (mut group, mut firsts) = (Vec::with_capacity(count), vec![]);
        for j in 0..count as i64 {
            let (mut key, mut radix) = (0i64, 1i64);
            for &(size, stride) in &present {
                key += (j / stride) % size * radix;
                radix *= size;
            }
            let Some(slot) = usize::try_from(key).ok().and_then(|k| ids.get_mut(k)) else {
                bail!(Codegen, "iter_idxs: combination key {key} out of range");
            };
            if *slot == usize::MAX {
                *slot = firsts.len();
                firsts.push(j as usize);
            }
            group.push(*slot);
        }
        Ok(Expansion {
            dims,
            group,
            firsts,
        })
    }

    /// The value combination `j` gives variable `d`.
    pub(crate) fn value(&self, j: usize, d: usize) -> i64 {
        let (lo, size, stride) = self.dims[d];
        lo + (j as i64 / stride) % size
    }

    /// Fill `map` with the values combination `j` gives the variables among `idxs` (the map can
    /// be reused from one combination to the next).
    pub(crate) fn values_at(&self, idxs: &[Node], j: usize, map: &mut VarVals) {
        for (d, k) in idxs.iter().enumerate().filter(|(_, k)| k.is_var()) {
            let v = Node::Num(self.value(j, d));
            match map.get_mut(k) {
                Some(slot) => *slot = v,
                None => {
                    map.insert(k.clone(), v);
                }
            }
        }
    }

    /// `node` with the variables of `map` replaced (the parts without them reused through
    /// `memo` from earlier values of the same variables).
    pub(crate) fn apply(node: &Node, map: &VarVals, memo: &mut SubstMemo) -> Result<Node> {
        if map.is_empty() {
            Ok(node.clone())
        } else {
            node.substitute_memo(map, memo)
        }
    }

    /// `node` substituted once per group, handed out per combination.
    pub(crate) fn expand(&self, node: &Node, idxs: &[Node]) -> Result<Vec<Node>> {
        let mut map = VarVals::default();
        let mut memo = SubstMemo::default();
        let mut distinct = Vec::with_capacity(self.firsts.len());
        for &j in &self.firsts {
            self.values_at(idxs, j, &mut map);
            distinct.push(Expansion::apply(node, &map, &mut memo)?);
        }
        Ok(self.group.iter().map(|&g| distinct[g].clone()).collect())
    }
}

/// `node` with the variables `idxs` (default: its own expand variable) replaced by every
/// combination of their values, the first varying fastest. Combinations that agree on the
/// variables `node` holds share one substitution.
pub fn expand_node(node: &Node, idxs: Option<&[Node]>) -> Result<Vec<Node>> {
    let own;
    let idxs = match idxs {
        Some(i) => i,
        None => {
            own = [expand_idx(node)];
            &own
        }
    };
    Expansion::new(&[node], idxs)?.expand(node, idxs)
}

/// The number of values [`expand_node`] gives `node` (along its own expand variable) and the
/// first of them (`None` when there are none), without substituting the others.
pub(crate) fn expand_first(node: &Node) -> Result<(usize, Option<Node>)> {
    let idxs = [expand_idx(node)];
    let ex = Expansion::new(&[node], &idxs)?;
    let Some(&j) = ex.firsts.first() else {
        return Ok((ex.group.len(), None));
    };
    let mut map = VarVals::default();
    ex.values_at(&idxs, j, &mut map);
    let first = Expansion::apply(node, &map, &mut SubstMemo::default())?;
    Ok((ex.group.len(), Some(first)))
}

/// Lowered nodes by symbolic node, valid while the variables' UOps stay the same: lowering
/// through it makes the UOps of equal (sub)expressions one shared node.
pub(crate) type RenderMemo = HashMap<Node, UOp, crate::helpers::FxBuild>;

/// The values of the upcast variables for one combination ([`Expansion::values_at`]), keyed by
/// the variable (its structural hash used through the fast hasher).
pub(crate) type VarVals = HashMap<Node, Node, crate::helpers::FxBuild>;

/// Lower a symbolic node to int32 UOps (tinygrad's `render_ops`): numbers become CONSTs,
/// variables the loop/SPECIAL UOp of that name in `ctx` or a DEFINE_VAR, Mul/Div/Mod/Lt the ALU
/// op, sums a chain of ADDs, ands a chain of MULs.
pub fn render_node(node: &Node, ctx: &HashMap<String, UOp>) -> Result<UOp> {
    render_node_memo(node, ctx, &mut RenderMemo::default())
}

/// [`render_node`] through `memo` (which must have been filled under the same `ctx`).
pub(crate) fn render_node_memo(
    node: &Node,
    ctx: &HashMap<String, UOp>,
    memo: &mut RenderMemo,
) -> Result<UOp> {
    if let Some(u) = memo.get(node) {
        return Ok(u.clone());
    }
    let mut rec = |n: &Node| render_node_memo(n, ctx, memo);
    let u = match node.kind() {
        NodeKind::Num(v) => UOp::cnst(dtypes::int32, v),
        NodeKind::Var { name, min, max, .. } => match ctx.get(name) {
            Some(u) => u.clone(),
            None => {
                let Some(hi) = max.as_int() else {
                    bail!(
                        Codegen,
                        "render: variable {node:?} has a symbolic maximum and no loop"
                    );
                };
                UOp::define_var(name, min, hi)
            }
        },
        NodeKind::Mul(a, b) => rec(a)?.mul(rec(b)?),
        NodeKind::Div(a, b) => rec(a)?.idiv(UOp::cnst(dtypes::int32, b)),
        NodeKind::Mod(a, b) => rec(a)?.modulo(UOp::cnst(dtypes::int32, b)),
        NodeKind::Lt(a, b) => rec(a)?.lt(rec(b)?),
        NodeKind::Sum(nodes) => chain(nodes, &mut rec, |a, b| a.add(b))?,
        NodeKind::And(nodes) => chain(nodes, &mut rec, |a, b| a.mul(b))?,
    };
    memo.insert(node.clone(), u.clone());
    Ok(u)
}

fn chain(
    nodes: &[Node],
    rec: &mut dyn FnMut(&Node) -> Result<UOp>,
    f: fn(&UOp, UOp) -> UOp,
) -> Result<UOp> {
    let Some((first, rest)) = nodes.split_first() else {
        return Err(Error::Internal("render: an empty sum or and node".into()));
    };
    let mut acc = rec(first)?;
    for n in rest {
        acc = f(&acc, rec(n)?);
    }
    Ok(acc)
}
