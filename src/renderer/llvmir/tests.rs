use super::*;
use crate::dtype::{dtypes, ConstValue, DType};
use crate::hw::amd::targets::GFX1030;
use crate::ops::{BinaryOps, UnaryOps};

// Hand-linearized UOp lists (the order the linearizer would produce).

fn c(d: DType, v: impl Into<ConstValue>) -> UOp {
    UOp::cnst(d, v)
}
fn ci(v: i64) -> UOp {
    c(dtypes::int32, v)
}
fn global(d: DType, idx: usize, out: bool) -> UOp {
    UOp::define_global(d, idx, out)
}
fn range(end: UOp, depth: usize, idx: usize, red: bool) -> UOp {
    UOp::range(ci(0), end, depth, idx, red)
}
fn endrange(r: &UOp) -> UOp {
    UOp::endrange(r)
}
fn load(buf: &UOp, idx: &UOp, d: DType) -> UOp {
    UOp::load(buf, idx, d)
}
fn store(buf: &UOp, idx: &UOp, v: &UOp) -> UOp {
    UOp::store(buf, idx, v)
}
fn alu(op: impl Into<crate::ops::Op>, d: DType, src: &[&UOp]) -> UOp {
    UOp::alu(op, d, src.iter().map(|u| (*u).clone()).collect())
}

/// data0[r] = data1[r] + data2[r], r < n.
fn add_kernel(n: i64, d: DType) -> Vec<UOp> {
    let (d0, d1, d2) = (global(d, 0, true), global(d, 1, false), global(d, 2, false));
    let cn = ci(n);
    let r = range(cn.clone(), 1, 0, false);
    let (a, b) = (load(&d1, &r, d), load(&d2, &r, d));
    let s = alu(BinaryOps::ADD, d, &[&a, &b]);
    let st = store(&d0, &r, &s);
    vec![d0, d1, d2, ci(0), cn, r.clone(), a, b, s, st, endrange(&r)]
}

/// data0[r0] = sum_r1 (float)data1[r0*k+r1]*2+1.
fn reduce_kernel(m: i64, k: i64, d: DType, acc_d: DType) -> Vec<UOp> {
    let (d0, d1) = (global(acc_d, 0, true), global(d, 1, false));
    let (cm, ck) = (ci(m), ci(k));
    let r0 = range(cm.clone(), 1, 0, false);
    let r1 = range(ck.clone(), 2, 1, true);
    let init = c(acc_d, 0.0);
    let acc = UOp::define_acc(acc_d, 0.0, std::slice::from_ref(&r1), 0, 0);
    let i0 = alu(BinaryOps::MUL, dtypes::int32, &[&r0, &ck]);
    let idx = alu(BinaryOps::ADD, dtypes::int32, &[&i0, &r1]);
    let x = load(&d1, &idx, d);
    let xc = x.cast(acc_d);
    let two = c(acc_d, 2.0);
    let one = c(acc_d, 1.0);
    let m2 = alu(BinaryOps::MUL, acc_d, &[&xc, &two]);
    let p1 = alu(BinaryOps::ADD, acc_d, &[&m2, &one]);
    let sum = alu(BinaryOps::ADD, acc_d, &[&p1, &acc]);
    let phi = UOp::phi(&acc, &sum);
    let st = store(&d0, &r0, &phi);
    vec![
        d0,
        d1,
        ci(0),
        one,
        two,
        ck.clone(),
        cm,
        init,
        r0.clone(),
        acc,
        r1.clone(),
        i0,
        idx,
        x,
        xc,
        m2,
        p1,
        sum,
        phi,
        endrange(&r1),
        st,
        endrange(&r0),
    ]
}

