//! Faults through the emulator: a hung queue, a kernel writing to an unmapped address, a copy to
//! an unmapped address, and kernarg mismatches. Each must produce an error naming the cause within
//! the (short) timeout, leak nothing, and leave the device usable.

use super::*;
use crate::hcq::{HcqBackend, HwComputeQueue, HwQueue};
use crate::helpers::Context;
use crate::mockgpu::amdgpu::object::mock_code_object;
use crate::runtime::amd::program::AmdProgram;
use crate::runtime::amd::queue::AmdComputeQueue;
use crate::runtime::amd::AmdSignal;
use crate::Error;

/// A device that already did one copy (so its staging buffer exists), and its allocation count.
pub(super) fn warm() -> (Arc<AmdDevice>, EmuDriver, usize) {
    let (dev, emu) = one_gpu();
    let (a, b) = alloc(&dev, 64);
    a.copyin(&b, &[0u8; 64]).unwrap();
    drop(b);
    a.synchronize().unwrap();
    let n = emu.allocation_count();
    (dev, emu, n)
}

/// After a failure: nothing pending, both queues alive (recreated), no allocation beyond
/// `baseline` once the test's buffers are gone, and a normal copy and kernel work again.
pub(super) fn check_recovered(dev: &Arc<AmdDevice>, emu: &EmuDriver, baseline: usize) {
    assert_eq!(dev.pending_count(), 0, "pending work dropped");
    dev.synchronize().unwrap();
    assert_eq!(emu.allocation_count(), baseline, "no leaked buffer objects");
    assert_eq!(
        emu.queues().len(),
        2,
        "the compute and SDMA queues were recreated, not leaked"
    );
    let (a, b) = alloc(dev, 64);
    let data: Vec<u8> = (0..64).collect();
    a.copyin(&b, &data).unwrap();
    let mut out = vec![0u8; 64];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out, data, "copies work after the recovery");
    let prg = load(dev, "E_after", &add_uops(1, 8, dtypes::float32));
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 8])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 8])).unwrap();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), true)
        .unwrap();
    let mut o = vec![0u8; 32];
    a.copyout(&mut o, &bufs[0]).unwrap();
    assert_eq!(f32s(&o), vec![3.0f32; 8], "kernels work after the recovery");
}

/// A run in progress that cannot finish: the compute queue waits on a signal nobody raises,
/// kernel `name` (out = a + b, 8 floats) is queued behind it. Returns what must outlive the run.
pub(super) fn stuck_run(
    dev: &Arc<AmdDevice>,
    name: &str,
) -> (AmdSignal, AmdComputeQueue, Arc<dyn Program>, Vec<RawBuf>) {
    let gate = dev.new_signal(0).unwrap();
    let mut q = dev.backend().compute_queue();
    q.wait(&gate, 1).unwrap();
    q.submit(dev.backend()).unwrap();
    let prg = load(dev, name, &add_uops(1, 8, dtypes::float32));
    let (a, _) = alloc(dev, 32);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(32, &BufferOptions::default()).unwrap())
        .collect();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([8, 1, 1]), false)
        .unwrap();
    (gate, q, prg, bufs)
}

#[test]
fn hung_queue_times_out_with_a_report() {
    let (dev, emu, baseline) = warm();
    let (never, q, prg, bufs) = stuck_run(&dev, "E_stuck");
    let e = {
        // Short timeout for the wait that must fail only (the rest runs with the default).
        let _t = Context::new(&[("HCQDEV_WAIT_TIMEOUT_MS", 300)]);
        dev.synchronize().unwrap_err()
    };
    let Error::Timeout(m) = &e else {
        panic!("expected a timeout, got {e}")
    };
    for needle in [
        "synchronize",
        "waited",
        "pending work: v",
        "exec E_stuck",
        "compute queue",
        "wptr",
        "rptr",
        "software GPU",
        "blocked on a wait",
        "WAIT_REG_MEM",
        "queues were reset",
    ] {
        assert!(m.contains(needle), "report lacks {needle:?}: {m}");
    }
    drop((bufs, prg, q, never));
    check_recovered(&dev, &emu, baseline);
}

