//! The text and graph views of kernels (tinygrad 0.9.1 `engine/graph.py`'s `print_tree`,
//! `graph_uops` and `save_graph`): a kernel AST or a UOp DAG as a numbered tree, a kernel's UOps
//! as a DOT graph (`GRAPHUOPS=1`), and [`DotGraph`], the small DOT writer the lazy-graph view
//! (`engine::graph`, `GRAPH=1`) uses too.
//!
//! Not guaranteed: the DOT text is ours (tinygrad writes it through networkx/pydot); node ids,
//! labels, colors and styles follow 0.9.1 so the pictures read the same, but the byte layout of
//! the file differs. SVG needs Graphviz's `dot` on `PATH`; without it only the `.dot` is written.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::codegen::uops::{UOp, UOps};
use crate::helpers::getenv;
use crate::ops::{LazyOp, LazyOpArg};
use crate::{Error, Result};

/// tinygrad's `GRAPHPATH` (default `/tmp/net`): the path prefix of the graph files.
pub fn graph_path() -> PathBuf {
    PathBuf::from(crate::helpers::getenv_str("GRAPHPATH").unwrap_or_else(|| "/tmp/net".into()))
}

/// A node of a tree [`print_tree`] can walk: an AST node or a UOp.
pub trait TreeNode: Sized {
    /// The node's op and arg, as the tree line shows them (`BinaryOps.ADD None`).
    fn head(&self) -> String;
    fn children(&self) -> &[Self];
    /// The node's identity (shared subtrees are one node).
    fn identity(&self) -> usize;
}

impl TreeNode for LazyOp {
    fn head(&self) -> String {
        format!("{} {}", self.op().name(), lazyop_arg_text(self.arg()))
    }
    fn children(&self) -> &[LazyOp] {
        self.src()
    }
    fn identity(&self) -> usize {
        self.node_id()
    }
}

impl TreeNode for UOp {
    fn head(&self) -> String {
        format!("UOps.{} {}", self.op().name(), self.arg())
    }
    fn children(&self) -> &[UOp] {
        self.src()
    }
    fn identity(&self) -> usize {
        self.node_id()
    }
}

