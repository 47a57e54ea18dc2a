//! The driver facts issue 8 found (each checked in NVIDIA/open-gpu-kernel-modules, cited where the
//! runtime and the emulator model it), end to end on the emulator: one mapping context per
//! control fd, the five driver families, UVM_UNREGISTER_CHANNEL before the TSG goes (the queue
//! reset returns every VA range), USERD zeroed before the channels exist on VRAM the driver did
//! not scrub, and local memory sized from LITTER_NUM_SM_PER_TPC.

use super::*;
use crate::hcq::{HcqBackend, HcqBuffer};
use crate::runtime::nv::device::local_sizes;

/// `reset_queues` on an idle device `n` times: every VA range comes back, nothing is deferred.
fn resets_keep_the_va_balance(dev: &Arc<NvDevice>, n: usize) {
    dev.synchronize().unwrap();
    let b = dev.backend();
    let before = b.process().va_free_bytes();
    for _ in 0..n {
        b.reset_queues().unwrap();
    }
    assert_eq!(
        b.process().va_free_bytes(),
        before,
        "the channels' UVM ranges came back"
    );
    assert_eq!(b.process().take_errors(), Vec::<String>::new());
}

#[test]
fn system_memory_buffers_map_through_fresh_control_fds() {
    // The signal page and both error notifiers are system memory: with one mapping context per
    // control fd for its life (nv-usermap.c), mapping them all through the process's control fd
    // stops the bring-up at the first channel with NV_ERR_STATE_IN_USE.
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let opts = BufferOptions {
        cpu_access: true,
        uncached: true,
        ..Default::default()
    };
    let bufs: Vec<_> = (0..4u32).map(|_| b.alloc(0x1000, &opts).unwrap()).collect();
    for (i, buf) in bufs.iter().enumerate() {
        let m = buf.cpu().unwrap();
        m.write_u32(0, 0x5150_0000 + i as u32).unwrap();
    }
    for (i, buf) in bufs.iter().enumerate() {
        assert_eq!(
            buf.cpu().unwrap().read_u32(0).unwrap(),
            0x5150_0000 + i as u32
        );
    }
    // The GPU sees what the CPU wrote: a copy out of system memory.
    run_add(&dev, 2, 16);
}

#[test]
fn every_driver_family_brings_up_runs_and_resets() {
    for (family, version) in [
        ("570", "570.86.16"),
        ("575", "575.64.05"),
        ("580", "580.142"),
        ("590", "590.48.01"),
        ("595", "595.45.04"),
    ] {
        let (p, _emu) = mock_nv(1, "hopper", family);
        assert_eq!(p.family().name(), family);
        assert_eq!(p.ctl().version(), version);
        let dev = open(&p, 0);
        run_add(&dev, 2, 16);
        // 590+: the 16-byte UVM_FREE and 12-byte UVM_UNREGISTER_CHANNEL.
        resets_keep_the_va_balance(&dev, 2);
        run_add(&dev, 2, 16);
    }
}

#[test]
fn queue_resets_unregister_the_channels_and_return_their_va() {
    // Real UVM's uvm_free refuses channel ranges (NV_ERR_INVALID_ADDRESS), so freeing them that
    // way leaked 2 x 64 MiB of the low window per reset; UVM_UNREGISTER_CHANNEL returns them.
    let (dev, emu) = one_gpu();
    resets_keep_the_va_balance(&dev, 3);
    assert_eq!(emu.nv_channels(0).len(), 2, "only the new channels exist");
    run_add(&dev, 2, 16);
}

#[test]
fn unscrubbed_vram_gets_its_userd_zeroed_before_the_channels_exist() {
    // Without scrub-on-free fresh VRAM holds old bytes, and RM does not clear a USERD in FB on a
    // GSP client: a GPGet of 0xA5A5A5A5 would make every submit fail.
    let emu = mock_driver(EmuConfig {
        count: 1,
        nv_scrub: false,
        ..Default::default()
    })
    .unwrap();
    let p = NvProcess::new(Arc::new(emu.clone())).unwrap();
    let dev = open(&p, 0);
    let b = dev.backend();
    // The emulator really did leave the VRAM unscrubbed.
    let opts = BufferOptions {
        cpu_access: true,
        ..Default::default()
    };
    let v = b.alloc(0x1000, &opts).unwrap();
    assert_eq!(v.cpu().unwrap().read_u32(0x10).unwrap(), 0xA5A5_A5A5);
    run_add(&dev, 2, 16);
    resets_keep_the_va_balance(&dev, 1);
    run_add(&dev, 2, 16);
}

#[test]
fn local_memory_is_sized_from_sm_per_tpc() {
    // H200: 64 warps/SM, LITTER_NUM_SM_PER_TPC 2, 8 GPCs x 9 TPCs; 0x240 bytes per thread at
    // open: per TPC round_up(0x4800 x 64 x 2, 0x8000) = 0x240000; x 72 slots = 162 MiB (not the
    // ~5 GiB that SHADER_PIPE_SUB_COUNT, the TPC count, would give as "SMs per TPC").
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let g = b.gr();
    assert_eq!((g.sms_per_tpc(), g.tpc_slots()), (2, 72));
    assert_eq!(b.local_memory(), (0x240, 0x24_0000, 0xA20_0000));
    assert_eq!(local_sizes(&g, 0x240), (0x24_0000, 0xA20_0000));
}

#[test]
fn hopper_launches_with_nvk_s_action_by_default() {
    use crate::hw::nv::arch::PcasAction;
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    assert_eq!(b.pcas_action(), PcasAction::INVALIDATE_COPY_SCHEDULE);
    assert!(b.set_pcas_action(PcasAction::PREFETCH).is_err());
    b.set_pcas_action(PcasAction::PREFETCH_SCHEDULE).unwrap();
    assert_eq!(b.pcas_action(), PcasAction::PREFETCH_SCHEDULE);
    run_add(&dev, 2, 16);
}
