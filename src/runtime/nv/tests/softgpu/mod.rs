//! Software NV GPU (`mockgpu::nvgpu`) tests, driven directly (here rather than in the emulator's
//! tree because they use the backend's builders, and the emulator sits below the backend): a `SparseMemory`, channels submitted through the
//! runtime's own [`GpFifo`] ring writer, pushbuffers from the runtime's builders, a test executor
//! that records launches and adds a constant on the host, and an event recorder. Every wait is
//! bounded by [`TIMEOUT`] (a hang guard, not a timing threshold).

mod exec;
mod faults;
mod rm;

use crate::hw::nv::arch::NvArch;
use crate::hw::nv::arch::{NvClasses, HOPPER_COMPUTE_A};
use crate::hw::nv::gpfifo::{gp_entry, USERD_GP_GET, USERD_GP_PUT};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::mockgpu::gpu_memory::SparseMemory;
use crate::mockgpu::nvgpu::*;
use crate::runtime::nv::gpfifo::{GpFifo, GpFifoIo};
use crate::runtime::nv::push::PushBuf;
use crate::{bail, Error, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

pub(super) const RINGS: u64 = 0x1000_0000;
pub(super) const USERDS: u64 = 0x1100_0000;
pub(super) const PBS: u64 = 0x1200_0000;
pub(super) const SIGNALS: u64 = 0x2000_0000;
pub(super) const QMDS: u64 = 0x3000_0000;
pub(super) const CODE: u64 = 0x3100_0000;
pub(super) const KERNARGS: u64 = 0x3200_0000;
pub(super) const DATA: u64 = 0x4000_0000;
pub(super) const DATA_SIZE: u64 = 1 << 20;
pub(super) const RING_ENTRIES: u32 = 64;

/// Program words at a program address: what the test executor does.
pub(super) const PRG_ADD: u32 = 0xADD0;
pub(super) const PRG_FAIL: u32 = 0xFA11;
pub(super) const PRG_PANIC: u32 = 0xDEAD;

/// Records launches; runs PRG_ADD: params [out: u64, in: u64, n: u32], out[i] = in[i] + n for
/// every thread; reads mock cubin blobs (recording their names).
#[derive(Default)]
pub(super) struct TestExecutor {
    pub launches: Mutex<Vec<NvDispatch>>,
    pub mock_names: Mutex<Vec<String>>,
}

impl NvDispatchExecutor for TestExecutor {
    fn dispatch(&self, mem: &dyn GpuMemory, d: &NvDispatch) -> Result<()> {
        self.launches.lock().unwrap().push(d.clone());
        if let Ok(k) = read_mock_kernel(mem, d.program_addr) {
            self.mock_names.lock().unwrap().push(k.name);
            return Ok(());
        }
        match mem.read_u32(d.program_addr)? {
            PRG_ADD => {
                let p = d.read_params(mem, 20)?;
                let out = u64::from_le_bytes(p[0..8].try_into().unwrap());
                let inp = u64::from_le_bytes(p[8..16].try_into().unwrap());
                let n = u32::from_le_bytes(p[16..20].try_into().unwrap());
                for i in 0..d.total_threads() {
                    let v = mem.read_u32(inp + 4 * i)?;
                    mem.write_u32(out + 4 * i, v.wrapping_add(n))?;
                }
                Ok(())
            }
            PRG_FAIL => bail!(Runtime, "the test program failed on purpose"),
            PRG_PANIC => panic!("the test program panicked on purpose"),
            w => bail!(Runtime, "unknown test program word {w:#x}"),
        }
    }
}

/// Records interrupts and faults.
#[derive(Default)]
pub(super) struct Events {
    pub interrupts: Mutex<Vec<(ChannelId, NvInterrupt)>>,
    pub faults: Mutex<Vec<ChannelFault>>,
}

impl NvEventSink for Events {
    fn interrupt(&self, channel: ChannelId, source: NvInterrupt) {
        self.interrupts.lock().unwrap().push((channel, source));
    }
    fn channel_fault(&self, _channel: ChannelId, fault: &ChannelFault) {
        self.faults.lock().unwrap().push(fault.clone());
    }
}

/// The host side of one channel: its ring writer and where its pushbuffers go.
pub(super) struct Chan {
    pub id: ChannelId,
    pub token: u32,
    pub fifo: GpFifo,
    pub index: u64,
    pub pb_next: u64,
}

impl Chan {
    pub fn ring_va(&self) -> u64 {
        RINGS + 0x1000 * self.index
    }
    pub fn userd_va(&self) -> u64 {
        USERDS + 0x1000 * self.index
    }
}

/// [`GpFifoIo`] over the test memory and the GPU's doorbell.
struct Io<'a> {
    h: &'a Harness,
    ring: u64,
    userd: u64,
}

