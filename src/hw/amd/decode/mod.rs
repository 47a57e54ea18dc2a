//! Decoders for PM4 and SDMA streams: one validated, typed packet per entry and a one-line text
//! form per packet (`RELEASE_MEM event=CACHE_FLUSH_AND_INV_TS_EVENT idx=5 ...`). Golden tests pin
//! the builders' output through the text form; the software GPU executes the typed packets and
//! prints the text form in its trace.
//!
//! Strict: an unknown opcode, register, selector value or reserved bit is an error, and stream
//! decoders name the dword position of the offending packet.
//!
//! Not guaranteed: the decoders know only the packets rawgrad builds; real driver streams (with
//! SET_UCONFIG_REG, COPY_DATA, ...) are rejected rather than described.

pub mod pm4;
pub mod sdma;

pub use pm4::{
    decode_pm4, decode_pm4_packet, decode_pm4_text, pm4_packet_len, AcquireCntl, Pm4Packet,
    ReleaseCache, ReleaseMemPacket,
};
pub use sdma::{decode_sdma, decode_sdma_packet, decode_sdma_text, sdma_packet_len, SdmaPacket};

use crate::hw::amd::targets::GfxTarget;
use crate::Result;
use std::fmt::{Display, Write};

fn listing<P: Display>(packets: Vec<(usize, P)>, dwords: &[u32]) -> String {
    let mut s = String::new();
    let ends: Vec<usize> = packets
        .iter()
        .skip(1)
        .map(|(p, _)| *p)
        .chain(std::iter::once(dwords.len()))
        .collect();
    for ((pos, p), end) in packets.iter().zip(ends) {
        let _ = writeln!(s, "{pos:04}: {p}");
        let raw: Vec<String> = dwords[*pos..end]
            .iter()
            .map(|d| format!("{d:08x}"))
            .collect();
        for chunk in raw.chunks(8) {
            let _ = writeln!(s, "      {}", chunk.join(" "));
        }
    }
    s
}

/// The decoded PM4 stream with each packet's raw dwords under its line (golden-file form).
pub fn decode_pm4_listing(target: &GfxTarget, dwords: &[u32]) -> Result<String> {
    Ok(listing(decode_pm4(target, dwords)?, dwords))
}

/// The decoded SDMA stream with each packet's raw dwords under its line (golden-file form).
pub fn decode_sdma_listing(target: &GfxTarget, dwords: &[u32]) -> Result<String> {
    Ok(listing(decode_sdma(target, dwords)?, dwords))
}

/// Compares `actual` with `tests/golden/amd/<name>`; with `RAWGRAD_BLESS=1` rewrites the file.
#[cfg(test)]
pub(crate) fn check_golden(name: &str, actual: &str) {
    crate::hw::check_golden("amd", name, actual)
}
