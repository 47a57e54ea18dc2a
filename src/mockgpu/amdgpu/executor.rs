//! The software GPU's [`DispatchExecutor`] for mock code objects: it reads the blob at the
//! program address (through [`GpuMemory`], as the shader would fetch instructions), finds the
//! kernarg pointer among the user SGPRs from the blob's kernel_code_properties (private segment
//! buffer: 4 SGPRs first if bit 0, dispatch ptr: 2 if bit 1, queue ptr: 2 if bit 2, then the
//! kernarg pointer), checks that the blob's kernarg size matches its UOps (`8 * bufs + 4 * vars`)
//! and that the kernarg region is mapped, and runs the UOps through the shared executor core
//! ([`crate::mockgpu::exec`]: positional buffer addresses translated through the GPU's page
//! tables, 48-bit VAs) with global size = the dispatch's workgroup counts and local size =
//! COMPUTE_NUM_THREAD_X/Y/Z.
//!
//! Deserialized programs are cached by (program address, blob hash).
//!
//! Not guaranteed: speed (the interpreter is the reference, not a fast path); accesses inside
//! mapped memory beyond a buffer's end are not caught (the hardware does not catch them either).

use std::sync::Arc;

use super::object::{MockBlob, MAX_BLOB, MOCK_HEADER};
use crate::hw::amd::kd::KernelCodeProperties;
use crate::mockgpu::amdgpu::{DispatchExecutor, DispatchState};
use crate::mockgpu::exec::{ArgNames, ProgramCache, UopKernel};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{ensure, Error, Result};

/// A deserialized mock kernel.
struct Kernel {
    k: UopKernel,
    props: u32,
    kernarg_size: u32,
}

/// Runs mock code objects on the UOp interpreter.
#[derive(Default)]
pub struct UopExecutor {
    cache: ProgramCache<Kernel>,
}

/// The AMD names of the argument block.
const KERNARGS: ArgNames = ArgNames {
    mismatch: "kernarg size",
    declared: "bytes of kernargs",
};

/// AMD GPU virtual addresses are 48 bits.
const VA_BITS: u32 = 48;

