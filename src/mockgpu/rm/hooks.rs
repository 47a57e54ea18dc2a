//! The seam between the emulated RM/UVM and a software NVIDIA GPU.
//!
//! A software GPU implements [`EmuNvGpu`] and is attached to one emulated device
//! ([`crate::mockgpu::EmuDriver::attach_nv_gpu`], or for every device through
//! [`crate::mockgpu::EmuConfig::nv_gpu_factory`]). RM calls it when a channel is created, bound to
//! an engine object, scheduled or destroyed, and when the process rings the channel's doorbell
//! (writes its work submit token to the usermode page). The GPU reaches back through the
//! [`EmuNvDevice`] it is given: [`EmuNvDevice::translate`] looks a GPU VA range up in the device's
//! page tables (UVM external mappings and RM_MAP_MEMORY_DMA mappings), refusing unmapped or
//! read-only ranges as the MMU would; [`EmuNvDevice::userd`] is the channel's USERD (GPPut at
//! 0x8C, GPGet at 0x88); [`EmuNvDevice::rc_error`] writes the robust-channel error into the error
//! notifier of every channel of the TSG, as RM does when a channel dies.
//!
//! Rules for implementors: callbacks run on the thread that made the ioctl or the doorbell write,
//! with no emulator lock held (they may call back into the `EmuNvDevice`); a GPU that blocks
//! (a semaphore acquire on memory the CPU writes later) must do so on its own thread. Without a
//! GPU attached, doorbells are only recorded ([`crate::mockgpu::EmuDriver::nv_doorbell_writes`]).
//!
//! Not guaranteed: a GPU VA range that spans two mappings must be translated per mapping.

use std::sync::{Arc, Weak};

use super::spec::NvChipSpec;
use super::EmuNv;
use crate::driver::mapped::Mapping;
use crate::{Error, Result};

/// A channel RM accepted, as the software GPU needs it. Handles are the client's; addresses are
/// GPU VAs unless said otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuChannel {
    pub client: u32,
    pub handle: u32,
    /// The GPFIFO class (HOPPER_CHANNEL_GPFIFO_A ...).
    pub class: u32,
    /// The TSG (KEPLER_CHANNEL_GROUP_A) it belongs to, and the TSG's engine type.
    pub tsg: u32,
    pub engine_type: u32,
    /// The subcontext (FERMI_CONTEXT_SHARE_A) and its vaspace.
    pub ctx_share: u32,
    pub vaspace: u32,
    /// The GP entry ring: GPU VA, entries (8 bytes each), and the memory object holding it.
    pub gpfifo_va: u64,
    pub gpfifo_entries: u32,
    pub gpfifo_memory: u32,
    /// USERD: memory object and byte offset (read it with [`EmuNvDevice::userd`]).
    pub userd_memory: u32,
    pub userd_offset: u64,
    /// The error notifier memory (`hObjectError`; 0 if none).
    pub error_notifier: u32,
    /// Channel id and the token the process writes to the doorbell.
    pub chid: u32,
    pub work_submit_token: u32,
    /// Engine objects allocated on the channel, in allocation order.
    pub engines: Vec<EmuEngine>,
    /// Whether the TSG is scheduled (GPFIFO_SCHEDULE enabled it).
    pub scheduled: bool,
}

/// An engine object on a channel (a compute or copy class).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmuEngine {
    pub class: u32,
    pub handle: u32,
}

impl EmuChannel {
    /// The class of the first compute (`compute`) or copy (`!compute`) engine object bound.
    pub fn engine_class(&self, compute: bool) -> Option<u32> {
        self.engines
            .iter()
            .find(|e| super::spec::class_kind(e.class) == Some(engine_kind(compute)))
            .map(|e| e.class)
    }
}

fn engine_kind(compute: bool) -> super::spec::ClassKind {
    if compute {
        super::spec::ClassKind::Compute
    } else {
        super::spec::ClassKind::Copy
    }
}

/// One doorbell write as the emulator observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvDoorbellWrite {
    /// The work submit token written.
    pub token: u32,
    /// The channel owning the token (`None`: no such channel; hardware ignores the write).
    pub channel: Option<u32>,
    /// Whether it went to the software GPU (a channel whose TSG is scheduled, a GPU attached).
    pub delivered: bool,
}

