//! The engine: the scheduler (`schedule.rs`), the memory planner (`memory.rs`), the realize engine
//! (`realize.rs`) and BEAM search (`search.rs`).

pub mod memory;
pub mod realize;
pub mod schedule;
pub mod search;
