//! The CPU devices: `CLANG` (C through clang or cc, dlopen), `LLVM` (LLVM IR through libLLVM in
//! process, loaded by rawgrad's ELF loader `objload`, run by the CLANG program) and `INTERP` (the
//! UOp interpreter [`crate::interp`], the reference every other device is checked against; `interp_device` is its
//! registry glue). [`launch`]: the launch policy of the CLANG and LLVM programs (the split of a
//! kernel over cores, BEAM's test size), applied behind the program seam. [`graph`]: the JIT's batch
//! graph of CLANG and LLVM (a batch of kernels compiled into one program, replayed with one call).

pub mod clang;
pub mod graph;
pub mod interp_device;
pub mod launch;
pub mod llvm;
pub mod objload;
