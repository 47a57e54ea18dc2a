//! A memo of the ShapeTracker facts the opts and the linearizer ask for again and again: the real
//! strides (`real_strides(false)`) and which dims appear in the validity (`axis_is_masked`).
//!
//! Both come from a symbolic `expr_idxs` of the whole tracker, which is cheap for one unmasked
//! view but not for a padded or multi-view one (about 115k instructions for W5's padded two-view
//! conv input), and the heuristics ask per candidate axis, amount and buffer (`upcasted_axis` in
//! `broadcast_candidate`), the linearizer per load and reduce. Measured on W5 (LLVM, one kernel,
//! callgrind): `real_strides` was 21% of the codegen instructions before this memo.
//!
//! Owns: a map from tracker (by value: its views) to the facts computed for it. Entries are pure
//! functions of their key, so an entry is never stale, and a kernel shares its memo with its
//! clones (BEAM's actions): whatever one of them learned is true for all.
//!
//! Not guaranteed: no eviction (the memo lives as long as the last kernel that shares it; one
//! kernel's trackers are a few dozen at most); errors are not memoized (asked again, the fact is
//! computed again and fails again); `real_strides(true)` is not memoized (no kernel asks for it).

use std::sync::{Arc, Mutex, MutexGuard};

use crate::helpers::FxHashMap;
use crate::shape::{ShapeTracker, Sint};
use crate::Result;

/// What is known about one tracker.
#[derive(Default)]
struct Facts {
    /// `real_strides(false)`.
    strides: Option<Arc<[Option<Sint>]>>,
    /// The names of the Variables in the validity of `expr_idxs(None)`.
    valid_vars: Option<Arc<[String]>>,
}

/// The memo; cloning shares it.
#[derive(Clone, Default)]
pub(crate) struct StMemo(Arc<Mutex<FxHashMap<ShapeTracker, Facts>>>);

impl std::fmt::Debug for StMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the contents are a cache: two kernels that differ only in it print the same
        f.write_str("StMemo")
    }
}

impl StMemo {
    fn map(&self) -> MutexGuard<'_, FxHashMap<ShapeTracker, Facts>> {
        // a panic while holding the lock cannot leave a wrong entry behind (entries are inserted
        // whole), so a poisoned map is still good
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `st.real_strides(false)`, computed once per tracker (one unmasked view: computed directly,
    /// it costs less than the lookup).
    pub(crate) fn real_strides(&self, st: &ShapeTracker) -> Result<Vec<Option<Sint>>> {
        if let [v] = &st.views[..] {
            if v.mask.is_none() {
                return st.real_strides(false);
            }
        }
        if let Some(s) = self.map().get(st).and_then(|f| f.strides.clone()) {
            return Ok(s.to_vec());
        }
        let s = st.real_strides(false)?;
        self.map().entry(st.clone()).or_default().strides = Some(s.as_slice().into());
        Ok(s)
    }

    /// `st.axis_is_masked(axis)`, with one `expr_idxs` per tracker for all its dims.
    pub(crate) fn axis_is_masked(&self, st: &ShapeTracker, axis: usize) -> Result<bool> {
        let known = self.map().get(st).and_then(|f| f.valid_vars.clone());
        let names = match known {
            Some(n) => n,
            None => {
                let n: Arc<[String]> = st.valid_var_names()?.into();
                self.map().entry(st.clone()).or_default().valid_vars = Some(n.clone());
                n
            }
        };
        let name = format!("idx{axis}");
        Ok(names.contains(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Node;

    fn n(v: &[i64]) -> Vec<Sint> {
        v.iter().map(|&x| Node::Num(x)).collect()
    }

    /// A padded tracker reshaped across the padding: two views, a mask.
    fn padded_two_views() -> ShapeTracker {
        let st = ShapeTracker::from_shape(&n(&[4, 6])).unwrap();
        let p = [(Node::Num(1), Node::Num(1)), (Node::Num(0), Node::Num(2))];
        st.pad(&p).unwrap().reshape(&n(&[3, 16])).unwrap()
    }

    #[test]
    fn memoized_facts_equal_the_trackers_own() {
        let memo = StMemo::default();
        let sts = [
            padded_two_views(),
            padded_two_views().permute(&[1, 0]).unwrap(),
            ShapeTracker::from_shape(&n(&[2, 3])).unwrap(),
        ];
        assert!(sts[0].views.len() == 2, "the case needs two views");
        for _ in 0..2 {
            // the second round answers from the memo
            for st in &sts {
                assert_eq!(
                    memo.real_strides(st).unwrap(),
                    st.real_strides(false).unwrap()
                );
                for axis in 0..3 {
                    assert_eq!(
                        memo.axis_is_masked(st, axis).unwrap(),
                        st.axis_is_masked(axis).unwrap(),
                        "{st:?} axis {axis}"
                    );
                }
            }
        }
        // a clone shares what was learned
        let shared = memo.clone();
        assert_eq!(shared.map().len(), 3);
        assert!(sts[0].axis_is_masked(0).unwrap(), "the pad masks dim 0");
    }
}
