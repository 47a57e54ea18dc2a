//! The PTX instructions the interpreter knows, decoded from their opcode text (`mad.lo.s32`,
//! `setp.gtu.f32`, `ld.global.nc.v4.f32`, `cvt.rzi.s32.f32`, ...) into [`Op`]. Every modifier is
//! either understood or an error naming it and the opcode; cache and memory-order qualifiers
//! (`.nc`, `.volatile`, `.relaxed`, `.ca`, `.uni`, `.aligned`, ...) are accepted where PTX allows
//! them, because a sequential interpreter has one coherent memory.
//!
//! Not guaranteed: the packed `.f16x2`/`.bf16x2` forms, texture/surface, warp shuffles, video and
//! `.func` call instructions are errors (LLVM does not write them for rawgrad's kernels).

/// The mnemonics [`decode`] knows (the first part of an opcode); `tools/ptx-coverage.sh` reads
/// this list (the quoted strings between the markers) to name the ones a run never executed.
// ptx-opcodes-begin
pub const OPCODES: &[&str] = &[
    "abs", "add", "and", "bar", "barrier", "bra", "brev", "clz", "cnot", "copysign", "cos", "cvt",
    "cvta", "div", "ex2", "exit", "fma", "ld", "lg2", "mad", "max", "min", "mma", "mov", "mul",
    "neg", "not", "or", "popc", "rcp", "rem", "ret", "rsqrt", "selp", "setp", "shf", "shl", "shr",
    "sin", "sqrt", "st", "sub", "xor",
];
// ptx-opcodes-end

/// Value class of a PTX type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    U,
    S,
    B,
    F,
    Bf,
    Pred,
}

/// A PTX fundamental type (`.s32` is `Ty { kind: S, bits: 32 }`; `.pred` has 1 bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ty {
    pub kind: Kind,
    pub bits: u32,
}

impl Ty {
    pub fn parse(s: &str) -> Option<Ty> {
        if s == "pred" {
            return Some(Ty {
                kind: Kind::Pred,
                bits: 1,
            });
        }
        let (kind, n) = if let Some(n) = s.strip_prefix("bf") {
            (Kind::Bf, n)
        } else {
            let k = match s.as_bytes().first()? {
                b'u' => Kind::U,
                b's' => Kind::S,
                b'b' => Kind::B,
                b'f' => Kind::F,
                _ => return None,
            };
            (k, &s[1..])
        };
        let bits: u32 = n.parse().ok()?;
        let ok = match kind {
            Kind::F => matches!(bits, 16 | 32 | 64),
            Kind::Bf => bits == 16,
            _ => matches!(bits, 8 | 16 | 32 | 64),
        };
        ok.then_some(Ty { kind, bits })
    }

    pub fn is_float(self) -> bool {
        matches!(self.kind, Kind::F | Kind::Bf)
    }

    pub fn bytes(self) -> u32 {
        self.bits.div_ceil(8)
    }
}

/// A state space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Generic,
    Global,
    Shared,
    Local,
    Param,
    Const,
}

impl Space {
    fn parse(s: &str) -> Option<Space> {
        Some(match s {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "param" => Space::Param,
            "const" => Space::Const,
            _ => return None,
        })
    }
}

/// A special register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sreg {
    Tid(usize),
    Ntid(usize),
    Ctaid(usize),
    Nctaid(usize),
    Laneid,
    Warpid,
}

