//! The bit-field machinery behind the QMD versions: a [`Field`] is a bit range `MW(hi:lo)` of
//! the QMD seen as one little-endian bit array (bit 0 = bit 0 of dword 0), optionally holding a
//! value shifted right (the headers' `_SHIFTED4/6/7/8` fields); an [`AddrField`] is an address
//! split over a low and a high field. Writers check that values fit (errors, never panics) and
//! that shifted values are aligned; readers undo the shift.
//!
//! The per-version tables ([`QmdLayout`]) are built from these in `v03.rs`, `v04.rs`, `v05.rs`.

use crate::hw::nv::arch::QmdVersion;
use crate::{bail, ensure, Result};

/// A bit range of a QMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Header name without the `NVxxC0_QMDVxx_xx_` prefix (indexed fields: the base name).
    pub name: &'static str,
    /// Lowest bit.
    pub lo: u16,
    /// Width in bits (1..=32).
    pub width: u8,
    /// The field holds `value >> shift`.
    pub shift: u8,
}

/// `MW(hi:lo)` as a [`Field`].
pub(crate) const fn mw(name: &'static str, hi: u16, lo: u16) -> Field {
    Field {
        name,
        lo,
        width: (hi - lo + 1) as u8,
        shift: 0,
    }
}

/// `MW(hi:lo)` holding `value >> shift`.
pub(crate) const fn mws(name: &'static str, hi: u16, lo: u16, shift: u8) -> Field {
    Field {
        name,
        lo,
        width: (hi - lo + 1) as u8,
        shift,
    }
}

impl Field {
    /// The highest bit.
    pub fn hi(&self) -> u32 {
        u32::from(self.lo) + u32::from(self.width) - 1
    }

    /// The dword holding the lowest bit.
    pub fn first_dword(&self) -> usize {
        usize::from(self.lo) / 32
    }

    /// The dword holding the highest bit.
    pub fn last_dword(&self) -> usize {
        self.hi() as usize / 32
    }

    fn mask(&self) -> u64 {
        (1u64 << self.width) - 1
    }

    /// The raw bits (not unshifted).
    pub fn get_raw(&self, words: &[u32]) -> u64 {
        let (d, off) = (self.first_dword(), u32::from(self.lo) % 32);
        let lo = u64::from(words.get(d).copied().unwrap_or(0));
        let hi = u64::from(words.get(d + 1).copied().unwrap_or(0));
        ((hi << 32 | lo) >> off) & self.mask()
    }

    /// The value (raw bits << shift).
    pub fn get(&self, words: &[u32]) -> u64 {
        self.get_raw(words) << self.shift
    }

    /// Stores raw bits; they must fit the width.
    pub fn set_raw(&self, words: &mut [u32], raw: u64) -> Result<()> {
        ensure!(
            raw <= self.mask(),
            InvalidArgument,
            "QMD {}: {raw:#x} does not fit {} bits (MW({}:{}))",
            self.name,
            self.width,
            self.hi(),
            self.lo
        );
        ensure!(
            self.last_dword() < words.len(),
            Internal,
            "QMD {}: MW({}:{}) is outside the {}-dword QMD",
            self.name,
            self.hi(),
            self.lo,
            words.len()
        );
        let off = u32::from(self.lo) % 32;
        let (mask, bits) = (self.mask() << off, raw << off);
        let d = self.first_dword();
        words[d] = (u64::from(words[d]) & !mask | bits & mask) as u32;
        if self.last_dword() != d {
            let (m, b) = (mask >> 32, bits >> 32);
            words[d + 1] = (u64::from(words[d + 1]) & !m | b & m) as u32;
        }
        Ok(())
    }

