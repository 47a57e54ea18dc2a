//! Shared helpers of the linearizer integration tests: an AST builder, the INTERP-like renderer
//! (tinygrad's PYTHON device defaults), deterministic input data, and runners that evaluate a
//! kernel with the reference evaluator, on the UOp interpreter and as compiled CLANG C.

#![allow(dead_code)]

pub mod catalogue;

use std::sync::Arc;

use rawgrad::codegen::ast_eval::{buffer_nbytes, eval_kernel};
use rawgrad::codegen::kernel::{Kernel, Opt};
use rawgrad::codegen::program::ProgramSpec;
use rawgrad::codegen::uop_serial::serialize;
use rawgrad::codegen::uops::UOp;
use rawgrad::device::registry::Compiled;
use rawgrad::device::{Allocator, BufferOptions, Compiler, HostAllocator, Program, Runtime};
use rawgrad::dtype::{ConstValue, DType, Scalar};
use rawgrad::helpers::getenv;
use rawgrad::interp::InterpProgram;
use rawgrad::ops::{
    const_from_bits, const_to_bits, BinaryOps, ConstArg, LazyOp, LazyOpArg, Op, ReduceOps,
    TernaryOps, UnaryOps,
};
use rawgrad::renderer::cstyle::ClangRenderer;
use rawgrad::renderer::{Renderer, RendererOpts};
use rawgrad::runtime::builtin::open_device;
use rawgrad::runtime::cpu::clang::{ClangCompiler, ClangRuntime};
use rawgrad::shape::{sints, Node, ShapeTracker, Sint, VarVals};
use rawgrad::{Error, Result};

// ---------------------------------------------------------------------------------------------
// AST builder

pub fn st(shape: &[i64]) -> ShapeTracker {
    ShapeTracker::from_shape(&sints(shape)).unwrap()
}
pub fn st_sym(shape: &[Sint]) -> ShapeTracker {
    ShapeTracker::from_shape(shape).unwrap()
}
pub fn ld(idx: usize, dt: DType, st: ShapeTracker) -> LazyOp {
    LazyOp::load(idx, dt, st)
}
pub fn cst(v: impl Into<ConstValue>, dt: DType, st: ShapeTracker) -> LazyOp {
    LazyOp::cnst(ConstArg::Value(v.into()), dt, st)
}
pub fn un(op: UnaryOps, x: LazyOp) -> LazyOp {
    LazyOp::new(op, vec![x], LazyOpArg::None)
}
pub fn bin(op: BinaryOps, a: LazyOp, b: LazyOp) -> LazyOp {
    LazyOp::new(op, vec![a, b], LazyOpArg::None)
}
pub fn wher(c: LazyOp, a: LazyOp, b: LazyOp) -> LazyOp {
    LazyOp::new(TernaryOps::WHERE, vec![c, a, b], LazyOpArg::None)
}
pub fn cast(x: LazyOp, dt: DType) -> LazyOp {
    LazyOp::new(UnaryOps::CAST, vec![x], LazyOpArg::DType(dt))
}
pub fn bitcast(x: LazyOp, dt: DType) -> LazyOp {
    LazyOp::new(UnaryOps::BITCAST, vec![x], LazyOpArg::DType(dt))
}
pub fn red(op: ReduceOps, x: LazyOp, axis: &[usize]) -> LazyOp {
    LazyOp::new(op, vec![x], LazyOpArg::Axis(axis.to_vec()))
}
pub fn store(x: LazyOp, idx: usize, dt: DType, st: ShapeTracker) -> LazyOp {
    LazyOp::store(x, idx, dt, st)
}

// ---------------------------------------------------------------------------------------------
// Renderers

/// tinygrad's PYTHON device defaults: locals, shared memory, float4, generous launch limits.
pub fn interp_opts() -> RendererOpts {
    RendererOpts {
        device: "INTERP".into(),
        suffix: "INTERP".into(),
        supports_float4: true,
        has_local: true,
        has_shared: true,
        global_max: Some([0x8FFFFFFF; 3]),
        local_max: Some([0x8FFFFFFF; 3]),
        shared_max: 32768,
        tensor_cores: vec![],
        vector_alu: rawgrad::codegen::renderer::VectorAlu::None,
    }
}

/// The INTERP "renderer": its source is the serialized UOp list.
pub struct InterpRenderer(pub RendererOpts);

impl InterpRenderer {
    pub fn new() -> InterpRenderer {
        InterpRenderer(interp_opts())
    }
}

impl Renderer for InterpRenderer {
    fn opts(&self) -> &RendererOpts {
        &self.0
    }
    fn render(&self, _name: &str, uops: &[UOp]) -> Result<String> {
        serialize(uops)
    }
}

// ---------------------------------------------------------------------------------------------
// Data

pub type Buffers = Vec<Vec<u8>>;

/// A deterministic value for element `i` of buffer `b` (small, exactly representable).
pub fn default_value(b: usize, i: usize, dt: DType) -> ConstValue {
    let x = ((i * 37 + b * 11 + 5) % 29) as i64 - 14;
    match dt.scalar {
        Scalar::Bool => ConstValue::Bool(x % 3 == 0),
        s if s.is_float() => ConstValue::Float(x as f64 * 0.25),
        s if s.is_unsigned() => ConstValue::Int((x + 14) as i128),
        _ => ConstValue::Int(x as i128),
    }
}

