//! `GRAPH=1`: the lazy graph and its schedule as a picture (tinygrad 0.9.1 `engine/graph.py`'s
//! `log_lazybuffer` and `realized_lazybuffer`). The scheduler logs every lazy buffer it visits
//! (views dashed green, unrealized ops colored by op family, scheduled roots as boxes, realized
//! inputs orange) and marks each scheduled output bold with its kernel number (`K:n`); at process
//! exit the graph is written to `{GRAPHPATH}.dot` (default `/tmp/net.dot`) and, when Graphviz
//! `dot` is on `PATH`, `{GRAPHPATH}.svg`. [`save_lazy_graph`] writes it on demand.
//!
//! Not guaranteed: the graph is process-wide and only grows (as 0.9.1's); it is written at a
//! normal exit (`atexit`), not when the process is killed. Node numbers count lazy buffers in the
//! order the scheduler first sees them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::codegen::graph::{dot_label, graph_path, save_graph, DotGraph};
use crate::lazy::{LazyBuffer, LbArg};
use crate::ops::{LoadOps, Op, UnaryOps};
use crate::shape::symbolic::{render_shape, Node};
use crate::Result;

/// The lazy graph being drawn, and the node numbers given so far (0.9.1's `nm`).
#[derive(Default)]
struct LazyGraph {
    g: DotGraph,
    lazy_ids: HashMap<usize, usize>,
    buffer_ids: HashMap<usize, usize>,
    at_exit: bool,
}

static GRAPH: Mutex<Option<LazyGraph>> = Mutex::new(None);

/// Whether `GRAPH` asks for the lazy graph.
pub fn graph_enabled() -> bool {
    static GRAPH: crate::helpers::Knob = crate::helpers::Knob::new("GRAPH", 0);
    GRAPH.get() != 0
}

fn state() -> MutexGuard<'static, Option<LazyGraph>> {
    GRAPH.lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" fn save_at_exit() {
    if let Err(e) = save_lazy_graph(&graph_path()) {
        eprintln!("GRAPH: {e}");
    }
}

/// The graph, made on first use (registering the write at exit, as 0.9.1's `init_graph`).
fn with_graph<R>(f: impl FnOnce(&mut LazyGraph) -> R) -> R {
    let mut st = state();
    let lg = st.get_or_insert_with(LazyGraph::default);
    if !lg.at_exit {
        lg.at_exit = true;
        if let Err(e) = crate::driver::process::at_exit(save_at_exit) {
            eprintln!("GRAPH: the graph will not be written at exit: {e}");
        }
    }
    f(lg)
}

impl LazyGraph {
    fn nm(&mut self, lb: &LazyBuffer) -> usize {
        let next = self.lazy_ids.len();
        *self.lazy_ids.entry(lb.id()).or_insert(next)
    }
}

/// The fill colors of 0.9.1's `top_colors` (with the `80` alpha the unrealized nodes carry).
fn top_color(op: Op) -> &'static str {
    match op {
        Op::Load(_) => "#FFFFa080",
        Op::Reduce(_) => "#FFA0A080",
        Op::Buffer(_) => "#a0a0ff80",
        Op::Unary(_) | Op::Binary(_) | Op::Ternary(_) => "#c0c0c080",
    }
}

fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// 0.9.1's `log_lazybuffer`: add `lb` (and what it reads, recursively) to the graph.
pub fn log_lazybuffer(lb: &LazyBuffer, scheduled: bool) -> Result<()> {
    with_graph(|lg| log_into(lg, lb, scheduled))
}

fn log_into(lg: &mut LazyGraph, lb: &LazyBuffer, scheduled: bool) -> Result<()> {
    let base = lb.base();
    if base.realized().is_none() && base.op() == Op::Load(LoadOps::CONST) {
        return Ok(());
    }
    if !lb.is_base() {
        let zeros = vec![Node::Num(0); lb.shape().len()];
        let offset = lb.st().expr_idxs(Some(&zeros))?.0;
        let strides = lb.st().real_strides(false)?;
        let strides: Vec<String> = strides
            .iter()
            .map(|s| s.as_ref().map_or("None".into(), |x| format!("{x:?}")))
            .collect();
        let strides = match strides.len() {
            1 => format!("({},)", strides[0]),
            _ => format!("({})", strides.join(", ")),
        };
        let mut label = format!("{}\n{strides}", render_shape(lb.shape()));
        if offset != Node::Num(0) {
            label.push_str(&format!("\n{offset}"));
        }
        let id = lg.nm(lb);
        lg.g.add_node(id, &view_attrs(label));
        let bid = lg.nm(base);
        lg.g.add_edge(bid, id, "#00000060");
    }
    if base.realized().is_none() {
        log_unrealized(lg, base, scheduled)
    } else {
        let id = lg.nm(base);
        if !lg.g.has_node(id) {
            let buf = base.buffer();
            let next = lg.buffer_ids.len();
            let b = *lg.buffer_ids.entry(buf.id()).or_insert(next);
            let label = format!(
                "real:True\ndevice:{}\nsize:{}\ndtype:{}\noffset:{}\nb:{b}",
                buf.device(),
                buf.size(),
                buf.dtype(),
                buf.offset()
            );
            lg.g.add_node(
                id,
                &[
                    ("label", dot_label(&label)),
                    ("style", "filled".into()),
                    ("fillcolor", quoted("#f0c08080")),
                ],
            );
        }
        Ok(())
    }
}

