//! Fixtures in the style of tinygrad's test_linearizer_failures.py: ASTs and opt lists that broke
//! some backend once (found by fuzzing). Each opt list is applied on the INTERP-like renderer; a
//! list that becomes illegal counts as fixed (as in tinygrad), otherwise the result must equal the
//! reference evaluator. The same ASTs with only their UPCAST/UNROLL/PADTO opts run on CLANG.

mod linearizer_support;

use linearizer_support::*;
use rawgrad::codegen::kernel::{Kernel, Opt, OptOps};
use rawgrad::dtype::{dtypes, DType};
use rawgrad::ops::BinaryOps::*;
use rawgrad::ops::ReduceOps::{MAX, SUM};
use rawgrad::ops::UnaryOps;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::shape::{sints, Node, ShapeTracker, View};
use rawgrad::Error;

use OptOps::*;

fn o(op: OptOps, axis: usize, amt: usize) -> Opt {
    Opt::new(op, axis, amt)
}

type Mask<'a> = Option<&'a [(i64, i64)]>;

/// A View as tinygrad prints it.
fn view(shape: &[i64], strides: &[i64], offset: i64, mask: Mask) -> View {
    let m: Option<Vec<(Node, Node)>> = mask.map(|m| {
        m.iter()
            .map(|&(a, b)| (Node::from(a), Node::from(b)))
            .collect()
    });
    View::create(
        &sints(shape),
        Some(&sints(strides)),
        Node::from(offset),
        m.as_deref(),
    )
    .unwrap()
}

fn sts(views: Vec<View>) -> ShapeTracker {
    ShapeTracker::new(views).unwrap()
}

fn v1(shape: &[i64], strides: &[i64]) -> ShapeTracker {
    sts(vec![view(shape, strides, 0, None)])
}

fn f32() -> DType {
    dtypes::float32
}

/// Apply `opts` on `r`; `Ok(false)` when one is illegal (fixed, as tinygrad counts it).
fn try_lin(case: &Case, r: &dyn Renderer, opts: &[Opt]) -> bool {
    let mut k = Kernel::new(&case.ast, r.opts()).unwrap();
    for opt in opts {
        match k.apply_opt(*opt) {
            Ok(()) => {}
            Err(Error::KernelOpt(_)) => return false,
            Err(e) => panic!("{} {opts:?}: {e}", case.name),
        }
    }
    let p = k
        .to_program(r)
        .unwrap_or_else(|e| panic!("{} {opts:?}: {e}", case.name));
    let got = if r.opts().device == "INTERP" {
        run_interp(case, &p).unwrap()
    } else {
        let Some(cc) = clang() else { return true };
        run_clang(&cc, case, &p).unwrap_or_else(|e| panic!("{}: {e}\n{}", case.name, p.src))
    };
    let want = case.reference();
    assert_outputs(
        case,
        &want,
        &got,
        1e-4,
        &format!("{} {opts:?}", r.opts().device),
    );
    true
}

/// INTERP with all opts (whether they apply must be `expect_applied`), CLANG with the ones it
/// can take (UPCAST, UNROLL, PADTO).
fn fixture(case: Case, opts: &[Opt], expect_applied: bool) {
    let cl: Vec<Opt> = opts
        .iter()
        .copied()
        .filter(|x| matches!(x.op, UPCAST | UNROLL | PADTO))
        .collect();
    fixture2(case, opts, expect_applied, &cl);
}

/// As [`fixture`] with an explicit CLANG opt list (illegal ones skipped).
fn fixture2(case: Case, opts: &[Opt], expect_applied: bool, clang_opts: &[Opt]) {
    let applied = try_lin(&case, &InterpRenderer::new(), opts);
    assert_eq!(applied, expect_applied, "{}: {opts:?} applied", case.name);
    let cr = ClangRenderer::new();
    let mut k = Kernel::new(&case.ast, cr.opts()).unwrap();
    let legal: Vec<Opt> = clang_opts
        .iter()
        .copied()
        .filter(|x| k.apply_opt(*x).is_ok())
        .collect();
    assert!(try_lin(&case, &cr, &legal));
}

