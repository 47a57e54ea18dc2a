//! Small shared pieces: environment knobs and scoped overrides ([`Context`]), [`GlobalCounters`],
//! Python-compatible number formatting, ANSI colors (`colored`, `ansilen`), kernel-name escaping,
//! the on-disk cache directory, and [`FxHasher`] (the fast hasher of the in-memory tables on the
//! eager path).
//!
//! Knobs follow tinygrad's `getenv`/`ContextVar`: the environment gives the default, a
//! [`Context`] guard overrides it for the current thread until the guard drops. Overrides are
//! thread-local on purpose: tests run in parallel threads and must not see each other's settings.
//!
//! Not guaranteed: environment variables are read once per process (the first time a knob is
//! asked for); changing the environment afterwards has no effect. Use [`Context`] instead.

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;

type EnvCache = std::sync::Mutex<HashMap<String, Option<String>, FxBuild>>;

fn env_cache() -> &'static EnvCache {
    static CACHE: OnceLock<EnvCache> = OnceLock::new();
    CACHE.get_or_init(|| std::sync::Mutex::new(HashMap::default()))
}

/// An environment knob as this thread remembers it: the value and the value as an integer.
struct EnvKnob {
    raw: Option<Box<str>>,
    int: Option<i64>,
}

thread_local! {
    static OVERRIDES: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
    /// This thread's copy of the process-wide environment cache, for the knobs it asked for:
    /// the eager path reads a dozen knobs per kernel, and a read here takes no lock and parses
    /// nothing. Filled from [`env_cache`], so every thread sees the value read first.
    static ENV_LOCAL: RefCell<HashMap<Box<str>, EnvKnob, FxBuild>> = RefCell::new(HashMap::default());
}

/// `f` of the innermost [`Context`] override of `key` on this thread, if there is one.
fn with_override<T>(key: &str, f: &mut dyn FnMut(Option<&str>) -> T) -> Option<T> {
    OVERRIDES
        .try_with(|o| {
            let o = o.borrow();
            o.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| f(Some(v)))
        })
        .ok()
        .flatten()
}

/// `f` of the environment's value of `key` (read once per process and cached).
fn with_env<T>(key: &str, f: &mut dyn FnMut(&EnvKnob) -> T) -> T {
    let local = ENV_LOCAL.try_with(|m| m.try_borrow().ok()?.get(key).map(&mut *f));
    if let Ok(Some(r)) = local {
        return r;
    }
    let raw = {
        let mut cache = env_cache().lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(key.to_string())
            .or_insert_with(|| std::env::var(key).ok())
            .clone()
    };
    let knob = EnvKnob {
        int: raw.as_deref().and_then(|v| v.trim().parse::<i64>().ok()),
        raw: raw.map(String::into_boxed_str),
    };
    let r = f(&knob);
    let _ = ENV_LOCAL.try_with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            m.insert(key.into(), knob);
        }
    });
    r
}

/// `f` of a knob's value: the innermost [`Context`] override on this thread, else the process
/// environment (read once and cached). Nothing is allocated once the knob was read.
fn with_knob<T>(key: &str, f: &mut dyn FnMut(Option<&str>) -> T) -> T {
    if let Some(r) = with_override(key, f) {
        return r;
    }
    with_env(key, &mut |k| f(k.raw.as_deref()))
}

/// The string value of a knob: the innermost [`Context`] override on this thread, else the
/// process environment (read once and cached). Safe to call from exit handlers: once the
/// thread's overrides are destroyed, only the environment answers.
pub fn getenv_str(key: &str) -> Option<String> {
    with_knob(key, &mut |v| v.map(str::to_string))
}

/// An integer knob (`getenv("DEBUG", 0)`); a value that does not parse as an integer counts as
/// the default.
pub fn getenv(key: &str, default: i64) -> i64 {
    let mut parse = |v: Option<&str>| {
        v.and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(default)
    };
    if let Some(r) = with_override(key, &mut parse) {
        return r;
    }
    with_env(key, &mut |k| k.int.unwrap_or(default))
}

