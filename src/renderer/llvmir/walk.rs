//! The walk over a linear UOp list that writes one LLVM IR function body (tinygrad 0.9.1
//! `uops_to_llvm_ir`, in rawgrad's own form).
//!
//! Owns: SSA names (`%val0`, `%alu1`, `%cast2`, `%ridx0`, `%acc0.1`...), basic blocks for loops
//! (`loop_header_N` with a phi for the counter and for every accumulator the loop carries, the 8
//! of a transposed row group as one `<8 x float>` phi (`walk/rows.rs`), `loop_body_N`,
//! `loop_latch_N`, `loop_exit_N`), IF blocks, gated stores (`store_N`), loads and stores with
//! their memory conversions, and the ALU table (in `alu.rs`).
//!
//! Loops are while-loops (a loop whose range is empty runs no iteration, unlike 0.9.1's do-while
//! blocks). After a loop, an accumulator and every PHI of it read the loop header's phi.
//!
//! Not guaranteed: lists that did not pass `type_verify` give an `Error::Codegen`, or IR that the
//! LLVM verifier refuses (the compiler reports it), never a panic.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use crate::codegen::uops::{UArg, UOp, UOpMap, UOps};
use crate::dtype::{DType, Scalar};
use crate::helpers::to_function_name;
use crate::renderer::text::{cat, Piece as _};
use crate::{bail, ensure, Error, Result};

use super::share;
use super::types::{literal, mem, reg};
use super::Flavour;

mod rows;

/// Append one line to `$w.body` from pieces ([`crate::renderer::text::Piece`]) and end it.
macro_rules! emit {
    ($w:expr; $($p:expr),+ $(,)?) => {{
        $( $crate::renderer::text::Piece::put(&$p, &mut $w.body); )+
        $w.body.push('\n');
    }};
}
pub(super) use emit;

/// A loop being rendered.
struct Loop {
    range: UOp,
    /// The label number (`loop_header_N`) and counter name (`%ridxN`).
    n: usize,
    counter: String,
    lo: String,
    pre_block: String,
    /// The byte offset in `body` where the header phis go (inserted when the loop closes).
    phi_line: usize,
    /// Carried accumulators: (acc, header phi name, value on entry).
    accs: Vec<(UOp, String, Rc<str>)>,
    /// The carried vector accumulator of a transposed row group (`walk/rows.rs`).
    vacc: Option<rows::VAcc>,
}

/// A kernel parameter.
#[derive(Clone, Debug)]
pub(super) enum Param {
    /// DEFINE_GLOBAL: buffer index, element dtype, SSA name.
    Buffer(usize, DType, String),
    /// DEFINE_VAR: variable name, SSA name.
    Var(String, String),
}

