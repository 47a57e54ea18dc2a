//! The per-GPU steps of the NV bring-up (steps 6-19; the order of tinygrad's `NVDevice.__init__`),
//! one named function each, run through [`step`] so a failure names its step: the GPU node and
//! REGISTER_FD, GET_ID_INFO_V2, device + subdevice, the class list and the arch, the usermode page
//! (doorbell), the optional PERF_BOOST, the externally owned vaspace, the UUID and the UVM
//! registrations, the TSG with its ctxshare and the compute and DMA channels (error notifiers,
//! engine objects, work submit tokens, UVM channel registration, command rings), GPFIFO_SCHEDULE,
//! and GR info.
//!
//! Not guaranteed: nothing here submits work; the channel setup pushbuffers and the first
//! signal round trip are [`super::device`]'s.

use std::sync::Arc;

use super::channel::{userd_offset, NvChannel, CMD_RING_BYTES, GPFIFO_ENTRIES, GPFIFO_SLOT};
use super::gpfifo::{USERD_GP_GET, USERD_GP_PUT, USERD_SIZE};
use super::memory::{alloc_memory, MemKind, NvBuffer, NvRmDevice};
use super::process::{lock, step, NvProcess};
use crate::driver::nv::{ChannelParams, NvGpuFd, VaSpaceParams};
use crate::driver::{MapFlags, Mapping, Prot};
use crate::hw::nv::arch::{select_classes, NvClasses};
use crate::sys::nv::common::*;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// UVM channel range per channel (tinygrad reserves 64 MiB of low VA).
pub const CHANNEL_VA_RANGE: u64 = 64 << 20;

/// GR info the device uses (indices from ctrl0080gr.h, NV0080_CTRL_GR_INFO_INDEX_*).
///
/// The per-TPC SM count is LITTER_NUM_SM_PER_TPC (0x20), as tinygrad master asks. It is not
/// SHADER_PIPE_SUB_COUNT (0x09): NVIDIA's own src/nvidia/src/kernel/rmapi/nv_gpu_ops.c reads
/// 0x09 as the TPC count (`pGpuInfo->tpcCount`, which UVM prints as "tpcs"), whatever
/// ctrl2080gr.h's "SMs (per TPC)" comment for Tesla says. 0x07 and 0x09 are kept only to be
/// printed (their meaning on GH100 is for the first run to settle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrInfo {
    /// SM_VERSION (0x0C): 0x900 = sm_90.
    pub sm_version: u32,
    /// SHADER_PIPE_COUNT (0x07).
    pub shader_pipe_count: u32,
    /// SHADER_PIPE_SUB_COUNT (0x09): the TPC count per nv_gpu_ops.c.
    pub shader_pipe_sub_count: u32,
    /// MAX_WARPS_PER_SM (0x0D).
    pub max_warps_per_sm: u32,
    /// LITTER_NUM_GPCS (0x14): the chip's design maximum.
    pub litter_gpcs: u32,
    /// LITTER_NUM_TPC_PER_GPC (0x17): design maximum.
    pub litter_tpc_per_gpc: u32,
    /// LITTER_NUM_SM_PER_TPC (0x20).
    pub litter_sm_per_tpc: u32,
}

/// The GR info indices [`gr_info`] asks, in [`GrInfo`]'s field order (0x0C, 0x07, 0x09, 0x0D,
/// 0x14, 0x17, 0x20).
pub const GR_INFO_INDICES: [u32; 7] = [
    NV2080_CTRL_GR_INFO_INDEX_SM_VERSION,
    NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT,
    NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT,
    NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
    NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
];

impl GrInfo {
    /// `sm_90` -> 90.
    pub fn sm(&self) -> u32 {
        let major = (self.sm_version >> 8) & 0xFF;
        let minor = self.sm_version & 0xFF;
        let minor = if minor > 0xF { minor >> 4 } else { minor };
        major * 10 + minor
    }

    /// SMs per TPC (LITTER_NUM_SM_PER_TPC, at least 1).
    pub fn sms_per_tpc(&self) -> u32 {
        self.litter_sm_per_tpc.max(1)
    }

