//! The `constant_folder` rule set of tinygrad 0.9.1 ("symbolic 2.0"), written as data: a list of
//! `(UPat, rewrite)` rules that [`crate::codegen::pattern::graph_rewrite`] applies before the
//! toposort.
//!
//! Rule families, in order: arange loop folding (a WHERE over `idx + c*RANGE < const` inside a
//! reduce becomes a closed form, marked with UNMUL); sum collapse (adding a loop-invariant value into
//! an accumulator becomes `value * trip count` after the loop); UNMUL cancellation; MAX of a SPECIAL
//! below a constant; CONST/GEP/CAST/DEFINE_ACC/PHI folds; bool comparisons against constants; WHERE
//! folds; full constant evaluation through [`crate::ops::exec_alu`]; identities (`x+0`, `x*1`,
//! `x*0`, `x//1`, `x-x`, ...); store of a load of the same address; reassociation of constants;
//! gated-store formation; vector CAST/GEP/PHI folds; same-dtype CAST removal; constant gates on
//! loads and stores; NOOPs dropped from the SINK.
//!
//! Deliberate differences from 0.9.1 (each can only prevent a wrong fold): the arange fold also
//! requires `idx` not to depend on the loop, sum collapse refuses the loop variable itself as the
//! "invariant" value, and the same-dtype CAST removal only applies to one-source CASTs.
//!
//! Not guaranteed: folds follow tinygrad, including its known imprecision: `x*0` becomes 0 even if
//! `x` is a loaded NaN, and `(x/a)/b` becomes `x/(a*b)`.

use std::sync::OnceLock;

use crate::codegen::pattern::{const_num_eq, rule, Match, PatternMatcher, RewriteFn, UPat};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{dtypes, ConstValue};
use crate::ops::{exec_alu, BinaryOps, Op, TernaryOps, UnaryOps};
use crate::{Error, Result};

use BinaryOps::*;

/// The shared constant folder (built once).
pub fn constant_folder() -> Result<&'static PatternMatcher> {
    static PM: OnceLock<std::result::Result<PatternMatcher, Error>> = OnceLock::new();
    PM.get_or_init(|| PatternMatcher::new(constant_folder_rules()))
        .as_ref()
        .map_err(|e| e.clone())
}

fn g(m: &Match, name: &str) -> Option<UOp> {
    m.get(name).cloned()
}

/// Python's unary minus on a number (`-True == -1`).
fn neg_cv(v: ConstValue) -> ConstValue {
    match v {
        ConstValue::Bool(b) => ConstValue::Int(-(b as i128)),
        ConstValue::Int(i) => ConstValue::Int(-i),
        ConstValue::Float(f) => ConstValue::Float(-f),
    }
}

/// `exec_alu` on CONST arguments with the dtype of `like` (declines when it has none).
fn fold(op: impl Into<Op>, like: &UOp, args: &[ConstValue]) -> Option<ConstValue> {
    exec_alu(op.into(), like.dtype()?, args).ok()
}

fn var(n: &'static str) -> UPat {
    UPat::var(n)
}
fn cvar(n: &'static str) -> UPat {
    UPat::cvar(n)
}
fn alu(op: impl Into<Op>, src: Vec<UPat>) -> UPat {
    UPat::alu(op, src)
}
fn neg(p: UPat) -> UPat {
    alu(UnaryOps::NEG, vec![p])
}
fn recip(p: UPat) -> UPat {
    alu(UnaryOps::RECIP, vec![p])
}
fn load(src: Vec<UPat>) -> UPat {
    UPat::op(UOps::LOAD).src(src)
}
fn store(src: Vec<UPat>) -> UPat {
    UPat::op(UOps::STORE).src(src)
}

/// `rng` pattern: a RANGE over (loop_start, loop_end).
fn range_pat() -> UPat {
    UPat::op(UOps::RANGE)
        .named("rng")
        .src(vec![var("loop_start"), var("loop_end")])
}

