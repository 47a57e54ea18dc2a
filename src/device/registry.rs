//! The device registry (tinygrad's `Device` singleton): device-name canonicalisation, the table of
//! device families and their openers, the cache of opened devices, and `Device.DEFAULT`.
//!
//! The built-in families (`CLANG`, `INTERP`, `AMD`; see `device/builtin.rs`) are registered once,
//! thread-safely, the first time anything uses the registry, so users call no init function.
//! Any family (built-in or a test's) is made known with [`register_family`], which
//! takes an opener: a function from a canonical device name (`AMD:1`) to the device's parts, a
//! [`Compiled`]. [`open_device`] opens each device once and caches it; the cache is thread-safe and
//! an opener may itself open other devices. A failed open is not cached (the next call retries).
//!
//! `DEFAULT` ([`default_device`]): the `DEVICE=NAME` knob, else the first family (in
//! [`DEVICE_ORDER`], then the other registered families by name) whose knob is 1 (`CLANG=1`), else
//! the first family of [`DEVICE_ORDER`] that is registered and opens. Knobs are read on every call,
//! so a `Context` override applies; the availability probe is cached until the next
//! `register_family`.
//!
//! Not guaranteed: opened devices live until the process ends (there is no close); an opener that
//! opens its own device recursively deadlocks.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use crate::device::{Allocator, Compiler, Runtime};
use crate::helpers::{debug, getenv, getenv_str, FxHashMap};
use crate::renderer::Renderer;
use crate::{bail, Error, Result};

/// Families tried, in order, when nothing selects a device (families not registered are skipped).
pub const DEVICE_ORDER: [&str; 6] = ["AMD", "NV", "CUDA", "CLANG", "LLVM", "INTERP"];

/// An opened device as the engine uses it (tinygrad's `Compiled`).
#[derive(Clone)]
pub struct Compiled {
    /// Canonical device name (`CLANG`, `AMD:1`).
    pub name: String,
    pub allocator: Arc<dyn Allocator>,
    pub compiler: Arc<dyn Compiler>,
    pub runtime: Arc<dyn Runtime>,
    pub renderer: Arc<dyn Renderer>,
}

impl Compiled {
    /// Wait until every operation submitted to the device finished.
    pub fn synchronize(&self) -> Result<()> {
        self.allocator.synchronize()
    }

    /// The family part of the name (`AMD` for `AMD:1`).
    pub fn family(&self) -> &str {
        self.name.split(':').next().unwrap_or(&self.name)
    }
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Compiled({})", self.name)
    }
}

/// Builds the parts of a device from its canonical name.
pub type DeviceOpener = Arc<dyn Fn(&str) -> Result<Compiled> + Send + Sync>;

/// tinygrad's `Device.canonicalize`: upper-case the family (the part before the first `:`), keep
/// the rest as written, and drop a final `:0` (`amd:0` -> `AMD`, `disk:000.txt` -> `DISK:000.txt`).
pub fn canonicalize(device: &str) -> String {
    let (family, rest) = match device.find(':') {
        Some(i) => device.split_at(i),
        None => (device, ""),
    };
    let mut out = family.to_uppercase();
    out.push_str(rest);
    if out.ends_with(":0") {
        out.truncate(out.len() - 2);
    }
    out
}

/// [`canonicalize`] as a shared string: names already seen are looked up without allocating
/// (the eager path creates a constant on its tensor's device at every step).
pub fn canonical_arc(device: &str) -> Arc<str> {
    static NAMES: OnceLock<Mutex<FxHashMap<Box<str>, Arc<str>>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| Mutex::new(FxHashMap::default()));
    let mut names = names.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = names.get(device) {
        return Arc::clone(a);
    }
    let a: Arc<str> = Arc::from(canonicalize(device));
    // Bounded: endless distinct names (DISK paths) are canonicalized without being kept.
    if names.len() < 1024 {
        names.insert(device.into(), Arc::clone(&a));
    }
    a
}

/// The index of a numbered device (`AMD` -> 0, `NV:2` -> 2): the n of `FAMILY:n`, an error
/// naming the device when n is not a number.
pub fn device_index(name: &str) -> Result<usize> {
    match name.split_once(':') {
        None => Ok(0),
        Some((_, n)) => n.parse().map_err(|_| {
            Error::InvalidArgument(format!("device {name}: {n:?} is not a device index"))
        }),
    }
}

/// `canonicalize`, with `None` meaning [`default_device`].
pub fn canonicalize_opt(device: Option<&str>) -> Result<String> {
    match device {
        Some(d) => Ok(canonicalize(d)),
        None => default_device(),
    }
}

/// The family of a device name, upper-cased (`AMD` for `amd:1`).
pub fn device_family(device: &str) -> String {
    device.split(':').next().unwrap_or(device).to_uppercase()
}

type Slot = Arc<Mutex<Option<Arc<Compiled>>>>;

struct Registry {
    families: RwLock<HashMap<String, DeviceOpener>>,
    opened: Mutex<HashMap<String, Slot>>,
    /// The availability probe's answer, cleared by `register_family`.
    probed_default: Mutex<Option<String>>,
}

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    let reg = REG.get_or_init(|| Registry {
        families: RwLock::new(HashMap::new()),
        opened: Mutex::new(HashMap::new()),
        probed_default: Mutex::new(None),
    });
    ensure_builtin_families();
    reg
}

