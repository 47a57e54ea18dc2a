//! Memory instructions: SMEM scalar loads, FLAT/GLOBAL vector loads and stores, DS (LDS) loads
//! and stores (RDNA3 reference, "Scalar Memory Operations", "Flat, Scratch and Global
//! Instructions", "Data Share Operations"). Loads read memory when they issue and hand their
//! results to the wave as in-flight writes ([`Pending`]) that complete only at the `s_waitcnt`
//! covering them (vmcnt for FLAT/GLOBAL, lgkmcnt for SMEM and DS); stores write at issue.
//!
//! Not guaranteed: atomics, scratch and buffer (MUBUF) instructions are refused by name; an LDS
//! access outside the workgroup's allocation is an error (the hardware drops it silently).

use super::decode::{bits, Inst};
use super::wave::{Counter, Pending, Wave, Write, NULL};
use crate::mockgpu::gpu_memory::GpuMemory;
use crate::{bail, Error, Result};

/// SMEM: s_load_b32..b512.
pub fn smem(w: &mut Wave, i: &Inst, pc: usize, mem: &dyn GpuMemory) -> Result<()> {
    let n = match i.op {
        0..=4 => 1usize << i.op,
        _ => return Err(i.unknown(pc)),
    };
    let sbase = 2 * bits(i.w[0], 5, 0) as usize;
    let sdata = bits(i.w[0], 12, 6) as usize;
    let off = ((bits(i.w[1], 20, 0) << 11) as i32 >> 11) as i64;
    let soff = bits(i.w[1], 31, 25) as usize;
    let base = u64::from(w.sreg(sbase)?) | u64::from(w.sreg(sbase + 1)?) << 32;
    let so = if soff == NULL {
        0
    } else {
        u64::from(w.sreg(soff)?)
    };
    let addr = base.wrapping_add(off as u64).wrapping_add(so) & !3;
    let mut vals = vec![0u32; n];
    mem.read_dwords(addr, &mut vals).map_err(|e| {
        Error::Fault(format!(
            "RDNA3: s_load of {n} dwords at {addr:#x} (pc {:#x}): {}",
            4 * pc,
            e.message()
        ))
    })?;
    if sdata + n > 106 {
        bail!(Fault, "RDNA3: s_load at pc {:#x} writes past s105", 4 * pc);
    }
    let writes = vals
        .iter()
        .enumerate()
        .map(|(k, &val)| Write::Sgpr {
            reg: sdata + k,
            val,
        })
        .collect();
    w.push_pending(Pending {
        counter: Counter::Lgkm,
        writes,
        pc: 4 * pc,
    });
    Ok(())
}

/// (bytes, sign-extend, d16 half: 0 none / 1 low / 2 high) of a FLAT load opcode.
fn flat_load(op: u32) -> Option<(usize, bool, u8)> {
    Some(match op {
        16 => (1, false, 0),
        17 => (1, true, 0),
        18 => (2, false, 0),
        19 => (2, true, 0),
        20 => (4, false, 0),
        21 => (8, false, 0),
        22 => (12, false, 0),
        23 => (16, false, 0),
        30 => (1, false, 1),
        31 => (1, true, 1),
        32 => (2, false, 1),
        33 => (1, false, 2),
        34 => (1, true, 2),
        35 => (2, false, 2),
        _ => return None,
    })
}

/// (bytes, from the high half) of a FLAT store opcode.
fn flat_store(op: u32) -> Option<(usize, bool)> {
    Some(match op {
        24 => (1, false),
        25 => (2, false),
        26 => (4, false),
        27 => (8, false),
        28 => (12, false),
        29 => (16, false),
        36 => (1, true),
        37 => (2, true),
        _ => return None,
    })
}

/// The per-lane address of a FLAT/GLOBAL instruction.
fn flat_addr(w: &Wave, i: &Inst, lane: usize) -> u64 {
    let seg = bits(i.w[0], 17, 16);
    let off = ((bits(i.w[0], 12, 0) << 19) as i32 >> 19) as i64;
    let addr = bits(i.w[1], 7, 0) as usize;
    let saddr = bits(i.w[1], 22, 16) as usize;
    let base = if seg == 2 && saddr != NULL {
        (u64::from(w.s[saddr]) | u64::from(w.s[saddr + 1]) << 32)
            .wrapping_add(u64::from(w.v[addr][lane]))
    } else {
        u64::from(w.v[addr][lane]) | u64::from(w.v[addr + 1][lane]) << 32
    };
    base.wrapping_add(off as u64)
}

