//! Every malformed variant the emulator must refuse, with KFD's errno and a message naming the
//! failed check. Queue-creation variants are in `rejects_queue.rs`.

use super::*;
use crate::driver::api::{ioc, ioctl_struct, IOC_READ, IOC_WRITE};
use crate::driver::kfd::*;

const RW: u32 = IOC_READ | IOC_WRITE;

fn raw_alloc(dev: &Dev, va: u64, size: u64, flags: u32) -> Result<GpuAlloc> {
    ops::alloc_memory_of_gpu(dev.drv.as_ref(), dev.kfd, dev.gpu_id, va, size, flags, 0)
}

#[test]
fn ioctl_encoding_errors() {
    let (drv, _) = emu(1);
    let kfd = drv.open("/dev/kfd", OpenFlags::RDWR).unwrap();
    // ALLOC with a 48-byte struct in the request: not the 1.11 layout.
    let mut big = [0u8; 48];
    let r = drv.ioctl(kfd, ioc(RW, b'K', 0x16, 48), &mut big);
    fails(r, libc::EINVAL, "struct size mismatch");
    let mut short = [0u8; 8];
    let r = drv.ioctl(kfd, AMDKFD_IOC_CREATE_QUEUE.request, &mut short);
    fails(r, libc::EINVAL, "argument buffer is 8 bytes");
    let mut v = [0u8; 8];
    fails(
        drv.ioctl(kfd, ioc(IOC_WRITE, b'K', 0x01, 8), &mut v),
        libc::EINVAL,
        "(dir 1)",
    );
    // Unknown nr: KFD answers EINVAL; another driver's type: ENOTTY; known, not emulated: ENOTTY.
    fails(
        drv.ioctl(kfd, ioc(RW, b'K', 0x7F, 8), &mut v),
        libc::EINVAL,
        "unknown KFD ioctl nr 0x7f",
    );
    fails(
        drv.ioctl(kfd, ioc(RW, b'd', 0x01, 8), &mut v),
        libc::ENOTTY,
        "not KFD's",
    );
    let mut svm = [0u8; 24];
    fails(
        drv.ioctl(kfd, AMDKFD_IOC_SVM.request, &mut svm),
        libc::ENOTTY,
        "AMDKFD_IOC_SVM",
    );
}

#[test]
fn descriptor_errors() {
    let (drv, _) = emu(1);
    let mut v = [0u8; 8];
    let get_version = AMDKFD_IOC_GET_VERSION.request;
    fails(
        drv.ioctl(Fd(3), get_version, &mut v),
        libc::EBADF,
        "not an open emulated fd",
    );
    let render = drv.open("/dev/dri/renderD128", OpenFlags::RDWR).unwrap();
    fails(
        drv.ioctl(render, get_version, &mut v),
        libc::ENOTTY,
        "render nodes",
    );
    fails(
        drv.open("/dev/dri/renderD131", OpenFlags::RDWR),
        libc::ENOENT,
        "no such render node",
    );
    fails(
        drv.open("/dev/null", OpenFlags::RDWR),
        libc::ENOENT,
        "only /dev/kfd",
    );
    fails(
        drv.open("/dev/kfd", OpenFlags::READ),
        libc::EACCES,
        "O_RDWR",
    );
    let kfd = drv.open("/dev/kfd", OpenFlags::RDWR).unwrap();
    drv.close(kfd).unwrap();
    fails(drv.close(kfd), libc::EBADF, "close");
    // The typed path names the ioctl and the struct's key fields.
    let mut q = kfd_ioctl_create_queue_args {
        gpu_id: 0x77,
        ..Default::default()
    };
    let r = ioctl_struct(drv.as_ref(), kfd, &AMDKFD_IOC_CREATE_QUEUE, &mut q);
    fails(
        r,
        libc::EBADF,
        "AMDKFD_IOC_CREATE_QUEUE(gpu_id=0x77 queue_type=0x0",
    );
}

