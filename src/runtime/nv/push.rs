//! NV pushbuffers: a `Vec<u32>`-backed command buffer ([`PushBuf`]) with one typed builder per
//! class method group rawgrad emits, named after the methods (method numbers and the header
//! encoding are hardware facts in [`crate::hw::nv::methods`] and [`crate::hw::nv::header`]): host semaphores ([`PushBuf::signal`],
//! [`PushBuf::wait`], [`PushBuf::sem_write`]), SET_OBJECT, compute setup and launch
//! ([`compute`]), and the copy engine ([`copy`]).
//!
//! Every builder validates what the GPU would silently misread (address widths of the channel's
//! host class and copy class, alignment, field widths, 32-bit payloads) and returns an error naming
//! the method and the value; a refused command leaves no partial method groups behind. Builders
//! that record something a graph may patch return typed patch points ([`patch`]).
//!
//! Subchannel convention (tinygrad, libcuda, NVK): host methods on subchannel 0, the compute class
//! on [`SUBC_COMPUTE`] (1), the copy class on [`SUBC_COPY`] (4).
//!
//! Not guaranteed: that a chip accepts a stream built from facts the arch table marks
//! UNCONFIRMED; nothing here talks to a device.

pub mod compute;
pub mod copy;
pub mod patch;
#[cfg(test)]
mod tests;

pub use crate::hw::nv::header::*;
pub use crate::hw::nv::methods::{ClassKind, InvalidateShaderCaches};
pub use compute::{InlineQmd, LocalMemorySetup};
pub use patch::*;

use crate::hcq::bound::DirtyLog;
use crate::hw::nv::arch::NvClasses;
use crate::hw::nv::methods::*;
use crate::{ensure, Result};

/// A pushbuffer for one channel's classes.
#[derive(Debug, Clone)]
pub struct PushBuf {
    classes: NvClasses,
    dwords: Vec<u32>,
}

impl PushBuf {
    /// An empty pushbuffer building method groups for `classes`.
    pub fn new(classes: NvClasses) -> PushBuf {
        PushBuf {
            classes,
            dwords: Vec::new(),
        }
    }

