//! PTX text to a [`Kernel`]: the directives LLVM's NVPTX target writes (`.version`, `.target`,
//! `.address_size`, `.visible .entry` with its `.param` list and performance directives, `.reg`,
//! `.shared`, `.local`), labels, guards (`@%p` / `@!%p`) and instructions, with every register,
//! symbol and label resolved to an index or an address and every opcode decoded
//! ([`super::isa::decode`]).
//!
//! Address spaces: parameters get offsets in the parameter block (each aligned to its size or its
//! `.align`, the layout the launch writes into constant buffer 0), `.shared` variables offsets in
//! the CTA's shared memory (from 0, aligned), `.local` variables offsets in each thread's local
//! memory. A symbol used as a value is its address in its own space (PTX's `mov r, sym`).
//!
//! Not guaranteed: anything beyond one module with `.entry` kernels (no `.func` calls, no
//! initialized `.global`/`.const` data: those are errors naming the line). Register scoping by
//! nested `{ }` blocks is flattened (names are module-wide per kernel).

use std::collections::HashMap;

use super::isa::{decode, Op, Sreg};
use crate::{bail, Error, Result};

/// One operand, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Opnd {
    Reg(u32),
    Imm(u64),
    Sreg(Sreg),
    /// `[base + offset]` (symbols folded into the offset).
    Addr(Option<u32>, i64),
    Vec(Vec<Opnd>),
    Label(usize),
    /// `_`
    Sink,
}

/// One decoded instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub op: Op,
    /// `@%p` (false) / `@!%p` (true).
    pub guard: Option<(u32, bool)>,
    pub args: Vec<Opnd>,
    /// The opcode as written (`ld.global.nc.v4.f32`), for coverage counts.
    pub opcode: String,
    /// 1-based line in the PTX text.
    pub line: usize,
    /// The statement as written (for error messages).
    pub text: String,
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub offset: u32,
    pub size: u32,
}

/// One `.entry`, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// Bytes of the parameter block.
    pub param_bytes: u32,
    /// Static shared memory bytes.
    pub shared_bytes: u32,
    /// Local memory bytes per thread.
    pub local_bytes: u32,
    pub nregs: u32,
    pub insts: Vec<Inst>,
}

fn err(line: usize, msg: impl std::fmt::Display) -> Error {
    Error::Compile(format!("PTX line {line}: {msg}"))
}

