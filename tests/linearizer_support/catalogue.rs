//! The catalogue of hand-built kernel ASTs the linearizer tests run: elementwise unary, binary
//! and ternary ops, casts and bitcasts, reductions (SUM/MAX over inner, outer, several and all
//! axes), reduce epilogues, a matmul with expanded loads, multi-output and multi-reduce kernels,
//! padded/shrunk/flipped/expanded views, a symbolic shape, 1-element kernels, integer division
//! with negatives and nan/inf inputs.

use super::*;
use rawgrad::dtype::dtypes;
use rawgrad::ops::BinaryOps::*;
use rawgrad::ops::ReduceOps::{MAX, SUM};
use rawgrad::ops::UnaryOps::*;

fn f32() -> DType {
    dtypes::float32
}

pub fn elementwise_add() -> Case {
    let s = st(&[4, 8]);
    let a = ld(1, f32(), s.clone());
    let b = ld(2, f32(), s.clone());
    Case::new("add", vec![store(bin(ADD, a, b), 0, f32(), s)])
}

pub fn unary_chain() -> Case {
    let s = st(&[6, 5]);
    let a = ld(1, f32(), s.clone());
    let sq = bin(MUL, a.clone(), a.clone());
    let one = cst(1.0, f32(), s.clone());
    let pos = bin(ADD, sq, one.clone());
    let e = un(EXP2, bin(MUL, a.clone(), cst(0.5, f32(), s.clone())));
    let l = un(LOG2, pos.clone());
    let r = un(RECIP, un(SQRT, pos));
    let sn = un(SIN, un(NEG, a));
    let out = bin(ADD, bin(ADD, e, l), bin(MUL, r, sn));
    Case::new("unary", vec![store(out, 0, f32(), s)])
}

pub fn ternary_where() -> Case {
    let s = st(&[16]);
    let a = ld(1, f32(), s.clone());
    let b = ld(2, f32(), s.clone());
    let cond = bin(CMPLT, a.clone(), b.clone());
    let two = cst(2.0, f32(), s.clone());
    let out = wher(cond, a, bin(MUL, b, two));
    Case::new("where", vec![store(out, 0, f32(), s)])
}

/// Five outputs of different dtypes from int and float inputs.
pub fn casts() -> Case {
    let s = st(&[3, 7]);
    let i = ld(5, dtypes::int32, s.clone());
    let f = ld(6, f32(), s.clone());
    let h = ld(7, dtypes::float16, s.clone());
    let u8 = ld(8, dtypes::uint8, s.clone());
    let i8 = ld(9, dtypes::int8, s.clone());
    let o0 = bin(ADD, cast(i.clone(), f32()), cast(h.clone(), f32()));
    let o1 = bin(ADD, cast(f.clone(), dtypes::int32), cast(i8, dtypes::int32));
    let o2 = cast(bin(MUL, f.clone(), cast(u8, f32())), dtypes::float16);
    let o3 = cast(
        bin(CMPLT, i, cst(0, dtypes::int32, s.clone())),
        dtypes::int32,
    );
    let o4 = cast(h, dtypes::float64);
    Case::new(
        "casts",
        vec![
            store(o0, 0, f32(), s.clone()),
            store(o1, 1, dtypes::int32, s.clone()),
            store(o2, 2, dtypes::float16, s.clone()),
            store(o3, 3, dtypes::int32, s.clone()),
            store(o4, 4, dtypes::float64, s),
        ],
    )
}

pub fn bitcasts() -> Case {
    let s = st(&[12]);
    let f = ld(1, f32(), s.clone());
    let out = bin(
        ADD,
        bitcast(f, dtypes::int32),
        cst(1, dtypes::int32, s.clone()),
    );
    Case::new("bitcast", vec![store(out, 0, dtypes::int32, s)])
}

pub fn sum_inner() -> Case {
    let a = ld(1, f32(), st(&[8, 16]));
    Case::new(
        "sum_inner",
        vec![store(red(SUM, a, &[1]), 0, f32(), st(&[8, 1]))],
    )
}

