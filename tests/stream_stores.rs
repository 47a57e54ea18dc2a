//! Streaming stores of large elementwise outputs (`renderer/llvmir/stream_store.rs`, beyond
//! tinygrad 0.9.1): on x86-64 the CLANG and LLVM kernels of a 32 MiB `a*b+c` write their float4s
//! through the aligned-or-plain streaming store and end with an `sfence`; the same kernel over
//! 16 MiB, a reduction and a matmul keep plain stores. The streamed kernel gives the host's `a*b+c`
//! bits (NaN, infinities, signed zeros, denormals) through the Tensor API on every core, and run
//! by hand on output views at offsets 0, 4, 8 and 12 bytes (the unaligned ones take the plain
//! path) it writes the same bits and nothing outside the view.

mod tensor_common;

use rawgrad::device::BufferOptions;
use rawgrad::engine::realize::get_kernel;
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::llvmir::LLVMRenderer;
use rawgrad::runtime::builtin::open_device;
use rawgrad::Tensor;
use tensor_common::{asts, cpu_devices, on, rendered};

/// 8192 x 1024 float32: 32 MiB, the smallest output that streams.
const ROWS: usize = 8192;
const COLS: usize = 1024;

fn fma_like(rows: usize) -> Tensor {
    let x = || Tensor::empty(&[rows, COLS]).unwrap();
    (x() * x()).unwrap().add(x()).unwrap()
}

/// (streamed stores, fences) in a CLANG source and in LLVM IR.
fn clang_streams(src: &str) -> (usize, usize) {
    (
        src.matches("rg_stream_f4(data").count(),
        src.matches("rg_stream_fence();").count(),
    )
}

fn llvm_streams(ir: &str) -> (usize, usize) {
    (
        ir.matches("!nontemporal").count(),
        ir.matches("call void @llvm.x86.sse.sfence()").count(),
    )
}

#[test]
fn only_large_contiguous_float4_outputs_stream() {
    let _d = on("CLANG");
    let clang = ClangRenderer::new();
    let big = asts(&fma_like(ROWS));
    let want = if cfg!(target_arch = "x86_64") {
        (1, 1)
    } else {
        (0, 0)
    };
    let c = rendered(&clang, &big).remove(0);
    assert_eq!(clang_streams(&c), want, "{c}");
    for opaque in [true, false] {
        let ir = rendered(&LLVMRenderer::cpu(opaque), &big).remove(0);
        assert_eq!(llvm_streams(&ir), want, "{ir}");
        if want.0 > 0 {
            assert!(ir.contains("declare void @llvm.x86.sse.sfence()"), "{ir}");
            assert!(ir.contains(", align 16, !nontemporal !{i32 1}"), "{ir}");
        }
    }
    // 16 MiB of output, a row sum and a matmul: plain stores
    let small = asts(&fma_like(ROWS / 2));
    let sum = asts(
        &Tensor::empty(&[ROWS, COLS])
            .unwrap()
            .sum_axis(1, false)
            .unwrap(),
    );
    let mm = asts(
        &Tensor::empty(&[4096, 64])
            .unwrap()
            .matmul(&Tensor::empty(&[64, 2048]).unwrap())
            .unwrap(),
    );
    for t in [&small, &sum, &mm] {
        for s in rendered(&clang, t) {
            assert_eq!(clang_streams(&s), (0, 0), "{s}");
        }
        for ir in rendered(&LLVMRenderer::cpu(true), t) {
            assert_eq!(llvm_streams(&ir), (0, 0), "{ir}");
        }
    }
}

/// Input `k` of `a*b+c`: mixed magnitudes with NaN, infinities, signed zeros and denormals.
fn input(k: usize) -> Vec<f32> {
    let edge = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        f32::MAX,
    ];
    (0..ROWS * COLS)
        .map(|i| {
            let h = (i * (2 * k + 7919) + k * 104_729) % 20_011;
            if h % 97 == 0 {
                edge[(h / 97) % edge.len()]
            } else {
                (h as f32 - 10_000.0) / (k as f32 + 3.0)
            }
        })
        .collect()
}

/// The host's `a*b+c` (a rounded product, then a rounded sum: INTERP's semantics), NaNs as one.
fn want() -> Vec<u32> {
    let (a, b, c) = (input(0), input(1), input(2));
    let v: Vec<f32> = (0..a.len()).map(|i| a[i] * b[i] + c[i]).collect();
    canon(&v)
}

fn canon(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn streamed_outputs_give_the_hosts_bits_on_every_core() {
    let want = want();
    for d in cpu_devices().into_iter().filter(|d| *d != "INTERP") {
        let _g = on(d);
        let t = |k: usize| Tensor::from_slice(&input(k), &[ROWS, COLS]).unwrap();
        let out = (t(0) * t(1)).unwrap().add(t(2)).unwrap();
        assert!(canon(&out.to_vec::<f32>().unwrap()) == want, "{d}");
    }
}

/// Run the streamed kernel by hand with its output at byte offset `off` of a larger buffer
/// filled with a marker, and check the view's bits and the marker around it.
fn run_at_offset(dev_name: &str, off: usize, want: &[u32]) {
    let _g = on(dev_name);
    let dev = open_device(dev_name).unwrap();
    let ast = asts(&fma_like(ROWS)).remove(0);
    let mut k = get_kernel(&*dev.renderer, &ast).unwrap();
    let p = k.to_program(&*dev.renderer).unwrap();
    if cfg!(target_arch = "x86_64") {
        assert!(p.src.contains("stream") || p.src.contains("nontemporal"));
    }
    let lib = dev.compiler.compile(&p.src).unwrap();
    let prg = dev.runtime.load(&p.function_name, &lib).unwrap();
    let (n, o) = (ROWS * COLS * 4, BufferOptions::default());
    let a = &*dev.allocator;
    let whole = a.alloc(n + 64, &o).unwrap();
    a.copyin(&whole, &vec![0xa5u8; n + 64]).unwrap();
    let mut raws = vec![a.offset(&whole, n, off).unwrap()];
    for k in 0..3 {
        let r = a.alloc(n, &o).unwrap();
        a.copyin(&r, &bytes(&input(k))).unwrap();
        raws.push(r);
    }
    prg.call(&raws, &[], None, None, true).unwrap();
    let mut got = vec![0u8; n + 64];
    a.copyout(&mut got, &whole).unwrap();
    let marker = |r: &[u8]| r.iter().all(|&b| b == 0xa5);
    assert!(
        marker(&got[..off]) && marker(&got[off + n..]),
        "{dev_name} +{off}: wrote outside the view"
    );
    let vals: Vec<f32> = got[off..off + n]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(canon(&vals) == want, "{dev_name} +{off}: bits differ");
    a.free(whole, n + 64, &o);
    for r in raws.into_iter().skip(1) {
        a.free(r, n, &o);
    }
}

#[test]
fn aligned_and_unaligned_output_views_get_the_same_bits() {
    let want = want();
    for d in cpu_devices().into_iter().filter(|d| *d != "INTERP") {
        for off in [0, 4, 8, 12] {
            run_at_offset(d, off, &want);
        }
    }
}
