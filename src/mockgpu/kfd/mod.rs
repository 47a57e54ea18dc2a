//! The emulated KFD (`/dev/kfd` and the render nodes) of one process, routed here by
//! [`crate::mockgpu::EmuDriver`]. What it emulates, checking what amdkfd
//! (`drivers/gpu/drm/amd/amdkfd`) checks and answering with its errno (plus a message saying
//! which check failed):
//! - sysfs topology and device nodes ([`nodes`]): a CPU node and `MOCKGPU_COUNT` GPUs of
//!   `MOCKGPU_ARCH`; `/dev/kfd` and `/dev/dri/renderD<128+i>` open to fake descriptors;
//! - the KFD ioctls a runtime uses ([`ioctl`]): GET_VERSION, ACQUIRE_VM, ALLOC/FREE/MAP/UNMAP
//!   memory ([`buffers`]), CREATE/DESTROY_QUEUE with the Linux >= 6.12 queue-buffer checks
//!   ([`queues`]), CREATE/DESTROY/SET/RESET_EVENT, WAIT_EVENTS, AVAILABLE_MEMORY,
//!   GET_CLOCK_COUNTERS;
//! - memory ([`memory`], [`buffers`]): GPU VA == CPU VA; buffers are memfds, mapped by the
//!   process where it mmaps them and by the emulator for the software GPU; per-device GPU page
//!   tables;
//! - doorbells: `/dev/kfd` doorbell pages are real memory; a doorbell write finds the queue and
//!   calls the device's [`EmuGpu`] (or just records the write when none is attached);
//! - events ([`events`]): signal events with a user or KFD event page, WAIT_EVENTS with
//!   timeouts, woken by [`EmuDevice::interrupt`];
//! - the seam to the software GPUs ([`hooks`]).
//!
//! Stricter than KFD (on purpose, to catch bugs): ioctl sizes must equal the 1.11 structs (KFD
//! zero-extends shorter ones), allocation flags need exactly one memory type and no unknown bits,
//! non-USERPTR `va_addr` must lie in a reservation the process made through this driver, USERPTR
//! memory must come from this driver's anonymous shared mmap, rings must be >= 1024 bytes, and
//! freed handles are never reused.
//!
//! Not guaranteed: the process address space (what was mapped through the driver, `KfdState::cpu`)
//! is kept here and shared with the emulated NVIDIA driver (`mockgpu::rm`), which reads it.

pub mod buffers;
pub mod events;
pub mod hooks;
pub mod ioctl;
pub mod memory;
pub mod nodes;
pub mod queues;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

pub(crate) use super::{lock, KErr, KResult};
use crate::driver::api::{errno_error, Fd, OpenFlags};
use crate::driver::vma::VmaMap;
use crate::mockgpu::backing::Backing;
use crate::Result;
use events::Events;
use hooks::{DoorbellWrite, EmuDevice, EmuGpu, EmuQueue};
use memory::{Alloc, CpuVmaKind, GpuMap};
use nodes::NodeDesc;

/// Bound on the per-device doorbell log.
pub(crate) const DOORBELL_LOG: usize = 4096;

/// One emulated GPU's live parts (its fixed description is `EmuKfd::descs[i]`).
pub(crate) struct EmuNode {
    /// The process doorbell frame of this device (what `/dev/kfd` doorbell mmaps show).
    pub(crate) doorbell_page: Arc<Backing>,
    /// The emulator's view of `doorbell_page`.
    pub(crate) doorbell_view: crate::driver::mapped::Mapping,
    /// The remapped MMIO page (`KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP`).
    pub(crate) mmio_page: Arc<Backing>,
    pub(crate) gpu: RwLock<Option<Arc<dyn EmuGpu>>>,
    pub(crate) log: Mutex<VecDeque<DoorbellWrite>>,
}

/// What an emulated descriptor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EmuFd {
    Kfd,
    Render(usize),
}

