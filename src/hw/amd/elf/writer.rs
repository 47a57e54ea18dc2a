//! A writer for single-kernel amdhsa code objects: ELF64, EM_AMDGPU, OSABI AMDGPU_HSA (64), ABI
//! version 2 (code object v4), with `.rodata` holding the 64-byte kernel descriptor (symbol
//! `<name>.kd`), `.text` 256-byte aligned (symbol `<name>`), `.symtab`, `.strtab`, `.shstrtab`.
//!
//! - ET_DYN (what a linker produces): `.rodata` at 0x100, `.text` at 0x200, two PT_LOAD segments,
//!   the descriptor's code offset already resolved (0x100).
//! - ET_REL (what `llc` produces): `.text` first, the code offset left 0 with an
//!   `R_AMDGPU_REL64` relocation (`<name> + 0x10`) at descriptor offset 0x10 in `.rela.rodata`.
//!
//! Not guaranteed: no `.note` metadata (NT_AMDGPU_METADATA), `.dynsym` or `.dynamic`; rawgrad's
//! loader does not need them.

use super::*;

/// What to write.
#[derive(Clone, Debug)]
pub struct AmdgpuElf<'a> {
    /// Kernel name (symbols `<name>` and `<name>.kd`).
    pub name: &'a str,
    /// `e_flags` (EF_AMDGPU_MACH of the target).
    pub e_flags: u32,
    /// Write ET_REL with a relocation instead of ET_DYN.
    pub relocatable: bool,
    /// The kernel descriptor; its code offset (bytes 16..24) is set by the writer.
    pub descriptor: [u8; 64],
    /// The machine code (or blob) of `.text`.
    pub text: &'a [u8],
}

struct Sec {
    name: &'static str,
    ty: u32,
    flags: u64,
    addr: u64,
    data: Vec<u8>,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

impl Sec {
    fn new(name: &'static str, ty: u32, flags: u64, data: Vec<u8>, align: u64) -> Sec {
        Sec {
            name,
            ty,
            flags,
            addr: 0,
            data,
            link: 0,
            info: 0,
            align,
            entsize: 0,
        }
    }
}

fn sym(name_off: u32, info: u8, shndx: u16, value: u64, size: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&name_off.to_le_bytes());
    v.push(info);
    v.push(0);
    v.extend_from_slice(&shndx.to_le_bytes());
    v.extend_from_slice(&value.to_le_bytes());
    v.extend_from_slice(&size.to_le_bytes());
    v
}

const STB_GLOBAL_FUNC: u8 = 1 << 4 | 2;
const STB_GLOBAL_OBJECT: u8 = 1 << 4 | 1;

/// `.symtab` + `.strtab` contents: null, `<name>` (FUNC in `text_idx`), `<name>.kd` (OBJECT in
/// `ro_idx`). Returns (symtab, strtab, index of the FUNC symbol).
fn symbols(o: &AmdgpuElf, text_idx: u16, ro_idx: u16) -> (Vec<u8>, Vec<u8>, u64) {
    let mut strtab = vec![0u8];
    let func_name = strtab.len() as u32;
    strtab.extend_from_slice(o.name.as_bytes());
    strtab.push(0);
    let kd_name = strtab.len() as u32;
    strtab.extend_from_slice(format!("{}.kd", o.name).as_bytes());
    strtab.push(0);
    let mut symtab = sym(0, 0, 0, 0, 0);
    let text_addr = if o.relocatable { 0 } else { TEXT_ADDR };
    let ro_addr = if o.relocatable { 0 } else { RODATA_ADDR };
    symtab.extend(sym(
        func_name,
        STB_GLOBAL_FUNC,
        text_idx,
        text_addr,
        o.text.len() as u64,
    ));
    symtab.extend(sym(kd_name, STB_GLOBAL_OBJECT, ro_idx, ro_addr, 64));
    (symtab, strtab, 1)
}

const RODATA_ADDR: u64 = 0x100;
const TEXT_ADDR: u64 = 0x200;

fn sections(o: &AmdgpuElf) -> Vec<Sec> {
    let mut kd = o.descriptor;
    let code_off: i64 = if o.relocatable {
        0
    } else {
        (TEXT_ADDR - RODATA_ADDR) as i64
    };
    kd[16..24].copy_from_slice(&code_off.to_le_bytes());
    let rodata = Sec::new(".rodata", SHT_PROGBITS, SHF_ALLOC, kd.to_vec(), 64);
    let text = Sec::new(
        ".text",
        SHT_PROGBITS,
        SHF_ALLOC | SHF_EXECINSTR,
        o.text.to_vec(),
        256,
    );
    let mut secs = vec![Sec::new("", 0, 0, vec![], 0)];
    if o.relocatable {
        secs.push(text); // 1
        secs.push(rodata); // 2
        let (symtab, strtab, func) = symbols(o, 1, 2);
        let mut rela = Vec::with_capacity(24);
        rela.extend_from_slice(&0x10u64.to_le_bytes());
        rela.extend_from_slice(&(func << 32 | u64::from(R_AMDGPU_REL64)).to_le_bytes());
        rela.extend_from_slice(&0x10i64.to_le_bytes());
        let mut r = Sec::new(".rela.rodata", SHT_RELA, 0, rela, 8);
        (r.link, r.info, r.entsize) = (4, 2, 24);
        secs.push(r); // 3
        push_symtab(&mut secs, symtab, strtab); // 4, 5
    } else {
        let (mut rodata, mut text) = (rodata, text);
        rodata.addr = RODATA_ADDR;
        text.addr = TEXT_ADDR;
        secs.push(rodata); // 1
        secs.push(text); // 2
        let (symtab, strtab, _) = symbols(o, 2, 1);
        push_symtab(&mut secs, symtab, strtab); // 3, 4
    }
    secs
}

