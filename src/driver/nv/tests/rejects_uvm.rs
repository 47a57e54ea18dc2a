//! UVM rejections: each with UVM's `rmStatus` and a message naming the call and the cause.

use super::*;
use crate::driver::nv::*;
use crate::sys::nv::common::*;

#[test]
fn uvm_calls_before_initialize_are_illegal_action() {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let uvm = NvUvm::open(drv.clone(), DriverFamily::V580).unwrap();
    let uuid = emu.nv_device(0).unwrap().uuid();
    fails_nv(
        uvm.register_gpu(uuid, -1, 0, 0),
        NV_ERR_ILLEGAL_ACTION,
        &[
            "UVM_REGISTER_GPU",
            "NV_ERR_ILLEGAL_ACTION (0x16)",
            "UVM_INITIALIZE must be the first call",
        ],
    );
    fails_nv(
        uvm.create_external_range(0x10_0000_0000, 0x1000),
        NV_ERR_ILLEGAL_ACTION,
        &["UVM_CREATE_EXTERNAL_RANGE"],
    );
    uvm.initialize(0).unwrap();
    uvm.initialize(0).unwrap();
    fails_nv(
        uvm.initialize(2),
        NV_ERR_INVALID_ARGUMENT,
        &["already initialized"],
    );
    fails_nv(
        uvm.initialize(0x100),
        NV_ERR_INVALID_ARGUMENT,
        &["unknown UVM_INITIALIZE flags"],
    );
    // MM_INITIALIZE: on a fresh fd, naming an initialized one; the mm fd takes nothing else.
    let mm = NvUvm::open(drv.clone(), DriverFamily::V580).unwrap();
    fails_nv(
        uvm.mm_initialize(&mm),
        NV_ERR_INVALID_ARGUMENT,
        &["is not another, initialized"],
    );
    fails_nv(
        mm.mm_initialize(&mm),
        NV_ERR_INVALID_ARGUMENT,
        &["is not another"],
    );
    assert_eq!(mm.mm_initialize(&uvm).unwrap(), NV_OK);
    fails_nv(
        mm.register_gpu(uuid, -1, 0, 0),
        NV_ERR_ILLEGAL_ACTION,
        &["mm fd"],
    );
    // Escapes do not go to the UVM fd, UVM requests go nowhere else.
    fails_errno(
        drv.ioctl(uvm.fd(), esc::RM_FREE.request, &mut [0u8; 16]),
        libc::ENOTTY,
        "not /dev/nvidia-uvm",
    );
    let ctl = NvCtl::open(drv.clone()).unwrap();
    fails_errno(
        drv.ioctl_raw(ctl.fd(), 37, &mut [0u8; 40]),
        libc::ENOTTY,
        "not an open /dev/nvidia-uvm",
    );
    fails_errno(
        drv.ioctl_raw(uvm.fd(), 37, &mut [0u8; 32]),
        libc::EINVAL,
        "the UVM struct is 40",
    );
    fails_errno(
        drv.ioctl_raw(uvm.fd(), 99, &mut [0u8; 8]),
        libc::ENOTTY,
        "not emulated",
    );
}

#[test]
fn register_gpu_needs_a_known_uuid() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let uvm = NvUvm::open(drv.clone(), DriverFamily::V580).unwrap();
    uvm.initialize(0).unwrap();
    fails_nv(
        uvm.register_gpu([0xAB; 16], -1, 0, 0),
        NV_ERR_GPU_UUID_NOT_FOUND,
        &[
            "UVM_REGISTER_GPU",
            "NV_ERR_GPU_UUID_NOT_FOUND (0x12)",
            "no GPU has UUID",
        ],
    );
    let nv = open_nv(&drv).unwrap();
    fails_nv(
        nv.uvm.register_gpu(nv.uuid, -1, 0, 0),
        NV_ERR_IN_USE,
        &["already registered"],
    );
    fails_nv(
        nv.uvm.register_gpu(nv.uuid, 12345, nv.client, 0),
        NV_ERR_INVALID_ARGUMENT,
        &["rmCtrlFd 12345"],
    );
}

