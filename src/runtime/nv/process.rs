//! The process-wide half of the NV bring-up (steps 1-5; the order of tinygrad's
//! `NVDevice.__init__`): the control fd and its [`DriverFamily`], the two `/dev/nvidia-uvm` fds
//! (UVM_INITIALIZE, UVM_MM_INITIALIZE), the root client, CARD_INFO, and the VA plan
//! ([`super::vaspace`]: the reserved low window and the GPU-only region). Every device of the
//! process ([`super::device`]) shares one [`NvProcess`]: one client and one UVM VA space, so a
//! buffer of one GPU can be mapped on another at the same address.
//!
//! Each step is a named function; its errors say which step failed ([`step`]); with
//! `NV_BRINGUP_LOG=1` every step prints a status line on stderr (the first-run tool sets it).
//!
//! Not guaranteed: the process is never torn down while a device or buffer lives (they hold it).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::vaspace::{reserve_low_window, VaAllocator, HIGH_BASE, HIGH_END, LOW_WINDOW};
use crate::driver::nv::{DriverFamily, NvCtl, NvUvm};
use crate::driver::{Driver, Mapping};
use crate::helpers::getenv;
use crate::sys::nv::common::nv_ioctl_card_info_t;
use crate::{Error, Result};

/// Most GPUs CARD_INFO is asked about.
pub const MAX_CARDS: usize = 32;
/// First handle of client-numbered OS-descriptor memory (tinygrad numbers them from 0x1000).
const FIRST_OS_HANDLE: u32 = 0x1000;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run bring-up step `name`: log its outcome under `NV_BRINGUP_LOG=1`, and prefix an error with
/// the step's name (the error keeps its kind, errno and NV status).
pub fn step<T>(name: &str, detail: impl FnOnce(&T) -> String, r: Result<T>) -> Result<T> {
    let log = getenv("NV_BRINGUP_LOG", 0) != 0;
    match r {
        Ok(v) => {
            if log {
                eprintln!("[nv] {name:<32} ok   {}", detail(&v));
            }
            Ok(v)
        }
        Err(e) => {
            if log {
                eprintln!("[nv] {name:<32} FAIL {e}");
            }
            Err(e.with_context(&format!("NV bring-up step {name}")))
        }
    }
}

/// The RM client, UVM and VA space every NV device of a process shares.
pub struct NvProcess {
    pub(crate) drv: Arc<dyn Driver>,
    pub(crate) ctl: NvCtl,
    pub(crate) uvm: NvUvm,
    _uvm_mm: NvUvm,
    pub(crate) client: u32,
    cards: Vec<nv_ioctl_card_info_t>,
    low: Mutex<VaAllocator>,
    high: Mutex<VaAllocator>,
    window: Mapping,
    next_handle: AtomicU32,
    errors: Mutex<Vec<String>>,
    /// The signal page every device of the process shares (so one GPU's queues can wait on
    /// another's timeline); alive while a device holds it.
    pub(crate) signal_pool: Mutex<std::sync::Weak<super::signal::SignalPool>>,
    /// UUIDs of the GPUs registered with UVM so far.
    pub(crate) gpus: Mutex<Vec<[u8; 16]>>,
}

impl std::fmt::Debug for NvProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvProcess(driver {}, client {:#x}, {} GPUs)",
            self.ctl.version(),
            self.client,
            self.cards.len()
        )
    }
}

/// Step 1: `/dev/nvidiactl` and the driver family from CHECK_VERSION_STR.
fn open_control(drv: &Arc<dyn Driver>) -> Result<NvCtl> {
    step(
        "control fd + CHECK_VERSION_STR",
        |c: &NvCtl| format!("driver {} (family {})", c.version(), c.family()),
        NvCtl::open(drv.clone()),
    )
}

/// Step 2: the two UVM fds (their layouts: `family`'s).
fn open_uvm(drv: &Arc<dyn Driver>, family: DriverFamily) -> Result<(NvUvm, NvUvm)> {
    step(
        "open /dev/nvidia-uvm (x2)",
        |_| String::new(),
        NvUvm::open(drv.clone(), family).and_then(|a| Ok((a, NvUvm::open(drv.clone(), family)?))),
    )
}

/// Step 3: the root client.
fn alloc_client(ctl: &NvCtl) -> Result<u32> {
    step(
        "root client",
        |h| format!("hClient {h:#x}"),
        ctl.alloc_root_client(),
    )
}

