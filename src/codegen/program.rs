//! A linearized, rendered kernel ready for a device compiler (tinygrad 0.9.1 `Program`, here
//! [`ProgramSpec`]), the AST cost estimate (`FlopCounter` / `get_lazyop_info`) and
//! `Kernel::to_program`.
//!
//! Owns: the spec record (name, function name, source, UOps, symbolic launch sizes, variables,
//! outputs, estimates, applied opts), `launch_dims` (sizes evaluated with the variable values),
//! and the estimate rule of 0.9.1: ops = min(AST flops, ALU UOps x launch size), memory likewise.
//!
//! Not guaranteed: the estimates are tinygrad's heuristics (the AST counter reads only the first
//! output; later outputs' memory is not counted).

use std::collections::{HashMap, HashSet};

use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::renderer::Renderer;
use crate::codegen::uopgraph::{flops_mem, globals};
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::helpers::to_function_name;
use crate::ops::{BufferOps, LazyOp, LazyOpArg, Op, UnaryOps};
use crate::shape::symbolic::py_lt;
use crate::shape::{sint_prod, sym_infer, Node, Sint, VarVals};
use crate::{bail, ensure, Error, Result};

/// A kernel's source and launch description.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    /// The kernel name (`r_16_16`, `E_4n1`, `r_8_<i[1-10]>`).
    pub name: String,
    /// The name as a C identifier (`to_function_name`).
    pub function_name: String,
    /// The device the renderer targets.
    pub device: String,
    /// What the renderer produced.
    pub src: String,
    /// The linear UOp list the source was rendered from.
    pub uops: Vec<UOp>,
    /// Launch sizes, possibly symbolic (`None` when the kernel loops over its dims itself).
    pub global_size: Option<Vec<Sint>>,
    pub local_size: Option<Vec<Sint>>,
    /// The integer variables the kernel takes, sorted by name (the parameter order).
    pub vars: Vec<Node>,
    /// The buffer indices the kernel writes.
    pub outs: Vec<usize>,
    pub op_estimate: Sint,
    pub mem_estimate: Sint,
    pub applied_opts: Vec<Opt>,
}

/// A launch size evaluated with the variable values, padded to 3 axes.
fn dims3(sizes: &Option<Vec<Sint>>, var_vals: &VarVals, what: &str) -> Result<Option<[usize; 3]>> {
    let Some(s) = sizes else { return Ok(None) };
    ensure!(
        s.len() <= 3,
        Runtime,
        "launch_dims: {what} size has {} axes (max 3)",
        s.len()
    );
    let mut out = [1usize; 3];
    for (o, x) in out.iter_mut().zip(s) {
        let v = sym_infer(x, var_vals)?;
        *o = usize::try_from(v)
            .map_err(|_| Error::Runtime(format!("launch_dims: {what} size {x:?} = {v}")))?;
    }
    Ok(Some(out))
}

impl ProgramSpec {
    /// (global, local) launch sizes for these variable values.
    #[allow(clippy::type_complexity)]
    pub fn launch_dims(
        &self,
        var_vals: &VarVals,
    ) -> Result<(Option<[usize; 3]>, Option<[usize; 3]>)> {
        Ok((
            dims3(&self.global_size, var_vals, "global")?,
            dims3(&self.local_size, var_vals, "local")?,
        ))
    }

    /// The values of `vars` in parameter order.
    pub fn var_values(&self, var_vals: &VarVals) -> Result<Vec<i64>> {
        self.vars
            .iter()
            .map(|v| {
                var_vals.get(v).copied().ok_or_else(|| {
                    Error::Runtime(format!("kernel {}: no value for variable {v:?}", self.name))
                })
            })
            .collect()
    }

    /// (buffer index, written) per DEFINE_GLOBAL.
    pub fn globals(&self) -> Vec<(usize, bool)> {
        globals(&self.uops)
    }
}

/// Python's `min(a, b)` for sints (`a` unless `b < a`).
fn sint_min(a: &Sint, b: &Sint) -> Result<Sint> {
    Ok(if py_lt(b, a)? { b.clone() } else { a.clone() })
}

impl Kernel {
    /// Linearize, render with `renderer` (which must have this kernel's capabilities) and
    /// describe the launch.
    pub fn to_program(&mut self, renderer: &dyn Renderer) -> Result<ProgramSpec> {
        ensure!(
            renderer.opts() == &self.opts,
            Codegen,
            "to_program: the kernel was built for {} but the renderer is {}",
            self.opts.device,
            renderer.opts().device
        );
        let info = match self.ast.first() {
            Some(a) => get_lazyop_info(a)?,
            None => bail!(Codegen, "to_program: kernel without outputs"),
        };
        let applied_opts = self.applied_opts.clone();
        let lin = self.linearize()?.clone();
        let function_name = to_function_name(&lin.name);
        let src = renderer.render(&function_name, &lin.uops)?;
        let (ops, mem) = flops_mem(&lin.uops, false, &HashMap::new())?;
        let mut launch: Vec<Sint> = lin.global_size.clone().unwrap_or_default();
        launch.extend(lin.local_size.clone().unwrap_or_default());
        let run_count = sint_prod(&launch)?;
        let op_estimate = sint_min(&info.flops, &Node::Num(ops).try_mul(&run_count)?)?;
        let mem_estimate = sint_min(
            &Node::Num(info.mem_estimate()),
            &Node::Num(mem).try_mul(&run_count)?,
        )?;
        let vars = kernel_vars(&lin.uops)?;
        let outs = globals(&lin.uops)
            .into_iter()
            .filter(|g| g.1)
            .map(|g| g.0)
            .collect();
        Ok(ProgramSpec {
            name: lin.name,
            function_name,
            device: self.opts.device.clone(),
            src,
            uops: lin.uops,
            global_size: lin.global_size,
            local_size: lin.local_size,
            vars,
            outs,
            op_estimate,
            mem_estimate,
            applied_opts,
        })
    }
}

