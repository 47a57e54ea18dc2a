//! Kernel construction and lowering: `kernel.rs` (the Kernel and its opts), `linearizer.rs` (AST to
//! UOps), `uops.rs` (the UOp node and its constructors), `pattern.rs` (UPat, PatternMatcher,
//! graph_rewrite), `constant_folder.rs` (the rewrite rules), `uopgraph.rs` (toposort, verification,
//! flop counting) and `uop_serial.rs` (the text dump and the exact serialization).

pub mod constant_folder;
pub mod pattern;
pub mod uop_serial;
pub mod uopgraph;
pub mod uops;
