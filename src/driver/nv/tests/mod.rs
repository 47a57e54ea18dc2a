//! Tests of the NV ABI layer. `mod.rs` holds the bring-up sequence (tinygrad's `NVDevice.__init__`
//! order), written against `dyn Driver` through the `driver::nv` wrappers only, so the same code
//! runs on the emulated RM/UVM and (in `driver::nv::hw_tests`) on a real `/dev/nvidiactl`.

mod abi;
mod bringup;
mod rejects;
mod rejects_uvm;

use std::sync::{Arc, Mutex};

use crate::driver::api::{Driver, MapFlags, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::nv::*;
use crate::mockgpu::{EmuConfig, EmuDriver};
use crate::sys::nv::common::*;
use crate::Result;

/// Size of the VA window the tests place buffers in.
const WINDOW: u64 = 1 << 30;
/// GP entries per channel ring (tinygrad: 0x10000; smaller keeps the tests light).
pub(crate) const ENTRIES: u32 = 0x400;
/// UVM channel range per channel (tinygrad reserves 64 MiB).
pub(crate) const CHANNEL_RANGE: u64 = 64 << 20;

/// An emulated driver with `cfg`'s NVIDIA part (1 GPU of `arch` on driver `version`).
pub(crate) fn emu_nv(arch: &str, version: &str) -> (Arc<dyn Driver>, EmuDriver) {
    let e = EmuDriver::new(EmuConfig {
        count: 1,
        nv_arch: arch.into(),
        nv_driver: version.into(),
        ..Default::default()
    })
    .unwrap();
    (Arc::new(e.clone()), e)
}

/// A buffer: RM memory object, its GPU VA (= CPU VA when CPU-mapped), optional CPU mapping.
pub(crate) struct NvBuf {
    pub handle: u32,
    pub va: u64,
    pub size: u64,
    pub cpu: Option<Mapping>,
}

/// One channel of the bring-up.
pub(crate) struct Chan {
    pub handle: u32,
    pub notifier: NvBuf,
    pub engine_class: u32,
    pub engine: u32,
    pub token: u32,
    /// Byte offset of the ring in the GPFIFO area; USERD follows the ring.
    pub ring_off: u64,
    pub userd_off: u64,
    /// The VA span registered with UVM_REGISTER_CHANNEL.
    pub uvm_base: u64,
}

/// Everything the bring-up made.
pub(crate) struct Nv {
    pub drv: Arc<dyn Driver>,
    pub ctl: NvCtl,
    pub uvm: NvUvm,
    pub uvm_mm: NvUvm,
    pub gpu_fd: NvGpuFd,
    pub card: nv_ioctl_card_info_t,
    pub client: u32,
    pub device: u32,
    pub subdevice: u32,
    pub classes: Vec<u32>,
    pub usermode: u32,
    pub doorbell: Mapping,
    pub vaspace: u32,
    pub uuid: [u8; 16],
    window: Mutex<(u64, u64)>,
}

/// The first class of `want` that `classes` offers.
pub(crate) fn pick(classes: &[u32], want: &[u32]) -> Result<u32> {
    want.iter()
        .copied()
        .find(|c| classes.contains(c))
        .ok_or_else(|| {
            crate::Error::Device(format!(
                "none of {:x?} in the class list {:x?}",
                want, classes
            ))
        })
}

/// Bring-up steps 1-13: control fd and family, UVM fds, client, CARD_INFO, GPU node,
/// device/subdevice, class list, usermode page, perf boost, vaspace, UUID and UVM registration.
pub(crate) fn open_nv(drv: &Arc<dyn Driver>) -> Result<Nv> {
    let ctl = NvCtl::open(drv.clone())?;
    let uvm = NvUvm::open(drv.clone(), ctl.family())?;
    let uvm_mm = NvUvm::open(drv.clone(), ctl.family())?;
    let client = ctl.alloc_root_client()?;
    uvm.initialize(0)?;
    uvm_mm.mm_initialize(&uvm)?;
    let card = *ctl
        .card_info(64)?
        .first()
        .ok_or_else(|| crate::Error::Device("CARD_INFO lists no GPU".into()))?;
    let gpu_fd = NvGpuFd::open(drv.clone(), card.minor_number)?;
    gpu_fd.register_fd(ctl.fd())?;
    let (device, subdevice) = alloc_device(&ctl, client, card.gpu_id)?;
    let classes = ctl.get_classlist(client, device)?;
    let (usermode, doorbell) =
        map_usermode(drv, &ctl, &card, (client, device, subdevice), &classes)?;
    let vaspace = boost_and_vaspace(&ctl, client, device, subdevice)?;
    let uuid = ctl.get_gid_info(client, subdevice)?;
    uvm.register_gpu(uuid, -1, 0, 0)?;
    uvm.register_gpu_vaspace(uuid, ctl.fd(), client, vaspace)?;
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::NORESERVE;
    let base = drv.mmap(None, WINDOW as usize, Prot::empty(), flags, None, 0)?;
    Ok(Nv {
        drv: drv.clone(),
        ctl,
        uvm,
        uvm_mm,
        gpu_fd,
        card,
        client,
        device,
        subdevice,
        classes,
        usermode,
        doorbell,
        vaspace,
        uuid,
        window: Mutex::new((base.next_multiple_of(2 << 20), base + WINDOW)),
    })
}

/// Steps 7-8: GET_ID_INFO_V2, then NV01_DEVICE_0 and NV20_SUBDEVICE_0.
fn alloc_device(ctl: &NvCtl, client: u32, gpu_id: u32) -> Result<(u32, u32)> {
    let info = ctl.get_id_info_v2(client, gpu_id)?;
    let mut dp = NV0080_ALLOC_PARAMETERS {
        deviceId: info.deviceInstance,
        hClientShare: client,
        vaMode: NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES,
        ..Default::default()
    };
    let device = ctl.rm_alloc_with(client, client, 0, NV01_DEVICE_0, &mut dp)?;
    let mut sp = NV2080_ALLOC_PARAMETERS { subDeviceId: 0 };
    let subdevice = ctl.rm_alloc_with(client, device, 0, NV20_SUBDEVICE_0, &mut sp)?;
    Ok((device, subdevice))
}

/// Step 10: the newest usermode class, mapped (64 KiB, write-only access) through a fresh
/// registered GPU node that is closed after the mmap.
fn map_usermode(
    drv: &Arc<dyn Driver>,
    ctl: &NvCtl,
    card: &nv_ioctl_card_info_t,
    (client, device, subdevice): (u32, u32, u32),
    classes: &[u32],
) -> Result<(u32, Mapping)> {
    let um_class = pick(
        classes,
        &[HOPPER_USERMODE_A, AMPERE_USERMODE_A, TURING_USERMODE_A],
    )?;
    let usermode = ctl.rm_alloc(client, subdevice, 0, um_class, None)?;
    let map_fd = NvGpuFd::open(drv.clone(), card.minor_number)?;
    map_fd.register_fd(ctl.fd())?;
    let size = u64::from(NV_USERMODE_MAP_SIZE);
    let access = NVOS33_FLAGS_ACCESS_WRITE_ONLY;
    ctl.rm_map_memory(client, device, usermode, 0, size, access, map_fd.fd())?;
    let flags = MapFlags::SHARED;
    let doorbell = Mapping::map(
        drv,
        None,
        size as usize,
        Prot::RW,
        flags,
        Some(map_fd.fd()),
        0,
    )?;
    Ok((usermode, doorbell))
}

/// Steps 11-12: an optional PERF_BOOST (refused in some VMs: ignored, as tinygrad does), then
/// the externally owned FERMI_VASPACE_A UVM will manage.
fn boost_and_vaspace(ctl: &NvCtl, client: u32, device: u32, subdevice: u32) -> Result<u32> {
    let boost = (NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES << NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_SHIFT)
        | (NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH
            << NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_SHIFT)
        | NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX;
    let infinite = NV2080_CTRL_PERF_BOOST_DURATION_INFINITE;
    let _ = ctl.perf_boost(client, subdevice, boost, infinite);
    let params = VaSpaceParams {
        va_base: 0x1000,
        va_size: 0x1_FFFF_FB00_0000,
        flags: NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED
            | NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING,
        ..Default::default()
    };
    ctl.alloc_vaspace(client, device, &params)
}

impl Nv {
    /// A VA range of `size` bytes (2 MiB aligned) inside the reserved window.
    pub(crate) fn va(&self, size: u64) -> Result<u64> {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let va = w.0;
        let next = (va + size).next_multiple_of(2 << 20);
        if next > w.1 {
            return Err(crate::Error::Device(format!(
                "test VA window exhausted ({size:#x} more)"
            )));
        }
        w.0 = next;
        Ok(va)
    }

    /// Memory allocation parameters as tinygrad builds them (VRAM: contiguous or not, huge pages
    /// for 2 MiB multiples; system memory: PCI, noncontiguous, uncached for the GPU).
    pub(crate) fn mem_params(&self, size: u64, vram: bool) -> NV_MEMORY_ALLOCATION_PARAMS {
        let huge = vram && size % (2 << 20) == 0;
        let base_flags = NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT
            | NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED
            | NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED;
        let (ty, flags, attr, attr2) = if vram {
            let page = if huge {
                NVOS32_ATTR_PAGE_SIZE_HUGE << NVOS32_ATTR_PAGE_SIZE_SHIFT
            } else {
                0
            };
            let attr = (NVOS32_ATTR_PHYSICALITY_CONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT) | page;
            let attr2 = NVOS32_ATTR2_ZBC_PREFER_NO_ZBC
                | (NVOS32_ATTR2_GPU_CACHEABLE_YES << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT)
                | if huge {
                    NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB << NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT
                } else {
                    0
                };
            (
                NVOS32_TYPE_IMAGE,
                base_flags
                    | NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
                    | NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM,
                attr,
                attr2,
            )
        } else {
            let attr = (NVOS32_ATTR_LOCATION_PCI << NVOS32_ATTR_LOCATION_SHIFT)
                | (NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT);
            (
                NVOS32_TYPE_NOTIFIER,
                base_flags,
                attr,
                NVOS32_ATTR2_GPU_CACHEABLE_NO << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT,
            )
        };
        NV_MEMORY_ALLOCATION_PARAMS {
            owner: self.client,
            type_: ty,
            flags,
            attr,
            attr2,
            format: 6,
            size,
            alignment: if huge { 2 << 20 } else { 4096 },
            limit: size - 1,
            ..Default::default()
        }
    }

    /// Map memory `handle` at GPU VA `va` through UVM (external range + map).
    pub(crate) fn map_gpu(&self, handle: u32, va: u64, size: u64) -> Result<()> {
        self.uvm.create_external_range(va, size)?;
        let attr = mapping_attributes(
            self.uuid,
            UvmGpuMappingTypeReadWriteAtomic,
            UvmGpuCachingTypeDefault,
        );
        self.uvm
            .map_external_allocation(va, size, 0, &[attr], self.ctl.fd(), self.client, handle)
    }

    /// tinygrad's `_gpu_alloc`: RM memory, CPU mapping at its VA when `cpu` (VRAM through a fresh
    /// registered GPU node, system memory through a fresh control fd), GPU mapping at the same VA.
    pub(crate) fn alloc(&self, size: u64, vram: bool, cpu: bool) -> Result<NvBuf> {
        let class = if vram {
            NV01_MEMORY_LOCAL_USER
        } else {
            NV01_MEMORY_SYSTEM
        };
        let mut p = self.mem_params(size, vram);
        let handle = self
            .ctl
            .rm_alloc_with(self.client, self.device, 0, class, &mut p)?;
        let va = self.va(size)?;
        let cpu = if cpu {
            Some(self.map_cpu(handle, va, size, vram)?)
        } else {
            None
        };
        self.map_gpu(handle, va, size)?;
        Ok(NvBuf {
            handle,
            va,
            size,
            cpu,
        })
    }

    /// RM_MAP_MEMORY + mmap at `va`.
    pub(crate) fn map_cpu(&self, handle: u32, va: u64, size: u64, vram: bool) -> Result<Mapping> {
        let flags = MapFlags::SHARED | MapFlags::FIXED;
        if vram {
            let fd = NvGpuFd::open(self.drv.clone(), self.card.minor_number)?;
            fd.register_fd(self.ctl.fd())?;
            self.ctl
                .rm_map_memory(self.client, self.device, handle, 0, size, 0, fd.fd())?;
            Mapping::map(
                &self.drv,
                Some(va),
                size as usize,
                Prot::RW,
                flags,
                Some(fd.fd()),
                0,
            )
        } else {
            // A fresh control fd per mapping: one mapping context per fd for its life.
            let fd = NvCtlMapFd::open(self.drv.clone())?;
            self.ctl
                .rm_map_memory(self.client, self.device, handle, 0, size, 0, fd.fd())?;
            Mapping::map(
                &self.drv,
                Some(va),
                size as usize,
                Prot::RW,
                flags,
                Some(fd.fd()),
                0,
            )
        }
    }
}

/// Bring-up steps 14-19 on top of [`open_nv`].
pub(crate) struct Queues {
    pub signals: NvBuf,
    pub tsg: u32,
    pub ctxshare: u32,
    pub gpfifo: NvBuf,
    pub compute: Chan,
    pub dma: Chan,
    pub cmdq: NvBuf,
    pub kernargs: NvBuf,
    /// SM_VERSION, LITTER_NUM_GPCS, LITTER_NUM_TPC_PER_GPC, LITTER_NUM_SM_PER_TPC,
    /// MAX_WARPS_PER_SM, SHADER_PIPE_COUNT, SHADER_PIPE_SUB_COUNT.
    pub gr: Vec<u32>,
}

/// The GR info indices [`Queues::gr`] holds, in order.
pub(crate) const GR_INDICES: [u32; 7] = [
    NV2080_CTRL_GR_INFO_INDEX_SM_VERSION,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
    NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
    NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT,
    NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT,
];

impl Nv {
    /// One channel in `tsg` with its ring at `ring_off` of the GPFIFO area, an engine object of
    /// `engine_class`, its token, and its UVM registration.
    fn channel(&self, q: (&NvBuf, u32, u32), ring_off: u64, engine_class: u32) -> Result<Chan> {
        let (gpfifo, tsg, ctxshare) = q;
        let ch_class = pick(
            &self.classes,
            &[HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A],
        )?;
        let notifier = self.alloc(0x1000, false, true)?;
        let userd_off = ring_off + u64::from(ENTRIES) * 8;
        let handle = self.ctl.alloc_channel(
            self.client,
            tsg,
            ch_class,
            &ChannelParams {
                h_object_error: notifier.handle,
                h_object_buffer: gpfifo.handle,
                gp_fifo_offset: gpfifo.va + ring_off,
                gp_fifo_entries: ENTRIES,
                h_context_share: ctxshare,
                h_userd_memory: gpfifo.handle,
                userd_offset: userd_off,
                ..Default::default()
            },
        )?;
        let engine = self
            .ctl
            .rm_alloc(self.client, handle, 0, engine_class, None)?;
        let token = self.ctl.get_work_submit_token(self.client, handle)?;
        let base = self.va(CHANNEL_RANGE)?;
        self.uvm.register_channel(
            self.uuid,
            self.ctl.fd(),
            self.client,
            handle,
            base,
            CHANNEL_RANGE,
        )?;
        Ok(Chan {
            handle,
            notifier,
            engine_class,
            engine,
            token,
            ring_off,
            userd_off,
            uvm_base: base,
        })
    }

    /// Steps 14-19: signal page, TSG, GPFIFO area, ctxshare, compute and DMA channels with their
    /// engine objects, tokens and UVM registration, GPFIFO_SCHEDULE, command and kernarg rings,
    /// GR info.
    pub(crate) fn queues(&self) -> Result<Queues> {
        let signals = self.alloc(0x1000, false, true)?;
        let mut tp = NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS {
            engineType: NV2080_ENGINE_TYPE_GRAPHICS,
            ..Default::default()
        };
        let tsg =
            self.ctl
                .rm_alloc_with(self.client, self.device, 0, KEPLER_CHANNEL_GROUP_A, &mut tp)?;
        let gpfifo = self.alloc(2 << 20, true, true)?;
        let mut cp = NV_CTXSHARE_ALLOCATION_PARAMETERS {
            hVASpace: self.vaspace,
            flags: NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC,
            subctxId: 0,
        };
        let ctxshare =
            self.ctl
                .rm_alloc_with(self.client, tsg, 0, FERMI_CONTEXT_SHARE_A, &mut cp)?;
        let compute_class = pick(
            &self.classes,
            &[HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B],
        )?;
        let copy_class = pick(&self.classes, &[HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B])?;
        let compute = self.channel((&gpfifo, tsg, ctxshare), 0, compute_class)?;
        let dma = self.channel((&gpfifo, tsg, ctxshare), 1 << 20, copy_class)?;
        self.ctl.gpfifo_schedule(self.client, tsg, true)?;
        let cmdq = self.alloc(2 << 20, true, true)?;
        let kernargs = self.alloc(2 << 20, true, true)?;
        let gr = self
            .ctl
            .gr_get_info(self.client, self.subdevice, &GR_INDICES)?;
        Ok(Queues {
            signals,
            tsg,
            ctxshare,
            gpfifo,
            compute,
            dma,
            cmdq,
            kernargs,
            gr,
        })
    }

    /// Write one GP entry pointing at `pushbuf_va` (`dwords` long) into `ch`'s ring at `put`,
    /// publish GPPut = put + 1 in USERD, and ring the doorbell with the channel's token.
    pub(crate) fn submit(
        &self,
        q: &Queues,
        ch: &Chan,
        put: u32,
        pushbuf_va: u64,
        dwords: u64,
    ) -> Result<()> {
        let ring = q
            .gpfifo
            .cpu
            .as_ref()
            .ok_or_else(|| crate::Error::Internal("GPFIFO area not CPU-mapped".into()))?;
        let entry = (pushbuf_va & !3) | (1 << 41) | (dwords << 42);
        ring.write_u64((ch.ring_off + u64::from(put % ENTRIES) * 8) as usize, entry)?;
        ring.store_u32(
            (ch.userd_off + 0x8C) as usize,
            (put + 1) % ENTRIES,
            std::sync::atomic::Ordering::Release,
        )?;
        self.drv.write_doorbell(
            self.doorbell.addr() + u64::from(NVC361_NOTIFY_CHANNEL_PENDING),
            u64::from(ch.token),
        )
    }
}

/// Expect an `Error::NvStatus` with `status` whose message contains every one of `needles`.
#[track_caller]
pub(crate) fn fails_nv<T: std::fmt::Debug>(r: Result<T>, status: u32, needles: &[&str]) {
    match r {
        Err(e) if e.nv_status() == Some(status) => {
            for n in needles {
                assert!(
                    e.message().contains(n),
                    "error {:?} lacks {n:?}",
                    e.message()
                );
            }
        }
        other => panic!("expected {}, got {other:?}", nv_status_str(status)),
    }
}

/// Expect an `Error::Errno` with `errno` whose message contains `needle`.
#[track_caller]
pub(crate) fn fails_errno<T: std::fmt::Debug>(r: Result<T>, errno: i32, needle: &str) {
    match r {
        Err(e) if e.errno() == Some(errno) => {
            assert!(
                e.message().contains(needle),
                "error {:?} lacks {needle:?}",
                e.message()
            );
        }
        other => panic!("expected errno {errno} ({needle}), got {other:?}"),
    }
}
