//! C-style rendering of linear UOp lists (tinygrad 0.9.1 `CStyleLanguage`), and the CLANG
//! dialect ([`ClangRenderer`], in `cstyle/clang.rs`).
//!
//! Owns: the walk over the UOp list that every C-like dialect shares ([`render_cstyle`]): SSA names
//! (`val`, `alu`, `acc`, `ridx`, `cast`, `precast`), ALU expressions inlined when used once (except
//! MAX), parentheses dropped inside same-op ADD/MUL/XOR chains (for floats only around the left
//! operand: tinygrad also drops them around the right one, which regroups `a*(b*c)` as
//! `(a*b)*c` and changes the bits), loops, gated loads (`g?load:alt`)
//! and stores (`if (g) { ... }`), accumulators and PHI assignments. A dialect is a [`CStyle`]
//! implementation: its knobs ([`CStyleLanguage`]) and overridable pieces (types, constants, casts,
//! loads, stores, ops, the kernel frame).
//!
//! Not guaranteed: only lists that passed `type_verify` are meant to be rendered; other input gives
//! an `Error::Codegen` or C that does not compile, never a panic.

/// Append one body line of pieces ([`crate::renderer::text::Piece`]) to `$st`, indented.
macro_rules! kk {
    ($st:expr; $($p:expr),+ $(,)?) => {{
        $st.indent();
        $( $crate::renderer::text::Piece::put(&$p, &mut $st.body); )+
        $st.end();
    }};
}

mod base;
mod bf16;
mod clang;
mod lane_loads;
mod names;
mod range;
mod row_transpose;

use range::render_range;
pub use range::split_range;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};
use crate::dtype::{ConstValue, DType};
use crate::ops::{BinaryOps, Op};
use crate::renderer::text::cat;
use crate::renderer::text::Piece as _;
use crate::{bail, ensure, Result};
use names::{name_of, src_name, Names};

pub use base::{base_code_for_op, base_params, base_render_const, int_literal};
pub(crate) use bf16::{render_load_bf16_emulated, render_store_bf16_emulated};
pub use clang::ClangRenderer;

/// The knobs of a C-like dialect (tinygrad's `CStyleLanguage` class attributes).
#[derive(Clone, Debug, Default)]
pub struct CStyleLanguage {
    pub kernel_prefix: String,
    pub buffer_prefix: String,
    pub buffer_suffix: String,
    pub smem_align: String,
    pub smem_prefix: String,
    pub smem_prefix_for_cast: bool,
    pub arg_int_prefix: String,
    pub barrier: String,
    pub extra_args: Vec<String>,
    pub uses_ptr_arithmetic: bool,
    /// Split the outermost global loop across `core`/`ncores` parameters (CPU devices).
    pub split_outer_loop: bool,
    /// Render a vector load read only lane by lane as one scalar load per lane (`cstyle/lane_loads.rs`).
    pub scalar_lane_loads: bool,
    /// Keep the 8 row accumulators of a row sum in one vector (`cstyle/row_transpose.rs`).
    pub transposed_rows: bool,
    /// Write large contiguous float4 outputs with non-temporal stores
    /// (`renderer/llvmir/stream_store.rs`; the helpers `rg_stream_f4`, `rg_stream_fence`).
    pub stream_stores: bool,
}

/// What a rendered kernel needs in front of it (includes, typedefs, helpers).
#[derive(Clone, Debug, Default)]
pub struct Needs {
    pub math: bool,
    pub half: bool,
    pub bf16: bool,
    pub vectors: BTreeSet<DType>,
    /// Dialect-specific helper definitions the body uses (by name).
    pub helpers: BTreeSet<&'static str>,
    /// The distinct tensor-core ops the body calls (`__WMMA_...` helpers to define).
    pub wmma: Vec<crate::codegen::uops::WmmaArg>,
    /// What [`CStyle::kernel_modifier`] returned for this kernel (written between `void ` and the
    /// name, e.g. CUDA's `__launch_bounds__(N) `).
    pub kernel_modifier: String,
}

