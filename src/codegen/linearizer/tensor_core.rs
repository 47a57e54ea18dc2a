//! Tensor-core lowering (tinygrad 0.9.1 `index_local_aliases` and the WMMA branch of
//! `render_reduceop`).
//!
//! The two inputs of each matched reduce are read with per-thread indices: their warp-thread
//! dims and the first `num_upcasts` upcast dims are replaced by the tensor core's
//! `thread_local_aliases` (a positive entry `i` is local index `i-1`, a negative one the register
//! counter `_uidx_tc` split by `thread_local_sizes`), so each thread loads exactly the elements its
//! registers hold; the accumulators and the final stores use the same mapping for C. Every
//! combination of the remaining upcast dims then feeds one WMMA UOp (A, B and C packed into
//! vectors), chained per accumulator group, whose lanes are PHI'd back into the accumulators.
//!
//! Where rawgrad differs from 0.9.1: the aliases are taken by position in the (A, B) pair rather
//! than by buffer index distance (0.9.1 picks the wrong row when the two buffers are not adjacent
//! in the buffer list), the local `ldata` buffers 0.9.1 declares but never reads are not made, and
//! inputs loaded in another dtype (`tc_opt >= 1` casts) are cast to the tensor core's input dtype.

use super::Lin;
use crate::codegen::renderer::TensorCore;
use crate::codegen::uops::{UOp, WmmaArg};
use crate::ops::LazyOp;
use crate::shape::Node;
use crate::{bail, Error, Result};

/// Per reduce op: (input buffer, its per-thread indices) for A and B.
pub(crate) type TcAliases = Vec<(LazyOp, Vec<(usize, Vec<Node>)>)>;

impl Lin {
    /// tinygrad's `calc_tc_idxs`: one index expression per alias entry.
    fn calc_tc_idxs(&self, sizes: &[usize], aliases: &[Vec<i64>]) -> Result<Vec<Node>> {
        let total: usize = sizes.iter().product();
        let mut thread_idx = Node::var("_uidx_tc", 0, total as i64 - 1)?;
        let mut thread_idxs = Vec::with_capacity(sizes.len());
        for &s in sizes {
            thread_idxs.push(thread_idx.modulo(&Node::from(s))?);
            thread_idx = thread_idx.floordiv(&Node::from(s))?;
        }
        let mut out = Vec::with_capacity(aliases.len());
        for alias in aliases {
            let mut full = Node::Num(0);
            let mut full_sz = 1i64;
            if alias.first().copied().unwrap_or(0) != 0 {
                for &i in alias {
                    let next = if i > 0 {
                        self.local_idxs.get(i as usize - 1)
                    } else {
                        thread_idxs.get((-i - 1) as usize)
                    };
                    let Some(next) = next.cloned() else {
                        bail!(Codegen, "tensor core alias {i} has no index");
                    };
                    full = full.try_add(&next.try_mul(&Node::Num(full_sz))?)?;
                    let Some(m) = next.max().as_int() else {
                        bail!(Codegen, "tensor core index {next:?} has a symbolic bound");
                    };
                    full_sz *= m + 1;
                }
            }
            out.push(full);
        }
        Ok(out)
    }

    /// The per-thread indices of the tensor-core inputs (before the locals are remapped), then
    /// the local and upcast indices of the accumulators and stores replaced by C's layout.
    pub(crate) fn index_local_aliases(&mut self, reduce_idxs: &[Node]) -> Result<TcAliases> {
        let Some(tc) = self.k.tensor_core.clone() else {
            return Ok(vec![]);
        };
        let (gd, nthreads) = (self.k.global_dims(), tc.threads.len());
        let up_start = self.k.shape_len() - self.k.upcasted;
        let all = self.cat(&[
            &self.global_idxs,
            &self.local_idxs,
            reduce_idxs,
            &self.full_upcast_idxs,
        ]);
        let mut out: TcAliases = vec![];
        for (op, (b0, b1)) in self.k.bufs_for_tensor_core.clone() {
            let mut per_op = vec![];
            for (pos, b) in [b0, b1].into_iter().enumerate() {
                let strides = self.k.real_strides(b)?;
                let mut idxs: Vec<Node> = all
                    .iter()
                    .zip(&strides)
                    .map(|(x, s)| {
                        if *s == Some(Node::Num(0)) {
                            Node::Num(0)
                        } else {
                            x.clone()
                        }
                    })
                    .collect();
                let rep =
                    self.calc_tc_idxs(&tc.thread_local_sizes[pos], &tc.thread_local_aliases[pos])?;
                put(&mut idxs, gd, part(&rep, 0, nthreads)?)?;
                put(
                    &mut idxs,
                    up_start,
                    part(&rep, nthreads, nthreads + tc.num_upcasts())?,
                )?;
                per_op.push((b, idxs));
            }
            out.push((op, per_op));
        }
        let rep = self.calc_tc_idxs(&tc.thread_local_sizes[2], &tc.thread_local_aliases[2])?;
        put(&mut self.local_idxs, 0, part(&rep, 0, nthreads)?)?;
        put(&mut self.upcast_idxs, 0, part(&rep, nthreads, rep.len())?)?;
        Ok(out)
    }