#[test]
fn acquire_vm_rules() {
    let (drv, emu) = emu(2);
    let (ids, d) = (emu.gpu_ids(), drv.as_ref());
    let kfd = d.open("/dev/kfd", OpenFlags::RDWR).unwrap();
    let r0 = d.open("/dev/dri/renderD128", OpenFlags::RDWR).unwrap();
    let r0b = d.open("/dev/dri/renderD128", OpenFlags::RDWR).unwrap();
    // ALLOC before ACQUIRE_VM: ENODEV; CREATE_QUEUE before it: ESRCH.
    let va = reserve(d, 0x1000).unwrap();
    let r = ops::alloc_memory_of_gpu(d, kfd, ids[0], va, 0x1000, GTT_UC | BASE_FLAGS, 0);
    fails(r, libc::ENODEV, "ACQUIRE_VM must come first");
    let mut q = kfd_ioctl_create_queue_args {
        gpu_id: ids[0],
        ring_size: 4096,
        ..Default::default()
    };
    fails(
        ops::create_queue(d, kfd, &mut q),
        libc::ESRCH,
        "ACQUIRE_VM must come first",
    );
    fails(
        ops::acquire_vm(d, kfd, r0, ids[1]),
        libc::EINVAL,
        "not /dev/dri/renderD129",
    );
    fails(
        ops::acquire_vm(d, kfd, r0, 0xBAD),
        libc::EINVAL,
        "no device with gpu_id 0xbad",
    );
    fails(
        ops::acquire_vm(d, kfd, Fd(12345), ids[0]),
        libc::EINVAL,
        "not an open file",
    );
    ops::acquire_vm(d, kfd, r0, ids[0]).unwrap();
    ops::acquire_vm(d, kfd, r0, ids[0]).unwrap();
    fails(
        ops::acquire_vm(d, kfd, r0b, ids[0]),
        libc::EBUSY,
        "already acquired",
    );
    // Buffers of this VM are mapped only through the acquired render fd, shared, at their offset.
    let a = ops::alloc_memory_of_gpu(d, kfd, ids[0], va, 0x1000, GTT_UC | BASE_FLAGS, 0).unwrap();
    let (fixed, off) = (MapFlags::SHARED | MapFlags::FIXED, a.mmap_offset);
    fails(
        d.mmap(Some(va), 0x1000, Prot::RW, fixed, Some(r0b), off),
        libc::EACCES,
        "another render fd",
    );
    let r = d.mmap(Some(va), 0x1000, Prot::RW, fixed, Some(r0), off + 0x1000);
    fails(r, libc::EINVAL, "no buffer object at render-node offset");
    let private = MapFlags::PRIVATE | MapFlags::FIXED;
    fails(
        d.mmap(Some(va), 0x1000, Prot::RW, private, Some(r0), off),
        libc::EINVAL,
        "MAP_SHARED",
    );
    fails(
        d.mmap(Some(va), 0x2000, Prot::RW, fixed, Some(r0), off),
        libc::EINVAL,
        "MAP_FIXED target",
    );
    d.mmap(Some(va), 0x1000, Prot::RW, fixed, Some(r0), off)
        .unwrap();
}

#[test]
fn alloc_flag_checks() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let va = reserve(drv.as_ref(), 0x10000).unwrap();
    let two = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT | BASE_FLAGS;
    fails(
        raw_alloc(&dev, va, 0x1000, two),
        libc::EINVAL,
        "exactly one of",
    );
    fails(
        raw_alloc(&dev, va, 0x1000, BASE_FLAGS),
        libc::EINVAL,
        "exactly one of",
    );
    fails(
        raw_alloc(&dev, va, 0x1000, GTT_UC | (1 << 10)),
        libc::EINVAL,
        "unknown bits 0x400",
    );
    fails(raw_alloc(&dev, va, 0, GTT_UC), libc::EINVAL, "size is 0");
    let db = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | BASE_FLAGS;
    fails(
        raw_alloc(&dev, va, 0x1000, db),
        libc::EINVAL,
        "DOORBELL allocation must be 0x2000",
    );
    raw_alloc(&dev, va, 0x2000, db).unwrap();
    let mmio = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | BASE_FLAGS;
    fails(
        raw_alloc(&dev, va + 0x4000, 0x2000, mmio),
        libc::EINVAL,
        "one page",
    );
    let m = raw_alloc(&dev, va + 0x4000, 0x1000, mmio).unwrap();
    assert_eq!(
        m.mmap_offset,
        KFD_MMAP_TYPE_MMIO | kfd_mmap_gpu_id(dev.gpu_id)
    );
}

