//! The source pre-filter of [`PatternMatcher::rewrite`](super::PatternMatcher::rewrite): what a
//! rule's pattern implies about a node's direct sources and their sources ([`needed_src_keys`])
//! against what they have ([`node_key`] bits, kept per node and or-ed over its sources by
//! `UOp::new`), as bits: each source's op, its ALU op, and whether it equals one of the keyed
//! constants (0, 1, -1, as Python numbers). A rule whose needs a node lacks cannot match it and is skipped without matching.
//!
//! Owns: the key bits and the check ([`SrcNeed::admits`]). Not guaranteed: that a rule that
//! passes matches (the filter only rules out; shared bits, as for ALU ops outside
//! unary/binary/ternary, only filter less).

use super::{const_num_eq, SrcPat, UPat};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::ConstValue;
use crate::ops::Op;

/// What a match of a rule's pattern implies about the node's direct sources, as [`node_key`]
/// bits: `some` must all be among the sources' keys; when `every` is not zero and the node has
/// sources, every source's op bit is in `every`; and each of `inner` must hold for a source.
#[derive(Clone, Debug, Default)]
pub(super) struct SrcNeed {
    some: u64,
    every: u64,
    inner: Vec<InnerNeed>,
}

/// What a match implies about one source and its own sources: the source (the one at `pos` for a
/// tuple, some source for a permutation) has the keys `key`, and its sources together have `some`.
#[derive(Clone, Copy, Debug)]
struct InnerNeed {
    pos: Option<usize>,
    key: u64,
    some: u64,
}

impl InnerNeed {
    fn holds_for(&self, s: &UOp) -> bool {
        self.key & !s.key() == 0 && self.some & !s.src_keys() == 0
    }
}

impl SrcNeed {
    /// Whether a node with these sources may match (false: it cannot).
    #[inline]
    pub(super) fn admits(&self, u: &UOp) -> bool {
        let have = u.src_keys();
        if self.some & !have != 0 {
            return false;
        }
        // the op bits alone (a source of an op outside `every` rules it out)
        let ops = have & ((1 << ALU_BITS) - 1);
        if self.every != 0 && ops & !self.every != 0 {
            return false;
        }
        self.inner.iter().all(|n| match n.pos {
            Some(p) => u.src().get(p).is_some_and(|s| n.holds_for(s)),
            None => u.src().iter().any(|s| n.holds_for(s)),
        })
    }
}

// the op bits of `node_key` fit below the ALU op bits
const _: () = assert!(UOps::ALL.len() <= ALU_BITS as usize);

/// The first ALU-op bit of [`node_key`] (ops take bits 0..23).
const ALU_BITS: u32 = 24;
/// The first CONST-value bit of [`node_key`] (after the 21 ALU-op bits).
const CONST_BITS: u32 = ALU_BITS + 21;
/// The constants with a bit of their own, in bit order.
const KEYED_CONSTS: [i128; 3] = [0, 1, -1];

/// The ALU-op bit of `op` (ops outside the ALU share one bit: a shared bit only filters less).
fn alu_bit(op: Op) -> u64 {
    use crate::ops::{BinaryOps as B, TernaryOps as T, UnaryOps as U};
    let i = match op {
        Op::Unary(u) => match u {
            U::EXP2 => 0,
            U::LOG2 => 1,
            U::CAST => 2,
            U::BITCAST => 3,
            U::SIN => 4,
            U::SQRT => 5,
            U::NEG => 6,
            U::RECIP => 7,
        },
        Op::Binary(b) => match b {
            B::ADD => 8,
            B::MUL => 9,
            B::IDIV => 10,
            B::MAX => 11,
            B::MOD => 12,
            B::CMPLT => 13,
            B::CMPNE => 14,
            B::XOR => 15,
            B::SHR => 16,
            B::SHL => 17,
        },
        Op::Ternary(T::WHERE) => 18,
        Op::Ternary(T::MULACC) => 19,
        _ => 20,
    };
    1 << (ALU_BITS + i)
}

