//! In-flight keep-alive (Asahi's `pending` list): every submission on the timeline holds what it
//! touches (buffers, programs, signals) until the timeline passes its value; freeing a buffer
//! while a submission holds it only drops one reference, so the memory is released when the GPU
//! is done. Also the source of the "pending work" part of fault reports.
//!
//! Not guaranteed: entries are retired only when the device looks (each submission and each
//! synchronize), so memory may be held a little longer than needed.

use std::collections::VecDeque;
use std::fmt::Write;

use super::timeline::TimelinePoint;
use super::KeepAlive;

/// One submission that has not been seen complete.
pub(crate) struct Pending {
    pub(crate) point: TimelinePoint,
    pub(crate) what: String,
    #[allow(dead_code)] // held, never read: dropping it releases the memory
    pub(crate) keep: Vec<KeepAlive>,
}

/// The submissions in timeline order.
#[derive(Default)]
pub(crate) struct InFlight {
    pending: VecDeque<Pending>,
}

impl InFlight {
    pub(crate) fn push(&mut self, point: TimelinePoint, what: String, keep: Vec<KeepAlive>) {
        self.pending.push_back(Pending { point, what, keep });
    }

    /// Drop the entries `passed` says are done (in order; stops at the first one that is not).
    pub(crate) fn retire(
        &mut self,
        passed: impl Fn(TimelinePoint) -> crate::Result<bool>,
    ) -> crate::Result<()> {
        while let Some(front) = self.pending.front() {
            if !passed(front.point)? {
                break;
            }
            self.pending.pop_front();
        }
        Ok(())
    }

    /// Drop every entry (after a synchronize, or when the queues were reset).
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// `v5 exec E_4; v6 copy 4096 bytes` (the last `max` entries).
    pub(crate) fn describe(&self, max: usize) -> String {
        if self.pending.is_empty() {
            return "none".into();
        }
        let mut s = String::new();
        let skip = self.pending.len().saturating_sub(max);
        if skip > 0 {
            let _ = write!(s, "({skip} older) ");
        }
        for (i, p) in self.pending.iter().skip(skip).enumerate() {
            if i > 0 {
                s.push_str("; ");
            }
            let _ = write!(s, "v{} {}", p.point.value, p.what);
        }
        s
    }
}
