//! The `LazyBuffer` graph: tinygrad 0.9.1's `lazy.py`.
//!
//! A [`LazyBuffer`] is a cheap-clone handle with identity semantics (equality and hashing by
//! pointer, like Python objects). It is either
//! - a *base*: an op ([`LoadOps`], an ALU op or a [`ReduceOps`]), its [`LbArg`], its sources, and
//!   the device [`Buffer`] it will be computed into (allocated later, by the realize engine). An
//!   ASSIGN base shares its target's buffer; a VIEW base owns a sub-buffer view of its source's
//!   buffer. Every base adds 1 to its buffer's `lb_refcount` while it lives; or
//! - a *view*: a [`ShapeTracker`] over a base.
//!
//! A base counts as *realized* once its sources are taken ([`LazyBuffer::mark_realized`], done by
//! the scheduler when it schedules the buffer, or at creation by [`LazyBuffer::from_buffer`]):
//! a scheduled-but-unrun buffer is already realized for later schedules, and taking the sources
//! frees the graph behind it.
//!
//! Construction goes through the lazy cache (`LAZYCACHE=1`): a per-thread map from (device, st,
//! dtype, op, arg, source identities) for bases, or (st, base identity) for views, to weak
//! handles, so identical expressions built twice share one node. The graph operations (`e`, `r`,
//! movement ops, `cast`, `copy_to_device`, `contiguous`, `assign`) live in `lazy/ops.rs`.
//!
//! Owns: graph construction, constant folding at construction, the lazy cache, the buffer
//! reference counts. Does not own: deciding what is computed where (the scheduler) or running
//! anything (the realize engine).
//!
//! Not guaranteed: graphs are not meant to be mutated concurrently from several threads while one
//! of them is being scheduled (the flags the scheduler reads and writes are atomic, but a schedule
//! sees whatever state the graph has while it runs). Dropping a very deep graph is iterative, so it
//! cannot overflow the stack.

#![forbid(unsafe_code)]

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::device::{Buffer, BufferOptions, BufferRef};
use crate::dtype::{ConstValue, DType};
use crate::helpers::{fx_hash, FxHashMap};
use crate::ops::{ConstArg, CustomOp, LazyOpArg, LoadOps, Op};
use crate::runtime::builtin::register_builtin_families;
use crate::shape::symbolic::render_shape;
use crate::shape::{ShapeTracker, Sint};
use crate::{ensure, Error, Result};

mod ops;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ops;

/// The `arg` of a base [`LazyBuffer`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LbArg {
    /// No argument (ALU ops, EMPTY, CONTIGUOUS, a buffer-view VIEW, an ASSIGN to a contiguous
    /// target).
    None,
    /// LoadOps CONST: the value (coerced to the dtype) or a bound Variable.
    Const(ConstArg),
    /// UnaryOps CAST / BITCAST, and the VIEW of a bitcast: the target dtype.
    DType(DType),
    /// ReduceOps: the reduced axes (sorted, size-1 axes dropped).
    Axis(Vec<usize>),
    /// LoadOps COPY: bytes to copy.
    Nbytes(usize),
    /// LoadOps CUSTOM: the host function.
    Custom(CustomOp),
    /// LoadOps ASSIGN into a non-contiguous target view: the target's ShapeTracker.
    AssignView(ShapeTracker),
}

impl LbArg {
    /// The arg as a kernel AST node carries it (ASSIGN views and CONST values are handled by the
    /// scheduler itself and map to `None` here).
    pub fn to_lazyop_arg(&self) -> LazyOpArg {
        match self {
            LbArg::None | LbArg::AssignView(_) | LbArg::Const(_) => LazyOpArg::None,
            LbArg::DType(d) => LazyOpArg::DType(*d),
            LbArg::Axis(a) => LazyOpArg::Axis(a.clone()),
            LbArg::Nbytes(n) => LazyOpArg::Nbytes(*n),
            LbArg::Custom(c) => LazyOpArg::Custom(c.clone()),
        }
    }
}

/// A node of the lazy graph (see the module doc). Clones share the node.
#[derive(Clone)]
pub struct LazyBuffer(Arc<LbInner>);

pub(crate) struct LbInner {
    device: Arc<str>,
    st: ShapeTracker,
    dtype: DType,
    size: usize,
    /// The base's buffer (a view keeps a handle to its base's buffer).
    buffer: BufferRef,
    kind: Kind,
    /// The lazy-cache key this node was registered under, removed again when it dies.
    cache_key: Option<HashedKey>,
    /// Set once `release` ran (the buffer reference is returned exactly once).
    released: bool,
}

