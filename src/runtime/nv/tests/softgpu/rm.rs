//! The software GPU behind the emulated RM/UVM: the ABI layer's bring-up (the order of tinygrad's
//! `NVDevice.__init__`, through the `driver::nv` wrappers), then real submissions on its compute
//! and DMA channels (GP entries in the RM GPFIFO area, USERD in RM memory, doorbells through the
//! usermode page), and a fault landing in the channels' error notifiers.

use super::{TestExecutor, TIMEOUT};
use crate::driver::nv::tests::{open_nv, Chan, Nv, Queues};
use crate::driver::{Driver, Mapping};
use crate::hw::nv::arch::select_classes;
use crate::mockgpu::nvgpu::nv_gpu_factory;
use crate::mockgpu::{EmuConfig, EmuDriver};
use crate::runtime::nv::push::PushBuf;
use crate::sys::nv::common::{NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM};
use std::sync::Arc;
use std::time::Instant;

/// Low GPU VAs for a test: pushbuffers and semaphores must sit below 2^40 (GP entries and
/// Ampere host semaphores hold 40-bit addresses; `clc56f.h` SEM_ADDR_HI), but the emulated driver
/// hands out CPU addresses wherever the kernel puts them. The buffers below are CPU-mapped in the
/// ABI tests' window and GPU-mapped (UVM external ranges need no CPU mapping) at a low VA of their
/// own.
struct Low {
    next: u64,
}

impl Low {
    fn new(slot: u64) -> Low {
        Low {
            next: 0x10_0000_0000 + slot * 0x1_0000_0000,
        }
    }

    /// RM memory: (CPU view, GPU VA).
    fn alloc(&mut self, nv: &Nv, size: u64, vram: bool) -> (Mapping, u64) {
        let class = if vram {
            NV01_MEMORY_LOCAL_USER
        } else {
            NV01_MEMORY_SYSTEM
        };
        let gpu_va = self.next;
        self.next += size.next_multiple_of(2 << 20);
        let mut p = nv.mem_params(size, vram);
        let handle = nv
            .ctl
            .rm_alloc_with(nv.client, nv.device, 0, class, &mut p)
            .unwrap();
        let cpu = nv
            .map_cpu(handle, nv.va(size).unwrap(), size, vram)
            .unwrap();
        nv.map_gpu(handle, gpu_va, size).unwrap();
        (cpu, gpu_va)
    }
}

/// The bring-up plus low command and signal buffers.
struct Rig {
    nv: Nv,
    q: Queues,
    cmdq: (Mapping, u64),
    signals: (Mapping, u64),
    data: (Mapping, u64),
    exec: Arc<TestExecutor>,
}

fn rm_gpu(arch: &str, slot: u64) -> Rig {
    let exec = Arc::new(TestExecutor::default());
    let e = EmuDriver::new(EmuConfig {
        count: 1,
        nv_arch: arch.into(),
        nv_gpu_factory: Some(nv_gpu_factory(exec.clone())),
        ..Default::default()
    })
    .unwrap();
    let drv: Arc<dyn Driver> = Arc::new(e);
    let nv = open_nv(&drv).unwrap();
    let q = nv.queues().unwrap();
    let mut low = Low::new(slot);
    let (cmdq, signals, data) = (
        low.alloc(&nv, 2 << 20, true),
        low.alloc(&nv, 0x1000, false),
        low.alloc(&nv, 2 << 20, true),
    );
    Rig {
        nv,
        q,
        cmdq,
        signals,
        data,
        exec,
    }
}

impl Rig {
    /// Writes `b` into the command buffer at `off` and submits it on `ch` as entry `put`.
    fn submit(&self, ch: &Chan, put: u32, off: u64, b: &PushBuf) {
        self.cmdq.0.write_u32s(off as usize, b.dwords()).unwrap();
        let va = self.cmdq.1 + off;
        self.nv
            .submit(&self.q, ch, put, va, b.len() as u64)
            .unwrap();
    }

