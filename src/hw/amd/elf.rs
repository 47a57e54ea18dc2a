//! ELF64 for AMD code objects: a bounds-checked reader, the loader that turns a code object into
//! the image rawgrad uploads (tinygrad `AMDProgram`), and a small writer for amdhsa-shaped objects
//! (used for the MOCKGPU code objects and for tests of the loader).
//!
//! Loader (tinygrad's way, extended as 0.10 does for ET_REL): every SHF_ALLOC PROGBITS section is
//! copied into a page-rounded image at its address (ET_DYN: `sh_addr`; ET_REL: packed in section
//! order at each section's alignment), `R_AMDGPU_REL64` relocations of ET_REL objects are applied
//! (the descriptor's code offset is one), and the kernel descriptor is the symbol `<name>.kd`,
//! else the start of `.rodata`.
//!
//! Not guaranteed: other relocation types are refused, not applied; multi-kernel objects load,
//! but only the named kernel's descriptor is found.
//!
//! Sources: the AMDGPU constants are LLVM `AMDGPUUsage.rst` ("ELF Code Object": `EM_AMDGPU`,
//! `ELFOSABI_AMDGPU_HSA`, the ABI versions; "Relocation Records": `R_AMDGPU_REL64`), also in
//! LLVM `include/llvm/BinaryFormat/ELF.h`; the generic ones (`ET_*`, `SHT_*`, `SHF_*`) are the
//! System V gABI's, as in glibc `elf.h`.

use crate::{bail, ensure, Result};

/// `EM_AMDGPU`.
pub const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `ELFABIVERSION_AMDGPU_HSA_V4` (code object v4).
pub const ELFABIVERSION_AMDGPU_HSA_V4: u8 = 2;
pub const ET_REL: u16 = 1;
pub const ET_DYN: u16 = 3;
pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_RELA: u32 = 4;
pub const SHT_DYNSYM: u32 = 11;
pub const SHF_WRITE: u64 = 1;
pub const SHF_ALLOC: u64 = 2;
pub const SHF_EXECINSTR: u64 = 4;
/// `R_AMDGPU_REL64`: `S + A - P`, 64 bits.
pub const R_AMDGPU_REL64: u32 = 5;
const PAGE: u64 = 4096;

fn rd<const N: usize>(d: &[u8], off: u64, what: &str) -> Result<[u8; N]> {
    let bytes = usize::try_from(off)
        .ok()
        .and_then(|o| d.get(o..o.checked_add(N)?));
    match bytes {
        Some(b) => Ok(b.try_into().unwrap_or([0; N])),
        None => bail!(
            InvalidArgument,
            "ELF: {what} at byte {off:#x} is past the end ({:#x} bytes)",
            d.len()
        ),
    }
}
fn u16_at(d: &[u8], off: u64, what: &str) -> Result<u16> {
    Ok(u16::from_le_bytes(rd(d, off, what)?))
}
fn u32_at(d: &[u8], off: u64, what: &str) -> Result<u32> {
    Ok(u32::from_le_bytes(rd(d, off, what)?))
}
fn u64_at(d: &[u8], off: u64, what: &str) -> Result<u64> {
    Ok(u64::from_le_bytes(rd(d, off, what)?))
}

/// One section header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub align: u64,
}

/// One symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    pub shndx: u16,
    pub info: u8,
}

/// A parsed ELF64 little-endian object.
#[derive(Debug)]
pub struct Elf<'a> {
    data: &'a [u8],
    pub e_type: u16,
    pub e_machine: u16,
    pub e_flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    pub sections: Vec<Section>,
}

