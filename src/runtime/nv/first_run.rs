//! The first run on an NVIDIA host, step by step with a status line each, as
//! `examples/nv_first_run.rs` and `tools/nv-first-run/run.sh` drive it (and as a test drives it
//! on the emulator): the bring-up of `NV:0` (every bring-up step logs itself with
//! `NV_BRINGUP_LOG=1`), the GR info indices 0x07/0x09/0x0D/0x14/0x17/0x20 and the local memory
//! sized from them, both channels' USERD GPGet/GPPut as read before the first submit, a host
//! semaphore release with no engine work (the CPU sees the value), a copy-engine copy of a small
//! buffer, one kernel that writes a constant through its one argument (with the arch's launch
//! actions tried in order inside this process: Hopper 3, then 9, then 0xA, the failed wait
//! resetting the queues in between), a kernel with three arguments at the arch's cbuf0 parameter
//! base (0x210 on Hopper), and one queue reset with the VA balance checked (the old channels
//! unregistered from UVM and their ranges returned).
//!
//! Kernels ([`FirstRunKernels`]): on hardware the precompiled cubins `fill_sm<NN>.cubin` and
//! `add_n_sm<NN>.cubin` from a fixtures folder (ptxas outputs of `tests/fixtures/cubin/*.ptx`); on
//! the emulator the same kernels built from UOps by the caller's compiler (the emulator's mock
//! cubin writer: this module does not name the emulator).
//!
//! Not guaranteed: a hang inside the driver itself (an ioctl that never returns) is left to the
//! caller's `timeout`; with `NV_PCAS_ACTION` set only that action is tried.

use std::path::Path;
use std::sync::Arc;

use super::bringup::GrInfo;
use super::{open_nv_device, NvDevice, NvProcess, NvRuntime};
use crate::codegen::uop_serial::serialize;
use crate::codegen::uopgraph::linearize;
use crate::codegen::uops::UOp;
use crate::device::{Allocator, BufferOptions, Program, RawBuf, Runtime};
use crate::driver::Driver;
use crate::dtype::dtypes;
use crate::hcq::{HcqAllocator, HcqBackend, HwQueue};
use crate::helpers::getenv;
use crate::hw::nv::arch::{NvArch, PcasAction};
use crate::{bail, ensure, Result};

/// Builds a kernel's library from its name and serialized UOps for an arch and SM.
pub type UopsToLibrary = dyn Fn(&str, &str, &NvArch, u32) -> Result<Vec<u8>>;