/// A kernel parameter: a buffer pointer (element dtype) or an integer variable.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub dtype: DType,
    pub is_buffer: bool,
    pub mutable: bool,
}

/// tinygrad's `strip_parens`: drop one pair of outer parentheses when they enclose the whole text.
pub fn strip_parens(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() >= 2 && b[0] == b'(' && b[b.len() - 1] == b')' {
        let inner = &s[1..s.len() - 1];
        let open = inner.find('(').map_or(-1, |i| i as i64);
        let close = inner.find(')').map_or(-1, |i| i as i64);
        if open <= close {
            return inner;
        }
    }
    s
}

/// A C-like dialect. The defaults are tinygrad's base `CStyleLanguage` behaviour.
pub trait CStyle {
    fn lang(&self) -> &CStyleLanguage;

    /// The type of a value of `dtype` (registers, variables).
    fn render_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        let _ = needs;
        Ok(match d.count {
            0 | 1 => Cow::Borrowed(d.scalar.name()),
            _ => Cow::Owned(d.name()),
        })
    }

    /// The element type of a buffer pointer.
    fn render_buf_dtype(&self, d: DType, needs: &mut Needs) -> Result<Cow<'static, str>> {
        self.render_dtype(d.base(), needs)
    }

    /// The expression of an ALU op over rendered operands.
    fn code_for_op(&self, op: Op, a: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
        base_code_for_op(op, a, d, needs)
    }

    /// The launch index for SPECIAL `name` (`gidx0`, `lidx1`, `idx0`) on `axis`.
    fn code_for_workitem(&self, name: &str, axis: usize) -> Result<String> {
        bail!(
            Codegen,
            "this renderer has no launch indices ({name} on axis {axis})"
        )
    }

    /// A value conversion: one source casts, several build a vector.
    fn render_cast(&self, x: &[&str], d: DType, needs: &mut Needs) -> Result<String> {
        let t = self.render_dtype(d, needs)?;
        match x {
            [one] => Ok(cat!("(", t, ")(", one, ")")),
            many => {
                ensure!(
                    many.len() == d.count as usize,
                    Codegen,
                    "cast to {d} from {} values",
                    many.len()
                );
                Ok(cat!("(", t, "){", many.join(","), "}"))
            }
        }
    }

    /// A constant of `d`.
    fn render_const(&self, v: ConstValue, d: DType, needs: &mut Needs) -> Result<String> {
        base_render_const(self, v, d, needs)
    }

    /// The expression loading `buf[idx]` as `out`.
    fn render_load(
        &self,
        out: DType,
        buf: &str,
        buf_dtype: DType,
        idx: &str,
        local: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        let l = self.lang();
        let val = if out.count > 1 {
            let prefix = if local && l.smem_prefix_for_cast {
                &l.smem_prefix
            } else {
                &l.buffer_prefix
            };
            let t = self.render_dtype(buf_dtype.base().scalar().vec(out.count), needs)?;
            cat!("*((", prefix, t, "*)(", buf, "+", idx, "))")
        } else if l.uses_ptr_arithmetic {
            cat!("*(", buf, "+", idx, ")")
        } else {
            cat!(buf, "[", idx, "]")
        };
        if out.scalar != buf_dtype.scalar {
            return self.render_cast(&[val.as_str()], out, needs);
        }
        Ok(val)
    }

    /// The statement storing `var` at `buf[idx]`.
    #[allow(clippy::too_many_arguments)]
    fn render_store(
        &self,
        buf: &str,
        buf_dtype: DType,
        var: &str,
        var_dtype: DType,
        idx: &str,
        local: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        let l = self.lang();
        if var_dtype.count > 1 {
            let prefix = if local && l.smem_prefix_for_cast {
                &l.smem_prefix
            } else {
                &l.buffer_prefix
            };
            let t = self.render_dtype(buf_dtype.base().scalar().vec(var_dtype.count), needs)?;
            return Ok(cat!(
                "*((", prefix, t, "*)(", buf, "+", idx, ")) = ", var, ";"
            ));
        }
        Ok(if l.uses_ptr_arithmetic {
            cat!("*(", buf, "+", idx, ") = ", var, ";")
        } else {
            cat!(buf, "[", idx, "] = ", var, ";")
        })
    }

    /// Statements reinterpreting `x` (of `from`) as `to`, defining `out`; returns the expression
    /// that reads the result.
    fn render_bitcast(
        &self,
        x: &str,
        from: DType,
        to: DType,
        names: (&str, &str),
        lines: &mut Vec<String>,
        needs: &mut Needs,
    ) -> Result<String> {
        let (pre, out) = names;
        let (ft, tt) = (
            self.render_dtype(from, needs)?,
            self.render_dtype(to, needs)?,
        );
        push_memcpy_bitcast(lines, (&ft, &tt), (pre, out), x);
        Ok(out.to_string())
    }

    /// Lane `lane` of the vector expression `x` (of type `from`).
    fn render_gep(&self, x: &str, lane: usize, from: DType) -> Result<String> {
        let _ = from;
        Ok(cat!(x, "[", lane, "]"))
    }

    /// A vector value `x` of `from` converted lane by lane to the vector type `to`.
    fn render_vector_cast(
        &self,
        x: &str,
        from: DType,
        to: DType,
        needs: &mut Needs,
    ) -> Result<String> {
        let _ = from;
        let t = self.render_dtype(to, needs)?;
        Ok(cat!("__builtin_convertvector(", x, ", ", t, ")"))
    }

    /// Text between `void ` and the kernel name (tinygrad's `get_kernel_modifier`), from the
    /// whole UOp list; stored in [`Needs::kernel_modifier`] for [`CStyle::render_kernel`].
    fn kernel_modifier(&self, uops: &[UOp]) -> String {
        let _ = uops;
        String::new()
    }

    /// A workgroup-local buffer declaration.
    fn render_local(&self, name: &str, d: DType, size: usize, needs: &mut Needs) -> Result<String> {
        let l = self.lang();
        let t = self.render_dtype(d.base(), needs)?;
        Ok(cat!(
            l.smem_align,
            l.smem_prefix,
            t,
            " ",
            name,
            "[",
            size,
            "];"
        ))
    }

    /// The whole source: the function around the body (its lines joined by newlines).
    fn render_kernel(
        &self,
        name: &str,
        body: &str,
        params: &[Param],
        split: bool,
        needs: &mut Needs,
    ) -> Result<String> {
        let _ = split;
        let args = base_params(self, params, needs)?;
        Ok(cat!(
            self.lang().kernel_prefix,
            "void ",
            name,
            "(",
            args.join(", "),
            ") {\n",
            body,
            "\n}"
        ))
    }
}

