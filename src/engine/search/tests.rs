//! BEAM's rules: the action filter and its limits, the per-candidate compile timeout (joined and
//! single compiles), and the disk cache (a hit times nothing; `IGNORE_BEAM_CACHE`, `CACHELEVEL`).
//! The search's picks running right is `tests/beam_search.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::candidates::compile_candidates;
use super::*;
use crate::device::registry::Compiled;
use crate::device::Compiler;
use crate::driver::process::TempPath;
use crate::dtype::dtypes;
use crate::helpers::Context;
use crate::ops::{BinaryOps, LazyOpArg, ReduceOps};
use crate::shape::{sints, ShapeTracker};

fn st(shape: &[i64]) -> ShapeTracker {
    ShapeTracker::from_shape(&sints(shape)).unwrap()
}

/// out[i] = sum_j (a[i, j] * b[i, j]) over a (rows, cols) input.
fn dot_rows(rows: i64, cols: i64) -> Vec<LazyOp> {
    let l = |i| LazyOp::load(i, dtypes::float32, st(&[rows, cols]));
    let m = LazyOp::new(BinaryOps::MUL, vec![l(1), l(2)], LazyOpArg::None);
    let r = LazyOp::new(ReduceOps::SUM, vec![m], LazyOpArg::Axis(vec![1]));
    vec![LazyOp::store(r, 0, dtypes::float32, st(&[rows, 1]))]
}

fn kernel_on(device: &str, ast: &[LazyOp]) -> Kernel {
    let dev = open_device(device).unwrap();
    let mut k = Kernel::new(ast, dev.renderer.opts()).unwrap();
    k.required_optimizations().unwrap();
    k
}

/// The product of the dims in `colors`.
fn colored_product(k: &Kernel, colors: &[&str]) -> i64 {
    (k.full_shape().iter().zip(k.colors()))
        .filter(|(_, c)| colors.contains(c))
        .map(|(s, _)| s.as_int().unwrap())
        .product()
}

#[test]
fn actions_keep_to_the_limits() {
    let k = kernel_on("INTERP", &dot_rows(64, 256));
    let all = get_kernel_actions(&k, true).unwrap();
    assert_eq!(all[0].0, 0, "include_0 puts the kernel itself first");
    assert!(all[1..].iter().all(|(_, k2)| k2.applied_opts.len() == 1));
    let _g = Context::new(&[("BEAM_UPCAST_MAX", 4), ("BEAM_LOCAL_MAX", 8)]);
    let limited = get_kernel_actions(&k, false).unwrap();
    assert!(!limited.is_empty() && limited.len() < all.len() - 1);
    for (i, k2) in &limited {
        let what = format!("action {i} {:?}", k2.applied_opts);
        assert!(colored_product(k2, &["magenta", "yellow"]) <= 4, "{what}");
        assert!(
            colored_product(k2, &["cyan", "green", "white"]) <= 8,
            "{what}"
        );
    }
    // amounts equal to the whole axis are left to the amount-0 action
    let k = kernel_on("INTERP", &dot_rows(4, 7));
    let acts = get_kernel_actions(&k, false).unwrap();
    assert!(acts.iter().all(|(i, _)| {
        let a = actions()[i - 1];
        !(a.op == OptOps::UPCAST && a.axis == Some(0) && a.amt == Some(4))
    }));
    assert!(acts
        .iter()
        .any(|(i, _)| actions()[i - 1] == Opt::new(OptOps::UPCAST, 0, 0)));
}

/// Returns its source as the binary, but hangs (far past the deadline) on the source of the
/// candidate named `hang`.
struct HangingCompiler {
    hang: String,
    joins: bool,
}

impl Compiler for HangingCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        let hangs = src.match_indices(&self.hang).any(|(i, m)| {
            let next = src[i + m.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_digit())
        });
        if hangs {
            std::thread::sleep(Duration::from_secs(5));
        }
        Ok(src.as_bytes().to_vec())
    }
    fn joins_sources(&self) -> bool {
        self.joins
    }
}

/// Four distinct candidates of a small kernel on CLANG's renderer.
fn four_candidates() -> Vec<Kernel> {
    let k = kernel_on("CLANG", &dot_rows(16, 64));
    let acts = get_kernel_actions(&k, false).unwrap();
    acts.into_iter().take(4).map(|x| x.1).collect()
}

