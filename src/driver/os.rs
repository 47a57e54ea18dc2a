//! Operating-system services behind safe functions, for the code above `driver/` that emulates a
//! kernel driver (`mockgpu`, which carries `#![forbid(unsafe_code)]`):
//!
//! - [`SharedMemory`]: a memfd (shared memory file) plus its own read-write host mapping; views
//!   of it ([`SharedMemory::view`]) keep it alive, and further mappings into the process
//!   ([`SharedMemory::map_cpu`]) see the same bytes at other addresses.
//! - [`copy_from_user`] / [`copy_to_user`]: reads and writes of memory a pointer inside an ioctl
//!   struct names, failing with EFAULT (never crashing) on a bad address, like the kernel's
//!   helpers of those names.
//! - [`map_anonymous`] and [`unmap`]: anonymous mappings and unmapping, where a `MAP_FIXED` target
//!   or an unmapped range must be a [`FixedTarget`]: a range the caller's own record of the
//!   mappings it made ([`VmaMap`]) covers, checked here, the same rule `RealDriver` keeps.
//! - [`clock_ns`]: a clock reading.
//!
//! Not guaranteed: the [`VmaMap`] record is the caller's; these functions trust that what it
//! lists was mapped through the caller (the emulator inserts only addresses these functions
//! returned). Memfds are sparse; sizes are only limited by what the caller allows.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use super::api::{errno_error, Prot};
use super::mapped::Mapping;
use super::real::{page_size, prot_flags};
use super::vma::VmaMap;
use crate::Result;

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A range `[addr, addr + len)` the caller's record of its own mappings covers: the only kind of
/// address these functions map over (`MAP_FIXED`) or unmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedTarget {
    addr: u64,
    len: u64,
}

impl FixedTarget {
    /// The range, when page-aligned, non-empty and covered by `owned`.
    pub fn within<T: Clone>(owned: &VmaMap<T>, addr: u64, len: u64) -> Option<FixedTarget> {
        let end = addr.checked_add(len)?;
        let aligned = addr % page_size() == 0 && len % page_size() == 0;
        (aligned && len > 0 && owned.covers(addr, end)).then_some(FixedTarget { addr, len })
    }

    /// Start address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
}

/// A memfd and this process's own read-write mapping of all of it.
pub struct SharedMemory {
    fd: OwnedFd,
    len: u64,
    host: u64,
}

impl std::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedMemory(len={:#x}, host={:#x})",
            self.len, self.host
        )
    }
}

