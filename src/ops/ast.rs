//! The kernel AST of tinygrad 0.9.1: [`LazyOp`] trees whose leaves are buffer ops
//! ([`MemBuffer`] loads, [`ConstBuffer`] constants) and whose roots are STOREs, plus the
//! single-op "ASTs" of LoadOps items (COPY, CUSTOM, EMPTY, VIEW).
//!
//! Owns: the node type (immutable, `Arc`-shared, compared and hashed by structure with a hash
//! computed once as the node is built), its output dtype rule, the stable content key (sha256 of a
//! canonical text, computed on demand: the BEAM and disk-cache key, never used by `==`), traversal
//! helpers, and `verify_lazyop` (the rules every kernel AST obeys).
//!
//! Not guaranteed: a `LazyOp` built by hand is not checked until [`verify_lazyop`] runs.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use super::{BinaryOps, BufferOps, LoadOps, Op, ReduceOps, UnaryOps};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::shape::{Node, ShapeTracker, Sint};
use crate::{bail, Result};

/// A load from (or store to) kernel buffer `idx` through `st`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemBuffer {
    pub idx: usize,
    pub dtype: DType,
    pub st: ShapeTracker,
}

/// The value of a CONST buffer op: a number, or an unbound symbolic Variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConstArg {
    Value(ConstValue),
    Var(Node),
}

impl fmt::Display for ConstArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstArg::Value(v) => write!(f, "{v}"),
            ConstArg::Var(n) => write!(f, "{}", n.key()),
        }
    }
}

/// A constant broadcast through `st` (only the ST's valid mask matters).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConstBuffer {
    pub val: ConstArg,
    pub dtype: DType,
    pub st: ShapeTracker,
}

/// A host function for `LoadOps::CUSTOM`: writes the output bytes from the input bytes.
pub type CustomFn = dyn Fn(&mut [u8], &[&[u8]]) -> Result<()> + Send + Sync;

/// A named [`CustomFn`], compared by identity.
#[derive(Clone)]
pub struct CustomOp {
    pub name: String,
    pub f: Arc<CustomFn>,
}

impl PartialEq for CustomOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.f, &other.f)
    }
}
impl Eq for CustomOp {}
impl Hash for CustomOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.f) as *const u8 as usize).hash(state);
    }
}
impl fmt::Debug for CustomOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CustomOp({})", self.name)
    }
}

/// The `arg` of a [`LazyOp`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LazyOpArg {
    None,
    /// BufferOps LOAD / STORE.
    Mem(MemBuffer),
    /// BufferOps CONST.
    Const(ConstBuffer),
    /// UnaryOps CAST / BITCAST: the target dtype.
    DType(DType),
    /// ReduceOps: the reduced axes (sorted).
    Axis(Vec<usize>),
    /// LoadOps COPY: bytes to copy.
    Nbytes(usize),
    /// LoadOps CUSTOM.
    Custom(CustomOp),
}

/// The data of one AST node.
pub struct LazyOpInner {
    pub op: Op,
    pub src: Vec<LazyOp>,
    pub arg: LazyOpArg,
    hash: u64,
    /// The content key, computed once (sources share theirs, so a DAG is hashed in linear time).
    key: OnceLock<String>,
}

/// A kernel AST node: cheap to clone, compared and hashed by structure.
#[derive(Clone)]
pub struct LazyOp(Arc<LazyOpInner>);

impl LazyOp {
    pub fn new(op: impl Into<Op>, src: Vec<LazyOp>, arg: LazyOpArg) -> LazyOp {
        let op = op.into();
        let mut h = crate::helpers::FxHasher::default();
        op.hash(&mut h);
        for s in &src {
            s.0.hash.hash(&mut h);
        }
        arg.hash(&mut h);
        let hash = h.finish();
        LazyOp(Arc::new(LazyOpInner {
            op,
            src,
            arg,
            hash,
            key: OnceLock::new(),
        }))
    }