pub fn sum_outer() -> Case {
    let a = ld(1, f32(), st(&[16, 8]));
    Case::new(
        "sum_outer",
        vec![store(red(SUM, a, &[0]), 0, f32(), st(&[1, 8]))],
    )
}

pub fn max_multi_axis() -> Case {
    let a = ld(1, f32(), st(&[4, 6, 8]));
    let r = red(MAX, a, &[0, 2]);
    Case::new("max_multi", vec![store(r, 0, f32(), st(&[1, 6, 1]))])
}

pub fn sum_all() -> Case {
    let a = ld(1, dtypes::int32, st(&[64]));
    Case::new(
        "sum_all",
        vec![store(red(SUM, a, &[0]), 0, dtypes::int32, st(&[1]))],
    )
}

pub fn int_max() -> Case {
    let a = ld(2, dtypes::int32, st(&[5, 12]));
    let b = ld(3, dtypes::uint8, st(&[5, 12]));
    Case::new(
        "int_max",
        vec![
            store(red(MAX, a, &[1]), 0, dtypes::int32, st(&[5, 1])),
            store(red(MAX, b, &[1]), 1, dtypes::uint8, st(&[5, 1])),
        ],
    )
}

/// sqrt((sum(a*b, axis=1) + c)^2) with c a late buffer.
pub fn reduce_epilogue() -> Case {
    let s = st(&[6, 10]);
    let a = ld(1, f32(), s.clone());
    let b = ld(2, f32(), s);
    let r = red(SUM, bin(MUL, a, b), &[1]);
    let c = ld(3, f32(), st(&[6, 1]));
    let rc = bin(ADD, r, c);
    let sq = bin(MUL, rc.clone(), rc);
    Case::new(
        "reduce_epilogue",
        vec![store(un(SQRT, sq), 0, f32(), st(&[6, 1]))],
    )
}

/// The views of A (M, K) and B (K, N) expanded to (M, N, K) for a matmul.
pub fn matmul_views(m: i64, n: i64, k: i64) -> (ShapeTracker, ShapeTracker) {
    let va = st(&[m, k])
        .reshape(&sints(&[m, 1, k]))
        .unwrap()
        .expand(&sints(&[m, n, k]))
        .unwrap();
    let vb = st(&[k, n])
        .permute(&[1, 0])
        .unwrap()
        .reshape(&sints(&[1, n, k]))
        .unwrap()
        .expand(&sints(&[m, n, k]))
        .unwrap();
    (va, vb)
}

/// (M, K) @ (K, N) of `dt_in` reduced over K: accumulated in float32 through a CAST, or in
/// `dt_in` itself when `same` (the shapes tensor cores match).
pub fn matmul_of(name: &'static str, dt_in: DType, (m, n, k): (i64, i64, i64), same: bool) -> Case {
    let (va, vb) = matmul_views(m, n, k);
    let mul = bin(MUL, ld(1, dt_in, va), ld(2, dt_in, vb));
    let (src, out) = if same {
        (mul, dt_in)
    } else {
        (cast(mul, f32()), f32())
    };
    let r = red(SUM, src, &[2]);
    Case::new(name, vec![store(r, 0, out, st(&[m, n, 1]))])
}

/// (M, K) @ (K, N) through expanded views, reduced over K.
pub fn matmul() -> Case {
    matmul_of("matmul", f32(), (8, 12, 16), true)
}

pub fn multi_output() -> Case {
    let s = st(&[5, 6]);
    let a = ld(2, f32(), s.clone());
    let b = ld(3, f32(), s.clone());
    Case::new(
        "multi_output",
        vec![
            store(bin(ADD, a.clone(), b.clone()), 0, f32(), s.clone()),
            store(bin(MUL, a, b), 1, f32(), s),
        ],
    )
}

