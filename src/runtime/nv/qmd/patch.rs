//! QMD patch points: the fields a graph replay rewrites in a launch's QMD copy (grid and block
//! dims, the cbuf0 address, a release's address and payload, a dependent-QMD pointer), as typed
//! [`PatchPoint`]s over the QMD's dwords. QMD fields share dwords, so these read-modify-write;
//! every value is checked before anything is written.
//!
//! A patch point is relative to the QMD's first dword; [`QmdPatch::rebase`] moves it to where
//! the QMD sits inside a larger dword view (an inline QMD in a pushbuffer, a kernargs block).

use super::field::{AddrField, Field};
use super::Qmd;
use crate::runtime::nv::push::patch::{check_len, DwordAccess, PatchPoint};
use crate::{ensure, Result};

/// Moves a QMD patch point to a QMD starting at dword `base` of the view it is applied to.
pub trait QmdPatch: Sized {
    fn rebase(self, base: usize) -> Self;
}

/// Writes `value` into `f` of the QMD at dword `base` of `words` (read-modify-write).
fn rmw(words: &mut dyn DwordAccess, base: usize, f: Field, raw: u64) -> Result<()> {
    let (d, n) = (base + f.first_dword(), f.last_dword() - f.first_dword() + 1);
    let mut tmp = [0u32; 2];
    for (k, t) in tmp.iter_mut().enumerate().take(n) {
        *t = words.read_dword(d + k);
    }
    f.local_to(f.first_dword()).set_raw(&mut tmp[..n], raw)?;
    for (k, t) in tmp.iter().enumerate().take(n) {
        words.write_dword(d + k, *t);
    }
    Ok(())
}

fn max_dword(fields: &[Field]) -> usize {
    fields.iter().map(|f| f.last_dword()).max().unwrap_or(0)
}

macro_rules! dims_patch {
    ($(#[$m:meta])* $name:ident, $what:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            fields: [Field; 3],
            base: usize,
        }
        impl QmdPatch for $name {
            fn rebase(self, base: usize) -> Self {
                Self { base, ..self }
            }
        }
        impl PatchPoint for $name {
            type Value = [u32; 3];
            fn max_pos(&self) -> usize {
                self.base + max_dword(&self.fields)
            }
            fn apply(&self, words: &mut dyn DwordAccess, v: [u32; 3]) -> Result<()> {
                check_len($what, words, self.max_pos())?;
                for i in 0..3 {
                    self.fields[i].check(u64::from(v[i]))?;
                }
                for i in 0..3 {
                    rmw(words, self.base, self.fields[i], u64::from(v[i]) >> self.fields[i].shift)?;
                }
                Ok(())
            }
        }
    };
}

dims_patch!(
    /// The grid dimensions (GRID_WIDTH/HEIGHT/DEPTH, CTA_RASTER_* on V03).
    QmdGridPatch,
    "QmdGridPatch"
);
dims_patch!(
    /// The block dimensions (CTA_THREAD_DIMENSION0..2).
    QmdBlockPatch,
    "QmdBlockPatch"
);

macro_rules! addr_patch {
    ($(#[$m:meta])* $name:ident, $what:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            addr: AddrField,
            base: usize,
        }
        impl QmdPatch for $name {
            fn rebase(self, base: usize) -> Self {
                Self { base, ..self }
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn max_pos(&self) -> usize {
                let mut fs = vec![self.addr.lo];
                fs.extend(self.addr.hi);
                self.base + max_dword(&fs)
            }
            fn apply(&self, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
                check_len($what, words, self.max_pos())?;
                let (lo, hi) = self.addr.split(addr)?;
                rmw(words, self.base, self.addr.lo, lo)?;
                if let Some(h) = self.addr.hi {
                    rmw(words, self.base, h, hi)?;
                }
                Ok(())
            }
        }
    };
}

addr_patch!(
    /// Constant buffer 0's address (the launch's kernargs block).
    QmdCbufAddrPatch,
    "QmdCbufAddrPatch"
);
addr_patch!(
    /// A release semaphore's address.
    QmdReleaseAddrPatch,
    "QmdReleaseAddrPatch"
);

/// A release semaphore's payload (32-bit unless the release has PAYLOAD64B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QmdReleasePayloadPatch {
    lo: Field,
    hi: Option<Field>,
    base: usize,
}

