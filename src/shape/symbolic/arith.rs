//! Addition, multiplication, `Node.sum` and `Node.ands`, plus the `std::ops` conveniences.
//!
//! The `try_*` methods follow Python's operator dispatch between ints and nodes (`int + Node`
//! goes through `Node.__radd__`, `NumNode * Node` through `Node * int`, ...), so results match
//! tinygrad's structure, not only its values.

use std::collections::HashMap;

use crate::helpers::FxBuild;

use super::{ck_add, ck_mul, ck_neg, Kind, Node};
use crate::Result;

impl Node {
    /// Python `self + b`.
    pub fn try_add(&self, b: &Node) -> Result<Node> {
        match (self, b) {
            (Node::Num(x), Node::Num(y)) => Ok(Node::Num(ck_add(*x, *y)?)),
            (Node::Num(_), _) => Node::sum(vec![b.clone(), self.clone()]),
            _ => Node::sum(vec![self.clone(), b.clone()]),
        }
    }

    /// Python `self - b` (`self + -b`).
    pub fn try_sub(&self, b: &Node) -> Result<Node> {
        match (self, b) {
            (Node::Num(x), Node::Num(y)) => Ok(Node::Num(super::ck_sub(*x, *y)?)),
            _ => self.try_add(&b.try_neg()?),
        }
    }

    /// Python `-self` (`self * -1`).
    pub fn try_neg(&self) -> Result<Node> {
        match self {
            Node::Num(x) => Ok(Node::Num(ck_neg(*x)?)),
            _ => self.try_mul(&Node::Num(-1)),
        }
    }

    /// Python `self * b`.
    pub fn try_mul(&self, b: &Node) -> Result<Node> {
        match (self, b) {
            (Node::Num(x), Node::Num(y)) => Ok(Node::Num(ck_mul(*x, *y)?)),
            // NumNode.__mul__(node) and int.__rmul__ both become `node * int`.
            (Node::Num(_), _) => b.mul_op(self),
            _ => self.mul_op(b),
        }
    }

    /// The class-specific `__mul__` of a non-number node.
    fn mul_op(&self, b: &Node) -> Result<Node> {
        match self.inner() {
            // (a*c)*b -> a*(c*b)
            Some(Kind::Mul(a, c)) => a.try_mul(&c.try_mul(b)?),
            // distribute over the sum
            Some(Kind::Sum(nodes)) => {
                let terms = nodes
                    .iter()
                    .map(|x| x.try_mul(b))
                    .collect::<Result<Vec<_>>>()?;
                Node::sum(terms)
            }
            _ => {
                if *b == 0 {
                    return Ok(Node::Num(0));
                }
                if *b == 1 {
                    return Ok(self.clone());
                }
                Node::create(Node::raw_mul(self.clone(), b.clone()))
            }
        }
    }

    /// tinygrad's `Node.sum`: drop zero terms, flatten nested sums, combine like terms (summing
    /// coefficients of equal bases and all numbers), and return a single term bare.
    pub fn sum(nodes: Vec<Node>) -> Result<Node> {
        let mut nodes: Vec<Node> = nodes.into_iter().filter(Node::sum_keeps).collect();
        match nodes.len() {
            0 => return Ok(Node::Num(0)),
            1 => return Ok(nodes.swap_remove(0)),
            _ => {}
        }
        let (new_nodes, num_sum, _) = Node::sum_parts(&nodes)?;
        Node::sum_finish(new_nodes, num_sum)
    }

    /// Whether [`Node::sum`] keeps term `x` (it drops the terms that are always 0).
    pub(crate) fn sum_keeps(x: &Node) -> bool {
        x.max().truthy() || x.min().truthy()
    }

    /// The middle of [`Node::sum`] over its kept terms (at least two): nested sums flattened, like
    /// terms combined (their bases in order of first occurrence), and the numbers summed; returns
    /// the combined terms, the numbers' sum, and the sum of their magnitudes.
    pub(crate) fn sum_parts(nodes: &[Node]) -> Result<(Vec<Node>, i64, i128)> {
        let mut flat = Vec::with_capacity(nodes.len());
        flatten_sum(nodes, &mut flat);
        let mut groups = Groups::with_capacity(flat.len());
        let (mut num_sum, mut num_abs) = (0i64, 0i128);
        for node in flat {
            match (&node, node.inner()) {
                (Node::Num(v), _) => {
                    num_sum = ck_add(num_sum, *v)?;
                    num_abs += i128::from(*v).abs();
                }
                (_, Some(Kind::Mul(a, c))) => add_coefficient(&mut groups, a, c, Some(&node))?,
                _ => add_coefficient(&mut groups, &node, &Node::Num(1), None)?,
            }
        }
        let mut new_nodes = Vec::with_capacity(groups.items.len() + 1);
        for (a, g) in groups.items {
            if g.coef == 0 {
                continue;
            }
            new_nodes.push(if g.coef == 1 { a } else { mul_term(a, g)? });
        }
        Ok((new_nodes, num_sum, num_abs))
    }

