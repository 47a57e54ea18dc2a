//! The MOCKGPU "mock cubin": the software GPU cannot run SASS, so under `MOCKGPU=1` a kernel's
//! `.text.<k>` holds a blob with the serialized UOps instead, inside an EM_CUDA-shaped ELF with
//! real-looking `.nv.constant0.<k>`, `.nv.info` (REGCOUNT, FRAME_SIZE, MIN_STACK_SIZE) and
//! `.nv.info.<k>` (CUDA_API_VERSION, KPARAM_INFO per parameter, MAXREG_COUNT,
//! CBANK_PARAM_SIZE, PARAM_CBANK) records, so the NV backend loads it as any cubin
//! (`runtime::nv::cubin::Cubin::parse`).
//! The emulator's executor finds the blob at the QMD's program address ([`parse_mock_blob`]).
//!
//! Blob layout (little-endian): `RAWGRAD\0UOPS` (12 bytes; `RAWGRAD\0PTX\0` when the code is
//! PTX text, `MOCKGPU_CODE=ptx`), u32 version (1), u32 param_base, u32 param bytes, u32 name
//! length, u32 code length, the name, the code (the UOp text of
//! [`crate::codegen::uop_serial::serialize`], or PTX).
//!
//! A PTX mock cubin may carry the real cubin ptxas made from the same PTX in a non-allocated
//! section [`REAL_CUBIN_SECTION`] (the loader ignores non-allocated sections, as it ignores
//! `.debug_frame`); the software GPU still runs the PTX ([`real_cubin`] reads it back).
//!
//! Not guaranteed: nothing executes a mock cubin but rawgrad's emulator.

use crate::codegen::uops::UOp;
use crate::hw::nv::arch::NvArch;
use crate::hw::nv::cubin::elf::*;
use crate::hw::nv::cubin::{
    KParam, EIATTR_CBANK_PARAM_SIZE, EIATTR_CUDA_API_VERSION, EIATTR_EXIT_INSTR_OFFSETS,
    EIATTR_FRAME_SIZE, EIATTR_KPARAM_INFO, EIATTR_MAXREG_COUNT, EIATTR_MIN_STACK_SIZE,
    EIATTR_PARAM_CBANK, EIATTR_REGCOUNT, EIFMT_HVAL, EIFMT_SVAL, ELFOSABI_CUDA, EM_CUDA,
};
use crate::{bail, ensure, Result};

/// The blob's first 12 bytes.
pub const MOCK_MAGIC: &[u8; 12] = b"RAWGRAD\0UOPS";
/// The first 12 bytes of a blob holding PTX.
pub const MOCK_MAGIC_PTX: &[u8; 12] = b"RAWGRAD\0PTX\0";

/// What a blob's code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockCode {
    /// Serialized UOps (the UOp interpreter runs them).
    Uops,
    /// PTX text (the PTX interpreter runs it).
    Ptx,
}

impl MockCode {
    fn magic(self) -> &'static [u8; 12] {
        match self {
            MockCode::Uops => MOCK_MAGIC,
            MockCode::Ptx => MOCK_MAGIC_PTX,
        }
    }
}
/// The blob format version.
pub const MOCK_VERSION: u32 = 1;
/// Bytes before the name.
pub const MOCK_HEADER_BYTES: usize = 32;

/// What the writer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockCubin {
    pub name: String,
    /// SM version written into e_flags (must belong to `arch`).
    pub sm: u32,
    /// Parameters (ordinal, offset from the parameter base, size).
    pub params: Vec<KParam>,
    /// Register count to report (EIATTR_REGCOUNT).
    pub regcount: u32,
    /// Static shared memory (`.nv.shared.<k>` NOBITS size; 0: no section).
    pub shared_size: u32,
    /// The code: the serialized UOp list, or PTX (`code`).
    pub uops: String,
    pub code: MockCode,
}

