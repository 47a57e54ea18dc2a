//! A float32 `exp2` that the CPU renderers emit as code of their own (a C helper; LLVM IR helper
//! functions with vector forms, inlined after LLVM's SLP vectorizer: `renderer/llvmir/exp2.rs`),
//! so that the C compiler and LLVM can vectorize it across upcast lanes instead of calling libm's
//! scalar `exp2f` once per element. Beyond tinygrad 0.9.1, whose CLANG calls `exp2` through
//! `tgmath.h` and whose LLVM calls the `llvm.exp2` intrinsic (libm on the CPU).
//!
//! The algorithm (rawgrad's own, from the math): clamp `x` to [`LO`, `HI`] (both ends are floats,
//! so clamping the float or its exact double gives the same double), then in double precision
//! split it into `n + r` with `n` the nearest integer (adding and subtracting
//! 1.5·2^52 rounds to nearest) and `r` in [-1/2, 1/2], evaluate `2^r = 1 + r·q(r)` with `q` a
//! degree-8 polynomial in Horner form with fused multiply-adds (a Chebyshev fit of
//! `(2^r - 1)/r` on [-1/2, 1/2], absolute error under 6e-14, so `2^r` within about 3e-14;
//! computed with mpmath), build `2^n` from the exponent bits of the rounding sum, multiply, and
//! round the double to float once. A NaN input returns itself.
//!
//! Edge cases follow from the clamp: `x <= -152` (and -inf) gives +0 (2^-152 rounds to 0, as
//! every value below 2^-150 does); `x >= 129` (and +inf) gives +inf; results between 2^-149 and
//! 2^-126 are float denormals, rounded once from the double (the double is exact there up to the
//! polynomial's error). `q(0)` contributes nothing at `r = 0`, so exact powers of two (including
//! 2^-150, a tie that rounds to 0) come out exact.
//!
//! Accuracy against the interpreter (which rounds f64 `exp2` to float, as tinygrad's
//! `python_alu`), measured over all 2^32 float32 inputs: 72 differ, by 1 ulp, where glibc 2.36's
//! `exp2f` (what CLANG called before) differs on 168364, by 1 ulp. `tests/cpu_math_helpers.rs`
//! pins a sweep (no difference on it) and the edges on CLANG and LLVM. Not guaranteed: bit
//! equality on every input (the polynomial's 3e-14 leaves a window around each rounding
//! boundary); the error bound is 1 ulp.
//!
//! Only float32 (and half and bfloat16, which go through float) on the CPU renderers; double
//! `exp2` stays libm's, the GPUs keep their instructions.

/// Inputs at or below this give +0 (the clamp's lower end).
pub const LO: f64 = -152.0;
/// Inputs at or above this give +inf (the clamp's upper end).
pub const HI: f64 = 129.0;
/// 1.5·2^52: adding and subtracting it rounds a double of magnitude below 2^51 to the nearest
/// integer (ties to even), and the sum's low mantissa bits hold that integer.
pub const ROUNDER: f64 = 6755399441055744.0;
/// The exponent bias of a double.
pub const BIAS: i64 = 1023;
/// `q(r)`'s coefficients as double bit patterns, highest degree first (Horner order);
/// `2^r = 1 + r·q(r)`. [`q`] gives the values.
pub const Q_BITS: [u64; 9] = [
    0x3e7b_6388_0a30_e9ff,
    0x3eb6_3d13_6366_db24,
    0x3eef_fcb9_515a_8016,
    0x3f24_308a_c85a_a947,
    0x3f55_d87f_e86f_e88e,
    0x3f83_b2ab_7181_b755,
    0x3fac_6b08_d704_7e52,
    0x3fce_bfbd_ff82_3ced,
    0x3fe6_2e42_fefa_39ef,
];

/// `q(r)`'s coefficients (see [`Q_BITS`]).
pub fn q() -> [f64; 9] {
    Q_BITS.map(f64::from_bits)
}

/// The algorithm in Rust, step for step as the renderers emit it (for tests and for comparing
/// against the interpreter without a compiler).
pub fn exp2f(x: f32) -> f32 {
    let d = x as f64;
    // NaN stays NaN, as through the renderers' two selects
    let c = d.clamp(LO, HI);
    let t = c + ROUNDER;
    let n = t - ROUNDER;
    let r = c - n;
    let s = f64::from_bits((t.to_bits() as i64).wrapping_add(BIAS).wrapping_shl(52) as u64);
    let q = q()[1..].iter().fold(q()[0], |q, &k| q.mul_add(r, k));
    if x.is_nan() {
        x
    } else {
        (r.mul_add(q, 1.0) * s) as f32
    }
}

/// A C literal of `v` that round-trips exactly (hex float).
pub fn c_hex(v: f64) -> String {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - BIAS;
    let mant = bits & ((1u64 << 52) - 1);
    let sign = if v < 0.0 { "-" } else { "" };
    if v == 0.0 {
        return format!("{sign}0.0");
    }
    format!("{sign}0x1.{mant:013x}p{exp}")
}

