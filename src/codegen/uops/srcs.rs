//! The source list of a UOp node ([`Srcs`], beyond tinygrad 0.9.1, where `src` is a tuple): up
//! to four sources are held in the node itself, so building a node with a fixed number of sources
//! (`[a, b]`, or a `collect` of at most four) allocates nothing besides the node, and a node that
//! hash-consing finds already built (`uops/intern.rs`) allocates nothing at all.
//!
//! Owns: the inline/heap representation, its conversions (from a `Vec`, an array, an iterator),
//! and taking a node apart when it drops (its sources moved out, iteratively). It reads as a `&[UOp]`
//! ([`Srcs::as_slice`], `Deref`); equality is the slices' equality.
//!
//! Not guaranteed: that a `Vec` of at most four sources keeps its allocation (it is moved inline
//! and freed; pass an array to avoid it).

use std::ops::Deref;
use std::sync::Arc;

use super::{intern, UOp, UOpInner};

/// The sources of a node, in order: inline up to four, else a `Vec`.
#[derive(Clone, Default)]
pub enum Srcs {
    #[default]
    N0,
    N1([UOp; 1]),
    N2([UOp; 2]),
    N3([UOp; 3]),
    N4([UOp; 4]),
    Many(Vec<UOp>),
}

impl Srcs {
    /// The sources as a slice.
    pub fn as_slice(&self) -> &[UOp] {
        match self {
            Srcs::N0 => &[],
            Srcs::N1(a) => a,
            Srcs::N2(a) => a,
            Srcs::N3(a) => a,
            Srcs::N4(a) => a,
            Srcs::Many(v) => v,
        }
    }

    /// Move every source out into `f`, in order, leaving no sources.
    pub(super) fn drain(&mut self, mut f: impl FnMut(UOp)) {
        match std::mem::take(self) {
            Srcs::N0 => {}
            Srcs::N1(a) => a.into_iter().for_each(&mut f),
            Srcs::N2(a) => a.into_iter().for_each(&mut f),
            Srcs::N3(a) => a.into_iter().for_each(&mut f),
            Srcs::N4(a) => a.into_iter().for_each(&mut f),
            Srcs::Many(v) => v.into_iter().for_each(&mut f),
        }
    }
}

impl Deref for Srcs {
    type Target = [UOp];
    fn deref(&self) -> &[UOp] {
        self.as_slice()
    }
}

