//! One wave32's architectural state: SGPRs (indexed by the operand encoding, so VCC is s[106:107],
//! M0 s125, EXEC s[126:127]), 256 VGPRs of 32 lanes, SCC, the program counter, and the results
//! of memory loads still in flight (applied at the `s_waitcnt` that covers them).
//!
//! Operand fields follow the RDNA3 reference's "Scalar/Vector source operands" table: 0-105
//! SGPRs, 106/107 VCC, 124 NULL, 125 M0, 126/127 EXEC, 128-192 the integers 0..64, 193-208
//! -1..-16, 240-248 float constants (in the operand's float width), 253 SCC, 255 the literal,
//! 256-511 VGPRs.
//!
//! Not guaranteed: trap temporaries (108-123), the aperture constants (235-238) and DPP/SDWA
//! (233, 250) are refused, not modelled.

use std::collections::VecDeque;

use super::decode::LITERAL;
use crate::{bail, Result};

pub const VCC: usize = 106;
pub const NULL: usize = 124;
pub const M0: usize = 125;
pub const EXEC: usize = 126;
pub const SCC_SRC: u32 = 253;
pub const LANES: usize = 32;

/// The float width an inline float constant takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fk {
    F16,
    F32,
    F64,
}

/// A wait counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Vector memory loads (`vmcnt`).
    Vm,
    /// LDS and scalar memory (`lgkmcnt`).
    Lgkm,
}

/// A register write a load will make when it completes.
#[derive(Clone, Debug)]
pub enum Write {
    Sgpr {
        reg: usize,
        val: u32,
    },
    Vgpr {
        reg: usize,
        lane: usize,
        val: u32,
        mask: u32,
    },
}

/// A load in flight.
#[derive(Clone, Debug)]
pub struct Pending {
    pub counter: Counter,
    pub writes: Vec<Write>,
    /// The issuing instruction's byte pc (for messages).
    pub pc: usize,
}

/// A wave's state.
pub struct Wave {
    pub s: [u32; 128],
    pub v: Vec<[u32; LANES]>,
    pub scc: bool,
    /// Dword index of the next instruction.
    pub pc: usize,
    pub pending: VecDeque<Pending>,
    pend_v: [u64; 4],
    pend_s: [u64; 2],
    pub done: bool,
    pub at_barrier: bool,
}

/// A source operand resolved once per instruction.
#[derive(Clone, Copy, Debug)]
pub enum Src {
    Const(u32),
    Vgpr(usize),
}

impl Wave {
    pub fn new(vgprs: usize) -> Wave {
        Wave {
            s: [0; 128],
            v: vec![[0; LANES]; vgprs.clamp(1, 256)],
            scc: false,
            pc: 0,
            pending: VecDeque::new(),
            pend_v: [0; 4],
            pend_s: [0; 2],
            done: false,
            at_barrier: false,
        }
    }

    pub fn exec(&self) -> u32 {
        self.s[EXEC]
    }

    pub fn vcc(&self) -> u32 {
        self.s[VCC]
    }

    /// Lanes of `exec`.
    pub fn active(&self) -> impl Iterator<Item = usize> {
        let e = self.s[EXEC];
        (0..LANES).filter(move |l| e >> l & 1 != 0)
    }

    fn check_s(&self, r: usize) -> Result<()> {
        if r < 128 && self.pend_s[r / 64] >> (r % 64) & 1 != 0 {
            let pc = self.pending_pc(|w| matches!(w, Write::Sgpr { reg, .. } if *reg == r));
            bail!(
                Fault,
                "RDNA3: s{r} read at pc {:#x} while the load issued at pc {pc:#x} that writes it \
                 is still in flight (a missing s_waitcnt lgkmcnt)",
                4 * self.pc
            );
        }
        Ok(())
    }

