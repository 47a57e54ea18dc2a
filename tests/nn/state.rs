//! State dicts and safetensors: a round trip of every dtype, files written by Hugging Face's
//! `safetensors` package loading exactly (tests/fixtures/safetensors, made by
//! tools/safetensors-fixtures/gen.py), hostile headers giving named errors (and a seeded fuzz
//! loop over mutated headers giving errors, never panics), and load_state_dict's modes.

use half::{bf16, f16};
use indexmap::IndexMap;
use rawgrad::nn::{
    get_state_dict, load_state_dict, safe_load, safe_load_bytes, safe_load_with_metadata,
    safe_save, Conv2d, Forward, Linear,
};
use rawgrad::{Tensor, TensorData};

use super::{arr, err, f64s, on, DEVICES};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/safetensors/all_dtypes.safetensors"
);

/// A temporary path of its own for each call (tests run in parallel threads of one process and
/// may ask for the same name).
fn tmp(name: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("rawgrad-nn-{}-{n}-{name}", std::process::id()))
}

/// The fixture's tensors as rawgrad should read them.
fn expected() -> Vec<(&'static str, Vec<usize>, TensorData)> {
    use TensorData as D;
    let f16s = [
        0.0,
        -0.0,
        1.5,
        -2.0,
        f32::INFINITY,
        65504.0,
        2f32.powi(-24),
        f32::NAN,
    ];
    vec![
        ("bool", vec![3], D::Bool(vec![true, false, true])),
        ("i8", vec![2, 2], D::I8(vec![-128, -1, 0, 127])),
        ("u8", vec![3], D::U8(vec![0, 1, 255])),
        ("i16", vec![3], D::I16(vec![-32768, 0, 32767])),
        ("u16", vec![3], D::U16(vec![0, 65535, 12345])),
        ("i32", vec![2, 2], D::I32(vec![i32::MIN, 0, i32::MAX, 7])),
        ("u32", vec![3], D::U32(vec![0, u32::MAX, 3])),
        ("i64", vec![3], D::I64(vec![i64::MIN, 0, i64::MAX])),
        ("u64", vec![3], D::U64(vec![0, u64::MAX, 5])),
        (
            "f16",
            vec![8],
            D::F16(f16s.iter().map(|&v| f16::from_f32(v)).collect()),
        ),
        (
            "bf16",
            vec![5],
            D::BF16(
                [0x3F80, 0xC020, 0x7F80, 0x8000, 0x0001]
                    .iter()
                    .map(|&b| bf16::from_bits(b))
                    .collect(),
            ),
        ),
        (
            "f32",
            vec![7],
            D::F32(vec![
                1.5,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                1e-45,
                3.4028235e38,
            ]),
        ),
        ("f64", vec![3], D::F64(vec![0.1, -1e300, 5e-324])),
        ("scalar", vec![], D::F32(vec![42.0])),
        ("empty", vec![0, 3], D::F32(vec![])),
    ]
}

/// Bit-exact equality (NaN payloads and signed zeros included).
fn same_bits(a: &TensorData, b: &TensorData) -> bool {
    use TensorData as D;
    match (a, b) {
        (D::F16(x), D::F16(y)) => x
            .iter()
            .map(|v| v.to_bits())
            .eq(y.iter().map(|v| v.to_bits())),
        (D::BF16(x), D::BF16(y)) => x
            .iter()
            .map(|v| v.to_bits())
            .eq(y.iter().map(|v| v.to_bits())),
        (D::F32(x), D::F32(y)) => x
            .iter()
            .map(|v| v.to_bits())
            .eq(y.iter().map(|v| v.to_bits())),
        (D::F64(x), D::F64(y)) => x
            .iter()
            .map(|v| v.to_bits())
            .eq(y.iter().map(|v| v.to_bits())),
        _ => a == b,
    }
}

fn check_all(loaded: &IndexMap<String, Tensor>, what: &str) {
    for (name, shape, data) in expected() {
        let t = loaded
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no {name}"));
        let got = t.numpy().unwrap();
        assert_eq!(got.shape, shape, "{what}: {name} shape");
        assert!(
            same_bits(&got.data, &data),
            "{what}: {name}: {:?} != {data:?}",
            got.data
        );
    }
}

#[test]
fn foreign_fixture_loads_exactly() {
    for dev in DEVICES {
        let _d = on(dev);
        let (loaded, meta) = safe_load_with_metadata(FIXTURE, dev).unwrap();
        assert_eq!(loaded.len(), 15);
        check_all(&loaded, &format!("fixture on {dev}"));
        assert_eq!(
            meta.get("source").map(String::as_str),
            Some("safetensors-python")
        );
        assert_eq!(loaded["f32"].device(), dev);
    }
}

#[test]
fn every_dtype_round_trips() {
    for dev in DEVICES {
        let _d = on(dev);
        let loaded = safe_load(FIXTURE).unwrap();
        let path = tmp(&format!("roundtrip-{dev}.safetensors"));
        let mut meta = IndexMap::new();
        meta.insert("note \"quoted\"".to_string(), "ünïcode\n".to_string());
        safe_save(&loaded, &path, Some(&meta)).unwrap();
        let (back, meta2) = safe_load_with_metadata(&path, dev).unwrap();
        check_all(&back, &format!("round trip on {dev}"));
        assert_eq!(meta2, meta);
        let keys: Vec<&String> = back.keys().collect();
        let want: Vec<&String> = loaded.keys().collect();
        assert_eq!(keys, want, "order kept");
        let bytes = std::fs::read(&path).unwrap();
        let hlen = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!((8 + hlen) % 8, 0, "the header is padded to 8 bytes");
        std::fs::remove_file(&path).unwrap();
    }
}

