//! The ABI pinned to literal values: struct sizes and key offsets per family (a C probe against
//! each tag's headers), escape request numbers (`_IOWR('F', nr, size)` computed by hand), UVM
//! numbers, class ids, and the emulator's independent size table agreeing with the generated
//! structs.

use std::mem::{offset_of, size_of};

use crate::driver::nv::*;
use crate::mockgpu::rm as emu_nv;
use crate::sys::nv::common::*;
use crate::sys::nv::{v570, v580, v590};

// Compile-time pins of the sizes that decide whether RM accepts a call at all.
const _: () = assert!(size_of::<NVOS21_PARAMETERS>() == 32);
const _: () = assert!(size_of::<NVOS54_PARAMETERS>() == 32);
const _: () = assert!(size_of::<v570::NVOS46_PARAMETERS>() == 56);
const _: () = assert!(size_of::<v580::NVOS46_PARAMETERS>() == 64);
const _: () = assert!(size_of::<v570::NV_VASPACE_ALLOCATION_PARAMETERS>() == 48);
const _: () = assert!(size_of::<v580::NV_VASPACE_ALLOCATION_PARAMETERS>() == 56);
const _: () = assert!(size_of::<v570::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>() == 2);
const _: () = assert!(size_of::<v580::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>() == 3);
const _: () = assert!(size_of::<UVM_MAP_EXTERNAL_ALLOCATION_PARAMS>() == 9264);

#[test]
fn family_struct_sizes_match_the_memo() {
    // struct: 570.86.16 / 580.142 [sizes]
    assert_eq!(size_of::<v570::NVOS46_PARAMETERS>(), 56);
    assert_eq!(size_of::<v580::NVOS46_PARAMETERS>(), 64);
    assert_eq!(size_of::<v570::NV_VASPACE_ALLOCATION_PARAMETERS>(), 48);
    assert_eq!(size_of::<v580::NV_VASPACE_ALLOCATION_PARAMETERS>(), 56);
    assert_eq!(size_of::<v570::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>(), 2);
    assert_eq!(size_of::<v580::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>(), 3);
    assert_eq!(
        size_of::<v570::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS>(),
        404
    );
    assert_eq!(
        size_of::<v580::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS>(),
        804
    );
    assert_eq!(size_of::<v570::NV_CHANNEL_ALLOC_PARAMS>(), 368);
    assert_eq!(size_of::<v580::NV_CHANNEL_ALLOC_PARAMS>(), 368);
    assert_eq!(size_of::<v570::NV0000_ALLOC_PARAMETERS>(), 120);
    assert_eq!(size_of::<v580::NV0000_ALLOC_PARAMETERS>(), 120);
    assert_eq!(
        size_of::<v570::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS>(),
        1032
    );
    assert_eq!(
        size_of::<v580::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS>(),
        1032
    );
    // Offsets that moved or that clients set.
    assert_eq!(offset_of!(v570::NVOS46_PARAMETERS, dmaOffset), 40);
    assert_eq!(offset_of!(v580::NVOS46_PARAMETERS, dmaOffset), 48);
    assert_eq!(offset_of!(v580::NVOS46_PARAMETERS, flags2), 36);
    assert_eq!(offset_of!(v580::NVOS46_PARAMETERS, kindOverride), 40);
    assert_eq!(
        offset_of!(v580::NV_VASPACE_ALLOCATION_PARAMETERS, vaBase),
        40
    );
    assert_eq!(
        offset_of!(v580::NV_VASPACE_ALLOCATION_PARAMETERS, pasid),
        48
    );
    assert_eq!(
        offset_of!(v580::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS, bSkipEnable),
        2
    );
    for (ty, off) in [
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, hObjectError), 0),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, hObjectBuffer), 4),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, gpFifoOffset), 8),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, gpFifoEntries), 16),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, hContextShare), 24),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, hVASpace), 28),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, hUserdMemory), 32),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, userdOffset), 64),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, engineType), 128),
        (offset_of!(v580::NV_CHANNEL_ALLOC_PARAMS, tpcConfigID), 360),
        (offset_of!(v570::NV_CHANNEL_ALLOC_PARAMS, engineType), 128),
    ] {
        assert_eq!(ty, off);
    }
}