enum Kind {
    Base(BaseData),
    View(LazyBuffer),
    /// Only while the node is being dropped.
    Released,
}

struct BaseData {
    op: Op,
    arg: LbArg,
    /// `None` once realized (tinygrad's `del self.srcs`).
    srcs: Mutex<Option<Arc<[LazyBuffer]>>>,
    forced_realize: AtomicBool,
    /// (weak handle to the result of `contiguous()` on a view of this base, the inverse of that
    /// view's ShapeTracker).
    contiguous_child: Mutex<Option<(Weak<LbInner>, ShapeTracker)>>,
}

/// What `create_lazybuffer` builds.
pub(crate) enum Spec {
    Base {
        op: Op,
        arg: LbArg,
        srcs: Vec<LazyBuffer>,
    },
    View(LazyBuffer),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The lazy cache

/// A node's identity inside a cache key. It holds a weak handle, which keeps the node's
/// allocation (not the node) alive, so the address cannot be reused by another node while the
/// key exists: a key naming a dead source never matches a new one (Python's `ref(x)` keys).
#[derive(Clone)]
struct WeakId(Weak<LbInner>);

impl PartialEq for WeakId {
    fn eq(&self, other: &Self) -> bool {
        Weak::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for WeakId {}
impl Hash for WeakId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0.as_ptr() as *const u8 as usize).hash(state);
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum CacheKey {
    Base {
        device: Arc<str>,
        st: ShapeTracker,
        dtype: DType,
        op: Op,
        arg: LbArg,
        srcs: Vec<WeakId>,
    },
    View {
        st: ShapeTracker,
        base: WeakId,
    },
}

/// A [`CacheKey`] with its hash, computed once when the node is built: lookups, the insert and
/// the removal when the node dies do not hash the ShapeTracker again.
#[derive(Clone)]
struct HashedKey {
    hash: u64,
    key: CacheKey,
}

impl PartialEq for HashedKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}
impl Eq for HashedKey {}
impl Hash for HashedKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

type LazyCache = FxHashMap<HashedKey, Weak<LbInner>>;

thread_local! {
    /// One lazy cache per thread: independent computations on different threads (a test
    /// harness, a server's workers) never share nodes by accident, so one thread's scheduler
    /// never marks realized a node that another thread is scheduling at the same moment.
    static LAZYCACHE: std::cell::RefCell<LazyCache> = std::cell::RefCell::new(FxHashMap::default());
}

/// Run `f` on this thread's lazy cache; `None` while the thread is being torn down.
fn with_lazycache<R>(f: impl FnOnce(&mut LazyCache) -> R) -> Option<R> {
    LAZYCACHE
        .try_with(|c| c.try_borrow_mut().ok().map(|mut c| f(&mut c)))
        .ok()
        .flatten()
}

/// A live node registered under `key`.
fn cache_get(key: &HashedKey) -> Option<LazyBuffer> {
    with_lazycache(|c| c.get(key).and_then(Weak::upgrade))
        .flatten()
        .map(LazyBuffer)
}

/// Register `lb` under `key` unless a live node got there first (returned instead).
fn cache_insert(key: HashedKey, lb: &LazyBuffer) -> Option<LazyBuffer> {
    with_lazycache(|cache| {
        if let Some(live) = cache.get(&key).and_then(Weak::upgrade) {
            return Some(LazyBuffer(live));
        }
        cache.insert(key, Arc::downgrade(&lb.0));
        None
    })
    .flatten()
}

/// Forget `key` if it still names the node at `ptr` (a node dropped on another thread than the
/// one that built it leaves its dead entry there; lookups skip dead entries).
fn cache_remove(key: &HashedKey, ptr: *const LbInner) {
    with_lazycache(|cache| {
        // one lookup in the usual case; an entry naming another node is put back
        if let Some((k, w)) = cache.remove_entry(key) {
            if !std::ptr::eq(w.as_ptr(), ptr) {
                cache.insert(k, w);
            }
        }
    });
}

/// Number of entries in this thread's lazy cache (live or not yet cleaned up), for tests and
/// debugging.
pub fn lazycache_len() -> usize {
    with_lazycache(|c| c.len()).unwrap_or(0)
}

/// Whether this thread's lazy cache holds an entry for `key` (tests).
#[cfg(test)]
fn lazycache_contains(key: &HashedKey) -> bool {
    with_lazycache(|c| c.contains_key(key)).unwrap_or(false)
}

fn st_size(st: &ShapeTracker) -> Result<usize> {
    let s = st.size()?;
    usize::try_from(s).map_err(|_| {
        Error::InvalidArgument(format!(
            "lazy buffer of shape {} has a negative size {s}",
            render_shape(st.shape())
        ))
    })
}

/// tinygrad's `create_lazybuffer`: zero-size results become CONST 0, CONST args are coerced to
/// the dtype (and always cached), and with `enable_cache` identical nodes are shared.
pub(crate) fn create_lazybuffer(
    device: &Arc<str>,
    st: ShapeTracker,
    dtype: DType,
    mut spec: Spec,
    mut enable_cache: bool,
) -> Result<LazyBuffer> {
    let size = st_size(&st)?;
    if size == 0 {
        let arg = LbArg::Const(ConstArg::Value(ConstValue::Int(0)));
        spec = Spec::Base {
            op: Op::Load(LoadOps::CONST),
            arg,
            srcs: vec![],
        };
    }
    if let Spec::Base {
        op: Op::Load(LoadOps::CONST),
        arg,
        ..
    } = &mut spec
    {
        if let LbArg::Const(ConstArg::Value(v)) = arg {
            *v = v.as_const(dtype);
        }
        enable_cache = true;
    }
    let key = enable_cache.then(|| cache_key(device, &st, dtype, &spec));
    if let Some(hit) = key.as_ref().and_then(cache_get) {
        return Ok(hit);
    }
    let lb = LazyBuffer(Arc::new(LbInner::new(
        device,
        st,
        dtype,
        size,
        spec,
        key.clone(),
    )?));
    if let Some(key) = key {
        if let Some(live) = cache_insert(key, &lb) {
            return Ok(live);
        }
    }
    Ok(lb)
}

fn cache_key(device: &Arc<str>, st: &ShapeTracker, dtype: DType, spec: &Spec) -> HashedKey {
    let key = match spec {
        Spec::Base { op, arg, srcs } => CacheKey::Base {
            device: Arc::clone(device),
            st: st.clone(),
            dtype,
            op: *op,
            arg: arg.clone(),
            srcs: srcs.iter().map(|x| WeakId(Arc::downgrade(&x.0))).collect(),
        },
        Spec::View(base) => CacheKey::View {
            st: st.clone(),
            base: WeakId(Arc::downgrade(&base.0)),
        },
    };
    HashedKey {
        hash: fx_hash(&key),
        key,
    }
}

// ---------------------------------------------------------------------------------------------
// Node construction and destruction

impl LbInner {
    fn new(
        device: &Arc<str>,
        st: ShapeTracker,
        dtype: DType,
        size: usize,
        spec: Spec,
        cache_key: Option<HashedKey>,
    ) -> Result<LbInner> {
        let (kind, buffer) = match spec {
            Spec::View(base) => {
                ensure!(
                    base.is_base(),
                    Internal,
                    "lazy view: base must be a base itself"
                );
                let buffer = base.buffer().clone();
                (Kind::View(base), buffer)
            }
            Spec::Base { op, arg, srcs } => {
                let buffer = base_buffer(device, dtype, size, op, &srcs)?;
                buffer.lb_ref(1);
                let data = BaseData {
                    op,
                    arg,
                    srcs: Mutex::new(Some(srcs.into())),
                    forced_realize: AtomicBool::new(false),
                    contiguous_child: Mutex::new(None),
                };
                (Kind::Base(data), buffer)
            }
        };
        Ok(LbInner {
            device: Arc::clone(device),
            st,
            dtype,
            size,
            buffer,
            kind,
            cache_key,
            released: false,
        })
    }

