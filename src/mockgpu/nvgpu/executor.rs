//! The software NV GPU's [`NvDispatchExecutor`] for mock cubins: it reads the blob at the QMD's
//! program address through GPU memory ([`read_mock_kernel`]), checks that the blob's parameter
//! bytes match its UOps (`8 * buffers + 4 * variables`; else a fault "param size mismatch ...")
//! and that its parameter base is the arch's, reads the parameters from constant buffer 0 at the
//! parameter base, and runs the UOps on the UOp interpreter with the QMD's grid and block. Buffers
//! are GPU virtual addresses: every load and store goes through the GPU's page tables, so an
//! access to unmapped memory faults the channel naming the address (RM then writes the MMU/GR
//! error into the error notifiers).
//!
//! DEFINE_GLOBAL index i is the parameter at the position of i among the kernel's DEFINE_GLOBALs
//! (arguments are positional, as in tinygrad). Deserialized programs are cached by (program
//! address, blob hash).
//!
//! A blob holding PTX (`MOCKGPU_CODE=ptx`) runs on the PTX interpreter
//! ([`crate::mockgpu::nvgpu::ptx`]) instead: its parameter block (the `.entry`'s `.param`
//! layout, which must be the blob's parameter bytes) is read from constant buffer 0 at the
//! parameter base, and the grid, block, shared memory size and the shared/local windows are the
//! QMD's and the channel's.
//!
//! Not guaranteed: speed (the interpreter is the reference); accesses beyond a buffer's end
//! inside mapped memory are not caught (hardware does not catch them either).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use crate::codegen::uop_serial::deserialize;
use crate::codegen::uopgraph::{global_slots, globals, vars};
use crate::mockgpu::amdgpu::GpuMemory;
use crate::mockgpu::nvgpu::cubin::MockCode;
use crate::mockgpu::nvgpu::ptx;
use crate::mockgpu::nvgpu::{read_mock_kernel, NvDispatch, NvDispatchExecutor};
use crate::runtime::cpu::interp::{InterpProgram, Memory};
use crate::{bail, ensure, Error, Result};

struct Kernel {
    prg: InterpProgram,
    name: String,
    param_base: u32,
    param_bytes: u32,
    nvars: usize,
    /// The argument position of each DEFINE_GLOBAL index.
    slots: Vec<Option<usize>>,
    nbufs: usize,
}

/// A cached program.
enum Prog {
    Uops(Kernel),
    Ptx {
        k: ptx::Kernel,
        param_base: u32,
        param_bytes: u32,
    },
}

type Cache = HashMap<(u64, u64), Arc<Prog>>;

/// Runs mock cubins on the UOp interpreter (or PTX blobs on the PTX interpreter).
#[derive(Default)]
pub struct NvUopExecutor {
    cache: Mutex<Cache>,
}

impl NvUopExecutor {
    pub fn new() -> NvUopExecutor {
        NvUopExecutor::default()
    }

    fn kernel(&self, mem: &dyn GpuMemory, pgm: u64) -> Result<Arc<Prog>> {
        let blob = read_mock_kernel(mem, pgm)
            .map_err(|e| Error::Fault(format!("program at {pgm:#x}: {}", e.message())))?;
        let mut h = DefaultHasher::new();
        (&blob.name, &blob.uops, blob.param_base, blob.param_bytes).hash(&mut h);
        let key = (pgm, h.finish());
        if let Some(k) = self.lock().get(&key) {
            return Ok(k.clone());
        }
        if blob.code == MockCode::Ptx {
            let k = Arc::new(Prog::Ptx {
                k: ptx::parse_kernel(&blob.uops, Some(&blob.name))?,
                param_base: blob.param_base,
                param_bytes: blob.param_bytes,
            });
            self.lock().insert(key, k.clone());
            return Ok(k);
        }
        let uops = deserialize(&blob.uops)?;
        let g = globals(&uops);
        let slots = global_slots(&uops);
        let k = Arc::new(Prog::Uops(Kernel {
            prg: InterpProgram::new(&blob.name, &uops)?,
            name: blob.name,
            param_base: blob.param_base,
            param_bytes: blob.param_bytes,
            nvars: vars(&uops).len(),
            nbufs: g.len(),
            slots,
        }));
        self.lock().insert(key, k.clone());
        Ok(k)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deserialized programs cached so far.
    pub fn cached(&self) -> usize {
        self.lock().len()
    }
}

/// Buffers as GPU addresses.
struct GpuBufs<'a> {
    mem: &'a dyn GpuMemory,
    addrs: Vec<u64>,
    k: &'a Kernel,
}

impl GpuBufs<'_> {
    fn va(&self, buf: usize, off: usize) -> Result<u64> {
        match self
            .k
            .slots
            .get(buf)
            .copied()
            .flatten()
            .and_then(|p| self.addrs.get(p))
        {
            Some(a) => Ok(a.wrapping_add(off as u64)),
            None => bail!(
                Fault,
                "kernel {}: no buffer {buf} in the parameters",
                self.k.name
            ),
        }
    }

    fn fault(&self, e: Error, what: &str, va: u64, n: usize, buf: usize, off: usize) -> Error {
        Error::Fault(format!(
            "kernel {}: {what} of {n} bytes at {va:#x} (buffer {buf} + {off}) faulted: {}",
            self.k.name,
            e.message()
        ))
    }
}

impl Memory for GpuBufs<'_> {
    fn size(&self, buf: usize) -> Result<usize> {
        // The GPU knows no buffer sizes: only the page tables bound an access.
        let a = self.va(buf, 0)?;
        Ok(((1u64 << 57).saturating_sub(a)) as usize)
    }
    fn load(&self, buf: usize, off: usize, out: &mut [u8]) -> Result<()> {
        let va = self.va(buf, off)?;
        self.mem
            .read(va, out)
            .map_err(|e| self.fault(e, "read", va, out.len(), buf, off))
    }
    fn store(&mut self, buf: usize, off: usize, data: &[u8]) -> Result<()> {
        let va = self.va(buf, off)?;
        self.mem
            .write(va, data)
            .map_err(|e| self.fault(e, "write", va, data.len(), buf, off))
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
        let k = match &*prog {
            Prog::Ptx {
                k,
                param_base,
                param_bytes,
            } => return dispatch_ptx(mem, d, k, *param_base, *param_bytes),
            Prog::Uops(k) => k,
        };
        let want = 8 * k.nbufs as u32 + 4 * k.nvars as u32;
        ensure!(
            k.param_bytes == want,
            Fault,
            "param size mismatch: kernel {} declares {} parameter bytes, its UOps take {} buffers and {} variables ({want} bytes)",
            k.name,
            k.param_bytes,
            k.nbufs,
            k.nvars
        );
        let p = read_params(mem, d, &k.name, k.param_base, want)?;
        let word = |i: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&p[i..i + n]);
            u64::from_le_bytes(b)
        };
        let addrs: Vec<u64> = (0..k.nbufs).map(|i| word(8 * i, 8)).collect();
        let base = 8 * k.nbufs;
        let vals: Vec<i64> = (0..k.nvars)
            .map(|i| i64::from(word(base + 4 * i, 4) as u32 as i32))
            .collect();
        let mut bufs = GpuBufs { mem, addrs, k };
        let g = d.grid.map(|x| x as usize);
        let l = d.block.map(|x| x as usize);
        k.prg.run(&mut bufs, &vals, g, l)
    }
}
