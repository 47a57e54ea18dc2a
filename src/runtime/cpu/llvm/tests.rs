use super::*;
use crate::device::{Allocator, BufferOptions, HostAllocator};
use crate::ffi::llvm::find_libraries;
use crate::helpers::Context;

/// `out[0] = in[0] + exp2(vals[0])` with the `_rg` entry ABI, opaque pointers (LLVM >= 15).
const ADD_IR: &str = r#"
define void @add_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) {
entry:
  %p0 = load ptr, ptr %bufs
  %q = getelementptr ptr, ptr %bufs, i64 1
  %p1 = load ptr, ptr %q
  %n = load i32, ptr %vals
  %x = load float, ptr %p1
  %y = sitofp i32 %n to float
  %z = call float @llvm.exp2.f32(float %y)
  %s = fadd float %x, %z
  store float %s, ptr %p0
  ret void
}
declare float @llvm.exp2.f32(float)
"#;

/// The same with typed pointers (LLVM 14).
const ADD_IR_TYPED: &str = r#"
define void @add_rg(float** %bufs, i32* %vals, i32 %core, i32 %ncores) {
entry:
  %p0 = load float*, float** %bufs
  %q = getelementptr float*, float** %bufs, i64 1
  %p1 = load float*, float** %q
  %n = load i32, i32* %vals
  %x = load float, float* %p1
  %y = sitofp i32 %n to float
  %z = call float @llvm.exp2.f32(float %y)
  %s = fadd float %x, %z
  store float %s, float* %p0
  ret void
}
declare float @llvm.exp2.f32(float)
"#;

/// Every installed libLLVM (one per major version) at every pipeline.
fn compilers() -> Vec<LLVMCompiler> {
    let mut out: Vec<LLVMCompiler> = vec![];
    for l in find_libraries() {
        if out.iter().any(|c| c.llvm().version().major == l.major) {
            continue;
        }
        let Ok(llvm) = Llvm::open(&l.path) else {
            continue;
        };
        for opt in [
            LlvmOpt::None,
            LlvmOpt::Light,
            LlvmOpt::Default(2),
            LlvmOpt::Default(3),
        ] {
            out.push(LLVMCompiler::with_opt(Arc::clone(&llvm), opt).unwrap());
        }
    }
    if out.is_empty() {
        println!("skipped: no libLLVM");
    }
    out
}

fn ir_for(c: &LLVMCompiler, opaque: &str, typed: &str) -> String {
    if c.llvm().opaque_pointers() {
        opaque
    } else {
        typed
    }
    .to_string()
}

