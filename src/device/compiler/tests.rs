use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::driver::process::TempPath;
use crate::helpers::Context;

/// Returns the source reversed, counting how often it really compiled.
struct Counting {
    key: Option<String>,
    compiles: AtomicUsize,
}

impl Counting {
    fn new(key: &str) -> Self {
        Counting {
            key: Some(key.to_string()),
            compiles: AtomicUsize::new(0),
        }
    }
    fn count(&self) -> usize {
        self.compiles.load(Ordering::SeqCst)
    }
}

impl Compiler for Counting {
    fn cache_key(&self) -> Option<String> {
        self.key.clone()
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        self.compiles.fetch_add(1, Ordering::SeqCst);
        Ok(src.bytes().rev().collect())
    }
}

/// A private cache directory for one test (removed afterwards).
struct TmpCache {
    dir: TempPath,
    _ctx: Context,
}

impl TmpCache {
    fn new() -> TmpCache {
        let dir = TempPath::new("cachetest", "");
        let ctx = Context::with_str(&[("CACHEDIR", dir.path().to_str().unwrap())]);
        TmpCache { dir, _ctx: ctx }
    }
}

impl Drop for TmpCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

#[test]
fn miss_then_hit() {
    let _c = TmpCache::new();
    let cc = Counting::new("test_key");
    assert_eq!(compile_cached(&cc, "abc").unwrap(), b"cba");
    assert_eq!(cc.count(), 1);
    assert!(compile_cache_path("test_key", "abc").is_file());
    assert_eq!(compile_cached(&cc, "abc").unwrap(), b"cba");
    assert_eq!(cc.count(), 1, "second compile must come from the cache");
    // Another source, or the same source under another key, misses.
    assert_eq!(compile_cached(&cc, "abd").unwrap(), b"dba");
    assert_eq!(cc.count(), 2);
    let other = Counting::new("other_key");
    assert_eq!(compile_cached(&other, "abc").unwrap(), b"cba");
    assert_eq!(other.count(), 1);
    // Key and source are hashed unambiguously.
    assert_ne!(compile_cache_path("ab", "c"), compile_cache_path("a", "bc"));
    // With ASSERT_COMPILE a hit is fine and a miss is an error.
    let _g = Context::new(&[("ASSERT_COMPILE", 1)]);
    assert_eq!(compile_cached(&cc, "abc").unwrap(), b"cba");
    let e = compile_cached(&cc, "new source").unwrap_err();
    assert!(e.message().contains("ASSERT_COMPILE"), "{e}");
}

#[test]
fn cachelevel_zero_and_disable_bypass() {
    let _c = TmpCache::new();
    let cc = Counting::new("bypass_key");
    {
        let _g = Context::new(&[("CACHELEVEL", 0)]);
        compile_cached(&cc, "x").unwrap();
        compile_cached(&cc, "x").unwrap();
        assert_eq!(cc.count(), 2);
        assert!(!compile_cache_path("bypass_key", "x").exists());
    }
    {
        let _g = Context::new(&[("DISABLE_COMPILER_CACHE", 1)]);
        compile_cached(&cc, "x").unwrap();
        assert_eq!(cc.count(), 3);
        assert!(!compile_cache_path("bypass_key", "x").exists());
    }
    // A compiler without a cache key never caches.
    let nokey = Counting {
        key: None,
        compiles: AtomicUsize::new(0),
    };
    compile_cached(&nokey, "x").unwrap();
    compile_cached(&nokey, "x").unwrap();
    assert_eq!(nokey.count(), 2);
}

#[test]
fn corrupt_entries_are_recompiled() {
    let _c = TmpCache::new();
    let cc = Counting::new("corrupt_key");
    compile_cached(&cc, "hello").unwrap();
    let path = compile_cache_path("corrupt_key", "hello");
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    let corruptions: Vec<Vec<u8>> = vec![
        flipped,                         // payload changed: checksum mismatch
        good[..good.len() - 1].to_vec(), // truncated
        b"garbage".to_vec(),             // shorter than a header
        vec![],                          // empty file
    ];
    for (i, bad) in corruptions.into_iter().enumerate() {
        std::fs::write(&path, bad).unwrap();
        assert_eq!(compile_cached(&cc, "hello").unwrap(), b"olleh", "case {i}");
        assert_eq!(cc.count(), 2 + i, "case {i} must recompile");
        // The entry was rewritten whole.
        assert_eq!(std::fs::read(&path).unwrap(), good, "case {i}");
    }
}

#[test]
fn unwritable_cache_still_compiles() {
    let file = TempPath::new("notadir", "");
    std::fs::write(file.path(), b"x").unwrap();
    // CACHEDIR is a regular file: nothing can be created under it.
    let _g = Context::with_str(&[("CACHEDIR", file.path().to_str().unwrap())]);
    let cc = Counting::new("unwritable_key");
    assert_eq!(compile_cached(&cc, "ab").unwrap(), b"ba");
    assert_eq!(compile_cached(&cc, "ab").unwrap(), b"ba");
    assert_eq!(cc.count(), 2);
}
