//! The CPU devices: `CLANG` (C through clang or cc, dlopen), `LLVM` (LLVM IR through libLLVM in
//! process, linked by cc, run by the CLANG runtime) and `INTERP` (the UOp interpreter, the
//! reference every other device is checked against; `interp_device` is its registry glue).

pub mod clang;
pub mod interp;
pub mod interp_device;
pub mod llvm;