/// The little-endian 32-bit words of a kernel's output bytes.
fn words(out: &[u8]) -> Vec<u32> {
    out.chunks(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// The IR of the module `ir` after `c`'s passes (its options, as `compile` runs them).
fn passed_ir(c: &LLVMCompiler, ir: &str) -> String {
    let opt = c
        .llvm()
        .compile_linked(&[ir], c.options(), Emit::Ir)
        .unwrap();
    String::from_utf8(opt).unwrap()
}

/// Run a one-input, one-output kernel `name` from `obj` on `input` (four-byte elements).
fn run(
    c: &LLVMCompiler,
    name: &str,
    obj: &[u8],
    input: &[u8],
    out_len: usize,
    vals: &[i64],
) -> Vec<u8> {
    let prg = c.runtime().load(name, obj).unwrap();
    let h = HostAllocator;
    let o = BufferOptions::default();
    let (out, inp) = (
        h.alloc(out_len, &o).unwrap(),
        h.alloc(input.len(), &o).unwrap(),
    );
    h.copyin(&inp, input).unwrap();
    let _g = Context::new(&[("CLANG_THREADS", 1)]);
    prg.call(&[out.clone(), inp], vals, None, None, false)
        .unwrap();
    let mut b = vec![0u8; out_len];
    h.copyout(&mut b, &out).unwrap();
    b
}

#[test]
fn compiles_loads_and_runs_calling_libm() {
    for c in compilers() {
        let ir = ir_for(&c, ADD_IR, ADD_IR_TYPED);
        assert!(c.cache_key().unwrap().contains(&c.llvm().host_cpu()));
        let obj = c.compile(&ir).unwrap_or_else(|e| panic!("{e}\n{ir}"));
        let got = run(&c, "add", &obj, &1.5f32.to_le_bytes(), 4, &[3]);
        assert_eq!(
            f32::from_le_bytes(got.try_into().unwrap()),
            9.5,
            "{:?}",
            c.pipeline()
        );
    }
}

/// Half <-> float <-> double conversions on a CPU without F16C, where LLVM calls its runtime
/// helpers (whose names and ABI changed in LLVM 15): out = [f32(h), f32(half(f64 d)), half(f)].
#[test]
fn half_conversion_helpers_on_a_generic_cpu() {
    const TYPED: &str = r#"
define void @cvt_rg(i8** %bufs, i32* %vals, i32 %core, i32 %ncores) {
entry:
  %po = load i8*, i8** %bufs
  %q = getelementptr i8*, i8** %bufs, i64 1
  %pi = load i8*, i8** %q
  %hp = bitcast i8* %pi to half*
  %h = load half, half* %hp
  %f = fpext half %h to float
  %fo = bitcast i8* %po to float*
  store float %f, float* %fo
  %dp8 = getelementptr i8, i8* %pi, i64 8
  %dp = bitcast i8* %dp8 to double*
  %d = load double, double* %dp
  %dh = fptrunc double %d to half
  %df = fpext half %dh to float
  %o1 = getelementptr float, float* %fo, i64 1
  store float %df, float* %o1
  %ff = fadd float %f, 1.0
  %fh = fptrunc float %ff to half
  %o2 = getelementptr float, float* %fo, i64 2
  %o2h = bitcast float* %o2 to half*
  store half %fh, half* %o2h
  ret void
}
"#;
    const OPAQUE: &str = r#"
define void @cvt_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) {
entry:
  %po = load ptr, ptr %bufs
  %q = getelementptr ptr, ptr %bufs, i64 1
  %pi = load ptr, ptr %q
  %h = load half, ptr %pi
  %f = fpext half %h to float
  store float %f, ptr %po
  %dp = getelementptr i8, ptr %pi, i64 8
  %d = load double, ptr %dp
  %dh = fptrunc double %d to half
  %df = fpext half %dh to float
  %o1 = getelementptr float, ptr %po, i64 1
  store float %df, ptr %o1
  %ff = fadd float %f, 1.0
  %fh = fptrunc float %ff to half
  %o2 = getelementptr float, ptr %po, i64 2
  store half %fh, ptr %o2
  ret void
}
"#;
    for c in compilers()
        .into_iter()
        .filter(|c| c.pipeline() == &Pipeline::of(LlvmOpt::None))
    {
        let mut generic = c.clone();
        generic.opts.cpu = "x86-64".into();
        generic.opts.features = String::new();
        if !c.opts.triple.starts_with("x86_64") {
            generic = c.clone();
        }
        let obj = generic.compile(&ir_for(&c, OPAQUE, TYPED)).unwrap();
        let plan = objload::Plan::new(&obj).unwrap();
        println!("LLVM {}: calls {:?}", c.llvm().version(), plan.externals());
        let mut input = vec![0u8; 16];
        input[..2].copy_from_slice(&half::f16::from_f32(1.5).to_bits().to_le_bytes());
        input[8..].copy_from_slice(&(1.0f64 / 3.0).to_le_bytes());
        let out = run(&c, "cvt", &obj, &input, 12, &[]);
        let f = |i: usize| f32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(f(0), 1.5, "LLVM {}", c.llvm().version());
        assert_eq!(
            f(1),
            half::f16::from_f64(1.0 / 3.0).to_f32(),
            "LLVM {}",
            c.llvm().version()
        );
        let h2 = u16::from_le_bytes([out[8], out[9]]);
        assert_eq!(
            h2,
            half::f16::from_f32(2.5).to_bits(),
            "LLVM {}",
            c.llvm().version()
        );
    }
}

#[test]
fn cache_keys_name_the_pipeline() {
    let cs = compilers();
    let mut keys: Vec<String> = cs.iter().map(|c| c.cache_key().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), cs.len());
    let _g = Context::new(&[("LLVMOPT", 7)]);
    assert!(LlvmOpt::from_env()
        .unwrap_err()
        .message()
        .contains("LLVMOPT=7"));
}