impl GpFifoIo for Io<'_> {
    fn write_entry(&mut self, index: u32, entry: u64) -> Result<()> {
        self.h
            .mem
            .write_u64(self.ring + 8 * u64::from(index), entry)
    }
    fn read_gp_get(&mut self) -> Result<u32> {
        self.h.mem.read_u32(self.userd + USERD_GP_GET)
    }
    fn write_gp_put(&mut self, put: u32) -> Result<()> {
        self.h.mem.write_u32(self.userd + USERD_GP_PUT, put)
    }
    fn ring_doorbell(&mut self, token: u32) -> Result<()> {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.h.gpu.doorbell(token).map(|_| ())
    }
}

/// A GPU over fresh memory with the standard mappings.
pub(super) struct Harness {
    pub mem: Arc<SparseMemory>,
    pub exec: Arc<TestExecutor>,
    pub events: Arc<Events>,
    pub gpu: NvGpu,
    pub classes: NvClasses,
    next_chan: Mutex<u64>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::for_arch(&HOPPER_COMPUTE_A)
    }

    pub fn for_arch(arch: &'static NvArch) -> Harness {
        let mem = Arc::new(SparseMemory::new());
        for (va, size) in [
            (RINGS, 0x10000),
            (USERDS, 0x10000),
            (PBS, 1 << 20),
            (SIGNALS, 0x1000),
            (QMDS, 0x10000),
            (CODE, 0x10000),
            (KERNARGS, 0x10000),
            (DATA, DATA_SIZE),
        ] {
            mem.map(va, size).unwrap();
        }
        mem.write_u32(CODE, PRG_ADD).unwrap();
        mem.write_u32(CODE + 0x100, PRG_FAIL).unwrap();
        mem.write_u32(CODE + 0x200, PRG_PANIC).unwrap();
        let exec = Arc::new(TestExecutor::default());
        let events = Arc::new(Events::default());
        let gpu = NvGpu::new(mem.clone(), exec.clone(), events.clone(), arch).unwrap();
        Harness {
            mem,
            exec,
            events,
            gpu,
            classes: NvClasses::preferred(arch),
            next_chan: Mutex::new(0),
        }
    }

    /// A channel with the arch's compute and preferred copy class allocated on it.
    pub fn channel(&self) -> Chan {
        let index = {
            let mut n = self.next_chan.lock().unwrap();
            *n += 1;
            *n - 1
        };
        let userd: Arc<dyn UserdAccess> = Arc::new(UserdAt {
            mem: self.mem.clone(),
            va: USERDS + 0x1000 * index,
        });
        let token = 0x100 + index as u32;
        let desc = ChannelDesc {
            gpfifo_va: RINGS + 0x1000 * index,
            entries: RING_ENTRIES,
            userd,
            token,
            channel_class: self.classes.channel.class,
        };
        let id = self.gpu.add_channel(desc).unwrap();
        self.gpu
            .bind_engine(id, self.classes.arch.compute_class)
            .unwrap();
        self.gpu.bind_engine(id, self.classes.copy.class).unwrap();
        Chan {
            id,
            token,
            fifo: GpFifo::new(RING_ENTRIES, token).unwrap(),
            index,
            pb_next: PBS + 0x10000 * index,
        }
    }

    /// A pushbuffer builder for this GPU's classes.
    pub fn push(&self) -> PushBuf {
        PushBuf::new(self.classes)
    }

    /// Copies `dwords` into the channel's pushbuffer area and submits one GP entry for them.
    pub fn submit_dwords(&self, ch: &mut Chan, dwords: &[u32]) {
        let va = ch.pb_next;
        self.mem.write_dwords(va, dwords).unwrap();
        ch.pb_next += (4 * dwords.len() as u64).div_ceil(256) * 256;
        let entry = gp_entry(va, dwords.len() as u32).unwrap();
        let mut io = Io {
            h: self,
            ring: ch.ring_va(),
            userd: ch.userd_va(),
        };
        ch.fifo.submit(entry, &mut io, TIMEOUT).unwrap();
    }

    pub fn submit(&self, ch: &mut Chan, b: &PushBuf) {
        self.submit_dwords(ch, b.dwords());
    }

    pub fn idle(&self, ch: &Chan) -> ChannelState {
        self.gpu.wait_idle(ch.id, TIMEOUT).unwrap()
    }

    /// The channel's fault, after waiting for it to be reported.
    pub fn fault(&self, ch: &Chan) -> ChannelFault {
        let e = self.gpu.wait_idle(ch.id, TIMEOUT).unwrap_err();
        assert!(matches!(e, Error::Fault(_)), "expected a fault, got {e}");
        self.gpu.channel_state(ch.id).unwrap().fault.unwrap()
    }

    /// Polls until `cond` holds on the channel state.
    pub fn until(&self, ch: &Chan, what: &str, cond: impl Fn(&ChannelState) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        while !cond(&self.gpu.channel_state(ch.id).unwrap()) {
            assert!(
                Instant::now() < deadline,
                "{what}: not reached within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}
