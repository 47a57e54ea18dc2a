//! TinyJit on CLANG, INTERP and the default device (`AMD=1 MOCKGPU=1` / `NV=1 MOCKGPU=1` add the
//! emulated GPU): the rules and errors of tinygrad 0.9.1's test_jit.py (cache lengths, kwargs and
//! their order, shape and view mismatches, duplicate inputs, random regeneration, multiple
//! outputs, batch splitting, views of inputs), plus the memory planner over captured items and
//! the CPU batch graph of CLANG and LLVM (one call per replay).

mod realize_common;

use std::collections::HashSet;

use std::time::Duration;

use rawgrad::device::{BufferRef, GraphBuild};
use rawgrad::dtype::dtypes;
use rawgrad::engine::jit::{graph_items, graph_runner, JitArg, JitArgs, TinyJit};
use rawgrad::engine::realize::ExecItem;
use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::open_device;
use rawgrad::runtime::cpu::graph::hold_builds;
use rawgrad::shape::Node;
use rawgrad::{Result, Tensor};
use realize_common::{devices, values};

fn tensor(dev: &str, data: &[f32]) -> Tensor {
    Tensor::from_slice_on(data, &[data.len()], dev).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// test/helpers.py `assert_jit_cache_len`: the kernels captured, looking inside a lone graph.
fn jit_cache_len(cache: &[ExecItem]) -> usize {
    match cache {
        [one] => graph_items(&*one.runner).map_or(1, <[ExecItem]>::len),
        _ => cache.len(),
    }
}

fn add_jit() -> TinyJit<Tensor> {
    TinyJit::new(|a: &JitArgs| a.t(0)?.add(a.t(1)?)?.realize())
}

#[test]
fn simple_jit_captures_on_the_second_call_and_replays() {
    for dev in devices() {
        let mut add = add_jit();
        for i in 0..5u32 {
            let (x, y) = (values(100, i), values(100, i + 7));
            let c = add
                .call_tensors(&[tensor(&dev, &x), tensor(&dev, &y)])
                .unwrap();
            let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
            assert_eq!(vals(&c), want, "{dev} call {i}");
        }
        assert_eq!(jit_cache_len(add.jit_cache()), 1, "{dev}");
        assert_eq!(add.cnt(), 5);
        add.reset();
        assert!(add.jit_cache().is_empty());
        let c = add.call_tensors(&[tensor(&dev, &[1.0; 20]), tensor(&dev, &[2.0; 20])]);
        assert_eq!(vals(&c.unwrap()), vec![3.0; 20], "{dev} after reset");
    }
}

#[test]
fn unrealized_and_multiple_outputs() {
    for dev in devices() {
        let mut norealize = TinyJit::new(|a: &JitArgs| Ok(vec![a.t(0)?.add(a.t(1)?)?]));
        let mut multi = TinyJit::new(|a: &JitArgs| {
            let (x, y) = (a.t(0)?, a.t(1)?);
            Ok((
                x.add(y)?.realize()?,
                x.sub(y)?.realize()?,
                x.mul(y)?.realize()?,
            ))
        });
        for i in 0..5u32 {
            let (x, y) = (values(64, i), values(64, 100 + i));
            let c = norealize.call_tensors(&[tensor(&dev, &x), tensor(&dev, &y)]);
            let c = c.unwrap();
            let ins = [tensor(&dev, &x), tensor(&dev, &y)];
            let (s, d, p) = multi.call_tensors(&ins).unwrap();
            let zip = |f: fn(f32, f32) -> f32| -> Vec<f32> {
                x.iter().zip(&y).map(|(a, b)| f(*a, *b)).collect()
            };
            assert_eq!(vals(&c[0]), zip(|a, b| a + b), "{dev}");
            assert_eq!(vals(&s), zip(|a, b| a + b), "{dev}");
            assert_eq!(vals(&d), zip(|a, b| a - b), "{dev}");
            assert_eq!(vals(&p), zip(|a, b| a * b), "{dev}");
        }
        assert_eq!(jit_cache_len(norealize.jit_cache()), 1, "{dev}");
        assert_eq!(jit_cache_len(multi.jit_cache()), 3, "{dev}");
    }
}

#[test]
fn nothing_jitted_is_an_error() {
    let dev = &devices()[0];
    let mut f = TinyJit::new(|_: &JitArgs| Ok(()));
    let ins = [tensor(dev, &[1.0]), tensor(dev, &[2.0])];
    f.call_tensors(&ins).unwrap();
    let e = f.call_tensors(&ins).unwrap_err();
    assert!(e.to_string().contains("didn't JIT anything"), "{e}");
}

#[test]
fn jit_zero_does_not_capture_and_capturing_zero_hides_work() {
    for dev in devices() {
        let _ctx = Context::new(&[("JIT", 0)]);
        let mut add = add_jit();
        for i in 0..5 {
            let c = add.call_tensors(&[tensor(&dev, &[i as f32]), tensor(&dev, &[i as f32])]);
            assert_eq!(vals(&c.unwrap()), vec![2.0 * i as f32], "{dev}");
        }
        assert_eq!(add.jit_cache().len(), 0);
    }
    for (hide, want) in [(false, 2), (true, 1)] {
        for dev in devices() {
            let d = dev.clone();
            let mut add = TinyJit::new(move |a: &JitArgs| {
                let _c = Context::new(&[("CAPTURING", if hide { 0 } else { 1 })]);
                Tensor::full_on(&[4, 4], 0.0f32, dtypes::float32, &d)?
                    .contiguous()?
                    .realize()?;
                drop(_c);
                a.t(0)?.add(a.t(1)?)?.realize()
            });
            for i in 0..5 {
                let c = add.call_tensors(&[tensor(&dev, &[i as f32]), tensor(&dev, &[i as f32])]);
                assert_eq!(vals(&c.unwrap()), vec![2.0 * i as f32], "{dev}");
            }
            assert_eq!(jit_cache_len(add.jit_cache()), want, "{dev} hide={hide}");
        }
    }
}

#[test]
fn shape_dtype_device_and_view_mismatches_name_the_input() {
    for dev in devices() {
        let mut add = add_jit();
        for _ in 0..3 {
            add.call_tensors(&[tensor(&dev, &[1.0; 10]), tensor(&dev, &[2.0; 10])])
                .unwrap();
        }
        let e = add
            .call_tensors(&[tensor(&dev, &[1.0; 10]), tensor(&dev, &[2.0; 20])])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("input 1 was shape (10)") && e.contains("is shape (20)"),
            "{e}"
        );
        let half = Tensor::from_slice_on(&[1u8; 10], &[10], &dev).unwrap();
        let e = add
            .call_tensors(&[half, tensor(&dev, &[2.0; 10])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("input 0") && e.contains("uchar"), "{e}");
        let other = if dev == "INTERP" { "CLANG" } else { "INTERP" };
        let e = add
            .call_tensors(&[tensor(&dev, &[1.0; 10]), tensor(other, &[2.0; 10])])
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("device {other}")), "{e}");
        // a has an offset the kernel does not know about
        let mut plus1 = TinyJit::new(|a: &JitArgs| a.t(0)?.add(1.0f32)?.realize());
        let mut errs = Vec::new();
        for i in 1..5 {
            let a = tensor(&dev, &values(100, i as u32))
                .reshape(&[10, 10])
                .unwrap();
            let a = a
                .realize()
                .unwrap()
                .shrink(&[None, Some((i, i + 2))])
                .unwrap();
            if let Err(e) = plus1.call_tensors(&[a]) {
                errs.push(e.to_string());
            }
        }
        assert_eq!(errs.len(), 2, "{dev}: calls 3 and 4 fail: {errs:?}");
        assert!(
            errs[0].contains("args mismatch in JIT: input 0"),
            "{}",
            errs[0]
        );
    }
}

