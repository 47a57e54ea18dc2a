//! tinygrad 0.9.1's `__getitem__`: basic indexing (ints, slices with steps and negative
//! bounds, new axes, an ellipsis) as pure movement ops (shrink, flip, pad, reshape), and
//! advanced indexing with integer tensors as one-hot masks summed away (out-of-range indices
//! give 0).
//!
//! Not guaranteed: bool-tensor indexing is unsupported (as in tinygrad); `__setitem__` is not
//! provided.

use std::collections::BTreeSet;

use super::movement::broadcast_shape;
use super::{fmt_shape, to_sints, Tensor};
use crate::dtype::{dtypes, ConstValue};
use crate::{bail, ensure, Error, Result};

/// One index of [`Tensor::getitem`].
#[derive(Clone, Debug)]
pub enum Index {
    /// One position (negative counts from the end); the dim disappears.
    Int(isize),
    /// Python's `start:stop:step` (each part optional).
    Slice(Option<isize>, Option<isize>, Option<isize>),
    /// `None`: insert a dim of size 1.
    NewAxis,
    /// `...`: as many full slices as needed.
    Ellipsis,
    /// Advanced indexing with an integer tensor.
    Tensor(Tensor),
}

impl Index {
    /// The full slice `:`.
    pub fn all() -> Index {
        Index::Slice(None, None, None)
    }
    /// `start:stop`.
    pub fn range(start: isize, stop: isize) -> Index {
        Index::Slice(Some(start), Some(stop), None)
    }
}

/// Python's `slice.indices(length)`.
fn slice_indices(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    len: isize,
) -> (isize, isize, isize) {
    let clamp = |v: Option<isize>, default: isize| -> isize {
        let Some(mut v) = v else { return default };
        if v < 0 {
            v += len;
            if v < 0 {
                v = if step < 0 { -1 } else { 0 };
            }
        } else if v >= len {
            v = if step < 0 { len - 1 } else { len };
        }
        v
    };
    if step > 0 {
        (clamp(start, 0), clamp(stop, len), step)
    } else {
        (clamp(start, len - 1), clamp(stop, -1), step)
    }
}

/// A basic index resolved to (shrink range, stride).
type Basic = ((usize, usize), isize);

/// tinygrad's per-dim resolution: an int to a one-element range, a slice through
/// `slice.indices` to a range and a stride (empty when the direction is wrong, swapped for
/// negative steps), a tensor index to the full range.
fn resolve_basic(i: &Index, dim: usize, size: usize) -> Result<Basic> {
    let sz = size as isize;
    Ok(match i {
        Index::Int(index) => {
            ensure!(
                *index < sz && *index >= -sz,
                InvalidArgument,
                "getitem: index={index} is out of bounds on dim={dim} with size={size}"
            );
            let p = if *index >= 0 { *index } else { sz + index } as usize;
            ((p, p + 1), 1)
        }
        Index::Slice(start, stop, step) => {
            let st = step.unwrap_or(1);
            ensure!(
                st != 0,
                InvalidArgument,
                "getitem: slice on dim={dim} cannot have 0 as step"
            );
            let (s, e, st) = slice_indices(*start, *stop, st, sz);
            // Python's "empty when the step points away from stop", by signs (no overflow).
            let r = if st.signum() * (e - s).signum() < 0 {
                (0, 0)
            } else if st > 0 {
                (s as usize, e as usize)
            } else {
                ((e + 1) as usize, (s + 1) as usize)
            };
            (r, st)
        }
        Index::Tensor(t) => {
            ensure!(
                t.dtype().is_int(),
                InvalidArgument,
                "getitem: index.dtype={:?} on dim={dim} is not supported, only int tensor \
                 indexing is supported",
                t.dtype()
            );
            ((0, size), 1)
        }
        Index::NewAxis | Index::Ellipsis => {
            bail!(
                Internal,
                "getitem: unexpected index {i:?} after normalization"
            )
        }
    })
}

