//! Movement ops (tinygrad 0.9.1): the low-level ones, one Function each (`reshape`, `expand`,
//! `permute`, `flip`, `shrink`, `pad`), and the high-level ones built from them (`_slice`,
//! `pad2d`, `squeeze`, `unsqueeze`, `flatten`, `unflatten`, `transpose`, `repeat`, `cat`,
//! `stack`, `split`, `chunk`, `_pool`). None of them copies data.
//!
//! Not guaranteed: shapes and arguments are integers (no symbolic sizes).

use super::{
    add_size, check_shape, fmt_shape, function as F, mul_size, prod, resolve_dim, to_sints, Tensor,
};
use crate::dtype::ConstValue;
use crate::shape::{Node, Sint};
use crate::{bail, ensure, Result};

fn fmt_ishape(shape: &[isize]) -> String {
    let s: Vec<String> = shape.iter().map(|x| x.to_string()).collect();
    match s.len() {
        1 => format!("({},)", s[0]),
        _ => format!("({})", s.join(", ")),
    }
}

/// Integer (begin, end) pairs as symbolic ones; an error where one does not fit `i64`.
fn pairs(arg: &[(usize, usize)], what: &str) -> Result<Vec<(Sint, Sint)>> {
    let num = |v: usize| {
        i64::try_from(v).map(Node::Num).map_err(|_| {
            crate::Error::InvalidArgument(format!(
                "{what}: {v} in {arg:?} does not fit the symbolic integers"
            ))
        })
    };
    arg.iter().map(|&(a, b)| Ok((num(a)?, num(b)?))).collect()
}

/// The most tensors one `split`/`chunk` returns (beyond tinygrad, whose Python list has no
/// bound): a caller's count is checked before anything is allocated for it.
pub(crate) const MAX_PIECES: usize = 1 << 20;

/// tinygrad's `_broadcast_shape` (after `_pad_left`, the shorter shape left-padded with 1s): per
/// dim 0 if any is 0, else the largest.
pub(crate) fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    // dim i of `s` left-padded with 1s to n dims (no padded copies on the eager path)
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(n).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| (dim(a, i), dim(b, i)))
        .map(|(x, y)| if x == 0 || y == 0 { 0 } else { x.max(y) })
        .collect()
}

impl Tensor {
    /// Reshape with int dims (an internal shortcut; no -1 handling).
    pub(crate) fn reshape_sints(&self, shape: &[Sint]) -> Result<Tensor> {
        if self.with_lazydata(|lb| lb.shape() == shape) {
            return Ok(self.clone());
        }
        F::reshape(self, shape)
    }

