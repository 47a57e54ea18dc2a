//! The DFS post-order of a UOp graph that the rewrite passes walk ([`PostOrder`]), and the
//! per-thread pool of its address maps ([`SeenMap`]): a pass takes a map sized by earlier passes
//! instead of growing a new one node by node, and gives it back (cleared) when it drops.
//!
//! Owns: the order and the pool. Not guaranteed: anything about nodes that are not alive while
//! an order borrows them (keys are addresses; a map comes back from the pool empty, so no key
//! outlives the pass that wrote it).

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::codegen::uops::UOp;
use crate::helpers::FxBuild;

/// The `by_ptr` key of a node: its address over 16 (nodes are larger than that, so live nodes
/// have distinct keys; FxHasher keeps the zero low bits of an aligned address, and hashbrown picks
/// buckets by the low bits).
pub(super) fn ptr_key(n: &UOp) -> usize {
    n.node_id() >> 4
}

/// Maps the pool keeps per thread (a pass holds at most two at once).
const POOL_MAPS: usize = 4;
/// A map with more capacity than this is freed instead of pooled.
const POOL_MAX_CAPACITY: usize = 1 << 20;

type AddrMap = HashMap<usize, usize, FxBuild>;

thread_local! {
    static POOL: RefCell<Vec<AddrMap>> = const { RefCell::new(Vec::new()) };
}

/// Node address (see [`ptr_key`]) -> a number, from the thread's pool; back to it, cleared, when
/// dropped.
#[derive(Default)]
pub(crate) struct SeenMap(AddrMap);

impl SeenMap {
    /// An empty map (a pooled one when there is one).
    pub(crate) fn take() -> SeenMap {
        let pooled = POOL
            .try_with(|p| p.try_borrow_mut().ok()?.pop())
            .ok()
            .flatten();
        SeenMap(pooled.unwrap_or_default())
    }
    pub(crate) fn get(&self, k: &usize) -> Option<&usize> {
        self.0.get(k)
    }
}

impl Drop for SeenMap {
    fn drop(&mut self) {
        let mut m = std::mem::take(&mut self.0);
        if m.capacity() == 0 || m.capacity() > POOL_MAX_CAPACITY {
            return;
        }
        m.clear();
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < POOL_MAPS {
                    p.push(m);
                }
            }
        });
    }
}

/// Node address (see [`ptr_key`]) -> post-order position, for the nodes of a [`PostOrder`]: the
/// map holds each node's pre-order number (entered once, when the node is first reached) and
/// `post` turns it into the position the node got when complete.
#[derive(Default)]
pub(crate) struct Positions {
    seen: SeenMap,
    post: Vec<usize>,
}

impl Positions {
    /// The post-order position of the node with key `k`.
    pub(crate) fn get(&self, k: usize) -> Option<usize> {
        self.seen
            .get(&k)
            .and_then(|&pre| self.post.get(pre).copied())
    }
}

/// The nodes under a root in DFS post-order (sources first, in order; each node once, by
/// address), borrowed from the graph, with each node's sources as positions in that order.
///
/// The source positions of a node are one run of `src_ids`, reserved when the node is first
/// reached (so the runs lie in pre-order) and filled in place: a source already complete writes
/// its position at once, a source first reached there writes it when it completes.
pub(crate) struct PostOrder<'a> {
    pub(crate) nodes: Vec<&'a UOp>,
    /// Per position: the start of the node's run in `src_ids` (its length is the node's source
    /// count).
    src_at: Vec<usize>,
    src_ids: Vec<usize>,
    pub(super) positions: Positions,
}

/// A node [`PostOrder::of`] is walking: the node, its next source, its pre-order number, its run
/// in `src_ids`, and the slot of its parent's run it fills (`usize::MAX` for the root).
struct Frame<'a> {
    node: &'a UOp,
    /// The node's sources (read once).
    src: &'a [UOp],
    next: usize,
    pre: usize,
    run: usize,
    slot: usize,
}

impl<'a> PostOrder<'a> {
    /// The positions of the sources of the node at position `i`.
    pub(crate) fn srcs(&self, i: usize) -> &[usize] {
        let at = self.src_at[i];
        &self.src_ids[at..at + self.nodes[i].src().len()]
    }

    pub(crate) fn of(root: &'a UOp) -> PostOrder<'a> {
        // a node is entered in `seen` with its pre-order number when first reached (one probe per
        // node) and gets its position in `post` when complete; a source reached again is always
        // complete (immutable nodes form no cycles, so a pending node is never a source of its
        // own descendants)
        const PENDING: usize = usize::MAX;
        let mut seen = SeenMap::take();
        let map = &mut seen.0;
        map.insert(ptr_key(root), 0);
        let cap = map.capacity() / 2;
        let mut post = Vec::with_capacity(cap);
        post.push(PENDING);
        let mut nodes = Vec::with_capacity(cap);
        let mut src_at = Vec::with_capacity(cap);
        let mut src_ids = Vec::with_capacity(2 * cap);
        src_ids.resize(root.src().len(), PENDING);
        let mut stack: Vec<Frame<'a>> = vec![Frame {
            node: root,
            src: root.src(),
            next: 0,
            pre: 0,
            run: 0,
            slot: PENDING,
        }];
        while let Some(f) = stack.last_mut() {
            if let Some(s) = f.src.get(f.next) {
                let slot = f.run + f.next;
                f.next += 1;
                match map.entry(ptr_key(s)) {
                    Entry::Occupied(e) => src_ids[slot] = post[*e.get()],
                    Entry::Vacant(e) => {
                        let pre = post.len();
                        e.insert(pre);
                        post.push(PENDING);
                        let run = src_ids.len();
                        let src = s.src();
                        src_ids.resize(run + src.len(), PENDING);
                        stack.push(Frame {
                            node: s,
                            src,
                            next: 0,
                            pre,
                            run,
                            slot,
                        });
                    }
                }
                continue;
            }
            let (node, pre, run, slot) = (f.node, f.pre, f.run, f.slot);
            stack.pop();
            let id = nodes.len();
            post[pre] = id;
            nodes.push(node);
            src_at.push(run);
            if let Some(s) = src_ids.get_mut(slot) {
                *s = id;
            }
        }
        PostOrder {
            nodes,
            src_at,
            src_ids,
            positions: Positions { seen, post },
        }
    }
}
