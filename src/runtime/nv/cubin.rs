//! The cubin loader (tinygrad `NVProgram.__init__`, ptxas 13 cubins): an ELF64 EM_CUDA file from
//! ptxas / NVRTC / nvJitLink (or the emulator's mock cubin, which is shaped the same) becomes a
//! [`Cubin`]: the GPU image (the ALLOC sections at 128-byte alignment plus a 4 KiB tail for
//! instruction prefetch), the relocations to apply once the load address is known, and what a
//! launch needs (entry offset, registers, the parameter window of constant buffer 0, shared memory,
//! stack, the other constant banks). The format constants (EM_CUDA, EIATTR_*, R_CUDA_*) and the ELF
//! reader are in [`crate::hw::nv::cubin`] (re-exported here).
//!
//! Checked: ELF64 little-endian, e_machine EM_CUDA (190), OS/ABI CUDA, e_flags' SM against the
//! device's (same major, cubin minor <= device minor), the parameter base against the arch table,
//! that the image sections are not pre-linked (sh_addr 0), relocation types (R_CUDA_64,
//! R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32; others are errors naming them, except in non-ALLOC
//! sections such as `.debug_frame`, which are skipped). Unknown `.nv.info` attributes, unknown
//! non-ALLOC sections and processor-specific section types (sm_100/sm_120's `.nv.compat`,
//! `.nv.capmerc.*`, and the ALLOC-flagged `.nv.merc.*` aliases) are skipped.
//!
//! Not guaranteed: cubins with several kernels are supported (pick one by name), but
//! relocations between kernels and device-side function calls are only as right as R_CUDA_64
//! and ABS32 cover; older ABI versions (< 8) take the SM from e_flags bits 7:0 (UNCONFIRMED).

#[cfg(test)]
mod tests;

pub use crate::hw::nv::cubin::*;

use crate::hw::nv::arch::NvArch;
use crate::hw::nv::cubin::elf::*;
use crate::{bail, ensure, Result};
use std::collections::HashMap;

/// Extra zero bytes after the image: instruction prefetch can run past the end of the code.
pub const IMAGE_TAIL: u64 = 4096;
/// Alignment of the image sections.
pub const IMAGE_ALIGN: u64 = 128;
/// Largest image the loader builds (code, constants and `.nv.global` data of one module).
pub const MAX_IMAGE: u64 = 256 << 20;

/// A constant bank other than 0 carried in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstBank {
    pub bank: u32,
    pub image_offset: u64,
    pub size: u64,
}

/// A relocation to apply at load time: write (load address + `target`) at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reloc {
    /// Image offset of the relocated instruction or data.
    pub offset: u64,
    /// R_CUDA_* type.
    pub kind: u32,
    /// Image offset of the symbol plus the addend.
    pub target: i64,
}

/// A loaded kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cubin {
    pub name: String,
    /// SM from e_flags (sm_90 -> 90).
    pub sm: u32,
    /// The image with relocated fields zeroed (see [`Cubin::image_at`]).
    pub image: Vec<u8>,
    pub relocs: Vec<Reloc>,
    /// Image offset of the kernel's first instruction.
    pub entry_offset: u64,
    /// Bytes of the kernel's `.text` section.
    pub code_size: u64,
    /// EIATTR_REGCOUNT (or the `.text` sh_info high byte of older cubins).
    pub regcount: u32,
    /// Offset of the parameters in constant buffer 0 (EIATTR_PARAM_CBANK).
    pub param_base: u32,
    /// Parameter bytes (EIATTR_CBANK_PARAM_SIZE).
    pub param_size: u32,
    /// Parameters by ordinal.
    pub kparams: Vec<KParam>,
    /// Size of `.nv.constant0.<kernel>` (= param_base + param_size).
    pub cbuf0_size: u32,
    /// Static shared memory (`.nv.shared.<kernel>` NOBITS size).
    pub shared_size: u32,
    /// `.nv.shared.reserved.*` bytes (0x40 on sm_120, 0 on sm_90).
    pub reserved_shared_size: u32,
    /// EIATTR_MIN_STACK_SIZE (SLM per thread = this + 0x240, tinygrad `_ensure_has_local_memory`).
    pub min_stack: u32,
    pub frame_size: u32,
    pub max_reg_count: Option<u32>,
    pub cuda_api_version: Option<u32>,
    pub exit_offsets: Vec<u32>,
    /// Constant banks other than 0 (e.g. `.nv.constant4` holding global-variable addresses).
    pub const_banks: Vec<ConstBank>,
}

