//! tinygrad's `diskcache_get` / `diskcache_put`: small values on disk, by table and key.
//!
//! An entry lives at `cache_dir()/<table>/<hex sha256 of the key>.bin` and holds a magic line, the
//! payload's length and its sha256, then the payload. Entries are written to a temporary file and
//! renamed into place, so a reader sees a whole entry or none; an entry whose header, length or
//! checksum does not match is treated as a miss, never trusted. Callers that key by several fields
//! (tinygrad's dict keys) join them with [`key_of`], which length-prefixes each field so that no
//! two different field lists give the same key.
//!
//! Knobs: `CACHELEVEL=0` turns every get into a miss and every put into a no-op (as in tinygrad).
//! Tables carry tinygrad's cache `VERSION` in their name where tinygrad's do (`beam_search_16`).
//!
//! Not guaranteed: the cache is never pruned; a failure to write an entry is reported at
//! `DEBUG>=2` and otherwise ignored.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::driver::process::unique_path;
use crate::helpers::{cache_dir, debug, getenv};

/// tinygrad 0.9.1's cache `VERSION` (part of its table names).
pub const VERSION: u32 = 16;

const MAGIC: &[u8; 8] = b"RGCACHE1";
const HEADER: usize = MAGIC.len() + 8 + 32;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One key from several (name, value) fields, unambiguous (each part is length-prefixed).
pub fn key_of(fields: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in fields {
        out.push_str(&format!("{}:{k}={}:{v};", k.len(), v.len()));
    }
    out
}

/// Where the entry of `key` in `table` lives (whether or not it exists).
pub fn entry_path(table: &str, key: &[u8]) -> PathBuf {
    cache_dir()
        .join(table)
        .join(format!("{}.bin", hex(&Sha256::digest(key))))
}

/// The value stored under `key` in `table`; `None` for a miss (or `CACHELEVEL=0`).
pub fn diskcache_get(table: &str, key: &str) -> Option<Vec<u8>> {
    if getenv("CACHELEVEL", 2) == 0 {
        return None;
    }
    read_entry(&entry_path(table, key.as_bytes()))
}

/// Store `val` under `key` in `table` (nothing with `CACHELEVEL=0`).
pub fn diskcache_put(table: &str, key: &str, val: &[u8]) {
    if getenv("CACHELEVEL", 2) == 0 {
        return;
    }
    let path = entry_path(table, key.as_bytes());
    if let Err(e) = write_entry(&path, val) {
        if debug() >= 2 {
            println!("disk cache: could not write {}: {e}", path.display());
        }
    }
}

/// The payload of a well-formed entry; `None` for a missing, unreadable or corrupt one.
pub(crate) fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let payload = decode_entry(&data);
    if payload.is_none() && debug() >= 2 {
        println!("disk cache: ignoring corrupt entry {}", path.display());
    }
    payload.map(<[u8]>::to_vec)
}

/// The payload of an entry's bytes (magic, length, sha256, payload); `None` unless all of them
/// match.
pub fn decode_entry(data: &[u8]) -> Option<&[u8]> {
    let (magic, rest) = data.split_at_checked(MAGIC.len())?;
    let (len, rest) = rest.split_at_checked(8)?;
    let (sum, payload) = rest.split_at_checked(32)?;
    let len = u64::from_le_bytes(len.try_into().ok()?);
    let valid =
        magic == MAGIC && payload.len() as u64 == len && Sha256::digest(payload).as_slice() == sum;
    valid.then_some(payload)
}

/// The bytes of an entry holding `payload` (what [`decode_entry`] reads).
pub fn encode_entry(payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(HEADER + payload.len());
    entry.extend_from_slice(MAGIC);
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    entry.extend_from_slice(&Sha256::digest(payload));
    entry.extend_from_slice(payload);
    entry
}

/// Write an entry atomically (temporary file, then rename).
pub(crate) fn write_entry(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = unique_path(dir, "cache", ".tmp");
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&encode_entry(payload))?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::process::TempPath;
    use crate::helpers::Context;

    #[test]
    fn put_get_and_levels() {
        let dir = TempPath::new("diskcache", "");
        let _c = Context::with_str(&[("CACHEDIR", dir.path().to_str().unwrap())]);
        let key = key_of(&[("ast", "abc"), ("amt", "2")]);
        assert_eq!(diskcache_get("t_16", &key), None);
        diskcache_put("t_16", &key, b"opts");
        assert_eq!(diskcache_get("t_16", &key).as_deref(), Some(&b"opts"[..]));
        // other tables and keys miss
        assert_eq!(diskcache_get("u_16", &key), None);
        assert_eq!(diskcache_get("t_16", &key_of(&[("ast", "abc")])), None);
        {
            let _g = Context::new(&[("CACHELEVEL", 0)]);
            assert_eq!(diskcache_get("t_16", &key), None);
            diskcache_put("t_16", "other", b"x");
        }
        assert_eq!(diskcache_get("t_16", "other"), None);
        // a corrupt entry is a miss
        std::fs::write(entry_path("t_16", key.as_bytes()), b"RGCACHE1garbage").unwrap();
        assert_eq!(diskcache_get("t_16", &key), None);
        let _ = std::fs::remove_dir_all(dir.path());
    }

    #[test]
    fn keys_are_unambiguous() {
        assert_ne!(
            key_of(&[("a", "b;c"), ("d", "e")]),
            key_of(&[("a", "b"), ("c;d", "e")])
        );
    }
}
