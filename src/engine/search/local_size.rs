//! tinygrad 0.9.1's `optimize_local_size`: the local size for a program that has a global size
//! but none of its own (`CompiledRunner` calls it on the first run of such a program and keeps the
//! answer). Every local size whose dims are each 1, 2, 4, ..., 256, 1024 or the whole global dim
//! (at most that dim) with a product of at most 1024 is run twice, in random order, timed by the
//! device, and the fastest wins.
//!
//! Where rawgrad differs: a local size that does not divide the global size is skipped (tinygrad
//! passes a fractional global size there, which no launch accepts).
//!
//! Not guaranteed: the choice depends on timings, so it can differ from run to run.

use crate::device::{LaunchDims, Program, RawBuf};
use crate::{Error, Result};

/// The largest workgroup tried.
const MAX_WORKGROUP: usize = 1024;

/// tinygrad's `optimize_local_size`: for a program launched with `global` and no local size,
/// the local size (each dim a power of two up to 256, 1024, or the dim itself, dividing it, with
/// a product of at most 1024) of the fastest of two timed runs each, in random order. The caller
/// gives an output that is also an input a scratch copy for the trials (`CompiledRunner`).
pub fn optimize_local_size(
    prg: &dyn Program,
    global: LaunchDims,
    rawbufs: &[RawBuf],
    vals: &[i64],
) -> Result<LaunchDims> {
    let choices: Vec<Vec<usize>> = (global.iter())
        .map(|&sz| {
            let mut c: Vec<usize> = [1, 2, 4, 8, 16, 32, 64, 128, 256, MAX_WORKGROUP, sz]
                .into_iter()
                .filter(|&x| x <= sz && x > 0)
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect();
    let mut sizes: Vec<LaunchDims> = vec![];
    for &a in &choices[0] {
        for &b in &choices[1] {
            for &c in &choices[2] {
                if a * b * c <= MAX_WORKGROUP {
                    sizes.push([a, b, c]);
                }
            }
        }
    }
    let mut trials: Vec<LaunchDims> = sizes.iter().chain(sizes.iter()).copied().collect();
    shuffle(&mut trials);
    let best = (trials.iter())
        .map(|l| (try_local_size(prg, global, *l, rawbufs, vals), *l))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|b| b.0.is_finite());
    best.map(|b| b.1).ok_or_else(|| {
        Error::Runtime(format!(
            "optimize_local_size: every local size failed for global {global:?}"
        ))
    })
}

/// One trial: the time with local size `l` (global divided by it), infinity when it fails or does
/// not divide (tinygrad passes a fractional global size there, which no launch accepts).
fn try_local_size(
    prg: &dyn Program,
    global: LaunchDims,
    l: LaunchDims,
    bufs: &[RawBuf],
    vals: &[i64],
) -> f64 {
    if global.iter().zip(&l).any(|(g, l)| g % l != 0) {
        return f64::INFINITY;
    }
    let g = [global[0] / l[0], global[1] / l[1], global[2] / l[2]];
    match prg.call(bufs, vals, Some(g), Some(l), true) {
        Ok(Some(t)) => t,
        _ => f64::INFINITY,
    }
}

/// Fisher-Yates with a clock-seeded xorshift (the trial order only needs to vary).
fn shuffle<T>(v: &mut [T]) {
    let mut x = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
        | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A program whose "time" is a function of the local size; it refuses local sizes over 256
    /// threads and records each launch.
    struct Fake(Mutex<Vec<(LaunchDims, LaunchDims)>>);

    impl Program for Fake {
        fn call(
            &self,
            _bufs: &[RawBuf],
            _vals: &[i64],
            global: Option<LaunchDims>,
            local: Option<LaunchDims>,
            _wait: bool,
        ) -> Result<Option<f64>> {
            let (g, l) = (global.unwrap(), local.unwrap());
            self.0.lock().unwrap().push((g, l));
            if l.iter().product::<usize>() > 256 {
                return Err(Error::Runtime("too many threads".into()));
            }
            // fastest at [16, 2, 1]
            let d = |a: usize, b: usize| (a as f64).log2() - (b as f64).log2();
            Ok(Some(
                1.0 + d(l[0], 16).abs() + d(l[1], 2).abs() + d(l[2], 1).abs(),
            ))
        }
    }

    #[test]
    fn picks_the_fastest_dividing_size() {
        let prg = Fake(Mutex::new(vec![]));
        let l = optimize_local_size(&prg, [96, 6, 1], &[], &[]).unwrap();
        assert_eq!(l, [16, 2, 1]);
        let calls = prg.0.lock().unwrap();
        // only dividing sizes run, each twice, with the global size divided by the local size
        assert!(calls
            .iter()
            .all(|(g, l)| g[0] * l[0] == 96 && g[1] * l[1] == 6 && l[2] == 1));
        let mut sizes: Vec<LaunchDims> = calls.iter().map(|c| c.1).collect();
        sizes.sort_unstable();
        assert!(sizes.chunks(2).all(|c| c.len() == 2 && c[0] == c[1]));
        // dim 0: 1 2 4 8 16 32 96 (dividing, <= 96); dim 1: 1 2 6
        assert_eq!(sizes.len(), 2 * 7 * 3);
    }

    #[test]
    fn every_size_failing_is_an_error() {
        struct Broken;
        impl Program for Broken {
            fn call(
                &self,
                _: &[RawBuf],
                _: &[i64],
                _: Option<LaunchDims>,
                _: Option<LaunchDims>,
                _: bool,
            ) -> Result<Option<f64>> {
                Err(Error::Runtime("no".into()))
            }
        }
        let e = optimize_local_size(&Broken, [8, 1, 1], &[], &[]).unwrap_err();
        assert!(e.message().contains("every local size failed"), "{e}");
    }
}
