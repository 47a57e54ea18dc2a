//! The calls of an [`HcqGraph`](super::HcqGraph) run: checked against the build (count, kinds,
//! copy sizes), compared with the last run's (all of them, or the ones named updatable), and
//! the changed ones patched (kernargs, dims, copy addresses).
//!
//! Not guaranteed: calls not named updatable under `run_updating` are neither checked nor
//! compared (the caller vouches they are the last run's).

use super::{map_peer, prepare, GraphState, Node};
use crate::device::GraphCall;
use crate::hcq::queue::{HwComputeQueue, HwCopyQueue};
use crate::hcq::HcqBackend;
use crate::{ensure, Error, Result};

/// Whether `b` differs from `a` in what the graph holds (kernargs, dims, copy addresses).
fn changed(a: &GraphCall, b: &GraphCall) -> bool {
    match (a, b) {
        (GraphCall::Kernel { launch: a, .. }, GraphCall::Kernel { launch: b, .. }) => {
            a.raws.len() != b.raws.len()
                || a.raws.iter().zip(&b.raws).any(|(x, y)| x.addr != y.addr)
                || a.vals != b.vals
                || a.global != b.global
                || a.local != b.local
        }
        (GraphCall::Xfer(a), GraphCall::Xfer(b)) => {
            a.dst.addr != b.dst.addr || a.src.addr != b.src.addr
        }
        _ => true,
    }
}

impl<B: HcqBackend> GraphState<B> {
    /// The calls of a run must be of the build's count, kinds and copy sizes (of the calls
    /// `among` when given: the caller vouches for the others).
    pub(super) fn check(&self, calls: &[GraphCall], among: Option<&[usize]>) -> Result<()> {
        let n = self.written.len();
        ensure!(
            calls.len() == n,
            Runtime,
            "HcqGraph of {n} items run with {} calls",
            calls.len()
        );
        match among {
            Some(a) => a.iter().try_for_each(|&j| self.check_item(calls, j)),
            None => (0..n).try_for_each(|j| self.check_item(calls, j)),
        }
    }

    /// Call `j` must exist and be of the build's kind (and copy size).
    fn check_item(&self, calls: &[GraphCall], j: usize) -> Result<()> {
        let n = self.written.len();
        ensure!(
            j < n,
            InvalidArgument,
            "HcqGraph of {n} items run with updatable item {j}"
        );
        let (a, b) = (&self.written[j], &calls[j]);
        let same = match (a, b) {
            (GraphCall::Kernel { .. }, GraphCall::Kernel { .. }) => true,
            (GraphCall::Xfer(a), GraphCall::Xfer(b)) => a.size == b.size,
            _ => false,
        };
        ensure!(
            same,
            Runtime,
            "HcqGraph item {j} was built as {a:?}, run as {b:?}"
        );
        Ok(())
    }

    /// The items among `among` (every one when `None`) whose calls differ from the last run's
    /// in what the graph holds.
    pub(super) fn changed_items(
        &self,
        calls: &[GraphCall],
        among: Option<&[usize]>,
    ) -> Result<Vec<usize>> {
        let differs = |j: usize| changed(&self.written[j], &calls[j]);
        let Some(among) = among else {
            return Ok((0..calls.len()).filter(|&j| differs(j)).collect());
        };
        // `check` saw every index in range
        Ok(among.iter().copied().filter(|&j| differs(j)).collect())
    }

    /// Patch the items `items` (changed since the last run: kernargs, dims, copy addresses).
    pub(super) fn patch_calls(&mut self, calls: &[GraphCall], items: &[usize]) -> Result<()> {
        for &j in items {
            let c = &calls[j];
            match (&self.nodes[j], c, &self.written[j]) {
                (
                    Node::Kernel {
                        dev,
                        prg,
                        kernargs,
                        off,
                        exec,
                    },
                    GraphCall::Kernel { launch, .. },
                    GraphCall::Kernel { launch: old, .. },
                ) => {
                    let hl = prepare(prg, kernargs, *off, launch)?;
                    if old.global != launch.global || old.local != launch.local {
                        self.parts[*dev].comp.q.update_exec(exec, &hl)?;
                    }
                }
                (Node::Xfer { dev, copy }, GraphCall::Xfer(x), GraphCall::Xfer(old)) => {
                    let part = &mut self.parts[*dev];
                    let dst = (old.dst.addr != x.dst.addr).then_some(x.dst.addr);
                    if dst.is_some() {
                        map_peer(&part.dev, x)?;
                    }
                    let src = (old.src.addr != x.src.addr).then_some(x.src.addr);
                    part.copy.q.update_copy(copy, dst, src)?;
                }
                _ => return Err(Error::Internal(format!("HcqGraph item {j}: kind changed"))),
            }
            self.written[j] = c.clone();
        }
        Ok(())
    }
}