/// Strips `//` and `/* */` comments, keeping line breaks.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            let end = r.find("*/").map_or(r.len(), |i| i + 2);
            out.extend(r[..end.min(r.len())].chars().filter(|&c| c == '\n'));
            rest = &r[end.min(r.len())..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A statement of the text: (line, text without the terminator).
#[derive(Debug)]
enum Stmt<'a> {
    Open(usize),
    Close(usize),
    Label(usize, &'a str),
    Text(usize, &'a str),
}

/// Splits text into statements: `{`, `}`, `label:` and `...;` (braces inside a statement, as in
/// vector operands, stay in it).
fn statements(src: &str) -> Result<Vec<Stmt<'_>>> {
    let mut out = vec![];
    let (mut i, mut line) = (0usize, 1usize);
    let b = src.as_bytes();
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'{' {
            out.push(Stmt::Open(line));
            i += 1;
        } else if c == b'}' {
            out.push(Stmt::Close(line));
            i += 1;
        } else if [".version", ".target", ".address_size"]
            .iter()
            .any(|d| src[i..].starts_with(d))
        {
            // module directives without a terminator: one line each
            let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
            out.push(Stmt::Text(line, src[i..end].trim()));
            i = end;
        } else {
            let start = i;
            let mut depth = 0i32;
            let mut end = None;
            while i < b.len() {
                match b[i] {
                    b'{' if depth == 0 && src[start..i].contains(".entry") => break,
                    b'(' | b'{' | b'[' => depth += 1,
                    b')' | b'}' | b']' => depth -= 1,
                    b';' if depth == 0 => {
                        end = Some((i, false));
                        break;
                    }
                    b':' if depth == 0
                        && b.get(i + 1) != Some(&b':')
                        && is_label(&src[start..i]) =>
                    {
                        end = Some((i, true));
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            let text = &src[start..end.map_or(i, |e| e.0)];
            let here = line;
            line += text.matches('\n').count();
            match end {
                Some((_, true)) => out.push(Stmt::Label(here, text.trim())),
                Some(_) => out.push(Stmt::Text(here, text.trim())),
                // an entry header runs up to its body's `{`
                None if text.contains(".entry") => out.push(Stmt::Text(here, text.trim())),
                None => return Err(err(here, format!("statement {text:?} has no `;`"))),
            }
            if end.is_some() {
                i += 1;
            }
        }
    }
    Ok(out)
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'))
}

/// The byte size of a PTX type name (`.u32` -> 4).
pub fn type_bytes(t: &str) -> Option<u32> {
    let t = t.trim_start_matches('.');
    match t {
        "pred" => Some(1),
        _ => {
            let bits: u32 = t.get(1..)?.parse().ok()?;
            matches!(t.as_bytes()[0], b'u' | b's' | b'b' | b'f')
                .then_some(bits / 8)
                .filter(|&n| matches!(n, 1 | 2 | 4 | 8))
        }
    }
}

/// `.align N .b8 name[M]` / `.u64 name` -> (align, size, name).
fn decl(line: usize, words: &[&str]) -> Result<(u32, u32, String)> {
    let mut align = 0;
    let mut ty = None;
    let mut name = None;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w == ".align" {
            align = words
                .get(i + 1)
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| err(line, "bad .align"))?;
            i += 1;
        } else if let Some(n) = type_bytes(w).filter(|_| w.starts_with('.')) {
            ty = Some(n);
        } else if w.starts_with('.') {
            return Err(err(line, format!("unknown directive modifier {w}")));
        } else {
            name = Some(w);
        }
        i += 1;
    }
    let (Some(ty), Some(name)) = (ty, name) else {
        return Err(err(line, format!("bad declaration {:?}", words.join(" "))));
    };
    let (name, count) = match name.split_once('[') {
        Some((n, c)) => {
            let c = c.trim_end_matches(']').trim();
            let c: u32 = c
                .parse()
                .map_err(|_| err(line, format!("bad array size [{c}]")))?;
            (n, c)
        }
        None => (name, 1),
    };
    let size = ty
        .checked_mul(count)
        .ok_or_else(|| err(line, "array size overflows"))?;
    Ok((align.max(ty), size, name.to_string()))
}

fn place(end: &mut u32, align: u32, size: u32, line: usize) -> Result<u32> {
    let a = align.max(1);
    let off = end
        .checked_next_multiple_of(a)
        .ok_or_else(|| err(line, "space overflows"))?;
    *end = off
        .checked_add(size)
        .ok_or_else(|| err(line, "space overflows"))?;
    Ok(off)
}

/// Names in scope while a kernel is parsed.
#[derive(Default)]
struct Scope {
    regs: HashMap<String, u32>,
    syms: HashMap<String, u32>,
    labels: HashMap<String, usize>,
}

/// Parses the kernel `name` (or the only `.entry` when `name` is `None`) of a PTX module.
pub fn parse_kernel(src: &str, name: Option<&str>) -> Result<Kernel> {
    let text = strip_comments(src);
    let stmts = statements(&text)?;
    let mut shared_end = 0u32;
    let mut globals: HashMap<String, u32> = HashMap::new();
    let mut found = None;
    let mut i = 0;
    while i < stmts.len() {
        match &stmts[i] {
            Stmt::Text(line, t) if t.contains(".entry") => {
                let ename = entry_name(*line, t)?;
                let end = body_end(&stmts, i + 1, *line)?;
                if name.map_or(true, |n| n == ename) {
                    if found.is_some() {
                        bail!(Compile, "PTX has several .entry kernels; name one");
                    }
                    found = Some((i, end));
                }
                i = end + 1;
            }
            Stmt::Text(line, t) => {
                module_directive(*line, t, &mut shared_end, &mut globals)?;
                i += 1;
            }
            Stmt::Label(line, l) => return Err(err(*line, format!("label {l} outside a kernel"))),
            Stmt::Open(line) | Stmt::Close(line) => {
                return Err(err(*line, "brace outside a kernel"))
            }
        }
    }
    let Some((start, end)) = found else {
        bail!(
            Compile,
            "PTX has no .entry {}",
            name.map_or("kernel".to_string(), |n| n.to_string())
        );
    };
    let mut scope = Scope {
        syms: globals,
        ..Scope::default()
    };
    let Stmt::Text(line, header) = &stmts[start] else {
        bail!(Compile, "PTX: entry header missing");
    };
    let (kname, params, param_bytes) = entry_header(*line, header, &mut scope)?;
    let mut k = Kernel {
        name: kname,
        params,
        param_bytes,
        shared_bytes: 0,
        local_bytes: 0,
        nregs: 0,
        insts: vec![],
    };
    body(&stmts[start + 1..end], &mut scope, &mut k, &mut shared_end)?;
    k.shared_bytes = shared_end;
    Ok(k)
}

fn entry_name(line: usize, t: &str) -> Result<String> {
    let after = t
        .split_once(".entry")
        .map(|x| x.1)
        .ok_or_else(|| err(line, "no .entry"))?;
    let n = after.split('(').next().unwrap_or("").trim();
    if n.is_empty() {
        return Err(err(line, ".entry without a name"));
    }
    Ok(n.to_string())
}

/// The index of the `}` closing the body that opens at `from`.
fn body_end(stmts: &[Stmt], from: usize, line: usize) -> Result<usize> {
    let mut depth = 0;
    for (j, s) in stmts.iter().enumerate().skip(from) {
        match s {
            Stmt::Open(_) => depth += 1,
            Stmt::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ if depth == 0 => return Err(err(line, "entry body does not follow its header")),
            _ => {}
        }
    }
    Err(err(line, "entry body is not closed"))
}

fn module_directive(
    line: usize,
    t: &str,
    shared_end: &mut u32,
    globals: &mut HashMap<String, u32>,
) -> Result<()> {
    let words: Vec<&str> = t.split_whitespace().collect();
    match words.first().copied() {
        Some(".version" | ".target" | ".address_size") => Ok(()),
        Some(".shared") => {
            let (align, size, name) = decl(line, &words[1..])?;
            globals.insert(name, place(shared_end, align, size, line)?);
            Ok(())
        }
        Some(w) => Err(err(line, format!("unsupported module directive {w}"))),
        None => Ok(()),
    }
}

fn entry_header(line: usize, t: &str, scope: &mut Scope) -> Result<(String, Vec<Param>, u32)> {
    let name = entry_name(line, t)?;
    let (open, close) = (t.find('('), t.rfind(')'));
    let mut params = vec![];
    let mut end = 0u32;
    if let (Some(o), Some(c)) = (open, close) {
        for p in t[o + 1..c]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let words: Vec<&str> = p.split_whitespace().collect();
            if words.first() != Some(&".param") {
                return Err(err(line, format!("entry parameter {p:?} is not a .param")));
            }
            let (align, size, pname) = decl(line, &words[1..])?;
            let offset = place(&mut end, align, size, line)?;
            scope.syms.insert(pname.clone(), offset);
            params.push(Param {
                name: pname,
                offset,
                size,
            });
        }
    }
    // performance directives after the list (.maxntid, .reqntid, .minnctapersm) only tune
    for w in t[close.map_or(t.len(), |c| c + 1)..].split_whitespace() {
        if w.starts_with('.')
            && !matches!(w, ".maxntid" | ".reqntid" | ".minnctapersm" | ".maxnreg")
        {
            return Err(err(line, format!("unsupported entry directive {w}")));
        }
    }
    Ok((name, params, end))
}

