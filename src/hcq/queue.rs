//! The queue verbs (tinygrad 0.10's `HWQueue`), as traits over a backend.
//!
//! A queue value is a command list being built; nothing reaches the GPU until
//! [`HwQueue::submit`]. Every verb returns a [`Cmd`]: it derefs (mutably) to the queue, so verbs
//! chain (`q.wait(&tl, v - 1)?.memory_barrier()?.exec(..)?.signal(&tl, v)?;`), and it carries the
//! command's typed patch point ([`Cmd::patch`]), which the matching `update_*` takes to rewrite the
//! command in place (a graph replay with new signal values, copy addresses, or a launch's kernarg
//! block and dims: [`HwComputeQueue::update_exec`] with a new [`HcqLaunch`]).
//!
//! Queues remember what their commands reference ([`HwQueue::keep_alive`]); the device moves
//! that list into its in-flight table when it submits on the timeline.
//!
//! The verbs are written once, by [`HcqQueue`], over a backend's encoder: [`HcqEncoder`] (wait,
//! signal, timestamp, their updates, submit), plus [`ComputeEncoder`] (memory barrier, exec,
//! update_exec) or [`CopyEncoder`] (copy, update_copy). A backend provides only the packet
//! encodings and patch points of each engine; every backend's `ComputeQueue`/`CopyQueue` is an
//! `HcqQueue` over its encoder.
//!
//! Not guaranteed: a patch point applies to the queue that produced it only; `update_*` on a
//! queue already submitted changes the CPU copy, not what the GPU runs, except where a backend
//! keeps launch dims in memory the stream points at (NV's QMD): there `update_exec` writes that
//! memory at once.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::{HcqBackend, HcqLaunch, HcqSignal, KeepAlive};
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
    /// Rewrite the values of many waits and signals at once (a graph replay's new values): what
    /// `update_wait(p, None, Some(v))` for each wait, then `update_signal(p, None, Some(v))` for
    /// each signal do, stopping at the first error; a backend may apply them as one batch.
    fn update_values<'a>(
        &mut self,
        waits: impl IntoIterator<Item = (&'a Self::WaitPatch, u64)>,
        signals: impl IntoIterator<Item = (&'a Self::SignalPatch, u64)>,
    ) -> Result<()>
    where
        Self::WaitPatch: 'a,
        Self::SignalPatch: 'a;
    /// Hand the commands to the GPU on `dev`'s hardware queue of this kind.
    fn submit(&self, dev: &B) -> Result<()>;
    /// Put the commands into `dev`'s memory of their own, so that a submission points the GPU at
    /// them instead of copying them into the hardware ring (tinygrad 0.9.1 `HWQueue.bind`, what
    /// graphs replay); `false` where the backend does not bind (nothing changes). A bound queue
    /// takes no more commands (its patches, yes: each submission carries the patches made
    /// before it). Its submissions alternate between two copies: before submitting, the caller
    /// makes sure the submission two before this one has finished (the GPU may still read the
    /// previous one).
    fn bind(&mut self, dev: &B) -> Result<bool>;
    /// Dwords the last submission of a bound queue rewrote in the image it took (its dirty
    /// dwords); `None` when the queue is not bound.
    fn last_written(&self) -> Option<usize>;
    /// Keep `obj` alive while this command list may run.
    fn keep_alive(&mut self, obj: KeepAlive);
    /// The objects recorded with [`HwQueue::keep_alive`] (the list is emptied).
    fn take_keep_alive(&mut self) -> Vec<KeepAlive>;
    /// Whether no command was recorded.
    fn is_empty(&self) -> bool;
}

/// The compute queue's extra verbs.
pub trait HwComputeQueue<B: HcqBackend>: HwQueue<B> {
    /// Where a launch's kernarg pointer and dims live.
    type ExecPatch: Clone + std::fmt::Debug + Send;

    /// Make CPU writes (kernargs, uploaded code, host-written buffers) visible to the GPU and
    /// invalidate its caches.
    fn memory_barrier(&mut self) -> Result<Cmd<'_, Self, ()>>;
    /// Launch `prg` as `launch` says (its kernarg block, `launch.global` workgroups of
    /// `launch.local` threads).
    fn exec(
        &mut self,
        prg: &Arc<B::Program>,
        launch: &HcqLaunch,
    ) -> Result<Cmd<'_, Self, Self::ExecPatch>>;
    /// Rewrite a launch to `launch`: its kernarg pointer and its dims, wherever the backend
    /// keeps them (the command stream, or memory the stream points at: the caller makes sure the
    /// GPU no longer runs an earlier submission of this queue).
    fn update_exec(&mut self, patch: &Self::ExecPatch, launch: &HcqLaunch) -> Result<()>;
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

/// One engine's packet encodings and patch points: what a backend provides so that [`HcqQueue`]
/// has the queue verbs. Encoders only encode (and patch); keep-alive and command chaining are
/// [`HcqQueue`]'s.
pub trait HcqEncoder<B: HcqBackend>: Send + Sized {
    /// Where a `wait` command's signal address and value live.
    type WaitPatch: Clone + std::fmt::Debug + Send;
    /// Where a `signal` command's signal address and value live.
    type SignalPatch: Clone + std::fmt::Debug + Send;
    /// Where a `timestamp` command's destination lives.
    type TimestampPatch: Clone + std::fmt::Debug + Send;

