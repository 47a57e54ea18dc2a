//! Kernels: mock code objects of hand-built UOp kernels, run by the software GPU on the UOp
//! interpreter through the emulated KFD, results checked on the host.

use super::*;
use crate::hcq::{HcqBackend, HcqLaunch, HwComputeQueue, HwQueue};
use crate::hw::amd::elf::{load_code_object, write_amdgpu_elf, AmdgpuElf};
use crate::mockgpu::amdgpu::object::{mock_code_object, mock_descriptor, MockBlob};
use crate::runtime::amd::program::AmdProgram;

fn run_add(dev: &Arc<AmdDevice>, groups: usize, local: usize) {
    let n = groups * local;
    let prg = load(
        dev,
        "E_add",
        &add_uops(groups as i64, local as i64, dtypes::float32),
    );
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(4 * n, &BufferOptions::default()).unwrap())
        .collect();
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    a.copyin(&bufs[1], &f32_bytes(&x)).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&y)).unwrap();
    let t = prg
        .call(&bufs, &[], Some([groups, 1, 1]), Some([local, 1, 1]), true)
        .unwrap();
    assert!(t.is_some_and(|s| s > 0.0), "wait=true returns the GPU time");
    let mut out = vec![0u8; 4 * n];
    a.copyout(&mut out, &bufs[0]).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(f32s(&out), want);
}

#[test]
fn add_kernel_runs_through_the_emulator() {
    let (dev, _emu) = one_gpu();
    run_add(&dev, 4, 32);
    run_add(&dev, 3, 7);
}

#[test]
fn add_kernel_on_gfx1030_reads_kernargs_after_the_scratch_descriptor() {
    // gfx10 kernels enable the private segment buffer: the kernarg pointer is in s[4:5] and the
    // device sets up scratch for the descriptor.
    let (p, _emu) = mock_process(1, "gfx1030");
    let dev = open(&p, 0);
    run_add(&dev, 2, 64);
}

#[test]
fn kernel_with_variables_and_many_launches() {
    let (dev, _emu) = one_gpu();
    let prg = load(&dev, "E_axpb", &axpb_uops(2, 16));
    let a = HcqAllocator::new(dev.clone());
    let (out, inp) = (
        a.alloc(128, &BufferOptions::default()).unwrap(),
        a.alloc(128, &BufferOptions::default()).unwrap(),
    );
    let x: Vec<i32> = (0..32).map(|i| i - 10).collect();
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.copyin(&inp, &xb).unwrap();
    let bufs = [out.clone(), inp];
    // Variables go in name order: (m, n).
    for k in 0..20 {
        prg.call(&bufs, &[-k, k], Some([2, 1, 1]), Some([16, 1, 1]), false)
            .unwrap();
    }
    let mut o = vec![0u8; 128];
    a.copyout(&mut o, &out).unwrap();
    let got: Vec<i32> = o
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let want: Vec<i32> = x.iter().map(|v| v * 19 - 19).collect();
    assert_eq!(got, want, "the last of 20 queued launches wins");
    let e = prg
        .call(&bufs, &[1], Some([2, 1, 1]), Some([16, 1, 1]), false)
        .unwrap_err();
    assert!(e.message().contains("kernarg size mismatch"), "{e}");
}

#[test]
fn relocatable_code_object_loads_and_runs() {
    // The same mock kernel written as an ET_REL object: the loader applies R_AMDGPU_REL64 to the
    // descriptor's code offset, so the program address still points at the blob.
    let (dev, _emu) = one_gpu();
    let t = dev.backend().target();
    let uops = add_uops(1, 32, dtypes::float32);
    let text = crate::codegen::uop_serial::serialize(&uops).unwrap();
    let dyn_obj = mock_code_object(t, "E_rel", &text, None).unwrap();
    let img = load_code_object(&dyn_obj, "E_rel").unwrap();
    let blob = MockBlob::decode(&img.image[0x200..]).unwrap();
    let rel = write_amdgpu_elf(&AmdgpuElf {
        name: "E_rel",
        e_flags: t.elf_mach,
        relocatable: true,
        descriptor: mock_descriptor(t, 24, 0).to_bytes(),
        text: &blob.encode(),
    });
    let prg = Arc::new(AmdProgram::load(dev.backend(), "E_rel", &rel).unwrap());
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(128, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.5; 32])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 32])).unwrap();
    dev.call(&prg, &bufs, &[], [1, 1, 1], [32, 1, 1], false)
        .unwrap();
    let mut out = vec![0u8; 128];
    a.copyout(&mut out, &bufs[0]).unwrap();
    assert_eq!(f32s(&out), vec![3.5f32; 32]);
}

#[test]
fn raw_compute_queue_chains_verbs_and_patches() {
    // exec through a hand-built queue, then the same queue patched (new kernargs, new dims,
    // new signal value) and submitted again.
    let (dev, _emu) = one_gpu();
    let t = dev.backend().target();
    let text = crate::codegen::uop_serial::serialize(&add_uops(1, 8, dtypes::float32)).unwrap();
    let obj = mock_code_object(t, "E_raw", &text, None).unwrap();
    let prg = Arc::new(AmdProgram::load(dev.backend(), "E_raw", &obj).unwrap());
    let a = HcqAllocator::new(dev.clone());
    let bufs: Vec<RawBuf> = (0..3)
        .map(|_| a.alloc(64, &BufferOptions::default()).unwrap())
        .collect();
    a.copyin(&bufs[1], &f32_bytes(&[1.0; 16])).unwrap();
    a.copyin(&bufs[2], &f32_bytes(&[2.0; 16])).unwrap();
    a.synchronize().unwrap();
    // Kernargs in a host-visible buffer of our own.
    let ka = Arc::new(
        dev.backend()
            .alloc(
                256,
                &BufferOptions {
                    cpu_access: true,
                    ..Default::default()
                },
            )
            .unwrap(),
    );
    let view = crate::hcq::HcqBuffer::cpu(&*ka).unwrap();
    for (i, b) in bufs.iter().enumerate() {
        view.write_u64(8 * i, b.addr).unwrap();
    }
    // Second kernarg set: outputs into the first half, shifted by 8 floats.
    for (i, b) in bufs.iter().enumerate() {
        view.write_u64(64 + 8 * i, b.addr + 32).unwrap();
    }
    let done = dev.new_signal(0).unwrap();
    let mut q = dev.backend().compute_queue();
    let first = HcqLaunch::in_memory(ka.clone(), 0, [1, 1, 1], [8, 1, 1]).unwrap();
    let ex = q
        .memory_barrier()
        .unwrap()
        .exec(&prg, &first)
        .unwrap()
        .into_patch();
    let sp = q.signal(&done, 1).unwrap().into_patch();
    q.submit(dev.backend()).unwrap();
    dev.wait_signal(&done, 1, "raw exec").unwrap();
    let second = HcqLaunch::in_memory(ka, 64, [1, 1, 1], [4, 1, 1]).unwrap();
    q.update_exec(&ex, &second).unwrap();
    q.update_signal(&sp, None, Some(2)).unwrap();
    q.submit(dev.backend()).unwrap();
    dev.wait_signal(&done, 2, "patched exec").unwrap();
    let mut out = vec![0u8; 64];
    a.copyout(&mut out, &bufs[0]).unwrap();
    let got = f32s(&out);
    assert_eq!(
        got[..12],
        [3.0f32; 12],
        "8 from the first launch, 4 from the patched one"
    );
    assert_eq!(got[12..], [0.0f32; 4]);
}
