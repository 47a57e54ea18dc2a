//! A stack of views over one buffer: tinygrad 0.9.1's `shape/shapetracker.py`.
//!
//! `views[0]` is closest to the buffer, the last view defines the visible shape. Movement ops act
//! on the last view; only `reshape` can append a view (when the last one cannot be reshaped, or
//! always with `MERGE_VIEW=0`). [`ShapeTracker::expr_idxs`] turns the stack into one index
//! expression and one validity expression whose renders are the kernel's index code.
//!
//! Not guaranteed: `unbind`/`var_vals` skip unbound Variables (tinygrad asserts on them).

use std::sync::Arc;

use crate::helpers::Knob;
use crate::shape::symbolic::{
    create_ge_node, create_lt_node, render_shape, sint_prod, Kind, Node, Sint, VarVals,
};
use crate::shape::view::{strides_for_shape, View};
use crate::{bail, ensure, Error, Result};

#[cfg(test)]
mod checker;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cases;
#[cfg(test)]
mod tests_symbolic;

/// tinygrad's `ShapeTracker`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ShapeTracker {
    /// Shared: a clone is a reference count, not a deep copy (trackers are cloned into every
    /// lazy buffer, AST node and scheduler key).
    pub views: Arc<[View]>,
}

/// The index and validity expressions of one view for the given per-dim indices
/// (tinygrad's `_expr_view`).
fn expr_view(view: &View, idxs: &[Node], valid: Option<Node>) -> Result<(Node, Node)> {
    ensure!(
        idxs.len() == view.shape.len(),
        InvalidArgument,
        "expr_idxs: need an idx for all dimensions, got {} for shape {}",
        idxs.len(),
        render_shape(&view.shape)
    );
    let mut iexpr = Vec::with_capacity(idxs.len() + 1);
    iexpr.push(view.offset.clone());
    let mut vexpr: Vec<Node> = valid.into_iter().collect();
    for (d, idx) in idxs.iter().enumerate() {
        let (sh, st) = (&view.shape[d], &view.strides[d]);
        if *sh != 1 && *st != 0 {
            iexpr.push(idx.try_mul(st)?);
        }
        if let Some(m) = &view.mask {
            vexpr.push(create_ge_node(idx, &m[d].0)?);
            vexpr.push(create_lt_node(idx, &m[d].1)?);
        }
    }
    Ok((Node::sum(iexpr)?, Node::ands(vexpr)?))
}

/// Default index Variables `idx{i}` in `[0, s-1]`.
fn default_idxs(shape: &[Sint]) -> Result<Vec<Node>> {
    let mut out = Vec::with_capacity(shape.len());
    for (i, s) in shape.iter().enumerate() {
        out.push(Node::var(&format!("idx{i}"), 0, s.try_sub(&Node::Num(1))?)?);
    }
    Ok(out)
}

/// The dims of `real_strides` whose stride is 1.
pub fn unit_stride_dims(real_strides: &[Option<Sint>]) -> Vec<usize> {
    real_strides
        .iter()
        .enumerate()
        .filter(|(_, st)| st.as_ref().is_some_and(|s| *s == 1))
        .map(|(i, _)| i)
        .collect()
}

impl ShapeTracker {
    /// A contiguous tracker of `shape`.
    pub fn from_shape(shape: &[Sint]) -> Result<ShapeTracker> {
        Ok(ShapeTracker {
            views: Arc::from([View::from_shape(shape)?]),
        })
    }

    /// A tracker from views (the last one defines the shape); there must be at least one.
    pub fn new(views: Vec<View>) -> Result<ShapeTracker> {
        ensure!(
            !views.is_empty(),
            InvalidArgument,
            "ShapeTracker needs at least one view"
        );
        Ok(ShapeTracker {
            views: views.into(),
        })
    }

    fn last(&self) -> Result<&View> {
        self.views
            .last()
            .ok_or_else(|| Error::Internal("ShapeTracker without views".into()))
    }

