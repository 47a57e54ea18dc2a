//! Emulated `/dev/nvidia-uvm`: one UVM VA space per fd.
//!
//! Rules (UVM's status codes, in `rmStatus`; the ioctl succeeds): UVM_INITIALIZE must be the first
//! call (else NV_ERR_ILLEGAL_ACTION); UVM_MM_INITIALIZE goes on a fresh fd and names an initialized
//! one; REGISTER_GPU needs a UUID the RM knows (NV_ERR_GPU_UUID_NOT_FOUND, twice NV_ERR_IN_USE);
//! REGISTER_GPU_VASPACE a registered GPU (NV_ERR_INVALID_DEVICE) and an externally owned
//! FERMI_VASPACE_A of it (NV_ERR_INVALID_ARGUMENT); REGISTER_CHANNEL a channel of that vaspace
//! and a free range; ranges are 4 KiB aligned (NV_ERR_INVALID_ADDRESS) and never overlap
//! (NV_ERR_UVM_ADDRESS_IN_USE); MAP_EXTERNAL_ALLOCATION maps inside one external range
//! (NV_ERR_INVALID_ADDRESS), on GPUs with a registered vaspace (NV_ERR_INVALID_DEVICE), memory the
//! client owns (NV_ERR_OBJECT_NOT_FOUND) within its size (NV_ERR_INVALID_LIMIT); VRAM of another
//! GPU needs ENABLE_PEER_ACCESS.
//!
//! FREE (kernel-open/nvidia-uvm/uvm_va_range.c `uvm_free`): up to 580 `{base, length}` must be
//! 4 KiB aligned and name a whole range exactly; from 590 `{base}` names the range starting
//! there; either way only external ranges can be freed so: a channel's range is
//! NV_ERR_INVALID_ADDRESS (the real switch frees EXTERNAL, SEMAPHORE_POOL, DEVICE_P2P and
//! SKED_REFLECTED ranges only). UNREGISTER_CHANNEL (uvm_user_channel.c
//! `uvm_unregister_channel`) drops the channel's range; a channel not registered on the fd is
//! NV_ERR_INVALID_CHANNEL; its `gpuUuid` (up to 580) is not read, as in the real handler.
//!
//! The argument must be exactly the UVM struct of the emulated family (EINVAL otherwise: stricter
//! than UVM, which would read its own size from the pointer).
//!
//! Not guaranteed: one GPU page table per device, shared by all UVM fds (a mapping made through
//! another fd at the same VA is NV_ERR_UVM_ADDRESS_IN_USE); channel ranges get no mappings (real
//! UVM carves one range per channel resource inside the registered span; here one range spans it).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::escape::with_rm;
use super::gpuvm::{MapOwner, NvGpuMap};
use super::memory::MemObj;
use super::objects::{Obj, ObjKind};
use super::{gpu_uuid, lock, rbail, EmuNv, NvFd, NvState, RmErr, RmResult};
use crate::driver::api::{errno_error, Fd};
use crate::driver::nv::nv_request_name;
use crate::driver::nv::UvmParams;
use crate::driver::vma::VmaMap;
use crate::mockgpu::KResult;
use crate::sys::nv::common::*;
use crate::sys::nv::{v580, v590};
use crate::Result;

const PAGE: u64 = 4096;

/// One UVM range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UvmRange {
    External,
    Channel {
        gpu: usize,
        client: u32,
        channel: u32,
    },
}

/// The state of one `/dev/nvidia-uvm` fd.
#[derive(Default)]
pub(crate) struct UvmSpace {
    initialized: bool,
    flags: u64,
    /// This fd is the mm fd of UVM fd `mm_for` (after UVM_MM_INITIALIZE).
    mm_for: Option<i32>,
    gpus: BTreeSet<usize>,
    /// Registered GPU VA spaces: device -> (client, vaspace).
    vaspaces: HashMap<usize, (u32, u32)>,
    peers: BTreeSet<(usize, usize)>,
    ranges: VmaMap<UvmRange>,
}

/// The device with `uuid`.
fn gpu_by_uuid(nv: &EmuNv, uuid: &NvProcessorUuid) -> RmResult<usize> {
    match (0..nv.devs.len()).find(|&i| gpu_uuid(i) == uuid.uuid) {
        Some(i) => Ok(i),
        None => rbail!(
            NV_ERR_GPU_UUID_NOT_FOUND,
            "no GPU has UUID {:02x?}",
            uuid.uuid
        ),
    }
}