/// The arange fold: `sum over rng in [0, end) of (idx + mval*rng < compval ? multconst : 0)` is
/// `multconst * clamp((idx-compval-mval)//mval + end, 0, end)` (C division; mval < 0).
fn loop_collapse(m: &Match, mval: UOp) -> Option<UOp> {
    let rng = g(m, "rng")?;
    let (_, _, is_reduce) = rng.range_arg()?;
    let (loop_start, loop_end) = (g(m, "loop_start")?, g(m, "loop_end")?);
    let (idx, compval, multconst) = (g(m, "idx")?, g(m, "compval")?, g(m, "multconst")?);
    if !is_reduce || mval.const_value()?.as_f64() >= 0.0 {
        return None;
    }
    if !const_num_eq(loop_start.const_value()?, ConstValue::Int(0)) {
        return None;
    }
    if idx == rng || idx.has_parent(&rng) {
        return None;
    }
    let span = loop_end.sub(&loop_start);
    let q = UOp::alu_auto(BinaryOps::IDIV, vec![idx.sub(&compval).sub(&mval), mval]);
    let comprange = loop_end.min(q.add(&span).max(&loop_start));
    let scaled = comprange.cast_opt(multconst.dtype()).mul(&multconst);
    Some(UOp::new(
        UOps::UNMUL,
        multconst.dtype(),
        vec![scaled, span],
        UArg::None,
    ))
}

/// `acc = acc + v` with `v` loop-invariant: the loop adds `v * trip count`.
fn sum_collapse(m: &Match) -> Option<UOp> {
    let (phi_input, lp) = (g(m, "phi_input")?, g(m, "loop")?);
    let (val1, val2) = (g(m, "val1")?, g(m, "val2")?);
    for (v1, v2) in [(&val1, &val2), (&val2, &val1)] {
        if *v1 != lp && !v1.has_parent(&lp) {
            let (start, end) = (lp.src().first()?, lp.src().get(1)?);
            let ret = v1.mul(end.sub(start).cast_opt(v1.dtype()));
            let phi = UOp::new(
                UOps::PHI,
                phi_input.dtype(),
                vec![phi_input.clone(), v2.clone()],
                UArg::None,
            );
            return Some(phi.add(ret));
        }
    }
    None
}

fn loop_rules() -> Vec<(UPat, RewriteFn)> {
    let add_idx = |rhs: UPat| alu(ADD, vec![var("idx"), rhs]);
    let where_of = |lhs: UPat| {
        alu(
            TernaryOps::WHERE,
            vec![
                alu(CMPLT, vec![lhs, cvar("compval")]),
                cvar("multconst"),
                UPat::konst(0),
            ],
        )
    };
    let acc = UPat::op(UOps::DEFINE_ACC).src_perm(vec![
        UPat::op(UOps::CONST),
        UPat::op(UOps::RANGE).named("loop"),
    ]);
    let vals = UPat::alu_any(ADD).src(vec![var("val1"), var("val2")]);
    let unmul = UPat::op(UOps::UNMUL);
    vec![
        (
            where_of(add_idx(alu(MUL, vec![cvar("mval"), range_pat()]))),
            rule(|m| loop_collapse(m, g(m, "mval")?)),
        ),
        (
            where_of(add_idx(neg(range_pat()))),
            rule(|m| loop_collapse(m, UOp::cnst(dtypes::int32, -1))),
        ),
        (
            UPat::op(UOps::PHI).src(vec![acc.clone().named("phi_input"), vals.clone()]),
            rule(sum_collapse),
        ),
        (
            UPat::op(UOps::PHI).src(vec![
                UPat::op(UOps::GEP).named("phi_input").src(vec![acc]),
                vals,
            ]),
            rule(sum_collapse),
        ),
        (
            alu(
                MUL,
                vec![
                    cvar("c1"),
                    unmul.clone().src_perm(vec![cvar("c2"), var("v")]),
                ],
            ),
            rule(|m| const_num_eq(m.cv("c1")?, m.cv("c2")?).then(|| g(m, "v"))?),
        ),
        (
            unmul
                .clone()
                .src(vec![UPat::konst(0).named("zero"), UPat::any()]),
            rule(|m| g(m, "zero")),
        ),
        (
            UPat::op(UOps::CAST)
                .named("root")
                .src(vec![unmul.named("unmul")]),
            rule(|m| {
                let (root, un) = (g(m, "root")?, g(m, "unmul")?);
                let src = vec![
                    un.src().first()?.cast_opt(root.dtype()),
                    un.src().get(1)?.clone(),
                ];
                Some(UOp::new(UOps::UNMUL, root.dtype(), src, UArg::None))
            }),
        ),
        (
            alu(MAX, vec![cvar("c"), UPat::op(UOps::SPECIAL).named("s")]),
            rule(|m| match g(m, "s")?.arg() {
                UArg::Special { size, .. } => {
                    ((*size - 1) as f64 <= m.cv("c")?.as_f64()).then(|| g(m, "c"))?
                }
                _ => None,
            }),
        ),
    ]
}

