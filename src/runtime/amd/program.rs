//! AMD programs: the code-object loader (LLVM `AMDGPUUsage.rst`): parse the ELF (`hw::amd::elf`),
//! read the 64-byte kernel descriptor, check it against what rawgrad's launcher provides, upload
//! the image to host-visible VRAM, and keep what a launch needs ([`ExecProgram`]: code address,
//! RSRC1-3, properties, LDS and scratch sizes).
//!
//! The descriptor layout is LLVM's AMDGPUUsage.rst "Kernel Descriptor" table (code object v3+):
//! GROUP_SEGMENT_FIXED_SIZE @0, PRIVATE_SEGMENT_FIXED_SIZE @4, KERNARG_SIZE @8,
//! KERNEL_CODE_ENTRY_BYTE_OFFSET @16 (i64, to a 256-byte aligned entry), COMPUTE_PGM_RSRC3 @44,
//! RSRC1 @48, RSRC2 @52, the enable bits @56 (u16) and KERNARG_PRELOAD_SPEC @58 (u16). The
//! launcher loads the user SGPRs in that document's "SGPR Register Set Up Order" (private
//! segment buffer, dispatch ptr, queue ptr, kernarg segment ptr, ...) and ORs the LDS size into
//! RSRC2 itself: the descriptor's granulated_lds_size "is set to 0 ... CP will write directly to
//! COMPUTE_PGM_RSRC2.LDS_SIZE".
//!
//! Checks at load (each refusal names the kernel and the value): only known
//! kernel_code_properties bits; no input rawgrad does not fill (queue ptr, dispatch id, flat
//! scratch init, private segment size, dynamic stack, kernarg preload); no private segment
//! buffer on chips with architected flat scratch (AMDGPUUsage: "must be 0"); wave32 only where
//! the chip has it; a kernarg pointer whenever the kernel takes kernargs; the user SGPRs rawgrad
//! loads fit RSRC2.USER_SGPR; LDS within the node's `lds_size_in_kb`; 256-byte aligned code.
//! Scratch is set up when the kernel uses it or reads a private-segment descriptor.
//!
//! Kernargs (tinygrad `ops_amd.py` `AMDProgram`): buffer addresses (u64) then variables (u32),
//! packed; the descriptor's `kernarg_size` must equal `8 * bufs + 4 * vars`. A kernel enabling the
//! dispatch pointer gets an `hsa_kernel_dispatch_packet_t` after its kernargs (64-byte aligned).
//!
//! Not guaranteed: the descriptor layout is that of code objects v3-v5; v2 (`amd_kernel_code_t`)
//! objects are not recognised.

use std::sync::Arc;

use super::memory::AmdBuffer;
use super::AmdBackend;
use crate::hcq::{HcqBuffer, HcqLaunch, HcqProgram};
use crate::hw::amd::elf::load_code_object;
use crate::hw::amd::kd::{KernelCodeProperties, KernelDescriptor};
use crate::hw::amd::targets::{GfxTarget, ScratchModel};
use crate::runtime::amd::pm4::{ExecArgs, ExecProgram, ScratchSetup};
use crate::{bail, ensure, Result};

/// Inputs rawgrad never fills.
const UNPROVIDED: KernelCodeProperties = KernelCodeProperties::ENABLE_SGPR_QUEUE_PTR
    .union(KernelCodeProperties::ENABLE_SGPR_DISPATCH_ID)
    .union(KernelCodeProperties::ENABLE_SGPR_FLAT_SCRATCH_INIT)
    .union(KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE)
    .union(KernelCodeProperties::USES_DYNAMIC_STACK);

