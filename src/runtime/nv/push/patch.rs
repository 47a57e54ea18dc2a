//! Typed patch points for NV command streams: where a later update (a graph replay with new
//! signal values, copy addresses, QMD fields) must write, and how the value is encoded. Builders
//! return these instead of bare dword positions, so a caller can only write a signal value where
//! a signal value lives, with the range and alignment checks of that field.
//!
//! A patch point applies to any [`DwordAccess`]: the [`super::PushBuf`] it came from (through
//! [`super::PushBuf::patch`]), a `[u32]` copy of its dwords, or a writer over the bound copy in GPU
//! memory. QMD patch points ([`crate::runtime::nv::qmd`]) use the same trait on a QMD's dwords
//! (they read-modify-write, since QMD fields share dwords).
//!
//! Not guaranteed: positions stay valid only while the dwords are not moved relative to each
//! other (appending is fine; splicing in front is not).

use crate::hcq::bound::{store_logged, DirtyLog};
use crate::{ensure, Result};

/// Dword-granular read/write access to a command buffer or QMD (or a CPU view of its copy).
pub trait DwordAccess {
    /// Number of dwords addressable.
    fn len_dwords(&self) -> usize;
    /// The dword at `pos` (callers check `pos < len_dwords()` first).
    fn read_dword(&self, pos: usize) -> u32;
    /// Stores `value` at `pos` (callers check `pos < len_dwords()` first).
    fn write_dword(&mut self, pos: usize, value: u32);
}

impl DwordAccess for [u32] {
    fn len_dwords(&self) -> usize {
        self.len()
    }
    fn read_dword(&self, pos: usize) -> u32 {
        self[pos]
    }
    fn write_dword(&mut self, pos: usize, value: u32) {
        self[pos] = value;
    }
}

impl DwordAccess for Vec<u32> {
    fn len_dwords(&self) -> usize {
        self.len()
    }
    fn read_dword(&self, pos: usize) -> u32 {
        self[pos]
    }
    fn write_dword(&mut self, pos: usize, value: u32) {
        self[pos] = value;
    }
}

/// A place in a command buffer or QMD that can be rewritten with a typed value.
pub trait PatchPoint {
    /// What the caller supplies.
    type Value;
    /// The highest dword position the patch touches.
    fn max_pos(&self) -> usize;
    /// Checks `value` (range, alignment), then rewrites the field. Nothing is written when a
    /// check fails (including a buffer too short for [`PatchPoint::max_pos`]).
    fn apply(&self, words: &mut dyn DwordAccess, value: Self::Value) -> Result<()>;
}

/// Fails unless `words` holds position `max_pos`.
pub(crate) fn check_len(what: &str, words: &dyn DwordAccess, max_pos: usize) -> Result<()> {
    ensure!(
        max_pos < words.len_dwords(),
        InvalidArgument,
        "{what}: patch position {max_pos} is outside the {}-dword buffer",
        words.len_dwords()
    );
    Ok(())
}

/// Checks an address against an alignment and a width.
pub(crate) fn check_addr(what: &str, addr: u64, align: u64, bits: u32) -> Result<()> {
    ensure!(
        addr % align == 0,
        InvalidArgument,
        "{what}: address {addr:#x} is not {align}-byte aligned"
    );
    ensure!(
        bits >= 64 || addr >> bits == 0,
        InvalidArgument,
        "{what}: address {addr:#x} does not fit {bits} bits"
    );
    Ok(())
}

/// A 64-bit address split over two dwords (low and high half at given positions: host
/// semaphores put LO first, the copy engine's SET_SEMAPHORE_A/B put the high half first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrSlots {
    pub lo: usize,
    pub hi: usize,
    /// Address width the field holds.
    pub bits: u32,
    /// Required alignment in bytes.
    pub align: u64,
}

impl AddrSlots {
    pub(crate) fn encode(&self, what: &str, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
        check_len(what, words, self.lo.max(self.hi))?;
        check_addr(what, addr, self.align, self.bits)?;
        words.write_dword(self.lo, addr as u32);
        words.write_dword(self.hi, (addr >> 32) as u32);
        Ok(())
    }
}

/// A 32- or 64-bit payload (low dword, optional high dword).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSlots {
    pub lo: usize,
    /// `None`: a 32-bit payload field (values above `u32::MAX` are refused).
    pub hi: Option<usize>,
}

impl ValueSlots {
    /// The dwords `value` takes: `(position, dword)` of the low half and of the high half (when
    /// the field is 64-bit), after the checks (a buffer of `len` dwords too short, a value too
    /// wide for a 32-bit field).
    fn dwords(&self, what: &str, len: usize, value: u64) -> Result<[Option<(usize, u32)>; 2]> {
        let max_pos = self.max_pos();
        ensure!(
            max_pos < len,
            InvalidArgument,
            "{what}: patch position {max_pos} is outside the {len}-dword buffer"
        );
        let hi = match self.hi {
            Some(hi) => Some((hi, (value >> 32) as u32)),
            None if value > u64::from(u32::MAX) => crate::bail!(
                InvalidArgument,
                "{what}: value {value:#x} does not fit the 32-bit payload"
            ),
            None => None,
        };
        Ok([Some((self.lo, value as u32)), hi])
    }

    pub(crate) fn encode(&self, what: &str, words: &mut dyn DwordAccess, value: u64) -> Result<()> {
        for (pos, d) in self
            .dwords(what, words.len_dwords(), value)?
            .into_iter()
            .flatten()
        {
            words.write_dword(pos, d);
        }
        Ok(())
    }

