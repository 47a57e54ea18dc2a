//! Executable memory for machine code rawgrad links itself (the `LLVM` CPU device's kernels: an
//! ELF relocatable object laid out and relocated by `runtime::cpu::objload`), and the addresses of
//! the host functions such code calls (libm, libc).
//!
//! [`CodeMemory`] is an anonymous private mapping: writable while the loader fills it, then sealed
//! once into three page-aligned regions (code read+execute, constants read-only, data
//! read+write); after sealing it is never written by the host again and its kernel entries can be
//! taken ([`CodeMemory::kernel`]). The mapping is unmapped when the last [`KernelFn`] taken from it
//! and the memory itself are dropped.
//!
//! [`host_symbol`] looks a name up in libm (`libm.so.6`, opened once) and then in the process's
//! global namespace (`dlsym(RTLD_DEFAULT)`: libc, and whatever else the process loaded).
//!
//! Not guaranteed: the bytes executed are trusted to be a kernel with the entry ABI of
//! [`crate::driver::dl`], linked by rawgrad's loader from an object rawgrad's LLVM renderer and
//! libLLVM produced (the compile cache checks its entries' checksums, not their meaning). A system
//! that forbids executable anonymous memory (SELinux `execmem`, PaX) refuses the seal with the OS
//! error.

use std::ffi::c_void;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use libloading::os::unix::{Library as RawLibrary, RTLD_LOCAL, RTLD_NOW};

use crate::driver::dl::{KernelEntry, KernelFn};
use crate::{bail, ensure, Result};

/// The page size code regions are aligned to.
pub fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf only reads a system constant.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
    })
}

/// An anonymous mapping that holds linked machine code (see the module doc).
pub struct CodeMemory {
    ptr: *mut u8,
    len: usize,
    /// The executable region, once sealed.
    exec: Option<Range<usize>>,
    what: String,
}

// SAFETY: the mapping is owned by this value alone. Before sealing it is written only through
// `&mut self`; after sealing nothing writes it, so sharing or moving it across threads cannot race.
unsafe impl Send for CodeMemory {}
// SAFETY: see `Send`: `&CodeMemory` gives no write access (only `bytes_mut(&mut self)` writes).
unsafe impl Sync for CodeMemory {}

impl CodeMemory {
    /// A zeroed, writable mapping of at least `len` bytes (rounded up to pages); `what` names the
    /// code in errors.
    pub fn new(len: usize, what: &str) -> Result<CodeMemory> {
        let page = page_size();
        let Some(len) = len.max(1).checked_next_multiple_of(page) else {
            bail!(Driver, "{what}: code memory of {len} bytes overflows");
        };
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                Driver,
                "{what}: mmap of {len} bytes of code memory failed: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(CodeMemory {
            ptr: ptr.cast::<u8>(),
            len,
            exec: None,
            what: what.to_string(),
        })
    }

    /// The address of byte 0.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The mapping's length (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: a mapping has at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, for the loader to fill; refused once sealed.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        ensure!(
            self.exec.is_none(),
            Driver,
            "{}: code memory is sealed; it cannot be written",
            self.what
        );
        // SAFETY: `ptr` maps `len` readable and writable bytes (not sealed yet) owned by `self`,
        // and the returned slice borrows `self` mutably, so no other access exists meanwhile.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Make `[0, exec_end)` read+execute, `[exec_end, ro_end)` read-only and the rest read+write
    /// (both bounds page-aligned). After this the memory is never written by the host.
    pub fn seal(&mut self, exec_end: usize, ro_end: usize) -> Result<()> {
        let page = page_size();
        ensure!(
            self.exec.is_none(),
            Driver,
            "{}: code memory sealed twice",
            self.what
        );
        ensure!(
            exec_end % page == 0 && ro_end % page == 0 && exec_end <= ro_end && ro_end <= self.len,
            Driver,
            "{}: regions [0, {exec_end:#x}) code, [{exec_end:#x}, {ro_end:#x}) constants are not \
             page-aligned within {:#x} bytes",
            self.what,
            self.len
        );
        let regions = [
            (0..exec_end, libc::PROT_READ | libc::PROT_EXEC),
            (exec_end..ro_end, libc::PROT_READ),
        ];
        for (r, prot) in regions {
            if r.is_empty() {
                continue;
            }
            // SAFETY: the range lies inside this mapping (checked above) and is page-aligned; no
            // reference into the bytes is live (`bytes_mut` borrows end before `seal`'s `&mut`).
            let rc =
                unsafe { libc::mprotect(self.ptr.add(r.start).cast::<c_void>(), r.len(), prot) };
            if rc != 0 {
                bail!(
                    Driver,
                    "{}: mprotect of code memory [{:#x}, {:#x}) failed: {}",
                    self.what,
                    r.start,
                    r.end,
                    std::io::Error::last_os_error()
                );
            }
        }
        self.exec = Some(0..exec_end);
        Ok(())
    }

    /// The kernel entry at byte `offset` of the sealed code region, named `symbol`.
    pub fn kernel(self: &Arc<Self>, offset: usize, symbol: &str) -> Result<KernelFn> {
        let Some(exec) = &self.exec else {
            bail!(
                Driver,
                "{}: kernel {symbol} taken before the code memory was sealed",
                self.what
            );
        };
        ensure!(
            exec.contains(&offset),
            Driver,
            "{}: kernel {symbol} at {offset:#x} is outside the code region [0, {:#x})",
            self.what,
            exec.end
        );
        // The address is the start of the function `symbol` in sealed executable memory, placed
        // there by the loader from an object whose `NAME_rg` symbols the LLVM renderer defines with
        // the kernel entry ABI (the trust the module doc states).
        // SAFETY: `offset` is inside the read+execute region of this live mapping; a data pointer
        // to a function's first byte converts to a fn pointer of that function's ABI, and the
        // KernelFn keeps this mapping alive for as long as the pointer can be called.
        let entry = unsafe {
            std::mem::transmute::<*const c_void, KernelEntry>(self.ptr.add(offset).cast::<c_void>())
        };
        let owner: Arc<dyn Send + Sync> = self.clone();
        Ok(KernelFn::from_entry(entry, symbol, &self.what, owner))
    }
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `new` with this address and length and is unmapped
        // once; every KernelFn that could call into it holds an Arc to `self`, so none is left.
        unsafe { libc::munmap(self.ptr.cast::<c_void>(), self.len) };
    }
}

