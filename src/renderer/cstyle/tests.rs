//! Unit tests of the C-style renderer pieces.

use super::*;
use crate::codegen::uopgraph::linearize;
use crate::dtype::dtypes;
use crate::renderer::Renderer;

#[test]
fn strip_parens_like_tinygrad() {
    assert_eq!(strip_parens("(a+b)"), "a+b");
    assert_eq!(strip_parens("(a+b)*(c+d)"), "(a+b)*(c+d)");
    assert_eq!(strip_parens("((a+b))"), "(a+b)");
    assert_eq!(strip_parens("a"), "a");
    assert_eq!(strip_parens("(a)+(b)"), "(a)+(b)");
}

fn render(sinks: &[UOp]) -> String {
    let uops = linearize(sinks, None, true).unwrap();
    ClangRenderer::new().render("k", &uops).unwrap()
}

#[test]
fn constants_render_as_c() {
    let r = ClangRenderer::new();
    let mut n = Needs::default();
    let c = |v: ConstValue, d: DType, n: &mut Needs| r.render_const(v, d, n).unwrap();
    assert_eq!(c(ConstValue::Float(1.0), dtypes::float32, &mut n), "1.0f");
    assert_eq!(
        c(ConstValue::Float(1e-5), dtypes::float32, &mut n),
        "1e-05f"
    );
    assert_eq!(
        c(
            ConstValue::Float(f64::NEG_INFINITY),
            dtypes::float32,
            &mut n
        ),
        "-INFINITY"
    );
    assert!(n.math);
    assert_eq!(
        c(ConstValue::Float(0.5), dtypes::float64, &mut n),
        "(double)(0.5)"
    );
    assert_eq!(
        c(ConstValue::Float(f64::NAN), dtypes::float16, &mut n),
        "(half)(NAN)"
    );
    assert_eq!(c(ConstValue::Bool(true), dtypes::bool, &mut n), "1");
    assert_eq!(
        c(ConstValue::Int(-2147483648), dtypes::int32, &mut n),
        "(-2147483647-1)"
    );
    assert_eq!(
        c(ConstValue::Int(u64::MAX as i128), dtypes::uint64, &mut n),
        "(unsigned long)(18446744073709551615ul)"
    );
    assert_eq!(
        c(ConstValue::Int(3), dtypes::int8, &mut n),
        "(signed char)(3)"
    );
    assert_eq!(
        c(ConstValue::Float(2.0), dtypes::float32.vec(2), &mut n),
        "(float2){2.0f,2.0f}"
    );
    assert_eq!(
        c(ConstValue::Float(0.25), dtypes::bfloat16, &mut n),
        "0.25f"
    );
}

#[test]
fn alu_inlining_and_chains() {
    // (a+b+c)*max(a,b): the ADD chain drops inner parentheses, MAX gets its own variable
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let l = |i: usize| {
        UOp::load(
            &UOp::define_global(dtypes::float32, i, false),
            &UOp::cnst(dtypes::int32, 0),
            dtypes::float32,
        )
    };
    let (a, b, c) = (l(1), l(2), l(3));
    let out = a.add(&b).add(&c).mul(a.max(&b));
    let src = render(&[UOp::store(&d0, &UOp::cnst(dtypes::int32, 0), &out)]);
    // float MAX is the helper with the interpreter's NaN and signed-zero rules
    assert!(
        src.contains("float alu0 = rg_fmax_float(val0,val1);"),
        "{src}"
    );
    assert!(
        src.contains("static inline float rg_fmax_float(float a, float b) { return __builtin_islessgreater(a, b) ? (a > b ? a : b) : ((a != a || b != b || a == 0) ? a + b : a); }"),
        "{src}"
    );
    assert!(src.contains("data0[0] = ((val0+val1+val2)*alu0);"), "{src}");
    assert!(
        src.contains("void k_rg(void **bufs, const int *vals, int core, int ncores)"),
        "{src}"
    );
    // no loop to split: core 0 only
    assert!(src.contains("if (core != 0) return;"), "{src}");
}

#[test]
fn float_chains_keep_the_right_operands_parentheses() {
    // a*(b*c) must not become a*b*c, which C evaluates as (a*b)*c; (a*b)*c may; ints may regroup
    let l = |i: usize, d: DType| {
        UOp::load(
            &UOp::define_global(d, i, false),
            &UOp::cnst(dtypes::int32, 0),
            d,
        )
    };
    for (d, right, left) in [
        (dtypes::float32, "(val0*(val1*val2))", "(val0*val1*val2)"),
        (dtypes::int32, "(val0*val1*val2)", "(val0*val1*val2)"),
    ] {
        let (a, b, c) = (l(1, d), l(2, d), l(3, d));
        let d0 = UOp::define_global(d, 0, true);
        let at = UOp::cnst(dtypes::int32, 0);
        let src = render(&[UOp::store(&d0, &at, &a.mul(b.mul(&c)))]);
        assert!(src.contains(&format!("data0[0] = {right};")), "{d}: {src}");
        let src = render(&[UOp::store(&d0, &at, &a.mul(&b).mul(&c))]);
        assert!(src.contains(&format!("data0[0] = {left};")), "{d}: {src}");
    }
}