    /// TPC slots local memory is sized for: the design maximum LITTER_NUM_GPCS x
    /// LITTER_NUM_TPC_PER_GPC (TPC ids can be sparse after floor sweeping; tinygrad sizes the
    /// same way), or SHADER_PIPE_SUB_COUNT (the TPC count) if the litter values are missing.
    pub fn tpc_slots(&self) -> u32 {
        let design = self.litter_gpcs.saturating_mul(self.litter_tpc_per_gpc);
        if design > 0 {
            design
        } else {
            self.shader_pipe_sub_count.max(1)
        }
    }

    /// `0x07=.. 0x09=.. 0x0D=.. 0x14=.. 0x17=.. 0x20=..` (with the SM version).
    pub fn describe(&self) -> String {
        format!(
            "sm_{} ({:#x}); GR info 0x07 SHADER_PIPE_COUNT={} 0x09 SHADER_PIPE_SUB_COUNT={} 0x0D MAX_WARPS_PER_SM={} 0x14 LITTER_NUM_GPCS={} 0x17 LITTER_NUM_TPC_PER_GPC={} 0x20 LITTER_NUM_SM_PER_TPC={}",
            self.sm(),
            self.sm_version,
            self.shader_pipe_count,
            self.shader_pipe_sub_count,
            self.max_warps_per_sm,
            self.litter_gpcs,
            self.litter_tpc_per_gpc,
            self.litter_sm_per_tpc
        )
    }
}

/// Steps 6-8: the GPU node (kept open), REGISTER_FD, GET_ID_INFO_V2, device and subdevice.
pub fn open_rm_device(proc: &Arc<NvProcess>, index: usize) -> Result<NvRmDevice> {
    let Some(card) = proc.cards().get(index).copied() else {
        return Err(Error::Device(format!(
            "NV:{index}: CARD_INFO lists {} GPU(s)",
            proc.cards().len()
        )));
    };
    let gpu_fd = step(
        "open /dev/nvidiaN + REGISTER_FD",
        |_| format!("/dev/nvidia{}", card.minor_number),
        NvGpuFd::open(proc.drv.clone(), card.minor_number).and_then(|fd| {
            fd.register_fd(proc.ctl.fd())?;
            Ok(fd)
        }),
    )?;
    let (c, ctl) = (proc.client, &proc.ctl);
    let info = step(
        "GET_ID_INFO_V2",
        |i: &NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS| format!("deviceInstance {}", i.deviceInstance),
        ctl.get_id_info_v2(c, card.gpu_id),
    )?;
    let (device, subdevice) = step(
        "device + subdevice",
        |(d, s): &(u32, u32)| format!("hDevice {d:#x} hSubdevice {s:#x}"),
        (|| {
            let mut dp = NV0080_ALLOC_PARAMETERS {
                deviceId: info.deviceInstance,
                hClientShare: c,
                vaMode: NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES,
                ..Default::default()
            };
            let device = ctl.rm_alloc_with(c, c, 0, NV01_DEVICE_0, &mut dp)?;
            let mut sp = NV2080_ALLOC_PARAMETERS { subDeviceId: 0 };
            let sub = ctl.rm_alloc_with(c, device, 0, NV20_SUBDEVICE_0, &mut sp)?;
            Ok((device, sub))
        })(),
    )?;
    Ok(NvRmDevice {
        proc: proc.clone(),
        device,
        subdevice,
        gpu_fd,
        minor: card.minor_number,
        uuid: [0; 16],
    })
}

/// Step 9: GET_CLASSLIST and the arch.
pub fn classes(rm: &NvRmDevice) -> Result<NvClasses> {
    let p = &rm.proc;
    step(
        "class list -> arch",
        |c: &NvClasses| {
            format!(
                "{} {:#x}, copy {:#x}, channel {:#x}, usermode {:#x}, QMD {}",
                c.arch.compute_class_name,
                c.arch.compute_class,
                c.copy.class,
                c.channel.class,
                c.usermode,
                c.arch.qmd_version.name()
            )
        },
        p.ctl
            .get_classlist(p.client, rm.device)
            .and_then(|l| select_classes(&l)),
    )
}