fn mem_err(what: &str, addr: u64, pc: usize, lane: usize, e: Error) -> Error {
    Error::Fault(format!(
        "RDNA3: {what} at {addr:#x} (pc {:#x}, lane {lane}): {}",
        4 * pc,
        e.message()
    ))
}

/// The register writes of one lane's loaded bytes `buf` (`n` of them) into `reg`..: whole
/// dwords, or an 8/16-bit value zero- or sign-extended (`sext`) into the dword or (d16) its low
/// (1) or high (2) half.
fn load_writes(
    buf: &[u8; 16],
    n: usize,
    sext: bool,
    d16: u8,
    reg: usize,
    lane: usize,
) -> Vec<Write> {
    let val =
        |j: usize| u32::from_le_bytes([buf[4 * j], buf[4 * j + 1], buf[4 * j + 2], buf[4 * j + 3]]);
    if n >= 4 {
        return (0..n / 4)
            .map(|j| Write::Vgpr {
                reg: reg + j,
                lane,
                val: val(j),
                mask: u32::MAX,
            })
            .collect();
    }
    let raw = val(0);
    let x = match (n, sext) {
        (1, true) => raw as u8 as i8 as i32 as u32,
        (2, true) => raw as u16 as i16 as i32 as u32,
        (1, false) => raw & 0xff,
        _ => raw & 0xffff,
    };
    let (val, mask) = match d16 {
        0 => (x, u32::MAX),
        1 => (x & 0xffff, 0xffff),
        _ => ((x & 0xffff) << 16, 0xffff_0000),
    };
    vec![Write::Vgpr {
        reg,
        lane,
        val,
        mask,
    }]
}

/// FLAT/GLOBAL loads and stores.
pub fn flat(w: &mut Wave, i: &Inst, pc: usize, mem: &dyn GpuMemory) -> Result<()> {
    let seg = bits(i.w[0], 17, 16);
    if seg == 1 || seg == 3 {
        bail!(
            Fault,
            "RDNA3: {} at pc {:#x} (segment {seg}) is not modelled",
            if seg == 1 {
                "scratch access"
            } else {
                "FLAT segment 3"
            },
            4 * pc
        );
    }
    let addr_reg = bits(i.w[1], 7, 0) as usize;
    let saddr = bits(i.w[1], 22, 16) as usize;
    let uses_pair = !(seg == 2 && saddr != NULL);
    w.vdst(addr_reg, if uses_pair { 2 } else { 1 })?;
    if !uses_pair {
        w.sreg(saddr)?;
        w.sreg(saddr + 1)?;
    }
    let data = bits(i.w[1], 15, 8) as usize;
    let vdst = bits(i.w[1], 31, 24) as usize;
    if let Some((n, hi)) = flat_store(i.op) {
        w.vdst(data, n.div_ceil(4))?;
        for lane in w.active().collect::<Vec<_>>() {
            let a = flat_addr(w, i, lane);
            let mut bytes = Vec::with_capacity(16);
            for k in 0..n.div_ceil(4) {
                bytes.extend_from_slice(&w.v[data + k][lane].to_le_bytes());
            }
            let src = if hi { &bytes[2..2 + n] } else { &bytes[..n] };
            mem.write(a, src)
                .map_err(|e| mem_err("global store", a, pc, lane, e))?;
        }
        return Ok(());
    }
    let Some((n, sext, d16)) = flat_load(i.op) else {
        return Err(i.unknown(pc));
    };
    let regs = n.div_ceil(4);
    w.vdst(vdst, regs)?;
    let mut writes = Vec::new();
    for lane in w.active().collect::<Vec<_>>() {
        let a = flat_addr(w, i, lane);
        let mut buf = [0u8; 16];
        mem.read(a, &mut buf[..n])
            .map_err(|e| mem_err("global load", a, pc, lane, e))?;
        writes.extend(load_writes(&buf, n, sext, d16, vdst, lane));
    }
    w.push_pending(Pending {
        counter: Counter::Vm,
        writes,
        pc: 4 * pc,
    });
    Ok(())
}

/// The LDS of one workgroup.
pub struct Lds {
    pub bytes: Vec<u8>,
}

