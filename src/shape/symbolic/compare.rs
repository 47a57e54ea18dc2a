//! Comparisons: the `<`-family operators that build Lt nodes, tinygrad's `create_lt_node` /
//! `create_ge_node` rewrites, and Python's truthiness of comparisons between sints (used when
//! bounds are symbolic), including the builtin `min`/`max` over them.

use super::{gcd, py_floordiv, Kind, Node};
use crate::{bail, Result};

impl Node {
    /// Python `self < b`: a plain Lt node (folded to 0/1 when the bounds decide it).
    pub fn lt(&self, b: &Node) -> Result<Node> {
        if let (Node::Num(x), Node::Num(y)) = (self, b) {
            return Ok(Node::Num((x < y) as i64));
        }
        Node::create(Node::raw_lt(self.clone(), b.clone()))
    }
    /// Python `self <= b` (`self < b+1`).
    pub fn le(&self, b: &Node) -> Result<Node> {
        self.lt(&b.try_add(&Node::Num(1))?)
    }
    /// Python `self > b` (`-self < -b`).
    pub fn gt(&self, b: &Node) -> Result<Node> {
        self.try_neg()?.lt(&b.try_neg()?)
    }
    /// Python `self >= b` (`-self < -b+1`).
    pub fn ge(&self, b: &Node) -> Result<Node> {
        self.try_neg()?.lt(&b.try_neg()?.try_add(&Node::Num(1))?)
    }
}

/// Truthiness of Python's `a < b` for sints (ints compare; nodes compare through Lt nodes,
/// with `int < Node` reflected to `Node > int`).
pub(crate) fn py_lt(a: &Node, b: &Node) -> Result<bool> {
    Ok(match (a, b) {
        (Node::Num(x), Node::Num(y)) => x < y,
        (Node::Op(_), _) => a.lt(b)?.truthy(),
        (Node::Num(_), Node::Op(_)) => b.gt(a)?.truthy(),
    })
}
/// Truthiness of Python's `a > b` for sints.
pub(crate) fn py_gt(a: &Node, b: &Node) -> Result<bool> {
    Ok(match (a, b) {
        (Node::Num(x), Node::Num(y)) => x > y,
        (Node::Op(_), _) => a.gt(b)?.truthy(),
        (Node::Num(_), Node::Op(_)) => b.lt(a)?.truthy(),
    })
}
/// Truthiness of Python's `a >= b` for sints.
pub(crate) fn py_ge(a: &Node, b: &Node) -> Result<bool> {
    Ok(match (a, b) {
        (Node::Num(x), Node::Num(y)) => x >= y,
        (Node::Op(_), _) => a.ge(b)?.truthy(),
        (Node::Num(_), Node::Op(_)) => b.le(a)?.truthy(),
    })
}
/// Truthiness of Python's `a <= b` for sints.
pub(crate) fn py_le(a: &Node, b: &Node) -> Result<bool> {
    Ok(match (a, b) {
        (Node::Num(x), Node::Num(y)) => x <= y,
        (Node::Op(_), _) => a.le(b)?.truthy(),
        (Node::Num(_), Node::Op(_)) => b.ge(a)?.truthy(),
    })
}

/// Python's builtin `min(xs)`: the first element, replaced by any later one that compares less.
pub(crate) fn py_min(xs: &[Node]) -> Result<Node> {
    let Some(first) = xs.first() else {
        bail!(Shape, "min() of an empty sequence")
    };
    let mut cur = first.clone();
    for x in &xs[1..] {
        if py_lt(x, &cur)? {
            cur = x.clone();
        }
    }
    Ok(cur)
}
/// Python's builtin `max(xs)`: the first element, replaced by any later one that compares greater.
pub(crate) fn py_max(xs: &[Node]) -> Result<Node> {
    let Some(first) = xs.first() else {
        bail!(Shape, "max() of an empty sequence")
    };
    let mut cur = first.clone();
    for x in &xs[1..] {
        if py_gt(x, &cur)? {
            cur = x.clone();
        }
    }
    Ok(cur)
}
/// Python's `min(a, b)`.
pub(crate) fn py_min2(a: &Node, b: &Node) -> Result<Node> {
    Ok(if py_lt(b, a)? { b.clone() } else { a.clone() })
}
/// Python's `max(a, b)`.
pub(crate) fn py_max2(a: &Node, b: &Node) -> Result<Node> {
    Ok(if py_gt(b, a)? { b.clone() } else { a.clone() })
}