/// Step 10: the usermode object mapped (64 KiB, write-only) through a fresh GPU node.
pub fn map_usermode(rm: &NvRmDevice, classes: &NvClasses) -> Result<(u32, Mapping)> {
    let p = &rm.proc;
    step(
        "usermode + doorbell page",
        |(_, m): &(u32, Mapping)| format!("class {:#x} at {:#x}", classes.usermode, m.addr()),
        (|| {
            let um = p
                .ctl
                .rm_alloc(p.client, rm.subdevice, 0, classes.usermode, None)?;
            let fd = NvGpuFd::open(p.drv.clone(), rm.minor)?;
            fd.register_fd(p.ctl.fd())?;
            let size = u64::from(NV_USERMODE_MAP_SIZE);
            let access = NVOS33_FLAGS_ACCESS_WRITE_ONLY;
            p.ctl
                .rm_map_memory(p.client, rm.device, um, 0, size, access, fd.fd())?;
            let m = Mapping::map(
                &p.drv,
                None,
                size as usize,
                Prot::RW,
                MapFlags::SHARED,
                Some(fd.fd()),
                0,
            )?;
            Ok((um, m))
        })(),
    )
}

/// Steps 11-13: optional PERF_BOOST, the externally owned vaspace, the UUID, UVM registration.
pub fn vaspace_and_uvm(rm: &mut NvRmDevice) -> Result<u32> {
    let p = rm.proc.clone();
    let boost = (NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES << NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_SHIFT)
        | (NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH
            << NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_SHIFT)
        | NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX;
    let r = p.ctl.perf_boost(
        p.client,
        rm.subdevice,
        boost,
        NV2080_CTRL_PERF_BOOST_DURATION_INFINITE,
    );
    let _ = step("PERF_BOOST (optional)", |_| String::new(), r);
    let params = VaSpaceParams {
        va_base: 0x1000,
        va_size: 0x1_FFFF_FB00_0000,
        flags: NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED
            | NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING,
        ..Default::default()
    };
    let vaspace = step(
        "FERMI_VASPACE_A",
        |h| format!("hVASpace {h:#x}"),
        p.ctl.alloc_vaspace(p.client, rm.device, &params),
    )?;
    rm.uuid = step(
        "GET_GID_INFO -> UUID",
        |u: &[u8; 16]| u.iter().map(|b| format!("{b:02x}")).collect(),
        p.ctl.get_gid_info(p.client, rm.subdevice),
    )?;
    step(
        "UVM_REGISTER_GPU + GPU_VASPACE",
        |_| String::new(),
        p.uvm.register_gpu(rm.uuid, -1, 0, 0).and_then(|_| {
            p.uvm
                .register_gpu_vaspace(rm.uuid, p.ctl.fd(), p.client, vaspace)
        }),
    )?;
    // Peer access with the process's other GPUs (transfers map one GPU's VRAM on the other).
    let others: Vec<[u8; 16]> = lock(&p.gpus).clone();
    for o in others {
        let r = p.uvm.enable_peer_access(o, rm.uuid);
        let _ = step("UVM_ENABLE_PEER_ACCESS (optional)", |_| String::new(), r);
    }
    lock(&p.gpus).push(rm.uuid);
    Ok(vaspace)
}

/// Step 19: GR info.
pub fn gr_info(rm: &NvRmDevice) -> Result<GrInfo> {
    let p = &rm.proc;
    step(
        "GR_GET_INFO",
        GrInfo::describe,
        p.ctl
            .gr_get_info(p.client, rm.subdevice, &GR_INFO_INDICES)
            .map(|v| GrInfo {
                sm_version: v[0],
                shader_pipe_count: v[1],
                shader_pipe_sub_count: v[2],
                max_warps_per_sm: v[3].max(1),
                litter_gpcs: v[4],
                litter_tpc_per_gpc: v[5],
                litter_sm_per_tpc: v[6],
            }),
    )
}

/// A channel registered with UVM: its handle and the VA range UVM carves its buffers from.
#[derive(Clone, Copy, Debug)]
struct UvmChannel {
    handle: u32,
    va: u64,
}