/// The state of one rendering.
pub(super) struct Walk<'a> {
    pub flavour: &'a Flavour,
    pub opaque: bool,
    pub fmf: &'a str,
    /// The function body after `entry:`, one line per `\n`-terminated line.
    pub body: String,
    pub params: Vec<Param>,
    /// Module-level definitions (LDS arrays).
    pub globals: Vec<String>,
    /// Intrinsic declarations, helper definitions (CPU EXP2) and their attribute groups.
    pub decls: BTreeSet<String>,
    /// The names of the helpers already in `decls` (CPU EXP2).
    pub helpers: HashSet<String>,
    /// Product of the local (`lidx`) SPECIAL sizes.
    pub local_threads: i64,
    /// The list position of the RANGE split across cores (CPU).
    pub split: Option<usize>,
    /// The split RANGE's constant bounds, when the entry computes its share (`share.rs`).
    pub entry_share: Option<share::EntryShare>,
    /// The rendered value of each UOp (shared text: a use clones a pointer, not the name).
    pub(super) r: UOpMap<Rc<str>>,
    counters: HashMap<&'static str, usize, crate::helpers::FxBuild>,
    cur_block: String,
    loops: Vec<Loop>,
    ifs: Vec<(UOp, usize)>,
    carried: HashMap<usize, Vec<UOp>>,
    acc_phis: UOpMap<Vec<UOp>>,
    acc_ids: UOpMap<usize>,
    /// The index-only ALUs, rendered in `i64` (CPU flavour; `index.rs`).
    pub(super) wide: UOpMap<()>,
    /// Whether the kernel is vector-only ([`super::vector_only`], CPU flavour): its global
    /// addresses `base + (x + c)` are then split into `(base + x) + c` (`memory.rs`).
    pub(super) vector_only: bool,
    /// The helper each EXP2 dtype calls and the call's attributes (CPU flavour; `exp2.rs`).
    pub(super) exp2_callees: Vec<(DType, Rc<str>, &'static str)>,
    /// Where [`Walk::ssa`] writes a name before it is shared.
    scratch: String,
    /// The vector EXP2s that call the out-of-line helper (CPU flavour; `exp2.rs`).
    pub(super) exp2_outlined: UOpMap<()>,
    /// The streaming loads of reduce loops, prefetched (CPU flavour; `prefetch.rs`).
    pub(super) prefetch: UOpMap<()>,
    /// The loops whose 8 row accumulators ride as one vector (CPU flavour; `rows.rs`).
    pub(super) rows: super::rows::Plan,
    /// The stores written with `movntps` where aligned (CPU flavour on x86-64; `stream_store.rs`).
    pub(super) streams: UOpMap<()>,
}

