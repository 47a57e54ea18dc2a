//! Optimized kernels equal unoptimized ones: explicit opt lists in the style of tinygrad's
//! `TestKernelOpts`, and random legal opt sequences over the catalogue (UPCAST, UNROLL, LOCAL,
//! GROUP, GROUPTOP, PADTO on the INTERP-like renderer; UPCAST, UNROLL, PADTO on CLANG), all checked
//! against the reference evaluator.

mod linearizer_support;

use linearizer_support::catalogue;
use linearizer_support::*;
use rawgrad::codegen::kernel::{Kernel, Opt, OptOps};
use rawgrad::codegen::uops::UOps;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::runtime::cpu::clang::ClangCompiler;
use rawgrad::Error;

use OptOps::*;

fn o(op: OptOps, axis: usize, amt: usize) -> Opt {
    Opt::new(op, axis, amt)
}

/// Apply `opts` (all must be legal), linearize, run, compare with the reference.
fn check_opts(case: &Case, r: &dyn Renderer, cc: Option<&ClangCompiler>, opts: &[Opt]) {
    let want = case.reference();
    let (_, p) = program(case, r, opts)
        .unwrap_or_else(|e| panic!("{} {opts:?} on {}: {e}", case.name, r.opts().device));
    let got = if r.opts().device == "INTERP" {
        run_interp(case, &p)
    } else {
        match cc {
            Some(cc) => run_clang(cc, case, &p),
            None => return,
        }
    }
    .unwrap_or_else(|e| panic!("{} {opts:?}: run: {e}\n{}", case.name, p.src));
    let what = format!("{} {opts:?}", r.opts().device);
    assert_outputs(case, &want, &got, rtol_for(case).max(1e-5), &what);
}

#[test]
fn grouped_and_local_reduce() {
    // test_local_and_grouped_reduce, on a (4, 4, 128) sum
    let ir = InterpRenderer::new();
    let case = catalogue::reduce_epilogue();
    let lists: Vec<Vec<Opt>> = vec![
        vec![o(LOCAL, 0, 2)],
        vec![o(LOCAL, 0, 3)],
        vec![o(GROUPTOP, 0, 2)],
        vec![o(GROUPTOP, 0, 5)],
        vec![o(GROUP, 0, 10)],
        vec![o(LOCAL, 0, 2), o(GROUPTOP, 0, 2)],
        vec![o(LOCAL, 0, 3), o(GROUP, 0, 5)],
        vec![
            o(LOCAL, 0, 2),
            o(GROUPTOP, 0, 2),
            o(UPCAST, 0, 3),
            o(UNROLL, 1, 5),
        ],
        vec![o(GROUP, 0, 2), o(UNROLL, 0, 0)],
    ];
    for l in &lists {
        check_opts(&case, &ir, None, l);
    }
    let case = catalogue::matmul();
    for l in [
        vec![o(LOCAL, 0, 2), o(GROUP, 0, 2)],
        vec![o(LOCAL, 0, 2), o(UNROLL, 0, 0)],
        vec![o(UNROLL, 0, 0), o(LOCAL, 0, 2)],
        vec![o(LOCAL, 0, 2), o(GROUP, 0, 0), o(UNROLL, 0, 2)],
        vec![o(GROUP, 0, 0), o(LOCAL, 0, 2), o(UNROLL, 0, 0)],
        vec![
            o(LOCAL, 0, 4),
            o(LOCAL, 1, 4),
            o(UPCAST, 0, 2),
            o(UNROLL, 0, 4),
        ],
        vec![Opt::nolocals(), o(UPCAST, 0, 2)],
    ] {
        check_opts(&case, &ir, None, &l);
    }
}

#[test]
fn upcasts_and_unrolls_on_both() {
    let ir = InterpRenderer::new();
    let cr = ClangRenderer::new();
    let cc = clang();
    let cases = [
        (
            catalogue::elementwise_add(),
            vec![
                vec![o(UPCAST, 0, 2)],
                vec![o(UPCAST, 0, 4)],
                vec![o(UPCAST, 0, 8)],
            ],
        ),
        (
            catalogue::sum_inner(),
            vec![
                vec![o(UNROLL, 0, 4)],
                vec![o(UNROLL, 0, 0)],
                vec![o(UPCAST, 0, 4), o(UNROLL, 0, 2)],
            ],
        ),
        (
            catalogue::matmul(),
            vec![
                vec![o(UPCAST, 0, 4), o(UPCAST, 1, 4), o(UNROLL, 0, 4)],
                vec![o(UNROLL, 0, 0), o(UPCAST, 0, 2)],
            ],
        ),
        (
            catalogue::padded(),
            vec![
                vec![o(UPCAST, 0, 7)],
                vec![o(UPCAST, 1, 8), o(UPCAST, 0, 7)],
            ],
        ),
        (
            catalogue::multi_reduce(),
            vec![vec![o(UNROLL, 0, 4), o(UPCAST, 0, 2)]],
        ),
    ];
    for (case, lists) in &cases {
        for l in lists {
            check_opts(case, &ir, None, l);
            check_opts(case, &cr, cc.as_ref(), l);
        }
    }
}

