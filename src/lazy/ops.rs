//! The graph operations of a [`LazyBuffer`]: load ops and constants, elementwise ops with
//! constant folding (`e`), reductions with the split-reduce heuristic (`r`), movement ops,
//! `contiguous`, `cast`, `copy_to_device` and `assign` (tinygrad 0.9.1's `LazyBuffer` methods).
//!
//! Every check tinygrad asserts is an `Err` here, naming the op and the shapes or dtypes at fault.
//!
//! Not guaranteed: a MAX reduction of an empty input gives `dtypes.min` of the dtype (tinygrad
//! gives -inf, which cannot be converted for integer dtypes); NEG of a NEG folds only when the
//! outer NEG reads the inner one directly (tinygrad also folds through a view, returning a node of
//! the wrong shape).

use std::sync::Arc;

use super::{create_lazybuffer, LazyBuffer, LbArg, Spec};
use crate::device::registry::{canonical_arc, canonicalize, device_family};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::helpers::{debug, getenv, Knob};
use crate::ops::{exec_alu, BinaryOps, ConstArg, LoadOps, Op, ReduceOps, TernaryOps, UnaryOps};
use crate::shape::symbolic::{py_lt, render_shape};
use crate::shape::{all_int, sint_prod, Node, ShapeTracker, Sint};
use crate::{bail, ensure, Error, Result};

/// Device families whose allocators can hand out offset views (0.9.1's
/// `view_supported_devices`).
pub const VIEW_SUPPORTED_DEVICES: [&str; 6] = ["LLVM", "CLANG", "CUDA", "NV", "AMD", "DISK"];

/// The device families whose kernels load and store up to 16 bytes at once (float4, half8) at an
/// address the kernel assumes aligned, and the alignment a buffer view must keep there: an NV
/// kernel loading a float4 from a view 8 bytes into its buffer stopped with Xid 13 "Misaligned
/// Address" on an H200 (2026-12-04). A misaligned slice is copied by a kernel instead.
pub const GPU_VIEW_ALIGN: ([&str; 3], i128) = (["NV", "AMD", "CUDA"], 16);

fn lazycache_enabled() -> bool {
    static LAZYCACHE: Knob = Knob::new("LAZYCACHE", 1);
    LAZYCACHE.get() != 0
}

fn shapes_str(srcs: &[LazyBuffer]) -> String {
    let all: Vec<String> = srcs.iter().map(|s| render_shape(s.shape())).collect();
    format!("[{}]", all.join(", "))
}

/// Base creation on an already canonical device.
fn loadop_on(
    device: &Arc<str>,
    op: LoadOps,
    shape: &[Sint],
    dtype: DType,
    arg: LbArg,
    srcs: Vec<LazyBuffer>,
    enable_cache: bool,
) -> Result<LazyBuffer> {
    let st = ShapeTracker::from_shape(shape)?;
    let spec = Spec::Base {
        op: Op::Load(op),
        arg,
        srcs,
    };
    create_lazybuffer(device, st, dtype, spec, enable_cache)
}

impl LazyBuffer {
    /// tinygrad's `LazyBuffer.loadop`: a base of `op` with a contiguous ShapeTracker of `shape`
    /// (`enable_cache` is tinygrad's default `False`; CONST is always cached).
    pub fn loadop(
        op: LoadOps,
        shape: &[Sint],
        dtype: DType,
        device: &str,
        arg: LbArg,
        srcs: &[LazyBuffer],
        enable_cache: bool,
    ) -> Result<LazyBuffer> {
        let device = canonical_arc(device);
        loadop_on(&device, op, shape, dtype, arg, srcs.to_vec(), enable_cache)
    }

    /// A CONST of `val` (a number, coerced to `dtype`, or a bound Variable) with shape `shape`:
    /// a shape-`()` CONST base reshaped to 1s and expanded (what `Tensor.full` builds).
    pub fn new_const(
        val: ConstArg,
        dtype: DType,
        device: &str,
        shape: &[Sint],
    ) -> Result<LazyBuffer> {
        let device = canonical_arc(device);
        const_on(&device, val, dtype, shape)
    }

    /// tinygrad's `const(val)`: a CONST of this node's dtype and device, broadcast to its shape.
    pub fn const_like(&self, val: impl Into<ConstValue>) -> Result<LazyBuffer> {
        let shape = self.shape().to_vec();
        self.const_with_shape(val, &shape)
    }