/// 4 KiB-aligned, non-empty, non-wrapping `[base, base + length)`.
fn check_range(base: u64, length: u64) -> RmResult<u64> {
    match base.checked_add(length) {
        Some(end) if length > 0 && base % PAGE == 0 && length % PAGE == 0 => Ok(end),
        _ => rbail!(
            NV_ERR_INVALID_ADDRESS,
            "range {base:#x}+{length:#x} is not 4 KiB aligned and non-empty"
        ),
    }
}

/// Whether `fd` is an open control fd.
fn is_ctl(st: &NvState, fd: i32) -> bool {
    matches!(st.fds.get(&fd), Some(NvFd::Ctl { .. }))
}

impl EmuNv {
    /// A UVM request on `fd`.
    pub(crate) fn dispatch_uvm(
        self: &Arc<Self>,
        fd: Fd,
        request: u64,
        arg: &mut [u8],
    ) -> Result<()> {
        let name = nv_request_name(request).unwrap_or("UVM ioctl");
        let fail = |errno: i32, msg: String| {
            Err(errno_error(
                errno,
                format!("emu {name} ({request:#x}): {msg}"),
            ))
        };
        if !matches!(lock(&self.state).fds.get(&fd.0), Some(NvFd::Uvm(_))) {
            return fail(
                libc::ENOTTY,
                format!("fd {} is not an open /dev/nvidia-uvm", fd.0),
            );
        }
        let Some(size) = self.abi.uvm_params_size(request) else {
            return fail(libc::ENOTTY, "UVM request not emulated".into());
        };
        if arg.len() != size {
            return fail(
                libc::EINVAL,
                format!("argument is {} bytes, the UVM struct is {size}", arg.len()),
            );
        }
        self.run_uvm(fd.0, request as u32, arg)
            .or_else(|e| fail(e.0, e.1))
    }

    fn run_uvm(&self, fd: i32, request: u32, arg: &mut [u8]) -> KResult {
        match request {
            UVM_INITIALIZE => self.uvm_call(fd, request, arg, Self::uvm_initialize),
            UVM_MM_INITIALIZE => self.uvm_call(fd, request, arg, Self::uvm_mm_initialize),
            UVM_REGISTER_GPU => self.uvm_call(fd, request, arg, Self::uvm_register_gpu),
            UVM_REGISTER_GPU_VASPACE => self.uvm_call(fd, request, arg, Self::uvm_register_vaspace),
            UVM_REGISTER_CHANNEL => self.uvm_call(fd, request, arg, Self::uvm_register_channel),
            UVM_CREATE_EXTERNAL_RANGE => self.uvm_call(fd, request, arg, Self::uvm_create_external),
            UVM_MAP_EXTERNAL_ALLOCATION => self.uvm_call(fd, request, arg, Self::uvm_map_external),
            UVM_FREE if self.abi.uvm_free == 16 => {
                self.uvm_call(fd, request, arg, Self::uvm_free_v590)
            }
            UVM_FREE => self.uvm_call(fd, request, arg, Self::uvm_free_v570),
            UVM_UNREGISTER_CHANNEL if self.abi.uvm_unregister_channel == 12 => {
                self.uvm_call(fd, request, arg, Self::uvm_unregister_v590)
            }
            UVM_UNREGISTER_CHANNEL => self.uvm_call(fd, request, arg, Self::uvm_unregister_v570),
            UVM_ENABLE_PEER_ACCESS => self.uvm_call(fd, request, arg, Self::uvm_peer),
            _ => kbail!(ENOTTY, "UVM request not emulated"),
        }
    }

    /// Run handler `f` on the struct in `arg` under the RM lock, after the INITIALIZE gate; a
    /// refusal goes to `rmStatus`.
    fn uvm_call<T: UvmParams>(
        &self,
        fd: i32,
        request: u32,
        arg: &mut [u8],
        f: fn(&Self, &mut NvState, i32, &mut T) -> RmResult,
    ) -> KResult {
        let inj = nv_request_name(u64::from(request)).and_then(|n| self.injected(n));
        let run = |a: &mut T| {
            if let Some(e) = inj {
                return Err(e);
            }
            let mut st = lock(&self.state);
            self.uvm_gate(&mut st, fd, request)?;
            f(self, &mut st, fd, a)
        };
        with_rm(arg, run, |a, s| a.set_rm_status(s))
    }

