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
}

/// What the table holds for a hash.
enum Slot {
    /// A live node of this structure.
    Same(Arc<UOpInner>),
    /// A live node of another structure (a hash collision): the new node is not interned.
    Other,
    /// Nothing alive.
    Free,
}

/// The live node of `inner`'s structure built before on this thread, else `inner` in a new
/// node (interned unless a live node of another structure has its hash). An unused `inner` drops
/// outside the table's borrow (its drop may remove entries).
pub(super) fn intern(inner: UOpInner) -> Arc<UOpInner> {
    let hash = inner.hash;
    let same = |n: &UOpInner| {
        n.op == inner.op && n.dtype == inner.dtype && n.arg == inner.arg && n.src == inner.src
    };
    let slot = TABLE
        .try_with(|t| {
            let Ok(t) = t.try_borrow() else {
                return Slot::Other;
            };
            match t.map.get(&hash).and_then(Weak::upgrade) {
                Some(n) if same(&n) => Slot::Same(n),
                Some(_) => Slot::Other,
                None => Slot::Free,
            }
        })
        .unwrap_or(Slot::Other);
    let node = match slot {
        Slot::Same(n) => return n,
        Slot::Other => return Arc::new(inner),
        Slot::Free => Arc::new(inner),
    };
    let weak = Arc::downgrade(&node);
    // a replaced (dead) handle is dropped after the borrow ends
    let _old = TABLE.try_with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        let old = t.map.insert(hash, weak);
        if t.map.len() >= t.sweep_at {
            t.map.retain(|_, w| w.strong_count() > 0);
            t.sweep_at = MIN_SWEEP.max(2 * t.map.len());
        }
        old
    });
    node
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

#[cfg(test)]
#[path = "intern_tests.rs"]
mod tests;
