//! NVRTC (CUDA C++ to PTX or cubin in process), loaded at run time from a `libnvrtc.so*` file.
//!
//! [`Nvrtc::open`] resolves the C API (`nvrtc.h`: `nvrtcVersion`, `nvrtcCreateProgram`,
//! `nvrtcCompileProgram`, `nvrtcGetProgramLog(Size)`, `nvrtcGetCUBIN(Size)`, `nvrtcGetPTX(Size)`,
//! `nvrtcDestroyProgram`, `nvrtcGetErrorString`); [`Nvrtc::compile`] runs one program and returns
//! the cubin (for a real `sm_XX` architecture) or the PTX, or an error carrying NVRTC's log.
//!
//! Not guaranteed: NVRTC finds no headers by itself; sources must be self-contained or the caller
//! passes `-I` options.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::Path;
use std::sync::Arc;

use super::nvlib::{c_str, log_text, VendorLib};
use crate::{bail, Error, Result};

type Prog = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type CreateFn = unsafe extern "C" fn(
    *mut Prog,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileFn = unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Prog, *mut usize) -> c_int;
type GetFn = unsafe extern "C" fn(Prog, *mut c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Prog) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// What to take out of a compiled program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvrtcOutput {
    /// SASS in an ELF cubin (needs a real architecture, `--gpu-architecture=sm_XX`).
    Cubin,
    /// PTX text.
    Ptx,
}

/// A loaded NVRTC.
pub struct Nvrtc {
    lib: VendorLib,
    version: (i32, i32),
    create: CreateFn,
    compile: CompileFn,
    log_size: SizeFn,
    log: GetFn,
    cubin_size: SizeFn,
    cubin: GetFn,
    ptx_size: SizeFn,
    ptx: GetFn,
    destroy: DestroyFn,
    error_string: ErrorStringFn,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Nvrtc({}.{} from {})",
            self.version.0,
            self.version.1,
            self.lib.path().display()
        )
    }
}

/// Destroys a program on every path out of [`Nvrtc::compile`].
struct ProgGuard<'a> {
    nvrtc: &'a Nvrtc,
    prog: Prog,
}

impl Drop for ProgGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `prog` came from a successful nvrtcCreateProgram and is destroyed once, here.
        unsafe { (self.nvrtc.destroy)(&mut self.prog) };
    }
}

impl Nvrtc {
    /// Load NVRTC from `path` and resolve its API.
    pub fn open(path: &Path) -> Result<Arc<Nvrtc>> {
        let lib = VendorLib::open(path, "NVRTC")?;
        // SAFETY: each type is the signature `nvrtc.h` (CUDA 11-13) declares for the symbol.
        let n = unsafe {
            Nvrtc {
                lib,
                version: (0, 0),
                create: lib.get(&["nvrtcCreateProgram"])?,
                compile: lib.get(&["nvrtcCompileProgram"])?,
                log_size: lib.get(&["nvrtcGetProgramLogSize"])?,
                log: lib.get(&["nvrtcGetProgramLog"])?,
                cubin_size: lib.get(&["nvrtcGetCUBINSize"])?,
                cubin: lib.get(&["nvrtcGetCUBIN"])?,
                ptx_size: lib.get(&["nvrtcGetPTXSize"])?,
                ptx: lib.get(&["nvrtcGetPTX"])?,
                destroy: lib.get(&["nvrtcDestroyProgram"])?,
                error_string: lib.get(&["nvrtcGetErrorString"])?,
            }
        };
        // SAFETY: as above, `nvrtcVersion(int *major, int *minor)`.
        let version: VersionFn = unsafe { lib.get(&["nvrtcVersion"])? };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints through the valid pointers.
        let rc = unsafe { version(&mut major, &mut minor) };
        let n = Nvrtc {
            version: (major, minor),
            ..n
        };
        if rc != 0 {
            bail!(
                Compile,
                "NVRTC {}: nvrtcVersion failed: {}",
                path.display(),
                n.status(rc)
            );
        }
        Ok(Arc::new(n))
    }

    /// NVRTC's (major, minor) version.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The file loaded.
    pub fn path(&self) -> &Path {
        self.lib.path()
    }

    /// An `nvrtcResult` by name.
    fn status(&self, rc: c_int) -> String {
        // SAFETY: nvrtcGetErrorString returns a static string for any code.
        let s = unsafe { c_str((self.error_string)(rc)) };
        format!("{s} ({rc})")
    }

    fn check(&self, rc: c_int, what: &str) -> Result<()> {
        if rc != 0 {
            bail!(Compile, "NVRTC {what}: {}", self.status(rc));
        }
        Ok(())
    }

    /// Bytes from a (size, get) pair of a compiled program.
    fn bytes(&self, prog: Prog, size: SizeFn, get: GetFn, what: &str) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: `prog` is a live program; the size is written through a valid pointer.
        self.check(unsafe { size(prog, &mut n) }, what)?;
        let mut buf = vec![0u8; n];
        if n > 0 {
            // SAFETY: `buf` holds exactly the `n` bytes NVRTC said it writes.
            self.check(unsafe { get(prog, buf.as_mut_ptr().cast()) }, what)?;
        }
        Ok(buf)
    }

    /// Compile `src` (named `name` in diagnostics) with `options`; on failure the error carries
    /// the program log.
    pub fn compile(
        &self,
        src: &str,
        name: &str,
        options: &[String],
        out: NvrtcOutput,
    ) -> Result<Vec<u8>> {
        let csrc = CString::new(src)
            .map_err(|_| Error::Compile(format!("NVRTC {name}: the source contains a NUL byte")))?;
        let cname = CString::new(name)
            .map_err(|_| Error::Compile("NVRTC: the program name contains a NUL byte".into()))?;
        let copts = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::Compile(format!("NVRTC {name}: an option contains a NUL byte")))?;
        let ptrs: Vec<*const c_char> = copts.iter().map(|c| c.as_ptr()).collect();
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: the strings are NUL-terminated and outlive the call; no headers are passed
        // (count 0, null arrays), as nvrtc.h allows.
        let rc = unsafe {
            (self.create)(
                &mut prog,
                csrc.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(rc, &format!("nvrtcCreateProgram({name})"))?;
        let guard = ProgGuard { nvrtc: self, prog };
        let n_opts = c_int::try_from(ptrs.len())
            .map_err(|_| Error::Compile(format!("NVRTC {name}: too many options")))?;
        // SAFETY: `prog` is live; `ptrs` holds `n_opts` NUL-terminated strings kept alive by
        // `copts` for the call.
        let rc = unsafe { (self.compile)(guard.prog, n_opts, ptrs.as_ptr()) };
        if rc != 0 {
            let log = self.bytes(guard.prog, self.log_size, self.log, "nvrtcGetProgramLog")?;
            bail!(
                Compile,
                "NVRTC {}.{} compiling {name} with {options:?}: {}\n{}",
                self.version.0,
                self.version.1,
                self.status(rc),
                log_text(&log)
            );
        }
        match out {
            NvrtcOutput::Cubin => {
                self.bytes(guard.prog, self.cubin_size, self.cubin, "nvrtcGetCUBIN")
            }
            NvrtcOutput::Ptx => {
                let mut ptx = self.bytes(guard.prog, self.ptx_size, self.ptx, "nvrtcGetPTX")?;
                if ptx.last() == Some(&0) {
                    ptx.pop();
                }
                Ok(ptx)
            }
        }
    }
}