/// One `.nv.info` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRecord {
    pub format: u8,
    pub attr: u8,
    /// The u16 of NVAL/BVAL/HVAL records.
    pub value: u16,
    /// The payload of SVAL records.
    pub payload: Vec<u8>,
}

/// Parses a `.nv.info` section's records.
pub fn parse_info(d: &[u8]) -> Result<Vec<InfoRecord>> {
    let mut out = Vec::new();
    let mut o = 0;
    while o < d.len() {
        let (format, attr) = (d[o], *d.get(o + 1).unwrap_or(&0));
        let value = u16_at(d, o + 2, ".nv.info record")?;
        o += 4;
        let payload = match format {
            EIFMT_SVAL => {
                let end = o + usize::from(value);
                let Some(p) = d.get(o..end) else {
                    bail!(InvalidArgument, "cubin: .nv.info attribute {attr:#x}: {value}-byte payload runs past the section")
                };
                o = end;
                p.to_vec()
            }
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => Vec::new(),
            _ => bail!(
                InvalidArgument,
                "cubin: .nv.info record format {format:#x} (attribute {attr:#x}) is unknown"
            ),
        };
        out.push(InfoRecord {
            format,
            attr,
            value,
            payload,
        });
    }
    Ok(out)
}

fn payload_u32(r: &InfoRecord, i: usize) -> Result<u32> {
    u32_at(&r.payload, 4 * i, "EIATTR payload")
}

/// The SM a cubin was built for (e_flags bits 15:8 since ABI version 8).
pub fn cubin_sm(e: &Elf) -> u32 {
    if e.abi_version >= 8 {
        e.flags >> 8 & 0xFF
    } else {
        e.flags & 0xFF
    }
}

fn check_header(e: &Elf, device_sm: u32) -> Result<u32> {
    ensure!(
        e.machine == EM_CUDA,
        InvalidArgument,
        "cubin: e_machine {} is not EM_CUDA ({EM_CUDA})",
        e.machine
    );
    ensure!(
        e.osabi == ELFOSABI_CUDA || e.osabi == ELFOSABI_CUDA_OLD,
        InvalidArgument,
        "cubin: OS/ABI {:#x} is not CUDA ({ELFOSABI_CUDA:#x})",
        e.osabi
    );
    let sm = cubin_sm(e);
    ensure!(
        sm / 10 == device_sm / 10 && sm % 10 <= device_sm % 10,
        InvalidArgument,
        "cubin: built for sm_{sm} (e_flags {:#x}), the device is sm_{device_sm}",
        e.flags
    );
    Ok(sm)
}

/// Everything the loader gathers before building the [`Cubin`].
struct Layout {
    /// Section index -> image offset.
    placed: HashMap<usize, u64>,
    size: u64,
}

fn is_image_section(s: &Section) -> bool {
    s.flags & SHF_ALLOC != 0
        && (s.sh_type == SHT_PROGBITS
            || (s.sh_type == SHT_NOBITS && !s.name.starts_with(".nv.shared")))
        && !s.name.starts_with(".nv.constant0")
}

