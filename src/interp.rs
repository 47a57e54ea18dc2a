//! The UOp interpreter: the reference semantics of UOps (tinygrad's PYTHON device, `ops_python`),
//! used by the INTERP device (`runtime::cpu::interp_device`) and by the emulated GPUs
//! (`mockgpu`), whose "binaries" are serialized UOps. It sits below the backends and imports only
//! the base modules, `codegen` and `ops`, so the emulator can run kernels without `runtime/`.
//!
//! It runs every workgroup of the launch grid and simulates the workgroup's threads in lockstep, one
//! instruction for all threads at a time, so BARRIER needs no work and DEFINE_LOCAL memory is shared
//! by the threads of a workgroup. RANGE loops run in place (kernels without launch dims loop over
//! their global dims); IF masks the threads whose condition is false. ALU results are exactly
//! [`crate::ops::exec_alu`]'s (see `value`); loads and stores go through a [`Memory`] the caller
//! provides, with every access bounds-checked (an out-of-bounds access is an error naming the
//! buffer, the element index and the size). WMMA follows the CUDA, AMD (gfx11, gfx12) and Metal
//! lane layouts.
//!
//! Not guaranteed: speed (it is the reference); loops whose bounds differ between the threads of a
//! workgroup are refused rather than run divergently.

#![forbid(unsafe_code)]

mod inst;
mod value;
mod wmma;

use crate::codegen::uop_serial::deserialize;
use crate::codegen::uops::UOp;
use crate::dtype::{ConstValue, Scalar};
use crate::{bail, ensure, Result};

use inst::{lower, Inst, Lowered, Mem, Reg, SpecialKind};

pub use wmma::WmmaLayout;

/// Byte-addressed kernel buffers, indexed by DEFINE_GLOBAL index.
pub trait Memory {
    /// The size of buffer `buf` in bytes.
    fn size(&self, buf: usize) -> Result<usize>;
    /// Read `out.len()` bytes at `byte_off` of buffer `buf`.
    fn load(&self, buf: usize, byte_off: usize, out: &mut [u8]) -> Result<()>;
    /// Write `data` at `byte_off` of buffer `buf`.
    fn store(&mut self, buf: usize, byte_off: usize, data: &[u8]) -> Result<()>;
}

fn slice_range(len: usize, buf: usize, off: usize, n: usize) -> Result<std::ops::Range<usize>> {
    match off.checked_add(n) {
        Some(end) if end <= len => Ok(off..end),
        _ => bail!(
            Runtime,
            "memory: bytes {off}..{} of buffer {buf} are past its {len} bytes",
            off.saturating_add(n)
        ),
    }
}

/// Host buffers as memory (buffer `i` is `self[i]`).
impl Memory for Vec<Vec<u8>> {
    fn size(&self, buf: usize) -> Result<usize> {
        match self.get(buf) {
            Some(b) => Ok(b.len()),
            None => bail!(Runtime, "memory: no buffer {buf} (have {})", self.len()),
        }
    }
    fn load(&self, buf: usize, byte_off: usize, out: &mut [u8]) -> Result<()> {
        let r = slice_range(self.size(buf)?, buf, byte_off, out.len())?;
        out.copy_from_slice(&self[buf][r]);
        Ok(())
    }
    fn store(&mut self, buf: usize, byte_off: usize, data: &[u8]) -> Result<()> {
        let r = slice_range(self.size(buf)?, buf, byte_off, data.len())?;
        self[buf][r].copy_from_slice(data);
        Ok(())
    }
}

/// Borrowed host buffers as memory.
impl Memory for [&mut [u8]] {
    fn size(&self, buf: usize) -> Result<usize> {
        match self.get(buf) {
            Some(b) => Ok(b.len()),
            None => bail!(Runtime, "memory: no buffer {buf} (have {})", self.len()),
        }
    }
    fn load(&self, buf: usize, byte_off: usize, out: &mut [u8]) -> Result<()> {
        let r = slice_range(self.size(buf)?, buf, byte_off, out.len())?;
        out.copy_from_slice(&self[buf][r]);
        Ok(())
    }
    fn store(&mut self, buf: usize, byte_off: usize, data: &[u8]) -> Result<()> {
        let r = slice_range(self.size(buf)?, buf, byte_off, data.len())?;
        self[buf][r].copy_from_slice(data);
        Ok(())
    }
}