impl Sreg {
    pub fn parse(s: &str) -> Option<Sreg> {
        let (name, dim) = s
            .strip_prefix('%')?
            .split_once('.')
            .unwrap_or((&s[1..], ""));
        let d = match dim {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            "" => 3,
            _ => return None,
        };
        Some(match (name, d) {
            ("tid", 0..=2) => Sreg::Tid(d),
            ("ntid", 0..=2) => Sreg::Ntid(d),
            ("ctaid", 0..=2) => Sreg::Ctaid(d),
            ("nctaid", 0..=2) => Sreg::Nctaid(d),
            ("laneid", 3) => Sreg::Laneid,
            ("warpid", 3) => Sreg::Warpid,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Copysign,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Un {
    Neg,
    Abs,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
    Rcp,
    Sqrt,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
}

/// `setp` comparisons (the `u` forms are true when either side is NaN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

/// Integer `mul`/`mad` result half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Lo,
    Hi,
    Wide,
}

/// Rounding: `.rn .rz .rm .rp` (float results) or `.rni .rzi .rmi .rpi` (to an integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rnd {
    N,
    Z,
    M,
    P,
}

/// Float modifiers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FMods {
    pub ftz: bool,
    pub sat: bool,
    /// `min/max.NaN`: a NaN operand gives NaN.
    pub nan: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Mov(Ty),
    Bin(Bin, Ty, FMods),
    /// Integer `mul`.
    Mul(Half, Ty),
    /// Integer `mad`.
    Mad(Half, Ty),
    /// `fma.rn` / float `mad.rn`.
    Fma(Ty, FMods),
    Un(Un, Ty, FMods),
    Setp(Cmp, Ty, Option<BoolOp>, FMods),
    Selp(Ty),
    Cvt {
        dst: Ty,
        src: Ty,
        /// Float rounding (`.rn`..) or, with `int`, rounding to an integer value (`.rni`..).
        rnd: Option<Rnd>,
        int: bool,
        f: FMods,
    },
    /// `cvta` (generic from `space`) / `cvta.to` (`space` from generic).
    Cvta(bool, Space),
    /// `ld` with the vector width (1, 2, 4).
    Ld(Space, u32, Ty),
    St(Space, u32, Ty),
    Bar,
    Bra,
    Ret,
    /// `shf.{l,r}.{wrap,clamp}.b32` (left, wrap).
    Shf(bool, bool),
    /// `mma.sync.aligned.m16n8k16.row.col.f32.<ab>.<ab>.f32` with the A/B type (`f16`, `bf16`).
    Mma(Ty),
}

/// Modifiers left to consume.
struct Mods<'a> {
    opcode: &'a str,
    rest: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    fn take(&mut self, w: &str) -> bool {
        match self.rest.iter().position(|&x| x == w) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }
    fn take_any(&mut self, ws: &[&str]) -> bool {
        let mut any = false;
        for w in ws {
            any |= self.take(w);
        }
        any
    }
    fn types(&mut self) -> Vec<Ty> {
        let mut out = vec![];
        self.rest.retain(|w| match Ty::parse(w) {
            Some(t) => {
                out.push(t);
                false
            }
            None => true,
        });
        out
    }
    fn one_type(&mut self) -> Result<Ty, String> {
        match self.types()[..] {
            [t] => Ok(t),
            _ => Err(format!("{}: expected one type", self.opcode)),
        }
    }
    fn rnd(&mut self) -> (Option<Rnd>, bool) {
        for (w, r, int) in [
            ("rn", Rnd::N, false),
            ("rz", Rnd::Z, false),
            ("rm", Rnd::M, false),
            ("rp", Rnd::P, false),
            ("rni", Rnd::N, true),
            ("rzi", Rnd::Z, true),
            ("rmi", Rnd::M, true),
            ("rpi", Rnd::P, true),
        ] {
            if self.take(w) {
                return (Some(r), int);
            }
        }
        (None, false)
    }
    fn fmods(&mut self) -> FMods {
        FMods {
            ftz: self.take("ftz"),
            sat: self.take("sat"),
            nan: self.take("NaN"),
        }
    }
    fn space(&mut self) -> Space {
        let mut sp = Space::Generic;
        self.rest.retain(|w| match Space::parse(w) {
            Some(s) => {
                sp = s;
                false
            }
            None => true,
        });
        sp
    }
    fn done(self, op: Op) -> Result<Op, String> {
        match self.rest.first() {
            None => Ok(op),
            Some(w) => Err(format!("unknown modifier .{w} in {}", self.opcode)),
        }
    }
}