/// Four lanes of `(x + 1e8) - 1e8` and four of `a*b + c`, as the renderer writes upcast lanes
/// (scalar lines the SLP vectorizer may turn into vector instructions). `{P}` is the float
/// pointer type, `{PP}` the pointer-to-pointer type.
const LANES_IR: &str = r#"
define void @lanes_rg({PP} %bufs, i32* %vals, i32 %core, i32 %ncores) {
entry:
  %po = load {P}, {PP} %bufs
  %q = getelementptr {P}, {PP} %bufs, i64 1
  %pi = load {P}, {PP} %q
BODY  ret void
}
"#;

fn lanes_ir(c: &LLVMCompiler) -> String {
    let mut body = String::new();
    let p = "float*";
    for i in 0..4 {
        let ld = |n: &str, at: usize| {
            format!(
                "  %{n}{i}.p = getelementptr float, {p} %pi, i64 {at}\n  \
                 %{n}{i} = load float, {p} %{n}{i}.p\n"
            )
        };
        body += &ld("x", i);
        body += &format!("  %s{i} = fadd float %x{i}, 1.0e8\n  %d{i} = fsub float %s{i}, 1.0e8\n");
        body += &format!(
            "  %o{i}.p = getelementptr float, {p} %po, i64 {i}\n  store float %d{i}, {p} %o{i}.p\n"
        );
        body += &ld("a", 4 + i);
        body += &ld("b", 8 + i);
        body += &ld("c", 12 + i);
        body += &format!("  %m{i} = fmul float %a{i}, %b{i}\n  %f{i} = fadd float %m{i}, %c{i}\n");
        body += &format!(
            "  %g{i}.p = getelementptr float, {p} %po, i64 {}\n  store float %f{i}, {p} %g{i}.p\n",
            4 + i
        );
    }
    let ir = LANES_IR.replace("BODY", &body);
    let ir = ir.replace("{PP}", "float**").replace("{P}", "float*");
    if c.llvm().opaque_pointers() {
        ir.replace("float**", "ptr")
            .replace("float*", "ptr")
            .replace("i32*", "ptr")
    } else {
        ir
    }
}

/// No pipeline regroups (`(x + 1e8) - 1e8` is not `x`) or contracts (`a*b + c` rounds the
/// product): equal expressions give the same bits in every kernel, on every libLLVM and level.
#[test]
fn pipelines_neither_reassociate_nor_contract() {
    let e = 1.0 + f32::powi(2.0, -12);
    let x = [1.25f32, 3.7, -2.5, 6.0];
    let (a, b, cc) = (
        [e, 3.1, e, 0.3],
        [e, 7.7, e, 0.7],
        [-1.0f32, 0.1, -1.0, 0.9],
    );
    let input: Vec<u8> = x
        .iter()
        .chain(&a)
        .chain(&b)
        .chain(&cc)
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut want: Vec<u32> = x
        .iter()
        .map(|v| ((v + 1e8f32) - 1e8f32).to_bits())
        .collect();
    want.extend((0..4).map(|i| (a[i] * b[i] + cc[i]).to_bits()));
    assert_ne!(
        want[4],
        e.mul_add(e, -1.0).to_bits(),
        "the fma case must differ"
    );
    for c in compilers() {
        let ir = lanes_ir(&c);
        let obj = c.compile(&ir).unwrap_or_else(|e| panic!("{e}\n{ir}"));
        let out = run(&c, "lanes", &obj, &input, 32, &[]);
        let got = words(&out);
        assert_eq!(got, want, "LLVM {} {:?}", c.llvm().version(), c.pipeline());
    }
}