impl SharedMemory {
    /// A zero-filled object of `len` bytes (rounded up to pages).
    pub fn new(len: u64, what: &str) -> Result<Arc<SharedMemory>> {
        let len = len.max(1).div_ceil(page_size()) * page_size();
        let name = c"rawgrad-emu";
        // SAFETY: `name` is a valid NUL-terminated string; memfd_create has no other preconditions.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(errno_error(
                last_errno(),
                format!("emu: memfd_create for {what}"),
            ));
        }
        // SAFETY: `raw` is a fresh descriptor we own exclusively.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on our own descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(errno_error(
                last_errno(),
                format!("emu: sizing {what} to {len:#x} bytes"),
            ));
        }
        // SAFETY: a new shared mapping at a kernel-chosen address of our own memfd.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno_error(
                last_errno(),
                format!("emu: mapping {what} ({len:#x} bytes)"),
            ));
        }
        Ok(Arc::new(SharedMemory {
            fd,
            len,
            host: p as u64,
        }))
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty (never: `new` rounds up to a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A view of `[off, off + len)` through the object's own mapping; keeps `self` alive.
    pub fn view(self: &Arc<Self>, off: u64, len: u64, prot: Prot) -> Result<Mapping> {
        if !matches!(off.checked_add(len), Some(e) if e <= self.len) {
            return Err(errno_error(
                libc::EFAULT,
                format!(
                    "emu: view {off:#x}+{len:#x} outside buffer of {:#x} bytes",
                    self.len
                ),
            ));
        }
        let owner: Arc<dyn std::any::Any + Send + Sync> = self.clone();
        // SAFETY: the range lies inside our own RW mapping of the memfd (checked above), which
        // stays mapped until the SharedMemory drops, and `owner` keeps it alive as long as the
        // Mapping lives. Nothing holds Rust references into it.
        Ok(unsafe { Mapping::with_owner(self.host + off, len as usize, prot & Prot::RW, owner) })
    }

    /// Map `[off, off + len)` of the object into the process (shared): over `at` when given,
    /// else where the kernel chooses. Returns the address.
    pub fn map_cpu(&self, at: Option<FixedTarget>, len: u64, off: u64, prot: Prot) -> Result<u64> {
        if !matches!(off.checked_add(len), Some(e) if e <= self.len) {
            return Err(errno_error(
                libc::EINVAL,
                format!(
                    "emu: mmap {off:#x}+{len:#x} beyond the object's {:#x} bytes",
                    self.len
                ),
            ));
        }
        if at.is_some_and(|t| t.len < len) {
            return Err(errno_error(
                libc::EINVAL,
                format!("emu: mmap of {len:#x} bytes over a smaller fixed target {at:#x?}"),
            ));
        }
        let flags = libc::MAP_SHARED | if at.is_some() { libc::MAP_FIXED } else { 0 };
        // SAFETY: without a target the kernel picks a free range; a FixedTarget is a range the
        // caller's record shows it mapped for the process earlier (checked when the target was
        // made, and `len` fits in it, checked above), so no Rust object lives there.
        let r = unsafe {
            libc::mmap(
                at.map_or(0, |t| t.addr) as *mut libc::c_void,
                len as usize,
                prot_flags(prot),
                flags,
                self.fd.as_raw_fd(),
                off as libc::off_t,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(errno_error(
                last_errno(),
                format!("emu: mapping object at {at:#x?}"),
            ));
        }
        Ok(r as u64)
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: `host` is our own mapping of `len` bytes; every Mapping of it holds an Arc to
        // this object, so none is alive when it drops.
        unsafe { libc::munmap(self.host as *mut libc::c_void, self.len as usize) };
    }
}

/// A private anonymous mapping of `len` bytes (read/write bits of `prot` only): over `at` when
/// given; else at `hint` if the kernel agrees (a hint never replaces a mapping), else anywhere.
pub fn map_anonymous(
    at: Option<FixedTarget>,
    hint: Option<u64>,
    len: u64,
    prot: Prot,
    noreserve: bool,
) -> Result<u64> {
    if at.is_some_and(|t| t.len < len) {
        return Err(errno_error(
            libc::EINVAL,
            format!("anonymous mmap of {len:#x} bytes over a smaller fixed target {at:#x?}"),
        ));
    }
    let mut f = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    if noreserve {
        f |= libc::MAP_NORESERVE;
    }
    if at.is_some() {
        f |= libc::MAP_FIXED;
    }
    let addr = at.map(|t| t.addr).or(hint).unwrap_or(0);
    // SAFETY: a fresh anonymous mapping; with MAP_FIXED the target is a range the caller's record
    // shows it mapped for the process (FixedTarget), so no Rust object lives there; a hint
    // without MAP_FIXED never replaces an existing mapping.
    let r = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len as usize,
            prot_flags(prot & Prot::RW),
            f,
            -1,
            0,
        )
    };
    if r == libc::MAP_FAILED {
        return Err(errno_error(
            last_errno(),
            format!("anonymous mmap of {len:#x} bytes failed"),
        ));
    }
    Ok(r as u64)
}

/// Unmap the whole of `target`.
pub fn unmap(target: FixedTarget) -> Result<()> {
    // SAFETY: a FixedTarget is a range the caller's record shows it mapped for the process; the
    // process reaches it only through Mappings, and the emulator's own views are separate
    // mappings, so nothing of ours dangles.
    if unsafe { libc::munmap(target.addr as *mut libc::c_void, target.len as usize) } != 0 {
        return Err(errno_error(
            last_errno(),
            format!("munmap({:#x}, {:#x})", target.addr, target.len),
        ));
    }
    Ok(())
}

/// `clock_gettime(clock)` in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusive out-parameter; an unknown clock fails with EINVAL.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(errno_error(last_errno(), format!("clock_gettime({clock})")));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Read `len` bytes of process memory at `addr` the way `copy_from_user` does: EFAULT (not a
/// crash) when the range is not readable.
pub fn copy_from_user(addr: u64, len: usize, what: &str) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel copies from our own address space into `buf` (exactly `len` bytes, a
    // live exclusive buffer) and validates the source range, failing with EFAULT if unmapped.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n == len as isize {
        return Ok(buf);
    }
    let e = if n < 0 { last_errno() } else { libc::EFAULT };
    if e == libc::ENOSYS || e == libc::EPERM {
        return pipe_copy(addr, &mut buf, false, what).map(|_| buf);
    }
    Err(errno_error(
        libc::EFAULT,
        format!("emu: {what}: cannot read {len} bytes at {addr:#x}"),
    ))
}