/// Rendering state: SSA counters and names, body lines and what the preamble needs.
struct State {
    /// The body: each line indented and ended by a newline.
    body: String,
    depth: usize,
    counters: HashMap<&'static str, usize, crate::helpers::FxBuild>,
    r: Names,
    params: Vec<Param>,
    needs: Needs,
    /// The vector loads some use takes whole (not through a GEP); filled only for a dialect
    /// with lane loads.
    whole_used: UOpMap<()>,
    /// The lane names of each vector load rendered as lane loads.
    lanes: UOpMap<Vec<String>>,
    /// The loops rendered with transposed row accumulators.
    rows: crate::renderer::llvmir::rows::Plan,
    /// The stores written through `rg_stream_f4` (`renderer/llvmir/stream_store.rs`).
    streams: UOpMap<()>,
}

impl State {
    /// Start a body line: its indentation (the line's pieces follow, then [`State::end`]).
    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.body.push_str("  ");
        }
    }
    fn end(&mut self) {
        self.body.push('\n');
    }
    fn kk(&mut self, s: &str) {
        self.indent();
        self.body.push_str(s);
        self.end();
    }
    fn ssa(&mut self, prefix: &'static str, u: Option<&UOp>) -> String {
        let c = self.counters.entry(prefix).or_insert(0);
        // `{prefix}{c}` without the formatting machinery (one per rendered value)
        let mut name = String::with_capacity(prefix.len() + 4);
        name.push_str(prefix);
        c.put(&mut name);
        *c += 1;
        if let Some(u) = u {
            self.r.insert(u.clone(), &name);
        }
        name
    }
    fn get(&self, u: &UOp) -> Result<String> {
        name_of(&self.r, u).map(str::to_string)
    }
    fn src(&self, u: &UOp, i: usize) -> Result<String> {
        match u.src().get(i) {
            Some(s) => self.get(s),
            None => bail!(Codegen, "render: {} lacks source {i}", u.op().name()),
        }
    }
}

