//! One channel as the GPU thread runs it: the host's GP entry fetch (GPPut from USERD, entries
//! from the ring, GPGet published back), the method-group walk of each pushbuffer segment, the
//! per-subchannel class binding, and the dispatch of every method write to the host, compute or
//! copy engine. Faults are recorded with their position and stop the channel.

use super::compute::ComputeEngine;
use super::copy::CopyEngine;
use super::host::HostEngine;
use super::{lock, ChannelFault, ChannelId, ChannelSlot, FaultKind, Shared};
use crate::hw::nv::decode::method_text;
use crate::hw::nv::gpfifo::decode_gp_entry;
use crate::hw::nv::header::{MethodHeader, SecOp};
use crate::hw::nv::methods::{method_name, ClassKind, HOST_METHOD_LIMIT};
use crate::mockgpu::engine_loop::{EngineRunner, RunResult};
use crate::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A fault raised while executing, before its position is attached.
#[derive(Debug)]
pub(super) struct StepFault {
    pub kind: FaultKind,
    pub reason: String,
}

pub(super) type StepResult<T> = std::result::Result<T, StepFault>;

/// A host/pushbuffer error.
pub(super) fn pbdma(reason: impl Into<String>) -> StepFault {
    StepFault {
        kind: FaultKind::Pbdma,
        reason: reason.into(),
    }
}

/// A compute-engine error.
pub(super) fn gr(reason: impl Into<String>) -> StepFault {
    StepFault {
        kind: FaultKind::Graphics,
        reason: reason.into(),
    }
}

/// A copy-engine error.
pub(super) fn ce(reason: impl Into<String>) -> StepFault {
    StepFault {
        kind: FaultKind::CopyEngine,
        reason: reason.into(),
    }
}

/// A memory access error (outside the GPU-mapped ranges).
pub(super) fn mmu(e: Error) -> StepFault {
    StepFault {
        kind: FaultKind::Mmu,
        reason: e.message().to_string(),
    }
}

/// What executing one method write did.
pub(super) enum Step {
    Done,
    /// A semaphore acquire is not satisfied; retry the same write later.
    Blocked,
}

/// The pushbuffer segment of the GP entry being executed.
struct Segment {
    va: u64,
    dwords: u32,
    /// Next header dword.
    pos: u32,
}

/// The method group being executed.
struct Group {
    header: MethodHeader,
    /// Dword index of the header in the segment.
    header_pos: u32,
    data: Vec<u32>,
    next: u32,
}

pub(super) struct Runner {
    id: ChannelId,
    slot: Arc<ChannelSlot>,
    sh: Arc<Shared>,
    gp_get: u32,
    seg: Option<Segment>,
    group: Option<Group>,
    bound: [Option<u32>; 8],
    /// A doorbell was seen and GPPut not yet reached (survives budget-limited turns).
    active: bool,
    host: HostEngine,
    compute: ComputeEngine,
    copy: CopyEngine,
    launches: u64,
}

impl Runner {
    pub(super) fn new(id: ChannelId, slot: Arc<ChannelSlot>, sh: Arc<Shared>) -> Runner {
        Runner {
            id,
            slot,
            sh,
            gp_get: 0,
            seg: None,
            group: None,
            bound: [None; 8],
            active: false,
            host: HostEngine::default(),
            compute: ComputeEngine::default(),
            copy: CopyEngine::default(),
            launches: 0,
        }
    }

    fn publish(&mut self, blocked: bool, fault: Option<StepFault>) {
        let Ok(mut s) = lock(&self.slot.state) else {
            return;
        };
        s.gp_get = self.gp_get;
        s.busy = self.seg.is_some();
        s.waiting = blocked;
        s.launches = self.launches;
        if let Some(f) = fault {
            let (pb_va, pb_dword, method) = self.position();
            let cf = ChannelFault {
                channel: self.id,
                kind: f.kind,
                gp_get: self.gp_get,
                pb_va,
                pb_dword,
                method,
                reason: f.reason,
            };
            self.sh.trace(|| format!("{} FAULT {cf}", self.id));
            self.sh.events.channel_fault(self.id, &cf);
            s.fault.get_or_insert(cf);
        }
    }

