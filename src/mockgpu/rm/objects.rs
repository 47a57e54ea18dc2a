//! The emulated RM handle table: clients and their objects (what each class keeps), RM_FREE, OS
//! events, and the channel snapshots handed to the software GPU. Allocation is `alloc.rs`.
//!
//! RM_FREE frees the object and everything below it, children first (a client: all its objects);
//! freeing a channel tells the software GPU, freeing memory drops its RM_MAP_MEMORY_DMA mappings
//! (UVM mappings keep the pages, as UVM holds its own reference). An unknown client is
//! NV_ERR_INVALID_CLIENT, an unknown object NV_ERR_OBJECT_NOT_FOUND.
//!
//! Not guaranteed: `hObjectParent` of RM_FREE is not checked against the object's parent.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::hooks::{EmuChannel, EmuEngine};
use super::memory::MemObj;
use super::{lock, rbail, EmuNv, NvState, RmErr, RmResult};
use crate::driver::api::{arg_bytes, arg_from_bytes, IoctlArg};
use crate::driver::nv::class_str;
use crate::mockgpu::backing::{copy_from_user, copy_to_user};
use crate::sys::nv::common::*;

/// One RM client and its objects.
pub(crate) struct Client {
    /// The control fd it was allocated through (closing it frees the client).
    pub(crate) fd: i32,
    pub(crate) objects: BTreeMap<u32, Obj>,
    /// The engine objects (compute, copy) under each channel, by the channel's handle: kept with
    /// [`Client::insert`] and [`Client::remove`], so a doorbell finds its channel's engines
    /// without a walk over every object of the client.
    pub(crate) engines: BTreeMap<u32, Vec<u32>>,
    pub(crate) next_handle: u32,
}

/// One RM object.
pub(crate) struct Obj {
    pub(crate) class: u32,
    pub(crate) parent: u32,
    /// The device index of device-bound objects.
    pub(crate) gpu: usize,
    pub(crate) kind: ObjKind,
}

/// Class-specific state.
pub(crate) enum ObjKind {
    Device,
    Subdevice,
    Usermode,
    VaSpace { external: bool },
    Memory(Arc<MemObj>),
    Virtual { offset: u64, limit: u64 },
    Tsg { engine_type: u32, enabled: bool },
    CtxShare { vaspace: u32 },
    Channel(Box<ChannelObj>),
    Engine,
    Other,
}

/// A channel's RM state (see [`EmuChannel`]).
pub(crate) struct ChannelObj {
    pub(crate) ctx_share: u32,
    pub(crate) vaspace: u32,
    pub(crate) gpfifo_va: u64,
    pub(crate) entries: u32,
    pub(crate) h_buffer: u32,
    pub(crate) h_userd: u32,
    pub(crate) userd_offset: u64,
    pub(crate) h_error: u32,
    pub(crate) chid: u32,
    pub(crate) token: u32,
}

/// Read `size` bytes of RM_ALLOC parameters at `ptr` into a `T` (zero-extended when the family's
/// struct is shorter than `T`, as 550's are).
pub(crate) fn read_params<T: IoctlArg>(ptr: u64, size: usize, what: &str) -> RmResult<T> {
    if ptr == 0 {
        return Ok(T::default());
    }
    let bytes = copy_from_user(ptr, size, what)
        .map_err(|e| RmErr(NV_ERR_INVALID_POINTER, e.message().to_string()))?;
    let mut full = vec![0u8; std::mem::size_of::<T>()];
    let n = size.min(full.len());
    full[..n].copy_from_slice(&bytes[..n]);
    arg_from_bytes(&full).ok_or_else(|| RmErr(NV_ERR_INVALID_STATE, format!("{what}: decode")))
}

/// Write `v`'s first `size` bytes back to `ptr` (RM copies parameters out after the call).
pub(crate) fn write_params<T: IoctlArg>(ptr: u64, size: usize, v: &T, what: &str) -> RmResult {
    if ptr == 0 || size == 0 {
        return Ok(());
    }
    let b = arg_bytes(v);
    copy_to_user(ptr, &b[..size.min(b.len())], what)
        .map_err(|e| RmErr(NV_ERR_INVALID_POINTER, e.message().to_string()))
}

impl Client {
    pub(crate) fn obj(&self, h: u32, what: &str) -> RmResult<&Obj> {
        match self.objects.get(&h) {
            Some(o) => Ok(o),
            None => rbail!(
                NV_ERR_INVALID_OBJECT_HANDLE,
                "{what} {h:#x} is not an object of this client"
            ),
        }
    }

    /// A fresh handle, or `want` if free.
    pub(crate) fn handle(&mut self, want: u32, client: u32) -> RmResult<u32> {
        if want != 0 {
            if want == client || self.objects.contains_key(&want) {
                rbail!(
                    NV_ERR_INSERT_DUPLICATE_NAME,
                    "handle {want:#x} is already in use in client {client:#x}"
                );
            }
            return Ok(want);
        }
        while self.objects.contains_key(&self.next_handle) {
            self.next_handle += 1;
        }
        self.next_handle += 1;
        Ok(self.next_handle - 1)
    }

