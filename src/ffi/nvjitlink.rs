//! nvJitLink (PTX to cubin in process, CUDA 12+), loaded at run time from a
//! `libnvJitLink.so*` file.
//!
//! The library exports each entry point unversioned (`nvJitLinkCreate`, CUDA 13) and/or versioned
//! (`__nvJitLinkCreate_12_4`, what `nvJitLink.h` maps the names to); the newest spelling found is
//! used. [`NvJitLink::link_ptx`] runs create -> add PTX -> complete -> get the linked cubin, and
//! reports the error log on failure.
//!
//! Not guaranteed: only PTX input and the `-arch=sm_XX` option are used; link-time optimization
//! and other inputs are not.

use std::ffi::{c_char, c_uint, c_void, CString};
use std::path::Path;
use std::sync::Arc;

use super::nvlib::{log_text, so_version, VendorLib};
use crate::{bail, Error, Result};

type Handle = *mut c_void;
type CreateFn = unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> c_uint;
type AddDataFn =
    unsafe extern "C" fn(Handle, c_uint, *const c_void, usize, *const c_char) -> c_uint;
type CompleteFn = unsafe extern "C" fn(Handle) -> c_uint;
type SizeFn = unsafe extern "C" fn(Handle, *mut usize) -> c_uint;
type GetFn = unsafe extern "C" fn(Handle, *mut c_void) -> c_uint;
type DestroyFn = unsafe extern "C" fn(*mut Handle) -> c_uint;
type VersionFn = unsafe extern "C" fn(*mut c_uint, *mut c_uint) -> c_uint;

/// `NVJITLINK_INPUT_PTX`.
const INPUT_PTX: c_uint = 2;

/// `nvJitLinkResult` names (nvJitLink.h, CUDA 13).
fn result_name(rc: c_uint) -> &'static str {
    const NAMES: [&str; 19] = [
        "NVJITLINK_SUCCESS",
        "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
        "NVJITLINK_ERROR_MISSING_ARCH",
        "NVJITLINK_ERROR_INVALID_INPUT",
        "NVJITLINK_ERROR_PTX_COMPILE",
        "NVJITLINK_ERROR_NVVM_COMPILE",
        "NVJITLINK_ERROR_INTERNAL",
        "NVJITLINK_ERROR_THREADPOOL",
        "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
        "NVJITLINK_ERROR_FINALIZE",
        "NVJITLINK_ERROR_NULL_INPUT",
        "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
        "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
        "NVJITLINK_ERROR_ARCH_MISMATCH",
        "NVJITLINK_ERROR_OUTDATED_LIBRARY",
        "NVJITLINK_ERROR_MISSING_FATBIN",
        "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
        "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
        "NVJITLINK_ERROR_LTO_NOT_ENABLED",
    ];
    NAMES
        .get(rc as usize)
        .copied()
        .unwrap_or("unknown nvJitLinkResult")
}

/// A loaded nvJitLink.
pub struct NvJitLink {
    lib: VendorLib,
    version: (u32, u32),
    create: CreateFn,
    add_data: AddDataFn,
    complete: CompleteFn,
    cubin_size: SizeFn,
    cubin: GetFn,
    error_log_size: SizeFn,
    error_log: GetFn,
    destroy: DestroyFn,
}

impl std::fmt::Debug for NvJitLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvJitLink({}.{} from {})",
            self.version.0,
            self.version.1,
            self.lib.path().display()
        )
    }
}

/// The spellings of entry point `base` (`Create` -> `nvJitLinkCreate`, `__nvJitLinkCreate_13_9`
/// ... `__nvJitLinkCreate_12_0`), newest first.
fn spellings(base: &str, majors: &[u32]) -> Vec<String> {
    let mut out = vec![format!("nvJitLink{base}")];
    for &m in majors {
        for minor in (0..=9).rev() {
            out.push(format!("__nvJitLink{base}_{m}_{minor}"));
        }
    }
    out
}

struct HandleGuard<'a> {
    link: &'a NvJitLink,
    h: Handle,
}

