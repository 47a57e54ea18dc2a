//! [`Node::substitute`] over many value sets of the same variables, reusing the work on the parts
//! of the expression that hold none of them ([`SubstMemo`]). The linearizer substitutes one index
//! expression once per upcast combination; most of its terms (the launch and loop indices) never
//! change, and rebuilding them (each with its DEBUG key) dominated the cost.
//!
//! Owns: [`SubstMemo`] and [`Node::substitute_memo`]. The result is always the one
//! [`Node::substitute`] gives (the same operations on the same operands); the memo only skips
//! recomputing a subexpression whose result cannot depend on the values, and, for a sum whose
//! substituted terms are all `v` or `v * c`, combining its other terms again at every value
//! (`SumPlan`: [`Node::sum`]'s combined terms kept, only the numbers summed per value).
//!
//! Not guaranteed: memory use is one entry per distinct subexpression seen since the variables
//! last changed.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use super::{ck_add, create_lt_node, sint_sum, Kind, Node};
use crate::helpers::FxBuild;
use crate::Result;

/// The substitution results of subexpressions that hold none of the substituted variables, by
/// node address, for one set of variables (whatever their values). It keeps each keyed node
/// alive, so an address cannot be reused by another node while it is a key, and it empties itself
/// when [`Node::substitute_memo`] is called with a different set of variables.
#[derive(Default)]
pub struct SubstMemo {
    vars: Vec<Node>,
    fixed: HashMap<usize, (Node, Node), FxBuild>,
    /// The [`SumPlan`] of each sum seen (by address, the sum kept alive), `None` where a sum
    /// has none.
    plans: HashMap<usize, (Node, Option<SumPlan>), FxBuild>,
}

/// A sum whose terms holding substituted variables are all `v` or `v * c` (`c` a number):
/// given numbers for the variables, [`Node::sum`] of its substituted terms only adds their
/// products to the numbers of its other terms, so those terms are substituted and combined once
/// (per set of variables) and each substitution only sums numbers and builds the result.
struct SumPlan {
    /// (variable, coefficient) per variable term, in order.
    vars: Vec<(Node, i64)>,
    /// The other terms after substitution, as [`Node::sum_parts`] combines them.
    parts: Vec<Node>,
    /// Their numbers' sum, and the sum of those numbers' magnitudes.
    num_sum: i64,
    num_abs: i128,
    /// How many of the other terms [`Node::sum`] keeps (not always 0).
    kept: usize,
    /// The sums of `parts`' minimums and maximums (as `raw_sum` folds them), when numbers.
    bounds: Option<(i64, i64)>,
}

/// Magnitudes below this cannot overflow an i64 sum of them in any order.
const SAFE_ABS: i128 = 1 << 62;

impl SumPlan {
    /// The plan of the sum of `terms`, if it has one; `None` also where substituting or combining
    /// the other terms fails (the general path then meets the same failure).
    fn build<S: BuildHasher>(
        terms: &[Node],
        var_vals: &HashMap<Node, Node, S>,
        memo: &mut SubstMemo,
    ) -> Option<SumPlan> {
        let mut vars = Vec::new();
        let mut others = Vec::with_capacity(terms.len());
        for t in terms {
            match t.inner() {
                Some(Kind::Var { .. }) if var_vals.contains_key(t) => vars.push((t.clone(), 1)),
                Some(Kind::Mul(v, Node::Num(c))) if v.is_var() && var_vals.contains_key(v) => {
                    vars.push((v.clone(), *c))
                }
                _ => match subst(t, var_vals, memo) {
                    Ok((r, false)) => others.push(r),
                    _ => return None,
                },
            }
        }
        if vars.is_empty() {
            return None;
        }
        others.retain(Node::sum_keeps);
        let kept = others.len();
        let (parts, num_sum, num_abs) = Node::sum_parts(&others).ok()?;
        let fold = |f: fn(&Node) -> &Node| {
            let xs: Vec<Node> = parts.iter().map(|p| f(p).clone()).collect();
            sint_sum(&xs).ok().and_then(|s| s.as_int())
        };
        let bounds = fold(Node::min).zip(fold(Node::max));
        Some(SumPlan {
            vars,
            parts,
            num_sum,
            num_abs,
            kept,
            bounds,
        })
    }

