//! The layer checker behind `tests/layers.rs`: `scan` reads a file's code and paths, `check`
//! maps files to units and finds edges against the order, cycles and missing `forbid`s, `readme`
//! renders the README's layout section.
//!
//! Not guaranteed: the checker reads source text; it does not expand macros or follow `#[path]`
//! attributes beyond test modules.

pub mod check;
pub mod readme;
pub mod scan;
pub mod selftest;
