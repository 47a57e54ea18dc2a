//! Shared objects loaded with `dlopen`, and the CPU kernel entry ABI called through them.
//!
//! The kernel entry ABI (what the C renderer emits for a kernel `NAME`):
//! `void NAME_rg(void **bufs, const int *vals, int core, int ncores)`: `bufs` are the buffer
//! addresses in kernel-parameter order (outputs first), `vals` the integer variable values in the
//! kernel's variable order, and `core`/`ncores` split the outermost global loop across threads
//! (`0 <= core < ncores`; the kernel itself skips work past its outer extent).
//!
//! What it owns: the `dlopen` handle (closed when the last [`KernelFn`] and the [`Library`] drop)
//! and every `unsafe` foreign call of the CPU backends.
//!
//! Not guaranteed: loading runs the object's initializers and calling runs its code; both are
//! trusted to be a rawgrad kernel built by rawgrad's own compiler from rawgrad's renderer. The
//! kernel reads and writes the addresses it is given for as many elements as its source says; the
//! caller (the CLANG program) checks that every address lies in live host memory and keeps that
//! memory alive for the call, but cannot check the kernel's indexing.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use libloading::os::unix::{Library as RawLibrary, RTLD_LOCAL, RTLD_NOW};

use crate::{ensure, Error, Result};

// `bufs: &[u64]` is handed to C as `void **`: both must be 8 bytes.
static_assertions::const_assert_eq!(
    std::mem::size_of::<u64>(),
    std::mem::size_of::<*mut c_void>()
);
static_assertions::const_assert_eq!(std::mem::size_of::<i32>(), std::mem::size_of::<c_int>());

/// The C signature of a kernel entry (`NAME_rg`).
pub(crate) type KernelEntry = unsafe extern "C" fn(*const *mut c_void, *const c_int, c_int, c_int);

/// A loaded shared object.
pub struct Library {
    lib: RawLibrary,
    path: String,
}

impl Library {
    /// `dlopen(path, RTLD_NOW | RTLD_LOCAL)`: every symbol is resolved now, none leaks into the
    /// global namespace.
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<Library>> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        ensure!(path.is_file(), Driver, "dlopen {shown}: no such file");
        // SAFETY: `open` runs the object's initializers. The objects rawgrad opens are kernels
        // compiled by its own compiler from its own renderer's C, which define no initializers
        // beyond the C runtime's; the module doc states this trust. The path is a real file.
        let lib = unsafe { RawLibrary::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::Driver(format!("dlopen {shown}: {e}")))?;
        Ok(Arc::new(Library { lib, path: shown }))
    }

    /// The file this library was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the library exports `symbol`.
    pub fn has_symbol(&self, symbol: &str) -> bool {
        // SAFETY: the symbol is only looked up, never called or dereferenced; `*mut c_void` is
        // the type of a plain address, valid for any exported symbol.
        unsafe { self.lib.get::<*mut c_void>(symbol.as_bytes()) }.is_ok()
    }

    /// The kernel entry `symbol` (for example `E_4_rg`), with the ABI in the module doc.
    pub fn kernel(self: &Arc<Self>, symbol: &str) -> Result<KernelFn> {
        // SAFETY: the symbol is typed as the kernel entry ABI of the module doc, which is what the
        // C renderer emits for every `NAME_rg` symbol (the suffix is reserved for kernel entries).
        // The fn pointer stays valid while `lib` is loaded; `KernelFn` keeps the `Arc` to it.
        let sym = unsafe { self.lib.get::<KernelEntry>(symbol.as_bytes()) }.map_err(|e| {
            Error::Runtime(format!(
                "kernel entry {symbol} not found in {}: {e}",
                self.path
            ))
        })?;
        let owner: Arc<dyn Send + Sync> = Arc::clone(self) as Arc<dyn Send + Sync>;
        Ok(KernelFn::from_entry(*sym, symbol, &self.path, owner))
    }
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Library({})", self.path)
    }
}

/// A kernel entry point in a loaded library (or in code memory rawgrad linked itself, see
/// [`crate::driver::codemem`]); keeps its code loaded.
#[derive(Clone)]
pub struct KernelFn {
    entry: KernelEntry,
    name: String,
    /// Where the code lives (a file, or the code memory's description), for messages.
    origin: String,
    _owner: Arc<dyn Send + Sync>,
}

impl KernelFn {
    /// An entry whose code `owner` keeps mapped; the caller vouches that `entry` has the kernel
    /// entry ABI of the module doc (this module and `codemem` are the only callers).
    pub(crate) fn from_entry(
        entry: KernelEntry,
        name: &str,
        origin: &str,
        owner: Arc<dyn Send + Sync>,
    ) -> KernelFn {
        KernelFn {
            entry,
            name: name.to_string(),
            origin: origin.to_string(),
            _owner: owner,
        }
    }

    /// The symbol name (`NAME_rg`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run the kernel's share `core` of `ncores` with buffer addresses `bufs` and variable values
    /// `vals`. The caller keeps the memory behind `bufs` alive and unaliased by host accesses
    /// until this returns (see the module doc for what cannot be checked here).
    pub fn call(&self, bufs: &[u64], vals: &[i32], core: i32, ncores: i32) -> Result<()> {
        ensure!(
            ncores >= 1 && (0..ncores).contains(&core),
            InvalidArgument,
            "kernel {}: core {core} is not in [0, {ncores})",
            self.name
        );
        ensure!(
            bufs.iter().all(|&a| a != 0),
            InvalidArgument,
            "kernel {}: a buffer address is null ({bufs:x?})",
            self.name
        );
        // The kernel reads `bufs`/`vals` (live slices of 8-byte addresses and 4-byte ints, sizes
        // asserted at compile time) only for the counts its source declares, which the renderer
        // derived from the same buffer and variable lists the caller passes; `core` is in range.
        // SAFETY: `entry` has the kernel entry ABI (`Library::kernel`, `CodeMemory::kernel`),
        // `_owner` keeps its code mapped, and every buffer is non-null live host memory the CPU
        // program keeps alive (checked).
        unsafe {
            (self.entry)(
                bufs.as_ptr().cast::<*mut c_void>(),
                vals.as_ptr(),
                core,
                ncores,
            )
        };
        Ok(())
    }
}

impl fmt::Debug for KernelFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelFn({} in {})", self.name, self.origin)
    }
}
