//! [`RealDriver`]: the [`Driver`] that makes the syscalls (libc `open`, `ioctl`, `mmap`,
//! `munmap`, a volatile doorbell store, std fs reads).
//!
//! It keeps books so its safe methods cannot corrupt memory it does not own: it only closes,
//! ioctls or maps descriptors it opened; a `MAP_FIXED` mmap and a `munmap` must fall inside ranges
//! it mapped itself; a doorbell write must land inside a doorbell page it mapped from `/dev/kfd`
//! (64-bit store) or inside a writable mapping of an NVIDIA GPU node `/dev/nvidiaN` (32-bit store,
//! the usermode page's NOTIFY_CHANNEL_PENDING register).
//!
//! Not guaranteed: the kernel follows pointers inside ioctl argument structs (see
//! [`super::kfd::ops`] for wrappers that build them from slices); `read_file`/`list_dir` read the
//! live file system.

use std::any::Any;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

use super::api::{errno_error, ioc_size, Driver, Fd, MapFlags, OpenFlags, Prot};
use super::kfd::{kfd_ioctl_name, KFD_MMAP_TYPE_DOORBELL, KFD_MMAP_TYPE_MASK};
use super::nv::nv_request_name;
use super::vma::VmaMap;
use crate::Result;

/// What a descriptor this driver opened refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FdKind {
    Kfd,
    /// `/dev/nvidia<N>` (a GPU node: its mappings are BAR mappings, the usermode page among them).
    NvGpu,
    Other,
}

/// What a range this driver mapped is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RealVma {
    Plain,
    /// A KFD doorbell page (64-bit doorbells).
    Doorbell,
    /// A writable mapping of `/dev/nvidiaN` (32-bit doorbells at the usermode page's 0x90).
    NvWritable,
}

/// The kernel-backed driver.
#[derive(Default)]
pub struct RealDriver {
    fds: Mutex<HashMap<i32, FdKind>>,
    vmas: Mutex<VmaMap<RealVma>>,
    /// Doorbell ranges `[start, end)` and whether they take 64-bit (KFD) stores, read on every
    /// doorbell write.
    doorbells: RwLock<Vec<(u64, u64, bool)>>,
}

/// The system page size.
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as u64
        } else {
            4096
        }
    })
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn page_round(len: usize) -> u64 {
    (len as u64).div_ceil(page_size()) * page_size()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RealDriver {
    pub fn new() -> RealDriver {
        RealDriver::default()
    }

    fn fd_kind(&self, fd: Fd) -> Result<FdKind> {
        lock(&self.fds).get(&fd.0).copied().ok_or_else(|| {
            errno_error(
                libc::EBADF,
                format!("fd {} was not opened by this driver", fd.0),
            )
        })
    }

    fn refresh_doorbells(&self, vmas: &VmaMap<RealVma>) {
        let list = vmas
            .iter()
            .filter(|v| v.value != RealVma::Plain)
            .map(|v| (v.start, v.end, v.value == RealVma::Doorbell))
            .collect();
        *self.doorbells.write().unwrap_or_else(|e| e.into_inner()) = list;
    }
}

/// A MAP_FIXED target must be memory this driver mapped (a reservation), never foreign memory.
fn check_fixed(
    vmas: &VmaMap<RealVma>,
    addr: Option<u64>,
    span: u64,
    flags: MapFlags,
) -> std::result::Result<(), &'static str> {
    if !flags.contains(MapFlags::FIXED) {
        return Ok(());
    }
    let Some(a) = addr else {
        return Err("MAP_FIXED needs an address");
    };
    if !vmas.covers(a, a.saturating_add(span)) {
        return Err("MAP_FIXED target is not inside memory this driver mapped");
    }
    Ok(())
}

/// The most tries of one ioctl interrupted by EINTR/EAGAIN (the HCQ wait timeout bounds the time).
const IOCTL_MAX_TRIES: u64 = 100_000;