    /// [`Node::sum`] of the substituted terms, or `None` where a value is not a number, the sum
    /// keeps fewer than two terms (it returns that term bare), or the numbers come near overflow.
    fn apply<S: BuildHasher>(&self, var_vals: &HashMap<Node, Node, S>) -> Option<Result<Node>> {
        let (mut total, mut abs, mut kept) = (i128::from(self.num_sum), self.num_abs, self.kept);
        for (v, c) in &self.vars {
            let Some(Node::Num(x)) = var_vals.get(v) else {
                return None;
            };
            let t = i128::from(*x) * i128::from(*c);
            if t != 0 {
                kept += 1;
            }
            total += t;
            abs += t.abs();
        }
        if kept < 2 || abs >= SAFE_ABS {
            return None;
        }
        let total = i64::try_from(total).ok()?;
        Some(self.finish(total))
    }

    /// [`Node::sum_finish`] of the parts and `total`, with the bounds `raw_sum` would fold (the
    /// parts' sums, then `total`) from the sums made once.
    fn finish(&self, total: i64) -> Result<Node> {
        let Some((lo, hi)) = self
            .bounds
            .filter(|_| self.parts.len() + usize::from(total != 0) > 1)
        else {
            return Node::sum_finish(self.parts.clone(), total);
        };
        let mut nodes = Vec::with_capacity(self.parts.len() + 1);
        nodes.extend(self.parts.iter().cloned());
        let (lo, hi) = if total != 0 {
            nodes.push(Node::Num(total));
            (ck_add(lo, total)?, ck_add(hi, total)?)
        } else {
            (lo, hi)
        };
        Node::create(Ok(Node::mk(Kind::Sum(nodes), Node::Num(lo), Node::Num(hi))))
    }
}

impl SubstMemo {
    /// Subexpressions remembered.
    pub fn len(&self) -> usize {
        self.fixed.len()
    }

    /// Nothing remembered.
    pub fn is_empty(&self) -> bool {
        self.fixed.is_empty()
    }

    /// Keep the entries only if `var_vals` substitutes exactly the variables they were made for.
    fn key_on<S: BuildHasher>(&mut self, var_vals: &HashMap<Node, Node, S>) {
        let same =
            self.vars.len() == var_vals.len() && self.vars.iter().all(|v| var_vals.contains_key(v));
        if !same {
            self.fixed.clear();
            self.plans.clear();
            self.vars = var_vals.keys().cloned().collect();
        }
    }
}

fn addr(n: &Node) -> Option<usize> {
    match n {
        Node::Num(_) => None,
        Node::Op(d) => Some(Arc::as_ptr(d) as usize),
    }
}

impl Node {
    /// [`Node::substitute`], remembering in `memo` the results of subexpressions without any of
    /// the variables of `var_vals` (valid for any values of the same variables). The map may use
    /// any hasher (the linearizer's use a fast one).
    pub fn substitute_memo<S: BuildHasher>(
        &self,
        var_vals: &HashMap<Node, Node, S>,
        memo: &mut SubstMemo,
    ) -> Result<Node> {
        memo.key_on(var_vals);
        Ok(subst(self, var_vals, memo)?.0)
    }
}

