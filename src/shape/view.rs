//! One strided, offset, optionally masked view of a buffer: tinygrad 0.9.1's `shape/view.py`.
//!
//! Element `i` of a [`View`] lives at `offset + sum(i_d * strides_d)` of the underlying buffer when
//! every `mask_d.0 <= i_d < mask_d.1`, else it reads as the padding value. [`View::create`] puts a
//! view in canonical form (size-1 dims get stride 0, a full mask is dropped, single-valid-index
//! dims are folded into the offset), which decides whether views merge downstream.
//!
//! Movement ops validate their arguments and return an error naming the op and the arguments.
//! [`View::reshape`] returns `Ok(None)` when the reshape needs a new view; [`View::merge`]
//! (`vm2 + vm1`) returns `Ok(None)` when two views cannot be expressed as one.
//!
//! Not guaranteed: symbolic masks and strides are handled as tinygrad handles them (comparisons
//! through the truthiness of symbolic comparison nodes), which is conservative, not complete.

use std::collections::HashMap;

use crate::shape::symbolic::{
    py_ge, py_gt, py_le, py_lt, py_max2, py_min2, render_shape, sint_prod, sint_sum, Node, Sint,
    VarVals,
};
use crate::{bail, ensure, Result};

mod merge;
mod reshape;
#[cfg(test)]
mod tests;

pub(crate) use reshape::merge_dims;

/// A (begin, end) valid range per dimension.
pub type Mask = Vec<(Sint, Sint)>;

/// A strided view of a buffer (tinygrad's frozen dataclass `View`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct View {
    pub shape: Vec<Sint>,
    pub strides: Vec<Sint>,
    pub offset: Sint,
    pub mask: Option<Mask>,
    pub contiguous: bool,
}

/// Size-1 dims get stride 0.
pub fn canonicalize_strides(shape: &[Sint], strides: &[Sint]) -> Vec<Sint> {
    shape
        .iter()
        .zip(strides)
        .map(|(s, st)| if *s == 1 { Node::Num(0) } else { st.clone() })
        .collect()
}

/// Row-major strides of `shape`, canonicalized.
pub fn strides_for_shape(shape: &[Sint]) -> Result<Vec<Sint>> {
    let mut strides = vec![Node::Num(0); shape.len()];
    let mut acc = Node::Num(1);
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            strides[i] = acc.clone();
        }
        if i > 0 {
            acc = acc.try_mul(&shape[i])?;
        }
    }
    Ok(strides)
}

/// Whether `strides` are [`strides_for_shape`]`(shape)` (computed without allocating).
fn is_row_major(shape: &[Sint], strides: &[Sint]) -> Result<bool> {
    if shape.len() != strides.len() {
        return Ok(false);
    }
    let mut acc = Node::Num(1);
    for i in (0..shape.len()).rev() {
        let want_zero = shape[i] == 1;
        if (want_zero && strides[i] != 0) || (!want_zero && strides[i] != acc) {
            return Ok(false);
        }
        if i > 0 {
            acc = acc.try_mul(&shape[i])?;
        }
    }
    Ok(true)
}

/// Unravel a flat offset into per-dim indices of `shape` (tinygrad's `un1d`).
pub(crate) fn un1d(shape: &[Sint], offs: &Sint) -> Result<Vec<Sint>> {
    let mut offs = offs.clone();
    let mut out = Vec::with_capacity(shape.len());
    for stride in strides_for_shape(shape)? {
        let here = if stride.truthy() {
            offs.floordiv(&stride)?
        } else {
            Node::Num(0)
        };
        offs = offs.try_sub(&here.try_mul(&stride)?)?;
        out.push(here);
    }
    Ok(out)
}

fn render_mask(mask: &[(Sint, Sint)]) -> String {
    let parts: Vec<String> = mask
        .iter()
        .map(|(b, e)| format!("({b:?}, {e:?})"))
        .collect();
    format!("({})", parts.join(", "))
}