#[test]
fn cpu_elementwise_structure() {
    let ir = LLVMRenderer::cpu(true)
        .render("E_16", &add_kernel(16, dtypes::float32))
        .unwrap();
    assert!(ir.contains("define internal void @E_16(ptr noalias %data0, ptr noalias %data1, ptr noalias %data2, i32 %split.lo, i32 %split.hi) #0 {"), "{ir}");
    assert!(
        ir.contains("define void @E_16_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) #5 {"),
        "{ir}"
    );
    // the entry is compiled unoptimized, the kernel it calls is not
    assert!(
        ir.contains("attributes #5 = { noinline nounwind optnone \"no-builtins\""),
        "{ir}"
    );
    assert!(
        ir.contains("attributes #0 = { nounwind \"no-builtins\"")
            && !ir.contains("#0 = { noinline"),
        "{ir}"
    );
    assert!(
        ir.contains("= fadd float"),
        "no fast-math flags on the CPU: {ir}"
    );
    assert!(!ir.contains("reassoc") && !ir.contains("contract"), "{ir}");
    assert!(
        ir.contains("loop_header_0:") && ir.contains("%ridx0 = phi i32"),
        "{ir}"
    );
    let typed = LLVMRenderer::cpu(false)
        .render("E_16", &add_kernel(16, dtypes::float32))
        .unwrap();
    assert!(typed.contains("@E_16(float* noalias %data0"), "{typed}");
    assert!(
        typed.contains("define void @E_16_rg(i8** %bufs, i32* %vals"),
        "{typed}"
    );
    assert!(!typed.contains(" ptr "), "{typed}");
}

#[test]
fn reduce_carries_the_accumulator() {
    let ir = LLVMRenderer::cpu(true)
        .render(
            "r_4_8",
            &reduce_kernel(4, 8, dtypes::float16, dtypes::float32),
        )
        .unwrap();
    // the inner loop carries acc0, the outer one does not (the acc is defined inside it)
    assert!(
        ir.contains("%acc0.1 = phi float [ 0.0, %loop_body_0 ], ["),
        "{ir}"
    );
    assert!(!ir.contains("%acc0.0"), "{ir}");
    assert!(ir.contains("fpext half"), "{ir}");
    // after the inner loop the store reads the header phi
    assert!(ir.contains("store float %acc0.1, ptr %store0.p"), "{ir}");
}

#[test]
fn refuses_what_it_cannot_render() {
    let d0 = global(dtypes::float32, 0, true);
    let g = UOp::special(0, "gidx0", 4);
    let one = c(dtypes::float32, 1.0);
    let st = store(&d0, &g, &one);
    let e = LLVMRenderer::cpu(true)
        .render("E_4", &[d0.clone(), one.clone(), g.clone(), st.clone()])
        .unwrap_err();
    assert!(e.message().contains("no launch indices"), "{e}");
    let ir = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("E_4", &[d0.clone(), one, g, st])
        .unwrap();
    assert!(
        ir.contains("call i32 @llvm.amdgcn.workgroup.id.x()"),
        "{ir}"
    );
    let r = range(ci(4), 1, 0, false);
    let e = LLVMRenderer::cpu(true)
        .render("x", &[d0, ci(0), ci(4), r])
        .unwrap_err();
    assert!(e.message().contains("not closed"), "{e}");
    let x = c(dtypes::float64, 1.0);
    let e2 = alu(UnaryOps::EXP2, dtypes::float64, &[&x]);
    let d1 = global(dtypes::float64, 0, true);
    let st = store(&d1, &ci(0), &e2);
    let e = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("x", &[d1.clone(), x.clone(), ci(0), e2.clone(), st.clone()])
        .unwrap_err();
    assert!(e.message().contains("EXP2 of double"), "{e}");
    assert!(LLVMRenderer::cpu(true)
        .render("x", &[d1, x, ci(0), e2, st])
        .is_ok());
}

#[test]
fn the_split_loop_is_the_clang_one() {
    let k = add_kernel(16, dtypes::float32);
    assert_eq!(split_range(&k), Some(5));
    let ir = LLVMRenderer::cpu(true).render("E_16", &k).unwrap();
    // constant bounds: the optnone entry divides, the kernel gets its share's bounds
    let (kernel, entry) = ir.split_once("define void @E_16_rg").unwrap();
    assert!(
        entry.contains("%share.lo = trunc i64 %share.lod to i32")
            && entry.contains("%share.hi = trunc i64 %share.hid to i32")
            && entry.contains("i32 %share.lo, i32 %share.hi)"),
        "{ir}"
    );
    assert!(
        kernel.contains("%ridx0 = phi i32 [ %split.lo, %entry ]")
            && kernel.contains("icmp slt i32 %ridx0, %split.hi")
            && !kernel.contains("sdiv")
            && !kernel.contains("%core"),
        "{ir}"
    );
    let r = reduce_kernel(4, 8, dtypes::float32, dtypes::float32);
    assert_eq!(split_range(&r), Some(8));
}

