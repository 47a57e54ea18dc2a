//! Symbolic integers, `View` and `ShapeTracker`: tinygrad 0.9.1's `shape/` package.
//!
//! - [`symbolic`]: bounded symbolic integers ([`Node`], alias [`Sint`]) with tinygrad's rewrite
//!   rules and render strings.
//! - [`view`]: one strided, offset, optionally masked view of a buffer ([`View`]) with the
//!   movement ops, reshape-with-masks and the view merge.
//! - [`shapetracker`]: a stack of views ([`ShapeTracker`]) with index expressions.
//!
//! Not guaranteed: these types describe index arithmetic only; nothing here knows about dtypes,
//! devices or buffers.

#![forbid(unsafe_code)]

pub mod shapetracker;
pub mod symbolic;
pub mod view;

pub use shapetracker::ShapeTracker;
pub use symbolic::{
    all_int, create_ge_node, create_lt_node, sint_prod, sint_sum, sints, sym_infer, Node, NodeKind,
    Sint, VarVals,
};
pub use view::{canonicalize_strides, strides_for_shape, Mask, View};