    /// Checks that `value` can be stored (aligned to `1 << shift`, fits after the shift).
    pub fn check(&self, value: u64) -> Result<()> {
        ensure!(
            value % (1u64 << self.shift) == 0,
            InvalidArgument,
            "QMD {}: {value:#x} is not a multiple of {} (the field stores value >> {})",
            self.name,
            1u64 << self.shift,
            self.shift
        );
        ensure!(
            value >> self.shift <= self.mask(),
            InvalidArgument,
            "QMD {}: {value:#x} does not fit {} bits (MW({}:{})){}",
            self.name,
            self.width,
            self.hi(),
            self.lo,
            if self.shift > 0 {
                format!(" after >> {}", self.shift)
            } else {
                String::new()
            }
        );
        Ok(())
    }

    /// Stores `value >> shift`; `value` must be a multiple of `1 << shift` and fit.
    pub fn set(&self, words: &mut [u32], value: u64) -> Result<()> {
        self.check(value)?;
        self.set_raw(words, value >> self.shift)
    }

    /// The same field with `lo` moved down by `dwords` dwords (for a window of the QMD).
    pub(crate) fn local_to(&self, dword: usize) -> Field {
        Field {
            lo: self.lo - (dword * 32) as u16,
            ..*self
        }
    }
}

/// An address over a low field (the low bits of `addr >> shift`) and an optional high field
/// (the bits above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrField {
    pub lo: Field,
    pub hi: Option<Field>,
    pub shift: u8,
}

impl AddrField {
    /// Address bits the field pair holds (shift included).
    pub fn bits(&self) -> u32 {
        u32::from(self.shift) + u32::from(self.lo.width) + self.hi.map_or(0, |h| u32::from(h.width))
    }

    /// Stores `addr`: aligned to `1 << shift`, below `1 << bits()`.
    pub fn set(&self, words: &mut [u32], addr: u64) -> Result<()> {
        self.check(addr)?;
        let v = addr >> self.shift;
        self.lo.set_raw(words, v & ((1u64 << self.lo.width) - 1))?;
        if let Some(h) = self.hi {
            h.set_raw(words, v >> self.lo.width)?;
        }
        Ok(())
    }

    /// The raw (low, high) field values `addr` is stored as.
    pub fn split(&self, addr: u64) -> Result<(u64, u64)> {
        self.check(addr)?;
        let v = addr >> self.shift;
        Ok((v & ((1u64 << self.lo.width) - 1), v >> self.lo.width))
    }

    /// Checks that `addr` can be stored.
    pub fn check(&self, addr: u64) -> Result<()> {
        ensure!(
            addr % (1u64 << self.shift) == 0,
            InvalidArgument,
            "QMD {}: address {addr:#x} is not {}-byte aligned",
            self.lo.name,
            1u64 << self.shift
        );
        ensure!(
            self.bits() >= 64 || addr >> self.bits() == 0,
            InvalidArgument,
            "QMD {}: address {addr:#x} does not fit {} bits",
            self.lo.name,
            self.bits()
        );
        Ok(())
    }

    /// The stored address.
    pub fn get(&self, words: &[u32]) -> u64 {
        let hi = self.hi.map_or(0, |h| h.get_raw(words));
        (hi << self.lo.width | self.lo.get_raw(words)) << self.shift
    }
}

/// One constant buffer slot's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbufFields {
    pub valid: Field,
    pub invalidate: Field,
    pub addr: AddrField,
    /// CONSTANT_BUFFER_SIZE_SHIFTED4.
    pub size: Field,
}

/// One release semaphore's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFields {
    pub enable: Field,
    /// 0 four words (payload + timestamp), 1 one word, 2 two words.
    pub structure_size: Field,
    pub payload64: Field,
    pub addr: AddrField,
    pub payload_lo: Field,
    pub payload_hi: Field,
}

/// One dependent-QMD slot's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DependentFields {
    pub enable: Field,
    pub action: Field,
    pub prefetch: Field,
    /// DEPENDENT_QMDi_POINTER: QMD address >> 8.
    pub pointer: Field,
}