    /// Polls the u64 at `off` of the signal page until it equals `want`.
    fn wait_signal(&self, off: usize, want: u64) {
        let sig = &self.signals.0;
        let deadline = Instant::now() + TIMEOUT;
        while sig.read_u64(off).unwrap() != want {
            assert!(
                Instant::now() < deadline,
                "signal at {off:#x} never reached {want}"
            );
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

#[test]
fn h200_channels_run_on_the_software_gpu() {
    let r = rm_gpu("hopper", 0);
    let classes = select_classes(&r.nv.classes).unwrap();
    assert_eq!(classes.arch.compute_class, r.q.compute.engine_class);
    let sig = r.signals.1;
    // Compute channel: bind the class, wait for the DMA channel's copy, signal.
    let mut b = PushBuf::new(classes);
    b.set_object(1, classes.arch.compute_class).unwrap();
    b.wait(sig, 1, false).unwrap();
    b.signal(sig + 0x10, 2).unwrap();
    r.submit(&r.q.compute, 0, 0, &b);
    // DMA channel: copy 256 bytes, then release the semaphore.
    let data = &r.data.0;
    for i in 0..64 {
        data.write_u32(4 * i, 0x5000 + i as u32).unwrap();
    }
    let mut c = PushBuf::new(classes);
    c.copy_setup().unwrap();
    c.copy(r.data.1 + 0x1000, r.data.1, 256).unwrap();
    c.copy_signal(sig, 1, false).unwrap();
    r.submit(&r.q.dma, 0, 0x1000, &c);
    r.wait_signal(0x10, 2);
    assert_eq!(data.read_u32(0x1000 + 4 * 63).unwrap(), 0x5000 + 63);
    // GPGet was published into the RM USERD (right after each ring).
    let fifo = r.q.gpfifo.cpu.as_ref().unwrap();
    let userd_get = |ch: &Chan| fifo.read_u32((ch.userd_off + 0x88) as usize).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while userd_get(&r.q.compute) != 1 || userd_get(&r.q.dma) != 1 {
        assert!(Instant::now() < deadline, "GPGet not published");
        std::thread::yield_now();
    }
}

#[test]
fn a_channel_fault_reaches_the_error_notifiers() {
    let r = rm_gpu("hopper", 1);
    let classes = select_classes(&r.nv.classes).unwrap();
    let mut b = PushBuf::new(classes);
    b.signal(0x7777_0000, 1).unwrap(); // not mapped by UVM: an MMU fault
    r.submit(&r.q.compute, 0, 0, &b);
    let n = r.q.compute.notifier.cpu.as_ref().unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while n.read_u32(8).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no RC error in the notifier");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert_eq!(
        n.read_u32(8).unwrap(),
        31,
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"
    );
    // RM notifies the TSG's channels one after another: the DMA channel's may land later.
    let dma = r.q.dma.notifier.cpu.as_ref().unwrap();
    while dma.read_u32(8).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no RC error in the DMA notifier");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert_eq!(dma.read_u32(8).unwrap(), 31, "every channel of the TSG");
}

#[test]
fn ada_picks_qmd_v03_and_40bit_semaphores() {
    let r = rm_gpu("ada", 2);
    let classes = select_classes(&r.nv.classes).unwrap();
    assert_eq!(
        classes.arch.qmd_version,
        crate::hw::nv::arch::QmdVersion::V03_00
    );
    assert_eq!(classes.channel.sem_addr_bits, 40);
    let mut b = PushBuf::new(classes);
    b.set_object(1, classes.arch.compute_class).unwrap();
    b.sem_write(r.signals.1 + 0x20, 9, true).unwrap();
    r.submit(&r.q.compute, 0, 0, &b);
    r.wait_signal(0x20, 9);
    assert!(r.exec.launches.lock().unwrap().is_empty());
}

/// `out[i] = in[i] + 7` over 64 elements on an emulated H200 through RM memory, with the QMD
/// edited by `edit` before the launch; returns the rig after the completion signal.
fn h200_add_launch(edit: impl Fn(&mut crate::hw::nv::qmd::AnyQmd)) -> Rig {
    use super::PRG_ADD;
    use crate::hw::nv::qmd::{ConstantBuffer, Qmd};
    use crate::runtime::nv::qmd::{program_qmd, QmdProgram};
    let r = rm_gpu("hopper", 3);
    let classes = select_classes(&r.nv.classes).unwrap();
    let arch = classes.arch;
    let (mem, base) = (&r.data.0, r.data.1);
    // Layout in the data buffer: program at 0, kernargs at 0x1000, QMD at 0x2000, in/out after.
    mem.write_u32(0, PRG_ADD).unwrap();
    let pb = arch.cbuf0.param_base as usize;
    mem.write_u64(0x1000 + pb, base + 0x4_0000).unwrap();
    mem.write_u64(0x1000 + pb + 8, base + 0x3_0000).unwrap();
    mem.write_u32(0x1000 + pb + 16, 7).unwrap();
    for i in 0..64 {
        mem.write_u32(0x3_0000 + 4 * i, i as u32).unwrap();
    }
    let prg = QmdProgram {
        program_addr: base,
        code_bytes: 0x100,
        register_count: 8,
        shared: arch.shared_mem_config(0, 0).unwrap(),
        slm_bytes_per_thread: 0x240,
        sm: 90,
        const_banks: vec![],
    };
    let mut q = program_qmd(arch, &prg).unwrap();
    let cb = ConstantBuffer {
        addr: base + 0x1000,
        size: (pb as u32 + 20).div_ceil(16) * 16,
        invalidate: true,
    };
    q.set_launch([2, 1, 1], [32, 1, 1], cb).unwrap();
    edit(&mut q);
    mem.write_u32s(0x2000, q.dwords()).unwrap();
    let mut b = PushBuf::new(classes);
    b.set_object(1, arch.compute_class).unwrap();
    b.memory_barrier().unwrap();
    b.send_pcas(base + 0x2000).unwrap();
    b.signal(r.signals.1, 1).unwrap();
    r.submit(&r.q.compute, 0, 0, &b);
    r.wait_signal(0, 1);
    r
}

#[test]
fn h200_launch_through_rm_memory() {
    let r = h200_add_launch(|_| {});
    for i in 0..64 {
        assert_eq!(r.data.0.read_u32(0x4_0000 + 4 * i).unwrap(), i as u32 + 7);
    }
    assert_eq!(r.exec.launches.lock().unwrap()[0].grid, [2, 1, 1]);
}

/// A V04 QMD of QMD_TYPE QUEUE (0) runs no CTA but still completes, as a real H200 did before
/// the builder set GRID_CTA (driver 580.159.04): the output stays untouched, the signal arrives.
#[test]
fn h200_queue_type_qmd_runs_no_cta() {
    use crate::hw::nv::qmd::{Qmd, QMD_TYPE_GRID_CTA, QMD_TYPE_QUEUE};
    let r = h200_add_launch(|q| {
        let f = q.layout().qmd_type.unwrap();
        assert_eq!(f.get(q.dwords()), u64::from(QMD_TYPE_GRID_CTA));
        f.set(q.dwords_mut(), QMD_TYPE_QUEUE.into()).unwrap();
    });
    for i in 0..64 {
        assert_eq!(r.data.0.read_u32(0x4_0000 + 4 * i).unwrap(), 0);
    }
    assert!(r.exec.launches.lock().unwrap().is_empty());
}