impl PartialEq for Srcs {
    fn eq(&self, other: &Srcs) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for Srcs {}

impl FromIterator<UOp> for Srcs {
    fn from_iter<I: IntoIterator<Item = UOp>>(it: I) -> Srcs {
        let mut it = it.into_iter();
        let Some(a) = it.next() else {
            return Srcs::N0;
        };
        let Some(b) = it.next() else {
            return Srcs::N1([a]);
        };
        let Some(c) = it.next() else {
            return Srcs::N2([a, b]);
        };
        let Some(d) = it.next() else {
            return Srcs::N3([a, b, c]);
        };
        let Some(e) = it.next() else {
            return Srcs::N4([a, b, c, d]);
        };
        let mut v = Vec::with_capacity(5 + it.size_hint().0);
        v.extend([a, b, c, d, e]);
        v.extend(it);
        Srcs::Many(v)
    }
}

impl From<Vec<UOp>> for Srcs {
    fn from(v: Vec<UOp>) -> Srcs {
        if v.len() > 4 {
            Srcs::Many(v)
        } else {
            v.into_iter().collect()
        }
    }
}

impl From<[UOp; 0]> for Srcs {
    fn from(_: [UOp; 0]) -> Srcs {
        Srcs::N0
    }
}
impl From<[UOp; 1]> for Srcs {
    fn from(a: [UOp; 1]) -> Srcs {
        Srcs::N1(a)
    }
}
impl From<[UOp; 2]> for Srcs {
    fn from(a: [UOp; 2]) -> Srcs {
        Srcs::N2(a)
    }
}
impl From<[UOp; 3]> for Srcs {
    fn from(a: [UOp; 3]) -> Srcs {
        Srcs::N3(a)
    }
}
impl From<[UOp; 4]> for Srcs {
    fn from(a: [UOp; 4]) -> Srcs {
        Srcs::N4(a)
    }
}

/// Dropping a long chain of nodes must not recurse once per link (deep graphs would overflow the
/// stack): sources whose last reference goes away here are taken apart in a loop.
impl Drop for UOpInner {
    fn drop(&mut self) {
        intern::forget(self.hash);
        if self.src.is_empty() {
            return;
        }
        // allocated only when a source taken apart has sources of its own
        let mut stack: Vec<UOp> = Vec::new();
        self.src.drain(|u| release(u, &mut stack));
        while let Some(u) = stack.pop() {
            release(u, &mut stack);
        }
    }
}

/// Drop one reference to `u`; when it is the last, take the node apart, put its sources on
/// `stack` (so that the node's own drop has none left to recurse into) and keep its allocation
/// in the thread's pool (`uops/intern.rs`).
fn release(u: UOp, stack: &mut Vec<UOp>) {
    // a shared source only loses one reference (one atomic decrement)
    if Arc::strong_count(&u.0) > 1 {
        return;
    }
    if stack.capacity() == 0 && !u.0.src.is_empty() {
        // a graph is being taken apart: room for a few levels at once
        stack.reserve(64);
    }
    intern::unlink(&u.0);
    intern::recycle(u.0, |s| stack.push(s));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::uops::{UArg, UOps};
    use crate::dtype::dtypes;

    fn leaves(n: usize) -> Vec<UOp> {
        (0..n).map(|i| UOp::cnst(dtypes::int32, i as i64)).collect()
    }

    /// Every arity, built from a Vec, an iterator and (where one exists) an array, reads back the
    /// same sources in order and is the same interned node.
    #[test]
    fn every_arity_reads_back_in_order() {
        for n in 0..8 {
            let l = leaves(n);
            let from_vec = UOp::new(UOps::SINK, None, l.clone(), UArg::None);
            let from_iter: Srcs = l.iter().cloned().collect();
            assert_eq!(from_iter.len(), n);
            let from_iter = UOp::new(UOps::SINK, None, from_iter, UArg::None);
            assert_eq!(from_vec.src(), &l[..]);
            assert_eq!(from_iter.src(), &l[..]);
            assert!(from_vec.ptr_eq(&from_iter), "arity {n}: not one node");
        }
        let l = leaves(4);
        let arr = UOp::new(
            UOps::SINK,
            None,
            [l[0].clone(), l[1].clone(), l[2].clone(), l[3].clone()],
            UArg::None,
        );
        assert_eq!(arr.src(), &l[..]);
        assert!(arr.ptr_eq(&UOp::sink(l.clone())));
    }

    /// Equality is by the sources, whatever the representation.
    #[test]
    fn equality_is_by_sources() {
        let l = leaves(5);
        let a: Srcs = l[..2].to_vec().into();
        let b: Srcs = [l[0].clone(), l[1].clone()].into();
        let c: Srcs = [l[1].clone(), l[0].clone()].into();
        let many: Srcs = l.clone().into();
        assert!(a == b);
        assert!(a != c);
        assert!(matches!(many, Srcs::Many(_)));
        assert_eq!(&many[..], &l[..]);
    }

    /// Taking nodes apart moves every source out once: a long chain of two-source nodes drops
    /// without recursion, and its shared leaf survives with one reference per holder.
    #[test]
    fn drop_takes_chains_apart() {
        let leaf = UOp::cnst(dtypes::int32, 7);
        let mut x = leaf.clone();
        for i in 0..200_000i64 {
            x = x.add(UOp::cnst(dtypes::int32, i));
        }
        drop(x);
        let again = leaf.add(1);
        assert_eq!(again.src()[0], leaf);
    }
}