/// A LazyOp's arg as Python prints it (`None`, `MemBuffer(...)`, `dtypes.float`, `(1,)`).
fn lazyop_arg_text(arg: &LazyOpArg) -> String {
    match arg {
        LazyOpArg::None => "None".into(),
        LazyOpArg::Mem(m) => format!("MemBuffer(idx={}, dtype={}, st={:?})", m.idx, m.dtype, m.st),
        LazyOpArg::Const(c) => format!(
            "ConstBuffer(val={}, dtype={}, st={:?})",
            c.val, c.dtype, c.st
        ),
        LazyOpArg::DType(d) => d.to_string(),
        LazyOpArg::Axis(a) => match a.len() {
            1 => format!("({},)", a[0]),
            _ => format!(
                "({})",
                a.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        LazyOpArg::Nbytes(n) => n.to_string(),
        LazyOpArg::Custom(c) => format!("{c:?}"),
    }
}

/// The walk of 0.9.1's `_tree`: a node seen more than `TREE_CYCLE_CNT` (default 5) times is
/// printed as `goto` its first line instead of again (a negative count never shortens).
struct TreeWalk {
    seen: HashMap<usize, (i64, i64)>,
    count: i64,
    cycle_cnt: i64,
}

impl TreeWalk {
    fn tree<T: TreeNode>(&mut self, node: &T) -> Vec<String> {
        self.count += 1;
        let src = node.children();
        if src.is_empty() {
            return vec![format!("━━ {}", node.head())];
        }
        let id = node.identity();
        if let Some(&(line, times)) = self.seen.get(&id) {
            if times > self.cycle_cnt && self.cycle_cnt >= 0 {
                let op = node.head();
                let op = op.split(' ').next().unwrap_or_default();
                return vec![format!("━⬆︎ goto {line}: {op}")];
            }
        }
        let entry = match self.seen.get(&id) {
            Some(&(_, times)) => (self.count, times + 1),
            None => (self.count, 1),
        };
        self.seen.insert(id, entry);
        let mut lines = vec![format!("━┳ {}", node.head())];
        let childs: Vec<Vec<String>> = src.iter().map(|c| self.tree(c)).collect();
        let Some((last, rest)) = childs.split_last() else {
            return lines;
        };
        for c in rest {
            lines.push(format!(" ┣{}", c[0]));
            lines.extend(c[1..].iter().map(|l| format!(" ┃{l}")));
        }
        lines.push(format!(" ┗{}", last[0]));
        lines.extend(last[1..].iter().map(|l| format!("  {l}")));
        lines
    }
}

/// tinygrad's `print_tree` as text: one numbered line per node (`  0 ━┳ BufferOps.STORE ...`).
pub fn tree_text<T: TreeNode>(dag: &T) -> String {
    let mut walk = TreeWalk {
        seen: HashMap::new(),
        count: -1,
        cycle_cnt: getenv("TREE_CYCLE_CNT", 5),
    };
    let lines = walk.tree(dag);
    let mut out = String::new();
    for (i, s) in lines.iter().enumerate() {
        let _ = writeln!(out, "{i:>3} {s}");
    }
    out
}

/// tinygrad's `print_tree`: the tree of an AST node or UOp on stdout.
pub fn print_tree<T: TreeNode>(dag: &T) {
    print!("{}", tree_text(dag));
}

/// A directed graph written as Graphviz DOT. Attributes are written as given (quote values that
/// need it, as 0.9.1's labels do).
#[derive(Default)]
pub struct DotGraph {
    nodes: Vec<(usize, Vec<(String, String)>)>,
    index: HashMap<usize, usize>,
    edges: Vec<(usize, usize, String)>,
    graph_attrs: Vec<String>,
}

impl DotGraph {
    pub fn new() -> DotGraph {
        DotGraph::default()
    }
    /// Add node `id` or replace its attributes.
    pub fn add_node(&mut self, id: usize, attrs: &[(&str, String)]) {
        let attrs: Vec<(String, String)> = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        match self.index.get(&id) {
            Some(&i) => self.nodes[i].1 = attrs,
            None => {
                self.index.insert(id, self.nodes.len());
                self.nodes.push((id, attrs));
            }
        }
    }
    pub fn has_node(&self, id: usize) -> bool {
        self.index.contains_key(&id)
    }
    /// An attribute of node `id`.
    pub fn attr(&self, id: usize, key: &str) -> Option<&str> {
        let i = *self.index.get(&id)?;
        self.nodes[i]
            .1
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// Set one attribute of an existing node (nothing when there is no such node).
    pub fn set_attr(&mut self, id: usize, key: &str, value: String) {
        let Some(&i) = self.index.get(&id) else {
            return;
        };
        let attrs = &mut self.nodes[i].1;
        match attrs.iter_mut().find(|(k, _)| k == key) {
            Some(a) => a.1 = value,
            None => attrs.push((key.to_string(), value)),
        }
    }
    /// An edge (a repeated edge is kept once, as networkx's DiGraph keeps it).
    pub fn add_edge(&mut self, from: usize, to: usize, color: &str) {
        if let Some(e) = self.edges.iter_mut().find(|e| e.0 == from && e.1 == to) {
            e.2 = color.to_string();
            return;
        }
        self.edges.push((from, to, color.to_string()));
    }
    /// A graph-wide attribute such as `rankdir=LR`.
    pub fn graph_attr(&mut self, attr: &str) {
        self.graph_attrs.push(attr.to_string());
    }
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
    /// The DOT text.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("strict digraph {\n");
        for a in &self.graph_attrs {
            let _ = writeln!(s, "{a};");
        }
        for (id, attrs) in &self.nodes {
            let body: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(s, "{id} [{}];", body.join(", "));
        }
        for (a, b, color) in &self.edges {
            let _ = writeln!(s, "{a} -> {b} [color=\"{color}\"];");
        }
        s.push_str("}\n");
        s
    }
}

/// A DOT label value: quoted, with `"` removed and newlines as `\n` (0.9.1 builds its labels by
/// the same rules).
pub fn dot_label(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "").replace('\n', "\\n"))
}

/// tinygrad's `save_graph`: write `{path}.dot`, and `{path}.svg` through Graphviz `dot` when it
/// is on `PATH`. Returns the files written.
pub fn save_graph(g: &DotGraph, path: &Path) -> Result<Vec<PathBuf>> {
    let dot_path = PathBuf::from(format!("{}.dot", path.display()));
    std::fs::write(&dot_path, g.to_dot())
        .map_err(|e| Error::Io(format!("save_graph: writing {}: {e}", dot_path.display())))?;
    let mut written = vec![dot_path.clone()];
    if let Some(dot) = crate::driver::process::which("dot") {
        let svg = PathBuf::from(format!("{}.svg", path.display()));
        let status = std::process::Command::new(dot)
            .arg("-Tsvg")
            .arg(&dot_path)
            .arg("-o")
            .arg(&svg)
            .status()
            .map_err(|e| Error::Io(format!("save_graph: running dot: {e}")))?;
        if !status.success() {
            return Err(Error::Io(format!(
                "save_graph: dot -Tsvg {} failed ({status})",
                dot_path.display()
            )));
        }
        written.push(svg);
    }
    Ok(written)
}

