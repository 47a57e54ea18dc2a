//! The software GPU's RDNA3 (gfx11) interpreter: the [`DispatchExecutor`] for real code objects
//! (`MOCKGPU_CODE=isa`). It runs the machine code at the dispatch's program address the way a
//! gfx11 compute unit starts a wave32, from what the PM4 dispatch loaded into the SH registers
//! (RDNA3 reference, "Initial Kernel State", and LLVM's AMDGPUUsage "Initial Kernel Execution
//! State"):
//! - SGPRs: s[0..USER_SGPR) = COMPUTE_USER_DATA (the kernarg pointer among them, where the
//!   descriptor's enable_sgpr_* bits put it), then the workgroup ids X, Y, Z for each
//!   RSRC2.TGID_*_EN; VCC, EXEC of the wave's live lanes, SCC 0.
//! - v0: the work-item ids packed 10:10:10 (gfx11), components up to RSRC2.TIDIG_COMP_CNT.
//! - VGPRs: (RSRC1.VGPRS + 1) * 8 per lane (the wave32 granule); LDS: RSRC2.LDS_SIZE bytes per
//!   workgroup, zero-filled at workgroup start (the hardware leaves it undefined).
//!
//! Workgroups run one after another; the waves of a workgroup run round-robin between
//! `s_barrier`s (a barrier releases when every live wave reached it). Loads complete at the
//! `s_waitcnt` that covers them ([`wave`]): a register read before then is an error naming the
//! register, the reading pc and the load's pc.
//!
//! Not guaranteed: wave64, scratch (RSRC2.SCRATCH_EN), TG_SIZE_EN, traps; these are refused.
//! Speed: a plain interpreter (decode every executed instruction).

pub mod decode;
pub mod mem;
pub mod salu;
pub mod valu;
pub mod valu_ops;
pub mod vop3p;
pub mod vopd;
pub mod wave;

use std::collections::BTreeSet;
use std::sync::Mutex;

use decode::{decode, Enc, Inst};
use mem::Lds;
use salu::Flow;
use wave::{Wave, EXEC, LANES};

use crate::mockgpu::amdgpu::{DispatchExecutor, DispatchState};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{bail, ensure, Result};

/// Instructions one wave may execute before the dispatch is called endless.
pub const MAX_WAVE_INSTRUCTIONS: u64 = 50_000_000;

/// The (encoding, opcode) pairs executed in this process.
static COVERAGE: Mutex<BTreeSet<(Enc, u32)>> = Mutex::new(BTreeSet::new());

/// The (encoding, opcode) pairs the interpreter executed so far in this process.
pub fn coverage() -> Vec<(Enc, u32)> {
    COVERAGE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect()
}

/// Record an executed opcode; with `MOCKGPU_ISA_COVERAGE=<file>` a first-seen one is appended
/// to the file as `ENC OP`.
fn record(i: &Inst) {
    let mut c = COVERAGE.lock().unwrap_or_else(|e| e.into_inner());
    if c.insert((i.enc, i.op)) {
        if let Some(path) = crate::helpers::getenv_str("MOCKGPU_ISA_COVERAGE") {
            use std::io::Write as _;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{:?} {}", i.enc, i.op);
            }
        }
    }
}

/// Instruction memory of one dispatch, fetched from GPU memory on demand in 256-byte lines.
struct Code<'a> {
    mem: &'a dyn GpuMemory,
    base: u64,
    words: Vec<u32>,
}

impl Code<'_> {
    /// Make dwords up to `pc + 3` (the longest instruction) present where they are mapped.
    fn fetch(&mut self, pc: usize) -> Result<()> {
        while self.words.len() < pc + 3 {
            let at = self.base + 4 * self.words.len() as u64;
            let mut line = [0u32; 64];
            if self.mem.read_dwords(at, &mut line).is_err() {
                // The end of the mapping: fetch what is there dword by dword.
                let mut one = [0u32; 1];
                if self.mem.read_dwords(at, &mut one).is_err() {
                    ensure!(
                        self.words.len() > pc,
                        Fault,
                        "RDNA3: instruction fetch at {at:#x} (pc {:#x}) is unmapped",
                        4 * pc
                    );
                    return Ok(());
                }
                self.words.push(one[0]);
                continue;
            }
            self.words.extend_from_slice(&line);
        }
        Ok(())
    }
}

/// Runs gfx11 machine code.
#[derive(Default)]
pub struct Rdna3Executor;

impl Rdna3Executor {
    pub fn new() -> Rdna3Executor {
        Rdna3Executor
    }
}

/// What the dispatch's registers ask of each wave.
struct Setup {
    vgprs: usize,
    tgid: [bool; 3],
    tid_comps: u32,
    lds_bytes: usize,
}

fn setup(st: &DispatchState) -> Result<Setup> {
    ensure!(
        st.wave32,
        Fault,
        "RDNA3: wave64 dispatches are not modelled (DISPATCH_INITIATOR.CS_W32_EN is 0)"
    );
    let r2 = st.rsrc2;
    ensure!(
        r2 & 1 == 0,
        Fault,
        "RDNA3: RSRC2.SCRATCH_EN is set; scratch (private segment) memory is not modelled"
    );
    ensure!(
        r2 >> 10 & 1 == 0,
        Fault,
        "RDNA3: RSRC2.TG_SIZE_EN is not modelled"
    );
    Ok(Setup {
        vgprs: ((st.rsrc1 & 0x3f) as usize + 1) * 8,
        tgid: [r2 >> 7 & 1 != 0, r2 >> 8 & 1 != 0, r2 >> 9 & 1 != 0],
        tid_comps: r2 >> 11 & 3,
        lds_bytes: st.lds_bytes as usize,
    })
}

