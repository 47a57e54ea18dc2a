//! Minimal little-endian ELF64 reading and writing for cubins: section headers, names, symbols
//! and relocation entries, every access bounds-checked (a malformed file is an error naming the
//! offset, never a panic), and [`ElfWriter`], which lays out the few sections a mock cubin (or a
//! test's hand-made cubin) needs.
//!
//! Not guaranteed: program headers are neither read nor written (cubins are loaded by section).

use crate::{bail, ensure, Result};

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_RELA: u32 = 4;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_REL: u32 = 9;
/// SHT_LOPROC: `.nv.info` sections.
pub const SHT_CUDA_INFO: u32 = 0x7000_0000;
pub const SHF_WRITE: u64 = 0x1;
pub const SHF_ALLOC: u64 = 0x2;
pub const SHF_EXECINSTR: u64 = 0x4;
pub const SHF_INFO_LINK: u64 = 0x40;
pub const STT_FUNC: u8 = 2;
pub const STT_SECTION: u8 = 3;
pub const STB_GLOBAL: u8 = 1;
/// st_other of a kernel entry symbol.
pub const STO_CUDA_ENTRY: u8 = 0x10;

fn rd<const N: usize>(data: &[u8], off: usize, what: &str) -> Result<[u8; N]> {
    match off.checked_add(N).and_then(|end| data.get(off..end)) {
        Some(s) => {
            let mut a = [0u8; N];
            a.copy_from_slice(s);
            Ok(a)
        }
        None => bail!(
            InvalidArgument,
            "cubin: {what} at offset {off:#x} runs past the {}-byte file",
            data.len()
        ),
    }
}

pub(crate) fn u16_at(d: &[u8], off: usize, what: &str) -> Result<u16> {
    Ok(u16::from_le_bytes(rd(d, off, what)?))
}
pub(crate) fn u32_at(d: &[u8], off: usize, what: &str) -> Result<u32> {
    Ok(u32::from_le_bytes(rd(d, off, what)?))
}
pub(crate) fn u64_at(d: &[u8], off: usize, what: &str) -> Result<u64> {
    Ok(u64::from_le_bytes(rd(d, off, what)?))
}

/// One section header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub index: usize,
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub addralign: u64,
    pub entsize: u64,
}

/// One symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub info: u8,
    pub other: u8,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

impl Symbol {
    pub fn kind(&self) -> u8 {
        self.info & 0xF
    }
}

/// A relocation entry (REL entries have `addend: None`: the addend is in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelEntry {
    pub offset: u64,
    pub sym: u32,
    pub kind: u32,
    pub addend: Option<i64>,
}

/// A parsed ELF64 file.
#[derive(Debug)]
pub struct Elf<'a> {
    pub data: &'a [u8],
    pub osabi: u8,
    pub abi_version: u8,
    pub machine: u16,
    pub flags: u32,
    pub sections: Vec<Section>,
}

fn cstr(data: &[u8], off: usize, what: &str) -> Result<String> {
    let tail = data.get(off..).unwrap_or(&[]);
    match tail.iter().position(|&b| b == 0) {
        Some(n) => Ok(String::from_utf8_lossy(&tail[..n]).into_owned()),
        None => bail!(
            InvalidArgument,
            "cubin: unterminated {what} name at {off:#x}"
        ),
    }
}

