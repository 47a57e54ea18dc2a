//! The view merge `vm2 + vm1` (tinygrad's `View.__add__`): express "vm1 applied on top of vm2"
//! as one view, or report that it cannot be done.

use super::{un1d, View};
use crate::shape::symbolic::{
    ceil_div, ck_add, ck_sub, py_floordiv, py_ge, py_lt, py_max2, py_min2, sint_sum, Node, Sint,
};
use crate::Result;

/// Per vm2 dim, the vm1 dims that move it and by how much.
type Terms = Vec<Vec<(usize, Sint)>>;

impl View {
    /// `self + vm1` (self is the older view vm2, closer to the buffer): the single view equal to
    /// reading vm1's indices through vm2, or `None` when no single view expresses it.
    pub fn merge(&self, vm1: &View) -> Result<Option<View>> {
        let vm2 = self;
        if vm2.contiguous {
            return Ok(Some(vm1.clone()));
        }
        if vm1.contiguous && vm1.shape == vm2.shape {
            return Ok(Some(vm2.clone()));
        }
        if vm1.contiguous && vm1.size()? == vm2.size()? {
            if let Some(ret) = vm2.reshape(&vm1.shape)? {
                return Ok(Some(ret));
            }
        }
        if let Some(m1) = &vm1.mask {
            return merge_masked(vm2, vm1, m1);
        }
        let (origin, terms, strides) = project(vm2, vm1)?;
        // Merge dimensions in vm2 if required.
        let Some(extents) = merged_extents(vm1, vm2, &terms, &origin)? else {
            return Ok(None);
        };
        let vm2_shape: Vec<Sint> = extents.iter().rev().map(|(s, _)| s.clone()).collect();
        if vm2_shape != vm2.shape {
            return match vm2.reshape(&vm2_shape)? {
                Some(reshaped) => reshaped.merge(vm1),
                None => Ok(None),
            };
        }
        if let Some(m2) = &vm2.mask {
            // Try to project vm2's mask on to vm1.
            let (newb, newe, bad) = project_mask(vm1, m2, &origin, &extents, &terms)?;
            for ((b, e), s) in newb.iter().zip(&newe).zip(&vm1.shape) {
                if *b != 0 || e != s {
                    let mask: Vec<(Sint, Sint)> =
                        newb.iter().cloned().zip(newe.iter().cloned()).collect();
                    let masked = View::create(
                        &vm1.shape,
                        Some(&vm1.strides),
                        vm1.offset.clone(),
                        Some(&mask),
                    )?;
                    return vm2.merge(&masked);
                }
            }
            if bad {
                return Ok(None);
            }
        }
        let off_terms = origin
            .iter()
            .zip(&vm2.strides)
            .map(|(o, s)| o.try_mul(s))
            .collect::<Result<Vec<_>>>()?;
        let offset = sint_sum(&off_terms)?.try_add(&vm2.offset)?;
        View::create(&vm1.shape, Some(&strides), offset, None).map(Some)
    }
}

/// Rule 4: vm1 has a mask. Merge with vm1 shrunk to its mask, then pad back.
fn merge_masked(vm2: &View, vm1: &View, m1: &[(Sint, Sint)]) -> Result<Option<View>> {
    for (b, e) in m1 {
        if !py_lt(b, e)? {
            let n = vm1.shape.len();
            let zeros = vec![Node::Num(0); n];
            let mask = vec![(Node::Num(0), Node::Num(0)); n];
            return View::create(&vm1.shape, Some(&zeros), Node::Num(0), Some(&mask)).map(Some);
        }
    }
    let Some(merged) = vm2.merge(&vm1.shrink(m1)?)? else {
        return Ok(None);
    };
    let pads = m1
        .iter()
        .zip(&vm1.shape)
        .map(|((b, e), s)| Ok((b.clone(), s.try_sub(e)?)))
        .collect::<Result<Vec<_>>>()?;
    merged.pad(&pads).map(Some)
}