    /// (stride in the WMMA sequence, size) of each upcast dim beyond the tensor core's own:
    /// dims a buffer broadcasts (stride 0) do not advance its sequence.
    fn upcast_strides(&self, buf: usize, tc: &TensorCore) -> Result<Vec<(usize, usize)>> {
        let mut out = vec![];
        let mut next = 1usize;
        for (sz, stride, _) in self
            .k
            .upcasted_axis(buf)?
            .into_iter()
            .skip(tc.num_upcasts())
        {
            let sz = usize::try_from(sz).map_err(|_| Error::Internal("negative upcast".into()))?;
            let zero = stride == Some(Node::Num(0));
            out.push((if zero { 0 } else { next }, sz));
            if !zero {
                next *= sz;
            }
        }
        Ok(out)
    }

    /// The two inputs of reduce `ri`, loaded per thread (in the tensor core's input dtype), with
    /// their buffer indices.
    fn tc_inputs(
        &mut self,
        ri: usize,
        tc: &TensorCore,
        aliases: &TcAliases,
    ) -> Result<Vec<(usize, Vec<UOp>)>> {
        let reduceop = self.k.reduceops[ri].clone();
        let Some((_, inputs)) = aliases.iter().find(|(op, _)| *op == reduceop) else {
            bail!(Codegen, "tensor core: reduce {ri} has no aliased inputs");
        };
        if inputs.len() != 2 {
            bail!(Internal, "tensor core: expected two inputs");
        }
        let mut out = vec![];
        for (b, idxs) in inputs {
            let loaded = self.global_load(*b, idxs, None, None, &[])?;
            let vals = loaded
                .into_iter()
                .map(|u| {
                    if u.dtype() == Some(tc.dtype_in) {
                        u
                    } else {
                        u.cast(tc.dtype_in)
                    }
                })
                .collect();
            out.push((*b, vals));
        }
        Ok(out)
    }

    /// The WMMA chain of reduce `ri`: one WMMA per combination of the upcast dims beyond the
    /// tensor core's (the first varying fastest), chained per accumulator group; returns the
    /// PHI'd accumulators.
    pub(crate) fn render_tc_reduce(
        &mut self,
        ri: usize,
        acc: Vec<UOp>,
        aliases: &TcAliases,
    ) -> Result<Vec<UOp>> {
        let Some(tc) = self.k.tensor_core.clone() else {
            bail!(Internal, "render_tc_reduce without a tensor core");
        };
        let inputs = self.tc_inputs(ri, &tc, aliases)?;
        let sz: Vec<usize> = tc
            .thread_local_sizes
            .iter()
            .map(|l| l.iter().product())
            .collect();
        let upcasts = [
            self.upcast_strides(inputs[0].0, &tc)?,
            self.upcast_strides(inputs[1].0, &tc)?,
            self.upcast_strides(0, &tc)?,
        ];
        let dt3 = tc.dtype_out.vec(sz[2] as u16);
        let mut wmmas: Vec<UOp> = acc
            .chunks(sz[2])
            .map(|c| UOp::vectorize(c.to_vec(), dt3))
            .collect();
        let arg = WmmaArg {
            name: tc.name(),
            dims: tc.dims,
            dtype_in: tc.dtype_in,
            dtype_out: tc.dtype_out,
            upcast_sizes: sz.clone(),
            device: self.k.opts.device.clone(),
        };
        let sizes: Vec<usize> = upcasts[0].iter().map(|x| x.1).collect();
        for it in combos(&sizes) {
            let offs: Vec<usize> = upcasts
                .iter()
                .zip(&sz)
                .map(|(u, s)| it.iter().zip(u).map(|(i, (st, _))| i * st).sum::<usize>() * s)
                .collect();
            let mut ab = vec![];
            for (j, (_, vals)) in inputs.iter().enumerate() {
                let Some(lanes) = vals.get(offs[j]..offs[j] + sz[j]) else {
                    bail!(Internal, "tensor core: input slice out of range");
                };
                ab.push(UOp::vectorize(
                    lanes.to_vec(),
                    tc.dtype_in.vec(sz[j] as u16),
                ));
            }
            let wi = offs[2] / sz[2];
            let Some(c) = wmmas.get(wi).cloned() else {
                bail!(Internal, "tensor core: accumulator group {wi} out of range");
            };
            wmmas[wi] = UOp::wmma(&ab[0], &ab[1], &c, arg.clone(), dt3);
        }
        Ok(acc
            .iter()
            .enumerate()
            .map(|(z, a)| UOp::phi(a, &UOp::gep(&wmmas[z / sz[2]], z % sz[2], tc.dtype_out)))
            .collect())
    }
}

/// `xs[a..b]`, or an error when the tensor core's alias table is shorter.
fn part(xs: &[Node], a: usize, b: usize) -> Result<&[Node]> {
    xs.get(a..b)
        .ok_or_else(|| Error::Codegen(format!("tensor core: aliases {a}..{b} of {}", xs.len())))
}

/// Overwrite `dst[at..]` with `src`.
fn put(dst: &mut [Node], at: usize, src: &[Node]) -> Result<()> {
    let n = dst.len();
    let Some(d) = dst.get_mut(at..at + src.len()) else {
        bail!(Codegen, "tensor core: {} indices at {at} of {n}", src.len());
    };
    d.clone_from_slice(src);
    Ok(())
}

/// Every index combination of dims of `sizes`, the first varying fastest (one empty combination
/// without dims).
fn combos(sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![vec![]];
    for &s in sizes {
        let mut next = Vec::with_capacity(out.len() * s);
        for v in 0..s {
            for p in &out {
                let mut p = p.clone();
                p.push(v);
                next.push(p);
            }
        }
        out = next;
    }
    out
}
