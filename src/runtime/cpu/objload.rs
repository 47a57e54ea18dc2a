//! The `LLVM` CPU device's loader: an ELF64 relocatable object (`ET_REL`, what libLLVM emits) laid
//! out, relocated and placed in executable memory by rawgrad itself, with no linker and no
//! `dlopen`.
//!
//! Layout ([`Plan`]): the allocated sections (`SHF_ALLOC` PROGBITS/NOBITS; `.eh_frame` is left
//! out, kernels do not unwind) are packed at their alignment in three page-aligned regions: code
//! (executable sections, then one call stub per external function called), constants (read-only
//! sections, then one GOT slot per symbol reached through the GOT) and data (writable sections).
//! [`link`] copies the sections into an image at a given base address, resolves external symbols
//! through the caller's resolver, fills the stubs and GOT slots with absolute addresses and applies
//! the relocations; [`load`] does that in [`CodeMemory`], seals it and returns the kernel entry.
//!
//! Relocations applied (the ones LLVM's small code model emits, PIC or not):
//! - x86-64: `R_X86_64_64`, `PC32`, `PLT32` (through a stub `jmp *0(%rip); .quad S` when the
//!   symbol is external, so libm can lie anywhere in the address space), `GOTPCREL`, `GOTPCRELX`,
//!   `REX_GOTPCRELX` (to the slot, unrelaxed), `32`, `32S` (range-checked: they only fit when the
//!   image lies in the low 2 GiB) and `PC64`.
//! - AArch64: `ABS64`, `ABS32`, `PREL64`, `PREL32`, `ADR_PREL_PG_HI21(_NC)`, `ADD_ABS_LO12_NC`,
//!   `LDST{8,16,32,64,128}_ABS_LO12_NC`, `CALL26`/`JUMP26` (through a stub `ldr x16, #8; br x16;
//!   .quad S` when external), `ADR_GOT_PAGE` and `LD64_GOT_LO12_NC`.
//!
//! Every other relocation type, TLS, COMMON symbols and `SHT_REL` sections are refused with an
//! error that names them; so are symbols the resolver does not know, and values out of the range
//! of their field.
//!
//! Not guaranteed: the object is trusted to be a rawgrad kernel (see `driver::codemem`); the
//! AArch64 path is checked by relocating LLVM's AArch64 objects and decoding the patched
//! instructions, not by running them (no AArch64 machine here).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::driver::codemem::{page_size, CodeMemory};
use crate::driver::dl::KernelFn;
use crate::hw::amd::elf::{
    Elf, Section, Symbol, ET_REL, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_PROGBITS, SHT_RELA,
    SHT_SYMTAB,
};
use crate::{bail, ensure, Result};

pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHF_TLS: u64 = 0x400;
const SHN_UNDEF: u16 = 0;
const SHN_ABS: u16 = 0xfff1;
const SHN_COMMON: u16 = 0xfff2;
const STT_SECTION: u8 = 3;
/// Bytes per call stub (both architectures) and per GOT slot.
const STUB: usize = 16;
const SLOT: usize = 8;

/// The relocation types applied (see the module doc).
mod r {
    pub const X86_64_NONE: u32 = 0;
    pub const X86_64_64: u32 = 1;
    pub const X86_64_PC32: u32 = 2;
    pub const X86_64_PLT32: u32 = 4;
    pub const X86_64_GOTPCREL: u32 = 9;
    pub const X86_64_32: u32 = 10;
    pub const X86_64_32S: u32 = 11;
    pub const X86_64_PC64: u32 = 24;
    pub const X86_64_GOTPCRELX: u32 = 41;
    pub const X86_64_REX_GOTPCRELX: u32 = 42;
    pub const AARCH64_NONE_OLD: u32 = 256;
    pub const AARCH64_ABS64: u32 = 257;
    pub const AARCH64_ABS32: u32 = 258;
    pub const AARCH64_PREL64: u32 = 260;
    pub const AARCH64_PREL32: u32 = 261;
    pub const AARCH64_ADR_PREL_PG_HI21: u32 = 275;
    pub const AARCH64_ADR_PREL_PG_HI21_NC: u32 = 276;
    pub const AARCH64_ADD_ABS_LO12_NC: u32 = 277;
    pub const AARCH64_LDST8_ABS_LO12_NC: u32 = 278;
    pub const AARCH64_JUMP26: u32 = 282;
    pub const AARCH64_CALL26: u32 = 283;
    pub const AARCH64_LDST16_ABS_LO12_NC: u32 = 284;
    pub const AARCH64_LDST32_ABS_LO12_NC: u32 = 285;
    pub const AARCH64_LDST64_ABS_LO12_NC: u32 = 286;
    pub const AARCH64_LDST128_ABS_LO12_NC: u32 = 299;
    pub const AARCH64_ADR_GOT_PAGE: u32 = 311;
    pub const AARCH64_LD64_GOT_LO12_NC: u32 = 312;
}