#[test]
fn padto_is_exact() {
    // test_padto_sum_ok / test_padto_max style: pad a reduce dim of a SUM, an output dim of a MAX
    let ir = InterpRenderer::new();
    let cr = ClangRenderer::new();
    let cc = clang();
    let lists: Vec<(Case, Vec<Opt>)> = vec![
        (catalogue::sum_inner(), vec![o(PADTO, 0, 16)]),
        (catalogue::sum_inner(), vec![o(PADTO, 1, 32)]),
        (
            catalogue::sum_outer(),
            vec![o(PADTO, 0, 12), o(UPCAST, 0, 4)],
        ),
        (catalogue::max_multi_axis(), vec![o(PADTO, 0, 8)]),
        (
            catalogue::matmul(),
            vec![
                o(PADTO, 0, 16),
                o(PADTO, 1, 16),
                o(UPCAST, 0, 2),
                o(UPCAST, 1, 2),
            ],
        ),
        (catalogue::elementwise_add(), vec![o(PADTO, 0, 40)]),
        (catalogue::padded_sum(), vec![o(PADTO, 1, 16)]),
    ];
    for (case, l) in &lists {
        check_opts(case, &ir, None, l);
        check_opts(case, &cr, cc.as_ref(), l);
    }
}

#[test]
fn float4_loads_and_stores_are_vectors() {
    let ir = InterpRenderer::new();
    let case = catalogue::elementwise_add();
    let (_, p) = program(&case, &ir, &[o(UPCAST, 0, 4)]).unwrap();
    let vec_loads = p
        .uops
        .iter()
        .filter(|u| u.op() == UOps::LOAD && u.dtype().is_some_and(|d| d.count == 4))
        .count();
    assert_eq!(vec_loads, 2, "two float4 loads");
    let vec_store = p
        .uops
        .iter()
        .any(|u| u.op() == UOps::STORE && u.src()[2].dtype().is_some_and(|d| d.count == 4));
    assert!(vec_store, "a float4 store");
    check_opts(&case, &ir, None, &[o(UPCAST, 0, 4)]);
    // CLANG groups them too (rawgrad's C renderer has vector types; 0.9.1's CLANG does not)
    let cr = ClangRenderer::new();
    let (_, p) = program(&case, &cr, &[o(UPCAST, 0, 4)]).unwrap();
    assert!(p.src.contains("*((float4*)(data1+"), "{}", p.src);
    assert!(p.src.contains("*((float4*)(data0+"), "{}", p.src);
    check_opts(&case, &cr, clang().as_ref(), &[o(UPCAST, 0, 4)]);
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Up to `want` legal opts drawn at random; illegal draws must fail with a KernelOpt error and
/// leave the kernel as it was.
fn random_opts(
    case: &Case,
    r: &dyn Renderer,
    ops: &[OptOps],
    rng: &mut Rng,
    want: usize,
) -> Vec<Opt> {
    let mut k = Kernel::new(&case.ast, r.opts()).unwrap();
    let mut applied = vec![];
    for _ in 0..6 * want {
        if applied.len() == want {
            break;
        }
        let opt = o(
            rng.pick(ops),
            rng.pick(&[0, 0, 1, 1, 2, 3]),
            rng.pick(&[0, 2, 3, 4, 5, 8, 16, 32]),
        );
        let before = (k.sts.clone(), k.upcasted, k.local_dims, k.group_for_reduces);
        match k.apply_opt(opt) {
            Ok(()) => applied.push(opt),
            Err(Error::KernelOpt(_)) => {
                assert_eq!(
                    before,
                    (k.sts.clone(), k.upcasted, k.local_dims, k.group_for_reduces),
                    "{opt} changed the kernel"
                );
            }
            Err(e) => panic!("{}: {opt} after {applied:?}: {e}", case.name),
        }
    }
    applied
}

#[test]
fn random_opts_interp() {
    let ir = InterpRenderer::new();
    let ops = [UPCAST, UNROLL, LOCAL, GROUP, GROUPTOP, PADTO, UPCAST, LOCAL];
    let mut rng = Rng(0x9E3779B97F4A7C15);
    for case in catalogue::all() {
        for _ in 0..6 {
            let opts = random_opts(&case, &ir, &ops, &mut rng, 3);
            check_opts(&case, &ir, None, &opts);
        }
    }
}

#[test]
fn random_opts_clang() {
    let Some(cc) = clang() else { return };
    let cr = ClangRenderer::new();
    let ops = [UPCAST, UNROLL, PADTO, UPCAST];
    let mut rng = Rng(0xD1B54A32D192ED03);
    for case in catalogue::all() {
        for _ in 0..2 {
            let opts = random_opts(&case, &cr, &ops, &mut rng, 3);
            check_opts(&case, &cr, Some(&cc), &opts);
        }
    }
}