/// The substitution of `n`, and whether any variable of `var_vals` occurs in `n`.
fn subst<S: BuildHasher>(
    n: &Node,
    var_vals: &HashMap<Node, Node, S>,
    memo: &mut SubstMemo,
) -> Result<(Node, bool)> {
    let Some(k) = n.inner() else {
        return Ok((n.clone(), false));
    };
    let key = addr(n).unwrap_or(0);
    if let Some((_, r)) = memo.fixed.get(&key) {
        return Ok((r.clone(), false));
    }
    let mut touched = false;
    let mut rec = |x: &Node, memo: &mut SubstMemo| -> Result<Node> {
        let (r, t) = subst(x, var_vals, memo)?;
        touched |= t;
        Ok(r)
    };
    let out = match k {
        Kind::Var { .. } => match var_vals.get(n) {
            Some(v) => return Ok((v.clone(), true)),
            None => n.clone(),
        },
        Kind::Mul(a, b) => {
            let a = rec(a, memo)?;
            a.try_mul(&rec(b, memo)?)?
        }
        Kind::Div(a, b) => rec(a, memo)?.floordiv(&Node::Num(*b))?,
        Kind::Mod(a, b) => rec(a, memo)?.modulo(&Node::Num(*b))?,
        Kind::Lt(a, b) => {
            let a = rec(a, memo)?;
            create_lt_node(&a, &rec(b, memo)?)?
        }
        Kind::Sum(v) => {
            if let Some(r) = planned_sum(n, key, v, var_vals, memo) {
                return Ok((r?, true));
            }
            let subs = v.iter().map(|x| rec(x, memo)).collect::<Result<Vec<_>>>()?;
            Node::sum(subs)?
        }
        Kind::And(v) => and_of(v, &mut rec, memo)?,
    };
    if !touched {
        memo.fixed.insert(key, (n.clone(), out.clone()));
    }
    Ok((out, touched))
}

/// The substitution of sum `n` (terms `terms`, address `key`) through its [`SumPlan`], made on
/// first sight; `None` where it has none or the plan does not apply to these values.
fn planned_sum<S: BuildHasher>(
    n: &Node,
    key: usize,
    terms: &[Node],
    var_vals: &HashMap<Node, Node, S>,
    memo: &mut SubstMemo,
) -> Option<Result<Node>> {
    if !memo.plans.contains_key(&key) {
        let plan = SumPlan::build(terms, var_vals, memo);
        memo.plans.insert(key, (n.clone(), plan));
    }
    memo.plans.get(&key)?.1.as_ref()?.apply(var_vals)
}

