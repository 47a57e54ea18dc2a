//! The CPU devices: `CLANG` (C through clang or cc, dlopen) and `INTERP` (the UOp interpreter, the
//! reference every other device is checked against; `interp_device` is its registry glue).

pub mod clang;
pub mod interp;
pub mod interp_device;
