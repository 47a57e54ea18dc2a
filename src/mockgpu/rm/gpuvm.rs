//! The emulated GPU page tables (one per device) and what the software GPU reads through them:
//! entries made by UVM_MAP_EXTERNAL_ALLOCATION (tagged with the UVM fd) and by
//! NV_ESC_RM_MAP_MEMORY_DMA (tagged with the client, memory and hDma), address translation with
//! MMU-like refusals, views of memory objects, and the error notifier writes.
//!
//! RM_MAP_MEMORY_DMA rules (RM's status codes): `hDma` is an NV01_MEMORY_VIRTUAL object or a
//! vaspace RM owns (an externally owned one is NV_ERR_INVALID_ARGUMENT: UVM owns it), `hMemory` a
//! memory object of the same device, page-aligned ranges (NV_ERR_INVALID_OFFSET) inside the
//! memory (NV_ERR_INVALID_LIMIT) and inside hDma's range, no overlap (NV_ERR_INVALID_ADDRESS).
//!
//! Not guaranteed: RM_MAP_MEMORY_DMA needs DMA_OFFSET_FIXED (the emulator picks no VAs).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::memory::MemObj;
use super::objects::{Client, Obj, ObjKind};
use super::{lock, rbail, set_diagnostic, EmuNv, RmErr, RmResult};
use crate::driver::api::{arg_bytes, arg_from_bytes, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::nv::{class_str, MapMemoryDmaParams};
use crate::mockgpu::backing::Backing;
use crate::mockgpu::KResult;
use crate::sys::nv::common::*;
use crate::sys::nv::{v570, v580};
use crate::{Error, Result};

const PAGE: u64 = 4096;

/// Who made a GPU page-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapOwner {
    /// UVM_MAP_EXTERNAL_ALLOCATION through UVM fd `fd`.
    Uvm(i32),
    /// RM_MAP_MEMORY_DMA of `memory` through `dma`, for `client`.
    Rm { client: u32, memory: u32, dma: u32 },
}

/// A GPU page-table entry.
#[derive(Clone, Debug)]
pub(crate) struct NvGpuMap {
    pub(crate) backing: Arc<Backing>,
    /// Backing offset at the entry's base VA.
    pub(crate) off: u64,
    pub(crate) writable: bool,
    pub(crate) owner: MapOwner,
}

/// The device and VA range `[lo, hi]` of an RM_MAP_MEMORY_DMA target: a virtual-memory object,
/// or a vaspace RM owns.
fn dma_target(c: &Client, dma: u32) -> RmResult<(usize, u64, u64)> {
    let d = c.obj(dma, "hDma")?;
    match d.kind {
        ObjKind::Virtual { offset, limit } => Ok((d.gpu, offset, limit)),
        ObjKind::VaSpace { external: false } => Ok((d.gpu, 0, u64::MAX)),
        ObjKind::VaSpace { external: true } => rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "vaspace {dma:#x} is externally owned: map through UVM"
        ),
        _ => rbail!(
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hDma {dma:#x} is {}, not NV01_MEMORY_VIRTUAL",
            class_str(d.class)
        ),
    }
}

/// The alignment and bounds checks of RM_MAP_MEMORY_DMA; returns the end VA.
fn check_dma_range(p: &MapMemoryDmaParams, m: &MemObj, lo: u64, hi: u64) -> RmResult<u64> {
    let (va, offset, length) = (p.dma_offset, p.offset, p.length);
    if va % PAGE != 0 || offset % PAGE != 0 || length == 0 || length % PAGE != 0 {
        rbail!(
            NV_ERR_INVALID_OFFSET,
            "dmaOffset {va:#x}, offset {offset:#x}, length {length:#x} must be page aligned"
        );
    }
    if offset.checked_add(length).map_or(true, |e| e > m.size) {
        rbail!(
            NV_ERR_INVALID_LIMIT,
            "{offset:#x}+{length:#x} is outside memory {:#x} of {:#x} bytes",
            p.h_memory,
            m.size
        );
    }
    match va.checked_add(length).filter(|&e| va >= lo && e - 1 <= hi) {
        Some(end) => Ok(end),
        None => rbail!(
            NV_ERR_INVALID_OFFSET,
            "{va:#x}+{length:#x} is outside hDma's range {lo:#x}..={hi:#x}"
        ),
    }
}