fn cstr(d: &[u8], off: u64) -> String {
    let Some(rest) = usize::try_from(off).ok().and_then(|o| d.get(o..)) else {
        return String::new();
    };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

impl<'a> Elf<'a> {
    /// Parse the header and the section table.
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>> {
        ensure!(
            data.len() >= 64 && data[..4] == *b"\x7fELF",
            InvalidArgument,
            "ELF: not an ELF file ({} bytes)",
            data.len()
        );
        ensure!(
            data[4] == 2 && data[5] == 1,
            InvalidArgument,
            "ELF: class {} / data {} is not ELF64 little-endian",
            data[4],
            data[5]
        );
        let shoff = u64_at(data, 40, "e_shoff")?;
        let shentsize = u16_at(data, 58, "e_shentsize")?;
        let shnum = u16_at(data, 60, "e_shnum")?;
        let shstrndx = u16_at(data, 62, "e_shstrndx")?;
        ensure!(
            shnum == 0 || shentsize == 64,
            InvalidArgument,
            "ELF: section header size {shentsize}, expected 64"
        );
        let mut sections = Vec::with_capacity(shnum as usize);
        for i in 0..u64::from(shnum) {
            let h = shoff.saturating_add(i * 64);
            let at = |k: u64| h.saturating_add(k);
            sections.push(Section {
                name: String::new(),
                sh_type: u32_at(data, at(4), "sh_type")?,
                flags: u64_at(data, at(8), "sh_flags")?,
                addr: u64_at(data, at(16), "sh_addr")?,
                offset: u64_at(data, at(24), "sh_offset")?,
                size: u64_at(data, at(32), "sh_size")?,
                link: u32_at(data, at(40), "sh_link")?,
                info: u32_at(data, at(44), "sh_info")?,
                align: u64_at(data, at(48), "sh_addralign")?,
            });
            let name_off = u32_at(data, h, "sh_name")?;
            sections[i as usize].name = name_off.to_string(); // resolved below
        }
        if let Some(strtab) = sections.get(shstrndx as usize).cloned() {
            let names = Elf::bytes_of(data, &strtab)?;
            for s in sections.iter_mut() {
                let off: u64 = s.name.parse().unwrap_or(u64::MAX);
                s.name = cstr(names, off);
            }
        }
        Ok(Elf {
            data,
            e_type: u16_at(data, 16, "e_type")?,
            e_machine: u16_at(data, 18, "e_machine")?,
            e_flags: u32_at(data, 48, "e_flags")?,
            osabi: data[7],
            abi_version: data[8],
            sections,
        })
    }

    fn bytes_of<'d>(data: &'d [u8], s: &Section) -> Result<&'d [u8]> {
        let r = usize::try_from(s.offset).ok().and_then(|o| {
            let e = o.checked_add(usize::try_from(s.size).ok()?)?;
            data.get(o..e)
        });
        match r {
            Some(b) => Ok(b),
            None => bail!(
                InvalidArgument,
                "ELF: section {:?} ({:#x}+{:#x}) is past the end of the file",
                s.name,
                s.offset,
                s.size
            ),
        }
    }

    /// The file bytes of a section.
    pub fn section_data(&self, s: &Section) -> Result<&'a [u8]> {
        Elf::bytes_of(self.data, s)
    }

    /// The first section named `name`.
    pub fn section(&self, name: &str) -> Option<(usize, &Section)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    /// The symbols of a SYMTAB/DYNSYM section.
    pub fn symbols(&self, table: &Section) -> Result<Vec<Symbol>> {
        let data = self.section_data(table)?;
        let Some(strs) = self.sections.get(table.link as usize) else {
            bail!(
                InvalidArgument,
                "ELF: {} links to no string table",
                table.name
            )
        };
        let strs = self.section_data(strs)?;
        let mut out = Vec::with_capacity(data.len() / 24);
        for e in data.chunks_exact(24) {
            out.push(Symbol {
                name: cstr(strs, u64::from(u32_at(e, 0, "st_name")?)),
                info: e[4],
                shndx: u16_at(e, 6, "st_shndx")?,
                value: u64_at(e, 8, "st_value")?,
                size: u64_at(e, 16, "st_size")?,
            });
        }
        Ok(out)
    }

    /// Every symbol of `.symtab` and `.dynsym`.
    pub fn all_symbols(&self) -> Result<Vec<Symbol>> {
        let mut out = Vec::new();
        for s in &self.sections {
            if s.sh_type == SHT_SYMTAB || s.sh_type == SHT_DYNSYM {
                out.extend(self.symbols(s)?);
            }
        }
        Ok(out)
    }
}

/// A code object laid out for upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeImage {
    /// The image (page-rounded).
    pub image: Vec<u8>,
    /// Offset of the kernel descriptor in the image.
    pub descriptor: usize,
    /// `e_flags` (EF_AMDGPU_MACH in the low byte).
    pub e_flags: u32,
}

fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a).saturating_mul(a)
    }
}

