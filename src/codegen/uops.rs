//! UOps: the linear, typed IR that kernels are lowered to (tinygrad 0.9.1 `codegen/uops.py`).
//!
//! Owns: the `UOps` enum (its declaration order is the toposort tie-break order), the UOp node
//! ([`UOp`], an immutable, structurally compared and hashed DAG node behind an `Arc`), the
//! argument record [`UArg`], one constructor per UOp kind (`UOp::define_global`, `UOp::range`,
//! `UOp::load_gated`, `UOp::phi`, ...) and tinygrad's operator helpers (`add`, `sub`, `mul`, `lt`,
//! `max`, `min`, ... where a number operand becomes a CONST of the other side's dtype). The graph
//! algorithms (pattern rewrite, toposort, verification, serialization) live beside it.
//!
//! Nodes are hash-consed per thread (`uops/intern.rs`, beyond 0.9.1): building a node equal to a
//! live one built on the same thread returns that node.
//! A node holds up to four sources inline ([`Srcs`], `uops/srcs.rs`, beyond 0.9.1): constructors
//! take an array, a `Vec` or a collected iterator.
//!
//! Not guaranteed: a `UOp` built by hand is not verified until `type_verify` runs; that equal
//! nodes are one allocation (see `uops/intern.rs`: equality stays structural).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use crate::dtype::dtypes;
use crate::dtype::{ConstValue, DType};
use crate::helpers::{fmix64, FxHasher};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};

mod intern;
mod srcs;

pub use srcs::Srcs;

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

impl UOps {
    /// Every kind, in enum order.
    pub const ALL: [UOps; 23] = [
        UOps::SINK,
        UOps::VAR,
        UOps::DEFINE_GLOBAL,
        UOps::DEFINE_VAR,
        UOps::DEFINE_LOCAL,
        UOps::DEFINE_ACC,
        UOps::CONST,
        UOps::SPECIAL,
        UOps::NOOP,
        UOps::UNMUL,
        UOps::GEP,
        UOps::CAST,
        UOps::BITCAST,
        UOps::ALU,
        UOps::WMMA,
        UOps::LOAD,
        UOps::STORE,
        UOps::PHI,
        UOps::BARRIER,
        UOps::IF,
        UOps::RANGE,
        UOps::ENDRANGE,
        UOps::ENDIF,
    ];

    /// The bare name (`DEFINE_GLOBAL`).
    pub fn name(self) -> &'static str {
        match self {
            UOps::SINK => "SINK",
            UOps::VAR => "VAR",
            UOps::DEFINE_GLOBAL => "DEFINE_GLOBAL",
            UOps::DEFINE_VAR => "DEFINE_VAR",
            UOps::DEFINE_LOCAL => "DEFINE_LOCAL",
            UOps::DEFINE_ACC => "DEFINE_ACC",
            UOps::CONST => "CONST",
            UOps::SPECIAL => "SPECIAL",
            UOps::NOOP => "NOOP",
            UOps::UNMUL => "UNMUL",
            UOps::GEP => "GEP",
            UOps::CAST => "CAST",
            UOps::BITCAST => "BITCAST",
            UOps::ALU => "ALU",
            UOps::WMMA => "WMMA",
            UOps::LOAD => "LOAD",
            UOps::STORE => "STORE",
            UOps::PHI => "PHI",
            UOps::BARRIER => "BARRIER",
            UOps::IF => "IF",
            UOps::RANGE => "RANGE",
            UOps::ENDRANGE => "ENDRANGE",
            UOps::ENDIF => "ENDIF",
        }
    }

    /// Parse a bare name (`DEFINE_GLOBAL`) or tinygrad's printed form (`UOps.DEFINE_GLOBAL`).
    pub fn from_name(name: &str) -> Option<UOps> {
        let bare = name.strip_prefix("UOps.").unwrap_or(name);
        UOps::ALL.iter().copied().find(|u| u.name() == bare)
    }
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
    pub src: Srcs,
    pub arg: UArg,
    hash: u64,
    /// One bit per RANGE this node depends on (itself included), chosen by the RANGE's structural
    /// hash: a clear bit proves the node does not depend on that loop (see `UOp::has_parent`).
    ranges: u64,
    /// The pattern pre-filter's keys of this node (`pattern/prefilter.rs`)...
    key: u64,
    /// ... and of its direct sources, or-ed: computed once here instead of at every rewrite.
    src_keys: u64,
}

