//! The emulated drivers: an in-process KFD (and later RM/UVM) plus the software GPU that
//! executes the PM4/SDMA streams they are given.

pub mod gpu;
