//! QMDs (queue meta data: one grid launch): `trait Qmd` with one module per version ([`v03`]
//! Ampere/Ada 256 B, [`v04`] Hopper 384 B, [`v05`] Blackwell 384 B), each a bit-range table
//! ([`QmdLayout`]) that the trait's provided methods read and write through [`field`] (values
//! that do not fit are errors, never panics). [`AnyQmd`] picks the version at run time. The field
//! names and bit positions are those of open-gpu-doc `classes/compute/clc6c0qmd.h`
//! (NVC6C0_QMDV03_00_*), `clcbc0qmd.h` (NVCBC0_QMDV04_00_*) and `clcdc0qmd.h` (NVCDC0_QMDV05_00_*);
//! the enum values below are those headers' `_VALUE` / `_TRUE` defines of the named field.
//!
//! Builders (a program's QMD template, the graph patch points) live with the backend
//! (`runtime::nv::qmd`); this module only lays out and reads fields.
//!
//! Not guaranteed: fields outside the tables are left as built (zero); the hardware meaning of
//! fields marked UNCONFIRMED in the version modules.

pub mod field;
pub mod v03;
pub mod v04;
pub mod v05;

pub use field::{AddrField, Field, QmdLayout};
pub use v03::QmdV03;
pub use v04::QmdV04;

/// QMD_TYPE = QUEUE (V04/V05, `clcbc0qmd.h`, `clcdc0qmd.h`): the QMD describes a queue, not a
/// grid. Seen on an H200 (driver 580.159.04, 2026-12-04): launched with SEND_PCAS it runs no CTA
/// and still performs its releases.
pub const QMD_TYPE_QUEUE: u32 = 0;
/// QMD_TYPE = GRID_CTA: a grid of CTAs, what every launch of this backend is.
pub const QMD_TYPE_GRID_CTA: u32 = 2;
pub use v05::QmdV05;

use crate::hw::nv::arch::{QmdVersion, SharedMemConfig};
use crate::{ensure, Result};

/// A constant buffer binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantBuffer {
    /// GPU address (64-byte aligned on V04/V05: the field is SHIFTED6).
    pub addr: u64,
    /// Bytes (the field holds size >> 4: a multiple of 16).
    pub size: u32,
    /// CONSTANT_BUFFER_INVALIDATE: drop cached lines of this bank at launch.
    pub invalidate: bool,
}

/// RELEASE_STRUCTURE_SIZE values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseStructure {
    /// Payload at +0 and a timestamp at +8 (the header's SEMAPHORE_FOUR_WORDS).
    FourWords = 0,
    OneWord = 1,
    TwoWords = 2,
}

impl ReleaseStructure {
    /// The structure with this field value.
    pub fn from_bits(v: u64) -> Option<ReleaseStructure> {
        match v {
            0 => Some(ReleaseStructure::FourWords),
            1 => Some(ReleaseStructure::OneWord),
            2 => Some(ReleaseStructure::TwoWords),
            _ => None,
        }
    }
}

/// A release semaphore the grid writes when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QmdRelease {
    pub addr: u64,
    pub payload: u64,
    /// RELEASE_PAYLOAD64B (tinygrad never sets it: 32-bit payloads).
    pub payload64: bool,
    pub structure: ReleaseStructure,
}

/// DEPENDENT_QMD_ACTION values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependentAction {
    IncrementPut = 0,
    /// Start the dependent QMD when this grid completes (tinygrad's chaining).
    Schedule = 1,
    InvalidateCopySchedule = 3,
    DecrementDependence = 4,
}

impl DependentAction {
    /// The action with this field value.
    pub fn from_bits(v: u64) -> Option<DependentAction> {
        match v {
            0 => Some(DependentAction::IncrementPut),
            1 => Some(DependentAction::Schedule),
            3 => Some(DependentAction::InvalidateCopySchedule),
            4 => Some(DependentAction::DecrementDependence),
            _ => None,
        }
    }
}

/// A dependent QMD link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DependentQmd {
    /// The next QMD (256-byte aligned, below 2^40).
    pub addr: u64,
    pub action: DependentAction,
    pub prefetch: bool,
}

/// CWD_MEMBAR_TYPE values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwdMembar {
    L1None = 0,
    /// The grid ends with a system-scope membar (tinygrad's choice).
    L1Sysmembar = 1,
    L1Membar = 3,
}

bitflags::bitflags! {
    /// The QMD's INVALIDATE_*_CACHE bits, in table order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct QmdInvalidates: u32 {
        const TEXTURE_HEADER = 1 << 0;
        const TEXTURE_SAMPLER = 1 << 1;
        const TEXTURE_DATA = 1 << 2;
        const SHADER_DATA = 1 << 3;
        const INSTRUCTION = 1 << 4;
        const SHADER_CONSTANT = 1 << 5;
    }
}

