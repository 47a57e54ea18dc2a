//! The [`Driver`] trait: the one door to the kernel. Every open, close, ioctl, mmap, munmap,
//! doorbell write and sysfs read of a GPU backend goes through it, so the same runtime code runs on
//! the real kernel driver ([`super::real::RealDriver`]) and on the in-process emulator
//! (`EmuDriver` in `mockgpu/`, a layer above that implements this trait).
//!
//! Also here: the Linux `_IOC` request encoding ([`ioc`], [`ioc_size`], ...), typed requests
//! ([`Ioctl`]), the [`IoctlArg`] marker for argument structs and [`ioctl_struct`], which passes
//! such a struct as bytes and turns a failure into an error naming the ioctl, the errno and the
//! struct's key fields.
//!
//! Not guaranteed: pointers *inside* an argument struct (device id arrays, event arrays) are
//! followed by the kernel (or the emulator) as the C API does; the typed wrappers in
//! [`super::kfd`] build those pointers from slices and are the intended way to call such ioctls.

use std::any::Any;
use std::marker::PhantomData;

use bitflags::bitflags;

use crate::{Error, Result};

/// A file descriptor handed out by a [`Driver`] (real, or a fake number from the emulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fd(pub i32);

bitflags! {
    /// How to open a device node. `O_CLOEXEC` is always added.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct OpenFlags: u32 {
        const READ = 1;
        const WRITE = 2;
        const NONBLOCK = 4;
        /// `O_RDWR`: what `/dev/kfd` and render nodes are opened with.
        const RDWR = Self::READ.bits() | Self::WRITE.bits();
    }
}

bitflags! {
    /// Page protection of a mapping; the empty set is `PROT_NONE` (an address-space reservation).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Prot: u32 {
        const READ = 1;
        const WRITE = 2;
        const EXEC = 4;
        const RW = Self::READ.bits() | Self::WRITE.bits();
    }
}

bitflags! {
    /// `mmap` flags (the subset GPU runtimes use).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MapFlags: u32 {
        const SHARED = 1;
        const PRIVATE = 2;
        const FIXED = 4;
        const ANONYMOUS = 8;
        const NORESERVE = 16;
        const POPULATE = 32;
    }
}

/// The kernel as a GPU runtime sees it. Implementations: [`super::real::RealDriver`] (syscalls)
/// and the emulator's `EmuDriver` (`mockgpu/`: an emulated KFD with virtual sysfs and software GPUs).
///
/// Both hand out real host addresses from [`Driver::mmap`], so memory is read and written through
/// [`super::mapped::Mapping`] the same way on both.
pub trait Driver: Send + Sync {
    /// `"real"` or `"emu"`.
    fn name(&self) -> &'static str;
    /// Open a device node (`/dev/kfd`, `/dev/dri/renderD128`).
    fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd>;
    /// Close a descriptor this driver opened.
    fn close(&self, fd: Fd) -> Result<()>;
    /// Issue `request` with `arg` as the argument struct's bytes (in and out). `arg.len()` must
    /// equal `_IOC_SIZE(request)`.
    fn ioctl(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()>;
    /// Issue a request whose number does not encode the argument size (NVIDIA UVM's plain
    /// integers): the driver reads and writes the struct its own ABI defines at `arg`, which must
    /// be exactly that struct. Drivers that know no such device refuse with ENOTTY.
    fn ioctl_raw(&self, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
        let _ = arg;
        Err(errno_error(
            libc::ENOTTY,
            format!(
                "{} driver: unsized ioctl {request:#x} on fd {} is not supported",
                self.name(),
                fd.0
            ),
        ))
    }
    /// Map memory: anonymous (`fd` None) or a device offset. With [`MapFlags::FIXED`] the target
    /// range must lie inside memory this driver mapped (a reservation); returns the address.
    fn mmap(
        &self,
        addr: Option<u64>,
        len: usize,
        prot: Prot,
        flags: MapFlags,
        fd: Option<Fd>,
        offset: u64,
    ) -> Result<u64>;
    /// Unmap a range this driver mapped.
    fn munmap(&self, addr: u64, len: usize) -> Result<()>;
    /// A `fence(SeqCst)` then a store of `value` to a doorbell inside a mapped doorbell page: 64
    /// bits (8-byte aligned) on a KFD doorbell page; 32 bits (4-byte aligned, `value` must fit) on
    /// an NVIDIA usermode page (`NOTIFY_CHANNEL_PENDING` at 0x90, value = work submit token).
    fn write_doorbell(&self, addr: u64, value: u64) -> Result<()>;
    /// The text of a sysfs / procfs file.
    fn read_file(&self, path: &str) -> Result<String>;
    /// The entry names of a directory, sorted.
    fn list_dir(&self, path: &str) -> Result<Vec<String>>;
    /// For downcasting to the concrete driver (tests attach software GPUs to the emulator).
    fn as_any(&self) -> &dyn Any;
    /// Why the driver refused the last call made on this thread, when it can say more than the
    /// status code (the emulator's explanation, like a line of the kernel log); taken once. `None`
    /// from the real kernel.
    fn take_diagnostic(&self) -> Option<String> {
        None
    }
    /// What the driver can tell about hardware queue `queue_id` of `gpu_id` beyond what user
    /// space reads from its own ring pointers: the emulator's software GPU reports its pointers,
    /// the last packet and a fault, which error reports quote. `None` from the real kernel (KFD
    /// has no such query) and for a queue the driver does not know.
    fn queue_report(&self, gpu_id: u32, queue_id: u32) -> Option<QueueReport> {
        let _ = (gpu_id, queue_id);
        None
    }
}

/// A driver's view of one hardware queue ([`Driver::queue_report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueReport {
    /// Read pointer (dwords for compute queues, bytes for SDMA).
    pub rptr: u64,
    /// Write pointer the last doorbell announced.
    pub wptr: u64,
    /// Blocked on an unsatisfied wait.
    pub waiting: bool,
    /// The last packet started, e.g. `WAIT_REG_MEM at ring dword 120`.
    pub last_packet: Option<String>,
    /// Why the queue stopped, if it faulted.
    pub fault: Option<String>,
}