fn body(stmts: &[Stmt], scope: &mut Scope, k: &mut Kernel, shared_end: &mut u32) -> Result<()> {
    // pass 1: declarations and labels
    let mut n = 0usize;
    let mut local_end = 0u32;
    for s in stmts {
        match s {
            Stmt::Label(_, l) => {
                scope.labels.insert(l.to_string(), n);
            }
            Stmt::Text(line, t) if t.starts_with('.') => {
                declare(*line, t, scope, k, shared_end, &mut local_end)?
            }
            Stmt::Text(..) => n += 1,
            _ => {}
        }
    }
    k.local_bytes = local_end;
    for s in stmts {
        if let Stmt::Text(line, t) = s {
            if !t.starts_with('.') {
                k.insts.push(instruction(*line, t, scope)?);
            }
        }
    }
    Ok(())
}

fn declare(
    line: usize,
    t: &str,
    scope: &mut Scope,
    k: &mut Kernel,
    shared_end: &mut u32,
    local_end: &mut u32,
) -> Result<()> {
    let words: Vec<&str> = t.split_whitespace().collect();
    match words[0] {
        ".reg" => {
            let names = t.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
            for r in names.split(',').map(str::trim) {
                let (base, count) = match r.split_once('<') {
                    Some((b, c)) => {
                        let c = c.trim_end_matches('>');
                        let c: u32 = c
                            .parse()
                            .map_err(|_| err(line, format!("bad register count <{c}>")))?;
                        (b, Some(c))
                    }
                    None => (r, None),
                };
                let names: Vec<String> = match count {
                    Some(c) => (0..c).map(|i| format!("{base}{i}")).collect(),
                    None => vec![base.to_string()],
                };
                for nm in names {
                    let next = scope.regs.len() as u32;
                    scope.regs.entry(nm).or_insert(next);
                }
                k.nregs = scope.regs.len() as u32;
            }
            Ok(())
        }
        ".shared" => {
            let (align, size, name) = decl(line, &words[1..])?;
            let off = place(shared_end, align, size, line)?;
            scope.syms.insert(name, off);
            Ok(())
        }
        ".local" => {
            let (align, size, name) = decl(line, &words[1..])?;
            let off = place(local_end, align, size, line)?;
            scope.syms.insert(name, off);
            Ok(())
        }
        ".pragma" => Ok(()),
        w => Err(err(
            line,
            format!("unsupported directive {w} in a kernel body"),
        )),
    }
}