    /// tinygrad's `const(val, shape)`.
    pub fn const_with_shape(
        &self,
        val: impl Into<ConstValue>,
        shape: &[Sint],
    ) -> Result<LazyBuffer> {
        let val = ConstArg::Value(val.into());
        const_on(self.device_arc(), val, self.dtype(), shape)
    }

    /// tinygrad's `can_view`: a consecutive view of something that is not an unrealized const,
    /// on a device whose allocator supports offset views. Beyond 0.9.1: on the GPU families
    /// ([`GPU_VIEW_ALIGN`]) the view must also start on a 16-byte boundary.
    pub fn can_view(&self) -> bool {
        let family = device_family(self.device());
        self.st().consecutive()
            && !self.is_unrealized_const()
            && VIEW_SUPPORTED_DEVICES.contains(&family.as_str())
            && (!GPU_VIEW_ALIGN.0.contains(&family.as_str()) || self.view_is_gpu_aligned())
    }

    /// Whether the single view starts a multiple of [`GPU_VIEW_ALIGN`] bytes into its buffer (a
    /// symbolic offset is not known to).
    fn view_is_gpu_aligned(&self) -> bool {
        let st = self.st();
        let offset = st.views.first().and_then(|v| v.offset.as_int());
        offset
            .is_some_and(|o| (o as i128 * self.dtype().itemsize() as i128) % GPU_VIEW_ALIGN.1 == 0)
    }
}

fn const_on(device: &Arc<str>, val: ConstArg, dtype: DType, shape: &[Sint]) -> Result<LazyBuffer> {
    let c = loadop_on(
        device,
        LoadOps::CONST,
        &[],
        dtype,
        LbArg::Const(val),
        vec![],
        true,
    )?;
    c.reshape(&vec![Node::Num(1); shape.len()])?.expand(shape)
}

// ---------------------------------------------------------------------------------------------
// Elementwise

/// The ops `e` accepts and their arity.
fn check_e_op(op: Op, n: usize) -> Result<()> {
    let want = match op {
        Op::Unary(UnaryOps::CAST | UnaryOps::BITCAST) => {
            bail!(
                InvalidArgument,
                "e: {} goes through cast(), not e()",
                op.name()
            )
        }
        Op::Unary(_) | Op::Load(LoadOps::CONTIGUOUS | LoadOps::VIEW) => 1,
        Op::Binary(_) => 2,
        Op::Ternary(_) => 3,
        _ => bail!(InvalidArgument, "e: {} is not an elementwise op", op.name()),
    };
    ensure!(
        n == want,
        InvalidArgument,
        "e: {} takes {want} sources, got {n}",
        op.name()
    );
    Ok(())
}

/// tinygrad's asserts on the sources of an elementwise op.
fn check_e_srcs(op: Op, srcs: &[LazyBuffer]) -> Result<()> {
    let is_where = op == Op::Ternary(TernaryOps::WHERE);
    let typed = if is_where { &srcs[1..] } else { srcs };
    let dts: Vec<DType> = typed.iter().map(|x| x.dtype().scalar()).collect();
    ensure!(
        dts.windows(2).all(|w| w[0] == w[1]),
        InvalidArgument,
        "all dtypes must match {dts:?} on {}",
        op.name()
    );
    ensure!(
        srcs.windows(2).all(|w| w[0].shape() == w[1].shape()),
        InvalidArgument,
        "all shapes must be the same {} on {}",
        shapes_str(srcs),
        op.name()
    );
    if is_where {
        ensure!(
            srcs[0].dtype() == dtypes::bool,
            InvalidArgument,
            "TernaryOps.WHERE must have the first arg be bool, got {:?}",
            srcs[0].dtype()
        );
    }
    if op == Op::Unary(UnaryOps::NEG) {
        ensure!(
            srcs[0].dtype() != dtypes::bool,
            InvalidArgument,
            "UnaryOps.NEG does not accept dtype bool"
        );
    }
    Ok(())
}

/// Ops with a Python evaluator in 0.9.1 (`python_alu`): every ALU op but the casts and MULACC.
fn has_python_alu(op: Op) -> bool {
    op.is_alu()
        && !matches!(
            op,
            Op::Unary(UnaryOps::CAST | UnaryOps::BITCAST) | Op::Ternary(TernaryOps::MULACC)
        )
}

/// The number of an unrealized unmasked CONST.
fn unmasked_const(x: &LazyBuffer) -> Option<ConstValue> {
    x.is_unrealized_unmasked_const()
        .then(|| x.const_value())
        .flatten()
}

