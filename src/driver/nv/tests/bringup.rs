//! The H200 bring-up (steps 1-19; the order of tinygrad's `NVDevice.__init__`) through the
//! `driver::nv` wrappers against the emulated RM/UVM, on the 580 and the 570 layouts, plus what a
//! software GPU sees through the emulator's hooks (channels, doorbells, memory, error notifiers).

use std::sync::{Arc, Mutex};

use super::*;
use crate::driver::api::{Driver, MapFlags, OpenFlags, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::nv::*;
use crate::mockgpu::{EmuChannel, EmuConfig, EmuDriver, EmuNvDevice, EmuNvGpu};
use crate::sys::nv::common::*;
use crate::Result;

/// A software GPU that records what the emulator tells it.
#[derive(Default)]
pub(crate) struct Recorder {
    pub events: Mutex<Vec<String>>,
    /// Per doorbell: (token, GPPut read from USERD, the GP entry before GPPut read through the MMU).
    pub doorbells: Mutex<Vec<(u32, u32, u64)>>,
}

impl Recorder {
    fn push(&self, s: String) {
        self.events.lock().unwrap().push(s);
    }
    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

impl EmuNvGpu for Recorder {
    fn channel_created(&self, _dev: &EmuNvDevice, ch: &EmuChannel) -> Result<()> {
        self.push(format!(
            "created {:#x} token {:#x}",
            ch.class, ch.work_submit_token
        ));
        Ok(())
    }
    fn engine_bound(&self, _dev: &EmuNvDevice, ch: &EmuChannel, class: u32) -> Result<()> {
        assert!(ch.engines.iter().any(|e| e.class == class));
        self.push(format!("engine {class:#x}"));
        Ok(())
    }
    fn channel_scheduled(&self, _dev: &EmuNvDevice, ch: &EmuChannel, enabled: bool) {
        self.push(format!("scheduled {:#x} {enabled}", ch.work_submit_token));
    }
    fn doorbell(&self, dev: &EmuNvDevice, ch: &EmuChannel) {
        let put = dev.userd(ch).unwrap().read_u32(0x8C).unwrap();
        let idx = (put + ch.gpfifo_entries - 1) % ch.gpfifo_entries;
        let entry = dev
            .translate(ch.gpfifo_va + u64::from(idx) * 8, 8, false)
            .unwrap()
            .read_u64(0)
            .unwrap();
        self.doorbells
            .lock()
            .unwrap()
            .push((ch.work_submit_token, put, entry));
    }
    fn channel_destroyed(&self, _dev: &EmuNvDevice, ch: &EmuChannel) {
        self.push(format!("destroyed {:#x}", ch.handle));
    }
}

/// An emulated hopper/580 driver whose device 0 reports to a [`Recorder`] (via the factory).
pub(crate) fn emu_with_recorder() -> (Arc<dyn Driver>, EmuDriver, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let r = rec.clone();
    let e = EmuDriver::new(EmuConfig {
        count: 1,
        nv_gpu_factory: Some(Arc::new(move |_dev: &EmuNvDevice| {
            r.clone() as Arc<dyn EmuNvGpu>
        })),
        ..Default::default()
    })
    .unwrap();
    (Arc::new(e.clone()), e, rec)
}

#[test]
fn h200_bringup_on_580() {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    assert_eq!(
        (nv.ctl.family(), nv.ctl.version()),
        (DriverFamily::V580, "580.142")
    );
    assert_eq!(
        (nv.card.pci_info.vendor_id, nv.card.pci_info.device_id),
        (0x10DE, 0x2335)
    );
    for c in [
        HOPPER_COMPUTE_A,
        HOPPER_DMA_COPY_A,
        HOPPER_CHANNEL_GPFIFO_A,
        HOPPER_USERMODE_A,
        AMPERE_CHANNEL_GPFIFO_A,
    ] {
        assert!(nv.classes.contains(&c), "{}", class_str(c));
    }
    assert!(!nv.classes.contains(&ADA_COMPUTE_A));
    assert_eq!(
        nv.ctl.get_classlist_v2(nv.client, nv.device).unwrap(),
        nv.classes
    );
    assert_eq!(nv.uuid, emu.nv_device(0).unwrap().uuid());
    let q = nv.queues().unwrap();
    // sm_90, 8 GPCs x 9 TPCs x 2 SMs litter, 64 warps; SHADER_PIPE_COUNT answers the 8 enabled
    // GPCs and _SUB_COUNT the 66 enabled TPCs (nv_gpu_ops.c reads it as tpcCount), as a real
    // H200 did (2026-12-04): 66 x 2 = 132 SMs.
    assert_eq!(q.gr, vec![0x900, 8, 9, 2, 64, 8, 66]);
    assert_eq!(q.gr[6] * q.gr[3], 132);
    assert_ne!(q.compute.token, q.dma.token);
    let chans = emu.nv_channels(0);
    assert_eq!(chans.len(), 2);
    let c = &chans[0];
    assert_eq!(
        (c.handle, c.class, c.tsg, c.vaspace),
        (q.compute.handle, HOPPER_CHANNEL_GPFIFO_A, q.tsg, nv.vaspace)
    );
    assert_eq!(
        (c.gpfifo_va, c.gpfifo_entries, c.userd_offset),
        (q.gpfifo.va, ENTRIES, q.compute.userd_off)
    );
    assert_eq!(
        (c.error_notifier, c.scheduled),
        (q.compute.notifier.handle, true)
    );
    assert_eq!(c.engine_class(true), Some(HOPPER_COMPUTE_A));
    assert_eq!(
        c.engines.iter().map(|e| e.handle).collect::<Vec<_>>(),
        vec![q.compute.engine]
    );
    assert_ne!(nv.uvm_mm.fd(), nv.uvm.fd());
}

#[test]
fn h200_signals_usermode_controls_and_doorbell_log() {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    // The signal page is CPU- and GPU-visible at one address; the usermode object maps again.
    q.signals.cpu.as_ref().unwrap().write_u64(16, 42).unwrap();
    let dev = emu.nv_device(0).unwrap();
    assert_eq!(
        dev.translate(q.signals.va + 16, 8, false)
            .unwrap()
            .read_u64(0)
            .unwrap(),
        42
    );
    let um = NvGpuFd::open(drv.clone(), 0).unwrap();
    um.register_fd(nv.ctl.fd()).unwrap();
    nv.ctl
        .rm_map_memory(nv.client, nv.device, nv.usermode, 0, 0x10000, 0, um.fd())
        .unwrap();
    let again = Mapping::map(
        &drv,
        None,
        0x10000,
        Prot::RW,
        MapFlags::SHARED,
        Some(um.fd()),
        0,
    )
    .unwrap();
    assert_eq!(
        emu.nv_channels(0)[1].engine_class(false),
        Some(HOPPER_DMA_COPY_A)
    );
    assert_eq!(q.dma.engine_class, HOPPER_DMA_COPY_A);
    let bv = nv.ctl.get_build_version_v2(nv.client).unwrap();
    assert_eq!(
        (bv.driver_version.as_str(), bv.driver_branch.as_str()),
        ("580.142", "r580_00")
    );
    let flush = (NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_WRITE_BACK_YES
        << NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_WRITE_BACK_SHIFT)
        | (NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_INVALIDATE_YES
            << NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_INVALIDATE_SHIFT);
    nv.ctl
        .fb_flush_gpu_cache(nv.client, nv.subdevice, flush)
        .unwrap();
    assert_eq!(
        emu.nv_counters(),
        (1, 1),
        "one PERF_BOOST at bring-up, one flush"
    );
    // Without a software GPU the doorbell is recorded, not delivered.
    nv.submit(&q, &q.compute, 0, q.cmdq.va, 4).unwrap();
    let w = emu.nv_doorbell_writes(0);
    assert_eq!(
        (w[0].token, w[0].channel, w[0].delivered),
        (q.compute.token, Some(q.compute.handle), false)
    );
    // The usermode page is one per GPU: the second mapping sees the token the doorbell stored.
    assert_eq!(again.read_u32(0x90).unwrap(), q.compute.token);
    drv.write_doorbell(again.addr() + 0x90, u64::from(q.dma.token))
        .unwrap();
    assert_eq!(emu.nv_doorbell_writes(0).len(), 2);
}

#[test]
fn bringup_on_570_uses_the_570_layouts() {
    let (drv, emu) = emu_nv("hopper", "570.86.16");
    let nv = open_nv(&drv).unwrap();
    assert_eq!(nv.ctl.family(), DriverFamily::V570);
    let q = nv.queues().unwrap();
    assert_eq!(q.gr[0], 0x900);
    assert!(emu.nv_channels(0).iter().all(|c| c.scheduled));
    let bv = nv.ctl.get_build_version_v2(nv.client).unwrap();
    assert_eq!(bv.driver_branch, "r570_00");
    assert_eq!(
        nv.ctl.get_classlist_v2(nv.client, nv.device).unwrap(),
        nv.classes
    );
}

#[test]
fn ada_and_ampere_bringups_pick_their_classes() {
    for (arch, sm, compute, copy) in [
        ("ada", 0x809, ADA_COMPUTE_A, AMPERE_DMA_COPY_B),
        ("ampere", 0x806, AMPERE_COMPUTE_B, AMPERE_DMA_COPY_B),
    ] {
        let (drv, emu) = emu_nv(arch, "580.142");
        let nv = open_nv(&drv).unwrap();
        let q = nv.queues().unwrap();
        assert_eq!(q.gr[0], sm, "{arch}");
        assert_eq!(
            (q.compute.engine_class, q.dma.engine_class),
            (compute, copy),
            "{arch}"
        );
        assert_eq!(
            emu.nv_channels(0)[0].class,
            AMPERE_CHANNEL_GPFIFO_A,
            "{arch}"
        );
    }
}

#[test]
fn doorbells_reach_the_software_gpu() {
    let (drv, emu, rec) = emu_with_recorder();
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let ev = rec.events();
    let (ct, dt) = (q.compute.token, q.dma.token);
    assert_eq!(
        ev,
        vec![
            format!("created {HOPPER_CHANNEL_GPFIFO_A:#x} token {ct:#x}"),
            format!("engine {HOPPER_COMPUTE_A:#x}"),
            format!("created {HOPPER_CHANNEL_GPFIFO_A:#x} token {dt:#x}"),
            format!("engine {HOPPER_DMA_COPY_A:#x}"),
            format!("scheduled {ct:#x} true"),
            format!("scheduled {dt:#x} true"),
        ]
    );
    nv.submit(&q, &q.compute, 0, q.cmdq.va + 0x40, 6).unwrap();
    nv.submit(&q, &q.dma, 0, q.cmdq.va + 0x100, 3).unwrap();
    nv.submit(&q, &q.compute, 1, q.cmdq.va + 0x80, 2).unwrap();
    let entry = |va: u64, n: u64| va | (1 << 41) | (n << 42);
    assert_eq!(
        *rec.doorbells.lock().unwrap(),
        vec![
            (ct, 1, entry(q.cmdq.va + 0x40, 6)),
            (dt, 1, entry(q.cmdq.va + 0x100, 3)),
            (ct, 2, entry(q.cmdq.va + 0x80, 2))
        ]
    );
    let w = emu.nv_doorbell_writes(0);
    assert!(w.iter().all(|w| w.delivered) && w.len() == 3);
    let bell = nv.doorbell.addr() + 0x90;
    // An unknown token is recorded and ignored, as hardware ignores it.
    drv.write_doorbell(bell, 0xFFFF).unwrap();
    let last = *emu.nv_doorbell_writes(0).last().unwrap();
    assert_eq!(
        (last.token, last.channel, last.delivered),
        (0xFFFF, None, false)
    );
    fails_errno(
        drv.write_doorbell(nv.doorbell.addr() + 0x80, u64::from(ct)),
        libc::EFAULT,
        "not NOTIFY_CHANNEL_PENDING",
    );
    fails_errno(drv.write_doorbell(bell, 1 << 32), libc::EFAULT, "32-bit");
    // Descheduling stops delivery.
    nv.ctl.gpfifo_schedule(nv.client, q.tsg, false).unwrap();
    drv.write_doorbell(bell, u64::from(ct)).unwrap();
    assert_eq!(rec.doorbells.lock().unwrap().len(), 3);
    assert!(!emu.nv_doorbell_writes(0).last().unwrap().delivered);
}

#[test]
fn cpu_and_gpu_see_the_same_memory() {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let dev = emu.nv_device(0).unwrap();
    for (vram, size) in [(true, 2u64 << 20), (false, 0x3000)] {
        let b = nv.alloc(size, vram, true).unwrap();
        let cpu = b.cpu.as_ref().unwrap();
        assert_eq!(cpu.addr(), b.va, "GPU VA = CPU VA");
        cpu.write_u64(0x1008, 0xDEAD_BEEF_0000_0001).unwrap();
        let g = dev.translate(b.va + 0x1000, 16, true).unwrap();
        assert_eq!(g.read_u64(8).unwrap(), 0xDEAD_BEEF_0000_0001);
        g.write_u32(0, 77).unwrap();
        assert_eq!(cpu.read_u32(0x1000).unwrap(), 77);
        fails_fault(dev.translate(b.va + b.size - 8, 16, false), "runs past");
    }
    // GPU-only VRAM is mapped on the GPU, not on the CPU.
    let g = nv.alloc(2 << 20, true, false).unwrap();
    assert!(dev.is_mapped(g.va, 2 << 20) && g.cpu.is_none());
    // Host pages wrapped as an OS descriptor.
    let va = nv.va(0x4000).unwrap();
    let host = Mapping::map(
        &drv,
        Some(va),
        0x4000,
        Prot::RW,
        MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED,
        None,
        0,
    )
    .unwrap();
    let flags = (NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS << NVOS02_FLAGS_PHYSICALITY_SHIFT)
        | (NVOS02_FLAGS_COHERENCY_CACHED << NVOS02_FLAGS_COHERENCY_SHIFT)
        | (NVOS02_FLAGS_MAPPING_NO_MAP << NVOS02_FLAGS_MAPPING_SHIFT);
    let h = nv
        .gpu_fd
        .rm_alloc_memory(
            nv.client,
            nv.device,
            0x1000,
            NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            flags,
            va,
            0x3FFF,
        )
        .unwrap();
    assert_eq!(h, 0x1000);
    nv.map_gpu(h, va, 0x4000).unwrap();
    host.write_u32(0x2004, 0x5151).unwrap();
    assert_eq!(
        dev.translate(va + 0x2004, 4, false)
            .unwrap()
            .read_u32(0)
            .unwrap(),
        0x5151
    );
    // UVM_FREE unmaps on the GPU.
    nv.uvm.free(va, 0x4000).unwrap();
    fails_fault(dev.translate(va, 4, false), "unmapped VA");
    fails_fault(dev.translate(0x10, 4, false), "unmapped VA");
}

#[track_caller]
fn fails_fault<T: std::fmt::Debug>(r: Result<T>, needle: &str) {
    match r {
        Err(crate::Error::Fault(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected a fault ({needle}), got {other:?}"),
    }
}

#[test]
fn rc_error_writes_every_notifier_of_the_tsg() {
    let (drv, emu) = emu_nv("hopper", "580.142");
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let dev = emu.nv_device(0).unwrap();
    let ch = dev.channel(q.compute.token).unwrap();
    dev.rc_error(&ch, ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT)
        .unwrap();
    for c in [&q.compute, &q.dma] {
        let n = c.notifier.cpu.as_ref().unwrap();
        assert_ne!(n.read_u64(0).unwrap(), 0, "timestamp");
        assert_eq!(n.read_u32(8).unwrap(), 31, "info32 = exception type");
        assert_eq!(
            n.read_u32(12).unwrap(),
            0xFFFF_0000 | NV2080_ENGINE_TYPE_GRAPHICS,
            "status 0xFFFF, info16 GRAPHICS"
        );
    }
    dev.write_error_notifier(&ch, 1, 0xABC, 2, 0).unwrap();
    assert_eq!(
        q.compute
            .notifier
            .cpu
            .as_ref()
            .unwrap()
            .read_u32(16 + 8)
            .unwrap(),
        0xABC
    );
}

#[test]
fn free_and_close_tell_the_gpu() {
    let (drv, _emu, rec) = emu_with_recorder();
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    nv.ctl.rm_free(nv.client, q.tsg, q.dma.handle).unwrap();
    assert_eq!(
        rec.events().last().unwrap(),
        &format!("destroyed {:#x}", q.dma.handle)
    );
    fails_nv(
        nv.ctl.get_work_submit_token(nv.client, q.dma.handle),
        NV_ERR_INVALID_OBJECT_HANDLE,
        &["is not an object"],
    );
    fails_nv(
        nv.ctl.rm_free(nv.client, q.tsg, q.dma.handle),
        NV_ERR_OBJECT_NOT_FOUND,
        &["never allocated, or freed"],
    );
    // Closing the control fd frees the client and everything in it.
    drop(q);
    drop(nv);
    assert_eq!(
        rec.events().last().unwrap().split(' ').next(),
        Some("destroyed")
    );
    assert_eq!(
        rec.events()
            .iter()
            .filter(|e| e.starts_with("destroyed"))
            .count(),
        2
    );
}

#[test]
fn family_detection_falls_back_to_proc_and_refuses_unknown_families() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let gpu = drv.open("/dev/nvidia0", OpenFlags::RDWR).unwrap();
    // CHECK_VERSION_STR is control-device-only, so on a GPU node detection reads /proc.
    assert!(check_version_str(drv.as_ref(), gpu).is_err());
    assert_eq!(
        DriverFamily::detect(drv.as_ref(), gpu).unwrap(),
        (DriverFamily::V580, "580.142".into())
    );
    let (drv, _emu) = emu_nv("hopper", "550.54.15");
    let e = NvCtl::open(drv.clone()).unwrap_err();
    assert!(
        e.message()
            .contains("NVIDIA driver 550.54.15 is not supported")
            && e.message().contains("570.x, 575.x, 580.x, 590.x, 595.x"),
        "{e}"
    );
    // The override opens it anyway (with the layouts it names).
    let _k = crate::helpers::Context::new(&[("NV_DRIVER_FAMILY", 570)]);
    let ctl = NvCtl::open(drv.clone()).unwrap();
    assert_eq!(
        (ctl.family(), ctl.version()),
        (DriverFamily::V570, "550.54.15")
    );
    assert!(drv
        .read_file("/proc/driver/nvidia/version")
        .unwrap()
        .contains("Open Kernel Module for x86_64  550.54.15"));
}

#[test]
fn map_memory_dma_through_a_virtual_object() {
    for version in ["580.142", "570.86.16"] {
        let (drv, emu) = emu_nv("hopper", version);
        let nv = open_nv(&drv).unwrap();
        let mut vp = NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS {
            offset: 0,
            limit: 0x1_FFFF_FFFF_FFFF,
            hVASpace: 0,
            ..Default::default()
        };
        let virt = nv
            .ctl
            .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_VIRTUAL, &mut vp)
            .unwrap();
        let mut mp = nv.mem_params(2 << 20, true);
        let mem = nv
            .ctl
            .rm_alloc_with(nv.client, nv.device, 0, NV01_MEMORY_LOCAL_USER, &mut mp)
            .unwrap();
        let flags = (NVOS46_FLAGS_PAGE_SIZE_4KB << NVOS46_FLAGS_PAGE_SIZE_SHIFT)
            | (NVOS46_FLAGS_CACHE_SNOOP_ENABLE << NVOS46_FLAGS_CACHE_SNOOP_SHIFT)
            | (NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT);
        let p = MapMemoryDmaParams {
            h_client: nv.client,
            h_device: nv.device,
            h_dma: virt,
            h_memory: mem,
            length: 2 << 20,
            flags,
            dma_offset: 0x7000_0000_0000,
            ..Default::default()
        };
        assert_eq!(
            nv.ctl.rm_map_memory_dma(&p).unwrap(),
            0x7000_0000_0000,
            "{version}"
        );
        assert!(emu
            .nv_device(0)
            .unwrap()
            .is_mapped(0x7000_0000_0000, 2 << 20));
        fails_nv(
            nv.ctl.rm_map_memory_dma(&p),
            NV_ERR_INVALID_ADDRESS,
            &["overlaps"],
        );
        nv.ctl.rm_free(nv.client, nv.device, mem).unwrap();
        assert!(
            !emu.nv_device(0).unwrap().is_mapped(0x7000_0000_0000, 8),
            "freeing the memory unmaps it"
        );
    }
}

#[test]
fn version_check_modes_xfer_and_os_events() {
    let (drv, _emu) = emu_nv("hopper", "580.142");
    let ctl = NvCtl::open(drv.clone()).unwrap();
    let run = |cmd: u32, s: &str| {
        let mut a = nv_ioctl_rm_api_version_t {
            cmd,
            ..Default::default()
        };
        for (d, b) in a.versionString.iter_mut().zip(s.bytes()) {
            *d = b as std::ffi::c_char;
        }
        crate::driver::api::ioctl_struct(drv.as_ref(), ctl.fd(), &esc::CHECK_VERSION_STR, &mut a)
    };
    run(NV_RM_API_VERSION_CMD_STRICT, "580.142").unwrap();
    run(NV_RM_API_VERSION_CMD_RELAXED, "580.95.05").unwrap();
    fails_errno(
        run(NV_RM_API_VERSION_CMD_STRICT, "580.95.05"),
        libc::EINVAL,
        "API mismatch",
    );
    fails_errno(
        run(NV_RM_API_VERSION_CMD_RELAXED, "570.86.16"),
        libc::EINVAL,
        "kernel module has the version 580.142",
    );
    // The same QUERY through NV_ESC_IOCTL_XFER_CMD.
    let mut inner = nv_ioctl_rm_api_version_t {
        cmd: NV_RM_API_VERSION_CMD_QUERY,
        ..Default::default()
    };
    let mut x = nv_ioctl_xfer_t {
        cmd: NV_ESC_CHECK_VERSION_STR,
        size: 72,
        ptr: &mut inner as *mut _ as u64,
    };
    crate::driver::api::ioctl_struct(drv.as_ref(), ctl.fd(), &esc::IOCTL_XFER_CMD, &mut x).unwrap();
    assert_eq!(
        inner.versionString[..7]
            .iter()
            .map(|&c| c as u8)
            .collect::<Vec<_>>(),
        b"580.142"
    );
    let client = ctl.alloc_root_client().unwrap();
    let mut dp = NV0080_ALLOC_PARAMETERS::default();
    let device = ctl
        .rm_alloc_with(client, client, 0, NV01_DEVICE_0, &mut dp)
        .unwrap();
    ctl.alloc_os_event(client, device, ctl.fd()).unwrap();
    ctl.free_os_event(client, device, ctl.fd()).unwrap();
    fails_nv(
        ctl.free_os_event(client, device, ctl.fd()),
        NV_ERR_OBJECT_NOT_FOUND,
        &["no OS event"],
    );
    fails_nv(
        ctl.alloc_os_event(0x1234, device, ctl.fd()),
        NV_ERR_INVALID_CLIENT,
        &["NV_ESC_ALLOC_OS_EVENT"],
    );
}

#[test]
fn two_gpus_with_peer_access() {
    let e = EmuDriver::new(EmuConfig {
        count: 1,
        nv_count: 2,
        ..Default::default()
    })
    .unwrap();
    let drv: Arc<dyn Driver> = Arc::new(e.clone());
    let nv = open_nv(&drv).unwrap();
    let cards = nv.ctl.card_info(64).unwrap();
    assert_eq!(
        cards.iter().map(|c| c.minor_number).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_ne!(cards[0].gpu_id, cards[1].gpu_id);
    let uuid1 = e.nv_device(1).unwrap().uuid();
    assert_ne!(uuid1, nv.uuid);
    nv.uvm.register_gpu(uuid1, -1, 0, 0).unwrap();
    let b = nv.alloc(2 << 20, true, false).unwrap();
    let va = nv.va(2 << 20).unwrap();
    nv.uvm.create_external_range(va, 2 << 20).unwrap();
    let attrs = [mapping_attributes(
        uuid1,
        UvmGpuMappingTypeReadWriteAtomic,
        0,
    )];
    // GPU 1 has no registered VA space yet.
    fails_nv(
        nv.uvm
            .map_external_allocation(va, 2 << 20, 0, &attrs, nv.ctl.fd(), nv.client, b.handle),
        NV_ERR_INVALID_DEVICE,
        &["no registered VA space"],
    );
    assert!(e.nv_device(2).is_err());
    nv.uvm.enable_peer_access(nv.uuid, uuid1).unwrap();
    fails_nv(
        nv.uvm.enable_peer_access(nv.uuid, nv.uuid),
        NV_ERR_INVALID_DEVICE,
        &["two different"],
    );
}

#[test]
fn open_driver_serves_nv_under_mockgpu() {
    let _g = crate::helpers::Context::new(&[
        ("MOCKGPU", 1),
        ("MOCKGPU_NV_COUNT", 2),
        ("MOCKGPU_NV_DRIVER", 595),
    ]);
    let drv = crate::mockgpu::open_driver().unwrap();
    let ctl = NvCtl::open(drv.clone()).unwrap();
    assert_eq!(
        (ctl.family(), ctl.version()),
        (DriverFamily::V595, "595.45.04"),
        "a bare family stands for its measured tag"
    );
    let cards = ctl.card_info(8).unwrap();
    assert_eq!(cards.len(), 2);
    assert!(
        cards.iter().all(|c| c.pci_info.device_id == 0x2335),
        "GH100 by default"
    );
    drop(_g);
    let _g = crate::helpers::Context::new(&[("MOCKGPU", 1), ("MOCKGPU_NV_COUNT", 0)]);
    let drv = crate::mockgpu::open_driver().unwrap();
    fails_errno(
        drv.open("/dev/nvidiactl", OpenFlags::RDWR),
        libc::ENOENT,
        "MOCKGPU_NV_COUNT=0",
    );
    fails_errno(
        drv.read_file("/proc/driver/nvidia/version"),
        libc::ENOENT,
        "no NVIDIA driver",
    );
}
