//! Floor division and modulo with tinygrad 0.9.1's rules, dispatched on the node kind the way
//! Python dispatches `__floordiv__` / `__mod__` on the class.

use super::{gcd, py_floordiv, py_mod, DepthGuard, Kind, Node};
use crate::{bail, Result};

/// Python's `a % b` where a number is a Python int (any non-zero divisor), as in the rules'
/// `self.b % b` on coefficients.
pub(crate) fn sint_mod(a: &Node, b: &Node) -> Result<Node> {
    match (a, b) {
        (Node::Num(x), Node::Num(y)) => Ok(Node::Num(py_mod(*x, *y)?)),
        _ => a.modulo(b),
    }
}

impl Node {
    /// Python `self // b` (floor division; `b` an integer or, in the few supported cases, a node).
    pub fn floordiv(&self, b: &Node) -> Result<Node> {
        self.fdiv(b, true)
    }

    /// Python `self % b` (modulo toward negative infinity).
    /// A number here is tinygrad's `NumNode`, so the divisor must be positive, as for any node.
    pub fn modulo(&self, b: &Node) -> Result<Node> {
        if let (Node::Num(x), Node::Num(y)) = (self, b) {
            if *y <= 0 {
                bail!(
                    Shape,
                    "symbolic: modulo needs a positive divisor, got {x} % {y}"
                );
            }
            return Ok(Node::Num(py_mod(*x, *y)?));
        }
        let _depth = DepthGuard::enter("%", self, b)?;
        match self.inner() {
            Some(Kind::Mul(a, c)) => a.try_mul(&sint_mod(c, b)?)?.mod_generic(b),
            Some(Kind::Mod(a, c)) => match b {
                Node::Num(bi) if py_mod(*c, *bi)? == 0 => a.modulo(b),
                _ => self.mod_generic(b),
            },
            Some(Kind::Sum(nodes)) => self.sum_mod(nodes, b),
            _ => self.mod_generic(b),
        }
    }

    /// `__floordiv__(b, factoring_allowed)` dispatched on the class of `self`.
    pub(crate) fn fdiv(&self, b: &Node, factoring: bool) -> Result<Node> {
        if let (Node::Num(x), Node::Num(y)) = (self, b) {
            return Ok(Node::Num(py_floordiv(*x, *y)?));
        }
        let _depth = DepthGuard::enter("//", self, b)?;
        match self.inner() {
            Some(Kind::Mul(a, c)) => {
                if sint_mod(c, b)? == 0 {
                    return a.try_mul(&c.floordiv(b)?);
                }
                if sint_mod(b, c)? == 0 && super::compare::py_gt(c, &Node::Num(0))? {
                    return a.floordiv(&b.floordiv(c)?);
                }
                self.fdiv_generic(b, factoring)
            }
            // two divs are one div
            Some(Kind::Div(a, c)) => a.floordiv(&Node::Num(*c).try_mul(b)?),
            Some(Kind::Mod(a, c)) => {
                let cn = Node::Num(*c);
                if sint_mod(&cn, b)? == 0 {
                    return a.floordiv(b)?.modulo(&cn.floordiv(b)?);
                }
                self.fdiv_generic(b, factoring)
            }
            Some(Kind::Sum(nodes)) => self.sum_fdiv(nodes, b, factoring),
            _ => self.fdiv_generic(b, factoring),
        }
    }

    /// `Node.__floordiv__`: negative divisors flip the numerator, a numerator with a negative
    /// minimum is shifted by a multiple of `b` first (once), else a Div node.
    fn fdiv_generic(&self, b: &Node, factoring: bool) -> Result<Node> {
        let bi = match b {
            Node::Num(bi) => *bi,
            Node::Op(_) => return self.div_by_node(b),
        };
        if bi == 0 {
            bail!(Shape, "symbolic: division by zero ({self} // 0)");
        }
        if bi < 0 {
            return self
                .try_neg()?
                .fdiv(&Node::Num(super::ck_neg(bi)?), factoring);
        }
        if bi == 1 {
            return Ok(self.clone());
        }
        if super::compare::py_lt(self.min(), &Node::Num(0))? {
            let offset = self.min().floordiv(b)?;
            let shifted = self.try_add(&offset.try_neg()?.try_mul(b)?)?;
            return shifted.fdiv(b, false)?.try_add(&offset);
        }
        Node::create(Node::raw_div(self.clone(), bi))
    }

    /// Division by a non-number node: only `x // x` and a provably larger divisor fold.
    fn div_by_node(&self, b: &Node) -> Result<Node> {
        if self == b {
            return Ok(Node::Num(1));
        }
        let zero = Node::Num(0);
        if super::compare::py_gt(b.try_sub(self)?.min(), &zero)?
            && super::compare::py_ge(self.min(), &zero)?
        {
            return Ok(zero);
        }
        bail!(Shape, "symbolic: not supported: {self} // {b}")
    }

