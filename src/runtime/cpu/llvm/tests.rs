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
            c.opt()
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
    for c in compilers().into_iter().filter(|c| c.opt() == LlvmOpt::None) {
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
