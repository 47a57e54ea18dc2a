//! Text forms of a linear UOp list: [`print_uops`] (tinygrad's `UOpGraph.print`, for the DEBUG dump)
//! and the exact, versioned [`serialize`] / [`deserialize`] pair that the INTERP device and the
//! emulated GPUs use as their "binary".
//!
//! Serialized form: a header line `rawgrad-uops v1`, then one line per UOp:
//! `index OP dtype [src,indices] arg...` (a source may name a later line: the toposort hoists
//! DEFINE_ACC above its RANGE). dtypes are `float32`, `float32.v4`, `p.float32`
//! (pointer) or `-` (none); strings are double-quoted with backslash escapes; float constants are
//! written as their IEEE-754 bits so every value (NaN payloads, -0.0) round-trips.
//!
//! Not guaranteed: compatibility with tinygrad's pickled form (there is none); future versions bump
//! the header.

use std::fmt::Write as _;

use crate::codegen::uops::{UArg, UOp, UOps, WmmaArg};
use crate::dtype::{ConstValue, DType, Scalar};
use crate::ops::{BinaryOps, Op, TernaryOps, UnaryOps};
use crate::{bail, Result};

const HEADER: &str = "rawgrad-uops v1";

fn index_of(uops: &[UOp]) -> std::collections::HashMap<UOp, usize> {
    uops.iter()
        .enumerate()
        .map(|(i, u)| (u.clone(), i))
        .collect()
}

fn src_indices(u: &UOp, index: &std::collections::HashMap<UOp, usize>) -> Result<Vec<usize>> {
    u.src()
        .iter()
        .map(|s| match index.get(s) {
            Some(&i) => Ok(i),
            None => bail!(
                Codegen,
                "uop list: a source of {} ({:?}) is not in the list",
                u.op().name(),
                s
            ),
        })
        .collect()
}

/// tinygrad's `UOpGraph.print`: one line per UOp with index, op, dtype, source indices and arg
/// (0.9.1's linearizer prints it at `DEBUG>=5`; the rendered source is printed at 4).
pub fn print_uops(uops: &[UOp]) -> String {
    let index = index_of(uops);
    let mut out = String::new();
    for (i, u) in uops.iter().enumerate() {
        let srcs: Vec<String> = u
            .src()
            .iter()
            .map(|s| index.get(s).map_or("?".into(), |i| i.to_string()))
            .collect();
        let dt = u.dtype().map_or(String::new(), |d| format!("{d}"));
        let _ = writeln!(
            out,
            "{i:4} {:20}: {dt:25} {:32} {}",
            format!("UOps.{}", u.op().name()),
            format!("[{}]", srcs.join(", ")),
            u.arg()
        );
    }
    out
}

fn dtype_token(d: Option<DType>) -> String {
    let Some(d) = d else { return "-".into() };
    let mut s = String::new();
    if d.ptr {
        s.push_str("p.");
    }
    s.push_str(d.scalar.long_name());
    if d.count != 1 {
        let _ = write!(s, ".v{}", d.count);
    }
    s
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == ' ' => {
                let _ = write!(out, "\\u{:x};", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn arg_tokens(a: &UArg) -> String {
    match a {
        UArg::None => "N".into(),
        UArg::Const(ConstValue::Bool(b)) => format!("C b {}", *b as u8),
        UArg::Const(ConstValue::Int(i)) => format!("C i {i}"),
        UArg::Const(ConstValue::Float(f)) => format!("C f {:#018x}", f.to_bits()),
        UArg::Alu(op) => format!("A {}", op.name()),
        UArg::Global { idx, is_output } => format!("G {idx} {}", *is_output as u8),
        UArg::Var { name, min, max } => format!("V {} {min} {max}", quote(name)),
        UArg::Local { name, size } => format!("L {} {size}", quote(name)),
        UArg::Acc { buf, idx } => format!("Acc {buf} {idx}"),
        UArg::Special { axis, name, size } => format!("S {axis} {} {size}", quote(name)),
        UArg::Range {
            depth,
            idx,
            is_reduce,
        } => format!("R {depth} {idx} {}", *is_reduce as u8),
        UArg::Gep(i) => format!("E {i}"),
        UArg::Wmma(w) => {
            let sizes: Vec<String> = w.upcast_sizes.iter().map(|s| s.to_string()).collect();
            format!(
                "W {} {} {} {} {} {} [{}] {}",
                quote(&w.name),
                w.dims[0],
                w.dims[1],
                w.dims[2],
                dtype_token(Some(w.dtype_in)),
                dtype_token(Some(w.dtype_out)),
                sizes.join(","),
                quote(&w.device)
            )
        }
    }
}

/// The exact text form of a linear UOp list (see the module doc).
pub fn serialize(uops: &[UOp]) -> Result<String> {
    let index = index_of(uops);
    let mut out = String::from(HEADER);
    out.push('\n');
    for (i, u) in uops.iter().enumerate() {
        let srcs: Vec<String> = src_indices(u, &index)?
            .iter()
            .map(|s| s.to_string())
            .collect();
        let _ = writeln!(
            out,
            "{i} {} {} [{}] {}",
            u.op().name(),
            dtype_token(u.dtype()),
            srcs.join(","),
            arg_tokens(u.arg())
        );
    }
    Ok(out)
}

/// Split a line into tokens; double-quoted strings are one token (unescaped).
fn tokenize(line: &str) -> Result<Vec<String>> {
    let mut toks = vec![];
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut tok = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => bail!(InvalidArgument, "unterminated string"),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('u') => {
                            let hex: String = chars.by_ref().take_while(|&c| c != ';').collect();
                            let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                            match ch {
                                Some(ch) => tok.push(ch),
                                None => bail!(InvalidArgument, "bad escape \\u{hex}"),
                            }
                        }
                        Some(e @ ('"' | '\\')) => tok.push(e),
                        other => bail!(InvalidArgument, "bad escape {other:?}"),
                    },
                    Some(ch) => tok.push(ch),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                tok.push(c);
                chars.next();
            }
        }
        toks.push(tok);
    }
    Ok(toks)
}

