//! Linear index arithmetic over UOps: the coefficient of a loop counter in an integer expression
//! (how far an address moves per iteration), for the passes that look at access patterns (the
//! CPU strip staging of `uopgraph/stage.rs`, the prefetch and streaming-store choices of the CPU
//! renderers).
//!
//! Not guaranteed: only ADD, MUL by a constant and NEG are followed; anything else is linear only
//! where it does not depend on the counter (`Some(0)`), else unknown (`None`).

use crate::codegen::uops::{UOp, UOpMap, UOps};
use crate::dtype::ConstValue;
use crate::ops::{BinaryOps, Op, UnaryOps};

/// The coefficient of the counter `range` in the integer expression `u` when `u` is linear in
/// it (`Some(0)`: `u` does not depend on it); `None` when it is not linear or not known.
pub fn coef(u: &UOp, range: &UOp, memo: &mut UOpMap<Option<i64>>) -> Option<i64> {
    if u == range {
        return Some(1);
    }
    if let Some(c) = memo.get(u) {
        return *c;
    }
    let c = match (u.op(), u.alu_op()) {
        (UOps::CONST | UOps::DEFINE_VAR | UOps::SPECIAL | UOps::RANGE, _) => Some(0),
        (UOps::ALU, Some(Op::Binary(BinaryOps::ADD))) => {
            let (a, b) = pair(u, range, memo)?;
            a.checked_add(b)
        }
        (UOps::ALU, Some(Op::Binary(BinaryOps::MUL))) => {
            let (a, b) = pair(u, range, memo)?;
            match (a, b, int_const(&u.src()[0]), int_const(&u.src()[1])) {
                (0, 0, _, _) => Some(0),
                (a, 0, _, Some(k)) => a.checked_mul(k),
                (0, b, Some(k), _) => b.checked_mul(k),
                _ => None,
            }
        }
        (UOps::ALU, Some(Op::Unary(UnaryOps::NEG))) => {
            coef(u.src().first()?, range, memo)?.checked_neg()
        }
        // anything else is linear only where it does not depend on the counter
        _ => {
            let all_const = u.src().iter().all(|s| coef(s, range, memo) == Some(0));
            all_const.then_some(0)
        }
    };
    memo.insert(u.clone(), c);
    c
}

/// The coefficients of both sources of a binary ALU.
fn pair(u: &UOp, range: &UOp, memo: &mut UOpMap<Option<i64>>) -> Option<(i64, i64)> {
    match u.src() {
        [a, b] => Some((coef(a, range, memo)?, coef(b, range, memo)?)),
        _ => None,
    }
}

/// The iteration count of a loop with constant bounds.
pub fn trip_count(range: &UOp) -> Option<i64> {
    match range.src() {
        [a, b] => int_const(b)?.checked_sub(int_const(a)?),
        _ => None,
    }
}

/// The value of an integer CONST.
pub fn int_const(u: &UOp) -> Option<i64> {
    match u.const_value()? {
        ConstValue::Int(v) => i64::try_from(v).ok(),
        _ => None,
    }
}