fn push_symtab(secs: &mut Vec<Sec>, symtab: Vec<u8>, strtab: Vec<u8>) {
    let strtab_idx = secs.len() as u32 + 1;
    let mut s = Sec::new(".symtab", SHT_SYMTAB, 0, symtab, 8);
    (s.link, s.info, s.entsize) = (strtab_idx, 1, 24);
    secs.push(s);
    secs.push(Sec::new(".strtab", SHT_STRTAB, 0, strtab, 1));
}

fn header(o: &AmdgpuElf, phnum: u16, shoff: u64, shnum: u16) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    (h[4], h[5], h[6], h[7], h[8]) = (2, 1, 1, ELFOSABI_AMDGPU_HSA, ELFABIVERSION_AMDGPU_HSA_V4);
    let ty = if o.relocatable { ET_REL } else { ET_DYN };
    h[16..18].copy_from_slice(&ty.to_le_bytes());
    h[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    let phoff: u64 = if phnum > 0 { 64 } else { 0 };
    h[32..40].copy_from_slice(&phoff.to_le_bytes());
    h[40..48].copy_from_slice(&shoff.to_le_bytes());
    h[48..52].copy_from_slice(&o.e_flags.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes());
    h[54..56].copy_from_slice(&56u16.to_le_bytes());
    h[56..58].copy_from_slice(&phnum.to_le_bytes());
    h[58..60].copy_from_slice(&64u16.to_le_bytes());
    h[60..62].copy_from_slice(&shnum.to_le_bytes());
    h[62..64].copy_from_slice(&(shnum - 1).to_le_bytes()); // .shstrtab is last
    h
}

fn phdr(flags: u32, off: u64, size: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(56);
    p.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    p.extend_from_slice(&flags.to_le_bytes());
    for v in [off, off, off, size, size, 0x1000] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p
}

/// The object's bytes.
pub fn write_amdgpu_elf(o: &AmdgpuElf) -> Vec<u8> {
    let mut secs = sections(o);
    let mut shstrtab = vec![0u8];
    let mut name_offs = Vec::with_capacity(secs.len() + 1);
    for s in &secs {
        name_offs.push(if s.name.is_empty() {
            0
        } else {
            shstrtab.len() as u32
        });
        shstrtab.extend_from_slice(s.name.as_bytes());
        shstrtab.push(0);
    }
    name_offs.push(shstrtab.len() as u32);
    shstrtab.extend_from_slice(b".shstrtab\0");
    secs.push(Sec::new(".shstrtab", SHT_STRTAB, 0, shstrtab, 1));
    let phnum: u16 = if o.relocatable { 0 } else { 2 };
    let mut out = vec![0u8; 64 + 56 * phnum as usize];
    let mut offsets = vec![0u64; secs.len()];
    for (i, s) in secs.iter().enumerate().skip(1) {
        let at = if s.flags & SHF_ALLOC != 0 && !o.relocatable {
            s.addr
        } else {
            align_up(out.len() as u64, s.align.max(1))
        };
        out.resize(at as usize, 0);
        out.extend_from_slice(&s.data);
        offsets[i] = at;
    }
    let shoff = align_up(out.len() as u64, 8);
    out.resize(shoff as usize, 0);
    for (i, s) in secs.iter().enumerate() {
        out.extend_from_slice(&name_offs[i].to_le_bytes());
        out.extend_from_slice(&s.ty.to_le_bytes());
        for v in [s.flags, s.addr, offsets[i], s.data.len() as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&s.link.to_le_bytes());
        out.extend_from_slice(&s.info.to_le_bytes());
        out.extend_from_slice(&s.align.to_le_bytes());
        out.extend_from_slice(&s.entsize.to_le_bytes());
    }
    let h = header(o, phnum, shoff, secs.len() as u16);
    out[..64].copy_from_slice(&h);
    if !o.relocatable {
        let ro = phdr(4, 0, RODATA_ADDR + 64); // R
        let tx = phdr(5, TEXT_ADDR, o.text.len() as u64); // R | X
        out[64..120].copy_from_slice(&ro);
        out[120..176].copy_from_slice(&tx);
    }
    out
}