#[test]
fn duplicate_inputs_and_unbound_variables_are_errors() {
    let dev = &devices()[0];
    let mut add = add_jit();
    let a = tensor(dev, &[1.0; 10]);
    let e = add.call_tensors(&[a.clone(), a]).unwrap_err().to_string();
    assert!(e.contains("duplicate inputs to JIT: input 1"), "{e}");
    let mut f = TinyJit::new(|a: &JitArgs| a.t(0)?.add(1.0f32)?.realize());
    let v = Node::var("i", 1, 10).unwrap();
    let args = JitArgs::new().tensor(&tensor(dev, &[1.0])).var(&v);
    let e = f.call(&args).unwrap_err().to_string();
    assert!(
        e.contains("jit argument 1") && e.contains("not bound"),
        "{e}"
    );
}

#[test]
fn kwargs_are_ordered_by_name() {
    for dev in devices() {
        let mut div = TinyJit::new(|a: &JitArgs| a.get("first")?.div(a.get("second")?)?.realize());
        for i in 0..4u32 {
            let (x, y) = (values(50, i), values(50, 50 + i));
            let (first, second) = (tensor(&dev, &x), tensor(&dev, &y));
            let args = if i < 2 {
                JitArgs::new()
                    .kw("second", JitArg::Tensor(second))
                    .kw("first", JitArg::Tensor(first))
            } else {
                JitArgs::new()
                    .kw("first", JitArg::Tensor(first))
                    .kw("second", JitArg::Tensor(second))
            };
            let got = vals(&div.call(&args).unwrap());
            let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a / b).collect();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{dev}: {g} vs {w}"
                );
            }
        }
        assert_eq!(jit_cache_len(div.jit_cache()), 1, "{dev}");
        let bad = JitArgs::new().tensor(&tensor(&dev, &[1.0; 50]));
        let e = div.call(&bad).unwrap_err().to_string();
        assert!(e.contains("args mismatch in JIT"), "{e}");
    }
}

