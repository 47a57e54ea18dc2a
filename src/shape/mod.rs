//! Symbolic integers, `View` and `ShapeTracker`.