/// Float arithmetic accepts only round-to-nearest (the default) or an approximation, both of which
/// the interpreter computes exactly rounded.
fn float_rounding(m: &mut Mods, ty: Ty) -> Result<(), String> {
    let (r, int) = m.rnd();
    m.take_any(&["approx", "full"]);
    match (r, int) {
        (None | Some(Rnd::N), false) => Ok(()),
        _ if !ty.is_float() => Err(format!("rounding modifier on integer {}", m.opcode)),
        _ => Err(format!(
            "{}: only round-to-nearest is modelled for float arithmetic",
            m.opcode
        )),
    }
}

const MEM_QUALIFIERS: &[&str] = &[
    "nc", "volatile", "relaxed", "weak", "acquire", "release", "ca", "cg", "cs", "lu", "cv", "wb",
    "wt", "sys", "gpu", "cta",
];

fn bin_op(base: &str) -> Option<Bin> {
    Some(match base {
        "add" => Bin::Add,
        "sub" => Bin::Sub,
        "div" => Bin::Div,
        "rem" => Bin::Rem,
        "min" => Bin::Min,
        "max" => Bin::Max,
        "and" => Bin::And,
        "or" => Bin::Or,
        "xor" => Bin::Xor,
        "shl" => Bin::Shl,
        "shr" => Bin::Shr,
        "copysign" => Bin::Copysign,
        _ => return None,
    })
}

fn un_op(base: &str) -> Option<Un> {
    Some(match base {
        "neg" => Un::Neg,
        "abs" => Un::Abs,
        "not" => Un::Not,
        "cnot" => Un::Cnot,
        "popc" => Un::Popc,
        "clz" => Un::Clz,
        "brev" => Un::Brev,
        "rcp" => Un::Rcp,
        "sqrt" => Un::Sqrt,
        "rsqrt" => Un::Rsqrt,
        "ex2" => Un::Ex2,
        "lg2" => Un::Lg2,
        "sin" => Un::Sin,
        "cos" => Un::Cos,
        _ => return None,
    })
}

fn cmp_op(m: &mut Mods) -> Option<Cmp> {
    use Cmp::*;
    let all = [
        ("eq", Eq),
        ("ne", Ne),
        ("lt", Lt),
        ("le", Le),
        ("gt", Gt),
        ("ge", Ge),
        ("lo", Lo),
        ("ls", Ls),
        ("hi", Hi),
        ("hs", Hs),
        ("equ", Equ),
        ("neu", Neu),
        ("ltu", Ltu),
        ("leu", Leu),
        ("gtu", Gtu),
        ("geu", Geu),
        ("num", Num),
        ("nan", Nan),
    ];
    all.iter().find(|(w, _)| m.take(w)).map(|&(_, c)| c)
}

/// Decodes an opcode (`base.mod.mod...`).
pub fn decode(opcode: &str) -> Result<Op, String> {
    let mut parts = opcode.split('.');
    let base = parts.next().unwrap_or("");
    let mut m = Mods {
        opcode,
        rest: parts.collect(),
    };
    let float = m
        .rest
        .iter()
        .any(|w| Ty::parse(w).is_some_and(Ty::is_float));
    let op = match base {
        "mov" => Op::Mov(m.one_type()?),
        "mul" | "mad" if !float => int_mul(&mut m, base == "mul")?,
        "setp" => setp(&mut m)?,
        "selp" => Op::Selp(m.one_type()?),
        "cvt" => {
            let (rnd, int) = m.rnd();
            let f = m.fmods();
            match m.types()[..] {
                [dst, src] => Op::Cvt {
                    dst,
                    src,
                    rnd,
                    int,
                    f,
                },
                _ => {
                    return Err(format!(
                        "{opcode}: cvt needs a destination and a source type"
                    ))
                }
            }
        }
        "cvta" => {
            let to = m.take("to");
            let sp = m.space();
            m.types();
            Op::Cvta(to, sp)
        }
        "ld" | "st" => memory(&mut m, base == "ld")?,
        "bar" | "barrier" => {
            m.take_any(&["sync", "aligned"]);
            Op::Bar
        }
        "bra" => {
            m.take("uni");
            Op::Bra
        }
        "ret" | "exit" => Op::Ret,
        "shf" => shf(&mut m)?,
        "mma" => mma(&mut m)?,
        b => arith(&mut m, b)?,
    };
    m.done(op)
}