/// A split loop whose bound is a variable keeps its share computed in the kernel, from `core` and
/// `ncores`.
#[test]
fn a_variable_split_bound_divides_in_the_kernel() {
    let d = dtypes::float32;
    let (d0, d1, d2) = (global(d, 0, true), global(d, 1, false), global(d, 2, false));
    let n = UOp::define_var("n", 1, 64);
    let r = range(n.clone(), 1, 0, false);
    let (a, b) = (load(&d1, &r, d), load(&d2, &r, d));
    let s = alu(BinaryOps::ADD, d, &[&a, &b]);
    let st = store(&d0, &r, &s);
    let k = vec![d0, d1, d2, n, ci(0), r.clone(), a, b, s, st, endrange(&r)];
    let ir = LLVMRenderer::cpu(true).render("E_n", &k).unwrap();
    let (kernel, entry) = ir.split_once("define void @E_n_rg").unwrap();
    assert!(
        kernel.contains("i32 %core, i32 %ncores) #0 {")
            && kernel.contains("%ridx0.lo = trunc i64 %ridx0.lod to i32"),
        "{ir}"
    );
    assert!(
        entry.contains("i32 %core, i32 %ncores)") && !entry.contains("%share"),
        "{ir}"
    );
}

#[test]
fn renders_ir_that_libllvm_compiles() {
    use crate::ffi::llvm::{find_libraries, Llvm, AMDGPU_TRIPLE};
    let mut any = false;
    for lib in find_libraries() {
        let Ok(llvm) = Llvm::open(&lib.path) else {
            continue;
        };
        any = true;
        let kernels = [
            ("E_16", add_kernel(16, dtypes::float32)),
            ("E_16h", add_kernel(16, dtypes::float16)),
            ("E_16b", add_kernel(16, dtypes::bfloat16)),
            ("E_16u8", add_kernel(16, dtypes::uint8)),
            ("E_16bool", add_kernel(16, dtypes::bool)),
            (
                "r_4_8",
                reduce_kernel(4, 8, dtypes::float16, dtypes::float32),
            ),
        ];
        for (name, k) in &kernels {
            let ir = LLVMRenderer::cpu_for(&llvm).render(name, k).unwrap();
            if std::env::var("SHOW_IR").is_ok() {
                println!("{ir}");
            }
            let triple = llvm.host_triple();
            llvm.compile_ir(&ir, &triple, "", "", true)
                .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{ir}", llvm.version()));
            let ir = LLVMRenderer::amdgpu_for(&llvm, &GFX1030)
                .render(name, k)
                .unwrap();
            llvm.compile_ir(&ir, AMDGPU_TRIPLE, "gfx1030", "", true)
                .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{ir}", llvm.version()));
        }
    }
    if !any {
        println!("skipped: no libLLVM found");
    }
}

/// CPU EXP2 of a float is a call of the module's own helper (no libm `exp2f`), whose call site
/// names the vector forms for the SLP vectorizer, each defined in the module; the GPUs keep the
/// intrinsic.
#[test]
fn float_exp2_calls_a_helper_on_the_cpu_only() {
    let x = c(dtypes::float32, 0.5);
    let e2 = alu(UnaryOps::EXP2, dtypes::float32, &[&x]);
    let d0 = global(dtypes::float32, 0, true);
    let st = store(&d0, &ci(0), &e2);
    let uops = [d0, x, ci(0), e2, st];
    let ir = LLVMRenderer::cpu(true).render("x", &uops).unwrap();
    assert!(!ir.contains("@llvm.exp2"), "{ir}");
    assert!(
        ir.contains("  %alu0 = call float @rg_exp2_f32(float 0.5) #2\n"),
        "{ir}"
    );
    assert!(
        ir.contains("define internal float @rg_exp2_f32(float %x) #1 {"),
        "{ir}"
    );
    assert!(
        ir.contains("declare double @llvm.fma.f64(double, double, double)"),
        "{ir}"
    );
    assert!(ir.contains("fptrunc double"), "{ir}");
    for n in [2, 4, 8, 16] {
        let v = format!("<{n} x float>");
        assert!(
            ir.contains(&format!(
                "define internal {v} @rg_exp2_f32_v{n}({v} %x) #1 {{"
            )),
            "{ir}"
        );
        assert!(
            ir.contains(&format!("_ZGV_LLVM_N{n}v_rg_exp2_f32(rg_exp2_f32_v{n})")),
            "{ir}"
        );
    }
    assert!(
        ir.contains("attributes #1 = { alwaysinline nounwind readnone"),
        "{ir}"
    );
    assert!(!ir.contains("attributes #0 = { alwaysinline"), "{ir}");
    let ir = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("x", &uops)
        .unwrap();
    assert!(ir.contains("@llvm.exp2.f32"), "{ir}");
    assert!(!ir.contains("rg_exp2"), "{ir}");
}