impl View {
    /// tinygrad's `View.create`: build a view in canonical form. `strides` default (or when
    /// empty) to row-major.
    pub fn create(
        shape: &[Sint],
        strides: Option<&[Sint]>,
        offset: Sint,
        mask: Option<&[(Sint, Sint)]>,
    ) -> Result<View> {
        let shape_s = || render_shape(shape);
        let mut strides = match strides {
            Some(st) if !st.is_empty() => {
                ensure!(
                    st.len() == shape.len(),
                    InvalidArgument,
                    "View.create: strides {} for shape {}",
                    render_shape(st),
                    shape_s()
                );
                canonicalize_strides(shape, st)
            }
            _ => strides_for_shape(shape)?,
        };
        if shape.iter().any(|s| *s == 0) {
            let zeros = vec![Node::Num(0); shape.len()];
            return Ok(View {
                shape: shape.to_vec(),
                strides: zeros,
                offset: Node::Num(0),
                mask: None,
                contiguous: true,
            });
        }
        if let Some(m) = mask {
            ensure!(
                m.len() == shape.len(),
                InvalidArgument,
                "View.create: mask {} for shape {}",
                render_mask(m),
                shape_s()
            );
        }
        let mut mask: Option<Mask> = mask.map(<[_]>::to_vec);
        if mask
            .as_ref()
            .is_some_and(|m| m.iter().zip(shape).all(|((b, e), s)| *b == 0 && e == s))
        {
            mask = None;
        }
        let mut offset = offset;
        fold_single_index_dims(shape, &mut strides, &mut offset, &mut mask)?;
        let contiguous = offset == 0 && mask.is_none() && is_row_major(shape, &strides)?;
        Ok(View {
            shape: shape.to_vec(),
            strides,
            offset,
            mask,
            contiguous,
        })
    }

    /// A contiguous row-major view of `shape`.
    pub fn from_shape(shape: &[Sint]) -> Result<View> {
        View::create(shape, None, Node::Num(0), None)
    }

    /// Element count, symbolic dims counted at their max.
    pub fn size(&self) -> Result<i64> {
        let prod = self
            .shape
            .iter()
            .try_fold(Node::Num(1), |acc, x| acc.try_mul(x.max()))?;
        match prod {
            Node::Num(v) => Ok(v),
            r => bail!(
                Shape,
                "View.size: {r:?} of shape {} is not an int",
                render_shape(&self.shape)
            ),
        }
    }

    fn all_sints(&self) -> impl Iterator<Item = &Sint> {
        let mask = self.mask.iter().flatten().flat_map(|(b, e)| [b, e]);
        self.shape
            .iter()
            .chain(&self.strides)
            .chain(std::iter::once(&self.offset))
            .chain(mask)
    }

    /// Whether every shape, stride, offset and mask bound is an integer (no Variables).
    pub fn is_all_int(&self) -> bool {
        let mask_int = self
            .mask
            .as_ref()
            .map_or(true, |m| m.iter().all(|(b, e)| b.is_int() && e.is_int()));
        self.offset.is_int()
            && self.shape.iter().all(Sint::is_int)
            && self.strides.iter().all(Sint::is_int)
            && mask_int
    }

    /// The Variables in shape, strides, offset and mask, in first-seen order.
    pub fn vars(&self) -> Vec<Node> {
        let mut out = Vec::new();
        let mut seen = crate::helpers::FxHashSet::default();
        for x in self.all_sints() {
            x.collect_vars(&mut out, &mut seen);
        }
        out
    }