/// The default pipeline (`LLVMOPT` unset) and what it may never contain; the overrides of
/// [`Pipeline::from_env`] and their errors.
#[test]
fn default_pipeline_and_overrides() {
    let p = Pipeline::from_env().unwrap();
    assert_eq!(p, Pipeline::of(LlvmOpt::Light));
    assert_eq!(p.passes.as_deref(), Some(LIGHT_PASSES));
    assert_eq!((p.codegen, p.isel), (DEFAULT_CODEGEN, Isel::Default));
    // the equal-bits rule: nothing that regroups floats or rewrites loops into other orders
    for banned in ["reassociate", "loop-vectorize", "default<", "unroll"] {
        assert!(!LIGHT_PASSES.contains(banned), "{banned} in {LIGHT_PASSES}");
        assert!(!LIGHT_PASSES_VECTOR_ONLY.contains(banned), "{banned}");
    }
    // the vector-only pipeline is the light one less SLP
    assert_eq!(
        LIGHT_PASSES.replace(",slp-vectorizer", ""),
        LIGHT_PASSES_VECTOR_ONLY
    );
    {
        let _g = Context::with_str(&[
            ("LLVM_PASSES", "function(instcombine)"),
            ("LLVM_CODEGEN", "1"),
            ("LLVM_ISEL", "fast"),
        ]);
        let p = Pipeline::from_env().unwrap();
        assert_eq!(p.passes.as_deref(), Some("function(instcombine)"));
        assert_eq!((p.codegen, p.isel), (1, Isel::Fast));
    }
    {
        let _g = Context::with_str(&[("LLVM_PASSES", "none"), ("LLVMOPT", "3")]);
        let p = Pipeline::from_env().unwrap();
        assert_eq!((p.passes, p.codegen), (None, 3));
    }
    for (k, v) in [("LLVM_CODEGEN", "4"), ("LLVM_ISEL", "slow")] {
        let _g = Context::with_str(&[(k, v)]);
        let e = Pipeline::from_env().unwrap_err().message().to_string();
        assert!(e.contains(&format!("{k}={v}")), "{e}");
    }
}

/// Codegen level and instruction selector are part of the cache key.
#[test]
fn cache_keys_name_codegen_level_and_isel() {
    let Some(l) = find_libraries().into_iter().next() else {
        println!("skipped: no libLLVM");
        return;
    };
    let llvm = Llvm::open(&l.path).unwrap();
    let base = Pipeline::of(LlvmOpt::Light);
    let mut keys = vec![];
    for (codegen, isel) in [(1, Isel::Default), (2, Isel::Default), (2, Isel::Fast)] {
        let p = Pipeline {
            codegen,
            isel,
            ..base.clone()
        };
        let c = LLVMCompiler {
            llvm: Arc::clone(&llvm),
            opts: CompileOptions::new("x86_64", "", "", false),
            pipeline: p,
        };
        keys.push(c.cache_key().unwrap());
    }
    keys.dedup();
    assert_eq!(keys.len(), 3, "{keys:?}");
}

/// The warm-up compiles at every pipeline of every installed libLLVM (typed and opaque pointers
/// alike), and a pipeline the library cannot run fails there, naming the pipeline and the pass.
#[test]
fn warm_up_runs_every_pipeline_and_names_a_bad_one() {
    for c in compilers() {
        c.warm_up()
            .unwrap_or_else(|e| panic!("LLVM {} {:?}: {e}", c.llvm().version(), c.pipeline()));
    }
    let Some(l) = find_libraries().into_iter().next() else {
        println!("skipped: no libLLVM");
        return;
    };
    let llvm = Llvm::open(&l.path).unwrap();
    let bad = Pipeline {
        passes: Some("function(no-such-pass)".into()),
        ..Pipeline::of(LlvmOpt::Light)
    };
    let c = LLVMCompiler::with_pipeline(llvm, bad).unwrap();
    let e = c.warm_up().unwrap_err().message().to_string();
    assert!(e.contains("no-such-pass") && e.contains("pipeline"), "{e}");
}

