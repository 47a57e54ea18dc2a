//! Opt-in instruction coverage of the PTX interpreter: with `MOCKGPU_COVERAGE=<file>` each launch
//! appends one line `<opcode> <count>` per opcode it executed (as written, with its modifiers and
//! type suffix: `ld.global.nc.v4.f32`; an instruction whose guard was false does not count) to
//! the file, in one append-mode write, so the processes of a `cargo test` run merge into one file;
//! `tools/ptx-coverage.sh` sums it and names the [`super::isa::OPCODES`] never executed.
//!
//! Not guaranteed: the file's lines from concurrent launches are whole lines only as far as the
//! file system makes one append write atomic (Linux does for local files).

use std::collections::BTreeMap;
use std::io::Write;

use super::parse::Kernel;
use crate::helpers::getenv_str;
use crate::{Error, Result};

/// The knob naming the coverage file.
pub const KNOB: &str = "MOCKGPU_COVERAGE";

/// The coverage file, when the knob names one.
pub fn target() -> Option<String> {
    getenv_str(KNOB).filter(|s| !s.trim().is_empty())
}

/// The `<opcode> <count>` lines of one launch: `hits[i]` is how often instruction `i` of `k` ran.
pub fn lines(k: &Kernel, hits: &[u64]) -> String {
    let mut by_op: BTreeMap<&str, u64> = BTreeMap::new();
    for (i, &n) in k.insts.iter().zip(hits) {
        if n > 0 {
            *by_op.entry(i.opcode.as_str()).or_default() += n;
        }
    }
    by_op.iter().map(|(op, n)| format!("{op} {n}\n")).collect()
}

/// Appends one launch's counts to `path` in one write.
pub fn append(path: &str, k: &Kernel, hits: &[u64]) -> Result<()> {
    let text = lines(k, hits);
    let io = |e: std::io::Error| Error::Io(format!("{KNOB}={path}: {e}"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}
