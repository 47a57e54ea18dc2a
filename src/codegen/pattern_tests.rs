//! Pattern matcher semantics (cases from tinygrad 0.9.1 test_pattern_matcher.py and the
//! TestGraphRewrite cases of test_uop_graph.py).

use super::*;
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{dtypes, ConstValue};
use crate::ops::{BinaryOps, TernaryOps, UnaryOps};

fn pm(rules: Vec<(UPat, RewriteFn)>) -> PatternMatcher {
    PatternMatcher::new(rules).unwrap()
}

fn ident() -> RewriteFn {
    rule(|m| m.get("x").cloned())
}

fn cf(v: f64) -> UOp {
    UOp::cnst(dtypes::float32, v)
}

#[test]
fn simple_match_and_dtype() {
    let m = pm(vec![(UPat::cvar("x").dtype(dtypes::float32), ident())]);
    let c1 = cf(1.0);
    let c2 = UOp::cnst(dtypes::int32, 1);
    assert_eq!(m.rewrite(&c1), Some(c1.clone()));
    assert_eq!(m.rewrite(&c2), None);
    assert_eq!(m.rewrite(&UOp::cnst(dtypes::float64, 1.0)), None);
    let m = pm(vec![(
        UPat::cvar("x").dtypes(vec![dtypes::float32, dtypes::float64]),
        ident(),
    )]);
    assert!(m.rewrite(&UOp::cnst(dtypes::float64, 1.0)).is_some());
    assert!(m.rewrite(&UOp::cnst(dtypes::float16, 1.0)).is_none());
    assert!(m.rewrite(&UOp::cnst(dtypes::int32, 1)).is_none());
}

#[test]
fn op_sets() {
    let m = pm(vec![(
        UPat::ops(&[UOps::CONST, UOps::CAST]).named("x"),
        ident(),
    )]);
    let c1 = UOp::cnst(dtypes::bool, false);
    let c2 = c1.cast(dtypes::int32);
    let c4 = UOp::alu(BinaryOps::ADD, dtypes::float32, vec![cf(1.0), cf(1.0)]);
    assert_eq!(m.rewrite(&c1), Some(c1.clone()));
    assert_eq!(m.rewrite(&c2), Some(c2.clone()));
    assert_eq!(m.rewrite(&c4), None);
}

#[test]
fn args_compare_as_python_numbers() {
    let m = pm(vec![
        (UPat::konst(0).named("x"), ident()),
        (UPat::konst(false).named("x"), ident()),
        (UPat::alu_any(BinaryOps::MAX).named("x"), ident()),
    ]);
    let c1 = cf(0.0);
    let c2 = UOp::cnst(dtypes::bool, false);
    let c3 = UOp::alu(
        BinaryOps::MAX,
        dtypes::float32,
        vec![c1.clone(), c1.clone()],
    );
    let c4 = UOp::alu(
        BinaryOps::MUL,
        dtypes::float32,
        vec![c1.clone(), c1.clone()],
    );
    assert_eq!(m.rewrite(&c1), Some(c1.clone()));
    assert_eq!(m.rewrite(&c2), Some(c2.clone()));
    assert_eq!(m.rewrite(&c3), Some(c3.clone()));
    assert_eq!(m.rewrite(&c4), None);
    assert_eq!(m.rewrite(&UOp::cnst(dtypes::int32, -1)), None);
    // -0.0 == 0 in Python too
    assert!(m.rewrite(&cf(-0.0)).is_some());
}

#[test]
fn arg_sets() {
    let c = |v: i64| UOp::cnst(dtypes::int32, v);
    let m = pm(vec![(
        UPat::alu_any(BinaryOps::MUL).named("x").src(vec![
            UPat::op(UOps::CONST).args(vec![
                UArg::Const(ConstValue::Int(-1)),
                UArg::Const(ConstValue::Int(1)),
            ]),
            UPat::konst(2),
        ]),
        ident(),
    )]);
    let mul = |a, b| UOp::alu(BinaryOps::MUL, dtypes::int32, vec![a, b]);
    assert!(m.rewrite(&mul(c(1), c(2))).is_some());
    assert!(m.rewrite(&mul(c(2), c(2))).is_none());
    assert!(m.rewrite(&mul(c(-1), c(2))).is_some());
}

#[test]
fn duplicate_names_bind_the_same_node() {
    let m = pm(vec![(
        UPat::op(UOps::ALU)
            .named("x")
            .src(vec![UPat::cvar("y"), UPat::cvar("y")]),
        ident(),
    )]);
    let y1 = cf(1.0);
    let y2 = cf(2.0);
    let add =
        |a: &UOp, b: &UOp| UOp::alu(BinaryOps::ADD, dtypes::float32, vec![a.clone(), b.clone()]);
    assert!(m.rewrite(&add(&y1, &y1)).is_some());
    assert!(m.rewrite(&add(&y1, &y2)).is_none());
}