/// The fields of one QMD version rawgrad reads and writes.
#[derive(Debug, PartialEq, Eq)]
pub struct QmdLayout {
    pub version: QmdVersion,
    pub minor_version: Field,
    pub major_version: Field,
    pub qmd_type: Option<Field>,
    pub qmd_group_id: Field,
    pub sm_global_caching_enable: Option<Field>,
    pub api_visible_call_limit: Field,
    pub sampler_index: Field,
    /// TEXTURE_HEADER, TEXTURE_SAMPLER, TEXTURE_DATA, SHADER_DATA, INSTRUCTION, SHADER_CONSTANT.
    pub invalidate: [Field; 6],
    pub cwd_membar_type: Field,
    pub grid: [Field; 3],
    pub block: [Field; 3],
    pub register_count: Field,
    pub barrier_count: Field,
    pub shared_memory_size: Field,
    pub min_sm_config_shared_mem_size: Field,
    pub max_sm_config_shared_mem_size: Field,
    pub target_sm_config_shared_mem_size: Field,
    pub shader_local_memory_low_size: Field,
    pub shader_local_memory_high_size: Field,
    pub sass_version: Field,
    pub program_address: AddrField,
    pub program_prefetch_addr: AddrField,
    pub program_prefetch_size: Field,
    pub cbuf: [CbufFields; 8],
    pub release: [ReleaseFields; 3],
    pub dependent: &'static [DependentFields],
}

impl QmdLayout {
    /// Dwords of a QMD of this layout.
    pub fn dwords(&self) -> usize {
        self.version.size() / 4
    }

    /// Every field with its display name (indexed fields get `(i)`), in table order: the
    /// decoder's field list.
    pub fn named_fields(&self) -> Vec<(String, Field)> {
        let mut v: Vec<(String, Field)> = self
            .scalar_fields()
            .into_iter()
            .map(|f| (f.name.to_string(), f))
            .collect();
        let mut idx = |i: usize, fs: &[Field], hi: Option<Field>| {
            for f in fs.iter().copied().chain(hi) {
                v.push((format!("{}({i})", f.name), f));
            }
        };
        for (i, c) in self.cbuf.iter().enumerate() {
            idx(i, &[c.valid, c.invalidate, c.addr.lo, c.size], c.addr.hi);
        }
        for (i, r) in self.release.iter().enumerate() {
            let fs = [
                r.enable,
                r.structure_size,
                r.payload64,
                r.addr.lo,
                r.payload_lo,
                r.payload_hi,
            ];
            idx(i, &fs, r.addr.hi);
        }
        for (i, d) in self.dependent.iter().enumerate() {
            idx(i, &[d.enable, d.action, d.prefetch, d.pointer], None);
        }
        v
    }

    /// The fields that are not per constant buffer, release or dependent QMD.
    fn scalar_fields(&self) -> Vec<Field> {
        let mut v = vec![self.major_version, self.minor_version, self.qmd_group_id];
        v.extend(self.qmd_type);
        v.extend(self.sm_global_caching_enable);
        v.extend([
            self.api_visible_call_limit,
            self.sampler_index,
            self.cwd_membar_type,
        ]);
        v.extend(self.invalidate.iter().chain(&self.grid).chain(&self.block));
        v.extend([
            self.register_count,
            self.barrier_count,
            self.shared_memory_size,
            self.min_sm_config_shared_mem_size,
            self.max_sm_config_shared_mem_size,
            self.target_sm_config_shared_mem_size,
            self.shader_local_memory_low_size,
            self.shader_local_memory_high_size,
            self.sass_version,
            self.program_prefetch_size,
        ]);
        for a in [self.program_address, self.program_prefetch_addr] {
            v.push(a.lo);
            v.extend(a.hi);
        }
        v
    }

    /// Fails unless `words` has this layout's length.
    pub fn check_len(&self, words: &[u32]) -> Result<()> {
        if words.len() != self.dwords() {
            bail!(
                InvalidArgument,
                "QMD {}: {} dwords given, the layout has {}",
                self.version.name(),
                words.len(),
                self.dwords()
            )
        }
        Ok(())
    }
}