/// A TSG (freed, with its ctxshare, channels and engine objects, when dropped) and the UVM
/// registrations of its channels.
pub struct Tsg {
    proc: Arc<NvProcess>,
    uuid: [u8; 16],
    pub handle: u32,
    pub ctxshare: u32,
    uvm_channels: Vec<UvmChannel>,
}

impl Drop for Tsg {
    fn drop(&mut self) {
        let p = &self.proc;
        // UVM_UNREGISTER_CHANNEL first: UVM stops each channel and destroys the ranges it carved
        // in the channel's VA (uvm_user_channel.c uvm_unregister_channel); UVM_FREE would refuse
        // them (uvm_va_range.c uvm_free: NV_ERR_INVALID_ADDRESS for channel ranges). Where the
        // unregister fails the VA stays reserved rather than risk an overlap.
        for c in &self.uvm_channels {
            match p.uvm.unregister_channel(self.uuid, p.client, c.handle) {
                Ok(()) => p.free_va(c.va, CHANNEL_VA_RANGE, true),
                Err(e) => p.defer_error(format!(
                    "unregistering channel {:#x} from UVM (its {:#x}-byte VA range at {:#x} stays reserved): {e}",
                    c.handle, CHANNEL_VA_RANGE, c.va
                )),
            }
        }
        if let Err(e) = p.ctl.rm_free(p.client, p.client, self.handle) {
            p.defer_error(format!("freeing TSG {:#x}: {e}", self.handle));
        }
    }
}

/// The TSG and both channels (steps 15-17). The TSG is freed first (fields drop in order), then
/// the memory its channels used.
pub struct Channels {
    pub tsg: Tsg,
    pub compute: NvChannel,
    pub dma: NvChannel,
    pub gpfifo: NvBuffer,
}

impl Channels {
    /// Both channels' (GPGet, GPPut) in USERD now (compute, DMA); an error when one is outside
    /// the ring (a submit would refuse it).
    pub fn userd_now(&self) -> Result<[(u32, u32); 2]> {
        use crate::hcq::HcqBuffer;
        let Some(view) = self.gpfifo.cpu() else {
            return Err(Error::Internal("the GPFIFO area is not CPU-mapped".into()));
        };
        let read = |ch: &NvChannel| -> Result<(u32, u32)> {
            let at = |off: u64| (ch.userd_off() + off) as usize;
            let get = view.load_u32(at(USERD_GP_GET), Ordering::Acquire)?;
            let put = view.load_u32(at(USERD_GP_PUT), Ordering::Acquire)?;
            if get >= GPFIFO_ENTRIES || put >= GPFIFO_ENTRIES {
                return Err(Error::Device(format!(
                    "{} channel: USERD GPGet {get:#x} / GPPut {put:#x} outside the {GPFIFO_ENTRIES}-entry ring",
                    ch.name
                )));
            }
            Ok((get, put))
        };
        Ok([read(&self.compute)?, read(&self.dma)?])
    }
}