#[test]
fn tuple_permutation_and_repeat_sources() {
    let (c1, c2) = (cf(1.0), cf(2.0));
    let add =
        |a: &UOp, b: &UOp| UOp::alu(BinaryOps::ADD, dtypes::float32, vec![a.clone(), b.clone()]);
    let c3 = add(&c1, &c2);
    let tuple = pm(vec![(
        UPat::op(UOps::ALU)
            .named("x")
            .src(vec![UPat::op(UOps::CONST), UPat::op(UOps::ALU)]),
        ident(),
    )]);
    let (c4, c5) = (add(&c1, &c3), add(&c3, &c1));
    assert!(tuple.rewrite(&c3).is_none());
    assert!(tuple.rewrite(&c4).is_some());
    assert!(tuple.rewrite(&c5).is_none());
    let perm = pm(vec![(
        UPat::op(UOps::ALU)
            .named("x")
            .src_perm(vec![UPat::op(UOps::CONST), UPat::op(UOps::ALU)]),
        ident(),
    )]);
    let (p4, p5) = (add(&c3, &c2), add(&c2, &c3));
    assert!(perm.rewrite(&c3).is_none());
    assert!(perm.rewrite(&p4).is_some());
    assert!(perm.rewrite(&p5).is_some());
    assert!(perm.rewrite(&add(&c3, &p4)).is_none());
    let rep = pm(vec![(
        UPat::op(UOps::ALU)
            .named("x")
            .src_repeat(UPat::op(UOps::CONST)),
        ident(),
    )]);
    assert!(rep.rewrite(&c3).is_some());
    assert!(rep.rewrite(&add(&c2, &c3)).is_none());
}

/// The source pre-filter (`SrcNeed`) skips only rules that cannot match: a keyed constant
/// matches any numerically equal constant source (`-0.0`, `False`, `0`), an ALU source only by
/// its op, and a repeated pattern matches a node without sources.
#[test]
fn source_prefilter_keeps_every_possible_match() {
    let add =
        |a: &UOp, b: &UOp| UOp::alu(BinaryOps::ADD, dtypes::float32, vec![a.clone(), b.clone()]);
    let x = UOp::define_var("x", 0, 9).cast(dtypes::float32);
    let zero_rule = pm(vec![(
        UPat::alu(BinaryOps::ADD, vec![UPat::var("x"), UPat::konst(0)]),
        ident(),
    )]);
    for z in [
        cf(0.0),
        cf(-0.0),
        UOp::cnst(dtypes::int32, 0),
        UOp::cnst(dtypes::bool, false),
    ] {
        assert_eq!(zero_rule.rewrite(&add(&x, &z)), Some(x.clone()), "{z:?}");
        assert_eq!(zero_rule.rewrite(&add(&z, &x)), Some(x.clone()), "{z:?}");
    }
    for nz in [
        cf(1.0),
        cf(f64::NAN),
        cf(1e-300),
        UOp::cnst(dtypes::int32, -1),
    ] {
        assert_eq!(zero_rule.rewrite(&add(&x, &nz)), None, "{nz:?}");
    }
    let one_rule = pm(vec![(
        UPat::alu(BinaryOps::MUL, vec![UPat::var("x"), UPat::konst(1.0)]),
        ident(),
    )]);
    let mul =
        |a: &UOp, b: &UOp| UOp::alu(BinaryOps::MUL, dtypes::float32, vec![a.clone(), b.clone()]);
    assert_eq!(
        one_rule.rewrite(&mul(&x, &UOp::cnst(dtypes::bool, true))),
        Some(x.clone())
    );
    assert_eq!(
        one_rule.rewrite(&mul(&x, &UOp::cnst(dtypes::int32, 1))),
        Some(x.clone())
    );
    assert_eq!(one_rule.rewrite(&mul(&x, &cf(2.0))), None);
    // an ALU source pattern needs that ALU op among the sources
    let neg_rule = pm(vec![(
        UPat::alu(
            BinaryOps::ADD,
            vec![UPat::var("x"), UPat::alu(UnaryOps::NEG, vec![UPat::any()])],
        ),
        ident(),
    )]);
    let n = x.neg();
    assert_eq!(neg_rule.rewrite(&add(&n, &x)), Some(x.clone()));
    assert_eq!(neg_rule.rewrite(&add(&x, &x.recip())), None);
    // a repeated source pattern: every source has its op, and no source at all matches
    let rep = pm(vec![(
        UPat::ops(&[UOps::SINK, UOps::ALU])
            .named("x")
            .src_repeat(UPat::op(UOps::CONST)),
        ident(),
    )]);
    let empty = UOp::sink(vec![]);
    assert_eq!(rep.rewrite(&empty), Some(empty.clone()));
    assert!(rep.rewrite(&add(&cf(1.0), &cf(2.0))).is_some());
    assert!(rep.rewrite(&add(&cf(1.0), &x)).is_none());
}

