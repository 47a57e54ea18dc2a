//! The CPU tiles through the Tensor API (beyond tinygrad 0.9.1): the conv tile
//! (`codegen/kernel/cpu_conv.rs`: which opts `get_kernel` gives a conv2d on the CPU devices, that
//! its weights are not staged, and that the tiled kernels give INTERP's bits, and the bits of 0.9.1's opts, `CPU_CONV=0`, on
//! CLANG and LLVM, padding and bias included), and a matmul tile whose staged strip
//! (`codegen/uopgraph/stage.rs`) takes the largest stack buffer, run on the calling thread and
//! the pool's workers.

mod tensor_common;
use rawgrad::codegen::kernel::cpu_conv::{CONV_CHANNELS, CONV_LANES};
use rawgrad::codegen::kernel::opts::{Opt, OptOps};
use rawgrad::engine::realize::get_kernel;
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::tensor::ConvArgs;
use rawgrad::Tensor;
use tensor_common::*;

/// Values whose products and sums round, with zeros of both signs and a NaN mixed in.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match (i * 7 + seed) % 53 {
            0 => -0.0,
            1 => 0.0,
            _ => {
                let x = (i.wrapping_mul(2_654_435_761) ^ (seed * 40_503)) % 1_000_003;
                x as f32 / 77_777.7 - 6.3
            }
        })
        .collect()
}

/// `relu(conv2d(x, w, bias, padding 1))` with x (2, 16, 12, 16) and w (16, 16, 3, 3), and the
/// conv alone; `nan` puts a NaN into the image.
fn convs(nan: bool) -> Vec<Tensor> {
    let mut xv = values(2 * 16 * 12 * 16, 1);
    if nan {
        xv[777] = f32::NAN;
    }
    let x = Tensor::from_vec(xv, &[2, 16, 12, 16]).unwrap();
    let w = Tensor::from_vec(values(16 * 16 * 9, 2), &[16, 16, 3, 3]).unwrap();
    let b = Tensor::from_vec(values(16, 3), &[16]).unwrap();
    let args = ConvArgs {
        padding: vec![1],
        ..ConvArgs::default()
    };
    let plain = x.conv2d_with(&w, None, &args).unwrap();
    let biased = x.conv2d_with(&w, Some(&b), &args).unwrap().relu().unwrap();
    vec![plain, biased]
}

/// The outputs' bits on `dev` with `CPU_CONV` set to `knob`.
fn bits(dev: &str, knob: i64, nan: bool) -> Vec<Vec<u32>> {
    let _d = on(dev);
    let _k = Context::new(&[("CPU_CONV", knob)]);
    (convs(nan).iter())
        .map(|t| {
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        })
        .collect()
}

/// On CLANG and LLVM the conv kernel gets the tile: 8 lanes of the width, with AVX-512 two
/// rows, 8 output channels, the kernel's taps along the width unrolled (on LLVM along the height
/// too); `CPU_CONV=0` gives 0.9.1's opts back.
#[test]
fn a_conv_gets_the_tile_on_the_cpu_devices() {
    for dev in cpu_devices().into_iter().filter(|d| *d != "INTERP") {
        let _d = on(dev);
        let d = open_device(dev).unwrap();
        let t = &convs(false)[0];
        let sched = check(&[t], &[], true);
        let ast = &sched.last().unwrap().ast;
        let k = get_kernel(&*d.renderer, ast).unwrap();
        assert!(k.wide_vectors, "{dev}");
        let avx512 = rawgrad::codegen::kernel::cpu_tile::host_tile().lanes >= 16;
        // the kernel's axes: cout 16, y 12, x 16 | cin 16, ky 3, kx 3 (batch 2 first)
        let mut want = vec![Opt::new(OptOps::UPCAST, 3, CONV_LANES)];
        if avx512 {
            want.push(Opt::new(OptOps::UPCAST, 2, 2));
        }
        want.push(Opt::new(OptOps::UPCAST, 1, CONV_CHANNELS));
        want.push(Opt::new(OptOps::UNROLL, 2, 0));
        if dev == "LLVM" {
            want.push(Opt::new(OptOps::UNROLL, 1, 0));
        }
        assert_eq!(k.applied_opts, want, "{dev}");
        // the weights move 9 elements per input channel: a compact strip, not staged
        let mut k = k;
        let uops = k.linearize().unwrap().uops.clone();
        let src = d.renderer.render("k", &uops).unwrap();
        assert!(!src.contains("stage"), "{dev}: {src}");
        let _off = Context::new(&[("CPU_CONV", 0)]);
        let k = get_kernel(&*d.renderer, ast).unwrap();
        assert!(!k.wide_vectors, "{dev}");
        assert_ne!(k.applied_opts, want, "{dev}");
    }
}

/// The tiled kernels give INTERP's bits, and the bits of 0.9.1's opts, on CLANG and LLVM.
#[test]
fn the_conv_tile_gives_interps_bits() {
    for nan in [false, true] {
        let want = bits("INTERP", 1, nan);
        for dev in cpu_devices().into_iter().filter(|d| *d != "INTERP") {
            assert_eq!(bits(dev, 1, nan), want, "{dev} with the tile (nan {nan})");
            assert_eq!(
                bits(dev, 0, nan),
                want,
                "{dev} with 0.9.1's opts (nan {nan})"
            );
        }
    }
}

/// A (16, K) @ (K, 64) matmul whose strip is the deepest that is staged (`STAGE_MAX_BYTES` of
/// stack), on CLANG and LLVM with every core (the calling thread runs share 0, the pool's workers
/// the rest) and with one, gives the bits of the unoptimized kernel on INTERP.
#[test]
fn the_deepest_staged_strip_gives_interps_bits() {
    use rawgrad::codegen::kernel::cpu_tile::host_tile;
    use rawgrad::codegen::uopgraph::STAGE_MAX_BYTES;
    let k = STAGE_MAX_BYTES / 4 / host_tile().cols();
    let run = |dev: &str, threads: Option<i64>| {
        let _d = on(dev);
        let _t = threads.map(|n| Context::new(&[("CLANG_THREADS", n)]));
        let a = Tensor::from_vec(values(16 * k, 4), &[16, k]).unwrap();
        let b = Tensor::from_vec(values(k * 64, 5), &[k, 64]).unwrap();
        let out = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
    };
    // INTERP unoptimized: its heuristics group a reduce this long across local threads, a
    // different order of the sum; the tile keeps the unoptimized order
    let noopt = Context::new(&[("NOOPT", 1)]);
    let want = run("INTERP", None);
    drop(noopt);
    for dev in cpu_devices().into_iter().filter(|d| *d != "INTERP") {
        assert_eq!(run(dev, None), want, "{dev}, every core");
        assert_eq!(run(dev, Some(1)), want, "{dev}, the calling thread");
    }
}
