//! NV programs (tinygrad `NVProgram`): a cubin (real, or the MOCKGPU mock cubin) parsed by
//! [`crate::runtime::nv::cubin::Cubin::parse`] (arch check from e_flags against the device's SM),
//! its image relocated and uploaded (with the 4 KiB prefetch tail) into CPU-mapped VRAM, local
//! memory (SLM) sized from EIATTR_MIN_STACK_SIZE + 0x240, and a QMD template for the arch's QMD
//! version (V04 on Hopper, V03 on Ampere/Ada).
//!
//! Per launch ([`HcqProgram::fill_kernargs`]) one kernargs block holds constant buffer 0 and the
//! launch's QMD copy: the driver-reserved cbuf0 prefix (%ntid, %nctaid, windows, stack top; per
//! arch), the parameters at the cubin's parameter base (buffer addresses as u64, then variables
//! as u32, at the EIATTR_KPARAM_INFO offsets when the cubin has them), and at
//! `round_up(block + cbuf0 size, 256)` the QMD with grid, block and cbuf0 filled
//! ([`NvProgram::qmd_addr`]); the compute queue's exec only sends that address (SEND_PCAS), and
//! its `update_exec` rewrites the dims there ([`NvProgram::write_dims`]).
//!
//! Shared memory: the QMD's MAX_SM_CONFIG_SHARED_MEM_SIZE is the largest carve-out up to
//! `NV_MAX_SHARED_KIB` (default 100 KiB = 0x1A, the proven value; [`max_shared_kib`]).
//!
//! Not guaranteed: dynamic shared memory (none is requested); cubins with several kernels load
//! the one named like the program.

use std::sync::Arc;

use super::device::NvBackend;
use super::memory::NvBuffer;
use crate::hcq::{HcqBuffer, HcqLaunch, HcqProgram};
use crate::helpers::getenv;
use crate::hw::nv::arch::{NvArch, PROVEN_MAX_SHARED_KIB};
use crate::runtime::nv::cubin::{cubin_kernels, Cubin, KParam};
use crate::runtime::nv::push::PatchPoint;
use crate::runtime::nv::qmd::{program_qmd, AnyQmd, ConstantBuffer, Qmd, QmdPatches, QmdProgram};
use crate::{bail, ensure, Result};

/// SLM bytes per thread beyond the kernel's stack (tinygrad `_ensure_has_local_memory`).
pub const SLM_EXTRA: u32 = 0x240;

/// `NV_MAX_SHARED_KIB`: the largest shared-memory carveout a launch may ask (written as the QMD's
/// MAX_SM_CONFIG_SHARED_MEM_SIZE); default [`PROVEN_MAX_SHARED_KIB`] (100 KiB, 0x1A). A larger
/// value must be one of the arch's carveouts (Hopper: 132, 164, 196, 228), unproven on hardware.
pub fn max_shared_kib(arch: &NvArch) -> Result<u32> {
    let v = getenv("NV_MAX_SHARED_KIB", 0);
    if v == 0 {
        return Ok(PROVEN_MAX_SHARED_KIB);
    }
    match u32::try_from(v) {
        Ok(k) if arch.shared_mem_configs_kib.contains(&k) => Ok(k),
        _ => bail!(
            InvalidArgument,
            "NV_MAX_SHARED_KIB={v}: not a shared memory carveout of {} ({:?} KiB)",
            arch.compute_class_name,
            arch.shared_mem_configs_kib
        ),
    }
}

/// A loaded NV kernel.
pub struct NvProgram {
    name: String,
    arch: &'static NvArch,
    qmd: AnyQmd,
    param_base: u32,
    param_size: u32,
    kparams: Vec<KParam>,
    /// Bytes of constant buffer 0 (16-byte multiple).
    cbuf0_size: u32,
    regcount: u32,
    _code: Option<NvBuffer>,
    _slm: Option<Arc<NvBuffer>>,
}

impl std::fmt::Debug for NvProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvProgram({}, QMD {})",
            self.name,
            self.qmd.version().name()
        )
    }
}