/// Replays compare the inputs with the capture cheaply while they match it exactly; any other
/// call takes the full check: a new shape or view, a duplicate input, a keyword where a position
/// was, an unrealized input (realized, then replayed), each with tinygrad's error or result, and
/// matching replays after them stay exact.
#[test]
fn replays_that_differ_from_the_capture_take_the_full_check() {
    for dev in devices() {
        let mut add = add_jit();
        let call = |add: &mut TinyJit<Tensor>, x: &Tensor, y: &Tensor| {
            add.call_tensors(&[x.clone(), y.clone()])
                .map(|t| vals(&t))
                .map_err(|e| e.to_string())
        };
        let sum =
            |x: &[f32], y: &[f32]| -> Vec<f32> { x.iter().zip(y).map(|(a, b)| a + b).collect() };
        for i in 0..4u32 {
            let (x, y) = (values(10, i), values(10, i + 3));
            let got = call(&mut add, &tensor(&dev, &x), &tensor(&dev, &y)).unwrap();
            assert_eq!(got, sum(&x, &y), "{dev} call {i}");
        }
        let (x, y) = (values(10, 20), values(10, 21));
        let (tx, ty) = (tensor(&dev, &x), tensor(&dev, &y));
        let e = call(&mut add, &tx, &tensor(&dev, &[1.0; 11])).unwrap_err();
        assert!(
            e.contains("input 1 was shape (10)") && e.contains("is shape (11)"),
            "{dev}: {e}"
        );
        // the same shape over another view: an offset into a bigger buffer
        let big = tensor(&dev, &values(20, 5)).realize().unwrap();
        let off = big.shrink(&[Some((5, 15))]).unwrap();
        let e = call(&mut add, &off, &ty).unwrap_err();
        assert!(e.contains("args mismatch in JIT: input 0"), "{dev}: {e}");
        let e = call(&mut add, &tx, &tx).unwrap_err();
        assert!(e.contains("duplicate inputs to JIT: input 1"), "{dev}: {e}");
        let kw = JitArgs::new()
            .tensor(&tx)
            .kw("y", JitArg::Tensor(ty.clone()));
        let e = add.call(&kw).unwrap_err().to_string();
        assert!(e.contains("args mismatch in JIT"), "{dev}: {e}");
        // an unrealized input is realized first, then replayed
        let lazy = tx.mul(2.0f32).unwrap();
        let x2: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
        assert_eq!(call(&mut add, &lazy, &ty).unwrap(), sum(&x2, &y), "{dev}");
        for i in 0..3u32 {
            let (x, y) = (values(10, 30 + i), values(10, 40 + i));
            let got = call(&mut add, &tensor(&dev, &x), &tensor(&dev, &y)).unwrap();
            assert_eq!(got, sum(&x, &y), "{dev} replay {i} after the errors");
        }
        assert_eq!(jit_cache_len(add.jit_cache()), 1, "{dev}");
    }
}

#[test]
fn size1_and_const_inputs_and_buffer_sharing() {
    for dev in devices() {
        let mut add = add_jit();
        let a = tensor(&dev, &[1.0, 2.0, 3.0]);
        for i in 0..5 {
            let c = add
                .call_tensors(&[a.clone(), tensor(&dev, &[i as f32])])
                .unwrap();
            assert_eq!(
                vals(&c),
                vec![1.0 + i as f32, 2.0 + i as f32, 3.0 + i as f32]
            );
        }
        let mut g = TinyJit::new(|a: &JitArgs| a.t(0)?.add(a.t(1)?)?.add(a.t(2)?)?.realize());
        for i in 0..5 {
            let ones = Tensor::full_on(&[3], 1.0f32, dtypes::float32, &dev).unwrap();
            let zeros = Tensor::full_on(&[3], 0.0f32, dtypes::float32, &dev).unwrap();
            let c = g.call_tensors(&[tensor(&dev, &[i as f32; 3]), ones, zeros]);
            assert_eq!(vals(&c.unwrap()), vec![i as f32 + 1.0; 3], "{dev}");
        }
        // test_jit_buffer_behavior: the captured call's result is returned by every replay
        let mut sum = TinyJit::new(|a: &JitArgs| a.t(0)?.sum()?.realize());
        let r1 = sum.call_tensors(&[tensor(&dev, &[1.0; 2])]).unwrap();
        let r2 = sum.call_tensors(&[tensor(&dev, &[2.0; 2])]).unwrap();
        let r3 = sum.call_tensors(&[tensor(&dev, &[3.0; 2])]).unwrap();
        assert_eq!(
            (vals(&r1), vals(&r2), vals(&r3)),
            (vec![2.0], vec![6.0], vec![6.0])
        );
    }
}