/// A parsed blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockKernel {
    pub name: String,
    pub param_base: u32,
    pub param_bytes: u32,
    /// The serialized UOp list (`crate::codegen::uop_serial::deserialize` reads it), or PTX.
    pub uops: String,
    pub code: MockCode,
}

impl MockKernel {
    /// Total blob bytes for a header's lengths.
    pub fn blob_len(header: &[u8]) -> Result<usize> {
        let h = check_header(header)?;
        Ok(MOCK_HEADER_BYTES + h.3 as usize + h.4 as usize)
    }
}

fn u32_le(d: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}

/// The code kind a blob's magic names.
fn code_of(b: &[u8]) -> Option<MockCode> {
    [MockCode::Uops, MockCode::Ptx]
        .into_iter()
        .find(|c| b.len() >= MOCK_HEADER_BYTES && &b[..12] == c.magic())
}

/// (version, param_base, param_bytes, name_len, uops_len) of a blob header.
fn check_header(b: &[u8]) -> Result<(u32, u32, u32, u32, u32)> {
    ensure!(
        code_of(b).is_some(),
        InvalidArgument,
        "mock cubin: program does not start with RAWGRAD\\0UOPS or RAWGRAD\\0PTX\\0 (first bytes {:02x?})",
        &b[..b.len().min(12)]
    );
    let h = (
        u32_le(b, 12),
        u32_le(b, 16),
        u32_le(b, 20),
        u32_le(b, 24),
        u32_le(b, 28),
    );
    ensure!(
        h.0 == MOCK_VERSION,
        InvalidArgument,
        "mock cubin: blob version {} (this build reads {MOCK_VERSION})",
        h.0
    );
    Ok(h)
}

/// Parses a blob (`bytes` may extend past it).
pub fn parse_mock_blob(bytes: &[u8]) -> Result<MockKernel> {
    let (_, param_base, param_bytes, name_len, uops_len) = check_header(bytes)?;
    let name_end = MOCK_HEADER_BYTES + name_len as usize;
    let end = name_end + uops_len as usize;
    let (Some(name), Some(uops)) = (
        bytes.get(MOCK_HEADER_BYTES..name_end),
        bytes.get(name_end..end),
    ) else {
        bail!(
            InvalidArgument,
            "mock cubin: blob of {end} bytes truncated to {}",
            bytes.len()
        )
    };
    let text = |b: &[u8], what: &str| {
        String::from_utf8(b.to_vec())
            .map_err(|_| crate::Error::InvalidArgument(format!("mock cubin: {what} is not UTF-8")))
    };
    Ok(MockKernel {
        name: text(name, "kernel name")?,
        param_base,
        param_bytes,
        uops: text(uops, "UOp text")?,
        code: code_of(bytes).unwrap_or(MockCode::Uops),
    })
}

fn blob(name: &str, param_base: u32, param_bytes: u32, uops: &str, code: MockCode) -> Vec<u8> {
    let mut b = Vec::with_capacity(MOCK_HEADER_BYTES + name.len() + uops.len());
    b.extend_from_slice(code.magic());
    for v in [
        MOCK_VERSION,
        param_base,
        param_bytes,
        name.len() as u32,
        uops.len() as u32,
    ] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(uops.as_bytes());
    b
}

fn sval(out: &mut Vec<u8>, attr: u8, payload: &[u32]) {
    out.extend_from_slice(&[EIFMT_SVAL, attr]);
    out.extend_from_slice(&((payload.len() * 4) as u16).to_le_bytes());
    for p in payload {
        out.extend_from_slice(&p.to_le_bytes());
    }
}

