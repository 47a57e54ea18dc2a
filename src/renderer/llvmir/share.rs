//! The CPU flavour's core split: the share `[start + n*core/ncores, start + n*(core+1)/ncores)`
//! of the split loop's `n = end - start` iterations (64-bit math, as the CLANG renderer), rendered
//! either in the kernel (bounds that are values of the kernel) or, when both bounds are integer
//! constants, in the `NAME_rg` entry, which passes the share to the kernel as its last two
//! parameters (`%split.lo`, `%split.hi`) instead of `core` and `ncores`.
//!
//! Why the entry (rawgrad beyond tinygrad 0.9.1, for the LLVM device's compile time): the entry is
//! `optnone`, so its two 64-bit divisions go through LLVM's no-optimization codegen, while in the
//! optimized kernel each became a branch around a 32-bit fast path (x86's slow-division bypass)
//! and extra blocks for every machine pass to walk. The kernel's loop is the same either way; the
//! divisions run once per launch and core.
//!
//! What it owns: the text of the split computation. Not guaranteed: any particular machine code
//! for the entry (LLVM's no-optimization level decides it).

/// The constant bounds of a split loop whose share the entry computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryShare {
    /// The loop counter's IR type (`i32`).
    pub ty: String,
    pub start: String,
    pub end: String,
}

/// The kernel parameter names that carry an [`EntryShare`].
pub(crate) const SHARE_LO: &str = "%split.lo";
pub(crate) const SHARE_HI: &str = "%split.hi";

/// The constant integer text `s` (a rendered loop bound), if it is one.
pub(crate) fn constant(s: &str) -> bool {
    s.parse::<i64>().is_ok()
}

/// The lines computing the share of the loop `[start, end)` of type `ty` from `%core` and
/// `%ncores`, with names prefixed `c`, and the names of its bounds `(lo, hi)`.
pub(crate) fn share_lines(
    c: &str,
    start: &str,
    end: &str,
    ty: &str,
) -> (Vec<String>, String, String) {
    let mut l = vec![];
    let zero = start == "0";
    let n = if zero {
        end.to_string()
    } else {
        l.push(format!("  {c}.n = sub {ty} {end}, {start}"));
        format!("{c}.n")
    };
    l.extend([
        format!("  {c}.n64 = sext {ty} {n} to i64"),
        format!("  {c}.core = sext i32 %core to i64"),
        format!("  {c}.ncores = sext i32 %ncores to i64"),
        format!("  {c}.core1 = add i64 {c}.core, 1"),
        format!("  {c}.lom = mul i64 {c}.n64, {c}.core"),
        format!("  {c}.lod = sdiv i64 {c}.lom, {c}.ncores"),
        format!("  {c}.lo = trunc i64 {c}.lod to {ty}"),
        format!("  {c}.him = mul i64 {c}.n64, {c}.core1"),
        format!("  {c}.hid = sdiv i64 {c}.him, {c}.ncores"),
        format!("  {c}.hi = trunc i64 {c}.hid to {ty}"),
    ]);
    if zero {
        return (l, format!("{c}.lo"), format!("{c}.hi"));
    }
    l.push(format!("  {c}.lo0 = add {ty} {start}, {c}.lo"));
    l.push(format!("  {c}.hi0 = add {ty} {start}, {c}.hi"));
    (l, format!("{c}.lo0"), format!("{c}.hi0"))
}

/// The entry's lines for `share` and the two call arguments they give the kernel.
pub(crate) fn entry_lines(share: &EntryShare) -> (Vec<String>, [String; 2]) {
    let (lines, lo, hi) = share_lines("%share", &share.start, &share.end, &share.ty);
    let ty = &share.ty;
    (lines, [format!("{ty} {lo}"), format!("{ty} {hi}")])
}