/// The instruction set of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    AArch64,
}

impl Arch {
    fn of(machine: u16) -> Result<Arch> {
        match machine {
            EM_X86_64 => Ok(Arch::X86_64),
            EM_AARCH64 => Ok(Arch::AArch64),
            m => bail!(
                InvalidArgument,
                "object loader: e_machine {m} is neither x86-64 ({EM_X86_64}) nor AArch64 ({EM_AARCH64})"
            ),
        }
    }

    /// The architecture of this process.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::AArch64),
            _ => None,
        }
    }

    /// Whether relocation `ty` calls or jumps to its symbol (external ones go through a stub).
    fn is_call(self, ty: u32) -> bool {
        match self {
            Arch::X86_64 => ty == r::X86_64_PLT32,
            Arch::AArch64 => ty == r::AARCH64_CALL26 || ty == r::AARCH64_JUMP26,
        }
    }

    /// Whether relocation `ty` reads its symbol's address from a GOT slot.
    fn is_got(self, ty: u32) -> bool {
        match self {
            Arch::X86_64 => matches!(
                ty,
                r::X86_64_GOTPCREL | r::X86_64_GOTPCRELX | r::X86_64_REX_GOTPCRELX
            ),
            Arch::AArch64 => ty == r::AARCH64_ADR_GOT_PAGE || ty == r::AARCH64_LD64_GOT_LO12_NC,
        }
    }

    /// A stub that jumps to the absolute address `to`.
    fn stub(self, to: u64) -> [u8; STUB] {
        let mut s = [0u8; STUB];
        match self {
            Arch::X86_64 => {
                s[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]); // jmp *0(%rip)
                s[6..14].copy_from_slice(&to.to_le_bytes());
                s[14..].copy_from_slice(&[0xcc, 0xcc]); // int3 padding
            }
            Arch::AArch64 => {
                s[..4].copy_from_slice(&0x5800_0050u32.to_le_bytes()); // ldr x16, #8
                s[4..8].copy_from_slice(&0xd61f_0200u32.to_le_bytes()); // br x16
                s[8..].copy_from_slice(&to.to_le_bytes());
            }
        }
        s
    }
}

/// One relocation entry.
#[derive(Clone, Copy, Debug)]
struct Rela {
    offset: u64,
    sym: usize,
    ty: u32,
    addend: i64,
}

/// Where everything of an object goes in its image (see the module doc).
#[derive(Debug)]
pub struct Plan<'a> {
    elf: Elf<'a>,
    pub arch: Arch,
    symbols: Vec<Symbol>,
    /// Image offset of each section (by index), `None` when not loaded.
    placed: Vec<Option<usize>>,
    /// (relocated section index, its relocations).
    relocs: Vec<(usize, Vec<Rela>)>,
    /// Call stubs and GOT slots by symbol index: image offsets.
    stubs: BTreeMap<usize, usize>,
    got: BTreeMap<usize, usize>,
    /// End of the code region and of the constants region (page-aligned), and the image length.
    pub exec_end: usize,
    pub ro_end: usize,
    pub len: usize,
}

fn align_up(v: usize, a: u64) -> Result<usize> {
    let a = usize::try_from(a.max(1)).unwrap_or(usize::MAX);
    match v.checked_next_multiple_of(a) {
        Some(x) => Ok(x),
        None => bail!(InvalidArgument, "object loader: alignment {a} overflows"),
    }
}

fn loaded(s: &Section) -> bool {
    s.flags & SHF_ALLOC != 0
        && (s.sh_type == SHT_PROGBITS || s.sh_type == SHT_NOBITS)
        && s.name != ".eh_frame"
}