    fn uvm_create_external(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_CREATE_EXTERNAL_RANGE_PARAMS,
    ) -> RmResult {
        uvm_create_range(st, fd, a.base, a.length, UvmRange::External)
    }

    /// UVM_INITIALIZE comes first; an mm fd takes nothing else.
    fn uvm_gate(&self, st: &mut NvState, fd: i32, request: u32) -> RmResult {
        let s = space(st, fd)?;
        if let Some(of) = s.mm_for {
            rbail!(
                NV_ERR_ILLEGAL_ACTION,
                "fd {fd} is the mm fd of UVM fd {of}; it takes no other UVM call"
            );
        }
        if !s.initialized && request != UVM_INITIALIZE && request != UVM_MM_INITIALIZE {
            rbail!(
                NV_ERR_ILLEGAL_ACTION,
                "UVM_INITIALIZE must be the first call on a /dev/nvidia-uvm fd"
            );
        }
        Ok(())
    }

    fn uvm_initialize(&self, st: &mut NvState, fd: i32, a: &mut UVM_INITIALIZE_PARAMS) -> RmResult {
        let s = space(st, fd)?;
        if a.flags & !u64::from(UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE) != 0 {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "unknown UVM_INITIALIZE flags {:#x}",
                a.flags
            );
        }
        if s.initialized && s.flags != a.flags {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "already initialized with flags {:#x}",
                s.flags
            );
        }
        s.initialized = true;
        s.flags = a.flags;
        Ok(())
    }

    fn uvm_mm_initialize(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_MM_INITIALIZE_PARAMS,
    ) -> RmResult {
        if !matches!(st.fds.get(&a.uvmFd), Some(NvFd::Uvm(s)) if s.initialized && a.uvmFd != fd) {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "uvmFd {} is not another, initialized /dev/nvidia-uvm fd",
                a.uvmFd
            );
        }
        let s = space(st, fd)?;
        if s.initialized {
            rbail!(
                NV_ERR_INVALID_STATE,
                "fd {fd} was UVM_INITIALIZEd; UVM_MM_INITIALIZE goes on a fresh fd"
            );
        }
        s.mm_for = Some(a.uvmFd);
        Ok(())
    }

    fn uvm_register_gpu(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_REGISTER_GPU_PARAMS,
    ) -> RmResult {
        let gpu = gpu_by_uuid(self, &a.gpu_uuid)?;
        if a.rmCtrlFd != -1 {
            if !is_ctl(st, a.rmCtrlFd) {
                rbail!(
                    NV_ERR_INVALID_ARGUMENT,
                    "rmCtrlFd {} is not an open /dev/nvidiactl (or -1)",
                    a.rmCtrlFd
                );
            }
            if !st.clients.contains_key(&a.hClient) {
                rbail!(
                    NV_ERR_INVALID_CLIENT,
                    "hClient {:#x} is not a client",
                    a.hClient
                );
            }
        }
        let s = space(st, fd)?;
        if !s.gpus.insert(gpu) {
            rbail!(
                NV_ERR_IN_USE,
                "GPU {gpu} is already registered on this UVM fd"
            );
        }
        a.numaEnabled = 0;
        a.numaNodeId = -1;
        Ok(())
    }

    fn uvm_register_vaspace(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_REGISTER_GPU_VASPACE_PARAMS,
    ) -> RmResult {
        let gpu = gpu_by_uuid(self, &a.gpuUuid)?;
        if !is_ctl(st, a.rmCtrlFd) {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "rmCtrlFd {} is not an open /dev/nvidiactl",
                a.rmCtrlFd
            );
        }
        let Some(c) = st.clients.get(&a.hClient) else {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hClient {:#x} is not a client",
                a.hClient
            );
        };
        match c.objects.get(&a.hVaSpace) {
            Some(Obj { kind: ObjKind::VaSpace { external: true }, gpu: g, .. }) if *g == gpu => {}
            Some(Obj { kind: ObjKind::VaSpace { external: false }, .. }) => rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "vaspace {:#x} is not externally owned (allocate it with NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)",
                a.hVaSpace
            ),
            _ => rbail!(NV_ERR_INVALID_OBJECT_HANDLE, "hVaSpace {:#x} is not a FERMI_VASPACE_A of GPU {gpu}", a.hVaSpace),
        }
        let s = space(st, fd)?;
        if !s.gpus.contains(&gpu) {
            rbail!(
                NV_ERR_INVALID_DEVICE,
                "GPU {gpu} is not registered on this UVM fd (UVM_REGISTER_GPU first)"
            );
        }
        if s.vaspaces.contains_key(&gpu) {
            rbail!(
                NV_ERR_INVALID_DEVICE,
                "GPU {gpu} already has a registered VA space"
            );
        }
        s.vaspaces.insert(gpu, (a.hClient, a.hVaSpace));
        Ok(())
    }

    fn uvm_register_channel(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_REGISTER_CHANNEL_PARAMS,
    ) -> RmResult {
        let gpu = gpu_by_uuid(self, &a.gpuUuid)?;
        if !is_ctl(st, a.rmCtrlFd) {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "rmCtrlFd {} is not an open /dev/nvidiactl",
                a.rmCtrlFd
            );
        }
        let Some(ch) = st
            .clients
            .get(&a.hClient)
            .and_then(|c| c.channel(a.hClient, a.hChannel))
        else {
            rbail!(
                NV_ERR_INVALID_CHANNEL,
                "hChannel {:#x} is not a channel of client {:#x}",
                a.hChannel,
                a.hClient
            );
        };
        let s = space(st, fd)?;
        if s.vaspaces.get(&gpu) != Some(&(a.hClient, ch.vaspace)) {
            rbail!(
                NV_ERR_INVALID_CHANNEL,
                "channel {:#x}'s vaspace {:#x} is not registered on this UVM fd for GPU {gpu}",
                a.hChannel,
                ch.vaspace
            );
        }
        uvm_create_range(
            st,
            fd,
            a.base,
            a.length,
            UvmRange::Channel {
                gpu,
                client: a.hClient,
                channel: a.hChannel,
            },
        )
    }

    fn uvm_map_external(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
    ) -> RmResult {
        let end = check_range(a.base, a.length)?;
        if a.offset % PAGE != 0 {
            rbail!(
                NV_ERR_INVALID_OFFSET,
                "offset {:#x} is not 4 KiB aligned",
                a.offset
            );
        }
        let (targets, peers) = self.map_targets(space(st, fd)?, a, end)?;
        let (m, mgpu) = map_memory(st, a)?;
        for &(gpu, _) in &targets {
            if m.is_vram() && gpu != mgpu && !peers.contains(&(gpu.min(mgpu), gpu.max(mgpu))) {
                rbail!(
                    NV_ERR_INVALID_DEVICE,
                    "VRAM of GPU {mgpu} on GPU {gpu} needs UVM_ENABLE_PEER_ACCESS"
                );
            }
            let vm = self.devs[gpu]
                .gpuvm
                .read()
                .unwrap_or_else(|e| e.into_inner());
            let taken = vm.overlapping(a.base, end);
            if taken.iter().any(|p| p.value.owner != MapOwner::Uvm(fd)) {
                rbail!(
                    NV_ERR_UVM_ADDRESS_IN_USE,
                    "{:#x}+{:#x} is mapped on GPU {gpu} by someone else",
                    a.base,
                    a.length
                );
            }
        }
        for (gpu, writable) in targets {
            let entry = NvGpuMap {
                backing: m.backing.clone(),
                off: m.off + a.offset,
                writable,
                owner: MapOwner::Uvm(fd),
            };
            let mut vm = self.devs[gpu]
                .gpuvm
                .write()
                .unwrap_or_else(|e| e.into_inner());
            vm.insert(a.base, end, entry);
        }
        Ok(())
    }

    /// The range must lie in one external range; each attribute names a GPU with a registered
    /// VA space and a valid mapping type. Returns (GPU, writable) per entry and the peer pairs.
    #[allow(clippy::type_complexity)]
    fn map_targets(
        &self,
        s: &UvmSpace,
        a: &UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
        end: u64,
    ) -> RmResult<(Vec<(usize, bool)>, BTreeSet<(usize, usize)>)> {
        let n = a.gpuAttributesCount as usize;
        if n == 0 || n > a.perGpuAttributes.len() {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "gpuAttributesCount {n} (1..={UVM_MAX_GPUS})"
            );
        }
        let inside = s.ranges.overlapping(a.base, end);
        let one = matches!(inside.as_slice(), [r] if r.value == UvmRange::External && r.start <= a.base && end <= r.end);
        if !one {
            rbail!(
                NV_ERR_INVALID_ADDRESS,
                "{:#x}+{:#x} is not inside one external range (UVM_CREATE_EXTERNAL_RANGE first)",
                a.base,
                a.length
            );
        }
        let mut targets = Vec::with_capacity(n);
        for attr in &a.perGpuAttributes[..n] {
            let gpu =
                gpu_by_uuid(self, &attr.gpuUuid).map_err(|e| RmErr(NV_ERR_INVALID_DEVICE, e.1))?;
            if !s.vaspaces.contains_key(&gpu) {
                rbail!(
                    NV_ERR_INVALID_DEVICE,
                    "GPU {gpu} has no registered VA space on this UVM fd"
                );
            }
            if attr.gpuMappingType > UvmGpuMappingTypeReadOnly
                || attr.gpuCachingType > UvmGpuCachingTypeForceCached
            {
                rbail!(
                    NV_ERR_INVALID_ARGUMENT,
                    "mapping type {} / caching type {}",
                    attr.gpuMappingType,
                    attr.gpuCachingType
                );
            }
            targets.push((gpu, attr.gpuMappingType != UvmGpuMappingTypeReadOnly));
        }
        Ok((targets, s.peers.clone()))
    }

    /// UVM_FREE up to 580: `[base, base + length)` 4 KiB aligned and exactly one range.
    fn uvm_free_v570(&self, st: &mut NvState, fd: i32, a: &mut v580::UVM_FREE_PARAMS) -> RmResult {
        let end = check_range(a.base, a.length)?;
        let s = space(st, fd)?;
        match s.ranges.get(a.base) {
            Some(p) if p.start == a.base && p.end == end => {}
            _ => rbail!(
                NV_ERR_INVALID_ADDRESS,
                "no UVM range is exactly {:#x}+{:#x}",
                a.base,
                a.length
            ),
        }
        self.free_range(st, fd, a.base)
    }

    /// UVM_FREE from 590: the range starting at `base`.
    fn uvm_free_v590(&self, st: &mut NvState, fd: i32, a: &mut v590::UVM_FREE_PARAMS) -> RmResult {
        match space(st, fd)?.ranges.get(a.base) {
            Some(p) if p.start == a.base => {}
            _ => rbail!(
                NV_ERR_INVALID_ADDRESS,
                "no UVM range starts at {:#x}",
                a.base
            ),
        }
        self.free_range(st, fd, a.base)
    }

    /// Free the range starting at `base` if UVM_FREE may (external ranges only).
    fn free_range(&self, st: &mut NvState, fd: i32, base: u64) -> RmResult {
        let s = space(st, fd)?;
        let Some(r) = s.ranges.get(base) else {
            rbail!(NV_ERR_INVALID_ADDRESS, "no UVM range at {base:#x}");
        };
        let end = r.end;
        if let UvmRange::Channel { channel, .. } = r.value {
            rbail!(
                NV_ERR_INVALID_ADDRESS,
                "{base:#x} is channel {channel:#x}'s range: UVM_FREE frees external ranges only (UVM_UNREGISTER_CHANNEL drops it)"
            );
        }
        s.ranges.remove(base, end);
        self.unmap_uvm(fd, base, end);
        Ok(())
    }

    fn uvm_unregister_v570(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut v580::UVM_UNREGISTER_CHANNEL_PARAMS,
    ) -> RmResult {
        unregister_channel(st, fd, a.hClient, a.hChannel)
    }

    fn uvm_unregister_v590(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut v590::UVM_UNREGISTER_CHANNEL_PARAMS,
    ) -> RmResult {
        unregister_channel(st, fd, a.hClient, a.hChannel)
    }

    fn uvm_peer(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut UVM_ENABLE_PEER_ACCESS_PARAMS,
    ) -> RmResult {
        let (x, y) = (
            gpu_by_uuid(self, &a.gpuUuidA)?,
            gpu_by_uuid(self, &a.gpuUuidB)?,
        );
        let s = space(st, fd)?;
        if x == y || !s.gpus.contains(&x) || !s.gpus.contains(&y) {
            rbail!(
                NV_ERR_INVALID_DEVICE,
                "peer access needs two different registered GPUs ({x}, {y})"
            );
        }
        s.peers.insert((x.min(y), x.max(y)));
        Ok(())
    }

    /// Drop what UVM fd `fd` mapped (the fd is closing).
    pub(crate) fn uvm_teardown(&self, fd: i32, _space: &UvmSpace) {
        self.unmap_uvm(fd, 0, u64::MAX);
    }
}

