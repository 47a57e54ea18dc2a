//! The software NV GPU's [`NvDispatchExecutor`] for mock cubins: it reads the blob at the QMD's
//! program address through GPU memory ([`read_mock_kernel`]), checks that the blob's parameter
//! bytes match its UOps (`8 * buffers + 4 * variables`; else a fault "param size mismatch ...")
//! and that its parameter base is the arch's, reads the parameters from constant buffer 0 at the
//! parameter base, and runs the UOps on the UOp interpreter with the QMD's grid and block. Buffers
//! are GPU virtual addresses: every load and store goes through the GPU's page tables, so an
//! access to unmapped memory faults the channel naming the address (RM then writes the MMU/GR
//! error into the error notifiers).
//!
//! The UOps path is the shared executor core ([`crate::mockgpu::exec`]: DEFINE_GLOBAL index i is
//! the parameter at the position of i among the kernel's DEFINE_GLOBALs, as in tinygrad; 57-bit
//! VAs). Deserialized programs are cached by (program address, blob hash).
//!
//! A blob holding PTX (`MOCKGPU_CODE=ptx`) runs on the PTX interpreter
//! ([`crate::mockgpu::nvgpu::ptx`]) instead: its parameter block (the `.entry`'s `.param`
//! layout, which must be the blob's parameter bytes) is read from constant buffer 0 at the
//! parameter base, and the grid, block, shared memory size and the shared/local windows are the
//! QMD's and the channel's.
//!
//! Not guaranteed: speed (the interpreter is the reference); accesses beyond a buffer's end
//! inside mapped memory are not caught (hardware does not catch them either).

use std::sync::Arc;

use crate::mockgpu::exec::{ArgNames, ProgramCache, UopKernel};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::mockgpu::nvgpu::cubin::MockCode;
use crate::mockgpu::nvgpu::ptx;
use crate::mockgpu::nvgpu::{read_mock_kernel, NvDispatch, NvDispatchExecutor};
use crate::{ensure, Error, Result};

/// A cached program.
enum Prog {
    Uops {
        k: UopKernel,
        param_base: u32,
        param_bytes: u32,
    },
    Ptx {
        k: ptx::Kernel,
        param_base: u32,
        param_bytes: u32,
    },
}

/// Runs mock cubins on the UOp interpreter (or PTX blobs on the PTX interpreter).
#[derive(Default)]
pub struct NvUopExecutor {
    cache: ProgramCache<Prog>,
}

/// The NV names of the argument block.
const PARAMS: ArgNames = ArgNames {
    mismatch: "param size",
    declared: "parameter bytes",
};

/// NV GPU virtual addresses (5-level page tables) are 57 bits.
const VA_BITS: u32 = 57;

impl NvUopExecutor {
    pub fn new() -> NvUopExecutor {
        NvUopExecutor::default()
    }

    fn kernel(&self, mem: &dyn GpuMemory, pgm: u64) -> Result<Arc<Prog>> {
        let blob = read_mock_kernel(mem, pgm)
            .map_err(|e| Error::Fault(format!("program at {pgm:#x}: {}", e.message())))?;
        let key = (&blob.name, &blob.uops, blob.param_base, blob.param_bytes);
        self.cache.get_or_build(pgm, &key, || {
            let (param_base, param_bytes) = (blob.param_base, blob.param_bytes);
            Ok(if blob.code == MockCode::Ptx {
                Prog::Ptx {
                    k: ptx::parse_kernel(&blob.uops, Some(&blob.name))?,
                    param_base,
                    param_bytes,
                }
            } else {
                Prog::Uops {
                    k: UopKernel::new(&blob.name, &blob.uops)?.naturally_aligned(),
                    param_base,
                    param_bytes,
                }
            })
        })
    }

    /// Deserialized programs cached so far.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }
}

/// The `bytes` parameter bytes of kernel `name` (built for parameters at cbuf0 `base`) from
/// constant buffer 0.
fn read_params(
    mem: &dyn GpuMemory,
    d: &NvDispatch,
    name: &str,
    base: u32,
    bytes: u32,
) -> Result<Vec<u8>> {
    ensure!(
        base == d.param_base,
        Fault,
        "kernel {name}: parameters at cbuf0 {base:#x}, but this compute class puts them at {:#x}",
        d.param_base
    );
    d.read_params(mem, bytes).map_err(|e| {
        Error::Fault(format!(
            "kernel {name}: reading parameters: {}",
            e.message()
        ))
    })
}

/// Runs a PTX kernel with the launch's QMD values and parameter block.
fn dispatch_ptx(
    mem: &dyn GpuMemory,
    d: &NvDispatch,
    k: &ptx::Kernel,
    param_base: u32,
    param_bytes: u32,
) -> Result<()> {
    ensure!(
        k.param_bytes == param_bytes,
        Fault,
        "param size mismatch: kernel {} declares {param_bytes} parameter bytes, its PTX .entry takes {}",
        k.name,
        k.param_bytes
    );
    let params = read_params(mem, d, &k.name, param_base, param_bytes)?;
    let l = ptx::Launch {
        mem,
        params: &params,
        grid: d.grid,
        block: d.block,
        shared_bytes: d.shared_memory_size,
        shared_window: d.shared_window,
        local_window: d.local_window,
    };
    ptx::run(k, &l)
}

impl NvDispatchExecutor for NvUopExecutor {
    fn dispatch(&self, mem: &dyn GpuMemory, d: &NvDispatch) -> Result<()> {
        let prog = self.kernel(mem, d.program_addr)?;
        match &*prog {
            Prog::Ptx {
                k,
                param_base,
                param_bytes,
            } => dispatch_ptx(mem, d, k, *param_base, *param_bytes),
            Prog::Uops {
                k,
                param_base,
                param_bytes,
            } => {
                let want = k.check_declared(*param_bytes, PARAMS)?;
                let p = read_params(mem, d, &k.name, *param_base, want)?;
                k.run(mem, &p, VA_BITS, d.grid, d.block)
            }
        }
    }
}