/// The statements of a bitcast through memory: `pre` (of type `ft`) holds `x`, `out` (of type
/// `tt`) is declared and gets `pre`'s bytes.
pub(crate) fn push_memcpy_bitcast(
    lines: &mut Vec<String>,
    (ft, tt): (&str, &str),
    (pre, out): (&str, &str),
    x: &str,
) {
    lines.push(cat!(ft, " ", pre, " = ", x, ";"));
    lines.push(cat!(tt, " ", out, ";"));
    lines.push(cat!(
        "__builtin_memcpy(&",
        out,
        ", &",
        pre,
        ", sizeof(",
        out,
        "));"
    ));
}

fn dtype_of(u: &UOp) -> Result<DType> {
    match u.dtype() {
        Some(d) => Ok(d),
        None => bail!(Codegen, "render: {} has no dtype", u.op().name()),
    }
}

fn src_dtype(u: &UOp, i: usize) -> Result<DType> {
    match u.src().get(i) {
        Some(s) => dtype_of(s),
        None => bail!(Codegen, "render: {} lacks source {i}", u.op().name()),
    }
}

fn check_name(name: &str) -> Result<()> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ensure!(
        ok,
        Codegen,
        "render: kernel name {name:?} is not a C identifier"
    );
    Ok(())
}

/// Render a linear UOp list in dialect `l` (tinygrad's `CStyleLanguage.render`).
pub fn render_cstyle<L: CStyle + ?Sized>(l: &L, name: &str, uops: &[UOp]) -> Result<String> {
    check_name(name)?;
    let mut st = State {
        body: String::with_capacity(48 * uops.len()),
        depth: 1,
        counters: HashMap::default(),
        r: Names::with_capacity(uops.len()),
        params: vec![],
        needs: Needs::default(),
        whole_used: UOpMap::default(),
        lanes: UOpMap::default(),
        rows: crate::renderer::llvmir::rows::Plan::default(),
        streams: UOpMap::default(),
    };
    let mut child_count: UOpMap<usize> =
        UOpMap::with_capacity_and_hasher(uops.len(), Default::default());
    let lane_loads = l.lang().scalar_lane_loads;
    for u in uops {
        for s in u.src() {
            // only a vector load can become lane loads ([`lane_loads::wanted`])
            let vector_load = s.op() == UOps::LOAD && s.dtype().is_some_and(|d| d.count > 1);
            if lane_loads && vector_load && u.op() != UOps::GEP {
                st.whole_used.insert(s.clone(), ());
            }
            match child_count.get_mut(s) {
                Some(c) => *c += 1,
                None => {
                    child_count.insert(s.clone(), 1);
                }
            }
        }
    }
    st.rows = row_transpose::plan(l, uops, &child_count);
    let row_loads: Vec<UOp> = st.rows.loads().cloned().collect();
    st.whole_used
        .extend(row_loads.into_iter().map(|ld| (ld, ())));
    let split = if l.lang().split_outer_loop {
        split_range(uops)
    } else {
        None
    };
    st.needs.kernel_modifier = l.kernel_modifier(uops);
    if l.lang().stream_stores {
        st.streams = crate::renderer::llvmir::stream_store::streaming_stores(uops);
    }
    for (i, u) in uops.iter().enumerate() {
        let n = child_count.get(u).copied().unwrap_or(0);
        render_uop(l, &mut st, u, n, split == Some(i)).map_err(|e| {
            crate::Error::Codegen(cat!(
                "render ",
                name,
                ": uop ",
                i,
                " (",
                u.op().name(),
                "): ",
                e.message()
            ))
        })?;
    }
    if !st.streams.is_empty() {
        // the streaming stores are visible before the kernel's completion is
        st.kk("rg_stream_fence();");
    }
    let mut params = std::mem::take(&mut st.params);
    params.sort_by(|a, b| {
        (!a.is_buffer, buf_index(a), &a.name).cmp(&(!b.is_buffer, buf_index(b), &b.name))
    });
    // the lines joined by newlines: without the last line's end
    let body = st.body.strip_suffix('\n').unwrap_or(&st.body);
    l.render_kernel(name, body, &params, split.is_some(), &mut st.needs)
}