    /// The visible shape (of the last view); empty for a tracker without views.
    pub fn shape(&self) -> &[Sint] {
        self.views.last().map(|v| v.shape.as_slice()).unwrap_or(&[])
    }

    /// Element count of the visible shape, symbolic dims at their max.
    pub fn size(&self) -> Result<i64> {
        self.last()?.size()
    }

    /// One view, and it is contiguous.
    pub fn contiguous(&self) -> bool {
        self.views.len() == 1 && self.views[0].contiguous
    }

    /// One unmasked view with row-major strides (any offset).
    pub fn consecutive(&self) -> bool {
        self.views.len() == 1
            && self.views[0].mask.is_none()
            && strides_for_shape(&self.views[0].shape).is_ok_and(|s| s == self.views[0].strides)
    }

    /// 1 + the largest buffer index a valid element reaches (0 when nothing is valid).
    pub fn real_size(&self) -> Result<i64> {
        if self.shape().iter().any(|s| *s == 0) {
            return Ok(0);
        }
        let (idx, valid) = self.expr_idxs(None)?;
        if !valid.truthy() {
            return Ok(0);
        }
        let mut ret = idx.max().clone();
        if !ret.is_int() {
            ret = ret.max().clone();
        }
        match ret {
            Node::Num(v) => crate::shape::symbolic::ck_add(v, 1),
            r => bail!(Shape, "real_size: max index {r:?} is not an int"),
        }
    }

    /// The Variables of all views, in first-seen order.
    pub fn vars(&self) -> Vec<Node> {
        let mut out = Vec::new();
        let mut seen = crate::helpers::FxHashSet::default();
        for v in self.views.iter() {
            for x in v.vars() {
                if seen.insert(x.clone()) {
                    out.push(x);
                }
            }
        }
        out
    }

    /// Values of the bound Variables, keyed by the unbound Variable.
    pub fn var_vals(&self) -> Result<VarVals> {
        let mut out = VarVals::new();
        for v in self.vars() {
            if let (u, Some(val)) = v.unbind()? {
                merge_var_val(&mut out, u, val)?;
            }
        }
        Ok(out)
    }

    /// Replace bound Variables by unbound ones in every view; returns their values.
    pub fn unbind(&self) -> Result<(ShapeTracker, VarVals)> {
        if self.views.iter().all(View::is_all_int) {
            return Ok((self.clone(), VarVals::new()));
        }
        let mut views = Vec::with_capacity(self.views.len());
        let mut vals = VarVals::new();
        for v in self.views.iter() {
            let (uv, vv) = v.unbind()?;
            views.push(uv);
            for (k, x) in vv {
                merge_var_val(&mut vals, k, x)?;
            }
        }
        Ok((
            ShapeTracker {
                views: views.into(),
            },
            vals,
        ))
    }

    /// `self + other`: append other's views one at a time, simplifying after each.
    pub fn compose(&self, other: &ShapeTracker) -> Result<ShapeTracker> {
        // One view on each side: the first two merge rules decide without building anything
        // (a contiguous left view yields the right one; a contiguous right view of the same
        // shape yields the left one), exactly as the general path below would.
        if let ([l], [r]) = (&self.views[..], &other.views[..]) {
            if l.contiguous {
                return Ok(other.clone());
            }
            if r.contiguous && r.shape == l.shape {
                return Ok(self.clone());
            }
        }
        let mut ret = self.clone();
        for v in other.views.iter() {
            let mut views = ret.views.to_vec();
            views.push(v.clone());
            ret = ShapeTracker {
                views: views.into(),
            }
            .simplify()?;
        }
        Ok(ret)
    }

    /// Merge the last two views while they merge.
    pub fn simplify(&self) -> Result<ShapeTracker> {
        if self.views.len() < 2 {
            return Ok(self.clone());
        }
        let mut views = self.views.to_vec();
        while views.len() >= 2 {
            let n = views.len();
            match views[n - 2].merge(&views[n - 1])? {
                Some(v) => {
                    views.truncate(n - 2);
                    views.push(v);
                }
                None => break,
            }
        }
        Ok(ShapeTracker {
            views: views.into(),
        })
    }