/// The checks of the module doc that need only the descriptor, the chip and the node.
pub fn check_descriptor(
    name: &str,
    kd: &KernelDescriptor,
    target: &GfxTarget,
    lds_bytes: u32,
) -> Result<KernelCodeProperties> {
    let Some(props) = KernelCodeProperties::from_bits(kd.kernel_code_properties) else {
        bail!(
            InvalidArgument,
            "kernel {name}: kernel_code_properties {:#x} has bits rawgrad does not know",
            kd.kernel_code_properties
        )
    };
    ensure!(
        !props.intersects(UNPROVIDED),
        InvalidArgument,
        "kernel {name}: enables {:?}, which rawgrad does not provide (compile with the IR optimizer)",
        props.intersection(UNPROVIDED)
    );
    ensure!(
        kd.kernarg_preload == 0,
        InvalidArgument,
        "kernel {name}: expects kernarg preload ({:#x})",
        kd.kernarg_preload
    );
    ensure!(
        target.wave32 || !props.contains(KernelCodeProperties::ENABLE_WAVEFRONT_SIZE32),
        InvalidArgument,
        "kernel {name}: compiled for wave32, which {} does not run",
        target.name
    );
    // AMDGPUUsage.rst, kernel descriptor: with architected flat scratch the private segment
    // buffer SGPRs are "not supported and must be 0".
    ensure!(
        target.scratch != ScratchModel::ArchitectedFlatScratch
            || !props.contains(KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER),
        InvalidArgument,
        "kernel {name}: enables the private segment buffer, which {} (architected flat scratch) \
         does not have",
        target.name
    );
    ensure!(
        kd.kernarg_size == 0
            || props.contains(KernelCodeProperties::ENABLE_SGPR_KERNARG_SEGMENT_PTR),
        InvalidArgument,
        "kernel {name}: takes {} bytes of kernargs but does not enable the kernarg pointer",
        kd.kernarg_size
    );
    let mut sgprs = 0;
    for (flag, n) in [
        (KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER, 4),
        (KernelCodeProperties::ENABLE_SGPR_DISPATCH_PTR, 2),
        (KernelCodeProperties::ENABLE_SGPR_KERNARG_SEGMENT_PTR, 2),
    ] {
        if props.contains(flag) {
            sgprs += n;
        }
    }
    ensure!(
        sgprs <= kd.user_sgpr_count(),
        InvalidArgument,
        "kernel {name}: rawgrad loads {sgprs} user SGPRs but RSRC2.USER_SGPR declares {}",
        kd.user_sgpr_count()
    );
    ensure!(
        kd.group_segment_fixed_size <= lds_bytes,
        InvalidArgument,
        "kernel {name}: uses {} bytes of LDS, the GPU has {lds_bytes}",
        kd.group_segment_fixed_size
    );
    Ok(props)
}

/// A kernel loaded on one device.
pub struct AmdProgram {
    name: String,
    exec: ExecProgram,
    kd: KernelDescriptor,
    dispatch_ptr: bool,
    scratch: Option<ScratchSetup>,
    _scratch_mem: Option<Arc<AmdBuffer>>,
    _code: Option<AmdBuffer>,
}

impl std::fmt::Debug for AmdProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AmdProgram({}, code {:#x})",
            self.name, self.exec.code_addr
        )
    }
}

fn align64(v: usize) -> usize {
    v.div_ceil(64) * 64
}

impl AmdProgram {
    /// Load code object `lib` of kernel `name` on `dev`.
    pub fn load(dev: &AmdBackend, name: &str, lib: &[u8]) -> Result<AmdProgram> {
        let img = load_code_object(lib, name)?;
        let kd = KernelDescriptor::parse(&img.image[img.descriptor..])?;
        let lds = dev.node().props.get("lds_size_in_kb").unwrap_or(64) as u32 * 1024;
        let props = check_descriptor(name, &kd, dev.target(), lds)?;
        let code_off = img.descriptor as i64 + kd.kernel_code_entry_byte_offset;
        ensure!(
            code_off >= 0 && (code_off as usize) < img.image.len() && code_off % 256 == 0,
            InvalidArgument,
            "kernel {name}: code offset {code_off:#x} is outside the image or not 256-byte aligned"
        );
        let code = dev.alloc_code(img.image.len())?;
        let Some(view) = code.cpu() else {
            bail!(Internal, "code memory is not CPU-mapped");
        };
        view.write_bytes(0, &img.image)?;
        let needs_scratch = kd.private_segment_fixed_size > 0
            || props.contains(KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER);
        let (scratch, scratch_mem) = if needs_scratch {
            let (s, m) = dev.ensure_scratch(kd.private_segment_fixed_size)?;
            (Some(s), Some(m))
        } else {
            (None, None)
        };
        let exec = exec_program(&kd, code.va() + code_off as u64);
        Ok(AmdProgram {
            name: name.to_string(),
            exec,
            kd,
            dispatch_ptr: props.contains(KernelCodeProperties::ENABLE_SGPR_DISPATCH_PTR),
            scratch,
            _scratch_mem: scratch_mem,
            _code: Some(code),
        })
    }

