//! The queue verbs (tinygrad 0.10's `HWQueue`), as traits over a backend.
//!
//! A queue value is a command list being built; nothing reaches the GPU until
//! [`HwQueue::submit`]. Every verb returns a [`Cmd`]: it derefs (mutably) to the queue, so verbs
//! chain (`q.wait(&tl, v - 1)?.memory_barrier()?.exec(..)?.signal(&tl, v)?;`), and it carries the
//! command's typed patch point ([`Cmd::patch`]), which the matching `update_*` takes to rewrite the
//! command in place (a graph replay with new signal values, kernarg addresses or launch dims).
//!
//! Queues remember what their commands reference ([`HwQueue::keep_alive`]); the device moves
//! that list into its in-flight table when it submits on the timeline.
//!
//! Not guaranteed: a patch point applies to the queue that produced it only; `update_*` on a
//! queue already submitted changes the CPU copy, not what the GPU runs.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::{HcqBackend, KeepAlive};
use crate::Result;

/// A command just recorded: the queue (to chain the next verb) and the command's patch point.
pub struct Cmd<'q, Q, P> {
    queue: &'q mut Q,
    patch: P,
}

impl<'q, Q, P> Cmd<'q, Q, P> {
    /// Wrap a queue and the patch point of the command it just recorded.
    pub fn new(queue: &'q mut Q, patch: P) -> Self {
        Cmd { queue, patch }
    }
    /// The command's patch point.
    pub fn patch(&self) -> &P {
        &self.patch
    }
    /// Keep the patch point, release the queue.
    pub fn into_patch(self) -> P {
        self.patch
    }
}

impl<Q, P> Deref for Cmd<'_, Q, P> {
    type Target = Q;
    fn deref(&self) -> &Q {
        self.queue
    }
}

impl<Q, P> DerefMut for Cmd<'_, Q, P> {
    fn deref_mut(&mut self) -> &mut Q {
        self.queue
    }
}

/// The verbs every queue has.
pub trait HwQueue<B: HcqBackend>: Send + Sized {
    /// Where a `wait` command's signal address and value live.
    type WaitPatch: Clone + std::fmt::Debug + Send;
    /// Where a `signal` command's signal address and value live.
    type SignalPatch: Clone + std::fmt::Debug + Send;
    /// Where a `timestamp` command's destination lives.
    type TimestampPatch: Clone + std::fmt::Debug + Send;

    /// Wait until `sig >= value` (32-bit compare on the GPU).
    fn wait(&mut self, sig: &B::Signal, value: u64) -> Result<Cmd<'_, Self, Self::WaitPatch>>;
    /// Write `value` to `sig` once everything before it finished (and wake CPU sleepers if the
    /// signal has an event).
    fn signal(&mut self, sig: &B::Signal, value: u64) -> Result<Cmd<'_, Self, Self::SignalPatch>>;
    /// Write the GPU clock into `sig`'s timestamp once everything before it finished.
    fn timestamp(&mut self, sig: &B::Signal) -> Result<Cmd<'_, Self, Self::TimestampPatch>>;
    /// Rewrite a `wait`: another signal and/or value.
    fn update_wait(
        &mut self,
        patch: &Self::WaitPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()>;
    /// Rewrite a `signal`: another signal and/or value.
    fn update_signal(
        &mut self,
        patch: &Self::SignalPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()>;
    /// Hand the commands to the GPU on `dev`'s hardware queue of this kind.
    fn submit(&self, dev: &B) -> Result<()>;
    /// Keep `obj` alive while this command list may run.
    fn keep_alive(&mut self, obj: KeepAlive);
    /// The objects recorded with [`HwQueue::keep_alive`] (the list is emptied).
    fn take_keep_alive(&mut self) -> Vec<KeepAlive>;
    /// Whether no command was recorded.
    fn is_empty(&self) -> bool;
}

/// The compute queue's extra verbs.
pub trait HwComputeQueue<B: HcqBackend>: HwQueue<B> {
    /// Where a launch's dims and kernarg pointer live.
    type ExecPatch: Clone + std::fmt::Debug + Send;

    /// Make CPU writes (kernargs, uploaded code, host-written buffers) visible to the GPU and
    /// invalidate its caches.
    fn memory_barrier(&mut self) -> Result<Cmd<'_, Self, ()>>;
    /// Launch `prg` over `global` workgroups of `local` threads, reading kernargs at `kernargs`.
    fn exec(
        &mut self,
        prg: &Arc<B::Program>,
        kernargs: u64,
        global: [u32; 3],
        local: [u32; 3],
    ) -> Result<Cmd<'_, Self, Self::ExecPatch>>;
    /// Whether the launch dims live in the kernarg block [`super::HcqProgram::fill_kernargs`]
    /// writes (NV's QMD): then a refill changes them and [`HwComputeQueue::update_exec`] takes
    /// only the kernarg address.
    fn dims_in_kernargs(&self) -> bool {
        false
    }
    /// Rewrite a launch: kernarg pointer and/or dims.
    fn update_exec(
        &mut self,
        patch: &Self::ExecPatch,
        kernargs: Option<u64>,
        global: Option<[u32; 3]>,
        local: Option<[u32; 3]>,
    ) -> Result<()>;
}

/// The copy queue's extra verb.
pub trait HwCopyQueue<B: HcqBackend>: HwQueue<B> {
    /// Where a copy's source and destination addresses live.
    type CopyPatch: Clone + std::fmt::Debug + Send;

    /// Copy `size` bytes from GPU address `src` to `dst` (split as the engine needs).
    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<Cmd<'_, Self, Self::CopyPatch>>;
    /// Rewrite a copy's destination and/or source.
    fn update_copy(
        &mut self,
        patch: &Self::CopyPatch,
        dst: Option<u64>,
        src: Option<u64>,
    ) -> Result<()>;
}