fn layout_image(e: &Elf) -> Result<Layout> {
    let mut placed = HashMap::new();
    let mut size = 0u64;
    for s in e.sections.iter().filter(|s| is_image_section(s)) {
        ensure!(
            s.addr == 0,
            InvalidArgument,
            "cubin: section {:?} has sh_addr {:#x} (pre-linked cubins are not supported)",
            s.name,
            s.addr
        );
        ensure!(
            s.addralign <= 1 << 16 && (s.addralign == 0 || s.addralign.is_power_of_two()),
            InvalidArgument,
            "cubin: section {:?} has alignment {:#x}",
            s.name,
            s.addralign
        );
        e.section_data(s)?; // PROGBITS extents lie in the file
        let align = s.addralign.max(IMAGE_ALIGN);
        size = size.div_ceil(align) * align;
        placed.insert(s.index, size);
        size = size.saturating_add(s.size);
        ensure!(
            size <= MAX_IMAGE,
            InvalidArgument,
            "cubin: the image grows past {MAX_IMAGE:#x} bytes at section {:?} ({:#x} bytes)",
            s.name,
            s.size
        );
    }
    // Processor-specific section types (sm_100+/sm_120's `.nv.merc.*` aliases, flagged ALLOC)
    // are skipped; an ALLOC section of another standard type is refused.
    let other_alloc = e.sections.iter().find(|s| {
        s.flags & SHF_ALLOC != 0
            && s.sh_type < SHT_CUDA_INFO
            && !is_image_section(s)
            && !(s.sh_type == SHT_NOBITS && s.name.starts_with(".nv.shared"))
            && !s.name.starts_with(".nv.constant0")
    });
    if let Some(s) = other_alloc {
        bail!(
            InvalidArgument,
            "cubin: ALLOC section {:?} of type {:#x} is not supported",
            s.name,
            s.sh_type
        )
    }
    Ok(Layout { placed, size })
}

fn build_image(e: &Elf, l: &Layout) -> Result<Vec<u8>> {
    let mut image = vec![0u8; (l.size + IMAGE_TAIL) as usize];
    for (&idx, &off) in &l.placed {
        let s = &e.sections[idx];
        let d = e.section_data(s)?;
        image[off as usize..off as usize + d.len()].copy_from_slice(d);
    }
    Ok(image)
}

/// Reads the relocations of image sections; relocated fields in `image` are cleared after their
/// in-place (REL) addends are taken.
fn collect_relocs(e: &Elf, l: &Layout, syms: &[Symbol], image: &mut [u8]) -> Result<Vec<Reloc>> {
    let mut out = Vec::new();
    for rs in e
        .sections
        .iter()
        .filter(|s| s.sh_type == SHT_REL || s.sh_type == SHT_RELA)
    {
        let Some(target) = e.sections.get(rs.info as usize) else {
            bail!(
                InvalidArgument,
                "cubin: {:?} relocates missing section {}",
                rs.name,
                rs.info
            )
        };
        if target.flags & SHF_ALLOC == 0 {
            continue; // .rela.debug_frame and other debug sections
        }
        let Some(&base) = l.placed.get(&target.index) else {
            bail!(
                InvalidArgument,
                "cubin: {:?} relocates {:?}, which is not part of the image",
                rs.name,
                target.name
            )
        };
        for r in e.relocations(rs)? {
            out.push(one_reloc(rs, target, base, &r, syms, l, image)?);
        }
    }
    Ok(out)
}

fn one_reloc(
    rs: &Section,
    target: &Section,
    base: u64,
    r: &RelEntry,
    syms: &[Symbol],
    l: &Layout,
    image: &mut [u8],
) -> Result<Reloc> {
    let Some(sym) = syms.get(r.sym as usize) else {
        bail!(
            InvalidArgument,
            "cubin: {:?}: symbol {} does not exist",
            rs.name,
            r.sym
        )
    };
    let (field, width) = match r.kind {
        R_CUDA_64 => (0, 8),
        R_CUDA_ABS32_LO_32 | R_CUDA_ABS32_HI_32 => (4, 4),
        k => bail!(
            InvalidArgument,
            "cubin: {:?}: relocation type {k:#x} against {:?} is not supported (R_CUDA_64, ABS32_LO_32, ABS32_HI_32 are)",
            rs.name,
            sym.name
        ),
    };
    let Some(&sym_base) = l.placed.get(&usize::from(sym.shndx)) else {
        bail!(
            InvalidArgument,
            "cubin: {:?}: symbol {:?} (section {}) is not in the image",
            rs.name,
            sym.name,
            sym.shndx
        )
    };
    ensure!(
        r.offset
            .checked_add(field + width)
            .is_some_and(|end| end <= target.size),
        InvalidArgument,
        "cubin: {:?}: offset {:#x} is outside {:?}",
        rs.name,
        r.offset,
        target.name
    );
    let at = (base + r.offset + field) as usize;
    let addend = match r.addend {
        Some(a) => a,
        None if width == 8 => u64_at(image, at, "REL addend")? as i64,
        None => i64::from(u32_at(image, at, "REL addend")?),
    };
    image[at..at + width as usize].fill(0);
    Ok(Reloc {
        offset: base + r.offset,
        kind: r.kind,
        target: (sym_base + sym.value) as i64 + addend,
    })
}