impl<'a> Elf<'a> {
    /// Parses the ELF header and the section headers (ELF64, little-endian only).
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>> {
        ensure!(
            data.get(..4) == Some(b"\x7fELF"),
            InvalidArgument,
            "cubin: not an ELF file (magic {:02x?})",
            data.get(..4).unwrap_or(data)
        );
        let ident: [u8; 16] = rd(data, 0, "ELF ident")?;
        ensure!(
            ident[4] == 2 && ident[5] == 1,
            InvalidArgument,
            "cubin: ELF class {} / data {} (need ELF64 little-endian)",
            ident[4],
            ident[5]
        );
        let machine = u16_at(data, 18, "e_machine")?;
        let shoff = u64_at(data, 40, "e_shoff")? as usize;
        let flags = u32_at(data, 48, "e_flags")?;
        let shentsize = u16_at(data, 58, "e_shentsize")? as usize;
        let shnum = u16_at(data, 60, "e_shnum")? as usize;
        let shstrndx = u16_at(data, 62, "e_shstrndx")? as usize;
        ensure!(
            shentsize == 64,
            InvalidArgument,
            "cubin: section header size {shentsize} (need 64)"
        );
        ensure!(
            shoff
                .checked_add(64 * shnum)
                .is_some_and(|end| end <= data.len()),
            InvalidArgument,
            "cubin: {shnum} section headers at {shoff:#x} run past the {}-byte file",
            data.len()
        );
        let mut sections = Vec::with_capacity(shnum);
        let mut name_offs = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let o = shoff + 64 * i;
            name_offs.push(u32_at(data, o, "section header")? as usize);
            sections.push(Self::section_header(data, o, i)?);
        }
        let Some(strtab) = sections.get(shstrndx).cloned() else {
            bail!(
                InvalidArgument,
                "cubin: e_shstrndx {shstrndx} is not a section"
            )
        };
        let names = Self::slice(data, &strtab)?;
        for (s, off) in sections.iter_mut().zip(name_offs) {
            s.name = cstr(names, off, "section")?;
        }
        Ok(Elf {
            data,
            osabi: ident[7],
            abi_version: ident[8],
            machine,
            flags,
            sections,
        })
    }

    fn section_header(d: &[u8], o: usize, index: usize) -> Result<Section> {
        let w = "section header";
        Ok(Section {
            index,
            // Resolved from .shstrtab after all headers are read.
            name: String::new(),
            sh_type: u32_at(d, o + 4, w)?,
            flags: u64_at(d, o + 8, w)?,
            addr: u64_at(d, o + 16, w)?,
            offset: u64_at(d, o + 24, w)?,
            size: u64_at(d, o + 32, w)?,
            link: u32_at(d, o + 40, w)?,
            info: u32_at(d, o + 44, w)?,
            addralign: u64_at(d, o + 48, w)?,
            entsize: u64_at(d, o + 56, w)?,
        })
    }

    fn slice<'b>(data: &'b [u8], s: &Section) -> Result<&'b [u8]> {
        if s.sh_type == SHT_NOBITS {
            return Ok(&[]);
        }
        let start = s.offset as usize;
        match start
            .checked_add(s.size as usize)
            .and_then(|e| data.get(start..e))
        {
            Some(b) => Ok(b),
            None => bail!(
                InvalidArgument,
                "cubin: section {:?} ({:#x} bytes at {:#x}) runs past the {}-byte file",
                s.name,
                s.size,
                s.offset,
                data.len()
            ),
        }
    }

    /// The bytes of a section (empty for NOBITS).
    pub fn section_data(&self, s: &Section) -> Result<&'a [u8]> {
        Self::slice(self.data, s)
    }

    /// The section called `name`.
    pub fn section_named(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The symbols of the (single) symbol table; empty without one.
    pub fn symbols(&self) -> Result<Vec<Symbol>> {
        let Some(symtab) = self.sections.iter().find(|s| s.sh_type == SHT_SYMTAB) else {
            return Ok(Vec::new());
        };
        let Some(strtab) = self.sections.get(symtab.link as usize) else {
            bail!(
                InvalidArgument,
                "cubin: .symtab links to missing section {}",
                symtab.link
            )
        };
        let (syms, names) = (self.section_data(symtab)?, self.section_data(strtab)?);
        let mut out = Vec::with_capacity(syms.len() / 24);
        for o in (0..syms.len() / 24).map(|i| 24 * i) {
            let w = "symbol";
            out.push(Symbol {
                name: cstr(names, u32_at(syms, o, w)? as usize, "symbol")?,
                info: syms[o + 4],
                other: syms[o + 5],
                shndx: u16_at(syms, o + 6, w)?,
                value: u64_at(syms, o + 8, w)?,
                size: u64_at(syms, o + 16, w)?,
            });
        }
        Ok(out)
    }

    /// The entries of a REL or RELA section.
    pub fn relocations(&self, s: &Section) -> Result<Vec<RelEntry>> {
        let rela = s.sh_type == SHT_RELA;
        let size = if rela { 24 } else { 16 };
        let d = self.section_data(s)?;
        let mut out = Vec::with_capacity(d.len() / size);
        for o in (0..d.len() / size).map(|i| size * i) {
            let info = u64_at(d, o + 8, "relocation")?;
            out.push(RelEntry {
                offset: u64_at(d, o, "relocation")?,
                sym: (info >> 32) as u32,
                kind: info as u32,
                addend: if rela {
                    Some(u64_at(d, o + 16, "relocation")? as i64)
                } else {
                    None
                },
            });
        }
        Ok(out)
    }
}

/// A section to write.
#[derive(Debug, Clone)]
pub struct NewSection {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    /// Section index (into the final table) or a symbol-table marker resolved by the writer.
    pub link: u32,
    pub info: u32,
    pub addralign: u64,
    pub entsize: u64,
    pub data: Vec<u8>,
    /// NOBITS size (ignored otherwise).
    pub nobits_size: u64,
}

impl NewSection {
    /// A section with `data` (entsize 0; set `nobits_size` for NOBITS).
    pub fn new(
        name: &str,
        sh_type: u32,
        flags: u64,
        link: u32,
        info: u32,
        align: u64,
        data: Vec<u8>,
    ) -> NewSection {
        NewSection {
            name: name.to_string(),
            sh_type,
            flags,
            link,
            info,
            addralign: align,
            entsize: 0,
            data,
            nobits_size: 0,
        }
    }
}

