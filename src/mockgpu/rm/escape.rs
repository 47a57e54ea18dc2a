//! The emulated `nvidia_ioctl`: checks the descriptor and the request encoding, then dispatches on
//! the escape nr like `nv.c`/`escape.c`.
//!
//! Encoding checks (errno, as the kernel): the buffer must be `_IOC_SIZE(request)` bytes, the type
//! 'F' (else ENOTTY) and the direction read-write; each escape's size must equal its struct
//! exactly (EINVAL, "every RM handler checks size == sizeof"); control-device-only escapes on a
//! GPU node, and RM_ALLOC_MEMORY / REGISTER_FD on the control device, are EINVAL. RM escapes then
//! report refusals in their `status` field (the ioctl succeeds), with the reason recorded as the
//! thread's diagnostic.
//!
//! Not guaranteed: STATUS_CODE, ATTACH_GPUS_TO_FD and EXPORT_TO_DMABUF_FD are not emulated
//! (ENOTTY).

use std::sync::Arc;

use super::abi::*;
use super::{lock, set_diagnostic, EmuNv, NvFd, RmErr, RmResult};
use crate::driver::api::{
    arg_bytes_mut, arg_from_bytes, errno_error, ioc_dir, ioc_nr, ioc_size, ioc_type, Fd, IoctlArg,
    IOC_READ, IOC_WRITE,
};
use crate::driver::nv::nv_escape_name;
use crate::mockgpu::backing::{copy_from_user, copy_to_user};
use crate::mockgpu::{KErr, KResult};
use crate::sys::nv::common::*;
use crate::Result;

/// Where an escape is accepted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Ctl,
    Gpu,
    Both,
}

/// What kind of fd an escape arrived on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FdKind {
    Ctl,
    Gpu(usize),
}

/// Run `f` on the struct decoded from `arg` and copy it back.
fn with_arg<T: IoctlArg>(arg: &mut [u8], f: impl FnOnce(&mut T) -> KResult) -> KResult {
    let Some(mut v) = arg_from_bytes::<T>(arg) else {
        kbail!(
            EINVAL,
            "argument is {} bytes, the struct is {}",
            arg.len(),
            std::mem::size_of::<T>()
        );
    };
    let r = f(&mut v);
    arg.copy_from_slice(arg_bytes_mut(&mut v));
    r
}

/// Run an RM handler on the struct in `arg`; a refusal becomes its `status` (via `put`) and the
/// thread's diagnostic, and the ioctl itself succeeds.
pub(crate) fn with_rm<T: IoctlArg>(
    arg: &mut [u8],
    f: impl FnOnce(&mut T) -> RmResult,
    put: impl FnOnce(&mut T, u32),
) -> KResult {
    with_arg(arg, |v: &mut T| {
        let status = match f(v) {
            Ok(()) => NV_OK,
            Err(RmErr(s, msg)) => {
                set_diagnostic(msg);
                s
            }
        };
        put(v, status);
        Ok(())
    })
}

pub(crate) fn dispatch(nv: &Arc<EmuNv>, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
    let nr = u32::from(ioc_nr(request));
    let name = nv_escape_name(nr).unwrap_or("escape");
    let fail = |errno: i32, msg: String| {
        Err(errno_error(
            errno,
            format!("emu {name} ({request:#010x}): {msg}"),
        ))
    };
    let kind = match lock(&nv.state).fds.get(&fd.0) {
        None => {
            return fail(
                libc::EBADF,
                format!("fd {} is not an open emulated fd", fd.0),
            )
        }
        Some(NvFd::Uvm(_)) => {
            return fail(
                libc::ENOTTY,
                "escapes go to /dev/nvidiactl or /dev/nvidiaN, not /dev/nvidia-uvm".into(),
            )
        }
        Some(NvFd::Ctl { .. }) => FdKind::Ctl,
        Some(NvFd::Gpu { gpu, .. }) => FdKind::Gpu(*gpu),
    };
    if arg.len() != ioc_size(request) {
        return fail(
            libc::EINVAL,
            format!(
                "argument buffer is {} bytes but the request encodes {}",
                arg.len(),
                ioc_size(request)
            ),
        );
    }
    if ioc_type(request) != NV_IOCTL_MAGIC as u8 {
        return fail(
            libc::ENOTTY,
            format!("ioctl type {:#x} is not NVIDIA's 'F'", ioc_type(request)),
        );
    }
    if ioc_dir(request) != IOC_READ | IOC_WRITE {
        return fail(libc::EINVAL, "NVIDIA escapes are _IOWR".into());
    }
    run(nv, fd, kind, nr, arg, false).or_else(|e| fail(e.0, e.1))
}

