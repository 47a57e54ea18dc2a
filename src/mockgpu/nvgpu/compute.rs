//! The compute engine: its method state (shader local memory, the shared/local windows, the
//! QMD-version hint, cache invalidates), grid launches from memory (SEND_PCAS_A +
//! SEND_SIGNALING_PCAS2_B with a scheduling action) or inline (SET_INLINE_QMD_ADDRESS_A/B +
//! LOAD_INLINE_QMD_DATA, stored to memory then launched), and per launch: the QMD decoded with the
//! chip's version and checked, the grid run by the executor, the release semaphores written, and
//! the dependent QMD followed.

use super::channel::{gr, mmu, pbdma, StepFault, StepResult};
use super::{ChannelId, NvDispatch, Shared};
use crate::hw::nv::arch::{sm_config_value, NvArch, PcasAction};
use crate::hw::nv::decode::qmd_summary;
use crate::hw::nv::methods::*;
use crate::hw::nv::qmd::{
    AnyQmd, DependentAction, Qmd, QmdRelease, ReleaseStructure, QMD_TYPE_GRID_CTA, QMD_TYPE_QUEUE,
};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;

/// Longest dependent-QMD chain followed before the launch is declared a loop.
const MAX_CHAIN: u64 = 1 << 20;

/// The compute engine's method state of one channel.
#[derive(Debug, Default)]
pub(super) struct ComputeEngine {
    send_pcas_a: Option<u32>,
    shared_window: [u32; 2],
    local_window: [u32; 2],
    local_memory: [u32; 2],
    non_throttled: [u32; 3],
    qmd_version: u32,
    inline_addr: [u32; 2],
    inline_words: Vec<u32>,
    /// Bit i: LOAD_INLINE_QMD_DATA(i) was written since SET_INLINE_QMD_ADDRESS.
    inline_seen: u128,
}

impl ComputeEngine {
    /// Executes one compute method; returns the number of grids it launched.
    pub(super) fn write(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        method: u32,
        data: u32,
    ) -> StepResult<u64> {
        match method {
            SEND_PCAS_A => self.send_pcas_a = Some(data),
            SEND_SIGNALING_PCAS2_B => return self.signaling_pcas(sh, ch, class, data),
            SET_INLINE_QMD_ADDRESS_A => self.inline_address_a(sh.arch, data)?,
            SET_INLINE_QMD_ADDRESS_B => self.inline_addr[1] = data,
            m if (LOAD_INLINE_QMD_DATA..LOAD_INLINE_QMD_DATA + 4 * LOAD_INLINE_QMD_DATA_COUNT)
                .contains(&m) =>
            {
                return self.load_inline(sh, ch, class, (m - LOAD_INLINE_QMD_DATA) / 4, data)
            }
            _ => self.state_write(sh.arch, method, data)?,
        }
        Ok(0)
    }

    /// The methods that only set state (windows, SLM, hints) or are no-ops.
    fn state_write(&mut self, arch: &NvArch, method: u32, data: u32) -> StepResult<()> {
        match method {
            NO_OPERATION | WAIT_FOR_IDLE => {}
            SET_QMD_VERSION => self.qmd_version = data,
            SET_SHADER_SHARED_MEMORY_WINDOW_A => {
                self.shared_window[0] = upper17("SHARED_MEMORY_WINDOW", data)?
            }
            SET_SHADER_SHARED_MEMORY_WINDOW_B => {
                self.shared_window[1] = data;
                let w = self.shared_window();
                if w % arch.shared_window_align != 0 {
                    return Err(gr(format!(
                        "SET_SHADER_SHARED_MEMORY_WINDOW {w:#x} is not {:#x}-aligned as {} needs",
                        arch.shared_window_align, arch.compute_class_name
                    )));
                }
            }
            SET_SHADER_LOCAL_MEMORY_WINDOW_A => {
                self.local_window[0] = upper17("LOCAL_MEMORY_WINDOW", data)?
            }
            SET_SHADER_LOCAL_MEMORY_WINDOW_B => self.local_window[1] = data,
            SET_SHADER_LOCAL_MEMORY_A => {
                let bits = arch.local_memory_addr_bits - 32;
                if data >> bits != 0 {
                    return Err(gr(format!(
                        "SET_SHADER_LOCAL_MEMORY_A {data:#x} does not fit {bits} bits"
                    )));
                }
                self.local_memory[0] = data;
            }
            SET_SHADER_LOCAL_MEMORY_B => self.local_memory[1] = data,
            SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A..=SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C => {
                self.non_throttled
                    [((method - SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A) / 4) as usize] = data
            }
            INVALIDATE_SHADER_CACHES_NO_WFI => {
                if data & !InvalidateShaderCaches::all().bits() != 0 {
                    return Err(gr(format!(
                        "INVALIDATE_SHADER_CACHES_NO_WFI {data:#x}: unknown bits"
                    )));
                }
            }
            _ => return Err(pbdma(format!("compute method {method:#x} is not emulated"))),
        }
        Ok(())
    }

