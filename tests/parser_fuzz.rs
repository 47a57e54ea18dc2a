//! Mutation fuzzing of the binary parsers a caller or a file can reach: NVIDIA cubins (ELF,
//! `.nv.info` records, kernel loading), AMD code objects (the same ELF reader, the amdhsa loader,
//! kernel descriptors; seeded with cubins renamed to EM_AMDGPU and with real amdgpu ELFs as the
//! mock AMD compiler writes them), the CPU object loader (`runtime::cpu::objload`), compile-cache
//! entries (`device::diskcache`: the entry framing, and the payloads a cache hit hands on: mock
//! cubins, mock AMD code blobs, serialized UOps) and the state files (safetensors; gguf and
//! torch checkpoints have no loader). Seeds are real files from `tests/fixtures` or made by the
//! crate's own writers; each case flips bytes, writes extreme integers at random places,
//! truncates or extends the input, and hands it to the parser. A parser may answer `Ok` or
//! `Err`; a panic fails the test. Seeded and deterministic (`PARSER_FUZZ_CASES`,
//! `PARSER_FUZZ_SEED` for longer runs); 3,000 cases per parser, 8 parsers, about a second in all
//! in CI (debug build).
//!
//! Not guaranteed: coverage of every branch (no coverage feedback, unlike cargo-fuzz).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use rawgrad::codegen::uop_serial::{deserialize, serialize};
use rawgrad::codegen::uopgraph::linearize;
use rawgrad::codegen::uops::UOp;
use rawgrad::device::diskcache::{decode_entry, encode_entry};
use rawgrad::dtype::dtypes;
use rawgrad::hw::amd::elf::load_code_object;
use rawgrad::hw::amd::kd::KernelDescriptor;
use rawgrad::hw::amd::targets::lookup_name;
use rawgrad::hw::nv::arch::HOPPER_COMPUTE_A;
use rawgrad::mockgpu::amdgpu::object::{mock_code_object, MockBlob};
use rawgrad::mockgpu::nvgpu::cubin::{mock_cubin_for_uops, parse_mock_blob};
use rawgrad::runtime::cpu::objload;
use rawgrad::runtime::nv::cubin::{cubin_kernels, parse_info, Cubin};
use rawgrad::tensor::nn::safe_load_bytes;
use rawgrad::Result;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fixture(rel: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Extreme values a length, offset or count field might take.
const EXTREMES: [u64; 8] = [
    0,
    1,
    0x7f,
    0xff,
    0xffff_ffff,
    0x8000_0000,
    u64::MAX,
    i64::MAX as u64,
];

/// One mutation of `seed`: 1-4 edits (byte flips, an extreme 1/2/4/8-byte integer at a random
/// offset, a truncation, an extension).
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 | 1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            2 if !b.is_empty() => {
                let w = [1usize, 2, 4, 8][rng.below(4)];
                let v = EXTREMES[rng.below(EXTREMES.len())].to_le_bytes();
                let i = rng.below(b.len());
                let end = (i + w).min(b.len());
                b[i..end].copy_from_slice(&v[..end - i]);
            }
            3 => b.truncate(rng.below(b.len() + 1)),
            _ => b.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
        }
    }
    b
}

/// Run `parse` on `cases` mutations of each seed; a panic fails with the case that caused it.
fn fuzz(what: &str, seeds: &[Vec<u8>], salt: u64, parse: impl Fn(&[u8])) {
    let cases = env_or("PARSER_FUZZ_CASES", 3000);
    let mut rng = Rng(env_or("PARSER_FUZZ_SEED", 0x5eed) ^ salt);
    for n in 0..cases {
        let seed = &seeds[rng.below(seeds.len())];
        let input = mutate(seed, &mut rng);
        if catch_unwind(AssertUnwindSafe(|| parse(&input))).is_err() {
            panic!(
                "{what}: case {n} panicked on {} bytes: {:02x?}",
                input.len(),
                &input[..input.len().min(96)]
            );
        }
    }
}

fn cubins() -> Vec<Vec<u8>> {
    [
        "add_n_sm80.cubin",
        "add_n_sm90.cubin",
        "two_kernels_sm90.cubin",
        "fill_sm90.cubin",
    ]
    .iter()
    .map(|f| fixture(&format!("cubin/{f}")))
    .collect()
}

/// `seed` with its ELF e_machine (offset 18) set to `machine`, so the mutations reach past the
/// machine check of a loader for another architecture.
fn as_machine(seeds: &[Vec<u8>], machine: u16) -> Vec<Vec<u8>> {
    seeds
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s[18..20].copy_from_slice(&machine.to_le_bytes());
            s
        })
        .collect()
}

#[test]
fn cubin_parsers_never_panic() {
    fuzz("cubin", &cubins(), 1, |b| {
        let _ = cubin_kernels(b);
        let _ = parse_info(b);
        let _ = Cubin::parse(b, None, &HOPPER_COMPUTE_A, 90);
        let _ = Cubin::parse(b, Some("add_n"), &HOPPER_COMPUTE_A, 90);
    });
}