/// A vector EXP2 UOp is one call of the helper of its width, and only that helper is defined;
/// a half EXP2 has its own helper (widened to double inside).
#[test]
fn vector_and_half_exp2_call_their_own_helper() {
    let f4 = dtypes::float32.vec(4);
    let x = c(dtypes::float32, 0.5);
    let v = UOp::vectorize(vec![x.clone(), x.clone(), x.clone(), x.clone()], f4);
    let e2 = alu(UnaryOps::EXP2, f4, &[&v]);
    let d0 = global(dtypes::float32, 0, true);
    let st = store(&d0, &ci(0), &e2);
    let uops = [d0.clone(), x, v, ci(0), e2, st];
    let ir = LLVMRenderer::cpu(true).render("x", &uops).unwrap();
    assert!(
        ir.contains("= call <4 x float> @rg_exp2_f32_v4(<4 x float> "),
        "{ir}"
    );
    assert_eq!(ir.matches("define internal").count(), 2, "{ir}");
    assert!(!ir.contains("vector-function-abi-variant"), "{ir}");
    let h = c(dtypes::float16, 0.5);
    let e2 = alu(UnaryOps::EXP2, dtypes::float16, &[&h]);
    let d0 = global(dtypes::float16, 0, true);
    let st = store(&d0, &ci(0), &e2);
    let ir = LLVMRenderer::cpu(true)
        .render("x", &[d0, h, ci(0), e2, st])
        .unwrap();
    assert!(ir.contains("call half @rg_exp2_f16(half "), "{ir}");
    assert!(ir.contains("fpext half %x to double"), "{ir}");
    assert!(
        ir.contains("_ZGV_LLVM_N8v_rg_exp2_f16(rg_exp2_f16_v8)"),
        "{ir}"
    );
}

/// The vector ALU fold's output in LLVM IR: a splat (insert + shuffle) and one vector `fmul` and
/// `fadd` instead of four of each.
#[test]
fn vector_alu_renders_vector_instructions() {
    use crate::codegen::renderer::VectorAlu;
    use crate::codegen::uopgraph::linearize_for;
    let f = dtypes::float32;
    let (d0, d1, d2) = (global(f, 0, true), global(f, 1, false), global(f, 2, false));
    let r = range(ci(8), 1, 0, false);
    let idx = r.mul(4);
    let v = load(&d1, &idx, f.vec(4));
    let s = load(&d2, &r, f);
    let lanes = (0..4)
        .map(|i| s.mul(UOp::gep(&v, i, f)).add(UOp::gep(&v, i, f)))
        .collect();
    let st = store(&d0, &idx, &UOp::vectorize(lanes, f.vec(4)));
    let uops = linearize_for(&[st], VectorAlu::Llvm, true).unwrap();
    let src = LLVMRenderer::cpu(true).render("k", &uops).unwrap();
    for want in [
        "  %cast0.i = insertelement <4 x float> poison, float %val0.m, i32 0\n",
        "  %cast0 = shufflevector <4 x float> %cast0.i, <4 x float> poison, <4 x i32> zeroinitializer\n",
        "  %alu1 = fmul <4 x float> %cast0, %val1.m\n",
        "  %alu2 = fadd <4 x float> %alu1, %val1.m\n",
    ] {
        assert!(src.contains(want), "{want} not in\n{src}");
    }
    assert!(!src.contains("fmul float"), "{src}");
    assert!(!src.contains("extractelement"), "{src}");
}