impl EmuNv {
    /// NV_ESC_RM_MAP_MEMORY_DMA (NVOS46 in the family's layout).
    pub(crate) fn rm_map_memory_dma(&self, arg: &mut [u8]) -> KResult {
        macro_rules! go {
            ($m:ident) => {{
                let Some(mut p) = arg_from_bytes::<$m::NVOS46_PARAMETERS>(arg) else {
                    kbail!(EINVAL, "NVOS46 of {} bytes", arg.len());
                };
                let r = self.map_dma(&MapMemoryDmaParams {
                    h_client: p.hClient,
                    h_device: p.hDevice,
                    h_dma: p.hDma,
                    h_memory: p.hMemory,
                    offset: p.offset,
                    length: p.length,
                    flags: p.flags,
                    dma_offset: p.dmaOffset,
                    ..Default::default()
                });
                p.status = match r {
                    Ok(va) => {
                        p.dmaOffset = va;
                        NV_OK
                    }
                    Err(RmErr(s, msg)) => {
                        set_diagnostic(msg);
                        s
                    }
                };
                arg.copy_from_slice(arg_bytes(&p));
                Ok(())
            }};
        }
        if self.abi.major >= 580 {
            go!(v580)
        } else {
            go!(v570)
        }
    }

    /// Map `p.h_memory` at the fixed `p.dma_offset` through `p.h_dma` on the device's page table.
    fn map_dma(&self, p: &MapMemoryDmaParams) -> RmResult<u64> {
        let st = lock(&self.state);
        let Some(c) = st.clients.get(&p.h_client) else {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hClient {:#x} is not a client",
                p.h_client
            );
        };
        let (gpu, lo, hi) = dma_target(c, p.h_dma)?;
        let m = c.memory(p.h_memory, gpu, "hMemory")?;
        let fixed = (p.flags >> NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT) & 1;
        if fixed != NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE {
            rbail!(
                NV_ERR_NOT_SUPPORTED,
                "the emulator maps only at a fixed dmaOffset (DMA_OFFSET_FIXED)"
            );
        }
        let (va, end) = (p.dma_offset, check_dma_range(p, &m, lo, hi)?);
        let mut vm = self.devs[gpu]
            .gpuvm
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(o) = vm.overlapping(va, end).first() {
            rbail!(
                NV_ERR_INVALID_ADDRESS,
                "{va:#x}+{:#x} overlaps a mapping at {:#x}..{:#x}",
                p.length,
                o.start,
                o.end
            );
        }
        let owner = MapOwner::Rm {
            client: p.h_client,
            memory: p.h_memory,
            dma: p.h_dma,
        };
        let entry = NvGpuMap {
            backing: m.backing.clone(),
            off: m.off + p.offset,
            writable: true,
            owner,
        };
        vm.insert(va, end, entry);
        Ok(va)
    }

    /// Drop the RM_MAP_MEMORY_DMA entries on `gpu` matching `pred`.
    fn unmap_where(&self, gpu: usize, pred: impl Fn(&MapOwner) -> bool) {
        let Some(d) = self.devs.get(gpu) else { return };
        let mut vm = d.gpuvm.write().unwrap_or_else(|e| e.into_inner());
        let hits: Vec<(u64, u64)> = vm
            .iter()
            .filter(|p| pred(&p.value.owner))
            .map(|p| (p.start, p.end))
            .collect();
        for (s, e) in hits {
            vm.remove(s, e);
        }
    }

    /// A memory object was freed: drop its RM DMA mappings (UVM mappings keep the pages).
    pub(crate) fn unmap_rm_dma(&self, gpu: usize, client: u32, memory: u32) {
        self.unmap_where(gpu, |o| matches!(o, MapOwner::Rm { client: c, memory: m, .. } if *c == client && *m == memory));
    }

