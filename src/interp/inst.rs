//! Lowering a linear UOp list to interpreter instructions with resolved register slots.
//!
//! Every value-producing UOp gets a register of `count` lanes per thread; GEP and PHI do not: they
//! are views of another register (a GEP of lane `i`, a PHI of the accumulator it updates), which is
//! the C semantics (`acc0[1]`, `acc0 = ...`). Jump targets (loop ends, IF ends) and operand slots
//! are computed once here so running does no lookups.

use std::collections::HashMap;

use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{DType, Scalar};
use crate::ops::Op;
use crate::{bail, ensure, Result};

use super::value::encode;
use super::wmma::WmmaLayout;

/// A register view: lane `l`, element `k` lives at `off*warp + add + l*stride + k`.
#[derive(Clone, Copy, Debug)]
pub struct Reg {
    pub off: usize,
    pub add: usize,
    pub stride: usize,
    pub width: usize,
    pub scalar: Scalar,
}

impl Reg {
    #[inline]
    pub fn at(&self, warp: usize, lane: usize, k: usize) -> usize {
        let k = if self.width == 1 { 0 } else { k };
        self.off * warp + self.add + lane * self.stride + k
    }
}

/// Where a load or store goes.
#[derive(Clone, Copy, Debug)]
pub enum Mem {
    /// Kernel buffer (DEFINE_GLOBAL index).
    Global(usize),
    /// Workgroup buffer (index into the interpreter's local buffers).
    Local(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialKind {
    Group,
    Local,
    Global,
}

#[derive(Clone, Debug)]
pub enum Inst {
    Nop,
    Const {
        dst: Reg,
        bits: u64,
    },
    Var {
        dst: Reg,
        val: usize,
    },
    Special {
        dst: Reg,
        kind: SpecialKind,
        axis: usize,
    },
    Range {
        dst: Reg,
        start: Reg,
        end: Reg,
        exit: usize,
    },
    EndRange {
        body: usize,
        ctr: Reg,
        end: Reg,
    },
    If {
        cond: Reg,
        exit: usize,
    },
    EndIf,
    Alu {
        dst: Reg,
        op: Op,
        src: Vec<Reg>,
    },
    Cast {
        dst: Reg,
        src: Reg,
    },
    Bitcast {
        dst: Reg,
        src: Reg,
    },
    Vectorize {
        dst: Reg,
        src: Vec<Reg>,
    },
    Load {
        dst: Reg,
        mem: Mem,
        elem: Scalar,
        idx: Reg,
        gate: Option<(Reg, Reg)>,
    },
    Store {
        mem: Mem,
        elem: Scalar,
        idx: Reg,
        val: Reg,
        gate: Option<Reg>,
    },
    Phi {
        dst: Reg,
        src: Reg,
    },
    Wmma {
        dst: Reg,
        a: Reg,
        b: Reg,
        c: Reg,
        layout: WmmaLayout,
    },
}

/// A local buffer: name, element dtype, element count.
#[derive(Clone, Debug)]
pub struct LocalBuf {
    pub name: String,
    pub elem: Scalar,
    pub size: usize,
}

/// The lowered program.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub insts: Vec<Inst>,
    /// Register units per thread (each unit is one 64-bit slot per lane).
    pub units: usize,
    pub locals: Vec<LocalBuf>,
    /// Variable names in parameter (name) order.
    pub vars: Vec<String>,
    /// Buffer element dtypes by DEFINE_GLOBAL index.
    pub globals: Vec<(usize, Scalar)>,
}

struct Lower<'a> {
    uops: &'a [UOp],
    index: HashMap<UOp, usize>,
    regs: Vec<Option<Reg>>,
    units: usize,
    mems: HashMap<usize, (Mem, Scalar)>,
    locals: Vec<LocalBuf>,
    globals: Vec<(usize, Scalar)>,
    vars: Vec<String>,
}

fn scalar_dtype(u: &UOp) -> Result<DType> {
    match u.dtype() {
        Some(d) => Ok(d),
        None => bail!(Codegen, "INTERP: {} needs a dtype", u.op().name()),
    }
}