pub fn encode(vals: &[ConstValue], dt: DType) -> Vec<u8> {
    let size = dt.itemsize();
    let mut out = Vec::with_capacity(vals.len() * size);
    for v in vals {
        let bits = const_to_bits(v.truncate(dt), dt.scalar);
        out.extend_from_slice(&bits.to_le_bytes()[..size]);
    }
    out
}

pub fn decode(bytes: &[u8], dt: DType) -> Vec<ConstValue> {
    bytes
        .chunks(dt.itemsize())
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..c.len()].copy_from_slice(c);
            const_from_bits(u64::from_le_bytes(raw), dt.scalar)
        })
        .collect()
}

/// A value generator: (buffer index, element index, dtype) -> value.
pub type Gen = fn(usize, usize, DType) -> ConstValue;

/// One test kernel: its AST, variable values and input data.
#[derive(Clone)]
pub struct Case {
    pub name: &'static str,
    pub ast: Vec<LazyOp>,
    pub var_vals: VarVals,
    pub data: Gen,
}

impl Case {
    pub fn new(name: &'static str, ast: Vec<LazyOp>) -> Case {
        Case {
            name,
            ast,
            var_vals: VarVals::new(),
            data: default_value,
        }
    }

    pub fn with_vars(mut self, vv: &[(&Node, i64)]) -> Case {
        for (v, x) in vv {
            self.var_vals.insert((*v).clone(), *x);
        }
        self
    }

    pub fn with_data(mut self, g: Gen) -> Case {
        self.data = g;
        self
    }