fn read_relas(elf: &Elf, s: &Section) -> Result<Vec<Rela>> {
    let data = elf.section_data(s)?;
    ensure!(
        data.len() % 24 == 0,
        InvalidArgument,
        "object loader: {} is {} bytes, not a whole number of 24-byte entries",
        s.name,
        data.len()
    );
    Ok(data
        .chunks_exact(24)
        .map(|e| {
            let word = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&e[i..i + 8]);
                u64::from_le_bytes(b)
            };
            let info = word(8);
            Rela {
                offset: word(0),
                sym: (info >> 32) as usize,
                ty: info as u32,
                addend: word(16) as i64,
            }
        })
        .collect())
}

impl<'a> Plan<'a> {
    /// Parse `obj` and lay it out.
    pub fn new(obj: &'a [u8]) -> Result<Plan<'a>> {
        let elf = Elf::parse(obj)?;
        ensure!(
            elf.e_type == ET_REL,
            InvalidArgument,
            "object loader: e_type {} is not ET_REL (a relocatable object)",
            elf.e_type
        );
        let arch = Arch::of(elf.e_machine)?;
        let symbols = match elf.sections.iter().find(|s| s.sh_type == SHT_SYMTAB) {
            Some(t) => elf.symbols(t)?,
            None => vec![],
        };
        let mut relocs = vec![];
        for s in &elf.sections {
            let target = elf.sections.get(s.info as usize);
            let applies = target.is_some_and(loaded);
            if s.sh_type == SHT_REL && applies {
                bail!(
                    InvalidArgument,
                    "object loader: {} is SHT_REL; only RELA is supported",
                    s.name
                );
            }
            if s.sh_type == SHT_RELA && applies {
                relocs.push((s.info as usize, read_relas(&elf, s)?));
            }
        }
        let mut plan = Plan {
            placed: vec![None; elf.sections.len()],
            elf,
            arch,
            symbols,
            relocs,
            stubs: BTreeMap::new(),
            got: BTreeMap::new(),
            exec_end: 0,
            ro_end: 0,
            len: 0,
        };
        plan.lay_out()?;
        Ok(plan)
    }

    fn lay_out(&mut self) -> Result<()> {
        for s in self.elf.sections.iter().filter(|s| loaded(s)) {
            ensure!(
                s.flags & SHF_TLS == 0,
                InvalidArgument,
                "object loader: thread-local section {} is not supported",
                s.name
            );
        }
        for (_, rs) in &self.relocs {
            for r in rs {
                let Some(sym) = self.symbols.get(r.sym) else {
                    bail!(
                        InvalidArgument,
                        "object loader: relocation names symbol {}, which does not exist",
                        r.sym
                    );
                };
                if self.arch.is_call(r.ty) && sym.shndx == SHN_UNDEF {
                    self.stubs.insert(r.sym, 0);
                }
                if self.arch.is_got(r.ty) {
                    self.got.insert(r.sym, 0);
                }
            }
        }
        let page = page_size() as u64;
        let kinds: [fn(&Section) -> bool; 3] = [
            |s| s.flags & SHF_EXECINSTR != 0,
            |s| s.flags & (SHF_EXECINSTR | SHF_WRITE) == 0,
            |s| s.flags & SHF_WRITE != 0 && s.flags & SHF_EXECINSTR == 0,
        ];
        let mut cursor = 0usize;
        for (region, kind) in kinds.iter().enumerate() {
            for (i, s) in self.elf.sections.iter().enumerate() {
                if loaded(s) && kind(s) {
                    let at = align_up(cursor, s.align)?;
                    let size = usize::try_from(s.size).unwrap_or(usize::MAX);
                    cursor = at.checked_add(size).ok_or_else(|| {
                        crate::Error::InvalidArgument(format!(
                            "object loader: {} is too large",
                            s.name
                        ))
                    })?;
                    self.placed[i] = Some(at);
                }
            }
            let table = match region {
                0 => (&mut self.stubs, STUB),
                1 => (&mut self.got, SLOT),
                _ => {
                    cursor = align_up(cursor, page)?;
                    break;
                }
            };
            cursor = align_up(cursor, table.1 as u64)?;
            for v in table.0.values_mut() {
                *v = cursor;
                cursor += table.1;
            }
            cursor = align_up(cursor, page)?;
            if region == 0 {
                self.exec_end = cursor;
            } else {
                self.ro_end = cursor;
            }
        }
        self.len = cursor.max(page as usize);
        ensure!(
            self.len <= 1 << 30,
            InvalidArgument,
            "object loader: image of {:#x} bytes is absurd for a kernel",
            self.len
        );
        Ok(())
    }

    /// The image offset of the function `name` (defined in a code section).
    pub fn function(&self, name: &str) -> Result<usize> {
        let found = self
            .symbols
            .iter()
            .find(|s| s.name == name && s.shndx != SHN_UNDEF);
        let Some(s) = found else {
            bail!(
                Runtime,
                "object loader: the object defines no symbol {name}"
            );
        };
        let sec = self.elf.sections.get(s.shndx as usize);
        match (sec, self.placed.get(s.shndx as usize)) {
            (Some(sec), Some(Some(at))) if sec.flags & SHF_EXECINSTR != 0 => {
                Ok(at + usize::try_from(s.value).unwrap_or(usize::MAX))
            }
            _ => bail!(
                Runtime,
                "object loader: {name} is not in a loaded code section"
            ),
        }
    }

    /// The external symbols the object refers to.
    pub fn externals(&self) -> Vec<&str> {
        let mut out: Vec<&str> = vec![];
        for (_, rs) in &self.relocs {
            for r in rs {
                let s = &self.symbols[r.sym];
                if s.shndx == SHN_UNDEF && !s.name.is_empty() && !out.contains(&s.name.as_str()) {
                    out.push(&s.name);
                }
            }
        }
        out
    }

    /// The absolute address of symbol `i` (the image lies at `base`).
    fn address(&self, i: usize, base: u64, resolve: &dyn Fn(&str) -> Option<u64>) -> Result<u64> {
        let s = &self.symbols[i];
        match s.shndx {
            SHN_UNDEF => resolve(&s.name).ok_or_else(|| {
                crate::Error::Runtime(format!(
                    "object loader: the kernel calls {:?}, which neither rawgrad nor the process defines",
                    s.name
                ))
            }),
            SHN_ABS => Ok(s.value),
            SHN_COMMON => bail!(InvalidArgument, "object loader: COMMON symbol {} is not supported", s.name),
            sh => match self.placed.get(sh as usize) {
                Some(Some(at)) => {
                    let v = if s.info & 0xf == STT_SECTION { 0 } else { s.value };
                    Ok(base.wrapping_add(*at as u64).wrapping_add(v))
                }
                _ => bail!(
                    InvalidArgument,
                    "object loader: symbol {:?} lies in section {sh}, which is not loaded",
                    s.name
                ),
            },
        }
    }
}

fn put(image: &mut [u8], at: usize, bytes: &[u8]) -> Result<()> {
    match at
        .checked_add(bytes.len())
        .and_then(|e| image.get_mut(at..e))
    {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            Ok(())
        }
        None => bail!(
            InvalidArgument,
            "object loader: write of {} bytes at {at:#x} is outside the image",
            bytes.len()
        ),
    }
}

