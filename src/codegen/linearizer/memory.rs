//! Loads and stores of the linearizer (tinygrad 0.9.1 `global_load` / `global_store`).
//!
//! Index and validity come from the buffer's ShapeTracker (`expr_idxs`) at the given per-dim
//! indices; upcast variables are expanded into one access per combination and deduplicated
//! through a cache keyed like tinygrad's (reduce index, dtype, buffer or constant, rendered index
//! and validity). A partially valid load is gated with `(valid, 0)`, a partially valid store
//! carries its gate, a fully invalid read is the constant 0; CONST buffers become CONST UOps
//! (WHERE-gated when partially valid); with `supports_float4`, one unit-stride upcast dim of 2 or
//! 4 lanes of a float/half buffer is accessed as one vector (aligned loads only; stores must be
//! aligned).
//!
//! Not guaranteed: image buffers are not supported.

use std::sync::Arc;

use super::index::{expand_first, expand_idxs, expand_node, render_node, Expansion};
use super::{acc_init, Lin};
use crate::codegen::kernel::KernelBuf;
use crate::codegen::uops::UOp;
use crate::dtype::{dtypes, ConstValue, DType};
use crate::helpers::FxIndexMap;
use crate::ops::{ConstArg, LazyOp};
use crate::shape::symbolic::SubstMemo;
use crate::shape::Node;
use crate::{bail, Error, Result};

/// What every access of one `global_load` shares.
struct LoadCtx<'a> {
    i: usize,
    buf: KernelBuf,
    dtype: DType,
    /// (reduce index, initial value) when defining accumulators.
    acc: Option<(usize, ConstValue)>,
    konst: Option<ConstArg>,
    barrier: Option<&'a UOp>,
    loop_ctx: &'a [UOp],
    /// The key's buffer-or-constant part of a valid access (`konst`) and of an access that is
    /// never valid (the constant 0): the same for every access, so made once per load (the
    /// second when first needed).
    what: Arc<str>,
    what_zero: std::cell::OnceCell<Arc<str>>,
}

/// The load cache key: tinygrad's string of (reduce index, dtype, constant or buffer, rendered
/// index, rendered validity), with the index and validity as nodes instead of their renderings
/// (nodes are equal when their DEBUG keys are, which implies equal renderings; the variables of
/// one kernel have one set of bounds, so equal renderings are equal nodes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LoadKey {
    acc: Option<usize>,
    dtype: DType,
    what: Arc<str>,
    idx: Node,
    valid: Node,
}

/// The load key's buffer-or-constant part: the constant of a non-accumulator access to one
/// (`this_const`), else the buffer (its number, local name, or `CONSTBUF`).
fn load_what(this_const: &Option<ConstArg>, not_acc: bool, buf: &KernelBuf) -> Arc<str> {
    match (this_const, not_acc, buf) {
        (Some(k), true, _) => format!("CONST{k}").into(),
        (_, _, KernelBuf::Mem(m)) => m.idx.to_string().into(),
        (_, _, KernelBuf::Local(l)) => l.name.as_str().into(),
        (_, _, KernelBuf::Const(_)) => "CONSTBUF".into(),
    }
}

/// A float4 group: the upcast dim, its lane count and the first lane's index.
struct Float4 {
    dim: usize,
    amt: usize,
    first: Node,
}

impl Lin {
    /// The float4 dim of buffer `i` for these indices, if there is exactly one candidate with 2
    /// or 4 lanes (or 8 or 16 in a kernel with `wide_vectors`, beyond 0.9.1: the CPU tile).
    fn float4_dim(&self, i: usize, idxs: &[Node]) -> Result<Option<Float4>> {
        let dims = self.k.get_float4_upcast_dim(i)?;
        let [dim] = dims.as_slice() else {
            return Ok(None);
        };
        let Some(idx) = idxs.get(*dim) else {
            return Ok(None);
        };
        // the lane count and the first lane's index (the other lanes are not needed)
        let (amt, first) = expand_first(idx)?;
        if !(matches!(amt, 2 | 4) || (self.k.wide_vectors && matches!(amt, 8 | 16))) {
            return Ok(None);
        }
        Ok(first.map(|first| Float4 {
            dim: *dim,
            amt,
            first,
        }))
    }

    /// Index and validity of buffer `i` at `idxs`, with the float4 group when the first lane's
    /// index is aligned.
    fn load_index(&self, i: usize, idxs: &[Node]) -> Result<(Node, Node, Option<Float4>)> {
        let st = self.k.st(i)?;
        if let Some(f) = self.float4_dim(i, idxs)? {
            let mut sub = idxs.to_vec();
            sub[f.dim] = f.first.clone();
            let (g_idx, g_valid) = st.expr_idxs(Some(&sub))?;
            let amt = Node::from(f.amt);
            if g_idx == g_idx.floordiv(&amt)?.try_mul(&amt)? {
                return Ok((g_idx, g_valid, Some(f)));
            }
        }
        let (g_idx, g_valid) = st.expr_idxs(Some(idxs))?;
        Ok((g_idx, g_valid, None))
    }

