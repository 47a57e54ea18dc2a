//! Hardware facts, below the backends and the emulator: chip tables, command-packet field layouts
//! and opcodes, class method numbers, descriptor (QMD) field tables and their decoders, each
//! with the vendor header or public source it comes from. Pure data and encode/decode functions:
//! nothing here talks to a device or a driver, and this layer imports only the base modules.
//!
//! Not guaranteed: facts marked UNCONFIRMED in a module were not verified on that hardware.

pub mod nv;