/// sum(a, axis=1) + max(b, axis=1): two reduces in one kernel.
pub fn multi_reduce() -> Case {
    let a = ld(1, f32(), st(&[6, 16]));
    let b = ld(2, f32(), st(&[6, 16]));
    let r = bin(ADD, red(SUM, a, &[1]), red(MAX, b, &[1]));
    Case::new("multi_reduce", vec![store(r, 0, f32(), st(&[6, 1]))])
}

/// A padded input (gated loads) plus a padded constant (gated CONST).
pub fn padded() -> Case {
    let z = |a: i64, b: i64| (Node::from(a), Node::from(b));
    let v = st(&[4, 5]).pad(&[z(1, 2), z(0, 3)]).unwrap();
    let c = st(&[1, 1])
        .expand(&sints(&[4, 5]))
        .unwrap()
        .pad(&[z(1, 2), z(0, 3)])
        .unwrap();
    let out = bin(ADD, ld(1, f32(), v), cst(1.5, f32(), c));
    Case::new("padded", vec![store(out, 0, f32(), st(&[7, 8]))])
}

/// A padded input reduced (the reduce reads gated loads).
pub fn padded_sum() -> Case {
    let z = |a: i64, b: i64| (Node::from(a), Node::from(b));
    let v = st(&[5, 6]).pad(&[z(0, 0), z(2, 1)]).unwrap();
    let r = red(SUM, ld(1, f32(), v), &[1]);
    Case::new("padded_sum", vec![store(r, 0, f32(), st(&[5, 1]))])
}

/// Shrunk, flipped and expanded views.
pub fn movement() -> Case {
    let z = |a: i64, b: i64| (Node::from(a), Node::from(b));
    let shrunk = st(&[9, 10]).shrink(&[z(2, 8), z(1, 9)]).unwrap();
    let flipped = st(&[6, 8])
        .stride(&[-1, 1])
        .unwrap()
        .stride(&[1, -1])
        .unwrap();
    let expanded = st(&[1, 8]).expand(&sints(&[6, 8])).unwrap();
    let out = bin(
        ADD,
        bin(MUL, ld(1, f32(), shrunk), ld(2, f32(), flipped)),
        ld(3, f32(), expanded),
    );
    Case::new("movement", vec![store(out, 0, f32(), st(&[6, 8]))])
}

/// A (i, 4) elementwise kernel with a bound variable, two outputs.
pub fn symbolic() -> Case {
    let i = Node::var("i", 1, 10).unwrap();
    let s = st_sym(&[i.clone(), Node::from(4i64)]);
    let a = ld(2, f32(), s.clone());
    let out0 = bin(ADD, a.clone(), cst(1.0, f32(), s.clone()));
    let out1 = bin(MUL, a.clone(), a);
    Case::new(
        "symbolic",
        vec![store(out0, 0, f32(), s.clone()), store(out1, 1, f32(), s)],
    )
    .with_vars(&[(&i, 5)])
}

/// sum over a symbolic axis: (i, 4) -> (1, 4).
pub fn symbolic_sum() -> Case {
    let i = Node::var("i", 1, 10).unwrap();
    let a = ld(1, f32(), st_sym(&[i.clone(), Node::from(4i64)]));
    let r = red(SUM, a, &[0]);
    Case::new("symbolic_sum", vec![store(r, 0, f32(), st(&[1, 4]))]).with_vars(&[(&i, 7)])
}

/// A symbolic constant: out = a * i.
pub fn symbolic_const() -> Case {
    let i = Node::var("i", 1, 10).unwrap();
    let s = st(&[3, 4]);
    let c = LazyOp::cnst(ConstArg::Var(i.clone()), dtypes::int32, s.clone());
    let out = bin(MUL, ld(1, dtypes::int32, s.clone()), c);
    Case::new("symbolic_const", vec![store(out, 0, dtypes::int32, s)]).with_vars(&[(&i, 3)])
}

pub fn one_element() -> Case {
    let s = st(&[1]);
    let out = bin(MUL, ld(1, f32(), s.clone()), cst(2.0, f32(), s.clone()));
    Case::new("one_element", vec![store(out, 0, f32(), s)])
}