#[test]
fn vaspace_and_channel_registration_rules() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    // A vaspace RM owns cannot be handed to UVM.
    let own = nv
        .ctl
        .alloc_vaspace(nv.client, nv.device, &VaSpaceParams::default())
        .unwrap();
    let uvm = NvUvm::open(drv.clone(), DriverFamily::V580).unwrap();
    uvm.initialize(0).unwrap();
    fails_nv(
        uvm.register_gpu_vaspace(nv.uuid, nv.ctl.fd(), nv.client, nv.vaspace),
        NV_ERR_INVALID_DEVICE,
        &["UVM_REGISTER_GPU first"],
    );
    uvm.register_gpu(nv.uuid, -1, 0, 0).unwrap();
    fails_nv(
        uvm.register_gpu_vaspace(nv.uuid, nv.ctl.fd(), nv.client, own),
        NV_ERR_INVALID_ARGUMENT,
        &["not externally owned"],
    );
    fails_nv(
        uvm.register_gpu_vaspace(nv.uuid, nv.ctl.fd(), nv.client, nv.device),
        NV_ERR_INVALID_OBJECT_HANDLE,
        &["not a FERMI_VASPACE_A"],
    );
    fails_nv(
        nv.uvm
            .register_gpu_vaspace(nv.uuid, nv.ctl.fd(), nv.client, nv.vaspace),
        NV_ERR_INVALID_DEVICE,
        &["already has a registered VA space"],
    );
    // Channels: the vaspace must be registered on that UVM fd, the range free and aligned.
    fails_nv(
        uvm.register_channel(
            nv.uuid,
            nv.ctl.fd(),
            nv.client,
            q.compute.handle,
            0x7000_0000_0000,
            1 << 20,
        ),
        NV_ERR_INVALID_CHANNEL,
        &["is not registered on this UVM fd"],
    );
    fails_nv(
        nv.uvm.register_channel(
            nv.uuid,
            nv.ctl.fd(),
            nv.client,
            nv.device,
            0x7000_0000_0000,
            1 << 20,
        ),
        NV_ERR_INVALID_CHANNEL,
        &["is not a channel"],
    );
    fails_nv(
        nv.uvm.register_channel(
            nv.uuid,
            nv.ctl.fd(),
            nv.client,
            q.compute.handle,
            q.cmdq.va,
            1 << 20,
        ),
        NV_ERR_UVM_ADDRESS_IN_USE,
        &["overlaps"],
    );
    fails_nv(
        nv.uvm.register_channel(
            nv.uuid,
            nv.ctl.fd(),
            nv.client,
            q.compute.handle,
            0x7000_0000_0010,
            1 << 20,
        ),
        NV_ERR_INVALID_ADDRESS,
        &["not 4 KiB aligned"],
    );
}

#[test]
fn external_range_rules() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let base = nv.va(8 << 20).unwrap();
    nv.uvm.create_external_range(base, 4 << 20).unwrap();
    fails_nv(
        nv.uvm.create_external_range(base + (2 << 20), 4 << 20),
        NV_ERR_UVM_ADDRESS_IN_USE,
        &[
            "UVM_CREATE_EXTERNAL_RANGE",
            "NV_ERR_UVM_ADDRESS_IN_USE (0x68)",
            "overlaps the UVM range",
        ],
    );
    fails_nv(
        nv.uvm.create_external_range(base + 0x800, 0x1000),
        NV_ERR_INVALID_ADDRESS,
        &["NV_ERR_INVALID_ADDRESS (0x1e)", "not 4 KiB aligned"],
    );
    fails_nv(
        nv.uvm.create_external_range(base + (4 << 20), 0x1001),
        NV_ERR_INVALID_ADDRESS,
        &["not 4 KiB aligned"],
    );
    fails_nv(
        nv.uvm.create_external_range(base + (4 << 20), 0),
        NV_ERR_INVALID_ADDRESS,
        &["non-empty"],
    );
}

/// An NV bring-up with a 4 MiB external range at `base` and 2 MiB of VRAM (`mem`).
fn with_range() -> (
    std::sync::Arc<dyn crate::driver::api::Driver>,
    crate::mockgpu::EmuDriver,
    Nv,
    u64,
    u32,
) {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let base = nv.va(8 << 20).unwrap();
    nv.uvm.create_external_range(base, 4 << 20).unwrap();
    let mut mp = nv.mem_params(2 << 20, true);
    let mem = nv
        .ctl
        .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, &mut mp)
        .unwrap();
    (drv, emu, nv, base, mem)
}

#[test]
fn map_external_allocation_rules() {
    let (_drv, _emu, nv, base, mem) = with_range();
    let attr = [mapping_attributes(
        nv.uuid,
        UvmGpuMappingTypeReadWriteAtomic,
        0,
    )];
    let map = |va: u64, len: u64, off: u64, attrs: &[UvmGpuMappingAttributes], h: u32| {
        nv.uvm
            .map_external_allocation(va, len, off, attrs, nv.ctl.fd(), nv.client, h)
    };
    fails_nv(
        map(base, 2 << 20, 0, &attr, 0xCAF0_ABCD),
        NV_ERR_OBJECT_NOT_FOUND,
        &[
            "UVM_MAP_EXTERNAL_ALLOCATION",
            "NV_ERR_OBJECT_NOT_FOUND (0x57)",
            "hMemory 0xcaf0abcd is not an object",
        ],
    );
    fails_nv(
        map(base, 2 << 20, 0, &attr, nv.device),
        NV_ERR_INVALID_OBJECT_HANDLE,
        &["not memory"],
    );
    fails_nv(
        map(base + (4 << 20), 0x1000, 0, &attr, mem),
        NV_ERR_INVALID_ADDRESS,
        &["not inside one external range"],
    );
    fails_nv(
        map(base + (3 << 20), 2 << 20, 0, &attr, mem),
        NV_ERR_INVALID_ADDRESS,
        &["not inside one external range"],
    );
    fails_nv(
        map(base, 4 << 20, 0, &attr, mem),
        NV_ERR_INVALID_LIMIT,
        &["outside memory"],
    );
    fails_nv(
        map(base, 0x1000, 0x800, &attr, mem),
        NV_ERR_INVALID_OFFSET,
        &["offset 0x800"],
    );
    fails_nv(
        map(base, 0x1000, 0, &[], mem),
        NV_ERR_INVALID_ARGUMENT,
        &["gpuAttributesCount 0"],
    );
    fails_nv(
        map(base, 0x1000, 0, &[mapping_attributes([7; 16], 1, 0)], mem),
        NV_ERR_INVALID_DEVICE,
        &["no GPU has UUID"],
    );
    fails_nv(
        map(base, 0x1000, 0, &[mapping_attributes(nv.uuid, 9, 0)], mem),
        NV_ERR_INVALID_ARGUMENT,
        &["mapping type 9"],
    );
}