    /// Undo permutes, flips and pad/shrinks of every view, ending in `out_shape`; `None` when a
    /// view is not invertible (expand, real stride).
    pub fn invert(&self, out_shape: &[Sint]) -> Result<Option<ShapeTracker>> {
        let n = self.views.len();
        let mut inverted = Vec::with_capacity(n);
        for i in (0..n).rev() {
            let target = if i == 0 {
                out_shape
            } else {
                self.views[i - 1].shape.as_slice()
            };
            match self.views[i].invert(target)? {
                Some(v) => inverted.push(v),
                None => return Ok(None),
            }
        }
        ShapeTracker {
            views: inverted.into(),
        }
        .reshape(out_shape)
        .map(Some)
    }

    /// The buffer index and validity of the element at `idxs` (default: Variables `idx{i}` in
    /// `[0, s-1]`). The index expression must fit in int32.
    pub fn expr_idxs(&self, idxs: Option<&[Node]>) -> Result<(Node, Node)> {
        let last = self.last()?;
        let idxs = match idxs {
            Some(i) => i.to_vec(),
            None => default_idxs(&last.shape)?,
        };
        let (mut idx, mut valid) = expr_view(last, &idxs, None)?;
        for view in self.views[..self.views.len() - 1].iter().rev() {
            if *valid.max() == 0 {
                return Ok((Node::Num(-1), valid));
            }
            let view = view.minify()?;
            let mut acc = Node::Num(1);
            let mut vidxs = Vec::with_capacity(view.shape.len());
            for d in view.shape.iter().rev() {
                vidxs.push(idx.floordiv(&acc)?.modulo(d)?);
                acc = acc.try_mul(d)?;
            }
            vidxs.reverse();
            (idx, valid) = expr_view(&view, &vidxs, Some(valid))?;
        }
        if let Node::Num(lo) = idx.min() {
            ensure!(
                *lo >= -(1i64 << 31),
                Shape,
                "expr_idxs: idx.min too small. idx={idx:?}, idx.min={lo}"
            );
        }
        if let Node::Num(hi) = idx.max() {
            ensure!(
                *hi < (1i64 << 31),
                Shape,
                "expr_idxs: idx.max too big. idx={idx:?}, idx.max={hi}"
            );
        }
        Ok((idx, valid))
    }

    /// The buffer index and validity of flat element `idx` of the visible shape.
    pub fn expr_node(&self, idx: &Node) -> Result<(Node, Node)> {
        let shape = self.shape().to_vec();
        let mut acc = Node::Num(1);
        let mut idxs = Vec::with_capacity(shape.len());
        for d in shape.iter().rev() {
            idxs.push(idx.floordiv(&acc)?.modulo(d)?);
            acc = acc.try_mul(d)?;
        }
        idxs.reverse();
        self.expr_idxs(Some(&idxs))
    }

    /// The stride of each dim in the final index expression: `None` when the dim is not a plain
    /// multiple (or, unless `ignore_valid`, appears in the validity), 0 when it does not appear.
    pub fn real_strides(&self, ignore_valid: bool) -> Result<Vec<Option<Sint>>> {
        let last = self.last()?;
        if self.views.len() == 1 && last.mask.is_none() {
            return Ok(last.strides.iter().cloned().map(Some).collect());
        }
        let idxs = default_idxs(&last.shape)?;
        let (idx, valid) = self.expr_idxs(Some(&idxs))?;
        let mut ret: Vec<Option<Sint>> = vec![None; last.shape.len()];
        let mut bad_idx_vars: crate::helpers::FxHashSet<Node> = Default::default();
        let terms = match idx.inner() {
            Some(Kind::Sum(n)) => n.clone(),
            _ => vec![idx.clone()],
        };
        for this_dim in terms {
            let (idx_maybe, stride_maybe) = match this_dim.inner() {
                Some(Kind::Mul(a, b)) => (a.clone(), b.clone()),
                _ => (this_dim.clone(), Node::Num(1)),
            };
            match idxs.iter().position(|x| *x == idx_maybe) {
                Some(i) => ret[i] = Some(stride_maybe),
                None => bad_idx_vars.extend(idx_maybe.vars()),
            }
        }
        let idx_vars: crate::helpers::FxHashSet<Node> = idx.vars().into_iter().collect();
        let valid_vars: crate::helpers::FxHashSet<Node> = valid.vars().into_iter().collect();
        for (i, tidx) in idxs.iter().enumerate() {
            if bad_idx_vars.contains(tidx) || (valid_vars.contains(tidx) && !ignore_valid) {
                ret[i] = None;
            } else if !idx_vars.contains(tidx) {
                ret[i] = Some(Node::Num(0));
            }
        }
        Ok(ret)
    }

