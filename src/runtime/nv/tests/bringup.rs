//! Bring-up on the emulator: every bring-up step on Hopper (580 and 570 driver families) and
//! Ada, the objects it leaves, and a clean teardown.

use super::*;
use crate::hcq::HcqSignal;
use crate::hw::nv::arch::QmdVersion;

#[test]
fn h200_brings_up_on_the_580_family() {
    let (p, emu) = mock_nv(1, "hopper", "");
    assert_eq!(p.family().major(), 580);
    let dev = open(&p, 0);
    let b = dev.backend();
    assert_eq!(b.classes().arch.compute_class, 0xCBC0);
    assert_eq!(b.classes().copy.class, 0xC8B5);
    assert_eq!(b.classes().channel.class, 0xC86F);
    assert_eq!(b.classes().usermode, 0xC661);
    assert_eq!(b.classes().arch.qmd_version, QmdVersion::V04_00);
    assert_eq!(b.sm(), 90);
    let (c, d) = b.tokens().unwrap();
    assert_ne!(c, d);
    // USERD read 0/0 before the first submit; both channels ran their setup pushbuffer and the
    // first signal round trip.
    assert_eq!(b.first_userd(), [(0, 0), (0, 0)]);
    assert_eq!(b.gp_puts().unwrap(), (1, 1));
    let chans = emu.nv_channels(0);
    assert_eq!(chans.len(), 2);
    assert!(chans.iter().all(|c| c.scheduled));
    let (lo, hi) = p.low_window();
    assert!(hi <= 1 << 40 && lo >= 0x10_0000_0000, "{lo:#x}..{hi:#x}");
    // The timeline works.
    dev.synchronize().unwrap();
    let s = dev.new_signal(5).unwrap();
    assert_eq!(s.value().unwrap(), 5);
}

#[test]
fn the_570_family_and_ada_bring_up() {
    let (p, _emu) = mock_nv(1, "hopper", "570.86.16");
    assert_eq!(p.family().major(), 570);
    let dev = open(&p, 0);
    dev.synchronize().unwrap();
    let (p, _emu) = mock_nv(1, "ada", "");
    let dev = open(&p, 0);
    let b = dev.backend();
    assert_eq!(b.classes().arch.qmd_version, QmdVersion::V03_00);
    assert_eq!(b.sm(), 89);
}

#[test]
fn a_failing_step_is_named() {
    // No NVIDIA driver in this emulated process: the first step fails and says so.
    let emu = crate::mockgpu::nvgpu::attach::mock_driver(EmuConfig {
        nv_count: 0,
        ..Default::default()
    })
    .unwrap();
    let e = NvProcess::new(Arc::new(emu)).err().unwrap();
    assert!(
        e.message()
            .contains("NV bring-up step control fd + CHECK_VERSION_STR"),
        "{e}"
    );
}

#[test]
fn a_kernel_runs_on_the_570_family() {
    use crate::dtype::dtypes;
    let (p, _emu) = mock_nv(1, "hopper", "570.86.16");
    let dev = open(&p, 0);
    let prg = load(&dev, "E_570", &add_uops(1, 16, dtypes::float32));
    let (a, _) = alloc(&dev, 64);
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(64, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.5; 16])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 16])).unwrap();
    prg.call(&bufs, &[], Some([1, 1, 1]), Some([16, 1, 1]), true)
        .unwrap();
    let mut o = vec![0u8; 64];
    a.copyout(&mut o, &bufs[0]).unwrap();
    assert_eq!(f32s(&o), vec![3.5f32; 16]);
}

#[test]
fn a_missing_gpu_index_is_an_error_naming_the_count() {
    let (p, _emu) = mock_nv(1, "hopper", "");
    let e = open_nv_device(&p, 3, "NV:3").err().unwrap();
    assert!(e.message().contains("CARD_INFO lists 1 GPU"), "{e}");
}

#[test]
fn dropping_devices_returns_their_memory() {
    let (p, _emu) = mock_nv(1, "hopper", "");
    let before = p.low_free_bytes();
    {
        let dev = open(&p, 0);
        let (_a, _b) = alloc(&dev, 1 << 20);
        dev.synchronize().unwrap();
    }
    assert!(p.take_errors().is_empty());
    assert_eq!(
        p.low_free_bytes(),
        before,
        "every low-window range came back"
    );
}
