//! A reference evaluator for kernel ASTs: the expected results the linearized kernels are tested
//! against.
//!
//! It walks every element of each output's shape, evaluates the LazyOp tree there with plain
//! integer index arithmetic over the ShapeTracker's views (independent of `expr_idxs` and of the
//! linearizer), reduces by looping over the reduced axes in order, computes every ALU op with
//! [`crate::ops::exec_alu`] (tinygrad's Python semantics, truncated to the op's dtype), and writes
//! the value, encoded in the output dtype, where the output's ShapeTracker puts it. Masked-out
//! reads are 0.
//!
//! Not guaranteed: speed (one tree walk per element); a reduce is accumulated in index order, so
//! float sums can differ in the last bits from a kernel that reorders them (unroll, group).

use crate::dtype::{ConstValue, DType};
use crate::ops::{
    bitcast_const, const_from_bits, const_to_bits, exec_alu, BufferOps, ConstArg, LazyOp,
    LazyOpArg, Op, ReduceOps, UnaryOps,
};
use crate::shape::{sym_infer, ShapeTracker, Sint, VarVals, View};
use crate::{bail, ensure, Error, Result};

/// Evaluate the kernel `ast` (STORE roots) over `bufs` (indexed by buffer index; outputs must be
/// allocated at their full size), with `var_vals` for symbolic shapes and constants.
pub fn eval_kernel(ast: &[LazyOp], bufs: &mut [Vec<u8>], var_vals: &VarVals) -> Result<()> {
    crate::ops::verify_lazyop(ast)?;
    let inputs: Vec<Vec<u8>> = bufs.to_vec();
    let ev = Eval {
        bufs: &inputs,
        var_vals,
    };
    let mut writes: Vec<(usize, usize, Vec<u8>)> = vec![];
    for root in ast {
        let (Some(m), [src]) = (root.membuffer(), root.src()) else {
            bail!(Codegen, "eval_kernel: a root is not a STORE of one value");
        };
        let shape = ev.ints(m.st.shape())?;
        let size = m.dtype.itemsize();
        for idx in all_indices(&shape) {
            let Some(at) = ev.st_index(&m.st, &idx)? else {
                continue;
            };
            let v = ev.eval(src, &idx)?.truncate(m.dtype);
            let bits = const_to_bits(v, m.dtype.scalar);
            writes.push((m.idx, at * size, bits.to_le_bytes()[..size].to_vec()));
        }
    }
    for (b, off, bytes) in writes {
        let Some(dst) = bufs
            .get_mut(b)
            .and_then(|d| d.get_mut(off..off + bytes.len()))
        else {
            bail!(
                Runtime,
                "eval_kernel: store at byte {off} of buffer {b} is out of bounds"
            );
        };
        dst.copy_from_slice(&bytes);
    }
    Ok(())
}

/// Every multi-index of `shape`, row-major (the last dim fastest).
pub fn all_indices(shape: &[i64]) -> Vec<Vec<i64>> {
    let mut out: Vec<Vec<i64>> = vec![vec![]];
    for &d in shape {
        let mut next = Vec::with_capacity(out.len() * d.max(0) as usize);
        for p in &out {
            for i in 0..d {
                let mut q = p.clone();
                q.push(i);
                next.push(q);
            }
        }
        out = next;
    }
    out
}

struct Eval<'a> {
    bufs: &'a [Vec<u8>],
    var_vals: &'a VarVals,
}