/// An integer knob read often (on every eager step): the environment's value is kept after the
/// first read, so while no [`Context`] override is active on the thread a read is one
/// thread-local check and one load. Same answers as [`getenv`].
pub struct Knob {
    name: &'static str,
    default: i64,
    env: OnceLock<i64>,
}

impl Knob {
    pub const fn new(name: &'static str, default: i64) -> Knob {
        Knob {
            name,
            default,
            env: OnceLock::new(),
        }
    }

    /// `getenv(name, default)`.
    pub fn get(&self) -> i64 {
        if overrides_active() {
            return getenv(self.name, self.default);
        }
        *self.env.get_or_init(|| getenv(self.name, self.default))
    }
}

/// Whether any [`Context`] override is active on this thread (true while the thread is torn
/// down, so callers take the general path).
fn overrides_active() -> bool {
    OVERRIDES
        .try_with(|o| o.try_borrow().map_or(true, |o| !o.is_empty()))
        .unwrap_or(true)
}

/// `DEBUG` level.
pub fn debug() -> i64 {
    static DEBUG: Knob = Knob::new("DEBUG", 0);
    DEBUG.get()
}

/// A scoped override of knobs for the current thread, like tinygrad's `Context(DEBUG=2)`.
/// The override ends when the guard is dropped.
#[must_use = "the override lasts only while the guard lives"]
pub struct Context {
    n: usize,
}

impl Context {
    /// Override each `(name, value)` pair until the returned guard is dropped.
    pub fn new(vars: &[(&str, i64)]) -> Context {
        OVERRIDES.with(|o| {
            let mut o = o.borrow_mut();
            for (k, v) in vars {
                o.push((k.to_string(), v.to_string()));
            }
        });
        Context { n: vars.len() }
    }

    /// Every override active on this thread, outermost first: hand it to
    /// [`Context::with_snapshot`] on a worker thread so the worker sees the caller's knobs.
    pub fn snapshot() -> Vec<(String, String)> {
        OVERRIDES.with(|o| o.borrow().clone())
    }

    /// Apply the overrides of a [`Context::snapshot`] (taken on another thread) to this thread.
    pub fn with_snapshot(vars: &[(String, String)]) -> Context {
        OVERRIDES.with(|o| o.borrow_mut().extend(vars.iter().cloned()));
        Context { n: vars.len() }
    }

    /// Override string-valued knobs (device names, paths).
    pub fn with_str(vars: &[(&str, &str)]) -> Context {
        OVERRIDES.with(|o| {
            let mut o = o.borrow_mut();
            for (k, v) in vars {
                o.push((k.to_string(), v.to_string()));
            }
        });
        Context { n: vars.len() }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        OVERRIDES.with(|o| {
            let mut o = o.borrow_mut();
            let keep = o.len().saturating_sub(self.n);
            o.truncate(keep);
        });
    }
}

/// tinygrad's `GlobalCounters`: operations, memory traffic, kernel count and time of the kernels
/// run on this thread since the last [`GlobalCounters::reset`]; `mem_used` is process-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GlobalCounters {
    pub global_ops: i64,
    pub global_mem: i64,
    pub time_sum_s: f64,
    pub kernel_count: i64,
}

thread_local! {
    static COUNTERS: RefCell<GlobalCounters> = RefCell::new(GlobalCounters::default());
}
static MEM_USED: AtomicI64 = AtomicI64::new(0);