/// `ioctl(2)` on our fd, retried on EINTR/EAGAIN at most [`IOCTL_MAX_TRIES`] times and for at most
/// the HCQ wait timeout; then an `Error::Timeout` naming the request.
///
/// # Safety
/// The kernel must read and write at most `arg.len()` bytes at `arg` for `request`.
unsafe fn raw_ioctl(fd: Fd, request: u64, arg: &mut [u8], name: &str) -> Result<()> {
    let what = || format!("{name} ({request:#010x}) on fd {}", fd.0);
    let what_retry = || format!("{} retried on EINTR/EAGAIN", what());
    let timeout = super::deadline::wait_timeout();
    super::deadline::poll_bounded(what_retry, timeout, IOCTL_MAX_TRIES, || {
        // SAFETY: the fd is ours; `arg` is a live, exclusively borrowed buffer as large as what
        // the kernel accesses for this request (the caller's contract).
        let r = unsafe { libc::ioctl(fd.0, request as libc::c_ulong, arg.as_mut_ptr()) };
        if r != -1 {
            return Ok(Some(()));
        }
        match last_errno() {
            libc::EINTR | libc::EAGAIN => Ok(None),
            e => Err(errno_error(e, what())),
        }
    })
}

fn map_flags(flags: MapFlags) -> i32 {
    let mut f = 0;
    for (ours, theirs) in [
        (MapFlags::SHARED, libc::MAP_SHARED),
        (MapFlags::PRIVATE, libc::MAP_PRIVATE),
        (MapFlags::FIXED, libc::MAP_FIXED),
        (MapFlags::ANONYMOUS, libc::MAP_ANONYMOUS),
        (MapFlags::NORESERVE, libc::MAP_NORESERVE),
        (MapFlags::POPULATE, libc::MAP_POPULATE),
    ] {
        if flags.contains(ours) {
            f |= theirs;
        }
    }
    f
}

pub(crate) fn prot_flags(prot: Prot) -> i32 {
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
    p
}

