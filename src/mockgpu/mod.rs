//! The emulator, one home: [`EmuDriver`], an in-process emulated KFD and NVIDIA kernel driver
//! behind the [`Driver`] trait, and the software GPUs that consume the queues, so the AMD and NV
//! backends run (and are tested) without a GPU, under `MOCKGPU=1`. It imports the driver ABI,
//! `hw` (packet and chip facts), `codegen` and `interp`; never `runtime/`.
//!
//! The folders, one vocabulary per vendor:
//! - [`kfd`]: the emulated KFD (`/dev/kfd`, render nodes, sysfs topology, memory, queues,
//!   events), checking what amdkfd checks and answering with its errno;
//! - [`amdgpu`]: the software AMD GPU (PM4 and SDMA engines, mock code objects and their
//!   compiler, the executor);
//! - [`rm`]: the emulated NVIDIA RM/UVM driver (`/dev/nvidiactl`, `/dev/nvidia<N>`,
//!   `/dev/nvidia-uvm`, `/proc/driver/nvidia/version`);
//! - [`nvgpu`]: the software NVIDIA GPU (GPFIFO, QMD launches, mock cubins, the PTX interpreter);
//! - here, shared: [`EmuDriver`] and [`EmuConfig`] (routing each path, descriptor and mapping to
//!   the emulator that owns it), `backing` (memfd-backed memory and user copies),
//!   `engine_loop` (the software engines' thread loop), [`gpu_memory`] (how a software GPU
//!   touches memory: the seam the KFD and RM emulators implement) and [`exec`] (the executors' core: UOps
//!   on the interpreter over GPU addresses).
//!
//! Knobs: `MOCKGPU_COUNT`/`MOCKGPU_ARCH` (AMD GPUs), `MOCKGPU_NV_COUNT` (default 1),
//! `MOCKGPU_NV_ARCH` (default `hopper`), `MOCKGPU_NV_DRIVER` (default `580.142`),
//! `MOCKGPU_NV_SCRUB` (default 1). The process address space (what was mapped through the
//! driver) is one, shared by the KFD and NV emulators.
//!
//! Fault injection for tests: [`EmuDriver::fail_ioctl`] (a KFD ioctl failing at its entry),
//! [`EmuDriver::limit_vram`] (VRAM exhaustion), [`EmuDriver::reset_gpu`] (a hang and GPU reset
//! mid-run: queues stop, HW_EXCEPTION events fire), [`EmuDriver::fail_nv_ioctl`] (an RM escape
//! or UVM ioctl answering an `NV_STATUS`).
//!
//! Not guaranteed: SVM, CRIU, dmabuf, debugger and GWS ioctls are not emulated (ENOTTY);
//! process-wide state is per `EmuDriver` (one emulated process each).

#![forbid(unsafe_code)]

/// Return `KErr(libc::$errno, message)` from an emulated-KFD handler.
macro_rules! kbail {
    ($errno:ident, $($arg:tt)*) => {
        return Err($crate::mockgpu::KErr(libc::$errno, format!($($arg)*)))
    };
}

pub mod amdgpu;
pub(crate) mod backing;
pub(crate) mod engine_loop;
pub mod exec;
pub mod gpu_memory;
pub mod kfd;
pub mod nvgpu;
pub mod rm;

use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

pub use kfd::hooks::{DoorbellWrite, EmuDevice, EmuGpu, EmuQueue, QueueKind};
pub use kfd::nodes::{gpu_spec, GpuSpec, GPU_SPECS};
pub use kfd::EMU_FD_BASE;
pub use rm::{
    EmuChannel, EmuEngine, EmuNvDevice, EmuNvGpu, NvChipSpec, NvDoorbellWrite, NvGpuFactory,
    NV_CHIPS,
};

use crate::driver::api::{errno_error, Driver, Fd, MapFlags, OpenFlags, Prot, QueueReport};
use crate::driver::vma::VmaMap;
use crate::helpers::{getenv, getenv_str};
use crate::Result;
use backing::Backing;
use kfd::events::Events;
use kfd::nodes::{self, VPath};
use kfd::{emu_open, DoorbellTable, EmuKfd, EmuNode, IoctlFault, KfdState};

/// Builds the software GPU of a device when the driver is created.
pub type GpuFactory = Arc<dyn Fn(&EmuDevice) -> Arc<dyn EmuGpu> + Send + Sync>;