/// The stage split of a compile covers the stages that ran: IR parse, passes and codegen each
/// took time, and none is negative; a compile without passes spends nothing in them.
#[test]
fn stage_times_split_a_compile() {
    let Some(c) = compilers()
        .into_iter()
        .find(|c| c.pipeline().passes.is_some())
    else {
        println!("skipped: no libLLVM");
        return;
    };
    let ir = ir_for(&c, ADD_IR, ADD_IR_TYPED);
    let mut st = crate::ffi::llvm::StageTimes::default();
    for _ in 0..3 {
        c.llvm()
            .compile_linked_timed(&[&ir], c.options(), Emit::Object, &mut st)
            .unwrap();
    }
    let all = [
        st.context,
        st.parse,
        st.link_verify,
        st.machine,
        st.passes,
        st.codegen,
    ];
    assert!(all.iter().all(|t| *t >= 0.0), "{st:?}");
    assert!(
        st.parse > 0.0 && st.passes > 0.0 && st.codegen > 0.0,
        "{st:?}"
    );
    let none = CompileOptions {
        passes: None,
        ..c.options().clone()
    };
    let mut st = crate::ffi::llvm::StageTimes::default();
    c.llvm()
        .compile_linked_timed(&[&ir], &none, Emit::Object, &mut st)
        .unwrap();
    assert!(st.passes < 1e-3 && st.codegen > 0.0, "{st:?}");
}

/// `data0[i] = exp2(data1[i])` for `i < 16`: sixteen scalar EXP2 lanes, as an upcast kernel's
/// lanes reach the renderer.
fn exp2_lanes_uops() -> Vec<crate::codegen::uops::UOp> {
    use crate::codegen::uops::UOp;
    use crate::dtype::dtypes;
    use crate::ops::UnaryOps;
    let (f, i) = (dtypes::float32, dtypes::int32);
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let mut uops = vec![d0.clone(), d1.clone()];
    for lane in 0..16 {
        let idx = UOp::cnst(i, lane);
        let x = UOp::load(&d1, &idx, f);
        let e = UOp::alu(UnaryOps::EXP2, f, vec![x.clone()]);
        let st = UOp::store(&d0, &idx, &e);
        uops.extend([idx, x, e, st]);
    }
    uops
}

/// Sixteen EXP2 inputs with the edges (signed zero, subnormal and overflow boundaries, the
/// infinities, NaN) as the kernel's input bytes, and the interpreter's reference bits of each.
fn exp2_edge_case() -> (Vec<u8>, Vec<u32>) {
    use crate::renderer::exp2::exp2f;
    let x = [
        0.0f32,
        -0.0,
        0.5,
        -1.25,
        3.75,
        -149.5,
        -150.0,
        -152.0,
        -200.0,
        128.5,
        129.0,
        1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -126.3,
    ];
    let input = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let want = x.iter().map(|v| exp2f(*v).to_bits()).collect();
    (input, want)
}

/// Scalar EXP2 lanes render as calls of the `rg_exp2_f32` helper that the light pipeline's SLP
/// vectorizer bundles into a vector helper (vector `llvm.fma` in the IR after the passes), and
/// that `always-inline` and `globaldce` leave no call or helper of; every pipeline computes the
/// bits of the interpreter's reference (`renderer::exp2::exp2f`), edges included.
#[test]
fn exp2_lanes_vectorize_inline_and_keep_the_bits() {
    use crate::renderer::llvmir::LLVMRenderer;
    use crate::renderer::Renderer;
    let (input, want) = exp2_edge_case();
    for c in compilers() {
        let r = LLVMRenderer::cpu(c.llvm().opaque_pointers());
        let ir = r.render("lanes", &exp2_lanes_uops()).unwrap();
        assert!(ir.contains("call float @rg_exp2_f32(float "), "{ir}");
        let obj = c.compile(&ir).unwrap_or_else(|e| panic!("{e}\n{ir}"));
        let out = run(&c, "lanes", &obj, &input, 64, &[]);
        let got = words(&out);
        assert_eq!(got, want, "LLVM {} {:?}", c.llvm().version(), c.pipeline());
        if *c.pipeline() == Pipeline::of(LlvmOpt::Light) {
            let opt = passed_ir(&c, &ir);
            assert!(opt.contains("x double> @llvm.fma.v"), "{opt}");
            assert!(!opt.contains("@rg_exp2"), "{opt}");
        }
    }
}

