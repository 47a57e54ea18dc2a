//! The `LazyBuffer` graph.
