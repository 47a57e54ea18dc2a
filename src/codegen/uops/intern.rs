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
    let node = Arc::new(inner);
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
    found.unwrap_or(node)
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