/// Splits operands at top-level commas.
fn split_args(s: &str) -> Vec<&str> {
    let mut out = vec![];
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

fn instruction(line: usize, t: &str, scope: &Scope) -> Result<Inst> {
    let mut rest = t;
    let mut guard = None;
    if let Some(g) = rest.strip_prefix('@') {
        let (p, r) = g
            .split_once(char::is_whitespace)
            .ok_or_else(|| err(line, "guard without an instruction"))?;
        let (neg, p) = match p.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, p),
        };
        guard = Some((reg(line, p, scope)?, neg));
        rest = r.trim_start();
    }
    let (opcode, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let op = decode(opcode).map_err(|e| err(line, e))?;
    let args = split_args(args)
        .into_iter()
        .map(|a| operand(line, a, scope))
        .collect::<Result<Vec<_>>>()?;
    Ok(Inst {
        op,
        guard,
        args,
        opcode: opcode.to_string(),
        line,
        text: t.to_string(),
    })
}

fn reg(line: usize, r: &str, scope: &Scope) -> Result<u32> {
    scope
        .regs
        .get(r)
        .copied()
        .ok_or_else(|| err(line, format!("undeclared register {r}")))
}

/// An integer or float immediate: decimal, `0x` hex, `0f` (f32 bits), `0d` (f64 bits).
pub fn immediate(s: &str) -> Option<u64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0f").or_else(|| body.strip_prefix("0F")) {
        (h.len() == 8).then(|| u64::from_str_radix(h, 16).ok())??
    } else if let Some(h) = body.strip_prefix("0d").or_else(|| body.strip_prefix("0D")) {
        (h.len() == 16).then(|| u64::from_str_radix(h, 16).ok())??
    } else if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        u64::from_str_radix(h.trim_end_matches('U'), 16).ok()?
    } else {
        body.trim_end_matches('U').parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn operand(line: usize, a: &str, scope: &Scope) -> Result<Opnd> {
    if a == "_" {
        return Ok(Opnd::Sink);
    }
    if let Some(v) = a.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
        return split_args(v)
            .into_iter()
            .map(|x| operand(line, x, scope))
            .collect::<Result<Vec<_>>>()
            .map(Opnd::Vec);
    }
    if let Some(m) = a.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        return address(line, m.trim(), scope);
    }
    if a.starts_with('%') {
        if let Some(s) = Sreg::parse(a) {
            return Ok(Opnd::Sreg(s));
        }
        return Ok(Opnd::Reg(reg(line, a, scope)?));
    }
    if let Some(v) = immediate(a) {
        return Ok(Opnd::Imm(v));
    }
    if let Some(&l) = scope.labels.get(a) {
        return Ok(Opnd::Label(l));
    }
    if let Some(&s) = scope.syms.get(a) {
        return Ok(Opnd::Imm(u64::from(s)));
    }
    if a == "WARP_SZ" {
        return Ok(Opnd::Imm(32));
    }
    Err(err(line, format!("unknown operand {a:?}")))
}

fn address(line: usize, m: &str, scope: &Scope) -> Result<Opnd> {
    let (base, off) = match m.find(['+', '-']).filter(|&i| i > 0) {
        Some(i) => {
            let o = immediate(m[i..].trim_start_matches('+').trim())
                .ok_or_else(|| err(line, format!("bad address offset in [{m}]")))?;
            (m[..i].trim(), o as i64)
        }
        None => (m, 0),
    };
    if base.starts_with('%') {
        return Ok(Opnd::Addr(Some(reg(line, base, scope)?), off));
    }
    if let Some(&s) = scope.syms.get(base) {
        return Ok(Opnd::Addr(None, i64::from(s) + off));
    }
    if let Some(v) = immediate(base) {
        return Ok(Opnd::Addr(None, (v as i64).wrapping_add(off)));
    }
    Err(err(line, format!("unknown address [{m}]")))
}
