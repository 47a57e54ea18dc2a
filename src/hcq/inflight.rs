//! In-flight keep-alive (Asahi's `pending` list): every submission on the timeline holds what it
//! touches (buffers, programs, signals) until the timeline passes its value; freeing a buffer
//! while a submission holds it only drops one reference, so the memory is released when the GPU
//! is done. Also the source of the "pending work" part of fault reports.
//!
//! Not guaranteed: entries are retired only when the device looks (each submission and each
//! synchronize), so memory may be held a little longer than needed.

use std::collections::VecDeque;
use std::fmt::{self, Write};
use std::sync::Arc;

use super::timeline::TimelinePoint;
use super::KeepAlive;

/// What a submission is, for fault reports: its own text, or a text every run of one graph
/// shares (a run then allocates no text).
pub(crate) enum What {
    Text(String),
    Shared(Arc<str>),
}

impl From<String> for What {
    fn from(s: String) -> What {
        What::Text(s)
    }
}

impl From<&Arc<str>> for What {
    fn from(s: &Arc<str>) -> What {
        What::Shared(s.clone())
    }
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Text(s) => f.write_str(s),
            What::Shared(s) => f.write_str(s),
        }
    }
}

/// What a submission keeps alive: a list, or one object (a graph run's: no list allocated).
pub(crate) enum Keep {
    List(Vec<KeepAlive>),
    One(KeepAlive),
}

impl From<Vec<KeepAlive>> for Keep {
    fn from(v: Vec<KeepAlive>) -> Keep {
        Keep::List(v)
    }
}

impl From<KeepAlive> for Keep {
    fn from(k: KeepAlive) -> Keep {
        Keep::One(k)
    }
}

impl Keep {
    /// `self` and `more` (a list only when `more` holds anything).
    pub(crate) fn with(self, more: Vec<KeepAlive>) -> Keep {
        if more.is_empty() {
            return self;
        }
        let mut v = match self {
            Keep::List(v) => v,
            Keep::One(k) => vec![k],
        };
        v.extend(more);
        Keep::List(v)
    }
}

/// One submission that has not been seen complete.
pub(crate) struct Pending {
    pub(crate) point: TimelinePoint,
    pub(crate) what: What,
    #[allow(dead_code)] // held, never read: dropping it releases the memory
    pub(crate) keep: Keep,
}

/// The submissions in timeline order.
#[derive(Default)]
pub(crate) struct InFlight {
    pending: VecDeque<Pending>,
}

impl InFlight {
    pub(crate) fn push(&mut self, point: TimelinePoint, what: What, keep: Keep) {
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
