//! Pattern matching and rewriting of UOp graphs (tinygrad 0.9.1 `UPat`, `PatternMatcher`,
//! `graph_rewrite`).
//!
//! Owns: [`UPat`] (a pattern over one node and, recursively, its sources), [`PatternMatcher`] (an
//! ordered list of `(pattern, rewrite function)` rules, indexed by op and arg (an ALU node's
//! rules by its ALU op's pre-filter key bit, without hashing the arg), each rule skipped
//! without matching where the node's sources (or theirs) lack what its pattern needs:
//! `pattern/prefilter.rs`), and [`graph_rewrite`] (one bottom-up pass over the post-order of
//! `pattern/postorder.rs` that rebuilds every node from its rewritten sources, deduplicates
//! structurally equal nodes, and rewrites each rule result again until no rule applies).
//!
//! Semantics follow 0.9.1: a pattern's op, arg and dtype are each a set of accepted values (or
//! anything); a dtype constraint is ignored for nodes without a dtype; CONST args compare as
//! Python numbers (`0 == 0.0 == False`); sources are an exact tuple, any permutation of a list
//! (commutative ops), or one pattern repeated for every source; a name binds one node and a second
//! use of the name must see the same node. Rules for a specific arg are tried before arg-agnostic
//! rules, each group in list order. One deliberate difference: when a rule matches but its
//! function declines (returns `None`), the next rule is tried (0.9.1 stopped there; later
//! tinygrad tries on, and it can only fold more).
//!
//! Not guaranteed: termination of user rule sets; a rewrite chain deeper than
//! [`MAX_REWRITE_DEPTH`] is reported as an error instead of looping forever.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::codegen::uops::{Srcs, UArg, UOp, UOpMap, UOps};
use crate::dtype::{ConstValue, DType};
use crate::helpers::{FxBuild, FxHasher};
use crate::ops::Op;
use crate::Result;

mod postorder;
mod prefilter;
pub(crate) use postorder::PostOrder;
use postorder::{ptr_key, Positions};
pub(crate) use prefilter::node_key;
use prefilter::{alu_slot, alu_slot_of, needed_src_keys, SrcNeed, ALU_SLOTS};

/// The most rule results [`graph_rewrite`] keeps rewriting at once before it reports a rule set
/// that does not terminate (a chain of results each rewritten again).
pub const MAX_REWRITE_DEPTH: usize = 200_000;

/// How a pattern matches the sources of a node.
#[derive(Clone, Debug)]
pub enum SrcPat {
    /// Exactly these, in this order (Python tuple).
    Tuple(Vec<UPat>),
    /// These in any order (Python list: commutative ops).
    Perm(Vec<UPat>),
    /// This pattern for every source, however many (a single Python UPat).
    Repeat(Box<UPat>),
}

/// A pattern over a UOp. Build with the constructors and chain the modifiers:
/// `UPat::alu(BinaryOps::ADD, vec![UPat::var("x"), UPat::konst(0)])`.
#[derive(Clone, Debug, Default)]
pub struct UPat {
    /// Accepted ops (`None`: any).
    pub op: Option<Vec<UOps>>,
    /// Accepted args (`None`: any).
    pub arg: Option<Vec<UArg>>,
    pub src: Option<SrcPat>,
    pub name: Option<&'static str>,
    /// Accepted dtypes (`None`: any); ignored for nodes without a dtype.
    pub dtype: Option<Vec<DType>>,
    /// Source counts accepted besides the pattern's own.
    pub allow_len: Vec<usize>,
}