/// The memory object MAP_EXTERNAL_ALLOCATION names (through the control fd and client it names)
/// and its device, after the bounds check.
fn map_memory(
    st: &NvState,
    a: &UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
) -> RmResult<(Arc<MemObj>, usize)> {
    if !is_ctl(st, a.rmCtrlFd) {
        rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "rmCtrlFd {} is not an open /dev/nvidiactl",
            a.rmCtrlFd
        );
    }
    let Some(c) = st.clients.get(&a.hClient) else {
        rbail!(
            NV_ERR_INVALID_CLIENT,
            "hClient {:#x} is not a client",
            a.hClient
        );
    };
    let (m, gpu) = match c.objects.get(&a.hMemory) {
        Some(Obj {
            kind: ObjKind::Memory(m),
            gpu,
            ..
        }) => (m.clone(), *gpu),
        Some(o) => rbail!(
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hMemory {:#x} is {}, not memory",
            a.hMemory,
            crate::driver::nv::class_str(o.class)
        ),
        None => rbail!(
            NV_ERR_OBJECT_NOT_FOUND,
            "hMemory {:#x} is not an object of client {:#x}",
            a.hMemory,
            a.hClient
        ),
    };
    if a.offset.checked_add(a.length).map_or(true, |e| e > m.size) {
        rbail!(
            NV_ERR_INVALID_LIMIT,
            "{:#x}+{:#x} is outside memory {:#x} of {:#x} bytes",
            a.offset,
            a.length,
            a.hMemory,
            m.size
        );
    }
    Ok((m, gpu))
}