#[test]
fn common_struct_sizes_match_the_memo() {
    let sizes = [
        (size_of::<NVOS00_PARAMETERS>(), 16),
        (size_of::<NVOS02_PARAMETERS>(), 48),
        (size_of::<nv_ioctl_nvos02_parameters_with_fd>(), 56),
        (size_of::<NVOS21_PARAMETERS>(), 32),
        (size_of::<NVOS64_PARAMETERS>(), 48),
        (size_of::<NVOS54_PARAMETERS>(), 32),
        (size_of::<NVOS33_PARAMETERS>(), 48),
        (size_of::<nv_ioctl_nvos33_parameters_with_fd>(), 56),
        (size_of::<NVOS34_PARAMETERS>(), 32),
        (size_of::<nv_ioctl_card_info_t>(), 72),
        (size_of::<nv_ioctl_register_fd_t>(), 4),
        (size_of::<nv_ioctl_rm_api_version_t>(), 72),
        (size_of::<nv_ioctl_alloc_os_event_t>(), 16),
        (size_of::<nv_ioctl_xfer_t>(), 16),
        (size_of::<nv_ioctl_wait_open_complete_t>(), 8),
        (size_of::<NV0080_ALLOC_PARAMETERS>(), 56),
        (size_of::<NV2080_ALLOC_PARAMETERS>(), 4),
        (size_of::<NV_MEMORY_ALLOCATION_PARAMS>(), 128),
        (size_of::<NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS>(), 20),
        (size_of::<NV_CTXSHARE_ALLOCATION_PARAMETERS>(), 12),
        (size_of::<NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS>(), 24),
        (size_of::<NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS>(), 32),
        (size_of::<NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS>(), 16),
        (size_of::<NV2080_CTRL_GPU_GET_GID_INFO_PARAMS>(), 268),
        (size_of::<NV2080_CTRL_GR_GET_INFO_PARAMS>(), 32),
        (size_of::<NV2080_CTRL_GR_INFO>(), 8),
        (size_of::<NV2080_CTRL_PERF_BOOST_PARAMS>(), 8),
        (
            size_of::<NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS>(),
            4,
        ),
        (size_of::<NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS>(), 4024),
        (size_of::<AmpereAControlGPFifo>(), 512),
        (size_of::<NvNotification>(), 16),
        (size_of::<UVM_INITIALIZE_PARAMS>(), 16),
        (size_of::<UVM_MM_INITIALIZE_PARAMS>(), 8),
        (size_of::<UVM_REGISTER_GPU_PARAMS>(), 40),
        (size_of::<UVM_REGISTER_GPU_VASPACE_PARAMS>(), 32),
        (size_of::<UVM_REGISTER_CHANNEL_PARAMS>(), 56),
        (size_of::<UVM_CREATE_EXTERNAL_RANGE_PARAMS>(), 24),
        (size_of::<UvmGpuMappingAttributes>(), 36),
        (size_of::<UVM_MAP_EXTERNAL_ALLOCATION_PARAMS>(), 9264),
        (size_of::<UVM_ENABLE_PEER_ACCESS_PARAMS>(), 36),
    ];
    for (i, (got, want)) in sizes.iter().enumerate() {
        assert_eq!(got, want, "entry {i}");
    }
}