impl Drop for HandleGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` came from a successful nvJitLinkCreate and is destroyed once, here.
        unsafe { (self.link.destroy)(&mut self.h) };
    }
}

impl NvJitLink {
    /// Load nvJitLink from `path` and resolve its API.
    pub fn open(path: &Path) -> Result<Arc<NvJitLink>> {
        let lib = VendorLib::open(path, "nvJitLink")?;
        let mut majors: Vec<u32> = so_version(lib.path()).into_iter().take(1).collect();
        for m in [14, 13, 12] {
            if !majors.contains(&m) {
                majors.push(m);
            }
        }
        macro_rules! sym {
            ($base:expr) => {{
                let n = spellings($base, &majors);
                let refs: Vec<&str> = n.iter().map(String::as_str).collect();
                // SAFETY: every spelling of this entry point has the signature nvJitLink.h
                // (CUDA 12.0-13.x) declares, which is the type this field is declared with.
                unsafe { lib.get(&refs)? }
            }};
        }
        let mut link = NvJitLink {
            lib,
            version: (0, 0),
            create: sym!("Create"),
            add_data: sym!("AddData"),
            complete: sym!("Complete"),
            cubin_size: sym!("GetLinkedCubinSize"),
            cubin: sym!("GetLinkedCubin"),
            error_log_size: sym!("GetErrorLogSize"),
            error_log: sym!("GetErrorLog"),
            destroy: sym!("Destroy"),
        };
        // SAFETY: `nvJitLinkVersion(unsigned *major, unsigned *minor)` (CUDA >= 12.3).
        if let Ok(version) = unsafe { lib.get::<VersionFn>(&["nvJitLinkVersion"]) } {
            let (mut a, mut b) = (0, 0);
            // SAFETY: writes two unsigned ints through valid pointers.
            if unsafe { version(&mut a, &mut b) } == 0 {
                link.version = (a, b);
            }
        }
        if link.version == (0, 0) {
            let v = so_version(link.lib.path());
            link.version = (
                v.first().copied().unwrap_or(0),
                v.get(1).copied().unwrap_or(0),
            );
        }
        Ok(Arc::new(link))
    }

    /// nvJitLink's (major, minor) version (from `nvJitLinkVersion`, else the file name).
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// The file loaded.
    pub fn path(&self) -> &Path {
        self.lib.path()
    }

    fn check(&self, rc: c_uint, h: Option<Handle>, what: &str) -> Result<()> {
        if rc == 0 {
            return Ok(());
        }
        let log = h.map(|h| self.log(h)).unwrap_or_default();
        bail!(
            Compile,
            "nvJitLink {}.{} {what}: {} ({rc}){}{log}",
            self.version.0,
            self.version.1,
            result_name(rc),
            if log.is_empty() { "" } else { "\n" }
        )
    }

    fn log(&self, h: Handle) -> String {
        let mut n = 0usize;
        // SAFETY: `h` is a live handle; the size is written through a valid pointer.
        if unsafe { (self.error_log_size)(h, &mut n) } != 0 || n == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; n];
        // SAFETY: `buf` holds the `n` bytes the library said it writes.
        if unsafe { (self.error_log)(h, buf.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        log_text(&buf)
    }

    /// Assemble and link `ptx` for `arch` (`sm_90`) into a cubin.
    pub fn link_ptx(&self, ptx: &[u8], arch: &str) -> Result<Vec<u8>> {
        let opt = CString::new(format!("-arch={arch}"))
            .map_err(|_| Error::Compile(format!("nvJitLink: bad arch {arch:?}")))?;
        let opts = [opt.as_ptr()];
        let mut h: Handle = std::ptr::null_mut();
        // SAFETY: one NUL-terminated option string, alive for the call; `h` receives the handle.
        let rc = unsafe { (self.create)(&mut h, 1, opts.as_ptr()) };
        self.check(rc, None, &format!("nvJitLinkCreate(-arch={arch})"))?;
        let g = HandleGuard { link: self, h };
        let name = c"rawgrad.ptx";
        // nvJitLink reads PTX as a C string: without the NUL it scans past the end.
        let mut text = ptx.to_vec();
        if text.last() != Some(&0) {
            text.push(0);
        }
        // SAFETY: `text` is a live byte buffer of the given length; the name is NUL-terminated.
        let rc = unsafe {
            (self.add_data)(
                g.h,
                INPUT_PTX,
                text.as_ptr().cast(),
                text.len(),
                name.as_ptr(),
            )
        };
        self.check(rc, Some(g.h), "nvJitLinkAddData(PTX)")?;
        // SAFETY: `g.h` is a live handle with its inputs added.
        let rc = unsafe { (self.complete)(g.h) };
        self.check(rc, Some(g.h), &format!("nvJitLinkComplete(-arch={arch})"))?;
        let mut n = 0usize;
        // SAFETY: completed handle; size written through a valid pointer.
        let rc = unsafe { (self.cubin_size)(g.h, &mut n) };
        self.check(rc, Some(g.h), "nvJitLinkGetLinkedCubinSize")?;
        let mut cubin = vec![0u8; n];
        // SAFETY: `cubin` holds the `n` bytes the library said it writes.
        let rc = unsafe { (self.cubin)(g.h, cubin.as_mut_ptr().cast()) };
        self.check(rc, Some(g.h), "nvJitLinkGetLinkedCubin")?;
        Ok(cubin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_spellings() {
        let s = spellings("Create", &[13, 12]);
        assert_eq!(s[0], "nvJitLinkCreate");
        assert_eq!(s[1], "__nvJitLinkCreate_13_9");
        assert_eq!(s.last().unwrap(), "__nvJitLinkCreate_12_0");
        assert_eq!(result_name(4), "NVJITLINK_ERROR_PTX_COMPILE");
        assert_eq!(result_name(99), "unknown nvJitLinkResult");
    }
}