impl LazyBuffer {
    /// tinygrad's `e(op, *srcs)`: an elementwise op (ALU, or LoadOps CONTIGUOUS / VIEW) of this
    /// node and `in_srcs`, with constant folding.
    pub fn e(&self, op: impl Into<Op>, in_srcs: &[&LazyBuffer]) -> Result<LazyBuffer> {
        let op = op.into();
        check_e_op(op, in_srcs.len() + 1)?;
        let mut srcs = Vec::with_capacity(in_srcs.len() + 1);
        for s in std::iter::once(self).chain(in_srcs.iter().copied()) {
            srcs.push(match s.contiguous_child() {
                Some((root, sti)) => root._view(sti)?,
                None => s.clone(),
            });
        }
        check_e_srcs(op, &srcs)?;
        let out_dtype = match op {
            Op::Binary(BinaryOps::CMPLT | BinaryOps::CMPNE) => dtypes::bool,
            _ => srcs.last().map(LazyBuffer::dtype).unwrap_or(dtypes::bool),
        };
        if let Some(folded) = self.fold_e(op, in_srcs, &srcs, out_dtype)? {
            return Ok(folded);
        }
        let st = ShapeTracker::from_shape(self.shape())?;
        let spec = Spec::Base {
            op,
            arg: LbArg::None,
            srcs,
        };
        create_lazybuffer(self.device_arc(), st, out_dtype, spec, lazycache_enabled())
    }

