//! The `Tensor` API: tinygrad 0.9.1's `Tensor`, a cheap-clone handle (an `Arc` inside) over a
//! [`LazyBuffer`], with autograd.
//!
//! Every operation builds lazy graph nodes through the 27 autograd Functions of `function.rs`
//! (the exact LazyBuffer op sequences tinygrad 0.9.1 emits, so the scheduler fuses them into the
//! same kernels); nothing runs until [`Tensor::realize`] (or a data read such as
//! [`Tensor::to_vec`]) hands the graph to the engine.
//!
//! The API is split by family: `creation.rs` (from_vec, full, arange, eye, ...), `movement.rs`
//! (reshape, permute, pad, shrink, cat, ...), `indexing.rs` (getitem), `setitem.rs`
//! (assignment into slices and at tensor indices), `elementwise.rs` (broadcasting, promotion,
//! math, operators, in-place operators), `activation.rs`, `reduce.rs` (sum, max, softmax,
//! argmax, ...), `einsum.rs`, `conv.rs` (pooling, conv2d, conv_transpose2d), `ops_nn.rs`
//! (matmul, layernorm, ...), `autograd.rs` (backward), `data.rs` (realize, to_vec, item,
//! numpy), `rand.rs` (threefry random numbers, multinomial, dropout), and `nn/` (tinygrad's
//! `nn`: layers, optimizers, state dicts and safetensors files).
//!
//! A `Tensor` has identity semantics: clones share one node (its data, `requires_grad` flag and
//! gradient), like a Python reference. It is `Send + Sync`; the `no_grad` and `training` flags
//! are per thread.
//!
//! Not guaranteed: shapes are integers (symbolic shapes are not produced by this API; a tensor
//! over a symbolic LazyBuffer reports each symbolic dimension by its upper bound); multi-device
//! (sharded) tensors are not supported.

#![forbid(unsafe_code)]

mod activation;
mod autograd;
mod conv;
mod creation;
mod data;
mod einsum;
mod elementwise;
mod function;
mod indexing;
mod movement;
pub mod nn;
mod ops_nn;
mod rand;
mod reduce;
mod setitem;

use std::cell::Cell;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::dtype::DType;
use crate::lazy::LazyBuffer;
use crate::shape::{Node, Sint};
use crate::{ensure, Result};

pub use conv::{ConvArgs, IntoInts, PoolArgs};
pub use creation::ArangeArgs;
pub use data::{Element, HostArray, TensorData};
pub use elementwise::Operand;
pub use indexing::Index;
pub use reduce::Axis;

pub(crate) use function::Ctx;

/// A multi-dimensional array of one dtype on one device (see the module doc).
#[derive(Clone)]
pub struct Tensor(Arc<TensorInner>);

pub(crate) struct TensorInner {
    lazydata: RwLock<LazyBuffer>,
    /// tinygrad's three-state flag: `Some(true)` gradients wanted, `Some(false)` never, `None`
    /// unknown (becomes `true` when an optimizer takes the tensor).
    requires_grad: Mutex<Option<bool>>,
    grad: Mutex<Option<Tensor>>,
    /// The Function that produced this tensor, kept only while gradients are wanted.
    ctx: Mutex<Option<Arc<Ctx>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for TensorInner {
    /// Drop long autograd chains iteratively: a parent whose last handle is held by a dying
    /// context is dismantled here instead of recursively.
    fn drop(&mut self) {
        let own = self.ctx.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let mut pending: Vec<Arc<Ctx>> = own.into_iter().collect();
        while let Some(ctx) = pending.pop() {
            let Ok(ctx) = Arc::try_unwrap(ctx) else {
                continue;
            };
            for parent in ctx.parents {
                if let Ok(mut inner) = Arc::try_unwrap(parent.0) {
                    let c = inner
                        .ctx
                        .get_mut()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    pending.extend(c);
                }
            }
        }
    }
}

thread_local! {
    static NO_GRAD: Cell<bool> = const { Cell::new(false) };
    static TRAINING: Cell<bool> = const { Cell::new(false) };
}

/// Restores the previous `no_grad` flag of this thread when dropped.
#[must_use = "the mode lasts only while the guard lives"]
pub struct NoGradGuard(bool);

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        NO_GRAD.with(|f| f.set(self.0));
    }
}