#[test]
fn random_numbers_regenerate_and_reproduce() {
    let run = |seed: u32, dev: &str| -> Vec<u32> {
        let _c = Context::with_str(&[("DEVICE", dev)]);
        Tensor::manual_seed(seed).unwrap();
        let mut f = TinyJit::new(|a: &JitArgs| {
            let rn = Tensor::rand(&[10, 10])?;
            a.t(0)?.add(a.t(1)?)?.mul(&rn)?.realize()
        });
        let (a, b) = (tensor(dev, &[1.0; 100]), tensor(dev, &[0.5; 100]));
        let (a, b) = (a.reshape(&[10, 10]).unwrap(), b.reshape(&[10, 10]).unwrap());
        (0..5)
            .map(|_| vals(&f.call_tensors(&[a.clone(), b.clone()]).unwrap())[0].to_bits())
            .collect()
    };
    for dev in devices() {
        let r1 = run(1234, &dev);
        assert_eq!(r1.iter().collect::<HashSet<_>>().len(), 5, "{dev}: {r1:?}");
        assert_eq!(run(1234, &dev), r1, "{dev}: same seed, same numbers");
        assert_ne!(run(3421, &dev), r1, "{dev}");
    }
}

fn chain(a: &JitArgs, n: usize) -> Result<Tensor> {
    let (mut x, b) = (a.t(0)?.clone(), a.t(1)?);
    for _ in 0..n {
        x = x.add(b)?.realize()?;
    }
    x.mul(a.t(2)?)?
        .realize()?
        .mul(a.t(3)?)?
        .realize()?
        .mul(a.t(4)?)?
        .realize()
}

#[test]
fn batches_split_and_double() {
    for dev in devices() {
        for jit in [1, 2] {
            let _c = Context::new(&[("JIT", jit)]);
            let mut f = TinyJit::new(|a: &JitArgs| chain(a, 80));
            let ins: Vec<Tensor> = (0..5).map(|i| tensor(&dev, &values(100, i))).collect();
            let mut prev = None;
            for _ in 0..5 {
                let o = vals(&f.call_tensors(&ins).unwrap());
                if let Some(p) = &prev {
                    assert_eq!(&o, p, "{dev}");
                }
                prev = Some(o);
            }
            let cache = f.jit_cache();
            let graphs: Vec<usize> = cache
                .iter()
                .filter_map(|ei| graph_items(&*ei.runner).map(<[ExecItem]>::len))
                .collect();
            let has_graph = open_device(&dev).unwrap().runtime.has_graph();
            if has_graph && jit == 1 {
                assert_eq!(
                    graphs,
                    vec![32, 51],
                    "{dev}: 83 kernels, batches of 32 then 64"
                );
            } else {
                assert!(graphs.is_empty(), "{dev} JIT={jit}");
                assert_eq!(cache.len(), 83, "{dev} JIT={jit}");
            }
            // the chain's result against the host
            let mut x = values(100, 0);
            let b = values(100, 1);
            for _ in 0..80 {
                x.iter_mut().zip(&b).for_each(|(x, b)| *x += b);
            }
            for k in 2..5 {
                x.iter_mut().zip(values(100, k)).for_each(|(x, m)| *x *= m);
            }
            assert_eq!(prev.unwrap(), x, "{dev} JIT={jit}");
        }
    }
}

#[test]
fn views_of_inputs_follow_the_new_input() {
    for dev in devices() {
        let mut f = TinyJit::new(|a: &JitArgs| {
            let v = a.t(0)?.shrink(&[Some((2, 6))])?.contiguous()?;
            v.mul(2.0f32)?.realize()
        });
        for i in 0..5u32 {
            let x = values(8, i);
            let got = vals(&f.call_tensors(&[tensor(&dev, &x)]).unwrap());
            let want: Vec<f32> = x[2..6].iter().map(|v| v * 2.0).collect();
            assert_eq!(got, want, "{dev} call {i}");
        }
    }
}

fn distinct(cache: &[ExecItem]) -> HashSet<BufferRef> {
    cache
        .iter()
        .flat_map(|ei| ei.bufs.iter().flatten().cloned())
        .collect()
}