#[test]
fn allow_len() {
    let m = pm(vec![(
        UPat::op(UOps::ALU)
            .named("x")
            .src(vec![UPat::op(UOps::CONST)])
            .allow_len(&[3]),
        ident(),
    )]);
    let (c1, c2, c3) = (cf(1.0), cf(2.0), cf(3.0));
    let neg = UOp::alu(UnaryOps::NEG, dtypes::float32, vec![c1.clone()]);
    let add = UOp::alu(
        BinaryOps::ADD,
        dtypes::float32,
        vec![c1.clone(), c2.clone()],
    );
    let mulacc = UOp::alu(TernaryOps::MULACC, dtypes::float32, vec![c1, c2, c3]);
    assert!(m.rewrite(&neg).is_some());
    assert!(m.rewrite(&add).is_none());
    assert!(m.rewrite(&mulacc).is_some());
}

#[test]
fn declining_rule_lets_the_next_one_try() {
    let m = pm(vec![
        (UPat::cvar("x"), rule(|_| None)),
        (UPat::cvar("x"), rule(|_| Some(UOp::cnst(dtypes::int32, 7)))),
    ]);
    assert_eq!(m.rewrite(&cf(1.0)), Some(UOp::cnst(dtypes::int32, 7)));
}

/// An ALU node tries the rules for its ALU op, then the arg-agnostic ALU rules, each in list
/// order (through the per-ALU-op table, and through the arg index for an ALU op without a key
/// bit of its own).
#[test]
fn alu_rules_are_tried_specific_first_in_list_order() {
    use std::sync::Mutex;
    let tried = Arc::new(Mutex::new(Vec::new()));
    let log = |i: usize| {
        let tried = tried.clone();
        rule(move |_| {
            tried.lock().unwrap().push(i);
            None
        })
    };
    let sum = UArg::Alu(Op::Reduce(crate::ops::ReduceOps::SUM));
    let m = pm(vec![
        (UPat::op(UOps::ALU), log(0)),
        (UPat::alu_any(BinaryOps::ADD), log(1)),
        (UPat::alu_any(BinaryOps::MUL), log(2)),
        (UPat::op(UOps::ALU), log(3)),
        (UPat::alu_any(BinaryOps::ADD), log(4)),
        (UPat::op(UOps::ALU).arg(sum.clone()), log(5)),
        (UPat::op(UOps::ALU), log(6)),
    ]);
    let node = |arg: UArg| UOp::new(UOps::ALU, Some(dtypes::float32), [cf(1.0), cf(2.0)], arg);
    let cases = [
        (UArg::Alu(BinaryOps::ADD.into()), vec![1, 4, 0, 3, 6]),
        (UArg::Alu(BinaryOps::MUL.into()), vec![2, 0, 3, 6]),
        (UArg::Alu(BinaryOps::MAX.into()), vec![0, 3, 6]),
        (sum, vec![5, 0, 3, 6]),
    ];
    for (arg, want) in cases {
        tried.lock().unwrap().clear();
        assert_eq!(m.rewrite(&node(arg.clone())), None);
        assert_eq!(*tried.lock().unwrap(), want, "{arg:?}");
    }
}

#[test]
fn rule_without_op_is_an_error() {
    assert!(PatternMatcher::new(vec![(UPat::var("x"), ident())]).is_err());
}