/// The DEFINE_VAR Variables of a UOp list, unique, sorted by name.
fn kernel_vars(uops: &[UOp]) -> Result<Vec<Node>> {
    let mut seen = HashSet::new();
    let mut out = vec![];
    for u in uops {
        if let (UOps::DEFINE_VAR, UArg::Var { name, min, max }) = (u.op(), u.arg()) {
            if seen.insert(name.clone()) {
                out.push((name.clone(), Node::var(name, *min, *max)?));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out.into_iter().map(|x| x.1).collect())
}

/// tinygrad's `FlopCounter`: the shape, the flops not yet consumed, and bytes per buffer.
#[derive(Clone, Debug)]
pub struct FlopCounter {
    pub shape: Vec<Sint>,
    pub flops: Sint,
    /// (buffer index, bytes), later entries for the same index replacing earlier ones.
    pub mem: Vec<(usize, i64)>,
}

impl FlopCounter {
    /// The memory estimate: the sum of the bytes per buffer.
    pub fn mem_estimate(&self) -> i64 {
        self.mem.iter().map(|m| m.1).sum()
    }
}

fn merge_mem(into: &mut Vec<(usize, i64)>, from: &[(usize, i64)]) {
    for &(k, v) in from {
        match into.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => into.push((k, v)),
        }
    }
}

/// The flop and memory estimate of an AST (tinygrad's `get_lazyop_info`): loads and stores count
/// `itemsize * real_size` bytes per buffer, every ALU op and reduce `prod(shape)` flops, casts
/// nothing; a shared subtree's flops are counted once.
pub fn get_lazyop_info(ast: &LazyOp) -> Result<FlopCounter> {
    let mut memo: HashMap<LazyOp, FlopCounter> = HashMap::new();
    run_flop_counter(ast, &mut memo)
}

fn run_flop_counter(x: &LazyOp, memo: &mut HashMap<LazyOp, FlopCounter>) -> Result<FlopCounter> {
    let mut srcs = Vec::with_capacity(x.src().len());
    for s in x.src() {
        if !memo.contains_key(s) {
            let fc = run_flop_counter(s, memo)?;
            memo.insert(s.clone(), fc);
        }
        // consume_flops: the memoized counter hands its flops out once
        let Some(fc) = memo.get_mut(s) else {
            bail!(Internal, "FlopCounter: lost a source");
        };
        let flops = std::mem::replace(&mut fc.flops, Node::Num(0));
        srcs.push((fc.shape.clone(), flops, fc.mem.clone()));
    }
    let mut flops = Node::Num(0);
    let mut mem = vec![];
    for (_, f, m) in &srcs {
        flops = flops.try_add(f)?;
        merge_mem(&mut mem, m);
    }
    let first_shape = srcs.first().map(|s| s.0.clone()).unwrap_or_default();
    Ok(match (x.op(), x.arg()) {
        (Op::Buffer(BufferOps::LOAD), LazyOpArg::Mem(m)) => FlopCounter {
            shape: m.st.shape().to_vec(),
            flops: Node::Num(0),
            mem: vec![(m.idx, m.dtype.itemsize() as i64 * m.st.real_size()?)],
        },
        (Op::Buffer(BufferOps::CONST), LazyOpArg::Const(c)) => FlopCounter {
            shape: c.st.shape().to_vec(),
            flops: Node::Num(0),
            mem: vec![],
        },
        (Op::Buffer(BufferOps::STORE), LazyOpArg::Mem(m)) => {
            merge_mem(
                &mut mem,
                &[(m.idx, m.dtype.itemsize() as i64 * m.st.real_size()?)],
            );
            FlopCounter {
                shape: m.st.shape().to_vec(),
                flops,
                mem,
            }
        }
        (Op::Unary(UnaryOps::CAST | UnaryOps::BITCAST), _) => FlopCounter {
            shape: first_shape,
            flops,
            mem,
        },
        (Op::Reduce(_), LazyOpArg::Axis(axis)) => {
            let shape: Vec<Sint> = first_shape
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if axis.contains(&i) {
                        Node::Num(1)
                    } else {
                        s.clone()
                    }
                })
                .collect();
            let flops = flops.try_add(&sint_prod(&first_shape)?)?;
            FlopCounter { shape, flops, mem }
        }
        (Op::Unary(_) | Op::Binary(_) | Op::Ternary(_), _) => {
            let flops = flops.try_add(&sint_prod(&first_shape)?)?;
            FlopCounter {
                shape: first_shape,
                flops,
                mem,
            }
        }
        (op, _) => bail!(Codegen, "FlopCounter: {} has no estimate", op.name()),
    })
}