fn get32(image: &[u8], at: usize) -> Result<u32> {
    match at.checked_add(4).and_then(|e| image.get(at..e)) {
        Some(b) => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => bail!(
            InvalidArgument,
            "object loader: instruction at {at:#x} is outside the image"
        ),
    }
}

/// `v` as a field of `bits` bits (signed when `signed`), or an error naming the relocation.
fn fit(v: i128, bits: u32, signed: bool, what: &dyn Fn() -> String) -> Result<u64> {
    let ok = if signed {
        v >= -(1i128 << (bits - 1)) && v < (1i128 << (bits - 1))
    } else {
        v >= 0 && v < (1i128 << bits)
    };
    ensure!(
        ok,
        InvalidArgument,
        "object loader: {} value {v:#x} does not fit {bits} bits",
        what()
    );
    Ok(v as u64)
}

/// Lay `plan`'s object into `image` (at least `plan.len` zeroed bytes that will live at `base`):
/// sections, stubs, GOT slots and relocations (see the module doc).
pub fn link(
    plan: &Plan,
    image: &mut [u8],
    base: u64,
    resolve: &dyn Fn(&str) -> Option<u64>,
) -> Result<()> {
    ensure!(
        image.len() >= plan.len,
        InvalidArgument,
        "object loader: image of {} bytes, need {}",
        image.len(),
        plan.len
    );
    for (s, at) in plan.elf.sections.iter().zip(&plan.placed) {
        if let (Some(at), true) = (at, s.sh_type == SHT_PROGBITS) {
            put(image, *at, plan.elf.section_data(s)?)?;
        }
    }
    for (&sym, &at) in &plan.stubs {
        let to = plan.address(sym, base, resolve)?;
        put(image, at, &plan.arch.stub(to))?;
    }
    for (&sym, &at) in &plan.got {
        let to = plan.address(sym, base, resolve)?;
        put(image, at, &to.to_le_bytes())?;
    }
    for (target, rs) in &plan.relocs {
        let Some(sec_at) = plan.placed[*target] else {
            continue;
        };
        for r in rs {
            apply(plan, image, base, sec_at, r, resolve)?;
        }
    }
    Ok(())
}

