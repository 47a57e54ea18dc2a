//! Loads, stores and value conversions of the LLVM IR renderer.
//!
//! Memory: a buffer element is reached with `getelementptr inbounds` (globals through their
//! pointer parameter, LDS arrays through `[N x T]`; on the CPU an index computed only for
//! addressing is an `i64`, `index.rs`), vectors are accessed through the element address at the
//! element's alignment; bool is stored as a byte (`trunc`/`zext`), bfloat16 as its 16 bits
//! (widened by a shift, rounded to nearest-even on stores). Gated loads read index 0 when the gate
//! is off and select the alternative (tinygrad 0.9.1), gated stores branch around the store.
//!
//! Split addresses (rawgrad beyond tinygrad 0.9.1): in a vector-only CPU kernel (`llvmir.rs`,
//! `vector_only`: compiled without the SLP vectorizer) an ungated load or store at an index-only
//! `x + c` into a global buffer, `c` a constant, is addressed by two `getelementptr`s,
//! `(base + x) + c`, without `inbounds` (`base + x` alone may lie outside the buffer). The address
//! is the same; the unrolled tile's loads then share one base, and instruction selection folds
//! each `c` into the addressing mode instead of recomputing the known bits of every `x + c`
//! (measurements in `runtime/cpu/llvm.rs`).
//!
//! Conversions: the cast table of `types::cast_op`; casts to bool compare with zero (`une` for
//! floats, so NaN is true, as in C); bitcasts go through the in-memory form. A vector built from
//! lanes is an `insertelement` chain; on the CPU flavour, one with the same value in every lane
//! (the vector ALU fold's broadcast) is one `insertelement` and a `shufflevector` splat.
//!
//! Not guaranteed: vector bool or bfloat16 accesses beyond what LLVM legalizes on the target.

use std::borrow::Cow;
use std::rc::Rc;

use crate::codegen::uops::{UArg, UOp, UOps};
use crate::dtype::{ConstValue, DType, Scalar};
use crate::renderer::text::cat;
use crate::{bail, ensure, Error, Result};

use super::types::{self, bf16_to_float, float_to_bf16, literal, mem, ptr_type, reg};
use super::walk::{dtype_of, emit, Walk};

/// A load or store index as rendered: the value, its LLVM type and, for a split address, the
/// constant element offset a second `getelementptr` adds.
struct Index {
    val: Rc<str>,
    ty: Cow<'static, str>,
    offset: Option<Rc<str>>,
}

