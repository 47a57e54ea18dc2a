//! Reading one source file the way the layer check needs it: the code with comments and literal
//! contents blanked (so a path in a doc comment or a string never counts), the `crate::`/`super::`
//! paths the code names (use trees expanded, inline paths included), and which byte ranges are
//! test-only code (`#[cfg(test)]` items and inline modules).
//!
//! Not guaranteed: this is a lexer, not a parser; macro bodies are read as plain tokens, and a
//! path built by a macro from pieces is not seen.

/// `src` with every comment and every string/char literal's contents replaced by spaces, byte for
/// byte (line numbers and offsets stay valid).
pub fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let ident_before = i > 0 && is_ident(b[i - 1]);
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = memchr(b, b'\n', i).unwrap_or(b.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = block_comment_end(b, i);
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let end = string_end(b, i + 1);
                blank(&mut out, i + 1, end.saturating_sub(1));
                i = end;
            }
            b'r' if !ident_before
                || (i > 0 && b[i - 1] == b'b' && !(i > 1 && is_ident(b[i - 2]))) =>
            {
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                if b.get(j) == Some(&b'"') {
                    let hashes = j - i - 1;
                    let end = raw_string_end(b, j + 1, hashes);
                    blank(&mut out, j + 1, end.saturating_sub(1 + hashes));
                    i = end;
                } else {
                    i += 1;
                }
            }
            b'\'' => i = char_literal(b, i, &mut out),
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

fn memchr(b: &[u8], c: u8, from: usize) -> Option<usize> {
    b[from..].iter().position(|&x| x == c).map(|p| p + from)
}

