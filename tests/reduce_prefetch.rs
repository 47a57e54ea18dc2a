//! Software prefetch and transposed row accumulators of CPU reduce loops
//! (`renderer/llvmir/prefetch.rs`, `renderer/cstyle/row_transpose.rs`, beyond tinygrad 0.9.1):
//! the LLVM CPU kernel of a row sum, a row max, layernorm's and softmax's reductions prefetch
//! every row stream (one `llvm.prefetch` per load of the reduce loop, typed and opaque pointers
//! alike); a matmul, a column sum and an elementwise kernel get none. The CLANG kernel of a row
//! sum over 8 rows at once keeps the 8 accumulators in one `float8` fed by a shuffle transpose of
//! the rows' float4 loads, or of float4 values computed from them (a variance's squares), and
//! prefetches rows of 4 KiB or more; a row max, softmax's sum of scalar exponentials, a column
//! sum and a matmul keep their scalar code. The LLVM kernels of row sums and layernorm's mean and
//! variance carry the same 8 accumulators as one `<8 x float>` phi fed by the same transpose
//! (`llvmir/rows.rs`); `CPU_ROWS=0` keeps the scalar chains on both. Neither changes a bit: row sums (one kernel shape per
//! row count and length, lengths whose prefetches reach past the buffer's end included),
//! layernorm and softmax over rows holding NaN, infinities, signed zeros and denormals give
//! INTERP's bits on CLANG and LLVM, and the row sums equal a host sum that adds each row's values
//! in order.

mod tensor_common;

use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::renderer::Renderer;
use rawgrad::Tensor;
use tensor_common::{asts, cpu_devices, on, rendered};

/// (rows, row length): 8 rows at once with a loop of float4 loads (16x1028, 24x256, 8x4100),
/// 4 rows (12x40), rows by neither (7x36) and a length that does not divide by 4 (9x1030). No
/// length of more than 256 divides by 16: INTERP has locals, and 0.9.1's heuristics would give
/// it a grouped reduce (`GROUPTOP`) that adds in another order than the CPU devices.
const SHAPES: [(usize, usize); 6] = [
    (16, 1028),
    (24, 256),
    (8, 4100),
    (12, 40),
    (7, 36),
    (9, 1030),
];

/// Row `r` of length `c`: values of mixed magnitude (the in-order sum rounds differently from
/// any other order) with one case of edge values (by `r % 8`).
fn row(r: usize, c: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..c)
        .map(|i| {
            let h = ((r * 7919 + i * 104_729) % 20_011) as f32 - 10_000.0;
            if i % 3 == 0 {
                h * 1e3
            } else {
                h / 7.0
            }
        })
        .collect();
    let (p, q) = ((r * 5 + 3) % c, (r * 11 + c - 1) % c);
    match r % 8 {
        1 => v[p] = f32::NAN,
        2 => v.iter_mut().for_each(|x| *x = -0.0),
        3 => {
            v[p] = f32::INFINITY;
            v[q] = f32::NEG_INFINITY;
        }
        4 => v[q] = f32::INFINITY,
        5 => v.iter_mut().for_each(|x| *x = 1e-40),
        6 => {
            v[p] = f32::MAX;
            v[q] = f32::MAX;
        }
        _ => {}
    }
    v
}

/// Float bits compared as the same value, any NaN matching any NaN.
fn canon(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
        .collect()
}

/// Row sums, layernorm and softmax over the last axis on `dev`, as canonical bits.
fn run(dev: &str, rows: usize, c: usize) -> [Vec<u32>; 3] {
    let _g = on(dev);
    let data: Vec<f32> = (0..rows).flat_map(|r| row(r, c)).collect();
    let x = Tensor::from_slice(&data, &[rows, c]).unwrap();
    let get = |t: Tensor| canon(&t.to_vec::<f32>().unwrap());
    [
        get(x.sum_axis(1, false).unwrap()),
        get(x.layernorm(-1, 1e-5).unwrap()),
        get(x.softmax(-1).unwrap()),
    ]
}

#[test]
fn prefetched_reductions_give_the_interpreters_bits() {
    let devs = cpu_devices();
    for (rows, c) in SHAPES {
        let in_order: Vec<f32> = (0..rows)
            .map(|r| row(r, c).iter().fold(0.0f32, |a, &b| a + b))
            .collect();
        let interp = run(devs[0], rows, c);
        assert_eq!(
            interp[0],
            canon(&in_order),
            "INTERP {rows}x{c}: sum vs host"
        );
        for d in &devs[1..] {
            let got = run(d, rows, c);
            for (k, what) in ["sum", "layernorm", "softmax"].iter().enumerate() {
                assert_eq!(got[k], interp[k], "{d} {rows}x{c}: {what} vs INTERP");
            }
        }
    }
}

