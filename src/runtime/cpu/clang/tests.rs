use super::*;
use crate::device::allocator::HostAllocator;
use crate::device::registry::{open_registered, register_family};
use crate::device::testing::TestRenderer;
use crate::device::{compile_cached, Allocator, Buffer, BufferOptions};
use crate::dtypes;
use crate::helpers::Context;

/// `out[i] = a[i] + b[i]` for `i < vals[0]`, split into `ncores` contiguous shares; `who[i]`
/// records the share that wrote element `i`.
const ADD_SRC: &str = r#"
void add_rg(void **bufs, const int *vals, int core, int ncores) {
  float *restrict out = (float *)bufs[0];
  int *restrict who = (int *)bufs[1];
  const float *restrict a = (const float *)bufs[2];
  const float *restrict b = (const float *)bufs[3];
  int n = vals[0];
  int per = (n + ncores - 1) / ncores;
  int start = core * per;
  int end = start + per < n ? start + per : n;
  for (int i = start; i < end; i++) {
    out[i] = a[i] + b[i];
    who[i] = core;
  }
}
"#;

/// Compile with `cc` (forced), bypassing the disk cache.
fn compile_cc(src: &str) -> Result<Vec<u8>> {
    let _g = Context::with_str(&[("CLANG_CC", "cc")]);
    let cc = ClangCompiler::new()?;
    assert_eq!(cc.program().file_name().unwrap(), "cc");
    cc.compile(src)
}

fn f32s(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn from_i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

struct AddBufs {
    out: RawBuf,
    who: RawBuf,
    a: RawBuf,
    b: RawBuf,
}

fn add_bufs(n: usize) -> AddBufs {
    let h = HostAllocator;
    let o = BufferOptions::default();
    let a = h.alloc(4 * n, &o).unwrap();
    let b = h.alloc(4 * n, &o).unwrap();
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..n).map(|i| 100.0 - i as f32).collect();
    h.copyin(&a, &f32s(&xs)).unwrap();
    h.copyin(&b, &f32s(&ys)).unwrap();
    let who = h.alloc(4 * n, &o).unwrap();
    h.copyin(&who, &vec![0xff; 4 * n]).unwrap();
    AddBufs {
        out: h.alloc(4 * n, &o).unwrap(),
        who,
        a,
        b,
    }
}

fn read(buf: &RawBuf) -> Vec<u8> {
    let mut out = vec![0u8; buf.size];
    HostAllocator.copyout(&mut out, buf).unwrap();
    out
}

#[test]
fn add_runs_split_across_shares() {
    let lib = compile_cc(ADD_SRC).unwrap();
    assert!(lib.starts_with(b"\x7fELF"), "a shared object");
    let prg = ClangRuntime.load("add", &lib).unwrap();
    let n = 10;
    let bufs = add_bufs(n);
    let args = [
        bufs.out.clone(),
        bufs.who.clone(),
        bufs.a.clone(),
        bufs.b.clone(),
    ];
    // Three shares (more than this machine may have cores: they queue).
    let _g = Context::new(&[("CLANG_THREADS", 3)]);
    let t = prg.call(&args, &[n as i64], None, None, true).unwrap();
    assert!(t.is_some_and(|t| t >= 0.0));
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 + 100.0 - i as f32).collect();
    assert_eq!(from_f32s(&read(&bufs.out)), want);
    assert_eq!(
        from_i32s(&read(&bufs.who)),
        vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    );
    // The outer extent bounds the split: one share runs everything.
    let t = prg
        .call(&args, &[n as i64], Some([1, 1, 1]), None, false)
        .unwrap();
    assert!(t.is_none());
    assert_eq!(from_i32s(&read(&bufs.who)), vec![0; n]);
    // Only part of the elements (vals), two shares.
    HostAllocator.copyin(&bufs.out, &vec![0; 4 * n]).unwrap();
    prg.call(&args, &[4], Some([2, 1, 1]), None, false).unwrap();
    let got = from_f32s(&read(&bufs.out));
    assert_eq!(&got[..4], &want[..4]);
    assert_eq!(&got[4..], &[0.0; 6]);
    assert_eq!(&from_i32s(&read(&bufs.who))[..4], &[0, 0, 1, 1]);
}