    /// The end of [`Node::sum`]: the combined terms of [`Node::sum_parts`] and the numbers' sum
    /// (when not 0) as one node.
    pub(crate) fn sum_finish(mut new_nodes: Vec<Node>, num_sum: i64) -> Result<Node> {
        if num_sum != 0 {
            new_nodes.push(Node::Num(num_sum));
        }
        match new_nodes.len() {
            0 => Ok(Node::Num(0)),
            1 => Ok(new_nodes.swap_remove(0)),
            _ => Node::create(Node::raw_sum(new_nodes)),
        }
    }

    /// tinygrad's `Node.ands`: empty is 1, any provably false term gives 0, provably true terms
    /// are dropped.
    pub fn ands(mut nodes: Vec<Node>) -> Result<Node> {
        match nodes.len() {
            0 => return Ok(Node::Num(1)),
            1 => return Ok(nodes.swap_remove(0)),
            _ => {}
        }
        if nodes.iter().any(|x| !x.truthy()) {
            return Ok(Node::Num(0));
        }
        let mut nodes: Vec<Node> = nodes.into_iter().filter(|x| x.min() != x.max()).collect();
        match nodes.len() {
            0 => Ok(Node::Num(1)),
            1 => Ok(nodes.swap_remove(0)),
            _ => Node::create(Node::raw_and(nodes)),
        }
    }

    /// The terms of a sum with nested sums expanded (`flat_components`).
    pub(crate) fn flat_components(nodes: &[Node]) -> Vec<Node> {
        let mut out = Vec::with_capacity(nodes.len());
        flatten_sum(nodes, &mut out);
        out
    }
}

fn flatten_sum(nodes: &[Node], out: &mut Vec<Node>) {
    for x in nodes {
        match x.inner() {
            Some(Kind::Sum(inner)) => flatten_sum(inner, out),
            _ => out.push(x.clone()),
        }
    }
}

/// The like terms of one base in [`Node::sum`]: their summed coefficient, and the term itself
/// while it is the only one and a `MulNode` (which the sum may then keep instead of rebuilding).
struct Group {
    coef: Node,
    term: Option<Node>,
}

/// The groups of like terms of one [`Node::sum`] by base, in order of first occurrence: the few
/// groups of a typical sum are searched in place (comparing bases, hash first), an index by base
/// is kept once there are more than [`SCAN_GROUPS`].
struct Groups {
    items: Vec<(Node, Group)>,
    index: HashMap<Node, usize, FxBuild>,
}

/// The most groups [`Groups`] searches without its index.
const SCAN_GROUPS: usize = 8;

impl Groups {
    fn with_capacity(n: usize) -> Groups {
        Groups {
            items: Vec::with_capacity(n),
            index: HashMap::default(),
        }
    }

    fn find(&self, base: &Node) -> Option<usize> {
        if self.items.len() <= SCAN_GROUPS {
            self.items.iter().position(|(b, _)| b == base)
        } else {
            self.index.get(base).copied()
        }
    }

    fn push(&mut self, base: Node, g: Group) {
        self.items.push((base, g));
        let n = self.items.len();
        if n == SCAN_GROUPS + 1 {
            let all = self
                .items
                .iter()
                .enumerate()
                .map(|(i, (b, _))| (b.clone(), i));
            self.index.extend(all);
        } else if n > SCAN_GROUPS + 1 {
            self.index.insert(self.items[n - 1].0.clone(), n - 1);
        }
    }
}

fn add_coefficient(groups: &mut Groups, base: &Node, c: &Node, term: Option<&Node>) -> Result<()> {
    match groups.find(base) {
        Some(i) => {
            let g = &mut groups.items[i].1;
            g.coef = g.coef.try_add(c)?;
            g.term = None;
        }
        None => groups.push(
            base.clone(),
            Group {
                coef: Node::Num(0).try_add(c)?,
                term: term.cloned(),
            },
        ),
    }
    Ok(())
}

