//! RM rejections: each refused with the real driver's errno or status, and a message naming the
//! call, the class or control by name, the status by name and (from the emulator) the cause.

use super::*;
use crate::driver::api::{Driver, MapFlags, OpenFlags, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::nv::*;
use crate::sys::nv::common::*;

#[test]
fn schedule_with_the_570_layout_against_580_is_invalid_param_struct() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let mut old = DriverFamily::V570.gpfifo_schedule_params(true, false);
    fails_nv(
        nv.ctl
            .rm_control_raw(nv.client, q.tsg, NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, &mut old),
        NV_ERR_INVALID_PARAM_STRUCT,
        &[
            "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE (0xa06c0101)",
            "NV_ERR_INVALID_PARAM_STRUCT (0x3a)",
            "paramsSize 2 but driver 580.142 expects 3",
        ],
    );
    // And the 580 layout against a 570 driver.
    let (drv, _emu) = emu_nv("hopper", "570.86.16");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let mut new = DriverFamily::V580.gpfifo_schedule_params(true, false);
    fails_nv(
        nv.ctl
            .rm_control_raw(nv.client, q.tsg, NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, &mut new),
        NV_ERR_INVALID_PARAM_STRUCT,
        &["expects 2"],
    );
}

#[test]
fn wrong_escape_sizes_are_einval() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let ctl = NvCtl::open(drv.clone()).unwrap();
    let mut big = [0u8; 40];
    fails_errno(
        drv.ioctl(ctl.fd(), escape_request(NV_ESC_RM_ALLOC, 40), &mut big),
        libc::EINVAL,
        "struct size mismatch",
    );
    // The 570 NVOS46 (56 bytes) against a 580 driver.
    let mut old = [0u8; 56];
    fails_errno(
        drv.ioctl(ctl.fd(), esc::RM_MAP_MEMORY_DMA_V570.request, &mut old),
        libc::EINVAL,
        "the driver's struct is 64",
    );
    // A buffer that disagrees with the encoded size, a wrong type, a partial CARD_INFO record.
    fails_errno(
        drv.ioctl(ctl.fd(), esc::RM_FREE.request, &mut [0u8; 8]),
        libc::EINVAL,
        "request encodes 16",
    );
    fails_errno(
        drv.ioctl(ctl.fd(), 0xC010_4B29, &mut [0u8; 16]),
        libc::ENOTTY,
        "not NVIDIA's 'F'",
    );
    fails_errno(
        drv.ioctl(
            ctl.fd(),
            escape_request(NV_ESC_CARD_INFO, 100),
            &mut [0u8; 100],
        ),
        libc::EINVAL,
        "struct size mismatch",
    );
    fails_errno(
        drv.ioctl(
            ctl.fd(),
            escape_request(NV_ESC_ATTACH_GPUS_TO_FD, 4),
            &mut [0u8; 4],
        ),
        libc::ENOTTY,
        "not emulated",
    );
    // Control-device-only escapes on a GPU node and GPU-node-only ones on the control fd.
    let gpu = NvGpuFd::open(drv.clone(), 0).unwrap();
    let mut a = NVOS21_PARAMETERS::default();
    fails_errno(
        crate::driver::api::ioctl_struct(drv.as_ref(), gpu.fd(), &esc::RM_ALLOC, &mut a),
        libc::EINVAL,
        "control-device-only",
    );
    let mut r = nv_ioctl_register_fd_t { ctl_fd: ctl.fd().0 };
    fails_errno(
        crate::driver::api::ioctl_struct(drv.as_ref(), ctl.fd(), &esc::REGISTER_FD, &mut r),
        libc::EINVAL,
        "GPU-node-only",
    );
    fails_errno(
        gpu.register_fd(gpu.fd()),
        libc::EINVAL,
        "not an open /dev/nvidiactl",
    );
    gpu.register_fd(ctl.fd()).unwrap();
    fails_errno(
        gpu.register_fd(ctl.fd()),
        libc::EINVAL,
        "already registered",
    );
    fails_errno(
        drv.open("/dev/nvidia7", OpenFlags::RDWR),
        libc::ENOENT,
        "no such NVIDIA device node",
    );
    fails_errno(
        drv.open("/dev/nvidiactl", OpenFlags::READ),
        libc::EACCES,
        "O_RDWR",
    );
}

