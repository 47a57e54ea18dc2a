//! Emulated NV_ESC_RM_ALLOC: the checks, in RM's order and with its status codes: the client
//! (NV_ERR_INVALID_CLIENT); the class exists (NV_ERR_INVALID_CLASS); the parent exists and is of a
//! class this class may live under (NV_ERR_INVALID_OBJECT_PARENT): device under client, subdevice
//! under device, usermode under subdevice, vaspace / memory / virtual memory / TSG under device,
//! ctxshare and channel under TSG, compute and copy objects under a channel; the chip offers the
//! class (NV_ERR_INVALID_CLASS, e.g. HOPPER_COMPUTE_A on AD102); then the parameters, read with
//! the family's size for that class whatever `paramsSize` says, and checked per class. Handles:
//! clients 0xC1D0xxxx, objects 0xCAF0xxxx when `hObjectNew` is 0; a taken handle is
//! NV_ERR_INSERT_DUPLICATE_NAME. Channels and engine objects are announced to the software GPU
//! after the lock is released; its refusal undoes the allocation (NV_ERR_NOT_SUPPORTED).
//!
//! Not guaranteed: TSGs run only the GRAPHICS engine (copy-engine TSGs are refused), one device
//! object per client and device is not enforced, vaspaces take only index GPU_NEW.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::hooks::EmuChannel;
use super::objects::{read_params, write_params, ChannelObj, Client, Obj, ObjKind};
use super::spec::{class_kind, ClassKind};
use super::{lock, rbail, EmuNv, NvState, RmResult};
use crate::driver::nv::class_str;
use crate::sys::nv::common::*;
use crate::sys::nv::{v570, v580};

/// What an allocation hands to the software GPU once the lock is released.
enum AllocEvent {
    None,
    Channel(usize, EmuChannel),
    Engine(usize, EmuChannel, u32),
}

/// Whether a class of `kind` may live under `parent` (`None`: the client).
fn parent_ok(kind: ClassKind, parent: Option<&ObjKind>) -> bool {
    use ClassKind as K;
    matches!(
        (kind, parent),
        (K::Device, None)
            | (K::Subdevice, Some(ObjKind::Device))
            | (K::Usermode, Some(ObjKind::Subdevice))
            | (
                K::VaSpace | K::Memory | K::Virtual | K::Tsg | K::OsDescriptor,
                Some(ObjKind::Device)
            )
            | (K::CtxShare | K::Channel, Some(ObjKind::Tsg { .. }))
            | (K::Compute | K::Copy, Some(ObjKind::Channel(_)))
            | (
                K::Other,
                Some(ObjKind::Device | ObjKind::Subdevice | ObjKind::Channel(_))
            )
    )
}

/// What `kind` needs as a parent, for messages.
fn parent_want(kind: ClassKind) -> &'static str {
    use ClassKind as K;
    match kind {
        K::Device => "the client",
        K::Subdevice => "an NV01_DEVICE_0",
        K::Usermode => "an NV20_SUBDEVICE_0",
        K::VaSpace | K::Memory | K::Virtual | K::Tsg | K::OsDescriptor => "an NV01_DEVICE_0",
        K::CtxShare | K::Channel => "a KEPLER_CHANNEL_GROUP_A (TSG)",
        K::Compute | K::Copy => "a channel (GPFIFO class)",
        K::Client | K::Other => "a device, subdevice or channel",
    }
}

/// Refuse a NULL parameter pointer for classes whose parameters RM requires.
fn need(a: &NVOS21_PARAMETERS, what: &str) -> RmResult {
    if a.pAllocParms == 0 {
        rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "{} needs {what} parameters (pAllocParms is NULL)",
            class_str(a.hClass)
        );
    }
    Ok(())
}

