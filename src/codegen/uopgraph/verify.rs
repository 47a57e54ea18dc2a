//! The dtype checks of a linear UOp list (tinygrad 0.9.1 `UOpGraph.type_verify`): each UOp's
//! dtype against its op, its sources and its constant's class; the error names the first bad UOp
//! by position and op.
//!
//! Not guaranteed: semantic checks beyond dtypes (a malformed loop structure with well-typed UOps
//! passes).

use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::ops::{BinaryOps, Op, TernaryOps};
use crate::{bail, ensure, Result};

fn dt(u: &UOp) -> String {
    u.dtype().map_or("None".into(), |d| format!("{d}"))
}

/// Check dtypes the way tinygrad's `type_verify` does; the error names the first bad UOp.
pub fn type_verify(uops: &[UOp]) -> Result<()> {
    for (i, u) in uops.iter().enumerate() {
        verify_one(u).map_err(|e| {
            crate::Error::Codegen(format!(
                "type_verify: uop {i} ({}): {}",
                u.op().name(),
                e.message()
            ))
        })?;
    }
    Ok(())
}

fn const_class_ok(v: ConstValue, d: DType) -> bool {
    matches!(
        (v, d.is_float(), d.is_bool()),
        (ConstValue::Float(_), true, _) | (ConstValue::Bool(_), false, true)
    ) || matches!(v, ConstValue::Int(_)) && !d.is_float() && !d.is_bool()
}

fn verify_one(u: &UOp) -> Result<()> {
    let src_dt = |i: usize| u.src().get(i).and_then(|s| s.dtype());
    match u.op() {
        UOps::CONST | UOps::DEFINE_ACC => {
            let Some(d) = u.dtype() else {
                bail!(Codegen, "{} has no dtype", u.op().name())
            };
            let v = if u.op() == UOps::DEFINE_ACC {
                ensure!(
                    src_dt(0) == Some(d.scalar()),
                    Codegen,
                    "the initial value has dtype {:?}, not the scalar {}",
                    src_dt(0),
                    d.scalar()
                );
                u.src().first().and_then(|s| s.const_value())
            } else {
                u.const_value()
            };
            let Some(v) = v else {
                bail!(Codegen, "no constant value")
            };
            ensure!(
                const_class_ok(v, d),
                Codegen,
                "value {v} does not match {d}"
            );
        }
        UOps::CAST | UOps::BITCAST => {
            ensure!(*u.arg() == UArg::None, Codegen, "has an arg {}", u.arg());
        }
        UOps::LOAD if u.src().len() > 2 => {
            let gate = &u.src()[2];
            if !matches!(gate.op(), UOps::IF | UOps::BARRIER) {
                ensure!(
                    gate.dtype() == Some(dtypes::bool),
                    Codegen,
                    "the gate has dtype {}",
                    dt(gate)
                );
            }
        }
        UOps::STORE if u.src().len() == 4 => {
            ensure!(
                src_dt(3) == Some(dtypes::bool),
                Codegen,
                "the gate has dtype {}",
                dt(&u.src()[3])
            );
        }
        UOps::ALU => verify_alu(u)?,
        _ => {}
    }
    Ok(())
}

fn verify_alu(u: &UOp) -> Result<()> {
    let Some(op) = u.alu_op() else {
        bail!(Codegen, "ALU without an op arg")
    };
    let want = match op {
        Op::Unary(_) => 1,
        Op::Binary(_) => 2,
        Op::Ternary(_) => 3,
        _ => bail!(Codegen, "{} is not an ALU op", op.name()),
    };
    ensure!(
        u.src().len() == want,
        Codegen,
        "{} takes {want} sources, has {}",
        op.name(),
        u.src().len()
    );
    let d = u.dtype();
    // the source count was checked above (at most 3: ternary ops)
    let mut s: [Option<DType>; 3] = [None; 3];
    for (slot, x) in s.iter_mut().zip(u.src()) {
        *slot = x.dtype();
    }
    let is_int = |x: Option<DType>| x.is_some_and(|x| x.is_int());
    match op {
        Op::Unary(_) => ensure!(
            d == s[0],
            Codegen,
            "{} dtype {d:?} != {:?}",
            op.name(),
            s[0]
        ),
        Op::Binary(BinaryOps::CMPLT | BinaryOps::CMPNE) => {
            let lanes = s[0].map_or(1, |x| x.count);
            ensure!(
                d == Some(dtypes::bool.vec(lanes)),
                Codegen,
                "{} output dtype {d:?} is not bool",
                op.name()
            );
            ensure!(
                s[0] == s[1],
                Codegen,
                "{} inputs {:?} != {:?}",
                op.name(),
                s[0],
                s[1]
            );
        }
        Op::Binary(BinaryOps::IDIV) => {
            ensure!(
                is_int(s[0]) && is_int(s[1]),
                Codegen,
                "IDIV inputs {:?}, {:?} are not ints",
                s[0],
                s[1]
            );
            ensure!(is_int(d), Codegen, "IDIV output dtype {d:?} is not an int");
        }
        Op::Binary(BinaryOps::SHL | BinaryOps::SHR) => {
            ensure!(
                d == s[0],
                Codegen,
                "{} dtype {d:?} != {:?}",
                op.name(),
                s[0]
            );
        }
        Op::Binary(_) => ensure!(
            d == s[0] && s[0] == s[1],
            Codegen,
            "{} dtype mismatch {d:?}, {:?}, {:?}",
            op.name(),
            s[0],
            s[1]
        ),
        Op::Ternary(TernaryOps::WHERE) => {
            let lanes = d.map_or(1, |x| x.count);
            ensure!(
                s[0] == Some(dtypes::bool.vec(lanes)),
                Codegen,
                "WHERE selector dtype {:?} is not bool",
                s[0]
            );
            ensure!(
                d == s[1] && s[1] == s[2],
                Codegen,
                "WHERE choices {d:?}, {:?}, {:?} differ",
                s[1],
                s[2]
            );
        }
        _ => {}
    }
    Ok(())
}
