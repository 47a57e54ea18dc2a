//! The composite PM4 commands the HCQ compute queue is made of (tinygrad `AMDComputeQueue`,
//! `nvd.h`): a kernel launch (`exec`), `signal`, `wait`, `timestamp` and `memory_barrier`, each a
//! fixed packet sequence with typed patch points for graph replays.
//!
//! Departures from tinygrad 0.9.2 (the first two as in tinygrad 0.10.3 and PR #9314):
//! COMPUTE_PGM_RSRC3 is programmed from the descriptor, only the three RESTART registers are
//! written (not THREAD_TRACE_ENABLE), user SGPRs are filled strictly from kernel_code_properties
//! (kernels enabling inputs rawgrad does not provide are refused), and the signal's value write
//! raises no interrupt (INT_SEL 0, as amdgpu's fences) - only the mailbox write of an event does.
//!
//! Not guaranteed: the dispatch packet a DISPATCH_PTR kernel reads is the caller's to fill.

use super::*;

/// What a launch needs from the kernel descriptor (`AMDHSAKernelDescriptor.h`) and the loaded code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecProgram {
    /// Byte address of the machine code (descriptor address + kernel_code_entry_byte_offset);
    /// must be 256-byte aligned (COMPUTE_PGM_LO holds address >> 8).
    pub code_addr: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    /// Raw kernel_code_properties (see [`KernelCodeProperties`]).
    pub kernel_code_properties: u16,
    /// Descriptor offset 58 (kernarg preload); rawgrad does not preload, so it must be 0.
    pub kernarg_preload: u16,
    /// group_segment_fixed_size: static LDS bytes.
    pub group_segment_size: u32,
    /// private_segment_fixed_size: scratch bytes per work-item.
    pub private_segment_size: u32,
}

/// The device's scratch area as a launch programs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchSetup {
    /// Scratch VA (256-byte aligned).
    pub va: u64,
    /// COMPUTE_TMPRING_SIZE ([`GfxTarget::tmpring_size`]).
    pub tmpring_size: u32,
}

/// The per-launch arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecArgs {
    /// Kernarg segment VA (16-byte aligned).
    pub kernargs: u64,
    /// Workgroup counts.
    pub global: [u32; 3],
    /// Workgroup size in threads.
    pub local: [u32; 3],
    /// Scratch; required when the kernel uses scratch or reads the private segment descriptor.
    pub scratch: Option<ScratchSetup>,
    /// Dispatch packet VA; required when the kernel enables ENABLE_SGPR_DISPATCH_PTR.
    pub dispatch_ptr: Option<u64>,
}

/// The patch points of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecPatch {
    pub dims: LaunchDimsPatch,
    /// Absent when the kernel does not enable the kernarg segment pointer.
    pub kernarg: Option<KernargPtrPatch>,
    /// Present when the kernel enables the dispatch pointer.
    pub dispatch_ptr: Option<DispatchPtrPatch>,
}

/// COMPUTE_PGM_RSRC1.PRIV.
const RSRC1_PRIV: u32 = 1 << 20;
/// COMPUTE_PGM_RSRC2.USER_SGPR (bits 5:1) and LDS_SIZE (bits 23:15).
const RSRC2_USER_SGPR_SHIFT: u32 = 1;
const RSRC2_LDS_SHIFT: u32 = 15;
const RSRC2_LDS_MASK: u32 = 0x1FF;

/// Inputs rawgrad never provides: a kernel enabling any of them is refused.
const UNPROVIDED: KernelCodeProperties = KernelCodeProperties::ENABLE_SGPR_QUEUE_PTR
    .union(KernelCodeProperties::ENABLE_SGPR_DISPATCH_ID)
    .union(KernelCodeProperties::ENABLE_SGPR_FLAT_SCRATCH_INIT)
    .union(KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE);

/// The user SGPR values of a launch in HSA order, with the positions (inside `values`) of the
/// dispatch pointer and kernarg pointer pairs.
struct UserSgprs {
    values: Vec<u32>,
    dispatch_ptr: Option<usize>,
    kernarg: Option<usize>,
}