impl EmuNv {
    /// NV_ESC_RM_ALLOC.
    pub(crate) fn rm_alloc(self: &Arc<Self>, fd: i32, a: &mut NVOS21_PARAMETERS) -> RmResult {
        let event = {
            let mut st = lock(&self.state);
            self.rm_alloc_locked(&mut st, fd, a)?
        };
        let (gpu, ch, engine) = match event {
            AllocEvent::None => return Ok(()),
            AllocEvent::Channel(g, ch) => (g, ch, None),
            AllocEvent::Engine(g, ch, class) => (g, ch, Some(class)),
        };
        let Some(sw) = self.gpu_of(gpu) else {
            return Ok(());
        };
        let dev = self.device(gpu);
        let r = match engine {
            None => sw.channel_created(&dev, &ch),
            Some(class) => sw.engine_bound(&dev, &ch, class),
        };
        if let Err(e) = r {
            let mut st = lock(&self.state);
            let mut gone = self.free_object(&mut st, a.hRoot, a.hObjectNew);
            drop(st);
            // The GPU never accepted that channel: it hears only of others going away.
            gone.retain(|(_, c)| c.handle != a.hObjectNew);
            self.notify_destroyed(gone);
            rbail!(
                NV_ERR_NOT_SUPPORTED,
                "the software GPU refused {}: {}",
                class_str(a.hClass),
                e.message()
            );
        }
        Ok(())
    }

    fn rm_alloc_locked(
        &self,
        st: &mut NvState,
        fd: i32,
        a: &mut NVOS21_PARAMETERS,
    ) -> RmResult<AllocEvent> {
        let Some(kind) = class_kind(a.hClass) else {
            rbail!(NV_ERR_INVALID_CLASS, "RM knows no class {:#x}", a.hClass);
        };
        if kind == ClassKind::Client {
            return self.alloc_client(st, fd, a).map(|_| AllocEvent::None);
        }
        let gpu = self.check_parent(st, kind, a)?;
        let size = self.abi.alloc_params_size(a.hClass);
        let (okind, gpu) = self.construct(st, kind, gpu, a, size)?;
        let client_h = a.hRoot;
        let Some(client) = st.clients.get_mut(&client_h) else {
            rbail!(NV_ERR_INVALID_CLIENT, "client {client_h:#x} vanished");
        };
        let h = client.handle(a.hObjectNew, client_h)?;
        let obj = Obj {
            class: a.hClass,
            parent: a.hObjectParent,
            gpu,
            kind: okind,
        };
        client.insert(h, obj);
        a.hObjectNew = h;
        let snapshot = |ch: u32| {
            st.clients
                .get(&client_h)
                .and_then(|c| c.channel(client_h, ch))
        };
        Ok(match (kind, snapshot(h), snapshot(a.hObjectParent)) {
            (ClassKind::Channel, Some(ch), _) => {
                st.tokens.insert((gpu, ch.work_submit_token), (client_h, h));
                AllocEvent::Channel(gpu, ch)
            }
            (ClassKind::Compute | ClassKind::Copy, _, Some(ch)) => {
                AllocEvent::Engine(gpu, ch, a.hClass)
            }
            _ => AllocEvent::None,
        })
    }

    /// The client, parent and class-list checks; returns the parent's device index.
    fn check_parent(
        &self,
        st: &NvState,
        kind: ClassKind,
        a: &NVOS21_PARAMETERS,
    ) -> RmResult<usize> {
        let client_h = a.hRoot;
        let Some(client) = st.clients.get(&client_h) else {
            rbail!(NV_ERR_INVALID_CLIENT, "hRoot {client_h:#x} is not a client");
        };
        let parent = match client.objects.get(&a.hObjectParent) {
            _ if a.hObjectParent == client_h => None,
            Some(p) => Some(p),
            None => rbail!(
                NV_ERR_INVALID_OBJECT_PARENT,
                "parent {:#x} of {} is not an object of client {client_h:#x}",
                a.hObjectParent,
                class_str(a.hClass)
            ),
        };
        if !parent_ok(kind, parent.map(|p| &p.kind)) {
            rbail!(
                NV_ERR_INVALID_OBJECT_PARENT,
                "{} must be allocated under {}, not under {}",
                class_str(a.hClass),
                parent_want(kind),
                parent.map_or("the client".to_string(), |p| class_str(p.class))
            );
        }
        if kind != ClassKind::Device && !self.chip.offers(a.hClass) {
            rbail!(
                NV_ERR_INVALID_CLASS,
                "{} is not in the class list of {} ({})",
                class_str(a.hClass),
                self.chip.chip,
                self.chip.name
            );
        }
        Ok(parent.map_or(0, |p| p.gpu))
    }

