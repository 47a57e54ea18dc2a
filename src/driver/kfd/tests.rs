//! Pins every KFD request number and struct size to the literal values the C header produces
//! (computed by compiling against Debian 12's `kfd_ioctl.h`, KFD 1.11, on x86-64).

use super::*;
use std::mem::size_of;

static_assertions::const_assert_eq!(size_of::<kfd_ioctl_get_version_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_create_queue_args>(), 88);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_destroy_queue_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_create_event_args>(), 32);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_destroy_event_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_set_event_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_reset_event_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_wait_events_args>(), 24);
static_assertions::const_assert_eq!(size_of::<kfd_event_data>(), 48);
static_assertions::const_assert_eq!(size_of::<kfd_hsa_memory_exception_data>(), 32);
static_assertions::const_assert_eq!(size_of::<kfd_hsa_hw_exception_data>(), 16);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_acquire_vm_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_alloc_memory_of_gpu_args>(), 40);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_free_memory_of_gpu_args>(), 8);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_map_memory_to_gpu_args>(), 24);
static_assertions::const_assert_eq!(size_of::<kfd_ioctl_unmap_memory_from_gpu_args>(), 24);

#[test]
fn request_numbers_match_the_header() {
    let expect: &[(u64, u64)] = &[
        (AMDKFD_IOC_GET_VERSION.request, 0x80084B01),
        (AMDKFD_IOC_CREATE_QUEUE.request, 0xC0584B02),
        (AMDKFD_IOC_DESTROY_QUEUE.request, 0xC0084B03),
        (AMDKFD_IOC_SET_MEMORY_POLICY.request, 0x40204B04),
        (AMDKFD_IOC_GET_CLOCK_COUNTERS.request, 0xC0284B05),
        (AMDKFD_IOC_GET_PROCESS_APERTURES.request, 0x81904B06),
        (AMDKFD_IOC_UPDATE_QUEUE.request, 0x40184B07),
        (AMDKFD_IOC_CREATE_EVENT.request, 0xC0204B08),
        (AMDKFD_IOC_DESTROY_EVENT.request, 0x40084B09),
        (AMDKFD_IOC_SET_EVENT.request, 0x40084B0A),
        (AMDKFD_IOC_RESET_EVENT.request, 0x40084B0B),
        (AMDKFD_IOC_WAIT_EVENTS.request, 0xC0184B0C),
        (AMDKFD_IOC_DBG_REGISTER_DEPRECATED.request, 0x40084B0D),
        (AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED.request, 0x40084B0E),
        (AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED.request, 0x40104B0F),
        (AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED.request, 0x40104B10),
        (AMDKFD_IOC_SET_SCRATCH_BACKING_VA.request, 0xC0104B11),
        (AMDKFD_IOC_GET_TILE_CONFIG.request, 0xC0284B12),
        (AMDKFD_IOC_SET_TRAP_HANDLER.request, 0x40184B13),
        (AMDKFD_IOC_GET_PROCESS_APERTURES_NEW.request, 0xC0104B14),
        (AMDKFD_IOC_ACQUIRE_VM.request, 0x40084B15),
        (AMDKFD_IOC_ALLOC_MEMORY_OF_GPU.request, 0xC0284B16),
        (AMDKFD_IOC_FREE_MEMORY_OF_GPU.request, 0x40084B17),
        (AMDKFD_IOC_MAP_MEMORY_TO_GPU.request, 0xC0184B18),
        (AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU.request, 0xC0184B19),
        (AMDKFD_IOC_SET_CU_MASK.request, 0x40104B1A),
        (AMDKFD_IOC_GET_QUEUE_WAVE_STATE.request, 0xC0184B1B),
        (AMDKFD_IOC_GET_DMABUF_INFO.request, 0xC0204B1C),
        (AMDKFD_IOC_IMPORT_DMABUF.request, 0xC0184B1D),
        (AMDKFD_IOC_ALLOC_QUEUE_GWS.request, 0xC0104B1E),
        (AMDKFD_IOC_SMI_EVENTS.request, 0xC0084B1F),
        (AMDKFD_IOC_SVM.request, 0xC0184B20),
        (AMDKFD_IOC_SET_XNACK_MODE.request, 0xC0044B21),
        (AMDKFD_IOC_CRIU_OP.request, 0xC0384B22),
        (AMDKFD_IOC_AVAILABLE_MEMORY.request, 0xC0104B23),
    ];
    for (i, (got, want)) in expect.iter().enumerate() {
        assert_eq!(got, want, "entry {i}: {got:#x} != {want:#x}");
    }
    assert_eq!(KFD_IOCTLS.len(), expect.len());
}