/// The `simple_pm` of test_uop_graph.py.
fn simple_pm() -> PatternMatcher {
    let fsum = |a: ConstValue, b: ConstValue| a.as_f64() + b.as_f64();
    pm(vec![
        (
            UPat::cvar("x").dtype(dtypes::int32),
            rule(|_| Some(cf(1.0).add(cf(2.0)))),
        ),
        (
            UPat::alu(BinaryOps::ADD, vec![UPat::cvar("x"), UPat::cvar("y")]),
            rule(move |m| Some(cf(fsum(m.cv("x")?, m.cv("y")?)))),
        ),
        (
            UPat::alu(
                BinaryOps::MUL,
                vec![
                    UPat::alu(BinaryOps::MUL, vec![UPat::cvar("x"), UPat::cvar("y")]),
                    UPat::cvar("z"),
                ],
            ),
            rule(|m| {
                let p = m.cv("x")?.as_f64() * m.cv("y")?.as_f64() * m.cv("z")?.as_f64();
                Some(cf(p))
            }),
        ),
        (
            UPat::alu(
                BinaryOps::ADD,
                vec![
                    UPat::alu(BinaryOps::ADD, vec![UPat::var("x"), UPat::cvar("c1")]),
                    UPat::cvar("c2"),
                ],
            ),
            rule(move |m| {
                let x = m.get("x")?;
                Some(x.add(UOp::const_opt(x.dtype(), fsum(m.cv("c1")?, m.cv("c2")?))))
            }),
        ),
    ])
}

fn rewrite_const(u: &UOp) -> f64 {
    let out = graph_rewrite(u, &simple_pm()).unwrap();
    assert_eq!(out.op(), UOps::CONST, "{out:?}");
    out.const_value().unwrap().as_f64()
}

#[test]
fn graph_rewrite_dedups() {
    let v1 = UOp::new(UOps::DEFINE_VAR, Some(dtypes::float32), vec![], UArg::None);
    let v2 = UOp::new(UOps::DEFINE_VAR, Some(dtypes::float32), vec![], UArg::None);
    let out = graph_rewrite(&v1.add(&v2), &PatternMatcher::default()).unwrap();
    assert!(out.src()[0].ptr_eq(&out.src()[1]));
}

#[test]
fn graph_rewrite_folds_bottom_up_and_reruns_results() {
    let (c1, c2, c3, c4) = (cf(1.0), cf(2.0), cf(3.0), cf(4.0));
    assert_eq!(rewrite_const(&c1.add(&c2)), 3.0);
    assert_eq!(rewrite_const(&c1.mul(&c2).mul(c3.add(&c3))), 12.0);
    assert_eq!(rewrite_const(&c1.add(&c2).add(&c3)), 6.0);
    assert_eq!(rewrite_const(&c1.add(&c2).add(&c3).add(&c4)), 10.0);
    assert_eq!(rewrite_const(&c1.add(&c2).add(c1.add(&c3))), 7.0);
    // the int const becomes 1.0+2.0, which is rewritten again to 3.0
    assert_eq!(rewrite_const(&UOp::cnst(dtypes::int32, 4)), 3.0);
    let v = UOp::new(UOps::DEFINE_VAR, Some(dtypes::float32), vec![], UArg::None);
    let out = graph_rewrite(&v.add(&c1).add(&c2), &simple_pm()).unwrap();
    assert_eq!(out.op(), UOps::ALU);
    assert_eq!(out.src()[0].op(), UOps::DEFINE_VAR);
    assert_eq!(out.src()[1].const_value(), Some(ConstValue::Float(3.0)));
}

#[test]
fn graph_rewrite_reports_nontermination() {
    // x -> x+0 -> x+0+0 ... never settles
    let m = pm(vec![(
        UPat::op(UOps::DEFINE_VAR).named("x"),
        rule(|m| Some(m.get("x")?.add(0))),
    )]);
    let v = UOp::define_var("n", 0, 9);
    assert!(graph_rewrite(&v, &m).is_err());
}

#[test]
fn graph_rewrite_handles_wide_graphs() {
    let v = UOp::define_var("n", 0, 9);
    let roots: Vec<UOp> = (0..100_000).map(|i| v.add(i)).collect();
    let sink = UOp::sink(roots);
    let out = graph_rewrite(&sink, &PatternMatcher::default()).unwrap();
    assert_eq!(out.src().len(), 100_000);
}

#[test]
fn graph_rewrite_handles_deep_chains() {
    let mut x = UOp::define_var("n", 0, 9);
    for _ in 0..20_000 {
        x = x.add(1);
    }
    let out = graph_rewrite(&x, &PatternMatcher::default()).unwrap();
    assert_eq!(out, x);
}

#[test]
fn graph_rewrite_merges_separately_built_equal_subgraphs() {
    // two structurally equal chains built node by node (no shared handles; on two threads, so
    // the interning of UOp::new does not make them one): one result, and the same result as
    // rewriting one chain alone
    let build = || {
        let v = UOp::define_var("n", 0, 9);
        v.mul(4).add(v.idiv(2)).add(1)
    };
    let (a, b) = (build(), std::thread::spawn(build).join().unwrap());
    assert!(!a.ptr_eq(&b));
    let out = graph_rewrite(&UOp::sink(vec![a.clone(), b]), &simple_pm()).unwrap();
    assert!(out.src()[0].ptr_eq(&out.src()[1]));
    assert_eq!(out.src()[0], graph_rewrite(&a, &simple_pm()).unwrap());
}