#[test]
fn alloc_va_and_budget_checks() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let d = drv.as_ref();
    let va = reserve(d, 0x10000).unwrap();
    fails(
        raw_alloc(&dev, va + 8, 0x1000, GTT_UC),
        libc::EINVAL,
        "page-aligned user range",
    );
    fails(
        raw_alloc(&dev, 0x1000_0000, 0x1000, GTT_UC),
        libc::EINVAL,
        "reservation",
    );
    let a = raw_alloc(&dev, va, 0x1000, GTT_UC).unwrap();
    fails(
        raw_alloc(&dev, va, 0x1000, GTT_UC),
        libc::EINVAL,
        "overlaps buffer",
    );
    fails(
        ops::map_memory_to_gpu(d, dev.kfd, a.handle, &[0xBAD]),
        libc::EINVAL,
        "gpu_id 0xbad",
    );
    // Out of VRAM: more than the 24 GiB budget (refused before any memory is made).
    let huge = 25u64 << 30;
    let hva = reserve(d, huge).unwrap();
    fails(
        raw_alloc(&dev, hva, huge, VRAM | BASE_FLAGS),
        libc::ENOMEM,
        "out of VRAM",
    );
    let mut avail = kfd_ioctl_get_available_memory_args {
        gpu_id: dev.gpu_id,
        ..Default::default()
    };
    crate::driver::api::ioctl_struct(d, dev.kfd, &AMDKFD_IOC_AVAILABLE_MEMORY, &mut avail).unwrap();
    assert_eq!(avail.available, 24 << 30);
}

#[test]
fn small_bar_refuses_public_vram() {
    let small = crate::mockgpu::EmuDriver::new(crate::mockgpu::EmuConfig {
        count: 1,
        large_bar: false,
        ..Default::default()
    })
    .unwrap();
    let drv: Arc<dyn Driver> = Arc::new(small);
    let dev = open_gpu(&drv, 0).unwrap();
    let va = reserve(drv.as_ref(), 0x2000).unwrap();
    let public = VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC | BASE_FLAGS;
    fails(
        raw_alloc(&dev, va, 0x1000, public),
        libc::EINVAL,
        "large BAR",
    );
    raw_alloc(&dev, va, 0x1000, VRAM | BASE_FLAGS).unwrap();
}

#[test]
fn handle_checks() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let (d, kfd, gpu) = (drv.as_ref(), dev.kfd, dev.gpu_id);
    let buf = dev.alloc(0x1000, GTT_UC, true).unwrap();
    let h = buf.alloc.handle;
    fails(
        ops::free_memory_of_gpu(d, kfd, h),
        libc::EBUSY,
        "still mapped on gpu 0x2a00",
    );
    fails(
        ops::free_memory_of_gpu(d, kfd, h + 100),
        libc::EINVAL,
        "unknown handle",
    );
    fails(
        ops::free_memory_of_gpu(d, kfd, 0xBAD << 32),
        libc::EINVAL,
        "names no device",
    );
    fails(
        ops::map_memory_to_gpu(d, kfd, h + 100, &[gpu]),
        libc::ENOMEM,
        "unknown handle",
    );
    assert_eq!(
        ops::map_memory_to_gpu(d, kfd, h, &[gpu]).unwrap(),
        1,
        "mapping again is a no-op"
    );
    dev.free(buf).unwrap();
    fails(
        ops::free_memory_of_gpu(d, kfd, h),
        libc::EINVAL,
        "already freed",
    );
    fails(
        ops::unmap_memory_from_gpu(d, kfd, h, &[gpu]),
        libc::ENOMEM,
        "unknown handle",
    );
    let other = dev.alloc(0x1000, GTT_UC, false).unwrap();
    ops::unmap_memory_from_gpu(d, kfd, other.alloc.handle, &[gpu]).unwrap();
    let r = ops::unmap_memory_from_gpu(d, kfd, other.alloc.handle, &[gpu]);
    fails(r, libc::EINVAL, "not mapped on any GPU");
}