/// Per-kernel facts from `.nv.info.<k>`.
#[derive(Default)]
struct KernelInfo {
    param_cbank: Option<(u32, u32, u32)>,
    cbank_param_size: Option<u32>,
    kparams: Vec<KParam>,
    max_reg_count: Option<u32>,
    cuda_api_version: Option<u32>,
    exit_offsets: Vec<u32>,
}

fn kernel_info(records: &[InfoRecord]) -> Result<KernelInfo> {
    let mut k = KernelInfo::default();
    for r in records {
        match r.attr {
            EIATTR_PARAM_CBANK => {
                let sym = payload_u32(r, 0)?;
                let packed = payload_u32(r, 1)?;
                k.param_cbank = Some((sym, packed & 0xFFFF, packed >> 16));
            }
            EIATTR_CBANK_PARAM_SIZE => k.cbank_param_size = Some(u32::from(r.value)),
            EIATTR_KPARAM_INFO => {
                let w1 = payload_u32(r, 1)?;
                k.kparams.push(KParam {
                    ordinal: w1 & 0xFFFF,
                    offset: w1 >> 16,
                    size: payload_u32(r, 2)? >> 18 & 0x3FFF,
                });
            }
            EIATTR_MAXREG_COUNT => k.max_reg_count = Some(u32::from(r.value)),
            EIATTR_CUDA_API_VERSION => k.cuda_api_version = Some(payload_u32(r, 0)?),
            EIATTR_EXIT_INSTR_OFFSETS => {
                for i in 0..r.payload.len() / 4 {
                    k.exit_offsets.push(payload_u32(r, i)?);
                }
            }
            _ => {}
        }
    }
    k.kparams.sort_by_key(|p| p.ordinal);
    Ok(k)
}

/// A global `.nv.info` attribute for symbol `sym` (payload: symbol u32, value u32).
fn global_attr(records: &[InfoRecord], attr: u8, sym: usize) -> Result<Option<u32>> {
    for r in records
        .iter()
        .filter(|r| r.attr == attr && r.format == EIFMT_SVAL)
    {
        if payload_u32(r, 0)? as usize == sym {
            return Ok(Some(payload_u32(r, 1)?));
        }
    }
    Ok(None)
}

/// The kernels (names of `.text.<k>` sections) of a cubin.
pub fn cubin_kernels(bytes: &[u8]) -> Result<Vec<String>> {
    let e = Elf::parse(bytes)?;
    Ok(e.sections
        .iter()
        .filter_map(|s| s.name.strip_prefix(".text.").map(str::to_string))
        .collect())
}