/// The source of each kernel of `t`'s schedule rendered by `r` (opts from `get_kernel`).
fn sources(r: &dyn Renderer, t: &Tensor) -> Vec<String> {
    rendered(r, &asts(t))
}

/// The LLVM CPU IR of each kernel of `t`'s schedule.
fn llvm_irs(t: &Tensor, opaque: bool) -> Vec<String> {
    sources(&LLVMRenderer::cpu(opaque), t)
}

fn prefetches(ir: &str) -> usize {
    ir.matches("call void @llvm.prefetch").count()
}

#[test]
fn llvm_cpu_reduce_loops_prefetch_their_row_streams_only() {
    let _d = on("CLANG");
    for opaque in [true, false] {
        let x = || Tensor::empty(&[64, 1024]).unwrap();
        // 8 rows of float4 loads per iteration: 8 streams
        for t in [
            x().sum_axis(1, false).unwrap(),
            x().max_axis(1, false).unwrap(),
        ] {
            let ir = llvm_irs(&t, opaque).remove(0);
            assert_eq!(prefetches(&ir), 8, "{ir}");
            let decl = if opaque {
                "@llvm.prefetch.p0("
            } else {
                "@llvm.prefetch.p0i8("
            };
            assert!(ir.contains(&format!("declare void {decl}")), "{ir}");
        }
        // layernorm: mean and variance prefetch, the normalizing elementwise kernel does not
        let irs = llvm_irs(&x().layernorm(-1, 1e-5).unwrap(), opaque);
        let counts: Vec<usize> = irs.iter().map(|ir| prefetches(ir)).collect();
        assert_eq!(counts, vec![8, 8, 0], "{irs:?}");
        // a column sum's loads advance by a row per iteration, a matmul reads a strided operand
        let col = llvm_irs(&x().sum_axis(0, false).unwrap(), opaque);
        let mm = llvm_irs(
            &x().matmul(&Tensor::empty(&[1024, 64]).unwrap()).unwrap(),
            opaque,
        );
        let ew = llvm_irs(&(x() + x()).unwrap(), opaque);
        for ir in col.iter().chain(&mm).chain(&ew) {
            assert_eq!(prefetches(ir), 0, "{ir}");
        }
    }
}

/// A row max, a sum of 4 rows, a column sum and a matmul: reductions outside the transposed form.
fn scalar_chain_kernels() -> [Tensor; 4] {
    let x = |rows: usize, c: usize| Tensor::empty(&[rows, c]).unwrap();
    [
        x(64, 1024).max_axis(1, false).unwrap(),
        x(12, 40).sum_axis(1, false).unwrap(),
        x(64, 1024).sum_axis(0, false).unwrap(),
        x(64, 1024).matmul(&x(1024, 64)).unwrap(),
    ]
}

/// The transposed form's vector adds in a CLANG source (4 per iteration of a loop in the form).
fn transposed_adds(src: &str) -> usize {
    src.lines()
        .filter(|l| {
            let l = l.trim();
            l.contains(" = __builtin_shufflevector(") && l.starts_with("acc")
        })
        .count()
}

#[test]
fn clang_row_sums_keep_8_rows_in_one_transposed_vector_accumulator() {
    let _d = on("CLANG");
    let r = ClangRenderer::new();
    let src = |t: Tensor| sources(&r, &t);
    let x = |rows: usize, c: usize| Tensor::empty(&[rows, c]).unwrap();
    // 8 rows of 4 KiB: the form and one prefetch per row stream
    let s = src(x(64, 1024).sum_axis(1, false).unwrap()).remove(0);
    assert_eq!(transposed_adds(&s), 4, "{s}");
    assert!(
        s.contains("float8 acc8 = {acc0,acc1,acc2,acc3,acc4,acc5,acc6,acc7};"),
        "{s}"
    );
    assert!(s.contains("acc7 = acc8[7];"), "{s}");
    assert_eq!(s.matches("__builtin_prefetch(").count(), 8, "{s}");
    // the shapes of the bit-exact test with 8 rows and a loop of float4 loads: the form, and a
    // prefetch only where a row is at least 4 KiB
    for (rows, c, prefetches) in [(16, 1028, 8), (24, 256, 0), (8, 4100, 8)] {
        let s = src(x(rows, c).sum_axis(1, false).unwrap()).remove(0);
        assert_eq!(transposed_adds(&s), 4, "{rows}x{c}: {s}");
        assert_eq!(s.matches("__builtin_prefetch(").count(), prefetches, "{s}");
    }
    // layernorm: the mean and the variance (a sum of the float4 squares computed in the loop)
    // take the form, each prefetching its 8 row streams; the normalizing elementwise kernel
    // does not; so do the shapes of the bit-exact test with 8 rows of float4 loads
    let ln = src(x(64, 1024).layernorm(-1, 1e-5).unwrap());
    let counts: Vec<usize> = ln.iter().map(|s| transposed_adds(s)).collect();
    assert_eq!(counts, vec![4, 4, 0], "{ln:?}");
    assert!(ln[1].contains("float4 alu18 = (alu17*alu17);"), "{}", ln[1]);
    assert_eq!(ln[1].matches("__builtin_prefetch(").count(), 8, "{}", ln[1]);
    for (rows, c) in [(16, 1028), (24, 256), (8, 4100)] {
        let ln = src(x(rows, c).layernorm(-1, 1e-5).unwrap());
        assert_eq!(transposed_adds(&ln[1]), 4, "{rows}x{c}: {}", ln[1]);
    }
    // softmax: its sum adds scalar exponentials, not the lanes of a float4: scalar chains
    for s in src(x(64, 1024).softmax(-1).unwrap()) {
        assert_eq!(transposed_adds(&s), 0, "{s}");
    }
    // a row max (no vector MAX in C), 4 rows, a column sum and a matmul keep their scalar code
    for t in scalar_chain_kernels() {
        for s in src(t) {
            assert_eq!(transposed_adds(&s), 0, "{s}");
            assert!(!s.contains("__builtin_shufflevector"), "{s}");
            assert!(!s.contains("__builtin_prefetch"), "{s}");
        }
    }
}

