//! The software NV GPU's seams to the rest of the emulator: who runs a launched grid
//! ([`NvDispatchExecutor`], given an [`NvDispatch`] decoded from the QMD), who hears interrupts
//! and channel deaths ([`NvEventSink`]: NON_STALL_INTERRUPT, copy-engine interrupts, faults, so the
//! emulated RM can write the channel's error notifier), and where a channel's USERD lives
//! ([`UserdAccess`]: RM keeps it in a memory object that need not be GPU-mapped).
//!
//! Memory goes through [`GpuMemory`] (shared with the AMD software GPU), whose errors fault the
//! channel as MMU faults.
//!
//! Not guaranteed: the GPU does not interpret kernel parameters; an executor finds them in
//! constant buffer 0 at [`NvDispatch::param_base`] and the program (e.g. a mock cubin blob,
//! [`read_mock_kernel`]) at [`NvDispatch::program_addr`].

use super::{ChannelFault, ChannelId};
use crate::hw::nv::arch::QmdVersion;
use crate::hw::nv::gpfifo::{USERD_GP_GET, USERD_GP_PUT};
use crate::hw::nv::qmd::ConstantBuffer;
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::mockgpu::nvgpu::cubin::{MockKernel, MOCK_HEADER_BYTES};
use crate::Result;
use std::sync::Arc;

/// One grid launch as the compute engine hands it to the SMs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvDispatch {
    pub channel: ChannelId,
    /// The compute class the QMD was decoded for.
    pub compute_class: u32,
    /// Where the QMD was read from (SEND_PCAS_A << 8, a dependent pointer, or the inline
    /// QMD's address).
    pub qmd_addr: u64,
    pub qmd_version: QmdVersion,
    /// CTAs per dimension.
    pub grid: [u32; 3],
    /// Threads per CTA per dimension.
    pub block: [u32; 3],
    /// The kernel's first instruction (or a mock cubin blob).
    pub program_addr: u64,
    pub register_count: u32,
    /// SHARED_MEMORY_SIZE in bytes (the reserved 1 KiB included).
    pub shared_memory_size: u32,
    /// SHADER_LOCAL_MEMORY_LOW_SIZE / HIGH_SIZE in bytes per thread.
    pub slm: (u32, u32),
    pub sass_version: u32,
    /// Constant buffers 0..8 as bound in the QMD.
    pub cbufs: [Option<ConstantBuffer>; 8],
    /// Offset of the kernel parameters in constant buffer 0 (the arch's cbuf0 layout).
    pub param_base: u32,
    /// SET_SHADER_SHARED_MEMORY_WINDOW / SET_SHADER_LOCAL_MEMORY_WINDOW as the channel set them.
    pub shared_window: u64,
    pub local_window: u64,
}

impl NvDispatch {
    /// Constant buffer 0 (the launch's kernargs block); always bound (the GPU checks it).
    pub fn cbuf0(&self) -> ConstantBuffer {
        self.cbufs[0].unwrap_or(ConstantBuffer {
            addr: 0,
            size: 0,
            invalidate: false,
        })
    }

    /// Total threads of the grid.
    pub fn total_threads(&self) -> u64 {
        (0..3)
            .map(|i| u64::from(self.grid[i]) * u64::from(self.block[i]))
            .product()
    }

    /// Reads `len` parameter bytes (from the parameter base of constant buffer 0).
    pub fn read_params(&self, mem: &dyn GpuMemory, len: u32) -> Result<Vec<u8>> {
        let cb = self.cbuf0();
        crate::ensure!(
            u64::from(self.param_base) + u64::from(len) <= u64::from(cb.size),
            Runtime,
            "NV dispatch: {len} parameter bytes at {:#x} exceed constant buffer 0 ({:#x} bytes)",
            self.param_base,
            cb.size
        );
        let mut out = vec![0u8; len as usize];
        mem.read(cb.addr + u64::from(self.param_base), &mut out)?;
        Ok(out)
    }
}

/// Runs a launched grid. Called on the GPU thread; the channel waits until it returns.
pub trait NvDispatchExecutor: Send + Sync {
    /// Execute the whole grid; an error (or a panic) faults the channel with its message.
    fn dispatch(&self, mem: &dyn GpuMemory, d: &NvDispatch) -> Result<()>;
}

/// What raised an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvInterrupt {
    /// The host NON_STALL_INTERRUPT method.
    NonStall,
    /// A copy-engine LAUNCH_DMA with INTERRUPT_TYPE set.
    CopyEngine,
}

/// Receives the GPU's interrupts and channel faults (the emulated RM writes the channel's error
/// notifier for a fault: RC error `fault.kind.rc_error_type()`).
pub trait NvEventSink: Send + Sync {
    fn interrupt(&self, channel: ChannelId, source: NvInterrupt);
    /// The channel stopped on `fault`; nothing after it runs.
    fn channel_fault(&self, channel: ChannelId, fault: &ChannelFault);
}

/// An [`NvEventSink`] that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNvEvents;

impl NvEventSink for NoNvEvents {
    fn interrupt(&self, _channel: ChannelId, _source: NvInterrupt) {}
    fn channel_fault(&self, _channel: ChannelId, _fault: &ChannelFault) {}
}

/// A channel's USERD: GPPut (written by the process) and GPGet (written by the GPU).
pub trait UserdAccess: Send + Sync {
    /// USERD GPPut (0x8C).
    fn read_gp_put(&self) -> Result<u32>;
    /// Stores USERD GPGet (0x88).
    fn write_gp_get(&self, gp_get: u32) -> Result<()>;
    /// USERD GPGet as last stored.
    fn read_gp_get(&self) -> Result<u32>;
}

/// USERD at a GPU virtual address (tinygrad puts it right after the ring, in GPU-mapped memory).
pub struct UserdAt {
    pub mem: Arc<dyn GpuMemory>,
    pub va: u64,
}

impl UserdAccess for UserdAt {
    fn read_gp_put(&self) -> Result<u32> {
        self.mem.read_u32(self.va + USERD_GP_PUT)
    }
    fn write_gp_get(&self, gp_get: u32) -> Result<()> {
        self.mem.write_u32(self.va + USERD_GP_GET, gp_get)
    }
    fn read_gp_get(&self) -> Result<u32> {
        self.mem.read_u32(self.va + USERD_GP_GET)
    }
}

/// Reads the mock cubin blob (`crate::mockgpu::nvgpu::cubin`) a QMD's program address points
/// at: what an executor running UOps needs.
pub fn read_mock_kernel(mem: &dyn GpuMemory, program_addr: u64) -> Result<MockKernel> {
    let mut header = [0u8; MOCK_HEADER_BYTES];
    mem.read(program_addr, &mut header)?;
    let len = MockKernel::blob_len(&header)?;
    let mut blob = vec![0u8; len];
    mem.read(program_addr, &mut blob)?;
    super::cubin::parse_mock_blob(&blob)
}