/// The blob's bytes at `pgm` (header first, then the lengths it announces).
fn read_blob(mem: &dyn GpuMemory, pgm: u64) -> Result<Vec<u8>> {
    let mut b = vec![0u8; MOCK_HEADER];
    mem.read(pgm, &mut b)?;
    let (_, _, name_len) = MockBlob::parse_header(&b)?;
    let mut len = [0u8; 4];
    mem.read(pgm + (MOCK_HEADER + name_len) as u64, &mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    ensure!(
        n <= MAX_BLOB,
        Fault,
        "mock code object at {pgm:#x}: UOps length {n} is absurd"
    );
    let total = MOCK_HEADER + name_len + 4 + n;
    b.resize(total, 0);
    mem.read(pgm + MOCK_HEADER as u64, &mut b[MOCK_HEADER..])?;
    Ok(b)
}

impl UopExecutor {
    pub fn new() -> UopExecutor {
        UopExecutor::default()
    }

    fn kernel(&self, mem: &dyn GpuMemory, pgm: u64) -> Result<Arc<Kernel>> {
        let bytes = read_blob(mem, pgm)?;
        self.cache.get_or_build(pgm, &bytes, || {
            let blob = MockBlob::decode(&bytes)?;
            Ok(Kernel {
                k: UopKernel::new(&blob.name, &blob.uops)?,
                props: blob.kernel_code_properties,
                kernarg_size: blob.kernarg_size,
            })
        })
    }

    /// Deserialized programs cached so far.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }
}

/// The user SGPR index of the kernarg pointer for these kernel_code_properties.
pub fn kernarg_sgpr(props: u32, user_sgpr_count: u32) -> Result<usize> {
    let p = KernelCodeProperties::from_bits_truncate(props as u16);
    ensure!(
        p.contains(KernelCodeProperties::ENABLE_SGPR_KERNARG_SEGMENT_PTR),
        Fault,
        "kernel_code_properties {props:#x} do not enable the kernarg segment pointer"
    );
    let mut i = 0;
    for (flag, n) in [
        (KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER, 4),
        (KernelCodeProperties::ENABLE_SGPR_DISPATCH_PTR, 2),
        (KernelCodeProperties::ENABLE_SGPR_QUEUE_PTR, 2),
    ] {
        if p.contains(flag) {
            i += n;
        }
    }
    ensure!(
        i + 2 <= user_sgpr_count as usize,
        Fault,
        "the kernarg pointer would be in s[{i}:{}] but RSRC2.USER_SGPR loads only {user_sgpr_count}",
        i + 1
    );
    Ok(i)
}

impl DispatchExecutor for UopExecutor {
    fn dispatch(&self, mem: &dyn GpuMemory, st: &DispatchState) -> Result<()> {
        let kernel = self.kernel(mem, st.pgm_addr)?;
        let k = &kernel.k;
        let want = k.check_declared(kernel.kernarg_size, KERNARGS)?;
        let ka = st
            .user_sgpr_pair(kernarg_sgpr(kernel.props, st.user_sgpr_count)?)
            .unwrap_or(0);
        let mut args = vec![0u8; want as usize];
        mem.read(ka, &mut args).map_err(|e| {
            Error::Fault(format!(
                "kernel {}: kernargs at {ka:#x} ({want} bytes) are not readable: {}",
                k.name,
                e.message()
            ))
        })?;
        k.run(mem, &args, VA_BITS, st.grid, st.workgroup_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::uop_serial::serialize;
    use crate::codegen::uopgraph::linearize;
    use crate::codegen::uops::UOp;
    use crate::dtype::dtypes;
    use crate::mockgpu::amdgpu::object::MockBlob;
    use crate::mockgpu::amdgpu::QueueId;
    use crate::mockgpu::exec::tests::add_uops;
    use crate::mockgpu::gpu_memory::SparseMemory;

    const CODE: u64 = 0x10_0000;
    const KA: u64 = 0x20_0000;
    const BUF: u64 = 0x30_0000;

    fn state(props_sgprs: u32, sgprs: [u32; 16]) -> DispatchState {
        DispatchState {
            queue: QueueId(0),
            pgm_addr: CODE,
            rsrc1: 0,
            rsrc2: props_sgprs << 1,
            rsrc3: 0,
            user_sgprs: sgprs,
            user_sgpr_count: props_sgprs,
            workgroup_size: [8, 1, 1],
            grid: [2, 1, 1],
            start: [0; 3],
            wave32: true,
            lds_bytes: 0,
            scratch_base: 0,
            tmpring_size: 0,
        }
    }

    fn memory(props: u32) -> SparseMemory {
        let m = SparseMemory::new();
        for va in [CODE, KA, BUF] {
            m.map(va, 0x1000).unwrap();
        }
        let blob = MockBlob {
            kernel_code_properties: props,
            kernarg_size: 24,
            name: "E_add".into(),
            uops: serialize(&add_uops(2, 8, dtypes::int32)).unwrap(),
        };
        m.write(CODE, &blob.encode()).unwrap();
        for (i, b) in [BUF, BUF + 0x100, BUF + 0x200].iter().enumerate() {
            m.write_u64(KA + 8 * i as u64, *b).unwrap();
        }
        for i in 0..16u64 {
            m.write_u32(BUF + 0x100 + 4 * i, i as u32).unwrap();
            m.write_u32(BUF + 0x200 + 4 * i, 100).unwrap();
        }
        m
    }

    #[test]
    fn kernarg_pointer_position_follows_the_properties() {
        assert_eq!(kernarg_sgpr(0x408, 2).unwrap(), 0);
        assert_eq!(kernarg_sgpr(0x409, 6).unwrap(), 4);
        assert_eq!(kernarg_sgpr(0x40B, 8).unwrap(), 6);
        assert_eq!(kernarg_sgpr(0x40F, 10).unwrap(), 8);
        assert!(kernarg_sgpr(0x400, 2).is_err(), "no kernarg pointer");
        assert!(kernarg_sgpr(0x409, 4).is_err(), "USER_SGPR too small");
    }

    #[test]
    fn runs_the_blob_and_caches_the_program() {
        let ex = UopExecutor::new();
        // Private segment buffer in s0-s3, kernarg pointer in s4-s5.
        let m = memory(0x409);
        let mut sg = [0u32; 16];
        (sg[4], sg[5]) = (KA as u32, (KA >> 32) as u32);
        ex.dispatch(&m, &state(6, sg)).unwrap();
        ex.dispatch(&m, &state(6, sg)).unwrap();
        assert_eq!(ex.cached(), 1);
        for i in 0..16u64 {
            assert_eq!(m.read_u32(BUF + 4 * i).unwrap(), 100 + i as u32);
        }
        // A different blob at the same address is a different program.
        m.write_u32(CODE + 16, 0x408).unwrap();
        let mut sg0 = [0u32; 16];
        (sg0[0], sg0[1]) = (KA as u32, (KA >> 32) as u32);
        ex.dispatch(&m, &state(2, sg0)).unwrap();
        assert_eq!(ex.cached(), 2);
    }

    #[test]
    fn buffers_are_positional_when_an_index_was_folded_away() {
        // data0[i] = data2[i] + 1: DEFINE_GLOBAL 1 was folded away (a.sub(&a) in the tensor graph),
        // so the kernel declares two buffers and takes them positionally, as the engine passes
        // them and as the LLVM renderer lays out the kernargs: data0's address, then data2's.
        let dt = dtypes::int32;
        let d0 = UOp::define_global(dt, 0, true);
        let d2 = UOp::define_global(dt, 2, false);
        let i = UOp::special(0, "gidx0", 2)
            .mul(8)
            .add(UOp::special(0, "lidx0", 8));
        let v = UOp::load(&d2, &i, dt).add(UOp::cnst(dt, 1));
        let uops = linearize(&[UOp::store(&d0, &i, &v)], None, true).unwrap();
        let m = SparseMemory::new();
        for va in [CODE, KA, BUF] {
            m.map(va, 0x1000).unwrap();
        }
        let blob = MockBlob {
            kernel_code_properties: 0x408,
            kernarg_size: 16,
            name: "E_folded".into(),
            uops: serialize(&uops).unwrap(),
        };
        m.write(CODE, &blob.encode()).unwrap();
        m.write_u64(KA, BUF).unwrap();
        m.write_u64(KA + 8, BUF + 0x200).unwrap();
        for j in 0..16u64 {
            m.write_u32(BUF + 0x200 + 4 * j, 10 * j as u32).unwrap();
        }
        let mut sg = [0u32; 16];
        (sg[0], sg[1]) = (KA as u32, (KA >> 32) as u32);
        UopExecutor::new().dispatch(&m, &state(2, sg)).unwrap();
        for j in 0..16u64 {
            assert_eq!(m.read_u32(BUF + 4 * j).unwrap(), 10 * j as u32 + 1);
        }
    }

    #[test]
    fn unmapped_kernargs_and_buffers_fault_with_the_address() {
        let ex = UopExecutor::new();
        let m = memory(0x408);
        let mut sg = [0u32; 16];
        (sg[0], sg[1]) = (0x99_0000, 0);
        let e = ex.dispatch(&m, &state(2, sg)).unwrap_err();
        assert!(e.message().contains("kernargs at 0x990000"), "{e}");
        m.write_u64(KA + 8, 0x77_0000).unwrap();
        (sg[0], sg[1]) = (KA as u32, 0);
        let e = ex.dispatch(&m, &state(2, sg)).unwrap_err();
        assert!(
            matches!(&e, Error::Fault(msg) if msg.contains("read of 4 bytes at 0x770000 (buffer 1 + 0)")),
            "{e}"
        );
        m.write_u32(CODE, 0).unwrap();
        let e = ex.dispatch(&m, &state(2, sg)).unwrap_err();
        assert!(e.message().contains("magic"), "{e}");
    }
}
