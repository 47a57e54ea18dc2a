//! The on-disk compile cache (tinygrad's `Compiler.compile_cached` over `diskcache`).
//!
//! An entry lives at `cache_dir()/compile/<sha256(cache_key, src)>.bin`, in the entry format of
//! [`super::diskcache`] (whole entries or none; a corrupt one is a miss and is rewritten).
//!
//! Knobs: `CACHELEVEL=0` or `DISABLE_COMPILER_CACHE=1` bypass the cache (no read, no write);
//! `ASSERT_COMPILE=1` makes a cache miss an error (to prove a run compiles nothing).
//!
//! Not guaranteed: the cache is never pruned; a failure to write an entry is reported at
//! `DEBUG>=2` and otherwise ignored (the compile result is still returned).

use std::path::PathBuf;

use crate::device::diskcache::{entry_path, read_entry, write_entry};
use crate::device::Compiler;
use crate::helpers::{debug, getenv};
use crate::{bail, Result};

/// Where the entry for (`cache_key`, `src`) lives: table `compile`, keyed by the key's length,
/// the key and the source.
pub fn compile_cache_path(cache_key: &str, src: &str) -> PathBuf {
    let mut key = (cache_key.len() as u64).to_le_bytes().to_vec();
    key.extend_from_slice(cache_key.as_bytes());
    key.extend_from_slice(src.as_bytes());
    entry_path("compile", &key)
}

/// Whether the disk cache is in use for this compiler right now.
fn cache_enabled(compiler: &dyn Compiler) -> Option<String> {
    if getenv("CACHELEVEL", 2) == 0 || getenv("DISABLE_COMPILER_CACHE", 0) != 0 {
        return None;
    }
    compiler.cache_key()
}

/// The binary [`compile_cached`] would return for `src` without compiling, if the disk cache
/// holds it (and is in use).
pub fn cached_binary(compiler: &dyn Compiler, src: &str) -> Option<Vec<u8>> {
    let key = cache_enabled(compiler)?;
    read_entry(&compile_cache_path(&key, src))
}

/// Compile `src`, or return the cached binary of an earlier compile of the same source with the
/// same cache key.
pub fn compile_cached(compiler: &dyn Compiler, src: &str) -> Result<Vec<u8>> {
    let key = cache_enabled(compiler);
    let path = key.as_deref().map(|k| compile_cache_path(k, src));
    if let Some(lib) = path.as_deref().and_then(read_entry) {
        return Ok(lib);
    }
    if getenv("ASSERT_COMPILE", 0) != 0 {
        let head: String = src.lines().take(20).collect::<Vec<_>>().join("\n");
        bail!(Compile, "tried to compile with ASSERT_COMPILE set:\n{head}");
    }
    let lib = compiler.compile(src)?;
    if let Some(path) = path {
        if let Err(e) = write_entry(&path, &lib) {
            if debug() >= 2 {
                println!("compile cache: could not write {}: {e}", path.display());
            }
        }
    }
    Ok(lib)
}

#[cfg(test)]
mod tests;