#[test]
fn mapping_permissions_owners_and_teardown() {
    let (drv, emu, nv, base, mem) = with_range();
    let attr = [mapping_attributes(
        nv.uuid,
        UvmGpuMappingTypeReadWriteAtomic,
        0,
    )];
    let map = |va: u64, len: u64, off: u64, attrs: &[UvmGpuMappingAttributes], h: u32| {
        nv.uvm
            .map_external_allocation(va, len, off, attrs, nv.ctl.fd(), nv.client, h)
    };
    // Read-only mappings refuse GPU writes; remapping inside the same range replaces.
    map(
        base,
        2 << 20,
        0,
        &[mapping_attributes(nv.uuid, UvmGpuMappingTypeReadOnly, 0)],
        mem,
    )
    .unwrap();
    let dev = emu.nv_device(0).unwrap();
    assert!(dev.translate(base, 8, true).is_err() && dev.translate(base, 8, false).is_ok());
    map(base, 2 << 20, 0, &attr, mem).unwrap();
    assert!(dev.translate(base, 8, true).is_ok());
    // Another UVM fd cannot map over it.
    let other = NvUvm::open(drv.clone(), DriverFamily::V580).unwrap();
    other.initialize(0).unwrap();
    other.register_gpu(nv.uuid, -1, 0, 0).unwrap();
    let vs = nv
        .ctl
        .alloc_vaspace(
            nv.client,
            nv.device,
            &VaSpaceParams {
                flags: NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED,
                ..Default::default()
            },
        )
        .unwrap();
    other
        .register_gpu_vaspace(nv.uuid, nv.ctl.fd(), nv.client, vs)
        .unwrap();
    other.create_external_range(base, 2 << 20).unwrap();
    fails_nv(
        other.map_external_allocation(base, 2 << 20, 0, &attr, nv.ctl.fd(), nv.client, mem),
        NV_ERR_UVM_ADDRESS_IN_USE,
        &["by someone else"],
    );
    // FREE takes whole ranges; closing a UVM fd drops its mappings.
    fails_nv(
        nv.uvm.free(base, 2 << 20),
        NV_ERR_INVALID_ADDRESS,
        &["no UVM range is exactly"],
    );
    drop(nv);
    assert!(
        !dev.is_mapped(base, 8),
        "closing the UVM fd unmapped its ranges"
    );
}

#[test]
fn channel_ranges_go_with_unregister_channel_not_free() {
    // kernel-open/nvidia-uvm/uvm_va_range.c uvm_free frees external (and semaphore-pool, P2P,
    // SKED-reflected) ranges only: a channel's is NV_ERR_INVALID_ADDRESS. uvm_user_channel.c
    // uvm_unregister_channel drops it; a channel not registered is NV_ERR_INVALID_CHANNEL.
    // 580: 24-byte UVM_FREE and 28-byte UNREGISTER_CHANNEL; 595: 16 and 12 bytes.
    for version in ["580.142", "595.45.04"] {
        let (drv, _emu) = emu_nv("hopper", version);
        let nv = open_nv(&drv).unwrap();
        let q = nv.queues().unwrap();
        let base = q.compute.uvm_base;
        fails_nv(
            nv.uvm.free(base, CHANNEL_RANGE),
            NV_ERR_INVALID_ADDRESS,
            &["UVM_FREE", "channel", "UVM_UNREGISTER_CHANNEL drops it"],
        );
        nv.uvm
            .unregister_channel(nv.uuid, nv.client, q.compute.handle)
            .unwrap();
        fails_nv(
            nv.uvm
                .unregister_channel(nv.uuid, nv.client, q.compute.handle),
            NV_ERR_INVALID_CHANNEL,
            &["UVM_UNREGISTER_CHANNEL", "is not registered on this UVM fd"],
        );
        // The span is UVM's to hand out again.
        nv.uvm.create_external_range(base, 0x1000).unwrap();
        nv.uvm.free(base, 0x1000).unwrap();
        // The DMA channel's range is still there.
        fails_nv(
            nv.uvm.create_external_range(q.dma.uvm_base, 0x1000),
            NV_ERR_UVM_ADDRESS_IN_USE,
            &["overlaps"],
        );
    }
}