    /// An NV01_ROOT_CLIENT (any root class becomes a client).
    fn alloc_client(&self, st: &mut NvState, fd: i32, a: &mut NVOS21_PARAMETERS) -> RmResult {
        if a.pAllocParms != 0 {
            let p: v580::NV0000_ALLOC_PARAMETERS = read_params(
                a.pAllocParms,
                self.abi.root_client,
                "NV0000_ALLOC_PARAMETERS",
            )?;
            if a.hObjectNew == 0 {
                a.hObjectNew = p.hClient;
            }
        }
        let h = if a.hObjectNew != 0 {
            if st.clients.contains_key(&a.hObjectNew) {
                rbail!(
                    NV_ERR_INSERT_DUPLICATE_NAME,
                    "client handle {:#x} is taken",
                    a.hObjectNew
                );
            }
            a.hObjectNew
        } else {
            while st.clients.contains_key(&st.next_client) {
                st.next_client += 1;
            }
            st.next_client += 1;
            st.next_client - 1
        };
        let client = Client {
            fd,
            objects: BTreeMap::new(),
            engines: BTreeMap::new(),
            next_handle: 0xCAF0_0000,
        };
        st.clients.insert(h, client);
        a.hObjectNew = h;
        Ok(())
    }

    /// Decode the parameters of `kind` and build its state; returns it and the device index.
    fn construct(
        &self,
        st: &mut NvState,
        kind: ClassKind,
        gpu: usize,
        a: &NVOS21_PARAMETERS,
        size: usize,
    ) -> RmResult<(ObjKind, usize)> {
        let ptr = a.pAllocParms;
        Ok(match kind {
            ClassKind::Device => self.construct_device(a, size)?,
            ClassKind::Subdevice => {
                let p: NV2080_ALLOC_PARAMETERS = read_params(ptr, size, "NV2080_ALLOC_PARAMETERS")?;
                if p.subDeviceId != 0 {
                    rbail!(
                        NV_ERR_INVALID_ARGUMENT,
                        "subDeviceId {} (one subdevice per device)",
                        p.subDeviceId
                    );
                }
                (ObjKind::Subdevice, gpu)
            }
            ClassKind::Usermode => (ObjKind::Usermode, gpu),
            ClassKind::VaSpace => (self.construct_vaspace(ptr)?, gpu),
            ClassKind::Memory => {
                need(a, "NV_MEMORY_ALLOCATION_PARAMS")?;
                (ObjKind::Memory(self.construct_memory(st, gpu, a)?), gpu)
            }
            ClassKind::OsDescriptor => rbail!(
                NV_ERR_NOT_SUPPORTED,
                "OS-descriptor memory is emulated only through NV_ESC_RM_ALLOC_MEMORY on /dev/nvidiaN"
            ),
            ClassKind::Virtual => (construct_virtual(a, size)?, gpu),
            ClassKind::Tsg => (construct_tsg(st, gpu, a, size)?, gpu),
            ClassKind::CtxShare => (construct_ctxshare(st, gpu, a, size)?, gpu),
            ClassKind::Channel => {
                need(a, "NV_CHANNEL_ALLOC_PARAMS")?;
                (construct_channel(st, gpu, a, size)?, gpu)
            }
            ClassKind::Compute | ClassKind::Copy => (ObjKind::Engine, gpu),
            ClassKind::Other => (ObjKind::Other, gpu),
            ClassKind::Client => rbail!(NV_ERR_INVALID_STATE, "clients are allocated apart"),
        })
    }