#[test]
fn amd_code_object_parsers_never_panic() {
    const EM_AMDGPU: u16 = 224;
    fuzz(
        "amd code object",
        &as_machine(&cubins(), EM_AMDGPU),
        2,
        |b| {
            let _ = load_code_object(b, "add_n");
            let _ = KernelDescriptor::parse(b);
            let _ = KernelDescriptor::parse(b.get(b.len().saturating_sub(64)..).unwrap_or(b));
        },
    );
}

#[test]
fn cpu_object_loader_never_panics() {
    // the host's machine, so the mutations reach the section, symbol and relocation readers;
    // no loaded function is ever called
    let machine = if cfg!(target_arch = "aarch64") {
        183
    } else {
        62
    };
    fuzz("cpu object", &as_machine(&cubins(), machine), 3, |b| {
        let _ = objload::load(b, "add_n", &|_| None);
    });
}

#[test]
fn safetensors_reader_never_panics() {
    let seeds = vec![fixture("safetensors/all_dtypes.safetensors")];
    fuzz("safetensors", &seeds, 4, |b| {
        let _ = safe_load_bytes(b, "CLANG");
    });
}

/// data0[i] = data1[i] + i over 16 threads, serialized: the UOp text mock kernels carry.
fn uops_text() -> String {
    let dt = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(dt, 0, true),
        UOp::define_global(dt, 1, false),
    );
    let i = UOp::special(0, "lidx0", 16);
    let v = UOp::load(&d1, &i, dt).add(i.cast(dt));
    let uops = linearize(&[UOp::store(&d0, &i, &v)], None, true).unwrap();
    serialize(&uops).unwrap()
}

/// Real amdgpu ELFs (code object, kernel descriptor, mock code blob) for two targets.
fn amd_objects() -> Vec<Vec<u8>> {
    let text = uops_text();
    ["gfx1100", "gfx90a"]
        .iter()
        .map(|t| mock_code_object(lookup_name(t).unwrap(), "add_n", &text, None).unwrap())
        .collect()
}

/// The loader's view of a code object: the kernel descriptor, then the code it points at (the
/// mock blob), as the emulated GPU reads them.
fn load_amd(b: &[u8]) -> Result<MockBlob> {
    let img = load_code_object(b, "add_n")?;
    let kd_bytes = img.image.get(img.descriptor..).unwrap_or_default();
    let kd = KernelDescriptor::parse(kd_bytes)?;
    let entry = (img.descriptor as i64).checked_add(kd.kernel_code_entry_byte_offset);
    let code = entry
        .and_then(|e| usize::try_from(e).ok())
        .and_then(|e| img.image.get(e..))
        .unwrap_or_default();
    MockBlob::decode(code)
}

#[test]
fn amdgpu_elves_from_the_writer_never_panic_the_loaders() {
    let seeds = amd_objects();
    for s in &seeds {
        load_amd(s).expect("an unmutated seed loads");
    }
    fuzz("amdgpu elf", &seeds, 5, |b| {
        let _ = load_amd(b);
    });
}

/// What a compile-cache hit hands on: a cubin, a mock cubin, a mock AMD code object, UOp text.
fn cache_payloads() -> Vec<Vec<u8>> {
    let text = uops_text();
    let mock = mock_cubin_for_uops("add_n", &[], &[8, 8], &HOPPER_COMPUTE_A, 90).unwrap();
    let mut v = vec![cubins().remove(1), mock, text.into_bytes()];
    v.extend(amd_objects());
    v
}

/// The NV loader's view of a (mock) cubin: the kernel, then the mock blob at its entry, as the
/// emulated GPU reads it.
fn load_nv(b: &[u8]) -> Result<()> {
    let c = Cubin::parse(b, Some("add_n"), &HOPPER_COMPUTE_A, 90)?;
    let code = usize::try_from(c.entry_offset)
        .ok()
        .and_then(|e| c.image.get(e..))
        .unwrap_or_default();
    parse_mock_blob(code).map(|_| ())
}

#[test]
fn compile_cache_entries_never_panic() {
    let entries: Vec<Vec<u8>> = cache_payloads().iter().map(|p| encode_entry(p)).collect();
    for (e, p) in entries.iter().zip(cache_payloads()) {
        assert_eq!(decode_entry(e), Some(&p[..]), "a written entry reads back");
    }
    fuzz("compile cache entry", &entries, 6, |b| {
        if let Some(p) = decode_entry(b) {
            let _ = load_nv(p);
            let _ = load_amd(p);
        }
    });
}

#[test]
fn compile_cache_payloads_never_panic_their_readers() {
    let seeds = cache_payloads();
    load_nv(&seeds[1]).expect("the mock cubin loads");
    deserialize(std::str::from_utf8(&seeds[2]).unwrap()).expect("the UOp text reads back");
    fuzz("compile cache payload", &seeds, 7, |b| {
        let _ = load_nv(b);
        let _ = load_amd(b);
        if let Ok(t) = std::str::from_utf8(b) {
            let _ = deserialize(t);
        }
    });
}