    /// tinygrad's `reshape`: the same elements in a new shape; one dim may be -1 (inferred).
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let cur = self.shape();
        let err = || {
            crate::Error::InvalidArgument(format!(
                "reshape: cannot reshape {} to {}",
                fmt_shape(&cur),
                fmt_ishape(shape)
            ))
        };
        let infer = shape.iter().filter(|&&s| s == -1).count();
        if infer > 1 {
            bail!(
                InvalidArgument,
                "reshape: only one dimension can be inferred using -1, getting {}",
                fmt_ishape(shape)
            );
        }
        if shape.iter().any(|&s| s < -1) {
            return Err(err());
        }
        let known: usize = prod(
            &shape
                .iter()
                .filter(|&&s| s != -1)
                .map(|&s| s as usize)
                .collect::<Vec<_>>(),
        );
        let total = prod(&cur);
        let mut new_shape = Vec::with_capacity(shape.len());
        for &s in shape {
            if s == -1 {
                if known == 0 || total % known != 0 {
                    return Err(err());
                }
                new_shape.push(total / known);
            } else {
                new_shape.push(s as usize);
            }
        }
        if prod(&new_shape) != total {
            return Err(err());
        }
        if new_shape == cur {
            return Ok(self.clone());
        }
        F::reshape(self, &to_sints(&new_shape)?)
    }

    /// `view` is `reshape`.
    pub fn view(&self, shape: &[isize]) -> Result<Tensor> {
        self.reshape(shape)
    }

    /// tinygrad's `_broadcast_to`: left-pad with 1s, then expand dims of size 1.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let cur = self.shape();
        if cur == shape {
            return Ok(self.clone());
        }
        ensure!(
            cur.len() <= shape.len(),
            InvalidArgument,
            "broadcast_to: cannot broadcast tensor to fewer dimensions. shape={} to shape={}",
            fmt_shape(&cur),
            fmt_shape(shape)
        );
        let mut padded = vec![1; shape.len() - cur.len()];
        padded.extend_from_slice(&cur);
        ensure!(
            padded.iter().zip(shape).all(|(&f, &t)| f == 1 || f == t),
            InvalidArgument,
            "broadcast_to: cannot broadcast from shape={} to shape={}",
            fmt_shape(&cur),
            fmt_shape(shape)
        );
        let x = self.reshape_sints(&to_sints(&padded)?)?;
        if padded == shape {
            return Ok(x);
        }
        F::expand(&x, &to_sints(shape)?)
    }

    /// tinygrad's `expand`: broadcast to `shape` (left-padding with 1s); -1 keeps a dim.
    pub fn expand(&self, shape: &[isize]) -> Result<Tensor> {
        let cur = self.shape();
        let n = cur.len().max(shape.len());
        ensure!(
            shape.len() >= cur.len(),
            InvalidArgument,
            "expand: cannot broadcast tensor to fewer dimensions. shape={} to shape={}",
            fmt_shape(&cur),
            fmt_ishape(shape)
        );
        let mut from = vec![1; n - cur.len()];
        from.extend_from_slice(&cur);
        let mut out = Vec::with_capacity(n);
        for (&f, &t) in from.iter().zip(shape) {
            ensure!(
                t >= -1,
                InvalidArgument,
                "expand: bad size {t} in {}",
                fmt_ishape(shape)
            );
            out.push(if t == -1 { f } else { t as usize });
        }
        self.broadcast_to(&out)
    }

    /// tinygrad's `permute`: reorder the dims (negative dims count from the end).
    pub fn permute(&self, order: &[isize]) -> Result<Tensor> {
        let nd = self.ndim();
        let resolved = order
            .iter()
            .map(|&d| resolve_dim(nd, d, false))
            .collect::<Result<Vec<_>>>()?;
        let mut sorted = resolved.clone();
        sorted.sort_unstable();
        ensure!(
            sorted == (0..nd).collect::<Vec<_>>(),
            InvalidArgument,
            "permute: order is not a valid permutation, getting {}",
            fmt_ishape(order)
        );
        F::permute(self, &resolved)
    }

    /// tinygrad's `flip`: reverse the given dims.
    pub fn flip(&self, axis: &[isize]) -> Result<Tensor> {
        let nd = self.ndim();
        let resolved = axis
            .iter()
            .map(|&d| resolve_dim(nd, d, false))
            .collect::<Result<Vec<_>>>()?;
        let mut dedup = resolved.clone();
        dedup.sort_unstable();
        dedup.dedup();
        ensure!(
            dedup.len() == resolved.len(),
            InvalidArgument,
            "flip: dim can appear at most once, getting {}",
            fmt_ishape(axis)
        );
        F::flip(self, &resolved)
    }

    /// tinygrad's `shrink`: per dim `None` (keep) or `(start, end)` with
    /// `0 <= start <= end <= size`.
    pub fn shrink(&self, arg: &[Option<(usize, usize)>]) -> Result<Tensor> {
        let shape = self.shape();
        ensure!(
            arg.len() == shape.len(),
            InvalidArgument,
            "shrink: {} args for shape {}",
            arg.len(),
            fmt_shape(&shape)
        );
        let full: Vec<(usize, usize)> = arg
            .iter()
            .zip(&shape)
            .map(|(a, &s)| a.unwrap_or((0, s)))
            .collect();
        for (&(b, e), &s) in full.iter().zip(&shape) {
            ensure!(
                b <= e && e <= s,
                InvalidArgument,
                "shrink: invalid shrink {:?} for shape {}",
                full,
                fmt_shape(&shape)
            );
        }
        if full
            .iter()
            .zip(&shape)
            .all(|(&(b, e), &s)| b == 0 && e == s)
        {
            return Ok(self.clone());
        }
        F::shrink(self, &pairs(&full, "shrink")?)
    }

    /// tinygrad's `pad` with zeros: per dim `None` or `(before, after)`.
    pub fn pad(&self, arg: &[Option<(usize, usize)>]) -> Result<Tensor> {
        self.pad_with(arg, 0.0)
    }

    /// tinygrad's `pad(arg, value)`: pad with `value` (a zero pad plus `pad(ones).where(0,
    /// value)` for non-zero values).
    pub fn pad_with(
        &self,
        arg: &[Option<(usize, usize)>],
        value: impl Into<ConstValue>,
    ) -> Result<Tensor> {
        let shape = self.shape();
        ensure!(
            arg.len() == shape.len(),
            InvalidArgument,
            "pad: {} args for shape {}",
            arg.len(),
            fmt_shape(&shape)
        );
        if arg.iter().all(|a| a.map_or(true, |p| p == (0, 0))) {
            return Ok(self.clone());
        }
        let narg: Vec<(usize, usize)> = arg.iter().map(|a| a.unwrap_or((0, 0))).collect();
        let what = || format!("pad: padding {narg:?} of shape {}", fmt_shape(&shape));
        let padded = (shape.iter().zip(&narg))
            .map(|(&s, &(b, e))| add_size(add_size(s, b, what)?, e, what))
            .collect::<Result<Vec<_>>>()?;
        check_shape(&padded)?;
        let narg = pairs(&narg, "pad")?;
        let ret = F::pad(self, &narg)?;
        let value = value.into();
        if value.as_f64() == 0.0 {
            return Ok(ret);
        }
        let mask = F::pad(&self.ones_like()?, &narg)?;
        ret.add(&mask.where_(0i64, value)?)
    }

    /// tinygrad's `_slice`: per dim `None` or `(start, end)` where start may be negative and end
    /// past the size: pad (with `value`) then shrink.
    pub fn slice_pad(
        &self,
        arg: &[Option<(isize, isize)>],
        value: impl Into<ConstValue>,
    ) -> Result<Tensor> {
        let shape = self.shape();
        ensure!(
            arg.len() == shape.len(),
            InvalidArgument,
            "_slice: {} args for shape {}",
            arg.len(),
            fmt_shape(&shape)
        );
        let full: Vec<(isize, isize)> = (arg.iter().zip(&shape))
            .map(|(a, &s)| a.unwrap_or((0, s as isize)))
            .collect();
        let mut padding = Vec::with_capacity(full.len());
        let mut shrink = Vec::with_capacity(full.len());
        for (&(l, r), &s) in full.iter().zip(&shape) {
            // Exact arithmetic: l and r may be anywhere in isize.
            let (l, r, s) = (l as i128, r as i128, s as i128);
            let (pl, pr) = ((-l).max(0), (r - s).max(0));
            let (b, e) = (l + pl, r + pl);
            let size = |v: i128| usize::try_from(v).ok().filter(|&v| v <= i64::MAX as usize);
            match (size(pl), size(pr), size(b), size(e)) {
                (Some(pl), Some(pr), Some(b), Some(e)) if b <= e => {
                    padding.push(Some((pl, pr)));
                    shrink.push(Some((b, e)));
                }
                _ => bail!(
                    InvalidArgument,
                    "_slice: invalid range {:?} for shape {}",
                    full,
                    fmt_shape(&shape)
                ),
            }
        }
        self.pad_with(&padding, value)?.shrink(&shrink)
    }

    /// tinygrad's `pad2d`: torch-style padding of the last dims, `(left, right, top, bottom,
    /// ...)` from the last dim backwards; negative values crop.
    pub fn pad2d(&self, padding: &[isize], value: impl Into<ConstValue>) -> Result<Tensor> {
        let shape = self.shape();
        let nd = padding.len() / 2;
        ensure!(
            padding.len() % 2 == 0 && nd <= shape.len(),
            InvalidArgument,
            "pad2d: padding {} does not fit shape {}",
            fmt_ishape(padding),
            fmt_shape(&shape)
        );
        let mut arg: Vec<Option<(isize, isize)>> = shape[..shape.len() - nd]
            .iter()
            .map(|&s| Some((0, s as isize)))
            .collect();
        let mut slc: Vec<Option<(isize, isize)>> = (0..nd)
            .map(|i| {
                let s = shape[shape.len() - 1 - i] as isize;
                let (l, r) = (
                    padding[2 * i].checked_neg(),
                    s.checked_add(padding[2 * i + 1]),
                );
                match (l, r) {
                    (Some(l), Some(r)) => Ok(Some((l, r))),
                    _ => Err(crate::Error::InvalidArgument(format!(
                        "pad2d: padding {} of shape {} overflows",
                        fmt_ishape(padding),
                        fmt_shape(&shape)
                    ))),
                }
            })
            .collect::<Result<_>>()?;
        slc.reverse();
        arg.extend(slc);
        self.slice_pad(&arg, value)
    }

    /// tinygrad's `squeeze`: drop `dim` if it has size 1 (all size-1 dims when `None`).
    pub fn squeeze(&self, dim: Option<isize>) -> Result<Tensor> {
        let shape = self.shape();
        let Some(dim) = dim else {
            let s: Vec<usize> = shape.into_iter().filter(|&d| d != 1).collect();
            return self.reshape_sints(&to_sints(&s)?);
        };
        if shape.is_empty() {
            resolve_dim(0, dim, true)?;
            return Ok(self.clone());
        }
        let d = self.resolve_dim(dim, false)?;
        if shape[d] != 1 {
            return Ok(self.clone());
        }
        let mut s = shape;
        s.remove(d);
        self.reshape_sints(&to_sints(&s)?)
    }

    /// tinygrad's `unsqueeze`: insert a dim of size 1 at `dim` (may be one past the last).
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let d = self.resolve_dim(dim, true)?;
        let mut s = self.shape();
        s.insert(d, 1);
        self.reshape_sints(&to_sints(&s)?)
    }

    /// tinygrad's `T`: `transpose(1, 0)`.
    #[allow(non_snake_case)]
    pub fn T(&self) -> Result<Tensor> {
        self.transpose(1, 0)
    }

    /// tinygrad's `transpose`: swap two dims.
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        let nd = self.ndim();
        let (a, b) = (resolve_dim(nd, dim0, false)?, resolve_dim(nd, dim1, false)?);
        let mut order: Vec<isize> = (0..nd as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// tinygrad's `flatten(start_dim, end_dim)`: merge dims `start..=end`.
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Tensor> {
        let shape = self.shape();
        if shape.is_empty() {
            resolve_dim(0, start_dim, true)?;
            resolve_dim(0, end_dim, true)?;
            return self.reshape_sints(&to_sints(&[1])?);
        }
        let nd = shape.len();
        let (s, e) = (
            resolve_dim(nd, start_dim, false)?,
            resolve_dim(nd, end_dim, false)?,
        );
        let mut out = shape[..s].to_vec();
        out.push(if e + 1 > s { prod(&shape[s..e + 1]) } else { 1 });
        out.extend_from_slice(&shape[e + 1..]);
        self.reshape_sints(&to_sints(&out)?)
    }

    /// tinygrad's `unflatten(dim, sizes)`: split one dim into several (one size may be -1).
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Result<Tensor> {
        let d = self.resolve_dim(dim, false)?;
        let shape = self.shape();
        let mut out: Vec<isize> = shape[..d].iter().map(|&s| s as isize).collect();
        out.extend_from_slice(sizes);
        out.extend(shape[d + 1..].iter().map(|&s| s as isize));
        self.reshape(&out)
    }

    /// tinygrad's `repeat`: tile the tensor `repeats[i]` times along each dim (more repeats than
    /// dims add leading dims).
    pub fn repeat(&self, repeats: &[usize]) -> Result<Tensor> {
        let shape = self.shape();
        ensure!(
            repeats.len() >= shape.len(),
            InvalidArgument,
            "repeat: {} repeats for shape {}",
            repeats.len(),
            fmt_shape(&shape)
        );
        let mut base = vec![1; repeats.len() - shape.len()];
        base.extend_from_slice(&shape);
        let new_shape: Vec<usize> = base.iter().flat_map(|&b| [1, b]).collect();
        let expand_shape: Vec<usize> = repeats
            .iter()
            .zip(&base)
            .flat_map(|(&r, &b)| [r, b])
            .collect();
        let what = || format!("repeat: repeats {repeats:?} of shape {}", fmt_shape(&shape));
        let final_shape = (repeats.iter().zip(&base))
            .map(|(&r, &b)| mul_size(r, b, what))
            .collect::<Result<Vec<_>>>()?;
        check_shape(&final_shape)
            .map_err(|e| crate::Error::InvalidArgument(format!("{}: {}", what(), e.message())))?;
        self.reshape_sints(&to_sints(&new_shape)?)?
            .broadcast_to(&expand_shape)?
            .reshape_sints(&to_sints(&final_shape)?)
    }

    /// tinygrad's `cat`: concatenate along `dim` (every operand padded to the full extent and
    /// the pads added).
    pub fn cat(&self, others: &[&Tensor], dim: isize) -> Result<Tensor> {
        let d = self.resolve_dim(dim, false)?;
        let shape = self.shape();
        let mut all = vec![self];
        all.extend_from_slice(others);
        for y in others {
            let ys = y.shape();
            ensure!(
                ys.len() == shape.len()
                    && ys
                        .iter()
                        .zip(&shape)
                        .enumerate()
                        .all(|(i, (a, b))| i == d || a == b),
                InvalidArgument,
                "cat: shapes {} and {} differ outside dim {d}",
                fmt_shape(&shape),
                fmt_shape(&ys)
            );
        }
        let dims: Vec<usize> = all.iter().map(|t| t.shape()[d]).collect();
        let total = (dims.iter()).try_fold(0usize, |a, &b| {
            add_size(a, b, || format!("cat: sizes {dims:?} along dim {d}"))
        })?;
        let mut acc: Option<Tensor> = None;
        let mut start = 0;
        for (t, &n) in all.iter().zip(&dims) {
            let mut arg: Vec<Option<(usize, usize)>> = vec![None; shape.len()];
            arg[d] = Some((start, total - start - n));
            start += n;
            let p = t.pad(&arg)?;
            acc = Some(match acc {
                None => p,
                Some(a) => a.add(&p)?,
            });
        }
        acc.ok_or_else(|| crate::Error::Internal("cat: no operands".into()))
    }

    /// tinygrad's `stack`: unsqueeze every operand at `dim`, then `cat`.
    pub fn stack(&self, others: &[&Tensor], dim: isize) -> Result<Tensor> {
        let first = self.unsqueeze(dim)?;
        let rest = others
            .iter()
            .map(|t| t.unsqueeze(dim))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = rest.iter().collect();
        first.cat(&refs, dim)
    }

    /// tinygrad's `split` with explicit sizes (they must sum to the size of `dim`).
    pub fn split_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
        let d = self.resolve_dim(dim, false)?;
        let shape = self.shape();
        let sum = sizes.iter().try_fold(0usize, |a, &b| a.checked_add(b));
        ensure!(
            sum == Some(shape[d]),
            InvalidArgument,
            "split: expect sizes to sum exactly to {}, but got {}",
            shape[d],
            sum.map_or_else(|| format!("{sizes:?} (overflows)"), |s| s.to_string())
        );
        let mut start = 0;
        let mut out = Vec::with_capacity(sizes.len());
        for &n in sizes {
            let mut arg: Vec<Option<(usize, usize)>> = vec![None; shape.len()];
            arg[d] = Some((start, start + n));
            out.push(self.shrink(&arg)?);
            start += n;
        }
        Ok(out)
    }

    /// tinygrad's `split(int)`: chunks of `size` along `dim` (the last may be smaller).
    pub fn split(&self, size: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = self.resolve_dim(dim, false)?;
        let n = self.shape()[d];
        ensure!(
            size > 0,
            InvalidArgument,
            "split: split size must be positive, got 0"
        );
        ensure!(
            n.div_ceil(size) <= MAX_PIECES,
            InvalidArgument,
            "split: {} pieces of size {size} along dim {d} are more than {MAX_PIECES}",
            n.div_ceil(size)
        );
        let sizes: Vec<usize> = (0..n.max(1))
            .step_by(size)
            .map(|i| size.min(n.saturating_sub(i)))
            .collect();
        self.split_sizes(&sizes, dim)
    }

    /// tinygrad's `chunk`: `chunks` pieces of size `ceil(n / chunks)` along `dim` (possibly
    /// fewer pieces).
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        ensure!(
            chunks > 0,
            InvalidArgument,
            "chunk: expect chunks to be greater than 0, got: {chunks}"
        );
        let d = self.resolve_dim(dim, false)?;
        let n = self.shape()[d];
        if n == 0 {
            ensure!(
                chunks <= MAX_PIECES,
                InvalidArgument,
                "chunk: {chunks} empty chunks of dim {d} are more than {MAX_PIECES}"
            );
            return self.split_sizes(&vec![0; chunks], dim);
        }
        self.split(n.div_ceil(chunks), dim)
    }
}