#[test]
fn unknown_controls_and_controls_on_the_wrong_object_are_not_supported() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let mut p = [0u8; 8];
    fails_nv(
        nv.ctl
            .rm_control_raw(nv.client, nv.subdevice, 0x2080_DEAD, &mut p),
        NV_ERR_NOT_SUPPORTED,
        &["control 0x2080dead", "NV_ERR_NOT_SUPPORTED (0x56)"],
    );
    let mut gr = NV2080_CTRL_GR_GET_INFO_PARAMS::default();
    fails_nv(
        nv.ctl
            .rm_control(nv.client, nv.device, NV2080_CTRL_CMD_GR_GET_INFO, &mut gr),
        NV_ERR_NOT_SUPPORTED,
        &["is not a control of NV01_DEVICE_0"],
    );
    fails_nv(
        nv.ctl.gr_get_info(nv.client, nv.subdevice, &[0x3F]),
        NV_ERR_INVALID_ARGUMENT,
        &["GR info index 0x3f is not emulated"],
    );
    fails_nv(
        nv.ctl.get_id_info_v2(nv.client, 0xDEAD),
        NV_ERR_INVALID_ARGUMENT,
        &["gpuId 0xdead names no GPU"],
    );
    fails_nv(
        nv.ctl.get_gid_info(0x1234, nv.subdevice),
        NV_ERR_INVALID_CLIENT,
        &["NV2080_CTRL_CMD_GPU_GET_GID_INFO"],
    );
    fails_nv(
        nv.ctl.get_work_submit_token(nv.client, 0xCAF0_FFFF),
        NV_ERR_INVALID_OBJECT_HANDLE,
        &["is not an object"],
    );
    fails_nv(
        nv.ctl
            .rm_control_raw(nv.client, nv.subdevice, NV2080_CTRL_CMD_PERF_BOOST, &mut []),
        NV_ERR_INVALID_PARAM_STRUCT,
        &["paramsSize 0"],
    );
    // A short class-list buffer.
    let mut list = [0u32; 2];
    let mut cl = NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS {
        numClasses: 2,
        classList: list.as_mut_ptr() as u64,
        ..Default::default()
    };
    fails_nv(
        nv.ctl.rm_control(
            nv.client,
            nv.device,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
            &mut cl,
        ),
        NV_ERR_INVALID_ARGUMENT,
        &["holds 2 entries"],
    );
}

#[test]
fn classes_the_chip_lacks_are_invalid_class() {
    // HOPPER_COMPUTE_A on an Ada chip.
    let (drv, _emu) = emu_nv("ada", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, q.compute.handle, 0, HOPPER_COMPUTE_A, None),
        NV_ERR_INVALID_CLASS,
        &[
            "hClass=HOPPER_COMPUTE_A (0xcbc0)",
            "NV_ERR_INVALID_CLASS (0x22)",
            "not in the class list of AD102",
        ],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, nv.subdevice, 0, HOPPER_USERMODE_A, None),
        NV_ERR_INVALID_CLASS,
        &["AD102"],
    );
    // ADA_COMPUTE_A (and AMPERE_DMA_COPY_B) on GH100.
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, q.compute.handle, 0, ADA_COMPUTE_A, None),
        NV_ERR_INVALID_CLASS,
        &["ADA_COMPUTE_A (0xc9c0) is not in the class list of GH100"],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, q.dma.handle, 0, AMPERE_DMA_COPY_B, None),
        NV_ERR_INVALID_CLASS,
        &["GH100"],
    );
    fails_nv(
        nv.ctl.rm_alloc(nv.client, nv.device, 0, 0xCBA0, None),
        NV_ERR_INVALID_CLASS,
        &["RM knows no class 0xcba0"],
    );
}