    fn construct_device(&self, a: &NVOS21_PARAMETERS, size: usize) -> RmResult<(ObjKind, usize)> {
        let p: NV0080_ALLOC_PARAMETERS =
            read_params(a.pAllocParms, size, "NV0080_ALLOC_PARAMETERS")?;
        let n = self.devs.len();
        if p.deviceId as usize >= n {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "deviceId {} but {n} GPU(s) exist",
                p.deviceId
            );
        }
        if p.vaMode > NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "vaMode {} is not 0, 1 or 2",
                p.vaMode
            );
        }
        if p.hClientShare != 0 && p.hClientShare != a.hRoot {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "hClientShare {:#x} is not this client",
                p.hClientShare
            );
        }
        Ok((ObjKind::Device, p.deviceId as usize))
    }

    fn construct_vaspace(&self, ptr: u64) -> RmResult<ObjKind> {
        let what = "NV_VASPACE_ALLOCATION_PARAMETERS";
        let (index, flags) = if self.abi.major >= 580 {
            let p: v580::NV_VASPACE_ALLOCATION_PARAMETERS =
                read_params(ptr, self.abi.vaspace, what)?;
            (p.index, p.flags)
        } else {
            let p: v570::NV_VASPACE_ALLOCATION_PARAMETERS =
                read_params(ptr, self.abi.vaspace, what)?;
            (p.index, p.flags)
        };
        if index != NV_VASPACE_ALLOCATION_INDEX_GPU_NEW {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "vaspace index {index} (only GPU_NEW (0) is emulated)"
            );
        }
        Ok(ObjKind::VaSpace {
            external: flags & NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED != 0,
        })
    }
}

fn construct_virtual(a: &NVOS21_PARAMETERS, size: usize) -> RmResult<ObjKind> {
    need(a, "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS")?;
    let p: NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS =
        read_params(a.pAllocParms, size, "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS")?;
    if p.limit <= p.offset {
        rbail!(
            NV_ERR_INVALID_LIMIT,
            "limit {:#x} is not above offset {:#x}",
            p.limit,
            p.offset
        );
    }
    Ok(ObjKind::Virtual {
        offset: p.offset,
        limit: p.limit,
    })
}