    /// Constant folding of `e`: all-constant inputs, NEG of NEG, `x+0`, `x*1`, `x*0`, `x*-1`.
    fn fold_e(
        &self,
        op: Op,
        in_srcs: &[&LazyBuffer],
        srcs: &[LazyBuffer],
        out_dtype: DType,
    ) -> Result<Option<LazyBuffer>> {
        if has_python_alu(op) {
            let vals: Option<Vec<ConstValue>> = srcs.iter().map(unmasked_const).collect();
            if let Some(vals) = vals {
                let v = exec_alu(op, out_dtype, &vals)?;
                return Ok(Some(self.cast(out_dtype, false)?.const_like(v)?));
            }
        }
        if op == Op::Unary(UnaryOps::NEG)
            && self.is_base()
            && self.op() == Op::Unary(UnaryOps::NEG)
            && !self.is_realized()
        {
            if let Some(inner) = self.srcs().and_then(|s| s.first().cloned()) {
                return Ok(Some(inner));
            }
        }
        let (Op::Binary(b), [y]) = (op, in_srcs) else {
            return Ok(None);
        };
        let x = self;
        if b == BinaryOps::ADD {
            if unmasked_const(y).is_some_and(|v| v.as_f64() == 0.0) {
                return Ok(Some(x.clone()));
            }
            if unmasked_const(x).is_some_and(|v| v.as_f64() == 0.0) {
                return Ok(Some((*y).clone()));
            }
        }
        if b == BinaryOps::MUL {
            for (c, other) in [(x, *y), (*y, x)] {
                let Some(val) = unmasked_const(c).map(ConstValue::as_f64) else {
                    continue;
                };
                if val == 1.0 {
                    return Ok(Some(other.clone()));
                }
                if val == 0.0 {
                    return Ok(Some(other.const_like(0i64)?));
                }
                if val == -1.0 {
                    return Ok(Some(other.e(UnaryOps::NEG, &[])?));
                }
            }
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// Reductions

/// Python's `arg * n` for a constant and an int count.
fn const_times(v: ConstValue, n: i64, what: &str) -> Result<ConstValue> {
    Ok(match v {
        ConstValue::Float(f) => ConstValue::Float(f * n as f64),
        other => {
            let i = other.as_i128();
            ConstValue::Int(i.checked_mul(n as i128).ok_or_else(|| {
                Error::InvalidArgument(format!("{what}: constant {i} * {n} overflows"))
            })?)
        }
    })
}

fn int_prod(shape: &[Sint]) -> i64 {
    shape.iter().filter_map(Node::as_int).product()
}

impl LazyBuffer {
    fn check_axis(&self, axis: &[usize], what: &str) -> Result<()> {
        ensure!(
            axis.iter().all(|&a| a < self.shape().len()),
            InvalidArgument,
            "{what}: axis args {axis:?} out of range for shape {}",
            render_shape(self.shape())
        );
        Ok(())
    }

    /// tinygrad's `_reduce_op`: reduce the (sorted, deduplicated) axes of size other than 1,
    /// keeping them as 1s.
    pub fn _reduce_op(&self, op: ReduceOps, axis: &[usize]) -> Result<LazyBuffer> {
        self.check_axis(axis, "_reduce_op")?;
        let mut ax: Vec<usize> = axis
            .iter()
            .copied()
            .filter(|&x| self.shape()[x] != 1)
            .collect();
        ax.sort_unstable();
        ax.dedup();
        if ax.is_empty() {
            return Ok(self.clone());
        }
        let new_shape: Vec<Sint> = self
            .shape()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if ax.contains(&i) {
                    Node::Num(1)
                } else {
                    s.clone()
                }
            })
            .collect();
        let spec = Spec::Base {
            op: Op::Reduce(op),
            arg: LbArg::Axis(ax),
            srcs: vec![self.clone()],
        };
        let st = ShapeTracker::from_shape(&new_shape)?;
        create_lazybuffer(
            self.device_arc(),
            st,
            self.dtype(),
            spec,
            lazycache_enabled(),
        )
    }

    /// tinygrad's `r(op, axis)`: a reduction over `axis` (kept as 1s), folding empty and constant
    /// inputs, and splitting large reductions in two (`SPLIT_REDUCEOP`).
    pub fn r(&self, op: ReduceOps, axis: &[usize]) -> Result<LazyBuffer> {
        self.check_axis(axis, "r")?;
        let new_shape: Vec<Sint> = self
            .shape()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if axis.contains(&i) {
                    Node::Num(1)
                } else {
                    s.clone()
                }
            })
            .collect();
        if self.size() == 0 && !new_shape.iter().any(|s| *s == 0) {
            let v = match op {
                ReduceOps::SUM => ConstValue::Float(0.0),
                ReduceOps::MAX => self.dtype().min(),
            };
            return self.const_with_shape(v, &new_shape);
        }
        if all_int(self.shape()) {
            if let Some(v) = unmasked_const(self) {
                let n = match op {
                    ReduceOps::SUM => axis
                        .iter()
                        .map(|&i| int_prod(&self.shape()[i..=i]))
                        .product(),
                    ReduceOps::MAX => 1,
                };
                return self.const_with_shape(const_times(v, n, "r")?, &new_shape);
            }
        }
        let shape = self.shape();
        if getenv("SPLIT_REDUCEOP", 1) == 0
            || !all_int(shape)
            || shape.iter().any(|s| *s == 0)
            || int_prod(shape) / int_prod(&new_shape).max(1)
                < getenv("REDUCEOP_SPLIT_THRESHOLD", 32768)
        {
            return self._reduce_op(op, axis);
        }
        self.split_reduce(op, axis, &new_shape)
    }

    /// The two-stage reduction: split the first reduce axis with a usable divisor into
    /// (divisor, rest), move the divisor last, reduce the original axes, then the divisor.
    fn split_reduce(
        &self,
        op: ReduceOps,
        axis: &[usize],
        new_shape: &[Sint],
    ) -> Result<LazyBuffer> {
        let real_strides = self.st().real_strides(true)?;
        let split_size = getenv("REDUCEOP_SPLIT_SIZE", 22).clamp(0, 62);
        let cap = 256.min((1i64 << split_size) / int_prod(new_shape).max(1));
        let shape: Vec<i64> = self.shape().iter().filter_map(Node::as_int).collect();
        let candidate = axis.iter().find_map(|&i| {
            let stride_ok = !matches!(&real_strides[i], Some(s) if *s == 0);
            (8..=cap)
                .rev()
                .find(|&x| stride_ok && shape[i] % x == 0)
                .map(|x| (i, x))
        });
        let Some((dim, divisor)) = candidate else {
            return self._reduce_op(op, axis);
        };
        let mut splitted: Vec<Sint> = self.shape()[..dim].to_vec();
        splitted.push(Node::Num(divisor));
        splitted.push(Node::Num(shape[dim] / divisor));
        splitted.extend_from_slice(&self.shape()[dim + 1..]);
        let order: Vec<usize> = (0..splitted.len())
            .filter(|&x| x != dim)
            .chain([dim])
            .collect();
        let moved = self.reshape(&splitted)?.permute(&order)?;
        if debug() >= 3 {
            println!(
                "split {divisor}: {} -> {} -> {}",
                render_shape(self.shape()),
                render_shape(moved.shape()),
                render_shape(new_shape)
            );
        }
        moved
            ._reduce_op(op, axis)?
            ._reduce_op(op, &[new_shape.len()])?
            .reshape(new_shape)
    }
}

// ---------------------------------------------------------------------------------------------
// Movement