#[test]
fn map_argument_checks() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let (d, kfd) = (drv.as_ref(), dev.kfd);
    let buf = dev.alloc(0x1000, GTT_UC, true).unwrap();
    let ids = [dev.gpu_id];
    let mut a = kfd_ioctl_map_memory_to_gpu_args {
        handle: buf.alloc.handle,
        device_ids_array_ptr: ids.as_ptr() as u64,
        n_devices: 0,
        n_success: 0,
    };
    let map = AMDKFD_IOC_MAP_MEMORY_TO_GPU;
    fails(
        ioctl_struct(d, kfd, &map, &mut a),
        libc::EINVAL,
        "n_devices is 0",
    );
    (a.n_devices, a.n_success) = (1, 2);
    fails(
        ioctl_struct(d, kfd, &map, &mut a),
        libc::EINVAL,
        "n_success 2 exceeds",
    );
    (a.n_success, a.device_ids_array_ptr) = (0, 8);
    fails(
        ioctl_struct(d, kfd, &map, &mut a),
        libc::EFAULT,
        "device_ids_array_ptr",
    );
    (a.n_devices, a.device_ids_array_ptr) = (100_000, ids.as_ptr() as u64);
    fails(
        ioctl_struct(d, kfd, &map, &mut a),
        libc::ENOMEM,
        "n_devices 100000",
    );
}

#[test]
fn foreign_memory_is_refused() {
    let (drv, _) = emu(1);
    let d = drv.as_ref();
    let heap = vec![0u8; 0x3000];
    let page = (heap.as_ptr() as u64 + 0xFFF) & !0xFFF;
    fails(
        d.munmap(page, 0x1000),
        libc::EINVAL,
        "not memory mapped through this driver",
    );
    let fixed = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    fails(
        d.mmap(Some(page), 0x1000, Prot::RW, fixed, None, 0),
        libc::EINVAL,
        "MAP_FIXED target",
    );
    fails(d.write_doorbell(page, 1), libc::EFAULT, "doorbell page");
    fails(
        d.mmap(None, 0x1000, Prot::RW, MapFlags::ANONYMOUS, None, 0),
        libc::EINVAL,
        "MAP_SHARED",
    );
    assert_eq!(heap.len(), 0x3000);
}

#[test]
fn event_page_checks() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let (d, kfd) = (drv.as_ref(), dev.kfd);
    let sig = KFD_IOC_EVENT_SIGNAL;
    let vram = dev
        .alloc(KFD_SIGNAL_EVENT_PAGE_SIZE as u64, VRAM, false)
        .unwrap();
    fails(
        ops::create_event(d, kfd, sig, true, vram.alloc.handle),
        libc::EINVAL,
        "must be GTT",
    );
    let small = dev.alloc(0x1000, GTT_UC, true).unwrap();
    fails(
        ops::create_event(d, kfd, sig, true, small.alloc.handle),
        libc::EINVAL,
        "needs 0x8000",
    );
    fails(
        ops::create_event(d, kfd, sig, true, 0xBAD << 32),
        libc::EINVAL,
        "names no device",
    );
    let page = dev
        .alloc(KFD_SIGNAL_EVENT_PAGE_SIZE as u64, GTT_UC, true)
        .unwrap();
    ops::create_event(d, kfd, sig, true, page.alloc.handle).unwrap();
    fails(
        ops::create_event(d, kfd, sig, true, page.alloc.handle),
        libc::EINVAL,
        "already set",
    );
    let mut data = [ops::event_data(999)];
    fails(
        ops::wait_events(d, kfd, &mut data, false, 0),
        libc::EINVAL,
        "unknown event id 0x3e7",
    );
    fails(
        ops::set_event(d, kfd, 999),
        libc::EINVAL,
        "unknown event id",
    );
    fails(
        ops::destroy_event(d, kfd, 999),
        libc::EINVAL,
        "unknown event id",
    );
    let mem = ops::create_event(d, kfd, KFD_IOC_EVENT_MEMORY, false, 0).unwrap();
    assert_eq!(
        mem.event_id, 0x4000_0000,
        "non-signal ids start at KFD_FIRST_NONSIGNAL_EVENT_ID"
    );
    fails(
        ops::set_event(d, kfd, mem.event_id),
        libc::EINVAL,
        "cannot be set or reset by the CPU",
    );
}
