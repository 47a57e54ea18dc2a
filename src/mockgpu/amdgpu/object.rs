//! The rawgrad mock code object: what the AMD device's "machine code" is under `MOCKGPU=1`.
//!
//! A real amdhsa-shaped ELF (written by `hw::amd::elf`: EM_AMDGPU, OSABI 64, ET_DYN, `.rodata` with a
//! real 64-byte kernel descriptor, `.text` 256-byte aligned) whose `.text` holds a blob instead of
//! GCN/RDNA instructions:
//!
//! | bytes | field |
//! |---|---|
//! | 12 | magic `RAWGRAD\0UOPS` |
//! | 4 | format version ([`MOCK_VERSION`]) |
//! | 4 | kernel_code_properties (as in the descriptor) |
//! | 4 | kernarg_size (as in the descriptor) |
//! | 4 + n | name length, name bytes |
//! | 4 + m | length, serialized UOps (`codegen::uop_serial`) |
//!
//! The descriptor is what a real compiler would emit for the target: the kernarg pointer enabled,
//! wave32 where the chip defaults to it, and on chips whose kernels read a private-segment
//! descriptor (gfx9, gfx10) the private segment buffer too (as LLVM 14 does for gfx1030:
//! properties 0x409), so the kernarg pointer sits in s[4:5] there, as on hardware.
//!
//! Not guaranteed: all integers little-endian; lengths are bounded by [`MAX_BLOB`].

use crate::codegen::uop_serial::deserialize;
use crate::codegen::uopgraph::{globals, vars};
use crate::codegen::uops::{UArg, UOps};
use crate::hw::amd::elf::{write_amdgpu_elf, AmdgpuElf};
use crate::hw::amd::kd::KernelCodeProperties;
use crate::hw::amd::kd::KernelDescriptor;
use crate::hw::amd::targets::{GfxTarget, ScratchModel};
use crate::{bail, ensure, Result};

/// The blob's magic.
pub const MOCK_MAGIC: &[u8; 12] = b"RAWGRAD\0UOPS";
/// The blob format version.
pub const MOCK_VERSION: u32 = 1;
/// Largest blob (name + UOps) the executor reads.
pub const MAX_BLOB: usize = 64 << 20;
/// Bytes before the name: magic, version, properties, kernarg size, name length.
pub const MOCK_HEADER: usize = 28;

/// A decoded blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MockBlob {
    pub kernel_code_properties: u32,
    pub kernarg_size: u32,
    pub name: String,
    pub uops: String,
}

impl MockBlob {
    /// The blob's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(MOCK_HEADER + self.name.len() + 4 + self.uops.len());
        b.extend_from_slice(MOCK_MAGIC);
        for v in [
            MOCK_VERSION,
            self.kernel_code_properties,
            self.kernarg_size,
            self.name.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(self.name.as_bytes());
        b.extend_from_slice(&(self.uops.len() as u32).to_le_bytes());
        b.extend_from_slice(self.uops.as_bytes());
        b
    }

    /// The header fields of the first [`MOCK_HEADER`] bytes: (properties, kernarg size, name
    /// length), after checking magic and version.
    pub fn parse_header(h: &[u8]) -> Result<(u32, u32, usize)> {
        ensure!(
            h.len() >= MOCK_HEADER && h[..12] == MOCK_MAGIC[..],
            InvalidArgument,
            "mock code object: no RAWGRAD\\0UOPS magic (is this real GPU code?)"
        );
        let w = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        ensure!(
            w(12) == MOCK_VERSION,
            InvalidArgument,
            "mock code object: format version {}, this build reads {MOCK_VERSION}",
            w(12)
        );
        let name_len = w(24) as usize;
        ensure!(
            name_len <= 4096,
            InvalidArgument,
            "mock code object: name length {name_len} is absurd"
        );
        Ok((w(16), w(20), name_len))
    }