#[test]
fn struct_sizes_match_the_header() {
    let sizes: &[(&str, usize, usize)] = &[
        ("get_version", size_of::<kfd_ioctl_get_version_args>(), 8),
        ("create_queue", size_of::<kfd_ioctl_create_queue_args>(), 88),
        (
            "destroy_queue",
            size_of::<kfd_ioctl_destroy_queue_args>(),
            8,
        ),
        ("update_queue", size_of::<kfd_ioctl_update_queue_args>(), 24),
        ("create_event", size_of::<kfd_ioctl_create_event_args>(), 32),
        (
            "destroy_event",
            size_of::<kfd_ioctl_destroy_event_args>(),
            8,
        ),
        ("set_event", size_of::<kfd_ioctl_set_event_args>(), 8),
        ("reset_event", size_of::<kfd_ioctl_reset_event_args>(), 8),
        ("wait_events", size_of::<kfd_ioctl_wait_events_args>(), 24),
        ("event_data", size_of::<kfd_event_data>(), 48),
        (
            "memory_exception",
            size_of::<kfd_hsa_memory_exception_data>(),
            32,
        ),
        ("hw_exception", size_of::<kfd_hsa_hw_exception_data>(), 16),
        ("acquire_vm", size_of::<kfd_ioctl_acquire_vm_args>(), 8),
        ("alloc", size_of::<kfd_ioctl_alloc_memory_of_gpu_args>(), 40),
        ("free", size_of::<kfd_ioctl_free_memory_of_gpu_args>(), 8),
        ("map", size_of::<kfd_ioctl_map_memory_to_gpu_args>(), 24),
        (
            "unmap",
            size_of::<kfd_ioctl_unmap_memory_from_gpu_args>(),
            24,
        ),
        (
            "clock_counters",
            size_of::<kfd_ioctl_get_clock_counters_args>(),
            40,
        ),
        (
            "apertures_new",
            size_of::<kfd_ioctl_get_process_apertures_new_args>(),
            16,
        ),
        (
            "device_apertures",
            size_of::<kfd_process_device_apertures>(),
            56,
        ),
        (
            "scratch_backing_va",
            size_of::<kfd_ioctl_set_scratch_backing_va_args>(),
            16,
        ),
        (
            "available_memory",
            size_of::<kfd_ioctl_get_available_memory_args>(),
            16,
        ),
        ("xnack_mode", size_of::<kfd_ioctl_set_xnack_mode_args>(), 4),
        ("svm", size_of::<kfd_ioctl_svm_args>(), 24),
    ];
    for (name, got, want) in sizes {
        assert_eq!(got, want, "sizeof {name}");
    }
}

#[test]
fn event_data_id_offset() {
    assert_eq!(std::mem::offset_of!(kfd_event_data, event_id), 40);
}

#[test]
fn encodings() {
    assert_eq!(AMDKFD_IOC_CREATE_QUEUE.nr(), 0x02);
    assert_eq!(AMDKFD_IOC_CREATE_QUEUE.size(), 88);
    assert_eq!(
        kfd_ioctl_name(0xC0284B16),
        Some("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU")
    );
    assert_eq!(
        kfd_ioctl_name(0xC0304B16),
        None,
        "wrong size is not named as the real request"
    );
    assert_eq!(
        kfd_ioctl_name_by_nr(0x18),
        Some("AMDKFD_IOC_MAP_MEMORY_TO_GPU")
    );
    // The doorbell offset seen in a ROCm trace (tinygrad#9363): type 3 | gpu_id 0x697D << 46.
    assert_eq!(
        KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(0x697D),
        0xDA5F_4000_0000_0000
    );
    assert_eq!(kfd_mmap_get_gpu_id(0xDA5F_4000_0000_0000), 0x697D);
    assert_eq!(make_handle(0x697D, 3), 0x0000_697D_0000_0003);
    assert_eq!(
        (
            handle_gpu_id(0x697D_0000_0003),
            handle_idr(0x697D_0000_0003)
        ),
        (0x697D, 3)
    );
    assert_eq!(KFD_SIGNAL_EVENT_PAGE_SIZE, 0x8000);
}

#[test]
fn describe_names_key_fields() {
    let a = kfd_ioctl_alloc_memory_of_gpu_args {
        gpu_id: 0x1234,
        size: 0x1000,
        ..Default::default()
    };
    let d = a.describe();
    assert!(
        d.contains("gpu_id=0x1234") && d.contains("size=0x1000"),
        "{d}"
    );
}
