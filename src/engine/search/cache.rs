//! BEAM's entries in the disk cache (tinygrad 0.9.1's `beam_search` and `time_linearizer`
//! tables, `device/diskcache.rs`): the keys, built from the same fields as tinygrad's key dicts,
//! and the stored values (the applied opts as text, the run times as little-endian f64s).
//!
//! Not guaranteed: an entry written by another rawgrad version whose opts no longer apply is a
//! miss (the search runs again), where tinygrad raises.

use crate::codegen::kernel::{Kernel, Opt, OptOps};
use crate::device::diskcache::{diskcache_get, diskcache_put, key_of, VERSION};
use crate::helpers::getenv;
use crate::ops::LazyOp;
use crate::{Error, Result};

fn beam_table() -> String {
    format!("beam_search_{VERSION}")
}

fn time_table() -> String {
    format!("time_linearizer_{VERSION}")
}

/// The opts as stored (one `op,axis,amt` line each, `-` for none).
pub(crate) fn opts_text(opts: &[Opt]) -> String {
    let f = |x: Option<usize>| x.map_or("-".to_string(), |v| v.to_string());
    (opts.iter())
        .map(|o| format!("{:?},{},{}\n", o.op, f(o.axis), f(o.amt)))
        .collect()
}

/// The opts of [`opts_text`]; `None` for text it did not write.
pub(crate) fn parse_opts(text: &[u8]) -> Option<Vec<Opt>> {
    use OptOps::*;
    let text = std::str::from_utf8(text).ok()?;
    let num = |s: &str| -> Option<Option<usize>> {
        if s == "-" {
            Some(None)
        } else {
            s.parse().ok().map(Some)
        }
    };
    text.lines()
        .map(|l| {
            let mut f = l.split(',');
            let op = match f.next()? {
                "TC" => TC,
                "UPCAST" => UPCAST,
                "UPCASTMID" => UPCASTMID,
                "UNROLL" => UNROLL,
                "LOCAL" => LOCAL,
                "GROUP" => GROUP,
                "GROUPTOP" => GROUPTOP,
                "NOLOCALS" => NOLOCALS,
                "PADTO" => PADTO,
                _ => return None,
            };
            let (axis, amt) = (num(f.next()?)?, num(f.next()?)?);
            f.next().is_none().then_some(Opt { op, axis, amt })
        })
        .collect()
}

fn ast_key(k: &Kernel) -> Result<String> {
    (k.ast.first().map(LazyOp::key))
        .ok_or_else(|| Error::Internal("BEAM: kernel without outputs".into()))
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// tinygrad's `beam_search` key: the first AST's key, `amt`, `allow_test_size`, device, suffix.
pub(crate) fn beam_key(k: &Kernel, amt: usize, allow_test_size: bool) -> Result<String> {
    Ok(key_of(&[
        ("ast", &ast_key(k)?),
        ("amt", &amt.to_string()),
        ("allow_test_size", py_bool(allow_test_size)),
        ("device", &k.opts.device),
        ("suffix", &k.opts.suffix),
    ]))
}

/// The cached opts of `key`, unless `IGNORE_BEAM_CACHE=1` or `CACHELEVEL<1`.
pub(crate) fn beam_cache_get(key: &str) -> Option<Vec<Opt>> {
    if getenv("IGNORE_BEAM_CACHE", 0) != 0 || getenv("CACHELEVEL", 2) < 1 {
        return None;
    }
    parse_opts(&diskcache_get(&beam_table(), key)?)
}

/// Store the winning opts under `key` (at `CACHELEVEL>=1`).
pub(crate) fn beam_cache_put(key: &str, opts: &[Opt]) {
    if getenv("CACHELEVEL", 2) >= 1 {
        diskcache_put(&beam_table(), key, opts_text(opts).as_bytes());
    }
}

/// tinygrad's `time_linearizer` key: AST key, the opts as tinygrad prints them, the test-size
/// settings, `clear_l2`, device, suffix.
pub(crate) fn time_key(
    k: &Kernel,
    allow_test_size: bool,
    max_global_size: i64,
    clear_l2: bool,
) -> Result<String> {
    let opts: Vec<String> = k.applied_opts.iter().map(|o| o.to_string()).collect();
    Ok(key_of(&[
        ("ast", &ast_key(k)?),
        ("opts", &format!("[{}]", opts.join(", "))),
        ("allow_test_size", py_bool(allow_test_size)),
        ("max_global_size", &max_global_size.to_string()),
        ("clear_l2", py_bool(clear_l2)),
        ("device", &k.opts.device),
        ("suffix", &k.opts.suffix),
    ]))
}

/// The cached run times of `key` (at `CACHELEVEL>=2`).
pub(crate) fn time_cache_get(key: &str) -> Option<Vec<f64>> {
    if getenv("CACHELEVEL", 2) < 2 {
        return None;
    }
    let v = diskcache_get(&time_table(), key)?;
    let tms: Vec<f64> = (v.chunks_exact(8))
        .filter_map(|c| c.try_into().ok().map(f64::from_le_bytes))
        .collect();
    (!tms.is_empty() && v.len() % 8 == 0).then_some(tms)
}

/// Store run times under `key` (at `CACHELEVEL>=2`).
pub(crate) fn time_cache_put(key: &str, tms: &[f64]) {
    if getenv("CACHELEVEL", 2) >= 2 {
        let bytes: Vec<u8> = tms.iter().flat_map(|t| t.to_le_bytes()).collect();
        diskcache_put(&time_table(), key, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_round_trip_and_refuse_foreign_text() {
        let opts = vec![
            Opt::new(OptOps::UPCAST, 0, 4),
            Opt::new(OptOps::GROUPTOP, 1, 16),
            Opt {
                op: OptOps::NOLOCALS,
                axis: None,
                amt: None,
            },
        ];
        let text = opts_text(&opts);
        assert_eq!(text, "UPCAST,0,4\nGROUPTOP,1,16\nNOLOCALS,-,-\n");
        assert_eq!(parse_opts(text.as_bytes()), Some(opts));
        assert_eq!(parse_opts(b""), Some(vec![]));
        assert_eq!(parse_opts(b"SHRINK,0,4\n"), None);
        assert_eq!(parse_opts(b"UPCAST,0\n"), None);
        assert_eq!(parse_opts(b"UPCAST,0,4,9\n"), None);
        assert_eq!(parse_opts(b"UPCAST,x,4\n"), None);
    }
}