#[test]
fn many_concurrent_calls_share_the_pool() {
    let lib = compile_cc(ADD_SRC).unwrap();
    let prg = ClangRuntime.load("add", &lib).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let prg = &prg;
            s.spawn(move || {
                let _g = Context::new(&[("CLANG_THREADS", 2 + t)]);
                let n = 1000 + t as usize;
                let bufs = add_bufs(n);
                let args = [bufs.out.clone(), bufs.who, bufs.a, bufs.b];
                for _ in 0..20 {
                    prg.call(&args, &[n as i64], None, None, false).unwrap();
                }
                let got = from_f32s(&read(&bufs.out));
                assert!(got
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == i as f32 * 0.5 + 100.0 - i as f32));
            });
        }
    });
}

#[test]
fn compile_error_carries_stderr_and_source() {
    let src =
        "void broken_rg(void **bufs, const int *vals, int core, int ncores) {\n  int x = ;\n}\n";
    let e = compile_cc(src).unwrap_err();
    assert!(matches!(e, Error::Compile(_)), "{e:?}");
    let m = e.message();
    assert!(m.contains("cc failed"), "{m}");
    assert!(m.contains("error"), "{m}");
    assert!(m.contains("   2 |   int x = ;"), "{m}");
}

#[test]
fn entry_lookup_escapes_names_and_reports_missing() {
    // The renderer escapes `E_<4>` as `E_3C43E`; the program finds `E_3C43E_rg`.
    let src = "void E_3C43E_rg(void **bufs, const int *vals, int core, int ncores) {\n  \
               ((int *)bufs[0])[0] = vals[0] * 2 + core + ncores;\n}\n";
    let lib = compile_cc(src).unwrap();
    let prg = ClangRuntime.load("E_<4>", &lib).unwrap();
    let out = HostAllocator.alloc(4, &BufferOptions::default()).unwrap();
    prg.call(
        std::slice::from_ref(&out),
        &[20],
        Some([1, 1, 1]),
        None,
        false,
    )
    .unwrap();
    assert_eq!(from_i32s(&read(&out)), vec![41]);
    let so = TempPath::new("dltest", ".so");
    std::fs::write(so.path(), &lib).unwrap();
    let library = Library::open(so.path()).unwrap();
    assert!(library.has_symbol("E_3C43E_rg"));
    assert!(!library.has_symbol("E_4_rg"));
    let kf = library.kernel("E_3C43E_rg").unwrap();
    assert_eq!(kf.name(), "E_3C43E_rg");
    let e = kf.call(&[out.addr], &[1], 1, 1).unwrap_err();
    assert!(e.message().contains("core 1 is not in [0, 1)"), "{e}");
    let e = kf.call(&[0], &[1], 0, 1).unwrap_err();
    assert!(e.message().contains("null"), "{e}");
    kf.call(&[out.addr], &[1], 2, 3).unwrap();
    assert_eq!(from_i32s(&read(&out)), vec![7]);
    let e = Library::open("/nonexistent/lib.so").unwrap_err();
    assert!(e.message().contains("no such file"), "{e}");
    let e = ClangRuntime.load("other", &lib).err().expect("no other_rg");
    assert!(
        e.message().contains("kernel entry other_rg not found"),
        "{e}"
    );
    let e = ClangRuntime
        .load("x", b"not an elf")
        .err()
        .expect("bad object");
    assert!(matches!(e, Error::Driver(_)), "{e:?}");
}

