//! The engine: the scheduler (`schedule.rs`), the memory planner (`memory.rs`), the realize engine
//! (`realize.rs`), BEAM search (`search.rs`) and the JIT (`jit.rs`).

#![forbid(unsafe_code)]

pub mod jit;
pub mod memory;
pub mod realize;
pub mod schedule;
pub mod search;
