//! Tests of the emulated KFD. `mod.rs` holds the bring-up helpers, written against `dyn Driver`
//! so the same sequence runs on the emulator and (in `driver::hw_tests`) on a real `/dev/kfd`.

pub(crate) mod bringup;
mod events;
mod rejects;
mod rejects_queue;

use std::sync::Arc;

use crate::driver::api::{Driver, Fd, MapFlags, OpenFlags, Prot};
use crate::driver::kfd::ops::{self, GpuAlloc};
use crate::driver::kfd::topology::{queue_buffer_sizes, read_topology, QueueBufferSizes};
use crate::driver::mapped::Mapping;
use crate::sys::kfd::*;
use crate::Result;

/// tinygrad's base flags for every allocation.
pub(crate) const BASE_FLAGS: u32 = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
/// GTT, uncached (rings, pointers, signals, event page).
pub(crate) const GTT_UC: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT
    | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT
    | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
pub(crate) const VRAM: u32 = KFD_IOC_ALLOC_MEM_FLAGS_VRAM;

/// One opened GPU: descriptors, id and the sizes its queues need.
pub(crate) struct Dev {
    pub drv: Arc<dyn Driver>,
    pub kfd: Fd,
    pub render: Fd,
    pub gpu_id: u32,
    pub sizes: QueueBufferSizes,
}

/// A buffer at a reserved VA, optionally CPU-mapped, mapped on the device.
pub(crate) struct Buf {
    pub va: u64,
    pub size: u64,
    pub alloc: GpuAlloc,
    pub cpu: Option<Mapping>,
}

/// Topology -> open /dev/kfd -> GET_VERSION -> open the render node -> ACQUIRE_VM, for GPU `n`.
pub(crate) fn open_gpu(drv: &Arc<dyn Driver>, n: usize) -> Result<Dev> {
    let nodes = read_topology(drv.as_ref())?;
    let Some(node) = nodes.get(n) else {
        return Err(crate::Error::Device(format!(
            "no GPU #{n} in the topology ({} GPUs)",
            nodes.len()
        )));
    };
    let kfd = drv.open("/dev/kfd", OpenFlags::RDWR)?;
    let (major, minor) = ops::get_version(drv.as_ref(), kfd)?;
    assert_eq!(major, 1, "KFD major version");
    assert!(minor >= 11, "KFD minor version {minor} < 11");
    let render = drv.open(
        &format!("/dev/dri/renderD{}", node.props.drm_render_minor()?),
        OpenFlags::RDWR,
    )?;
    ops::acquire_vm(drv.as_ref(), kfd, render, node.gpu_id)?;
    Ok(Dev {
        drv: drv.clone(),
        kfd,
        render,
        gpu_id: node.gpu_id,
        sizes: queue_buffer_sizes(&node.props)?,
    })
}

/// An address-space reservation: anonymous PROT_NONE, as tinygrad reserves GPU VAs.
pub(crate) fn reserve(drv: &dyn Driver, size: u64) -> Result<u64> {
    drv.mmap(
        None,
        size as usize,
        Prot::empty(),
        MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::NORESERVE,
        None,
        0,
    )
}

impl Dev {
    /// tinygrad's `_gpu_alloc` for VRAM/GTT: reserve, ALLOC at that VA, mmap the render node over
    /// it when `cpu`, MAP_MEMORY_TO_GPU.
    pub(crate) fn alloc(&self, size: u64, flags: u32, cpu: bool) -> Result<Buf> {
        let drv = self.drv.as_ref();
        let va = reserve(drv, size)?;
        let alloc =
            ops::alloc_memory_of_gpu(drv, self.kfd, self.gpu_id, va, size, flags | BASE_FLAGS, 0)?;
        let cpu = if cpu {
            let flags = MapFlags::SHARED | MapFlags::FIXED;
            Some(Mapping::map(
                &self.drv,
                Some(va),
                size as usize,
                Prot::RW,
                flags,
                Some(self.render),
                alloc.mmap_offset,
            )?)
        } else {
            None
        };
        let n = ops::map_memory_to_gpu(drv, self.kfd, alloc.handle, &[self.gpu_id])?;
        assert_eq!(n, 1, "n_success");
        Ok(Buf {
            va,
            size,
            alloc,
            cpu,
        })
    }