    /// The device index of device or subdevice `h`.
    pub(crate) fn device_gpu(&self, h: u32, what: &str) -> RmResult<usize> {
        let o = self.obj(h, what)?;
        if !matches!(o.kind, ObjKind::Device | ObjKind::Subdevice) {
            rbail!(
                NV_ERR_INVALID_OBJECT_HANDLE,
                "{what} {h:#x} is {}, not a device or subdevice",
                class_str(o.class)
            );
        }
        Ok(o.gpu)
    }

    /// Whether `h` is a FERMI_VASPACE_A of device `gpu`.
    pub(crate) fn is_vaspace(&self, h: u32, gpu: usize) -> bool {
        matches!(self.objects.get(&h), Some(o) if o.gpu == gpu && matches!(o.kind, ObjKind::VaSpace { .. }))
    }

    /// The memory object `h` of device `gpu`.
    pub(crate) fn memory(&self, h: u32, gpu: usize, what: &str) -> RmResult<Arc<MemObj>> {
        match self.objects.get(&h) {
            Some(Obj {
                kind: ObjKind::Memory(m),
                gpu: g,
                ..
            }) if *g == gpu => Ok(m.clone()),
            Some(o) => rbail!(
                NV_ERR_INVALID_OBJECT_HANDLE,
                "{what} {h:#x} is {} on device {}, not a memory object of device {gpu}",
                class_str(o.class),
                o.gpu
            ),
            None => rbail!(
                NV_ERR_INVALID_OBJECT_HANDLE,
                "{what} {h:#x} is not an object of this client"
            ),
        }
    }

    /// The snapshot of channel `h`.
    pub(crate) fn channel(&self, client: u32, h: u32) -> Option<EmuChannel> {
        let o = self.objects.get(&h)?;
        let ObjKind::Channel(c) = &o.kind else {
            return None;
        };
        let (engine_type, scheduled) = match self.objects.get(&o.parent).map(|t| &t.kind) {
            Some(ObjKind::Tsg {
                engine_type,
                enabled,
            }) => (*engine_type, *enabled),
            _ => (0, false),
        };
        let engines = self
            .engines
            .get(&h)
            .into_iter()
            .flatten()
            .filter_map(|eh| {
                let e = self.objects.get(eh)?;
                Some(EmuEngine {
                    class: e.class,
                    handle: *eh,
                })
            })
            .collect();
        Some(EmuChannel {
            client,
            handle: h,
            class: o.class,
            tsg: o.parent,
            engine_type,
            ctx_share: c.ctx_share,
            vaspace: c.vaspace,
            gpfifo_va: c.gpfifo_va,
            gpfifo_entries: c.entries,
            gpfifo_memory: c.h_buffer,
            userd_memory: c.h_userd,
            userd_offset: c.userd_offset,
            error_notifier: c.h_error,
            chid: c.chid,
            work_submit_token: c.token,
            engines,
            scheduled,
        })
    }

    /// `h` and everything below it, children first.
    /// Add object `h` (an engine also to its channel's engine list).
    pub(crate) fn insert(&mut self, h: u32, obj: Obj) {
        if matches!(obj.kind, ObjKind::Engine) {
            let list = self.engines.entry(obj.parent).or_default();
            list.push(h);
            list.sort_unstable();
        }
        self.objects.insert(h, obj);
    }

    /// Remove object `h` (an engine also from its channel's engine list).
    pub(crate) fn remove(&mut self, h: u32) -> Option<Obj> {
        let o = self.objects.remove(&h)?;
        if matches!(o.kind, ObjKind::Engine) {
            if let Some(list) = self.engines.get_mut(&o.parent) {
                list.retain(|&e| e != h);
                if list.is_empty() {
                    self.engines.remove(&o.parent);
                }
            }
        }
        Some(o)
    }

    fn subtree(&self, h: u32) -> Vec<u32> {
        let mut order = vec![h];
        let mut i = 0;
        while i < order.len() {
            let p = order[i];
            order.extend(
                self.objects
                    .iter()
                    .filter(|(_, o)| o.parent == p)
                    .map(|(c, _)| *c),
            );
            i += 1;
        }
        order.reverse();
        order
    }
}

impl EmuNv {
    /// NV_ESC_RM_FREE.
    pub(crate) fn rm_free(self: &Arc<Self>, a: &mut NVOS00_PARAMETERS) -> RmResult {
        let mut st = lock(&self.state);
        let Some(client) = st.clients.get(&a.hRoot) else {
            rbail!(
                NV_ERR_INVALID_CLIENT,
                "hRoot {:#x} is not a client",
                a.hRoot
            );
        };
        let gone = if a.hObjectOld == a.hRoot {
            self.free_client(&mut st, a.hRoot)
        } else {
            if !client.objects.contains_key(&a.hObjectOld) {
                rbail!(
                    NV_ERR_OBJECT_NOT_FOUND,
                    "object {:#x} is not in client {:#x} (never allocated, or freed)",
                    a.hObjectOld,
                    a.hRoot
                );
            }
            self.free_object(&mut st, a.hRoot, a.hObjectOld)
        };
        drop(st);
        self.notify_destroyed(gone);
        Ok(())
    }