    /// Give up everything this node holds: its cache entry, its buffer reference, and its
    /// sources (or base), which are pushed on `pending` when this node held the last handle to
    /// them. Idempotent.
    fn release(&mut self, ptr: *const LbInner, pending: &mut Vec<LazyBuffer>) {
        if let Some(key) = self.cache_key.take() {
            cache_remove(&key, ptr);
        }
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        if let Kind::Base(b) = &self.kind {
            self.buffer.lb_ref(-1);
            let srcs = lock(&b.srcs).take();
            if let Some(arr) = srcs {
                if Arc::strong_count(&arr) == 1 {
                    pending.extend(arr.iter().cloned());
                }
            }
        } else if let Kind::View(base) = std::mem::replace(&mut self.kind, Kind::Released) {
            pending.push(base);
        }
    }
}

/// The buffer a new base computes into: ASSIGN shares the target's, VIEW views its source's at
/// the source's offset, everything else gets a fresh (unallocated) one.
fn base_buffer(
    device: &Arc<str>,
    dtype: DType,
    size: usize,
    op: Op,
    srcs: &[LazyBuffer],
) -> Result<BufferRef> {
    match op {
        Op::Load(LoadOps::ASSIGN) => {
            let target = srcs.get(1).map(LazyBuffer::base).ok_or_else(|| {
                Error::InvalidArgument("ASSIGN needs (value, target) sources".into())
            })?;
            ensure!(
                target.realized().is_some(),
                InvalidArgument,
                "assign target must be realized (target {target:?})"
            );
            Ok(target.buffer().clone())
        }
        Op::Load(LoadOps::VIEW) => {
            let src = srcs
                .first()
                .ok_or_else(|| Error::InvalidArgument("LoadOps.VIEW needs a source".into()))?;
            let offset = src.st().views.first().map(|v| v.offset.clone());
            let Some(offset) = offset.and_then(|o| o.as_int()) else {
                return Err(Error::InvalidArgument(format!(
                    "LoadOps.VIEW of {src:?}: the view offset must be an integer"
                )));
            };
            let byte_offset = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_mul(src.dtype().itemsize()))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!("LoadOps.VIEW of {src:?}: bad offset {offset}"))
                })?;
            src.base().buffer().view(size, dtype, byte_offset)
        }
        _ => {
            // the buffer allocates through the registry's table: make sure it knows the built-ins
            register_builtin_families();
            Ok(Buffer::new(device, size, dtype, BufferOptions::default()))
        }
    }
}