fn const_rules() -> Vec<(UPat, RewriteFn)> {
    let root_const = |m: &Match, c: &str| Some(UOp::const_opt(g(m, "root")?.dtype(), m.cv(c)?));
    let acc = UPat::op(UOps::DEFINE_ACC);
    vec![
        (
            UPat::op(UOps::GEP).named("root").src(vec![cvar("c")]),
            rule(move |m| root_const(m, "c")),
        ),
        (
            UPat::op(UOps::CAST).named("root").src_repeat(cvar("c")),
            rule(move |m| root_const(m, "c")),
        ),
        (
            UPat::op(UOps::PHI).src(vec![acc.clone().named("acc"), var("acc")]),
            rule(|m| {
                let a = g(m, "acc")?;
                Some(a.src().first()?.cast_opt(a.dtype()))
            }),
        ),
        (
            UPat::op(UOps::PHI).src(vec![acc.clone().src(vec![UPat::op(UOps::CONST)]), var("x")]),
            rule(|m| g(m, "x")),
        ),
        (
            UPat::op(UOps::PHI).src(vec![UPat::op(UOps::CONST), var("x")]),
            rule(|m| g(m, "x")),
        ),
        (
            acc.named("root").src(vec![UPat::op(UOps::CONST)]),
            rule(|m| {
                let r = g(m, "root")?;
                Some(r.src().first()?.cast_opt(r.dtype()))
            }),
        ),
        (
            alu(
                MAX,
                vec![var("x"), UPat::konst(-2147483648i64).dtype(dtypes::int32)],
            )
            .dtype(dtypes::int32),
            rule(|m| g(m, "x")),
        ),
        (
            alu(
                CMPLT,
                vec![UPat::any(), UPat::konst(false).dtype(dtypes::bool)],
            ),
            rule(|_| Some(UOp::cnst(dtypes::bool, false))),
        ),
        (
            alu(
                CMPLT,
                vec![UPat::konst(true).dtype(dtypes::bool), UPat::any()],
            ),
            rule(|_| Some(UOp::cnst(dtypes::bool, false))),
        ),
        (
            alu(TernaryOps::WHERE, vec![UPat::any(), var("val"), var("val")]),
            rule(|m| g(m, "val")),
        ),
        (
            alu(TernaryOps::WHERE, vec![cvar("gate"), var("c0"), var("c1")]),
            rule(|m| g(m, if m.cv("gate")?.as_bool() { "c0" } else { "c1" })),
        ),
        (
            UPat::op(UOps::ALU)
                .named("root")
                .src_repeat(UPat::op(UOps::CONST)),
            rule(|m| {
                let root = g(m, "root")?;
                let op = root.alu_op()?;
                let args: Option<Vec<ConstValue>> =
                    root.src().iter().map(|s| s.const_value()).collect();
                let v = exec_alu(op, root.dtype()?, &args?).ok()?;
                Some(UOp::const_opt(root.dtype(), v))
            }),
        ),
    ]
}

fn identity_rules() -> Vec<(UPat, RewriteFn)> {
    let x = || var("x");
    let k = UPat::konst;
    let xdt_const = |m: &Match, v: ConstValue| Some(UOp::const_opt(g(m, "x")?.dtype(), v));
    vec![
        (neg(neg(x())), rule(|m| g(m, "x"))),
        (alu(ADD, vec![x(), k(0)]), rule(|m| g(m, "x"))),
        (alu(ADD, vec![x(), neg(k(0))]), rule(|m| g(m, "x"))),
        (alu(MUL, vec![x(), k(1)]), rule(|m| g(m, "x"))),
        (alu(MUL, vec![x(), k(-1)]), rule(|m| Some(g(m, "x")?.neg()))),
        (
            alu(IDIV, vec![x(), x()]),
            rule(move |m| xdt_const(m, ConstValue::Int(1))),
        ),
        (alu(IDIV, vec![x(), k(1)]), rule(|m| g(m, "x"))),
        (
            alu(IDIV, vec![x(), k(-1)]),
            rule(|m| Some(g(m, "x")?.neg())),
        ),
        (
            alu(MUL, vec![x(), recip(x())]),
            rule(move |m| xdt_const(m, ConstValue::Int(1))),
        ),
        (
            alu(MUL, vec![x(), recip(cvar("c"))]),
            rule(|m| {
                let c = g(m, "c")?;
                let r = fold(UnaryOps::RECIP, &c, &[c.const_value()?])?;
                Some(g(m, "x")?.mul(r))
            }),
        ),
        (
            alu(
                MAX,
                vec![
                    x().dtype(dtypes::bool),
                    UPat::konst(false).dtype(dtypes::bool),
                ],
            )
            .dtype(dtypes::bool),
            rule(|m| g(m, "x")),
        ),
        (
            alu(MUL, vec![x(), k(0)]),
            rule(move |m| {
                let special = matches!(m.cv("x"), Some(ConstValue::Float(f)) if !f.is_finite());
                let v = if special {
                    ConstValue::Float(f64::NAN)
                } else {
                    ConstValue::Int(0)
                };
                xdt_const(m, v)
            }),
        ),
        (
            alu(ADD, vec![x(), neg(x())]),
            rule(move |m| xdt_const(m, ConstValue::Int(0))),
        ),
        (
            store(vec![
                var("buf"),
                var("idx"),
                load(vec![var("buf"), var("idx")]),
            ]),
            rule(|_| Some(UOp::noop())),
        ),
    ]
}