impl NvProgram {
    /// Parse, upload and prepare kernel `name` of cubin `lib` on `dev`.
    pub fn load(dev: &NvBackend, name: &str, lib: &[u8]) -> Result<NvProgram> {
        let arch = dev.classes().arch;
        let kernels = cubin_kernels(lib).unwrap_or_default();
        let pick = (kernels.len() != 1 || kernels[0] == name).then_some(name);
        let cubin = Cubin::parse(lib, pick, arch, dev.sm())
            .map_err(|e| e.with_context(&format!("{}: loading {name}", dev.name_str())))?;
        let code = dev.alloc_code(cubin.image_size() as usize)?;
        let Some(view) = code.cpu() else {
            bail!(Internal, "NV code memory is not CPU-mapped");
        };
        view.write_bytes(0, &cubin.image_at(code.va())?)?;
        let slm_per_thread =
            (cubin.min_stack.max(cubin.frame_size) + SLM_EXTRA).next_multiple_of(32);
        let slm = dev.ensure_local_memory(slm_per_thread)?;
        let const_banks = cubin
            .const_banks
            .iter()
            .filter(|b| b.bank != 0)
            .map(|b| {
                let cb = ConstantBuffer {
                    addr: code.va() + b.image_offset,
                    size: (b.size as u32).next_multiple_of(16),
                    invalidate: true,
                };
                (b.bank as usize, cb)
            })
            .collect();
        let qmd = program_qmd(
            arch,
            &QmdProgram {
                program_addr: code.va() + cubin.entry_offset,
                code_bytes: cubin.code_size,
                register_count: cubin.regcount,
                shared: arch.shared_mem_config_up_to(
                    cubin.shared_size + cubin.reserved_shared_size,
                    0,
                    max_shared_kib(arch)?,
                )?,
                slm_bytes_per_thread: slm_per_thread,
                sm: dev.sm(),
                const_banks,
            },
        )?;
        let cbuf0_size = (cubin.param_base + cubin.param_size).next_multiple_of(16);
        Ok(NvProgram {
            name: name.to_string(),
            arch,
            qmd,
            param_base: cubin.param_base,
            param_size: cubin.param_size,
            kparams: cubin.kparams,
            cbuf0_size,
            regcount: cubin.regcount,
            _code: Some(code),
            _slm: Some(slm),
        })
    }

    /// A program that only encodes launches (golden tests): no code, an empty QMD template.
    pub fn encode_only(name: &str, arch: &'static NvArch, cbuf0_size: u32) -> NvProgram {
        NvProgram {
            name: name.to_string(),
            arch,
            qmd: AnyQmd::new(arch.qmd_version),
            param_base: arch.cbuf0.param_base,
            param_size: cbuf0_size.saturating_sub(arch.cbuf0.param_base),
            kparams: Vec::new(),
            cbuf0_size,
            regcount: 32,
            _code: None,
            _slm: None,
        }
    }

    /// Where the QMD of a launch whose kernargs block starts at `kernargs` lives.
    pub fn qmd_addr(&self, kernargs: u64) -> u64 {
        (kernargs + u64::from(self.cbuf0_size)).next_multiple_of(256)
    }

    /// The QMD template.
    pub fn qmd(&self) -> &AnyQmd {
        &self.qmd
    }

    /// Bytes from the start of a kernargs block at GPU address `kernargs` to its QMD.
    fn qmd_offset_at(&self, kernargs: u64) -> usize {
        (self.qmd_addr(kernargs) - kernargs) as usize
    }

    /// Refuses a block the kernel's registers cannot run.
    fn check_block(&self, local: [u32; 3]) -> Result<()> {
        let threads: u64 = local.iter().map(|&x| u64::from(x)).product();
        let max = NvArch::max_block_threads(self.regcount);
        ensure!(
            threads <= u64::from(max),
            InvalidArgument,
            "kernel {}: a block of {local:?} = {threads} threads exceeds the {max} threads {} registers allow",
            self.name,
            self.regcount
        );
        Ok(())
    }