    /// (header address, header dword, (subchannel, method)) of the current group.
    fn position(&self) -> (u64, u32, Option<(u32, u32)>) {
        match (&self.seg, &self.group) {
            (Some(seg), Some(g)) => (
                seg.va + 4 * u64::from(g.header_pos),
                g.header_pos,
                Some((g.header.subc, g.header.method_of(g.next))),
            ),
            (Some(seg), None) => (seg.va + 4 * u64::from(seg.pos), seg.pos, None),
            _ => (0, 0, None),
        }
    }

    /// One method write (or entry/group bookkeeping); `None` when there is nothing to do.
    fn step(&mut self) -> StepResult<Option<Step>> {
        if self.group.is_none() {
            if self.seg.is_none() && !self.fetch_entry()? {
                return Ok(None);
            }
            if !self.load_group()? {
                return Ok(Some(Step::Done));
            }
        }
        let Some(g) = &self.group else {
            return Ok(Some(Step::Done));
        };
        let (subc, m, d) = (
            g.header.subc,
            g.header.method_of(g.next),
            g.data[g.next as usize],
        );
        let step = self.write(subc, m, d)?;
        if let (Step::Done, Some(g)) = (&step, &mut self.group) {
            g.next += 1;
            if g.next as usize == g.data.len() {
                self.group = None;
            }
        }
        Ok(Some(step))
    }

    /// Reads GPPut and, when the ring has an entry at GPGet, starts it. Control entries
    /// (length 0, opcode NOP) are consumed here.
    fn fetch_entry(&mut self) -> StepResult<bool> {
        let d = &self.slot.desc;
        let put = d.userd.read_gp_put().map_err(mmu)?;
        if put >= d.entries {
            return Err(pbdma(format!(
                "GPPut {put} is outside the {}-entry ring",
                d.entries
            )));
        }
        if put == self.gp_get {
            self.active = false;
            return Ok(false);
        }
        let va = d.gpfifo_va + 8 * u64::from(self.gp_get);
        let e = decode_gp_entry(self.sh.mem.read_u64(va).map_err(mmu)?);
        if e.fetch_conditional {
            return Err(pbdma("GP entry with FETCH = CONDITIONAL is not supported"));
        }
        if e.dwords == 0 {
            if e.opcode != 0 {
                return Err(pbdma(format!(
                    "GP control entry opcode {} is not supported",
                    e.opcode
                )));
            }
            self.finish_entry()?;
            return Ok(true);
        }
        self.sh.trace(|| {
            format!(
                "{} GP[{}] {:#x} x{}",
                self.id, self.gp_get, e.addr, e.dwords
            )
        });
        self.seg = Some(Segment {
            va: e.addr,
            dwords: e.dwords,
            pos: 0,
        });
        Ok(true)
    }

    fn finish_entry(&mut self) -> StepResult<()> {
        self.seg = None;
        self.gp_get = (self.gp_get + 1) % self.slot.desc.entries;
        self.slot.desc.userd.write_gp_get(self.gp_get).map_err(mmu)
    }

    /// Reads the next method group of the segment; `false` when the segment ended instead.
    fn load_group(&mut self) -> StepResult<bool> {
        let Some(seg) = &self.seg else {
            return Ok(false);
        };
        if seg.pos >= seg.dwords {
            self.finish_entry()?;
            return Ok(false);
        }
        let at = seg.va + 4 * u64::from(seg.pos);
        let h = MethodHeader::parse(self.sh.mem.read_u32(at).map_err(mmu)?)
            .map_err(|e| pbdma(e.message()))?;
        if h.op == SecOp::EndPbSegment {
            self.finish_entry()?;
            return Ok(false);
        }
        let n = h.count;
        if seg.pos + 1 + n > seg.dwords {
            return Err(pbdma(format!(
                "{} group of {n} dwords at dword {} runs past the {}-dword segment",
                h.op.name(),
                seg.pos,
                seg.dwords
            )));
        }
        let data = if h.op == SecOp::ImmdDataMethod {
            vec![h.immd]
        } else {
            let mut v = vec![0u32; n as usize];
            self.sh.mem.read_dwords(at + 4, &mut v).map_err(mmu)?;
            v
        };
        let header_pos = seg.pos;
        if let Some(seg) = &mut self.seg {
            seg.pos += 1 + n;
        }
        if !data.is_empty() {
            self.group = Some(Group {
                header: h,
                header_pos,
                data,
                next: 0,
            });
        }
        Ok(true)
    }