/// Float `mul`/`fma`/`mad`, and the binary and unary ALU ops.
fn arith(m: &mut Mods, base: &str) -> Result<Op, String> {
    let known = matches!(base, "mul" | "fma" | "mad") || bin_op(base).is_some();
    if !known && un_op(base).is_none() {
        return Err(format!("unknown instruction {}", m.opcode));
    }
    let f = m.fmods();
    let t = m.one_type()?;
    float_rounding(m, t)?;
    Ok(match base {
        "mul" => Op::Bin(Bin::Mul, t, f),
        "fma" | "mad" => Op::Fma(t, f),
        b => match (bin_op(b), un_op(b)) {
            (Some(o), _) => Op::Bin(o, t, f),
            (_, Some(o)) => Op::Un(o, t, f),
            _ => return Err(format!("unknown instruction {}", m.opcode)),
        },
    })
}

/// Integer `mul`/`mad` with `.lo`/`.hi`/`.wide`.
fn int_mul(m: &mut Mods, mul: bool) -> Result<Op, String> {
    let h = if m.take("lo") {
        Half::Lo
    } else if m.take("hi") {
        Half::Hi
    } else if m.take("wide") {
        Half::Wide
    } else {
        return Err(format!(
            "{}: integer mul/mad needs .lo, .hi or .wide",
            m.opcode
        ));
    };
    let t = m.one_type()?;
    Ok(if mul { Op::Mul(h, t) } else { Op::Mad(h, t) })
}

fn setp(m: &mut Mods) -> Result<Op, String> {
    let c = cmp_op(m).ok_or_else(|| format!("{}: no comparison", m.opcode))?;
    let b = [
        ("and", BoolOp::And),
        ("or", BoolOp::Or),
        ("xor", BoolOp::Xor),
    ]
    .into_iter()
    .find(|(w, _)| m.take(w))
    .map(|x| x.1);
    let f = m.fmods();
    Ok(Op::Setp(c, m.one_type()?, b, f))
}

/// `ld` / `st` with state space, qualifiers and vector width.
fn memory(m: &mut Mods, ld: bool) -> Result<Op, String> {
    let sp = m.space();
    m.take_any(MEM_QUALIFIERS);
    let n = if m.take("v2") {
        2
    } else if m.take("v4") {
        4
    } else {
        1
    };
    let t = m.one_type()?;
    Ok(if ld {
        Op::Ld(sp, n, t)
    } else {
        Op::St(sp, n, t)
    })
}

fn shf(m: &mut Mods) -> Result<Op, String> {
    let left = m.take("l");
    if !left && !m.take("r") {
        return Err(format!("{}: shf needs .l or .r", m.opcode));
    }
    let wrap = m.take("wrap");
    if !wrap && !m.take("clamp") {
        return Err(format!("{}: shf needs .wrap or .clamp", m.opcode));
    }
    if m.one_type()?.bits != 32 {
        return Err(format!("{}: shf is .b32", m.opcode));
    }
    Ok(Op::Shf(left, wrap))
}

fn mma(m: &mut Mods) -> Result<Op, String> {
    m.take_any(&["sync", "aligned", "m16n8k16", "row", "col"]);
    match m.types()[..] {
        [d, a, b, c] if d == c && a == b && d.kind == Kind::F && d.bits == 32 && a.bits == 16 => {
            Ok(Op::Mma(a))
        }
        _ => Err(format!(
            "{}: only m16n8k16 f32 <- f16/bf16 is modelled",
            m.opcode
        )),
    }
}