impl std::fmt::Display for QueueReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rptr {} wptr {}", self.rptr, self.wptr)?;
        if self.waiting {
            write!(f, ", blocked on a wait")?;
        }
        if let Some(p) = &self.last_packet {
            write!(f, ", last packet {p}")?;
        }
        if let Some(x) = &self.fault {
            write!(f, ", FAULT: {x}")?;
        }
        Ok(())
    }
}

/// `_IOC_WRITE`: the kernel reads the argument.
pub const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: the kernel writes the argument.
pub const IOC_READ: u32 = 2;

/// Linux `_IOC(dir, type, nr, size)`: dir in bits 30-31, size in 16-29, type in 8-15, nr in 0-7.
pub const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u64 {
    ((dir as u64) << 30) | (((size as u64) & 0x3FFF) << 16) | ((ty as u64) << 8) | nr as u64
}

/// `_IOC_SIZE(request)`.
pub const fn ioc_size(request: u64) -> usize {
    ((request >> 16) & 0x3FFF) as usize
}

/// `_IOC_NR(request)`.
pub const fn ioc_nr(request: u64) -> u8 {
    (request & 0xFF) as u8
}

/// `_IOC_TYPE(request)`.
pub const fn ioc_type(request: u64) -> u8 {
    ((request >> 8) & 0xFF) as u8
}

/// `_IOC_DIR(request)`.
pub const fn ioc_dir(request: u64) -> u32 {
    ((request >> 30) & 3) as u32
}

/// A request number tied to its argument type, so the struct passed always matches the size
/// encoded in the request.
pub struct Ioctl<T> {
    /// The C macro's name, e.g. `AMDKFD_IOC_CREATE_QUEUE`.
    pub name: &'static str,
    /// The full request number.
    pub request: u64,
    _arg: PhantomData<fn() -> T>,
}

impl<T> Clone for Ioctl<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Ioctl<T> {}

impl<T> std::fmt::Debug for Ioctl<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:#010x})", self.name, self.request)
    }
}

impl<T> Ioctl<T> {
    /// `_IOC(dir, ty, nr, sizeof(T))` named `name`.
    pub const fn new(name: &'static str, dir: u32, ty: u8, nr: u8) -> Ioctl<T> {
        Ioctl {
            name,
            request: ioc(dir, ty, nr, std::mem::size_of::<T>()),
            _arg: PhantomData,
        }
    }
    /// `_IOC_NR`.
    pub const fn nr(&self) -> u8 {
        ioc_nr(self.request)
    }
    /// `_IOC_SIZE` (= `size_of::<T>()`).
    pub const fn size(&self) -> usize {
        ioc_size(self.request)
    }
}

/// An ioctl argument struct that can be passed as raw bytes.
///
/// # Safety
/// Implement only for `#[repr(C)]` types with no padding bytes and no invalid bit patterns (plain
/// integer fields, as every KFD argument struct is), so viewing one as `&mut [u8]` and letting the
/// kernel write any bytes into it is sound.
pub unsafe trait IoctlArg: Copy + Default + Send + 'static {
    /// The struct's key fields for error messages, e.g. `gpu_id=0x1234 size=0x1000`.
    fn describe(&self) -> String;
}

