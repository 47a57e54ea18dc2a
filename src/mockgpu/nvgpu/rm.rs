//! The software NV GPU attached to the emulated RM: [`RmNvGpu`] implements [`EmuNvGpu`]
//! (channel created -> [`NvGpu::add_channel`], engine bound -> [`NvGpu::bind_engine`], doorbell ->
//! [`NvGpu::doorbell`], channel destroyed -> [`NvGpu::remove_channel`]). Its memory goes through
//! the device's GPU page tables ([`EmuNvDevice::translate`]), USERD through the channel's USERD
//! memory ([`EmuNvDevice::userd`]), and a channel fault becomes RM's robust-channel error in the
//! error notifier of every channel of the TSG ([`EmuNvDevice::rc_error`], type from
//! [`super::FaultKind::rc_error_type`]). [`nv_gpu_factory`] builds one per emulated device.
//!
//! The chip's compute class (and so the QMD version, cbuf0 layout, ...) comes from the device's
//! class list through [`select_classes`].
//!
//! Not guaranteed: non-stall interrupts reach no RM event object (nothing in the emulated RM
//! listens yet); they are counted only.

use super::{ChannelDesc, ChannelFault, ChannelId, NvDispatchExecutor, NvEventSink};
use super::{NvGpu, NvInterrupt, UserdAccess};
use crate::driver::mapped::Mapping;
use crate::hw::nv::arch::select_classes;
use crate::hw::nv::gpfifo::{USERD_GP_GET, USERD_GP_PUT};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::mockgpu::{EmuChannel, EmuNvDevice, EmuNvGpu, NvGpuFactory};
use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// GPU memory as the device's page tables map it.
struct DeviceMemory {
    dev: EmuNvDevice,
}

impl GpuMemory for DeviceMemory {
    fn read(&self, va: u64, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.dev
            .translate(va, out.len() as u64, false)?
            .read_bytes(0, out)
    }
    fn write(&self, va: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.dev
            .translate(va, data.len() as u64, true)?
            .write_bytes(0, data)
    }
    fn read_u32(&self, va: u64) -> Result<u32> {
        self.dev
            .translate(va, 4, false)?
            .load_u32(0, Ordering::Acquire)
    }
    fn write_u32(&self, va: u64, v: u32) -> Result<()> {
        self.dev
            .translate(va, 4, true)?
            .store_u32(0, v, Ordering::Release)
    }
    fn read_u64(&self, va: u64) -> Result<u64> {
        self.dev
            .translate(va, 8, false)?
            .load_u64(0, Ordering::Acquire)
    }
    fn write_u64(&self, va: u64, v: u64) -> Result<()> {
        self.dev
            .translate(va, 8, true)?
            .store_u64(0, v, Ordering::Release)
    }
}

/// A channel's USERD in its RM memory object.
struct RmUserd {
    view: Mapping,
}

impl UserdAccess for RmUserd {
    fn read_gp_put(&self) -> Result<u32> {
        self.view.load_u32(USERD_GP_PUT as usize, Ordering::Acquire)
    }
    fn write_gp_get(&self, gp_get: u32) -> Result<()> {
        self.view
            .store_u32(USERD_GP_GET as usize, gp_get, Ordering::Release)
    }
    fn read_gp_get(&self) -> Result<u32> {
        self.view.load_u32(USERD_GP_GET as usize, Ordering::Acquire)
    }
}

