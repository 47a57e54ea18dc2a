//! The KFD process: what a process shares among its AMD devices.
//!
//! - [`KfdCore`]: the driver, the `/dev/kfd` descriptor (opened once, GET_VERSION checked), the
//!   render node and ACQUIRE_VM of each GPU (once per GPU), and the errors met in `Drop`s (reported
//!   at the next synchronize). Buffers and signals hold an `Arc<KfdCore>`; closing it closes the
//!   descriptors.
//! - [`AmdProcess`]: the core, the topology (GPU nodes sorted by node number, filtered by
//!   `VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES`), and the pages all devices share: the signal pool
//!   and the KFD signal-event page, created with the first device and mapped into every later
//!   device's GPU VM (so any queue can wait on any device's signals).
//!
//! Not guaranteed: a process-wide [`AmdProcess`] lives until exit; dropping one used by tests
//! releases its pages only after every device and signal of it is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::memory::{alloc_memory, AmdBuffer, MemKind};
use super::signal::SignalPool;
use crate::driver::kfd::ops;
use crate::driver::kfd::topology::{read_topology, KfdNode};
use crate::driver::kfd::KFD_SIGNAL_EVENT_PAGE_SIZE;
use crate::driver::{Driver, Fd, OpenFlags};
use crate::helpers::getenv_str;
use crate::{bail, ensure, Error, Result};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The driver and the descriptors of one KFD process.
pub struct KfdCore {
    pub(crate) drv: Arc<dyn Driver>,
    pub(crate) kfd: Fd,
    render: Mutex<HashMap<u32, Fd>>,
    errors: Mutex<Vec<String>>,
}

impl std::fmt::Debug for KfdCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KfdCore({} driver, kfd fd {})",
            self.drv.name(),
            self.kfd.0
        )
    }
}

impl KfdCore {
    /// Open `/dev/kfd` and check the interface version (major 1).
    pub fn open(drv: Arc<dyn Driver>) -> Result<Arc<KfdCore>> {
        let kfd = drv.open("/dev/kfd", OpenFlags::RDWR)?;
        let core = Arc::new(KfdCore {
            drv,
            kfd,
            render: Mutex::new(HashMap::new()),
            errors: Mutex::new(Vec::new()),
        });
        let (major, minor) = ops::get_version(core.drv.as_ref(), core.kfd)?;
        ensure!(
            major == 1,
            Device,
            "KFD interface version {major}.{minor}: only major version 1 is supported"
        );
        Ok(core)
    }

    /// The render node of `node`, opened and bound with ACQUIRE_VM on first use.
    pub fn acquire_vm(&self, node: &KfdNode) -> Result<Fd> {
        let mut r = lock(&self.render);
        if let Some(fd) = r.get(&node.gpu_id) {
            return Ok(*fd);
        }
        let path = format!("/dev/dri/renderD{}", node.props.drm_render_minor()?);
        let fd = self.drv.open(&path, OpenFlags::RDWR)?;
        if let Err(e) = ops::acquire_vm(self.drv.as_ref(), self.kfd, fd, node.gpu_id) {
            let _ = self.drv.close(fd);
            return Err(e);
        }
        r.insert(node.gpu_id, fd);
        Ok(fd)
    }

    /// The render node of a GPU whose VM was acquired.
    pub fn render_fd(&self, gpu_id: u32) -> Result<Fd> {
        match lock(&self.render).get(&gpu_id) {
            Some(fd) => Ok(*fd),
            None => bail!(
                Internal,
                "gpu {gpu_id:#x}: no render node (ACQUIRE_VM not done)"
            ),
        }
    }

    /// Remember an error that had no caller (a failed free in `Drop`).
    pub fn defer_error(&self, msg: String) {
        lock(&self.errors).push(msg);
    }

    /// The remembered errors (emptied).
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.errors))
    }
}