impl Lower<'_> {
    fn fresh(&mut self, d: DType) -> Reg {
        let width = d.count.max(1) as usize;
        let r = Reg {
            off: self.units,
            add: 0,
            stride: width,
            width,
            scalar: d.scalar,
        };
        self.units += width;
        r
    }

    fn pos(&self, u: &UOp) -> Result<usize> {
        match self.index.get(u) {
            Some(&p) => Ok(p),
            None => bail!(Codegen, "INTERP: source {:?} is not in the uop list", u),
        }
    }

    fn reg(&self, u: &UOp) -> Result<Reg> {
        match self.regs.get(self.pos(u)?).copied().flatten() {
            Some(r) => Ok(r),
            None => bail!(
                Codegen,
                "INTERP: {} is used before it has a value (or has none)",
                u.op().name()
            ),
        }
    }

    fn src(&self, u: &UOp, i: usize) -> Result<Reg> {
        match u.src().get(i) {
            Some(s) => self.reg(s),
            None => bail!(Codegen, "INTERP: {} lacks source {i}", u.op().name()),
        }
    }

    fn mem(&self, u: &UOp) -> Result<(Mem, Scalar)> {
        let buf = u.src().first();
        match buf
            .and_then(|b| self.index.get(b))
            .and_then(|p| self.mems.get(p))
        {
            Some(&m) => Ok(m),
            None => bail!(
                Codegen,
                "INTERP: {} does not address a buffer",
                u.op().name()
            ),
        }
    }

    fn gate(&self, u: &UOp, with_alt: bool) -> Result<Option<(Reg, Reg)>> {
        let g = u.src().get(if with_alt { 2 } else { 3 });
        match g {
            Some(g) if !matches!(g.op(), UOps::BARRIER | UOps::IF) => {
                let alt = if with_alt {
                    self.src(u, 3)?
                } else {
                    self.reg(g)?
                };
                Ok(Some((self.reg(g)?, alt)))
            }
            _ => Ok(None),
        }
    }

    fn lower_one(&mut self, i: usize, u: &UOp, ends: &HashMap<usize, usize>) -> Result<Inst> {
        match u.op() {
            UOps::DEFINE_GLOBAL
            | UOps::DEFINE_LOCAL
            | UOps::DEFINE_VAR
            | UOps::CONST
            | UOps::DEFINE_ACC
            | UOps::SPECIAL => self.lower_define(i, u),
            UOps::ALU | UOps::CAST | UOps::BITCAST | UOps::GEP | UOps::PHI => {
                self.lower_value(i, u)
            }
            UOps::LOAD | UOps::STORE | UOps::WMMA => self.lower_memory(i, u),
            _ => self.lower_control(i, u, ends),
        }
    }

    fn lower_define(&mut self, i: usize, u: &UOp) -> Result<Inst> {
        let inst = match u.op() {
            UOps::DEFINE_GLOBAL => {
                let UArg::Global { idx, .. } = u.arg() else {
                    bail!(Codegen, "INTERP: DEFINE_GLOBAL without a buffer index")
                };
                let s = scalar_dtype(u)?.scalar;
                self.mems.insert(i, (Mem::Global(*idx), s));
                self.globals.push((*idx, s));
                Inst::Nop
            }
            UOps::DEFINE_LOCAL => {
                let UArg::Local { name, size } = u.arg() else {
                    bail!(Codegen, "INTERP: DEFINE_LOCAL without a size")
                };
                let elem = scalar_dtype(u)?.scalar;
                self.mems.insert(i, (Mem::Local(self.locals.len()), elem));
                self.locals.push(LocalBuf {
                    name: name.clone(),
                    elem,
                    size: *size,
                });
                Inst::Nop
            }
            UOps::DEFINE_VAR => {
                let UArg::Var { name, .. } = u.arg() else {
                    bail!(Codegen, "INTERP: DEFINE_VAR without a name")
                };
                let dst = self.fresh(scalar_dtype(u)?);
                self.regs[i] = Some(dst);
                self.vars.push(name.clone());
                // the value index is fixed up once every variable is known
                Inst::Var {
                    dst,
                    val: self.vars.len() - 1,
                }
            }
            UOps::CONST | UOps::DEFINE_ACC => {
                let d = scalar_dtype(u)?;
                let v = if u.op() == UOps::CONST {
                    u.const_value()
                } else {
                    u.src().first().and_then(|s| s.const_value())
                };
                let Some(v) = v else {
                    bail!(Codegen, "INTERP: {} without a constant", u.op().name())
                };
                let dst = self.fresh(d);
                self.regs[i] = Some(dst);
                Inst::Const {
                    dst,
                    bits: encode(v, d.scalar),
                }
            }
            UOps::SPECIAL => {
                let UArg::Special { axis, name, .. } = u.arg() else {
                    bail!(Codegen, "INTERP: SPECIAL without an axis")
                };
                let kind = match name.chars().next() {
                    Some('g') => SpecialKind::Group,
                    Some('l') => SpecialKind::Local,
                    Some('i') => SpecialKind::Global,
                    _ => bail!(Codegen, "INTERP: SPECIAL {name:?} is not gidx/lidx/idx"),
                };
                ensure!(*axis < 3, Codegen, "INTERP: SPECIAL {name} on axis {axis}");
                let dst = self.fresh(scalar_dtype(u)?);
                self.regs[i] = Some(dst);
                Inst::Special {
                    dst,
                    kind,
                    axis: *axis,
                }
            }
            op => bail!(Codegen, "INTERP: {} is not handled here", op.name()),
        };
        Ok(inst)
    }

    fn lower_control(&mut self, i: usize, u: &UOp, ends: &HashMap<usize, usize>) -> Result<Inst> {
        let inst = match u.op() {
            UOps::RANGE => {
                let dst = self.fresh(scalar_dtype(u)?);
                self.regs[i] = Some(dst);
                let Some(&exit) = ends.get(&i) else {
                    bail!(Codegen, "INTERP: RANGE at {i} has no ENDRANGE")
                };
                Inst::Range {
                    dst,
                    start: self.src(u, 0)?,
                    end: self.src(u, 1)?,
                    exit: exit + 1,
                }
            }
            UOps::ENDRANGE => {
                let rng = self.pos(&u.src()[0])?;
                Inst::EndRange {
                    body: rng + 1,
                    ctr: self.src(u, 0)?,
                    end: self.src(&u.src()[0], 1)?,
                }
            }
            UOps::IF => {
                let Some(&exit) = ends.get(&i) else {
                    bail!(Codegen, "INTERP: IF at {i} has no ENDIF")
                };
                Inst::If {
                    cond: self.src(u, 0)?,
                    exit: exit + 1,
                }
            }
            UOps::ENDIF => Inst::EndIf,
            UOps::NOOP | UOps::BARRIER => Inst::Nop,
            UOps::SINK | UOps::VAR | UOps::UNMUL => {
                bail!(
                    Codegen,
                    "INTERP: {} cannot be executed (not a linearized kernel)",
                    u.op().name()
                )
            }
            op => bail!(Codegen, "INTERP: {} is not handled here", op.name()),
        };
        Ok(inst)
    }

    fn lower_value(&mut self, i: usize, u: &UOp) -> Result<Inst> {
        let inst = match u.op() {
            UOps::ALU => {
                let Some(op) = u.alu_op() else {
                    bail!(Codegen, "INTERP: ALU without an op")
                };
                let want = match op {
                    Op::Unary(_) => 1,
                    Op::Binary(_) => 2,
                    Op::Ternary(_) => 3,
                    _ => 0,
                };
                ensure!(
                    want == u.src().len(),
                    Codegen,
                    "INTERP: {} with {} sources",
                    op.name(),
                    u.src().len()
                );
                let src = (0..want)
                    .map(|k| self.src(u, k))
                    .collect::<Result<Vec<_>>>()?;
                let dst = self.fresh(scalar_dtype(u)?);
                self.regs[i] = Some(dst);
                Inst::Alu { dst, op, src }
            }
            UOps::CAST | UOps::BITCAST => {
                let d = scalar_dtype(u)?;
                let src = (0..u.src().len())
                    .map(|k| self.src(u, k))
                    .collect::<Result<Vec<_>>>()?;
                let dst = self.fresh(d);
                self.regs[i] = Some(dst);
                match (u.op(), src.as_slice()) {
                    (UOps::BITCAST, [s]) => Inst::Bitcast { dst, src: *s },
                    (UOps::CAST, [s]) if s.width == dst.width || s.width == 1 => {
                        Inst::Cast { dst, src: *s }
                    }
                    (UOps::CAST, many)
                        if many.len() == dst.width && many.iter().all(|s| s.width == 1) =>
                    {
                        Inst::Vectorize {
                            dst,
                            src: many.to_vec(),
                        }
                    }
                    _ => bail!(
                        Codegen,
                        "INTERP: {} to {d} from {} sources does not fit",
                        u.op().name(),
                        src.len()
                    ),
                }
            }
            UOps::GEP => {
                let UArg::Gep(lane) = u.arg() else {
                    bail!(Codegen, "INTERP: GEP without a lane")
                };
                let s = self.src(u, 0)?;
                ensure!(
                    *lane < s.width,
                    Codegen,
                    "INTERP: GEP lane {lane} of a {}-wide value",
                    s.width
                );
                self.regs[i] = Some(Reg {
                    add: s.add + lane,
                    width: 1,
                    ..s
                });
                Inst::Nop
            }
            UOps::PHI => {
                let dst = self.src(u, 0)?;
                self.regs[i] = Some(dst);
                Inst::Phi {
                    dst,
                    src: self.src(u, 1)?,
                }
            }
            op => bail!(Codegen, "INTERP: {} is not handled here", op.name()),
        };
        Ok(inst)
    }

    fn lower_memory(&mut self, i: usize, u: &UOp) -> Result<Inst> {
        let inst = match u.op() {
            UOps::LOAD => {
                let (mem, elem) = self.mem(u)?;
                let dst = self.fresh(scalar_dtype(u)?);
                let (idx, gate) = (self.src(u, 1)?, self.gate(u, true)?);
                self.regs[i] = Some(dst);
                Inst::Load {
                    dst,
                    mem,
                    elem,
                    idx,
                    gate,
                }
            }
            UOps::STORE => {
                let (mem, elem) = self.mem(u)?;
                let gate = self.gate(u, false)?.map(|(g, _)| g);
                Inst::Store {
                    mem,
                    elem,
                    idx: self.src(u, 1)?,
                    val: self.src(u, 2)?,
                    gate,
                }
            }
            UOps::WMMA => {
                let UArg::Wmma(w) = u.arg() else {
                    bail!(Codegen, "INTERP: WMMA without its arg")
                };
                let layout = WmmaLayout::for_arg(&w.device, &w.upcast_sizes)?;
                let (a, b, c) = (self.src(u, 0)?, self.src(u, 1)?, self.src(u, 2)?);
                let dst = self.fresh(scalar_dtype(u)?);
                self.regs[i] = Some(dst);
                Inst::Wmma {
                    dst,
                    a,
                    b,
                    c,
                    layout,
                }
            }
            op => bail!(Codegen, "INTERP: {} is not handled here", op.name()),
        };
        Ok(inst)
    }
}