impl fmt::Debug for CodeMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CodeMemory({}, {:#x} bytes at {:#x})",
            self.what,
            self.len,
            self.addr()
        )
    }
}

/// libm, opened once (`None` when the system has no `libm.so.6`).
fn libm() -> Option<&'static RawLibrary> {
    static LIBM: OnceLock<Option<RawLibrary>> = OnceLock::new();
    LIBM.get_or_init(|| {
        // SAFETY: libm's initializers only set up its own state; the handle is kept for the life
        // of the process (in the static), so addresses taken from it stay valid.
        unsafe { RawLibrary::open(Some("libm.so.6"), RTLD_NOW | RTLD_LOCAL) }.ok()
    })
    .as_ref()
}

/// The process's global namespace (`dlopen(NULL)`).
fn this_process() -> &'static RawLibrary {
    static THIS: OnceLock<RawLibrary> = OnceLock::new();
    THIS.get_or_init(RawLibrary::this)
}

/// The address of the host function or data `name` (libm first, then the process's global
/// namespace), `None` when neither defines it.
pub fn host_symbol(name: &str) -> Option<u64> {
    let mut sym = Vec::with_capacity(name.len() + 1);
    sym.extend_from_slice(name.as_bytes());
    sym.push(0);
    let libs = libm().into_iter().chain(std::iter::once(this_process()));
    for lib in libs {
        // SAFETY: only the symbol's address is read (typed as a plain pointer, valid for any
        // symbol); it is neither called nor dereferenced here, and both libraries stay loaded.
        if let Ok(p) = unsafe { lib.get::<*mut c_void>(&sym) } {
            let addr = *p as u64;
            if addr != 0 {
                return Some(addr);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libm_and_libc_symbols_resolve_and_unknown_ones_do_not() {
        assert!(host_symbol("exp2f").is_some());
        assert!(host_symbol("memcpy").is_some());
        assert!(host_symbol("rawgrad_no_such_symbol").is_none());
    }

    #[test]
    fn sealing_checks_regions_and_forbids_writes() {
        let page = page_size();
        let mut m = CodeMemory::new(3 * page, "test").unwrap();
        assert_eq!(m.len(), 3 * page);
        m.bytes_mut().unwrap()[0] = 0xc3; // ret
        assert!(m.seal(1, page).is_err(), "unaligned");
        assert!(m.seal(page, 4 * page).is_err(), "past the end");
        m.seal(page, 2 * page).unwrap();
        assert!(m.bytes_mut().is_err());
        assert!(m.seal(page, 2 * page).is_err());
        let m = Arc::new(m);
        let e = m.kernel(page, "outside").unwrap_err();
        assert!(e.message().contains("outside the code region"), "{e}");
    }
}