/// A small valid file: the header and data of two float32 tensors.
fn small_file() -> Vec<u8> {
    let _d = on("CLANG");
    let mut m = IndexMap::new();
    m.insert(
        "a".to_string(),
        Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap(),
    );
    m.insert(
        "b".to_string(),
        Tensor::from_vec(vec![5u8, 6], &[2]).unwrap(),
    );
    let path = tmp("small.safetensors");
    safe_save(&m, &path, None).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

/// A file with `header` (padded) and `data`.
fn file_with(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn hostile_files_give_named_errors() {
    let _d = on("CLANG");
    let load = |b: &[u8]| err(safe_load_bytes(b, "CLANG").map(|_| ()));
    let good = small_file();
    assert!(load(&good[..5]).contains("the file is truncated: 5 bytes"));
    assert!(load(&good[..good.len() - 1]).contains("runs past the end of the data"));
    let mut big = good.clone();
    big[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(load(&big).contains("is over the 100000000-byte limit"));
    big[..8].copy_from_slice(&4096u64.to_le_bytes());
    assert!(load(&big).contains("header length 4096 runs past the end of the file"));
    let cases: [(&str, &[u8], &str); 14] = [
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", &[0; 8], "duplicate key \"a\""),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", &[0; 8], "overlaps tensor \"a\""),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", &[0; 8], "a hole of 4 bytes before tensor \"a\""),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &[0; 8], "4 bytes after the last tensor"),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", &[0; 8], "do not hold the 12 bytes of F32 [3]"),
        ("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", &[0], "unsupported dtype \"F8_E4M3\""),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", &[0; 4], "shape[0] must be a non-negative integer, got -1"),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", &[0; 4], "overflows"),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", &[0; 4], "data_offsets must hold 2 integers"),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", &[0; 4], "missing field \"data_offsets\""),
        ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", &[0; 4], "unknown field \"x\""),
        ("{\"__metadata__\":{\"k\":1}}", &[], "__metadata__ \"k\" must be a string"),
        ("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", &[1, 2], "BOOL element 1 is the byte 2"),
        ("[1,2]", &[], "the header must be a JSON object, got an array"),
    ];
    for (header, data, want) in cases {
        let e = load(&file_with(header, data));
        assert!(e.contains(want), "{header}: {e}");
    }
    let mut bad_utf8 = file_with("{\"a\":1}", &[]);
    bad_utf8[10] = 0xff;
    assert!(load(&bad_utf8).contains("the header is not UTF-8"));
    assert!(load(&file_with("{\"a\":{", &[])).contains("JSON at byte"));
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(load(&file_with(&deep, &[])).contains("nesting deeper than 16"));
    let e = err(safe_load("/nonexistent/x.safetensors").map(|_| ()));
    assert!(e.contains("/nonexistent/x.safetensors"), "{e}");
}

#[test]
fn fuzzed_headers_give_errors_not_panics() {
    let _d = on("CLANG");
    let good = small_file();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut errs) = (0, 0);
    for _ in 0..3000 {
        let mut f = good.clone();
        match next() % 4 {
            0 => {
                let i = (next() as usize) % f.len();
                f[i] ^= 1 << (next() % 8);
            }
            1 => {
                let i = 8 + (next() as usize) % (f.len() - 8);
                f[i] = b"{}[],:\"0123456789-e.a"[(next() % 21) as usize];
            }
            2 => f.truncate((next() as usize) % f.len()),
            _ => {
                let i = (next() as usize) % 8;
                f[i] = next() as u8;
            }
        }
        match safe_load_bytes(&f, "CLANG") {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(e.to_string().contains("safetensors"), "{e}");
                errs += 1;
            }
        }
    }
    assert!(errs > 2000, "{errs} errors, {ok} loads");
}

struct Model {
    l1: Linear,
    conv: Conv2d,
}
rawgrad::module!(Model { l1, conv });

fn model() -> Model {
    Model {
        l1: Linear::new(3, 2, true).unwrap(),
        conv: Conv2d::new(1, 2, 3).unwrap(),
    }
}

#[test]
fn load_state_dict_strict_and_not() {
    for dev in DEVICES {
        let _d = on(dev);
        let (src, dst) = (model(), model());
        let path = tmp(&format!("model-{dev}.safetensors"));
        safe_save(&get_state_dict(&src), &path, None).unwrap();
        let sd = safe_load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        load_state_dict(&dst, &sd, true).unwrap();
        let x = arr(&[4, 3], 1);
        assert_eq!(
            f64s(&src.l1.forward(&x).unwrap()),
            f64s(&dst.l1.forward(&x).unwrap())
        );
        assert_eq!(f64s(&src.conv.weight), f64s(&dst.conv.weight));
        let mut partial = sd.clone();
        partial.shift_remove("conv.bias");
        partial.insert("extra".into(), Tensor::zeros(&[1]).unwrap());
        let e = err(load_state_dict(&dst, &partial, true));
        assert!(
            e.contains("missing keys [\"conv.bias\"], unexpected keys [\"extra\"]"),
            "{e}"
        );
        load_state_dict(&dst, &partial, false).unwrap();
        let mut wrong = sd.clone();
        wrong.insert("l1.weight".into(), Tensor::zeros(&[3, 2]).unwrap());
        let e = err(load_state_dict(&dst, &wrong, false));
        assert!(
            e.contains("shape mismatch for l1.weight: model (2, 3) vs state dict (3, 2)"),
            "{e}"
        );
        assert_eq!(
            dst.l1.weight.shape(),
            vec![2, 3],
            "nothing changed on error"
        );
    }
}
