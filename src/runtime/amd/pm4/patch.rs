//! Typed patch points: where in a command buffer a later update (a graph replay with new
//! signal values, kernarg addresses or launch dims) must write, and how the value is encoded.
//! Builders return these instead of bare dword positions, so a caller can only write a signal
//! value where a signal value lives, with the range and alignment checks of that field.
//!
//! A patch point applies to the buffer it came from ([`super::Pm4Buf::patch`],
//! [`crate::runtime::amd::sdma::SdmaBuf::patch`]) or to any copy of its dwords, e.g. a bound
//! indirect buffer in GPU memory ([`patch_dwords`], or [`PatchPoint::encode`] with a writer that
//! stores `4 * pos` bytes past the copy's base). A replay's many wait and signal values take the
//! direct path instead ([`patch_values`] over [`ValuePatch`]: no call per dword), logging the
//! dwords they changed for a bound stream's images.
//!
//! Not guaranteed: positions stay valid only while the dwords are not moved relative to each
//! other (appending is fine; splicing in front is not).

use crate::hcq::bound::{store_logged, DirtyLog};
use crate::{ensure, Result};

/// A place in a command buffer that can be rewritten with a typed value.
pub trait PatchPoint {
    /// What the caller supplies.
    type Value;
    /// Checks `value` (range, alignment) and then calls `write(pos, dword)` for every dword of
    /// the field. Nothing is written when the check fails.
    fn encode(&self, value: Self::Value, write: &mut dyn FnMut(usize, u32)) -> Result<()>;
    /// The highest dword position [`PatchPoint::encode`] writes.
    fn max_pos(&self) -> usize;
}

/// Applies a patch to a dword slice (a command buffer or a CPU view of its copy).
pub fn patch_dwords<P: PatchPoint>(dwords: &mut [u32], patch: &P, value: P::Value) -> Result<()> {
    ensure!(
        patch.max_pos() < dwords.len(),
        InvalidArgument,
        "patch: position {} is outside the {}-dword buffer",
        patch.max_pos(),
        dwords.len()
    );
    patch.encode(value, &mut |pos, dw| dwords[pos] = dw)
}

/// A 32-bit value patch point ([`SignalValuePatch`], [`WaitValuePatch`]): its dword and its
/// name for errors, without a call through [`PatchPoint::encode`] (what a replay's many values
/// use: [`patch_values`]).
pub trait ValuePatch {
    /// The type's name, as errors spell it.
    const NAME: &'static str;
    /// Dword position of the 32-bit value.
    fn pos(&self) -> usize;
}

/// Rewrites value patch points in turn (a replay's new wait and signal values), straight into
/// `dwords` ([`store_logged`]: no call per dword), telling `log` (when given: a bound stream) the
/// position of every dword whose value changed; stops at the first error (a value above
/// `u32::MAX`, a position outside `dwords`). The same dwords as [`patch_dwords`] of each.
pub fn patch_values<'a, P: ValuePatch + 'a>(
    dwords: &mut [u32],
    points: impl IntoIterator<Item = (&'a P, u64)>,
    mut log: Option<&mut DirtyLog<'_>>,
) -> Result<()> {
    for (p, v) in points {
        let d = check_u32(P::NAME, v)?;
        store_logged(P::NAME, dwords, p.pos(), d, log.as_deref_mut())?;
    }
    Ok(())
}

fn check_addr(what: &str, va: u64, align: u64) -> Result<()> {
    ensure!(
        va % align == 0,
        InvalidArgument,
        "{what}: address {va:#x} is not {align}-byte aligned"
    );
    ensure!(
        va < 1 << 48,
        InvalidArgument,
        "{what}: address {va:#x} exceeds the 48-bit GPU VA range"
    );
    Ok(())
}

fn check_u32(what: &str, value: u64) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        crate::Error::InvalidArgument(format!(
            "{what}: value {value:#x} does not fit the GPU's 32-bit write/compare"
        ))
    })
}

/// Validates and splits a 64-bit GPU address field (used by builders and patches).
pub(crate) fn addr_dwords(what: &str, va: u64, align: u64) -> Result<[u32; 2]> {
    check_addr(what, va, align)?;
    Ok([va as u32, (va >> 32) as u32])
}

/// Validates a 32-bit signal/wait value (used by builders and patches).
pub(crate) fn value_dword(what: &str, value: u64) -> Result<u32> {
    check_u32(what, value)
}