    /// Encode a wait until `sig >= value`.
    fn wait(&mut self, sig: &B::Signal, value: u64) -> Result<Self::WaitPatch>;
    /// Encode a write of `value` to `sig` (and the wake-up of its event, if any).
    fn signal(&mut self, sig: &B::Signal, value: u64) -> Result<Self::SignalPatch>;
    /// Encode a write of the GPU clock into `sig`'s timestamp.
    fn timestamp(&mut self, sig: &B::Signal) -> Result<Self::TimestampPatch>;
    /// Rewrite a wait's signal and/or value.
    fn update_wait(
        &mut self,
        p: &Self::WaitPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()>;
    /// Rewrite a signal command's signal and/or value.
    fn update_signal(
        &mut self,
        p: &Self::SignalPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()>;
    /// Rewrite many waits' and signals' values (see [`HwQueue::update_values`]); the default
    /// patches them one by one.
    fn update_values<'a>(
        &mut self,
        waits: impl IntoIterator<Item = (&'a Self::WaitPatch, u64)>,
        signals: impl IntoIterator<Item = (&'a Self::SignalPatch, u64)>,
    ) -> Result<()>
    where
        Self::WaitPatch: 'a,
        Self::SignalPatch: 'a,
    {
        for (p, v) in waits {
            self.update_wait(p, None, Some(v))?;
        }
        for (p, v) in signals {
            self.update_signal(p, None, Some(v))?;
        }
        Ok(())
    }
    /// Hand the encoded commands to `dev`'s hardware queue of this engine.
    fn submit(&self, dev: &B) -> Result<()>;
    /// Move the commands into `dev`'s memory of their own (see [`HwQueue::bind`]); returns that
    /// memory, to keep alive while a submission may run, or `None` where the backend does not
    /// bind (the default).
    fn bind(&mut self, _dev: &B) -> Result<Option<KeepAlive>> {
        Ok(None)
    }
    /// See [`HwQueue::last_written`] (the default: not bound).
    fn last_written(&self) -> Option<usize> {
        None
    }
    /// The command dwords encoded so far.
    fn dwords(&self) -> &[u32];
}

/// A compute engine's encoder: the launch and the memory barrier.
pub trait ComputeEncoder<B: HcqBackend>: HcqEncoder<B> {
    /// Where a launch's kernarg pointer and dims live.
    type ExecPatch: Clone + std::fmt::Debug + Send;
    /// Encode a memory barrier (see [`HwComputeQueue::memory_barrier`]).
    fn memory_barrier(&mut self) -> Result<()>;
    /// Encode the launch of `prg` as `launch` says.
    fn exec(&mut self, prg: &Arc<B::Program>, launch: &HcqLaunch) -> Result<Self::ExecPatch>;
    /// Rewrite a launch to `launch` (see [`HwComputeQueue::update_exec`]).
    fn update_exec(&mut self, p: &Self::ExecPatch, launch: &HcqLaunch) -> Result<()>;
}

/// A copy engine's encoder.
pub trait CopyEncoder<B: HcqBackend>: HcqEncoder<B> {
    /// Where a copy's source and destination addresses live.
    type CopyPatch: Clone + std::fmt::Debug + Send;
    /// Encode a copy of `size` bytes from `src` to `dst`.
    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<Self::CopyPatch>;
    /// Rewrite a copy's destination and/or source.
    fn update_copy(
        &mut self,
        p: &Self::CopyPatch,
        dst: Option<u64>,
        src: Option<u64>,
    ) -> Result<()>;
}

/// A command list of one engine: the backend's encoder plus what the commands reference. The
/// queue verbs are implemented once, here, for every backend.
pub struct HcqQueue<B, E> {
    enc: E,
    keep: Vec<KeepAlive>,
    _backend: PhantomData<fn() -> B>,
}

impl<B, E> HcqQueue<B, E> {
    /// An empty command list over `enc` (which should hold no commands yet).
    pub fn from_encoder(enc: E) -> Self {
        HcqQueue {
            enc,
            keep: Vec::new(),
            _backend: PhantomData,
        }
    }
    /// The backend's encoder.
    pub fn encoder(&self) -> &E {
        &self.enc
    }
}

impl<B: HcqBackend, E: HcqEncoder<B>> HcqQueue<B, E> {
    /// The command dwords built so far.
    pub fn dwords(&self) -> &[u32] {
        self.enc.dwords()
    }
}

impl<B: HcqBackend, E: HcqEncoder<B>> HwQueue<B> for HcqQueue<B, E> {
    type WaitPatch = E::WaitPatch;
    type SignalPatch = E::SignalPatch;
    type TimestampPatch = E::TimestampPatch;

    fn wait(&mut self, sig: &B::Signal, value: u64) -> Result<Cmd<'_, Self, E::WaitPatch>> {
        let p = self.enc.wait(sig, value)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn signal(&mut self, sig: &B::Signal, value: u64) -> Result<Cmd<'_, Self, E::SignalPatch>> {
        let p = self.enc.signal(sig, value)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn timestamp(&mut self, sig: &B::Signal) -> Result<Cmd<'_, Self, E::TimestampPatch>> {
        let p = self.enc.timestamp(sig)?;
        self.keep.push(sig.keep());
        Ok(Cmd::new(self, p))
    }

    fn update_wait(
        &mut self,
        p: &E::WaitPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()> {
        self.enc.update_wait(p, sig, value)?;
        self.keep.extend(sig.map(|s| s.keep()));
        Ok(())
    }

    fn update_signal(
        &mut self,
        p: &E::SignalPatch,
        sig: Option<&B::Signal>,
        value: Option<u64>,
    ) -> Result<()> {
        self.enc.update_signal(p, sig, value)?;
        self.keep.extend(sig.map(|s| s.keep()));
        Ok(())
    }

    fn update_values<'a>(
        &mut self,
        waits: impl IntoIterator<Item = (&'a E::WaitPatch, u64)>,
        signals: impl IntoIterator<Item = (&'a E::SignalPatch, u64)>,
    ) -> Result<()>
    where
        E::WaitPatch: 'a,
        E::SignalPatch: 'a,
    {
        self.enc.update_values(waits, signals)
    }

    fn submit(&self, dev: &B) -> Result<()> {
        self.enc.submit(dev)
    }

    fn bind(&mut self, dev: &B) -> Result<bool> {
        let mem = self.enc.bind(dev)?;
        let bound = mem.is_some();
        self.keep.extend(mem);
        Ok(bound)
    }

    fn last_written(&self) -> Option<usize> {
        self.enc.last_written()
    }

    fn keep_alive(&mut self, obj: KeepAlive) {
        self.keep.push(obj);
    }

    fn take_keep_alive(&mut self) -> Vec<KeepAlive> {
        std::mem::take(&mut self.keep)
    }

    fn is_empty(&self) -> bool {
        self.enc.dwords().is_empty()
    }
}

impl<B: HcqBackend, E: ComputeEncoder<B>> HwComputeQueue<B> for HcqQueue<B, E> {
    type ExecPatch = E::ExecPatch;

    fn memory_barrier(&mut self) -> Result<Cmd<'_, Self, ()>> {
        self.enc.memory_barrier()?;
        Ok(Cmd::new(self, ()))
    }

    fn exec(
        &mut self,
        prg: &Arc<B::Program>,
        launch: &HcqLaunch,
    ) -> Result<Cmd<'_, Self, E::ExecPatch>> {
        let p = self.enc.exec(prg, launch)?;
        self.keep.push(prg.clone());
        self.keep.extend(launch.keep());
        Ok(Cmd::new(self, p))
    }

    fn update_exec(&mut self, p: &E::ExecPatch, launch: &HcqLaunch) -> Result<()> {
        self.enc.update_exec(p, launch)?;
        self.keep.extend(launch.keep());
        Ok(())
    }
}

impl<B: HcqBackend, E: CopyEncoder<B>> HwCopyQueue<B> for HcqQueue<B, E> {
    type CopyPatch = E::CopyPatch;

    fn copy(&mut self, dst: u64, src: u64, size: u64) -> Result<Cmd<'_, Self, E::CopyPatch>> {
        let p = self.enc.copy(dst, src, size)?;
        Ok(Cmd::new(self, p))
    }

    fn update_copy(&mut self, p: &E::CopyPatch, dst: Option<u64>, src: Option<u64>) -> Result<()> {
        self.enc.update_copy(p, dst, src)
    }
}