impl Cubin {
    /// Loads kernel `kernel` (or the only kernel when `None`) of `bytes` for a device of SM
    /// version `device_sm` whose class is `arch`.
    pub fn parse(
        bytes: &[u8],
        kernel: Option<&str>,
        arch: &NvArch,
        device_sm: u32,
    ) -> Result<Cubin> {
        let e = Elf::parse(bytes)?;
        let sm = check_header(&e, device_sm)?;
        let name = pick_kernel(&e, kernel)?;
        let syms = e.symbols()?;
        let Some(text) = e.section_named(&format!(".text.{name}")).cloned() else {
            bail!(Internal, "cubin: .text.{name} vanished after picking it")
        };
        let sym_idx = kernel_symbol(&syms, &name, text.index)?;
        let layout = layout_image(&e)?;
        let mut image = build_image(&e, &layout)?;
        let relocs = collect_relocs(&e, &layout, &syms, &mut image)?;
        let (global, kinfo) = info_records(&e, &name)?;
        let regcount = kernel_regcount(&global, sym_idx, &text, &name)?;
        let Some(&text_off) = layout.placed.get(&text.index) else {
            bail!(
                InvalidArgument,
                "cubin: .text.{name} is not an ALLOC PROGBITS section"
            )
        };
        let mut c = Cubin {
            sm,
            image,
            relocs,
            entry_offset: text_off + syms[sym_idx].value,
            code_size: text.size,
            regcount,
            param_base: arch.cbuf0.param_base,
            param_size: 0,
            kparams: kinfo.kparams.clone(),
            cbuf0_size: 0,
            shared_size: 0,
            reserved_shared_size: 0,
            min_stack: global_attr(&global, EIATTR_MIN_STACK_SIZE, sym_idx)?.unwrap_or(0),
            frame_size: global_attr(&global, EIATTR_FRAME_SIZE, sym_idx)?.unwrap_or(0),
            max_reg_count: kinfo.max_reg_count,
            cuda_api_version: kinfo.cuda_api_version,
            exit_offsets: kinfo.exit_offsets.clone(),
            const_banks: Vec::new(),
            name,
        };
        c.read_constants(&e, &syms, &kinfo, arch)?;
        c.read_shared(&e);
        c.read_banks(&e, &layout);
        Ok(c)
    }

    fn read_constants(
        &mut self,
        e: &Elf,
        syms: &[Symbol],
        k: &KernelInfo,
        arch: &NvArch,
    ) -> Result<()> {
        let name = &self.name;
        let c0 = e.section_named(&format!(".nv.constant0.{name}"));
        self.cbuf0_size = c0.map_or(0, |s| s.size as u32);
        if let Some((sym, base, size)) = k.param_cbank {
            let sec = syms.get(sym as usize).map(|s| usize::from(s.shndx));
            ensure!(
                sec.is_some() && sec == c0.map(|s| s.index),
                InvalidArgument,
                "cubin {name}: EIATTR_PARAM_CBANK names symbol {sym}, not .nv.constant0.{name}"
            );
            ensure!(
                base == arch.cbuf0.param_base,
                InvalidArgument,
                "cubin {name}: parameters at cbuf0 {base:#x}, {} expects {:#x} (wrong arch?)",
                arch.compute_class_name,
                arch.cbuf0.param_base
            );
            self.param_base = base;
            self.param_size = size;
        }
        if let Some(s) = k.cbank_param_size {
            ensure!(
                k.param_cbank.is_none() || s == self.param_size,
                InvalidArgument,
                "cubin {name}: EIATTR_CBANK_PARAM_SIZE {s} != EIATTR_PARAM_CBANK size {}",
                self.param_size
            );
            self.param_size = s;
        }
        ensure!(
            self.cbuf0_size == 0 || self.cbuf0_size >= self.param_base + self.param_size,
            InvalidArgument,
            "cubin {name}: .nv.constant0 is {:#x} bytes, parameters end at {:#x}",
            self.cbuf0_size,
            self.param_base + self.param_size
        );
        if self.cbuf0_size == 0 {
            self.cbuf0_size = self.param_base + self.param_size;
        }
        for p in &self.kparams {
            ensure!(
                p.offset + p.size <= self.param_size,
                InvalidArgument,
                "cubin {name}: parameter {} ({} bytes at {:#x}) is outside the {} parameter bytes",
                p.ordinal,
                p.size,
                p.offset,
                self.param_size
            );
        }
        Ok(())
    }

    fn read_shared(&mut self, e: &Elf) {
        let own = format!(".nv.shared.{}", self.name);
        for s in e.sections.iter().filter(|s| s.sh_type == SHT_NOBITS) {
            if s.name == own {
                self.shared_size = s.size as u32;
            } else if s.name.starts_with(".nv.shared.reserved") {
                self.reserved_shared_size = self.reserved_shared_size.saturating_add(s.size as u32);
            }
        }
    }