#[test]
fn the_planner_reuses_intermediates_but_not_outputs_or_inputs() {
    for dev in devices() {
        let _c = Context::new(&[("JIT", 2)]);
        let mut f = TinyJit::new(|a: &JitArgs| {
            let mut x = a.t(0)?.clone();
            for k in 0..6 {
                x = x.mul(1.5f32)?.add(k as f32)?.contiguous()?;
            }
            Ok(x)
        });
        let input = tensor(&dev, &values(256, 3));
        f.call_tensors(std::slice::from_ref(&input)).unwrap();
        let out = f.call_tensors(std::slice::from_ref(&input)).unwrap();
        let cache = f.jit_cache();
        assert_eq!(cache.len(), 6, "{dev}");
        // six outputs in a chain fit in two intermediates and the caller's output
        assert_eq!(distinct(cache).len(), 3, "{dev}: {cache:?}");
        let out_buf = out.lazydata().base().realized_buffer().unwrap();
        let writes_out = cache
            .iter()
            .filter(|ei| ei.bufs[0].as_ref() == Some(&out_buf));
        assert_eq!(
            writes_out.count(),
            1,
            "{dev}: only the last kernel writes the output"
        );
        let other = tensor(&dev, &values(256, 9));
        let got = vals(&f.call_tensors(&[other]).unwrap());
        let mut want = values(256, 9);
        for k in 0..6 {
            want.iter_mut().for_each(|v| *v = *v * 1.5 + k as f32);
        }
        assert_eq!(got, want, "{dev}");
        assert_ne!(input.lazydata().base().realized_buffer().unwrap(), out_buf);
    }
}

#[test]
fn a_jit_inside_a_jit_is_an_error() {
    let dev = devices()[0].clone();
    let mut outer = TinyJit::new(move |a: &JitArgs| {
        let mut inner = TinyJit::new(|a: &JitArgs| a.t(0)?.add(1.0f32)?.realize());
        inner.call_tensors(&[a.t(0)?.clone()])
    });
    let e = outer.call_tensors(&[tensor(&dev, &[1.0])]).unwrap_err();
    assert!(e.to_string().contains("inside another TinyJit"), "{e}");
}

/// The 2-layer MLP of examples/quickstart.rs (16 -> 32 -> 4, SGD), from host-made weights.
struct Mlp {
    params: Vec<Tensor>,
}

impl Mlp {
    fn new(dev: &str) -> Mlp {
        let shapes: [(&[usize], u32); 4] = [(&[16, 32], 1), (&[32], 2), (&[32, 4], 3), (&[4], 4)];
        let params = shapes
            .iter()
            .map(|(shape, seed)| {
                let n = shape.iter().product();
                let v: Vec<f32> = values(n, *seed).iter().map(|x| x * 0.5).collect();
                let t = Tensor::from_slice_on(&v, shape, dev).unwrap();
                t.realize().unwrap().requires_grad_(true)
            })
            .collect();
        Mlp { params }
    }

    /// One SGD step; returns the loss before the update (realized with the parameters).
    fn step(params: &[Tensor], x: &Tensor, y: &Tensor) -> Result<Tensor> {
        let [w1, b1, w2, b2] = params else {
            return Err(rawgrad::Error::Internal("four parameters".into()));
        };
        let logits = x.matmul(w1)?.add(b1)?.relu()?.matmul(w2)?.add(b2)?;
        let loss = logits.sparse_categorical_crossentropy(y, -1, 0.0)?;
        loss.backward()?;
        for p in params {
            let g = p.grad().ok_or(rawgrad::Error::Internal("no grad".into()))?;
            p.assign(&p.detach().sub(g.mul(0.1)?)?)?;
            p.set_grad(None);
        }
        let others: Vec<&Tensor> = params.iter().collect();
        loss.realize_all(&others)?;
        Ok(loss)
    }
}