/// The size and place rules of escape `nr` (`None`: not emulated).
fn rules(nv: &EmuNv, nr: u32, len: usize) -> Option<(usize, Where)> {
    Some(match nr {
        NV_ESC_RM_ALLOC_MEMORY => (SZ_NVOS02_WITH_FD, Where::Gpu),
        NV_ESC_RM_FREE => (SZ_NVOS00, Where::Ctl),
        NV_ESC_RM_CONTROL => (SZ_NVOS54, Where::Ctl),
        NV_ESC_RM_ALLOC => (SZ_NVOS21, Where::Ctl),
        NV_ESC_RM_MAP_MEMORY => (SZ_NVOS33_WITH_FD, Where::Ctl),
        NV_ESC_RM_UNMAP_MEMORY => (SZ_NVOS34, Where::Ctl),
        NV_ESC_RM_MAP_MEMORY_DMA => (nv.abi.nvos46, Where::Ctl),
        // Any whole number of records.
        NV_ESC_CARD_INFO if len > 0 && len % SZ_CARD_INFO == 0 => (len, Where::Ctl),
        NV_ESC_CARD_INFO => (SZ_CARD_INFO, Where::Ctl),
        NV_ESC_REGISTER_FD => (SZ_REGISTER_FD, Where::Gpu),
        NV_ESC_ALLOC_OS_EVENT | NV_ESC_FREE_OS_EVENT => (SZ_OS_EVENT, Where::Both),
        NV_ESC_CHECK_VERSION_STR => (SZ_RM_API_VERSION, Where::Ctl),
        NV_ESC_IOCTL_XFER_CMD => (SZ_XFER, Where::Both),
        NV_ESC_WAIT_OPEN_COMPLETE => (SZ_WAIT_OPEN_COMPLETE, Where::Both),
        _ => return None,
    })
}

/// Run escape `nr` with its argument bytes (also the inner command of an XFER).
fn run(nv: &Arc<EmuNv>, fd: Fd, kind: FdKind, nr: u32, arg: &mut [u8], nested: bool) -> KResult {
    check(nv, kind, nr, arg.len())?;
    match nr {
        NV_ESC_RM_ALLOC
        | NV_ESC_RM_FREE
        | NV_ESC_RM_CONTROL
        | NV_ESC_RM_MAP_MEMORY
        | NV_ESC_RM_UNMAP_MEMORY => run_rm(nv, fd, nr, arg),
        NV_ESC_RM_ALLOC_MEMORY => {
            let FdKind::Gpu(gpu) = kind else {
                kbail!(EINVAL, "GPU node expected")
            };
            nv.rm_alloc_memory(gpu, arg)
        }
        NV_ESC_RM_MAP_MEMORY_DMA => nv.rm_map_memory_dma(arg),
        NV_ESC_CARD_INFO => card_info(nv, arg),
        NV_ESC_REGISTER_FD => {
            with_arg(arg, |a: &mut nv_ioctl_register_fd_t| register_fd(nv, fd, a))
        }
        NV_ESC_ALLOC_OS_EVENT => with_rm(
            arg,
            |a: &mut nv_ioctl_alloc_os_event_t| nv.os_event(a.hClient, a.hDevice, a.fd, true),
            |a, s| a.Status = s,
        ),
        NV_ESC_FREE_OS_EVENT => with_rm(
            arg,
            |a: &mut nv_ioctl_free_os_event_t| nv.os_event(a.hClient, a.hDevice, a.fd, false),
            |a, s| a.Status = s,
        ),
        NV_ESC_CHECK_VERSION_STR => with_arg(arg, |a| check_version(nv, a)),
        NV_ESC_WAIT_OPEN_COMPLETE => with_arg(arg, |a: &mut nv_ioctl_wait_open_complete_t| {
            a.rc = 0;
            a.adapterStatus = NV_OK;
            Ok(())
        }),
        NV_ESC_IOCTL_XFER_CMD if nested => kbail!(EINVAL, "XFER inside XFER"),
        NV_ESC_IOCTL_XFER_CMD => with_arg(arg, |a: &mut nv_ioctl_xfer_t| xfer(nv, fd, kind, a)),
        _ => kbail!(ENOTTY, "not emulated"),
    }
}