    /// The classes the method groups are laid out for.
    pub fn classes(&self) -> &NvClasses {
        &self.classes
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

    /// Removes every method group (keeps the allocation).
    pub fn clear(&mut self) {
        self.dwords.clear();
    }

    /// Rewrites a patch point of this buffer.
    pub fn patch<P: PatchPoint>(&mut self, patch: &P, value: P::Value) -> Result<()> {
        patch.apply(&mut self.dwords, value)
    }

    /// [`PushBuf::patch`], telling `log` the position of every dword whose value changed
    /// (what a bound copy of the buffer must rewrite: [`crate::runtime::nv::bound::BoundPush`]).
    pub fn patch_logged<P: PatchPoint>(
        &mut self,
        patch: &P,
        value: P::Value,
        log: &mut DirtyLog<'_>,
    ) -> Result<()> {
        let mut w = Logged {
            words: &mut self.dwords,
            log,
        };
        patch.apply(&mut w, value)
    }

    /// Rewrites payload patch points in turn (a replay's new signal values), straight into the
    /// dwords ([`ValueSlots::encode_logged`]), telling `log` (when given) the position of every
    /// dword whose value changed; stops at the first error. The same dwords as
    /// [`PushBuf::patch`] of each.
    pub fn patch_values<'a, P: ValuePatch + 'a>(
        &mut self,
        points: impl IntoIterator<Item = (&'a P, u64)>,
        mut log: Option<&mut DirtyLog<'_>>,
    ) -> Result<()> {
        for (p, v) in points {
            p.value_slots()
                .encode_logged(P::NAME, &mut self.dwords, v, log.as_deref_mut())?;
        }
        Ok(())
    }

    /// Runs `f`; if it fails, drops whatever it appended.
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

    /// Raw INC method group: `data` to `method`, `method + 4`, ... on `subc`. Returns the
    /// position of the first data dword. Prefer the typed builders (they check fields and
    /// return patch points); this is for tests and methods without a builder.
    pub fn method(&mut self, subc: u32, method: u32, data: &[u32]) -> Result<usize> {
        self.group(SecOp::IncMethod, subc, method, data)
    }

    /// Raw NON_INC method group: every dword of `data` to `method`.
    pub fn method_non_inc(&mut self, subc: u32, method: u32, data: &[u32]) -> Result<usize> {
        self.group(SecOp::NonIncMethod, subc, method, data)
    }

    /// Raw IMMD method: 13-bit `data` inside the header.
    pub fn method_immd(&mut self, subc: u32, method: u32, data: u32) -> Result<()> {
        self.dwords
            .push(method_header(SecOp::ImmdDataMethod, subc, method, data)?);
        Ok(())
    }

    fn group(&mut self, op: SecOp, subc: u32, method: u32, data: &[u32]) -> Result<usize> {
        ensure!(
            !data.is_empty(),
            InvalidArgument,
            "method {method:#x}: empty {} group",
            op.name()
        );
        ensure!(
            op != SecOp::IncMethod || method as usize + 4 * data.len() <= 0x4000,
            InvalidArgument,
            "method {method:#x}: {} dwords run past method 0x3ffc",
            data.len()
        );
        self.dwords
            .push(method_header(op, subc, method, data.len() as u32)?);
        let pos = self.dwords.len();
        self.dwords.extend_from_slice(data);
        Ok(pos)
    }

    /// SET_OBJECT: binds `class` (this channel's compute or copy class) to `subc`.
    pub fn set_object(&mut self, subc: u32, class: u32) -> Result<()> {
        ensure!(
            class == self.classes.arch.compute_class || class == self.classes.copy.class,
            InvalidArgument,
            "SET_OBJECT: class {class:#x} is neither the compute class {:#x} nor the copy class {:#x} of this channel",
            self.classes.arch.compute_class,
            self.classes.copy.class
        );
        self.method(subc, SET_OBJECT, &[class])?;
        Ok(())
    }

    /// The SEM_ADDR_LO..SEM_EXECUTE group (5 dwords) with checked address and payload.
    fn sem_group(
        &mut self,
        what: &str,
        addr: u64,
        value: u64,
        exec: u32,
    ) -> Result<(AddrSlots, ValueSlots)> {
        let payload64 = exec & SEM_EXECUTE_PAYLOAD_SIZE_64BIT != 0;
        let align = if exec & SEM_EXECUTE_RELEASE_TIMESTAMP != 0 {
            16
        } else if payload64 {
            8
        } else {
            4
        };
        let addr_slots = AddrSlots {
            lo: self.dwords.len() + 1,
            hi: self.dwords.len() + 2,
            bits: self.classes.channel.sem_addr_bits,
            align,
        };
        check_addr(what, addr, align, addr_slots.bits)?;
        ensure!(
            payload64 || value <= u64::from(u32::MAX),
            InvalidArgument,
            "{what}: value {value:#x} does not fit the 32-bit payload"
        );
        let data = [
            addr as u32,
            (addr >> 32) as u32,
            value as u32,
            (value >> 32) as u32,
            exec,
        ];
        let pos = self.method(SUBC_HOST, SEM_ADDR_LO, &data)?;
        let value_slots = ValueSlots {
            lo: pos + 2,
            hi: payload64.then_some(pos + 3),
        };
        Ok((addr_slots, value_slots))
    }

    /// Host semaphore signal: SEM_EXECUTE = RELEASE | RELEASE_WFI | PAYLOAD_64BIT |
    /// RELEASE_TIMESTAMP (0x03100001; the 64-bit value at `addr`, a nanosecond timestamp at
    /// `addr + 8`, after the channel's previous work), then NON_STALL_INTERRUPT. `addr` must be
    /// 16-byte aligned and fit the host class's semaphore width.
    pub fn signal(&mut self, addr: u64, value: u64) -> Result<SignalCmd> {
        self.all_or_nothing(|b| {
            let exec = SEM_OP_RELEASE
                | SEM_EXECUTE_RELEASE_WFI
                | SEM_EXECUTE_PAYLOAD_SIZE_64BIT
                | SEM_EXECUTE_RELEASE_TIMESTAMP;
            let (a, v) = b.sem_group("signal", addr, value, exec)?;
            b.method(SUBC_HOST, NON_STALL_INTERRUPT, &[0])?;
            Ok(SignalCmd {
                addr: SignalAddrPatch(a),
                value: SignalValuePatch(v),
            })
        })
    }

    /// Host semaphore write: RELEASE | RELEASE_WFI with a 32- or 64-bit payload and no
    /// timestamp (a plain GPU-side store after the channel's previous work).
    pub fn sem_write(&mut self, addr: u64, value: u64, payload64: bool) -> Result<SignalCmd> {
        self.all_or_nothing(|b| {
            let mut exec = SEM_OP_RELEASE | SEM_EXECUTE_RELEASE_WFI;
            if payload64 {
                exec |= SEM_EXECUTE_PAYLOAD_SIZE_64BIT;
            }
            let (a, v) = b.sem_group("sem_write", addr, value, exec)?;
            Ok(SignalCmd {
                addr: SignalAddrPatch(a),
                value: SignalValuePatch(v),
            })
        })
    }

    /// Host semaphore wait: SEM_EXECUTE = ACQ_CIRC_GEQ | PAYLOAD_64BIT (0x01000003; the channel
    /// stalls until the 64-bit value at `addr` is circularly >= `value`). `switch_tsg` adds
    /// ACQUIRE_SWITCH_TSG (NVIDIA's UVM Hopper HAL sets it so a waiting TSG yields the runlist;
    /// tinygrad does not).
    pub fn wait(&mut self, addr: u64, value: u64, switch_tsg: bool) -> Result<WaitCmd> {
        self.all_or_nothing(|b| {
            let mut exec = SEM_OP_ACQ_CIRC_GEQ | SEM_EXECUTE_PAYLOAD_SIZE_64BIT;
            if switch_tsg {
                exec |= SEM_EXECUTE_ACQUIRE_SWITCH_TSG;
            }
            let (a, v) = b.sem_group("wait", addr, value, exec)?;
            Ok(WaitCmd {
                addr: WaitAddrPatch(a),
                value: WaitValuePatch(v),
            })
        })
    }

    /// WFI: wait for the channel's engine work to finish.
    pub fn wfi(&mut self) -> Result<()> {
        self.method(SUBC_HOST, WFI, &[0])?;
        Ok(())
    }
}

/// The dwords of a [`PushBuf`] with a log of the positions whose value a write changed.
struct Logged<'a, 'b> {
    words: &'a mut Vec<u32>,
    log: &'a mut DirtyLog<'b>,
}

impl DwordAccess for Logged<'_, '_> {
    fn len_dwords(&self) -> usize {
        self.words.len()
    }
    fn read_dword(&self, pos: usize) -> u32 {
        self.words[pos]
    }
    fn write_dword(&mut self, pos: usize, value: u32) {
        if self.words[pos] != value {
            self.words[pos] = value;
            self.log.changed(pos);
        }
    }
}