impl UPat {
    /// Matches any node.
    pub fn any() -> UPat {
        UPat::default()
    }
    /// Matches any node and binds it to `name`.
    pub fn var(name: &'static str) -> UPat {
        UPat::any().named(name)
    }
    /// Matches nodes of this op.
    pub fn op(op: UOps) -> UPat {
        UPat {
            op: Some(vec![op]),
            ..UPat::default()
        }
    }
    /// Matches nodes of any of these ops.
    pub fn ops(ops: &[UOps]) -> UPat {
        UPat {
            op: Some(ops.to_vec()),
            ..UPat::default()
        }
    }
    /// Matches any CONST and binds it to `name`.
    pub fn cvar(name: &'static str) -> UPat {
        UPat::op(UOps::CONST).named(name)
    }
    /// Matches a CONST numerically equal to `v` (Python `==`: `1 == 1.0 == True`).
    pub fn konst(v: impl Into<ConstValue>) -> UPat {
        UPat::op(UOps::CONST).arg(UArg::Const(v.into()))
    }
    /// Matches an ALU node of `op` over `src`: any order for commutative ops, exact order
    /// otherwise (what tinygrad's `UPat.compile` makes of a UOp template).
    pub fn alu(op: impl Into<Op>, src: Vec<UPat>) -> UPat {
        let op = op.into();
        let p = UPat::op(UOps::ALU).arg(UArg::Alu(op));
        if op.is_commutative() {
            p.src_perm(src)
        } else {
            p.src(src)
        }
    }
    /// An ALU node of `op` with any sources.
    pub fn alu_any(op: impl Into<Op>) -> UPat {
        UPat::op(UOps::ALU).arg(UArg::Alu(op.into()))
    }

    pub fn named(mut self, name: &'static str) -> UPat {
        self.name = Some(name);
        self
    }
    pub fn arg(mut self, arg: UArg) -> UPat {
        self.arg = Some(vec![arg]);
        self
    }
    pub fn args(mut self, args: Vec<UArg>) -> UPat {
        self.arg = Some(args);
        self
    }
    pub fn dtype(mut self, dtype: DType) -> UPat {
        self.dtype = Some(vec![dtype]);
        self
    }
    pub fn dtypes(mut self, dtypes: Vec<DType>) -> UPat {
        self.dtype = Some(dtypes);
        self
    }
    /// Sources as an exact tuple.
    pub fn src(mut self, src: Vec<UPat>) -> UPat {
        self.src = Some(SrcPat::Tuple(src));
        self
    }
    /// Sources in any order.
    pub fn src_perm(mut self, src: Vec<UPat>) -> UPat {
        self.src = Some(SrcPat::Perm(src));
        self
    }
    /// One pattern for every source.
    pub fn src_repeat(mut self, p: UPat) -> UPat {
        self.src = Some(SrcPat::Repeat(Box::new(p)));
        self
    }
    pub fn allow_len(mut self, lens: &[usize]) -> UPat {
        self.allow_len = lens.to_vec();
        self
    }

    /// Match `u`, returning the bindings.
    pub fn matches<'a>(&self, u: &'a UOp) -> Option<Match<'a>> {
        let mut store = Match::default();
        match_pat(u, self, &mut store).then_some(store)
    }
}

/// Python `==` between two args: CONST values compare as numbers, everything else structurally.
pub fn arg_eq(a: &UArg, b: &UArg) -> bool {
    match (a, b) {
        (UArg::Const(x), UArg::Const(y)) => const_num_eq(*x, *y),
        _ => a == b,
    }
}

/// Python numeric equality of two constants (`1 == 1.0 == True`, `nan != nan`).
pub fn const_num_eq(x: ConstValue, y: ConstValue) -> bool {
    match (x, y) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => x.as_f64() == y.as_f64(),
        _ => x.as_i128() == y.as_i128(),
    }
}

/// The nodes a pattern bound, by name (borrowed from the matched graph: binding costs no
/// reference count).
#[derive(Clone, Debug, Default)]
pub struct Match<'a> {
    binds: Binds<'a>,
}

/// The bindings of one match attempt, in binding order: the first [`INLINE_BINDS`] in place (a
/// rule binds a few names; matching allocates nothing), any more in `spill`.
#[derive(Clone, Debug, Default)]
struct Binds<'a> {
    len: usize,
    inline: [Option<(&'static str, &'a UOp)>; INLINE_BINDS],
    spill: Vec<(&'static str, &'a UOp)>,
}