fn parse_dtype(t: &str) -> Result<Option<DType>> {
    if t == "-" {
        return Ok(None);
    }
    let (ptr, rest) = match t.strip_prefix("p.") {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (name, count) = match rest.split_once(".v") {
        Some((n, c)) => match c.parse::<u16>() {
            Ok(c) if c > 1 => (n, c),
            _ => bail!(InvalidArgument, "bad vector width in dtype {t:?}"),
        },
        None => (rest, 1),
    };
    let Some(scalar) = Scalar::from_name(name) else {
        bail!(InvalidArgument, "unknown dtype {t:?}")
    };
    Ok(Some(DType { scalar, count, ptr }))
}

fn alu_op_from_name(name: &str) -> Option<Op> {
    use BinaryOps as B;
    use UnaryOps as U;
    let unary = [
        U::EXP2,
        U::LOG2,
        U::CAST,
        U::BITCAST,
        U::SIN,
        U::SQRT,
        U::NEG,
        U::RECIP,
    ];
    let binary = [
        B::ADD,
        B::MUL,
        B::IDIV,
        B::MAX,
        B::MOD,
        B::CMPLT,
        B::CMPNE,
        B::XOR,
        B::SHR,
        B::SHL,
    ];
    let ternary = [TernaryOps::WHERE, TernaryOps::MULACC];
    let all = unary
        .iter()
        .map(|&o| Op::from(o))
        .chain(binary.iter().map(|&o| Op::from(o)))
        .chain(ternary.iter().map(|&o| Op::from(o)));
    all.into_iter().find(|o| o.name() == name)
}

struct Args<'a> {
    toks: &'a [String],
    pos: usize,
}

impl Args<'_> {
    fn next(&mut self) -> Result<&str> {
        let t = self.toks.get(self.pos);
        self.pos += 1;
        match t {
            Some(t) => Ok(t),
            None => bail!(InvalidArgument, "missing arg field"),
        }
    }
    fn num<T: std::str::FromStr>(&mut self) -> Result<T> {
        let t = self.next()?;
        match t.parse::<T>() {
            Ok(v) => Ok(v),
            Err(_) => bail!(InvalidArgument, "bad number {t:?}"),
        }
    }
    fn flag(&mut self) -> Result<bool> {
        match self.next()? {
            "0" => Ok(false),
            "1" => Ok(true),
            t => bail!(InvalidArgument, "bad flag {t:?}"),
        }
    }
}

fn parse_const(a: &mut Args) -> Result<ConstValue> {
    Ok(match a.next()? {
        "b" => ConstValue::Bool(a.flag()?),
        "i" => ConstValue::Int(a.num()?),
        "f" => {
            let t = a.next()?;
            let bits = t
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok());
            match bits {
                Some(b) => ConstValue::Float(f64::from_bits(b)),
                None => bail!(InvalidArgument, "bad float bits {t:?}"),
            }
        }
        k => bail!(InvalidArgument, "bad constant kind {k:?}"),
    })
}

fn parse_wmma(a: &mut Args) -> Result<UArg> {
    let name = a.next()?.to_string();
    let dims = [a.num()?, a.num()?, a.num()?];
    let (din, dout) = (parse_dtype(a.next()?)?, parse_dtype(a.next()?)?);
    let (Some(dtype_in), Some(dtype_out)) = (din, dout) else {
        bail!(InvalidArgument, "WMMA dtypes missing")
    };
    let sizes = a.next()?;
    let inner = sizes.trim_start_matches('[').trim_end_matches(']');
    let mut upcast_sizes = vec![];
    for s in inner.split(',').filter(|s| !s.is_empty()) {
        match s.parse() {
            Ok(v) => upcast_sizes.push(v),
            Err(_) => bail!(InvalidArgument, "bad WMMA size {s:?}"),
        }
    }
    let device = a.next()?.to_string();
    Ok(UArg::Wmma(Box::new(WmmaArg {
        name,
        dims,
        dtype_in,
        dtype_out,
        upcast_sizes,
        device,
    })))
}

