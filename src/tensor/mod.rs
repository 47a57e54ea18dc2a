//! The `Tensor` API.
