//! The on-disk compile cache (tinygrad's `Compiler.compile_cached` over `diskcache`).
//!
//! An entry lives at `cache_dir()/compile/<sha256(cache_key, src)>.bin` and holds a magic line,
//! the payload's length and its sha256, then the payload. Entries are written to a temporary file
//! and renamed into place, so a reader sees a whole entry or none; an entry whose header, length or
//! checksum does not match is treated as a miss and rewritten, never trusted.
//!
//! Knobs: `CACHELEVEL=0` or `DISABLE_COMPILER_CACHE=1` bypass the cache (no read, no write);
//! `ASSERT_COMPILE=1` makes a cache miss an error (to prove a run compiles nothing).
//!
//! Not guaranteed: the cache is never pruned; a failure to write an entry is reported at
//! `DEBUG>=2` and otherwise ignored (the compile result is still returned).

use std::io::Write;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::device::Compiler;
use crate::driver::process::unique_path;
use crate::helpers::{cache_dir, debug, getenv};
use crate::{bail, Result};

const MAGIC: &[u8; 8] = b"RGCACHE1";
const HEADER: usize = MAGIC.len() + 8 + 32;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the entry for (`cache_key`, `src`) lives.
pub fn compile_cache_path(cache_key: &str, src: &str) -> PathBuf {
    let mut h = Sha256::new();
    h.update((cache_key.len() as u64).to_le_bytes());
    h.update(cache_key.as_bytes());
    h.update(src.as_bytes());
    cache_dir()
        .join("compile")
        .join(format!("{}.bin", hex(&h.finalize())))
}

/// Whether the disk cache is in use for this compiler right now.
fn cache_enabled(compiler: &dyn Compiler) -> Option<String> {
    if getenv("CACHELEVEL", 2) == 0 || getenv("DISABLE_COMPILER_CACHE", 0) != 0 {
        return None;
    }
    compiler.cache_key()
}

/// Compile `src`, or return the cached binary of an earlier compile of the same source with the
/// same cache key.
pub fn compile_cached(compiler: &dyn Compiler, src: &str) -> Result<Vec<u8>> {
    let key = cache_enabled(compiler);
    let path = key.as_deref().map(|k| compile_cache_path(k, src));
    if let Some(lib) = path.as_ref().and_then(read_entry) {
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

/// The payload of a well-formed entry; `None` for a missing, unreadable or corrupt one.
fn read_entry(path: &PathBuf) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let (magic, rest) = data.split_at_checked(MAGIC.len())?;
    let (len, rest) = rest.split_at_checked(8)?;
    let (sum, payload) = rest.split_at_checked(32)?;
    let len = u64::from_le_bytes(len.try_into().ok()?);
    let valid =
        magic == MAGIC && payload.len() as u64 == len && Sha256::digest(payload).as_slice() == sum;
    if !valid {
        if debug() >= 2 {
            println!("compile cache: ignoring corrupt entry {}", path.display());
        }
        return None;
    }
    Some(payload.to_vec())
}

fn write_entry(path: &PathBuf, lib: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = unique_path(dir, "cache", ".tmp");
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        let mut entry = Vec::with_capacity(HEADER + lib.len());
        entry.extend_from_slice(MAGIC);
        entry.extend_from_slice(&(lib.len() as u64).to_le_bytes());
        entry.extend_from_slice(&Sha256::digest(lib));
        entry.extend_from_slice(lib);
        f.write_all(&entry)?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests;
