//! The engine: the scheduler (`schedule.rs`), the memory planner (`memory.rs`), the realize engine
//! (`realize.rs`), BEAM search (`search.rs`), the JIT (`jit.rs`) and the lazy-graph view of
//! `GRAPH=1` (`graph.rs`).

#![forbid(unsafe_code)]

pub mod graph;
pub mod jit;
pub mod memory;
pub mod realize;
pub mod schedule;
pub mod search;