#[test]
fn wrong_parents_are_invalid_object_parent() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let mut sp = NV2080_ALLOC_PARAMETERS::default();
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.client, 0, NV20_SUBDEVICE_0, &mut sp),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["must be allocated under an NV01_DEVICE_0, not under the client"],
    );
    let ch = ChannelParams {
        h_object_buffer: q.gpfifo.handle,
        gp_fifo_entries: ENTRIES,
        h_userd_memory: q.gpfifo.handle,
        h_context_share: q.ctxshare,
        ..Default::default()
    };
    fails_nv(
        nv.ctl
            .alloc_channel(nv.client, nv.device, HOPPER_CHANNEL_GPFIFO_A, &ch),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["KEPLER_CHANNEL_GROUP_A (TSG)", "not under NV01_DEVICE_0"],
    );
    fails_nv(
        nv.ctl.rm_alloc(nv.client, q.tsg, 0, HOPPER_COMPUTE_A, None),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["a channel (GPFIFO class)"],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, nv.device, 0, HOPPER_USERMODE_A, None),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["NV20_SUBDEVICE_0"],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, 0xCAF0_7777, 0, HOPPER_USERMODE_A, None),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["is not an object of client"],
    );
    let mut cp = NV_CTXSHARE_ALLOCATION_PARAMETERS {
        hVASpace: nv.vaspace,
        ..Default::default()
    };
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.device, 0, FERMI_CONTEXT_SHARE_A, &mut cp),
        NV_ERR_INVALID_OBJECT_PARENT,
        &["FERMI_CONTEXT_SHARE_A"],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(0xC1D0_9999, nv.device, 0, NV20_SUBDEVICE_0, None),
        NV_ERR_INVALID_CLIENT,
        &["is not a client"],
    );
}

#[test]
fn bad_allocation_parameters() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let mut dp = NV0080_ALLOC_PARAMETERS {
        deviceId: 3,
        ..Default::default()
    };
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.client, 0, NV01_DEVICE_0, &mut dp),
        NV_ERR_INVALID_ARGUMENT,
        &["deviceId 3 but 1 GPU(s) exist"],
    );
    let mut mp = nv.mem_params(0x1000, true);
    fails_nv(
        nv.ctl.rm_alloc_with(
            nv.client,
            nv.device,
            nv.subdevice,
            NV01_MEMORY_LOCAL_USER,
            &mut mp,
        ),
        NV_ERR_INSERT_DUPLICATE_NAME,
        &["already in use"],
    );
    let mut mp = nv.mem_params(0x1000, true);
    mp.size = 0;
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, &mut mp),
        NV_ERR_INVALID_ARGUMENT,
        &["size is 0"],
    );
    // RM reads its own 128 bytes whatever we pass: past our 8 it finds the zero padding (size 0),
    // not heap garbage.
    let mut short = [0xFFu8; 8];
    fails_nv(
        nv.ctl.rm_alloc(
            nv.client,
            nv.device,
            0,
            NV01_MEMORY_LOCAL_USER,
            Some(&mut short),
        ),
        NV_ERR_INVALID_ARGUMENT,
        &["paramsSize=8", "size is 0"],
    );
    let mut mp = nv.mem_params(0x1000, true);
    mp.size = 200 << 30;
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, &mut mp),
        NV_ERR_NO_MEMORY,
        &["out of VRAM"],
    );
    fails_nv(
        nv.ctl
            .rm_alloc(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, None),
        NV_ERR_INVALID_ARGUMENT,
        &["pAllocParms is NULL"],
    );
    let mut tp = NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS {
        engineType: 0x13,
        ..Default::default()
    };
    fails_nv(
        nv.ctl
            .rm_alloc_with(nv.client, nv.device, 0, KEPLER_CHANNEL_GROUP_A, &mut tp),
        NV_ERR_INVALID_ARGUMENT,
        &["engineType 19"],
    );
}

