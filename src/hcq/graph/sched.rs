//! The dependency schedule of a multi-device graph (tinygrad 0.9.1 `MultiGraphRunner.
//! _access_resources` and `HCQGraph.access_resources`): which earlier items, and which devices'
//! kickoffs, each item of a batch waits for, and which copy queues each device's compute queue
//! waits for before it signals its timeline.
//!
//! Rules: a buffer has one writer or many readers at a time. An item waits for the last writer of
//! everything it reads or writes, and for the readers since then of everything it writes (per
//! queue, only the latest such item: a queue runs in order). A kernel also waits for the kernel
//! before it on its compute queue (the order the eager path gives launches). A queue that touches
//! a device's buffer for the first time (not known through what it already waited for) waits for
//! that device's kickoff: the point where the device's compute queue saw every earlier submission
//! of that device finish. At the end each device's compute queue waits for its own copy queue and
//! for the copy queues that copied into its memory.
//!
//! Not guaranteed: the schedule is of buffer identities; two different allocations that alias
//! (none do in this crate) would not be ordered.

use std::collections::{BTreeSet, HashMap};

/// A queue of the graph: device index, and compute or copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId {
    pub dev: usize,
    pub copy: bool,
}

/// A buffer an item touches: its allocation's identity and its device index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub buf: usize,
    pub dev: usize,
}

/// One item of the batch as the schedule sees it.
#[derive(Clone, Debug)]
pub struct Item {
    pub queue: QueueId,
    pub reads: Vec<Access>,
    pub writes: Vec<Access>,
    pub kernel: bool,
}

/// What an item waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dep {
    /// Item `j` finished (the signal of its queue reached its value).
    Item(usize),
    /// Device `d`'s kickoff.
    Kickoff(usize),
}

/// The schedule of a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Per item, what it waits for.
    pub deps: Vec<Vec<Dep>>,
    /// Per device, the items (each the last of a copy queue) its compute queue waits for at the
    /// end.
    pub final_waits: Vec<Vec<usize>>,
}

/// The read/write maps of `_access_resources`.
#[derive(Default)]
struct Resources {
    writer: HashMap<usize, usize>,
    readers: HashMap<usize, Vec<usize>>,
}

impl Resources {
    /// The items `j` must wait for, then record `j` as reader/writer.
    fn access(&mut self, j: usize, read: &[Access], write: &[Access]) -> Vec<usize> {
        let mut wait = Vec::new();
        for a in read.iter().chain(write) {
            wait.extend(self.writer.get(&a.buf).copied());
        }
        for a in write {
            wait.extend(self.readers.remove(&a.buf).unwrap_or_default());
        }
        for a in read {
            self.readers.entry(a.buf).or_default().push(j);
        }
        for a in write {
            self.writer.insert(a.buf, j);
        }
        wait
    }
}

