//! Decoders for NV pushbuffers and QMDs: one line per method group (`SEM_ADDR_LO=0x1000 ...
//! SEM_EXECUTE=RELEASE|WFI|64B|TIMESTAMP`, `SEND_PCAS_A=0x... SEND_SIGNALING_PCAS2_B=...`, copy
//! methods, `SET_OBJECT=HOPPER_COMPUTE_A(0xcbc0)`), and a QMD's summary plus its non-zero fields.
//! Golden tests pin the builders' output through these texts; the software GPU's trace prints
//! them.
//!
//! Strict: a reserved header encoding, a method rawgrad does not know for the class bound to the
//! subchannel (host methods below 0x100 on any subchannel), or a non-host method on an unbound
//! subchannel is an error naming the dword position.
//!
//! Not guaranteed: streams from other drivers (NVK, libcuda) use methods outside the tables and
//! are refused rather than described.

use crate::hw::nv::arch::{class_name, NvClasses, PcasAction, QmdVersion};
use crate::hw::nv::header::{MethodHeader, SecOp, SUBC_COMPUTE, SUBC_COPY};
use crate::hw::nv::methods::{self, launch_dma, *};
use crate::hw::nv::qmd::{AnyQmd, Qmd};
use crate::{bail, Result};
use std::fmt::Write;

/// SEM_EXECUTE as text: the operation, then the flags.
pub fn sem_execute_text(v: u32) -> String {
    let op = match v & SEM_EXECUTE_OPERATION_MASK {
        SEM_OP_ACQUIRE => "ACQUIRE",
        SEM_OP_RELEASE => "RELEASE",
        SEM_OP_ACQ_STRICT_GEQ => "ACQ_STRICT_GEQ",
        SEM_OP_ACQ_CIRC_GEQ => "ACQ_CIRC_GEQ",
        SEM_OP_ACQ_AND => "ACQ_AND",
        SEM_OP_ACQ_NOR => "ACQ_NOR",
        SEM_OP_REDUCTION => "REDUCTION",
        _ => "OP7",
    };
    let mut s = op.to_string();
    for (bit, name) in [
        (SEM_EXECUTE_ACQUIRE_SWITCH_TSG, "SWITCH_TSG"),
        (SEM_EXECUTE_RELEASE_WFI, "WFI"),
        (SEM_EXECUTE_PAYLOAD_SIZE_64BIT, "64B"),
        (SEM_EXECUTE_RELEASE_TIMESTAMP, "TIMESTAMP"),
    ] {
        if v & bit != 0 {
            let _ = write!(s, "|{name}");
        }
    }
    let rest = v & !(SEM_EXECUTE_KNOWN & !SEM_EXECUTE_REDUCTION_MASK);
    if rest != 0 {
        let _ = write!(s, "|{rest:#x}");
    }
    s
}

/// LAUNCH_DMA as text.
pub fn launch_dma_text(v: u32) -> String {
    use launch_dma::*;
    let mut parts: Vec<String> = vec![];
    match v & DATA_TRANSFER_TYPE_MASK {
        0 => {}
        DATA_TRANSFER_TYPE_PIPELINED => parts.push("PIPELINED".into()),
        DATA_TRANSFER_TYPE_NON_PIPELINED => parts.push("NON_PIPELINED".into()),
        t => parts.push(format!("TRANSFER{t}")),
    }
    if v & FLUSH_ENABLE != 0 {
        parts.push("FLUSH".into());
    }
    match (v & SEMAPHORE_TYPE_MASK) >> SEMAPHORE_TYPE_SHIFT {
        0 => {}
        SEMAPHORE_TYPE_ONE_WORD => parts.push("SEM_ONE_WORD".into()),
        SEMAPHORE_TYPE_FOUR_WORD => parts.push("SEM_FOUR_WORD".into()),
        _ => parts.push("SEM_CONDITIONAL_INTR".into()),
    }
    let flags = [
        (INTERRUPT_TYPE_MASK, "INTERRUPT"),
        (SRC_MEMORY_LAYOUT_PITCH, "SRC_PITCH"),
        (DST_MEMORY_LAYOUT_PITCH, "DST_PITCH"),
        (MULTI_LINE_ENABLE, "MULTI_LINE"),
        (REMAP_ENABLE, "REMAP"),
        (SRC_TYPE_PHYSICAL, "SRC_PHYSICAL"),
        (DST_TYPE_PHYSICAL, "DST_PHYSICAL"),
        (SEMAPHORE_REDUCTION_ENABLE, "SEM_REDUCTION"),
        (FLUSH_TYPE_GL, "FLUSH_GL"),
        (SEMAPHORE_PAYLOAD_SIZE_TWO_WORD, "SEM_64B"),
    ];
    for (mask, name) in flags {
        if v & mask != 0 {
            parts.push(name.into());
        }
    }
    if v & !KNOWN != 0 {
        parts.push(format!("{:#x}", v & !KNOWN));
    }
    if parts.is_empty() {
        "NONE".into()
    } else {
        parts.join("|")
    }
}