impl Tensor {
    /// tinygrad's `__getitem__` (see the module doc).
    pub fn getitem(&self, indices: &[Index]) -> Result<Tensor> {
        let mut idx: Vec<Index> = Vec::with_capacity(indices.len());
        for i in indices {
            idx.push(match i {
                Index::Tensor(t) if t.ndim() == 0 => match self.const_index(t) {
                    Some(v) => Index::Int(v),
                    None => i.clone(),
                },
                Index::Tensor(t) => Index::Tensor(t.to(&self.device())?),
                _ => i.clone(),
            });
        }
        let n_ell = idx.iter().filter(|i| matches!(i, Index::Ellipsis)).count();
        ensure!(
            n_ell <= 1,
            InvalidArgument,
            "getitem: indices can only have a single ellipsis ('...')"
        );
        let n_none = idx.iter().filter(|i| matches!(i, Index::NewAxis)).count();
        let num_indices = idx.len() - n_ell - n_none;
        let nd = self.ndim();
        ensure!(
            num_indices <= nd,
            InvalidArgument,
            "getitem: too many num_indices={num_indices} for ndim={nd}"
        );
        let fill = idx
            .iter()
            .position(|i| matches!(i, Index::Ellipsis))
            .unwrap_or(idx.len());
        let fillers = vec![Index::all(); nd - num_indices];
        idx.splice(fill..(fill + n_ell).min(idx.len()), fillers);
        self.getitem_normalized(&idx)
    }

    /// An unrealized constant 0-d index tensor as its integer (tinygrad's `_to_const_val`).
    fn const_index(&self, t: &Tensor) -> Option<isize> {
        let lb = t.lazydata();
        if !lb.is_unrealized_unmasked_const() || t.requires_grad() == Some(true) {
            return None;
        }
        match lb.const_value()? {
            ConstValue::Int(i) => isize::try_from(i).ok(),
            _ => None,
        }
    }

    fn getitem_normalized(&self, idx: &[Index]) -> Result<Tensor> {
        let dims_of = |f: fn(&Index) -> bool| -> Vec<usize> {
            (idx.iter().enumerate())
                .filter(|(_, i)| f(i))
                .map(|(d, _)| d)
                .collect()
        };
        let none_dims = dims_of(|i| matches!(i, Index::NewAxis));
        let tensor_dims = dims_of(|i| matches!(i, Index::Tensor(_)));
        let filtered: Vec<&Index> = idx
            .iter()
            .filter(|i| !matches!(i, Index::NewAxis))
            .collect();
        let shape = self.shape();
        let mut basic: Vec<Basic> = Vec::with_capacity(filtered.len());
        let (mut int_dims, mut tensor_index) = (Vec::new(), Vec::new());
        for (dim, i) in filtered.iter().enumerate() {
            let size = *shape.get(dim).ok_or_else(|| {
                Error::Internal(format!(
                    "getitem: {} indices for shape {:?}",
                    filtered.len(),
                    shape
                ))
            })?;
            basic.push(resolve_basic(i, dim, size)?);
            match i {
                Index::Int(_) => int_dims.push(dim),
                Index::Tensor(t) => tensor_index.push(t.clone()),
                _ => {}
            }
        }
        let ret = self.basic_index(&basic)?;
        let (ret, collapsed) = ret.insert_and_collapse(&none_dims, &int_dims)?;
        if tensor_dims.is_empty() {
            return Ok(ret);
        }
        let mut pairs: Vec<(usize, Tensor)> = Vec::new();
        for (&td, t) in tensor_dims.iter().zip(tensor_index) {
            let before = collapsed.iter().filter(|&&d| td >= d).count();
            let dim = td.checked_sub(before).ok_or_else(|| {
                Error::InvalidArgument(format!("getitem: cannot place the tensor index at {td}"))
            })?;
            pairs.push((dim, t));
        }
        ret.advanced_index(pairs)
    }