/// Restores the previous `training` flag of this thread when dropped.
#[must_use = "the mode lasts only while the guard lives"]
pub struct TrainGuard(bool);

impl Drop for TrainGuard {
    fn drop(&mut self) {
        TRAINING.with(|f| f.set(self.0));
    }
}

/// Python's rendering of a shape tuple: `(2, 3)`, `(4,)`, `()`.
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    match shape {
        [] => "()".to_string(),
        [x] => format!("({x},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// Integer shape to the LazyBuffer's shape type: an error unless the shape fits the symbolic
/// integers (see [`check_shape`]).
pub(crate) fn to_sints(shape: &[usize]) -> Result<Vec<Sint>> {
    check_shape(shape)?;
    Ok(shape.iter().map(|&s| Node::Num(s as i64)).collect())
}

/// The API edge's size check: every dim and the product of the non-zero dims (what the row-major
/// strides reach) at most `i64::MAX`, the range of the symbolic integers. tinygrad's Python ints
/// have no bound; a shape beyond this one could be neither strided nor allocated.
pub(crate) fn check_shape(shape: &[usize]) -> Result<()> {
    let mut p: i64 = 1;
    for &s in shape {
        let fits = i64::try_from(s)
            .ok()
            .and_then(|s| if s == 0 { Some(p) } else { p.checked_mul(s) });
        match fits {
            Some(np) => p = np,
            None => crate::bail!(
                InvalidArgument,
                "shape {} does not fit the symbolic integers (each dim and the product of the \
                 non-zero dims must be at most {})",
                fmt_shape(shape),
                i64::MAX
            ),
        }
    }
    Ok(())
}

/// `a + b` of sizes, an error naming `what` when it overflows.
pub(crate) fn add_size(a: usize, b: usize, what: impl FnOnce() -> String) -> Result<usize> {
    a.checked_add(b)
        .ok_or_else(|| crate::Error::InvalidArgument(format!("{}: {a} + {b} overflows", what())))
}

/// `a * b` of sizes, an error naming `what` when it overflows.
pub(crate) fn mul_size(a: usize, b: usize, what: impl FnOnce() -> String) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| crate::Error::InvalidArgument(format!("{}: {a} * {b} overflows", what())))
}

/// tinygrad's `prod` of a shape (saturating: sizes that large cannot be allocated anyway).
pub(crate) fn prod(shape: &[usize]) -> usize {
    shape.iter().fold(1usize, |a, &b| a.saturating_mul(b))
}

impl Tensor {
    /// A tensor over `lb` (tinygrad's `Tensor(lazybuffer)`).
    pub fn from_lazybuffer(lb: LazyBuffer, requires_grad: Option<bool>) -> Tensor {
        Tensor(Arc::new(TensorInner {
            lazydata: RwLock::new(lb),
            requires_grad: Mutex::new(requires_grad),
            grad: Mutex::new(None),
            ctx: Mutex::new(None),
        }))
    }

