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
