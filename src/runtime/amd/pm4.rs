//! PM4 compute-queue packets: a `Vec<u32>`-backed command buffer ([`Pm4Buf`]) with one builder
//! per PACKET3 mnemonic rawgrad emits, parameterised by the target table where layouts differ
//! (ACQUIRE_MEM, RELEASE_MEM cache bits, SH register offsets), and the composite commands of
//! tinygrad's `AMDComputeQueue` in [`exec`] (kernel launch, signal, wait, timestamp, memory
//! barrier).
//!
//! Every builder validates what the hardware would silently misread (register offsets, address
//! alignment and width, 32-bit values, field widths) and returns an error naming the packet and
//! the value. Builders that record something a graph may patch return a typed patch point
//! ([`patch`]).
//!
//! Not guaranteed: that the hardware accepts a stream for a chip whose facts are marked NOT
//! CONFIRMED in [`crate::hw::amd::targets`]; nothing here talks to a device.

pub mod exec;
pub mod patch;
#[cfg(test)]
mod tests;

pub use exec::{ExecArgs, ExecPatch, ExecProgram, ScratchSetup};
pub use patch::*;

use crate::hcq::bound::DirtyLog;
use crate::hw::amd::kd::KernelCodeProperties;
use crate::hw::amd::pm4::*;
use crate::hw::amd::targets::{AcquireMemLayout, GfxTarget, ReleaseMemCache};
use crate::{bail, ensure, Result};

/// The fields of a RELEASE_MEM (`nvd.h` PACKET3_RELEASE_MEM). `cache` uses the gfx10+ names; gfx9
/// targets encode it through [`EopActions::from_gcr`], and targets without GLM (gfx12) drop
/// GLM_WB/GLM_INV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseMem {
    pub event: EventType,
    pub event_index: EventIndex,
    pub cache: ReleaseGcr,
    pub dst_sel: DstSel,
    pub int_sel: IntSel,
    pub data_sel: DataSel,
    pub addr: u64,
    pub data: u64,
    pub int_ctxid: u32,
}

/// Dword positions inside one emitted RELEASE_MEM (for the composites' typed patches).
pub(crate) struct ReleaseMemPos {
    pub addr: usize,
    pub data: usize,
    pub ctxid: usize,
}

/// A PM4 command buffer for one target.
#[derive(Debug, Clone)]
pub struct Pm4Buf {
    target: &'static GfxTarget,
    dwords: Vec<u32>,
}

impl Pm4Buf {
    /// An empty buffer building packets for `target`.
    pub fn new(target: &'static GfxTarget) -> Pm4Buf {
        Pm4Buf {
            target,
            dwords: Vec::new(),
        }
    }