impl Drop for LbInner {
    fn drop(&mut self) {
        let mut pending = Vec::new();
        self.release(self as *const LbInner, &mut pending);
        while let Some(lb) = pending.pop() {
            let ptr = Arc::as_ptr(&lb.0);
            if let Ok(mut inner) = Arc::try_unwrap(lb.0) {
                inner.release(ptr, &mut pending);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Accessors

impl LazyBuffer {
    fn inner(&self) -> &LbInner {
        &self.0
    }

    fn base_data(&self) -> Option<&BaseData> {
        match &self.base().0.kind {
            Kind::Base(b) => Some(b),
            _ => None,
        }
    }

    /// A number unique to this node while it lives (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const u8 as usize
    }

    /// The device name.
    pub fn device(&self) -> &str {
        &self.inner().device
    }
    pub(crate) fn device_arc(&self) -> &Arc<str> {
        &self.inner().device
    }
    pub fn st(&self) -> &ShapeTracker {
        &self.inner().st
    }
    pub fn shape(&self) -> &[Sint] {
        self.inner().st.shape()
    }
    pub fn dtype(&self) -> DType {
        self.inner().dtype
    }
    /// Element count (symbolic dims at their max): `st.size`.
    pub fn size(&self) -> usize {
        self.inner().size
    }

    /// The base (this node when it is a base).
    pub fn base(&self) -> &LazyBuffer {
        match &self.inner().kind {
            Kind::View(b) => b,
            _ => self,
        }
    }
    pub fn is_base(&self) -> bool {
        !matches!(self.inner().kind, Kind::View(_))
    }

    /// The op of the base.
    pub fn op(&self) -> Op {
        self.base_data()
            .map(|b| b.op)
            .unwrap_or(Op::Load(LoadOps::EMPTY))
    }
    /// The arg of the base.
    pub fn arg(&self) -> &LbArg {
        self.base_data().map(|b| &b.arg).unwrap_or(&LbArg::None)
    }
    /// The sources of the base; `None` once it is realized.
    pub fn srcs(&self) -> Option<Arc<[LazyBuffer]>> {
        self.base_data().and_then(|b| lock(&b.srcs).clone())
    }
    /// The device buffer of the base (a view reads its base's buffer).
    pub fn buffer(&self) -> &BufferRef {
        &self.inner().buffer
    }

    /// tinygrad's `realized`: the buffer of a base whose sources were taken; `None` for views
    /// and for unrealized bases (including scheduled assigns that have not run).
    pub fn realized(&self) -> Option<BufferRef> {
        match &self.inner().kind {
            Kind::Base(b) if lock(&b.srcs).is_none() => Some(self.inner().buffer.clone()),
            _ => None,
        }
    }
    /// `realized().is_some()` without taking a handle to the buffer.
    pub fn has_realized(&self) -> bool {
        matches!(&self.inner().kind, Kind::Base(b) if lock(&b.srcs).is_none())
    }
    /// Alias of [`LazyBuffer::realized`] on the base: the buffer once the base is realized.
    pub fn realized_buffer(&self) -> Option<BufferRef> {
        self.base().realized()
    }
    /// `base.realized is not None`.
    pub fn is_realized(&self) -> bool {
        self.base().has_realized()
    }
    /// Take the base's sources: from now on it counts as realized (tinygrad's `del lb.srcs`).
    pub fn mark_realized(&self) {
        if let Some(b) = self.base_data() {
            let taken = lock(&b.srcs).take();
            drop(taken);
        }
    }

    /// Whether the base must be realized (set by `contiguous()` of an already contiguous node).
    pub fn forced_realize(&self) -> bool {
        self.base_data()
            .is_some_and(|b| b.forced_realize.load(Ordering::Acquire))
    }
    pub(crate) fn set_forced_realize(&self) {
        if let Some(b) = self.base_data() {
            b.forced_realize.store(true, Ordering::Release);
        }
    }

    /// The live result of `contiguous()` on a view of this base, with the ShapeTracker that maps
    /// the base's shape onto it.
    pub fn contiguous_child(&self) -> Option<(LazyBuffer, ShapeTracker)> {
        let b = match &self.inner().kind {
            Kind::Base(b) => b,
            _ => return None,
        };
        let (weak, st) = lock(&b.contiguous_child).clone()?;
        weak.upgrade().map(|c| (LazyBuffer(c), st))
    }
    pub(crate) fn set_contiguous_child(&self, child: &LazyBuffer, st: ShapeTracker) {
        if let Some(b) = self.base_data() {
            *lock(&b.contiguous_child) = Some((Arc::downgrade(&child.0), st));
        }
    }

    /// The constant of an unrealized CONST base.
    pub fn const_arg(&self) -> Option<&ConstArg> {
        match self.arg() {
            LbArg::Const(c) if self.op() == Op::Load(LoadOps::CONST) => Some(c),
            _ => None,
        }
    }

    /// An unrealized CONST whose value is a number (not a Variable).
    pub fn is_unrealized_const(&self) -> bool {
        !self.is_realized() && matches!(self.base().const_arg(), Some(ConstArg::Value(_)))
    }
    /// An unrealized numeric CONST seen through views without masks.
    pub fn is_unrealized_unmasked_const(&self) -> bool {
        self.is_unrealized_const() && self.st().views.iter().all(|v| v.mask.is_none())
    }
    /// The number of an unrealized numeric CONST (through views).
    pub(crate) fn const_value(&self) -> Option<ConstValue> {
        match self.base().const_arg() {
            Some(ConstArg::Value(v)) if !self.is_realized() => Some(*v),
            _ => None,
        }
    }

    /// A realized base over an existing buffer (Tensor creation from host data: the caller
    /// allocates `buf` on the target device and copies the bytes in). `shape` must hold
    /// `buf.size()` elements.
    pub fn from_buffer(buf: BufferRef, shape: &[Sint]) -> Result<LazyBuffer> {
        let st = ShapeTracker::from_shape(shape)?;
        let size = st_size(&st)?;
        ensure!(
            size == buf.size(),
            InvalidArgument,
            "from_buffer: shape {} holds {size} elements but {buf:?} holds {}",
            render_shape(shape),
            buf.size()
        );
        buf.lb_ref(1);
        let inner = LbInner {
            device: Arc::from(buf.device()),
            st,
            dtype: buf.dtype(),
            size,
            buffer: buf,
            kind: Kind::Base(BaseData {
                op: Op::Load(LoadOps::EMPTY),
                arg: LbArg::None,
                srcs: Mutex::new(None),
                forced_realize: AtomicBool::new(false),
                contiguous_child: Mutex::new(None),
            }),
            cache_key: None,
            released: false,
        };
        Ok(LazyBuffer(Arc::new(inner)))
    }
}

impl PartialEq for LazyBuffer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for LazyBuffer {}
impl Hash for LazyBuffer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl fmt::Debug for LazyBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = self.dtype();
        write!(
            f,
            "<LB {} {} {}",
            self.device(),
            render_shape(self.shape()),
            dt.name()
        )?;
        match &self.inner().kind {
            Kind::View(_) => write!(f, " {:?}>", self.st()),
            Kind::Base(b) => {
                let realized = self.realized().map(|r| format!("{r:?}"));
                write!(
                    f,
                    " ({}, {})>",
                    b.op.name(),
                    realized.as_deref().unwrap_or("None")
                )
            }
            Kind::Released => write!(f, " released>"),
        }
    }
}