fn check_index(what: &str, i: usize, n: usize) -> Result<()> {
    ensure!(
        i < n,
        InvalidArgument,
        "QMD {what}: index {i} is not below {n}"
    );
    Ok(())
}

/// A QMD of some version: the required methods give its table and dwords; every accessor is
/// provided from the table.
pub trait Qmd {
    /// The bit-range table of this version.
    fn layout(&self) -> &'static QmdLayout;
    /// The QMD's dwords (64 or 96).
    fn dwords(&self) -> &[u32];
    /// The QMD's dwords, writable.
    fn dwords_mut(&mut self) -> &mut [u32];

    /// The layout version.
    fn version(&self) -> QmdVersion {
        self.layout().version
    }

    /// The QMD as little-endian bytes.
    fn to_bytes(&self) -> Vec<u8> {
        self.dwords().iter().flat_map(|d| d.to_le_bytes()).collect()
    }

    /// QMD_MAJOR_VERSION.
    fn major_version(&self) -> u32 {
        self.layout().major_version.get(self.dwords()) as u32
    }

    /// QMD_TYPE where the layout has one (V04, V05); `None` on V03.
    fn qmd_type(&self) -> Option<u32> {
        (self.layout().qmd_type).map(|f| f.get(self.dwords()) as u32)
    }

    /// QMD_MINOR_VERSION (QMD_VERSION on V03).
    fn minor_version(&self) -> u32 {
        self.layout().minor_version.get(self.dwords()) as u32
    }

    /// Grid dimensions in CTAs.
    fn set_grid(&mut self, grid: [u32; 3]) -> Result<()> {
        let f = self.layout().grid;
        for i in 0..3 {
            f[i].check(u64::from(grid[i]))?;
        }
        for i in 0..3 {
            f[i].set(self.dwords_mut(), u64::from(grid[i]))?;
        }
        Ok(())
    }
    fn grid(&self) -> [u32; 3] {
        self.layout().grid.map(|f| f.get(self.dwords()) as u32)
    }

    /// CTA dimensions in threads.
    fn set_block(&mut self, block: [u32; 3]) -> Result<()> {
        let f = self.layout().block;
        for i in 0..3 {
            f[i].check(u64::from(block[i]))?;
        }
        for i in 0..3 {
            f[i].set(self.dwords_mut(), u64::from(block[i]))?;
        }
        Ok(())
    }
    fn block(&self) -> [u32; 3] {
        self.layout().block.map(|f| f.get(self.dwords()) as u32)
    }

    /// Program (entry) address.
    fn set_program_address(&mut self, addr: u64) -> Result<()> {
        self.layout().program_address.set(self.dwords_mut(), addr)
    }
    fn program_address(&self) -> u64 {
        self.layout().program_address.get(self.dwords())
    }

    fn set_register_count(&mut self, regs: u32) -> Result<()> {
        self.layout()
            .register_count
            .set(self.dwords_mut(), u64::from(regs))
    }
    fn register_count(&self) -> u32 {
        self.layout().register_count.get(self.dwords()) as u32
    }

    fn set_barrier_count(&mut self, n: u32) -> Result<()> {
        self.layout()
            .barrier_count
            .set(self.dwords_mut(), u64::from(n))
    }
    fn barrier_count(&self) -> u32 {
        self.layout().barrier_count.get(self.dwords()) as u32
    }

    /// SHARED_MEMORY_SIZE and the MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE carveouts.
    fn set_shared_memory(&mut self, c: SharedMemConfig) -> Result<()> {
        let l = self.layout();
        let vals = [
            (l.shared_memory_size, c.size),
            (l.min_sm_config_shared_mem_size, c.min_config),
            (l.max_sm_config_shared_mem_size, c.max_config),
            (l.target_sm_config_shared_mem_size, c.target_config),
        ];
        for (f, v) in vals {
            f.check(u64::from(v))?;
        }
        for (f, v) in vals {
            f.set(self.dwords_mut(), u64::from(v))?;
        }
        Ok(())
    }
    fn shared_memory(&self) -> SharedMemConfig {
        let (l, w) = (self.layout(), self.dwords());
        SharedMemConfig {
            size: l.shared_memory_size.get(w) as u32,
            min_config: l.min_sm_config_shared_mem_size.get(w) as u32,
            max_config: l.max_sm_config_shared_mem_size.get(w) as u32,
            target_config: l.target_sm_config_shared_mem_size.get(w) as u32,
        }
    }