/// Bindings [`Binds`] holds without allocating.
const INLINE_BINDS: usize = 8;

impl<'a> Binds<'a> {
    fn len(&self) -> usize {
        self.len
    }
    fn push(&mut self, b: (&'static str, &'a UOp)) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = Some(b),
            None => self.spill.push(b),
        }
        self.len += 1;
    }
    /// Forget the bindings from position `len` on.
    fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.spill.truncate(len.saturating_sub(INLINE_BINDS));
            self.len = len;
        }
    }
    fn clear(&mut self) {
        self.truncate(0);
    }
    fn get(&self, name: &str) -> Option<&'a UOp> {
        let inline = self.inline[..self.len.min(INLINE_BINDS)].iter().flatten();
        inline
            .chain(self.spill.iter())
            .find(|(n, _)| *n == name)
            .map(|(_, u)| *u)
    }
}

impl<'a> Match<'a> {
    /// The node bound to `name` (None when the pattern has no such name).
    pub fn get(&self, name: &str) -> Option<&'a UOp> {
        self.binds.get(name)
    }
    /// The CONST value bound to `name`.
    pub fn cv(&self, name: &str) -> Option<ConstValue> {
        self.get(name).and_then(|u| u.const_value())
    }
}

fn match_pat<'a>(u: &'a UOp, p: &UPat, store: &mut Match<'a>) -> bool {
    // the cheap checks first; the name is bound once the node itself passes (before its sources)
    if let Some(ops) = &p.op {
        if !ops.contains(&u.op()) {
            return false;
        }
    }
    if let Some(args) = &p.arg {
        if !args.iter().any(|a| arg_eq(a, u.arg())) {
            return false;
        }
    }
    if let (Some(dts), Some(dt)) = (&p.dtype, u.dtype()) {
        // tinygrad's PtrDType compares equal to its base dtype.
        if !dts.iter().any(|d| d.base() == dt.base()) {
            return false;
        }
    }
    if let Some(name) = p.name {
        match store.get(name) {
            Some(bound) if bound != u => return false,
            Some(_) => {}
            None => store.binds.push((name, u)),
        }
    }
    let Some(src) = &p.src else { return true };
    let n = u.src().len();
    match src {
        SrcPat::Tuple(v) => try_sources(u, p, v.iter(), store),
        SrcPat::Repeat(one) => try_sources(u, p, std::iter::repeat(&**one).take(n), store),
        SrcPat::Perm(v) => try_permutations(u, p, v, store),
    }
}

/// Match the sources of `u` against `pats` (zipped, as Python's `zip`), keeping the bindings only
/// on success (bindings are append-only, so a failed attempt is undone by truncation).
fn try_sources<'a, 'p>(
    u: &'a UOp,
    p: &UPat,
    pats: impl ExactSizeIterator<Item = &'p UPat>,
    store: &mut Match<'a>,
) -> bool {
    let n = u.src().len();
    if n != pats.len() && !p.allow_len.contains(&n) {
        return false;
    }
    let mark = store.binds.len();
    if u.src()
        .iter()
        .zip(pats)
        .all(|(s, sp)| match_pat(s, sp, store))
    {
        true
    } else {
        store.binds.truncate(mark);
        false
    }
}

const PERM1: [[usize; 1]; 1] = [[0]];
const PERM2: [[usize; 2]; 2] = [[0, 1], [1, 0]];
const PERM3: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// Index permutations of `0..n` in `itertools.permutations` order (lexicographic).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    match n {
        0 => return vec![vec![]],
        1 => return PERM1.iter().map(|p| p.to_vec()).collect(),
        2 => return PERM2.iter().map(|p| p.to_vec()).collect(),
        3 => return PERM3.iter().map(|p| p.to_vec()).collect(),
        _ => {}
    }
    let mut out = Vec::new();
    let mut cur: Vec<usize> = (0..n).collect();
    loop {
        out.push(cur.clone());
        // next lexicographic permutation
        let Some(i) = (1..n).rev().find(|&i| cur[i - 1] < cur[i]) else {
            return out;
        };
        let Some(j) = (i..n).rev().find(|&j| cur[j] > cur[i - 1]) else {
            return out;
        };
        cur.swap(i - 1, j);
        cur[i..].reverse();
    }
}