impl Driver for RealDriver {
    fn name(&self) -> &'static str {
        "real"
    }

    fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd> {
        let Ok(c) = CString::new(path) else {
            return Err(errno_error(
                libc::EINVAL,
                format!("open({path:?}): path contains NUL"),
            ));
        };
        let mut f = libc::O_CLOEXEC;
        f |= match (
            flags.contains(OpenFlags::READ),
            flags.contains(OpenFlags::WRITE),
        ) {
            (_, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
        };
        if flags.contains(OpenFlags::NONBLOCK) {
            f |= libc::O_NONBLOCK;
        }
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        let fd = unsafe { libc::open(c.as_ptr(), f) };
        if fd < 0 {
            return Err(errno_error(last_errno(), format!("open({path:?})")));
        }
        let nv_gpu = path
            .strip_prefix("/dev/nvidia")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let kind = if path == "/dev/kfd" {
            FdKind::Kfd
        } else if nv_gpu {
            FdKind::NvGpu
        } else {
            FdKind::Other
        };
        lock(&self.fds).insert(fd, kind);
        Ok(Fd(fd))
    }

    fn close(&self, fd: Fd) -> Result<()> {
        if lock(&self.fds).remove(&fd.0).is_none() {
            return Err(errno_error(
                libc::EBADF,
                format!("close({}): not opened by this driver", fd.0),
            ));
        }
        // SAFETY: the fd was opened by this driver and is removed from its table, so no other
        // code of ours uses it after this close.
        if unsafe { libc::close(fd.0) } != 0 {
            return Err(errno_error(last_errno(), format!("close({})", fd.0)));
        }
        Ok(())
    }

    fn ioctl(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        let name = kfd_ioctl_name(request)
            .or_else(|| nv_request_name(request))
            .unwrap_or("ioctl");
        self.fd_kind(fd)?;
        if arg.len() != ioc_size(request) {
            return Err(errno_error(
                libc::EINVAL,
                format!(
                    "{name} {request:#010x}: argument is {} bytes, request encodes {}",
                    arg.len(),
                    ioc_size(request)
                ),
            ));
        }
        // SAFETY: `arg` is exactly `_IOC_SIZE(request)` bytes (checked above), which is all the
        // kernel reads or writes at that pointer.
        unsafe { raw_ioctl(fd, request, arg, name) }
    }

    fn ioctl_raw(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        let name = nv_request_name(request).unwrap_or("ioctl");
        if self.fd_kind(fd)? != FdKind::Other {
            return Err(errno_error(
                libc::ENOTTY,
                format!(
                    "{name} ({request:#x}): unsized requests go to /dev/nvidia-uvm, not fd {}",
                    fd.0
                ),
            ));
        }
        // SAFETY: callers pass the exact struct of this request (the `Driver::ioctl_raw`
        // contract); the UVM driver reads and writes exactly its struct at the pointer.
        unsafe { raw_ioctl(fd, request, arg, name) }
    }

    fn mmap(
        &self,
        addr: Option<u64>,
        len: usize,
        prot: Prot,
        flags: MapFlags,
        fd: Option<Fd>,
        offset: u64,
    ) -> Result<u64> {
        let what = format!("mmap(addr={addr:#x?}, len={len:#x}, {prot:?}, {flags:?}, fd={fd:?}, offset={offset:#x})");
        if len == 0 {
            return Err(errno_error(libc::EINVAL, format!("{what}: zero length")));
        }
        let kind = match fd {
            Some(f) => Some(self.fd_kind(f)?),
            None => None,
        };
        let mut vmas = lock(&self.vmas);
        let span = page_round(len);
        if let Err(why) = check_fixed(&vmas, addr, span, flags) {
            return Err(errno_error(libc::EINVAL, format!("{what}: {why}")));
        }
        let raw_fd = fd.map_or(-1, |f| f.0);
        // SAFETY: without MAP_FIXED the kernel picks a free range; with MAP_FIXED the target range
        // was checked above to be memory this driver mapped (no Rust object lives there). The fd,
        // if any, is one this driver opened.
        let p = unsafe {
            libc::mmap(
                addr.unwrap_or(0) as *mut libc::c_void,
                len,
                prot_flags(prot),
                map_flags(flags),
                raw_fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno_error(last_errno(), what));
        }
        let at = p as u64;
        let vma = match kind {
            Some(FdKind::Kfd) if offset & KFD_MMAP_TYPE_MASK == KFD_MMAP_TYPE_DOORBELL => {
                RealVma::Doorbell
            }
            Some(FdKind::NvGpu) if prot.contains(Prot::WRITE) => RealVma::NvWritable,
            _ => RealVma::Plain,
        };
        vmas.insert(at, at + span, vma);
        self.refresh_doorbells(&vmas);
        Ok(at)
    }

    fn munmap(&self, addr: u64, len: usize) -> Result<()> {
        let mut vmas = lock(&self.vmas);
        let end = addr.saturating_add(page_round(len));
        if len == 0 || !vmas.covers(addr, end) {
            return Err(errno_error(
                libc::EINVAL,
                format!("munmap({addr:#x}, {len:#x}): not memory this driver mapped"),
            ));
        }
        // SAFETY: the whole range was mapped by this driver (checked above), so unmapping it
        // cannot pull memory from under Rust objects; users reach it only through Mappings.
        if unsafe { libc::munmap(addr as *mut libc::c_void, len) } != 0 {
            return Err(errno_error(
                last_errno(),
                format!("munmap({addr:#x}, {len:#x})"),
            ));
        }
        vmas.remove(addr, end);
        self.refresh_doorbells(&vmas);
        Ok(())
    }

    fn write_doorbell(&self, addr: u64, value: u64) -> Result<()> {
        let wide = self
            .doorbells
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|&&(s, e, wide)| addr >= s && addr + if wide { 8 } else { 4 } <= e)
            .map(|&(_, _, wide)| wide);
        let fault = |why: &str| {
            Err(errno_error(
                libc::EFAULT,
                format!("write_doorbell({addr:#x}, {value:#x}): {why}"),
            ))
        };
        match wide {
            None => fault("not inside a mapped doorbell page"),
            Some(true) if addr % 8 != 0 => fault("KFD doorbells are 8-byte aligned"),
            Some(false) if addr % 4 != 0 => fault("NVIDIA doorbells are 4-byte aligned"),
            Some(false) if value > u64::from(u32::MAX) => fault("NVIDIA doorbells are 32-bit"),
            Some(true) => {
                fence(Ordering::SeqCst);
                // SAFETY: `addr` is 8-byte aligned and inside a doorbell page this driver mapped
                // from /dev/kfd (checked above); doorbell pages are device MMIO written this way.
                unsafe { std::ptr::write_volatile(addr as *mut u64, value) };
                Ok(())
            }
            Some(false) => {
                fence(Ordering::SeqCst);
                // SAFETY: `addr` is 4-byte aligned and inside a writable mapping of an NVIDIA GPU
                // node this driver made (checked above), so a 32-bit store lands in mapped memory.
                unsafe { std::ptr::write_volatile(addr as *mut u32, value as u32) };
                Ok(())
            }
        }
    }

    fn read_file(&self, path: &str) -> Result<String> {
        std::fs::read_to_string(path).map_err(|e| {
            errno_error(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("read {path}: {e}"),
            )
        })
    }

    fn list_dir(&self, path: &str) -> Result<Vec<String>> {
        let rd = std::fs::read_dir(path).map_err(|e| {
            errno_error(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("list {path}: {e}"),
            )
        })?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| errno_error(libc::EIO, format!("list {path}: {e}")))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_refuses_foreign_memory_and_fds() {
        let d = RealDriver::new();
        let heap = vec![0u8; 8192];
        let a = heap.as_ptr() as u64 & !4095;
        assert!(
            d.munmap(a, 4096).is_err(),
            "munmap of memory the driver did not map"
        );
        let fixed = d.mmap(
            Some(a),
            4096,
            Prot::RW,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
            None,
            0,
        );
        assert!(fixed.is_err(), "MAP_FIXED over foreign memory");
        assert_eq!(d.close(Fd(0)).unwrap_err().errno(), Some(libc::EBADF));
        let mut b = [0u8; 8];
        assert_eq!(
            d.ioctl(Fd(1), 0xC0084B03, &mut b).unwrap_err().errno(),
            Some(libc::EBADF)
        );
        assert_eq!(
            d.write_doorbell(a, 1).unwrap_err().errno(),
            Some(libc::EFAULT)
        );
        drop(heap);
    }

    #[test]
    fn anonymous_reserve_then_fixed_then_unmap() {
        let d = RealDriver::new();
        let r = d
            .mmap(
                None,
                0x4000,
                Prot::empty(),
                MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::NORESERVE,
                None,
                0,
            )
            .unwrap();
        let f = d
            .mmap(
                Some(r + 0x1000),
                0x1000,
                Prot::RW,
                MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED,
                None,
                0,
            )
            .unwrap();
        assert_eq!(f, r + 0x1000);
        // SAFETY: the page is mapped RW by `d` until the munmap below.
        let m = unsafe { super::super::mapped::Mapping::from_raw(f, 0x1000, Prot::RW) };
        m.write_u64(8, 42).unwrap();
        assert_eq!(m.read_u64(8).unwrap(), 42);
        drop(m);
        d.munmap(r, 0x4000).unwrap();
        assert!(d.munmap(r, 0x1000).is_err(), "already unmapped");
    }

    #[test]
    fn reads_files_and_dirs() {
        let d = RealDriver::new();
        assert!(d.read_file("/proc/self/stat").unwrap().contains(' '));
        assert!(d
            .list_dir("/proc/self")
            .unwrap()
            .iter()
            .any(|n| n == "stat"));
        assert_eq!(
            d.read_file("/nonexistent/x").unwrap_err().errno(),
            Some(libc::ENOENT)
        );
        assert_eq!(
            d.open("/nonexistent/x", OpenFlags::RDWR)
                .unwrap_err()
                .errno(),
            Some(libc::ENOENT)
        );
    }
}