fn parse_arg(a: &mut Args) -> Result<UArg> {
    Ok(match a.next()? {
        "N" => UArg::None,
        "C" => UArg::Const(parse_const(a)?),
        "A" => {
            let n = a.next()?;
            match alu_op_from_name(n) {
                Some(op) => UArg::Alu(op),
                None => bail!(InvalidArgument, "unknown ALU op {n:?}"),
            }
        }
        "G" => UArg::Global {
            idx: a.num()?,
            is_output: a.flag()?,
        },
        "V" => UArg::Var {
            name: a.next()?.to_string(),
            min: a.num()?,
            max: a.num()?,
        },
        "L" => UArg::Local {
            name: a.next()?.to_string(),
            size: a.num()?,
        },
        "Acc" => UArg::Acc {
            buf: a.num()?,
            idx: a.num()?,
        },
        "S" => UArg::Special {
            axis: a.num()?,
            name: a.next()?.to_string(),
            size: a.num()?,
        },
        "R" => UArg::Range {
            depth: a.num()?,
            idx: a.num()?,
            is_reduce: a.flag()?,
        },
        "E" => UArg::Gep(a.num()?),
        "W" => parse_wmma(a)?,
        k => bail!(InvalidArgument, "unknown arg kind {k:?}"),
    })
}

/// One parsed line: the node's fields with its sources as line indices.
struct Raw {
    op: UOps,
    dtype: Option<DType>,
    src: Vec<usize>,
    arg: UArg,
}

fn parse_line(toks: &[String], n: usize) -> Result<Raw> {
    let mut a = Args { toks, pos: 0 };
    let idx: usize = a.num()?;
    if idx != n {
        bail!(InvalidArgument, "index {idx}, expected {n}");
    }
    let opn = a.next()?;
    let Some(op) = UOps::from_name(opn) else {
        bail!(InvalidArgument, "unknown op {opn:?}")
    };
    let dtype = parse_dtype(a.next()?)?;
    let srct = a.next()?;
    let inner = srct
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or("?");
    let mut src = vec![];
    for s in inner.split(',').filter(|s| !s.is_empty()) {
        match s.parse::<usize>() {
            Ok(i) => src.push(i),
            Err(_) => bail!(InvalidArgument, "bad source {s:?}"),
        }
    }
    let arg = parse_arg(&mut a)?;
    if a.pos != toks.len() {
        bail!(InvalidArgument, "trailing fields {:?}", &toks[a.pos..]);
    }
    Ok(Raw {
        op,
        dtype,
        src,
        arg,
    })
}

/// Build the nodes of `raw` (sources may point forward: a hoisted DEFINE_ACC names its RANGE).
fn build(raw: &[Raw]) -> Result<Vec<UOp>> {
    let mut built: Vec<Option<UOp>> = vec![None; raw.len()];
    let mut on_stack = vec![false; raw.len()];
    for root in 0..raw.len() {
        let mut stack = vec![root];
        while let Some(&i) = stack.last() {
            if built[i].is_some() {
                stack.pop();
                continue;
            }
            on_stack[i] = true;
            let mut pending = None;
            for &s in &raw[i].src {
                if s >= raw.len() {
                    bail!(
                        InvalidArgument,
                        "line of uop {i}: source {s} is past the end"
                    );
                }
                if built[s].is_none() {
                    if on_stack[s] {
                        bail!(InvalidArgument, "uop {i}: source {s} forms a cycle");
                    }
                    pending = Some(s);
                    break;
                }
            }
            if let Some(s) = pending {
                stack.push(s);
                continue;
            }
            let src: Vec<UOp> = raw[i]
                .src
                .iter()
                .filter_map(|&s| built[s].clone())
                .collect();
            let r = &raw[i];
            built[i] = Some(UOp::new(r.op, r.dtype, src, r.arg.clone()));
            on_stack[i] = false;
            stack.pop();
        }
    }
    Ok(built.into_iter().flatten().collect())
}

/// Parse the output of [`serialize`].
pub fn deserialize(text: &str) -> Result<Vec<UOp>> {
    let mut lines = text.lines();
    match lines.next() {
        Some(HEADER) => {}
        other => bail!(
            InvalidArgument,
            "deserialize uops: expected header {HEADER:?}, got {other:?}"
        ),
    }
    let mut raw: Vec<Raw> = vec![];
    for (n, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        let parsed = tokenize(line).and_then(|t| parse_line(&t, raw.len()));
        match parsed {
            Ok(r) => raw.push(r),
            Err(e) => bail!(
                InvalidArgument,
                "deserialize uops: line {}: {}: {line:?}",
                n + 2,
                e.message()
            ),
        }
    }
    build(&raw)
        .map_err(|e| crate::Error::InvalidArgument(format!("deserialize uops: {}", e.message())))
}