    pub fn check_v(&self, r: usize) -> Result<()> {
        if r < 256 && self.pend_v[r / 64] >> (r % 64) & 1 != 0 {
            let pc = self.pending_pc(|w| matches!(w, Write::Vgpr { reg, .. } if *reg == r));
            bail!(
                Fault,
                "RDNA3: v{r} used at pc {:#x} while the load issued at pc {pc:#x} that writes it \
                 is still in flight (a missing s_waitcnt)",
                4 * self.pc
            );
        }
        Ok(())
    }

    fn pending_pc(&self, f: impl Fn(&Write) -> bool) -> usize {
        self.pending
            .iter()
            .find(|p| p.writes.iter().any(&f))
            .map_or(0, |p| p.pc)
    }

    /// SGPR-space register `r` (a scalar destination or source field below 128).
    pub fn sreg(&self, r: usize) -> Result<u32> {
        match r {
            0..=105 | VCC | 107 | M0 | EXEC | 127 => {
                self.check_s(r)?;
                Ok(self.s[r])
            }
            NULL => Ok(0),
            _ => bail!(Fault, "RDNA3: scalar register field {r} is not modelled"),
        }
    }

    pub fn set_sreg(&mut self, r: usize, val: u32) -> Result<()> {
        match r {
            0..=105 | VCC | 107 | M0 | EXEC | 127 => {
                self.check_s(r)?;
                self.s[r] = val;
                Ok(())
            }
            NULL => Ok(()),
            _ => bail!(Fault, "RDNA3: scalar destination {r} is not modelled"),
        }
    }

    pub fn set_sreg64(&mut self, r: usize, val: u64) -> Result<()> {
        self.set_sreg(r, val as u32)?;
        if r != NULL {
            self.set_sreg(r + 1, (val >> 32) as u32)?;
        }
        Ok(())
    }

    /// A 32-bit source field (SGPR, constant, literal or VGPR), inline floats of width `fk`.
    pub fn src(&self, f: u32, lit: u32, fk: Fk) -> Result<Src> {
        Ok(match f {
            0..=127 => Src::Const(self.sreg(f as usize)?),
            128..=192 => Src::Const(f - 128),
            193..=208 => Src::Const((-((f - 192) as i32)) as u32),
            240..=248 => Src::Const(float_const(f, fk) as u32),
            SCC_SRC => Src::Const(self.scc as u32),
            LITERAL => Src::Const(lit),
            256..=511 => {
                let r = (f - 256) as usize;
                self.check_v(r)?;
                if r >= self.v.len() {
                    bail!(
                        Fault,
                        "RDNA3: v{r} is beyond the {} VGPRs the kernel descriptor allocates",
                        self.v.len()
                    );
                }
                Src::Vgpr(r)
            }
            _ => bail!(
                Fault,
                "RDNA3: source operand field {f} at pc {:#x} is not modelled",
                4 * self.pc
            ),
        })
    }

    /// A 64-bit source field: register pairs, sign-extended integer constants, f64 floats, and
    /// a literal as the high dword of an f64 (`Fk::F64`) or zero-extended otherwise.
    pub fn src64(&self, f: u32, lit: u32, fk: Fk) -> Result<Src64> {
        Ok(match f {
            0..=127 => Src64::Const(
                u64::from(self.sreg(f as usize)?)
                    | if f as usize == NULL {
                        0
                    } else {
                        u64::from(self.sreg(f as usize + 1)?) << 32
                    },
            ),
            128..=208 => match self.src(f, lit, fk)? {
                Src::Const(c) => Src64::Const(c as i32 as i64 as u64),
                Src::Vgpr(_) => unreachable!("constant field"),
            },
            240..=248 => Src64::Const(match fk {
                Fk::F64 => float_const(f, Fk::F64),
                _ => float_const(f, fk),
            }),
            SCC_SRC => Src64::Const(self.scc as u64),
            LITERAL => Src64::Const(match fk {
                Fk::F64 => u64::from(lit) << 32,
                _ => u64::from(lit),
            }),
            256..=511 => {
                let r = (f - 256) as usize;
                self.check_v(r)?;
                self.check_v(r + 1)?;
                if r + 1 >= self.v.len() {
                    bail!(
                        Fault,
                        "RDNA3: v[{r}:{}] is beyond the allocated VGPRs",
                        r + 1
                    );
                }
                Src64::Vgpr(r)
            }
            _ => bail!(
                Fault,
                "RDNA3: 64-bit source operand field {f} is not modelled"
            ),
        })
    }