/// A software NVIDIA GPU attached to one emulated device.
pub trait EmuNvGpu: Send + Sync {
    /// A channel passed RM's checks. An error fails the RM_ALLOC (NV_ERR_NOT_SUPPORTED).
    fn channel_created(&self, dev: &EmuNvDevice, ch: &EmuChannel) -> Result<()>;
    /// An engine object of `class` was allocated on `ch` (already in `ch.engines`). An error
    /// fails the RM_ALLOC (NV_ERR_NOT_SUPPORTED).
    fn engine_bound(&self, dev: &EmuNvDevice, ch: &EmuChannel, class: u32) -> Result<()> {
        let _ = (dev, ch, class);
        Ok(())
    }
    /// GPFIFO_SCHEDULE enabled or disabled the channel's TSG.
    fn channel_scheduled(&self, dev: &EmuNvDevice, ch: &EmuChannel, enabled: bool) {
        let _ = (dev, ch, enabled);
    }
    /// The process wrote `ch.work_submit_token` to the usermode page; the ring entries and GPPut
    /// (USERD 0x8C) it wrote before are visible.
    fn doorbell(&self, dev: &EmuNvDevice, ch: &EmuChannel);
    /// The channel is being freed (RM_FREE of it or an ancestor, or its client's fd closed).
    fn channel_destroyed(&self, dev: &EmuNvDevice, ch: &EmuChannel);
    /// RM halts the channel for a critical error of type `except_type` (fault injection,
    /// [`crate::mockgpu::EmuDriver::reset_nv_gpu`]; kernel_rc.c `krcRcAndNotifyAllChannels`):
    /// stop it where it is, faulted with `reason`, until it is freed. RM writes the error
    /// notifier itself. A GPU that cannot stop a channel ignores this.
    fn halt_channel(&self, dev: &EmuNvDevice, ch: &EmuChannel, except_type: u32, reason: &str) {
        let _ = (dev, ch, except_type, reason);
    }
}

/// Builds the software GPU of a device when the driver is created.
pub type NvGpuFactory = Arc<dyn Fn(&EmuNvDevice) -> Arc<dyn EmuNvGpu> + Send + Sync>;

/// A software GPU's handle on its emulated NVIDIA device.
#[derive(Clone)]
pub struct EmuNvDevice {
    pub(super) nv: Weak<EmuNv>,
    pub(super) index: usize,
}

impl std::fmt::Debug for EmuNvDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmuNvDevice({})", self.index)
    }
}

impl EmuNvDevice {
    pub(super) fn nv(&self) -> Result<Arc<EmuNv>> {
        self.nv.upgrade().ok_or_else(|| {
            Error::Device(format!(
                "emu nv gpu {}: the emulated driver is gone",
                self.index
            ))
        })
    }

    /// The device index (CARD_INFO order, `deviceInstance`).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The chip it emulates.
    pub fn chip(&self) -> Result<&'static NvChipSpec> {
        Ok(self.nv()?.chip)
    }

    /// The GPU UUID (what GET_GID_INFO returns and UVM takes).
    pub fn uuid(&self) -> [u8; 16] {
        super::gpu_uuid(self.index)
    }

    /// The GPU's view of `[va, va + len)`: a [`Mapping`] of the backing memory if the whole range
    /// lies in one mapping of this device's page table (and it is writable when `write`), else
    /// `Error::Fault` naming the address.
    pub fn translate(&self, va: u64, len: u64, write: bool) -> Result<Mapping> {
        self.nv()?.gpu_translate(self.index, va, len, write)
    }

    /// Whether `[va, va + len)` lies in one mapping of this device.
    pub fn is_mapped(&self, va: u64, len: u64) -> bool {
        self.translate(va, len, false).is_ok()
    }

    /// The channel whose work submit token is `token`.
    pub fn channel(&self, token: u32) -> Result<EmuChannel> {
        self.nv()?.channel_by_token(self.index, token)
    }

    /// Every channel alive on this device.
    pub fn channels(&self) -> Result<Vec<EmuChannel>> {
        Ok(self.nv()?.channels_of(self.index))
    }

    /// The channel's USERD (512 bytes: GPGet at 0x88, GPPut at 0x8C), read/write.
    pub fn userd(&self, ch: &EmuChannel) -> Result<Mapping> {
        let nv = self.nv()?;
        nv.memory_view(ch.client, ch.userd_memory, ch.userd_offset, 512)
    }

    /// The channel's error notifier memory (three 16-byte NvNotification records).
    pub fn error_notifier(&self, ch: &EmuChannel) -> Result<Mapping> {
        let nv = self.nv()?;
        nv.memory_view(ch.client, ch.error_notifier, 0, 48)
    }

    /// Write NvNotification record `index` (0 RC error, 1 work submit token, 2 key rotation) of
    /// the channel's error notifier: timestamp now, `info32`, `info16`, `status`.
    pub fn write_error_notifier(
        &self,
        ch: &EmuChannel,
        index: u32,
        info32: u32,
        info16: u16,
        status: u16,
    ) -> Result<()> {
        self.nv()?
            .write_notifier(ch.client, ch.error_notifier, index, info32, info16, status)
    }

    /// A robust-channel error on `ch` (exception type `except_type`, e.g. 31 MMU fault, 13 GR
    /// exception): as RM, write record 0 of the error notifier of every channel in the TSG
    /// (info32 = type, info16 = the engine type, status 0xFFFF).
    pub fn rc_error(&self, ch: &EmuChannel, except_type: u32) -> Result<()> {
        let nv = self.nv()?;
        for c in nv.channels_of(self.index) {
            if c.client == ch.client && c.tsg == ch.tsg {
                nv.rc_notify(&c, except_type)?;
            }
        }
        Ok(())
    }
}