/// Step 4: UVM_INITIALIZE on the first fd, UVM_MM_INITIALIZE on the second (a failure there is
/// tolerated, as CUDA and tinygrad tolerate it).
fn init_uvm(uvm: &NvUvm, uvm_mm: &NvUvm) -> Result<()> {
    step("UVM_INITIALIZE", |_| String::new(), uvm.initialize(0))?;
    let mm = uvm_mm.mm_initialize(uvm);
    let _ = step(
        "UVM_MM_INITIALIZE (optional)",
        |s| format!("status {s:#x}"),
        mm,
    );
    Ok(())
}

/// Step 5: CARD_INFO (the valid entries, in the driver's order).
fn card_info(ctl: &NvCtl) -> Result<Vec<nv_ioctl_card_info_t>> {
    let r = ctl.card_info(MAX_CARDS).and_then(|c| {
        if c.is_empty() {
            Err(Error::Device("CARD_INFO lists no NVIDIA GPU".into()))
        } else {
            Ok(c)
        }
    });
    step(
        "CARD_INFO",
        |c: &Vec<nv_ioctl_card_info_t>| {
            let v: Vec<String> = c
                .iter()
                .map(|c| {
                    format!(
                        "gpu_id {:#x} minor {} device {:#x}",
                        c.gpu_id, c.minor_number, c.pci_info.device_id
                    )
                })
                .collect();
            v.join("; ")
        },
        r,
    )
}

impl NvProcess {
    /// Steps 1-5 and the VA plan on `drv`.
    pub fn new(drv: Arc<dyn Driver>) -> Result<Arc<NvProcess>> {
        let ctl = open_control(&drv)?;
        let (uvm, uvm_mm) = open_uvm(&drv, ctl.family())?;
        let client = alloc_client(&ctl)?;
        init_uvm(&uvm, &uvm_mm)?;
        let cards = card_info(&ctl)?;
        let window = step(
            "reserve low VA window",
            |m: &Mapping| format!("{:#x}+{:#x}", m.addr(), m.len()),
            reserve_low_window(&drv),
        )?;
        let low = VaAllocator::new("NV low window", window.addr(), window.addr() + LOW_WINDOW);
        Ok(Arc::new(NvProcess {
            drv,
            ctl,
            uvm,
            _uvm_mm: uvm_mm,
            client,
            cards,
            low: Mutex::new(low),
            high: Mutex::new(VaAllocator::new("NV GPU-only", HIGH_BASE, HIGH_END)),
            window,
            next_handle: AtomicU32::new(FIRST_OS_HANDLE),
            errors: Mutex::new(Vec::new()),
            signal_pool: Mutex::new(std::sync::Weak::new()),
            gpus: Mutex::new(Vec::new()),
        }))
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.drv
    }

    /// The control fd.
    pub fn ctl(&self) -> &NvCtl {
        &self.ctl
    }

    /// The driver family in use.
    pub fn family(&self) -> DriverFamily {
        self.ctl.family()
    }

    /// The valid CARD_INFO entries (`NV:n` is entry n).
    pub fn cards(&self) -> &[nv_ioctl_card_info_t] {
        &self.cards
    }

    /// The root client handle.
    pub fn client(&self) -> u32 {
        self.client
    }

    /// The reserved low window `(start, end)`.
    pub fn low_window(&self) -> (u64, u64) {
        (self.window.addr(), self.window.addr() + LOW_WINDOW)
    }

    /// A VA range: in the low window when the CPU maps it, else in the GPU-only region.
    pub(crate) fn alloc_va(&self, size: u64, align: u64, low: bool) -> Result<u64> {
        if low {
            lock(&self.low).alloc(size, align)
        } else {
            lock(&self.high).alloc(size, align)
        }
    }

    /// Give a VA range back.
    pub(crate) fn free_va(&self, va: u64, size: u64, low: bool) {
        if low {
            lock(&self.low).free(va, size)
        } else {
            lock(&self.high).free(va, size)
        }
    }

    /// Free bytes of the low window (for leak checks).
    pub fn low_free_bytes(&self) -> u64 {
        lock(&self.low).free_bytes()
    }

    /// Free bytes of (the low window, the GPU-only region): every buffer returns its range.
    pub fn va_free_bytes(&self) -> (u64, u64) {
        (lock(&self.low).free_bytes(), lock(&self.high).free_bytes())
    }

    /// A client-chosen handle for OS-descriptor memory.
    pub(crate) fn next_handle(&self) -> u32 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Remember an error met in a `Drop` (reported at the next synchronize).
    pub(crate) fn defer_error(&self, e: String) {
        lock(&self.errors).push(e);
    }

    /// The deferred errors (emptied).
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.errors))
    }
}