    pub fn get(&self, s: Src, lane: usize) -> u32 {
        match s {
            Src::Const(c) => c,
            Src::Vgpr(r) => self.v[r][lane],
        }
    }

    pub fn get64(&self, s: Src64, lane: usize) -> u64 {
        match s {
            Src64::Const(c) => c,
            Src64::Vgpr(r) => u64::from(self.v[r][lane]) | u64::from(self.v[r + 1][lane]) << 32,
        }
    }

    /// A VGPR destination, checked against the allocation and in-flight loads.
    pub fn vdst(&self, r: usize, n: usize) -> Result<()> {
        if r + n > self.v.len() {
            bail!(
                Fault,
                "RDNA3: v{r} (+{n}) written at pc {:#x} is beyond the {} VGPRs the kernel \
                 descriptor allocates",
                4 * self.pc,
                self.v.len()
            );
        }
        for i in r..r + n {
            self.check_v(i)?;
        }
        Ok(())
    }

    /// Queue a load's results.
    pub fn push_pending(&mut self, p: Pending) {
        for w in &p.writes {
            match *w {
                Write::Sgpr { reg, .. } => self.pend_s[reg / 64] |= 1 << (reg % 64),
                Write::Vgpr { reg, .. } => self.pend_v[reg / 64] |= 1 << (reg % 64),
            }
        }
        self.pending.push_back(p);
    }

    /// Complete the oldest loads of `counter` until at most `keep` of them are in flight.
    pub fn wait(&mut self, counter: Counter, keep: usize) {
        loop {
            let n = self.pending.iter().filter(|p| p.counter == counter).count();
            if n <= keep {
                break;
            }
            let i = self
                .pending
                .iter()
                .position(|p| p.counter == counter)
                .expect("counted above");
            let p = self.pending.remove(i).expect("index from position");
            for w in p.writes {
                match w {
                    Write::Sgpr { reg, val } => self.s[reg] = val,
                    Write::Vgpr {
                        reg,
                        lane,
                        val,
                        mask,
                    } => {
                        let old = self.v[reg][lane];
                        self.v[reg][lane] = (old & !mask) | (val & mask);
                    }
                }
            }
        }
        self.pend_s = [0; 2];
        self.pend_v = [0; 4];
        for p in &self.pending {
            for w in &p.writes {
                match *w {
                    Write::Sgpr { reg, .. } => self.pend_s[reg / 64] |= 1 << (reg % 64),
                    Write::Vgpr { reg, .. } => self.pend_v[reg / 64] |= 1 << (reg % 64),
                }
            }
        }
    }
}

/// A 64-bit source operand.
#[derive(Clone, Copy, Debug)]
pub enum Src64 {
    Const(u64),
    Vgpr(usize),
}

/// The inline float constant of field `f` (240..=248) in width `fk`, as raw bits.
pub fn float_const(f: u32, fk: Fk) -> u64 {
    let i = (f - 240) as usize;
    const F32: [u32; 9] = [
        0x3f00_0000,
        0xbf00_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x4000_0000,
        0xc000_0000,
        0x4080_0000,
        0xc080_0000,
        0x3e22_f983,
    ];
    const F16: [u16; 9] = [
        0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118,
    ];
    const F64: [u64; 9] = [
        0x3fe0_0000_0000_0000,
        0xbfe0_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
        0x4000_0000_0000_0000,
        0xc000_0000_0000_0000,
        0x4010_0000_0000_0000,
        0xc010_0000_0000_0000,
        0x3fc4_5f30_6dc9_c882,
    ];
    match fk {
        Fk::F16 => u64::from(F16[i]),
        Fk::F32 => u64::from(F32[i]),
        Fk::F64 => F64[i],
    }
}