fn hval(out: &mut Vec<u8>, attr: u8, v: u16) {
    out.extend_from_slice(&[EIFMT_HVAL, attr]);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Symbol indices in the mock file: 1 `.text.<k>` (section), 2 `.nv.constant0.<k>` (section),
/// 3 the kernel (global function).
const SYM_CONST0: u32 = 2;
const SYM_KERNEL: u32 = 3;

fn kernel_info_records(
    m: &MockCubin,
    param_base: u32,
    param_bytes: u32,
    code_len: usize,
) -> Result<Vec<u8>> {
    let mut k = Vec::new();
    sval(&mut k, EIATTR_CUDA_API_VERSION, &[130]);
    for p in m.params.iter().rev() {
        ensure!(
            p.size < 1 << 14 && p.offset < 1 << 16 && p.ordinal < 1 << 16,
            InvalidArgument,
            "mock cubin {}: parameter {p:?} does not fit KPARAM_INFO",
            m.name
        );
        sval(
            &mut k,
            EIATTR_KPARAM_INFO,
            &[0, p.offset << 16 | p.ordinal, p.size << 18 | 0x1F000],
        );
    }
    hval(&mut k, EIATTR_MAXREG_COUNT, 0xFF);
    sval(
        &mut k,
        EIATTR_EXIT_INSTR_OFFSETS,
        &[code_len.saturating_sub(16) as u32 & !0xF],
    );
    let Ok(size16) = u16::try_from(param_bytes) else {
        bail!(
            InvalidArgument,
            "mock cubin {}: {param_bytes} parameter bytes exceed 16 bits",
            m.name
        )
    };
    hval(&mut k, EIATTR_CBANK_PARAM_SIZE, size16);
    sval(
        &mut k,
        EIATTR_PARAM_CBANK,
        &[SYM_CONST0, param_bytes << 16 | param_base],
    );
    Ok(k)
}

/// The section of a PTX mock cubin that holds ptxas's cubin of the same PTX.
pub const REAL_CUBIN_SECTION: &str = ".rawgrad.cubin";

/// The real cubin a mock cubin carries ([`REAL_CUBIN_SECTION`]), if any.
pub fn real_cubin(lib: &[u8]) -> Result<Option<Vec<u8>>> {
    let e = Elf::parse(lib)?;
    match e.section_named(REAL_CUBIN_SECTION) {
        Some(s) => Ok(Some(e.section_data(s)?.to_vec())),
        None => Ok(None),
    }
}

/// Writes a mock cubin for `arch` (parameter base from its cbuf0 layout).
pub fn write_mock_cubin(m: &MockCubin, arch: &NvArch) -> Result<Vec<u8>> {
    write_mock_cubin_with(m, arch, None)
}

/// [`write_mock_cubin`], with ptxas's cubin of the same code in [`REAL_CUBIN_SECTION`] when
/// `real` is given.
pub fn write_mock_cubin_with(m: &MockCubin, arch: &NvArch, real: Option<&[u8]>) -> Result<Vec<u8>> {
    ensure!(
        arch.has_sm(m.sm),
        InvalidArgument,
        "mock cubin {}: sm_{} is not a {} SM",
        m.name,
        m.sm,
        arch.compute_class_name
    );
    ensure!(
        m.regcount > 0 && m.regcount < 256,
        InvalidArgument,
        "mock cubin {}: register count {}",
        m.name,
        m.regcount
    );
    let param_base = arch.cbuf0.param_base;
    let param_bytes = m
        .params
        .iter()
        .map(|p| p.offset + p.size)
        .max()
        .unwrap_or(0);
    let code = blob(&m.name, param_base, param_bytes, &m.uops, m.code);
    let code_len = code.len() as u64;
    let mut sections = mock_sections(m, param_base, param_bytes, code)?;
    if let Some(r) = real {
        let s = NewSection::new(REAL_CUBIN_SECTION, SHT_PROGBITS, 0, 0, 0, 8, r.to_vec());
        sections.push(s);
    }
    let (text_idx, const_idx) = (WRITER_FIRST + 2, WRITER_FIRST + 3);
    let sym = |name: String, info: u8, other: u8, shndx: u32, size: u64| NewSymbol {
        name,
        info,
        other,
        shndx: shndx as u16,
        value: 0,
        size,
    };
    let k = &m.name;
    let w = ElfWriter {
        osabi: ELFOSABI_CUDA,
        abi_version: 8,
        machine: EM_CUDA,
        flags: 0x0600_0000 | m.sm << 8 | 0x04,
        sections,
        symbols: vec![
            sym(format!(".text.{k}"), STT_SECTION, 0, text_idx, 0),
            sym(format!(".nv.constant0.{k}"), STT_SECTION, 0, const_idx, 0),
            sym(
                k.clone(),
                STB_GLOBAL << 4 | STT_FUNC,
                STO_CUDA_ENTRY,
                text_idx,
                code_len,
            ),
        ],
    };
    Ok(w.write())
}

/// The sections of a mock cubin: 4 `.nv.info`, 5 `.nv.info.<k>`, 6 `.text.<k>`,
/// 7 `.nv.constant0.<k>`, then `.nv.shared.<k>` when there is static shared memory.
fn mock_sections(
    m: &MockCubin,
    param_base: u32,
    param_bytes: u32,
    code: Vec<u8>,
) -> Result<Vec<NewSection>> {
    let mut global = Vec::new();
    sval(&mut global, EIATTR_REGCOUNT, &[SYM_KERNEL, m.regcount]);
    sval(&mut global, EIATTR_FRAME_SIZE, &[SYM_KERNEL, 0]);
    sval(&mut global, EIATTR_MIN_STACK_SIZE, &[SYM_KERNEL, 0]);
    let kinfo = kernel_info_records(m, param_base, param_bytes, code.len())?;
    let text_idx = WRITER_FIRST + 2;
    let k = &m.name;
    let (alloc, exec, link) = (SHF_ALLOC, SHF_EXECINSTR, SHF_INFO_LINK);
    let cbuf0 = vec![0; (param_base + param_bytes) as usize];
    let mut sections = vec![
        NewSection::new(".nv.info", SHT_CUDA_INFO, 0, WRITER_SYMTAB, 0, 4, global),
        NewSection::new(
            &format!(".nv.info.{k}"),
            SHT_CUDA_INFO,
            link,
            WRITER_SYMTAB,
            text_idx,
            4,
            kinfo,
        ),
        NewSection::new(
            &format!(".text.{k}"),
            SHT_PROGBITS,
            alloc | exec,
            WRITER_SYMTAB,
            m.regcount << 24 | SYM_KERNEL,
            128,
            code,
        ),
        NewSection::new(
            &format!(".nv.constant0.{k}"),
            SHT_PROGBITS,
            alloc | link,
            0,
            text_idx,
            4,
            cbuf0,
        ),
    ];
    if m.shared_size > 0 {
        let flags = alloc | SHF_WRITE | link;
        let mut s = NewSection::new(
            &format!(".nv.shared.{k}"),
            SHT_NOBITS,
            flags,
            0,
            text_idx,
            16,
            vec![],
        );
        s.nobits_size = u64::from(m.shared_size);
        sections.push(s);
    }
    Ok(sections)
}

/// [`write_mock_cubin`] for a UOp list (serialized with
/// [`crate::codegen::uop_serial::serialize`]); `param_sizes` lists the parameters' byte sizes in
/// order, packed at their natural alignment.
pub fn mock_cubin_for_uops(
    name: &str,
    uops: &[UOp],
    param_sizes: &[u32],
    arch: &NvArch,
    sm: u32,
) -> Result<Vec<u8>> {
    let mut params = Vec::with_capacity(param_sizes.len());
    let mut off = 0u32;
    for (i, &size) in param_sizes.iter().enumerate() {
        ensure!(
            size.is_power_of_two() && size <= 8,
            InvalidArgument,
            "mock cubin {name}: parameter {i} of {size} bytes (1, 2, 4 or 8)"
        );
        off = off.div_ceil(size) * size;
        params.push(KParam {
            ordinal: i as u32,
            offset: off,
            size,
        });
        off += size;
    }
    let m = MockCubin {
        name: name.to_string(),
        sm,
        params,
        regcount: 32,
        shared_size: 0,
        uops: crate::codegen::uop_serial::serialize(uops)?,
        code: MockCode::Uops,
    };
    write_mock_cubin(&m, arch)
}