    /// `LOAD` of buffer `idx`.
    pub fn load(idx: usize, dtype: DType, st: ShapeTracker) -> LazyOp {
        let arg = LazyOpArg::Mem(MemBuffer { idx, dtype, st });
        LazyOp::new(BufferOps::LOAD, vec![], arg)
    }

    /// `CONST` broadcast through `st`.
    pub fn cnst(val: ConstArg, dtype: DType, st: ShapeTracker) -> LazyOp {
        let arg = LazyOpArg::Const(ConstBuffer { val, dtype, st });
        LazyOp::new(BufferOps::CONST, vec![], arg)
    }

    /// `STORE` of `src` into buffer `idx`.
    pub fn store(src: LazyOp, idx: usize, dtype: DType, st: ShapeTracker) -> LazyOp {
        let arg = LazyOpArg::Mem(MemBuffer { idx, dtype, st });
        LazyOp::new(BufferOps::STORE, vec![src], arg)
    }

    /// The node's identity: the same for every handle to one node (not its structure).
    pub fn node_id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
    pub fn op(&self) -> Op {
        self.0.op
    }
    pub fn src(&self) -> &[LazyOp] {
        &self.0.src
    }
    pub fn arg(&self) -> &LazyOpArg {
        &self.0.arg
    }

    /// The MemBuffer of a LOAD/STORE.
    pub fn membuffer(&self) -> Option<&MemBuffer> {
        match &self.0.arg {
            LazyOpArg::Mem(m) => Some(m),
            _ => None,
        }
    }

    /// The ConstBuffer of a CONST.
    pub fn constbuffer(&self) -> Option<&ConstBuffer> {
        match &self.0.arg {
            LazyOpArg::Const(c) => Some(c),
            _ => None,
        }
    }

    /// The ShapeTracker of a buffer op.
    pub fn st(&self) -> Option<&ShapeTracker> {
        match &self.0.arg {
            LazyOpArg::Mem(m) => Some(&m.st),
            LazyOpArg::Const(c) => Some(&c.st),
            _ => None,
        }
    }

    /// The reduced axes of a ReduceOps node.
    pub fn axis(&self) -> Option<&[usize]> {
        match &self.0.arg {
            LazyOpArg::Axis(a) => Some(a),
            _ => None,
        }
    }

    /// Output dtype, as 0.9.1's `LazyOp.dtype`: buffer ops take their arg's dtype, CAST/BITCAST
    /// the target, comparisons bool, everything else the dtype of the last source.
    pub fn dtype(&self) -> Result<DType> {
        match (&self.0.op, &self.0.arg) {
            (Op::Buffer(_), LazyOpArg::Mem(m)) => Ok(m.dtype),
            (Op::Buffer(_), LazyOpArg::Const(c)) => Ok(c.dtype),
            (Op::Unary(UnaryOps::CAST | UnaryOps::BITCAST), LazyOpArg::DType(d)) => Ok(*d),
            (Op::Binary(BinaryOps::CMPLT | BinaryOps::CMPNE), _) => Ok(dtypes::bool),
            _ => match self.0.src.last() {
                Some(s) => s.dtype(),
                None => bail!(
                    Codegen,
                    "{} has no source to take a dtype from",
                    self.0.op.name()
                ),
            },
        }
    }