fn user_sgprs(t: &GfxTarget, prg: &ExecProgram, args: &ExecArgs) -> Result<UserSgprs> {
    let Some(props) = KernelCodeProperties::from_bits(prg.kernel_code_properties) else {
        bail!(
            InvalidArgument,
            "exec: kernel_code_properties {:#x} has bits rawgrad does not know",
            prg.kernel_code_properties
        )
    };
    ensure!(
        !props.intersects(UNPROVIDED),
        InvalidArgument,
        "exec: kernel enables {:?}, which rawgrad does not provide (compile with the IR optimizer)",
        props.intersection(UNPROVIDED)
    );
    ensure!(
        prg.kernarg_preload == 0,
        InvalidArgument,
        "exec: kernel expects kernarg preload ({:#x})",
        prg.kernarg_preload
    );
    let mut u = UserSgprs {
        values: Vec::with_capacity(8),
        dispatch_ptr: None,
        kernarg: None,
    };
    if props.contains(KernelCodeProperties::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER) {
        let Some(s) = args.scratch else {
            bail!(
                InvalidArgument,
                "exec: kernel reads a private segment descriptor but no scratch was given"
            )
        };
        let [lo, hi] = addr_dwords("exec scratch", s.va, 256)?;
        // Word 1 bit 31: swizzle enable.
        u.values
            .extend_from_slice(&[lo, hi | 1 << 31, 0xFFFF_FFFF, t.private_segment_word3]);
    }
    if props.contains(KernelCodeProperties::ENABLE_SGPR_DISPATCH_PTR) {
        let Some(dp) = args.dispatch_ptr else {
            bail!(
                InvalidArgument,
                "exec: kernel enables the dispatch pointer but no dispatch packet was given"
            )
        };
        u.dispatch_ptr = Some(u.values.len());
        u.values
            .extend_from_slice(&addr_dwords("exec dispatch packet", dp, 8)?);
    }
    if props.contains(KernelCodeProperties::ENABLE_SGPR_KERNARG_SEGMENT_PTR) {
        u.kernarg = Some(u.values.len());
        u.values
            .extend_from_slice(&addr_dwords("exec kernargs", args.kernargs, 16)?);
    }
    let declared = (prg.rsrc2 >> RSRC2_USER_SGPR_SHIFT) & 0x1F;
    ensure!(
        u.values.len() as u32 <= declared,
        InvalidArgument,
        "exec: {} user SGPRs to load but RSRC2.USER_SGPR declares {declared}",
        u.values.len()
    );
    Ok(u)
}

/// RSRC1/RSRC2 as launched: the gfx11 PRIV workaround and the LDS size ORed in.
fn launch_rsrc(t: &GfxTarget, prg: &ExecProgram) -> Result<(u32, u32)> {
    ensure!(
        prg.group_segment_size <= t.lds_max_bytes,
        InvalidArgument,
        "exec: kernel uses {} bytes of LDS, {} allows {}",
        prg.group_segment_size,
        t.name,
        t.lds_max_bytes
    );
    let granules = prg.group_segment_size.div_ceil(t.lds_granule_bytes);
    ensure!(
        granules <= RSRC2_LDS_MASK,
        InvalidArgument,
        "exec: LDS of {granules} granules exceeds RSRC2.LDS_SIZE"
    );
    let rsrc1 = if t.rsrc1_priv_cwsr_workaround {
        prg.rsrc1 | RSRC1_PRIV
    } else {
        prg.rsrc1
    };
    Ok((rsrc1, prg.rsrc2 | granules << RSRC2_LDS_SHIFT))
}

/// A 256-byte aligned address as the two dwords of an `address >> 8` register pair.
fn shifted8(what: &str, va: u64) -> Result<[u32; 2]> {
    addr_dwords(what, va, 256)?;
    let a = va >> 8;
    Ok([a as u32, (a >> 32) as u32])
}

/// The initiator for the kernel's wave size.
fn initiator(t: &GfxTarget, prg: &ExecProgram) -> Result<DispatchInitiator> {
    let wave32 =
        prg.kernel_code_properties & KernelCodeProperties::ENABLE_WAVEFRONT_SIZE32.bits() != 0;
    ensure!(
        !wave32 || t.wave32,
        InvalidArgument,
        "exec: wave32 kernel on {}, which only runs wave64",
        t.name
    );
    let mut init = DispatchInitiator::COMPUTE_SHADER_EN | DispatchInitiator::FORCE_START_AT_000;
    init.set(DispatchInitiator::CS_W32_EN, wave32);
    Ok(init)
}

/// The cache actions of a launch: everything but the instruction cache and L2 (tinygrad `_exec`).
pub const EXEC_ACQUIRE: GcrCntl = GcrCntl::GLM_WB
    .union(GcrCntl::GLM_INV)
    .union(GcrCntl::GLK_WB)
    .union(GcrCntl::GLK_INV)
    .union(GcrCntl::GLV_INV)
    .union(GcrCntl::GL1_INV);

/// The cache actions of a memory barrier: all caches, L2 written back and invalidated.
pub const BARRIER_ACQUIRE: GcrCntl = EXEC_ACQUIRE
    .union(GcrCntl::GLI_INV)
    .union(GcrCntl::GL2_INV)
    .union(GcrCntl::GL2_WB);

