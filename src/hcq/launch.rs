//! The launch value (tinygrad 0.9.x's kernargs pointer plus `global_size`/`local_size`, as one
//! value): [`HcqLaunch`] names one kernel launch's kernarg block (the memory it lives in, its
//! offset and GPU address) and its dims. A program prepares it once
//! ([`super::HcqProgram::launch`]: `fill_kernargs` writes the arguments and whatever the backend
//! derives from the dims into the block); the compute queue's `exec` consumes it, and
//! `update_exec` takes a new one (another block, or the same block [`HcqLaunch::with_dims`]) and
//! rewrites the launch wherever its backend keeps the kernarg pointer and the dims: AMD's PM4
//! stream (user SGPRs, DISPATCH_DIRECT, COMPUTE_NUM_THREAD_*) and dispatch packet, NV's QMD and
//! constant buffer 0 in the block.
//!
//! Not guaranteed: a launch made with [`HcqLaunch::at_address`] (encode-only: golden streams)
//! has no CPU view, so filling it or moving dims that live in memory is refused; nothing stops
//! two launches from naming overlapping blocks.

use std::sync::Arc;

use super::{HcqBuffer, KeepAlive};
use crate::driver::Mapping;
use crate::{ensure, Error, Result};

/// One kernel launch: where its kernargs live and its dims (see the module doc).
#[derive(Clone)]
pub struct HcqLaunch {
    /// GPU address of the kernarg block.
    kernargs: u64,
    /// The memory holding the block and the block's byte offset in it.
    mem: Option<(Arc<dyn HcqBuffer>, usize)>,
    /// Workgroup counts.
    pub global: [u32; 3],
    /// Workgroup size.
    pub local: [u32; 3],
}

impl std::fmt::Debug for HcqLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HcqLaunch(kernargs {:#x}, global {:?}, local {:?})",
            self.kernargs, self.global, self.local
        )
    }
}

impl HcqLaunch {
    /// A launch whose kernarg block starts at byte `off` of `mem` (which must be CPU-mapped).
    pub fn in_memory(
        mem: Arc<dyn HcqBuffer>,
        off: usize,
        global: [u32; 3],
        local: [u32; 3],
    ) -> Result<HcqLaunch> {
        ensure!(
            mem.cpu().is_some(),
            InvalidArgument,
            "launch: kernarg memory at {:#x} has no CPU view",
            mem.va()
        );
        ensure!(
            off < mem.size(),
            InvalidArgument,
            "launch: kernarg block at offset {off:#x} is outside the {:#x}-byte kernarg memory",
            mem.size()
        );
        Ok(HcqLaunch {
            kernargs: mem.va() + off as u64,
            mem: Some((mem, off)),
            global,
            local,
        })
    }

    /// An encode-only launch: kernargs at GPU address `kernargs`, no memory behind it here.
    pub fn at_address(kernargs: u64, global: [u32; 3], local: [u32; 3]) -> HcqLaunch {
        HcqLaunch {
            kernargs,
            mem: None,
            global,
            local,
        }
    }

    /// The same kernarg block with other dims.
    pub fn with_dims(&self, global: [u32; 3], local: [u32; 3]) -> HcqLaunch {
        HcqLaunch {
            global,
            local,
            ..self.clone()
        }
    }

    /// GPU address of the kernarg block.
    pub fn kernargs(&self) -> u64 {
        self.kernargs
    }

    /// The CPU view of the kernarg memory and the block's byte offset in it.
    pub fn view(&self) -> Result<(&Mapping, usize)> {
        let Some((mem, off)) = &self.mem else {
            return Err(Error::InvalidArgument(format!(
                "launch: the kernarg block at {:#x} was given by address only (no CPU view)",
                self.kernargs
            )));
        };
        match mem.cpu() {
            Some(m) => Ok((m, *off)),
            None => Err(Error::Internal("kernarg memory lost its CPU view".into())),
        }
    }

    /// Keeps the kernarg memory alive (for the queue recording the launch), if it is known.
    pub fn keep(&self) -> Option<KeepAlive> {
        self.mem
            .as_ref()
            .map(|(m, _)| Arc::new(m.clone()) as KeepAlive)
    }
}
