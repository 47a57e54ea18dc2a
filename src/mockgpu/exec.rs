//! The shared core of the software GPUs' kernel executors (`amdgpu/executor.rs` for mock code
//! objects, `nvgpu/executor.rs` for mock cubins): a cache of deserialized programs, a kernel of
//! serialized UOps run on the UOp interpreter ([`crate::interp`]), the check that the argument
//! bytes a blob declares match its UOps, and the unpacking of the argument block (buffer
//! addresses as u64, then variables as u32, packed, as the LLVM renderer and tinygrad lay them
//! out) into GPU virtual addresses that every load and store translates through the GPU's page
//! tables, so an access to unmapped memory faults naming the address, as on hardware.
//!
//! What differs per vendor stays in the executor: where the program and the arguments are read
//! from (the AMD kernarg pointer among the user SGPRs; the NV constant buffer 0), the launch
//! dims' source (dispatch packet or QMD), and the VA width.
//!
//! Arguments are positional: DEFINE_GLOBAL index i is the address in the slot of i's position
//! among the kernel's DEFINE_GLOBALs, so a buffer the folder removed takes no slot.
//!
//! Not guaranteed: speed (the interpreter is the reference); accesses beyond a buffer's end
//! inside mapped memory are not caught (hardware does not catch them either).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::codegen::uop_serial::deserialize;
use crate::codegen::uopgraph::{global_slots, globals, vars};
use crate::interp::{InterpProgram, Memory};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{bail, ensure, Error, Result};

/// Deserialized programs, keyed by (program address, hash of the blob): a different blob at the
/// same address is a different program.
pub struct ProgramCache<P> {
    map: Mutex<HashMap<(u64, u64), Arc<P>>>,
}