    /// Insert the new axes (`None` indices) and drop the int-indexed dims; returns the dims
    /// dropped (tinygrad's `dims_collapsed`).
    fn insert_and_collapse(
        &self,
        none_dims: &[usize],
        int_dims: &[usize],
    ) -> Result<(Tensor, Vec<usize>)> {
        let mut new_shape = self.shape();
        for &d in none_dims {
            ensure!(
                d <= new_shape.len(),
                InvalidArgument,
                "getitem: cannot insert a new axis at {d} of shape {}",
                fmt_shape(&new_shape)
            );
            new_shape.insert(d, 1);
        }
        let collapsed: Vec<usize> = (int_dims.iter().rev())
            .map(|&dim| dim + none_dims.iter().filter(|&&d| dim >= d).count())
            .collect();
        for &d in &collapsed {
            ensure!(
                d < new_shape.len(),
                InvalidArgument,
                "getitem: cannot collapse dim {d} of shape {}",
                fmt_shape(&new_shape)
            );
            new_shape.remove(d);
        }
        Ok((self.reshape_sints(&to_sints(&new_shape)?)?, collapsed))
    }

    /// Shrink to the slice bounds, flip negative strides, apply |stride| > 1 by pad, reshape
    /// and shrink.
    fn basic_index(&self, basic: &[Basic]) -> Result<Tensor> {
        let slice: Vec<Option<(usize, usize)>> = basic.iter().map(|(r, _)| Some(*r)).collect();
        let flips: Vec<isize> = (basic.iter().enumerate())
            .filter(|(_, (_, st))| *st < 0)
            .map(|(i, _)| i as isize)
            .collect();
        let mut ret = self.shrink(&slice)?.flip(&flips)?;
        if basic.iter().all(|(_, st)| st.unsigned_abs() == 1) {
            return Ok(ret);
        }
        let shape = ret.shape();
        // A stride at least the extent picks only the first element, as the extent itself does
        // (Python's result for any step up to isize::MIN/MAX, without padding to the step).
        let strides: Vec<usize> = (basic.iter().zip(&shape))
            .map(|((_, st), &s)| st.unsigned_abs().min(s.max(1)))
            .collect();
        let pad: Vec<Option<(usize, usize)>> = (shape.iter().zip(&strides))
            .map(|(&s, &st)| Some((0, s.div_ceil(st) * st - s)))
            .collect();
        ret = ret.pad(&pad)?;
        let split: Vec<usize> = (ret.shape().iter().zip(&strides))
            .flat_map(|(&s, &st)| [s / st, st])
            .collect();
        ret = ret.reshape_sints(&to_sints(&split)?)?;
        let outer: Vec<usize> = split.iter().step_by(2).copied().collect();
        let shrink: Vec<Option<(usize, usize)>> = outer
            .iter()
            .flat_map(|&s| [Some((0, s)), Some((0, 1))])
            .collect();
        ret.shrink(&shrink)?.reshape_sints(&to_sints(&outer)?)
    }

    /// Advanced indexing: per indexed dim a one-hot mask `index == arange(dim)`, multiplied
    /// together and with the source, summed over the indexed dims.
    fn advanced_index(&self, pairs: Vec<(usize, Tensor)>) -> Result<Tensor> {
        let shape = self.shape();
        // A dict keyed by dim: a later index for the same dim replaces the earlier one.
        let mut idx: Vec<(usize, Tensor)> = Vec::new();
        for (dim, t) in pairs {
            let Some(&size) = shape.get(dim) else {
                bail!(
                    InvalidArgument,
                    "getitem: tensor index on dim {dim} of shape {}",
                    fmt_shape(&shape)
                );
            };
            let t = t.lt(0i64)?.where_(size as i64, 0i64)?.add(&t)?;
            match idx.iter_mut().find(|(d, _)| *d == dim) {
                Some(slot) => slot.1 = t,
                None => idx.push((dim, t)),
            }
        }
        let dims: BTreeSet<usize> = idx.iter().map(|(d, _)| *d).collect();
        let (first, last) = match (dims.first(), dims.last()) {
            (Some(&f), Some(&l)) => (f, l),
            _ => bail!(Internal, "getitem: no tensor index"),
        };
        let big = idx.iter().fold(Vec::new(), |acc: Vec<usize>, (_, t)| {
            broadcast_shape(&acc, &t.shape())
        });
        let mask = self.index_mask(&idx, first, &big)?;
        let mut reshape_arg: Vec<usize> = shape[..first].to_vec();
        reshape_arg.extend(std::iter::repeat(1).take(big.len()));
        reshape_arg.extend_from_slice(&shape[first..]);
        let axes: Vec<isize> = idx.iter().map(|(d, _)| (d + big.len()) as isize).collect();
        let dt = self.dtype();
        let mut ret = self
            .reshape_sints(&to_sints(&reshape_arg)?)?
            .mul(&mask)?
            .sum_acc(axes, false, Some(dt))?;
        let keys: Vec<usize> = idx.iter().map(|(d, _)| *d).collect();
        if first != 0 && idx.len() != 1 && keys != (first..=last).collect::<Vec<_>>() {
            let rn = ret.ndim();
            let order: Vec<isize> = (first..first + big.len())
                .chain(0..first)
                .chain(first + big.len()..rn)
                .map(|d| d as isize)
                .collect();
            ret = ret.permute(&order)?;
        }
        Ok(ret)
    }