fn invalidate_text(v: u32) -> String {
    let f = InvalidateShaderCaches::from_bits_retain(v);
    let mut parts: Vec<String> = f.iter_names().map(|(n, _)| n.to_string()).collect();
    let rest = v & !InvalidateShaderCaches::all().bits();
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "NONE".into()
    } else {
        parts.join("|")
    }
}

fn class_text(class: u32) -> String {
    match class_name(class & 0xFFFF) {
        Some(n) => format!("{n}({:#x})", class),
        None => format!("{class:#x}"),
    }
}

/// One method write as `NAME=value`.
pub fn method_text(name: &str, method: u32, data: u32) -> String {
    let v = match method {
        SET_OBJECT => class_text(data),
        SEM_EXECUTE => sem_execute_text(data),
        SEND_SIGNALING_PCAS2_B => match PcasAction::from_bits(data & PCAS_ACTION_MASK) {
            Some(a) if data & !PCAS_ACTION_MASK == 0 => a.name().to_string(),
            _ => format!("{data:#x}"),
        },
        LAUNCH_DMA => launch_dma_text(data),
        INVALIDATE_SHADER_CACHES_NO_WFI => invalidate_text(data),
        _ => format!("{data:#x}"),
    };
    format!("{name}={v}")
}

/// Decodes pushbuffers, tracking which class each subchannel is bound to.
#[derive(Debug, Clone)]
pub struct PushDecoder {
    bound: [Option<u32>; 8],
}

impl PushDecoder {
    /// A decoder with the convention pre-bound (compute class on [`SUBC_COMPUTE`], copy class on
    /// [`SUBC_COPY`]); SET_OBJECT in the stream rebinds.
    pub fn new(classes: &NvClasses) -> PushDecoder {
        let mut bound = [None; 8];
        bound[SUBC_COMPUTE as usize] = Some(classes.arch.compute_class);
        bound[SUBC_COPY as usize] = Some(classes.copy.class);
        PushDecoder { bound }
    }

    /// The kind of class bound to `subc` for `method`.
    fn kind(&self, pos: usize, subc: u32, method: u32) -> Result<ClassKind> {
        if method < HOST_METHOD_LIMIT {
            return Ok(ClassKind::Host);
        }
        match self.bound[subc as usize].and_then(ClassKind::of_class) {
            Some(k) => Ok(k),
            None => bail!(
                Fault,
                "pushbuffer dword {pos}: method {method:#x} on subchannel {subc}, which has no compute or copy class bound"
            ),
        }
    }

    /// One line per method group: `(position of the header, text)`.
    pub fn decode(&mut self, dwords: &[u32]) -> Result<Vec<(usize, String)>> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < dwords.len() {
            let h = MethodHeader::parse(dwords[pos])?;
            if h.op == SecOp::EndPbSegment {
                out.push((pos, "END_PB_SEGMENT".to_string()));
                break;
            }
            let n = h.count as usize;
            let Some(data) = dwords.get(pos + 1..pos + 1 + n) else {
                bail!(
                    Fault,
                    "pushbuffer dword {pos}: {} group of {n} dwords runs past the end ({} dwords)",
                    h.op.name(),
                    dwords.len()
                )
            };
            let line = self.group_text(pos, &h, data)?;
            out.push((pos, format!("[{}] {line}", h.subc)));
            pos += 1 + data.len();
        }
        Ok(out)
    }

    fn group_text(&mut self, pos: usize, h: &MethodHeader, data: &[u32]) -> Result<String> {
        let immd = [h.immd];
        let data = if h.op == SecOp::ImmdDataMethod {
            &immd[..]
        } else {
            data
        };
        if data.is_empty() {
            return Ok("NOP (empty group)".into());
        }
        let mut parts = Vec::with_capacity(data.len());
        let m0 = h.method_of(0);
        let first_inline = self.kind(pos, h.subc, m0)? == ClassKind::Compute
            && (LOAD_INLINE_QMD_DATA..LOAD_INLINE_QMD_DATA + 4 * LOAD_INLINE_QMD_DATA_COUNT)
                .contains(&m0);
        for (i, &d) in data.iter().enumerate() {
            let m = h.method_of(i as u32);
            let kind = self.kind(pos, h.subc, m)?;
            let Some(name) = methods::method_name(kind, m) else {
                bail!(Fault, "pushbuffer dword {pos}: method {m:#x} is not a known {kind:?} method (subchannel {})", h.subc)
            };
            if m == SET_OBJECT {
                self.bound[h.subc as usize] = Some(d & 0xFFFF);
            }
            if first_inline && h.op == SecOp::IncMethod {
                continue;
            }
            parts.push(method_text(name, m, d));
        }
        if first_inline && h.op == SecOp::IncMethod {
            let first = (h.method - LOAD_INLINE_QMD_DATA) / 4;
            parts.push(format!(
                "LOAD_INLINE_QMD_DATA({first}..{})=<{} dwords>",
                first + data.len() as u32 - 1,
                data.len()
            ));
        }
        let tag = match h.op {
            SecOp::IncMethod => "",
            SecOp::NonIncMethod => "NON_INC ",
            SecOp::ImmdDataMethod => "IMMD ",
            SecOp::OneInc => "ONE_INC ",
            SecOp::EndPbSegment => "",
        };
        Ok(format!("{tag}{}", parts.join(" ")))
    }
}

