//! The source pre-filter of [`PatternMatcher::rewrite`](super::PatternMatcher::rewrite): what a
//! rule's pattern implies about a node's direct sources ([`needed_src_keys`]) against what the
//! sources have ([`src_keys`]), as bits: each source's op, its ALU op, and whether it equals one
//! of the keyed constants (0, 1, -1, as Python numbers). A rule whose needs a node lacks cannot
//! match it and is skipped without matching.
//!
//! Owns: the key bits. Not guaranteed: that a rule that passes matches (the filter only rules
//! out; shared bits, as for ALU ops outside unary/binary/ternary, only filter less).

use super::{const_num_eq, SrcPat, UPat};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::ConstValue;
use crate::ops::Op;

/// What a match of a rule's pattern implies about the node's direct sources, as [`src_keys`]
/// bits: `some` must all be among the sources' keys; when `every` is not zero and the node has
/// sources, every source's op bit is in `every`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SrcNeed {
    pub(super) some: u64,
    pub(super) every: u64,
}

// the op bits of `src_keys` fit below the ALU op bits
const _: () = assert!(UOps::ALL.len() <= ALU_BITS as usize);

/// The first ALU-op bit of [`src_keys`] (ops take bits 0..23).
pub(super) const ALU_BITS: u32 = 24;
/// The first CONST-value bit of [`src_keys`] (after the 21 ALU-op bits).
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

/// The bits of the constants in [`KEYED_CONSTS`] that `v` equals as a Python number.
fn const_bits(v: ConstValue) -> u64 {
    KEYED_CONSTS
        .iter()
        .enumerate()
        .filter(|(_, &k)| const_num_eq(v, ConstValue::Int(k)))
        .fold(0, |m, (i, _)| m | 1 << (CONST_BITS + i as u32))
}

/// A source node's keys: its op bit, its ALU op's bit, and the bits of the keyed constants it
/// equals.
pub(super) fn src_keys(s: &UOp) -> u64 {
    let op = 1u64 << (s.op() as u32);
    match (s.op(), s.arg()) {
        (UOps::ALU, UArg::Alu(o)) => op | alu_bit(*o),
        (UOps::CONST, UArg::Const(v)) => op | const_bits(*v),
        _ => op,
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
/// count (no `allow_len`), every tuple or permutation entry is matched against some source, so
/// that source has the entry's key; a repeated pattern of one op is matched against every source.
pub(super) fn needed_src_keys(p: &UPat) -> SrcNeed {
    match &p.src {
        Some(SrcPat::Tuple(v) | SrcPat::Perm(v)) if p.allow_len.is_empty() => SrcNeed {
            some: v.iter().fold(0, |m, sp| m | pat_key(sp)),
            every: 0,
        },
        Some(SrcPat::Repeat(one)) => SrcNeed {
            some: 0,
            every: match one.op.as_deref() {
                Some([op]) => 1 << (*op as u32),
                _ => 0,
            },
        },
        _ => SrcNeed::default(),
    }
}
