//! The `INTERP` device: the UOp interpreter ([`InterpProgram`]) behind the registry's seams, so
//! whole schedules run on the reference semantics (tinygrad's `PYTHON` device).
//!
//! - [`InterpRenderer`]: the "source" is the exact UOp serialization (`uop_serial::serialize`);
//!   the capabilities are tinygrad's `Renderer` defaults, as the PYTHON device has them: locals,
//!   shared memory, float4 grouping, launch limits `0x8FFFFFFF` per axis, 32 KiB shared memory.
//! - [`InterpCompiler`]: the identity (the serialized UOps are the binary); no disk cache.
//! - [`InterpRuntime`] / [`InterpDeviceProgram`]: deserialize and lower once at load; a call runs
//!   the launch grid over the kernel's buffers through [`HostBuffers`], a [`Memory`] that reads
//!   and writes the host blocks with the bounds-checked `HostMemory` accessors.
//! - [`open_interp`]: the device record for the registry (LRU-cached host memory).
//!
//! Not guaranteed: speed (every access takes the block's lock); a kernel reading one buffer
//! through two overlapping arguments while writing it sees its own writes in program order.

use std::sync::Arc;
use std::time::Instant;

use crate::codegen::uop_serial::serialize;
use crate::codegen::uops::UOp;
use crate::device::allocator::{host_memory, HostAllocator, LruAllocator};
use crate::device::registry::Compiled;
use crate::device::{Compiler, LaunchDims, Program, RawBuf, Runtime};
use crate::driver::hostmem::HostMemory;
use crate::renderer::{Renderer, RendererOpts};
use crate::runtime::cpu::interp::{InterpProgram, Memory};
use crate::{bail, Error, Result};

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
        Ok(Box::new(InterpDeviceProgram {
            prg: InterpProgram::from_serialized(name, text)?,
        }))
    }
}

/// A loaded INTERP kernel.
#[derive(Debug)]
pub struct InterpDeviceProgram {
    prg: InterpProgram,
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
        let mut mem = HostBuffers::new(bufs)
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

/// Host buffers as interpreter [`Memory`]: buffer `i` is the `i`-th `RawBuf` (its block, the
/// byte offset of the buffer in it, the buffer's size).
pub struct HostBuffers<'a> {
    bufs: Vec<(&'a HostMemory, usize, usize)>,
}

impl<'a> HostBuffers<'a> {
    /// Borrow the host blocks behind `bufs` (an error names a buffer that is not host memory).
    pub fn new(bufs: &'a [RawBuf]) -> Result<HostBuffers<'a>> {
        let mut out = Vec::with_capacity(bufs.len());
        for (i, b) in bufs.iter().enumerate() {
            let (mem, off) = host_memory(b)
                .map_err(|e| Error::Runtime(format!("buffer {i}: {}", e.message())))?;
            out.push((mem, off, b.size));
        }
        Ok(HostBuffers { bufs: out })
    }

    fn slot(&self, buf: usize, byte_off: usize, n: usize) -> Result<(&'a HostMemory, usize)> {
        let Some(&(mem, off, size)) = self.bufs.get(buf) else {
            bail!(
                Runtime,
                "memory: no buffer {buf} (the kernel got {})",
                self.bufs.len()
            );
        };
        match byte_off.checked_add(n) {
            Some(end) if end <= size => Ok((mem, off + byte_off)),
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
        self.slot(buf, 0, 0).map(|_| self.bufs[buf].2)
    }
    fn load(&self, buf: usize, byte_off: usize, out: &mut [u8]) -> Result<()> {
        let (mem, at) = self.slot(buf, byte_off, out.len())?;
        mem.read(at, out)
    }
    fn store(&mut self, buf: usize, byte_off: usize, data: &[u8]) -> Result<()> {
        let (mem, at) = self.slot(buf, byte_off, data.len())?;
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
        let mut m = HostBuffers::new(&bufs).unwrap();
        assert_eq!(m.size(1).unwrap(), 8);
        m.store(1, 4, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        m.load(0, 8, &mut out).unwrap();
        assert_eq!(
            out,
            [1, 2, 3, 4],
            "the view writes into its base at offset 4"
        );
        let e = m.store(1, 6, &[0; 4]).unwrap_err();
        assert!(e.message().contains("past its 8 bytes"), "{e}");
        assert!(m.load(2, 0, &mut out).is_err());
        assert!(m.size(2).is_err());
    }

    #[test]
    fn binary_must_be_serialized_uops() {
        let e = InterpRuntime.load("k", &[0xff, 0xfe]).err().unwrap();
        assert!(e.message().contains("not serialized UOps"), "{e}");
    }
}