    /// The lazy graph node this tensor currently stands for.
    pub fn lazydata(&self) -> LazyBuffer {
        self.0
            .lazydata
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `f` of the current node, borrowed (the properties read it without a handle of their own).
    fn with_lazydata<R>(&self, f: impl FnOnce(&LazyBuffer) -> R) -> R {
        f(&self.0.lazydata.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn set_lazydata(&self, lb: LazyBuffer) {
        *self.0.lazydata.write().unwrap_or_else(|e| e.into_inner()) = lb;
    }

    /// A number unique to this tensor while it lives (identity, like Python's `id`).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const u8 as usize
    }

    /// Whether two handles name the same tensor.
    pub fn ptr_eq(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    // ---- properties ------------------------------------------------------------------------

    /// The shape (a symbolic dimension is reported by its upper bound).
    pub fn shape(&self) -> Vec<usize> {
        self.with_lazydata(|lb| {
            lb.shape()
                .iter()
                .map(|s| {
                    let v = s.as_int().or_else(|| s.max().as_int()).unwrap_or(0);
                    usize::try_from(v).unwrap_or(0)
                })
                .collect()
        })
    }
    pub fn dtype(&self) -> DType {
        self.with_lazydata(LazyBuffer::dtype)
    }
    /// The canonical device name.
    pub fn device(&self) -> String {
        self.with_lazydata(|lb| lb.device().to_string())
    }
    pub fn ndim(&self) -> usize {
        self.with_lazydata(|lb| lb.shape().len())
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        prod(&self.shape())
    }
    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.dtype().itemsize()
    }
    pub fn nbytes(&self) -> usize {
        self.numel().saturating_mul(self.element_size())
    }
    pub fn is_floating_point(&self) -> bool {
        self.dtype().is_float()
    }
    /// `size(dim)`: the extent of one dimension (negative counts from the end).
    pub fn size(&self, dim: isize) -> Result<usize> {
        let d = self.resolve_dim(dim, false)?;
        Ok(self.shape()[d])
    }
    /// Python's `len()`: the first dimension; an error for a 0-d tensor.
    pub fn len(&self) -> Result<usize> {
        let shape = self.shape();
        ensure!(
            !shape.is_empty(),
            InvalidArgument,
            "len: len() of a 0-d tensor"
        );
        Ok(shape[0])
    }
    /// Whether the tensor holds no elements.
    pub fn is_empty(&self) -> bool {
        self.numel() == 0
    }

    /// tinygrad's `_resolve_dim`: a possibly negative dim as an index (`outer` allows one past
    /// the last dim, for unsqueeze).
    pub(crate) fn resolve_dim(&self, dim: isize, outer: bool) -> Result<usize> {
        resolve_dim(self.ndim(), dim, outer)
    }

    // ---- autograd state --------------------------------------------------------------------

    /// tinygrad's `requires_grad`: `Some(true)`, `Some(false)` or `None` (unknown).
    pub fn requires_grad(&self) -> Option<bool> {
        *lock(&self.0.requires_grad)
    }
    /// Set the `requires_grad` flag.
    pub fn set_requires_grad(&self, v: Option<bool>) {
        *lock(&self.0.requires_grad) = v;
    }
    /// Builder form: set `requires_grad` and return the same tensor.
    pub fn requires_grad_(self, v: bool) -> Tensor {
        self.set_requires_grad(Some(v));
        self
    }
    /// The gradient computed by [`Tensor::backward`], if any.
    pub fn grad(&self) -> Option<Tensor> {
        lock(&self.0.grad).clone()
    }
    /// Replace (or clear) the gradient.
    pub fn set_grad(&self, g: Option<Tensor>) {
        *lock(&self.0.grad) = g;
    }
    pub(crate) fn ctx(&self) -> Option<Arc<Ctx>> {
        lock(&self.0.ctx).clone()
    }
    pub(crate) fn set_ctx(&self, ctx: Option<Arc<Ctx>>) {
        *lock(&self.0.ctx) = ctx;
    }

    /// A new tensor with the same data, cut from the autograd graph.
    pub fn detach(&self) -> Tensor {
        Tensor::from_lazybuffer(self.lazydata(), Some(false))
    }

    /// Whether `no_grad` is on for this thread (Functions then keep no context).
    pub fn is_no_grad() -> bool {
        NO_GRAD.with(|f| f.get())
    }
    /// tinygrad's `Tensor.inference_mode(mode)` / `Tensor.no_grad = mode` for this thread, until
    /// the guard drops.
    pub fn inference_mode(mode: bool) -> NoGradGuard {
        NoGradGuard(NO_GRAD.with(|f| f.replace(mode)))
    }
    /// `Tensor.inference_mode(True)`.
    pub fn no_grad() -> NoGradGuard {
        Tensor::inference_mode(true)
    }
    /// Whether training mode is on for this thread (dropout is active).
    pub fn is_training() -> bool {
        TRAINING.with(|f| f.get())
    }
    /// tinygrad's `Tensor.train(mode)` for this thread, until the guard drops.
    pub fn train(mode: bool) -> TrainGuard {
        TrainGuard(TRAINING.with(|f| f.replace(mode)))
    }

    // ---- in-place updates ------------------------------------------------------------------

    /// tinygrad's `replace(x)`: take `x`'s data (same shape; `x` must not need gradients and
    /// this tensor must not be the result of a tracked Function).
    pub fn replace(&self, x: &Tensor) -> Result<&Tensor> {
        ensure!(
            x.requires_grad() != Some(true) && self.ctx().is_none(),
            InvalidArgument,
            "replace: tensors in the autograd graph cannot be replaced"
        );
        ensure!(
            self.shape() == x.shape(),
            InvalidArgument,
            "replace: replace shape mismatch {} != {}",
            fmt_shape(&self.shape()),
            fmt_shape(&x.shape())
        );
        self.set_lazydata(x.lazydata());
        Ok(self)
    }

    /// tinygrad's `assign(x)`: write `x` into this tensor's buffer (an ASSIGN node when this
    /// tensor is realized, else a plain replace). Shapes, devices and dtypes must match.
    pub fn assign(&self, x: &Tensor) -> Result<&Tensor> {
        if self.lazydata() == x.lazydata() {
            return Ok(self);
        }
        let what =
            |a: String, b: String, k: &str| format!("assign: assign {k} mismatch {a} != {b}");
        ensure!(
            self.shape() == x.shape(),
            InvalidArgument,
            "{}",
            what(fmt_shape(&self.shape()), fmt_shape(&x.shape()), "shape")
        );
        ensure!(
            self.device() == x.device(),
            InvalidArgument,
            "{}",
            what(self.device(), x.device(), "device")
        );
        ensure!(
            self.dtype() == x.dtype(),
            InvalidArgument,
            "{}",
            what(
                format!("{:?}", self.dtype()),
                format!("{:?}", x.dtype()),
                "dtype"
            )
        );
        ensure!(
            x.requires_grad() != Some(true),
            InvalidArgument,
            "assign: the assigned value must not require grad"
        );
        let lb = self.lazydata();
        if !lb.is_realized() {
            return self.replace(x);
        }
        self.set_lazydata(lb.assign(&x.lazydata())?);
        Ok(self)
    }
}

/// `_resolve_dim` over a rank. Unlike tinygrad, the result always indexes a real dimension (a
/// 0-d tensor has none, so only `outer` dims resolve there).
pub(crate) fn resolve_dim(ndim: usize, dim: isize, outer: bool) -> Result<usize> {
    let total = (ndim + usize::from(outer)) as isize;
    let n = total.max(1);
    ensure!(
        -n <= dim && dim < n,
        InvalidArgument,
        "resolve_dim: dim={dim} out of range [{}, {}]",
        -n,
        n - 1
    );
    let r = if dim < 0 { dim + total } else { dim };
    ensure!(
        (0..total).contains(&r),
        InvalidArgument,
        "resolve_dim: dim={dim} does not name a dimension of a 0-d tensor"
    );
    Ok(r as usize)
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grad = self.grad().map(|g| format!("{:?}", g.lazydata()));
        write!(
            f,
            "<Tensor {:?} on {} with grad {}>",
            self.lazydata(),
            self.device(),
            grad.as_deref().unwrap_or("None")
        )
    }
}

#[cfg(test)]
mod tests;