    /// A program that only encodes launches (no device, no code or scratch memory): golden
    /// tests.
    pub fn encode_only(
        name: &str,
        kd: KernelDescriptor,
        code_addr: u64,
        scratch: Option<ScratchSetup>,
    ) -> AmdProgram {
        AmdProgram {
            name: name.to_string(),
            exec: exec_program(&kd, code_addr),
            dispatch_ptr: kd.kernel_code_properties
                & KernelCodeProperties::ENABLE_SGPR_DISPATCH_PTR.bits()
                != 0,
            kd,
            scratch,
            _scratch_mem: None,
            _code: None,
        }
    }

    /// What a launch programs.
    pub fn exec_program(&self) -> &ExecProgram {
        &self.exec
    }

    /// The kernel descriptor.
    pub fn descriptor(&self) -> &KernelDescriptor {
        &self.kd
    }

    /// The PM4 launch arguments of `launch` (its kernarg pointer and dims, the dispatch packet
    /// after the kernargs when the kernel reads one, the device's scratch).
    pub fn exec_args(&self, launch: &HcqLaunch) -> ExecArgs {
        let kernargs = launch.kernargs();
        ExecArgs {
            kernargs,
            global: launch.global,
            local: launch.local,
            scratch: self.scratch,
            dispatch_ptr: self
                .dispatch_ptr
                .then(|| kernargs + align64(self.kd.kernarg_size as usize) as u64),
        }
    }

    /// Write the `hsa_kernel_dispatch_packet_t` of `launch` (its dims among its fields) after
    /// its kernargs.
    pub(crate) fn write_dispatch_packet(&self, launch: &HcqLaunch) -> Result<()> {
        let (dst, off) = launch.view()?;
        let mut p = [0u8; 64];
        p[2..4].copy_from_slice(&3u16.to_le_bytes()); // setup: 3 dimensions
        for i in 0..3 {
            let l = u16::try_from(launch.local[i]).unwrap_or(u16::MAX);
            p[4 + 2 * i..6 + 2 * i].copy_from_slice(&l.to_le_bytes());
            let g = launch.global[i].saturating_mul(launch.local[i]);
            p[12 + 4 * i..16 + 4 * i].copy_from_slice(&g.to_le_bytes());
        }
        p[24..28].copy_from_slice(&self.kd.private_segment_fixed_size.to_le_bytes());
        p[28..32].copy_from_slice(&self.kd.group_segment_fixed_size.to_le_bytes());
        p[32..40].copy_from_slice(&self.exec.code_addr.to_le_bytes());
        p[40..48].copy_from_slice(&launch.kernargs().to_le_bytes());
        dst.write_bytes(off + align64(self.kd.kernarg_size as usize), &p)
    }
}

fn exec_program(kd: &KernelDescriptor, code_addr: u64) -> ExecProgram {
    ExecProgram {
        code_addr,
        rsrc1: kd.compute_pgm_rsrc1,
        rsrc2: kd.compute_pgm_rsrc2,
        rsrc3: kd.compute_pgm_rsrc3,
        kernel_code_properties: kd.kernel_code_properties,
        kernarg_preload: kd.kernarg_preload,
        group_segment_size: kd.group_segment_fixed_size,
        private_segment_size: kd.private_segment_fixed_size,
    }
}