/// Accumulators each loop must carry: for every PHI, the loops open at the PHI that were opened
/// after its accumulator was defined. Keyed by the RANGE's list position.
fn carried_accs(uops: &[UOp]) -> Result<HashMap<usize, Vec<UOp>>> {
    let mut stack: Vec<usize> = vec![];
    let mut acc_pos: HashMap<&UOp, usize> = HashMap::new();
    let mut out: HashMap<usize, Vec<UOp>> = HashMap::new();
    for (i, u) in uops.iter().enumerate() {
        match u.op() {
            UOps::RANGE => stack.push(i),
            UOps::ENDRANGE => {
                stack.pop();
            }
            UOps::DEFINE_ACC => {
                acc_pos.insert(u, i);
            }
            UOps::PHI => {
                let root = phi_root(u)?;
                let Some(&pa) = acc_pos.get(&root) else {
                    bail!(
                        Codegen,
                        "PHI at {i} updates an accumulator defined after it"
                    );
                };
                for &p in stack.iter().filter(|&&p| p > pa) {
                    let list = out.entry(p).or_default();
                    if !list.contains(&root) {
                        list.push(root.clone());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The DEFINE_ACC a PHI chain updates.
fn phi_root(u: &UOp) -> Result<UOp> {
    Ok(phi_target(u)?.0)
}

/// The DEFINE_ACC a PHI chain updates, and the lane it updates when the accumulator is a vector
/// and the chain goes through a GEP of it (`PHI(GEP(acc, i), x)`: tensor-core and float4
/// accumulators).
fn phi_target(u: &UOp) -> Result<(UOp, Option<usize>)> {
    let mut cur = u.clone();
    let mut lane = None;
    while matches!(cur.op(), UOps::PHI | UOps::GEP) {
        if let (UOps::GEP, UArg::Gep(i)) = (cur.op(), cur.arg()) {
            ensure!(lane.is_none(), Codegen, "PHI through two GEPs");
            lane = Some(*i);
        }
        let next = cur
            .src()
            .first()
            .cloned()
            .ok_or_else(|| Error::Codegen(format!("{:?} without sources", cur.op())))?;
        cur = next;
    }
    ensure!(
        cur.op() == UOps::DEFINE_ACC,
        Codegen,
        "PHI updates a {:?}, not a DEFINE_ACC",
        cur.op()
    );
    Ok((cur, lane))
}

pub(super) fn dtype_of(u: &UOp) -> Result<DType> {
    u.dtype()
        .ok_or_else(|| Error::Codegen(format!("{:?} has no dtype", u.op())))
}

/// A DEFINE_VAR's LLVM name.
fn var_name(name: &str) -> String {
    cat!("%var_", to_function_name(name))
}

impl<'a> Walk<'a> {
    pub fn new(flavour: &'a Flavour, opaque: bool, fmf: &'a str, uops: &[UOp]) -> Result<Walk<'a>> {
        let wide = match flavour {
            Flavour::Cpu => super::index::index_only(uops),
            _ => UOpMap::default(),
        };
        let prefetch = match flavour {
            Flavour::Cpu => super::prefetch::streaming_loads(uops),
            _ => UOpMap::default(),
        };
        let rows = match flavour {
            Flavour::Cpu => super::rows::plan(uops, &super::rows::child_counts(uops), &prefetch),
            _ => Default::default(),
        };
        Ok(Walk {
            flavour,
            opaque,
            fmf,
            body: String::with_capacity(64 * uops.len()),
            params: vec![],
            globals: vec![],
            decls: BTreeSet::new(),
            helpers: HashSet::new(),
            local_threads: 1,
            split: None,
            entry_share: None,
            r: UOpMap::with_capacity_and_hasher(uops.len(), Default::default()),
            counters: HashMap::default(),
            cur_block: "entry".into(),
            loops: vec![],
            ifs: vec![],
            carried: carried_accs(uops)?,
            acc_phis: UOpMap::default(),
            acc_ids: UOpMap::default(),
            exp2_callees: vec![],
            scratch: String::with_capacity(32),
            vector_only: *flavour == Flavour::Cpu && super::vector_only(uops, &wide),
            wide,
            exp2_outlined: match flavour {
                Flavour::Cpu => super::exp2::outlined(uops),
                _ => UOpMap::default(),
            },
            prefetch,
            rows,
            streams: match flavour {
                Flavour::Cpu => super::stream_store::streaming_stores(uops),
                _ => UOpMap::default(),
            },
        })
    }

    /// A fresh SSA name `%{prefix}{n}`.
    pub fn ssa(&mut self, prefix: &'static str) -> Rc<str> {
        let n = self.number(prefix);
        let text = &mut self.scratch;
        text.clear();
        text.push('%');
        text.push_str(prefix);
        n.put(text);
        Rc::from(text.as_str())
    }

    pub(super) fn number(&mut self, prefix: &'static str) -> usize {
        let n = self.counters.entry(prefix).or_insert(0);
        *n += 1;
        *n - 1
    }

    pub fn emit(&mut self, line: &str) {
        self.body.push_str(line);
        self.body.push('\n');
    }

    /// The rendered value of source `i` of `u`.
    pub fn src(&self, u: &UOp, i: usize) -> Result<Rc<str>> {
        let s = u
            .src()
            .get(i)
            .ok_or_else(|| Error::Codegen(format!("{:?} lacks source {i}", u.op())))?;
        self.val(s)
    }

    pub fn val(&self, s: &UOp) -> Result<Rc<str>> {
        // a CONST of the list has its literal in `r` (rendered once, `Walk::uop`)
        if let Some(v) = self.r.get(s) {
            return Ok(v.clone());
        }
        if let Some(c) = s.const_value() {
            return Ok(literal(c, dtype_of(s)?).into());
        }
        bail!(Codegen, "{:?} is used before it is rendered", s.op())
    }

    /// Source `i` of `u` as an `i64` operand of an index-only ALU (`index.rs`): a 32-bit value is
    /// sign-extended here.
    pub(super) fn src_wide(&mut self, u: &UOp, i: usize) -> Result<Rc<str>> {
        let v = self.src(u, i)?;
        let s = &u.src()[i];
        if !super::index::needs_sext(s, self.wide.contains_key(s)) {
            return Ok(v);
        }
        let name = self.ssa("wide");
        emit!(self; "  ", name, " = sext i32 ", v, " to i64");
        Ok(name)
    }

    pub fn src_dtype(u: &UOp, i: usize) -> Result<DType> {
        match u.src().get(i) {
            Some(s) => dtype_of(s),
            None => bail!(Codegen, "{:?} lacks source {i}", u.op()),
        }
    }

    pub(super) fn label(&mut self, name: String) {
        emit!(self; name, ':');
        self.cur_block = name;
    }

    /// Render one UOp at list position `i`.
    pub fn uop(&mut self, i: usize, u: &UOp) -> Result<()> {
        if self.rows.chain.contains_key(u) {
            // a transposed row group's chain: its adds are the group's vector adds
            return Ok(());
        }
        match u.op() {
            UOps::DEFINE_GLOBAL => self.define_global(u),
            UOps::DEFINE_VAR => self.define_var(u),
            UOps::DEFINE_LOCAL => self.define_local(u),
            UOps::DEFINE_ACC => self.define_acc(u),
            UOps::CONST => {
                if let (Some(c), Some(d)) = (u.const_value(), u.dtype()) {
                    let v = literal(c, d);
                    self.r.insert(u.clone(), v.into());
                }
                Ok(())
            }
            UOps::SPECIAL => self.special(u),
            UOps::NOOP => Ok(()),
            UOps::RANGE => self.range(i, u),
            UOps::ENDRANGE => self.endrange(u),
            UOps::IF => self.if_(u),
            UOps::ENDIF => self.endif(u),
            UOps::BARRIER => self.barrier(),
            UOps::PHI => self.phi(u),
            UOps::LOAD => self.load(u),
            UOps::STORE => self.store(u),
            UOps::ALU => self.alu(u),
            UOps::CAST => self.cast_uop(u),
            UOps::BITCAST => self.bitcast_uop(u),
            UOps::GEP => self.gep(u),
            UOps::WMMA => self.wmma(u),
            op => bail!(Codegen, "the LLVM IR renderer does not render {op:?}"),
        }
    }

    fn define_acc(&mut self, u: &UOp) -> Result<()> {
        let init = self.src(u, 0)?;
        let d = dtype_of(u)?;
        // a vector accumulator starts from its scalar constant in every lane
        let v = match u.src().first().and_then(|s| s.const_value()) {
            Some(c) => literal(c, d).into(),
            None => init,
        };
        self.r.insert(u.clone(), v);
        let k = self.number("acc");
        self.acc_ids.insert(u.clone(), k);
        Ok(())
    }

    fn if_(&mut self, u: &UOp) -> Result<()> {
        let c = self.src(u, 0)?;
        let n = self.number("if");
        emit!(self; "  br i1 ", c, ", label %if_", n, ", label %endif_", n);
        self.label(cat!("if_", n));
        self.ifs.push((u.clone(), n));
        Ok(())
    }

    /// Close the innermost open IF. 0.9.1's linearizer appends the ENDIFs at the end of the
    /// list in the order of their IFs, so an ENDIF may name an outer IF while an inner one is
    /// still open; as in the C renderers (a `}` closes the innermost block), the blocks close
    /// innermost first. The named IF must still be open.
    fn endif(&mut self, u: &UOp) -> Result<()> {
        let named = u.src().first();
        let Some(k) = self.ifs.iter().position(|(i, _)| Some(i) == named) else {
            bail!(Codegen, "ENDIF of an IF that is not open");
        };
        // the innermost block closes; the IF it was opened for still open keeps the named one's
        // (outer) block
        let top = self.ifs.len() - 1;
        self.ifs[k].0 = self.ifs[top].0.clone();
        let Some((_, n)) = self.ifs.pop() else {
            bail!(Codegen, "ENDIF without IF");
        };
        emit!(self; "  br label %endif_", n);
        self.label(cat!("endif_", n));
        Ok(())
    }

    fn gep(&mut self, u: &UOp) -> Result<()> {
        let x = self.src(u, 0)?;
        let t = reg(Self::src_dtype(u, 0)?);
        let UArg::Gep(lane) = u.arg() else {
            bail!(Codegen, "GEP without a lane");
        };
        let name = self.ssa("gep");
        emit!(self; "  ", name, " = extractelement ", t, " ", x, ", i32 ", lane);
        self.r.insert(u.clone(), name);
        Ok(())
    }

    /// Check that every loop and IF was closed.
    pub fn finish(&self) -> Result<()> {
        ensure!(
            self.loops.is_empty() && self.ifs.is_empty(),
            Codegen,
            "{} loop(s) and {} IF(s) are not closed",
            self.loops.len(),
            self.ifs.len()
        );
        Ok(())
    }

    fn define_global(&mut self, u: &UOp) -> Result<()> {
        let UArg::Global { idx, .. } = u.arg() else {
            bail!(Codegen, "DEFINE_GLOBAL without a buffer index");
        };
        let d = dtype_of(u)?.base();
        ensure!(
            d.count == 1,
            Codegen,
            "DEFINE_GLOBAL data{idx}: vector element type {d}"
        );
        let name = cat!("%data", idx);
        self.params.push(Param::Buffer(*idx, d, name.clone()));
        self.r.insert(u.clone(), name.into());
        Ok(())
    }

    fn define_var(&mut self, u: &UOp) -> Result<()> {
        let UArg::Var { name, .. } = u.arg() else {
            bail!(Codegen, "DEFINE_VAR without a variable");
        };
        let d = dtype_of(u)?;
        ensure!(
            d.scalar == Scalar::Int32 && d.count == 1,
            Codegen,
            "DEFINE_VAR {name}: kernel variables are int32, not {d}"
        );
        let ssa = var_name(name);
        self.params.push(Param::Var(name.clone(), ssa.clone()));
        self.r.insert(u.clone(), ssa.into());
        Ok(())
    }

    fn define_local(&mut self, u: &UOp) -> Result<()> {
        let UArg::Local { name, size } = u.arg() else {
            bail!(Codegen, "DEFINE_LOCAL without a name and size");
        };
        let d = dtype_of(u)?.base();
        let arr = cat!("[", size, " x ", mem(d.scalar()), "]");
        let g = cat!("local_", to_function_name(name));
        match self.flavour {
            Flavour::Amdgpu { .. } | Flavour::Nvptx { .. } => {
                self.globals.push(cat!(
                    "@",
                    g,
                    " = internal unnamed_addr addrspace(3) global ",
                    arr,
                    " undef, align 16"
                ));
                self.r.insert(u.clone(), cat!("@", g).into());
            }
            Flavour::Cpu => {
                // the staging buffer of `codegen/uopgraph/stage.rs`: rows start on cache lines
                emit!(self; "  %", g, " = alloca ", arr, ", align 64");
                self.r.insert(u.clone(), cat!("%", g).into());
            }
        }
        Ok(())
    }

    fn special(&mut self, u: &UOp) -> Result<()> {
        let UArg::Special { axis, name, size } = u.arg() else {
            bail!(Codegen, "SPECIAL without a launch axis");
        };
        let dim = match axis {
            0 => 'x',
            1 => 'y',
            2 => 'z',
            a => bail!(Codegen, "SPECIAL {name}: launch axis {a} (only 0-2)"),
        };
        if name.starts_with('l') {
            self.local_threads = self.local_threads.saturating_mul((*size).max(1));
        }
        let ssa = cat!("%", to_function_name(name));
        match self.flavour {
            Flavour::Cpu => bail!(
                Codegen,
                "SPECIAL {name}: the CPU LLVM renderer has no launch indices"
            ),
            // `idx` (a global index without locals) is the workgroup id: such kernels are
            // launched with one thread per workgroup (the flat work group size says so).
            Flavour::Amdgpu { .. } => {
                let kind = if name.starts_with('l') {
                    "workitem"
                } else {
                    "workgroup"
                };
                self.sreg(&cat!("amdgcn.", kind, ".id.", dim), &ssa);
                self.r.insert(u.clone(), ssa.into());
                return Ok(());
            }
            Flavour::Nvptx { .. } => {}
        }
        // NVPTX: blockIdx (ctaid), threadIdx (tid), or blockIdx*blockDim+threadIdx for `idx`
        // (tinygrad's CUDA spelling of a global index without locals).
        let sreg = |r: &str| cat!("nvvm.read.ptx.sreg.", r, ".", dim);
        match name.as_bytes().first() {
            Some(b'g') => self.sreg(&sreg("ctaid"), &ssa),
            Some(b'l') => self.sreg(&sreg("tid"), &ssa),
            Some(b'i') => {
                self.sreg(&sreg("ctaid"), &cat!(ssa, ".ctaid"));
                self.sreg(&sreg("ntid"), &cat!(ssa, ".ntid"));
                self.sreg(&sreg("tid"), &cat!(ssa, ".tid"));
                emit!(self; "  ", ssa, ".base = mul i32 ", ssa, ".ctaid, ", ssa, ".ntid");
                emit!(self; "  ", ssa, " = add i32 ", ssa, ".base, ", ssa, ".tid");
            }
            _ => bail!(Codegen, "SPECIAL {name}: not a gidx/lidx/idx launch index"),
        }
        self.r.insert(u.clone(), ssa.into());
        Ok(())
    }

    /// `dst = call i32 @llvm.<f>()`, a launch-register intrinsic (declared once).
    fn sreg(&mut self, f: &str, dst: &str) {
        self.decls.insert(cat!("declare i32 @llvm.", f, "()"));
        emit!(self; "  ", dst, " = call i32 @llvm.", f, "()");
    }

    fn barrier(&mut self) -> Result<()> {
        match self.flavour {
            Flavour::Amdgpu { .. } => {
                self.decls
                    .insert("declare void @llvm.amdgcn.s.barrier()".to_string());
                self.emit("  fence syncscope(\"workgroup\") release");
                self.emit("  call void @llvm.amdgcn.s.barrier()");
                self.emit("  fence syncscope(\"workgroup\") acquire");
            }
            // bar.sync 0: a CTA-wide barrier that also orders shared and global memory
            Flavour::Nvptx { .. } => {
                self.decls
                    .insert("declare void @llvm.nvvm.barrier0()".to_string());
                self.emit("  call void @llvm.nvvm.barrier0()");
            }
            Flavour::Cpu => {}
        }
        Ok(())
    }

    fn phi(&mut self, u: &UOp) -> Result<()> {
        let (root, lane) = phi_target(u)?;
        if let Some(&g) = self.rows.by_phi.get(u) {
            return self.row_phi(u, g, root);
        }
        let v = self.src(u, 1)?;
        self.acc_phis
            .entry(root.clone())
            .or_default()
            .push(u.clone());
        let acc_now = match lane {
            // one lane of a vector accumulator: the new vector has `v` in that lane
            Some(i) => {
                let vt = reg(dtype_of(&root)?);
                let et = reg(dtype_of(u)?);
                let cur = self.val(&root)?;
                let name = self.ssa("acc");
                emit!(self; "  ", name, " = insertelement ", vt, " ", cur, ", ", et, " ", v, ", i32 ", i);
                name
            }
            None => v.clone(),
        };
        self.r.insert(root, acc_now);
        self.r.insert(u.clone(), v);
        Ok(())
    }

    fn range(&mut self, i: usize, u: &UOp) -> Result<()> {
        let (start, end) = (self.src(u, 0)?, self.src(u, 1)?);
        let t = reg(dtype_of(u)?);
        let n = self.number("ridx");
        let counter = cat!("%ridx", n);
        let (lo, hi) = if self.split == Some(i) {
            self.split_bounds(&counter, &start, &end, &t)
        } else {
            (start.to_string(), end.to_string())
        };
        let mut accs = vec![];
        for acc in self.carried.get(&i).cloned().unwrap_or_default() {
            let k = self.acc_number(&acc)?;
            let entry = self.val(&acc)?;
            accs.push((acc, cat!("%acc", k, ".", n), entry));
        }
        let vacc = self.open_rows(u, n, &mut accs)?;
        emit!(self; "  br label %loop_header_", n);
        let pre_block = self.cur_block.clone();
        self.label(cat!("loop_header_", n));
        let phi_line = self.body.len();
        emit!(self; "  ", counter, ".c = icmp slt ", t, " ", counter, ", ", hi);
        emit!(self; "  br i1 ", counter, ".c, label %loop_body_", n, ", label %loop_exit_", n);
        self.label(cat!("loop_body_", n));
        for (acc, phi, _) in &accs {
            self.r.insert(acc.clone(), phi.as_str().into());
        }
        self.r.insert(u.clone(), counter.as_str().into());
        self.loops.push(Loop {
            range: u.clone(),
            n,
            counter,
            lo,
            pre_block,
            phi_line,
            accs,
            vacc,
        });
        Ok(())
    }

    /// The number of an accumulator (its position among the DEFINE_ACCs rendered so far).
    fn acc_number(&self, acc: &UOp) -> Result<usize> {
        self.acc_ids
            .get(acc)
            .copied()
            .ok_or_else(|| Error::Codegen("a loop carries an accumulator defined after it".into()))
    }

    /// The share `[start + n*core/ncores, start + n*(core+1)/ncores)` of a loop (`share.rs`):
    /// computed here, or by the entry when both bounds are constants (then the kernel's share
    /// parameters are the bounds).
    fn split_bounds(&mut self, c: &str, start: &str, end: &str, t: &str) -> (String, String) {
        if share::constant(start) && share::constant(end) {
            self.entry_share = Some(share::EntryShare {
                ty: t.to_string(),
                start: start.to_string(),
                end: end.to_string(),
            });
            return (share::SHARE_LO.to_string(), share::SHARE_HI.to_string());
        }
        let (lines, lo, hi) = share::share_lines(c, start, end, t);
        for l in &lines {
            emit!(self; l.as_str());
        }
        (lo, hi)
    }

    fn endrange(&mut self, u: &UOp) -> Result<()> {
        let Some(lp) = self.loops.pop() else {
            bail!(Codegen, "ENDRANGE without RANGE");
        };
        ensure!(
            u.src().first() == Some(&lp.range),
            Codegen,
            "ENDRANGE closes another loop"
        );
        let (n, c) = (lp.n, &lp.counter);
        let t = reg(dtype_of(&lp.range)?);
        let latch = cat!("loop_latch_", n);
        let mut phis = vec![cat!(
            "  ",
            c,
            " = phi ",
            t,
            " [ ",
            lp.lo,
            ", %",
            lp.pre_block,
            " ], [ ",
            c,
            ".next, %",
            latch,
            " ]"
        )];
        for (acc, phi, entry) in &lp.accs {
            let at = reg(dtype_of(acc)?);
            let now = self.val(acc)?;
            phis.push(cat!(
                "  ",
                phi,
                " = phi ",
                at,
                " [ ",
                entry,
                ", %",
                lp.pre_block,
                " ], [ ",
                now,
                ", %",
                latch,
                " ]"
            ));
        }
        if let Some(va) = &lp.vacc {
            phis.push(Self::row_header_phi(va, &lp.pre_block, &latch)?);
        }
        let mut text = phis.join("\n");
        text.push('\n');
        self.body.insert_str(lp.phi_line, &text);
        emit!(self; "  br label %", latch);
        self.label(latch);
        emit!(self; "  ", c, ".next = add nsw ", t, " ", c, ", 1");
        emit!(self; "  br label %loop_header_", n);
        self.label(cat!("loop_exit_", n));
        // after the loop, the accumulator (and every PHI of it) is the header's phi
        for (acc, phi, _) in lp.accs {
            for p in self.acc_phis.get(&acc).cloned().unwrap_or_default() {
                let after = match phi_target(&p)?.1 {
                    Some(i) => {
                        let vt = reg(dtype_of(&acc)?);
                        let name = self.ssa("acc");
                        emit!(self; "  ", name, " = extractelement ", vt, " ", phi, ", i32 ", i);
                        name
                    }
                    None => phi.as_str().into(),
                };
                self.r.insert(p, after);
            }
            self.r.insert(acc, phi.into());
        }
        self.close_rows(lp.vacc)
    }
}
