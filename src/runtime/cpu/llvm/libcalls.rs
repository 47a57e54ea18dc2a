//! The runtime functions LLVM's code generator may call from a CPU kernel that libm and libc do
//! not provide under the name LLVM uses: the half-precision conversions (compiler-rt's, which a
//! linker would take from libgcc or compiler-rt; rawgrad links kernels itself, so it brings them).
//!
//! LLVM changed their names and ABI on x86-64 in LLVM 15: LLVM 14 calls `__gnu_h2f_ieee`,
//! `__gnu_f2h_ieee` and `__truncdfhf2` with the half in an integer register (`u16`); LLVM 15 and
//! later call `__extendhfsf2`, `__truncsfhf2` and `__truncdfhf2` with the half in the low 16 bits
//! of an SSE register, where a `float` also travels, so those helpers take and return `f32` and
//! carry the half's bits in the low half of the float's bits (the same holds on AArch64: `h0` is
//! the low part of `s0`). [`resolve`] picks the set for the LLVM that compiled the object, then
//! falls back to the host's libm and libc.
//!
//! Not guaranteed: other compiler-rt helpers (128-bit integer division, `__powisf2`, ...) are not
//! provided; rawgrad's renderer emits nothing that lowers to them, and a kernel that needed one
//! fails to load with an error naming the symbol.

use half::f16;

use crate::driver::codemem::host_symbol;

fn h(bits: u16) -> f16 {
    f16::from_bits(bits)
}

/// A half carried in the low 16 bits of a float register.
fn in_float(x: f16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()))
}

fn from_float(x: f32) -> f16 {
    h(x.to_bits() as u16)
}

extern "C" fn extendhfsf2(x: f32) -> f32 {
    from_float(x).to_f32()
}
extern "C" fn extendhfdf2(x: f32) -> f64 {
    from_float(x).to_f64()
}
extern "C" fn truncsfhf2(x: f32) -> f32 {
    in_float(f16::from_f32(x))
}
extern "C" fn truncdfhf2(x: f64) -> f32 {
    in_float(f16::from_f64(x))
}
extern "C" fn gnu_h2f_ieee(x: u16) -> f32 {
    h(x).to_f32()
}
extern "C" fn gnu_f2h_ieee(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}
extern "C" fn truncdfhf2_int(x: f64) -> u16 {
    f16::from_f64(x).to_bits()
}

/// The helper LLVM `major` calls `name`, if rawgrad provides it.
pub fn helper(major: u32, name: &str) -> Option<u64> {
    let x86_14 = major < 15 && cfg!(target_arch = "x86_64");
    let f: usize = match name {
        "__gnu_h2f_ieee" | "__extendhfsf2" if x86_14 => {
            gnu_h2f_ieee as extern "C" fn(u16) -> f32 as usize
        }
        "__gnu_f2h_ieee" | "__truncsfhf2" if x86_14 => {
            gnu_f2h_ieee as extern "C" fn(f32) -> u16 as usize
        }
        "__truncdfhf2" if x86_14 => truncdfhf2_int as extern "C" fn(f64) -> u16 as usize,
        "__extendhfsf2" | "__gnu_h2f_ieee" => extendhfsf2 as extern "C" fn(f32) -> f32 as usize,
        "__extendhfdf2" => extendhfdf2 as extern "C" fn(f32) -> f64 as usize,
        "__truncsfhf2" | "__gnu_f2h_ieee" => truncsfhf2 as extern "C" fn(f32) -> f32 as usize,
        "__truncdfhf2" => truncdfhf2 as extern "C" fn(f64) -> f32 as usize,
        _ => return None,
    };
    Some(f as u64)
}

/// The address a kernel compiled by LLVM `major` reaches for `name`: rawgrad's helper, else the
/// host's libm/libc symbol.
pub fn resolve(major: u32, name: &str) -> Option<u64> {
    helper(major, name).or_else(|| host_symbol(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_to_nearest_even_and_keep_nan() {
        assert_eq!(truncsfhf2(1.0).to_bits(), 0x3c00);
        assert_eq!(
            extendhfsf2(f32::from_bits(0xdead_3c00)),
            1.0,
            "upper bits ignored"
        );
        assert_eq!(truncdfhf2(65520.0).to_bits(), 0x7c00, "rounds up to inf");
        assert_eq!(truncdfhf2_int(1.0 + f64::EPSILON), 0x3c00);
        assert!(gnu_h2f_ieee(0x7e00).is_nan());
        assert_eq!(gnu_f2h_ieee(-0.0), 0x8000);
        assert_eq!(
            extendhfdf2(f32::from_bits(0x3555)),
            f16::from_bits(0x3555).to_f64()
        );
    }

    #[test]
    fn names_by_llvm_version() {
        let (h14, h15) = (helper(14, "__truncdfhf2"), helper(15, "__truncdfhf2"));
        assert!(h14.is_some() && h15.is_some());
        if cfg!(target_arch = "x86_64") {
            assert_ne!(h14, h15, "LLVM 14 returns the half in an integer register");
        }
        assert!(resolve(15, "exp2f").is_some());
        assert!(resolve(15, "rawgrad_nope").is_none());
    }
}