#[test]
fn split_loop_is_the_outer_global_loop() {
    let d0 = UOp::define_global(dtypes::int32, 0, true);
    let r0 = UOp::range_const(0, 10, 1, 0, false);
    let r1 = UOp::range_const(0, 3, 1, 1, false);
    let st = UOp::store(&d0, &r0.mul(3).add(&r1), &r1);
    let uops = linearize(&[st], None, true).unwrap();
    let at = split_range(&uops).unwrap();
    assert_eq!(uops[at], r0);
    let src = ClangRenderer::new().render("k", &uops).unwrap();
    assert!(src.contains("for (int ridx0 = (int)(((long long)10*core)/ncores); ridx0 < (int)(((long long)10*(core+1))/ncores); ridx0++) {"), "{src}");
    assert!(
        src.contains("for (int ridx1 = 0; ridx1 < 3; ridx1++) {"),
        "{src}"
    );
    // a reduce-only kernel has nothing to split
    let rr = UOp::range_const(0, 10, 2, 0, true);
    let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rr), 0, 0);
    let st = UOp::store(
        &d0,
        &UOp::cnst(dtypes::int32, 0),
        &UOp::phi(&acc, &rr.add(&acc)),
    );
    assert_eq!(split_range(&linearize(&[st], None, true).unwrap()), None);
}

#[test]
fn refusals_are_errors() {
    let r = ClangRenderer::new();
    let uops = linearize(&elementwise(), None, true).unwrap();
    assert!(r.render("not a name", &uops).is_err());
    let s = UOp::special(0, "gidx0", 4);
    let d0 = UOp::define_global(dtypes::int32, 0, true);
    let uops = linearize(&[UOp::store(&d0, &s, &s)], None, true).unwrap();
    let err = r.render("k", &uops).unwrap_err();
    assert!(err.to_string().contains("launch indices"), "{err}");
}

fn elementwise() -> Vec<UOp> {
    let d0 = UOp::define_global(dtypes::float32, 0, true);
    let d1 = UOp::define_global(dtypes::float32, 1, false);
    let r = UOp::range_const(0, 4, 1, 0, false);
    vec![UOp::store(&d0, &r, &UOp::load(&d1, &r, dtypes::float32))]
}

/// data0[4r..4r+4] = data2[r] * data1[4r..4r+4] + data1[4r..4r+4], built lane by lane (what the
/// linearizer makes of an upcast multiply-add).
fn lanewise_axpy() -> Vec<UOp> {
    let f = dtypes::float32;
    let (d0, d1, d2) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
        UOp::define_global(f, 2, false),
    );
    let r = UOp::range_const(0, 8, 1, 0, false);
    let idx = r.mul(4);
    let v = UOp::load(&d1, &idx, f.vec(4));
    let s = UOp::load(&d2, &r, f);
    let lanes = (0..4)
        .map(|i| s.mul(UOp::gep(&v, i, f)).add(UOp::gep(&v, i, f)))
        .collect();
    vec![UOp::store(&d0, &idx, &UOp::vectorize(lanes, f.vec(4)))]
}

/// With the vector ALU fold, the lane-wise multiply-add is one vector expression with a splat of
/// the scalar; without it, lane by lane.
#[test]
fn vector_alu_renders_one_vector_expression() {
    use crate::codegen::renderer::VectorAlu;
    use crate::codegen::uopgraph::linearize_for;
    let uops = linearize_for(&lanewise_axpy(), VectorAlu::C, true).unwrap();
    let src = ClangRenderer::new().render("k", &uops).unwrap();
    assert!(
        src.contains("*((float4*)(data0+alu0)) = (((float4){val0,val0,val0,val0}*val1)+val1);"),
        "{src}"
    );
    let scalar = render(&lanewise_axpy());
    assert!(scalar.contains("(float4){((val0*val1)+val1),"), "{scalar}");
}

/// A vector load read only lane by lane is one scalar load per lane (`cstyle/lane_loads.rs`), at
/// the lane's element; a vector load that some use takes whole stays one vector load.
#[test]
fn lane_only_vector_loads_render_as_scalar_loads() {
    let scalar = render(&lanewise_axpy());
    assert!(!scalar.contains("*((float4*)(data1+"), "{scalar}");
    for (k, at) in ["alu0", "alu0+1", "alu0+2", "alu0+3"].iter().enumerate() {
        let line = format!("float val{} = data1[{at}];", k + 1);
        assert!(scalar.contains(&line), "{line} in {scalar}");
    }
    assert!(scalar.contains("*((float4*)(data0+alu0)) = "), "{scalar}");
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let r = UOp::range_const(0, 8, 1, 0, false);
    let idx = r.mul(4);
    let v = UOp::load(&d1, &idx, f.vec(4));
    let whole = render(&[UOp::store(&d0, &idx, &v)]);
    assert!(
        whole.contains("float4 val0 = *((float4*)(data1+alu0));"),
        "{whole}"
    );
}