#[test]
fn jitted_mlp_training_step_gives_the_eager_losses() {
    for dev in devices() {
        let batches: Vec<(Tensor, Tensor)> = (0..6u32)
            .map(|s| {
                let x = values(64 * 16, 100 + s);
                let y: Vec<i32> = x
                    .chunks_exact(16)
                    .map(|r| 2 * ((r[0] + r[1]) > 0.0) as i32 + ((r[2] - r[3]) > 0.0) as i32)
                    .collect();
                let x = Tensor::from_slice_on(&x, &[64, 16], &dev).unwrap();
                (x, Tensor::from_slice_on(&y, &[64], &dev).unwrap())
            })
            .collect();
        let eager = Mlp::new(&dev);
        let want: Vec<f32> = batches
            .iter()
            .map(|(x, y)| vals(&Mlp::step(&eager.params, x, y).unwrap())[0])
            .collect();
        let jitted = Mlp::new(&dev);
        let params = jitted.params.clone();
        let mut step = TinyJit::new(move |a: &JitArgs| Mlp::step(&params, a.t(0)?, a.t(1)?));
        let got: Vec<f32> = batches
            .iter()
            .map(|(x, y)| vals(&step.call_tensors(&[x.clone(), y.clone()]).unwrap())[0])
            .collect();
        assert!(
            jit_cache_len(step.jit_cache()) > 5,
            "{dev}: the step was captured"
        );
        assert!(
            want[5] < want[0],
            "{dev}: training lowers the loss {want:?}"
        );
        assert_eq!(got, want, "{dev}: jitted losses");
        for (e, j) in eager.params.iter().zip(&jitted.params) {
            assert_eq!(vals(e), vals(j), "{dev}: parameters after 6 steps");
        }
    }
}

/// `x*2+1` on the input's device, moved to `to`, then `*4-0.5` there (every step exact in
/// float32 for inputs in [-1, 1), whatever the device fuses).
fn across(a: &JitArgs, to: &str) -> Result<Tensor> {
    let y = a.t(0)?.mul(2.0f32)?.add(1.0f32)?.realize()?;
    y.to(to)?.mul(4.0f32)?.add(-0.5f32)?.realize()
}

#[test]
fn a_function_across_two_devices_replays_with_the_transfer() {
    let mut pairs = vec![("CLANG".to_string(), "INTERP".to_string())];
    let dev = rawgrad::runtime::builtin::default_device().unwrap();
    let family = dev.split(':').next().unwrap_or_default().to_string();
    let second = format!("{family}:1");
    if open_device(&dev).unwrap().runtime.multi_graph() {
        match open_device(&second) {
            Ok(_) => pairs.push((dev.clone(), second)),
            // the NV emulator has one GPU unless MOCKGPU_NV_COUNT says more; the multi-device
            // graph on NV is tested in runtime::nv::tests::multigraph
            Err(e) => eprintln!("{second} does not open ({e}): only the CPU pair here"),
        }
    }
    for (from, to) in pairs {
        let t = to.clone();
        let mut f = TinyJit::new(move |a: &JitArgs| across(a, &t));
        for i in 0..5u32 {
            let x = values(64, i);
            let out = f.call_tensors(&[tensor(&from, &x)]).unwrap();
            let want: Vec<f32> = x.iter().map(|v| (v * 2.0 + 1.0) * 4.0 - 0.5).collect();
            assert_eq!(vals(&out), want, "{from} -> {to} call {i}");
        }
        let cache = f.jit_cache();
        if open_device(&from).unwrap().runtime.multi_graph() {
            // kernel, transfer, kernel: one graph over both devices
            assert_eq!(cache.len(), 1, "{from} -> {to}: {cache:?}");
            assert_eq!(
                graph_items(&*cache[0].runner).map(<[ExecItem]>::len),
                Some(3)
            );
        } else {
            // a copy between families is not graphed; single kernels stay items
            assert_eq!(cache.len(), 3, "{from} -> {to}: {cache:?}");
        }
    }
}

/// CLANG, and LLVM where its library loads: the devices of the CPU batch graph.
fn batch_graph_devices() -> Vec<String> {
    let mut out = vec!["CLANG".to_string()];
    if open_device("LLVM").is_ok() {
        out.push("LLVM".into());
    }
    out
}

/// A step with an input that is a view, a view taken inside, a variable, a large kernel between
/// small ones (`big`: 2^16 elements, split over cores by the launch policy) and three outputs.
fn batch_step(a: &JitArgs) -> Result<(Tensor, Tensor, Tensor)> {
    let (x, y, big) = (a.t(0)?, a.t(1)?, a.t(2)?);
    let p = x.shrink(&[Some((2, 10))])?.mul(y)?.realize()?;
    let head = x.lazydata().shrink(&[(Node::Num(0), a.v(3)?.clone())])?;
    let s = Tensor::from_lazybuffer(head, None).sum()?.realize()?;
    let b = big.mul(2.0f32)?.realize()?;
    let q = p.add(1.0f32)?.realize()?.mul(y)?.realize()?;
    let r = q.sub(p.mul(s.reshape(&[1])?)?)?.realize()?;
    Ok((b, q, r))
}