#[test]
fn failure_2_max_over_two_views() {
    let st = sts(vec![
        view(
            &[32, 2, 111, 27],
            &[6160, 3080, 28, 1],
            0,
            Some(&[(0, 32), (0, 2), (0, 110), (0, 27)]),
        ),
        view(&[32, 2, 37, 9, 2, 2], &[5994, 2997, 81, 3, 27, 1], 0, None),
    ]);
    let r = red(MAX, ld(1, f32(), st), &[4, 5]);
    let out = v1(&[32, 2, 37, 9, 1, 1], &[666, 333, 9, 1, 0, 0]);
    fixture(
        Case::new("failure_2", vec![store(r, 0, f32(), out)]),
        &[o(LOCAL, 0, 32)],
        true,
    );
}

#[test]
fn failure_3_group_upcast_local() {
    let r = red(
        SUM,
        ld(1, f32(), v1(&[32, 8, 16, 16], &[2048, 256, 16, 1])),
        &[3],
    );
    let out = v1(&[32, 8, 16, 1], &[128, 16, 1, 0]);
    let case = Case::new("failure_3", vec![store(r, 0, f32(), out)]);
    let opts = [
        o(GROUP, 0, 4),
        o(UPCAST, 0, 4),
        o(UPCAST, 0, 2),
        o(UNROLL, 1, 0),
        o(UPCAST, 0, 4),
        o(LOCAL, 0, 2),
        o(LOCAL, 0, 2),
        o(UPCAST, 1, 0),
        o(LOCAL, 0, 32),
    ];
    // the last LOCAL needs 64 KiB of shared memory: refused, as the fixture says it should be
    fixture(case.clone(), &opts, false);
    fixture(case, &opts[..8], true);
}

fn failure_5() -> Case {
    let s = v1(&[2, 1, 4, 1, 3, 1, 4, 1], &[0; 8]);
    let c = |v: f64| cst(v, f32(), s.clone());
    let term = || {
        bin(
            MUL,
            bin(ADD, c(0.1464405059814453), c(1.0)),
            ld(1, f32(), s.clone()),
        )
    };
    let r = red(SUM, bin(ADD, term(), term()), &[0, 2, 4, 6]);
    Case::new("failure_5", vec![store(r, 0, f32(), v1(&[1; 8], &[0; 8]))])
}

#[test]
fn failure_5_unroll_const_reduce() {
    fixture(failure_5(), &[o(UNROLL, 0, 4), o(UNROLL, 0, 0)], true);
}

/// An arange-style masked constant reduce (two views) with an int epilogue.
fn arange_case(name: &'static str, n: i64) -> Case {
    let c = sts(vec![
        view(
            &[n + 1, 2 * n - 1],
            &[0, 0],
            0,
            Some(&[(0, n + 1), (n - 1, 2 * n - 1)]),
        ),
        view(&[n, n], &[1, 2 * n], 0, None),
    ]);
    let r = red(SUM, cst(1, dtypes::int32, c), &[1]);
    let out = bin(ADD, r, cst(-1, dtypes::int32, v1(&[n, 1], &[0, 0])));
    Case::new(
        name,
        vec![store(out, 0, dtypes::int32, v1(&[n, 1], &[1, 0]))],
    )
}

#[test]
fn failure_6_masked_const_reduce() {
    let c = sts(vec![
        view(&[11, 19], &[0, 0], 0, Some(&[(0, 11), (9, 19)])),
        view(&[10, 10], &[1, 20], 0, None),
    ]);
    let r = red(SUM, cst(-1, dtypes::int32, c), &[1]);
    let out = bin(ADD, r, cst(10.0, dtypes::int32, v1(&[10, 1], &[0, 0])));
    let case = Case::new(
        "failure_6",
        vec![store(out, 0, dtypes::int32, v1(&[10, 1], &[1, 0]))],
    );
    fixture(case, &[o(UPCAST, 0, 2), o(UPCAST, 0, 0)], true);
}

