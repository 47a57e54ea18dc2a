//! The emulator's memory primitives.
//!
//! - [`Backing`]: one emulated buffer object: a memfd (shared memory file) plus the emulator's
//!   own host mapping of it (the "GPU view"). CPU mappings the process makes (`mmap` of a render
//!   node offset, of `/dev/kfd`, or anonymous shared memory) are further mappings of the same
//!   memfd, so the CPU and the software GPU see the same bytes at different host addresses, and a
//!   CPU `munmap` never pulls memory from under the GPU. The GPU view lives until the last `Arc`
//!   (an allocation, a GPU mapping, or a [`Mapping`] handed to the software GPU) is dropped.
//! - [`copy_from_user`] / [`copy_to_user`]: how the emulated kernel reads and writes memory a
//!   pointer inside an ioctl struct names, failing with EFAULT (never crashing) on a bad address,
//!   like the kernel's own helpers.
//!
//! Not guaranteed: memfds are sparse; sizes are only limited by the emulated VRAM budget.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::driver::api::{errno_error, Prot};
use crate::driver::mapped::Mapping;
use crate::driver::real::page_size;
use crate::Result;

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One emulated buffer object: a memfd and the emulator's own RW mapping of it.
pub(crate) struct Backing {
    fd: OwnedFd,
    len: u64,
    host: u64,
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backing(len={:#x}, host={:#x})", self.len, self.host)
    }
}

impl Backing {
    /// A zero-filled object of `len` bytes (rounded up to pages).
    pub(crate) fn new(len: u64, what: &str) -> Result<Arc<Backing>> {
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
        Ok(Arc::new(Backing {
            fd,
            len,
            host: p as u64,
        }))
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// A view of `[off, off + len)` for the emulator or the software GPU; keeps `self` alive.
    pub(crate) fn view(self: &Arc<Self>, off: u64, len: u64, prot: Prot) -> Result<Mapping> {
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
        // stays mapped until the Backing drops, and `owner` keeps the Backing alive as long as
        // the Mapping lives. Nothing holds Rust references into it.
        Ok(unsafe { Mapping::with_owner(self.host + off, len as usize, prot & Prot::RW, owner) })
    }

    /// Map `[off, off + len)` of the object into the process (a CPU view): at `addr` with
    /// MAP_FIXED when given (the caller checked that the emulator owns that range), else anywhere.
    pub(crate) fn map_cpu(&self, addr: Option<u64>, len: u64, off: u64, prot: Prot) -> Result<u64> {
        if !matches!(off.checked_add(len), Some(e) if e <= self.len) {
            return Err(errno_error(
                libc::EINVAL,
                format!(
                    "emu: mmap {off:#x}+{len:#x} beyond the object's {:#x} bytes",
                    self.len
                ),
            ));
        }
        let mut p = libc::PROT_NONE;
        if prot.contains(Prot::READ) {
            p |= libc::PROT_READ;
        }
        if prot.contains(Prot::WRITE) {
            p |= libc::PROT_WRITE;
        }
        if prot.contains(Prot::EXEC) {
            p |= libc::PROT_EXEC;
        }
        let flags = libc::MAP_SHARED | if addr.is_some() { libc::MAP_FIXED } else { 0 };
        // SAFETY: without an address the kernel picks a free range; with one, the caller
        // verified the range is memory the emulator mapped for the process (a reservation or an
        // earlier emulated mapping), so no Rust object lives there.
        let r = unsafe {
            libc::mmap(
                addr.unwrap_or(0) as *mut libc::c_void,
                len as usize,
                p,
                flags,
                self.fd.as_raw_fd(),
                off as libc::off_t,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(errno_error(
                last_errno(),
                format!("emu: mapping object at {addr:#x?}"),
            ));
        }
        Ok(r as u64)
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        // SAFETY: `host` is our own mapping of `len` bytes; every Mapping of it holds an Arc to
        // this Backing, so none is alive when it drops.
        unsafe { libc::munmap(self.host as *mut libc::c_void, self.len as usize) };
    }
}

/// Read `len` bytes of process memory at `addr` the way `copy_from_user` does: EFAULT (not a
/// crash) when the range is not readable.
pub(crate) fn copy_from_user(addr: u64, len: usize, what: &str) -> Result<Vec<u8>> {
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
pub(crate) fn copy_to_user(addr: u64, data: &[u8], what: &str) -> Result<()> {
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
    fn backing_views_share_bytes_and_user_copies_fault_cleanly() {
        let b = Backing::new(5000, "test").unwrap();
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
        // SAFETY: `cpu` is the 8 KiB mapping made above, unused from here on.
        unsafe { libc::munmap(cpu as *mut libc::c_void, 8192) };
    }
}