/// The transposed form's vector adds in an LLVM CPU IR (4 per iteration of a loop in the form).
fn llvm_transposed_adds(ir: &str) -> usize {
    ir.lines()
        .filter(|l| l.contains(" = fadd <8 x float> %rows"))
        .count()
}

#[test]
fn llvm_row_sums_keep_8_rows_in_one_vector_phi() {
    let _d = on("CLANG");
    let x = |rows: usize, c: usize| Tensor::empty(&[rows, c]).unwrap();
    for opaque in [true, false] {
        let irs = |t: Tensor| llvm_irs(&t, opaque);
        // a row sum: one <8 x float> header phi, 4 vector adds, the lanes back after the loop
        let ir = irs(x(64, 1024).sum_axis(1, false).unwrap()).remove(0);
        assert_eq!(llvm_transposed_adds(&ir), 4, "{ir}");
        assert_eq!(ir.matches(" = phi <8 x float> ").count(), 1, "{ir}");
        assert_eq!(
            ir.matches(" = extractelement <8 x float> %rows.acc")
                .count(),
            8,
            "{ir}"
        );
        assert!(
            !ir.contains(" = phi float "),
            "no scalar accumulator phi is left: {ir}"
        );
        // layernorm: the mean and the variance take the form, the elementwise kernel does not;
        // so do the shapes of the bit-exact test with 8 rows of float4 loads
        let ln = irs(x(64, 1024).layernorm(-1, 1e-5).unwrap());
        let counts: Vec<usize> = ln.iter().map(|s| llvm_transposed_adds(s)).collect();
        assert_eq!(counts, vec![4, 4, 0], "{ln:?}");
        for (rows, c) in [(16, 1028), (24, 256), (8, 4100)] {
            for s in &irs(x(rows, c).layernorm(-1, 1e-5).unwrap())[..2] {
                assert_eq!(llvm_transposed_adds(s), 4, "{rows}x{c}: {s}");
            }
        }
        // a row max, 4 rows, a column sum and a matmul keep their own accumulators
        for t in scalar_chain_kernels() {
            for s in irs(t) {
                assert_eq!(llvm_transposed_adds(&s), 0, "{s}");
            }
        }
    }
}

/// `CPU_ROWS=0` keeps the scalar chains on both renderers (and the bits: the bit-exact test
/// above runs with the form, this one without it).
#[test]
fn cpu_rows_0_keeps_the_scalar_chains() {
    let _k = rawgrad::helpers::Context::new(&[("CPU_ROWS", 0)]);
    let _d = on("CLANG");
    let t = Tensor::empty(&[64, 1024])
        .unwrap()
        .layernorm(-1, 1e-5)
        .unwrap();
    for s in sources(&ClangRenderer::new(), &t) {
        assert_eq!(transposed_adds(&s), 0, "{s}");
    }
    for s in llvm_irs(&t, true) {
        assert_eq!(llvm_transposed_adds(&s), 0, "{s}");
    }
    drop(_d);
    let devs = cpu_devices();
    let interp = run(devs[0], 16, 1028);
    for d in &devs[1..] {
        assert_eq!(run(d, 16, 1028), interp, "{d} with CPU_ROWS=0");
    }
}