/// One relocation, resolved: where it writes, its type, `P`, `S` (a call's stub for an external
/// function), `A`, and the address of the symbol's GOT slot when it has one.
struct Site {
    at: usize,
    ty: u32,
    p: i128,
    s: i128,
    a: i128,
    got: Option<i128>,
    /// Names the relocation in errors.
    what: String,
}

impl Site {
    fn g(&self) -> Result<i128> {
        match self.got {
            Some(g) => Ok(g),
            None => bail!(
                InvalidArgument,
                "object loader: {} has no GOT slot",
                self.what
            ),
        }
    }

    fn fit(&self, v: i128, bits: u32, signed: bool) -> Result<u64> {
        fit(v, bits, signed, &|| self.what.clone())
    }

    fn put32(&self, image: &mut [u8], v: u32) -> Result<()> {
        put(image, self.at, &v.to_le_bytes())
    }

    /// 64-bit fields wrap (an address is an address, whatever its sign).
    fn put64(&self, image: &mut [u8], v: i128) -> Result<()> {
        put(image, self.at, &(v as u64).to_le_bytes())
    }
}

fn apply(
    plan: &Plan,
    image: &mut [u8],
    base: u64,
    sec_at: usize,
    r: &Rela,
    resolve: &dyn Fn(&str) -> Option<u64>,
) -> Result<()> {
    if r.ty == r::X86_64_NONE || (plan.arch == Arch::AArch64 && r.ty == r::AARCH64_NONE_OLD) {
        return Ok(());
    }
    let at = usize::try_from(r.offset)
        .ok()
        .and_then(|o| o.checked_add(sec_at));
    let Some(at) = at else {
        bail!(
            InvalidArgument,
            "object loader: relocation offset {:#x} overflows",
            r.offset
        );
    };
    let name = plan.symbols.get(r.sym).map_or("?", |s| s.name.as_str());
    let abs = |off: usize| base.wrapping_add(off as u64) as i128;
    let stub = plan.stubs.get(&r.sym).filter(|_| plan.arch.is_call(r.ty));
    let s = match stub {
        Some(&stub) => abs(stub),
        None => plan.address(r.sym, base, resolve)? as i128,
    };
    let site = Site {
        at,
        ty: r.ty,
        p: abs(at),
        s,
        a: r.addend as i128,
        got: plan.got.get(&r.sym).map(|&slot| abs(slot)),
        what: format!("relocation type {} against {name:?} at {at:#x}", r.ty),
    };
    match plan.arch {
        Arch::X86_64 => apply_x86(image, &site),
        Arch::AArch64 => apply_aarch64(image, &site),
    }
}

fn apply_x86(image: &mut [u8], r: &Site) -> Result<()> {
    let (s, a, p) = (r.s, r.a, r.p);
    match r.ty {
        r::X86_64_64 => r.put64(image, s + a),
        r::X86_64_PC64 => r.put64(image, s + a - p),
        r::X86_64_PC32 | r::X86_64_PLT32 => r.put32(image, r.fit(s + a - p, 32, true)? as u32),
        r::X86_64_GOTPCREL | r::X86_64_GOTPCRELX | r::X86_64_REX_GOTPCRELX => {
            r.put32(image, r.fit(r.g()? + a - p, 32, true)? as u32)
        }
        r::X86_64_32 => r.put32(image, r.fit(s + a, 32, false)? as u32),
        r::X86_64_32S => r.put32(image, r.fit(s + a, 32, true)? as u32),
        _ => bail!(
            InvalidArgument,
            "object loader: x86-64 {} is not supported",
            r.what
        ),
    }
}