#[test]
fn bad_channel_and_vaspace_parameters() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let good = ChannelParams {
        h_object_error: q.compute.notifier.handle,
        h_object_buffer: q.gpfifo.handle,
        gp_fifo_offset: q.gpfifo.va,
        gp_fifo_entries: ENTRIES,
        h_context_share: q.ctxshare,
        h_userd_memory: q.gpfifo.handle,
        userd_offset: 0x1_0000,
        ..Default::default()
    };
    for (bad, status, why) in [
        (
            ChannelParams {
                gp_fifo_entries: 1000,
                ..good
            },
            NV_ERR_INVALID_ARGUMENT,
            "gpFifoEntries 1000",
        ),
        (
            ChannelParams {
                userd_offset: 0x100,
                ..good
            },
            NV_ERR_INVALID_OFFSET,
            "userdOffset[0] 0x100",
        ),
        (
            ChannelParams {
                userd_offset: 2 << 20,
                ..good
            },
            NV_ERR_INVALID_OFFSET,
            "must lie inside memory",
        ),
        (
            ChannelParams {
                h_context_share: 0,
                ..good
            },
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hContextShare 0x0",
        ),
        (
            ChannelParams {
                h_object_buffer: nv.device,
                ..good
            },
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hObjectBuffer",
        ),
    ] {
        fails_nv(
            nv.ctl
                .alloc_channel(nv.client, q.tsg, HOPPER_CHANNEL_GPFIFO_A, &bad),
            status,
            &[why],
        );
    }
    let external_only = VaSpaceParams {
        index: 3,
        ..Default::default()
    };
    fails_nv(
        nv.ctl.alloc_vaspace(nv.client, nv.device, &external_only),
        NV_ERR_INVALID_ARGUMENT,
        &["vaspace index 3"],
    );
    // Scheduling a TSG with no channel.
    let mut tp = NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS {
        engineType: NV2080_ENGINE_TYPE_GRAPHICS,
        ..Default::default()
    };
    let empty = nv
        .ctl
        .rm_alloc_with(nv.client, nv.device, 0, KEPLER_CHANNEL_GROUP_A, &mut tp)
        .unwrap();
    fails_nv(
        nv.ctl.gpfifo_schedule(nv.client, empty, true),
        NV_ERR_INVALID_STATE,
        &["has no channel"],
    );
}

#[test]
fn cpu_mapping_rules() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let mut mp = nv.mem_params(2 << 20, true);
    let vram = nv
        .ctl
        .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, &mut mp)
        .unwrap();
    // VRAM goes through a registered GPU node, not the control fd.
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, vram, 0, 2 << 20, 0, nv.ctl.fd()),
        NV_ERR_INVALID_ARGUMENT,
        &["not the control fd"],
    );
    let unreg = NvGpuFd::open(drv.clone(), 0).unwrap();
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, vram, 0, 2 << 20, 0, unreg.fd()),
        NV_ERR_INVALID_ARGUMENT,
        &["NV_ESC_REGISTER_FD first"],
    );
    unreg.register_fd(nv.ctl.fd()).unwrap();
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, vram, 0x1000, 2 << 20, 0, unreg.fd()),
        NV_ERR_INVALID_LIMIT,
        &["outside the object"],
    );
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, nv.subdevice, 0, 0x1000, 0, unreg.fd()),
        NV_ERR_INVALID_OBJECT_HANDLE,
        &["cannot be CPU-mapped"],
    );
    // mmap needs a context, of exactly its size; one context per fd for the fd's whole life.
    fails_errno(
        unreg.mmap(None, 0x1000, Prot::RW),
        libc::EINVAL,
        "no mapping context",
    );
    let cookie = nv
        .ctl
        .rm_map_memory(nv.client, nv.device, vram, 0, 2 << 20, 0, unreg.fd())
        .unwrap();
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, vram, 0, 0x1000, 0, unreg.fd()),
        NV_ERR_STATE_IN_USE,
        &["already holds a mapping context"],
    );
    fails_errno(
        unreg.mmap(None, 0x1000, Prot::RW),
        libc::EINVAL,
        "the context is 0x200000 bytes",
    );
    fails_errno(
        drv.mmap(
            None,
            2 << 20,
            Prot::RW,
            MapFlags::PRIVATE,
            Some(unreg.fd()),
            0,
        ),
        libc::EINVAL,
        "MAP_SHARED",
    );
    let m = Mapping::map(
        &drv,
        None,
        2 << 20,
        Prot::RW,
        MapFlags::SHARED,
        Some(unreg.fd()),
        0,
    )
    .unwrap();
    m.write_u32(0, 1).unwrap();
    // The context outlives the mmap (nvidia_mmap_helper only reads it): the fd maps again, and
    // still refuses a second context (nv-usermap.c: `valid` is cleared only when the fd closes).
    let again = unreg.mmap(None, 2 << 20, Prot::RW).unwrap();
    assert_ne!(again, m.addr());
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, vram, 0, 2 << 20, 0, unreg.fd()),
        NV_ERR_STATE_IN_USE,
        &["for its whole life"],
    );
    nv.ctl
        .rm_unmap_memory(nv.client, nv.device, vram, cookie, 0)
        .unwrap();
    fails_nv(
        nv.ctl
            .rm_unmap_memory(nv.client, nv.device, vram, cookie, 0),
        NV_ERR_INVALID_ARGUMENT,
        &["no RM_MAP_MEMORY"],
    );
}

