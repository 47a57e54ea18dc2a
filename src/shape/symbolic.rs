//! Symbolic integers with bounds: tinygrad 0.9.1's `shape/symbolic.py`.
//!
//! A [`Node`] is either a plain integer (`Node::Num`, no allocation) or an immutable, shared
//! expression node (Variable, Mul, Div, Mod, Lt, Sum, And) that caches its bounds `[min, max]`
//! and a structural hash. In tinygrad, equality and hashing go through the DEBUG rendering (the
//! `key`); here they are structural with the same meaning (see [`structure`]): the terms of a Sum
//! or And compare as a multiset (`a+b == b+a`, as the key sorts them), the two Variables of a Mul
//! in the key's name order, and a bound Variable differs from the unbound one of the same name.
//! The key text itself is rendered only when asked for (`Node::key`, `{:?}`).
//!
//! Every rewrite rule of 0.9.1 is reproduced (sum flattening and like-term combining, mul
//! distribution, floor division and modulo rules, `create_lt_node` rewrites, `ands`), including
//! Python's semantics: floor division/modulo toward negative infinity, and bounds that can
//! themselves be symbolic (a Variable's max may be a Node, e.g. `idx0` in `[0, i-1]`); comparisons
//! of symbolic bounds follow Python's truthiness of the comparison node.
//!
//! Arithmetic is exact on `i64`: every fallible operation returns [`crate::Result`], and an
//! overflow is an error, never a wrapped value. The `std::ops` operators (`+ - * neg`) are
//! conveniences that panic on overflow, like integer arithmetic in debug builds; code that handles
//! user-controlled values uses the `try_*` methods.
//!
//! Not guaranteed: a Python `NumNode` passed where 0.9.1 checks `isinstance(b, int)` is treated
//! as an int here (tinygrad distinguishes them in a few corner paths that no caller reaches).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use indexmap::IndexMap;

use crate::{bail, ensure, Error, Result};

mod arith;
mod compare;
mod divmod;
mod structure;
mod subst;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_more;

pub use compare::{create_ge_node, create_lt_node};
pub(crate) use compare::{py_ge, py_gt, py_le, py_lt, py_max2, py_min2};
pub use subst::SubstMemo;

/// tinygrad's `sint`: an integer or a symbolic node, as found in shapes, strides and offsets.
pub type Sint = Node;

/// Values of bound Variables, keyed by the unbound Variable, in first-seen order.
pub type VarVals = IndexMap<Node, i64>;

/// A symbolic integer: a plain number or a shared expression node.
#[derive(Clone)]
pub enum Node {
    /// An integer (tinygrad's `int` and `NumNode`).
    Num(i64),
    /// Any other node kind; see [`Node::kind`].
    Op(Arc<NodeData>),
}

/// The shared payload of a non-integer node: its kind, cached bounds and structural hash.
pub struct NodeData {
    kind: Kind,
    min: Node,
    max: Node,
    hash: u64,
}

pub(crate) enum Kind {
    Var { expr: String, val: Option<i64> },
    Mul(Node, Node),
    Div(Node, i64),
    Mod(Node, i64),
    Lt(Node, Node),
    Sum(Vec<Node>),
    And(Vec<Node>),
}

