//! A strict JSON reader and string writer (safetensors headers, profiler traces): RFC 8259 values, objects
//! kept in file order with duplicate keys refused, nesting limited to [`MAX_DEPTH`], numbers
//! kept as their text. Errors say what is wrong and at which byte.
//!
//! Not guaranteed: only what a header needs is offered (no float conversion of numbers).

#![forbid(unsafe_code)]

use crate::{bail, Error, Result};

/// Deeper nesting than this is refused (a safetensors header needs 3 levels).
pub const MAX_DEPTH: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// The number's text as written.
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    /// Members in file order.
    Obj(Vec<(String, Value)>),
}

impl Value {
    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a bool",
            Value::Num(_) => "a number",
            Value::Str(_) => "a string",
            Value::Arr(_) => "an array",
            Value::Obj(_) => "an object",
        }
    }

    /// A non-negative integer that fits u64.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Num(s) if s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
            _ => None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

fn err<T>(at: usize, what: impl std::fmt::Display) -> Result<T> {
    Err(Error::InvalidArgument(format!("JSON at byte {at}: {what}")))
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        self.ws();
        match self.peek() {
            Some(x) if x == c => {
                self.i += 1;
                Ok(())
            }
            Some(x) => err(
                self.i,
                format!("expected {:?}, found {:?}", c as char, x as char),
            ),
            None => err(self.i, format!("expected {:?}, found the end", c as char)),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return err(self.i, format!("nesting deeper than {MAX_DEPTH}"));
        }
        self.ws();
        match self.peek() {
            None => err(self.i, "expected a value, found the end"),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::Str),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) => err(self.i, format!("unexpected {:?}", c as char)),
        }
    }

    fn word(&mut self, w: &str, v: Value) -> Result<Value> {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            return Ok(v);
        }
        err(self.i, format!("expected {w}"))
    }

    fn number(&mut self) -> Result<Value> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let b = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.i - b
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return err(start, "malformed number");
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return err(start, "malformed number");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return err(start, "malformed number");
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        Ok(Value::Num(text.to_string()))
    }

    fn hex4(&mut self) -> Result<u32> {
        let Some(h) = self.s.get(self.i..self.i + 4) else {
            return err(self.i, "truncated \\u escape");
        };
        let text = std::str::from_utf8(h).unwrap_or("");
        let Ok(v) = u32::from_str_radix(text, 16) else {
            return err(self.i, "bad \\u escape");
        };
        self.i += 4;
        Ok(v)
    }

    fn escape(&mut self, out: &mut String) -> Result<()> {
        let at = self.i;
        let Some(c) = self.peek() else {
            return err(at, "unterminated string");
        };
        self.i += 1;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&hi) {
                    if !self.s[self.i..].starts_with(b"\\u") {
                        return err(at, "unpaired surrogate");
                    }
                    self.i += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return err(at, "unpaired surrogate");
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                match char::from_u32(code) {
                    Some(ch) => ch,
                    None => return err(at, "unpaired surrogate"),
                }
            }
            c => return err(at, format!("bad escape \\{}", c as char)),
        };
        out.push(ch);
        Ok(())
    }

    fn string(&mut self) -> Result<String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self
                .peek()
                .is_some_and(|c| c != b'"' && c != b'\\' && c >= 0x20)
            {
                self.i += 1;
            }
            // the input was checked to be UTF-8 and the cut is at an ASCII byte
            out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return err(self.i, "control character in a string"),
                None => return err(self.i, "unterminated string"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value> {
        self.expect(b'[')?;
        let mut v = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::Arr(v));
        }
        loop {
            v.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Arr(v));
                }
                _ => return err(self.i, "expected ',' or ']' in an array"),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value> {
        self.expect(b'{')?;
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut keys = std::collections::HashSet::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Obj(members));
        }
        loop {
            self.ws();
            let at = self.i;
            let k = self.string()?;
            if !keys.insert(k.clone()) {
                return err(at, format!("duplicate key {k:?}"));
            }
            self.expect(b':')?;
            let v = self.value(depth + 1)?;
            members.push((k, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Obj(members));
                }
                _ => return err(self.i, "expected ',' or '}' in an object"),
            }
        }
    }
}

/// Parse one JSON value that fills `text` (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        bail!(
            InvalidArgument,
            "JSON at byte {}: trailing characters after the value",
            p.i
        );
    }
    Ok(v)
}

/// `s` as a JSON string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
