//! Kernel construction and lowering: `kernel.rs` (the Kernel and its opts), `linearizer.rs` (AST to
//! UOps), `uops.rs` (the UOp graph, rewrite rules, toposort, verification).

pub mod uops;
