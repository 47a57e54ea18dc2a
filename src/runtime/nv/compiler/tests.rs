//! The compile paths against the real NVIDIA tools (no GPU needed): each test kernel is rendered,
//! compiled for sm_80, sm_89 and sm_90, and its cubin loaded by [`crate::runtime::nv::cubin`].
//! A path whose tool is absent is skipped with the reason printed (set `NV_SITE_PACKAGES` to a
//! site-packages holding `pip install nvidia-cuda-nvcc nvidia-cuda-nvrtc` wheels).

use super::*;
use crate::codegen::uops::UOp;
use crate::dtype::{dtypes, DType};
use crate::helpers::Context;
use crate::hw::nv::arch::arch_for_sm;
use crate::ops::{BinaryOps, UnaryOps};
use crate::runtime::nv::cubin::Cubin;

const SMS: [u32; 3] = [80, 89, 90];

fn ci(v: i64) -> UOp {
    UOp::cnst(dtypes::int32, v)
}

fn alu(op: impl Into<crate::ops::Op>, d: DType, src: &[&UOp]) -> UOp {
    UOp::alu(op, d, src.iter().map(|u| (*u).clone()).collect())
}

/// A test kernel: its UOps, buffer count and variable count.
struct Kernel {
    name: &'static str,
    uops: Vec<UOp>,
    nbufs: u32,
    nvars: u32,
}

/// data0[r] = data1[r] + data2[r], r < 16 (a loop, no launch indices).
fn add_loop(name: &'static str, d: DType) -> Kernel {
    let (d0, d1, d2) = (
        UOp::define_global(d, 0, true),
        UOp::define_global(d, 1, false),
        UOp::define_global(d, 2, false),
    );
    let cn = ci(16);
    let r = UOp::range(ci(0), cn.clone(), 1, 0, false);
    let (a, b) = (UOp::load(&d1, &r, d), UOp::load(&d2, &r, d));
    let s = alu(BinaryOps::ADD, d, &[&a, &b]);
    let st = UOp::store(&d0, &r, &s);
    let uops = vec![
        d0,
        d1,
        d2,
        ci(0),
        cn,
        r.clone(),
        a,
        b,
        s,
        st,
        UOp::endrange(&r),
    ];
    Kernel {
        name,
        uops,
        nbufs: 3,
        nvars: 0,
    }
}

/// data0[g*32+l] = exp2(data1[..]) + log2(..) + sin(..) + sqrt(..) + (float)n, on gidx0 x lidx0.
fn math_var() -> Kernel {
    let f = dtypes::float32;
    let (d0, d1) = (
        UOp::define_global(f, 0, true),
        UOp::define_global(f, 1, false),
    );
    let n = UOp::define_var("n", 1, 1024);
    let (g, l) = (UOp::special(0, "gidx0", 16), UOp::special(0, "lidx0", 32));
    let c32 = ci(32);
    let gm = alu(BinaryOps::MUL, dtypes::int32, &[&g, &c32]);
    let idx = alu(BinaryOps::ADD, dtypes::int32, &[&gm, &l]);
    let x = UOp::load(&d1, &idx, f);
    let mut uops = vec![
        d0.clone(),
        d1,
        n.clone(),
        c32,
        g,
        l,
        gm,
        idx.clone(),
        x.clone(),
    ];
    let mut acc = n.cast(f);
    uops.push(acc.clone());
    for o in [
        UnaryOps::EXP2,
        UnaryOps::LOG2,
        UnaryOps::SIN,
        UnaryOps::SQRT,
    ] {
        let y = alu(o, f, &[&x]);
        let s = alu(BinaryOps::ADD, f, &[&acc, &y]);
        uops.extend([y, s.clone()]);
        acc = s;
    }
    uops.push(UOp::store(&d0, &idx, &acc));
    Kernel {
        name: "E_16_32_math",
        uops,
        nbufs: 2,
        nvars: 1,
    }
}