/// How to build an emulated KFD.
#[derive(Clone)]
pub struct EmuConfig {
    /// Number of GPUs (`MOCKGPU_COUNT`, default 2).
    pub count: usize,
    /// Architecture of every GPU (`MOCKGPU_ARCH`, default `gfx1100`; see [`GPU_SPECS`]).
    pub arch: String,
    /// Print `cwsr_size` / `ctl_stack_size` in `properties` like the newest kernels.
    pub print_cwsr_props: bool,
    /// Whether host-visible VRAM (VRAM | PUBLIC) is allowed (large / resizable BAR).
    pub large_bar: bool,
    /// Software GPU for each device (`None`: devices accept queues and record doorbells only).
    pub gpu_factory: Option<GpuFactory>,
    /// Number of NVIDIA GPUs (`MOCKGPU_NV_COUNT`, default 1; 0: no NVIDIA driver).
    pub nv_count: usize,
    /// Their chip (`MOCKGPU_NV_ARCH`, default `hopper`; see [`NV_CHIPS`]).
    pub nv_arch: String,
    /// The emulated NVIDIA driver version (`MOCKGPU_NV_DRIVER`, default `580.142`; a family,
    /// `570`/`575`/`580`/`590`/`595`, stands for its measured tag; `550` to see clients refuse
    /// an unsupported family).
    pub nv_driver: String,
    /// Software NVIDIA GPU for each device (`None`: channels accept doorbells and record them).
    pub nv_gpu_factory: Option<NvGpuFactory>,
    /// Fresh NVIDIA VRAM reads zero, as kernel RM's scrub-on-free leaves it (`MOCKGPU_NV_SCRUB`,
    /// default 1; 0 models the configurations without scrubbing: fresh VRAM holds garbage).
    pub nv_scrub: bool,
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            count: 2,
            arch: "gfx1100".into(),
            print_cwsr_props: false,
            large_bar: true,
            gpu_factory: None,
            nv_count: 1,
            nv_arch: "hopper".into(),
            nv_driver: "580.142".into(),
            nv_gpu_factory: None,
            nv_scrub: true,
        }
    }
}