impl QmdPatch for QmdReleasePayloadPatch {
    fn rebase(self, base: usize) -> Self {
        Self { base, ..self }
    }
}

impl PatchPoint for QmdReleasePayloadPatch {
    type Value = u64;
    fn max_pos(&self) -> usize {
        let mut fs = vec![self.lo];
        fs.extend(self.hi);
        self.base + max_dword(&fs)
    }
    fn apply(&self, words: &mut dyn DwordAccess, v: u64) -> Result<()> {
        check_len("QmdReleasePayloadPatch", words, self.max_pos())?;
        ensure!(
            self.hi.is_some() || v <= u64::from(u32::MAX),
            InvalidArgument,
            "QmdReleasePayloadPatch: {v:#x} does not fit the 32-bit payload"
        );
        rmw(words, self.base, self.lo, v & 0xFFFF_FFFF)?;
        if let Some(h) = self.hi {
            rmw(words, self.base, h, v >> 32)?;
        }
        Ok(())
    }
}

/// A dependent-QMD pointer (the next QMD: 256-byte aligned, below 2^40).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QmdDependentPatch {
    pointer: Field,
    base: usize,
}

impl QmdPatch for QmdDependentPatch {
    fn rebase(self, base: usize) -> Self {
        Self { base, ..self }
    }
}

impl PatchPoint for QmdDependentPatch {
    type Value = u64;
    fn max_pos(&self) -> usize {
        self.base + self.pointer.last_dword()
    }
    fn apply(&self, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
        check_len("QmdDependentPatch", words, self.max_pos())?;
        self.pointer.check(addr)?;
        rmw(words, self.base, self.pointer, addr >> self.pointer.shift)
    }
}

fn enabled(what: &str, i: usize, on: bool) -> Result<()> {
    ensure!(
        on,
        InvalidArgument,
        "{what} {i} is not enabled in this QMD (set it before taking its patch point)"
    );
    Ok(())
}

/// Patch points of a QMD (relative to its first dword).
pub trait QmdPatches: Qmd {
    fn grid_patch(&self) -> QmdGridPatch {
        QmdGridPatch {
            fields: self.layout().grid,
            base: 0,
        }
    }
    fn block_patch(&self) -> QmdBlockPatch {
        QmdBlockPatch {
            fields: self.layout().block,
            base: 0,
        }
    }
    fn cbuf0_addr_patch(&self) -> QmdCbufAddrPatch {
        QmdCbufAddrPatch {
            addr: self.layout().cbuf[0].addr,
            base: 0,
        }
    }
    /// Release `i`'s address (the release must be enabled).
    fn release_addr_patch(&self, i: usize) -> Result<QmdReleaseAddrPatch> {
        enabled("release", i, self.release(i).is_some())?;
        Ok(QmdReleaseAddrPatch {
            addr: self.layout().release[i].addr,
            base: 0,
        })
    }
    /// Release `i`'s payload, 64-bit when the release has PAYLOAD64B (must be enabled).
    fn release_payload_patch(&self, i: usize) -> Result<QmdReleasePayloadPatch> {
        let r = self.release(i);
        enabled("release", i, r.is_some())?;
        let f = self.layout().release[i];
        Ok(QmdReleasePayloadPatch {
            lo: f.payload_lo,
            hi: r.filter(|r| r.payload64).map(|_| f.payload_hi),
            base: 0,
        })
    }
    /// Dependent QMD `i`'s pointer (the link must be enabled).
    fn dependent_patch(&self, i: usize) -> Result<QmdDependentPatch> {
        enabled("dependent QMD", i, self.dependent_qmd(i).is_some())?;
        Ok(QmdDependentPatch {
            pointer: self.layout().dependent[i].pointer,
            base: 0,
        })
    }
}

impl<T: Qmd + ?Sized> QmdPatches for T {}