/// Try `v` in every order against the sources of `u`.
fn try_permutations<'a>(u: &'a UOp, p: &UPat, v: &[UPat], store: &mut Match<'a>) -> bool {
    if v.len() != u.src().len() && !p.allow_len.contains(&u.src().len()) {
        return false;
    }
    match v.len() {
        1 => PERM1
            .iter()
            .any(|o| try_sources(u, p, o.iter().map(|&i| &v[i]), store)),
        2 => PERM2
            .iter()
            .any(|o| try_sources(u, p, o.iter().map(|&i| &v[i]), store)),
        3 => PERM3
            .iter()
            .any(|o| try_sources(u, p, o.iter().map(|&i| &v[i]), store)),
        n => permutations(n)
            .iter()
            .any(|o| try_sources(u, p, o.iter().map(|&i| &v[i]), store)),
    }
}

/// A rule's rewrite: the replacement, or `None` to decline.
pub type RewriteFn = Arc<dyn Fn(&Match) -> Option<UOp> + Send + Sync>;

/// A hashable form of an arg for the rule index: numbers normalised so that `0`, `0.0` and
/// `False` share a key (as Python's `hash` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ArgKey {
    Int(i128),
    Float(u64),
    Alu(Op),
    /// Any other arg, by its hash (a collision only costs a failed match: patterns recheck args).
    Other(u64),
}

fn arg_key(a: &UArg) -> ArgKey {
    match a {
        UArg::Const(ConstValue::Float(f)) => {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 {
                ArgKey::Int(*f as i128)
            } else if *f == 0.0 {
                ArgKey::Int(0)
            } else {
                ArgKey::Float(f.to_bits())
            }
        }
        UArg::Const(v) => ArgKey::Int(v.as_i128()),
        UArg::Alu(op) => ArgKey::Alu(*op),
        other => {
            let mut h = FxHasher::default();
            other.hash(&mut h);
            ArgKey::Other(h.finish())
        }
    }
}

/// An ordered rule list. Rules are data: `rules()` hands them out so another matcher (a renderer's
/// extra rules) can be built on top with [`PatternMatcher::extend`].
#[derive(Clone, Default)]
pub struct PatternMatcher {
    rules: Vec<(UPat, RewriteFn)>,
    /// (op, arg) -> rule indices, for rules with an arg.
    by_arg: HashMap<(UOps, ArgKey), Vec<usize>, FxBuild>,
    /// op (by its enum position) -> rule indices, for rules without an arg.
    by_op: Vec<Vec<usize>>,
    /// Per ALU op with a key bit of its own (by its `prefilter::alu_slot`): the rules for that
    /// arg followed by the arg-agnostic ALU rules, the order `rewrite` tries them in (an ALU
    /// node's rules without hashing its arg).
    by_alu: Vec<Vec<usize>>,
    /// Per rule, what its pattern needs of a node's sources and theirs ([`SrcNeed`]): a node
    /// whose sources lack it cannot match, so the rule is skipped without matching.
    need: Vec<SrcNeed>,
    /// The ops (bit `1 << op`) some rule matches: a node of another op is left as it is.
    ops_with_rules: u32,
    /// The ops some rule with an arg matches: for another op, `by_arg` is not looked up.
    ops_with_arg_rules: u32,
}

