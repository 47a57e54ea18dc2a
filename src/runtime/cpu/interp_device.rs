//! The `INTERP` device: the UOp interpreter ([`InterpProgram`]) behind the registry's seams, so
//! whole schedules run on the reference semantics (tinygrad's `PYTHON` device).
//!
//! - [`InterpRenderer`]: the "source" is the exact UOp serialization (`uop_serial::serialize`);
//!   the capabilities are tinygrad's `Renderer` defaults, as the PYTHON device has them: locals,
//!   shared memory, float4 grouping, launch limits `0x8FFFFFFF` per axis, 32 KiB shared memory.
//! - [`InterpCompiler`]: the identity (the serialized UOps are the binary); no disk cache.
//! - [`InterpRuntime`] / [`InterpDeviceProgram`]: deserialize and lower once at load; a call runs
//!   the launch grid over the kernel's buffers through [`HostBuffers`], a [`Memory`] that reads
//!   and writes the host blocks with the bounds-checked `HostMemory` accessors. Buffers are
//!   passed as tinygrad passes them, one per DEFINE_GLOBAL in the kernel's order (a folded-away
//!   buffer leaves a gap in the indices, not in the arguments).
//! - [`open_interp`]: the device record for the registry (LRU-cached host memory).
//!
//! Not guaranteed: speed (every access takes the block's lock); a kernel reading one buffer
//! through two overlapping arguments while writing it sees its own writes in program order.

use std::sync::Arc;
use std::time::Instant;

use crate::codegen::uop_serial::{deserialize, serialize};
use crate::codegen::uopgraph::global_slots;
use crate::codegen::uops::UOp;
use crate::device::allocator::{host_memory, HostAllocator, LruAllocator};
use crate::device::registry::Compiled;
use crate::device::{Compiler, LaunchDims, Program, RawBuf, Runtime};
use crate::driver::hostmem::HostMemory;
use crate::interp::{InterpProgram, Memory};
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, ensure, Error, Result};

/// The INTERP renderer: UOps to their serialization.
#[derive(Clone, Debug)]
pub struct InterpRenderer {
    opts: RendererOpts,
}

impl Default for InterpRenderer {
    fn default() -> Self {
        InterpRenderer::new()
    }
}

impl InterpRenderer {
    pub fn new() -> InterpRenderer {
        InterpRenderer {
            opts: RendererOpts {
                device: "INTERP".into(),
                suffix: "INTERP".into(),
                supports_float4: true,
                has_local: true,
                has_shared: true,
                global_max: Some([0x8FFFFFFF; 3]),
                local_max: Some([0x8FFFFFFF; 3]),
                shared_max: 32768,
                tensor_cores: vec![],
                vector_alu: crate::codegen::renderer::VectorAlu::None,
            },
        }
    }
}

impl Renderer for InterpRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.opts
    }
    fn render(&self, _name: &str, uops: &[UOp]) -> Result<String> {
        serialize(uops)
    }
}

/// The serialized UOps are the binary.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterpCompiler;

impl Compiler for InterpCompiler {
    fn cache_key(&self) -> Option<String> {
        None
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        Ok(src.as_bytes().to_vec())
    }
}

/// Loads serialized UOps as [`InterpDeviceProgram`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterpRuntime;

impl Runtime for InterpRuntime {
    fn load(&self, name: &str, lib: &[u8]) -> Result<Box<dyn Program>> {
        let text = std::str::from_utf8(lib).map_err(|e| {
            Error::Runtime(format!(
                "INTERP {name}: the binary is not serialized UOps: {e}"
            ))
        })?;
        let uops = deserialize(text)?;
        Ok(Box::new(InterpDeviceProgram {
            prg: InterpProgram::new(name, &uops)?,
            slots: global_slots(&uops),
        }))
    }
}

/// A loaded INTERP kernel.
#[derive(Debug)]
pub struct InterpDeviceProgram {
    prg: InterpProgram,
    /// The argument position of each DEFINE_GLOBAL index.
    slots: Vec<Option<usize>>,
}

impl Program for InterpDeviceProgram {
    fn call(
        &self,
        bufs: &[RawBuf],
        vals: &[i64],
        global: Option<LaunchDims>,
        local: Option<LaunchDims>,
        wait: bool,
    ) -> Result<Option<f64>> {
        let mut mem = HostBuffers::new(bufs, &self.slots)
            .map_err(|e| Error::Runtime(format!("INTERP {}: {}", self.prg.name(), e.message())))?;
        let start = Instant::now();
        self.prg.run(
            &mut mem,
            vals,
            global.unwrap_or([1, 1, 1]),
            local.unwrap_or([1, 1, 1]),
        )?;
        Ok(wait.then(|| start.elapsed().as_secs_f64()))
    }
}