    /// The product of the one-hot masks `index == arange(size)`, each index broadcast into
    /// `shape[..first] + big + shape[first..]`.
    fn index_mask(&self, idx: &[(usize, Tensor)], first: usize, big: &[usize]) -> Result<Tensor> {
        let shape = self.shape();
        let nd = shape.len();
        let mut pre_reduce: Vec<usize> = shape[..first].to_vec();
        pre_reduce.extend_from_slice(big);
        pre_reduce.extend_from_slice(&shape[first..]);
        let mut mask: Option<Tensor> = None;
        for (dim, i) in idx {
            let mut ishape = i.shape();
            ishape.extend(std::iter::repeat(1).take(nd - first));
            let ie = i
                .reshape_sints(&to_sints(&ishape)?)?
                .broadcast_to(&pre_reduce)
                .map_err(|e| {
                    Error::InvalidArgument(format!(
                        "getitem: cannot broadcast indices: {}",
                        e.message()
                    ))
                })?;
            let mut ashape = vec![shape[*dim]];
            ashape.extend(std::iter::repeat(1).take(nd - dim - 1));
            let a = Tensor::arange_on(
                ConstValue::Int(0),
                ConstValue::Int(shape[*dim] as i128),
                ConstValue::Int(1),
                dtypes::default_int,
                &self.device(),
            )?
            .detach()
            .reshape_sints(&to_sints(&ashape)?)?;
            let m = ie.eq(&a)?;
            mask = Some(match mask {
                None => m,
                Some(prev) => prev.mul(&m)?,
            });
        }
        mask.ok_or_else(|| Error::Internal("getitem: no tensor index".into()))
    }

    /// `gather(dim, index)`: pick values along `dim` at `index` (same rank as self; other dims
    /// of `index` no larger than self's).
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let (shape, ishape) = (self.shape(), index.shape());
        ensure!(
            index.ndim() == self.ndim(),
            InvalidArgument,
            "gather: self.ndim must equal index.ndim, self.ndim={}, index.ndim={}",
            self.ndim(),
            index.ndim()
        );
        let d = self.resolve_dim(dim, false)?;
        ensure!(
            (shape.iter().zip(&ishape).enumerate()).all(|(i, (s, x))| i == d || s >= x),
            InvalidArgument,
            "gather: requires self.shape[d] >= index.shape[d] for all d != dim ({} vs {})",
            fmt_shape(&shape),
            fmt_shape(&ishape)
        );
        let index = index.to(&self.device())?;
        let arg: Vec<Option<(usize, usize)>> = (ishape.iter().enumerate())
            .map(|(i, &s)| if i != d { Some((0, s)) } else { None })
            .collect();
        let x = self
            .shrink(&arg)?
            .unsqueeze(-1)?
            .transpose(-1, d as isize)?;
        let ar = Tensor::arange_on(
            ConstValue::Int(0),
            ConstValue::Int(shape[d] as i128),
            ConstValue::Int(1),
            dtypes::default_int,
            &self.device(),
        )?
        .detach();
        index
            .unsqueeze(-1)?
            .eq(&ar)?
            .mul(&x)?
            .sum_acc(-1isize, false, Some(self.dtype()))
    }
}