/// A read-only view of a node's structure, for lowering to UOps.
#[derive(Debug, Clone, Copy)]
pub enum NodeKind<'a> {
    /// An integer constant.
    Num(i64),
    /// A Variable `name` in `[min, max]`, bound to `val` if `Some`.
    Var {
        name: &'a str,
        min: i64,
        max: &'a Node,
        val: Option<i64>,
    },
    /// `a * b` (b is an integer or a node).
    Mul(&'a Node, &'a Node),
    /// `a // b`, floor division by a positive integer.
    Div(&'a Node, i64),
    /// `a % b`, modulo by a positive integer.
    Mod(&'a Node, i64),
    /// `a < b` (b is an integer or a node).
    Lt(&'a Node, &'a Node),
    /// The sum of the terms.
    Sum(&'a [Node]),
    /// The logical and of the terms.
    And(&'a [Node]),
}

// ---------------------------------------------------------------------------------------------
// Python integer semantics on i64 (checked)

fn overflow(op: &str, a: i64, b: i64) -> Error {
    Error::Shape(format!("symbolic: integer overflow computing {a} {op} {b}"))
}
pub(crate) fn ck_add(a: i64, b: i64) -> Result<i64> {
    a.checked_add(b).ok_or_else(|| overflow("+", a, b))
}
pub(crate) fn ck_sub(a: i64, b: i64) -> Result<i64> {
    a.checked_sub(b).ok_or_else(|| overflow("-", a, b))
}
pub(crate) fn ck_mul(a: i64, b: i64) -> Result<i64> {
    a.checked_mul(b).ok_or_else(|| overflow("*", a, b))
}
pub(crate) fn ck_neg(a: i64) -> Result<i64> {
    a.checked_neg().ok_or_else(|| overflow("*", a, -1))
}
/// Python's `a // b` (floor toward negative infinity).
pub(crate) fn py_floordiv(a: i64, b: i64) -> Result<i64> {
    ensure!(b != 0, Shape, "symbolic: division by zero ({a} // 0)");
    let q = a.checked_div(b).ok_or_else(|| overflow("//", a, b))?;
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}
/// Python's `a % b` (result has the sign of `b`).
pub(crate) fn py_mod(a: i64, b: i64) -> Result<i64> {
    ensure!(b != 0, Shape, "symbolic: modulo by zero ({a} % 0)");
    if b == -1 {
        return Ok(0);
    }
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}
/// `math.gcd`: non-negative greatest common divisor.
pub(crate) fn gcd(a: i64, b: i64) -> Result<i64> {
    let (mut x, mut y) = (a.unsigned_abs(), b.unsigned_abs());
    while y != 0 {
        (x, y) = (y, x % y);
    }
    i64::try_from(x).map_err(|_| overflow("gcd", a, b))
}
/// The deepest nesting of division/modulo/comparison rewrites before the algebra gives up with an
/// error (tinygrad hits Python's recursion limit on the same inputs, e.g. an And node with a
/// negative minimum modulo 2, which shifts forever).
const MAX_DEPTH: u32 = 160;

thread_local! {
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts one level of rewrite recursion while alive.
pub(crate) struct DepthGuard;

impl DepthGuard {
    pub(crate) fn enter(op: &str, a: &Node, b: &Node) -> Result<DepthGuard> {
        let d = DEPTH.with(|d| d.get());
        if d >= MAX_DEPTH {
            bail!(
                Shape,
                "symbolic: maximum recursion depth exceeded in {op} ({a:?}, {b:?})"
            );
        }
        DEPTH.with(|c| c.set(d + 1));
        Ok(DepthGuard)
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DEPTH.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// `math.ceil(a / b)` for integers, exactly.
pub(crate) fn ceil_div(a: i64, b: i64) -> Result<i64> {
    ck_neg(py_floordiv(ck_neg(a)?, b)?)
}

// ---------------------------------------------------------------------------------------------
// Construction

impl Node {
    /// tinygrad's `Variable(expr, min, max)`: `min == max` collapses to a number. `min` must be
    /// non-negative and not above `max` (which may itself be symbolic).
    pub fn var(expr: &str, min: i64, max: impl Into<Node>) -> Result<Node> {
        let max = max.into();
        let min_n = Node::Num(min);
        if min < 0 || !compare::py_le(&min_n, &max)? {
            bail!(Shape, "invalid Variable expr={expr:?} min={min} max={max}");
        }
        if max == min_n {
            return Ok(min_n);
        }
        Ok(Node::mk(
            Kind::Var {
                expr: expr.to_string(),
                val: None,
            },
            min_n,
            max,
        ))
    }

    /// Build an op node with its bounds (no simplification, no collapsing).
    fn mk(kind: Kind, min: Node, max: Node) -> Node {
        let hash = structure::hash_of(&kind, &min, &max);
        Node::Op(Arc::new(NodeData {
            kind,
            min,
            max,
            hash,
        }))
    }

    /// `MulNode(a, b)` with its bounds.
    pub(crate) fn raw_mul(a: Node, b: Node) -> Result<Node> {
        let (min, max) = Node::mul_bounds(&a, &b)?;
        Ok(Node::mk(Kind::Mul(a, b), min, max))
    }

    /// The (min, max) of `MulNode(a, b)`; an error for a negative left operand.
    pub(crate) fn mul_bounds(a: &Node, b: &Node) -> Result<(Node, Node)> {
        ensure!(
            compare::py_ge(a.min(), &Node::Num(0))?,
            Shape,
            "symbolic: MulNode needs a non-negative left operand, got {a} * {b}"
        );
        Ok(if let Node::Num(bi) = *b {
            let bn = Node::Num(bi);
            if bi >= 0 {
                (a.min().try_mul(&bn)?, a.max().try_mul(&bn)?)
            } else {
                (a.max().try_mul(&bn)?, a.min().try_mul(&bn)?)
            }
        } else if compare::py_ge(b.min(), &Node::Num(0))? {
            (a.min().try_mul(b.min())?, a.max().try_mul(b.max())?)
        } else {
            (a.max().try_mul(b.min())?, a.min().try_mul(b.max())?)
        })
    }

    /// `DivNode(a, b)` with its bounds.
    pub(crate) fn raw_div(a: Node, b: i64) -> Result<Node> {
        ensure!(
            compare::py_ge(a.min(), &Node::Num(0))?,
            Shape,
            "symbolic: DivNode needs a non-negative numerator, got {a} // {b}"
        );
        let bn = Node::Num(b);
        let (min, max) = (a.min().floordiv(&bn)?, a.max().floordiv(&bn)?);
        Ok(Node::mk(Kind::Div(a, b), min, max))
    }

    /// `ModNode(a, b)` with its bounds.
    pub(crate) fn raw_mod(a: Node, b: i64) -> Result<Node> {
        ensure!(
            compare::py_ge(a.min(), &Node::Num(0))?,
            Shape,
            "symbolic: ModNode needs a non-negative numerator, got {a} % {b}"
        );
        let bn = Node::Num(b);
        let (lo, hi) = (a.min(), a.max());
        let full = compare::py_ge(&hi.try_sub(lo)?, &bn)?
            || (lo != hi && compare::py_ge(&lo.modulo(&bn)?, &hi.modulo(&bn)?)?);
        let (min, max) = if full {
            (Node::Num(0), Node::Num(ck_sub(b, 1)?))
        } else {
            (lo.modulo(&bn)?, hi.modulo(&bn)?)
        };
        Ok(Node::mk(Kind::Mod(a, b), min, max))
    }

    /// `LtNode(a, b)` with its bounds.
    pub(crate) fn raw_lt(a: Node, b: Node) -> Result<Node> {
        let (t, f) = (Node::Num(1), Node::Num(0));
        let (min, max) = if a == b {
            (f.clone(), f)
        } else {
            let (bmin, bmax) = (b.min().clone(), b.max().clone());
            if compare::py_lt(a.max(), &bmin)? {
                (t.clone(), t)
            } else if compare::py_ge(a.min(), &bmax)? {
                (f.clone(), f)
            } else {
                (f, t)
            }
        };
        Ok(Node::mk(Kind::Lt(a, b), min, max))
    }

    /// `SumNode(nodes)` with its bounds.
    pub(crate) fn raw_sum(nodes: Vec<Node>) -> Result<Node> {
        let mins: Vec<Node> = nodes.iter().map(|x| x.min().clone()).collect();
        let maxs: Vec<Node> = nodes.iter().map(|x| x.max().clone()).collect();
        let (min, max) = (sint_sum(&mins)?, sint_sum(&maxs)?);
        Ok(Node::mk(Kind::Sum(nodes), min, max))
    }

    /// `AndNode(nodes)` with its bounds.
    pub(crate) fn raw_and(nodes: Vec<Node>) -> Result<Node> {
        let mins: Vec<Node> = nodes.iter().map(|x| x.min().clone()).collect();
        let maxs: Vec<Node> = nodes.iter().map(|x| x.max().clone()).collect();
        let (min, max) = (compare::py_min(&mins)?, compare::py_max(&maxs)?);
        Ok(Node::mk(Kind::And(nodes), min, max))
    }

    /// tinygrad's `create_node`: a node whose bounds meet becomes a number.
    pub(crate) fn create(n: Result<Node>) -> Result<Node> {
        let n = n?;
        let Node::Op(d) = &n else { return Ok(n) };
        ensure!(
            compare::py_le(&d.min, &d.max)?,
            Shape,
            "symbolic: min greater than max ({} > {}) when creating {n}",
            d.min,
            d.max
        );
        if d.min == d.max {
            return match d.min {
                Node::Num(v) => Ok(Node::Num(v)),
                _ => Err(Error::Shape(format!(
                    "symbolic: {n} has equal symbolic bounds {}",
                    d.min
                ))),
            };
        }
        Ok(n)
    }
}

impl From<i64> for Node {
    fn from(v: i64) -> Node {
        Node::Num(v)
    }
}
impl From<i32> for Node {
    fn from(v: i32) -> Node {
        Node::Num(v as i64)
    }
}
impl From<usize> for Node {
    /// Values above `i64::MAX` saturate (no shape or index reaches them).
    fn from(v: usize) -> Node {
        Node::Num(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<&Node> for Node {
    fn from(v: &Node) -> Node {
        v.clone()
    }
}

/// Integers as sints: `sints(&[2, 3])`.
pub fn sints(xs: &[i64]) -> Vec<Sint> {
    xs.iter().map(|&x| Node::Num(x)).collect()
}

// ---------------------------------------------------------------------------------------------
// Accessors

impl Node {
    /// The integer value, if this is a plain number.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Node::Num(v) => Some(*v),
            Node::Op(_) => None,
        }
    }
    /// Whether this is a plain number.
    pub fn is_int(&self) -> bool {
        matches!(self, Node::Num(_))
    }
    /// The lower bound (a number itself for a number).
    pub fn min(&self) -> &Node {
        match self {
            Node::Num(_) => self,
            Node::Op(d) => &d.min,
        }
    }
    /// The upper bound (may be symbolic when a Variable has a symbolic max).
    pub fn max(&self) -> &Node {
        match self {
            Node::Num(_) => self,
            Node::Op(d) => &d.max,
        }
    }
    pub(crate) fn inner(&self) -> Option<&Kind> {
        match self {
            Node::Num(_) => None,
            Node::Op(d) => Some(&d.kind),
        }
    }
    /// The structure of this node, for lowering.
    pub fn kind(&self) -> NodeKind<'_> {
        let d = match self {
            Node::Num(v) => return NodeKind::Num(*v),
            Node::Op(d) => d,
        };
        match &d.kind {
            Kind::Var { expr, val } => NodeKind::Var {
                name: expr,
                min: d.min.as_int().unwrap_or(0),
                max: &d.max,
                val: *val,
            },
            Kind::Mul(a, b) => NodeKind::Mul(a, b),
            Kind::Div(a, b) => NodeKind::Div(a, *b),
            Kind::Mod(a, b) => NodeKind::Mod(a, *b),
            Kind::Lt(a, b) => NodeKind::Lt(a, b),
            Kind::Sum(n) => NodeKind::Sum(n),
            Kind::And(n) => NodeKind::And(n),
        }
    }
    /// Whether this is a Variable.
    pub fn is_var(&self) -> bool {
        matches!(self.inner(), Some(Kind::Var { .. }))
    }
    /// A Variable's name (`expr` in tinygrad).
    pub fn expr(&self) -> Option<&str> {
        match self.inner() {
            Some(Kind::Var { expr, .. }) => Some(expr),
            _ => None,
        }
    }
    /// A bound Variable's value.
    pub fn val(&self) -> Option<i64> {
        match self.inner() {
            Some(Kind::Var { val, .. }) => *val,
            _ => None,
        }
    }
    /// Python truthiness: false only for a node whose bounds are both 0.
    pub fn truthy(&self) -> bool {
        match self {
            Node::Num(v) => *v != 0,
            Node::Op(d) => !(d.min == d.max && d.min == Node::Num(0)),
        }
    }
    /// The DEBUG rendering (`a[0-8=3]`), which defines equality and hashing.
    pub fn key(&self) -> Cow<'_, str> {
        match self {
            Node::Num(v) => Cow::Owned(v.to_string()),
            Node::Op(d) => Cow::Owned(d.key_text()),
        }
    }
    /// tinygrad's default render: `((a*2)+1)`, `(a//2)`, `(a%2)`, `(a<2)`, `(x and y)`.
    pub fn render(&self) -> String {
        match self {
            Node::Num(v) => v.to_string(),
            Node::Op(d) => match &d.kind {
                Kind::Var { expr, .. } => expr.clone(),
                k => render_with(k, &|n| Cow::Owned(n.render())),
            },
        }
    }
}

/// A bound in DEBUG form: numbers plain, nodes as Python's `str(node)` (`<key>`).
fn debug_bound(n: &Node) -> String {
    match n {
        Node::Num(v) => v.to_string(),
        Node::Op(d) => format!("<{}>", d.key_text()),
    }
}

impl NodeData {
    /// The DEBUG key, rendered when asked for (nothing compares or hashes it).
    fn key_text(&self) -> String {
        compute_key(&self.kind, &self.min, &self.max)
    }
}

fn compute_key(kind: &Kind, min: &Node, max: &Node) -> String {
    match kind {
        Kind::Var { expr, val } => {
            let v = val.map(|v| format!("={v}")).unwrap_or_default();
            format!("{expr}[{}-{}{v}]", debug_bound(min), debug_bound(max))
        }
        k => render_with(k, &|n| n.key()),
    }
}

fn render_with<'a>(kind: &'a Kind, child: &dyn Fn(&'a Node) -> Cow<'a, str>) -> String {
    match kind {
        Kind::Var { expr, .. } => expr.clone(),
        Kind::Mul(a, b) => {
            if structure::mul_swapped(a, b) {
                format!("({}*{})", child(b), child(a))
            } else {
                format!("({}*{})", child(a), child(b))
            }
        }
        Kind::Div(a, b) => format!("({}//{b})", child(a)),
        Kind::Mod(a, b) => format!("({}%{b})", child(a)),
        Kind::Lt(a, b) => format!("({}<{})", child(a), child(b)),
        Kind::Sum(nodes) => format!("({})", sorted_join(nodes, child, "+")),
        Kind::And(nodes) => format!("({})", sorted_join(nodes, child, " and ")),
    }
}

fn sorted_join<'a>(
    nodes: &'a [Node],
    child: &dyn Fn(&'a Node) -> Cow<'a, str>,
    sep: &str,
) -> String {
    let mut parts: Vec<Cow<'a, str>> = nodes.iter().map(child).collect();
    parts.sort();
    parts.join(sep)
}

impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        match (self, other) {
            (Node::Num(a), Node::Num(b)) => a == b,
            (Node::Op(a), Node::Op(b)) => {
                Arc::ptr_eq(a, b) || (a.hash == b.hash && structure::same(a, b))
            }
            _ => false,
        }
    }
}
impl Eq for Node {}
impl PartialEq<i64> for Node {
    fn eq(&self, other: &i64) -> bool {
        matches!(self, Node::Num(v) if v == other)
    }
}
impl Hash for Node {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Node::Num(v) => v.hash(state),
            Node::Op(d) => state.write_u64(d.hash),
        }
    }
}
impl fmt::Display for Node {
    /// The default render (what kernels see).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}
impl fmt::Debug for Node {
    /// Python's `str(node)`: `<key>` for nodes, the number for numbers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Num(v) => write!(f, "{v}"),
            Node::Op(d) => write!(f, "<{}>", d.key_text()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Variables, substitution and evaluation

impl Node {
    /// The unique Variables in this expression, in first-seen order (bounds are not searched).
    pub fn vars(&self) -> Vec<Node> {
        let mut out = Vec::new();
        let mut seen = crate::helpers::FxHashSet::default();
        self.collect_vars(&mut out, &mut seen);
        out
    }

    /// Append to `out` the Variables of this expression not yet in `seen` (first-seen order; the
    /// set's hasher does not change the order).
    pub(crate) fn collect_vars<S: std::hash::BuildHasher>(
        &self,
        out: &mut Vec<Node>,
        seen: &mut HashSet<Node, S>,
    ) {
        let Some(k) = self.inner() else { return };
        match k {
            Kind::Var { .. } => {
                if seen.insert(self.clone()) {
                    out.push(self.clone());
                }
            }
            Kind::Mul(a, b) | Kind::Lt(a, b) => {
                a.collect_vars(out, seen);
                b.collect_vars(out, seen);
            }
            Kind::Div(a, _) | Kind::Mod(a, _) => a.collect_vars(out, seen),
            Kind::Sum(n) | Kind::And(n) => n.iter().for_each(|x| x.collect_vars(out, seen)),
        }
    }

    /// Bind a Variable to a value in its range (a number binds only to itself).
    pub fn bind(&self, val: i64) -> Result<Node> {
        match self {
            Node::Num(v) => {
                ensure!(*v == val, Shape, "cannot bind {val} to {v}");
                Ok(self.clone())
            }
            Node::Op(d) => match &d.kind {
                Kind::Var { expr, val: None } => {
                    let lo = d.min.as_int().unwrap_or(0);
                    ensure!(
                        lo <= val && compare::py_le(&Node::Num(val), &d.max)?,
                        Shape,
                        "cannot bind {val} to {self:?}"
                    );
                    let kind = Kind::Var {
                        expr: expr.clone(),
                        val: Some(val),
                    };
                    Ok(Node::mk(kind, d.min.clone(), d.max.clone()))
                }
                _ => Err(Error::Shape(format!("cannot bind {val} to {self:?}"))),
            },
        }
    }

    /// A bound Variable becomes `(unbound Variable, Some(value))`; any other node has its bound
    /// Variables replaced by unbound ones and returns `None` (tinygrad's `Node.unbind`).
    pub fn unbind(&self) -> Result<(Node, Option<i64>)> {
        if let Node::Op(d) = self {
            if let Kind::Var { expr, val: Some(v) } = &d.kind {
                let kind = Kind::Var {
                    expr: expr.clone(),
                    val: None,
                };
                return Ok((Node::mk(kind, d.min.clone(), d.max.clone()), Some(*v)));
            }
        }
        let mut map = HashMap::new();
        for v in self.vars() {
            if v.val().is_some() {
                let (u, _) = v.unbind()?;
                map.insert(v, u);
            }
        }
        if map.is_empty() {
            return Ok((self.clone(), None));
        }
        Ok((self.substitute(&map)?, None))
    }

    /// Replace Variables by the nodes they map to, re-simplifying on the way up.
    pub fn substitute(&self, var_vals: &HashMap<Node, Node>) -> Result<Node> {
        let Some(k) = self.inner() else {
            return Ok(self.clone());
        };
        match k {
            Kind::Var { .. } => Ok(var_vals.get(self).cloned().unwrap_or_else(|| self.clone())),
            Kind::Mul(a, b) => a.substitute(var_vals)?.try_mul(&b.substitute(var_vals)?),
            Kind::Div(a, b) => a.substitute(var_vals)?.floordiv(&Node::Num(*b)),
            Kind::Mod(a, b) => a.substitute(var_vals)?.modulo(&Node::Num(*b)),
            Kind::Lt(a, b) => create_lt_node(&a.substitute(var_vals)?, &b.substitute(var_vals)?),
            Kind::Sum(n) => {
                let subs = n
                    .iter()
                    .map(|x| x.substitute(var_vals))
                    .collect::<Result<Vec<_>>>()?;
                Node::sum(subs)
            }
            Kind::And(n) => {
                let mut subs = Vec::with_capacity(n.len());
                for x in n {
                    let s = x.substitute(var_vals)?;
                    if !s.truthy() {
                        return Ok(Node::Num(0));
                    }
                    subs.push(s);
                }
                Node::ands(subs)
            }
        }
    }

    /// Evaluate numerically exactly as the rendered code computes it (floor `//` and `%`, `<` and
    /// `and` give 0 or 1), taking Variable values from `var` by name.
    pub fn evaluate(&self, var: &dyn Fn(&str) -> Option<i64>) -> Result<i64> {
        let Some(k) = self.inner() else {
            return Ok(self.as_int().unwrap_or(0));
        };
        match k {
            Kind::Var { expr, .. } => var(expr)
                .ok_or_else(|| Error::Shape(format!("evaluate: no value for Variable {expr}"))),
            Kind::Mul(a, b) => ck_mul(a.evaluate(var)?, b.evaluate(var)?),
            Kind::Div(a, b) => py_floordiv(a.evaluate(var)?, *b),
            Kind::Mod(a, b) => py_mod(a.evaluate(var)?, *b),
            Kind::Lt(a, b) => Ok((a.evaluate(var)? < b.evaluate(var)?) as i64),
            Kind::Sum(n) => n
                .iter()
                .try_fold(0i64, |acc, x| ck_add(acc, x.evaluate(var)?)),
            Kind::And(n) => {
                for x in n {
                    if x.evaluate(var)? == 0 {
                        return Ok(0);
                    }
                }
                Ok(1)
            }
        }
    }
}

/// tinygrad's `sym_infer`: the value of `a` with the Variables of `var_vals` substituted.
pub fn sym_infer(a: &Node, var_vals: &VarVals) -> Result<i64> {
    if let Node::Num(v) = a {
        return Ok(*v);
    }
    let map: HashMap<Node, Node> = var_vals
        .iter()
        .map(|(k, v)| (k.clone(), Node::Num(*v)))
        .collect();
    match a.substitute(&map)? {
        Node::Num(v) => Ok(v),
        r => Err(Error::Shape(format!(
            "sym_infer didn't produce a number from {a:?} with {var_vals:?}: {r:?}"
        ))),
    }
}

/// Python's `sum(xs)` over sints (a left fold from 0).
pub fn sint_sum(xs: &[Sint]) -> Result<Sint> {
    xs.iter().try_fold(Node::Num(0), |acc, x| acc.try_add(x))
}

/// tinygrad's `prod(xs)` over sints (a left fold from 1).
pub fn sint_prod(xs: &[Sint]) -> Result<Sint> {
    xs.iter().try_fold(Node::Num(1), |acc, x| acc.try_mul(x))
}

/// tinygrad's `all_int`.
pub fn all_int(xs: &[Sint]) -> bool {
    xs.iter().all(Node::is_int)
}

/// Render a shape like Python renders a tuple of sints: `(2, 3)`, `(4,)`, `()`.
pub fn render_shape(xs: &[Sint]) -> String {
    match xs.len() {
        0 => "()".to_string(),
        1 => format!("({:?},)", xs[0]),
        _ => format!(
            "({})",
            xs.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