    /// Load buffer `i` at `idxs`, one UOp per upcast combination (first upcast variable fastest).
    /// With `acc`, define that reduce's accumulators instead (hoisted above `loop_ctx`);
    /// `barrier` orders a local-memory read after it.
    pub(crate) fn global_load(
        &mut self,
        i: usize,
        idxs: &[Node],
        acc: Option<&LazyOp>,
        barrier: Option<&UOp>,
        loop_ctx: &[UOp],
    ) -> Result<Vec<UOp>> {
        let buf = self.k.buf(i)?.clone();
        let (mut dtype, acc) = match acc {
            Some(r) => {
                let (dt, init) = acc_init(r)?;
                let ri = self.k.reduceops.iter().position(|x| x == r).unwrap_or(0);
                (dt, Some((ri, init)))
            }
            None => (buf.dtype(), None),
        };
        let konst = match &buf {
            KernelBuf::Const(c) => Some(c.val.clone()),
            _ => None,
        };
        let expand_vars = expand_idxs(idxs);
        let (g_idx, g_valid, f4) = self.load_index(i, idxs)?;
        if let Some(f) = &f4 {
            dtype = dtype.vec(f.amt as u16);
        }
        // one access per distinct (index, validity): combinations that differ only in variables
        // neither holds share it (later lookups of the same key would hit the load cache anyway)
        let ex = Expansion::new(&[&g_idx, &g_valid], &expand_vars)?;
        let ctx = LoadCtx {
            what: load_what(&konst, acc.is_none(), &buf),
            what_zero: std::cell::OnceCell::new(),
            i,
            buf,
            dtype,
            acc,
            konst,
            barrier,
            loop_ctx,
        };
        let mut acc_count = 0usize;
        let mut accesses = Vec::with_capacity(ex.firsts.len());
        let mut vals = super::index::VarVals::default();
        let mut memo = SubstMemo::default();
        for &j in &ex.firsts {
            ex.values_at(&expand_vars, j, &mut vals);
            let idx = Expansion::apply(&g_idx, &vals, &mut memo)?;
            let valid = Expansion::apply(&g_valid, &vals, &mut memo)?;
            accesses.push(self.load_cached(&ctx, idx, valid, &mut acc_count)?);
        }
        let Some(f) = &f4 else {
            return Ok(ex.group.iter().map(|&g| accesses[g].clone()).collect());
        };
        // one GEP per (access, lane): combinations that differ only in variables the index does
        // not hold read the same lane of the same access
        let mut geps: Vec<Option<UOp>> = vec![None; accesses.len().saturating_mul(f.amt)];
        let mut ret = Vec::with_capacity(ex.group.len());
        for (j, &g) in ex.group.iter().enumerate() {
            let lane = usize::try_from(ex.value(j, f.dim))
                .map_err(|_| Error::Internal("global_load: negative float4 lane".into()))?;
            let slot = (lane < f.amt).then(|| g * f.amt + lane);
            match slot.and_then(|k| geps[k].as_ref()) {
                Some(u) => ret.push(u.clone()),
                None => {
                    let u = UOp::gep(&accesses[g], lane, dtype.scalar());
                    if let Some(k) = slot {
                        geps[k] = Some(u.clone());
                    }
                    ret.push(u);
                }
            }
        }
        Ok(ret)
    }

    /// One access of a load (or accumulator), deduplicated through the load cache.
    fn load_cached(
        &mut self,
        c: &LoadCtx,
        idx: Node,
        valid: Node,
        acc_count: &mut usize,
    ) -> Result<UOp> {
        let (this_const, idx, valid, what) = if *valid.max() == 0 {
            let zero = Some(ConstArg::Value(ConstValue::Int(0)));
            let what = c
                .what_zero
                .get_or_init(|| load_what(&zero, c.acc.is_none(), &c.buf));
            (zero, Node::Num(0), Node::Num(1), what)
        } else {
            (c.konst.clone(), idx, valid, &c.what)
        };
        let key = LoadKey {
            acc: c.acc.map(|a| a.0),
            dtype: c.dtype,
            what: what.clone(),
            idx: idx.clone(),
            valid: valid.clone(),
        };
        if let Some(u) = self.load_cache.get(&key) {
            return Ok(u.clone());
        }
        let u = if let Some((_, init)) = c.acc {
            *acc_count += 1;
            UOp::define_acc(c.dtype, init, c.loop_ctx, c.i, *acc_count - 1)
        } else if let Some(k) = &this_const {
            self.const_value(k, c.dtype, &valid)?
        } else {
            self.load_value(c.i, c.dtype, &idx, &valid, c.barrier)?
        };
        self.load_cache.insert(key, u.clone());
        Ok(u)
    }