impl<P> Default for ProgramCache<P> {
    fn default() -> Self {
        ProgramCache {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<P> ProgramCache<P> {
    /// The program of `blob` at `pgm`, built by `build` on first use.
    pub fn get_or_build<B: Hash + ?Sized>(
        &self,
        pgm: u64,
        blob: &B,
        build: impl FnOnce() -> Result<P>,
    ) -> Result<Arc<P>> {
        let mut h = DefaultHasher::new();
        blob.hash(&mut h);
        let key = (pgm, h.finish());
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(build()?);
        self.lock().insert(key, p.clone());
        Ok(p)
    }

    /// Programs cached so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(u64, u64), Arc<P>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How an executor names its argument block in a size-mismatch fault.
#[derive(Clone, Copy, Debug)]
pub struct ArgNames {
    /// The fault's first words, e.g. `kernarg size` (`... mismatch: kernel ...`).
    pub mismatch: &'static str,
    /// What the blob declares, e.g. `bytes of kernargs`.
    pub declared: &'static str,
}

/// A kernel of serialized UOps on the UOp interpreter.
pub struct UopKernel {
    pub prg: InterpProgram,
    pub name: String,
    /// The argument slot of each DEFINE_GLOBAL index.
    pub slots: Vec<Option<usize>>,
    /// DEFINE_GLOBALs (u64 addresses first in the argument block).
    pub nbufs: usize,
    /// DEFINE_VARs (u32 values after the addresses).
    pub nvars: usize,
    /// Whether every global access must be aligned to its size (NVIDIA: the PTX ISA leaves a
    /// misaligned ld/st undefined, and an H200 stopped a float4 load 8 bytes into a buffer with
    /// Xid 13 "Misaligned Address"). AMD's global loads take any 4-byte-aligned address, so only
    /// the NV executor sets it.
    pub natural_alignment: bool,
}

impl UopKernel {
    /// Deserializes `uops_text` (`codegen::uop_serial`) into a kernel named `name`.
    pub fn new(name: &str, uops_text: &str) -> Result<UopKernel> {
        let uops = deserialize(uops_text)?;
        Ok(UopKernel {
            prg: InterpProgram::new(name, &uops)?,
            name: name.to_string(),
            slots: global_slots(&uops),
            nbufs: globals(&uops).len(),
            nvars: vars(&uops).len(),
            natural_alignment: false,
        })
    }

    /// The kernel with [`UopKernel::natural_alignment`] set.
    pub fn naturally_aligned(self) -> UopKernel {
        UopKernel {
            natural_alignment: true,
            ..self
        }
    }

    /// The argument bytes the UOps take: `8 * bufs + 4 * vars`.
    pub fn arg_bytes(&self) -> u32 {
        (8 * self.nbufs + 4 * self.nvars) as u32
    }

    /// The argument bytes, after checking that the blob's `declared` size is theirs (else a fault
    /// naming both).
    pub fn check_declared(&self, declared: u32, names: ArgNames) -> Result<u32> {
        let want = self.arg_bytes();
        ensure!(
            declared == want,
            Fault,
            "{} mismatch: kernel {} declares {declared} {}, its UOps take {} buffers and {} \
             variables ({want} bytes)",
            names.mismatch,
            self.name,
            names.declared,
            self.nbufs,
            self.nvars
        );
        Ok(want)
    }

    /// Runs the kernel over `grid` x `block` with the packed argument block `args` (at least
    /// [`UopKernel::arg_bytes`] long); buffers are GPU VAs below `1 << va_bits`.
    pub fn run(
        &self,
        mem: &dyn GpuMemory,
        args: &[u8],
        va_bits: u32,
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()> {
        ensure!(
            args.len() >= self.arg_bytes() as usize,
            Fault,
            "kernel {}: {} argument bytes, its UOps take {}",
            self.name,
            args.len(),
            self.arg_bytes()
        );
        let word = |i: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&args[i..i + n]);
            u64::from_le_bytes(b)
        };
        let addrs: Vec<u64> = (0..self.nbufs).map(|i| word(8 * i, 8)).collect();
        let base = 8 * self.nbufs;
        let vals: Vec<i64> = (0..self.nvars)
            .map(|i| i64::from(word(base + 4 * i, 4) as u32 as i32))
            .collect();
        let mut bufs = GpuBufs {
            mem,
            addrs,
            k: self,
            va_end: 1u64 << va_bits,
        };
        let g = grid.map(|x| x as usize);
        let l = block.map(|x| x as usize);
        self.prg.run(&mut bufs, &vals, g, l)
    }
}

/// Buffers as GPU addresses: `addrs` in argument slot order.
struct GpuBufs<'a> {
    mem: &'a dyn GpuMemory,
    addrs: Vec<u64>,
    k: &'a UopKernel,
    va_end: u64,
}

impl GpuBufs<'_> {
    fn va(&self, buf: usize, off: usize) -> Result<u64> {
        let slot = self.k.slots.get(buf).copied().flatten();
        match slot.and_then(|s| self.addrs.get(s)) {
            Some(a) => Ok(a.wrapping_add(off as u64)),
            None => bail!(
                Fault,
                "kernel {}: DEFINE_GLOBAL {buf} has no argument slot",
                self.k.name
            ),
        }
    }

    /// A misaligned access of a naturally aligned kernel faults as the GPU's does.
    fn check_alignment(&self, what: &str, va: u64, n: usize, buf: usize, off: usize) -> Result<()> {
        if self.k.natural_alignment && n.is_power_of_two() && va % n as u64 != 0 {
            let e = Error::Fault(format!("misaligned address (an access of {n} bytes)"));
            return Err(self.fault(e, what, va, n, buf, off));
        }
        Ok(())
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
        Ok(self.va_end.saturating_sub(a) as usize)
    }
    fn load(&self, buf: usize, off: usize, out: &mut [u8]) -> Result<()> {
        let va = self.va(buf, off)?;
        self.check_alignment("read", va, out.len(), buf, off)?;
        self.mem
            .read(va, out)
            .map_err(|e| self.fault(e, "read", va, out.len(), buf, off))
    }
    fn store(&mut self, buf: usize, off: usize, data: &[u8]) -> Result<()> {
        let va = self.va(buf, off)?;
        self.check_alignment("write", va, data.len(), buf, off)?;
        self.mem
            .write(va, data)
            .map_err(|e| self.fault(e, "write", va, data.len(), buf, off))
    }
}

/// Kernel fixtures the executor tests (here, in the vendor executors and in the backends'
/// emulator tests) share.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::codegen::uop_serial::serialize;
    use crate::codegen::uopgraph::linearize;
    use crate::codegen::uops::UOp;
    use crate::dtype::{dtypes, DType};
    use crate::mockgpu::gpu_memory::SparseMemory;

    /// data0[i] = data1[i] + data2[i] with i = gidx0 * local + lidx0, for a grid of `groups`
    /// workgroups of `local` threads.
    pub(crate) fn add_uops(groups: i64, local: i64, dt: DType) -> Vec<UOp> {
        let d0 = UOp::define_global(dt, 0, true);
        let d1 = UOp::define_global(dt, 1, false);
        let d2 = UOp::define_global(dt, 2, false);
        let g = UOp::special(0, "gidx0", groups);
        let l = UOp::special(0, "lidx0", local);
        let i = g.mul(local).add(&l);
        let a = UOp::load(&d1, &i, dt);
        let b = UOp::load(&d2, &i, dt);
        linearize(&[UOp::store(&d0, &i, &a.add(&b))], None, true).unwrap()
    }