/// One buffer of [`HostBuffers`]: its block, its byte offset in the block, its size.
type HostSlot<'a> = (&'a HostMemory, usize, usize);

/// Host buffers as interpreter [`Memory`]: DEFINE_GLOBAL index `i` is the argument at position
/// `slots[i]`.
pub struct HostBuffers<'a> {
    bufs: Vec<Option<HostSlot<'a>>>,
}

impl<'a> HostBuffers<'a> {
    /// Borrow the host blocks behind `bufs` (an error names a buffer that is not host memory, or
    /// an argument count that does not match the slots).
    pub fn new(bufs: &'a [RawBuf], slots: &[Option<usize>]) -> Result<HostBuffers<'a>> {
        let want = slots.iter().flatten().count();
        ensure!(
            bufs.len() == want,
            Runtime,
            "the kernel takes {want} buffers, the call passes {}",
            bufs.len()
        );
        let mut out = Vec::with_capacity(slots.len());
        for (idx, slot) in slots.iter().enumerate() {
            let Some(pos) = *slot else {
                out.push(None);
                continue;
            };
            let Some(b) = bufs.get(pos) else {
                bail!(
                    Runtime,
                    "buffer {idx} is argument {pos} but the call passes {} buffers",
                    bufs.len()
                );
            };
            let (mem, off) = host_memory(b)
                .map_err(|e| Error::Runtime(format!("buffer {idx}: {}", e.message())))?;
            out.push(Some((mem, off, b.size)));
        }
        Ok(HostBuffers { bufs: out })
    }

    /// The block and absolute offset of `n` bytes at `byte_off` of buffer `buf`, and its size.
    fn slot(&self, buf: usize, byte_off: usize, n: usize) -> Result<HostSlot<'a>> {
        let Some(&Some((mem, off, size))) = self.bufs.get(buf) else {
            bail!(Runtime, "memory: the kernel has no buffer {buf}");
        };
        match byte_off.checked_add(n) {
            Some(end) if end <= size => Ok((mem, off + byte_off, size)),
            _ => bail!(
                Runtime,
                "memory: bytes {byte_off}..{} of buffer {buf} are past its {size} bytes",
                byte_off.saturating_add(n)
            ),
        }
    }
}

impl Memory for HostBuffers<'_> {
    fn size(&self, buf: usize) -> Result<usize> {
        self.slot(buf, 0, 0).map(|s| s.2)
    }
    fn load(&self, buf: usize, byte_off: usize, out: &mut [u8]) -> Result<()> {
        let (mem, at, _) = self.slot(buf, byte_off, out.len())?;
        mem.read(at, out)
    }
    fn store(&mut self, buf: usize, byte_off: usize, data: &[u8]) -> Result<()> {
        let (mem, at, _) = self.slot(buf, byte_off, data.len())?;
        mem.write(at, data)
    }
}

/// The `INTERP` device record: LRU-cached host memory, the identity compiler, the interpreter.
pub fn open_interp(name: &str) -> Result<Compiled> {
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HostAllocator)),
        compiler: Arc::new(InterpCompiler),
        runtime: Arc::new(InterpRuntime),
        renderer: Arc::new(InterpRenderer::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Allocator, BufferOptions};

    #[test]
    fn host_buffers_are_bounds_checked() {
        let a = HostAllocator;
        let o = BufferOptions::default();
        let base = a.alloc(16, &o).unwrap();
        let view = a.offset(&base, 8, 4).unwrap();
        let bufs = [base.clone(), view];
        // DEFINE_GLOBAL 0 is the base, 2 the view (argument 1); there is no 1.
        let slots = [Some(0), None, Some(1)];
        let mut m = HostBuffers::new(&bufs, &slots).unwrap();
        assert_eq!(m.size(2).unwrap(), 8);
        m.store(2, 4, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        m.load(0, 8, &mut out).unwrap();
        assert_eq!(
            out,
            [1, 2, 3, 4],
            "the view writes at byte 4 + 4 of its base"
        );
        let e = m.store(2, 6, &[0; 4]).unwrap_err();
        assert!(e.message().contains("past its 8 bytes"), "{e}");
        assert!(m.load(1, 0, &mut out).is_err());
        assert!(m.size(3).is_err());
        let e = HostBuffers::new(&bufs, &[Some(0)]).err().unwrap();
        assert!(
            e.message().contains("takes 1 buffers, the call passes 2"),
            "{e}"
        );
        assert!(HostBuffers::new(&bufs, &[Some(0), Some(2)]).is_err());
    }

    #[test]
    fn binary_must_be_serialized_uops() {
        let e = InterpRuntime.load("k", &[0xff, 0xfe]).err().unwrap();
        assert!(e.message().contains("not serialized UOps"), "{e}");
    }
}