pub fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn block_comment_end(b: &[u8], start: usize) -> usize {
    let (mut depth, mut i) = (0usize, start);
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The index just past the closing quote of a string whose contents start at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

fn raw_string_end(b: &[u8], mut i: usize, hashes: usize) -> usize {
    while i < b.len() {
        if b[i] == b'"'
            && b[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// A char literal at `i` (blanked; returns the index after it), or a lifetime / label (kept).
fn char_literal(b: &[u8], i: usize, out: &mut [u8]) -> usize {
    let end = if b.get(i + 1) == Some(&b'\\') {
        memchr(b, b'\'', i + 2).map(|e| e + 1)
    } else {
        let n = match b.get(i + 1) {
            Some(&c) if c >= 0xF0 => 4,
            Some(&c) if c >= 0xE0 => 3,
            Some(&c) if c >= 0xC0 => 2,
            Some(_) => 1,
            None => return b.len(),
        };
        (b.get(i + 1 + n) == Some(&b'\'')).then_some(i + 2 + n)
    };
    match end {
        Some(e) => {
            for c in &mut out[i + 1..e - 1] {
                *c = b' ';
            }
            e
        }
        None => i + 1,
    }
}

/// One path the code names, resolved against the crate root: its segments after `crate::`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRef {
    pub segments: Vec<String>,
    /// Byte offset of the path's first segment (for the line number).
    pub at: usize,
}

/// Every `crate::`/`$crate::` and `super::` path in `code` (the output of [`code_only`]), with use
/// trees expanded; `module` is the module path of the file. `super::` paths are resolved against
/// the enclosing inline modules as well.
pub fn paths(code: &str, module: &[String]) -> Vec<PathRef> {
    let b = code.as_bytes();
    let inline = inline_modules(b);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        if starts && b[i..].starts_with(b"crate::") {
            let (trees, end) = use_tree(b, i + 7);
            out.extend(
                trees
                    .into_iter()
                    .map(|(segments, at)| PathRef { segments, at }),
            );
            i = end.max(i + 7);
        } else if starts && b[i..].starts_with(b"super::") {
            let mut base = module.to_vec();
            base.extend(
                inline
                    .iter()
                    .filter(|m| m.0 < i && i < m.1)
                    .map(|m| m.2.clone()),
            );
            let mut j = i;
            while b[j..].starts_with(b"super::") {
                base.pop();
                j = skip_ws(b, j + 7);
            }
            let (trees, end) = use_tree(b, j);
            for (tail, at) in trees {
                let mut segments = base.clone();
                segments.extend(tail);
                out.push(PathRef { segments, at });
            }
            i = end.max(j);
        } else {
            i += 1;
        }
    }
    out
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(b: &[u8], i: usize) -> Option<(String, usize)> {
    let mut j = i;
    while j < b.len() && is_ident(b[j]) {
        j += 1;
    }
    (j > i).then(|| (String::from_utf8_lossy(&b[i..j]).into_owned(), j))
}

/// A use tree at `i`: `a::b`, `a::{b, c::d}`, `{a, b}`, `*`, `self`, with `as` aliases; inline
/// paths stop at the first token that is none of these (`::<`, `(`, `!`, ...). Returns the
/// expanded paths with the offset of each one's first segment, and where the tree ends.
fn use_tree(b: &[u8], i: usize) -> (Vec<(Vec<String>, usize)>, usize) {
    let i = skip_ws(b, i);
    if b.get(i) == Some(&b'{') {
        let mut out = Vec::new();
        let mut j = i + 1;
        loop {
            j = skip_ws(b, j);
            match b.get(j) {
                None => return (out, j),
                Some(b'}') => return (out, j + 1),
                Some(b',') => j += 1,
                Some(_) => {
                    let (trees, end) = use_tree(b, j);
                    if end == j {
                        return (out, j);
                    }
                    out.extend(trees);
                    j = end;
                }
            }
        }
    }
    if b.get(i) == Some(&b'*') {
        return (vec![(Vec::new(), i)], i + 1);
    }
    let Some((name, end)) = ident_at(b, i) else {
        return (Vec::new(), i);
    };
    if name == "self" {
        return (vec![(Vec::new(), i)], end);
    }
    let after = skip_ws(b, end);
    if b[after..].starts_with(b"::") {
        let next = skip_ws(b, after + 2);
        if matches!(b.get(next), Some(c) if is_ident(*c) || *c == b'{' || *c == b'*') {
            let (trees, tend) = use_tree(b, next);
            let trees = trees
                .into_iter()
                .map(|(mut segs, at)| {
                    segs.insert(0, name.clone());
                    (segs, at)
                })
                .collect::<Vec<_>>();
            return (
                if trees.is_empty() {
                    vec![(vec![name], i)]
                } else {
                    trees
                },
                tend,
            );
        }
    }
    // `name as alias`: the alias is not a path.
    let mut end = end;
    if let Some((kw, kend)) = ident_at(b, after) {
        if kw == "as" {
            end = ident_at(b, skip_ws(b, kend)).map_or(kend, |a| a.1);
        }
    }
    (vec![(vec![name], i)], end)
}

/// Inline modules `mod name { ... }`: (body start, body end, name).
fn inline_modules(b: &[u8]) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = find_word(b, b"mod", i) {
        i = p + 3;
        let Some((name, end)) = ident_at(b, skip_ws(b, p + 3)) else {
            continue;
        };
        let open = skip_ws(b, end);
        if b.get(open) == Some(&b'{') {
            out.push((open, matching_close(b, open), name));
        }
    }
    out
}

/// The next occurrence of `word` as a whole token at or after `from`.
pub fn find_word(b: &[u8], word: &[u8], mut from: usize) -> Option<usize> {
    while from + word.len() <= b.len() {
        let p = from + b[from..].windows(word.len()).position(|w| w == word)?;
        let before = p == 0 || !is_ident(b[p - 1]);
        let after = !b.get(p + word.len()).is_some_and(|c| is_ident(*c));
        if before && after {
            return Some(p);
        }
        from = p + 1;
    }
    None
}

/// The index of the bracket closing the one at `open` (`{`, `(` or `[`), or the end.
pub fn matching_close(b: &[u8], open: usize) -> usize {
    let mut depth = 0i64;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// An out-of-line module's name and its `#[path]`, if any.
pub type ModDecl = (String, Option<String>);

/// Byte ranges of items under `#[cfg(test)]` (or `#[cfg(all(test, ...))]`), and the out-of-line
/// modules declared under it.
pub fn test_items(code: &str, src: &str) -> (Vec<(usize, usize)>, Vec<ModDecl>) {
    let b = code.as_bytes();
    let (mut ranges, mut mods) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(p) = code[i..].find("#[cfg(").map(|p| p + i) {
        let close = matching_close(b, p + 1);
        i = close;
        let cfg: String = code[p + 6..close]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if !(cfg == "test)" || cfg.starts_with("all(test,")) {
            continue;
        }
        // Skip further attributes, remembering a #[path = "..."] (read from the source: the
        // string's contents are blanked in `code`).
        let mut j = skip_ws(b, close + 1);
        let mut path = None;
        while b[j..].starts_with(b"#[") {
            let end = matching_close(b, j + 1);
            if code[j..end].replace(' ', "").starts_with("#[path=") {
                path = src[j..end].split('"').nth(1).map(str::to_string);
            }
            j = skip_ws(b, end + 1);
        }
        let item_end = item_end(b, j);
        if let Some(m) = find_word(b, b"mod", j).filter(|&m| m < item_end) {
            if b.get(item_end) == Some(&b';') {
                if let Some((name, _)) = ident_at(b, skip_ws(b, m + 3)) {
                    mods.push((name, path));
                }
            }
        }
        ranges.push((p, item_end));
    }
    (ranges, mods)
}

/// The end of the item starting at `j`: its `;` or its body's closing brace.
fn item_end(b: &[u8], mut j: usize) -> usize {
    while j < b.len() {
        match b[j] {
            b';' => return j,
            b'{' => return matching_close(b, j),
            b'(' | b'[' => j = matching_close(b, j) + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// The 1-based line of byte offset `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}