    /// Dims whose real stride is 1.
    pub fn unit_stride_axes(&self, ignore_valid: bool) -> Result<Vec<usize>> {
        Ok(unit_stride_dims(&self.real_strides(ignore_valid)?))
    }

    /// Whether `idx{axis}` appears in the validity expression.
    pub fn axis_is_masked(&self, axis: usize) -> Result<bool> {
        let name = format!("idx{axis}");
        Ok(self.valid_var_names()?.contains(&name))
    }

    /// The names of the Variables in the validity expression (of `expr_idxs(None)`).
    pub fn valid_var_names(&self) -> Result<Vec<String>> {
        let (_, valid) = self.expr_idxs(None)?;
        Ok(valid
            .vars()
            .iter()
            .filter_map(|v| v.expr().map(str::to_string))
            .collect())
    }

    // *** movement ops ***

    fn with_last(&self, v: View) -> ShapeTracker {
        let n = self.views.len().saturating_sub(1);
        let views: Arc<[View]> = self.views[..n]
            .iter()
            .cloned()
            .chain(std::iter::once(v))
            .collect();
        ShapeTracker { views }
    }

    /// Pad every dim by `(before, after)`.
    pub fn pad(&self, arg: &[(Sint, Sint)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last()?.pad(arg)?))
    }
    /// Keep `[begin, end)` of every dim.
    pub fn shrink(&self, arg: &[(Sint, Sint)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last()?.shrink(arg)?))
    }
    /// Broadcast size-1 dims.
    pub fn expand(&self, new_shape: &[Sint]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last()?.expand(new_shape)?))
    }
    /// Reorder dims.
    pub fn permute(&self, axis: &[usize]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last()?.permute(axis)?))
    }
    /// Strided/flipped access per dim.
    pub fn stride(&self, mul: &[i64]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last()?.stride(mul)?))
    }
    /// Reshape the last view in place when possible (and `MERGE_VIEW` is on), else append a
    /// contiguous view of `new_shape`.
    pub fn reshape(&self, new_shape: &[Sint]) -> Result<ShapeTracker> {
        static MERGE_VIEW: Knob = Knob::new("MERGE_VIEW", 1);
        if MERGE_VIEW.get() != 0 {
            if let Some(v) = self.last()?.reshape(new_shape)? {
                return Ok(self.with_last(v));
            }
        } else if let (Ok(a), Ok(b)) = (sint_prod(self.shape()), sint_prod(new_shape)) {
            // tinygrad appends without checking; an int size mismatch is refused here
            ensure!(
                !(a.is_int() && b.is_int()) || a == b,
                InvalidArgument,
                "reshape: cannot reshape {} to {}: element counts differ",
                render_shape(self.shape()),
                render_shape(new_shape)
            );
        }
        let mut views = self.views.to_vec();
        views.push(View::from_shape(new_shape)?);
        Ok(ShapeTracker {
            views: views.into(),
        })
    }
}

/// tinygrad's `merge_dicts` for one entry: the same Variable must not have two values.
fn merge_var_val(out: &mut VarVals, k: Node, v: i64) -> Result<()> {
    if let Some(old) = out.get(&k) {
        ensure!(
            *old == v,
            Shape,
            "cannot merge var_vals: {k:?} has values {old} and {v}"
        );
    }
    out.insert(k, v);
    Ok(())
}