/// temp[l] = data1[g*32+l]; barrier; data0[g*32+l] = temp[31-l] * m (shared memory, two vars).
fn local_reverse(d: DType) -> Kernel {
    let (d0, d1) = (
        UOp::define_global(d, 0, true),
        UOp::define_global(d, 1, false),
    );
    let (m, k) = (UOp::define_var("m", 1, 8), UOp::define_var("k", 0, 8));
    let temp = UOp::define_local(d, "temp", 32);
    let (g, l) = (UOp::special(0, "gidx0", 8), UOp::special(0, "lidx0", 32));
    let (c32, c31) = (ci(32), ci(31));
    let gm = alu(BinaryOps::MUL, dtypes::int32, &[&g, &c32]);
    let idx = alu(BinaryOps::ADD, dtypes::int32, &[&gm, &l]);
    let x = UOp::load(&d1, &idx, d);
    let st = UOp::store(&temp, &l, &x);
    let bar = UOp::barrier(vec![st.clone()]);
    let nl = alu(UnaryOps::NEG, dtypes::int32, &[&l]);
    let ridx = alu(BinaryOps::ADD, dtypes::int32, &[&nl, &c31]);
    let y = UOp::load_after(&temp, &ridx, None, &bar, d);
    let mk = alu(BinaryOps::ADD, dtypes::int32, &[&m, &k]);
    let mf = mk.cast(d);
    let z = alu(BinaryOps::MUL, d, &[&y, &mf]);
    let out = UOp::store(&d0, &idx, &z);
    let uops = vec![
        d0, d1, m, k, temp, c32, c31, g, l, gm, idx, x, st, bar, nl, ridx, y, mk, mf, z, out,
    ];
    Kernel {
        name: "r_8_32_local",
        uops,
        nbufs: 2,
        nvars: 2,
    }
}

fn kernels() -> Vec<Kernel> {
    vec![
        add_loop("E_16", dtypes::float32),
        add_loop("E_16h", dtypes::float16),
        add_loop("E_16i", dtypes::int32),
        math_var(),
        local_reverse(dtypes::float32),
    ]
}

/// Every path that is available here (a reason printed for each that is not).
fn available(sm: u32) -> Vec<NVCompiler> {
    let mut out = vec![];
    for kind in [
        NvCompilerKind::Nvrtc,
        NvCompilerKind::Ptxas,
        NvCompilerKind::NvJitLink,
    ] {
        match NVCompiler::with_kind("NV", sm, kind) {
            Ok(c) => out.push(c),
            Err(e) => println!("skipped {} sm_{sm}: {}", kind.name(), e.message()),
        }
    }
    out
}

fn check_cubin(c: &NVCompiler, k: &Kernel, sm: u32, src: &str) {
    let bin = c
        .compile(src)
        .unwrap_or_else(|e| panic!("{c:?} {}: {e}\n{src}", k.name));
    let arch = arch_for_sm(sm).unwrap();
    let cubin = Cubin::parse(&bin, Some(k.name), arch, sm)
        .unwrap_or_else(|e| panic!("{c:?} {}: cubin: {e}", k.name));
    assert_eq!(cubin.sm, sm, "{c:?} {}", k.name);
    assert_eq!(cubin.param_base, arch.cbuf0.param_base, "{c:?} {}", k.name);
    let want = if sm >= 90 { 0x210 } else { 0x160 };
    assert_eq!(cubin.param_base, want, "{c:?} {}", k.name);
    assert_eq!(
        cubin.param_size,
        8 * k.nbufs + 4 * k.nvars,
        "{c:?} {}: {:?}",
        k.name,
        cubin.kparams
    );
    assert!(cubin.regcount > 0, "{c:?} {}", k.name);
    assert!(cubin.code_size > 0, "{c:?} {}", k.name);
    println!(
        "{:<10} sm_{sm} {:<14} regs {:>3} params {:#x}+{} shared {} code {}",
        c.kind().name(),
        k.name,
        cubin.regcount,
        cubin.param_base,
        cubin.param_size,
        cubin.shared_size,
        cubin.code_size
    );
}