    /// SHADER_LOCAL_MEMORY_LOW_SIZE / HIGH_SIZE in bytes per thread (tinygrad puts the whole
    /// SLM need into HIGH_SIZE).
    fn set_shader_local_memory(&mut self, low: u32, high: u32) -> Result<()> {
        let l = self.layout();
        l.shader_local_memory_low_size.check(u64::from(low))?;
        l.shader_local_memory_high_size.check(u64::from(high))?;
        l.shader_local_memory_low_size
            .set(self.dwords_mut(), u64::from(low))?;
        l.shader_local_memory_high_size
            .set(self.dwords_mut(), u64::from(high))
    }
    fn shader_local_memory(&self) -> (u32, u32) {
        let (l, w) = (self.layout(), self.dwords());
        (
            l.shader_local_memory_low_size.get(w) as u32,
            l.shader_local_memory_high_size.get(w) as u32,
        )
    }

    fn set_sass_version(&mut self, v: u32) -> Result<()> {
        self.layout()
            .sass_version
            .set(self.dwords_mut(), u64::from(v))
    }
    fn sass_version(&self) -> u32 {
        self.layout().sass_version.get(self.dwords()) as u32
    }

    /// PROGRAM_PREFETCH address (stored >> 8) and size (in 256-byte blocks, 9 bits).
    fn set_program_prefetch(&mut self, addr: u64, blocks: u32) -> Result<()> {
        let l = self.layout();
        l.program_prefetch_size.check(u64::from(blocks))?;
        l.program_prefetch_addr.set(self.dwords_mut(), addr)?;
        l.program_prefetch_size
            .set(self.dwords_mut(), u64::from(blocks))
    }
    fn program_prefetch(&self) -> (u64, u32) {
        let (l, w) = (self.layout(), self.dwords());
        (
            l.program_prefetch_addr.get(w),
            l.program_prefetch_size.get(w) as u32,
        )
    }

    /// Binds (or with `None` unbinds) constant buffer `i` (0..8).
    fn set_constant_buffer(&mut self, i: usize, cb: Option<ConstantBuffer>) -> Result<()> {
        check_index("constant buffer", i, 8)?;
        let f = self.layout().cbuf[i];
        let w = self.dwords_mut();
        let Some(cb) = cb else {
            return f.valid.set(w, 0);
        };
        f.addr.check(cb.addr)?;
        f.size.check(u64::from(cb.size))?;
        f.addr.set(w, cb.addr)?;
        f.size.set(w, u64::from(cb.size))?;
        f.invalidate.set(w, u64::from(cb.invalidate))?;
        f.valid.set(w, 1)
    }
    fn constant_buffer(&self, i: usize) -> Option<ConstantBuffer> {
        let f = self.layout().cbuf.get(i)?;
        let w = self.dwords();
        (f.valid.get(w) != 0).then(|| ConstantBuffer {
            addr: f.addr.get(w),
            size: f.size.get(w) as u32,
            invalidate: f.invalidate.get(w) != 0,
        })
    }

    /// Enables (or with `None` disables) release semaphore `i` (0..3).
    fn set_release(&mut self, i: usize, r: Option<QmdRelease>) -> Result<()> {
        check_index("release", i, 3)?;
        let f = self.layout().release[i];
        let w = self.dwords_mut();
        let Some(r) = r else {
            return f.enable.set(w, 0);
        };
        f.addr.check(r.addr)?;
        ensure!(
            r.payload64 || r.payload <= u64::from(u32::MAX),
            InvalidArgument,
            "QMD release {i}: payload {:#x} needs PAYLOAD64B",
            r.payload
        );
        f.addr.set(w, r.addr)?;
        f.payload_lo.set(w, r.payload & 0xFFFF_FFFF)?;
        f.payload_hi.set(w, r.payload >> 32)?;
        f.payload64.set(w, u64::from(r.payload64))?;
        f.structure_size.set(w, r.structure as u64)?;
        f.enable.set(w, 1)
    }
    fn release(&self, i: usize) -> Option<QmdRelease> {
        let f = self.layout().release.get(i)?;
        let w = self.dwords();
        if f.enable.get(w) == 0 {
            return None;
        }
        Some(QmdRelease {
            addr: f.addr.get(w),
            payload: f.payload_hi.get(w) << 32 | f.payload_lo.get(w),
            payload64: f.payload64.get(w) != 0,
            structure: ReleaseStructure::from_bits(f.structure_size.get(w))?,
        })
    }