#[test]
fn graph_rewrite_rule_result_equal_to_a_rewritten_node_is_that_node() {
    // x*1 -> x: the result is the very node that the other root rewrote to
    let m = pm(vec![(
        UPat::alu(BinaryOps::MUL, vec![UPat::var("x"), UPat::konst(1)]),
        rule(|m| m.get("x").cloned()),
    )]);
    let build = || UOp::define_var("n", 0, 9).add(3);
    let sink = UOp::sink(vec![build(), build().mul(1)]);
    let out = graph_rewrite(&sink, &m).unwrap();
    assert!(out.src()[0].ptr_eq(&out.src()[1]), "{out:?}");
    assert_eq!(out.src()[0].op(), UOps::ALU);
}

#[test]
fn graph_rewrite_matches_a_shared_node_once() {
    // a diamond: `x` is a source of both roots (and twice of one of them); the rules see each
    // distinct node once
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let m = pm(vec![(
        UPat::alu_any(BinaryOps::ADD),
        rule(move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
            None
        }),
    )]);
    let v = UOp::define_var("n", 0, 9);
    let x = v.add(3);
    let sink = UOp::sink(vec![x.mul(2), x.mul(&x)]);
    let out = graph_rewrite(&sink, &m).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // nothing changed: the very same graph comes back
    assert!(out.ptr_eq(&sink));
}

/// Pass after pass on one thread reuses pooled address maps: a graph dropped after its pass and a
/// different graph built next (its nodes possibly at the freed addresses) is still rewritten from
/// its own nodes, on this thread and on others at once.
#[test]
fn graph_rewrite_after_dropped_graphs_and_across_threads() {
    let run = |seed: usize| {
        for round in 0..50usize {
            let k = (seed * 1000 + round) as f64;
            // a chain ((k + 1) + 2) + ... folds to one constant
            let mut g = cf(k);
            for i in 1..=(round % 7 + 1) {
                g = g.add(cf(i as f64));
            }
            let want = k + ((round % 7 + 1) * (round % 7 + 2) / 2) as f64;
            assert_eq!(rewrite_const(&g), want, "round {round}");
            drop(g);
            // a different graph, built after the first one's nodes are freed
            let h = cf(k).mul(cf(2.0)).mul(cf(3.0));
            assert_eq!(rewrite_const(&h), 6.0 * k, "round {round}");
        }
    };
    let threads: Vec<_> = (1..4).map(|t| std::thread::spawn(move || run(t))).collect();
    run(0);
    for t in threads {
        t.join().unwrap();
    }
}

/// More bindings than `Binds` keeps in place: the later ones spill, are found by name, a
/// repeated name beyond the inline ones still must see the same node, and a failed attempt
/// forgets its spilled bindings.
#[test]
fn many_bindings_spill_and_unwind() {
    const NAMES: [&str; 11] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
    let leaves: Vec<UOp> = (0..11).map(|i| cf(i as f64)).collect();
    let tuple = |names: &[&'static str]| {
        UPat::op(UOps::SINK).src(names.iter().map(|&n| UPat::var(n)).collect())
    };
    let all = UOp::sink(leaves.clone());
    let m = tuple(&NAMES).matches(&all).unwrap();
    for (i, n) in NAMES.iter().enumerate() {
        assert_eq!(m.get(n), Some(&leaves[i]), "{n}");
    }
    // the last name repeats the first: the sources must agree there
    let mut names = NAMES;
    names[10] = "a";
    let mut same = leaves.clone();
    same[10] = leaves[0].clone();
    assert!(tuple(&names).matches(&UOp::sink(same)).is_some());
    assert!(tuple(&names).matches(&UOp::sink(leaves.clone())).is_none());
    // a permutation whose first order fails after spilling retries from a clean state
    let nine = tuple(&NAMES[..9]);
    let sevens = UOp::sink(vec![cf(7.0); 9]);
    let all_sevens =
        UPat::op(UOps::SINK).src_repeat(UPat::op(UOps::CONST).arg(UArg::Const(7.0.into())));
    let node = UOp::sink(vec![sevens, UOp::sink(leaves[..9].to_vec())]);
    let got = UPat::op(UOps::SINK)
        .src_perm(vec![nine, all_sevens])
        .matches(&node)
        .unwrap();
    assert_eq!(got.get("i"), Some(&leaves[8]));
    assert_eq!(got.get("a"), Some(&leaves[0]));
}