/// Mutable KFD process state.
pub(crate) struct KfdState {
    pub(crate) next_fd: i32,
    pub(crate) fds: HashMap<i32, EmuFd>,
    /// The render fd ACQUIRE_VM bound, per device.
    pub(crate) acquired: Vec<Option<i32>>,
    pub(crate) allocs: HashMap<u64, Alloc>,
    /// (device, render-node mmap offset) -> handle.
    pub(crate) by_offset: HashMap<(usize, u64), u64>,
    /// Per device: GPU VA ranges of its buffers -> handle (allocated, mapped or not).
    pub(crate) va_ranges: Vec<VmaMap<u64>>,
    pub(crate) next_idr: Vec<u32>,
    pub(crate) next_mmap_offset: u64,
    pub(crate) vram_used: Vec<u64>,
    /// Per device: the VRAM ALLOC may hand out (the spec's size unless a test lowers it).
    pub(crate) vram_budget: Vec<u64>,
    /// Armed one-shot ioctl failures (test fault injection, [`crate::mockgpu::EmuDriver::fail_ioctl`]).
    pub(crate) ioctl_faults: Vec<IoctlFault>,
    /// CPU address ranges the process mapped through this driver.
    pub(crate) cpu: VmaMap<CpuVmaKind>,
    pub(crate) queues: BTreeMap<u32, Arc<EmuQueue>>,
}

/// A KFD ioctl armed to fail: the `skip`-th next call of `request` (0: the next one) returns
/// `errno` before the emulated driver sees it, so its state is unchanged (as when the kernel
/// fails a call at its entry: a signal, a transient ENOMEM, a reset in progress).
pub(crate) struct IoctlFault {
    pub(crate) request: u64,
    pub(crate) skip: usize,
    pub(crate) errno: i32,
}

/// Doorbell routing, read on every doorbell write.
#[derive(Default)]
pub(crate) struct DoorbellTable {
    /// CPU mappings of doorbell pages -> device index.
    pub(crate) maps: VmaMap<usize>,
    /// (device index, slot) -> queue.
    pub(crate) slots: HashMap<(usize, u32), Arc<EmuQueue>>,
}

/// The emulated KFD of one process.
pub(crate) struct EmuKfd {
    pub(crate) pid: u32,
    pub(crate) large_bar: bool,
    pub(crate) descs: Vec<NodeDesc>,
    pub(crate) nodes: Vec<EmuNode>,
    pub(crate) state: Mutex<KfdState>,
    /// Per-device GPU page tables: VA range -> buffer.
    pub(crate) gpuvm: Vec<RwLock<VmaMap<GpuMap>>>,
    pub(crate) doorbells: RwLock<DoorbellTable>,
    pub(crate) events: Events,
}

/// First fake descriptor number (far above what the process opens itself).
pub const EMU_FD_BASE: i32 = 1 << 30;

impl EmuKfd {
    pub(crate) fn node_by_gpu_id(&self, gpu_id: u32) -> Option<usize> {
        self.descs.iter().position(|d| d.gpu_id == gpu_id)
    }

    pub(crate) fn device(self: &Arc<Self>, index: usize) -> EmuDevice {
        EmuDevice {
            kfd: Arc::downgrade(self),
            index,
            gpu_id: self.descs[index].gpu_id,
        }
    }

    pub(crate) fn queues_of(&self, index: usize) -> Vec<Arc<EmuQueue>> {
        let gpu_id = self.descs[index].gpu_id;
        lock(&self.state)
            .queues
            .values()
            .filter(|q| q.gpu_id == gpu_id)
            .cloned()
            .collect()
    }
}

pub(crate) fn emu_open(kfd: &EmuKfd, path: &str, flags: OpenFlags) -> Result<Fd> {
    let kind = if path == "/dev/kfd" {
        EmuFd::Kfd
    } else if let Some(minor) = path
        .strip_prefix("/dev/dri/renderD")
        .and_then(|m| m.parse::<u32>().ok())
    {
        match kfd.descs.iter().position(|d| d.render_minor == minor) {
            Some(i) => EmuFd::Render(i),
            None => {
                return Err(errno_error(
                    libc::ENOENT,
                    format!("emu: open({path:?}): no such render node"),
                ))
            }
        }
    } else {
        return Err(errno_error(
            libc::ENOENT,
            format!("emu: open({path:?}): only /dev/kfd, /dev/dri/renderD* and /dev/nvidia* are emulated"),
        ));
    };
    if !flags.contains(OpenFlags::RDWR) {
        return Err(errno_error(
            libc::EACCES,
            format!("emu: open({path:?}) needs O_RDWR"),
        ));
    }
    let mut st = lock(&kfd.state);
    let fd = st.next_fd;
    st.next_fd += 1;
    st.fds.insert(fd, kind);
    Ok(Fd(fd))
}