/// data0[i + 10^9] = i: a store about 4 GB past the buffer, into unmapped GPU VA.
fn oob_uops() -> Vec<crate::codegen::uops::UOp> {
    let dt = dtypes::int32;
    let d0 = UOp::define_global(dt, 0, true);
    let i = UOp::special(0, "lidx0", 4);
    let far = i.add(1_000_000_000i64);
    linearize(&[UOp::store(&d0, &far, &i)], None, true).unwrap()
}

#[test]
fn kernel_writing_to_an_unmapped_address_faults() {
    let (dev, emu, baseline) = warm();
    let prg = load(&dev, "E_oob", &oob_uops());
    let (a, b) = alloc(&dev, 16);
    let bad = b.addr + 4_000_000_000;
    let e = prg
        .call(
            std::slice::from_ref(&b),
            &[],
            Some([1, 1, 1]),
            Some([4, 1, 1]),
            true,
        )
        .unwrap_err();
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    for needle in [
        "E_oob".to_string(),
        format!("{bad:#x}"),
        format!("page fault at VA {:#x}", bad & !0xFFF),
        "unmapped".to_string(),
        "program E_oob".to_string(),
    ] {
        assert!(m.contains(&needle), "report lacks {needle:?}: {m}");
    }
    drop((a, b, prg));
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn copy_to_an_unmapped_address_faults() {
    let (dev, emu, baseline) = warm();
    let (a, b) = alloc(&dev, 4096);
    let bogus = RawBuf {
        addr: 0x10_0000_0000,
        size: 4096,
        owner: b.owner.clone(),
    };
    a.transfer(&bogus, &b, 4096).unwrap();
    let e = a.synchronize().unwrap_err();
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    for needle in [
        "0x1000000000",
        "copy 4096 bytes",
        "SDMA queue",
        "COPY_LINEAR",
    ] {
        assert!(m.contains(needle), "report lacks {needle:?}: {m}");
    }
    drop((a, b, bogus));
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn kernarg_mismatches_are_refused_on_both_sides() {
    let (dev, emu, baseline) = warm();
    let (a, b) = alloc(&dev, 64);
    let bufs = vec![b.clone(), b.clone(), b.clone()];
    // Host side: the descriptor says 24 bytes (3 buffers), the call passes 2.
    let prg = load(&dev, "E_args", &add_uops(1, 4, dtypes::float32));
    let e = prg
        .call(&bufs[..2], &[], Some([1, 1, 1]), Some([4, 1, 1]), false)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("kernarg size mismatch")),
        "{e}"
    );
    // Device side: a code object whose descriptor and blob claim 16 bytes while its UOps take
    // three buffers (24): the host check passes with two buffers, the GPU refuses.
    let text = crate::codegen::uop_serial::serialize(&add_uops(1, 4, dtypes::float32)).unwrap();
    let obj = mock_code_object(dev.backend().target(), "E_lie", &text, Some(16)).unwrap();
    let lie = Arc::new(AmdProgram::load(dev.backend(), "E_lie", &obj).unwrap());
    let e = dev
        .call(&lie, &bufs[..2], &[], [1, 1, 1], [4, 1, 1], true)
        .unwrap_err();
    let Error::Fault(m) = &e else {
        panic!("expected a fault, got {e}")
    };
    assert!(
        m.contains("kernarg size mismatch") && m.contains("E_lie") && m.contains("3 buffers"),
        "{m}"
    );
    drop((a, b, bufs, prg, lie));
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn exec_refuses_a_kernel_enabling_inputs_we_do_not_fill() {
    let (dev, _emu) = one_gpu();
    let text = crate::codegen::uop_serial::serialize(&add_uops(1, 4, dtypes::float32)).unwrap();
    let t = dev.backend().target();
    let mut kd = crate::mockgpu::amdgpu::object::mock_descriptor(t, 24, 0);
    kd.kernel_code_properties |= 1 << 4; // ENABLE_SGPR_DISPATCH_ID
    let obj = crate::hw::amd::elf::write_amdgpu_elf(&crate::hw::amd::elf::AmdgpuElf {
        name: "E_id",
        e_flags: t.elf_mach,
        relocatable: false,
        descriptor: kd.to_bytes(),
        text: text.as_bytes(),
    });
    let e = AmdProgram::load(dev.backend(), "E_id", &obj).unwrap_err();
    assert!(e.message().contains("DISPATCH_ID"), "{e}");
    let mut q = dev.backend().compute_queue();
    assert!(q.memory_barrier().is_ok());
}