static BUILTINS_DONE: AtomicBool = AtomicBool::new(false);
static BUILTINS_LOCK: Mutex<()> = Mutex::new(());
thread_local! {
    /// Set while this thread registers the built-in families (their `register_family` calls
    /// come back through `registry()`).
    static REGISTERING_BUILTINS: Cell<bool> = const { Cell::new(false) };
}

/// Register the built-in families once per process, before any other registry operation (so a
/// family registered by a user always replaces the built-in one, never the reverse).
fn ensure_builtin_families() {
    if BUILTINS_DONE.load(Ordering::Acquire) || REGISTERING_BUILTINS.with(Cell::get) {
        return;
    }
    let _g = lock(&BUILTINS_LOCK);
    if BUILTINS_DONE.load(Ordering::Acquire) {
        return;
    }
    struct Flag;
    impl Drop for Flag {
        fn drop(&mut self) {
            REGISTERING_BUILTINS.with(|f| f.set(false));
        }
    }
    REGISTERING_BUILTINS.with(|f| f.set(true));
    let flag = Flag;
    super::builtin::register_builtin_families();
    drop(flag);
    BUILTINS_DONE.store(true, Ordering::Release);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Make a device family known (replacing an earlier opener of the same family; devices already
/// opened stay open).
pub fn register_family(
    family: &str,
    opener: impl Fn(&str) -> Result<Compiled> + Send + Sync + 'static,
) {
    let family = family.to_uppercase();
    registry()
        .families
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(family, Arc::new(opener));
    *lock(&registry().probed_default) = None;
}

/// Whether `family` (any case) has an opener.
pub fn is_registered(family: &str) -> bool {
    opener_of(&family.to_uppercase()).is_some()
}

/// The registered family names, sorted.
pub fn registered_families() -> Vec<String> {
    let fams = registry()
        .families
        .read()
        .unwrap_or_else(|e| e.into_inner());
    let mut names: Vec<String> = fams.keys().cloned().collect();
    names.sort();
    names
}

fn opener_of(family: &str) -> Option<DeviceOpener> {
    registry()
        .families
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(family)
        .cloned()
}

/// tinygrad's `Device[name]`: the opened device, opening it on first use.
pub fn open_device(device: &str) -> Result<Arc<Compiled>> {
    let name = canonicalize(device);
    let slot = Arc::clone(lock(&registry().opened).entry(name.clone()).or_default());
    let mut slot = lock(&slot);
    if let Some(dev) = slot.as_ref() {
        return Ok(Arc::clone(dev));
    }
    let family = device_family(&name);
    let Some(opener) = opener_of(&family) else {
        bail!(
            Device,
            "unknown device {name}: no device family {family} is registered (registered: {:?})",
            registered_families()
        );
    };
    let mut dev = opener(&name)
        .map_err(|e| Error::Device(format!("opening device {name}: {}", e.message())))?;
    dev.name = name.clone();
    if debug() >= 1 {
        println!("opened device {name} from pid:{}", std::process::id());
    }
    let dev = Arc::new(dev);
    *slot = Some(Arc::clone(&dev));
    Ok(dev)
}

/// Canonical names of the devices opened so far, sorted.
pub fn opened_devices() -> Vec<String> {
    // Copy the slots out first: a slot is locked while its device opens, and that opener may need
    // the map lock to open another device.
    let slots: Vec<(String, Slot)> = lock(&registry().opened)
        .iter()
        .map(|(n, s)| (n.clone(), Arc::clone(s)))
        .collect();
    // A slot locked by an open in progress is not opened yet.
    let mut names: Vec<String> = slots
        .into_iter()
        .filter(|(_, slot)| slot.try_lock().is_ok_and(|s| s.is_some()))
        .map(|(n, _)| n)
        .collect();
    names.sort();
    names
}

/// tinygrad's `Device.DEFAULT` (see the module doc for the order of the rules).
pub fn default_device() -> Result<String> {
    if let Some(d) = getenv_str("DEVICE").filter(|d| !d.trim().is_empty()) {
        let d = canonicalize(d.trim());
        if !is_registered(&device_family(&d)) {
            bail!(
                Device,
                "DEVICE={d}: no device family {} is registered (registered: {:?})",
                device_family(&d),
                registered_families()
            );
        }
        return Ok(d);
    }
    let registered = registered_families();
    let knob_order = DEVICE_ORDER.iter().map(|s| s.to_string()).chain(
        registered
            .iter()
            .filter(|f| !DEVICE_ORDER.contains(&f.as_str()))
            .cloned(),
    );
    for family in knob_order {
        if getenv(&family, 0) == 1 {
            if !registered.contains(&family) {
                bail!(
                    Device,
                    "{family}=1 selects a device family that is not registered (registered: {registered:?})"
                );
            }
            return Ok(family);
        }
    }
    if let Some(d) = lock(&registry().probed_default).as_ref() {
        return Ok(d.clone());
    }
    // Probe without holding the lock: an opener may ask for the default itself.
    let d = select_available(&DEVICE_ORDER)?;
    *lock(&registry().probed_default) = Some(d.clone());
    Ok(d)
}

/// The first family of `order` that is registered and opens.
pub fn select_available(order: &[&str]) -> Result<String> {
    let mut why = Vec::new();
    for family in order {
        if !is_registered(family) {
            continue;
        }
        match open_device(family) {
            Ok(dev) => return Ok(dev.name.clone()),
            Err(e) => why.push(e.message().to_string()),
        }
    }
    bail!(
        Device,
        "no usable device among {order:?} (registered: {:?}; failures: {why:?})",
        registered_families()
    )
}

#[cfg(test)]
mod tests;