/// The fill colors of 0.9.1's `graph_uops`.
fn uop_color(op: UOps) -> &'static str {
    match op {
        UOps::ALU => "#ffffc0",
        UOps::LOAD => "#ffc0c0",
        UOps::STORE => "#c0ffc0",
        UOps::SPECIAL => "#c0c0ff",
        UOps::CONST => "#e0e0e0",
        UOps::DEFINE_GLOBAL => "#ffe0b0",
        UOps::DEFINE_LOCAL => "#ffe0d0",
        UOps::DEFINE_ACC => "#f0ffe0",
        UOps::RANGE => "#c8a0e0",
        UOps::PHI => "#e0ffc0",
        UOps::BARRIER => "#ff8080",
        UOps::IF => "#c8b0c0",
        _ => "#ffffff",
    }
}

/// tinygrad's `graph_uops` as a graph: one node per UOp (ENDRANGE and ENDIF left out) labelled
/// with its op, arg and dtype, an edge from each source. Node ids are positions in `uops`.
pub fn uops_graph(uops: &[UOp]) -> Result<DotGraph> {
    let pos: HashMap<usize, usize> = uops
        .iter()
        .enumerate()
        .map(|(i, u)| (u.node_id(), i))
        .collect();
    let mut g = DotGraph::new();
    g.graph_attr("rankdir=LR");
    for (i, u) in uops.iter().enumerate() {
        if matches!(u.op(), UOps::ENDRANGE | UOps::ENDIF) {
            continue;
        }
        let arg = match u.arg() {
            crate::codegen::uops::UArg::None => String::new(),
            a => format!(" {}", a.to_string().replace(':', "")),
        };
        let dtype = u.dtype().map_or("None".to_string(), |d| d.to_string());
        let label = dot_label(&format!("{}{arg}\n{dtype}", u.op().name()));
        g.add_node(
            i,
            &[
                ("label", label),
                ("style", "filled".into()),
                ("fillcolor", format!("\"{}\"", uop_color(u.op()))),
            ],
        );
        for s in u.src() {
            let j = pos.get(&s.node_id()).ok_or_else(|| {
                Error::Internal(format!(
                    "graph_uops: a source of uop {i} is not in the list"
                ))
            })?;
            g.add_edge(*j, i, "#000000");
        }
    }
    Ok(g)
}

