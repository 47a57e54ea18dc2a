//! The emulated NVIDIA kernel driver inside [`super::EmuDriver`]: RM escapes on `/dev/nvidiactl`
//! and `/dev/nvidia<N>`, UVM on `/dev/nvidia-uvm`, `/proc/driver/nvidia/version`, and the
//! usermode doorbell page, checking what the real 570..595 drivers check and answering with their
//! errno or `NV_STATUS` (plus an explanation, taken by `Driver::take_diagnostic`).
//!
//! - [`spec`]: the chips (`MOCKGPU_NV_ARCH`: hopper/GH100 default, ada/AD102, ampere/GA102);
//! - `abi`: the emulator's literal size tables per family (`MOCKGPU_NV_DRIVER`: 580.142 default;
//!   570, 575, 580, 590, 595 or a full version of one; 550 for its sizes);
//! - `escape`: escape dispatch (exact sizes, fd kinds, version check, CARD_INFO, REGISTER_FD,
//!   OS events, XFER);
//! - `alloc`: RM_ALLOC per class with parent and class-list checks; `objects`: the RM handle
//!   table, RM_FREE, OS events; `control`: RM_CONTROL; `memory`: memory objects, RM_ALLOC_MEMORY
//!   (OS descriptors), RM_MAP/UNMAP_MEMORY contexts, mmap, doorbells; `gpuvm`: the GPU page
//!   tables, RM_MAP_MEMORY_DMA, translation;
//! - `uvm`: UVM (INITIALIZE first, GPU/vaspace/channel registration, external ranges and maps);
//! - fault injection: an RM object escape or UVM ioctl armed to answer an `NV_STATUS` once
//!   (`NvFault`, `EmuDriver::fail_nv_ioctl`);
//! - [`hooks`]: the seam to a software GPU ([`EmuNvGpu`], [`EmuNvDevice`], [`EmuChannel`]).
//!
//! Memory is real: every memory object is a memfd (`Backing`) that the CPU maps
//! (RM_MAP_MEMORY + mmap) and the GPU reaches through its page table (GPU VA = CPU VA when the
//! process maps it at the same address, as tinygrad does). The process address space (which
//! ranges were mapped through the driver) is shared with the emulated KFD.
//!
//! Lock order: the KFD process state, then the RM state, then a device's page table or the
//! usermode map. Software-GPU callbacks run with no lock held.
//!
//! Not guaranteed: only the escapes, classes and controls a compute runtime uses (as tinygrad's
//! `ops_nv.py`); others are ENOTTY / NV_ERR_INVALID_CLASS / NV_ERR_NOT_SUPPORTED.

mod abi;
mod alloc;
mod control;
mod escape;
mod gpuvm;
pub mod hooks;
mod memory;
mod objects;
pub mod spec;
mod uvm;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

pub use hooks::{EmuChannel, EmuEngine, EmuNvDevice, EmuNvGpu, NvDoorbellWrite, NvGpuFactory};
pub use spec::{nv_chip, NvChipSpec, NV_CHIPS};