/// Faults to RM's error notifiers.
struct RmEvents {
    dev: EmuNvDevice,
    channels: Mutex<HashMap<ChannelId, EmuChannel>>,
    non_stall: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NvEventSink for RmEvents {
    fn interrupt(&self, _channel: ChannelId, _source: NvInterrupt) {
        self.non_stall.fetch_add(1, Ordering::Relaxed);
    }
    fn channel_fault(&self, channel: ChannelId, fault: &ChannelFault) {
        if let Some(ch) = lock(&self.channels).get(&channel).cloned() {
            let _ = self.dev.rc_error(&ch, fault.kind.rc_error_type());
        }
    }
}

/// The software NV GPU of one emulated RM device.
pub struct RmNvGpu {
    gpu: std::result::Result<NvGpu, String>,
    events: Arc<RmEvents>,
    /// (client, channel handle) -> channel.
    ids: Mutex<HashMap<(u32, u32), ChannelId>>,
}

impl RmNvGpu {
    /// A software GPU for `dev` (its arch from the device's class list) running kernels with
    /// `executor`.
    pub fn new(dev: &EmuNvDevice, executor: Arc<dyn NvDispatchExecutor>) -> RmNvGpu {
        let events = Arc::new(RmEvents {
            dev: dev.clone(),
            channels: Mutex::new(HashMap::new()),
            non_stall: AtomicU64::new(0),
        });
        let gpu = (|| {
            let arch = select_classes(dev.chip()?.classes)?.arch;
            let mem = Arc::new(DeviceMemory { dev: dev.clone() });
            NvGpu::new(mem, executor, events.clone(), arch)
        })()
        .map_err(|e| e.to_string());
        RmNvGpu {
            gpu,
            events,
            ids: Mutex::new(HashMap::new()),
        }
    }

    /// The software GPU (an error if it did not start).
    pub fn gpu(&self) -> Result<&NvGpu> {
        self.gpu
            .as_ref()
            .map_err(|e| Error::Device(format!("software NV GPU did not start: {e}")))
    }

    /// The software GPU's id of RM channel `handle` of `client`.
    pub fn channel_id(&self, client: u32, handle: u32) -> Option<ChannelId> {
        lock(&self.ids).get(&(client, handle)).copied()
    }

    /// Non-stall interrupts raised so far.
    pub fn non_stall_interrupts(&self) -> u64 {
        self.events.non_stall.load(Ordering::Relaxed)
    }
}

impl EmuNvGpu for RmNvGpu {
    fn channel_created(&self, dev: &EmuNvDevice, ch: &EmuChannel) -> Result<()> {
        let desc = ChannelDesc {
            gpfifo_va: ch.gpfifo_va,
            entries: ch.gpfifo_entries,
            userd: Arc::new(RmUserd {
                view: dev.userd(ch)?,
            }),
            token: ch.work_submit_token,
            channel_class: ch.class,
        };
        let id = self.gpu()?.add_channel(desc)?;
        lock(&self.ids).insert((ch.client, ch.handle), id);
        lock(&self.events.channels).insert(id, ch.clone());
        Ok(())
    }

    fn engine_bound(&self, _dev: &EmuNvDevice, ch: &EmuChannel, class: u32) -> Result<()> {
        let Some(id) = self.channel_id(ch.client, ch.handle) else {
            return Err(Error::Device(format!(
                "software NV GPU: engine {class:#x} on unknown channel {:#x}",
                ch.handle
            )));
        };
        self.gpu()?.bind_engine(id, class)
    }

    fn doorbell(&self, _dev: &EmuNvDevice, ch: &EmuChannel) {
        if let Ok(gpu) = self.gpu() {
            // An unknown token is ignored, as hardware ignores it.
            let _ = gpu.doorbell(ch.work_submit_token);
        }
    }

    fn halt_channel(&self, _dev: &EmuNvDevice, ch: &EmuChannel, except_type: u32, reason: &str) {
        if let (Some(id), Ok(gpu)) = (self.channel_id(ch.client, ch.handle), self.gpu()) {
            let _ = gpu.halt_channel(id, except_type, reason);
        }
    }

    fn channel_destroyed(&self, _dev: &EmuNvDevice, ch: &EmuChannel) {
        let id = lock(&self.ids).remove(&(ch.client, ch.handle));
        if let (Some(id), Ok(gpu)) = (id, self.gpu()) {
            let _ = gpu.remove_channel(id);
            lock(&self.events.channels).remove(&id);
        }
    }
}

/// Builds an [`RmNvGpu`] running kernels with `executor` for each emulated NVIDIA device
/// (for [`crate::mockgpu::EmuConfig::nv_gpu_factory`]).
pub fn nv_gpu_factory(executor: Arc<dyn NvDispatchExecutor>) -> NvGpuFactory {
    Arc::new(move |dev: &EmuNvDevice| {
        Arc::new(RmNvGpu::new(dev, executor.clone())) as Arc<dyn EmuNvGpu>
    })
}
