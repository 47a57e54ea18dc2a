//! The program call, written once (tinygrad's `HCQProgram.__call__`): the launch value
//! ([`super::HcqLaunch`]) prepared by the program in a block of the device's kernarg ring (buffer
//! addresses, then integer variables, as the backend's program lays them out), then
//! `wait(timeline, v - 1) . memory_barrier . [timestamp] . exec . [timestamp] .
//! signal(timeline, v)` on the compute queue, one doorbell. The submission keeps the buffers and
//! the program alive until the timeline passes `v`.
//!
//! [`HcqProgramHandle`] is the [`crate::device::Program`] the engine holds.
//!
//! Not guaranteed: launch dims beyond 32 bits per axis are refused, not split.

use std::sync::Arc;

use super::device::encode_program_call;
use super::profile::ProfQueue;
use super::{HcqBackend, HcqBuffer, HcqDevice, HcqProgram, KeepAlive};
use crate::device::{LaunchDims, Program, RawBuf};
use crate::{Error, Result};

/// A loaded program bound to its device.
pub struct HcqProgramHandle<B: HcqBackend> {
    dev: Arc<HcqDevice<B>>,
    prg: Arc<B::Program>,
}

impl<B: HcqBackend> HcqProgramHandle<B> {
    pub fn new(dev: Arc<HcqDevice<B>>, prg: Arc<B::Program>) -> Self {
        HcqProgramHandle { dev, prg }
    }
    /// The backend program.
    pub fn program(&self) -> &Arc<B::Program> {
        &self.prg
    }
    /// The device it runs on.
    pub fn device(&self) -> &Arc<HcqDevice<B>> {
        &self.dev
    }
}

pub(crate) fn dims(what: &str, d: Option<LaunchDims>) -> Result<[u32; 3]> {
    let d = d.unwrap_or([1, 1, 1]);
    let mut out = [0u32; 3];
    for (o, v) in out.iter_mut().zip(d) {
        *o = u32::try_from(v).ok().filter(|&v| v >= 1).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what} size {d:?}: every dimension must be in 1..=2^32-1"
            ))
        })?;
    }
    Ok(out)
}

impl<B: HcqBackend> Program for HcqProgramHandle<B> {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
    fn call(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: Option<LaunchDims>,
        local: Option<LaunchDims>,
        wait: bool,
    ) -> Result<Option<f64>> {
        let (g, l) = (dims("global", global)?, dims("local", local)?);
        self.dev.call(&self.prg, bufs, vals, g, l, wait)
    }
}

impl<B: HcqBackend> HcqDevice<B> {
    /// Launch `prg` over `global` workgroups of `local` threads with `bufs` and `vals`. With
    /// `wait`, block until it finished and return its GPU time in seconds.
    pub fn call(
        &self,
        prg: &Arc<B::Program>,
        bufs: &[RawBuf],
        vals: &[i64],
        global: [u32; 3],
        local: [u32; 3],
        wait: bool,
    ) -> Result<Option<f64>> {
        let addrs: Vec<u64> = bufs.iter().map(|b| b.addr).collect();
        let timing = self.timing_pair(wait)?;
        let mut keep: Vec<KeepAlive> = bufs.iter().map(|b| b.owner.clone()).collect();
        keep.push(prg.clone());
        let point = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let v = self.begin(st)?;
            let size = prg.kernargs_alloc_size();
            let (off, _) = self.alloc_kernargs(st, size, st.tl.point(v))?;
            let mem: Arc<dyn HcqBuffer> = self.kernarg_mem().clone();
            let launch = prg
                .launch(mem, off, &addrs, vals, (global, local))
                .map_err(|e| {
                    Error::InvalidArgument(format!(
                        "{}: {}: {}",
                        self.name(),
                        prg.name(),
                        e.message()
                    ))
                })?;
            let mut q = self.backend().compute_queue();
            let tl = st.tl.signal.clone();
            encode_program_call::<B>(&mut q, &tl, v, prg, &launch, timing.as_ref())?;
            let what = format!("exec {} global {global:?} local {local:?}", prg.name());
            self.commit(st, &mut q, what, keep)?
        };
        self.profile_add(timing.as_ref(), prg.name().to_string(), ProfQueue::Compute);
        if !wait {
            return Ok(None);
        }
        self.wait_point(point, &format!("program {}", prg.name()))?;
        match &timing {
            Some(pair) => Ok(Some(self.elapsed_s(pair)?)),
            None => Ok(None),
        }
    }
}