    /// The target the packets are laid out for.
    pub fn target(&self) -> &'static GfxTarget {
        self.target
    }

    /// The dwords built so far.
    pub fn dwords(&self) -> &[u32] {
        &self.dwords
    }

    /// Number of dwords built so far.
    pub fn len(&self) -> usize {
        self.dwords.len()
    }

    /// Whether nothing was built yet.
    pub fn is_empty(&self) -> bool {
        self.dwords.is_empty()
    }

    /// Removes every packet (keeps the allocation).
    pub fn clear(&mut self) {
        self.dwords.clear();
    }

    /// Rewrites a patch point of this buffer.
    pub fn patch<P: PatchPoint>(&mut self, patch: &P, value: P::Value) -> Result<()> {
        patch_dwords(&mut self.dwords, patch, value)
    }

    /// [`Pm4Buf::patch`], telling `log` the position of every dword whose value changed (what
    /// a bound copy of the buffer must rewrite: [`crate::runtime::amd::bound::BoundPm4`]).
    pub fn patch_logged<P: PatchPoint>(
        &mut self,
        patch: &P,
        value: P::Value,
        log: &mut DirtyLog<'_>,
    ) -> Result<()> {
        ensure!(
            patch.max_pos() < self.dwords.len(),
            InvalidArgument,
            "patch: position {} is outside the {}-dword buffer",
            patch.max_pos(),
            self.dwords.len()
        );
        let d = &mut self.dwords;
        patch.encode(value, &mut |pos, dw| {
            if d[pos] != dw {
                d[pos] = dw;
                log.changed(pos);
            }
        })
    }

    /// Rewrites value patch points in turn, straight into the dwords ([`patch::patch_values`]),
    /// telling `log` (when given) the position of every dword whose value changed.
    pub fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
        log: Option<&mut DirtyLog<'_>>,
    ) -> Result<()> {
        patch::patch_values(&mut self.dwords, points, log)
    }

    /// Runs `f`; if it fails, drops whatever it appended, so a refused command leaves no
    /// partial packets behind.
    pub(crate) fn all_or_nothing<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let len = self.dwords.len();
        let r = f(self);
        if r.is_err() {
            self.dwords.truncate(len);
        }
        r
    }

    fn push_packet(&mut self, op: Pm4Opcode, body: &[u32]) -> Result<usize> {
        let start = self.dwords.len();
        self.dwords.push(pkt3_header(op, body.len())?);
        self.dwords.extend_from_slice(body);
        Ok(start)
    }

    /// NOP with `body_dwords` zero dwords (>= 1) after the header.
    pub fn nop(&mut self, body_dwords: usize) -> Result<()> {
        let start = self.dwords.len();
        self.dwords.push(pkt3_header(Pm4Opcode::NOP, body_dwords)?);
        self.dwords.resize(start + 1 + body_dwords, 0);
        Ok(())
    }

    /// SET_SH_REG writing `values` to `first` and the registers after it. Every offset written
    /// must be a register of the target.
    pub fn set_sh_reg(&mut self, first: ShReg, values: &[u32]) -> Result<()> {
        self.set_sh_reg_at(first, values).map(|_| ())
    }

    /// [`Pm4Buf::set_sh_reg`], returning the position of the first value.
    pub(crate) fn set_sh_reg_at(&mut self, first: ShReg, values: &[u32]) -> Result<usize> {
        let offset = first.offset(self.target)?;
        ensure!(
            !values.is_empty(),
            InvalidArgument,
            "SET_SH_REG {}: no values",
            first.name()
        );
        for i in 0..values.len() as u32 {
            ensure!(
                ShReg::from_offset(self.target, offset + i).is_some(),
                InvalidArgument,
                "SET_SH_REG {} x{}: offset {:#x} is not a known SH register on {}",
                first.name(),
                values.len(),
                offset + i,
                self.target.name
            );
        }
        let start = self.dwords.len();
        self.dwords
            .push(pkt3_header(Pm4Opcode::SET_SH_REG, values.len() + 1)?);
        self.dwords.push(offset);
        self.dwords.extend_from_slice(values);
        Ok(start + 2)
    }

    /// DISPATCH_DIRECT of `groups` workgroups (not threads).
    pub fn dispatch_direct(
        &mut self,
        groups: [u32; 3],
        initiator: DispatchInitiator,
    ) -> Result<GlobalSizePatch> {
        check_global(groups)?;
        ensure!(
            initiator.contains(DispatchInitiator::COMPUTE_SHADER_EN),
            InvalidArgument,
            "DISPATCH_DIRECT: initiator {initiator:?} lacks COMPUTE_SHADER_EN"
        );
        ensure!(
            self.target.wave32 || !initiator.contains(DispatchInitiator::CS_W32_EN),
            InvalidArgument,
            "DISPATCH_DIRECT: {} has no wave32 (CS_W32_EN)",
            self.target.name
        );
        let start = self.push_packet(
            Pm4Opcode::DISPATCH_DIRECT,
            &[groups[0], groups[1], groups[2], initiator.bits()],
        )?;
        Ok(GlobalSizePatch::at(start + 1))
    }

    /// ACQUIRE_MEM over the whole address range with the cache actions `gcr` (gfx9 targets
    /// translate them with [`CpCoherCntl::from_gcr`]).
    pub fn acquire_mem(&mut self, gcr: GcrCntl) -> Result<()> {
        // Full range: size 0xFFFFFFFF / 0xFFFFFF (COHER_SIZE_HI is 24 bits), base 0, poll interval
        // 0x0A, as amdgpu's `gfx_v9_0_emit_mem_sync` .. `gfx_v12_0_emit_mem_sync` do.
        let gcr = if self.target.gcr_glm {
            gcr
        } else {
            gcr.difference(GcrCntl::GLM_WB | GcrCntl::GLM_INV)
        };
        match self.target.acquire_mem {
            AcquireMemLayout::Gfx10GcrCntl => self.push_packet(
                Pm4Opcode::ACQUIRE_MEM,
                &[0, 0xFFFF_FFFF, 0xFF_FFFF, 0, 0, 0x0A, gcr.bits()],
            )?,
            AcquireMemLayout::Gfx9CoherCntl => {
                let cntl = CpCoherCntl::from_gcr(gcr).bits();
                self.push_packet(
                    Pm4Opcode::ACQUIRE_MEM,
                    &[cntl, 0xFFFF_FFFF, 0xFF_FFFF, 0, 0, 0x0A],
                )?
            }
        };
        Ok(())
    }

    /// RELEASE_MEM: at `event`, perform the cache actions, write `data_sel` data to `addr` and
    /// optionally raise an interrupt with `int_ctxid`.
    pub fn release_mem(&mut self, rm: &ReleaseMem) -> Result<()> {
        self.release_mem_at(rm).map(|_| ())
    }

    pub(crate) fn release_mem_at(&mut self, rm: &ReleaseMem) -> Result<ReleaseMemPos> {
        let align = match rm.data_sel {
            DataSel::VALUE_64BIT | DataSel::GPU_CLOCK_COUNTER => 8,
            DataSel::NONE | DataSel::VALUE_32BIT => 4,
        };
        let [lo, hi] = addr_dwords("RELEASE_MEM", rm.addr, align)?;
        ensure!(
            rm.data_sel != DataSel::VALUE_32BIT || rm.data <= u64::from(u32::MAX),
            InvalidArgument,
            "RELEASE_MEM: data {:#x} does not fit DATA_SEL 1 (32-bit write)",
            rm.data
        );
        let gcr = if self.target.gcr_glm {
            rm.cache
        } else {
            rm.cache
                .difference(ReleaseGcr::GLM_WB | ReleaseGcr::GLM_INV)
        };
        let cache = match self.target.release_mem_cache {
            ReleaseMemCache::Gfx10Gcr => gcr.bits(),
            ReleaseMemCache::Gfx9EopActions => EopActions::from_gcr(gcr).bits(),
        };
        let dw1 = rm.event.bits() | rm.event_index.bits() << 8 | cache;
        let dw2 = rm.dst_sel.bits() << 16 | rm.int_sel.bits() << 24 | rm.data_sel.bits() << 29;
        let body = [
            dw1,
            dw2,
            lo,
            hi,
            rm.data as u32,
            (rm.data >> 32) as u32,
            rm.int_ctxid,
        ];
        let start = self.push_packet(Pm4Opcode::RELEASE_MEM, &body)?;
        Ok(ReleaseMemPos {
            addr: start + 3,
            data: start + 5,
            ctxid: start + 7,
        })
    }

    /// WAIT_REG_MEM (`nvd.h` PACKET3_WAIT_REG_MEM).
    pub fn wait_reg_mem(&mut self, w: &WaitRegMem) -> Result<()> {
        self.wait_reg_mem_at(w).map(|_| ())
    }

    /// [`Pm4Buf::wait_reg_mem`], returning the packet's position.
    pub(crate) fn wait_reg_mem_at(&mut self, w: &WaitRegMem) -> Result<usize> {
        ensure!(
            w.poll_interval <= 0xFFFF,
            InvalidArgument,
            "WAIT_REG_MEM: poll interval {:#x} exceeds 16 bits",
            w.poll_interval
        );
        let (space, a, b) = match w.target {
            WaitTarget::Memory { addr } => {
                ensure!(
                    w.operation == WaitOperation::WAIT,
                    InvalidArgument,
                    "WAIT_REG_MEM: {} is only valid on registers",
                    w.operation.name()
                );
                let [lo, hi] = addr_dwords("WAIT_REG_MEM", addr, 4)?;
                (MemSpace::MEMORY, lo, hi)
            }
            WaitTarget::Registers { write, poll } => {
                ensure!(
                    write <= 0x3FFFF && poll <= 0x3FFFF,
                    InvalidArgument,
                    "WAIT_REG_MEM: register addresses {write:#x}/{poll:#x} exceed 18 bits"
                );
                (MemSpace::REGISTER, write, poll)
            }
        };
        let dw1 = w.function.bits() | space.bits() << 4 | w.operation.bits() << 6;
        self.push_packet(
            Pm4Opcode::WAIT_REG_MEM,
            &[dw1, a, b, w.reference, w.mask, w.poll_interval],
        )
    }

    /// EVENT_WRITE of a non-timestamp event.
    pub fn event_write(&mut self, event: EventType, index: EventIndex) -> Result<()> {
        self.push_packet(Pm4Opcode::EVENT_WRITE, &[event.bits() | index.bits() << 8])?;
        Ok(())
    }

    /// INDIRECT_BUFFER: execute `size_dwords` dwords of PM4 at `va` (4-byte aligned).
    pub fn indirect_buffer(&mut self, va: u64, size_dwords: usize) -> Result<()> {
        let p = indirect_buffer_packet(va, size_dwords)?;
        self.dwords.extend_from_slice(&p);
        Ok(())
    }

    /// Writes the buffer into a compute ring of `ring_dwords` (a power of two) at write pointer
    /// `wptr` (dwords, monotonic): `sink(ring_index, dwords)` is called once, or twice when the
    /// buffer wraps (PM4 packets may straddle the ring end). Returns the new write pointer.
    pub fn copy_to_ring(
        &self,
        ring_dwords: u64,
        wptr: u64,
        sink: &mut dyn FnMut(u64, &[u32]) -> Result<()>,
    ) -> Result<u64> {
        copy_dwords_to_ring(&self.dwords, ring_dwords, wptr, sink)
    }
}