#[test]
fn common_field_offsets_match_the_memo() {
    let offs = [
        (offset_of!(NVOS21_PARAMETERS, pAllocParms), 16),
        (offset_of!(NVOS21_PARAMETERS, paramsSize), 24),
        (offset_of!(NVOS21_PARAMETERS, status), 28),
        (offset_of!(NVOS54_PARAMETERS, cmd), 8),
        (offset_of!(NVOS54_PARAMETERS, flags), 12),
        (offset_of!(NVOS54_PARAMETERS, params), 16),
        (offset_of!(NVOS54_PARAMETERS, paramsSize), 24),
        (offset_of!(NVOS54_PARAMETERS, status), 28),
        (offset_of!(NVOS33_PARAMETERS, offset), 16),
        (offset_of!(NVOS33_PARAMETERS, length), 24),
        (offset_of!(NVOS33_PARAMETERS, pLinearAddress), 32),
        (offset_of!(NVOS33_PARAMETERS, status), 40),
        (offset_of!(NVOS33_PARAMETERS, flags), 44),
        (offset_of!(nv_ioctl_nvos33_parameters_with_fd, fd), 48),
        (offset_of!(NVOS02_PARAMETERS, pMemory), 24),
        (offset_of!(NVOS02_PARAMETERS, limit), 32),
        (offset_of!(nv_ioctl_nvos02_parameters_with_fd, fd), 48),
        (offset_of!(NVOS34_PARAMETERS, pLinearAddress), 16),
        (offset_of!(nv_ioctl_card_info_t, pci_info), 4),
        (
            offset_of!(nv_ioctl_card_info_t, pci_info) + offset_of!(nv_pci_info_t, device_id),
            14,
        ),
        (offset_of!(nv_ioctl_card_info_t, gpu_id), 16),
        (offset_of!(nv_ioctl_card_info_t, reg_address), 24),
        (offset_of!(nv_ioctl_card_info_t, fb_size), 48),
        (offset_of!(nv_ioctl_card_info_t, minor_number), 56),
        (offset_of!(nv_ioctl_card_info_t, dev_name), 60),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, attr), 24),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, attr2), 28),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, format), 32),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, size), 64),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, alignment), 72),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, offset), 80),
        (offset_of!(NV_MEMORY_ALLOCATION_PARAMS, limit), 88),
        (offset_of!(NV0080_ALLOC_PARAMETERS, vaSpaceSize), 24),
        (offset_of!(NV0080_ALLOC_PARAMETERS, vaMode), 48),
        (
            offset_of!(NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS, deviceInstance),
            8,
        ),
        (
            offset_of!(NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS, classList),
            8,
        ),
        (offset_of!(NV2080_CTRL_GR_GET_INFO_PARAMS, grInfoList), 8),
        (offset_of!(NV2080_CTRL_GR_GET_INFO_PARAMS, grRouteInfo), 16),
        (
            offset_of!(NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS, flags),
            4016,
        ),
        (offset_of!(AmpereAControlGPFifo, Put), 0x40),
        (offset_of!(AmpereAControlGPFifo, Get), 0x44),
        (offset_of!(AmpereAControlGPFifo, TopLevelGet), 0x58),
        (offset_of!(AmpereAControlGPFifo, GetHi), 0x60),
        (offset_of!(AmpereAControlGPFifo, GPGet), 0x88),
        (offset_of!(AmpereAControlGPFifo, GPPut), 0x8C),
        (offset_of!(NvNotification, info32), 8),
        (offset_of!(NvNotification, status), 14),
        (offset_of!(UVM_REGISTER_GPU_PARAMS, rmCtrlFd), 24),
        (offset_of!(UVM_REGISTER_GPU_PARAMS, rmStatus), 36),
        (offset_of!(UVM_REGISTER_CHANNEL_PARAMS, base), 32),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, perGpuAttributes),
            24,
        ),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, gpuAttributesCount),
            9240,
        ),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, rmCtrlFd),
            9248,
        ),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, hClient),
            9252,
        ),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, hMemory),
            9256,
        ),
        (
            offset_of!(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, rmStatus),
            9260,
        ),
    ];
    for (i, (got, want)) in offs.iter().enumerate() {
        assert_eq!(got, want, "entry {i}");
    }
}

#[test]
fn escape_requests_are_iowr_f_nr_size() {
    // _IOWR('F', nr, size) = 0xC0000000 | size << 16 | 0x46 << 8 | nr, computed by hand.
    assert_eq!(esc::RM_ALLOC.request, 0xC020_462B);
    assert_eq!(esc::RM_FREE.request, 0xC010_4629);
    assert_eq!(esc::RM_CONTROL.request, 0xC020_462A);
    assert_eq!(esc::RM_ALLOC_MEMORY.request, 0xC038_4627);
    assert_eq!(esc::RM_MAP_MEMORY.request, 0xC038_464E);
    assert_eq!(esc::RM_UNMAP_MEMORY.request, 0xC020_464F);
    assert_eq!(esc::RM_MAP_MEMORY_DMA_V570.request, 0xC038_4657);
    assert_eq!(esc::RM_MAP_MEMORY_DMA_V580.request, 0xC040_4657);
    assert_eq!(esc::REGISTER_FD.request, 0xC004_46C9);
    assert_eq!(esc::ALLOC_OS_EVENT.request, 0xC010_46CE);
    assert_eq!(esc::FREE_OS_EVENT.request, 0xC010_46CF);
    assert_eq!(esc::CHECK_VERSION_STR.request, 0xC048_46D2);
    assert_eq!(esc::IOCTL_XFER_CMD.request, 0xC010_46D3);
    assert_eq!(esc::WAIT_OPEN_COMPLETE.request, 0xC008_46DA);
    assert_eq!(card_info_request(64), 0xD200_46C8);
    assert_eq!(card_info_request(1), 0xC048_46C8);
    assert_eq!(nv_request_name(0xC020_462B), Some("NV_ESC_RM_ALLOC"));
    assert_eq!(nv_request_name(0xD200_46C8), Some("NV_ESC_CARD_INFO"));
    assert_eq!(
        nv_request_name(0xC020_4B01),
        None,
        "a KFD request is not NVIDIA's"
    );
}