fn raw_lines(s: &mut String, dwords: &[u32]) {
    for chunk in dwords.chunks(8) {
        let raw: Vec<String> = chunk.iter().map(|d| format!("{d:08x}")).collect();
        let _ = writeln!(s, "      {}", raw.join(" "));
    }
}

/// The decoded pushbuffer with each group's raw dwords under its line (golden-file form).
pub fn decode_push_listing(classes: &NvClasses, dwords: &[u32]) -> Result<String> {
    let groups = PushDecoder::new(classes).decode(dwords)?;
    let mut s = String::new();
    let ends: Vec<usize> = groups
        .iter()
        .skip(1)
        .map(|(p, _)| *p)
        .chain(std::iter::once(dwords.len()))
        .collect();
    for ((pos, line), end) in groups.iter().zip(ends) {
        let _ = writeln!(s, "{pos:04}: {line}");
        raw_lines(&mut s, &dwords[*pos..end]);
    }
    Ok(s)
}

/// A QMD's summary line.
pub fn qmd_summary(q: &dyn Qmd) -> String {
    let sh = q.shared_memory();
    let mut s = format!(
        "QMD {} major={} grid={:?} block={:?} program={:#x} regs={} barriers={} shared={:#x}(min {} max {} target {}) slm={:?} sass={:#x}",
        q.version().name(),
        q.major_version(),
        q.grid(),
        q.block(),
        q.program_address(),
        q.register_count(),
        q.barrier_count(),
        sh.size,
        sh.min_config,
        sh.max_config,
        sh.target_config,
        q.shader_local_memory(),
        q.sass_version()
    );
    for i in 0..8 {
        if let Some(c) = q.constant_buffer(i) {
            let _ = write!(
                s,
                " cbuf{i}={:#x}+{:#x}{}",
                c.addr,
                c.size,
                if c.invalidate { "(inv)" } else { "" }
            );
        }
    }
    for i in 0..3 {
        if let Some(r) = q.release(i) {
            let _ = write!(
                s,
                " release{i}={:#x}<-{:#x}({:?}{})",
                r.addr,
                r.payload,
                r.structure,
                if r.payload64 { ",64B" } else { "" }
            );
        }
    }
    for i in 0..q.layout().dependent.len() {
        if let Some(d) = q.dependent_qmd(i) {
            let _ = write!(
                s,
                " dependent{i}={:#x}({:?}{})",
                d.addr,
                d.action,
                if d.prefetch { ",prefetch" } else { "" }
            );
        }
    }
    s
}

/// A QMD of `version` as its summary line, then one `NAME=value` line per non-zero field.
pub fn decode_qmd(version: QmdVersion, dwords: &[u32]) -> Result<String> {
    let q = AnyQmd::from_dwords(version, dwords)?;
    let mut s = qmd_summary(&q);
    s.push('\n');
    for (name, f) in q.layout().named_fields() {
        let v = f.get_raw(q.dwords());
        if v != 0 {
            let _ = writeln!(s, "  {name}={v:#x}");
        }
    }
    Ok(s)
}

/// Compares `actual` with `tests/golden/nv/<name>`; with `RAWGRAD_BLESS=1` rewrites the file.
#[cfg(test)]
pub(crate) fn check_golden(name: &str, actual: &str) {
    crate::hw::check_golden("nv", name, actual)
}