#[test]
fn compiles_test_kernels_to_cubins_for_ampere_ada_hopper() {
    let mut ran = 0;
    for sm in SMS {
        for c in available(sm) {
            for k in kernels() {
                let src = c.renderer().render(k.name, &k.uops).unwrap();
                check_cubin(&c, &k, sm, &src);
                ran += 1;
            }
        }
    }
    println!("{ran} cubins checked");
}

#[test]
fn the_local_kernel_reserves_shared_memory() {
    for c in available(90) {
        let k = local_reverse(dtypes::float32);
        let src = c.renderer().render(k.name, &k.uops).unwrap();
        let bin = c.compile(&src).unwrap();
        let cubin = Cubin::parse(&bin, None, arch_for_sm(90).unwrap(), 90).unwrap();
        assert!(cubin.shared_size >= 32 * 4, "{c:?}: {}", cubin.shared_size);
    }
}

#[test]
fn ptx_paths_take_ptx_text_and_report_errors() {
    for c in available(89).into_iter().filter(|c| c.kind().is_ptx()) {
        let k = add_loop("E_16", dtypes::float32);
        let ptx = c
            .to_ptx(&c.renderer().render(k.name, &k.uops).unwrap())
            .unwrap();
        assert!(is_ptx(&ptx), "{ptx}");
        assert!(ptx.contains(".entry E_16"), "{ptx}");
        check_cubin(&c, &k, 89, &ptx);
        let bad = ptx.replace("ret;", "bogus.instruction;");
        let e = c.compile(&bad).unwrap_err();
        let m = e.message().to_ascii_lowercase();
        assert!(m.contains(c.kind().name()) && m.contains("bogus"), "{e}");
    }
}

#[test]
fn nvrtc_reports_the_log_on_bad_source() {
    if let Ok(c) = NVCompiler::with_kind("CUDA", 80, NvCompilerKind::Nvrtc) {
        let e = c
            .compile("extern \"C\" __global__ void f() { undeclared_thing(); }")
            .unwrap_err();
        assert!(e.message().contains("undeclared_thing"), "{e}");
    }
}

#[test]
fn cache_keys_name_the_path_tool_and_sm() {
    for sm in [80, 90] {
        for c in available(sm) {
            let key = c.cache_key().unwrap();
            assert!(key.contains(c.kind().name()), "{key}");
            // the options change the code: a cubin built with contraction is not reused
            assert!(key.contains("_nofmad_"), "{key}");
            assert!(key.ends_with(&format!("sm_{sm}")), "{key}");
        }
    }
    let a = available(80);
    let b = available(90);
    for (x, y) in a.iter().zip(&b) {
        assert_ne!(x.cache_key(), y.cache_key());
    }
}

#[test]
fn knobs_pick_the_path() {
    let _c = Context::with_str(&[("NV_COMPILER", "bogus")]);
    let e = NvCompilerKind::preferred().unwrap_err();
    assert!(e.message().contains("NV_COMPILER=bogus"), "{e}");
    drop(_c);
    let _c = Context::with_str(&[("NV_COMPILER", "PTXAS")]);
    assert_eq!(
        NvCompilerKind::preferred().unwrap(),
        vec![NvCompilerKind::Ptxas]
    );
    drop(_c);
    let _c = Context::with_str(&[("NV_COMPILER", ""), ("PTX", "1")]);
    assert_eq!(
        NvCompilerKind::preferred().unwrap(),
        vec![NvCompilerKind::Ptxas, NvCompilerKind::NvJitLink]
    );
}

#[test]
fn missing_tools_make_a_named_error() {
    let _c = Context::with_str(&[("NV_COMPILER", "ptxas"), ("PTXAS", "/nonexistent/ptxas")]);
    let e = NVCompiler::new("NV", 90).unwrap_err();
    assert!(e.message().contains("PTXAS=/nonexistent/ptxas"), "{e}");
    assert!(e.message().contains("ptxas"), "{e}");
}

#[test]
fn ptxas_version_line() {
    let text = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 13.5, V13.5.37\nBuild cuda_13.5.r13.5/compiler.39125733_0\n";
    assert_eq!(parse_ptxas_version(text), "V13.5.37");
}