/// `f`, unless an armed failure (see [`super::NvFault`]) answers in its place.
fn armed(inj: Option<RmErr>, f: impl FnOnce() -> RmResult) -> RmResult {
    match inj {
        Some(e) => Err(e),
        None => f(),
    }
}

/// The RM object escapes on the control fd.
fn run_rm(nv: &Arc<EmuNv>, fd: Fd, nr: u32, arg: &mut [u8]) -> KResult {
    let inj = nv_escape_name(nr).and_then(|n| nv.injected(n));
    match nr {
        NV_ESC_RM_ALLOC => with_rm(
            arg,
            |a: &mut NVOS21_PARAMETERS| armed(inj, || nv.rm_alloc(fd.0, a)),
            |a, s| a.status = s,
        ),
        NV_ESC_RM_FREE => with_rm(
            arg,
            |a: &mut NVOS00_PARAMETERS| armed(inj, || nv.rm_free(a)),
            |a, s| a.status = s,
        ),
        NV_ESC_RM_CONTROL => with_rm(
            arg,
            |a: &mut NVOS54_PARAMETERS| armed(inj, || nv.rm_control(a)),
            |a, s| a.status = s,
        ),
        NV_ESC_RM_MAP_MEMORY => with_rm(
            arg,
            |a: &mut nv_ioctl_nvos33_parameters_with_fd| armed(inj, || nv.rm_map_memory(a)),
            |a, s| a.params.status = s,
        ),
        _ => with_rm(
            arg,
            |a: &mut NVOS34_PARAMETERS| armed(inj, || nv.rm_unmap_memory(a)),
            |a, s| a.status = s,
        ),
    }
}

/// The escape's size and place rules (errno failures, before any RM work).
fn check(nv: &EmuNv, kind: FdKind, nr: u32, len: usize) -> KResult {
    let Some((size, place)) = rules(nv, nr, len) else {
        if nv_escape_name(nr).is_some() {
            kbail!(ENOTTY, "not emulated");
        }
        kbail!(EINVAL, "unknown escape nr {nr:#x}");
    };
    if len != size {
        kbail!(
            EINVAL,
            "argument is {len} bytes, the driver's struct is {size} (driver {}): struct size mismatch",
            nv.version
        );
    }
    match (place, kind) {
        (Where::Ctl, FdKind::Gpu(_)) => kbail!(
            EINVAL,
            "control-device-only escape on a GPU node (use /dev/nvidiactl)"
        ),
        (Where::Gpu, FdKind::Ctl) => kbail!(
            EINVAL,
            "GPU-node-only escape on /dev/nvidiactl (use /dev/nvidiaN)"
        ),
        _ => {}
    }
    Ok(())
}

/// NV_ESC_IOCTL_XFER_CMD: run escape `cmd` on the `size` bytes at `ptr`.
fn xfer(nv: &Arc<EmuNv>, fd: Fd, kind: FdKind, a: &mut nv_ioctl_xfer_t) -> KResult {
    if a.size as usize > 1 << 20 {
        kbail!(
            EINVAL,
            "XFER of {} bytes is more than the emulator copies",
            a.size
        );
    }
    let mut buf = copy_from_user(a.ptr, a.size as usize, "XFER ptr").map_err(to_kerr)?;
    run(nv, fd, kind, a.cmd, &mut buf, true)?;
    copy_to_user(a.ptr, &buf, "XFER ptr").map_err(to_kerr)
}