/// Rule 5: project vm1's offset and strides on to vm2: the origin (vm1's offset unravelled in
/// vm2), per vm2 dim the moving vm1 dims, and vm1's new strides.
fn project(vm2: &View, vm1: &View) -> Result<(Vec<Sint>, Terms, Vec<Sint>)> {
    let origin = un1d(&vm2.shape, &vm1.offset)?;
    let mut terms: Terms = vec![Vec::new(); origin.len()];
    let mut strides: Vec<Sint> = vec![Node::Num(0); vm1.shape.len()];
    for (d1, st) in vm1.strides.iter().enumerate() {
        if *st == 0 {
            continue;
        }
        let moved = un1d(&vm2.shape, &vm1.offset.try_add(st)?)?;
        for (d2, (o, s1)) in origin.iter().zip(moved).enumerate() {
            let s1 = s1.try_sub(o)?;
            if s1 == 0 {
                continue;
            }
            strides[d1] = strides[d1].try_add(&s1.try_mul(&vm2.strides[d2])?)?;
            terms[d2].push((d1, s1));
        }
    }
    Ok((origin, terms, strides))
}

/// Walk vm2's dims from the right, building each dim's index expression in vm1's index
/// Variables and merging adjacent dims while an expression can leave its dim. Returns the
/// (merged size, expression) blocks from the right, or `None` if an overflow remains.
fn merged_extents(
    vm1: &View,
    vm2: &View,
    terms: &Terms,
    origin: &[Sint],
) -> Result<Option<Vec<(Sint, Node)>>> {
    let mut idxs = Vec::with_capacity(vm1.shape.len());
    for (i, s) in vm1.shape.iter().enumerate() {
        idxs.push(Node::var(&format!("idx{i}"), 0, s.try_sub(&Node::Num(1))?)?);
    }
    let zero = Node::Num(0);
    let (mut merged_size, mut merged_term) = (Node::Num(1), Node::Num(0));
    let mut extents = Vec::with_capacity(vm2.shape.len());
    for ((term, s), o) in terms
        .iter()
        .rev()
        .zip(vm2.shape.iter().rev())
        .zip(origin.iter().rev())
    {
        let parts = term
            .iter()
            .map(|(d1, s1)| idxs[*d1].try_mul(&s1.try_mul(&merged_size)?))
            .collect::<Result<Vec<_>>>()?;
        let t = Node::sum(parts)?.try_add(&o.try_mul(&merged_size)?)?;
        merged_term = merged_term.try_add(&t)?;
        merged_size = merged_size.try_mul(s)?;
        if !py_ge(&merged_term, &merged_size)? && !py_lt(&merged_term, &zero)? {
            extents.push((merged_size, merged_term));
            (merged_size, merged_term) = (Node::Num(1), Node::Num(0));
        }
    }
    Ok(if merged_term.truthy() {
        None
    } else {
        Some(extents)
    })
}

/// Translate vm2's mask into per-vm1-dim bounds: `(begins, ends, bad)`.
fn project_mask(
    vm1: &View,
    m2: &[(Sint, Sint)],
    origin: &[Sint],
    extents: &[(Sint, Node)],
    terms: &Terms,
) -> Result<(Vec<Sint>, Vec<Sint>, bool)> {
    let mut newb: Vec<Sint> = vec![Node::Num(0); vm1.shape.len()];
    let mut newe: Vec<Sint> = vm1.shape.clone();
    let mut bad = false;
    for (d2, (((b, e), o), (_, t))) in m2.iter().zip(origin).zip(extents.iter().rev()).enumerate() {
        if !(py_lt(t.min(), b)? || py_ge(t.max(), e)?) {
            continue;
        }
        let (Node::Num(o), Node::Num(b), Node::Num(e)) = (o, b, e) else {
            bad = true;
            continue;
        };
        let term = &terms[d2];
        if term.len() != 1 {
            if term.is_empty() && !newe.is_empty() {
                newe[0] = Node::Num(0);
            } else {
                bad = true;
            }
            continue;
        }
        let (d1, s1) = &term[0];
        let (Node::Num(s1), true) = (s1, newe[*d1].is_int()) else {
            bad = true;
            continue;
        };
        let (bo, eo1) = (ck_sub(*b, *o)?, ck_sub(ck_sub(*e, *o)?, 1)?);
        let lo = ceil_div(if *s1 > 0 { bo } else { eo1 }, *s1)?;
        newb[*d1] = py_max2(&newb[*d1], &Node::Num(lo))?;
        let hi = ck_add(py_floordiv(if *s1 < 0 { bo } else { eo1 }, *s1)?, 1)?;
        newe[*d1] = py_min2(&newe[*d1], &Node::Num(hi))?;
    }
    Ok((newb, newe, bad))
}