    /// Executes one method write on the engine of the class bound to `subc`.
    fn write(&mut self, subc: u32, method: u32, data: u32) -> StepResult<Step> {
        let kind = if method < HOST_METHOD_LIMIT {
            ClassKind::Host
        } else {
            let class = self.bound[subc as usize].ok_or_else(|| {
                pbdma(format!("method {method:#x} on subchannel {subc}, which has no object bound (SET_OBJECT)"))
            })?;
            ClassKind::of_class(class).ok_or_else(|| {
                pbdma(format!(
                    "class {class:#x} bound to subchannel {subc} is not an engine class"
                ))
            })?
        };
        let Some(name) = method_name(kind, method) else {
            let class = self.bound[subc as usize].unwrap_or(0);
            return Err(pbdma(format!(
                "unknown method {method:#x} for {kind:?} class {class:#x} on subchannel {subc}"
            )));
        };
        self.sh
            .trace(|| format!("{} [{subc}] {}", self.id, method_text(name, method, data)));
        match kind {
            ClassKind::Host => self.host_write(subc, method, data),
            ClassKind::Compute => {
                let class = self.bound[subc as usize].unwrap_or(0);
                let launched = self.compute.write(&self.sh, self.id, class, method, data)?;
                self.launches += launched;
                Ok(Step::Done)
            }
            ClassKind::Copy => {
                let class = self.bound[subc as usize].unwrap_or(0);
                self.copy.write(&self.sh, self.id, class, method, data)?;
                Ok(Step::Done)
            }
        }
    }

    fn host_write(&mut self, subc: u32, method: u32, data: u32) -> StepResult<Step> {
        if method == crate::hw::nv::methods::SET_OBJECT {
            let class = data & 0xFFFF;
            self.check_set_object(class)?;
            self.bound[subc as usize] = Some(class);
            return Ok(Step::Done);
        }
        self.host
            .write(&self.sh, self.id, self.slot.host, method, data)
    }

    fn check_set_object(&self, class: u32) -> StepResult<()> {
        let arch = self.sh.arch;
        let on_chip =
            class == arch.compute_class || arch.copy_classes.iter().any(|c| c.class == class);
        if !on_chip {
            return Err(pbdma(format!(
                "SET_OBJECT: class {class:#x} does not exist on {}",
                arch.compute_class_name
            )));
        }
        let engines = lock(&self.slot.engines).map_err(|e| pbdma(e.message()))?;
        if !engines.contains(&class) {
            return Err(pbdma(format!(
                "SET_OBJECT: class {class:#x} was not allocated on this channel"
            )));
        }
        Ok(())
    }
}

impl EngineRunner for Runner {
    type Id = ChannelId;

    fn id(&self) -> ChannelId {
        self.id
    }

    /// Executes up to `budget` method writes.
    fn run(&mut self, budget: usize) -> RunResult {
        let faulted = lock(&self.slot.state).map_or(true, |s| s.fault.is_some());
        if faulted {
            return RunResult::Idle;
        }
        let was_waiting = lock(&self.slot.state).is_ok_and(|s| s.waiting);
        if self.slot.kicked.swap(false, Ordering::SeqCst) {
            self.active = true;
        }
        if !self.active && !was_waiting && self.seg.is_none() {
            return RunResult::Idle;
        }
        let (mut progressed, mut blocked, mut fault) = (false, false, None);
        for _ in 0..budget {
            match self.step() {
                Ok(Some(Step::Done)) => progressed = true,
                Ok(Some(Step::Blocked)) => {
                    blocked = true;
                    break;
                }
                Ok(None) => break,
                Err(f) => {
                    fault = Some(f);
                    break;
                }
            }
        }
        if !progressed && !blocked && fault.is_none() {
            self.publish(false, None);
            return RunResult::Idle;
        }
        self.publish(blocked, fault);
        if blocked && !progressed {
            RunResult::Waiting
        } else {
            RunResult::Progress
        }
    }
}