/// tinygrad's `graph_uops`: write the kernel's UOp graph to `{GRAPHPATH}.uops.dot` (and `.svg`).
pub fn graph_uops(uops: &[UOp]) -> Result<Vec<PathBuf>> {
    let g = uops_graph(uops)?;
    let mut path = graph_path().into_os_string();
    path.push(".uops");
    save_graph(&g, Path::new(&path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;
    use crate::ops::BinaryOps;

    /// The DAG e = (d*d), d = (b*b), b = (a*a), a = (c+c): `a` is reached eight times.
    fn shared_dag() -> UOp {
        let c = UOp::cnst(dtypes::float32, 1.0f32);
        let a = UOp::alu(BinaryOps::ADD, dtypes::float32, vec![c.clone(), c]);
        let b = UOp::alu(BinaryOps::MUL, dtypes::float32, vec![a.clone(), a]);
        let d = UOp::alu(BinaryOps::MUL, dtypes::float32, vec![b.clone(), b]);
        UOp::alu(BinaryOps::MUL, dtypes::float32, vec![d.clone(), d])
    }

    #[test]
    fn print_tree_is_0_9_1s_text_with_its_goto_rule() {
        // Expected: 0.9.1's `_tree` (engine/graph.py) run on the same DAG, TREE_CYCLE_CNT=5: the
        // seventh and eighth arrival at `a` print a goto to the line of its sixth.
        let text = tree_text(&shared_dag());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 27, "{text}");
        assert_eq!(lines[0], "  0 ━┳ UOps.ALU BinaryOps.MUL");
        assert_eq!(lines[1], "  1  ┣━┳ UOps.ALU BinaryOps.MUL");
        assert_eq!(lines[3], "  3  ┃ ┃ ┣━┳ UOps.ALU BinaryOps.ADD");
        assert_eq!(lines[4], "  4  ┃ ┃ ┃ ┣━━ UOps.CONST 1.0");
        assert_eq!(lines[7], "  7  ┃ ┃   ┣━━ UOps.CONST 1.0");
        assert_eq!(lines[16], " 16  ┗━┳ UOps.ALU BinaryOps.MUL");
        assert_eq!(lines[23], " 23    ┃   ┗━━ UOps.CONST 1.0");
        assert_eq!(lines[24], " 24    ┗━┳ UOps.ALU BinaryOps.MUL");
        assert_eq!(lines[25], " 25      ┣━⬆︎ goto 21: UOps.ALU");
        assert_eq!(lines[26], " 26      ┗━⬆︎ goto 21: UOps.ALU");
        // A negative TREE_CYCLE_CNT never shortens: 1 + 2 + 4 + 8 inner nodes, 16 leaves.
        let _g = crate::helpers::Context::new(&[("TREE_CYCLE_CNT", -1)]);
        assert_eq!(tree_text(&shared_dag()).lines().count(), 31);
    }

    #[test]
    fn print_tree_of_a_kernel_ast() {
        use crate::shape::shapetracker::ShapeTracker;
        let st = ShapeTracker::from_shape(&crate::shape::symbolic::sints(&[4])).unwrap();
        let a = LazyOp::load(1, dtypes::float32, st.clone());
        let b = LazyOp::load(2, dtypes::float32, st.clone());
        let add = LazyOp::new(BinaryOps::ADD, vec![a, b], LazyOpArg::None);
        let store = LazyOp::store(add, 0, dtypes::float32, st);
        let text = tree_text(&store);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("  0 ━┳ BufferOps.STORE MemBuffer(idx=0, dtype=dtypes.float"));
        assert_eq!(lines[1], "  1  ┗━┳ BinaryOps.ADD None");
        assert!(lines[2].starts_with("  2    ┣━━ BufferOps.LOAD MemBuffer(idx=1, "));
        assert!(lines[3].starts_with("  3    ┗━━ BufferOps.LOAD MemBuffer(idx=2, "));
    }

    #[test]
    fn uop_graph_has_a_node_per_uop_and_an_edge_per_distinct_source() {
        let g0 = UOp::define_global(dtypes::float32, 0, true);
        let g1 = UOp::define_global(dtypes::float32, 1, false);
        let r = UOp::range_const(0, 4, 0, 0, false);
        let ld = UOp::load(&g1, &r, dtypes::float32);
        let add = UOp::alu(
            BinaryOps::ADD,
            dtypes::float32,
            vec![ld.clone(), ld.clone()],
        );
        let st = UOp::store(&g0, &r, &add);
        let end = UOp::endrange(&r);
        let (c0, c4) = (r.src()[0].clone(), r.src()[1].clone());
        let uops = vec![g0, g1, c0, c4, r, ld, add, st, end];
        let g = uops_graph(&uops).unwrap();
        // ENDRANGE is left out.
        assert_eq!(g.node_count(), 8);
        // r <- 0, 4; ld <- g1, r; add <- ld (twice, one edge); st <- g0, r, add.
        assert_eq!(g.edge_count(), 8);
        let dot = g.to_dot();
        assert!(dot.starts_with("strict digraph {\nrankdir=LR;\n"), "{dot}");
        assert!(dot.contains("6 [label=\"ALU BinaryOps.ADD\\ndtypes.float\", style=filled, fillcolor=\"#ffffc0\"];"), "{dot}");
        assert!(dot.contains("5 -> 6 [color=\"#000000\"];"), "{dot}");
        assert!(!dot.contains("ENDRANGE"), "{dot}");
    }

    #[test]
    fn uop_graph_refuses_a_source_outside_the_list() {
        let c = UOp::cnst(dtypes::float32, 2.0f32);
        let add = UOp::alu(BinaryOps::ADD, dtypes::float32, vec![c.clone(), c]);
        let err = uops_graph(&[add]).err().unwrap().to_string();
        assert!(
            err.contains("a source of uop 0 is not in the list"),
            "{err}"
        );
    }

    #[test]
    fn save_graph_writes_the_dot_text() {
        let dir = std::env::temp_dir().join(format!("rawgrad_graph_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut g = DotGraph::new();
        g.add_node(0, &[("label", dot_label("a\n\"b\""))]);
        g.add_node(1, &[("label", dot_label("c"))]);
        g.add_edge(0, 1, "#a0a0a0");
        g.add_edge(0, 1, "#a0a0a0");
        let files = save_graph(&g, &dir.join("net")).unwrap();
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert_eq!(
            text,
            "strict digraph {\n0 [label=\"a\\nb\"];\n1 [label=\"c\"];\n0 -> 1 [color=\"#a0a0a0\"];\n}\n"
        );
        let bad = save_graph(&g, &dir.join("no_such_dir").join("net"))
            .err()
            .unwrap();
        assert!(bad.to_string().contains("save_graph: writing"), "{bad}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