/// `insn` with its bits `[lo, lo + width)` replaced by `v`.
fn field(insn: u32, lo: u32, width: u32, v: u64) -> u32 {
    let mask = ((1u64 << width) - 1) as u32;
    (insn & !(mask << lo)) | (((v as u32) & mask) << lo)
}

fn page(x: i128) -> i128 {
    x & !0xfff
}

/// Patch an ADRP with the page delta `x` (range-checked unless `_NC`).
fn adrp(image: &mut [u8], r: &Site, x: i128, check: bool) -> Result<()> {
    let imm = if check {
        r.fit(x >> 12, 21, true)?
    } else {
        (x >> 12) as u64
    };
    let insn = field(field(get32(image, r.at)?, 29, 2, imm & 3), 5, 19, imm >> 2);
    r.put32(image, insn)
}

/// Patch the 12-bit immediate of an ADD or LDR/STR with the low bits of `x`, scaled by the
/// access size (`shift`).
fn lo12(image: &mut [u8], r: &Site, x: i128, shift: u32) -> Result<()> {
    let v = ((x & 0xfff) >> shift) as u64;
    let insn = field(get32(image, r.at)?, 10, 12, v);
    r.put32(image, insn)
}

fn apply_aarch64(image: &mut [u8], r: &Site) -> Result<()> {
    let (s, a, p) = (r.s, r.a, r.p);
    match r.ty {
        r::AARCH64_ABS64 => r.put64(image, s + a),
        r::AARCH64_PREL64 => r.put64(image, s + a - p),
        r::AARCH64_ABS32 => r.put32(image, r.fit(s + a, 32, false)? as u32),
        r::AARCH64_PREL32 => r.put32(image, r.fit(s + a - p, 32, true)? as u32),
        r::AARCH64_ADR_PREL_PG_HI21 => adrp(image, r, page(s + a) - page(p), true),
        r::AARCH64_ADR_PREL_PG_HI21_NC => adrp(image, r, page(s + a) - page(p), false),
        r::AARCH64_ADR_GOT_PAGE => adrp(image, r, page(r.g()?) - page(p), true),
        r::AARCH64_ADD_ABS_LO12_NC | r::AARCH64_LDST8_ABS_LO12_NC => lo12(image, r, s + a, 0),
        r::AARCH64_LDST16_ABS_LO12_NC => lo12(image, r, s + a, 1),
        r::AARCH64_LDST32_ABS_LO12_NC => lo12(image, r, s + a, 2),
        r::AARCH64_LDST64_ABS_LO12_NC => lo12(image, r, s + a, 3),
        r::AARCH64_LDST128_ABS_LO12_NC => lo12(image, r, s + a, 4),
        r::AARCH64_LD64_GOT_LO12_NC => lo12(image, r, r.g()?, 3),
        r::AARCH64_CALL26 | r::AARCH64_JUMP26 => {
            let x = s + a - p;
            ensure!(
                x & 3 == 0,
                InvalidArgument,
                "object loader: {} target is not 4-byte aligned",
                r.what
            );
            let imm = r.fit(x >> 2, 26, true)?;
            let insn = field(get32(image, r.at)?, 0, 26, imm);
            r.put32(image, insn)
        }
        _ => bail!(
            InvalidArgument,
            "object loader: AArch64 {} is not supported",
            r.what
        ),
    }
}

/// Load `obj` (a relocatable object for this machine) into executable memory and return its
/// function `entry`, which must have the kernel entry ABI of `driver::dl`. External symbols are
/// looked up with `resolve`.
pub fn load(obj: &[u8], entry: &str, resolve: &dyn Fn(&str) -> Option<u64>) -> Result<KernelFn> {
    let plan = Plan::new(obj)?;
    ensure!(
        Arch::host() == Some(plan.arch),
        Runtime,
        "object loader: the object is for {:?}, this machine is {}",
        plan.arch,
        std::env::consts::ARCH
    );
    let offset = plan.function(entry)?;
    let mut mem = CodeMemory::new(plan.len, entry)?;
    let base = mem.addr();
    link(&plan, mem.bytes_mut()?, base, resolve)?;
    mem.seal(plan.exec_end, plan.ro_end)?;
    Arc::new(mem).kernel(offset, entry)
}

#[cfg(test)]
mod tests;
