//! NVIDIA's user-space libraries (NVRTC, nvJitLink, the CUDA driver library) loaded at run time
//! with `dlopen`: no link-time dependency on any of them.
//!
//! A [`VendorLib`] is opened once per process per file (`RTLD_NOW | RTLD_LOCAL`) and never
//! unloaded: these libraries start threads and register atexit handlers that must not outlive
//! their code. Symbols are looked up by a list of names, first found wins, so one table serves the
//! unversioned and the versioned (`__nvJitLinkCreate_13_0`) spellings.
//!
//! Not guaranteed: that a symbol has the signature its caller declares; the typed wrappers
//! ([`super::nvrtc`], [`super::nvjitlink`], [`super::cuda`]) declare the signatures of the
//! vendor headers they were written against.

use std::ffi::c_char;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libloading::os::unix::{Library as RawLibrary, RTLD_LOCAL, RTLD_NOW};

use crate::{Error, Result};

/// A vendor library, loaded for the life of the process.
#[derive(Clone, Copy)]
pub struct VendorLib {
    lib: &'static RawLibrary,
    path: &'static Path,
}

impl std::fmt::Debug for VendorLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VendorLib({})", self.path.display())
    }
}

fn loaded() -> &'static Mutex<Vec<VendorLib>> {
    static LOADED: OnceLock<Mutex<Vec<VendorLib>>> = OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(vec![]))
}

impl VendorLib {
    /// `dlopen` the library at `path` (`what` names it in errors: "NVRTC", "libcuda"). A path
    /// without `/` is searched by the dynamic loader (`libcuda.so.1`).
    pub fn open(path: &Path, what: &str) -> Result<VendorLib> {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut cache = loaded().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cache.iter().find(|l| l.path == key) {
            return Ok(*l);
        }
        // SAFETY: loading runs the library's initializers; the libraries opened here are NVIDIA's
        // own runtime libraries (NVRTC, nvJitLink, libcuda), whose initializers only set up their
        // own state. The handle is leaked so the code stays mapped for the rest of the process.
        let lib = unsafe { RawLibrary::open(Some(&key), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::Compile(format!("{what}: dlopen {}: {e}", key.display())))?;
        let l = VendorLib {
            lib: Box::leak(Box::new(lib)),
            path: Box::leak(key.into_boxed_path()),
        };
        cache.push(l);
        Ok(l)
    }

    /// The file loaded (canonical when it exists on disk).
    pub fn path(&self) -> &Path {
        self.path
    }

    /// Whether the library exports `name`.
    pub fn has(&self, name: &str) -> bool {
        // SAFETY: only the address is looked up, never called or read.
        unsafe { self.lib.get::<*const u8>(name.as_bytes()) }.is_ok()
    }

    /// The first of `names` the library exports, as a value of type `T` (a function pointer).
    ///
    /// # Safety
    /// `T` must be the exact function-pointer type of every name in `names` (the C signature of
    /// the vendor header for that symbol).
    pub unsafe fn get<T: Copy>(&self, names: &[&str]) -> Result<T> {
        for n in names {
            // SAFETY: the caller guarantees `T` is the symbol's type; the library is never
            // unloaded, so the pointer stays valid.
            if let Ok(s) = unsafe { self.lib.get::<T>(n.as_bytes()) } {
                return Ok(*s);
            }
        }
        Err(Error::Compile(format!(
            "{}: none of the symbols {names:?} is exported",
            self.path.display()
        )))
    }
}

/// A NUL-terminated C string owned by a vendor library, copied out (`""` for null).
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that stays valid during the call.
pub unsafe fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A log buffer's text: up to the first NUL, invalid UTF-8 replaced.
pub fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim_end().to_string()
}

/// The file name's part after `.so.` as numbers (`libnvrtc.so.13.5.37` -> [13, 5, 37]).
pub fn so_version(path: &Path) -> Vec<u32> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.split_once(".so.") {
        Some((_, v)) => v.split('.').map_while(|p| p.parse().ok()).collect(),
        None => vec![],
    }
}

/// Paths for `p` in error messages.
pub fn shown(p: &[PathBuf]) -> String {
    p.iter()
        .map(|x| x.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_file_names() {
        assert_eq!(
            so_version(Path::new("/x/libnvrtc.so.13.5.37")),
            vec![13, 5, 37]
        );
        assert_eq!(so_version(Path::new("libnvJitLink.so.12")), vec![12]);
        assert!(so_version(Path::new("libnvrtc.so")).is_empty());
        assert_eq!(log_text(b"error: x\n\0\0junk"), "error: x");
    }

    #[test]
    fn missing_libraries_and_symbols_are_named() {
        let e = VendorLib::open(Path::new("/nonexistent/libnvrtc.so.99"), "NVRTC").unwrap_err();
        assert!(
            e.message()
                .contains("NVRTC: dlopen /nonexistent/libnvrtc.so.99"),
            "{e}"
        );
        let libc = VendorLib::open(Path::new("libc.so.6"), "libc").unwrap();
        assert!(libc.has("malloc"));
        // SAFETY: the symbol is not found, so the type is never used.
        let e = unsafe { libc.get::<unsafe extern "C" fn()>(&["rawgrad_no_such_fn"]) }.unwrap_err();
        assert!(e.message().contains("rawgrad_no_such_fn"), "{e}");
    }
}