/// The release actions of a signal write (tinygrad 0.9.2 `signal`).
pub const SIGNAL_RELEASE: ReleaseGcr = ReleaseGcr::GLV_INV
    .union(ReleaseGcr::GL1_INV)
    .union(ReleaseGcr::GL2_INV)
    .union(ReleaseGcr::GLM_WB)
    .union(ReleaseGcr::GLM_INV)
    .union(ReleaseGcr::GL2_WB)
    .union(ReleaseGcr::SEQ);

/// Every compute unit enabled.
const ALL_CUS: u32 = 0xFFFF_FFFF;

impl Pm4Buf {
    /// One kernel launch: ACQUIRE_MEM, the SET_SH_REG block, DISPATCH_DIRECT and
    /// EVENT_WRITE(CS_PARTIAL_FLUSH) so later packets wait for the dispatch (tinygrad `ops_amd.py`
    /// `_exec`).
    pub fn exec(&mut self, prg: &ExecProgram, args: &ExecArgs) -> Result<ExecPatch> {
        self.all_or_nothing(|b| b.exec_packets(prg, args))
    }

    fn exec_packets(&mut self, prg: &ExecProgram, args: &ExecArgs) -> Result<ExecPatch> {
        let t = self.target();
        let [pgm_lo, pgm_hi] = shifted8("exec program", prg.code_addr)?;
        let user = user_sgprs(t, prg, args)?;
        let (rsrc1, rsrc2) = launch_rsrc(t, prg)?;
        let init = initiator(t, prg)?;
        check_global(args.global)?;
        check_local(args.local)?;
        ensure!(
            args.scratch.is_some() || prg.private_segment_size == 0,
            InvalidArgument,
            "exec: kernel needs {} scratch bytes per lane but no scratch was given",
            prg.private_segment_size
        );
        let (scratch_va, tmpring) = args.scratch.map_or((0, 0), |s| (s.va, s.tmpring_size));
        let [sc_lo, sc_hi] = shifted8("exec scratch", scratch_va)?;

        self.acquire_mem(EXEC_ACQUIRE)?;
        match (t.sh.dispatch_pkt_addr, t.sh.dispatch_scratch_base) {
            (true, true) => {
                self.set_sh_reg(ShReg::COMPUTE_PGM_LO, &[pgm_lo, pgm_hi, 0, 0, sc_lo, sc_hi])?
            }
            (_, scratch_base) => {
                self.set_sh_reg(ShReg::COMPUTE_PGM_LO, &[pgm_lo, pgm_hi])?;
                if scratch_base {
                    self.set_sh_reg(ShReg::COMPUTE_DISPATCH_SCRATCH_BASE_LO, &[sc_lo, sc_hi])?;
                }
            }
        }
        self.set_sh_reg(ShReg::COMPUTE_PGM_RSRC1, &[rsrc1, rsrc2])?;
        self.set_sh_reg(ShReg::COMPUTE_PGM_RSRC3, &[prg.rsrc3])?;
        self.set_sh_reg(ShReg::COMPUTE_TMPRING_SIZE, &[tmpring])?;
        self.set_sh_reg(ShReg::COMPUTE_RESTART_X, &[0, 0, 0])?;
        self.set_sh_reg(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE0, &[ALL_CUS, ALL_CUS])?;
        self.set_sh_reg(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE2, &[ALL_CUS, ALL_CUS])?;
        if t.sh.static_thread_mgmt_se4_7 {
            self.set_sh_reg(ShReg::COMPUTE_STATIC_THREAD_MGMT_SE4, &[ALL_CUS; 4])?;
        }
        let user_pos = if user.values.is_empty() {
            0
        } else {
            self.set_sh_reg_at(ShReg::COMPUTE_USER_DATA_0, &user.values)?
        };
        let [lx, ly, lz] = args.local;
        let start_pos = self.set_sh_reg_at(ShReg::COMPUTE_START_X, &[0, 0, 0, lx, ly, lz, 0, 0])?;
        self.set_sh_reg(ShReg::COMPUTE_RESOURCE_LIMITS, &[0])?;
        let global = self.dispatch_direct(args.global, init)?;
        self.event_write(EventType::CS_PARTIAL_FLUSH, EventIndex::PARTIAL_FLUSH)?;
        Ok(ExecPatch {
            dims: LaunchDimsPatch {
                global,
                local: LocalSizePatch::at(start_pos + 3),
            },
            kernarg: user.kernarg.map(|i| KernargPtrPatch::at(user_pos + i)),
            dispatch_ptr: user
                .dispatch_ptr
                .map(|i| DispatchPtrPatch::at(user_pos + i)),
        })
    }

