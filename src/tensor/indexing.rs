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
use crate::dtype::ConstValue;
use crate::{bail, ensure, Result};

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
        let none_dims: Vec<usize> = (idx.iter().enumerate())
            .filter(|(_, i)| matches!(i, Index::NewAxis))
            .map(|(d, _)| d)
            .collect();
        let tensor_dims: Vec<usize> = (idx.iter().enumerate())
            .filter(|(_, i)| matches!(i, Index::Tensor(_)))
            .map(|(d, _)| d)
            .collect();
        let filtered: Vec<&Index> = idx
            .iter()
            .filter(|i| !matches!(i, Index::NewAxis))
            .collect();
        let shape = self.shape();
        let mut basic: Vec<Basic> = Vec::with_capacity(filtered.len());
        let mut int_dims = Vec::new();
        let mut tensor_index = Vec::new();
        for (dim, i) in filtered.iter().enumerate() {
            let size = shape[dim] as isize;
            basic.push(match i {
                Index::Int(index) => {
                    ensure!(
                        *index < size && *index >= -size,
                        InvalidArgument,
                        "getitem: index={index} is out of bounds on dim={dim} with size={size}"
                    );
                    int_dims.push(dim);
                    let p = if *index >= 0 { *index } else { size + index } as usize;
                    ((p, p + 1), 1)
                }
                Index::Slice(start, stop, step) => {
                    let st = step.unwrap_or(1);
                    ensure!(
                        st != 0,
                        InvalidArgument,
                        "getitem: slice on dim={dim} cannot have 0 as step"
                    );
                    let (s, e, st) = slice_indices(*start, *stop, st, size);
                    let r = if st * (e - s) < 0 {
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
                    tensor_index.push(t.clone());
                    ((0, shape[dim]), 1)
                }
                Index::NewAxis | Index::Ellipsis => {
                    bail!(
                        Internal,
                        "getitem: unexpected index {i:?} after normalization"
                    )
                }
            });
        }
        let ret = self.basic_index(&basic)?;
        let mut new_shape = ret.shape();
        for &d in &none_dims {
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
        let ret = ret.reshape_sints(&to_sints(&new_shape))?;
        if tensor_dims.is_empty() {
            return Ok(ret);
        }
        let calc_dim = |td: usize| td - collapsed.iter().filter(|&&d| td >= d).count();
        let mut pairs: Vec<(usize, Tensor)> = Vec::new();
        for (&td, t) in tensor_dims.iter().zip(tensor_index) {
            pairs.push((calc_dim(td), t));
        }
        ret.advanced_index(pairs)
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
        let strides: Vec<usize> = basic.iter().map(|(_, st)| st.unsigned_abs()).collect();
        let shape = ret.shape();
        let pad: Vec<Option<(usize, usize)>> = (shape.iter().zip(&strides))
            .map(|(&s, &st)| Some((0, s.div_ceil(st) * st - s)))
            .collect();
        ret = ret.pad(&pad)?;
        let split: Vec<usize> = (ret.shape().iter().zip(&strides))
            .flat_map(|(&s, &st)| [s / st, st])
            .collect();
        ret = ret.reshape_sints(&to_sints(&split))?;
        let outer: Vec<usize> = split.iter().step_by(2).copied().collect();
        let shrink: Vec<Option<(usize, usize)>> = outer
            .iter()
            .flat_map(|&s| [Some((0, s)), Some((0, 1))])
            .collect();
        ret.shrink(&shrink)?.reshape_sints(&to_sints(&outer))
    }

    /// Advanced indexing: per indexed dim a one-hot mask `index == arange(dim)`, multiplied
    /// together and with the source, summed over the indexed dims.
    fn advanced_index(&self, pairs: Vec<(usize, Tensor)>) -> Result<Tensor> {
        let shape = self.shape();
        // A dict keyed by dim: a later index for the same dim replaces the earlier one.
        let mut idx: Vec<(usize, Tensor)> = Vec::new();
        for (dim, t) in pairs {
            let t = t.lt(0i64)?.where_(shape[dim] as i64, 0i64)?.add(&t)?;
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
        let mut pre_reduce: Vec<usize> = shape[..first].to_vec();
        pre_reduce.extend_from_slice(&big);
        pre_reduce.extend_from_slice(&shape[first..]);
        let nd = shape.len();
        let mut mask: Option<Tensor> = None;
        for (dim, i) in &idx {
            let mut ishape = i.shape();
            ishape.extend(std::iter::repeat(1).take(nd - first));
            let ie = i
                .reshape_sints(&to_sints(&ishape))?
                .broadcast_to(&pre_reduce)
                .map_err(|e| {
                    crate::Error::InvalidArgument(format!(
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
                crate::dtype::dtypes::default_int,
                &self.device(),
            )?
            .detach()
            .reshape_sints(&to_sints(&ashape))?;
            let m = ie.eq(&a)?;
            mask = Some(match mask {
                None => m,
                Some(prev) => prev.mul(&m)?,
            });
        }
        let Some(mask) = mask else {
            bail!(Internal, "getitem: no tensor index")
        };
        let mut reshape_arg: Vec<usize> = shape[..first].to_vec();
        reshape_arg.extend(std::iter::repeat(1).take(big.len()));
        reshape_arg.extend_from_slice(&shape[first..]);
        let axes: Vec<isize> = idx.iter().map(|(d, _)| (d + big.len()) as isize).collect();
        let dt = self.dtype();
        let mut ret = self
            .reshape_sints(&to_sints(&reshape_arg))?
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
            crate::dtype::dtypes::default_int,
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