/// The UVM space of `fd`.
fn space(st: &mut NvState, fd: i32) -> RmResult<&mut UvmSpace> {
    match st.fds.get_mut(&fd) {
        Some(NvFd::Uvm(s)) => Ok(s),
        _ => rbail!(NV_ERR_INVALID_STATE, "fd {fd} is not a UVM fd"),
    }
}

/// A new range (external or channel) in `fd`'s space.
fn uvm_create_range(st: &mut NvState, fd: i32, base: u64, length: u64, kind: UvmRange) -> RmResult {
    let end = check_range(base, length)?;
    let s = space(st, fd)?;
    if let Some(o) = s.ranges.overlapping(base, end).first() {
        rbail!(
            NV_ERR_UVM_ADDRESS_IN_USE,
            "{base:#x}+{length:#x} overlaps the UVM range {:#x}..{:#x}",
            o.start,
            o.end
        );
    }
    s.ranges.insert(base, end, kind);
    Ok(())
}

/// UVM_UNREGISTER_CHANNEL: drop the range channel `channel` of `client` was registered with on
/// `fd` (looked up by handle, as UVM's `find_user_channel` does).
fn unregister_channel(st: &mut NvState, fd: i32, client: u32, channel: u32) -> RmResult {
    let s = space(st, fd)?;
    let found = s.ranges.iter().find_map(|r| match r.value {
        UvmRange::Channel {
            client: c,
            channel: h,
            ..
        } if c == client && h == channel => Some((r.start, r.end)),
        _ => None,
    });
    let Some((start, end)) = found else {
        rbail!(
            NV_ERR_INVALID_CHANNEL,
            "channel {channel:#x} of client {client:#x} is not registered on this UVM fd"
        );
    };
    s.ranges.remove(start, end);
    Ok(())
}