#[test]
fn os_descriptors_wrap_shared_memory_mapped_through_the_driver() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    // OS descriptors must wrap memory the process mapped (shared, through the driver).
    let va = nv.va(0x2000).unwrap();
    fails_nv(
        nv.gpu_fd.rm_alloc_memory(
            nv.client,
            nv.device,
            0x1000,
            NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            0,
            va,
            0x1FFF,
        ),
        NV_ERR_INVALID_ADDRESS,
        &["NV_ESC_RM_ALLOC_MEMORY", "MAP_SHARED"],
    );
    fails_nv(
        nv.gpu_fd.rm_alloc_memory(
            nv.client,
            nv.device,
            0x1000,
            NV01_MEMORY_SYSTEM,
            0,
            va,
            0x1FFF,
        ),
        NV_ERR_INVALID_CLASS,
        &["only OS descriptors"],
    );
}

#[test]
fn diagnostics_are_taken_once_and_real_driver_has_none() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let ctl = NvCtl::open(drv.clone()).unwrap();
    let e = ctl.rm_free(0x1234, 0, 0x1234).unwrap_err();
    assert_eq!(e.message(), "NV_ESC_RM_FREE(hRoot=0x1234 hObjectParent=0x0 hObjectOld=0x1234) failed: NV_ERR_INVALID_CLIENT (0x23): hRoot 0x1234 is not a client");
    assert_eq!(drv.take_diagnostic(), None);
    assert_eq!(crate::driver::RealDriver::new().take_diagnostic(), None);
}

#[test]
fn system_memory_needs_a_fresh_control_fd_per_mapping() {
    // kernel-open/nvidia/nv-usermap.c: one mapping context per fd for its life, so a second
    // RM_MAP_MEMORY on the client's control fd fails with NV_ERR_STATE_IN_USE (0x63) even after
    // the first was mmapped; each mapping takes a fresh /dev/nvidiactl, closed after the mmap.
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let sys = |size| {
        let mut p = nv.mem_params(size, false);
        nv.ctl
            .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_SYSTEM, &mut p)
            .unwrap()
    };
    let (a, b) = (sys(0x1000), sys(0x1000));
    nv.ctl
        .rm_map_memory(nv.client, nv.device, a, 0, 0x1000, 0, nv.ctl.fd())
        .unwrap();
    let m = Mapping::map(
        &drv,
        None,
        0x1000,
        Prot::RW,
        MapFlags::SHARED,
        Some(nv.ctl.fd()),
        0,
    )
    .unwrap();
    fails_nv(
        nv.ctl
            .rm_map_memory(nv.client, nv.device, b, 0, 0x1000, 0, nv.ctl.fd()),
        NV_ERR_STATE_IN_USE,
        &["already holds a mapping context"],
    );
    assert_eq!(NV_ERR_STATE_IN_USE, 0x63);
    let fresh = NvCtlMapFd::open(drv.clone()).unwrap();
    nv.ctl
        .rm_map_memory(nv.client, nv.device, b, 0, 0x1000, 0, fresh.fd())
        .unwrap();
    let mb = Mapping::map(
        &drv,
        None,
        0x1000,
        Prot::RW,
        MapFlags::SHARED,
        Some(fresh.fd()),
        0,
    )
    .unwrap();
    drop(fresh);
    // Both mappings outlive what they were made through, and are different memory.
    m.write_u32(0, 7).unwrap();
    mb.write_u32(0, 9).unwrap();
    assert_eq!((m.read_u32(0).unwrap(), mb.read_u32(0).unwrap()), (7, 9));
}