    /// Rewrite `launch`'s dims where its kernargs block keeps them: cbuf0's %ntid/%nctaid and
    /// the QMD's grid and block fields (through the QMD patch points, read-modify-write). Every
    /// value is checked before anything is written.
    pub fn write_dims(&self, launch: &HcqLaunch) -> Result<()> {
        self.check_block(launch.local)?;
        let (view, off) = launch.view()?;
        let qoff = off + self.qmd_offset_at(launch.kernargs());
        let mut words = vec![0u32; self.arch.qmd_size / 4];
        view.read_u32s(qoff, &mut words)?;
        self.qmd.grid_patch().apply(&mut words, launch.global)?;
        self.qmd.block_patch().apply(&mut words, launch.local)?;
        let l = &self.arch.cbuf0;
        view.write_u32s(off + l.ntid as usize, &launch.local)?;
        view.write_u32s(off + l.nctaid as usize, &launch.global)?;
        view.write_u32s(qoff, &words)
    }

    /// Bytes of constant buffer 0.
    pub fn cbuf0_size(&self) -> u32 {
        self.cbuf0_size
    }

    /// The parameters as (offset from the parameter base, size), in argument order: the
    /// KPARAM_INFO records by ordinal, or `8 * nbufs + 4 * nvars` packed.
    fn param_slots(&self, nbufs: usize, nvals: usize) -> Result<Vec<(u32, u32)>> {
        let want = 8 * nbufs as u64 + 4 * nvals as u64;
        if self.kparams.is_empty() {
            ensure!(
                u64::from(self.param_size) == want,
                InvalidArgument,
                "param size mismatch: kernel {} declares {} parameter bytes, the call passes {nbufs} buffers and {nvals} variables ({want} bytes)",
                self.name,
                self.param_size
            );
            let mut v: Vec<(u32, u32)> = (0..nbufs).map(|i| (8 * i as u32, 8)).collect();
            v.extend((0..nvals).map(|i| (8 * nbufs as u32 + 4 * i as u32, 4)));
            return Ok(v);
        }
        let mut ps = self.kparams.clone();
        ps.sort_by_key(|p| p.ordinal);
        let sizes_ok = ps.len() == nbufs + nvals
            && ps
                .iter()
                .enumerate()
                .all(|(i, p)| p.size == if i < nbufs { 8 } else { 4 });
        ensure!(
            sizes_ok,
            InvalidArgument,
            "param size mismatch: kernel {} takes parameters of {:?} bytes, the call passes {nbufs} buffers (8 bytes) and {nvals} variables (4 bytes)",
            self.name,
            ps.iter().map(|p| p.size).collect::<Vec<_>>()
        );
        Ok(ps.iter().map(|p| (p.offset, p.size)).collect())
    }
}

impl HcqProgram for NvProgram {
    fn name(&self) -> &str {
        &self.name
    }

    fn kernargs_alloc_size(&self) -> usize {
        // cbuf0, the QMD at the next 256-byte boundary (blocks start 64-byte aligned).
        self.cbuf0_size as usize + 256 + self.arch.qmd_size
    }

    fn fill_kernargs(&self, launch: &HcqLaunch, bufs: &[u64], vals: &[i64]) -> Result<()> {
        self.check_block(launch.local)?;
        let slots = self.param_slots(bufs.len(), vals.len())?;
        let mut cb = vec![0u8; self.cbuf0_size as usize];
        self.arch.fill_cbuf0(&mut cb, launch.local, launch.global)?;
        let vals = bufs
            .iter()
            .copied()
            .chain(vals.iter().map(|&v| v as i32 as u32 as u64));
        for (&(o, size), v) in slots.iter().zip(vals) {
            let at = (self.param_base + o) as usize;
            let bytes = v.to_le_bytes();
            let Some(d) = cb.get_mut(at..at + size as usize) else {
                bail!(
                    InvalidArgument,
                    "kernel {}: parameter at {o:#x} ({size} bytes) is outside constant buffer 0 ({:#x} bytes)",
                    self.name,
                    self.cbuf0_size
                )
            };
            d.copy_from_slice(&bytes[..size as usize]);
        }
        let (dst, off) = launch.view()?;
        dst.write_bytes(off, &cb)?;
        let mut q = self.qmd.clone();
        let cbuf0 = ConstantBuffer {
            addr: launch.kernargs(),
            size: self.cbuf0_size,
            invalidate: true,
        };
        q.set_launch(launch.global, launch.local, cbuf0)?;
        dst.write_bytes(off + self.qmd_offset_at(launch.kernargs()), &q.to_bytes())
    }
}