impl PatternMatcher {
    /// Index `rules`. A rule whose pattern has no op can never be found and is reported.
    pub fn new(rules: Vec<(UPat, RewriteFn)>) -> Result<PatternMatcher> {
        let mut pm = PatternMatcher {
            by_op: vec![vec![]; UOps::ALL.len()],
            ..PatternMatcher::default()
        };
        for (i, (p, _)) in rules.iter().enumerate() {
            let Some(ops) = &p.op else {
                crate::bail!(
                    Codegen,
                    "PatternMatcher: rule {i} has a pattern without an op ({p:?})"
                );
            };
            for &op in ops {
                pm.ops_with_rules |= 1 << (op as u32);
                match &p.arg {
                    Some(args) => {
                        pm.ops_with_arg_rules |= 1 << (op as u32);
                        for a in args {
                            pm.by_arg.entry((op, arg_key(a))).or_default().push(i);
                        }
                    }
                    None => pm.by_op[op as usize].push(i),
                }
            }
        }
        pm.need = rules.iter().map(|(p, _)| needed_src_keys(p)).collect();
        pm.rules = rules;
        pm.by_alu = vec![vec![]; ALU_SLOTS];
        for ((op, key), ids) in &pm.by_arg {
            if let (UOps::ALU, ArgKey::Alu(a)) = (op, key) {
                if let Some(slot) = alu_slot_of(*a) {
                    pm.by_alu[slot] = ids.clone();
                }
            }
        }
        for ids in &mut pm.by_alu {
            ids.extend_from_slice(&pm.by_op[UOps::ALU as usize]);
        }
        Ok(pm)
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[(UPat, RewriteFn)] {
        &self.rules
    }

    /// A matcher with this one's rules followed by `more`.
    pub fn extend(&self, more: Vec<(UPat, RewriteFn)>) -> Result<PatternMatcher> {
        let mut all = self.rules.clone();
        all.extend(more);
        PatternMatcher::new(all)
    }

    /// The first rule result for `u` (rules for `u`'s arg first, then arg-agnostic ones).
    pub fn rewrite(&self, u: &UOp) -> Option<UOp> {
        if self.ops_with_rules & 1 << (u.op() as u32) == 0 {
            return None;
        }
        // an ALU node of an op with a key bit: its rules, in order, without hashing its arg
        if let Some(ids) = alu_slot(u.key()).and_then(|s| self.by_alu.get(s)) {
            return self.first_result(u, ids.iter());
        }
        let specific: &[usize] = if self.ops_with_arg_rules & 1 << (u.op() as u32) == 0 {
            &[]
        } else {
            self.by_arg
                .get(&(u.op(), arg_key(u.arg())))
                .map_or(&[], Vec::as_slice)
        };
        let generic: &[usize] = self.by_op.get(u.op() as usize).map_or(&[], Vec::as_slice);
        self.first_result(u, specific.iter().chain(generic))
    }

    /// The first result of the rules `ids` (in order) for `u`.
    #[inline]
    fn first_result<'i>(&self, u: &UOp, ids: impl Iterator<Item = &'i usize>) -> Option<UOp> {
        // made for the first rule the pre-filter lets through (most nodes have none)
        let mut store: Option<Match> = None;
        for &i in ids {
            if self.need.get(i).is_some_and(|n| !n.admits(u)) {
                continue;
            }
            let (pat, f) = &self.rules[i];
            let m = store.get_or_insert_with(Match::default);
            m.binds.clear();
            if match_pat(u, pat, m) {
                if let Some(out) = f(m) {
                    return Some(out);
                }
            }
        }
        None
    }
}

/// Wrap a closure as a [`RewriteFn`].
pub fn rule(f: impl Fn(&Match) -> Option<UOp> + Send + Sync + 'static) -> RewriteFn {
    Arc::new(f)
}

/// The rewrite results of [`graph_rewrite`] so far, by node address: the nodes of the input
/// graph (alive while it is rewritten) by their post-order position in `results`, any other node
/// in `by_ptr` (holding the node, so its address cannot be reused while it is a key). A node
/// reached again through another handle to an equal structure is rebuilt from its sources'
/// results and then found in the structural table of rebuilt nodes, with the same result.
#[derive(Default)]
struct Done {
    by_ptr: HashMap<usize, (UOp, UOp), FxBuild>,
    /// Input node address (see [`ptr_key`]) -> post-order position.
    input: Positions,
    /// The results of the input nodes, in post-order (a prefix while the pass runs).
    results: Vec<UOp>,
}