    /// Signal: RELEASE_MEM writing the 32-bit `value` to `addr` at end of pipe after writing back
    /// and invalidating the caches; with an `event`, a second RELEASE_MEM writes the event id to
    /// its mailbox and interrupts with ctxid = event id (tinygrad `ops_amd.py` `_signal`).
    pub fn signal(
        &mut self,
        addr: u64,
        value: u64,
        event: Option<SignalEvent>,
    ) -> Result<SignalPatch> {
        self.all_or_nothing(|b| b.signal_packets(addr, value, event))
    }

    fn signal_packets(
        &mut self,
        addr: u64,
        value: u64,
        event: Option<SignalEvent>,
    ) -> Result<SignalPatch> {
        let value = value_dword("signal", value)?;
        let pos = self.release_mem_at(&ReleaseMem {
            event: EventType::CACHE_FLUSH_AND_INV_TS_EVENT,
            event_index: EventIndex::END_OF_PIPE,
            cache: SIGNAL_RELEASE,
            dst_sel: DstSel::MEMORY_CONTROLLER,
            int_sel: IntSel::NONE,
            data_sel: DataSel::VALUE_32BIT,
            addr,
            data: u64::from(value),
            int_ctxid: 0,
        })?;
        let event = match event {
            None => None,
            Some(ev) => {
                addr_dwords("signal mailbox (8-byte event slot)", ev.mailbox, 8)?;
                let mb = self.release_mem_at(&ReleaseMem {
                    event: EventType::CACHE_FLUSH_AND_INV_TS_EVENT,
                    event_index: EventIndex::END_OF_PIPE,
                    cache: ReleaseGcr::empty(),
                    dst_sel: DstSel::MEMORY_CONTROLLER,
                    int_sel: IntSel::SEND_INT_ON_CONFIRM,
                    data_sel: DataSel::VALUE_32BIT,
                    addr: ev.mailbox,
                    data: u64::from(ev.event_id),
                    int_ctxid: ev.event_id,
                })?;
                Some(MailboxPatch::at(mb.addr, [mb.data, mb.ctxid], 32))
            }
        };
        Ok(SignalPatch {
            addr: SignalAddrPatch::at(pos.addr),
            value: SignalValuePatch::at(pos.data),
            event,
        })
    }

    /// Wait until the dword at `addr` is `>= value` (WAIT_REG_MEM GEQ on memory, interval 4).
    pub fn wait(&mut self, addr: u64, value: u64) -> Result<WaitPatch> {
        let reference = value_dword("wait", value)?;
        let pos = self.wait_reg_mem_at(&WaitRegMem {
            function: CompareFunction::GEQ,
            operation: WaitOperation::WAIT,
            target: WaitTarget::Memory { addr },
            reference,
            mask: 0xFFFF_FFFF,
            poll_interval: 4,
        })?;
        Ok(WaitPatch {
            addr: WaitAddrPatch::at(pos + 2),
            value: WaitValuePatch::at(pos + 4),
        })
    }

    /// Timestamp: RELEASE_MEM writing the 64-bit GPU clock counter to `addr` at end of pipe.
    pub fn timestamp(&mut self, addr: u64) -> Result<TimestampAddrPatch> {
        let pos = self.release_mem_at(&ReleaseMem {
            event: EventType::CACHE_FLUSH_AND_INV_TS_EVENT,
            event_index: EventIndex::END_OF_PIPE,
            cache: ReleaseGcr::empty(),
            dst_sel: DstSel::MEMORY_CONTROLLER,
            int_sel: IntSel::NONE,
            data_sel: DataSel::GPU_CLOCK_COUNTER,
            addr,
            data: 0,
            int_ctxid: 0,
        })?;
        Ok(TimestampAddrPatch::at(pos.addr))
    }

    /// Memory barrier: HDP flush (the CP writes HDP_FLUSH_REQ and polls HDP_FLUSH_DONE) so CPU
    /// writes through the BAR reach VRAM, then an ACQUIRE_MEM over every cache.
    pub fn memory_barrier(&mut self) -> Result<()> {
        self.all_or_nothing(|b| b.memory_barrier_packets())
    }

    fn memory_barrier_packets(&mut self) -> Result<()> {
        let t = self.target();
        let Some(hdp) = t.hdp_flush else {
            bail!(
                InvalidArgument,
                "memory_barrier: the HDP flush registers of {} are not in the target table",
                t.name
            )
        };
        self.wait_reg_mem(&WaitRegMem {
            function: CompareFunction::EQ,
            operation: WaitOperation::WRITE_WAIT,
            target: WaitTarget::Registers {
                write: hdp.req,
                poll: hdp.done,
            },
            reference: 0xFFFF_FFFF,
            mask: 0xFFFF_FFFF,
            poll_interval: 0x20,
        })?;
        self.acquire_mem(BARRIER_ACQUIRE)
    }
}
