//! The only place with syscalls and foreign calls: every open, ioctl, mmap, dlopen and doorbell write
//! goes through here.

pub mod emu;