    fn read_banks(&mut self, e: &Elf, l: &Layout) {
        for s in &e.sections {
            let Some(rest) = s.name.strip_prefix(".nv.constant") else {
                continue;
            };
            let (bank, owner) = match rest.split_once('.') {
                Some((b, k)) => (b, Some(k)),
                None => (rest, None),
            };
            let Ok(bank) = bank.parse::<u32>() else {
                continue;
            };
            let mine = owner.map_or(true, |k| k == self.name);
            if let (true, true, Some(&off)) = (bank != 0, mine, l.placed.get(&s.index)) {
                self.const_banks.push(ConstBank {
                    bank,
                    image_offset: off,
                    size: s.size,
                });
            }
        }
    }

    /// The image relocated for loading at `load_addr`.
    pub fn image_at(&self, load_addr: u64) -> Result<Vec<u8>> {
        let mut img = self.image.clone();
        for r in &self.relocs {
            let v = (load_addr as i64).wrapping_add(r.target) as u64;
            let (at, bytes) = match r.kind {
                R_CUDA_64 => (r.offset, v.to_le_bytes().to_vec()),
                R_CUDA_ABS32_LO_32 => (r.offset + 4, (v as u32).to_le_bytes().to_vec()),
                R_CUDA_ABS32_HI_32 => (r.offset + 4, ((v >> 32) as u32).to_le_bytes().to_vec()),
                k => bail!(
                    Internal,
                    "cubin {}: relocation type {k:#x} slipped through",
                    self.name
                ),
            };
            let Some(dst) = img.get_mut(at as usize..at as usize + bytes.len()) else {
                bail!(
                    InvalidArgument,
                    "cubin {}: relocation at {at:#x} is outside the image",
                    self.name
                )
            };
            dst.copy_from_slice(&bytes);
        }
        Ok(img)
    }

    /// Bytes of the image (tail included).
    pub fn image_size(&self) -> u64 {
        self.image.len() as u64
    }
}

/// The global `.nv.info` records and the kernel's `.nv.info.<k>` facts.
fn info_records(e: &Elf, name: &str) -> Result<(Vec<InfoRecord>, KernelInfo)> {
    let global = match e.section_named(".nv.info") {
        Some(s) => parse_info(e.section_data(s)?)?,
        None => Vec::new(),
    };
    let kinfo = match e.section_named(&format!(".nv.info.{name}")) {
        Some(s) => kernel_info(&parse_info(e.section_data(s)?)?)?,
        None => KernelInfo::default(),
    };
    Ok((global, kinfo))
}

/// EIATTR_REGCOUNT, else the `.text` sh_info high byte (sm_89 and older cubins).
fn kernel_regcount(global: &[InfoRecord], sym: usize, text: &Section, name: &str) -> Result<u32> {
    let regcount = match global_attr(global, EIATTR_REGCOUNT, sym)? {
        Some(r) => r,
        None => text.info >> 24,
    };
    ensure!(
        regcount > 0,
        InvalidArgument,
        "cubin {name}: no register count (no EIATTR_REGCOUNT, .text sh_info {:#x})",
        text.info
    );
    Ok(regcount)
}

fn pick_kernel(e: &Elf, kernel: Option<&str>) -> Result<String> {
    let names: Vec<&str> = e
        .sections
        .iter()
        .filter_map(|s| s.name.strip_prefix(".text."))
        .collect();
    match (kernel, names.as_slice()) {
        (Some(k), _) if names.contains(&k) => Ok(k.to_string()),
        (Some(k), _) => bail!(
            InvalidArgument,
            "cubin: no kernel {k:?} (kernels: {names:?})"
        ),
        (None, [one]) => Ok(one.to_string()),
        (None, []) => bail!(InvalidArgument, "cubin: no .text.<kernel> section"),
        (None, _) => bail!(
            InvalidArgument,
            "cubin: {} kernels ({names:?}); name one",
            names.len()
        ),
    }
}

fn kernel_symbol(syms: &[Symbol], name: &str, text: usize) -> Result<usize> {
    match syms
        .iter()
        .position(|s| s.name == name && s.kind() == STT_FUNC && usize::from(s.shndx) == text)
    {
        Some(i) => Ok(i),
        None => bail!(
            InvalidArgument,
            "cubin: no function symbol {name:?} in .text.{name}"
        ),
    }
}
