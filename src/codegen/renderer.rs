//! The renderer seam as codegen sees it (tinygrad 0.9.1 `renderer/__init__.py`): the
//! [`Renderer`] trait (a linear UOp list to source text for one device family), the capability
//! record the optimizer reads ([`RendererOpts`]: locals, shared memory, vector widths, launch
//! limits) and the [`TensorCore`] description. The renderers themselves are `renderer/`'s
//! (which re-exports these); codegen needs only the seam.
//!
//! Not guaranteed: a renderer accepts only UOp lists that passed `type_verify`; anything else is an
//! `Error::Codegen`, never undefined output.

use crate::codegen::uops::UOp;
use crate::dtype::DType;
use crate::Result;

/// A tensor-core description (tinygrad's `TensorCore`): dims (N, M, K), input and output dtypes,
/// the threads that build a warp as (dim, amount), and the per-thread register layout of A, B, C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorCore {
    pub dims: [usize; 3],
    pub dtype_in: DType,
    pub dtype_out: DType,
    pub threads: Vec<(usize, usize)>,
    pub thread_local_sizes: Vec<Vec<usize>>,
    pub thread_local_aliases: Vec<Vec<Vec<i64>>>,
}

impl TensorCore {
    /// How many upcast dims the register layout uses (aliases beyond the warp threads).
    pub fn num_upcasts(&self) -> usize {
        self.thread_local_aliases
            .first()
            .map_or(0, |a| a.len().saturating_sub(self.threads.len()))
    }

    /// The printed name, `WMMA_N_M_K_in_out`.
    pub fn name(&self) -> String {
        format!(
            "WMMA_{}_{}_{}_{}_{}",
            self.dims[0],
            self.dims[1],
            self.dims[2],
            self.dtype_in.name(),
            self.dtype_out.name()
        )
    }
}

/// What a renderer (and the device behind it) can do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RendererOpts {
    /// Device family name (`CLANG`, `INTERP`, `AMD`, `NV`, ...).
    pub device: String,
    /// Suffix used in cache keys (`CLANG`, `AMD`, `PTX`, ...).
    pub suffix: String,
    pub supports_float4: bool,
    pub has_local: bool,
    pub has_shared: bool,
    /// Launch limits per axis (x, y, z); `None` = no limit (loops instead of launch dims).
    pub global_max: Option<[i64; 3]>,
    pub local_max: Option<[i64; 3]>,
    /// Bytes of shared (local) memory per workgroup.
    pub shared_max: usize,
    pub tensor_cores: Vec<TensorCore>,
    /// Which lane-wise ALU ops the renderer emits on vectors (beyond 0.9.1: the CPU renderers'
    /// vector ALU fold, `codegen/uopgraph/vectorize.rs`); `VectorAlu::None` keeps 0.9.1's UOps.
    pub vector_alu: VectorAlu,
}

/// The vector ALU ops a renderer can emit (beyond tinygrad 0.9.1, which renders every lane-wise
/// op as scalars): the fold of `codegen/uopgraph/vectorize.rs` only builds what this allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VectorAlu {
    /// No vector ALU ops (GPU renderers, INTERP, 0.9.1's behaviour).
    #[default]
    None,
    /// C with GNU vector extensions: `+`, `*` and unary `-` on float and double vectors.
    C,
    /// LLVM IR: every ALU op lane-wise (except on bfloat16 vectors).
    Llvm,
}

/// UOps to source for one device family.
pub trait Renderer: Send + Sync {
    fn opts(&self) -> &RendererOpts;
    /// Render the kernel `name` from a linearized, verified UOp list.
    fn render(&self, name: &str, uops: &[UOp]) -> Result<String>;
}
