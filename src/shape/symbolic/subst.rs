//! [`Node::substitute`] over many value sets of the same variables, reusing the work on the parts
//! of the expression that hold none of them ([`SubstMemo`]). The linearizer substitutes one index
//! expression once per upcast combination; most of its terms (the launch and loop indices) never
//! change, and rebuilding them (each with its DEBUG key) dominated the cost.
//!
//! Owns: [`SubstMemo`] and [`Node::substitute_memo`]. The result is always the one
//! [`Node::substitute`] gives (the same operations on the same operands); the memo only skips
//! recomputing a subexpression whose result cannot depend on the values.
//!
//! Not guaranteed: memory use is one entry per distinct subexpression seen since the variables
//! last changed.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use super::{create_lt_node, Kind, Node};
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

    #[test]
    fn matches_substitute_over_every_value_set() {
        let (a, b, g) = (var("_uidx0", 3), var("_uidx1", 3), var("gidx0", 7));
        let mut memo = SubstMemo::default();
        for e in exprs(&a, &b, &g) {
            for va in 0..4 {
                for vb in 0..4 {
                    let m = map(&[(&a, va), (&b, vb)]);
                    let want = e.substitute(&m).unwrap();
                    let got = e.substitute_memo(&m, &mut memo).unwrap();
                    assert_eq!(got.key(), want.key(), "{e} at {va},{vb}");
                }
            }
        }
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
}
