//! Faults the emulator injects on purpose (issue 13) into the NVIDIA driver: an RM_ALLOC that RM
//! refuses in the middle of a buffer allocation or of a kernel load, and a UVM mapping that fails on the second GPU of
//! a cross-device transfer. Each must produce an error naming the call, leak no RM handle or
//! virtual address range, and leave the devices working.

use super::faults::{check_recovered, warm};
use super::*;
use crate::sys::nv::common::NV_ERR_NO_MEMORY;

#[test]
fn an_rm_alloc_failing_mid_alloc_is_named_and_leaks_no_handle_or_va() {
    let (dev, emu, baseline) = warm();
    let (a, b) = alloc(&dev, 64);
    drop(b);
    dev.synchronize().unwrap();
    let p = dev.backend().process().clone();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // A 1 MiB VRAM buffer: its VA is reserved, then RM_ALLOC of the memory object is refused.
    emu.fail_nv_ioctl("NV_ESC_RM_ALLOC", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let e = a.alloc(1 << 20, &BufferOptions::default()).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("NV_ESC_RM_ALLOC") && m.contains("NV_ERR_NO_MEMORY"),
        "{e}"
    );
    assert!(m.contains("injected failure"), "{e}");
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    // The fault was one-shot: the same allocation works now.
    let ok = a.alloc(1 << 20, &BufferOptions::default()).unwrap();
    drop(ok);
    drop(a);
    check_recovered(&dev, &emu, baseline);
}

#[test]
fn a_failing_peer_mapping_fails_the_nv_transfer_and_both_gpus_work_after() {
    let (p, emu) = mock_nv(2, "hopper", "");
    let (d0, d1) = (open(&p, 0), open(&p, 1));
    let (a0, x) = alloc(&d0, 1 << 16);
    let (a1, y) = alloc(&d1, 1 << 16);
    let data: Vec<u8> = (0..1 << 16).map(|i| (i * 13 % 251) as u8).collect();
    a0.copyin(&x, &data).unwrap();
    a0.synchronize().unwrap();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // Across GPUs the source's device maps the destination (on GPU 1) through UVM: that fails.
    emu.fail_nv_ioctl("UVM_MAP_EXTERNAL_ALLOCATION", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let e = a1.transfer(&y, &x, 1 << 16).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("UVM_MAP_EXTERNAL_ALLOCATION") && m.contains("NV_ERR_NO_MEMORY"),
        "{e}"
    );
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    assert_eq!((d0.pending_count(), d1.pending_count()), (0, 0));
    // The same transfer works once the fault is gone, and GPU 1 holds the data.
    a1.transfer(&y, &x, 1 << 16).unwrap();
    let mut out = vec![0u8; 1 << 16];
    a1.copyout(&mut out, &y).unwrap();
    assert!(out == data, "NV -> NV:1 transfer after the fault differs");
    let mut back = vec![0u8; 1 << 16];
    a0.copyout(&mut back, &x).unwrap();
    assert!(back == data, "GPU 0 still works");
}

#[test]
fn an_rm_alloc_failing_mid_kernel_load_leaks_nothing() {
    let (dev, emu, baseline) = warm();
    let p = dev.backend().process().clone();
    let before = (emu.nv_object_count(), p.va_free_bytes());
    // Loading a program allocates its code (and constant) memory: RM refuses the first RM_ALLOC.
    emu.fail_nv_ioctl("NV_ESC_RM_ALLOC", 0, NV_ERR_NO_MEMORY)
        .unwrap();
    let b = dev.backend();
    let src = MockNvRenderer::new()
        .render("E_inj", &add_uops(1, 8, crate::dtype::dtypes::float32))
        .unwrap();
    let lib = MockNvCompiler::new(b.classes().arch, b.sm())
        .compile(&src)
        .unwrap();
    let e = NvRuntime::new(dev.clone())
        .load("E_inj", &lib)
        .err()
        .expect("the load must fail");
    assert!(
        e.message().contains("NV_ESC_RM_ALLOC") && e.message().contains("injected failure"),
        "{e}"
    );
    assert_eq!(
        (emu.nv_object_count(), p.va_free_bytes()),
        before,
        "no RM handle and no VA range left behind"
    );
    check_recovered(&dev, &emu, baseline);
}