    /// Links (or with `None` unlinks) dependent QMD `i` (V03: 0 only; V04/V05: 0..2).
    fn set_dependent_qmd(&mut self, i: usize, d: Option<DependentQmd>) -> Result<()> {
        let deps = self.layout().dependent;
        check_index("dependent QMD", i, deps.len())?;
        let f = deps[i];
        let w = self.dwords_mut();
        let Some(d) = d else {
            return f.enable.set(w, 0);
        };
        ensure!(
            d.addr < 1 << 40,
            InvalidArgument,
            "QMD dependent QMD {i}: address {:#x} is not below 2^40",
            d.addr
        );
        f.pointer.check(d.addr)?;
        f.pointer.set(w, d.addr)?;
        f.action.set(w, d.action as u64)?;
        f.prefetch.set(w, u64::from(d.prefetch))?;
        f.enable.set(w, 1)
    }
    fn dependent_qmd(&self, i: usize) -> Option<DependentQmd> {
        let f = self.layout().dependent.get(i)?;
        let w = self.dwords();
        if f.enable.get(w) == 0 {
            return None;
        }
        Some(DependentQmd {
            addr: f.pointer.get(w),
            action: DependentAction::from_bits(f.action.get(w))?,
            prefetch: f.prefetch.get(w) != 0,
        })
    }

    /// The INVALIDATE_*_CACHE bits (set exactly the given ones).
    fn set_cache_invalidates(&mut self, inv: QmdInvalidates) -> Result<()> {
        let f = self.layout().invalidate;
        for (i, field) in f.iter().enumerate() {
            field.set(self.dwords_mut(), u64::from(inv.bits() >> i & 1))?;
        }
        Ok(())
    }
    fn cache_invalidates(&self) -> QmdInvalidates {
        let f = self.layout().invalidate;
        let bits = f.iter().enumerate().fold(0, |b, (i, field)| {
            b | (field.get(self.dwords()) as u32) << i
        });
        QmdInvalidates::from_bits_truncate(bits)
    }

    fn set_cwd_membar(&mut self, m: CwdMembar) -> Result<()> {
        self.layout()
            .cwd_membar_type
            .set(self.dwords_mut(), m as u64)
    }
    fn cwd_membar(&self) -> Option<CwdMembar> {
        match self.layout().cwd_membar_type.get(self.dwords()) {
            0 => Some(CwdMembar::L1None),
            1 => Some(CwdMembar::L1Sysmembar),
            3 => Some(CwdMembar::L1Membar),
            _ => None,
        }
    }

    /// The per-launch fields: grid, block and constant buffer 0 (the launch's kernargs block).
    fn set_launch(&mut self, grid: [u32; 3], block: [u32; 3], cbuf0: ConstantBuffer) -> Result<()> {
        self.set_grid(grid)?;
        self.set_block(block)?;
        self.set_constant_buffer(0, Some(cbuf0))
    }
}

/// A QMD whose version is chosen at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyQmd {
    V03(QmdV03),
    V04(QmdV04),
    V05(QmdV05),
}

impl AnyQmd {
    /// A fresh QMD of `version` (see each module's "from zeros" fields).
    pub fn new(version: QmdVersion) -> AnyQmd {
        match version {
            QmdVersion::V03_00 => AnyQmd::V03(QmdV03::new()),
            QmdVersion::V04_00 => AnyQmd::V04(QmdV04::new()),
            QmdVersion::V05_00 => AnyQmd::V05(QmdV05::new()),
        }
    }

    /// A QMD of `version` from its dwords (length checked).
    pub fn from_dwords(version: QmdVersion, words: &[u32]) -> Result<AnyQmd> {
        Ok(match version {
            QmdVersion::V03_00 => AnyQmd::V03(QmdV03::from_dwords(words)?),
            QmdVersion::V04_00 => AnyQmd::V04(QmdV04::from_dwords(words)?),
            QmdVersion::V05_00 => AnyQmd::V05(QmdV05::from_dwords(words)?),
        })
    }

    /// A QMD of `version` from little-endian bytes (length checked).
    pub fn from_bytes(version: QmdVersion, bytes: &[u8]) -> Result<AnyQmd> {
        ensure!(
            bytes.len() == version.size(),
            InvalidArgument,
            "QMD {}: {} bytes given, it has {}",
            version.name(),
            bytes.len(),
            version.size()
        );
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        AnyQmd::from_dwords(version, &words)
    }

    fn inner(&self) -> &dyn Qmd {
        match self {
            AnyQmd::V03(q) => q,
            AnyQmd::V04(q) => q,
            AnyQmd::V05(q) => q,
        }
    }
}

impl Qmd for AnyQmd {
    fn layout(&self) -> &'static QmdLayout {
        self.inner().layout()
    }
    fn dwords(&self) -> &[u32] {
        match self {
            AnyQmd::V03(q) => q.dwords(),
            AnyQmd::V04(q) => q.dwords(),
            AnyQmd::V05(q) => q.dwords(),
        }
    }
    fn dwords_mut(&mut self) -> &mut [u32] {
        match self {
            AnyQmd::V03(q) => q.dwords_mut(),
            AnyQmd::V04(q) => q.dwords_mut(),
            AnyQmd::V05(q) => q.dwords_mut(),
        }
    }
}