    /// (buffer index, dtype) of every buffer the AST touches, by index.
    pub fn buffers(&self) -> Vec<(usize, DType)> {
        let mut out: Vec<(usize, DType)> = vec![];
        for root in &self.ast {
            for x in root.lazyops() {
                if let Some(m) = x.membuffer() {
                    if !out.iter().any(|b| b.0 == m.idx) {
                        out.push((m.idx, m.dtype));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Inputs filled with data, outputs zeroed.
    pub fn initial_buffers(&self) -> Buffers {
        let bufs = self.buffers();
        let n = bufs.iter().map(|b| b.0 + 1).max().unwrap_or(0);
        let mut out = vec![vec![]; n];
        for (idx, dt) in bufs {
            let nbytes = buffer_nbytes(&self.ast, idx, &self.var_vals).unwrap();
            let elems = nbytes / dt.itemsize();
            out[idx] = if idx < self.ast.len() {
                vec![0u8; nbytes]
            } else {
                let vals: Vec<ConstValue> = (0..elems).map(|i| (self.data)(idx, i, dt)).collect();
                encode(&vals, dt)
            };
        }
        out
    }

    pub fn reference(&self) -> Buffers {
        let mut b = self.initial_buffers();
        eval_kernel(&self.ast, &mut b, &self.var_vals)
            .unwrap_or_else(|e| panic!("{}: reference: {e}", self.name));
        b
    }

    pub fn out_dtype(&self, i: usize) -> DType {
        self.ast[i].membuffer().unwrap().dtype
    }
}

// ---------------------------------------------------------------------------------------------
// Runners

/// Linearize and render `case` with `opts` applied (each must be legal).
pub fn program(case: &Case, r: &dyn Renderer, opts: &[Opt]) -> Result<(Kernel, ProgramSpec)> {
    let mut k = Kernel::new(&case.ast, r.opts())?;
    k.apply_opts(opts)?;
    let p = k.to_program(r)?;
    Ok((k, p))
}

/// Run a rendered INTERP program on the case's initial buffers.
pub fn run_interp(case: &Case, p: &ProgramSpec) -> Result<Buffers> {
    let prog = InterpProgram::from_serialized(&p.function_name, &p.src)?;
    let (g, l) = p.launch_dims(&case.var_vals)?;
    let vals = p.var_values(&case.var_vals)?;
    let mut bufs = case.initial_buffers();
    prog.run(
        &mut bufs,
        &vals,
        g.unwrap_or([1, 1, 1]),
        l.unwrap_or([1, 1, 1]),
    )?;
    Ok(bufs)
}

/// The C compiler, or None (then the CLANG checks are skipped, saying so).
pub fn clang() -> Option<ClangCompiler> {
    match ClangCompiler::new() {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("no C compiler: skipping the CLANG checks ({e})");
            None
        }
    }
}

/// Compile and run a rendered CLANG program on the case's initial buffers.
pub fn run_clang(cc: &ClangCompiler, case: &Case, p: &ProgramSpec) -> Result<Buffers> {
    let lib = cc.compile(&p.src)?;
    let prog = ClangRuntime.load(&p.function_name, &lib)?;
    run_program(&*prog, case, p, &HostAllocator)
}

/// Run a loaded program of `p` on the case's initial buffers, allocated with `alloc` (launch
/// dims and variable values from the case).
pub fn run_program(
    prog: &dyn Program,
    case: &Case,
    p: &ProgramSpec,
    alloc: &dyn Allocator,
) -> Result<Buffers> {
    let (g, l) = p.launch_dims(&case.var_vals)?;
    let vals = p.var_values(&case.var_vals)?;
    let mut bufs = case.initial_buffers();
    let o = BufferOptions::default();
    let mut raws = vec![];
    for b in &bufs {
        let raw = alloc.alloc(b.len().max(1), &o)?;
        alloc.copyin(&raw, b)?;
        raws.push(raw);
    }
    prog.call(&raws, &vals, g, l, true)?;
    for (b, raw) in bufs.iter_mut().zip(&raws) {
        alloc.copyout(b, raw)?;
    }
    for (b, raw) in bufs.iter().zip(raws) {
        alloc.free(raw, b.len().max(1), &o);
    }
    Ok(bufs)
}

fn close(a: ConstValue, b: ConstValue, dt: DType, rtol: f64) -> bool {
    if !dt.is_float() {
        return a == b;
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    (x.is_nan() && y.is_nan())
        || x == y
        || (x - y).abs() <= rtol * x.abs().max(y.abs()) + rtol * 1e-2
}

/// Compare every output of `got` with `want` (ints exactly, floats within `rtol`).
pub fn assert_outputs(case: &Case, want: &Buffers, got: &Buffers, rtol: f64, what: &str) {
    for i in 0..case.ast.len() {
        let dt = case.out_dtype(i);
        let (w, g) = (decode(&want[i], dt), decode(&got[i], dt));
        assert_eq!(w.len(), g.len(), "{}: {what}: output {i} size", case.name);
        for (j, (a, b)) in w.iter().zip(&g).enumerate() {
            assert!(
                close(*a, *b, dt, rtol),
                "{}: {what}: output {i}[{j}] want {a:?} got {b:?}",
                case.name
            );
        }
    }
}

/// Tolerance for a case: exact for ints, looser for half and for reductions that may reorder.
pub fn rtol_for(case: &Case) -> f64 {
    let half = case.buffers().iter().any(|b| b.1.scalar == Scalar::Float16);
    if half {
        2e-3
    } else {
        2e-6
    }
}

/// Reference vs INTERP (and, when a C compiler exists, vs CLANG), unoptimized.
pub fn check_case(case: &Case, cc: Option<&ClangCompiler>) {
    let want = case.reference();
    let rtol = rtol_for(case);
    let ir = InterpRenderer::new();
    let (_, p) = program(case, &ir, &[]).unwrap_or_else(|e| panic!("{}: INTERP: {e}", case.name));
    let got = run_interp(case, &p).unwrap_or_else(|e| panic!("{}: INTERP run: {e}", case.name));
    assert_outputs(case, &want, &got, rtol, "INTERP");
    if let Some(cc) = cc {
        let r = ClangRenderer::new();
        let (_, p) = program(case, &r, &[]).unwrap_or_else(|e| panic!("{}: CLANG: {e}", case.name));
        let got = run_clang(cc, case, &p)
            .unwrap_or_else(|e| panic!("{}: CLANG run: {e}\n{}", case.name, p.src));
        assert_outputs(case, &want, &got, rtol.max(1e-6), "CLANG");
    }
}

/// Is this op one that pattern `f` accepts? (for picking cases)
pub fn has_op(case: &Case, f: impl Fn(Op) -> bool) -> bool {
    case.ast
        .iter()
        .any(|r| r.lazyops().iter().any(|x| f(x.op())))
}

/// The kernel with `opts` applied, or None when one is illegal (a KernelOpt error); any other
/// error fails the test, naming the case and the opt.
pub fn optimized(case: &Case, o: &RendererOpts, opts: &[Opt]) -> Option<Kernel> {
    let mut k = Kernel::new(&case.ast, o).unwrap();
    for opt in opts {
        match k.apply_opt(*opt) {
            Ok(()) => {}
            Err(Error::KernelOpt(_)) => return None,
            Err(e) => panic!("{} {opt}: {e}", case.name),
        }
    }
    Some(k)
}

/// The GPU of this run: the emulated one (`AMD=1 MOCKGPU=1` or `NV=1 MOCKGPU=1`), or the real
/// one under `AMD=1` / `NV=1` alone where its driver node (`/dev/kfd`, `/dev/nvidiactl`) exists.
pub fn gpu_under_test() -> Option<Arc<Compiled>> {
    let name = if getenv("AMD", 0) != 0 {
        "AMD"
    } else if getenv("NV", 0) != 0 {
        "NV"
    } else {
        println!("skipped: neither AMD=1 nor NV=1");
        return None;
    };
    if getenv("MOCKGPU", 0) == 0 {
        let node = if name == "AMD" {
            "/dev/kfd"
        } else {
            "/dev/nvidiactl"
        };
        if !std::path::Path::new(node).exists() {
            println!("skipped: {name}=1 without MOCKGPU=1, and no {node} on this machine");
            return None;
        }
    }
    Some(open_device(name).unwrap_or_else(|e| panic!("open {name}: {e}")))
}