impl Eval<'_> {
    fn int(&self, x: &Sint) -> Result<i64> {
        sym_infer(x, self.var_vals)
    }

    fn ints(&self, xs: &[Sint]) -> Result<Vec<i64>> {
        xs.iter().map(|x| self.int(x)).collect()
    }

    /// The buffer element of view `v` at `idx`, or `None` when masked out.
    fn view_index(&self, v: &View, idx: &[i64]) -> Result<Option<i64>> {
        let mut at = self.int(&v.offset)?;
        for (d, &i) in idx.iter().enumerate() {
            if let Some(m) = &v.mask {
                let (b, e) = (self.int(&m[d].0)?, self.int(&m[d].1)?);
                if i < b || i >= e {
                    return Ok(None);
                }
            }
            at += i * self.int(&v.strides[d])?;
        }
        Ok(Some(at))
    }

    /// The buffer element of `st` at `idx` (views applied from the last to the first).
    fn st_index(&self, st: &ShapeTracker, idx: &[i64]) -> Result<Option<usize>> {
        let Some(last) = st.views.last() else {
            bail!(Codegen, "eval: ShapeTracker without views");
        };
        ensure!(
            idx.len() == last.shape.len(),
            Codegen,
            "eval: index {idx:?} for shape {:?}",
            last.shape
        );
        let Some(mut flat) = self.view_index(last, idx)? else {
            return Ok(None);
        };
        for v in st.views[..st.views.len() - 1].iter().rev() {
            let shape = self.ints(&v.shape)?;
            let mut unr = vec![0i64; shape.len()];
            let mut rest = flat;
            for d in (0..shape.len()).rev() {
                unr[d] = rest.rem_euclid(shape[d].max(1));
                rest = rest.div_euclid(shape[d].max(1));
            }
            match self.view_index(v, &unr)? {
                Some(x) => flat = x,
                None => return Ok(None),
            }
        }
        usize::try_from(flat)
            .map(Some)
            .map_err(|_| Error::Runtime(format!("eval: negative buffer index {flat}")))
    }

    fn read(&self, buf: usize, dt: DType, at: usize) -> Result<ConstValue> {
        let size = dt.itemsize();
        let Some(bytes) = self
            .bufs
            .get(buf)
            .and_then(|b| b.get(at * size..(at + 1) * size))
        else {
            bail!(
                Runtime,
                "eval: element {at} of buffer {buf} is out of bounds"
            );
        };
        let mut raw = [0u8; 8];
        raw[..size].copy_from_slice(bytes);
        Ok(const_from_bits(u64::from_le_bytes(raw), dt.scalar))
    }

    fn eval(&self, x: &LazyOp, idx: &[i64]) -> Result<ConstValue> {
        let dt = x.dtype()?;
        match (x.op(), x.arg()) {
            (Op::Buffer(BufferOps::LOAD), LazyOpArg::Mem(m)) => match self.st_index(&m.st, idx)? {
                Some(at) => self.read(m.idx, m.dtype, at),
                None => Ok(ConstValue::Int(0).as_const(dt)),
            },
            (Op::Buffer(BufferOps::CONST), LazyOpArg::Const(c)) => {
                if self.st_index(&c.st, idx)?.is_none() {
                    return Ok(ConstValue::Int(0).as_const(dt));
                }
                Ok(match &c.val {
                    ConstArg::Value(v) => v.truncate(dt),
                    ConstArg::Var(v) => ConstValue::Int(self.int(v)? as i128).truncate(dt),
                })
            }
            (Op::Reduce(r), LazyOpArg::Axis(axis)) => self.reduce(x, r, axis, idx),
            (Op::Unary(UnaryOps::CAST), _) => Ok(self.eval(&x.src()[0], idx)?.truncate(dt)),
            (Op::Unary(UnaryOps::BITCAST), _) => {
                let s = &x.src()[0];
                bitcast_const(self.eval(s, idx)?, s.dtype()?, dt)
            }
            (op, _) if op.is_alu() => {
                let vals: Vec<ConstValue> = x
                    .src()
                    .iter()
                    .map(|s| self.eval(s, idx))
                    .collect::<Result<_>>()?;
                exec_alu(op, dt, &vals)
            }
            (op, _) => bail!(Codegen, "eval: {} cannot be evaluated", op.name()),
        }
    }

    fn reduce(&self, x: &LazyOp, r: ReduceOps, axis: &[usize], idx: &[i64]) -> Result<ConstValue> {
        let dt = x.dtype()?;
        let [src] = x.src() else {
            bail!(Codegen, "eval: a reduce takes one source");
        };
        let shape = self.ints(&shape_of(src)?)?;
        let red: Vec<i64> = axis
            .iter()
            .map(|&a| shape.get(a).copied().unwrap_or(1))
            .collect();
        let (mut acc, op) = match r {
            ReduceOps::SUM => (ConstValue::Int(0).as_const(dt), crate::ops::BinaryOps::ADD),
            ReduceOps::MAX => (dt.min(), crate::ops::BinaryOps::MAX),
        };
        let mut full = idx.to_vec();
        for sub in all_indices(&red) {
            for (k, &a) in axis.iter().enumerate() {
                full[a] = sub[k];
            }
            let v = self.eval(src, &full)?;
            acc = exec_alu(Op::Binary(op), dt, &[v, acc])?;
        }
        Ok(acc)
    }
}

/// The shape a node produces (buffer ops: their ShapeTracker; reduces: the reduced axes 1).
pub fn shape_of(x: &LazyOp) -> Result<Vec<Sint>> {
    if let Some(st) = x.st() {
        return Ok(st.shape().to_vec());
    }
    let Some(first) = x.src().first() else {
        bail!(Codegen, "shape_of: {} has no source", x.op().name());
    };
    let mut s = shape_of(first)?;
    if let Some(axis) = x.axis() {
        for &a in axis {
            if let Some(d) = s.get_mut(a) {
                *d = Sint::from(1i64);
            }
        }
    }
    Ok(s)
}

/// The bytes buffer `idx` must have for every load and store of it in `ast` (1 + the largest
/// element reached, at least one element), or 0 when the AST never touches it.
pub fn buffer_nbytes(ast: &[LazyOp], idx: usize, var_vals: &VarVals) -> Result<usize> {
    let mut elems = 0i64;
    let mut dt = None;
    for root in ast {
        for x in root.lazyops() {
            let Some(m) = x.membuffer() else { continue };
            if m.idx != idx {
                continue;
            }
            dt = Some(m.dtype);
            let shape: Vec<i64> =
                m.st.shape()
                    .iter()
                    .map(|s| sym_infer(s, var_vals))
                    .collect::<Result<_>>()?;
            let ev = Eval {
                bufs: &[],
                var_vals,
            };
            for i in all_indices(&shape) {
                if let Some(at) = ev.st_index(&m.st, &i)? {
                    elems = elems.max(at as i64 + 1);
                }
            }
        }
    }
    Ok(dt.map_or(0, |d| d.itemsize() * elems.max(1) as usize))
}