    /// `SumNode.__floordiv__`.
    fn sum_fdiv(&self, nodes: &[Node], b: &Node, factoring: bool) -> Result<Node> {
        if self == b {
            return Ok(Node::Num(1));
        }
        let flat = Node::flat_components(nodes);
        let bi = match b {
            Node::Num(bi) => *bi,
            Node::Op(_) => return self.sum_div_by_node(&flat, b),
        };
        if bi == 1 {
            return Ok(self.clone());
        }
        if !factoring {
            return self.fdiv_generic(b, factoring);
        }
        if bi == 0 {
            bail!(Shape, "symbolic: division by zero ({self} // 0)");
        }
        let Factored {
            fully,
            rest,
            g,
            divisor,
        } = factor_terms(flat, bi)?;
        let head = Node::sum(fully)?;
        let rest = Node::sum(rest)?;
        let tail = if g > 1 {
            rest.floordiv(&Node::Num(g))?
                .floordiv(&Node::Num(py_floordiv(bi, g)?))?
        } else if divisor > 1 {
            rest.floordiv(&Node::Num(divisor))?
                .floordiv(&Node::Num(py_floordiv(bi, divisor)?))?
        } else {
            rest.fdiv_generic(b, true)?
        };
        head.try_add(&tail)
    }

    /// `SumNode.__floordiv__` by a non-number node: split off the terms it divides exactly.
    fn sum_div_by_node(&self, flat: &[Node], b: &Node) -> Result<Node> {
        let (mut fully, mut rest) = (Vec::new(), Vec::new());
        for x in flat {
            if x.modulo(b)? == 0 {
                fully.push(x.floordiv(b)?);
            } else {
                rest.push(x.clone());
            }
        }
        let head = Node::create(Node::raw_sum(fully))?;
        if head != 0 {
            return head.try_add(&Node::create(Node::raw_sum(rest))?.floordiv(b)?);
        }
        self.fdiv_generic(b, false)
    }

    /// `Node.__mod__`.
    fn mod_generic(&self, b: &Node) -> Result<Node> {
        let bi = match b {
            Node::Num(bi) => *bi,
            Node::Op(_) => return self.mod_by_node(b),
        };
        if bi <= 0 {
            bail!(
                Shape,
                "symbolic: modulo needs a positive divisor, got {self} % {bi}"
            );
        }
        if bi == 1 {
            return Ok(Node::Num(0));
        }
        if let (Node::Num(lo), Node::Num(hi)) = (self.min(), self.max()) {
            let (lo, hi) = (*lo, *hi);
            if lo >= 0 && hi < bi {
                return Ok(self.clone());
            }
            let (qlo, qhi) = (py_floordiv(lo, bi)?, py_floordiv(hi, bi)?);
            if qlo == qhi {
                return self.try_sub(&Node::Num(super::ck_mul(bi, qlo)?));
            }
            if lo < 0 {
                return self.try_sub(&Node::Num(super::ck_mul(qlo, bi)?))?.modulo(b);
            }
        }
        Node::create(Node::raw_mod(self.clone(), bi))
    }

    /// Modulo by a non-number node: only `x % x` and a provably larger divisor fold.
    fn mod_by_node(&self, b: &Node) -> Result<Node> {
        if self == b {
            return Ok(Node::Num(0));
        }
        let zero = Node::Num(0);
        if super::compare::py_gt(b.try_sub(self)?.min(), &zero)?
            && super::compare::py_ge(self.min(), &zero)?
        {
            return Ok(self.clone());
        }
        bail!(Shape, "symbolic: not supported: {self} % {b}")
    }

    /// `SumNode.__mod__`: reduce number and multiplied terms first.
    fn sum_mod(&self, nodes: &[Node], b: &Node) -> Result<Node> {
        if self == b {
            return Ok(Node::Num(0));
        }
        if b.inner().is_some() && super::compare::py_gt(b.try_sub(self)?.min(), &Node::Num(0))? {
            return Ok(self.clone());
        }
        let mut terms = Vec::with_capacity(nodes.len());
        for x in nodes {
            terms.push(if x.is_int() || x.is_mul() {
                x.modulo(b)?
            } else {
                x.clone()
            });
        }
        Node::sum(terms)?.mod_generic(b)
    }

    fn is_mul(&self) -> bool {
        matches!(self.inner(), Some(Kind::Mul(..)))
    }
}

/// The terms of a sum divided by `b`: those divided exactly (and the quotients of constants),
/// the rest, the gcd of the rest's coefficients with `b`, and the first coefficient dividing `b`.
struct Factored {
    fully: Vec<Node>,
    rest: Vec<Node>,
    g: i64,
    divisor: i64,
}

fn factor_terms(flat: Vec<Node>, bi: i64) -> Result<Factored> {
    let b = Node::Num(bi);
    let mut f = Factored {
        fully: Vec::new(),
        rest: Vec::new(),
        g: bi,
        divisor: 1,
    };
    for x in flat {
        let xb = match (&x, x.inner()) {
            (Node::Num(v), _) => Node::Num(*v),
            (_, Some(Kind::Mul(_, c))) => c.clone(),
            _ => {
                f.rest.push(x);
                f.g = 1;
                continue;
            }
        };
        if sint_mod(&xb, &b)? == 0 {
            f.fully.push(x.floordiv(&b)?);
            continue;
        }
        let mut x = x;
        let mut xb = xb;
        if let Node::Num(v) = x {
            let div = py_floordiv(v, bi)?;
            if div != 0 {
                f.fully.push(Node::Num(div));
                x = Node::Num(super::ck_sub(v, super::ck_mul(bi, div)?)?);
                xb = x.clone();
            }
        }
        match xb {
            Node::Num(c) => {
                f.g = gcd(f.g, c)?;
                if x.is_mul() && f.divisor == 1 && py_mod(bi, c)? == 0 {
                    f.divisor = c;
                }
            }
            Node::Op(_) => f.g = 1,
        }
        f.rest.push(x);
    }
    Ok(f)
}