/// A kernel ready to interpret.
#[derive(Clone, Debug)]
pub struct InterpProgram {
    name: String,
    low: Lowered,
}

impl InterpProgram {
    /// Prepare a linear UOp list (the output of `linearize`).
    pub fn new(name: &str, uops: &[UOp]) -> Result<InterpProgram> {
        let low = lower(uops)
            .map_err(|e| crate::Error::Codegen(format!("INTERP {name}: {}", e.message())))?;
        Ok(InterpProgram {
            name: name.to_string(),
            low,
        })
    }

    /// Prepare a kernel from its serialized UOps (the INTERP "binary").
    pub fn from_serialized(name: &str, text: &str) -> Result<InterpProgram> {
        InterpProgram::new(name, &deserialize(text)?)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The integer variables the kernel takes, in the order `vals` must give them (by name).
    pub fn vars(&self) -> &[String] {
        &self.low.vars
    }

    /// Run over a grid of `global` workgroups of `local` threads each (use `[1, 1, 1]` for both
    /// when the kernel loops over its dims itself).
    pub fn run(
        &self,
        mem: &mut dyn Memory,
        vals: &[i64],
        global: [usize; 3],
        local: [usize; 3],
    ) -> Result<()> {
        let name = &self.name;
        ensure!(
            vals.len() == self.low.vars.len(),
            InvalidArgument,
            "INTERP {name}: takes {} variable values {:?}, got {}",
            self.low.vars.len(),
            self.low.vars,
            vals.len()
        );
        let warp = local[0] * local[1] * local[2];
        ensure!(
            warp > 0,
            InvalidArgument,
            "INTERP {name}: empty workgroup {local:?}"
        );
        let mut sizes = vec![];
        for &(idx, _) in &self.low.globals {
            sizes.push((idx, mem.size(idx)?));
        }
        let lanes: Vec<[usize; 3]> = (0..warp)
            .map(|l| {
                [
                    l % local[0],
                    (l / local[0]) % local[1],
                    l / (local[0] * local[1]),
                ]
            })
            .collect();
        let mut ex = Exec {
            p: self,
            mem,
            vals,
            warp,
            regs: vec![0; self.low.units * warp],
            locals: self
                .low
                .locals
                .iter()
                .map(|l| vec![0; l.size * l.elem.itemsize()])
                .collect(),
            sizes,
            lanes,
            local,
            group: [0; 3],
            active: vec![true; warp],
            masks: vec![],
        };
        for gz in 0..global[2] {
            for gy in 0..global[1] {
                for gx in 0..global[0] {
                    ex.group = [gx, gy, gz];
                    ex.run_group()?;
                }
            }
        }
        Ok(())
    }
}

/// A byte buffer of `n` bytes: on the stack when small.
fn scratch<'b>(small: &'b mut [u8; 64], big: &'b mut Vec<u8>, n: usize) -> &'b mut [u8] {
    if n <= small.len() {
        &mut small[..n]
    } else {
        big.resize(n, 0);
        big
    }
}

struct Exec<'a> {
    p: &'a InterpProgram,
    mem: &'a mut dyn Memory,
    vals: &'a [i64],
    warp: usize,
    regs: Vec<u64>,
    locals: Vec<Vec<u8>>,
    sizes: Vec<(usize, usize)>,
    lanes: Vec<[usize; 3]>,
    local: [usize; 3],
    group: [usize; 3],
    active: Vec<bool>,
    masks: Vec<Vec<bool>>,
}

