//! `View.reshape` with tinygrad's `_merge_dims` and `_reshape_mask`.

use super::{canonicalize_strides, render_shape, Mask, View};
use crate::shape::symbolic::{
    all_int, py_ge, py_le, py_lt, sint_prod, sint_sum, sym_infer, Node, Sint, VarVals,
};
use crate::{bail, ensure, Result};

/// One merged block of a view: (size, stride, size without the expanded part).
pub(crate) type MergedDim = (Sint, Sint, Sint);

/// tinygrad's `_merge_dims`: collapse dims whose strides chain (or that a mask pins to one
/// index) into maximal blocks.
pub(crate) fn merge_dims(
    shape: &[Sint],
    strides: &[Sint],
    mask: Option<&[(Sint, Sint)]>,
) -> Result<Vec<MergedDim>> {
    if shape.is_empty() {
        return Ok(Vec::new());
    }
    ensure!(
        strides.len() == shape.len() && mask.map_or(true, |m| m.len() == shape.len()),
        Internal,
        "_merge_dims: shape {} with strides {}",
        render_shape(shape),
        render_shape(strides)
    );
    let pre = |s: &Sint, st: &Sint| if st.truthy() { s.clone() } else { Node::Num(0) };
    let single = |i: usize, s: &Sint| -> Result<bool> {
        Ok(match mask {
            Some(m) => m[i].1.try_sub(&m[i].0)? == 1,
            None => *s == 1,
        })
    };
    let mut ret: Vec<MergedDim> = vec![(
        shape[0].clone(),
        strides[0].clone(),
        pre(&shape[0], &strides[0]),
    )];
    let mut merging = single(0, &shape[0])?;
    for i in 1..shape.len() {
        let (s, st) = (&shape[i], &strides[i]);
        if *s == 1 {
            continue;
        }
        let Some(last) = ret.last_mut() else {
            bail!(Internal, "_merge_dims: empty result")
        };
        if merging || last.1 == s.try_mul(st)? {
            let real = if !st.truthy() {
                Node::Num(0)
            } else if merging {
                s.clone()
            } else {
                last.2.try_mul(s)?
            };
            *last = (last.0.try_mul(s)?, st.clone(), real);
        } else {
            ret.push((s.clone(), st.clone(), pre(s, st)));
        }
        merging = single(i, s)?;
    }
    Ok(ret)
}

/// Pull the next element of a reversed sequence, or a default once it is exhausted.
struct Rev<'a, T: Clone> {
    items: &'a [T],
    pos: usize,
    default: T,
    exhausted_steps: usize,
}

impl<'a, T: Clone> Rev<'a, T> {
    fn new(items: &'a [T], default: T) -> Self {
        Rev {
            pos: items.len(),
            items,
            default,
            exhausted_steps: 0,
        }
    }
    fn next(&mut self) -> T {
        if self.pos == 0 {
            self.exhausted_steps += 1;
            return self.default.clone();
        }
        self.pos -= 1;
        self.items[self.pos].clone()
    }
    fn rest(&self) -> &'a [T] {
        &self.items[..self.pos]
    }
}

type MaskResult = (Option<Mask>, bool);

fn invalid_mask(n: usize) -> MaskResult {
    (Some(vec![(Node::Num(0), Node::Num(0)); n]), false)
}

fn empty_range(m: &(Sint, Sint)) -> Result<bool> {
    py_lt(&m.1.try_sub(&m.0)?, &Node::Num(1))
}

/// What one step of the mask walk decided.
enum Step {
    Go,
    /// The mask cannot be expressed in the new shape (the reshape needs a new view).
    Fail,
    /// An empty range: every element is masked out.
    Invalid,
}

/// The state of `_reshape_mask`'s walk over old and new dims from the right.
struct MaskWalk<'a> {
    r_masks: Rev<'a, (Sint, Sint)>,
    r_shape: Rev<'a, Sint>,
    r_new_shape: Rev<'a, Sint>,
    new_mask: Mask,
    curr_stride: Sint,
    old_dim: Sint,
    new_dim: Sint,
    m: (Sint, Sint),
}