pub(crate) fn to_kerr(e: crate::Error) -> KErr {
    KErr(e.errno().unwrap_or(libc::EIO), e.message().to_string())
}

/// NV_ESC_CHECK_VERSION_STR: QUERY copies the version out; STRICT compares the whole string,
/// RELAXED up to the first '.'; a mismatch copies the RM's string back and fails EINVAL.
fn check_version(nv: &EmuNv, a: &mut nv_ioctl_rm_api_version_t) -> KResult {
    let ours = nv.version.as_bytes();
    let theirs: Vec<u8> = a
        .versionString
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let put = |a: &mut nv_ioctl_rm_api_version_t| {
        a.versionString = [0; 64];
        for (d, s) in a.versionString.iter_mut().zip(ours) {
            *d = *s as std::ffi::c_char;
        }
    };
    a.reply = NV_RM_API_VERSION_REPLY_RECOGNIZED;
    let ok = match a.cmd {
        NV_RM_API_VERSION_CMD_QUERY => true,
        NV_RM_API_VERSION_CMD_STRICT => theirs == ours,
        NV_RM_API_VERSION_CMD_RELAXED => {
            let major = |s: &[u8]| s.split(|&b| b == b'.').next().map(<[u8]>::to_vec);
            major(&theirs) == major(ours)
        }
        c => {
            a.reply = NV_RM_API_VERSION_REPLY_UNRECOGNIZED;
            kbail!(EINVAL, "unknown version-check command {c:#x}");
        }
    };
    put(a);
    if !ok {
        kbail!(
            EINVAL,
            "API mismatch: the client has the version {}, but this kernel module has the version {}",
            String::from_utf8_lossy(&theirs),
            nv.version
        );
    }
    Ok(())
}

/// NV_ESC_CARD_INFO: one 72-byte record per slot, valid ones first.
fn card_info(nv: &EmuNv, arg: &mut [u8]) -> KResult {
    let chunks = arg.chunks_exact_mut(SZ_CARD_INFO);
    for (i, chunk) in chunks.enumerate() {
        let mut c = nv_ioctl_card_info_t::default();
        if i < nv.devs.len() {
            let bus = (i + 1) as u8;
            c.valid = 1;
            c.pci_info = nv_pci_info_t {
                domain: 0,
                bus,
                slot: 0,
                function: 0,
                vendor_id: 0x10DE,
                device_id: nv.chip.device_id,
                ..Default::default()
            };
            c.gpu_id = super::gpu_id(i);
            c.interrupt_line = 0;
            c.reg_address = 0xA000_0000 + ((i as u64) << 28);
            c.reg_size = 16 << 20;
            c.fb_address = 0x1_0000_0000_0000 + ((i as u64) << 40);
            c.fb_size = nv.chip.vram_size;
            c.minor_number = i as u32;
            let name = format!("nvidia{i}");
            for (d, s) in c.dev_name.iter_mut().zip(name.bytes()) {
                *d = s;
            }
        }
        chunk.copy_from_slice(arg_bytes_mut(&mut c));
    }
    Ok(())
}

/// NV_ESC_REGISTER_FD: link this GPU node to an open control fd (once).
fn register_fd(nv: &EmuNv, fd: Fd, a: &mut nv_ioctl_register_fd_t) -> KResult {
    let mut st = lock(&nv.state);
    if !matches!(st.fds.get(&a.ctl_fd), Some(NvFd::Ctl { .. })) {
        kbail!(EINVAL, "ctl_fd {} is not an open /dev/nvidiactl", a.ctl_fd);
    }
    let Some(NvFd::Gpu { registered, .. }) = st.fds.get_mut(&fd.0) else {
        kbail!(EINVAL, "fd {} is not a GPU node", fd.0);
    };
    if let Some(prev) = registered {
        kbail!(
            EINVAL,
            "fd {} is already registered with control fd {prev}",
            fd.0
        );
    }
    *registered = Some(a.ctl_fd);
    Ok(())
}