/// Where the first run's kernels come from.
#[derive(Clone, Copy)]
pub enum FirstRunKernels<'a> {
    /// `fill_sm<NN>.cubin` and `add_n_sm<NN>.cubin` from this folder.
    Fixtures(&'a Path),
    /// A library built from a kernel's name and serialized UOps for the device's arch and SM
    /// (under `MOCKGPU=1`: `mockgpu::nvgpu::compiler::mock_cubin`).
    FromUops(&'a UopsToLibrary),
}

/// The constant the fill kernel writes.
pub const FILL_VALUE: u32 = 0xC0FFEE;

fn status(name: &str, r: &Result<String>) {
    match r {
        Ok(d) => println!("[first-run] {name:<34} ok   {d}"),
        Err(e) => println!("[first-run] {name:<34} FAIL {e}"),
    }
}

fn run_step(name: &str, f: impl FnOnce() -> Result<String>) -> Result<()> {
    let r = f();
    status(name, &r);
    r.map(|_| ())
        .map_err(|e| e.with_context(&format!("first run step {name}")))
}

/// out[i] = FILL_VALUE, i = gidx0 * local + lidx0 (the UOps of fill.ptx).
fn fill_uops(groups: i64, local: i64) -> Result<Vec<UOp>> {
    let dt = dtypes::uint32;
    let d0 = UOp::define_global(dt, 0, true);
    let i = UOp::special(0, "gidx0", groups)
        .mul(local)
        .add(UOp::special(0, "lidx0", local));
    let v = UOp::cnst(dt, i64::from(FILL_VALUE));
    linearize(&[UOp::store(&d0, &i, &v)], None, true)
}

/// out[i] = a[i] + n (the UOps of add_n.ptx).
fn add_n_uops(groups: i64, local: i64) -> Result<Vec<UOp>> {
    let dt = dtypes::uint32;
    let d0 = UOp::define_global(dt, 0, true);
    let d1 = UOp::define_global(dt, 1, false);
    let n = UOp::define_var("n", 0, 1 << 30);
    let i = UOp::special(0, "gidx0", groups)
        .mul(local)
        .add(UOp::special(0, "lidx0", local));
    let v = UOp::load(&d1, &i, dt).add(n.cast(dt));
    linearize(&[UOp::store(&d0, &i, &v)], None, true)
}

/// Where the first run's kernels come from.
#[derive(Clone, Copy)]
pub enum Kernels<'a> {
    /// The precompiled cubins `fill_sm<NN>.cubin` and `add_n_sm<NN>.cubin` in this folder
    /// (hardware).
    Fixtures(&'a Path),
    /// Built from the kernels' UOps by this function of (name, serialized UOps, arch, SM) (the
    /// emulator's mock cubins, handed in by `runtime/builtin.rs`).
    Built(fn(&str, &str, &NvArch, u32) -> Result<Vec<u8>>),
}

/// Kernel `name`: the fixture cubin for the device's SM, or a cubin built from `uops`.
fn kernel(
    dev: &Arc<NvDevice>,
    kernels: Kernels<'_>,
    name: &str,
    uops: Result<Vec<UOp>>,
) -> Result<Box<dyn Program>> {
    let b = dev.backend();
    let lib = match kernels {
        Kernels::Fixtures(dir) => {
            let path = dir.join(format!("{name}_sm{}.cubin", b.sm()));
            std::fs::read(&path)
                .map_err(|e| crate::Error::Io(format!("reading {}: {e}", path.display())))?
        }
        Kernels::Built(build) => build(name, &serialize(&uops?)?, b.classes().arch, b.sm())?,
    };
    NvRuntime::new(dev.clone()).load(name, &lib)
}

fn read_u32s(a: &HcqAllocator<super::NvBackend>, b: &RawBuf, n: usize) -> Result<Vec<u32>> {
    let mut out = vec![0u8; 4 * n];
    a.copyout(&mut out, b)?;
    Ok(out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// What the first run found.
#[derive(Debug, Clone)]
pub struct FirstRunReport {
    /// The driver version string.
    pub driver: String,
    pub gr: GrInfo,
    /// (GPGet, GPPut) of the compute and DMA channels' USERD before the first submit.
    pub first_userd: [(u32, u32); 2],
    /// The launch action the fill kernel ran with.
    pub launch_action: PcasAction,
    /// The actions tried before it, with why each failed.
    pub failed_actions: Vec<(PcasAction, String)>,
    /// Free bytes of (the low window, the GPU-only region) before and after the queue reset.
    pub va_before_reset: (u64, u64),
    pub va_after_reset: (u64, u64),
}

/// Steps 1-20 of the bring-up: the process, then `NV:0`; then what it read (GR info, USERD).
fn open_steps(drv: Arc<dyn Driver>) -> Result<Arc<NvDevice>> {
    let mut proc = None;
    run_step("NV process (steps 1-5)", || {
        let p = NvProcess::new(drv)?;
        let d = format!(
            "driver {} (layouts of family {}, {} GPU(s))",
            p.ctl().version(),
            p.family(),
            p.cards().len()
        );
        proc = Some(p);
        Ok(d)
    })?;
    let Some(proc) = proc else {
        bail!(Internal, "first run: no process")
    };
    let mut dev = None;
    run_step("open NV:0 (steps 6-20)", || {
        let d = open_nv_device(&proc, 0, "NV")?;
        let b = d.backend();
        let s = format!(
            "{} sm_{} QMD {}, launch action {} ({})",
            b.classes().arch.compute_class_name,
            b.sm(),
            b.classes().arch.qmd_version.name(),
            b.pcas_action() as u32,
            b.pcas_action().name()
        );
        dev = Some(d);
        Ok(s)
    })?;
    let dev = dev.ok_or_else(|| crate::Error::Internal("first run: no device".into()))?;
    let b = dev.backend();
    run_step("GR info", || Ok(b.gr().describe()))?;
    run_step("local memory", || {
        let (per_thread, per_tpc, total) = b.local_memory();
        Ok(format!(
            "{per_thread:#x} bytes/thread, {per_tpc:#x} bytes/TPC x {} TPC slots ({} SMs/TPC) = {:.1} MiB",
            b.gr().tpc_slots(),
            b.gr().sms_per_tpc(),
            total as f64 / f64::from(1u32 << 20)
        ))
    })?;
    run_step("USERD before the first submit", || {
        let [(cg, cp), (dg, dp)] = b.first_userd();
        Ok(format!(
            "compute GPGet {cg} GPPut {cp}, DMA GPGet {dg} GPPut {dp} (zeroed before the channels existed)"
        ))
    })?;
    Ok(dev)
}

/// A host semaphore release on the compute channel, no engine work; the CPU reads the value.
fn semaphore_step(dev: &Arc<NvDevice>) -> Result<String> {
    let b = dev.backend();
    let sig = b.new_signal(0, false)?;
    let mut q = b.compute_queue();
    q.signal(&sig, 0x1234)?;
    q.submit(b)?;
    b.spin_for(&sig, 0x1234, "host semaphore release")?;
    Ok("the CPU sees 0x1234".into())
}

/// Staging in, a copy-engine copy between two VRAM buffers, staging out.
fn copy_step(a: &HcqAllocator<super::NvBackend>) -> Result<String> {
    let (x, y) = (
        a.alloc(4096, &BufferOptions::default())?,
        a.alloc(4096, &BufferOptions::default())?,
    );
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    a.copyin(&x, &data)?;
    a.transfer(&y, &x, 4096)?;
    let mut out = vec![0u8; 4096];
    a.copyout(&mut out, &y)?;
    ensure!(out == data, Device, "the copied bytes differ");
    Ok("staging in, copy, staging out: equal".into())
}

/// The fill kernel: 256 threads write [`FILL_VALUE`] through their one pointer argument.
fn fill_step(
    dev: &Arc<NvDevice>,
    a: &HcqAllocator<super::NvBackend>,
    fx: Kernels<'_>,
) -> Result<String> {
    let prg = kernel(dev, fx, "fill", fill_uops(4, 64))?;
    let out = a.alloc(4 * 256, &BufferOptions::default())?;
    a.copyin(&out, &[0u8; 1024])?;
    prg.call(
        std::slice::from_ref(&out),
        &[],
        Some([4, 1, 1]),
        Some([64, 1, 1]),
        true,
    )?;
    let got = read_u32s(a, &out, 256)?;
    ensure!(
        got.iter().all(|&v| v == FILL_VALUE),
        Device,
        "fill wrote {:#x?}.. (want {FILL_VALUE:#x})",
        &got[..4]
    );
    Ok(format!("256 x {FILL_VALUE:#x}"))
}

/// The add_n kernel: out = a + n, three parameters from the cbuf0 parameter base.
fn add_n_step(
    dev: &Arc<NvDevice>,
    a: &HcqAllocator<super::NvBackend>,
    fx: Kernels<'_>,
) -> Result<String> {
    let prg = kernel(dev, fx, "add_n", add_n_uops(2, 128))?;
    let (out, inp) = (
        a.alloc(4 * 256, &BufferOptions::default())?,
        a.alloc(4 * 256, &BufferOptions::default())?,
    );
    let x: Vec<u8> = (0..256u32).flat_map(|i| (i * 3).to_le_bytes()).collect();
    a.copyin(&inp, &x)?;
    prg.call(
        &[out.clone(), inp],
        &[1000],
        Some([2, 1, 1]),
        Some([128, 1, 1]),
        true,
    )?;
    let got = read_u32s(a, &out, 256)?;
    let want: Vec<u32> = (0..256u32).map(|i| i * 3 + 1000).collect();
    ensure!(got == want, Device, "add_n wrote {:?}..", &got[..4]);
    let base = dev.backend().classes().arch.cbuf0.param_base;
    Ok(format!("out = a + 1000, parameters at cbuf0 {base:#x}"))
}

/// The fill kernel with each launch action in turn (the device's first, then the arch's
/// fallbacks), until one writes the constant; a failed wait already reset the queues.
fn launch_action_steps(
    dev: &Arc<NvDevice>,
    a: &HcqAllocator<super::NvBackend>,
    fx: Kernels<'_>,
) -> Result<(PcasAction, Vec<(PcasAction, String)>)> {
    let b = dev.backend();
    let pinned = getenv("NV_PCAS_ACTION", -1) >= 0;
    let mut actions = vec![b.pcas_action()];
    if !pinned {
        for f in b.classes().arch.launch_actions() {
            if !actions.contains(&f) {
                actions.push(f);
            }
        }
    }
    let mut failed = Vec::new();
    for action in actions {
        b.set_pcas_action(action)?;
        let name = format!(
            "kernel writing a constant (PCAS action {:#x} {})",
            action as u32,
            action.name()
        );
        let r = fill_step(dev, a, fx);
        status(&name, &r);
        match r {
            Ok(_) => return Ok((action, failed)),
            Err(e) => failed.push((action, e.message().to_string())),
        }
    }
    let tried: Vec<String> = failed
        .iter()
        .map(|(a, e)| format!("{:#x}: {e}", *a as u32))
        .collect();
    bail!(
        Device,
        "no launch action ran the fill kernel ({})",
        tried.join("; ")
    )
}

/// One queue reset on an idle device: the VA balance must come back exactly (the old channels
/// unregistered from UVM and every range returned), no deferred error, and the new channels
/// answer a semaphore release.
fn reset_step(dev: &Arc<NvDevice>) -> Result<((u64, u64), (u64, u64))> {
    dev.synchronize()?;
    let b = dev.backend();
    let p = b.process();
    let before = p.va_free_bytes();
    b.reset_queues()?;
    let after = p.va_free_bytes();
    let errs = p.take_errors();
    ensure!(
        errs.is_empty(),
        Device,
        "the queue reset left errors: {}",
        errs.join("; ")
    );
    ensure!(
        after == before,
        Device,
        "VA balance after the queue reset: low window {:#x} -> {:#x} free, GPU-only {:#x} -> {:#x} free",
        before.0,
        after.0,
        before.1,
        after.1
    );
    semaphore_step(dev)?;
    Ok((before, after))
}

/// Every first-run step on `drv`, with the kernels `kernels` gives.
pub fn first_run(drv: Arc<dyn Driver>, kernels: Kernels<'_>) -> Result<FirstRunReport> {
    let dev = open_steps(drv)?;
    run_step("host semaphore release", || semaphore_step(&dev))?;
    let a = HcqAllocator::new(dev.clone());
    run_step("copy engine copy (4 KiB)", || copy_step(&a))?;
    let mut launch = None;
    run_step("launch action", || {
        let (action, failed) = launch_action_steps(&dev, &a, kernels)?;
        let s = format!(
            "{:#x} {} runs kernels ({} tried before it)",
            action as u32,
            action.name(),
            failed.len()
        );
        launch = Some((action, failed));
        Ok(s)
    })?;
    let Some((launch_action, failed_actions)) = launch else {
        bail!(Internal, "first run: no launch action")
    };
    run_step("kernel with arguments (cbuf0)", || {
        add_n_step(&dev, &a, kernels)
    })?;
    let mut va = None;
    run_step("queue reset (VA balance)", || {
        let (before, after) = reset_step(&dev)?;
        va = Some((before, after));
        Ok(format!(
            "low window {:#x} -> {:#x} free, GPU-only {:#x} -> {:#x} free; the new channels answer",
            before.0, after.0, before.1, after.1
        ))
    })?;
    let Some((va_before_reset, va_after_reset)) = va else {
        bail!(Internal, "first run: no reset")
    };
    run_step("synchronize", || {
        dev.synchronize()?;
        Ok(format!("timeline at {}", dev.timeline_value()))
    })?;
    let b = dev.backend();
    Ok(FirstRunReport {
        driver: b.process().ctl().version().to_string(),
        gr: b.gr(),
        first_userd: b.first_userd(),
        launch_action,
        failed_actions,
        va_before_reset,
        va_after_reset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mockgpu::nvgpu::attach::mock_driver;
    use crate::mockgpu::nvgpu::compiler::mock_cubin;

    use crate::mockgpu::nvgpu::executor::NvUopExecutor;
    use crate::mockgpu::nvgpu::RmNvGpu;
    use crate::mockgpu::{EmuConfig, EmuDriver, EmuNvDevice, EmuNvGpu, NvGpuFactory};

    /// The emulator's kernels: mock cubins of the UOps.
    const MOCK: Kernels<'static> = Kernels::Built(mock_cubin);

    #[test]
    fn first_run_steps_pass_on_the_emulator() {
        for arch in ["hopper", "ada"] {
            let emu = mock_driver(EmuConfig {
                nv_arch: arch.into(),
                ..Default::default()
            })
            .unwrap();
            let r = first_run(Arc::new(emu), MOCK).unwrap();
            assert!(r.failed_actions.is_empty());
            assert_eq!(r.first_userd, [(0, 0), (0, 0)]);
            assert_eq!(r.va_before_reset, r.va_after_reset);
        }
    }

    /// An emulated H200 whose software GPU refuses the PCAS actions `refused`.
    fn refusing_gpu(refused: &'static [u32]) -> EmuDriver {
        let exec = Arc::new(NvUopExecutor::new());
        let factory: NvGpuFactory = Arc::new(move |dev: &EmuNvDevice| {
            let g = RmNvGpu::new(dev, exec.clone());
            if let Ok(gpu) = g.gpu() {
                gpu.refuse_pcas_actions(refused);
            }
            Arc::new(g) as Arc<dyn EmuNvGpu>
        });
        EmuDriver::new(EmuConfig {
            count: 1,
            nv_gpu_factory: Some(factory),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn launch_action_fallbacks_run_inside_one_process() {
        let _t = crate::helpers::Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 2000)]);
        // A GPU that takes neither 3 nor 9: the fill kernel faults twice (each wait resets the
        // queues), then 0xA runs it; the rest of the run uses 0xA.
        let r = first_run(Arc::new(refusing_gpu(&[3, 9])), MOCK).unwrap();
        assert_eq!(
            r.launch_action,
            PcasAction::INVALIDATE_PREFETCH_COPY_SCHEDULE
        );
        let failed: Vec<PcasAction> = r.failed_actions.iter().map(|(a, _)| *a).collect();
        assert_eq!(
            failed,
            vec![
                PcasAction::INVALIDATE_COPY_SCHEDULE,
                PcasAction::PREFETCH_SCHEDULE
            ]
        );
        assert!(
            r.failed_actions[0]
                .1
                .contains("ROBUST_CHANNEL_GR_EXCEPTION"),
            "{}",
            r.failed_actions[0].1
        );
        // A GPU that takes none of them: the run stops at the launch step, naming each try.
        let e = first_run(Arc::new(refusing_gpu(&[3, 9, 10])), MOCK).unwrap_err();
        assert!(
            e.message().contains("first run step launch action")
                && e.message().contains("no launch action ran the fill kernel")
                && e.message().contains("0xa: "),
            "{e}"
        );
    }

    #[test]
    fn fixture_cubins_load_on_the_emulated_h200() {
        // The real sm_90 cubins parse and upload (they cannot run on the software GPU).
        let emu = mock_driver(EmuConfig::default()).unwrap();
        let p = NvProcess::new(Arc::new(emu)).unwrap();
        let dev = open_nv_device(&p, 0, "NV").unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cubin");
        for name in ["fill", "add_n"] {
            let lib = std::fs::read(dir.join(format!("{name}_sm90.cubin"))).unwrap();
            NvRuntime::new(dev.clone()).load(name, &lib).unwrap();
        }
    }
}