/// The C helper `rg_exp2f` (float in, float out), under an include guard so that several kernels
/// joined into one C file define it once. Selects are written as masks (`-(int)(x < LO)`), not
/// `?:`: gcc's vectorizers give up on control flow, and a mask compiles to a compare and a blend.
/// The clamp selects on the float's bits before the conversion to double (`LO` and `HI` are
/// floats and a float converts to double exactly, so the clamped double is the same), as two
/// blends in a row (`cb = ml ? LO : x; cb = mh ? HI : cb`, the masks exclusive): gcc makes each a
/// compare and one masked move, where one three-way OR of 64-bit masks of the double cost it
/// three sign extensions and four more ops per vector (W6's exp kernels in a C harness calling
/// the CLANG device's build, best of 15: `E_4096_256_4` 4.74-4.85 -> 3.77 ms,
/// `r_512_256_8_4n1` 2.80-2.82 -> 2.48 ms; bits unchanged on all 2^32 inputs).
/// `__builtin_fma` is the IEEE fused multiply-add (one rounding; an instruction with
/// `-march=native` on x86-64 with FMA, else libm's `fma`), the same on every compiler.
pub fn c_helper() -> String {
    let q = q();
    let mut horner = format!("double q = {};", c_hex(q[0]));
    for k in &q[1..] {
        horner.push_str(&format!(" q = __builtin_fma(q, r, {});", c_hex(*k)));
    }
    // the clamp's ends as float bit patterns (both are floats exactly)
    let bits = |v: f64| format!("{}", (v as f32).to_bits() as i32);
    format!(
        "#ifndef RG_EXP2F\n#define RG_EXP2F\nstatic inline float rg_exp2f(float x) {{ \
         int xb0; __builtin_memcpy(&xb0, &x, 4); \
         int ml = -(int)(x < {lo}f), mh = -(int)(x > {hi}f); \
         int cb = (ml & ({lob})) | (~ml & xb0); cb = (mh & ({hib})) | (~mh & cb); \
         float xc; __builtin_memcpy(&xc, &cb, 4); double c = (double)xc; \
         double t = c + {rd}; double r = c - (t - {rd}); long long b; \
         __builtin_memcpy(&b, &t, 8); b = (long long)(((unsigned long long)b + {bias}ull) << 52); \
         double s; __builtin_memcpy(&s, &b, 8); {horner} \
         float f = (float)(__builtin_fma(r, q, 1.0) * s); int fb, xb, mn = -(int)(x != x); \
         __builtin_memcpy(&fb, &f, 4); __builtin_memcpy(&xb, &x, 4); fb = (mn & xb) | (~mn & fb); \
         __builtin_memcpy(&f, &fb, 4); return f; }}\n#endif",
        lo = c_hex(LO),
        hi = c_hex(HI),
        lob = bits(LO),
        hib = bits(HI),
        rd = c_hex(ROUNDER),
        bias = BIAS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interp(x: f32) -> f32 {
        (x as f64).exp2() as f32
    }

    #[test]
    fn hex_literals_round_trip() {
        assert_eq!(c_hex(ROUNDER), "0x1.8000000000000p52");
        assert_eq!(c_hex(LO), "-0x1.3000000000000p7");
        assert_eq!(c_hex(1.0), "0x1.0000000000000p0");
        assert_eq!(c_hex(q()[8]), "0x1.62e42fefa39efp-1");
        // the C helper clamps on float bits: both ends must be floats exactly
        for end in [LO, HI] {
            assert_eq!(end as f32 as f64, end);
        }
    }

    #[test]
    fn edges_match_the_interpreter() {
        let edges = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            127.0,
            127.99999,
            128.0,
            129.0,
            1e30,
            f32::INFINITY,
            -126.0,
            -149.0,
            -149.5,
            -150.0,
            -150.00002,
            -149.99998,
            -151.0,
            -152.0,
            -1e30,
            f32::NEG_INFINITY,
            f32::from_bits(1),
            -f32::from_bits(1),
            f32::MAX,
            f32::MIN,
        ];
        for x in edges {
            assert_eq!(exp2f(x).to_bits(), interp(x).to_bits(), "exp2({x:e})");
        }
        assert!(exp2f(f32::NAN).is_nan());
    }

    #[test]
    fn sweep_matches_the_interpreter() {
        // every 65521st bit pattern (a prime stride: all exponents, varied mantissas)
        let mut worst = 0i64;
        for u in (0..=u32::MAX).step_by(65521) {
            let x = f32::from_bits(u);
            let (a, b) = (exp2f(x), interp(x));
            if a.is_nan() || b.is_nan() {
                assert!(a.is_nan() && b.is_nan(), "exp2({x:e})");
                continue;
            }
            worst = worst.max((a.to_bits() as i64 - b.to_bits() as i64).abs());
        }
        assert_eq!(worst, 0);
    }
}
