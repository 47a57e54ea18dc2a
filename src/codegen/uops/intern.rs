//! Hash-consing of UOp nodes (beyond tinygrad 0.9.1, which builds a new Python object per UOp and
//! deduplicates them in its rewrite passes): [`UOp::new`](super::UOp::new) returns the live node
//! of equal structure (op, dtype, sources, arg) built before on this thread instead of a second
//! one, so a kernel's graph holds each structure once and the rewrite passes find sources that
//! are the very same nodes (no rebuild of everything above a duplicated leaf).
//!
//! Owns: the per-thread table from structural hash to a weak handle of the node, the lookup and
//! insert [`UOp::new`](super::UOp::new) uses, and the removal a node's drop does, so a dropped
//! graph leaves no entries and its memory is freed when it drops (the table holds no strong
//! reference). Entries of nodes dropped on another thread, or while the table was busy, are dead
//! weak handles: replaced by the next node of that hash, and swept whenever the table has doubled
//! since the last sweep.
//!
//! Also owns the per-thread pool of node shells: a node whose last reference goes away in a graph
//! being taken apart (`uops/srcs.rs`), or a new node that interning found already built, keeps
//! its allocation (sources moved out, argument dropped, table entry removed) for the next
//! [`UOp::new`](super::UOp::new) on this thread, so building and dropping graphs does not go
//! through the allocator once per node. The pool is capped at [`POOL_CAP`] shells per thread.
//!
//! Not guaranteed: that equal nodes are one allocation. Nodes built on different threads are
//! distinct, and of two different structures with one 64-bit hash only the first is interned; so
//! equality and hashing stay structural (pointer equality is only the fast path) and the rewrite
//! passes keep deduplicating structurally.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Weak};

use super::{UOpHasher, UOpInner};

/// The fewest entries at which the table sweeps dead entries.
const MIN_SWEEP: usize = 4096;

/// The most node shells a thread keeps for reuse.
pub(super) const POOL_CAP: usize = 4096;

struct Table {
    /// Structural hash (already mixed, used as is) -> the node with that hash.
    map: HashMap<u64, Weak<UOpInner>, BuildHasherDefault<UOpHasher>>,
    /// The size at which dead entries are swept next.
    sweep_at: usize,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        map: HashMap::default(),
        sweep_at: MIN_SWEEP,
    });
    /// Unique allocations whose node owns nothing (no sources, `UArg::None`), for reuse.
    static POOL: RefCell<Vec<Arc<UOpInner>>> = const { RefCell::new(Vec::new()) };
}

/// `inner` in a node allocation: a pooled shell when there is one, else a new one.
fn alloc(inner: UOpInner) -> Arc<UOpInner> {
    let shell = POOL
        .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
        .ok()
        .flatten();
    match shell {
        Some(mut a) => match Arc::get_mut(&mut a) {
            Some(slot) => {
                // a shell owns nothing: no drop (nor table removal) for it
                std::mem::forget(std::mem::replace(slot, inner));
                a
            }
            None => Arc::new(inner),
        },
        None => Arc::new(inner),
    }
}

/// Keep the allocation of `node`, the only reference to a node the table does not point to
/// (see [`unlink`]), for reuse: its sources are moved into `srcs_to` and its argument dropped.
/// `node` drops as usual when it is shared after all or the pool is full.
pub(super) fn recycle(mut node: Arc<UOpInner>, srcs_to: impl FnMut(super::UOp)) {
    let Some(inner) = Arc::get_mut(&mut node) else {
        return;
    };
    inner.src.drain(srcs_to);
    inner.arg = super::UArg::None;
    let _full = POOL.try_with(|p| {
        let mut p = p.try_borrow_mut().ok()?;
        if p.len() < POOL_CAP {
            p.push(node);
            None
        } else {
            Some(node)
        }
    });
}

/// Remove the table's entry for `node` if it is this very node (about to be taken apart or
/// recycled while still alive), so the table holds no weak handle to it.
pub(super) fn unlink(node: &Arc<UOpInner>) {
    let _old = TABLE.try_with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        match t.map.entry(node.hash) {
            Entry::Occupied(e) if std::ptr::eq(e.get().as_ptr(), Arc::as_ptr(node)) => {
                Some(e.remove())
            }
            _ => None,
        }
    });
}

/// Whether two nodes have one structure.
fn same(a: &UOpInner, b: &UOpInner) -> bool {
    a.op == b.op && a.dtype == b.dtype && a.arg == b.arg && a.src == b.src
}

/// The live node of `inner`'s structure built before on this thread, else `inner` in a new
/// node (interned unless a live node of another structure has its hash), with one probe of the
/// table: the node is built first, so a miss (the common case) fills the probed slot at once; a
/// hit drops the new node, and a replaced dead handle drops, after the table's borrow ends (their
/// drops may remove entries).
pub(super) fn intern(inner: UOpInner) -> Arc<UOpInner> {
    let node = alloc(inner);
    let (found, _dead) = TABLE
        .try_with(|t| {
            let Ok(mut t) = t.try_borrow_mut() else {
                return (None, None);
            };
            let dead = match t.map.entry(node.hash) {
                Entry::Occupied(mut e) => match e.get().upgrade() {
                    // a live node of this structure, or of another one (not interned)
                    Some(n) => return (same(&n, &node).then_some(n), None),
                    None => Some(e.insert(Arc::downgrade(&node))),
                },
                Entry::Vacant(e) => {
                    e.insert(Arc::downgrade(&node));
                    None
                }
            };
            if t.map.len() >= t.sweep_at {
                t.map.retain(|_, w| w.strong_count() > 0);
                t.sweep_at = MIN_SWEEP.max(2 * t.map.len());
            }
            (None, dead)
        })
        .unwrap_or((None, None));
    match found {
        Some(n) => {
            // the new node was never in the table: its shell goes back to the pool
            recycle(node, drop);
            n
        }
        None => node,
    }
}

/// A node of hash `hash` is being dropped: remove the table's entry for the hash if its node is
/// gone (it is this node, or another dead one).
pub(super) fn forget(hash: u64) {
    let _old = TABLE.try_with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        match t.map.entry(hash) {
            Entry::Occupied(e) if e.get().strong_count() == 0 => Some(e.remove()),
            _ => None,
        }
    });
}

/// The number of table entries of this thread (live or not yet swept).
#[cfg(test)]
fn entries() -> usize {
    TABLE.try_with(|t| t.borrow().map.len()).unwrap_or(0)
}

/// The number of node shells pooled on this thread.
#[cfg(test)]
fn pooled() -> usize {
    POOL.try_with(|p| p.borrow().len()).unwrap_or(0)
}

#[cfg(test)]
#[path = "intern_tests.rs"]
mod tests;
