//! Software GPU tests (`mockgpu::amdgpu`), driven directly with the backend's PM4 and SDMA
//! builders: a `SparseMemory`, a test executor that records dispatches and doubles a buffer on
//! the host, and an interrupt recorder. They live with the backend because they build streams
//! with its builders; the emulator itself imports nothing from `runtime/`. Every wait is bounded
//! by [`TIMEOUT`] (a hang guard, not a timing threshold).

mod compute;
mod faults;
mod sdma;

use crate::hw::amd::targets::{GfxTarget, GFX1100};
use crate::mockgpu::amdgpu::{
    DispatchExecutor, DispatchState, EventSink, Gpu, IbPos, InterruptSource, QueueDesc, QueueFault,
    QueueId, QueueKind, QueueState,
};
use crate::mockgpu::gpu_memory::{GpuMemory, SparseMemory};
use crate::runtime::amd::pm4::{ExecArgs, ExecProgram, Pm4Buf};
use crate::runtime::amd::sdma::SdmaBuf;
use crate::{bail, Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

pub(super) const RING: u64 = 0x1000_0000;
pub(super) const RPTRS: u64 = 0x1100_0000;
pub(super) const EOP: u64 = 0x1200_0000;
pub(super) const SIGNALS: u64 = 0x2000_0000;
pub(super) const CODE: u64 = 0x3000_0000;
pub(super) const KERNARGS: u64 = 0x3100_0000;
pub(super) const DATA: u64 = 0x4000_0000;
pub(super) const DATA_SIZE: u64 = 1 << 20;
pub(super) const IB: u64 = 0x5000_0000;
pub(super) const MAILBOX: u64 = 0x6000_0000;

/// Mock program words at the program address: what the test executor does.
pub(super) const PRG_DOUBLE: u32 = 0xD0B1;
pub(super) const PRG_FAIL: u32 = 0xFA11;
pub(super) const PRG_PANIC: u32 = 0xDEAD;

/// Records dispatches; runs the "double" program: kernargs = [out: u64, in: u64], one u32 per
/// thread, out[i] = 2 * in[i].
#[derive(Default)]
pub(super) struct TestExecutor {
    pub dispatches: Mutex<Vec<DispatchState>>,
}

impl DispatchExecutor for TestExecutor {
    fn dispatch(&self, mem: &dyn GpuMemory, st: &DispatchState) -> Result<()> {
        self.dispatches.lock().unwrap().push(st.clone());
        match mem.read_u32(st.pgm_addr)? {
            PRG_DOUBLE => {
                let Some(ka) = st.user_sgpr_pair(0) else {
                    bail!(Runtime, "no kernarg pointer")
                };
                let (out, inp) = (mem.read_u64(ka)?, mem.read_u64(ka + 8)?);
                for i in 0..st.total_threads() {
                    let v = mem.read_u32(inp + 4 * i)?;
                    mem.write_u32(out + 4 * i, v.wrapping_mul(2))?;
                }
                Ok(())
            }
            PRG_FAIL => bail!(Runtime, "the test program failed on purpose"),
            PRG_PANIC => panic!("the test program panicked on purpose"),
            w => bail!(Runtime, "unknown mock program word {w:#x}"),
        }
    }
}

/// Records interrupts.
#[derive(Default)]
pub(super) struct Interrupts {
    pub seen: Mutex<Vec<(QueueId, InterruptSource, u32)>>,
}

impl EventSink for Interrupts {
    fn interrupt(&self, queue: QueueId, source: InterruptSource, context_id: u32) {
        self.seen.lock().unwrap().push((queue, source, context_id));
    }
}

/// A GPU over fresh memory with the standard mappings, and host-side submission helpers.
pub(super) struct Harness {
    pub mem: Arc<SparseMemory>,
    pub exec: Arc<TestExecutor>,
    pub irq: Arc<Interrupts>,
    pub gpu: Gpu,
    pub target: &'static GfxTarget,
    queues: Mutex<HashMap<QueueId, (QueueDesc, u64)>>,
    next_ring: Mutex<u64>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::for_target(&GFX1100)
    }

    pub fn for_target(target: &'static GfxTarget) -> Harness {
        let mem = Arc::new(SparseMemory::new());
        for (va, size) in [
            (RPTRS, 0x1000),
            (EOP, 0x1000),
            (SIGNALS, 0x1000),
            (CODE, 0x1000),
            (KERNARGS, 0x1000),
            (DATA, DATA_SIZE),
            (IB, 0x1000),
            (MAILBOX, 0x1000),
        ] {
            mem.map(va, size).unwrap();
        }
        mem.write_u32(CODE, PRG_DOUBLE).unwrap();
        mem.write_u32(CODE + 0x100, PRG_FAIL).unwrap();
        mem.write_u32(CODE + 0x200, PRG_PANIC).unwrap();
        let exec = Arc::new(TestExecutor::default());
        let irq = Arc::new(Interrupts::default());
        let gpu = Gpu::new(mem.clone(), exec.clone(), irq.clone(), target).unwrap();
        Harness {
            mem,
            exec,
            irq,
            gpu,
            target,
            queues: Mutex::new(HashMap::new()),
            next_ring: Mutex::new(0),
        }
    }

    /// Adds a queue with a freshly mapped ring of `ring_size` bytes.
    pub fn queue(&self, kind: QueueKind, ring_size: u64) -> QueueId {
        let mut n = self.next_ring.lock().unwrap();
        let ring_va = RING + *n * 0x10_0000;
        self.mem.map(ring_va, ring_size).unwrap();
        let eop_va = (kind == QueueKind::Compute).then_some(EOP);
        let desc = QueueDesc {
            kind,
            ring_va,
            ring_size,
            rptr_va: RPTRS + 8 * *n,
            eop_va,
        };
        *n += 1;
        let q = self.gpu.add_queue(desc).unwrap();
        self.queues.lock().unwrap().insert(q, (desc, 0));
        q
    }

    pub fn compute(&self) -> QueueId {
        self.queue(QueueKind::Compute, 4096)
    }

    pub fn sdma(&self) -> QueueId {
        self.queue(QueueKind::Sdma, 4096)
    }

    /// Writes `dwords` into the ring at the queue's wptr (no wrap rule applied: raw) and rings
    /// the doorbell. Returns the doorbell's result.
    pub fn submit_raw(&self, q: QueueId, dwords: &[u32]) -> Result<()> {
        let (desc, wptr) = self.queues.lock().unwrap()[&q];
        let unit = desc.kind.unit_bytes();
        let ring_units = desc.ring_size / unit;
        let mut w = wptr;
        for d in dwords {
            let at = (w % ring_units) * unit;
            self.mem.write_u32(desc.ring_va + at, *d).unwrap();
            w += 4 / unit;
        }
        self.queues.lock().unwrap().get_mut(&q).unwrap().1 = w;
        self.gpu.notify(q, w)
    }

    pub fn submit_pm4(&self, q: QueueId, b: &Pm4Buf) {
        let (desc, wptr) = self.queues.lock().unwrap()[&q];
        let w = b
            .copy_to_ring(desc.ring_size / 4, wptr, &mut |at, dws| {
                self.mem.write_dwords(desc.ring_va + 4 * at, dws)
            })
            .unwrap();
        self.queues.lock().unwrap().get_mut(&q).unwrap().1 = w;
        self.gpu.notify(q, w).unwrap();
    }

    pub fn submit_sdma(&self, q: QueueId, b: &SdmaBuf) {
        let (desc, wptr) = self.queues.lock().unwrap()[&q];
        let w = b
            .copy_to_ring(desc.ring_size, wptr, &mut |at, dws| {
                self.mem.write_dwords(desc.ring_va + at, dws)
            })
            .unwrap();
        self.queues.lock().unwrap().get_mut(&q).unwrap().1 = w;
        self.gpu.notify(q, w).unwrap();
    }

    pub fn idle(&self, q: QueueId) -> QueueState {
        self.gpu.wait_idle(q, TIMEOUT).unwrap()
    }

    /// The fault a queue reports (waiting for it, bounded).
    pub fn fault(&self, q: QueueId) -> QueueFault {
        match self.gpu.wait_idle(q, TIMEOUT) {
            Err(Error::Fault(_)) => self.gpu.queue_state(q).unwrap().fault.unwrap(),
            other => panic!("expected a fault on {q}, got {other:?}"),
        }
    }

    /// Polls (bounded) until the queue reports it is blocked on a wait.
    pub fn until_waiting(&self, q: QueueId) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.gpu.queue_state(q).unwrap().waiting {
            assert!(Instant::now() < deadline, "{q} never blocked");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    pub fn pm4(&self) -> Pm4Buf {
        Pm4Buf::new(self.target)
    }

    pub fn sdma_buf(&self) -> SdmaBuf {
        SdmaBuf::new(self.target)
    }

    pub fn rptr_in_memory(&self, q: QueueId) -> u64 {
        let (desc, _) = self.queues.lock().unwrap()[&q];
        self.mem.read_u64(desc.rptr_va).unwrap()
    }
}

/// A launch of the mock program at `code` doubling `n` u32s from DATA to DATA + 0x8000.
pub(super) fn double_launch(
    b: &mut Pm4Buf,
    code: u64,
    n: u32,
) -> crate::runtime::amd::pm4::ExecPatch {
    let prg = ExecProgram {
        code_addr: code,
        rsrc1: 0,
        rsrc2: 2 << 1,
        rsrc3: 0,
        kernel_code_properties: 0x408,
        kernarg_preload: 0,
        group_segment_size: 0,
        private_segment_size: 0,
    };
    let args = ExecArgs {
        kernargs: KERNARGS,
        global: [n / 32, 1, 1],
        local: [32, 1, 1],
        scratch: None,
        dispatch_ptr: None,
    };
    b.exec(&prg, &args).unwrap()
}