fn buf_index(p: &Param) -> usize {
    p.name
        .strip_prefix("data")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn render_uop<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    children: usize,
    split: bool,
) -> Result<()> {
    match u.op() {
        UOps::IF => {
            let c = st.src(u, 0)?;
            kk!(st; "if (", c, ") {");
            st.depth += 1;
        }
        UOps::BARRIER => {
            if !l.lang().barrier.is_empty() {
                let b = l.lang().barrier.clone();
                st.kk(&b);
            }
        }
        UOps::ENDRANGE | UOps::ENDIF => {
            st.depth = st.depth.saturating_sub(1);
            st.kk("}");
            row_transpose::close(st, u)?;
        }
        UOps::STORE => render_store_uop(l, st, u)?,
        UOps::NOOP => {}
        _ => render_value(l, st, u, children, split)?,
    }
    Ok(())
}

fn render_store_uop<L: CStyle + ?Sized>(l: &L, st: &mut State, u: &UOp) -> Result<()> {
    let (buf, idx, val) = (
        src_name(&st.r, u, 0)?,
        src_name(&st.r, u, 1)?,
        src_name(&st.r, u, 2)?,
    );
    let local = u.src()[0].op() == UOps::DEFINE_LOCAL;
    if st.streams.contains_key(u) {
        st.needs.helpers.insert("rg_stream");
        let line = cat!(
            "rg_stream_f4(",
            buf,
            "+",
            strip_parens(idx),
            ", (rg_v4sf)(",
            val,
            "));"
        );
        st.kk(&line);
        return Ok(());
    }
    let s = l.render_store(
        buf,
        src_dtype(u, 0)?,
        val,
        src_dtype(u, 2)?,
        strip_parens(idx),
        local,
        &mut st.needs,
    )?;
    if u.src().len() > 3 {
        let g = st.src(u, 3)?;
        kk!(st; "if (", g, ") { ", s, " }");
    } else {
        st.kk(&s);
    }
    Ok(())
}