/// The CPU batch graph (runtime/cpu/graph.rs): every replay of the batch is one call into the
/// compiled batch (two when a kernel that is split over cores sits inside it), with the results
/// of an eager run once its build is done (on the build thread, or at capture with
/// `CPU_GRAPH_SYNC=1`); with `CPU_GRAPH=0` the host-call graph replays and counts no such calls.
#[test]
fn the_cpu_batch_graph_replays_with_one_call_and_eager_results() {
    let i = Node::var("i", 1, 16).unwrap();
    for dev in batch_graph_devices() {
        let cases = [
            (1, 0, 8, Some(1)),
            (1, 0, 1 << 16, Some(2)),
            (1, 1, 8, Some(1)),
            (0, 0, 8, None),
        ];
        for (cpu_graph, sync, big_n, calls) in cases {
            let _c = Context::new(&[("CPU_GRAPH", cpu_graph), ("CPU_GRAPH_SYNC", sync)]);
            let mut f = TinyJit::new(batch_step);
            for call in 0..6u32 {
                let base = tensor(&dev, &values(20, call));
                let x = base.shrink(&[Some((3, 19))]).unwrap(); // an input that is a view
                let y = tensor(&dev, &values(8, call + 50));
                let big = tensor(&dev, &values(big_n, call + 9));
                let args = || {
                    let v = i.bind(i64::from(call % 5 + 2)).unwrap();
                    JitArgs::new().tensor(&x).tensor(&y).tensor(&big).var(&v)
                };
                let eager = batch_step(&args()).unwrap();
                let graph = graph_calls(f.jit_cache());
                let got = f.call(&args()).unwrap();
                let what =
                    format!("{dev} CPU_GRAPH={cpu_graph} sync={sync} big={big_n} call {call}");
                assert_eq!(vals(&got.0), vals(&eager.0), "{what}");
                assert_eq!(vals(&got.1), vals(&eager.1), "{what}");
                assert_eq!(vals(&got.2), vals(&eager.2), "{what}");
                if call == 1 {
                    assert_eq!(f.wait_graphs(BUILD_WAIT), GraphBuild::Ready, "{what}");
                }
                if call >= 2 {
                    let after = graph_calls(f.jit_cache());
                    let per_replay = graph.zip(after).map(|(a, b)| b - a);
                    assert_eq!(per_replay, calls, "{what}");
                }
            }
            let cache = f.jit_cache();
            assert_eq!(cache.len(), 1, "{dev}: one graph");
            assert_eq!(jit_cache_len(cache), 6, "{dev}: the kernels in the graph");
        }
    }
}

/// The entry calls of the lone graph of a cache (`None`: none counted).
fn graph_calls(cache: &[ExecItem]) -> Option<u64> {
    let [one] = cache else { return None };
    graph_runner(&*one.runner)?.device_graph().entry_calls()
}

/// How long a test waits for a batch build (a bound for a stuck build, not a timing claim).
const BUILD_WAIT: Duration = Duration::from_secs(600);

/// Call the batch step (inputs from `call`), check the results against an eager run, and return
/// how many entry calls the call made (`None`: none counted).
fn checked_step(f: &mut TinyJit<(Tensor, Tensor, Tensor)>, dev: &str, call: u32) -> Option<u64> {
    let i = Node::var("i", 1, 16).unwrap();
    let base = tensor(dev, &values(20, call));
    let x = base.shrink(&[Some((3, 19))]).unwrap();
    let y = tensor(dev, &values(8, call + 50));
    let big = tensor(dev, &values(8, call + 9));
    let args = || {
        let v = i.bind(i64::from(call % 5 + 2)).unwrap();
        JitArgs::new().tensor(&x).tensor(&y).tensor(&big).var(&v)
    };
    let eager = batch_step(&args()).unwrap();
    let before = graph_calls(f.jit_cache());
    let got = f.call(&args()).unwrap();
    let what = format!("{dev} call {call}");
    assert_eq!(vals(&got.0), vals(&eager.0), "{what}");
    assert_eq!(vals(&got.1), vals(&eager.1), "{what}");
    assert_eq!(vals(&got.2), vals(&eager.2), "{what}");
    before.zip(graph_calls(f.jit_cache())).map(|(a, b)| b - a)
}

/// While the batch build is held (the compile cache off, so the batch is compiled on the build
/// thread), the graph replays through host calls (no entry call) with eager results; once released
/// and built, the next replay swaps to the entry: one call per replay.
#[test]
fn the_cpu_batch_graph_calls_kernels_one_by_one_until_its_build_is_done() {
    let _c = Context::new(&[("CACHELEVEL", 0)]);
    for dev in batch_graph_devices() {
        let held = hold_builds();
        let mut f = TinyJit::new(batch_step);
        checked_step(&mut f, &dev, 0);
        checked_step(&mut f, &dev, 1);
        assert_eq!(
            graph_calls(f.jit_cache()),
            Some(0),
            "{dev}: nothing built yet"
        );
        for call in 2..5 {
            assert_eq!(
                checked_step(&mut f, &dev, call),
                Some(0),
                "{dev} call {call}"
            );
            assert_eq!(f.wait_graphs(Duration::ZERO), GraphBuild::Building, "{dev}");
        }
        held.release();
        assert_eq!(f.wait_graphs(BUILD_WAIT), GraphBuild::Ready, "{dev}");
        assert_eq!(held.passed(), 1, "{dev}");
        for call in 5..8 {
            assert_eq!(
                checked_step(&mut f, &dev, call),
                Some(1),
                "{dev} call {call}"
            );
        }
    }
}