#[test]
fn refuses_foreign_buffers_and_wide_vals() {
    let lib = compile_cc(ADD_SRC).unwrap();
    let prg = ClangRuntime.load("add", &lib).unwrap();
    let bufs = add_bufs(4);
    let gpu = RawBuf {
        addr: 0x7000_0000,
        size: 16,
        owner: Arc::new(()),
    };
    let args = [bufs.out.clone(), bufs.who.clone(), gpu, bufs.b.clone()];
    let e = prg.call(&args, &[4], None, None, false).unwrap_err();
    assert!(e.message().contains("buffer 2"), "{e}");
    let args = [bufs.out, bufs.who, bufs.a, bufs.b];
    let e = prg.call(&args, &[1 << 40], None, None, false).unwrap_err();
    assert!(e.message().contains("does not fit"), "{e}");
}

#[test]
fn compiler_choice() {
    let default = ClangCompiler::new().unwrap();
    let want = if which("clang").is_some() {
        "clang"
    } else {
        "cc"
    };
    assert_eq!(default.program().file_name().unwrap(), want);
    let key = default.cache_key().unwrap();
    assert!(
        key.starts_with(&format!("compile_clang_{want} -shared")),
        "{key}"
    );
    let _g = Context::with_str(&[("CLANG_CC", "/nonexistent/cc")]);
    let e = ClangCompiler::new().unwrap_err();
    assert!(e.message().contains("/nonexistent/cc not found"), "{e}");
}

#[test]
fn clang_device_through_registry_and_buffers() {
    register_family("RGTEST_CLANG", |name| {
        let _g = Context::with_str(&[("CLANG_CC", "cc")]);
        open_clang(name, Arc::new(TestRenderer::new("CLANG")))
    });
    let dev = open_registered("rgtest_clang").unwrap();
    assert_eq!(dev.renderer.opts().device, "CLANG");
    let n = 37;
    let mk = |xs: &[f32]| {
        Buffer::with_initial(
            "RGTEST_CLANG",
            n,
            dtypes::float32,
            BufferOptions::default(),
            &f32s(xs),
        )
        .unwrap()
    };
    let a = mk(&(0..n).map(|i| i as f32).collect::<Vec<_>>());
    let b = mk(&vec![1.5; n]);
    let out = Buffer::new("RGTEST_CLANG", n, dtypes::float32, BufferOptions::default());
    let who = Buffer::new("RGTEST_CLANG", n, dtypes::int32, BufferOptions::default());
    let _c = Context::new(&[("CACHELEVEL", 0)]);
    let lib = compile_cached(&*dev.compiler, ADD_SRC).unwrap();
    let prg = dev.runtime.load("add", &lib).unwrap();
    let raws: Vec<RawBuf> = [&out, &who, &a, &b]
        .iter()
        .map(|x| x.ensure_allocated().unwrap().clone())
        .collect();
    prg.call(&raws, &[n as i64], None, None, true).unwrap();
    dev.synchronize().unwrap();
    let want: Vec<f32> = (0..n).map(|i| i as f32 + 1.5).collect();
    assert_eq!(from_f32s(&out.as_bytes().unwrap()), want);
    // A view of the output reads the kernel's result at its offset.
    let v = out.view(2, dtypes::float32, 4 * 10).unwrap();
    v.ensure_allocated().unwrap();
    assert_eq!(from_f32s(&v.as_bytes().unwrap()), vec![11.5, 12.5]);
}

/// The C flags may not let the compiler reassociate or contract float math (CLANG must give the
/// interpreter's bits) and need no prelude header.
#[test]
fn cflags_keep_ieee_semantics_and_no_prelude() {
    assert!(CFLAGS.contains(&"-ffp-contract=off"));
    for bad in [
        "-ffast-math",
        "-Ofast",
        "-fassociative-math",
        "-funsafe-math-optimizations",
    ] {
        assert!(!CFLAGS.contains(&bad), "{bad}");
    }
    assert!(!CFLAGS.contains(&"tgmath.h") && !CFLAGS.contains(&"-include"));
}
