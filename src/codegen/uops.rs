//! UOps: the linear, typed IR that kernels are lowered to (tinygrad 0.9.1 `codegen/uops.py`).
//!
//! Owns: the `UOps` enum (its declaration order is the toposort tie-break order), the UOp node
//! ([`UOp`], an immutable, structurally compared and hashed DAG node behind an `Arc`), and the
//! argument record [`UArg`]. The graph algorithms (rewrite, toposort, verification) live beside it.
//!
//! Not guaranteed: a `UOp` built by hand is not verified until `type_verify` runs.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::dtype::{ConstValue, DType};
use crate::ops::Op;

/// The UOp kinds of 0.9.1, in their enum order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UOps {
    SINK,
    VAR,
    DEFINE_GLOBAL,
    DEFINE_VAR,
    DEFINE_LOCAL,
    DEFINE_ACC,
    CONST,
    SPECIAL,
    NOOP,
    UNMUL,
    GEP,
    CAST,
    BITCAST,
    ALU,
    WMMA,
    LOAD,
    STORE,
    PHI,
    BARRIER,
    IF,
    RANGE,
    ENDRANGE,
    ENDIF,
}

/// The WMMA argument: (name, dims (N, M, K), dtype_in, dtype_out, per-thread sizes, device).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WmmaArg {
    pub name: String,
    pub dims: [usize; 3],
    pub dtype_in: DType,
    pub dtype_out: DType,
    pub upcast_sizes: Vec<usize>,
    pub device: String,
}

/// The `arg` of a UOp.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UArg {
    None,
    /// CONST value (already coerced to the UOp's dtype).
    Const(ConstValue),
    /// ALU op.
    Alu(Op),
    /// DEFINE_GLOBAL: buffer index, is an output.
    Global {
        idx: usize,
        is_output: bool,
    },
    /// DEFINE_VAR: the (unbound) variable name and its bounds.
    Var {
        name: String,
        min: i64,
        max: i64,
    },
    /// DEFINE_LOCAL: name and element count.
    Local {
        name: String,
        size: usize,
    },
    /// DEFINE_ACC: (reduce buffer index, accumulator index).
    Acc {
        buf: usize,
        idx: usize,
    },
    /// SPECIAL: launch axis, name (`gidx0`, `lidx1`), size (the maximum for a symbolic size).
    Special {
        axis: usize,
        name: String,
        size: i64,
    },
    /// RANGE: loop depth, index among ranges, is a reduce loop.
    Range {
        depth: usize,
        idx: usize,
        is_reduce: bool,
    },
    /// GEP: lane index.
    Gep(usize),
    /// WMMA.
    Wmma(Box<WmmaArg>),
}

/// The data of one UOp node.
pub struct UOpInner {
    pub op: UOps,
    pub dtype: Option<DType>,
    pub src: Vec<UOp>,
    pub arg: UArg,
    hash: u64,
}

/// A UOp: cheap to clone, compared and hashed by structure (op, dtype, sources, arg).
#[derive(Clone)]
pub struct UOp(Arc<UOpInner>);

impl UOp {
    pub fn new(op: UOps, dtype: Option<DType>, src: Vec<UOp>, arg: UArg) -> UOp {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        op.hash(&mut h);
        dtype.hash(&mut h);
        for s in &src {
            s.0.hash.hash(&mut h);
        }
        arg.hash(&mut h);
        let hash = h.finish();
        UOp(Arc::new(UOpInner {
            op,
            dtype,
            src,
            arg,
            hash,
        }))
    }

    /// A CONST of `dtype` holding `v` coerced to the dtype's Python class.
    pub fn cnst(dtype: DType, v: impl Into<ConstValue>) -> UOp {
        let v = v.into().as_const(dtype);
        UOp::new(UOps::CONST, Some(dtype), vec![], UArg::Const(v))
    }

    /// An ALU node whose output dtype is `dtype`.
    pub fn alu(op: impl Into<Op>, dtype: DType, src: Vec<UOp>) -> UOp {
        UOp::new(UOps::ALU, Some(dtype), src, UArg::Alu(op.into()))
    }

    pub fn op(&self) -> UOps {
        self.0.op
    }
    pub fn dtype(&self) -> Option<DType> {
        self.0.dtype
    }
    pub fn src(&self) -> &[UOp] {
        &self.0.src
    }
    pub fn arg(&self) -> &UArg {
        &self.0.arg
    }
    /// The ALU op, when this is an ALU node.
    pub fn alu_op(&self) -> Option<Op> {
        match (&self.0.op, &self.0.arg) {
            (UOps::ALU, UArg::Alu(o)) => Some(*o),
            _ => None,
        }
    }
    /// The constant, when this is a CONST node.
    pub fn const_value(&self) -> Option<ConstValue> {
        match (&self.0.op, &self.0.arg) {
            (UOps::CONST, UArg::Const(v)) => Some(*v),
            _ => None,
        }
    }
    /// Identity (same allocation), as opposed to structural equality.
    pub fn ptr_eq(&self, other: &UOp) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// The structural hash (stable within a process).
    pub fn structural_hash(&self) -> u64 {
        self.0.hash
    }
}

impl PartialEq for UOp {
    fn eq(&self, other: &UOp) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        let (a, b) = (&*self.0, &*other.0);
        a.hash == b.hash && a.op == b.op && a.dtype == b.dtype && a.arg == b.arg && a.src == b.src
    }
}
impl Eq for UOp {}

impl Hash for UOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash.hash(state);
    }
}

impl fmt::Debug for UOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UOp({:?}, {:?}, arg={:?}, src=(",
            self.0.op, self.0.dtype, self.0.arg
        )?;
        for (i, s) in self.0.src.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{:?}", s.0.op)?;
        }
        write!(f, "))")
    }
}