/// Dropping a JIT whose batch is still building: a held build is cancelled before it compiles,
/// a released one compiles or is cancelled, and either way the drop has ended the build thread.
#[test]
fn dropping_a_jit_while_its_batch_builds_ends_the_build() {
    let _c = Context::new(&[("CACHELEVEL", 0)]);
    for dev in batch_graph_devices() {
        for release in [false, true] {
            let held = hold_builds();
            let mut f = TinyJit::new(batch_step);
            checked_step(&mut f, &dev, 0);
            checked_step(&mut f, &dev, 1);
            if release {
                held.release();
            }
            drop(f);
            let what = format!("{dev} release={release}");
            assert_eq!(held.waiting(), 0, "{what}");
            assert_eq!(held.passed() + held.cancelled(), 1, "{what}");
            if !release {
                assert_eq!(held.cancelled(), 1, "{what}");
            }
        }
        // the device still captures and builds
        let mut f = TinyJit::new(batch_step);
        checked_step(&mut f, &dev, 0);
        checked_step(&mut f, &dev, 1);
        assert_eq!(f.wait_graphs(BUILD_WAIT), GraphBuild::Ready, "{dev}");
        assert_eq!(checked_step(&mut f, &dev, 2), Some(1), "{dev}");
    }
}

/// A batch whose compile fails (no compile cache, compiling forbidden by `ASSERT_COMPILE`; the
/// kernels were compiled by the first call) stays on host calls with eager results: built in the
/// background it reports `Failed` and counts no entry call; built at capture
/// (`CPU_GRAPH_SYNC=1`) the device falls back to the host-call graph.
#[test]
fn a_batch_that_fails_to_compile_stays_on_host_calls() {
    for dev in batch_graph_devices() {
        for sync in [0, 1] {
            let mut f = TinyJit::new(batch_step);
            checked_step(&mut f, &dev, 0);
            {
                let _c = Context::new(&[
                    ("CACHELEVEL", 0),
                    ("ASSERT_COMPILE", 1),
                    ("CPU_GRAPH_SYNC", sync),
                ]);
                checked_step(&mut f, &dev, 1);
            }
            let what = format!("{dev} sync={sync}");
            let cache = f.jit_cache();
            assert_eq!(cache.len(), 1, "{what}: one graph");
            if sync == 0 {
                assert_eq!(f.wait_graphs(BUILD_WAIT), GraphBuild::Failed, "{what}");
                for call in 2..5 {
                    assert_eq!(checked_step(&mut f, &dev, call), Some(0), "{what} {call}");
                }
            } else {
                assert_eq!(
                    graph_calls(f.jit_cache()),
                    None,
                    "{what}: the host-call graph"
                );
                for call in 2..5 {
                    assert_eq!(checked_step(&mut f, &dev, call), None, "{what} {call}");
                }
            }
        }
    }
}

/// A batch the compile cache holds is loaded at capture: the graph is ready when the capture
/// returns (no build thread, even with builds held) and the first replay is one call.
#[test]
fn a_cached_batch_is_loaded_at_capture() {
    if rawgrad::helpers::getenv("CACHELEVEL", 2) == 0 {
        return; // the disk cache is off in this environment
    }
    for dev in batch_graph_devices() {
        let mut first = TinyJit::new(batch_step);
        checked_step(&mut first, &dev, 0);
        checked_step(&mut first, &dev, 1);
        assert_eq!(first.wait_graphs(BUILD_WAIT), GraphBuild::Ready, "{dev}");
        drop(first);
        let held = hold_builds();
        let mut f = TinyJit::new(batch_step);
        checked_step(&mut f, &dev, 0);
        checked_step(&mut f, &dev, 1);
        assert_eq!(f.wait_graphs(Duration::ZERO), GraphBuild::Ready, "{dev}");
        assert_eq!(checked_step(&mut f, &dev, 2), Some(1), "{dev}");
        assert_eq!(
            held.passed() + held.cancelled(),
            0,
            "{dev}: no build thread"
        );
    }
}
