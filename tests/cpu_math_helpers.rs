//! The CPU renderers' own math against INTERP: the inline float32 `exp2` (`renderer::exp2`, in
//! the C prelude as `rg_exp2f` and as inline IR on LLVM) and CLANG's float MAX helper.
//!
//! - exp2 over a sweep of float32 bit patterns (every 65521st, all exponents) and the edges (NaN,
//!   ±inf, ±0, overflow at 128, the denormal range down to 2^-149, the tie 2^-150 that rounds to
//!   0, huge negative inputs): the edges give INTERP's bits; on the sweep every device is at most
//!   1 ulp from INTERP and differs on no more inputs than libm's `exp2f` (Rust's `f32::exp2`)
//!   does. The inline exp2 matches INTERP on every input of the sweep (pinned: 0 differences).
//! - MAX: a max over pairs of special values (NaN, ±inf, ±0, denormals, equal values), and a
//!   reduce large enough for the CPU reduce opts (8 rows, unroll 4), give INTERP's bits (NaN
//!   matches any NaN): NaN propagates, +0 is above -0.
//!
//! Each case runs on CLANG and LLVM (LLVM skipped, and said so, without libLLVM).

mod tensor_common;

use rawgrad::runtime::builtin::open_device;
use rawgrad::{Result, Tensor};
use tensor_common::on;

fn devices() -> Vec<&'static str> {
    let mut out = vec![];
    for d in ["CLANG", "LLVM"] {
        let _g = on(d);
        match open_device(d) {
            Ok(_) => out.push(d),
            Err(e) => println!("skipped {d}: {e}"),
        }
    }
    out
}

fn exp2_on(xs: &[f32], device: &str) -> Result<Vec<f32>> {
    Tensor::from_slice_on(xs, &[xs.len()], device)?
        .exp2()?
        .to_vec::<f32>()
}

/// Distance in ulps between two floats of one sign class (0 for two NaN).
fn ulps(a: f32, b: f32) -> u64 {
    if a.is_nan() && b.is_nan() {
        return 0;
    }
    if a.is_nan() || b.is_nan() {
        return u64::MAX;
    }
    let key = |x: f32| {
        let u = x.to_bits() as i64;
        if u & 0x8000_0000 != 0 {
            0x8000_0000 - u
        } else {
            u
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// (inputs differing from `want`, largest difference in ulps).
fn compare(got: &[f32], want: &[f32]) -> (usize, u64) {
    let d: Vec<u64> = got.iter().zip(want).map(|(&a, &b)| ulps(a, b)).collect();
    (
        d.iter().filter(|&&u| u > 0).count(),
        d.into_iter().max().unwrap_or(0),
    )
}

const EXP2_EDGES: [f32; 26] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    127.0,
    127.99999,
    128.0,
    129.0,
    1e30,
    f32::INFINITY,
    -126.0,
    -127.5,
    -149.0,
    -149.5,
    -150.0,
    -150.00002,
    -149.99998,
    -151.0,
    -152.0,
    -1e30,
    f32::NEG_INFINITY,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
];

#[test]
fn exp2_edges_give_interps_bits() {
    let mut xs = EXP2_EDGES.to_vec();
    xs.extend([
        f32::NAN,
        -f32::NAN,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
    ]);
    let want = exp2_on(&xs, "INTERP").unwrap();
    for d in devices() {
        let got = exp2_on(&xs, d).unwrap();
        for ((x, g), w) in xs.iter().zip(&got).zip(&want) {
            assert_eq!(ulps(*g, *w), 0, "{d}: exp2({x:e}) = {g:e}, INTERP {w:e}");
        }
    }
}

#[test]
fn exp2_sweep_within_libms_error() {
    let xs: Vec<f32> = (0..=u32::MAX).step_by(65521).map(f32::from_bits).collect();
    let want = exp2_on(&xs, "INTERP").unwrap();
    let libm: Vec<f32> = xs.iter().map(|x| x.exp2()).collect();
    let (libm_n, libm_max) = compare(&libm, &want);
    println!(
        "libm exp2f: {libm_n} of {} differ, max {libm_max} ulp",
        xs.len()
    );
    for d in devices() {
        let got = exp2_on(&xs, d).unwrap();
        let (n, max) = compare(&got, &want);
        println!("{d}: {n} differ, max {max} ulp");
        assert!(
            max <= 1 && n <= libm_n,
            "{d}: {n} differ (libm {libm_n}), max {max}"
        );
        assert_eq!(
            n, 0,
            "{d}: the inline exp2 no longer matches INTERP on the sweep"
        );
    }
}

const SPECIALS: [f32; 12] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1.0,
    -1.0,
    1.5,
    f32::MAX,
    f32::MIN,
    1e-45,
    -1e-45,
];

fn max_last_axis(data: &[f32], shape: &[usize], device: &str) -> Result<Vec<f32>> {
    Tensor::from_slice_on(data, shape, device)?
        .max_axis(-1, false)?
        .to_vec::<f32>()
}

fn assert_same(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(ulps(*g, *w), 0, "{what} [{i}]: {g:e}, INTERP {w:e}");
    }
}

#[test]
fn max_of_special_pairs_gives_interps_bits() {
    let mut data = vec![];
    for a in SPECIALS {
        for b in SPECIALS {
            data.extend([a, b]);
        }
    }
    let n = data.len() / 2;
    let want = max_last_axis(&data, &[n, 2], "INTERP").unwrap();
    assert_eq!(want[3 * 12 + 4].to_bits(), 0, "max(+0, -0) is +0");
    assert_eq!(want[4 * 12 + 4].to_bits(), (-0.0f32).to_bits());
    for d in devices() {
        let got = max_last_axis(&data, &[n, 2], d).unwrap();
        assert_same(&got, &want, &format!("{d} pairs"));
    }
}

#[test]
fn max_reduce_with_specials_gives_interps_bits() {
    // 64 rows of 64: each row holds a few specials among ordinary values (or only zeros of both
    // signs, or equal values), so the unrolled lanes meet them in every position
    let (rows, cols) = (64usize, 64usize);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            match r % 8 {
                0 => {
                    if c % 2 == 0 {
                        0.0
                    } else {
                        -0.0
                    }
                }
                1 => -0.0,
                2 => 3.25,
                _ if (c * 7 + r) % 13 == 0 => SPECIALS[(c + r) % SPECIALS.len()],
                _ => ((i as f32) * 0.618).sin() * 100.0,
            }
        })
        .collect();
    let want = max_last_axis(&data, &[rows, cols], "INTERP").unwrap();
    assert_eq!(want[0].to_bits(), 0);
    assert_eq!(want[1].to_bits(), (-0.0f32).to_bits());
    for d in devices() {
        let got = max_last_axis(&data, &[rows, cols], d).unwrap();
        assert_same(&got, &want, &format!("{d} reduce"));
    }
}