    fn shared_window(&self) -> u64 {
        u64::from(self.shared_window[0]) << 32 | u64::from(self.shared_window[1])
    }

    fn local_window(&self) -> u64 {
        u64::from(self.local_window[0]) << 32 | u64::from(self.local_window[1])
    }

    fn signaling_pcas(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        data: u32,
    ) -> StepResult<u64> {
        let action = PcasAction::from_bits(data & PCAS_ACTION_MASK)
            .filter(|_| data & !PCAS_ACTION_MASK == 0)
            .ok_or_else(|| {
                gr(format!(
                    "SEND_SIGNALING_PCAS2_B {data:#x}: unknown action or SELECT/OFFSET set"
                ))
            })?;
        if !action.schedules() {
            return Ok(0);
        }
        if sh.refused_pcas.load(Ordering::SeqCst) & 1 << (action as u32) != 0 {
            return Err(gr(format!(
                "SEND_SIGNALING_PCAS2_B {} ({:#x}): this GPU was set to refuse the action (fault injection)",
                action.name(),
                action as u32
            )));
        }
        let Some(a) = self.send_pcas_a else {
            return Err(gr(
                "SEND_SIGNALING_PCAS2_B schedules, but no SEND_PCAS_A was written",
            ));
        };
        self.run_chain(sh, ch, class, u64::from(a) << 8)
    }

    fn inline_address_a(&mut self, arch: &NvArch, data: u32) -> StepResult<()> {
        let size_bit = if arch.inline_qmd_size_bit {
            INLINE_QMD_SIZE_384
        } else {
            0
        };
        let upper_mask = if arch.inline_qmd_addr_upper_bits >= 32 {
            u32::MAX
        } else {
            (1 << arch.inline_qmd_addr_upper_bits) - 1
        };
        if data & !(upper_mask | size_bit) != 0 {
            return Err(gr(format!(
                "SET_INLINE_QMD_ADDRESS_A {data:#x}: reserved bits set"
            )));
        }
        let size = if data & size_bit != 0 { 384 } else { 256 };
        if size != arch.qmd_size {
            return Err(gr(format!(
                "inline QMD of {size} bytes, {} takes {}-byte {} QMDs",
                arch.compute_class_name,
                arch.qmd_size,
                arch.qmd_version.name()
            )));
        }
        self.inline_addr[0] = data & upper_mask;
        self.inline_words = vec![0; size / 4];
        self.inline_seen = 0;
        Ok(())
    }

    fn load_inline(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        i: u32,
        data: u32,
    ) -> StepResult<u64> {
        let n = self.inline_words.len() as u32;
        if i >= n {
            return Err(gr(format!(
                "LOAD_INLINE_QMD_DATA({i}) without SET_INLINE_QMD_ADDRESS for a {n}-dword QMD"
            )));
        }
        self.inline_words[i as usize] = data;
        self.inline_seen |= 1 << i;
        if i + 1 < n {
            return Ok(0);
        }
        if self.inline_seen != (1u128 << n) - 1 {
            return Err(gr(format!(
                "inline QMD launched with dwords missing (mask {:#x})",
                self.inline_seen
            )));
        }
        let shifted = u64::from(self.inline_addr[0]) << 32 | u64::from(self.inline_addr[1]);
        let addr = shifted << 8;
        if addr >> 40 != 0 {
            return Err(gr(format!(
                "inline QMD address {addr:#x} is not below 2^40"
            )));
        }
        sh.mem.write_dwords(addr, &self.inline_words).map_err(mmu)?;
        self.inline_seen = 0;
        self.run_chain(sh, ch, class, addr)
    }

    /// Launches the QMD at `addr` and every dependent QMD it schedules.
    fn run_chain(
        &mut self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        mut addr: u64,
    ) -> StepResult<u64> {
        for n in 0..MAX_CHAIN {
            let q = self.read_qmd(sh, addr)?;
            sh.trace(|| format!("{ch} launch {addr:#x}: {}", qmd_summary(&q)));
            if launches_grid(sh, ch, addr, &q)? {
                let d = self.dispatch_of(sh, ch, class, addr, &q)?;
                run_grid(sh, &d)?;
            }
            for i in 0..3 {
                if let Some(r) = q.release(i) {
                    release(sh, i, &r)?;
                }
            }
            match next_qmd(&q)? {
                Some(next) => addr = next,
                None => return Ok(n + 1),
            }
        }
        Err(gr(format!(
            "dependent QMD chain longer than {MAX_CHAIN} (a loop?)"
        )))
    }