impl Done {
    fn get(&self, n: &UOp) -> Option<UOp> {
        self.get_ref(n).cloned()
    }
    fn get_ref(&self, n: &UOp) -> Option<&UOp> {
        let k = ptr_key(n);
        if let Some(r) = self.input.get(k).and_then(|i| self.results.get(i)) {
            return Some(r);
        }
        self.by_ptr.get(&k).map(|(_, r)| r)
    }
    fn contains(&self, n: &UOp) -> bool {
        self.get_ref(n).is_some()
    }
    fn insert(&mut self, n: UOp, r: UOp) {
        if self.by_ptr.capacity() == 0 {
            // rule results come with new nodes in proportion to the graph (about 0.4 per input
            // node in rewrite-heavy kernels): sized once instead of doubling from empty
            self.by_ptr.reserve(self.results.capacity() / 2);
        }
        self.by_ptr.insert(ptr_key(&n), (n, r));
    }
}

/// The state of one [`graph_rewrite`].
struct Rewriter<'p> {
    pm: &'p PatternMatcher,
    done: Done,
    /// The result of each rebuilt node a rule rewrote (a node no rule rewrites is its own result
    /// and is not entered).
    nodes: UOpMap<UOp>,
}

/// Rewrite the graph under `sink` bottom-up with `pm` (tinygrad's `graph_rewrite`): every node is
/// rebuilt from its rewritten sources and deduplicated on (op, dtype, sources, arg); a rule result
/// is itself rewritten until no rule applies.
///
/// The nodes of the input graph are visited once in post-order (their results by position); the
/// graph of a rule result, which may hold new and old nodes, is rewritten depth-first through
/// the results by node address.
pub fn graph_rewrite(sink: &UOp, pm: &PatternMatcher) -> Result<UOp> {
    graph_rewrite_keep(sink, pm).map(|(r, _)| r)
}

/// [`graph_rewrite`], also handing back the post-order of `sink`'s graph it walked when the
/// result is `sink` itself (no rule rewrote any node: the result's graph is that graph, so a
/// later pass over it need not walk it again); `None` otherwise.
pub(crate) fn graph_rewrite_keep<'a>(
    sink: &'a UOp,
    pm: &PatternMatcher,
) -> Result<(UOp, Option<PostOrder<'a>>)> {
    let mut order = PostOrder::of(sink);
    let n = order.nodes.len();
    let mut rw = Rewriter {
        pm,
        done: Done {
            by_ptr: HashMap::default(),
            input: std::mem::take(&mut order.positions),
            results: Vec::with_capacity(n),
        },
        nodes: UOpMap::with_capacity_and_hasher(n / 8, Default::default()),
    };
    for (i, &node) in order.nodes.iter().enumerate() {
        let srcs = order.srcs(i);
        let results = &rw.done.results;
        // sources that came back as the very same nodes rebuild `node` itself
        let unchanged = srcs
            .iter()
            .zip(node.src())
            .all(|(&j, s)| results[j].ptr_eq(s));
        let x = if unchanged {
            node.clone()
        } else {
            let src: Srcs = srcs.iter().map(|&j| results[j].clone()).collect();
            UOp::new(node.op(), node.dtype(), src, node.arg().clone())
        };
        let r = rw.settle(x)?;
        rw.done.results.push(r);
    }
    let Some(r) = rw.done.results.pop() else {
        crate::bail!(Internal, "graph_rewrite: the sink was not rewritten");
    };
    if !r.ptr_eq(sink) {
        return Ok((r, None));
    }
    order.positions = std::mem::take(&mut rw.done.input);
    Ok((r, Some(order)))
}

enum Frame {
    /// Rewrite this node: first its sources.
    Start(UOp),
    /// Sources are rewritten; rebuild and match.
    Rebuild(UOp),
    /// The rule result `target` is being rewritten; then record it for `node` (and `key`).
    Finish { node: UOp, key: UOp, target: UOp },
}

