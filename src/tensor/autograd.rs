//! Reverse-mode autograd (tinygrad 0.9.1's `_deepwalk` and `backward`): a depth-first
//! topological order of the tensors that carry a Function context, walked in reverse; each
//! context's backward gives the parents' gradients, accumulated by addition.
//!
//! Not guaranteed: gradients are lazy tensors (nothing is computed until they are realized);
//! contexts are consumed by `backward`, so a second `backward` through the same graph finds no
//! graph (as in tinygrad).

use std::collections::HashSet;

use super::{fmt_shape, Tensor};
use crate::{bail, ensure, Error, Result};

impl Tensor {
    /// tinygrad's `_deepwalk`: every tensor with a context reachable from this one, parents
    /// before children, in the order of a recursive DFS over `ctx.parents` (iterative here, so
    /// deep graphs cannot overflow the stack).
    pub(crate) fn deepwalk(&self) -> Vec<Tensor> {
        let mut visited: HashSet<usize> = HashSet::new();
        let mut order = Vec::new();
        // (node, its parents (when it has a context), next parent to visit)
        let mut stack: Vec<(Tensor, Vec<Tensor>, usize)> = Vec::new();
        visited.insert(self.id());
        if let Some(ctx) = self.ctx() {
            stack.push((self.clone(), ctx.parents.clone(), 0));
        }
        while let Some((node, parents, i)) = stack.pop() {
            if i >= parents.len() {
                order.push(node);
                continue;
            }
            let next = parents[i].clone();
            stack.push((node, parents, i + 1));
            if visited.insert(next.id()) {
                if let Some(ctx) = next.ctx() {
                    let ps = ctx.parents.clone();
                    stack.push((next, ps, 0));
                }
            }
        }
        order
    }

    /// tinygrad's `backward()`: seed this scalar's gradient with 1 and propagate gradients to
    /// every tensor in the graph that requires them (accumulating into existing gradients).
    pub fn backward(&self) -> Result<&Tensor> {
        ensure!(
            self.ndim() == 0,
            InvalidArgument,
            "backward: backward can only be called for scalar tensors, but it has shape {})",
            fmt_shape(&self.shape())
        );
        let seed = Tensor::scalar_on(1.0, self.dtype(), &self.device())?;
        seed.set_requires_grad(Some(false));
        self.set_grad(Some(seed));
        let device = self.device();
        for t0 in self.deepwalk().into_iter().rev() {
            let Some(grad) = t0.grad() else {
                bail!(InvalidArgument, "backward: tensor {t0:?} has no grad");
            };
            let Some(ctx) = t0.ctx() else {
                return Err(Error::Internal(format!(
                    "backward: {t0:?} lost its context during the walk"
                )));
            };
            let needs: Vec<bool> = ctx
                .needs_input_grad
                .iter()
                .map(|n| *n == Some(true))
                .collect();
            let grads = ctx.func.backward(&grad.lazydata(), &needs)?;
            ensure!(
                grads.len() == ctx.parents.len(),
                Internal,
                "backward: {} returned {} gradients for {} inputs",
                ctx.func.name(),
                grads.len(),
                ctx.parents.len()
            );
            for (t, g) in ctx.parents.iter().zip(grads) {
                let Some(g) = g else { continue };
                if t.requires_grad() != Some(true) {
                    continue;
                }
                let g = Tensor::from_lazybuffer(g, Some(false)).to(&device)?;
                ensure!(
                    g.shape() == t.shape(),
                    Internal,
                    "backward: grad shape must match tensor shape, {} != {} (in {})",
                    fmt_shape(&g.shape()),
                    fmt_shape(&t.shape()),
                    ctx.func.name()
                );
                let new = match t.grad() {
                    None => g,
                    Some(old) => old.add(&g)?,
                };
                t.set_grad(Some(new));
            }
            t0.set_ctx(None);
        }
        Ok(self)
    }
}