fn render_alu<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    d: DType,
    children: usize,
) -> Result<()> {
    let Some(op) = u.alu_op() else {
        bail!(Codegen, "ALU without an op")
    };
    let chain = matches!(
        op,
        Op::Binary(BinaryOps::ADD | BinaryOps::MUL | BinaryOps::XOR)
    );
    // the operands' names borrowed from `st.r` (`st.needs` is borrowed apart)
    let mut operands: Vec<&str> = Vec::with_capacity(u.src().len());
    for (i, s) in u.src().iter().enumerate() {
        let r = name_of(&st.r, s)?;
        // C groups `a*b*c` as `(a*b)*c`: a float chain may only lose the parentheses of its left
        // operand, or `a*(b*c)` would be computed as `(a*b)*c` (other bits than the interpreter's).
        let regroups = i > 0 && d.is_float();
        operands.push(if chain && !regroups && s.alu_op() == Some(op) {
            strip_parens(r)
        } else {
            r
        });
    }
    let val = l.code_for_op(op, &operands, d, &mut st.needs)?;
    ensure!(children > 0, Codegen, "childless ALU op {}", op.name());
    if children <= 1 && op != Op::Binary(BinaryOps::MAX) {
        st.r.insert(u.clone(), &val);
    } else {
        let t = l.render_dtype(d, &mut st.needs)?;
        let name = st.ssa("alu", Some(u));
        kk!(st; t, " ", name, " = ", val, ";");
    }
    Ok(())
}

fn render_value<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    children: usize,
    split: bool,
) -> Result<()> {
    let d = dtype_of(u)?;
    match u.op() {
        UOps::SPECIAL
        | UOps::DEFINE_LOCAL
        | UOps::DEFINE_VAR
        | UOps::DEFINE_GLOBAL
        | UOps::DEFINE_ACC
        | UOps::CONST => render_define(l, st, u, d),
        UOps::CAST | UOps::BITCAST => render_convert(l, st, u, d, children),
        _ => render_misc(l, st, u, d, children, split),
    }
}

fn render_define<L: CStyle + ?Sized>(l: &L, st: &mut State, u: &UOp, d: DType) -> Result<()> {
    match (u.op(), u.arg()) {
        (UOps::SPECIAL, UArg::Special { axis, name, size }) => {
            let w = l.code_for_workitem(name, *axis)?;
            kk!(st; "int ", name, " = ", w, "; /* ", size, " */");
            st.r.insert(u.clone(), name);
        }
        (UOps::DEFINE_LOCAL, UArg::Local { name, size }) => {
            let s = l.render_local(name, d, *size, &mut st.needs)?;
            st.kk(&s);
            st.r.insert(u.clone(), name);
        }
        (UOps::DEFINE_VAR, UArg::Var { name, .. }) => {
            ensure!(
                !st.params.iter().any(|p| &p.name == name),
                Codegen,
                "duplicate variable {name}"
            );
            st.params.push(Param {
                name: name.clone(),
                dtype: d,
                is_buffer: false,
                mutable: false,
            });
            st.r.insert(u.clone(), name);
        }
        (UOps::DEFINE_GLOBAL, UArg::Global { idx, is_output }) => {
            let name = cat!("data", idx);
            st.params.push(Param {
                name: name.clone(),
                dtype: d,
                is_buffer: true,
                mutable: *is_output,
            });
            st.r.insert(u.clone(), &name);
        }
        (UOps::DEFINE_ACC, _) => {
            let Some(init) = u.src().first().and_then(|s| s.const_value()) else {
                bail!(Codegen, "DEFINE_ACC without a constant initial value")
            };
            let t = l.render_dtype(d, &mut st.needs)?;
            let v = l.render_const(init, d, &mut st.needs)?;
            let name = st.ssa("acc", Some(u));
            kk!(st; t, " ", name, " = ", v, ";");
        }
        (UOps::CONST, UArg::Const(v)) => {
            let s = l.render_const(*v, d, &mut st.needs)?;
            let neg = v.as_f64() < 0.0 || v.as_f64().is_nan();
            st.r.insert(u.clone(), &if neg { cat!("(", s, ")") } else { s });
        }
        (op, arg) => bail!(Codegen, "cannot render {} with arg {arg}", op.name()),
    }
    Ok(())
}