    /// Every distinct node of the tree, parents before children (pre-order, deduplicated).
    pub fn lazyops(&self) -> Vec<LazyOp> {
        let mut out: Vec<LazyOp> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![self.clone()];
        while let Some(n) = stack.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            for s in n.src().iter().rev() {
                stack.push(s.clone());
            }
            out.push(n);
        }
        out
    }

    /// The symbolic variables used by the tree (in ShapeTrackers and CONST values), unique, in
    /// first-seen order.
    pub fn vars(&self) -> Vec<Node> {
        let mut out: Vec<Node> = Vec::new();
        for n in self.lazyops() {
            let mut add = |v: Node| {
                if !out.contains(&v) {
                    out.push(v);
                }
            };
            if let Some(st) = n.st() {
                st.vars().into_iter().for_each(&mut add);
            }
            if let Some(ConstBuffer {
                val: ConstArg::Var(v),
                ..
            }) = n.constbuffer()
            {
                v.vars().into_iter().for_each(&mut add);
            }
        }
        out
    }

    /// A stable content key (hex sha256 of the op, its arg and its sources' keys): the BEAM and
    /// disk-cache key, identical across processes for identical ASTs.
    pub fn key(&self) -> String {
        self.0
            .key
            .get_or_init(|| {
                let mut h = Sha256::new();
                h.update(self.0.op.name().as_bytes());
                h.update(format!("{:?}", self.0.arg).as_bytes());
                for s in &self.0.src {
                    h.update(s.key().as_bytes());
                }
                h.finalize().iter().map(|b| format!("{b:02x}")).collect()
            })
            .clone()
    }

    /// Identity of the node (its allocation), for memo tables over a DAG.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Identity (same allocation).
    pub fn ptr_eq(&self, other: &LazyOp) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for LazyOp {
    /// Structural equality: the same op, arg and (recursively) sources. The structural hash each
    /// node computed when it was built rejects almost every unequal pair at once; equal pairs are
    /// walked once per pair of nodes (a DAG's shared nodes are not walked again per path, which
    /// would be exponential for threefry's shared rounds), with no allocation for small trees.
    fn eq(&self, other: &LazyOp) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if self.0.hash != other.0.hash {
            return false;
        }
        let mut stack: SmallStack<(&LazyOpInner, &LazyOpInner), 16> = SmallStack::new();
        stack.push((&self.0, &other.0));
        let mut seen = PairSet::default();
        while let Some((a, b)) = stack.pop() {
            if std::ptr::eq(a, b) {
                continue;
            }
            if a.hash != b.hash || a.op != b.op || a.src.len() != b.src.len() || a.arg != b.arg {
                return false;
            }
            if a.src.is_empty() || !seen.insert(a, b) {
                continue;
            }
            for (x, y) in a.src.iter().zip(&b.src) {
                stack.push((&*x.0, &*y.0));
            }
        }
        true
    }
}

/// A LIFO stack whose first `N` items live inline: a small kernel's comparison allocates
/// nothing (the method cache compares the AST of every eager step with its cached twin).
struct SmallStack<T: Copy, const N: usize> {
    inline: [Option<T>; N],
    len: usize,
    /// Items pushed while the inline part was full; always newer than the inline ones.
    spill: Vec<T>,
}

impl<T: Copy, const N: usize> SmallStack<T, N> {
    fn new() -> Self {
        SmallStack {
            inline: [None; N],
            len: 0,
            spill: Vec::new(),
        }
    }
    fn push(&mut self, x: T) {
        if self.len < N && self.spill.is_empty() {
            self.inline[self.len] = Some(x);
            self.len += 1;
        } else {
            self.spill.push(x);
        }
    }
    fn pop(&mut self) -> Option<T> {
        if let Some(x) = self.spill.pop() {
            return Some(x);
        }
        self.len = self.len.checked_sub(1)?;
        self.inline[self.len].take()
    }
}

/// Pairs of nodes already compared (or being compared) in one [`LazyOp::eq`]: a short inline
/// list for the usual small kernel, a hash set past it.
#[derive(Default)]
struct PairSet {
    few: [(usize, usize); 16],
    len: usize,
    many: Option<std::collections::HashSet<(usize, usize)>>,
}

impl PairSet {
    /// Insert the pair; false when it was there already.
    fn insert(&mut self, a: &LazyOpInner, b: &LazyOpInner) -> bool {
        let key = (
            a as *const LazyOpInner as usize,
            b as *const LazyOpInner as usize,
        );
        if let Some(set) = &mut self.many {
            return set.insert(key);
        }
        if self.few[..self.len].contains(&key) {
            return false;
        }
        if self.len < self.few.len() {
            self.few[self.len] = key;
            self.len += 1;
        } else {
            let mut set: std::collections::HashSet<(usize, usize)> =
                self.few.iter().copied().collect();
            set.insert(key);
            self.many = Some(set);
        }
        true
    }
}
impl Eq for LazyOp {}
impl Hash for LazyOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash.hash(state);
    }
}