/// The bytes of an [`IoctlArg`] struct.
pub fn arg_bytes_mut<T: IoctlArg>(arg: &mut T) -> &mut [u8] {
    // SAFETY: `T: IoctlArg` guarantees a padding-free repr(C) struct whose every bit pattern is
    // valid; the slice covers exactly the struct and borrows it mutably for its lifetime.
    unsafe {
        std::slice::from_raw_parts_mut((arg as *mut T).cast::<u8>(), std::mem::size_of::<T>())
    }
}

/// The bytes of an [`IoctlArg`] struct, read-only.
pub fn arg_bytes<T: IoctlArg>(arg: &T) -> &[u8] {
    // SAFETY: `T: IoctlArg` guarantees a padding-free repr(C) struct, so every byte is
    // initialized; the slice covers exactly the struct and borrows it for its lifetime.
    unsafe { std::slice::from_raw_parts((arg as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// A copy of an [`IoctlArg`] struct read from bytes (`None` if the length differs).
pub fn arg_from_bytes<T: IoctlArg>(bytes: &[u8]) -> Option<T> {
    if bytes.len() != std::mem::size_of::<T>() {
        return None;
    }
    let mut v = T::default();
    arg_bytes_mut(&mut v).copy_from_slice(bytes);
    Some(v)
}

/// Issue a typed request: `arg` goes to the driver as bytes. On failure the error names the
/// ioctl, the errno and `arg`'s key fields (as passed in).
pub fn ioctl_struct<T: IoctlArg>(
    drv: &dyn Driver,
    fd: Fd,
    req: &Ioctl<T>,
    arg: &mut T,
) -> Result<()> {
    ioctl_named(drv, fd, req.name, req.request, arg)
}

/// Like [`ioctl_struct`] for a bare request number; refuses when `_IOC_SIZE(request)` is not
/// `size_of::<T>()`.
pub fn ioctl_request<T: IoctlArg>(
    drv: &dyn Driver,
    fd: Fd,
    request: u64,
    arg: &mut T,
) -> Result<()> {
    let name = super::kfd::kfd_ioctl_name(request).unwrap_or("ioctl");
    if ioc_size(request) != std::mem::size_of::<T>() {
        return Err(Error::Errno(
            libc::EINVAL,
            format!(
                "{name} ({request:#010x}): request encodes {} argument bytes but the struct has {}",
                ioc_size(request),
                std::mem::size_of::<T>()
            ),
        ));
    }
    ioctl_named(drv, fd, name, request, arg)
}

fn ioctl_named<T: IoctlArg>(
    drv: &dyn Driver,
    fd: Fd,
    name: &str,
    request: u64,
    arg: &mut T,
) -> Result<()> {
    // a copy of the argument as passed in (the driver may rewrite `arg`), described only when
    // the call fails: no text is built on the success path, which waits poll many times
    let before = *arg;
    drv.ioctl(fd, request, arg_bytes_mut(arg))
        .map_err(|e| match e {
            Error::Errno(n, m) => {
                let d = before.describe();
                Error::Errno(n, format!("{name}({d}) failed: {m}"))
            }
            other => other,
        })
}

/// `EINVAL`, `ENOMEM`, ... for an errno value (`E<n>` when unknown).
pub fn errno_name(errno: i32) -> String {
    match errno {
        libc::EPERM => "EPERM".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::ESRCH => "ESRCH".into(),
        libc::EINTR => "EINTR".into(),
        libc::EIO => "EIO".into(),
        libc::EBADF => "EBADF".into(),
        libc::EAGAIN => "EAGAIN".into(),
        libc::ENOMEM => "ENOMEM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EBUSY => "EBUSY".into(),
        libc::EEXIST => "EEXIST".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::ENOTTY => "ENOTTY".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EADDRINUSE => "EADDRINUSE".into(),
        libc::ETIMEDOUT => "ETIMEDOUT".into(),
        // The kernel-internal ENOTSUPP (not ENOTSUP) that KFD returns for an unknown queue type.
        524 => "ENOTSUPP".into(),
        n => format!("E{n}"),
    }
}

/// An [`Error::Errno`] whose message starts with the errno's name: `EINVAL (22): <msg>`.
pub fn errno_error(errno: i32, msg: impl std::fmt::Display) -> Error {
    Error::Errno(errno, format!("{} ({errno}): {msg}", errno_name(errno)))
}