pub fn one_element_reduce() -> Case {
    let a = ld(1, f32(), st(&[1, 1]));
    Case::new(
        "one_element_reduce",
        vec![store(red(SUM, a, &[1]), 0, f32(), st(&[1, 1]))],
    )
}

fn nonzero_divisor(b: usize, i: usize, dt: DType) -> ConstValue {
    let v = default_value(b, i, dt);
    if b == 3 && v.as_i128() == 0 {
        ConstValue::Int(-3)
    } else {
        v
    }
}

/// Integer division and modulo with negative operands (C semantics: truncation toward zero).
pub fn int_divmod() -> Case {
    let s = st(&[29]);
    let a = ld(2, dtypes::int32, s.clone());
    let b = ld(3, dtypes::int32, s.clone());
    Case::new(
        "int_divmod",
        vec![
            store(bin(IDIV, a.clone(), b.clone()), 0, dtypes::int32, s.clone()),
            store(bin(MOD, a, b), 1, dtypes::int32, s),
        ],
    )
    .with_data(nonzero_divisor)
}

fn specials(b: usize, i: usize, dt: DType) -> ConstValue {
    const V: [f64; 8] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.5,
        -2.0,
        3.0e38,
    ];
    if dt.is_float() {
        ConstValue::Float(V[(i * (b + 1) + b) % V.len()])
    } else {
        default_value(b, i, dt)
    }
}

/// nan and inf through add, mul, compare and where.
pub fn nan_inf() -> Case {
    let s = st(&[8, 8]);
    let a = ld(2, f32(), s.clone());
    let b = ld(3, f32(), s.clone());
    let sum = bin(ADD, bin(MUL, a.clone(), b.clone()), a.clone());
    let lt = bin(CMPLT, a.clone(), b.clone());
    let ne = bin(CMPNE, a.clone(), a.clone());
    Case::new(
        "nan_inf",
        vec![
            store(wher(lt, sum, b), 0, f32(), s.clone()),
            store(cast(ne, dtypes::int32), 1, dtypes::int32, s),
        ],
    )
    .with_data(specials)
}

/// The fixture of tinygrad's test_failure_1: a reduce over an expanded axis plus two late loads.
pub fn failure_1() -> Case {
    let v = |shape: &[i64], strides: &[i64]| {
        let view = rawgrad::shape::View::create(
            &sints(shape),
            Some(&sints(strides)),
            Node::from(0i64),
            None,
        )
        .unwrap();
        ShapeTracker::new(vec![view]).unwrap()
    };
    let r = red(SUM, ld(1, f32(), v(&[32, 16, 16], &[16, 1, 0])), &[2]);
    let out = bin(
        ADD,
        bin(ADD, r, ld(2, f32(), v(&[32, 16, 1], &[0, 1, 0]))),
        ld(1, f32(), v(&[32, 16, 1], &[16, 1, 0])),
    );
    Case::new(
        "failure_1",
        vec![store(out, 0, f32(), v(&[32, 16, 1], &[16, 1, 0]))],
    )
}

/// A sum of int8 cast to int32 (the accumulator dtype differs from the input).
pub fn cast_sum() -> Case {
    let a = cast(ld(1, dtypes::int8, st(&[7, 9])), dtypes::int32);
    Case::new(
        "cast_sum",
        vec![store(red(SUM, a, &[0]), 0, dtypes::int32, st(&[1, 9]))],
    )
}

/// Every catalogue case.
pub fn all() -> Vec<Case> {
    vec![
        elementwise_add(),
        unary_chain(),
        ternary_where(),
        casts(),
        bitcasts(),
        sum_inner(),
        sum_outer(),
        max_multi_axis(),
        sum_all(),
        int_max(),
        reduce_epilogue(),
        matmul(),
        multi_output(),
        multi_reduce(),
        padded(),
        padded_sum(),
        movement(),
        symbolic(),
        symbolic_sum(),
        symbolic_const(),
        one_element(),
        one_element_reduce(),
        int_divmod(),
        nan_inf(),
        failure_1(),
        cast_sum(),
    ]
}