impl fmt::Debug for LazyOp {
    /// tinygrad's nested `LazyOp(op=..., arg=..., src=(...))` text. A kernel AST is a DAG
    /// (threefry kernels share subtrees thousands of times), so a node printed once is printed
    /// again as `LazyOp(op=..., <again #n>)`, where `n` counts first prints in order: the text
    /// stays linear in the number of nodes (a tree print of a `rand` kernel needs gigabytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_indent(f, 0, &mut HashMap::new())
    }
}

impl LazyOp {
    fn fmt_indent(
        &self,
        f: &mut fmt::Formatter<'_>,
        depth: usize,
        seen: &mut HashMap<*const LazyOpInner, usize>,
    ) -> fmt::Result {
        let pad = "  ".repeat(depth);
        write!(f, "{pad}LazyOp(op={}", self.0.op.name())?;
        if !self.0.src.is_empty() {
            let ptr = Arc::as_ptr(&self.0);
            if let Some(n) = seen.get(&ptr) {
                return write!(f, ", <again #{n}>)");
            }
            let n = seen.len();
            seen.insert(ptr, n);
        }
        self.fmt_arg(f)?;
        if self.0.src.is_empty() {
            return write!(f, ")");
        }
        writeln!(f, ", src=(")?;
        for s in &self.0.src {
            s.fmt_indent(f, depth + 1, seen)?;
            writeln!(f, ",")?;
        }
        write!(f, "{pad}))")
    }

    fn fmt_arg(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.arg {
            LazyOpArg::None => Ok(()),
            LazyOpArg::Mem(m) => write!(
                f,
                ", arg=MemBuffer(idx={}, dtype={}, st={:?})",
                m.idx, m.dtype, m.st
            ),
            LazyOpArg::Const(c) => write!(
                f,
                ", arg=ConstBuffer(val={}, dtype={}, st={:?})",
                c.val, c.dtype, c.st
            ),
            LazyOpArg::DType(d) => write!(f, ", arg={d}"),
            LazyOpArg::Axis(a) => write!(f, ", arg={a:?}"),
            LazyOpArg::Nbytes(n) => write!(f, ", arg={n}"),
            LazyOpArg::Custom(c) => write!(f, ", arg={c:?}"),
        }
    }
}

fn shape_str(s: &[Sint]) -> String {
    crate::shape::symbolic::render_shape(s)
}

/// Check the rules every kernel AST of 0.9.1 obeys (`verify_lazyop`): every root is a STORE and
/// root `i` writes buffer `i`; all outputs have the same size; only ReduceOps change the shape
/// (their axes become 1); every source of an elementwise node has the node's shape; buffer ops
/// carry their own ShapeTracker.
pub fn verify_lazyop(ast: &[LazyOp]) -> Result<()> {
    if ast.is_empty() {
        bail!(Codegen, "verify_lazyop: empty kernel");
    }
    let mut sizes = Vec::new();
    // Kernel ASTs are DAGs with heavy sharing (threefry reuses every round twice): each node is
    // checked once, keyed by identity, or the walk is exponential in the depth.
    let mut memo = HashMap::new();
    for (i, root) in ast.iter().enumerate() {
        let Some(mb) = (root.op() == Op::Buffer(BufferOps::STORE))
            .then(|| root.membuffer())
            .flatten()
        else {
            bail!(
                Codegen,
                "verify_lazyop: root {i} is {}, not a STORE",
                root.op().name()
            );
        };
        if mb.idx != i {
            bail!(
                Codegen,
                "verify_lazyop: root {i} stores into buffer {}, expected {i}",
                mb.idx
            );
        }
        if root.src().len() != 1 {
            bail!(
                Codegen,
                "verify_lazyop: STORE {i} has {} sources, expected 1",
                root.src().len()
            );
        }
        let shape = verify_shape(&root.src()[0], &mut memo)?;
        if shape != mb.st.shape() {
            bail!(
                Codegen,
                "verify_lazyop: STORE {i} writes shape {} from a value of shape {}",
                shape_str(mb.st.shape()),
                shape_str(&shape)
            );
        }
        sizes.push(mb.st.size()?);
    }
    if sizes.windows(2).any(|w| w[0] != w[1]) {
        bail!(
            Codegen,
            "verify_lazyop: outputs have different sizes {sizes:?}"
        );
    }
    Ok(())
}

