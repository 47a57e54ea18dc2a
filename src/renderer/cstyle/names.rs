//! The rendered text of every UOp of one C-style rendering (its SSA name, constant or inlined
//! expression), all kept in one string.
//!
//! Why: a rendering holds one short text per UOp until its end. Kept as a `String` each, they
//! were thousands of live allocations per kernel, and the allocator left its fast per-size caches
//! for its slow paths (a fifth of the renderer's instructions went to `malloc` and `free`). Here
//! a text is copied into the shared string and its temporary is freed at once.
//!
//! Owns also the lookups that fail with a clear error ([`name_of`], [`src_name`]).
//!
//! Not guaranteed: replacing a UOp's text keeps the old text's bytes (unused) until the end.

use crate::codegen::uops::{UOp, UOpMap};
use crate::{bail, Result};

/// UOp -> rendered text, stored as byte ranges of one string.
pub(super) struct Names {
    text: String,
    at: UOpMap<(usize, usize)>,
}

impl Names {
    /// Room for `n` UOps of typical text.
    pub(super) fn with_capacity(n: usize) -> Names {
        Names {
            text: String::with_capacity(24 * n),
            at: UOpMap::with_capacity_and_hasher(n, Default::default()),
        }
    }

    /// The text of `u`, if rendered.
    pub(super) fn get(&self, u: &UOp) -> Option<&str> {
        self.at.get(u).map(|&(a, b)| &self.text[a..b])
    }

    /// Set the text of `u` (replacing any earlier one).
    pub(super) fn insert(&mut self, u: UOp, s: &str) {
        let start = self.text.len();
        self.text.push_str(s);
        self.at.insert(u, (start, self.text.len()));
    }
}

/// The rendered name or expression of `u`, borrowed from the renderer's map (a free function, so
/// that the other fields of the renderer's state stay free to borrow mutably).
pub(super) fn name_of<'a>(r: &'a Names, u: &UOp) -> Result<&'a str> {
    match r.get(u) {
        Some(s) => Ok(s),
        None => bail!(
            Codegen,
            "render: {} is used before it is rendered",
            u.op().name()
        ),
    }
}

/// [`name_of`] of source `i` of `u`.
pub(super) fn src_name<'a>(r: &'a Names, u: &UOp, i: usize) -> Result<&'a str> {
    match u.src().get(i) {
        Some(s) => name_of(r, s),
        None => bail!(Codegen, "render: {} lacks source {i}", u.op().name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtypes, ConstValue};

    #[test]
    fn texts_by_uop() {
        let (a, b) = (
            UOp::cnst(dtypes::int32, ConstValue::Int(1)),
            UOp::cnst(dtypes::int32, ConstValue::Int(2)),
        );
        let mut n = Names::with_capacity(2);
        assert_eq!(n.get(&a), None);
        n.insert(a.clone(), "alu0");
        n.insert(b.clone(), "(x+1)");
        assert_eq!((n.get(&a), n.get(&b)), (Some("alu0"), Some("(x+1)")));
        n.insert(a.clone(), "acc1");
        assert_eq!((n.get(&a), n.get(&b)), (Some("acc1"), Some("(x+1)")));
    }
}