/// A hasher for maps and sets keyed by [`UOp`]: a node's structural hash is already well mixed, so
/// it is used as is instead of being hashed again.
#[derive(Clone, Copy, Debug, Default)]
pub struct UOpHasher(u64);

impl Hasher for UOpHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The bit of the `ranges` summary that stands for a RANGE of this structural hash.
fn range_bit(hash: u64) -> u64 {
    1 << (hash >> 58)
}

/// A `HashMap` keyed by UOp with [`UOpHasher`].
pub type UOpMap<V> = HashMap<UOp, V, BuildHasherDefault<UOpHasher>>;

/// A UOp: cheap to clone, compared and hashed by structure (op, dtype, sources, arg).
#[derive(Clone)]
pub struct UOp(Arc<UOpInner>);

impl UOp {
    pub fn new(op: UOps, dtype: Option<DType>, src: impl Into<Srcs>, arg: UArg) -> UOp {
        let src: Srcs = src.into();
        let mut h = FxHasher::default();
        op.hash(&mut h);
        dtype.hash(&mut h);
        h.write_usize(src.len());
        for s in src.iter() {
            h.write_u64(s.0.hash);
        }
        arg.hash(&mut h);
        let hash = fmix64(h.finish());
        let (mut ranges, mut src_keys) = (0, 0);
        for s in src.iter() {
            ranges |= s.0.ranges;
            src_keys |= s.0.key;
        }
        if op == UOps::RANGE {
            ranges |= range_bit(hash);
        }
        let key = crate::codegen::pattern::node_key(op, &arg);
        UOp(intern::intern(UOpInner {
            op,
            dtype,
            src,
            arg,
            hash,
            ranges,
            key,
            src_keys,
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

    /// A CONST whose dtype may be unknown (tinygrad's `UOp.const(None, v)`, used in patterns and
    /// by rules that copy the dtype of a node that has none).
    pub fn const_opt(dtype: Option<DType>, v: impl Into<ConstValue>) -> UOp {
        let v = v.into();
        let v = match dtype {
            Some(d) => v.as_const(d),
            None => v,
        };
        UOp::new(UOps::CONST, dtype, vec![], UArg::Const(v))
    }

    /// tinygrad's `UOp.alu(op, *src)`: the output dtype is bool for CMPLT/CMPNE, else the dtype of
    /// the last source.
    pub fn alu_auto(op: impl Into<Op>, src: impl Into<Srcs>) -> UOp {
        let op = op.into();
        let src: Srcs = src.into();
        let dtype = if matches!(op, Op::Binary(BinaryOps::CMPLT | BinaryOps::CMPNE)) {
            Some(dtypes::bool)
        } else {
            src.last().and_then(|s| s.dtype())
        };
        UOp::new(UOps::ALU, dtype, src, UArg::Alu(op))
    }

    /// The SINK holding the kernel's roots (stores).
    pub fn sink(src: Vec<UOp>) -> UOp {
        UOp::new(UOps::SINK, None, src, UArg::None)
    }

    /// A kernel buffer parameter: element dtype `dtype` (stored as its pointer form), buffer index,
    /// written by the kernel or not.
    pub fn define_global(dtype: DType, idx: usize, is_output: bool) -> UOp {
        UOp::new(
            UOps::DEFINE_GLOBAL,
            Some(dtype.ptr()),
            vec![],
            UArg::Global { idx, is_output },
        )
    }

    /// An integer kernel parameter (a bound symbolic variable) with its bounds.
    pub fn define_var(name: &str, min: i64, max: i64) -> UOp {
        let arg = UArg::Var {
            name: name.to_string(),
            min,
            max,
        };
        UOp::new(UOps::DEFINE_VAR, Some(dtypes::int32), vec![], arg)
    }

    /// A workgroup-shared buffer of `size` elements of `dtype`.
    pub fn define_local(dtype: DType, name: &str, size: usize) -> UOp {
        let arg = UArg::Local {
            name: name.to_string(),
            size,
        };
        UOp::new(UOps::DEFINE_LOCAL, Some(dtype.ptr()), vec![], arg)
    }

    /// An accumulator of `dtype` starting at `init`, hoisted above the loops in `loops`; `buf` is
    /// the reduce index and `idx` the accumulator number.
    pub fn define_acc(
        dtype: DType,
        init: impl Into<ConstValue>,
        loops: &[UOp],
        buf: usize,
        idx: usize,
    ) -> UOp {
        let mut src = vec![UOp::cnst(dtype.scalar(), init)];
        src.extend(loops.iter().cloned());
        UOp::new(UOps::DEFINE_ACC, Some(dtype), src, UArg::Acc { buf, idx })
    }

    /// A launch index (`gidx0`, `lidx1`, or `idx0` for a global id) on launch axis `axis` with
    /// `size` threads or groups.
    pub fn special(axis: usize, name: &str, size: i64) -> UOp {
        let arg = UArg::Special {
            axis,
            name: name.to_string(),
            size,
        };
        UOp::new(UOps::SPECIAL, Some(dtypes::int32), vec![], arg)
    }

    /// A loop `for idx in start..end`, at loop depth `depth`, number `idx` among its siblings.
    pub fn range(start: UOp, end: UOp, depth: usize, idx: usize, is_reduce: bool) -> UOp {
        let arg = UArg::Range {
            depth,
            idx,
            is_reduce,
        };
        UOp::new(UOps::RANGE, Some(dtypes::int32), [start, end], arg)
    }

    /// A loop over the constant range `start..end`.
    pub fn range_const(start: i64, end: i64, depth: usize, idx: usize, is_reduce: bool) -> UOp {
        let (s, e) = (
            UOp::cnst(dtypes::int32, start),
            UOp::cnst(dtypes::int32, end),
        );
        UOp::range(s, e, depth, idx, is_reduce)
    }

    /// `buf[idx]` as `dtype` (a vector dtype loads consecutive elements).
    pub fn load(buf: &UOp, idx: &UOp, dtype: DType) -> UOp {
        UOp::new(
            UOps::LOAD,
            Some(dtype),
            [buf.clone(), idx.clone()],
            UArg::None,
        )
    }

    /// `gate ? buf[idx] : alt` (the load does not happen when the gate is false).
    pub fn load_gated(buf: &UOp, idx: &UOp, gate: &UOp, alt: &UOp, dtype: DType) -> UOp {
        let src = [buf.clone(), idx.clone(), gate.clone(), alt.clone()];
        UOp::new(UOps::LOAD, Some(dtype), src, UArg::None)
    }

    /// A load of local memory ordered after `barrier` (a BARRIER or IF), optionally gated.
    pub fn load_after(
        buf: &UOp,
        idx: &UOp,
        gate: Option<(&UOp, &UOp)>,
        barrier: &UOp,
        dtype: DType,
    ) -> UOp {
        let mut src = vec![buf.clone(), idx.clone()];
        if let Some((g, alt)) = gate {
            src.push(g.clone());
            src.push(alt.clone());
        }
        src.push(barrier.clone());
        UOp::new(UOps::LOAD, Some(dtype), src, UArg::None)
    }

    /// `buf[idx] = val`.
    pub fn store(buf: &UOp, idx: &UOp, val: &UOp) -> UOp {
        UOp::new(
            UOps::STORE,
            None,
            [buf.clone(), idx.clone(), val.clone()],
            UArg::None,
        )
    }

    /// `if (gate) buf[idx] = val`.
    pub fn store_gated(buf: &UOp, idx: &UOp, val: &UOp, gate: &UOp) -> UOp {
        let src = [buf.clone(), idx.clone(), val.clone(), gate.clone()];
        UOp::new(UOps::STORE, None, src, UArg::None)
    }

    /// The loop-carried update `acc = val`.
    pub fn phi(acc: &UOp, val: &UOp) -> UOp {
        UOp::new(
            UOps::PHI,
            acc.dtype(),
            [acc.clone(), val.clone()],
            UArg::None,
        )
    }

    /// Lane `lane` of the vector `x`, as `dtype`.
    pub fn gep(x: &UOp, lane: usize, dtype: DType) -> UOp {
        UOp::new(UOps::GEP, Some(dtype), [x.clone()], UArg::Gep(lane))
    }

    /// A value conversion to `dtype`.
    pub fn cast(&self, dtype: DType) -> UOp {
        UOp::new(UOps::CAST, Some(dtype), [self.clone()], UArg::None)
    }

    /// A CAST whose dtype may be unknown (patterns: `x.cast()`).
    pub fn cast_opt(&self, dtype: Option<DType>) -> UOp {
        UOp::new(UOps::CAST, dtype, [self.clone()], UArg::None)
    }

    /// A vector built from scalars (a CAST with one source per lane).
    pub fn vectorize(src: Vec<UOp>, dtype: DType) -> UOp {
        UOp::new(UOps::CAST, Some(dtype), src, UArg::None)
    }

    /// A reinterpretation of the bits of `self` as `dtype` (same size).
    pub fn bitcast(&self, dtype: DType) -> UOp {
        UOp::new(UOps::BITCAST, Some(dtype), [self.clone()], UArg::None)
    }

    /// A workgroup barrier after the stores in `src`.
    pub fn barrier(src: Vec<UOp>) -> UOp {
        UOp::new(UOps::BARRIER, None, src, UArg::None)
    }

    /// `if (cond) {` ordered after `barrier`; the scope ends when its stores are placed.
    pub fn if_(cond: &UOp, barrier: Option<&UOp>) -> UOp {
        let mut src = vec![cond.clone()];
        if let Some(b) = barrier {
            src.push(b.clone());
        }
        UOp::new(UOps::IF, None, src, UArg::None)
    }

    /// A tensor-core multiply-accumulate `c + a*b` on warp-distributed vectors.
    pub fn wmma(a: &UOp, b: &UOp, c: &UOp, arg: WmmaArg, dtype: DType) -> UOp {
        let src = [a.clone(), b.clone(), c.clone()];
        UOp::new(UOps::WMMA, Some(dtype), src, UArg::Wmma(Box::new(arg)))
    }

    /// A node that does nothing (removed from the SINK by the constant folder).
    pub fn noop() -> UOp {
        UOp::new(UOps::NOOP, None, vec![], UArg::None)
    }

    /// A pattern placeholder (tinygrad's `UOp.var`); never part of a kernel.
    pub fn pattern_var(dtype: Option<DType>) -> UOp {
        UOp::new(UOps::VAR, dtype, vec![], UArg::None)
    }

    /// The end of a loop (the linearizer's output only).
    pub fn endrange(range: &UOp) -> UOp {
        UOp::new(UOps::ENDRANGE, None, [range.clone()], UArg::None)
    }

    /// The end of an IF (the linearizer's output only).
    pub fn endif(if_: &UOp) -> UOp {
        UOp::new(UOps::ENDIF, None, [if_.clone()], UArg::None)
    }

    /// The node's identity: the same for every handle to one node (not its structure).
    pub fn node_id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
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
    /// The pattern pre-filter keys of the node (see `pattern/prefilter.rs`).
    pub(crate) fn key(&self) -> u64 {
        self.0.key
    }
    /// The pattern pre-filter keys of the direct sources, or-ed.
    pub(crate) fn src_keys(&self) -> u64 {
        self.0.src_keys
    }
}

/// Something that can be an ALU operand: a UOp, or a Python-style number that becomes a CONST of
/// the other operand's dtype (tinygrad's `ufix`).
pub trait IntoOperand {
    fn into_operand(self, dtype: Option<DType>) -> UOp;
}
impl IntoOperand for UOp {
    fn into_operand(self, _: Option<DType>) -> UOp {
        self
    }
}
impl IntoOperand for &UOp {
    fn into_operand(self, _: Option<DType>) -> UOp {
        self.clone()
    }
}
macro_rules! operand_number {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            fn into_operand(self, dtype: Option<DType>) -> UOp {
                UOp::const_opt(dtype, self)
            }
        }
    )*};
}
operand_number!(i32, i64, f32, f64, bool, ConstValue);

/// Arithmetic that builds ALU nodes the way tinygrad's operator overloads do.
impl UOp {
    pub fn neg(&self) -> UOp {
        UOp::alu_auto(UnaryOps::NEG, [self.clone()])
    }
    pub fn recip(&self) -> UOp {
        UOp::alu_auto(UnaryOps::RECIP, [self.clone()])
    }
    pub fn add(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::ADD, [self.clone(), x])
    }
    /// `self + (-x)`, as tinygrad spells subtraction.
    pub fn sub(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::ADD, [self.clone(), x.neg()])
    }
    pub fn mul(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::MUL, [self.clone(), x])
    }
    pub fn idiv(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::IDIV, [self.clone(), x])
    }
    /// `self * (1/x)`, as tinygrad spells true division.
    pub fn div(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::MUL, [self.clone(), x.recip()])
    }
    pub fn modulo(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::MOD, [self.clone(), x])
    }
    pub fn lt(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::CMPLT, [self.clone(), x])
    }
    pub fn ne(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::CMPNE, [self.clone(), x])
    }
    /// `!(self < x)`.
    pub fn ge(&self, x: impl IntoOperand) -> UOp {
        self.lt(x).neg()
    }
    pub fn max(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::MAX, [self.clone(), x])
    }
    /// `-max(-self, -x)`, as tinygrad spells minimum.
    pub fn min(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::MAX, [self.neg(), x.neg()]).neg()
    }
    pub fn xor(&self, x: impl IntoOperand) -> UOp {
        let x = x.into_operand(self.dtype());
        UOp::alu_auto(BinaryOps::XOR, [self.clone(), x])
    }
    /// `cond ? a : b`, with the dtype of `b`.
    pub fn where_(cond: &UOp, a: impl IntoOperand, b: impl IntoOperand) -> UOp {
        let b = b.into_operand(None);
        let a = a.into_operand(b.dtype());
        UOp::alu_auto(TernaryOps::WHERE, [cond.clone(), a, b])
    }

    /// Is `target` among the transitive sources of `self` (tinygrad's `target in self.parents`)?
    pub fn has_parent(&self, target: &UOp) -> bool {
        // a RANGE target: only nodes whose summary has its bit can lead to it (equal RANGEs have
        // equal hashes, so equal bits), which prunes the walk to the paths that may reach it;
        // any other target walks everything
        let bit = match target.op() {
            UOps::RANGE => range_bit(target.0.hash),
            _ => 0,
        };
        let may_reach = |u: &UOp| bit == 0 || u.0.ranges & bit != 0;
        // addresses over 16 (FxHasher keeps the zero low bits of an aligned address, which
        // hashbrown uses to pick buckets); nodes are larger than 16 bytes, so keys stay distinct
        let mut seen = SmallSeen::default();
        let mut stack: Vec<&UOp> = self.src().iter().filter(|u| may_reach(u)).collect();
        while let Some(u) = stack.pop() {
            if u == target {
                return true;
            }
            if seen.insert(u.node_id() >> 4) {
                stack.extend(u.src().iter().filter(|s| may_reach(s)));
            }
        }
        false
    }

    /// Every transitive source of `self`, and `self` (tinygrad's `sparents`).
    pub fn sparents(&self) -> HashSet<UOp> {
        let mut out: HashSet<UOp> = HashSet::new();
        let mut stack = vec![self.clone()];
        while let Some(u) = stack.pop() {
            if out.insert(u.clone()) {
                stack.extend(u.src().iter().cloned());
            }
        }
        out
    }

    /// The RANGE arg (depth, index, is a reduce loop).
    pub fn range_arg(&self) -> Option<(usize, usize, bool)> {
        match (&self.0.op, &self.0.arg) {
            (
                UOps::RANGE,
                UArg::Range {
                    depth,
                    idx,
                    is_reduce,
                },
            ) => Some((*depth, *idx, *is_reduce)),
            _ => None,
        }
    }
}