/// One channel in `tsg`: error notifier, channel object, engine object, token, UVM registration,
/// command ring.
fn channel(
    rm: &NvRmDevice,
    classes: &NvClasses,
    (gpfifo, tsg, ctxshare): (&NvBuffer, u32, u32),
    (name, slot, engine_class): (&'static str, u64, u32),
    uvm_channels: &mut Vec<UvmChannel>,
) -> Result<NvChannel> {
    use crate::hcq::HcqBuffer;
    let p = &rm.proc;
    let notifier = alloc_memory(rm, 0x1000, MemKind::Sysmem, true)?;
    let ring_off = slot * GPFIFO_SLOT;
    let userd_off = userd_offset(ring_off);
    // USERD lives in our VRAM, which kernel RM does not clear on a GSP client (kernel_channel.c:
    // kfifoSetupUserD only for USERD in SYSMEM or under full SR-IOV), and the GPU writes GPGet
    // back only once it runs the channel (uvm_channel.c: "overwritten by HW"): zero it through
    // the BAR1 view before RM allocates the channel, so GPGet/GPPut start at 0.
    let Some(view) = gpfifo.cpu() else {
        return Err(Error::Internal(format!(
            "{name} channel: the GPFIFO area is not CPU-mapped"
        )));
    };
    view.fill(userd_off as usize, USERD_SIZE as usize, 0)?;
    let handle = p.ctl.alloc_channel(
        p.client,
        tsg,
        classes.channel.class,
        &ChannelParams {
            h_object_error: notifier.handle(),
            h_object_buffer: gpfifo.handle(),
            gp_fifo_offset: gpfifo.va() + ring_off,
            gp_fifo_entries: GPFIFO_ENTRIES,
            h_context_share: ctxshare,
            h_userd_memory: gpfifo.handle(),
            userd_offset: userd_off,
            ..Default::default()
        },
    )?;
    p.ctl.rm_alloc(p.client, handle, 0, engine_class, None)?;
    let token = p.ctl.get_work_submit_token(p.client, handle)?;
    let base = p.alloc_va(CHANNEL_VA_RANGE, 2 << 20, true)?;
    if let Err(e) = p.uvm.register_channel(
        rm.uuid,
        p.ctl.fd(),
        p.client,
        handle,
        base,
        CHANNEL_VA_RANGE,
    ) {
        p.free_va(base, CHANNEL_VA_RANGE, true);
        return Err(e);
    }
    uvm_channels.push(UvmChannel { handle, va: base });
    let cmd = alloc_memory(rm, CMD_RING_BYTES, MemKind::Vram, true)?;
    NvChannel::new(name, handle, token, engine_class, notifier, ring_off, cmd)
}

/// Steps 15-17: TSG (GRAPHICS), GPFIFO area, ctxshare, the compute and DMA channels, schedule.
pub fn create_channels(rm: &NvRmDevice, classes: &NvClasses, vaspace: u32) -> Result<Channels> {
    let p = &rm.proc;
    let c = p.client;
    let mut tp = NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS {
        engineType: NV2080_ENGINE_TYPE_GRAPHICS,
        ..Default::default()
    };
    let handle = step(
        "TSG (KEPLER_CHANNEL_GROUP_A)",
        |h| format!("{h:#x}"),
        p.ctl
            .rm_alloc_with(c, rm.device, 0, KEPLER_CHANNEL_GROUP_A, &mut tp),
    )?;
    let mut tsg = Tsg {
        proc: p.clone(),
        uuid: rm.uuid,
        handle,
        ctxshare: 0,
        uvm_channels: Vec::new(),
    };
    let gpfifo = alloc_memory(rm, (2 * GPFIFO_SLOT) as usize, MemKind::Vram, true)?;
    let mut cp = NV_CTXSHARE_ALLOCATION_PARAMETERS {
        hVASpace: vaspace,
        flags: NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC,
        subctxId: 0,
    };
    tsg.ctxshare = step(
        "ctxshare (FERMI_CONTEXT_SHARE_A)",
        |h| format!("{h:#x}"),
        p.ctl
            .rm_alloc_with(c, handle, 0, FERMI_CONTEXT_SHARE_A, &mut cp),
    )?;
    let q = (&gpfifo, handle, tsg.ctxshare);
    let compute = step(
        "compute channel + engine + token",
        |ch: &NvChannel| format!("channel {:#x} token {:#x}", ch.handle, ch.token),
        channel(
            rm,
            classes,
            q,
            ("compute", 0, classes.arch.compute_class),
            &mut tsg.uvm_channels,
        ),
    )?;
    let dma = step(
        "DMA channel + engine + token",
        |ch: &NvChannel| format!("channel {:#x} token {:#x}", ch.handle, ch.token),
        channel(
            rm,
            classes,
            q,
            ("DMA", 1, classes.copy.class),
            &mut tsg.uvm_channels,
        ),
    )?;
    step(
        "GPFIFO_SCHEDULE",
        |_| String::new(),
        p.ctl.gpfifo_schedule(c, handle, true),
    )?;
    Ok(Channels {
        tsg,
        compute,
        dma,
        gpfifo,
    })
}