macro_rules! addr_patch {
    ($(#[$m:meta])* $name:ident, $align:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            pos: usize,
        }
        impl $name {
            pub(crate) fn at(pos: usize) -> Self {
                Self { pos }
            }
            /// Dword position of the low half (the high half follows).
            pub fn pos(&self) -> usize {
                self.pos
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn encode(&self, va: u64, write: &mut dyn FnMut(usize, u32)) -> Result<()> {
                let [lo, hi] = addr_dwords(stringify!($name), va, $align)?;
                write(self.pos, lo);
                write(self.pos + 1, hi);
                Ok(())
            }
            fn max_pos(&self) -> usize {
                self.pos + 1
            }
        }
    };
}

macro_rules! value_patch {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            pos: usize,
        }
        impl $name {
            pub(crate) fn at(pos: usize) -> Self {
                Self { pos }
            }
            /// Dword position of the 32-bit value.
            pub fn pos(&self) -> usize {
                self.pos
            }
        }
        impl ValuePatch for $name {
            const NAME: &'static str = stringify!($name);
            fn pos(&self) -> usize {
                self.pos
            }
        }
        impl PatchPoint for $name {
            type Value = u64;
            fn encode(&self, value: u64, write: &mut dyn FnMut(usize, u32)) -> Result<()> {
                write(self.pos, check_u32(stringify!($name), value)?);
                Ok(())
            }
            fn max_pos(&self) -> usize {
                self.pos
            }
        }
    };
}

addr_patch!(
    /// The address a signal write (RELEASE_MEM DATA_SEL 1 / SDMA FENCE) targets (4-byte aligned).
    SignalAddrPatch,
    4
);
value_patch!(
    /// The 32-bit value a signal write stores (values above `u32::MAX` are refused).
    SignalValuePatch
);
addr_patch!(
    /// The address a wait (WAIT_REG_MEM / POLL_REGMEM) polls (4-byte aligned).
    WaitAddrPatch,
    4
);
value_patch!(
    /// The 32-bit reference a wait compares against with `>=`.
    WaitValuePatch
);
addr_patch!(
    /// The address a timestamp (RELEASE_MEM DATA_SEL 3 / SDMA GET_GLOBAL) writes (8-byte aligned).
    TimestampAddrPatch,
    8
);
addr_patch!(
    /// The kernarg segment pointer in the user SGPRs of a launch (16-byte aligned).
    KernargPtrPatch,
    16
);
addr_patch!(
    /// The dispatch packet pointer in the user SGPRs of a launch (8-byte aligned).
    DispatchPtrPatch,
    8
);

/// What a signal's interrupt part needs: the KFD event mailbox slot and the event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalEvent {
    /// `event_page_va + 8 * event_slot_index`.
    pub mailbox: u64,
    /// KFD event id (interrupt context id).
    pub event_id: u32,
}

/// The event part of a signal: mailbox address, and every dword holding the event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailboxPatch {
    addr_pos: usize,
    id_pos: [usize; 2],
    id_bits: u32,
}

impl MailboxPatch {
    pub(crate) fn at(addr_pos: usize, id_pos: [usize; 2], id_bits: u32) -> Self {
        Self {
            addr_pos,
            id_pos,
            id_bits,
        }
    }
}

impl PatchPoint for MailboxPatch {
    type Value = SignalEvent;
    fn encode(&self, ev: SignalEvent, write: &mut dyn FnMut(usize, u32)) -> Result<()> {
        let [lo, hi] = addr_dwords("MailboxPatch", ev.mailbox, 8)?;
        ensure!(
            self.id_bits >= 32 || ev.event_id < 1 << self.id_bits,
            InvalidArgument,
            "MailboxPatch: event id {} does not fit {} bits",
            ev.event_id,
            self.id_bits
        );
        write(self.addr_pos, lo);
        write(self.addr_pos + 1, hi);
        for p in self.id_pos {
            write(p, ev.event_id);
        }
        Ok(())
    }
    fn max_pos(&self) -> usize {
        (self.addr_pos + 1).max(self.id_pos[0]).max(self.id_pos[1])
    }
}

/// A 3-dword group of launch dimensions.
macro_rules! dims_patch {
    ($(#[$m:meta])* $name:ident, $check:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            pos: usize,
        }
        impl $name {
            pub(crate) fn at(pos: usize) -> Self {
                Self { pos }
            }
            /// Dword position of the x dimension (y and z follow).
            pub fn pos(&self) -> usize {
                self.pos
            }
        }
        impl PatchPoint for $name {
            type Value = [u32; 3];
            fn encode(&self, dims: [u32; 3], write: &mut dyn FnMut(usize, u32)) -> Result<()> {
                let check: fn([u32; 3]) -> Result<()> = $check;
                check(dims)?;
                for (i, d) in dims.iter().enumerate() {
                    write(self.pos + i, *d);
                }
                Ok(())
            }
            fn max_pos(&self) -> usize {
                self.pos + 2
            }
        }
    };
}

/// Checks a workgroup count (DISPATCH_DIRECT counts workgroups, each dimension >= 1).
pub(crate) fn check_global(dims: [u32; 3]) -> Result<()> {
    ensure!(
        dims.iter().all(|&d| d >= 1),
        InvalidArgument,
        "launch: global size {dims:?} has a zero dimension"
    );
    Ok(())
}

/// Largest workgroup (threads) a compute dispatch may use.
pub const MAX_WORKGROUP_THREADS: u64 = 1024;