impl Exec<'_> {
    fn get(&self, r: &Reg, lane: usize, k: usize) -> u64 {
        self.regs
            .get(r.at(self.warp, lane, k))
            .copied()
            .unwrap_or(0)
    }

    fn set(&mut self, r: &Reg, lane: usize, k: usize, v: u64) {
        if let Some(slot) = self.regs.get_mut(r.at(self.warp, lane, k)) {
            *slot = v;
        }
    }

    fn int(&self, r: &Reg, lane: usize) -> i128 {
        value::decode(self.get(r, lane, 0), r.scalar).as_i128()
    }

    fn first_active(&self) -> Option<usize> {
        self.active.iter().position(|&a| a)
    }

    /// The value of `r` shared by every active thread (loop bounds).
    fn uniform(&self, r: &Reg, what: &str) -> Result<i128> {
        if self.warp == 1 {
            return Ok(self.int(r, 0));
        }
        let first = self.first_active().map_or(0, |l| self.int(r, l));
        for l in 0..self.warp {
            if self.active[l] && self.int(r, l) != first {
                bail!(
                    Runtime,
                    "INTERP {}: {what} differs between the threads of a workgroup",
                    self.p.name
                );
            }
        }
        Ok(first)
    }

    fn run_group(&mut self) -> Result<()> {
        for l in self.locals.iter_mut() {
            l.fill(0);
        }
        self.active.fill(true);
        self.masks.clear();
        let p = self.p;
        let insts = &p.low.insts;
        let mut pc = 0;
        while let Some(inst) = insts.get(pc) {
            pc = self.step(inst, pc)?;
        }
        Ok(())
    }

    /// Execute one instruction; returns the next pc.
    fn step(&mut self, inst: &Inst, pc: usize) -> Result<usize> {
        match inst {
            Inst::Nop => {}
            Inst::Const { dst, bits } => {
                for l in 0..self.warp {
                    for k in 0..dst.width {
                        self.set(dst, l, k, *bits);
                    }
                }
            }
            Inst::Var { dst, val } => {
                let v = self.vals.get(*val).copied().unwrap_or(0);
                let bits = value::encode(ConstValue::Int(v as i128), dst.scalar);
                for l in 0..self.warp {
                    self.set(dst, l, 0, bits);
                }
            }
            Inst::Special { dst, kind, axis } => {
                for l in 0..self.warp {
                    let (g, t, n) = (self.group[*axis], self.lanes[l][*axis], self.local[*axis]);
                    let v = match kind {
                        SpecialKind::Group => g,
                        SpecialKind::Local => t,
                        SpecialKind::Global => g * n + t,
                    };
                    self.set(
                        dst,
                        l,
                        0,
                        value::encode(ConstValue::Int(v as i128), dst.scalar),
                    );
                }
            }
            Inst::Range {
                dst,
                start,
                end,
                exit,
            } => {
                let (s, e) = (
                    self.uniform(start, "a loop start")?,
                    self.uniform(end, "a loop end")?,
                );
                if s >= e {
                    return Ok(*exit);
                }
                let bits = value::encode(ConstValue::Int(s), dst.scalar);
                for l in 0..self.warp {
                    self.set(dst, l, 0, bits);
                }
            }
            Inst::EndRange { body, ctr, end } => {
                let next = self.uniform(ctr, "a loop counter")? + 1;
                let bits = value::encode(ConstValue::Int(next), ctr.scalar);
                for l in 0..self.warp {
                    self.set(ctr, l, 0, bits);
                }
                if next < self.uniform(end, "a loop end")? {
                    return Ok(*body);
                }
            }
            Inst::If { cond, exit } => {
                let mask: Vec<bool> = (0..self.warp)
                    .map(|l| self.active[l] && self.get(cond, l, 0) != 0)
                    .collect();
                if !mask.contains(&true) {
                    return Ok(*exit);
                }
                let prev = std::mem::replace(&mut self.active, mask);
                self.masks.push(prev);
            }
            Inst::EndIf => {
                if let Some(prev) = self.masks.pop() {
                    self.active = prev;
                }
            }
            Inst::Alu { dst, op, src } => self.alu(dst, *op, src)?,
            Inst::Cast { dst, src } => self.each(dst, |ex, l, k| {
                Ok(value::cast(ex.get(src, l, k), src.scalar, dst.scalar))
            })?,
            Inst::Vectorize { dst, src } => self.each(dst, |ex, l, k| {
                let s = &src[k.min(src.len() - 1)];
                Ok(value::cast(ex.get(s, l, 0), s.scalar, dst.scalar))
            })?,
            Inst::Bitcast { dst, src } => self.bitcast(dst, src)?,
            Inst::Load {
                dst,
                mem,
                elem,
                idx,
                gate,
            } => self.load(dst, *mem, *elem, idx, gate)?,
            Inst::Store {
                mem,
                elem,
                idx,
                val,
                gate,
            } => self.store(*mem, *elem, idx, val, gate)?,
            Inst::Phi { dst, src } => self.each(dst, |ex, l, k| Ok(ex.get(src, l, k)))?,
            Inst::Wmma {
                dst,
                a,
                b,
                c,
                layout,
            } => self.wmma(dst, a, b, c, *layout)?,
        }
        Ok(pc + 1)
    }

    /// Set every element of `dst` on the active threads to `f(thread, element)`.
    fn each(&mut self, dst: &Reg, f: impl Fn(&Self, usize, usize) -> Result<u64>) -> Result<()> {
        for l in 0..self.warp {
            if self.active[l] {
                for k in 0..dst.width {
                    let v = f(self, l, k)?;
                    self.set(dst, l, k, v);
                }
            }
        }
        Ok(())
    }

    fn alu(&mut self, dst: &Reg, op: crate::ops::Op, src: &[Reg]) -> Result<()> {
        let mut ins = [Scalar::Int32; 3];
        for (i, s) in src.iter().enumerate().take(3) {
            ins[i] = s.scalar;
        }
        let n = src.len().min(3);
        self.each(dst, |ex, l, k| {
            let mut v = [0u64; 3];
            for (i, s) in src.iter().enumerate().take(3) {
                v[i] = ex.get(s, l, k);
            }
            value::alu(op, dst.scalar, &ins[..n], &v[..n])
        })
    }

    fn bitcast(&mut self, dst: &Reg, src: &Reg) -> Result<()> {
        let (si, di) = (src.scalar.itemsize(), dst.scalar.itemsize());
        ensure!(
            si * src.width == di * dst.width,
            Codegen,
            "INTERP {}: BITCAST of {} bytes to {} bytes",
            self.p.name,
            si * src.width,
            di * dst.width
        );
        let mut bytes = vec![0u8; si * src.width];
        for l in 0..self.warp {
            if !self.active[l] {
                continue;
            }
            for k in 0..src.width {
                value::to_bytes(
                    self.get(src, l, k),
                    src.scalar,
                    &mut bytes[k * si..(k + 1) * si],
                );
            }
            for k in 0..dst.width {
                let v = value::from_bytes(&bytes[k * di..(k + 1) * di], dst.scalar);
                self.set(dst, l, k, v);
            }
        }
        Ok(())
    }

    /// Byte offset of element `idx` (`n` elements of `elem`), checked against the buffer.
    fn address(&self, mem: Mem, elem: Scalar, idx: i128, n: usize, what: &str) -> Result<usize> {
        let bytes = match mem {
            Mem::Global(b) => self.sizes.iter().find(|(i, _)| *i == b).map_or(0, |s| s.1),
            Mem::Local(i) => {
                let lb = &self.p.low.locals[i];
                lb.size * lb.elem.itemsize()
            }
        };
        let isz = elem.itemsize();
        let count = bytes / isz;
        if idx < 0 || idx as u128 + n as u128 > count as u128 {
            let name = match mem {
                Mem::Global(b) => format!("data{b}"),
                Mem::Local(i) => self.p.low.locals[i].name.clone(),
            };
            bail!(
                Runtime,
                "INTERP {}: {what} out of bounds: {name}[{idx}] ({n} x {}) but {name} holds {count} elements ({bytes} bytes)",
                self.p.name,
                elem.long_name()
            );
        }
        Ok(idx as usize * isz)
    }

    fn load(
        &mut self,
        dst: &Reg,
        mem: Mem,
        elem: Scalar,
        idx: &Reg,
        gate: &Option<(Reg, Reg)>,
    ) -> Result<()> {
        let isz = elem.itemsize();
        let (mut small, mut big) = ([0u8; 64], vec![]);
        let buf = scratch(&mut small, &mut big, isz * dst.width);
        for l in 0..self.warp {
            if !self.active[l] {
                continue;
            }
            if let Some((g, alt)) = gate {
                if self.get(g, l, 0) == 0 {
                    for k in 0..dst.width {
                        let v = value::cast(self.get(alt, l, k), alt.scalar, dst.scalar);
                        self.set(dst, l, k, v);
                    }
                    continue;
                }
            }
            let off = self.address(mem, elem, self.int(idx, l), dst.width, "load")?;
            match mem {
                Mem::Global(b) => self.mem.load(b, off, buf)?,
                Mem::Local(i) => {
                    let n = buf.len();
                    buf.copy_from_slice(&self.locals[i][off..off + n]);
                }
            }
            for k in 0..dst.width {
                let raw = value::from_bytes(&buf[k * isz..(k + 1) * isz], elem);
                self.set(dst, l, k, value::cast(raw, elem, dst.scalar));
            }
        }
        Ok(())
    }

    fn store(
        &mut self,
        mem: Mem,
        elem: Scalar,
        idx: &Reg,
        val: &Reg,
        gate: &Option<Reg>,
    ) -> Result<()> {
        let isz = elem.itemsize();
        let (mut small, mut big) = ([0u8; 64], vec![]);
        let buf = scratch(&mut small, &mut big, isz * val.width);
        for l in 0..self.warp {
            if !self.active[l] || gate.as_ref().is_some_and(|g| self.get(g, l, 0) == 0) {
                continue;
            }
            let off = self.address(mem, elem, self.int(idx, l), val.width, "store")?;
            for k in 0..val.width {
                let v = value::cast(self.get(val, l, k), val.scalar, elem);
                value::to_bytes(v, elem, &mut buf[k * isz..(k + 1) * isz]);
            }
            match mem {
                Mem::Global(b) => self.mem.store(b, off, buf)?,
                Mem::Local(i) => self.locals[i][off..off + buf.len()].copy_from_slice(buf),
            }
        }
        Ok(())
    }

    fn wmma(&mut self, dst: &Reg, a: &Reg, b: &Reg, c: &Reg, layout: WmmaLayout) -> Result<()> {
        let sh = layout.shape();
        ensure!(
            a.width == sh.na && b.width == sh.nb && c.width == sh.nc && dst.width == sh.nc,
            Codegen,
            "INTERP {}: WMMA ({layout:?}) wants {}/{}/{} elements per thread for A/B/C, got {}/{}/{}",
            self.p.name,
            sh.na,
            sh.nb,
            sh.nc,
            a.width,
            b.width,
            c.width
        );
        let f = |r: &Reg, e: usize, l: usize| value::decode(self.get(r, l, e), r.scalar).as_f64();
        let mut results = vec![];
        wmma::run(
            layout,
            self.warp,
            &|e, l| f(a, e, l),
            &|e, l| f(b, e, l),
            &|e, l| f(c, e, l),
            &mut |e, l, v| results.push((e, l, v)),
        )?;
        for (e, l, v) in results {
            let bits = value::encode(ConstValue::Float(v), dst.scalar);
            self.set(dst, l, e, bits);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "interp/tests.rs"]
mod tests;