    /// Free a client and all its objects; returns the channels that went away.
    pub(crate) fn free_client(&self, st: &mut NvState, client: u32) -> Vec<(usize, EmuChannel)> {
        let roots: Vec<u32> = st.clients.get(&client).map_or(Vec::new(), |c| {
            c.objects
                .iter()
                .filter(|(_, o)| o.parent == client)
                .map(|(h, _)| *h)
                .collect()
        });
        let mut gone = Vec::new();
        for r in roots {
            gone.extend(self.free_object(st, client, r));
        }
        st.clients.remove(&client);
        st.cpu_maps.retain(|_, (c, _)| *c != client);
        st.os_events.retain(|(c, _, _)| *c != client);
        gone
    }

    /// Free `h` and its subtree; returns the channels that went away.
    pub(crate) fn free_object(
        &self,
        st: &mut NvState,
        client: u32,
        h: u32,
    ) -> Vec<(usize, EmuChannel)> {
        let mut gone = Vec::new();
        let order = st.clients.get(&client).map_or(Vec::new(), |c| c.subtree(h));
        for x in order {
            let snapshot = st.clients.get(&client).and_then(|c| c.channel(client, x));
            let Some(o) = st.clients.get_mut(&client).and_then(|c| c.remove(x)) else {
                continue;
            };
            if let Some(ch) = snapshot {
                st.tokens.remove(&(o.gpu, ch.work_submit_token));
                gone.push((o.gpu, ch));
            }
            if let ObjKind::Memory(m) = &o.kind {
                if m.is_vram() {
                    st.vram_used[o.gpu] = st.vram_used[o.gpu].saturating_sub(m.size);
                }
                self.unmap_rm_dma(o.gpu, client, x);
            }
            if matches!(o.kind, ObjKind::Virtual { .. } | ObjKind::VaSpace { .. }) {
                self.unmap_rm_dma_target(o.gpu, client, x);
            }
        }
        gone
    }

    /// Tell the software GPUs which channels went away (no lock held).
    pub(crate) fn notify_destroyed(self: &Arc<Self>, gone: Vec<(usize, EmuChannel)>) {
        for (gpu, ch) in gone {
            if let Some(sw) = self.gpu_of(gpu) {
                sw.channel_destroyed(&self.device(gpu), &ch);
            }
        }
    }

    /// The snapshot of the channel with `token` on `gpu`.
    pub(crate) fn channel_by_token(&self, gpu: usize, token: u32) -> crate::Result<EmuChannel> {
        let st = lock(&self.state);
        st.tokens
            .get(&(gpu, token))
            .and_then(|(c, h)| st.clients.get(c).and_then(|cl| cl.channel(*c, *h)))
            .ok_or_else(|| {
                crate::Error::Device(format!(
                    "emu nv gpu {gpu}: no channel has work submit token {token:#x}"
                ))
            })
    }

    /// Every channel alive on `gpu`.
    pub(crate) fn channels_of(&self, gpu: usize) -> Vec<EmuChannel> {
        let st = lock(&self.state);
        let mut v: Vec<EmuChannel> = st
            .tokens
            .iter()
            .filter(|((g, _), _)| *g == gpu)
            .filter_map(|(_, (c, h))| st.clients.get(c).and_then(|cl| cl.channel(*c, *h)))
            .collect();
        v.sort_by_key(|c| c.chid);
        v
    }

    /// NV_ESC_ALLOC_OS_EVENT / FREE_OS_EVENT.
    pub(crate) fn os_event(&self, client: u32, device: u32, fd: u32, alloc: bool) -> RmResult {
        let mut st = lock(&self.state);
        let Some(c) = st.clients.get(&client) else {
            rbail!(NV_ERR_INVALID_CLIENT, "hClient {client:#x} is not a client");
        };
        c.device_gpu(device, "hDevice")?;
        if !st.fds.contains_key(&(fd as i32)) {
            rbail!(
                NV_ERR_INVALID_ARGUMENT,
                "fd {} is not an open NVIDIA fd",
                fd as i32
            );
        }
        let key = (client, device, fd);
        if alloc {
            st.os_events.push(key);
        } else {
            let Some(i) = st.os_events.iter().position(|k| *k == key) else {
                rbail!(
                    NV_ERR_OBJECT_NOT_FOUND,
                    "no OS event of client {client:#x} device {device:#x} on fd {}",
                    fd as i32
                );
            };
            st.os_events.remove(i);
        }
        Ok(())
    }
}