/// The keys [`UOp::has_parent`] visited: most walks (pruned by the RANGE bits) visit a few
/// nodes, kept in place; more go to a hash set.
#[derive(Default)]
struct SmallSeen {
    small: [usize; SMALL_SEEN],
    n: usize,
    big: HashSet<usize, crate::helpers::FxBuild>,
}

/// Keys [`SmallSeen`] holds without allocating.
const SMALL_SEEN: usize = 16;

impl SmallSeen {
    /// Whether `k` is new (and now seen).
    fn insert(&mut self, k: usize) -> bool {
        if self.small[..self.n].contains(&k) {
            return false;
        }
        if self.n < SMALL_SEEN {
            self.small[self.n] = k;
            self.n += 1;
            return true;
        }
        self.big.insert(k)
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

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Python-like rendering of an arg, as tinygrad's `print_uops` shows it.
impl fmt::Display for UArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UArg::None => write!(f, "None"),
            UArg::Const(v) => write!(f, "{v}"),
            UArg::Alu(op) => write!(f, "{}", op.name()),
            UArg::Global { idx, is_output } => write!(f, "({idx}, {})", py_bool(*is_output)),
            UArg::Var { name, min, max } => write!(f, "<{name}[{min}-{max}]>"),
            UArg::Local { name, size } => write!(f, "('{name}', {size})"),
            UArg::Acc { buf, idx } => write!(f, "({buf}, {idx})"),
            UArg::Special { axis, name, size } => write!(f, "({axis}, '{name}', {size})"),
            UArg::Range {
                depth,
                idx,
                is_reduce,
            } => write!(f, "({depth}, {idx}, {})", py_bool(*is_reduce)),
            UArg::Gep(i) => write!(f, "{i}"),
            UArg::Wmma(w) => write!(
                f,
                "('{}', ({}, {}, {}), {}, {}, {:?}, '{}')",
                w.name,
                w.dims[0],
                w.dims[1],
                w.dims[2],
                w.dtype_in,
                w.dtype_out,
                w.upcast_sizes,
                w.device
            ),
        }
    }
}