impl EmuConfig {
    /// The defaults overridden by `MOCKGPU_COUNT`, `MOCKGPU_ARCH`, `MOCKGPU_NV_COUNT`,
    /// `MOCKGPU_NV_ARCH` and `MOCKGPU_NV_DRIVER`. (A software NVIDIA GPU, once it exists, plugs in
    /// here through `nv_gpu_factory`.)
    pub fn from_env() -> EmuConfig {
        let mut c = EmuConfig::default();
        c.count = getenv("MOCKGPU_COUNT", c.count as i64).max(0) as usize;
        if let Some(a) = getenv_str("MOCKGPU_ARCH").filter(|a| !a.is_empty()) {
            c.arch = a;
        }
        c.nv_count = getenv("MOCKGPU_NV_COUNT", c.nv_count as i64).max(0) as usize;
        if let Some(a) = getenv_str("MOCKGPU_NV_ARCH").filter(|a| !a.is_empty()) {
            c.nv_arch = a;
        }
        if let Some(v) = getenv_str("MOCKGPU_NV_DRIVER").filter(|v| !v.is_empty()) {
            c.nv_driver = v;
        }
        c.nv_scrub = getenv("MOCKGPU_NV_SCRUB", 1) != 0;
        c
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An errno and the check that failed, as an ioctl handler reports it.
#[derive(Debug)]
pub(crate) struct KErr(pub(crate) i32, pub(crate) String);

pub(crate) type KResult<T = ()> = std::result::Result<T, KErr>;

impl From<KErr> for crate::Error {
    fn from(e: KErr) -> crate::Error {
        errno_error(e.0, e.1)
    }
}

/// The emulated driver (one emulated process).
#[derive(Clone)]
pub struct EmuDriver {
    kfd: Arc<EmuKfd>,
    nv: Arc<rm::EmuNv>,
}

impl EmuDriver {
    /// An emulated KFD as `cfg` describes.
    pub fn new(cfg: EmuConfig) -> Result<EmuDriver> {
        let spec = gpu_spec(&cfg.arch)?;
        let descs = nodes::build_nodes(spec, cfg.count, cfg.print_cwsr_props)?;
        let mut nodes = Vec::with_capacity(descs.len());
        for _ in &descs {
            let doorbell_page = Backing::new(
                crate::driver::kfd::KFD_DOORBELL_PROCESS_SLICE as u64,
                "doorbell page",
            )?;
            nodes.push(EmuNode {
                doorbell_view: doorbell_page.view(0, doorbell_page.len(), Prot::RW)?,
                doorbell_page,
                mmio_page: Backing::new(4096, "mmio remap page")?,
                gpu: RwLock::new(None),
                log: Mutex::new(VecDeque::new()),
            });
        }
        let n = nodes.len();
        let vram_budget = descs.iter().map(|d| d.spec.local_mem_size).collect();
        let kfd = Arc::new(EmuKfd {
            pid: std::process::id(),
            large_bar: cfg.large_bar,
            gpuvm: (0..n).map(|_| RwLock::new(VmaMap::new())).collect(),
            descs,
            state: Mutex::new(KfdState {
                next_fd: EMU_FD_BASE,
                fds: HashMap::new(),
                acquired: vec![None; n],
                allocs: HashMap::new(),
                by_offset: HashMap::new(),
                va_ranges: (0..n).map(|_| VmaMap::new()).collect(),
                next_idr: vec![0; n],
                next_mmap_offset: kfd::memory::DRM_MMAP_OFFSET_BASE,
                vram_used: vec![0; n],
                vram_budget,
                ioctl_faults: Vec::new(),
                cpu: VmaMap::new(),
                queues: BTreeMap::new(),
            }),
            nodes,
            doorbells: RwLock::new(DoorbellTable::default()),
            events: Events::new(),
        });
        if let Some(factory) = &cfg.gpu_factory {
            for i in 0..n {
                let gpu = factory(&kfd.device(i));
                *kfd.nodes[i].gpu.write().unwrap_or_else(|e| e.into_inner()) = Some(gpu);
            }
        }
        let nv_cfg = rm::NvConfig {
            count: cfg.nv_count,
            arch: cfg.nv_arch.clone(),
            version: cfg.nv_driver.clone(),
            gpu_factory: cfg.nv_gpu_factory.clone(),
            scrub: cfg.nv_scrub,
        };
        let nv = rm::EmuNv::new(&nv_cfg, kfd.clone())?;
        Ok(EmuDriver { kfd, nv })
    }

    /// [`EmuDriver::new`] with [`EmuConfig::from_env`].
    pub fn from_env() -> Result<EmuDriver> {
        EmuDriver::new(EmuConfig::from_env())
    }

    /// The `gpu_id`s of the emulated GPUs, in node order.
    pub fn gpu_ids(&self) -> Vec<u32> {
        self.kfd.descs.iter().map(|d| d.gpu_id).collect()
    }

    fn index(&self, gpu_id: u32) -> Result<usize> {
        self.kfd.node_by_gpu_id(gpu_id).ok_or_else(|| {
            errno_error(libc::EINVAL, format!("emu: no GPU with gpu_id {gpu_id:#x}"))
        })
    }

    /// The handle a software GPU for `gpu_id` uses.
    pub fn device(&self, gpu_id: u32) -> Result<EmuDevice> {
        Ok(self.kfd.device(self.index(gpu_id)?))
    }

    /// Attach (or replace) the software GPU of `gpu_id`. Queues created earlier are not replayed.
    pub fn attach_gpu(&self, gpu_id: u32, gpu: Arc<dyn EmuGpu>) -> Result<()> {
        let i = self.index(gpu_id)?;
        *self.kfd.nodes[i]
            .gpu
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(gpu);
        Ok(())
    }

    /// The doorbell writes seen on `gpu_id` (the last 4096), oldest first.
    pub fn doorbell_writes(&self, gpu_id: u32) -> Result<Vec<DoorbellWrite>> {
        let i = self.index(gpu_id)?;
        Ok(lock(&self.kfd.nodes[i].log).iter().copied().collect())
    }

    /// The queues alive on all devices.
    pub fn queues(&self) -> Vec<Arc<EmuQueue>> {
        lock(&self.kfd.state).queues.values().cloned().collect()
    }

    /// The handle a software NVIDIA GPU for device `index` uses.
    pub fn nv_device(&self, index: usize) -> Result<EmuNvDevice> {
        if index >= self.nv.devs.len() {
            return Err(errno_error(
                libc::ENODEV,
                format!(
                    "emu: no NVIDIA GPU {index} ({} emulated)",
                    self.nv.devs.len()
                ),
            ));
        }
        Ok(self.nv.device(index))
    }

    /// Attach (or replace) the software NVIDIA GPU of device `index`. Channels created earlier
    /// are not replayed.
    pub fn attach_nv_gpu(&self, index: usize, gpu: Arc<dyn EmuNvGpu>) -> Result<()> {
        self.nv_device(index)?;
        self.nv.attach(index, gpu);
        Ok(())
    }

    /// The NVIDIA doorbell writes seen on device `index` (the last 4096), oldest first.
    pub fn nv_doorbell_writes(&self, index: usize) -> Vec<NvDoorbellWrite> {
        self.nv.doorbell_writes(index)
    }

    /// The NVIDIA channels alive on device `index`.
    pub fn nv_channels(&self, index: usize) -> Vec<EmuChannel> {
        self.nv.channels_of(index)
    }

    /// How many (PERF_BOOST, FB_FLUSH_GPU_CACHE) controls the emulated RM answered.
    pub fn nv_counters(&self) -> (u32, u32) {
        self.nv.counters()
    }

    /// Make the `skip`-th next NVIDIA call named `name` (0: the next one) fail with RM status
    /// `status` (fault injection): an RM object escape (`NV_ESC_RM_ALLOC`, `NV_ESC_RM_FREE`,
    /// `NV_ESC_RM_CONTROL`, `NV_ESC_RM_MAP_MEMORY`, `NV_ESC_RM_UNMAP_MEMORY`) answers it in
    /// `status`, a UVM ioctl (`UVM_MAP_EXTERNAL_ALLOCATION`, ...) in `rmStatus`; the call does
    /// nothing else, as when RM refuses it at its entry.
    pub fn fail_nv_ioctl(&self, name: &str, skip: usize, status: u32) -> Result<()> {
        self.nv.arm_fault(name, skip, status)
    }

    /// RM objects (handles) the emulated process holds over all its clients.
    pub fn nv_object_count(&self) -> usize {
        self.nv.object_count()
    }

    /// Bytes of VRAM RM has handed out on NVIDIA device `index`.
    pub fn nv_vram_used(&self, index: usize) -> Result<u64> {
        self.nv_device(index)?;
        Ok(self.nv.vram_used(index))
    }

    /// Let NVIDIA device `index` hand out at most `bytes` of VRAM from now on (fault injection:
    /// VRAM exhaustion, as other processes holding memory would cause; `u64::MAX` lifts it). A
    /// VRAM RM_ALLOC that does not fit then answers NV_ERR_NO_MEMORY, as RM's heap does.
    pub fn limit_nv_vram(&self, index: usize, bytes: u64) -> Result<()> {
        self.nv_device(index)?;
        self.nv.limit_vram(index, bytes);
        Ok(())
    }

    /// A critical error on NVIDIA device `index` in the middle of a run (fault injection: a GSP
    /// crash with `except_type` GSP_ERROR 120, a GPU fallen off the bus 79, ...): RM halts every
    /// channel of the GPU and writes the error into each channel's error notifier
    /// (kernel_rc.c `krcRcAndNotifyAllChannels`), then the GPU is reset. Channels created
    /// afterwards run normally. Returns how many channels were stopped.
    ///
    /// Not modelled: the window between `gpuMarkDeviceForReset` and the reset (the real GPU
    /// needs every client gone and `nvidia-smi -r`; ioctls of a lost GPU answer
    /// NV_ERR_GPU_IS_LOST meanwhile). A runtime that builds new channels stands in for the
    /// process that reopens the device after the reset.
    pub fn reset_nv_gpu(&self, index: usize, except_type: u32) -> Result<usize> {
        self.nv_device(index)?;
        self.nv.rc_all_channels(index, except_type)
    }

    /// Buffer objects the emulated process holds (allocated and not freed).
    pub fn allocation_count(&self) -> usize {
        lock(&self.kfd.state).allocs.len()
    }

    /// CPU address ranges the process holds through this driver (reservations, buffer and
    /// doorbell mappings), and the GPU VA ranges of its buffers over all devices: what a leak of
    /// virtual address space shows in.
    pub fn va_range_count(&self) -> (usize, usize) {
        let st = lock(&self.kfd.state);
        (st.cpu.len(), st.va_ranges.iter().map(VmaMap::len).sum())
    }

    /// Bytes of VRAM allocated on `gpu_id`.
    pub fn vram_used(&self, gpu_id: u32) -> Result<u64> {
        let i = self.index_of(gpu_id)?;
        Ok(lock(&self.kfd.state).vram_used[i])
    }

    /// Let `gpu_id` hand out at most `bytes` of VRAM from now on (fault injection: VRAM
    /// exhaustion, as other processes holding memory would cause). ALLOC then answers ENOMEM and
    /// AVAILABLE_MEMORY reports what is left, as amdkfd does.
    pub fn limit_vram(&self, gpu_id: u32, bytes: u64) -> Result<()> {
        let i = self.index_of(gpu_id)?;
        lock(&self.kfd.state).vram_budget[i] = bytes;
        Ok(())
    }

    /// Make the `skip`-th next KFD ioctl called `name` (`AMDKFD_IOC_MAP_MEMORY_TO_GPU`, ...; 0:
    /// the next one) fail with `errno` (fault injection, see [`IoctlFault`]).
    pub fn fail_ioctl(&self, name: &str, skip: usize, errno: i32) -> Result<()> {
        let Some(&(_, _, request)) = crate::driver::kfd::KFD_IOCTLS
            .iter()
            .find(|(_, n, _)| *n == name)
        else {
            return Err(crate::Error::InvalidArgument(format!(
                "emu: fail_ioctl: no KFD ioctl is called {name}"
            )));
        };
        lock(&self.kfd.state).ioctl_faults.push(IoctlFault {
            request,
            skip,
            errno,
        });
        Ok(())
    }

    /// A GPU hang and reset of `gpu_id` in the middle of a run (fault injection). amdgpu's
    /// recovery (`amdgpu_device_gpu_recover`) calls `kgd2kfd_pre_reset`, which stops the
    /// process's queues (kfd_device.c: `kfd_suspend_all_processes`), and after the reset
    /// `kgd2kfd_post_reset` signals the HW_EXCEPTION events (kfd_events.c
    /// `kfd_signal_reset_event`: whole-GPU reset, cause GPU hang, memory lost). Here every queue
    /// of the device stops where it is (the software GPU faults it with the reset as reason) and
    /// the events are set; queues created afterwards run normally. VRAM contents are kept, although
    /// the event says they are lost (a runtime must not rely on either).
    pub fn reset_gpu(&self, gpu_id: u32) -> Result<()> {
        let i = self.index_of(gpu_id)?;
        let gpu = self.kfd.nodes[i]
            .gpu
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(gpu) = gpu {
            for q in self.kfd.queues_of(i) {
                gpu.halt_queue(
                    &q,
                    "GPU hang: the queue was stopped for a GPU reset (injected)",
                );
            }
        }
        self.kfd.events.gpu_reset(gpu_id);
        Ok(())
    }

    /// The injected failure of this call, if one is armed for it (counting the call down).
    fn injected_failure(&self, request: u64) -> Option<i32> {
        let mut st = lock(&self.kfd.state);
        let faults = &mut st.ioctl_faults;
        let i = faults.iter().position(|f| f.request == request)?;
        if faults[i].skip > 0 {
            faults[i].skip -= 1;
            return None;
        }
        Some(faults.remove(i).errno)
    }

    fn index_of(&self, gpu_id: u32) -> Result<usize> {
        self.kfd.node_by_gpu_id(gpu_id).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("emu: no device with gpu_id {gpu_id:#x}"))
        })
    }

    fn check_pid(&self, what: &str) -> Result<()> {
        if std::process::id() != self.kfd.pid {
            return Err(errno_error(
                libc::EBADF,
                format!(
                    "emu: {what}: KFD state belongs to process {}, not this child",
                    self.kfd.pid
                ),
            ));
        }
        Ok(())
    }
}