/// Checks a workgroup size (each dimension >= 1, at most 1024 threads in all).
pub(crate) fn check_local(dims: [u32; 3]) -> Result<()> {
    let threads: u64 = dims.iter().map(|&d| u64::from(d)).product();
    ensure!(
        dims.iter().all(|&d| d >= 1) && threads <= MAX_WORKGROUP_THREADS,
        InvalidArgument,
        "launch: local size {dims:?} must have dimensions >= 1 and at most {MAX_WORKGROUP_THREADS} threads"
    );
    Ok(())
}

dims_patch!(
    /// DISPATCH_DIRECT's workgroup counts.
    GlobalSizePatch,
    check_global
);
dims_patch!(
    /// COMPUTE_NUM_THREAD_X/Y/Z of a launch.
    LocalSizePatch,
    check_local
);

/// Both launch-dimension fields of one kernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDimsPatch {
    pub global: GlobalSizePatch,
    pub local: LocalSizePatch,
}

/// One side (source or destination) of a copy split into pieces: every piece's address field
/// and its byte offset from the copy's base address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyAddrPatch {
    pieces: Vec<(usize, u64)>,
}

impl CopyAddrPatch {
    pub(crate) fn new() -> Self {
        Self { pieces: Vec::new() }
    }
    pub(crate) fn push(&mut self, pos: usize, offset: u64) {
        self.pieces.push((pos, offset));
    }
    /// Number of packets the copy was split into.
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }
}

impl PatchPoint for CopyAddrPatch {
    type Value = u64;
    fn encode(&self, base: u64, write: &mut dyn FnMut(usize, u32)) -> Result<()> {
        let mut words = Vec::with_capacity(self.pieces.len());
        for &(pos, off) in &self.pieces {
            let va = base.saturating_add(off);
            words.push((pos, addr_dwords("CopyAddrPatch", va, 1)?));
        }
        for (pos, [lo, hi]) in words {
            write(pos, lo);
            write(pos + 1, hi);
        }
        Ok(())
    }
    fn max_pos(&self) -> usize {
        self.pieces.iter().map(|&(p, _)| p + 1).max().unwrap_or(0)
    }
}

/// Source and destination of a (possibly split) copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPatch {
    pub src: CopyAddrPatch,
    pub dst: CopyAddrPatch,
}

/// A signal command: value write plus, when an event was given, the mailbox write + interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPatch {
    pub addr: SignalAddrPatch,
    pub value: SignalValuePatch,
    pub event: Option<MailboxPatch>,
}

/// A wait command (`*addr >= value` on the low 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPatch {
    pub addr: WaitAddrPatch,
    pub value: WaitValuePatch,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_check_and_write() {
        let mut buf = vec![0u32; 8];
        patch_dwords(&mut buf, &SignalAddrPatch::at(2), 0x1234_5678_9ABC).unwrap();
        assert_eq!(buf[2..4], [0x5678_9ABC, 0x1234]);
        assert!(patch_dwords(&mut buf, &SignalAddrPatch::at(2), 0x1002).is_err()); // misaligned
        assert!(patch_dwords(&mut buf, &TimestampAddrPatch::at(0), 0x1004).is_err()); // 8-byte rule
        assert!(patch_dwords(&mut buf, &SignalAddrPatch::at(7), 0x1000).is_err()); // out of buffer
        assert!(patch_dwords(&mut buf, &SignalAddrPatch::at(0), 1 << 48).is_err()); // > 48-bit VA
        patch_dwords(&mut buf, &SignalValuePatch::at(5), 0xFFFF_FFFF).unwrap();
        assert_eq!(buf[5], 0xFFFF_FFFF);
        let e = patch_dwords(&mut buf, &WaitValuePatch::at(5), 1 << 32).unwrap_err();
        assert!(e.message().contains("32-bit"), "{e}");
        patch_dwords(&mut buf, &LocalSizePatch::at(0), [8, 4, 2]).unwrap();
        assert_eq!(buf[..3], [8, 4, 2]);
        assert!(patch_dwords(&mut buf, &LocalSizePatch::at(0), [64, 32, 1]).is_err());
        assert!(patch_dwords(&mut buf, &GlobalSizePatch::at(0), [1, 0, 1]).is_err());
        let mb = MailboxPatch::at(0, [2, 3], 28);
        patch_dwords(
            &mut buf,
            &mb,
            SignalEvent {
                mailbox: 0x8008,
                event_id: 7,
            },
        )
        .unwrap();
        assert_eq!(buf[..4], [0x8008, 0, 7, 7]);
        assert!(patch_dwords(
            &mut buf,
            &mb,
            SignalEvent {
                mailbox: 0x8008,
                event_id: 1 << 28
            }
        )
        .is_err());
        let mut cp = CopyAddrPatch::new();
        cp.push(0, 0);
        cp.push(4, 0x100);
        patch_dwords(&mut buf, &cp, 0x1_0000_0000).unwrap();
        assert_eq!(buf[..2], [0, 1]);
        assert_eq!(buf[4..6], [0x100, 1]);
        assert_eq!(cp.pieces(), 2);
    }
}