/// Schedule `items` over `ndev` devices (see the module doc).
pub fn schedule(items: &[Item], ndev: usize) -> Schedule {
    let mut res = Resources::default();
    let mut known: HashMap<QueueId, BTreeSet<usize>> = HashMap::new();
    let mut last: HashMap<QueueId, usize> = HashMap::new();
    let mut copies_into: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); ndev];
    let mut deps = Vec::with_capacity(items.len());
    for (j, it) in items.iter().enumerate() {
        let q = it.queue;
        let waited = res.access(j, &it.reads, &it.writes);
        // per queue, the latest item only
        let mut latest: HashMap<QueueId, usize> = HashMap::new();
        for &w in &waited {
            let e = latest.entry(items[w].queue).or_insert(w);
            *e = (*e).max(w);
        }
        if it.kernel {
            latest.remove(&q);
            if let Some(&prev) = last.get(&q) {
                latest.insert(q, prev);
            }
        }
        let mut mine = known.remove(&q).unwrap_or_else(|| {
            let mut s = BTreeSet::new();
            if !q.copy {
                s.insert(q.dev);
            }
            s
        });
        for dq in latest.keys() {
            if let Some(k) = known.get(dq) {
                mine.extend(k.iter().copied());
            } else if !dq.copy {
                mine.insert(dq.dev);
            }
        }
        let mut d: Vec<Dep> = latest.values().map(|&w| Dep::Item(w)).collect();
        d.sort_by_key(|x| match x {
            Dep::Item(w) => *w,
            Dep::Kickoff(_) => usize::MAX,
        });
        for a in it.reads.iter().chain(&it.writes) {
            if mine.insert(a.dev) {
                d.push(Dep::Kickoff(a.dev));
            }
        }
        known.insert(q, mine);
        if !it.kernel {
            for a in &it.writes {
                if let Some(s) = copies_into.get_mut(a.dev) {
                    s.insert(q.dev);
                }
            }
        }
        last.insert(q, j);
        deps.push(d);
    }
    let final_waits = (0..ndev)
        .map(|dev| {
            let mut from: BTreeSet<usize> = copies_into[dev].clone();
            from.insert(dev);
            from.iter()
                .filter_map(|&s| last.get(&QueueId { dev: s, copy: true }).copied())
                .collect()
        })
        .collect();
    Schedule { deps, final_waits }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C0: QueueId = QueueId {
        dev: 0,
        copy: false,
    };
    const X0: QueueId = QueueId { dev: 0, copy: true };
    const C1: QueueId = QueueId {
        dev: 1,
        copy: false,
    };

    fn acc(buf: usize, dev: usize) -> Access {
        Access { buf, dev }
    }

    fn kernel(q: QueueId, writes: &[usize], reads: &[usize]) -> Item {
        Item {
            queue: q,
            reads: reads.iter().map(|&b| acc(b, q.dev)).collect(),
            writes: writes.iter().map(|&b| acc(b, q.dev)).collect(),
            kernel: true,
        }
    }

    fn xfer(q: QueueId, dst: Access, src: Access) -> Item {
        Item {
            queue: q,
            reads: vec![src],
            writes: vec![dst],
            kernel: false,
        }
    }

    /// dev0: b1 = f(b0); copy b1 (dev0) -> b2 (dev1); dev1: b3 = g(b2).
    #[test]
    fn a_chain_over_two_devices_waits_for_writers_and_kickoffs() {
        let items = [
            kernel(C0, &[1], &[0]),
            xfer(X0, acc(2, 1), acc(1, 0)),
            kernel(C1, &[3], &[2]),
        ];
        let s = schedule(&items, 2);
        assert_eq!(s.deps[0], vec![]);
        // the copy waits for the kernel writing its source, and for dev1's kickoff (it writes
        // dev1 memory); dev0 is known through the kernel it waited for
        assert_eq!(s.deps[1], vec![Dep::Item(0), Dep::Kickoff(1)]);
        // the dev1 kernel waits for the copy; dev0 memory it does not touch
        assert_eq!(s.deps[2], vec![Dep::Item(1)]);
        // dev0 waits for its copy queue (it reads dev0 memory), dev1 for the copy into it
        assert_eq!(s.final_waits, vec![vec![1], vec![1]]);
    }

    #[test]
    fn writes_wait_for_earlier_readers_and_kernels_for_their_predecessor() {
        let items = [
            kernel(C0, &[1], &[0]),
            xfer(X0, acc(5, 1), acc(1, 0)),
            // overwrites b1 while the copy may still read it: waits for the copy
            kernel(C0, &[1], &[0]),
            // unrelated kernel: still after the previous kernel on its queue
            kernel(C0, &[7], &[6]),
        ];
        let s = schedule(&items, 2);
        assert_eq!(s.deps[2], vec![Dep::Item(0), Dep::Item(1)]);
        assert_eq!(s.deps[3], vec![Dep::Item(2)]);
    }

    #[test]
    fn a_copy_queue_waits_for_the_kickoff_of_every_device_it_first_touches() {
        let items = [
            xfer(X0, acc(2, 1), acc(1, 0)),
            xfer(X0, acc(3, 1), acc(4, 0)),
        ];
        let s = schedule(&items, 2);
        assert_eq!(s.deps[0], vec![Dep::Kickoff(0), Dep::Kickoff(1)]);
        assert_eq!(s.deps[1], vec![], "both devices known to the queue by now");
        assert_eq!(s.final_waits, vec![vec![1], vec![1]]);
    }
}