impl Lds {
    fn range(&self, a: u64, n: usize, pc: usize, lane: usize) -> Result<std::ops::Range<usize>> {
        let end = a
            .checked_add(n as u64)
            .filter(|&e| e <= self.bytes.len() as u64);
        match end {
            Some(e) => Ok(a as usize..e as usize),
            None => bail!(
                Fault,
                "RDNA3: LDS access of {n} bytes at {a:#x} (pc {:#x}, lane {lane}) is outside the \
                 workgroup's {} bytes of LDS",
                4 * pc,
                self.bytes.len()
            ),
        }
    }
}

/// DS opcode shapes: (bytes per address, two addresses, stride multiplier, is load, sign-extend,
/// d16 half).
fn ds_shape(op: u32) -> Option<(usize, bool, u64, bool, bool, u8)> {
    Some(match op {
        13 => (4, false, 0, false, false, 0),
        14 => (4, true, 4, false, false, 0),
        15 => (4, true, 256, false, false, 0),
        30 => (1, false, 0, false, false, 0),
        31 => (2, false, 0, false, false, 0),
        77 => (8, false, 0, false, false, 0),
        78 => (8, true, 8, false, false, 0),
        79 => (8, true, 512, false, false, 0),
        160 => (1, false, 0, false, false, 2),
        161 => (2, false, 0, false, false, 2),
        222 => (12, false, 0, false, false, 0),
        223 => (16, false, 0, false, false, 0),
        54 => (4, false, 0, true, false, 0),
        55 => (4, true, 4, true, false, 0),
        56 => (4, true, 256, true, false, 0),
        57 => (1, false, 0, true, true, 0),
        58 => (1, false, 0, true, false, 0),
        59 => (2, false, 0, true, true, 0),
        60 => (2, false, 0, true, false, 0),
        118 => (8, false, 0, true, false, 0),
        119 => (8, true, 8, true, false, 0),
        120 => (8, true, 512, true, false, 0),
        162 => (1, false, 0, true, false, 1),
        163 => (1, false, 0, true, false, 2),
        164 => (1, false, 0, true, true, 1),
        165 => (1, false, 0, true, true, 2),
        166 => (2, false, 0, true, false, 1),
        167 => (2, false, 0, true, false, 2),
        254 => (12, false, 0, true, false, 0),
        255 => (16, false, 0, true, false, 0),
        _ => return None,
    })
}

/// DS loads and stores on the workgroup's LDS.
pub fn ds(w: &mut Wave, i: &Inst, pc: usize, lds: &mut Lds) -> Result<()> {
    let Some((n, two, stride, load, sext, d16)) = ds_shape(i.op) else {
        return Err(i.unknown(pc));
    };
    if bits(i.w[0], 17, 17) != 0 {
        bail!(
            Fault,
            "RDNA3: GDS access at pc {:#x} is not modelled",
            4 * pc
        );
    }
    let (o0, o1) = (
        u64::from(bits(i.w[0], 7, 0)),
        u64::from(bits(i.w[0], 15, 8)),
    );
    let addr = bits(i.w[1], 7, 0) as usize;
    let (d0, d1) = (bits(i.w[1], 15, 8) as usize, bits(i.w[1], 23, 16) as usize);
    let vdst = bits(i.w[1], 31, 24) as usize;
    w.vdst(addr, 1)?;
    let addrs = |base: u64| -> Vec<u64> {
        if two {
            vec![base + o0 * stride, base + o1 * stride]
        } else {
            vec![base + (o1 << 8 | o0)]
        }
    };
    let regs = n.div_ceil(4);
    let mut writes = Vec::new();
    for lane in w.active().collect::<Vec<_>>() {
        let base = u64::from(w.v[addr][lane]);
        for (k, a) in addrs(base).into_iter().enumerate() {
            let r = lds.range(a, n, pc, lane)?;
            if !load {
                let src = if k == 0 { d0 } else { d1 };
                w.vdst(src, regs)?;
                let mut bytes = Vec::with_capacity(16);
                for j in 0..regs {
                    bytes.extend_from_slice(&w.v[src + j][lane].to_le_bytes());
                }
                let from = if d16 == 2 { 2 } else { 0 };
                lds.bytes[r].copy_from_slice(&bytes[from..from + n]);
                continue;
            }
            let mut buf = [0u8; 16];
            buf[..n].copy_from_slice(&lds.bytes[r]);
            let dst = vdst + k * regs;
            writes.extend(load_writes(&buf, n, sext, d16, dst, lane));
        }
    }
    if load {
        w.vdst(vdst, regs * if two { 2 } else { 1 })?;
        w.push_pending(Pending {
            counter: Counter::Lgkm,
            writes,
            pc: 4 * pc,
        });
    }
    Ok(())
}
