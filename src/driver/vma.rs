//! [`VmaMap`]: a map of non-overlapping address ranges `[start, end)` to values, with the split
//! semantics of `mmap`/`munmap`: mapping over part of a range splits it, unmapping part of a range
//! leaves the rest. Both drivers use it to know which addresses they mapped (so a `MAP_FIXED` or
//! `munmap` can never touch memory they do not own) and what each piece is.
//!
//! Every entry remembers the `base` address of the whole mapping it came from, so a piece split
//! off a larger mapping still knows its offset into the original (`addr - base`).
//!
//! Not guaranteed: lookups are O(log n) in the number of pieces; nothing merges adjacent pieces.

use std::collections::BTreeMap;

/// One piece of a mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma<T> {
    pub start: u64,
    pub end: u64,
    /// Start address of the mapping this piece was created by (before any split).
    pub base: u64,
    pub value: T,
}

impl<T> Vma<T> {
    /// Offset of `addr` into the original mapping.
    pub fn offset_of(&self, addr: u64) -> u64 {
        addr - self.base
    }
}

/// Non-overlapping ranges with mmap-like split semantics.
#[derive(Debug)]
pub struct VmaMap<T: Clone> {
    map: BTreeMap<u64, Vma<T>>,
}

impl<T: Clone> Default for VmaMap<T> {
    fn default() -> Self {
        VmaMap {
            map: BTreeMap::new(),
        }
    }
}

impl<T: Clone> VmaMap<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cut `[start, end)` out of the map, splitting pieces that straddle its edges; returns the
    /// removed pieces (clipped to the range), in address order.
    pub fn remove(&mut self, start: u64, end: u64) -> Vec<Vma<T>> {
        if start >= end {
            return Vec::new();
        }
        self.split_at(start);
        self.split_at(end);
        let keys: Vec<u64> = self.map.range(start..end).map(|(k, _)| *k).collect();
        keys.into_iter()
            .filter_map(|k| self.map.remove(&k))
            .collect()
    }

    /// Map `[start, end)` to `value` (a new mapping whose base is `start`), replacing whatever
    /// was there.
    pub fn insert(&mut self, start: u64, end: u64, value: T) {
        if start >= end {
            return;
        }
        self.remove(start, end);
        self.map.insert(
            start,
            Vma {
                start,
                end,
                base: start,
                value,
            },
        );
    }

    /// The piece containing `addr`.
    pub fn get(&self, addr: u64) -> Option<&Vma<T>> {
        self.map
            .range(..=addr)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| addr < v.end)
    }

    /// The pieces overlapping `[start, end)`, in address order (not clipped).
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<&Vma<T>> {
        let mut out = Vec::new();
        if start >= end {
            return out;
        }
        if let Some(first) = self.get(start) {
            out.push(first);
        }
        for (k, v) in self.map.range(start..end) {
            if out.last().map(|l| l.start) != Some(*k) {
                out.push(v);
            }
        }
        out
    }

    /// Whether every byte of `[start, end)` lies in some piece.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return false;
        }
        let mut at = start;
        for v in self.overlapping(start, end) {
            if v.start > at {
                return false;
            }
            at = at.max(v.end);
        }
        at >= end
    }

    /// All pieces in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Vma<T>> {
        self.map.values()
    }

    /// Number of pieces.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn split_at(&mut self, addr: u64) {
        let Some((&k, v)) = self.map.range(..addr).next_back() else {
            return;
        };
        if v.end <= addr {
            return;
        }
        let mut tail = v.clone();
        tail.start = addr;
        if let Some(head) = self.map.get_mut(&k) {
            head.end = addr;
        }
        self.map.insert(addr, tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_cover() {
        let mut m: VmaMap<u32> = VmaMap::new();
        m.insert(0x1000, 0x5000, 1);
        m.insert(0x2000, 0x3000, 2);
        let pieces: Vec<(u64, u64, u32, u64)> = m
            .iter()
            .map(|v| (v.start, v.end, v.value, v.base))
            .collect();
        assert_eq!(
            pieces,
            vec![
                (0x1000, 0x2000, 1, 0x1000),
                (0x2000, 0x3000, 2, 0x2000),
                (0x3000, 0x5000, 1, 0x1000)
            ]
        );
        assert!(m.covers(0x1000, 0x5000));
        assert!(!m.covers(0x1000, 0x5001));
        assert_eq!(m.get(0x3800).map(|v| v.offset_of(0x3800)), Some(0x2800));
        let removed = m.remove(0x1800, 0x3800);
        assert_eq!(removed.len(), 3);
        assert_eq!((removed[0].start, removed[0].end), (0x1800, 0x2000));
        assert!(!m.covers(0x1000, 0x5000));
        assert!(m.covers(0x3800, 0x5000));
        assert!(m.get(0x2000).is_none());
        assert_eq!(m.overlapping(0x0, 0x10000).len(), 2);
    }
}