use super::backing::Backing;
use super::kfd::EmuKfd;
use super::lock;
use crate::driver::api::{errno_error, Fd, OpenFlags, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::vma::VmaMap;
use crate::Result;
use abi::RmAbi;
use gpuvm::NvGpuMap;
use memory::MapCtx;
use objects::Client;
use uvm::UvmSpace;

/// First fake descriptor number of NV fds (above the emulated KFD's).
pub const NV_FD_BASE: i32 = super::EMU_FD_BASE + 0x1000_0000;
/// Bound on the per-device doorbell log.
const DOORBELL_LOG: usize = 4096;

/// How to build the emulated NVIDIA driver.
#[derive(Clone)]
pub(crate) struct NvConfig {
    pub(crate) count: usize,
    pub(crate) arch: String,
    pub(crate) version: String,
    pub(crate) gpu_factory: Option<NvGpuFactory>,
    /// Fresh VRAM is zeroed (kernel RM's scrub-on-free); off: it holds a non-zero pattern.
    pub(crate) scrub: bool,
}

thread_local! {
    /// The explanation of the last refusal on this thread (`Driver::take_diagnostic`).
    static DIAGNOSTIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Record why the emulator refused the current call (like a kernel log line).
pub(crate) fn set_diagnostic(msg: String) {
    DIAGNOSTIC.with(|d| *d.borrow_mut() = Some(msg));
}

/// Take the explanation of the last refusal on this thread.
pub(crate) fn take_diagnostic() -> Option<String> {
    DIAGNOSTIC.with(|d| d.borrow_mut().take())
}

/// An RM or UVM refusal: the status the call reports and why.
#[derive(Debug)]
pub(crate) struct RmErr(pub(crate) u32, pub(crate) String);

pub(crate) type RmResult<T = ()> = std::result::Result<T, RmErr>;

/// Return `RmErr(status, message)` from an RM/UVM handler.
macro_rules! rbail {
    ($status:ident, $($arg:tt)*) => {
        return Err($crate::mockgpu::rm::RmErr(
            $crate::sys::nv::common::$status,
            format!($($arg)*),
        ))
    };
}
pub(crate) use rbail;

/// What an emulated NV descriptor is.
pub(crate) enum NvFd {
    /// `/dev/nvidiactl`, with the mapping context RM_MAP_MEMORY left on it.
    Ctl { ctx: Option<MapCtx> },
    /// `/dev/nvidia<minor>` of device `gpu`: the control fd it was registered with, its context.
    Gpu {
        gpu: usize,
        registered: Option<i32>,
        ctx: Option<MapCtx>,
    },
    /// `/dev/nvidia-uvm`: one UVM VA space.
    Uvm(Box<UvmSpace>),
}

/// Mutable RM/UVM state of the emulated process.
pub(crate) struct NvState {
    pub(crate) next_fd: i32,
    pub(crate) fds: HashMap<i32, NvFd>,
    pub(crate) clients: BTreeMap<u32, Client>,
    pub(crate) next_client: u32,
    /// (device, work submit token) -> (client, channel handle).
    pub(crate) tokens: HashMap<(usize, u32), (u32, u32)>,
    pub(crate) next_chid: Vec<u32>,
    pub(crate) vram_used: Vec<u64>,
    /// VRAM RM may hand out per device (the chip's size unless a test limits it).
    pub(crate) vram_budget: Vec<u64>,
    /// RM_MAP_MEMORY cookies -> (client, memory handle).
    pub(crate) cpu_maps: HashMap<u64, (u32, u32)>,
    pub(crate) next_cookie: u64,
    /// ALLOC_OS_EVENT registrations: (client, device, fd).
    pub(crate) os_events: Vec<(u32, u32, u32)>,
    pub(crate) perf_boosts: u32,
    pub(crate) cache_flushes: u32,
    /// Armed one-shot RM/UVM failures (test fault injection, [`EmuNv::arm_fault`]).
    pub(crate) faults: Vec<NvFault>,
}

/// An RM object escape or a UVM ioctl armed to fail: the `skip`-th next call named `name` (0:
/// the next one) answers `status` in its status field (`status` / `rmStatus`; the ioctl itself
/// succeeds, as RM's and UVM's refusals do) without running, so the emulated state is unchanged.
pub(crate) struct NvFault {
    pub(crate) name: &'static str,
    pub(crate) skip: usize,
    pub(crate) status: u32,
}

/// The escapes whose failure lands in a status field (escape.rs `run_rm`).
const RM_STATUS_ESCAPES: [&str; 5] = [
    "NV_ESC_RM_ALLOC",
    "NV_ESC_RM_FREE",
    "NV_ESC_RM_CONTROL",
    "NV_ESC_RM_MAP_MEMORY",
    "NV_ESC_RM_UNMAP_MEMORY",
];

/// One emulated GPU's live parts.
pub(crate) struct NvDev {
    /// The usermode page (64 KiB; NOTIFY_CHANNEL_PENDING at 0x90).
    pub(crate) usermode: Arc<Backing>,
    pub(crate) usermode_view: Mapping,
    pub(crate) gpu: RwLock<Option<Arc<dyn EmuNvGpu>>>,
    pub(crate) log: Mutex<VecDeque<NvDoorbellWrite>>,
    /// The GPU page table: VA range -> backing.
    pub(crate) gpuvm: RwLock<VmaMap<NvGpuMap>>,
}

/// The emulated NVIDIA driver of one process.
pub(crate) struct EmuNv {
    pub(crate) chip: &'static NvChipSpec,
    pub(crate) abi: &'static RmAbi,
    pub(crate) version: String,
    /// Whether fresh VRAM is zeroed (`memory.rs`).
    pub(crate) scrub: bool,
    /// The process (its address space lives in the emulated KFD's state).
    pub(crate) kfd: Arc<EmuKfd>,
    pub(crate) devs: Vec<NvDev>,
    pub(crate) state: Mutex<NvState>,
    /// CPU mappings of usermode pages -> device index (read on every doorbell write).
    pub(crate) usermode_maps: RwLock<VmaMap<usize>>,
}

/// The deterministic UUID of emulated GPU `index`.
pub(crate) fn gpu_uuid(index: usize) -> [u8; 16] {
    let mut u = *b"rawgrad-emu-nv\0\0";
    u[14] = 0x47; // 'G'
    u[15] = index as u8;
    u
}

/// The PCI-derived `gpu_id` of emulated GPU `index` (bus `index + 1`).
pub(crate) fn gpu_id(index: usize) -> u32 {
    ((index as u32) + 1) << 8
}

impl EmuNv {
    pub(crate) fn new(cfg: &NvConfig, kfd: Arc<EmuKfd>) -> Result<Arc<EmuNv>> {
        let chip = nv_chip(&cfg.arch)?;
        let abi = abi::rm_abi(&cfg.version)?;
        let mut devs = Vec::with_capacity(cfg.count);
        for _ in 0..cfg.count {
            let usermode = Backing::new(
                u64::from(crate::sys::nv::common::NV_USERMODE_MAP_SIZE),
                "usermode page",
            )?;
            devs.push(NvDev {
                usermode_view: usermode.view(0, usermode.len(), Prot::RW)?,
                usermode,
                gpu: RwLock::new(None),
                log: Mutex::new(VecDeque::new()),
                gpuvm: RwLock::new(VmaMap::new()),
            });
        }
        let n = devs.len();
        let nv = Arc::new(EmuNv {
            chip,
            abi,
            version: abi::full_version(&cfg.version, abi),
            scrub: cfg.scrub,
            kfd,
            devs,
            state: Mutex::new(NvState {
                next_fd: NV_FD_BASE,
                fds: HashMap::new(),
                clients: BTreeMap::new(),
                next_client: 0xC1D0_0000,
                tokens: HashMap::new(),
                next_chid: vec![0x10; n],
                vram_used: vec![0; n],
                vram_budget: vec![chip.vram_size; n],
                cpu_maps: HashMap::new(),
                next_cookie: 0x7F00_0000_0000,
                os_events: Vec::new(),
                perf_boosts: 0,
                cache_flushes: 0,
                faults: Vec::new(),
            }),
            usermode_maps: RwLock::new(VmaMap::new()),
        });
        if let Some(f) = &cfg.gpu_factory {
            for i in 0..n {
                let gpu = f(&nv.device(i));
                nv.attach(i, gpu);
            }
        }
        Ok(nv)
    }

    pub(crate) fn device(self: &Arc<Self>, index: usize) -> EmuNvDevice {
        EmuNvDevice {
            nv: Arc::downgrade(self),
            index,
        }
    }

    pub(crate) fn attach(&self, index: usize, gpu: Arc<dyn EmuNvGpu>) {
        if let Some(d) = self.devs.get(index) {
            *d.gpu.write().unwrap_or_else(|e| e.into_inner()) = Some(gpu);
        }
    }

    pub(crate) fn gpu_of(&self, index: usize) -> Option<Arc<dyn EmuNvGpu>> {
        self.devs
            .get(index)
            .and_then(|d| d.gpu.read().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Whether `fd` is one of ours.
    pub(crate) fn owns(&self, fd: Fd) -> bool {
        fd.0 >= NV_FD_BASE
    }

    /// The device index of `/dev/nvidia<minor>` (minor number = index).
    fn minor_index(&self, minor: &str) -> Option<usize> {
        let m = minor.parse::<usize>().ok()?;
        (m < self.devs.len() && minor.bytes().all(|b| b.is_ascii_digit())).then_some(m)
    }

    /// Whether `path` is a device node this emulator serves.
    pub(crate) fn serves(path: &str) -> bool {
        path.starts_with("/dev/nvidia")
    }

    pub(crate) fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd> {
        let none = |why: &str| {
            Err(errno_error(
                libc::ENOENT,
                format!("emu: open({path:?}): {why}"),
            ))
        };
        if self.devs.is_empty() {
            return none("no NVIDIA GPU is emulated (MOCKGPU_NV_COUNT=0)");
        }
        let kind = match path {
            "/dev/nvidiactl" => NvFd::Ctl { ctx: None },
            "/dev/nvidia-uvm" => NvFd::Uvm(Box::default()),
            p => match p
                .strip_prefix("/dev/nvidia")
                .and_then(|m| self.minor_index(m))
            {
                Some(gpu) => NvFd::Gpu {
                    gpu,
                    registered: None,
                    ctx: None,
                },
                None => return none("no such NVIDIA device node"),
            },
        };
        if !flags.contains(OpenFlags::RDWR) {
            return Err(errno_error(
                libc::EACCES,
                format!("emu: open({path:?}) needs O_RDWR"),
            ));
        }
        let mut st = lock(&self.state);
        let fd = st.next_fd;
        st.next_fd += 1;
        st.fds.insert(fd, kind);
        Ok(Fd(fd))
    }

    /// Close an NV fd: a control fd frees the clients allocated through it, a UVM fd its VA
    /// space's mappings.
    pub(crate) fn close(self: &Arc<Self>, fd: Fd) -> Result<()> {
        let mut st = lock(&self.state);
        let Some(kind) = st.fds.remove(&fd.0) else {
            return Err(errno_error(
                libc::EBADF,
                format!("emu: close({}): not an open emulated fd", fd.0),
            ));
        };
        let gone = match kind {
            NvFd::Ctl { .. } => {
                let clients: Vec<u32> = st
                    .clients
                    .iter()
                    .filter(|(_, c)| c.fd == fd.0)
                    .map(|(h, _)| *h)
                    .collect();
                let mut gone = Vec::new();
                for c in clients {
                    gone.extend(self.free_client(&mut st, c));
                }
                gone
            }
            NvFd::Uvm(space) => {
                self.uvm_teardown(fd.0, &space);
                Vec::new()
            }
            NvFd::Gpu { .. } => Vec::new(),
        };
        drop(st);
        self.notify_destroyed(gone);
        Ok(())
    }

    /// `/proc/driver/nvidia/...` files.
    pub(crate) fn read_file(&self, path: &str) -> Option<Result<String>> {
        let path = path.trim_end_matches('/');
        if !path.starts_with("/proc/driver/nvidia") {
            return None;
        }
        if self.devs.is_empty() {
            return Some(Err(errno_error(
                libc::ENOENT,
                format!("emu: read {path}: no NVIDIA driver is emulated"),
            )));
        }
        Some(match path {
            "/proc/driver/nvidia/version" => Ok(format!(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  (rawgrad-emu)  Thu Jan  1 00:00:00 UTC 1970\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
                self.version
            )),
            _ => Err(errno_error(
                libc::ENOENT,
                format!("emu: read {path}: no such file"),
            )),
        })
    }

    /// The doorbell writes seen on device `index`, oldest first.
    pub(crate) fn doorbell_writes(&self, index: usize) -> Vec<NvDoorbellWrite> {
        self.devs
            .get(index)
            .map(|d| lock(&d.log).iter().copied().collect())
            .unwrap_or_default()
    }

    pub(crate) fn log_doorbell(&self, index: usize, w: NvDoorbellWrite) {
        if let Some(d) = self.devs.get(index) {
            let mut log = lock(&d.log);
            if log.len() == DOORBELL_LOG {
                log.pop_front();
            }
            log.push_back(w);
        }
    }

    /// (PERF_BOOST calls, FB_FLUSH_GPU_CACHE calls) seen so far.
    pub(crate) fn counters(&self) -> (u32, u32) {
        let st = lock(&self.state);
        (st.perf_boosts, st.cache_flushes)
    }
}

impl EmuNv {
    /// Arm a failure of the `skip`-th next call named `name` (an RM object escape such as
    /// `NV_ESC_RM_ALLOC`, or a UVM ioctl such as `UVM_MAP_EXTERNAL_ALLOCATION`) with `status`.
    pub(crate) fn arm_fault(&self, name: &str, skip: usize, status: u32) -> Result<()> {
        let uvm = crate::driver::nv::abi::UVM_REQUESTS.iter().map(|(_, n)| *n);
        let Some(name) = RM_STATUS_ESCAPES
            .into_iter()
            .chain(uvm)
            .find(|n| *n == name)
        else {
            return Err(crate::Error::InvalidArgument(format!(
                "emu: fail_nv_ioctl: {name} is neither an RM object escape ({}) nor a UVM ioctl",
                RM_STATUS_ESCAPES.join(", ")
            )));
        };
        lock(&self.state)
            .faults
            .push(NvFault { name, skip, status });
        Ok(())
    }

    /// The injected failure of this call of `name`, if one is armed for it (counting it down).
    pub(crate) fn injected(&self, name: &str) -> Option<RmErr> {
        let mut st = lock(&self.state);
        let i = st.faults.iter().position(|f| f.name == name)?;
        if st.faults[i].skip > 0 {
            st.faults[i].skip -= 1;
            return None;
        }
        let f = st.faults.remove(i);
        Some(RmErr(f.status, format!("{name}: injected failure")))
    }

    /// Bytes of VRAM allocated on device `index`.
    pub(crate) fn vram_used(&self, index: usize) -> u64 {
        lock(&self.state).vram_used.get(index).copied().unwrap_or(0)
    }

    /// Let device `index` hand out at most `bytes` of VRAM (capped at the chip's size) from now
    /// on: RM's heap then refuses what does not fit (`memory.rs`).
    pub(crate) fn limit_vram(&self, index: usize, bytes: u64) {
        if let Some(b) = lock(&self.state).vram_budget.get_mut(index) {
            *b = bytes.min(self.chip.vram_size);
        }
    }

    /// A critical error on device `index` as `krcRcAndNotifyAllChannels` (kernel_rc.c) handles
    /// it: pass 1 halts every channel of the GPU (`kfifoStartChannelHalt`: the software GPU stops
    /// it where it is), pass 2 writes `except_type` into record 0 of each channel's own error
    /// notifier (RC_NOTIFIER_SCOPE_CHANNEL: info32 the type, info16 the engine type, status
    /// NV_NOTIFICATION_STATUS_RC_ERROR). RM calls it for a GSP crash (kernel_gsp_tu102.c:
    /// GSP_ERROR, 120), an uncontained GSP error (kernel_gsp_gb100.c: CONTAINED_ERROR, 94) and a
    /// GPU that fell off the bus (osinit.c `osHandleGpuLost`: 79), each followed by
    /// `gpuMarkDeviceForReset`. Returns how many channels were stopped.
    pub(crate) fn rc_all_channels(
        self: &Arc<Self>,
        index: usize,
        except_type: u32,
    ) -> Result<usize> {
        let chans = self.channels_of(index);
        let reason = format!(
            "halted by RM for critical error {except_type} (krcRcAndNotifyAllChannels, injected)"
        );
        if let Some(gpu) = self.gpu_of(index) {
            let dev = self.device(index);
            for c in &chans {
                gpu.halt_channel(&dev, c, except_type, &reason);
            }
        }
        for c in &chans {
            self.rc_notify(c, except_type)?;
        }
        Ok(chans.len())
    }

    /// `krcErrorSetNotifier` for one channel: record 0 of its error notifier (if it has one)
    /// gets the RC error `except_type`, the channel's engine type and status RC_ERROR.
    pub(crate) fn rc_notify(&self, c: &EmuChannel, except_type: u32) -> Result<()> {
        if c.error_notifier == 0 {
            return Ok(());
        }
        self.write_notifier(
            c.client,
            c.error_notifier,
            0,
            except_type,
            c.engine_type as u16,
            crate::sys::nv::common::NV_NOTIFICATION_STATUS_RC_ERROR as u16,
        )
    }

    /// RM objects alive over all clients (what a handle leak shows in).
    pub(crate) fn object_count(&self) -> usize {
        let st = lock(&self.state);
        st.clients.values().map(|c| c.objects.len()).sum()
    }

    /// An escape on an NV fd.
    pub(crate) fn dispatch(self: &Arc<Self>, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        escape::dispatch(self, fd, request, arg)
    }
}

/// The emulator's literal sizes for driver `version`, in the client's terms (tests compare them
/// with the sizes of the generated structs).
#[cfg(test)]
pub(crate) fn family_sizes(version: &str) -> Result<crate::driver::nv::FamilySizes> {
    let a = abi::rm_abi(version)?;
    Ok(crate::driver::nv::FamilySizes {
        nvos46: a.nvos46,
        vaspace_params: a.vaspace,
        gpfifo_schedule_params: a.gpfifo_schedule,
        classlist_v2_params: a.classlist_v2,
        channel_alloc_params: a.channel,
        root_client_params: a.root_client,
        build_version_v2_params: a.build_version_v2,
        uvm_free_params: a.uvm_free,
        uvm_unregister_channel_params: a.uvm_unregister_channel,
    })
}
