use super::*;

fn object(relocatable: bool) -> Vec<u8> {
    let mut kd = [0u8; 64];
    kd[8..12].copy_from_slice(&20u32.to_le_bytes()); // kernarg_size
    kd[56..58].copy_from_slice(&0x408u16.to_le_bytes());
    let text: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    write_amdgpu_elf(&AmdgpuElf {
        name: "E_4",
        e_flags: 0x41,
        relocatable,
        descriptor: kd,
        text: &text,
    })
}

fn code_addr(img: &CodeImage) -> usize {
    let d = img.descriptor;
    let off = i64::from_le_bytes(img.image[d + 16..d + 24].try_into().unwrap());
    (d as i64 + off) as usize
}

#[test]
fn et_dyn_round_trip() {
    let bytes = object(false);
    let elf = Elf::parse(&bytes).unwrap();
    assert_eq!(
        (
            elf.e_type,
            elf.e_machine,
            elf.osabi,
            elf.abi_version,
            elf.e_flags
        ),
        (ET_DYN, EM_AMDGPU, 64, 2, 0x41)
    );
    let names: Vec<&str> = elf.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["", ".rodata", ".text", ".symtab", ".strtab", ".shstrtab"]
    );
    let (_, text) = elf.section(".text").unwrap();
    assert_eq!((text.addr % 256, text.align), (0, 256));
    let syms = elf.all_symbols().unwrap();
    assert!(syms.iter().any(|s| s.name == "E_4.kd" && s.value == 0x100));
    let img = load_code_object(&bytes, "E_4").unwrap();
    assert_eq!(img.descriptor, 0x100);
    assert_eq!(img.image.len(), 4096);
    let c = code_addr(&img);
    assert_eq!(c, 0x200);
    assert_eq!(
        img.image[c..c + 300],
        (0..300u32).map(|i| i as u8).collect::<Vec<_>>()[..]
    );
    assert_eq!(&img.image[0x108..0x10C], &20u32.to_le_bytes());
}

#[test]
fn et_rel_applies_the_rel64_relocation() {
    let bytes = object(true);
    let elf = Elf::parse(&bytes).unwrap();
    assert_eq!(elf.e_type, ET_REL);
    let (_, rela) = elf.section(".rela.rodata").unwrap();
    assert_eq!(rela.sh_type, SHT_RELA);
    let img = load_code_object(&bytes, "E_4").unwrap();
    // .text is packed first at 0, .rodata after it at its 64-byte alignment.
    assert_eq!(img.descriptor, 320);
    assert_eq!(
        code_addr(&img),
        0,
        "descriptor + relocated offset = the kernel's code"
    );
    assert_eq!(img.image[5], 5);
}

#[test]
fn descriptor_falls_back_to_rodata_and_bad_input_fails() {
    let bytes = object(false);
    let img = load_code_object(&bytes, "other_name").unwrap();
    assert_eq!(img.descriptor, 0x100, ".rodata start");
    assert!(load_code_object(&bytes[..100], "E_4").is_err());
    assert!(load_code_object(b"not an elf at all, really not", "E_4").is_err());
    let mut bad = bytes.clone();
    bad[18] = 62; // EM_X86_64
    let e = load_code_object(&bad, "E_4").unwrap_err();
    assert!(e.message().contains("EM_AMDGPU"), "{e}");
    let mut bad = bytes.clone();
    bad[16] = 2; // ET_EXEC
    assert!(load_code_object(&bad, "E_4").is_err());
    // A section header table pointing past the end.
    let mut bad = bytes;
    bad[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Elf::parse(&bad).is_err());
}

#[test]
fn a_descriptor_symbol_at_the_top_of_the_address_space_is_an_error() {
    // Found by tests/parser_fuzz.rs (compile-cache payloads, seed 7): `descriptor + 64`
    // overflowed (a panic in builds with overflow checks) on a `.kd` symbol value near 2^64.
    let bytes = object(false);
    let elf = Elf::parse(&bytes).unwrap();
    let (_, symtab) = elf.section(".symtab").unwrap();
    let (start, len) = (symtab.offset as usize, symtab.size as usize);
    let mut bad = bytes.clone();
    for sym in bad[start..start + len].chunks_exact_mut(24) {
        if u64::from_le_bytes(sym[8..16].try_into().unwrap()) == 0x100 {
            sym[8..16].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        }
    }
    let e = load_code_object(&bad, "E_4").unwrap_err();
    assert!(e.message().contains("runs past the image"), "{e}");
}
