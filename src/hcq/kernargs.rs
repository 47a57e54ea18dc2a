//! The kernarg ring: one CPU-writable buffer per device, handed out by a bump pointer that wraps
//! to the start when it reaches the end. Each region remembers the timeline point of the launch
//! that reads it; a region is reused only after the timeline passed that point (the device waits
//! if it must), unlike tinygrad 0.9.2, which wraps without checking.
//!
//! Not guaranteed: thread safety (the device keeps it under its lock).

use std::collections::VecDeque;

use super::timeline::TimelinePoint;
use crate::{ensure, Result};

/// Alignment of every kernarg region (the kernarg pointer must be 16-byte aligned; 64 keeps a
/// trailing dispatch packet aligned too).
pub(crate) const KERNARG_ALIGN: usize = 64;

pub(crate) struct KernargRing {
    size: usize,
    head: usize,
    /// Regions not yet seen free: (start, end, point), in allocation order.
    live: VecDeque<(usize, usize, TimelinePoint)>,
}

impl KernargRing {
    pub(crate) fn new(size: usize) -> KernargRing {
        KernargRing {
            size,
            head: 0,
            live: VecDeque::new(),
        }
    }

    /// Where the next region of `n` bytes goes: `(start, end, wait)`, where `wait` is the
    /// newest older launch still reading that space (the caller waits for it, then calls
    /// [`KernargRing::take`]). `passed` tells whether a point is done.
    pub(crate) fn plan(
        &mut self,
        n: usize,
        passed: &dyn Fn(TimelinePoint) -> Result<bool>,
    ) -> Result<(usize, usize, Option<TimelinePoint>)> {
        let n = n.max(1).div_ceil(KERNARG_ALIGN) * KERNARG_ALIGN;
        ensure!(
            n <= self.size,
            InvalidArgument,
            "kernargs: {n} bytes do not fit the {}-byte kernarg ring",
            self.size
        );
        while let Some(&(_, _, p)) = self.live.front() {
            if !passed(p)? {
                break;
            }
            self.live.pop_front();
        }
        let start = if self.head + n > self.size {
            0
        } else {
            self.head
        };
        let end = start + n;
        let newest = self
            .live
            .iter()
            .rev()
            .find(|(s, e, _)| *s < end && start < *e)
            .map(|(_, _, p)| *p);
        Ok((start, end, newest))
    }

    /// Claim `[start, end)` (from [`KernargRing::plan`], after waiting) for the launch at
    /// `point`.
    pub(crate) fn take(&mut self, start: usize, end: usize, point: TimelinePoint) {
        self.live.retain(|(s, e, _)| !(*s < end && start < *e));
        self.head = end;
        self.live.push_back((start, end, point));
    }

    /// Forget every region (the device is idle, or its queues were reset).
    pub(crate) fn clear(&mut self) {
        self.live.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(v: u64) -> TimelinePoint {
        TimelinePoint { epoch: 0, value: v }
    }

    /// plan + (simulated) wait + take.
    fn alloc(
        r: &mut KernargRing,
        n: usize,
        v: u64,
        done: &mut u64,
        waited: &mut Vec<u64>,
    ) -> usize {
        let d = *done;
        let (s, e, need) = r.plan(n, &|p| Ok(p.value <= d)).unwrap();
        if let Some(p) = need {
            waited.push(p.value);
            *done = p.value;
        }
        r.take(s, e, pt(v));
        s
    }

    #[test]
    fn wraps_and_waits_only_for_overlapping_live_regions() {
        let mut r = KernargRing::new(256);
        let (mut done, mut waited) = (0u64, Vec::new());
        assert_eq!(alloc(&mut r, 10, 1, &mut done, &mut waited), 0);
        assert_eq!(alloc(&mut r, 64, 2, &mut done, &mut waited), 64);
        assert_eq!(alloc(&mut r, 100, 3, &mut done, &mut waited), 128);
        assert!(waited.is_empty());
        // Does not fit at 256: wraps to 0 and overlaps launches 1 and 2 -> waits for 2.
        assert_eq!(alloc(&mut r, 100, 4, &mut done, &mut waited), 0);
        assert_eq!(waited, vec![2]);
        // 128.. is still held by launch 3.
        assert_eq!(alloc(&mut r, 64, 5, &mut done, &mut waited), 128);
        assert_eq!(waited, vec![2, 3]);
        assert!(r.plan(300, &|_| Ok(true)).is_err());
    }
}
