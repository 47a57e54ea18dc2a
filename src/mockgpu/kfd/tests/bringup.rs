//! The correct bring-up sequence, end to end, on any driver; plus emulator-only observations
//! (doorbell log, the GPU's view of the buffers, topology text).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::driver::kfd::topology::{read_topology, NodeProperties};
use crate::driver::kfd::*;

/// What the bring-up saw, for driver-specific assertions.
pub(crate) struct Report {
    pub gpu_id: u32,
    pub compute: (u32, u64),
    pub sdma: (u32, u64),
    pub event_id: u32,
    pub doorbells: Vec<(u32, u64)>,
}

const PM4_NOP_2DW: u32 = 0xC000_1000;

fn check_cpu_roundtrip(buf: &Buf) -> Result<()> {
    let m = buf.cpu.as_ref().expect("CPU-mapped buffer");
    m.write_u32s(0, &[1, 2, 3, 0xdead_beef])?;
    m.write_u64(buf.size as usize - 8, 0x0123_4567_89ab_cdef)?;
    let mut out = [0u32; 4];
    m.read_u32s(0, &mut out)?;
    assert_eq!(out, [1, 2, 3, 0xdead_beef]);
    assert_eq!(m.read_u64(buf.size as usize - 8)?, 0x0123_4567_89ab_cdef);
    Ok(())
}

/// Submit `dwords` to a queue: write the ring at 0, the wptr (`units` of the queue), the doorbell.
fn submit(
    drv: &dyn Driver,
    db: &Mapping,
    qb: &QueueBufs,
    doorbell_offset: u64,
    dwords: &[u32],
    wptr: u64,
) -> Result<u64> {
    qb.ring
        .cpu
        .as_ref()
        .expect("ring mapped")
        .write_u32s(0, dwords)?;
    qb.rw
        .cpu
        .as_ref()
        .expect("rw mapped")
        .store_u64(0, wptr, Ordering::Release)?;
    let addr = db.addr() + (doorbell_offset & (KFD_DOORBELL_PROCESS_SLICE as u64 - 1));
    drv.write_doorbell(addr, wptr)?;
    Ok(wptr)
}