/// The ALU ops with a key bit of their own (the rest share the last bit, [`ALU_SLOTS`]).
pub(super) const ALU_SLOTS: usize = 20;

/// The position of `op`'s ALU bit (`0..ALU_SLOTS`) when it has a bit of its own.
pub(super) fn alu_slot_of(op: Op) -> Option<usize> {
    let i = (alu_bit(op).trailing_zeros() - ALU_BITS) as usize;
    (i < ALU_SLOTS).then_some(i)
}

/// The position of the ALU bit in the [`node_key`] `key` of an ALU node whose ALU op has a bit
/// of its own (`None` for any other node).
#[inline]
pub(super) fn alu_slot(key: u64) -> Option<usize> {
    let bits = (key >> ALU_BITS) & ((1 << ALU_SLOTS) - 1);
    (bits != 0).then(|| bits.trailing_zeros() as usize)
}

/// The bit of the constant in [`KEYED_CONSTS`] that `v` equals as a Python number (one at most),
/// or 0.
fn const_bits(v: ConstValue) -> u64 {
    // `const_num_eq(v, ConstValue::Int(k))` for each keyed `k`, without the conversions
    let i = match v {
        ConstValue::Float(0.0) => 0,
        ConstValue::Float(1.0) => 1,
        ConstValue::Float(-1.0) => 2,
        ConstValue::Int(0) | ConstValue::Bool(false) => 0,
        ConstValue::Int(1) | ConstValue::Bool(true) => 1,
        ConstValue::Int(-1) => 2,
        _ => return 0,
    };
    debug_assert!(const_num_eq(v, ConstValue::Int(KEYED_CONSTS[i as usize])));
    1 << (CONST_BITS + i)
}

/// The keys of a node of `op` and `arg` as a source: its op bit, its ALU op's bit, and the bit
/// of the keyed constant it equals (`UOp::new` keeps them per node).
pub(crate) fn node_key(op: UOps, arg: &UArg) -> u64 {
    let bit = 1u64 << (op as u32);
    match (op, arg) {
        (UOps::ALU, UArg::Alu(o)) => bit | alu_bit(*o),
        (UOps::CONST, UArg::Const(v)) => bit | const_bits(*v),
        _ => bit,
    }
}

/// The key a node matching `sp` surely has (0 when `sp` implies none): its one accepted op, with
/// its one accepted ALU op or keyed constant.
fn pat_key(sp: &UPat) -> u64 {
    let Some([op]) = sp.op.as_deref() else {
        return 0;
    };
    let bit = 1u64 << (*op as u32);
    match (op, sp.arg.as_deref()) {
        (UOps::ALU, Some([UArg::Alu(o)])) => bit | alu_bit(*o),
        (UOps::CONST, Some([UArg::Const(v)])) => bit | const_bits(*v),
        _ => bit,
    }
}

/// The source keys a match of `p` implies (see `PatternMatcher::need`): with an exact source
/// count (no `allow_len`), every tuple or permutation entry is matched against some source (a
/// tuple's against the source at its position), so that source has the entry's key and its own
/// sources have what the entry needs of them; a repeated pattern of one op is matched against
/// every source.
pub(super) fn needed_src_keys(p: &UPat) -> SrcNeed {
    match &p.src {
        Some(SrcPat::Tuple(v) | SrcPat::Perm(v)) if p.allow_len.is_empty() => {
            let tuple = matches!(p.src, Some(SrcPat::Tuple(_)));
            let inner = v
                .iter()
                .enumerate()
                .map(|(i, sp)| InnerNeed {
                    pos: tuple.then_some(i),
                    key: pat_key(sp),
                    some: needed_src_keys(sp).some,
                })
                .filter(|n| n.some != 0)
                .collect();
            SrcNeed {
                some: v.iter().fold(0, |m, sp| m | pat_key(sp)),
                every: 0,
                inner,
            }
        }
        Some(SrcPat::Repeat(one)) => SrcNeed {
            some: 0,
            every: match one.op.as_deref() {
                Some([op]) => 1 << (*op as u32),
                _ => 0,
            },
            inner: vec![],
        },
        _ => SrcNeed::default(),
    }
}
