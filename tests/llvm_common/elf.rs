//! A minimal reader for the relocatable AMD code objects the compiler writes: the header, the
//! sections, the symbol table and RELA relocations (what the tests check beyond the AMD runtime's
//! loader, which they also run). Test code: it panics on malformed input instead of reporting.

pub const EM_AMDGPU: u16 = 224;
pub const ET_REL: u16 = 1;
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_RELA: u32 = 4;
pub const R_AMDGPU_REL64: u32 = 5;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub kind: u32,
    pub offset: usize,
    pub size: usize,
    pub link: u32,
    pub info: u32,
}

#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

#[derive(Debug, Clone)]
pub struct Rela {
    /// The section the relocation applies to.
    pub target: String,
    pub offset: u64,
    pub kind: u32,
    pub symbol: String,
    pub addend: i64,
}

pub struct Elf<'a> {
    pub bytes: &'a [u8],
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
}

fn cstr(b: &[u8], o: usize) -> String {
    let end = b[o..].iter().position(|&c| c == 0).unwrap();
    String::from_utf8_lossy(&b[o..o + end]).into_owned()
}

impl<'a> Elf<'a> {
    pub fn parse(bytes: &'a [u8]) -> Elf<'a> {
        assert!(bytes.starts_with(b"\x7fELF\x02\x01"), "not ELF64 LE");
        let shoff = u64_at(bytes, 0x28) as usize;
        let (shentsize, shnum, shstrndx) = (
            u16_at(bytes, 0x3A) as usize,
            u16_at(bytes, 0x3C) as usize,
            u16_at(bytes, 0x3E) as usize,
        );
        let raw: Vec<(u32, Section)> = (0..shnum)
            .map(|i| {
                let h = shoff + i * shentsize;
                let s = Section {
                    name: String::new(),
                    kind: u32_at(bytes, h + 4),
                    offset: u64_at(bytes, h + 24) as usize,
                    size: u64_at(bytes, h + 32) as usize,
                    link: u32_at(bytes, h + 40),
                    info: u32_at(bytes, h + 44),
                };
                (u32_at(bytes, h), s)
            })
            .collect();
        let strtab = raw[shstrndx].1.offset;
        let sections: Vec<Section> = raw
            .into_iter()
            .map(|(n, s)| Section {
                name: cstr(bytes, strtab + n as usize),
                ..s
            })
            .collect();
        let mut elf = Elf {
            bytes,
            sections,
            symbols: vec![],
        };
        elf.symbols = elf.read_symbols();
        elf
    }

    fn read_symbols(&self) -> Vec<Symbol> {
        let Some(st) = self.sections.iter().find(|s| s.kind == SHT_SYMTAB) else {
            return vec![];
        };
        let names = self.sections[st.link as usize].offset;
        (0..st.size / 24)
            .map(|i| {
                let o = st.offset + i * 24;
                Symbol {
                    name: cstr(self.bytes, names + u32_at(self.bytes, o) as usize),
                    shndx: u16_at(self.bytes, o + 6),
                    value: u64_at(self.bytes, o + 8),
                    size: u64_at(self.bytes, o + 16),
                }
            })
            .collect()
    }

    pub fn e_type(&self) -> u16 {
        u16_at(self.bytes, 16)
    }
    pub fn e_machine(&self) -> u16 {
        u16_at(self.bytes, 18)
    }
    pub fn e_flags(&self) -> u32 {
        u32_at(self.bytes, 48)
    }
    pub fn osabi(&self) -> u8 {
        self.bytes[7]
    }
    pub fn abi_version(&self) -> u8 {
        self.bytes[8]
    }

    pub fn symbol(&self, name: &str) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.name == name)
    }

    /// Every RELA relocation.
    pub fn relocations(&self) -> Vec<Rela> {
        let mut out = vec![];
        for s in self.sections.iter().filter(|s| s.kind == SHT_RELA) {
            let target = self.sections[s.info as usize].name.clone();
            for i in 0..s.size / 24 {
                let o = s.offset + i * 24;
                let info = u64_at(self.bytes, o + 8);
                out.push(Rela {
                    target: target.clone(),
                    offset: u64_at(self.bytes, o),
                    kind: (info & 0xffff_ffff) as u32,
                    symbol: self.symbols[(info >> 32) as usize].name.clone(),
                    addend: u64_at(self.bytes, o + 16) as i64,
                });
            }
        }
        out
    }

    /// The 64 bytes of symbol `name`'s data.
    pub fn symbol_bytes(&self, name: &str) -> &'a [u8] {
        let s = self
            .symbol(name)
            .unwrap_or_else(|| panic!("no symbol {name}"));
        let sec = &self.sections[s.shndx as usize];
        let o = sec.offset + s.value as usize;
        &self.bytes[o..o + s.size as usize]
    }
}