impl Rewriter<'_> {
    /// The result of an input node, rebuilt from its sources' results as `x`: an equal node
    /// rewritten before, else the rewritten rule result, else `x`; recorded for `x` (the caller
    /// records it for the input node, in `Done::results`).
    fn settle(&mut self, x: UOp) -> Result<UOp> {
        // one probe of `nodes` for a node no rule rewrites (most of them), which is not entered:
        // an equal node met again is matched again, with the same (no) result
        if let Some(r) = self.nodes.get(&x) {
            return Ok(r.clone());
        }
        let Some(target) = self.pm.rewrite(&x) else {
            return Ok(x);
        };
        let r = match self.done.get(&target) {
            Some(r) => r,
            None => self.rewrite_result(target)?,
        };
        self.nodes.insert(x, r.clone());
        Ok(r)
    }

    /// Rewrite the graph of a rule result (its nodes not yet rewritten, depth-first).
    fn rewrite_result(&mut self, root: UOp) -> Result<UOp> {
        let mut stack = vec![Frame::Start(root.clone())];
        // rule results still being rewritten (`root` is one): a rule set that never settles
        // grows this
        let mut pending = 1usize;
        while let Some(frame) = stack.pop() {
            if pending > MAX_REWRITE_DEPTH {
                crate::bail!(
                    Codegen,
                    "graph_rewrite: more than {MAX_REWRITE_DEPTH} pending rewrites; the rule set does not terminate"
                );
            }
            match frame {
                Frame::Start(n) => {
                    if self.done.contains(&n) {
                        continue;
                    }
                    stack.push(Frame::Rebuild(n.clone()));
                    for s in n.src().iter().rev() {
                        if !self.done.contains(s) {
                            stack.push(Frame::Start(s.clone()));
                        }
                    }
                }
                Frame::Rebuild(n) => {
                    if !self.done.contains(&n) {
                        self.rebuild(n, &mut stack, &mut pending)?;
                    }
                }
                Frame::Finish { node, key, target } => {
                    pending -= 1;
                    let Some(r) = self.done.get(&target) else {
                        crate::bail!(Internal, "graph_rewrite: rule result not rewritten");
                    };
                    self.nodes.insert(key, r.clone());
                    self.done.insert(node, r);
                }
            }
        }
        match self.done.get(&root) {
            Some(r) => Ok(r),
            None => crate::bail!(Internal, "graph_rewrite: a rule result was not rewritten"),
        }
    }

    /// [`Rewriter::settle`] inside [`Rewriter::rewrite_result`]: a further rule result is pushed
    /// on `stack` instead of rewritten recursively.
    fn rebuild(&mut self, n: UOp, stack: &mut Vec<Frame>, pending: &mut usize) -> Result<()> {
        let mut unchanged = true;
        for s in n.src() {
            match self.done.get_ref(s) {
                Some(r) => unchanged &= r.ptr_eq(s),
                None => crate::bail!(Internal, "graph_rewrite: source not rewritten"),
            }
        }
        let x = if unchanged {
            n.clone()
        } else {
            let src: Srcs = n.src().iter().filter_map(|s| self.done.get(s)).collect();
            UOp::new(n.op(), n.dtype(), src, n.arg().clone())
        };
        if let Some(found) = self.nodes.get(&x) {
            let r = found.clone();
            self.done.insert(n, r);
            return Ok(());
        }
        match self.pm.rewrite(&x) {
            None => self.done.insert(n, x),
            Some(target) => {
                if let Some(r) = self.done.get(&target) {
                    self.nodes.insert(x, r.clone());
                    self.done.insert(n, r);
                } else {
                    *pending += 1;
                    stack.push(Frame::Finish {
                        node: n,
                        key: x,
                        target: target.clone(),
                    });
                    stack.push(Frame::Start(target));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "pattern_tests.rs"]
mod tests;