impl GlobalCounters {
    /// A snapshot of this thread's counters.
    pub fn get() -> GlobalCounters {
        COUNTERS.with(|c| *c.borrow())
    }
    /// Zero this thread's counters.
    pub fn reset() {
        COUNTERS.with(|c| *c.borrow_mut() = GlobalCounters::default());
    }
    /// Account one kernel (or copy) run.
    pub fn add(ops: i64, mem: i64, time_s: f64, kernels: i64) {
        COUNTERS.with(|c| {
            let mut c = c.borrow_mut();
            c.global_ops += ops;
            c.global_mem += mem;
            c.time_sum_s += time_s;
            c.kernel_count += kernels;
        });
    }
    /// Bytes currently allocated on all devices by this process.
    pub fn mem_used() -> i64 {
        MEM_USED.load(Ordering::Relaxed)
    }
    /// Adjust the process-wide allocated-bytes counter.
    pub fn add_mem_used(delta: i64) {
        MEM_USED.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Python's `repr(float)`: shortest round-trip digits, scientific notation below 1e-4 and from
/// 1e16 up, `inf`/`-inf`/`nan`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5".
    let sci = format!("{x:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let n = digits.len() as i32;
    if exp >= n - 1 {
        // Integer-valued: pad with zeros and add ".0".
        let zeros = "0".repeat((exp - (n - 1)) as usize);
        format!("{sign}{digits}{zeros}.0")
    } else if exp >= 0 {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{sign}{int}.{frac}")
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    }
}

/// tinygrad's `to_function_name`: keep ASCII letters, digits and `_`, write every other
/// character as two upper-case hex digits (`r_8_<i[1-10]>` -> `r_8_3Ci5B12D105D3E`).
pub fn to_function_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("{b:02X}"));
            }
        }
    }
    out
}

/// tinygrad's `colored`: `st` wrapped in the ANSI color `color` (`red`, ..., `white`; upper case
/// = the bright variant, `BLACK` is grey), or unchanged for `None`. An unknown name leaves `st`
/// unchanged.
pub fn colored(st: &str, color: Option<&str>) -> String {
    const NAMES: [&str; 8] = [
        "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
    ];
    let Some(color) = color else {
        return st.to_string();
    };
    let Some(idx) = NAMES.iter().position(|n| n.eq_ignore_ascii_case(color)) else {
        return st.to_string();
    };
    let bright = if color.to_uppercase() == color { 60 } else { 0 };
    format!("\x1b[{}m{st}\x1b[0m", bright + 30 + idx)
}

/// tinygrad's `ansistrip`: `s` without ANSI escapes (`ESC [ ... m` and `ESC [ K`).
pub fn ansistrip(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        if let Some(t) = tail.strip_prefix('K') {
            rest = t;
        } else if let Some(m) = tail.find('m').filter(|&m| !tail[..m].contains('\n')) {
            rest = &tail[m + 1..];
        } else {
            // No terminator: keep the text as it is (the regex would not match either).
            out.push_str(&rest[i..i + 2]);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// tinygrad's `ansilen`: the visible length (characters) of `s`.
pub fn ansilen(s: &str) -> usize {
    ansistrip(s).chars().count()
}

/// Product of an integer list (1 for an empty list).
pub fn prod(xs: &[i64]) -> i64 {
    xs.iter().product()
}

/// Round `x` up to a multiple of `align`.
pub fn round_up(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}

/// The directory for rawgrad's on-disk caches: `$CACHEDIR`, else `$XDG_CACHE_HOME/rawgrad`,
/// else `$HOME/.cache/rawgrad`, else the system temporary directory.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = getenv_str("CACHEDIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = getenv_str("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("rawgrad");
    }
    if let Some(h) = getenv_str("HOME") {
        return PathBuf::from(h).join(".cache").join("rawgrad");
    }
    std::env::temp_dir().join("rawgrad-cache")
}

/// The murmur3 64-bit finalizer (`fmix64`): spreads a hash state over all 64 bits, so hashes
/// built from [`FxHasher`] can serve tables that read both their low and their high bits
/// (hashbrown), and combined child hashes do not cancel.
#[inline]
pub fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A fast, deterministic hasher for in-memory tables keyed by node identities and small
/// structures (the multiply-rotate hash of rustc's `FxHasher`): a few cycles per word where
/// SipHash takes tens. Not DoS-resistant and not stable across versions; never for disk keys.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// The [`FxHasher`] builder.
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;
/// Hash maps and sets with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, FxBuild>;
pub type FxHashSet<K> = std::collections::HashSet<K, FxBuild>;
pub type FxIndexMap<K, V> = indexmap::IndexMap<K, V, FxBuild>;
pub type FxIndexSet<K> = indexmap::IndexSet<K, FxBuild>;