fn construct_tsg(
    st: &NvState,
    gpu: usize,
    a: &NVOS21_PARAMETERS,
    size: usize,
) -> RmResult<ObjKind> {
    need(a, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS")?;
    let p: NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS = read_params(
        a.pAllocParms,
        size,
        "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS",
    )?;
    if p.engineType != NV2080_ENGINE_TYPE_GRAPHICS {
        rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "engineType {} (the emulator runs GRAPHICS (1) TSGs only)",
            p.engineType
        );
    }
    let c = st.clients.get(&a.hRoot);
    if p.hVASpace != 0 && !c.is_some_and(|c| c.is_vaspace(p.hVASpace, gpu)) {
        rbail!(
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hVASpace {:#x} is not a FERMI_VASPACE_A of this device",
            p.hVASpace
        );
    }
    Ok(ObjKind::Tsg {
        engine_type: p.engineType,
        enabled: false,
    })
}

fn construct_ctxshare(
    st: &NvState,
    gpu: usize,
    a: &NVOS21_PARAMETERS,
    size: usize,
) -> RmResult<ObjKind> {
    need(a, "NV_CTXSHARE_ALLOCATION_PARAMETERS")?;
    let what = "NV_CTXSHARE_ALLOCATION_PARAMETERS";
    let mut p: NV_CTXSHARE_ALLOCATION_PARAMETERS = read_params(a.pAllocParms, size, what)?;
    let Some(c) = st.clients.get(&a.hRoot) else {
        rbail!(NV_ERR_INVALID_CLIENT, "client vanished");
    };
    if !c.is_vaspace(p.hVASpace, gpu) {
        rbail!(
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hVASpace {:#x} is not a FERMI_VASPACE_A of this device",
            p.hVASpace
        );
    }
    if p.flags > NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED {
        rbail!(NV_ERR_INVALID_ARGUMENT, "subcontext flags {:#x}", p.flags);
    }
    let siblings = c
        .objects
        .values()
        .filter(|o| o.parent == a.hObjectParent && matches!(o.kind, ObjKind::CtxShare { .. }))
        .count();
    p.subctxId = siblings as u32;
    write_params(a.pAllocParms, size, &p, what)?;
    Ok(ObjKind::CtxShare {
        vaspace: p.hVASpace,
    })
}

/// A channel: its ring, USERD, error notifier and subcontext must be objects of the TSG's device.
fn construct_channel(
    st: &mut NvState,
    gpu: usize,
    a: &NVOS21_PARAMETERS,
    size: usize,
) -> RmResult<ObjKind> {
    // 550's and 570's layouts are prefixes of 580's channel struct.
    let p: v580::NV_CHANNEL_ALLOC_PARAMS =
        read_params(a.pAllocParms, size, "NV_CHANNEL_ALLOC_PARAMS")?;
    let Some(client) = st.clients.get(&a.hRoot) else {
        rbail!(NV_ERR_INVALID_CLIENT, "client vanished");
    };
    let vaspace = check_channel(client, gpu, a.hObjectParent, &p)?;
    let chid = st.next_chid[gpu];
    st.next_chid[gpu] += 1;
    Ok(ObjKind::Channel(Box::new(ChannelObj {
        ctx_share: p.hContextShare,
        vaspace,
        gpfifo_va: p.gpFifoOffset,
        entries: p.gpFifoEntries,
        h_buffer: p.hObjectBuffer,
        h_userd: p.hUserdMemory[0],
        userd_offset: p.userdOffset[0],
        h_error: p.hObjectError,
        chid,
        token: chid,
    })))
}

/// The channel parameter checks; returns the subcontext's vaspace.
fn check_channel(
    client: &Client,
    gpu: usize,
    tsg: u32,
    p: &v580::NV_CHANNEL_ALLOC_PARAMS,
) -> RmResult<u32> {
    if p.gpFifoEntries < 2 || !p.gpFifoEntries.is_power_of_two() {
        rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "gpFifoEntries {} is not a power of two >= 2",
            p.gpFifoEntries
        );
    }
    if p.gpFifoOffset % 8 != 0 {
        rbail!(
            NV_ERR_INVALID_OFFSET,
            "gpFifoOffset {:#x} is not 8-byte aligned",
            p.gpFifoOffset
        );
    }
    client.memory(p.hObjectBuffer, gpu, "hObjectBuffer")?;
    if p.hObjectError != 0 {
        client.memory(p.hObjectError, gpu, "hObjectError")?;
    }
    let userd = client.memory(p.hUserdMemory[0], gpu, "hUserdMemory[0]")?;
    let off = p.userdOffset[0];
    if off % 512 != 0 || off.checked_add(512).map_or(true, |e| e > userd.size) {
        rbail!(
            NV_ERR_INVALID_OFFSET,
            "userdOffset[0] {off:#x}: USERD (512 bytes, 512-aligned) must lie inside memory {:#x} of {:#x} bytes",
            p.hUserdMemory[0],
            userd.size
        );
    }
    if p.engineType != 0 && p.engineType != NV2080_ENGINE_TYPE_GRAPHICS {
        rbail!(
            NV_ERR_INVALID_ARGUMENT,
            "engineType {} differs from the TSG's GRAPHICS",
            p.engineType
        );
    }
    match client.objects.get(&p.hContextShare) {
        Some(Obj {
            kind: ObjKind::CtxShare { vaspace },
            parent,
            ..
        }) if *parent == tsg => Ok(*vaspace),
        _ => rbail!(
            NV_ERR_INVALID_OBJECT_HANDLE,
            "hContextShare {:#x} is not a FERMI_CONTEXT_SHARE_A of TSG {tsg:#x}",
            p.hContextShare
        ),
    }
}