/// The 4 dwords of an INDIRECT_BUFFER executing `size_dwords` dwords of PM4 at `va`: address
/// 4-byte aligned below 2^48, IB_SIZE (bits 19:0) 1..=0xFFFFF, VALID (bit 23) set, CHAIN and
/// the cache policy bits clear (`nvd.h` PACKET3_INDIRECT_BUFFER, INDIRECT_BUFFER_VALID).
pub fn indirect_buffer_packet(va: u64, size_dwords: usize) -> Result<[u32; 4]> {
    let [lo, hi] = addr_dwords("INDIRECT_BUFFER", va, 4)?;
    ensure!(
        (1..=INDIRECT_BUFFER_SIZE_MASK as usize).contains(&size_dwords),
        InvalidArgument,
        "INDIRECT_BUFFER: size {size_dwords} dwords is outside 1..={INDIRECT_BUFFER_SIZE_MASK}"
    );
    Ok([
        pkt3_header(Pm4Opcode::INDIRECT_BUFFER, 3)?,
        lo,
        hi,
        size_dwords as u32 | INDIRECT_BUFFER_VALID,
    ])
}

/// Writes `dwords` into a ring of `ring_dwords` entries at monotonic position `wptr`, wrapping.
pub fn copy_dwords_to_ring(
    dwords: &[u32],
    ring_dwords: u64,
    wptr: u64,
    sink: &mut dyn FnMut(u64, &[u32]) -> Result<()>,
) -> Result<u64> {
    ensure!(
        ring_dwords.is_power_of_two(),
        InvalidArgument,
        "ring write: ring of {ring_dwords} dwords is not a power of two"
    );
    let n = dwords.len() as u64;
    if n > ring_dwords {
        bail!(
            InvalidArgument,
            "ring write: {n} dwords do not fit a {ring_dwords}-dword ring"
        );
    }
    let at = wptr % ring_dwords;
    let first = (ring_dwords - at).min(n) as usize;
    sink(at, &dwords[..first])?;
    if first < dwords.len() {
        sink(0, &dwords[first..])?;
    }
    Ok(wptr + n)
}