/// Pair every RANGE/IF with the position of its ENDRANGE/ENDIF.
fn scope_ends(uops: &[UOp], index: &HashMap<UOp, usize>) -> Result<HashMap<usize, usize>> {
    let mut ends = HashMap::new();
    for (i, u) in uops.iter().enumerate() {
        if matches!(u.op(), UOps::ENDRANGE | UOps::ENDIF) {
            let Some(&start) = u.src().first().and_then(|s| index.get(s)) else {
                bail!(
                    Codegen,
                    "INTERP: {} at {i} has no matching start",
                    u.op().name()
                )
            };
            ensure!(
                start < i,
                Codegen,
                "INTERP: {} at {i} closes a later scope",
                u.op().name()
            );
            ends.insert(start, i);
        }
    }
    Ok(ends)
}

/// Lower a linear UOp list.
pub fn lower(uops: &[UOp]) -> Result<Lowered> {
    let index: HashMap<UOp, usize> = uops
        .iter()
        .enumerate()
        .map(|(i, u)| (u.clone(), i))
        .collect();
    let ends = scope_ends(uops, &index)?;
    let mut l = Lower {
        uops,
        index,
        regs: vec![None; uops.len()],
        units: 0,
        mems: HashMap::new(),
        locals: vec![],
        globals: vec![],
        vars: vec![],
    };
    let mut insts = Vec::with_capacity(uops.len());
    for (i, u) in l.uops.iter().enumerate() {
        let inst = l
            .lower_one(i, u, &ends)
            .map_err(|e| crate::Error::Codegen(format!("{} (uop {i})", e.message())))?;
        insts.push(inst);
    }
    // variables take their values in name order
    let mut sorted = l.vars.clone();
    sorted.sort();
    sorted.dedup();
    for inst in insts.iter_mut() {
        if let Inst::Var { val, .. } = inst {
            let name = &l.vars[*val];
            *val = sorted.iter().position(|n| n == name).unwrap_or(0);
        }
    }
    Ok(Lowered {
        insts,
        units: l.units,
        locals: l.locals,
        vars: sorted,
        globals: l.globals,
    })
}