impl MaskWalk<'_> {
    fn step(&mut self) -> Result<Step> {
        let one = Node::Num(1);
        let (l, r) = self.m.clone();
        let next_stride = self.new_dim.try_mul(&self.curr_stride)?;
        let r1 = r.try_sub(&one)?;
        if !py_ge(&self.old_dim, &next_stride)? {
            // combine with the next old dim if the mask can unfold continuously
            let next_mask = self.r_masks.next();
            let full = l == 0 && r == self.old_dim;
            if !full && next_mask.1.try_sub(&next_mask.0)? != 1 {
                return Ok(Step::Fail);
            }
            self.m = (
                next_mask.0.try_mul(&self.old_dim)?.try_add(&l)?,
                next_mask
                    .1
                    .try_sub(&one)?
                    .try_mul(&self.old_dim)?
                    .try_add(&r)?,
            );
            self.old_dim = self.old_dim.try_mul(&self.r_shape.next())?;
            return Ok(Step::Go);
        }
        if self.old_dim == next_stride {
            // copy the mask and move to the next old dim
            let hi = r1.floordiv(&self.curr_stride)?.try_add(&one)?;
            self.new_mask.push((l.floordiv(&self.curr_stride)?, hi));
            self.curr_stride = one;
            self.old_dim = self.r_shape.next();
            self.new_dim = self.r_new_shape.next();
            self.m = self.r_masks.next();
            return Ok(if empty_range(&self.m)? {
                Step::Invalid
            } else {
                Step::Go
            });
        }
        // split: only if the reshape does not cut across the valid range
        let cuts = (l.modulo(&next_stride)? != 0 || r.modulo(&next_stride)? != 0)
            && l.floordiv(&next_stride)? != r1.floordiv(&next_stride)?;
        if cuts || self.old_dim.modulo(&next_stride)? != 0 {
            return Ok(Step::Fail);
        }
        let lo = l.modulo(&next_stride)?.floordiv(&self.curr_stride)?;
        let hi = r1
            .modulo(&next_stride)?
            .floordiv(&self.curr_stride)?
            .try_add(&one)?;
        self.new_mask.push((lo, hi));
        self.curr_stride = next_stride;
        self.new_dim = self.r_new_shape.next();
        Ok(Step::Go)
    }

    fn exhausted_steps(&self) -> usize {
        self.r_shape.exhausted_steps
            + self.r_new_shape.exhausted_steps
            + self.r_masks.exhausted_steps
    }
}

/// tinygrad's `_reshape_mask`: the mask in the new shape, and whether it cannot be expressed
/// (`true` means the reshape needs a new view).
fn reshape_mask(view: &View, new_shape: &[Sint]) -> Result<MaskResult> {
    let Some(mask) = &view.mask else {
        return Ok((None, false));
    };
    if mask.iter().any(|(b, e)| !b.is_int() || !e.is_int()) {
        return Ok((Some(mask.clone()), true));
    }
    let one = Node::Num(1);
    let mut r_masks = Rev::new(mask, (Node::Num(0), one.clone()));
    let mut r_shape = Rev::new(&view.shape, one.clone());
    let mut r_new_shape = Rev::new(new_shape, one.clone());
    let (old_dim, new_dim, m) = (r_shape.next(), r_new_shape.next(), r_masks.next());
    if empty_range(&m)? {
        return Ok(invalid_mask(new_shape.len()));
    }
    let new_mask = Vec::with_capacity(new_shape.len());
    let mut w = MaskWalk {
        r_masks,
        r_shape,
        r_new_shape,
        new_mask,
        curr_stride: one,
        old_dim,
        new_dim,
        m,
    };
    // a guard against non-terminating walks on inconsistent symbolic sizes
    let limit = 4 * (view.shape.len() + new_shape.len()) + 16;
    while w.new_mask.len() < new_shape.len() {
        if w.exhausted_steps() > limit {
            return Ok((Some(mask.clone()), true));
        }
        match w.step()? {
            Step::Go => {}
            Step::Fail => return Ok((Some(mask.clone()), true)),
            Step::Invalid => return Ok(invalid_mask(new_shape.len())),
        }
    }
    // leading old dims must be unmasked size-1 dims
    if w.r_masks.rest().iter().any(|(b, e)| !(*b == 0 && *e == 1)) {
        return Ok(invalid_mask(new_shape.len()));
    }
    w.new_mask.reverse();
    Ok((Some(w.new_mask), false))
}

impl View {
    /// tinygrad's `View.reshape`: `Ok(None)` when the view cannot be reshaped in place.
    pub fn reshape(&self, new_shape: &[Sint]) -> Result<Option<View>> {
        if self.shape == new_shape {
            return Ok(Some(self.clone()));
        }
        // rendered only for an error message
        let old_s = || render_shape(&self.shape);
        let new_s = || render_shape(new_shape);
        for x in new_shape {
            ensure!(
                py_ge(x, &Node::Num(0))?,
                InvalidArgument,
                "reshape: shape can't contain negative numbers {}",
                new_s()
            );
        }
        if self.shape.iter().any(|s| *s == 0) {
            ensure!(
                new_shape.iter().any(|s| *s == 0),
                InvalidArgument,
                "reshape: cannot reshape 0 size {} to {}",
                old_s(),
                new_s()
            );
            return View::from_shape(new_shape).map(Some);
        }
        let self_all_int = all_int(&self.shape);
        if self_all_int {
            let mut vals = Vec::with_capacity(new_shape.len());
            for s in new_shape {
                vals.push(match (s.is_int(), s.is_var(), s.val()) {
                    (true, _, _) => s.clone(),
                    (false, true, Some(v)) => Node::Num(v),
                    (false, true, None) => bail!(
                        InvalidArgument,
                        "reshape: {} -> {}: Variable {s:?} isn't bound",
                        old_s(),
                        new_s()
                    ),
                    _ => bail!(
                        InvalidArgument,
                        "reshape: {} -> {} contains non (int, Variable) dim",
                        old_s(),
                        new_s()
                    ),
                });
            }
            ensure!(
                sint_prod(&self.shape)? == sint_prod(&vals)?,
                InvalidArgument,
                "reshape: cannot reshape {} to {}: element counts differ",
                old_s(),
                new_s()
            );
        }
        if new_shape.is_empty()
            && self
                .mask
                .as_ref()
                .is_some_and(|m| m.iter().any(|(b, e)| b == e))
        {
            return Ok(None);
        }
        if self.contiguous {
            return View::from_shape(new_shape).map(Some);
        }
        if self_all_int && !all_int(new_shape) {
            return self.symbolic_reshape(new_shape).map(Some);
        }
        self.reshape_general(new_shape)
    }

