//! The device registry (the table behind tinygrad's `Device` singleton): device-name
//! canonicalisation, the table of device families and their openers, the cache of opened devices,
//! and the rules of `Device.DEFAULT` over a given family order.
//!
//! This layer names no backend: the table knows the families registered so far. The built-in
//! families and their order are `runtime/builtin.rs`'s, which registers them (once,
//! thread-safely) before every device lookup the upper layers make through
//! its `open_device` and `default_device`, so users call no init function.
//! Any family (built-in or a test's) is made known with [`register_family`], which takes an
//! opener: a function from a canonical device name (`AMD:1`) to the device's parts, a
//! [`Compiled`]. [`open_registered`] opens each device once and caches it; the cache is
//! thread-safe and an opener may itself open other devices. A failed open is not cached (the next
//! call retries). A [`Buffer`](crate::device::Buffer) allocates through [`open_registered`].
//!
//! `DEFAULT` ([`default_device_in`]): the `DEVICE=NAME` knob, else the first family (in the given
//! order, then the other registered families by name) whose knob is 1 (`CLANG=1`), else the first
//! family of the order that is registered and opens. Knobs are read on every call, so a `Context`
//! override applies; the availability probe is cached until the next registration.
//!
//! Not guaranteed: opened devices live until the process ends (there is no close); an opener that
//! opens its own device recursively deadlocks; a lookup of a built-in family made before anything
//! registered the built-ins finds no such family (an error that says so).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use crate::device::{Allocator, Compiler, Runtime};
use crate::helpers::{debug, getenv, getenv_str, FxHashMap};
use crate::renderer::Renderer;
use crate::{bail, Error, Result};

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

/// The family of a device name, upper-cased (`AMD` for `amd:1`).
pub fn device_family(device: &str) -> String {
    device.split(':').next().unwrap_or(device).to_uppercase()
}

type Slot = Arc<Mutex<Option<Arc<Compiled>>>>;

struct Registry {
    families: RwLock<HashMap<String, DeviceOpener>>,
    opened: Mutex<HashMap<String, Slot>>,
    /// The availability probe's answer (for the order it probed), cleared by a registration.
    probed_default: Mutex<Option<(Vec<String>, String)>>,
}

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| Registry {
        families: RwLock::new(HashMap::new()),
        opened: Mutex::new(HashMap::new()),
        probed_default: Mutex::new(None),
    })
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
    insert_family(family, Arc::new(opener), true);
}

/// Make a device family known unless it already is (the built-ins register this way, so a family
/// a user registered first keeps its opener). Returns whether it was added.
pub fn register_family_if_absent(
    family: &str,
    opener: impl Fn(&str) -> Result<Compiled> + Send + Sync + 'static,
) -> bool {
    insert_family(family, Arc::new(opener), false)
}

fn insert_family(family: &str, opener: DeviceOpener, replace: bool) -> bool {
    let family = family.to_uppercase();
    let added = {
        let mut fams = registry()
            .families
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if !replace && fams.contains_key(&family) {
            false
        } else {
            fams.insert(family, opener);
            true
        }
    };
    if added {
        *lock(&registry().probed_default) = None;
    }
    added
}

/// Whether `family` (any case) has an opener (among the families registered so far).
pub fn is_registered(family: &str) -> bool {
    opener_of(&family.to_uppercase()).is_some()
}

/// The family names registered so far, sorted.
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

/// tinygrad's `Device[name]` over the families registered so far: the opened device, opening it
/// on first use (the upper layers call `open_device` of `runtime/builtin.rs`, which registers the
/// built-in families first).
pub fn open_registered(device: &str) -> Result<Arc<Compiled>> {
    let name = canonical_arc(device);
    let slot = {
        let mut opened = lock(&registry().opened);
        // an open device is found without allocating a key (every buffer allocation asks)
        match opened.get(&*name) {
            Some(s) => Arc::clone(s),
            None => Arc::clone(opened.entry(name.to_string()).or_default()),
        }
    };
    let mut slot = lock(&slot);
    if let Some(dev) = slot.as_ref() {
        return Ok(Arc::clone(dev));
    }
    let family = device_family(&name);
    let Some(opener) = opener_of(&family) else {
        bail!(
            Device,
            "unknown device {name}: no device family {family} is registered (registered: {:?}; \
             the built-in families are registered by rawgrad::runtime::builtin::open_device and \
             default_device)",
            registered_families()
        );
    };
    let mut dev = opener(&name)
        .map_err(|e| Error::Device(format!("opening device {name}: {}", e.message())))?;
    dev.name = name.to_string();
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

/// tinygrad's `Device.DEFAULT` with `order` as the preferred families (see the module doc for
/// the rules; `default_device` of `runtime/builtin.rs` passes the built-in order).
pub fn default_device_in(order: &[&str]) -> Result<String> {
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
    let knob_order = order.iter().map(|s| s.to_string()).chain(
        registered
            .iter()
            .filter(|f| !order.contains(&f.as_str()))
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
    let order_key: Vec<String> = order.iter().map(|s| s.to_string()).collect();
    if let Some((o, d)) = lock(&registry().probed_default).as_ref() {
        if *o == order_key {
            return Ok(d.clone());
        }
    }
    // Probe without holding the lock: an opener may ask for the default itself.
    let d = select_available(order)?;
    *lock(&registry().probed_default) = Some((order_key, d.clone()));
    Ok(d)
}

/// The first family of `order` that is registered and opens.
pub fn select_available(order: &[&str]) -> Result<String> {
    let mut why = Vec::new();
    for family in order {
        if !is_registered(family) {
            continue;
        }
        match open_registered(family) {
            Ok(dev) => return Ok(dev.name.clone()),
            Err(e) => {
                if debug() >= 1 {
                    println!("default device: skipping {family}: {}", e.message());
                }
                why.push(e.message().to_string());
            }
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