/// The shape a node produces, checking its sources on the way.
fn verify_shape(op: &LazyOp, memo: &mut HashMap<usize, Vec<Sint>>) -> Result<Vec<Sint>> {
    let key = op.id();
    if let Some(s) = memo.get(&key) {
        return Ok(s.clone());
    }
    let shape = verify_shape_uncached(op, memo)?;
    memo.insert(key, shape.clone());
    Ok(shape)
}

fn verify_shape_uncached(op: &LazyOp, memo: &mut HashMap<usize, Vec<Sint>>) -> Result<Vec<Sint>> {
    match op.op() {
        Op::Buffer(BufferOps::STORE) => bail!(Codegen, "verify_lazyop: STORE inside a kernel"),
        Op::Buffer(_) => match op.st() {
            Some(st) => Ok(st.shape().to_vec()),
            None => bail!(
                Codegen,
                "verify_lazyop: {} without a ShapeTracker",
                op.op().name()
            ),
        },
        Op::Load(l) => bail!(Codegen, "verify_lazyop: LoadOps.{l:?} inside a kernel"),
        Op::Reduce(r) => {
            let [src] = op.src() else {
                bail!(Codegen, "verify_lazyop: ReduceOps.{r:?} needs one source");
            };
            let mut shape = verify_shape(src, memo)?;
            let axis = op.axis().unwrap_or(&[]);
            for &a in axis {
                let Some(d) = shape.get_mut(a) else {
                    bail!(
                        Codegen,
                        "verify_lazyop: reduce axis {a} out of range for {}",
                        shape_str(&shape)
                    );
                };
                *d = Sint::from(1i64);
            }
            Ok(shape)
        }
        _ => {
            let shapes: Vec<Vec<Sint>> = op
                .src()
                .iter()
                .map(|s| verify_shape(s, memo))
                .collect::<Result<_>>()?;
            let Some(first) = shapes.first() else {
                bail!(Codegen, "verify_lazyop: {} has no sources", op.op().name());
            };
            if shapes.iter().any(|s| s != first) {
                let all: Vec<String> = shapes.iter().map(|s| shape_str(s)).collect();
                bail!(
                    Codegen,
                    "verify_lazyop: {} sources have different shapes {}",
                    op.op().name(),
                    all.join(" vs ")
                );
            }
            Ok(first.clone())
        }
    }
}

/// Is this a reduce node?
pub fn is_reduce(op: &LazyOp) -> Option<ReduceOps> {
    match op.op() {
        Op::Reduce(r) => Some(r),
        _ => None,
    }
}