impl Driver for EmuDriver {
    fn name(&self) -> &'static str {
        "emu"
    }

    fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd> {
        self.check_pid("open")?;
        if rm::EmuNv::serves(path) {
            return self.nv.open(path, flags);
        }
        emu_open(&self.kfd, path, flags)
    }

    fn close(&self, fd: Fd) -> Result<()> {
        if self.nv.owns(fd) {
            return self.nv.close(fd);
        }
        match lock(&self.kfd.state).fds.remove(&fd.0) {
            Some(_) => Ok(()),
            None => Err(errno_error(
                libc::EBADF,
                format!("emu: close({}): not an open emulated fd", fd.0),
            )),
        }
    }

    fn ioctl(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        self.check_pid("ioctl")?;
        if self.nv.owns(fd) {
            return self.nv.dispatch(fd, request, arg);
        }
        if let Some(errno) = self.injected_failure(request) {
            let name = crate::driver::kfd::kfd_ioctl_name(request).unwrap_or("KFD ioctl");
            return Err(errno_error(
                errno,
                format!("emu: {name} on fd {}: injected failure", fd.0),
            ));
        }
        kfd::ioctl::dispatch(&self.kfd, fd, request, arg)
    }

    fn ioctl_raw(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        self.check_pid("ioctl")?;
        if self.nv.owns(fd) {
            return self.nv.dispatch_uvm(fd, request, arg);
        }
        Err(errno_error(
            libc::ENOTTY,
            format!(
                "emu: unsized ioctl {request:#x} on fd {}: only /dev/nvidia-uvm takes them",
                fd.0
            ),
        ))
    }

    fn mmap(
        &self,
        addr: Option<u64>,
        len: usize,
        prot: Prot,
        flags: MapFlags,
        fd: Option<Fd>,
        offset: u64,
    ) -> Result<u64> {
        self.check_pid("mmap")?;
        if let Some(f) = fd.filter(|f| self.nv.owns(*f)) {
            return self.nv.mmap(addr, len as u64, prot, flags, f, offset);
        }
        let at = self.kfd.mmap(addr, len as u64, prot, flags, fd, offset)?;
        self.nv.forget_cpu(at, len as u64);
        Ok(at)
    }

    fn munmap(&self, addr: u64, len: usize) -> Result<()> {
        self.kfd.munmap(addr, len as u64)?;
        self.nv.forget_cpu(addr, len as u64);
        Ok(())
    }

    fn write_doorbell(&self, addr: u64, value: u64) -> Result<()> {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if let Some(r) = self.nv.ring_doorbell(addr, value) {
            return r;
        }
        self.kfd.ring_doorbell(addr, value)
    }

    fn read_file(&self, path: &str) -> Result<String> {
        if let Some(r) = self.nv.read_file(path) {
            return r;
        }
        match nodes::lookup(&self.kfd.descs, path) {
            VPath::File(s) => Ok(s),
            VPath::Dir(_) => Err(errno_error(
                libc::EISDIR,
                format!("emu: read {path}: is a directory"),
            )),
            VPath::Missing => Err(errno_error(
                libc::ENOENT,
                format!("emu: read {path}: no such file"),
            )),
            VPath::Outside => crate::driver::real::RealDriver::new().read_file(path),
        }
    }

    fn list_dir(&self, path: &str) -> Result<Vec<String>> {
        match nodes::lookup(&self.kfd.descs, path) {
            VPath::Dir(mut v) => {
                v.sort();
                Ok(v)
            }
            VPath::File(_) => Err(errno_error(
                libc::ENOTDIR,
                format!("emu: list {path}: not a directory"),
            )),
            VPath::Missing => Err(errno_error(
                libc::ENOENT,
                format!("emu: list {path}: no such directory"),
            )),
            VPath::Outside => crate::driver::real::RealDriver::new().list_dir(path),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn take_diagnostic(&self) -> Option<String> {
        rm::take_diagnostic()
    }

    /// The software GPU's view of queue `queue_id` of `gpu_id` (`None` without a GPU attached,
    /// an unknown queue, or a GPU that does not report).
    fn queue_report(&self, gpu_id: u32, queue_id: u32) -> Option<QueueReport> {
        let i = self.kfd.node_by_gpu_id(gpu_id)?;
        let q = lock(&self.kfd.state).queues.get(&queue_id).cloned()?;
        if q.gpu_id != gpu_id {
            return None;
        }
        let gpu = self.kfd.nodes[i]
            .gpu
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        gpu.queue_status(&q)
    }
}

/// The driver for this process: the emulator when `MOCKGPU=1` (configured by `MOCKGPU_COUNT`,
/// `MOCKGPU_ARCH`, `MOCKGPU_NV_COUNT`, `MOCKGPU_NV_ARCH` and `MOCKGPU_NV_DRIVER`), else the kernel. Each call makes a new driver (a new emulated process under
/// `MOCKGPU`); open it once and share the `Arc`.
pub fn open_driver() -> Result<Arc<dyn Driver>> {
    if crate::helpers::getenv("MOCKGPU", 0) != 0 {
        Ok(Arc::new(EmuDriver::from_env()?))
    } else {
        Ok(Arc::new(crate::driver::RealDriver::new()))
    }
}