#[test]
fn a_compile_past_the_timeout_drops_only_its_candidate() {
    let clang = open_device("CLANG").unwrap();
    let ks = four_candidates();
    let _g = Context::new(&[("BEAM_TIMEOUT_SEC", 1)]);
    for joins in [false, true] {
        let dev = Arc::new(Compiled {
            name: "CLANG".into(),
            allocator: Arc::clone(&clang.allocator),
            compiler: Arc::new(HangingCompiler {
                hang: format!("beam{}_1", std::process::id()),
                joins,
            }),
            runtime: Arc::clone(&clang.runtime),
            renderer: Arc::clone(&clang.renderer),
        });
        let out = compile_candidates(&ks, &dev, &mut Seen::default(), 2).unwrap();
        let kept: Vec<bool> = out.iter().map(Option::is_some).collect();
        assert_eq!(kept, [true, false, true, true], "joined sources: {joins}");
        let c = out[0].as_ref().unwrap();
        assert!(String::from_utf8_lossy(&c.lib).contains(&c.p.src));
        // BEAM_STRICT_MODE makes the timeout an error
        let _s = Context::new(&[("BEAM_STRICT_MODE", 1)]);
        let e = compile_candidates(&ks, &dev, &mut Seen::default(), 2).err();
        assert!(matches!(e, Some(Error::Timeout(_))), "{e:?}");
    }
}

#[test]
fn equal_programs_compile_once_per_search() {
    let clang = open_device("CLANG").unwrap();
    let ks = four_candidates();
    let mut seen = Seen::default();
    let first = compile_candidates(&ks, &clang, &mut seen, 2).unwrap();
    assert!(first.iter().all(Option::is_some));
    let again = compile_candidates(&ks[..2], &clang, &mut seen, 2).unwrap();
    assert!(again.iter().all(Option::is_none));
}

#[test]
fn the_disk_cache_answers_a_second_search_without_timing() {
    let dir = TempPath::new("beamcache", "");
    let _c = Context::with_str(&[("CACHEDIR", dir.path().to_str().unwrap())]);
    let k = kernel_on("INTERP", &dot_rows(8, 32));
    let bufs = bufs_from_lin(&k, "INTERP", true).unwrap();
    let (first, s1) = beam_search_stats(&k, &bufs, 2, true).unwrap();
    assert!(!s1.cached && s1.timed > 0 && s1.rounds >= 1, "{s1:?}");
    assert!(dir.path().join("beam_search_16").is_dir());
    let before = candidates_timed_on_this_thread();
    let (second, s2) = beam_search_stats(&k, &bufs, 2, true).unwrap();
    assert!(s2.cached, "{s2:?}");
    assert_eq!(second.applied_opts, first.applied_opts);
    assert_eq!(candidates_timed_on_this_thread(), before);
    // another amount or test-size setting is another key
    let (_, s3) = beam_search_stats(&k, &bufs, 2, false).unwrap();
    assert!(!s3.cached);
    {
        let _g = Context::new(&[("IGNORE_BEAM_CACHE", 1)]);
        let (_, s4) = beam_search_stats(&k, &bufs, 2, true).unwrap();
        assert!(!s4.cached && s4.timed > 0);
    }
    {
        // CACHELEVEL=0: no lookup and nothing written
        let _g = Context::new(&[("CACHELEVEL", 0)]);
        let (_, s5) = beam_search_stats(&k, &bufs, 1, true).unwrap();
        assert!(!s5.cached);
    }
    let (_, s6) = beam_search_stats(&k, &bufs, 1, true).unwrap();
    assert!(!s6.cached, "CACHELEVEL=0 wrote an entry");
    let _ = std::fs::remove_dir_all(dir.path());
}

#[test]
fn time_linearizer_caches_at_level_2() {
    let dir = TempPath::new("timecache", "");
    let _c = Context::with_str(&[("CACHEDIR", dir.path().to_str().unwrap())]);
    let k = kernel_on("INTERP", &dot_rows(4, 16));
    let bufs = bufs_from_lin(&k, "INTERP", false).unwrap();
    let t = time_linearizer(&k, &bufs, true, 65536, 2, false, false).unwrap();
    assert!(t.is_finite() && t >= 0.0);
    assert!(bufs.iter().all(|b| b.is_allocated()));
    assert!(dir.path().join("time_linearizer_16").is_dir());
    // the cached value comes back bit for bit
    assert_eq!(
        time_linearizer(&k, &bufs, true, 65536, 2, false, false).unwrap(),
        t
    );
    let _ = std::fs::remove_dir_all(dir.path());
}