fn render_convert<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    d: DType,
    children: usize,
) -> Result<()> {
    match (u.op(), u.arg()) {
        (UOps::CAST, _) => {
            let xs = u
                .src()
                .iter()
                .map(|s| name_of(&st.r, s))
                .collect::<Result<Vec<_>>>()?;
            let from = src_dtype(u, 0)?;
            let val = if xs.len() == 1 && from.count > 1 && d.count > 1 {
                l.render_vector_cast(xs[0], from, d, &mut st.needs)?
            } else {
                l.render_cast(&xs, d, &mut st.needs)?
            };
            if children <= 1 {
                st.r.insert(u.clone(), &val);
            } else {
                let t = l.render_dtype(d, &mut st.needs)?;
                let name = st.ssa("cast", Some(u));
                kk!(st; t, " ", name, " = ", val, ";");
            }
        }
        (UOps::BITCAST, _) => {
            ensure!(
                u.src().len() == 1,
                Codegen,
                "BITCAST of {} sources",
                u.src().len()
            );
            let (x, from) = (st.src(u, 0)?, src_dtype(u, 0)?);
            let pre = st.ssa("precast", None);
            let out = st.ssa("cast", None);
            let mut lines = vec![];
            let val = l.render_bitcast(&x, from, d, (&pre, &out), &mut lines, &mut st.needs)?;
            for line in lines {
                st.kk(&line);
            }
            st.r.insert(u.clone(), &val);
        }
        (op, arg) => bail!(Codegen, "cannot render {} with arg {arg}", op.name()),
    }
    Ok(())
}

fn render_misc<L: CStyle + ?Sized>(
    l: &L,
    st: &mut State,
    u: &UOp,
    d: DType,
    children: usize,
    split: bool,
) -> Result<()> {
    match (u.op(), u.arg()) {
        (UOps::RANGE, _) => {
            row_transpose::open(l, st, u)?;
            render_range(st, u, split, l)?;
        }
        (UOps::ALU, _) => render_alu(l, st, u, d, children)?,
        (UOps::LOAD, _) => {
            lane_loads::render_load_uop(l, st, u, d)?;
            row_transpose::after_load(st, u)?;
        }
        (UOps::PHI, _) if st.rows.is_phi(u) => row_transpose::phi(l, st, u)?,
        (UOps::PHI, _) => {
            let (acc, v) = (st.src(u, 0)?, st.src(u, 1)?);
            kk!(st; acc, " = ", v, ";");
            st.r.insert(u.clone(), &acc);
        }
        (UOps::GEP, UArg::Gep(i)) => {
            if let Some(lanes) = st.lanes.get(&u.src()[0]) {
                let Some(lane) = lanes.get(*i).cloned() else {
                    bail!(Codegen, "GEP {i} of a {}-lane load", lanes.len());
                };
                st.r.insert(u.clone(), &lane);
                return Ok(());
            }
            let x = src_name(&st.r, u, 0)?;
            let from_ssa = matches!(
                u.src()[0].op(),
                UOps::LOAD | UOps::WMMA | UOps::DEFINE_ACC | UOps::PHI
            );
            let from = src_dtype(u, 0)?;
            let lane = if from_ssa {
                l.render_gep(x, *i, from)?
            } else {
                l.render_gep(&cat!("(", x, ")"), *i, from)?
            };
            st.r.insert(u.clone(), &lane);
        }
        (UOps::WMMA, UArg::Wmma(w)) => {
            let (a, b, c) = (st.src(u, 0)?, st.src(u, 1)?, st.src(u, 2)?);
            let t = l.render_dtype(d, &mut st.needs)?;
            let name = st.ssa("wmma", Some(u));
            kk!(st; t, " ", name, " = __", w.name, "(", a, ", ", b, ", ", c, ");");
            if !st.needs.wmma.contains(w) {
                st.needs.wmma.push((**w).clone());
            }
        }
        (op, arg) => bail!(Codegen, "cannot render {} with arg {arg}", op.name()),
    }
    Ok(())
}

#[cfg(test)]
#[path = "cstyle/tests.rs"]
mod tests;