/// data1[r*2+1] read, r*2 also stored as a value into data2[r], data0[r*3+1] written, r < 8.
fn mixed_index_kernel() -> Vec<UOp> {
    let i32t = dtypes::int32;
    let (d0, d1) = (
        global(dtypes::float32, 0, true),
        global(dtypes::float32, 1, false),
    );
    let d2 = global(i32t, 2, true);
    let (c8, c1, c2, c3) = (ci(8), ci(1), ci(2), ci(3));
    let r = range(c8.clone(), 1, 0, false);
    let x = alu(BinaryOps::MUL, i32t, &[&r, &c2]);
    let i1 = alu(BinaryOps::ADD, i32t, &[&x, &c1]);
    let v = load(&d1, &i1, dtypes::float32);
    let sx = store(&d2, &r, &x);
    let y = alu(BinaryOps::MUL, i32t, &[&r, &c3]);
    let i2 = alu(BinaryOps::ADD, i32t, &[&y, &c1]);
    let sv = store(&d0, &i2, &v);
    vec![
        d0,
        d1,
        d2,
        ci(0),
        c1,
        c2,
        c3,
        c8,
        r.clone(),
        x,
        i1,
        v,
        sx,
        y,
        i2,
        sv,
        endrange(&r),
    ]
}

/// On the CPU, integer arithmetic used only as a load or store index computes in i64 (its
/// 32-bit operands sign-extended where used) and the access indexes with it; a value that is also
/// stored stays i32. The GPU flavours keep every index in i32.
#[test]
fn index_only_arithmetic_is_64_bit_on_the_cpu() {
    let k = mixed_index_kernel();
    let ir = LLVMRenderer::cpu(true).render("E_8", &k).unwrap();
    for want in [
        // r*2 is stored as a value: i32, widened where the index uses it
        "%alu0 = mul i32 %ridx0, 2",
        "%wide0 = sext i32 %alu0 to i64",
        "%alu1 = add i64 %wide0, 1",
        "getelementptr inbounds float, ptr %data1, i64 %alu1",
        "getelementptr inbounds i32, ptr %data2, i32 %ridx0",
        "store i32 %alu0, ptr",
        // r*3+1 is only an index
        "%wide1 = sext i32 %ridx0 to i64",
        "%alu2 = mul i64 %wide1, 3",
        "%alu3 = add i64 %alu2, 1",
        "getelementptr inbounds float, ptr %data0, i64 %alu3",
    ] {
        assert!(ir.contains(want), "{want} not in\n{ir}");
    }
    let gpu = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("E_8", &k)
        .unwrap();
    assert!(
        !gpu.contains("i64 %alu") && !gpu.contains("sext i32 %alu"),
        "{gpu}"
    );
    assert!(gpu.contains("%alu3 = add i32 %alu2, 1"), "{gpu}");
    use crate::ffi::llvm::{find_libraries, Llvm};
    for lib in find_libraries().iter().filter(|l| l.major >= 15) {
        let Ok(llvm) = Llvm::open(&lib.path) else {
            continue;
        };
        llvm.compile_ir(&ir, &llvm.host_triple(), "", "", false)
            .unwrap_or_else(|e| panic!("LLVM {}: {e}\n{ir}", llvm.version()));
    }
}

/// `data0[4k..4k+4] = exp2(data1[4k..4k+4])` for k < `n` as `float4` EXP2s, after a loop
/// (`epilogue`) or inside its body.
fn vec4_exp2_kernel(n: i64, epilogue: bool) -> Vec<UOp> {
    let f4 = dtypes::float32.vec(4);
    let (d0, d1) = (
        global(dtypes::float32, 0, true),
        global(dtypes::float32, 1, false),
    );
    let c2 = ci(2);
    let r = range(c2.clone(), 1, 0, false);
    let mut body = vec![];
    for k in 0..n {
        let idx = ci(4 * k);
        let x = load(&d1, &idx, f4);
        let e = alu(UnaryOps::EXP2, f4, &[&x]);
        let st = store(&d0, &idx, &e);
        body.extend([idx, x, e, st]);
    }
    let mut uops = vec![d0, d1, ci(0), c2, r.clone()];
    if epilogue {
        uops.push(endrange(&r));
        uops.extend(body);
    } else {
        uops.extend(body);
        uops.push(endrange(&r));
    }
    uops
}