fn view_attrs(label: String) -> [(&'static str, String); 4] {
    [
        ("style", quoted("filled,dashed")),
        ("fillcolor", quoted("#80ff8080")),
        ("color", "black".into()),
        ("label", dot_label(&label)),
    ]
}

/// The node of an unrealized base: its sources first, constants folded into the label.
fn log_unrealized(lg: &mut LazyGraph, lb: &LazyBuffer, scheduled: bool) -> Result<()> {
    let srcs = lb
        .srcs()
        .unwrap_or_else(|| std::sync::Arc::from(Vec::new()));
    let mut label_append = String::new();
    let id = lg.nm(lb);
    for (idx, x) in srcs.iter().enumerate() {
        let xid = lg.nm(x);
        if !lg.g.has_node(xid) {
            log_into(lg, x, false)?;
        }
        let xb = x.base();
        if xb.realized().is_none() && xb.op() == Op::Load(LoadOps::CONST) {
            let val = match xb.arg() {
                LbArg::Const(c) => c.to_string(),
                other => format!("{other:?}"),
            };
            label_append.push_str(&format!("\nCONST{idx} {val}"));
        } else {
            lg.g.add_edge(xid, id, "#a0a0a0");
        }
    }
    let mut label = match lb.op() {
        Op::Reduce(_) => {
            let mut shapes: Vec<String> = srcs.iter().map(|x| render_shape(x.shape())).collect();
            shapes.dedup();
            format!("{{{}}}\n{}", shapes.join(", "), render_shape(lb.shape()))
        }
        _ => render_shape(lb.shape()),
    };
    if lb.dtype().name() != "float" {
        label.push_str(&format!("\n{}", lb.dtype().name()));
    }
    label.push_str(&format!("\n{}", lb.op().name()));
    match (lb.op(), lb.arg()) {
        (Op::Load(LoadOps::CONST), LbArg::Const(c)) => label.push_str(&format!("\n{c}")),
        (Op::Unary(UnaryOps::CAST), LbArg::DType(d)) => label.push_str(&format!("\n{d}")),
        _ => {}
    }
    if crate::runtime::builtin::default_device().ok().as_deref() != Some(lb.device()) {
        label.push_str(&format!("\n{}", lb.device()));
    }
    label.push_str(&label_append);
    let mut attrs = vec![
        ("style", quoted("filled,dashed")),
        ("fillcolor", quoted(top_color(lb.op()))),
        ("color", "black".into()),
        ("label", dot_label(&label)),
    ];
    if scheduled {
        attrs.push(("shape", "box".into()));
    }
    lg.g.add_node(id, &attrs);
    Ok(())
}

/// 0.9.1's `realized_lazybuffer`: mark a scheduled output bold, opaque, with its kernel number.
pub fn realized_lazybuffer(lb: &LazyBuffer, num: i64) {
    with_graph(|lg| {
        let id = lg.nm(lb);
        let (Some(fill), Some(label)) = (lg.g.attr(id, "fillcolor"), lg.g.attr(id, "label")) else {
            return;
        };
        // "#rrggbbaa" -> "#rrggbb": drop the alpha inside the quotes.
        let fill = fill.trim_matches('"');
        let fill = quoted(fill.get(..fill.len().saturating_sub(2)).unwrap_or(fill));
        let label = format!("{}\\nK:{num}\"", label.trim_end_matches('"'));
        lg.g.set_attr(id, "style", quoted("filled,bold"));
        lg.g.set_attr(id, "fillcolor", fill);
        lg.g.set_attr(id, "label", label);
    });
}

/// The lazy graph's DOT text so far (empty graph when nothing was logged).
pub fn lazy_graph_dot() -> String {
    match state().as_ref() {
        Some(lg) => lg.g.to_dot(),
        None => DotGraph::new().to_dot(),
    }
}

/// Write the lazy graph to `{path}.dot` (and `.svg` with Graphviz); the files written.
pub fn save_lazy_graph(path: &Path) -> Result<Vec<PathBuf>> {
    match state().as_ref() {
        Some(lg) => save_graph(&lg.g, path),
        None => save_graph(&DotGraph::new(), path),
    }
}

/// Forget the graph drawn so far (tests; the exit hook stays registered).
pub fn reset_lazy_graph() {
    if let Some(lg) = state().as_mut() {
        lg.g = DotGraph::new();
        lg.lazy_ids.clear();
        lg.buffer_ids.clear();
    }
}