impl Walk<'_> {
    /// The pointer to element `idx` of `buf` accessed as `access` (a vector of the element type
    /// or the element type), named from `name`; returns (pointer, pointer type).
    fn elem_ptr(
        &mut self,
        buf: &UOp,
        idx: &Index,
        access: DType,
        name: &str,
    ) -> Result<(String, Cow<'static, str>)> {
        let base = self.val(buf)?;
        let elem = mem(dtype_of(buf)?.base().scalar());
        let Index {
            val: idx,
            ty: it,
            offset,
        } = idx;
        let (addrspace, ptr) = match buf.op() {
            UOps::DEFINE_GLOBAL => {
                let a = self.flavour.global_addrspace();
                let pt = ptr_type(self.opaque, &elem, a);
                match offset {
                    None => {
                        emit!(self; "  ", name, ".p = getelementptr inbounds ", elem, ", ", pt, " ", base, ", ", it, " ", idx)
                    }
                    // no `inbounds`: `base + x` alone may lie outside the buffer
                    Some(c) => {
                        emit!(self; "  ", name, ".b = getelementptr ", elem, ", ", pt, " ", base, ", ", it, " ", idx);
                        emit!(self; "  ", name, ".p = getelementptr ", elem, ", ", pt, " ", name, ".b, i64 ", c);
                    }
                }
                (a, cat!(name, ".p"))
            }
            UOps::DEFINE_LOCAL => {
                let UArg::Local { size, .. } = buf.arg() else {
                    bail!(Codegen, "DEFINE_LOCAL without a size");
                };
                let a = self.flavour.local_addrspace();
                let arr = cat!("[", size, " x ", elem, "]");
                let at = ptr_type(self.opaque, &arr, a);
                emit!(self; "  ", name, ".p = getelementptr inbounds ", arr, ", ", at, " ", base, ", i32 0, ", it, " ", idx);
                (a, cat!(name, ".p"))
            }
            op => bail!(Codegen, "load/store through a {op:?}, not a buffer"),
        };
        let et = ptr_type(self.opaque, &elem, addrspace);
        if access.count > 1 && !self.opaque {
            let vt = ptr_type(self.opaque, &mem(access), addrspace);
            emit!(self; "  ", name, ".vp = bitcast ", et, " ", ptr, " to ", vt);
            return Ok((cat!(name, ".vp"), vt));
        }
        let at = ptr_type(self.opaque, &mem(access), addrspace);
        Ok((ptr, at))
    }

    /// The index of a load or store: `i64` when it is an index-only ALU (`index.rs`), else as
    /// its dtype says; split into `x` and the constant offset `c` of an index-only `x + c` into a
    /// global buffer of a vector-only kernel when `may_split` (module doc).
    fn index(&mut self, u: &UOp, may_split: bool) -> Result<Index> {
        let s = u
            .src()
            .get(1)
            .cloned()
            .ok_or_else(|| Error::Codegen(format!("{:?} without an index", u.op())))?;
        let global = u
            .src()
            .first()
            .is_some_and(|b| b.op() == UOps::DEFINE_GLOBAL);
        if may_split && global && self.vector_only {
            if let Some((x, c)) = super::index::const_offset(&s, &self.wide) {
                return Ok(Index {
                    val: self.src_wide(&s, x)?,
                    ty: Cow::Borrowed("i64"),
                    offset: Some(self.src(&s, c)?),
                });
            }
        }
        let ty = if self.wide.contains_key(&s) {
            Cow::Borrowed("i64")
        } else {
            reg(dtype_of(&s)?)
        };
        Ok(Index {
            val: self.val(&s)?,
            ty,
            offset: None,
        })
    }

    pub(super) fn load(&mut self, u: &UOp) -> Result<()> {
        let out = dtype_of(u)?;
        let buf = u
            .src()
            .first()
            .cloned()
            .ok_or_else(|| Error::Codegen("LOAD without a buffer".into()))?;
        let bd = dtype_of(&buf)?.base().scalar();
        let access = bd.vec(out.count);
        let name = self.ssa("val");
        // (buf, idx, gate, alt[, barrier]); a BARRIER or IF third source only orders the load
        let gated = u.src().len() >= 4 && !matches!(u.src()[2].op(), UOps::BARRIER | UOps::IF);
        let mut idx = self.index(u, !gated)?;
        let gate = if gated {
            Some((self.src(u, 2)?, self.src(u, 3)?))
        } else {
            None
        };
        if let Some((g, _)) = &gate {
            let it = &idx.ty;
            emit!(self; "  ", name, ".i = select i1 ", g, ", ", it, " ", idx.val, ", ", it, " 0");
            idx.val = cat!(name, ".i").into();
        }
        let (ptr, pt) = self.elem_ptr(&buf, &idx, access, &name)?;
        let mt = mem(access);
        let align = bd.itemsize();
        emit!(self; "  ", name, ".m = load ", mt, ", ", pt, " ", ptr, ", align ", align);
        if self.prefetch.contains_key(u) {
            self.prefetch_at(&ptr, &pt, &name);
        }
        let mut v: Rc<str> = cat!(name, ".m").into();
        v = match bd.scalar {
            Scalar::Bool => {
                emit!(self; "  ", name, ".b = trunc ", mt, " ", v, " to ", reg(access));
                cat!(name, ".b").into()
            }
            Scalar::BFloat16 => {
                bf16_to_float(&v, &cat!(name, ".f"), out.count, &mut self.body).into()
            }
            _ => v,
        };
        if out.scalar != bd.scalar {
            v = self.convert(&v, access, out, &cat!(name, ".c"))?.into();
        }
        if let Some((g, alt)) = gate {
            let t = reg(out);
            emit!(self; "  ", name, " = select i1 ", g, ", ", t, " ", v, ", ", t, " ", alt);
            v = name;
        }
        self.r.insert(u.clone(), v);
        Ok(())
    }

    /// `llvm.prefetch` (read, high locality, data) of `ptr` (of type `pt`) plus
    /// [`super::prefetch::PREFETCH_BYTES`]; no `inbounds`: the address may lie past the buffer.
    fn prefetch_at(&mut self, ptr: &str, pt: &str, name: &str) {
        let ahead = super::prefetch::PREFETCH_BYTES;
        if self.opaque {
            self.decls
                .insert("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)".into());
            emit!(self; "  ", name, ".f = getelementptr i8, ptr ", ptr, ", i64 ", ahead);
            emit!(self; "  call void @llvm.prefetch.p0(ptr ", name, ".f, i32 0, i32 3, i32 1)");
        } else {
            self.decls
                .insert("declare void @llvm.prefetch.p0i8(i8*, i32, i32, i32)".into());
            emit!(self; "  ", name, ".fc = bitcast ", pt, " ", ptr, " to i8*");
            emit!(self; "  ", name, ".f = getelementptr i8, i8* ", name, ".fc, i64 ", ahead);
            emit!(self; "  call void @llvm.prefetch.p0i8(i8* ", name, ".f, i32 0, i32 3, i32 1)");
        }
    }

    pub(super) fn store(&mut self, u: &UOp) -> Result<()> {
        let buf = u
            .src()
            .first()
            .cloned()
            .ok_or_else(|| Error::Codegen("STORE without a buffer".into()))?;
        let bd = dtype_of(&buf)?.base().scalar();
        let vd = Self::src_dtype(u, 2)?;
        let access = bd.vec(vd.count);
        let n = self.number("store");
        let name = cat!("%store", n);
        let idx = self.index(u, true)?;
        let mut v = self.src(u, 2)?;
        if vd.scalar != bd.scalar {
            v = self.convert(&v, vd, access, &cat!(name, ".c"))?.into();
        }
        let mt = mem(access);
        v = match bd.scalar {
            Scalar::Bool => {
                emit!(self; "  ", name, ".b = zext ", reg(access), " ", v, " to ", mt);
                cat!(name, ".b").into()
            }
            Scalar::BFloat16 => {
                float_to_bf16(&v, &cat!(name, ".h"), vd.count, &mut self.body).into()
            }
            _ => v,
        };
        let gate = if u.src().len() > 3 {
            Some(self.src(u, 3)?)
        } else {
            None
        };
        if let Some(g) = &gate {
            emit!(self; "  br i1 ", g, ", label %store_", n, ", label %store_", n, ".end");
            self.label(cat!("store_", n));
        }
        let (ptr, pt) = self.elem_ptr(&buf, &idx, access, &name)?;
        let align = bd.itemsize();
        if gate.is_none() && self.streams.contains_key(u) {
            self.stream_store(n, &name, &cat!(mt, " ", v), &cat!(pt, " ", ptr), align);
            return Ok(());
        }
        emit!(self; "  store ", mt, " ", v, ", ", pt, " ", ptr, ", align ", align);
        if gate.is_some() {
            emit!(self; "  br label %store_", n, ".end");
            self.label(cat!("store_", n, ".end"));
        }
        Ok(())
    }

    /// A streaming store (`stream_store.rs`) of `value` (type and value) to `ptr` (type and
    /// pointer): `movntps` (a non-temporal store, 16-byte aligned) when the address is aligned,
    /// else the plain store of `align`.
    fn stream_store(&mut self, n: usize, name: &str, value: &str, ptr: &str, align: usize) {
        self.decls
            .insert("declare void @llvm.x86.sse.sfence()".into());
        emit!(self; "  ", name, ".pi = ptrtoint ", ptr, " to i64");
        emit!(self; "  ", name, ".lo = and i64 ", name, ".pi, 15");
        emit!(self; "  ", name, ".al = icmp eq i64 ", name, ".lo, 0");
        emit!(self; "  br i1 ", name, ".al, label %store_", n, ".nt, label %store_", n, ".pl");
        self.label(cat!("store_", n, ".nt"));
        emit!(self; "  store ", value, ", ", ptr, ", align 16, !nontemporal !{i32 1}");
        emit!(self; "  br label %store_", n, ".end");
        self.label(cat!("store_", n, ".pl"));
        emit!(self; "  store ", value, ", ", ptr, ", align ", align);
        emit!(self; "  br label %store_", n, ".end");
        self.label(cat!("store_", n, ".end"));
    }

    pub(super) fn cast_uop(&mut self, u: &UOp) -> Result<()> {
        let out = dtype_of(u)?;
        if u.src().len() == 1 {
            let from = Self::src_dtype(u, 0)?;
            let x = self.src(u, 0)?;
            let name = self.ssa("cast");
            let v = self.convert(&x, from, out, &name)?;
            self.r.insert(u.clone(), v.into());
            return Ok(());
        }
        ensure!(
            u.src().len() == out.count as usize,
            Codegen,
            "CAST to {out} from {} values",
            u.src().len()
        );
        let name = self.ssa("cast");
        let lanes = (0..u.src().len())
            .map(|i| self.src(u, i))
            .collect::<Result<Vec<_>>>()?;
        let cpu = matches!(self.flavour, super::Flavour::Cpu);
        if cpu && u.src().iter().all(|s| s == &u.src()[0]) {
            // a broadcast (the vector ALU fold's splat): one insert and a shuffle
            let (vt, st) = (reg(out), reg(out.scalar()));
            let x = &lanes[0];
            let n = out.count;
            emit!(self; "  ", name, ".i = insertelement ", vt, " poison, ", st, " ", x, ", i32 0");
            emit!(self; "  ", name, " = shufflevector ", vt, " ", name, ".i, ", vt, " poison, <", n, " x i32> zeroinitializer");
            self.r.insert(u.clone(), name);
            return Ok(());
        }
        self.build_vector(&name, out, &lanes);
        self.r.insert(u.clone(), name);
        Ok(())
    }

    /// `name` = the vector of type `out` whose lanes are the scalar values `lanes`.
    pub(super) fn build_vector(&mut self, name: &str, out: DType, lanes: &[Rc<str>]) {
        let (vt, st) = (reg(out), reg(out.scalar()));
        let mut prev = "undef".to_string();
        for (i, x) in lanes.iter().enumerate() {
            let cur = if i + 1 == lanes.len() {
                name.to_string()
            } else {
                cat!(name, ".", i)
            };
            emit!(self; "  ", cur, " = insertelement ", vt, " ", prev, ", ", st, " ", x, ", i32 ", i);
            prev = cur;
        }
    }

    /// Convert register value `x` of `from` to `to` (same lane count); returns the value's name
    /// (`x` itself when nothing changes).
    pub fn convert(&mut self, x: &str, from: DType, to: DType, name: &str) -> Result<String> {
        ensure!(
            from.count == to.count,
            Codegen,
            "cast from {from} to {to}: lane counts differ"
        );
        let ft = reg(from);
        if to.scalar == Scalar::Bool {
            if from.scalar == Scalar::Bool {
                return Ok(x.to_string());
            }
            let zero = literal(ConstValue::Int(0), from);
            let cmp = if from.is_float() {
                cat!("fcmp", self.fmf, " une")
            } else {
                "icmp ne".to_string()
            };
            emit!(self; "  ", name, " = ", cmp, " ", ft, " ", x, ", ", zero);
            return Ok(name.to_string());
        }
        match types::cast_op(from.scalar, to.scalar)? {
            None => Ok(x.to_string()),
            Some(op) => {
                emit!(self; "  ", name, " = ", op, " ", ft, " ", x, " to ", reg(to));
                Ok(name.to_string())
            }
        }
    }

    pub(super) fn bitcast_uop(&mut self, u: &UOp) -> Result<()> {
        let (from, to) = (Self::src_dtype(u, 0)?, dtype_of(u)?);
        ensure!(
            from.itemsize() == to.itemsize() && !from.is_bool() && !to.is_bool(),
            Codegen,
            "BITCAST from {from} to {to}"
        );
        let x = self.src(u, 0)?;
        let name = self.ssa("cast");
        // through the in-memory form, which holds bfloat16 as its 16 bits
        let mut v = x;
        if from.scalar == Scalar::BFloat16 {
            v = float_to_bf16(&v, &cat!(name, ".h"), from.count, &mut self.body).into();
        }
        let (fm, tm) = (mem(from), mem(to));
        if fm != tm {
            emit!(self; "  ", name, ".b = bitcast ", fm, " ", v, " to ", tm);
            v = cat!(name, ".b").into();
        }
        if to.scalar == Scalar::BFloat16 {
            v = bf16_to_float(&v, &cat!(name, ".f"), to.count, &mut self.body).into();
        }
        self.r.insert(u.clone(), v);
        Ok(())
    }
}