/// Write `data` to process memory at `addr` the way `copy_to_user` does (EFAULT on a bad range).
pub fn copy_to_user(addr: u64, data: &[u8], what: &str) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: the kernel reads `data` and writes the target range in our own address space,
    // validating it (EFAULT if not writable). The target is caller-owned user memory named by an
    // ioctl argument, exactly what the real driver would write.
    let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n == data.len() as isize {
        return Ok(());
    }
    let e = if n < 0 { last_errno() } else { libc::EFAULT };
    if e == libc::ENOSYS || e == libc::EPERM {
        let mut copy = data.to_vec();
        return pipe_copy(addr, &mut copy, true, what);
    }
    Err(errno_error(
        libc::EFAULT,
        format!(
            "emu: {what}: cannot write {} bytes at {addr:#x}",
            data.len()
        ),
    ))
}

/// Fallback when process_vm_readv/writev are filtered (seccomp): move the bytes through a pipe,
/// letting read(2)/write(2) validate the user range.
fn pipe_copy(addr: u64, buf: &mut [u8], to_user: bool, what: &str) -> Result<()> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(errno_error(last_errno(), format!("emu: {what}: pipe")));
    }
    // SAFETY: both descriptors are fresh and owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fault = || {
        errno_error(
            libc::EFAULT,
            format!("emu: {what}: bad user range at {addr:#x}"),
        )
    };
    for (i, chunk) in buf.chunks_mut(4096).enumerate() {
        let user = (addr + (i * 4096) as u64) as *mut libc::c_void;
        let n = chunk.len();
        let (src, dst): (*const libc::c_void, *mut libc::c_void) = if to_user {
            (chunk.as_ptr().cast(), user)
        } else {
            (user as *const libc::c_void, chunk.as_mut_ptr().cast())
        };
        // SAFETY: write(2) reads `n` bytes from `src` and the kernel validates user ranges (EFAULT
        // instead of a fault); a chunk of at most 4096 bytes fits in the pipe buffer.
        if unsafe { libc::write(wr.as_raw_fd(), src, n) } != n as isize {
            return Err(fault());
        }
        // SAFETY: read(2) writes `n` bytes to `dst`, validated by the kernel likewise.
        if unsafe { libc::read(rd.as_raw_fd(), dst, n) } != n as isize {
            return Err(fault());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_views_share_bytes_and_user_copies_fault_cleanly() {
        let b = SharedMemory::new(5000, "test").unwrap();
        assert_eq!(b.len(), 8192);
        let v = b.view(4096, 4096, Prot::RW).unwrap();
        v.write_u32(0, 7).unwrap();
        let cpu = b.map_cpu(None, 8192, 0, Prot::RW).unwrap();
        let got = copy_from_user(cpu + 4096, 4, "test").unwrap();
        assert_eq!(got, 7u32.to_le_bytes());
        copy_to_user(cpu + 8, &[1, 2, 3], "test").unwrap();
        let w = b.view(0, 16, Prot::READ).unwrap();
        let mut out = [0u8; 3];
        w.read_bytes(8, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert!(b.view(8000, 1000, Prot::READ).is_err());
        assert_eq!(
            copy_from_user(8, 4, "test").unwrap_err().errno(),
            Some(libc::EFAULT)
        );
        assert_eq!(
            copy_to_user(8, &[1], "test").unwrap_err().errno(),
            Some(libc::EFAULT)
        );
        let mut owned = VmaMap::new();
        owned.insert(cpu, cpu + 8192, ());
        assert!(FixedTarget::within(&owned, cpu, 8192 + 4096).is_none());
        assert!(FixedTarget::within(&owned, cpu + 1, 4096).is_none());
        let t = FixedTarget::within(&owned, cpu, 8192).unwrap();
        assert_eq!(b.map_cpu(Some(t), 8192, 0, Prot::READ).unwrap(), cpu);
        assert!(b.map_cpu(Some(t), 3 * 4096, 0, Prot::READ).is_err());
        unmap(t).unwrap();
        assert_eq!(
            copy_from_user(cpu, 4, "test").unwrap_err().errno(),
            Some(libc::EFAULT)
        );
        let anon = map_anonymous(None, None, 4096, Prot::RW, false).unwrap();
        copy_to_user(anon, &[9], "test").unwrap();
        assert_eq!(copy_from_user(anon, 1, "test").unwrap(), [9]);
        owned.insert(anon, anon + 4096, ());
        unmap(FixedTarget::within(&owned, anon, 4096).unwrap()).unwrap();
        assert!(clock_ns(libc::CLOCK_MONOTONIC_RAW).unwrap() > 0);
        assert!(clock_ns(-1).is_err());
    }
}
