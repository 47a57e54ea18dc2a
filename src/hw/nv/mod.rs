//! NVIDIA hardware facts: the per-architecture tables and class ids ([`arch`]), the pushbuffer
//! method header ([`header`]) and the class methods rawgrad emits ([`methods`]), the QMD field
//! tables and readers ([`qmd`]), the decoders that print pushbuffers and QMDs ([`decode`]), the
//! GPFIFO entry and USERD / usermode layouts ([`gpfifo`]), and the cubin format ([`cubin`]).
//! The NV backend (`runtime::nv`) builds streams from these; the emulator (`mockgpu::rm`,
//! `mockgpu::nvgpu`) reads streams with them.
//!
//! Sources: NVIDIA open-gpu-kernel-modules `src/common/sdk/nvidia/inc/class/` and open-gpu-doc
//! `classes/` (the class headers named in each module: `clc56f.h` host, `clc6c0.h`..`clcec0.h`
//! compute, `clc6c0qmd.h`..`clcdc0qmd.h` QMDs, `clc6b5.h`..`clcab5.h` copy, `clc361.h` usermode).
//!
//! Not guaranteed: chips outside the tables; facts marked UNCONFIRMED.

pub mod arch;
pub mod cubin;
pub mod decode;
pub mod gpfifo;
pub mod header;
pub mod methods;
pub mod qmd;
