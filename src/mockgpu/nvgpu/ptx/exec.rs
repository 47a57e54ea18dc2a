//! Runs a parsed PTX [`Kernel`] over a grid, one CTA at a time, the way the SMs would: every
//! thread of a CTA runs until it reaches `bar.sync`, a warp-collective instruction (`mma.sync`) or
//! `ret`; when every live thread waits at the barrier they all continue (cooperative scheduling,
//! so barriers order shared-memory traffic as on hardware); a warp-collective instruction runs
//! once all the live lanes of its warp reached it.
//!
//! Memory: `.global` and generic addresses outside the shared and local windows go through the
//! GPU's page tables ([`GpuMemory`]; an unmapped address faults, naming it); `.shared` is the
//! CTA's shared memory (the QMD's size; an access beyond it faults); `.local` is per-thread;
//! `.param` reads the parameter block the launch put in constant buffer 0. A generic address in
//! `[shared_window, +shared size)` or `[local_window, +local size)` is shared or local, the
//! windows the channel set (`cvta` converts). Accesses must be naturally aligned (vector accesses
//! to their whole size), as on hardware.
//!
//! Not guaranteed: warp-synchronous behaviour beyond `mma.sync` (no shuffles, votes, or
//! divergence-dependent results); a kernel that runs more than [`STEP_LIMIT`] instructions per
//! launch is stopped with an error (a hung kernel on hardware).

use super::isa::{Kind, Op, Space, Sreg, Ty};
use super::parse::{Inst, Kernel, Opnd};
use super::{alu, coverage, mma};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{Error, Result};

/// Instructions one launch may execute before it is stopped.
pub const STEP_LIMIT: u64 = 1 << 34;

/// What a launch runs with.
pub struct Launch<'a> {
    pub mem: &'a dyn GpuMemory,
    /// The parameter block (constant buffer 0 from the parameter base).
    pub params: &'a [u8],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Bytes of shared memory the QMD grants a CTA.
    pub shared_bytes: u32,
    pub shared_window: u64,
    pub local_window: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Run,
    Bar,
    Warp,
    Done,
}

/// One CTA in flight.
pub(super) struct Cta<'a> {
    k: &'a Kernel,
    l: &'a Launch<'a>,
    ctaid: [u32; 3],
    n: usize,
    regs: Vec<u64>,
    pc: Vec<usize>,
    state: Vec<State>,
    shared: Vec<u8>,
    local: Vec<u8>,
    steps: &'a mut u64,
    /// Executions per instruction (empty unless coverage is on: [`coverage`]).
    hits: &'a mut [u64],
}

/// Runs the whole grid.
pub fn run(k: &Kernel, l: &Launch) -> Result<()> {
    if k.shared_bytes > l.shared_bytes {
        return Err(Error::Fault(format!(
            "PTX kernel {} declares {} bytes of shared memory, the launch grants {}",
            k.name, k.shared_bytes, l.shared_bytes
        )));
    }
    let n = l.block.iter().map(|&b| b as usize).product::<usize>();
    let nregs = k.nregs as usize;
    let cells = n
        .checked_mul(nregs)
        .filter(|&c| c <= 1 << 28)
        .ok_or_else(|| {
            Error::Fault(format!(
                "PTX kernel {}: {n} threads x {nregs} registers",
                k.name
            ))
        })?;
    let mut steps = 0u64;
    let cov = coverage::target();
    let mut hits = vec![0u64; if cov.is_some() { k.insts.len() } else { 0 }];
    for z in 0..l.grid[2] {
        for y in 0..l.grid[1] {
            for x in 0..l.grid[0] {
                let mut cta = Cta {
                    k,
                    l,
                    ctaid: [x, y, z],
                    n,
                    regs: vec![0; cells],
                    pc: vec![0; n],
                    state: vec![State::Run; n],
                    shared: vec![0; l.shared_bytes as usize],
                    local: vec![0; n * k.local_bytes as usize],
                    steps: &mut steps,
                    hits: &mut hits,
                };
                cta.run()?;
            }
        }
    }
    match cov {
        Some(path) => coverage::append(&path, k, &hits),
        None => Ok(()),
    }
}