/// The LoadOps of a single-op schedule item AST, if it is one.
pub fn is_loadop(op: &LazyOp) -> Option<LoadOps> {
    match op.op() {
        Op::Load(l) => Some(l),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::sints;

    fn st(shape: &[i64]) -> ShapeTracker {
        ShapeTracker::from_shape(&sints(shape)).unwrap()
    }

    fn add_kernel() -> LazyOp {
        let a = LazyOp::load(1, dtypes::float32, st(&[4, 4]));
        let b = LazyOp::load(2, dtypes::float32, st(&[4, 4]));
        let add = LazyOp::new(BinaryOps::ADD, vec![a, b], LazyOpArg::None);
        LazyOp::store(add, 0, dtypes::float32, st(&[4, 4]))
    }

    /// 200 levels of `x = x + x`: 2^200 paths, one node per level. Verification, keys and
    /// equality of two separately built copies must be linear in the nodes (an exponential
    /// walk would never return).
    #[test]
    fn shared_dags_are_walked_once_per_node() {
        let build = || {
            let mut x = LazyOp::load(1, dtypes::float32, st(&[4]));
            for _ in 0..200 {
                x = LazyOp::new(BinaryOps::ADD, vec![x.clone(), x], LazyOpArg::None);
            }
            LazyOp::store(x, 0, dtypes::float32, st(&[4]))
        };
        let (a, b) = (build(), build());
        verify_lazyop(std::slice::from_ref(&a)).unwrap();
        assert!(!a.ptr_eq(&b));
        assert_eq!(a, b);
        assert!(
            a.0.key.get().is_none(),
            "== compares structure, not content keys"
        );
        assert_eq!(a.key(), b.key());
        // The Debug text prints each shared node once, then refers back to it.
        let text = format!("{a:?}");
        assert_eq!(text.matches("LazyOp(op=BinaryOps.ADD, src=(").count(), 200);
        assert_eq!(
            text.matches("LazyOp(op=BinaryOps.ADD, <again #").count(),
            199
        );
        assert!(text.contains("<again #2>"), "{}", &text[..400]);
    }

    #[test]
    fn structural_equality_hash_and_key() {
        let (k1, k2) = (add_kernel(), add_kernel());
        assert!(!k1.ptr_eq(&k2));
        assert_eq!(k1.0.hash, k2.0.hash, "the build-time hash is structural");
        assert!(
            k1.0.key.get().is_none(),
            "== and the hash never build the text key"
        );
        assert_eq!(k1, k2);
        assert!(k1.0.key.get().is_none());
        assert_eq!(k1.key(), k2.key());
        assert_eq!(k1.key().len(), 64);
        let other = LazyOp::store(
            LazyOp::load(1, dtypes::float32, st(&[4, 4])),
            0,
            dtypes::float32,
            st(&[4, 4]),
        );
        assert_ne!(k1.0.hash, other.0.hash);
        assert_ne!(k1, other);
        assert_ne!(k1.key(), other.key());
        assert_eq!(k1.lazyops().len(), 4);
    }

    #[test]
    fn dtype_rules() {
        let a = LazyOp::load(1, dtypes::int32, st(&[4]));
        let lt = LazyOp::new(
            BinaryOps::CMPLT,
            vec![a.clone(), a.clone()],
            LazyOpArg::None,
        );
        assert_eq!(lt.dtype().unwrap(), dtypes::bool);
        let c = LazyOp::new(
            UnaryOps::CAST,
            vec![a.clone()],
            LazyOpArg::DType(dtypes::float16),
        );
        assert_eq!(c.dtype().unwrap(), dtypes::float16);
        assert_eq!(a.dtype().unwrap(), dtypes::int32);
    }

    #[test]
    fn verify_accepts_and_rejects() {
        verify_lazyop(&[add_kernel()]).unwrap();
        let a = LazyOp::load(1, dtypes::float32, st(&[4, 4]));
        let r = LazyOp::new(ReduceOps::SUM, vec![a.clone()], LazyOpArg::Axis(vec![1]));
        verify_lazyop(&[LazyOp::store(r.clone(), 0, dtypes::float32, st(&[4, 1]))]).unwrap();
        // Wrong output shape.
        let e = verify_lazyop(&[LazyOp::store(r, 0, dtypes::float32, st(&[4, 4]))]).unwrap_err();
        assert!(e.to_string().contains("writes shape"), "{e}");
        // Wrong store index.
        let e = verify_lazyop(&[LazyOp::store(a.clone(), 1, dtypes::float32, st(&[4, 4]))])
            .unwrap_err();
        assert!(e.to_string().contains("expected 0"), "{e}");
        // Mismatched source shapes.
        let b = LazyOp::load(2, dtypes::float32, st(&[4, 1]));
        let add = LazyOp::new(BinaryOps::ADD, vec![a, b], LazyOpArg::None);
        let e = verify_lazyop(&[LazyOp::store(add, 0, dtypes::float32, st(&[4, 4]))]).unwrap_err();
        assert!(e.to_string().contains("different shapes"), "{e}");
    }
}