impl LazyBuffer {
    /// tinygrad's `_view`: this node's data seen through `new_st` (a ShapeTracker over the base).
    /// An empty result or an all-masked last view is CONST 0; a contiguous view of the whole
    /// base is the base itself.
    pub fn _view(&self, new_st: ShapeTracker) -> Result<LazyBuffer> {
        let masked_out = new_st
            .views
            .last()
            .and_then(|v| v.mask.as_ref())
            .is_some_and(|m| m.iter().any(|(b, e)| e.try_sub(b).is_ok_and(|d| d == 0)));
        if self.size() == 0 || masked_out {
            return self.const_with_shape(0i64, new_st.shape());
        }
        let base = self.base();
        if new_st.contiguous() && base.shape() == new_st.shape() {
            return Ok(base.clone());
        }
        let spec = Spec::View(base.clone());
        create_lazybuffer(
            self.device_arc(),
            new_st,
            self.dtype(),
            spec,
            lazycache_enabled(),
        )
    }

    pub fn reshape(&self, shape: &[Sint]) -> Result<LazyBuffer> {
        let bad = shape.iter().any(|s| s.as_int().is_some_and(|v| v < 0));
        let mismatch =
            all_int(shape) && all_int(self.shape()) && int_prod(shape) != int_prod(self.shape());
        ensure!(
            !bad && !mismatch,
            InvalidArgument,
            "reshape: cannot reshape {} to {}",
            render_shape(self.shape()),
            render_shape(shape)
        );
        self._view(self.st().reshape(shape)?)
    }
    pub fn pad(&self, arg: &[(Sint, Sint)]) -> Result<LazyBuffer> {
        self._view(self.st().pad(arg)?)
    }
    pub fn expand(&self, shape: &[Sint]) -> Result<LazyBuffer> {
        self._view(self.st().expand(shape)?)
    }
    pub fn permute(&self, order: &[usize]) -> Result<LazyBuffer> {
        self._view(self.st().permute(order)?)
    }
    pub fn shrink(&self, arg: &[(Sint, Sint)]) -> Result<LazyBuffer> {
        self._view(self.st().shrink(arg)?)
    }
    pub fn stride(&self, arg: &[i64]) -> Result<LazyBuffer> {
        self._view(self.st().stride(arg)?)
    }
}

// ---------------------------------------------------------------------------------------------
// contiguous, cast, copy, assign

impl LazyBuffer {
    /// tinygrad's `contiguous()` (buffer views allowed).
    pub fn contiguous(&self) -> Result<LazyBuffer> {
        self.contiguous_with(true)
    }

    /// tinygrad's `contiguous(allow_buffer_view)`: a VIEW (when allowed and possible) or a
    /// CONTIGUOUS of a non-contiguous, partial or constant node, recorded as the base's
    /// `contiguous_child` when the view is invertible; an already contiguous node is returned
    /// with its base marked `forced_realize`.
    pub fn contiguous_with(&self, allow_buffer_view: bool) -> Result<LazyBuffer> {
        let base = self.base();
        if !self.st().contiguous() || self.size() != base.size() || self.is_unrealized_const() {
            let op = if allow_buffer_view && self.can_view() {
                LoadOps::VIEW
            } else {
                LoadOps::CONTIGUOUS
            };
            let ret = self.e(op, &[])?;
            if let Some(sti) = self.st().invert(base.shape())? {
                base.set_contiguous_child(&ret, sti);
            }
            return Ok(ret);
        }
        base.set_forced_realize();
        Ok(self.clone())
    }

