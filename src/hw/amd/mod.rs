//! AMD hardware facts, gfx9.0a to gfx12: the per-gfx chip table ([`targets`]), the PM4 and SDMA
//! vocabularies (opcodes, header layouts, typed bit fields, SH register offsets: [`pm4`],
//! [`sdma`]), the code-object v3+ kernel descriptor ([`kd`]), the AMD ELF code-object reader,
//! loader and writer ([`elf`]), and the strict PM4/SDMA decoders ([`decode`]) that the golden
//! tests and the software GPU share.
//!
//! Sources, cited per fact: Linux `drivers/gpu/drm/amd/amdgpu/` (`nvd.h`, `soc15d.h`,
//! `navi10_sdma_pkt_open.h`, `vega10_sdma_pkt_open.h`, the `gc_*_offset.h` / `gc_*_sh_mask.h`
//! register headers), `amdkfd/kfd_queue.c`, Mesa `src/amd/registers/*.json`, LLVM
//! `AMDGPUUsage.rst` (kernel descriptor, code-object ELF) and tinygrad's `ops_amd.py`.
//!
//! The packet builders stay in `runtime::amd::{pm4, sdma}`; nothing here builds a command stream,
//! talks to a device or keeps state.
//!
//! Not guaranteed: only the packets, registers and fields rawgrad emits are named; decoding
//! anything else is an error.

/// Declares a `#[repr(u32)]` enum of hardware field values with `from_u32`, `name` and `bits`.
macro_rules! u32_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        $vis enum $name { $($(#[$vm])* $var = $val),+ }
        impl $name {
            /// The variant whose hardware value is `v`.
            pub fn from_u32(v: u32) -> Option<Self> {
                $(if v == $val { return Some(Self::$var); })+
                None
            }
            /// The mnemonic.
            pub fn name(self) -> &'static str {
                match self { $(Self::$var => stringify!($var)),+ }
            }
            /// The hardware value.
            pub fn bits(self) -> u32 {
                self as u32
            }
        }
    };
}

pub mod decode;
pub mod elf;
pub mod kd;
pub mod pm4;
pub mod sdma;
pub mod targets;