#[test]
fn uvm_numbers_classes_and_controls() {
    let uvm = [
        (uvm_req::INITIALIZE.request, 0x3000_0001),
        (uvm_req::MM_INITIALIZE.request, 75),
        (uvm_req::REGISTER_GPU.request, 37),
        (uvm_req::REGISTER_GPU_VASPACE.request, 25),
        (uvm_req::REGISTER_CHANNEL.request, 27),
        (uvm_req::CREATE_EXTERNAL_RANGE.request, 73),
        (uvm_req::MAP_EXTERNAL_ALLOCATION.request, 33),
        (uvm_req::ENABLE_PEER_ACCESS.request, 29),
        (u64::from(UVM_FREE), 34),
        // UVM_IOCTL_BASE(28) in uvm_ioctl.h of 570.86.16 .. 595.45.04.
        (u64::from(UVM_UNREGISTER_CHANNEL), 28),
    ];
    for (got, want) in uvm {
        assert_eq!(got, want);
    }
    assert_eq!(nv_request_name(75), Some("UVM_MM_INITIALIZE"));
    assert_eq!(nv_request_name(28), Some("UVM_UNREGISTER_CHANNEL"));
    assert_eq!(
        (
            HOPPER_COMPUTE_A,
            HOPPER_DMA_COPY_A,
            HOPPER_CHANNEL_GPFIFO_A,
            HOPPER_USERMODE_A
        ),
        (0xCBC0, 0xC8B5, 0xC86F, 0xC661)
    );
    assert_eq!(class_str(0xCBC0), "HOPPER_COMPUTE_A (0xcbc0)");
    assert_eq!(class_str(0xCBA0), "class 0xcba0", "there is no 0xCBA0");
    assert_eq!(
        control_str(0xA06C0101),
        "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE (0xa06c0101)"
    );
    assert_eq!(NV_ERR_INVALID_PARAM_STRUCT, 0x3A);
    assert_eq!(NV_ERR_NOT_SUPPORTED, 0x56);
    assert_eq!(NV_ERR_INVALID_CLASS, 0x22);
    assert_eq!(NV_WARN_NOTHING_TO_DO, 0x10006);
}

#[test]
fn families_from_versions() {
    assert_eq!(
        DriverFamily::from_version("580.142").unwrap(),
        DriverFamily::V580
    );
    assert_eq!(
        DriverFamily::from_version("580.159.04").unwrap(),
        DriverFamily::V580
    );
    assert_eq!(
        DriverFamily::from_version("570.86.16").unwrap(),
        DriverFamily::V570
    );
    for (v, f) in [
        ("575.64.05", DriverFamily::V575),
        ("590.48.01", DriverFamily::V590),
        ("595.45.04", DriverFamily::V595),
    ] {
        assert_eq!(DriverFamily::from_version(v).unwrap(), f);
    }
    let e = DriverFamily::from_version("550.54.15").unwrap_err();
    assert!(
        e.message().contains("550.54.15")
            && e.message().contains("570.x, 575.x, 580.x, 590.x, 595.x"),
        "{e}"
    );
    // A newer driver: refused, naming the override that tries the newest layouts.
    let e = DriverFamily::from_version("600.10").unwrap_err();
    assert!(
        e.message()
            .contains("NVIDIA driver 600.10 is not supported")
            && e.message().contains("NV_DRIVER_FAMILY=595"),
        "{e}"
    );
    assert!(DriverFamily::from_version("banana").is_err());
    let text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build  (dvs-builder@U22)  Thu Oct  2 2025\nGCC version:  gcc version 12.2.0\n";
    assert_eq!(
        DriverFamily::parse_proc_version(text).as_deref(),
        Some("580.105.08")
    );
    assert_eq!(
        DriverFamily::parse_proc_version("GCC version: 12.2.0"),
        None
    );
    let s = DriverFamily::V580.sizes();
    assert_eq!(
        (
            s.nvos46,
            s.vaspace_params,
            s.gpfifo_schedule_params,
            s.classlist_v2_params
        ),
        (64, 56, 3, 804)
    );
    let s = DriverFamily::V570.sizes();
    assert_eq!(
        (
            s.nvos46,
            s.vaspace_params,
            s.gpfifo_schedule_params,
            s.classlist_v2_params
        ),
        (56, 48, 2, 404)
    );
    assert_eq!(
        DriverFamily::V570.gpfifo_schedule_params(true, false),
        vec![1, 0]
    );
    assert_eq!(
        DriverFamily::V580.gpfifo_schedule_params(true, false),
        vec![1, 0, 0]
    );
    let p = VaSpaceParams {
        pasid: 7,
        ..Default::default()
    };
    assert!(
        DriverFamily::V570.vaspace_params(&p).is_err(),
        "570 has no pasid"
    );
    assert_eq!(DriverFamily::V580.vaspace_params(&p).unwrap()[48], 7);
}