    /// A virtual object or vaspace was freed: drop the mappings made through it.
    pub(crate) fn unmap_rm_dma_target(&self, gpu: usize, client: u32, dma: u32) {
        self.unmap_where(
            gpu,
            |o| matches!(o, MapOwner::Rm { client: c, dma: d, .. } if *c == client && *d == dma),
        );
    }

    /// Drop every mapping UVM fd `fd` made.
    pub(crate) fn unmap_uvm(&self, fd: i32, start: u64, end: u64) {
        for gpu in 0..self.devs.len() {
            let mut vm = self.devs[gpu]
                .gpuvm
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let hits: Vec<(u64, u64)> = vm
                .overlapping(start, end)
                .iter()
                .filter(|p| p.value.owner == MapOwner::Uvm(fd))
                .map(|p| (p.start.max(start), p.end.min(end)))
                .collect();
            for (s, e) in hits {
                vm.remove(s, e);
            }
        }
    }

    /// The software GPU's view of `[va, va + len)` on `gpu`.
    pub(crate) fn gpu_translate(
        &self,
        gpu: usize,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Mapping> {
        let Some(d) = self.devs.get(gpu) else {
            return Err(Error::Fault(format!("emu nv gpu {gpu}: no such device")));
        };
        let vm = d.gpuvm.read().unwrap_or_else(|e| e.into_inner());
        let rw = if write { "write" } else { "read" };
        let Some(p) = vm.get(va) else {
            return Err(Error::Fault(format!(
                "emu nv gpu {gpu}: {rw} of {len:#x} bytes at unmapped VA {va:#x}"
            )));
        };
        if !matches!(va.checked_add(len), Some(e) if e <= p.end) {
            return Err(Error::Fault(format!(
                "emu nv gpu {gpu}: {rw} {va:#x}+{len:#x} runs past the mapping {:#x}..{:#x}",
                p.start, p.end
            )));
        }
        if write && !p.value.writable {
            return Err(Error::Fault(format!(
                "emu nv gpu {gpu}: write to read-only mapping at {va:#x}"
            )));
        }
        let prot = if p.value.writable {
            Prot::RW
        } else {
            Prot::READ
        };
        p.value
            .backing
            .view(p.value.off + p.offset_of(va), len, prot)
    }

    /// A read/write view of `[off, off + len)` of memory object `h` of `client`.
    pub(crate) fn memory_view(&self, client: u32, h: u32, off: u64, len: u64) -> Result<Mapping> {
        let m = {
            let st = lock(&self.state);
            match st.clients.get(&client).and_then(|c| c.objects.get(&h)) {
                Some(Obj {
                    kind: ObjKind::Memory(m),
                    ..
                }) => m.clone(),
                _ => {
                    return Err(Error::Device(format!(
                        "emu nv: {h:#x} is not a memory object of client {client:#x}"
                    )))
                }
            }
        };
        if off.checked_add(len).map_or(true, |e| e > m.size) {
            return Err(Error::Device(format!(
                "emu nv: {off:#x}+{len:#x} is outside memory {h:#x} of {:#x} bytes",
                m.size
            )));
        }
        m.backing.view(m.off + off, len, Prot::RW)
    }

    /// Write NvNotification record `index` of memory `h` (timestamp now).
    pub(crate) fn write_notifier(
        &self,
        client: u32,
        h: u32,
        index: u32,
        info32: u32,
        info16: u16,
        status: u16,
    ) -> Result<()> {
        let v = self.memory_view(client, h, u64::from(index) * 16, 16)?;
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        v.write_u64(0, ns)?;
        v.write_u32(8, info32)?;
        // info16 at 12, status at 14 (little endian), written last and at once.
        v.store_u32(
            12,
            u32::from(info16) | (u32::from(status) << 16),
            Ordering::Release,
        )
    }
}