/// The `And` case of [`Node::substitute`]: 0 as soon as one part is falsy.
fn and_of(
    v: &[Node],
    rec: &mut dyn FnMut(&Node, &mut SubstMemo) -> Result<Node>,
    memo: &mut SubstMemo,
) -> Result<Node> {
    let mut subs = Vec::with_capacity(v.len());
    for x in v {
        let s = rec(x, memo)?;
        if !s.truthy() {
            return Ok(Node::Num(0));
        }
        subs.push(s);
    }
    Node::ands(subs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, hi: i64) -> Node {
        Node::var(name, 0, Node::Num(hi)).unwrap()
    }

    /// An index like the linearizer's: launch/loop terms, upcast terms, a div/mod and a validity.
    fn exprs(a: &Node, b: &Node, g: &Node) -> Vec<Node> {
        let idx = g
            .try_mul(&Node::Num(32))
            .unwrap()
            .try_add(&a.try_mul(&Node::Num(4)).unwrap())
            .unwrap()
            .try_add(b)
            .unwrap();
        let dm = idx
            .floordiv(&Node::Num(3))
            .unwrap()
            .modulo(&Node::Num(5))
            .unwrap();
        let lt = create_lt_node(&idx, &Node::Num(40)).unwrap();
        let and = Node::ands(vec![lt.clone(), create_lt_node(b, &Node::Num(2)).unwrap()]).unwrap();
        vec![idx, dm, lt, and]
    }

    fn map(pairs: &[(&Node, i64)]) -> HashMap<Node, Node> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).clone(), Node::Num(*v)))
            .collect()
    }

    /// `substitute_memo` (sharing one memo) equals `substitute` for every expression at every
    /// value pair `a` in `0..na`, `b` in `0..nb`: same render and same node.
    fn memo_matches_over_grid(
        es: &[Node],
        (a, na): (&Node, i64),
        (b, nb): (&Node, i64),
        memo: &mut SubstMemo,
    ) {
        for e in es {
            for va in 0..na {
                for vb in 0..nb {
                    let m = map(&[(a, va), (b, vb)]);
                    let want = e.substitute(&m).unwrap();
                    let got = e.substitute_memo(&m, memo).unwrap();
                    assert_eq!(got.key(), want.key(), "{e} at {va},{vb}");
                    assert_eq!(got, want, "{e} at {va},{vb}");
                }
            }
        }
    }

    #[test]
    fn matches_substitute_over_every_value_set() {
        let (a, b, g) = (var("_uidx0", 3), var("_uidx1", 3), var("gidx0", 7));
        let mut memo = SubstMemo::default();
        memo_matches_over_grid(&exprs(&a, &b, &g), (&a, 4), (&b, 4), &mut memo);
        // the terms without _uidx (gidx0*32 and the constants) were remembered
        assert!(!memo.is_empty());
    }

    #[test]
    fn a_different_set_of_variables_empties_the_memo() {
        let (a, b, g) = (var("_uidx0", 3), var("_uidx1", 3), var("gidx0", 7));
        let e = &exprs(&a, &b, &g)[0];
        let mut memo = SubstMemo::default();
        // with only _uidx0 substituted, the `b` term holds no substituted variable: remembered
        let first = e.substitute_memo(&map(&[(&a, 1)]), &mut memo).unwrap();
        assert_eq!(first.key(), e.substitute(&map(&[(&a, 1)])).unwrap().key());
        // now _uidx1 is substituted too: a memo that kept the old entries would hand back the `b`
        // term unsubstituted
        for vb in 0..4 {
            let m = map(&[(&a, 1), (&b, vb)]);
            let got = e.substitute_memo(&m, &mut memo).unwrap();
            assert_eq!(got.key(), e.substitute(&m).unwrap().key());
            assert!(!got.key().contains("_uidx1"), "{got}");
        }
    }

    /// Sums of upcast terms (`v`, `v * c` with c negative too) and other terms, through their
    /// plans, give what `substitute` gives at every value, including values that leave one term
    /// or none (returned bare), values that are not numbers, and a product that is not `v * c`.
    #[test]
    fn sum_plans_match_substitute() {
        let (a, b, g, r) = (
            var("_uidx0", 3),
            var("_uidx1", 2),
            var("gidx0", 7),
            var("ridx0", 5),
        );
        let n = |v: i64| Node::Num(v);
        let sums = [
            a.try_mul(&n(4)).unwrap().try_add(&b).unwrap(),
            g.try_mul(&n(32))
                .unwrap()
                .try_add(&a.try_mul(&n(-3)).unwrap())
                .unwrap()
                .try_add(&n(5))
                .unwrap(),
            g.try_add(&b)
                .unwrap()
                .try_add(&r.try_mul(&n(8)).unwrap())
                .unwrap(),
            g.try_mul(&a)
                .unwrap()
                .try_add(&b)
                .unwrap()
                .try_add(&r)
                .unwrap(),
            a.try_add(&n(-6))
                .unwrap()
                .try_add(&b.try_mul(&n(3)).unwrap())
                .unwrap(),
        ];
        let mut memo = SubstMemo::default();
        memo_matches_over_grid(&sums, (&a, 4), (&b, 3), &mut memo);
        let planned = memo.plans.values().filter(|(_, p)| p.is_some()).count();
        assert!(planned >= 4, "{planned} sums planned");
        // a value that is not a number takes the general path
        let m: HashMap<Node, Node> = [(a.clone(), g.clone()), (b.clone(), n(1))].into();
        for e in &sums {
            let got = e.substitute_memo(&m, &mut memo).unwrap();
            assert_eq!(got.key(), e.substitute(&m).unwrap().key(), "{e}");
        }
    }
}
