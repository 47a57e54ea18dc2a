//! Kernel construction and lowering: `kernel.rs` (the Kernel and its opts), `linearizer.rs` (AST
//! to UOps), `program.rs` (the rendered ProgramSpec and cost estimates), `renderer.rs` (the
//! Renderer trait, RendererOpts and TensorCore: the seam the renderers of `renderer/` fill
//! in), `ast_eval.rs` (the reference AST evaluator tests compare against), `uops.rs` (the UOp node
//! and its constructors), `pattern.rs` (UPat, PatternMatcher, graph_rewrite), `constant_folder.rs`
//! (the rewrite rules), `uopgraph.rs` (toposort, verification, flop counting), `uop_serial.rs`
//! (the text dump and the exact serialization) and `graph.rs` (`print_tree`, the UOp graph of
//! `GRAPHUOPS=1`, the DOT writer).

#![forbid(unsafe_code)]

pub mod ast_eval;
pub mod constant_folder;
pub mod graph;
pub mod kernel;
pub mod linearizer;
pub mod pattern;
pub mod program;
pub mod renderer;
pub mod uop_serial;
pub mod uopgraph;
pub mod uops;