impl Cta<'_> {
    fn run(&mut self) -> Result<()> {
        loop {
            for t in 0..self.n {
                if self.state[t] == State::Run {
                    self.state[t] = self.thread(t)?;
                }
            }
            let live: Vec<usize> = (0..self.n)
                .filter(|&t| self.state[t] != State::Done)
                .collect();
            if live.is_empty() {
                return Ok(());
            }
            if live.iter().any(|&t| self.state[t] == State::Warp) {
                self.warp_collectives()?;
            } else {
                // every live thread waits at bar.sync: release them
                for t in live {
                    self.state[t] = State::Run;
                }
            }
        }
    }

    /// Runs each warp whose live lanes all reached the same collective instruction.
    fn warp_collectives(&mut self) -> Result<()> {
        let mut progressed = false;
        for w in 0..self.n.div_ceil(32) {
            let lanes: Vec<usize> = (32 * w..(32 * w + 32).min(self.n))
                .filter(|&t| self.state[t] != State::Done)
                .collect();
            if lanes.is_empty() || lanes.iter().any(|&t| self.state[t] != State::Warp) {
                continue;
            }
            let pc = self.pc[lanes[0]];
            if lanes.iter().any(|&t| self.pc[t] != pc) || lanes.len() != 32 {
                let i = &self.k.insts[pc];
                return Err(self.err(lanes[0], i, "a warp-collective instruction needs all 32 lanes of the warp at the same instruction".into()));
            }
            let i = &self.k.insts[pc];
            let base = 32 * w;
            mma::run(self, base, i).map_err(|e| self.err(base, i, e))?;
            for &t in &lanes {
                self.pc[t] += 1;
                self.state[t] = State::Run;
            }
            progressed = true;
        }
        if !progressed {
            // some warps wait at a barrier while others wait at a collective: let the barrier go
            for t in 0..self.n {
                if self.state[t] == State::Bar {
                    self.state[t] = State::Run;
                    progressed = true;
                }
            }
        }
        if !progressed {
            return Err(Error::Fault(format!(
                "PTX kernel {}: warps deadlocked",
                self.k.name
            )));
        }
        Ok(())
    }

    fn tid(&self, t: usize) -> [u32; 3] {
        let b = self.l.block;
        let t = t as u32;
        [t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])]
    }

    fn err(&self, t: usize, i: &Inst, msg: String) -> Error {
        Error::Fault(format!(
            "PTX kernel {} line {} `{}` (CTA {:?}, thread {:?}): {msg}",
            self.k.name,
            i.line,
            i.text,
            self.ctaid,
            self.tid(t)
        ))
    }

    /// Runs thread `t` until it stops.
    fn thread(&mut self, t: usize) -> Result<State> {
        let k = self.k;
        loop {
            let pc = self.pc[t];
            let Some(i) = k.insts.get(pc) else {
                return Ok(State::Done);
            };
            *self.steps += 1;
            if *self.steps > STEP_LIMIT {
                return Err(self.err(t, i, format!("more than {STEP_LIMIT} instructions")));
            }
            if let Some((p, neg)) = i.guard {
                if (self.regs[t * k.nregs as usize + p as usize] & 1 != 0) == neg {
                    self.pc[t] += 1;
                    continue;
                }
            }
            if let Some(h) = self.hits.get_mut(pc) {
                *h += 1;
            }
            match i.op {
                Op::Bar => {
                    self.pc[t] += 1;
                    return Ok(State::Bar);
                }
                Op::Ret => return Ok(State::Done),
                Op::Mma(_) => return Ok(State::Warp),
                Op::Bra => match i.args.first() {
                    Some(Opnd::Label(l)) => self.pc[t] = *l,
                    _ => return Err(self.err(t, i, "bra needs a label".into())),
                },
                _ => {
                    self.exec(t, i).map_err(|e| match e {
                        Error::Fault(m) if m.starts_with("PTX kernel") => Error::Fault(m),
                        e => self.err(t, i, e.message().to_string()),
                    })?;
                    self.pc[t] += 1;
                }
            }
        }
    }

    pub(super) fn reg(&self, t: usize, r: u32) -> u64 {
        self.regs[t * self.k.nregs as usize + r as usize]
    }

    pub(super) fn set(&mut self, t: usize, o: &Opnd, v: u64) -> Result<()> {
        match o {
            Opnd::Reg(r) => {
                self.regs[t * self.k.nregs as usize + *r as usize] = v;
                Ok(())
            }
            Opnd::Sink => Ok(()),
            _ => Err(Error::Fault(format!("destination {o:?} is not a register"))),
        }
    }

    pub(super) fn get(&self, t: usize, o: &Opnd) -> Result<u64> {
        Ok(match o {
            Opnd::Reg(r) => self.reg(t, *r),
            Opnd::Imm(v) => *v,
            Opnd::Sreg(s) => u64::from(match *s {
                Sreg::Tid(d) => self.tid(t)[d],
                Sreg::Ntid(d) => self.l.block[d],
                Sreg::Ctaid(d) => self.ctaid[d],
                Sreg::Nctaid(d) => self.l.grid[d],
                Sreg::Laneid => (t % 32) as u32,
                Sreg::Warpid => (t / 32) as u32,
            }),
            _ => return Err(Error::Fault(format!("operand {o:?} is not a value"))),
        })
    }

    fn arg<'i>(&self, i: &'i Inst, n: usize) -> Result<&'i Opnd> {
        i.args
            .get(n)
            .ok_or_else(|| Error::Fault(format!("missing operand {}", n + 1)))
    }

    fn val(&self, t: usize, i: &Inst, n: usize) -> Result<u64> {
        self.get(t, self.arg(i, n)?)
    }

    fn exec(&mut self, t: usize, i: &Inst) -> Result<()> {
        let fault = Error::Fault;
        let v = |n| self.val(t, i, n);
        let r = match i.op {
            Op::Mov(ty) => return self.mov(t, i, ty),
            Op::Bin(o, ty, f) => alu::binary(o, ty, f, v(1)?, v(2)?).map_err(fault)?,
            Op::Mul(h, ty) => alu::mul_int(h, ty, v(1)?, v(2)?, None),
            Op::Mad(h, ty) => alu::mul_int(h, ty, v(1)?, v(2)?, Some(v(3)?)),
            Op::Fma(ty, f) => alu::fma(ty, f, v(1)?, v(2)?, v(3)?),
            Op::Un(o, ty, f) => alu::unary(o, ty, f, v(1)?).map_err(fault)?,
            Op::Setp(c, ty, b, f) => {
                let p = alu::compare(c, ty, f, v(1)?, v(2)?);
                let extra = if b.is_some() { v(3)? & 1 != 0 } else { false };
                u64::from(alu::combine(p, b, extra))
            }
            Op::Selp(_) => {
                if v(3)? & 1 != 0 {
                    v(1)?
                } else {
                    v(2)?
                }
            }
            Op::Cvt {
                dst,
                src,
                rnd,
                int,
                f,
            } => alu::cvt(dst, src, rnd, int, f, v(1)?).map_err(fault)?,
            Op::Cvta(to, sp) => self.cvta(to, sp, v(1)?)?,
            Op::Shf(left, wrap) => alu::shf(left, wrap, v(1)?, v(2)?, v(3)?),
            Op::Ld(sp, n, ty) => return self.load(t, i, sp, n, ty),
            Op::St(sp, n, ty) => return self.store(t, i, sp, n, ty),
            Op::Bar | Op::Bra | Op::Ret | Op::Mma(_) => {
                return Err(Error::Fault("control instruction out of place".into()))
            }
        };
        let d = self.arg(i, 0)?.clone();
        self.set(t, &d, r)
    }

    fn mov(&mut self, t: usize, i: &Inst, ty: Ty) -> Result<()> {
        let (d, s) = (self.arg(i, 0)?.clone(), self.arg(i, 1)?.clone());
        match (&d, &s) {
            // pack: mov.b64 %rd, {%r1, %r2}
            (_, Opnd::Vec(parts)) => {
                let w = ty.bits / parts.len() as u32;
                let mut acc = 0u64;
                for (j, p) in parts.iter().enumerate() {
                    acc |= alu::mask(self.get(t, p)?, w) << (w * j as u32);
                }
                self.set(t, &d, acc)
            }
            // unpack: mov.b32 {%rs1, %rs2}, %r
            (Opnd::Vec(parts), _) => {
                let w = ty.bits / parts.len() as u32;
                let x = self.get(t, &s)?;
                for (j, p) in parts.iter().enumerate() {
                    self.set(t, p, alu::mask(x >> (w * j as u32), w))?;
                }
                Ok(())
            }
            _ => {
                let x = self.get(t, &s)?;
                let x = if ty.kind == Kind::Pred {
                    x & 1
                } else {
                    alu::mask(x, ty.bits)
                };
                self.set(t, &d, x)
            }
        }
    }

    fn cvta(&self, to: bool, sp: Space, a: u64) -> Result<u64> {
        let w = match sp {
            Space::Global => 0,
            Space::Shared => self.l.shared_window,
            Space::Local => self.l.local_window,
            _ => return Err(Error::Fault(format!("cvta of the {sp:?} space"))),
        };
        Ok(if to {
            a.wrapping_sub(w)
        } else {
            a.wrapping_add(w)
        })
    }

    /// The effective (space, address) of an access.
    fn resolve(&self, t: usize, sp: Space, o: &Opnd) -> Result<(Space, u64)> {
        let Opnd::Addr(base, off) = o else {
            return Err(Error::Fault(format!("{o:?} is not an address")));
        };
        let b = match base {
            Some(r) => self.reg(t, *r),
            None => 0,
        };
        let a = b.wrapping_add(*off as u64);
        if sp != Space::Generic {
            return Ok((sp, a));
        }
        let l = self.l;
        let within = |w: u64, n: u64| w != 0 && a >= w && a - w < n;
        Ok(if within(l.shared_window, u64::from(l.shared_bytes)) {
            (Space::Shared, a - l.shared_window)
        } else if within(l.local_window, u64::from(self.k.local_bytes)) {
            (Space::Local, a - l.local_window)
        } else {
            (Space::Global, a)
        })
    }

    pub(super) fn access(
        &mut self,
        t: usize,
        sp: Space,
        a: u64,
        buf: &mut [u8],
        write: bool,
    ) -> Result<()> {
        let n = buf.len() as u64;
        if a % n != 0 {
            return Err(Error::Fault(format!(
                "misaligned {n}-byte {sp:?} access at {a:#x}"
            )));
        }
        let what = if write { "write" } else { "read" };
        let range = |len: usize| {
            (a.checked_add(n).is_some_and(|e| e <= len as u64))
                .then_some(a as usize..(a + n) as usize)
        };
        let oob = || {
            Error::Fault(format!(
                "{sp:?} {what} of {n} bytes at {a:#x} is out of bounds"
            ))
        };
        match sp {
            Space::Global | Space::Generic => {
                let mem = self.l.mem;
                let r = if write {
                    mem.write(a, buf)
                } else {
                    mem.read(a, buf)
                };
                r.map_err(|e| {
                    Error::Fault(format!(
                        "global {what} of {n} bytes at {a:#x} faulted: {}",
                        e.message()
                    ))
                })
            }
            Space::Shared => {
                let r = range(self.shared.len()).ok_or_else(oob)?;
                if write {
                    self.shared[r].copy_from_slice(buf)
                } else {
                    buf.copy_from_slice(&self.shared[r])
                }
                Ok(())
            }
            Space::Local => {
                let lb = self.k.local_bytes as usize;
                let r = range(lb).ok_or_else(oob)?;
                let s = &mut self.local[t * lb..(t + 1) * lb][r];
                if write {
                    s.copy_from_slice(buf)
                } else {
                    buf.copy_from_slice(s)
                }
                Ok(())
            }
            Space::Param if !write => {
                let r = range(self.l.params.len()).ok_or_else(oob)?;
                buf.copy_from_slice(&self.l.params[r]);
                Ok(())
            }
            _ => Err(Error::Fault(format!("{what} of the {sp:?} space"))),
        }
    }

    fn load(&mut self, t: usize, i: &Inst, sp: Space, n: u32, ty: Ty) -> Result<()> {
        let (sp, a) = self.resolve(t, sp, self.arg(i, 1)?)?;
        let size = ty.bytes() as usize;
        let mut buf = vec![0u8; size * n as usize];
        self.access(t, sp, a, &mut buf, false)?;
        let dsts = match self.arg(i, 0)? {
            Opnd::Vec(v) => v.clone(),
            o => vec![o.clone()],
        };
        if dsts.len() != n as usize {
            return Err(Error::Fault(format!(
                "{} destinations for a {n}-wide load",
                dsts.len()
            )));
        }
        for (j, d) in dsts.iter().enumerate() {
            let mut raw = [0u8; 8];
            raw[..size].copy_from_slice(&buf[j * size..(j + 1) * size]);
            let x = u64::from_le_bytes(raw);
            let x = if ty.kind == Kind::S {
                alu::sext(x, ty.bits) as u64
            } else {
                x
            };
            self.set(t, d, x)?;
        }
        Ok(())
    }

    fn store(&mut self, t: usize, i: &Inst, sp: Space, n: u32, ty: Ty) -> Result<()> {
        let (sp, a) = self.resolve(t, sp, self.arg(i, 0)?)?;
        let size = ty.bytes() as usize;
        let srcs = match self.arg(i, 1)? {
            Opnd::Vec(v) => v.clone(),
            o => vec![o.clone()],
        };
        if srcs.len() != n as usize {
            return Err(Error::Fault(format!(
                "{} sources for a {n}-wide store",
                srcs.len()
            )));
        }
        let mut buf = vec![0u8; size * n as usize];
        for (j, s) in srcs.iter().enumerate() {
            let x = self.get(t, s)?.to_le_bytes();
            buf[j * size..(j + 1) * size].copy_from_slice(&x[..size]);
        }
        self.access(t, sp, a, &mut buf, true)
    }
}