    fn read_qmd(&self, sh: &Shared, addr: u64) -> StepResult<AnyQmd> {
        let arch = sh.arch;
        if addr % 256 != 0 || addr >> 40 != 0 {
            return Err(gr(format!(
                "QMD address {addr:#x} is not 256-byte aligned below 2^40"
            )));
        }
        let mut words = vec![0u32; arch.qmd_size / 4];
        sh.mem.read_dwords(addr, &mut words).map_err(mmu)?;
        let q = AnyQmd::from_dwords(arch.qmd_version, &words).map_err(|e| gr(e.message()))?;
        if q.major_version() != arch.qmd_version.major() {
            return Err(gr(format!(
                "QMD at {addr:#x} has QMD_MAJOR_VERSION {}; {} takes {}",
                q.major_version(),
                arch.compute_class_name,
                arch.qmd_version.name()
            )));
        }
        Ok(q)
    }

    fn dispatch_of(
        &self,
        sh: &Shared,
        ch: ChannelId,
        class: u32,
        addr: u64,
        q: &AnyQmd,
    ) -> StepResult<NvDispatch> {
        let d = NvDispatch {
            channel: ch,
            compute_class: class,
            qmd_addr: addr,
            qmd_version: q.version(),
            grid: q.grid(),
            block: q.block(),
            program_addr: q.program_address(),
            register_count: q.register_count(),
            shared_memory_size: q.shared_memory().size,
            slm: q.shader_local_memory(),
            sass_version: q.sass_version(),
            cbufs: std::array::from_fn(|i| q.constant_buffer(i)),
            param_base: sh.arch.cbuf0.param_base,
            shared_window: self.shared_window(),
            local_window: self.local_window(),
        };
        check_launch(sh, q, &d)?;
        Ok(d)
    }
}

/// Whether the QMD runs a grid, from its QMD_TYPE (`clcbc0qmd.h`, `clcdc0qmd.h`; V03 has none
/// and always does): GRID_CTA runs one; QUEUE runs no CTA but its releases still happen, as a real
/// H200 did (driver 580.159.04, 2026-12-04: every kernel completed without writing anything);
/// the other types (GRID_NULL, the cluster grids) are not modelled and refused.
fn launches_grid(sh: &Shared, ch: ChannelId, at: u64, q: &AnyQmd) -> StepResult<bool> {
    match q.qmd_type() {
        None | Some(QMD_TYPE_GRID_CTA) => Ok(true),
        Some(QMD_TYPE_QUEUE) => {
            sh.trace(|| format!("{ch} QMD at {at:#x} has QMD_TYPE QUEUE: no CTA runs"));
            Ok(false)
        }
        Some(t) => Err(gr(format!(
            "QMD at {at:#x}: QMD_TYPE {t} is not modelled (GRID_CTA {QMD_TYPE_GRID_CTA} and QUEUE \
             {QMD_TYPE_QUEUE} are)"
        ))),
    }
}

fn upper17(what: &str, data: u32) -> StepResult<u32> {
    if data >> 17 != 0 {
        return Err(gr(format!(
            "SET_SHADER_{what}_A {data:#x} does not fit 17 bits"
        )));
    }
    Ok(data)
}

/// What the compute front end and the SMs would trip over.
fn check_launch(sh: &Shared, q: &AnyQmd, d: &NvDispatch) -> StepResult<()> {
    let arch = sh.arch;
    let at = d.qmd_addr;
    let threads: u64 = d.block.iter().map(|&b| u64::from(b)).product();
    if d.grid.contains(&0) || d.block.contains(&0) {
        return Err(gr(format!(
            "QMD at {at:#x}: grid {:?} / block {:?} has a zero dimension",
            d.grid, d.block
        )));
    }
    if d.register_count == 0 || threads > u64::from(NvArch::max_block_threads(d.register_count)) {
        return Err(gr(format!(
            "QMD at {at:#x}: {threads} threads x {} registers do not fit an SM",
            d.register_count
        )));
    }
    if !arch
        .sm_versions
        .iter()
        .any(|&sm| NvArch::sass_version(sm) == d.sass_version)
    {
        return Err(gr(format!(
            "QMD at {at:#x}: SASS version {:#x} is not one of {}'s",
            d.sass_version, arch.compute_class_name
        )));
    }
    check_shared(arch, q, at)?;
    let Some(cb0) = d.cbufs[0].filter(|c| c.size > 0) else {
        return Err(gr(format!(
            "QMD at {at:#x}: constant buffer 0 is not bound"
        )));
    };
    let mut probe = [0u8; 1];
    sh.mem.read(cb0.addr, &mut probe).map_err(mmu)?;
    sh.mem
        .read(cb0.addr + u64::from(cb0.size) - 1, &mut probe)
        .map_err(mmu)?;
    if d.program_addr % 16 != 0 {
        return Err(gr(format!(
            "QMD at {at:#x}: program address {:#x} is not 16-byte aligned",
            d.program_addr
        )));
    }
    let mut insn = [0u8; 16];
    sh.mem.read(d.program_addr, &mut insn).map_err(mmu)?;
    Ok(())
}

