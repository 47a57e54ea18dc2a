//! The structural identity of symbolic nodes: a hash computed once when a node is built, and an
//! equality that holds exactly when tinygrad 0.9.1's DEBUG keys (`Node.key`) of the two nodes
//! are equal, without rendering them.
//!
//! The key renders a node's kind with its children's keys: a Variable as `expr[min-max=val]`,
//! `(a*b)` with two Variables in name order, `(a//b)`, `(a%b)`, `(a<b)`, and the terms of a Sum
//! or And sorted as text. So key equality is: the same kind, the same Variable name, value and
//! bounds, the same operands (a Mul of two Variables in name order), and for Sum and And the same
//! multiset of terms. The hash follows the same rules (Sum and And terms combine commutatively).
//!
//! Not guaranteed: Variables whose names themselves look like rendered expressions (`"(a*2)"`)
//! could have equal keys in tinygrad while differing structurally here; no caller builds those.

use std::hash::Hasher;

use super::{Kind, Node, NodeData};
use crate::helpers::{fmix64, FxHasher};

/// The hash of a child: a number by its value, a node by its cached hash.
fn child(n: &Node) -> u64 {
    match n {
        Node::Num(v) => fmix64((*v as u64) ^ 0x9e37_79b9_7f4a_7c15),
        Node::Op(d) => d.hash,
    }
}

/// Whether the key of `Mul(a, b)` renders `b` first (both are named Variables, `b`'s name sorts
/// before `a`'s).
pub(super) fn mul_swapped(a: &Node, b: &Node) -> bool {
    matches!((a.expr(), b.expr()), (Some(x), Some(y)) if !x.is_empty() && !y.is_empty() && y < x)
}

/// The operands of a Mul in key order.
fn mul_order<'a>(a: &'a Node, b: &'a Node) -> (&'a Node, &'a Node) {
    if mul_swapped(a, b) {
        (b, a)
    } else {
        (a, b)
    }
}

/// An order-independent combination of the terms of a Sum or And.
fn terms(nodes: &[Node]) -> u64 {
    nodes.iter().fold(nodes.len() as u64, |acc, n| {
        acc.wrapping_add(fmix64(child(n)))
    })
}

/// The structural hash of a node with this kind and these bounds (bounds enter only for
/// Variables, as in the key).
pub(super) fn hash_of(kind: &Kind, min: &Node, max: &Node) -> u64 {
    let mut h = FxHasher::default();
    match kind {
        Kind::Var { expr, val } => {
            h.write_u8(0);
            h.write(expr.as_bytes());
            h.write_u8(0xff);
            h.write_u8(val.is_some() as u8);
            h.write_i64(val.unwrap_or(0));
            h.write_u64(child(min));
            h.write_u64(child(max));
        }
        Kind::Mul(a, b) => {
            let (x, y) = mul_order(a, b);
            h.write_u8(1);
            h.write_u64(child(x));
            h.write_u64(child(y));
        }
        Kind::Div(a, b) => {
            h.write_u8(2);
            h.write_u64(child(a));
            h.write_i64(*b);
        }
        Kind::Mod(a, b) => {
            h.write_u8(3);
            h.write_u64(child(a));
            h.write_i64(*b);
        }
        Kind::Lt(a, b) => {
            h.write_u8(4);
            h.write_u64(child(a));
            h.write_u64(child(b));
        }
        Kind::Sum(n) => {
            h.write_u8(5);
            h.write_u64(terms(n));
        }
        Kind::And(n) => {
            h.write_u8(6);
            h.write_u64(terms(n));
        }
    }
    fmix64(h.finish())
}

/// Whether two lists of terms hold the same multiset (in order first, the common case).
fn same_terms(a: &[Node], b: &[Node]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.iter().zip(b).all(|(x, y)| x == y) {
        return true;
    }
    let mut used = vec![false; b.len()];
    a.iter().all(|x| {
        let hit = (0..b.len()).find(|&i| !used[i] && b[i] == *x);
        if let Some(i) = hit {
            used[i] = true;
        }
        hit.is_some()
    })
}

/// Whether two nodes have equal DEBUG keys (see the module doc).
pub(super) fn same(a: &NodeData, b: &NodeData) -> bool {
    match (&a.kind, &b.kind) {
        (Kind::Var { expr: e1, val: v1 }, Kind::Var { expr: e2, val: v2 }) => {
            e1 == e2 && v1 == v2 && a.min == b.min && a.max == b.max
        }
        (Kind::Mul(a1, b1), Kind::Mul(a2, b2)) => mul_order(a1, b1) == mul_order(a2, b2),
        (Kind::Div(x, c), Kind::Div(y, d)) | (Kind::Mod(x, c), Kind::Mod(y, d)) => c == d && x == y,
        (Kind::Lt(a1, b1), Kind::Lt(a2, b2)) => a1 == a2 && b1 == b2,
        (Kind::Sum(n1), Kind::Sum(n2)) | (Kind::And(n1), Kind::And(n2)) => same_terms(n1, n2),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Node;

    /// Equality and hashing agree with the rendered key over a spread of expressions.
    #[test]
    fn equality_matches_key_equality() {
        let a = Node::var("a", 0, 8).unwrap();
        let b = Node::var("b", 0, 5).unwrap();
        let c = Node::var("c", 1, 9).unwrap();
        let i = Node::var("i", 1, 10).unwrap();
        let sym = Node::var("s", 0, i.try_sub(&Node::Num(1)).unwrap()).unwrap();
        let mut xs = vec![
            a.clone(),
            b.clone(),
            a.bind(3).unwrap(),
            Node::var("a", 0, 9).unwrap(),
            &a + &b,
            &b + &a,
            &a * 2 + &b * 3 + 4,
            &b * 3 + 4 + &a * 2,
            &a * 2 + &b * 4 + 4,
            a.try_mul(&b).unwrap(),
            b.try_mul(&a).unwrap(),
            (&a + &c).floordiv(&Node::Num(3)).unwrap(),
            (&c + &a).floordiv(&Node::Num(3)).unwrap(),
            (&a + &c).modulo(&Node::Num(3)).unwrap(),
            (&a + &c).modulo(&Node::Num(4)).unwrap(),
            super::super::create_lt_node(&(&a + &b), &Node::Num(7)).unwrap(),
            super::super::create_lt_node(&(&b + &a), &Node::Num(7)).unwrap(),
            sym.clone(),
            &sym * 4 + &a,
            &a + &sym * 4,
        ];
        let lt1 = super::super::create_lt_node(&a, &Node::Num(5)).unwrap();
        let lt2 = super::super::create_lt_node(&b, &Node::Num(3)).unwrap();
        xs.push(Node::ands(vec![lt1.clone(), lt2.clone()]).unwrap());
        xs.push(Node::ands(vec![lt2, lt1]).unwrap());
        for x in &xs {
            for y in &xs {
                assert_eq!(x == y, x.key() == y.key(), "{x:?} vs {y:?}");
                if x == y {
                    let h = |n: &Node| {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        n.hash(&mut h);
                        h.finish()
                    };
                    assert_eq!(h(x), h(y), "{x:?} vs {y:?}");
                }
            }
        }
    }
}