impl Drop for KfdCore {
    fn drop(&mut self) {
        for (_, fd) in lock(&self.render).drain() {
            let _ = self.drv.close(fd);
        }
        let _ = self.drv.close(self.kfd);
    }
}

/// Pages every device of the process maps.
pub(crate) struct SharedPages {
    pub(crate) signals: Arc<SignalPool>,
    /// The signal-event page (KFD forbids freeing it while the process lives: pinned).
    pub(crate) events: Arc<EventPage>,
}

/// The KFD signal-event page: a GTT buffer registered with the first CREATE_EVENT.
pub struct EventPage {
    pub(crate) buf: AmdBuffer,
    pub(crate) registered: Mutex<bool>,
}

/// One process's view of KFD: core, topology, shared pages.
pub struct AmdProcess {
    pub(crate) core: Arc<KfdCore>,
    nodes: Vec<KfdNode>,
    shared: Mutex<Option<SharedPages>>,
}

/// The indices named by `VISIBLE_DEVICES` (or `HIP_VISIBLE_DEVICES`), if set.
fn visible_devices() -> Result<Option<Vec<usize>>> {
    let Some(v) = getenv_str("VISIBLE_DEVICES")
        .or_else(|| getenv_str("HIP_VISIBLE_DEVICES"))
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for part in v.split(',') {
        match part.trim().parse::<usize>() {
            Ok(i) => out.push(i),
            Err(_) => bail!(
                InvalidArgument,
                "VISIBLE_DEVICES={v:?}: {part:?} is not an index"
            ),
        }
    }
    Ok(Some(out))
}

impl AmdProcess {
    /// Open KFD through `drv` and read the topology.
    pub fn new(drv: Arc<dyn Driver>) -> Result<Arc<AmdProcess>> {
        let all = read_topology(drv.as_ref())?;
        let nodes = match visible_devices()? {
            None => all,
            Some(idx) => {
                let mut v = Vec::with_capacity(idx.len());
                for i in idx {
                    match all.get(i) {
                        Some(n) => v.push(n.clone()),
                        None => bail!(
                            Device,
                            "VISIBLE_DEVICES names GPU {i}, but there are {} GPUs",
                            all.len()
                        ),
                    }
                }
                v
            }
        };
        Ok(Arc::new(AmdProcess {
            core: KfdCore::open(drv)?,
            nodes,
            shared: Mutex::new(None),
        }))
    }

    /// The GPU nodes, in `AMD:n` order.
    pub fn nodes(&self) -> &[KfdNode] {
        &self.nodes
    }

    /// The core.
    pub fn core(&self) -> &Arc<KfdCore> {
        &self.core
    }

    /// `AMD:index`'s node.
    pub fn node(&self, index: usize) -> Result<&KfdNode> {
        self.nodes.get(index).ok_or_else(|| {
            Error::Device(format!(
                "AMD:{index}: no such GPU ({} visible through KFD)",
                self.nodes.len()
            ))
        })
    }

    /// The shared pages, created on `gpu_id` the first time and mapped into `gpu_id`'s VM.
    pub(crate) fn shared_for(&self, gpu_id: u32) -> Result<(Arc<SignalPool>, Arc<EventPage>)> {
        let mut sh = lock(&self.shared);
        if sh.is_none() {
            let signals = SignalPool::new(&self.core, gpu_id)?;
            let mut buf = alloc_memory(
                &self.core,
                gpu_id,
                KFD_SIGNAL_EVENT_PAGE_SIZE,
                MemKind::GttUncached,
                true,
            )?;
            buf.pin();
            let events = Arc::new(EventPage {
                buf,
                registered: Mutex::new(false),
            });
            *sh = Some(SharedPages { signals, events });
        }
        let Some(pages) = sh.as_ref() else {
            return Err(Error::Internal("shared pages vanished".into()));
        };
        pages.signals.buf.map_to(gpu_id)?;
        pages.events.buf.map_to(gpu_id)?;
        Ok((pages.signals.clone(), pages.events.clone()))
    }
}
