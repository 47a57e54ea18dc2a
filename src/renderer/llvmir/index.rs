//! Index-only integer arithmetic of the CPU flavour, rendered in 64 bits (rawgrad, beyond
//! tinygrad 0.9.1, whose renderer computes every index in `i32` and lets the `getelementptr`
//! sign-extend it).
//!
//! An int32 ALU is *index-only* when every use of its value is the index of a LOAD or STORE or
//! an operand of another index-only ALU; its op is one whose 64-bit result is the sign extension
//! of the 32-bit one whenever the 32-bit one does not overflow (ADD, MUL, IDIV, MOD, MAX, XOR,
//! NEG, WHERE, MULACC; not the shifts or comparisons). On the CPU flavour such ALUs compute in
//! `i64`, their 32-bit operands (loop counters, kernel variables, loaded values) sign-extended
//! where used, and the load or store indexes with the `i64`. Why: LLVM's analyses of addresses
//! (scalar evolution in the SLP vectorizer's GEP seeds and in loop strength reduction's IV users)
//! spent a large share of the compile proving that `sext(i32 a + c)` does not wrap, once per
//! constant offset of an unrolled tile; `i64` addresses need no such proof (measurements in the
//! module doc of `runtime/cpu/llvm.rs`). No value that reaches memory or a comparison changes.
//!
//! Not guaranteed: an index expression whose intermediate 32-bit arithmetic overflows (a view of
//! 2^31 elements or more, which tinygrad 0.9.1's int32 indexing does not support either) may
//! address another element than the 32-bit form would. GPU flavours keep 32-bit indices
//! (64-bit integer arithmetic costs two instructions there).

use crate::codegen::uops::{UOp, UOpMap, UOps};
use crate::dtype::dtypes;
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};

/// Whether `u` is an int32 scalar ALU whose op keeps its value when computed in 64 bits.
fn widenable(u: &UOp) -> bool {
    if u.dtype() != Some(dtypes::int32) {
        return false;
    }
    matches!(
        u.alu_op(),
        Some(
            Op::Binary(
                BinaryOps::ADD
                    | BinaryOps::MUL
                    | BinaryOps::IDIV
                    | BinaryOps::MOD
                    | BinaryOps::MAX
                    | BinaryOps::XOR
            ) | Op::Unary(UnaryOps::NEG)
                | Op::Ternary(TernaryOps::WHERE | TernaryOps::MULACC)
        )
    )
}

/// The index-only ALUs of `uops` (a linear list: every use comes after its source).
///
/// Walked backwards, so that every consumer of a node is decided before the node: each consumer
/// marks its sources as used, and as used other than as an index or by an index-only ALU where
/// that is so (no per-node list of uses).
pub(super) fn index_only(uops: &[UOp]) -> UOpMap<()> {
    const USED: u8 = 1;
    const NOT_INDEX: u8 = 2;
    // nearly every node is some node's source: sized once instead of grown
    let mut flags: UOpMap<u8> = UOpMap::with_capacity_and_hasher(uops.len(), Default::default());
    let mut wide: UOpMap<()> = UOpMap::default();
    for u in uops.iter().rev() {
        let is_wide = widenable(u) && flags.get(u).copied() == Some(USED);
        if is_wide {
            wide.insert(u.clone(), ());
        }
        for (i, s) in u.src().iter().enumerate() {
            let index_use = match u.op() {
                UOps::LOAD | UOps::STORE => i == 1,
                UOps::ALU => is_wide,
                _ => false,
            };
            let f = flags.entry(s.clone()).or_insert(0);
            *f |= if index_use { USED } else { USED | NOT_INDEX };
        }
    }
    wide
}

/// Whether an operand `s` of an index-only ALU (or the index of a load or store) must be
/// sign-extended to be used as an `i64`: a 32-bit integer that is neither index-only (already
/// `i64`) nor a constant (whose literal reads the same in `i64`).
pub(super) fn needs_sext(s: &UOp, wide: bool) -> bool {
    !wide && s.const_value().is_none() && s.dtype() == Some(dtypes::int32)
}

/// The split of a load or store index `idx` that is an index-only `x + c` (`c` a constant):
/// the source positions of `x` and of `c` (memory.rs renders the address as `(base + x) + c`).
pub(super) fn const_offset(idx: &UOp, wide: &UOpMap<()>) -> Option<(usize, usize)> {
    if !wide.contains_key(idx) || idx.alu_op() != Some(Op::Binary(BinaryOps::ADD)) {
        return None;
    }
    match idx.src() {
        [a, b] if b.const_value().is_some() && a.const_value().is_none() => Some((0, 1)),
        [a, b] if a.const_value().is_some() && b.const_value().is_none() => Some((1, 0)),
        _ => None,
    }
}
