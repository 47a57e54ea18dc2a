//! The staging of a CPU tile's right-hand-side strip (`codegen/uopgraph/stage.rs`, beyond
//! tinygrad 0.9.1) in the linear UOps of tiled matmuls. That the staged kernels give the unstaged
//! kernels' bits is `tests/kernel_opts_diff.rs`'s `cpu_tile_equals_unoptimized_on_interp_clang_and_llvm`.

use super::*;
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::helpers::Context;

/// The global buffer index a LOAD or STORE goes through (None: a local buffer).
fn global_of(u: &UOp) -> Option<usize> {
    match u.src()[0].arg() {
        UArg::Global { idx, .. } => Some(*idx),
        _ => None,
    }
}

/// The linear UOps of `ast` under this host's CPU tile with `opts`.
fn tiled_uops(ast: &[LazyOp], opts: &RendererOpts) -> Vec<UOp> {
    let mut kk = k(ast, opts);
    assert!(kk.apply_cpu_tile().unwrap());
    kk.linearize().unwrap().uops.clone()
}

/// The staging buffer's size, when the list has one.
fn stage_size(uops: &[UOp]) -> Option<usize> {
    let locals: Vec<usize> = (uops.iter())
        .filter_map(|u| match (u.op(), u.arg()) {
            (UOps::DEFINE_LOCAL, UArg::Local { name, size }) if name == "stage" => Some(*size),
            _ => None,
        })
        .collect();
    assert!(locals.len() <= 1, "{locals:?}");
    locals.first().copied()
}

/// A 1024^3 float32 matmul on CLANG and LLVM: the strip of 1024 rows of the tile's columns is
/// copied into `stage` by a loop placed before the row-tile loop, and the reduce loop reads the
/// right-hand side (buffer 2) only from there; the left-hand side (buffer 1, which depends on
/// the row tile) is read in place.
#[test]
fn a_matmul_tile_reads_its_strip_from_the_stage() {
    use super::super::cpu_tile::host_tile;
    let cols = host_tile().cols();
    for opts in [
        clang(),
        crate::renderer::llvmir::LLVMRenderer::cpu(true)
            .opts()
            .clone(),
    ] {
        let uops = tiled_uops(&matmul(1024), &opts);
        assert_eq!(stage_size(&uops), Some(cols * 1024), "{}", opts.device);
        let pos = |f: &dyn Fn(&UOp) -> bool| uops.iter().position(f).unwrap();
        let is_range = |u: &UOp, red: bool| u.range_arg().is_some_and(|a| a.2 == red);
        let red = pos(&|u| is_range(u, true));
        let red_end = pos(&|u| u.op() == UOps::ENDRANGE && u.src()[0] == uops[red]);
        // the copy loop: the last non-reduce RANGE closed before the reduce loop opens
        let copy_end = (0..red)
            .rev()
            .find(|&i| uops[i].op() == UOps::ENDRANGE)
            .unwrap();
        let copy = pos(&|u| u == &uops[copy_end].src()[0]);
        let body = &uops[copy..copy_end];
        let loads: Vec<_> = body.iter().filter(|u| u.op() == UOps::LOAD).collect();
        let stores: Vec<_> = body.iter().filter(|u| u.op() == UOps::STORE).collect();
        let t = host_tile();
        assert_eq!(loads.len(), t.vecs * t.unroll);
        assert!(loads.iter().all(|u| global_of(u) == Some(2)));
        assert_eq!(stores.len(), loads.len());
        assert!(stores.iter().all(|u| global_of(u).is_none()));
        // between the copy loop and the reduce loop: the row-tile loop opens
        assert!(uops[copy_end..red].iter().any(|u| is_range(u, false)));
        let in_reduce = &uops[red..red_end];
        let reads: Vec<Option<usize>> = (in_reduce.iter())
            .filter(|u| u.op() == UOps::LOAD)
            .map(global_of)
            .collect();
        assert_eq!(
            reads.iter().filter(|g| g.is_none()).count(),
            t.vecs * t.unroll
        );
        assert!(!reads.contains(&Some(2)), "{reads:?}");
        assert_eq!(
            reads.iter().filter(|g| **g == Some(1)).count(),
            t.rows * t.unroll
        );
    }
}

/// No stage: with `CPU_STAGE=0`, on INTERP's CPU opts (no vector ALUs: not a CPU renderer), and
/// where the strip would pass `STAGE_MAX_BYTES` (twice the reduce steps of the deepest strip that
/// fits, which is staged).
#[test]
fn no_stage_where_it_does_not_apply() {
    use crate::codegen::uopgraph::STAGE_MAX_BYTES;
    assert!(stage_size(&tiled_uops(&matmul(1024), &clang())).is_some());
    let off = Context::new(&[("CPU_STAGE", 0)]);
    assert_eq!(stage_size(&tiled_uops(&matmul(1024), &clang())), None);
    drop(off);
    let cpu_interp = RendererOpts {
        has_local: false,
        has_shared: false,
        ..interp()
    };
    assert_eq!(stage_size(&tiled_uops(&matmul(256), &cpu_interp)), None);
    let cols = super::super::cpu_tile::host_tile().cols();
    let deepest = i64::try_from(STAGE_MAX_BYTES / 4 / cols).unwrap();
    let long = tiled_uops(&matmul_mnk(64, 64, 2 * deepest), &clang());
    assert_eq!(stage_size(&long), None);
    let fits = tiled_uops(&matmul_mnk(64, 64, deepest), &clang());
    assert_eq!(stage_size(&fits), Some(STAGE_MAX_BYTES / 4));
}