#[test]
fn family_layouts_per_tag() {
    // Sizes from a C probe against NVIDIA/open-gpu-kernel-modules' headers at each tag:
    // (family, NVOS46, vaspace, GPFIFO_SCHEDULE, CLASSLIST_V2, UVM_FREE, UVM_UNREGISTER_CHANNEL).
    let want = [
        (DriverFamily::V570, 56, 48, 2, 404, 24, 28),
        (DriverFamily::V575, 56, 48, 3, 404, 24, 28),
        (DriverFamily::V580, 64, 56, 3, 804, 24, 28),
        (DriverFamily::V590, 64, 56, 3, 804, 16, 12),
        (DriverFamily::V595, 64, 56, 3, 804, 16, 12),
    ];
    for (f, nvos46, vaspace, sched, classlist, free, unreg) in want {
        let s = f.sizes();
        assert_eq!(
            (
                s.nvos46,
                s.vaspace_params,
                s.gpfifo_schedule_params,
                s.classlist_v2_params,
                s.uvm_free_params,
                s.uvm_unregister_channel_params
            ),
            (nvos46, vaspace, sched, classlist, free, unreg),
            "family {f}"
        );
        assert_eq!((s.channel_alloc_params, s.root_client_params), (368, 120));
        assert_eq!(f.uvm_free_params(0x1000, 0x2000).bytes.len(), free);
        let u = f.uvm_unregister_channel_params([7; 16], 0xC1D0_0001, 0xCAFE);
        assert_eq!(u.bytes.len(), unreg);
    }
    // The generated per-family UVM structs and where rmStatus sits.
    let uvm = [
        (size_of::<v570::UVM_FREE_PARAMS>(), 24),
        (offset_of!(v570::UVM_FREE_PARAMS, rmStatus), 16),
        (size_of::<v580::UVM_FREE_PARAMS>(), 24),
        (offset_of!(v580::UVM_FREE_PARAMS, rmStatus), 16),
        (size_of::<v590::UVM_FREE_PARAMS>(), 16),
        (offset_of!(v590::UVM_FREE_PARAMS, rmStatus), 8),
        (size_of::<v570::UVM_UNREGISTER_CHANNEL_PARAMS>(), 28),
        (offset_of!(v570::UVM_UNREGISTER_CHANNEL_PARAMS, hClient), 16),
        (
            offset_of!(v570::UVM_UNREGISTER_CHANNEL_PARAMS, rmStatus),
            24,
        ),
        (size_of::<v580::UVM_UNREGISTER_CHANNEL_PARAMS>(), 28),
        (
            offset_of!(v580::UVM_UNREGISTER_CHANNEL_PARAMS, rmStatus),
            24,
        ),
        (size_of::<v590::UVM_UNREGISTER_CHANNEL_PARAMS>(), 12),
        (offset_of!(v590::UVM_UNREGISTER_CHANNEL_PARAMS, hChannel), 4),
        (offset_of!(v590::UVM_UNREGISTER_CHANNEL_PARAMS, rmStatus), 8),
    ];
    for (i, (got, want)) in uvm.iter().enumerate() {
        assert_eq!(got, want, "entry {i}");
    }
    // 590's UVM_FREE: base then rmStatus (no length): the bytes say so.
    let b = DriverFamily::V590.uvm_free_params(0x1122_3344_5566_7788, 0x1000);
    assert_eq!(b.bytes[..8], 0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!((b.status_offset, b.rm_status()), (8, 0));
    let b = DriverFamily::V580.uvm_free_params(0x10_0000, 0x2000);
    assert_eq!(b.bytes[8..16], 0x2000u64.to_le_bytes());
    assert_eq!(b.status_offset, 16);
}

#[test]
fn driver_family_knob_overrides_the_version() {
    use crate::helpers::Context;
    let _k = Context::new(&[("NV_DRIVER_FAMILY", 595)]);
    assert_eq!(DriverFamily::from_knob().unwrap(), Some(DriverFamily::V595));
    let _k = Context::new(&[("NV_DRIVER_FAMILY", 600)]);
    let e = DriverFamily::from_knob().unwrap_err();
    assert!(e.message().contains("NV_DRIVER_FAMILY=\"600\""), "{e}");
}

#[test]
fn emulator_size_table_agrees_with_the_generated_structs() {
    // The emulator's table is literal numbers; the client's sizes come from the headers.
    for f in DriverFamily::ALL {
        let t = emu_nv::family_sizes(&f.to_string().replace(".x", ".0")).unwrap();
        assert_eq!(t, f.sizes(), "family {f}");
    }
}