impl DispatchExecutor for Rdna3Executor {
    fn dispatch(&self, mem: &dyn GpuMemory, st: &DispatchState) -> Result<()> {
        let s = setup(st)?;
        let mut code = Code {
            mem,
            base: st.pgm_addr,
            words: Vec::new(),
        };
        let [gx, gy, gz] = st.grid;
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    let g = [st.start[0] + x, st.start[1] + y, st.start[2] + z];
                    run_workgroup(&mut code, st, &s, g)?;
                }
            }
        }
        Ok(())
    }
}

/// The waves of one workgroup, in their initial state.
fn waves(st: &DispatchState, s: &Setup, g: [u32; 3]) -> Result<Vec<Wave>> {
    let [lx, ly, lz] = st.workgroup_size;
    let threads = (lx * ly * lz) as usize;
    ensure!(
        threads > 0,
        Fault,
        "RDNA3: empty workgroup {:?}",
        st.workgroup_size
    );
    let n = threads.div_ceil(LANES);
    let mut out = Vec::with_capacity(n);
    for wi in 0..n {
        let mut w = Wave::new(s.vgprs);
        let user = st.user_sgpr_count as usize;
        ensure!(user <= 16, Fault, "RDNA3: USER_SGPR {user} > 16");
        w.s[..user].copy_from_slice(&st.user_sgprs[..user]);
        let mut k = user;
        for (d, &enabled) in s.tgid.iter().enumerate() {
            if enabled {
                w.s[k] = g[d];
                k += 1;
            }
        }
        let mut exec = 0u32;
        for lane in 0..LANES {
            let t = wi * LANES + lane;
            if t >= threads {
                break;
            }
            exec |= 1 << lane;
            let t = t as u32;
            let (tx, ty, tz) = (t % lx, t / lx % ly, t / (lx * ly));
            let mut v0 = tx;
            if s.tid_comps >= 1 {
                v0 |= ty << 10;
            }
            if s.tid_comps >= 2 {
                v0 |= tz << 20;
            }
            w.v[0][lane] = v0;
        }
        w.s[EXEC] = exec;
        out.push(w);
    }
    Ok(out)
}

fn run_workgroup(code: &mut Code, st: &DispatchState, s: &Setup, g: [u32; 3]) -> Result<()> {
    let mut ws = waves(st, s, g)?;
    let mut lds = Lds {
        bytes: vec![0; s.lds_bytes],
    };
    loop {
        for w in ws.iter_mut().filter(|w| !w.done && !w.at_barrier) {
            run_wave(code, w, &mut lds)
                .map_err(|e| crate::Error::Fault(format!("workgroup {g:?}: {}", e.message())))?;
        }
        if ws.iter().all(|w| w.done) {
            return Ok(());
        }
        // Every live wave waits at the barrier: release it.
        for w in ws.iter_mut() {
            w.at_barrier = false;
        }
    }
}

/// Run one wave until it ends or reaches a barrier.
fn run_wave(code: &mut Code, w: &mut Wave, lds: &mut Lds) -> Result<()> {
    let mut count = 0u64;
    loop {
        code.fetch(w.pc)?;
        let i = decode(&code.words, w.pc)?;
        record(&i);
        count += 1;
        if count > MAX_WAVE_INSTRUCTIONS {
            bail!(
                Fault,
                "RDNA3: a wave executed {MAX_WAVE_INSTRUCTIONS} instructions without ending \
                 (pc {:#x}): an endless loop?",
                4 * w.pc
            );
        }
        let pc = w.pc;
        let flow = step(w, &i, pc, code.mem, lds)?;
        match flow {
            Flow::Next => w.pc = pc + i.len,
            Flow::Jump(t) => w.pc = t,
            Flow::Barrier => {
                w.pc = pc + i.len;
                w.at_barrier = true;
                return Ok(());
            }
            Flow::End => {
                w.done = true;
                return Ok(());
            }
        }
    }
}

/// Execute one instruction.
fn step(w: &mut Wave, i: &Inst, pc: usize, mem: &dyn GpuMemory, lds: &mut Lds) -> Result<Flow> {
    match i.enc {
        Enc::Sop2 => salu::sop2(w, i, pc)?,
        Enc::Sopk => salu::sopk(w, i, pc)?,
        Enc::Sop1 => salu::sop1(w, i, pc)?,
        Enc::Sopc => salu::sopc(w, i, pc)?,
        Enc::Sopp => return salu::sopp(w, i, pc),
        Enc::Smem => mem::smem(w, i, pc, mem)?,
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 => valu::exec(w, i, pc)?,
        Enc::Vop3p => vop3p::exec(w, i, pc)?,
        Enc::Vopd => vopd::exec(w, i, pc)?,
        Enc::Flat => mem::flat(w, i, pc, mem)?,
        Enc::Ds => mem::ds(w, i, pc, lds)?,
        _ => return Err(i.unknown(pc)),
    }
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests;