/// Poll the queue's rptr until it reaches `want` (real hardware: the CP consumed the NOPs).
fn wait_rptr(qb: &QueueBufs, want: u64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let rw = qb.rw.cpu.as_ref().expect("rw mapped");
    while rw.load_u64(8, Ordering::Acquire)? < want {
        if Instant::now() > deadline {
            panic!(
                "rptr stuck at {} (wanted {want})",
                rw.load_u64(8, Ordering::Acquire)?
            );
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// VRAM (host-visible) and GTT buffers at reserved VAs: CPU write/read through the mapping, free.
fn bringup_memory(dev: &Dev) -> Result<()> {
    let vram = dev.alloc(0x10000, VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC, true)?;
    let gtt = dev.alloc(0x10000, GTT_UC, true)?;
    check_cpu_roundtrip(&vram)?;
    check_cpu_roundtrip(&gtt)?;
    dev.free(vram)?;
    dev.free(gtt)
}

/// A compute and an SDMA queue with exactly sized buffers, one submission each through the
/// doorbell page, then DESTROY_QUEUE. Returns the (queue id, doorbell offset, doorbell value)s.
fn bringup_queues(dev: &Dev, gpu_runs: bool) -> Result<Vec<(u32, u64, u64)>> {
    let (drv, d) = (&dev.drv, dev.drv.as_ref());
    let cq = dev.queue_buffers(0x10000, true)?;
    let mut ca = dev.queue_args(&cq);
    ops::create_queue(d, dev.kfd, &mut ca)?;
    let sq = dev.queue_buffers(0x10000, false)?;
    let mut sa = dev.queue_args(&sq);
    ops::create_queue(d, dev.kfd, &mut sa)?;
    for a in [&ca, &sa] {
        assert_eq!(
            a.doorbell_offset & KFD_MMAP_TYPE_MASK,
            KFD_MMAP_TYPE_DOORBELL
        );
        assert_eq!(kfd_mmap_get_gpu_id(a.doorbell_offset), dev.gpu_id);
    }
    assert_ne!(ca.queue_id, sa.queue_id);
    let frame = !(KFD_DOORBELL_PROCESS_SLICE as u64 - 1);
    let base = ca.doorbell_offset & frame;
    assert_eq!(
        base,
        sa.doorbell_offset & frame,
        "one doorbell frame per process and GPU"
    );
    let db = Mapping::map(
        drv,
        None,
        KFD_DOORBELL_PROCESS_SLICE,
        Prot::RW,
        MapFlags::SHARED,
        Some(dev.kfd),
        base,
    )?;
    let c = submit(
        d,
        &db,
        &cq,
        ca.doorbell_offset,
        &[PM4_NOP_2DW, 0, PM4_NOP_2DW, 0],
        4,
    )?;
    let s = submit(d, &db, &sq, sa.doorbell_offset, &[0; 4], 16)?;
    if gpu_runs {
        wait_rptr(&cq, 4)?;
        wait_rptr(&sq, 16)?;
    }
    ops::destroy_queue(d, dev.kfd, ca.queue_id)?;
    ops::destroy_queue(d, dev.kfd, sa.queue_id)?;
    dev.free_queue_buffers(cq)?;
    dev.free_queue_buffers(sq)?;
    Ok(vec![
        (ca.queue_id, ca.doorbell_offset, c),
        (sa.queue_id, sa.doorbell_offset, s),
    ])
}

/// A user event page, signal events, WAIT_EVENTS timing out, SET_EVENT completing it, auto-reset.
fn bringup_events(dev: &Dev) -> Result<u32> {
    let d = dev.drv.as_ref();
    let page = dev.alloc(KFD_SIGNAL_EVENT_PAGE_SIZE as u64, GTT_UC, true)?;
    let ev = ops::create_event(d, dev.kfd, KFD_IOC_EVENT_SIGNAL, true, page.alloc.handle)?;
    assert_eq!(
        (ev.event_slot_index, ev.event_trigger_data),
        (ev.event_id, ev.event_id)
    );
    assert_eq!(ev.event_page_offset, KFD_MMAP_TYPE_EVENTS);
    let mailbox = page
        .cpu
        .as_ref()
        .expect("page mapped")
        .read_u64(8 * ev.event_slot_index as usize)?;
    assert_eq!(mailbox, UNSIGNALED_EVENT_SLOT);
    let ev2 = ops::create_event(d, dev.kfd, KFD_IOC_EVENT_SIGNAL, false, 0)?;
    assert_ne!(ev2.event_id, ev.event_id);
    let mut data = [ops::event_data(ev.event_id)];
    assert_eq!(
        ops::wait_events(d, dev.kfd, &mut data, false, 10)?,
        KFD_IOC_WAIT_RESULT_TIMEOUT
    );
    ops::set_event(d, dev.kfd, ev.event_id)?;
    assert_eq!(
        ops::wait_events(d, dev.kfd, &mut data, false, 1000)?,
        KFD_IOC_WAIT_RESULT_COMPLETE
    );
    assert_eq!(
        ops::wait_events(d, dev.kfd, &mut data, false, 0)?,
        KFD_IOC_WAIT_RESULT_TIMEOUT,
        "auto-reset"
    );
    ops::destroy_event(d, dev.kfd, ev2.event_id)?;
    ops::destroy_event(d, dev.kfd, ev.event_id)?;
    assert_eq!(
        errno(dev.free(page)),
        libc::EPERM,
        "the signal-event page cannot be freed"
    );
    Ok(ev.event_id)
}

/// The whole bring-up on GPU 0 of `drv`: topology, open /dev/kfd and the render node,
/// GET_VERSION, ACQUIRE_VM, memory, queues and doorbells, events, teardown. With `gpu_runs`, also
/// wait for the queues' rptrs to reach the submitted wptrs (real hardware).
pub(crate) fn run_bringup(drv: &Arc<dyn Driver>, gpu_runs: bool) -> Result<Report> {
    let dev = open_gpu(drv, 0)?;
    bringup_memory(&dev)?;
    let q = bringup_queues(&dev, gpu_runs)?;
    let event_id = bringup_events(&dev)?;
    drv.close(dev.render)?;
    drv.close(dev.kfd)?;
    Ok(Report {
        gpu_id: dev.gpu_id,
        compute: (q[0].0, q[0].1),
        sdma: (q[1].0, q[1].1),
        event_id,
        doorbells: q.iter().map(|&(id, _, v)| (id, v)).collect(),
    })
}

#[test]
fn emulator_accepts_the_bringup_sequence() {
    let (drv, emu) = emu(2);
    let r = run_bringup(&drv, false).unwrap();
    assert_eq!(r.gpu_id, emu.gpu_ids()[0]);
    let log = emu.doorbell_writes(r.gpu_id).unwrap();
    let seen: Vec<(u32, u64)> = log.iter().map(|w| (w.queue_id.unwrap(), w.value)).collect();
    assert_eq!(seen, r.doorbells);
    assert_eq!(log[1].slot as u64 * 8, r.sdma.1 & 0x1FFF);
    assert_eq!(r.event_id, 1, "signal event ids start at 1 (0 is reserved)");
    assert!(emu.queues().is_empty(), "queues destroyed");
}

#[test]
fn topology_matches_the_knobs() {
    let (drv, emu) = emu(3);
    let nodes = read_topology(drv.as_ref()).unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(
        nodes.iter().map(|n| n.gpu_id).collect::<Vec<_>>(),
        emu.gpu_ids()
    );
    assert_eq!(nodes[0].props.gfx_name().unwrap(), "gfx1100");
    assert_eq!(nodes[2].props.drm_render_minor().unwrap(), 130);
    assert_eq!(nodes[0].props.get("simd_count"), Some(192));
    assert_eq!(nodes[0].name, "gfx1100");
    let cpu = drv
        .read_file("/sys/devices/virtual/kfd/kfd/topology/nodes/0/gpu_id")
        .unwrap();
    assert_eq!(cpu.trim(), "0");
    let list = drv
        .list_dir("/sys/devices/virtual/kfd/kfd/topology/nodes")
        .unwrap();
    assert_eq!(list, vec!["0", "1", "2", "3"]);
    assert_eq!(
        errno(drv.read_file("/sys/devices/virtual/kfd/kfd/topology/nodes/4/gpu_id")),
        libc::ENOENT
    );
    assert_eq!(
        drv.list_dir("/dev/dri").unwrap(),
        vec!["renderD128", "renderD129", "renderD130"]
    );
    for spec in crate::mockgpu::GPU_SPECS {
        let e = crate::mockgpu::EmuDriver::new(crate::mockgpu::EmuConfig {
            count: 1,
            arch: spec.arch.into(),
            print_cwsr_props: true,
            ..Default::default()
        })
        .unwrap();
        let text = e
            .read_file("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
            .unwrap();
        let p = NodeProperties::parse(&text).unwrap();
        assert_eq!(p.gfx_name().unwrap(), spec.arch);
        assert!(p.get("cwsr_size").is_some() && p.get("ctl_stack_size").is_some());
    }
}

#[test]
fn gpu_view_equals_cpu_view_until_unmapped() {
    let (drv, emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let buf = dev.alloc(0x2000, GTT_UC, true).unwrap();
    buf.cpu.as_ref().unwrap().write_u32(0x1004, 0xfeed).unwrap();
    let gpu = emu.device(dev.gpu_id).unwrap();
    let view = gpu.translate(buf.va + 0x1000, 8, true).unwrap();
    assert_eq!(view.read_u32(4).unwrap(), 0xfeed);
    view.write_u32(0, 77).unwrap();
    assert_eq!(
        buf.cpu.as_ref().unwrap().read_u32(0x1000).unwrap(),
        77,
        "GPU writes visible to the CPU"
    );
    assert!(
        matches!(
            gpu.translate(buf.va + 0x1ffc, 8, false),
            Err(crate::Error::Fault(_))
        ),
        "runs past the buffer"
    );
    assert!(
        matches!(
            gpu.translate(buf.va - 0x1000, 4, false),
            Err(crate::Error::Fault(_))
        ),
        "unmapped"
    );
    dev.free(buf).unwrap();
    assert_eq!(
        view.read_u32(0).unwrap(),
        77,
        "a view handed out stays valid after free"
    );
    let dead = gpu.translate(0x1000, 4, false);
    assert!(matches!(dead, Err(crate::Error::Fault(_))));
}

#[test]
fn userptr_shares_the_callers_memory() {
    let (drv, emu) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let host = Mapping::map(
        &drv,
        None,
        0x4000,
        Prot::RW,
        MapFlags::SHARED | MapFlags::ANONYMOUS,
        None,
        0,
    )
    .unwrap();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | BASE_FLAGS;
    let a = ops::alloc_memory_of_gpu(
        drv.as_ref(),
        dev.kfd,
        dev.gpu_id,
        host.addr(),
        0x4000,
        flags,
        host.addr(),
    )
    .unwrap();
    assert_eq!(a.mmap_offset, host.addr());
    ops::map_memory_to_gpu(drv.as_ref(), dev.kfd, a.handle, &[dev.gpu_id]).unwrap();
    host.write_u64(0x3000, 99).unwrap();
    let v = emu
        .device(dev.gpu_id)
        .unwrap()
        .translate(host.addr() + 0x3000, 8, false)
        .unwrap();
    assert_eq!(v.read_u64(0).unwrap(), 99);
    // Private anonymous memory cannot be shared with the emulated GPU: EFAULT.
    let private = reserve(drv.as_ref(), 0x1000).unwrap();
    let r = ops::alloc_memory_of_gpu(
        drv.as_ref(),
        dev.kfd,
        dev.gpu_id,
        private,
        0x1000,
        flags,
        private,
    );
    assert_eq!(errno(r), libc::EFAULT);
}

#[test]
fn multi_gpu_mapping_and_partial_success() {
    let (drv, emu) = emu(2);
    let d0 = open_gpu(&drv, 0).unwrap();
    let render1 = drv.open("/dev/dri/renderD129", OpenFlags::RDWR).unwrap();
    let ids = emu.gpu_ids();
    ops::acquire_vm(drv.as_ref(), d0.kfd, render1, ids[1]).unwrap();
    let buf = d0.alloc(0x1000, GTT_UC, true).unwrap();
    assert_eq!(
        ops::map_memory_to_gpu(drv.as_ref(), d0.kfd, buf.alloc.handle, &ids).unwrap(),
        2
    );
    assert!(emu.device(ids[1]).unwrap().is_mapped(buf.va, 0x1000));
    let pair = [ids[1], 0xBAD];
    let mut a = kfd_ioctl_unmap_memory_from_gpu_args {
        handle: buf.alloc.handle,
        device_ids_array_ptr: pair.as_ptr() as u64,
        n_devices: 2,
        n_success: 0,
    };
    let r = crate::driver::api::ioctl_struct(
        drv.as_ref(),
        d0.kfd,
        &AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
        &mut a,
    );
    assert_eq!(errno(r), libc::EINVAL);
    assert_eq!(
        a.n_success, 1,
        "n_success counts the devices done before the failure"
    );
    assert!(!emu.device(ids[1]).unwrap().is_mapped(buf.va, 0x1000));
    d0.free(buf).unwrap();
}
