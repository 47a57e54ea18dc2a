//! Text building for the renderers without `core::fmt`: a line is appended piece by piece
//! ([`Piece`]: strings, characters and integers in decimal) to the one output buffer.
//!
//! Why: the renderers write one line or expression per UOp, and `format!`/`write!` spent more
//! instructions parsing their templates and dispatching each argument through `Display` (plus a
//! fresh allocation per line) than copying the bytes. Pieces are copied as they are; integers are
//! written in plain decimal, the same text as `{}`. Measured on W12's 34 kernels (callgrind of
//! `bench codegen --unfilled`, the renderer's inclusive instructions, with the shared values of
//! `llvmir/walk.rs` and `cstyle/names.rs`): LLVM 47.9M -> 25.6M, CLANG 23.7M -> 16.3M; every
//! rendered source byte-identical.
//!
//! Not guaranteed: no padding, precision or other format specs (callers format such values
//! themselves); floats are not pieces (their text is the renderers' own choice).

use std::borrow::Cow;
use std::rc::Rc;

/// Something appended to rendered text as is.
pub trait Piece {
    /// Append `self` to `out`.
    fn put(&self, out: &mut String);
    /// At least the number of bytes [`Piece::put`] appends (to size a new string once).
    fn size(&self) -> usize;
}

/// `Piece` for the string types: each appends its text whole.
macro_rules! piece_for_text {
    ($($t:ty),*) => {$(
        impl Piece for $t {
            #[inline]
            fn put(&self, out: &mut String) {
                out.push_str(self);
            }
            #[inline]
            fn size(&self) -> usize {
                self.len()
            }
        }
    )*};
}

piece_for_text!(str, String, Cow<'_, str>, Rc<str>);

impl Piece for char {
    #[inline]
    fn put(&self, out: &mut String) {
        out.push(*self);
    }
    #[inline]
    fn size(&self) -> usize {
        self.len_utf8()
    }
}

impl<T: Piece + ?Sized> Piece for &T {
    #[inline]
    fn put(&self, out: &mut String) {
        (**self).put(out);
    }
    #[inline]
    fn size(&self) -> usize {
        (**self).size()
    }
}

/// Append the decimal digits of `v` (the text of `{v}`).
pub fn push_u64(out: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // ASCII digits only
    out.extend(digits[at..].iter().map(|&b| char::from(b)));
}

/// Append `v` in decimal with a leading `-` when negative (the text of `{v}`).
pub fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

macro_rules! unsigned_piece {
    ($($t:ty),*) => {$(
        impl Piece for $t {
            #[inline]
            fn put(&self, out: &mut String) {
                push_u64(out, u64::from(*self));
            }
            #[inline]
            fn size(&self) -> usize {
                20
            }
        }
    )*};
}
unsigned_piece!(u8, u16, u32, u64);

impl Piece for usize {
    #[inline]
    fn put(&self, out: &mut String) {
        // usize is at most 64 bits on every supported target
        push_u64(out, *self as u64);
    }
    #[inline]
    fn size(&self) -> usize {
        20
    }
}

impl Piece for i64 {
    #[inline]
    fn put(&self, out: &mut String) {
        push_i64(out, *self);
    }
    #[inline]
    fn size(&self) -> usize {
        20
    }
}

impl Piece for i128 {
    #[inline]
    fn put(&self, out: &mut String) {
        match i64::try_from(*self) {
            Ok(v) => push_i64(out, v),
            // beyond 64 bits (rare): the standard formatting
            Err(_) => out.push_str(&self.to_string()),
        }
    }
    #[inline]
    fn size(&self) -> usize {
        40
    }
}

impl Piece for i32 {
    #[inline]
    fn put(&self, out: &mut String) {
        push_i64(out, i64::from(*self));
    }
    #[inline]
    fn size(&self) -> usize {
        20
    }
}

/// The concatenation of `parts` as a new string, allocated once.
pub fn concat(parts: &[&dyn Piece]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.size()).sum());
    for p in parts {
        p.put(&mut out);
    }
    out
}

/// [`concat`] of the pieces ([`Piece`]) given as arguments (each evaluated once).
macro_rules! cat {
    ($($p:expr),+ $(,)?) => {
        $crate::renderer::text::concat(&[$(&$p as &dyn $crate::renderer::text::Piece),+])
    };
}
pub(crate) use cat;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_match_display() {
        for v in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut s = String::new();
            push_u64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        for v in [0i64, -1, 42, i64::MIN, i64::MAX] {
            let mut s = String::new();
            v.put(&mut s);
            assert_eq!(s, v.to_string());
        }
        for v in [0i128, -5, i128::MIN, i128::MAX, i64::MIN as i128 - 1] {
            let mut s = String::new();
            v.put(&mut s);
            assert_eq!(s, v.to_string());
        }
        let name = String::from("%alu3");
        let lane = 2usize;
        let c: Cow<'static, str> = Cow::Borrowed("float");
        assert_eq!(
            cat!(
                "  ",
                name,
                " = extractelement <4 x ",
                c,
                "> %v, i32 ",
                lane,
                '!'
            ),
            "  %alu3 = extractelement <4 x float> %v, i32 2!"
        );
    }
}
