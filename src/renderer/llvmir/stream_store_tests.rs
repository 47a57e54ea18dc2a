//! Which stores stream: hand-built linear UOp lists of one output written in loops, each case
//! one rule of the module doc (x86-64 only: elsewhere nothing streams).

use super::*;
use crate::codegen::uops::UOp;
use crate::dtype::{dtypes, DType};
use crate::ops::BinaryOps;

fn int(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

fn mul(a: &UOp, k: i64) -> UOp {
    UOp::alu(BinaryOps::MUL, dtypes::int32, vec![a.clone(), int(k)])
}

fn add(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(BinaryOps::ADD, dtypes::int32, vec![a.clone(), b.clone()])
}

/// How a case's store differs from the streaming one.
#[derive(Clone, Copy, PartialEq)]
enum Store {
    Plain,
    Gated,
    Local,
}

/// `out[idx(r)] = in[idx(r)]` over one loop of `trips` (a `DEFINE_VAR` bound when `None`), each
/// a `lanes`-wide vector of `elem`; `idx` gets the loop counter. The list and its store.
fn one_loop(
    trips: Option<i64>,
    elem: DType,
    lanes: u16,
    store: Store,
    idx: impl Fn(&UOp) -> UOp,
) -> (Vec<UOp>, UOp) {
    let out = match store {
        Store::Local => UOp::define_local(elem, "temp", 1 << 20),
        _ => UOp::define_global(elem, 0, true),
    };
    let inp = UOp::define_global(elem, 1, false);
    let end = match trips {
        Some(t) => int(t),
        None => UOp::define_var("n", 1, 1 << 30),
    };
    let r = UOp::range(int(0), end.clone(), 0, 0, false);
    let i = idx(&r);
    let v = UOp::load(&inp, &i, elem.vec(lanes));
    let st = match store {
        Store::Gated => {
            let gate = UOp::alu(BinaryOps::CMPLT, dtypes::bool, vec![r.clone(), int(7)]);
            UOp::store_gated(&out, &i, &v, &gate)
        }
        _ => UOp::store(&out, &i, &v),
    };
    let list = vec![
        out,
        inp,
        end,
        r.clone(),
        i,
        v,
        st.clone(),
        UOp::endrange(&r),
    ];
    (list, st)
}

fn chosen(list: &[UOp], store: &UOp) -> bool {
    streaming_stores(list).contains_key(store)
}

/// 2^21 float4 stores are exactly the limit (32 MiB).
const AT_LIMIT: i64 = MIN_STREAM_BYTES / 16;

#[test]
fn a_contiguous_float4_output_of_the_limit_streams() {
    let (list, st) = one_loop(Some(AT_LIMIT), dtypes::float32, 4, Store::Plain, |r| {
        mul(r, 4)
    });
    assert_eq!(chosen(&list, &st), cfg!(target_arch = "x86_64"));
    assert_eq!(MIN_STREAM_BYTES, 32 << 20);
}

#[test]
fn smaller_strided_gated_local_or_non_float4_stores_do_not() {
    let f32s = dtypes::float32;
    let cases = [
        // one store short of the limit
        one_loop(Some(AT_LIMIT - 1), f32s, 4, Store::Plain, |r| mul(r, 4)),
        // every other float4: partial cache lines
        one_loop(Some(AT_LIMIT), f32s, 4, Store::Plain, |r| mul(r, 8)),
        // a loop bound known only at run time
        one_loop(None, f32s, 4, Store::Plain, |r| mul(r, 4)),
        one_loop(Some(AT_LIMIT), f32s, 4, Store::Gated, |r| mul(r, 4)),
        one_loop(Some(AT_LIMIT), f32s, 4, Store::Local, |r| mul(r, 4)),
        one_loop(Some(2 * AT_LIMIT), f32s, 2, Store::Plain, |r| mul(r, 2)),
        one_loop(Some(4 * AT_LIMIT), f32s, 1, Store::Plain, |r| r.clone()),
        one_loop(Some(2 * AT_LIMIT), dtypes::float16, 4, Store::Plain, |r| {
            mul(r, 4)
        }),
        one_loop(Some(AT_LIMIT), dtypes::int32, 4, Store::Plain, |r| {
            mul(r, 4)
        }),
    ];
    for (k, (list, st)) in cases.iter().enumerate() {
        assert!(!chosen(list, st), "case {k}");
    }
}

/// W10's normalization: 8192 rows of 256 float4s, the row loop outside the float4 loop.
#[test]
fn the_trips_of_every_enclosing_loop_count() {
    let out = UOp::define_global(dtypes::float32, 0, true);
    let inp = UOp::define_global(dtypes::float32, 1, false);
    let build = |rows: i64| {
        let r0 = UOp::range_const(0, rows, 0, 0, false);
        let r1 = UOp::range_const(0, 256, 1, 1, false);
        let i = add(&mul(&r0, 1024), &mul(&r1, 4));
        let v = UOp::load(&inp, &i, dtypes::float32.vec(4));
        let st = UOp::store(&out, &i, &v);
        let list = vec![
            out.clone(),
            inp.clone(),
            r0.clone(),
            r1.clone(),
            i,
            v,
            st.clone(),
            UOp::endrange(&r1),
            UOp::endrange(&r0),
        ];
        (list, st)
    };
    let (list, st) = build(8192);
    assert_eq!(chosen(&list, &st), cfg!(target_arch = "x86_64"));
    let (list, st) = build(8191);
    assert!(!chosen(&list, &st));
}