    /// Decode a whole blob.
    pub fn decode(b: &[u8]) -> Result<MockBlob> {
        let (props, kernarg_size, name_len) = MockBlob::parse_header(b)?;
        let name_end = MOCK_HEADER + name_len;
        let Some(lenb) = b.get(name_end..name_end + 4) else {
            bail!(
                InvalidArgument,
                "mock code object: truncated after the name"
            )
        };
        let n = u32::from_le_bytes([lenb[0], lenb[1], lenb[2], lenb[3]]) as usize;
        let Some(text) = b.get(name_end + 4..name_end + 4 + n) else {
            bail!(
                InvalidArgument,
                "mock code object: UOps ({n} bytes) truncated"
            )
        };
        let utf8 = |x: &[u8], what: &str| {
            String::from_utf8(x.to_vec()).map_err(|_| {
                crate::Error::InvalidArgument(format!("mock code object: {what} is not UTF-8"))
            })
        };
        Ok(MockBlob {
            kernel_code_properties: props,
            kernarg_size,
            name: utf8(&b[MOCK_HEADER..name_end], "name")?,
            uops: utf8(text, "UOps")?,
        })
    }
}

/// What a kernel's UOps ask of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MockKernelInfo {
    /// DEFINE_GLOBALs (buffer arguments).
    pub nbufs: usize,
    /// DEFINE_VARs (integer arguments).
    pub nvars: usize,
    /// Bytes of DEFINE_LOCAL memory.
    pub lds_bytes: u32,
}

impl MockKernelInfo {
    /// Count the arguments and local memory of serialized UOps.
    pub fn of(uops_text: &str) -> Result<MockKernelInfo> {
        let uops = deserialize(uops_text)?;
        let lds: usize = uops
            .iter()
            .filter(|u| u.op() == UOps::DEFINE_LOCAL)
            .map(|u| match (u.arg(), u.dtype()) {
                (UArg::Local { size, .. }, Some(d)) => size * d.scalar.itemsize(),
                _ => 0,
            })
            .sum();
        Ok(MockKernelInfo {
            nbufs: globals(&uops).len(),
            nvars: vars(&uops).len(),
            lds_bytes: u32::try_from(lds).unwrap_or(u32::MAX),
        })
    }

    /// The packed kernarg bytes: `8 * nbufs + 4 * nvars`.
    pub fn kernarg_size(&self) -> u32 {
        (8 * self.nbufs + 4 * self.nvars) as u32
    }
}

/// The descriptor a compiler for `target` would write for a kernel of `kernarg_size` bytes of
/// kernargs and `lds_bytes` of LDS.
pub fn mock_descriptor(target: &GfxTarget, kernarg_size: u32, lds_bytes: u32) -> KernelDescriptor {
    let mut props = KernelCodeProperties::ENABLE_SGPR_KERNARG_SEGMENT_PTR;
    let mut user_sgprs = 2;
    if target.scratch == ScratchModel::PrivateSegmentDescriptor {
        props |= KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER;
        user_sgprs += 4;
    }
    if target.wave_size == 32 {
        props |= KernelCodeProperties::ENABLE_WAVEFRONT_SIZE32;
    }
    // USER_SGPR, TGID_X/Y/Z_EN, TIDIG_COMP_CNT = 2 (x, y and z thread ids).
    let rsrc2 = user_sgprs << 1 | 0x7 << 7 | 2 << 11;
    KernelDescriptor {
        group_segment_fixed_size: lds_bytes,
        kernarg_size,
        compute_pgm_rsrc2: rsrc2,
        kernel_code_properties: props.bits(),
        ..Default::default()
    }
}

/// The mock code object of kernel `name` (serialized UOps `uops_text`) for `target`. With
/// `kernarg_override`, the descriptor and blob claim that kernarg size instead of the one the
/// UOps imply (to test the mismatch checks).
pub fn mock_code_object(
    target: &GfxTarget,
    name: &str,
    uops_text: &str,
    kernarg_override: Option<u32>,
) -> Result<Vec<u8>> {
    let info = MockKernelInfo::of(uops_text)?;
    let kernarg_size = kernarg_override.unwrap_or(info.kernarg_size());
    let kd = mock_descriptor(target, kernarg_size, info.lds_bytes);
    let blob = MockBlob {
        kernel_code_properties: u32::from(kd.kernel_code_properties),
        kernarg_size,
        name: name.to_string(),
        uops: uops_text.to_string(),
    };
    ensure!(
        blob.name.len() <= 4096 && blob.uops.len() <= MAX_BLOB,
        InvalidArgument,
        "mock code object for {name}: name or UOps too large"
    );
    Ok(write_amdgpu_elf(&AmdgpuElf {
        name,
        e_flags: target.elf_mach,
        relocatable: false,
        descriptor: kd.to_bytes(),
        text: &blob.encode(),
    }))
}