/// A symbol to write (`shndx` is a final section index).
#[derive(Debug, Clone)]
pub struct NewSymbol {
    pub name: String,
    pub info: u8,
    pub other: u8,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

/// Lays out an ELF64 EM_CUDA file. Section indices: 0 null, 1 `.shstrtab`, 2 `.strtab`,
/// 3 `.symtab`, then the added sections in order (first added = 4).
#[derive(Debug, Clone, Default)]
pub struct ElfWriter {
    pub osabi: u8,
    pub abi_version: u8,
    pub machine: u16,
    pub flags: u32,
    pub sections: Vec<NewSection>,
    /// Local symbols first, then globals (symbol 0, the null symbol, is implicit).
    pub symbols: Vec<NewSymbol>,
}

/// Index of `.symtab` in files from [`ElfWriter`].
pub const WRITER_SYMTAB: u32 = 3;
/// Index of the first added section.
pub const WRITER_FIRST: u32 = 4;

fn strtab(names: &[&str]) -> (Vec<u8>, Vec<u32>) {
    let mut tab = vec![0u8];
    let mut offs = Vec::with_capacity(names.len());
    for n in names {
        offs.push(tab.len() as u32);
        tab.extend_from_slice(n.as_bytes());
        tab.push(0);
    }
    (tab, offs)
}

fn header(h: &mut Vec<u8>, name: u32, s: &NewSection, offset: u64, size: u64) {
    h.extend_from_slice(&name.to_le_bytes());
    h.extend_from_slice(&s.sh_type.to_le_bytes());
    h.extend_from_slice(&s.flags.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes());
    h.extend_from_slice(&offset.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&s.link.to_le_bytes());
    h.extend_from_slice(&s.info.to_le_bytes());
    h.extend_from_slice(&s.addralign.to_le_bytes());
    h.extend_from_slice(&s.entsize.to_le_bytes());
}

impl ElfWriter {
    fn elf_header(&self, body: &mut [u8], shoff: u64, shnum: u16) {
        let mut ident = [0u8; 16];
        ident[..4].copy_from_slice(b"\x7fELF");
        ident[4..9].copy_from_slice(&[2, 1, 1, self.osabi, self.abi_version]);
        body[..16].copy_from_slice(&ident);
        body[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        body[18..20].copy_from_slice(&self.machine.to_le_bytes());
        body[20..24].copy_from_slice(&1u32.to_le_bytes());
        body[40..48].copy_from_slice(&shoff.to_le_bytes());
        body[48..52].copy_from_slice(&self.flags.to_le_bytes());
        body[52..54].copy_from_slice(&64u16.to_le_bytes());
        body[58..60].copy_from_slice(&64u16.to_le_bytes());
        body[60..62].copy_from_slice(&shnum.to_le_bytes());
        body[62..64].copy_from_slice(&1u16.to_le_bytes());
    }

    fn symtab_bytes(&self) -> (Vec<u8>, Vec<u8>, u32) {
        let names: Vec<&str> = self.symbols.iter().map(|s| s.name.as_str()).collect();
        let (strs, offs) = strtab(&names);
        let mut tab = vec![0u8; 24];
        let mut first_global = 1 + self.symbols.len() as u32;
        for (i, (s, off)) in self.symbols.iter().zip(offs).enumerate() {
            if s.info >> 4 != 0 && first_global > i as u32 + 1 {
                first_global = i as u32 + 1;
            }
            tab.extend_from_slice(&off.to_le_bytes());
            tab.extend_from_slice(&[s.info, s.other]);
            tab.extend_from_slice(&s.shndx.to_le_bytes());
            tab.extend_from_slice(&s.value.to_le_bytes());
            tab.extend_from_slice(&s.size.to_le_bytes());
        }
        (tab, strs, first_global)
    }

    /// The file's bytes.
    pub fn write(&self) -> Vec<u8> {
        let (symtab, strs, first_global) = self.symtab_bytes();
        let mut symtab_sec = NewSection::new(".symtab", SHT_SYMTAB, 0, 2, first_global, 8, symtab);
        symtab_sec.entsize = 24;
        let mut all = vec![
            NewSection::new("", 0, 0, 0, 0, 0, vec![]),
            NewSection::new(".shstrtab", SHT_STRTAB, 0, 0, 0, 1, vec![]),
            NewSection::new(".strtab", SHT_STRTAB, 0, 0, 0, 1, strs),
            symtab_sec,
        ];
        all.extend(self.sections.iter().cloned());
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        let (shstr, name_offs) = strtab(&names);
        all[1].data = shstr;
        let mut body = vec![0u8; 64];
        let mut placed = Vec::with_capacity(all.len());
        for s in &all {
            let align = s.addralign.max(1) as usize;
            body.resize(body.len().div_ceil(align) * align, 0);
            let size = if s.sh_type == SHT_NOBITS {
                s.nobits_size
            } else {
                s.data.len() as u64
            };
            placed.push((body.len() as u64, size));
            if s.sh_type != SHT_NOBITS {
                body.extend_from_slice(&s.data);
            }
        }
        body.resize(body.len().div_ceil(8) * 8, 0);
        let shoff = body.len() as u64;
        for (i, s) in all.iter().enumerate() {
            let (off, size) = if i == 0 { (0, 0) } else { placed[i] };
            header(&mut body, name_offs[i], s, off, size);
        }
        self.elf_header(&mut body, shoff, all.len() as u16);
        body
    }
}
