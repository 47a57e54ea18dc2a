//! Hardware facts: what the vendors' headers, documents and driver sources say about the GPUs,
//! written down once so the backends (`runtime/*`), the emulator (`mockgpu/`) and the renderers
//! read the same numbers from below instead of reaching up into a backend.
//!
//! `hw` owns per-chip tables, packet opcodes and field layouts, register offsets, code-object
//! formats and the strict decoders that turn a packet stream back into typed packets. It owns no
//! builders of command streams (those stay with the backends, which know what they want to
//! say), does no I/O and holds no state: every item is a constant, a table, a type or a pure
//! function. Each fact names its vendor source (a header, a document or a driver file) where it
//! is defined.
//!
//! Imports: only the base modules (`error`, `helpers`, `dtype`, `json`) and external crates
//! (`bitflags`); never a backend, the emulator, the device layer or the driver.
//!
//! Not guaranteed: only the facts rawgrad uses are here; a fact marked NOT CONFIRMED was not
//! checked against a source for that chip.

#![forbid(unsafe_code)]

pub mod amd;
pub mod nv;

/// Compares `actual` with `tests/golden/<vendor>/<name>` (the packet goldens the decoders
/// check); with `RAWGRAD_BLESS=1` rewrites the file.
#[cfg(test)]
pub(crate) fn check_golden(vendor: &str, name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(vendor)
        .join(name);
    if std::env::var("RAWGRAD_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "golden {}: {e} (run with RAWGRAD_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b);
        panic!(
            "golden {} differs (first differing line {:?}):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display(),
            first.map(|i| i + 1)
        );
    }
}