    /// data0[i] = data1[i] * n + m (int32; n, m variables), i = gidx0 * local + lidx0.
    pub(crate) fn axpb_uops(groups: i64, local: i64) -> Vec<UOp> {
        let dt = dtypes::int32;
        let d0 = UOp::define_global(dt, 0, true);
        let d1 = UOp::define_global(dt, 1, false);
        let n = UOp::define_var("n", -100, 100);
        let m = UOp::define_var("m", -100, 100);
        let i = UOp::special(0, "gidx0", groups)
            .mul(local)
            .add(UOp::special(0, "lidx0", local));
        let v = UOp::load(&d1, &i, dt).mul(&n).add(&m);
        linearize(&[UOp::store(&d0, &i, &v)], None, true).unwrap()
    }

    const NAMES: ArgNames = ArgNames {
        mismatch: "arg size",
        declared: "argument bytes",
    };

    #[test]
    fn kernel_counts_arguments_checks_sizes_and_runs_over_gpu_addresses() {
        let text = serialize(&axpb_uops(1, 4)).unwrap();
        let k = UopKernel::new("E_axpb", &text).unwrap();
        assert_eq!((k.nbufs, k.nvars, k.arg_bytes()), (2, 2, 24));
        assert_eq!(k.check_declared(24, NAMES).unwrap(), 24);
        let e = k.check_declared(20, NAMES).unwrap_err();
        assert!(
            matches!(&e, Error::Fault(m) if m.contains("arg size mismatch: kernel E_axpb declares \
                20 argument bytes, its UOps take 2 buffers and 2 variables (24 bytes)")),
            "{e}"
        );
        let m = SparseMemory::new();
        m.map(0x1000, 0x1000).unwrap();
        for i in 0..4u64 {
            m.write_u32(0x1100 + 4 * i, i as u32).unwrap();
        }
        let mut args = Vec::new();
        for a in [0x1000u64, 0x1100] {
            args.extend_from_slice(&a.to_le_bytes());
        }
        // The variables in `vars` order (m, then n): m = 3, n = -2.
        for v in [3i32, -2] {
            args.extend_from_slice(&v.to_le_bytes());
        }
        k.run(&m, &args, 48, [1, 1, 1], [4, 1, 1]).unwrap();
        for i in 0..4u64 {
            assert_eq!(m.read_u32(0x1000 + 4 * i).unwrap() as i32, 3 - 2 * i as i32);
        }
        // An unmapped output faults naming the address; a short block is refused.
        args[..8].copy_from_slice(&0x9000u64.to_le_bytes());
        let e = k.run(&m, &args, 48, [1, 1, 1], [4, 1, 1]).unwrap_err();
        assert!(e.message().contains("write of 4 bytes at 0x9000"), "{e}");
        assert!(k.run(&m, &args[..20], 48, [1; 3], [4, 1, 1]).is_err());
        // An input 2 bytes into a page: any address on AMD, a fault on NV.
        args[..8].copy_from_slice(&0x1000u64.to_le_bytes());
        args[8..16].copy_from_slice(&0x1102u64.to_le_bytes());
        k.run(&m, &args, 48, [1, 1, 1], [4, 1, 1]).unwrap();
        let nv = UopKernel::new("E_axpb", &text).unwrap().naturally_aligned();
        let e = nv.run(&m, &args, 48, [1, 1, 1], [4, 1, 1]).unwrap_err();
        assert!(
            e.message()
                .contains("read of 4 bytes at 0x1102 (buffer 1 + 0) faulted: misaligned"),
            "{e}"
        );
    }

    #[test]
    fn cache_builds_once_per_address_and_blob() {
        let c: ProgramCache<u32> = ProgramCache::default();
        let mut built = 0;
        for (pgm, blob) in [(1u64, "a"), (1, "a"), (1, "b"), (2, "a")] {
            c.get_or_build(pgm, blob, || {
                built += 1;
                Ok(7)
            })
            .unwrap();
        }
        assert_eq!((built, c.len()), (3, 3));
        assert!(c
            .get_or_build(3, "x", || Err(Error::Fault("no".into())))
            .is_err());
        assert_eq!(c.len(), 3, "a failed build caches nothing");
    }
}
