//! NV pushbuffers: the method-header encoding (memo 2.2, `clc56f.h` NVC56F_DMA_*) and a
//! `Vec<u32>`-backed command buffer ([`PushBuf`]) with one typed builder per class method group
//! rawgrad emits, named after the methods: host semaphores ([`PushBuf::signal`],
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
pub mod methods;
pub mod patch;
#[cfg(test)]
mod tests;

pub use compute::{InlineQmd, LocalMemorySetup};
pub use methods::{ClassKind, InvalidateShaderCaches};
pub use patch::*;

use crate::runtime::nv::arch::NvClasses;
use crate::{bail, ensure, Result};
use methods::*;

/// Subchannel of host methods (any subchannel works; tinygrad uses 0).
pub const SUBC_HOST: u32 = 0;
/// Subchannel the compute class is bound to.
pub const SUBC_COMPUTE: u32 = 1;
/// Subchannel the copy class is bound to.
pub const SUBC_COPY: u32 = 4;

/// Largest COUNT of a method header (13 bits).
pub const MAX_METHOD_COUNT: usize = 0x1FFF;

/// SEC_OP of a method header (bits 31:29).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecOp {
    /// COUNT data dwords to consecutive methods.
    IncMethod = 1,
    /// COUNT data dwords all to one method.
    NonIncMethod = 3,
    /// 13-bit data inside the header, one method.
    ImmdDataMethod = 4,
    /// First data dword to the method, the rest to method + 4.
    OneInc = 5,
    /// Ends the pushbuffer segment early.
    EndPbSegment = 7,
}

impl SecOp {
    /// The header spelling.
    pub fn name(self) -> &'static str {
        match self {
            SecOp::IncMethod => "INC",
            SecOp::NonIncMethod => "NON_INC",
            SecOp::ImmdDataMethod => "IMMD",
            SecOp::OneInc => "ONE_INC",
            SecOp::EndPbSegment => "END_PB_SEGMENT",
        }
    }
}

/// A method header dword: SEC_OP 31:29, COUNT (or immediate data) 28:16, SUBCHANNEL 15:13,
/// method address >> 2 in 11:0.
pub fn method_header(op: SecOp, subc: u32, method: u32, count_or_data: u32) -> Result<u32> {
    ensure!(
        subc < 8,
        InvalidArgument,
        "method header: subchannel {subc} is not in 0..8"
    );
    ensure!(
        method % 4 == 0 && method < 0x4000,
        InvalidArgument,
        "method header: method {method:#x} is not a dword offset below 0x4000"
    );
    ensure!(
        count_or_data <= MAX_METHOD_COUNT as u32,
        InvalidArgument,
        "method header {}: count/data {count_or_data:#x} does not fit 13 bits",
        op.name()
    );
    Ok((op as u32) << 29 | count_or_data << 16 | subc << 13 | method >> 2)
}

/// A parsed method header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodHeader {
    pub op: SecOp,
    pub subc: u32,
    pub method: u32,
    /// Data dwords that follow (0 for IMMD and END_PB_SEGMENT).
    pub count: u32,
    /// The immediate data of an IMMD header.
    pub immd: u32,
}

impl MethodHeader {
    /// Parses a header dword. A zero dword is accepted as a NOP (an INC group with no data);
    /// the legacy tertiary-op encodings and the reserved SEC_OP 6 are refused.
    pub fn parse(dw: u32) -> Result<MethodHeader> {
        let (sec, field) = (dw >> 29, dw >> 16 & 0x1FFF);
        let op = match sec {
            0 if dw == 0 => SecOp::IncMethod,
            1 => SecOp::IncMethod,
            3 => SecOp::NonIncMethod,
            4 => SecOp::ImmdDataMethod,
            5 => SecOp::OneInc,
            7 => SecOp::EndPbSegment,
            _ => bail!(
                Fault,
                "method header {dw:#010x}: SEC_OP {sec} (tertiary-op / reserved encodings) is not supported"
            ),
        };
        let immd = op == SecOp::ImmdDataMethod;
        let count = if immd || op == SecOp::EndPbSegment {
            0
        } else {
            field
        };
        Ok(MethodHeader {
            op,
            subc: dw >> 13 & 0x7,
            method: (dw & 0xFFF) << 2,
            count,
            immd: if immd { field } else { 0 },
        })
    }

    /// The method the `i`-th data dword of this group writes.
    pub fn method_of(&self, i: u32) -> u32 {
        match self.op {
            SecOp::IncMethod => self.method + 4 * i,
            SecOp::OneInc if i > 0 => self.method + 4,
            _ => self.method,
        }
    }
}

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