    /// tinygrad's `cast(dtype, bitcast)`.
    pub fn cast(&self, dtype: DType, bitcast: bool) -> Result<LazyBuffer> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        let disk = self.device().starts_with("DISK");
        ensure!(
            !disk || bitcast,
            InvalidArgument,
            "attempted to cast disk buffer {self:?} to {dtype:?} (bitcast only)"
        );
        if !bitcast {
            if let Some(v) = unmasked_const(self) {
                let arg = LbArg::Const(ConstArg::Value(v.as_const(dtype)));
                let spec = Spec::Base {
                    op: Op::Load(LoadOps::CONST),
                    arg,
                    srcs: vec![],
                };
                return create_lazybuffer(self.device_arc(), self.st().clone(), dtype, spec, true);
            }
        }
        let mut new_shape = self.shape().to_vec();
        let (from_size, to_size) = (self.dtype().itemsize(), dtype.itemsize());
        if bitcast && from_size != to_size {
            new_shape = self.bitcast_shape(dtype, disk)?;
        } else if getenv("CAST_BEFORE_VIEW", 1) != 0 && to_size <= from_size && !self.is_base() {
            return self.base().cast(dtype, bitcast)?._view(self.st().clone());
        }
        let op = match (bitcast, self.can_view()) {
            (true, true) => Op::Load(LoadOps::VIEW),
            (true, false) => Op::Unary(UnaryOps::BITCAST),
            (false, _) => Op::Unary(UnaryOps::CAST),
        };
        let spec = Spec::Base {
            op,
            arg: LbArg::DType(dtype),
            srcs: vec![self.clone()],
        };
        let st = ShapeTracker::from_shape(&new_shape)?;
        create_lazybuffer(self.device_arc(), st, dtype, spec, lazycache_enabled())
    }

    /// The shape of a size-changing bitcast (DISK only): the last dim rescaled.
    fn bitcast_shape(&self, dtype: DType, disk: bool) -> Result<Vec<Sint>> {
        let what = format!("bitcast of {self:?} to {dtype:?}");
        ensure!(
            disk,
            InvalidArgument,
            "{what}: shape changing bitcast only supported on DISK right now"
        );
        ensure!(
            all_int(self.shape()),
            InvalidArgument,
            "{what}: shape changing bitcast with symbolic shape isn't supported yet"
        );
        let mut shape = self.shape().to_vec();
        let last = shape.last().and_then(Node::as_int).unwrap_or(1);
        let bytes = last * self.dtype().itemsize() as i64;
        let to = dtype.itemsize() as i64;
        ensure!(
            bytes % to == 0,
            InvalidArgument,
            "{what}: unsupported size in bitcast"
        );
        match shape.last_mut() {
            Some(l) => *l = Node::Num(bytes / to),
            None => bail!(InvalidArgument, "{what}: unsupported size in bitcast"),
        }
        Ok(shape)
    }

    fn _copy(&self, device: &Arc<str>) -> Result<LazyBuffer> {
        let spec = Spec::Base {
            op: Op::Load(LoadOps::COPY),
            arg: LbArg::Nbytes(self.buffer().nbytes()),
            srcs: vec![self.clone()],
        };
        let st = ShapeTracker::from_shape(self.shape())?;
        create_lazybuffer(device, st, self.dtype(), spec, false)
    }

    /// tinygrad's `copy_to_device(device, force)`: nothing on the same device; a double copy
    /// collapses (unless `force`); constants are recreated on the target; a partial view is made
    /// contiguous first; otherwise the base is copied and the view reapplied on the target.
    pub fn copy_to_device(&self, device: &str, force: bool) -> Result<LazyBuffer> {
        let device = canonicalize(device);
        if self.device() == device {
            return Ok(self.clone());
        }
        let device: Arc<str> = Arc::from(device);
        let base = self.base();
        if !force
            && self.st().contiguous()
            && self.size() == base.size()
            && !base.is_realized()
            && base.op() == Op::Load(LoadOps::COPY)
        {
            if let Some(src) = base.srcs().and_then(|s| s.first().cloned()) {
                return src.copy_to_device(&device, false)?.reshape(self.shape());
            }
        }
        if self.is_unrealized_const() {
            let arg = base.arg().clone();
            let c = loadop_on(
                &device,
                LoadOps::CONST,
                &[],
                self.dtype(),
                arg,
                vec![],
                true,
            )?;
            return c._view(self.st().clone());
        }
        if py_lt(
            &sint_prod(self.st().shape())?,
            &sint_prod(base.st().shape())?,
        )? {
            return self.contiguous()?._copy(&device);
        }
        base._copy(&device)?._view(self.st().clone())
    }

    /// tinygrad's `assign(x)`: an ASSIGN base writing `x` into this (realized) node's buffer.
    pub fn assign(&self, x: &LazyBuffer) -> Result<LazyBuffer> {
        ensure!(
            x.size() == self.size(),
            InvalidArgument,
            "assign target must have same size {} != {} (target {self:?}, value {x:?})",
            self.size(),
            x.size()
        );
        let arg = if self.st().contiguous() {
            LbArg::None
        } else {
            LbArg::AssignView(self.st().clone())
        };
        let srcs = vec![x.clone(), self.base().clone()];
        let shape = self.shape().to_vec();
        loadop_on(
            self.device_arc(),
            LoadOps::ASSIGN,
            &shape,
            self.dtype(),
            arg,
            srcs,
            false,
        )
    }
}
