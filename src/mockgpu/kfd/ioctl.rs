//! The emulated `kfd_ioctl`: checks the descriptor and the request encoding, then dispatches on
//! the request's nr like KFD, handing each handler its typed argument struct and copying the
//! struct back (also on failure, as KFD copies out `_IOC_READ` arguments whatever the result).
//!
//! Encoding checks: the argument buffer must be `_IOC_SIZE(request)` bytes (EINVAL); a type other
//! than 'K' is not KFD's (ENOTTY); an nr outside KFD's table is EINVAL (what `kfd_ioctl` returns);
//! the size and direction must equal the 1.11 struct's (EINVAL; stricter than KFD, which
//! zero-extends); known ioctls the emulator does not implement are ENOTTY.
//!
//! Not guaranteed: GET_CLOCK_COUNTERS reports a 100 MHz GPU clock derived from the host's
//! monotonic clock, not a device counter.

use std::sync::Arc;

use super::{lock, EmuFd, EmuKfd, KResult};
use crate::driver::api::{
    arg_bytes_mut, arg_from_bytes, errno_error, ioc_nr, ioc_size, ioc_type, Fd, IoctlArg,
};
use crate::driver::kfd::*;
use crate::sys::kfd::*;
use crate::Result;

/// Run `f` on the struct decoded from `arg`, then copy the struct back.
fn with_arg<T: IoctlArg>(arg: &mut [u8], f: impl FnOnce(&mut T) -> KResult) -> KResult {
    let Some(mut v) = arg_from_bytes::<T>(arg) else {
        kbail!(
            EINVAL,
            "argument is {} bytes, struct is {}",
            arg.len(),
            std::mem::size_of::<T>()
        );
    };
    let r = f(&mut v);
    arg.copy_from_slice(arg_bytes_mut(&mut v));
    r
}

pub(crate) fn dispatch(kfd: &Arc<EmuKfd>, fd: Fd, request: u64, arg: &mut [u8]) -> Result<()> {
    let nr = ioc_nr(request);
    let name = kfd_ioctl_name_by_nr(nr).unwrap_or("ioctl");
    let fail = |errno: i32, msg: String| {
        Err(errno_error(
            errno,
            format!("emu {name} ({request:#010x}): {msg}"),
        ))
    };
    match lock(&kfd.state).fds.get(&fd.0) {
        None => {
            return fail(
                libc::EBADF,
                format!("fd {} is not an open emulated fd", fd.0),
            )
        }
        Some(EmuFd::Render(_)) => {
            return fail(
                libc::ENOTTY,
                "DRM ioctls on render nodes are not emulated".into(),
            )
        }
        Some(EmuFd::Kfd) => {}
    }
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
    if ioc_type(request) != AMDKFD_IOCTL_BASE {
        return fail(
            libc::ENOTTY,
            format!("ioctl type {:#x} is not KFD's 'K'", ioc_type(request)),
        );
    }
    let Some(&(_, _, want)) = KFD_IOCTLS.iter().find(|(n, _, _)| *n == nr) else {
        return fail(libc::EINVAL, format!("unknown KFD ioctl nr {nr:#x}"));
    };
    if request != want {
        return fail(
            libc::EINVAL,
            format!(
                "request encodes {} bytes (dir {}), the KFD 1.11 struct is {} bytes (dir {}): struct size mismatch",
                ioc_size(request),
                request >> 30,
                ioc_size(want),
                want >> 30
            ),
        );
    }
    run(kfd, nr, arg).or_else(|e| fail(e.0, e.1))
}

fn run(kfd: &Arc<EmuKfd>, nr: u8, arg: &mut [u8]) -> KResult {
    match nr {
        0x01 => with_arg(arg, |a: &mut kfd_ioctl_get_version_args| {
            a.major_version = KFD_IOCTL_MAJOR_VERSION;
            a.minor_version = KFD_IOCTL_MINOR_VERSION;
            Ok(())
        }),
        0x02 => with_arg(arg, |a| kfd.create_queue(a)),
        0x03 => with_arg(arg, |a| kfd.destroy_queue(a)),
        0x05 => with_arg(arg, |a| clock_counters(kfd, a)),
        0x08 => with_arg(arg, |a| create_event(kfd, a)),
        0x09 => with_arg(arg, |a: &mut kfd_ioctl_destroy_event_args| {
            kfd.events.destroy(a.event_id)
        }),
        0x0A => with_arg(arg, |a: &mut kfd_ioctl_set_event_args| {
            kfd.events.cpu_set(a.event_id, true)
        }),
        0x0B => with_arg(arg, |a: &mut kfd_ioctl_reset_event_args| {
            kfd.events.cpu_set(a.event_id, false)
        }),
        0x0C => with_arg(arg, |a| kfd.events.wait(a)),
        0x15 => with_arg(arg, |a| kfd.acquire_vm(a)),
        0x16 => with_arg(arg, |a| kfd.alloc_memory(a)),
        0x17 => with_arg(arg, |a| kfd.free_memory(a)),
        0x18 => with_arg(arg, |a| kfd.map_memory(a)),
        0x19 => with_arg(arg, |a| kfd.unmap_memory(a)),
        0x23 => with_arg(arg, |a| kfd.available_memory(a)),
        _ => kbail!(ENOTTY, "not emulated"),
    }
}

fn clock_counters(kfd: &EmuKfd, a: &mut kfd_ioctl_get_clock_counters_args) -> KResult {
    if kfd.node_by_gpu_id(a.gpu_id).is_none() {
        kbail!(EINVAL, "no device with gpu_id {:#x}", a.gpu_id);
    }
    let now = |clock| crate::driver::os::clock_ns(clock).map_err(super::memory::to_kerr);
    a.cpu_clock_counter = now(libc::CLOCK_MONOTONIC_RAW)?;
    a.system_clock_counter = now(libc::CLOCK_BOOTTIME)?;
    a.gpu_clock_counter = a.cpu_clock_counter / 10;
    a.system_clock_freq = 1_000_000_000;
    Ok(())
}

/// CREATE_EVENT: register the event page first when a buffer handle is passed
/// (`kfd_kmap_event_page`), then create the event.
fn create_event(kfd: &EmuKfd, a: &mut kfd_ioctl_create_event_args) -> KResult {
    if a.event_page_offset != 0 {
        let handle = a.event_page_offset;
        let st = lock(&kfd.state);
        if kfd.events.page_backing().is_some() {
            kbail!(EINVAL, "the event page is already set (pass event_page_offset only on the first CREATE_EVENT)");
        }
        let Some(i) = kfd.node_by_gpu_id(handle_gpu_id(handle)) else {
            kbail!(EINVAL, "event page handle {handle:#x} names no device");
        };
        if st.acquired[i].is_none() {
            kbail!(
                ENODEV,
                "gpu_id {:#x} has no VM yet: AMDKFD_IOC_ACQUIRE_VM must come first",
                kfd.descs[i].gpu_id
            );
        }
        let Some(m) = st.allocs.get(&handle) else {
            kbail!(EINVAL, "can't find the event page buffer {handle:#x}");
        };
        if m.flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT == 0 {
            kbail!(
                EINVAL,
                "event page buffer {handle:#x} must be GTT memory (flags {:#x})",
                m.flags
            );
        }
        kfd.events
            .set_user_page(handle, m.backing.clone(), m.backing_off, m.size)?;
    }
    kfd.events.create(a)
}