/// The packed kernargs: addresses (u64), then variables (u32; each must fit 32 bits).
pub fn pack_kernargs(name: &str, kernarg_size: u32, bufs: &[u64], vals: &[i64]) -> Result<Vec<u8>> {
    let want = 8 * bufs.len() + 4 * vals.len();
    ensure!(
        kernarg_size as usize == want,
        InvalidArgument,
        "kernarg size mismatch: kernel {name} declares {kernarg_size} bytes of kernargs, the call \
         passes {} buffers and {} variables ({want} bytes)",
        bufs.len(),
        vals.len()
    );
    let mut out = Vec::with_capacity(want);
    for b in bufs {
        out.extend_from_slice(&b.to_le_bytes());
    }
    for (i, v) in vals.iter().enumerate() {
        ensure!(
            (i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(v),
            InvalidArgument,
            "kernel {name}: variable {i} = {v} does not fit 32 bits"
        );
        out.extend_from_slice(&(*v as u32).to_le_bytes());
    }
    Ok(out)
}

impl HcqProgram for AmdProgram {
    fn name(&self) -> &str {
        &self.name
    }

    fn kernargs_alloc_size(&self) -> usize {
        let n = self.kd.kernarg_size as usize;
        if self.dispatch_ptr {
            align64(n) + 64
        } else {
            n
        }
    }

    fn fill_kernargs(&self, launch: &HcqLaunch, bufs: &[u64], vals: &[i64]) -> Result<()> {
        let bytes = pack_kernargs(&self.name, self.kd.kernarg_size, bufs, vals)?;
        let (dst, off) = launch.view()?;
        dst.write_bytes(off, &bytes)?;
        if self.dispatch_ptr {
            self.write_dispatch_packet(launch)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::amd::targets::{GFX1030, GFX1100, GFX1201, GFX90A, GFX942};

    fn kd(props: u16, user_sgprs: u32) -> KernelDescriptor {
        KernelDescriptor {
            kernarg_size: 20,
            kernel_code_properties: props,
            compute_pgm_rsrc2: user_sgprs << 1,
            ..Default::default()
        }
    }

    #[test]
    fn descriptor_round_trips_and_checks_refuse() {
        let d = KernelDescriptor {
            group_segment_fixed_size: 1024,
            private_segment_fixed_size: 16,
            kernarg_size: 20,
            kernel_code_entry_byte_offset: -0x40,
            compute_pgm_rsrc3: 3,
            compute_pgm_rsrc1: 0x601c0041,
            compute_pgm_rsrc2: 0x1009e,
            kernel_code_properties: 0x408,
            kernarg_preload: 0,
        };
        assert_eq!(KernelDescriptor::parse(&d.to_bytes()).unwrap(), d);
        assert!(KernelDescriptor::parse(&[0; 10]).is_err());
        let (t, t9) = (&GFX1030, &GFX90A);
        check_descriptor("k", &kd(0x408, 2), t, 65536).unwrap();
        check_descriptor("k", &kd(0x409, 6), t, 65536).unwrap();
        let msg = |r: Result<KernelCodeProperties>| r.unwrap_err().message().to_string();
        assert!(msg(check_descriptor("k", &kd(0x40C, 4), t, 65536)).contains("QUEUE_PTR"));
        assert!(msg(check_descriptor("k", &kd(0x418, 4), t, 65536)).contains("DISPATCH_ID"));
        assert!(msg(check_descriptor("k", &kd(0x408, 2), t9, 65536)).contains("wave32"));
        assert!(msg(check_descriptor("k", &kd(0x400, 2), t, 65536)).contains("kernarg pointer"));
        assert!(msg(check_descriptor("k", &kd(0x409, 2), t, 65536)).contains("USER_SGPR"));
        assert!(msg(check_descriptor("k", &kd(0x8000, 2), t, 65536)).contains("does not know"));
        let mut big = kd(0x408, 2);
        big.group_segment_fixed_size = 65537;
        assert!(msg(check_descriptor("k", &big, t, 65536)).contains("LDS"));
        // AMDGPUUsage.rst: no private segment buffer with architected flat scratch (gfx942, gfx11+).
        for arch in [&GFX942, &GFX1100, &GFX1201] {
            let e = msg(check_descriptor("k", &kd(0x009, 6), arch, 65536));
            assert!(e.contains("private segment buffer"), "{}: {e}", arch.name);
        }
        check_descriptor("k", &kd(0x009, 6), t9, 65536).unwrap();
    }

    #[test]
    fn kernargs_pack_and_check_the_size() {
        let b = pack_kernargs("k", 20, &[0x1122_3344_5566_7788, 2], &[-1]).unwrap();
        assert_eq!(b.len(), 20);
        assert_eq!(&b[..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[16..], &u32::MAX.to_le_bytes());
        let e = pack_kernargs("k", 24, &[1, 2], &[3]).unwrap_err();
        assert!(e.message().contains("kernarg size mismatch"), "{e}");
        assert!(pack_kernargs("k", 12, &[1], &[1 << 40]).is_err());
    }
}