/// Vector EXP2s after a loop call the `noinline` out-of-line helper when there are
/// `OUTLINE_MIN` (2) or more of one type; a single one, or ones in a loop body, call the
/// inlined helper (`exp2.rs`).
#[test]
fn epilogue_vector_exp2s_call_one_outlined_helper() {
    use super::exp2::OUTLINE_MIN;
    assert_eq!(OUTLINE_MIN, 2);
    let r = LLVMRenderer::cpu(true);
    let ir = r.render("x", &vec4_exp2_kernel(3, true)).unwrap();
    let call = "= call <4 x float> @rg_exp2_f32_v4_outlined(<4 x float> ";
    assert_eq!(ir.matches(call).count(), 3, "{ir}");
    assert!(
        ir.contains("define internal <4 x float> @rg_exp2_f32_v4_outlined(<4 x float> %x) #4 {"),
        "{ir}"
    );
    assert!(ir.contains("attributes #4 = { noinline "), "{ir}");
    assert!(!ir.contains("@rg_exp2_f32_v4("), "{ir}");
    for (n, epilogue) in [(1, true), (3, false)] {
        let ir = r.render("x", &vec4_exp2_kernel(n, epilogue)).unwrap();
        assert!(!ir.contains("outlined"), "{ir}");
        let inline = "= call <4 x float> @rg_exp2_f32_v4(<4 x float> ";
        assert_eq!(ir.matches(inline).count(), n as usize, "{ir}");
    }
    // GPU flavours have no helpers at all
    let ir = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("x", &vec4_exp2_kernel(3, true))
        .unwrap();
    assert!(!ir.contains("rg_exp2"), "{ir}");
}

/// A CPU kernel whose ALUs are all vectors or index-only arithmetic, with vector stores, starts
/// with the vector-only mark (the LLVM device then skips SLP); a scalar float ALU, a scalar
/// store or a GPU flavour gives no mark.
#[test]
fn vector_only_kernels_carry_the_mark() {
    let f4 = dtypes::float32.vec(4);
    let r = LLVMRenderer::cpu(true);
    for epilogue in [true, false] {
        let ir = r.render("x", &vec4_exp2_kernel(2, epilogue)).unwrap();
        assert!(ir.starts_with(&format!("{VECTOR_ONLY_MARK}\n")), "{ir}");
    }
    // index-only int arithmetic (r*4) keeps the mark
    let (d0, d1) = (
        global(dtypes::float32, 0, true),
        global(dtypes::float32, 1, false),
    );
    let c8 = ci(8);
    let rg = range(c8.clone(), 1, 0, false);
    let idx = alu(BinaryOps::MUL, dtypes::int32, &[&rg, &ci(4)]);
    let x = load(&d1, &idx, f4);
    let y = alu(BinaryOps::ADD, f4, &[&x, &x]);
    let st = store(&d0, &idx, &y);
    let uops = vec![
        d0.clone(),
        d1.clone(),
        ci(0),
        c8,
        rg.clone(),
        ci(4),
        idx.clone(),
        x.clone(),
        y,
        st,
        endrange(&rg),
    ];
    let ir = r.render("x", &uops).unwrap();
    assert!(ir.starts_with(VECTOR_ONLY_MARK), "{ir}");
    // a scalar lane of the vector stored alone: a scalar store
    let lane = UOp::gep(&x, 0, dtypes::float32);
    let st1 = store(&d0, &idx, &lane);
    let mut scalar_store = uops[..8].to_vec();
    scalar_store.extend([lane, st1, endrange(&rg)]);
    let ir = r.render("x", &scalar_store).unwrap();
    assert!(!ir.contains(VECTOR_ONLY_MARK), "{ir}");
    let ir = r.render("x", &add_kernel(16, dtypes::float32)).unwrap();
    assert!(!ir.contains(VECTOR_ONLY_MARK), "{ir}");
    let ir = LLVMRenderer::amdgpu(&GFX1030, true)
        .render("x", &vec4_exp2_kernel(2, false))
        .unwrap();
    assert!(!ir.contains(VECTOR_ONLY_MARK), "{ir}");
}