#[test]
fn failure_8_deep_unroll() {
    let s = v1(&[1, 1, 4096], &[0, 0, 1]);
    let l = |i: usize| ld(i, f32(), s.clone());
    let sq = bin(MUL, bin(ADD, l(1), l(2)), bin(ADD, l(1), l(2)));
    let r = red(SUM, sq, &[2]);
    let one = v1(&[1, 1, 1], &[0, 0, 0]);
    let e = bin(
        ADD,
        bin(MUL, r, cst(0.000244140625, f32(), one.clone())),
        cst(1e-06, f32(), one.clone()),
    );
    let out = un(UnaryOps::SQRT, un(UnaryOps::RECIP, e));
    let case = Case::new("failure_8", vec![store(out, 0, f32(), one)]);
    // C compilers take minutes on the 256-deep accumulate expression of 4 unrolls (tinygrad's
    // clang failed with "bracket nesting level exceeded"): CLANG gets two
    let u = o(UNROLL, 0, 4);
    fixture2(case, &[u, u, u, u], true, &[u, u]);
}

#[test]
fn failure_16_groups_and_unrolls() {
    let r = red(SUM, ld(1, f32(), v1(&[1, 13, 1024], &[0, 1024, 1])), &[2]);
    let out = bin(
        MUL,
        r,
        cst(0.0009765625, f32(), v1(&[1, 13, 1], &[0, 0, 0])),
    );
    let case = Case::new(
        "failure_16",
        vec![store(out, 0, f32(), v1(&[1, 13, 1], &[0, 1, 0]))],
    );
    let opts = [
        o(GROUP, 0, 4),
        o(UNROLL, 0, 0),
        o(UNROLL, 0, 4),
        o(GROUP, 0, 8),
        o(UNROLL, 0, 4),
        o(UNROLL, 1, 4),
    ];
    fixture(case, &opts, true);
}

#[test]
fn failure_19_negative_strides() {
    let a = ld(
        1,
        f32(),
        sts(vec![view(
            &[2, 1, 4, 4, 9, 7, 3, 3],
            &[0, 0, 36, 9, 0, 0, -3, -1],
            8,
            None,
        )]),
    );
    let b = ld(
        2,
        f32(),
        v1(&[2, 1, 4, 4, 9, 7, 3, 3], &[252, 0, 0, 63, 7, 1, 0, 0]),
    );
    let r = red(SUM, bin(MUL, a, b), &[3]);
    let out = v1(&[2, 1, 4, 1, 9, 7, 3, 3], &[2268, 0, 567, 0, 63, 9, 3, 1]);
    let case = Case::new("failure_19", vec![store(r, 0, f32(), out)]);
    let opts = [
        o(LOCAL, 2, 3),
        o(UPCAST, 1, 2),
        o(UPCAST, 0, 0),
        o(GROUP, 0, 4),
        o(UPCAST, 1, 7),
        o(UPCAST, 2, 3),
        o(UPCAST, 1, 0),
        o(LOCAL, 0, 2),
        o(LOCAL, 0, 3),
    ];
    // the last LOCAL would need 72576 bytes of shared memory: refused (tinygrad counts that as
    // fixed); without it the kernel runs
    fixture(case.clone(), &opts, false);
    fixture(case, &opts[..8], true);
}

#[test]
fn failures_20_to_24_small_views() {
    let out = v1(&[4, 4], &[4, 1]);
    let e = bin(
        MUL,
        ld(1, f32(), v1(&[4, 4], &[0, 1])),
        cst(1.0, f32(), v1(&[4, 4], &[0, 0])),
    );
    fixture(
        Case::new("failure_20", vec![store(e, 0, f32(), out)]),
        &[o(UPCAST, 1, 0), o(UPCAST, 0, 0)],
        true,
    );
    let c = cst(1.0, f32(), v1(&[45, 65], &[0, 0]));
    fixture(
        Case::new(
            "failure_21",
            vec![store(c, 0, f32(), v1(&[45, 65], &[65, 1]))],
        ),
        &[o(PADTO, 0, 32)],
        true,
    );
    let l = ld(1, f32(), v1(&[240, 40, 1, 1], &[1, 240, 0, 0]));
    let opts = [
        o(UPCAST, 1, 4),
        o(LOCAL, 0, 16),
        o(LOCAL, 1, 2),
        o(UPCAST, 3, 2),
    ];
    fixture(
        Case::new(
            "failure_23",
            vec![store(l, 0, f32(), v1(&[240, 40, 1, 1], &[40, 1, 0, 0]))],
        ),
        &opts,
        true,
    );
    let l = ld(1, f32(), v1(&[8, 32, 1, 1], &[1, 8, 0, 0]));
    let opts = [
        o(LOCAL, 1, 4),
        o(UPCAST, 2, 2),
        o(LOCAL, 1, 8),
        o(UPCAST, 2, 0),
        o(UPCAST, 1, 4),
        o(LOCAL, 0, 8),
        o(UPCAST, 1, 0),
        o(UPCAST, 0, 2),
    ];
    let case = Case::new(
        "failure_24",
        vec![store(l, 0, f32(), v1(&[8, 32, 1, 1], &[32, 1, 0, 0]))],
    );
    // UPCAST(1, 4) meets a dim of 2 after the full UPCAST before it: "no longer valid shift"
    fixture(case.clone(), &opts, false);
    fixture(case, &opts[..4], true);
}