fn check_shared(arch: &NvArch, q: &AnyQmd, at: u64) -> StepResult<()> {
    let s = q.shared_memory();
    let max_kib = arch.shared_mem_configs_kib.last().copied().unwrap_or(0);
    let kib = |v: u32| v.saturating_sub(1) * 4;
    let ok = s.min_config >= 1
        && s.min_config <= s.target_config
        && s.target_config <= s.max_config
        && s.max_config <= sm_config_value(max_kib)
        && s.size <= kib(s.target_config) * 1024;
    if !ok {
        return Err(gr(format!(
            "QMD at {at:#x}: shared memory {:#x} bytes with SM configs min {} target {} max {} (max {max_kib} KiB on {})",
            s.size, s.min_config, s.target_config, s.max_config, arch.compute_class_name
        )));
    }
    Ok(())
}

fn run_grid(sh: &Shared, d: &NvDispatch) -> StepResult<()> {
    // A panicking executor must fault the channel, not kill the GPU thread.
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| sh.executor.dispatch(&*sh.mem, d)));
    match run {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(gr(format!(
            "kernel at {:#x} failed: {}",
            d.program_addr,
            e.message()
        ))),
        Err(_) => Err(gr(format!(
            "the executor panicked running the kernel at {:#x}",
            d.program_addr
        ))),
    }
}

/// A QMD release: four words (payload + timestamp at +8), one word, or two words (64-bit).
fn release(sh: &Shared, i: usize, r: &QmdRelease) -> StepResult<()> {
    let align = match r.structure {
        ReleaseStructure::FourWords => 16,
        ReleaseStructure::TwoWords => 8,
        ReleaseStructure::OneWord if r.payload64 => {
            return Err(gr(format!(
                "QMD release {i}: a 64-bit payload in a one-word release"
            )))
        }
        ReleaseStructure::OneWord => 4,
    };
    if r.addr % align != 0 {
        return Err(gr(format!(
            "QMD release {i}: address {:#x} is not {align}-byte aligned",
            r.addr
        )));
    }
    let res = match r.structure {
        ReleaseStructure::TwoWords => sh.mem.write_u64(
            r.addr,
            if r.payload64 {
                r.payload
            } else {
                r.payload & 0xFFFF_FFFF
            },
        ),
        _ if r.payload64 => sh.mem.write_u64(r.addr, r.payload),
        _ => sh.mem.write_u32(r.addr, r.payload as u32),
    };
    res.map_err(mmu)?;
    if r.structure == ReleaseStructure::FourWords {
        sh.mem.write_u64(r.addr + 8, sh.clock.now()).map_err(mmu)?;
    }
    Ok(())
}

/// The dependent QMD to launch next, if the QMD schedules one.
fn next_qmd(q: &AnyQmd) -> StepResult<Option<u64>> {
    if q.layout().dependent.len() > 1 && q.dependent_qmd(1).is_some() {
        return Err(gr("dependent QMD 1 is not emulated"));
    }
    let enabled = q.layout().dependent[0].enable.get(q.dwords()) != 0;
    match q.dependent_qmd(0) {
        None if enabled => Err(unknown_action(q)),
        None => Ok(None),
        Some(d) => match d.action {
            DependentAction::Schedule | DependentAction::InvalidateCopySchedule => Ok(Some(d.addr)),
            a => Err(gr(format!("dependent QMD action {a:?} is not emulated"))),
        },
    }
}

fn unknown_action(q: &AnyQmd) -> StepFault {
    let a = q.layout().dependent[0].action.get(q.dwords());
    gr(format!("dependent QMD action {a} is not a known action"))
}