fn reassociation_rules() -> Vec<(UPat, RewriteFn)> {
    let x = || var("x");
    vec![
        (
            alu(ADD, vec![alu(ADD, vec![x(), cvar("c1")]), cvar("c2")]),
            rule(|m| {
                let x = g(m, "x")?;
                Some(x.add(fold(ADD, &x, &[m.cv("c1")?, m.cv("c2")?])?))
            }),
        ),
        (
            alu(ADD, vec![alu(ADD, vec![x(), neg(cvar("c1"))]), cvar("c2")]),
            rule(|m| {
                let x = g(m, "x")?;
                Some(x.add(fold(ADD, &x, &[m.cv("c2")?, neg_cv(m.cv("c1")?)])?))
            }),
        ),
        (
            alu(MUL, vec![alu(MUL, vec![x(), cvar("c1")]), cvar("c2")]),
            rule(|m| {
                let x = g(m, "x")?;
                Some(x.mul(fold(MUL, &x, &[m.cv("c1")?, m.cv("c2")?])?))
            }),
        ),
        (
            alu(MOD, vec![x(), UPat::konst(1)]),
            rule(|m| Some(UOp::const_opt(g(m, "x")?.dtype(), 0))),
        ),
        (
            alu(
                ADD,
                vec![
                    alu(MUL, vec![x(), cvar("c0")]),
                    alu(MUL, vec![x(), cvar("c1")]),
                ],
            ),
            rule(|m| {
                let x = g(m, "x")?;
                Some(x.mul(fold(ADD, &x, &[m.cv("c0")?, m.cv("c1")?])?))
            }),
        ),
        (
            alu(IDIV, vec![alu(MUL, vec![x(), cvar("c0")]), cvar("c0")]),
            rule(|m| (!m.cv("c0")?.is_zero()).then(|| g(m, "x"))?),
        ),
        (
            alu(MUL, vec![alu(MUL, vec![x(), var("x2")]), recip(var("x2"))]),
            rule(|m| g(m, "x")),
        ),
        (
            alu(IDIV, vec![alu(IDIV, vec![x(), cvar("c0")]), cvar("c1")]),
            rule(|m| {
                let x = g(m, "x")?;
                Some(x.idiv(fold(MUL, &x, &[m.cv("c0")?, m.cv("c1")?])?))
            }),
        ),
        (
            alu(
                MUL,
                vec![alu(MUL, vec![x(), recip(var("x2"))]), recip(var("x3"))],
            ),
            rule(|m| Some(g(m, "x")?.div(g(m, "x2")?.mul(g(m, "x3")?)))),
        ),
        (
            alu(CMPLT, vec![alu(ADD, vec![cvar("c0"), x()]), cvar("c1")]),
            rule(|m| {
                let x = g(m, "x")?;
                let c = fold(ADD, &x, &[m.cv("c1")?, neg_cv(m.cv("c0")?)])?;
                let c = UOp::const_opt(x.dtype(), c);
                Some(x.lt(c))
            }),
        ),
        (
            alu(ADD, vec![x(), alu(MUL, vec![x(), cvar("c0")])]),
            rule(|m| {
                let x = g(m, "x")?;
                let c1 = match m.cv("c0")? {
                    ConstValue::Float(f) => ConstValue::Float(f + 1.0),
                    v => ConstValue::Int(v.as_i128() + 1),
                };
                Some(x.mul(UOp::const_opt(x.dtype(), c1)))
            }),
        ),
    ]
}

/// STORE of a CAST of the `n` lanes of one vector: store the vector.
fn store_vector_rule(n: usize) -> (UPat, RewriteFn) {
    let geps = (0..n)
        .map(|i| UPat::op(UOps::GEP).arg(UArg::Gep(i)).src(vec![var("val")]))
        .collect();
    (
        store(vec![var("buf"), var("idx"), UPat::op(UOps::CAST).src(geps)]),
        rule(|m| Some(UOp::store(m.get("buf")?, m.get("idx")?, m.get("val")?))),
    )
}

