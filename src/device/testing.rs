//! Test-only device parts: a renderer that renders nothing, a compiler that returns its source,
//! and a runtime that loads nothing, so registry and buffer tests can open host devices before the
//! real renderers exist.

use std::sync::Arc;

use crate::device::allocator::{HostAllocator, LruAllocator};
use crate::device::registry::{register_family, Compiled};
use crate::device::{Compiler, Program, Runtime};
use crate::renderer::{Renderer, RendererOpts};
use crate::{bail, Result};

pub(crate) struct TestRenderer(pub RendererOpts);

impl TestRenderer {
    pub(crate) fn new(device: &str) -> Self {
        TestRenderer(RendererOpts {
            device: device.to_string(),
            suffix: device.to_string(),
            supports_float4: false,
            has_local: false,
            has_shared: false,
            global_max: None,
            local_max: None,
            shared_max: 0,
            tensor_cores: vec![],
            vector_alu: crate::codegen::renderer::VectorAlu::None,
        })
    }
}

impl Renderer for TestRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.0
    }
    fn render(&self, name: &str, _uops: &[crate::codegen::uops::UOp]) -> Result<String> {
        bail!(Codegen, "test renderer cannot render {name}")
    }
}

/// Returns the source bytes as the "binary" (tinygrad's MockCompiler).
pub(crate) struct EchoCompiler(pub Option<String>);

impl Compiler for EchoCompiler {
    fn cache_key(&self) -> Option<String> {
        self.0.clone()
    }
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        Ok(src.as_bytes().to_vec())
    }
}

pub(crate) struct NoRuntime;

impl Runtime for NoRuntime {
    fn load(&self, name: &str, _lib: &[u8]) -> Result<Box<dyn Program>> {
        bail!(Runtime, "test runtime cannot load {name}")
    }
}

/// A host-memory device with an LRU allocator.
pub(crate) fn host_compiled(name: &str) -> Result<Compiled> {
    Ok(Compiled {
        name: name.to_string(),
        allocator: Arc::new(LruAllocator::new(HostAllocator)),
        compiler: Arc::new(EchoCompiler(None)),
        runtime: Arc::new(NoRuntime),
        renderer: Arc::new(TestRenderer::new(name)),
    })
}

/// Register `family` as a host-memory device (one LRU allocator per opened device).
pub(crate) fn register_host_family(family: &str) {
    register_family(family, host_compiled);
}