#[test]
fn failure_26_arange_opts() {
    let lists = [
        vec![o(UPCAST, 0, 4), o(GROUPTOP, 0, 32), o(UNROLL, 0, 0)],
        vec![o(GROUPTOP, 0, 32), o(UNROLL, 0, 0), o(UPCAST, 0, 4)],
        vec![
            o(UNROLL, 0, 4),
            o(UNROLL, 0, 4),
            o(LOCAL, 0, 16),
            o(UPCAST, 0, 0),
        ],
        vec![
            o(UNROLL, 0, 4),
            o(LOCAL, 0, 4),
            o(UPCAST, 0, 4),
            o(UPCAST, 0, 0),
        ],
        vec![
            o(UNROLL, 0, 4),
            o(LOCAL, 0, 16),
            o(UPCAST, 0, 0),
            o(UNROLL, 0, 4),
        ],
        vec![
            o(LOCAL, 0, 4),
            o(UPCAST, 0, 4),
            o(UNROLL, 0, 4),
            o(UPCAST, 0, 0),
        ],
        vec![
            o(LOCAL, 0, 16),
            o(UPCAST, 0, 0),
            o(UNROLL, 0, 4),
            o(UNROLL, 0, 4),
        ],
        vec![
            o(LOCAL, 0, 16),
            o(UPCAST, 0, 0),
            o(GROUP, 0, 8),
            o(UNROLL, 1, 4),
        ],
        vec![
            o(LOCAL, 0, 16),
            o(GROUP, 0, 16),
            o(UPCAST, 0, 0),
            o(UNROLL, 1, 4),
        ],
        vec![
            o(LOCAL, 0, 16),
            o(GROUP, 0, 16),
            o(UNROLL, 1, 4),
            o(UPCAST, 0, 0),
        ],
        vec![
            o(GROUP, 0, 8),
            o(UNROLL, 1, 4),
            o(LOCAL, 0, 16),
            o(UPCAST, 0, 0),
        ],
    ];
    let case = arange_case("failure_26", 128);
    // the reference: out[i] = i (an arange)
    let want = decode(&case.reference()[0], dtypes::int32);
    assert!(want
        .iter()
        .enumerate()
        .all(|(i, v)| v.as_i128() == i as i128));
    for l in &lists {
        fixture(case.clone(), l, true);
    }
    // failure_25's shape, unoptimized and grouped
    fixture(
        arange_case("failure_25", 256),
        &[o(GROUP, 0, 16), o(UNROLL, 0, 4)],
        true,
    );
}

/// Sanity of the harness: a wrong "kernel" must be caught (the comparison is not vacuous).
#[test]
#[should_panic(expected = "want")]
fn harness_catches_a_wrong_result() {
    let case = Case::new(
        "wrong",
        vec![store(
            bin(
                ADD,
                ld(1, f32(), v1(&[8], &[1])),
                ld(2, f32(), v1(&[8], &[1])),
            ),
            0,
            f32(),
            v1(&[8], &[1]),
        )],
    );
    let other = Case::new(
        "wrong",
        vec![store(
            bin(
                MUL,
                ld(1, f32(), v1(&[8], &[1])),
                ld(2, f32(), v1(&[8], &[1])),
            ),
            0,
            f32(),
            v1(&[8], &[1]),
        )],
    );
    let (_, p) = program(&other, &InterpRenderer::new(), &[]).unwrap();
    let got = run_interp(&case, &p).unwrap();
    assert_outputs(&case, &case.reference(), &got, 1e-6, "INTERP");
}