/// `data0[0..4] = exp2(data1[0..4])` as one vector EXP2 (its module defines only the 4-lane
/// helper).
fn exp2_vec4_uops() -> Vec<crate::codegen::uops::UOp> {
    use crate::codegen::uops::UOp;
    use crate::dtype::dtypes;
    use crate::ops::UnaryOps;
    let (f, f4) = (dtypes::float32, dtypes::float32.vec(4));
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let idx = UOp::cnst(dtypes::int32, 0);
    let x = UOp::load(&d1, &idx, f4);
    let e = UOp::alu(UnaryOps::EXP2, f4, vec![x.clone()]);
    let st = UOp::store(&d0, &idx, &e);
    vec![d0, d1, idx, x, e, st]
}

/// A batch source (the CPU graph's modules joined by [`MODULE_SEPARATOR`]) whose modules each
/// define EXP2 helpers of the same names links (the internal duplicates are renamed; a call
/// site's vector forms resolve to the first module's, the same code) and computes the
/// reference bits, with the scalar-lane module first or second.
#[test]
fn linked_modules_with_exp2_helpers_keep_the_bits() {
    use crate::renderer::exp2::exp2f;
    use crate::renderer::llvmir::LLVMRenderer;
    use crate::renderer::Renderer;
    let x: Vec<f32> = (0..16).map(|k| k as f32 * 1.7 - 13.1).collect();
    let input: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let want: Vec<u32> = x.iter().map(|v| exp2f(*v).to_bits()).collect();
    for c in compilers() {
        let r = LLVMRenderer::cpu(c.llvm().opaque_pointers());
        let lanes = r.render("lanes", &exp2_lanes_uops()).unwrap();
        let vec4 = r.render("vec4", &exp2_vec4_uops()).unwrap();
        for src in [
            [lanes.as_str(), vec4.as_str()].join(MODULE_SEPARATOR),
            [vec4.as_str(), lanes.as_str()].join(MODULE_SEPARATOR),
        ] {
            let obj = c.compile(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
            for (name, n) in [("lanes", 16), ("vec4", 4)] {
                let out = run(&c, name, &obj, &input, 4 * n, &[]);
                let got = words(&out);
                assert_eq!(
                    got,
                    want[..n],
                    "{name} LLVM {} {:?}",
                    c.llvm().version(),
                    c.pipeline()
                );
            }
        }
    }
}

/// Vector EXP2s after a loop that call the out-of-line helper (`renderer/llvmir/exp2.rs`) keep
/// the interpreter's reference bits on every pipeline, and the light pipeline leaves the helper
/// a call (one expansion in the machine code).
#[test]
fn outlined_exp2_keeps_the_bits_and_stays_a_call() {
    use crate::codegen::uops::UOp;
    use crate::dtype::dtypes;
    use crate::ops::UnaryOps;
    use crate::renderer::llvmir::LLVMRenderer;
    use crate::renderer::Renderer;
    let (f, f4, i) = (dtypes::float32, dtypes::float32.vec(4), dtypes::int32);
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let r = UOp::range_const(0, 1, 1, 0, false);
    let (lo, hi) = (r.src()[0].clone(), r.src()[1].clone());
    let mut uops = vec![d0.clone(), d1.clone(), lo, hi, r.clone(), UOp::endrange(&r)];
    for k in 0..4 {
        let idx = UOp::cnst(i, 4 * k);
        let x = UOp::load(&d1, &idx, f4);
        let e = UOp::alu(UnaryOps::EXP2, f4, vec![x.clone()]);
        let st = UOp::store(&d0, &idx, &e);
        uops.extend([idx, x, e, st]);
    }
    let (input, want) = exp2_edge_case();
    for c in compilers() {
        let ir = LLVMRenderer::cpu(c.llvm().opaque_pointers())
            .render("epi", &uops)
            .unwrap();
        assert!(ir.contains("@rg_exp2_f32_v4_outlined("), "{ir}");
        // vector-only: the light pipeline compiles it without SLP
        assert!(ir.starts_with(VECTOR_ONLY_MARK), "{ir}");
        let obj = c.compile(&ir).unwrap_or_else(|e| panic!("{e}\n{ir}"));
        let out = run(&c, "epi", &obj, &input, 64, &[]);
        let got = words(&out);
        assert_eq!(got, want, "LLVM {} {:?}", c.llvm().version(), c.pipeline());
        if *c.pipeline() == Pipeline::of(LlvmOpt::Light) {
            let opt = passed_ir(&c, &ir);
            let calls = opt
                .matches("call <4 x float> @rg_exp2_f32_v4_outlined(")
                .count();
            assert_eq!(calls, 4, "{opt}");
        }
    }
}

/// The light pipeline drops SLP for a source whose modules all carry the vector-only mark (one
/// kernel, or a batch of such kernels with its marked entry); any unmarked module, or another
/// `LLVMOPT` level, keeps the pipeline as it is.
#[test]
fn vector_only_sources_compile_without_slp_at_the_light_level() {
    let marked = format!("{VECTOR_ONLY_MARK}\ndefine void @k() {{\n  ret void\n}}\n");
    let plain = "define void @p() {\n  ret void\n}\n";
    for c in compilers() {
        let base = c.options().passes.clone();
        let light = *c.pipeline() == Pipeline::of(LlvmOpt::Light);
        let only = c.options_for(&[&marked, &marked]).passes.clone();
        if light {
            assert_eq!(only.as_deref(), Some(LIGHT_PASSES_VECTOR_ONLY));
            assert!(!LIGHT_PASSES_VECTOR_ONLY.contains("slp"));
        } else {
            assert_eq!(only, base, "{:?}", c.pipeline());
        }
        assert_eq!(c.options_for(&[&marked, plain]).passes, base);
        assert_eq!(c.options_for(&[plain]).passes, base);
        c.compile(&marked).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The assembly of the function `name` in `asm`: from its label to LLVM's end-of-function label.
fn function_asm<'a>(asm: &'a str, name: &str) -> &'a str {
    let start = asm
        .find(&format!("\n{name}:"))
        .unwrap_or_else(|| panic!("no {name} in\n{asm}"));
    let len = asm[start..]
        .find(".Lfunc_end")
        .unwrap_or_else(|| panic!("no end of {name} in\n{asm}"));
    &asm[start..start + len]
}

/// The CPU entry `NAME_rg` is `optnone` (`renderer::llvmir::ENTRY_ATTRIBUTES`): at the levels that
/// do not inline (none, light) the kernel it calls gets the very machine code it got when the
/// entry shared the kernel's attributes, and the unoptimized entry still runs it right.
#[test]
fn optnone_entry_leaves_the_kernel_code_as_it_was() {
    use crate::renderer::llvmir::{LLVMRenderer, ENTRY_ATTRIBUTE_GROUP};
    use crate::renderer::Renderer;
    let (input, want) = exp2_edge_case();
    let levels = [Pipeline::of(LlvmOpt::None), Pipeline::of(LlvmOpt::Light)];
    for c in compilers()
        .into_iter()
        .filter(|c| levels.contains(c.pipeline()))
    {
        let r = LLVMRenderer::cpu(c.llvm().opaque_pointers());
        let ir = r.render("lanes", &exp2_lanes_uops()).unwrap();
        let group = format!(" #{ENTRY_ATTRIBUTE_GROUP} {{");
        assert!(ir.contains(&format!("%ncores){group}")), "{ir}");
        assert!(ir.contains(" optnone "), "{ir}");
        let shared = ir.replacen(&group, " #0 {", 1);
        let (new, old) = (c.assembly(&ir).unwrap(), c.assembly(&shared).unwrap());
        let what = format!("LLVM {} {:?}", c.llvm().version(), c.pipeline());
        assert_eq!(
            function_asm(&new, "lanes"),
            function_asm(&old, "lanes"),
            "{what}"
        );
        let obj = c.compile(&ir).unwrap();
        assert_eq!(
            words(&run(&c, "lanes", &obj, &input, 64, &[])),
            want,
            "{what}"
        );
    }
}

/// Before LLVM 15 an x86 host's `avx512fp16` is turned off (its half math aborts LLVM 14's
/// instruction selection); every other feature, and every feature for LLVM 15+, is kept.
#[test]
fn llvm_14_compiles_without_avx512fp16() {
    let host = "+sse2,+avx512f,+avx512fp16,-amx-tile";
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            compile_features(14, host),
            "+sse2,+avx512f,-avx512fp16,-amx-tile"
        );
    }
    assert_eq!(compile_features(15, host), host);
    assert_eq!(compile_features(14, "+sse2,+avx2"), "+sse2,+avx2");
}