    /// A CONST buffer's value (a number, or a DEFINE_VAR cast to the dtype), WHERE-gated to 0
    /// when only partially valid.
    fn const_value(&mut self, c: &ConstArg, dt: DType, valid: &Node) -> Result<UOp> {
        let v = match c {
            ConstArg::Value(v) => UOp::cnst(dt, *v),
            ConstArg::Var(var) => {
                let u = render_node(var, &std::collections::HashMap::new())?;
                if dt == dtypes::int32 {
                    u
                } else {
                    u.cast(dt)
                }
            }
        };
        if *valid.min() == 0 && *valid.max() == 1 {
            let gate = self.render_idx(valid)?;
            return Ok(UOp::where_(&gate, v, UOp::cnst(dt, 0)));
        }
        Ok(v)
    }

    /// `buf[idx]`, gated with `(valid, 0)` when `valid` may be false, after `barrier` if given.
    fn load_value(
        &mut self,
        i: usize,
        dt: DType,
        idx: &Node,
        valid: &Node,
        barrier: Option<&UOp>,
    ) -> Result<UOp> {
        let Some(Some(b)) = self.buf_uops.get(i).cloned() else {
            bail!(Internal, "global_load: buffer {i} wasn't UOped");
        };
        let ridx = self.render_idx(idx)?;
        let mut src = vec![b, ridx];
        if *valid.min() == 0 {
            src.push(self.render_idx(valid)?);
            src.push(UOp::cnst(dt, 0));
        }
        if let Some(bar) = barrier {
            src.push(bar.clone());
        }
        Ok(UOp::new(
            crate::codegen::uops::UOps::LOAD,
            Some(dt),
            src,
            crate::codegen::uops::UArg::None,
        ))
    }

    /// Store `vals` (one per upcast combination of `idxs`) into buffer `i`, grouping float4
    /// lanes into vector stores.
    pub(crate) fn global_store(
        &mut self,
        i: usize,
        idxs: &[Node],
        vals: &[UOp],
    ) -> Result<Vec<UOp>> {
        let Some(Some(buf_uop)) = self.buf_uops.get(i).cloned() else {
            bail!(Internal, "global_store: buffer {i} wasn't UOped");
        };
        let dtype = self.k.buf(i)?.dtype();
        let expand_vars = expand_idxs(idxs);
        let per_dim: Vec<Vec<Node>> = idxs
            .iter()
            .map(|x| expand_node(x, Some(&expand_vars)))
            .collect::<Result<_>>()?;
        let n = per_dim.first().map_or(1, Vec::len);
        let mut store_offset: FxIndexMap<Vec<Node>, UOp> = FxIndexMap::default();
        for (j, v) in (0..n).zip(vals) {
            let key: Vec<Node> = per_dim.iter().map(|d| d[j].clone()).collect();
            store_offset.insert(key, v.clone());
        }
        let st = self.k.st(i)?.clone();
        // (value, index, validity) per store: a float4 group's index is the one its alignment was
        // checked with
        let mut stores_at: Vec<(UOp, Node, Node)> = Vec::with_capacity(store_offset.len());
        if let Some(f) = self.float4_dim(i, idxs)? {
            let mut grouped: FxIndexMap<Vec<Node>, Vec<UOp>> = FxIndexMap::default();
            for (k, v) in &store_offset {
                let mut g = k.clone();
                g[f.dim] = f.first.clone();
                grouped.entry(g).or_default().push(v.clone());
            }
            for (k, lanes) in grouped {
                let amt = Node::from(lanes.len());
                let (idx, valid) = st.expr_idxs(Some(&k))?;
                if idx != idx.floordiv(&amt)?.try_mul(&amt)? {
                    bail!(
                        Codegen,
                        "global_store: float4 store of buffer {i} at {idx:?} is not aligned"
                    );
                }
                let vt = dtype.vec(lanes.len() as u16);
                stores_at.push((UOp::vectorize(lanes, vt), idx, valid));
            }
        } else {
            for (k, var) in store_offset {
                let (idx, valid) = st.expr_idxs(Some(&k))?;
                stores_at.push((var, idx, valid));
            }
        }
        let mut stores = Vec::with_capacity(stores_at.len());
        for (var, idx, valid) in stores_at {
            let ridx = self.render_idx(&idx)?;
            if *valid.min() == 1 {
                stores.push(UOp::store(&buf_uop, &ridx, &var));
            } else {
                let gate = self.render_idx(&valid)?;
                stores.push(UOp::store_gated(&buf_uop, &ridx, &var, &gate));
            }
        }
        Ok(stores)
    }
}