/// Load an amdhsa code object for kernel `name` (see the module doc).
pub fn load_code_object(data: &[u8], name: &str) -> Result<CodeImage> {
    let elf = Elf::parse(data)?;
    ensure!(
        elf.e_machine == EM_AMDGPU,
        InvalidArgument,
        "code object for {name}: e_machine {} is not EM_AMDGPU ({EM_AMDGPU})",
        elf.e_machine
    );
    ensure!(
        elf.e_type == ET_DYN || elf.e_type == ET_REL,
        InvalidArgument,
        "code object for {name}: e_type {} is neither ET_DYN nor ET_REL",
        elf.e_type
    );
    let addrs = section_addresses(&elf);
    let end = elf
        .sections
        .iter()
        .zip(&addrs)
        .filter_map(|(s, a)| a.map(|a| a.saturating_add(s.size)))
        .max()
        .unwrap_or(0);
    ensure!(
        end > 0 && end <= 1 << 30,
        InvalidArgument,
        "code object for {name}: loadable size {end:#x} is empty or absurd"
    );
    let mut image = vec![0u8; align_up(end, PAGE) as usize];
    for (s, a) in elf.sections.iter().zip(&addrs) {
        if let Some(a) = a {
            let d = elf.section_data(s)?;
            image[*a as usize..*a as usize + d.len()].copy_from_slice(d);
        }
    }
    if elf.e_type == ET_REL {
        apply_relocations(&elf, &addrs, &mut image)?;
    }
    let descriptor = find_descriptor(&elf, &addrs, name)?;
    ensure!(
        descriptor.checked_add(64).is_some_and(|e| e <= image.len()),
        InvalidArgument,
        "code object for {name}: kernel descriptor at {descriptor:#x} runs past the image"
    );
    Ok(CodeImage {
        image,
        descriptor,
        e_flags: elf.e_flags,
    })
}

/// The image address of every section that is loaded (SHF_ALLOC PROGBITS), `None` for others.
fn section_addresses(elf: &Elf) -> Vec<Option<u64>> {
    let mut cursor = 0u64;
    elf.sections
        .iter()
        .map(|s| {
            if s.sh_type != SHT_PROGBITS || s.flags & SHF_ALLOC == 0 {
                return None;
            }
            if elf.e_type == ET_DYN {
                return Some(s.addr);
            }
            let a = align_up(cursor, s.align);
            cursor = a.saturating_add(s.size);
            Some(a)
        })
        .collect()
}

fn apply_relocations(elf: &Elf, addrs: &[Option<u64>], image: &mut [u8]) -> Result<()> {
    for rs in elf.sections.iter().filter(|s| s.sh_type == SHT_RELA) {
        let Some(Some(target)) = addrs.get(rs.info as usize) else {
            continue; // relocations of sections that are not loaded (debug info)
        };
        let Some(symtab) = elf.sections.get(rs.link as usize) else {
            bail!(InvalidArgument, "ELF: {} links to no symbol table", rs.name)
        };
        let syms = elf.symbols(symtab)?;
        for r in elf.section_data(rs)?.chunks_exact(24) {
            let off = u64_at(r, 0, "r_offset")?;
            let info = u64_at(r, 8, "r_info")?;
            let addend = u64_at(r, 16, "r_addend")? as i64;
            let (sym, ty) = ((info >> 32) as usize, info as u32);
            ensure!(
                ty == R_AMDGPU_REL64,
                InvalidArgument,
                "ELF: {}: relocation type {ty} at {off:#x} is not supported (only R_AMDGPU_REL64)",
                rs.name
            );
            let Some(s) = syms.get(sym) else {
                bail!(
                    InvalidArgument,
                    "ELF: relocation names symbol {sym}, which does not exist"
                )
            };
            let Some(Some(base)) = addrs.get(s.shndx as usize) else {
                bail!(
                    InvalidArgument,
                    "ELF: relocation against {:?}, which is not in a loaded section",
                    s.name
                )
            };
            let p = target.saturating_add(off);
            let v = (base.wrapping_add(s.value) as i64)
                .wrapping_add(addend)
                .wrapping_sub(p as i64);
            let at = usize::try_from(p).ok().filter(|p| p + 8 <= image.len());
            let Some(at) = at else {
                bail!(
                    InvalidArgument,
                    "ELF: relocation at {p:#x} is outside the image"
                )
            };
            image[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(())
}

fn find_descriptor(elf: &Elf, addrs: &[Option<u64>], name: &str) -> Result<usize> {
    let kd = format!("{name}.kd");
    if let Some(s) = elf.all_symbols()?.into_iter().find(|s| s.name == kd) {
        let base = match elf.e_type {
            ET_REL => match addrs.get(s.shndx as usize) {
                Some(Some(a)) => *a,
                _ => bail!(InvalidArgument, "ELF: {kd} is not in a loaded section"),
            },
            _ => 0,
        };
        return Ok(base.saturating_add(s.value) as usize);
    }
    match elf.section(".rodata") {
        Some((i, _)) => match addrs.get(i) {
            Some(Some(a)) => Ok(*a as usize),
            _ => bail!(InvalidArgument, "ELF: .rodata is not loadable"),
        },
        None => bail!(
            InvalidArgument,
            "code object: no symbol {kd} and no .rodata section to find the kernel descriptor in"
        ),
    }
}

mod writer;
pub use writer::{write_amdgpu_elf, AmdgpuElf};

#[cfg(test)]
mod tests;