    /// An int-shaped, non-contiguous view given a symbolic shape whose dims each evaluate to the
    /// old dim: the view is kept with the new shape.
    fn symbolic_reshape(&self, new_shape: &[Sint]) -> Result<View> {
        let err = || {
            format!(
                "cannot symbolic reshape non-contiguous {self:?} -> {}",
                render_shape(new_shape)
            )
        };
        ensure!(
            self.shape.len() == new_shape.len(),
            InvalidArgument,
            "reshape: {}",
            err()
        );
        for (si, so) in self.shape.iter().zip(new_shape) {
            if so.is_int() {
                ensure!(si == so, InvalidArgument, "reshape: {}", err());
            } else {
                let mut vv = VarVals::new();
                for v in so.vars() {
                    let (_, val) = v.unbind()?;
                    let Some(val) = val else {
                        bail!(InvalidArgument, "reshape: {}: {v:?} isn't bound", err())
                    };
                    vv.insert(v, val);
                }
                ensure!(
                    *si == sym_infer(so, &vv)?,
                    InvalidArgument,
                    "reshape: {}",
                    err()
                );
            }
        }
        Ok(View {
            shape: new_shape.to_vec(),
            strides: self.strides.clone(),
            offset: self.offset.clone(),
            mask: self.mask.clone(),
            contiguous: self.contiguous,
        })
    }

    /// Strides for the new shape from the merged blocks of the old view (reversed), or `None` if
    /// the new dims do not tile the blocks.
    fn reshape_strides(&self, new_shape: &[Sint]) -> Result<Option<Vec<Sint>>> {
        let mut strides: Vec<Sint> = Vec::with_capacity(new_shape.len());
        let mut r_new = new_shape.iter().rev();
        for (merged_dim, stride0, real_dim) in
            merge_dims(&self.shape, &self.strides, self.mask.as_deref())?
                .iter()
                .rev()
        {
            let mut acc = Node::Num(1);
            let mut new_stride = stride0.clone();
            while py_le(&acc, merged_dim)? && acc != *merged_dim {
                let Some(new_dim) = r_new.next().filter(|d| d.truthy()) else {
                    break;
                };
                strides.push(new_stride.clone());
                if *new_dim != 1 {
                    acc = acc.try_mul(new_dim)?;
                    let f = if py_lt(&acc, real_dim)? {
                        new_dim.clone()
                    } else {
                        Node::Num(0)
                    };
                    new_stride = new_stride.try_mul(&f)?;
                }
            }
            if acc != *merged_dim {
                return Ok(None);
            }
        }
        strides.resize(new_shape.len().max(strides.len()), Node::Num(0));
        strides.reverse();
        Ok(Some(strides))
    }

    fn reshape_general(&self, new_shape: &[Sint]) -> Result<Option<View>> {
        let Some(strides) = self.reshape_strides(new_shape)? else {
            return Ok(None);
        };
        let (new_mask, extra) = reshape_mask(self, new_shape)?;
        if extra {
            return Ok(None);
        }
        let canon_shape: Vec<Sint> = match &new_mask {
            Some(nm) if !nm.is_empty() => nm
                .iter()
                .map(|(b, e)| e.try_sub(b))
                .collect::<Result<_>>()?,
            _ => new_shape.to_vec(),
        };
        let new_strides = canonicalize_strides(&canon_shape, &strides);
        let mask_start = |m: &Option<Mask>, st: &[Sint]| -> Result<Sint> {
            match m {
                Some(m) if !m.is_empty() => {
                    let t = m
                        .iter()
                        .zip(st)
                        .map(|((b, _), s)| b.try_mul(s))
                        .collect::<Result<Vec<_>>>()?;
                    sint_sum(&t)
                }
                _ => Ok(Node::Num(0)),
            }
        };
        let extra_offset = mask_start(&self.mask, &self.strides)?
            .try_sub(&mask_start(&new_mask, &new_strides)?)?;
        let offset = self.offset.try_add(&extra_offset)?;
        View::create(new_shape, Some(&new_strides), offset, new_mask.as_deref()).map(Some)
    }
}