/// The [`FxHasher`] hash of `x`.
pub fn fx_hash<T: std::hash::Hash + ?Sized>(x: &T) -> u64 {
    use std::hash::Hasher;
    let mut h = FxHasher::default();
    x.hash(&mut h);
    h.finish()
}

/// The process-wide value held in `slot`, made by `make` on first use (a failure is not kept:
/// the next call tries again). The GPU backends keep their one driver process this way.
pub fn process_wide<T>(
    slot: &std::sync::Mutex<Option<std::sync::Arc<T>>>,
    make: impl FnOnce() -> crate::Result<std::sync::Arc<T>>,
) -> crate::Result<std::sync::Arc<T>> {
    let mut held = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = held.as_ref() {
        return Ok(std::sync::Arc::clone(v));
    }
    let v = make()?;
    *held = Some(std::sync::Arc::clone(&v));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fx_hash_is_deterministic_and_spreads() {
        assert_eq!(fx_hash(&(1u64, "a")), fx_hash(&(1u64, "a")));
        assert_ne!(fx_hash(&[1u8, 2, 3][..]), fx_hash(&[1u8, 2, 4][..]));
        assert_ne!(
            fx_hash(&[0u8; 3][..]),
            fx_hash(&[0u8; 4][..]),
            "length is mixed in"
        );
        let mut m: FxHashMap<usize, usize> = FxHashMap::default();
        m.insert(8, 1);
        assert_eq!(m.get(&8), Some(&1));
    }

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (std::f64::consts::LOG2_E, "1.4426950408889634"),
            (-2.5, "-2.5"),
            (123456.0, "123456.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-3.25e-7, "-3.25e-07"),
            (f64::INFINITY, "inf"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "repr({x})");
        }
    }

    #[test]
    fn function_names_escape() {
        assert_eq!(to_function_name("r_8_<i[1-10]>"), "r_8_3Ci5B12D105D3E");
        assert_eq!(to_function_name("E_4_4"), "E_4_4");
    }

    #[test]
    fn colors_like_tinygrad() {
        assert_eq!(colored("x", Some("red")), "\x1b[31mx\x1b[0m");
        assert_eq!(colored("_", Some("BLACK")), "\x1b[90m_\x1b[0m");
        assert_eq!(colored("4", Some("BLUE")), "\x1b[94m4\x1b[0m");
        assert_eq!(colored("x", None), "x");
        let s = format!(
            "{}{}",
            colored("E_", Some("green")),
            colored("16", Some("blue"))
        );
        assert_eq!(ansistrip(&s), "E_16");
        assert_eq!(ansilen(&s), 4);
        assert_eq!(ansistrip("a\x1b[Kb\x1b[c"), "ab\x1b[c");
    }

    #[test]
    fn context_overrides_are_scoped() {
        assert_eq!(getenv("RAWGRAD_TEST_KNOB_X", 7), 7);
        {
            let _g = Context::new(&[("RAWGRAD_TEST_KNOB_X", 3)]);
            assert_eq!(getenv("RAWGRAD_TEST_KNOB_X", 7), 3);
            {
                let _h = Context::new(&[("RAWGRAD_TEST_KNOB_X", 5)]);
                assert_eq!(getenv("RAWGRAD_TEST_KNOB_X", 7), 5);
            }
            assert_eq!(getenv("RAWGRAD_TEST_KNOB_X", 7), 3);
        }
        assert_eq!(getenv("RAWGRAD_TEST_KNOB_X", 7), 7);
    }

    #[test]
    fn snapshots_carry_overrides_to_other_threads() {
        let _g = Context::new(&[("RAWGRAD_TEST_KNOB_Y", 3)]);
        let snap = Context::snapshot();
        let seen = std::thread::spawn(move || {
            let before = getenv("RAWGRAD_TEST_KNOB_Y", 7);
            let _c = Context::with_snapshot(&snap);
            (before, getenv("RAWGRAD_TEST_KNOB_Y", 7))
        })
        .join()
        .unwrap();
        assert_eq!(seen, (7, 3));
    }
}