/// tinygrad's `create_lt_node(lhs, b)`: `lhs < b` with constants of a sum moved to the right,
/// a common factor of the large multiplied terms divided out, and `a*c < b` turned into
/// `a < ceil(b/c)`.
pub fn create_lt_node(lhs: &Node, b: &Node) -> Result<Node> {
    match lhs.inner() {
        Some(Kind::Sum(nodes)) => {
            let mut lhs = lhs.clone();
            let mut b = b.clone();
            if let Node::Num(bi) = b {
                let (new_lhs, new_b) = lt_sum_rewrite(nodes, bi)?;
                lhs = new_lhs;
                b = Node::Num(new_b);
            }
            if matches!(lhs.inner(), Some(Kind::Sum(_))) {
                Node::create(Node::raw_lt(lhs, b))
            } else {
                create_lt_node(&lhs, &b)
            }
        }
        Some(Kind::Mul(a, c)) => {
            let (Node::Num(bi), Node::Num(ci)) = (b, c) else {
                return Node::create(Node::raw_lt(lhs.clone(), b.clone()));
            };
            if *ci == -1 {
                return Node::create(Node::raw_lt(lhs.clone(), b.clone()));
            }
            let sgn = if *ci > 0 { 1 } else { -1 };
            let abs_c = ci
                .checked_abs()
                .ok_or_else(|| crate::Error::Shape(format!("symbolic: |{ci}| overflows")))?;
            let bound = py_floordiv(super::ck_sub(super::ck_add(*bi, abs_c)?, 1)?, abs_c)?;
            Node::create(Node::raw_lt(a.try_mul(&Node::Num(sgn))?, Node::Num(bound)))
        }
        _ => Node::create(Node::raw_lt(lhs.clone(), b.clone())),
    }
}

/// The int-bound part of `create_lt_node` for a sum: returns the new lhs and bound.
fn lt_sum_rewrite(nodes: &[Node], mut b: i64) -> Result<(Node, i64)> {
    let mut rest = Vec::with_capacity(nodes.len());
    for x in nodes {
        match x {
            Node::Num(v) => b = super::ck_sub(b, *v)?,
            _ => rest.push(x.clone()),
        }
    }
    let lhs = Node::sum(rest)?;
    let terms: Vec<Node> = match lhs.inner() {
        Some(Kind::Sum(n)) => n.clone(),
        _ => vec![lhs.clone()],
    };
    let mut muls = Vec::new();
    let mut others = Vec::new();
    for x in terms {
        let coef = match x.inner() {
            Some(Kind::Mul(_, Node::Num(c))) => Some(*c),
            Some(Kind::Mul(..)) => bail!(
                Shape,
                "create_lt_node: not supported: {x:?} < {b} (symbolic coefficient)"
            ),
            _ => None,
        };
        match coef {
            Some(c) if c > 0 && py_ge(x.max(), &Node::Num(b))? => muls.push((x, c)),
            _ => others.push(x),
        }
    }
    if muls.is_empty() {
        return Ok((lhs, b));
    }
    let mut mul_gcd = b;
    for (_, c) in &muls {
        mul_gcd = gcd(mul_gcd, *c)?;
    }
    let all_others = Node::sum(others)?;
    let g = Node::Num(mul_gcd);
    if py_ge(all_others.min(), &Node::Num(0))? && py_lt(all_others.max(), &g)? {
        let divided = muls
            .iter()
            .map(|(m, _)| m.floordiv(&g))
            .collect::<Result<Vec<_>>>()?;
        return Ok((Node::sum(divided)?, py_floordiv(b, mul_gcd)?));
    }
    Ok((lhs, b))
}

/// tinygrad's `create_ge_node(lhs, b)`: `-lhs < -b+1`.
pub fn create_ge_node(lhs: &Node, b: &Node) -> Result<Node> {
    create_lt_node(&lhs.try_neg()?, &b.try_neg()?.try_add(&Node::Num(1))?)
}
