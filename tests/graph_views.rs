//! The graph views of tinygrad 0.9.1's `engine/graph.py`, end to end: `GRAPH=1` draws the lazy
//! graph as it is scheduled (scheduled outputs as boxes, bold with their kernel number),
//! `GRAPHUOPS=1` writes a kernel's UOp graph, and `DEBUG=3` prints each kernel AST as a tree.
//! One test function: the lazy graph is process-wide, and the knobs are thread-scoped.

use rawgrad::codegen::graph::graph_path;
use rawgrad::engine::graph::{lazy_graph_dot, reset_lazy_graph, save_lazy_graph};
use rawgrad::engine::realize::capture_debug_output;
use rawgrad::helpers::{Context, GlobalCounters};
use rawgrad::Tensor;

fn input(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice_on(data, shape, "CLANG")
        .unwrap()
        .realize()
        .unwrap()
}

/// The lines of `dot` that declare a node (not an edge).
fn nodes(dot: &str) -> Vec<&str> {
    dot.lines()
        .filter(|l| l.contains(" [label=") || l.contains(" [style="))
        .collect()
}

fn lazy_graph_of_an_add_and_a_sum() {
    reset_lazy_graph();
    let a = input(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = input(&[0.5, 0.5, 0.5, 0.5], &[2, 2]);
    GlobalCounters::reset();
    let out = {
        let _g = Context::new(&[("GRAPH", 1)]);
        let s = a.add(&b).unwrap().mul(2.0f32).unwrap().sum().unwrap();
        s.realize().unwrap()
    };
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![24.0]);
    let dot = lazy_graph_dot();
    let nodes = nodes(&dot);
    // The two realized inputs, the ADD, the MUL (its 2.0 folded into the label as CONST1) and
    // the SUM: the elementwise ops fuse into the reduce's kernel, so only the SUM is the
    // scheduled output: a box, bold, opaque, kernel 1.
    assert_eq!(nodes.len(), 5, "{dot}");
    let real: Vec<_> = nodes.iter().filter(|l| l.contains("real:True")).collect();
    assert_eq!(real.len(), 2, "{dot}");
    assert!(
        real.iter().all(|l| l.contains("fillcolor=\"#f0c08080\"")),
        "{dot}"
    );
    let add = nodes
        .iter()
        .find(|l| l.contains("BinaryOps.ADD"))
        .expect("ADD node");
    assert!(add.contains("fillcolor=\"#c0c0c080\""), "{add}");
    assert!(add.contains("style=\"filled,dashed\""), "{add}");
    let mul = nodes
        .iter()
        .find(|l| l.contains("BinaryOps.MUL"))
        .expect("MUL node");
    assert!(mul.contains("\\nCONST1 2.0"), "{mul}");
    let sum = nodes
        .iter()
        .find(|l| l.contains("ReduceOps.SUM"))
        .expect("SUM node");
    assert!(sum.contains("{(2, 2)}\\n(1, 1)"), "{sum}");
    assert!(sum.contains("\\nK:1\""), "{sum}");
    assert!(sum.contains("style=\"filled,bold\""), "{sum}");
    assert!(sum.contains("fillcolor=\"#FFA0A0\""), "{sum}");
    assert!(sum.contains("shape=box"), "{sum}");
    // Edges: each input -> ADD, ADD -> MUL, MUL -> SUM (the CONST is folded, not an edge).
    assert_eq!(dot.matches(" -> ").count(), 4, "{dot}");
    let dir = std::env::temp_dir().join(format!("rawgrad_graph_views_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = save_lazy_graph(&dir.join("net")).unwrap();
    assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), dot);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn a_view_is_a_green_node_with_its_strides() {
    reset_lazy_graph();
    let a = input(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    {
        let _g = Context::new(&[("GRAPH", 1)]);
        let t = a.permute(&[1, 0]).unwrap().add(1.0f32).unwrap();
        t.realize().unwrap();
    }
    let dot = lazy_graph_dot();
    let view = nodes(&dot)
        .into_iter()
        .find(|l| l.contains("#80ff8080"))
        .unwrap_or_else(|| panic!("no view node in\n{dot}"));
    assert!(view.contains("label=\"(3, 2)\\n(1, 3)\""), "{view}");
    // Without GRAPH nothing is drawn.
    reset_lazy_graph();
    a.add(2.0f32).unwrap().realize().unwrap();
    assert_eq!(lazy_graph_dot(), "strict digraph {\n}\n");
}

fn graphuops_writes_the_kernels_uop_graph() {
    let path = format!("{}.uops.dot", graph_path().display());
    let _ = std::fs::remove_file(&path);
    let a = input(&[1.0, 2.0, 3.0], &[3]);
    {
        let _g = Context::new(&[("GRAPHUOPS", 1)]);
        a.mul(3.0f32)
            .unwrap()
            .add(0.25f32)
            .unwrap()
            .realize()
            .unwrap();
    }
    let dot = std::fs::read_to_string(&path).unwrap();
    assert!(dot.starts_with("strict digraph {\nrankdir=LR;\n"), "{dot}");
    assert!(
        dot.contains("DEFINE_GLOBAL (0, True)\\nptr.dtypes.float"),
        "{dot}"
    );
    assert!(dot.contains("ALU BinaryOps.MUL"), "{dot}");
    assert!(dot.contains("fillcolor=\"#c0ffc0\""), "a STORE node\n{dot}");
}

fn debug3_prints_the_ast_as_a_tree() {
    let a = input(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let out = a.mul(5.0f32).unwrap().add(0.75f32).unwrap();
    let _g = Context::new(&[("DEBUG", 3)]);
    let (res, lines) = capture_debug_output(|| out.realize().map(|_| ()));
    res.unwrap();
    let all = lines.join("\n");
    assert!(
        all.contains("  0 ━┳ BufferOps.STORE MemBuffer(idx=0, dtype=dtypes.float"),
        "{all}"
    );
    assert!(all.contains("  1  ┗━┳ BinaryOps.ADD None"), "{all}");
}

#[test]
fn graph_views() {
    lazy_graph_of_an_add_and_a_sum();
    a_view_is_a_green_node_with_its_strides();
    graphuops_writes_the_kernels_uop_graph();
    debug3_prints_the_ast_as_a_tree();
}