/// `MulNode(base, coef)` of a group: its single term when that is this very node (same operands
/// and the bounds `raw_mul` gives), else a new one; the same node either way.
fn mul_term(base: Node, g: Group) -> Result<Node> {
    if let Some(t) = g.term {
        if let Some(Kind::Mul(ta, tc)) = t.inner() {
            if *ta == base && *tc == g.coef {
                let (min, max) = Node::mul_bounds(&base, &g.coef)?;
                if *t.min() == min && *t.max() == max {
                    return Ok(t);
                }
            }
        }
    }
    Node::raw_mul(base, g.coef)
}

// ---------------------------------------------------------------------------------------------
// std::ops conveniences. They panic on i64 overflow (like integer arithmetic in debug builds);
// use the try_* methods where values come from users.

fn unwrap_op(r: Result<Node>, op: &str) -> Node {
    match r {
        Ok(n) => n,
        Err(e) => panic!("symbolic {op} failed: {e} (use the try_* methods to handle this)"),
    }
}

macro_rules! impl_binop {
    ($trait:ident, $method:ident, $try:ident, $name:literal) => {
        impl std::ops::$trait<&Node> for &Node {
            type Output = Node;
            fn $method(self, b: &Node) -> Node {
                unwrap_op(self.$try(b), $name)
            }
        }
        impl std::ops::$trait<Node> for Node {
            type Output = Node;
            fn $method(self, b: Node) -> Node {
                unwrap_op(self.$try(&b), $name)
            }
        }
        impl std::ops::$trait<&Node> for Node {
            type Output = Node;
            fn $method(self, b: &Node) -> Node {
                unwrap_op(self.$try(b), $name)
            }
        }
        impl std::ops::$trait<Node> for &Node {
            type Output = Node;
            fn $method(self, b: Node) -> Node {
                unwrap_op(self.$try(&b), $name)
            }
        }
        impl std::ops::$trait<i64> for Node {
            type Output = Node;
            fn $method(self, b: i64) -> Node {
                unwrap_op(self.$try(&Node::Num(b)), $name)
            }
        }
        impl std::ops::$trait<i64> for &Node {
            type Output = Node;
            fn $method(self, b: i64) -> Node {
                unwrap_op(self.$try(&Node::Num(b)), $name)
            }
        }
        impl std::ops::$trait<Node> for i64 {
            type Output = Node;
            fn $method(self, b: Node) -> Node {
                unwrap_op(Node::Num(self).$try(&b), $name)
            }
        }
        impl std::ops::$trait<&Node> for i64 {
            type Output = Node;
            fn $method(self, b: &Node) -> Node {
                unwrap_op(Node::Num(self).$try(b), $name)
            }
        }
    };
}

impl_binop!(Add, add, try_add, "+");
impl_binop!(Sub, sub, try_sub, "-");
impl_binop!(Mul, mul, try_mul, "*");

impl std::ops::Neg for Node {
    type Output = Node;
    fn neg(self) -> Node {
        unwrap_op(self.try_neg(), "neg")
    }
}
impl std::ops::Neg for &Node {
    type Output = Node;
    fn neg(self) -> Node {
        unwrap_op(self.try_neg(), "neg")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_alloc(a: &Node, b: &Node) -> bool {
        match (a, b) {
            (Node::Op(x), Node::Op(y)) => std::sync::Arc::ptr_eq(x, y),
            _ => false,
        }
    }

    /// A lone `a*3` term comes out of the sum as the very node that went in; a term whose
    /// coefficient changed (two like terms) is a new node, equal to the rebuilt one.
    #[test]
    fn sum_keeps_a_lone_mul_term() {
        let a = Node::var("a", 0, 7).unwrap();
        let b = Node::var("b", 0, 5).unwrap();
        let a3 = Node::raw_mul(a.clone(), Node::Num(3)).unwrap();
        let s = Node::sum(vec![a3.clone(), b.clone(), Node::Num(2)]).unwrap();
        let Some(Kind::Sum(terms)) = s.inner() else {
            panic!("not a sum: {s}")
        };
        assert!(terms.iter().any(|t| same_alloc(t, &a3)), "{s}");
        let s2 = Node::sum(vec![a3.clone(), a.clone(), b.clone()]).unwrap();
        let Some(Kind::Sum(terms2)) = s2.inner() else {
            panic!("not a sum: {s2}")
        };
        let a4 = Node::raw_mul(a.clone(), Node::Num(4)).unwrap();
        assert_eq!(terms2[0], a4);
        assert!(!terms2.iter().any(|t| same_alloc(t, &a3)));
    }
}
