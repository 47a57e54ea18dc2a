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
//! - CLANG asks gcc for 512-bit vectors in a kernel that calls `rg_exp2f` (a pragma for gcc on
//!   x86-64 only; `CPU_WIDE=0` drops it) and in no other; a softmax over rows with NaN, ±inf and
//!   ±0 gives unoptimized INTERP's bits either way.
//!
//! Each case runs on CLANG and LLVM (LLVM skipped, and said so, without libLLVM).

mod tensor_common;

use rawgrad::helpers::Context;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::runtime::builtin::open_device;
use rawgrad::{Result, Tensor};
use tensor_common::{asts, on, rendered};

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

const WIDE: &str = "#pragma GCC target(\"prefer-vector-width=512\")";

/// 64 rows of 1024: W6's softmax at a smaller height (the same opts per row), with NaN, ±inf
/// and ±0 in some rows, the rest spread over [-40, 40).
fn softmax_input() -> Vec<f32> {
    let mut v: Vec<f32> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 8) as f32 / (1u32 << 24) as f32 * 80.0 - 40.0)
        .collect();
    for (row, x) in [
        (1, f32::NAN),
        (2, f32::INFINITY),
        (3, f32::NEG_INFINITY),
        (4, 0.0),
        (5, -0.0),
    ] {
        for k in [0, 517, 1023] {
            v[row * 1024 + k] = x;
        }
    }
    v
}

fn softmax_on(xs: &[f32], device: &str) -> Result<Vec<u32>> {
    let _g = on(device);
    let t = Tensor::from_slice_on(xs, &[64, 1024], device)?.softmax(-1)?;
    let v = t.to_vec::<f32>()?;
    Ok(v.iter()
        .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
        .collect())
}

#[test]
fn exp_kernels_ask_gcc_for_wide_vectors_and_keep_interps_bits() {
    let xs = softmax_input();
    // INTERP unoptimized: its heuristics group a row this long across local threads, a different
    // order of the sum; the CPU devices' row opts keep the unoptimized order
    let noopt = Context::new(&[("NOOPT", 1)]);
    let want = softmax_on(&xs, "INTERP").unwrap();
    drop(noopt);
    for wide in [1, 0] {
        let _w = Context::new(&[("CPU_WIDE", wide)]);
        let _d = on("CLANG");
        let t = Tensor::from_slice_on(&xs, &[64, 1024], "CLANG").unwrap();
        let srcs = rendered(&ClangRenderer::new(), &asts(&t.softmax(-1).unwrap()));
        assert_eq!(srcs.len(), 3, "max, exp-sum, exp-divide");
        for s in &srcs {
            let exp = s.contains("rg_exp2f(");
            assert_eq!(s.contains(WIDE), exp && wide == 1, "CPU_WIDE={wide}:\n{s}");
            if s.contains(WIDE) {
                let (pragma, helper) = (s.find(WIDE).unwrap(), s.find("rg_exp2f").unwrap());
                assert!(pragma < helper, "the pragma goes before the helper:\n{s}");
                assert!(
                    s.contains("#if defined(__GNUC__) && !defined(__clang__)"),
                    "{s}"
                );
            }
        }
        assert_eq!(srcs.iter().filter(|s| s.contains("rg_exp2f(")).count(), 2);
        let got = softmax_on(&xs, "CLANG").unwrap();
        let bad = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(
            bad, None,
            "CPU_WIDE={wide}: softmax bits differ from INTERP"
        );
    }
}