    /// Replace bound Variables by unbound ones; returns their values. (Unbound Variables are left
    /// alone; tinygrad would assert on them.)
    pub fn unbind(&self) -> Result<(View, VarVals)> {
        let mut map = HashMap::new();
        let mut vals = VarVals::new();
        for v in self.vars() {
            if let (u, Some(val)) = v.unbind()? {
                map.insert(v, u.clone());
                vals.insert(u, val);
            }
        }
        let sub = |x: &Sint| {
            if x.is_int() {
                Ok(x.clone())
            } else {
                x.substitute(&map)
            }
        };
        let shape = self.shape.iter().map(sub).collect::<Result<Vec<_>>>()?;
        let strides = self.strides.iter().map(sub).collect::<Result<Vec<_>>>()?;
        let offset = sub(&self.offset)?;
        let mask = match &self.mask {
            Some(m) => Some(
                m.iter()
                    .map(|(b, e)| Ok((sub(b)?, sub(e)?)))
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => None,
        };
        Ok((
            View::create(&shape, Some(&strides), offset, mask.as_deref())?,
            vals,
        ))
    }

    /// Shift by `(-before, size+after)` with a new mask `(before, before+size)`.
    pub fn pad(&self, arg: &[(Sint, Sint)]) -> Result<View> {
        let zero = Node::Num(0);
        let mut ok = arg.len() == self.shape.len();
        for (b, e) in arg {
            ok = ok && py_ge(b, &zero)? && py_ge(e, &zero)?;
        }
        ensure!(
            ok,
            InvalidArgument,
            "pad: invalid padding {} for shape {}",
            render_mask(arg),
            render_shape(&self.shape)
        );
        if !arg.iter().any(|(b, e)| b.truthy() || e.truthy()) {
            return Ok(self.clone());
        }
        let mut zvarg = Vec::with_capacity(arg.len());
        let mut mask = Vec::with_capacity(arg.len());
        for (s, (b, e)) in self.shape.iter().zip(arg) {
            zvarg.push((b.try_neg()?, s.try_add(e)?));
            mask.push((b.clone(), s.try_add(b)?));
        }
        self.unsafe_resize(&zvarg, Some(mask))
    }

    /// Keep `[begin, end)` of every dimension.
    pub fn shrink(&self, arg: &[(Sint, Sint)]) -> Result<View> {
        let mut ok = arg.len() == self.shape.len();
        for (s, (b, e)) in self.shape.iter().zip(arg) {
            ok = ok && py_le(&Node::Num(0), b)? && py_le(b, e)? && py_le(e, s)?;
        }
        ensure!(
            ok,
            InvalidArgument,
            "shrink: invalid shrink {} for shape {}",
            render_mask(arg),
            render_shape(&self.shape)
        );
        self.unsafe_resize(arg, None)
    }

    fn unsafe_resize(&self, arg: &[(Sint, Sint)], mask: Option<Mask>) -> Result<View> {
        let terms = self
            .strides
            .iter()
            .zip(arg)
            .map(|(s, (b, _))| s.try_mul(b))
            .collect::<Result<Vec<_>>>()?;
        let offset = sint_sum(&terms)?;
        let zero = Node::Num(0);
        let mut mask = mask;
        if let Some(old) = &self.mask {
            let mut nmask = Vec::with_capacity(old.len());
            for ((mx, my), (ax, ay)) in old.iter().zip(arg) {
                let width = ay.try_sub(ax)?;
                let lo = py_max2(&zero, &py_min2(&mx.try_sub(ax)?, &width)?)?;
                let hi = py_max2(&zero, &py_min2(&my.try_sub(ax)?, &width)?)?;
                nmask.push((lo, hi));
            }
            mask = Some(match mask {
                Some(m) => {
                    let mut merged = Vec::with_capacity(m.len());
                    for ((mx1, my1), (mx2, my2)) in nmask.iter().zip(&m) {
                        merged.push((py_max2(mx1, mx2)?, py_min2(my1, my2)?));
                    }
                    merged
                }
                None => nmask,
            });
        }
        let shape = arg
            .iter()
            .map(|(x, y)| y.try_sub(x))
            .collect::<Result<Vec<_>>>()?;
        if mask
            .as_ref()
            .is_some_and(|m| m.iter().zip(&shape).all(|((b, e), s)| *b == 0 && e == s))
        {
            mask = None;
        }
        View::create(
            &shape,
            Some(&self.strides),
            self.offset.try_add(&offset)?,
            mask.as_deref(),
        )
    }

    /// Grow size-1 (stride-0) dims to `new_shape`.
    pub fn expand(&self, new_shape: &[Sint]) -> Result<View> {
        let err = || {
            format!(
                "expand: can't expand {} into {}",
                render_shape(&self.shape),
                render_shape(new_shape)
            )
        };
        ensure!(
            new_shape.len() == self.shape.len(),
            InvalidArgument,
            "{}: different number of dimensions",
            err()
        );
        if self.shape.iter().any(|s| *s == 0) {
            for (s, x) in self.shape.iter().zip(new_shape) {
                let ok = (s == x && *x == 0) || (py_gt(s, &Node::Num(0))? && x.modulo(s)? == 0);
                ensure!(ok, InvalidArgument, "{}", err());
            }
            return View::from_shape(new_shape);
        }
        for ((s, x), st) in self.shape.iter().zip(new_shape).zip(&self.strides) {
            ensure!(
                s == x || (*s == 1 && *st == 0),
                InvalidArgument,
                "{}",
                err()
            );
        }
        let mask = self.mask.as_ref().map(|m| {
            m.iter()
                .zip(self.shape.iter().zip(new_shape))
                .map(|((b, e), (s, ns))| {
                    if s == ns {
                        (b.clone(), e.clone())
                    } else if *b == 0 && *e == 1 {
                        (Node::Num(0), ns.clone())
                    } else {
                        (Node::Num(0), Node::Num(0))
                    }
                })
                .collect::<Vec<_>>()
        });
        View::create(
            new_shape,
            Some(&self.strides),
            self.offset.clone(),
            mask.as_deref(),
        )
    }

    /// Reorder the dimensions: new dim `i` is old dim `axis[i]`.
    pub fn permute(&self, axis: &[usize]) -> Result<View> {
        let mut sorted = axis.to_vec();
        sorted.sort_unstable();
        ensure!(
            sorted.iter().copied().eq(0..self.shape.len()),
            InvalidArgument,
            "permute: invalid permutation {axis:?} of shape {}",
            render_shape(&self.shape)
        );
        let shape: Vec<Sint> = axis.iter().map(|&a| self.shape[a].clone()).collect();
        let strides: Vec<Sint> = axis.iter().map(|&a| self.strides[a].clone()).collect();
        let mask = self
            .mask
            .as_ref()
            .map(|m| axis.iter().map(|&a| m[a].clone()).collect::<Vec<_>>());
        View::create(&shape, Some(&strides), self.offset.clone(), mask.as_deref())
    }

    /// Take every `|m|`-th element of each dim, flipping dims with negative `m`.
    pub fn stride(&self, mul: &[i64]) -> Result<View> {
        ensure!(
            mul.len() == self.shape.len() && mul.iter().all(|&m| m != 0 && m != i64::MIN),
            InvalidArgument,
            "stride: invalid stride {mul:?} for shape {}",
            render_shape(&self.shape)
        );
        let mut strides = Vec::with_capacity(mul.len());
        let mut shape = Vec::with_capacity(mul.len());
        let mut offset_terms = Vec::new();
        for ((s, z), &m) in self.shape.iter().zip(&self.strides).zip(mul) {
            let am = Node::Num(m.abs());
            let am1 = am.try_sub(&Node::Num(1))?;
            strides.push(z.try_mul(&Node::Num(m))?);
            shape.push(s.try_add(&am1)?.floordiv(&am)?);
            if m < 0 {
                offset_terms.push(s.try_sub(&Node::Num(1))?.try_mul(z)?);
            }
        }
        let mask = match &self.mask {
            Some(old) => {
                let mut out = Vec::with_capacity(old.len());
                for (((mx, my), s), &m) in old.iter().zip(&self.shape).zip(mul) {
                    let am = Node::Num(m.abs());
                    let am1 = am.try_sub(&Node::Num(1))?;
                    let (lo, hi) = if m > 0 {
                        (mx.clone(), my.clone())
                    } else {
                        (s.try_sub(my)?, s.try_sub(mx)?)
                    };
                    out.push((
                        lo.try_add(&am1)?.floordiv(&am)?,
                        hi.try_add(&am1)?.floordiv(&am)?,
                    ));
                }
                Some(out)
            }
            None => None,
        };
        let offset = self.offset.try_add(&sint_sum(&offset_terms)?)?;
        View::create(&shape, Some(&strides), offset, mask.as_deref())
    }

    /// tinygrad's `View.invert`: undo permutes, flips and pad/shrink of this view, if the result
    /// has as many elements as `out_shape` (expands and real strides cannot be inverted).
    pub fn invert(&self, out_shape: &[Sint]) -> Result<Option<View>> {
        let mut ret = View::from_shape(&self.shape)?;
        if let Some(m) = &self.mask {
            ret = ret.shrink(m)?;
        }
        let zero = Node::Num(0);
        let mut flips = Vec::with_capacity(self.strides.len());
        let mut keys = Vec::with_capacity(self.strides.len());
        for x in &self.strides {
            flips.push(if py_lt(x, &zero)? { -1 } else { 1 });
            keys.push(if py_gt(x, &zero)? {
                x.try_neg()?
            } else {
                x.clone()
            });
        }
        let order = argsort(&keys)?;
        ret = ret.stride(&flips)?.permute(&order)?;
        Ok(if sint_prod(&ret.shape)? == sint_prod(out_shape)? {
            Some(ret)
        } else {
            None
        })
    }

    /// Reshape to the fewest dims that describe the same view (if that reshape works).
    pub fn minify(&self) -> Result<View> {
        let min_shape: Vec<Sint> = merge_dims(&self.shape, &self.strides, self.mask.as_deref())?
            .into_iter()
            .map(|x| x.0)
            .collect();
        Ok(self.reshape(&min_shape)?.unwrap_or_else(|| self.clone()))
    }
}

/// `View.create` rule 4: a masked dim with at most one valid index gets stride 0 and its offset
/// folded in; an empty mask dim masks the whole view out.
fn fold_single_index_dims(
    shape: &[Sint],
    strides: &mut Vec<Sint>,
    offset: &mut Sint,
    mask: &mut Option<Mask>,
) -> Result<()> {
    let Some(m) = mask.clone().filter(|m| !m.is_empty()) else {
        return Ok(());
    };
    let mut elim = Vec::with_capacity(m.len());
    for (b, e) in &m {
        elim.push(!py_lt(&b.try_add(&Node::Num(1))?, e)?);
    }
    if !elim.iter().any(|&x| x) {
        return Ok(());
    }
    let mut empty = false;
    for (b, e) in &m {
        empty |= !py_lt(b, e)?;
    }
    if empty {
        *strides = vec![Node::Num(0); shape.len()];
        *offset = Node::Num(0);
        *mask = Some(vec![(Node::Num(0), Node::Num(0)); shape.len()]);
    }
    let cur = mask.as_deref().unwrap_or(&m);
    let mut terms = Vec::with_capacity(m.len());
    for (i, &e) in elim.iter().enumerate() {
        terms.push(if e {
            strides[i].try_mul(&cur[i].0)?
        } else {
            Node::Num(0)
        });
    }
    *offset = offset.try_add(&sint_sum(&terms)?)?;
    for (st, &e) in strides.iter_mut().zip(&elim) {
        if e {
            *st = Node::Num(0);
        }
    }
    Ok(())
}

/// A stable argsort by Python `<` (a stable insertion sort, so symbolic keys compare as tinygrad
/// compares them).
fn argsort(keys: &[Sint]) -> Result<Vec<usize>> {
    let mut order: Vec<usize> = Vec::with_capacity(keys.len());
    for i in 0..keys.len() {
        let mut pos = order.len();
        while pos > 0 && py_lt(&keys[i], &keys[order[pos - 1]])? {
            pos -= 1;
        }
        order.insert(pos, i);
    }
    Ok(order)
}