    /// [`ValueSlots::encode`] straight into a pushbuffer's dwords (no call per dword through
    /// [`DwordAccess`]: a replay's many signal values), telling `log` the position of every
    /// dword whose value changed. The same dwords as `encode`, the same errors.
    pub(crate) fn encode_logged(
        &self,
        what: &str,
        words: &mut [u32],
        value: u64,
        mut log: Option<&mut DirtyLog<'_>>,
    ) -> Result<()> {
        for (pos, d) in self.dwords(what, words.len(), value)?.into_iter().flatten() {
            store_logged(what, words, pos, d, log.as_deref_mut())?;
        }
        Ok(())
    }

    fn max_pos(&self) -> usize {
        self.hi.unwrap_or(self.lo).max(self.lo)
    }
}

/// A kind of payload patch point ([`SignalValuePatch`], [`WaitValuePatch`]): its slots and its
/// name for errors, without a call through [`PatchPoint`] (what a replay's many values use).
pub trait ValuePatch {
    /// The type's name, as errors spell it.
    const NAME: &'static str;
    /// Where the payload lives.
    fn value_slots(&self) -> ValueSlots;
}

macro_rules! addr_patch {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub(crate) AddrSlots);
        impl $name {
            /// Where the halves live, the width and the alignment.
            pub fn slots(&self) -> AddrSlots {
                self.0
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn max_pos(&self) -> usize {
                self.0.lo.max(self.0.hi)
            }
            fn apply(&self, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
                self.0.encode(stringify!($name), words, addr)
            }
        }
    };
}

macro_rules! value_patch {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub(crate) ValueSlots);
        impl $name {
            /// Where the payload lives.
            pub fn slots(&self) -> ValueSlots {
                self.0
            }
            /// Whether the payload is 64-bit.
            pub fn is_64bit(&self) -> bool {
                self.0.hi.is_some()
            }
        }
        impl ValuePatch for $name {
            const NAME: &'static str = stringify!($name);
            fn value_slots(&self) -> ValueSlots {
                self.0
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn max_pos(&self) -> usize {
                self.0.max_pos()
            }
            fn apply(&self, words: &mut dyn DwordAccess, value: u64) -> Result<()> {
                self.0.encode(stringify!($name), words, value)
            }
        }
    };
}

addr_patch!(
    /// The address a signal (host SEM release or copy-engine semaphore) writes.
    SignalAddrPatch
);
value_patch!(
    /// The value a signal writes.
    SignalValuePatch
);
addr_patch!(
    /// The address a host SEM acquire polls.
    WaitAddrPatch
);
value_patch!(
    /// The value a host SEM acquire compares against (circular >=).
    WaitValuePatch
);

/// The patch points of a signal command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalCmd {
    pub addr: SignalAddrPatch,
    pub value: SignalValuePatch,
}

/// The patch points of a wait command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitCmd {
    pub addr: WaitAddrPatch,
    pub value: WaitValuePatch,
}

/// One side (source or destination) of a copy that may have been split into pieces: every
/// piece's OFFSET pair is rewritten with `base + piece_index * piece_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyAddrSlots {
    /// Position of the first piece's UPPER dword (LOWER follows).
    pub first_upper: usize,
    /// Dwords from one piece's group to the next.
    pub stride: usize,
    pub pieces: usize,
    pub piece_bytes: u64,
    /// Total bytes copied (to check the end of the range against the width).
    pub len: u64,
    pub bits: u32,
}

impl CopyAddrSlots {
    fn max_pos(&self) -> usize {
        self.first_upper + self.stride * self.pieces.saturating_sub(1) + 1
    }

    fn encode(&self, what: &str, words: &mut dyn DwordAccess, base: u64) -> Result<()> {
        check_len(what, words, self.max_pos())?;
        let Some(end) = base.checked_add(self.len) else {
            crate::bail!(
                InvalidArgument,
                "{what}: {base:#x} + {:#x} overflows",
                self.len
            )
        };
        check_addr(what, end - 1, 1, self.bits)?;
        for i in 0..self.pieces {
            let a = base + i as u64 * self.piece_bytes;
            let pos = self.first_upper + i * self.stride;
            words.write_dword(pos, (a >> 32) as u32);
            words.write_dword(pos + 1, a as u32);
        }
        Ok(())
    }
}

macro_rules! copy_patch {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub(crate) CopyAddrSlots);
        impl $name {
            /// Where the pieces' address pairs live.
            pub fn slots(&self) -> CopyAddrSlots {
                self.0
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn max_pos(&self) -> usize {
                self.0.max_pos()
            }
            fn apply(&self, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
                self.0.encode(stringify!($name), words, addr)
            }
        }
    };
}

copy_patch!(
    /// The source address of a copy (OFFSET_IN_UPPER/LOWER of every piece).
    CopySrcPatch
);
copy_patch!(
    /// The destination address of a copy (OFFSET_OUT_UPPER/LOWER of every piece).
    CopyDstPatch
);

/// The patch points of a copy command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyCmd {
    pub src: CopySrcPatch,
    pub dst: CopyDstPatch,
}

/// The QMD address SEND_PCAS_A launches (stored >> 8: 256-byte aligned, below 2^40).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QmdAddrPatch {
    pub(crate) pos: usize,
}

impl QmdAddrPatch {
    /// Dword position of the SEND_PCAS_A data.
    pub fn pos(&self) -> usize {
        self.pos
    }
}

impl PatchPoint for QmdAddrPatch {
    type Value = u64;
    fn max_pos(&self) -> usize {
        self.pos
    }
    fn apply(&self, words: &mut dyn DwordAccess, addr: u64) -> Result<()> {
        check_len("QmdAddrPatch", words, self.pos)?;
        check_addr("QmdAddrPatch", addr, 256, 40)?;
        words.write_dword(self.pos, (addr >> 8) as u32);
        Ok(())
    }
}
