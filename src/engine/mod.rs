//! The engine: the scheduler (`schedule.rs`), the memory planner (`memory.rs`) and the realize engine
//! (`realize.rs`).

pub mod memory;
pub mod realize;
pub mod schedule;