const PHI_NAMES: [&str; 4] = ["v0", "v1", "v2", "v3"];

/// CAST of PHIs of the lanes of one accumulator: one PHI of the CAST.
fn cast_phi_rule(n: usize) -> (UPat, RewriteFn) {
    let phis = (0..n)
        .map(|i| {
            UPat::op(UOps::PHI).src(vec![
                UPat::op(UOps::GEP).arg(UArg::Gep(i)).src(vec![var("val")]),
                var(PHI_NAMES[i]),
            ])
        })
        .collect();
    (
        UPat::op(UOps::CAST).named("root").src(phis),
        rule(move |m| {
            let (root, val) = (g(m, "root")?, g(m, "val")?);
            let vs: Option<Vec<UOp>> = PHI_NAMES[..n].iter().map(|v| g(m, v)).collect();
            let cast = UOp::new(UOps::CAST, val.dtype(), vs?, UArg::None);
            Some(UOp::new(
                UOps::PHI,
                root.dtype(),
                vec![val, cast],
                UArg::None,
            ))
        }),
    )
}

fn memory_rules() -> Vec<(UPat, RewriteFn)> {
    let (buf, idx) = (|| var("buf"), || var("idx"));
    let k = UPat::konst;
    vec![
        (
            store(vec![
                buf(),
                idx(),
                alu(
                    TernaryOps::WHERE,
                    vec![var("gate"), var("alt"), load(vec![buf(), idx()])],
                ),
            ]),
            rule(|m| {
                let (b, i) = (m.get("buf")?, m.get("idx")?);
                Some(UOp::store_gated(b, i, m.get("alt")?, m.get("gate")?))
            }),
        ),
        store_vector_rule(4),
        store_vector_rule(2),
        cast_phi_rule(4),
        cast_phi_rule(2),
        (
            alu(CMPLT, vec![neg(var("x")), cvar("c").dtype(dtypes::int32)]),
            rule(|m| {
                let c = g(m, "c")?;
                let nc = UOp::const_opt(c.dtype(), neg_cv(c.const_value()?));
                Some(nc.lt(g(m, "x")?))
            }),
        ),
        (
            UPat::op(UOps::CAST).named("root"),
            rule(|m| {
                let root = g(m, "root")?;
                let [s] = root.src() else { return None };
                (s.dtype() == root.dtype()).then(|| s.clone())
            }),
        ),
        (
            load(vec![buf(), idx(), k(1), cvar("var")]),
            rule(|m| {
                let dt = g(m, "var")?.dtype()?;
                Some(UOp::load(m.get("buf")?, m.get("idx")?, dt))
            }),
        ),
        (
            load(vec![buf(), idx(), k(1), cvar("var"), var("barrier")]),
            rule(|m| {
                let dt = g(m, "var")?.dtype();
                let src = vec![g(m, "buf")?, g(m, "idx")?, g(m, "barrier")?];
                Some(UOp::new(UOps::LOAD, dt, src, UArg::None))
            }),
        ),
        (
            load(vec![UPat::any(), UPat::any(), k(0), cvar("var")]),
            rule(|m| g(m, "var")),
        ),
        (
            load(vec![
                UPat::any(),
                UPat::any(),
                k(0),
                cvar("var"),
                UPat::any(),
            ]),
            rule(|m| g(m, "var")),
        ),
        (
            store(vec![buf(), idx(), var("val"), k(1)]),
            rule(|m| Some(UOp::store(m.get("buf")?, m.get("idx")?, m.get("val")?))),
        ),
        (
            store(vec![UPat::any(), UPat::any(), UPat::any(), k(0)]),
            rule(|_| Some(UOp::noop())),
        ),
        (
            UPat::op(UOps::SINK).named("root"),
            rule(|m| {
                let root = g(m, "root")?;
                let kept: Vec<UOp> = root
                    .src()
                    .iter()
                    .filter(|x| x.op() != UOps::NOOP)
                    .cloned()
                    .collect();
                (kept.len() != root.src().len())
                    .then(|| UOp::new(UOps::SINK, root.dtype(), kept, root.arg().clone()))
            }),
        ),
    ]
}

/// The rules of `constant_folder`, in tinygrad's order.
pub fn constant_folder_rules() -> Vec<(UPat, RewriteFn)> {
    let mut rules = loop_rules();
    rules.extend(const_rules());
    rules.extend(identity_rules());
    rules.extend(reassociation_rules());
    rules.extend(memory_rules());
    rules
}

#[cfg(test)]
#[path = "constant_folder_tests.rs"]
mod tests;