    /// UNMAP, munmap (CPU view or reservation), FREE.
    pub(crate) fn free(&self, buf: Buf) -> Result<()> {
        let drv = self.drv.as_ref();
        ops::unmap_memory_from_gpu(drv, self.kfd, buf.alloc.handle, &[self.gpu_id])?;
        match buf.cpu {
            Some(m) => m.unmap()?,
            None => drv.munmap(buf.va, buf.size as usize)?,
        }
        ops::free_memory_of_gpu(drv, self.kfd, buf.alloc.handle)
    }

    /// The buffers of one queue, sized as KFD >= 6.12 demands.
    pub(crate) fn queue_buffers(&self, ring_size: u64, compute: bool) -> Result<QueueBufs> {
        let ring = self.alloc(ring_size, GTT_UC, true)?;
        let rw = self.alloc(4096, GTT_UC, true)?;
        let (eop, cwsr) = if compute {
            (
                Some(self.alloc(self.sizes.eop_buffer_size, VRAM, false)?),
                Some(self.alloc(self.sizes.cwsr_total_size, VRAM, false)?),
            )
        } else {
            (None, None)
        };
        Ok(QueueBufs {
            ring,
            rw,
            eop,
            cwsr,
        })
    }

    /// CREATE_QUEUE args for `b` (compute: type 0 with EOP and CWSR; SDMA: type 1).
    pub(crate) fn queue_args(&self, b: &QueueBufs) -> kfd_ioctl_create_queue_args {
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: b.ring.va,
            write_pointer_address: b.rw.va,
            read_pointer_address: b.rw.va + 8,
            ring_size: b.ring.size as u32,
            gpu_id: self.gpu_id,
            queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
            queue_percentage: KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: KFD_MAX_QUEUE_PRIORITY,
            ..Default::default()
        };
        if let (Some(eop), Some(cwsr)) = (&b.eop, &b.cwsr) {
            a.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
            a.eop_buffer_address = eop.va;
            a.eop_buffer_size = eop.size;
            a.ctx_save_restore_address = cwsr.va;
            a.ctx_save_restore_size = self.sizes.cwsr_size;
            a.ctl_stack_size = self.sizes.ctl_stack_size;
        }
        a
    }

    pub(crate) fn free_queue_buffers(&self, b: QueueBufs) -> Result<()> {
        self.free(b.ring)?;
        self.free(b.rw)?;
        if let Some(e) = b.eop {
            self.free(e)?;
        }
        if let Some(c) = b.cwsr {
            self.free(c)?;
        }
        Ok(())
    }
}

/// Ring, rptr/wptr page, and (compute) EOP and CWSR buffers of one queue.
pub(crate) struct QueueBufs {
    pub ring: Buf,
    pub rw: Buf,
    pub eop: Option<Buf>,
    pub cwsr: Option<Buf>,
}

/// An emulated driver with `count` gfx1100 GPUs and nothing attached.
pub(crate) fn emu(count: usize) -> (Arc<dyn Driver>, crate::mockgpu::EmuDriver) {
    let e = crate::mockgpu::EmuDriver::new(crate::mockgpu::EmuConfig {
        count,
        ..Default::default()
    })
    .unwrap();
    (Arc::new(e.clone()), e)
}

/// The errno of a failed call, panicking with the value if it succeeded.
pub(crate) fn errno<T: std::fmt::Debug>(r: Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e
            .errno()
            .unwrap_or_else(|| panic!("error without errno: {e}")),
    }
}

/// Assert that `r` failed with `want` and a message containing `needle`.
#[track_caller]
pub(crate) fn fails<T: std::fmt::Debug>(r: Result<T>, want: i32, needle: &str) {
    match r {
        Ok(v) => panic!("expected errno {want} ({needle}), got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.errno(), Some(want), "{e}");
            assert!(
                e.to_string().contains(needle),
                "message lacks {needle:?}: {e}"
            );
        }
    }
}

/// The error message of a failed call.
pub(crate) fn message<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.to_string(),
    }
}
